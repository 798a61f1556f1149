"""The planted-rank test of ``r*_attn``: a head's query replaced by a sharp rank-``k`` plant.

Each head's query projection becomes a rank-``k`` plant (:func:`plant_query`: the
SVD of its realised queries, the ``k`` kept directions given equal variance),
optionally moved by one quantisation step of the model's weights (an approximate
plant, as a quantised model would hold it). The plant must be *sharp*: its own best
rank-``(k-1)`` truncation must be at least ``PLANT_SHARPNESS`` (20) times ``tol`` away from
it; the equal value is ``gamma`` times the root mean square of the kept singular
values, for the first ``gamma`` of :data:`PLANT_SCALES` that makes it sharp. The map
(:func:`~intrinsic_rank.experiments.head_rank_map`) then measures the planted head by the same
procedure as any head, and ``r*_attn(tol) == k`` is the test.
"""

import dataclasses
import math

import numpy as np
from sklearn.utils import Bunch

from ..._validation import check_int
from ...inspection import head_output, query_basis, relative_error, truncated_head
from . import PLANT_SHARPNESS

__all__ = ["PLANT_SCALES", "check_plant_rank", "plant_query"]

PLANT_SCALES = (1.0, 2.0, 4.0, 8.0, 16.0)
"""Factors ``gamma`` tried, in order, for the planted singular values: ``gamma`` times the
root mean square of the ``k`` kept singular values of the head's realised queries."""

def plant_query(X, facts, rank, *, tol=0.02, scales=PLANT_SCALES, X_check=None, noise=None):
    """The head's query truncated to ``rank`` by the SVD of its queries, equal values, made sharp.

    The SVD is that of the head's realised queries ``X W_Q`` (all positions of
    ``X`` stacked): its ``rank`` leading right singular vectors ``V_k`` and values
    ``s_1 >= ... >= s_k`` give the plant ``W_Q V_k diag(s / s_i) V_k^T``, whose
    queries on ``X`` have ``rank`` uncorrelated directions of equal variance ``s^2``
    -- what equal singular values mean for the synthetic teachers, whose tokens are
    isotropic. ``s`` is ``gamma`` times the root mean square of ``s_1 .. s_k``, for
    the first ``gamma`` of ``scales`` at which the plant is sharp: its own best
    truncation to rank ``rank - 1`` (by the SVD of its queries) differs from it, on
    ``X_check``, by at least ``PLANT_SHARPNESS * tol`` relative to the planted output's
    variance. The plant has no query bias.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
        Inputs of the head whose queries define the directions.
    facts : HeadFacts
    rank : int
        The planted rank, ``2 <= rank < min(d_model, head_dim)``.
    tol : float, default=0.02
        The tolerance the plant is judged at.
    scales : sequence of float, default=PLANT_SCALES
    X_check : ndarray or None, default=None
        Inputs on which sharpness is judged (held out from ``X``); ``None``: ``X``.
    noise : ndarray of shape (d_model, head_dim) or None, default=None
        Added to the planted query (an approximate plant); its truncations are
        then those of the noisy plant.

    Returns
    -------
    plant : Bunch
        ``facts`` (the head with the planted query and no query bias),
        ``scale`` (``gamma``), ``sharpness`` (the relative error of the rank
        ``rank - 1`` truncation) and ``sharp`` (whether any scale was sharp;
        when not, the plant at the last scale, which must not be used).

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (16, 12))
    >>> data = head_activations("default", ids, [(1, 0)])[1, 0]
    >>> plant = plant_query(data.X, data.facts, 4)
    >>> plant.facts.w_q.shape, int(np.linalg.matrix_rank(plant.facts.w_q))
    ((64, 16), 4)
    """
    limit = min(facts.d_model, facts.head_dim)
    rank = check_plant_rank(rank, limit)
    w_q = np.asarray(facts.w_q, dtype=np.float64)
    tokens = np.asarray(X, dtype=np.float64).reshape(-1, facts.d_model)
    _, values, Vh = np.linalg.svd(tokens @ w_q / math.sqrt(len(tokens)), full_matrices=False)
    if len(values) < rank or values[rank - 1] <= values[0] * 1e-6:
        raise ValueError(f"the queries of {facts.name} have rank below {rank} on these inputs: "
                         "nothing to plant")
    level = math.sqrt(float(np.mean(values[:rank] ** 2)))
    X_check = X if X_check is None else X_check
    zero = np.zeros_like(np.asarray(facts.b_q, dtype=np.float64))
    plant = None
    for gamma in scales:
        V = Vh[:rank].T
        w_plant = w_q @ V @ np.diag(gamma * level / values[:rank]) @ V.T
        if noise is not None:
            w_plant = w_plant + noise
        full = dataclasses.replace(facts, w_q=w_plant, b_q=zero)
        basis, _ = query_basis(X, full)
        target = head_output(X_check, full)
        sharpness = relative_error(head_output(X_check, truncated_head(full, basis, rank - 1)),
                                   target)
        plant = Bunch(facts=full, scale=float(gamma), sharpness=sharpness,
                      sharp=sharpness >= PLANT_SHARPNESS * tol)
        if plant.sharp:
            break
    return plant


def check_plant_rank(rank, width):
    """A planted rank as an int in ``[2, width - 1]``, or one line naming the bound.

    Examples
    --------
    >>> check_plant_rank(8, 64)
    8
    """
    return check_int(rank, "plant_rank", minimum=2, maximum=width - 1)
