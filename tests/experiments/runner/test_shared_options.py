"""The options several commands take, each declared once in the runner, and what they say.

Read from the registry: every command that takes a shared option takes the runner's one
declaration, and the words of ``--jobs`` are the thread rule ``run_parallel`` applies.
"""

import inspect
import os

import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.runner import (
    DEFAULT_JOBS,
    JOBS_RULE,
    SHARED_OPTIONS,
    refused_data,
    shared_option,
)


def _jobs_options():
    return [(experiment, option) for experiment in EXPERIMENTS.values()
            for option in experiment.options if option.flag == "--jobs"]


def test_every_jobs_option_is_the_shared_one_with_one_default_and_its_rule():
    from intrinsic_rank.experiments import head_rank_map, model_rank

    users = _jobs_options()
    assert [experiment.name for experiment, _ in users] == ["head-ranks", "model-rank"]
    for experiment, option in users:
        assert option.origin is SHARED_OPTIONS["--jobs"] and option.dest == "n_jobs"
        assert option.default == DEFAULT_JOBS == experiment.full["n_jobs"]
        assert JOBS_RULE in option.help
    # the Python function the command runs has the same default
    assert inspect.signature(head_rank_map).parameters["n_jobs"].default == DEFAULT_JOBS
    assert inspect.signature(model_rank).parameters["n_jobs"].default == DEFAULT_JOBS


def test_the_jobs_help_states_run_parallels_thread_rule(monkeypatch):
    """n > 1 jobs: processes of cpu_count // n threads, capped by OMP_NUM_THREADS; -1: one
    process per CPU, each of one thread."""
    import joblib

    from intrinsic_rank.experiments.runner._parallel import _ThreadRule

    monkeypatch.setattr(joblib, "cpu_count", lambda: 8)
    other = os.getpid() + 1  # a worker, not the calling process
    for n_jobs, threads in ((2, 4), (3, 2), (16, 1)):
        rule = _ThreadRule(threads_per_job=None, slots=n_jobs, caller_pid=other)
        assert rule.threads() == threads == max(1, 8 // n_jobs)
    capped = _ThreadRule(threads_per_job=None, slots=2, caller_pid=other, omp_threads=3)
    assert capped.threads() == 3  # at most --threads (OMP_NUM_THREADS)
    here = _ThreadRule(threads_per_job=None, slots=1, caller_pid=os.getpid())
    assert here.threads() is None  # 1: in this process, with its own --threads
    assert "cpu_count // n torch threads" in JOBS_RULE and "at most --threads" in JOBS_RULE


@pytest.mark.parametrize("value", ["0", "-2", "513", "two"])
def test_jobs_outside_its_range_is_our_one_line_before_any_work(tmp_path, capsys, value):
    out = tmp_path / "out"
    for experiment, _ in _jobs_options():
        assert main([experiment.command, "default", "--jobs", value, "--out", str(out),
                     "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "joblib" not in err
        assert "argument --jobs: must be an integer in [-1, 512] other than 0; got " in err
    assert not out.exists()


def test_a_shared_option_keeps_its_declaration_as_origin():
    d = shared_option("--d", scaled=True, help="token dimension, within memory")
    assert d.origin is SHARED_OPTIONS["--d"] and d.dest == "d" and d.scaled
    assert d.type is SHARED_OPTIONS["--d"].type  # the bounds stay the declaration's
    assert shared_option("--d") is SHARED_OPTIONS["--d"]
    with pytest.raises(KeyError, match="no shared option '--dd'"):
        shared_option("--dd")
    refused = refused_data("draws its own task")
    assert refused.origin is SHARED_OPTIONS["--data"] and not refused.setting
