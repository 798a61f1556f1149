"""The output metric of a head's queries, and the queries cut to a rank in it.

The metric is checked against central finite differences of the head's output through
its output rows (head_output, float64, an independent recomputation), on the embedded
model (absolute positions, biases) and on a tiny random Llama (rotary, grouped keys);
the cut against Eckart-Young in the metric and against the data-aware truncation when
the metric is the identity.
"""

import dataclasses

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    head_activations,
    head_output,
    metric_query_basis,
    metric_truncated_query,
    output_error_curve,
    query_basis,
    query_output_metric,
)
from intrinsic_rank.nn import load_model

IDS = np.random.default_rng(0).integers(0, 64, size=(4, 20))


def _llama():
    tf = pytest.importorskip("transformers")
    generator = torch.Generator().manual_seed(0)
    config = tf.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                            num_hidden_layers=2, intermediate_size=64, vocab_size=64,
                            max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
                            pad_token_id=0)
    model = tf.LlamaForCausalLM(config)
    with torch.no_grad():  # the test's own weights, large enough for a peaked attention
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (0.6 if p.ndim > 1 else 0.1))
    return model.eval()


@pytest.fixture(params=["default", "llama"])
def head(request):
    model = load_model("default").module if request.param == "default" else _llama()
    data = head_activations(model, IDS, [(1, 2)])[1, 2]
    return model, data, data.facts.w_o


def _finite_difference_metric(data, w_o, step=1e-4):
    facts = data.facts
    columns = []
    for a in range(facts.head_dim):
        shift = np.zeros(facts.head_dim)
        shift[a] = step
        up = head_output(data.X, dataclasses.replace(facts, b_q=facts.b_q + shift)) @ w_o
        down = head_output(data.X, dataclasses.replace(facts, b_q=facts.b_q - shift)) @ w_o
        columns.append((up - down) / (2 * step))  # J_i e_a at every position
    J = np.stack(columns, axis=-1)  # (n, L, d_model, head_dim)
    return np.einsum("nloa,nlob->ab", J, J) / (J.shape[0] * J.shape[1])


def test_the_metric_is_the_mean_of_the_output_jacobians(head):
    _, data, w_o = head
    metric = query_output_metric(data.X, data.facts, w_o)
    expected = _finite_difference_metric(data, w_o)
    # the head's output depends on its queries, far above the differences' float64 noise
    # (about 1e-12 here; the smallest metric of the two heads is 6e-6)
    assert np.abs(expected).max() > 1e-8
    assert np.abs(metric - expected).max() <= 2e-3 * np.abs(expected).max()


def test_the_identity_metric_is_the_data_aware_truncation(head):
    _, data, _ = head
    plain = metric_query_basis(data.X, data.facts)
    basis, _ = query_basis(data.X, data.facts)
    for rank in (1, 3, 7):
        A, a, C = metric_truncated_query(data.facts, plain, rank)
        projector = basis[:, :rank] @ basis[:, :rank].T
        assert np.allclose(A @ C, data.facts.w_q @ projector, atol=1e-8)
        assert np.allclose(a @ C, data.facts.b_q @ projector, atol=1e-8)


def test_the_cut_is_eckart_young_in_the_metric(head):
    _, data, w_o = head
    facts = data.facts
    metric = query_output_metric(data.X, facts, w_o)
    basis = metric_query_basis(data.X, facts, metric)
    tokens = np.asarray(data.X, np.float64).reshape(-1, facts.d_model)
    queries = tokens @ facts.w_q + facts.b_q
    rng = np.random.default_rng(1)
    for rank in (1, 4):
        A, a, C = metric_truncated_query(facts, basis, rank)
        residual = (queries - (tokens @ (A @ C) + a @ C)) @ basis.root
        left = float(np.sum(residual ** 2)) / len(tokens)
        assert left == pytest.approx(basis.energies[rank:].sum(), rel=1e-8)
        # any other rank-r projection of the queries leaves more in the metric
        other, _ = np.linalg.qr(rng.normal(size=(facts.head_dim, rank)))
        moved = queries @ basis.root @ (np.eye(facts.head_dim) - other @ other.T)
        assert float(np.sum(moved ** 2)) / len(tokens) > left


def test_the_curve_predicts_the_output_error_of_a_small_cut(head):
    model, data, w_o = head
    facts = data.facts
    basis = metric_query_basis(data.X, facts, query_output_metric(data.X, facts, w_o))
    energy = float(np.mean(np.sum((np.asarray(data.Y, np.float64) @ w_o) ** 2, axis=-1)))
    curve = output_error_curve(basis, energy)
    assert curve[-1] == 0 and np.all(np.diff(curve) <= 0)
    rank = facts.head_dim - 2  # a small cut: the first order holds
    A, a, C = metric_truncated_query(facts, basis, rank)
    cut = head_output(data.X, dataclasses.replace(facts, w_q=A @ C, b_q=a @ C))
    measured = np.mean(np.sum(((cut - data.Y) @ w_o) ** 2, axis=-1)) / energy
    assert measured == pytest.approx(curve[rank], rel=0.25)


def test_bad_input_is_named(head):
    _, data, w_o = head
    with pytest.raises(ValueError, match="w_o must be a finite array of shape"):
        query_output_metric(data.X, data.facts, w_o[:, :3].T)
    with pytest.raises(ValueError, match="metric must be a finite"):
        metric_query_basis(data.X, data.facts, np.eye(3))
    with pytest.raises(ValueError, match="rank"):
        metric_truncated_query(data.facts, metric_query_basis(data.X, data.facts), 0)
    with pytest.raises(ValueError, match="output_energy"):
        output_error_curve(metric_query_basis(data.X, data.facts), 0.0)
