"""Imposed query projections: the head computes what head_output says, and the undo is exact.

On the packaged "default" model (a TinyCausalLM) and on tiny random Llama and GPT-2
models built here: a head's own w_q changes nothing, a rank-1 truncation changes the
head's hooked output Y exactly as head_output(X, facts, w_q=...) predicts, and every
weight is bit-identical after the block, whether it ended normally or by an exception.
"""

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    head_activations,
    head_facts,
    head_output,
    imposed_queries,
    lm_loss,
)
from intrinsic_rank.nn import LoadedModel, load_model
from seeded import own_weights

TOLERANCE = 1e-5   # ||head_output - Y|| / ||Y||, float32 forward against float64 recomputation
FAR = 1e-2         # the truncation must move Y at least this much, or the test shows nothing
# (measured: 0.0119 on the embedded model's fixed weights, 1.23 on the Llama and 0.069 on the
# GPT-2 below, whose weights come from the test's own generator)
IDS = np.random.default_rng(0).integers(0, 64, size=(6, 24))


def _relative(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def _rank_1(w_q):
    u, s, vt = np.linalg.svd(w_q, full_matrices=False)
    return s[0] * np.outer(u[:, 0], vt[0])


def _snapshot(module):
    return {name: p.detach().clone() for name, p in module.state_dict().items()}


def _unchanged(module, snapshot):
    state = module.state_dict()
    return all(torch.equal(state[name], value) for name, value in snapshot.items())


@pytest.fixture()
def lm():
    return load_model("default").module


def _tf():
    return pytest.importorskip("transformers")


def _llama():
    tf = _tf()
    config = tf.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                            num_hidden_layers=2, intermediate_size=64, vocab_size=64,
                            max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
                            pad_token_id=0)
    return _sharpened(own_weights(tf.LlamaForCausalLM(config), 0, gain=0.1))


def _gpt2():
    tf = _tf()
    config = tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64, n_positions=64,
                           bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return _sharpened(own_weights(tf.GPT2LMHeadModel(config), 0, gain=0.1))


def _sharpened(model):
    """Query/key weights x 20, so that attention is far from uniform and a query edit shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight", "c_attn.weight")):
                p.mul_(20.0)
    return model.eval()


MODELS = {"default": lambda: load_model("default").module, "llama": _llama, "gpt2": _gpt2}


# ---------------------------------------------------------------- the edit and its undo


@pytest.mark.parametrize("family", list(MODELS))
def test_a_rank_1_query_changes_y_as_head_output_predicts(family):
    model = MODELS[family]()
    before = _snapshot(model)
    facts = head_facts(model, 1, 3)
    rank_1 = _rank_1(facts.w_q)
    (original,) = head_activations(model, IDS, [(1, 3)]).values()
    with imposed_queries(model, {(1, 3): rank_1}) as edited:
        assert edited is model
        np.testing.assert_array_equal(head_facts(model, 1, 3).w_q,
                                      rank_1.astype(np.float32).astype(np.float64))
        (data,) = head_activations(model, IDS, [(1, 3)]).values()
    np.testing.assert_array_equal(data.X, original.X)  # layer 1's input: nothing above moved
    assert _relative(head_output(data.X, facts, w_q=rank_1), data.Y) <= TOLERANCE
    assert _relative(original.Y, data.Y) > FAR
    assert _unchanged(model, before)


@pytest.mark.parametrize("family", ["default", "gpt2"])
def test_a_query_bias_given_with_the_projection_is_imposed_too(family):
    import dataclasses

    model = MODELS[family]()
    before = _snapshot(model)
    facts = head_facts(model, 1, 3)
    rank_1, bias = _rank_1(facts.w_q), facts.b_q * 0.5 + 0.3
    (original,) = head_activations(model, IDS, [(1, 3)]).values()
    with imposed_queries(model, {(1, 3): (rank_1, bias)}):
        np.testing.assert_allclose(head_facts(model, 1, 3).b_q, bias, rtol=1e-6)
        (data,) = head_activations(model, IDS, [(1, 3)]).values()
    moved = dataclasses.replace(facts, w_q=rank_1, b_q=bias)
    assert _relative(head_output(data.X, moved), data.Y) <= TOLERANCE
    assert _unchanged(model, before)


def test_a_bias_for_queries_without_one_is_refused_unless_zero():
    model = _llama()
    facts = head_facts(model, 1, 3)
    with pytest.raises(ValueError, match=r"projections\[L1H3\] gives a query bias, but the "
                                         "model's queries have none"):
        with imposed_queries(model, {(1, 3): (facts.w_q, np.ones(facts.head_dim))}):
            pass
    with imposed_queries(model, {(1, 3): (facts.w_q, np.zeros(facts.head_dim))}):
        pass
    with pytest.raises(ValueError, match="its query bias must be a finite array of shape"):
        with imposed_queries(model, {(1, 3): (facts.w_q, np.ones(3))}):
            pass


@pytest.mark.parametrize("family", list(MODELS))
def test_imposing_a_heads_own_query_leaves_the_loss_identical(family):
    model = MODELS[family]()
    before = _snapshot(model)
    loss = lm_loss(model, IDS)
    own = {(layer, head): head_facts(model, layer, head).w_q
           for layer in range(2) for head in range(4)}
    with imposed_queries(model, own):
        assert lm_loss(model, IDS) == loss
        assert _unchanged(model, before)
    with imposed_queries(model, {key: _rank_1(w) for key, w in own.items()}):
        assert lm_loss(model, IDS) != loss
    assert lm_loss(model, IDS) == loss and _unchanged(model, before)


@pytest.mark.parametrize("stop", [RuntimeError("inside"), KeyboardInterrupt()])
def test_the_weights_come_back_after_an_exception(lm, stop):
    before = _snapshot(lm)
    rank_1 = _rank_1(head_facts(lm, 0, 1).w_q)
    with pytest.raises(type(stop)):
        with imposed_queries(lm, {"L0H1": rank_1, (1, 0): np.zeros((64, 16))}):
            assert not _unchanged(lm, before)
            raise stop
    assert _unchanged(lm, before)


def test_nested_blocks_restore_what_each_found(lm):
    before = _snapshot(lm)
    facts = head_facts(lm, 1, 2)
    with imposed_queries(lm, {(1, 2): _rank_1(facts.w_q)}):
        outer = _snapshot(lm)
        with imposed_queries(lm, {(1, 2): np.zeros_like(facts.w_q)}):
            assert not np.any(head_facts(lm, 1, 2).w_q)
        assert _unchanged(lm, outer)
    assert _unchanged(lm, before)


def test_a_name_is_loaded_and_handed_to_the_block():
    w_q = head_facts("default", 0, 0).w_q
    with imposed_queries("default", {(0, 0): 2 * w_q}) as loaded:
        assert isinstance(loaded, LoadedModel) and loaded.label == "default"
        np.testing.assert_array_equal(head_facts(loaded, 0, 0).w_q, 2 * w_q)


# ---------------------------------------------------------------- refused before any edit


@pytest.mark.parametrize("bad, message", [
    (np.zeros((64, 15)), r"projections\[L1H0\] must have shape \(64, 16\) \(d_model, "
                         r"head_dim\); got \(64, 15\)"),
    (np.full((64, 16), np.nan), r"projections\[L1H0\] holds NaN or infinity"),
    (np.full((64, 16), 1e39), r"projections\[L1H0\] holds values beyond the range of the "
                              r"model's torch.float32 weights"),
    ("abc", r"projections\[L1H0\] must (be a real array|have shape)"),
])
def test_a_bad_matrix_is_refused_before_any_weight_changes(lm, bad, message):
    before = _snapshot(lm)
    good = _rank_1(head_facts(lm, 0, 0).w_q)
    with pytest.raises(ValueError, match=message) as error:
        with imposed_queries(lm, {(0, 0): good, "L1H0": bad}):
            pytest.fail("the block ran")  # pragma: no cover
    assert "\n" not in str(error.value)
    assert _unchanged(lm, before)


@pytest.mark.parametrize("projections, message", [
    ({(2, 0): np.zeros((64, 16))}, "layer=2 is out of range: TinyCausalLM has layers 0..1"),
    ({(0, 4): np.zeros((64, 16))}, "head=4 is out of range"),
    ({(0, 1): np.zeros((64, 16)), "L0H1": np.zeros((64, 16))}, "names head L0H1 twice"),
    ({"X1": np.zeros((64, 16))}, "'L<layer>H<head>'"),
    ([np.zeros((64, 16))], "projections must map"),
])
def test_bad_heads_are_refused_in_one_line(lm, projections, message):
    before = _snapshot(lm)
    with pytest.raises(ValueError, match=message) as error:
        with imposed_queries(lm, projections):
            pass  # pragma: no cover
    assert "\n" not in str(error.value) and _unchanged(lm, before)


# ---------------------------------------------------------------- the loss


def test_the_loss_is_the_mean_negative_log_likelihood_of_the_next_token(lm):
    ids = torch.as_tensor(IDS)
    with torch.no_grad():
        log_p = torch.log_softmax(lm(ids).double(), dim=-1)[:, :-1]
    expected = -log_p.gather(-1, ids[:, 1:, None]).mean().item()
    assert lm_loss(lm, IDS) == pytest.approx(expected, rel=1e-6)
    assert lm_loss(lm, IDS, batch_size=1) == pytest.approx(expected, rel=1e-6)
    assert lm_loss(load_model("default"), IDS) == pytest.approx(expected, rel=1e-6)


def test_the_loss_of_a_transformers_lm_is_its_own_shifted_cross_entropy():
    model = _llama()
    ids = torch.as_tensor(IDS)
    with torch.no_grad():
        expected = model(input_ids=ids, labels=ids).loss.item()
    assert lm_loss(model, IDS, batch_size=4) == pytest.approx(expected, rel=1e-5)


def test_the_training_flags_are_restored(lm):
    lm.train()
    lm_loss(lm, IDS)
    assert all(m.training for m in lm.modules())


@pytest.mark.parametrize("kwargs, message", [
    (dict(input_ids=IDS[:, :1]), r"at least 2 positions .*got shape \(6, 1\)"),
    (dict(input_ids=IDS + 64), r"input_ids must lie in \[0, 64\)"),
    (dict(input_ids=IDS, batch_size=0), "batch_size must be an integer >= 1"),
])
def test_bad_loss_requests_are_one_line(lm, kwargs, message):
    with pytest.raises(ValueError, match=message):
        lm_loss(lm, **kwargs)


def test_a_model_without_its_next_token_head_is_refused():
    model = _llama().model  # the bare LlamaModel
    with pytest.raises(ValueError, match="has no next-token head"):
        lm_loss(model, IDS)
