"""The torch CPU threads of a command: the one rule, its help text, and its setting.

:func:`thread_count` is the rule (``--threads``, else ``OMP_NUM_THREADS``, else
:data:`DEFAULT_THREADS`), :func:`cpu_count` the cap, and ``_ThreadSetting``
applies it to torch for one command and restores torch and the environment
after. Torch is imported only when a command runs, never by ``--help``.
"""

import argparse
import os
import sys

DEFAULT_THREADS = 1
"""Torch CPU threads of a command when neither ``--threads`` nor ``OMP_NUM_THREADS`` is given.

Measured on a 2-core CPU (docs/performance.md, "How long each command
takes"): one thread is never slower than two on a busy machine, and two
threads on cores that other work also uses spin instead of waiting (a sweep
took minutes instead of seconds). One thread also makes a command's numbers
independent of the machine's core count.
"""

THREADS_RULE = (
    "torch CPU threads: --threads N if given; else $OMP_NUM_THREADS if set; "
    f"else {DEFAULT_THREADS} (fastest when other work shares the cores; give --threads 2 "
    "or more on an idle multi-core one); at most the CPUs this process may use "
    "(more is capped, with a note)"
)


THREADS_HELP = (
    f"torch CPU threads (default: $OMP_NUM_THREADS when set, else {DEFAULT_THREADS}: "
    "fastest when other work shares the cores; give 2 or more on an idle multi-core one); "
    "at most the CPUs this process may use (more is capped, with a note)"
)


def _threads(text):
    """``--threads``: an integer >= 1 (capped at :func:`cpu_count` when the command runs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {value}")
    return value


def cpu_count():
    """The CPUs this process may run on (its affinity where known), at least 1.

    Examples
    --------
    >>> cpu_count() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def thread_count(threads=None, environ=None):
    """The torch CPU threads a command uses: the one documented rule.

    ``threads`` (the ``--threads`` option) if given; otherwise the
    ``OMP_NUM_THREADS`` environment variable when it holds an integer >= 1
    (torch reads it when it is imported, and the command leaves it alone);
    otherwise :data:`DEFAULT_THREADS`.

    Parameters
    ----------
    threads : int or None, default=None
        ``--threads``; ``None`` when the option was not given.
    environ : mapping or None, default=None
        The environment (``None``: ``os.environ``).

    Returns
    -------
    threads : int
    source : {"--threads", "OMP_NUM_THREADS", "default"}
        Which part of the rule decided.

    Examples
    --------
    >>> thread_count(3, environ={"OMP_NUM_THREADS": "1"})
    (3, '--threads')
    >>> thread_count(None, environ={"OMP_NUM_THREADS": "2"})
    (2, 'OMP_NUM_THREADS')
    >>> thread_count(None, environ={})
    (1, 'default')
    """
    if threads is not None:
        return int(threads), "--threads"
    environ = os.environ if environ is None else environ
    try:
        value = int(environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        value = 0
    if value >= 1:
        return value, "OMP_NUM_THREADS"
    return DEFAULT_THREADS, "default"


class _ThreadSetting:
    """Apply :func:`thread_count` for one command; restore torch and the environment after.

    With ``--threads N`` the environment's ``OMP_NUM_THREADS`` is set to ``N``
    too, so that worker processes (joblib's) follow it; with the variable set
    and no ``--threads`` nothing changes. A count above :func:`cpu_count`
    (``--threads 100000`` would start threads until an allocation fails) is
    capped at it, with a note on stderr naming ``name``.
    """

    def __init__(self, threads, name="intrinsic-rank"):
        self.threads, self.source = thread_count(threads)
        self.capped = self.threads > cpu_count()
        if self.capped:
            print(f"{name}: note: {self.source} asks for {self.threads} threads; this "
                  f"process may use {cpu_count()} CPUs, so {cpu_count()} are used",
                  file=sys.stderr)
            self.threads = cpu_count()

    def __enter__(self):
        import torch

        self._torch = torch.get_num_threads()
        self._environ = os.environ.get("OMP_NUM_THREADS")
        if self.source == "--threads" or self.capped:
            os.environ["OMP_NUM_THREADS"] = str(self.threads)
        if self.source != "OMP_NUM_THREADS" or self.capped:
            torch.set_num_threads(self.threads)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self._torch)
        if self._environ is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = self._environ
        return False
