"""The Min-IP witness family: every witness of a small code, with anchors.

A family dense in constraints for in-sample capacity experiments (the Min-IP
paper, "Three tokens force exponential feature rank in nonnegative kernel
attention"): every triple of a small constant-weight code whose overlaps differ
by at least a gap, and the anchor sequences ``(u, u, q)``.
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, child_seeds
from ..codes import check_constant_weight_code, code_overlaps, random_constant_weight_code
from ._min_ip import _MAX_BITS, _check_target, _check_weight, min_ip_targets
from ._min_ip_witness_suite import _distinct_indices

__all__ = ["make_min_ip_witness_family"]


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
    (``docs/min_ip.md`` shows what the suite measures). This family is instead
    *dense in constraints*: a small code, every witness it offers with *varying*
    gaps ``>= min_gap``, and anchors.

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
    codewords, weight, n_codewords, n_bits = _family_code(codewords, weight, n_bits,
                                                          n_codewords, code_seed)
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
        triples, anchor = _sample_family(triples, anchor, n_sequences, min_gap, anchors,
                                         sample_seed)
    triples, anchor, better_position = _place_better(triples, anchor, both_orders, order_seed)
    X, y, pair_overlaps = _family_sequences(codewords, overlaps, triples, better_position,
                                            target)
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


def _family_code(codewords, weight, n_bits, n_codewords, code_seed):
    """The code (drawn, or the one given, checked) with its weight, size and width."""
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
    return codewords, weight, n_codewords, n_bits


def _sample_family(triples, anchor, n_sequences, min_gap, anchors, sample_seed):
    """``n_sequences`` distinct members of the family, in the family's order."""
    n_family = len(triples)
    if n_sequences > n_family:
        raise ValueError(
            f"the family has only {n_family} sequences (min_gap={min_gap}, "
            f"anchors={bool(anchors)}); asked for n_sequences={n_sequences}"
        )
    keep = np.sort(
        _distinct_indices(n_family, n_sequences, np.random.RandomState(sample_seed))
    )
    return triples[keep], anchor[keep]


def _place_better(triples, anchor, both_orders, order_seed):
    """Where each sequence puts its better word (0 or 1; anchors at 0), and with
    ``both_orders`` every witness once more in the other order."""
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
    return triples, anchor, better_position


def _family_sequences(codewords, overlaps, triples, better_position, target):
    """The sequences ``(better, worse)`` in their order, then the query; their targets and
    the query's overlaps with the better and the worse word."""
    n_bits = codewords.shape[1]
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
    return X, y, pair_overlaps
