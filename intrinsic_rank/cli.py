"""Command line: ``intrinsic-rank sweep | ladder | frontier | min-ip | reach | copy | profile | reproduce``.

Thin by design: it parses arguments, calls :mod:`intrinsic_rank.experiments`,
prints the table and saves the plot and the records.
"""

import argparse
import math
import os
import shlex
import sys
import time

__all__ = ["main", "parse_ranks"]

SWEEP_COLUMNS = [
    "rank", "train_risk", "heldout_risk", "excess_risk", "reached",
    "energy_effective_rank", "numerical_rank",
]


def parse_ranks(text):
    """Parse a rank grid such as ``"1-8"``, ``"1,2,4,8"`` or ``"1-4,8,16"``.

    Parameters
    ----------
    text : str

    Returns
    -------
    ranks : list of int

    Examples
    --------
    >>> parse_ranks("1-4,8")
    [1, 2, 3, 4, 8]
    """
    ranks = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = (int(v) for v in part.split("-"))
                ranks.extend(range(low, high + 1))
            elif part.strip():
                ranks.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read rank grid {text!r}; write e.g. 1-8 or 1,2,4,8"
        ) from None
    if not ranks:
        raise argparse.ArgumentTypeError("the rank grid is empty")
    return ranks


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="intrinsic-rank",
        description="Measure how much query-key rank an attention model needs for a task.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    sweep = commands.add_parser(
        "sweep",
        help="rank sweep on a teacher task with known r*",
        description="Train a grid of student ranks at once on a teacher task and "
        "estimate r* (the smallest rank reaching the noise floor).",
    )
    sweep.add_argument("--teacher", choices=["linear", "softmax", "fixed"], default="softmax")
    sweep.add_argument("--attention", choices=["fixed", "linear", "softmax", "block"],
                       default=None, help="student rung (default: match the teacher)")
    sweep.add_argument("--r-star", type=int, default=4, help="true rank of the teacher")
    sweep.add_argument("--d", type=int, default=16, help="token dimension")
    sweep.add_argument("--seq-len", type=int, default=8, help="sequence length L")
    sweep.add_argument("--n-samples", type=int, default=2048)
    sweep.add_argument("--noise", type=float, default=0.1, help="noise standard deviation")
    sweep.add_argument("--ranks", type=parse_ranks, default=None,
                       help="rank grid, e.g. 1-8 or 1,2,4,8 (default 1..2r*)")
    sweep.add_argument("--epochs", type=int, default=200)
    sweep.add_argument("--seed", type=int, default=0)
    sweep.add_argument("--out", default="runs/sweep", help="output folder")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")

    ladder = commands.add_parser(
        "ladder",
        help="the interpolation ladder B0-B3 on a fixed-operator task",
        description="Fit B0 (fixed operator), B1 (linear QK), B2 (softmax QK) and B3 "
        "(Transformer block) at full rank on one fixed-operator task and compare "
        "their test excess risk.",
    )
    ladder.add_argument("--r-star", type=int, default=4, help="rank of the operator")
    ladder.add_argument("--d", type=int, default=16, help="token dimension")
    ladder.add_argument("--seq-len", type=int, default=8, help="sequence length L")
    ladder.add_argument("--n-samples", type=int, default=2048)
    ladder.add_argument("--noise", type=float, default=0.1, help="noise standard deviation")
    ladder.add_argument("--epochs", type=int, default=200)
    ladder.add_argument("--seed", type=int, default=0)
    ladder.add_argument("--out", default="runs/ladder", help="output folder")
    ladder.add_argument("--quiet", action="store_true", help="no progress bar")

    frontier = commands.add_parser(
        "frontier",
        help="how far r* can be predicted from data before training",
        description="For a grid of r*, fit each teacher's operator by least squares "
        "(no training) and compare the numerical, energy and realised-mixer ranks "
        "with the true r*; softmax teachers also get a recovery student.",
    )
    frontier.add_argument("--r-stars", type=parse_ranks, default=None,
                          help="true ranks, e.g. 1-16 or 1,2,4,8 (default 1..d)")
    frontier.add_argument("--d", type=int, default=16, help="token dimension")
    frontier.add_argument("--seq-len", type=int, default=8, help="sequence length L")
    frontier.add_argument("--n-samples", type=int, default=4096)
    frontier.add_argument("--noise", type=float, default=0.1, help="noise standard deviation")
    frontier.add_argument("--kernel-scale", type=float, default=2.0)
    frontier.add_argument("--no-recovery", action="store_true",
                          help="skip the recovery students (data-only estimates only)")
    frontier.add_argument("--epochs", type=int, default=200, help="recovery student epochs")
    frontier.add_argument("--seed", type=int, default=0)
    frontier.add_argument("--out", default="runs/frontier", help="output folder")
    frontier.add_argument("--quiet", action="store_true", help="no progress bar")

    min_ip = commands.add_parser(
        "min-ip",
        help="Min-IP phase transition of nonnegative kernel attention (seed 003)",
        description="Train normalised nonnegative kernel heads of a grid of feature "
        "ranks (one batched optimisation) on an anchored Min-IP witness family, "
        "in-sample at lengths 3 and 2, with dense softmax attention as the "
        "reference; then train on one codeword pool and test on a disjoint one "
        "as the bit width grows. Prints the tables and transition ranks, saves "
        "min_ip.png and min_ip.json.",
    )
    min_ip.add_argument("--quick", action="store_true",
                        help="the quick version (fewer ranks, seeds and OOD settings)")
    min_ip.add_argument("--seeds", type=int, default=None,
                        help="seeds per setting (default 3, quick 2 in-sample / 1 OOD)")
    min_ip.add_argument("--ranks", type=parse_ranks, default=None,
                        help="feature ranks, e.g. 1,2,4,8,16,32,64 (the default)")
    min_ip.add_argument("--epochs", type=int, default=None,
                        help="epochs of every fit (default 400 in-sample, 200 OOD)")
    min_ip.add_argument("--n-bits", type=int, default=24,
                        help="bits of the in-sample witness family")
    min_ip.add_argument("--n-codewords", type=int, default=16,
                        help="codewords of the in-sample witness family")
    min_ip.add_argument("--no-ood", action="store_true",
                        help="skip the out-of-distribution experiment")
    min_ip.add_argument("--seed", type=int, default=0, help="base seed")
    min_ip.add_argument("--out", default="runs/min_ip", help="output folder")
    min_ip.add_argument("--quiet", action="store_true", help="no per-fit progress lines")

    copy = commands.add_parser(
        "copy",
        help="copy-task length cliff of a small causal Transformer (seed 004)",
        description="Train a small causal Transformer (learned absolute positions) to "
        "copy random strings with lengths in a training range, then measure greedy "
        "exact-match copying inside and beyond that range and fit where it collapses. "
        "Prints the table and the fitted cliff, saves copy.png and copy.json.",
    )
    copy.add_argument("--quick", action="store_true",
                      help="the quick version (train lengths 5-20, d = 48, 1000 steps)")
    copy.add_argument("--train-min", type=int, default=None,
                      help="shortest training string (default 5)")
    copy.add_argument("--train-max", type=int, default=None,
                      help="longest training string (default 50, quick 20)")
    copy.add_argument("--eval-max", type=int, default=None,
                      help="longest evaluated string (default 3 x train max)")
    copy.add_argument("--steps", type=int, default=None,
                      help="training steps (default 5000, quick 1000)")
    copy.add_argument("--seed", type=int, default=0)
    copy.add_argument("--out", default="runs/copy", help="output folder")
    copy.add_argument("--quiet", action="store_true", help="no progress bar")
    reach = commands.add_parser(
        "reach",
        help="accessibility of random targets by cramming prompt vectors (seed 004)",
        description="Cram random target sequences into m prompt vectors of a frozen "
        "causal LM (the embedded default model unless --model is given), for a grid of "
        "m and target lengths; fit n50 per m, the slope of n50 against m, and compare "
        "it with the slope bound d ln(1 + 2r/eps) / ln|V|. Prints the tables, saves "
        "reach.png and reach.json.",
    )
    reach.add_argument("--model", default="default",
                       help="'default', a Hugging Face model folder, or a saved TinyCausalLM .pt")
    reach.add_argument("--memory", type=parse_ranks, default=[1, 2, 3, 4],
                       help="numbers of prompt vectors m, e.g. 1-4 or 1,2,4,8")
    reach.add_argument("--lengths", default="auto",
                       help="target lengths, e.g. 2-16 or 2,4,8 (default: auto, until "
                       "nobody is reached twice in a row)")
    reach.add_argument("--targets", type=int, default=16, help="random targets per point")
    reach.add_argument("--max-steps", type=int, default=3000)
    reach.add_argument("--patience", type=int, default=500)
    reach.add_argument("--precision", default=None,
                       help="eps of the bound: a number or a dtype name such as float16 "
                       "(default: the model's own dtype)")
    reach.add_argument("--quick", action="store_true",
                       help="600 steps, patience 200: seconds per point")
    reach.add_argument("--seed", type=int, default=0)
    reach.add_argument("--out", default="runs/reach", help="output folder")
    reach.add_argument("--quiet", action="store_true", help="no per-point progress lines")

    profile = commands.add_parser(
        "profile",
        help="per-head rank profile of a pretrained model (static QK kernel, realised "
        "attention, sinks, locality) and its reachability geometry",
        description="For every layer and head: the static query-key kernel's spectrum "
        "and rank measures, the realised attention matrices' energy rank averaged over "
        "inputs, the mass on the first token (sink), on the most-attended key and on a "
        "diagonal band (locality); then the hidden-state radius and the bounds of seed 004 "
        "that apply to the model. Prints the tables, saves profile.png (layer x head heat "
        "maps), profile.csv and profile.json. Runs offline.",
    )
    profile.add_argument("model", nargs="?", default="default",
                         help="'default' (embedded model), a packaged model "
                         "(all-MiniLM-L6-v2), a Hugging Face model folder or a .pt file")
    profile.add_argument("--texts", default=None,
                         help="a text file, one input per line (default: the package's "
                         "32 sample passages, or induction sequences for the default model)")
    profile.add_argument("--n-inputs", type=int, default=32,
                         help="number of default inputs")
    profile.add_argument("--max-length", type=int, default=64,
                         help="truncation length in tokens")
    profile.add_argument("--band", type=int, default=1,
                         help="half-width of the locality band (0: the diagonal)")
    profile.add_argument("--memory", type=int, default=1,
                         help="prompt vectors m for the reachability geometry")
    profile.add_argument("--tokens", type=int, default=8,
                         help="random tokens after the prompt vectors (geometry)")
    profile.add_argument("--precision", default=None,
                         help="eps of the bounds: a number or a dtype name such as float16 "
                         "(default: the model's own dtype)")
    profile.add_argument("--no-geometry", action="store_true",
                         help="skip the reachability geometry")
    profile.add_argument("--seed", type=int, default=0)
    profile.add_argument("--out", default="runs/profile", help="output folder")

    reproduce = commands.add_parser(
        "reproduce",
        help="run every reproduction, judge each claim, write a report",
        description="Run the reproductions (entropic, ladder, frontier, min-ip, reach, "
        "copy) at the quick (default) or full scale, cache each finished piece under "
        "--out (reused while its settings and seed match; --force recomputes) and "
        "write OUT/report.md: per piece the tables, the plot, and for every claim of "
        "the papers whether our measurement agrees. Prints a summary table.",
    )
    reproduce.add_argument("pieces", nargs="*", default=["all"],
                           help="'all' (the default) or some of: entropic ladder "
                           "frontier min-ip reach copy profile")
    reproduce.add_argument("--quick", action="store_true",
                           help="the quick settings, minutes on a laptop CPU (the default)")
    reproduce.add_argument("--full", action="store_true",
                           help="the papers' sizes (tens of minutes)")
    reproduce.add_argument("--out", default="runs/reproduce", help="output folder")
    reproduce.add_argument("--force", action="store_true",
                           help="recompute the pieces even when a valid cache exists")
    reproduce.add_argument("--seed", type=int, default=0)
    reproduce.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _save(out, name, records, plot, **metadata):
    """Save ``records`` as JSON and ``plot(path)`` as PNG under ``out``; print where."""
    from .experiments import save_records

    os.makedirs(out, exist_ok=True)
    png = os.path.join(out, f"{name}.png")
    json_path = os.path.join(out, f"{name}.json")
    plot(png)
    save_records(json_path, records, **metadata)
    print(f"saved {png} and {json_path}")


def _run_sweep(args):
    from .experiments import format_table, plot_sweep, rank_sweep

    start = time.perf_counter()
    result = rank_sweep(
        teacher=args.teacher, r_star=args.r_star, d=args.d, seq_len=args.seq_len,
        n_samples=args.n_samples, noise=args.noise, ranks=args.ranks,
        attention=args.attention, max_epochs=args.epochs, random_state=args.seed,
        verbose=0 if args.quiet else 1,
    )
    elapsed = time.perf_counter() - start
    cfg = result.config
    print(
        f"Rank sweep: {cfg['attention']} students on a {cfg['teacher']} teacher "
        f"(r* = {cfg['r_star']}, d = {cfg['d']}, L = {cfg['seq_len']}, "
        f"n = {cfg['n_samples']}, noise floor = {result.noise_floor:.4g}), "
        f"{cfg['max_epochs']} epochs, seed {cfg['random_state']}"
    )
    print(format_table(result.records, SWEEP_COLUMNS))
    print(
        f"estimated r* = {result.rank_} (true r* = {result.r_star}); "
        f"estimated noise floor = {result.noise_floor_:.4g}; {elapsed:.1f} s"
    )
    _save(
        args.out, "sweep", result.records, lambda path: plot_sweep(result, path),
        config=cfg, rank_=result.rank_, noise_floor=result.noise_floor,
        noise_floor_=result.noise_floor_, seconds=elapsed,
    )
    return 0


LADDER_COLUMNS = ["rung", "rank", "train_risk", "test_risk", "excess_risk", "excess_over_floor"]


def _run_ladder(args):
    from .experiments import format_table, interpolation_ladder, plot_ladder

    start = time.perf_counter()
    result = interpolation_ladder(
        n_samples=args.n_samples, seq_len=args.seq_len, d=args.d, r_star=args.r_star,
        noise=args.noise, max_epochs=args.epochs, random_state=args.seed,
        verbose=0 if args.quiet else 1,
    )
    elapsed = time.perf_counter() - start
    cfg = result.config
    print(
        f"Interpolation ladder on a fixed operator (r* = {cfg['r_star']}, d = {cfg['d']}, "
        f"L = {cfg['seq_len']}, n = {cfg['n_samples']} train / {cfg['n_test']} test, "
        f"noise floor = {result.noise_floor:.4g}), every rung at full rank"
    )
    print(format_table(result.records, LADDER_COLUMNS))
    b0 = result.records[0]["excess_risk"]
    worst = min(rec["excess_risk"] for rec in result.records[1:]) if len(result.records) > 1 else b0
    print(
        f"B0 excess {b0:.3g}; the input-conditioned rungs keep at least {worst:.3g} "
        f"({worst / result.noise_floor:.0f} times the noise floor); {elapsed:.1f} s"
    )
    _save(args.out, "ladder", result.records, lambda path: plot_ladder(result, path),
          config=cfg, noise_floor=result.noise_floor, seconds=elapsed)
    return 0


FRONTIER_COLUMNS = [
    "teacher", "r_star", "numerical_rank", "energy_rank", "mixer_energy_rank",
    "recovery_energy_rank", "recovery_numerical_rank",
]


def _run_frontier(args):
    from .experiments import format_table, plot_frontier, predictability_frontier

    start = time.perf_counter()
    result = predictability_frontier(
        r_stars=args.r_stars, d=args.d, seq_len=args.seq_len, n_samples=args.n_samples,
        noise=args.noise, kernel_scale=args.kernel_scale, recovery=not args.no_recovery,
        max_epochs=args.epochs, random_state=args.seed, progress=not args.quiet,
    )
    elapsed = time.perf_counter() - start
    cfg = result.config
    print(
        f"Predictability frontier (d = {cfg['d']}, L = {cfg['seq_len']}, "
        f"n = {cfg['n_samples']}, noise = {cfg['noise']}, kernel scale = "
        f"{cfg['kernel_scale']}): predicted r* from data alone, nan = not applicable"
    )
    print(format_table(result.records, FRONTIER_COLUMNS, floatfmt="{:.3g}"))
    for label in cfg["teachers"]:
        rows = [rec for rec in result.records if rec["teacher"] == label]
        exact = sum(rec["numerical_rank"] == rec["r_star"] for rec in rows)
        print(f"{label}: noise-aware numerical rank exact in {exact} of {len(rows)}")
    print(f"{elapsed:.1f} s")
    _save(args.out, "frontier", result.records, lambda path: plot_frontier(result, path),
          config=cfg, seconds=elapsed)
    return 0


MIN_IP_PHASE_COLUMNS = [
    "length", "model", "rank", "n_seeds", "error_mean", "error_min", "error_max",
]
MIN_IP_SEED_COLUMNS = ["length", "seed", "model", "rank", "error", "witness_error",
                       "anchor_error", "n_sequences"]
MIN_IP_OOD_COLUMNS = [
    "n_bits", "pool", "model", "rank", "n_seeds", "test_error_mean", "test_error_min",
    "test_error_max",
]


def _run_min_ip(args):
    from .experiments import (
        format_table,
        min_ip_ood_scaling,
        min_ip_phase_transition,
        plot_min_ip,
    )

    start = time.perf_counter()
    epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
    phase = min_ip_phase_transition(
        ranks=args.ranks, n_seeds=args.seeds, n_bits=args.n_bits,
        n_codewords=args.n_codewords, quick=args.quick, random_state=args.seed,
        progress=not args.quiet, **epochs,
    )
    cfg = phase.config
    print(
        f"Min-IP in-sample phase transition: {cfg['n_codewords']} codewords of "
        f"{cfg['n_bits']} bits, every witness with gap >= {cfg['min_gap']} plus anchors; "
        f"{cfg['n_seeds']} seeds; {cfg['max_epochs']} epochs, lr {cfg['lr']:g}, "
        f"batch {cfg['batch_size']}, hidden {cfg['hidden']} ({phase.seconds:.0f} s)"
    )
    print(format_table(phase.summary, MIN_IP_PHASE_COLUMNS, floatfmt="{:.3f}"))
    dense = [rec for rec in phase.records if rec["model"] == "dense"]
    if dense:
        print("dense softmax per seed: " + ", ".join(
            f"length {rec['length']} seed {rec['seed']}: {rec['error']:.3f}" for rec in dense))
    for length, rank in phase.transition.items():
        where = "none of the grid" if rank is None else f"r = {rank}"
        print(f"length {length}: transition (mean error <= {cfg['threshold']:g}) at {where}")
    bounds = [b for b in phase.rank_bound if b is not None]
    if bounds:
        print(f"certificate lower bound on an exact length-3 solution: r >= "
              f"{math.ceil(max(bounds) - 1e-9)} (per seed {[round(b, 2) for b in bounds]})")
    ood = None
    if not args.no_ood:
        ood = min_ip_ood_scaling(
            ranks=args.ranks, n_seeds=args.seeds, quick=args.quick,
            random_state=args.seed, progress=not args.quiet, **epochs,
        )
        ocfg = ood.config
        print(
            f"Min-IP out of distribution: train on one pool's family (gap >= "
            f"{ocfg['min_gap']}, anchors), test on a disjoint pool; {ocfg['n_seeds']} "
            f"seed(s); {ocfg['max_epochs']} epochs, lr {ocfg['lr']:g}, batch "
            f"{ocfg['batch_size']} ({ood.seconds:.0f} s)"
        )
        print(format_table(ood.summary, MIN_IP_OOD_COLUMNS, floatfmt="{:.3f}"))
        for row in ood.transition:
            where = ("none of the grid" if row["transition_rank"] is None
                     else f"r = {row['transition_rank']}")
            print(f"m = {row['n_bits']}, pools of {row['pool']}: transition (test error <= "
                  f"{ocfg['threshold']:g}) at {where}; best kernel "
                  f"{row['kernel_best_test_error']:.3f}, dense "
                  f"{row['dense_test_error_mean']:.3f}")
    elapsed = time.perf_counter() - start
    print(f"{elapsed:.1f} s")
    records = [dict(rec, experiment="in_sample") for rec in phase.records]
    if ood is not None:
        records += [dict(rec, experiment="ood") for rec in ood.records]
    _save(
        args.out, "min_ip", records, lambda path: plot_min_ip(phase, ood, path),
        config={"in_sample": phase.config, "ood": None if ood is None else ood.config},
        summary={"in_sample": phase.summary, "ood": None if ood is None else ood.summary},
        transition={"in_sample": {str(k): v for k, v in phase.transition.items()},
                    "ood": None if ood is None else ood.transition},
        rank_bound=phase.rank_bound, seconds=elapsed,
    )
    return 0


COPY_COLUMNS = ["length", "in_training_range", "exact_match", "token_accuracy"]


def _run_copy(args):
    from .experiments import COPY_SETTINGS, copy_length_cliff, format_table, plot_copy_cliff

    start = time.perf_counter()
    train_lengths = None
    if args.train_min is not None or args.train_max is not None:
        preset = COPY_SETTINGS["quick" if args.quick else "full"]["train_lengths"]
        train_lengths = (preset[0] if args.train_min is None else args.train_min,
                         preset[1] if args.train_max is None else args.train_max)
    result = copy_length_cliff(
        train_lengths=train_lengths, eval_max=args.eval_max, n_steps=args.steps,
        quick=args.quick, random_state=args.seed, progress=not args.quiet,
    )
    elapsed = time.perf_counter() - start
    cfg, cliff, training = result.config, result.cliff, result.training
    low, high = cfg["train_lengths"]
    print(
        f"Copy task: a causal Transformer (d = {cfg['d_model']}, {cfg['n_layers']} layers, "
        f"{cfg['n_heads']} heads, learned absolute positions) trained for {cfg['n_steps']} "
        f"steps of {cfg['batch_size']} (lr {cfg['lr']:g}) to copy random strings of "
        f"{low}-{high} tokens (vocabulary of {cfg['vocab_size']} ids, 4 of them special; loss "
        f"{training['initial']:.3g} -> {training['final']:.3g}); then {cfg['n_eval']} fresh "
        f"strings per length are copied greedily. Exact match: all tokens right "
        f"(<eos> not required); token accuracy: teacher-forced. Seed {cfg['random_state']}."
    )
    print(format_table(result.records, COPY_COLUMNS, floatfmt="{:.3f}"))
    if cliff["bracketed"]:
        print(
            f"Exact match falls through 1/2 at length {cliff['midpoint']:.1f} (logistic "
            f"width {cliff['scale']:.2g} tokens, sharpness width/midpoint "
            f"{cliff['sharpness']:.2g}); the last length with exact match >= 0.95 is "
            f"{cliff['last_high_length']:g} and the first with <= 0.05 is "
            f"{cliff['first_low_length']:g}."
        )
    else:
        print("Exact match never falls through 1/2 over these lengths: no cliff fitted.")
    print(f"{elapsed:.1f} s (training {training['seconds']:.1f} s)")
    _save(args.out, "copy", result.records, lambda path: plot_copy_cliff(result, path),
          config=cfg, cliff=cliff, training=training, seconds=elapsed)
    return 0


REACH_COLUMNS = ["n_memory", "length", "accessibility", "token_accuracy", "mean_steps"]
N50_COLUMNS = ["n_memory", "n50", "scale", "r2", "bracketed"]


def _precision_arg(text):
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _run_reach(args):
    from .experiments import accessibility_curves, format_table, plot_accessibility

    lengths = "auto" if args.lengths == "auto" else parse_ranks(args.lengths)
    result = accessibility_curves(
        model=args.model, n_memory=args.memory, lengths=lengths, n_targets=args.targets,
        max_steps=args.max_steps, patience=args.patience,
        precision=_precision_arg(args.precision), quick=args.quick,
        random_state=args.seed, progress=not args.quiet,
    )
    cfg, b = result.config, result.bound
    print(
        f"Cramming {cfg['n_targets']} random targets per point into m prompt vectors of "
        f"the frozen model {cfg['model']!r} (d = {b['width']}, |V| = {b['vocab_size']}); "
        f"AdamW lr {cfg['lr']:g}, at most {cfg['max_steps']} steps, patience "
        f"{cfg['patience']}, seed {cfg['random_state']}"
    )
    print(format_table(result.records, REACH_COLUMNS, floatfmt="{:.3g}"))
    print(format_table(result.n50, N50_COLUMNS, floatfmt="{:.3g}"))
    s = result.slope
    print(f"n50 = {s['slope']:.3g}·m + {s['intercept']:.3g} (R² = {s['r2']:.3f}, "
          f"{s['n_points']} points)")
    print(f"slope bound C = d ln(1 + 2r/eps) / ln|V| = {b['slope_bound']:.4g} tokens per "
          f"vector (box refinement {b['box_slope_bound']:.4g}) with r = {b['radius']:.3g}, "
          f"eps = {b['precision']:.3g}; theory / experiment = {b['ratio']:.3g} "
          f"(box {b['box_ratio']:.3g}); {result.seconds:.1f} s")
    _save(args.out, "reach", result.records, lambda path: plot_accessibility(result, path),
          config=cfg, n50=result.n50, slope=s, bound=b, seconds=result.seconds)
    return 0


def _read_texts(path):
    try:
        with open(path, encoding="utf-8") as handle:
            texts = [line.strip() for line in handle if line.strip()]
    except OSError as error:
        raise ValueError(f"cannot read --texts {path!r}: {error.strerror}") from None
    if not texts:
        raise ValueError(f"--texts {path!r} holds no non-empty line")
    return texts


def _run_profile(args):
    from .experiments import (
        PROFILE_COLUMNS,
        format_table,
        plot_head_profile,
        profile_heads,
        reachability_geometry,
        save_profile_csv,
    )
    from .nn import as_model_adapter
    from .nn._pretrained import _resolve

    module, tokenizer, label = _resolve(args.model)
    inputs = _read_texts(args.texts) if args.texts else None
    result = profile_heads(module, inputs, tokenizer=tokenizer, n_inputs=args.n_inputs,
                           max_length=args.max_length, band=args.band,
                           random_state=args.seed)
    cfg, base, summ = result.config, result.baselines, result.summary
    cfg["model"] = label
    kind = "causal" if cfg["causal"] else "bidirectional"
    extra = ", rotary positions (not in the static kernel)" if cfg["rotary"] else ""
    if cfg["qk_norm"]:
        extra += ", per-head query/key norms (the static kernel is approximate)"
    print(
        f"Per-head profile of {label} ({cfg['family']}, {kind}{extra}): {cfg['n_layers']} "
        f"layers x {cfg['n_heads']} heads, d = {cfg['d_model']}, d_head = {cfg['d_head']}, "
        f"{cfg['dtype']}; {cfg['n_inputs']} inputs ({cfg['inputs']}), "
        f"{cfg['min_length']}-{cfg['max_length']} tokens (mean {cfg['mean_length']:.1f})"
    )
    print(format_table(result.records, PROFILE_COLUMNS, floatfmt="{:.3g}"))
    print(
        f"uniform attention on the same inputs: energy rank {base['attn_energy_rank']:.3g}, "
        f"sink mass {base['sink_mass']:.3g}, max key mass {base['max_key_mass']:.3g}, band "
        f"mass {base['band_mass']:.3g}, entropy {base['entropy']:.3g}"
    )
    n = summ["n_heads_total"]
    print(
        f"{summ['sink_heads']} of {n} heads put more than {cfg['threshold']:g} of their "
        f"attention on the first token, {summ['any_sink_heads']} on some single key, "
        f"{summ['local_heads']} within +/-{cfg['band']} positions"
    )
    print(
        f"static kernel energy rank: median {summ['kernel_energy_rank_median']:.3g} of "
        f"d_head = {cfg['d_head']}; realised attention energy rank: median "
        f"{summ['attn_energy_rank_median']:.3g} (uniform {summ['uniform_attn_energy_rank']:.3g});"
        f" Spearman correlation across heads {summ['spearman_kernel_vs_attn']:.2f}"
    )
    geometry = None
    if not args.no_geometry:
        geometry = reachability_geometry(
            as_model_adapter(module, copy_model=False), n_memory=args.memory,
            n_tokens=args.tokens, precision=_precision_arg(args.precision),
            random_state=args.seed)
        g = geometry
        line = (f"reachability geometry ({g.kind}, m = {g.n_memory}, {g.n_prompts} random "
                f"prompts of {g.n_tokens} tokens): radius r = {g.radius:.4g}, eps = "
                f"{g.precision:.3g}; count bound ln N <= {g.log_count_bound:.4g} nats (box "
                f"{g.box_log_count_bound:.4g})")
        if math.isfinite(g.slope_bound):
            line += (f"; slope bound C = {g.slope_bound:.4g} tokens per vector (box "
                     f"{g.box_slope_bound:.4g})")
        print(line)
        for item in g.not_applicable:
            print(f"  does not apply: {item}")
    stem = os.path.join(args.out, "profile")
    save_profile_csv(result, stem + ".csv")
    _save(args.out, "profile", result.records, lambda path: plot_head_profile(result, path),
          config=cfg, baselines=base, summary=summ, kernel_spectra=result.kernel_spectra,
          geometry=None if geometry is None else dict(geometry), texts=result.texts,
          seconds=result.seconds)
    print(f"saved {stem}.csv")
    return 0


REPRODUCE_COLUMNS = ["piece", "seconds", "cached", "agrees", "partly", "does_not_agree"]


def _reproduce_command(args):
    """The command line equivalent to ``args``, for the report."""
    words = ["intrinsic-rank", "reproduce", *args.pieces,
             "--full" if args.full else "--quick", "--out", args.out]
    if args.force:
        words.append("--force")
    if args.seed != 0:
        words += ["--seed", str(args.seed)]
    if args.quiet:
        words.append("--quiet")
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + shlex.join(words)


def _run_reproduce(args):
    from .experiments import VERDICTS, format_table, reproduce

    if args.quick and args.full:
        raise ValueError("give --quick or --full, not both")
    run = reproduce(pieces=args.pieces, quick=not args.full, out=args.out,
                    force=args.force, random_state=args.seed, progress=not args.quiet,
                    command=_reproduce_command(args))
    rows = []
    for name, piece in run.pieces.items():
        counts = [sum(v.verdict == kind for v in piece.verdicts) for kind in VERDICTS]
        rows.append(dict(piece=name, seconds=piece.seconds, cached=piece.cached,
                         **dict(zip(REPRODUCE_COLUMNS[3:], counts))))
    print(format_table(rows, REPRODUCE_COLUMNS, floatfmt="{:.1f}"))
    for name, piece in run.pieces.items():
        for v in piece.verdicts:
            if v.verdict != "agrees":
                print(f"{name}: {v.verdict}: {v.claim} (measured: {v.measured})")
    print(f"{run.seconds:.1f} s; report {run.report}")
    return 0


def main(argv=None):
    """Entry point of the ``intrinsic-rank`` command.

    Parameters
    ----------
    argv : list of str or None
        Arguments (``None`` reads ``sys.argv``).

    Returns
    -------
    status : int
        Exit status (0 on success).
    """
    args = _build_parser().parse_args(argv)
    commands = {"sweep": _run_sweep, "ladder": _run_ladder, "frontier": _run_frontier,
                "min-ip": _run_min_ip, "copy": _run_copy,
                "reach": _run_reach, "profile": _run_profile, "reproduce": _run_reproduce}
    try:
        return commands[args.command](args)
    except (ValueError, ImportError) as error:
        # ImportError: an optional dependency or packaged model is not installed
        print(f"intrinsic-rank {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
