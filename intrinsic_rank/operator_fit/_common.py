"""What the three fits share: input checks, chunks, the normal equations, the noise threshold.

NumPy and SciPy only (no torch).
"""

import math

import numpy as np
import scipy.linalg

from .. import spectral
from .._validation import check_real

# Sequences per chunk: bounds the temporary arrays (the lifted system's largest
# is chunk * (d (d + 1) / 2)^2 floats, 76 MB at d = 16) while keeping the
# GEMMs large enough to run at full speed.
_CHUNK = 512
# Simulated noise matrices behind each noise threshold: their largest top
# singular value is about the 98.5% quantile of the noise's top singular value.
_NOISE_DRAWS = 64
_NOISE_SEED = 0


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
