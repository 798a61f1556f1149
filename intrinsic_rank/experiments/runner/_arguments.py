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
           "parse_lengths", "parse_precision", "parse_ranks"]

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


def _number_text(value):
    """A bound as the help writes it: ``4096``, ``0.5``, ``1e+06``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _bounds_text(minimum, maximum, low_open=False):
    """`` in [a, b]``, `` in (a, b]``, `` >= a``, `` > a``, `` <= b`` or nothing."""
    if minimum is None and maximum is None:
        return ""
    low = None if minimum is None else _number_text(minimum)
    if maximum is None:
        return f" > {low}" if low_open else f" >= {low}"
    high = _number_text(maximum)
    if minimum is None:
        return f" <= {high}"
    return f" in {'(' if low_open else '['}{low}, {high}]"


def bounded_int(minimum=None, maximum=None, exclude=()):
    """An argparse ``type`` reading one integer in ``[minimum, maximum]``.

    Its ``described`` attribute is the range in words (``"an integer in [1,
    100]"``), which an :class:`~intrinsic_rank.experiments.Option`'s help states
    from here: a bound is written once, in the type.

    Parameters
    ----------
    minimum, maximum : int or None, default=None
        Closed bounds; ``None`` leaves that side open.
    exclude : sequence of int, default=()
        Values inside the range that are refused too (``--jobs 0``).

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
    >>> bounded_int(-1, 512, exclude=[0]).described
    'an integer in [-1, 512] other than 0'
    """
    exclude = tuple(exclude)
    bounds = _bounds_text(minimum, maximum)
    if exclude:
        bounds += " other than " + ", ".join(map(str, exclude))

    def parse(text):
        try:
            value = int(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"must be an integer{bounds}; got {text!r}") from None
        if ((minimum is not None and value < minimum) or (maximum is not None
                                                          and value > maximum)
                or value in exclude):
            raise argparse.ArgumentTypeError(f"must be an integer{bounds}; got {value}")
        return value

    parse.__name__ = "integer"
    parse.minimum, parse.maximum, parse.described = minimum, maximum, f"an integer{bounds}"
    return parse


def bounded_float(minimum=None, maximum=None, low_open=False):
    """An argparse ``type`` reading one finite number in ``[minimum, maximum]``.

    ``nan``, ``inf`` and numbers beyond float64 (``1e400``) are refused like
    any number outside the range. Its ``described`` attribute is the range in
    words, which an :class:`~intrinsic_rank.experiments.Option`'s help states from
    here.

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
    argparse.ArgumentTypeError: must be a finite number in [0, 1e+06]; got 1e+200
    >>> bounded_float(0.0, 1.0, low_open=True).described
    'a finite number in (0, 1]'
    """
    import math

    bounds = _bounds_text(minimum, maximum, low_open)

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
    parse.minimum, parse.maximum = minimum, maximum
    parse.described = f"a finite number{bounds}"
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
        # names (heads, corpora) read better spaced, and wrap between them in --help
        return (", " if all(isinstance(v, str) for v in value) else ",").join(map(str, value))
    return str(value)


class Option:
    """One command-line option of an experiment, declared once.

    The arguments are ``argparse.ArgumentParser.add_argument``'s, plus where the
    default comes from, how ``--quick`` changes it and how the parsed value
    becomes a setting. The option's destination (``dest``) is the key of the
    experiment's settings it gives: ``Experiment.settings`` is built from the
    options, with no second list of names. ``--help`` shows the option's
    ``help``, then what its type accepts (the bounds of
    :func:`~intrinsic_rank.experiments.runner.bounded_int` and
    :func:`~intrinsic_rank.experiments.runner.bounded_float`, the ``choices``), its
    default and its quick value, all from here.

    Parameters
    ----------
    *flags : str
        ``"--n-samples"`` (with aliases if any), or one positional name such as
        ``"model"``, which is then optional (``nargs="?"``).
    help : str or callable
        What the option is, without its bounds, choices or default (the help
        adds ``(an integer in [a, b]; default: X; --quick: Y)``); a callable
        returns it when the parser is built (a list that can grow, such as the
        packaged models). For the ``--quick`` flag itself: what it changes
        besides the options, which the help lists before it.
    type : callable, str or None, default=None
        Parses the text: ``bounded_int(1, 4096)``, :func:`parse_ranks`, ... A
        string names a function of the experiment's module, looked up when the
        first value is parsed (so that ``--help`` imports nothing heavy).
    default : object, default=None
        The value when the option is not given.
    quick : object, default=UNCHANGED
        The value under ``--quick`` when the option is not given.
    scaled : bool, default=False
        The default is ``full[dest]`` and the quick value ``quick[dest]`` of the
        experiment's settings (instead of ``default`` and ``quick``), so each
        number is stated once, where the reproduce report reads it too.
    shown : str or None, default=None
        How the help states a default that is worked out when the command runs
        (``"1..2r*"``); ``None``: the default itself (no words for ``None``).
    hidden : bool, default=False
        Accepted, not listed by ``--help`` (a refusal, see
        :func:`~intrinsic_rank.experiments.runner.refused_data`).
    convert : callable, str or None, default=None
        The setting made of the parsed value (``[teacher]`` from ``--teacher``);
        a string names a function of the experiment's module. ``None``: the
        value itself. A value of ``None`` (an option not given, without a
        default) stays ``None``.
    setting : bool or None, default=None
        Whether the value is one of the experiment's settings; ``None``: yes,
        except for the ``--quick`` flag itself (its sizes reach the settings
        through the other options).
    **kwargs
        ``action``, ``choices``, ``nargs``, ``metavar``, ``dest``: as argparse's;
        ``group``: the title of the option group it is listed under (one of the
        experiment's ``groups``).

    Attributes
    ----------
    dest : str
        The settings key (argparse's destination).
    origin : Option
        The declaration this option was made from by :meth:`replace` (itself
        when declared directly): an option shared by several commands is one
        declaration, in :func:`~intrinsic_rank.experiments.runner.shared_option`.

    Examples
    --------
    >>> option = Option("--n-samples", type=bounded_int(2, 10**8), default=2048,
    ...                 quick=1536, help="number of sequences")
    >>> option.dest
    'n_samples'
    >>> option.help_text()
    'number of sequences (an integer in [2, 100000000]; default: 2048; --quick: 1536)'
    """

    def __init__(self, *flags, help, type=None, default=None, quick=UNCHANGED, scaled=False,
                 shown=None, hidden=False, convert=None, setting=None, **kwargs):
        if not flags:
            raise ValueError("an Option needs a flag such as '--size' or a positional name")
        self._declared = dict(flags=flags, help=help, type=type, default=default, quick=quick,
                              scaled=scaled, shown=shown, hidden=hidden, convert=convert,
                              setting=setting, **kwargs)
        if kwargs.get("action") in ("store_true", "store_false") and default is None:
            default = kwargs["action"] == "store_false"
        self.flags = flags
        self.help = help
        self.type = type
        self.default = default
        self.quick = quick
        self.scaled = bool(scaled)
        self.shown = shown
        self.hidden = hidden
        self.convert = convert
        self.group = kwargs.pop("group", None)
        self.kwargs = kwargs
        self.origin = self
        positional = not flags[0].startswith("-")
        if positional:
            if "dest" in kwargs:
                raise ValueError(f"option {flags[0]}: a positional option's name is its "
                                 "destination; give no dest=")
            self.kwargs.setdefault("nargs", "?")
        self.dest = kwargs.get("dest") or (
            flags[0] if positional else next((f for f in flags if f.startswith("--")),
                                             flags[0]).lstrip("-")).replace("-", "_")
        self.setting = self.dest != "quick" if setting is None else bool(setting)

    def replace(self, **changes):
        """This option with some of its arguments changed, its ``origin`` kept.

        A command that shares an option (``--epochs``, ``--d``) takes the one
        declaration and changes only what differs for it (its ``help``, its
        bounds, ``scaled=True``).

        Parameters
        ----------
        **changes
            Any argument of :class:`Option`; ``flags`` replaces the flags.

        Returns
        -------
        option : Option

        Examples
        --------
        >>> base = Option("--size", type=int, default=2, help="how far to count")
        >>> other = base.replace(default=3)
        >>> other.default, other.origin is base
        (3, True)
        """
        declared = dict(self._declared, **changes)
        flags = declared.pop("flags")
        option = Option(*flags, **declared)
        option.origin = self.origin
        return option

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

    def from_scales(self, full, quick):
        """This option with its default (and quick value) read from the scales' settings.

        Parameters
        ----------
        full, quick : dict
            The experiment's settings at the full and the quick scale.

        Returns
        -------
        option : Option
            ``self`` when the option is not ``scaled``.

        Raises
        ------
        ValueError
            If ``dest`` is not a key of ``full``.
        """
        if not self.scaled:
            return self
        if not isinstance(full, dict) or self.dest not in full:
            raise ValueError(f"option {self.flag}: it is scaled, but {self.dest!r} is not a "
                             "key of the experiment's full settings")
        quick = quick if isinstance(quick, dict) else {}
        option = self.replace(scaled=False, default=full[self.dest],
                              quick=quick.get(self.dest, full[self.dest]))
        option.scaled = True
        return option

    def described(self):
        """What the option's type accepts, in words: its bounds or its choices; or ``None``.

        Examples
        --------
        >>> Option("--d", type=bounded_int(1, 4096), help="token dimension").described()
        'an integer in [1, 4096]'
        >>> Option("--teacher", choices=["linear", "softmax"], help="the teacher").described()
        'one of linear, softmax'
        """
        choices = self.kwargs.get("choices")
        if choices is not None:
            some = self.kwargs.get("nargs") in ("+", "*")
            return f"{'some' if some else 'one'} of {', '.join(map(str, choices))}"
        return None if isinstance(self.type, str) else getattr(self.type, "described", None)

    def help_text(self, quick_flag=True):
        """The option's help: its ``help``, then its bounds or choices, default and quick value.

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
        said = [] if self.described() is None else [self.described()]
        if self.shown is not None:
            said.append(f"default: {self.shown}")
        elif self.default is not None and not self.is_flag:
            said.append(f"default: {_value_text(self.default, nargs)}")
        if quick_flag and self.changes_with_quick:
            said.append(f"--quick: {_value_text(self.quick, nargs)}")
        words = self.help() if callable(self.help) else self.help
        text = words + (f" ({'; '.join(said)})" if said else "")
        return text.replace("%", "%%")  # argparse formats help with %

    def setting_value(self, value, module=None):
        """The setting made of a parsed ``value``: ``convert(value)``, or ``value`` itself.

        Parameters
        ----------
        value : object
        module : str or None, default=None
            The experiment's module, where a ``convert`` named by a string is.

        Returns
        -------
        setting : object

        Examples
        --------
        >>> teacher = Option("--teacher", dest="teachers", default="softmax",
        ...                  convert=lambda name: [name], help="the teacher task")
        >>> teacher.setting_value("linear")
        ['linear']
        """
        convert = self.convert
        if convert is None or value is None:
            return value
        if isinstance(convert, str):
            convert = _ModuleType(module, convert).resolve()
        return convert(value)

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
        if self.flags[0].startswith("-"):
            kwargs["dest"] = self.dest
            if not self.is_flag and "choices" not in kwargs:  # named as written, not by dest
                kwargs.setdefault("metavar", self.flag.lstrip("-").replace("-", "_").upper())
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
