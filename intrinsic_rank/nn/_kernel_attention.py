"""Normalised nonnegative kernel attention and dense softmax attention (seed 003).

A normalised nonnegative kernel-attention head of feature rank ``r`` (the Min-IP
paper) computes, for each position ``i``,

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

from .._validation import check_int, check_real, keyed_seed
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
    "FEATURE_MAPS",
    "KERNEL_STUDENT_MAPS",
    "TripleAttentionHead",
    "fit_triple_heads",
    "tensor_product_min_ip_head",
    "one_hot_min_ip_head",
]

#: The nonnegative feature maps of :class:`KernelAttentionStudent` (and so of
#: ``AttentionRankEstimator(attention="kernel", feature_map=...)``): ``"exp"`` (the
#: default), ``"elu+1"`` (linear transformers) and ``"relu"``.
KERNEL_STUDENT_MAPS = ("exp", "elu+1", "relu")
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
    feature_map : {"exp", "elu+1", "relu"}, default="exp"
        The nonnegative map applied to the logits ``H(x) W + c``: ``exp`` (the
        default, unchanged), ``elu(.) + 1`` (linear transformers) or ``relu``.
        All keep the kernel nonnegative of feature rank at most ``r``; through
        the estimator, ``AttentionRankEstimator(attention="kernel",
        feature_map="elu+1")``.

    Examples
    --------
    >>> import torch
    >>> student = KernelAttentionStudent(d=6, d_out=1, ranks=[1, 4], hidden=8)
    >>> student(torch.randint(0, 2, (5, 3, 6)).float()).shape
    torch.Size([5, 2, 3, 1])
    >>> bool((student.attention_weights(torch.ones(1, 3, 6)) >= 0).all())
    True
    >>> relu = KernelAttentionStudent(d=6, d_out=1, ranks=[2], hidden=8, feature_map="relu")
    >>> bool((relu.attention_weights(torch.ones(1, 3, 6)) >= 0).all())
    True
    """

    def __init__(self, d, d_out, ranks, hidden=64, value_dim=None, positional=False,
                 feature_map="exp", **kwargs):
        if feature_map not in KERNEL_STUDENT_MAPS:
            raise ValueError(f"unknown feature_map {feature_map!r}; use one of "
                             f"{list(KERNEL_STUDENT_MAPS)}")
        self.feature_map = feature_map
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
        if self.feature_map == "exp":
            features = torch.exp(logits.clamp(-_LOGIT_CLAMP, _LOGIT_CLAMP))
        elif self.feature_map == "elu+1":
            features = torch.nn.functional.elu(logits) + 1.0
        else:
            features = torch.relu(logits)
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


# -- the exhaustive Min-IP law: heads on (query, other tokens) triples --------------------

FEATURE_MAPS = {
    "exp": (True, "learned exponential map exp(H W + c) (the students' map)"),
    "elu+1": (True, "elu(H W + c) + 1 (linear transformers)"),
    "relu": (True, "relu(H W + c)"),
    "favor+": (True, "positive random features exp(w_k . u - |u|^2 / 2) / sqrt(r), "
                     "u = H W, w_k fixed Gaussian (Performer FAVOR+)"),
    "hedgehog": (True, "learned exponential of an affine map of the raw bits: "
                       "[exp(x W + c), exp(-(x W + c))] (Hedgehog-style)"),
    "taylor": (False, "2nd-order Taylor map [1, u, vec(u u^T) / sqrt 2], u = H W "
                      "(Based): signed features; the kernel 1 + t + t^2 / 2, t = <u, u'>, "
                      "is positive-valued but not a nonnegative-feature kernel of rank r"),
    "signed": (False, "learned signed linear map H W + c (no sign constraint)"),
}
"""Feature maps of :class:`TripleAttentionHead`: name -> (nonnegative?, description).

The theorem (seed 003) covers the nonnegative maps; ``"taylor"`` and ``"signed"``
have signed features, the paper's "signed kernel" loophole (``"signed"`` gives
kernels of either sign; ``"taylor"``'s kernel values are positive, its features
are not). For ``"taylor"`` a slot of rank ``r`` uses the largest ``d`` with
``1 + d + d^2 <= r`` features' worth of input, so ranks 1 and 2 are constant
(rank-1) kernels. With the free token table (``encoder="table"``) every
map whose input is the table code realises any ``r``-column positive feature
matrix on up to ``hidden`` tokens (``exp``, ``elu+1``; ``relu`` any nonnegative
one), so these differ only in how they train; ``"favor+"`` (features
of an 8-dimensional code) and ``"hedgehog"`` (exponentials of affine functions
of the raw bits) are structurally restricted.
"""

_FAVOR_DIM = 8


def _taylor_dim(rank):
    """Largest ``d`` with ``1 + d + d^2 <= rank`` (the Taylor map's input width)."""
    d = 0
    while 1 + (d + 1) + (d + 1) ** 2 <= rank:
        d += 1
    return d


class TripleAttentionHead(nn.Module):
    """Normalised kernel (or dense softmax) heads on exhaustive Min-IP triples.

    Batched over slots: slot ``s`` has its own feature rank ``ranks[s]`` and seed
    ``seeds[s]``; slots are independent (the loss is their sum). The input is a
    batch of triples of token indices into a fixed vocabulary ``tokens``: column 0
    is the query ``x_i``, the others the other tokens of the sequence. The head
    attends over the whole sequence (the query included) and answers at the query:

    ``y = sum_h a_h(x_i) . o_h + b(x_i)``, ``o_h = sum_j alpha_h(x_i, x_j) v_h(x_j) /
    sum_j alpha_h(x_i, x_j)``, ``alpha_h(x, z) = <phi_Q,h(x), phi_K,h(z)>``,

    with ``n_heads`` heads of feature rank ``r`` each. With ``encoder="table"`` the
    token code ``H(x)`` is a free table (one row per token), so the values, the
    readout and the maps' inputs are arbitrary functions of the token and the
    feature rank is the only restriction -- the theorem's setting. With
    ``attention="dense"`` the weights are ``softmax_j(<x_i W_Q, x_j W_K> / T)`` on
    the raw bits (``m``-dimensional scores, fixed ``T``).

    Parameters
    ----------
    tokens : array-like of shape (V, m)
        The vocabulary (0/1 words).
    ranks : sequence of int
        Feature rank of each slot, ``1 <= r <= V`` (``V = 2^m`` for the full cube:
        ``V`` features realise any kernel on the vocabulary).
    seeds : sequence of int
        Seed of each slot (same length as ``ranks``).
    feature_map : str, default="exp"
        One of :data:`FEATURE_MAPS`.
    n_heads : int, default=1
        Heads of rank ``r`` each, summed in the readout.
    hidden : int, default=32
        Width of the token code ``H``.
    encoder : {"table", "mlp"}, default="table"
        ``H(x)`` a free table, or ``GELU(x W + c)``.
    attention : {"kernel", "dense"}, default="kernel"
    temperature : float, default=0.25
        Temperature of the dense head.
    init_scale : float, default=0.3
        Standard deviation of the initial token table (``encoder="table"``; the
        MLP encoder's first layer is scaled by it over ``sqrt(m)``). A table
        drawn at scale 1 starts the exponential maps in a rugged region where
        Adam stalls or spikes; 0.3 trains several times faster (docs/min_ip.md).
    feature_bias : float, default=0.0
        Initial value of the maps' biases ``c``. A signed map started at 0 has a
        kernel of random sign whose normalising sums cross zero, and training
        diverges; started at 1 (``<phi_Q, phi_K>`` about ``r``, positive) it trains
        like the nonnegative maps, and its kernel may turn signed as it learns.
        :func:`~intrinsic_rank.experiments.min_ip_rank_law` uses 1 for ``"signed"``.

    Examples
    --------
    >>> import torch
    >>> from intrinsic_rank.datasets import min_ip_exhaustive_triples
    >>> data = min_ip_exhaustive_triples(2, 3)
    >>> head = TripleAttentionHead(data.tokens, ranks=[1, 4], seeds=[0, 0])
    >>> head(torch.as_tensor(data.triples)).shape
    torch.Size([2, 40])
    """

    def __init__(self, tokens, ranks, seeds, feature_map="exp", n_heads=1, hidden=32,
                 encoder="table", attention="kernel", temperature=0.25, init_scale=0.3,
                 feature_bias=0.0):
        super().__init__()
        tokens = torch.as_tensor(tokens, dtype=torch.float32)
        if tokens.ndim != 2 or tokens.shape[0] < 1:
            raise ValueError(f"tokens must be a 2-D (V, m) array; got shape {tuple(tokens.shape)}")
        if attention not in ("kernel", "dense"):
            raise ValueError(f"unknown attention {attention!r}; use 'kernel' or 'dense'")
        if attention == "kernel" and feature_map not in FEATURE_MAPS:
            raise ValueError(f"unknown feature_map {feature_map!r}; use one of {list(FEATURE_MAPS)}")
        if encoder not in ("table", "mlp"):
            raise ValueError(f"unknown encoder {encoder!r}; use 'table' or 'mlp'")
        ranks, seeds = [int(r) for r in ranks], [int(s) for s in seeds]
        if not ranks or len(ranks) != len(seeds):
            raise ValueError(f"ranks and seeds must be non-empty and of one length; got "
                             f"{len(ranks)} ranks and {len(seeds)} seeds")
        V, m = tokens.shape
        bad = [r for r in ranks if not 1 <= r <= V]
        if attention == "kernel" and bad:
            raise ValueError(f"ranks must be in 1..{V} (the vocabulary size; {V} features "
                             f"realise any kernel on it); got {bad}")
        self.register_buffer("tokens", tokens)
        self.ranks, self.seeds = ranks, seeds
        self.feature_map, self.attention, self.encoder = feature_map, attention, encoder
        self.n_heads, self.hidden = check_int(n_heads, "n_heads", 1), check_int(hidden, "hidden", 1)
        self.temperature = check_real(temperature, "temperature", 0, low_open=True)
        self.init_scale = check_real(init_scale, "init_scale", 0, low_open=True)
        self.feature_bias = check_real(feature_bias, "feature_bias")
        self.nonnegative = attention == "dense" or FEATURE_MAPS[feature_map][0]
        S, h, H = len(ranks), self.n_heads, self.hidden
        self.r_max = max(ranks) if attention == "kernel" else m
        if feature_map == "taylor":
            self.u_dim = max(_taylor_dim(r) for r in ranks)
        elif feature_map == "favor+":
            self.u_dim = _FAVOR_DIM
        else:
            self.u_dim = self.r_max
        in_map = m if feature_map == "hedgehog" else H
        shapes = {
            "value": (h, H, H), "readout": (h, H, H), "bias": (H,), "bias0": (),
        }
        shapes["embed"] = (V, H) if encoder == "table" else (m, H)
        shapes["embed_bias"] = (H,)
        if attention == "dense":
            shapes.update(score_q=(h, m, m), score_k=(h, m, m))
        else:
            for side in ("q", "k"):
                shapes[f"map_{side}"] = (h, in_map, self.u_dim)
                shapes[f"map_{side}_bias"] = (h, self.u_dim)
        self._shapes = shapes
        for name, shape in shapes.items():
            self.register_parameter(name, nn.Parameter(torch.zeros(S, *shape)))
        if attention == "kernel" and feature_map == "favor+":
            self.register_buffer("omega", torch.zeros(S, h, self.r_max, self.u_dim))
        mask = torch.zeros(S, self.r_max if feature_map != "taylor" else self.u_dim)
        for s, r in enumerate(ranks):
            mask[s, : (_taylor_dim(r) if feature_map == "taylor" else r)] = 1.0
        self.register_buffer("mask", mask)
        self._slots = None
        for s in range(S):
            self.reset_slot(s, seeds[s])

    @torch.no_grad()
    def reset_slot(self, slot, seed):
        """Re-draw the parameters of one slot from ``seed`` (a restart)."""
        gen = torch.Generator().manual_seed(keyed_seed(int(seed), self.ranks[slot], self.n_heads))
        m, H = self.tokens.shape[1], self.hidden
        for name, shape in self._shapes.items():
            if name in ("map_q_bias", "map_k_bias"):
                value = torch.full(shape, self.feature_bias)
            elif name in ("bias0", "embed_bias"):
                value = torch.zeros(shape)
            else:
                fan_in = {"embed": 1 if self.encoder == "table" else m}.get(
                    name, shape[-2] if len(shape) > 1 else shape[0])
                if name in ("score_q", "score_k"):
                    fan_in = m
                value = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
                if name == "embed":
                    value = value * self.init_scale
            getattr(self, name)[slot].copy_(value.to(self.tokens.device))
        if hasattr(self, "omega"):
            self.omega[slot].copy_(torch.randn(self.omega.shape[1:], generator=gen).to(self.omega.device))

    def _p(self, name):
        # a parameter or buffer, restricted to the slots of the running forward
        value = getattr(self, name)
        return value if self._slots is None else value[self._slots]

    def _code(self):
        if self.encoder == "table":
            pre = self._p("embed")
        else:
            pre = torch.einsum("vm,smh->svh", self.tokens, self._p("embed"))
        return torch.nn.functional.gelu(pre + self._p("embed_bias")[:, None, :])  # (S, V, H)

    def _features(self, code, side):
        weight, bias = self._p(f"map_{side}"), self._p(f"map_{side}_bias")
        fmap = self.feature_map
        if fmap == "hedgehog":
            u = torch.einsum("vm,shmk->shvk", self.tokens, weight) + bias[:, :, None, :]
        else:
            u = torch.einsum("svi,shik->shvk", code, weight) + bias[:, :, None, :]
        mask = self._p("mask")[:, None, None, :]
        if fmap == "exp":
            return torch.exp(u.clamp(-_LOGIT_CLAMP, _LOGIT_CLAMP)) * mask
        if fmap == "elu+1":
            return (torch.nn.functional.elu(u) + 1.0) * mask
        if fmap == "relu":
            return torch.relu(u) * mask
        if fmap == "signed":
            return u * mask
        if fmap == "hedgehog":
            half = (torch.arange(self.r_max, device=u.device) % 2 == 0).to(u.dtype)
            sign = 2 * half - 1  # +, -, +, -, ...: the pairs exp(z), exp(-z)
            return torch.exp((sign * u).clamp(-_LOGIT_CLAMP, _LOGIT_CLAMP)) * mask
        if fmap == "favor+":
            proj = torch.einsum("shvd,shkd->shvk", u, self._p("omega"))
            expo = proj - 0.5 * (u * u).sum(-1, keepdim=True)
            return torch.exp(expo.clamp(-_LOGIT_CLAMP, _LOGIT_CLAMP)) * mask / math.sqrt(self.r_max)
        # taylor: [1, u, vec(u u^T)/sqrt 2] on the slot's first d coordinates
        u = u * mask
        outer = (u[..., :, None] * u[..., None, :]).flatten(-2) / math.sqrt(2.0)
        return torch.cat([torch.ones_like(u[..., :1]), u, outer], dim=-1)

    def kernel(self):
        """Per slot and head, the token kernel ``alpha(x, z)`` ``(S, h, V, V)``
        (dense: the scores ``<x W_Q, z W_K> / T``)."""
        if self.attention == "dense":
            q = torch.einsum("vm,shmk->shvk", self.tokens, self._p("score_q"))
            k = torch.einsum("vm,shmk->shvk", self.tokens, self._p("score_k"))
            return q @ k.transpose(-1, -2) / self.temperature
        code = self._code()
        return self._features(code, "q") @ self._features(code, "k").transpose(-1, -2)

    def forward(self, triples, slots=None):
        """Outputs ``(S, n)`` at the query of each triple ``(n, L)`` of token indices.

        ``slots`` (a 1-D index tensor) evaluates only those slots, ``(len(slots), n)``:
        the trainer skips solved and frozen slots this way.
        """
        self._slots = slots
        try:
            return self._forward(triples)
        finally:
            self._slots = None

    def _forward(self, triples):
        V = self.tokens.shape[0]
        flat = triples[:, :1] * V + triples  # (n, L): pair (query, token j)
        code = self._code()
        values = torch.einsum("svi,shie->shve", code, self._p("value"))
        readout = torch.einsum("svi,shie->shve", code, self._p("readout")) + 1.0
        pair_out = (readout @ values.transpose(-1, -2)).flatten(-2)[..., flat]  # a(q).v(z)
        kern = self.kernel().flatten(-2)[..., flat]  # (S, h, n, L)
        if self.attention == "dense":
            weights = torch.softmax(kern, dim=-1)
        else:
            total = kern.sum(-1, keepdim=True)
            if self.nonnegative:
                total = total.clamp_min(1e-30)
            else:
                total = torch.where(total.abs() < 1e-6, torch.full_like(total, 1e-6), total)
            weights = kern / total
        mixed = (weights * pair_out).sum(-1).sum(1)  # (S, n)
        bias = code @ self._p("bias")[:, :, None]  # (S, V, 1)
        return mixed + bias[:, :, 0][:, triples[:, 0]] + self._p("bias0")[:, None]


@torch.no_grad()
def _triple_scores(outputs, targets, weights, sequence_triples):
    wrong = (outputs - targets).abs() >= 0.5  # (S, n): not solved after rounding
    position = (wrong.to(weights.dtype) * weights).sum(-1) / weights.sum()
    if sequence_triples is None:
        return position, position
    sequence = wrong[:, sequence_triples].any(-1).to(weights.dtype).mean(-1)
    return position, sequence


def fit_triple_heads(head, data, max_steps=3000, lr=0.02, check_every=100, patience=3,
                     tol=1e-3, restarts=1, device="cpu", targets=None, margin=50.0,
                     decays=2, decay_factor=0.3, margin_on="triples"):
    """Train every slot of a :class:`TripleAttentionHead` full-batch on weighted triples.

    The loss of a slot is the multiplicity-weighted mean squared error over the
    distinct triples of ``data`` (:func:`~intrinsic_rank.datasets.min_ip_exhaustive_triples`),
    which equals the mean over every position of every sequence, plus a margin
    term that pushes every position inside the rounding interval. Adam with a
    step count and a learning rate per slot, so that a restarted slot gets a
    fresh optimiser state. Every ``check_every`` steps each slot is scored; a
    slot that solves every sequence is *solved* and frozen; a slot whose best
    loss improved by less than the relative ``tol`` over ``patience`` checks has
    *plateaued*: if unsolved, its learning rate is first multiplied by
    ``decay_factor`` (up to ``decays`` times, to polish a slot that bounces
    around a solution); after that, if restarts remain it is re-drawn from a new
    seed (fresh initialisation, the initial learning rate), otherwise it is
    frozen. The best state of each slot (fewest unsolved sequences, then lowest
    loss) is the one reported, and its parameters are restored at the end.

    Parameters
    ----------
    head : TripleAttentionHead
    data : Bunch
        ``triples``, ``weights``, ``targets`` and optionally ``sequence_triples``.
    max_steps : int, default=3000
    lr : float, default=0.02
        Initial learning rate (higher rates make the exponential maps spike).
    check_every, patience : int
        The plateau rule.
    tol : float, default=1e-3
    restarts : int, default=1
        Fresh-initialisation restarts per slot after an unsolved plateau (once
        its learning-rate decays are used up).
    device : str or torch.device, default="cpu"
    targets : array-like of shape (n,) or None
        Targets to fit instead of ``data.targets`` (the controls).
    margin : float, default=50.0
        Weight of the margin term ``relu(|error| - 0.3)^2`` added to the squared
        error (0: plain weighted MSE, which is what ``loss`` reports).
    decays : int, default=2
        Learning-rate decays per initialisation of a slot, on an unsolved plateau.
    decay_factor : float, default=0.3
        Factor of each decay, in ``(0, 1)``.
    margin_on : {"triples", "positions"}, default="triples"
        Weights of the margin term: every distinct triple alike (a triple is
        solved or not whatever its multiplicity, and every one of them occurs in
        some sequence, so this matches the exactness criterion), or by
        multiplicity like the squared error.

    Returns
    -------
    result : dict
        Per slot (lists): ``loss`` (the weighted MSE of the reported state),
        ``position_error`` (share of positions not solved), ``sequence_error``
        (share of sequences with any position not solved), ``converged`` (solved,
        or plateaued with every decay and restart used, before ``max_steps``),
        ``restarts`` (used), ``steps`` (trained), ``curve`` (the loss at every
        check, restarts included); and ``steps_run``.

    Examples
    --------
    >>> from intrinsic_rank.datasets import min_ip_exhaustive_triples
    >>> data = min_ip_exhaustive_triples(2, 2)
    >>> head = TripleAttentionHead(data.tokens, ranks=[1], seeds=[0])
    >>> fit_triple_heads(head, data, max_steps=600)["sequence_error"]
    [0.0]
    """
    max_steps = check_int(max_steps, "max_steps", 1)
    check_every = check_int(check_every, "check_every", 1)
    patience = check_int(patience, "patience", 1)
    restarts = check_int(restarts, "restarts", 0)
    decays = check_int(decays, "decays", 0)
    lr = check_real(lr, "lr", 0, low_open=True)
    decay_factor = check_real(decay_factor, "decay_factor", 0, 1, low_open=True, high_open=True)
    margin = check_real(margin, "margin", 0)
    if margin_on not in ("triples", "positions"):
        raise ValueError(f"margin_on must be 'triples' or 'positions'; got {margin_on!r}")
    device = torch.device(device)
    head = head.to(device)
    dtype = head.tokens.dtype
    triples = torch.as_tensor(data.triples, device=device)
    y = torch.as_tensor(data.targets if targets is None else targets, dtype=dtype,
                        device=device)
    if y.shape != (len(triples),):
        raise ValueError(f"targets must have shape ({len(triples)},); got {tuple(y.shape)}")
    w = torch.as_tensor(data.weights, dtype=dtype, device=device)
    w = w / w.sum()
    # exactness is decided per distinct triple (each occurs in some sequence), so
    # the margin term weighs the distinct triples equally, not by multiplicity
    w_margin = torch.full_like(w, 1.0 / len(w)) if margin_on == "triples" else w
    seq = data.get("sequence_triples") if hasattr(data, "get") else None
    seq = None if seq is None else torch.as_tensor(seq, device=device)
    params = [p for p in head.parameters()]
    S = len(head.ranks)
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    t = torch.zeros(S, device=device, dtype=dtype)
    rate = torch.full((S,), lr, device=device, dtype=dtype)
    active = torch.ones(S, dtype=torch.bool, device=device)
    best_loss = torch.full((S,), math.inf)
    stall = torch.zeros(S, dtype=torch.long)
    used, decayed, steps = [0] * S, [0] * S, [0] * S
    out = {k: [math.nan] * S for k in ("loss", "position_error", "sequence_error")}
    curves = [[] for _ in range(S)]
    converged = [False] * S
    best_key = [(math.inf, math.inf)] * S
    best_params = [p.detach().clone() for p in params]
    beta1, beta2 = 0.9, 0.999
    step = 0
    while step < max_steps and bool(active.any()):
        n_inner = min(check_every, max_steps - step)
        live = active.nonzero().squeeze(1)  # solved and frozen slots are not computed
        for _ in range(n_inner):
            pred = head(triples, slots=live)
            err = pred - y
            # squared error plus a margin term that pushes every position inside
            # the rounding interval (|error| < 1/2), where exactness is decided
            losses = (err**2 * w).sum(-1) + margin * (
                torch.relu(err.abs() - 0.3) ** 2 * w_margin).sum(-1)
            head.zero_grad(set_to_none=False)
            losses.sum().backward()
            with torch.no_grad():
                t += active.to(dtype)
                for p, (m1, m2) in zip(params, state):
                    g = p.grad
                    shape = (S,) + (1,) * (p.dim() - 1)
                    keep = active.view(shape)
                    m1.copy_(torch.where(keep, beta1 * m1 + (1 - beta1) * g, m1))
                    m2.copy_(torch.where(keep, beta2 * m2 + (1 - beta2) * g * g, m2))
                    tt = t.clamp_min(1).view(shape)
                    upd = rate.view(shape) * (m1 / (1 - beta1**tt)) / (
                        (m2 / (1 - beta2**tt)).sqrt() + 1e-8)
                    p.sub_(torch.where(keep, upd, torch.zeros_like(upd)))
        step += n_inner
        with torch.no_grad():
            pred = head(triples, slots=live)
            live_losses = ((pred - y) ** 2 * w).sum(-1).cpu()
            live_pos, live_sq = _triple_scores(pred, y, w, seq)
        losses, pos, sq = (torch.full((S,), math.nan, dtype=dtype) for _ in range(3))
        losses[live.cpu()], pos[live.cpu()], sq[live.cpu()] = (
            live_losses, live_pos.cpu(), live_sq.cpu())
        for s in range(S):
            if not active[s]:
                continue
            steps[s] += n_inner
            loss_s = float(losses[s])
            curves[s].append(loss_s if math.isfinite(loss_s) else math.inf)
            key = (float(sq[s]), loss_s if math.isfinite(loss_s) else math.inf)
            if key < best_key[s]:
                best_key[s] = key
                out["loss"][s], out["position_error"][s] = loss_s, float(pos[s])
                out["sequence_error"][s] = float(sq[s])
                with torch.no_grad():
                    for b, p in zip(best_params, params):
                        b[s].copy_(p[s])
            solved = float(sq[s]) == 0.0
            if loss_s < best_loss[s] * (1 - tol):
                best_loss[s], stall[s] = loss_s, 0
            else:
                stall[s] += 1
            if not math.isfinite(loss_s):
                stall[s] = patience  # diverged: go straight to a restart
                decayed[s] = decays
            if solved:
                active[s], converged[s] = False, True
            elif stall[s] >= patience:
                if decayed[s] < decays:
                    decayed[s] += 1
                    rate[s] *= decay_factor
                    stall[s] = 0
                elif used[s] < restarts:
                    used[s] += 1
                    decayed[s] = 0
                    head.reset_slot(s, head.seeds[s] + 1000 * used[s])
                    for (m1, m2) in state:
                        m1[s].zero_()
                        m2[s].zero_()
                    t[s], rate[s], best_loss[s], stall[s] = 0, lr, math.inf, 0
                else:
                    active[s], converged[s] = False, True
    with torch.no_grad():
        for b, p in zip(best_params, params):
            p.copy_(b)
    return dict(out, converged=converged, restarts=used, steps=steps, curve=curves,
                steps_run=step)


_LN_SQRT6 = 0.5 * math.log(6.0)


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
