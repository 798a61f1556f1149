"""Softmax attention with rotary positions, as the heads of rotary language models compute it.

A head of a rotary causal LM (Llama, Qwen2, SmolLM2) scores query ``i`` against
key ``j`` as ``scale * (R_i q_i) . (R_j k_j)``, where ``R_p`` rotates each
channel pair by the angle ``p * f`` of its frequency ``f`` (rotary position
embedding, RoPE). Since ``R_i^T R_j = R_{j-i}``, the bilinear form at relative
offset ``delta`` is ``W_Q R_delta W_K^T``: the query-key kernel differs at every
offset. Bounding the rank of the query projection bounds all of them at once,
``rank(W_Q R_delta W_K^T) <= rank(W_Q) <= r``; bounding the keys as well would
not contain a teacher of query rank ``r``, because the rotated key row spaces
differ from one offset to the next. So the rank of
:class:`RotarySoftmaxStudent` is the rank of its query projection, factored as
``W_Q = A C`` (``A`` of shape ``(d, r)``, ``C`` of shape ``(r, head_dim)``), with
keys at the full head width.

The student takes every other step of a real head as the head takes it
(``_head_math``): a partial rotation, the rope type's ``attention_scaling``, an RMS
norm of the queries and keys after their projections, soft-capped scores and a
sliding window. The rank stays the rank of the projection *before* the norm: the
norm multiplies each token's query by a number and a fixed diagonal, which cannot
raise the rank of the queries' span, and a partial rotation turns some channels of a
rank-``r`` query and passes the others, so ``rank(W_Q R_delta W_K^T) <= r`` still.
"""

import math

import torch

from ._head_math import (
    HeadNorm,
    rope_frequencies,
    rope_tables,
    rotate,
    soft_cap,
    visible_keys,
)
from ._students import RankBatchedStudent, fixed_value_map, known_values, row_softmax

__all__ = ["RotarySoftmaxStudent"]


class RotarySoftmaxStudent(RankBatchedStudent):
    """Softmax attention with rotary positions and a query projection of rank ``r``.

    ``Y = softmax(cap(scale * rot(n_q(X A C)) rot(n_k(X W_K))^T) + mask) V`` with
    ``A`` of shape ``(d, r)``, ``C`` of shape ``(r, head_dim)``, keys
    ``W_K`` of shape ``(d, head_dim)``, ``rot`` the rotary embedding of
    positions ``0 .. L-1`` on the first ``rotary_dim`` channels (:func:`rotate`,
    frequencies :func:`rope_frequencies`), ``n_q``, ``n_k`` optional RMS norms
    (:class:`HeadNorm`), ``cap`` an optional soft-capping and ``mask`` causal,
    optionally with a sliding window. The rank is the query projection's, before
    the norm: the query-key kernel ``A C R_delta W_K^T`` has rank at most ``r``
    at every relative offset ``delta`` (module docstring). ``V`` is a known value
    map ``X W_V`` or learned per slot.

    Parameters
    ----------
    d, d_out, ranks, seq_len, init_scale, random_state, final_only
        See :class:`RankBatchedStudent`. Ranks go up to ``min(d, head_dim)``.
    rope_theta : float, default=10000.0
        The rotary base.
    head_dim : int or None, default=None
        Width of the queries and keys (even); ``None`` takes ``d_out``, the
        width of a real head's output.
    score_scale : float or None, default=None
        Factor of the scores; ``None`` takes ``1 / sqrt(head_dim)``, the
        scale of the rotary language models.
    causal : bool, default=True
        Query ``i`` attends to keys ``j <= i`` only.
    value_map : array-like of shape (d, d_out) or None, default=None
        A known value map (not trained); ``None`` learns one per slot.
    key_map : array-like of shape (d, head_dim) or None, default=None
        A known key projection (not trained), shared by every slot: the
        student of a real head then differs from the head only in its query
        projection, so the trained query can be put back into the model.
        ``None`` learns the keys per slot.
    inv_freq : array-like of shape (rotary_dim // 2,) or None, default=None
        The rotary frequencies themselves, as a model's rotary module holds
        them (they take the place of ``rope_theta``, and their number sets
        ``rotary_dim``); zeros turn no channel, the student of a head whose
        positions are already inside ``X``.
    rotary_dim : int or None, default=None
        The channels rotated with ``rope_theta``'s frequencies (``None``: all
        ``head_dim``); the rest pass unrotated. Ignored with ``inv_freq``.
    rope_scaling : float, default=1.0
        The factor of ``cos`` and ``sin`` (a rope type's ``attention_scaling``).
    query_norm, key_norm : HeadNorm or None, default=None
        RMS norms after the query and key projections (their ``layer_w``, if
        any, has ``d`` rows: the inputs of this student).
    softcap : float or None, default=None
        Scores become ``softcap * tanh(scores / softcap)`` (Gemma 2).
    window : int or None, default=None
        A sliding window: query ``i`` sees keys ``i - window < j <= i`` only.

    Examples
    --------
    >>> import torch
    >>> student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[1, 4], rope_theta=100.0)
    >>> student(torch.randn(2, 5, 6)).shape
    torch.Size([2, 2, 5, 4])
    >>> [int(torch.linalg.matrix_rank(k)) for k in student.kernel()]
    [1, 4]
    >>> windowed = RotarySoftmaxStudent(d=6, d_out=4, ranks=[2], rotary_dim=2, window=3,
    ...                                 softcap=5.0)
    >>> windowed(torch.randn(2, 5, 6)).shape
    torch.Size([2, 1, 5, 4])
    """

    def __init__(self, d, d_out, ranks, rope_theta=10000.0, head_dim=None, score_scale=None,
                 causal=True, value_map=None, key_map=None, inv_freq=None, rotary_dim=None,
                 rope_scaling=1.0, query_norm=None, key_norm=None, softcap=None, window=None,
                 **kwargs):
        self.head_dim = int(d_out if head_dim is None else head_dim)
        if self.head_dim < 2 or self.head_dim % 2:
            raise ValueError(f"head_dim must be an even integer >= 2; got {self.head_dim}")
        self.rope_theta = float(rope_theta)
        if not (math.isfinite(self.rope_theta) and self.rope_theta > 0.0):
            raise ValueError(f"rope_theta must be a finite number > 0; got {rope_theta!r}")
        self.rotary_dim = self._rotary_dim(rotary_dim if inv_freq is None
                                           else 2 * len(inv_freq))
        self.score_scale = (1.0 / math.sqrt(self.head_dim) if score_scale is None
                            else float(score_scale))
        self.causal = bool(causal)
        self._set_head_steps(rope_scaling, softcap, window)
        self.query_norm = self._norm(query_norm, "query_norm", d)
        self.key_norm = self._norm(key_norm, "key_norm", d)
        self.learned_values = value_map is None
        self._given_value_map = None if value_map is None else fixed_value_map(value_map, d,
                                                                                d_out)
        self.learned_keys = key_map is None
        self._given_key_map = None if key_map is None else fixed_value_map(key_map, d,
                                                                            self.head_dim)
        self._given_inv_freq = None if inv_freq is None else self._frequencies(inv_freq)
        super().__init__(d, d_out, ranks, **kwargs)

    def _rotary_dim(self, rotary_dim):
        rotary_dim = self.head_dim if rotary_dim is None else int(rotary_dim)
        if not 2 <= rotary_dim <= self.head_dim or rotary_dim % 2:
            raise ValueError(f"rotary_dim must be even, in 2..head_dim = {self.head_dim}; "
                             f"got {rotary_dim}")
        return rotary_dim

    def _set_head_steps(self, rope_scaling, softcap, window):
        self.rope_scaling = float(rope_scaling)
        if not (math.isfinite(self.rope_scaling) and self.rope_scaling > 0.0):
            raise ValueError(f"rope_scaling must be a finite number > 0; got {rope_scaling!r}")
        self.softcap = None if softcap is None else float(softcap)
        if self.softcap is not None and not (math.isfinite(self.softcap) and self.softcap > 0):
            raise ValueError(f"softcap must be None or a finite number > 0; got {softcap!r}")
        if window is not None and (isinstance(window, bool) or int(window) != window
                                   or window < 1):
            raise ValueError(f"window must be None or an integer >= 1; got {window!r}")
        self.window = None if window is None else int(window)

    def _norm(self, norm, name, d):
        if norm is None:
            return None
        if not isinstance(norm, HeadNorm) or len(norm.gain) != self.head_dim or (
                norm.layer_w is not None and norm.layer_w.shape[0] != d):
            raise ValueError(f"{name} must be a HeadNorm of {self.head_dim} channels (and "
                             f"{d} input rows for a norm over the layer); got {norm!r}")
        return norm

    def _frequencies(self, inv_freq):
        inv_freq = torch.as_tensor(inv_freq, dtype=torch.float64).cpu()
        if tuple(inv_freq.shape) != (self.rotary_dim // 2,) or not torch.isfinite(inv_freq).all():
            raise ValueError(f"inv_freq must hold rotary_dim / 2 = {self.rotary_dim // 2} finite "
                             f"frequencies; got shape {tuple(inv_freq.shape)}")
        return inv_freq

    def max_rank(self):
        """Largest meaningful rank: ``min(d, head_dim)``, the rank of a full query projection."""
        return min(self.d, self.head_dim)

    def build(self):
        self._add_parameter("query_in", (self.d, self.r_max), "normal", self.d, ranked=True)
        # C stored transposed, (head_dim, r): its rank axis last, as every ranked factor
        self._add_parameter("query_out", (self.head_dim, self.r_max), "standard", "rank",
                            ranked=True)
        if self.learned_keys:
            self._add_parameter("key", (self.d, self.head_dim), "normal", self.d)
        else:
            self.register_buffer("key_map", self._given_key_map)
        if self.learned_values:
            self._add_parameter("value", (self.d, self.d_out), "normal", self.d)
        else:
            self.register_buffer("value_map", self._given_value_map)
        inv_freq = self._given_inv_freq
        del self._given_value_map, self._given_key_map, self._given_inv_freq
        self.register_buffer("inv_freq", rope_frequencies(self.rotary_dim, self.rope_theta)
                             if inv_freq is None else inv_freq)

    # -- the query-key kernel ------------------------------------------------------
    def query_projection(self):
        """Query projections ``W_Q = A C`` of every slot, ``(R, d, head_dim)``, rank ``<= r``."""
        return self._masked(self.query_in) @ self._masked(self.query_out).transpose(1, 2)

    def kernel(self):
        """Kernels at relative offset 0, ``W_Q W_K^T``, of every slot: ``(R, d, d)``.

        The kernel at offset ``delta`` is ``W_Q R_delta W_K^T``, of the same rank bound.
        """
        keys = self.key if self.learned_keys else self.key_map.expand(len(self.ranks), -1, -1)
        return self.query_projection() @ keys.transpose(1, 2)

    @torch.no_grad()
    def start_from(self, query, key=None, basis=None, slots=None):
        """Start slots from a teacher's projections: its query truncated to each slot's rank.

        Without ``basis``, slot ``r`` gets ``A C`` equal to the best rank-``r``
        approximation of ``query`` (its SVD truncation, the factors sharing the
        singular values as square roots). With ``basis`` (orthonormal columns
        ``V``, most important first), slot ``r`` gets ``A = query V_r`` and
        ``C = V_r^T``: the query projected on the first ``r`` directions of
        ``V``. For a real head, ``V`` from the SVD of its realised queries
        ``X W_Q`` gives the truncation that keeps most of what the queries do
        on these inputs (the data-aware start); the raw weights' SVD ignores
        the inputs. Either way a slot of full width starts at the teacher.

        Parameters
        ----------
        query : array-like of shape (d, head_dim)
        key : array-like of shape (d, head_dim) or None, default=None
            The keys of every started slot; required when the keys are learned,
            refused when they are known (``key_map``).
        basis : array-like of shape (head_dim, k) or None, default=None
            Orthonormal columns, ``k`` at least the largest started rank.
        slots : sequence of int or None, default=None
            The slots to start; ``None``: all of them.
        """
        query = self._projection(query, "query")
        if self.learned_keys == (key is None):
            raise ValueError("start_from needs key exactly when the keys are learned")
        key = None if key is None else self._projection(key, "key")
        slots = range(len(self.ranks)) if slots is None else slots
        if basis is None:
            U, S, Vh = torch.linalg.svd(query.double(), full_matrices=False)
            root = S.sqrt()
            left, right = U * root, Vh.T * root
        else:
            right = torch.as_tensor(basis, dtype=torch.float64, device=query.device)
            if right.shape[0] != self.head_dim or right.shape[1] < max(
                    self.ranks[s] for s in slots):
                raise ValueError(f"basis must have shape (head_dim, k) with head_dim = "
                                 f"{self.head_dim} and k >= the largest started rank; got "
                                 f"{tuple(right.shape)}")
            left = query.double() @ right
        for slot in slots:
            r = self.ranks[slot]
            self.query_in[slot].zero_()
            self.query_out[slot].zero_()
            self.query_in[slot, :, :r] = left[:, :r].to(self.query_in.dtype)
            self.query_out[slot, :, :r] = right[:, :r].to(self.query_out.dtype)
            if key is not None:
                self.key[slot] = key

    def _projection(self, weight, name):
        weight = torch.as_tensor(weight, dtype=torch.float32, device=self.query_in.device)
        if tuple(weight.shape) != (self.d, self.head_dim):
            raise ValueError(f"the {name} projection to start from must have shape (d, "
                             f"head_dim) = ({self.d}, {self.head_dim}); got "
                             f"{tuple(weight.shape)}")
        return weight

    # -- what the student computes -------------------------------------------------
    def _queries_keys(self, X, slots):
        """Rotated queries and keys of the slots ``slots``, rank-major ``(S, n, L, head_dim)``.

        One product projects the tokens on every slot's used ``A`` columns and
        keys; each slot's ``r`` columns then meet its own ``C``.
        """
        n, L, d = X.shape
        R, h = len(slots), self.head_dim
        used = [slot * self.r_max + j for slot in slots for j in range(self.ranks[slot])]
        columns = torch.tensor(used, dtype=torch.long, device=X.device)
        A = self.query_in.permute(1, 0, 2).reshape(d, -1)[:, columns]
        tokens = X.reshape(n * L, d)
        if self.learned_keys:
            keys = (self.key.permute(1, 0, 2) if R == len(self.ranks) else
                    self.key[list(slots)].permute(1, 0, 2)).reshape(d, R * h)
            projected = tokens @ torch.cat([A, keys], dim=1)
            parts = projected.split([*(self.ranks[s] for s in slots), keys.shape[1]], dim=1)
        else:  # one set of keys for every slot, a product apart: it needs no gradient
            projected = tokens @ A
            parts = projected.split([self.ranks[s] for s in slots], dim=1)
        queries = torch.stack([part @ self.query_out[s, :, :self.ranks[s]].T
                               for part, s in zip(parts, slots)]).view(R, n, L, h)
        if self.learned_keys:
            keys = parts[-1].view(n * L, R, h).transpose(0, 1).reshape(R, n, L, h)
        else:
            keys = (tokens @ self.key_map.to(A.dtype)).view(1, n, L, h)
        if self.query_norm is not None:
            queries = self.query_norm.apply(queries, X)
        if self.key_norm is not None:
            keys = self.key_norm.apply(keys, X)
        cos, sin = rope_tables(self.inv_freq, L, projected.dtype, X.device, self.rope_scaling)
        keys = rotate(keys, cos, sin)
        return rotate(queries, cos, sin), keys.expand(R, -1, -1, -1)

    def _weights(self, X, slots):
        """Attention weights of the slots ``slots``, rank-major ``(S, n, L, L)``."""
        queries, keys = self._queries_keys(X, slots)
        scores = soft_cap((queries @ keys.transpose(-1, -2)) * self.score_scale, self.softcap)
        if self.causal or self.window is not None:
            keep = visible_keys(scores.shape[-1], self.causal, self.window, scores.device)
            scores = scores.masked_fill(~keep, float("-inf"))
        return row_softmax(scores)

    def _values(self, X, slots):
        if self.learned_values:
            n, L, d = X.shape
            values = torch.matmul(X.reshape(n * L, d), self.value[list(slots)])
            return values.view(len(slots), n, L, self.d_out)
        return known_values(X, self.value_map, len(slots))

    def _all(self, slots):
        return range(len(self.ranks)) if slots is None else list(slots)

    def mixer(self, X):
        return self._weights(X, self._all(None)).transpose(0, 1)

    def _sequence_output(self, X, slots=None):
        slots = self._all(slots)
        return (self._weights(X, slots) @ self._values(X, slots)).transpose(0, 1)

    def forward(self, X, slots=None):
        """Predictions of the slots ``slots`` (all by default), ``(n, S, L, d_out)``.

        Parameters
        ----------
        X : torch.Tensor of shape (n, L, d)
        slots : sequence of int or None, default=None
            Indices of the slots to compute (a distillation leaves out the
            slots that have converged); ``None``: every slot.

        Returns
        -------
        Y : torch.Tensor of shape (n, S, L, d_out), or (n, S, d_out) with ``final_only``
        """
        out = self._sequence_output(X, slots)
        return out[:, :, -1, :] if self.final_only else out
