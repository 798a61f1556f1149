"""Benchmark: the batched rank sweep against a grid search, and skorch's overhead.

What it measures, on one attention teacher with a known rank ``r*``
(:func:`intrinsic_rank.datasets.make_attention_task`):

1. **Sweep vs grid search.** ``AttentionRankEstimator(rank_grid=[1..8]).fit`` trains
   the whole rank grid in one batched optimisation. The baseline is what a user
   would otherwise write: ``GridSearchCV`` over ``rank`` with one single-rank fit
   per candidate, scored on the *same* held-out part the sweep uses (a
   ``PredefinedSplit`` rebuilt from the estimator's seed). Both excess-risk
   curves and both ``r*`` estimates are printed with the wall-clock times and
   their ratio (target: the sweep at least 5x faster). A grid-search student of
   rank ``r`` starts from the same initialisation and sees the same batches as
   the sweep's rank-``r`` slot, so the two curves should agree up to float32
   rounding. (The grid search scores with the MSE over all target entries:
   scikit-learn's ``"neg_mean_squared_error"`` rejects 3-D targets.)
2. **skorch overhead.** The same batched student trained by a plain PyTorch
   loop (Adam, same learning rate, batch size, epochs, initialisation and batch
   order, summed per-rank MSE) against the estimator's sweep fit on the same
   training part (target: at most 1.3x). The estimator's time also includes
   input validation, the split and the post-fit held-out scoring, so the ratio
   is an upper bound on skorch's own overhead. Both runs do the same math, so
   their final training losses should agree closely.

Each timing is the median of ``--repeats`` runs, after an untimed warm-up fit
(the first optimiser of a process pays a one-off lazy import). Every fit uses
``--batch-size`` (256) explicitly. Nothing is asserted on wall-clock time: the
script prints its numbers and exits 0.

Threads: torch is pinned to 2 intra-op threads (``DEFAULT_THREADS``) so that the
numbers are comparable from machine to machine and match the 2-core CPU the
targets were set on; ``--threads`` overrides it. With as many threads as
cores, any other busy process (a test run, say) slows the runs down many times
over: the per-run times are printed so that a noisy measurement shows.

Run::

    python benchmarks/bench_sweep.py            # full run (a few minutes)
    python benchmarks/bench_sweep.py --quick    # smoke run (~30 epochs, n=1024)
    python benchmarks/bench_sweep.py --device cuda   # every fit and the plain loop on a GPU
"""

import argparse
import os
import statistics
import time

import torch

# Deliberate: pin torch to 2 threads before any work so timings are reproducible
# and match the 2-core target machine (override with --threads).
DEFAULT_THREADS = 2
torch.set_num_threads(DEFAULT_THREADS)

import numpy as np  # noqa: E402
from sklearn.metrics import make_scorer, mean_squared_error  # noqa: E402
from sklearn.model_selection import GridSearchCV, PredefinedSplit  # noqa: E402

from intrinsic_rank import AttentionRankEstimator  # noqa: E402
from intrinsic_rank._validation import draw_seed  # noqa: E402
from intrinsic_rank.datasets import make_attention_task  # noqa: E402
from intrinsic_rank.estimators._net import RankwiseMSELoss  # noqa: E402
from intrinsic_rank.estimators._selection import select_rank  # noqa: E402
from intrinsic_rank.nn import make_student  # noqa: E402

MAX_GRID_RANK = 8
SPEEDUP_TARGET = 5.0
OVERHEAD_TARGET = 1.3


# -- set-up -----------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="softmax", choices=["linear", "softmax"])
    parser.add_argument("--n-samples", type=int, default=None,
                        help="sequences (default 2048; 1024 with --quick)")
    parser.add_argument("--d", type=int, default=16, help="token dimension")
    parser.add_argument("--seq-len", type=int, default=8)
    parser.add_argument("--rank-star", type=int, default=4, help="teacher rank r*")
    parser.add_argument("--epochs", type=int, default=None,
                        help="training epochs (default 150; 30 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=256,
                        help="mini-batch size of every fit (default 256)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed runs per measurement, median reported "
                             "(default 3; 1 with --quick)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help=f"torch intra-op threads (default {DEFAULT_THREADS})")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: fewer epochs, samples and repeats")
    parser.add_argument("--device", default="cpu",
                        help="torch device of every fit and of the plain loop, e.g. cpu or "
                             "cuda (default cpu)")
    args = parser.parse_args(argv)
    quick = args.quick
    if args.n_samples is None:
        args.n_samples = 1024 if quick else 2048
    if args.epochs is None:
        args.epochs = 30 if quick else 150
    if args.repeats is None:
        args.repeats = 1 if quick else 3
    args.ranks = list(range(1, min(MAX_GRID_RANK, args.d) + 1))
    return args


def timed(name, fn, repeats):
    """Median wall-clock seconds of ``repeats`` calls of ``fn`` and its last result.

    Prints every run's time: with torch's threads pinned to the machine's cores,
    any other process competing for the CPU slows a run down by far more than
    its share, which shows up here as a wide spread.
    """
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    spread = max(times) / min(times)
    note = "  <- wide spread: was the CPU busy?" if spread > 1.5 else ""
    print(f"  timed {name}: " + ", ".join(f"{t:.2f}" for t in times) + f" s{note}")
    return statistics.median(times), result


def heldout_indices(n, args, validation_fraction):
    """The held-out part of a sweep with ``random_state=args.seed`` (sorted indices).

    Rebuilt like the estimator does it: the first ``round(fraction * n)`` entries
    of a permutation seeded by the seed the estimator draws from ``random_state``.
    """
    n_heldout = int(round(validation_fraction * n))
    order = np.random.RandomState(draw_seed(args.seed)).permutation(n)
    return np.sort(order[:n_heldout])


def _flat_mse(y_true, y_pred):
    # scikit-learn's MSE refuses 3-D targets; average over all entries, as a sweep does.
    n = len(y_true)
    return mean_squared_error(np.reshape(y_true, (n, -1)), np.reshape(y_pred, (n, -1)))


# -- the three timed runs -------------------------------------------------------
def run_sweep(X, Y, args):
    est = AttentionRankEstimator(attention=args.kind, rank_grid=args.ranks,
                                 max_epochs=args.epochs, batch_size=args.batch_size,
                                 random_state=args.seed, device=args.device)
    return est.fit(X, Y)


def run_grid_search(X, Y, args, heldout):
    test_fold = np.full(len(X), -1)
    test_fold[heldout] = 0
    search = GridSearchCV(
        AttentionRankEstimator(attention=args.kind, max_epochs=args.epochs,
                               batch_size=args.batch_size, random_state=args.seed,
                               device=args.device),
        {"rank": args.ranks},
        cv=PredefinedSplit(test_fold),
        refit=False,
        n_jobs=1,
        scoring=make_scorer(_flat_mse, greater_is_better=False),
        error_score="raise",
    )
    return search.fit(X, Y)


def run_plain_loop(X_train, Y_train, args, seed, d_out, lr):
    """The sweep's batched student trained by a bare PyTorch loop.

    Same initialisation (``seed``), same shuffled batch order (a generator seeded
    by ``seed``, a new permutation per epoch), same Adam, same summed per-rank MSE.
    Returns the batch-size-weighted mean training loss of the last epoch (what
    skorch records as ``train_loss``).
    """
    module = make_student(args.kind, d=args.d, d_out=d_out, ranks=args.ranks,
                          seq_len=args.seq_len, init_scale=0.1, random_state=seed)
    module.to(X_train.device).train()
    criterion = RankwiseMSELoss()
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    n, batch_size = len(X_train), args.batch_size
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=generator).to(X_train.device)
        total = 0.0
        for start in range(0, n, batch_size):
            index = order[start:start + batch_size]
            optimizer.zero_grad()
            loss = criterion(module(X_train[index]), Y_train[index]).sum()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
    return total / n


def warm_up(X, Y, args):
    """One untimed tiny fit of each kind: the first ``torch.optim`` optimiser of a
    process lazily imports ``torch._dynamo`` (about a second), which would
    otherwise be charged to whichever measurement runs first."""
    small = min(len(X), 64)
    warm = argparse.Namespace(**{**vars(args), "epochs": 1})
    run_sweep(X[:small], Y[:small], warm)
    X_t = torch.tensor(X[:small], dtype=torch.float32, device=args.device)
    Y_t = torch.tensor(Y[:small], dtype=torch.float32, device=args.device)
    run_plain_loop(X_t, Y_t, warm, seed=0, d_out=Y.shape[-1], lr=3e-3)


# -- report -----------------------------------------------------------------------
def print_curves(ranks, sweep_excess, grid_excess):
    print(f"{'rank':>4}  {'sweep excess':>13}  {'grid excess':>13}  {'|diff|':>10}")
    for r, s, g in zip(ranks, sweep_excess, grid_excess):
        print(f"{r:>4}  {s:>13.6f}  {g:>13.6f}  {abs(s - g):>10.2e}")
    print(f"max |sweep excess - grid excess| = "
          f"{np.max(np.abs(sweep_excess - grid_excess)):.3e}")


def sweep_vs_grid_search(X, Y, args, heldout, tol):
    """Time the sweep and the grid search and print both excess-risk curves.

    Returns the last fitted sweep, its median time, the speedup and both r*.
    """
    sweep_time, est = timed("sweep", lambda: run_sweep(X, Y, args), args.repeats)
    sweep_excess = np.array([record["excess_risk"] for record in est.sweep_])
    selected = est.sweep_[est.rank_index_]["heldout_risk"]
    split_ok = np.isclose(_flat_mse(Y[heldout], est.predict(X[heldout])), selected)
    print(f"held-out part rebuilt from the seed matches the sweep's: {split_ok}")

    grid_time, search = timed(
        "grid search", lambda: run_grid_search(X, Y, args, heldout), args.repeats
    )
    results = search.cv_results_
    order = np.argsort([int(r) for r in results["param_rank"]])
    grid_risk = -np.asarray(results["mean_test_score"], dtype=float)[order]
    # the estimator's own rule, applied to the grid search's held-out risks
    selection = select_rank(args.ranks, grid_risk, np.mean(np.var(Y[heldout], axis=0)), tol)
    grid_excess, grid_rstar = selection["excess"], args.ranks[selection["index"]]

    speedup = grid_time / sweep_time
    print()
    print_curves(args.ranks, sweep_excess, grid_excess)
    print(f"r* (sweep)       = {est.rank_}")
    print(f"r* (grid search) = {grid_rstar}   (teacher r* = {args.rank_star})")
    print(f"sweep time       = {sweep_time:.2f} s")
    print(f"grid-search time = {grid_time:.2f} s")
    print(f"speedup (grid / sweep) = {speedup:.2f}x   (target >= {SPEEDUP_TARGET:g}x)")
    return est, sweep_time, speedup, (est.rank_, grid_rstar)


def skorch_overhead(X, Y, args, train, est, sweep_time):
    """Time the plain torch loop on the sweep's training part; print the comparison."""
    X_train = torch.tensor(X[train], dtype=torch.float32, device=args.device)
    Y_train = torch.tensor(Y[train], dtype=torch.float32, device=args.device)
    seed = draw_seed(args.seed)  # the seed the estimator drew: same init, same batches
    plain_time, plain_loss = timed(
        "plain loop",
        lambda: run_plain_loop(X_train, Y_train, args, seed, Y.shape[-1], est.lr),
        args.repeats,
    )
    overhead = sweep_time / plain_time
    est_loss = est.history_[-1]["train_loss"]
    print()
    print(f"plain torch loop ({len(train)} training sequences) = {plain_time:.2f} s")
    print(f"estimator sweep fit (timed above, same part)  = {sweep_time:.2f} s  "
          "(includes validation, the split and the post-fit held-out scoring)")
    print(f"overhead (estimator / plain) = {overhead:.2f}x   "
          f"(target <= {OVERHEAD_TARGET:g}x)")
    print(f"final training loss (summed over ranks): estimator {est_loss:.6f}, "
          f"plain loop {plain_loss:.6f}, relative difference "
          f"{abs(est_loss - plain_loss) / abs(plain_loss):.1e} "
          "(same math, so they should agree closely)")
    return overhead


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"bench_sweep: kind={args.kind} n={args.n_samples} L={args.seq_len} "
          f"d={args.d} r*={args.rank_star} epochs={args.epochs} ranks={args.ranks} "
          f"batch_size={args.batch_size} seed={args.seed} repeats={args.repeats} "
          f"threads={torch.get_num_threads()} device={args.device}"
          + (" (quick)" if args.quick else ""))
    print("load average before start: "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    X, Y = make_attention_task(args.kind, n_samples=args.n_samples,
                               seq_len=args.seq_len, d=args.d, rank=args.rank_star,
                               noise=0.1, random_state=args.seed)
    defaults = AttentionRankEstimator()
    heldout = heldout_indices(len(X), args, defaults.validation_fraction)
    train = np.setdiff1d(np.arange(len(X)), heldout)
    warm_up(X, Y, args)

    est, sweep_time, speedup, (sweep_rstar, grid_rstar) = sweep_vs_grid_search(
        X, Y, args, heldout, defaults.tol
    )
    overhead = skorch_overhead(X, Y, args, train, est, sweep_time)

    print()
    print(f"sweep_vs_gridsearch_speedup: {speedup:.2f} (target >= {SPEEDUP_TARGET:g})")
    print(f"skorch_overhead: {overhead:.2f} (target <= {OVERHEAD_TARGET:g})")
    print(f"same_rstar: {sweep_rstar == grid_rstar}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
