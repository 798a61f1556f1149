"""Deficiency floors of the Entropic Bound paper (the Entropic Bound paper).

The best rank-``r`` approximation of a spectrum (Eckart-Young) and the exact
excess-risk floor of a rank-``r`` B0 student on a fixed-operator task.
"""

import numpy as np

from .._validation import check_int
from ._common import finite_result

__all__ = ["tail_energy", "fixed_operator_deficiency"]


def _spectrum(singular_values):
    s = np.asarray(singular_values, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty 1-D array; got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("singular_values must be finite and nonnegative")
    return np.sort(s)[::-1]


def tail_energy(singular_values, rank):
    """Energy beyond the best rank-``r`` approximation: ``sum_{i > r} s_i^2``.

    By the Eckart-Young theorem this is the squared Frobenius distance from a
    matrix to the nearest matrix of rank ``r``.

    Parameters
    ----------
    singular_values : array-like of shape (k,)
        Singular values (any order).
    rank : int
        Rank ``r >= 0`` of the approximation.

    Returns
    -------
    energy : float

    Raises
    ------
    ValueError
        If ``singular_values`` is not a non-empty 1-D array of finite
        nonnegative numbers, ``rank`` is not an integer ``>= 0``, or the energy
        exceeds float64's range (an ``s_i`` above about ``1.3e154``).

    Examples
    --------
    >>> tail_energy([3.0, 2.0, 1.0], rank=1)
    5.0
    """
    s = _spectrum(singular_values)
    rank = check_int(rank, "rank", 0)
    return finite_result(lambda: np.sum(s[rank:] ** 2), "the tail energy sum_{i > r} s_i^2")


def fixed_operator_deficiency(operator_singular_values, rank, value_map):
    """Exact excess-risk floor of a rank-``r`` B0 student on a fixed-operator task.

    For ``Y = A* X V* + E`` with isotropic Gaussian ``X`` (the Entropic Bound paper), the
    best student ``A X V`` with ``rank(A) <= r`` has excess risk (mean squared
    error per output entry above the noise floor)

    ``||V*||_F^2 * sum_{i > r} s_i(A*)^2 / (L * d_out)``.

    Derivation: ``vec(A X V) = (V^T kron A) vec(X)`` and ``E[vec X vec X^T] = I``,
    so the excess risk is ``||V*^T kron A* - V^T kron A||_F^2 / (L d_out)``. The
    rearrangement operator maps ``V^T kron A`` to the rank-one matrix
    ``vec(A) vec(V)^T`` isometrically; the best approximation keeps
    ``V = c V*`` and the best rank-``r`` approximation of ``A*``, leaving
    ``||V*||_F^2`` times the tail energy of ``A*``.

    Parameters
    ----------
    operator_singular_values : array-like of shape (L,)
        Singular values of ``A*``; ``L`` is taken as their number.
    rank : int
        Student rank ``r``.
    value_map : array-like of shape (d, d_out)
        The teacher's value map ``V*``.

    Returns
    -------
    floor : float
        The excess-risk floor (zero for ``r >= rank(A*)``).

    Raises
    ------
    ValueError
        If the singular values or ``value_map`` are not finite, ``value_map``
        is not 2-D, ``rank`` is not an integer ``>= 0``, or the floor exceeds
        float64's range. Factors far from unit scale (a huge ``V*`` with a tiny
        tail, or the reverse) are rescaled, not overflowed.

    Examples
    --------
    >>> import numpy as np
    >>> fixed_operator_deficiency([2.0, 1.0, 0.0], rank=1, value_map=np.eye(2))
    0.3333333333333333
    """
    s = _spectrum(operator_singular_values)
    value_map = np.asarray(value_map, dtype=float)
    if value_map.ndim != 2:
        raise ValueError(f"value_map must be 2-D (d, d_out); got shape {value_map.shape}")
    if value_map.size == 0:
        raise ValueError(f"value_map must be non-empty; got shape {value_map.shape}")
    if not np.all(np.isfinite(value_map)):
        raise ValueError("value_map must be finite (no NaN or inf)")
    rank = check_int(rank, "rank", 0)
    L, d_out = s.size, value_map.shape[1]
    tail_s = s[rank:]
    if not np.any(value_map) or not np.any(tail_s):
        return 0.0
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        v_energy, tail = np.sum(value_map**2), float(np.sum(tail_s**2))
        plain = v_energy * tail / (L * d_out)
    # The formula above where both factors and the result stay in float64's
    # normal range (bit for bit as always); else each factor is scaled by its
    # largest entry, so that a huge V* and a tiny tail (or the reverse) meet in
    # range instead of giving inf * 0 = nan or a silent 0.
    tiny = np.finfo(np.float64).tiny
    if all(np.isfinite(x) and x >= tiny for x in (v_energy, tail, plain)):
        return float(plain)
    v_max, s_max = np.max(np.abs(value_map)), np.max(tail_s)
    unit = np.sum((value_map / v_max) ** 2) * np.sum((tail_s / s_max) ** 2) / (L * d_out)
    return finite_result(lambda: (v_max * s_max) * unit * (v_max * s_max), "the deficiency floor")

