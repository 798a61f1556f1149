"""Training-free estimates of a teacher's token mixer from the data alone.

One module, though it is longer than most: the three fits share their input
checks, the chunked normal equations and the noise threshold below, and users
import them together as ``intrinsic_rank.operator_fit``.

The teacher tasks (:mod:`intrinsic_rank.datasets`) are linear in the unknown
mixer once the right features are formed, so the mixer can be estimated by
ordinary least squares on the data, without training a student:

* fixed operator ``Y = A* X V* + E``: linear in ``A*`` (``V*`` known), or in
  the Kronecker product ``A* (x) V*`` (``V*`` unknown);
* linear-QK teacher ``Y = (X K* X^T / L) X V* + E``: linear in ``K*``
  (``V*`` known), or in the "lifted" tensor ``K*_ab V*_ce`` (``V*`` unknown);
* softmax teacher ``Y = softmax(X K* X^T) X V* + E``: with ``V*`` known and
  ``d_out >= L`` the realised mixers can be solved for sequence by sequence, and
  their centred logarithms are linear in ``K*``.

The singular values of the estimated matrix reveal the rank ``r*`` of the
teacher (the "predictability frontier" of the Entropic Bound paper). Each fit
returns a :class:`~sklearn.utils.Bunch` holding that matrix, its singular
values, a noise-aware singular-value threshold and the rank counted against it.

Noise threshold of the least-squares fits. The estimate is
``coef_hat = coef + G^-1 F^T E``: for Gaussian noise its error is exactly
Gaussian with covariance ``sigma^2 G^-1`` (independently for each right-hand
side sharing ``G``). ``noise_threshold`` is the largest top singular value of
``64`` noise matrices drawn from that law, with ``sigma^2`` replaced by
``residual_variance`` and a fixed seed: about the 98.5% quantile of
``||N||_2``. By Weyl's inequality the singular values of ``matrix`` beyond the
true rank are at most ``||N||_2``, so counting the singular values above the
threshold (``noise_aware_rank``) over-counts with probability about 1.5% or
less, and under-counts only when a true singular value is below about twice
the threshold. Without noise the threshold is floored at the floating-point
error of the solve, ``10 eps tr(G) tr(G^-1) s_1`` (``tr(G) tr(G^-1)`` bounds
the condition number of ``G``), so that roundoff does not count as rank.
``iid_noise_threshold`` is the closed-form approximation
``tau (sqrt(m) + sqrt(k))`` with ``tau^2 = sigma^2 mean(diag(G^-1))``, the
spectral edge of an ``m x k`` matrix of iid entries of the typical size of
one estimated entry. It is kept for reference: the estimation errors are
neither independent nor equally variable, and on the teacher tasks it sits
right at (sometimes just below) the largest noise singular value, so counting
against it over-counts ``r*`` by one in a fraction of cases (measured on
linear teachers with ``d = 16``, ``n = 4096``: ``r* = 1, 2`` gave 2, 3).

All fits accumulate the normal equations ``G = F^T F`` and ``h = F^T y`` in
float64 over chunks of sequences: the design ``F`` itself would have
``n L d_out`` rows (``n L`` rows and ``d^2 (d + 1) / 2`` columns for the
lifted system) and is never built. This module uses NumPy and SciPy only (no torch).
"""

import math

import numpy as np
import scipy.linalg
from sklearn.utils import Bunch

from . import spectral
from ._validation import check_real
from .datasets import attention_mixer

__all__ = [
    "fit_fixed_operator",
    "fit_linear_kernel",
    "fit_softmax_kernel",
    "predict_linear_lifted",
    "predict",
]

# Sequences per chunk: bounds the temporary arrays (the lifted system's largest
# is chunk * (d (d + 1) / 2)^2 floats, 76 MB at d = 16) while keeping the
# GEMMs large enough to run at full speed.
_CHUNK = 512
# Simulated noise matrices behind each noise threshold: their largest top
# singular value is about the 98.5% quantile of the noise's top singular value.
_NOISE_DRAWS = 64
_NOISE_SEED = 0


# ----------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------


def _as_real_array(a, name, ndim, shape_hint):
    arr = np.asarray(a)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(
            f"{name} must be an array of real numbers; got dtype {arr.dtype}"
        )
    if arr.ndim != ndim:
        raise ValueError(
            f"{name} must be a {ndim}-D array of shape {shape_hint}; "
            f"got shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty; got shape {arr.shape}")
    arr = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _check_xy(X, Y):
    X = _as_real_array(X, "X", 3, "(n_samples, seq_len, d)")
    Y = _as_real_array(Y, "Y", 3, "(n_samples, seq_len, d_out)")
    if X.shape[:2] != Y.shape[:2]:
        raise ValueError(
            "X and Y must have the same number of sequences and the same sequence "
            f"length; got X.shape={X.shape} and Y.shape={Y.shape}"
        )
    return X, Y


def _check_value_map(value_map, d, d_out):
    if value_map is None:
        return None
    V = _as_real_array(value_map, "value_map", 2, f"(d, d_out) = ({d}, {d_out})")
    if V.shape != (d, d_out):
        raise ValueError(
            f"value_map must have shape (d, d_out) = ({d}, {d_out}) to match X and "
            f"Y; got shape {V.shape}"
        )
    return V


def _check_ridge(ridge):
    return check_real(ridge, "ridge", 0.0)


def _check_sample_size(system, n_unknowns, n_samples, per_sequence, expression, unit=""):
    """Raise if the system has fewer equations than unknowns.

    ``per_sequence`` is the number of equations one sequence contributes and
    ``expression`` how it is made (e.g. ``"L"``), for the message.
    """
    n_equations = n_samples * per_sequence
    if n_equations >= n_unknowns:
        return n_equations
    needed = math.ceil(n_unknowns / per_sequence)
    if expression:
        detail = f"n_samples * {expression} = {n_samples} * {per_sequence}"
    else:
        detail = f"n_samples = {n_samples}"
    raise ValueError(
        f"the {system} has {n_unknowns} unknowns{unit} but only {n_equations} "
        f"equations ({detail}); it needs at least {needed} sequences"
    )


def _chunks(n):
    for start in range(0, n, _CHUNK):
        yield slice(start, min(start + _CHUNK, n))


# ----------------------------------------------------------------------------
# Shared linear algebra
# ----------------------------------------------------------------------------


def _solve_normal(G, H, ridge):
    """Solve ``(G + ridge * tr(G) / p * I) coef = H``.

    The ridge is relative to the mean eigenvalue ``tr(G) / p`` so that the same
    value means the same amount of regularisation whatever the scale of the
    features. Also returns ``diag`` of the inverse, a function ``root`` with
    ``root(z) ~ N(0, G_reg^-1)`` for standard normal ``z`` (used to simulate
    the estimation noise) and ``roundoff``, a bound on the relative error that
    floating point adds to ``coef``: ``10 eps cond(G_reg)``, with the condition
    number bounded by ``tr(G_reg) tr(G_reg^-1)`` (the product of the squared
    Frobenius norms of the Cholesky factor and its inverse).
    """
    p = G.shape[0]
    G = 0.5 * (G + G.T)  # accumulation roundoff can break exact symmetry
    G_reg = G + (ridge * np.trace(G) / p) * np.eye(p)
    try:
        upper, _ = scipy.linalg.cho_factor(G_reg, lower=False, check_finite=False)
        upper = np.triu(upper)
        coef = scipy.linalg.cho_solve((upper, False), H, check_finite=False)
        # G_reg = U^T U, so U^-1 z has covariance U^-1 U^-T = G_reg^-1.
        U_inv = scipy.linalg.solve_triangular(upper, np.eye(p), check_finite=False)
        diag_inv = np.einsum("ij,ij->i", U_inv, U_inv)

        def root(z):
            return scipy.linalg.solve_triangular(upper, z, check_finite=False)

    except np.linalg.LinAlgError:
        # Singular normal matrix (ridge=0 on degenerate data): minimum-norm solution.
        eigval, eigvec = np.linalg.eigh(G_reg)
        keep = eigval > eigval.max() * p * np.finfo(np.float64).eps
        half = eigvec[:, keep] / np.sqrt(eigval[keep])
        coef = half @ (half.T @ H)
        diag_inv = np.einsum("ij,ij->i", half, half)

        def root(z):
            return half @ z[: half.shape[1]]

    roundoff = 10 * np.finfo(np.float64).eps * np.trace(G_reg) * diag_inv.sum()
    return coef, diag_inv, root, float(roundoff)


def _iid_threshold(residual_variance, diag_inv, m, k):
    """Edge of the singular values of an ``m x k`` matrix of iid estimation noise.

    ``tau = sqrt(sigma^2 mean(diag(G^-1)))`` is the typical standard error of one
    entry of the least-squares estimate; an ``m x k`` matrix of iid entries of
    standard deviation ``tau`` has singular values below about
    ``tau (sqrt(m) + sqrt(k))``.
    """
    tau = math.sqrt(max(residual_variance, 0.0) * float(np.mean(diag_inv)))
    return tau * (math.sqrt(m) + math.sqrt(k))


def _simulated_threshold(root, residual_variance, p, n_targets, to_matrices):
    """Largest top singular value over simulated noise matrices.

    The least-squares error ``coef_hat - coef`` is Gaussian with covariance
    ``sigma^2 G^-1`` (independently for each of the ``n_targets`` right-hand
    sides), so its image as a matrix can be drawn exactly; by Weyl's inequality
    the singular values beyond the true rank are at most the top singular value
    of that noise matrix. A fixed seed keeps fits reproducible.
    """
    rng = np.random.default_rng(_NOISE_SEED)
    z = rng.standard_normal((p, _NOISE_DRAWS * n_targets))
    noise = math.sqrt(max(residual_variance, 0.0)) * root(z)
    noise = noise.reshape(p, _NOISE_DRAWS, n_targets).transpose(1, 0, 2)
    top = np.linalg.svd(to_matrices(noise), compute_uv=False)[:, 0]
    return float(top.max())


def _finish(bunch, matrix, singular_values, threshold, iid_threshold=None, roundoff=0.0):
    s = np.asarray(singular_values, dtype=np.float64)
    # Without noise the statistical threshold falls below the floating-point
    # error of the solve, which would then count as rank: floor it there.
    threshold = max(threshold, roundoff * (s[0] if s.size else 0.0))
    bunch.matrix = matrix
    bunch.singular_values = s
    bunch.noise_threshold = float(threshold)
    if iid_threshold is not None:
        bunch.iid_noise_threshold = float(iid_threshold)
    bunch.noise_aware_rank = int(np.count_nonzero(s > threshold))
    bunch.energy_effective_rank = spectral.energy_effective_rank(s)
    return bunch


# ----------------------------------------------------------------------------
# Fixed operator
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# Linear attention
# ----------------------------------------------------------------------------


def _gram(Xc):
    """``X_n^T X_n`` for a chunk, shape ``(n, d, d)``."""
    # batched matmul: several times faster than einsum's generic path here
    return Xc.transpose(0, 2, 1) @ Xc


def _upper_pairs(d):
    return np.triu_indices(d)


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


def predict_linear_lifted(X, T):
    r"""Predictions of a lifted linear-attention fit.

    Parameters
    ----------
    X : array-like of shape (n_samples, L, d)
        Token sequences.
    T : array-like of shape (d, d (d + 1) / 2, d_out)
        The ``lifted_coef`` of :func:`fit_linear_kernel` with an unknown value
        map.

    Returns
    -------
    Y_pred : ndarray of shape (n_samples, L, d_out)
        :math:`\hat Y_{nie} = \sum_{a,\, b \le c} T_{a,(bc),e}\, X_{nia} M_{n,bc}`
        with ``M_n = X_n^T X_n / L`` and the pairs ``b <= c`` in the row-major
        order of :func:`numpy.triu_indices`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.ones((2, 3, 2))
    >>> T = np.zeros((2, 3, 1)); T[0, 0, 0] = 1.0   # K_00 V_00 = 1
    >>> predict_linear_lifted(X, T)[0, :, 0]
    array([1., 1., 1.])
    """
    X = _as_real_array(X, "X", 3, "(n_samples, seq_len, d)")
    T = _as_real_array(T, "T", 3, "(d, d (d + 1) / 2, d_out)")
    n, L, d = X.shape
    rows, cols = _upper_pairs(d)
    if T.shape[:2] != (d, rows.shape[0]):
        raise ValueError(
            f"T must have shape (d, d (d + 1) / 2, d_out) = ({d}, {rows.shape[0]}, "
            f"d_out) for X of shape {X.shape}; got shape {T.shape}"
        )
    out = np.empty((n, L, T.shape[2]))
    for sl in _chunks(n):
        Xc = X[sl]
        m = _gram(Xc)[:, rows, cols] / L
        # W_n[a, e] = sum_q m_n[q] T[a, q, e]; then Y_n = X_n W_n.
        W = np.einsum("nq,aqe->nae", m, T, optimize=True)
        out[sl] = Xc @ W
    return out


# ----------------------------------------------------------------------------
# Softmax attention
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# Prediction
# ----------------------------------------------------------------------------


def predict(fit, X):
    """Predict targets from any fit of this module.

    Parameters
    ----------
    fit : Bunch
        The result of :func:`fit_fixed_operator`, :func:`fit_linear_kernel` or
        :func:`fit_softmax_kernel`.
    X : array-like of shape (n_samples, L, d)
        Token sequences.

    Returns
    -------
    Y_pred : ndarray of shape (n_samples, L, d_out)
        ``A X V`` (fixed), ``(X K X^T / L) X V`` (linear),
        :func:`predict_linear_lifted` (lifted) or ``softmax(X K X^T) X V``
        (softmax, with the estimated ``K``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.utils import Bunch
    >>> fit = Bunch(kind="fixed", operator=np.eye(2), value_map=np.eye(3))
    >>> predict(fit, np.ones((1, 2, 3))).shape
    (1, 2, 3)
    """
    X = _as_real_array(X, "X", 3, "(n_samples, seq_len, d)")
    kind = fit.get("kind")
    if kind == "linear_lifted":
        return predict_linear_lifted(X, fit.lifted_coef)
    if kind not in ("fixed", "linear", "softmax"):
        raise ValueError(f"unknown fit kind {kind!r}")
    out = np.empty(X.shape[:2] + (fit.value_map.shape[1],))
    for sl in _chunks(X.shape[0]):
        out[sl] = _predict_chunk(fit, X[sl])
    return out


def _predict_chunk(fit, Xc):
    Z = Xc @ fit.value_map
    if fit.kind == "fixed":
        return np.einsum("lk,nke->nle", fit.operator, Z, optimize=True)
    if fit.kind == "linear":
        return attention_mixer(Xc, fit.kernel, "linear") @ Z
    return attention_mixer(Xc, fit.kernel, "softmax") @ Z


def _rss(fit, X, Y):
    """Residual sum of squares, computed from the residuals (not from ``G``, ``h``).

    ``y^T y - 2 theta^T h + theta^T G theta`` would cancel catastrophically for
    small noise; a second pass over the chunks costs only a prediction.
    """
    if fit.kind == "linear_lifted":
        return float(np.sum((Y - predict_linear_lifted(X, fit.lifted_coef)) ** 2))
    rss = 0.0
    for sl in _chunks(X.shape[0]):
        rss += float(np.sum((Y[sl] - _predict_chunk(fit, X[sl])) ** 2))
    return rss
