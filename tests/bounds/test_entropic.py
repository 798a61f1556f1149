
import numpy as np
import pytest

from intrinsic_rank import bounds
from intrinsic_rank.datasets import make_fixed_operator_task


def test_tail_energy_is_eckart_young_distance():
    rng = np.random.RandomState(0)
    A = rng.normal(size=(7, 5))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    best = (U[:, :2] * s[:2]) @ Vt[:2]
    assert bounds.tail_energy(s, 2) == pytest.approx(np.sum((A - best) ** 2))
    assert bounds.tail_energy(s[::-1], 2) == pytest.approx(np.sum(s[2:] ** 2))
    assert bounds.tail_energy(s, 5) == 0.0


def test_fixed_operator_deficiency_matches_monte_carlo_risk_of_best_student():
    # The optimal rank-r student keeps V* and the truncated SVD of A*:
    # its population excess risk must equal the closed form.
    X, Y, info = make_fixed_operator_task(
        n_samples=20000, seq_len=6, d=4, d_out=3, rank=5, spectrum="decaying",
        decay=0.6, noise=0.0, random_state=1, return_info=True,
    )
    U, s, Vt = np.linalg.svd(info.operator)
    for r in (1, 2, 4):
        A_r = (U[:, :r] * s[:r]) @ Vt[:r]
        pred = np.einsum("lk,nkd,de->nle", A_r, X, info.value_map)
        empirical = np.mean((Y - pred) ** 2)
        theory = bounds.fixed_operator_deficiency(s, r, info.value_map)
        assert empirical == pytest.approx(theory, rel=0.03)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bounds.tail_energy([1.0, -2.0], 1), "nonnegative"),
        (lambda: bounds.tail_energy([], 1), "non-empty"),
        (lambda: bounds.tail_energy([1.0], -1), "rank must be an integer >= 0"),
        (lambda: bounds.fixed_operator_deficiency([1.0], 1, np.ones(3)), "value_map must be 2-D"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_entropic_and_min_ip_bounds_at_the_float_limits():
    # a huge V* with a tiny tail (inf * 0 = nan before), and the reverse (a silent 0)
    assert bounds.fixed_operator_deficiency([1.0, 1e-200], 1, np.eye(2) * 1e200) == pytest.approx(
        0.5, rel=1e-14)
    assert bounds.fixed_operator_deficiency([1.0, 1e150], 0, np.eye(2) * 1e-200) == pytest.approx(
        5e-101, rel=1e-14)
    with pytest.raises(ValueError, match="value_map must be finite"):
        bounds.fixed_operator_deficiency([1.0], 0, [[np.inf]])
    with pytest.raises(ValueError, match="the deficiency floor overflows float64"):
        bounds.fixed_operator_deficiency([1e200], 0, [[1e200]])
    with pytest.raises(ValueError, match="tail energy .* overflows float64"):
        bounds.tail_energy([1e200, 1.0], 0)
    # eps**2 overflowed into an OverflowError before
    assert bounds.approximate_identity_rank_bound(4, 1e200) == 0.0
    assert bounds.approximate_identity_rank_bound(1, 1e200) == 1.0
    with pytest.raises(ValueError, match="n must be at most"):
        bounds.approximate_identity_rank_bound(10**400, 0.5)
    with pytest.raises(ValueError, match="alphabet_size must be at most"):
        bounds.transcript_bound(3, 10**400)
    assert bounds.transcript_bound(2, 2**64 - 1) == 128.0


NEW_NAMES = [
    "PRECISION_CONVENTIONS", "precision_for", "CONE_CONVENTIONS", "min_pairwise_cosine",
    "cone_half_angle", "cone_log_fraction", "cone_log_count_bound", "cone_slope_bound",
    "sample_box", "sample_ball", "argmax_cells", "nearest_row_cells", "cell_proportions",
    "cell_decay", "cell_slope_bound",
]


def test_new_names_are_public():
    for name in NEW_NAMES:
        assert name in bounds.__all__
        assert getattr(bounds, name) is not None
