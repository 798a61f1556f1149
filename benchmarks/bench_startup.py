"""Start-up of the command line: ``intrinsic-rank --version`` and ``--help`` against bare Python.

Each command runs in a fresh interpreter, ``--repeat`` times; the best time of each
is kept (the least disturbed by other work on the machine). The baselines are timed
in the same run: ``python -c pass`` (the interpreter alone) and ``python -c "import
torch"`` (what a command that trains pays anyway), so the ratios do not depend on the
machine's speed.

Usage::

    python benchmarks/bench_startup.py [--repeat 5]

Prints ``name: value (target ...)`` lines for ``benchmarks/run_all.py``.
"""

import argparse
import os
import subprocess
import sys
import time


def best_time(code, repeat):
    """The best wall time of ``python -c code`` over ``repeat`` fresh interpreters."""
    env = dict(os.environ)
    best = float("inf")
    for _ in range(repeat):
        tic = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - tic)
    return best


def _cli(argv):
    return ("import intrinsic_rank.cli as c\n"
            f"try:\n    c.main({argv!r})\nexcept SystemExit:\n    pass\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5,
                        help="fresh interpreters per command (default 5)")
    parser.add_argument("--device", default="cpu",
                        help="accepted as every benchmark does; start-up touches no device")
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP_NUM_THREADS of the timed interpreters (default 1)")
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    python = best_time("pass", args.repeat)
    version = best_time(_cli(["--version"]), args.repeat)
    help_ = best_time(_cli(["sweep", "--help"]), args.repeat)
    torch = best_time("import torch", args.repeat)
    print(f"python -c pass: {python:.3f} s; --version: {version:.3f} s; "
          f"sweep --help: {help_:.3f} s; import torch: {torch:.3f} s "
          f"(best of {args.repeat}; load {os.getloadavg()[0]:.1f}; device {args.device} "
          "not used)")
    print(f"startup_version_seconds: {version:.3f}")
    print(f"startup_version_over_python: {version / python:.2f}")
    print(f"startup_help_over_python: {help_ / python:.2f}")
    # --version must cost well under what torch's import alone costs
    print(f"startup_version_over_torch_import: {version / torch:.3f} (target <= 0.5)")


if __name__ == "__main__":
    main()
