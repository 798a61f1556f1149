"""Time the Min-IP rank law (``intrinsic-rank min-ip-law``) and print its law table.

Run with the machine's threads pinned, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/bench_min_ip_law.py --quick
    OMP_NUM_THREADS=1 python benchmarks/bench_min_ip_law.py            # m = 2..5
    python benchmarks/bench_min_ip_law.py --device cuda                # m = 2..8

The targets (issue [10]): m = 2..5 with every control in under 10 minutes on 2 CPU
cores, ``--quick`` under 3.
"""

import argparse
import time

import torch

from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments._min_ip_law import min_ip_rank_law


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bits", type=int, nargs="+", default=None)
    args = parser.parse_args()
    exp = EXPERIMENTS["min-ip-law"]
    settings = dict(exp.quick if args.quick else exp.full)
    if args.device.startswith("cuda"):
        settings["n_bits"] = list(range(2, 9))
    if args.bits:
        settings["n_bits"] = args.bits
    tic = time.perf_counter()
    result = min_ip_rank_law(device=args.device, progress=True, **settings)
    seconds = time.perf_counter() - tic
    print(f"torch threads {torch.get_num_threads()}, device {args.device}, "
          f"settings {settings}: {seconds:.1f} s")
    for row in result.law:
        print(f"{row['task']:9s} {row['feature_map']:6s} m={row['m']}  r_needed={row['r_needed']}"
              f"  (<0.1%: {row['r_needed_01']})  best error {row['best_error']:.4f}"
              f"  flagged {row['flagged']}")
    for fit in result.fits:
        print(f"slope {fit['task']} {fit['feature_map']}: {fit['slope']:.3f} ± {fit['slope_se']:.3f}")


if __name__ == "__main__":
    main()
