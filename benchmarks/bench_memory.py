"""Peak memory of the adaptive rank search with the default restarts, each fit in a fresh process.

``AttentionRankEstimator(rank_grid="auto")`` with its default ``n_init="auto"`` on a
softmax teacher of float32 ``X`` and ``Y`` (built a chunk at a time, as
``bench_scale.py`` does), against ``n_init=1`` and ``n_init=2`` in the same run. Each
fit runs in its own subprocess, whose peak resident memory (``VmHWM``) is the whole
process's: Python, torch, the data the caller holds, and the fit. Printed per fit: that
peak, the RSS after the imports, and the fit's own part (its peak above the RSS just
before ``fit``).

Sizes: ``n = 4,096`` sequences of ``L = 32`` tokens of ``d = 64`` (``X`` and ``Y``
together 67 MB: the target is a whole-process peak of at most 700 MB), and around it
``n = 2,048`` and ``8,192`` at the same ``(L, d)`` and ``(L, d) = (64, 32)`` and
``(16, 128)`` at ``n = 4,096``, whose peaks are printed against the same fixed part plus
the data (not a separate target).

    OMP_NUM_THREADS=1 python benchmarks/bench_memory.py [--quick] [--epochs 3]
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_MB = 700.0
SIZES = ((4096, 32, 64), (2048, 32, 64), (8192, 32, 64), (4096, 64, 32), (4096, 16, 128))
QUICK_SIZES = ((4096, 32, 64),)


def worker(spec):
    """One fit in this process: its peak and the RSS at each step, as a JSON line."""
    import warnings

    import torch

    torch.set_num_threads(spec["threads"])
    from intrinsic_rank import AttentionRankEstimator

    sys.path.insert(0, HERE)
    from bench_scale import _rss_mb, float32_teacher

    warnings.simplefilter("ignore")
    imported = _rss_mb("VmRSS")
    X, Y = float32_teacher(spec["n"], spec["L"], spec["d"], max(1, spec["d"] // 8),
                           spec["seed"])
    before = _rss_mb("VmRSS")
    start = time.perf_counter()
    est = AttentionRankEstimator(rank_grid="auto", n_init=spec["n_init"],
                                 max_epochs=spec["epochs"], random_state=spec["seed"],
                                 device=spec["device"]).fit(X, Y)
    seconds = time.perf_counter() - start
    peak = _rss_mb("VmHWM")
    return dict(spec, seconds=seconds, import_mb=imported, before_fit_mb=before, peak_mb=peak,
                fit_mb=peak - before, data_mb=(X.nbytes + Y.nbytes) / 2**20,
                rank=int(est.rank_), rounds=est.search_rounds_)


def run(spec, timeout=3600):
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]))
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                          capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"worker failed for {spec}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 67 MB size only")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    print(f"load {os.getloadavg()[0]:.2f} (1 min), threads {args.threads}, "
          f"device {args.device}, {args.epochs} epochs per round")
    print(f"{'n':>6} {'L':>4} {'d':>4} {'data':>6} {'n_init':>6} {'import':>7} "
          f"{'peak':>6} {'fit':>5} {'rank':>5}  rounds (restarted ranks)")
    for n, L, d in QUICK_SIZES if args.quick else SIZES:
        peaks = {}
        for n_init in ("auto", 1, 2):
            rec = run(dict(n=n, L=L, d=d, n_init=n_init, epochs=args.epochs, seed=args.seed,
                           threads=args.threads, device=args.device))
            peaks[n_init] = rec["peak_mb"]
            rounds = "; ".join(f"{r['ranks']}" + (f" ({r['restarted']})" if r.get("restarted")
                                                  else "") for r in rec["rounds"])
            print(f"{n:6d} {L:4d} {d:4d} {rec['data_mb']:6.0f} {str(n_init):>6} "
                  f"{rec['import_mb']:7.0f} {rec['peak_mb']:6.0f} {rec['fit_mb']:5.0f} "
                  f"{rec['rank']:5d}  {rounds}")
        tag = f"n{n}_L{L}_d{d}"
        target = f" (target <= {TARGET_MB:.0f})" if (n, L, d) == SIZES[0] else ""
        print(f"auto_search_peak_mb_{tag}: {peaks['auto']:.0f}{target}")
        print(f"auto_search_peak_vs_n_init_1_{tag}: {peaks['auto'] / peaks[1]:.3f} "
              "(target <= 1.05)")
        print(f"n_init_2_search_peak_mb_{tag}: {peaks[2]:.0f}")
    print(f"load {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
