"""Query ranks under one budget: the library's allocation against brute force, and the rules
it is compared with."""

import itertools

import numpy as np
import pytest

from intrinsic_rank.experiments.entropic._allocations import (
    attn_allocation,
    budget_allocation,
    query_energy_allocation,
    uniform_allocation,
)


def _convex_curves(rng, heads, width):
    curves = {}
    for h in range(heads):
        drops = np.sort(rng.exponential(size=width))[::-1] * rng.uniform(0.1, 10)
        curves[h] = np.append(np.cumsum(drops[::-1])[::-1], 0.0)
    return curves


@pytest.mark.parametrize("seed", range(6))
def test_the_allocation_is_the_cheapest_at_its_budget(seed):
    rng = np.random.default_rng(seed)
    curves = _convex_curves(rng, 3, 5)
    for budget in range(3, 16):
        ranks = budget_allocation(curves, budget)
        assert sum(ranks.values()) == budget and all(1 <= r <= 5 for r in ranks.values())
        cost = sum(curves[h][r] for h, r in ranks.items())
        best = min(sum(curves[h][r] for h, r in enumerate(choice))
                   for choice in itertools.product(range(1, 6), repeat=3)
                   if sum(choice) == budget)
        assert cost == pytest.approx(best, rel=1e-12, abs=1e-12)


def test_budgets_beyond_the_widths_and_below_one_rank_per_head():
    curves = {"a": [3.0, 1.0, 0.0], "b": [2.0, 1.0, 0.0]}
    assert budget_allocation(curves, 99) == {"a": 2, "b": 2}
    with pytest.raises(ValueError, match="budget"):
        budget_allocation(curves, 1)


def test_uniform_query_energy_and_r_attn_rules():
    assert uniform_allocation({"a": 8, "b": 8, "c": 8}, 10) == {"a": 4, "b": 3, "c": 3}
    energies = {"a": [9.0, 0.9, 0.1], "b": [4.0, 4.0, 2.0]}
    ranks = query_energy_allocation(energies, 4)
    # one shared e: b, whose energy is spread, keeps more ranks than a
    assert sum(ranks.values()) == 4 and ranks["b"] > ranks["a"]
    risks = {"a": [0.4, 0.05, 0.0], "b": [0.02, 0.01, 0.0], "c": [0.9, 0.5, 0.0]}
    ranks = attn_allocation(risks, 6)
    assert sum(ranks.values()) == 6 and ranks["c"] == 3 and ranks["b"] == 1
