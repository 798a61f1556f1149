"""A head's output recomputed from its input: the recipe of :class:`HeadFacts`.

:func:`head_output` computes, in float64, what the head computes inside the model
(:class:`~intrinsic_rank.inspection.HeadFacts`: its projections, query and key norms,
rotary positions, scale, soft-cap, causal mask and sliding window, values);
:func:`head_attention` gives its two halves in torch -- the queries before any norm
or rotation, and the function from them to the output -- for a caller that changes
the queries (their derivatives, a rank cut on them).
"""

import numpy as np
import torch

from ..nn import rope_tables, rotate, soft_cap, visible_keys

__all__ = ["head_attention", "head_output"]

_CHUNK_BYTES = 64 << 20  # the float64 working set of one chunk of head_output


def _as_inputs(X, d_model):
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    X = np.asarray(X)
    if X.dtype.kind not in "fiu" or X.ndim != 3 or X.shape[-1] != d_model or 0 in X.shape:
        raise ValueError(f"X must be a real array of shape (n, L, {d_model}) (the head's "
                         f"d_model); got shape {X.shape} and dtype {X.dtype}")
    if not np.isfinite(X).all():
        raise ValueError("X holds NaN or infinity")
    return X


def _as_query(w_q, facts):
    w_q = np.asarray(w_q, dtype=np.float64)
    if w_q.shape != (facts.d_model, facts.head_dim) or not np.isfinite(w_q).all():
        raise ValueError(f"w_q must be a finite array of shape ({facts.d_model}, "
                         f"{facts.head_dim}); got shape {w_q.shape}")
    return w_q


def _chunk_rows(facts, L):
    """Sequences per chunk of :func:`head_output`: about ``_CHUNK_BYTES`` of float64 each."""
    norms = sum(n.width for n in (facts.q_norm, facts.k_norm)
                if n is not None and n.axis == "layer")
    per_row = 8 * L * (2 * L + facts.d_model + 3 * facts.head_dim + norms)
    return max(1, _CHUNK_BYTES // per_row)


def head_attention(x, facts, *, w_q=None):
    """A head's queries on ``x``, and the function from its queries to its output.

    The two halves of :func:`head_output`, in torch, for a caller that changes the
    queries (a derivative with respect to them, a rank cut on them): ``q = x w_q +
    b_q`` *before* any norm or rotation, and ``attend(q)``, every step of the
    head after it (its query norm, rotation, scale, soft-cap, mask, softmax and
    values) with the keys and values of ``x`` held. ``attend(q)`` on the returned
    ``q`` is ``head_output``.

    Parameters
    ----------
    x : torch.Tensor of shape (n, L, d_model)
        Float32 or float64; every step runs in its dtype.
    facts : HeadFacts
    w_q : array-like of shape (d_model, head_dim) or None, default=None

    Returns
    -------
    q : torch.Tensor of shape (n, L, head_dim)
    attend : callable
        ``attend(q) -> Y`` of shape ``(n, L, head_dim)``.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from intrinsic_rank.inspection import head_activations
    >>> from intrinsic_rank.nn import load_model
    >>> ids = np.random.default_rng(0).integers(0, 64, size=(2, 12))
    >>> data = head_activations(load_model("default"), ids, [(1, 2)])[1, 2]
    >>> q, attend = head_attention(torch.from_numpy(data.X).double(), data.facts)
    >>> bool(np.allclose(attend(q).numpy(), head_output(data.X, data.facts)))
    True
    """
    dtype, L = x.dtype, x.shape[-2]
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=dtype)  # noqa: E731
    wq, wk, wv, bq, bk, bv = map(t, (facts.w_q if w_q is None else w_q, facts.w_k,
                                     facts.w_v, facts.b_q, facts.b_k, facts.b_v))
    q, k, v = x @ wq + bq, x @ wk + bk, x @ wv + bv
    if facts.k_norm is not None:
        k = facts.k_norm.apply(k, x)
    rope = (rope_tables(facts.inv_freq, L, dtype=dtype, scaling=facts.rope_scaling)
            if facts.positional == "rope" else None)
    if rope is not None:
        k = rotate(k, *rope)
    hidden = ~visible_keys(L, facts.causal, facts.window)
    rest = None if facts.q_norm is None else facts.q_norm.rest_squares(x)

    def attend(queries):
        if facts.q_norm is not None:
            queries = facts.q_norm.apply(queries, x, rest)
        if rope is not None:
            queries = rotate(queries, *rope)
        logits = soft_cap(facts.scale * (queries @ k.transpose(-1, -2)), facts.softcap)
        return torch.softmax(logits.masked_fill(hidden, float("-inf")), dim=-1) @ v

    return q, attend


def head_output(X, facts, *, w_q=None):
    """A head's output recomputed from its input with its own weights.

    ``Y = softmax(cap(scale * rope(n_q(X w_q + b_q)) rope(n_k(X w_k + b_k))^T) + mask)
    (X w_v + b_v)`` per sequence, positions ``0 .. L-1``: the recipe of
    :class:`HeadFacts` (``n_q``, ``n_k`` its norms, ``cap`` its soft-capping,
    ``mask`` causal and within its sliding window).

    Parameters
    ----------
    X : ndarray or torch.Tensor of shape (n, L, d_model)
        Inputs of the head's layer (as :func:`head_activations` returns them).
    facts : HeadFacts
    w_q : ndarray of shape (d_model, head_dim), default=None
        A query projection in place of the head's own (for instance its
        truncation to a low rank), *before* any norm (:class:`HeadFacts`'
        Notes); ``b_q`` stays the head's.

    Returns
    -------
    Y : ndarray of shape (n, L, head_dim), float64
        Computed in float64 throughout, in chunks of about 64 MiB.

    Raises
    ------
    ValueError
        For ``X`` of another width or not a finite 3-D array, ``w_q`` of
        another shape, or an output that overflows float64 (never NaN from
        finite inputs).

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank.inspection import head_activations
    >>> from intrinsic_rank.nn import load_model
    >>> loaded = load_model("default")
    >>> ids = np.random.default_rng(0).integers(0, 64, size=(2, 12))
    >>> data = head_activations(loaded, ids, [(1, 2)])[1, 2]
    >>> Y = head_output(data.X, data.facts)
    >>> bool(np.linalg.norm(Y - data.Y) / np.linalg.norm(data.Y) < 1e-5)
    True
    """
    X = _as_inputs(X, facts.d_model)
    w_q = facts.w_q if w_q is None else _as_query(w_q, facts)
    n, L, _ = X.shape
    rows = _chunk_rows(facts, L)
    Y = np.empty((n, L, facts.head_dim))
    with torch.no_grad():
        for start in range(0, n, rows):
            # a float64 copy: the inputs may be read-only (memory-mapped by a worker)
            x = torch.from_numpy(np.array(X[start:start + rows], dtype=np.float64))
            queries, attend = head_attention(x, facts, w_q=w_q)
            Y[start:start + rows] = attend(queries).numpy()
    if not np.isfinite(Y).all():
        raise ValueError(f"head_output: {facts.name}'s output overflows float64 on these "
                         f"inputs (largest |X| {float(np.abs(X).max()):.3g}): its projections "
                         "or scores are beyond the range of a number")
    return Y
