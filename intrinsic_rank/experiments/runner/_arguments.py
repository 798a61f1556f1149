"""Arguments shared by the experiments: option types and the progress/verbose bridge.

An experiment's ``add_arguments`` uses :func:`parse_ranks`, :func:`parse_lengths`,
:func:`parse_precision` and :func:`bounded_int` as ``type=`` of its options. A type
raises ``argparse.ArgumentTypeError``, which the CLI reports in one line naming
the option, with exit status 2, before any work.
"""

import argparse

__all__ = ["MAX_EPOCHS", "MAX_GRID_SIZE", "add_refused_data", "bounded_float", "bounded_int",
           "parse_lengths", "parse_precision", "parse_ranks", "refuse_data"]

MAX_GRID_SIZE = 4096
"""The most entries a grid option (:func:`parse_ranks`) may hold.

Checked before a range is expanded, so ``--ranks 1-1000000000`` is an error in
one line instead of a list that the kernel kills the process for.
"""


MAX_EPOCHS = 10**6
"""The most optimiser steps (``--epochs``, ``--steps``, ``--patience``) a command takes.

Derived from time: the fastest step measured here (a tiny sweep, a few
milliseconds) makes a million steps about an hour, the default sizes' steps a
day or more; the documented runs use at most 5,000."""


def parse_ranks(text, minimum=0, max_size=MAX_GRID_SIZE):
    """Parse a rank grid such as ``"1-8"``, ``"1,2,4,8"`` or ``"1-4,8,16"``.

    Each range ``low-high`` is checked (``low <= high``) and its size counted
    before it is expanded; the whole grid may hold at most ``max_size``
    entries. Zero parses (with the default ``minimum``): each command checks
    its own lower bound and names its parameter.

    Parameters
    ----------
    text : str
    minimum : int, default=0
        The smallest entry allowed.
    max_size : int, default=MAX_GRID_SIZE
        The most entries the expanded grid may hold.

    Returns
    -------
    ranks : list of int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not a grid of integers and ranges, is empty, has a range
        whose end is below its start, an entry below ``minimum``, or more than
        ``max_size`` entries.

    Examples
    --------
    >>> parse_ranks("1-4,8")
    [1, 2, 3, 4, 8]
    >>> parse_ranks("1-1000000000")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: the grid '1-1000000000' has 1000000000 entries; at most ...
    """
    parts = []
    try:
        for part in str(text).split(","):
            if "-" in part:
                low, high = (int(v) for v in part.split("-"))
                parts.append((low, high))
            elif part.strip():
                value = int(part)
                parts.append((value, value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read rank grid {text!r}; write e.g. 1-8 or 1,2,4,8"
        ) from None
    if not parts:
        raise argparse.ArgumentTypeError("the rank grid is empty")
    for low, high in parts:
        if high < low:
            raise argparse.ArgumentTypeError(
                f"the range {low}-{high} in {text!r} ends below its start; write {high}-{low}")
        if low < minimum:
            raise argparse.ArgumentTypeError(
                f"the grid {text!r} holds {low}; its entries must be integers >= {minimum}")
    size = sum(high - low + 1 for low, high in parts)
    if size > max_size:
        raise argparse.ArgumentTypeError(
            f"the grid {text!r} has {size} entries; at most {max_size} are allowed")
    return [value for low, high in parts for value in range(low, high + 1)]


def parse_lengths(text):
    """Parse a lengths option: ``"auto"`` or a grid of integers >= 1 (see :func:`parse_ranks`).

    Parameters
    ----------
    text : str

    Returns
    -------
    lengths : "auto" or list of int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is neither ``"auto"`` nor a grid of positive integers.

    Examples
    --------
    >>> parse_lengths("auto"), parse_lengths("2-4,8")
    ('auto', [2, 3, 4, 8])
    """
    return "auto" if text == "auto" else parse_ranks(text, minimum=1)


def _bounds_text(minimum, maximum):
    """`` in [a, b]``, `` >= a``, `` <= b`` or nothing: the range in an option's message."""
    if minimum is None and maximum is None:
        return ""
    if maximum is None:
        return f" >= {minimum}"
    if minimum is None:
        return f" <= {maximum}"
    return f" in [{minimum}, {maximum}]"


def bounded_int(minimum=None, maximum=None):
    """An argparse ``type`` reading one integer in ``[minimum, maximum]``.

    Parameters
    ----------
    minimum, maximum : int or None, default=None
        Closed bounds; ``None`` leaves that side open.

    Returns
    -------
    parse : callable
        ``parse(text)`` -> int, raising ``argparse.ArgumentTypeError``.

    Examples
    --------
    >>> bounded_int(1, 100)("42")
    42
    >>> bounded_int(1, 100)("1000")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer in [1, 100]; got 1000
    """
    bounds = _bounds_text(minimum, maximum)

    def parse(text):
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"must be an integer{bounds}; got {text!r}") from None
        if (minimum is not None and value < minimum) or (maximum is not None
                                                          and value > maximum):
            raise argparse.ArgumentTypeError(f"must be an integer{bounds}; got {value}")
        return value

    parse.__name__ = "integer"
    parse.minimum, parse.maximum = minimum, maximum
    return parse


def bounded_float(minimum=None, maximum=None, low_open=False):
    """An argparse ``type`` reading one finite number in ``[minimum, maximum]``.

    ``nan``, ``inf`` and numbers beyond float64 (``1e400``) are refused like
    any number outside the range.

    Parameters
    ----------
    minimum, maximum : float or None, default=None
        Closed bounds; ``None`` leaves that side open.
    low_open : bool, default=False
        ``minimum`` itself refused: ``(minimum, maximum]``.

    Returns
    -------
    parse : callable
        ``parse(text)`` -> float, raising ``argparse.ArgumentTypeError``.

    Examples
    --------
    >>> bounded_float(0, 1e6)("0.1")
    0.1
    >>> bounded_float(0, 1e6)("1e200")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number in [0, 1000000.0]; got 1e+200
    """
    import math

    bounds = _bounds_text(minimum, maximum)
    if low_open:
        bounds = (f" > {minimum:g}" if maximum is None else f" in ({minimum:g}, {maximum:g}]")

    def parse(text):
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"must be a finite number{bounds}; got {text!r}") from None
        below = minimum is not None and (value <= minimum if low_open else value < minimum)
        if not math.isfinite(value) or below or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be a finite number{bounds}; got {value:g}")
        return value

    parse.__name__ = "number"
    return parse


def add_refused_data(parser):
    """Accept a hidden ``--data`` so that :func:`refuse_data` can explain it in one line.

    ``--data FILE`` is the sweep's option; a command that draws its own tasks
    takes it only to refuse it with a reason, instead of argparse's
    "unrecognized arguments".

    Parameters
    ----------
    parser : argparse.ArgumentParser
    """
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)


def refuse_data(args, command, reason):
    """Raise a one-line ``ValueError`` when ``--data`` was given to a command without it.

    Parameters
    ----------
    args : argparse.Namespace
    command : str
        The command's name, e.g. ``"ladder"``.
    reason : str
        Why the command cannot take your data (what it draws itself).

    Raises
    ------
    ValueError
        If ``args.data`` is set.

    Examples
    --------
    >>> import argparse
    >>> refuse_data(argparse.Namespace(data=None), "toy", "draws its task")
    >>> try:
    ...     refuse_data(argparse.Namespace(data="x.npz"), "toy", "draws its task")
    ... except ValueError as error:
    ...     print(str(error).split("; ")[0])
    --data: not supported by this command: toy draws its task
    """
    if getattr(args, "data", None) is not None:
        raise ValueError(f"--data: not supported by this command: {command} {reason}; "
                         "use intrinsic-rank sweep --data FILE")


def parse_precision(text):
    """Parse a precision option: a number, or a dtype name kept as text.

    Parameters
    ----------
    text : str or None
        ``"0.001"``, ``"float16"``, ... ; ``None`` (the option not given)
        stays ``None``.

    Returns
    -------
    precision : float, str or None

    Examples
    --------
    >>> parse_precision("0.5"), parse_precision("float16"), parse_precision(None)
    (0.5, 'float16', None)
    """
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text
