"""inspection's training-free measurements of a head: truncations, the curve, the precision floor."""

import dataclasses

import numpy as np
import pytest

from intrinsic_rank.inspection import (
    head_activations,
    head_output,
    precision_floor,
    quantisation_noise,
    query_basis,
    relative_error,
    truncated_head,
    truncation_risks,
)


@pytest.fixture(scope="module")
def toy_head():
    ids = np.random.default_rng(0).integers(0, 64, (40, 12))
    return head_activations("default", ids, ["L1H1"])[1, 1]


def test_relative_error_is_one_minus_r_squared():
    rng = np.random.default_rng(0)
    reference = rng.normal(size=(50, 3)) * [1.0, 2.0, 3.0]
    # predicting each channel's mean leaves all of its variance: 1 - R^2 = 1
    mean = np.broadcast_to(reference.mean(axis=0), reference.shape)
    assert relative_error(mean, reference) == pytest.approx(1.0)
    assert relative_error(reference, reference) == 0.0
    assert relative_error(reference + 1.0, np.ones_like(reference)) == float("inf")
    # the variance is pooled over every row, per channel, then averaged over channels
    expected = np.mean((reference * 0.9 - reference) ** 2) / np.mean(reference.var(axis=0))
    assert relative_error(reference * 0.9, reference) == pytest.approx(expected)


def test_truncations_reach_the_head_at_full_rank_and_lose_energy_below(toy_head):
    X, Y, facts = toy_head.X, toy_head.Y, toy_head.facts
    basis, values = query_basis(X[:30], facts)
    risks = truncation_risks(X[30:], Y[30:], facts, basis, [1, 4, 16])
    assert risks[-1] < 1e-9  # rank 16 = head_dim: the head itself
    assert risks[0] > risks[-1]
    zero = truncated_head(facts, basis, 0)
    assert not zero.w_q.any() and not zero.b_q.any()
    # the truncation keeps the projection of the queries on the first r directions
    queries = X[:30].reshape(-1, facts.d_model).astype(np.float64) @ facts.w_q + facts.b_q
    cut = truncated_head(facts, basis, 3)
    kept = X[:30].reshape(-1, facts.d_model).astype(np.float64) @ cut.w_q + cut.b_q
    np.testing.assert_allclose(kept, queries @ basis[:, :3] @ basis[:, :3].T, atol=1e-10)
    with pytest.raises(ValueError, match="rank=17 exceeds the 16 columns"):
        truncated_head(facts, basis, 17)


def test_quantisation_noise_is_half_a_step_of_each_block():
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(64, 5))
    noise = quantisation_noise(weights, block=32, levels=16, random_state=3)
    for first in (0, 32):
        part = weights[first:first + 32]
        step = (part.max(axis=0) - part.min(axis=0)) / 15
        assert np.all(np.abs(noise[first:first + 32]) <= step / 2 + 1e-15)
        # a uniform draw on [-s/2, s/2] has variance s^2/12
        ratio = np.mean(noise[first:first + 32] ** 2 / step ** 2)
        assert 1 / 12 * 0.6 < ratio < 1 / 12 * 1.4
    np.testing.assert_array_equal(noise, quantisation_noise(weights, random_state=3))
    constant = np.ones((32, 2))
    assert not quantisation_noise(constant).any()  # one level: nothing to round


def test_the_precision_floor_is_the_change_of_the_output(toy_head):
    X, facts = toy_head.X, toy_head.facts
    floor = precision_floor(X, facts, n_draws=2, random_state=5)
    expected = np.mean([relative_error(
        head_output(X, facts, w_q=facts.w_q + quantisation_noise(
            facts.w_q, random_state=(5, draw))), head_output(X, facts)) for draw in (0, 1)])
    assert floor == pytest.approx(expected)
    # a head whose query weights are constant per block sits exactly on its grid
    flat = dataclasses.replace(facts, w_q=np.ones_like(facts.w_q))
    assert precision_floor(X, flat) == 0.0
    # a finer grid moves the output less
    assert precision_floor(X, facts, levels=256) < floor
