import os
import signal

import pytest
import torch


def pytest_configure(config):
    """Let Ctrl-C and SIGHUP reach the run as in a terminal, whoever started it.

    A process started in the background by a non-interactive shell (``cmd &`` in
    a script, ``nohup``) inherits SIGINT as ignored, and Python then installs no
    handler: the interrupt tests (and the subprocesses they signal, which
    inherit the ignored signal) would see no ``KeyboardInterrupt``. Python's own
    handler is put back in that case only.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # ``nohup`` ignores SIGHUP for the run and every process it starts: the tests that send
    # SIGHUP to a command in a subprocess expect its default action, as in a terminal
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _test_threads():
    """Torch threads: INTRINSIC_RANK_TEST_THREADS, else OMP_NUM_THREADS, else 1 per xdist
    worker (the default run), else 2.

    CI has 2 idle cores; a fixed count keeps timings and results stable. On a machine
    shared with other work, ``OMP_NUM_THREADS=1`` (honoured here, as torch itself honours
    it) keeps two threads per process from oversubscribing the cores.
    """
    for name in ("INTRINSIC_RANK_TEST_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            return int(value)
    # a worker of pytest-xdist (the default run has two, one per core): one thread each
    return 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2


@pytest.fixture(autouse=True, scope="session")
def _torch_threads():
    torch.set_num_threads(_test_threads())


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _default_stop_handlers():
    """Each test starts from Python's own stop handlers, whatever an earlier test left
    behind (a command run as the program keeps dropping stop signals after its run)."""
    previous = {s: signal.getsignal(s) for s in _STOPS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)
