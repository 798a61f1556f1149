"""Reachable output sequences of the reachability paper.

The machine epsilon of a floating format, the count, slope and box bounds on the
number of sequences a frozen Transformer can be prompted to produce, and the
hidden-state geometry (radius and box) they need.
"""

import numpy as np

from .._validation import check_real
from ._common import Certificate, check_size, finite_result, log1p_ratio, log_int

__all__ = [
    "precision_from_dtype",
    "reachable_log_count_bound",
    "reachable_slope_bound",
    "box_log_count_bound",
    "box_slope_bound",
    "hidden_state_geometry",
]

# Machine epsilon (spacing of the floats in [1, 2)) of each supported format.
_MACHINE_EPSILON = {
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
    "float32": 2.0**-23,
    "float64": 2.0**-52,
}
# C / torch names: "float" is 32 bits here, unlike ``np.dtype("float")``.
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64"}


def precision_from_dtype(dtype):
    """Machine epsilon of a floating dtype, the ``epsilon`` of the reachability paper's bounds.

    Parameters
    ----------
    dtype : numpy dtype, numpy scalar type or str
        ``np.float16``, ``np.dtype("float32")``, ... or a name: ``"float16"``
        (``"half"``), ``"bfloat16"``, ``"float32"`` (``"float"``),
        ``"float64"`` (``"double"``), optionally prefixed ``"torch."`` so that
        ``str(torch_dtype)`` works without this module importing torch (a torch
        dtype object itself is read through its ``str``). String names follow
        C and torch: ``"float"`` means 32 bits, whereas the Python type
        ``float`` (through numpy) means 64 bits.

    Returns
    -------
    epsilon : float
        ``2**-10`` (float16), ``2**-7`` (bfloat16), ``2**-23`` (float32) or
        ``2**-52`` (float64): the gap between 1 and the next representable
        number.

    Notes
    -----
    The reachability paper uses this number as an *absolute* cell size ``epsilon`` in the
    hidden-state units (its table uses ``epsilon = 2**-10`` for fp16). The true
    spacing of floats near a value ``x`` is about ``|x| * epsilon``: for hidden
    states with ``|x| > 1`` the real cells are coarser and the bounds of this
    module stay upper bounds, for ``|x| < 1`` they are finer and the convention
    is not a strict bound. See :func:`reachable_log_count_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> precision_from_dtype(np.float16) == 2**-10
    True
    >>> precision_from_dtype("torch.bfloat16")
    0.0078125
    >>> precision_from_dtype("double") == float(np.finfo(np.float64).eps)
    True
    """
    if dtype is None or isinstance(dtype, (bool, np.bool_)):
        name = None
    elif isinstance(dtype, str):
        name = dtype.strip().lower()
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype).strip().lower()
    if name is not None:
        name = name.removeprefix("torch.")
        name = _DTYPE_ALIASES.get(name, name)
    if name not in _MACHINE_EPSILON:
        raise ValueError(
            f"dtype must be a floating dtype: float16 ('half'), bfloat16, "
            f"float32 ('float') or float64 ('double'), optionally prefixed "
            f"'torch.'; got {dtype!r}"
        )
    return _MACHINE_EPSILON[name]


def _check_precision(precision):
    return check_real(precision, "precision", 0.0, 1.0, low_open=True, high_open=True)


def _log_vocab(vocab_size):
    return float(log_int(check_size(vocab_size, "vocab_size", 2)))


def _log1p_two_r(r, eps):
    """``ln(1 + 2r/eps)``, finite where ``2r/eps`` overflows (``r`` near float64's max)."""
    q = 2.0 * r / eps
    if q < float("inf"):
        return np.log1p(q)
    return np.log(2.0) + np.log(r) - np.log(eps)  # q > 1e308: log1p(q) = log(q)


def _cells_per_memory_vector(widths, precision):
    """``sum_i ln(1 + w_i / epsilon)``: log number of cells of a box."""
    w = np.asarray(widths, dtype=float)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"widths must be a non-empty 1-D array; got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("widths must be finite and nonnegative")
    return float(np.sum(log1p_ratio(w, precision)))


def reachable_log_count_bound(width, n_memory, radius, precision):
    """Log of the reachable-sequence bound ``(1 + 2r/epsilon)**(d m)`` (Thm. 4.5).

    The reachability paper: a frozen Transformer of width ``d`` whose
    output depends on ``m`` trainable ``d``-dimensional memory vectors, run at
    precision ``epsilon`` with hidden states in a region of radius ``r``, can
    produce at most ``(1 + 2r/epsilon)**(d m)`` distinct output sequences,
    whatever the prompt and however long the output. ``(1 + 2r/epsilon)**d``
    is the packing bound for cells of size ``epsilon`` in a ball of radius
    ``r``; with ``r`` the largest infinity-norm (as
    :func:`hidden_state_geometry` measures it) the states lie in the cube
    ``[-r, r]**d``, which holds exactly ``(1 + 2r/epsilon)**d`` cells per
    axis-aligned grid, so the count is the box bound
    :func:`box_log_count_bound` with every width ``2r``.

    Parameters
    ----------
    width : int
        Model width ``d >= 1``.
    n_memory : int
        Number ``m >= 1`` of memory (soft prompt) vectors.
    radius : float
        ``r >= 0``, in hidden-state units.
    precision : float
        ``epsilon`` in ``(0, 1)``: an absolute cell size in hidden-state units,
        usually :func:`precision_from_dtype` (machine epsilon, the reachability paper's
        convention; the authors cram in fp16, ``2**-10``, and store their notebook's
        numbers at ``r_inf / 2048``, :func:`precision_for`). Floats near ``x``
        are spaced about ``|x| * epsilon`` apart, so for ``|x| > 1`` the real
        cells are coarser and this remains an upper bound, while for
        ``|x| < 1`` they are finer and the convention is not a strict bound.

    Returns
    -------
    log_count : float
        ``d * m * ln(1 + 2r/epsilon)``, in nats (natural log of the number of
        sequences); ``exp`` of it is the bound itself, which overflows a float
        for realistic sizes.

    Examples
    --------
    Three memory vectors of width 2, ``r = 2``, ``epsilon = 1/2``: each
    coordinate has ``1 + 2r/epsilon = 9`` cells, so at most ``9**6`` sequences.

    >>> import math
    >>> round(math.exp(reachable_log_count_bound(2, 3, radius=2.0, precision=0.5)))
    531441
    >>> round(reachable_log_count_bound(64, 4, radius=4.0, precision=2**-10), 1)
    2306.8
    """
    d = check_size(width, "width", 1)
    m = check_size(n_memory, "n_memory", 1)
    r = check_real(radius, "radius", 0.0)
    eps = _check_precision(precision)
    return finite_result(lambda: d * m * _log1p_two_r(r, eps),
                         "the log count d * m * ln(1 + 2r/eps)")


def reachable_slope_bound(width, vocab_size, radius, precision):
    """Upper bound ``C <= d ln(1 + 2r/epsilon) / ln|V|`` on the slope of ``n*(m)``.

    Corollary 4.6 of the reachability paper: all ``|V|**n`` sequences of
    length ``n`` can be reachable only if ``|V|**n <= (1 + 2r/epsilon)**(d m)``
    (:func:`reachable_log_count_bound`), so the reachable length grows at most
    like ``n* ~ C m`` with this ``C``. Compare it with the measured slope of
    ``n50`` against ``m``. On the authors' published constants this ball ratio runs
    5.48-13.45 at ``eps = r_inf / 2048`` and 7.68-20.50 at ``2**-10``
    (``docs/reachability_bounds.md``); the paper's quoted 4.5-20.4 mixes this bound
    with refined ones.

    Parameters
    ----------
    width : int
        Model width ``d >= 1``.
    vocab_size : int
        Vocabulary size ``|V| >= 2``.
    radius : float
        ``r >= 0``, in hidden-state units.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (see :func:`reachable_log_count_bound` for the machine-epsilon
        convention and when it is a strict bound).

    Returns
    -------
    slope : float
        ``C``, in tokens of reachable length per memory vector.

    Examples
    --------
    >>> round(reachable_slope_bound(64, 64, radius=4.0, precision=2**-10), 2)
    138.67
    """
    d = check_size(width, "width", 1)
    log_v = _log_vocab(vocab_size)
    r = check_real(radius, "radius", 0.0)
    eps = _check_precision(precision)
    return finite_result(lambda: d * _log1p_two_r(r, eps) / log_v, "the slope bound")


def box_log_count_bound(widths, n_memory, precision):
    """Log reachable-sequence count for an axis-aligned box support (the reachability paper).

    Refinement of :func:`reachable_log_count_bound` (the reachability paper): if the
    hidden states lie in a box whose coordinate ``i`` spans ``w_i`` (as
    :func:`hidden_state_geometry` measures), each memory vector contributes
    ``prod_i (1 + w_i/epsilon)`` cells instead of ``(1 + 2r/epsilon)**d``. With
    every ``w_i = 2r`` the two bounds coincide; since ``w_i <= 2r`` for the
    infinity-norm radius ``r``, the box bound is never larger.

    Parameters
    ----------
    widths : array-like of shape (d,)
        Ranges ``w_i >= 0`` (max - min) of the hidden coordinates, in
        hidden-state units.
    n_memory : int
        Number ``m >= 1`` of memory vectors.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (see :func:`reachable_log_count_bound` for the machine-epsilon
        convention).

    Returns
    -------
    log_count : float
        ``m * sum_i ln(1 + w_i/epsilon)``, in nats.

    Examples
    --------
    A 2 x 4 box with ``epsilon = 1/2`` holds ``5 * 9 = 45`` cells; two memory
    vectors give ``45**2`` sequences.

    >>> import math
    >>> round(math.exp(box_log_count_bound([2.0, 4.0], n_memory=2, precision=0.5)))
    2025
    """
    m = check_size(n_memory, "n_memory", 1)
    eps = _check_precision(precision)
    return finite_result(lambda: m * _cells_per_memory_vector(widths, eps), "the log count")


def box_slope_bound(widths, vocab_size, precision):
    """Slope bound ``C <= sum_i ln(1 + w_i/epsilon) / ln|V|`` for a box support.

    The box refinement (the reachability paper) of
    :func:`reachable_slope_bound`, from the count of
    :func:`box_log_count_bound`.

    Parameters
    ----------
    widths : array-like of shape (d,)
        Ranges ``w_i >= 0`` (max - min) of the hidden coordinates, in
        hidden-state units.
    vocab_size : int
        Vocabulary size ``|V| >= 2``.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (see :func:`reachable_log_count_bound` for the machine-epsilon
        convention).

    Returns
    -------
    slope : float
        ``C``, in tokens of reachable length per memory vector.

    Examples
    --------
    Widths ``2r = 8`` on all 64 axes reproduce :func:`reachable_slope_bound`:

    >>> round(box_slope_bound([8.0] * 64, vocab_size=64, precision=2**-10), 2)
    138.67
    """
    log_v = _log_vocab(vocab_size)
    eps = _check_precision(precision)
    return float(_cells_per_memory_vector(widths, eps) / log_v)


def hidden_state_geometry(hidden_states):
    """Radius and per-coordinate box of a set of final hidden states.

    Measures the support that the reachability paper's bounds need: the
    radius ``r`` is the largest infinity-norm over all states (the paper
    measures it over random prompts), the box is the per-coordinate range.

    Parameters
    ----------
    hidden_states : array-like of shape (..., d)
        Final hidden states, ``d >= 1`` the model width; all leading axes
        (prompts, positions, ...) are pooled. A 1-D array is one state.

    Returns
    -------
    geometry : dict with attribute access
        ``radius`` (float, ``max |x_i|`` over states and coordinates),
        ``widths`` (array of shape (d,), per-coordinate max - min), ``center``
        (array of shape (d,), per-coordinate midpoint (max + min) / 2) and
        ``n_states`` (number of states pooled), all in hidden-state units.
        ``widths <= 2 * radius`` always.

    Examples
    --------
    >>> import numpy as np
    >>> g = hidden_state_geometry(np.array([[1.0, -3.0], [2.0, 1.0]]))
    >>> g.radius, g.widths.tolist(), g.center.tolist()
    (3.0, [1.0, 4.0], [1.5, -1.0])
    """
    h = np.asarray(hidden_states, dtype=np.float64)
    if h.ndim < 1 or h.shape[-1] < 1:
        raise ValueError(
            "hidden_states must be at least 1-D with a last axis (the width d) "
            f"of size >= 1; got shape {h.shape}"
        )
    h = h.reshape(-1, h.shape[-1])
    if h.shape[0] == 0:
        raise ValueError(f"hidden_states holds no states; got shape {h.shape}")
    if not np.all(np.isfinite(h)):
        raise ValueError("hidden_states must be finite (no NaN or inf)")
    low, high = h.min(axis=0), h.max(axis=0)
    with np.errstate(over="ignore"):
        widths, total = high - low, high + low
    wide = np.flatnonzero(~np.isfinite(widths))
    if wide.size:
        raise ValueError(
            f"hidden_states span more than float64's range in {wide.size} coordinate(s) "
            f"(max - min overflows, first at index {int(wide[0])}); rescale the states"
        )
    # (high + low) / 2 where the sum is finite (bit for bit as before), else
    # high / 2 + low / 2, which cannot overflow.
    center = np.where(np.isfinite(total), total / 2.0, high / 2.0 + low / 2.0)
    return Certificate(
        radius=float(np.max(np.abs(h))),
        widths=widths,
        center=center,
        n_states=int(h.shape[0]),
    )
