"""Speed of reachability: batched cramming, the decoder-cell Monte Carlo, one curve point.

Three measurements on the embedded default model, each against a baseline
measured in the same run:

1. **Batching** (issue [4/6]): both sides run the same
   :class:`~intrinsic_rank.ReachabilityEstimator` code with the paper's
   protocol; the batched side fits all targets in one estimator (one
   optimisation, active targets drop out as they finish), the baseline fits
   one estimator per target. Each target's trajectory is the same on both
   sides (its memory depends only on the seed and the target, and AdamW is
   elementwise), which the script checks. It prints targets per second of
   each and their ratio (target: >= 5x at 16 targets).
2. **The decoder-cell Monte Carlo** (issue [9]):
   :func:`~intrinsic_rank.inspection.decoder_cell_proportions` with the estimator's
   sample count (``2**17``) and memory cap (``max_bytes=2**27``), batched in
   chunks on the device, against a per-sample Python loop over a small count
   (the same rules, one point at a time); and the time of
   :func:`~intrinsic_rank.bounds.cell_decay` (the closed form, the fitted
   median and their 100-replicate bootstrap).
3. **One accessibility-curve point** (issue [9]): ``--point-targets`` (20, the
   paper's) random targets at one ``(m, n)`` with the full protocol, the cell
   estimate included, as :func:`~intrinsic_rank.experiments.accessibility_curves`
   runs it; its time per target against one target fitted alone, and the share
   the cell estimate adds (the same point with ``n_cell_samples=0``).

4. **The decoder cells of a real LM** (``--lm-cells smollm2-135m``): the same
   ``2**17`` points through a 49,152 x 576 head three ways in one run: the
   baseline (the whole ``chunk x |V|`` float32 logits of both rules per chunk,
   the code before the vocabulary blocks), the blocked float32 head
   (``reduced_precision=None``) and the bfloat16 head with its float32
   re-check (the default); seconds, the ratios against the baseline, whether
   the counts equal the float32 ones, and the empty cells (``c <= ln n``).

Run on an otherwise idle machine::

    python benchmarks/bench_reach.py                 # 16 targets, length 8, m = 2
    python benchmarks/bench_reach.py --targets 32 --length 12 --n-memory 4
    python benchmarks/bench_reach.py --device cuda
    python benchmarks/bench_reach.py --skip-batching # sections 2 and 3 only
    python benchmarks/bench_reach.py --threads 1 --lm-cells smollm2-135m  # section 4 only
"""

import argparse
import time

import numpy as np
import torch

from intrinsic_rank import ReachabilityEstimator, bounds
from intrinsic_rank.datasets import make_random_targets
from intrinsic_rank.inspection import decoder_cell_proportions
from intrinsic_rank.nn import as_causal_lm, random_prompt_hidden_states

TARGET = 5.0  # issue [4/6]: at least 5x more targets per second at 16 targets
N_CELL_SAMPLES = 2**17  # reachability_geometry's default; the estimator's is 0 (no cells)
MAX_BYTES = 2**27  # the estimator's memory cap of one Monte Carlo chunk


def _timed(fn, repeats=1):
    """Best wall time of ``repeats`` calls and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def bench_batching(lm, args):
    X = make_random_targets(args.targets, args.length, lm.vocab_size, random_state=args.seed)
    params = dict(model=lm, n_memory=args.memory, max_epochs=args.max_epochs,
                  patience=args.patience, n_radius_prompts=16, n_cell_samples=0,
                  random_state=args.seed, device=args.device)
    ReachabilityEstimator(**dict(params, max_epochs=20)).fit(X[:2])  # warm-up
    t_batched, batched = _timed(lambda: ReachabilityEstimator(**params).fit(X))
    t_single, single = _timed(
        lambda: [ReachabilityEstimator(**params).fit(X[i:i + 1]) for i in range(len(X))])

    reached_single = np.array([est.reached_[0] for est in single])
    steps_single = np.array([est.n_steps_[0] for est in single])
    agree = int((reached_single == batched.reached_).sum())
    print(f"1. batching: {args.targets} random targets of length {args.length}, m = "
          f"{args.memory}, max {args.max_epochs} steps, patience {args.patience}")
    print(f"{'mode':<14}{'seconds':>9}{'targets/s':>11}{'steps run':>11}{'reached':>9}")
    print(f"{'batched':<14}{t_batched:>9.2f}{args.targets / t_batched:>11.2f}"
          f"{int(batched.n_steps_.max()):>11d}{int(batched.reached_.sum()):>9d}")
    print(f"{'one by one':<14}{t_single:>9.2f}{args.targets / t_single:>11.2f}"
          f"{int(steps_single.sum()):>11d}{int(reached_single.sum()):>9d}")
    print(f"speed-up (batched / one by one, targets per second): {t_single / t_batched:.2f}x "
          f"(target >= {TARGET:g}x)")
    print(f"same reached flag for {agree} of {args.targets} targets; step counts equal for "
          f"{int((steps_single == batched.n_steps_).sum())}")
    return t_single / t_batched


def _loop_rules(W, b, half_norm, points):
    """The baseline: both decision rules one point at a time."""
    out = np.empty((len(points), 2), dtype=np.int64)
    for i, h in enumerate(points):
        logits = W @ h
        out[i, 0] = int(torch.argmax(logits + b if b is not None else logits))
        out[i, 1] = int(torch.argmax(logits - half_norm))
    return out


def bench_cells(lm, args):
    states = random_prompt_hidden_states(lm, args.memory, args.length - 1, n_prompts=256,
                                         random_state=args.seed)
    run = dict(n_samples=N_CELL_SAMPLES, random_state=args.seed, max_bytes=MAX_BYTES,
               device=args.device)
    decoder_cell_proportions(lm, states, **dict(run, n_samples=4096))  # warm-up
    t_cells, cells = _timed(lambda: decoder_cell_proportions(lm, states, **run), repeats=3)
    t_decay, decay = _timed(lambda: bounds.cell_decay(cells, random_state=args.seed))

    flat = np.asarray(states, dtype=np.float64).reshape(-1, lm.width)
    low, high = flat.min(axis=0), flat.max(axis=0)
    points = bounds.sample_box(low, high, args.loop_samples, random_state=args.seed)
    W, b = lm.output_head()
    with torch.no_grad():
        W = W.detach().to(args.device, torch.float32)
        b = None if b is None else b.detach().to(args.device, torch.float32)
        half_norm = 0.5 * (W * W).sum(dim=1)
        pts = torch.as_tensor(points, dtype=torch.float32, device=args.device)
        t_loop, _ = _timed(lambda: _loop_rules(W, b, half_norm, pts))
    per_batched = t_cells / N_CELL_SAMPLES
    per_loop = t_loop / args.loop_samples
    rows = max(1, MAX_BYTES // (4 * (3 * lm.vocab_size + lm.width)))
    print(f"\n2. decoder-cell Monte Carlo on the default model (d = {lm.width}, |V| = "
          f"{lm.vocab_size}, box of {len(flat)} final hidden states, both rules)")
    print(f"{'mode':<32}{'points':>9}{'seconds':>10}{'µs/point':>10}")
    print(f"{'batched (memory cap 2^27 B)':<32}{N_CELL_SAMPLES:>9d}{t_cells:>10.3f}"
          f"{1e6 * per_batched:>10.2f}")
    print(f"{'per-sample loop':<32}{args.loop_samples:>9d}{t_loop:>10.3f}"
          f"{1e6 * per_loop:>10.2f}")
    print(f"chunks of at most {rows} points under the cap; batched is "
          f"{per_loop / per_batched:.0f}x faster per point; cell_decay (closed form, fitted "
          f"median, 100-replicate bootstrap): {t_decay:.3f} s; c = {decay.closed_form:.4g} ± "
          f"{decay.closed_form_se:.2g}, {decay.n_empty} empty cells")
    return t_cells, t_decay, per_loop / per_batched


def bench_point(lm, args):
    n_targets = args.point_targets
    X = make_random_targets(n_targets, args.length, lm.vocab_size, random_state=args.seed)
    # the cells asked for explicitly (the estimator's default is 0: no cells)
    params = dict(model=lm, n_memory=args.memory, max_epochs=args.max_epochs,
                  patience=args.patience, random_state=args.seed, device=args.device,
                  n_cell_samples=N_CELL_SAMPLES)
    t_point, point = _timed(lambda: ReachabilityEstimator(**params).fit(X))
    t_bare, _ = _timed(lambda: ReachabilityEstimator(**dict(params, n_cell_samples=0)).fit(X))
    t_one, one = _timed(lambda: ReachabilityEstimator(**params).fit(X[:1]))
    print(f"\n3. one accessibility-curve point: {n_targets} targets, m = {args.memory}, n = "
          f"{args.length}, max {args.max_epochs} steps, patience {args.patience}, "
          "cells included")
    print(f"{'fit':<34}{'seconds':>9}{'s/target':>10}{'reached':>9}")
    print(f"{'the point (' + str(n_targets) + ' targets)':<34}{t_point:>9.2f}"
          f"{t_point / n_targets:>10.3f}{int(point.reached_.sum()):>9d}")
    print(f"{'the point without the cells':<34}{t_bare:>9.2f}{t_bare / n_targets:>10.3f}")
    print(f"{'one target alone':<34}{t_one:>9.2f}{t_one:>10.3f}{int(one.reached_.sum()):>9d}")
    print(f"time per target: the point is {t_one / (t_point / n_targets):.1f}x faster than one "
          f"target alone; the cell estimate adds {t_point - t_bare:.2f} s "
          f"({100 * (t_point - t_bare) / t_point:.0f}% of the point)")
    return t_point


def _baseline_cells(W, b, half_norm, draw_blocks, n, cap):
    """The baseline of section 4: each chunk's full float32 logits, both rules."""
    V, d = W.shape
    rows = max(1, cap // (4 * (3 * V + d)))
    counts = torch.zeros(V, dtype=torch.int64)
    nearest = torch.zeros(V, dtype=torch.int64)
    with torch.no_grad():
        for host in draw_blocks:
            for lo in range(0, len(host), rows):
                h = host[lo:lo + rows].to(torch.float32)
                scores = h @ W.T
                counts += torch.bincount((scores if b is None else scores + b).argmax(1),
                                         minlength=V)
                nearest += torch.bincount((scores - half_norm).argmax(1), minlength=V)
    return counts.numpy(), nearest.numpy()


def bench_lm_cells(args):
    """Section 4: a real LM's cells, baseline against blocked float32 and bfloat16."""
    from intrinsic_rank._validation import keyed_seed

    tic = time.perf_counter()
    lm = as_causal_lm(args.lm_cells, progress=False)
    t_load = time.perf_counter() - tic
    states = random_prompt_hidden_states(lm, 1, 8, n_prompts=256, random_state=args.seed)
    flat = np.asarray(states, dtype=np.float64).reshape(-1, lm.width)
    low, high = flat.min(axis=0), flat.max(axis=0)
    n = args.lm_samples
    W, b = lm.output_head()
    W = W.detach().float()
    b = None if b is None else b.detach().float()
    half_norm = 0.5 * (W * W).sum(dim=1)
    block = max(1, 2**22 // lm.width)  # the sampler's host blocks (same points)
    blocks = (torch.from_numpy(bounds.sample_box(low, high, min(block, n - start),
                                                 keyed_seed(args.seed, i)))
              for i, start in enumerate(range(0, n, block)))
    t_base, (base, base_near) = _timed(lambda: _baseline_cells(W, b, half_norm, blocks, n,
                                                               MAX_BYTES))
    run = dict(n_samples=n, random_state=args.seed, max_bytes=MAX_BYTES)
    t_exact, exact = _timed(lambda: decoder_cell_proportions(lm, flat, **run,
                                                             reduced_precision=None))
    t_fast, fast = _timed(lambda: decoder_cell_proportions(lm, flat, **run))
    same = [int(np.abs(c - base).sum() // 2) for c in (exact.counts, fast.counts)]
    same_near = [int(np.abs(c - base_near).sum() // 2)
                 for c in (exact.nearest.counts, fast.nearest.counts)]
    print(f"\n4. decoder cells of {args.lm_cells} (d = {lm.width}, |V| = {lm.vocab_size}, "
          f"box of {len(flat)} final hidden states, {n} points, both rules, "
          f"{torch.get_num_threads()} thread(s); load {t_load:.1f} s)")
    print(f"{'head':<40}{'seconds':>9}{'x baseline':>12}{'moved (argmax, nearest)':>26}")
    print(f"{'baseline: full float32 logits':<40}{t_base:>9.1f}{1.0:>12.2f}{'-':>26}")
    print(f"{'float32, 4096-row vocabulary blocks':<40}{t_exact:>9.1f}"
          f"{t_base / t_exact:>12.2f}{f'{same[0]}, {same_near[0]}':>26}")
    print(f"{'bfloat16 + float32 re-check (default)':<40}{t_fast:>9.1f}"
          f"{t_base / t_fast:>12.2f}{f'{same[1]}, {same_near[1]}':>26}")
    print(f"moved: points whose cell differs from the baseline's (half the L1 distance of the "
          f"counts); the bfloat16 head re-scored {fast.check.rechecked / n:.2f} candidates "
          f"per point in float32 and agreed with float32 on "
          f"{fast.check.points - fast.check.mismatched} of {fast.check.points} checked points")
    print(f"empty cells: {fast.n_empty} of {lm.vocab_size} with {n} points, so the decay "
          f"c <= ln n = {np.log(n):.2f} (ln|V| = {np.log(lm.vocab_size):.2f})")
    return t_base, t_exact, t_fast


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=16)
    parser.add_argument("--length", type=int, default=8)
    parser.add_argument("--n-memory", dest="memory", type=int, default=2)
    parser.add_argument("--max-epochs", "--max-steps", dest="max_epochs", type=int, default=3000,
                        help="most optimisation steps per target (one epoch is one step)")
    parser.add_argument("--patience", type=int, default=500)
    parser.add_argument("--point-targets", type=int, default=20,
                        help="targets of the accessibility-curve point (the paper's 20)")
    parser.add_argument("--loop-samples", type=int, default=2048,
                        help="points of the per-sample loop baseline of the cell estimate")
    parser.add_argument("--skip-batching", action="store_true",
                        help="skip section 1 (batched against one by one)")
    parser.add_argument("--lm-cells", default=None, metavar="MODEL",
                        help="run only section 4, the decoder cells of this model (e.g. "
                        "smollm2-135m), on the CPU")
    parser.add_argument("--lm-samples", type=int, default=N_CELL_SAMPLES,
                        help="Monte Carlo points of section 4 (default 2**17)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (CI: 2 cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu",
                        help="torch device of every fit, e.g. cpu or cuda (default cpu)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.lm_cells is not None:
        print(f"{args.threads} torch threads, device cpu")
        t_base, t_exact, t_fast = bench_lm_cells(args)
        print(f"\nreach_lm_cells_seconds: {t_fast:.1f} (baseline {t_base:.1f}, blocked "
              f"float32 {t_exact:.1f}; {t_base / t_fast:.2f}x)")
        return
    lm = as_causal_lm("default").to(args.device)  # loaded once, shared by every fit
    print(f"{args.threads} torch threads, device {args.device}\n")
    speedup = None if args.skip_batching else bench_batching(lm, args)
    t_cells, t_decay, cell_speedup = bench_cells(lm, args)
    t_point = bench_point(lm, args)
    print()
    if speedup is not None:
        print(f"reach_batched_speedup: {speedup:.2f} (target >= {TARGET:g})")
    print(f"reach_cells_seconds: {t_cells:.3f} ({N_CELL_SAMPLES} points; decay "
          f"{t_decay:.3f} s; {cell_speedup:.0f}x the per-sample loop)")
    print(f"reach_point_seconds: {t_point:.2f} ({args.point_targets} targets)")


if __name__ == "__main__":
    main()
