"""Min-IP feature-rank bounds of the Min-IP paper.

Paper: "Three tokens force exponential feature rank in nonnegative kernel
attention". The transcript bound of finite-precision sketch models, the
approximate-identity lemma and the feature-rank certificate of a witness code;
the code machinery (overlaps, witness chains) is :mod:`intrinsic_rank.codes`,
shared with the Min-IP data of :mod:`intrinsic_rank.datasets`.
"""

import numpy as np

from .._validation import check_int, check_real
from ..codes import (
    chain_steps,
    check_constant_weight_code,
    code_overlaps,
    full_family_reach,
    restricted_reach,
)
from ._common import Certificate, check_size, finite_result

__all__ = [
    "transcript_bound",
    "approximate_identity_rank_bound",
    "witness_feature_rank_bound",
]


def transcript_bound(n_answers, alphabet_size):
    """Finite-precision transcript lower bound ``q * log2(s + 1)`` bits.

    The Min-IP paper: for multi-head, multi-layer sketch models whose
    cross-token channels carry symbols of a finite alphabet, solving ``q``
    independent answers, each taking one of ``s + 1`` values, needs a transcript
    (total bits communicated across tokens) of at least ``q * log2(s + 1)``
    bits: the transcript must distinguish the ``(s + 1)**q`` joint answers.

    Parameters
    ----------
    n_answers : int
        Number ``q >= 1`` of independent answers.
    alphabet_size : int
        ``s >= 0``, as in the paper: every answer takes ``s + 1`` values.

    Returns
    -------
    bits : float
        The lower bound on the transcript length, in bits.

    Examples
    --------
    >>> transcript_bound(10, 3)
    20.0
    >>> transcript_bound(5, 0)
    0.0
    """
    q = check_size(n_answers, "n_answers", 1)
    s = check_size(alphabet_size, "alphabet_size", 0)
    log2_values = np.log2(s + 1) if s + 1 < 2**63 else np.log2(float(s + 1))
    return finite_result(lambda: q * log2_values, "the transcript bound q * log2(s + 1)")


def approximate_identity_rank_bound(n, eps):
    """Approximate-identity lemma: ``rank(A) >= n / (1 + (n - 1) eps^2)``.

    For a real ``n x n`` matrix ``A`` with unit diagonal and off-diagonal entries
    of absolute value at most ``eps``: the ``k <= rank(A)`` nonzero eigenvalues
    sum to ``tr(A) = n``, and by Cauchy-Schwarz and Schur's inequality
    ``n^2 = |sum lambda_i|^2 <= k sum |lambda_i|^2 <= rank(A) ||A||_F^2``, with
    ``||A||_F^2 <= n + n (n - 1) eps^2``. This is the step of the Min-IP paper
    (the Min-IP paper) that turns kernel-weight dominance into a feature-rank
    bound.

    Parameters
    ----------
    n : int
        Size ``n >= 1`` of the matrix.
    eps : float
        Bound ``eps >= 0`` on the off-diagonal magnitudes.

    Returns
    -------
    bound : float
        The lower bound on ``rank(A)`` (rank is an integer, so ``rank(A)`` is at
        least its ceiling).

    Examples
    --------
    >>> approximate_identity_rank_bound(10, 0.0)
    10.0
    >>> approximate_identity_rank_bound(10, 1 / 3)
    5.0
    """
    n = check_size(n, "n", 1)
    eps = check_real(eps, "eps", 0.0)
    if n == 1:  # a 1 x 1 matrix with unit diagonal has rank 1, whatever eps
        return 1.0
    try:
        square = eps**2
    except OverflowError:  # eps > 1.3e154: the bound underflows to 0
        square = float("inf")
    return float(n / (1.0 + (n - 1) * square))


def witness_feature_rank_bound(
    codewords, gap=1, ratio=None, triples=None, return_info=False
):
    """Feature-rank lower bound implied by a Min-IP witness code (the Min-IP paper).

    Setting (the Min-IP paper): a normalised nonnegative kernel head with kernel
    ``alpha(x, z) = <phi_Q(x), phi_K(z)> >= 0`` of feature rank ``r`` answers the
    length-3 witnesses (two candidates ``a, b``, then the query ``q``, with
    ``<q, a> + gap = <q, b>``) built by ``make_min_ip_witness_suite`` in
    :mod:`intrinsic_rank.datasets`. The matrix ``K[x, z] = alpha(x, z)`` has
    rank at most ``r``.

    **Assumption (dominance with margin ``ratio``), not proved here.** Every
    witness ``(q; a, b)`` of the family is solved with
    ``alpha(q, a) >= ratio * alpha(q, b)`` and ``alpha(q, a) > 0``, with feature
    maps shared by the two candidate positions (as in the students of this
    package, which have no positional information). With ``ratio = 2`` the
    better candidate gets at least 2/3 of the two candidates' normalised
    weight. Be aware that this is a modelling choice: for a readout that
    averages the candidates' overlaps, error < 1/2 only forces
    ``alpha(q, a) > (2 gap - 1) alpha(q, b)``, i.e. a ratio just above 1 when
    ``gap = 1`` (``ratio = 2`` then corresponds to error < 1/3). The paper's
    gap-domination lemma, which derives the ratio from error < 1/2 for any
    affine readout, is not reproduced.

    **Argument (rigorous given the assumption).**

    1. Amplification over Boolean overlaps: for query ``q``, if candidates
       ``c_0, ..., c_k`` have overlaps ``<q, c_t> = <q, c_0> + t gap`` and every
       consecutive ``(q; c_t, c_{t+1})`` is a witness of the family, then
       ``alpha(q, c_0) >= ratio**k alpha(q, c_k)``. Every chain from ``z`` to
       ``z'`` has the same length ``k = (<q, z'> - <q, z>) / gap``.
    2. Pairs ``(q_i, z_i)``, ``i = 1..n``, such that for all ``i != j`` a chain
       leads from ``z_i`` to ``z_j`` for query ``q_i`` (length ``k_ij >= 1``).
       Scaling row ``i`` of the submatrix ``K[q_i, z_j]`` by
       ``1 / alpha(q_i, z_i)`` gives a matrix ``M`` of rank ``<= r`` with unit
       diagonal and ``0 <= M_ij <= ratio**(-k_ij)``.
    3. Approximate identity (:func:`approximate_identity_rank_bound`, in its
       entrywise form ``rank(M) >= tr(M)^2 / ||M||_F^2``):
       ``r >= n^2 / (n + sum_{i != j} ratio**(-2 k_ij))``.

    The pairs are chosen greedily from the code (for each query, the candidates
    with the largest reach; then a greedy clique of mutually dominated pairs,
    keeping its best prefix), so the value is a valid bound under the
    assumption but not necessarily the best this argument gives.

    For the default suite (``make_min_ip_witness_suite(random_state=0)``: 24
    bits, weight 12, 400 codewords) the full family gives about 27.9 (so
    ``r >= 28``) with ``ratio = 2`` and about 11.0 with ``ratio = 1.5``; the
    1272 sampled triples alone (``triples=info.triples``) give only 1.6, since
    few chains of sampled witnesses exist. These numbers follow from the
    assumption above and are not the paper's bound (``r >= 8`` for its own
    construction).

    Parameters
    ----------
    codewords : array-like of shape (n_codewords, n_bits)
        A constant-weight code of distinct 0/1 words (``info.codewords`` of a
        witness suite).
    gap : int, default=1
        Overlap gap of the witnesses.
    ratio : float or None, default=None
        Dominance margin, ``> 1``; ``None`` means 2.
    triples : array-like of shape (k, 3) or None, default=None
        Witnesses assumed solved, as indices (query, better, worse) into
        ``codewords`` (``info.triples`` of a suite). ``None`` means every valid
        witness triple of the code (the full family).
    return_info : bool, default=False
        Also return a dict with attribute access holding the certificate:
        ``queries`` and ``candidates`` (codeword indices of the pairs
        ``(q_i, z_i)``), ``steps`` (the ``k_ij``, 0 on the
        diagonal), ``offdiag_bound`` (``ratio**(-k_ij)``), ``ratio``, ``gap``,
        ``n_pairs``.

    Returns
    -------
    bound : float
        Lower bound on the feature rank ``r`` (0.0 when no witness exists; the
        rank is an integer, so ``r`` is at least its ceiling).
    info : dict with attribute access, only if ``return_info``

    Examples
    --------
    All six words of weight 2 in 4 bits: complements overlap in 0 bits, other
    pairs in 1. The pairs ``(q, complement of q)``, one per complementary pair,
    dominate each other with ``k = 1``: ``r >= 3 / (1 + 2 / 4) = 2``.

    >>> import itertools
    >>> import numpy as np
    >>> code = np.array([[int(i in s) for i in range(4)]
    ...                  for s in itertools.combinations(range(4), 2)])
    >>> witness_feature_rank_bound(code)
    2.0
    """
    codewords, weight = check_constant_weight_code(codewords)
    overlaps = code_overlaps(codewords)
    gap = check_int(gap, "gap", 1)
    if ratio is None:
        ratio = 2.0
    ratio = check_real(ratio, "ratio", 1.0, low_open=True)
    if triples is None:
        queries, keys, reach_rows = _full_family_candidates(overlaps, weight, gap)
    else:
        queries, keys, reach_rows = _restricted_candidates(overlaps, gap, triples)
    if not queries:
        bound = 0.0
        queries = keys = np.zeros(0, dtype=np.int64)
    else:
        bound, queries, keys = _greedy_clique(overlaps, np.array(queries), np.array(keys),
                                              np.array(reach_rows), gap, ratio)
    if not return_info:
        return bound
    steps_ij = chain_steps(overlaps, queries, keys, gap)
    off_diagonal = ~np.eye(len(queries), dtype=bool)
    return bound, Certificate(
        queries=queries,
        candidates=keys,
        steps=steps_ij,
        offdiag_bound=np.where(off_diagonal, ratio ** (-steps_ij.astype(float)), 1.0),
        ratio=ratio,
        gap=gap,
        n_pairs=len(queries),
    )


def _full_family_candidates(overlaps, weight, gap):
    """Candidate pairs ``(q, z)`` of the full witness family with their reach sets
    ``R(q, z)`` (boolean rows): per query, the keys of the largest reach."""
    n_codewords = overlaps.shape[0]
    others = ~np.eye(n_codewords, dtype=bool)
    queries, keys, reach_rows = [], [], []
    counts, steps = full_family_reach(overlaps, weight, gap)
    for q in range(n_codewords):
        # Reach size of a candidate at overlap v: the candidates on the
        # populated levels v + gap, ..., v + steps[q, v] * gap.
        size_of_level = np.array([
            counts[q, v + gap * np.arange(1, steps[q, v] + 1)].sum()
            for v in range(weight + 1)
        ])
        reach_size = np.where(others[q], size_of_level[overlaps[q]], 0)
        if reach_size.max() == 0:
            continue
        for z in np.flatnonzero(reach_size == reach_size.max()):
            diff = overlaps[q] - overlaps[q, z]
            row = (
                others[q] & (diff > 0) & (diff % gap == 0)
                & (diff <= gap * steps[q, overlaps[q, z]])
            )
            queries.append(q)
            keys.append(z)
            reach_rows.append(row)
    return queries, keys, reach_rows


def _restricted_candidates(overlaps, gap, triples):
    """Candidate pairs ``(q, z)`` and their reach sets when only ``triples`` are witnesses."""
    n_codewords = overlaps.shape[0]
    queries, keys, reach_rows = [], [], []
    for q, nodes in restricted_reach(overlaps, gap, triples).items():
        sizes = {z: len(r) for z, r in nodes.items()}
        best = max(sizes.values())
        for z in sorted(z for z, s in sizes.items() if s == best):
            row = np.zeros(n_codewords, dtype=bool)
            row[list(nodes[z])] = True
            queries.append(q)
            keys.append(z)
            reach_rows.append(row)
    return queries, keys, reach_rows


def _greedy_clique(overlaps, queries, keys, reach, gap, ratio):
    """The bound ``s^2 / (s + mass)`` of a greedy clique of mutually dominating pairs,
    keeping its best prefix; the bound and the chosen pairs' queries and keys."""
    # dominated[i, j]: a chain leads from z_i to z_j for query q_i.
    dominated = reach[:, keys]
    compatible = dominated & dominated.T
    np.fill_diagonal(compatible, False)
    k = chain_steps(overlaps, queries, keys, gap)
    mass = np.where(compatible, ratio ** (-2.0 * np.where(compatible, k, 0)), 0.0)
    mass = mass + mass.T  # both ordered pairs (i, j) and (j, i)
    candidate = np.ones(len(queries), dtype=bool)
    degree = compatible.sum(axis=1).astype(np.int64)
    added_mass = np.zeros(len(queries))
    order, total, best, best_size = [], 0.0, 0.0, 0
    while candidate.any():
        pool = np.flatnonzero(candidate)
        # Most compatible candidates first, then the least added mass.
        pick = pool[np.lexsort((added_mass[pool], -degree[pool]))[0]]
        order.append(pick)
        total += added_mass[pick]
        size = len(order)
        value = size**2 / (size + total)
        if value > best:
            best, best_size = value, size
        dropped = candidate & ~compatible[pick]
        candidate &= compatible[pick]
        degree -= compatible[:, dropped].sum(axis=1)
        added_mass += mass[:, pick]
    chosen = np.array(order[:best_size])
    return float(best), queries[chosen], keys[chosen]
