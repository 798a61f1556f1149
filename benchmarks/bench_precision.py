"""precision="auto" against "float32": warm fit time of a softmax sweep at d = 16, 64, 128.

One process: every size is fitted in both precisions (after a warm-up fit), and the
ratio float32 time / auto time is printed with the precision ``auto`` chose and why
(``precision_reason_``), plus whether ``rank_`` agreed. Ratios are within one run; the
machine load is printed (``uptime``), since a shared machine moves absolute times.

    OMP_NUM_THREADS=1 python benchmarks/bench_precision.py [--device cuda] [--quick]
"""

import argparse
import os
import time
import warnings

import torch

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="fewer samples and epochs")
    parser.add_argument("--dims", default="16,64,128")
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    n, L, epochs = (512, 16, 3) if args.quick else (4096, 32, 5)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), threads {torch.get_num_threads()}, "
          f"device {args.device}, n={n}, L={L}, epochs={epochs}")
    for d in [int(x) for x in args.dims.split(",")]:
        X, Y = make_attention_task("softmax", n_samples=n, seq_len=L, d=d, rank=4,
                                   noise=0.1, random_state=0)
        grid = [r for r in (1, 2, 4, 8, 16, 32, 64, 128) if r <= d]
        times, fits = {}, {}
        for precision in ("float32", "auto", "float32", "auto"):  # second pass is timed
            est = AttentionRankEstimator(attention="softmax", rank_grid=grid,
                                         max_epochs=epochs, random_state=0,
                                         device=args.device, precision=precision)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                est.fit(X, Y)
                times[precision] = time.perf_counter() - start
            fits[precision] = est
        auto = fits["auto"]
        print(f"auto_over_float32_speed_d{d}: {times['float32'] / times['auto']:.3f} "
              f"(float32 {times['float32']:.2f} s, auto {times['auto']:.2f} s, "
              f"auto chose {auto.precision_}; same rank_: "
              f"{auto.rank_ == fits['float32'].rank_}) -- {auto.precision_reason_}")


if __name__ == "__main__":
    main()
