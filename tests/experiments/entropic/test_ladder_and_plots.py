import json

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS, fit_seeds, interpolation_ladder


@pytest.fixture(scope="module")
def ladder():
    return interpolation_ladder(
        n_samples=1024, n_test=512, seq_len=6, d=8, r_star=3, random_state=1
    )


def test_ladder_failure_starts_at_b1(ladder):
    floor = ladder.noise_floor
    b0, *conditioned = ladder.records
    assert b0["attention"] == "fixed" and b0["rank"] == 6  # full operator rank L
    assert abs(b0["excess_risk"]) < 0.1 * floor  # B0 reaches the floor
    for rec in conditioned:
        assert rec["rank"] == 8  # full kernel rank d
        assert rec["excess_risk"] > 20 * floor, rec  # many times larger, from B1 on


def test_ladder_rejects_unknown_rung():
    with pytest.raises(ValueError, match="unknown rung"):
        interpolation_ladder(rungs=("fixed", "mlp"))


def test_ladder_command(tmp_path, capsys):
    status = main([
        "ladder", "--d", "4", "--seq-len", "4", "--r-star", "2", "--n-samples", "400",
        "--epochs", "60", "--out", str(tmp_path), "--quiet",
    ])
    assert status == 0
    text = capsys.readouterr().out
    assert "B1 linear QK" in text and "B3 Transformer block" in text
    saved = json.loads((tmp_path / "ladder.json").read_text())
    assert [rec["attention"] for rec in saved["records"]] == ["fixed", "linear", "softmax", "block"]
    assert (tmp_path / "ladder.png").stat().st_size > 10_000


# ---------------------------------------------------------------- names and figures


def _legends_off_the_axes(fig):
    """Every legend lies outside its axes' data area (under it, or in an axes of its own)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not ax.axison:
            continue
        box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert box.y1 <= area.y0 + 1, (ax.get_title(), box, area)


def test_ladder_ratio_is_excess_over_the_floor(ladder):
    from intrinsic_rank.experiments.entropic._ladder import LADDER_COLUMNS

    for rec in ladder.records:
        assert rec["excess_to_floor_ratio"] == rec["excess_risk"] / ladder.noise_floor
        assert "excess_over_floor" not in rec
    assert "excess_to_floor_ratio" in LADDER_COLUMNS


def test_ladder_plot_draws_risk_against_the_floor(ladder):
    from intrinsic_rank.experiments import plot_ladder

    fig = plot_ladder(ladder)
    (ax,) = fig.axes
    assert "test risk" in ax.get_ylabel() and "excess" not in ax.get_ylabel()
    heights = [bar.get_height() for bar in ax.patches]
    assert heights == [rec["test_risk"] for rec in ladder.records]  # risk, not excess
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [ladder.noise_floor]
    assert ax.get_title() and ax.get_xlabel()
    _legends_off_the_axes(fig)


def _fake_sweep():
    from sklearn.utils import Bunch

    risk = [0.5, 0.33, 0.2, 0.0101, 0.01, 0.01]
    records = [dict(rank=r, heldout_risk=x, excess_risk=x - 0.01,
                    energy_effective_rank=min(r, 4.0), numerical_rank=r)
               for r, x in zip(range(1, 7), risk)]
    return Bunch(records=records, rank_=4, r_star=4, noise_floor=0.01, noise_floor_=0.01,
                 excess_tol=0.02, config=dict(teacher="softmax", attention="softmax", r_star=4,
                                              d=8, seq_len=4, n_samples=100, noise=0.1,
                                              random_state=0))


def test_sweep_plot_puts_each_quantity_on_its_own_axis():
    from intrinsic_rank.experiments import plot_sweep

    fig = plot_sweep(_fake_sweep())
    risk_ax, rank_ax = fig.axes
    assert risk_ax.get_ylabel().startswith("held-out risk")
    # the lines drawn on the risk axis are risks: the noise floor and floor + tolerance
    levels = sorted(line.get_ydata()[0] for line in risk_ax.get_lines()
                    if len(set(line.get_ydata())) == 1 and len(line.get_ydata()) == 2)
    assert levels == pytest.approx([0.01, 0.03])
    labels = [line.get_label() for line in rank_ax.get_lines()]
    numerical = rank_ax.get_lines()[labels.index("numerical rank of the learned kernel")]
    energy = rank_ax.get_lines()[labels.index("energy effective rank of the learned kernel")]
    ceiling = rank_ax.get_lines()[labels.index("student rank r (the ceiling)")]
    # the numerical rank sits on the ceiling: drawn apart, with another marker and style
    assert numerical.get_marker() != energy.get_marker()
    assert numerical.get_linestyle() != ceiling.get_linestyle()
    assert list(numerical.get_xdata()) != list(ceiling.get_xdata())
    assert all(ax.get_title() and ax.get_xlabel() for ax in fig.axes)
    _legends_off_the_axes(fig)


def test_frontier_plot_has_one_legend_off_the_panels():
    from sklearn.utils import Bunch

    from intrinsic_rank.experiments import plot_frontier

    records = [dict(teacher=t, r_star=r, numerical_rank=r, energy_rank=r + 0.01,
                    mixer_energy_rank=min(r, 3), recovery_energy_rank=float("nan"),
                    recovery_numerical_rank=float("nan"))
               for t in ("linear, V known", "softmax, linear-QK fit") for r in range(1, 5)]
    fig = plot_frontier(Bunch(records=records, config=dict(
        teachers=["linear, V known", "softmax, linear-QK fit"], d=4, seq_len=4,
        n_samples=100, noise=0.1, kernel_scale=2.0)))
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 2 and all(ax.get_legend() is None for ax in panels)
    (legend_ax,) = [ax for ax in fig.axes if not ax.axison]
    assert len(legend_ax.get_legend().get_texts()) == 4  # exact + three estimators
    # estimators that agree are drawn side by side, not on top of each other
    xs = {line.get_label(): tuple(line.get_xdata()) for line in panels[0].get_lines()}
    assert xs["numerical rank (noise-aware)"] != xs["energy effective rank"]


def test_fit_seeds_checks_n_jobs():
    with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
        fit_seeds(AttentionRankEstimator(), np.zeros((4, 2, 2)), np.zeros(4), n_jobs="x")


def test_warnings_of_worker_processes_reach_the_caller():
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 2
    with pytest.warns(ConvergenceWarning):
        fit_seeds(LogisticRegression(max_iter=1, solver="saga"), X, y, seeds=[0, 1],
                  n_jobs=2, threads_per_job=1)


def test_frontier_says_the_dash_it_prints():
    experiment = EXPERIMENTS["frontier"]
    cfg = dict(d=16, seq_len=8, n_samples=64, noise=0.1, kernel_scale=2.0, teachers=[])
    (header, *_) = experiment.summary(dict(config=cfg, records=[], seconds=1.0))
    assert "– = not applicable" in header and "nan" not in header
    (caption, *_), = experiment.tables(dict(records=[]))
    assert "–: not applicable" in caption
