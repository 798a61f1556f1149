"""The linear-attention fit ``Y = (X K* X^T / L) X V* + E``: least squares in ``K*`` or lifted."""

import numpy as np
from sklearn.utils import Bunch

from ._common import (
    _check_ridge,
    _check_sample_size,
    _check_value_map,
    _check_xy,
    _chunks,
    _finish,
    _iid_threshold,
    _simulated_threshold,
    _solve_normal,
)
from ._predict import _gram, _rss, _upper_pairs

__all__ = ["fit_linear_kernel"]


def fit_linear_kernel(X, Y, value_map=None, ridge=1e-8):
    r"""Least-squares estimate of a linear-attention query-key kernel.

    Fits ``Y = (X K X^T / L) X V + E`` for the kernel ``K`` (``V`` known) or for
    the lifted tensor of the products ``K_ab V_ce`` (``V`` unknown).

    Parameters
    ----------
    X : array-like of shape (n_samples, L, d)
        Token sequences.
    Y : array-like of shape (n_samples, L, d_out)
        Per-token targets.
    value_map : array-like of shape (d, d_out) or None, default=None
        The value map ``V`` if known; ``None`` fits the lifted system.
    ridge : float, default=1e-8
        Relative Tikhonov term: ``ridge * tr(G) / p * I`` is added to the
        ``p x p`` normal matrix ``G``.

    Returns
    -------
    fit : Bunch
        ``matrix``, ``singular_values`` (descending), ``noise_threshold``,
        ``noise_aware_rank`` (singular values above the threshold),
        ``iid_noise_threshold`` (see the module notes),
        ``energy_effective_rank``, ``n_equations`` and ``n_unknowns`` (per
        output channel for the lifted system), ``n_targets``,
        ``residual_variance`` (estimate of ``sigma^2``) and ``kind``.
        Known ``V`` (``kind="linear"``): ``matrix`` and ``kernel`` are the
        estimated ``K`` (``d x d``), and ``value_map`` is ``V``.
        Unknown ``V`` (``kind="linear_lifted"``): ``lifted_coef`` is the tensor
        ``T`` of shape ``(d, d (d + 1) / 2, d_out)`` (for
        :func:`predict_linear_lifted`) and ``matrix`` its reshape to
        ``d x (d (d + 1) / 2 * d_out)``.

    Raises
    ------
    ValueError
        On invalid input, a ``value_map`` of the wrong shape, or fewer equations
        than unknowns.

    Notes
    -----
    *Known* ``V``: with ``Z = X V`` and ``S_n = X_n^T Z_n / L``
    (``d x d_out``) the model is linear in ``K``,

    .. math:: Y_{nie} = \sum_{a,b} K_{ab}\, X_{nia}\, S_{n,be} + E_{nie},

    with ``n L d_out`` equations and ``d^2`` unknowns. In the row-major order of
    ``K.reshape(-1)`` the normal equations are

    .. math:: G = \sum_n (X_n^\top X_n) \otimes (S_n S_n^\top), \qquad
              h = \sum_n \mathrm{vec}(X_n^\top Y_n S_n^\top).

    *Unknown* ``V`` (the lifted system): with the symmetric
    ``M_n = X_n^T X_n / L``,

    .. math:: Y_{nie} = \sum_{a,b,c} K_{ab} V_{ce}\, X_{nia} M_{n,bc} + E_{nie}
              = \sum_{a,\, b \le c} T_{a,(bc),e}\, X_{nia} M_{n,bc} + E_{nie},

    where, because ``M_n`` is symmetric, only the pairs ``b <= c`` are features
    and :math:`T_{a,(bc),e} = K_{ab} V_{ce} + K_{ac} V_{be}` (``b < c``),
    :math:`T_{a,(bb),e} = K_{ab} V_{be}`. The design is the same for every
    output channel ``e``, so one normal matrix of size
    ``p = d * d (d + 1) / 2`` serves them all: with ``m_n`` the upper triangle
    of ``M_n``, :math:`G = \sum_n (X_n^\top X_n) \otimes (m_n m_n^\top)` and
    :math:`h_{:,e} = \sum_n \mathrm{vec}(X_n^\top Y_{n,:,e}\, m_n^\top)`:
    ``n L`` equations and ``p`` unknowns per channel. Every column of the
    reshaped ``d x (p / d * d_out)`` matrix ``T`` lies in the column space of
    ``K`` (column ``(bc, e)`` is :math:`K_{:,b} V_{ce} + K_{:,c} V_{be}`), so
    its rank is ``rank(K)``; its singular values are those of ``K W`` for a
    fixed ``W`` built from ``V``, so the rank is exact but the effective ranks
    are only close to those of ``K``.

    The noise threshold is simulated from the law of the estimation error,
    :math:`N(0, \sigma^2 G^{-1})` per channel (see the module notes);
    ``iid_noise_threshold`` is the closed form ``tau (sqrt(m) + sqrt(k))`` for
    the ``m x k`` ``matrix``, with ``tau^2 = sigma_hat^2 mean(diag(G^-1))``
    the typical variance of one estimated entry: the spectral edge of an
    ``m x k`` matrix of iid noise of that size, approximate since the errors
    are neither independent nor equally variable.

    Examples
    --------
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y, info = make_attention_task(
    ...     "linear", n_samples=200, seq_len=6, d=5, rank=2, noise=0.0,
    ...     random_state=0, return_info=True)
    >>> fit = fit_linear_kernel(X, Y, value_map=info.value_map, ridge=0.0)
    >>> bool(np.allclose(fit.kernel, info.kernel))
    True
    """
    X, Y = _check_xy(X, Y)
    ridge = _check_ridge(ridge)
    n, L, d = X.shape
    d_out = Y.shape[2]
    V = _check_value_map(value_map, d, d_out)
    if V is not None:
        return _fit_linear_known(X, Y, V, ridge)
    return _fit_linear_lifted(X, Y, ridge)


def _fit_linear_known(X, Y, V, ridge):
    n, L, d = X.shape
    d_out = Y.shape[2]
    p = d * d
    n_eq = _check_sample_size(
        "system for 'linear' attention with a known value map", p, n, L * d_out,
        "L * d_out",
    )
    G4 = np.zeros((d * d, d * d))
    h = np.zeros((d, d))
    for sl in _chunks(n):
        Xc = X[sl]
        A = _gram(Xc)
        Xt = Xc.transpose(0, 2, 1)
        S = Xt @ (Xc @ V) / L
        SS = S @ S.transpose(0, 2, 1)
        # sum_n kron(A_n, SS_n) as one GEMM: G4[(a,a'),(b,b')] = sum_n A_n[a,a'] SS_n[b,b'].
        G4 += A.reshape(-1, d * d).T @ SS.reshape(-1, d * d)
        XtY = Xt @ Y[sl]
        # h[a, b] = sum_{n,e} XtY_n[a, e] S_n[b, e], one GEMM over (n, e)
        h += XtY.transpose(1, 0, 2).reshape(d, -1) @ S.transpose(1, 0, 2).reshape(d, -1).T
    G = G4.reshape(d, d, d, d).transpose(0, 2, 1, 3).reshape(p, p)
    coef, diag_inv, root, roundoff = _solve_normal(G, h.reshape(p), ridge)
    K = coef.reshape(d, d)
    bunch = Bunch(kind="linear", kernel=K, value_map=V, n_targets=1)
    rss = _rss(bunch, X, Y)
    bunch.update(n_equations=n_eq, n_unknowns=p, residual_variance=rss / max(n_eq - p, 1))
    s = np.linalg.svd(K, compute_uv=False)
    threshold = _simulated_threshold(
        root, bunch.residual_variance, p, 1, lambda c: c.reshape(-1, d, d)
    )
    iid = _iid_threshold(bunch.residual_variance, diag_inv, d, d)
    return _finish(bunch, K, s, threshold, iid, roundoff)


def _fit_linear_lifted(X, Y, ridge):
    n, L, d = X.shape
    d_out = Y.shape[2]
    rows, cols = _upper_pairs(d)
    q = rows.shape[0]
    p = d * q
    n_eq = _check_sample_size(
        "lifted system for 'linear' attention with an unknown value map", p, n, L,
        "L", unit=" per output channel",
    )
    # G4[(a,a'), (bc,b'c')] = sum_n A_n[a,a'] m_n[bc] m_n[b'c']: one GEMM of the
    # (n, d^2) Gram matrices against the (n, q^2) outer products of m_n.
    G4 = np.zeros((d * d, q * q))
    h = np.zeros((d, q, d_out))
    for sl in _chunks(n):
        Xc = X[sl]
        A = _gram(Xc)
        m = A[:, rows, cols] / L
        mm = (m[:, :, None] * m[:, None, :]).reshape(-1, q * q)
        G4 += A.reshape(-1, d * d).T @ mm
        XtY = np.einsum("nia,nie->nae", Xc, Y[sl], optimize=True)
        h += np.einsum("nq,nae->aqe", m, XtY, optimize=True)
    G = G4.reshape(d, d, q, q).transpose(0, 2, 1, 3).reshape(p, p)
    coef, diag_inv, root, roundoff = _solve_normal(G, h.reshape(p, d_out), ridge)
    T = coef.reshape(d, q, d_out)
    bunch = Bunch(kind="linear_lifted", lifted_coef=T, n_targets=d_out)
    rss = _rss(bunch, X, Y)
    bunch.update(
        n_equations=n_eq, n_unknowns=p,
        residual_variance=rss / (d_out * max(n_eq - p, 1)),
    )
    matrix = T.reshape(d, q * d_out)
    s = np.linalg.svd(matrix, compute_uv=False)
    threshold = _simulated_threshold(
        root, bunch.residual_variance, p, d_out, lambda c: c.reshape(-1, d, q * d_out)
    )
    iid = _iid_threshold(bunch.residual_variance, diag_inv, d, q * d_out)
    return _finish(bunch, matrix, s, threshold, iid, roundoff)
