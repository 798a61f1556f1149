"""The command line under faults: interrupts, closed pipes, missing matplotlib, bad arguments.

Most tests drive ``main`` in-process with a toy experiment registered here (no training);
the interrupt of a real ``reproduce ladder --quick`` and the closed pipe run in a subprocess.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap

import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS, Experiment, Option, register, reproduce
from intrinsic_rank._interrupts import StopGuard

ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


def _one_line(err):
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


# -- a toy experiment, registered here only ---------------------------------------------


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
        settings=lambda args: dict(size=args.size), summary=lambda result: [f"{name}:"],
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


# -- interrupts ---------------------------------------------------------------------------


def test_the_guard_turns_a_swallowed_interrupt_into_keyboard_interrupt():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with StopGuard() as guard:
            _swallowed_interrupt()
    assert guard.received == [signal.SIGINT] and signal.getsignal(signal.SIGINT) is before
    with StopGuard() as guard:  # no interrupt: nothing happens
        pass
    assert guard.received == []
    # an error after a swallowed interrupt is the interrupt (skorch's KeyError: 'train_loss')
    with pytest.raises(KeyboardInterrupt) as info:
        with StopGuard():
            _swallowed_interrupt()
            raise KeyError("train_loss")
    assert isinstance(info.value.__cause__, KeyError)


def test_an_interrupted_command_exits_130_and_writes_nothing(tmp_path, registered, capsys):
    calls = registered("stopped", interrupt=True)
    assert main(["stopped-run", "--out", str(tmp_path / "o"), "--quiet"]) == 130
    captured = capsys.readouterr()
    assert _one_line(captured.err) == "intrinsic-rank stopped-run: interrupted"
    assert captured.out == "" and len(calls) == 1
    assert not (tmp_path / "o").exists()


def test_reproduce_never_caches_an_interrupted_piece(tmp_path, registered, capsys):
    registered("early")
    registered("stopped", interrupt=True)
    assert main(["reproduce", "early", "stopped", "--out", str(tmp_path), "--quiet"]) == 130
    assert _one_line(capsys.readouterr().err) == "intrinsic-rank reproduce: interrupted"
    assert (tmp_path / "early" / "result.json").is_file()  # finished before: kept
    assert not (tmp_path / "stopped" / "result.json").exists()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert list(manifest["pieces"]) == ["early"] and manifest["last_run"]["interrupted"]
    # the Python API raises the interrupt the same way
    with pytest.raises(KeyboardInterrupt):
        reproduce(["early", "stopped"], out=tmp_path, progress=False)
    assert not (tmp_path / "stopped" / "result.json").exists()


def _start_reproduce_ladder(out):
    process = subprocess.Popen(
        [sys.executable, "-m", "intrinsic_rank.cli", "reproduce", "ladder", "--quick",
         "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=ENV)
    first = process.stdout.readline()  # printed when the piece starts computing
    return process, first


def _interrupt(process, after=1.0):
    import time

    time.sleep(after)  # inside the training loop by now
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def test_a_real_sigint_during_reproduce_exits_130_and_caches_nothing(tmp_path):
    out = tmp_path / "run"
    process, first = _start_reproduce_ladder(out)
    assert first == "[1/1] ladder (quick): computing (no cache) ...\n"
    status, rest, err = _interrupt(process)
    assert status == 130, err
    assert _one_line(err) == "intrinsic-rank reproduce: interrupted"
    assert "done in" not in rest
    assert not (out / "ladder" / "result.json").exists()
    manifest = json.loads((out / "manifest.json").read_text())  # valid, says what happened
    assert manifest["pieces"] == {} and manifest["last_run"]["interrupted"] is True
    # the next run recomputes the piece instead of reading an interrupted result
    process, first = _start_reproduce_ladder(out)
    assert first == "[1/1] ladder (quick): computing (no cache) ...\n"
    status, _, err = _interrupt(process, after=0.5)
    assert status == 130 and not (out / "ladder" / "result.json").exists(), err


# -- results first: closed pipes, matplotlib, plotting errors -----------------------------


_PROGRAM = textwrap.dedent("""
    import os, sys
    from intrinsic_rank.cli import main
    from intrinsic_rank.experiments import Experiment, register

    def run(settings, *, random_state, progress, device):
        return dict(records=[dict(size=i, value=0.5 * i) for i in range(1, 20001)])

    def plot(result, folder):
        open(os.path.join(folder, "long.png"), "wb").write(b"png")
        return ["long.png"]

    register(Experiment(
        name="long", command="long-run", title="t", paper="p", help="h", description="d",
        quick={}, full={}, run=run, plot=plot,
        tables=lambda r: [("rows", r["records"], ["size", "value"])],
        verdicts=lambda r: [], settings=lambda a: {},
        summary=lambda r: ["a long table"], in_reproduce=False))
    sys.exit(main())
""")


def test_a_closed_pipe_exits_quietly_and_keeps_every_file(tmp_path):
    out = tmp_path / "o"
    process = subprocess.Popen(
        [sys.executable, "-c", _PROGRAM, "long-run", "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert process.stdout.readline() == b"a long table\n"  # then the reader leaves: | head -1
    process.stdout.close()
    err = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 141
    assert err == ""  # no traceback, no "Exception ignored"
    assert len(json.loads((out / "long_run.json").read_text())["records"]) == 20000
    assert (out / "long.png").read_bytes() == b"png"


def test_a_missing_matplotlib_keeps_the_json_and_says_so_in_one_line(tmp_path, registered,
                                                                     capsys, monkeypatch):
    from intrinsic_rank.experiments.runner import pyplot

    def plot(result, folder):
        pyplot()  # raises ImportError below
        return []

    registered("drawn", plot=plot)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    assert main(["drawn-run", "--out", str(tmp_path), "--quiet"]) == 1
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("intrinsic-rank drawn-run: error: plotting needs matplotlib")
    assert err.endswith(f"the results are saved in {tmp_path / 'drawn_run.json'}")
    assert len(json.loads((tmp_path / "drawn_run.json").read_text())["records"]) == 2


def test_a_plotting_error_of_the_program_is_one_line(tmp_path, registered, capsys,
                                                     monkeypatch):
    def plot(result, folder):
        raise RuntimeError("the plot broke")

    registered("broken", plot=plot)
    monkeypatch.setattr(sys, "argv", ["intrinsic-rank", "broken-run", "--out", str(tmp_path),
                                      "--quiet"])
    assert main() == 1  # as the program: one line; main([...]) from Python raises instead
    err = _one_line(capsys.readouterr().err)
    assert err == ("intrinsic-rank broken-run: error: printing or plotting failed "
                   "(RuntimeError: the plot broke); the results are saved in "
                   f"{tmp_path / 'broken_run.json'}")
    assert (tmp_path / "broken_run.json").is_file()


def test_the_json_is_saved_before_printing(tmp_path, registered, capsys, monkeypatch):
    # the results are staged before anything is printed: a print that fails still
    # leaves the run's JSON in place (renamed in with the run's other files)
    registered("printed")

    def failing(*args, **kwargs):
        raise RuntimeError("the terminal went away")

    monkeypatch.setattr("builtins.print", failing)
    with pytest.raises(RuntimeError, match="the terminal went away"):
        main(["printed-run", "--out", str(tmp_path), "--quiet"])
    monkeypatch.undo()
    assert (tmp_path / "printed_run.json").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".") and
                p.name.endswith(".tmp")]


# -- arguments are checked before any work -------------------------------------------------


def _at_most_ten(settings):
    if settings["size"] > 10:
        raise ValueError(f"size must be <= 10; got {settings['size']}")


@pytest.fixture
def checked(registered):
    return registered("counted", check=_at_most_ten)


def _bad(argv, capsys):
    status = main(argv)
    return status, _one_line(capsys.readouterr().err)


def test_a_bad_out_is_refused_before_any_work(tmp_path, checked, capsys, monkeypatch):
    file = tmp_path / "file.txt"
    file.write_text("x")
    for out, message in [
        ("", "argument --out: must be a folder path; got an empty string"),
        (str(file), f"argument --out: {str(file)!r} is not a folder"),
        (str(file / "sub"), f"argument --out: {str(file / 'sub')!r} is not a folder ({file} "
         "is a file)"),
    ]:
        for command in ("counted-run", "reproduce"):
            status, err = _bad([command, "--out", out], capsys)
            assert status == 2 and err == f"intrinsic-rank {command}: error: {message}"
    def refused(*args, **kwargs):  # a folder where no file can be created
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refused)
    status, err = _bad(["counted-run", "--out", str(tmp_path / "new")], capsys)
    assert status == 2 and "argument --out:" in err and "is not writable" in err
    monkeypatch.undo()
    assert checked == [] and file.read_text() == "x"


@pytest.mark.parametrize("seed, message", [
    ("-1", "must be an integer in [0, 4294967295]; got -1"),
    ("4294967296", "must be an integer in [0, 4294967295]; got 4294967296"),
    ("1.5", "must be an integer; got '1.5'"),
])
def test_an_out_of_range_seed_is_refused(tmp_path, checked, capsys, seed, message):
    for command in ("counted-run", "reproduce"):
        status, err = _bad([command, "--seed", seed, "--out", str(tmp_path)], capsys)
        assert status == 2 and err == f"intrinsic-rank {command}: error: argument --seed: " \
            f"{message}"
    assert checked == [] and not os.listdir(tmp_path)


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--rank-grid", "1-1000000000"],
     "argument --rank-grid: the grid '1-1000000000' has 1000000000 entries; at most 4096 are "
     "allowed"),
    (["sweep", "--rank-grid", "8-2"], "argument --rank-grid: the range 8-2 in '8-2' ends below its "
     "start; write 2-8"),
    (["sweep", "--rank-grid", "1,,x"], "argument --rank-grid: cannot read rank grid '1,,x'"),
    (["frontier", "--r-star", "1-5000"], "argument --r-star: the grid '1-5000' has 5000 "
     "entries"),
    (["reach", "--lengths", "2-1000000000"], "argument --lengths: the grid '2-1000000000' has "
     "999999999 entries"),
    (["reach", "--n-memory", "4-1"], "argument --n-memory: the range 4-1"),
    (["min-ip", "--rank-grid", "0-99999"], "argument --rank-grid: the grid '0-99999' has 100000"),
    (["ladder", "--device", "nonsense"], "unknown device 'nonsense'"),
    (["sweep", "--epochs", "many"], "argument --epochs: must be an integer in [1, 1000000]; got 'many'"),
    ([], "the following arguments are required: command"),
])
def test_bad_arguments_are_one_line_naming_them_before_any_work(tmp_path, capsys, argv,
                                                                message):
    status, err = _bad(argv + ["--out", str(tmp_path), "--quiet"] if argv else argv, capsys)
    assert status == 2 and message in err, err
    assert err.startswith("intrinsic-rank")
    assert not os.listdir(tmp_path)


def test_an_experiments_own_check_runs_before_any_work(tmp_path, checked, capsys):
    status, err = _bad(["counted-run", "--size", "11", "--out", str(tmp_path)], capsys)
    assert status == 2 and err == "intrinsic-rank counted-run: error: size must be <= 10; got 11"
    assert checked == [] and not os.listdir(tmp_path)
    assert main(["counted-run", "--size", "3", "--out", str(tmp_path), "--quiet"]) == 0
    assert checked == [{"size": 3}]


def test_grid_types_check_before_expanding():
    import argparse

    from intrinsic_rank.experiments.runner._arguments import (
        MAX_GRID_SIZE,
        bounded_int,
        parse_lengths,
        parse_ranks,
    )

    assert parse_ranks("1-3,8") == [1, 2, 3, 8] and parse_ranks("0") == [0]
    assert len(parse_ranks(f"1-{MAX_GRID_SIZE}")) == MAX_GRID_SIZE
    for text, message in [(f"1-{MAX_GRID_SIZE + 1}", "at most 4096"),
                          ("1-4,2-4096", "4099 entries"), ("9-3", "ends below its start"),
                          ("1-2-3", "cannot read"), ("-3", "cannot read"), (",", "empty")]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse_ranks(text)
    assert parse_lengths("auto") == "auto" and parse_lengths("2,4") == [2, 4]
    with pytest.raises(argparse.ArgumentTypeError, match="integers >= 1"):
        parse_lengths("0-3")
    assert bounded_int(1, 10)("10") == 10
    with pytest.raises(argparse.ArgumentTypeError, match=r"in \[1, 10\]; got 11"):
        bounded_int(1, 10)("11")
    with pytest.raises(argparse.ArgumentTypeError, match="got 'x'"):
        bounded_int(minimum=0)("x")


# -- signals at any moment: start-up, a write, the exit; no stdout ------------------------


_SIGNALLED = textwrap.dedent("""
    import os, signal, sys, time
    from intrinsic_rank.cli import main
    from intrinsic_rank.experiments import Experiment, Option, register
    from intrinsic_rank.experiments.runner import atomic_file

    def run(settings, *, random_state, progress, device):
        sys.stdout.flush()  # as skorch's progress table does
        if settings["slow_write"]:
            with atomic_file(settings["slow_write"]) as tmp:
                open(tmp, "w").write("half")
                print("writing", flush=True)
                time.sleep(60)
        return dict(records=[dict(size=1, value=0.5)])

    def plot(result, folder):
        return []

    register(Experiment(
        name="toy", command="toy-run", title="t", paper="p", help="h", description="d",
        quick={}, full={}, run=run, plot=plot,
        tables=lambda r: [("rows", r["records"], ["size", "value"])],
        verdicts=lambda r: [], settings=lambda a: dict(slow_write=a.slow_write),
        options=[Option("--slow-write", help="a file written slowly")],
        summary=lambda r: ["toy"], in_reproduce=False))
    status = main()
    if os.environ.get("SIGINT_AT_EXIT"):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the interpreter leaves
    sys.exit(status)
""")


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_during_a_write_leave_no_temporary_file(tmp_path, signum, status):
    target = tmp_path / "w" / "slow.json"
    process = subprocess.Popen(
        [sys.executable, "-c", _SIGNALLED, "toy-run", "--out", str(tmp_path / "o"), "--quiet",
         "--slow-write", str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=ENV)
    assert process.stdout.readline() == "writing\n"  # the temporary file exists now
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".slow.json.")]
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == status, err
    name = signal.Signals(signum).name
    assert _one_line(err) == f"intrinsic-rank toy-run: stopped by {name}"
    assert sorted(p.name for p in target.parent.iterdir()) == []  # no slow.json, .slow.json.*


def test_ctrl_c_during_the_start_up_imports_is_one_line_and_130(tmp_path):
    # Ctrl-C arrives while main imports the experiments (torch): deterministic, through
    # an import hook that interrupts when torch is asked for.
    program = textwrap.dedent("""
        import os, signal, sys
        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    os.kill(os.getpid(), signal.SIGINT)
                return None
        from intrinsic_rank.cli import main
        sys.meta_path.insert(0, Interrupt())
        sys.exit(main())
    """)
    done = subprocess.run([sys.executable, "-c", program, "ladder", "--out",
                           str(tmp_path / "o"), "--quiet"], capture_output=True, text=True,
                          env=ENV, timeout=300)
    assert done.returncode == 130, done.stderr
    assert _one_line(done.stderr) == "intrinsic-rank ladder: interrupted"


def test_ctrl_c_as_a_finished_run_exits_keeps_its_status(tmp_path):
    out = tmp_path / "o"
    done = subprocess.run([sys.executable, "-c", _SIGNALLED, "toy-run", "--out", str(out),
                           "--quiet"], capture_output=True, text=True,
                          env=dict(ENV, SIGINT_AT_EXIT="1"), timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and (out / "toy_run.json").is_file()


def test_a_run_without_stdout_saves_its_files_and_exits_0(tmp_path):
    out = tmp_path / "o"
    command = " ".join([sys.executable, "-c", shlex.quote(_SIGNALLED), "toy-run", "--out",
                        shlex.quote(str(out)), "--quiet", ">&-"])  # stdout closed
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=ENV,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert json.loads((out / "toy_run.json").read_text())["records"]
