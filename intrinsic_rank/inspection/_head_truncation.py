"""A head's query truncated on its own inputs, and how precisely its weights are known.

Two training-free measurements of one attention head (:class:`HeadFacts`):

* **the data-aware truncation** of its query projection to rank ``r``: the
  realised queries ``q = X W_Q + b_Q`` of the head on a set of inputs are
  projected on their ``r`` leading right singular vectors ``V_r``, i.e. ``W_Q``
  and ``b_Q`` become ``W_Q V_r V_r^T`` and ``b_Q V_r V_r^T``. Among rank-``r``
  projections of the queries it keeps the most of their energy on those inputs
  (Eckart-Young on the query matrix); the SVD of the raw weights ``W_Q`` ignores
  the inputs, and on real heads starts far from them. Its relative error per
  rank on held-out inputs (:func:`truncation_risks`) is the training-free curve
  a trained student must beat or equal;
* **the precision floor**: the change of the head's output when its query weights
  move by one quantisation step of their storage format (:func:`precision_floor`).
  A tolerance finer than that asks for more than the weights themselves say.

Relative errors are mean squared errors over the **pooled variance** of the
reference output: the mean over output channels of the variance over every token
of every sequence (``1 - R^2``).
"""

import dataclasses

import numpy as np

from .._validation import check_int, check_seed, keyed_rng
from ._head_recompute import _as_inputs, head_output

__all__ = ["QUANTISATION_BLOCK", "QUANTISATION_LEVELS", "precision_floor",
           "quantisation_noise", "query_basis", "relative_error", "truncated_head",
           "truncation_risks"]

QUANTISATION_BLOCK = 32
"""Weights per block of the default quantisation grid (GGUF's Q4_0/Q4_1: 32)."""

QUANTISATION_LEVELS = 16
"""Levels per block of the default quantisation grid (4 bits: 16)."""


def relative_error(prediction, reference):
    """Mean squared error of ``prediction`` over the pooled variance of ``reference``.

    Parameters
    ----------
    prediction, reference : array-like of shape (..., width)

    Returns
    -------
    error : float
        ``mean((prediction - reference)^2) / mean_c var(reference[..., c])``, the
        variance over every row; ``inf`` when the reference does not vary and the
        prediction differs from it, 0 when both agree.

    Examples
    --------
    >>> relative_error(np.array([[1.0], [3.0]]), np.array([[0.0], [2.0]]))
    1.0
    """
    reference = np.asarray(reference, dtype=np.float64)
    flat = reference.reshape(-1, reference.shape[-1])
    variance = float(np.mean(np.var(flat, axis=0)))
    error = float(np.mean((np.asarray(prediction, dtype=np.float64) - reference) ** 2))
    if variance == 0:
        return 0.0 if error == 0 else float("inf")
    return error / variance


def _queries(X, facts):
    X = _as_inputs(X, facts.d_model)
    tokens = np.asarray(X, dtype=np.float64).reshape(-1, facts.d_model)
    return tokens @ np.asarray(facts.w_q, dtype=np.float64) + np.asarray(facts.b_q)


def query_basis(X, facts):
    """The right singular vectors of a head's realised queries ``X W_Q + b_Q`` on ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
        Inputs of the head's layer (all positions are stacked).
    facts : HeadFacts

    Returns
    -------
    basis : ndarray of shape (head_dim, head_dim)
        Orthonormal columns, in order of decreasing singular value.
    singular_values : ndarray of shape (head_dim,)
        Of the queries divided by the square root of their count (root mean
        square per direction).

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (4, 10))
    >>> data = head_activations("default", ids, ["L1H0"])[1, 0]
    >>> basis, values = query_basis(data.X, data.facts)
    >>> basis.shape, bool(np.allclose(basis.T @ basis, np.eye(16)))
    ((16, 16), True)
    """
    queries = _queries(X, facts)
    _, values, Vh = np.linalg.svd(queries / np.sqrt(len(queries)), full_matrices=False)
    basis = np.zeros((facts.head_dim, facts.head_dim))
    basis[:, :len(Vh)] = Vh.T
    if len(Vh) < facts.head_dim:  # fewer tokens than channels: complete the basis
        q, _ = np.linalg.qr(np.concatenate([Vh.T, np.eye(facts.head_dim)], axis=1))
        basis[:, len(Vh):] = q[:, len(Vh):facts.head_dim]
    full = np.zeros(facts.head_dim)
    full[:len(values)] = values
    return basis, full


def truncated_head(facts, basis, rank):
    """The head with its query projected on the first ``rank`` columns of ``basis``.

    Parameters
    ----------
    facts : HeadFacts
    basis : ndarray of shape (head_dim, k)
        Orthonormal columns (:func:`query_basis`).
    rank : int
        ``0 <= rank <= k``.

    Returns
    -------
    facts : HeadFacts
        ``w_q V_r V_r^T`` and ``b_q V_r V_r^T`` in place of ``w_q`` and ``b_q``.

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_facts
    >>> facts = head_facts("default", 1, 0)
    >>> cut = truncated_head(facts, np.eye(16), 3)
    >>> int(np.linalg.matrix_rank(cut.w_q))
    3
    """
    rank = check_int(rank, "rank", minimum=0)
    basis = np.asarray(basis, dtype=np.float64)
    if rank > basis.shape[1]:
        raise ValueError(f"rank={rank} exceeds the {basis.shape[1]} columns of the basis")
    projector = basis[:, :rank] @ basis[:, :rank].T
    return dataclasses.replace(facts, w_q=np.asarray(facts.w_q) @ projector,
                               b_q=np.asarray(facts.b_q) @ projector)


def truncation_risks(X, Y, facts, basis, ranks):
    """The training-free curve: relative error of the head truncated to each rank.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
        Held-out inputs of the head's layer.
    Y : ndarray of shape (n, L, head_dim)
        The head's outputs on them (the reference).
    facts : HeadFacts
    basis : ndarray of shape (head_dim, head_dim)
        From :func:`query_basis` on *other* (training) inputs.
    ranks : sequence of int

    Returns
    -------
    risks : ndarray of shape (len(ranks),)
        :func:`relative_error` of :func:`head_output` of each
        :func:`truncated_head` against ``Y``.

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (8, 10))
    >>> data = head_activations("default", ids, ["L1H0"])[1, 0]
    >>> basis, _ = query_basis(data.X[:6], data.facts)
    >>> risks = truncation_risks(data.X[6:], data.Y[6:], data.facts, basis, [1, 16])
    >>> bool(risks[0] > risks[1]), bool(risks[1] < 1e-9)
    (True, True)
    """
    return np.array([relative_error(head_output(X, truncated_head(facts, basis, r)), Y)
                     for r in ranks])


def quantisation_noise(weights, *, block=QUANTISATION_BLOCK, levels=QUANTISATION_LEVELS,
                       random_state=0):
    """One more rounding's worth of noise on a weight matrix: uniform in half a grid step.

    Each weight gets an independent uniform draw in ``[-s/2, s/2]``, ``s`` the step
    of a ``levels``-level grid spanning its block: the ``block`` consecutive
    weights along axis 0 (the input axis of a query projection ``w_q``) that feed
    one output channel, as GGUF's 4-bit formats store them (Q4_1: 32 weights, 16
    levels between their minimum and maximum).

    Parameters
    ----------
    weights : ndarray of shape (d, width)
    block : int, default=32
    levels : int, default=16
    random_state : int, tuple of int or numpy.random.Generator, default=0
        A seed, keys of a seed, or a generator.

    Returns
    -------
    noise : ndarray of shape (d, width), float64

    Examples
    --------
    >>> w = np.array([[0.0], [1.5], [3.0]])
    >>> noise = quantisation_noise(w, block=3, levels=4)
    >>> bool(np.all(np.abs(noise) <= 0.5))  # the step is 3.0 / 3 = 1.0
    True
    """
    weights = np.asarray(weights, dtype=np.float64)
    block = check_int(block, "block")
    levels = check_int(levels, "levels", minimum=2)
    steps = np.empty_like(weights)
    for first in range(0, len(weights), block):
        part = weights[first:first + block]
        steps[first:first + block] = (part.max(axis=0) - part.min(axis=0)) / (levels - 1)
    if isinstance(random_state, np.random.Generator):
        rng = random_state
    elif isinstance(random_state, tuple):
        rng = keyed_rng(*random_state)
    else:
        rng = keyed_rng(check_seed(random_state), 0)
    return steps * rng.uniform(-0.5, 0.5, size=weights.shape)


def precision_floor(X, facts, *, n_draws=3, block=QUANTISATION_BLOCK,
                    levels=QUANTISATION_LEVELS, random_state=0):
    """The change of a head's output under one more quantisation of its query weights.

    Every weight of ``w_q`` moves by :func:`quantisation_noise`: the error of one
    more rounding to a grid of ``levels`` levels per ``block`` weights (GGUF's
    Q4_1 by default). The floor is the mean over ``n_draws`` draws of the
    :func:`relative_error` of the perturbed head's output against the head's own.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
    facts : HeadFacts
    n_draws : int, default=3
    block : int, default=32
    levels : int, default=16
    random_state : int, default=0

    Returns
    -------
    floor : float

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (4, 10))
    >>> data = head_activations("default", ids, ["L1H0"])[1, 0]
    >>> coarse = precision_floor(data.X, data.facts, levels=4)
    >>> fine = precision_floor(data.X, data.facts, levels=256)
    >>> bool(0 < fine < coarse)
    True
    """
    n_draws = check_int(n_draws, "n_draws")
    seed = check_seed(random_state)
    w_q = np.asarray(facts.w_q, dtype=np.float64)
    reference = head_output(X, facts)
    errors = []
    for draw in range(n_draws):
        noise = quantisation_noise(w_q, block=block, levels=levels, random_state=(seed, draw))
        errors.append(relative_error(head_output(X, facts, w_q=w_q + noise), reference))
    return float(np.mean(errors))
