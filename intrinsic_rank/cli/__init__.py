"""Command line: ``intrinsic-rank <experiment> ... | reproduce ...``.

Thin by design: one sub-command per registered experiment
(:data:`~intrinsic_rank.experiments.EXPERIMENTS`, in report order, then any
experiment registered from Python), built from the experiment's own declaration
(its :class:`~intrinsic_rank.experiments.Option` list) plus the options every
command shares (``--seed``, ``--out``, ``--quiet``, ``--device``,
``--threads``), and ``reproduce``. One runner serves every experiment: settings
from the arguments, every check, ``run``, the JSON written first, then the
printed summary and tables, then the plots and other files. The stop signals
are :mod:`intrinsic_rank._interrupts`'s (one guard per command), the thread rule
``_threads``'s.

What a command promises
-----------------------
* **Arguments are checked before any work.** A bad option (an ``--out`` that
  is empty, a file or not writable, a ``--seed`` outside ``[0, 2**32 - 1]``, a
  rank grid with an end below its start or more than
  :func:`~intrinsic_rank.experiments.parse_ranks`'s 4096 entries, an unknown
  or absent ``--device``, or a setting the experiment's ``check`` refuses)
  exits with status 2 and one line on stderr naming it
  (``intrinsic-rank sweep: error: argument --seed: ...``), no usage block.
* **No output overwrites an input.** Before any work, no output -- ``--out``,
  the command's files in it and their record ``.NAME.files.json``,
  ``--save-model`` -- may equal or lie inside an input (``--data``,
  ``--targets``, ``--texts``, a model file or folder) or another output;
  symbolic and hard links are followed (exit status 2, one line).
* **Results first; one run's files together.** The JSON, the CSV and a saved
  model are written before anything is printed or plotted; every file of the
  run is staged beside its target and all are renamed in together at the end,
  so an interrupted or failed run leaves the previous run's files as they were
  (a rename that fails puts back those renamed before it).
  Two commands writing the same ``--out`` leave whole files, the last writer's
  (``reproduce`` instead takes a lock on the folder).
  If printing or plotting then fails -- matplotlib missing, a plotting error
  -- the command says so in one line, names the saved JSON and exits with
  status 1. (Called from Python as ``main([...])`` an unexpected plotting
  error propagates instead, after the JSON is written; a missing matplotlib
  is the one line either way.)
* **A closed pipe** (``intrinsic-rank sweep | head -1``) ends the printing
  quietly: the plots are still saved, the exit status is 141 (128 + SIGPIPE).
* **Ctrl-C** exits with status 130 and the one line
  ``intrinsic-rank sweep: interrupted`` on stderr, no traceback, and writes
  nothing for the interrupted run; ``reproduce`` keeps the pieces finished
  before it (see :class:`~intrinsic_rank.experiments.Experiment`'s
  ``execute`` for interrupts that a library swallows). That holds from the
  first line of :func:`main` on, start-up included: the heavy imports happen
  inside it, and the console script's own import of this module happens inside
  the guard of :func:`intrinsic_rank.__main__.main`. A Ctrl-C once the run has
  finished (the interpreter shutting down) is ignored: the finished run keeps its
  status.
* **SIGTERM and SIGHUP** unwind exactly like an interrupt: a file being
  written is not left behind as a temporary file, nothing of the run is
  renamed in, ``reproduce`` releases its lock, and the command exits with 128 +
  the signal (143, 129) and one line (``intrinsic-rank sweep: stopped by
  SIGTERM``). A signal the caller set to be ignored (``nohup``) stays ignored.
* **The renames are the point of no return.** From the moment the run's files
  start to be renamed in, SIGINT, SIGTERM and SIGHUP are held back and then
  dropped: the run has finished, entirely in, and the command ends as it would
  have (exit 0 and its ``saved ...`` line). Before that moment a stop leaves
  the run entirely out.
* **Threads.** ``--threads`` (or ``OMP_NUM_THREADS``) above the CPUs this
  process may use is capped at them, with a one-line note on stderr.
* **No stdout at all** (``intrinsic-rank sweep >&-``): what would be printed
  goes nowhere, the run saves its files and exits 0.
* **Start-up is light.** The parser comes from the experiments' declarations,
  which are plain data: ``--help``, ``--version`` and every sub-command's
  ``--help`` import no torch, skorch or transformers (nor numpy); a command
  imports its experiment's module when it runs.
"""

import argparse
import os
import shlex
import sys

from .._version import __version__
from ..experiments import EXPERIMENTS
from ..experiments.runner import CommandParser, Option
from .._interrupts import StopGuard, Stopped, end_program, stop_report
from ._threads import (
    DEFAULT_THREADS,
    THREADS_HELP,
    THREADS_RULE,
    _threads,
    _ThreadSetting,
    thread_count,
)

# Nothing heavy is imported here: the parser comes from the experiments' declarations,
# and a command imports its experiment's module (torch) when it runs.

__all__ = ["main"]  # the command; its thread rule is also here: thread_count, DEFAULT_THREADS

_BROKEN_PIPE = 141  # 128 + SIGPIPE


class _UsageError(Exception):
    """A bad command line: one line for stderr, exit status 2."""


class _Parser(CommandParser):
    """argparse with errors as one line (``prog: error: message``) and no usage block."""

    def error(self, message):
        raise _UsageError(f"{self.prog}: error: {message}")


def _seed(text):
    """``--seed``: an integer in ``[0, 2**32 - 1]``."""
    from .._validation import check_seed

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer; got {text!r}") from None
    try:
        return check_seed(value, "the seed")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).replace("the seed ", "")) from None


def _out_folder(text):
    """``--out``: a folder that exists or can be created, and can be written."""
    from .._validation import check_output_folder

    try:
        return check_output_folder(text, name="the folder")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).replace("the folder ", "", 1)) from None


def _check_device(device):
    """``--device``: one torch knows and this machine has (``_validation.check_device``:
    unknown devices, ``meta``, CUDA or MPS asked for and absent are errors)."""
    from .._validation import check_device

    check_device(device)
    return device



class _HelpFormatter(argparse.HelpFormatter):
    """``--help`` whose lines never break inside a hyphenated word.

    Every option states its default itself (:class:`~intrinsic_rank.experiments.Option`).
    """

    def _split_lines(self, text, width):
        # never cut inside a hyphenated word: model names (all-MiniLM-L6-v2), --no-deps, 1-8
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)


def _shared_options(out):
    """The parent parser of every command: the options they all take.

    ``out`` is the command's default output folder. A fresh parent per command,
    because argparse shares a parent's option objects (and their defaults) among
    the parsers built from it. Their flags are the runner's ``COMMON_FLAGS``, which
    ``register`` refuses in an experiment's own options.
    """
    shared = _Parser(add_help=False)
    for option in (
        Option("--seed", type=_seed, default=0,
               help="random seed, an integer in [0, 2**32 - 1]"),
        Option("--out", type=_out_folder, default=out, help="output folder"),
        Option("--quiet", action="store_true", help="no progress output"),
        Option("--device", default="cpu", help="a torch device such as cpu or cuda"),
        Option("--threads", type=_threads, metavar="N", help=THREADS_HELP),
    ):
        option.add_to(shared)
    return shared


def _commands():
    """The sub-commands: the registered experiments, in report order."""
    return list(EXPERIMENTS.values())


def _papers(commands):
    """The papers of the commands, by title, in report order."""
    titles = []
    for command in commands:
        title = command.paper.split(" (")[0]  # "The Entropic Bound (appendix B...)"
        if title not in titles:
            titles.append(title)
    return titles


def _description(command):
    out = f"runs/{command.file_stem}"
    files = f" Writes {command.writes} in --out (default {out})." if command.writes else ""
    return f"{command.description}{files} Paper: \"{command.paper}\"."


def _build_parser():
    commands_list = _commands()
    parser = _Parser(
        prog="intrinsic-rank",
        formatter_class=_HelpFormatter,
        description="Measure how much query-key rank an attention model needs for a task, "
        "and reproduce the claims of three papers: "
        + "; ".join(f'"{t}"' for t in _papers(commands_list)) + ". Every command takes "
        "--seed, --out, --quiet, --device and --threads; " + THREADS_RULE.replace("%", "%%")
        + ". Each command's --help says what it writes and what --quick changes.",
    )
    parser.add_argument("--version", action="version",
                        version=f"intrinsic-rank {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    for command in commands_list:
        sub = commands.add_parser(
            command.command, parents=[_shared_options(f"runs/{command.file_stem}")],
            formatter_class=_HelpFormatter, help=command.help,
            description=_description(command).replace("%", "%%"))
        command.add_arguments(sub)
        sub.set_defaults(experiment=command.name)

    pieces = [e.command for e in commands_list]
    sub = commands.add_parser(
        "reproduce", parents=[_shared_options("runs/reproduce")],
        formatter_class=_HelpFormatter,
        help="run every reproduction, judge each claim, write a report",
        description=f"Run the reproductions ({', '.join(pieces)}) at the quick (default) "
        "or full scale, cache each finished piece under --out (reused while its settings "
        "and seed match; --force recomputes) and write OUT/report.md: per piece the "
        "tables, the plot, and for every claim of the papers whether our measurement "
        "agrees. Writes OUT/report.md, OUT/manifest.json and one folder per piece "
        "(its result.json and figures). Prints a summary table.",
    )
    for option in (
        Option("pieces", nargs="*", default=["all"],
               help="'all' or some of the commands: "
               + " ".join(e.command for e in commands_list)
               + " (each piece of the report is named as its command)"),
        Option("--quick", action="store_true",
               help="the quick settings, minutes on a laptop CPU (the default; each "
               "command's --help says its quick sizes)"),
        Option("--full", action="store_true", help="the papers' sizes (tens of minutes)"),
        Option("--force", action="store_true",
               help="recompute the pieces even when a valid cache exists"),
    ):
        option.add_to(sub)
    sub.set_defaults(experiment=None)
    return parser


def _listed(paths):
    """``a``, ``a and b``, ``a, b and c``."""
    return paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + " and " + paths[-1]


class _OutputFailed(Exception):
    """Printing or plotting failed after the JSON was saved (``error`` is the cause)."""

    def __init__(self, error, json_path):
        super().__init__(str(error))
        self.error = error
        self.json_path = json_path


def _silence_stdout():
    """After a broken pipe: send what is still printed to devnull (the Python docs' recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (tests capture it)
        pass


_INPUT_OPTIONS = (("data", "--data"), ("targets", "--targets"), ("model", "the model"),
                  ("texts", "--texts"))
"""Options (argparse destinations) whose value, a path that exists, is read by the run."""

_FILE_OPTIONS = (("save_model", "--save-model"), ("save", "--save"))
"""Options naming a file or folder the run writes beside its ``--out`` folder."""


def _paths_of(args, options):
    """``(option, path)`` of the ``options`` given as paths (not ``'default'``)."""
    found = []
    for dest, option in options:
        value = getattr(args, dest, None)
        if isinstance(value, (str, os.PathLike)) and os.fspath(value) not in ("", "default"):
            found.append((option, os.fspath(value)))
    return found


def _run_experiment(experiment, args, guard=None):
    """Checks -> run -> JSON and CSV -> summary and tables -> plots; one run's files together.

    Every file of the run (the JSON, the CSV, a saved model, the PNGs) is staged
    beside its target and renamed in together when the command ends: an
    interrupted or failed run leaves the previous run's files as they were, and
    a failed plot after the results were saved keeps the new JSON and CSV (the
    previous run's PNGs are removed, so no file of another run is left beside them).
    No output may overwrite an input or another output (checked before any work).
    """
    from ..experiments import format_table

    guard = StopGuard(deliver=False) if guard is None else guard
    _check_device(args.device)
    settings = experiment.settings(args)
    experiment.validate(settings)
    inputs = _paths_of(args, _INPUT_OPTIONS)
    experiment.check_outputs(args.out, inputs, _paths_of(args, _FILE_OPTIONS))
    broken_pipe = False
    with experiment.output_stage(args.out, protect=[path for _, path in inputs]):
        result = experiment.execute(settings, random_state=args.seed, progress=not args.quiet,
                                    device=args.device)
        json_path, files = experiment.save_results(result, args.out)
        try:
            summary = list(experiment.summary(result))
            try:
                if summary:
                    print(summary[0])
                for _caption, records, columns, *floatfmt in experiment.tables(result):
                    if records:
                        print(format_table(records, columns, floatfmt=floatfmt[0] if floatfmt
                                           else experiment.floatfmt))
                for line in summary[1:]:
                    print(line)
                sys.stdout.flush()
            except BrokenPipeError:
                broken_pipe = True  # the reader left: stop printing, keep saving
                _silence_stdout()
            files = list(experiment.plot(result, args.out)) + files
        except KeyboardInterrupt:
            raise
        except BrokenPipeError:
            guard.hold()  # the results are renamed in from here on
            raise
        except Exception as error:
            guard.hold()
            raise _OutputFailed(error, json_path) from error
        guard.hold()  # the point of no return: the stage renames the files in
    if broken_pipe:
        return _BROKEN_PIPE
    print("saved " + _listed([os.path.join(args.out, f) for f in files] + [json_path]))
    return 0  # a broken pipe now, at the last line, is main's (everything is saved)


def _reproduce_command(args):
    """The command line equivalent to ``args``, for the report."""
    words = ["intrinsic-rank", "reproduce", *args.pieces,
             "--full" if args.full else "--quick", "--out", args.out]
    if args.force:
        words.append("--force")
    if args.seed != 0:
        words += ["--seed", str(args.seed)]
    if args.quiet:
        words.append("--quiet")
    if args.device != "cpu":
        words += ["--device", args.device]
    threads, source = thread_count(args.threads)
    if source == "--threads":
        words += ["--threads", str(threads)]
    env = os.environ.get("OMP_NUM_THREADS") if source == "OMP_NUM_THREADS" else None
    return (f"OMP_NUM_THREADS={env} " if env else "") + shlex.join(words)


def _run_reproduce(args):
    from ..experiments import VERDICTS, format_table, reproduce

    if args.quick and args.full:
        raise ValueError("give --quick or --full, not both")
    _check_device(args.device)
    run = reproduce(pieces=args.pieces, quick=not args.full, out=args.out,
                    force=args.force, random_state=args.seed, progress=not args.quiet,
                    command=_reproduce_command(args), device=args.device)
    print(format_table(run.summary, floatfmt="{:.1f}"))
    for name, piece in run.pieces.items():
        for v in piece.verdicts:
            if v.verdict != VERDICTS[0]:
                print(f"{name}: {v.verdict}: {v.claim} (measured: {v.measured})")
    print(f"{run.seconds:.1f} s; report {run.report}")
    return 0


def main(argv=None):
    """Entry point of the ``intrinsic-rank`` command.

    Parameters
    ----------
    argv : list of str or None
        Arguments (``None`` reads ``sys.argv``: the program itself).

    Returns
    -------
    status : int
        Exit status: 0 on success; 2 for bad input, reported in one line on
        stderr before any work; 1 when printing or plotting failed after the
        JSON was saved (one line, naming the file) or a file could not be
        written (one line); 130 after Ctrl-C (one
        line, ``intrinsic-rank <command>: interrupted``); 141 when the reader
        of stdout went away (a closed pipe); 143 after SIGTERM and 129 after
        SIGHUP (one line, ``... stopped by SIGTERM``; no temporary file left).

    Examples
    --------
    >>> main(["sweep", "--seed", "-1"])  # doctest: +SKIP
    2
    """
    as_program = argv is None
    words = sys.argv[1:] if argv is None else list(argv)
    name = "intrinsic-rank"
    first = next((word for word in words if not word.startswith("-")), None)
    if first in {command.command for command in _commands()} | {"reproduce"}:
        name = f"intrinsic-rank {first}"  # an interrupt while parsing names the command too
    try:
        if as_program:
            _give_missing_streams_a_sink()
        # Ctrl-C, SIGTERM and SIGHUP unwind the run as exceptions until its files start
        # to be renamed in (guard.hold(), the point of no return); from then on they are
        # dropped: the run has finished, entirely in.
        with StopGuard(deliver=False, end_process=False, program=as_program) as guard:
            args = _build_parser().parse_args(argv)
            name = f"intrinsic-rank {args.command}"
            with _ThreadSetting(args.threads, name), _one_line_warnings(name):
                if args.experiment is None:
                    status = _run_reproduce(args)
                else:
                    status = _run_experiment(EXPERIMENTS[args.experiment], args, guard)
            sys.stdout.flush()  # a reader that left shows here, not at interpreter exit
        return status
    except _UsageError as error:
        print(error, file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Stopped) as stop:
        # Nothing of the run is half-written: its files are staged and renamed in together,
        # and a stop before the renames leaves the previous run's files as they were.
        if as_program:
            end_program(stop, name)
        line, status = stop_report(stop, name)
        print(line, file=sys.stderr)
        return status
    except BrokenPipeError:
        _silence_stdout()
        return _BROKEN_PIPE
    except _OutputFailed as failure:
        error = failure.error
        if isinstance(error, ImportError):
            what = str(error) if "matplotlib" in str(error) else f"a module is missing ({error})"
        elif not as_program:
            raise error from None  # a Python caller sees the traceback (the JSON is saved)
        else:
            what = f"printing or plotting failed ({type(error).__name__}: {error})"
        print(f"{name}: error: {what}; the results are saved in {failure.json_path}",
              file=sys.stderr)
        return 1
    except (ValueError, ImportError, FileNotFoundError) as error:
        # ImportError: an optional dependency or packaged model is not installed
        print(f"{name}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a disk full, a folder removed under us: one line, no traceback
        print(f"{name}: error: {error}", file=sys.stderr)
        return 1


class _one_line_warnings:
    """Warnings of a command in one line each: ``intrinsic-rank CMD: warning: message``.

    Python's default form names the file and line of the code that warned and
    prints that line of source: a reader of the command wants the message.

    Examples
    --------
    >>> import warnings
    >>> with _one_line_warnings("intrinsic-rank demo"):
    ...     text = warnings.formatwarning("a head is constant", UserWarning, "x.py", 3)
    >>> text
    'intrinsic-rank demo: warning: a head is constant\\n'
    """

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        import warnings

        self.saved = warnings.formatwarning
        warnings.formatwarning = lambda message, *args, **kwargs: \
            f"{self.name}: warning: {message}\n"
        return self

    def __exit__(self, *exc):
        import warnings

        warnings.formatwarning = self.saved
        return False


def _give_missing_streams_a_sink():
    """A program started with stdout or stderr closed (``>&-``) writes them to devnull.

    Python then has ``sys.stdout is None``; printing skips it, but libraries that
    write or flush it (skorch's progress table, tqdm) raise, and the run would save
    nothing. With a sink the run finishes, saves its files and exits 0.
    """
    for stream in ("stdout", "stderr"):
        if getattr(sys, stream) is None:
            setattr(sys, stream, open(os.devnull, "w"))
