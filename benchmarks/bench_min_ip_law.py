"""Time the Min-IP rank law (``intrinsic-rank min-ip-law``) and print its law table.

Run with the machine's threads pinned, e.g.::

    OMP_NUM_THREADS=1 python benchmarks/bench_min_ip_law.py --quick
    OMP_NUM_THREADS=1 python benchmarks/bench_min_ip_law.py            # m = 2..5
    python benchmarks/bench_min_ip_law.py --device cuda                # m = 2..8

The targets (issue [10]): m = 2..5 with every control in under 10 minutes on 2 CPU
cores, ``--quick`` under 3. The time is printed as a ratio to its target (below 1
meets it), beside the process CPU time and the load average, since a shared
machine stretches the wall clock.
"""

import argparse
import os
import time

import torch

from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.min_ip._law import min_ip_rank_law

TARGET_SECONDS = {"full": 600.0, "quick": 180.0}


def _load():
    try:
        with open("/proc/loadavg") as handle:
            return handle.read().split()[0]
    except OSError:  # pragma: no cover - not Linux
        return "n/a"


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
    load_before = _load()
    tic, cpu = time.perf_counter(), time.process_time()
    result = min_ip_rank_law(device=args.device, progress=True, **settings)
    seconds, cpu = time.perf_counter() - tic, time.process_time() - cpu
    target = TARGET_SECONDS["quick" if args.quick else "full"]
    print(f"torch threads {torch.get_num_threads()} (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}), device {args.device}, "
          f"load {load_before} -> {_load()}, settings {settings}")
    print(f"wall {seconds:.1f} s, CPU {cpu:.1f} s; ratio to the {target:.0f} s target: "
          f"{seconds / target:.2f} (wall), {cpu / target:.2f} (CPU)")
    for row in result.law:
        print(f"{row['task']:9s} {row['feature_map']:6s} x{row['n_heads']} m={row['m']}  "
              f"r_needed={row['r_needed']}  (<0.1%: {row['r_needed_01']})  "
              f"best error {row['best_error']:.4f}  at full rank "
              f"{[round(e, 5) for e in row['errors_at_full']]}  flagged {row['flagged']}")
    for fit in result.fits:
        print(f"slope {fit['task']} {fit['feature_map']} x{fit['n_heads']}: "
              f"{fit['slope']:.3f} ± {fit['slope_se']:.3f}")


if __name__ == "__main__":
    main()
