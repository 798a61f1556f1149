"""Stop signals and lost output: every window of a command, and outputs that overwrite inputs.

SIGINT, SIGTERM and SIGHUP are sent at chosen points of a command run in this
process (a toy command registered for the test: its run, its plot, each rename
of its files, the line after them), never by a timed race. The rule they check:
before the renames the run is entirely out (the previous run's files stay, exit
status 128 + the signal); from the first rename on it is entirely in (exit 0).
"""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from intrinsic_rank._interrupts import StopGuard, Stopped
from intrinsic_rank._validation import check_paths_apart
from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.runner import Experiment, register, write_csv, write_json
from intrinsic_rank.experiments.runner._output import read_json, write_text
from intrinsic_rank.experiments.runner._stage import check_outputs_apart, output_stage

STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}

_HOOK = {}  # the window the toy command signals itself in, and the signal


def _signal_at(window):
    if _HOOK.get("window") == window:
        os.kill(os.getpid(), _HOOK["signal"])


def _toy_run(settings, *, random_state, progress, device):
    _signal_at("run")
    return {"seed": random_state}


def _toy_csv(result, folder):
    write_csv(os.path.join(folder, "toy_signal.csv"), [{"seed": result["seed"]}])
    return ["toy_signal.csv"]


def _toy_plot(result, folder):
    _signal_at("plot")
    write_text(os.path.join(folder, "toy_signal.png"), f"seed {result['seed']}")
    return ["toy_signal.png"]


@pytest.fixture(autouse=True)
def default_handlers():
    """Each test starts from Python's own handlers, whatever an earlier test left behind
    (a command run as the program keeps dropping stop signals after its run)."""
    previous = {s: signal.getsignal(s) for s in STOPS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.fixture
def toy():
    experiment = Experiment(
        name="toy-signal", command="toy-signal", title="toy", paper="none", help="toy",
        description="toy", quick={}, full={}, run=_toy_run, tables=lambda result: [],
        plot=_toy_plot, verdicts=lambda result: [],
        settings=lambda args: {}, summary=lambda result: [], extra_files=_toy_csv)
    register(experiment)
    yield experiment
    EXPERIMENTS.pop("toy-signal", None)
    _HOOK.clear()


def _seeds(folder):
    """The seed each of the toy command's files was written with."""
    seeds = {}
    if (folder / "toy_signal.json").exists():
        seeds["json"] = read_json(folder / "toy_signal.json")["seed"]
    if (folder / "toy_signal.csv").exists():
        seeds["csv"] = int((folder / "toy_signal.csv").read_text().split()[1])
    if (folder / "toy_signal.png").exists():
        seeds["png"] = int((folder / "toy_signal.png").read_text().split()[1])
    return seeds


def _leftovers(folder):
    return sorted(name for name in os.listdir(folder)
                  if name.endswith((".tmp", ".old", ".png")) and name != "toy_signal.png")


def _run_toy(folder, seed):
    return main(["toy-signal", "--out", str(folder), "--seed", str(seed), "--quiet"])


@pytest.fixture
def renames(monkeypatch):
    """Send the hooked signal at the n-th rename into the output folder."""
    real = os.replace
    count = {"n": 0}

    def replace(src, dst, *args, **kwargs):
        result = real(src, dst, *args, **kwargs)
        if os.path.basename(os.fspath(dst)).startswith("toy_signal."):
            count["n"] += 1
            _signal_at(f"rename-{count['n']}")
        return result

    monkeypatch.setattr(os, "replace", replace)
    return count


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("window", ["run", "plot"])
def test_a_stop_before_the_renames_keeps_the_previous_run(toy, tmp_path, capsys, renames,
                                                         window, signum):
    assert _run_toy(tmp_path, 0) == 0 and _seeds(tmp_path) == {"json": 0, "csv": 0, "png": 0}
    _HOOK.update(window=window, signal=signum)
    assert _run_toy(tmp_path, 1) == STATUS[signum]
    assert _seeds(tmp_path) == {"json": 0, "csv": 0, "png": 0}
    assert not _leftovers(tmp_path)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("window", ["rename-1", "rename-2", "rename-3", "after"])
def test_a_stop_from_the_first_rename_on_finds_the_run_finished(toy, tmp_path, monkeypatch,
                                                                renames, window, signum):
    import intrinsic_rank.cli as cli

    assert _run_toy(tmp_path, 0) == 0
    listed = cli._listed
    monkeypatch.setattr(cli, "_listed", lambda paths: (_signal_at("after"), listed(paths))[1])
    _HOOK.update(window=window, signal=signum)
    assert _run_toy(tmp_path, 1) == 0
    assert renames["n"] >= 3  # JSON, CSV and PNG: every window above was reached
    assert _seeds(tmp_path) == {"json": 1, "csv": 1, "png": 1}
    assert not _leftovers(tmp_path)
    # the handlers are the caller's again: a signal now is not swallowed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_failed_rename_puts_the_previous_run_back(toy, tmp_path, monkeypatch, capsys):
    assert _run_toy(tmp_path, 0) == 0
    real = os.replace
    count = {"n": 0}

    def replace(src, dst, *args, **kwargs):
        new_csv = os.path.basename(os.fspath(src)).endswith(".tmp") and os.path.basename(
            os.fspath(dst)) == "toy_signal.csv"
        if new_csv and not count["n"]:  # the new CSV's rename fails once
            count["n"] += 1
            raise OSError(28, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    assert _run_toy(tmp_path, 1) == 1
    assert "No space left" in capsys.readouterr().err
    monkeypatch.setattr(os, "replace", real)
    assert _seeds(tmp_path) == {"json": 0, "csv": 0, "png": 0}
    assert sorted(os.listdir(tmp_path)) == [".toy_signal.files.json", "toy_signal.csv",
                                            "toy_signal.json", "toy_signal.png"]


def test_a_stage_holds_signals_during_its_renames_then_delivers_them(tmp_path, monkeypatch):
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # during the renames: held back
        return real(src, dst, *args, **kwargs)

    with pytest.raises(KeyboardInterrupt):
        with output_stage(tmp_path, "demo"):
            write_json(tmp_path / "demo.json", {"a": 1})
            write_csv(tmp_path / "demo.csv", [{"a": 1}])
            monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "replace", real)
    # the interrupt came once every file was in
    assert read_json(tmp_path / "demo.json") == {"a": 1}
    assert (tmp_path / "demo.csv").exists()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_any_stop_that_is_not_an_error_discards_the_stage(tmp_path, stop):
    with pytest.raises(stop):
        with output_stage(tmp_path, "demo") as stage:
            write_json(tmp_path / "demo.json", {"a": 1})
            stage.results_saved()
            raise stop()
    assert os.listdir(tmp_path) == []


def test_a_held_guard_records_drops_or_delivers():
    with StopGuard(held=True, deliver=False) as hold:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
    assert hold.received == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt):
        with StopGuard(held=True):
            os.kill(os.getpid(), signal.SIGINT)
            reached = True  # held: the block runs to its end, then the interrupt acts
    assert reached


def test_a_guard_switches_from_unwinding_to_holding_once():
    with pytest.raises(Stopped):
        with StopGuard(end_process=False):
            os.kill(os.getpid(), signal.SIGTERM)
    with StopGuard(deliver=False, end_process=False) as guard:
        guard.hold()  # the point of no return
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGHUP)
    assert guard.received == [signal.SIGTERM, signal.SIGHUP]
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL


def test_an_inner_hold_delivers_to_the_outer_guard():
    with pytest.raises(Stopped) as info:
        with StopGuard(end_process=False) as outer:
            with StopGuard(held=True):
                os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("not reached: the held signal acts at the inner block's end")
    assert info.value.signum == signal.SIGTERM and outer.received == [signal.SIGTERM]


def test_an_ignored_signal_stays_ignored():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with StopGuard() as guard:
        os.kill(os.getpid(), signal.SIGTERM)
    with StopGuard(held=True) as hold:
        os.kill(os.getpid(), signal.SIGTERM)
    assert guard.received == hold.received == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


# -- save_model_folder: SIGTERM cleans up, then the process ends by it -----------------

_SAVE_UNDER_SIGTERM = textwrap.dedent("""
    import os, signal, sys, transformers
    from intrinsic_rank.nn import save_model_folder
    config = transformers.GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2,
                                     n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    real = type(model).save_pretrained

    def save_pretrained(self, folder, *args, **kwargs):
        real(self, folder, *args, **kwargs)  # half the folder is written
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))

    type(model).save_pretrained = save_pretrained
    save_model_folder(model, os.path.join(sys.argv[1], "tiny"))
    print("not reached")
""")


@pytest.mark.parametrize("signame", ["SIGTERM"])  # SIGHUP takes the same path
def test_save_model_folder_cleans_up_under_sigterm(tmp_path, signame):
    done = subprocess.run([sys.executable, "-c", _SAVE_UNDER_SIGTERM, str(tmp_path), signame],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == -getattr(signal, signame), done.stderr[-2000:]
    assert "not reached" not in done.stdout
    assert os.listdir(tmp_path) == []  # neither the folder nor a .tiny.partial-* one


_REPRODUCE_UNDER_SIGTERM = textwrap.dedent("""
    import os, signal, sys, time
    from intrinsic_rank.experiments import Experiment, register, reproduce
    from intrinsic_rank.experiments.runner import atomic_file

    def run(settings, *, random_state, progress, device):
        with atomic_file(os.path.join(sys.argv[1], "slow.json")) as tmp:
            open(tmp, "w").write("half")
            os.kill(os.getpid(), signal.SIGTERM)  # as kill would, while the file is written
            time.sleep(30)
        return {"records": []}

    register(Experiment(
        name="term", command="term-cmd", title="t", paper="p", help="h", description="d",
        quick={}, full={}, run=run, tables=lambda r: [], plot=lambda r, f: [],
        verdicts=lambda r: [], summary=lambda r: [], in_reproduce=False))
    reproduce("term", out=os.path.join(sys.argv[1], "out"), progress=False)
    print("not reached")
""")


def test_sigterm_in_a_run_from_python_cleans_up_then_ends_the_process_by_it(tmp_path):
    done = subprocess.run([sys.executable, "-c", _REPRODUCE_UNDER_SIGTERM, str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    assert "not reached" not in done.stdout
    # the run unwound: its temporary file is gone, and nothing of it was cached
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not (tmp_path / "out" / "term" / "result.json").exists()


def test_an_unwinding_guard_leaves_other_handlers_alone():
    def mine(signum, frame):
        raise RuntimeError("mine")

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with pytest.raises(RuntimeError, match="mine"):
            with StopGuard():
                os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- outputs that would overwrite inputs or each other ---------------------------------


@pytest.fixture
def data(tmp_path):
    from intrinsic_rank.datasets import make_attention_task

    X, Y = make_attention_task("linear", n_samples=48, seq_len=3, d=4, rank=2, random_state=0)
    path = tmp_path / "d.npz"
    np.savez(path, X=X, Y=Y)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    os.symlink(path, tmp_path / "link.npz")
    os.link(path, tmp_path / "hard.npz")
    return tmp_path


@pytest.mark.parametrize("outputs, inputs, message", [
    ([("--save-model", "d.npz", "file")], [("--data", "d.npz")], "the same file"),
    ([("--save-model", "link.npz", "file")], [("--data", "d.npz")], "the same file"),
    ([("--save-model", "hard.npz", "file")], [("--data", "d.npz")], "the same file"),
    ([("--save-model", "sub/../d.npz", "file")], [("--data", "d.npz")], "the same file"),
    ([("--save-model", "y.npy", "file")], [("--data", "x.npy"), ("--targets", "y.npy")],
     "would overwrite --targets"),
    ([("--out", "model", "folder")], [("the model", "model")], "the same file"),
    ([("--out", "model/runs", "folder")], [("the model", "model")], "lies inside the model"),
    ([("--save-model", "model/m.joblib", "file")], [("the model", "model")], "lies inside"),
    ([("--out", "o", "folder"), ("--save-model", "o", "file")], [], "the same path"),
    ([("--out", "o/p", "folder"), ("--save-model", "o", "file")], [], "lies inside --save"),
])
def test_an_output_over_an_input_or_another_output_is_refused(data, monkeypatch, outputs,
                                                              inputs, message):
    monkeypatch.chdir(data)
    (data / "sub").mkdir()
    with pytest.raises(ValueError, match=message) as error:
        check_paths_apart(outputs, inputs)
    assert "\n" not in str(error.value)


def test_outputs_apart_from_inputs_are_accepted(data, monkeypatch):
    monkeypatch.chdir(data)
    check_paths_apart([("--out", "runs", "folder"), ("--save-model", "runs/m.joblib", "file"),
                       ("--out file", "runs/sweep.json", "file")],
                      [("--data", "d.npz"), ("the model", "model")])


@pytest.mark.parametrize("name", ["sweep.json", "sweep.csv", "sweep.png", "sweep_x.png",
                                  ".sweep.files.json"])
def test_an_input_named_as_one_of_the_commands_files_is_refused(tmp_path, name):
    (tmp_path / name).write_text("mine")
    with pytest.raises(ValueError, match=f"--out file '{name}' would overwrite --texts"):
        check_outputs_apart(str(tmp_path), "sweep", [("--texts", str(tmp_path / name))])


@pytest.mark.parametrize("extra", [
    ["--save-model", "{d}/d.npz"],
    ["--save-model", "{d}/link.npz"],
    ["--data", "{d}/x.npy", "--targets", "{d}/y.npy", "--save-model", "{d}/x.npy"],
    ["--save-model", "{d}/out/.sweep.files.json"],
    ["--save-model", "{d}/out"],
])
def test_the_sweep_refuses_every_output_over_an_input_before_work(data, capsys, extra):
    before = {name: (data / name).read_bytes() for name in ("d.npz", "x.npy", "y.npy")}
    argv = ["sweep", "--data", str(data / "d.npz"), "--epochs", "2", "--rank-grid", "1-2",
            "--out", str(data / "out"), "--quiet", *[w.format(d=data) for w in extra]]
    if "--targets" in extra:
        argv[1:3] = []
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--save-model" in err[0]
    assert {name: (data / name).read_bytes() for name in before} == before
    assert not (data / "out").exists() or os.listdir(data / "out") == []


def test_a_stage_never_overwrites_what_it_protects(tmp_path):
    data = tmp_path / "sweep.csv"
    data.write_text("mine")
    with pytest.raises(ValueError, match="would overwrite an input of the run"):
        with output_stage(tmp_path, "sweep", protect=[data]):
            write_csv(data, [{"a": 1}])
    assert data.read_text() == "mine" and os.listdir(tmp_path) == ["sweep.csv"]
