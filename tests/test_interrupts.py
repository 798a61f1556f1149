"""Stops: ``StopGuard`` (hold, unwind, deliver), Ctrl-C, SIGTERM and SIGHUP in commands
and in the estimators' training: nothing finished is lost, nothing half-written stays.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank, ReachabilityEstimator
from intrinsic_rank._interrupts import StopGuard, Stopped
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import make_attention_task, make_random_targets
from intrinsic_rank.estimators._cramming import CrammingNet
from intrinsic_rank.estimators._net import RankSweepNet

_INTERRUPTED_IMPORT = textwrap.dedent("""
    import os, signal, sys, tomllib
    entry = tomllib.load(open(sys.argv[1], "rb"))["project"]["scripts"]["intrinsic-rank"]
    module, function = entry.split(":")

    class InterruptTheImport:  # Ctrl-C while the command line's own modules are imported
        def find_spec(self, name, path=None, target=None):
            if name == "intrinsic_rank.cli._threads":
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, InterruptTheImport())
    sys.argv = ["intrinsic-rank", "sweep", "--help"]
    # what pip's console script does
    sys.exit(getattr(__import__(module, fromlist=[function]), function)())
""")


def _one_line(err):
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


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
        verdicts=lambda r: [],
        options=[Option("--slow-write", help="a file written slowly")],
        summary=lambda r: ["toy"], in_reproduce=False))
    status = main()
    if os.environ.get("SIGINT_AT_EXIT"):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the interpreter leaves
    sys.exit(status)
""")


X_TASK, Y_TASK = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                random_state=0)


QUICK_FIT = dict(attention="linear", max_epochs=4, random_state=0)


def _quiet_fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args)


def _interrupt_at_epoch(monkeypatch, net_class, epoch=3):
    original = net_class.on_epoch_end
    seen = []

    def on_epoch_end(self, net, **kwargs):
        original(self, net, **kwargs)
        seen.append(len(self.history))
        if len(self.history) == epoch:
            raise KeyboardInterrupt

    monkeypatch.setattr(net_class, "on_epoch_end", on_epoch_end)
    return seen


TARGETS = make_random_targets(4, 4, vocab_size=64, random_state=0)


CRAM = dict(max_epochs=20, n_radius_prompts=2, random_state=0)


_SAVE_UNDER_SIGTERM = textwrap.dedent("""
    import os, signal, sys, transformers
    from intrinsic_rank.nn import save_model_folder
    config = transformers.GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2,
                                     n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    real = type(model).save_pretrained

    def save_pretrained(self, folder, *args, **kwargs):
        real(self, folder, *args, **kwargs)  # half the folder is written
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))

    type(model).save_pretrained = save_pretrained
    save_model_folder(model, os.path.join(sys.argv[1], "tiny"))
    print("not reached")
""")


_REPRODUCE_UNDER_SIGTERM = textwrap.dedent("""
    import os, signal, sys, time
    from intrinsic_rank.experiments import Experiment, register, reproduce
    from intrinsic_rank.experiments.runner import atomic_file

    def run(settings, *, random_state, progress, device):
        with atomic_file(os.path.join(sys.argv[1], "slow.json")) as tmp:
            open(tmp, "w").write("half")
            os.kill(os.getpid(), signal.SIGTERM)  # as kill would, while the file is written
            time.sleep(30)
        return {"records": []}

    register(Experiment(
        name="term", command="term-cmd", title="t", paper="p", help="h", description="d",
        quick={}, full={}, run=run, tables=lambda r: [], plot=lambda r, f: [],
        verdicts=lambda r: [], summary=lambda r: [], in_reproduce=False))
    reproduce("term", out=os.path.join(sys.argv[1], "out"), progress=False)
    print("not reached")
""")


def test_sigint_while_the_console_script_imports_exits_130_quietly():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT,
                           os.path.join(root, "pyproject.toml")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "intrinsic-rank: interrupted"
    assert signal.SIGINT == 2


def test_the_guard_turns_a_swallowed_interrupt_into_keyboard_interrupt(swallowed_interrupt):
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with StopGuard() as guard:
            swallowed_interrupt()
    assert guard.received == [signal.SIGINT] and signal.getsignal(signal.SIGINT) is before
    with StopGuard() as guard:  # no interrupt: nothing happens
        pass
    assert guard.received == []
    # an error after a swallowed interrupt is the interrupt (skorch's KeyError: 'train_loss')
    with pytest.raises(KeyboardInterrupt) as info:
        with StopGuard():
            swallowed_interrupt()
            raise KeyError("train_loss")
    assert isinstance(info.value.__cause__, KeyError)


def test_an_interrupted_command_exits_130_and_writes_nothing(tmp_path, registered, capsys):
    calls = registered("stopped", interrupt=True)
    assert main(["stopped-run", "--out", str(tmp_path / "o"), "--quiet"]) == 130
    captured = capsys.readouterr()
    assert _one_line(captured.err) == "intrinsic-rank stopped-run: interrupted"
    assert captured.out == "" and len(calls) == 1
    assert not (tmp_path / "o").exists()


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


@pytest.mark.parametrize("sweep", [False, True])
def test_interrupt_reaches_the_caller_and_leaves_attention_unfitted(monkeypatch, sweep):
    est = AttentionRankEstimator(**{**QUICK_FIT, "max_epochs": 10},
                                 rank_grid=[1, 2] if sweep else None)
    _quiet_fit(est, X_TASK, Y_TASK)  # a previous, finished fit must not survive the interrupt
    seen = _interrupt_at_epoch(monkeypatch, RankSweepNet)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X_TASK, Y_TASK)
    assert seen == [1, 2, 3]  # stopped at epoch 3 of 10, not run to the end
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    for name in ("rank_", "sweep_", "net_", "history_", "n_features_in_"):
        assert not hasattr(est, name)


def test_interrupt_during_the_recovery_student(monkeypatch):
    _interrupt_at_epoch(monkeypatch, RankSweepNet)
    est = EnergyEffectiveRank(student=AttentionRankEstimator(**{**QUICK_FIT, "max_epochs": 10}))
    with pytest.raises(KeyboardInterrupt):
        est.fit(X_TASK, Y_TASK)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert not hasattr(est, "student_") and not hasattr(est, "energy_effective_rank_")


def test_interrupt_during_cramming(monkeypatch):
    seen = _interrupt_at_epoch(monkeypatch, CrammingNet)
    est = ReachabilityEstimator(**{**CRAM, "max_epochs": 50, "patience": 50})
    with pytest.raises(KeyboardInterrupt):
        est.fit(TARGETS)
    assert seen[-1] == 3
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert not hasattr(est, "accessibility_") and not hasattr(est, "width_")


def test_a_held_guard_records_drops_or_delivers():
    with StopGuard(held=True, deliver=False) as hold:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
    assert hold.received == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt):
        with StopGuard(held=True):
            os.kill(os.getpid(), signal.SIGINT)
            reached = True  # held: the block runs to its end, then the interrupt acts
    assert reached


def test_a_guard_switches_from_unwinding_to_holding_once():
    with pytest.raises(Stopped):
        with StopGuard(end_process=False):
            os.kill(os.getpid(), signal.SIGTERM)
    with StopGuard(deliver=False, end_process=False) as guard:
        guard.hold()  # the point of no return
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGHUP)
    assert guard.received == [signal.SIGTERM, signal.SIGHUP]
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL


def test_a_then_hold_guard_unwinds_once_and_lets_the_clean_up_finish():
    cleaned = []
    with pytest.raises(KeyboardInterrupt) as info:
        with StopGuard(then_hold=True) as guard:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                raise AssertionError("not reached: the first signal unwinds")
            finally:  # the clean-up a second Ctrl-C must not cut short
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
                cleaned.append(True)
    assert cleaned == [True] and guard.received == [signal.SIGINT, signal.SIGINT,
                                                    signal.SIGTERM]
    assert info.value.__context__ is None  # the first one, not one raised in the finally
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt):  # entered again, it unwinds again
        with guard:
            os.kill(os.getpid(), signal.SIGINT)


def test_an_inner_hold_delivers_to_the_outer_guard():
    with pytest.raises(Stopped) as info:
        with StopGuard(end_process=False) as outer:
            with StopGuard(held=True):
                os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("not reached: the held signal acts at the inner block's end")
    assert info.value.signum == signal.SIGTERM and outer.received == [signal.SIGTERM]


def test_an_ignored_signal_stays_ignored():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with StopGuard() as guard:
        os.kill(os.getpid(), signal.SIGTERM)
    with StopGuard(held=True) as hold:
        os.kill(os.getpid(), signal.SIGTERM)
    assert guard.received == hold.received == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


@pytest.mark.parametrize("signame", ["SIGTERM"])  # SIGHUP takes the same path
def test_save_model_folder_cleans_up_under_sigterm(tmp_path, signame):
    done = subprocess.run([sys.executable, "-c", _SAVE_UNDER_SIGTERM, str(tmp_path), signame],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == -getattr(signal, signame), done.stderr[-2000:]
    assert "not reached" not in done.stdout
    assert os.listdir(tmp_path) == []  # neither the folder nor a .tiny.partial-* one


def test_sigterm_in_a_run_from_python_cleans_up_then_ends_the_process_by_it(tmp_path):
    done = subprocess.run([sys.executable, "-c", _REPRODUCE_UNDER_SIGTERM, str(tmp_path)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    assert "not reached" not in done.stdout
    # the run unwound: its temporary file is gone, and nothing of it was cached
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not (tmp_path / "out" / "term" / "result.json").exists()


def test_an_unwinding_guard_leaves_other_handlers_alone():
    def mine(signum, frame):
        raise RuntimeError("mine")

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with pytest.raises(RuntimeError, match="mine"):
            with StopGuard():
                os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_run_without_stdout_saves_its_files_and_exits_0(tmp_path):
    out = tmp_path / "o"
    command = " ".join([sys.executable, "-c", shlex.quote(_SIGNALLED), "toy-run", "--out",
                        shlex.quote(str(out)), "--quiet", ">&-"])  # stdout closed
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=ENV,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert json.loads((out / "toy_run.json").read_text())["records"]
