"""Benchmark: wall time of the quick Min-IP experiment, and the share spent outside torch.

What it runs: ``intrinsic-rank min-ip --quick`` (through :func:`intrinsic_rank.cli.main`,
so tables, plot and JSON included): the in-sample phase transition
(:func:`~intrinsic_rank.experiments.min_ip_phase_transition` with ``quick=True``:
feature ranks 1, 4, 16 in one batched sweep, dense reference, lengths 3 and 2,
2 seeds) and the out-of-distribution scaling
(:func:`~intrinsic_rank.experiments.min_ip_ood_scaling` with ``quick=True``).
Target: under 180 s on 2 CPU cores.

1. **Wall time.** One plain run, timed with ``time.perf_counter``.
2. **Share outside torch.** A second run with every call into torch timed: a
   :class:`torch.overrides.TorchFunctionMode` intercepts each torch function,
   tensor method and tensor operator (``a @ b``, ``a * b``, ...) called from
   Python, including ``Tensor.backward`` (so the whole backward pass run by the
   autograd engine) and the optimiser's ``torch._foreach_*`` updates, and adds
   the wall time of the call to a counter. While a mode handles a call it is
   switched off, so the calls torch makes internally are not counted twice.
   "Inside torch" is that counter; "outside torch" is the rest of the wall
   time: Python in skorch, scikit-learn, numpy, matplotlib and this package
   (the students' ``forward`` code between torch calls, batching, bookkeeping,
   data generation, tables and plots), and torch's own Python glue between
   its calls (the optimiser's ``step``, ``Module.__call__``).

   The interception itself costs a few microseconds per call, spent outside
   the timed calls, and the quick run makes millions of torch calls. So the
   share is computed from the instrumented run alone (a plain run and an
   instrumented one seldom see the same machine load): the cost per call
   ``c`` is calibrated on a loop of tiny torch calls with and without the
   mode, and ``outside = (T - inside - n c) / (T - n c)`` for ``n`` calls in
   ``T`` seconds. Calls with many arguments cost more than the calibration
   loop's, so this still leans high. The uncorrected ``(T - inside) / T`` is
   a looser upper bound and is printed too, as is the plain run's wall time next to the estimate
   ``T - n c`` of it (when they disagree, the load changed between the runs
   and the share is unreliable). The largest torch functions by time are
   listed.

torch is pinned to 2 intra-op threads (the 2-core target). On a machine where
other processes keep the cores busy, 2 threads can be many times slower than
1 (OpenMP workers wait for a core): run it on an idle machine, or pass
``--threads 1`` to see the difference. Nothing is asserted; the script prints
its numbers and exits 0.

Run::

    python benchmarks/bench_min_ip.py [--threads 2] [--no-profile]
"""

import argparse
import os
import tempfile
import time

import torch
from torch.overrides import TorchFunctionMode

TARGET_SECONDS = 180.0


class TorchTimer(TorchFunctionMode):
    """Adds up the wall time of every torch call made from Python.

    Examples
    --------
    >>> timer = TorchTimer()
    >>> with timer:
    ...     _ = torch.ones(3) @ torch.ones(3)
    >>> timer.calls
    3
    """

    def __init__(self):
        super().__init__()
        self.seconds = 0.0
        self.calls = 0
        self.by_function = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        start = time.perf_counter()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            elapsed = time.perf_counter() - start
            self.seconds += elapsed
            self.calls += 1
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
            self.by_function[name] = self.by_function.get(name, 0.0) + elapsed


def calibrate_overhead(n_calls=20000, repeats=5):
    """Seconds the :class:`TorchTimer` adds per intercepted call (best of ``repeats``)."""
    x = torch.zeros(1)

    def loop():
        start = time.perf_counter()
        for _ in range(n_calls):
            x.add(1.0)
        return time.perf_counter() - start

    costs = []
    for _ in range(repeats):
        plain = loop()
        with TorchTimer():
            timed = loop()
        costs.append((timed - plain) / n_calls)
    return max(0.0, min(costs))


def run_quick(out, device="cpu"):
    from intrinsic_rank.cli import main

    status = main(["min-ip", "--quick", "--out", out, "--quiet", "--device", device])
    if status != 0:  # pragma: no cover
        raise SystemExit(f"intrinsic-rank min-ip --quick failed with status {status}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2,
                        help="torch intra-op threads (default 2, the target machine)")
    parser.add_argument("--no-profile", action="store_true",
                        help="only the timed run, not the instrumented one")
    parser.add_argument("--device", default="cpu",
                        help="torch device of the experiment's fits, e.g. cpu or cuda "
                             "(default cpu)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run_quick(out, args.device)
        wall = time.perf_counter() - start
    print(f"\nmin_ip_quick_seconds: {wall:.1f} (target < {TARGET_SECONDS:g}; "
          f"threads = {torch.get_num_threads()}, cores = {os.cpu_count()}, "
          f"device = {args.device})")
    if args.no_profile:
        return 0

    per_call = calibrate_overhead()
    timer = TorchTimer()
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        with timer:
            run_quick(out, args.device)
        instrumented = time.perf_counter() - start
    inside, calls = timer.seconds, timer.calls
    overhead = calls * per_call
    estimated_plain = instrumented - overhead
    print(f"\ninstrumented run: {instrumented:.1f} s wall, {calls} torch calls timed, "
          f"{inside:.1f} s inside them; interception cost {per_call * 1e6:.2f} us per call "
          f"= {overhead:.1f} s")
    print(f"estimated plain wall time {estimated_plain:.1f} s (measured {wall:.1f} s)")
    print(f"share outside torch, uncorrected (upper bound): {1 - inside / instrumented:.3f}")
    print(f"share_outside_torch: {max(0.0, estimated_plain - inside) / estimated_plain:.3f}")
    print("largest torch functions by time:")
    top = sorted(timer.by_function.items(), key=lambda kv: -kv[1])[:10]
    for name, seconds in top:
        print(f"  {seconds:7.2f} s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
