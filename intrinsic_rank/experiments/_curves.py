"""Curve fits of the reachability experiments (seed 004): n50, slope and copy cliff.

numpy/scipy only, so the fits can be applied to saved records without torch.
"""

import numpy as np
from scipy.optimize import least_squares
from scipy.special import expit

__all__ = ["fit_logistic_midpoint", "fit_n50", "fit_cliff", "fit_slope"]


def _as_curve(x, y, x_name, y_name):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(
            f"{x_name} and {y_name} must be 1-D; got shapes {x.shape} and {y.shape}"
        )
    if x.size != y.size:
        raise ValueError(
            f"{x_name} and {y_name} must have equal lengths; got {x.size} and {y.size}"
        )
    if x.size < 2:
        raise ValueError(f"{x_name} must hold at least 2 points; got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{x_name} must be finite (no NaN or inf)")
    if not np.all(np.isfinite(y)) or np.any((y < 0) | (y > 1)):
        raise ValueError(f"{y_name} must be finite fractions in [0, 1]")
    if np.unique(x).size < 2:
        raise ValueError(f"{x_name} must hold at least 2 distinct values")
    return x, y


def _decreasing_logistic(x, midpoint, scale):
    return expit(-(x - midpoint) / scale)


def _has_downward_crossing(x, y):
    """Some point at or above 1/2 lies left of some point below 1/2."""
    high, low = y >= 0.5, y < 0.5
    return bool(high.any() and low.any() and x[high].min() < x[low].max())


def _initial_midpoint(x, y):
    """First downward crossing of 1/2 by the per-x mean curve, interpolated."""
    xs, inverse = np.unique(x, return_inverse=True)
    ys = np.bincount(inverse, weights=y) / np.bincount(inverse)
    for i in range(xs.size - 1):
        if ys[i] >= 0.5 > ys[i + 1]:
            return xs[i] + (ys[i] - 0.5) / (ys[i] - ys[i + 1]) * (xs[i + 1] - xs[i])
    # Replicates can bracket 1/2 while their means do not cross it.
    return 0.5 * (x[y >= 0.5].min() + x[y < 0.5].max())


def _fit_decreasing_logistic(x, y):
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    result = dict(
        midpoint=np.nan, scale=np.nan, r2=np.nan, bracketed=False, n_points=int(x.size)
    )
    if not _has_downward_crossing(x, y):
        # The data never fall through 1/2: any midpoint would be extrapolated.
        return result
    lo, hi = x.min(), x.max()
    span = hi - lo
    # A perfect step is fitted by scale -> 0; the floor keeps the fit finite.
    scale_bounds = (1e-6 * span, 1e3 * span)
    start = _initial_midpoint(x, y)
    best = None
    for scale0 in (1.0, span / 4.0):
        scale0 = float(np.clip(scale0, 2 * scale_bounds[0], scale_bounds[1] / 2))
        fit = least_squares(
            lambda p: _decreasing_logistic(x, p[0], p[1]) - y,
            x0=[start, scale0],
            bounds=([lo, scale_bounds[0]], [hi, scale_bounds[1]]),
        )
        if best is None or fit.cost < best.cost:
            best = fit
    midpoint, scale = (float(v) for v in best.x)
    ss_res = float(np.sum(best.fun**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))  # > 0: y takes both sides of 1/2
    result.update(midpoint=midpoint, scale=scale, r2=1.0 - ss_res / ss_tot, bracketed=True)
    return result


def fit_logistic_midpoint(x, y):
    """Fit a decreasing logistic ``y = 1 / (1 + exp((x - x50) / s))``, ``s > 0``.

    Least squares (``scipy.optimize.least_squares``) started from the
    interpolated crossing of 1/2 and ``s = 1`` (and ``s = span / 4``, keeping
    the better fit), with ``x50`` bounded to the range of ``x``. The fit is made
    only when the data bracket the midpoint, i.e. some point with ``y >= 1/2``
    lies left of some point with ``y < 1/2``; otherwise (all points on one
    side, or only rising through 1/2) no midpoint is invented: ``midpoint`` and
    ``scale`` are NaN and ``bracketed`` is False.

    Parameters
    ----------
    x : array-like of shape (n_points,)
        Abscissae (e.g. target lengths), at least 2 distinct values.
    y : array-like of shape (n_points,)
        Fractions in ``[0, 1]`` (e.g. accessibility).

    Returns
    -------
    fit : dict
        ``midpoint`` (``x50``, NaN if not bracketed), ``scale`` (``s``, in the
        units of ``x``; the 12%-88% drop spans ``4 s``), ``r2`` (coefficient of
        determination of the fit, NaN if not bracketed), ``bracketed`` (bool)
        and ``n_points``. When the data jump from 1 to 0 between two adjacent
        ``x`` with no point in between, the scale is not identified: it comes
        out small but arbitrary, and the midpoint lies between the two.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(1.0, 16.0)
    >>> fit = fit_logistic_midpoint(x, 1 / (1 + np.exp((x - 7.3) / 0.8)))
    >>> round(fit["midpoint"], 3), round(fit["scale"], 3), fit["bracketed"]
    (7.3, 0.8, True)
    >>> fit_logistic_midpoint([1, 2, 3], [1.0, 0.9, 0.6])["bracketed"]
    False
    """
    x, y = _as_curve(x, y, "x", "y")
    return _fit_decreasing_logistic(x, y)


def _check_lengths_positive(lengths, name):
    if np.any(lengths <= 0):
        raise ValueError(f"{name} must be positive")


def fit_n50(lengths, accessibility):
    """``n50``: the length at which accessibility falls to 1/2 (seed 004).

    SPEC section 4: for a fixed number ``m`` of memory vectors, fit a logistic
    curve of accessibility (fraction of targets reached) against target length
    ``n``; ``n50(m)`` is its midpoint. See :func:`fit_logistic_midpoint` for the
    fit and for what happens when 1/2 is not bracketed.

    Parameters
    ----------
    lengths : array-like of shape (n_points,)
        Target lengths ``n > 0``.
    accessibility : array-like of shape (n_points,)
        Fraction of targets of each length reached, in ``[0, 1]``.

    Returns
    -------
    fit : dict
        The keys of :func:`fit_logistic_midpoint` plus ``n50`` (equal to
        ``midpoint``, in tokens; NaN if not bracketed).

    Examples
    --------
    >>> fit = fit_n50([2, 4, 6, 8, 10], [1.0, 0.95, 0.5, 0.05, 0.0])
    >>> round(fit["n50"], 2), fit["n_points"]
    (6.0, 5)
    """
    x, y = _as_curve(lengths, accessibility, "lengths", "accessibility")
    _check_lengths_positive(x, "lengths")
    fit = _fit_decreasing_logistic(x, y)
    fit["n50"] = fit["midpoint"]
    return fit


def fit_cliff(lengths, exact_match):
    """Locate the copy task's cliff: where exact-match accuracy collapses (seed 004).

    The same decreasing logistic as :func:`fit_n50`, fitted to exact-match
    accuracy against string length: its midpoint is the cliff length, its
    scale the cliff's width. Seed 004 reports that copying fails abruptly past
    a threshold rather than gradually; ``sharpness = scale / midpoint`` is
    small for such an abrupt failure.

    Parameters
    ----------
    lengths : array-like of shape (n_points,)
        String lengths ``> 0``.
    exact_match : array-like of shape (n_points,)
        Fraction of strings copied exactly, in ``[0, 1]``.

    Returns
    -------
    fit : dict
        The keys of :func:`fit_logistic_midpoint` (``midpoint`` is the cliff
        length, ``scale`` its width, in the units of ``lengths``) plus
        ``sharpness`` (``scale / midpoint``, dimensionless; NaN if not
        bracketed), ``last_high_length`` (largest length with
        ``exact_match >= 0.95``) and ``first_low_length`` (smallest length with
        ``exact_match <= 0.05``), each NaN if there is none.

    Examples
    --------
    >>> fit = fit_cliff([10, 20, 30, 40, 50, 60], [1.0, 1.0, 0.98, 0.02, 0.0, 0.0])
    >>> round(fit["midpoint"]), fit["last_high_length"], fit["first_low_length"]
    (35, 30.0, 40.0)
    >>> fit["sharpness"] < 0.1
    True
    """
    x, y = _as_curve(lengths, exact_match, "lengths", "exact_match")
    _check_lengths_positive(x, "lengths")
    fit = _fit_decreasing_logistic(x, y)
    fit["sharpness"] = fit["scale"] / fit["midpoint"] if fit["bracketed"] else np.nan
    high, low = x[y >= 0.95], x[y <= 0.05]
    fit["last_high_length"] = float(high.max()) if high.size else np.nan
    fit["first_low_length"] = float(low.min()) if low.size else np.nan
    return fit


def fit_slope(n_memory, n50):
    """Least-squares line ``n50 = slope * m + intercept`` (seed 004).

    SPEC section 4: the reachable length grows linearly in the number ``m`` of
    memory vectors; the slope of ``n50`` against ``m`` (seed 004: ``R^2 >
    0.99``) is what :func:`intrinsic_rank.bounds.reachable_slope_bound` bounds
    from above. NaN ``n50`` values (unbracketed fits of :func:`fit_n50`) are
    dropped and counted.

    Parameters
    ----------
    n_memory : array-like of shape (n_points,)
        Numbers ``m`` of memory vectors, finite.
    n50 : array-like of shape (n_points,)
        ``n50(m)`` in tokens; NaN entries are dropped, infinities rejected.

    Returns
    -------
    fit : dict
        ``slope`` (tokens per memory vector), ``intercept`` (tokens), ``r2``
        (coefficient of determination; 1.0 for two points or a constant
        ``n50``, which the line fits exactly), ``n_points`` (points used) and
        ``n_dropped`` (NaN ``n50`` entries dropped).

    Examples
    --------
    >>> fit = fit_slope([1, 2, 4, 8], [3.7, 6.9, 13.3, float("nan")])
    >>> round(fit["slope"], 3), round(fit["intercept"], 3), fit["n_dropped"]
    (3.2, 0.5, 1)
    """
    m = np.asarray(n_memory, dtype=float)
    n = np.asarray(n50, dtype=float)
    if m.ndim != 1 or n.ndim != 1 or m.size != n.size:
        raise ValueError(
            "n_memory and n50 must be 1-D of equal lengths; "
            f"got shapes {m.shape} and {n.shape}"
        )
    if not np.all(np.isfinite(m)):
        raise ValueError("n_memory must be finite (no NaN or inf)")
    if np.any(np.isinf(n)):
        raise ValueError("n50 must be finite or NaN (NaN entries are dropped); got inf")
    keep = ~np.isnan(n)
    m, n = m[keep], n[keep]
    if m.size < 2 or np.unique(m).size < 2:
        raise ValueError(
            "n50 must have at least 2 non-NaN entries at distinct n_memory values; "
            f"got {m.size} point(s) at {np.unique(m).size} distinct n_memory value(s)"
        )
    dm, dn = m - m.mean(), n - n.mean()
    sxx, sxy, syy = np.dot(dm, dm), np.dot(dm, dn), np.dot(dn, dn)
    slope = sxy / sxx
    if m.size == 2 or syy == 0:
        r2 = 1.0  # the line passes through every point; avoid 0.9999999999999998
    else:
        r2 = float(np.clip(sxy**2 / (sxx * syy), 0.0, 1.0))
    return dict(
        slope=float(slope),
        intercept=float(n.mean() - slope * m.mean()),
        r2=r2,
        n_points=int(m.size),
        n_dropped=int(np.count_nonzero(~keep)),
    )
