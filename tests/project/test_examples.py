"""Every script in examples/ runs to the end (they also build the docs' gallery).

The scripts are run cell by cell (``# %%``), as sphinx-gallery runs them, so the test also
sees what the gallery shows: the value of the last expression of a cell is printed under it
(a stray ``<Figure size ...>`` when a plotting call ends a cell), and each cell's open
figures become its images, the thumbnail being the figure that
``# sphinx_gallery_thumbnail_number`` names.
"""

import ast
import pathlib
import re

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples").glob("*.py"))
CELL = re.compile(r"^# %%", flags=re.M)
THUMBNAIL = re.compile(r"^# sphinx_gallery_thumbnail_number = (-?\d+)$", flags=re.M)


def split_cells(source):
    """``[(first_line, text), ...]``: the script cut at each ``# %%`` line."""
    starts = [0] + [m.start() for m in CELL.finditer(source)]
    return [(source.count("\n", 0, start), source[start:end])
            for start, end in zip(starts, starts[1:] + [len(source)])]


def run_cells(script):
    """Run ``script`` as the gallery does: the value each cell ends on, and its figures.

    Returns
    -------
    values : list
        Per cell, the value of its last statement when that is an expression, else None.
    figures : list of int
        Per cell, how many figures it left open (the gallery's scraper takes and closes
        them after each cell).
    """
    namespace = {"__name__": "__main__", "__file__": str(script)}
    values, figures = [], []
    for first_line, text in split_cells(script.read_text()):
        tree = ast.parse("\n" * first_line + text, filename=str(script))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, str(script), "exec"), namespace)
        value = None
        if last is not None:
            value = eval(compile(ast.Expression(last.value), str(script), "eval"), namespace)
        values.append(value)
        figures.append(len(plt.get_fignums()))
        plt.close("all")
    return values, figures


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_cells_are_gallery_cells(script):
    """Fast, without running: a docstring, text-and-code cells, a thumbnail directive."""
    source = script.read_text()
    tree = ast.parse(source)
    assert ast.get_docstring(tree), f"{script.name}: no docstring (the gallery's title)"
    cells = split_cells(source)[1:]
    assert len(cells) >= 2, f"{script.name}: split it into # %% cells of text and code"
    for _, text in cells:
        body = text.splitlines()[1:]
        assert body and body[0].startswith("# "), \
            f"{script.name}: a cell opens with its text (# lines) before the code: {text[:60]!r}"
    assert len(THUMBNAIL.findall(source)) == 1, \
        f"{script.name}: name the thumbnail's figure with # sphinx_gallery_thumbnail_number"


#: the scripts that train for more than ten seconds run under ``-m slow`` only: the docs
#: build of ``.ci/run`` (sphinx-gallery with ``abort_on_example_error``) runs every script
SLOW_EXAMPLES = {"grid_search_pipeline.py", "plot_rank_sweep.py"}


@pytest.mark.parametrize("script", [
    pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW_EXAMPLES else p
    for p in EXAMPLES], ids=lambda p: p.name)
def test_example_runs(script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    values, figures = run_cells(script)
    assert capsys.readouterr().out.strip()  # every example reports what it found
    assert list(tmp_path.glob("*.png")) or "grid_search" in script.name
    # what the gallery shows: no object repr under a cell, a real figure for the thumbnail
    stray = [(i, type(v).__name__) for i, v in enumerate(values) if v is not None]
    assert not stray, f"{script.name}: cells ending on a value the gallery prints: {stray}"
    thumbnail = int(THUMBNAIL.search(script.read_text())[1])
    assert sum(figures) >= 1, f"{script.name}: no figure"
    assert 1 <= thumbnail <= sum(figures) or -sum(figures) <= thumbnail <= -1, \
        f"{script.name}: thumbnail {thumbnail} of {sum(figures)} figures"
