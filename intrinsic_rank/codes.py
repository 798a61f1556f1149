"""Constant-weight codes and their overlaps: the one home of the Min-IP code machinery.

The Min-IP paper builds its Min-IP witnesses on a *constant-weight
code*: distinct 0/1 words of ``n_bits`` bits that all have Hamming weight
``w``. Everything about such a code that the data generators
(:mod:`intrinsic_rank.datasets`) and the witness certificate
(:func:`intrinsic_rank.bounds.witness_feature_rank_bound`) need lives here, so
both compute exactly the same numbers:

* :func:`random_constant_weight_code` -- a uniformly random code;
* :func:`check_boolean_tokens` and :func:`check_constant_weight_code` -- the
  validation of 0/1 tokens and of a code;
* :func:`code_overlaps` -- the integer overlaps ``<c_i, c_j>``;
* :func:`overlap_level_counts` and :func:`witness_blocks` -- for each query,
  how many other codewords sit at each overlap level, and how many witness
  triples ``(q, a, b)`` with ``<q, b> = <q, a> + gap`` that makes;
* :func:`full_family_reach`, :func:`restricted_reach` and :func:`chain_steps`
  -- which candidates a chain of witnesses leads to, and how long the chains
  are.

A *witness triple* ``(q, a, b)`` is a query ``q`` and two candidates ``a, b``,
both different from ``q``, with ``<q, a> + gap = <q, b>``: ``a`` is the better
(smaller-overlap) candidate. Distinct words of weight ``w`` overlap in at most
``w - 1`` bits, so ``<q, q> = w`` is the largest overlap of every row.

This module uses numpy and scikit-learn only (no torch).
"""

import itertools
import math

import numpy as np

from ._validation import check_random_state

__all__ = [
    "random_constant_weight_code",
    "check_boolean_tokens",
    "check_constant_weight_code",
    "code_overlaps",
    "overlap_level_counts",
    "witness_blocks",
    "full_family_reach",
    "restricted_reach",
    "chain_steps",
]

_ENUMERATE_CODE_LIMIT = 2**16  # enumerate all weight-w words below this count
_CHUNK = 4096  # random supports drawn per round above that


def _row_keys(bits):
    """One hashable key per row of a 0/1 matrix (for de-duplication)."""
    return [row.tobytes() for row in np.packbits(bits.astype(np.uint8), axis=1)]


def random_constant_weight_code(n_bits, weight, n_codewords, random_state=None):
    """``n_codewords`` distinct uniformly random words of Hamming weight ``weight``.

    Below ``2**16`` words of that weight all of them are enumerated and a random
    subset is taken; above, random supports are drawn in fixed-size chunks and
    repeats are rejected. Either way the words come in a uniformly random order,
    so the first ``k`` words are a uniformly random ``k``-word code.

    Parameters
    ----------
    n_bits : int
        Word length ``m``.
    weight : int
        Hamming weight ``w`` of every word, ``0 <= w <= m``.
    n_codewords : int
        Number of words, at most ``C(m, w)``.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed of the draw.

    Returns
    -------
    codewords : ndarray of shape (n_codewords, n_bits), float64
        Distinct 0/1 words.

    Raises
    ------
    ValueError
        If fewer than ``n_codewords`` words of that weight exist.

    Examples
    --------
    >>> code = random_constant_weight_code(6, 3, 5, random_state=0)
    >>> code.shape, code.sum(axis=1).tolist()
    ((5, 6), [3.0, 3.0, 3.0, 3.0, 3.0])
    """
    rng = check_random_state(random_state)
    available = math.comb(n_bits, weight)
    if n_codewords > available:
        raise ValueError(
            f"only C({n_bits}, {weight}) = {available} distinct words of weight "
            f"{weight} exist in {n_bits} bits; asked for n_codewords={n_codewords}"
        )
    if available <= _ENUMERATE_CODE_LIMIT:
        words = np.zeros((available, n_bits), dtype=np.float64)
        for row, support in enumerate(itertools.combinations(range(n_bits), weight)):
            words[row, list(support)] = 1.0
        return words[rng.permutation(available)[:n_codewords]]
    chosen, seen = [], set()
    while len(chosen) < n_codewords:
        keys = rng.random_sample((_CHUNK, n_bits))
        supports = np.argsort(keys, axis=1)[:, :weight]
        words = np.zeros((_CHUNK, n_bits), dtype=np.float64)
        np.put_along_axis(words, supports, 1.0, axis=1)
        for word, key in zip(words, _row_keys(words)):
            if key not in seen:
                seen.add(key)
                chosen.append(word)
    return np.array(chosen[:n_codewords])


def check_boolean_tokens(X, name="X"):
    """Return ``X`` as a float64 0/1 array, or raise naming the first bad value.

    Parameters
    ----------
    X : array-like
        Tokens, ``bool`` or of a numeric dtype; every entry must be 0 or 1.
    name : str, default="X"
        The argument's name, used in the error message.

    Returns
    -------
    X : ndarray of float64
        The same shape, entries 0.0 and 1.0.

    Raises
    ------
    ValueError
        If ``X`` has a non-numeric dtype or holds a value other than 0 and 1
        (NaN included).

    Examples
    --------
    >>> check_boolean_tokens([[True, False], [0, 1]])
    array([[1., 0.],
           [0., 1.]])
    >>> check_boolean_tokens([0.5, 1.0], name="codewords")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: tokens must be Boolean (0/1); codewords holds 1 other value(s), e.g. ...
    """
    X = np.asarray(X)
    if X.dtype == bool:
        return X.astype(np.float64)
    if not (np.issubdtype(X.dtype, np.number)):
        raise ValueError(
            f"tokens must be Boolean (0/1); {name} has non-numeric dtype {X.dtype}"
        )
    bad = ~((X == 0) | (X == 1))  # NaN fails both comparisons
    if np.any(bad):
        example = X[bad].flat[0]
        raise ValueError(
            f"tokens must be Boolean (0/1); {name} holds {int(bad.sum())} other "
            f"value(s), e.g. {example!r}"
        )
    return X.astype(np.float64)


def check_constant_weight_code(codewords, weight=None):
    """Validate a constant-weight code of distinct 0/1 words.

    Parameters
    ----------
    codewords : array-like of shape (n_codewords, n_bits)
        At least 3 distinct 0/1 words (a query and two candidates), all of the
        same Hamming weight.
    weight : int or None, default=None
        The weight the words must have; ``None`` accepts any common weight.

    Returns
    -------
    codewords : ndarray of shape (n_codewords, n_bits), float64
    weight : int
        Their common Hamming weight, in ``[1, n_bits - 1]``.

    Raises
    ------
    ValueError
        If ``codewords`` is not 2-D, not 0/1, holds fewer than 3 words, words
        of different weights (or not of ``weight``), or repeated words.

    Examples
    --------
    >>> code, w = check_constant_weight_code([[1, 1, 0], [1, 0, 1], [0, 1, 1]])
    >>> code.dtype, w
    (dtype('float64'), 2)
    >>> check_constant_weight_code([[1, 0, 0], [1, 1, 0], [0, 1, 1]])
    Traceback (most recent call last):
    ...
    ValueError: codewords must form a constant-weight code; got Hamming weights [1, 2]
    """
    codewords = np.asarray(codewords)
    if codewords.ndim != 2:
        raise ValueError(
            f"codewords must be 2-D (n_codewords, n_bits); got shape {codewords.shape}"
        )
    codewords = check_boolean_tokens(codewords, "codewords")
    n_codewords, n_bits = codewords.shape
    if n_codewords < 3:
        raise ValueError(
            f"codewords must hold at least 3 words (a query and two candidates); "
            f"got {n_codewords}"
        )
    weights = codewords.sum(axis=1)
    if np.any(weights != weights[0]):
        raise ValueError(
            "codewords must form a constant-weight code; got Hamming weights "
            f"{sorted(set(weights.astype(int).tolist()))}"
        )
    w = int(weights[0])
    if weight is not None and weight != w:
        raise ValueError(f"weight={weight} but the codewords have weight {w}")
    if not 1 <= w <= n_bits - 1:
        raise ValueError(f"codewords must have weight in [1, n_bits - 1]; got {w}")
    if np.unique(codewords, axis=0).shape[0] != n_codewords:
        raise ValueError("codewords must be distinct")
    return codewords, w


def code_overlaps(codewords):
    """Integer overlaps ``<c_i, c_j>`` of all pairs of codewords.

    Parameters
    ----------
    codewords : ndarray of shape (n_codewords, n_bits)
        0/1 words as float64 (as :func:`check_constant_weight_code` returns
        them); not validated here.

    Returns
    -------
    overlaps : ndarray of shape (n_codewords, n_codewords), int64
        Symmetric; the diagonal holds the weights.

    Examples
    --------
    >>> code_overlaps(np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]))
    array([[2, 1],
           [1, 2]])
    """
    # Float64 BLAS products of 0/1 vectors are exact integers.
    return np.rint(codewords @ codewords.T).astype(np.int64)


def overlap_level_counts(overlaps, weight):
    """For each query, how many *other* codewords have each overlap with it.

    Parameters
    ----------
    overlaps : ndarray of shape (n_codewords, n_codewords), int
        :func:`code_overlaps` of a code of weight ``weight``.
    weight : int
        The code's Hamming weight ``w``.

    Returns
    -------
    counts : ndarray of shape (n_codewords, weight + 1), int64
        ``counts[q, v]`` is the number of codewords ``c != q`` with
        ``<q, c> = v`` (the query itself, at level ``w``, is not counted).

    Examples
    --------
    The code ``1100, 1010, 0011`` of weight 2:

    >>> code = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1]], dtype=float)
    >>> overlap_level_counts(code_overlaps(code), 2)
    array([[1, 1, 0],
           [0, 2, 0],
           [1, 1, 0]])
    """
    n_codewords = overlaps.shape[0]
    counts = np.zeros((n_codewords, weight + 1), dtype=np.int64)
    for v in range(weight + 1):
        counts[:, v] = np.count_nonzero(overlaps == v, axis=1)
    counts[:, weight] -= 1  # the query itself (<q, q> = w)
    return counts


def witness_blocks(overlaps, weight, gap):
    """Count the witness triples ``(q, a, b)`` by query and overlap level.

    Parameters
    ----------
    overlaps : ndarray of shape (n_codewords, n_codewords), int
        :func:`code_overlaps` of a code of weight ``weight``.
    weight : int
        The code's Hamming weight ``w``.
    gap : int
        Overlap gap ``<q, b> - <q, a> >= 1`` of the witnesses.

    Returns
    -------
    counts : ndarray of shape (n_codewords, weight + 1), int64
        :func:`overlap_level_counts`.
    blocks : ndarray of shape (n_codewords, weight + 1 - gap), int64
        ``blocks[q, v] = counts[q, v] * counts[q, v + gap]``: the number of
        witnesses of query ``q`` whose better candidate has overlap ``v``.
        ``blocks.sum()`` is the number of valid triples of the code.

    Examples
    --------
    >>> code = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1]], dtype=float)
    >>> counts, blocks = witness_blocks(code_overlaps(code), 2, 1)
    >>> blocks.tolist(), int(blocks.sum())
    ([[1, 0], [0, 0], [1, 0]], 2)
    """
    counts = overlap_level_counts(overlaps, weight)
    blocks = counts[:, : weight + 1 - gap] * counts[:, gap:]
    return counts, blocks


def full_family_reach(overlaps, weight, gap):
    """Chain lengths when every valid witness triple of the code is solved.

    For query ``q`` the relations are ``a -> b`` for all candidates
    ``a, b != q`` with ``<q, b> = <q, a> + gap``; from a candidate at overlap
    ``v`` the chains reach every candidate at overlap ``v + t gap`` for
    ``t = 1, 2, ...`` as long as each intermediate level holds a candidate.

    Parameters
    ----------
    overlaps : ndarray of shape (n_codewords, n_codewords), int
        :func:`code_overlaps` of a code of weight ``weight``.
    weight : int
        The code's Hamming weight ``w``.
    gap : int
        Overlap gap of the witnesses, ``>= 1``.

    Returns
    -------
    counts : ndarray of shape (n_codewords, weight + 1), int64
        :func:`overlap_level_counts`.
    steps : ndarray of shape (n_codewords, weight + 1), int64
        ``steps[q, v]``: how many consecutive levels ``v + gap, v + 2 gap,
        ...`` are populated for query ``q``, i.e. how far a chain of witnesses
        from a candidate at overlap ``v`` goes.

    Examples
    --------
    The code ``1100, 1010, 0011``: from a candidate at overlap 0 one witness
    step reaches overlap 1, and overlap 2 holds no candidate.

    >>> code = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1]], dtype=float)
    >>> counts, steps = full_family_reach(code_overlaps(code), 2, 1)
    >>> counts.tolist(), steps.tolist()
    ([[1, 1, 0], [0, 2, 0], [1, 1, 0]], [[1, 0, 0], [1, 0, 0], [1, 0, 0]])
    """
    n = overlaps.shape[0]
    counts = overlap_level_counts(overlaps, weight)
    # steps[q, v]: how many consecutive levels v + gap, v + 2 gap, ... are populated.
    steps = np.zeros((n, weight + 1 + gap), dtype=np.int64)
    for v in range(weight - gap, -1, -1):
        steps[:, v] = np.where(counts[:, v + gap] > 0, 1 + steps[:, v + gap], 0)
    steps = steps[:, : weight + 1]
    return counts, steps


def restricted_reach(overlaps, gap, triples):
    """Reach sets of the relations ``a -> b`` given by explicit witness triples.

    Parameters
    ----------
    overlaps : ndarray of shape (n_codewords, n_codewords), int
        :func:`code_overlaps` of the code.
    gap : int
        Overlap gap of the witnesses, ``>= 1``.
    triples : array-like of shape (k, 3), int
        Witnesses as indices (query, better, worse) into the code.

    Returns
    -------
    reach : dict
        ``reach[q][a]`` is the set of candidates that some chain of the given
        witnesses of query ``q`` leads to from ``a`` (for every ``a`` that is
        the better candidate of a witness of ``q``).

    Raises
    ------
    ValueError
        If ``triples`` is not an integer array of shape ``(k, 3)``, does not
        index the code, or holds a row that is not a witness.

    Examples
    --------
    >>> overlaps = np.array([[3, 0, 1, 2], [0, 3, 2, 1], [1, 2, 3, 0], [2, 1, 0, 3]])
    >>> restricted_reach(overlaps, 1, [[0, 1, 2], [0, 2, 3]])
    {0: {1: {2, 3}, 2: {3}}}
    """
    t = np.asarray(triples)
    n = overlaps.shape[0]
    if t.ndim != 2 or t.shape[1] != 3 or not np.issubdtype(t.dtype, np.integer):
        raise ValueError(
            f"triples must be an integer array of shape (k, 3); got shape {t.shape}"
        )
    if t.size and (t.min() < 0 or t.max() >= n):
        raise ValueError(f"triples must index the {n} codewords")
    q, a, b = t.T
    valid = (a != q) & (b != q) & (overlaps[q, b] == overlaps[q, a] + gap)
    if not np.all(valid):
        raise ValueError(
            f"triples must be witnesses (query, better, worse) with "
            f"<q, better> + gap == <q, worse>; row {int(np.argmin(valid))} is not"
        )
    successors = {}
    for qi, ai, bi in np.unique(t, axis=0).tolist():
        successors.setdefault(qi, {}).setdefault(ai, set()).add(bi)
    reach = {}
    for qi, edges in successors.items():
        memo = {}

        def closure(node):
            if node not in memo:
                out = set()
                for nxt in edges.get(node, ()):
                    out.add(nxt)
                    out |= closure(nxt)
                memo[node] = out
            return memo[node]

        # Overlaps rise by `gap` along every edge, so the recursion depth is at
        # most n_bits / gap.
        reach[qi] = {node: closure(node) for node in edges}
    return reach


def chain_steps(overlaps, queries, keys, gap):
    """Chain lengths ``k_ij = (<q_i, z_j> - <q_i, z_i>) / gap`` between pairs.

    Parameters
    ----------
    overlaps : ndarray of shape (n_codewords, n_codewords), int
        :func:`code_overlaps` of the code.
    queries, keys : ndarray of shape (n,), int
        The pairs ``(q_i, z_i)`` as codeword indices.
    gap : int
        Overlap gap of the witnesses, ``>= 1``.

    Returns
    -------
    steps : ndarray of shape (n, n), int64
        ``steps[i, j] = (<q_i, z_j> - <q_i, z_i>) // gap``; 0 on the diagonal.

    Examples
    --------
    >>> overlaps = np.array([[3, 0, 1, 2], [0, 3, 2, 1], [1, 2, 3, 0], [2, 1, 0, 3]])
    >>> chain_steps(overlaps, np.array([0, 3]), np.array([1, 2]), 1)
    array([[0, 1],
           [1, 0]])
    """
    rows = overlaps[queries[:, None], keys[None, :]]
    return (rows - overlaps[queries, keys][:, None]) // gap
