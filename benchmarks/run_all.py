"""Run every benchmark and print one table of measured ratios against their targets.

Each benchmark runs in its own process (so its torch thread count and memory are
its own) and ends with machine-readable lines of the form
``name: value (target >= X)``; this script collects those lines. Every ratio is
measured against a baseline timed in the same run, never against a stored number.

Usage::

    python benchmarks/run_all.py            # every benchmark at its default size
    python benchmarks/run_all.py --quick    # the smaller settings (a few minutes)
    python benchmarks/run_all.py --only bench_reach bench_data_only
    python benchmarks/run_all.py --device cuda   # every benchmark's fits on a GPU

Run it on an otherwise idle machine: with two threads per process on two shared
cores, timings degrade by an order of magnitude.
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: benchmark -> (what its ratios compare, extra arguments in --quick mode)
BENCHMARKS = {
    "bench_sweep": ("batched rank sweep vs GridSearchCV; skorch vs a plain torch loop",
                    ["--quick"]),
    "bench_scale": ("r* at scale: rank_grid='auto' vs GridSearchCV (cv=5) and the full grid; "
                    "time and memory curves", ["--quick"]),
    "bench_data_only": ("training-free r* estimate vs training one student", ["--quick"]),
    "bench_reach": ("batched cramming vs one target at a time (16 targets)", []),
    "bench_min_ip": ("quick Min-IP reproduction: wall time and share outside torch",
                     ["--no-profile"]),
    "bench_roofline": ("achieved GFLOP/s of the sweep step, cramming and decoder cells "
                       "against the matmul peak of the same run", ["--skip-lm"]),
    "bench_n_init": ("AttentionRankEstimator restarts: poor basins left, the time they "
                     "cost over sizes, exact tasks, against n_init=1", ["--quick"]),
    "bench_memory": ("peak memory of rank_grid='auto' with the default restarts on 67 MB "
                     "of data and around it, each fit in a fresh process", ["--quick"]),
    "defaults_accuracy": ("default settings find r* on unnamed sizes", None),
    "bench_startup": ("intrinsic-rank --version and --help against python -c pass and "
                      "import torch", ["--repeat", "3"]),
    "bench_head_ranks": ("the map of r*_attn over SmolLM2's 270 heads against the "
                         "training-free map of the same run", ["--layers", "0,15,29"]),
    "bench_model_rank": ("r*_model of SmolLM2 (map, allocation, calibration, search; "
                         "healing) against one evaluation of its loss", ["--quick"]),
}

_LINE = re.compile(
    r"^(?P<name>[A-Za-z_]\w*): (?P<value>[-+\d.eE]+|True|False)"
    r"(?: \(target (?P<op>>=|<=|<|>) (?P<target>[-+\d.eE]+))?"
)
_OPS = {">=": float.__ge__, "<=": float.__le__, "<": float.__lt__, ">": float.__gt__}


def parse_metrics(text):
    """The ``name: value (target op X)`` lines of a benchmark's output.

    Parameters
    ----------
    text : str
        The benchmark's standard output.

    Returns
    -------
    metrics : list of dict
        ``name``, ``value`` (float, or bool), ``op`` and ``target`` (None when the
        line states no target) and ``met`` (None without a target).

    Examples
    --------
    >>> parse_metrics("noise\\nreach_batched_speedup: 4.70 (target >= 5)\\nsame_rstar: True")
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'name': 'reach_batched_speedup', 'value': 4.7, 'op': '>=', 'target': 5.0, 'met': False},
     {'name': 'same_rstar', 'value': True, 'op': None, 'target': None, 'met': None}]
    """
    metrics = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        raw = match["value"]
        value = raw == "True" if raw in ("True", "False") else float(raw)
        target = None if match["target"] is None else float(match["target"])
        met = None if target is None else bool(_OPS[match["op"]](float(value), target))
        metrics.append(dict(name=match["name"], value=value, op=match["op"],
                            target=target, met=met))
    return metrics


def run_benchmark(name, quick, threads, device="cpu"):
    """Run one benchmark script in a subprocess; return its metrics, time and status.

    Every benchmark takes ``--device``, which is forwarded as given.
    """
    extra = BENCHMARKS[name][1] if quick else []
    command = [sys.executable, os.path.join(HERE, f"{name}.py"), *extra, "--device", device]
    if name not in ("defaults_accuracy", "bench_data_only"):
        command += ["--threads", str(threads)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    return dict(name=name, seconds=seconds, returncode=done.returncode,
                metrics=parse_metrics(done.stdout), stdout=done.stdout, stderr=done.stderr)


def format_summary(runs):
    """One table: benchmark, metric, measured, target, met."""
    rows = [("benchmark", "metric", "measured", "target", "met", "seconds")]
    for run in runs:
        if run["returncode"] != 0:
            rows.append((run["name"], "FAILED (exit %d)" % run["returncode"], "", "", "no",
                         f"{run['seconds']:.0f}"))
            continue
        for i, m in enumerate(run["metrics"]):
            value = str(m["value"]) if isinstance(m["value"], bool) else f"{m['value']:.3g}"
            target = "" if m["target"] is None else f"{m['op']} {m['target']:g}"
            met = "" if m["met"] is None else ("yes" if m["met"] else "NO")
            rows.append((run["name"] if i == 0 else "", m["name"], value, target, met,
                         f"{run['seconds']:.0f}" if i == 0 else ""))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller settings")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), default=None)
    parser.add_argument("--threads", type=int, default=2, help="torch threads per benchmark")
    parser.add_argument("--device", default="cpu",
                        help="torch device passed to every benchmark (default cpu)")
    parser.add_argument("--show-output", action="store_true",
                        help="print each benchmark's full output too")
    args = parser.parse_args(argv)
    names = args.only or [n for n, (_, quick_args) in BENCHMARKS.items()
                          if not (args.quick and quick_args is None)]
    print(f"load average before start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs; {args.threads} threads per benchmark; "
          f"device {args.device}"
          + (" (quick)" if args.quick else ""))
    runs = []
    for name in names:
        print(f"running {name}: {BENCHMARKS[name][0]} ...", flush=True)
        run = run_benchmark(name, args.quick, args.threads, args.device)
        if args.show_output or run["returncode"] != 0:
            print(run["stdout"], run["stderr"], sep="\n")
        runs.append(run)
    print()
    print(format_summary(runs))
    missed = [m["name"] for run in runs for m in run["metrics"] if m["met"] is False]
    failed = [run["name"] for run in runs if run["returncode"] != 0]
    print(f"\n{sum(len(r['metrics']) for r in runs)} metrics; targets missed: "
          f"{', '.join(missed) or 'none'}; failed benchmarks: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
