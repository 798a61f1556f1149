"""``reproduce``: the cache, the report, the verdict functions and the command."""

import copy
import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import (
    EXPERIMENTS,
    VERDICTS,
    Experiment,
    Option,
    Verdict,
    register,
    reproduce,
    write_report,
)
from intrinsic_rank.experiments.runner import lock_folder
from intrinsic_rank.experiments.runner._reproduce import _resolve_pieces

# Tiny settings: a couple of seconds per piece on one thread.
TINY = {
    "ladder": dict(n_samples=200, n_test=100, seq_len=4, d=4, r_star=2, noise=0.1,
                   rungs=["fixed", "linear"], max_epochs=20),
    "copy": dict(train_lengths=[2, 4], eval_lengths=[2, 3, 4, 5, 8], d_model=16,
                 n_steps=30, batch_size=16, lr=3e-3, n_eval=8),
}


@pytest.fixture
def tiny_pieces(monkeypatch):
    """Swap in tiny settings for ``ladder`` and ``copy`` and count their runs."""
    calls = {name: 0 for name in TINY}
    for name, settings in TINY.items():
        piece = EXPERIMENTS[name]

        def counted(settings, *, random_state, progress, device, _run=piece.run, _name=name):
            calls[_name] += 1
            return _run(settings, random_state=random_state, progress=progress, device=device)

        monkeypatch.setitem(EXPERIMENTS, name, dataclasses.replace(
            piece, quick=settings, full=dict(settings, n_eval=4) if name == "copy"
            else dict(settings, max_epochs=10), run=counted))
    return calls


def by(verdicts):
    return [v.verdict for v in verdicts]


# -- the cache ---------------------------------------------------------------------


def test_first_run_computes_then_the_cache_is_reused(tmp_path, tiny_pieces):
    first = reproduce(["copy", "ladder"], out=tmp_path, progress=False)
    assert tiny_pieces == {"ladder": 1, "copy": 1}
    assert list(first.pieces) == ["ladder", "copy"]  # report order, not call order
    assert not any(p.cached for p in first.pieces.values())

    second = reproduce(["ladder", "copy"], out=tmp_path, progress=False)
    assert tiny_pieces == {"ladder": 1, "copy": 1}
    assert all(p.cached for p in second.pieces.values())
    for name in ("ladder", "copy"):
        # compared as JSON text: NaN (an unfitted cliff) is not equal to itself
        assert json.dumps(second.pieces[name].result) == json.dumps(first.pieces[name].result)
        assert second.verdicts[name] == first.verdicts[name]
        assert second.pieces[name].seconds == first.pieces[name].seconds


def test_force_and_changed_settings_recompute(tmp_path, tiny_pieces, monkeypatch):
    reproduce("ladder", out=tmp_path, progress=False)
    reproduce("ladder", out=tmp_path, progress=False, force=True)
    assert tiny_pieces["ladder"] == 2
    reproduce("ladder", out=tmp_path, progress=False, random_state=1)  # another seed
    assert tiny_pieces["ladder"] == 3
    reproduce("ladder", out=tmp_path, progress=False, quick=False)  # another scale
    assert tiny_pieces["ladder"] == 4
    saved = json.loads((tmp_path / "ladder" / "result.json").read_text())
    assert saved["key"]["mode"] == "full" and saved["key"]["settings"]["max_epochs"] == 10
    reproduce("ladder", out=tmp_path, progress=False, quick=False)
    assert tiny_pieces["ladder"] == 4  # the full result is cached now
    # an edited setting is a different key too
    edited = dataclasses.replace(EXPERIMENTS["ladder"], full=dict(TINY["ladder"], max_epochs=11))
    monkeypatch.setitem(EXPERIMENTS, "ladder", edited)
    run = reproduce("ladder", out=tmp_path, progress=False, quick=False)
    assert tiny_pieces["ladder"] == 5 and not run.pieces["ladder"].cached
    assert run.pieces["ladder"].result["config"]["max_epochs"] == 11


def test_a_change_to_the_code_recomputes(tmp_path, tiny_pieces, monkeypatch):
    """The key holds a digest of the package's files: a temporary copy is edited."""
    import shutil

    from intrinsic_rank.experiments.runner import _reproduce

    copy_root = tmp_path / "package"
    shutil.copytree(_reproduce._CODE_ROOT, copy_root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_reproduce, "_CODE_ROOT", str(copy_root))
    out = tmp_path / "out"
    reproduce("ladder", out=out, progress=False)
    reproduce("ladder", out=out, progress=False)
    assert tiny_pieces["ladder"] == 1  # same code: cached
    source = copy_root / "experiments" / "entropic" / "_ladder.py"
    source.write_text(source.read_text() + "\n# an edit\n")
    run = reproduce("ladder", out=out, progress=False)
    assert tiny_pieces["ladder"] == 2 and not run.pieces["ladder"].cached
    saved = json.loads((out / "ladder" / "result.json").read_text())
    assert saved["key"]["code"] == _reproduce.code_digest(copy_root)
    # the command line's own files do not enter: parsing does not change a result
    cli = copy_root / "cli" / "__init__.py"
    cli.write_text(cli.read_text() + "\n# an edit\n")
    assert reproduce("ladder", out=out, progress=False).pieces["ladder"].cached
    assert tiny_pieces["ladder"] == 2
    # a data file (the embedded model's weights) does
    weights = copy_root / "data" / "default_lm.pt"
    weights.write_bytes(weights.read_bytes() + b"\0")
    assert not reproduce("ladder", out=out, progress=False).pieces["ladder"].cached


def test_a_deleted_plot_is_redrawn_and_a_broken_result_recomputed(tmp_path, tiny_pieces):
    reproduce("ladder", out=tmp_path, progress=False)
    png = tmp_path / "ladder" / "ladder.png"
    png.unlink()
    run = reproduce("ladder", out=tmp_path, progress=False)
    assert run.pieces["ladder"].cached and tiny_pieces["ladder"] == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "ladder" / "result.json").write_text('{"key": {"piece": "lad')  # truncated
    run = reproduce("ladder", out=tmp_path, progress=False)
    assert not run.pieces["ladder"].cached and tiny_pieces["ladder"] == 2


def test_report_holds_claims_verdicts_tables_and_existing_images(tmp_path, tiny_pieces):
    run = reproduce(["ladder", "copy"], out=tmp_path, progress=False, command="CMD here")
    text = open(run.report).read()
    assert run.report == os.path.join(str(tmp_path), "report.md")
    assert "`CMD here`" in text and "torch" in text and "thread(s)" in text
    assert "## ladder:" in text and "## copy:" in text
    assert "| the paper's claim | our measurement | verdict | why |" in text
    for name in ("ladder", "copy"):
        for v in run.verdicts[name]:
            assert v.verdict in VERDICTS
            # the claim appears, escaped for Markdown, with its verdict in bold
            row = next(line for line in text.splitlines()
                       if line.startswith("| " + v.claim.replace("*", "\\*")))
            assert f"**{v.verdict}**" in row
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(links) == ["copy/copy.png", "ladder/ladder.png"]
    assert all((tmp_path / link).is_file() for link in links)
    assert "| rung | rank | train\\_risk |" in text  # the ladder's Markdown table
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["pieces"]) == {"ladder", "copy"}
    assert manifest["pieces"]["ladder"]["settings"] == TINY["ladder"]
    assert manifest["last_run"]["command"] == "CMD here"
    counts = manifest["pieces"]["copy"]["verdicts"]
    assert sum(counts.values()) == len(run.verdicts["copy"])


def test_write_report_on_given_pieces(tmp_path):
    from sklearn.utils import Bunch

    result = {"records": [{"rung": "B0 fixed operator", "attention": "fixed", "rank": 4,
                           "train_risk": 0.01, "test_risk": 0.0101, "excess_risk": 1e-4,
                           "excess_to_floor_ratio": 0.01}],
              "noise_floor": 0.01, "reach_tol": 0.02, "config": {}}
    piece = Bunch(name="ladder", title="t", paper="p", settings={"a": 1}, result=result,
                  verdicts=EXPERIMENTS["ladder"].verdicts(result), seconds=1.5, cached=True,
                  finished="now", files=[])
    path = write_report(tmp_path, [piece], command="cmd", seconds=0.1)
    text = open(path).read()
    assert "| [ladder](#ladder) | p | 1.5 | yes | 1 | 0 | 0 | 0 |" in text
    assert "B0 excess risk 0.0001 = 0.01x the noise floor" in text


def test_a_piece_that_judges_nothing_says_why_instead_of_an_empty_table(tmp_path):
    from sklearn.utils import Bunch

    missing = Bunch(name="head-ranks", title="t", paper="p", settings={}, cached=False,
                    result={"missing": "no model file at /nowhere", "config": {}},
                    verdicts=EXPERIMENTS["head-ranks"].verdicts(
                        {"missing": "no model file at /nowhere", "config": {}}),
                    seconds=0.1, finished="now", files=[])
    unjudged = Bunch(**{**missing, "name": "ladder", "verdicts": [],
                        "result": {"records": [], "noise_floor": 0.01, "reach_tol": 0.02,
                                   "config": {}}})
    text = open(write_report(tmp_path, [missing, unjudged], command="cmd",
                             seconds=0.2)).read()
    assert "No claim is judged at these settings: no model file at /nowhere." in text
    assert "No claim is judged at these settings: they measure without a rule" in text
    assert "| the paper's claim |" not in text  # no header over an empty table


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"unknown piece\(s\) \['nope'\]"):
        reproduce("nope", progress=False)
    with pytest.raises(ValueError, match="no piece given"):
        reproduce([], progress=False)
    with pytest.raises(ValueError, match="random_state must be an integer"):
        reproduce("ladder", random_state=0.5, progress=False)


def test_cli_errors_exit_2(tmp_path, capsys):
    assert main(["reproduce", "sweep", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown piece(s) ['nope']" in capsys.readouterr().err
    assert main(["reproduce", "ladder", "--quick", "--full", "--out", str(tmp_path)]) == 2
    assert "give --quick or --full, not both" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()


def test_cli_prints_the_summary_table(tmp_path, tiny_pieces, capsys):
    assert main(["reproduce", "ladder", "--out", str(tmp_path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "piece   seconds  cached  agrees  partly  does_not_agree  not_comparable" in text
    assert re.search(r"ladder\s+\d+\.\d\s+no\s+\d\s+\d\s+\d", text)
    assert main(["reproduce", "ladder", "--out", str(tmp_path), "--quiet"]) == 0
    assert re.search(r"ladder\s+\d+\.\d\s+yes", capsys.readouterr().out)
    assert tiny_pieces["ladder"] == 1
    report = (tmp_path / "report.md").read_text()
    assert "intrinsic-rank reproduce ladder --quick --out " in report


# -- the manifest's record of the last run -----------------------------------------

_STOPPER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from intrinsic_rank.cli import main
    from intrinsic_rank.experiments import Experiment, register

    def make(name, stop):
        def run(settings, *, random_state, progress, device):
            if stop and os.environ.get("TOY_STOP"):
                os.kill(os.getpid(), getattr(signal, os.environ["TOY_STOP"]))
            return dict(records=[dict(seed=random_state)])

        def plot(result, folder):
            Path(folder, f"{name}.png").write_bytes(b"png")
            return [f"{name}.png"]

        register(Experiment(
            name=name, command=name, title=name, paper="none", help="h", description="d",
            quick={}, full={}, run=run, tables=lambda result: [], plot=plot,
            verdicts=lambda result: [("c", "m", "agrees", "e")],
            summary=lambda result: [], in_reproduce=False))

    make("toy-first", False)
    make("toy-second", True)
    sys.exit(main(sys.argv[1:]))
""")


def _reproduce_toys(out, *pieces, stop=None, seed=0):
    env = dict(os.environ, TOY_STOP=stop or "")
    return subprocess.run([sys.executable, "-c", _STOPPER, "reproduce", *pieces, "--out",
                           str(out), "--seed", str(seed), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_stopped_run_never_leaves_the_record_of_another_run(tmp_path, stop):
    """A run stopped in any way (SIGTERM unwinds, SIGKILL does not) leaves a manifest whose
    last_run is its own, marked interrupted, beside the pieces it cached: never the
    record of the previous, finished run."""
    first = _reproduce_toys(tmp_path, "toy-first")
    assert first.returncode == 0, first.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["last_run"]["pieces"] == ["toy-first"]
    assert "interrupted" not in manifest["last_run"]
    stopped = _reproduce_toys(tmp_path, "toy-first", "toy-second", stop=stop, seed=7)
    assert stopped.returncode == {"SIGTERM": 143, "SIGKILL": -9}[stop], stopped.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    last = manifest["last_run"]
    assert last["interrupted"] is True and last["random_state"] == 7
    assert last["pieces"] == ["toy-first", "toy-second"]
    assert "--seed 7" in last["command"]
    # the newly cached piece is listed, the stopped one is not
    assert manifest["pieces"]["toy-first"]["random_state"] == 7
    assert "toy-second" not in manifest["pieces"]
    assert not (tmp_path / "toy-second" / "result.json").exists()


def test_a_failed_piece_leaves_its_run_recorded_as_interrupted(tmp_path, tiny_pieces,
                                                               monkeypatch):
    reproduce("ladder", out=tmp_path, progress=False)
    piece = EXPERIMENTS["ladder"]

    def fails(settings, **kwargs):
        raise RuntimeError("the piece broke")

    monkeypatch.setitem(EXPERIMENTS, "ladder", dataclasses.replace(piece, run=fails))
    with pytest.raises(RuntimeError, match="the piece broke"):
        reproduce("ladder", out=tmp_path, progress=False, force=True, command="second")
    last = json.loads((tmp_path / "manifest.json").read_text())["last_run"]
    assert last["command"] == "second" and last["interrupted"] is True


# -- verdict functions: each one on synthetic results is in tests/experiments/test_verdicts.py -----


def test_every_verdict_is_a_verdict_of_strings():
    result = dict(records=[dict(length=n, in_training_range=n <= 4, exact_match=e)
                           for n, e in ((2, 1.0), (4, 1.0), (5, 0.0), (8, 0.0))],
                  cliff=dict(midpoint=4.5, scale=0.05, bracketed=True, sharpness=0.01,
                             last_high_length=4.0, first_low_length=5.0),
                  config=dict(train_lengths=[2, 4]))
    v = EXPERIMENTS["copy"].verdicts(result)[0]
    assert isinstance(v, Verdict) and all(isinstance(x, str) for x in v)
    assert [x.verdict for x in EXPERIMENTS["copy"].verdicts(result)] == ["agrees", "agrees"]


def test_quick_and_full_settings_differ_and_are_json():
    for name, piece in EXPERIMENTS.items():
        assert piece.quick != piece.full, name
        assert json.loads(json.dumps(piece.full)) == piece.full
        assert json.loads(json.dumps(piece.quick)) == piece.quick


@pytest.mark.slow
def test_reproduce_all_quick_end_to_end(tmp_path):
    run = reproduce("all", quick=True, out=tmp_path, progress=False)
    assert list(run.pieces) == list(EXPERIMENTS)
    text = open(run.report).read()
    for name, piece in run.pieces.items():
        # head-ranks' quick run maps ten heads: too few to impose, nothing planted
        assert bool(piece.verdicts) == (name != "head-ranks"), name
        assert all((tmp_path / name / f).is_file() for f in piece.files)
        assert f"## {name}:" in text
    assert text.count("No claim is judged at these settings") == 1  # or: its model missing
    # the claims the quick settings reproduce (see docs/reproduce.md)
    assert set(by(run.verdicts["sweep"])) == {"agrees"}
    assert set(by(run.verdicts["ladder"])) == {"agrees"}
    assert by(run.verdicts["copy"]) == ["agrees", "agrees"]
    again = reproduce("all", quick=True, out=tmp_path, progress=False)
    assert all(p.cached for p in again.pieces.values())
    assert copy.deepcopy(again.verdicts) == run.verdicts


def _one_line(err):
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


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


def _toy_experiment(name, calls, value=0.5, extra=None):
    def run(settings, *, random_state, progress, device):
        calls.append(name)
        records = [dict(size=i, value=value * i) for i in range(1, settings["size"] + 1)]
        return dict(records=records, **(extra or {}))

    def plot(result, folder):
        with open(os.path.join(folder, f"{name}.png"), "wb") as handle:
            handle.write(b"png of " + str(len(result["records"])).encode())
        return [f"{name}.png"]

    return Experiment(
        name=name, command=f"{name}-cmd", title=f"The {name}", paper="none", help="a toy",
        description="Counts to --size.", quick=dict(size=2), full=dict(size=3), run=run,
        tables=lambda result: [("rows", result["records"], ["size", "value"])],
        plot=plot,
        verdicts=lambda result: [("it counts", f"{len(result['records'])} rows",
                                  "agrees" if result["records"][-1]["value"] > 0
                                  else "does not agree", "rows > 0")],
        options=[Option("--size", type=int, default=2, help="how far to count")],
        summary=lambda result: [f"{name}: counting"],
        in_reproduce=False,
    )


@pytest.fixture
def toy():
    calls = []
    experiment = register(_toy_experiment("faulty", calls, extra={"cliff": math.nan}))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


def _strict(text):
    """``json.loads`` that refuses NaN and Infinity: standard JSON only."""
    def refuse(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def _damage(path, how):
    stored = json.loads(path.read_text())
    if how == "a list":
        path.write_text("[1, 2, 3]")
    elif how == "a string":
        path.write_text('"result seconds finished key"')
    elif how == "no seconds":
        del stored["seconds"]
        path.write_text(json.dumps(stored))
    elif how == "seconds as text":
        stored["seconds"] = "fast"
        path.write_text(json.dumps(stored))
    elif how == "result as a number":
        stored["result"] = 5
        path.write_text(json.dumps(stored))
    elif how == "result without records":
        del stored["result"]["records"]
        path.write_text(json.dumps(stored))
    elif how == "empty records":
        stored["result"]["records"] = []
        path.write_text(json.dumps(stored))
    elif how == "files not a list":
        stored["files"] = {"a": 1}
        path.write_text(json.dumps(stored))
    elif how == "a folder":
        path.unlink()
        (path / "inside").mkdir(parents=True)
    elif how == "binary":
        path.write_bytes(b"\x00\xff" * 10)
    else:  # pragma: no cover
        raise AssertionError(how)


DAMAGES = ["a list", "a string", "no seconds", "seconds as text", "result as a number",
           "result without records", "empty records", "files not a list", "a folder",
           "binary"]


@pytest.fixture
def other_toy():
    calls = []
    experiment = register(_toy_experiment("other", calls))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


_TWO_RUNS = """
import os, sys, time
import torch  # what reproduce loads before the lock, loaded before "ready" is signalled
from intrinsic_rank.experiments import Experiment, register, reproduce

out, ready = sys.argv[1], sys.argv[1] + ".second-ready"

def run(settings, *, random_state, progress, device):
    print("RAN", flush=True)
    for _ in range(600):  # hold the lock until the second run is about to ask for it
        if os.path.exists(ready):
            break
        time.sleep(0.1)
    time.sleep(1.0)
    return dict(records=[dict(size=1, value=0.5)])

def plot(result, folder):
    open(folder + "/slow.png", "wb").write(b"png")
    return ["slow.png"]

register(Experiment(
    name="slow", command="slow-cmd", title="slow", paper="none", help="h", description="d",
    quick=dict(size=1), full=dict(size=1), run=run,
    tables=lambda r: [("rows", r["records"], ["size", "value"])], plot=plot,
    verdicts=lambda r: [("c", "m", "agrees", "e")],
    summary=lambda r: [], in_reproduce=False))
if len(sys.argv) > 2:
    open(ready, "w").close()
reproduce("slow", out=out, progress=True)
"""


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


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


def test_reproduce_refuses_a_bad_out_before_any_work(tmp_path, toy):
    _, calls = toy
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(ValueError, match="out .* is not a folder"):
        reproduce("faulty", out=file, progress=False)
    with pytest.raises(ValueError, match="random_state must be an integer in"):
        reproduce("faulty", out=tmp_path, progress=False, random_state=2**32)
    assert calls == [] and file.read_text() == "x"


def test_reproduce_refuses_a_folder_where_a_piece_file_goes_before_any_work(tmp_path,
                                                                          command_toy):
    _, calls = command_toy
    (tmp_path / "toy-out" / "toy_out.png").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"out .*toy-out': 'toy_out.png' is a folder where "):
        reproduce("toy-out", out=tmp_path, progress=False)
    assert calls == [] and sorted(os.listdir(tmp_path)) == ["toy-out"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_cache_is_recomputed_never_a_traceback(tmp_path, toy, how, capsys):
    _, calls = toy
    first = reproduce("faulty", out=tmp_path, progress=False)
    path = tmp_path / "faulty" / "result.json"
    _damage(path, how)
    run = reproduce("faulty", out=tmp_path, progress=True)
    assert calls == ["faulty", "faulty"] and not run.pieces["faulty"].cached
    assert "damaged cache" in capsys.readouterr().out
    assert run.verdicts == first.verdicts
    stored = _strict(path.read_text())  # rewritten whole, standard JSON
    assert [r["size"] for r in stored["result"]["records"]] == [1, 2]
    again = reproduce("faulty", out=tmp_path, progress=False)
    assert again.pieces["faulty"].cached and calls == ["faulty", "faulty"]
    if how == "a folder":
        assert (tmp_path / "faulty" / "result.json.damaged" / "inside").is_dir()


def test_a_cached_nan_gives_the_same_result_and_verdicts(tmp_path, toy):
    _, calls = toy
    fresh = reproduce("faulty", out=tmp_path, progress=False)
    stored = _strict((tmp_path / "faulty" / "result.json").read_text())
    assert stored["result"]["cliff"] is None and stored["nonfinite"] == [
        [["result", "cliff"], "NaN"]]
    cached = reproduce("faulty", out=tmp_path, progress=False)
    assert cached.pieces["faulty"].cached and calls == ["faulty"]
    assert math.isnan(cached.pieces["faulty"].result["cliff"])
    assert json.dumps(cached.pieces["faulty"].result) == json.dumps(fresh.pieces["faulty"].result)
    assert cached.verdicts == fresh.verdicts


def test_a_piece_folder_that_is_a_file_is_moved_aside(tmp_path, toy):
    _, calls = toy
    (tmp_path / "faulty").write_text("in the way")
    run = reproduce("faulty", out=tmp_path, progress=False)
    assert not run.pieces["faulty"].cached and (tmp_path / "faulty" / "result.json").is_file()
    assert (tmp_path / "faulty.damaged").read_text() == "in the way"


@pytest.mark.parametrize("damage", ["garbage", "a list", "pieces as a list", "a folder",
                                    "deleted"])
def test_a_damaged_manifest_is_rebuilt_from_the_pieces(tmp_path, toy, other_toy, damage):
    reproduce("faulty", out=tmp_path, progress=False)
    manifest = tmp_path / "manifest.json"
    if damage == "garbage":
        manifest.write_text("{ no")
    elif damage == "a list":
        manifest.write_text("[]")
    elif damage == "pieces as a list":
        manifest.write_text('{"pieces": [1, 2], "last_run": 3}')
    elif damage == "a folder":
        manifest.unlink()
        manifest.mkdir()
    else:
        manifest.unlink()
    run = reproduce("other", out=tmp_path, progress=False)
    saved = _strict(manifest.read_text())
    assert set(saved["pieces"]) == {"faulty", "other"}  # nothing dropped
    assert saved["pieces"]["faulty"]["settings"] == {"size": 2}
    assert saved["pieces"]["faulty"]["verdicts"] == {"agrees": 1, "partly": 0,
                                                     "does not agree": 0, "not comparable": 0}
    assert saved["pieces"]["other"]["files"] == ["other/result.json", "other/other.png"]
    assert saved["last_run"]["pieces"] == ["other"]
    assert run.manifest == str(manifest)


def test_the_lock_is_exclusive_between_processes(tmp_path):
    script = textwrap.dedent(f"""
        import fcntl, sys
        handle = open({str(tmp_path / '.lock')!r}, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(7)
        sys.exit(0)
    """)
    pytest.importorskip("fcntl")
    with lock_folder(tmp_path):
        assert subprocess.run([sys.executable, "-c", script]).returncode == 7
    assert subprocess.run([sys.executable, "-c", script]).returncode == 0


def test_two_runs_on_the_same_out_take_turns_and_share_the_cache(tmp_path):
    pytest.importorskip("fcntl")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    out = str(tmp_path / "run")
    first = subprocess.Popen([sys.executable, "-c", _TWO_RUNS, out], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in first.stdout:  # wait until the first run computes (it holds the lock)
        lines.append(line)
        if "RAN" in line:
            break
    second = subprocess.run([sys.executable, "-c", _TWO_RUNS, out, "second"],
                            capture_output=True, text=True, env=env, timeout=120)
    rest, first_err = first.communicate(timeout=120)
    first_out = "".join(lines) + rest
    assert first.returncode == 0, first_err
    assert second.returncode == 0, second.stderr
    assert first_out.count("RAN") == 1 and "RAN" not in second.stdout  # computed once
    assert "another run is using" in second.stderr and "waiting" in second.stderr
    assert "[1/1] slow (quick): cached" in second.stdout
    stored = _strict((tmp_path / "run" / "slow" / "result.json").read_text())
    assert stored["result"]["records"] == [{"size": 1, "value": 0.5}]
    manifest = _strict((tmp_path / "run" / "manifest.json").read_text())
    assert list(manifest["pieces"]) == ["slow"]
    assert sorted(os.listdir(tmp_path / "run" / "slow")) == ["result.json", "slow.png"]


def test_reproduce_pieces_are_named_like_the_commands(capsys):
    assert _resolve_pieces(["sweep", "min-ip"]) == ["sweep", "min-ip"]
    assert _resolve_pieces(["min-ip", "sweep", "sweep"]) == ["sweep", "min-ip"]
    text = " ".join(_help(capsys, "reproduce").split())
    assert "(sweep, ladder, frontier," in text and "entropic" not in text
