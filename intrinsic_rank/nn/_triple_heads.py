"""Normalised kernel (or dense softmax) heads on exhaustive Min-IP triples.

The head of the Min-IP rank law (:func:`~intrinsic_rank.experiments.min_ip_rank_law`):
a batch of independent slots, each of its own feature rank and seed, on the
distinct (query, other tokens) triples of every sequence over a vocabulary
(:func:`~intrinsic_rank.datasets.min_ip_exhaustive_triples`). Its feature maps
are those of ``_feature_maps``; :func:`~intrinsic_rank.nn.fit_triple_heads`
trains it.
"""

import math

import torch
from torch import nn

from .._validation import check_int, check_real, keyed_seed
from ._feature_maps import (
    FEATURE_MAPS,
    elu_plus_one_features,
    exp_features,
    favor_features,
    gaussian_projection,
    hedgehog_features,
    relu_features,
    taylor_features,
)

__all__ = ["TripleAttentionHead"]

_ELEMENTWISE = {"exp": exp_features, "elu+1": elu_plus_one_features, "relu": relu_features}
# favor+'s random features act on an 8-dimensional code
_FAVOR_DIM = 8


def _taylor_dim(rank):
    """Largest ``d`` with ``1 + d + d(d+1)/2 <= rank`` (the Taylor map's input width)."""
    d = 0
    while 1 + (d + 1) + (d + 1) * (d + 2) // 2 <= rank:
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
        One of :data:`FEATURE_MAPS` (the maps of ``_feature_maps``, which
        also say how many features a slot of rank ``r`` uses).
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
    random_features : {"orthogonal", "iid"}, default="orthogonal"
        How ``"favor+"`` draws its projection
        (:func:`~intrinsic_rank.nn.gaussian_projection`): Performer's orthogonal
        blocks with chi-distributed row norms, or i.i.d. Gaussian rows.

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
                 feature_bias=0.0, random_features="orthogonal"):
        super().__init__()
        tokens = torch.as_tensor(tokens, dtype=torch.float32)
        if tokens.ndim != 2 or tokens.shape[0] < 1:
            raise ValueError(f"tokens must be a 2-D (V, m) array; got shape {tuple(tokens.shape)}")
        if attention not in ("kernel", "dense"):
            raise ValueError(f"unknown attention {attention!r}; use 'kernel' or 'dense'")
        if attention == "kernel" and feature_map not in FEATURE_MAPS:
            raise ValueError(f"unknown feature_map {feature_map!r}; "
                             f"use one of {list(FEATURE_MAPS)}")
        if random_features not in ("orthogonal", "iid"):
            raise ValueError(f"unknown random_features {random_features!r}; use 'orthogonal' "
                             f"or 'iid'")
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
        self.random_features = random_features
        self.nonnegative = attention == "dense" or FEATURE_MAPS[feature_map][0]
        S, h, H = len(ranks), self.n_heads, self.hidden
        self.r_max = max(ranks) if attention == "kernel" else m
        # the columns of u each slot uses: taylor's inputs, hedgehog's pairs, the features
        if feature_map == "taylor":
            used = [_taylor_dim(r) for r in ranks]
        elif feature_map == "hedgehog":
            used = [r // 2 for r in ranks]
        else:
            used = ranks
        if feature_map == "taylor":
            self.u_dim = max(used)
        elif feature_map == "hedgehog":
            self.u_dim = max(max(used), 1)
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
        mask = torch.zeros(S, self.r_max if feature_map == "favor+" else self.u_dim)
        for s, n in enumerate(used):
            mask[s, :n] = 1.0
        self.register_buffer("mask", mask)
        self._slots = None
        for s in range(S):
            self.reset_slot(s, seeds[s])

    @torch.no_grad()
    def reset_slot(self, slot, seed):
        """Re-draw the parameters of one slot from ``seed`` (a restart)."""
        gen = torch.Generator().manual_seed(keyed_seed(int(seed), self.ranks[slot], self.n_heads))
        m = self.tokens.shape[1]
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
            omega = torch.stack([
                gaussian_projection(self.r_max, self.u_dim, gen,
                                    orthogonal=self.random_features == "orthogonal")
                for _ in range(self.n_heads)])
            self.omega[slot].copy_(omega.to(self.omega.device))

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
        if fmap in _ELEMENTWISE:
            return _ELEMENTWISE[fmap](u) * mask
        if fmap == "signed":
            return u * mask
        if fmap == "favor+":
            return favor_features(u, self._p("omega"), feature_mask=mask)
        if fmap == "taylor":  # on the slot's first d coordinates, scaled by that d
            return taylor_features(u * mask, dim=mask.sum(-1, keepdim=True))
        # hedgehog on the slot's r // 2 pairs; a slot with none (rank 1) is constant
        constant = mask.sum(-1, keepdim=True) == 0
        pairs = torch.where(constant, torch.ones_like(mask), mask)
        features = hedgehog_features(u, pair_mask=pairs)
        first = torch.zeros_like(features[:1, :1, :1])
        first[..., 0] = 1.0
        return torch.where(constant, first, features)

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
