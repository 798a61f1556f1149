"""Command line: ``intrinsic-rank <experiment> ... | reproduce ...``.

Thin by design: one sub-command per registered experiment
(:data:`intrinsic_rank.experiments.EXPERIMENTS`: ``sweep``, ``ladder``,
``frontier``, ``min-ip``, ``reach``, ``copy``, ``profile``), built from the
experiment's own options plus the options every command shares (``--seed``,
``--out``, ``--quiet``, ``--device``), and ``reproduce``. One runner serves every
experiment: settings from the arguments, ``run``, the JSON written first, then
the printed summary and tables, then the plots and other files.
"""

import argparse
import os
import shlex
import sys

from ._validation import check_device
from .experiments import (
    EXPERIMENTS,
    VERDICTS,
    format_table,
    parse_ranks,
    reproduce,
    write_json,
)

__all__ = ["main", "parse_ranks"]


def _shared_options(out):
    """The parent parser of every command: the options they all take.

    ``out`` is the command's default output folder. A fresh parent per command,
    because argparse shares a parent's option objects (and their defaults) among
    the parsers built from it.
    """
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    shared.add_argument("--out", default=out, help=f"output folder (default {out})")
    shared.add_argument("--quiet", action="store_true", help="no progress output")
    shared.add_argument("--device", default="cpu",
                        help="a torch device such as cpu or cuda (default cpu)")
    return shared


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="intrinsic-rank",
        description="Measure how much query-key rank an attention model needs for a task.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for experiment in EXPERIMENTS.values():
        sub = commands.add_parser(
            experiment.command, parents=[_shared_options(f"runs/{experiment.file_stem}")],
            help=experiment.help, description=experiment.description)
        experiment.add_arguments(sub)
        sub.set_defaults(experiment=experiment)

    names = list(EXPERIMENTS)
    sub = commands.add_parser(
        "reproduce", parents=[_shared_options("runs/reproduce")],
        help="run every reproduction, judge each claim, write a report",
        description=f"Run the reproductions ({', '.join(names)}) at the quick (default) "
        "or full scale, cache each finished piece under --out (reused while its settings "
        "and seed match; --force recomputes) and write OUT/report.md: per piece the "
        "tables, the plot, and for every claim of the papers whether our measurement "
        "agrees. Prints a summary table.",
    )
    sub.add_argument("pieces", nargs="*", default=["all"],
                     help=f"'all' (the default) or some of: {' '.join(names)}")
    sub.add_argument("--quick", action="store_true",
                     help="the quick settings, minutes on a laptop CPU (the default)")
    sub.add_argument("--full", action="store_true",
                     help="the papers' sizes (tens of minutes)")
    sub.add_argument("--force", action="store_true",
                     help="recompute the pieces even when a valid cache exists")
    sub.set_defaults(experiment=None)
    return parser


def _listed(paths):
    """``a``, ``a and b``, ``a, b and c``."""
    return paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + " and " + paths[-1]


def _run_experiment(experiment, args):
    """Settings -> run -> JSON (first) -> summary and tables -> plots and files."""
    check_device(args.device)
    settings = experiment.settings(args)
    result = experiment.run(settings, random_state=args.seed, progress=not args.quiet,
                            device=args.device)
    json_path = os.path.join(args.out, f"{experiment.file_stem}.json")
    write_json(json_path, result if experiment.saved is None else experiment.saved(result))
    summary = list(experiment.summary(result))
    if summary:
        print(summary[0])
    for caption, records, columns, *floatfmt in experiment.tables(result):
        if records:
            print(format_table(records, columns,
                               floatfmt=floatfmt[0] if floatfmt else experiment.floatfmt))
    for line in summary[1:]:
        print(line)
    files = list(experiment.plot(result, args.out))
    if experiment.extra_files is not None:
        files += list(experiment.extra_files(result, args.out))
    print("saved " + _listed([os.path.join(args.out, f) for f in files] + [json_path]))
    return 0


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
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + shlex.join(words)


def _run_reproduce(args):
    if args.quick and args.full:
        raise ValueError("give --quick or --full, not both")
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
        Arguments (``None`` reads ``sys.argv``).

    Returns
    -------
    status : int
        Exit status (0 on success; 2 for bad input, reported in one line on stderr).
    """
    args = _build_parser().parse_args(argv)
    try:
        if args.experiment is None:
            return _run_reproduce(args)
        return _run_experiment(args.experiment, args)
    except (ValueError, ImportError) as error:
        # ImportError: an optional dependency or packaged model is not installed
        print(f"intrinsic-rank {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
