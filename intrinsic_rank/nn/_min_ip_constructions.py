"""The exact Min-IP heads of the Min-IP paper, as heads with fixed maps.

"Three tokens force exponential feature rank in nonnegative kernel attention":
rank 1 solves Min-IP on one or two tokens (:func:`rank_one_min_ip_head`), dense
softmax with ``m``-dimensional scores solves three (:func:`dense_min_ip_head`,
error below :func:`dense_error_bound`), and a nonnegative kernel with ``2^m``
features (:func:`tensor_product_min_ip_head`) or one feature per token
(:func:`one_hot_min_ip_head`) solves three tokens at every ``m``.
"""

import math

import torch

from .._validation import check_real
from ._kernel_attention import DenseSoftmaxHead, NormalizedKernelHead

__all__ = [
    "rank_one_min_ip_head",
    "dense_min_ip_head",
    "dense_error_bound",
    "tensor_product_min_ip_head",
    "one_hot_min_ip_head",
]


def _ones(X):
    return torch.ones(*X.shape[:-1], 1, dtype=X.dtype, device=X.device)


def _identity(X):
    return X


def _twice(X):
    return 2 * X


def _minus_weight(X):
    return -X.sum(-1)


def _negated(X):
    return -X


def _zero(X):
    return torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)


def rank_one_min_ip_head():
    """The exact rank-1 head for Min-IP on sequences of length 1 and 2.

    Constant features (``phi_Q = phi_K = 1``: rank 1, uniform attention), values
    ``v(x) = x`` and readout ``a(x) = 2x``, ``b(x) = -|x|``. With two tokens,
    ``o_i = (x_i + x_o) / 2`` and ``2 <x_i, o_i> - |x_i| = <x_i, x_o>``, which is
    ``min(|x_i|, <x_i, x_o>)`` since an overlap never exceeds ``|x_i|``; with one
    token it is ``|x_i|``. Exact, with no rounding, for every ``m``.

    Returns
    -------
    head : NormalizedKernelHead

    Examples
    --------
    >>> import torch
    >>> rank_one_min_ip_head()(torch.tensor([[[1.0, 0.0, 1.0]]]))
    tensor([[2.]])
    """
    return NormalizedKernelHead(_ones, _ones, _identity, _twice, _minus_weight)


def dense_min_ip_head(temperature=0.25):
    """The dense softmax head that solves Min-IP at length 3 with constant temperature.

    Scores ``-<x_i, x_j> / T`` (``m``-dimensional: queries ``x``, keys ``-x``),
    values ``v(x) = x``, readout ``<x_i, o_i>``. The output is
    ``sum_j w_ij <x_i, x_j>`` with ``w_ij`` concentrated on the minimising ``j``:
    a rival whose overlap exceeds the minimum by ``g >= 1`` has weight at most
    ``exp(-g / T)`` and adds at most ``g exp(-g / T) <= exp(-1 / T)`` (for
    ``T <= 1``). So the error is below ``(N - 1) exp(-1 / T)`` whatever ``m``:
    with ``T = 0.25`` and ``N = 3`` it is under 0.037, and rounding the output
    gives the exact minimum.

    Parameters
    ----------
    temperature : float, default=0.25
        The fixed temperature ``T`` (``0 < T <= 1``).

    Returns
    -------
    head : DenseSoftmaxHead

    Examples
    --------
    >>> import torch
    >>> dense_min_ip_head()(torch.tensor([[[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])).round()
    tensor([[1., 0., 0.]])
    """
    temperature = check_real(temperature, "temperature", 0, 1, low_open=True)
    return DenseSoftmaxHead(_identity, _negated, _identity, _identity, _zero, temperature)


def dense_error_bound(seq_len, temperature):
    """Worst-case error ``(N - 1) exp(-1 / T)`` of :func:`dense_min_ip_head`.

    Parameters
    ----------
    seq_len : int
        Sequence length ``N``.
    temperature : float
        Temperature ``T`` in ``(0, 1]``.

    Returns
    -------
    bound : float

    Examples
    --------
    >>> round(dense_error_bound(3, 0.25), 4)
    0.0366
    """
    return (seq_len - 1) * math.exp(-1.0 / temperature)


def _tensor_query(X):
    # phi_Q(x) = (x)_{i} (1 - x_i, x_i): the one-hot code of x, 2^m features
    feats = torch.ones(*X.shape[:-1], 1, dtype=X.dtype, device=X.device)
    for i in range(X.shape[-1]):
        bit = X[..., i : i + 1]
        feats = torch.cat([feats * (1 - bit), feats * bit], dim=-1)
    return feats


class _TensorKey:
    def __init__(self, beta):
        self.beta = beta

    def __call__(self, Z):
        # phi_K(z) = (x)_i (1, 1 - z_i + e^{-beta} z_i), so <phi_Q(x), phi_K(z)> = exp(-beta <x,z>)
        decay = math.exp(-self.beta)
        feats = torch.ones(*Z.shape[:-1], 1, dtype=Z.dtype, device=Z.device)
        for i in range(Z.shape[-1]):
            bit = Z[..., i : i + 1]
            feats = torch.cat([feats, feats * (1 - bit + decay * bit)], dim=-1)
        return feats


def tensor_product_min_ip_head(beta=0.9):
    """The ``2^m``-feature nonnegative head that solves Min-IP exactly at every ``m``.

    From ``exp(-beta <x, z>) = prod_i <(1 - x_i, x_i), (1, 1 - z_i + e^{-beta} z_i)>``:
    ``phi_Q(x)`` is the tensor product of the ``(1 - x_i, x_i)`` (the one-hot code
    of ``x``) and ``phi_K(z)`` that of the ``(1, 1 - z_i + e^{-beta} z_i)``, both
    nonnegative with ``2^m`` features; values ``v(z) = z``, readout ``<x_i, o_i>``.
    The output is ``sum_j w_j <x_i, x_j>`` with ``w_j`` proportional to
    ``exp(-beta <x_i, x_j>)``. On three tokens the worst case is two rivals at gap
    2, error ``4 e^{-2 beta} / (1 + 2 e^{-2 beta})``, below 1/2 exactly when
    ``beta > ln sqrt 6 = 0.896``: then rounding gives the exact minimum for every
    ``m`` (tested exhaustively for ``m <= 6``).

    Parameters
    ----------
    beta : float, default=0.9
        Inverse temperature, ``> 0``.

    Returns
    -------
    head : NormalizedKernelHead

    Examples
    --------
    >>> import torch
    >>> head = tensor_product_min_ip_head()
    >>> X = torch.tensor([[[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]]])
    >>> head(X).round(), head.feature_rank(X)
    (tensor([[1., 1., 1.]]), 4)
    """
    beta = check_real(beta, "beta", 0, low_open=True)
    return NormalizedKernelHead(_tensor_query, _TensorKey(beta), _identity, _identity, _zero)


class _OneHotKey:
    def __init__(self, vocabulary):
        self.vocabulary = vocabulary

    def __call__(self, Z):
        match = (Z[..., None, :] == self.vocabulary.to(Z)).all(-1)
        if not bool(match.any(-1).all()):
            raise ValueError("a token is not in the head's vocabulary")
        return match.to(Z.dtype)


class _ExpOverlaps:
    def __init__(self, vocabulary, beta):
        self.vocabulary, self.beta = vocabulary, beta

    def __call__(self, X):
        return torch.exp(-self.beta * X @ self.vocabulary.to(X).T)


def one_hot_min_ip_head(vocabulary, beta=0.9):
    """The one-hot ``u``-feature head: an exact head of feature rank ``u = |vocabulary|``.

    ``phi_K(z) = e_z`` (one-hot over the ``u`` tokens) and
    ``phi_Q(x) = (exp(-beta <x, z>))_z``: the same kernel as
    :func:`tensor_product_min_ip_head`, with ``u`` features instead of ``2^m``.
    This is the upper bound ``r <= u`` for any vocabulary (``u = C(m, w)`` for the
    words of weight ``w``); exact after rounding once ``beta > ln sqrt 6``.

    Parameters
    ----------
    vocabulary : array-like of shape (u, m)
        The distinct tokens.
    beta : float, default=0.9

    Returns
    -------
    head : NormalizedKernelHead

    Examples
    --------
    >>> import torch
    >>> words = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> head = one_hot_min_ip_head(words)
    >>> head(words[None]).round(), head.feature_rank(words[None])
    (tensor([[0., 0., 1.]]), 3)
    """
    vocabulary = torch.as_tensor(vocabulary, dtype=torch.float32)
    if vocabulary.ndim != 2:
        raise ValueError(f"vocabulary must be 2-D (u, m); got shape {tuple(vocabulary.shape)}")
    beta = check_real(beta, "beta", 0, low_open=True)
    return NormalizedKernelHead(_ExpOverlaps(vocabulary, beta), _OneHotKey(vocabulary),
                                _identity, _identity, _zero)
