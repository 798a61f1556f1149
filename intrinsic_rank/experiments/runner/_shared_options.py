"""The options several experiments take, each declared once; and the names no command may take.

An option that more than one command takes (``--epochs``, ``--n-samples``, ``--d``,
``--jobs``, ``model``, ...) is declared here, once: its flag, its destination (the
settings key), its type and its words. A command takes it with
:func:`shared_option`, changing only what differs for it (``scaled=True``, a
sentence on what an epoch is there, its bounds); the option keeps this
declaration as its ``origin``, and ``tests/experiments/runner/test_registry.py``
checks, over the registered experiments, that a flag two commands take is one
declaration. :data:`COMMON_FLAGS` are the options the command line gives every
command, which :func:`~intrinsic_rank.experiments.register` refuses in an
experiment's own options. This module imports only the standard library (and the
list of packaged models, which imports only ``typing``).
"""

from ..._packaged_models import model_option_help
from ._arguments import (
    MAX_EPOCHS,
    Option,
    bounded_float,
    bounded_int,
    parse_precision,
    parse_ranks,
)

__all__ = ["COMMON_FLAGS", "DEFAULT_JOBS", "JOBS_RULE", "MAX_JOBS", "SHARED_OPTIONS",
           "refused_data", "shared_option"]

COMMON_FLAGS = {"--seed": "seed", "--out": "out", "--quiet": "quiet", "--device": "device",
                "--threads": "threads", "-h": "help", "--help": "help"}
"""The options the command line gives every command (flag -> destination), with ``--help``:
no experiment may declare one of these flags or destinations."""

DEFAULT_JOBS = 1
"""The one default of ``--jobs`` and of the Python functions' ``n_jobs`` that it sets:
one task at a time, in the calling process, with its threads (``--threads``)."""

MAX_JOBS = 512
"""The most tasks ``--jobs`` runs at once."""

JOBS_RULE = (
    "1: one at a time, in this process, with its --threads; n > 1: n processes, each of "
    "cpu_count // n torch threads (at least 1, at most --threads or OMP_NUM_THREADS when "
    "given); -1: one process per CPU, each of one thread")
"""What ``--jobs`` does (``run_parallel``'s thread rule), for the help of every ``--jobs``."""

SHARED_OPTIONS = {option.flag: option for option in (
    Option("--quick", action="store_true", help=""),
    Option("--epochs", dest="max_epochs", type=bounded_int(1, MAX_EPOCHS),
           help="the most epochs (passes over the training data) of every fit"),
    Option("--patience", type=bounded_int(1, MAX_EPOCHS),
           help="steps without improvement before a fit stops"),
    Option("--n-samples", type=bounded_int(2, 10**8),
           help="number of sequences, within memory"),
    Option("--d", type=bounded_int(1, 4096), help="token dimension"),
    Option("--seq-len", type=bounded_int(1, 4096), help="sequence length L"),
    Option("--noise", type=bounded_float(0.0, 1e6), help="noise standard deviation"),
    Option("--r-star", type=bounded_int(1, 4096), help="true rank of the teacher, at most d"),
    Option("--rank-grid", type=parse_ranks, help="rank grid, e.g. 1-8 or 1,2,4,8"),
    Option("--n-seeds", type=bounded_int(1, 64), help="seeds per setting"),
    Option("--jobs", dest="n_jobs", type=bounded_int(-1, MAX_JOBS, exclude=[0]),
           default=DEFAULT_JOBS, help="tasks run at once: " + JOBS_RULE),
    Option("model", help=lambda: model_option_help(causal=True)),
    Option("--n-fit", type=bounded_int(2, 65536), help="training windows per corpus"),
    Option("--n-test", type=bounded_int(2, 65536),
           help="windows of the test documents for the model's loss"),
    Option("--n-inputs", type=bounded_int(1, 4096), help="number of inputs"),
    Option("--length", type=bounded_int(4, 8192),
           help="tokens per input, BOS included, within the model's context"),
    Option("--n-memory", type=bounded_int(1, 8192),
           help="prompt vectors m, within the model's context"),
    Option("--tokens", dest="n_tokens", type=bounded_int(0, 8192), default=8,
           help="random tokens after the prompt vectors, within the model's context"),
    Option("--precision", type=parse_precision, shown="the model's own dtype",
           help="eps of the bounds: a number, a dtype name such as float16, or a "
           "convention: machine, paper (2^-10) or relative (r_inf / 2048); the bounds table "
           "shows all three conventions"),
    Option("--data", metavar="FILE", shown="a teacher task",
           help="an .npz file with arrays X and Y (numpy.savez(FILE, X=X, Y=Y)), or an .npy "
           "file of X with --targets"),
)}
"""Each option more than one command takes, by flag: its one declaration."""


def shared_option(flag, **changes):
    """The option ``flag`` of :data:`SHARED_OPTIONS`, with what differs for one command.

    Parameters
    ----------
    flag : str
        ``"--epochs"``, ``"--d"``, ``"model"``, ...
    **changes
        Arguments of :class:`~intrinsic_rank.experiments.Option` that differ for
        this command: ``scaled=True``, its ``help``, its ``type`` (other bounds).

    Returns
    -------
    option : Option
        Its ``origin`` is the shared declaration.

    Raises
    ------
    KeyError
        If no shared option has that flag.

    Examples
    --------
    >>> epochs = shared_option("--epochs", default=200)
    >>> epochs.dest, epochs.origin is SHARED_OPTIONS["--epochs"]
    ('max_epochs', True)
    """
    try:
        option = SHARED_OPTIONS[flag]
    except KeyError:
        raise KeyError(f"no shared option {flag!r}; the shared ones: "
                       f"{', '.join(SHARED_OPTIONS)}") from None
    return option.replace(**changes) if changes else option


def refused_data(reason):
    """The sweep's ``--data``, hidden, refusing in one line with ``reason``.

    ``--data FILE`` is the sweep's option; a command that draws its own tasks
    takes it only to refuse it with a reason, instead of argparse's
    "unrecognized arguments". Its value is no setting.

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
    >>> option.dest, option.hidden, option.setting
    ('data', True, False)
    >>> option.type("x.npz")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: not supported by this command, which draws its own task; ...
    """
    import argparse

    def refuse(text):
        raise argparse.ArgumentTypeError(
            f"not supported by this command, which {reason}; use intrinsic-rank sweep "
            "--data FILE")

    return shared_option("--data", type=refuse, hidden=True, setting=False, shown=None)
