"""nn.distill_slots and the rotary student's known keys, frequencies and data-aware start."""

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import head_activations, head_output, query_basis, relative_error
from intrinsic_rank.nn import RotarySoftmaxStudent, distill_slots


@pytest.fixture(scope="module")
def toy_head():
    ids = np.random.default_rng(0).integers(0, 64, (48, 12))
    return head_activations("default", ids, ["L0H0"])[0, 0]


def _student(facts, ranks, X, **kwargs):
    """A student of the toy head: its biases as one more input column, its keys and values."""
    ones = np.ones(X.shape[:-1] + (1,), np.float32)
    X1 = np.concatenate([X, ones], axis=-1)
    maps = {n: np.vstack([w, b[None]]) for n, w, b in (("q", facts.w_q, facts.b_q),
                                                        ("k", facts.w_k, facts.b_k),
                                                        ("v", facts.w_v, facts.b_v))}
    student = RotarySoftmaxStudent(d=X1.shape[-1], d_out=facts.head_dim, ranks=ranks,
                                   head_dim=facts.head_dim, score_scale=facts.scale,
                                   value_map=maps["v"], key_map=maps["k"],
                                   inv_freq=np.zeros(facts.head_dim // 2), **kwargs)
    return student, X1, maps


def test_a_full_width_student_with_known_keys_is_the_head(toy_head):
    X, facts = toy_head.X, toy_head.facts
    student, X1, maps = _student(facts, [16], X)
    student.start_from(maps["q"], basis=np.eye(16))
    with torch.no_grad():
        out = student(torch.tensor(X1))[:, 0].double().numpy()
    # zero frequencies turn no channel: the student computes the (absolute-position) head
    assert relative_error(out, head_output(X, facts)) < 1e-10
    assert not any(name == "key" for name, _ in student.named_parameters())


def test_the_data_aware_start_is_the_truncation_on_the_realised_queries(toy_head):
    X, facts = toy_head.X, toy_head.facts
    student, X1, maps = _student(facts, [2, 5], X)
    basis = np.linalg.qr(np.random.default_rng(1).normal(size=(16, 16)))[0]
    student.start_from(maps["q"], basis=basis)
    projections = student.query_projection().detach().double().numpy()
    for slot, r in enumerate([2, 5]):
        expected = maps["q"] @ basis[:, :r] @ basis[:, :r].T
        np.testing.assert_allclose(projections[slot], expected, atol=1e-5)
    with pytest.raises(ValueError, match="start_from needs key exactly when the keys are"):
        student.start_from(maps["q"], maps["k"])


def test_only_the_asked_slots_are_computed(toy_head):
    X = torch.randn(3, 7, 6)
    student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[1, 2, 4], random_state=3)
    every = student(X)
    some = student(X, slots=[2, 0])
    torch.testing.assert_close(some, every[:, [2, 0]])


def _teacher_data(seed=0):
    teacher = RotarySoftmaxStudent(d=6, d_out=4, ranks=[2], random_state=1, init_scale=2.0,
                                   rope_theta=50.0)
    X = torch.randn(60, 6, 6, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        Y = teacher(X)[:, 0]
    return X, Y


def test_the_best_epoch_is_kept_and_never_worse_than_the_start():
    X, Y = _teacher_data()
    student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[1, 2, 4], random_state=2,
                                   rope_theta=50.0)
    fit = distill_slots(student, X[:48], Y[:48], X[48:], Y[48:], lr=3e-2, max_epochs=60,
                        patience=5)
    assert np.all(fit.best <= fit.start)
    assert fit.best[1] < 0.2 * fit.start[1]  # rank 2 can be the rank-2 teacher
    # the student holds each slot's best epoch: re-scoring it gives the reported risks
    with torch.no_grad():
        out = student(X[48:]).double()
    flat = Y[48:].double().reshape(-1, 4)
    variance = float(flat.var(0, unbiased=False).mean())
    rescored = ((out - Y[48:, None].double()) ** 2).mean(dim=(0, 2, 3)).numpy() / variance
    np.testing.assert_allclose(rescored, fit.best, rtol=1e-4)
    assert np.all(fit.converged | (fit.epochs == 60))  # unconverged only at the cap


def test_a_slot_that_only_gets_worse_is_put_back_at_its_start():
    X, Y = _teacher_data()
    student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[3], random_state=2, rope_theta=50.0)
    before = {n: p.detach().clone() for n, p in student.named_parameters()}
    fit = distill_slots(student, X[:48], Y[:48], X[48:], Y[48:], lr=50.0, max_epochs=4,
                        patience=4)
    if fit.best_epoch[0] == 0:  # a learning rate that large only damages it
        for name, value in student.named_parameters():
            torch.testing.assert_close(value, before[name])
    assert fit.best[0] <= fit.start[0]


def test_slots_do_not_depend_on_their_neighbours_and_the_seed_fixes_them():
    X, Y = _teacher_data()

    def run(ranks):
        student = RotarySoftmaxStudent(d=6, d_out=4, ranks=ranks, random_state=2,
                                       rope_theta=50.0)
        return distill_slots(student, X[:48], Y[:48], X[48:], Y[48:], lr=1e-2,
                             max_epochs=15, patience=50, random_state=7)

    alone, together = run([2]), run([1, 2, 3])
    np.testing.assert_allclose(together.best[1], alone.best[0], rtol=1e-4)
    again = run([1, 2, 3])
    np.testing.assert_array_equal(again.best, together.best)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=0.0), "lr must be"), (dict(lr=1e300), r"lr must be a finite number in \(0, 1000\]"),
    (dict(batch_size=0), "batch_size"), (dict(patience=0), "patience"),
    (dict(max_epochs=-1), "max_epochs"),
])
def test_bad_training_options_are_refused(kwargs, message):
    X, Y = _teacher_data()
    student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[1], rope_theta=50.0)
    with pytest.raises(ValueError, match=message):
        distill_slots(student, X[:48], Y[:48], X[48:], Y[48:], **kwargs)


def test_outputs_that_do_not_vary_are_refused():
    X, Y = _teacher_data()
    student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[1], rope_theta=50.0)
    with pytest.raises(ValueError, match="do not vary"):
        distill_slots(student, X[:48], Y[:48], X[48:], torch.zeros_like(Y[48:]))


def test_query_basis_keeps_the_most_query_energy_on_its_inputs(toy_head):
    # Eckart-Young on the queries: no rank-r projection of the raw weights' SVD keeps more
    X, facts = toy_head.X, toy_head.facts
    queries = X.reshape(-1, facts.d_model).astype(np.float64) @ facts.w_q + facts.b_q
    basis, values = query_basis(X, facts)
    U, S, Vh = np.linalg.svd(facts.w_q, full_matrices=False)
    for r in (1, 3, 8):
        data_aware = np.linalg.norm(queries - queries @ basis[:, :r] @ basis[:, :r].T)
        raw = np.linalg.norm(queries - queries @ Vh[:r].T @ Vh[:r])
        assert data_aware <= raw + 1e-9
    np.testing.assert_allclose(values, np.linalg.svd(queries / np.sqrt(len(queries)),
                                                     compute_uv=False), rtol=1e-9)
