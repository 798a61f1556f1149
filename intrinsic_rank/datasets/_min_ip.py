"""Min-IP tasks of the Min-IP paper.

Paper: "Three tokens force exponential feature rank in nonnegative kernel
attention".

Tokens are Boolean vectors ``x_i in {0,1}^m`` (``m = n_bits``). The target at
position ``i`` of a sequence ``X = (x_1, ..., x_N)`` is the minimum inner product
of ``x_i`` with every token of the sequence, itself included:

``t_i(X) = min_{1 <= j <= N} <x_i, x_j>``.

The causal final-query variant keeps only the target of the last position.
:func:`min_ip_targets` is the single implementation of this target; every
generator here computes its targets with it.

Generators:

* :func:`make_min_ip`: i.i.d. Bernoulli tokens, or every sequence over
  ``{0,1}^m`` (``exhaustive=True``);
* :func:`make_min_ip_witness_suite`: the length-3 witness family built on a
  constant-weight code, in which a query chooses between two candidates whose
  overlaps with it differ by a controlled gap;
* :func:`make_min_ip_pools`: two witness suites on disjoint codeword pools, for
  out-of-distribution tests;
* :func:`witness_length2`: the same witnesses with the worse candidate dropped,
  which a rank-1 head solves exactly (the Min-IP paper);
* :func:`make_min_ip_witness_family`: *every* witness of a small code whose
  overlaps differ by at least a gap, plus the anchor sequences ``(u, u, q)``:
  a family dense in constraints, for in-sample capacity experiments;
* :func:`make_min_ip_family_pools`: two such families on disjoint codeword
  pools;
* :func:`min_ip_exhaustive_triples`: every length-``L`` sequence over all
  ``2^m`` tokens (or all words of one weight), as the distinct
  (query, multiset of the other tokens) triples with integer multiplicities.
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, check_random_state, check_real, child_seeds
from ..codes import (
    check_boolean_tokens,
    check_constant_weight_code,
    code_overlaps,
    random_constant_weight_code,
    witness_blocks,
)

__all__ = [
    "min_ip_targets",
    "make_min_ip",
    "make_min_ip_witness_suite",
    "make_min_ip_pools",
    "witness_length2",
    "make_min_ip_witness_family",
    "make_min_ip_family_pools",
    "min_ip_exhaustive_triples",
    "exhaustive_triples_bytes",
]

_TARGETS = ("all", "final")
_MAX_BITS = 64
_MAX_EXHAUSTIVE_LOG2 = 20  # at most 2**20 enumerated sequences
_PERMUTE_TRIPLES_LIMIT = 2**20  # sample triples by a full permutation below this
_CHUNK = 4096


def _check_target(target):
    if target not in _TARGETS:
        raise ValueError(f"unknown target {target!r}; use one of {_TARGETS}")
    return target


def min_ip_targets(X, target="all"):
    """Min-IP targets ``t_i(X) = min_j <x_i, x_j>`` of Boolean token sequences.

    The minimum runs over every position ``j`` of the sequence, ``i`` itself
    included (the Min-IP paper). This is the one implementation of the
    target used by every Min-IP generator of the package.

    Parameters
    ----------
    X : array-like of shape (n_samples, seq_len, n_bits)
        Sequences of Boolean tokens; every entry must be 0 or 1 (``bool`` or a
        numeric dtype).
    target : {"all", "final"}, default="all"
        ``"all"``: the target of every position; ``"final"``: only the target
        of the last position (causal final query).

    Returns
    -------
    Y : ndarray of shape (n_samples, seq_len, 1) or (n_samples,)
        Float64 integer-valued targets: shape ``(n, L, 1)`` for
        ``target="all"``, ``(n,)`` for ``target="final"``.

    Raises
    ------
    ValueError
        If ``X`` is not 3-D, has an empty axis, holds values other than 0/1
        (NaN included), or ``target`` is unknown.

    Examples
    --------
    >>> X = [[[1, 1, 0], [1, 0, 0], [0, 1, 1]]]
    >>> min_ip_targets(X)[0, :, 0]
    array([1., 0., 0.])
    >>> min_ip_targets(X, target="final")
    array([0.])
    """
    target = _check_target(target)
    X = np.asarray(X)
    if X.ndim != 3:
        raise ValueError(
            f"X must be 3-D (n_samples, seq_len, n_bits); got shape {X.shape}"
        )
    if min(X.shape) == 0:
        raise ValueError(f"X must have no empty axis; got shape {X.shape}")
    X = check_boolean_tokens(X)
    # Integer-valued float64 products are exact (|<x, z>| <= n_bits << 2**53).
    gram = np.matmul(X, np.swapaxes(X, 1, 2))
    minima = gram.min(axis=-1)
    if target == "final":
        return minima[:, -1].copy()
    return minima[:, :, None]


def make_min_ip(
    n_samples=1000,
    seq_len=3,
    n_bits=8,
    density=0.5,
    target="all",
    exhaustive=False,
    random_state=None,
    return_info=False,
):
    """Min-IP sequences of random (or all) Boolean tokens.

    Each token bit is an independent Bernoulli(``density``) draw; the targets are
    :func:`min_ip_targets` of the sequences (the Min-IP paper).

    Parameters
    ----------
    n_samples : int, default=1000
        Number of sequences (ignored, though still validated, when
        ``exhaustive=True``).
    seq_len : int, default=3
        Sequence length ``N >= 1``.
    n_bits : int, default=8
        Token dimension ``m``, ``1 <= m <= 64``.
    density : float, default=0.5
        Probability that a bit is 1, in ``(0, 1)`` (ignored, though still
        validated, when ``exhaustive=True``).
    target : {"all", "final"}, default="all"
        Targets of every position, or only of the last one (causal final query).
    exhaustive : bool, default=False
        Return every sequence of ``seq_len`` tokens over all ``2**n_bits``
        tokens, in lexicographic order: the sequence of index ``s`` is the
        ``n_bits * seq_len`` binary digits of ``s``, most significant first, cut
        into ``seq_len`` tokens (so the last position varies fastest). Refused
        when there would be more than ``2**20`` sequences.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed of the Bernoulli draws.
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` describing the task.

    Returns
    -------
    X : ndarray of shape (n, seq_len, n_bits)
        Float64 0/1 tokens; ``n = n_samples``, or ``2**(n_bits * seq_len)``
        when exhaustive.
    Y : ndarray of shape (n, seq_len, 1) or (n,)
        Targets, see :func:`min_ip_targets`.
    info : Bunch, only if ``return_info``
        ``n_bits``, ``seq_len``, ``target``, ``density``, ``exhaustive``,
        ``kind="min_ip"``.

    Examples
    --------
    >>> X, Y = make_min_ip(n_samples=5, seq_len=3, n_bits=4, random_state=0)
    >>> X.shape, Y.shape
    ((5, 3, 4), (5, 3, 1))
    >>> X, y = make_min_ip(n_bits=2, seq_len=2, exhaustive=True, target="final")
    >>> X.shape, X[1].tolist(), y[:4].tolist()
    ((16, 2, 2), [[0.0, 0.0], [0.0, 1.0]], [0.0, 0.0, 0.0, 0.0])
    """
    n_samples = check_int(n_samples, "n_samples")
    seq_len = check_int(seq_len, "seq_len")
    n_bits = check_int(n_bits, "n_bits", 1, _MAX_BITS)
    density = check_real(density, "density", 0, 1, low_open=True, high_open=True)
    target = _check_target(target)
    if exhaustive:
        total_bits = n_bits * seq_len
        if total_bits > _MAX_EXHAUSTIVE_LOG2:
            raise ValueError(
                f"exhaustive enumeration with n_bits={n_bits} and seq_len={seq_len} "
                f"would give 2**{total_bits} = {2**total_bits} sequences, more than "
                f"the limit 2**{_MAX_EXHAUSTIVE_LOG2} = {2**_MAX_EXHAUSTIVE_LOG2}; "
                "lower n_bits or seq_len"
            )
        index = np.arange(2**total_bits, dtype=np.int64)
        shifts = np.arange(total_bits - 1, -1, -1, dtype=np.int64)
        bits = (index[:, None] >> shifts) & 1
        X = bits.reshape(-1, seq_len, n_bits).astype(np.float64)
    else:
        rng = check_random_state(random_state)
        X = (rng.random_sample((n_samples, seq_len, n_bits)) < density).astype(
            np.float64
        )
    Y = min_ip_targets(X, target)
    if not return_info:
        return X, Y
    info = Bunch(
        kind="min_ip",
        n_bits=n_bits,
        seq_len=seq_len,
        target=target,
        density=float(density),
        exhaustive=bool(exhaustive),
    )
    return X, Y, info


def _check_weight(weight, n_bits):
    if weight is None:
        weight = n_bits // 2
    return check_int(weight, "weight", 1, n_bits - 1)


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


def _disjoint_pools(n_bits, weight, n_train_codewords, n_test_codewords, target, random_state):
    """One constant-weight code split into disjoint train and test pools, and their seeds."""
    n_bits = check_int(n_bits, "n_bits", 2, _MAX_BITS)
    weight = _check_weight(weight, n_bits)
    n_train_codewords = check_int(n_train_codewords, "n_train_codewords", 3)
    n_test_codewords = check_int(n_test_codewords, "n_test_codewords", 3)
    target = _check_target(target)
    code_seed, train_seed, test_seed = child_seeds(random_state, 3)
    code = random_constant_weight_code(
        n_bits, weight, n_train_codewords + n_test_codewords,
        np.random.RandomState(code_seed),
    )
    # The code comes in uniformly random order, so this split is a random one.
    pools = code[:n_train_codewords], code[n_train_codewords:]
    return n_bits, weight, target, pools, (train_seed, test_seed)


def make_min_ip_pools(
    n_bits=24,
    weight=None,
    n_train_codewords=200,
    n_test_codewords=200,
    n_train_sequences=1000,
    n_test_sequences=500,
    gap=1,
    target="final",
    random_state=None,
):
    """Train and test witness suites on disjoint codeword pools (OOD test).

    One constant-weight code of ``n_train_codewords + n_test_codewords``
    distinct words is drawn and split at random into two pools; each pool gets
    its own :func:`make_min_ip_witness_suite`. Every token of a witness sequence
    is a codeword of its pool, so no token of the test set occurs in the train
    set: the test measures whether a model learned the comparison rather than
    the codewords (the Min-IP paper, "larger disjoint train/test pools").

    Parameters
    ----------
    n_bits : int, default=24
        Token dimension, ``2 <= n_bits <= 64``.
    weight : int or None, default=None
        Hamming weight of the code; ``None`` means ``n_bits // 2``.
    n_train_codewords, n_test_codewords : int, default=200
        Sizes of the two pools (at least 3 each).
    n_train_sequences : int, default=1000
        Witnesses drawn from the train pool.
    n_test_sequences : int, default=500
        Witnesses drawn from the test pool.
    gap : int, default=1
        Overlap gap of every witness.
    target : {"final", "all"}, default="final"
        As in :func:`make_min_ip_witness_suite`.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed of the code, the split and both suites.

    Returns
    -------
    X_train : ndarray of shape (n_train_sequences, 3, n_bits)
    y_train : ndarray of shape (n_train_sequences,) or (n_train_sequences, 3, 1)
    X_test : ndarray of shape (n_test_sequences, 3, n_bits)
    y_test : ndarray of shape (n_test_sequences,) or (n_test_sequences, 3, 1)
    info : Bunch
        ``train`` and ``test`` (the suites' info Bunches, whose ``codewords``
        are the two pools), ``train_codewords``, ``test_codewords``,
        ``weight``, ``gap``, ``n_bits``, ``target``, ``kind="min_ip_pools"``.

    Examples
    --------
    >>> X_tr, y_tr, X_te, y_te, info = make_min_ip_pools(
    ...     n_bits=10, n_train_codewords=30, n_test_codewords=30,
    ...     n_train_sequences=100, n_test_sequences=40, random_state=0)
    >>> X_tr.shape, X_te.shape
    ((100, 3, 10), (40, 3, 10))
    >>> train = {w.tobytes() for w in info.train_codewords}
    >>> any(w.tobytes() in train for w in info.test_codewords)
    False
    """
    n_bits, weight, target, pools, (train_seed, test_seed) = _disjoint_pools(
        n_bits, weight, n_train_codewords, n_test_codewords, target, random_state
    )
    suites = [
        make_min_ip_witness_suite(
            n_sequences=n, gap=gap, target=target, codewords=pool,
            random_state=seed, return_info=True,
        )
        for pool, n, seed in zip(
            pools, (n_train_sequences, n_test_sequences), (train_seed, test_seed)
        )
    ]
    (X_train, y_train, train_info), (X_test, y_test, test_info) = suites
    info = Bunch(
        kind="min_ip_pools",
        train=train_info,
        test=test_info,
        train_codewords=train_info.codewords,
        test_codewords=test_info.codewords,
        weight=weight,
        gap=gap,
        n_bits=n_bits,
        target=target,
    )
    return X_train, y_train, X_test, y_test, info


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


def _family_triples(overlaps, min_gap, anchors):
    """Every ``(q, a, b)`` with ``<q, b> - <q, a> >= min_gap`` (plus anchors ``(q, u, u)``).

    Returns the triples sorted by query, then better candidate, then worse
    candidate (an anchor ``(q, u, u)`` sorts with the better candidate ``u``),
    and the boolean anchor mask. Enumerated one query at a time, so the memory
    is that of the family, not of all ``n**3`` triples.
    """
    n = overlaps.shape[0]
    others = np.arange(n)
    blocks, masks = [], []
    for q in range(n):
        row = overlaps[q]
        better, worse = np.nonzero(row[None, :] - row[:, None] >= min_gap)
        keep = (better != q) & (worse != q)  # a != b: the gap is >= 1
        better, worse = better[keep], worse[keep]
        if anchors:
            own = others[others != q]
            better = np.concatenate([better, own])
            worse = np.concatenate([worse, own])
        order = np.lexsort((worse, better))
        block = np.empty((len(order), 3), dtype=np.int64)
        block[:, 0] = q
        block[:, 1] = better[order]
        block[:, 2] = worse[order]
        blocks.append(block)
        masks.append(block[:, 1] == block[:, 2])
    return np.concatenate(blocks), np.concatenate(masks)


def make_min_ip_witness_family(
    n_bits=24,
    weight=None,
    n_codewords=16,
    min_gap=3,
    anchors=True,
    n_sequences=None,
    both_orders=False,
    target="final",
    codewords=None,
    random_state=None,
    return_info=False,
):
    """Every length-3 Min-IP witness of a small code, plus anchor sequences.

    :func:`make_min_ip_witness_suite` cannot separate feature ranks: with one
    fixed gap ``g`` its target ``<q, a> = (<q, a> + <q, b> - g) / 2`` is affine
    in the uniform average of the three tokens, so a rank-1 head (uniform
    attention, values ``x``, readout ``1.5 <q, o> - (|q| + g) / 2``) solves it
    exactly; and sampled from a large code, each query occurs in only a
    handful of sequences, which a flexible student can memorise one by one
    (kernel heads of every feature rank 1-64 trained on the default suite,
    20% of it held out, erred on 10-42% of its sequences, non-monotonically,
    with no rank transition). This family is instead *dense in constraints*: a small code,
    every witness it offers with *varying* gaps ``>= min_gap``, and anchors.

    Construction (the Min-IP paper):

    1. A constant-weight code: ``n_codewords`` distinct uniformly random words
       of ``n_bits`` bits and weight ``w`` (or the rows of ``codewords``).
    2. Witnesses: every triple ``(q, a, b)`` of distinct codewords with
       ``<q, b> - <q, a> >= min_gap``, as the sequence ``(a, b, q)`` or
       ``(b, a, q)`` (the candidate order drawn at random, or both orders with
       ``both_orders=True``); final target ``<q, a>``.
    3. Anchors (``anchors=True``): for every ordered pair ``q != u`` of
       codewords, the sequence ``(u, u, q)``, final target ``<q, u>``.

    Why anchors and a gap. In a normalised nonnegative kernel head without
    positional information (the readout ``a(q) . o + b(q)`` is affine in the
    attention output ``o``), the output on ``(u, w, q)`` is exactly the
    weighted average ``lam out(u, u, q) + (1 - lam) out(w, w, q)`` with
    ``lam = (2 alpha(q, u) + alpha(q, q)) / (2 (alpha(q, u) + alpha(q, w) +
    alpha(q, q)))``. If the two anchors and the witness are all answered
    within 1/2 and ``<q, w> - <q, u> = g >= 2``, then ``lam > 1 - 1/g``, which
    gives ``alpha(q, u) > (g - 1) alpha(q, w)``. So solving the family forces
    every kernel row ``alpha(q, .)`` to order the candidates by their overlap
    with ``q`` (with margin ``g - 1`` for gap ``g``), and different queries
    order the same candidates differently. A rank-1 kernel
    ``alpha(q, z) = f(q) g(z)`` orders the candidates the same way for every
    query, so it cannot solve the family once two queries disagree; a kernel
    of rank ``r`` realises only limited families of orderings. With
    ``min_gap = 1`` the constraint is vacuous (anchors within 1/2 of their
    targets leave room for any weights), which is why the default gap is 3.

    Parameters
    ----------
    n_bits : int, default=24
        Token dimension ``m``, ``2 <= m <= 64`` (ignored when ``codewords`` is
        given).
    weight : int or None, default=None
        Hamming weight ``w`` of the code; ``None`` means ``n_bits // 2``.
    n_codewords : int, default=16
        Size of the code, at least 3 and at most ``C(m, w)`` (ignored when
        ``codewords`` is given). The family has about ``n_codewords**3``
        times the share of overlap gaps ``>= min_gap`` witnesses.
    min_gap : int, default=3
        Smallest overlap gap ``<q, b> - <q, a>`` of a witness, ``>= 1``.
    anchors : bool, default=True
        Add the ``n_codewords * (n_codewords - 1)`` anchors ``(u, u, q)``.
    n_sequences : int or None, default=None
        ``None`` keeps the whole family; an integer keeps that many of its
        sequences (witnesses and anchors alike), drawn uniformly without
        replacement, in the family's order (for large codes, whose family has
        about ``n_codewords**3`` members).
    both_orders : bool, default=False
        Put every witness in both candidate orders. The students of this
        package have no positional information by default, so the two orders
        give them identical outputs; the option only matters for positional
        models.
    target : {"final", "all"}, default="final"
        ``"final"``: ``y = <q, a>`` of shape ``(n,)``; ``"all"``: the targets
        of every position (:func:`min_ip_targets`), shape ``(n, 3, 1)``.
    codewords : array-like of shape (n_codewords, n_bits) or None, default=None
        An explicit constant-weight code of distinct 0/1 words.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed of the code and of the candidate order.
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` with the construction.

    Returns
    -------
    X : ndarray of shape (n, 3, n_bits)
        Float64 0/1 tokens ``(candidate, candidate, query)``; witnesses and
        anchors sorted by query, then better candidate, then worse candidate.
    y : ndarray of shape (n,) or (n, 3, 1)
        Targets.
    info : Bunch, only if ``return_info``
        ``codewords``; ``triples`` (query, better, worse; ``(q, u, u)`` for an
        anchor); ``better_position`` (0 or 1); ``overlaps`` (``<q, a>, <q, b>``);
        ``anchor`` (boolean mask of the anchors); ``n_witnesses``,
        ``n_anchors`` (kept); ``n_family`` (size of the whole family before
        any sampling); ``weight``, ``min_gap``, ``n_bits``, ``n_codewords``,
        ``target``, ``seq_len=3``, ``kind="min_ip_witness_family"``. It works
        with :func:`witness_length2` (an anchor ``(u, u, q)`` becomes
        ``(u, q)``).

    Raises
    ------
    ValueError
        If the code offers no witness with this gap (and ``anchors=False``),
        or a parameter is invalid.

    See Also
    --------
    make_min_ip_witness_suite : a sampled witness suite on a large code.
    make_min_ip_family_pools : two families on disjoint codes.

    Examples
    --------
    >>> X, y, info = make_min_ip_witness_family(
    ...     n_bits=12, n_codewords=8, min_gap=2, random_state=0, return_info=True)
    >>> X.shape[1:], info.n_anchors, info.n_witnesses + info.n_anchors == len(X)
    ((3, 12), 56, True)
    >>> bool(np.all(info.overlaps[~info.anchor, 1] - info.overlaps[~info.anchor, 0] >= 2))
    True
    >>> bool(np.all(y == info.overlaps[:, 0]))
    True
    """
    min_gap = check_int(min_gap, "min_gap")
    target = _check_target(target)
    if n_sequences is not None:
        n_sequences = check_int(n_sequences, "n_sequences")
    code_seed, order_seed, sample_seed = child_seeds(random_state, 3)
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
    triples, anchor = _family_triples(overlaps, min_gap, bool(anchors))
    if len(triples) == 0:
        raise ValueError(
            f"the code of {n_codewords} words of weight {weight} in {n_bits} bits "
            f"has no witness with overlap gap >= {min_gap}; lower min_gap, enlarge "
            "the code or set anchors=True"
        )
    n_family = len(triples)
    if n_sequences is not None:
        if n_sequences > n_family:
            raise ValueError(
                f"the family has only {n_family} sequences (min_gap={min_gap}, "
                f"anchors={bool(anchors)}); asked for n_sequences={n_sequences}"
            )
        keep = np.sort(
            _distinct_indices(n_family, n_sequences, np.random.RandomState(sample_seed))
        )
        triples, anchor = triples[keep], anchor[keep]
    n = len(triples)
    better_position = (
        np.random.RandomState(order_seed).random_sample(n) < 0.5
    ).astype(np.int64)
    better_position[anchor] = 0
    if both_orders:
        swapped = ~anchor
        triples = np.concatenate([triples, triples[swapped]])
        anchor = np.concatenate([anchor, anchor[swapped]])
        better_position = np.concatenate(
            [better_position, 1 - better_position[swapped]]
        )
        n = len(triples)
    rows = np.arange(n)
    X = np.empty((n, 3, n_bits), dtype=np.float64)
    X[rows, better_position] = codewords[triples[:, 1]]
    X[rows, 1 - better_position] = codewords[triples[:, 2]]
    X[:, 2] = codewords[triples[:, 0]]
    query, better, worse = triples.T
    pair_overlaps = np.stack([overlaps[query, better], overlaps[query, worse]], axis=1)
    y = min_ip_targets(X, target)
    final = y if target == "final" else y[:, -1, 0]
    if not np.array_equal(final, pair_overlaps[:, 0]):  # pragma: no cover
        raise RuntimeError("witness family broken: final target != <q, a>")
    if not return_info:
        return X, y
    info = Bunch(
        kind="min_ip_witness_family",
        codewords=codewords,
        triples=triples,
        better_position=better_position,
        overlaps=pair_overlaps,
        anchor=anchor,
        n_witnesses=int(np.count_nonzero(~anchor)),
        n_anchors=int(np.count_nonzero(anchor)),
        n_family=int(n_family),
        weight=weight,
        min_gap=min_gap,
        n_bits=n_bits,
        n_codewords=n_codewords,
        target=target,
        seq_len=3,
    )
    return X, y, info


def make_min_ip_family_pools(
    n_bits=24,
    weight=None,
    n_train_codewords=16,
    n_test_codewords=16,
    min_gap=3,
    anchors=True,
    n_train_sequences=None,
    n_test_sequences=None,
    target="final",
    random_state=None,
):
    """Train and test witness families on disjoint codeword pools (OOD test).

    Like :func:`make_min_ip_pools`, but each pool gets its whole
    :func:`make_min_ip_witness_family` (every witness with overlap gap
    ``>= min_gap``, plus anchors) instead of a sampled suite. One code of
    ``n_train_codewords + n_test_codewords`` distinct words is drawn and split
    at random, so no test token occurs in the training set.

    Parameters
    ----------
    n_bits : int, default=24
        Token dimension, ``2 <= n_bits <= 64``.
    weight : int or None, default=None
        Hamming weight of the code; ``None`` means ``n_bits // 2``.
    n_train_codewords, n_test_codewords : int, default=16
        Sizes of the two pools (at least 3 each).
    min_gap : int, default=3
        Smallest overlap gap of a witness.
    anchors : bool, default=True
        Add the anchors ``(u, u, q)`` to both families.
    n_train_sequences, n_test_sequences : int or None, default=None
        Keep that many sequences of each family, drawn uniformly (``None``:
        the whole family).
    target : {"final", "all"}, default="final"
        As in :func:`make_min_ip_witness_family`.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed of the code, the split and both families.

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
        The two families.
    info : Bunch
        ``train`` and ``test`` (the families' info Bunches),
        ``train_codewords``, ``test_codewords``, ``weight``, ``min_gap``,
        ``n_bits``, ``target``, ``kind="min_ip_family_pools"``.

    Examples
    --------
    >>> X_tr, y_tr, X_te, y_te, info = make_min_ip_family_pools(
    ...     n_bits=12, n_train_codewords=8, n_test_codewords=8, min_gap=2,
    ...     random_state=0)
    >>> train = {w.tobytes() for w in info.train_codewords}
    >>> any(w.tobytes() in train for w in info.test_codewords)
    False
    """
    n_bits, weight, target, pools, (train_seed, test_seed) = _disjoint_pools(
        n_bits, weight, n_train_codewords, n_test_codewords, target, random_state
    )
    families = [
        make_min_ip_witness_family(
            min_gap=min_gap, anchors=anchors, n_sequences=n, target=target,
            codewords=pool, random_state=seed, return_info=True,
        )
        for pool, n, seed in zip(
            pools, (n_train_sequences, n_test_sequences), (train_seed, test_seed)
        )
    ]
    (X_train, y_train, train_info), (X_test, y_test, test_info) = families
    info = Bunch(
        kind="min_ip_family_pools",
        train=train_info,
        test=test_info,
        train_codewords=train_info.codewords,
        test_codewords=test_info.codewords,
        weight=weight,
        min_gap=min_gap,
        n_bits=n_bits,
        target=target,
    )
    return X_train, y_train, X_test, y_test, info


_DEFAULT_MAX_BYTES = 2**30  # 1 GiB for the exhaustive triple set


def _n_multisets(n_tokens, size):
    from math import comb

    return comb(n_tokens + size - 1, size)


def exhaustive_triples_bytes(n_bits, seq_len=3, weight=None):
    """Memory the exhaustive triple set of :func:`min_ip_exhaustive_triples` needs.

    Counts the triple table (``seq_len`` int64 indices, a weight and a target per
    distinct triple) and the sequence-to-triple map (``seq_len`` int32 per
    sequence), which the exact *sequence* error needs.

    Parameters
    ----------
    n_bits : int
        Token dimension ``m``.
    seq_len : int, default=3
        Sequence length ``L``.
    weight : int or None, default=None
        Restrict the tokens to the words of this Hamming weight (``None``: all
        ``2^m`` words).

    Returns
    -------
    n_bytes : int

    Examples
    --------
    >>> exhaustive_triples_bytes(2, 3)
    2368
    """
    from math import comb

    n_bits = check_int(n_bits, "n_bits", 1, _MAX_BITS)
    seq_len = check_int(seq_len, "seq_len", 2)
    n_tokens = 2**n_bits if weight is None else comb(n_bits, _check_weight(weight, n_bits))
    n_triples = n_tokens * _n_multisets(n_tokens, seq_len - 1)
    n_sequences = n_tokens**seq_len
    return int(n_triples * (8 * seq_len + 16) + n_sequences * seq_len * 4)


def _all_words(n_bits, weight):
    index = np.arange(2**n_bits, dtype=np.int64)
    bits = (index[:, None] >> np.arange(n_bits - 1, -1, -1, dtype=np.int64)) & 1
    if weight is not None:
        bits = bits[bits.sum(1) == weight]
    return bits.astype(np.float64)


def _multisets(n_tokens, size):
    """Every sorted ``size``-tuple over ``range(n_tokens)``, lexicographic, and its
    multinomial count (number of orderings)."""
    from itertools import combinations_with_replacement
    from math import factorial

    combos = np.array(list(combinations_with_replacement(range(n_tokens), size)),
                      dtype=np.int64).reshape(-1, size)
    counts = np.ones(len(combos), dtype=np.int64) * factorial(size)
    # divide by the factorial of each run of equal entries
    run = np.ones(len(combos), dtype=np.int64)
    for j in range(1, size):
        same = combos[:, j] == combos[:, j - 1]
        run = np.where(same, run + 1, 1)
        counts //= np.where(same, run, 1)
    return combos, counts


def min_ip_exhaustive_triples(n_bits, seq_len=3, weight=None, max_bytes=_DEFAULT_MAX_BYTES,
                              return_sequences=True):
    """Every Min-IP sequence as its distinct (query, other tokens) triples.

    Take every sequence of ``seq_len`` tokens over the vocabulary (all ``2^m``
    words of ``m = n_bits`` bits, or all words of weight ``weight``) and the
    target at every position. Position ``i`` of a sequence is one triple
    ``(x_i, multiset of the other tokens)``: its target
    ``min_j <x_i, x_j>`` (:func:`min_ip_targets`, ``j`` over the whole sequence,
    ``i`` included, so ties and the query's own overlap are handled exactly as
    there) and the output of any head without positional information depend
    only on that triple. The set is deduplicated to its distinct triples with
    integer multiplicities: a triple ``(q, M)`` occurs
    ``seq_len * multinomial(M)`` times among the ``seq_len * V^seq_len``
    positions (``V`` tokens). Training on the weighted triples is training on
    every sequence.

    Parameters
    ----------
    n_bits : int
        Token dimension ``m``.
    seq_len : int, default=3
        Sequence length ``L >= 2``.
    weight : int or None, default=None
        Use only the words of this Hamming weight as tokens (to go past m = 6 with
        a smaller vocabulary); ``None``: all ``2^m`` words.
    max_bytes : int, default=2**30
        Memory cap; see :func:`exhaustive_triples_bytes`.
    return_sequences : bool, default=True
        Also build ``sequence_triples``, the map from each of the ``V^L``
        sequences to its ``L`` triples (for the exact sequence error).

    Returns
    -------
    data : Bunch
        ``tokens`` ``(V, m)`` float64 0/1 words (index = the word's binary
        value order); ``triples`` ``(n, L)`` int64 token indices, column 0 the
        query, the other columns the other tokens sorted; ``weights`` ``(n,)``
        int64 multiplicities (sum ``L * V^L``); ``targets`` ``(n,)`` float64;
        ``sequence_triples`` ``(V^L, L)`` int64 triple index of each position
        of each sequence (lexicographic order, as
        ``make_min_ip(exhaustive=True)``), or ``None``; ``n_bits``,
        ``seq_len``, ``weight``, ``n_sequences``, ``n_bytes``.

    Raises
    ------
    ValueError
        If the set would need more than ``max_bytes`` (the message says how
        much it needs), or a parameter is out of range.

    Examples
    --------
    >>> data = min_ip_exhaustive_triples(2, 3)
    >>> data.triples.shape, int(data.weights.sum()), data.n_sequences
    ((40, 3), 192, 64)
    >>> data.tokens[data.triples[5]].tolist(), float(data.targets[5])
    ([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], 0.0)
    """
    n_bits = check_int(n_bits, "n_bits", 1, _MAX_BITS)
    seq_len = check_int(seq_len, "seq_len", 2)
    if weight is not None:
        weight = _check_weight(weight, n_bits)
    max_bytes = check_int(max_bytes, "max_bytes", 1)
    needed = exhaustive_triples_bytes(n_bits, seq_len, weight)
    if needed > max_bytes:
        raise ValueError(
            f"the exhaustive set for n_bits={n_bits}, seq_len={seq_len}"
            f"{'' if weight is None else f', weight={weight}'} needs {needed} bytes "
            f"({needed / 2**30:.3g} GiB), more than max_bytes={max_bytes}; lower n_bits "
            "or seq_len, use a fixed weight, or raise max_bytes"
        )
    tokens = _all_words(n_bits, weight)
    V = len(tokens)
    combos, counts = _multisets(V, seq_len - 1)
    n_multi = len(combos)
    queries = np.repeat(np.arange(V, dtype=np.int64), n_multi)
    triples = np.concatenate([queries[:, None], np.tile(combos, (V, 1))], axis=1)
    weights = np.tile(counts, V) * seq_len
    overlaps = tokens @ tokens.T  # exact small integers
    # min_j <x_i, x_j> over the whole sequence: the query itself and the others
    targets = overlaps[triples[:, 0, None], triples].min(axis=1)
    sequence_triples = None
    n_sequences = V**seq_len
    if return_sequences:
        seq = (np.arange(n_sequences, dtype=np.int64)[:, None]
               // V ** np.arange(seq_len - 1, -1, -1, dtype=np.int64)) % V
        # multiset keys in base V; the lexicographic combos have increasing keys
        powers = V ** np.arange(seq_len - 2, -1, -1, dtype=np.int64)
        combo_keys = combos @ powers
        sequence_triples = np.empty((n_sequences, seq_len), dtype=np.int64)
        for i in range(seq_len):
            others = np.sort(np.delete(seq, i, axis=1), axis=1)
            index = np.searchsorted(combo_keys, others @ powers)
            sequence_triples[:, i] = seq[:, i] * n_multi + index
    return Bunch(tokens=tokens, triples=triples, weights=weights, targets=targets,
                 sequence_triples=sequence_triples, n_bits=n_bits, seq_len=seq_len,
                 weight=weight, n_sequences=n_sequences, n_bytes=needed)
