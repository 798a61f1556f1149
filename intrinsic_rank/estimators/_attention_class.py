"""The attention class of ``attention="auto"``: full-rank students of each class, compared
on held-out data, and the evidence checks of a fitted sweep (how much of ``Y`` it explains).

``r*_attn`` is defined inside one attention class. For data whose class is unknown,
:func:`choose_attention` compares the held-out risks of full-rank students of the
classes in :data:`AUTO_ATTENTION` and keeps the simplest one within the selection
tolerance of the best; the rank is then estimated inside it.
"""

import numpy as np

__all__ = ["AUTO_ATTENTION", "MIN_HELDOUT_R2", "choose_attention", "class_risk_text"]

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

MIN_HELDOUT_R2 = 0.1
"""Below this held-out R² of the selected student, the estimate carries a warning."""


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
