"""The cone refinement of the reachability paper's reachable-sequence bounds.

Hidden states that lie in a cone of half-angle ``theta`` about some axis fill
only a fraction of the ball; the log of that fraction is added to the log cell
count of :func:`~intrinsic_rank.bounds.reachable_log_count_bound` once per
memory vector. Everything here is numpy/scipy only.
"""

import numpy as np
from scipy.special import betainc, betaln

from .._validation import check_int, check_real
from ._common import check_size, log_int
from ._reachability import reachable_log_count_bound, reachable_slope_bound

__all__ = [
    "CONE_CONVENTIONS",
    "min_pairwise_cosine",
    "cone_half_angle",
    "cone_log_fraction",
    "cone_log_count_bound",
    "cone_slope_bound",
]

CONE_CONVENTIONS = {
    "enclosing": (
        "theta = arccos(min cosine): every state lies within this angle of any one "
        "state, so the cone about it holds them all (a guaranteed enclosing cone)"
    ),
    "authors": (
        "theta = arccos(min cosine) / 2: the widest pair's angle taken as the cone's "
        "full apex angle, as the authors' bounds notebook does (tighter, but for d >= 3 "
        "not guaranteed to hold the states)"
    ),
}
"""Name -> one-line description of the ways :func:`cone_half_angle` reads a cosine."""

_CF_MAX_ITER = 100_000
_CF_TOL = 1e-15
_TINY = 1e-300


def _states(hidden_states, name="hidden_states"):
    """Pool leading axes: a finite float64 array of shape (n, d)."""
    h = np.asarray(hidden_states, dtype=np.float64)
    if h.ndim < 1 or h.shape[-1] < 1:
        raise ValueError(
            f"{name} must be at least 1-D with a last axis (the width d) of size >= 1; "
            f"got shape {h.shape}"
        )
    h = h.reshape(-1, h.shape[-1])
    if not np.all(np.isfinite(h)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return h


def min_pairwise_cosine(hidden_states, *, chunk_size=1024):
    """Smallest cosine similarity over all pairs of distinct states.

    The cone refinement of the reachability paper needs the widest angle between two hidden
    states: ``arccos`` of this number (:func:`cone_half_angle`).

    Parameters
    ----------
    hidden_states : array-like of shape (..., d)
        Final hidden states, one per row; all leading axes are pooled (as in
        :func:`~intrinsic_rank.bounds.hidden_state_geometry`). At least two
        states, all finite and none zero (the direction of a zero vector is
        undefined).
    chunk_size : int, default=1024
        The pairs are compared in blocks of ``chunk_size x chunk_size`` cosines,
        so memory stays at ``O(chunk_size**2 + n d)`` whatever the number ``n``
        of states; the time is ``O(n**2 d)``.

    Returns
    -------
    min_cosine : float
        In ``[-1, 1]``. Identical directions give 1.

    Raises
    ------
    ValueError
        Fewer than two states, a non-finite entry or a zero-norm row (its index
        is named).

    Examples
    --------
    >>> import numpy as np
    >>> min_pairwise_cosine(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]))
    0.0
    >>> round(min_pairwise_cosine(np.array([[1.0, 0.0], [-1.0, 1.0]])), 6)
    -0.707107
    """
    b = check_int(chunk_size, "chunk_size", 1)
    h = _states(hidden_states)
    n = h.shape[0]
    if n < 2:
        raise ValueError(f"hidden_states must hold at least two states; got {n}")
    # Scale each row by its largest entry first, so the norm cannot overflow.
    scale = np.max(np.abs(h), axis=1)
    zero = np.flatnonzero(scale == 0)
    if zero.size:
        raise ValueError(
            f"hidden_states has {zero.size} zero-norm row(s) (first at index "
            f"{int(zero[0])}); the cosine of a zero vector is undefined"
        )
    u = h / scale[:, None]
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    best = np.inf
    for i0 in range(0, n, b):
        rows = u[i0:i0 + b]
        for j0 in range(i0, n, b):
            block = rows @ u[j0:j0 + b].T
            if j0 == i0:  # only pairs i < j inside a diagonal block
                block[np.tril_indices(block.shape[0], 0, block.shape[1])] = np.inf
            if block.size:
                best = min(best, float(block.min()))
    return float(np.clip(best, -1.0, 1.0))


def cone_half_angle(min_cosine, *, convention="enclosing"):
    """Half-angle ``theta`` of the cone that holds the states, from their smallest cosine.

    Parameters
    ----------
    min_cosine : float
        In ``[-1, 1]``, usually :func:`min_pairwise_cosine`.
    convention : {"enclosing", "authors"}, default="enclosing"
        ``"enclosing"`` (a guaranteed bound):
        ``theta = arccos(min_cosine)``, since every state lies within that angle
        of any one of them. ``"authors"``: ``arccos(min_cosine) / 2``, the
        authors' bounds notebook, which takes the widest pair's angle as the
        cone's full apex angle; tighter, but for ``d >= 3`` a set of states of
        angular diameter ``2 theta`` need not fit in a cone of half-angle
        ``theta``. See :data:`CONE_CONVENTIONS`.

    Returns
    -------
    theta : float
        In ``[0, pi]`` (``[0, pi/2]`` for ``"authors"``), in radians.

    Examples
    --------
    >>> import math
    >>> cone_half_angle(0.0) == math.pi / 2
    True
    >>> cone_half_angle(-1.0, convention="authors") == math.pi / 2
    True
    """
    c = check_real(min_cosine, "min_cosine", -1.0, 1.0)
    if convention not in CONE_CONVENTIONS:
        raise ValueError(
            f"convention must be one of {sorted(CONE_CONVENTIONS)}; got {convention!r}"
        )
    theta = float(np.arccos(c))
    return theta / 2.0 if convention == "authors" else theta


def _beta_continued_fraction(x, a, b):
    """The continued fraction of ``I_x(a, b)`` (modified Lentz), for ``x < (a+1)/(a+b+2)``.

    ``I_x(a, b) = x**a (1-x)**b / (a B(a, b)) * cf``; ``cf`` is of order one, so
    the whole is evaluated in logs without underflow.
    """
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _CF_MAX_ITER + 1):
        m2 = 2 * m
        for coeff in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                      -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + coeff * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + coeff / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < _CF_TOL:
            return h
    raise RuntimeError(  # pragma: no cover - the fraction converges for these x
        f"incomplete beta continued fraction did not converge (x={x}, a={a}, b={b})"
    )


def _log_betainc(a, b, x, log_x=None):
    """``ln I_x(a, b)`` (regularised incomplete beta), finite where ``I_x`` underflows.

    ``log_x``, when given, is ``ln x`` computed without forming ``x``: for ``x``
    below float64's smallest normal number (where ``x`` itself has lost digits
    or is 0) the leading term ``x**a / (a B(a, b))`` is then evaluated in logs;
    the continued fraction and ``(1 - x)**b`` are 1 to double precision there.
    """
    if log_x is not None and x < np.finfo(np.float64).tiny:
        return float(a * log_x - np.log(a) - betaln(a, b))
    if x <= 0.0:
        return -np.inf
    if x >= 1.0:
        return 0.0
    if x < (a + 1.0) / (a + b + 2.0):
        log_front = a * np.log(x) + b * np.log1p(-x) - np.log(a) - betaln(a, b)
        return float(log_front + np.log(_beta_continued_fraction(x, a, b)))
    # Above the bulk I_x(a, b) is of order one: use its complement directly.
    return float(np.log1p(-betainc(b, a, 1.0 - x)))


def cone_log_fraction(theta, d):
    """Log of the fraction of the ``d``-ball inside a cone of half-angle ``theta``.

    The cone (a spherical sector: the cone from the centre cut by the sphere)
    holds the same fraction of the ball's volume as its cap holds of the
    sphere's surface:

    * ``theta <= pi/2``: ``frac = I_{sin^2 theta}((d-1)/2, 1/2) / 2``;
    * ``theta > pi/2``: ``frac = 1 - I_{sin^2 theta}((d-1)/2, 1/2) / 2``,

    with ``I`` the regularised incomplete beta function. Below the bulk of the
    beta distribution ``ln I`` is evaluated from its continued fraction with the
    prefactor ``x**a (1-x)**b / (a B(a, b))`` in logs, so the result stays finite
    where the fraction itself underflows (``d = 4096, theta = 0.1`` gives about
    ``-9.4e3``).

    Parameters
    ----------
    theta : float
        Half-angle in ``(0, pi]`` (radians), e.g. :func:`cone_half_angle`.
        ``theta = 0`` (all states parallel) is a ray with no volume and is
        rejected.
    d : int
        Dimension ``d >= 1``. For ``d = 1`` the cone is a half-line:
        ``frac = 1/2`` for ``theta < pi`` and 1 at ``theta = pi``.

    Returns
    -------
    log_fraction : float
        ``ln frac`` in ``(-inf, 0]``, in nats. ``ln(1/2)`` at ``theta = pi/2``
        (half the ball), 0 at ``theta = pi`` (the whole ball).

    Notes
    -----
    The authors' bounds notebook (``log_frac_cone`` in ``th_bounds_estimation.ipynb``)
    evaluates the sector as cone plus cap at half-angle ``arccos(c)/2`` and
    equals ``ln 4 + cone_log_fraction(arccos(c)/2, d)``; the ``ln 4`` (a
    fraction above 1 for ``c`` near -1) is not reproduced here. Use
    ``cone_half_angle(c, convention="authors")`` for their half-angle.

    Examples
    --------
    >>> import math
    >>> cone_log_fraction(math.pi / 2, 10) == math.log(0.5)
    True
    >>> round(math.exp(cone_log_fraction(math.pi / 3, 3)), 6)  # (1 - cos theta) / 2
    0.25
    >>> round(cone_log_fraction(0.1, 4096))
    -9441
    """
    dim = check_size(d, "d", 1)
    t = check_real(theta, "theta", 0.0, np.pi, low_open=True)
    if t == np.pi:
        return 0.0
    if dim == 1:
        return float(np.log(0.5))
    sin_t = float(np.sin(t))
    # 2 ln sin(theta) stays finite where sin(theta)**2 underflows (theta < 1.5e-154).
    log_i = _log_betainc((dim - 1) / 2.0, 0.5, sin_t**2, log_x=2.0 * np.log(sin_t))
    if t <= np.pi / 2:
        return float(np.log(0.5) + log_i)
    return float(np.log1p(-0.5 * np.exp(log_i)))


def cone_log_count_bound(width, n_memory, radius, precision, theta):
    """Log reachable-sequence count with the cone refinement (the reachability paper).

    ``m * (d ln(1 + 2r/epsilon) + ln frac_cone(theta, d))``: the ball count of
    :func:`~intrinsic_rank.bounds.reachable_log_count_bound` with each memory
    vector's ``(1 + 2r/epsilon)**d`` cells cut to the fraction of the ball that
    the cone holds (:func:`cone_log_fraction`). The cone term multiplies with
    ``m`` as the ball term does, as in the authors' notebook
    (``th_slope_with_cone`` adds it once to the per-vector count
    ``d ln(1 + 2r/epsilon)``, and the count over ``m`` vectors is that per-vector
    count to the power ``m``).

    Parameters
    ----------
    width : int
        Model width ``d >= 1``.
    n_memory : int
        Number ``m >= 1`` of memory vectors.
    radius : float
        ``r >= 0``, in hidden-state units.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (:func:`~intrinsic_rank.bounds.precision_for` lists the conventions).
    theta : float
        Cone half-angle in ``(0, pi]``, e.g. :func:`cone_half_angle`.

    Returns
    -------
    log_count : float
        In nats; clipped below at 0 (one cell, one sequence), which only
        matters when the cone is so thin that its volume is under one cell.

    Notes
    -----
    Like the authors' code, the ball's volume fraction is applied to the cube
    count ``(1 + 2r/epsilon)**d``; this is the paper's refinement, a volume
    heuristic rather than an exact cell count.

    Examples
    --------
    A half-space cone (``theta = pi/2``) removes ``ln 2`` nats per memory vector:

    >>> import math
    >>> ball = reachable_log_count_bound(64, 4, radius=4.0, precision=2**-10)
    >>> cone = cone_log_count_bound(64, 4, 4.0, 2**-10, theta=math.pi / 2)
    >>> round(ball - cone, 6) == round(4 * math.log(2), 6)
    True
    """
    ball = reachable_log_count_bound(width, n_memory, radius, precision)
    m = check_int(n_memory, "n_memory", 1)
    return float(max(ball + m * cone_log_fraction(theta, width), 0.0))


def cone_slope_bound(width, vocab_size, radius, precision, theta):
    """Slope bound ``C <= (d ln(1 + 2r/epsilon) + ln frac_cone(theta, d)) / ln|V|``.

    The cone refinement of
    :func:`~intrinsic_rank.bounds.reachable_slope_bound`, in the same unit
    (tokens of reachable length per memory vector): the per-vector count of
    :func:`cone_log_count_bound` divided by ``ln|V|``.

    Parameters
    ----------
    width : int
        Model width ``d >= 1``.
    vocab_size : int
        Vocabulary size ``|V| >= 2``.
    radius : float
        ``r >= 0``, in hidden-state units.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units.
    theta : float
        Cone half-angle in ``(0, pi]``.

    Returns
    -------
    slope : float
        ``C >= 0``, never above the ball's slope bound; equal to it at
        ``theta = pi``.

    Examples
    --------
    >>> import math
    >>> ball = reachable_slope_bound(64, 64, radius=4.0, precision=2**-10)
    >>> cone_slope_bound(64, 64, 4.0, 2**-10, theta=math.pi) == ball
    True
    >>> round(cone_slope_bound(64, 64, 4.0, 2**-10, theta=0.5), 2)
    126.84
    """
    ball = reachable_slope_bound(width, vocab_size, radius, precision)
    log_v = float(log_int(check_size(vocab_size, "vocab_size", 2)))
    return float(max(ball + cone_log_fraction(theta, width) / log_v, 0.0))
