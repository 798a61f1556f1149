"""Where a head's query error enters the model: the output metric of its queries.

A head's query projection cut to rank ``r`` changes its queries ``q_i`` (row ``i``
of ``X W_Q + b_Q``, before any rotation) by ``dq_i``. What the model sees is not
``dq_i`` but the change of the head's contribution to the layer's attention
output, ``O_i = Y_i W_O`` (its output through its slice of the output
projection). With the keys and values held, that change is, to first order,
``J_i dq_i`` with ``J_i = dO_i / dq_i`` (``d_model x head_dim``). The **output
metric** of the head on a set of inputs is the mean over every position of
every window

``M = mean_i J_i^T J_i``,

so that ``sum_i dq_i^T M dq_i`` approximates ``sum_i ||dO_i||^2``, the energy of
the output error where it enters the residual stream. A query direction the
attention pattern ignores, or whose effect the values and the output projection
cancel, weighs nothing in ``M``; a head whose output barely moves the residual
stream (a sink) has a small ``M`` altogether.

Cutting the realised queries to rank ``r`` *in this metric* (Eckart-Young on
``Q M^{1/2}``: :func:`metric_query_basis`, :func:`metric_truncated_query`) keeps
the query directions that matter to the head's output, and its tail energies
are the first-order output error of every rank at once: the currency in which
the heads of a whole model can be compared (:func:`output_error_curve`). With
the identity in place of ``M`` it is the data-aware truncation of
:func:`~intrinsic_rank.inspection.query_basis`. The metric is in the spirit of
the whitening of "SVD-LLM" (Wang et al., ICLR 2025), which truncates a weight in
the metric of its inputs; here the metric is on the output side, from the
head's own attention, values and output projection.
"""

from typing import NamedTuple

import warnings

import numpy as np
import torch

from .._validation import check_int, check_real
from ._head_recompute import _as_inputs, head_attention

__all__ = ["MetricBasis", "metric_query_basis", "metric_truncated_query",
           "output_error_curve", "query_output_metric"]

_CHUNK_BYTES = 96 << 20  # the float32 working set of one chunk of the metric's tangents


class MetricBasis(NamedTuple):
    """A head's realised queries in a metric: the basis a rank is cut on.

    Attributes
    ----------
    root, inv_root : ndarray of shape (head_dim, head_dim)
        ``M^{1/2}`` and ``M^{-1/2}`` of the (ridged) metric; the identity for
        the data-aware truncation.
    basis : ndarray of shape (head_dim, head_dim)
        Right singular vectors of ``Q M^{1/2}`` (``Q`` the realised queries), in
        order of decreasing singular value.
    energies : ndarray of shape (head_dim,)
        The squared singular values divided by the number of positions: the
        mean energy per position along each direction (in the metric's units:
        for the output metric, of the head's output through ``W_O``).
    """

    root: np.ndarray
    inv_root: np.ndarray
    basis: np.ndarray
    energies: np.ndarray


def _tensor(a):
    return torch.as_tensor(np.asarray(a), dtype=torch.float32)


def _check_w_o(w_o, facts):
    w_o = np.asarray(w_o, dtype=np.float64)
    if w_o.ndim != 2 or w_o.shape[0] != facts.head_dim or not np.isfinite(w_o).all():
        raise ValueError(f"w_o must be a finite array of shape ({facts.head_dim}, d_model) "
                         f"(the head's rows of the output projection); got shape {w_o.shape}")
    return w_o


def query_output_metric(X, facts, w_o=None, *, max_windows=None):
    """The output metric ``mean_i J_i^T J_i`` of a head's queries on its inputs.

    ``J_i`` is the derivative of the head's output through its slice of the
    output projection, ``O_i = Y_i w_o``, with respect to its query ``q_i``
    (before any norm or rotation), keys and values held: computed exactly, by
    one forward-mode derivative per query channel through every step of the head
    (:func:`~intrinsic_rank.inspection.head_attention`), in float32.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
        Inputs of the head's layer (after the pre-attention norm).
    facts : HeadFacts
    w_o : ndarray of shape (head_dim, d_model) or None, default=None
        The head's rows of the output projection; None: ``facts.w_o``.
    max_windows : int or None, default=None
        Use only the first windows (the metric is a mean; a few windows of a
        corpus give it to a few per cent).

    Returns
    -------
    metric : ndarray of shape (head_dim, head_dim), float64
        Symmetric, positive semi-definite.

    Raises
    ------
    ValueError
        For inputs or ``w_o`` of the wrong shape or not finite.

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> from intrinsic_rank.nn import load_model
    >>> loaded = load_model("default")
    >>> ids = np.random.default_rng(0).integers(0, 64, (4, 12))
    >>> data = head_activations(loaded, ids, ["L1H2"])[1, 2]
    >>> metric = query_output_metric(data.X, data.facts)
    >>> metric.shape, bool(np.allclose(metric, metric.T))
    ((16, 16), True)
    """
    X = _as_inputs(X, facts.d_model)
    w_o = _check_w_o(facts.w_o if w_o is None else w_o, facts)
    if max_windows is not None:
        X = X[:check_int(max_windows, "max_windows")]
    n, L, _ = X.shape
    hd = facts.head_dim
    gram = _tensor(w_o @ w_o.T)
    eye = torch.eye(hd)
    rows = max(1, _CHUNK_BYTES // (4 * L * (hd * (L + 2 * hd) + facts.d_model)))
    total = torch.zeros(hd, hd, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, n, rows):
            q, attend = head_attention(_tensor(X[start:start + rows]), facts)

            def tangent(direction, q=q, attend=attend):
                return torch.func.jvp(attend, (q,), (direction.expand_as(q),))[1]

            # (hd tangents, c, L, hd): column a of every J_i, through the values
            with warnings.catch_warnings():  # torch's own forward-mode rules still script
                warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated",
                                        DeprecationWarning)
                columns = torch.func.vmap(tangent)(eye[:, None, None, :])
            total += torch.einsum("acio,ow,bciw->ab", columns, gram, columns).double()
    metric = (total / (n * L)).numpy()
    return 0.5 * (metric + metric.T)


def _roots(metric, ridge):
    """``M^{1/2}`` and ``M^{-1/2}`` of ``M + ridge * mean eigenvalue * I``."""
    metric = 0.5 * (metric + metric.T)
    scale = float(np.trace(metric)) / len(metric)
    if not np.isfinite(scale) or scale <= 0:
        eye = np.eye(len(metric))
        return eye, eye  # a head whose output moves nothing: any basis is as good
    values, vectors = np.linalg.eigh(metric + ridge * scale * np.eye(len(metric)))
    values = np.clip(values, ridge * scale * 1e-3, None)
    return (vectors * np.sqrt(values)) @ vectors.T, (vectors / np.sqrt(values)) @ vectors.T


def metric_query_basis(X, facts, metric=None, *, ridge=1e-4):
    """The singular directions of a head's realised queries in a metric.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
        Inputs of the head's layer; the queries are ``X w_q + b_q``.
    facts : HeadFacts
    metric : ndarray of shape (head_dim, head_dim) or None, default=None
        From :func:`query_output_metric`; None: the identity (the data-aware
        truncation of :func:`~intrinsic_rank.inspection.query_basis`).
    ridge : float, default=1e-4
        Added to the metric as a share of its mean eigenvalue, so that directions
        it does not see keep a small weight and its inverse root exists.

    Returns
    -------
    basis : MetricBasis

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (4, 12))
    >>> data = head_activations("default", ids, ["L1H2"])[1, 2]
    >>> plain = metric_query_basis(data.X, data.facts)
    >>> bool(np.allclose(plain.root, np.eye(16))), plain.energies.shape
    (True, (16,))
    """
    X = _as_inputs(X, facts.d_model)
    ridge = check_real(ridge, "ridge", 0.0)
    hd = facts.head_dim
    if metric is None:
        root = inv_root = np.eye(hd)
    else:
        metric = np.asarray(metric, dtype=np.float64)
        if metric.shape != (hd, hd) or not np.isfinite(metric).all():
            raise ValueError(f"metric must be a finite ({hd}, {hd}) array; got shape "
                             f"{metric.shape}")
        root, inv_root = _roots(metric, ridge)
    tokens = np.asarray(X, dtype=np.float64).reshape(-1, facts.d_model)
    queries = tokens @ np.asarray(facts.w_q, np.float64) + np.asarray(facts.b_q, np.float64)
    _, values, vt = np.linalg.svd(queries @ root, full_matrices=False)
    basis = np.zeros((hd, hd))
    basis[:, :len(vt)] = vt.T
    if len(vt) < hd:  # fewer positions than channels: complete the basis
        q, _ = np.linalg.qr(np.concatenate([vt.T, np.eye(hd)], axis=1))
        basis[:, len(vt):] = q[:, len(vt):hd]
    energies = np.zeros(hd)
    energies[:len(values)] = values ** 2 / len(tokens)
    return MetricBasis(root, inv_root, basis, energies)


def metric_truncated_query(facts, basis, rank):
    """A head's query projection cut to ``rank`` in a metric, as factors.

    The realised queries are projected on the first ``rank`` directions of
    ``basis`` in the metric's coordinates: ``w_q`` becomes
    ``w_q M^{1/2} V_r V_r^T M^{-1/2} = A @ C`` and ``b_q`` becomes ``a @ C``.

    Parameters
    ----------
    facts : HeadFacts
    basis : MetricBasis
        From :func:`metric_query_basis` on the head's training inputs.
    rank : int
        ``1 <= rank <= head_dim``.

    Returns
    -------
    A : ndarray of shape (d_model, rank)
    a : ndarray of shape (rank,)
        The query bias's coordinates (zeros for a head without one).
    C : ndarray of shape (rank, head_dim)

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (4, 12))
    >>> data = head_activations("default", ids, ["L1H2"])[1, 2]
    >>> A, a, C = metric_truncated_query(data.facts, metric_query_basis(data.X, data.facts), 3)
    >>> A.shape, C.shape, int(np.linalg.matrix_rank(A @ C))
    ((64, 3), (3, 16), 3)
    """
    rank = check_int(rank, "rank", minimum=1, maximum=facts.head_dim)
    kept = basis.basis[:, :rank]
    A = np.asarray(facts.w_q, np.float64) @ basis.root @ kept
    a = np.asarray(facts.b_q, np.float64) @ basis.root @ kept
    return A, a, kept.T @ basis.inv_root


def output_error_curve(basis, output_energy):
    """The first-order output error of every rank, as a share of the layer's output.

    Parameters
    ----------
    basis : MetricBasis
        In the output metric (:func:`query_output_metric`).
    output_energy : float
        The mean energy per position of the layer's attention output (every
        head through the output projection, on the same inputs).

    Returns
    -------
    curve : ndarray of shape (head_dim + 1,)
        ``curve[r]``: the energy of the directions after the first ``r``, over
        ``output_energy``; ``curve[head_dim] = 0``.

    Examples
    --------
    >>> from intrinsic_rank.inspection import MetricBasis
    >>> basis = MetricBasis(np.eye(3), np.eye(3), np.eye(3), np.array([4.0, 2.0, 1.0]))
    >>> output_error_curve(basis, 10.0).tolist()
    [0.7, 0.3, 0.1, 0.0]
    """
    output_energy = check_real(output_energy, "output_energy", 0.0, low_open=True)
    energies = np.asarray(basis.energies, dtype=np.float64)
    tail = np.append(np.cumsum(energies[::-1])[::-1], 0.0)
    return tail / output_energy
