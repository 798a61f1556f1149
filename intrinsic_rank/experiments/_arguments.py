"""Arguments shared by the experiments: option types and the progress/verbose bridge.

An experiment's ``add_arguments`` uses :func:`parse_ranks` and
:func:`parse_precision` as ``type=`` of its options; the CLI re-exports
:func:`parse_ranks` as ``intrinsic_rank.cli.parse_ranks``.
"""

import argparse
import warnings

__all__ = ["parse_precision", "parse_ranks", "verbose_level"]


def parse_ranks(text):
    """Parse a rank grid such as ``"1-8"``, ``"1,2,4,8"`` or ``"1-4,8,16"``.

    Parameters
    ----------
    text : str

    Returns
    -------
    ranks : list of int

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not a grid of integers and ranges, or is empty.

    Examples
    --------
    >>> parse_ranks("1-4,8")
    [1, 2, 3, 4, 8]
    """
    ranks = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = (int(v) for v in part.split("-"))
                ranks.extend(range(low, high + 1))
            elif part.strip():
                ranks.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read rank grid {text!r}; write e.g. 1-8 or 1,2,4,8"
        ) from None
    if not ranks:
        raise argparse.ArgumentTypeError("the rank grid is empty")
    return ranks


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


def verbose_level(progress, verbose="deprecated"):
    """The estimators' ``verbose`` level of an experiment called with ``progress``.

    Experiments take ``progress`` (a bool); the ones that took ``verbose``
    before 0.2 still accept it for one release, with a ``FutureWarning``, and
    then pass it on unchanged.

    Parameters
    ----------
    progress : bool
        ``True`` draws the estimators' progress bars (``verbose=1``).
    verbose : int or "deprecated", default="deprecated"
        The experiment's deprecated ``verbose`` argument; ``"deprecated"``
        means it was not given.

    Returns
    -------
    verbose : int

    Examples
    --------
    >>> verbose_level(True), verbose_level(False)
    (1, 0)
    """
    if isinstance(verbose, str) and verbose == "deprecated":
        return int(bool(progress))
    warnings.warn("`verbose` was renamed `progress` in 0.2 and will be removed in 0.3",
                  FutureWarning, stacklevel=3)
    return verbose
