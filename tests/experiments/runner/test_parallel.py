"""Scale-out through joblib: loky processes, a Dask LocalCluster and (if installed) Ray.

Every parallel run is compared with the sequential one: the same seeds and the
same torch thread count must give the same records, bit for bit.
"""

import contextlib
import doctest
import os
import signal
import subprocess
import sys
import time

import joblib
import pytest
import torch
from sklearn.model_selection import GridSearchCV, cross_val_score

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.experiments import sweep_grid
from intrinsic_rank.experiments.entropic import _grid
from intrinsic_rank.experiments.runner import _parallel, run_parallel
from intrinsic_rank.experiments.runner._parallel import _ThreadRule

# 2 settings x 2 seeds of the smallest task whose rank the sweep gets right
GRID = {"teacher": ["linear"], "r_star": [1, 2], "d": [6], "seq_len": [4],
        "n_samples": [600], "max_epochs": [60]}
SEEDS = [1, 2]
# the default thread rule for two concurrent tasks on this machine
TWO_TASK_THREADS = max(1, joblib.cpu_count() // 2)
# what may differ between runs of the same task
RUN_FIELDS = ("seconds", "worker")


def outcome(records):
    return [{k: v for k, v in rec.items() if k not in RUN_FIELDS} for rec in records]


def worker_pids(records):
    return {int(rec["worker"].rsplit(":", 1)[1]) for rec in records}


@pytest.fixture(scope="module")
def sequential():
    """The grid run in this process with the thread count of the parallel runs."""
    return sweep_grid(GRID, seeds=SEEDS, threads_per_job=TWO_TASK_THREADS)


def test_sequential_grid_records(sequential):
    assert [(rec["r_star"], rec["seed"]) for rec in sequential] == [
        (1, 1), (1, 2), (2, 1), (2, 2)]  # settings vary slowest
    assert all(rec["correct"] for rec in sequential)
    assert [rec["rank_grid"] for rec in sequential] == [(1, 2)] * 2 + [(1, 2, 3, 4)] * 2
    assert {rec["threads"] for rec in sequential} == {TWO_TASK_THREADS}
    assert worker_pids(sequential) == {os.getpid()}
    floors = [rec["estimated_noise_floor"] for rec in sequential]
    assert len(set(floors)) == 4 and all(0.005 < f < 0.02 for f in floors)  # sigma^2 = 0.01


def test_loky_processes_match_sequential(sequential):
    # default threads_per_job: cpu_count // 2 for two loky workers
    parallel = sweep_grid(GRID, seeds=SEEDS, n_jobs=2, progress=True)
    assert outcome(parallel) == outcome(sequential)
    assert os.getpid() not in worker_pids(parallel)


def test_threads_are_set_per_task_and_restored():
    before = torch.get_num_threads()
    with joblib.parallel_backend("threading", n_jobs=2):
        # tasks sharing one process: the first saves, the last restores
        assert run_parallel(torch.get_num_threads, [{}] * 4, threads_per_job=1) == [1] * 4
        assert run_parallel(torch.get_num_threads, [{}] * 2) == [TWO_TASK_THREADS] * 2
    assert torch.get_num_threads() == before
    # a plain sequential run keeps the caller's setting
    assert run_parallel(torch.get_num_threads, [{}]) == [before]
    assert run_parallel(torch.get_num_threads, [{}], threads_per_job=before + 1) == [before + 1]
    assert torch.get_num_threads() == before


def test_doctests_pass():
    for module in (_parallel, _grid):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted >= 2 and result.failed == 0, module.__name__


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2"])
def test_threads_per_job_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="threads_per_job"):
        run_parallel(torch.get_num_threads, [{}], threads_per_job=bad)
    with pytest.raises(ValueError, match="threads_per_job"):
        sweep_grid(GRID, threads_per_job=bad)


def test_sweep_grid_rejects_bad_settings_and_seeds():
    with pytest.raises(ValueError, match=r"unknown rank_sweep setting\(s\) \['random_state'\]"):
        sweep_grid({"r_star": [1], "random_state": [0]})
    with pytest.raises(ValueError, match="seeds must be a sequence"):
        sweep_grid(GRID, seeds=3)
    with pytest.raises(ValueError, match="seeds is empty"):
        sweep_grid(GRID, seeds=[])
    with pytest.raises(ValueError, match="every seed must be an integer in"):
        sweep_grid(GRID, seeds=[-1])


# -- Dask ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    # Worker processes (not threads): the tasks and estimators really travel
    # pickled, and each worker has its own torch. Starting takes ~0.5 s; the
    # first task of each worker imports torch.
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as client:
        yield client


def test_dask_grid_matches_sequential(dask_client, sequential):
    with joblib.parallel_backend("dask"):
        records = sweep_grid(GRID, seeds=SEEDS)
    assert outcome(records) == outcome(sequential)
    # ran on the workers, with the thread count of two tasks per host
    pids = set(dask_client.run(os.getpid).values())
    assert worker_pids(records) <= pids and os.getpid() not in pids
    assert {rec["threads"] for rec in records} == {TWO_TASK_THREADS}


def test_dask_grid_search_matches_sequential(dask_client):
    from distributed import get_task_stream

    X, Y = make_attention_task("linear", n_samples=300, seq_len=4, d=6, rank=2,
                               random_state=0)
    est = AttentionRankEstimator(attention="linear", max_epochs=30, random_state=0)
    grid = {"rank": [1, 2, 3]}
    local = GridSearchCV(est, grid, cv=2).fit(X, Y)
    with get_task_stream(dask_client) as stream, joblib.parallel_backend("dask"):
        remote = GridSearchCV(est, grid, cv=2, n_jobs=2).fit(X, Y)
        scores = cross_val_score(est.set_params(rank=2), X, Y, cv=2, n_jobs=2)
    assert len(stream.data) >= 3 * 2 + 2  # the fits ran as Dask tasks
    # scikit-learn sets no torch threads: Dask's nanny starts workers with OMP_NUM_THREADS=1
    assert set(dask_client.run(torch.get_num_threads).values()) == {1}
    # Dask workers run torch on one thread (OMP_NUM_THREADS=1); this process
    # may use more, so the scores agree to rounding only.
    assert remote.best_params_ == local.best_params_
    assert remote.cv_results_["mean_test_score"] == pytest.approx(
        local.cv_results_["mean_test_score"], rel=1e-5)
    assert scores == pytest.approx(local.cv_results_["split0_test_score"][1:2].tolist()
                                   + local.cv_results_["split1_test_score"][1:2].tolist(),
                                   rel=1e-5)


# -- Ray (optional: not installed in CI, see docs/scale_out.md) --------------------


def test_ray_grid_matches_sequential(sequential):
    ray = pytest.importorskip("ray")
    from ray.util.joblib import register_ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        register_ray()
        with joblib.parallel_backend("ray"):
            # progress: the Ray backend cannot stream results (no return_as="generator")
            records = sweep_grid(GRID, seeds=SEEDS, progress=True)
    finally:
        ray.shutdown()
    assert outcome(records) == outcome(sequential)
    assert os.getpid() not in worker_pids(records)


# -- one estimator's seeds across workers ------------------------------------------

SEED_TASK = dict(n_samples=400, seq_len=4, d=6, rank=2, random_state=3)


def _risks(result):
    return [[row["heldout_risk"] for row in est.sweep_] for est in result.estimators]


@pytest.fixture(scope="module")
def seeds_sequential():
    from intrinsic_rank.experiments import fit_seeds

    X, Y = make_attention_task("linear", **SEED_TASK)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], max_epochs=60)
    return X, Y, est, fit_seeds(est, X, Y, seeds=[0, 1, 2], threads_per_job=1)


def test_fit_seeds_fits_one_clone_per_seed(seeds_sequential):
    X, Y, est, result = seeds_sequential
    assert result.seeds == [0, 1, 2]
    assert [e.random_state for e in result.estimators] == [0, 1, 2]
    assert not hasattr(est, "rank_")  # the template is cloned, never fitted
    assert result.ranks == [2, 2, 2] and result.rank == 2 and result.agreement == 1.0
    # each clone is the fit its seed gives on its own
    alone = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], max_epochs=60,
                                   random_state=1)
    with _parallel._torch_threads(1):
        alone.fit(X, Y)
    assert [row["heldout_risk"] for row in alone.sweep_] == _risks(result)[1]
    # different seeds, different fits
    assert _risks(result)[0] != _risks(result)[1]


def test_fit_seeds_threads_backend_matches_sequential(seeds_sequential):
    from intrinsic_rank.experiments import fit_seeds

    X, Y, est, sequential = seeds_sequential
    with joblib.parallel_backend("threading", n_jobs=2):
        result = fit_seeds(est, X, Y, seeds=[0, 1, 2], threads_per_job=1)
    assert _risks(result) == _risks(sequential)


def test_fit_seeds_on_dask_matches_sequential(dask_client, seeds_sequential):
    from intrinsic_rank.experiments import fit_seeds

    X, Y, est, sequential = seeds_sequential
    with joblib.parallel_backend("dask"):
        result = fit_seeds(est, X, Y, seeds=[0, 1, 2], threads_per_job=1)
    assert _risks(result) == _risks(sequential) and result.ranks == sequential.ranks


def test_fit_seeds_majority_rule():
    assert _grid._majority([3, 2, 3]) == (3, pytest.approx(2 / 3))
    assert _grid._majority([4, 2]) == (2, 0.5)  # a tie: the smallest rank
    assert _grid._majority([5]) == (5, 1.0)


def test_fit_seeds_bad_input():
    from sklearn.linear_model import LinearRegression

    from intrinsic_rank.experiments import fit_seeds

    X, Y = make_attention_task("linear", **SEED_TASK)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], max_epochs=60)
    with pytest.raises(ValueError, match="seeds is empty"):
        fit_seeds(est, X, Y, seeds=[])
    with pytest.raises(ValueError, match=r"every seed must be an integer in \[0, 4294967295\]; got -1"):
        fit_seeds(est, X, Y, seeds=[0, -1])
    with pytest.raises(ValueError, match="LinearRegression has no random_state parameter"):
        fit_seeds(LinearRegression(), X.reshape(len(X), -1), Y.reshape(len(Y), -1))


def test_parallel_tasks_are_capped_by_omp_num_threads():
    rule = _ThreadRule(threads_per_job=None, slots=1, caller_pid=-1, omp_threads=1)
    assert rule.threads() == 1  # cpu_count // 1 would be every core
    assert _ThreadRule(threads_per_job=3, slots=1, caller_pid=-1, omp_threads=1).threads() == 3


# -- Ctrl-C from a terminal: every process of the group gets it ------------------------

_STOPPED_MAP = """
import os, sys, time
import numpy as np
from intrinsic_rank._interrupts import StopGuard, Stopped, end_program
from intrinsic_rank.experiments.runner import run_parallel

def busy(folder, i, payload):
    open(os.path.join(folder, f"started{i}"), "w").close()
    while True:  # until the run is stopped
        time.sleep(0.01)

try:
    with StopGuard(end_process=False):
        print("go", flush=True)
        # arrays small and large, as head-ranks sends: none may block the queue at a stop
        run_parallel(busy, [dict(folder=sys.argv[1], i=i, payload=[np.ones(n)
                                 for n in (100, 3000, 300_000)]) for i in range(4)],
                     n_jobs=2)
except (KeyboardInterrupt, Stopped) as stop:
    end_program(stop, "toy")  # the command line's way out: one line, os._exit(128 + signal)
"""


def _stopped(tmp_path, when, signum=signal.SIGINT):
    """Run the map of four endless tasks on two workers; the signal twice to the whole group
    (Ctrl-C, or a closed terminal's SIGHUP)."""
    script = tmp_path / "stopped_map.py"
    script.write_text(_STOPPED_MAP)
    run = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert run.stdout.readline() == "go\n"
    if when == "running":  # both workers inside a task
        for _ in range(6000):
            if len(list(tmp_path.glob("started*"))) >= 2:
                break
            time.sleep(0.01)
    else:  # the pool starting: its workers are still importing
        time.sleep(0.3)
    os.killpg(run.pid, signum)
    time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.pid, signum)  # the second one, during the clean-up
    _, err = run.communicate(timeout=120)
    time.sleep(1.0)  # loky's resource tracker reports leaks when the run has ended
    return run.returncode, err


@pytest.mark.parametrize("when, signame, status, line", [
    ("starting", "SIGINT", 130, "toy: interrupted"),
    ("running", "SIGINT", 130, "toy: interrupted"),
    ("running", "SIGHUP", 129, "toy: stopped by SIGHUP"),
])
def test_a_stop_twice_on_a_local_pool_is_one_line(tmp_path, when, signame, status, line):
    # no worker's traceback, no resource tracker's leak warning or traceback
    got, err = _stopped(tmp_path, when, getattr(signal, signame))
    assert got == status and err == line + "\n", err[-3000:]


@pytest.mark.parametrize("kwargs_list, message", [
    ("abc", "kwargs_list must be an iterable of dicts .*; got str"),
    ({"x": 1}, "got dict"),
    (5, "got int"),
    ([{"x": 1}, 2], r"kwargs_list\[1\] must be a dict of keyword arguments; got int"),
])
def test_kwargs_that_are_not_dicts_are_one_line(kwargs_list, message):
    with pytest.raises(ValueError, match=message):
        run_parallel(len, kwargs_list)
