"""Per-head query/key weights and attention maps (intrinsic_rank.nn).

Every Hugging Face family is a tiny random model built here. The weights are checked
against what the model itself computes: the inputs of its projections are captured
with hooks during an eager forward pass, and the softmax rebuilt from
``query_key_weights`` must equal the attentions the model returns.
"""

import subprocess
import sys

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from intrinsic_rank.nn import (
    QueryKeyHeads,
    TinyCausalLM,
    TinyLMAdapter,
    attention_maps,
    query_key_weights,
)

VOCAB, WIDTH, LAYERS, HEADS, POSITIONS = 50, 32, 2, 4, 64
D_HEAD = WIDTH // HEADS
SPECIAL = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
RNG_IDS = np.random.default_rng(0).integers(1, VOCAB, size=(3, 9))
# right padding: every query still sees key 0, so no row of the softmax is empty
PADDED = np.array([[1] * 9, [1] * 6 + [0] * 3, [1] * 4 + [0] * 5])


def _tf():
    return pytest.importorskip("transformers")


def _seeded(build):
    def make():
        torch.manual_seed(0)
        return build(_tf())
    return make


def _decoder_kw(**kw):
    return dict(hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                intermediate_size=2 * WIDTH, vocab_size=VOCAB,
                max_position_embeddings=POSITIONS, **SPECIAL, **kw)


_BERT_KW = dict(hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                intermediate_size=2 * WIDTH, vocab_size=VOCAB,
                max_position_embeddings=POSITIONS)
_GPT2_KW = dict(n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB,
                n_positions=POSITIONS, **SPECIAL)

# name: (build, query-projection module of layer l, causal, local window of layer l)
ABSOLUTE = {
    "bert": (_seeded(lambda tf: tf.BertModel(tf.BertConfig(**_BERT_KW))),
             lambda m, l: m.encoder.layer[l].attention.self.query, False, None),
    "bert_mlm": (_seeded(lambda tf: tf.BertForMaskedLM(tf.BertConfig(**_BERT_KW))),
                 lambda m, l: m.bert.encoder.layer[l].attention.self.query, False, None),
    "roberta": (_seeded(lambda tf: tf.RobertaModel(tf.RobertaConfig(**_BERT_KW))),
                lambda m, l: m.encoder.layer[l].attention.self.query, False, None),
    "electra": (_seeded(lambda tf: tf.ElectraModel(tf.ElectraConfig(embedding_size=16,
                                                                    **_BERT_KW))),
                lambda m, l: m.encoder.layer[l].attention.self.query, False, None),
    "distilbert": (_seeded(lambda tf: tf.DistilBertModel(tf.DistilBertConfig(
        dim=WIDTH, n_layers=LAYERS, n_heads=HEADS, hidden_dim=2 * WIDTH, vocab_size=VOCAB,
        max_position_embeddings=POSITIONS))),
        lambda m, l: m.transformer.layer[l].attention.q_lin, False, None),
    "gpt2": (_seeded(lambda tf: tf.GPT2Model(tf.GPT2Config(**_GPT2_KW))),
             lambda m, l: m.h[l].attn.c_attn, True, None),
    "gpt2_lm_inverse_layer_scale": (
        _seeded(lambda tf: tf.GPT2LMHeadModel(tf.GPT2Config(
            scale_attn_by_inverse_layer_idx=True, **_GPT2_KW))),
        lambda m, l: m.transformer.h[l].attn.c_attn, True, None),
    "gpt2_unscaled": (_seeded(lambda tf: tf.GPT2Model(tf.GPT2Config(scale_attn_weights=False,
                                                                    **_GPT2_KW))),
                      lambda m, l: m.h[l].attn.c_attn, True, None),
    "gpt_neo": (_seeded(lambda tf: tf.GPTNeoModel(tf.GPTNeoConfig(
        hidden_size=WIDTH, num_layers=LAYERS, num_heads=HEADS, vocab_size=VOCAB,
        max_position_embeddings=POSITIONS, attention_types=[[["global", "local"], 1]],
        window_size=4, **SPECIAL))),
        lambda m, l: m.h[l].attn.attention.q_proj, True, lambda l: 4 if l == 1 else None),
    "opt": (_seeded(lambda tf: tf.OPTModel(tf.OPTConfig(
        hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        ffn_dim=2 * WIDTH, vocab_size=VOCAB, max_position_embeddings=POSITIONS,
        word_embed_proj_dim=WIDTH, **SPECIAL))),
        lambda m, l: m.decoder.layers[l].self_attn.q_proj, True, None),
}


def _softmax(logits):
    logits = logits - logits.max(-1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(-1, keepdims=True)


def _allowed(mask, causal, window=None):
    """(n, T, T) boolean: query s may read key t."""
    T = mask.shape[1]
    allowed = np.broadcast_to(mask[:, None, :].astype(bool), (mask.shape[0], T, T)).copy()
    s, t = np.indices((T, T))
    if causal:
        allowed &= t <= s
    if window is not None:
        allowed &= s - t < window
    return allowed


def _eager_reference(model, modules, ids, mask):
    """Run ``model`` eagerly in eval mode; return its attentions and the captured inputs."""
    captured = {}
    hooks = [module.register_forward_pre_hook(
        lambda mod, args, kwargs, l=l: captured.__setitem__(
            l, (args[0] if args else kwargs["hidden_states"]).detach().double().numpy()),
        with_kwargs=True) for l, module in enumerate(modules)]
    original = model.config._attn_implementation
    model.set_attn_implementation("eager")
    model.eval()
    try:
        with torch.no_grad():
            out = model(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask),
                        output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
        model.set_attn_implementation(original)
    attentions = np.stack([a.numpy() for a in out.attentions], axis=1)
    return attentions, captured


def _check_restored(model, original_implementation):
    assert model.config._attn_implementation == original_implementation
    assert model.training and all(m.training for m in model.modules())


@pytest.mark.parametrize("family", list(ABSOLUTE))
def test_static_kernel_rebuilds_the_attention_of_absolute_position_models(family):
    build, query_module, causal, window = ABSOLUTE[family]
    model = build()
    modules = [query_module(model, l) for l in range(LAYERS)]
    attentions, xs = _eager_reference(model, modules, RNG_IDS, PADDED)
    heads = query_key_weights(model)
    assert len(heads) == LAYERS and all(isinstance(h, QueryKeyHeads) for h in heads)
    for l, layer in enumerate(heads):
        assert layer.layer == l and not layer.rotary and not layer.qk_norm
        assert (layer.n_heads, layer.d_model, layer.d_head) == (HEADS, WIDTH, D_HEAD)
        np.testing.assert_array_equal(layer.kv_group, np.arange(HEADS))
        x = xs[l]  # (n, T, d_model)
        allowed = _allowed(PADDED, causal, window(l) if window else None)
        for h in range(HEADS):
            q = x @ layer.w_q[h] + layer.b_q[h]
            k = x @ layer.w_k[h] + layer.b_k[h]
            logits = np.where(allowed, layer.scale * q @ k.transpose(0, 2, 1), -np.inf)
            # a query that sees only padding (GPT-Neo's local window) is left out
            seen = allowed.any(-1)
            np.testing.assert_allclose(_softmax(logits[seen]), attentions[:, l, h][seen],
                                       atol=1e-5)
            # the kernel is the bilinear form of the logits up to the bias terms
            np.testing.assert_allclose(x @ layer.kernels[h] @ x.transpose(0, 2, 1),
                                       layer.scale * (x @ layer.w_q[h]) @ (
                                           x @ layer.w_k[h]).transpose(0, 2, 1), atol=1e-9)
    # attention_maps: the same numbers, with eager/eval switched on and then undone
    model.train()
    original = model.config._attn_implementation
    maps = attention_maps(model, torch.as_tensor(RNG_IDS), PADDED)
    assert maps.dtype == np.float32 and maps.shape == (3, LAYERS, HEADS, 9, 9)
    np.testing.assert_allclose(maps, attentions, atol=1e-6)
    _check_restored(model, original)


def test_scales_of_gpt2_neo_and_opt():
    assert [h.scale for h in query_key_weights(ABSOLUTE["gpt2"][0]())] == [D_HEAD ** -0.5] * 2
    inverse = query_key_weights(ABSOLUTE["gpt2_lm_inverse_layer_scale"][0]())
    np.testing.assert_allclose([h.scale for h in inverse], [D_HEAD ** -0.5, D_HEAD ** -0.5 / 2])
    assert [h.scale for h in query_key_weights(ABSOLUTE["gpt2_unscaled"][0]())] == [1.0, 1.0]
    assert [h.scale for h in query_key_weights(ABSOLUTE["gpt_neo"][0]())] == [1.0, 1.0]
    # OPT multiplies its query by the scale: the weights stay the raw projection
    opt = ABSOLUTE["opt"][0]()
    heads = query_key_weights(opt)
    assert heads[0].scale == D_HEAD ** -0.5
    q_proj = opt.decoder.layers[0].self_attn.q_proj
    weight = q_proj.weight.detach().double()
    np.testing.assert_allclose(heads[0].w_q[1], weight[D_HEAD:2 * D_HEAD].T, rtol=1e-12)
    np.testing.assert_allclose(heads[0].b_q[1], q_proj.bias[D_HEAD:2 * D_HEAD].detach().double(),
                               rtol=1e-12)


# ---------------------------------------------------------------------------
# rotary families: projections checked against the model's own q and k, and the
# attention rebuilt with the rotary embedding the model passes to its attention


def _split_projection(q_size, k_size):
    def split(output):
        return output[..., :q_size], output[..., q_size:q_size + k_size]
    return split


def _neox_split(output):
    heads = output.view(*output.shape[:-1], HEADS, 3, D_HEAD)
    return heads[..., 0, :].flatten(-2), heads[..., 1, :].flatten(-2)


# name: (build, attention module of layer l, number of key/value heads, qk_norm)
ROTARY = {
    "llama_gqa": (_seeded(lambda tf: tf.LlamaForCausalLM(tf.LlamaConfig(
        **_decoder_kw(num_key_value_heads=2)))),
        lambda m, l: m.model.layers[l].self_attn, 2, False),
    "mistral": (_seeded(lambda tf: tf.MistralModel(tf.MistralConfig(
        **_decoder_kw(num_key_value_heads=1)))),
        lambda m, l: m.layers[l].self_attn, 1, False),
    "qwen2_bias": (_seeded(lambda tf: tf.Qwen2Model(tf.Qwen2Config(
        **_decoder_kw(num_key_value_heads=2)))),
        lambda m, l: m.layers[l].self_attn, 2, False),
    "qwen3_qk_norm": (_seeded(lambda tf: tf.Qwen3Model(tf.Qwen3Config(
        **_decoder_kw(num_key_value_heads=2, head_dim=D_HEAD)))),
        lambda m, l: m.layers[l].self_attn, 2, True),
    "gpt_neox": (_seeded(lambda tf: tf.GPTNeoXModel(tf.GPTNeoXConfig(**_decoder_kw()))),
                 lambda m, l: m.layers[l].attention, HEADS, False),
    "phi3_fused_gqa": (_seeded(lambda tf: tf.Phi3Model(tf.Phi3Config(
        **_decoder_kw(num_key_value_heads=2)))),
        lambda m, l: m.layers[l].self_attn, 2, False),
}


def _projections(attn, n_kv):
    """(module whose output holds q and k, function output -> (q, k)) of an attention."""
    if hasattr(attn, "q_proj"):
        return [(attn.q_proj, lambda out: (out, None)), (attn.k_proj, lambda out: (None, out))]
    if hasattr(attn, "qkv_proj"):
        return [(attn.qkv_proj, _split_projection(HEADS * D_HEAD, n_kv * D_HEAD))]
    return [(attn.query_key_value, _neox_split)]


@pytest.mark.parametrize("family", list(ROTARY))
def test_rotary_families_match_the_models_projections(family):
    build, attention, n_kv, qk_norm = ROTARY[family]
    model = build()
    attns = [attention(model, l) for l in range(LAYERS)]
    captured = {}  # layer -> dict(x=, cos=, sin=, q=, k=)

    def pre_hook(l):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            cos, sin = kwargs["position_embeddings"]
            captured.setdefault(l, {}).update(x=x.detach(), cos=cos, sin=sin)
        return hook

    def out_hook(l, split):
        def hook(module, args, output):
            q, k = split(output.detach())
            for name, value in (("q", q), ("k", k)):
                if value is not None:
                    captured.setdefault(l, {})[name] = value.double().numpy()
        return hook

    hooks = []
    for l, attn in enumerate(attns):
        hooks.append(attn.register_forward_pre_hook(pre_hook(l), with_kwargs=True))
        for module, split in _projections(attn, n_kv):
            hooks.append(module.register_forward_hook(out_hook(l, split)))
    attentions, _ = _eager_reference(model, [], RNG_IDS, PADDED)
    for hook in hooks:
        hook.remove()

    heads = query_key_weights(model)
    rotate = sys.modules[type(attns[0]).__module__].apply_rotary_pos_emb
    assert len(heads) == LAYERS
    for l, layer in enumerate(heads):
        assert layer.rotary and layer.qk_norm == qk_norm
        np.testing.assert_array_equal(layer.kv_group, np.arange(HEADS) // (HEADS // n_kv))
        assert layer.w_k.shape == (HEADS, WIDTH, D_HEAD)
        c = captured[l]
        x = c["x"].double().numpy()
        q = np.stack([x @ layer.w_q[h] + layer.b_q[h] for h in range(HEADS)], axis=1)
        k = np.stack([x @ layer.w_k[h] + layer.b_k[h] for h in range(HEADS)], axis=1)
        for h in range(HEADS):
            g = layer.kv_group[h]
            np.testing.assert_allclose(q[:, h], c["q"][..., h * D_HEAD:(h + 1) * D_HEAD],
                                       atol=1e-5)
            np.testing.assert_allclose(k[:, h], c["k"][..., g * D_HEAD:(g + 1) * D_HEAD],
                                       atol=1e-5)
        # (n, H, T, d_head) -> the model's own norms and rotation -> its softmax
        q_t, k_t = torch.from_numpy(q).float(), torch.from_numpy(k).float()
        with torch.no_grad():
            if qk_norm:
                q_t, k_t = attns[l].q_norm(q_t), attns[l].k_norm(k_t)
            q_t, k_t = rotate(q_t, k_t, c["cos"], c["sin"])
        logits = layer.scale * (q_t.double() @ k_t.double().transpose(-1, -2)).numpy()
        logits = np.where(_allowed(PADDED, True)[:, None], logits, -np.inf)
        np.testing.assert_allclose(_softmax(logits), attentions[:, l], atol=1e-5)

    model.train()
    original = model.config._attn_implementation
    np.testing.assert_allclose(attention_maps(model, RNG_IDS, PADDED), attentions, atol=1e-6)
    _check_restored(model, original)


# ---------------------------------------------------------------------------
# Hugging Face plumbing


def test_head_models_and_adapters_read_like_their_base():
    tf = _tf()
    from intrinsic_rank.nn import HFCausalLMAdapter

    model = ABSOLUTE["gpt2_lm_inverse_layer_scale"][0]()
    for wrapped, base in ((model, model.transformer), (HFCausalLMAdapter(model), model)):
        for a, b in zip(query_key_weights(wrapped), query_key_weights(base)):
            np.testing.assert_array_equal(a.w_q, b.w_q)
            np.testing.assert_array_equal(a.b_k, b.b_k)
            assert a.scale == b.scale
    np.testing.assert_array_equal(attention_maps(HFCausalLMAdapter(model), RNG_IDS),
                                  attention_maps(model.transformer, RNG_IDS))
    assert isinstance(model, tf.PreTrainedModel)


def test_implementation_and_training_are_restored_when_the_forward_fails(monkeypatch):
    model = ABSOLUTE["gpt2"][0]()
    model.train()
    seen = {}

    def broken(*args, **kwargs):
        seen.update(implementation=model.config._attn_implementation, training=model.training)
        raise RuntimeError("boom")

    monkeypatch.setattr(model, "forward", broken)
    with pytest.raises(RuntimeError, match="boom"):
        attention_maps(model, RNG_IDS)
    assert seen == {"implementation": "eager", "training": False}
    _check_restored(model, "sdpa")


def test_hf_input_errors_and_unsupported_architectures():
    tf = _tf()
    model = ABSOLUTE["bert"][0]()
    with pytest.raises(ValueError, match=r"\[0, 50\)"):
        attention_maps(model, np.array([[1, 2, VOCAB]]))
    with pytest.raises(ValueError, match="context of 64"):
        attention_maps(model, np.ones((1, POSITIONS + 1), dtype=int))
    torch.manual_seed(0)
    bloom = tf.BloomModel(tf.BloomConfig(hidden_size=WIDTH, n_layer=LAYERS, n_head=HEADS,
                                         vocab_size=VOCAB, **SPECIAL))
    with pytest.raises(ValueError, match="BloomModel.*ALiBi.*supported families: .*BERT-like"):
        query_key_weights(bloom)


# ---------------------------------------------------------------------------
# TinyCausalLM


def _tiny(causal=True, seed=0):
    torch.manual_seed(seed)
    lm = TinyCausalLM(vocab_size=20, d_model=16, n_layers=2, n_heads=4, max_length=24,
                      causal=causal)
    # larger weights than the init: attention far from uniform
    with torch.no_grad():
        for block in lm.blocks:
            block.qkv.weight.mul_(20)
            block.qkv.bias.normal_()
    return lm


def _block_inputs(lm, ids):
    inputs = []
    hooks = [b.register_forward_pre_hook(lambda mod, args: inputs.append(args[0].detach()))
             for b in lm.blocks]
    with torch.no_grad():
        lm(torch.as_tensor(ids))
    for hook in hooks:
        hook.remove()
    return inputs


@pytest.mark.parametrize("causal", [True, False])
def test_tiny_maps_reproduce_the_sdpa_output(causal):
    lm = _tiny(causal)
    ids = np.random.default_rng(1).integers(0, 20, size=(3, 10))
    maps = attention_maps(lm, ids)
    assert maps.shape == (3, 2, 4, 10, 10) and maps.dtype == np.float32
    assert np.isfinite(maps).all() and maps.std() > 0.05
    np.testing.assert_allclose(maps.sum(-1), 1, atol=1e-5)
    upper = np.triu(np.ones((10, 10), dtype=bool), 1)
    assert (maps[..., upper] == 0).all() == causal
    for l, (block, h) in enumerate(zip(lm.blocks, _block_inputs(lm, ids))):
        B, T, D = h.shape
        with torch.no_grad():
            q, k, v = block.qkv(block.norm1(h)).split(D, dim=-1)
            q, k, v = (t.view(B, T, 4, D // 4).transpose(1, 2) for t in (q, k, v))
            expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(torch.from_numpy(maps[:, l]) @ v, expected,
                                   atol=1e-5, rtol=1e-5)


def test_tiny_weights_match_the_fused_qkv():
    lm = _tiny()
    heads = query_key_weights(lm)
    ids = np.random.default_rng(2).integers(0, 20, size=(2, 7))
    maps = attention_maps(lm, ids)
    for l, (layer, block, h) in enumerate(zip(heads, lm.blocks, _block_inputs(lm, ids))):
        assert layer.scale == 0.5 and not layer.rotary and not layer.qk_norm
        W = block.qkv.weight.detach().double().numpy()
        b = block.qkv.bias.detach().double().numpy()
        for head in range(4):
            rows = slice(4 * head, 4 * head + 4)
            np.testing.assert_array_equal(layer.w_q[head], W[:16][rows].T)
            np.testing.assert_array_equal(layer.b_k[head], b[16:32][rows])
            np.testing.assert_allclose(layer.kernels[head],
                                       0.5 * W[:16][rows].T @ W[16:32][rows], rtol=1e-12)
        x = block.norm1(h).detach().double().numpy()
        q = np.einsum("btd,hde->bhte", x, layer.w_q) + layer.b_q[None, :, None]
        k = np.einsum("btd,hde->bhte", x, layer.w_k) + layer.b_k[None, :, None]
        logits = np.where(_allowed(np.ones((2, 7)), True)[:, None],
                          layer.scale * q @ k.transpose(0, 1, 3, 2), -np.inf)
        np.testing.assert_allclose(_softmax(logits), maps[:, l], atol=1e-5)
    assert heads[1].kernels.shape == (4, 16, 16)


def test_tiny_padding_is_a_key_mask():
    lm = _tiny(causal=False)
    ids = np.random.default_rng(3).integers(0, 20, size=(2, 8))
    mask = np.ones((2, 8), dtype=int)
    mask[1, 5:] = 0
    maps = attention_maps(lm, torch.as_tensor(ids), torch.as_tensor(mask))
    assert (maps[1, ..., 5:] == 0).all()
    np.testing.assert_allclose(maps.sum(-1), 1, atol=1e-5)
    # the unpadded prefix attends exactly as the same tokens alone would, in every layer
    np.testing.assert_allclose(maps[1, :, :, :5, :5], attention_maps(lm, ids[1:, :5])[0],
                               atol=1e-5)
    np.testing.assert_allclose(maps[0], attention_maps(lm, ids[:1])[0], atol=1e-5)
    # left padding of a causal model: a query seeing only padding gets zeros, no NaN
    causal = _tiny()
    left = np.array([[0, 0, 1, 1, 1, 1, 1, 1]] * 2)
    maps = attention_maps(causal, ids, left)
    assert np.isfinite(maps).all()
    assert (maps[:, :, :, :2] == 0).all()
    np.testing.assert_allclose(maps[:, :, :, 2:].sum(-1), 1, atol=1e-5)


def test_tiny_adapter_is_unwrapped():
    lm = _tiny()
    ids = np.random.default_rng(4).integers(0, 20, size=(2, 5))
    np.testing.assert_array_equal(attention_maps(TinyLMAdapter(lm), ids), attention_maps(lm, ids))
    np.testing.assert_array_equal(query_key_weights(TinyLMAdapter(lm))[1].w_k,
                                  query_key_weights(lm)[1].w_k)


@pytest.mark.parametrize("ids, mask, match", [
    (np.array([[1.0, 2.0]]), None, "integer"),
    (np.array([[True, False]]), None, "integer"),
    (np.array([1, 2, 3]), None, r"shape \(n, T\)"),
    (np.zeros((1, 2, 3), dtype=int), None, r"shape \(n, T\)"),
    (np.zeros((1, 0), dtype=int), None, r"shape \(n, T\)"),
    (np.array([[1, 20]]), None, r"\[0, 20\)"),
    (np.array([[-1, 2]]), None, r"\[0, 20\)"),
    (np.ones((1, 25), dtype=int), None, "context of 24"),
    (np.array([[1, 2]]), np.array([[1, 1, 1]]), "shape of input_ids"),
    (np.array([[1, 2]]), np.array([[1, 2]]), "only 0"),
    (np.array([[1, 2]]), np.array([[1.0, np.nan]]), "only 0"),
    ([[1, 2], [3]], None, "2-D array|integer"),
])
def test_bad_inputs_are_clear_value_errors(ids, mask, match):
    with pytest.raises(ValueError, match=match):
        attention_maps(_tiny(), ids, mask)


@pytest.mark.parametrize("thing", [torch.nn.Linear(2, 2), "gpt2", None])
def test_other_objects_are_type_errors(thing):
    name = type(thing).__name__
    with pytest.raises(TypeError, match=name):
        query_key_weights(thing)
    with pytest.raises(TypeError, match=name):
        attention_maps(thing, np.array([[1, 2]]))


def test_works_without_transformers():
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "import numpy as np, torch; torch.set_num_threads(1)\n"
        "from intrinsic_rank.nn import TinyCausalLM, attention_maps, query_key_weights\n"
        "lm = TinyCausalLM(vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_length=8)\n"
        "assert attention_maps(lm, np.array([[1, 2, 3]])).shape == (1, 1, 2, 3, 3)\n"
        "assert len(query_key_weights(lm)) == 1\n"
        "try:\n    query_key_weights(torch.nn.Linear(2, 2))\n"
        "except TypeError:\n    print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _family_build(family):
    return {**{k: v[0] for k, v in ABSOLUTE.items()}, **{k: v[0] for k, v in ROTARY.items()}}[
        family]


# family: (attention whose input is x, module whose input is the heads' concatenated output)
VALUE_SITES = {
    "bert": (lambda m, l: m.encoder.layer[l].attention.self,
             lambda m, l: m.encoder.layer[l].attention.output.dense),
    "distilbert": (lambda m, l: m.transformer.layer[l].attention,
                   lambda m, l: m.transformer.layer[l].attention.out_lin),
    "gpt2": (lambda m, l: m.h[l].attn, lambda m, l: m.h[l].attn.c_proj),
    "opt": (lambda m, l: m.decoder.layers[l].self_attn,
            lambda m, l: m.decoder.layers[l].self_attn.out_proj),
    "llama_gqa": (lambda m, l: m.model.layers[l].self_attn,
                  lambda m, l: m.model.layers[l].self_attn.o_proj),
    "qwen2_bias": (lambda m, l: m.layers[l].self_attn, lambda m, l: m.layers[l].self_attn.o_proj),
    "gpt_neox": (lambda m, l: m.layers[l].attention, lambda m, l: m.layers[l].attention.dense),
    "phi3_fused_gqa": (lambda m, l: m.layers[l].self_attn,
                       lambda m, l: m.layers[l].self_attn.o_proj),
}


@pytest.mark.parametrize("family", list(VALUE_SITES))
def test_value_weights_mix_into_the_models_attention_output(family):
    """Per head, the model's attention probabilities times ``x @ w_v + b_v`` is its output."""
    from intrinsic_rank.nn import value_weights

    model = _family_build(family)()
    with torch.no_grad():  # random biases, so that a dropped or misplaced value bias shows
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.1)
    x_site, y_site = VALUE_SITES[family]
    outputs = {}
    hooks = [y_site(model, l).register_forward_pre_hook(
        lambda mod, args, l=l: outputs.__setitem__(l, args[0].detach().double().numpy()))
        for l in range(LAYERS)]
    try:
        attentions, inputs = _eager_reference(model, [x_site(model, l) for l in range(LAYERS)],
                                              RNG_IDS, np.ones_like(RNG_IDS))
    finally:
        for hook in hooks:
            hook.remove()
    values = value_weights(model)
    assert len(values) == LAYERS
    for l, (w_v, b_v) in enumerate(values):
        assert w_v.shape == (HEADS, WIDTH, D_HEAD) and b_v.shape == (HEADS, D_HEAD)
        for h in range(HEADS):
            mixed = attentions[:, l, h] @ (inputs[l] @ w_v[h] + b_v[h])
            np.testing.assert_allclose(mixed, outputs[l][..., h * D_HEAD:(h + 1) * D_HEAD],
                                       atol=1e-5)
