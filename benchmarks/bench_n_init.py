"""n_init, the restarts of AttentionRankEstimator: poor basins left, and the time they cost.

The measurement behind the default ``n_init``. On the rank-2 linear teacher of the
silent-bad-fold report (``make_attention_task("linear", n_samples=600, seq_len=8, d=6,
rank=2, noise=0.05)``, teacher seeds 0..19, ``random_state=0``):

* cross-validation: a rank-3 student on each of 3 folds (``KFold(3)``), the folds whose
  held-out R² stays below 0.99 and whether the fit warned that its restarts disagreed;
* sweeps: ``rank_grid=[1, ..., 6]``, the sweeps whose ``rank_`` is not the teacher's 2;
* the time of every fit, and of one larger sweep (d = 64, L = 32, n = 1,024, ranks 4, 8,
  16, 5 epochs), as a ratio to ``n_init=1`` in the same run.

    OMP_NUM_THREADS=1 python benchmarks/bench_n_init.py [--n-init 1,2,3] [--quick]
"""

import argparse
import os
import time
import warnings

import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task


def _fit(X, Y, **params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        est = AttentionRankEstimator(attention="linear", random_state=0, device=DEVICE,
                                     **params).fit(X, Y)
        seconds = time.perf_counter() - start
    warned = any(issubclass(w.category, ConvergenceWarning) and "restarts" in str(w.message)
                 for w in caught)
    return est, seconds, warned


def folds(seeds, n_init):
    bad = warned_bad = warned = 0
    seconds = 0.0
    for seed in seeds:
        X, Y = make_attention_task("linear", n_samples=600, seq_len=8, d=6, rank=2,
                                   noise=0.05, random_state=seed)
        for train, test in KFold(3).split(X):
            est, t, w = _fit(X[train], Y[train], rank=3, n_init=n_init)
            low = est.score(X[test], Y[test]) < 0.99
            bad, warned, warned_bad = bad + low, warned + w, warned_bad + (low and w)
            seconds += t
    return bad, warned_bad, warned, seconds


def sweeps(seeds, n_init):
    wrong = warned = 0
    seconds = 0.0
    for seed in seeds:
        X, Y = make_attention_task("linear", n_samples=600, seq_len=8, d=6, rank=2,
                                   noise=0.05, random_state=seed)
        est, t, w = _fit(X, Y, rank_grid=[1, 2, 3, 4, 5, 6], n_init=n_init)
        wrong, warned, seconds = wrong + (est.rank_ != 2), warned + w, seconds + t
    return wrong, warned, seconds


def large(n_init):
    X, Y = make_attention_task("softmax", n_samples=1024, seq_len=32, d=64, rank=8,
                               noise=0.1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        AttentionRankEstimator(rank_grid=[4, 8, 16], max_epochs=5, n_init=n_init,
                               random_state=0, device=DEVICE).fit(X, Y)
    return time.perf_counter() - start


def main(argv=None):
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-init", default="1,2,3")
    parser.add_argument("--quick", action="store_true", help="teacher seeds 0..5 only")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    seeds = range(6 if args.quick else 20)
    settings = [int(n) for n in args.n_init.split(",")]
    print(f"load {os.getloadavg()[0]:.2f} (1 min), threads {args.threads}, "
          f"teacher seeds 0..{len(seeds) - 1}")
    base = {}
    for n_init in settings:
        bad, warned_bad, warned, t_folds = folds(seeds, n_init)
        wrong, warned_sweeps, t_sweeps = sweeps(seeds, n_init)
        t_large = large(n_init)
        base.setdefault("folds", t_folds), base.setdefault("sweeps", t_sweeps)
        base.setdefault("large", t_large)
        print(f"n_init={n_init}: {bad} of {3 * len(seeds)} folds below R2 0.99 "
              f"({warned_bad} warned; {warned} folds warned in all), {wrong} of {len(seeds)} "
              f"sweeps at the wrong rank ({warned_sweeps} warned of restarts)")
        # the default (2) should leave no poor basin, for little more than one fit's time
        none_left = " (target <= 0)" if n_init > 1 else ""
        print(f"n_init_{n_init}_folds_below_099: {bad}{none_left}")
        print(f"n_init_{n_init}_wrong_sweeps: {wrong}{none_left}")
        cheap = " (target <= 1.5)" if n_init == 2 else ""
        print(f"n_init_{n_init}_fold_time_ratio: {t_folds / base['folds']:.2f}{cheap}")
        print(f"n_init_{n_init}_sweep_time_ratio: {t_sweeps / base['sweeps']:.2f}")
        print(f"n_init_{n_init}_d64_time_ratio: {t_large / base['large']:.2f}")
    print(f"load {os.getloadavg()[0]:.2f} (1 min)")


DEVICE = "cpu"

if __name__ == "__main__":
    main()
