import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import intrinsic_rank
from intrinsic_rank import cli
from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.runner import parse_ranks


def test_sweep_command_prints_table_and_saves_plot_and_records(tmp_path, capsys):
    out = tmp_path / "run"
    status = main([
        "sweep", "--teacher", "linear", "--r-star", "2", "--d", "6", "--seq-len", "4",
        "--n-samples", "600", "--rank-grid", "1-4", "--epochs", "80", "--seed", "1",
        "--out", str(out), "--quiet",
    ])
    assert status == 0
    text = capsys.readouterr().out
    assert "estimated r* = 2 (true r* = 2)" in text
    assert "heldout_risk" in text and "excess_risk" in text
    png = (out / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    saved = json.loads((out / "sweep.json").read_text())
    assert [rec["rank"] for rec in saved["records"]] == [1, 2, 3, 4]
    assert saved["rank_"] == 2 and saved["config"]["teacher"] == "linear"
    assert saved["records"][0]["excess_risk"] > 10 * saved["records"][1]["excess_risk"]


def test_sweep_command_reports_bad_input(tmp_path, capsys):
    status = main(["sweep", "--d", "4", "--rank-grid", "1-6", "--out", str(tmp_path), "--quiet"])
    assert status == 2
    assert "rank 6 in rank_grid exceeds the token dimension d = 4" in capsys.readouterr().err


def test_parse_ranks():
    assert parse_ranks("1-3,8,16") == [1, 2, 3, 8, 16]
    with pytest.raises(Exception, match="cannot read rank grid"):
        parse_ranks("one")


def test_copy_command_prints_table_and_cliff_and_saves_plot_and_records(tmp_path, capsys):
    out = tmp_path / "copy"
    status = main(["copy", "--quick", "--train-max", "8", "--eval-max", "20",
                   "--steps", "300", "--seed", "1", "--out", str(out), "--quiet"])
    assert status == 0
    text = capsys.readouterr().out
    assert "Copy task:" in text and "strings of 5-8 tokens" in text
    assert "length  in_training_range  exact_match  token_accuracy" in text
    png = (out / "copy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    saved = json.loads((out / "copy.json").read_text())
    lengths = [rec["length"] for rec in saved["records"]]
    assert lengths[0] == 5 and lengths[-1] == 20 and 9 in lengths
    assert [rec["in_training_range"] for rec in saved["records"]] == [n <= 8 for n in lengths]
    assert saved["config"]["train_lengths"] == [5, 8] and saved["config"]["n_steps"] == 300
    # past twice the training length no string is copied (unseen positions)
    assert all(rec["exact_match"] == 0 for rec in saved["records"] if rec["length"] >= 16)
    assert set(saved["cliff"]) >= {"midpoint", "scale", "sharpness", "bracketed"}
    if saved["cliff"]["bracketed"]:
        assert f"falls through 1/2 at length {saved['cliff']['midpoint']:.1f}" in text


def test_copy_command_reports_bad_train_lengths(tmp_path, capsys):
    status = main(["copy", "--train-min", "30", "--train-max", "10", "--out", str(tmp_path),
                   "--quiet"])
    assert status == 2
    assert "train_lengths must have min <= max" in capsys.readouterr().err


def test_reach_command_prints_tables_and_bound_and_saves(tmp_path, capsys):
    out = tmp_path / "reach"
    status = main(["reach", "--n-memory", "1,2", "--lengths", "2-6", "--n-targets", "4",
                   "--epochs", "200", "--patience", "100", "--precision", "float16",
                   "--out", str(out), "--quiet"])
    assert status == 0
    text = capsys.readouterr().out
    assert "n_memory  length  accessibility  token_accuracy  mean_steps" in text
    assert "n_memory   n50" in text and "bracketed" in text
    assert "slope bound C = d ln(1 + 2r/eps) / ln|V|" in text and "eps = 0.000977" in text
    saved = json.loads((out / "reach.json").read_text())
    assert [(r["n_memory"], r["length"]) for r in saved["records"]] == [
        (m, n) for m in (1, 2) for n in range(2, 7)]
    assert saved["bound"]["precision"] == 2.0 ** -10
    assert saved["config"]["max_steps"] == 200
    assert (out / "reach.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reach_command_reports_bad_input(tmp_path, capsys):
    status = main(["reach", "--n-memory", "0", "--out", str(tmp_path), "--quiet"])
    assert status == 2
    assert "n_memory" in capsys.readouterr().err


def _one_line_stderr(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


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
        verdicts=lambda r: [],
        summary=lambda r: ["a long table"], in_reproduce=False))
    sys.exit(main())
""")


def _one_line(err):
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


def _at_most_ten(settings):
    if settings["size"] > 10:
        raise ValueError(f"size must be <= 10; got {settings['size']}")


@pytest.fixture
def checked(registered):
    return registered("counted", check=_at_most_ten)


def _bad(argv, capsys):
    status = main(argv)
    return status, _one_line(capsys.readouterr().err)


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


COMMANDS = [e.command for e in EXPERIMENTS.values()] + ["reproduce"]


def test_every_count_option_has_an_upper_bound_stated_in_its_help():
    """Every integer option is bounded above, and its help states the type's own bounds."""
    import argparse

    from intrinsic_rank.cli import _build_parser

    parser = _build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, sub in commands.choices.items():
        for action in sub._actions:
            kind = action.type
            own = getattr(kind, "resolve", None)
            kind = own() if own is not None else kind
            if action.dest in ("seed", "threads") or action.nargs in ("+", "*"):
                continue
            if kind is int:
                pytest.fail(f"{name} {action.option_strings}: an integer without bounds")
            if getattr(kind, "__name__", None) != "integer":
                continue
            checked += 1
            assert kind.maximum is not None, (name, action.dest)
            assert kind.described in " ".join(action.help.split()), (name, action.dest)
    assert checked >= 35


@pytest.mark.parametrize("argv, option", [
    (["lm-geometry", "--cell-samples", "100000000000"], "--cell-samples"),
    (["lm-geometry", "--prompts", "100000000"], "--prompts"),
    (["profile", "--n-inputs", "100000000"], "--n-inputs"),
    (["corpus-ranks", "--n-inputs", "100000000"], "--n-inputs"),
    (["frontier", "--d", "64"], "--d, --seq-len and --n-samples"),
    (["min-ip", "--n-codewords", "256", "--n-bits", "64"], "--n-bits and --n-codewords"),
    (["ladder", "--n-samples", "100000000", "--d", "4096"], "--d, --seq-len and --n-samples"),
])
def test_sizes_beyond_time_or_memory_are_refused_before_work(tmp_path, capsys, argv, option,
                                                             monkeypatch):
    from intrinsic_rank._validation import _resources

    monkeypatch.setattr(_resources, "memory_limit", lambda: 16 * 2**30)  # a 16 GiB machine
    assert main([*argv, "--quiet", "--out", str(tmp_path)]) == 2
    assert option in _one_line_stderr(capsys)


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


@pytest.mark.parametrize("device", ["hpu", "xla"])
@pytest.mark.parametrize("command", [["sweep"], ["lm-geometry", "default"], ["head-ranks"],
                                     ["reproduce", "lm-geometry"]])
def test_every_command_refuses_an_unusable_device_before_any_work(tmp_path, capsys, device,
                                                                  command):
    """One line and exit 2, and nothing written: `reproduce` never caches a piece that ran
    on no device (it cached {"missing": "No module named 'torch.hpu'"})."""
    from intrinsic_rank.cli import main

    out = tmp_path / "out"
    assert main([*command, "--device", device, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"intrinsic-rank {command[0]}: error: device={device!r} is not available "
                   f"here ({err.split('here (', 1)[1].rsplit(');', 1)[0]}); use 'cpu' or an "
                   "available accelerator")
    assert not out.exists()


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
    (["min-ip-law", "--epochs", "70"], "max_steps", 70),
    (["reach", "--epochs", "50"], "max_steps", 50),
    (["reach", "--n-targets", "5"], "n_targets", 5),
    (["min-ip-law", "--n-heads", "1", "2"], "n_heads", [1, 2]),
])
def test_one_option_vocabulary(capsys, argv, dest, value):
    args = cli._build_parser().parse_args(argv)
    assert getattr(args, dest) == value


@pytest.mark.parametrize("argv", [
    ["frontier", "--r-stars", "1,2"], ["min-ip", "--seeds", "2"],
    ["min-ip-law", "--seeds", "3"], ["min-ip-law", "--steps", "70"],
    ["reach", "--max-steps", "50"], ["reach", "--targets", "5"], ["min-ip-law", "--heads", "2"],
])
def test_names_outside_the_vocabulary_are_refused(capsys, argv):
    assert cli.main(argv) == 2
    assert f"unrecognized arguments: {argv[1]}" in capsys.readouterr().err


def test_reach_defaults_when_no_alias_is_given():
    args = cli._build_parser().parse_args(["reach"])
    assert args.max_steps == 3000
    assert EXPERIMENTS["reach"].settings(args)["max_steps"] == 3000


@pytest.mark.parametrize("command", ["ladder", "frontier"])
def test_data_is_refused_clearly_where_it_does_not_apply(tmp_path, capsys, command):
    assert main([command, "--data", "x.npz", "--out", str(tmp_path), "--quiet"]) == 2
    assert "--data: not supported by this command" in capsys.readouterr().err


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


def test_a_commands_warning_is_one_line_naming_the_command(tmp_path):
    import subprocess
    import sys

    # a program of its own: inside pytest, pytest itself catches and prints warnings
    done = subprocess.run([sys.executable, "-m", "intrinsic_rank", "sweep", "--rank-grid",
                           "1,2", "--n-samples", "256", "--epochs", "3", "--out",
                           str(tmp_path / "o"), "--quiet"], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert warned, done.stderr
    assert all(line.startswith("intrinsic-rank sweep: warning: ") for line in warned)
    assert ".py:" not in done.stderr and "warnings.warn" not in done.stderr
