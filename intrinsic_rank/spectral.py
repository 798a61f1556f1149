"""Rank measures computed from singular values.

One module, though it is longer than most: every measure shares the one
spectrum reader and its float-limit scaling, and users import them together
as ``intrinsic_rank.spectral``.

Every public function accepts ``a`` in one of three forms:

* a 1-D array of singular values (nonnegative, any order);
* a 2-D matrix, whose singular values are computed with
  :func:`numpy.linalg.svd` (``compute_uv=False``);
* a stack of matrices with shape ``(..., m, n)`` (``ndim >= 3``); each
  measure is computed per matrix and returned as an array of shape ``(...)``.

A 1-D input is always read as singular values, never as a matrix.  For a
single matrix or spectrum the measures are Python scalars (``float``, or
``int`` for the two counting measures); for stacks they are NumPy arrays.

An all-zero spectrum (the zero matrix) has rank 0, so every measure returns
``0`` for it rather than the ``nan`` that ``0 / 0`` would give.

The measures hold at the float limits: a matrix (or spectrum) whose largest
entry lies outside ``[2**-400, 2**400]`` (``[2**-50, 2**50]`` in single
precision) is divided by a power of two before the SVD, exactly, so
``numerical_rank(np.eye(3) * 1e308)`` is 3 and subnormal inputs such as
``np.eye(3) * 1e-310`` lose no digits in the SVD. Inside that range nothing is
rescaled, so the numbers at ordinary scales are those of a plain SVD.
:func:`singular_values` scales the values back and raises a ``ValueError``
where they exceed float64's range.

Choosing a measure
------------------
:func:`numerical_rank`
    The number of singular values above a threshold.  It is the right notion
    for exactly (or nearly exactly) low-rank data, but it is noise-sensitive:
    any additive noise makes a matrix full rank, so the threshold has to be
    chosen from the noise level (``tol`` / ``rtol``).  The default threshold
    only absorbs floating-point roundoff.
:func:`energy_effective_rank`
    ``exp`` of the Shannon entropy of the normalised energies
    ``s_i**2 / sum(s**2)``.  Continuous, threshold-free and robust to a small
    noise floor; equals ``r`` for ``r`` equal nonzero singular values.  It is
    the estimator named in the "Entropic Bound" paper as robust to softmax
    noise.
:func:`participation_ratio`
    ``(sum s**2)**2 / sum s**4``, the inverse Simpson index of the energies
    (``exp`` of their Renyi-2 entropy).  Also ``r`` for ``r`` equal values;
    it weights dominant directions more heavily than the energy effective
    rank and never exceeds it.
:func:`entropy_effective_rank`
    The effective rank of Roy & Vetterli (2007): ``exp`` of the entropy of
    ``s_i / sum(s)``.  Uses singular values rather than energies, so small
    singular values count for more than in the energy measures.
:func:`stable_rank`
    ``sum s**2 / s_1**2`` (Rudelson & Vershynin, 2007).  Stable under small
    perturbations and cheap (``||A||_F**2 / ||A||_2**2``); it is a lower bound
    on the rank and on the other effective ranks.
:func:`energy_threshold_rank`
    The smallest ``k`` whose top-``k`` singular values hold a fraction ``q``
    of the energy (the PCA "explained variance" rule).  An integer, easy to
    interpret, but it depends on the choice of ``q``.

For any spectrum the measures are ordered as ::

    stable_rank <= participation_ratio <= energy_effective_rank
                <= number of nonzero singular values

because they are ``1 / p_max``, ``1 / sum p_i**2`` and ``exp(H(p))`` of the
same distribution ``p_i = s_i**2 / sum(s**2)``, i.e. ``exp`` of the Renyi
entropies of orders infinity, 2 and 1, which decrease with the order.

Use :func:`rank_profile` to get all six at once from a single SVD.
"""

import numpy as np

from ._validation import check_real

__all__ = [
    "singular_values",
    "numerical_rank",
    "energy_effective_rank",
    "participation_ratio",
    "entropy_effective_rank",
    "stable_rank",
    "energy_threshold_rank",
    "rank_profile",
]

# LAPACK (and hence numpy.linalg.svd) only handles these dtypes.
_SVD_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


class _Spectrum:
    """Validated singular values, kept at a safe scale, plus the rank threshold's needs.

    Attributes
    ----------
    s : ndarray, shape (..., k)
        Singular values sorted descending, float64, divided by ``2**exponent``
        (see :func:`_safe_exponents`); every rank measure is scale-free, so
        they are computed from ``s`` directly.
    exponent : ndarray of int, shape (...)
        The true singular values are ``ldexp(s, exponent)``; 0 unless the
        input's largest entry lies outside the safe range.
    size : int
        ``max(m, n)`` for matrices, ``k`` for 1-D input.
    eps : float
        Machine epsilon of the dtype the singular values were computed in.
    """

    def __init__(self, s, exponent, size, eps):
        self.s = s
        self.exponent = np.asarray(exponent)
        self.size = size
        self.eps = eps

    def values(self):
        """The singular values at their true scale; ValueError if they overflow."""
        if not np.any(self.exponent):
            return self.s
        with np.errstate(over="ignore", under="ignore"):
            s = np.ldexp(self.s, self.exponent[..., None])
        if not np.all(np.isfinite(s)):
            with np.errstate(divide="ignore"):  # log2(0) of an all-zero matrix in a stack
                top = float(np.max(np.log2(self.s[..., 0]) + self.exponent))
            raise ValueError(
                f"the singular values of a overflow float64 (the largest is about "
                f"2**{top:.1f}); rescale a, or use a rank measure, which is scale-free"
            )
        return s


# Inputs whose largest absolute entry lies outside [2**-limit, 2**limit] are
# divided by a power of two before the SVD (exactly, so nothing is lost), which
# keeps the SVD, the squares and the default threshold from overflowing or
# losing digits in the subnormal range. Inside the range nothing is rescaled,
# so the numbers at ordinary scales are those of a plain SVD.
_SAFE_LIMIT = {np.float32: 50, np.complex64: 50, np.float64: 400, np.complex128: 400}


def _safe_exponents(amax, limit):
    """``e`` with ``amax / 2**e`` in ``[0.5, 1)`` where ``amax`` is outside the safe range.

    0 inside ``[2**-limit, 2**limit]`` and for ``amax = 0``.
    """
    _, e = np.frexp(amax)
    outside = (amax > 0) & ((amax < 2.0**-limit) | (amax > 2.0**limit))
    return np.where(outside, e, 0)


def _as_numeric_array(a):
    arr = np.asarray(a)
    if arr.dtype == np.bool_:
        return arr.astype(np.float64)
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"input must be a numeric array; got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise ValueError(
            "input must be 1-D singular values or (..., m, n) matrices; got a scalar"
        )
    if arr.size == 0:
        raise ValueError(f"input is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        n_nan = int(np.count_nonzero(np.isnan(arr)))
        n_inf = int(np.count_nonzero(np.isinf(arr)))
        raise ValueError(
            f"input must be finite; got {n_nan} NaN and {n_inf} inf entries"
        )
    return arr


def _spectrum(a):
    arr = _as_numeric_array(a)
    if arr.ndim == 1:
        if np.iscomplexobj(arr):
            raise ValueError(f"singular values must be real; got dtype {arr.dtype}")
        s = arr.astype(np.float64)
        if s.min() < 0:
            raise ValueError(f"singular values must be nonnegative; got min {s.min()}")
        exponent = _safe_exponents(s.max(), _SAFE_LIMIT[np.float64])
        if exponent:
            s = np.ldexp(s, -exponent)
        return _Spectrum(np.sort(s)[::-1], exponent, s.shape[0], np.finfo(np.float64).eps)

    if arr.dtype.type not in _SVD_DTYPES:
        # Integers and exotic floats: fall back to double precision, as
        # numpy.linalg.matrix_rank effectively does.
        arr = arr.astype(np.complex128 if np.iscomplexobj(arr) else np.float64)
    magnitude = np.abs(arr.real)
    if np.iscomplexobj(arr):  # |z| itself may overflow; max(|re|, |im|) cannot
        magnitude = np.maximum(magnitude, np.abs(arr.imag))
    exponent = _safe_exponents(magnitude.max(axis=(-2, -1)), _SAFE_LIMIT[arr.dtype.type])
    if np.any(exponent):
        # Exact: a power of two only moves the exponents (ldexp has no complex loop).
        shift = -exponent[..., None, None]
        scaled = np.ldexp(arr.real, shift)
        if np.iscomplexobj(arr):
            scaled = scaled + 1j * np.ldexp(arr.imag, shift)
        arr = scaled.astype(arr.dtype, copy=False)
    s = np.linalg.svd(arr, compute_uv=False)  # already sorted descending
    # eps of the computation dtype (float32 for float32/complex64 input),
    # matching numpy.linalg.matrix_rank.
    eps = np.finfo(s.dtype).eps
    return _Spectrum(s.astype(np.float64), exponent, max(arr.shape[-2:]), eps)


def _to_python(x):
    """Unwrap 0-d results to Python scalars; keep arrays for stacks."""
    x = np.asarray(x)
    if x.ndim:
        return x
    return int(x) if np.issubdtype(x.dtype, np.integer) else float(x)


def _scaled(s):
    """Return ``s / s_max`` (zeros for an all-zero spectrum) and the zero mask.

    Scaling by the largest value keeps ``s**4`` from overflowing and makes
    equal singular values exactly 1, so ``r`` equal values give exactly ``r``.
    """
    smax = s[..., :1]
    is_zero = smax[..., 0] == 0
    x = np.divide(s, smax, out=np.zeros_like(s), where=smax > 0)
    return x, is_zero


def _exp_entropy(w):
    """``exp(H(w / sum w))`` for nonnegative weights ``w`` with max 1.

    Uses ``exp(H) = T * exp(-sum(w log w) / T)`` with ``T = sum w``: since
    ``w <= 1`` the exponent is >= 0 and equal weights (all 1) give exactly
    ``T`` with no roundoff from ``log``/``exp``.
    """
    total = w.sum(axis=-1)
    wlogw = w * np.log(w, out=np.zeros_like(w), where=w > 0)  # 0 log 0 = 0
    safe_total = np.where(total > 0, total, 1.0)
    return np.where(total > 0, total * np.exp(-wlogw.sum(axis=-1) / safe_total), 0.0)


def _numerical_rank(spec, tol=None, rtol=None):
    if tol is not None and rtol is not None:
        raise ValueError("give at most one of tol and rtol, not both")
    smax = spec.s[..., 0]  # at the safe scale, like spec.s
    if tol is not None:
        threshold = _nonnegative("tol", tol)
        if np.any(spec.exponent):  # an absolute tol goes to the scale of spec.s
            with np.errstate(over="ignore", under="ignore"):
                threshold = np.ldexp(threshold, -spec.exponent)
    elif rtol is not None:
        threshold = _nonnegative("rtol", rtol) * smax
    else:
        threshold = smax * spec.size * spec.eps
    threshold = np.broadcast_to(threshold, smax.shape)
    return np.count_nonzero(spec.s > threshold[..., None], axis=-1)


def _nonnegative(name, value):
    value = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(value)) or np.any(value < 0):
        raise ValueError(f"{name} must be finite and nonnegative; got {value}")
    return value


def _energy_effective_rank(spec):
    x, _ = _scaled(spec.s)
    return _exp_entropy(x**2)


def _participation_ratio(spec):
    x, is_zero = _scaled(spec.s)
    e = x**2
    # For a nonzero spectrum sum(e**2) >= 1 (the top value is 1).
    denom = np.where(is_zero, 1.0, (e**2).sum(axis=-1))
    return np.where(is_zero, 0.0, e.sum(axis=-1) ** 2 / denom)


def _entropy_effective_rank(spec):
    x, _ = _scaled(spec.s)
    return _exp_entropy(x)


def _stable_rank(spec):
    x, _ = _scaled(spec.s)
    # x_1 = 1 after scaling (or the spectrum is all zero and the sum is 0).
    return (x**2).sum(axis=-1)


def _energy_threshold_rank(spec, q=0.99):
    q = check_real(q, "q", 0, 1, low_open=True)
    x, is_zero = _scaled(spec.s)
    cumulative = np.cumsum(x**2, axis=-1)
    total = cumulative[..., -1:]
    # Slack of a few ulps of the total so that summation roundoff cannot push
    # an exactly-reached target (e.g. q = 1, or q * r for r equal values) to
    # the next index.
    slack = 4 * x.shape[-1] * np.finfo(np.float64).eps * total
    short = cumulative < q * total - slack
    k = np.count_nonzero(short, axis=-1) + 1
    return np.where(is_zero, 0, np.minimum(k, x.shape[-1]))


def singular_values(a):
    """Validated singular values, sorted in descending order.

    Parameters
    ----------
    a : array_like
        A 1-D array of singular values (any order), a matrix of shape
        ``(m, n)``, or a stack of matrices of shape ``(..., m, n)``.
        Real or complex matrices are accepted; booleans and integers are
        converted to float64.

    Returns
    -------
    s : ndarray of float64, shape (k,) or (..., k)
        Singular values sorted in descending order, with
        ``k = min(m, n)`` for matrices.

    Raises
    ------
    ValueError
        If `a` is empty, a scalar, non-numeric, contains NaN or inf, or
        (for 1-D input) contains negative or complex values; or if the
        singular values exceed float64's range (e.g. ``np.ones((3, 2)) *
        1e308``, whose largest is about ``2.4e308``; the rank measures of such
        a matrix are still computed, since they are scale-free).

    Notes
    -----
    The input's ``ndim`` decides how it is read: ``ndim == 1`` means singular
    values, ``ndim >= 2`` means matrices, whose singular values are computed
    with ``numpy.linalg.svd(a, compute_uv=False)``.  A single-row matrix must
    therefore be passed as 2-D (``a[None, :]``).

    References
    ----------
    .. [1] G. H. Golub and C. F. Van Loan, *Matrix Computations*, 4th ed.,
       Johns Hopkins University Press, 2013.

    Examples
    --------
    >>> singular_values([1, 3, 2])
    array([3., 2., 1.])
    >>> singular_values([[3, 0], [0, -4]])
    array([4., 3.])
    >>> singular_values(np.zeros((5, 3, 2))).shape
    (5, 2)
    """
    return _spectrum(a).values()


def numerical_rank(a, tol=None, rtol=None):
    """Number of singular values above a threshold.

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.
    tol : float or array_like, optional
        Absolute threshold.  For stacks it may be an array broadcastable to
        ``a.shape[:-2]``.
    rtol : float or array_like, optional
        Threshold relative to the largest singular value: ``rtol * s_1``.
        At most one of `tol` and `rtol` may be given.

    Returns
    -------
    rank : int or ndarray of int
        ``int`` for one matrix or spectrum, an array of shape ``(...)`` for
        a stack.  0 for an all-zero spectrum.

    Raises
    ------
    ValueError
        If both `tol` and `rtol` are given, or either is negative or not
        finite, or `a` is invalid (see :func:`singular_values`).

    Notes
    -----
    .. math:: \\operatorname{rank}(A) = \\#\\{i : s_i > \\tau\\}

    The default threshold is NumPy's ``matrix_rank`` rule
    :math:`\\tau = s_1 \\max(m, n)\\, \\varepsilon`, with :math:`\\varepsilon`
    the machine epsilon of the dtype the SVD was computed in.  For 1-D input
    :math:`\\max(m, n)` is replaced by the number of singular values and
    :math:`\\varepsilon` is float64's.  This only absorbs roundoff: for noisy
    data, choose `tol` or `rtol` from the noise level, since noise makes any
    matrix full rank.

    References
    ----------
    .. [1] G. H. Golub and C. F. Van Loan, *Matrix Computations*, 4th ed.,
       Johns Hopkins University Press, 2013.
    .. [2] ``numpy.linalg.matrix_rank``, NumPy documentation.

    Examples
    --------
    >>> numerical_rank([1.0, 0.5, 1e-20])
    2
    >>> numerical_rank([1.0, 0.5, 0.01], rtol=0.1)
    2
    >>> numerical_rank(np.ones((4, 3)))
    1
    """
    return _to_python(_numerical_rank(_spectrum(a), tol=tol, rtol=rtol))


def energy_effective_rank(a):
    """Energy effective rank: exp of the entropy of the energy distribution.

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.

    Returns
    -------
    rank : float or ndarray of float
        In ``[1, k]`` for a nonzero spectrum with ``k`` values; 0.0 for an
        all-zero spectrum.

    Notes
    -----
    .. math::

        p_i = \\frac{s_i^2}{\\sum_j s_j^2}, \\qquad
        \\operatorname{erank}_E(A) = \\exp\\Big(-\\sum_i p_i \\log p_i\\Big)

    with the natural logarithm and :math:`0 \\log 0 = 0`.  Equals ``r`` for
    ``r`` equal nonzero singular values.  This is Roy & Vetterli's effective
    rank applied to the energies :math:`s_i^2` (the eigenvalues of
    :math:`A^\\top A`); it is the estimator named in the "Entropic Bound"
    paper as robust to softmax noise.

    References
    ----------
    .. [1] O. Roy and M. Vetterli, "The effective rank: A measure of effective
       dimensionality", European Signal Processing Conference (EUSIPCO), 2007.

    Examples
    --------
    >>> energy_effective_rank([1, 1, 1, 0])
    3.0
    >>> round(energy_effective_rank([1.0, 0.1]), 4)
    1.0571
    """
    return _to_python(_energy_effective_rank(_spectrum(a)))


def participation_ratio(a):
    """Participation ratio of the energy distribution.

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.

    Returns
    -------
    ratio : float or ndarray of float
        In ``[1, k]`` for a nonzero spectrum with ``k`` values; 0.0 for an
        all-zero spectrum.

    Notes
    -----
    .. math::

        \\operatorname{PR}(A) = \\frac{\\big(\\sum_i s_i^2\\big)^2}{\\sum_i s_i^4}
                              = \\frac{1}{\\sum_i p_i^2},
        \\qquad p_i = \\frac{s_i^2}{\\sum_j s_j^2}

    i.e. ``exp`` of the Renyi-2 entropy of ``p``, hence never larger than
    :func:`energy_effective_rank`.  Equals ``r`` for ``r`` equal nonzero
    singular values.

    References
    ----------
    .. [1] P. Gao, E. Trautmann, B. Yu, G. Santhanam, S. Ryu, K. Shenoy and
       S. Ganguli, "A theory of multineuronal dimensionality, dynamics and
       measurement", bioRxiv 214262, 2017.

    Examples
    --------
    >>> participation_ratio([2, 2, 2, 2])
    4.0
    >>> participation_ratio([3, 4])  # 625 / 337
    1.8545994065281899
    """
    return _to_python(_participation_ratio(_spectrum(a)))


def entropy_effective_rank(a):
    """Effective rank of Roy & Vetterli (2007).

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.

    Returns
    -------
    rank : float or ndarray of float
        In ``[1, k]`` for a nonzero spectrum with ``k`` values; 0.0 for an
        all-zero spectrum.

    Notes
    -----
    .. math::

        p_i = \\frac{s_i}{\\sum_j s_j}, \\qquad
        \\operatorname{erank}(A) = \\exp\\Big(-\\sum_i p_i \\log p_i\\Big)

    with the natural logarithm and :math:`0 \\log 0 = 0`.  Because it uses
    :math:`s_i` rather than :math:`s_i^2`, small singular values weigh more
    than in :func:`energy_effective_rank`.

    References
    ----------
    .. [1] O. Roy and M. Vetterli, "The effective rank: A measure of effective
       dimensionality", European Signal Processing Conference (EUSIPCO), 2007.

    Examples
    --------
    >>> entropy_effective_rank([5, 5, 0])
    2.0
    >>> round(entropy_effective_rank([1.0, 0.1]), 4)
    1.3561
    """
    return _to_python(_entropy_effective_rank(_spectrum(a)))


def stable_rank(a):
    """Stable rank: squared Frobenius norm over squared spectral norm.

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.

    Returns
    -------
    rank : float or ndarray of float
        In ``[1, rank(A)]`` for a nonzero spectrum; 0.0 for an all-zero
        spectrum.

    Notes
    -----
    .. math::

        \\operatorname{sr}(A) = \\frac{\\sum_i s_i^2}{s_1^2}
                              = \\frac{\\|A\\|_F^2}{\\|A\\|_2^2}
                              \\le \\operatorname{rank}(A)

    Unlike the rank it is continuous in :math:`A`, so small perturbations
    change it only slightly.

    References
    ----------
    .. [1] M. Rudelson and R. Vershynin, "Sampling from large matrices: An
       approach through geometric functional analysis", Journal of the ACM,
       54(4), 2007.

    Examples
    --------
    >>> stable_rank([2, 2, 2])
    3.0
    >>> stable_rank([4, 3])  # 25 / 16
    1.5625
    """
    return _to_python(_stable_rank(_spectrum(a)))


def energy_threshold_rank(a, q=0.99):
    """Smallest number of singular values holding a fraction `q` of the energy.

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.
    q : float, default 0.99
        Fraction of the total energy :math:`\\sum_i s_i^2` to retain,
        ``0 < q <= 1``.

    Returns
    -------
    rank : int or ndarray of int
        0 for an all-zero spectrum.

    Raises
    ------
    ValueError
        If `q` is not in ``(0, 1]``, or `a` is invalid.

    Notes
    -----
    With :math:`s_1 \\ge s_2 \\ge \\dots`,

    .. math:: k_q(A) = \\min\\Big\\{k : \\sum_{i \\le k} s_i^2
              \\ge q \\sum_i s_i^2\\Big\\}

    the "cumulative explained variance" rule of PCA.  The comparison allows
    a relative slack of a few ulps of the total so that floating-point
    roundoff cannot push an exactly-met target to the next index: ``q = 1``
    returns the number of nonzero singular values, and ``r`` equal values
    give ``ceil(q * r)`` (``r`` for ``q = 0.99`` and ``r < 100``).

    References
    ----------
    .. [1] I. T. Jolliffe, *Principal Component Analysis*, 2nd ed.,
       Springer, 2002.

    Examples
    --------
    >>> energy_threshold_rank([3, 4])  # 16 / 25 < 0.99
    2
    >>> energy_threshold_rank([3, 4], q=0.6)
    1
    >>> energy_threshold_rank([1, 1, 1, 0], q=1.0)
    3
    """
    return _to_python(_energy_threshold_rank(_spectrum(a), q=q))


def rank_profile(a, tol=None, q=0.99):
    """All six rank measures from a single SVD.

    Parameters
    ----------
    a : array_like
        Singular values (1-D), a matrix (2-D) or a stack of matrices
        ``(..., m, n)``.
    tol : float or array_like, optional
        Absolute threshold for :func:`numerical_rank`; default NumPy's
        ``matrix_rank`` rule.
    q : float, default 0.99
        Energy fraction for :func:`energy_threshold_rank`.

    Returns
    -------
    profile : dict
        Keys ``'numerical_rank'``, ``'energy_effective_rank'``,
        ``'participation_ratio'``, ``'entropy_effective_rank'``,
        ``'stable_rank'`` and ``'energy_threshold_rank'``.  Values are
        scalars for one matrix or spectrum, arrays of shape ``(...)`` for a
        stack.

    Notes
    -----
    Each entry equals the corresponding function's result; see those
    functions for the formulas.  For every nonzero spectrum

    .. math:: \\operatorname{sr} \\le \\operatorname{PR}
              \\le \\operatorname{erank}_E \\le \\#\\{i : s_i > 0\\}.

    References
    ----------
    .. [1] O. Roy and M. Vetterli, "The effective rank: A measure of effective
       dimensionality", European Signal Processing Conference (EUSIPCO), 2007.
    .. [2] M. Rudelson and R. Vershynin, "Sampling from large matrices: An
       approach through geometric functional analysis", Journal of the ACM,
       54(4), 2007.

    Examples
    --------
    >>> profile = rank_profile([1, 1, 0])
    >>> profile["energy_effective_rank"], profile["numerical_rank"]
    (2.0, 2)
    >>> sorted(profile)  # doctest: +NORMALIZE_WHITESPACE
    ['energy_effective_rank', 'energy_threshold_rank', 'entropy_effective_rank',
     'numerical_rank', 'participation_ratio', 'stable_rank']
    """
    spec = _spectrum(a)
    measures = {
        "numerical_rank": _numerical_rank(spec, tol=tol),
        "energy_effective_rank": _energy_effective_rank(spec),
        "participation_ratio": _participation_ratio(spec),
        "entropy_effective_rank": _entropy_effective_rank(spec),
        "stable_rank": _stable_rank(spec),
        "energy_threshold_rank": _energy_threshold_rank(spec, q=q),
    }
    return {name: _to_python(value) for name, value in measures.items()}
