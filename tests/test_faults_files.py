"""Files under faults: atomic and standard JSON, tables, model files, the reproduce cache.

Every bad file is built in ``tmp_path``; the experiments are toys registered here, so
each test takes well under a second (the two-process test a few seconds of start-up).
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from intrinsic_rank.experiments import EXPERIMENTS, Experiment, Option, register, reproduce
from intrinsic_rank.experiments.runner import (
    MISSING,
    check_output_folder,
    format_table,
    lock_folder,
    number_text,
    save_records,
    write_json,
)
from intrinsic_rank.experiments.runner._output import read_json, write_csv, write_text
from intrinsic_rank.experiments.runner._stage import output_stage
from intrinsic_rank.experiments.runner._tables import format_column, markdown_table


def _strict(text):
    """``json.loads`` that refuses NaN and Infinity: standard JSON only."""
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


# -- JSON: standard, atomic ------------------------------------------------------------


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


def test_reproduce_refuses_a_bad_out_before_any_work(tmp_path, toy):
    _, calls = toy
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(ValueError, match="out .* is not a folder"):
        reproduce("faulty", out=file, progress=False)
    with pytest.raises(ValueError, match="random_state must be an integer in"):
        reproduce("faulty", out=tmp_path, progress=False, random_state=2**32)
    assert calls == [] and file.read_text() == "x"


def _command_toy(calls):
    """A command writing NAME.json, NAME.csv, NAME.png and NAME_detail.png (NAME: toy_out)."""
    def run(settings, *, random_state, progress, device):
        calls.append(random_state)
        return dict(records=[dict(seed=random_state)])

    def csv(result, folder):
        write_csv(os.path.join(folder, "toy_out.csv"), result["records"])
        return ["toy_out.csv"]

    def plot(result, folder):
        for name in ("toy_out.png", "toy_out_detail.png"):
            write_text(os.path.join(folder, name), "png")
        return ["toy_out.png", "toy_out_detail.png"]

    return Experiment(
        name="toy-out", command="toy-out", title="t", paper="none", help="h",
        description="d", quick={}, full={}, run=run, tables=lambda result: [], plot=plot,
        verdicts=lambda result: [("c", "m", "agrees", "e")], settings=lambda args: {},
        summary=lambda result: [], extra_files=csv, in_reproduce=False)


@pytest.fixture
def command_toy():
    calls = []
    experiment = register(_command_toy(calls))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


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


def test_reproduce_refuses_a_folder_where_a_piece_file_goes_before_any_work(tmp_path,
                                                                          command_toy):
    _, calls = command_toy
    (tmp_path / "toy-out" / "toy_out.png").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"out .*toy-out': 'toy_out.png' is a folder where "):
        reproduce("toy-out", out=tmp_path, progress=False)
    assert calls == [] and sorted(os.listdir(tmp_path)) == ["toy-out"]


def test_no_temporary_file_outlives_a_record_that_cannot_be_written(tmp_path):
    """A folder that appears where the list of the run's files goes (after the checks) costs
    the list, not a stray temporary file; the run's own files are in."""
    with output_stage(tmp_path, "late") as stage:
        write_json(tmp_path / "late.json", {"a": 1})
        (tmp_path / ".late.files.json").mkdir()
    assert stage.paths == []
    assert sorted(os.listdir(tmp_path)) == [".late.files.json", "late.json"]
    assert os.listdir(tmp_path / ".late.files.json") == []


# -- tables: one rule per column --------------------------------------------------------


def test_format_column_keeps_one_style_and_four_significant_digits():
    assert format_column([0.35, 0.009987, 1.866e-06]) == ["3.5e-01", "9.987e-03", "1.866e-06"]
    assert format_column([0.35, 0.009987, 0.12345678]) == ["0.35", "0.009987", "0.1235"]
    assert format_column([1.0, 2.5, 1234567.0]) == ["1e+00", "2.5e+00", "1.235e+06"]
    assert format_column([None, math.nan, 0.0, math.inf]) == [MISSING, MISSING, "0", "inf"]
    assert format_column([True, 3, "text"]) == ["yes", "3", "text"]
    assert format_column([0.5, math.nan], floatfmt="{:.3f}") == ["0.500", MISSING]


def test_a_missing_value_reads_the_same_in_a_table_cell_and_in_prose():
    import numpy as np

    for value in (None, math.nan, np.float32("nan"), np.float64("nan")):
        assert number_text(value) == format_column([value])[0] == MISSING
        assert number_text(value, "{:.2f}") == MISSING
    for value, text in ((math.inf, "inf"), (-math.inf, "-inf"), (True, "yes"),
                        (np.bool_(False), "no"), (7, "7"), (np.int64(12), "12"),
                        ("r*", "r*")):
        assert number_text(value) == format_column([value])[0] == text
    assert number_text(1 / 3) == "0.333" and number_text(1 / 3, "{:.1%}") == "33.3%"
    assert number_text([1, 2]) == "[1, 2]"


def test_format_table_prints_a_dash_for_what_does_not_apply():
    records = [{"rank": 1, "risk": 0.35, "floor": math.nan, "note": "a"},
               {"rank": 2, "risk": 0.009987, "floor": None, "note": "b"},
               {"rank": 3, "risk": 1.866e-06, "floor": 0.01, "note": "c"}]
    lines = format_table(records).splitlines()
    assert lines[0].split() == ["rank", "risk", "floor", "note"]
    assert [line.split() for line in lines[1:]] == [
        ["1", "3.5e-01", MISSING, "a"], ["2", "9.987e-03", MISSING, "b"],
        ["3", "1.866e-06", "0.01", "c"]]
    assert "nan" not in format_table(records)
    # a caller's own format still works
    assert format_table([{"x": 0.5}], floatfmt="{:.3f}").splitlines()[1].strip() == "0.500"
    table = markdown_table(records, ["rank", "risk", "floor"])
    assert table.splitlines()[2] == f"| 1 | 3.5e-01 | {MISSING} |"


# -- model files ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_model_file(tmp_path_factory):
    from intrinsic_rank.nn import TinyCausalLM, save_tiny_lm

    lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    path = tmp_path_factory.mktemp("models") / "good.pt"
    save_tiny_lm(lm, path, metadata={"steps": 3})
    return path, lm


def _bad_model_files(folder, good, lm):
    import torch

    from intrinsic_rank.nn import TinyCausalLM

    data = good.read_bytes()
    files = {
        "empty": (b"", "the file is empty"),
        "truncated": (data[: len(data) // 2], "damaged or truncated"),
        "text": (b"a model, surely\n", "it is a text file"),
        "corrupt": (bytes(range(256)) * 8, "it is not a torch file"),
    }
    paths = {}
    for name, (content, _) in files.items():
        paths[name] = folder / f"{name}.pt"
        paths[name].write_bytes(content)
    other = TinyCausalLM(vocab_size=12, d_model=8, n_layers=1, n_heads=2, max_length=16)
    objects = {
        "tensor": (torch.zeros(3), "it holds a Tensor, not a dict"),
        "whole_model": (lm, "Python objects other than tensors"),
        "no_state": ({"config": dict(lm.config)}, "a dict without 'state_dict'"),
        "mismatch": ({"config": dict(lm.config), "state_dict": other.state_dict()},
                     "its weights do not fit its config: .*size mismatch"),
        "bad_config": ({"config": dict(lm.config, bogus=1), "state_dict": lm.state_dict()},
                       "does not build a TinyCausalLM"),
        "config_list": ({"config": [1, 2], "state_dict": lm.state_dict()},
                        "its 'config' is a list"),
        "nonfinite": ({"config": dict(lm.config), "state_dict": {
            name: weight.clone().fill_(float("nan")) if i == 1 else weight
            for i, (name, weight) in enumerate(lm.state_dict().items())}},
            rf"the file is damaged: its weight '{list(lm.state_dict())[1]}' holds NaN or inf"),
    }
    for name, (obj, _) in objects.items():
        paths[name] = folder / f"{name}.pt"
        torch.save(obj, paths[name])
    expected = {name: why for name, (_, why) in {**files, **objects}.items()}
    return paths, expected


def test_every_bad_model_file_is_one_value_error_naming_it(tmp_path, good_model_file):
    from intrinsic_rank.nn import as_causal_lm, load_model

    good, lm = good_model_file
    assert load_model(good).module.metadata == {"steps": 3}
    paths, expected = _bad_model_files(tmp_path, good, lm)
    for name, path in paths.items():
        for loader in (load_model, as_causal_lm):
            with pytest.raises(ValueError) as info:
                loader(path)
            message = str(info.value)
            assert str(path) in message, name
            assert __import__("re").search(expected[name], message), (name, message)
            assert "weights_only" not in message and "\n" not in message, name
            error = info.value  # raised from None: no torch error chained to it
            assert error.__cause__ is None, name
            assert error.__context__ is None or error.__suppress_context__, name


@pytest.mark.parametrize("kind", ["folder", "gguf"])
def test_a_model_whose_weights_are_not_finite_is_a_damaged_file(tmp_path, monkeypatch, kind):
    """Weights holding NaN or inf (a flipped bit in a GGUF scale) name the file as damaged,
    before anything runs the model ("input must be finite" or a torch error came later)."""
    import torch
    import transformers

    from intrinsic_rank.nn import _loading, as_causal_lm, as_model_adapter, load_model

    config = transformers.GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2,
                                     n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        model.transformer.h[0].ln_1.weight[3] = float("inf")
    if kind == "folder":
        path = tmp_path / "tiny"
        model.save_pretrained(path)
        what = f"the model folder {str(path)!r}"
    else:  # a GGUF file that transformers reads into this model
        path = tmp_path / "tiny.gguf"
        path.write_bytes(b"GGUF")
        monkeypatch.setattr(_loading, "load_gguf_causal_lm", lambda file: model)
        monkeypatch.setattr(_loading, "load_gguf_tokenizer", lambda file: None)
        what = f"the GGUF file {str(path)!r}"
    for loader in (load_model, as_causal_lm, as_model_adapter):
        with pytest.raises(ValueError) as info:
            loader(str(path))
        assert str(info.value) == (
            f"{what} is damaged: its weight 'transformer.h.0.ln_1.weight' holds NaN or inf "
            "(a model file's weights are finite numbers); download or write it again")


# -- the reproduce cache -----------------------------------------------------------------


def _toy_experiment(name, calls, value=0.5, extra=None):
    def run(settings, *, random_state, progress, device):
        calls.append(name)
        records = [dict(size=i, value=value * i) for i in range(1, settings["size"] + 1)]
        return dict(records=records, **(extra or {}))

    def plot(result, folder):
        with open(os.path.join(folder, f"{name}.png"), "wb") as handle:
            handle.write(b"png of " + str(len(result["records"])).encode())
        return [f"{name}.png"]

    return Experiment(
        name=name, command=f"{name}-cmd", title=f"The {name}", paper="none", help="a toy",
        description="Counts to --size.", quick=dict(size=2), full=dict(size=3), run=run,
        tables=lambda result: [("rows", result["records"], ["size", "value"])],
        plot=plot,
        verdicts=lambda result: [("it counts", f"{len(result['records'])} rows",
                                  "agrees" if result["records"][-1]["value"] > 0
                                  else "does not agree", "rows > 0")],
        options=[Option("--size", type=int, default=2, help="how far to count")],
        settings=lambda args: dict(size=args.size),
        summary=lambda result: [f"{name}: counting"],
        in_reproduce=False,
    )


@pytest.fixture
def toy():
    calls = []
    experiment = register(_toy_experiment("faulty", calls, extra={"cliff": math.nan}))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


@pytest.fixture
def other_toy():
    calls = []
    experiment = register(_toy_experiment("other", calls))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


def _damage(path, how):
    stored = json.loads(path.read_text())
    if how == "a list":
        path.write_text("[1, 2, 3]")
    elif how == "a string":
        path.write_text('"result seconds finished key"')
    elif how == "no seconds":
        del stored["seconds"]
        path.write_text(json.dumps(stored))
    elif how == "seconds as text":
        stored["seconds"] = "fast"
        path.write_text(json.dumps(stored))
    elif how == "result as a number":
        stored["result"] = 5
        path.write_text(json.dumps(stored))
    elif how == "result without records":
        del stored["result"]["records"]
        path.write_text(json.dumps(stored))
    elif how == "empty records":
        stored["result"]["records"] = []
        path.write_text(json.dumps(stored))
    elif how == "files not a list":
        stored["files"] = {"a": 1}
        path.write_text(json.dumps(stored))
    elif how == "a folder":
        path.unlink()
        (path / "inside").mkdir(parents=True)
    elif how == "binary":
        path.write_bytes(b"\x00\xff" * 10)
    else:  # pragma: no cover
        raise AssertionError(how)


DAMAGES = ["a list", "a string", "no seconds", "seconds as text", "result as a number",
           "result without records", "empty records", "files not a list", "a folder",
           "binary"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_cache_is_recomputed_never_a_traceback(tmp_path, toy, how, capsys):
    _, calls = toy
    first = reproduce("faulty", out=tmp_path, progress=False)
    path = tmp_path / "faulty" / "result.json"
    _damage(path, how)
    run = reproduce("faulty", out=tmp_path, progress=True)
    assert calls == ["faulty", "faulty"] and not run.pieces["faulty"].cached
    assert "damaged cache" in capsys.readouterr().out
    assert run.verdicts == first.verdicts
    stored = _strict(path.read_text())  # rewritten whole, standard JSON
    assert [r["size"] for r in stored["result"]["records"]] == [1, 2]
    again = reproduce("faulty", out=tmp_path, progress=False)
    assert again.pieces["faulty"].cached and calls == ["faulty", "faulty"]
    if how == "a folder":
        assert (tmp_path / "faulty" / "result.json.damaged" / "inside").is_dir()


def test_a_cached_nan_gives_the_same_result_and_verdicts(tmp_path, toy):
    _, calls = toy
    fresh = reproduce("faulty", out=tmp_path, progress=False)
    stored = _strict((tmp_path / "faulty" / "result.json").read_text())
    assert stored["result"]["cliff"] is None and stored["nonfinite"] == [
        [["result", "cliff"], "NaN"]]
    cached = reproduce("faulty", out=tmp_path, progress=False)
    assert cached.pieces["faulty"].cached and calls == ["faulty"]
    assert math.isnan(cached.pieces["faulty"].result["cliff"])
    assert json.dumps(cached.pieces["faulty"].result) == json.dumps(fresh.pieces["faulty"].result)
    assert cached.verdicts == fresh.verdicts


def test_a_piece_folder_that_is_a_file_is_moved_aside(tmp_path, toy):
    _, calls = toy
    (tmp_path / "faulty").write_text("in the way")
    run = reproduce("faulty", out=tmp_path, progress=False)
    assert not run.pieces["faulty"].cached and (tmp_path / "faulty" / "result.json").is_file()
    assert (tmp_path / "faulty.damaged").read_text() == "in the way"


@pytest.mark.parametrize("damage", ["garbage", "a list", "pieces as a list", "a folder",
                                    "deleted"])
def test_a_damaged_manifest_is_rebuilt_from_the_pieces(tmp_path, toy, other_toy, damage):
    reproduce("faulty", out=tmp_path, progress=False)
    manifest = tmp_path / "manifest.json"
    if damage == "garbage":
        manifest.write_text("{ no")
    elif damage == "a list":
        manifest.write_text("[]")
    elif damage == "pieces as a list":
        manifest.write_text('{"pieces": [1, 2], "last_run": 3}')
    elif damage == "a folder":
        manifest.unlink()
        manifest.mkdir()
    else:
        manifest.unlink()
    run = reproduce("other", out=tmp_path, progress=False)
    saved = _strict(manifest.read_text())
    assert set(saved["pieces"]) == {"faulty", "other"}  # nothing dropped
    assert saved["pieces"]["faulty"]["settings"] == {"size": 2}
    assert saved["pieces"]["faulty"]["verdicts"] == {"agrees": 1, "partly": 0,
                                                     "does not agree": 0, "not comparable": 0}
    assert saved["pieces"]["other"]["files"] == ["other/result.json", "other/other.png"]
    assert saved["last_run"]["pieces"] == ["other"]
    assert run.manifest == str(manifest)


def test_the_lock_is_exclusive_between_processes(tmp_path):
    script = textwrap.dedent(f"""
        import fcntl, sys
        handle = open({str(tmp_path / '.lock')!r}, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(7)
        sys.exit(0)
    """)
    pytest.importorskip("fcntl")
    with lock_folder(tmp_path):
        assert subprocess.run([sys.executable, "-c", script]).returncode == 7
    assert subprocess.run([sys.executable, "-c", script]).returncode == 0


_TWO_RUNS = """
import os, sys, time
import torch  # what reproduce loads before the lock, loaded before "ready" is signalled
from intrinsic_rank.experiments import Experiment, register, reproduce

out, ready = sys.argv[1], sys.argv[1] + ".second-ready"

def run(settings, *, random_state, progress, device):
    print("RAN", flush=True)
    for _ in range(600):  # hold the lock until the second run is about to ask for it
        if os.path.exists(ready):
            break
        time.sleep(0.1)
    time.sleep(1.0)
    return dict(records=[dict(size=1, value=0.5)])

def plot(result, folder):
    open(folder + "/slow.png", "wb").write(b"png")
    return ["slow.png"]

register(Experiment(
    name="slow", command="slow-cmd", title="slow", paper="none", help="h", description="d",
    quick=dict(size=1), full=dict(size=1), run=run,
    tables=lambda r: [("rows", r["records"], ["size", "value"])], plot=plot,
    verdicts=lambda r: [("c", "m", "agrees", "e")],
    settings=lambda a: {}, summary=lambda r: [], in_reproduce=False))
if len(sys.argv) > 2:
    open(ready, "w").close()
reproduce("slow", out=out, progress=True)
"""


def test_two_runs_on_the_same_out_take_turns_and_share_the_cache(tmp_path):
    pytest.importorskip("fcntl")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    out = str(tmp_path / "run")
    first = subprocess.Popen([sys.executable, "-c", _TWO_RUNS, out], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in first.stdout:  # wait until the first run computes (it holds the lock)
        lines.append(line)
        if "RAN" in line:
            break
    second = subprocess.run([sys.executable, "-c", _TWO_RUNS, out, "second"],
                            capture_output=True, text=True, env=env, timeout=120)
    rest, first_err = first.communicate(timeout=120)
    first_out = "".join(lines) + rest
    assert first.returncode == 0, first_err
    assert second.returncode == 0, second.stderr
    assert first_out.count("RAN") == 1 and "RAN" not in second.stdout  # computed once
    assert "another run is using" in second.stderr and "waiting" in second.stderr
    assert "[1/1] slow (quick): cached" in second.stdout
    stored = _strict((tmp_path / "run" / "slow" / "result.json").read_text())
    assert stored["result"]["records"] == [{"size": 1, "value": 0.5}]
    manifest = _strict((tmp_path / "run" / "manifest.json").read_text())
    assert list(manifest["pieces"]) == ["slow"]
    assert sorted(os.listdir(tmp_path / "run" / "slow")) == ["result.json", "slow.png"]
