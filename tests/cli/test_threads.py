"""Torch threads of a command: ``--threads``, then ``OMP_NUM_THREADS``, then the default;
applied during the command and restored after it.
"""

import os

import pytest
import torch

from intrinsic_rank import cli
from intrinsic_rank.cli import DEFAULT_THREADS, main, thread_count
from intrinsic_rank.experiments import EXPERIMENTS

COMMANDS = [e.command for e in EXPERIMENTS.values()] + ["reproduce"]


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_threads_beyond_the_cpus_are_capped_with_a_note(capsys, monkeypatch):
    import torch

    import importlib

    import intrinsic_rank.cli as cli

    rule = importlib.import_module("intrinsic_rank.cli._threads")  # where the rule reads it
    monkeypatch.setattr(rule, "cpu_count", lambda: 2)
    before = torch.get_num_threads()
    with cli._ThreadSetting(100000, "intrinsic-rank sweep"):
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
    assert torch.get_num_threads() == before
    assert capsys.readouterr().err.strip() == (
        "intrinsic-rank sweep: note: --threads asks for 100000 threads; this process may use "
        "2 CPUs, so 2 are used")
    monkeypatch.setenv("OMP_NUM_THREADS", "100000")
    with cli._ThreadSetting(None):
        assert torch.get_num_threads() == 2
    assert "OMP_NUM_THREADS asks for 100000" in capsys.readouterr().err


def test_the_thread_rule_is_option_then_environment_then_one():
    assert DEFAULT_THREADS == 1
    assert thread_count(4, environ={"OMP_NUM_THREADS": "2"}) == (4, "--threads")
    assert thread_count(None, environ={"OMP_NUM_THREADS": "3"}) == (3, "OMP_NUM_THREADS")
    assert thread_count(None, environ={"OMP_NUM_THREADS": "junk"}) == (1, "default")
    assert thread_count(None, environ={}) == (1, "default")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_threads_and_documents_the_rule(capsys, command):
    text = " ".join(_help(capsys, command).split())
    assert "--threads N" in text
    assert "torch CPU threads (default: $OMP_NUM_THREADS when set, else 1" in text


def test_threads_apply_during_the_command_and_are_restored(monkeypatch, capsys):
    seen = {}

    def fake_run(experiment, args, *rest):
        seen["torch"] = torch.get_num_threads()
        seen["env"] = os.environ.get("OMP_NUM_THREADS")
        return 0

    monkeypatch.setattr(cli, "_run_experiment", fake_run)
    before_torch, before_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    assert main(["sweep", "--threads", "2", "--quiet"]) == 0
    assert seen == {"torch": 2, "env": "2"}
    assert torch.get_num_threads() == before_torch
    assert os.environ.get("OMP_NUM_THREADS") == before_env
    # OMP_NUM_THREADS set and no --threads: the command leaves torch alone
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    assert main(["sweep", "--quiet"]) == 0
    assert seen == {"torch": 1, "env": "1"}


def test_a_bad_thread_count_is_one_line(capsys):
    assert main(["sweep", "--threads", "0"]) == 2
    assert "argument --threads: must be an integer >= 1; got 0" in capsys.readouterr().err
