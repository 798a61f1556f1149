"""Query ranks for every head of a model under one total budget.

An allocation gives each head ``h`` a rank ``1 <= r_h <= w_h`` (``w_h`` its width,
which keeps the head whole) with ``sum_h r_h`` at a budget. Four rules:

* **output share** (this library's): the heads' first-order output-error curves
  (:func:`~intrinsic_rank.inspection.output_error_curve`: the error each rank leaves
  in the layer's attention output, as a share of it) summed over heads and
  minimised under the budget -- a Lagrangian pick per head, then the ranks left
  over given where they remove the most error (:func:`budget_allocation`);
* **uniform**: the same rank for every head, one more for the first heads when the
  budget is not a multiple of the number of heads;
* **query energy**: every head at the rank keeping all but a share ``e`` of its
  realised queries' energy, ``e`` chosen so that the total is the nearest to the
  budget;
* **r*_attn**: every head at its ``r*_attn(tau)`` for one tolerance ``tau`` shared by
  all heads (the smallest rank whose risk on the map's curve is at most ``tau``), ``tau``
  chosen so that the total is the nearest to the budget.
"""

import numpy as np

from ..._validation import check_int

__all__ = ["MODEL_ALLOCATIONS", "attn_allocation", "budget_allocation",
           "query_energy_allocation", "uniform_allocation"]

MODEL_ALLOCATIONS = ("output share", "uniform", "query energy", "r*_attn")
"""The allocations of :func:`~intrinsic_rank.experiments.model_rank`, this library's first."""


def _check_budget(budget, widths):
    budget = check_int(budget, "budget", minimum=len(widths))
    return min(budget, int(sum(widths.values())))


def budget_allocation(curves, budget):
    """Ranks minimising the summed curves with ``sum r_h`` at the budget.

    Parameters
    ----------
    curves : dict of key -> array-like of shape (w + 1,)
        ``curves[h][r]`` is head ``h``'s cost at rank ``r`` (``r = 0 .. w``),
        non-increasing in ``r`` for the pick to be optimal (it is near optimal
        otherwise).
    budget : int
        The total rank, at least one per head.

    Returns
    -------
    ranks : dict of key -> int
        Each in ``1 .. w``; their sum is the budget (or every width, when the
        budget is larger).

    Raises
    ------
    ValueError
        For a budget below one rank per head.

    Examples
    --------
    >>> curves = {"a": [9.0, 4.0, 1.0, 0.0], "b": [2.0, 1.0, 0.5, 0.0]}
    >>> budget_allocation(curves, 3)
    {'a': 2, 'b': 1}
    >>> budget_allocation(curves, 4)  # a's third rank removes 1.0, b's second 0.5
    {'a': 3, 'b': 1}
    """
    curves = {key: np.asarray(value, dtype=np.float64) for key, value in curves.items()}
    widths = {key: len(value) - 1 for key, value in curves.items()}
    budget = _check_budget(budget, widths)

    def pick(price):
        return {key: 1 + int(np.argmin(c[1:] + price * np.arange(1, len(c))))
                for key, c in curves.items()}

    low, high = 0.0, max(float(c[1] - c[-1]) for c in curves.values()) + 1.0
    for _ in range(200):  # the total falls as the price of a rank rises
        middle = 0.5 * (low + high)
        if sum(pick(middle).values()) > budget:
            low = middle
        else:
            high = middle
    ranks = pick(high)
    spare = budget - sum(ranks.values())
    while spare > 0:  # the ranks the price left over, where each removes the most
        gains = {key: curves[key][r] - curves[key][r + 1]
                 for key, r in ranks.items() if r < widths[key]}
        if not gains:
            break
        best = max(gains, key=gains.get)
        ranks[best] += 1
        spare -= 1
    return ranks


def uniform_allocation(widths, budget):
    """One rank for every head, one more for the first heads to reach the budget.

    Parameters
    ----------
    widths : dict of key -> int
        Each head's width, in the order the heads are given one more rank.
    budget : int

    Returns
    -------
    ranks : dict of key -> int

    Examples
    --------
    >>> uniform_allocation({"a": 4, "b": 4, "c": 4}, 7)
    {'a': 3, 'b': 2, 'c': 2}
    """
    budget = _check_budget(budget, widths)
    base, extra = divmod(budget, len(widths))
    ranks = {}
    for index, (key, width) in enumerate(widths.items()):
        ranks[key] = min(width, base + (index < extra))
    return ranks


def _nearest_total(rule, budget, low, high):
    """``rule(t)`` for the ``t`` in ``[low, high]`` whose total is the nearest to ``budget``
    (the total falls as ``t`` rises)."""
    for _ in range(100):
        middle = 0.5 * (low + high)
        if sum(rule(middle).values()) > budget:
            low = middle
        else:
            high = middle
    below, above = rule(high), rule(low)
    return min((below, above), key=lambda ranks: abs(sum(ranks.values()) - budget))


def query_energy_allocation(energies, budget):
    """Every head at the rank keeping all but a share ``e`` of its query energy.

    Parameters
    ----------
    energies : dict of key -> array-like of shape (w,)
        The energy of each head's realised queries along each singular direction,
        largest first.
    budget : int

    Returns
    -------
    ranks : dict of key -> int
        The total is the nearest to the budget that one shared ``e`` gives.

    Examples
    --------
    >>> query_energy_allocation({"a": [8.0, 1.0, 1.0], "b": [5.0, 5.0, 0.0]}, 4)
    {'a': 2, 'b': 2}
    """
    shares = {}
    for key, values in energies.items():
        values = np.asarray(values, dtype=np.float64)
        total = max(float(values.sum()), np.finfo(float).tiny)
        shares[key] = np.cumsum(values) / total
    _check_budget(budget, {key: len(v) for key, v in shares.items()})

    def rule(e):
        return {key: int(min(len(c), np.searchsorted(c, 1.0 - e - 1e-12) + 1))
                for key, c in shares.items()}

    return _nearest_total(rule, budget, 0.0, 1.0)


def attn_allocation(risks, budget):
    """Every head at its ``r*_attn(tau)`` for one shared tolerance ``tau``.

    Parameters
    ----------
    risks : dict of key -> array-like of shape (w,)
        Each head's risk at ranks ``1 .. w`` (the map's curve: trained where
        trained, else truncated; 0 at the width).
    budget : int

    Returns
    -------
    ranks : dict of key -> int
        The total is the nearest to the budget that one shared ``tau`` gives.

    Examples
    --------
    >>> attn_allocation({"a": [0.5, 0.1, 0.0], "b": [0.05, 0.01, 0.0]}, 3)
    {'a': 2, 'b': 1}
    """
    curves = {key: np.minimum.accumulate(np.asarray(v, dtype=np.float64))
              for key, v in risks.items()}
    _check_budget(budget, {key: len(c) for key, c in curves.items()})

    def rule(log_tau):
        tau = float(np.exp(log_tau))
        return {key: int(min(len(c), np.argmax(c <= tau) + 1 if (c <= tau).any() else len(c)))
                for key, c in curves.items()}

    positive = [float(v) for c in curves.values() for v in c if v > 0]
    low = np.log(min(positive)) - 1.0 if positive else -50.0
    high = np.log(max(positive)) + 1.0 if positive else 0.0
    return _nearest_total(rule, budget, low, high)
