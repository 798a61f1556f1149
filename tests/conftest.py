import os
import signal

import pytest
import torch

from intrinsic_rank.experiments import EXPERIMENTS, Experiment, Option, register
from intrinsic_rank.experiments.runner import write_csv
from intrinsic_rank.experiments.runner._output import write_text


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


# -- toy experiments: commands that train nothing, registered for one test --------------


def _swallowed_interrupt():
    """Ctrl-C that a library catches and carries on after (as skorch's partial_fit does)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
    except KeyboardInterrupt:
        pass


def _toy(name, calls, *, interrupt=False, plot=None, check=None, rows=None):
    def run(settings, *, random_state, progress, device):
        calls.append(settings)
        if interrupt:
            _swallowed_interrupt()
        n = rows or settings["size"]
        return dict(records=[dict(size=i, value=0.5 * i) for i in range(1, n + 1)])

    def default_plot(result, folder):
        with open(os.path.join(folder, f"{name}.png"), "wb") as handle:
            handle.write(b"png")
        return [f"{name}.png"]

    return Experiment(
        name=name, command=f"{name}-run", title=name, paper="none", help="a toy",
        description="Counts to --size.", quick=dict(size=2), full=dict(size=3), run=run,
        tables=lambda result: [("rows", result["records"], ["size", "value"])],
        plot=plot or default_plot,
        verdicts=lambda result: [("it counts", "rows", "agrees", "it does")],
        options=[Option("--size", type=int, default=2, help="how far to count")],
        summary=lambda result: [f"{name}:"],
        in_reproduce=False, check=check,
    )


@pytest.fixture
def registered():
    """``add(name, **options)`` registers a toy; all are unregistered afterwards."""
    names = []

    def add(name, **options):
        calls = []
        register(_toy(name, calls, **options))
        names.append(name)
        return calls

    yield add
    for name in names:
        EXPERIMENTS.pop(name)


def _command_toy(calls):
    """A command writing NAME.json, NAME.csv, NAME.png and NAME_detail.png (NAME: toy_out)."""
    def run(settings, *, random_state, progress, device):
        calls.append(random_state)
        return dict(records=[dict(seed=random_state)])

    def csv(result, folder):
        write_csv(os.path.join(folder, "toy_out.csv"), result["records"])
        return ["toy_out.csv"]

    def plot(result, folder):
        for name in ("toy_out.png", "toy_out_detail.png"):
            write_text(os.path.join(folder, name), "png")
        return ["toy_out.png", "toy_out_detail.png"]

    return Experiment(
        name="toy-out", command="toy-out", title="t", paper="none", help="h",
        description="d", quick={}, full={}, run=run, tables=lambda result: [], plot=plot,
        verdicts=lambda result: [("c", "m", "agrees", "e")],
        summary=lambda result: [], extra_files=csv, in_reproduce=False)


@pytest.fixture
def command_toy():
    """The registered ``toy-out`` command and the seeds its runs were given."""
    calls = []
    experiment = register(_command_toy(calls))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


@pytest.fixture
def swallowed_interrupt():
    """The function that sends this process a Ctrl-C and swallows it."""
    return _swallowed_interrupt
