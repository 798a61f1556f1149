"""A newcomer's command line: threads, --version, readable --help, your own data."""

import csv
import json
import os
import re

import numpy as np
import pytest
import torch

import intrinsic_rank
from intrinsic_rank import cli
from intrinsic_rank.cli import DEFAULT_THREADS, main, thread_count
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.entropic._files import (
    load_model_file,
    load_xy,
)
from intrinsic_rank.experiments.runner._parallel import _ThreadRule
from intrinsic_rank.experiments.runner._reproduce import _resolve_pieces

COMMANDS = [e.command for e in EXPERIMENTS.values()] + ["reproduce"]


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


# -- threads ---------------------------------------------------------------------


def test_the_thread_rule_is_option_then_environment_then_one():
    assert DEFAULT_THREADS == 1
    assert thread_count(4, environ={"OMP_NUM_THREADS": "2"}) == (4, "--threads")
    assert thread_count(None, environ={"OMP_NUM_THREADS": "3"}) == (3, "OMP_NUM_THREADS")
    assert thread_count(None, environ={"OMP_NUM_THREADS": "junk"}) == (1, "default")
    assert thread_count(None, environ={}) == (1, "default")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_threads_and_documents_the_rule(capsys, command):
    text = " ".join(_help(capsys, command).split())
    assert "--threads N" in text
    assert "torch CPU threads (default: $OMP_NUM_THREADS when set, else 1" in text


def test_threads_apply_during_the_command_and_are_restored(monkeypatch, capsys):
    seen = {}

    def fake_run(experiment, args, *rest):
        seen["torch"] = torch.get_num_threads()
        seen["env"] = os.environ.get("OMP_NUM_THREADS")
        return 0

    monkeypatch.setattr(cli, "_run_experiment", fake_run)
    before_torch, before_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    assert main(["sweep", "--threads", "2", "--quiet"]) == 0
    assert seen == {"torch": 2, "env": "2"}
    assert torch.get_num_threads() == before_torch
    assert os.environ.get("OMP_NUM_THREADS") == before_env
    # OMP_NUM_THREADS set and no --threads: the command leaves torch alone
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    assert main(["sweep", "--quiet"]) == 0
    assert seen == {"torch": 1, "env": "1"}


def test_a_bad_thread_count_is_one_line(capsys):
    assert main(["sweep", "--threads", "0"]) == 2
    assert "argument --threads: must be an integer >= 1; got 0" in capsys.readouterr().err


def test_parallel_tasks_are_capped_by_omp_num_threads():
    rule = _ThreadRule(threads_per_job=None, slots=1, caller_pid=-1, omp_threads=1)
    assert rule.threads() == 1  # cpu_count // 1 would be every core
    assert _ThreadRule(threads_per_job=3, slots=1, caller_pid=-1, omp_threads=1).threads() == 3


# -- --version and --help ----------------------------------------------------------


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"intrinsic-rank {intrinsic_rank.__version__}"


def test_top_help_names_the_papers_by_title(capsys):
    text = " ".join(_help(capsys).split())
    for title in ("The Entropic Bound", "Three tokens force exponential feature rank in "
                  "nonnegative kernel attention",
                  "How many different outputs can a Transformer generate?"):
        assert title in text
    assert not re.search(r"seeds? 00\d", text)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_every_default_and_no_seed_numbers(capsys, command):
    parser = cli._build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    text = _help(capsys, command)
    assert not re.search(r"seeds? 00\d|SPEC", text)
    for action in sub._actions:
        if action.help in (None, "==SUPPRESS==") or not action.option_strings:
            continue
        if action.option_strings == ["-h", "--help"]:
            continue
        flag = action.nargs == 0
        assert flag or "default" in sub.formatter_class(prog="x")._get_help_string(
            action).lower(), (command, action.option_strings)


@pytest.mark.parametrize("command", ["sweep", "ladder", "frontier", "min-ip", "min-ip-law",
                                     "reach", "copy"])
def test_quick_wherever_there_is_a_quick_size(capsys, command):
    assert "--quick" in _help(capsys, command)


def test_quick_sizes_reach_the_settings():
    parser = cli._build_parser()
    sweep = EXPERIMENTS["sweep"]
    quick = sweep.settings(parser.parse_args(["sweep", "--quick"]))
    full = sweep.settings(parser.parse_args(["sweep"]))
    assert (quick["n_samples"], quick["max_epochs"]) == (1536, 150)
    assert (full["n_samples"], full["max_epochs"]) == (2048, 200)
    ladder = EXPERIMENTS["ladder"].settings(parser.parse_args(["ladder", "--quick"]))
    assert (ladder["n_samples"], ladder["max_epochs"]) == (1536, 150)
    frontier = EXPERIMENTS["frontier"].settings(parser.parse_args(["frontier", "--quick"]))
    assert frontier["r_stars"] == [1, 2, 4, 8, 12, 16] and frontier["max_epochs"] == 150


@pytest.mark.parametrize("argv, dest, value", [
    (["frontier", "--r-star", "1,2"], "r_stars", [1, 2]),
    (["min-ip", "--n-seeds", "2"], "n_seeds", 2),
    (["min-ip-law", "--epochs", "70"], "epochs", 70),
    (["reach", "--epochs", "50"], "epochs", 50),
])
def test_one_option_vocabulary(capsys, argv, dest, value):
    args = cli._build_parser().parse_args(argv)
    assert getattr(args, dest) == value


@pytest.mark.parametrize("argv", [
    ["frontier", "--r-stars", "1,2"], ["min-ip", "--seeds", "2"],
    ["min-ip-law", "--seeds", "3"], ["min-ip-law", "--steps", "70"],
    ["reach", "--max-steps", "50"],
])
def test_names_outside_the_vocabulary_are_refused(capsys, argv):
    assert cli.main(argv) == 2
    assert f"unrecognized arguments: {argv[1]} {argv[2]}" in capsys.readouterr().err


def test_reach_defaults_when_no_alias_is_given():
    args = cli._build_parser().parse_args(["reach"])
    assert args.epochs == 3000
    assert EXPERIMENTS["reach"].settings(args)["max_steps"] == 3000


def test_reproduce_pieces_are_named_like_the_commands(capsys):
    assert _resolve_pieces(["sweep", "min-ip"]) == ["sweep", "min-ip"]
    assert _resolve_pieces(["min-ip", "sweep", "sweep"]) == ["sweep", "min-ip"]
    text = " ".join(_help(capsys, "reproduce").split())
    assert "(sweep, ladder, frontier," in text and "entropic" not in text


# -- your own data -----------------------------------------------------------------


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    X, Y = make_attention_task("linear", n_samples=600, seq_len=4, d=6, rank=2,
                               random_state=0)
    np.savez(folder / "task.npz", X=X, Y=Y)
    np.save(folder / "X.npy", X)
    np.save(folder / "Y.npy", Y)
    return folder


def test_sweep_on_your_own_data_saves_table_plot_json_csv_and_model(task, tmp_path, capsys):
    out, model = tmp_path / "run", tmp_path / "models" / "sweep.joblib"
    status = main(["sweep", "--data", str(task / "task.npz"), "--attention", "linear",
                   "--rank-grid", "1-3", "--epochs", "60", "--out", str(out), "--quiet",
                   "--save-model", str(model)])
    assert status == 0
    text = capsys.readouterr().out
    assert "Rank sweep: linear students on" in text and "(d = 6, L = 4, n = 600)" in text
    assert "estimated r* = 2; estimated noise floor" in text
    saved = json.loads((out / "sweep.json").read_text())
    assert saved["rank_"] == 2 and saved["config"]["r_star"] is None
    assert saved["model_file"] == str(model)
    with open(out / "sweep.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["rank"]) for row in rows] == [1, 2, 3]
    assert float(rows[0]["heldout_risk"]) == pytest.approx(saved["records"][0]["heldout_risk"])
    assert float(rows[0]["excess_risk"]) > 10 * float(rows[1]["excess_risk"])
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    est = load_model_file(model)
    assert est.rank_ == 2
    X, _ = load_xy(task / "task.npz")
    assert est.predict(X[:5]).shape == (5, 4, 6)


def test_two_npy_files_and_a_given_noise_floor(task, tmp_path, capsys):
    status = main(["sweep", "--data", str(task / "X.npy"), "--targets", str(task / "Y.npy"),
                   "--attention", "linear", "--rank-grid", "1-3", "--epochs", "60",
                   "--noise-floor", "0.01", "--out", str(tmp_path), "--quiet"])
    assert status == 0
    assert "noise floor = 0.01 (given)" in capsys.readouterr().out
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["noise_floor_"] == pytest.approx(0.01) and saved["rank_"] == 2


@pytest.mark.parametrize("argv, message", [
    (["--data", "{task}/X.npy"], "--data: '{task}/X.npy' is an .npy file of X; give Y with "
                                 "--targets"),
    (["--data", "{task}/missing.npz"], "--data: no such file"),
    (["--data", "{task}/task.npz", "--targets", "{task}/Y.npy"], "--targets: "),
    (["--targets", "{task}/Y.npy"], "--targets: give it with --data"),
    (["--noise-floor", "-1"], "argument --noise-floor: must be a finite number >= 0"),
    (["--data", "{task}/task.npz", "--save-model", "{task}"], "--save-model '{task}' is a folder"),
])
def test_bad_data_options_are_one_line(task, tmp_path, capsys, argv, message):
    argv = [a.format(task=task) for a in argv]
    assert main(["sweep", *argv, "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message.format(task=task) in err and len(err.strip().splitlines()) == 1


def test_an_npz_without_y_names_what_it_holds(tmp_path):
    np.savez(tmp_path / "bad.npz", X=np.zeros((3, 2, 2)), Z=np.zeros(3))
    with pytest.raises(ValueError, match=r"has no array named Y \(it holds X, Z\)"):
        load_xy(tmp_path / "bad.npz")


def test_the_estimator_checks_the_data(tmp_path, capsys):
    np.savez(tmp_path / "bad.npz", X=np.zeros((8, 3, 2)), Y=np.zeros((5, 3, 2)))
    assert main(["sweep", "--data", str(tmp_path / "bad.npz"), "--rank-grid", "1-2",
                 "--out", str(tmp_path), "--quiet"]) == 2
    assert "intrinsic-rank sweep: error:" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["ladder", "frontier"])
def test_data_is_refused_clearly_where_it_does_not_apply(tmp_path, capsys, command):
    assert main([command, "--data", "x.npz", "--out", str(tmp_path), "--quiet"]) == 2
    assert "--data: not supported by this command" in capsys.readouterr().err


def test_the_sweep_summary_warns_when_the_floor_is_not_reached():
    sweep = dict(config=dict(attention="linear", teacher="linear", r_star=4, d=16, seq_len=8,
                             n_samples=100, max_epochs=10, random_state=0),
                 r_star=4, rank_=2, noise_floor=0.01, noise_floor_=0.5, excess_tol=0.01,
                 floor_reached=False, reference_risk=0.02, records=[])
    lines = EXPERIMENTS["sweep"].summary({"sweeps": {"linear": sweep}, "seconds": 1.0})
    warning = [line for line in lines if line.startswith("warning:")]
    assert len(warning) == 1
    assert "the estimated floor 0.5 is probably not the floor" in warning[0]
    assert "held-out risk of 0.02" in warning[0] and "--noise-floor" in warning[0]
    sweep["floor_reached"] = True
    lines = EXPERIMENTS["sweep"].summary({"sweeps": {"linear": sweep}, "seconds": 1.0})
    assert not any(line.startswith("warning:") for line in lines)


@pytest.mark.parametrize("argv, message", [
    (["--eval-max", "5000"], "argument --eval-max: must be an integer in [1, 1023]; got 5000"),
    (["--train-max", "400"], "--train-max: a string of 1200 tokens needs a context of "
                             "2 x 1200 + 2 = 2402 positions, more than the copy model's 2048"),
    (["--train-max", "100", "--eval-max", "1023"], None),
])
def test_copy_lengths_are_bounded_by_the_context(tmp_path, capsys, argv, message):
    if message is None:  # 2 x 1023 + 2 = 2048 fits: the check passes
        copy = EXPERIMENTS["copy"]
        copy.validate(copy.settings(cli._build_parser().parse_args(["copy", *argv])))
        return
    assert main(["copy", *argv, "--out", str(tmp_path), "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_reach_lengths_use_the_shared_parser(tmp_path, capsys):
    assert main(["reach", "--lengths", "0-3", "--out", str(tmp_path), "--quiet"]) == 2
    assert "argument --lengths: the grid '0-3' holds 0; its entries must be integers >= 1" \
        in capsys.readouterr().err


# -- the progress convention ----------------------------------------------------------


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


def test_min_ip_reports_its_fits_through_steps_not_prints(capsys):
    from intrinsic_rank.experiments import min_ip_phase_transition

    min_ip_phase_transition(rank_grid=[1, 2], n_seeds=1, n_bits=12, n_codewords=8, min_gap=3,
                            max_epochs=2, hidden=8, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""  # no line per fit on stdout; the bar is off a terminal
    assert "seed 0 length" not in captured.err


# -- printed tables fit a terminal; legends say what was measured ---------------------------


def _law_result(dense_errors):
    def row(task, fmap, m, r, full):
        return dict(task=task, feature_map=fmap, n_heads=1, m=m, r_needed=r, r_needed_01=r,
                    total_rank=r, construction_rank=2 ** m, lower_bound=float("nan"),
                    best_error=min(full), errors_at_needed=[0.0], errors_below_needed=[0.5] * 4,
                    errors_at_full=full, flagged=sum(e > 0 for e in full),
                    unconverged=sum(e > 0 for e in full))

    law = [row("length3", "exp", m, 2 ** (m - 2), [0.0] * 4) for m in (2, 3, 4)]
    law += [row("dense", "dense", m, m, dense_errors if m == 2 else [0.0] * 4)
            for m in (2, 3, 4)]
    fits = [dict(task=t, feature_map=f, n_heads=1, slope=0.5, slope_se=0.1, intercept=-1.0,
                 n_points=3, n_dropped=0) for t, f in (("dense", "dense"), ("length3", "exp"))]
    return dict(law=law, fits=fits, records=[], config=dict(n_seeds=4), seconds=1.0)


def test_min_ip_law_tables_fit_100_columns_without_list_cells():
    from intrinsic_rank.experiments import format_table

    experiment = EXPERIMENTS["min-ip-law"]
    result = _law_result([0.0, 0.406, 0.0, 0.0])
    for _caption, records, columns, *_ in experiment.tables(result):
        assert all(not isinstance(rec[c], list) for rec in records for c in columns)
        text = format_table(records, columns)
        assert max(len(line) for line in text.splitlines()) <= 100, text


@pytest.mark.parametrize("dense_errors, says", [
    ([0.0] * 4, "exact on every seed"),
    ([0.0, 0.406, 0.0, 0.0], "not exact on every seed"),
])
def test_min_ip_law_legend_follows_the_dense_numbers(dense_errors, says):
    from intrinsic_rank.experiments import plot_min_ip_law

    fig = plot_min_ip_law(_law_result(dense_errors))
    (ax,) = fig.axes  # no blank axes for the legend
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    (dense,) = [t for t in texts if t.startswith("dense softmax")]
    assert says in dense and ("0.406" in dense) == (says != "exact on every seed")
    assert any("least-squares line: slope 0.50" in t for t in texts)  # the fit is labelled


def test_frontier_says_the_dash_it_prints():
    experiment = EXPERIMENTS["frontier"]
    cfg = dict(d=16, seq_len=8, n_samples=64, noise=0.1, kernel_scale=2.0, teachers=[])
    (header, *_) = experiment.summary(dict(config=cfg, records=[], seconds=1.0))
    assert "– = not applicable" in header and "nan" not in header
    (caption, *_), = experiment.tables(dict(records=[]))
    assert "–: not applicable" in caption


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "reproduce"])
def test_help_says_the_files_written_and_what_quick_changes(capsys, command):
    text = " ".join(_help(capsys, command).split())
    stem = EXPERIMENTS[command].file_stem
    assert f"Writes {stem}.json" in text and f"(default runs/{stem})" in text
    if "--quick" in text:  # what it changes, and each value beside the default it replaces
        assert "--quick the quick sizes" in text
        assert "; --quick: " in text


def test_a_choice_called_default_is_not_a_stated_default(capsys):
    text = " ".join(_help(capsys, "reach").split())
    assert "a .pt file of save_tiny_lm (default: default)" in text
