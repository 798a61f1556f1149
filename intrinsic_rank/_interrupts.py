"""Stop signals: how a block ends on Ctrl-C, SIGTERM or SIGHUP.

The package's one mechanism for them (skorch's own quirk aside: its
``partial_fit`` catches ``KeyboardInterrupt``, which
``InterruptibleNet`` of ``estimators/_net.py`` undoes inside a fit).
A :class:`StopGuard` around a block does one of two things with each stop
signal, and can switch from the first to the second once:

* **unwind** (from its start): SIGINT raises ``KeyboardInterrupt`` and SIGTERM
  or SIGHUP raise :class:`Stopped`, so every ``finally`` and ``with`` in the
  block runs (temporary files removed, locks released). A stop that something
  in the block catches and carries on from is raised again when the block
  ends, so a result computed while it arrived is never handed on. A stop that
  leaves the block where no handler of the caller's was there (the signal's
  default action) ends the process by the same signal, as it would have ended
  without the guard, once the block has cleaned up.
* **hold** (:meth:`StopGuard.hold`, or ``held=True``): each signal is only
  recorded; when the block ends the first one acts as it would have, just
  after the block, or is dropped (``deliver=False``) when the caller decides
  that it came after the work it would have stopped.

Guards nest: an inner one records and raises over an outer one's handlers, and
an inner hold delivers its signal to the outer guard. A signal ignored by the
caller (``nohup``) stays ignored, and a handler the caller installed is left
alone while unwinding. Python runs signal handlers in the main thread only, so
in another thread a guard does nothing; a signal sent to the process is handled
in the main thread whichever thread the kernel delivers it to.

The command line reports a stop in one line and exits with ``128 + signal``
(:func:`stop_report`, :func:`end_program`). This module imports only the
standard library, so that the program can guard its own start-up.
"""

import os
import signal
import sys
import threading

__all__ = ["STOP_SIGNALS", "StopGuard", "Stopped", "end_program", "stop_report"]

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
"""The signals that stop a command: Ctrl-C, ``kill`` and a closed terminal."""


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived in a :class:`StopGuard` block that unwinds.

    A ``BaseException``, as ``KeyboardInterrupt``: ``except Exception`` does
    not swallow it, and ``finally`` clauses run on the way out.

    Attributes
    ----------
    signum : int
        The signal.
    """

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _main_thread():
    return threading.current_thread() is threading.main_thread()


def _is_default(signum, handler):
    """Whether ``handler`` is the signal's default action (what a guard may unwind over)."""
    if handler == signal.SIG_DFL:
        return True
    return signum == signal.SIGINT and handler is signal.default_int_handler


def _is_guard(handler):
    return isinstance(getattr(handler, "__self__", None), StopGuard)


def _stop(signum):
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


class StopGuard:
    """Stop signals in a block: unwound as exceptions, or held back (see the module).

    Parameters
    ----------
    held : bool, default=False
        Hold from the start instead of unwinding.
    deliver : bool, default=True
        When the block ends, let the first held signal act (``False``: drop it).
    end_process : bool, default=True
        A SIGTERM or SIGHUP that unwound the block over its default action ends
        the process by that signal when the block has cleaned up. The command
        line passes ``False``: it reports the stop itself.
    then_hold : bool, default=False
        Unwind on the first stop signal, then hold the ones that follow until
        the block ends: a second Ctrl-C cannot cut short the clean-up that the
        first one started (worker processes stopped, their semaphores
        released). When the block ends by the first stop, the held ones are
        dropped: they asked for what is already happening.
    program : bool, default=False
        The block is the program's last work: when it ends the stop signals are
        not given back to the caller's handlers. After a finished block they are
        ignored until the process exits, so that a stop during the interpreter's
        shutdown cannot change the status of a run that has finished; after an
        exception (which the program reports itself) they stay held and are
        dropped.

    Attributes
    ----------
    received : list of int
        The stop signals that arrived in the block, in order.

    Examples
    --------
    A stop that a library swallows still ends the block:

    >>> import os, signal
    >>> try:
    ...     with StopGuard() as guard:
    ...         try:
    ...             os.kill(os.getpid(), signal.SIGINT)
    ...         except KeyboardInterrupt:
    ...             pass  # swallowed, as skorch's partial_fit does
    ... except KeyboardInterrupt:
    ...     print("interrupted:", guard.received == [signal.SIGINT])
    interrupted: True

    A held signal acts once the block is done, or is dropped:

    >>> with StopGuard(held=True, deliver=False) as guard:
    ...     os.kill(os.getpid(), signal.SIGINT)  # recorded, not raised
    >>> guard.received == [signal.SIGINT]
    True
    """

    def __init__(self, *, held=False, deliver=True, end_process=True, then_hold=False,
                 program=False):
        self.held = held
        self.then_hold = then_hold
        self._start_held = held
        self.deliver = deliver
        self.end_process = end_process
        self.program = program
        self.received = []
        self._raised = []  # the signals raised while unwinding
        self._previous = {}

    def _handle(self, signum, frame):
        self.received.append(signum)
        if not self.held:
            self._raised.append(signum)
            self.held = self.then_hold  # a later signal waits for the clean-up to finish
            raise _stop(signum)

    def _take_over(self, every):
        """Install the handler over the default actions (``every``: over any not ignored)."""
        if not _main_thread():
            return
        for signum in STOP_SIGNALS:
            current = signal.getsignal(signum)
            if signum in self._previous or current in (signal.SIG_IGN, None):
                continue  # already ours, or ignored by the caller (nohup): stays so
            if every or _is_default(signum, current) or _is_guard(current):
                self._previous[signum] = signal.signal(signum, self._handle)

    def __enter__(self):
        self.received, self._raised = [], []
        if self.then_hold:  # a guard entered again unwinds its first signal again
            self.held = self._start_held
        self._take_over(every=self.held)
        return self

    def hold(self):
        """From here on, record the stop signals instead of raising them."""
        self.held = True
        self._take_over(every=True)

    def _restore(self):
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        return previous

    def _end_program(self, finished):
        """The program's guard ends: a finished run ignores the stop signals from now on;
        after an error they stay held (recorded and dropped) until the process exits."""
        self.held = True
        if finished:
            for signum in STOP_SIGNALS:
                try:
                    signal.signal(signum, signal.SIG_IGN)
                except (OSError, ValueError):  # not the main thread
                    pass

    def __exit__(self, kind, error, traceback):
        stop = error if isinstance(error, (KeyboardInterrupt, Stopped)) else None
        if stop is None and self._raised:  # caught inside the block and carried on from
            stop = _stop(self._raised[0])
            stop.__cause__ = error
        if self.program:  # the program reports a stop itself, and then exits
            self._end_program(finished=kind is None and stop is None)
            if stop is not None and stop is not error:
                raise stop
            return False
        previous = self._restore()
        if stop is None:
            if self.held and self.received and self.deliver and previous:
                signal.raise_signal(self.received[0])  # acts as it would have, now
            return False
        if (isinstance(stop, Stopped) and self.end_process
                and previous.get(stop.signum) == signal.SIG_DFL):
            signal.raise_signal(stop.signum)  # the default action: the process ends
        if stop is not error:
            raise stop
        return False


def stop_report(stop, name):
    """The one line and the exit status of a command that a stop signal ended.

    Parameters
    ----------
    stop : KeyboardInterrupt or Stopped
    name : str
        The command, e.g. ``"intrinsic-rank sweep"``.

    Returns
    -------
    line : str
        ``"<name>: interrupted"`` or ``"<name>: stopped by SIGTERM"``.
    status : int
        ``128 + signal``: 130 after Ctrl-C, 143 after SIGTERM, 129 after SIGHUP.

    Examples
    --------
    >>> stop_report(KeyboardInterrupt(), "intrinsic-rank sweep")
    ('intrinsic-rank sweep: interrupted', 130)
    >>> stop_report(Stopped(signal.SIGTERM), "intrinsic-rank sweep")
    ('intrinsic-rank sweep: stopped by SIGTERM', 143)
    """
    if isinstance(stop, Stopped):
        return f"{name}: stopped by {signal.Signals(stop.signum).name}", 128 + stop.signum
    return f"{name}: interrupted", 128 + signal.SIGINT


def end_program(stop, name):
    """End the program after a stop: its one line on stderr, then exit ``128 + signal``.

    Further stop signals are ignored from here on, and the process leaves at
    once (``os._exit``, streams flushed): CPython would otherwise end a process
    whose ``KeyboardInterrupt`` it judges unhandled by SIGINT itself at
    shutdown (exit status -2 instead of 130). Everything finished is on disk
    already (the files are written atomically).

    Parameters
    ----------
    stop : KeyboardInterrupt or Stopped
    name : str
        The command, e.g. ``"intrinsic-rank sweep"``.
    """
    for signum in STOP_SIGNALS:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (OSError, ValueError):  # not the main thread
            pass
    line, status = stop_report(stop, name)
    try:
        print(line, file=sys.stderr)
    except (OSError, ValueError, AttributeError):  # no stderr
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe or stream
            pass
    os._exit(status)
