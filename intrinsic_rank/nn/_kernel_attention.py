"""Normalised nonnegative kernel attention and its heads with explicit (fixed) maps.

A normalised nonnegative kernel-attention head of feature rank ``r`` (the Min-IP
paper, "Three tokens force exponential feature rank in nonnegative kernel
attention") computes, for each position ``i``,

``o_i = sum_j alpha(x_i, x_j) v(x_j) / sum_j alpha(x_i, x_j)``,
``alpha(x, z) = <phi_Q(x), phi_K(z)> >= 0``,

then a query-dependent affine readout ``y_i = <a(x_i), o_i> + b(x_i)``. Dense
softmax attention replaces ``alpha`` by ``exp(<q(x_i), k(x_j)> / T)``.
:func:`normalized_kernel_attention` is the one implementation of the mixing,
shared by the trainable students (:mod:`._kernel_students`) and the heads here,
whose maps are given callables: the exact constructions of the Min-IP paper
(:mod:`._min_ip_constructions`) are such heads.
"""

from torch import nn

from ._students import row_softmax

__all__ = ["normalized_kernel_attention", "NormalizedKernelHead", "DenseSoftmaxHead"]


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
    >>> from intrinsic_rank.nn import rank_one_min_ip_head
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
    >>> from intrinsic_rank.nn import dense_min_ip_head
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
