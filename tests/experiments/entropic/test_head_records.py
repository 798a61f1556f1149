"""What the figures, the answers and impose read from a map's records: one accessor."""

import pytest

from intrinsic_rank.experiments.entropic._head_records import answer_at

RECORD = dict(tolerances=[0.01, 0.05, 0.2], r_star=[None, 7, 3], r_star_free=[None, 9, 3],
              r_star_text=["> 15", "7", "3"])


@pytest.mark.parametrize("tol, key, value", [
    (0.01, "r_star", None), (0.05, "r_star", 7), (0.2, "r_star", 3),
    (0.05, "r_star_free", 9), (0.01, "r_star_text", "> 15")])
def test_each_tolerance_reads_its_own_entry(tol, key, value):
    assert answer_at(RECORD, tol, key) == value


def test_a_tolerance_not_measured_is_one_line():
    with pytest.raises(ValueError, match=r"tolerance 0.1 was not measured for this head "
                                         r"\(its tolerances: 0.01, 0.05, 0.2\)"):
        answer_at(RECORD, 0.1)
    with pytest.raises(ValueError, match=r"holds no r_star per tolerance \(a constant head\)"):
        answer_at(dict(tolerances=[0.1], constant_output=True), 0.1)
    with pytest.raises(ValueError, match="a plant that was not sharp"):
        answer_at(dict(planted_rank=4, plantable=False), 0.1)


def test_the_spread_of_a_head_output():
    import numpy as np

    from intrinsic_rank.experiments.entropic._head_records import CONSTANT_OUTPUT, output_spread

    Y = np.random.default_rng(0).normal(size=(4, 8, 3)) + 5.0
    expected = np.sqrt(np.mean(np.var(Y.reshape(-1, 3), axis=0)) / np.mean(Y ** 2))
    assert output_spread(Y) == pytest.approx(expected, rel=1e-12)
    assert output_spread(np.full((4, 8, 3), 2.5)) == 0.0 < CONSTANT_OUTPUT
    with pytest.raises(ValueError, match="at least one token"):
        output_spread(np.zeros((0, 3)))
