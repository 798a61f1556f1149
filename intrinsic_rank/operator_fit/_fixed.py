"""The fixed-operator fit ``Y = A* X V* + E``: least squares in ``A*`` or in ``A* (x) V*``."""

import math

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
from ._predict import _rss

__all__ = ["fit_fixed_operator"]


def fit_fixed_operator(X, Y, value_map=None, ridge=1e-8):
    r"""Least-squares estimate of a fixed token mixer ``A`` from ``Y = A X V + E``.

    Parameters
    ----------
    X : array-like of shape (n_samples, L, d)
        Token sequences.
    Y : array-like of shape (n_samples, L, d_out)
        Per-token targets.
    value_map : array-like of shape (d, d_out) or None, default=None
        The value map ``V`` if known. ``None`` fits the Kronecker product
        ``A (x) V`` and extracts ``A`` (up to scale and sign) from it.
    ridge : float, default=1e-8
        Relative Tikhonov term: ``ridge * tr(G) / p * I`` is added to the
        ``p x p`` normal matrix ``G``.

    Returns
    -------
    fit : Bunch
        ``matrix`` (the estimated ``A``, ``L x L``), ``singular_values``
        (descending), ``noise_threshold``, ``noise_aware_rank`` (singular values
        above the threshold), ``iid_noise_threshold`` (known ``V`` only; see
        the module notes), ``energy_effective_rank``, ``n_equations`` and
        ``n_unknowns`` (per independent regression, see Notes), ``n_targets``
        (number of right-hand sides sharing the design), ``residual_variance``
        (estimate of ``sigma^2``), ``operator`` and ``value_map`` (used by
        :func:`predict`), and ``kind="fixed"``. With an unknown value map also
        ``coef`` (the unconstrained ``B``, ``(L d_out) x (L d)``) and
        ``kronecker_singular_values`` (those of ``R``, see Notes).

    Raises
    ------
    ValueError
        On invalid input, a ``value_map`` of the wrong shape, or fewer equations
        than unknowns.

    Notes
    -----
    *Known* ``V``: with ``Z = X V`` the model is

    .. math:: Y_{nle} = \sum_k A_{lk} Z_{nke} + E_{nle},

    one regression per row ``l`` of ``A`` with ``n d_out`` equations and ``L``
    unknowns, all sharing the normal matrix
    :math:`G = \sum_{n,e} Z_{n,:,e} Z_{n,:,e}^\top`; with
    :math:`H = \sum_{n,e} Y_{n,:,e} Z_{n,:,e}^\top` the solution is
    :math:`\hat A = H G^{-1}`. The noise threshold is simulated from the
    estimation error's law: the rows of :math:`\hat A - A` are independent
    :math:`N(0, \sigma^2 G^{-1})` (see the module notes; the closed-form
    ``iid_noise_threshold = tau (sqrt(L) + sqrt(L))`` with
    ``tau^2 = sigma_hat^2 mean(diag(G^-1))`` is also returned).

    *Unknown* ``V``: :math:`Y_{nle} = \sum_{k,j} B_{(l,e),(k,j)} X_{nkj}` with
    :math:`B_{(l,e),(k,j)} = A_{lk} V_{je}` is an ordinary regression of
    ``Y_n`` (flattened, ``L d_out`` targets) on ``X_n`` (flattened, ``L d``
    features): ``n`` equations and ``L d`` unknowns per target. The
    rearrangement :math:`R_{(l,k),(e,j)} = B_{(l,e),(k,j)}` equals
    :math:`\mathrm{vec}(A)\,\mathrm{vec}(V^\top)^\top`, of rank one; with its
    top singular triplet ``(s_1, u_1, v_1)`` the estimate is
    :math:`\hat A = \sqrt{s_1}\, u_1` reshaped to ``L x L`` (the scale of ``A``
    against ``V`` is not identifiable; this splits it evenly, and the sign is
    fixed so that the largest entry of :math:`\hat A` is positive). The noise
    threshold is the plug-in Wedin estimate :math:`(s_2 / s_1)\,\|\hat A\|_F`
    of the error :math:`\|\hat A - A\|_F`: Wedin's theorem bounds the sine of
    the angle between :math:`u_1` and ``vec(A)`` by :math:`\|E_R\|_2 / s_1`,
    where :math:`s_2` (the largest singular value of ``R`` that the rank-one
    truth does not explain) stands in for the unknown noise norm
    :math:`\|E_R\|_2`. By Weyl's inequality no singular value of ``A`` can move
    by more than :math:`\|\hat A - A\|_2 \le \|\hat A - A\|_F`, so using the
    Frobenius norm makes the threshold conservative; the plug-in of
    :math:`s_2` for :math:`\|E_R\|_2` (a lower bound of it) makes it an
    estimate rather than a guarantee.

    Examples
    --------
    >>> from intrinsic_rank.datasets import make_fixed_operator_task
    >>> X, Y, info = make_fixed_operator_task(
    ...     n_samples=200, seq_len=6, d=4, rank=2, noise=0.1, random_state=0,
    ...     return_info=True)
    >>> fit = fit_fixed_operator(X, Y, value_map=info.value_map)
    >>> fit.matrix.shape, fit.noise_aware_rank
    ((6, 6), 2)
    """
    X, Y = _check_xy(X, Y)
    ridge = _check_ridge(ridge)
    n, L, d = X.shape
    d_out = Y.shape[2]
    V = _check_value_map(value_map, d, d_out)
    if V is not None:
        n_eq = _check_sample_size(
            "system for the fixed operator with a known value map", L, n, d_out,
            "d_out", unit=" per row of the operator",
        )
        G = np.zeros((L, L))
        H = np.zeros((L, L))
        for sl in _chunks(n):
            Z = X[sl] @ V
            G += np.einsum("nke,nje->kj", Z, Z, optimize=True)
            H += np.einsum("nle,nke->lk", Y[sl], Z, optimize=True)
        # Row l of A solves G a_l = H[l]; the rows share G, so solve them at once.
        coef, diag_inv, root, roundoff = _solve_normal(G, H.T, ridge)
        A = coef.T
        bunch = Bunch(kind="fixed", operator=A, value_map=V, n_targets=L)
        rss = _rss(bunch, X, Y)
        dof = L * max(n_eq - L, 1)
        bunch.update(n_equations=n_eq, n_unknowns=L, residual_variance=rss / dof)
        s = np.linalg.svd(A, compute_uv=False)
        threshold = _simulated_threshold(
            root, bunch.residual_variance, L, L, lambda c: c.transpose(0, 2, 1)
        )
        iid = _iid_threshold(bunch.residual_variance, diag_inv, L, L)
        return _finish(bunch, A, s, threshold, iid, roundoff)

    p = L * d
    n_eq = _check_sample_size(
        "system for the fixed operator with an unknown value map", p, n, 1, "",
        unit=" per output entry",
    )
    G = np.zeros((p, p))
    H = np.zeros((p, L * d_out))
    for sl in _chunks(n):
        Xf = X[sl].reshape(-1, p)
        G += Xf.T @ Xf
        H += Xf.T @ Y[sl].reshape(-1, L * d_out)
    coef, _, _, roundoff = _solve_normal(G, H, ridge)
    B = coef.T  # B[(l, e), (k, j)]
    R = B.reshape(L, d_out, L, d).transpose(0, 2, 1, 3).reshape(L * L, d_out * d)
    U, s_R, Wt = np.linalg.svd(R, full_matrices=False)
    scale = math.sqrt(s_R[0])
    A = scale * U[:, 0].reshape(L, L)
    V_hat = scale * Wt[0].reshape(d_out, d).T
    # A and V are only determined up to a joint sign flip: fix it.
    if A.flat[np.argmax(np.abs(A))] < 0:
        A, V_hat = -A, -V_hat
    bunch = Bunch(
        kind="fixed", operator=A, value_map=V_hat, coef=B,
        kronecker_singular_values=s_R, n_targets=L * d_out,
    )
    # Residuals of the unconstrained regression: the sigma^2 estimate does not
    # depend on the rank-one extraction.
    rss = 0.0
    for sl in _chunks(n):
        pred = X[sl].reshape(-1, p) @ coef
        rss += float(np.sum((Y[sl].reshape(-1, L * d_out) - pred) ** 2))
    bunch.update(
        n_equations=n_eq, n_unknowns=p,
        residual_variance=rss / (L * d_out * max(n_eq - p, 1)),
    )
    s = np.linalg.svd(A, compute_uv=False)
    s2 = s_R[1] if s_R.shape[0] > 1 else 0.0
    threshold = (s2 / s_R[0]) * np.linalg.norm(A) if s_R[0] > 0 else 0.0
    return _finish(bunch, A, s, threshold, roundoff=roundoff)
