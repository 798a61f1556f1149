"""Steerability study: how the accessibility slope of a TinyCausalLM grows with capacity.

For each configuration (width, depth, training steps, training corpus) a
:class:`~intrinsic_rank.nn.TinyCausalLM` is trained with
``scripts/train_default_model.py``'s code and its reachable-length slope is
measured with :func:`intrinsic_rank.experiments.accessibility_curves`, the
protocol of ``intrinsic-rank reach``; the bounds use the paper's fp16
convention (``precision="float16"``, ``eps = 2^-10``).

Two protocols:

* ``screen`` -- m = 1, 2, 3; 8 targets per point; ``quick`` cramming (600
  steps, patience 200). Cheap; it under-estimates ``n50`` somewhat.
* ``final`` -- m = 1 ... 5; 20 targets per point (the paper's sizes); the full
  protocol (3000 steps, patience 500).

The study is seeded and resumable: every finished (configuration, protocol)
appends one JSON row to ``<out-dir>/rows.jsonl`` and is skipped on the next
run; trained models are kept as ``<out-dir>/models/<name>.pt``.

Usage::

    python scripts/steerability_study.py                       # screen every config
    python scripts/steerability_study.py --protocol final --only d64-L2-induction-3000
    python scripts/steerability_study.py --plot docs/_static/steerability.png

Checkpoints: the ``-250`` and ``-500`` configurations are checkpoints of the
1000-step run (the cosine schedule of a 1000-step run, stopped early), not
runs of their own; ``d64-L2-induction-3000`` is a separate 3000-step run, the
configuration of the shipped default model.
"""

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "train_default_model", os.path.join(HERE, "train_default_model.py"))
tdm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tdm)

from intrinsic_rank import ReachabilityEstimator  # noqa: E402
from intrinsic_rank.datasets import make_random_targets  # noqa: E402
from intrinsic_rank.experiments import accessibility_curves  # noqa: E402
from intrinsic_rank.nn import save_tiny_lm  # noqa: E402

VOCAB = 64


def _config(d=64, layers=2, corpus="induction", steps=1000, max_segment=16, lr=1e-3,
            checkpoints=(), group="width"):
    name = f"d{d}-L{layers}-{corpus}" + (f"{max_segment}" if max_segment != 16 else "") \
        + (f"-lr{lr:g}" if lr != 1e-3 else "") + f"-{steps}"
    return dict(name=name, d_model=d, n_layers=layers, corpus=corpus, steps=steps,
                max_segment=max_segment, lr=lr, checkpoints=list(checkpoints), group=group)


#: the configurations, in the order they are trained (most informative first)
CONFIGS = [
    _config(64, 2, "induction", 1000, checkpoints=(250, 500), group="baseline"),
    _config(128, 2, "induction", 1000, group="width"),
    _config(32, 2, "induction", 1000, group="width"),
    _config(64, 4, "induction", 1000, group="depth"),
    _config(64, 2, "induction", 1000, max_segment=64, group="corpus"),
    _config(64, 2, "mixed", 1000, group="corpus"),
    _config(64, 2, "markov", 1000, group="corpus"),
    _config(64, 2, "induction", 3000, group="steps"),
    _config(64, 2, "induction", 1000, lr=3e-3, group="lr"),
    _config(128, 2, "induction", 3000, group="best"),
    _config(128, 2, "induction", 6000, group="best"),
    _config(192, 2, "induction", 3000, group="best"),
]

PROTOCOLS = dict(
    screen=dict(n_memory=(1, 2, 3), n_targets=8, quick=True),
    final=dict(n_memory=(1, 2, 3, 4, 5), n_targets=20, quick=False),
)


def _all_names():
    names = []
    for c in CONFIGS:
        names.append(c["name"])
        for k in c["checkpoints"]:
            names.append(c["name"].rsplit("-", 1)[0] + f"-{k}")
    return names


def _done(path):
    if not os.path.exists(path):
        return set()
    with open(path) as handle:
        return {(r["name"], r["protocol"]) for r in map(json.loads, handle) if r}


def _train(config, model_dir):
    """Train ``config`` (and save its checkpoints) unless its file exists; returns seconds."""
    out = os.path.join(model_dir, config["name"] + ".pt")
    info = out + ".json"
    if os.path.exists(out) and os.path.exists(info):
        with open(info) as handle:
            return json.load(handle)["seconds"]
    stem = config["name"].rsplit("-", 1)[0]
    if config["name"] == "d64-L2-induction-3000":
        # the shipped default model is this configuration, trained by the same code
        from intrinsic_rank.nn import load_default_model

        shipped = load_default_model()
        save_tiny_lm(shipped, out, shipped.metadata)
        with open(info, "w") as handle:
            json.dump(dict(seconds=shipped.metadata["seconds"], steps=3000,
                           final_loss=shipped.metadata["final_loss"], shipped=True), handle)
        return shipped.metadata["seconds"]

    def callback(step, model):
        if step in config["checkpoints"]:
            path = os.path.join(model_dir, f"{stem}-{step}.pt")
            save_tiny_lm(model, path, dict(checkpoint_of=config["name"], steps=step))
            with open(path + ".json", "w") as handle:
                json.dump(dict(seconds=time.perf_counter() - start, steps=step), handle)

    start = time.perf_counter()
    model, losses, seconds, metadata = tdm.train(
        d_model=config["d_model"], n_layers=config["n_layers"], corpus=config["corpus"],
        max_segment=config["max_segment"], steps=config["steps"], lr=config["lr"],
        vocab_size=VOCAB, seed=0, callback=callback)
    save_tiny_lm(model, out, metadata)
    with open(info, "w") as handle:
        json.dump(dict(seconds=seconds, steps=config["steps"],
                       final_loss=float(losses[-100:].mean())), handle)
    return seconds


def _measure(name, path, protocol, train_seconds, config):
    settings = PROTOCOLS[protocol]
    tic = time.perf_counter()
    result = accessibility_curves(model=path, lengths="auto", precision="float16",
                                  random_state=0, **settings)
    d = config["d_model"]
    slope = result.slope["slope"]
    # the refined bounds (cone, decoder cells) under the paper's fp16 convention
    geometry = ReachabilityEstimator(model=path, n_memory=1, max_epochs=1, patience=1,
                                     precision="float16", random_state=0).fit(
        make_random_targets(2, 4, VOCAB, random_state=0))
    refined = {row["bound"]: row["slope_bound"] for row in geometry.geometry_.table
               if row["precision_convention"] == "paper"}
    capacity = 16 * d / np.log2(VOCAB)
    with open(path + ".json") as handle:
        loss = json.load(handle).get("final_loss")
    return dict(
        name=name, protocol=protocol, group=config["group"], d_model=d,
        n_layers=config["n_layers"], corpus=config["corpus"],
        max_segment=config["max_segment"], lr=config["lr"], steps=config["steps"],
        slope=slope, intercept=result.slope["intercept"], r2=result.slope["r2"],
        n50=[f["n50"] for f in result.n50], capacity=capacity,
        capacity_use=slope / capacity, radius=result.bound["radius"],
        fp16_ball_bound=result.bound["slope_bound"],
        fp16_box_bound=result.bound["box_slope_bound"],
        fp16_ball_ratio=result.bound["ratio"], fp16_bounds=refined,
        cell_decay=geometry.geometry_.decay["closed_form"], train_seconds=round(train_seconds, 1),
        final_loss=loss, measure_seconds=round(time.perf_counter() - tic, 1),
        file_bytes=os.path.getsize(path), settings={k: v for k, v in settings.items()},
        threads=torch.get_num_threads(),
    )


def run(out_dir, protocol, only=None):
    model_dir = os.path.join(out_dir, "models")
    os.makedirs(model_dir, exist_ok=True)
    rows = os.path.join(out_dir, "rows.jsonl")
    done = _done(rows)
    for config in CONFIGS:
        names = [config["name"]] + [config["name"].rsplit("-", 1)[0] + f"-{k}"
                                    for k in config["checkpoints"]]
        if only and not set(names) & set(only):
            continue
        if all((n, protocol) in done for n in names if not only or n in only):
            continue
        train_seconds = _train(config, model_dir)
        for name in names:
            if (name, protocol) in done or (only and name not in only):
                continue
            path = os.path.join(model_dir, name + ".pt")
            with open(path + ".json") as handle:
                seconds = json.load(handle)["seconds"]
            cfg = dict(config, steps=int(name.rsplit("-", 1)[1]))
            row = _measure(name, path, protocol, seconds if name != config["name"]
                           else train_seconds, cfg)
            with open(rows, "a") as handle:
                handle.write(json.dumps(row) + "\n")
            print(f"{name} [{protocol}]: slope {row['slope']:.2f}, R² {row['r2']:.3f}, "
                  f"capacity use {100 * row['capacity_use']:.1f}%, fp16 ball ratio "
                  f"{row['fp16_ball_ratio']:.1f} (train {row['train_seconds']:.0f} s, "
                  f"measure {row['measure_seconds']:.0f} s)", flush=True)


def _log_axis(ax, values, base=10):
    """A log x axis whose ticks are exactly ``values``, labelled as plain numbers."""
    import matplotlib.ticker

    ticks = sorted(values)
    ax.set_xscale("log", base=base)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def plot(out_dir, path):
    """Slope against width (left) and against training steps (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(out_dir, "rows.jsonl")) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    screen = {r["name"]: r for r in rows if r["protocol"] == "screen"}
    final = {r["name"]: r for r in rows if r["protocol"] == "final"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8))
    plain = [r for r in screen.values() if r["n_layers"] == 2 and r["corpus"] == "induction"
             and r["max_segment"] == 16 and r["lr"] == 1e-3]
    width = sorted((r for r in plain if r["steps"] == 1000),
                   key=lambda r: r["d_model"])
    left.plot([r["d_model"] for r in width], [r["slope"] for r in width], "o-", color="C0",
              label="2 layers, induction, 1000 steps")
    for r, marker, color in ((screen.get("d64-L4-induction-1000"), "s", "C1"),
                             (screen.get("d64-L2-induction64-1000"), "^", "C2"),
                             (screen.get("d64-L2-mixed-1000"), "D", "C3"),
                             (screen.get("d64-L2-markov-1000"), "v", "C4")):
        if r is not None:
            label = {"d64-L4-induction-1000": "4 layers (induction, 1000 steps)",
                     "d64-L2-induction64-1000": "segments up to 64 (2 layers)",
                     "d64-L2-mixed-1000": "induction + Markov text (2 layers)",
                     "d64-L2-markov-1000": "Markov text only (2 layers)"}[r["name"]]
            left.plot([r["d_model"]], [r["slope"]], marker, color=color, label=label)
    _log_axis(left, {r["d_model"] for r in rows}, base=2)
    left.set_xlabel("width d")
    left.set_ylabel("measured slope (tokens per prompt vector)")
    left.set_title("Slope against width (screening protocol)")
    wide3000 = sorted((r for r in plain if r["steps"] == 3000), key=lambda r: r["d_model"])
    if wide3000:
        left.plot([r["d_model"] for r in wide3000], [r["slope"] for r in wide3000], "o--",
                  mfc="none", color="C0", label="2 layers, induction, 3000 steps")
    lr = screen.get("d64-L2-induction-lr0.003-1000")
    if lr is not None:
        left.plot([64], [lr["slope"]], "x", color="C5", label="lr 3e-3 (1000 steps)")
    left.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                ncol=2)
    for d, color in ((64, "C0"), (128, "C1")):
        steps = sorted((r for r in plain if r["d_model"] == d), key=lambda r: r["steps"])
        if steps:
            right.plot([r["steps"] for r in steps], [r["slope"] for r in steps], "o-",
                       color=color, label=f"d = {d}, 2 layers, induction (screening)")
    fin = [r for r in final.values()]
    if fin:
        right.plot([r["steps"] for r in fin], [r["slope"] for r in fin], "*", ms=12,
                   color="C3", label="final protocol (m = 1-5, 20 targets)")
    right.axhline(10, color="grey", ls="--", lw=1,
                  label="target: 10 tokens per vector (6% of capacity)")
    left.axhline(10, color="grey", ls="--", lw=1)
    _log_axis(right, {r["steps"] for r in plain})
    right.set_xlabel("training steps (batch 32 x 128 tokens)")
    right.set_ylabel("measured slope (tokens per prompt vector)")
    right.set_title("Slope against training steps")
    right.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    for ax in (left, right):
        ax.set_ylim(0, max(11, ax.get_ylim()[1]))
    fig.suptitle("Steerability of TinyCausalLM (|V| = 64): reachable tokens per prompt vector")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def table(out_dir):
    """The study's rows as a markdown table (one row per configuration and protocol)."""
    with open(os.path.join(out_dir, "rows.jsonl")) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    lines = ["| configuration | protocol | d | layers | corpus | steps | lr | slope | intercept "
             "| R² | capacity use | fp16 ball bound | fp16 ball ratio | final loss | train (s) "
             "| file (MB) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        corpus = r["corpus"] + (f" (segments ≤ {r['max_segment']})"
                                if r["corpus"] != "markov" else "")
        loss = "" if r["final_loss"] is None else f"{r['final_loss']:.2f}"
        lines.append(
            f"| {r['name']} | {r['protocol']} | {r['d_model']} | {r['n_layers']} | {corpus} "
            f"| {r['steps']} | {r['lr']:g} | {r['slope']:.2f} | {r['intercept']:.2f} "
            f"| {r['r2']:.3f} | {100 * r['capacity_use']:.1f}% | {r['fp16_ball_bound']:.0f} "
            f"| {r['fp16_ball_ratio']:.1f} | {loss} | {r['train_seconds']:.0f} "
            f"| {r['file_bytes'] / 1e6:.2f} |")
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(HERE, "..", "runs", "steerability"))
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="screen")
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"configuration names (known: {', '.join(_all_names())})")
    parser.add_argument("--plot", default=None, help="write the figure to this PNG and stop")
    parser.add_argument("--table", action="store_true",
                        help="print the rows as a markdown table and stop")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.plot:
        return plot(args.out_dir, args.plot)
    if args.table:
        return table(args.out_dir)
    if args.only:
        unknown = set(args.only) - set(_all_names())
        if unknown:
            sys.exit(f"unknown configuration(s): {', '.join(sorted(unknown))}")
    run(args.out_dir, args.protocol, args.only)


if __name__ == "__main__":
    main()
