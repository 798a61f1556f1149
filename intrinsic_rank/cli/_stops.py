"""The command line's stop signals: SIGTERM and SIGHUP as an interrupt, and the end of a run.

Light by design, as the rest of the command line's start-up: ``signal`` and
``threading`` only (the hold itself, :class:`~intrinsic_rank._validation.SignalHold`,
is imported when a run reaches its files).
"""

import signal

class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind (removing temporary files) and exit 128 + signal.

    A ``BaseException``, as ``KeyboardInterrupt``: ``except Exception`` in a
    library does not swallow it, and ``atomic_file`` removes its temporary file
    on the way out.
    """

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class _TerminationSignals:
    """Turn SIGTERM and SIGHUP into :class:`_Terminated` inside the block (main thread only)."""

    _SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                     if hasattr(signal, name))

    def __enter__(self):
        self._previous = {}
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in self._SIGNALS:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):  # leave nohup's SIG_IGN
                self._previous[signum] = signal.signal(signum, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise _Terminated(signum)

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._raise:  # not when a hold replaced it
                signal.signal(signum, previous)
        return False


class _Finished:
    """From the moment a run's files start to be renamed in, the run has finished.

    :meth:`hold` is called just before the output stage commits: from then on
    SIGINT, SIGTERM and SIGHUP are recorded and dropped
    (:class:`~intrinsic_rank._validation.SignalHold`), so a signal during or
    after the renames can neither split them nor turn a saved run into exit
    status 130; the command ends as it would have, with the run in. Leaving
    the block drops what arrived and puts the handlers back; for the program
    itself (``keep``) the handlers stay until the process ends.
    """

    def __init__(self, keep=False):
        self.keep = keep
        self._hold = None

    def hold(self):
        """The point of no return: hold the stop signals from here on."""
        if self._hold is None:
            from .._validation import SignalHold

            self._hold = SignalHold().start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._hold is not None and not self.keep:
            self._hold.release(deliver=False)
        return False


def _ignore_stop_signals():
    """SIGINT, SIGTERM and SIGHUP ignored from here to the process's end (not when blocked)."""
    for signame in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, signame, None)
        if signum is not None:
            try:
                signal.signal(signum, signal.SIG_IGN)
            except (OSError, ValueError):  # not the main thread
                pass
