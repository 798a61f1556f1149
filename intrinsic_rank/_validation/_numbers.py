"""Integers, reals and distinct values, checked with one message style."""

import numbers

import numpy as np

def _is_bool(value):
    return isinstance(value, (bool, np.bool_))


def _range_text(minimum, maximum):
    if minimum is None and maximum is None:
        return ""
    if maximum is None:
        return f" >= {minimum}"
    if minimum is None:
        return f" <= {maximum}"
    return f" in [{minimum}, {maximum}]"


def check_int(value, name, minimum=1, maximum=None):
    """Validate an integer argument and return it as ``int``.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        Its name, used in the error message.
    minimum, maximum : int or None, default=1, None
        Closed bounds; ``None`` leaves that side open.

    Returns
    -------
    value : int

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` included) or lies outside
        ``[minimum, maximum]``.

    Examples
    --------
    >>> check_int(3, "rank")
    3
    >>> check_int(0, "rank")
    Traceback (most recent call last):
    ...
    ValueError: rank must be an integer >= 1; got 0
    """
    bounds = _range_text(minimum, maximum)
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer{bounds}; got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{bounds}; got {value}")
    return int(value)


def check_real(value, name, low=None, high=None, *, low_open=False, high_open=False):
    """Validate a finite real argument and return it as ``float``.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        Its name, used in the error message.
    low, high : float or None, default=None
        Bounds; ``None`` leaves that side unbounded.
    low_open, high_open : bool, default=False
        Whether ``low`` (``high``) itself is excluded. By default both bounds
        are included: ``[low, high]``.

    Returns
    -------
    value : float

    Raises
    ------
    ValueError
        If ``value`` is not a real number (``bool`` included), is not finite,
        or lies outside the interval.

    Examples
    --------
    >>> check_real(0.5, "tol", 0.0, 1.0, low_open=True)
    0.5
    >>> check_real(0.0, "tol", 0.0, 1.0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: tol must be a finite real number in (0.0, 1.0]; got 0.0
    """
    left = "-inf" if low is None else f"{low}"
    right = "inf" if high is None else f"{high}"
    interval = (("(" if low_open or low is None else "[") + f"{left}, {right}"
                + (")" if high_open or high is None else "]"))
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number in {interval}; got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an int or Fraction beyond float64's range
        raise ValueError(
            f"{name} must be a finite real number in {interval}; got {value!r}, "
            "which overflows float64"
        ) from None
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not np.isfinite(value) or too_low or too_high:
        raise ValueError(f"{name} must be a finite real number in {interval}; got {value}")
    return value


def check_distinct(values, name):
    """``values`` (a list option) unchanged, or one ``ValueError`` naming a repeated entry.

    ``--bits 2 2 3`` would train ``m = 2`` twice; a command refuses it before work.

    Parameters
    ----------
    values : sequence or None
    name : str
        The option, e.g. ``"--bits"``.

    Returns
    -------
    values : sequence or None

    Examples
    --------
    >>> check_distinct([2, 3], "--bits")
    [2, 3]
    >>> check_distinct([2, 2, 3], "--bits")
    Traceback (most recent call last):
    ...
    ValueError: --bits: 2 is given twice; give each value once
    """
    if values is None:
        return None
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{name}: {value} is given twice; give each value once")
        seen.add(value)
    return values


def describe_value(value):
    """A short description of ``value`` for an error message: never a whole array.

    Arrays (and anything with a ``shape`` and a ``dtype``) read as
    ``"an array of shape (5,) and dtype float64"``; other values as their
    ``repr``, cut to 80 characters.

    Examples
    --------
    >>> describe_value(np.zeros(1000))
    'an array of shape (1000,) and dtype float64'
    >>> describe_value("x" * 200)[-3:]
    '...'
    """
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"an array of shape {tuple(shape)} and dtype {dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
