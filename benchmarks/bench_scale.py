"""Benchmark: r* at researcher sizes — time per epoch, time to r* and peak memory.

What it measures (every fit in its own subprocess, so that its peak resident
memory, ``VmHWM``, is its own):

1. **Time to r* against two baselines, in the same run**, on an attention teacher
   with known ``r*`` (:func:`intrinsic_rank.datasets.make_attention_task`):
   ``GridSearchCV`` over ``rank`` with its default ``cv`` (5 folds, one
   single-rank fit per rank and fold: what a scikit-learn user would run; its
   ``r*`` is the estimator's own rule applied to its cross-validated risks), the
   full batched grid ``rank_grid=[1..d]``, ``rank_grid="auto"`` and ``rank_grid="auto"``
   with ``early_stopping=True``. Printed: wall time, rank-epochs trained,
   ``r*`` of each, and the ratios. ``r*`` must agree.
2. **Scaling curves**: time per epoch and peak memory against ``n``, ``L``,
   ``d`` and the number of ranks ``R`` (a few epochs each, float32 data built
   chunk by chunk so the benchmark itself holds one float32 copy), with the
   fitted growth exponents (log-log least squares).
3. **The equal-work limit of batching**: per-step time ``t(R) = a + b R`` fitted
   on the ``R`` curve; ``a`` is the per-step fixed cost batching saves, ``b`` the
   arithmetic per rank it cannot. One fit per rank against one batched fit of
   ``R`` ranks at equal work is at most ``(a + b) / b`` faster.
4. **Memory at n = 50,000** (``d = 64``, ``L = 32``; not with ``--quick``): one
   epoch of the coarse grid, peak RSS against the target ``3 x`` the float32
   size of ``X`` and ``Y`` plus a fixed overhead (``FIXED_OVERHEAD_MB``).

Memory is reported as the fit process's peak RSS above its RSS after importing
torch and the package (``peak_above_import_mb``: the caller's float32 data and
the benchmark's own temporaries building it, the estimator's copies and
temporaries, torch's per-step activations). The n = 50,000 check counts the
fit's peak above the RSS just before ``fit`` plus the float32 size of the data
(what a caller holding ``X`` and ``Y`` in float32 sees).

Threads: torch runs on ``--threads`` (default 1) intra-op threads; the machine
this was written on is shared, so every timing is noisy: the load average is
printed before each section.

Run::

    OMP_NUM_THREADS=1 python benchmarks/bench_scale.py --quick   # smoke run (~1 min)
    OMP_NUM_THREADS=1 python benchmarks/bench_scale.py           # full run (tens of minutes)
    python benchmarks/bench_scale.py --device cuda --out scale_cuda.json
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

FIXED_OVERHEAD_MB = 500
MEMORY_FACTOR = 3.0
AUTO_WORK_TARGET = 4.0


# -- the worker: one fit in this process ------------------------------------------
def _rss_mb(key="VmRSS"):
    """The RSS (``VmRSS``) or its peak (``VmHWM``) in MB, both from ``/proc``: the kernel's one
    count, so a peak is never below an RSS read before it (``ru_maxrss`` can lag)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def float32_teacher(n, L, d, rank, seed, noise=0.1, chunk=4096):
    """A softmax teacher of rank ``rank``, built in float32 a chunk at a time.

    ``Y = softmax(X W_Q W_K^T X^T) X + noise``, ``W_Q, W_K`` of shape ``(d, rank)``
    with entries ``N(0, 3 / d)``: peaked attention whose kernel has rank ``rank``.
    """
    import torch

    rng = np.random.default_rng(seed)
    scale = np.sqrt(3.0 / d)
    Wq = torch.from_numpy((rng.standard_normal((d, rank)) * scale).astype(np.float32))
    Wk = torch.from_numpy((rng.standard_normal((d, rank)) * scale).astype(np.float32))
    X = np.empty((n, L, d), dtype=np.float32)
    Y = np.empty((n, L, d), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            x = rng.standard_normal((m, L, d), dtype=np.float32)
            xt = torch.from_numpy(x)
            scores = (xt @ Wq) @ (xt @ Wk).transpose(1, 2)
            y = torch.softmax(scores, -1) @ xt
            X[start:start + m] = x
            Y[start:start + m] = y.numpy() + noise * rng.standard_normal((m, L, d),
                                                                         dtype=np.float32)
    return X, Y


def worker(spec):
    import torch

    torch.set_num_threads(spec["threads"])
    from intrinsic_rank import AttentionRankEstimator
    from intrinsic_rank.datasets import make_attention_task

    import warnings

    warnings.simplefilter("ignore")
    import_rss = _rss_mb()
    if spec["data"] == "teacher":  # float64, as a user of make_attention_task has it
        X, Y = make_attention_task(spec["kind"], n_samples=spec["n"], seq_len=spec["L"],
                                   d=spec["d"], rank=spec["r_star"], noise=0.1,
                                   random_state=spec["seed"])
    else:
        X, Y = float32_teacher(spec["n"], spec["L"], spec["d"], spec["r_star"], spec["seed"])
    data_f32_mb = (X.size + Y.size) * 4 / 2**20
    params = dict(attention=spec["kind"], max_epochs=spec["epochs"], random_state=spec["seed"],
                  device=spec["device"])
    params.update(spec.get("params", {}))
    # untimed warm-up: the first optimiser of a process lazily imports torch._dynamo
    AttentionRankEstimator(attention=spec["kind"], rank_grid=[1], max_epochs=1,
                           device=spec["device"]).fit(X[:32], Y[:32])
    before = _rss_mb()
    start = time.perf_counter()
    if spec["how"] == "gridsearch":
        from sklearn.model_selection import GridSearchCV

        from intrinsic_rank.estimators._selection import select_rank

        grid = list(range(1, spec["d"] + 1)) if spec["rank_grid"] == "full" else spec["rank_grid"]
        search = GridSearchCV(AttentionRankEstimator(**params), {"rank": grid},
                              scoring="neg_mean_squared_error" if Y.ndim < 3 else _flat_mse(),
                              refit=False, error_score="raise")
        search.fit(X, Y)
        seconds = time.perf_counter() - start
        order = np.argsort(search.cv_results_["param_rank"].astype(int))
        risk = -np.asarray(search.cv_results_["mean_test_score"], dtype=float)[order]
        ranks = np.asarray(search.cv_results_["param_rank"].astype(int))[order]
        variance = float(np.mean(np.var(Y, axis=0)))
        selection = select_rank(ranks, risk, variance, AttentionRankEstimator().tol)
        rank = int(ranks[selection["index"]])
        best = int(ranks[int(np.argmin(risk))])
        folds = search.n_splits_
        rank_epochs = folds * len(grid) * spec["epochs"]
        epochs = spec["epochs"]
        extra = dict(best_rank=best, folds=folds)
    else:
        ranks = spec["rank_grid"]
        if ranks == "full":
            ranks = list(range(1, spec["d"] + 1))
        est = AttentionRankEstimator(rank_grid=ranks, **params).fit(X, Y)
        seconds = time.perf_counter() - start
        rank, rank_epochs, epochs = est.rank_, est.rank_epochs_, est.n_epochs_
        durations = [row["dur"] for row in est.history_]
        n_train = int(round(0.8 * spec["n"]))
        extra = dict(rounds=est.search_rounds_,
                     seconds_per_epoch=float(np.median(durations[1:] or durations)),
                     steps_per_epoch=-(-n_train // est.net_.batch_size))
    peak = _rss_mb("VmHWM")
    return dict(spec, seconds=seconds, rank=rank, rank_epochs=rank_epochs, epochs=epochs,
                import_rss_mb=import_rss, rss_before_fit_mb=before, peak_rss_mb=peak,
                peak_above_import_mb=peak - import_rss, data_f32_mb=data_f32_mb, **extra)


def _flat_mse():
    from sklearn.metrics import make_scorer

    def flat(y_true, y_pred):
        n = len(y_true)
        return float(np.mean((np.reshape(y_true, (n, -1)) - np.reshape(y_pred, (n, -1))) ** 2))

    return make_scorer(flat, greater_is_better=False)


def run(spec, timeout=3600):
    """One fit in a fresh subprocess; its JSON record."""
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]))
    result = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                            capture_output=True, text=True, env=env, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"worker failed for {spec}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# -- the parent -------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", default="softmax", choices=["linear", "softmax"])
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs of the time-to-r* runs (default 150; 20 with --quick)")
    parser.add_argument("--out", default=None, help="write every record to this JSON file")
    parser.add_argument("--plot", default=None,
                        help="folder for the PNG curves (time and memory against n, L, d, R)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["baselines", "rank_epochs_64", "curves", "big"],
                        help="sections to skip")
    parser.add_argument("--axes", nargs="*", default=["n", "L", "d", "R"],
                        choices=["n", "L", "d", "R"],
                        help="which scaling curves to measure (default all four)")
    parser.add_argument("--merge", default=None,
                        help="a previous --out JSON whose curves fill the axes not measured "
                             "now (for the plot)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def load():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def exponent(xs, ys):
    """Slope of log y against log x (least squares)."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def baselines(args, common):
    if args.quick:
        task = dict(n=256, L=4, d=6, r_star=2, epochs=args.epochs or 20)
    else:
        task = dict(n=2048, L=8, d=16, r_star=4, epochs=args.epochs or 150)
    print(f"\n== time to r*: {args.kind} teacher n={task['n']} L={task['L']} d={task['d']} "
          f"r*={task['r_star']} epochs={task['epochs']}  (load average {load()})")
    base = dict(common, data="teacher", **task)
    runs = {
        "gridsearch_cv5": dict(base, how="gridsearch", rank_grid="full"),
        "full_grid": dict(base, how="fit", rank_grid="full"),
        "auto": dict(base, how="fit", rank_grid="auto"),
        "auto_early": dict(base, how="fit", rank_grid="auto", params=dict(early_stopping=True)),
    }
    records = {name: run(spec) for name, spec in runs.items()}
    print(f"{'run':>15} {'seconds':>8} {'rank-epochs':>11} {'r*':>3} {'peak MB':>8}  note")
    for name, rec in records.items():
        note = (f"best-MSE rank {rec['best_rank']}, {rec['folds']} folds"
                if name == "gridsearch_cv5" else f"rounds {[r['ranks'] for r in rec['rounds']]}")
        print(f"{name:>15} {rec['seconds']:8.2f} {rec['rank_epochs']:11d} {rec['rank']:3d} "
              f"{rec['peak_rss_mb']:8.0f}  {note}")
    grid, full = records["gridsearch_cv5"], records["full_grid"]
    auto, early = records["auto"], records["auto_early"]
    same = len({rec["rank"] for rec in records.values()}) == 1
    print(f"gridsearch_over_full_time: {grid['seconds'] / full['seconds']:.2f}")
    print(f"gridsearch_over_auto_time: {grid['seconds'] / auto['seconds']:.2f}")
    print(f"full_over_auto_time: {full['seconds'] / auto['seconds']:.2f}")
    print(f"full_over_auto_early_time: {full['seconds'] / early['seconds']:.2f}")
    print(f"full_over_auto_early_rank_epochs: {full['rank_epochs'] / early['rank_epochs']:.2f}")
    print(f"same_rstar_baselines: {same}")
    return records, same


def rank_epochs_at_64(args, common):
    """Rank-epochs of ``rank_grid="auto"`` against the full grid 1..64 at d = 64.

    A linear teacher of rank 8 (``n = 1024``, ``L = 8``), both trained to
    convergence with ``early_stopping=True`` (at most 300 epochs): the ratio
    of rank-epochs and of wall time, and the two ``r*``.
    """
    if args.quick:
        base = dict(common, kind="linear", data="teacher", n=256, L=4, d=64, r_star=8,
                    epochs=3)
    else:
        base = dict(common, kind="linear", data="teacher", n=1024, L=8, d=64, r_star=8,
                    epochs=300, params=dict(early_stopping=True))
    print(f"\n== rank-epochs at d = 64: full grid 1..64 against rank_grid='auto' (linear teacher "
          f"n={base['n']}, L={base['L']}, r*=8, at most {base['epochs']} epochs"
          f"{', early_stopping' if 'params' in base else ''}; load average {load()})")
    auto = run(dict(base, how="fit", rank_grid="auto"))
    print(f"auto rounds {[(r['ranks'], r['epochs']) for r in auto['rounds']]}: "
          f"{auto['rank_epochs']} rank-epochs; r* = {auto['rank']}; {auto['seconds']:.1f} s")
    if args.quick:
        ratio = 64 * base["epochs"] / auto["rank_epochs"]
        print(f"auto_rank_epoch_ratio: {ratio:.2f} (target >= {AUTO_WORK_TARGET:g})")
        return [auto], True
    full = run(dict(base, how="fit", rank_grid="full"))
    ratio = full["rank_epochs"] / auto["rank_epochs"]
    print(f"full grid: {full['rank_epochs']} rank-epochs ({full['epochs']} epochs), "
          f"r* = {full['rank']}, {full['seconds']:.1f} s")
    print(f"auto_rank_epoch_ratio: {ratio:.2f} (target >= {AUTO_WORK_TARGET:g})")
    print(f"full64_over_auto_time: {full['seconds'] / auto['seconds']:.2f}")
    print(f"same_rstar_64: {full['rank'] == auto['rank']}")
    return [auto, full], full["rank"] == auto["rank"]


def curves(args, common):
    """Time per epoch and peak memory against n, L, d and R."""
    if args.quick:
        ref = dict(n=256, L=8, d=16)
        axes = dict(n=[128, 256], L=[4, 8], d=[8, 16], R=[1, 4])
        epochs = 2
    else:
        ref = dict(n=4096, L=32, d=64)
        axes = dict(n=[1024, 2048, 4096, 8192], L=[8, 16, 32, 64], d=[16, 32, 64, 128],
                    R=[1, 2, 4, 8, 16])
        epochs = 3
    print(f"\n== scaling curves around n={ref['n']} L={ref['L']} d={ref['d']}, coarse grid "
          f"(R=7 at d=64), median epoch of {epochs}, float32 data (load average {load()})")
    records, fits = [], {}
    for axis, values in axes.items():
        if axis not in args.axes:
            continue
        xs, per_epoch, memory = [], [], []
        for value in values:
            size = dict(ref)
            if axis == "R":
                # R slots of the same width (the top ranks): cost grows with R alone
                ranks = list(range(ref["d"] - value + 1, ref["d"] + 1))
            else:
                size[axis] = value
                ranks = "auto_coarse"
            if ranks == "auto_coarse":
                from_grid = [1]
                while from_grid[-1] * 2 < size["d"]:
                    from_grid.append(from_grid[-1] * 2)
                ranks = from_grid + [size["d"]]
            spec = dict(common, data="float32", how="fit", rank_grid=ranks, r_star=4,
                        epochs=epochs, **size)
            rec = run(spec)
            rec.update(axis=axis, value=value, n_ranks=len(ranks))
            records.append(rec)
            xs.append(value)
            per_epoch.append(rec["seconds_per_epoch"])
            memory.append(rec["peak_above_import_mb"])
            print(f"  {axis}={value:>6}: R={len(ranks):>2}  {rec['seconds_per_epoch']:7.3f} s/epoch"
                  f"  peak above import {rec['peak_above_import_mb']:7.0f} MB"
                  f"  (data {rec['data_f32_mb']:6.0f} MB float32)")
        fits[axis] = dict(time=exponent(xs, per_epoch), memory=exponent(xs, memory))
        print(f"  growth exponent in {axis}: time ~ {axis}^{fits[axis]['time']:.2f}, "
              f"memory ~ {axis}^{fits[axis]['memory']:.2f}")
    return records, dict(exponents=fits, **step_costs(args, ref))


def step_costs(args, ref):
    """Per optimiser step ``t(R) = a + b R`` of the batched student, in this process.

    Slots ``d-R+1 .. d`` (all of width ``d``), Adam, summed per-rank MSE, at the
    estimator's batch (256) and at a batch of 4 (where the fixed cost shows).
    The equal-work speed-up of one batched fit over ``R`` single-rank fits is
    ``R t(1) / t(R)``, at most ``(a + b) / b`` for large ``R``.
    """
    import torch

    from intrinsic_rank.estimators._net import RankwiseMSELoss
    from intrinsic_rank.nn import make_student

    torch.set_num_threads(args.threads)
    d, L = ref["d"], ref["L"]
    Rs = [1, 2, 4] if args.quick else [1, 2, 4, 8]
    result = {}
    for batch in (256, 4):
        times = []
        for R in Rs:
            module = make_student(args.kind, d=d, d_out=d, ranks=list(range(d - R + 1, d + 1)),
                                  seq_len=L).to(args.device)
            optimizer = torch.optim.Adam(module.parameters(), lr=3e-3)
            criterion = RankwiseMSELoss()
            X = torch.randn(batch, L, d, device=args.device)
            Y = torch.randn(batch, L, d, device=args.device)
            steps = 3 if args.quick else 10
            for i in range(steps + 2):
                if i == 2:
                    if args.device.startswith("cuda"):
                        torch.cuda.synchronize()
                    start = time.perf_counter()
                optimizer.zero_grad()
                criterion(module(X), Y).sum().backward()
                optimizer.step()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) / steps)
        b, a = np.polyfit(Rs, times, 1)
        limit = (a + b) / b if b > 0 else float("inf")
        speedup = Rs[-1] * times[0] / times[-1]
        print(f"  step at batch {batch}, d={d}, L={L}: "
              + ", ".join(f"R={R} {t * 1e3:.2f} ms" for R, t in zip(Rs, times))
              + f"; a = {a * 1e3:.2f} ms fixed, b = {b * 1e3:.2f} ms per rank; "
              f"equal-work speed-up at R={Rs[-1]}: {speedup:.2f}x, limit (a+b)/b = {limit:.2f}")
        result[f"batch_{batch}"] = dict(rank_grid=Rs, seconds=times, fixed_ms=a * 1e3,
                                        per_rank_ms=b * 1e3, limit=limit, speedup=speedup)
    print(f"equal_work_speedup_batch256: {result['batch_256']['speedup']:.2f}")
    return result


def big(args, common):
    n = 50000
    print(f"\n== memory at n={n}, L=32, d=64, coarse grid, 1 epoch (load average {load()})")
    spec = dict(common, data="float32", how="fit", rank_grid=[1, 2, 4, 8, 16, 32, 64], n=n,
                L=32, d=64, r_star=4, epochs=1)
    rec = run(spec, timeout=7200)
    target = MEMORY_FACTOR * rec["data_f32_mb"] + FIXED_OVERHEAD_MB
    # the fit's own peak above the process before fit, plus the data it was given
    fit_peak = rec["peak_rss_mb"] - rec["rss_before_fit_mb"] + rec["data_f32_mb"]
    print(f"  data {rec['data_f32_mb']:.0f} MB float32, peak RSS {rec['peak_rss_mb']:.0f} MB, "
          f"RSS before fit {rec['rss_before_fit_mb']:.0f} MB, above import "
          f"{rec['peak_above_import_mb']:.0f} MB, {rec['seconds']:.0f} s")
    print(f"fit_peak_plus_data_mb_50k: {fit_peak:.0f} (target <= {target:.0f})")
    return rec


def plot(result, folder):
    """Draw time per epoch and peak memory against each axis (log-log) into ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator

    records = result["curves"]
    labels = dict(n="n (sequences)", L="L (sequence length)", d="d (model width)",
                  R="R (rank slots, all of width d)")
    fig, axes = plt.subplots(2, 4, figsize=(14, 6.4))
    for j, axis in enumerate(["n", "L", "d", "R"]):
        recs = sorted((r for r in records if r["axis"] == axis), key=lambda r: r["value"])
        xs = [r["value"] for r in recs]
        fit = result["fits"]["exponents"][axis]
        top, bottom = axes[0, j], axes[1, j]
        top.loglog(xs, [r["seconds_per_epoch"] for r in recs], "o-", label="time per epoch")
        top.set_title(f"time ∝ {axis}^{fit['time']:.2f}")
        bottom.loglog(xs, [r["peak_above_import_mb"] for r in recs], "s-", color="C1",
                      label="peak RSS above import")
        bottom.loglog(xs, [r["data_f32_mb"] for r in recs], ":", color="gray",
                      label="X and Y (float32)")
        bottom.set_title(f"memory ∝ {axis}^{fit['memory']:.2f}")
        bottom.set_xlabel(labels[axis])
        for ax in (top, bottom):
            ax.set_xticks(xs)
            ax.set_xticklabels([f"{x:,}" for x in xs])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.3)
        bottom.legend(fontsize=7, loc="best")
    axes[0, 0].set_ylabel("seconds per epoch")
    axes[1, 0].set_ylabel("MB")
    fig.suptitle("AttentionRankEstimator cost around n = 4,096, L = 32, d = 64 "
                 "(softmax teacher, coarse rank grid, one CPU thread)")
    fig.tight_layout()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "scale_curves.png")
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None):
    args = parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    common = dict(kind=args.kind, seed=args.seed, threads=args.threads, device=args.device)
    print(f"bench_scale: kind={args.kind} threads={args.threads} device={args.device} "
          f"seed={args.seed}" + (" (quick)" if args.quick else "")
          + f"; load average {load()} on {os.cpu_count()} CPUs")
    result = {"args": vars(args)}
    agree = []
    if "baselines" not in args.skip:
        result["baselines"], same = baselines(args, common)
        agree.append(same)
    if "rank_epochs_64" not in args.skip:
        result["rank_epochs_64"], same64 = rank_epochs_at_64(args, common)
        agree.append(same64)
    if "curves" not in args.skip:
        result["curves"], result["fits"] = curves(args, common)
    if "big" not in args.skip and not args.quick:
        result["big"] = big(args, common)
    if args.merge and "curves" in result:
        with open(args.merge) as handle:
            previous = json.load(handle)
        kept = [r for r in previous["curves"] if r["axis"] not in args.axes]
        result["curves"] = kept + result["curves"]
        for axis, fit in previous["fits"]["exponents"].items():
            result["fits"]["exponents"].setdefault(axis, fit)
        result["merged_from"] = dict(path=args.merge, axes=sorted({r["axis"] for r in kept}))
    print(f"\nsame_rstar_all: {all(agree)}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1, default=str)
        print(f"wrote {args.out}")
    if args.plot and "curves" in result:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
