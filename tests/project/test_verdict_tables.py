"""``scripts/verdict_tables.py``: the docs' verdict tables come from a real run folder."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from intrinsic_rank.experiments import EXPERIMENTS, Experiment, reproduce
from intrinsic_rank.experiments.runner import register

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "verdict_tables", ROOT / "scripts" / "verdict_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_folder(tmp_path):
    """A finished reproduce run of a toy piece whose verdicts depend on its settings."""
    def run(settings, **kwargs):
        return dict(records=[dict(size=i) for i in range(settings["size"])])

    def plot(result, folder):
        Path(folder, "toy.png").write_bytes(b"png")
        return ["toy.png"]

    experiment = register(Experiment(
        name="tabled", command="tabled-cmd", title="A toy", paper="none", help="h",
        description="d", quick=dict(size=3), full=dict(size=1), run=run,
        tables=lambda result: [("rows", result["records"], ["size"])], plot=plot,
        verdicts=lambda result: [
            ("the toy has three rows", f"{len(result['records'])} rows",
             "agrees" if len(result["records"]) == 3 else "does not agree", "3 | counted"),
            ("a claim about big models", "a toy's number", "not comparable", "unlike")],
        summary=lambda result: [], in_reproduce=False))
    try:
        reproduce("tabled", out=tmp_path / "run", progress=False, command="CMD --quick")
        yield tmp_path / "run"
    finally:
        EXPERIMENTS.pop(experiment.name)


def test_the_tables_name_the_run_and_hold_its_verdicts(run_folder):
    text = _script().verdict_tables(run_folder)
    manifest = json.loads((run_folder / "manifest.json").read_text())
    last = manifest["last_run"]
    assert (f"`CMD --quick` (finished {last['finished']}, {last['seconds']:.0f} s wall; "
            "quick scale, seed 0") in text
    start, end = last["machine"]["load_average"][0], last["machine"]["load_average_end"][0]
    assert f"load average (1 min) {start:g} at the start and {end:g} at the end" in text
    assert "| tabled | " in text and "| 1 | 0 | 0 | 1 |" in text
    assert "| tabled | the toy has three rows | 3 rows | **agrees** |" in text
    assert "| tabled | a claim about big models | a toy's number | **not comparable** |" in text
    assert "**total**" in text


def test_write_replaces_the_marked_block_only(run_folder, tmp_path):
    script = _script()
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{script.START}\nold table\n{script.END}\nafter\n")
    assert script.main([str(run_folder), "--write", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith(f"{script.END}\nafter\n")
    assert "old table" not in text and "**agrees**" in text
    doc.write_text("no markers\n")
    with pytest.raises(SystemExit, match="must hold one"):
        script.main([str(run_folder), "--write", str(doc)])


def test_extra_json_is_judged_by_its_experiment(run_folder, tmp_path):
    extra = tmp_path / "one_row.json"
    extra.write_text(json.dumps(dict(records=[dict(size=0)], config=dict(model="big"))))
    text = _script().verdict_tables(run_folder, [f"tabled={extra}"])
    assert "| tabled (big; one_row.json) | the toy has three rows | 1 rows | " \
           "**does not agree** |" in text
    assert f"Rows not from that run: tabled (big; one_row.json): `{extra}` (written " in text
    with pytest.raises(SystemExit, match="NAME=PATH"):
        _script().verdict_tables(run_folder, ["nope=x.json"])


def test_a_folder_without_a_finished_run_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="manifest.json is missing; give the --out folder"):
        _script().verdict_tables(tmp_path)


def _edit_json(path, change):
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data)))


def _set(mapping, key, value):
    mapping[key] = value
    return mapping


DAMAGES = {
    # name: (damage the run folder, the file named, what the one line says)
    "manifest is a list": (
        lambda run: (run / "manifest.json").write_text("[1, 2]"),
        "manifest.json", "holds a JSON list, not an object"),
    "manifest truncated": (
        lambda run: (run / "manifest.json").write_text('{"last_run": {"comm'),
        "manifest.json", "is not valid JSON (truncated or damaged"),
    "piece folder deleted": (
        lambda run: shutil.rmtree(run / "tabled"),
        "result.json", "is missing; piece 'tabled' of the run is damaged or was deleted"),
    "result truncated": (
        lambda run: (run / "tabled" / "result.json").write_text(
            (run / "tabled" / "result.json").read_text()[:40]),
        "result.json", "is not valid JSON (truncated or damaged"),
    "result without verdicts": (
        lambda run: _edit_json(run / "tabled" / "result.json",
                               lambda d: {k: v for k, v in d.items() if k != "verdicts"}),
        "result.json", "has no 'verdicts'"),
    "result holds a list": (
        lambda run: (run / "tabled" / "result.json").write_text("[]"),
        "result.json", "holds a JSON list, not an object"),
    "verdicts not a list": (
        lambda run: _edit_json(run / "tabled" / "result.json",
                               lambda d: _set(d, "verdicts", {"a": 1})),
        "result.json", "'verdicts' must be a list; got a JSON dict"),
    "a verdict of the wrong shape": (
        lambda run: _edit_json(run / "tabled" / "result.json",
                               lambda d: _set(d, "verdicts", [1])),
        "result.json", "verdict 0 must be an object with the strings"),
    "a verdict that is no verdict": (
        lambda run: _edit_json(run / "tabled" / "result.json",
                               lambda d: _set(d, "verdicts", [dict(d["verdicts"][0],
                                                                   verdict="maybe")])),
        "result.json", "verdict 0 is 'maybe', not one of agrees"),
    "result seconds a string": (
        lambda run: _edit_json(run / "tabled" / "result.json",
                               lambda d: _set(d, "seconds", "slow")),
        "result.json", "'seconds' must be a number >= 0"),
    "last_run seconds a string": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", _set(d["last_run"], "seconds",
                                                                  "fast"))),
        "manifest.json", "last_run's 'seconds' must be a number >= 0; got \"fast\""),
    "last_run pieces a string": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", _set(d["last_run"], "pieces",
                                                                  "tabled"))),
        "manifest.json", "last_run's 'pieces' must be a list of piece names"),
    "last_run pieces out of the folder": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", _set(d["last_run"], "pieces",
                                                                  ["../tabled"]))),
        "manifest.json", "last_run's 'pieces' must be a list of piece names"),
    "last_run command missing": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", {k: v for k, v in
                                                              d["last_run"].items()
                                                              if k != "command"})),
        "manifest.json", "last_run has no 'command'"),
    "last_run seed a float": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", _set(d["last_run"],
                                                                  "random_state", 0.5))),
        "manifest.json", "last_run's 'random_state' must be an integer"),
    "last_run machine load a string": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", _set(d["last_run"], "machine",
                                                                  {"load_average": "high"}))),
        "manifest.json", "last_run's machine 'load_average' must be a list of numbers"),
    "last_run interrupted": (
        lambda run: _edit_json(run / "manifest.json",
                               lambda d: _set(d, "last_run", _set(d["last_run"],
                                                                  "interrupted", True))),
        "run", "holds no finished run (last_run missing or interrupted)"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_run_folder_is_refused_in_one_line(run_folder, damage, capsys):
    change, named, says = DAMAGES[damage]
    change(run_folder)
    with pytest.raises(SystemExit) as raised:
        _script().main([str(run_folder)])
    message = str(raised.value.code)
    assert message.startswith("verdict_tables: ") and "\n" not in message
    assert named in message and says in message, message
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("target", ["missing", "a folder"])
def test_write_to_a_file_that_is_not_there_is_refused_in_one_line(run_folder, tmp_path,
                                                                  target):
    path = tmp_path / "missing.md"
    if target == "a folder":
        path.mkdir()
    with pytest.raises(SystemExit) as raised:
        _script().main([str(run_folder), "--write", str(path)])
    message = str(raised.value.code)
    assert "\n" not in message and str(path) in message
    assert ("is missing" if target == "missing" else "is not a regular file") in message
    assert "--write takes an existing file holding one" in message


@pytest.mark.parametrize("content, says", [
    (None, "is missing"),
    ("[1]", "holds a JSON list, not an object"),
    ('{"records": 3}', "tabled's verdicts cannot read this file (TypeError"),
])
def test_an_extra_file_its_experiment_cannot_judge_is_refused_in_one_line(run_folder,
                                                                          tmp_path, content,
                                                                          says):
    extra = tmp_path / "extra.json"
    if content is not None:
        extra.write_text(content)
    with pytest.raises(SystemExit) as raised:
        _script().verdict_tables(run_folder, [f"tabled={extra}"])
    message = str(raised.value.code)
    assert "\n" not in message and str(extra) in message and says in message, message


def test_a_missing_load_reads_as_every_table_s_missing_value(run_folder):
    from intrinsic_rank.experiments.runner import MISSING

    _edit_json(run_folder / "manifest.json",
               lambda d: _set(d, "last_run", _set(d["last_run"], "machine",
                                                  dict(d["last_run"]["machine"],
                                                       load_average=None))))
    text = _script().verdict_tables(run_folder)
    assert f"load average (1 min) {MISSING} at the start and " in text
