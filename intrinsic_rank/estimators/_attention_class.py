"""The attention class of ``attention="auto"``: full-rank students of each class, compared
on held-out data, and the grid kept inside the class chosen.

``r*_attn`` is defined inside one attention class. For data whose class is unknown,
:func:`choose_attention` compares the held-out risks of full-rank students of the
classes in :data:`AUTO_ATTENTION` and keeps the simplest one within the selection
tolerance of the best; the rank is then estimated inside it.
"""

import numpy as np

from ._errors import TrainingDivergedError
from ._selection import grid_cut_text

__all__ = ["AUTO_ATTENTION", "choose_attention", "class_risk_text", "compare_classes",
           "grid_in_class"]

AUTO_ATTENTION = ("fixed", "linear", "softmax")
"""The classes ``attention="auto"`` compares, simplest first (the ties' order).

Rungs B0-B2 of the interpolation ladder: each is one token mixer whose rank is the
rank of one matrix (the ``L x L`` operator of ``"fixed"``, the ``d x d`` query-key
kernel of ``"linear"`` and ``"softmax"``), defined for any real ``(X, Y)``. Not
compared: ``"block"`` (its residual path and feed-forward layer explain part of ``Y``
without the attention, so a lower risk does not make its attention rank the task's,
and it trains several times slower), ``"kernel"`` (a Min-IP head whose rank is a
feature rank up to ``2^d``, made for binary tokens) and ``"dense"`` (softmax
attention at a fixed temperature: the ``"softmax"`` class with one scale fixed).
"""

def choose_attention(risks, heldout_variance, tol):
    """The simplest class whose full-rank held-out risk is within ``tol * variance`` of the best.

    The rule of :func:`~intrinsic_rank.estimators._selection.select_rank` applied to
    classes: ``r*`` is the smallest rank reaching the floor, the class the first of
    :data:`AUTO_ATTENTION` (simplest first) reaching the lowest risk of all classes.

    Parameters
    ----------
    risks : dict
        ``{class: held-out risk}`` of a full-rank student of each class; a class whose
        training diverged has ``inf``.
    heldout_variance : float
        Mean per-entry variance of the held-out targets (the scale of ``tol``).
    tol : float
        The estimator's ``tol``.

    Returns
    -------
    attention : str

    Raises
    ------
    ValueError
        When no class has a finite risk.

    Examples
    --------
    >>> choose_attention({"fixed": 0.6, "linear": 0.0025, "softmax": 0.46}, 1.0, 0.02)
    'linear'
    >>> choose_attention({"fixed": 0.5, "linear": 0.105, "softmax": 0.1}, 1.0, 0.02)
    'linear'
    """
    finite = {name: float(risk) for name, risk in risks.items() if np.isfinite(risk)}
    if not finite:
        raise ValueError(
            f"attention='auto': the full-rank students of every class {sorted(risks)} "
            "diverged; lower lr or init_scale, or give an explicit attention"
        )
    best = min(finite.values())
    threshold = best + float(tol) * float(heldout_variance)
    order = [name for name in AUTO_ATTENTION if name in finite]
    order += [name for name in finite if name not in order]
    return next(name for name in order if finite[name] <= threshold)


def class_risk_text(risks):
    """``"fixed 0.6028, linear 0.002477, softmax 0.4629"``: the classes' held-out risks.

    Parameters
    ----------
    risks : dict
        ``{class: held-out risk}``.

    Returns
    -------
    text : str

    Examples
    --------
    >>> class_risk_text({"fixed": 0.60276, "linear": 0.0024769})
    'fixed 0.6028, linear 0.002477'
    """
    return ", ".join(f"{name} {float(risk):.4g}" for name, risk in risks.items())


def compare_classes(heldout_risk_of):
    """``{class: held-out risk}`` of a full-rank student of each class of :data:`AUTO_ATTENTION`.

    Parameters
    ----------
    heldout_risk_of : callable
        ``heldout_risk_of(attention)`` trains the full-rank student of one class (with
        the sweep's seed, split, budget and stopping rule) and returns its held-out risk.
        A class whose training diverges (:class:`~._errors.TrainingDivergedError`), or
        whose risk is not finite, gets ``inf``.

    Returns
    -------
    risks : dict

    Examples
    --------
    >>> compare_classes({"fixed": 0.6, "linear": 0.01, "softmax": float("nan")}.get)
    {'fixed': 0.6, 'linear': 0.01, 'softmax': inf}
    """
    risks = {}
    for name in AUTO_ATTENTION:
        try:
            value = float(heldout_risk_of(name))
        except TrainingDivergedError:
            value = float("inf")
        risks[name] = value if np.isfinite(value) else float("inf")
    return risks


def grid_in_class(rank_grid, limit, attention):
    """The grid inside the chosen class: ``rank_grid`` without the ranks above its limit.

    Parameters
    ----------
    rank_grid : list of int
    limit : int
        The chosen class's rank limit for the data.
    attention : str
        The chosen class.

    Returns
    -------
    ranks : list of int
        The ranks kept (``[limit]`` when none is).
    cut : str or None
        What was left out (:func:`~._selection.grid_cut_text`).

    Examples
    --------
    >>> grid_in_class([1, 2, 8], 4, "linear")[0]
    [1, 2]
    """
    kept = [r for r in rank_grid if r <= limit] or [limit]
    return kept, grid_cut_text(rank_grid, kept, limit, attention)
