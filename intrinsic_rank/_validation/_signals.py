"""Stop signals around a block that must finish or be undone: held back, or unwound.

Two guards, for the code that renames a run's files into place and for the code
that writes a large folder:

* :class:`SignalHold` holds SIGINT, SIGTERM and SIGHUP back: each is recorded
  and acts once the hold is released (or is dropped, when the caller decides
  that it arrived after the work it would have stopped).
* :func:`termination_unwinds` turns a SIGTERM or SIGHUP whose action is the
  default (the process ends at once, no ``finally`` runs) into an exception for
  the block, so its clean-up runs, and then ends the process by the same signal,
  as it would have ended.

Both act in the main thread only (Python runs signal handlers there); in another
thread the block runs unguarded. They replace Python-level handlers, not the
thread's signal mask: a signal sent to the process is delivered to any thread
that does not block it (torch's worker threads), and Python then runs the
handler in the main thread all the same.
"""

import contextlib
import signal
import threading

__all__ = ["STOP_SIGNALS", "SignalHold", "TerminationUnwind", "signals_held",
           "termination_unwinds"]

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
"""The signals that stop a command: Ctrl-C, ``kill`` and a closed terminal."""


def _main_thread():
    return threading.current_thread() is threading.main_thread()


class SignalHold:
    """Hold the stop signals back from :meth:`start` to :meth:`release`.

    While held, each of :data:`STOP_SIGNALS` that is not ignored is only
    recorded; :meth:`release` puts the previous handlers back and, with
    ``deliver=True``, raises the first recorded signal again, so that it acts
    exactly as it would have (``KeyboardInterrupt`` for SIGINT, the process's
    end for a default SIGTERM), just after the block. Holds nest: an inner hold
    released with ``deliver=True`` hands its signal to the outer one.

    Attributes
    ----------
    received : list of int
        The signals that arrived while held, in order.

    Examples
    --------
    >>> import os
    >>> hold = SignalHold().start()
    >>> os.kill(os.getpid(), signal.SIGINT)  # recorded, not raised
    >>> hold.received == [signal.SIGINT]
    True
    >>> hold.release(deliver=False)  # dropped: the block it would have stopped is done
    """

    def __init__(self):
        self.received = []
        self._previous = {}

    def _record(self, signum, frame):
        self.received.append(signum)

    def start(self):
        """Install the recording handlers (main thread only); returns ``self``."""
        if not _main_thread() or self._previous:
            return self
        for signum in STOP_SIGNALS:
            current = signal.getsignal(signum)
            if current in (signal.SIG_IGN, None):  # ignored by the caller (nohup): stays so
                continue
            self._previous[signum] = signal.signal(signum, self._record)
        return self

    @property
    def active(self):
        """Whether the handlers are installed."""
        return bool(self._previous)

    def release(self, deliver=True):
        """Put the previous handlers back; with ``deliver``, raise the first signal received."""
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if deliver and self.received and previous:
            signal.raise_signal(self.received[0])


@contextlib.contextmanager
def signals_held():
    """Hold the stop signals back in the block; the first one that came acts at its end.

    Examples
    --------
    >>> with signals_held():
    ...     pass
    """
    hold = SignalHold().start()
    try:
        yield hold
    finally:
        hold.release(deliver=True)


class TerminationUnwind(BaseException):
    """SIGTERM or SIGHUP arrived in a :func:`termination_unwinds` block.

    A ``BaseException``, as ``KeyboardInterrupt``: ``except Exception`` does
    not swallow it, and ``finally`` clauses run on the way out.
    """

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _unwind(signum, frame):
    raise TerminationUnwind(signum)


@contextlib.contextmanager
def termination_unwinds():
    """Let the block clean up under SIGTERM and SIGHUP, then end the process by the signal.

    Where the signal's action is the default (the process would end at once,
    leaving a half-written folder), it raises :class:`TerminationUnwind` in the
    block instead; once the exception has left the block (its clean-up done),
    the default action is put back and the signal raised again, so the process
    still ends by it (exit status 143 or 129 in a shell). A handler someone
    installed (the command line's) or an ignored signal is left alone.

    Examples
    --------
    >>> with termination_unwinds():
    ...     pass
    """
    installed = {}
    if _main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
                installed[signum] = signal.signal(signum, _unwind)
    try:
        yield
    except TerminationUnwind as stop:
        for signum, handler in installed.items():
            signal.signal(signum, handler)
        installed = {}
        signal.raise_signal(stop.signum)
        raise  # only if the default action did not end the process
    finally:
        for signum, handler in installed.items():
            signal.signal(signum, handler)
