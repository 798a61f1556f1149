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


@pytest.mark.parametrize("restarts,match", [
    ([0, 1.5, 2], "every entry of restarts must be an integer >= 0; got 1.5"),
    ([0, float("nan"), 2], "every entry of restarts must be an integer >= 0; got nan"),
    ([0, float("inf"), 2], "every entry of restarts must be an integer >= 0; got inf"),
    ([0, True, 2], "every entry of restarts must be an integer >= 0; got True"),
    ([0, -1, 2], "every entry of restarts must be an integer >= 0; got -1"),
    (3, "restarts must be a sequence of one integer >= 0 per rank slot \\(3\\); got 3"),
    ("012", "restarts must be a sequence"),
    ([0, 1], "one integer >= 0 per rank slot \\(3\\); got 2 entries"),
])
def test_restarts_are_integers_one_per_slot(restarts, match):
    with pytest.raises(ValueError, match=match):
        make_student("linear", ranks=[3, 3, 3], restarts=restarts, **SIZES)


def test_restart_zero_is_the_draw_without_restarts_and_numpy_integers_are_kept():
    plain = make_student("softmax", ranks=[2, 3], random_state=4, **SIZES)
    again = make_student("softmax", ranks=[2, 3, 3], restarts=np.array([0, 0, 1]),
                         random_state=4, **SIZES)
    assert again.restarts == (0, 0, 1)
    assert torch.equal(plain.query[:2], again.query[:2])
    assert not torch.equal(again.query[1], again.query[2])  # restart 1: another draw


def test_a_huge_slot_count_is_refused_before_anything_is_allocated():
    class Counting(list):
        """A restart list that fails the test if any entry is read."""

        def __iter__(self):
            raise AssertionError("an entry was read before the size was checked")

    with pytest.raises(ValueError, match="one integer >= 0 per rank slot \\(2\\); got 3"):
        make_student("linear", ranks=[1, 1], restarts=Counting([0, 1, 2]), **SIZES)
    # 65,536 restarts of rank 4,096 at d = 4,096: 4 TiB per factor, refused before any
    # factor exists (the limit is this machine's memory, or a cgroup's)
    with pytest.raises(ValueError, match="^ranks: parameter 'query' of 65536 rank slots "
                                         "needs 4.0 TiB, more than this machine's memory"):
        make_student("linear", d=4096, d_out=1, ranks=[4096] * 65536,
                     restarts=range(65536), seq_len=2)
