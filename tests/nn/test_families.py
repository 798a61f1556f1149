"""The one reader of heads, family by family (intrinsic_rank.nn's table of families).

Every family of ``HEAD_FAMILIES`` whose heads are recomputed is a tiny random model
built here from the family's own ``transformers`` config, seeded by the test. Its
query/key weights are scaled up and its biases and norm gains drawn at random, so
that attention is far from uniform and a step left out shows; windows are shorter
than the inputs. For each: the output recomputed from the attention's input equals
the hooked one at every layer, and leaving out the family's own step is far off;
the heads' outputs through their output blocks sum to the attention's output; the
distillation student at full rank is the head; an imposed query is the projection
before the norm, acts on rotated and unrotated channels together, and is undone bit
for bit; ``head-ranks --quick`` runs on the saved folder. A variant the reader does
not know, an unread family, a model without attention, a model without a tokenizer
given a text corpus, and a config that does not fit its weights stop in one line.
"""

import dataclasses
import json
import os
import re

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    head_activations,
    head_facts,
    head_output,
    imposed_queries,
    query_basis,
    truncated_head,
)
from intrinsic_rank.nn import HEAD_FAMILIES, HeadNorm, attention_layers, rope_frequencies

tf = pytest.importorskip("transformers")

VOCAB, WIDTH, HEADS, KV_HEADS, LENGTH, WINDOW = 100, 32, 4, 2, 20, 5
SPECIAL = dict(bos_token_id=0, eos_token_id=0, pad_token_id=0)
IDS = np.random.default_rng(0).integers(1, VOCAB, size=(4, LENGTH))
TOLERANCE = 1e-5  # ||head_output - Y|| / ||Y||
FAR = 1e-2        # a step left out must be at least this far off


def _kw(**kw):
    return dict(hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
                num_key_value_heads=KV_HEADS, intermediate_size=2 * WIDTH, vocab_size=VOCAB,
                max_position_embeddings=64, **SPECIAL, **kw)


def _llama3():
    return tf.LlamaForCausalLM(tf.LlamaConfig(**_kw(rope_parameters=dict(
        rope_type="llama3", rope_theta=5e5, factor=8.0, low_freq_factor=1.0,
        high_freq_factor=4.0, original_max_position_embeddings=8))))


def _yarn():
    return tf.LlamaForCausalLM(tf.LlamaConfig(**_kw(rope_parameters=dict(
        rope_type="yarn", rope_theta=1e4, factor=4.0, original_max_position_embeddings=16))))


def _default_rope(facts):
    theta = 10000.0 if facts.rope_theta is None else facts.rope_theta
    return rope_frequencies(facts.head_dim, theta).numpy()


def _softer(facts):
    return dataclasses.replace(facts, scale=facts.scale / 10)


def _no_window(facts):
    return dataclasses.replace(facts, window=None)


# name: (family key, build, (layer, head) showing the family's own step, what the facts
# say of that step, the same facts with the step left out)
FAMILIES = {
    "gpt2": ("gpt2", lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        n_embd=WIDTH, n_layer=2, n_head=HEADS, vocab_size=VOCAB, n_positions=64, **SPECIAL)),
        (1, 1), lambda f: f.positional == "absolute", _softer),
    "opt": ("opt", lambda: tf.OPTForCausalLM(tf.OPTConfig(
        hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS, ffn_dim=64,
        vocab_size=VOCAB, word_embed_proj_dim=WIDTH, max_position_embeddings=64, **SPECIAL)),
        (1, 1), lambda f: f.scale == (WIDTH // HEADS) ** -0.5, _softer),
    "gpt_neo": ("gpt_neo", lambda: tf.GPTNeoForCausalLM(tf.GPTNeoConfig(
        hidden_size=WIDTH, num_layers=2, num_heads=HEADS, vocab_size=VOCAB,
        max_position_embeddings=64, attention_types=[[["global", "local"], 1]],
        window_size=WINDOW, **SPECIAL)),
        (1, 1), lambda f: (f.window, f.scale) == (WINDOW, 1.0), _no_window),
    "llama3_rope": ("llama", _llama3, (1, 1), lambda f: f.rope_type == "llama3",
                    lambda f: dataclasses.replace(f, inv_freq=_default_rope(f))),
    "llama_yarn": ("llama", _yarn, (1, 1), lambda f: f.rope_scaling > 1.05,
                   lambda f: dataclasses.replace(f, rope_scaling=1.0)),
    "mistral_window": ("mistral", lambda: tf.MistralForCausalLM(tf.MistralConfig(
        **_kw(sliding_window=WINDOW))), (1, 1), lambda f: f.window == WINDOW, _no_window),
    "qwen2_window": ("qwen2", lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(
        **_kw(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1))),
        (1, 1), lambda f: f.window == WINDOW, _no_window),
    "qwen3": ("qwen3", lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(**_kw(head_dim=8))),
              (1, 1), lambda f: (f.q_norm.axis, f.k_norm.axis) == ("head", "head"),
              lambda f: dataclasses.replace(f, q_norm=None, k_norm=None)),
    "olmo2": ("olmo2", lambda: tf.Olmo2ForCausalLM(tf.Olmo2Config(**_kw())),
              (1, 1), lambda f: (f.q_norm.axis, f.q_norm.width, f.k_norm.width) == (
                  "layer", WIDTH, KV_HEADS * 8),
              # the same gains and eps over the head alone: the axis matters
              lambda f: dataclasses.replace(f, q_norm=HeadNorm(f.q_norm.gain, f.q_norm.eps),
                                            k_norm=HeadNorm(f.k_norm.gain, f.k_norm.eps))),
    "gemma": ("gemma", lambda: tf.GemmaForCausalLM(tf.GemmaConfig(**_kw(head_dim=16))),
              (1, 1), lambda f: (f.head_dim, f.d_model) == (16, WIDTH), _softer),
    "gemma2": ("gemma2", lambda: tf.Gemma2ForCausalLM(tf.Gemma2Config(**_kw(
        head_dim=16, sliding_window=WINDOW, attn_logit_softcapping=3.0,
        query_pre_attn_scalar=24))),
        (0, 1), lambda f: (f.window, f.softcap, f.scale) == (WINDOW, 3.0, 24 ** -0.5),
        lambda f: dataclasses.replace(f, softcap=None)),
    "gemma3": ("gemma3", lambda: tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(**_kw(
        head_dim=16, sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"]))),
        (1, 1), lambda f: (f.window, f.rope_theta, f.q_norm.axis) == (None, 1e6, "head"),
        # Gemma 3's norm multiplies by (1 + weight): the weight alone is far off
        lambda f: dataclasses.replace(f, q_norm=HeadNorm(f.q_norm.gain - 1, f.q_norm.eps))),
    "phi3": ("phi3", lambda: tf.Phi3ForCausalLM(tf.Phi3Config(**_kw(
        partial_rotary_factor=0.5, sliding_window=WINDOW))),
        (1, 1), lambda f: (f.rotary_dim, f.head_dim, f.window) == (4, 8, WINDOW),
        lambda f: dataclasses.replace(f, inv_freq=_default_rope(f))),
    "gpt_neox": ("gpt_neox", lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
        hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=HEADS,
        intermediate_size=64, vocab_size=VOCAB, rotary_pct=0.25, max_position_embeddings=64,
        **SPECIAL)),
        (1, 1), lambda f: (f.rotary_dim, f.head_dim) == (2, 8),
        lambda f: dataclasses.replace(f, inv_freq=_default_rope(f))),
}
NAMES = list(FAMILIES)


def _sharpened(model, seed):
    """q/k/v weights of std 0.6, biases ~ N(0, 0.3), norm gains drawn: a left-out step shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight",
                              "query_key_value.weight", "qkv_proj.weight", "c_attn.weight")):
                p.mul_(0.6 / p.std())
            if name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=generator))
            if ".q_norm." in name or ".k_norm." in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=generator))
    return model.eval()


@pytest.fixture(scope="module")
def models():
    built = {}
    for seed, (name, (_, build, *_)) in enumerate(FAMILIES.items()):
        torch.manual_seed(seed)
        built[name] = _sharpened(build(), seed)
    return built


def _relative(estimate, target):
    return float(np.linalg.norm(estimate - target) / np.linalg.norm(target))


ALL_HEADS = [(layer, head) for layer in range(2) for head in range(HEADS)]


def test_every_recomputed_family_of_the_table_is_tested_here():
    tested = {family for family, *_ in FAMILIES.values()}
    recomputed = {key for key, family in HEAD_FAMILIES.items() if family.recomputed}
    assert recomputed - {"tiny"} == tested  # TinyCausalLM: tests/inspection/test_head_io.py
    assert not HEAD_FAMILIES["q_proj"].recomputed and not HEAD_FAMILIES["bert"].recomputed


@pytest.mark.parametrize("name", NAMES)
def test_the_recomputed_output_is_the_hooked_one_at_every_layer(models, name):
    family, _, shown, says, without = FAMILIES[name]
    data = head_activations(models[name], IDS, ALL_HEADS, batch_size=3)
    for key, item in data.items():
        assert item.facts.family == family
        assert _relative(head_output(item.X, item.facts), item.Y) <= TOLERANCE, key
    item = data[shown]
    assert says(item.facts)
    far = _relative(head_output(item.X, without(item.facts)), item.Y)
    assert far > FAR, far


@pytest.mark.parametrize("name", NAMES)
def test_the_heads_through_their_output_blocks_sum_to_the_attention_output(models, name):
    model = models[name]
    layer = attention_layers(model, [1])[0]
    captured = []
    hook = layer.sites[1].register_forward_hook(
        lambda module, args, output: captured.append(output.detach().double().numpy()))
    try:
        data = head_activations(model, IDS, [(1, h) for h in range(HEADS)])
        with torch.no_grad():
            model(input_ids=torch.as_tensor(IDS))
    finally:
        hook.remove()
    total = sum(item.Y.astype(np.float64) @ item.facts.w_o for item in data.values())
    total = total + data[1, 0].facts.b_o
    assert _relative(total, captured[-1]) <= TOLERANCE
    assert data[1, 0].facts.w_o.shape == (layer.head_dim, WIDTH)


@pytest.mark.parametrize("name", NAMES)
def test_the_distillation_student_at_full_rank_is_the_head(models, name):
    from intrinsic_rank.experiments.entropic._head_measure import _student, _with_bias_column

    item = head_activations(models[name], IDS, [(1, 1)])[1, 1]
    facts = item.facts
    X, maps = _with_bias_column(item.X, facts)
    width = min(facts.d_model, facts.head_dim)
    student = _student(facts, maps, [width], [0], 0)
    student.start_from(maps["query"])
    with torch.no_grad():
        out = student(torch.from_numpy(X)).numpy()[:, 0]
    assert _relative(out, item.Y) <= 1e-4  # float32 student, float64 reference


RANK = 1  # of the imposed queries


def _truncated(model, head=(1, 1)):
    """The head's data, and its facts with the query (weights and bias) truncated to RANK
    on its own realised queries."""
    item = head_activations(model, IDS, [head])[head]
    basis, _ = query_basis(item.X, item.facts)
    return item, truncated_head(item.facts, basis, RANK)


@pytest.mark.parametrize("name", NAMES)
def test_an_imposed_query_is_the_projection_before_any_norm_and_is_undone(models, name):
    model = models[name]
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    item, cut = _truncated(model)
    with imposed_queries(model, {(1, 1): (cut.w_q, cut.b_q)}) as edited:
        imposed = head_activations(edited, IDS, [(1, 1)])[1, 1]
    # the model with the edit computes what head_output computes with the query replaced
    assert _relative(head_output(item.X, cut), imposed.Y) <= TOLERANCE
    far = _relative(imposed.Y, item.Y)
    assert far > FAR, far
    with imposed_queries(model, {(1, 1): cut.w_q}) as edited:  # the weights alone
        imposed = head_activations(edited, IDS, [(1, 1)])[1, 1]
    assert _relative(head_output(item.X, item.facts, w_q=cut.w_q), imposed.Y) <= TOLERANCE
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def _capture(module, keep):
    store = []
    hook = module.register_forward_hook(
        lambda m, args, out: store.append(keep(out.detach().double()).reshape(-1, 8).numpy()))
    return store, hook


def _rank(matrix):
    values = np.linalg.svd(matrix, compute_uv=False)
    return int((values > 1e-5 * values[0]).sum())


@pytest.mark.parametrize("name, projection, query_of", [
    ("gpt_neox", lambda a: a.query_key_value,
     lambda out: out.view(*out.shape[:-1], HEADS, 3, 8)[..., 1, 0, :]),
    ("phi3", lambda a: a.qkv_proj, lambda out: out[..., 8:16]),
])
def test_with_partial_rotary_the_rank_acts_on_rotated_and_unrotated_channels(
        models, name, projection, query_of):
    model = models[name]
    attention = attention_layers(model, [1])[0].sites[0]
    item, cut = _truncated(model)
    store, hook = _capture(projection(attention), query_of)
    try:
        head_activations(model, IDS, [(1, 1)], check=False)
        with imposed_queries(model, {(1, 1): (cut.w_q, cut.b_q)}):
            head_activations(model, IDS, [(1, 1)], check=False)
    finally:
        hook.remove()
    original, imposed = store
    rotary = item.facts.rotary_dim
    assert 0 < rotary < 8 and _rank(original) == 8 and _rank(imposed) == RANK
    for part in (slice(0, rotary), slice(rotary, 8)):  # both parts change, one rank for both
        assert _relative(imposed[:, part], original[:, part]) > FAR


@pytest.mark.parametrize("name, head_slice", [
    ("qwen3", lambda out: out[..., 1, :] if out.shape[-1] == 8 else out[..., 8:16]),
    ("olmo2", lambda out: out[..., 8:16]),
])
def test_with_a_norm_after_the_projection_the_rank_acts_before_it(models, name, head_slice):
    model = models[name]
    attention = attention_layers(model, [1])[0].sites[0]
    item, cut = _truncated(model)
    store, hooks = [], []
    for module in (attention.q_proj, attention.q_norm):
        captured, hook = _capture(module, head_slice)
        store.append(captured)
        hooks.append(hook)
    try:
        with imposed_queries(model, {(1, 1): (cut.w_q, cut.b_q)}):
            head_activations(model, IDS, [(1, 1)], check=False)
    finally:
        for hook in hooks:
            hook.remove()
    (projected,), (normalised,) = store
    X = item.X.astype(np.float64).reshape(-1, WIDTH)
    # the imposed matrix is the projection itself, before the norm; the norm keeps its rank
    np.testing.assert_allclose(projected, X @ cut.w_q + cut.b_q, rtol=1e-4, atol=1e-4)
    assert _rank(projected) == RANK and _rank(normalised) == RANK


# -- never silently wrong -----------------------------------------------------------------


def _one_line(error):
    text = str(error)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_variant_the_reader_does_not_know_stops_before_anything_is_returned(models):
    from intrinsic_rank.experiments import head_rank_map

    model = models["llama3_rope"]
    output = attention_layers(model, [1])[0].sites[1]
    # the model now computes something its family's reader does not know of
    hook = output.register_forward_pre_hook(lambda module, args: (args[0] * 1.01,))
    try:
        with pytest.raises(ValueError, match=r"layer 1: the heads recomputed from their "
                           r"inputs differ from the model's own outputs by 0\.0(1|099) .*"
                           r"model_type='llama' is a variant of the Llama") as error:
            head_activations(model, IDS, [(0, 0), (1, 2)])
        _one_line(error.value)
        with pytest.raises(ValueError, match="model_type='llama' is a variant"):
            head_rank_map(model, ["random"], ["L1H0"], n_fit=4, n_heldout=2, length=8,
                          precision_draws=0, distill="none")
        data = head_activations(model, IDS, [(0, 0), (1, 2)], check=False)  # asked for
        assert _relative(head_output(data[1, 2].X, data[1, 2].facts), data[1, 2].Y) > 5e-3
    finally:
        hook.remove()


# -- the command on a saved folder ---------------------------------------------------------


@pytest.fixture(scope="module")
def folders(models, tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    for name, model in models.items():
        model.save_pretrained(root / name)
    return root


def _command(folder, out, *extra):
    from intrinsic_rank.cli import main

    return main(["head-ranks", str(folder), "--quick", "--heads", "all", "--corpora",
                 "random", "--epochs", "20", "--jobs", "1", "--out", str(out), "--quiet",
                 *extra])


@pytest.mark.parametrize("name", NAMES)
def test_head_ranks_quick_runs_on_a_saved_folder(folders, tmp_path, name):
    assert _command(folders / name, tmp_path / "out", "--no-impose") == 0
    saved = json.loads((tmp_path / "out" / "head_ranks.json").read_text())
    assert len(saved["records"]) == 2 * HEADS
    assert {r["width"] for r in saved["records"]} == {min(WIDTH, head_facts(
        str(folders / name), 0, 0).head_dim)}


def test_head_ranks_imposes_on_a_family_with_norms_over_the_layer(folders, tmp_path):
    assert _command(folders / "olmo2", tmp_path / "out", "--n-test", "4") == 0
    saved = json.loads((tmp_path / "out" / "head_ranks.json").read_text())
    assert {row["allocation"] for row in saved["impose"]["rows"]} >= {"r*_attn", "uniform"}


def _edited_config(source, target, **changes):
    import shutil

    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    config.update(changes)
    (target / "config.json").write_text(json.dumps(config))
    return target


def _mamba(root):
    torch.manual_seed(0)
    tf.MambaForCausalLM(tf.MambaConfig(hidden_size=16, num_hidden_layers=1, vocab_size=VOCAB,
                                       state_size=4, **SPECIAL)).save_pretrained(root / "mamba")
    return root / "mamba"


BAD = {
    "unknown model_type": (lambda folders, root: _edited_config(
        folders / "qwen3", root / "bad", model_type="qwen99"),
        (), "names model_type 'qwen99', which transformers"),
    "no attention layers": (lambda folders, root: _mamba(root), (),
                            "model_type='mamba': no attention layers"),
    "a text corpus without a tokenizer": (lambda folders, root: folders / "gpt_neox",
                                          ("--corpora", "code"), "tokenizer"),
    "config and weights disagree": (lambda folders, root: _edited_config(
        folders / "mistral_window", root / "bad", num_key_value_heads=1),
        (), "do not fit its config.json: .*k_proj.weight is"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_models_stop_the_command_in_one_line(folders, tmp_path, capsys, case):
    make, extra, message = BAD[case]
    folder = make(folders, tmp_path)
    capsys.readouterr()
    assert _command(folder, tmp_path / "out", "--no-impose", *extra) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out" / "head_ranks.json").exists()


def test_a_variant_stops_the_command_before_any_file(folders, tmp_path, capsys, monkeypatch):
    from transformers.models.llama import modeling_llama

    rotate = modeling_llama.apply_rotary_pos_emb
    monkeypatch.setattr(modeling_llama, "apply_rotary_pos_emb",
                        lambda q, k, cos, sin, *a: rotate(q, k, cos * 1.1, sin * 1.1, *a))
    assert _command(folders / "llama3_rope", tmp_path / "out", "--no-impose") == 2
    err = capsys.readouterr().err
    assert "layer 0: the heads recomputed" in err and "model_type='llama'" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "head_ranks.json").exists()
    parts = tmp_path / "out" / "head_ranks.parts"
    assert not parts.exists() or not any(p.is_file() for p in parts.rglob("*"))


def test_an_instance_whose_config_disagrees_with_its_weights_is_named(models):
    torch.manual_seed(0)
    model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**_kw(head_dim=8)))
    model.config.num_attention_heads = 8
    with pytest.raises(ValueError, match=r"its config says 8 query heads and 2 key/value heads "
                       r"of width 8, but its weights hold 4 and 2") as error:
        head_facts(model, 0, 0)
    _one_line(error.value)


def test_the_docs_table_names_every_family():
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "model_families.md")
    with open(docs, encoding="utf-8") as handle:
        text = handle.read()
    for family in HEAD_FAMILIES.values():
        assert family.title in text, family.title
