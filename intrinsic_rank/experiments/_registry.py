"""The registry of experiments: one object per experiment, read by the CLI and ``reproduce``.

An experiment module ends with one :class:`Experiment` passed to :func:`register`.
The command line builds one sub-command per registered experiment (its options
from ``add_arguments``, plus the options every command shares), and
:func:`~intrinsic_rank.experiments.reproduce` runs the same objects as the
pieces of its report. Adding an experiment is adding a module that registers
one; neither ``cli.py`` nor the reproduce runner changes.
"""

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

__all__ = ["EXPERIMENTS", "Experiment", "Verdict", "VERDICTS", "get_experiment", "register"]

VERDICTS = ("agrees", "partly", "does not agree")
"""The three verdicts a claim can get, from best to worst."""


class Verdict(NamedTuple):
    """One claim of a paper, our measurement of it, and whether they agree.

    Attributes
    ----------
    claim : str
        The paper's claim, in plain words.
    measured : str
        What we measured, with the numbers.
    verdict : {"agrees", "partly", "does not agree"}
        Computed from the numbers by the piece's verdict function.
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


@dataclass(frozen=True)
class Experiment:
    """Everything the CLI and ``reproduce`` need to know about one experiment.

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
        them (the reproduce runner) or what ``settings`` built from the command
        line (the CLI). They are part of the reproduce cache key.
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
    add_arguments : callable
        ``add_arguments(parser)`` adds the command's own options (the shared
        ``--seed``, ``--out``, ``--quiet`` and ``--device`` are added by the CLI).
    settings : callable
        ``settings(args)`` -> the dict passed to ``run`` from parsed arguments.
    summary : callable
        ``summary(result)`` -> list of str: the lines the CLI prints around
        the tables (``summary(result)[0]`` above them, the rest below).
    extra_files : callable or None
        ``extra_files(result, folder)`` -> list of file names, for outputs
        other than the JSON and the PNGs (for example a CSV); ``None``: none.
    in_reproduce : bool, default=True
        Whether ``reproduce("all")`` runs it.
    """

    name: str
    command: str
    title: str
    paper: str
    help: str
    description: str
    quick: dict
    full: dict
    run: Callable
    tables: Callable
    plot: Callable
    verdicts: Callable
    add_arguments: Callable
    settings: Callable
    summary: Callable
    extra_files: Optional[Callable] = None
    in_reproduce: bool = field(default=True)


EXPERIMENTS = {}
"""The registered experiments in registration (= report) order: name -> :class:`Experiment`."""


def register(experiment):
    """Add ``experiment`` to :data:`EXPERIMENTS` and return it.

    Parameters
    ----------
    experiment : Experiment

    Returns
    -------
    experiment : Experiment

    Raises
    ------
    ValueError
        If another experiment already has its name or command.
    """
    for other in EXPERIMENTS.values():
        if other.name != experiment.name and other.command == experiment.command:
            raise ValueError(f"command {experiment.command!r} is already taken by {other.name!r}")
    if experiment.name in EXPERIMENTS and EXPERIMENTS[experiment.name] is not experiment:
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
