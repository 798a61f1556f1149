"""The one progress convention of the commands: bars on a terminal, status lines off one.

* On a terminal (stderr is a TTY), the tqdm bars of the estimators and of
  :func:`~intrinsic_rank.nn.train_causal_lm` show (they are drawn with
  ``disable=None``: only on a terminal).
* Off a terminal (a log, a pipe, CI), no bar is drawn; instead
  :class:`StatusLines` writes one line every ``interval`` seconds to stderr,
  ``intrinsic-rank sweep: running, 30 s elapsed``, so that a long command is
  never silent.
* With ``--quiet`` (``progress=False``) nothing is drawn or written.
* Third-party bars are silenced: :func:`silence_third_party_bars` turns off
  the Hugging Face loading bars (``HF_HUB_DISABLE_PROGRESS_BARS`` and
  ``transformers.utils.logging.disable_progress_bar()``).
"""

import os
import sys
import threading
import time

__all__ = ["StatusLines", "silence_third_party_bars"]


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
                self.stream.write(f"{self.label}: running, {elapsed:.0f} s elapsed\n")
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
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        return False
