"""The one progress convention of the commands: bars on a terminal, status lines off one.

* On a terminal (stderr is a TTY), the tqdm bars of the estimators and of
  :func:`~intrinsic_rank.nn.train_causal_lm` show (they are drawn with
  ``disable=None``: only on a terminal).
* Off a terminal (a log, a pipe, CI), no bar is drawn; instead
  :class:`StatusLines` writes one line every ``interval`` seconds to stderr,
  ``intrinsic-rank sweep: running, 30 s elapsed``, so that a long command is
  never silent.
* An experiment made of many fits (the Min-IP runs, the accessibility
  curves, the profiles) reports them through :func:`progress_steps`: a tqdm bar over
  the fits on a terminal whose postfix names the fit running; off a terminal
  the same text is appended to the periodic status line
  (``intrinsic-rank reach: running, 30 s elapsed, m = 2, n = 6 (4/20)``).
  No experiment prints a line per fit.
* With ``--quiet`` (``progress=False``) nothing is drawn or written.
* Third-party bars are silenced: :func:`silence_third_party_bars` turns off
  the Hugging Face loading bars (``HF_HUB_DISABLE_PROGRESS_BARS`` and
  ``transformers.utils.logging.disable_progress_bar()``).
"""

import os
import sys
import threading
import time

__all__ = ["StatusLines", "Steps", "progress_steps", "silence_third_party_bars"]

# the text of the step running now, appended to the status line off a terminal
_CURRENT = {"text": ""}


def silence_third_party_bars():
    """Turn off the Hugging Face hub's and transformers' own progress bars.

    Sets ``HF_HUB_DISABLE_PROGRESS_BARS=1`` unless it is set already (read when
    ``transformers`` is imported) and, when ``transformers`` is imported
    already, calls its ``disable_progress_bar()``.

    Examples
    --------
    >>> silence_third_party_bars()
    >>> os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] in ("1", "0", "")  # set unless given
    True
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except (ImportError, AttributeError):  # pragma: no cover - an old transformers
            pass


class StatusLines:
    """Write ``label: running, N s elapsed`` every ``interval`` seconds off a terminal.

    A context manager around a command's work. Nothing is written when
    ``enabled`` is false (``--quiet``), or when ``stream`` is a terminal (the
    tqdm bars show there instead).

    Parameters
    ----------
    label : str
        What runs, e.g. ``"intrinsic-rank sweep"``.
    enabled : bool, default=True
    interval : float, default=30.0
        Seconds between two lines.
    stream : file-like or None, default=None
        Where the lines go (``None``: ``sys.stderr`` at the time of entry).

    Examples
    --------
    >>> import io
    >>> log = io.StringIO()
    >>> with StatusLines("demo", interval=0.05, stream=log):
    ...     time.sleep(0.2)
    >>> log.getvalue().splitlines()[0].startswith("demo: running, ")
    True
    """

    def __init__(self, label, enabled=True, interval=30.0, stream=None):
        self.label = label
        self.enabled = enabled
        self.interval = float(interval)
        self.stream = stream
        self._stop = threading.Event()
        self._thread = None

    def _write(self, start):
        while not self._stop.wait(self.interval):
            elapsed = time.perf_counter() - start
            try:
                current = _CURRENT["text"]
                tail = f", {current}" if current else ""
                self.stream.write(f"{self.label}: running, {elapsed:.0f} s elapsed{tail}\n")
                self.stream.flush()
            except (OSError, ValueError):  # the log went away: stop quietly
                return

    def __enter__(self):
        if self.stream is None:
            self.stream = sys.stderr
        try:
            terminal = self.stream.isatty()
        except (AttributeError, ValueError):
            terminal = False
        if self.enabled and not terminal:
            self._stop.clear()
            self._thread = threading.Thread(target=self._write, args=(time.perf_counter(),),
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        _CURRENT["text"] = ""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        return False


class Steps:
    """The fits of one experiment: a bar on a terminal, the status line's tail off one.

    Made by :func:`progress_steps`; use it as a context manager and call :meth:`update`
    once per finished fit.

    Parameters
    ----------
    total : int or None
        How many fits (``None``: unknown).
    desc : str
        The bar's label, e.g. ``"reach"``.
    enabled : bool, default=True
        ``False`` (``--quiet``, ``progress=False``): nothing is drawn or recorded.
    stream : file-like or None, default=None
        Where the bar goes (``None``: ``sys.stderr``). The bar is drawn only when
        it is a terminal (tqdm's ``disable=None``).

    Examples
    --------
    >>> import io
    >>> with progress_steps(3, "demo", stream=io.StringIO()) as bar:
    ...     bar.update("m = 1: accessibility 0.90")
    ...     bar.done
    1
    """

    def __init__(self, total, desc, enabled=True, stream=None):
        self.total = None if total is None else int(total)
        self.desc = str(desc)
        self.enabled = bool(enabled)
        self.stream = stream
        self.done = 0
        self._bar = None

    def _tail(self, text):
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        return f"{text} ({count})" if text else f"{self.desc} {count}"

    def __enter__(self):
        if self.enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, leave=False, disable=None,
                             file=self.stream if self.stream is not None else sys.stderr)
        return self

    def update(self, text=""):
        """Count one finished fit and say what it gave.

        Parameters
        ----------
        text : str, default=""
            A short description of the fit that finished (its setting and
            result), shown as the bar's postfix and appended to the next
            status line.
        """
        self.done += 1
        if not self.enabled:
            return
        if self._bar is not None:
            if text:
                self._bar.set_postfix_str(text, refresh=False)
            self._bar.update(1)
        _CURRENT["text"] = self._tail(text)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        return False


def progress_steps(total, desc, enabled=True, stream=None):
    """Progress over the fits of one experiment, in the one convention of the commands.

    Parameters
    ----------
    total : int or None
        How many fits the experiment runs (``None`` when unknown).
    desc : str
        What runs, e.g. ``"min-ip-law"``.
    enabled : bool, default=True
        The experiment's ``progress`` flag.
    stream : file-like or None, default=None
        Where the bar goes (``None``: ``sys.stderr``).

    Returns
    -------
    Steps
        A context manager; call ``update(text)`` once per finished fit.

    Examples
    --------
    >>> import io
    >>> log = io.StringIO()
    >>> with StatusLines("demo", interval=0.05, stream=log):
    ...     with progress_steps(2, "demo", stream=io.StringIO()) as bar:
    ...         bar.update("seed 0 rank 4: error 0.00")
    ...         time.sleep(0.2)
    >>> "seed 0 rank 4: error 0.00 (1/2)" in log.getvalue()
    True
    """
    return Steps(total, desc, enabled=enabled, stream=stream)
