"""Every Min-IP sequence over all ``2^m`` tokens, as weighted distinct triples.

A length-``L`` sequence has a target at each position; the target at a position
depends only on its query and the multiset of the other tokens. So every
sequence over the vocabulary reduces to the distinct (query, multiset of the
other tokens) triples with integer multiplicities, which the Min-IP rank law
trains on.
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int
from ._min_ip import _MAX_BITS, _check_weight

__all__ = ["min_ip_exhaustive_triples", "exhaustive_triples_bytes"]

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
