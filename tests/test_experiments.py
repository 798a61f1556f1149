import json

import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import interpolation_ladder


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


def test_verbose_is_deprecated_for_progress():
    from intrinsic_rank.experiments import rank_sweep

    tiny = dict(n_samples=200, n_test=100, seq_len=4, d=4, r_star=2, rungs=("fixed",),
                max_epochs=5)
    with pytest.warns(FutureWarning, match="`verbose` was renamed `progress`"):
        old = interpolation_ladder(verbose=0, **tiny)
    assert old.records == interpolation_ladder(progress=False, **tiny).records
    sweep = dict(teacher="linear", r_star=1, d=4, seq_len=4, n_samples=200, ranks=[1],
                 max_epochs=5)
    with pytest.warns(FutureWarning, match="`verbose` was renamed `progress`"):
        old = rank_sweep(verbose=0, **sweep)
    assert old.records == rank_sweep(**sweep).records
