"""The data of one :class:`~intrinsic_rank.AttentionRankEstimator` fit, on the device.

:func:`training_data` splits the sequences (a sweep holds out ``validation_fraction``
of them), finds the units the students train in (a power of two for ``X`` and for ``Y``
far from unit size, :mod:`._scaling`), puts each part on the device in float32 once,
and computes the scales the training rules read: the divergence limit, the held-out
variance (the scale of ``tol``) and the early-stopping threshold.
"""

import numpy as np
from sklearn.utils import Bunch

from . import _scaling
from ._callbacks import DIVERGENCE_FACTOR
from ._inputs import heldout_size
from ._scaling import rows_as_tensor, scale_factor

__all__ = ["EARLY_STOPPING_DELTA", "heldout_variance", "mean_square", "split_rows",
           "training_data"]

EARLY_STOPPING_DELTA = 0.01
"""An improvement is a fall of the held-out risk by more than this share of ``tol * variance``."""


def mean_square(Y_t):
    """Mean square of a tensor's entries, accumulated in float64 by chunks of rows."""
    total, rows = 0.0, max(1, _scaling.CHUNK_ELEMENTS // max(1, Y_t[0].numel()))
    for start in range(0, len(Y_t), rows):
        total += float(Y_t[start:start + rows].double().square().sum())
    return total / Y_t.numel()


def heldout_variance(Y, rows):
    """Mean per-entry variance of ``Y[rows]`` (float64 arithmetic, whatever ``Y``'s dtype)."""
    part = Y[rows]
    if part.dtype == np.float64:
        return np.mean(np.var(part, axis=0))
    return np.mean(np.var(part, axis=0, dtype=np.float64))


def split_rows(n, validation_fraction, seed):
    """Training and held-out row indices, sorted; the same rows twice when the fraction is 0.

    Examples
    --------
    >>> train, heldout = split_rows(10, 0.2, seed=0)
    >>> len(train), len(heldout), sorted(set(train) | set(heldout)) == list(range(10))
    (8, 2, True)
    """
    n_heldout = heldout_size(n, validation_fraction)
    if validation_fraction == 0:
        # in-sample sweep: every rank is scored on the data it was fitted to
        everything = np.arange(n)
        return everything, everything
    order = np.random.RandomState(seed).permutation(n)
    return np.sort(order[n_heldout:]), np.sort(order[:n_heldout])


def training_data(X, Y, *, sweep, validation_fraction, seed, device, tol, patience):
    """The parts, units and scales of one fit.

    Parameters
    ----------
    X, Y : ndarray
        The validated data (float32 or float64; never copied to float64 whole).
    sweep : bool
        Whether the fit is a sweep (which holds out part of the data).
    validation_fraction : float
    seed : int
        The fit's seed (the split).
    device : torch.device
    tol : float
    patience : int or None
        ``n_iter_no_change`` of a sweep with ``early_stopping``, else None.

    Returns
    -------
    data : Bunch
        ``seed``, ``device``, ``train`` and ``heldout`` (row indices; ``heldout`` is None
        for a single rank), ``x_scale`` and ``y_scale``, the tensors ``X_train``,
        ``Y_train``, ``X_held``, ``Y_held`` (the training tensors again when nothing is
        held out), ``variance`` (held-out, None for a single rank), ``limit`` (the
        divergence limit, None for all-zero targets), ``patience`` and ``min_delta``
        (the early-stopping rule in training units).
    """
    if sweep:
        train, heldout = split_rows(len(X), validation_fraction, seed)
    else:
        train, heldout = np.arange(len(X)), None
    # far from unit size, X and Y are trained on in units of their own size
    # (a power of two each, exact); every reported number is converted back
    x_scale, y_scale = scale_factor(X, "X"), scale_factor(Y, "Y")
    # a kernel comes back as x_scale**2 times a unit-size one: refuse, before any
    # training, data so far from unit size that the product would not be finite
    _scaling.check_units(x_scale**2, "X")
    # the data on the device in float32, once: a training part and a held-out
    # part, filled chunk by chunk (no float64 or scaled copy of X or Y)
    X_train = rows_as_tensor(X, "X", device, train, x_scale)
    Y_train = rows_as_tensor(Y, "Y", device, train, y_scale)
    if sweep and validation_fraction > 0:
        X_held = rows_as_tensor(X, "X", device, heldout, x_scale)
        Y_held = rows_as_tensor(Y, "Y", device, heldout, y_scale)
    else:
        X_held, Y_held = X_train, Y_train
    square = mean_square(Y_train)
    variance = heldout_variance(Y, heldout) if sweep else None
    patience = patience if sweep else None
    min_delta = 0.0
    if patience is not None:
        # a fall smaller than a hundredth of the selection tolerance is no progress
        min_delta = EARLY_STOPPING_DELTA * tol * variance * y_scale**2
    return Bunch(seed=seed, device=device, train=train, heldout=heldout, x_scale=x_scale,
                 y_scale=y_scale, X_train=X_train, Y_train=Y_train, X_held=X_held,
                 Y_held=Y_held, variance=variance,
                 limit=DIVERGENCE_FACTOR * square if square > 0 else None,
                 patience=patience, min_delta=min_delta)
