"""Accessibility curves on the embedded default model: n50 grows linearly with m."""


import numpy as np
import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import accessibility_curves, plot_accessibility


@pytest.fixture(scope="module")
def curves():
    return accessibility_curves(n_memory=(1, 2, 3, 4), n_targets=8, quick=True, random_state=0)


def test_n50_grows_with_memory(curves):
    n50 = [fit["n50"] for fit in curves.n50]
    assert all(fit["bracketed"] for fit in curves.n50)
    assert np.all(np.diff(n50) > 0), n50
    assert 2 < n50[0] < 8 and n50[-1] > 2 * n50[0]
    slope = curves.slope
    assert slope["n_points"] == 4 and slope["slope"] > 1.5
    assert 0.9 < slope["r2"] <= 1.0  # the fit's R^2 is reported


def test_measured_slope_stays_below_the_bound(curves):
    bound = curves.bound
    assert (bound["width"], bound["vocab_size"]) == (64, 64)
    assert curves.slope["slope"] < bound["box_slope_bound"] <= bound["slope_bound"]
    assert bound["ratio"] == pytest.approx(bound["slope_bound"] / curves.slope["slope"])
    assert bound["ratio"] > 1


def test_records_and_auto_lengths(curves):
    for m in (1, 2, 3, 4):
        rows = [r for r in curves.records if r["n_memory"] == m]
        lengths = [r["length"] for r in rows]
        assert lengths[0] == 2 and lengths == sorted(lengths)
        # "auto" stops after two lengths in a row with nobody reached
        assert [r["accessibility"] for r in rows[-2:]] == [0.0, 0.0]
        assert rows[0]["accessibility"] == 1.0
    assert curves.config["max_steps"] == 600 and curves.config["patience"] == 200


def test_plot(curves, tmp_path):
    fig = plot_accessibility(curves, tmp_path / "reach.png")
    assert (tmp_path / "reach.png").stat().st_size > 10_000
    assert len(fig.axes) == 2


def test_explicit_lengths_and_errors():
    result = accessibility_curves(n_memory=[1], lengths=[2, 3], n_targets=2, max_steps=30,
                                  patience=10, random_state=0)
    assert [r["length"] for r in result.records] == [2, 3]
    with pytest.raises(ValueError, match="n_memory"):
        accessibility_curves(n_memory=[0])
    with pytest.raises(ValueError, match="lengths"):
        accessibility_curves(lengths=[1, 2])
    with pytest.raises(ValueError, match="context"):
        accessibility_curves(n_memory=[200], lengths=[2])


def test_reach_lengths_use_the_shared_parser(tmp_path, capsys):
    assert main(["reach", "--lengths", "0-3", "--out", str(tmp_path), "--quiet"]) == 2
    assert "argument --lengths: the grid '0-3' holds 0; its entries must be integers >= 1" \
        in capsys.readouterr().err
