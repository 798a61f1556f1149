import numpy as np
import pytest
import torch

from intrinsic_rank.nn import STUDENTS, make_student, row_softmax

SIZES = dict(d=6, d_out=3, seq_len=5)


@pytest.mark.parametrize("attention", sorted(STUDENTS))
def test_shapes_and_final_only(attention):
    student = make_student(attention, ranks=[1, 2, 4], **SIZES)
    X = torch.randn(7, 5, 6)
    assert student(X).shape == (7, 3, 5, 3)
    assert student.mixer(X).shape == (7, 3, 5, 5)
    final = make_student(attention, ranks=[1, 2, 4], final_only=True, **SIZES)
    assert final(X).shape == (7, 3, 3)


@pytest.mark.parametrize("attention", sorted(STUDENTS))
def test_slot_of_a_grid_equals_the_student_alone(attention):
    X = torch.randn(9, 5, 6, generator=torch.Generator().manual_seed(0))
    grid = make_student(attention, ranks=[1, 3, 4], random_state=11, **SIZES)
    alone = make_student(attention, ranks=[3], random_state=11, **SIZES)
    torch.testing.assert_close(grid(X)[:, 1], alone(X)[:, 0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", sorted(STUDENTS))
def test_masked_columns_get_no_gradient_and_rank_is_bounded(attention):
    # seeded: the numerical rank of a 5 x 5 kernel of random tokens is read at rtol 1e-5,
    # and an unlucky draw (the global generator, moved by whatever ran before) reads 3 of 4
    torch.manual_seed(0)
    student = make_student(attention, ranks=[1, 2, 4], **SIZES)
    student(torch.randn(8, 5, 6)).pow(2).sum().backward()
    factors = {"fixed": ("left", "right"), "kernel": ("query_map", "key_map")}.get(
        attention, ("query", "key")
    )
    for name in factors:
        grad = getattr(student, name).grad
        assert torch.all(grad[0, :, 1:] == 0) and torch.all(grad[1, :, 2:] == 0)
        assert torch.any(grad[2] != 0)
    if attention == "kernel":  # the L x L kernel of 5 tokens has rank <= feature rank
        matrices = student.attention_weights(torch.randn(3, 5, 6))[0]
        ranks = np.linalg.matrix_rank(matrices.detach().double().numpy(), rtol=1e-5)
        assert list(ranks) == [1, 2, 4]
        return
    matrices = student.operator() if attention == "fixed" else student.kernel()
    ranks = np.linalg.matrix_rank(matrices.detach().numpy())  # float32 threshold
    np.testing.assert_array_equal(ranks, [1, 2, 4])


def test_init_scale_sets_projection_size():
    student = make_student("linear", d=64, d_out=4, ranks=[64], init_scale=0.05)
    X = torch.randn(500, 3, 64)
    projected = X @ student.query[0]
    assert projected.std().item() == pytest.approx(0.05, rel=0.1)


def test_linear_mixer_is_kernel_quadratic_form():
    student = make_student("linear", ranks=[2], **SIZES)
    X = torch.randn(4, 5, 6)
    K = student.kernel()[0]
    torch.testing.assert_close(student.mixer(X)[:, 0], X @ K @ X.transpose(1, 2) / 5)


def test_row_softmax_matches_torch_in_values_and_gradients():
    for L in (4, 8, 40):  # short rows take the closed-form path, long rows torch's
        scores = torch.randn(2, 3, L, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(row_softmax, (scores,))
        torch.testing.assert_close(row_softmax(scores), torch.softmax(scores, -1))


def test_unknown_student_and_too_large_rank():
    with pytest.raises(ValueError, match="unknown attention 'relu'"):
        make_student("relu", ranks=[1], **SIZES)
    with pytest.raises(ValueError, match="rank 7 exceeds the largest rank of this student \\(6\\)"):
        make_student("softmax", ranks=[7], **SIZES)
    with pytest.raises(ValueError, match="rank 6 exceeds the largest rank of this student \\(5\\)"):
        make_student("fixed", ranks=[6], **SIZES)
