"""The registry of experiments: one object per experiment, read by the CLI and ``reproduce``.

Each experiment of a paper is one :class:`Experiment`, declared in its paper's
``__init__`` (plain data: its words, its options, its scales, and the name of the
module that holds its work), and registered by
:mod:`intrinsic_rank.experiments` in report order with :func:`register`. The
command line builds one sub-command per registered experiment (its options
from its declaration, plus the options every command shares), and
:func:`~intrinsic_rank.experiments.reproduce` runs the same objects as the
pieces of its report. Adding an experiment is adding its module and its
declaration in its paper's ``__init__``: neither the command line, the
reproduce runner nor :mod:`intrinsic_rank.experiments` changes. An experiment
registered from Python becomes a command and a piece the same way.

Interrupts
----------
Both the CLI and ``reproduce`` run an experiment through
:meth:`Experiment.execute`, never ``run`` directly. It runs ``run`` under a
:class:`~intrinsic_rank._interrupts.StopGuard`: a stop signal (Ctrl-C,
SIGTERM, SIGHUP) that some library swallows (skorch's ``partial_fit`` catches
``KeyboardInterrupt`` and returns a truncated fit) still ends the run when
``run`` returns or fails: a result computed while a stop arrived is never
handed on, written or cached.

Writing a command's files
-------------------------
The CLI writes a command's files inside :meth:`Experiment.output_stage` (see
:func:`~intrinsic_rank.experiments.runner._stage.output_stage`): the run
(``--save-model`` writes there), then :meth:`Experiment.save_results` (the
JSON, then the other files such as the CSV, before any plotting), then the
printing and the plots. The folder gets all of a run's files together: after
Ctrl-C none of them (the earlier run's files stay, all of them); after a
plotting failure the results and no PNG of an earlier run.
"""

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

from ._arguments import _resolve_quick, _value_text
from ._registry_checks import refusal

__all__ = [
    "EXPERIMENTS", "Experiment", "NOT_COMPARABLE", "Verdict", "VERDICTS",
    "get_experiment",
    "grade", "is_finite", "one_plot", "register", "save_plot",
]


VERDICTS = ("agrees", "partly", "does not agree", "not comparable")
"""The four verdicts a claim can get.

The first three grade a comparison, from best to worst. The fourth,
:data:`NOT_COMPARABLE`, says that the measurement and the claim are about
unlike things (a small toy model against the paper's pretrained models, say),
so no grade is given: the numbers are reported beside the claim and the
explanation says why they are not compared.
"""

NOT_COMPARABLE = VERDICTS[3]
"""The verdict of a comparison between unlike things: ``"not comparable"``."""


class Verdict(NamedTuple):
    """One claim of a paper, our measurement of it, and whether they agree.

    Attributes
    ----------
    claim : str
        The paper's claim, in plain words.
    measured : str
        What we measured, with the numbers.
    verdict : {"agrees", "partly", "does not agree", "not comparable"}
        Computed from the numbers by the piece's verdict function, by a rule
        written in its docstring before any run; ``"not comparable"`` when the
        measurement is of another kind of thing than the claim.
    explanation : str
        The check that was applied, and why the verdict follows from it.

    Examples
    --------
    >>> v = Verdict("r* is found", "estimated 4, true 4", "agrees", "equal")
    >>> v.verdict in VERDICTS
    True
    """

    claim: str
    measured: str
    verdict: str
    explanation: str


_PARTS = ("run", "tables", "plot", "verdicts", "summary", "prepare", "check", "saved",
          "extra_files")
"""The parts of an experiment's work, in its module as ``_run``, ``_tables``, ... (see
:class:`Experiment`)."""

_OPTIONAL = {
    "prepare": lambda settings, folder: settings,
    "check": lambda settings: None,
    "saved": lambda result: result,
    "extra_files": lambda result, folder: [],
}
"""What an optional part does when the experiment's module has none."""


class _Part:
    """One part of an experiment's work, looked up in its module when first called."""

    def __init__(self, module, part, fallback=None):
        self.module, self.part, self.fallback = module, part, fallback

    def resolve(self):
        """The function (importing the experiment's module, and with it torch)."""
        import importlib

        found = getattr(importlib.import_module(self.module), f"_{self.part}", None)
        if found is None:
            if self.fallback is None:
                raise AttributeError(f"the experiment module {self.module} defines no "
                                     f"_{self.part}")
            return self.fallback
        return found

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __repr__(self):
        return f"<{self.module}:_{self.part}>"


@dataclass(frozen=True)
class Experiment:
    """Everything the CLI and ``reproduce`` need to know about one experiment.

    An experiment of the package is declared in its paper's ``__init__``,
    which imports nothing heavy: its words, its options and its scales here,
    and its work as the name of the ``module`` that holds it. That module
    defines ``_run``, ``_tables``, ``_plot``, ``_verdicts``, ``_summary``
    and, when it needs them, ``_prepare``, ``_check``, ``_saved`` and
    ``_extra_files`` (the parts below, without ``_``); each is looked up when
    it is first called, so the command line builds every ``--help`` without
    torch. An experiment registered from Python may pass the parts themselves
    instead.

    The settings a command runs with come from its options alone
    (:meth:`settings`): each option's destination is a settings key, its value
    (converted by the option's ``convert`` where one is declared) the setting.

    Attributes
    ----------
    name : str
        The reproduce piece's name (and the key in :data:`EXPERIMENTS`).
    command : str
        The CLI sub-command.
    title : str
        Header of the piece in the report.
    paper : str
        The paper the claims come from.
    help : str
        One line for ``intrinsic-rank --help``.
    description : str
        The sub-command's description.
    quick, full : dict
        JSON-able settings of the quick and the full scale; ``run`` receives
        them (the reproduce runner) or what :meth:`settings` built from the
        command line (the CLI). They are part of the reproduce cache key. An
        option declared with ``scaled=True`` takes its default and its
        ``--quick`` value from them, under its destination.
    run : callable
        ``run(settings, *, random_state, progress, device)`` -> JSON-able dict,
        the measured result; ``progress`` is a bool, ``device`` a torch device
        string such as ``"cpu"`` or ``"cuda"``.
    tables : callable
        ``tables(result)`` -> list of ``(caption, records, columns)``: what the
        CLI prints and the report shows, with the one list of columns.
    plot : callable
        ``plot(result, folder)`` -> list of PNG file names written in ``folder``.
    verdicts : callable
        ``verdicts(result)`` -> list of :class:`Verdict`.
    summary : callable
        ``summary(result)`` -> list of str: the lines the CLI prints around
        the tables (``summary(result)[0]`` above them, the rest below).
    prepare : callable or None, default=None
        ``prepare(settings, folder)`` -> the settings ``run`` gets, from the
        options' values (keyed by their destinations) and the output folder
        (``--out``, or ``None``), for what one setting needs of another (two
        options that make one setting, a file beside the outputs); by default
        the options' values themselves.
    options : tuple of Option, default=()
        The command's own options (the CLI adds ``--seed``, ``--out``,
        ``--quiet``, ``--device`` and ``--threads``); an option
        ``--quick`` makes ``--help`` list what it changes.
    module : str or None, default=None
        The module holding the parts not given, e.g.
        ``"intrinsic_rank.experiments.entropic._ladder"``.
    writes : str or None, default=None
        The files the command writes in ``--out``, in words, for its ``--help``.
    groups : dict, default={}
        Titles and descriptions of option groups in ``--help`` (an option joins
        one with ``group=`` among its argparse arguments).
    extra_files : callable or None, default=None
        ``extra_files(result, folder)`` -> list of file names, for outputs
        other than the JSON and the PNGs (for example a CSV); none by default.
    in_reproduce : bool, default=True
        Whether ``reproduce("all")`` runs it.
    json_name : str or None, default=None
        Stem of the JSON file the command writes, ``<out>/<json_name>.json``
        (a plain file name, no folder); ``None`` means the command with ``-``
        read as ``_`` (``min-ip`` -> ``min_ip.json``).
    saved : callable or None, default=None
        ``saved(result)`` -> the JSON-able payload of that file; by default
        ``result`` itself.
    floatfmt : str or None, default=None
        Format of floats in the tables the command prints (a table given as
        ``(caption, records, columns, floatfmt)`` overrides it); ``None``: the
        tables' one rule (4 significant digits, one style per column, see
        :func:`~intrinsic_rank.experiments.format_table`).
    check : callable or None, default=None
        ``check(settings)`` raises ``ValueError`` naming the option when the
        settings cannot run (for example a length beyond what the model can
        hold); the CLI calls it before any work, ``reproduce`` before a piece
        runs. By default ``run`` checks its own arguments.

    Examples
    --------
    >>> from intrinsic_rank.experiments import EXPERIMENTS
    >>> EXPERIMENTS["sweep"].command, EXPERIMENTS["sweep"].file_stem
    ('sweep', 'sweep')
    """

    name: str
    command: str
    title: str
    paper: str
    help: str
    description: str
    quick: dict
    full: dict
    run: Optional[Callable] = None
    tables: Optional[Callable] = None
    plot: Optional[Callable] = None
    verdicts: Optional[Callable] = None
    summary: Optional[Callable] = None
    prepare: Optional[Callable] = None
    options: tuple = ()
    module: Optional[str] = None
    writes: Optional[str] = None
    groups: dict = field(default_factory=dict)
    extra_files: Optional[Callable] = None
    in_reproduce: bool = True
    json_name: Optional[str] = None
    saved: Optional[Callable] = None
    floatfmt: Optional[str] = None
    check: Optional[Callable] = None

    def __post_init__(self):
        options = tuple(option.from_scales(self.full, self.quick) if hasattr(
            option, "from_scales") else option for option in self.options)
        object.__setattr__(self, "options", options)
        for part in _PARTS:
            if getattr(self, part) is not None:
                continue
            fallback = _OPTIONAL.get(part)
            if self.module is not None:
                object.__setattr__(self, part, _Part(self.module, part, fallback))
            elif fallback is not None:
                object.__setattr__(self, part, fallback)
            else:
                raise TypeError(f"experiment {self.name!r}: give {part}= or the module that "
                                f"defines _{part}")

    @property
    def file_stem(self):
        """Stem of the command's JSON file: ``json_name`` or the command with ``_`` for ``-``."""
        return self.json_name or self.command.replace("-", "_")

    @property
    def takes_quick(self):
        """Whether the command takes ``--quick`` (one of its options)."""
        return any(option.dest == "quick" for option in self.options)

    def quick_help(self):
        """What ``--quick`` does, from the options it changes: the help of that flag."""
        changes = [f"{option.flag} {_value_text(option.quick, option.kwargs.get('nargs'))}"
                   for option in self.options if option.changes_with_quick]
        (flag,) = [option for option in self.options if option.dest == "quick"]
        text = "the quick sizes"
        if changes:
            text += ": " + ", ".join(changes)
        if flag.help:
            text += ("; " if changes else ": ") + flag.help
        return text

    def add_arguments(self, parser):
        """Add the command's own options (``options``) to ``parser``.

        Parameters
        ----------
        parser : argparse.ArgumentParser
            Best a ``CommandParser`` (the runner's, which the command line uses),
            which gives an option its ``--quick`` value when the flag is given.
        """
        quick = self.takes_quick
        groups = {title: parser.add_argument_group(title, description)
                  for title, description in self.groups.items()}
        for option in self.options:
            where = groups[option.group] if option.group is not None else parser
            if option.dest == "quick":
                where.add_argument(*option.flags, action="store_true",
                                   help=self.quick_help().replace("%", "%%"))
            else:
                option.add_to(where, self.module, quick_flag=quick)

    def settings(self, args):
        """The settings ``run`` gets from parsed arguments: each option's value under its ``dest``.

        Every option that is a setting (all but the ``--quick`` flag, unless
        declared ``setting=True``, and the hidden refusals) gives its value,
        converted by its ``convert`` where one is declared; ``prepare``
        then finishes them (with ``args.out`` as the folder).

        Parameters
        ----------
        args : argparse.Namespace
            From the command line's parser, or any parser the options were added
            to (:meth:`add_arguments`): values that ``--quick`` changes are
            resolved here too.

        Returns
        -------
        settings : dict

        Examples
        --------
        >>> import argparse
        >>> from intrinsic_rank.experiments import EXPERIMENTS
        >>> ladder = EXPERIMENTS["ladder"]
        >>> parser = argparse.ArgumentParser()
        >>> ladder.add_arguments(parser)
        >>> ladder.settings(parser.parse_args(["--quick", "--d", "8"]))["d"]
        8
        """
        args = _resolve_quick(args)
        values = {option.dest: option.setting_value(getattr(args, option.dest), self.module)
                  for option in self.options if option.setting}
        return self.prepare(values, getattr(args, "out", None))

    def validate(self, settings):
        """Check ``settings`` before any work: the experiment's ``check``.

        Parameters
        ----------
        settings : dict

        Raises
        ------
        ValueError
            From ``check``, naming the bad option.
        """
        self.check(settings)

    def check_outputs(self, folder, inputs, files=()):
        """Refuse, before any work, a command file in ``folder`` that would overwrite an input.

        Parameters
        ----------
        folder : str
            ``--out``.
        inputs : list of (str, str)
            ``(option, path)`` of the run's inputs.
        files : list of (str, str), default=()
            ``(option, path)`` of other files the run writes (``--save-model``).

        Raises
        ------
        ValueError
            Naming the option whose path would be overwritten.
        """
        from ._stage import check_outputs_apart

        check_outputs_apart(folder, self.file_stem, inputs, files)

    def output_stage(self, folder, protect=()):
        """The :func:`output_stage` of this command's files in ``folder``.

        Parameters
        ----------
        folder : str
            ``--out``.
        protect : iterable of path-like, default=()
            The run's input paths, which no file of the stage may overwrite.

        Returns
        -------
        stage : context manager yielding an ``OutputStage``
        """
        from ._stage import output_stage

        return output_stage(folder, self.file_stem, protect)

    def save_results(self, result, folder):
        """Write the results, before any plotting: the JSON, then ``extra_files`` (the CSV).

        Inside :meth:`output_stage` the stage is then marked: a later failure
        (plotting, a missing matplotlib) still keeps these files.

        Parameters
        ----------
        result : dict
            What :meth:`execute` returned.
        folder : str

        Returns
        -------
        json_path : str
        files : list of str
            The names of the other files written in ``folder``.
        """
        import os

        from ._output import _STAGE, write_json

        json_path = os.path.join(folder, f"{self.file_stem}.json")
        write_json(json_path, self.saved(result))
        files = list(self.extra_files(result, folder))
        stage = _STAGE.get()
        if stage is not None:
            stage.results_saved()
        return json_path, files

    def execute(self, settings, *, random_state, progress, device):
        """``run(settings, ...)`` under a stop guard, with the progress convention.

        With ``progress`` true, off a terminal a status line with the elapsed
        time goes to stderr every 30 s (the bars show on a terminal); third-party
        (Hugging Face) bars are silenced either way.

        Parameters
        ----------
        settings : dict
        random_state : int
        progress : bool
        device : str

        Returns
        -------
        result : dict
            What ``run`` returned, only when no interrupt arrived while it ran.

        Raises
        ------
        KeyboardInterrupt
            When Ctrl-C arrived during ``run``, even if something inside
            ``run`` caught it and carried on. A SIGTERM or SIGHUP is handled
            the same way (as the ``BaseException`` ``Stopped``, which the
            command line reports); outside the command line it then ends the
            process by that signal once ``run`` has cleaned up.
        """
        from ..._interrupts import StopGuard
        from ._progress import StatusLines, silence_third_party_bars

        silence_third_party_bars()
        with StopGuard(), StatusLines(self.command, enabled=progress):
            return self.run(settings, random_state=random_state, progress=progress,
                            device=device)


EXPERIMENTS = {}
"""The registered experiments in registration (= report) order: name -> :class:`Experiment`."""


def register(experiment):
    """Add ``experiment`` to :data:`EXPERIMENTS` and return it.

    What would break the command line (every command's parser is built from the
    registry) is refused here, in one line: an option that clashes with the
    ones every command takes (``--seed``, ``--out``, ``--quiet``, ``--device``,
    ``--threads``, ``--help``) or with another of its own; a reserved command
    (``reproduce``, ``all``) or one that is not a plain word; quick or full
    settings that are not JSON-able dicts; a ``json_name`` that leaves
    ``--out``; an option ``type`` or ``convert`` (or a part) named by a string
    that its module does not define, or a module that cannot be found.

    Parameters
    ----------
    experiment : Experiment

    Returns
    -------
    experiment : Experiment

    Raises
    ------
    ValueError
        If another experiment already has its name or command, or for any of
        the reasons above.
    TypeError
        If ``experiment`` is not an :class:`Experiment`.

    Examples
    --------
    >>> import dataclasses
    >>> from intrinsic_rank.experiments import EXPERIMENTS, register
    >>> register(dataclasses.replace(EXPERIMENTS["ladder"], name="x", command="reproduce"))
    Traceback (most recent call last):
    ...
    ValueError: experiment 'x': the command 'reproduce' is reserved (the command line's own)
    """
    if not isinstance(experiment, Experiment):
        raise TypeError(f"register() takes an Experiment; got {type(experiment).__name__}")
    problem = refusal(experiment)
    if problem is not None:
        raise ValueError(f"experiment {experiment.name!r}: {problem}")
    for other in EXPERIMENTS.values():
        if other.name != experiment.name and other.command == experiment.command:
            raise ValueError(f"command {experiment.command!r} is already taken by {other.name!r}")
    known = EXPERIMENTS.get(experiment.name)
    # The same declaration imported a second time (pytest's importlib mode does this when
    # it collects doctests) re-registers its own experiment: that replaces, it is no clash.
    reimported = (known is not None and known.module is not None
                  and (known.module, known.command) == (experiment.module, experiment.command))
    if known is not None and known is not experiment and not reimported:
        raise ValueError(f"an experiment named {experiment.name!r} is already registered")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


def get_experiment(name):
    """The registered experiment called ``name`` (piece name or CLI command).

    Parameters
    ----------
    name : str

    Returns
    -------
    experiment : Experiment

    Raises
    ------
    ValueError
        If nothing of that name is registered.
    """
    for experiment in EXPERIMENTS.values():
        if name in (experiment.name, experiment.command):
            return experiment
    raise ValueError(f"unknown experiment {name!r}; use one of {', '.join(EXPERIMENTS)}")


# -- small helpers shared by the experiments' verdict and plot functions ---------------


def is_finite(value):
    """Whether ``value`` is a finite Python number (not None, NaN or inf).

    Examples
    --------
    >>> is_finite(1.0), is_finite(None), is_finite(float("inf"))
    (True, False, False)
    """
    import math

    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def grade(n_ok, n_total):
    """All checks pass: "agrees"; some: "partly"; none: "does not agree".

    Examples
    --------
    >>> grade(2, 2), grade(1, 2), grade(0, 2)
    ('agrees', 'partly', 'does not agree')
    """
    if n_total > 0 and n_ok == n_total:
        return "agrees"
    return "partly" if n_ok > 0 else "does not agree"


def save_plot(fig, folder, name):
    """Save ``fig`` as ``folder/name`` (PNG, atomically), close it and return ``name``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    folder : str
    name : str

    Returns
    -------
    name : str
    """
    import os

    from ._figures import pyplot, write_figure

    try:
        write_figure(fig, os.path.join(folder, name), dpi=120)  # atomic
    finally:
        pyplot().close(fig)
    return name


def one_plot(plot, file_name):
    """``plot(result, folder)`` of an experiment drawn by one plot function.

    Parameters
    ----------
    plot : callable
        ``plot(result_bunch)`` -> figure.
    file_name : str

    Returns
    -------
    draw : callable
        ``draw(result, folder)`` -> ``[file_name]``.
    """
    from sklearn.utils import Bunch

    def draw(result, folder):
        return [save_plot(plot(Bunch(**result)), folder, file_name)]

    return draw
