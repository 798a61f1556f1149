"""Curve fits of the reachability experiments: n50, slope, copy cliff and tail decay.

numpy/scipy only, so the fits can be applied to saved records without torch.
"""

import numpy as np
from scipy.optimize import least_squares, minimize
from scipy.special import expit

__all__ = [
    "fit_logistic_midpoint",
    "fit_n50",
    "fit_cliff",
    "fit_slope",
    "fit_tail_decay",
    "fit_tail_decays",
]


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
    """``n50``: the length at which accessibility falls to 1/2.

    the reachability paper: for a fixed number ``m`` of memory vectors, fit a logistic
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
    """Locate the copy task's cliff: where exact-match accuracy collapses.

    The same decreasing logistic as :func:`fit_n50`, fitted to exact-match
    accuracy against string length: its midpoint is the cliff length, its
    scale the cliff's width. The reachability paper reports that copying fails abruptly past
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
    """Least-squares line ``n50 = slope * m + intercept``.

    the reachability paper: the reachable length grows linearly in the number ``m`` of
    memory vectors; the slope of ``n50`` against ``m`` (the reachability paper: ``R^2 >
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


def _tail_result(n50, **values):
    result = dict(rate=np.nan, rate_se=np.nan, intercept=np.nan, r2=np.nan, n50=float(n50),
                  n_points=0, n_zero=0, method=None)
    result.update(values)
    return result


def _binomial_log_link(n, k, trials):
    """MLE of ``p = exp(a - rate n)`` from ``k`` successes in ``trials``; SEs from the Hessian."""
    def nll(theta):
        a, rate = theta
        eta = np.minimum(a - rate * n, -1e-12)  # p < 1
        p = np.exp(eta)
        return -float(np.sum(k * eta + (trials - k) * np.log1p(-p)))

    y = np.log(np.clip(k / trials, 0.5 / trials, None))
    slope, icept = np.polyfit(n, y, 1)
    rate0 = max(-slope, 1e-3)
    start = np.array([min(icept, rate0 * n.min() - 1e-3), rate0])  # p < 1 at every n
    best = minimize(nll, start, method="Nelder-Mead",
                    options=dict(xatol=1e-10, fatol=1e-12, maxiter=20_000))
    a, rate = best.x
    # observed information of the binomial log-link model, analytically
    p = np.exp(np.minimum(a - rate * n, -1e-12))
    w = (trials - k) * p / (1 - p) ** 2  # -d2 loglik / d eta2
    grad = np.stack([np.ones_like(n), -n], axis=1)
    info = grad.T @ (w[:, None] * grad)
    try:
        cov = np.linalg.inv(info)
        se = float(np.sqrt(cov[1, 1])) if cov[1, 1] > 0 else np.nan
    except np.linalg.LinAlgError:
        se = np.nan
    return float(rate), se, float(a)


def fit_tail_decay(lengths, accessibility, n50=None, *, n_targets=None):
    """Exponential decay rate of accessibility past ``n50``.

    The paper: beyond the threshold ``n50`` the reachable fraction decays
    exponentially in the target length, ``accessibility ~ exp(a - rate n)``.
    The points with length ``n > n50`` are fitted on a log scale:

    * without ``n_targets``: ordinary least squares of ``ln accessibility``
      against ``n`` over the points with accessibility ``> 0`` (zeros have no
      logarithm: they are dropped and counted in ``n_zero``); ``rate_se`` is the
      OLS standard error of the slope (needs 3 points, else NaN). Dropping the
      zeros biases the rate low (measured: about 1.8 standard errors at 200
      targets per point); prefer the binomial fit when the counts are known;
    * with ``n_targets`` (targets per point): binomial maximum likelihood with
      a log link, ``k ~ Binomial(n_targets, exp(a - rate n))``, which keeps the
      zeros (a zero is evidence of a fast decay); ``rate_se`` comes from the
      observed information. It needs nonzero accessibility at 2 or more
      lengths past ``n50``: one nonzero length followed by zeros does not
      identify the rate (the likelihood grows without bound as the rate goes
      to infinity), and gives ``method=None``.

    Parameters
    ----------
    lengths : array-like of shape (n_points,)
        Target lengths ``> 0``.
    accessibility : array-like of shape (n_points,)
        Fractions in ``[0, 1]``.
    n50 : float or None, default=None
        The threshold; None fits it with :func:`fit_n50`. NaN (not bracketed)
        gives a NaN result.
    n_targets : int or None, default=None
        Targets behind each accessibility value, ``>= 1``; selects the binomial
        fit.

    Returns
    -------
    fit : dict
        ``rate`` (per token; ``> 0`` for a decay), ``rate_se``, ``intercept``
        (``a``), ``r2`` (of the log-scale line through the nonzero points; NaN
        under 3 of them), ``n50``, ``n_points`` (points past ``n50`` used),
        ``n_zero`` (points past ``n50`` with accessibility 0) and ``method``
        (``"log-ols"`` or ``"binomial"``; None when there is too little to fit:
        fewer than 2 usable points past ``n50``, or fewer than 2 of them
        nonzero).

    Examples
    --------
    >>> import numpy as np
    >>> n = np.arange(2, 31, 2)
    >>> acc = np.minimum(1.0, np.exp(1.5 - 0.25 * n))   # n50 = (1.5 + ln 2) / 0.25
    >>> fit = fit_tail_decay(n, acc, n50=8.77)
    >>> round(fit["rate"], 6), fit["method"], fit["n_points"]
    (0.25, 'log-ols', 11)
    """
    x, y = _as_curve(lengths, accessibility, "lengths", "accessibility")
    _check_lengths_positive(x, "lengths")
    if n50 is None:
        n50 = fit_n50(x, y)["n50"]
    n50 = float(n50)
    if np.isinf(n50):
        raise ValueError(f"n50 must be finite or NaN; got {n50}")
    if n_targets is not None:
        trials = int(n_targets)
        if trials != n_targets or trials < 1:
            raise ValueError(f"n_targets must be an integer >= 1 or None; got {n_targets!r}")
    if np.isnan(n50):
        return _tail_result(n50)
    past = x > n50
    xs, ys = x[past], y[past]
    zero = ys == 0
    n_zero = int(np.count_nonzero(zero))
    nz_x, nz_y = xs[~zero], ys[~zero]
    r2 = np.nan
    if nz_x.size >= 3 and np.unique(nz_x).size >= 2:
        line = np.polyfit(nz_x, np.log(nz_y), 1)
        resid = np.log(nz_y) - np.polyval(line, nz_x)
        total = np.sum((np.log(nz_y) - np.log(nz_y).mean()) ** 2)
        r2 = float(1 - np.sum(resid**2) / total) if total > 0 else 1.0
    if n_targets is None:
        if nz_x.size < 2 or np.unique(nz_x).size < 2:
            return _tail_result(n50, n_points=int(nz_x.size), n_zero=n_zero)
        ln_y = np.log(nz_y)
        dm = nz_x - nz_x.mean()
        sxx = float(np.dot(dm, dm))
        slope = float(np.dot(dm, ln_y - ln_y.mean()) / sxx)
        intercept = float(ln_y.mean() - slope * nz_x.mean())
        se = np.nan
        if nz_x.size >= 3:
            resid = ln_y - (intercept + slope * nz_x)
            se = float(np.sqrt(np.sum(resid**2) / (nz_x.size - 2) / sxx))
        return _tail_result(n50, rate=-slope, rate_se=se, intercept=intercept, r2=r2,
                            n_points=int(nz_x.size), n_zero=n_zero, method="log-ols")
    if xs.size < 2 or np.unique(xs).size < 2 or np.unique(nz_x).size < 2:
        # one nonzero length and zeros after it do not identify the rate: the
        # likelihood keeps growing as the rate goes to infinity
        return _tail_result(n50, n_points=int(xs.size), n_zero=n_zero)
    k = np.round(ys * trials)
    rate, se, intercept = _binomial_log_link(xs, k, trials)
    return _tail_result(n50, rate=rate, rate_se=se, intercept=intercept, r2=r2,
                        n_points=int(xs.size), n_zero=n_zero, method="binomial")


def fit_tail_decays(records, n50=None, *, n_targets=None):
    """:func:`fit_tail_decay` for each ``m`` of accessibility records.

    Parameters
    ----------
    records : list of dict
        Each with ``n_memory``, ``length`` and ``accessibility`` (the
        ``records`` of :func:`~intrinsic_rank.experiments.accessibility_curves`).
    n50 : None, mapping or list of dict, default=None
        ``{m: n50}``, or records with ``n_memory`` and ``n50`` (that function's
        ``n50``); None fits each ``m``'s threshold.
    n_targets : int or None, default=None
        See :func:`fit_tail_decay`.

    Returns
    -------
    fits : list of dict
        One per ``m`` in increasing order: ``n_memory`` and the keys of
        :func:`fit_tail_decay`. An ``m`` with fewer than 2 lengths gets NaN.

    Examples
    --------
    >>> import numpy as np
    >>> recs = [dict(n_memory=m, length=n, accessibility=min(1.0, np.exp(0.4 * (4 * m - n))))
    ...         for m in (1, 2) for n in range(2, 25, 2)]
    >>> [round(f["rate"], 6) for f in fit_tail_decays(recs)]
    [0.4, 0.4]
    """
    by_m = {}
    for rec in records:
        by_m.setdefault(int(rec["n_memory"]), []).append(
            (float(rec["length"]), float(rec["accessibility"])))
    if n50 is not None and not hasattr(n50, "items"):
        n50 = {int(r["n_memory"]): r["n50"] for r in n50}
    fits = []
    for m in sorted(by_m):
        rows = sorted(by_m[m])
        threshold = None if n50 is None else n50.get(m, np.nan)
        if len(rows) < 2:
            fit = _tail_result(np.nan if threshold is None else threshold)
        else:
            fit = fit_tail_decay([r[0] for r in rows], [r[1] for r in rows], threshold,
                                 n_targets=n_targets)
        fits.append(dict(n_memory=m, **fit))
    return fits
