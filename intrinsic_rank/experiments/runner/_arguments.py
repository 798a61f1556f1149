"""An experiment's command-line options: their one declaration, and the types they parse with.

Each option is one :class:`Option`, declared beside its experiment's
:class:`~intrinsic_rank.experiments.Experiment`, with its default and, where the
reproduce report's quick scale changes it, its ``--quick`` value; ``--help``
shows both from there. :func:`parse_ranks`, :func:`parse_lengths`,
:func:`parse_precision`, :func:`bounded_int` and :func:`bounded_float` are the
types options parse with. A type raises ``argparse.ArgumentTypeError``, which
the CLI reports in one line naming the option, with exit status 2, before any
work. This module imports only ``argparse`` and ``importlib``: the command
line builds every ``--help`` from it without torch.
"""

import argparse
import importlib

__all__ = ["MAX_EPOCHS", "MAX_GRID_SIZE", "Option", "bounded_float", "bounded_int",
           "parse_lengths", "parse_precision", "parse_ranks", "refused_data"]

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
    """Parse a lengths option: ``"auto"`` or a grid of integers >= 1 (as ``parse_ranks``).

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


# -- the declaration of an option ---------------------------------------------------------


class _Unchanged:
    def __repr__(self):
        return "UNCHANGED"


UNCHANGED = _Unchanged()
"""An option's ``quick`` when ``--quick`` leaves it at its default."""


class _ModuleType:
    """An option's type named by a string: a function of the experiment's module.

    Looked up when the option parses its first value, so that building the
    parser (and ``--help``) imports nothing heavy. Errors read as argparse's own
    (``invalid <type> value``) when the function raises a plain ``ValueError``.
    """

    __name__ = "value"  # argparse's word in "invalid <type> value"; __call__ words errors

    def __init__(self, module, name):
        self.module, self.name = module, name

    def resolve(self):
        """The function itself (importing the experiment's module)."""
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, text):
        own = self.resolve()
        try:
            return own(text)
        except (TypeError, ValueError) as error:
            if isinstance(error, argparse.ArgumentTypeError):
                raise
            name = getattr(own, "__name__", repr(own))
            raise argparse.ArgumentTypeError(f"invalid {name} value: {text!r}") from None

    def __repr__(self):
        return f"<{self.module}:{self.name}>"


class _Scaled:
    """The default of an option that ``--quick`` changes, until the command line is parsed."""

    def __init__(self, default, quick):
        self.default, self.quick = default, quick

    def __repr__(self):
        return f"{self.default!r} (--quick: {self.quick!r})"


def _value_text(value, nargs=None):
    """A default as the user would type it: ``1-5``, ``1,2,4``, ``2 3 4``, ``0.1``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        if nargs in ("+", "*"):
            return " ".join(str(v) for v in value)
        if (len(value) > 2 and all(isinstance(v, int) for v in value)
                and list(value) == list(range(value[0], value[0] + len(value)))):
            return f"{value[0]}-{value[-1]}"
        return ",".join(str(v) for v in value)
    return str(value)


class Option:
    """One command-line option of an experiment, declared once.

    The arguments are ``argparse.ArgumentParser.add_argument``'s, plus where the
    default comes from and how ``--quick`` changes it. ``--help`` shows the
    option's ``help`` followed by its default and its quick value, from here.

    Parameters
    ----------
    *flags : str
        ``"--n-samples"`` (with aliases if any), or one positional name such as
        ``"model"``, which is then optional (``nargs="?"``).
    help : str or callable
        What the option is and its bounds, without its default (the help adds
        ``(default: X; --quick: Y)``); a callable returns it when the parser is
        built (a list that can grow, such as the packaged models). For the
        ``--quick`` flag itself: what it changes besides the options, which the
        help lists before it.
    type : callable, str or None, default=None
        Parses the text: ``bounded_int(1, 4096)``, :func:`parse_ranks`, ... A
        string names a function of the experiment's module, looked up when the
        first value is parsed (so that ``--help`` imports nothing heavy).
    default : object, default=None
        The value when the option is not given.
    quick : object, default=UNCHANGED
        The value under ``--quick`` when the option is not given.
    scale : str or None, default=None
        A key of the experiment's ``full`` and ``quick`` settings: the default
        is ``full[scale]`` and the quick value ``quick[scale]`` (instead of
        ``default`` and ``quick``), so each number is stated once.
    shown : str or None, default=None
        How the help states a default that is worked out when the command runs
        (``"1..2r*"``); ``None``: the default itself (no words for ``None``).
    hidden : bool, default=False
        Accepted, not listed by ``--help`` (a refusal, see
        :func:`~intrinsic_rank.experiments.runner.refused_data`).
    **kwargs
        ``action``, ``choices``, ``nargs``, ``metavar``, ``dest``: as argparse's;
        ``group``: the title of the option group it is listed under (one of the
        experiment's ``groups``).

    Examples
    --------
    >>> option = Option("--n-samples", type=bounded_int(2, 10**8), default=2048,
    ...                 quick=1536, help="number of sequences")
    >>> option.dest, option.help_text()
    ('n_samples', 'number of sequences (default: 2048; --quick: 1536)')
    """

    def __init__(self, *flags, help, type=None, default=None, quick=UNCHANGED, scale=None,
                 shown=None, hidden=False, **kwargs):
        if not flags:
            raise ValueError("an Option needs a flag such as '--size' or a positional name")
        if kwargs.get("action") in ("store_true", "store_false") and default is None:
            default = kwargs["action"] == "store_false"
        self.flags = flags
        self.help = help
        self.type = type
        self.default = default
        self.quick = quick
        self.scale = scale
        self.shown = shown
        self.hidden = hidden
        self.group = kwargs.pop("group", None)
        self.kwargs = kwargs
        positional = not flags[0].startswith("-")
        if positional:
            self.kwargs.setdefault("nargs", "?")
        self.dest = kwargs.get("dest") or (
            flags[0] if positional else next((f for f in flags if f.startswith("--")),
                                             flags[0]).lstrip("-")).replace("-", "_")

    @property
    def flag(self):
        """The option's name as written on the command line."""
        return self.flags[0] if not self.flags[0].startswith("-") else next(
            (f for f in self.flags if f.startswith("--")), self.flags[0])

    @property
    def is_flag(self):
        """Whether the option takes no value (``action="store_true"``)."""
        return self.kwargs.get("action") in ("store_true", "store_false")

    @property
    def changes_with_quick(self):
        """Whether ``--quick`` gives this option another value."""
        return self.quick is not UNCHANGED and self.quick != self.default

    def scaled(self, full, quick):
        """This option with its default (and quick value) read from the scales' settings.

        Parameters
        ----------
        full, quick : dict
            The experiment's settings at the full and the quick scale.

        Returns
        -------
        option : Option
            ``self`` when the option has no ``scale``.
        """
        if self.scale is None:
            return self
        if self.scale not in full:
            raise ValueError(f"option {self.flag}: its scale {self.scale!r} is not a key of "
                             "the experiment's full settings")
        kwargs = dict(self.kwargs, help=self.help, type=self.type, default=full[self.scale],
                      quick=quick.get(self.scale, full[self.scale]), shown=self.shown,
                      hidden=self.hidden, group=self.group)
        return Option(*self.flags, **kwargs)

    def help_text(self, quick_flag=True):
        """The option's help: its ``help``, then its default and its quick value.

        Parameters
        ----------
        quick_flag : bool, default=True
            Whether the command takes ``--quick`` (else the quick value is not shown).

        Returns
        -------
        text : str
        """
        if self.hidden:
            return argparse.SUPPRESS
        nargs = self.kwargs.get("nargs")
        said = []
        if self.shown is not None:
            said.append(f"default: {self.shown}")
        elif self.default is not None and not self.is_flag:
            said.append(f"default: {_value_text(self.default, nargs)}")
        if quick_flag and self.changes_with_quick:
            said.append(f"--quick: {_value_text(self.quick, nargs)}")
        words = self.help() if callable(self.help) else self.help
        text = words + (f" ({'; '.join(said)})" if said else "")
        return text.replace("%", "%%")  # argparse formats help with %

    def add_to(self, parser, module=None, quick_flag=True):
        """Add the option to an ``argparse`` parser.

        Parameters
        ----------
        parser : argparse.ArgumentParser or argument group
        module : str or None, default=None
            The experiment's module, where a ``type`` named by a string is.
        quick_flag : bool, default=True
            Whether the command takes ``--quick``: the option's quick value
            then replaces its default under it (see ``CommandParser``).
        """
        kwargs = dict(self.kwargs)
        kind = self.type
        if isinstance(kind, str):
            if module is None:
                raise ValueError(f"option {self.flag}: a type named {kind!r} needs the "
                                 "experiment's module")
            kind = _ModuleType(module, kind)
        if kind is not None:
            kwargs["type"] = kind
        default = self.default
        if quick_flag and self.changes_with_quick:
            default = _Scaled(self.default, self.quick)
        parser.add_argument(*self.flags, default=default, help=self.help_text(quick_flag),
                            **kwargs)

    def __repr__(self):
        return f"Option({', '.join(map(repr, self.flags))}, default={self.default!r})"


def refused_data(reason):
    """A hidden ``--data`` that refuses, in one line with ``reason``, the sweep's option.

    ``--data FILE`` is the sweep's option; a command that draws its own tasks
    takes it only to refuse it with a reason, instead of argparse's
    "unrecognized arguments".

    Parameters
    ----------
    reason : str
        Why the command cannot take your data, e.g. ``"compares ... on a task
        it draws itself"``.

    Returns
    -------
    option : Option

    Examples
    --------
    >>> option = refused_data("draws its own task")
    >>> option.dest, option.hidden
    ('data', True)
    >>> option.type("x.npz")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: not supported by this command, which draws its own task; ...
    """

    def refuse(text):
        raise argparse.ArgumentTypeError(
            f"not supported by this command, which {reason}; use intrinsic-rank sweep "
            "--data FILE")

    return Option("--data", type=refuse, hidden=True, metavar="FILE",
                  help="the sweep's option, refused here")


def _resolve_quick(namespace):
    """Give each option that ``--quick`` changes and the command line left out its value."""
    quick = bool(getattr(namespace, "quick", False))
    for dest, value in vars(namespace).items():
        if isinstance(value, _Scaled):
            setattr(namespace, dest, value.quick if quick else value.default)
    return namespace


class CommandParser(argparse.ArgumentParser):
    """argparse for commands whose options :class:`~intrinsic_rank.experiments.Option` declares.

    A value the command line did not give is the option's default, or its quick
    value when ``--quick`` was given (in any position). (An experiment's
    ``settings`` does the same for a namespace from another parser.)
    """

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        return _resolve_quick(namespace), extras
