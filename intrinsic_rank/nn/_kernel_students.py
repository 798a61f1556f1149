"""Trainable Min-IP students: normalised nonnegative kernel attention and dense softmax.

A normalised nonnegative kernel-attention head of feature rank ``r`` (the Min-IP
paper, "Three tokens force exponential feature rank in nonnegative kernel
attention") computes, for each position ``i``,

``o_i = sum_j alpha(x_i, x_j) v(x_j) / sum_j alpha(x_i, x_j)``,
``alpha(x, z) = <phi_Q(x), phi_K(z)> >= 0``, ``phi_Q, phi_K : R^m -> R^r_{>=0}``,

then an arbitrary query-dependent affine readout ``y_i = a(x_i) . o_i + b(x_i)``.
Dense softmax attention replaces ``alpha`` by ``exp(<W_Q x_i, W_K x_j> / T)`` with
``m``-dimensional scores and a fixed temperature ``T``.

The students follow the rank-batched convention of
:mod:`intrinsic_rank.nn._students` (a leading rank axis, masked feature columns),
so ``AttentionRankEstimator(attention="kernel")`` sweeps feature ranks in one
optimisation.
"""

import torch

from .._validation import check_real
from ._feature_maps import elu_plus_one_features, exp_features, relu_features
from ._kernel_attention import normalized_kernel_attention
from ._students import RankBatchedStudent, _QueryKeyMixin, row_softmax

__all__ = ["KERNEL_STUDENT_MAPS", "KernelAttentionStudent", "DenseAttentionStudent"]

#: The nonnegative feature maps of :class:`KernelAttentionStudent` (and so of
#: ``AttentionRankEstimator(attention="kernel", feature_map=...)``): ``"exp"`` (the
#: default), ``"elu+1"`` (linear transformers) and ``"relu"``.
KERNEL_STUDENT_MAPS = ("exp", "elu+1", "relu")
_STUDENT_MAP_FUNCTIONS = {"exp": exp_features, "elu+1": elu_plus_one_features,
                          "relu": relu_features}
# 2^m features represent any kernel on {0,1}^m exactly, so more is never needed;
# capped to keep the module finite
_MAX_FEATURE_RANK = 4096


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
        a = (torch.einsum("nrlh,rhk->nrlk", h, self.readout_weight)
             + self.readout_weight_bias[:, None, :])
        a = a.view(n, R, L, e, self.d_out)
        b = (torch.einsum("nrlh,rhk->nrlk", h, self.readout_bias)
             + self.readout_bias_bias[:, None, :])
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
        default; :func:`~intrinsic_rank.nn.exp_features`), ``elu(.) + 1``
        (linear transformers; :func:`~intrinsic_rank.nn.elu_plus_one_features`)
        or ``relu`` (:func:`~intrinsic_rank.nn.relu_features`).
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
        features = _STUDENT_MAP_FUNCTIONS[self.feature_map](logits)
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

