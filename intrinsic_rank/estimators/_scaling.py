"""Data on the device: exact power-of-two rescaling and chunked float32 copies.

Other modules read ``CHUNK_ELEMENTS`` as ``_scaling.CHUNK_ELEMENTS`` (not a copy
of the name), so one setting governs every chunked pass.
"""

import math

import numpy as np
import torch

__all__ = ["CHUNK_ELEMENTS", "MAX_SCALE_EXPONENT", "MAX_UNIT_FACTOR", "SCALE_WINDOW", "as_tensor",
           "check_units", "chunk_rows", "in_user_units", "rows_as_tensor", "scale_factor"]

SCALE_WINDOW = (1e-2, 1e2)
"""Root-mean-square sizes of ``X`` or ``Y`` outside this window are standardised."""

CHUNK_ELEMENTS = 2**22
"""Arrays and evaluation outputs above this many entries are processed in chunks of rows.

At and below it the code takes the unchunked path, so those numbers are
bit-identical to unchunked evaluation; above it, memory stays bounded: about
``CHUNK_ELEMENTS`` float64 entries (32 MiB) per temporary instead of the whole
data set's."""


MAX_SCALE_EXPONENT = 450
"""``X`` and ``Y`` are accepted when their root mean square lies in ``[2^-450, 2^450]``
(about ``3.5e-136`` to ``2.9e135``), checked by :func:`scale_factor` before any training.

A kernel in the units of ``X`` is ``x_scale^-2`` times a unit-size one and a risk in
the units of ``Y`` ``y_scale^-2`` times one, so inside this window every such factor is
at most ``2^900`` (:data:`MAX_UNIT_FACTOR`) and every reported number stays a normal
float64; outside it a factor over- or underflows (``Y * 1e300`` gave a division by
zero after training, ``X * 1e-310`` an ``OverflowError``)."""

MAX_UNIT_FACTOR = 2.0**900
"""The largest factor between the data's units and the students' (``x_scale_**2`` for a
kernel) that :func:`check_units` accepts: a unit-size result times it stays far inside
float64 (``2^900`` is about ``1e271``; float64 ends near ``1.8e308``)."""


def check_units(factor, name):
    """Refuse, before training, data so far from unit size that results overflow float64.

    Parameters
    ----------
    factor : float
        The factor that takes a unit-size result back to the data's units
        (``x_scale**2`` for a query-key kernel, ``1 / y_scale`` for a risk).
    name : str
        The input it comes from, named in the error.

    Raises
    ------
    ValueError
        When ``factor`` or its inverse exceeds :data:`MAX_UNIT_FACTOR`.

    Examples
    --------
    >>> check_units(2.0**132, "X")
    >>> check_units(2.0**1000, "X")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: X is too far from unit size: ...
    """
    if not (1.0 / MAX_UNIT_FACTOR <= factor <= MAX_UNIT_FACTOR):
        power = (f"2^{math.log2(factor):.0f}" if 0.0 < factor < math.inf
                 else "a power of two beyond float64")
        raise ValueError(f"{name} is too far from unit size: its results (kernels, risks) "
                         f"would need a factor of {power} to be stated in "
                         f"its units, beyond float64; rescale {name} nearer to 1")


def in_user_units(values, factor):
    """``values`` (float32, the students' units) times ``factor``, in the data's units.

    Float64 whenever ``factor`` is not 1: a float32 kernel times ``x_scale**2``
    overflows float32 for data below about ``1e-19`` (``X * 1e-20`` gave
    infinite kernels after a full training). At ``factor == 1`` the values are
    returned unchanged (bit-identical to an unscaled fit).

    Examples
    --------
    >>> import numpy as np
    >>> in_user_units(np.ones(2, np.float32), 2.0**132).dtype
    dtype('float64')
    >>> bool(np.isfinite(in_user_units(np.ones(2, np.float32), 2.0**132)).all())
    True
    """
    if factor == 1.0:
        return values
    return np.asarray(values, dtype=np.float64) * float(factor)


def chunk_rows(array, per_row=None):
    """Rows per chunk so that one chunk holds about ``CHUNK_ELEMENTS`` entries.

    Parameters
    ----------
    array : ndarray
    per_row : int or None, default=None
        Entries per row; ``None`` takes the product of ``array.shape[1:]``.

    Returns
    -------
    rows : int
        At least 1.

    Examples
    --------
    >>> import numpy as np
    >>> chunk_rows(np.empty((3, 2**21)))
    2
    """
    if per_row is None:
        per_row = int(np.prod(array.shape[1:], dtype=np.int64)) if array.ndim > 1 else 1
    return max(1, CHUNK_ELEMENTS // max(1, per_row))


def scale_factor(array, name="the data"):
    """The power of two that brings ``array`` to unit size, or exactly 1.0.

    ``1.0`` when the root mean square of ``array`` lies in ``SCALE_WINDOW``
    (``[1e-2, 1e2]``) or is 0; otherwise ``2^k`` with ``2^k * rms`` in
    ``[2^-0.5, 2^0.5]``. A power of two rescales floats exactly, so undoing it
    loses nothing. Arrays of more than ``CHUNK_ELEMENTS`` entries (a float32
    array or an ``np.memmap`` included) are read in chunks of rows, in float64,
    without a whole float64 copy.

    Parameters
    ----------
    array : ndarray
    name : str, default="the data"
        Named in the error.

    Returns
    -------
    factor : float

    Raises
    ------
    ValueError
        When the root mean square lies outside ``[2^-450, 2^450]``
        (:data:`MAX_SCALE_EXPONENT`): results in the data's units would leave float64.

    Examples
    --------
    >>> import numpy as np
    >>> scale_factor(np.ones(3)), scale_factor(np.full(3, 1e-6)) * 1e-6
    (1.0, 1.048576)
    """
    if getattr(array, "size", 0) > CHUNK_ELEMENTS and getattr(array, "ndim", 0) >= 1:
        rows = chunk_rows(array)
        peak = 0.0
        for start in range(0, len(array), rows):
            part = np.abs(np.asarray(array[start:start + rows], dtype=np.float64))
            peak = max(peak, float(np.max(part)) if part.size else 0.0)
        if peak == 0.0 or not np.isfinite(peak):
            return 1.0
        total = 0.0
        for start in range(0, len(array), rows):
            part = np.asarray(array[start:start + rows], dtype=np.float64) / peak
            total += float(np.sum(np.square(part)))
        rms = peak * math.sqrt(total / array.size)
    else:
        array = np.asarray(array, dtype=np.float64)
        peak = float(np.max(np.abs(array))) if array.size else 0.0
        if peak == 0.0 or not np.isfinite(peak):
            return 1.0
        rms = peak * math.sqrt(float(np.mean(np.square(array / peak))))
    if SCALE_WINDOW[0] <= rms <= SCALE_WINDOW[1]:
        return 1.0
    exponent = -round(math.log2(rms))
    if abs(exponent) > MAX_SCALE_EXPONENT:
        raise ValueError(
            f"{name} is too far from unit size: its root mean square {rms:.3g} lies outside "
            f"[2^-{MAX_SCALE_EXPONENT}, 2^{MAX_SCALE_EXPONENT}] (about 3.5e-136 to 2.9e135), "
            "where kernels and risks in its units leave float64; rescale it nearer to 1")
    return math.ldexp(1.0, exponent)


def rows_as_tensor(array, name, device, rows=None, scale=1.0):
    """Rows of ``array``, times ``scale``, as one float32 tensor on ``device``, checked finite.

    The tensor is filled chunk by chunk, so the only whole copy made is the
    float32 tensor itself: no float64 or scaled copy of the data, and an
    ``np.memmap`` is read a chunk at a time. Every entry gets the same
    arithmetic as ``as_tensor(array[rows] * scale, ...)``: the two are
    bit-identical.

    Parameters
    ----------
    array : ndarray
    name : str
        Named in the error for entries too large for float32.
    device : torch.device
    rows : ndarray of int or None, default=None
        Row indices to take (all rows when ``None``).
    scale : float, default=1.0
        A power of two multiplying every entry (see :func:`scale_factor`).

    Returns
    -------
    tensor : torch.Tensor of float32

    Examples
    --------
    >>> import numpy as np
    >>> rows_as_tensor(np.arange(6.0).reshape(3, 2), "X", "cpu", rows=np.array([0, 2]),
    ...                scale=0.5)
    tensor([[0.0000, 0.5000],
            [2.0000, 2.5000]])
    """
    n = len(array) if rows is None else len(rows)
    if n * int(np.prod(array.shape[1:], dtype=np.int64)) <= CHUNK_ELEMENTS:
        part = array if rows is None else array[rows]
        return as_tensor(part if scale == 1.0 else part * scale, name, device)
    out = torch.empty((n,) + tuple(array.shape[1:]), dtype=torch.float32, device=device)
    step = chunk_rows(array)
    for start in range(0, n, step):
        stop = min(n, start + step)
        part = array[start:stop] if rows is None else array[rows[start:stop]]
        part = np.asarray(part)
        out[start:stop] = as_tensor(part if scale == 1.0 else part * scale, name, device)
    return out


def as_tensor(array, name, device):
    """``array`` as a contiguous float32 tensor on ``device``, checked finite.

    Negative strides, Fortran order and other views become one contiguous
    copy (torch accepts no negative stride); a finite float64 entry that
    overflows float32 is a :class:`ValueError` naming ``name``.

    Parameters
    ----------
    array : ndarray
    name : str
    device : torch.device

    Returns
    -------
    tensor : torch.Tensor of float32

    Examples
    --------
    >>> import numpy as np
    >>> as_tensor(np.array([1e39]), "X", "cpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: X has entries too large for float32 (largest |X| = 1e+39, float32 ends ...
    """
    with np.errstate(over="ignore"):  # checked just below
        array32 = np.ascontiguousarray(array, dtype=np.float32)
    if not np.all(np.isfinite(array32)):
        raise ValueError(
            f"{name} has entries too large for float32 (largest |{name}| = "
            f"{float(np.max(np.abs(array))):.3g}, float32 ends at 3.4e+38); rescale {name}"
        )
    return torch.tensor(array32, device=device)
