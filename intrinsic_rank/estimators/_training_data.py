"""The data of one :class:`~intrinsic_rank.AttentionRankEstimator` fit, on the device.

:func:`training_data` splits the sequences (a sweep holds out ``validation_fraction``
of them), finds the units the students train in (a power of two for ``X`` and for ``Y``
far from unit size, :mod:`._scaling`), puts each part on the device in float32 once,
and computes the scales the training rules read: the divergence limit, the held-out
variance (the scale of ``tol``) and the early-stopping threshold.
"""

import warnings

import numpy as np
import torch
from sklearn.utils import Bunch

from . import _scaling
from ._callbacks import DIVERGENCE_FACTOR
from ._inputs import heldout_size
from ._scaling import rows_as_tensor, scale_factor

__all__ = ["EARLY_STOPPING_DELTA", "Rows", "heldout_variance", "mean_square", "mean_variance",
           "split_rows", "training_data"]

EARLY_STOPPING_DELTA = 0.01
"""An improvement is a fall of the held-out risk by more than this share of ``tol * variance``."""


class Rows:
    """Some rows of a tensor, gathered only when indexed: a part of the data without a copy.

    Float32 data on the CPU that needs no rescaling is trained on where it lies:
    ``torch.from_numpy`` shares the caller's array, and the training and held-out parts
    are these views of it, gathered a batch at a time (:class:`~._net.TensorBatchIterator`
    gathers every batch anyway, and every evaluation goes a batch at a time). The numbers
    are those of a copied part, bit for bit; the memory of the copy (67 MB for
    ``n = 4,096`` sequences of ``32 x 64`` floats in ``X`` and ``Y``) is saved.

    Parameters
    ----------
    tensor : torch.Tensor
    rows : array-like of int

    Examples
    --------
    >>> part = Rows(torch.arange(10.0), [1, 4, 7])
    >>> len(part), part[1:].tolist(), part.shape
    (3, [4.0, 7.0], torch.Size([3]))
    """

    def __init__(self, tensor, rows):
        self.tensor = tensor
        self.rows = torch.as_tensor(np.asarray(rows), dtype=torch.long, device=tensor.device)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        return self.tensor[self.rows[index]]

    @property
    def shape(self):
        return torch.Size((len(self.rows),) + tuple(self.tensor.shape[1:]))

    @property
    def device(self):
        return self.tensor.device

    @property
    def dtype(self):
        return self.tensor.dtype

    def numel(self):
        """The entries of the rows (``len(self)`` times a row's)."""
        return len(self.rows) * self.tensor[0].numel()

    def to(self, *args, **kwargs):
        """The rows gathered, as ``torch.Tensor.to`` gives them."""
        return self[:].to(*args, **kwargs)

    def detach(self):
        """The rows gathered into one tensor."""
        return self[:]


def _shared(array, device, scale):
    """``array`` as a tensor sharing its memory, or None where a float32 copy is needed."""
    shareable = (type(array) in (np.ndarray, np.memmap) and array.dtype == np.float32
                 and array.flags.c_contiguous and scale == 1.0 and device.type == "cpu")
    if not shareable:
        return None
    with warnings.catch_warnings():  # a read-only array: the tensor is only ever read
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def _part(array, name, device, rows, scale, shared):
    """The rows of ``array`` on the device: a view of ``shared``, or a float32 copy."""
    if shared is None:
        return rows_as_tensor(array, name, device, rows, scale)
    if len(rows) == len(array):  # every row, in order
        return shared
    return Rows(shared, rows)


def mean_square(Y_t):
    """Mean square of a tensor's entries, accumulated in float64 by chunks of rows."""
    total, rows = 0.0, max(1, _scaling.CHUNK_ELEMENTS // max(1, Y_t[0].numel()))
    for start in range(0, len(Y_t), rows):
        total += float(Y_t[start:start + rows].double().square().sum())
    return total / Y_t.numel()


def mean_variance(Y_t):
    """Mean per-entry variance over the rows of a tensor, in float64, by chunks of rows.

    Examples
    --------
    >>> mean_variance(torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
    1.0
    """
    rows = max(1, _scaling.CHUNK_ELEMENTS // max(1, Y_t[0].numel()))
    total = None
    for start in range(0, len(Y_t), rows):
        part = Y_t[start:start + rows].double().sum(dim=0)
        total = part if total is None else total + part
    mean = total / len(Y_t)
    square = 0.0
    for start in range(0, len(Y_t), rows):
        square += float((Y_t[start:start + rows].double() - mean).square().sum())
    return square / Y_t.numel()


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
        held out; :class:`Rows` of the caller's own float32 data where it can be
        shared), ``variance`` (held-out, None for a single rank), ``limit`` (the
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
    # part, filled chunk by chunk (no float64 or scaled copy of X or Y), or views of
    # float32 data on the CPU that needs no rescaling (no copy at all)
    X_shared, Y_shared = _shared(X, device, x_scale), _shared(Y, device, y_scale)
    X_train = _part(X, "X", device, train, x_scale, X_shared)
    Y_train = _part(Y, "Y", device, train, y_scale, Y_shared)
    if sweep and validation_fraction > 0:
        X_held = _part(X, "X", device, heldout, x_scale, X_shared)
        Y_held = _part(Y, "Y", device, heldout, y_scale, Y_shared)
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
