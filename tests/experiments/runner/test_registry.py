"""The experiment registry: what the CLI and ``reproduce`` are built from.

The fake experiments below live only in this file: registering one is enough for the
command line to grow a command (with the shared options) and for ``reproduce`` to run it
as a piece -- the proof that a new experiment needs its module and its declaration, and
neither the command line nor the runner changes.
"""

import dataclasses
import json
import pathlib
import sys
import textwrap

import pytest

from intrinsic_rank.cli import _build_parser, main
from intrinsic_rank.experiments import (
    EXPERIMENTS,
    REPORT_ORDER,
    Experiment,
    Option,
    register,
    reproduce,
)
from intrinsic_rank.experiments.runner._reproduce import _resolve_pieces

CALLABLES = ["run", "tables", "plot", "verdicts", "add_arguments", "settings", "summary"]


def _declared():
    """Every Experiment the papers' packages declare (read from the packages, not listed)."""
    from intrinsic_rank.experiments import entropic, min_ip, reachability

    return [value for paper in (entropic, min_ip, reachability)
            for value in vars(paper).values() if isinstance(value, Experiment)]


def test_the_report_order_is_each_papers_report_then_the_appendix():
    from intrinsic_rank.experiments import entropic, min_ip, reachability

    assert REPORT_ORDER == (*entropic.REPORT, *min_ip.REPORT, *reachability.REPORT,
                            *entropic.APPENDIX)
    # every declared experiment is in the report exactly once, and registered in its order
    assert sorted(e.name for e in _declared()) == sorted(e.name for e in REPORT_ORDER)
    assert len({e.name for e in REPORT_ORDER}) == len(REPORT_ORDER)
    assert list(EXPERIMENTS)[:len(REPORT_ORDER)] == [e.name for e in REPORT_ORDER]
    assert all(e.module.startswith("intrinsic_rank.experiments.") for e in REPORT_ORDER)


def test_every_registered_experiment_is_complete_and_commands_are_unique():
    commands = [e.command for e in EXPERIMENTS.values()]
    assert len(set(commands)) == len(commands)
    assert "reproduce" not in commands
    assert EXPERIMENTS["sweep"].command == "sweep"
    for name, experiment in EXPERIMENTS.items():
        assert experiment.name == name
        for field in CALLABLES:
            assert callable(getattr(experiment, field)), (name, field)
        assert experiment.extra_files is None or callable(experiment.extra_files), name
        assert experiment.saved is None or callable(experiment.saved), name
        for text in (experiment.title, experiment.paper, experiment.help,
                     experiment.description):
            assert isinstance(text, str) and text, name
        assert json.loads(json.dumps(experiment.quick)) == experiment.quick, name
    stems = {e.command: e.file_stem for e in EXPERIMENTS.values()}
    assert {k: stems[k] for k in ("sweep", "ladder", "frontier", "min-ip", "reach", "copy")} \
        == {"sweep": "sweep", "ladder": "ladder", "frontier": "frontier",
            "min-ip": "min_ip", "reach": "reach", "copy": "copy"}


def test_register_refuses_a_taken_name_or_command():
    ladder = EXPERIMENTS["ladder"]
    with pytest.raises(ValueError, match="command 'ladder' is already taken by 'ladder'"):
        register(dataclasses.replace(ladder, name="ladder2"))
    with pytest.raises(ValueError, match="an experiment named 'ladder' is already registered"):
        register(dataclasses.replace(ladder, command="ladder2"))
    assert register(ladder) is ladder  # registering the same object again is harmless


# -- a fake experiment, registered here only -------------------------------------------


def _toy(calls, plot=None):
    def run(settings, *, random_state, progress, device):
        calls.append(dict(settings=settings, random_state=random_state, progress=progress,
                          device=device))
        records = [dict(size=i, value=0.5 * i) for i in range(1, settings["size"] + 1)]
        return dict(records=records, device=device)

    def default_plot(result, folder):
        (pathlib.Path(folder) / "toy.png").write_bytes(b"not really a PNG")
        return ["toy.png"]

    return Experiment(
        name="toy", command="toy-run", title="A toy", paper="none", help="a toy experiment",
        description="Counts to --size.", quick=dict(size=2), full=dict(size=3),
        run=run, tables=lambda result: [("the toy's table", result["records"],
                                         ["size", "value"])],
        plot=plot or default_plot,
        verdicts=lambda result: [("the toy counts", f"{len(result['records'])} rows",
                                  "agrees", "it does")],
        options=[Option("--size", type=int, default=2, help="how far to count")],
        summary=lambda result: ["Toy: counting", f"counted to {len(result['records'])}"],
        in_reproduce=False,
    )


@pytest.fixture
def toy(request):
    """Register the toy (optionally with another plot) and unregister it afterwards."""
    calls = []
    experiment = register(_toy(calls, getattr(request, "param", None)))
    yield experiment, calls
    EXPERIMENTS.pop(experiment.name)


def test_a_registered_experiment_becomes_a_command(toy, tmp_path, capsys):
    _, calls = toy
    out = tmp_path / "toy"
    assert main(["toy-run", "--size", "3", "--seed", "5", "--device", "cpu:0",
                 "--out", str(out)]) == 0
    assert calls == [dict(settings={"size": 3}, random_state=5, progress=True,
                          device="cpu:0")]
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "Toy: counting"  # summary[0], the table, summary[1:], saved ...
    assert lines[1].split() == ["size", "value"] and lines[2].split() == ["1", "0.5"]
    assert lines[5] == "counted to 3"
    assert lines[6] == f"saved {out / 'toy.png'} and {out / 'toy_run.json'}"
    saved = json.loads((out / "toy_run.json").read_text())
    assert saved["device"] == "cpu:0" and len(saved["records"]) == 3
    # the default output folder is runs/<command>
    assert _build_parser().parse_args(["toy-run"]).out == "runs/toy_run"


def test_every_command_takes_the_shared_options():
    parser = _build_parser()
    for command in [e.command for e in EXPERIMENTS.values()] + ["reproduce"]:
        args = parser.parse_args([command, "--device", "cuda:1", "--seed", "3", "--quiet",
                                  "--out", "somewhere"])
        assert (args.device, args.seed, args.quiet, args.out) == ("cuda:1", 3, True,
                                                                  "somewhere"), command
        defaults = parser.parse_args([command])
        assert (defaults.device, defaults.seed, defaults.quiet) == ("cpu", 0, False), command
        assert defaults.out.startswith("runs"), command


def test_the_device_reaches_a_registered_experiments_run(tmp_path, monkeypatch, capsys):
    seen = []
    ladder = EXPERIMENTS["ladder"]

    def run(settings, *, random_state, progress, device):
        seen.append(device)
        return ladder.run(dict(settings, rungs=["fixed"]), random_state=random_state,
                          progress=progress, device="cpu")

    monkeypatch.setitem(EXPERIMENTS, "ladder", dataclasses.replace(ladder, run=run))
    assert main(["ladder", "--d", "4", "--seq-len", "4", "--r-star", "2", "--n-samples",
                 "100", "--epochs", "2", "--device", "cpu:0", "--out", str(tmp_path),
                 "--quiet"]) == 0
    assert seen == ["cpu:0"]
    assert "B0 fixed operator" in capsys.readouterr().out


def test_a_bad_device_is_one_line_on_stderr(tmp_path, capsys):
    assert main(["ladder", "--device", "nonsense", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("intrinsic-rank ladder: error: unknown device 'nonsense'")
    assert not list(tmp_path.iterdir())


def _failing_plot(result, folder):
    raise RuntimeError("the plot broke")


@pytest.mark.parametrize("toy", [_failing_plot], indirect=True)
def test_the_json_is_written_before_the_plot(toy, tmp_path):
    with pytest.raises(RuntimeError, match="the plot broke"):
        main(["toy-run", "--out", str(tmp_path), "--quiet"])
    saved = json.loads((tmp_path / "toy_run.json").read_text())
    assert [rec["size"] for rec in saved["records"]] == [1, 2]


def test_reproduce_runs_a_registered_experiment_and_passes_the_device(toy, tmp_path):
    _, calls = toy
    run = reproduce("toy", out=tmp_path, progress=False)
    assert calls[-1]["device"] == "cpu" and run.pieces["toy"].verdicts[0].verdict == "agrees"
    stored = json.loads((tmp_path / "toy" / "result.json").read_text())
    assert stored["device"] == "cpu" and "device" not in stored["key"]
    # another device is another cache key, recorded with the result and in the report
    run = reproduce("toy", out=tmp_path, progress=False, device="cpu:0")
    assert calls[-1]["device"] == "cpu:0" and not run.pieces["toy"].cached
    stored = json.loads((tmp_path / "toy" / "result.json").read_text())
    assert stored["device"] == "cpu:0" and stored["key"]["device"] == "cpu:0"
    assert stored["computed_with"]["device"] == "cpu:0"
    assert "torch device cpu:0" in open(run.report).read()
    assert run.summary == [dict(piece="toy", seconds=run.pieces["toy"].seconds, cached=False,
                                agrees=1, partly=0, does_not_agree=0, not_comparable=0)]
    # "all" leaves out an experiment registered with in_reproduce=False
    assert "toy" not in _resolve_pieces("all") and _resolve_pieces(["toy"]) == ["toy"]


_WORK = textwrap.dedent("""
    def _run(settings, *, random_state, progress, device):
        return dict(records=[dict(size=i) for i in range(1, settings["size"] + 1)])

    def _tables(result):
        return [("rows", result["records"], ["size"])]

    def _plot(result, folder):
        return []

    def _verdicts(result):
        return [("it counts", str(len(result["records"])), "agrees", "rows")]

    def _summary(result):
        return [f"counted to {len(result['records'])}"]
""")


def test_a_new_experiment_is_its_module_and_its_declaration(tmp_path, monkeypatch, capsys):
    """What adding an experiment takes: the module of its work and one declaration."""
    (tmp_path / "toy_work_of_a_paper.py").write_text(_WORK)
    monkeypatch.syspath_prepend(str(tmp_path))
    register(Experiment(
        name="toy-module", command="toy-module", title="A toy", paper="none", help="a toy",
        description="Counts to --size.", full=dict(size=3), quick=dict(size=2),
        options=(Option("--quick", action="store_true", help=""),
                 Option("--size", type=int, scaled=True, help="how far to count")),
        module="toy_work_of_a_paper", in_reproduce=False))
    try:
        assert "toy_work_of_a_paper" not in sys.modules  # declared, not loaded
        assert main(["toy-module", "--quick", "--out", str(tmp_path / "out"), "--quiet"]) == 0
        assert capsys.readouterr().out.splitlines()[0] == "counted to 2"
        assert json.loads((tmp_path / "out" / "toy_module.json").read_text())["records"] == [
            {"size": 1}, {"size": 2}]
        run = reproduce("toy-module", quick=False, out=tmp_path / "report", progress=False)
        assert run.pieces["toy-module"].verdicts[0].measured == "3"  # the full scale
    finally:
        EXPERIMENTS.pop("toy-module")
        sys.modules.pop("toy_work_of_a_paper", None)


def test_reproduce_command_passes_the_device(toy, tmp_path, capsys):
    _, calls = toy
    assert main(["reproduce", "toy", "--device", "cpu:0", "--out", str(tmp_path),
                 "--quiet"]) == 0
    assert calls[-1]["device"] == "cpu:0"
    text = capsys.readouterr().out
    assert "piece  seconds  cached  agrees  partly  does_not_agree" in text
    report = (tmp_path / "report.md").read_text()
    assert "intrinsic-rank reproduce toy --quick --out" in report and "--device cpu:0" in report


# -- declared once: what every registered experiment's options must be ------------------


def _module_source(experiment):
    import importlib.util

    return pathlib.Path(importlib.util.find_spec(experiment.module).origin).read_text()


def test_settings_come_from_the_options_and_no_module_retypes_their_names():
    """An option's destination is its settings key: no ``_settings(args)``, no ``args.x``."""
    import re

    for experiment in EXPERIMENTS.values():
        if experiment.module is None:
            continue
        source = _module_source(experiment)
        assert "def _settings(" not in source, experiment.name
        assert not re.search(r"\bargs\.\w", source), experiment.name
        # every scaled option reads the scales under its own destination
        for option in experiment.options:
            if option.scaled:
                assert option.default == experiment.full[option.dest], (experiment.name,
                                                                        option.flag)


def _flags_in_use():
    """flag -> [(experiment, option)] over every registered experiment."""
    used = {}
    for experiment in EXPERIMENTS.values():
        for option in experiment.options:
            used.setdefault(option.flag, []).append((experiment.name, option))
    return used


def test_a_flag_several_commands_take_is_one_declaration():
    """One flag, one meaning: a flag two commands take comes from one declaration."""
    from intrinsic_rank.experiments.runner import SHARED_OPTIONS

    shared = 0
    for flag, users in _flags_in_use().items():
        if len(users) < 2:
            continue
        origins = {id(option.origin) for _, option in users}
        assert len(origins) == 1, (flag, [name for name, _ in users])
        shared += 1
        if flag != "--corpora":  # the Entropic Bound's own corpora, declared by that paper
            assert users[0][1].origin is SHARED_OPTIONS[flag], flag
    assert shared >= 10  # --quick, --epochs, --d, --n-samples, model, --n-memory, ...


def test_the_sweeps_file_flags_mean_one_thing():
    """``--targets`` is a file (the sweep's Y); a count of targets is ``--n-targets``."""
    users = _flags_in_use()
    assert [name for name, _ in users["--targets"]] == ["sweep"]
    assert [name for name, _ in users["--n-targets"]] == ["reach"]
    assert [name for name, _ in users["--heads"]] == ["head-ranks"]


def _typed_range(text):
    """A numeric range typed into help words: ``2..65536``, ``[1, 100]``, ``(0, 1000]``."""
    import re

    return re.search(r"\b\d[\d,^]*\s*\.\.\s*\d|[\[(]\s*-?\d[\d.e+^]*\s*,\s*-?\d", text)


def test_bounds_and_choices_are_stated_by_the_type_not_typed_in_the_help():
    checked = 0
    for experiment in EXPERIMENTS.values():
        for option in experiment.options:
            if option.hidden or callable(option.help):
                continue
            described = option.described()
            if described is None:
                continue
            checked += 1
            assert described in option.help_text(), (experiment.name, option.flag)
            choices = option.kwargs.get("choices")
            if choices is None:  # bounds: the words say what it is, the type its range
                assert not _typed_range(option.help), (experiment.name, option.flag)
            else:  # choices: the words may explain them, not list them again
                assert ", ".join(choices) not in option.help, (experiment.name, option.flag)
    assert checked >= 50


def test_every_epochs_option_says_what_an_epoch_is():
    """``--epochs``: mini-batches where the code takes mini-batches (the estimator, the
    distillation, the Min-IP fits), full-batch steps where one step sees every target."""
    from intrinsic_rank.estimators import AttentionRankEstimator
    from intrinsic_rank.experiments.runner import SHARED_OPTIONS

    rule = "min(256, max(16, n // 8))"
    epochs = [(name, option) for name, option in _flags_in_use()["--epochs"]]
    assert len(epochs) == 7
    for name, option in epochs:
        assert option.origin is SHARED_OPTIONS["--epochs"]
        assert ("mini-batches" in option.help) != ("full-batch" in option.help), name
        if rule in option.help:  # AttentionRankEstimator's batch_size="auto", as written
            estimator = AttentionRankEstimator()
            assert estimator.batch_size == "auto"
            for n in (10, 200, 2048, 10**5):
                assert estimator._batch_size(n) == min(256, max(16, n // 8)), n
    assert {name for name, option in epochs if rule in option.help} == {
        "sweep", "ladder", "frontier"}
    assert {name for name, option in epochs if "full-batch" in option.help} == {
        "reach", "min-ip-law"}


# -- register() refuses what would break the command line --------------------------------


def _toy_declaration(**changes):
    return dataclasses.replace(_toy([]), **changes)


@pytest.mark.parametrize("changes, message", [
    (dict(options=[Option("--out", help="x")]), "option --out clashes with the option every "
     "command takes"),
    (dict(options=[Option("--seed", type=int, help="x")]), "option --seed clashes"),
    (dict(options=[Option("-h", "--hidden", help="x")]), "option -h clashes"),
    (dict(options=[Option("--size", dest="device", help="x")]), "its destination 'device' is "
     "one the command line uses itself"),
    (dict(options=[Option("--size", dest="experiment", help="x")]), "destination 'experiment'"),
    (dict(options=[Option("--size", help="x"), Option("--size", help="y")]),
     "option --size is declared twice"),
    (dict(options=[Option("--a", dest="size", help="x"), Option("--b", dest="size", help="y")]),
     "options --a and --b share the destination 'size'"),
    (dict(options=["--size"]), "its options must be Option declarations"),
    (dict(options=[Option("--size", type=3, help="x")]), "its type must be callable"),
    (dict(options=[Option("--size", type="_parse_size", help="x")]),
     "its type '_parse_size' names a function of the experiment's module, and it has none"),
    (dict(command="reproduce"), "the command 'reproduce' is reserved"),
    (dict(name="all", command="all-run"), "the name 'all' is reserved"),
    (dict(command="two words"), "must be a word of letters"),
    (dict(command="--run"), "must be a word of letters"),
    (dict(quick=None), "quick must be a dict of JSON-able settings"),
    (dict(full=None), "full must be a dict of JSON-able settings"),
    (dict(full=dict(size={1, 2})), "full must be a dict of JSON-able settings"),
    (dict(json_name="../x"), "json_name '../x' must be a plain file name"),
    (dict(json_name="a/b"), "json_name 'a/b'"),
    (dict(json_name="/tmp/x"), "json_name '/tmp/x'"),
    (dict(json_name=""), "json_name ''"),
    (dict(json_name=".."), "json_name '..'"),
])
def test_register_refuses_in_one_line_what_would_break_the_cli(changes, message, capsys):
    before = dict(EXPERIMENTS)
    with pytest.raises(ValueError, match="^experiment '[^']*': ") as refused:
        register(_toy_declaration(**changes))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert EXPERIMENTS == before
    with pytest.raises(SystemExit) as stop:  # every command still builds
        main(["sweep", "--help"])
    assert stop.value.code == 0 and "usage: intrinsic-rank sweep" in capsys.readouterr().out


def test_register_refuses_a_type_or_part_its_module_does_not_define(tmp_path, monkeypatch):
    (tmp_path / "toy_work_without_types.py").write_text(
        _WORK + "\n\nfrom os.path import join as _joined\n_aliased, _other = len, str\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = dict(name="toy-typed", command="toy-typed", title="A toy", paper="none",
                    help="a toy", description="d", full=dict(size=3), quick=dict(size=2),
                    module="toy_work_without_types", in_reproduce=False)
    for option, message in [
        (Option("--size", type="_size_type", help="x"),
         "option --size: its type names _size_type, which toy_work_without_types does not "
         "define"),
        (Option("--size", type=int, convert="_as_list", help="x"),
         "option --size: its convert names _as_list"),
    ]:
        with pytest.raises(ValueError, match="^experiment 'toy-typed': ") as refused:
            register(Experiment(options=(option,), **declared))
        assert message in str(refused.value)
    with pytest.raises(ValueError, match="its module 'no_such_module_here' cannot be found"):
        register(Experiment(**dict(declared, module="no_such_module_here")))
    (tmp_path / "toy_work_without_run.py").write_text(_WORK.replace("def _run", "def _walk"))
    with pytest.raises(ValueError, match="the part run names _run, which toy_work_without_run "
                                         "does not define"):
        register(Experiment(**dict(declared, module="toy_work_without_run")))
    # names given by an import or a tuple assignment are found too; nothing was imported
    for name in ("_joined", "_aliased", "_other"):
        experiment = register(Experiment(
            options=(Option("--size", type=name, help="x"),), **declared))
        EXPERIMENTS.pop(experiment.name)
    assert "toy_work_without_types" not in sys.modules


def test_the_command_lines_own_options_are_the_ones_register_refuses():
    from intrinsic_rank.cli import _shared_options
    from intrinsic_rank.experiments.runner import COMMON_FLAGS

    parent = _shared_options("runs/x")
    flags = {flag: action.dest for action in parent._actions for flag in action.option_strings}
    assert flags == {flag: dest for flag, dest in COMMON_FLAGS.items() if dest != "help"}
