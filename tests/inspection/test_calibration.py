"""Every head's query basis on calibration windows, once or layer by layer as edited.

Checked against what the model itself computes: the heads' outputs through their
output rows add up to the hooked output of the layer's output projection; the
sequential fit of layer 0 is the one-pass fit (its inputs are not edited) and the
later layers see the edited inputs; the loss's gradient at the queries matches
finite differences of the model's own loss; the model comes back bit for bit.
"""

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    head_activations,
    imposed_queries,
    lm_loss,
    model_query_bases,
    query_edits,
    query_loss_gradients,
    sequential_query_bases,
)
from intrinsic_rank.nn import load_model

IDS = np.random.default_rng(0).integers(0, 64, size=(6, 16))


def _gpt2():
    tf = pytest.importorskip("transformers")
    generator = torch.Generator().manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64,
                                             n_positions=64))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (0.3 if p.ndim > 1 else 0.1))
    return model.eval()


@pytest.fixture(params=["default", "gpt2"])
def model(request):
    return load_model("default").module if request.param == "default" else _gpt2()


def _snapshot(module):
    return {name: p.detach().clone() for name, p in module.state_dict().items()}


def _same(module, snapshot):
    return all(torch.equal(module.state_dict()[k], v) for k, v in snapshot.items())


def _hooked_attention_output(model, layer):
    """The output of the layer's output projection, read by a hook."""
    from intrinsic_rank.inspection._head_io import _resolve, _sites

    bare, kind, _ = _resolve(model)
    _, site = _sites(bare, kind, layer)
    taken = []
    handle = site.register_forward_hook(lambda m, a, out: taken.append(out.detach()))
    try:
        with torch.no_grad():
            bare(torch.as_tensor(IDS)) if kind == "tiny" else bare(input_ids=torch.as_tensor(IDS))
    finally:
        handle.remove()
    return taken[0].double().numpy()


def test_the_heads_through_their_rows_are_the_layers_attention_output(model):
    pairs = [(1, h) for h in range(4)]
    data = head_activations(model, IDS, pairs)
    total = sum(np.asarray(data[k].Y, np.float64) @ data[k].facts.w_o for k in pairs)
    hooked = _hooked_attention_output(model, 1)
    bias = hooked - total  # what is left is the projection's bias, the same at every position
    assert np.allclose(bias, bias[0, 0], atol=1e-5)
    bases = model_query_bases(model, IDS, max_windows=2)
    energy = float(np.mean(np.sum(hooked ** 2, axis=-1)))
    assert bases[1, 0].output_energy == pytest.approx(energy, rel=1e-5)


def test_every_head_gets_a_basis_and_a_falling_curve(model):
    bases = model_query_bases(model, IDS, max_windows=2)
    assert sorted(bases) == [(layer, head) for layer in range(2) for head in range(4)]
    for head in bases.values():
        assert head.curve[-1] == 0 and np.all(np.diff(head.curve) <= 1e-15)
        assert head.curve[0] > 0
    plain = model_query_bases(model, IDS, metric=None)
    assert all(h.curve is None for h in plain.values())


def test_edits_cut_each_head_to_its_rank_and_leave_full_widths_alone(model):
    bases = model_query_bases(model, IDS, max_windows=2)
    width = bases[0, 0].facts.head_dim
    edits, factors = query_edits(bases, {(0, 0): 2, (1, 3): width})
    assert list(edits) == [(0, 0)] and list(factors) == [(0, 0)]
    A, a, C = factors[0, 0]
    w_q = edits[0, 0][0] if isinstance(edits[0, 0], tuple) else edits[0, 0]
    assert np.linalg.matrix_rank(w_q) == 2 and np.allclose(w_q, A @ C)
    with pytest.raises(ValueError, match="rank of L0H0"):
        query_edits(bases, {(0, 0): 0})


def test_the_sequential_fit_reads_the_edited_inputs(model):
    snapshot = _snapshot(model)
    ranks = {(0, h): 2 for h in range(4)} | {(1, h): 2 for h in range(4)}
    once = model_query_bases(model, IDS, max_windows=2)
    layered = sequential_query_bases(model, IDS, ranks, max_windows=2)
    assert _same(model, snapshot)  # restored after the pass
    for h in range(4):  # layer 0's inputs are the model's own: the same fit
        assert np.allclose(layered[0, h].basis.basis[:, :2] @ layered[0, h].basis.basis[:, :2].T,
                           once[0, h].basis.basis[:, :2] @ once[0, h].basis.basis[:, :2].T,
                           atol=1e-6)
    # layer 1 is fitted on what the cut layer 0 gives it
    moved = [np.abs(layered[1, h].plain.energies - once[1, h].plain.energies).max()
             for h in range(4)]
    assert max(moved) > 1e-6


def test_the_gradient_at_the_queries_is_the_losss_own():
    lm = load_model("default")
    ids = IDS[:4]
    g = query_loss_gradients(lm, ids, [(1, 2)], batch_size=4)[1, 2]
    from intrinsic_rank.inspection import head_facts

    facts = head_facts(lm, 1, 2)
    step = 0.05  # the float32 loss's rounding (about 5e-7) stays 1 % of the difference
    for a in (0, 5):
        shift = np.zeros(facts.head_dim)
        shift[a] = step
        with imposed_queries(lm, {(1, 2): (facts.w_q, facts.b_q + shift)}):
            up = lm_loss(lm, ids)
        with imposed_queries(lm, {(1, 2): (facts.w_q, facts.b_q - shift)}):
            down = lm_loss(lm, ids)
        # the bias moves every query alike: d loss / d b_a = sum_t g_t[a]
        assert float(g[..., a].sum()) == pytest.approx((up - down) / (2 * step), rel=2e-2,
                                                       abs=1e-6)
