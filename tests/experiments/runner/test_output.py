"""A command's outputs: standard JSON, atomic files, the output stage that renames a
finished run in (or keeps the previous one whole) under stops and failures, and the rule
that no output overwrites an input.
"""

import json
import math
import os
import signal

import numpy as np
import pytest

from intrinsic_rank._validation import check_output_file, check_paths_apart
from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.entropic._files import save_model_file
from intrinsic_rank.experiments.runner import (
    Experiment,
    check_output_folder,
    register,
    save_records,
    write_csv,
    write_json,
)
from intrinsic_rank.experiments.runner._output import read_json, write_text
from intrinsic_rank.experiments.runner._stage import check_outputs_apart, output_stage


def _previous_run(folder):
    with output_stage(folder, "sweep") as stage:
        write_json(folder / "sweep.json", {"seed": 0})
        write_csv(folder / "sweep.csv", [{"seed": 0}])
        stage.results_saved()
        write_json(folder / "sweep.png", {"seed": 0})  # stands for the figure


def _sweep_seeds(folder):
    seeds = {}
    for name in ("sweep.json", "sweep.png"):
        if (folder / name).exists():
            seeds[name] = read_json(folder / name)["seed"]
    if (folder / "sweep.csv").exists():
        seeds["sweep.csv"] = int((folder / "sweep.csv").read_text().split()[1])
    return seeds


def _fitted():
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0])


def _sweep_result():
    record = {"rank": 1, "train_risk": 0.1, "heldout_risk": 0.1, "excess_risk": 0.0,
              "reached": True, "energy_effective_rank": 1.0, "numerical_rank": 1}
    config = {"data": "x.npz", "attention": "softmax", "d": 2, "seq_len": 3, "n_samples": 4,
              "max_epochs": 1, "random_state": 0, "rank_grid": [1]}
    sweep = {"records": [record], "config": config, "rank_": 1, "r_star": None,
             "noise_floor": None, "noise_floor_": 0.1, "excess_tol": 0.01,
             "floor_reached": True, "reference_risk": 0.2}
    return {"sweeps": {"data": sweep}, "seconds": 0.0}


def _strict(text):
    """``json.loads`` that refuses NaN and Infinity: standard JSON only."""
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


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


@pytest.fixture
def toy():
    experiment = Experiment(
        name="toy-signal", command="toy-signal", title="toy", paper="none", help="toy",
        description="toy", quick={}, full={}, run=_toy_run, tables=lambda result: [],
        plot=_toy_plot, verdicts=lambda result: [],
        summary=lambda result: [], extra_files=_toy_csv)
    register(experiment)
    yield experiment
    EXPERIMENTS.pop("toy-signal", None)
    _HOOK.clear()


def _toy_seeds(folder):
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


def test_a_full_disk_is_refused_before_work(tmp_path):
    with pytest.raises(ValueError, match="the disk is full"):
        check_output_file(str(tmp_path / "m.joblib"), "--save-model", min_free=1 << 62)


def test_an_interrupt_during_plotting_keeps_the_previous_run_whole(tmp_path):
    _previous_run(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with output_stage(tmp_path, "sweep") as stage:
            write_json(tmp_path / "sweep.json", {"seed": 7})
            write_csv(tmp_path / "sweep.csv", [{"seed": 7}])
            stage.results_saved()
            raise KeyboardInterrupt  # Ctrl-C while plotting
    assert _sweep_seeds(tmp_path) == {"sweep.json": 0, "sweep.png": 0, "sweep.csv": 0}
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp") or ".png." in f]


def test_a_failed_plot_keeps_the_results_and_drops_the_old_figure(tmp_path):
    _previous_run(tmp_path)
    with pytest.raises(ImportError):
        with output_stage(tmp_path, "sweep") as stage:
            write_json(tmp_path / "sweep.json", {"seed": 7})
            write_csv(tmp_path / "sweep.csv", [{"seed": 7}])
            stage.results_saved()
            raise ImportError("matplotlib is not installed")
    assert _sweep_seeds(tmp_path) == {"sweep.json": 7, "sweep.csv": 7}  # no PNG of seed 0 beside


def test_a_failed_run_writes_nothing(tmp_path):
    _previous_run(tmp_path)
    with pytest.raises(RuntimeError):
        with output_stage(tmp_path, "sweep"):
            save_model_file(_fitted(), tmp_path / "model.joblib")
            raise RuntimeError("the fit failed")
    assert not (tmp_path / "model.joblib").exists()
    assert _sweep_seeds(tmp_path) == {"sweep.json": 0, "sweep.png": 0, "sweep.csv": 0}


def test_a_finished_run_replaces_every_file(tmp_path):
    _previous_run(tmp_path)
    with output_stage(tmp_path, "sweep") as stage:
        write_json(tmp_path / "sweep.json", {"seed": 7})
        assert read_json(tmp_path / "sweep.json") == {"seed": 0}  # renamed in at the end
        write_csv(tmp_path / "sweep.csv", [{"seed": 7}])
        save_model_file(_fitted(), tmp_path / "model.joblib")
        stage.results_saved()
        write_json(tmp_path / "sweep.png", {"seed": 7})
    assert _sweep_seeds(tmp_path) == {"sweep.json": 7, "sweep.png": 7, "sweep.csv": 7}
    assert (tmp_path / "model.joblib").exists()


def test_the_csv_is_written_with_the_json_before_plotting(tmp_path):
    """Without matplotlib the CSV is written all the same: it is a result, not a plot."""
    experiment = EXPERIMENTS["sweep"]
    with pytest.raises(ImportError):
        with experiment.output_stage(str(tmp_path)):
            json_path, files = experiment.save_results(_sweep_result(), str(tmp_path))
            raise ImportError("matplotlib is not installed")  # the plot that follows
    assert files == ["sweep.csv"] and os.path.exists(json_path)
    assert (tmp_path / "sweep.csv").read_text().startswith("rank,")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    assert read_json(tmp_path / "result.json") is None  # returns, instead of blocking


def test_write_json_writes_standard_json_with_null_for_non_finite(tmp_path):
    import numpy as np

    path = tmp_path / "x.json"
    write_json(path, {"a": math.nan, "b": [1.0, math.inf, -math.inf], "c": np.float32("nan"),
                      "d": np.array([0.5, np.nan]), "e": 2.5})
    saved = _strict(path.read_text())
    assert saved == {"a": None, "b": [1.0, None, None], "c": None, "d": [0.5, None], "e": 2.5}
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()


def test_marked_non_finite_values_come_back_exactly(tmp_path):
    path = tmp_path / "x.json"
    payload = {"result": {"cliff": {"midpoint": math.nan, "scale": 2.0},
                          "rows": [{"r": math.inf}, {"r": -math.inf}, {"r": None}]}}
    write_json(path, payload, mark_nonfinite=True)
    stored = _strict(path.read_text())
    assert stored["result"]["cliff"]["midpoint"] is None
    assert sorted(name for _, name in stored["nonfinite"]) == ["-Infinity", "Infinity", "NaN"]
    back = read_json(path, restore_nonfinite=True)
    assert math.isnan(back["result"]["cliff"]["midpoint"])
    assert [row["r"] for row in back["result"]["rows"]] == [math.inf, -math.inf, None]
    assert "nonfinite" not in back
    # a damaged record of the places reads as an unreadable file, never a traceback
    stored["nonfinite"] = [[["result", "nope", 3], "NaN"]]
    path.write_text(json.dumps(stored))
    assert read_json(path, restore_nonfinite=True) is None


def test_a_failed_dump_leaves_the_old_file(tmp_path):
    path = tmp_path / "records.json"
    save_records(path, [{"rank": 1, "risk": 0.5}], config={"d": 4})
    before = path.read_text()
    with pytest.raises(TypeError, match="cannot write object to JSON"):
        save_records(path, [{"rank": 2, "risk": object()}])
    assert path.read_text() == before
    assert json.loads(before)["records"] == [{"rank": 1, "risk": 0.5}]
    assert sorted(os.listdir(tmp_path)) == ["records.json"]  # no temporary file left


def test_an_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    write_json(path, {"v": 1})

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_json(path, {"v": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"v": 1}
    assert sorted(os.listdir(tmp_path)) == ["x.json"]


def test_read_json_of_a_folder_or_garbage_is_none(tmp_path):
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe{not json")
    assert read_json(tmp_path / "folder.json") is None
    assert read_json(tmp_path / "bad.json") is None
    assert read_json(tmp_path / "missing.json") is None


def test_check_output_folder(tmp_path):
    file = tmp_path / "file.txt"
    file.write_text("x")
    assert check_output_folder(tmp_path / "a" / "b") == str(tmp_path / "a" / "b")
    with pytest.raises(ValueError, match="out must be a folder path; got an empty string"):
        check_output_folder("")
    with pytest.raises(ValueError, match="is not a folder"):
        check_output_folder(file)
    with pytest.raises(ValueError, match=r"is not a folder \(.*file.txt is a file\)"):
        check_output_folder(file / "sub")
    with pytest.raises(ValueError, match="must be a folder path; got int"):
        check_output_folder(3)


@pytest.mark.parametrize("obstacle", ["toy_out.json", "toy_out.csv", "toy_out.png",
                                      "toy_out_detail.png", ".toy_out.files.json"])
def test_a_folder_where_an_output_file_goes_is_refused_before_the_run(tmp_path, command_toy,
                                                                      obstacle, capsys):
    from intrinsic_rank.cli import main

    _, calls = command_toy
    (tmp_path / obstacle).mkdir()
    assert main(["toy-out", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"intrinsic-rank toy-out: error: --out {str(tmp_path)!r}: {obstacle!r} is "
                   "a folder where the command writes a file; move it away or write elsewhere")
    assert calls == [] and os.listdir(tmp_path) == [obstacle]
    # a symbolic link to a folder is no obstacle: the rename replaces the link
    os.rmdir(tmp_path / obstacle)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / obstacle)
    assert main(["toy-out", "--out", str(tmp_path), "--quiet"]) == 0 and calls == [0]
    assert sorted(os.listdir(tmp_path)) == [".toy_out.files.json", "elsewhere", "toy_out.csv",
                                            "toy_out.json", "toy_out.png",
                                            "toy_out_detail.png"]


def test_no_temporary_file_outlives_a_record_that_cannot_be_written(tmp_path):
    """A folder that appears where the list of the run's files goes (after the checks) costs
    the list, not a stray temporary file; the run's own files are in."""
    with output_stage(tmp_path, "late") as stage:
        write_json(tmp_path / "late.json", {"a": 1})
        (tmp_path / ".late.files.json").mkdir()
    assert stage.paths == []
    assert sorted(os.listdir(tmp_path)) == [".late.files.json", "late.json"]
    assert os.listdir(tmp_path / ".late.files.json") == []


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("window", ["run", "plot"])
def test_a_stop_before_the_renames_keeps_the_previous_run(toy, tmp_path, capsys, renames,
                                                         window, signum):
    assert _run_toy(tmp_path, 0) == 0 and _toy_seeds(tmp_path) == {"json": 0, "csv": 0, "png": 0}
    _HOOK.update(window=window, signal=signum)
    assert _run_toy(tmp_path, 1) == STATUS[signum]
    assert _toy_seeds(tmp_path) == {"json": 0, "csv": 0, "png": 0}
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
    assert _toy_seeds(tmp_path) == {"json": 1, "csv": 1, "png": 1}
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
    assert _toy_seeds(tmp_path) == {"json": 0, "csv": 0, "png": 0}
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
