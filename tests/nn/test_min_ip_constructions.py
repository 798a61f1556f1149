"""Min-IP heads: the exact constructions, checked exhaustively at small m."""

import itertools

import numpy as np
import pytest
import torch

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.metrics import exact_sequence_error, exact_sequence_scorer
from intrinsic_rank.nn import (
    KernelAttentionStudent,
    dense_error_bound,
    dense_min_ip_head,
    rank_one_min_ip_head,
)


def all_sequences(n_bits, length):
    tokens = np.array(list(itertools.product([0.0, 1.0], repeat=n_bits)))
    index = np.array(list(itertools.product(range(len(tokens)), repeat=length)))
    return tokens[index]  # (2^(m*length), length, m)


def min_ip(X):
    return np.einsum("nim,njm->nij", X, X).min(axis=-1)


@pytest.mark.parametrize("length", [1, 2])
@pytest.mark.parametrize("n_bits", [1, 3, 5])
def test_rank_one_head_solves_lengths_one_and_two_exactly(n_bits, length):
    X = all_sequences(n_bits, length)
    head = rank_one_min_ip_head()
    out = head(torch.tensor(X)).numpy()
    np.testing.assert_array_equal(out, min_ip(X))  # exact, no rounding
    assert head.feature_rank(torch.tensor(X)) == 1


def test_dense_head_solves_length_three_with_constant_temperature():
    for n_bits in (2, 4):
        X = all_sequences(n_bits, 3)  # 4,096 sequences at m = 4
        out = dense_min_ip_head(0.25)(torch.tensor(X)).numpy()
        target = min_ip(X)
        assert np.abs(out - target).max() < dense_error_bound(3, 0.25) + 1e-9
        assert exact_sequence_error(target, out) == 0.0


def test_rank_one_head_fails_at_length_three_on_exhaustive_data():
    X = all_sequences(3, 3)
    out = rank_one_min_ip_head()(torch.tensor(X)).numpy()
    # the length-2 construction is wrong on 132 of the 512 length-3 sequences
    assert exact_sequence_error(min_ip(X), out) == pytest.approx(132 / 512)


def rank_one_witness():
    """Six length-3 sequences no rank-1 normalised kernel head solves (error < 1/2).

    Queries q = 11110000 and q' = 00001111, candidates u = q' and w = q, query last.
    Rank 1 makes the attention weights query-independent, ``pi(x) = phi_K(x)``, so
    the output for (u, w, q) is the weighted average of the outputs for (u, u, q)
    and (w, w, q) with weight ``(2 pi_w + pi_q) / (2 (pi_u + pi_w + pi_q))`` on the
    latter. Targets 0, 4, 0 within 1/2 force that weight below 1/3, i.e.
    ``pi_u > 2 pi_w``; the reversed query q' forces ``pi_w > 2 pi_u``.
    """
    q = np.array([1, 1, 1, 1, 0, 0, 0, 0], dtype=float)
    p = 1 - q
    u, w = p, q
    X = np.array([[a, b, query] for query in (q, p) for a, b in ((u, u), (w, w), (u, w))])
    return X, min_ip(X)[:, -1]


def test_rank_one_weighted_average_identity_behind_the_witness():
    # For any rank-1 head, out(u, w, q) = lam out(u, u, q) + (1 - lam) out(w, w, q).
    X, _ = rank_one_witness()
    student = KernelAttentionStudent(d=8, d_out=1, ranks=[1], hidden=16, random_state=3)
    with torch.no_grad():
        for p in student.parameters():
            p.add_(torch.randn_like(p))  # an arbitrary rank-1 head
        out = student(torch.tensor(X, dtype=torch.float32))[:, 0, -1, 0].double().numpy()
        h = student._encode(torch.tensor(X[:3], dtype=torch.float32))
        pi = student._features(h, "key_map")[0, 0, :, 0].double().numpy()  # pi_u, pi_u, pi_q
    pi_u, pi_q = pi[0], pi[2]
    pi_w = pi_q  # w is the token q
    lam = (2 * pi_u + pi_q) / (2 * (pi_u + pi_w + pi_q))
    assert out[2] == pytest.approx(lam * out[0] + (1 - lam) * out[1], rel=1e-4)


def test_trained_rank_one_heads_fail_the_witness_where_rank_two_succeeds():
    X, y = rank_one_witness()
    X = np.repeat(X, 20, axis=0)
    y = np.repeat(y, 20)
    errors = {}
    for rank in (1, 2):
        per_seed = []
        for seed in range(3):
            est = AttentionRankEstimator(
                attention="kernel", rank=rank, max_epochs=300, lr=1e-2, batch_size=40,
                student_options={"hidden": 16}, random_state=seed,
            ).fit(X, y)
            per_seed.append(exact_sequence_error(y, est.predict(X)))
        errors[rank] = min(per_seed)
    assert errors[1] > 0  # no seed solves all six sequences at rank 1
    assert errors[2] == 0.0


def test_kernel_and_dense_students_train_through_the_estimator_and_scorer():
    rng = np.random.RandomState(0)
    X = (rng.rand(1500, 3, 6) < 0.5).astype(float)
    y = min_ip(X)[:, -1]
    dense = AttentionRankEstimator(attention="dense", max_epochs=60, random_state=0).fit(X, y)
    assert exact_sequence_error(y, dense.predict(X)) < 0.02
    assert -exact_sequence_scorer(dense, X, y) == exact_sequence_error(y, dense.predict(X))
    sweep = AttentionRankEstimator(
        attention="kernel", rank_grid=[1, 8], max_epochs=60, random_state=0
    ).fit(X, y)
    assert sweep.kernels_.shape[1:] == (64, 64)  # kernel between the 2^6 tokens
    assert np.linalg.matrix_rank(sweep.kernels_[0].astype(np.float64), rtol=1e-4) == 1


def test_kernel_rank_limit_and_options_errors():
    X = np.zeros((20, 3, 4))
    y = np.zeros(20)
    with pytest.raises(ValueError, match="feature-rank limit 16"):
        AttentionRankEstimator(attention="kernel", rank=17, max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="student_options cannot set \\['ranks'\\]"):
        AttentionRankEstimator(
            attention="kernel", rank=2, max_epochs=1, student_options={"ranks": [3]}
        ).fit(X, y)
    with pytest.raises(ValueError, match=r"student_options\[.temperature.\] must be a finite number > 0"):
        AttentionRankEstimator(
            attention="dense", max_epochs=1, student_options={"temperature": 0.0}
        ).fit(X, y)


# -- AttentionRankEstimator(attention="kernel", feature_map=...) ------------------------


def _min_ip_task():
    from intrinsic_rank.datasets import make_min_ip

    return make_min_ip(300, 3, 4, random_state=0)


def test_estimator_feature_map_reaches_the_student_and_changes_the_fit():
    X, y = _min_ip_task()
    options = dict(attention="kernel", rank_grid=[1, 2], max_epochs=3, random_state=0,
                   student_options={"hidden": 8})
    # three epochs reach no floor: the estimator says so, which is not the point here
    with pytest.warns(UserWarning) as caught:
        default = AttentionRankEstimator(**options).fit(X, y)
        explicit = AttentionRankEstimator(feature_map="exp", **options).fit(X, y)
        relu = AttentionRankEstimator(feature_map="relu", **options).fit(X, y)
    assert any("not supported by the data" in str(w.message) for w in caught)
    assert relu.net_.module_.feature_map == "relu"
    assert default.net_.module_.feature_map == "exp"
    # "exp" is the default map: the same numbers; another map trains another model
    assert [r["heldout_risk"] for r in explicit.sweep_] == \
        [r["heldout_risk"] for r in default.sweep_]
    assert [r["heldout_risk"] for r in relu.sweep_] != \
        [r["heldout_risk"] for r in default.sweep_]
    assert "feature_map" in AttentionRankEstimator().get_params()


@pytest.mark.parametrize("params, message", [
    (dict(attention="softmax", feature_map="relu"),
     "feature_map applies to attention='kernel' only; got attention='softmax'"),
    (dict(attention="kernel", feature_map="cosine"),
     r"The 'feature_map' parameter of AttentionRankEstimator must be None or a str among "
     r"\{.*'elu\+1'.*\}\. Got 'cosine' instead"),
    (dict(attention="kernel", student_options={"feature_map": "relu"}),
     r"student_options cannot set \['feature_map'\]"),
])
def test_estimator_feature_map_bad_input(params, message):
    X, y = _min_ip_task()
    with pytest.raises(ValueError, match=message):
        AttentionRankEstimator(max_epochs=1, **params).fit(X, y)
