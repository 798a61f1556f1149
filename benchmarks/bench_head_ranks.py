"""Benchmark: one real-head sweep of ``head-ranks``, its time, memory and share of the matmul peak.

The workload of one head of SmolLM2-135M in ``intrinsic-rank head-ranks``: the
rotary causal student (:class:`~intrinsic_rank.nn.RotarySoftmaxStudent`) at the
head's sizes, ``d = 576``, ``head_dim = 64``, ``L = 64``, about 800 sequences, the
query ranks ``1, 2, 4, ..., 64`` trained as one batched run, values known. The
teacher is a synthetic rotary head of query rank 8 at the same sizes (the time of
an epoch depends on the shapes, not on where ``Y`` came from), so the benchmark
needs no model file. Two settings are timed: the planted-rank sweep (a random
start, 150 epochs at ``lr = 6e-3``, batch 32) and the unplanted one (a warm start, 40
epochs at ``lr = 1e-3``, batch 64), as the experiment runs them.

Printed: seconds per sweep against the 180 s target, the peak memory the fit
added (``ru_maxrss`` after against before), and the achieved rate of the training
steps against a large fp32 ``torch.matmul`` timed in the same process just before.

Useful work per step (batch ``B``, ``R`` slots of ranks ``r_s``, ``S = sum r``,
width ``d``, head width ``h``): the one projection of the tokens on every slot's
query factor and keys ``2 B L d (S + R h)`` (x2 with its weight gradient), the
query factors ``C`` ``2 B L h S`` (x3: both operands need a gradient), the scores
``2 B L^2 h R`` (x3), the softmax ``5 B R L^2`` (+4), the mixing with the known
values ``2 B L^2 h R`` (x2: the values need none), the loss ``3 B R L h`` (+2).
The known values ``X W_V`` (once per step, no gradient) and the rotations are
left out.
"""

import argparse
import os
import resource
import sys
import time

import numpy as np
import torch

RANKS = (1, 2, 4, 8, 16, 32, 64)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--n", type=int, default=800, help="sequences (default: 800)")
    parser.add_argument("--compute-dtype", default="float32",
                        help="the estimator's compute_dtype (default: float32)")
    parser.add_argument("--settings", default="planted,warm",
                        help="comma-separated: planted, warm (default: both)")
    return parser.parse_args(argv)


def rss_mib():
    """Peak resident memory of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def matmul_peak(device, n=2048, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        if device != "cpu":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def step_flops(B, L, d, h, ranks):
    R, S = len(ranks), sum(ranks)
    projection = 2 * B * L * d * (S + R * h) * 2
    query_out = 2 * B * L * h * S * 3
    scores = 2 * B * L * L * h * R * 3
    softmax = 9 * B * R * L * L
    mixing = 2 * B * L * L * h * R * 2
    loss = 5 * B * R * L * h
    return projection + query_out + scores + softmax + mixing + loss


def rotary_task(n, d=576, h=64, L=64, k=8, seed=0):
    from intrinsic_rank.nn import RotarySoftmaxStudent

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, L, d)).astype(np.float32)
    Wv = rng.standard_normal((d, h)) / np.sqrt(d)
    teacher = RotarySoftmaxStudent(d=d, d_out=h, ranks=[k], rope_theta=100000.0, init_scale=4.0,
                                   random_state=seed, value_map=Wv)
    with torch.no_grad():
        Y = teacher(torch.as_tensor(X))[:, 0].numpy()
        weights = {"query": teacher.query_projection()[0].numpy(),
                   "key": teacher.key[0].numpy()}
    return X, Y, Wv, weights


def time_sweep(args, setting, X, Y, Wv, weights):
    import warnings

    from intrinsic_rank import AttentionRankEstimator

    planted = setting == "planted"
    est = AttentionRankEstimator(
        attention="softmax", positional="rope", causal=True, rope_theta=100000.0,
        value_map=Wv, rank_grid=list(RANKS), noise_floor=0.0, batch_size=32 if planted else 64,
        max_epochs=150 if planted else 40, lr=6e-3 if planted else 1e-3,
        init_weights=None if planted else weights, compute_dtype=args.compute_dtype,
        random_state=0, device=args.device)
    before = rss_mib()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, Y)
    seconds = time.perf_counter() - start
    n_train = len(X) - int(round(0.2 * len(X)))
    batch = est.batch_size
    work = est.n_epochs_ * n_train / batch * step_flops(batch, X.shape[1], X.shape[2],
                                                        Y.shape[2], RANKS)
    return seconds, rss_mib() - before, work / seconds / 1e9, est.rank_


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), device {args.device}, "
          f"load average {os.getloadavg()[0]:.2f}")
    X, Y, Wv, weights = rotary_task(args.n)
    print(f"data: X {X.shape} ({X.nbytes / 2**20:.0f} MiB), Y {Y.shape}; ranks {list(RANKS)}")
    for setting in args.settings.split(","):
        peak = matmul_peak(args.device)
        seconds, memory, rate, rank = time_sweep(args, setting, X, Y, Wv, weights)
        print(f"head_sweep_{setting}_seconds: {seconds:.1f} (target <= 180; r* found {rank}, "
              f"planted 8)")
        print(f"head_sweep_{setting}_peak_memory_mib: {memory:.0f}")
        print(f"head_sweep_{setting}_fraction_of_fp32_peak: {rate / peak:.2f} ({rate:.1f} of "
              f"{peak:.1f} GFLOP/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
