"""The softmax-attention fit: the realised mixers' centred log-ratios are linear in ``K*``."""

import numpy as np
from sklearn.utils import Bunch

from .. import spectral
from .._validation import check_real
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
from ._predict import _gram

__all__ = ["fit_softmax_kernel"]


def fit_softmax_kernel(X, Y, value_map, ridge=1e-8, floor=1e-3):
    r"""Estimate a softmax-attention kernel from the realised mixers' log-ratios.

    For ``Y = softmax(X K X^T) X V + E`` with ``V`` known and ``d_out >= L``,
    solves for each sequence's realised mixer, then fits ``K`` to the centred
    logarithms of the mixers by least squares.

    Parameters
    ----------
    X : array-like of shape (n_samples, L, d)
        Token sequences.
    Y : array-like of shape (n_samples, L, d_out)
        Per-token targets; ``d_out >= L`` is required.
    value_map : array-like of shape (d, d_out)
        The value map ``V`` (required).
    ridge : float, default=1e-8
        Relative Tikhonov term, both in each mixer's ``L x L`` system
        (``ridge * tr(Z_n Z_n^T) / L``) and in the ``d^2 x d^2`` normal matrix of
        the kernel fit (``ridge * tr(G) / d^2``).
    floor : float, default=1e-3
        Entries of the solved mixers are clipped to at least ``floor`` before the
        logarithm (noise makes some of them zero or negative); ``0 < floor < 1``.

    Returns
    -------
    fit : Bunch
        ``matrix`` and ``kernel`` (the estimated ``K``, ``d x d``),
        ``singular_values``, ``noise_threshold``, ``noise_aware_rank``,
        ``iid_noise_threshold``, ``energy_effective_rank``, ``n_equations``, ``n_unknowns``,
        ``n_targets=1``, ``residual_variance`` (of the log-ratio regression, see
        Notes), ``noise_variance`` (estimate of ``sigma^2`` from the mixer
        solves; ``nan`` when ``d_out == L``), ``mixers`` (the solved, clipped and
        renormalised realised mixers, ``(n_samples, L, L)``),
        ``mixer_energy_rank`` (mean over sequences of their energy effective
        ranks), ``value_map`` and ``kind="softmax"``.

    Raises
    ------
    ValueError
        On invalid input, a missing or wrongly shaped ``value_map``, ``d_out <
        L``, or fewer equations than unknowns.

    Notes
    -----
    With ``Z_n = X_n V`` (``L x d_out``), the realised mixer solves
    ``Y_n = M_n Z_n + E_n`` in least squares,

    .. math:: \hat M_n = Y_n Z_n^\top (Z_n Z_n^\top)^{-1},

    which needs ``Z_n`` of full row rank ``L``, hence ``d_out >= L``. Softmax
    rows are positive and sum to one, so :math:`\hat M_n` is clipped to
    ``>= floor`` and its rows renormalised. Taking logarithms and centring each
    row removes the softmax normaliser:

    .. math:: \ell_{n,ij} = \log \hat M_{n,ij} - \frac{1}{L}\sum_{j'}
              \log \hat M_{n,ij'} = x_i^\top K (x_j - \bar x_n) + \text{error},

    with :math:`\bar x_n` the mean token. This is linear in ``K``; with
    ``C_n = X_n - \bar x_n`` the normal equations are

    .. math:: G = \sum_n (X_n^\top X_n) \otimes (C_n^\top C_n), \qquad
              h = \sum_n \mathrm{vec}(X_n^\top \ell_n C_n).

    Each row of :math:`\ell_n` sums to zero, so a sequence gives ``L (L - 1)``
    independent equations (``n_equations = n L (L - 1)``). The error is not
    Gaussian (the logarithm of a noisy mixer, biased by the clipping), so
    ``residual_variance`` is the variance of the log-ratio residuals, not
    ``sigma^2``, and the noise threshold (simulated as for the linear
    teachers, from :math:`N(0, \hat\sigma^2_\ell G^{-1})`; see the module
    notes) is a much rougher approximation: the errors are correlated within a
    sequence and the clipping adds a systematic bias that no noise model
    covers, so ``noise_aware_rank`` can over-count here (``r* = 1`` at
    ``d = 16, L = 8, d_out = 16`` gave 2). The estimate of ``K`` is biased
    towards zero where the clipping is active (sharp softmax, large noise):
    it is the best partial estimate available without training.

    Examples
    --------
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y, info = make_attention_task(
    ...     "softmax", n_samples=300, seq_len=4, d=6, d_out=6, rank=2,
    ...     noise=0.0, random_state=0, return_info=True)
    >>> fit = fit_softmax_kernel(X, Y, info.value_map)
    >>> fit.mixers.shape, fit.kernel.shape
    ((300, 4, 4), (6, 6))
    """
    X, Y = _check_xy(X, Y)
    ridge = _check_ridge(ridge)
    n, L, d = X.shape
    d_out = Y.shape[2]
    if value_map is None:
        raise ValueError(
            "fit_softmax_kernel needs the value map: the realised softmax mixers "
            "can only be solved for when V is known"
        )
    V = _check_value_map(value_map, d, d_out)
    if d_out < L:
        raise ValueError(
            f"the realised mixers cannot be solved for: each sequence gives "
            f"Y_n = M_n X_n V with {L * L} unknown mixer entries but Z_n = X_n V has "
            f"rank at most d_out = {d_out} < L = {L}; it needs d_out >= L (a value "
            f"map with at least as many output channels as tokens)"
        )
    floor = check_real(floor, "floor", 0, 1, low_open=True, high_open=True)
    p = d * d
    n_eq = _check_sample_size(
        "system for 'softmax' attention with a known value map", p, n, L * (L - 1),
        "L * (L - 1)",
    )
    mixers = np.empty((n, L, L))
    G4 = np.zeros((d * d, d * d))
    h = np.zeros((d, d))
    mixer_rss = 0.0
    eye = np.eye(L)
    for sl in _chunks(n):
        Xc, Yc = X[sl], Y[sl]
        Z = Xc @ V
        ZZ = Z @ Z.transpose(0, 2, 1)
        shift = ridge * np.trace(ZZ, axis1=1, axis2=2) / L
        # M^T = (Z Z^T)^{-1} Z Y^T, all sequences of the chunk in one batched solve.
        M = np.linalg.solve(ZZ + shift[:, None, None] * eye, Z @ Yc.transpose(0, 2, 1))
        M = M.transpose(0, 2, 1)
        mixer_rss += float(np.sum((Yc - M @ Z) ** 2))
        M = np.maximum(M, floor)
        M /= M.sum(axis=-1, keepdims=True)
        mixers[sl] = M
        logM = np.log(M)
        ell = logM - logM.mean(axis=-1, keepdims=True)
        C = Xc - Xc.mean(axis=1, keepdims=True)
        A = _gram(Xc)
        CC = np.einsum("nia,nib->nab", C, C, optimize=True)
        G4 += A.reshape(-1, d * d).T @ CC.reshape(-1, d * d)
        h += np.einsum("nia,nij,njb->ab", Xc, ell, C, optimize=True)
    G = G4.reshape(d, d, d, d).transpose(0, 2, 1, 3).reshape(p, p)
    coef, diag_inv, root, roundoff = _solve_normal(G, h.reshape(p), ridge)
    K = coef.reshape(d, d)
    rss = 0.0
    for sl in _chunks(n):
        Xc = X[sl]
        C = Xc - Xc.mean(axis=1, keepdims=True)
        logM = np.log(mixers[sl])
        ell = logM - logM.mean(axis=-1, keepdims=True)
        rss += float(np.sum((ell - Xc @ K @ C.transpose(0, 2, 1)) ** 2))
    noise_dof = n * L * (d_out - L)
    bunch = Bunch(
        kind="softmax", kernel=K, value_map=V, n_targets=1, mixers=mixers,
        mixer_energy_rank=float(np.mean(spectral.energy_effective_rank(mixers))),
        n_equations=n_eq, n_unknowns=p, residual_variance=rss / max(n_eq - p, 1),
        noise_variance=mixer_rss / noise_dof if noise_dof > 0 else float("nan"),
    )
    s = np.linalg.svd(K, compute_uv=False)
    threshold = _simulated_threshold(
        root, bunch.residual_variance, p, 1, lambda c: c.reshape(-1, d, d)
    )
    iid = _iid_threshold(bunch.residual_variance, diag_inv, d, d)
    return _finish(bunch, K, s, threshold, iid, roundoff)
