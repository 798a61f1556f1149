"""Causal and rotary attention students, and the estimator that sweeps their query rank.

The rotary student must compute what a rotary head of a causal LM computes (Hugging
Face's Llama attention is run on the same weights), its rank must bound the kernel at
every relative offset, and the estimator must find the planted query rank of a rotary
teacher.
"""

import math

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.nn import (
    LinearAttentionStudent,
    RotarySoftmaxStudent,
    SoftmaxAttentionStudent,
    rope_frequencies,
)


def _hf_llama_head(X, Wq, Wk, Wv, theta):
    """One causal head as transformers' Llama computes it: its RoPE, scale 1/sqrt(h), mask."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    d, h = Wq.shape
    config = LlamaConfig(hidden_size=d, num_attention_heads=1, num_key_value_heads=1,
                         head_dim=h, rope_theta=theta, intermediate_size=8,
                         num_hidden_layers=1, vocab_size=8)
    rotary = modeling_llama.LlamaRotaryEmbedding(config)
    L = X.shape[1]
    cos, sin = rotary(X, torch.arange(L)[None])
    q, k = modeling_llama.apply_rotary_pos_emb((X @ Wq)[:, None], (X @ Wk)[:, None], cos, sin)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(h)
    scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    return (scores.softmax(-1) @ (X @ Wv)[:, None])[:, 0]


def _set_head(student, Wq, Wk, slot=0):
    """Put a head's full query (as U S, V^T) and keys into one slot of the student."""
    with torch.no_grad():
        U, S, Vh = torch.linalg.svd(Wq, full_matrices=False)
        r = student.ranks[slot]
        student.query_in[slot].zero_()
        student.query_out[slot].zero_()
        student.query_in[slot, :, :r] = (U * S)[:, :r]
        student.query_out[slot, :, :r] = Vh[:r].T
        student.key[slot] = Wk


def test_the_rotary_student_is_the_head_transformers_computes():
    torch.manual_seed(0)
    d, h, L = 12, 8, 9
    X = torch.randn(3, L, d, dtype=torch.float64)
    Wq, Wk, Wv = (torch.randn(d, h, dtype=torch.float64) / math.sqrt(d) for _ in range(3))
    reference = _hf_llama_head(X, Wq, Wk, Wv, theta=500.0)
    student = RotarySoftmaxStudent(d=d, d_out=h, ranks=[h], rope_theta=500.0,
                                   value_map=Wv.numpy()).double()
    _set_head(student, Wq, Wk)
    with torch.no_grad():
        out = student(X)[:, 0]
    # transformers builds its cos/sin tables in float32: agreement to float32 rounding
    assert float((out - reference).norm() / reference.norm()) < 1e-6
    # the wrong pairing of channels (interleaved instead of rotate-half) is far off
    perm = torch.arange(h).view(2, h // 2).T.reshape(-1)
    _set_head(student, Wq[:, perm], Wk[:, perm])
    with torch.no_grad():
        assert float((student(X)[:, 0] - reference).norm() / reference.norm()) > 0.05


def test_rope_frequencies_are_the_llama_default():
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    config = LlamaConfig(hidden_size=16, num_attention_heads=2, head_dim=8, rope_theta=100000.0)
    hf = modeling_llama.LlamaRotaryEmbedding(config).inv_freq
    np.testing.assert_allclose(rope_frequencies(8, 100000.0).numpy(), hf.double().numpy(),
                               rtol=1e-6)


def test_the_query_rank_bounds_the_kernel_at_every_offset():
    student = RotarySoftmaxStudent(d=10, d_out=6, ranks=[1, 2, 3], rope_theta=50.0,
                                   init_scale=1.0, random_state=3).double()
    inv = rope_frequencies(6, 50.0)
    for delta in (0, 1, 5):
        angle = delta * inv
        c, s = torch.cos(angle), torch.sin(angle)
        rot = torch.zeros(6, 6, dtype=torch.float64)  # rotate-half pairs (i, i + 3)
        for i in range(3):
            rot[i, i], rot[i, i + 3], rot[i + 3, i], rot[i + 3, i + 3] = c[i], -s[i], s[i], c[i]
        with torch.no_grad():
            kernels = student.query_projection() @ rot.T @ student.key.transpose(1, 2)
        ranks = [int(torch.linalg.matrix_rank(k)) for k in kernels]
        assert ranks == [1, 2, 3]


@pytest.mark.parametrize("make", [
    lambda: SoftmaxAttentionStudent(d=4, d_out=3, ranks=[2], causal=True, random_state=1),
    lambda: LinearAttentionStudent(d=4, d_out=3, ranks=[2], causal=True, random_state=1),
    lambda: RotarySoftmaxStudent(d=4, d_out=4, ranks=[2], random_state=1),
])
def test_a_causal_output_never_reads_later_tokens(make):
    student = make()
    X = torch.randn(2, 6, 4)
    later = X.clone()
    later[:, 4:] = torch.randn(2, 2, 4)
    with torch.no_grad():
        a, b = student(X), student(later)
    torch.testing.assert_close(a[:, :, :4], b[:, :, :4])
    assert not torch.allclose(a[:, :, 4:], b[:, :, 4:])


def test_a_known_value_map_is_not_trained():
    W = np.arange(12.0).reshape(4, 3) / 10
    student = SoftmaxAttentionStudent(d=4, d_out=3, ranks=[1, 2], value_map=W)
    assert "value" not in dict(student.named_parameters())
    X = torch.randn(5, 3, 4)
    with torch.no_grad():
        out = student(X)
        expected = student.mixer(X) @ (X @ torch.as_tensor(W, dtype=torch.float32))[:, None]
    torch.testing.assert_close(out, expected)


# -- the estimator ---------------------------------------------------------------------


def _rotary_task(k=2, n=600, d=24, h=8, L=12, theta=100.0, seed=1):
    """A deterministic rotary teacher of query rank k (noise floor zero)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, L, d)).astype(np.float32)
    Wv = rng.standard_normal((d, h)) / np.sqrt(d)
    teacher = RotarySoftmaxStudent(d=d, d_out=h, ranks=[k], rope_theta=theta, init_scale=3.0,
                                   random_state=seed, value_map=Wv)
    with torch.no_grad():
        Y = teacher(torch.as_tensor(X))[:, 0].numpy()
    return X, Y, Wv, teacher


ROTARY = dict(attention="softmax", positional="rope", causal=True, rope_theta=100.0,
              max_epochs=150, random_state=0)


@pytest.fixture(scope="module")
def rotary_task():
    return _rotary_task()


@pytest.mark.parametrize("noise_floor", [0.0, None])
def test_the_planted_query_rank_of_a_rotary_teacher_is_found(rotary_task, noise_floor):
    X, Y, Wv, _ = rotary_task
    est = AttentionRankEstimator(**ROTARY, value_map=Wv, rank_grid=[1, 2, 4, 8],
                                 noise_floor=noise_floor).fit(X, Y)
    # a zero noise floor is a floor like any other: r* = 2, never 1
    assert est.rank_ == 2 and est.floor_reached_
    risks = [r["heldout_risk"] for r in est.sweep_]
    variance = est.excess_tol_ / est.tol
    assert risks[0] / variance > 0.1 and risks[1] / variance < 0.005
    assert est.kernel_.shape == (24, 24) and est.numerical_rank_ == 2


def test_a_warm_start_begins_at_the_teacher(rotary_task):
    X, Y, Wv, teacher = rotary_task
    with torch.no_grad():
        weights = {"query": teacher.query_projection()[0].numpy(),
                   "key": teacher.key[0].numpy()}
    est = AttentionRankEstimator(**{**ROTARY, "max_epochs": 2, "lr": 1e-4}, value_map=Wv,
                                 rank_grid=[1, 2], init_weights=weights,
                                 noise_floor=0.0).fit(X, Y)
    variance = est.excess_tol_ / est.tol
    assert est.sweep_[1]["heldout_risk"] / variance < 1e-4  # rank 2 starts at the teacher
    assert est.sweep_[0]["heldout_risk"] / variance > 0.05  # rank 1 at its truncation
    with pytest.raises(ValueError, match="must have shape"):
        clone(est).set_params(init_weights={"query": weights["query"][:5],
                                            "key": weights["key"][:5]}).fit(X, Y)


def test_units_far_from_one_keep_the_rank_and_the_value_map_consistent(rotary_task):
    X, Y, Wv, _ = rotary_task
    scale = 2.0 ** 12  # outside the [1e-2, 1e2] window: trained in the data's own units
    est = AttentionRankEstimator(**ROTARY, value_map=Wv / scale, rank_grid=[1, 2],
                                 noise_floor=0.0).fit(X * scale, Y)
    assert est.x_scale_ != 1.0 and est.rank_ == 2


def test_rotary_estimator_is_a_scikit_learn_estimator(rotary_task):
    X, Y, Wv, _ = rotary_task
    est = AttentionRankEstimator(**{**ROTARY, "max_epochs": 40}, value_map=Wv)
    params = est.get_params()
    assert params["positional"] == "rope" and params["causal"] is True
    assert clone(est).get_params()["value_map"] is not Wv
    search = GridSearchCV(est, {"rank": [1, 2]}, cv=2).fit(X[:300], Y[:300])
    assert search.best_params_ == {"rank": 2}


@pytest.mark.parametrize("params, message", [
    (dict(attention="linear", positional="rope"), "positional='rope' applies to attention="),
    (dict(attention="softmax", positional="alibi"), "The 'positional' parameter .* must be "
                                                    "None or a str among {'rope'}"),
    (dict(attention="fixed", causal=True), "causal=True applies to attention in"),
    (dict(attention="softmax", causal=1), "The 'causal' parameter .* must be an instance of "
                                          "'bool'"),
    (dict(attention="block", value_map=np.ones((3, 3))), "value_map applies to attention in"),
    (dict(attention="softmax", value_map=np.ones(3)), "value_map must be a finite 2-D array"),
    (dict(attention="softmax", value_map=np.ones((5, 2))), r"shape \(d, d_out\) = \(3, 3\)"),
    (dict(attention="softmax", init_weights={"query": np.ones((3, 3))}), "exactly the keys"),
    (dict(attention="softmax", positional="rope", rope_theta=0.0), "rope_theta"),
    (dict(attention="softmax", positional="rope", student_options={"head_dim": 3}),
     "even integer"),
    (dict(attention="softmax", positional="rope", student_options={"causal": False}),
     "cannot set"),
])
def test_bad_sequence_options_are_named(params, message):
    X = np.random.default_rng(0).standard_normal((20, 4, 3))
    with pytest.raises(ValueError, match=message):
        AttentionRankEstimator(**params, max_epochs=1).fit(X, X)


def test_the_rotary_grid_stops_at_the_head_width(rotary_task):
    X, Y, Wv, _ = rotary_task
    with pytest.raises(ValueError, match=r"min\(d, head_dim\) = 8"):
        AttentionRankEstimator(**ROTARY, value_map=Wv, rank_grid=[1, 16]).fit(X, Y)
