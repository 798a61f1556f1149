"""The ``min-ip`` experiment: the phase transition and OOD scaling, their figure and verdicts."""

import math
import time

import numpy as np
from sklearn.utils import Bunch

from ..._validation import check_allocation
from ..runner import (
    MAX_EPOCHS,
    Experiment,
    Verdict,
    bounded_int,
    grade,
    is_finite,
    jsonable,
    number_text,
    parse_ranks,
    pyplot,
    save_figure,
    save_plot,
)
from ._transition import OOD_SETTINGS, min_ip_ood_scaling, min_ip_phase_transition

__all__ = [
    "MIN_IP_COLUMNS",
    "MIN_IP_OOD_COLUMNS",
    "MIN_IP_OOD_TRANSITION_COLUMNS",
    "plot_min_ip",
]


def plot_min_ip(phase, ood=None, path=None):
    """Exact-sequence error against feature rank (log2 axis), in-sample and OOD.

    Left panel: :func:`min_ip_phase_transition`, one line per length (mean over
    seeds, with the shaded band from the best to the worst seed), the dense
    references as horizontal dashed lines and the threshold as a dotted line.
    Right panel (with ``ood``): test error on the disjoint pool per setting of
    :func:`min_ip_ood_scaling`, with the same band, dense references dashed.
    The legends, bands included, sit under the panels, off the curves.

    Parameters
    ----------
    phase : Bunch or None
        Output of :func:`min_ip_phase_transition`.
    ood : Bunch or None, default=None
        Output of :func:`min_ip_ood_scaling`.
    path : str or None
        Where to save the PNG.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    panels = [p for p in (phase, ood) if p is not None]
    if not panels:
        raise ValueError("give at least one of phase and ood")
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.6), squeeze=False)
    axes = list(axes.flat)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def ticks(ax, ranks, threshold):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ranks)
        ax.set_xticklabels([str(r) for r in ranks])
        ax.axhline(threshold, color="grey", lw=0.8, ls=":", label=f"threshold {threshold:g}")
        ax.set_ylim(-0.02, 1.0)
        ax.set_xlabel("feature rank r (log2 scale)")
        ax.set_ylabel("exact-sequence error")

    if phase is not None:
        ax = axes.pop(0)
        cfg = phase.config
        for k, length in enumerate(cfg["lengths"]):
            rows = [row for row in phase.summary
                    if row["length"] == length and row["model"] == "kernel"]
            r = np.array([row["rank"] for row in rows])
            colour = colours[k % len(colours)]
            ax.plot(r, [row["error_mean"] for row in rows], "o-", color=colour,
                    label=f"kernel, length {length} (mean)")
            ax.fill_between(r, [row["error_min"] for row in rows],
                            [row["error_max"] for row in rows], color=colour, alpha=0.2,
                            label=f"kernel, length {length}: best to worst seed")
            dense_rows = [row for row in phase.summary
                          if row["length"] == length and row["model"] == "dense"]
            if dense_rows:
                ax.axhline(dense_rows[0]["error_mean"], color=colour, ls="--", lw=1,
                           label=f"dense softmax, length {length}")
        ticks(ax, cfg["rank_grid"], cfg["threshold"])
        ax.set_title(
            f"In-sample: {cfg['n_codewords']} codewords, {cfg['n_bits']} bits, gap >= "
            f"{cfg['min_gap']}, {cfg['n_seeds']} seeds", fontsize=9,
        )
        _legend_below(ax)
    if ood is not None:
        ax = axes.pop(0)
        cfg = ood.config
        for k, setting in enumerate(cfg["settings"]):
            rows = [row for row in ood.summary if row["n_bits"] == setting["n_bits"]
                    and row["pool"] == setting["pool"]]
            kernel = [row for row in rows if row["model"] == "kernel"]
            colour = colours[k % len(colours)]
            r = np.array([row["rank"] for row in kernel])
            label = f"m={setting['n_bits']}, pools of {setting['pool']}"
            ax.plot(r, [row["test_error_mean"] for row in kernel], "o-", color=colour,
                    label=f"kernel, {label}")
            ax.fill_between(r, [row["test_error_min"] for row in kernel],
                            [row["test_error_max"] for row in kernel], color=colour, alpha=0.15,
                            label=f"kernel, {label}: best to worst seed")
            for row in rows:
                if row["model"] == "dense":
                    ax.axhline(row["test_error_mean"], color=colour, ls="--", lw=1,
                               label=f"dense, {label}")
        ticks(ax, cfg["rank_grid"], cfg["threshold"])
        ax.set_title(f"Out of distribution: test on a disjoint pool, {cfg['n_seeds']} seed(s)",
                     fontsize=9)
        _legend_below(ax)
    fig.suptitle("Min-IP phase transition: exact-sequence error of rank-r kernel attention "
                 "against dense softmax attention", fontsize=10)
    return save_figure(fig, path)


def _legend_below(ax):
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
              frameon=False)


# -- the experiment: ``min-ip`` (the same name as piece and command) -------------------

MIN_IP_COLUMNS = ["length", "model", "rank", "n_seeds", "error_mean", "error_min",
                  "error_max"]
"""Columns of the in-sample table (the ``summary`` of :func:`min_ip_phase_transition`)."""

MIN_IP_OOD_TRANSITION_COLUMNS = ["n_bits", "pool", "transition_rank",
                                 "kernel_best_test_error", "dense_test_error_mean"]
"""Columns of the OOD transition table (the ``transition`` of :func:`min_ip_ood_scaling`)."""

MIN_IP_OOD_COLUMNS = ["n_bits", "pool", "model", "rank", "n_seeds", "test_error_mean",
                      "test_error_min", "test_error_max"]
"""Columns of the OOD test-error table (the ``summary`` of :func:`min_ip_ood_scaling`)."""


def _run(settings, *, random_state, progress, device):
    """The in-sample experiment, then (unless ``settings["ood"]`` is None) the OOD one."""
    tic = time.perf_counter()
    phase = min_ip_phase_transition(random_state=random_state, progress=progress,
                                    device=device, **settings["phase"])
    ood = None
    if settings.get("ood") is not None:
        ood = min_ip_ood_scaling(random_state=random_state, progress=progress, device=device,
                                 **settings["ood"])
    return jsonable({"phase": dict(phase), "ood": None if ood is None else dict(ood),
                     "seconds": time.perf_counter() - tic})


def _plot(result, folder):
    ood = None if result["ood"] is None else Bunch(**result["ood"])
    return [save_plot(plot_min_ip(Bunch(**result["phase"]), ood), folder, "min_ip.png")]


def _tables(result):
    phase = result["phase"]
    tables = [(f"in-sample exact-sequence error, {phase['config']['n_codewords']} codewords "
               f"of {phase['config']['n_bits']} bits, {phase['config']['n_seeds']} seed(s)",
               phase["summary"], MIN_IP_COLUMNS)]
    if result["ood"] is not None:
        ood = result["ood"]
        tables.append((f"out of distribution: transition rank per setting (test error <= "
                       f"{ood['config']['threshold']:g})", ood["transition"],
                       MIN_IP_OOD_TRANSITION_COLUMNS))
        tables.append(("out of distribution: test error on the disjoint pool",
                       ood["summary"], MIN_IP_OOD_COLUMNS))
    return tables


def _verdicts(result, paper_ranks=(8, 32), paper_error=0.8):
    """Rank 1 at length 2, dense at length 3, the transition, its place, and OOD."""
    phase = result["phase"]
    threshold = phase["config"]["threshold"]
    summary = phase["summary"]

    def row(length, model, rank=None):
        for rec in summary:
            if rec["length"] == length and rec["model"] == model and (
                    rank is None or rec["rank"] == rank):
                return rec
        return None

    verdicts = []
    one2 = row(2, "kernel", 1)
    if one2 is not None:
        err = one2["error_mean"]
        verdicts.append(Verdict(
            "with two tokens, rank 1 suffices",
            f"rank-1 kernel head, length 2: error {number_text(err)} (worst seed "
            f"{number_text(one2['error_max'])})",
            "agrees" if err <= threshold else ("partly" if err <= 4 * threshold
                                               else "does not agree"),
            f"mean error <= {threshold:g} agrees, <= {4 * threshold:g} partly",
        ))
    dense3 = row(3, "dense")
    if dense3 is not None:
        worst = dense3["error_max"]
        verdicts.append(Verdict(
            "dense softmax attention solves three tokens",
            f"dense, length 3: error {number_text(dense3['error_mean'])} (worst seed "
            f"{number_text(worst)})",
            "agrees" if worst <= threshold else (
                "partly" if dense3["error_mean"] <= threshold else "does not agree"),
            f"every seed <= {threshold:g} agrees, the mean only partly",
        ))
    one3 = row(3, "kernel", 1)
    transition = phase["transition"].get("3")
    if one3 is not None:
        fails = one3["error_mean"] > threshold
        verdicts.append(Verdict(
            "at three tokens a transition in feature rank exists: small ranks fail, a "
            "large enough rank solves the task",
            f"rank 1 errs on {number_text(one3['error_mean'])}; transition (mean error <= "
            f"{threshold:g}) at {'none of the grid' if transition is None else f'r = {transition}'}"
            f" of ranks {phase['config']['rank_grid']}",
            grade(fails + (transition is not None), 2),
            f"rank 1 fails ({'yes' if fails else 'no'}) and some rank of the grid succeeds "
            f"({'yes' if transition is not None else 'no'})",
        ))
        placed = transition is not None and paper_ranks[0] <= transition <= paper_ranks[1]
        small = [rec for rec in summary if rec["length"] == 3 and rec["model"] == "kernel"
                 and (transition is None or rec["rank"] < transition)]
        low = min((rec["error_mean"] for rec in small), default=math.nan)
        high_error = bool(small) and low > paper_error
        verdicts.append(Verdict(
            f"the transition lies at r = {paper_ranks[0]}-{paper_ranks[1]} on a 24-bit "
            f"witness suite, with error > {paper_error:g} below it",
            f"transition at {'none of the grid' if transition is None else f'r = {transition}'}"
            f"; ranks below it err on at least {number_text(low)}",
            grade(placed + high_error, 2),
            f"transition in {paper_ranks[0]}-{paper_ranks[1]} "
            f"({'yes' if placed else 'no'}); every rank below it errs on more than "
            f"{paper_error:g} ({'yes' if high_error else 'no'}) -- on our anchored family "
            "small ranks fail less often and succeed sooner",
        ))
    ood = result["ood"]
    if ood is not None and ood["transition"]:
        rows = ood["transition"]
        found = [r["transition_rank"] for r in rows if r["transition_rank"] is not None]
        growing = len(found) == len(rows) and all(
            a <= b for a, b in zip(found, found[1:])) and found[-1] > found[0]
        best = [r["kernel_best_test_error"] for r in rows]
        rising = all(a < b for a, b in zip(best, best[1:]))
        verdicts.append(Verdict(
            "out of distribution, the transition rank grows with the problem "
            "(8 -> 16 -> 64 in the paper)",
            "; ".join(f"m = {r['n_bits']}: "
                      + ("no transition" if r["transition_rank"] is None
                         else f"r = {r['transition_rank']}")
                      + f" (best kernel {number_text(r['kernel_best_test_error'])})" for r in rows),
            "agrees" if growing else ("partly" if found else "does not agree"),
            f"transitions found in {len(found)} of {len(rows)} settings"
            + ("" if found else "; the kernel heads' best test error "
               + ("rises" if rising else "does not rise steadily")
               + f" with the bit width ({', '.join(number_text(b) for b in best)})"),
        ))
        dense = [r["dense_test_error_mean"] for r in rows if is_finite(r["dense_test_error_mean"])]
        if dense:
            ok = sum(e <= ood["config"]["threshold"] for e in dense)
            verdicts.append(Verdict(
                "out of distribution, dense attention stays (near-)exact as the problem grows",
                "dense test error " + ", ".join(number_text(e) for e in dense),
                grade(ok, len(dense)),
                f"{ok} of {len(dense)} settings at or below {ood['config']['threshold']:g}",
            ))
    return verdicts


def _add_arguments(parser):
    parser.add_argument("--quick", action="store_true",
                        help="the quick version (fewer ranks, seeds and OOD settings)")
    parser.add_argument("--n-seeds", type=bounded_int(1, 64), default=None,
                        help="seeds per setting (default 3, quick 2 in-sample / 1 OOD)")
    parser.add_argument("--rank-grid", dest="rank_grid", type=parse_ranks, default=None,
                        help="feature ranks, e.g. 1,2,4,8,16,32,64 (the default)")
    parser.add_argument("--epochs", type=bounded_int(1, MAX_EPOCHS), default=None,
                        help="full-batch optimiser steps of every fit, 1..1000000 (default "
                        "400 in-sample, 200 OOD)")
    parser.add_argument("--n-bits", type=bounded_int(2, 64), default=24,
                        help="bits of the in-sample witness family, 2..64")
    parser.add_argument("--n-codewords", type=bounded_int(3, 256), default=16,
                        help="codewords of the in-sample witness family, 3..256 and within "
                        "memory (the family holds about n^3 sequences)")
    parser.add_argument("--no-ood", action="store_true",
                        help="skip the out-of-distribution experiment")


def _settings(args):
    # about n^3 witnesses of 3 tokens of n_bits, in float64 and again in float32
    check_allocation(36 * args.n_bits * args.n_codewords**3, "--n-bits and --n-codewords",
                     "the witness family")
    epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
    phase = dict(rank_grid=args.rank_grid, n_seeds=args.n_seeds, n_bits=args.n_bits,
                 n_codewords=args.n_codewords, quick=args.quick, **epochs)
    ood = None if args.no_ood else dict(rank_grid=args.rank_grid, n_seeds=args.n_seeds,
                                        quick=args.quick, **epochs)
    return {"phase": phase, "ood": ood}


def _summary(result):
    phase, ood = result["phase"], result["ood"]
    cfg = phase["config"]
    heads = [
        f"Min-IP in-sample phase transition: {cfg['n_codewords']} codewords of "
        f"{cfg['n_bits']} bits, every witness with gap >= {cfg['min_gap']} plus anchors; "
        f"{cfg['n_seeds']} seeds; {cfg['max_epochs']} epochs, lr {cfg['lr']:g}, "
        f"batch {cfg['batch_size']}, hidden {cfg['hidden']} ({phase['seconds']:.0f} s)"
    ]
    if ood is not None:
        ocfg = ood["config"]
        heads.append(
            f"Min-IP out of distribution: train on one pool's family (gap >= "
            f"{ocfg['min_gap']}, anchors), test on a disjoint pool; {ocfg['n_seeds']} "
            f"seed(s); {ocfg['max_epochs']} epochs, lr {ocfg['lr']:g}, batch "
            f"{ocfg['batch_size']} ({ood['seconds']:.0f} s)"
        )
    lines = ["\n".join(heads)]
    dense = [rec for rec in phase["records"] if rec["model"] == "dense"]
    if dense:
        lines.append("dense softmax per seed: " + ", ".join(
            f"length {rec['length']} seed {rec['seed']}: {rec['error']:.3f}" for rec in dense))
    for length, rank in phase["transition"].items():
        where = "none of the grid" if rank is None else f"r = {rank}"
        lines.append(f"length {length}: transition (mean error <= {cfg['threshold']:g}) at "
                     f"{where}")
    bounds = [b for b in phase["rank_bound"] if b is not None]
    if bounds:
        lines.append(f"certificate lower bound on an exact length-3 solution: r >= "
                     f"{math.ceil(max(bounds) - 1e-9)} (per seed {[round(b, 2) for b in bounds]})")
    if ood is not None:
        for row in ood["transition"]:
            where = ("none of the grid" if row["transition_rank"] is None
                     else f"r = {row['transition_rank']}")
            lines.append(
                f"m = {row['n_bits']}, pools of {row['pool']}: transition (test error <= "
                f"{ood['config']['threshold']:g}) at {where}; best kernel "
                f"{row['kernel_best_test_error']:.3f}, dense "
                f"{row['dense_test_error_mean']:.3f}")
    lines.append(f"{result['seconds']:.1f} s")
    return lines


def _saved(result):
    """The command's ``min_ip.json``: both experiments' records, keyed by experiment."""
    phase, ood = result["phase"], result["ood"]
    records = [dict(rec, experiment="in_sample") for rec in phase["records"]]
    if ood is not None:
        records += [dict(rec, experiment="ood") for rec in ood["records"]]
    return dict(
        records=records,
        config={"in_sample": phase["config"], "ood": None if ood is None else ood["config"]},
        summary={"in_sample": phase["summary"], "ood": None if ood is None else ood["summary"]},
        transition={"in_sample": phase["transition"],
                    "ood": None if ood is None else ood["transition"]},
        rank_bound=phase["rank_bound"], seconds=result["seconds"],
    )


EXPERIMENT = Experiment(
    name="min-ip",
    command="min-ip",
    title="Min-IP: three tokens force feature rank in nonnegative kernel attention",
    paper="Three tokens force exponential feature rank in nonnegative kernel attention",
    help="Min-IP phase transition of nonnegative kernel attention",
    description="Train normalised nonnegative kernel heads of a grid of feature ranks (one "
    "batched optimisation) on an anchored Min-IP witness family, in-sample at lengths 3 and "
    "2, with dense softmax attention as the reference; then train on one codeword pool and "
    "test on a disjoint one as the bit width grows. Prints the tables and transition ranks, "
    "saves min_ip.png and min_ip.json.",
    quick=dict(
        phase=dict(rank_grid=[1, 4, 16], n_seeds=2, quick=True),
        # The first two full OOD settings: with the 1,000 training sequences of
        # min_ip_ood_scaling's own quick settings even dense attention does not
        # generalise (test error 0.14 and 0.33), which would misjudge the claim.
        ood=dict(settings=jsonable(OOD_SETTINGS[:2]), rank_grid=[1, 4, 16, 64], n_seeds=1,
                 quick=True),
    ),
    full=dict(
        phase=dict(rank_grid=[1, 2, 4, 8, 16, 32, 64], n_seeds=3),
        ood=dict(settings=jsonable(OOD_SETTINGS), rank_grid=[1, 2, 4, 8, 16, 32, 64], n_seeds=3),
    ),
    run=_run, tables=_tables, plot=_plot, verdicts=_verdicts,
    add_arguments=_add_arguments, settings=_settings, summary=_summary,
    json_name="min_ip", saved=_saved, floatfmt="{:.3f}",
)
"""The Min-IP experiments as a registered experiment (piece and command ``min-ip``)."""
