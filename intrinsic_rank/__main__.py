"""The ``intrinsic-rank`` console script, and ``python -m intrinsic_rank``.

The console script imports this module and calls :func:`main`, which imports
the command line itself: a Ctrl-C while that import runs (the first tenth of a
second of every command) is then the command's own one line and exit status
130, not a ``KeyboardInterrupt`` traceback. This module imports nothing but the
standard library's ``os`` and ``sys``.
"""

import os
import sys

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
    except KeyboardInterrupt:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: no traceback either
        try:
            print("intrinsic-rank: interrupted", file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):  # no stderr
            pass
        os._exit(130)  # 128 + SIGINT, what a shell reports for Ctrl-C
    return command_line()


if __name__ == "__main__":
    sys.exit(main())
