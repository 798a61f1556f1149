"""n_init, the restarts of AttentionRankEstimator: poor basins left, and the time they cost.

The measurement behind the default ``n_init="auto"`` (restarts where a fit needs them),
against ``n_init=1`` (every rank trained once) and ``n_init=2`` (two restarts of every
rank in one batched run), every ratio against ``n_init=1`` timed in the same run:

1. **Poor basins.** On the rank-2 linear teacher of the silent-bad-fold report
   (``make_attention_task("linear", n_samples=600, seq_len=8, d=6, rank=2,
   noise=0.05)``, teacher seeds 0..19, ``random_state=0``): a rank-3 student on each of
   3 folds (``KFold(3)``), the folds whose held-out R² stays below 0.99; and sweeps
   ``rank_grid=[1, ..., 6]``, those whose ``rank_`` is not the teacher's 2.
2. **The cost over sizes.** Softmax teachers of rank ``d / 8`` at ``(d, L)`` = (16, 8),
   (32, 16), (64, 32) (``n = 2,048``; ``4,096`` at (64, 32), the size of the report),
   float32 data: a sweep over the powers of two up to ``d`` and a single full-rank fit,
   ``--epochs`` epochs each (default 10), interleaved with ``n_init=1``, the fastest of
   ``--repeat`` runs (default 2). Which ranks ``"auto"`` restarted is printed.

Every time is measured twice: the wall clock, and the CPU time of this process
(``time.process_time``, one thread), which other work on a shared machine does not
inflate; the targets are read on the CPU time, the wall-clock ratios printed beside.
3. **Exact tasks** (not with ``--quick``): the Min-IP worst case at ``m = 4`` (all 4,096
   sequences of three 4-bit tokens, ``make_min_ip(seq_len=3, n_bits=4,
   exhaustive=True)``), ``AttentionRankEstimator(attention="kernel", rank=16)`` with its
   defaults and ``random_state`` 0 and 1: the share of sequences wrong after rounding.
   A restart is kept by its training risk, which need not be the one that gets every
   sequence right.

    OMP_NUM_THREADS=1 python benchmarks/bench_n_init.py [--quick] [--skip basins sizes exact]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task, make_min_ip
from intrinsic_rank.metrics import exact_sequence_error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_scale import float32_teacher  # noqa: E402

SETTINGS = [1, "auto", 2]
SIZES = ((16, 8, 2048), (32, 16, 2048), (64, 32, 4096))
QUICK_SIZES = ((16, 8, 1024), (64, 32, 1024))


def _fit(X, Y, **params):
    """The fitted estimator, its (CPU time, wall time) in seconds, and whether it warned
    that its restarts disagreed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wall, cpu = time.perf_counter(), time.process_time()
        est = AttentionRankEstimator(random_state=0, device=DEVICE, **params).fit(X, Y)
        seconds = np.array([time.process_time() - cpu, time.perf_counter() - wall])
    warned = any(issubclass(w.category, ConvergenceWarning) and "restarts" in str(w.message)
                 for w in caught)
    return est, seconds, warned


def _load():
    return f"load {os.getloadavg()[0]:.2f}"


def basins(seeds):
    """Folds below R² 0.99 and sweeps at the wrong rank, and their time, per setting."""
    out = {n: dict(bad=0, warned=0, wrong=0, t_folds=np.zeros(2), t_sweeps=np.zeros(2),
                   fold_restarts=0, sweep_restarts=0) for n in SETTINGS}
    for seed in seeds:
        X, Y = make_attention_task("linear", n_samples=600, seq_len=8, d=6, rank=2,
                                   noise=0.05, random_state=seed)
        for train, test in KFold(3).split(X):
            for n_init in SETTINGS:  # interleaved: the same load for each setting
                est, t, w = _fit(X[train], Y[train], attention="linear", rank=3,
                                 n_init=n_init)
                low = est.score(X[test], Y[test]) < 0.99
                out[n_init]["bad"] += low
                out[n_init]["warned"] += w
                out[n_init]["t_folds"] += t
                out[n_init]["fold_restarts"] += len(est.search_rounds_[0].get("restarted", []))
        for n_init in SETTINGS:
            est, t, _ = _fit(X, Y, attention="linear", rank_grid=[1, 2, 3, 4, 5, 6],
                             n_init=n_init)
            out[n_init]["wrong"] += est.rank_ != 2
            out[n_init]["t_sweeps"] += t
            out[n_init]["sweep_restarts"] += len(est.search_rounds_[0].get("restarted", []))
    base = out[1]
    for n_init in SETTINGS:
        row = out[n_init]
        folds, sweeps = row["t_folds"] / base["t_folds"], row["t_sweeps"] / base["t_sweeps"]
        print(f"n_init={n_init}: {row['bad']} of {3 * len(seeds)} folds below R2 0.99 "
              f"({row['warned']} folds warned of restarts), {row['wrong']} of {len(seeds)} "
              f"sweeps at the wrong rank; CPU time {folds[0]:.2f}x (folds), {sweeps[0]:.2f}x "
              f"(sweeps); wall clock {folds[1]:.2f}x, {sweeps[1]:.2f}x"
              + (f"; auto restarted {row['fold_restarts']} fold(s) and {row['sweep_restarts']} "
                 "rank(s) of the sweeps" if n_init == "auto" else ""))
    for n_init in [n for n in SETTINGS if n != 1]:
        row = out[n_init]
        print(f"n_init_{n_init}_folds_below_099: {row['bad']} (target <= 0)")
        print(f"n_init_{n_init}_wrong_sweeps: {row['wrong']} (target <= 0)")
        cheap = " (target <= 1.5)" if n_init == "auto" else ""
        print(f"n_init_{n_init}_fold_cpu_time_ratio: "
              f"{row['t_folds'][0] / base['t_folds'][0]:.2f}{cheap}")
        print(f"n_init_{n_init}_sweep_cpu_time_ratio: "
              f"{row['t_sweeps'][0] / base['t_sweeps'][0]:.2f}{cheap}")


def sizes(size_list, epochs, repeat):
    """The time of the default restarts against one fit, sweep and single rank, per size."""
    for d, L, n in size_list:
        X, Y = float32_teacher(n, L, d, max(1, d // 8), seed=0)
        grid = [r for r in (1, 2, 4, 8, 16, 32, 64, 128) if r < d] + [d]
        for what, params in (("sweep", dict(rank_grid=grid)), ("single", dict(rank=d))):
            params.update(max_epochs=epochs)
            _fit(X[:64], Y[:64], **params)  # untimed warm-up
            times = {n_init: [] for n_init in SETTINGS}  # (CPU, wall) of each run
            restarted = None
            for _ in range(repeat):
                for n_init in SETTINGS:
                    est, t, _ = _fit(X, Y, n_init=n_init, **params)
                    times[n_init].append(t)
                    if n_init == "auto":
                        restarted = [r for rnd in est.search_rounds_
                                     for r in rnd.get("restarted", [])]
            fastest = {k: np.min(times[k], axis=0) for k in SETTINGS}  # CPU and wall apart
            ratio = {k: fastest[k] / fastest[1] for k in SETTINGS}
            print(f"{what} d={d} L={L} n={n} ({epochs} epochs): n_init=1 {fastest[1][0]:.1f} s "
                  "CPU; CPU time " + ", ".join(f"{k} {ratio[k][0]:.2f}x" for k in SETTINGS[1:])
                  + "; wall clock " + ", ".join(f"{k} {ratio[k][1]:.2f}x" for k in SETTINGS[1:])
                  + f" (auto restarted ranks {restarted}); {_load()}")
            for k in SETTINGS[1:]:
                target = " (target <= 1.5)" if k == "auto" else ""
                print(f"n_init_{k}_{what}_cpu_cost_d{d}_L{L}: {ratio[k][0]:.2f}{target}")


def exact(seeds=(0, 1)):
    """The Min-IP worst case at m = 4, rank 16: the share of sequences wrong after rounding."""
    X, Y = make_min_ip(seq_len=3, n_bits=4, exhaustive=True)
    best = {}
    for n_init in SETTINGS:
        errors = []
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = AttentionRankEstimator(attention="kernel", rank=16, n_init=n_init,
                                             random_state=seed, device=DEVICE).fit(X, Y)
            errors.append(100 * exact_sequence_error(Y, est.predict(X)))
        best[n_init] = min(errors)
        print(f"min-ip m=4 rank 16, n_init={n_init}: "
              + ", ".join(f"seed {s} {e:.2f}% wrong" for s, e in zip(seeds, errors))
              + f"; {_load()}")
    for k in SETTINGS:
        target = " (target <= 0.1)" if k == "auto" else ""
        print(f"min_ip_m4_n_init_{k}_best_seed_percent_wrong: {best[k]:.2f}{target}")


def main(argv=None):
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="teacher seeds 0..5, two small sizes, no Min-IP section")
    parser.add_argument("--skip", nargs="*", default=[], choices=["basins", "sizes", "exact"])
    parser.add_argument("--epochs", type=int, default=10, help="epochs of the size section")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--n-init", default="1,auto,2",
                        help="the settings compared (1 first: the baseline of every ratio)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    DEVICE = args.device
    SETTINGS[:] = [n if n == "auto" else int(n) for n in args.n_init.split(",")]
    if SETTINGS[0] != 1 or "auto" not in SETTINGS:
        parser.error("--n-init must start with 1 (the baseline) and include auto")
    torch.set_num_threads(args.threads)
    print(f"{_load()} (1 min), threads {args.threads}, device {args.device}")
    if "basins" not in args.skip:
        basins(range(6 if args.quick else 20))
    if "sizes" not in args.skip:
        sizes(QUICK_SIZES if args.quick else SIZES, args.epochs, args.repeat)
    if "exact" not in args.skip and not args.quick:
        exact()
    print(f"{_load()} (1 min)")


DEVICE = "cpu"

if __name__ == "__main__":
    main()
