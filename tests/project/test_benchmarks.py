"""benchmarks/run_all.py: parsing the benchmarks' metric lines and the summary table."""

import importlib.util
import pathlib

import pytest

PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py"
spec = importlib.util.spec_from_file_location("run_all", PATH)
run_all = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_all)


def test_parse_metrics_reads_values_targets_and_verdicts():
    text = """header line
sweep_vs_gridsearch_speedup: 2.87 (target >= 5)
skorch_overhead: 1.11 (target <= 1.3)
min_ip_quick_seconds: 90.5 (target < 180; quick run)
share_outside_torch: 0.158
same_rstar: True
not a metric: 3
"""
    metrics = {m["name"]: m for m in run_all.parse_metrics(text)}
    assert set(metrics) == {"sweep_vs_gridsearch_speedup", "skorch_overhead",
                            "min_ip_quick_seconds", "share_outside_torch", "same_rstar"}
    assert metrics["sweep_vs_gridsearch_speedup"]["met"] is False
    assert metrics["skorch_overhead"]["met"] is True
    assert metrics["min_ip_quick_seconds"] == dict(
        name="min_ip_quick_seconds", value=90.5, op="<", target=180.0, met=True)
    assert metrics["share_outside_torch"]["target"] is None
    assert metrics["same_rstar"]["value"] is True


def test_summary_table_marks_missed_targets_and_failures():
    runs = [
        dict(name="bench_reach", seconds=12.3, returncode=0,
             metrics=run_all.parse_metrics("reach_batched_speedup: 4.70 (target >= 5)")),
        dict(name="bench_data_only", seconds=20.0, returncode=0,
             metrics=run_all.parse_metrics("data_only_speedup: 56 (target >= 50)")),
        dict(name="bench_sweep", seconds=3.0, returncode=1, metrics=[]),
    ]
    table = run_all.format_summary(runs).splitlines()
    assert table[0].split() == ["benchmark", "metric", "measured", "target", "met", "seconds"]
    assert table[1].split() == ["bench_reach", "reach_batched_speedup", "4.7", ">=", "5",
                                "NO", "12"]
    assert table[2].split()[-2:] == ["yes", "20"]
    assert "FAILED (exit 1)" in table[3]


@pytest.mark.parametrize("name", sorted(run_all.BENCHMARKS))
def test_every_listed_benchmark_exists_and_prints_a_target_line(name):
    source = (PATH.parent / f"{name}.py").read_text()
    assert "(target " in source


@pytest.mark.parametrize("name", sorted(run_all.BENCHMARKS))
def test_every_benchmark_takes_a_device(name):
    source = (PATH.parent / f"{name}.py").read_text()
    assert 'add_argument("--device", default="cpu"' in source
    assert "args.device" in source


@pytest.mark.parametrize("quick", [False, True])
def test_run_all_forwards_the_device(monkeypatch, quick):
    import subprocess

    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="x: 1 (target >= 0)", stderr="")

    monkeypatch.setattr(run_all.subprocess, "run", fake_run)
    run = run_all.run_benchmark("bench_reach", quick, threads=1, device="cuda:1")
    assert run["returncode"] == 0 and run["metrics"][0]["met"] is True
    command = commands[0]
    assert command[command.index("--device") + 1] == "cuda:1"
    run_all.run_benchmark("bench_sweep", quick, threads=1)
    assert commands[1][commands[1].index("--device") + 1] == "cpu"


def test_roofline_benchmark_runs_in_its_quick_mode(capsys):
    """bench_roofline --quick: every metric line is printed, with finite positive rates."""
    path = PATH.parent / "bench_roofline.py"
    spec = importlib.util.spec_from_file_location("bench_roofline", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--quick", "--threads", "1"]) == 0
    metrics = {m["name"]: m["value"] for m in run_all.parse_metrics(capsys.readouterr().out)}
    assert {"sweep_step_gflops_tiny", "sweep_step_speedup_vs_padded_tiny",
            "sweep_step_fraction_of_fp32_peak_tiny", "sweep_step_products_bound_tiny",
            "sweep_step_kernel_bound_tiny"} <= set(metrics)
    assert all(value > 0 for value in metrics.values())
    # the elementwise passes only add time: the bound with them is the lower one
    assert metrics["sweep_step_kernel_bound_tiny"] < metrics["sweep_step_products_bound_tiny"]


def test_roofline_work_counts_follow_the_documented_formulas():
    path = PATH.parent / "bench_roofline.py"
    spec = importlib.util.spec_from_file_location("bench_roofline", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    work = bench.sweep_step_flops(B=256, L=32, d=64, e=64, ranks=[1, 2, 4, 8, 16, 32, 64])
    B, L, d, S, R = 256, 32, 64, 127, 7
    assert work["projections Q, K"] == 2 * 4 * B * L * d * S
    assert work["scores Q K^T"] == 3 * 2 * B * L * L * S
    assert work["mixing A V"] == 3 * 2 * B * L * L * d * R
    assert work["values X W_V"] == 2 * 2 * B * L * d * d * R
