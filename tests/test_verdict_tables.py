"""``scripts/verdict_tables.py``: the docs' verdict tables come from a real run folder."""

import importlib.util
import json
from pathlib import Path

import pytest

from intrinsic_rank.experiments import EXPERIMENTS, Experiment, reproduce
from intrinsic_rank.experiments.runner import register

ROOT = Path(__file__).resolve().parents[1]


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
        settings=lambda args: {},
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
    with pytest.raises(SystemExit, match="cannot be read"):
        _script().verdict_tables(tmp_path)
