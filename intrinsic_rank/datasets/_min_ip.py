"""Min-IP tasks of the Min-IP paper: the target and random sequences.

Paper: "Three tokens force exponential feature rank in nonnegative kernel
attention".

Tokens are Boolean vectors ``x_i in {0,1}^m`` (``m = n_bits``). The target at
position ``i`` of a sequence ``X = (x_1, ..., x_N)`` is the minimum inner product
of ``x_i`` with every token of the sequence, itself included:

``t_i(X) = min_{1 <= j <= N} <x_i, x_j>``.

The causal final-query variant keeps only the target of the last position.
:func:`min_ip_targets` is the single implementation of this target; every
Min-IP generator of the package computes its targets with it. The generators
live beside it:

* :func:`make_min_ip` (here): i.i.d. Bernoulli tokens, or every sequence over
  ``{0,1}^m`` (``exhaustive=True``);
* :mod:`._min_ip_witness_suite`: the sampled length-3 witness suite on a
  constant-weight code and its length-2 counterpart;
* :mod:`._min_ip_witness_family`: every witness of a small code, with anchors;
* :mod:`._min_ip_pools`: suites or families on disjoint codeword pools;
* :mod:`._min_ip_exhaustive`: every sequence over all ``2^m`` tokens as
  weighted (query, other tokens) triples.
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, check_random_state, check_real
from ..codes import check_boolean_tokens

__all__ = ["min_ip_targets", "make_min_ip"]

_TARGETS = ("all", "final")
_MAX_BITS = 64
_MAX_EXHAUSTIVE_LOG2 = 20  # at most 2**20 enumerated sequences


def _check_target(target):
    if target not in _TARGETS:
        raise ValueError(f"unknown target {target!r}; use one of {_TARGETS}")
    return target


def _check_weight(weight, n_bits):
    if weight is None:
        weight = n_bits // 2
    return check_int(weight, "weight", 1, n_bits - 1)


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
