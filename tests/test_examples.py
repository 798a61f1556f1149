"""Every script in examples/ runs to the end (they also build the docs' gallery)."""

import pathlib
import runpy

import matplotlib
import pytest

matplotlib.use("Agg")

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out.strip()  # every example reports what it found
    assert list(tmp_path.glob("*.png")) or "grid_search" in script.name
