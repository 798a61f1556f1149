"""The Min-IP witness suite: a query chooses between two coded candidates.

Length-3 witnesses drawn from a constant-weight code (the Min-IP paper, "Three
tokens force exponential feature rank in nonnegative kernel attention"), and the
same witnesses at length 2 (:func:`witness_length2`), which a rank-1 head
solves exactly.
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, child_seeds
from ..codes import (
    check_constant_weight_code,
    code_overlaps,
    random_constant_weight_code,
    witness_blocks,
)
from ._min_ip import _MAX_BITS, _check_target, _check_weight, min_ip_targets

__all__ = ["make_min_ip_witness_suite", "witness_length2"]

_PERMUTE_TRIPLES_LIMIT = 2**20  # sample triples by a full permutation below this
_CHUNK = 4096


def _distinct_indices(total, n, rng):
    """``n`` distinct uniform integers in ``[0, total)``, in random order.

    The draw depends only on ``total`` and the stream, so a larger ``n`` extends
    the same sample.
    """
    if total <= _PERMUTE_TRIPLES_LIMIT:
        return rng.permutation(total)[:n]
    chosen, seen = [], set()
    while len(chosen) < n:
        for value in rng.randint(0, total, size=_CHUNK, dtype=np.int64).tolist():
            if value not in seen:
                seen.add(value)
                chosen.append(value)
    return np.array(chosen[:n], dtype=np.int64)


def _sample_triples(overlaps, weight, gap, n_sequences, rng):
    counts, blocks = witness_blocks(overlaps, weight, gap)
    total = int(blocks.sum())
    if n_sequences > total:
        raise ValueError(
            f"only {total} valid (query, better, worse) triples exist for these "
            f"codewords with gap={gap}; asked for n_sequences={n_sequences}"
        )
    index = _distinct_indices(total, n_sequences, rng)
    flat = blocks.ravel()
    ends = np.cumsum(flat)
    block = np.searchsorted(ends, index, side="right")
    offset = index - (ends[block] - flat[block])
    levels = blocks.shape[1]
    query, level = np.divmod(block, levels)
    n_worse = counts[query, level + gap]
    i, j = np.divmod(offset, n_worse)
    # Candidates of each query sorted by (overlap, index); the query itself last.
    level_start = np.concatenate(
        [np.zeros((counts.shape[0], 1), dtype=np.int64), np.cumsum(counts, axis=1)],
        axis=1,
    )
    unique_queries, inverse = np.unique(query, return_inverse=True)
    rows = overlaps[unique_queries].copy()
    rows[np.arange(unique_queries.size), unique_queries] = weight + 1
    order = np.argsort(rows, axis=1, kind="stable")
    better = order[inverse, level_start[query, level] + i]
    worse = order[inverse, level_start[query, level + gap] + j]
    return np.stack([query, better, worse], axis=1)


def make_min_ip_witness_suite(
    n_bits=24,
    weight=None,
    n_codewords=400,
    n_sequences=1272,
    gap=1,
    target="final",
    codewords=None,
    random_state=None,
    return_info=False,
):
    """Length-3 Min-IP witnesses: a query chooses between two coded candidates.

    Construction, in the spirit of the constant-weight-code witness of the Min-IP paper
    (the Min-IP paper):

    1. A constant-weight code: ``n_codewords`` distinct uniformly random words of
       ``n_bits`` bits and Hamming weight ``w = weight`` (or the rows of
       ``codewords``).
    2. A witness triple ``(q, a, b)`` is a query ``q`` and two candidates
       ``a, b`` of the code, both different from ``q``, with
       ``<q, a> + gap = <q, b>``: ``a`` is the better (smaller-overlap)
       candidate, ``b`` the worse one. ``n_sequences`` triples are drawn
       uniformly among all valid triples, without repetition.
    3. The sequence puts the two candidates, in random order, at positions 0
       and 1, and the query last (causal final query). Since distinct words of
       weight ``w`` overlap in at most ``w - 1`` bits, ``<q, q> = w`` is
       strictly the largest overlap, so the final target is
       ``min(w, <q, a>, <q, b>) = <q, a>`` with a unique minimiser: the query
       must tell apart two candidates whose overlaps differ by ``gap``.

    Parameters
    ----------
    n_bits : int, default=24
        Token dimension ``m``, ``2 <= m <= 64`` (ignored when ``codewords`` is
        given).
    weight : int or None, default=None
        Hamming weight ``w`` of the code, ``1 <= w <= m - 1``; ``None`` means
        ``n_bits // 2``. With ``codewords`` it must be ``None`` or their weight.
    n_codewords : int, default=400
        Size of the code, at most ``C(m, w)`` (ignored when ``codewords`` is
        given).
    n_sequences : int, default=1272
        Number of witness sequences; a ValueError says how many valid triples
        exist when there are fewer.
    gap : int, default=1
        Overlap gap ``<q, b> - <q, a> >= 1``.
    target : {"final", "all"}, default="final"
        ``"final"``: ``y = <q, a>`` of shape ``(n,)``; ``"all"``: the targets of
        every position (:func:`min_ip_targets`), shape ``(n, 3, 1)``.
    codewords : array-like of shape (n_codewords, n_bits) or None, default=None
        An explicit constant-weight code of distinct 0/1 words (for instance one
        pool of :func:`make_min_ip_pools`).
    random_state : None, int or numpy.random.RandomState, default=None
        Seed. The code, the triples and the candidate order come from separate
        child streams; the triples depend on ``n_sequences`` only through how
        many are kept, so a larger ``n_sequences`` extends the same suite.
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` with the construction.

    Returns
    -------
    X : ndarray of shape (n_sequences, 3, n_bits)
        Float64 0/1 tokens ``(candidate, candidate, query)``.
    y : ndarray of shape (n_sequences,) or (n_sequences, 3, 1)
        Targets.
    info : Bunch, only if ``return_info``
        ``codewords`` (``(n_codewords, n_bits)``), ``triples`` (indices into
        ``codewords``: query, better, worse), ``better_position`` (0 or 1, where
        the better candidate sits), ``overlaps`` (``<q, a>, <q, b>`` per
        sequence), ``weight``, ``gap``, ``n_bits``, ``n_valid_triples`` (the
        size of the full family), ``target``, ``seq_len=3``,
        ``kind="min_ip_witness"``.

    Notes
    -----
    With a single gap the suite is solved exactly by feature rank 1: the
    target ``<q, a> = (<q, a> + <q, b> - gap) / 2`` is affine in the uniform
    average ``o = (a + b + q) / 3`` (readout ``1.5 <q, o> - (|q| + gap) / 2``).
    It therefore measures how well a student is trained, not how much feature
    rank the task needs; :func:`make_min_ip_witness_family` (varying gaps and
    anchors) does not have this shortcut.

    See Also
    --------
    witness_length2 : the same witnesses without the worse candidate.
    make_min_ip_pools : train and test suites on disjoint codes.
    make_min_ip_witness_family : every witness of a small code, with anchors.

    Examples
    --------
    >>> X, y, info = make_min_ip_witness_suite(
    ...     n_bits=8, n_codewords=20, n_sequences=50, random_state=0,
    ...     return_info=True)
    >>> X.shape, y.shape, info.weight
    ((50, 3, 8), (50,), 4)
    >>> bool(np.all(info.overlaps[:, 0] + 1 == info.overlaps[:, 1]))
    True
    >>> bool(np.all(y == info.overlaps[:, 0]))
    True
    """
    n_sequences = check_int(n_sequences, "n_sequences")
    gap = check_int(gap, "gap")
    target = _check_target(target)
    code_seed, triple_seed, order_seed = child_seeds(random_state, 3)
    if codewords is None:
        n_bits = check_int(n_bits, "n_bits", 2, _MAX_BITS)
        weight = _check_weight(weight, n_bits)
        n_codewords = check_int(n_codewords, "n_codewords", 3)
        codewords = random_constant_weight_code(
            n_bits, weight, n_codewords, np.random.RandomState(code_seed)
        )
    else:
        codewords, weight = check_constant_weight_code(codewords, weight)
        n_codewords, n_bits = codewords.shape
    overlaps = code_overlaps(codewords)
    triples = _sample_triples(
        overlaps, weight, gap, n_sequences, np.random.RandomState(triple_seed)
    )
    better_position = (
        np.random.RandomState(order_seed).random_sample(n_sequences) < 0.5
    ).astype(np.int64)
    rows = np.arange(n_sequences)
    X = np.empty((n_sequences, 3, n_bits), dtype=np.float64)
    X[rows, better_position] = codewords[triples[:, 1]]
    X[rows, 1 - better_position] = codewords[triples[:, 2]]
    X[:, 2] = codewords[triples[:, 0]]
    query, better, worse = triples.T
    pair_overlaps = np.stack(
        [overlaps[query, better], overlaps[query, worse]], axis=1
    )
    y = min_ip_targets(X, target)
    final = y if target == "final" else y[:, -1, 0]
    if not np.array_equal(final, pair_overlaps[:, 0]):  # pragma: no cover
        raise RuntimeError("witness construction broken: final target != <q, a>")
    if not return_info:
        return X, y
    info = Bunch(
        kind="min_ip_witness",
        codewords=codewords,
        triples=triples,
        better_position=better_position,
        overlaps=pair_overlaps,
        weight=weight,
        gap=gap,
        n_bits=n_bits,
        n_valid_triples=int(witness_blocks(overlaps, weight, gap)[1].sum()),
        target=target,
        seq_len=3,
    )
    return X, y, info


def witness_length2(X, info, target="final"):
    """The same witnesses at length 2: drop the worse candidate.

    Each length-3 witness ``(.., .., q)`` becomes ``(a, q)``: the better
    candidate then the query, with final target ``min(w, <q, a>) = <q, a>``,
    the same value as the length-3 final target. At length 2 the query has a
    single rival, and a rank-1 normalised nonnegative kernel head solves Min-IP
    exactly (the Min-IP paper), so comparing models on ``witness_length2`` and on
    the suite isolates the effect of the second candidate on the same tokens.

    Parameters
    ----------
    X : ndarray of shape (n, 3, n_bits)
        Witness sequences from :func:`make_min_ip_witness_suite` (or one half
        of :func:`make_min_ip_pools`).
    info : Bunch
        The matching info (for pools, ``info.train`` or ``info.test``).
    target : {"final", "all"}, default="final"
        Targets of the length-2 sequences, see :func:`min_ip_targets`.

    Returns
    -------
    X2 : ndarray of shape (n, 2, n_bits)
        Sequences ``(a, q)``.
    y2 : ndarray of shape (n,) or (n, 2, 1)
        Their targets.

    Examples
    --------
    >>> X, y, info = make_min_ip_witness_suite(
    ...     n_bits=8, n_codewords=20, n_sequences=30, random_state=0,
    ...     return_info=True)
    >>> X2, y2 = witness_length2(X, info)
    >>> X2.shape, bool(np.array_equal(y2, y))
    ((30, 2, 8), True)
    """
    target = _check_target(target)
    X = np.asarray(X)
    for key in ("codewords", "triples", "better_position"):
        if key not in info:
            raise ValueError(f"info lacks {key!r}; pass the info of a witness suite")
    n = info.triples.shape[0]
    n_bits = info.codewords.shape[1]
    if X.shape != (n, 3, n_bits):
        raise ValueError(
            f"X must have shape {(n, 3, n_bits)} to match info; got {X.shape}"
        )
    rows = np.arange(n)
    better = X[rows, info.better_position]
    if not (
        np.array_equal(X[:, 2], info.codewords[info.triples[:, 0]])
        and np.array_equal(better, info.codewords[info.triples[:, 1]])
    ):
        raise ValueError("X does not match info: pass the X generated with this info")
    X2 = np.stack([better, X[:, 2]], axis=1).astype(np.float64)
    return X2, min_ip_targets(X2, target)
