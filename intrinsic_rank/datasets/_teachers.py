"""Teacher tasks of the Entropic Bound paper (the Entropic Bound paper).

Every generator draws a ground-truth token mixer of known rank ``r*`` and returns
sequences ``X`` of shape ``(n, L, d)`` with per-token targets ``Y`` of shape
``(n, L, d_out)``:

* fixed operator: ``Y = A* X V* + E``
* linear-QK teacher: ``Y = (X K* X^T / L) X V* + E``
* softmax teacher: ``Y = softmax(X K* X^T) X V* + E``

with ``E ~ N(0, noise^2)`` entrywise, so the noise floor (the Bayes risk, in mean
squared error per output entry) is ``noise**2``.

Scaling conventions (chosen so that ``noise`` is an inverse signal-to-noise ratio
whatever the sizes):

* ``X`` has i.i.d. standard normal entries.
* The noise-free signal has unit second moment per output entry,
  ``E[f(X)^2] = 1``. For the fixed operator this holds exactly
  (``||A*||_F^2 = L`` and ``||V*||_F^2 = d_out``); for the attention teachers
  ``V*`` is rescaled on a reference batch of sequences drawn from a dedicated
  random stream, so the teacher does not depend on ``n_samples``.
* ``||K*||_F = kernel_scale``. For isotropic ``X`` a score ``x_i^T K* x_j``
  (``i != j``) then has standard deviation ``kernel_scale``: it sets how sharp
  the softmax teacher is.

Random streams: the operator, the value map, ``X``, the noise and the reference
batch come from separate child seeds, so with the same ``random_state`` a larger
``n_samples`` extends the same data set (the first ``n`` sequences agree).
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, check_random_state, check_real, child_seeds

__all__ = [
    "make_fixed_operator_task",
    "make_attention_task",
    "low_rank_matrix",
]

_KINDS = ("linear", "softmax")
_REFERENCE_SEQUENCES = 2048


def _spectrum_values(spectrum, rank, decay):
    """Singular values of the ground-truth mixer, before normalisation."""
    if isinstance(spectrum, str):
        if spectrum == "equal":
            return np.ones(rank)
        if spectrum == "decaying":
            decay = check_real(decay, "decay", 0, 1, low_open=True)
            return decay ** np.arange(rank, dtype=float)
        raise ValueError(
            f"unknown spectrum {spectrum!r}; use 'equal', 'decaying' or an array "
            f"of {rank} positive singular values"
        )
    values = np.asarray(spectrum, dtype=float)
    if values.shape != (rank,):
        raise ValueError(
            f"spectrum must hold rank={rank} singular values; got shape {values.shape}"
        )
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError("spectrum values must be finite and > 0")
    return np.sort(values)[::-1].copy()


def low_rank_matrix(n_rows, n_cols, singular_values, random_state=None):
    """Draw ``U diag(s) W^T`` with Haar-random orthonormal ``U`` and ``W``.

    Parameters
    ----------
    n_rows, n_cols : int
        Shape of the matrix.
    singular_values : array-like of shape (r,)
        The ``r <= min(n_rows, n_cols)`` nonzero singular values.
    random_state : None, int or numpy.random.RandomState
        Seed of the orthonormal factors.

    Returns
    -------
    matrix : ndarray of shape (n_rows, n_cols)
        A matrix of rank ``r`` whose singular values are ``singular_values``.

    Examples
    --------
    >>> import numpy as np
    >>> M = low_rank_matrix(6, 5, [2.0, 1.0], random_state=0)
    >>> np.round(np.linalg.svd(M, compute_uv=False), 6)
    array([2., 1., 0., 0., 0.])
    """
    s = np.asarray(singular_values, dtype=float)
    r = s.shape[0]
    if r > min(n_rows, n_cols):
        raise ValueError(
            f"rank {r} exceeds min(n_rows, n_cols) = {min(n_rows, n_cols)}"
        )
    rng = check_random_state(random_state)
    u = _orthonormal_columns(n_rows, r, rng)
    w = _orthonormal_columns(n_cols, r, rng)
    return (u * s) @ w.T


def _orthonormal_columns(n, r, rng):
    q, upper = np.linalg.qr(rng.standard_normal((n, r)))
    # Fix the signs so the factor is Haar distributed, not biased by QR's convention.
    return q * np.sign(np.diag(upper))


def _check_common(n_samples, seq_len, d, d_out, rank, noise, max_rank):
    n_samples = check_int(n_samples, "n_samples")
    seq_len = check_int(seq_len, "seq_len")
    d = check_int(d, "d")
    d_out = d if d_out is None else check_int(d_out, "d_out")
    rank = check_int(rank, "rank")
    noise = check_real(noise, "noise", 0.0)
    if rank > max_rank:
        raise ValueError(f"rank must be <= {max_rank} for this task; got {rank}")
    return n_samples, seq_len, d, d_out, rank, noise


def _value_map(d, d_out, seed):
    rng = np.random.RandomState(seed)
    value = rng.standard_normal((d, d_out))
    return value * np.sqrt(d_out) / np.linalg.norm(value)


def make_fixed_operator_task(
    n_samples=2048,
    seq_len=8,
    d=16,
    d_out=None,
    rank=4,
    noise=0.1,
    spectrum="equal",
    decay=0.5,
    random_state=None,
    return_info=False,
):
    """Sequences mixed by one fixed low-rank operator: ``Y = A* X V* + E``.

    The input-independent mixer ``A*`` (``L x L``, rank ``r*``) is the target of the
    linear surrogate, rung B0 of the interpolation ladder (the Entropic Bound paper).

    Parameters
    ----------
    n_samples : int, default=2048
        Number of sequences ``n``.
    seq_len : int, default=8
        Sequence length ``L``.
    d : int, default=16
        Token dimension.
    d_out : int or None, default=None
        Output dimension per token; ``None`` means ``d``.
    rank : int, default=4
        Rank ``r*`` of the operator, ``1 <= rank <= seq_len``.
    noise : float, default=0.1
        Standard deviation ``sigma`` of the Gaussian noise; the noise floor is
        ``sigma**2``.
    spectrum : {"equal", "decaying"} or array-like of shape (rank,), default="equal"
        Singular values of ``A*``: all equal (then every effective rank of ``A*``
        equals ``r*``), geometric ``decay**i``, or given explicitly. They are
        rescaled so that ``||A*||_F^2 = L``.
    decay : float, default=0.5
        Ratio of consecutive singular values for ``spectrum="decaying"``.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed; the same seed gives the same task and data.
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` with the ground truth.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, d)
        Standard normal token sequences.
    Y : ndarray of shape (n_samples, seq_len, d_out)
        Noisy per-token targets.
    info : Bunch, only if ``return_info``
        ``operator`` (``A*``), ``value_map`` (``V*``), ``rank``,
        ``singular_values``, ``noise_floor`` (``noise**2``), ``kind="fixed"``.

    Examples
    --------
    >>> X, Y, info = make_fixed_operator_task(
    ...     n_samples=100, seq_len=6, d=4, rank=2, random_state=0, return_info=True)
    >>> X.shape, Y.shape, info.rank, info.noise_floor
    ((100, 6, 4), (100, 6, 4), 2, 0.01...)
    """
    n_samples, seq_len, d, d_out, rank, noise = _check_common(
        n_samples, seq_len, d, d_out, rank, noise, max_rank=seq_len
    )
    s = _spectrum_values(spectrum, rank, decay)
    s = s * np.sqrt(seq_len) / np.linalg.norm(s)
    op_seed, value_seed, x_seed, noise_seed = child_seeds(random_state, 4)
    operator = low_rank_matrix(seq_len, seq_len, s, random_state=op_seed)
    value = _value_map(d, d_out, value_seed)
    X = np.random.RandomState(x_seed).standard_normal((n_samples, seq_len, d))
    signal = np.einsum("lk,nkd,de->nle", operator, X, value, optimize=True)
    Y = signal + noise * np.random.RandomState(noise_seed).standard_normal(signal.shape)
    if not return_info:
        return X, Y
    info = Bunch(
        kind="fixed",
        operator=operator,
        value_map=value,
        rank=rank,
        singular_values=s,
        noise=noise,
        noise_floor=noise**2,
    )
    return X, Y, info


def attention_mixer(X, kernel, kind):
    """Realised mixer ``M(X)`` of a query-key kernel ``K``.

    Parameters
    ----------
    X : ndarray of shape (n, L, d)
        Token sequences.
    kernel : ndarray of shape (d, d)
        Query-key kernel ``K = W_Q W_K^T``.
    kind : {"linear", "softmax"}
        ``"linear"``: ``M = X K X^T / L``; ``"softmax"``: row-wise
        ``softmax(X K X^T)``.

    Returns
    -------
    mixer : ndarray of shape (n, L, L)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.ones((1, 2, 3))
    >>> attention_mixer(X, np.zeros((3, 3)), "softmax")
    array([[[0.5, 0.5],
            [0.5, 0.5]]])
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; use one of {_KINDS}")
    scores = np.einsum("nid,de,nje->nij", X, kernel, X, optimize=True)
    if kind == "linear":
        return scores / X.shape[1]
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def make_attention_task(
    kind="linear",
    n_samples=2048,
    seq_len=8,
    d=16,
    d_out=None,
    rank=4,
    noise=0.1,
    spectrum="equal",
    decay=0.5,
    kernel_scale=2.0,
    random_state=None,
    return_info=False,
):
    """A teacher generated inside the attention class, with a rank-``r*`` QK kernel.

    ``Y = M*(X) X V* + E`` with ``M*(X) = X K* X^T / L`` (``kind="linear"``) or
    ``softmax(X K* X^T)`` (``kind="softmax"``): the tasks on which the
    attention-native intrinsic rank ``r*_attn`` is defined (the Entropic Bound paper).

    Parameters
    ----------
    kind : {"linear", "softmax"}, default="linear"
        Attention family of the teacher.
    n_samples : int, default=2048
        Number of sequences.
    seq_len : int, default=8
        Sequence length ``L``.
    d : int, default=16
        Token dimension.
    d_out : int or None, default=None
        Output dimension per token; ``None`` means ``d``.
    rank : int, default=4
        Rank ``r*`` of the kernel ``K*``, ``1 <= rank <= d``.
    noise : float, default=0.1
        Noise standard deviation; the noise floor is ``noise**2``.
    spectrum : {"equal", "decaying"} or array-like of shape (rank,), default="equal"
        Singular values of ``K*`` (see :func:`make_fixed_operator_task`).
    decay : float, default=0.5
        Ratio of consecutive singular values for ``spectrum="decaying"``.
    kernel_scale : float, default=2.0
        Frobenius norm of ``K*``; for standard normal tokens it is the standard
        deviation of an attention score, so it sets how sharp a softmax teacher
        is. It does not change the linear teacher beyond the output scale, which
        is normalised away.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed; the same seed gives the same task and data.
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` with the ground truth.

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len, d)
    Y : ndarray of shape (n_samples, seq_len, d_out)
    info : Bunch, only if ``return_info``
        ``kernel`` (``K*``), ``value_map`` (``V*``), ``rank``,
        ``singular_values``, ``kernel_scale``, ``noise_floor``, ``kind``.

    Examples
    --------
    >>> X, Y, info = make_attention_task(
    ...     "softmax", n_samples=50, seq_len=4, d=8, rank=3, random_state=0,
    ...     return_info=True)
    >>> Y.shape, info.kernel.shape, int(np.linalg.matrix_rank(info.kernel))
    ((50, 4, 8), (8, 8), 3)
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown teacher kind {kind!r}; use one of {_KINDS}")
    n_samples, seq_len, d, d_out, rank, noise = _check_common(
        n_samples, seq_len, d, d_out, rank, noise, max_rank=d
    )
    kernel_scale = check_real(kernel_scale, "kernel_scale", 0.0)
    if kernel_scale == 0:
        raise ValueError("kernel_scale must be > 0")
    s = _spectrum_values(spectrum, rank, decay)
    s = s * kernel_scale / np.linalg.norm(s)
    k_seed, value_seed, x_seed, noise_seed, ref_seed = child_seeds(random_state, 5)
    kernel = low_rank_matrix(d, d, s, random_state=k_seed)
    value = _value_map(d, d_out, value_seed)

    def signal_of(tokens, value_map):
        return attention_mixer(tokens, kernel, kind) @ tokens @ value_map

    reference = np.random.RandomState(ref_seed).standard_normal(
        (_REFERENCE_SEQUENCES, seq_len, d)
    )
    value = value / np.sqrt(np.mean(signal_of(reference, value) ** 2))
    X = np.random.RandomState(x_seed).standard_normal((n_samples, seq_len, d))
    signal = signal_of(X, value)
    Y = signal + noise * np.random.RandomState(noise_seed).standard_normal(signal.shape)
    if not return_info:
        return X, Y
    info = Bunch(
        kind=kind,
        kernel=kernel,
        value_map=value,
        rank=rank,
        singular_values=s,
        kernel_scale=kernel_scale,
        noise=noise,
        noise_floor=noise**2,
    )
    return X, Y, info
