"""Normalised nonnegative kernel attention and dense softmax attention (seed 003).

A normalised nonnegative kernel-attention head of feature rank ``r`` (SPEC
section 3) computes, for each position ``i``,

``o_i = sum_j alpha(x_i, x_j) v(x_j) / sum_j alpha(x_i, x_j)``,
``alpha(x, z) = <phi_Q(x), phi_K(z)> >= 0``, ``phi_Q, phi_K : R^m -> R^r_{>=0}``,

then an arbitrary query-dependent affine readout ``y_i = a(x_i) . o_i + b(x_i)``.
Dense softmax attention replaces ``alpha`` by ``exp(<W_Q x_i, W_K x_j> / T)`` with
``m``-dimensional scores and a fixed temperature ``T``.

The trainable students here follow the rank-batched convention of
:mod:`intrinsic_rank.nn._students` (a leading rank axis, masked feature columns),
so ``AttentionRankEstimator(attention="kernel")`` sweeps feature ranks in one
optimisation. The exact constructions of the paper are explicit heads with fixed
maps, sharing :func:`normalized_kernel_attention` with the students.
"""

import math

import torch
from torch import nn

from .._validation import check_real
from ._students import RankBatchedStudent, _QueryKeyMixin, row_softmax

__all__ = [
    "normalized_kernel_attention",
    "KernelAttentionStudent",
    "DenseAttentionStudent",
    "NormalizedKernelHead",
    "DenseSoftmaxHead",
    "rank_one_min_ip_head",
    "dense_min_ip_head",
    "dense_error_bound",
]

# exp of a clamped logit keeps the features positive and finite in float32
_LOGIT_CLAMP = 20.0
# the kernel's largest realisable rank: 2^m features represent any kernel on
# {0,1}^m exactly, so more is never needed; capped to keep the module finite
_MAX_FEATURE_RANK = 4096


def normalized_kernel_attention(query_features, key_features, values):
    """``o_i = sum_j <phi_Q(x_i), phi_K(x_j)> v_j / sum_j <phi_Q(x_i), phi_K(x_j)>``.

    Parameters
    ----------
    query_features, key_features : torch.Tensor of shape (..., L, r)
        Nonnegative feature maps of the tokens.
    values : torch.Tensor of shape (..., L, e)

    Returns
    -------
    outputs : torch.Tensor of shape (..., L, e)

    Examples
    --------
    >>> import torch
    >>> ones = torch.ones(1, 2, 1)
    >>> normalized_kernel_attention(ones, ones, torch.tensor([[[0.0], [2.0]]]))
    tensor([[[1.],
             [1.]]])
    """
    weights = query_features @ key_features.transpose(-1, -2)
    # the tiny floor only guards all-zero rows (every feature masked or underflowed)
    return (weights @ values) / weights.sum(-1, keepdim=True).clamp_min(1e-30)


class _MinIPReadoutMixin:
    """Token encoder, values and the query-dependent affine readout, per rank slot."""

    def _add_encoder_values_readout(self, in_dim):
        h, e = self.hidden, self.value_dim
        self._add_parameter("encoder", (in_dim, h), "standard", in_dim)
        self._add_parameter("encoder_bias", (h,), "zeros")
        self._add_parameter("value", (h, e), "standard", h)
        self._add_parameter("value_bias", (e,), "zeros")
        self._add_parameter("readout_weight", (h, e * self.d_out), "standard", h)
        self._add_parameter("readout_weight_bias", (e * self.d_out,), "ones")
        self._add_parameter("readout_bias", (h, self.d_out), "standard", h)
        self._add_parameter("readout_bias_bias", (self.d_out,), "zeros")

    def _tokens(self, X):
        if not self.positional:
            return X
        n, L, _ = X.shape
        positions = torch.eye(L, dtype=X.dtype, device=X.device).expand(n, L, L)
        return torch.cat([X, positions], dim=-1)

    def _encode(self, X):
        return self._encode_inputs(self._tokens(X))

    def _encode_inputs(self, inputs):
        return torch.nn.functional.gelu(
            torch.einsum("nld,rdh->nrlh", inputs, self.encoder) + self.encoder_bias[:, None, :]
        )

    def _readout(self, h, mixed):
        # y_i = a(x_i) . o_i + b(x_i): a and b are functions of the query token only
        n, R, L, e = mixed.shape
        a = torch.einsum("nrlh,rhk->nrlk", h, self.readout_weight) + self.readout_weight_bias[:, None, :]
        a = a.view(n, R, L, e, self.d_out)
        b = torch.einsum("nrlh,rhk->nrlk", h, self.readout_bias) + self.readout_bias_bias[:, None, :]
        return torch.einsum("nrle,nrlek->nrlk", mixed, a) + b

    def _values(self, h):
        return torch.einsum("nrlh,rhe->nrle", h, self.value) + self.value_bias[:, None, :]


class KernelAttentionStudent(_MinIPReadoutMixin, RankBatchedStudent):
    """Normalised nonnegative kernel attention of feature rank ``r``, batched over ranks.

    ``phi_Q(x) = exp(H(x) W_Q + c_Q)`` and ``phi_K(x) = exp(H(x) W_K + c_K)`` (``r``
    positive features each, logits clamped to +-20), with ``H(x) = GELU(x W_E + c_E)``
    a token encoder; values ``v(x) = H(x) W_V + c_V``; readout
    ``y_i = a(x_i) . o_i + b(x_i)`` with ``a`` and ``b`` affine in ``H(x_i)``.
    Features beyond a slot's rank are masked to zero, which keeps the kernel
    nonnegative and of feature rank at most ``r``.

    Parameters
    ----------
    d, d_out, ranks, seq_len, init_scale, random_state, final_only
        See :class:`~intrinsic_rank.nn.RankBatchedStudent`; ``d`` is the number of
        bits ``m``. Feature ranks go up to ``min(2^m, 4096)``.
    hidden : int, default=64
        Width of the token encoder ``H``.
    value_dim : int or None, default=None
        Dimension of the values (``None``: ``hidden``).
    positional : bool, default=False
        Position-dependent maps: a one-hot position is appended to every token
        before encoding (needs ``seq_len``).

    Examples
    --------
    >>> import torch
    >>> student = KernelAttentionStudent(d=6, d_out=1, ranks=[1, 4], hidden=8)
    >>> student(torch.randint(0, 2, (5, 3, 6)).float()).shape
    torch.Size([5, 2, 3, 1])
    >>> bool((student.attention_weights(torch.ones(1, 3, 6)) >= 0).all())
    True
    """

    def __init__(self, d, d_out, ranks, hidden=64, value_dim=None, positional=False, **kwargs):
        self.hidden = int(hidden)
        self.value_dim = self.hidden if value_dim is None else int(value_dim)
        self.positional = bool(positional)
        if self.positional and kwargs.get("seq_len") is None:
            raise ValueError("positional=True needs seq_len")
        super().__init__(d, d_out, ranks, **kwargs)

    @classmethod
    def rank_limit(cls, d, seq_len=None):
        """``2^m`` features realise any kernel on ``{0,1}^m``; capped at 4096."""
        return min(2 ** min(int(d), 12), _MAX_FEATURE_RANK)

    def token_kernel(self, tokens):
        """The kernel ``alpha(t_a, t_b)`` between given tokens, per slot ``(R, T, T)``.

        Its rank is at most each slot's feature rank. Position-dependent maps are
        evaluated at position 0.

        Parameters
        ----------
        tokens : torch.Tensor of shape (T, m)

        Returns
        -------
        kernel : torch.Tensor of shape (R, T, T)
        """
        inputs = tokens.unsqueeze(0)
        if self.positional:
            first = torch.zeros(1, tokens.shape[0], self.seq_len, dtype=inputs.dtype,
                                device=inputs.device)
            first[..., 0] = 1.0
            inputs = torch.cat([inputs, first], dim=-1)
        h = self._encode_inputs(inputs)
        phi_q, phi_k = self._features(h, "query_map"), self._features(h, "key_map")
        return (phi_q @ phi_k.transpose(-1, -2))[0]

    def build(self):
        in_dim = self.d + (self.seq_len if self.positional else 0)
        self._add_encoder_values_readout(in_dim)
        for name in ("query_map", "key_map"):
            self._add_parameter(name, (self.hidden, self.r_max), "normal", self.hidden, ranked=True)
            self._add_parameter(f"{name}_bias", (self.r_max,), "zeros", ranked=True)

    def _features(self, h, name):
        logits = torch.einsum("nrlh,rhk->nrlk", h, getattr(self, name))
        logits = logits + getattr(self, f"{name}_bias")[:, None, :]
        features = torch.exp(logits.clamp(-_LOGIT_CLAMP, _LOGIT_CLAMP))
        return features * self.rank_mask[None, :, None, :]

    def attention_weights(self, X):
        """Unnormalised kernel ``alpha(x_i, x_j) >= 0`` of every slot, ``(n, R, L, L)``."""
        h = self._encode(X)
        return self._features(h, "query_map") @ self._features(h, "key_map").transpose(-1, -2)

    def mixer(self, X):
        weights = self.attention_weights(X)
        return weights / weights.sum(-1, keepdim=True).clamp_min(1e-30)

    def _sequence_output(self, X):
        h = self._encode(X)
        mixed = normalized_kernel_attention(
            self._features(h, "query_map"), self._features(h, "key_map"), self._values(h)
        )
        return self._readout(h, mixed)


class DenseAttentionStudent(_MinIPReadoutMixin, _QueryKeyMixin, RankBatchedStudent):
    """Dense softmax attention with ``r``-dimensional scores and a fixed temperature.

    ``weights_ij = softmax_j(<x_i W_Q, x_j W_K> / T)`` on the raw tokens (with
    ``r = m`` these are the paper's ``m``-dimensional scores), values and readout
    as in :class:`KernelAttentionStudent`.

    Parameters
    ----------
    d, d_out, ranks, seq_len, init_scale, random_state, final_only
        See :class:`~intrinsic_rank.nn.RankBatchedStudent`.
    hidden, value_dim, positional
        See :class:`KernelAttentionStudent`.
    temperature : float, default=0.25
        Fixed softmax temperature ``T``.

    Examples
    --------
    >>> import torch
    >>> student = DenseAttentionStudent(d=6, d_out=1, ranks=[6], hidden=8)
    >>> student(torch.randint(0, 2, (5, 3, 6)).float()).shape
    torch.Size([5, 1, 3, 1])
    """

    def __init__(self, d, d_out, ranks, hidden=64, value_dim=None, positional=False,
                 temperature=0.25, **kwargs):
        self.hidden = int(hidden)
        self.value_dim = self.hidden if value_dim is None else int(value_dim)
        self.positional = bool(positional)
        self.temperature = check_real(temperature, "temperature")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature}")
        super().__init__(d, d_out, ranks, **kwargs)

    def build(self):
        in_dim = self.d + (self.seq_len if self.positional else 0)
        self._add_encoder_values_readout(in_dim)
        self._add_query_key()

    def mixer(self, X):
        return row_softmax(self._scores(X) / self.temperature)

    def _sequence_output(self, X):
        h = self._encode(X)
        return self._readout(h, self.mixer(X) @ self._values(h))


class NormalizedKernelHead(nn.Module):
    """A normalised nonnegative kernel head with explicit (fixed) maps.

    ``y_i = <a(x_i), o_i> + b(x_i)``, ``o_i`` from :func:`normalized_kernel_attention`.

    Parameters
    ----------
    query_features, key_features : callable
        ``(n, L, m) -> (n, L, r)`` nonnegative feature maps.
    values : callable
        ``(n, L, m) -> (n, L, e)``.
    readout_weight : callable
        ``(n, L, m) -> (n, L, e)``: the query-dependent ``a(x_i)``.
    readout_bias : callable
        ``(n, L, m) -> (n, L)``: the query-dependent ``b(x_i)``.

    Examples
    --------
    >>> import torch
    >>> head = rank_one_min_ip_head()
    >>> head(torch.tensor([[[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]]))
    tensor([[1., 1.]])
    """

    def __init__(self, query_features, key_features, values, readout_weight, readout_bias):
        super().__init__()
        self.query_features = query_features
        self.key_features = key_features
        self.values = values
        self.readout_weight = readout_weight
        self.readout_bias = readout_bias

    def feature_rank(self, X):
        """Number of features ``r`` the maps produce on ``X``."""
        return self.query_features(X).shape[-1]

    def forward(self, X):
        """Per-position outputs ``(n, L)``."""
        phi_q, phi_k = self.query_features(X), self.key_features(X)
        if (phi_q < 0).any() or (phi_k < 0).any():
            raise ValueError("feature maps must be nonnegative")
        mixed = normalized_kernel_attention(phi_q, phi_k, self.values(X))
        return (self.readout_weight(X) * mixed).sum(-1) + self.readout_bias(X)


class DenseSoftmaxHead(nn.Module):
    """Dense softmax attention with explicit maps: scores ``<q(x_i), k(x_j)> / T``.

    Parameters
    ----------
    queries, keys, values, readout_weight : callable
        ``(n, L, m) -> (n, L, .)`` maps (scores are ``m``-dimensional when
        ``queries`` and ``keys`` return ``m`` columns).
    readout_bias : callable
        ``(n, L, m) -> (n, L)``.
    temperature : float
        Fixed temperature ``T``.

    Examples
    --------
    >>> import torch
    >>> head = dense_min_ip_head()
    >>> X = torch.tensor([[[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]])
    >>> head(X).round()  # min_j <x_i, x_j> at each position
    tensor([[1., 0., 0.]])
    """

    def __init__(self, queries, keys, values, readout_weight, readout_bias, temperature):
        super().__init__()
        self.queries, self.keys, self.values = queries, keys, values
        self.readout_weight, self.readout_bias = readout_weight, readout_bias
        self.temperature = float(temperature)

    def forward(self, X):
        """Per-position outputs ``(n, L)``."""
        scores = self.queries(X) @ self.keys(X).transpose(-1, -2) / self.temperature
        mixed = row_softmax(scores) @ self.values(X)
        return (self.readout_weight(X) * mixed).sum(-1) + self.readout_bias(X)


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
    token it is ``|x_i|``. Exact, with no rounding, for every ``m`` (seed 003).

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
