"""The ``intrinsic-rank`` console script, and ``python -m intrinsic_rank``.

The console script imports this module and calls :func:`main`, which imports
the command line itself: a Ctrl-C while that import runs (the first tenth of a
second of every command) is then the command's own one line and exit status
130 (:func:`intrinsic_rank._interrupts.end_program`, as every other stop of a
command), not a ``KeyboardInterrupt`` traceback. This module imports nothing
but the standard library's ``sys`` and the package's stop-signal module, which
imports only the standard library.
"""

import sys

from ._interrupts import end_program

__all__ = ["main"]


def main():
    """Run the command line of :mod:`intrinsic_rank.cli` as the program.

    Returns
    -------
    status : int
        The exit status (see :func:`intrinsic_rank.cli.main`).
    """
    try:
        from intrinsic_rank.cli import main as command_line
    except KeyboardInterrupt as stop:
        end_program(stop, "intrinsic-rank")
    return command_line()


if __name__ == "__main__":
    sys.exit(main())
