"""Min-IP train and test sets on disjoint codeword pools, for out-of-distribution tests.

One constant-weight code is drawn and split at random into two pools; each pool
gets its own witness suite (:func:`~intrinsic_rank.datasets.make_min_ip_witness_suite`)
or witness family (:func:`~intrinsic_rank.datasets.make_min_ip_witness_family`).
Every token of a sequence is a codeword of its pool, so no token of the test set
occurs in the training set: the test measures whether a model learned the
comparison rather than the codewords (the Min-IP paper, "Three tokens force
exponential feature rank in nonnegative kernel attention", on larger disjoint
train/test pools).
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, child_seeds
from ..codes import random_constant_weight_code
from ._min_ip import _MAX_BITS, _check_target, _check_weight
from ._min_ip_witness_family import make_min_ip_witness_family
from ._min_ip_witness_suite import make_min_ip_witness_suite

__all__ = ["make_min_ip_pools", "make_min_ip_family_pools"]

# witnesses drawn per pool when a suite's sizes are not given
_SUITE_SEQUENCES = (1000, 500)


def make_min_ip_pools(
    n_bits=24,
    weight=None,
    n_train_codewords=200,
    n_test_codewords=200,
    n_train_sequences=None,
    n_test_sequences=None,
    gap=1,
    target="final",
    random_state=None,
    family=False,
    min_gap=3,
    anchors=True,
):
    """Train and test witness suites (or families) on disjoint codeword pools.

    One constant-weight code of ``n_train_codewords + n_test_codewords``
    distinct words is drawn and split at random into two pools. Each pool gets
    its own :func:`make_min_ip_witness_suite` (``family=False``: sampled
    witnesses of one overlap gap ``gap``) or :func:`make_min_ip_witness_family`
    (``family=True``: every witness with overlap gap ``>= min_gap``, plus
    anchors). No token of the test set occurs in the training set.

    Parameters
    ----------
    n_bits : int, default=24
        Token dimension, ``2 <= n_bits <= 64``.
    weight : int or None, default=None
        Hamming weight of the code; ``None`` means ``n_bits // 2``.
    n_train_codewords, n_test_codewords : int, default=200
        Sizes of the two pools (at least 3 each).
    n_train_sequences, n_test_sequences : int or None, default=None
        Sequences of each pool. A suite draws that many witnesses (``None``:
        1000 and 500); a family keeps that many of its sequences, drawn
        uniformly (``None``: the whole family).
    gap : int, default=1
        Overlap gap of every witness of a suite (``family=False``).
    target : {"final", "all"}, default="final"
        As in :func:`make_min_ip_witness_suite`.
    random_state : None, int or numpy.random.RandomState, default=None
        Seed of the code, the split and both pools' sets.
    family : bool, default=False
        Whole witness families instead of sampled suites.
    min_gap : int, default=3
        Smallest overlap gap of a family's witnesses (``family=True``).
    anchors : bool, default=True
        Add the anchors ``(u, u, q)`` to both families (``family=True``).

    Returns
    -------
    X_train : ndarray of shape (n_train, 3, n_bits)
    y_train : ndarray of shape (n_train,) or (n_train, 3, 1)
    X_test : ndarray of shape (n_test, 3, n_bits)
    y_test : ndarray of shape (n_test,) or (n_test, 3, 1)
    info : Bunch
        ``train`` and ``test`` (the two sets' info Bunches, whose
        ``codewords`` are the two pools), ``train_codewords``,
        ``test_codewords``, ``weight``, ``n_bits``, ``target``, and ``gap``
        with ``kind="min_ip_pools"`` or ``min_gap`` with
        ``kind="min_ip_family_pools"``.

    See Also
    --------
    make_min_ip_family_pools : the family pools with their own defaults.

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
    sizes = (n_train_sequences, n_test_sequences)
    if family:
        def make(pool, n, seed):
            return make_min_ip_witness_family(
                min_gap=min_gap, anchors=anchors, n_sequences=n, target=target,
                codewords=pool, random_state=seed, return_info=True)
        details = dict(kind="min_ip_family_pools", min_gap=min_gap)
    else:
        sizes = tuple(default if n is None else n for n, default in zip(sizes, _SUITE_SEQUENCES))

        def make(pool, n, seed):
            return make_min_ip_witness_suite(
                n_sequences=n, gap=gap, target=target, codewords=pool,
                random_state=seed, return_info=True)
        details = dict(kind="min_ip_pools", gap=gap)
    (X_train, y_train, train_info), (X_test, y_test, test_info) = (
        make(pool, n, seed) for pool, n, seed in zip(pools, sizes, (train_seed, test_seed)))
    info = Bunch(
        train=train_info,
        test=test_info,
        train_codewords=train_info.codewords,
        test_codewords=test_info.codewords,
        weight=weight,
        n_bits=n_bits,
        target=target,
        **details,
    )
    return X_train, y_train, X_test, y_test, info


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

    :func:`make_min_ip_pools` with ``family=True`` and the defaults of the
    Min-IP phase-transition experiment: pools of 16 codewords, each with its
    whole :func:`make_min_ip_witness_family`.

    Parameters
    ----------
    n_bits, weight, target, random_state
        See :func:`make_min_ip_pools`.
    n_train_codewords, n_test_codewords : int, default=16
        Sizes of the two pools (at least 3 each).
    min_gap : int, default=3
        Smallest overlap gap of a witness.
    anchors : bool, default=True
        Add the anchors ``(u, u, q)`` to both families.
    n_train_sequences, n_test_sequences : int or None, default=None
        Keep that many sequences of each family, drawn uniformly (``None``:
        the whole family).

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
        The two families.
    info : Bunch
        As :func:`make_min_ip_pools` (``kind="min_ip_family_pools"``).

    Examples
    --------
    >>> X_tr, y_tr, X_te, y_te, info = make_min_ip_family_pools(
    ...     n_bits=12, n_train_codewords=8, n_test_codewords=8, min_gap=2,
    ...     random_state=0)
    >>> train = {w.tobytes() for w in info.train_codewords}
    >>> any(w.tobytes() in train for w in info.test_codewords)
    False
    """
    return make_min_ip_pools(
        n_bits=n_bits, weight=weight, n_train_codewords=n_train_codewords,
        n_test_codewords=n_test_codewords, n_train_sequences=n_train_sequences,
        n_test_sequences=n_test_sequences, target=target, random_state=random_state,
        family=True, min_gap=min_gap, anchors=anchors)
