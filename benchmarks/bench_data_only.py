"""Benchmark: training-free r* estimation against training a student to the floor.

1. On one linear-QK teacher (default ``d = 16``, ``n = 4096``, ``L = 8``,
   ``r* = 4``, noise 0.1), times ``EnergyEffectiveRank(method="data")`` with the
   value map known against fitting one ``AttentionRankEstimator`` student of rank
   ``r*`` (default training settings) on the same data, and prints the ratio
   (target: the data-only estimate at least 50x faster) together with both
   answers: the data fit's estimated ``r*`` and the student's training risk
   against the noise floor.
2. How the cost of the lifted fit (value map unknown, ``d (d + 1) / 2 * d``
   unknowns per output channel) grows with ``d``.

Each time is the median of ``--repeats`` runs. torch is pinned to 2 threads
(the 2-core CPU the targets were set on); nothing is asserted on wall-clock.

Run::

    python benchmarks/bench_data_only.py [--quick]
"""

import argparse
import statistics
import time

import torch

torch.set_num_threads(2)  # deliberate: the 2-core target machine

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank  # noqa: E402
from intrinsic_rank.datasets import make_attention_task  # noqa: E402

TARGET = 50.0


def median_time(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=8)
    parser.add_argument("--n-samples", type=int, default=4096)
    parser.add_argument("--rank-star", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, d up to 12 for the growth table")
    parser.add_argument("--device", default="cpu",
                        help="torch device of the trained student (the data fits run in "
                             "numpy), e.g. cpu or cuda (default cpu)")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats

    X, Y, info = make_attention_task(
        "linear", n_samples=args.n_samples, seq_len=args.seq_len, d=args.d,
        rank=args.rank_star, noise=0.1, random_state=0, return_info=True,
    )
    EnergyEffectiveRank(method="data", value_map=info.value_map).fit(X[:64], Y[:64])  # warm-up
    data_time, data = median_time(
        lambda: EnergyEffectiveRank(method="data", value_map=info.value_map).fit(X, Y), repeats
    )
    student_time, student = median_time(
        lambda: AttentionRankEstimator(attention="linear", rank=args.rank_star, random_state=0,
                                       device=args.device).fit(X, Y),
        repeats,
    )
    print(f"linear teacher: d={args.d} L={args.seq_len} n={args.n_samples} r*={args.rank_star} "
          f"noise floor={info.noise_floor:.4g}; threads={torch.get_num_threads()}; "
          f"student on {args.device}")
    print(f"  data-only (V known): {data_time:.4f} s -> r* estimate {data.rank_} "
          f"(energy {data.energy_effective_rank_:.3f}, "
          f"noise-aware numerical {data.numerical_rank_})")
    print(f"  one student of rank r* trained to the floor: {student_time:.2f} s -> training "
          f"risk {student.train_risk_:.4g} (floor {info.noise_floor:.4g})")
    speedup = student_time / data_time
    print(f"data_only_speedup: {speedup:.0f} (target >= {TARGET:g})")

    print("\nlifted fit (value map unknown): cost against d "
          f"(n={args.n_samples}, L={args.seq_len}, r*=2)")
    print(f"{'d':>4} {'unknowns/channel':>17} {'seconds':>9} {'r* estimate':>12}")
    for d in (4, 6, 8, 12) if args.quick else (4, 6, 8, 12, 16):
        Xd, Yd = make_attention_task("linear", n_samples=args.n_samples, seq_len=args.seq_len,
                                     d=d, rank=2, noise=0.1, random_state=1)
        seconds, est = median_time(lambda: EnergyEffectiveRank(method="data").fit(Xd, Yd), repeats)
        print(f"{d:>4} {est.n_unknowns_:>17} {seconds:>9.3f} {est.numerical_rank_:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
