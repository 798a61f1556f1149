"""Rank selection: the smallest rank whose held-out excess risk reaches the floor, and the
adaptive search (``rank_grid="auto"``) that finds it with fewer trained ranks."""

import numpy as np

__all__ = ["AUTO_REFINE_WIDTH", "adaptive_rank_search", "coarse_rank_grid", "grid_cut_text",
           "refinement_ranks", "select_rank"]


def grid_cut_text(grid, kept, limit, attention):
    """What to say when a rank grid is cut to the chosen class's rank limit, or ``None``.

    With ``attention="auto"`` the limit is known only once the class is chosen
    (``L`` for ``"fixed"``, ``d`` for the others), so the ranks above it are
    left out of the sweep instead of refused; the estimator says so.

    Parameters
    ----------
    grid : sequence of int
        The ``rank_grid`` given.
    kept : sequence of int
        The ranks that are trained.
    limit : int
    attention : str
        The class chosen.

    Returns
    -------
    text : str or None
        ``None`` when nothing was cut.

    Examples
    --------
    >>> grid_cut_text([1, 2, 8], [1, 2], 4, "linear")  # doctest: +ELLIPSIS
    'rank_grid was cut to the rank limit 4 of the chosen class linear: rank 8 left out, ...'
    >>> grid_cut_text([1, 2], [1, 2], 4, "linear") is None
    True
    """
    dropped = [int(r) for r in grid if r not in kept]
    if not dropped:
        return None
    listed = (f"rank {dropped[0]}" if len(dropped) == 1 else
              f"ranks {dropped[0]}-{dropped[-1]}" if dropped == list(
                  range(dropped[0], dropped[-1] + 1)) else
              "ranks " + ", ".join(map(str, dropped)))
    return (f"rank_grid was cut to the rank limit {limit} of the chosen class {attention}: "
            f"{listed} left out, ranks {[int(r) for r in kept]} trained (no rank above the "
            "limit can be trained; r* is at most the limit)")


def select_rank(ranks, heldout_risk, heldout_variance, tol, noise_floor=None):
    """Estimate ``r*``: the smallest rank whose held-out excess risk reaches the floor.

    Parameters
    ----------
    ranks : array-like of shape (R,)
        The rank grid, ascending.
    heldout_risk : array-like of shape (R,)
        Held-out mean squared error of each rank.
    heldout_variance : float
        Mean per-entry variance of the held-out targets (the scale of ``tol``).
    tol : float
        A rank reaches the floor when its excess risk is at most
        ``tol * heldout_variance``.
    noise_floor : float or None
        Known floor; ``None`` takes the smallest held-out risk of the grid.

    Returns
    -------
    selection : dict
        ``index`` (of the selected rank, or of the lowest risk if no rank
        reaches), ``floor``, ``excess`` (array), ``threshold``, ``reached``
        (boolean array) and ``any_reached``.

    Examples
    --------
    >>> selection = select_rank([1, 2, 4], [0.5, 0.011, 0.010], 1.0, 0.02)
    >>> selection["index"], selection["floor"]
    (1, 0.01)
    """
    risk = np.asarray(heldout_risk, dtype=float)
    floor = float(risk.min()) if noise_floor is None else float(noise_floor)
    excess = risk - floor
    threshold = float(tol) * float(heldout_variance)
    reached = excess <= threshold
    index = int(np.argmax(reached)) if reached.any() else int(np.argmin(risk))
    return dict(index=index, floor=floor, excess=excess, threshold=threshold,
                reached=reached, any_reached=bool(reached.any()))


AUTO_REFINE_WIDTH = 3
"""Ranks trained per refinement round of ``rank_grid="auto"`` (all of a smaller bracket)."""


def coarse_rank_grid(limit):
    """The coarse grid of ``rank_grid="auto"``: the powers of two below ``limit``, and ``limit``.

    Parameters
    ----------
    limit : int
        The largest rank of the student.

    Returns
    -------
    ranks : list of int

    Examples
    --------
    >>> coarse_rank_grid(64), coarse_rank_grid(12)
    ([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 12])
    """
    ranks, r = [], 1
    while r < limit:
        ranks.append(r)
        r *= 2
    return ranks + [int(limit)]


def refinement_ranks(lower, upper, width=AUTO_REFINE_WIDTH):
    """The ranks of the next refinement round inside the bracket ``(lower, upper)``.

    Every rank strictly between the two when there are at most ``width`` of
    them, else ``width`` ranks spaced evenly across the bracket (bisection with
    ``width + 1`` parts per round, all trained in one batch).

    Parameters
    ----------
    lower : int
        Largest trained rank below the selected one (0 when there is none).
    upper : int
        The selected (smallest reaching) rank.
    width : int, default=3

    Returns
    -------
    ranks : list of int
        Empty when the bracket holds no untrained rank.

    Examples
    --------
    >>> refinement_ranks(4, 8), refinement_ranks(32, 64), refinement_ranks(1, 2)
    ([5, 6, 7], [40, 48, 56], [])
    """
    inside = list(range(lower + 1, upper))
    if len(inside) <= width:
        return inside
    gap = upper - lower
    return sorted({lower + round(gap * j / (width + 1)) for j in range(1, width + 1)})


def adaptive_rank_search(coarse, evaluate, heldout_variance, tol, noise_floor=None,
                         width=AUTO_REFINE_WIDTH):
    """The search of ``rank_grid="auto"``: a coarse grid, then batched refinement of the bracket.

    ``evaluate(ranks)`` trains one batch of ranks and returns their held-out
    risks. After each round the estimator's own rule (:func:`select_rank`) is
    applied to every rank trained so far; the next round trains
    :func:`refinement_ranks` between the selected rank and the largest trained
    rank below it. The search ends when that bracket holds no untrained rank,
    or when no rank reaches the floor. It relies on the held-out excess risk
    falling with rank (a larger rank can represent every smaller one's
    solution), so that "reaches the floor" is monotone in the rank.

    Parameters
    ----------
    coarse : list of int
        The first round (``coarse_rank_grid``).
    evaluate : callable
        ``evaluate(ranks) -> held-out risks``, one per rank.
    heldout_variance, tol, noise_floor
        As :func:`select_rank`.
    width : int, default=3
        Ranks per refinement round.

    Returns
    -------
    rounds : list of list of int
        The ranks of each round, in order.

    Examples
    --------
    >>> risk = lambda ranks: [1.0 if r < 11 else 0.0 for r in ranks]  # r* = 11
    >>> adaptive_rank_search([1, 2, 4, 8, 16, 32, 64], risk, 1.0, 0.02)
    [[1, 2, 4, 8, 16, 32, 64], [10, 12, 14], [11]]
    """
    risks, rounds = {}, []
    todo = list(coarse)
    while todo:
        rounds.append(list(todo))
        risks.update(zip(todo, evaluate(todo)))
        trained = sorted(risks)
        selection = select_rank(trained, [risks[r] for r in trained], heldout_variance,
                                tol, noise_floor=noise_floor)
        if not selection["any_reached"]:
            break
        index = selection["index"]
        lower = trained[index - 1] if index > 0 else 0
        todo = refinement_ranks(lower, trained[index], width)
    return rounds
