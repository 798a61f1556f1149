"""The ``min-ip`` experiment: the phase transition and OOD scaling, their figure and verdicts.

Its work; it is declared in :mod:`intrinsic_rank.experiments.min_ip`.
"""

import math
import time

import numpy as np
from sklearn.utils import Bunch

from ..._validation import check_allocation
from ..runner import (
    Verdict,
    grade,
    jsonable,
    number_text,
    pyplot,
    save_figure,
    save_plot,
)
from ._transition import (
    min_ip_ood_scaling,
    min_ip_phase_transition,
    min_ip_witness_suite_sweep,
)

__all__ = [
    "MIN_IP_COLUMNS",
    "MIN_IP_OOD_COLUMNS",
    "MIN_IP_OOD_TRANSITION_COLUMNS",
    "MIN_IP_SUITE_COLUMNS",
    "plot_min_ip",
]


def plot_min_ip(phase, ood=None, path=None, suite=None):
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
    suite : Bunch or None, default=None
        Output of :func:`min_ip_witness_suite_sweep`, drawn in the in-sample
        panel (kernel mean error, squares, dashed).

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
        if suite is not None:
            rows = [row for row in suite["summary"] if row["model"] == "kernel"]
            ax.plot([row["rank"] for row in rows], [row["error_mean"] for row in rows], "s--",
                    color="k", mfc="none",
                    label=f"kernel, paper-like suite ({suite['config']['n_sequences']} "
                    "sequences, mean)")
        ticks(ax, sorted(set(cfg["rank_grid"]) | set(
            suite["config"]["rank_grid"] if suite is not None else [])), cfg["threshold"])
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

MIN_IP_SUITE_COLUMNS = ["model", "rank", "n_seeds", "error_mean", "error_min", "error_max"]
"""Columns of the paper-like suite's table (the ``summary`` of
:func:`min_ip_witness_suite_sweep`)."""

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
    suite = None
    if settings.get("suite") is not None:
        suite = min_ip_witness_suite_sweep(random_state=random_state, progress=progress,
                                           device=device, **settings["suite"])
    ood = None
    if settings.get("ood") is not None:
        ood = min_ip_ood_scaling(random_state=random_state, progress=progress, device=device,
                                 **settings["ood"])
    return jsonable({"phase": dict(phase), "suite": None if suite is None else dict(suite),
                     "ood": None if ood is None else dict(ood),
                     "seconds": time.perf_counter() - tic})


def _plot(result, folder):
    ood = None if result["ood"] is None else Bunch(**result["ood"])
    suite = None if result.get("suite") is None else Bunch(**result["suite"])
    return [save_plot(plot_min_ip(Bunch(**result["phase"]), ood, suite=suite), folder,
                      "min_ip.png")]


def _tables(result):
    phase = result["phase"]
    tables = [(f"in-sample exact-sequence error, {phase['config']['n_codewords']} codewords "
               f"of {phase['config']['n_bits']} bits, {phase['config']['n_seeds']} seed(s)",
               phase["summary"], MIN_IP_COLUMNS)]
    if result.get("suite") is not None:
        suite = result["suite"]
        cfg = suite["config"]
        tables.append((f"the paper-like witness suite: {cfg['n_sequences']} length-3 sequences "
                       f"of {cfg['n_bits']}-bit words ({cfg['n_codewords']} codewords, gap "
                       f"{cfg['gap']}), in-sample, {cfg['n_seeds']} seed(s)", suite["summary"],
                       MIN_IP_SUITE_COLUMNS))
    if result["ood"] is not None:
        ood = result["ood"]
        tables.append((f"out of distribution: transition rank per setting (test error <= "
                       f"{ood['config']['threshold']:g})", ood["transition"],
                       MIN_IP_OOD_TRANSITION_COLUMNS))
        tables.append(("out of distribution: test error on the disjoint pool",
                       ood["summary"], MIN_IP_OOD_COLUMNS))
    return tables


PAPER_SMALL_RANK = 8
"""The Min-IP paper's witness suite: feature rank ``r < 8`` fails on it ("Three tokens force
exponential feature rank in nonnegative kernel attention", Vicente Opazo, 2026, its
experimental validation)."""

PAPER_SMALL_ERROR = 0.8
"""... with error above 0.80 (the same section)."""

PAPER_SOLVING_RANK = 32
"""... and ``r = 32`` solves it exactly (the same section)."""


def _seeds_outcome(row, threshold):
    """Every seed at or below the threshold: agrees; the mean only: partly; else not."""
    if row["error_max"] <= threshold:
        return "agrees"
    return "partly" if row["error_mean"] <= threshold else "does not agree"


def _suite_verdict(suite):
    """The paper's witness-suite claim, on the paper-like suite of the same sizes."""
    cfg, threshold = suite["config"], suite["config"]["threshold"]
    kernel = [row for row in suite["summary"] if row["model"] == "kernel"]
    small = [row for row in kernel if row["rank"] < PAPER_SMALL_RANK]
    solving = [row for row in kernel if row["rank"] == PAPER_SOLVING_RANK]
    checks = []
    if small:
        checks.append(all(row["error_mean"] > PAPER_SMALL_ERROR for row in small))
    if solving:
        checks.append(solving[0]["error_max"] <= threshold)
    if not checks:
        return None
    fails = checks[0] if small else None
    dense = [row for row in suite["summary"] if row["model"] == "dense"]
    why = (f"every rank below {PAPER_SMALL_RANK} of the grid errs on more than "
           f"{PAPER_SMALL_ERROR:g} ({'yes' if fails else 'no' if small else 'none tried'}) "
           f"and rank {PAPER_SOLVING_RANK} is exact on every seed, up to {threshold:g} ("
           + (("yes" if checks[-1] else "no") if solving else "not tried") + "); both agree, "
           "one partly")
    if small and not fails:
        why += ("; small ranks fit this suite, as they can: with one gap the suite has an exact "
                "rank-1 solution (a uniform average and an affine readout), so the paper's "
                "wall needs its own construction, which the seed does not give")
    return Verdict(
        f"on a witness suite of {cfg['n_sequences']:,} length-3 inputs of {cfg['n_bits']}-bit "
        f"vectors, feature rank r < {PAPER_SMALL_RANK} fails (error > {PAPER_SMALL_ERROR:g}) "
        f"and r = {PAPER_SOLVING_RANK} solves it exactly",
        "; ".join(f"r = {row['rank']}: {number_text(row['error_mean'])}" for row in kernel)
        + (f"; dense {number_text(dense[0]['error_mean'])}" if dense else "")
        + f" (mean exact-sequence error over {cfg['n_seeds']} seed(s); {cfg['n_codewords']} "
        f"codewords, gap {cfg['gap']})",
        grade(sum(checks), len(checks)), why)


def _ood_verdicts(ood):
    """The OOD transition's growth and dense attention's exactness, every seed."""
    rows, threshold = ood["transition"], ood["config"]["threshold"]
    found = [r["transition_rank"] for r in rows if r["transition_rank"] is not None]
    growing = len(found) == len(rows) and all(
        a <= b for a, b in zip(found, found[1:])) and found[-1] > found[0]
    best = [r["kernel_best_test_error"] for r in rows]
    if growing:
        why = "a transition in every setting, non-decreasing and growing"
    elif found:
        why = f"transitions in {len(found)} of {len(rows)} settings, not a growing sequence"
    else:
        rising = all(a < b for a, b in zip(best, best[1:]))
        why = ("no kernel rank of the grid reaches the threshold in any setting; the best "
               f"test error {'rises' if rising else 'does not rise steadily'} with the bit "
               f"width ({', '.join(number_text(b) for b in best)})")
    verdicts = [Verdict(
        "out of distribution, the transition rank grows with the problem "
        "(8 -> 16 -> 64 in the paper)",
        "; ".join(f"m = {r['n_bits']}: "
                  + ("no transition" if r["transition_rank"] is None
                     else f"r = {r['transition_rank']}")
                  + f" (best kernel {number_text(r['kernel_best_test_error'])})" for r in rows),
        "agrees" if growing else ("partly" if found else "does not agree"),
        why + f"; a transition is the smallest rank with mean test error <= {threshold:g}; "
        "growing in every setting agrees, a transition somewhere partly",
    )]
    dense = [row for row in ood["summary"] if row["model"] == "dense"]
    if dense:
        ok = sum(row["test_error_max"] <= threshold for row in dense)
        verdicts.append(Verdict(
            "out of distribution, dense attention stays exact on every seed as the problem "
            "grows",
            "dense test error (worst seed) " + ", ".join(
                f"m = {row['n_bits']}: {number_text(row['test_error_max'])}" for row in dense),
            grade(ok, len(dense)),
            f"{ok} of {len(dense)} settings at or below {threshold:g} on every seed; all "
            "agrees, some partly",
        ))
    return verdicts


def _verdicts(result):
    """Rank 1 at length 2, dense at length 3, the transition, the paper's suite, and OOD.

    The claims are the Min-IP paper's (Three tokens force exponential feature
    rank: its sharp three-token phase transition for lengths 2 and 3 and dense
    softmax; its experimental validation for the witness suite -- 1,272 inputs of 24-bit vectors,
    ``r < 8`` errs above 0.80, ``r = 32`` exact -- and for OOD scaling, the
    transition moving from 8 to 16 to 64 while dense attention "remained exact
    on every seed"). "Exact" allows the experiment's ``threshold`` (0.05 of
    the sequences) for a training shortfall: 16 times below the paper's failure
    level of 0.80, so the paper's two outcomes fall on either side of it. The
    rules, fixed before any run:

    * **Rank 1 at length 2, dense at length 3** (on the anchored family): every
      seed within the threshold agrees, the mean only partly, else does not
      agree.
    * **A length-3 transition exists** (anchored family): rank 1 fails (mean
      error above the threshold) and some rank of the grid reaches it; both
      agree, one partly.
    * **The paper's suite** (:func:`min_ip_witness_suite_sweep`, the same sizes):
      every rank below 8 errs above 0.80, and rank 32 is exact on every seed;
      both agree, one partly.
    * **OOD growth:** a transition in every setting, non-decreasing and
      growing agrees; a transition somewhere partly.
    * **OOD dense:** every setting within the threshold on every seed agrees,
      some partly.

    The explanations follow from the outcome. The OOD sizes are fixed in the
    experiment's settings before a run; ``docs/reproduce.md`` states when and
    why the quick ones were last changed.
    """
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
    rule = f"every seed <= {threshold:g} agrees, the mean only partly"
    one2 = row(2, "kernel", 1)
    if one2 is not None:
        verdicts.append(Verdict(
            "with two tokens, rank 1 suffices",
            f"rank-1 kernel head, length 2: error {number_text(one2['error_mean'])} (worst seed "
            f"{number_text(one2['error_max'])})", _seeds_outcome(one2, threshold), rule))
    dense3 = row(3, "dense")
    if dense3 is not None:
        verdicts.append(Verdict(
            "dense softmax attention solves three tokens",
            f"dense, length 3: error {number_text(dense3['error_mean'])} (worst seed "
            f"{number_text(dense3['error_max'])})", _seeds_outcome(dense3, threshold), rule))
    one3 = row(3, "kernel", 1)
    transition = phase["transition"].get("3")
    if one3 is not None:
        fails = one3["error_mean"] > threshold
        where = "none of the grid" if transition is None else f"r = {transition}"
        verdicts.append(Verdict(
            "at three tokens a transition in feature rank exists: small ranks fail, a "
            "large enough rank solves the task",
            f"rank 1 errs on {number_text(one3['error_mean'])}; transition (mean error <= "
            f"{threshold:g}) at {where} of ranks {phase['config']['rank_grid']} "
            f"({phase['config']['n_codewords']} codewords, every witness of gap >= "
            f"{phase['config']['min_gap']} and every anchor)",
            grade(fails + (transition is not None), 2),
            f"rank 1 fails ({'yes' if fails else 'no'}) and some rank of the grid succeeds "
            f"({'yes' if transition is not None else 'no'}); both agree, one partly",
        ))
    if result.get("suite") is not None:
        verdict = _suite_verdict(result["suite"])
        if verdict is not None:
            verdicts.append(verdict)
    ood = result.get("ood")
    if ood is not None and ood["transition"]:
        verdicts += _ood_verdicts(ood)
    return verdicts


def _prepare(settings, folder):
    """The command's settings: one dict per part (in-sample, suite, OOD), as ``run`` takes."""
    epochs = settings.pop("max_epochs")
    epochs = {} if epochs is None else {"max_epochs": epochs}
    shared = dict(rank_grid=settings["rank_grid"], n_seeds=settings["n_seeds"],
                  quick=settings["quick"], **epochs)
    phase = dict(shared, n_bits=settings["n_bits"], n_codewords=settings["n_codewords"])
    return {"phase": phase, "suite": dict(shared), "ood": dict(shared) if settings["ood"]
            else None}


def _check(settings):
    """The in-sample witness family within memory, before it is built."""
    phase = settings["phase"]
    if "n_bits" in phase and "n_codewords" in phase:
        # about n^3 witnesses of 3 tokens of n_bits, in float64 and again in float32
        check_allocation(36 * phase["n_bits"] * phase["n_codewords"]**3,
                         "--n-bits and --n-codewords", "the witness family")


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
    suite = result.get("suite")
    if suite is not None:
        where = "none of the grid" if suite["transition"] is None else f"r = {suite['transition']}"
        lines.append(f"paper-like suite ({suite['config']['n_sequences']} sequences of "
                     f"{suite['config']['n_bits']} bits): transition (mean error <= "
                     f"{suite['config']['threshold']:g}) at {where}; " + ", ".join(
                         f"{row['model']} r={row['rank']}: {row['error_mean']:.3f}"
                         for row in suite["summary"]))
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
    suite = result.get("suite")
    if suite is not None:
        records += [dict(rec, experiment="suite") for rec in suite["records"]]
    if ood is not None:
        records += [dict(rec, experiment="ood") for rec in ood["records"]]
    return dict(
        records=records,
        config={"in_sample": phase["config"], "suite": None if suite is None else suite["config"],
                "ood": None if ood is None else ood["config"]},
        summary={"in_sample": phase["summary"],
                 "suite": None if suite is None else suite["summary"],
                 "ood": None if ood is None else ood["summary"]},
        transition={"in_sample": phase["transition"],
                    "suite": None if suite is None else suite["transition"],
                    "ood": None if ood is None else ood["transition"]},
        rank_bound=phase["rank_bound"], seconds=result["seconds"],
    )
