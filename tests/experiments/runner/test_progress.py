"""Progress: status lines on a terminal only, steps that count fits, no third-party bars.
"""

import os
import re


def test_status_lines_off_a_terminal_and_none_when_quiet():
    import io
    import time

    from intrinsic_rank.experiments.runner._progress import StatusLines

    log = io.StringIO()
    with StatusLines("intrinsic-rank sweep", interval=0.02, stream=log):
        time.sleep(0.15)
    lines = log.getvalue().splitlines()
    assert lines and all(re.fullmatch(r"intrinsic-rank sweep: running, \d+ s elapsed", line)
                         for line in lines)
    quiet = io.StringIO()
    with StatusLines("x", enabled=False, interval=0.02, stream=quiet):
        time.sleep(0.1)
    assert quiet.getvalue() == ""

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    with StatusLines("x", interval=0.02, stream=terminal):
        time.sleep(0.1)
    assert terminal.getvalue() == ""  # the tqdm bars show there instead


def test_commands_silence_the_hugging_face_bars(monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    from intrinsic_rank.experiments.runner._progress import silence_third_party_bars

    silence_third_party_bars()
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"


def test_steps_count_fits_and_feed_the_status_line():
    import io
    import time

    from intrinsic_rank.experiments.runner._progress import StatusLines, progress_steps

    log = io.StringIO()
    with StatusLines("intrinsic-rank reach", interval=0.03, stream=log):
        with progress_steps(3, "reach", stream=io.StringIO()) as bar:
            bar.update("m = 1, n = 4: accessibility 0.75")
            time.sleep(0.15)
            bar.update("m = 1, n = 5: accessibility 0.25")
            time.sleep(0.15)
        assert bar.done == 2
    lines = log.getvalue().splitlines()
    assert any(re.fullmatch(r"intrinsic-rank reach: running, \d+ s elapsed, "
                            r"m = 1, n = 4: accessibility 0\.75 \(1/3\)", line)
               for line in lines)
    assert any(line.endswith("m = 1, n = 5: accessibility 0.25 (2/3)") for line in lines)
    # quiet: nothing recorded for the status line
    quiet_log = io.StringIO()
    with StatusLines("x", interval=0.03, stream=quiet_log):
        with progress_steps(2, "x", enabled=False) as bar:
            bar.update("should not show")
            time.sleep(0.1)
    assert "should not show" not in quiet_log.getvalue() and bar.done == 1
