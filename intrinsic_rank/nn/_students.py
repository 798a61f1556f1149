"""Students of the interpolation ladder, batched over a grid of ranks.

Every student holds one copy of its parameters per rank of a grid (a leading
"rank" axis) and masks the factor columns beyond each copy's rank, so that one
forward pass trains the whole grid at once. A single-rank student is the same
module with a grid of one rank: the batched sweep and the single-rank fit run the
same code.

Two properties make a slot of the batched student behave exactly like a student
trained alone:

* initialisation: the parameters of a slot of rank ``r`` are drawn from a
  generator seeded by ``(random_state, r)``, whatever the rest of the grid;
* optimisation: the training loss is the *sum* of the per-rank losses, so each
  slot receives exactly the gradient it would receive alone, and elementwise
  optimisers (SGD, Adam, AdamW) update it exactly as they would alone. Masked
  columns start at zero and receive zero gradient, so they never move.

Shapes: inputs ``X`` are ``(n, L, d)``; outputs are batch-first
``(n, R, L, d_out)`` (or ``(n, R, d_out)`` with ``final_only``) so that skorch can
concatenate predictions along the sample axis.
"""

import math

import torch
from torch import nn

from .._validation import check_allocation, check_int, keyed_seed

__all__ = [
    "RankBatchedStudent",
    "FixedOperatorStudent",
    "LinearAttentionStudent",
    "SoftmaxAttentionStudent",
    "TransformerBlockStudent",
    "causal_mask",
    "fixed_value_map",
    "known_values",
    "row_softmax",
]


# torch's CPU softmax is slow on short rows (about 5x slower than the four
# elementwise ops below at L = 8, measured in benchmarks/bench_sweep.py's
# profile); on long rows or on a GPU its own kernel is faster.
_SHORT_ROW = 16


class _ShortRowSoftmax(torch.autograd.Function):
    """Row softmax with a closed-form backward ``y * (g - <g, y>)``."""

    @staticmethod
    def forward(ctx, scores):
        weights = (scores - scores.amax(-1, keepdim=True)).exp_()
        weights /= weights.sum(-1, keepdim=True)
        ctx.save_for_backward(weights)
        return weights

    @staticmethod
    def backward(ctx, grad):
        (weights,) = ctx.saved_tensors
        weighted = grad * weights
        return weighted.sub_(weights * weighted.sum(-1, keepdim=True))


def row_softmax(scores):
    """Softmax over the last axis, fast on the short rows of small attention.

    Parameters
    ----------
    scores : torch.Tensor of shape (..., L)

    Returns
    -------
    weights : torch.Tensor of shape (..., L)
        Nonnegative rows summing to one; the same values as
        ``torch.softmax(scores, -1)``.

    Examples
    --------
    >>> import torch
    >>> row_softmax(torch.zeros(2, 4))
    tensor([[0.2500, 0.2500, 0.2500, 0.2500],
            [0.2500, 0.2500, 0.2500, 0.2500]])
    """
    if scores.device.type == "cpu" and scores.shape[-1] <= _SHORT_ROW:
        return _ShortRowSoftmax.apply(scores)
    return torch.softmax(scores, dim=-1)


def causal_mask(scores, fill):
    """``scores`` with every entry above the diagonal of its last two axes set to ``fill``.

    Parameters
    ----------
    scores : torch.Tensor of shape (..., L, L)
    fill : float
        ``-inf`` before a softmax, ``0`` for linear attention.

    Returns
    -------
    masked : torch.Tensor of shape (..., L, L)

    Examples
    --------
    >>> import torch
    >>> causal_mask(torch.ones(2, 2), 0.0)
    tensor([[1., 0.],
            [1., 1.]])
    """
    L = scores.shape[-1]
    above = torch.ones(L, L, dtype=torch.bool, device=scores.device).triu(1)
    return scores.masked_fill(above, fill)


def fixed_value_map(value_map, d, d_out):
    """A known value map as a float32 ``(d, d_out)`` tensor, or a ``ValueError`` naming the shape.

    Parameters
    ----------
    value_map : array-like of shape (d, d_out)
    d, d_out : int

    Returns
    -------
    value_map : torch.Tensor of shape (d, d_out), float32

    Examples
    --------
    >>> fixed_value_map([[1.0, 0.0]], 1, 2)
    tensor([[1., 0.]])
    """
    values = torch.as_tensor(value_map, dtype=torch.float32).detach().clone()
    if tuple(values.shape) != (int(d), int(d_out)):
        raise ValueError(f"value_map must have shape (d, d_out) = ({d}, {d_out}); got "
                         f"{tuple(values.shape)}")
    if not bool(torch.isfinite(values).all()):
        raise ValueError("value_map has non-finite entries")
    return values


def known_values(tokens, value_map, n_slots):
    """Values ``X W_V`` of a known value map, shared by every slot: ``(R, n, L, d_out)``.

    Parameters
    ----------
    tokens : torch.Tensor of shape (n, L, d)
    value_map : torch.Tensor of shape (d, d_out)
    n_slots : int

    Returns
    -------
    values : torch.Tensor of shape (R, n, L, d_out)
        An expanded view: one copy in memory for all slots.
    """
    n, L, d = tokens.shape
    values = (tokens.reshape(n * L, d) @ value_map).view(1, n, L, -1)
    return values.expand(n_slots, -1, -1, -1)


def _checked_restarts(restarts, n_slots):
    """``restarts`` as a tuple of one integer ``>= 0`` per slot (zeros for None).

    The length is compared before any entry is read, so a sequence of the wrong size is
    refused without being copied; an entry that is not an integer (``1.5``, NaN,
    infinity, ``True``) is refused, never truncated.
    """
    if restarts is None:
        return (0,) * n_slots
    try:
        size = None if isinstance(restarts, (str, bytes)) else len(restarts)
    except TypeError:  # an int, a 0-d array, a generator
        size = None
    if size is None:
        raise ValueError(f"restarts must be a sequence of one integer >= 0 per rank slot "
                         f"({n_slots}); got {restarts!r:.80}")
    if size != n_slots:
        raise ValueError(f"restarts must give one integer >= 0 per rank slot ({n_slots}); "
                         f"got {size} entries")
    return tuple(check_int(i, "every entry of restarts", minimum=0) for i in restarts)


def _slot_generator(random_state, rank, restart=0):
    """Generator of the parameters of the slot of rank ``rank`` (and restart ``restart``).

    The first draw of a rank (``restart=0``) is keyed by ``(random_state, rank)``
    alone, so it is the same whether or not restarts are asked for.
    """
    generator = torch.Generator(device="cpu")
    keys = (rank,) if restart == 0 else (rank, restart)
    generator.manual_seed(keyed_seed(random_state, *keys))
    return generator


class RankBatchedStudent(nn.Module):
    """Base class: parameters stacked over a grid of ranks.

    Subclasses declare their parameters with ``_add_parameter`` and implement
    :meth:`mixer` (the realised ``L x L`` token mixer) and ``_sequence_output``.

    Parameters
    ----------
    d : int
        Token dimension.
    d_out : int
        Output dimension per token.
    ranks : sequence of int
        The rank grid, one slot per entry (for example ``[1, 2, 4, 8]``).
    seq_len : int or None, default=None
        Sequence length; required by students whose parameters depend on it.
    init_scale : float, default=0.1
        Initialisation scale: factor matrices are drawn ``N(0, init_scale^2 /
        fan_in)``, so ``X W`` has entries of standard deviation ``init_scale``.
        Small values give the implicit low-rank bias of the recovery principle.
    random_state : int, default=0
        Seed of the initialisation (slot of rank ``r`` seeded by
        ``(random_state, r)``).
    final_only : bool, default=False
        Return only the final position's output (for scalar or vector targets
        attached to the whole sequence).
    restarts : sequence of int or None, default=None
        The restart index of each slot, for several independent draws of one
        rank in one batched run (``ranks=[3, 3, 3], restarts=[0, 1, 2]``):
        restart ``i >= 1`` of rank ``r`` is seeded by ``(random_state, r, i)``,
        restart 0 by ``(random_state, r)`` as without restarts. ``None``: every
        slot is restart 0.
    """

    max_rank_axis = "d"

    def __init__(
        self,
        d,
        d_out,
        ranks,
        seq_len=None,
        init_scale=0.1,
        random_state=0,
        final_only=False,
        restarts=None,
    ):
        super().__init__()
        ranks = tuple(int(r) for r in ranks)
        if not ranks or min(ranks) < 1:
            raise ValueError(f"ranks must be a non-empty list of integers >= 1; got {ranks}")
        restarts = _checked_restarts(restarts, len(ranks))
        if len(set(zip(ranks, restarts))) != len(ranks):
            raise ValueError(f"two slots draw the same parameters: ranks {ranks} with "
                             f"restarts {restarts}")
        self.restarts = restarts
        self.d = int(d)
        self.d_out = int(d_out)
        self.ranks = ranks
        self.seq_len = None if seq_len is None else int(seq_len)
        self.init_scale = float(init_scale)
        self.random_state = int(random_state)
        self.final_only = bool(final_only)
        self.r_max = max(ranks)
        limit = self.max_rank()
        if self.r_max > limit:
            raise ValueError(
                f"rank {self.r_max} exceeds the largest rank of this student ({limit})"
            )
        check_allocation(4 * len(ranks) * self.r_max, "ranks", f"{len(ranks)} rank slots")
        mask = torch.zeros(len(ranks), self.r_max)
        for slot, r in enumerate(ranks):
            mask[slot, :r] = 1.0
        self.register_buffer("rank_mask", mask)
        self._initializers = []
        self.build()
        self.reset_parameters()

    # -- construction -------------------------------------------------------------
    @classmethod
    def rank_limit(cls, d, seq_len=None):
        """Largest meaningful rank for tokens of dimension ``d``: the kernel size ``d``.

        Parameters
        ----------
        d : int
            Token dimension.
        seq_len : int or None
            Sequence length (used by students whose rank is bounded by it).

        Returns
        -------
        limit : int
        """
        return int(d)

    def max_rank(self):
        """Largest meaningful rank of this student (see :meth:`rank_limit`)."""
        return type(self).rank_limit(self.d, self.seq_len)

    def build(self):
        """Declare the parameters (implemented by subclasses)."""
        raise NotImplementedError

    def _add_parameter(self, name, shape, init, fan_in=None, ranked=False):
        """Register a parameter of shape ``(R, *shape)``.

        ``ranked=True`` marks a factor whose last axis is the rank axis
        (length ``r_max``); a slot of rank ``r`` only draws its first ``r``
        columns. ``init`` is ``"normal"`` (scaled by ``init_scale / sqrt(fan_in)``),
        ``"standard"`` (``1 / sqrt(fan_in)``), ``"ones"`` or ``"zeros"``;
        ``fan_in="rank"`` takes the slot's own rank ``r`` (for a factor whose
        input is the rank axis), so a slot's draw never depends on the grid.
        """
        # sized before it is allocated: a huge grid (or restart count) is one line
        check_allocation(4 * len(self.ranks) * math.prod(shape), "ranks",
                         f"parameter {name!r} of {len(self.ranks)} rank slots")
        parameter = nn.Parameter(torch.zeros(len(self.ranks), *shape))
        self.register_parameter(name, parameter)
        self._initializers.append((name, tuple(shape), init, fan_in, ranked))

    @torch.no_grad()
    def reset_parameters(self):
        """Draw every slot's parameters from its own ``(random_state, rank)`` generator."""
        for slot, (r, restart) in enumerate(zip(self.ranks, self.restarts)):
            generator = _slot_generator(self.random_state, r, restart)
            for name, shape, init, fan_in, ranked in self._initializers:
                target = getattr(self, name)[slot]
                target.zero_()
                if ranked:
                    shape = shape[:-1] + (r,)
                    target = target[..., :r]
                if init == "ones":
                    target.fill_(1.0)
                elif init in ("normal", "standard"):
                    scale = self.init_scale if init == "normal" else 1.0
                    values = torch.randn(shape, generator=generator)
                    fan = r if fan_in == "rank" else fan_in
                    target.copy_(values * scale / math.sqrt(fan))

    def _masked(self, factor):
        """Zero the columns of ``factor`` (``(R, ..., r_max)``) beyond each slot's rank."""
        mask = self.rank_mask.view(len(self.ranks), *([1] * (factor.dim() - 2)), self.r_max)
        return factor * mask

    # -- what the student computes ------------------------------------------------
    def mixer(self, X):
        """Realised token mixer ``M(X)`` of every slot, shape ``(n, R, L, L)``."""
        raise NotImplementedError

    def _sequence_output(self, X):
        raise NotImplementedError

    def forward(self, X):
        """Predictions of every slot, ``(n, R, L, d_out)`` or ``(n, R, d_out)``."""
        out = self._sequence_output(X)
        return out[:, :, -1, :] if self.final_only else out


class _QueryKeyMixin:
    """Shared query-key factors ``W_Q, W_K`` of shape ``(R, d, r_max)``."""

    def _add_query_key(self):
        self._add_parameter("query", (self.d, self.r_max), "normal", self.d, ranked=True)
        self._add_parameter("key", (self.d, self.r_max), "normal", self.d, ranked=True)

    def kernel(self):
        """Query-key kernels ``K = W_Q W_K^T`` of every slot, ``(R, d, d)``."""
        return self._masked(self.query) @ self._masked(self.key).transpose(1, 2)

    @torch.no_grad()
    def start_from(self, query, key):
        """Start every slot from the rank-``r`` truncation of a teacher's kernel ``query key^T``.

        Slot ``r`` gets ``W_Q W_K^T`` equal to the best rank-``r``
        approximation of the kernel (the factors share its singular values as
        square roots).

        Parameters
        ----------
        query, key : array-like of shape (d, k)
            A teacher's query and key projections (any common width ``k``).
        """
        query = torch.as_tensor(query, dtype=torch.float64)
        key = torch.as_tensor(key, dtype=torch.float64)
        if query.ndim != 2 or query.shape != key.shape or query.shape[0] != self.d:
            raise ValueError(f"the query and key projections to start from must both have "
                             f"shape (d, k) with d = {self.d}; got {tuple(query.shape)} and "
                             f"{tuple(key.shape)}")
        U, S, Vh = torch.linalg.svd(query @ key.T)
        for slot, r in enumerate(self.ranks):
            root = S[:r].sqrt()
            for name, factor in (("query", U[:, :r] * root), ("key", Vh[:r].T * root)):
                target = getattr(self, name)
                target[slot].zero_()
                target[slot, :, :r] = factor.to(dtype=target.dtype, device=target.device)

    def _used_columns(self):
        """Flat indices, into ``(d, R * r_max)``, of the factor columns the slots use."""
        key = (self.ranks, self.r_max, self.query.device)
        cached = getattr(self, "_columns_cache", None)
        if cached is None or cached[0] != key:
            columns = [slot * self.r_max + j for slot, r in enumerate(self.ranks)
                       for j in range(r)]
            cached = (key, torch.tensor(columns, dtype=torch.long, device=self.query.device))
            self._columns_cache = cached
        return cached[1]

    def _rank_major_scores(self, tokens):
        """Scores ``(X W_Q)(X W_K)^T`` of every slot, rank-major: ``(R, n, L, L)``.

        The used columns of every slot's ``W_Q`` and ``W_K`` (``r`` each, not
        ``r_max``) are gathered into one ``(d, 2 sum r)`` matrix, so the projections
        are one matrix product without the masked columns; each slot's scores are
        then one batched product over its own ``r`` columns.
        """
        if sum(self.ranks) == len(self.ranks) * self.r_max:  # no masked column to skip
            return self._padded_rank_major_scores(tokens)
        n, L, d = tokens.shape
        R = len(self.ranks)
        columns = self._used_columns()
        width = len(columns)
        query = self.query.permute(1, 0, 2).reshape(d, R * self.r_max)[:, columns]
        key = self.key.permute(1, 0, 2).reshape(d, R * self.r_max)[:, columns]
        # each half padded with zero columns to a multiple of 16: MKL's fp32 matmul
        # is several times slower at an odd width (127 or 254 columns) than at 128
        pad = -width % 16
        blocks = [query, key]
        if pad:
            zeros = query.new_zeros(d, pad)
            blocks = [query, zeros, key, zeros]
        projected = tokens.reshape(n * L, d) @ torch.cat(blocks, dim=1)
        # one split (its backward is one concatenation, not a zero-filled
        # gradient per slice)
        sizes = list(self.ranks) + ([pad] if pad else [])
        parts = projected.view(n, L, -1).split(sizes * 2, dim=2)
        half = len(sizes)
        return torch.stack([torch.bmm(parts[s], parts[half + s].transpose(1, 2))
                            for s in range(R)])

    def _padded_rank_major_scores(self, tokens):
        """The same scores from the masked ``(R, d, r_max)`` factors, every slot ``r_max`` wide."""
        q = torch.einsum("nld,rdk->rnlk", tokens, self._masked(self.query))
        k = torch.einsum("nld,rdk->rnlk", tokens, self._masked(self.key))
        return q @ k.transpose(-1, -2)

    def _scores(self, tokens):
        """Scores of every slot, ``(n, R, L, L)`` (a view of the rank-major scores)."""
        return self._rank_major_scores(tokens).transpose(0, 1)

    def _rank_major_values(self, tokens):
        """Values ``X W_V`` of every slot, rank-major: ``(R, n, L, d_out)``."""
        n, L, d = tokens.shape
        values = torch.matmul(tokens.reshape(n * L, d), self.value)
        return values.view(len(self.ranks), n, L, self.d_out)


class FixedOperatorStudent(RankBatchedStudent):
    """B0 ``fixed``: ``Y = A X V`` with an input-independent ``A = P Q^T`` of rank ``r``.

    Parameters
    ----------
    d, d_out, ranks, seq_len, init_scale, random_state, final_only
        See :class:`RankBatchedStudent`. ``seq_len`` is required: ``A`` is
        ``L x L`` and ranks go up to ``L``.

    Examples
    --------
    >>> import torch
    >>> student = FixedOperatorStudent(d=3, d_out=2, ranks=[1, 2], seq_len=4)
    >>> student(torch.randn(5, 4, 3)).shape
    torch.Size([5, 2, 4, 2])
    >>> student.operator().shape
    torch.Size([2, 4, 4])
    """

    @classmethod
    def rank_limit(cls, d, seq_len=None):
        """The operator is ``L x L``: ranks go up to ``seq_len``."""
        if seq_len is None:
            raise ValueError("FixedOperatorStudent needs seq_len")
        return int(seq_len)

    def build(self):
        L = self.seq_len
        self._add_parameter("left", (L, self.r_max), "normal", L, ranked=True)
        self._add_parameter("right", (L, self.r_max), "normal", L, ranked=True)
        self._add_parameter("value", (self.d, self.d_out), "normal", self.d)

    def operator(self):
        """Operators ``A = P Q^T`` of every slot, ``(R, L, L)``."""
        return self._masked(self.left) @ self._masked(self.right).transpose(1, 2)

    def mixer(self, X):
        return self.operator().unsqueeze(0).expand(X.shape[0], -1, -1, -1)

    def _sequence_output(self, X):
        values = torch.einsum("nld,rde->nrle", X, self.value)
        return torch.einsum("rlk,nrke->nrle", self.operator(), values)


class _AttentionRung(_QueryKeyMixin, RankBatchedStudent):
    """Base of B1 and B2: a causal mask and a known value map, both optional."""

    def __init__(self, d, d_out, ranks, causal=False, value_map=None, **kwargs):
        self.causal = bool(causal)
        self.learned_values = value_map is None
        # build() (called by the base __init__) registers it as the buffer value_map
        self._given_value_map = None if value_map is None else fixed_value_map(value_map, d,
                                                                                d_out)
        super().__init__(d, d_out, ranks, **kwargs)

    def build(self):
        self._add_query_key()
        if self.learned_values:
            self._add_parameter("value", (self.d, self.d_out), "normal", self.d)
        else:
            self.register_buffer("value_map", self._given_value_map)
        del self._given_value_map

    def _rank_major_values(self, tokens):
        if self.learned_values:
            return super()._rank_major_values(tokens)
        return known_values(tokens, self.value_map, len(self.ranks))


class LinearAttentionStudent(_AttentionRung):
    """B1 ``linear``: ``Y = (X W_Q)(X W_K)^T X W_V / L``, kernel rank ``<= r``.

    Parameters
    ----------
    d, d_out, ranks, seq_len, init_scale, random_state, final_only
        See :class:`RankBatchedStudent`.
    causal : bool, default=False
        Position ``i`` mixes positions ``j <= i`` only (the scores above the
        diagonal are zeroed; the division stays by ``L``).
    value_map : array-like of shape (d, d_out) or None, default=None
        A known value map ``W_V`` (not trained); ``None`` learns one per slot.

    Examples
    --------
    >>> import torch
    >>> student = LinearAttentionStudent(d=4, d_out=4, ranks=[2])
    >>> student(torch.randn(3, 5, 4)).shape
    torch.Size([3, 1, 5, 4])
    """

    def _mixers(self, scores, L):
        mixer = scores / L
        return causal_mask(mixer, 0.0) if self.causal else mixer

    def mixer(self, X):
        return self._mixers(self._scores(X), X.shape[1])

    def _sequence_output(self, X):
        mixer = self._mixers(self._rank_major_scores(X), X.shape[1])
        return (mixer @ self._rank_major_values(X)).transpose(0, 1)


class SoftmaxAttentionStudent(_AttentionRung):
    """B2 ``softmax``: ``Y = softmax((X W_Q)(X W_K)^T) X W_V``, kernel rank ``<= r``.

    Parameters
    ----------
    d, d_out, ranks, seq_len, init_scale, random_state, final_only
        See :class:`RankBatchedStudent`.
    causal : bool, default=False
        Position ``i`` attends to positions ``j <= i`` only, as in a causal LM.
    value_map : array-like of shape (d, d_out) or None, default=None
        A known value map ``W_V`` (not trained); ``None`` learns one per slot.

    The scores are not divided by ``sqrt(r)``, matching the softmax teacher of
    :func:`intrinsic_rank.datasets.make_attention_task`.

    Examples
    --------
    >>> import torch
    >>> student = SoftmaxAttentionStudent(d=4, d_out=2, ranks=[1, 4])
    >>> student.mixer(torch.randn(3, 5, 4)).sum(-1).allclose(torch.ones(3, 2, 5))
    True
    >>> causal = SoftmaxAttentionStudent(d=4, d_out=2, ranks=[2], causal=True)
    >>> bool((causal.mixer(torch.randn(1, 3, 4))[0, 0].triu(1) == 0).all())
    True
    """

    def _weights(self, scores):
        return row_softmax(causal_mask(scores, float("-inf")) if self.causal else scores)

    def mixer(self, X):
        return self._weights(self._scores(X))

    def _sequence_output(self, X):
        mixer = self._weights(self._rank_major_scores(X))
        return (mixer @ self._rank_major_values(X)).transpose(0, 1)


class TransformerBlockStudent(_QueryKeyMixin, RankBatchedStudent):
    """B3 ``block``: a pre-LayerNorm Transformer block around the rank-``r`` attention of B2.

    ``H1 = X + softmax(LN1(X) W_Q W_K^T LN1(X)^T) LN1(X) W_V``,
    ``H2 = H1 + GELU(LN2(H1) W_1 + b_1) W_2 + b_2``, ``Y = H2 W_O + b_O``.
    Like B1 and B2 it has no positional information.

    Parameters
    ----------
    hidden : int or None, default=None
        Width of the feed-forward network; ``None`` means ``4 d``.
    **kwargs
        See :class:`RankBatchedStudent`.

    Examples
    --------
    >>> import torch
    >>> student = TransformerBlockStudent(d=4, d_out=1, ranks=[2], final_only=True)
    >>> student(torch.randn(3, 5, 4)).shape
    torch.Size([3, 1, 1])
    """

    def __init__(self, d, d_out, ranks, hidden=None, **kwargs):
        self.hidden = 4 * int(d) if hidden is None else int(hidden)
        super().__init__(d, d_out, ranks, **kwargs)

    def build(self):
        d, h = self.d, self.hidden
        self._add_query_key()
        self._add_parameter("value", (d, d), "normal", d)
        for name in ("ln1", "ln2"):
            self._add_parameter(f"{name}_weight", (d,), "ones")
            self._add_parameter(f"{name}_bias", (d,), "zeros")
        self._add_parameter("ffn_in", (d, h), "standard", d)
        self._add_parameter("ffn_in_bias", (h,), "zeros")
        self._add_parameter("ffn_out", (h, d), "standard", h)
        self._add_parameter("ffn_out_bias", (d,), "zeros")
        self._add_parameter("readout", (d, self.d_out), "standard", d)
        self._add_parameter("readout_bias", (self.d_out,), "zeros")

    @staticmethod
    def _layer_norm(h, weight, bias):
        # h: (n, R, L, d); weight, bias: (R, d)
        h = torch.nn.functional.layer_norm(h, h.shape[-1:])
        return h * weight[:, None, :] + bias[:, None, :]

    def _attention_input(self, X):
        return self._layer_norm(X.unsqueeze(1), self.ln1_weight, self.ln1_bias)

    def mixer(self, X):
        a = self._attention_input(X)
        q = torch.einsum("nrld,rdk->nrlk", a, self._masked(self.query))
        k = torch.einsum("nrld,rdk->nrlk", a, self._masked(self.key))
        return row_softmax(q @ k.transpose(-1, -2))

    def _sequence_output(self, X):
        a = self._attention_input(X)
        values = torch.einsum("nrld,rde->nrle", a, self.value)
        h = X.unsqueeze(1) + self.mixer(X) @ values
        f = self._layer_norm(h, self.ln2_weight, self.ln2_bias)
        f = torch.einsum("nrld,rdh->nrlh", f, self.ffn_in) + self.ffn_in_bias[:, None, :]
        f = torch.nn.functional.gelu(f)
        h = h + torch.einsum("nrlh,rhd->nrld", f, self.ffn_out) + self.ffn_out_bias[:, None, :]
        return torch.einsum("nrld,rde->nrle", h, self.readout) + self.readout_bias[:, None, :]
