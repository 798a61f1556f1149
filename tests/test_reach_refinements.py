"""The reachability paper's refinements in intrinsic_rank.bounds: the cone, non-uniform
decoder cells and the precision conventions, all numpy/scipy only."""

import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import betaln, gammaln

from intrinsic_rank import bounds

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


# --------------------------------------------------------------------------- cone


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("theta", [0.3, 1.0, math.pi / 2 - 0.05, 2.0, 2.9])
def test_cone_fraction_matches_monte_carlo(d, theta):
    n = 200_000
    pts = bounds.sample_ball(None, 1.0, d, n, random_state=d)
    inside = pts[:, 0] >= math.cos(theta) * np.linalg.norm(pts, axis=1)
    p_hat = inside.mean()
    p = math.exp(bounds.cone_log_fraction(theta, d))
    se = math.sqrt(p * (1 - p) / n)
    assert abs(p_hat - p) <= 4 * se, (p_hat, p, se)


@pytest.mark.parametrize("theta", [0.1, 0.7, 1.5, 2.2, 3.0])
def test_cone_fraction_closed_forms_in_two_and_three_dimensions(theta):
    assert math.exp(bounds.cone_log_fraction(theta, 2)) == pytest.approx(theta / math.pi,
                                                                         rel=1e-12)
    assert math.exp(bounds.cone_log_fraction(theta, 3)) == pytest.approx(
        (1 - math.cos(theta)) / 2, rel=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3, 7, 64, 1000, 4096])
def test_cone_fraction_is_half_at_right_angle_and_whole_at_pi(d):
    assert bounds.cone_log_fraction(math.pi / 2, d) == math.log(0.5)
    assert bounds.cone_log_fraction(math.pi, d) == 0.0


def test_cone_fraction_in_one_dimension_is_a_half_line():
    assert bounds.cone_log_fraction(0.2, 1) == math.log(0.5)
    assert bounds.cone_log_fraction(3.0, 1) == math.log(0.5)


@pytest.mark.parametrize("d", [2, 10, 100, 4096])
def test_cone_fraction_increases_with_theta(d):
    thetas = np.linspace(0.01, math.pi, 200)
    values = np.array([bounds.cone_log_fraction(t, d) for t in thetas])
    assert np.all(np.diff(values) >= 0)
    # strictly so while ln frac is representable (for large d and theta > pi/2 the
    # fraction 1 - tiny rounds to 1 and its log to 0)
    assert np.all(np.diff(values[thetas <= math.pi / 2]) > 0)
    assert values.max() == 0.0


def _log_cap_fraction_by_quadrature(theta, d):
    """ln of int_0^theta sin^(d-2) / B((d-1)/2, 1/2), the integral taken in logs."""
    top = (d - 2) * math.log(math.sin(theta))
    width = math.tan(theta) / (d - 2)  # the integrand's scale below theta
    low = max(0.0, theta - 200 * width)
    val, _ = quad(lambda phi: math.exp((d - 2) * math.log(math.sin(phi)) - top), low, theta,
                  epsabs=0, epsrel=1e-12, limit=200)
    return top + math.log(val) - betaln((d - 1) / 2, 0.5)


@pytest.mark.parametrize("d, theta", [(4096, 0.1), (4096, 1.0), (768, 0.05), (2048, 1.4)])
def test_cone_fraction_is_finite_and_right_in_high_dimension(d, theta):
    value = bounds.cone_log_fraction(theta, d)
    assert np.isfinite(value)
    assert value == pytest.approx(_log_cap_fraction_by_quadrature(theta, d), rel=1e-9)
    if (d, theta) == (4096, 0.1):
        assert value < -9000  # the fraction itself underflows a float


@pytest.mark.parametrize("d", [3, 6, 20])
@pytest.mark.parametrize("alpha", [0.4, 1.1])
def test_sector_is_cone_plus_cap(d, alpha):
    # Volume of the sector of half-angle alpha = right cone (height cos, base radius sin)
    # + the cap beyond the base plane, both over the unit ball's volume.
    log_ratio = (gammaln(d / 2 + 1) - gammaln((d + 1) / 2)) - 0.5 * math.log(math.pi)
    cone = math.sin(alpha) ** (d - 1) * math.cos(alpha) / d
    cap, _ = quad(lambda t: (1 - t * t) ** ((d - 1) / 2), math.cos(alpha), 1.0, epsrel=1e-12)
    expected = math.exp(log_ratio) * (cone + cap)  # V_{d-1} / V_d * (cone + cap)
    assert math.exp(bounds.cone_log_fraction(alpha, d)) == pytest.approx(expected, rel=1e-9)


def test_min_pairwise_cosine_matches_brute_force_in_chunks():
    rng = np.random.RandomState(0)
    h = rng.normal(size=(3, 11, 5)) + 0.5
    flat = h.reshape(-1, 5)
    u = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    sims = u @ u.T
    expected = sims[np.triu_indices(len(flat), 1)].min()
    for chunk in (1, 7, 33, 1024):
        assert bounds.min_pairwise_cosine(h, chunk_size=chunk) == pytest.approx(expected,
                                                                                abs=1e-12)


def test_min_pairwise_cosine_special_cases():
    assert bounds.min_pairwise_cosine([[1.0, 2.0], [2.0, 4.0]]) == pytest.approx(1.0)
    assert bounds.min_pairwise_cosine([[1.0, 0.0], [-3.0, 0.0], [0.0, 1.0]]) == -1.0
    # no overflow: rows are scaled before their norms are taken
    assert bounds.min_pairwise_cosine([[1e300, 0.0], [1e300, 1e300]]) == pytest.approx(
        math.sqrt(0.5))


@pytest.mark.parametrize(
    "states, match",
    [
        ([[1.0, 0.0], [0.0, 0.0]], r"zero-norm row.*index 1"),
        ([[1.0, np.nan], [1.0, 0.0]], r"hidden_states must be finite"),
        ([[1.0, np.inf], [1.0, 0.0]], r"hidden_states must be finite"),
        ([[1.0, 2.0]], r"at least two states"),
        (np.zeros((3, 0)), r"hidden_states must be at least 1-D"),
    ],
)
def test_min_pairwise_cosine_rejects_bad_states(states, match):
    with pytest.raises(ValueError, match=match):
        bounds.min_pairwise_cosine(states)


def test_min_pairwise_cosine_rejects_bad_chunk_size():
    with pytest.raises(ValueError, match=r"chunk_size must be an integer >= 1; got 0"):
        bounds.min_pairwise_cosine([[1.0], [2.0]], chunk_size=0)


def test_cone_half_angle_conventions():
    assert bounds.cone_half_angle(0.5) == pytest.approx(math.pi / 3)
    assert bounds.cone_half_angle(0.5, convention="authors") == pytest.approx(math.pi / 6)
    assert set(bounds.CONE_CONVENTIONS) == {"enclosing", "authors"}
    with pytest.raises(ValueError, match=r"min_cosine must be a finite real number in"):
        bounds.cone_half_angle(1.5)
    with pytest.raises(ValueError, match=r"convention must be one of.*authors.*enclosing"):
        bounds.cone_half_angle(0.5, convention="widest")


@pytest.mark.parametrize("theta", [0.0, -0.1, math.pi + 1e-9, float("nan"), True])
def test_cone_log_fraction_rejects_bad_theta(theta):
    with pytest.raises(ValueError, match=r"theta must be a finite real number in \(0.0, 3.14"):
        bounds.cone_log_fraction(theta, 3)


def test_cone_log_fraction_rejects_bad_dimension():
    with pytest.raises(ValueError, match=r"d must be an integer >= 1; got 0"):
        bounds.cone_log_fraction(1.0, 0)


def test_cone_count_and_slope_bounds():
    d, m, r, eps, theta, v = 64, 4, 4.0, 2**-10, 0.7, 1000
    ball = bounds.reachable_log_count_bound(d, m, r, eps)
    frac = bounds.cone_log_fraction(theta, d)
    assert bounds.cone_log_count_bound(d, m, r, eps, theta) == pytest.approx(ball + m * frac)
    # the slope is the per-vector count over ln|V|, the unit of reachable_slope_bound
    assert bounds.cone_slope_bound(d, v, r, eps, theta) == pytest.approx(
        bounds.cone_log_count_bound(d, 1, r, eps, theta) / math.log(v))
    assert bounds.cone_slope_bound(d, v, r, eps, theta) < bounds.reachable_slope_bound(
        d, v, r, eps)
    assert bounds.cone_slope_bound(d, v, r, eps, math.pi) == bounds.reachable_slope_bound(
        d, v, r, eps)
    # a cone thinner than one cell: at least one sequence
    assert bounds.cone_log_count_bound(64, 2, 1e-3, 0.5, 0.01) == 0.0
    assert bounds.cone_slope_bound(64, 10, 1e-3, 0.5, 0.01) == 0.0


def test_cone_bounds_check_their_arguments():
    with pytest.raises(ValueError, match=r"n_memory must be an integer >= 1; got 0"):
        bounds.cone_log_count_bound(64, 0, 1.0, 2**-10, 1.0)
    with pytest.raises(ValueError, match=r"precision must be"):
        bounds.cone_slope_bound(64, 10, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"vocab_size must be an integer >= 2; got 1"):
        bounds.cone_slope_bound(64, 1, 1.0, 2**-10, 1.0)
    with pytest.raises(ValueError, match=r"theta must be"):
        bounds.cone_slope_bound(64, 10, 1.0, 2**-10, 0.0)


# -------------------------------------------------------------------------- cells


def test_sample_box_is_uniform_in_the_box_and_reproducible():
    low, high = np.array([-1.0, 2.0, 0.0]), np.array([1.0, 6.0, 0.5])
    pts = bounds.sample_box(low, high, 50_000, random_state=3)
    assert pts.shape == (50_000, 3)
    assert np.all(pts >= low) and np.all(pts <= high)
    se = (high - low) / math.sqrt(12 * 50_000)
    assert np.all(np.abs(pts.mean(axis=0) - (low + high) / 2) <= 4 * se)
    np.testing.assert_array_equal(pts, bounds.sample_box(low, high, 50_000, random_state=3))


@pytest.mark.parametrize(
    "low, high, match",
    [
        ([0.0, 1.0], [1.0, 1.0], r"high must exceed low.*zero width.*index 1"),
        ([0.0], [1.0, 2.0], r"low and high must have the same shape"),
        ([0.0, np.nan], [1.0, 2.0], r"low must be finite"),
        ([], [], r"low must be a non-empty 1-D array"),
    ],
)
def test_sample_box_rejects_bad_regions(low, high, match):
    with pytest.raises(ValueError, match=match):
        bounds.sample_box(low, high, 10)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_sample_ball_is_uniform_in_the_ball(d):
    n, r = 100_000, 3.0
    center = np.arange(d, dtype=float)
    pts = bounds.sample_ball(center, r, d, n, random_state=1)
    dist = np.linalg.norm(pts - center, axis=1)
    assert dist.max() <= r
    p = 0.5**d  # the inner half-radius ball holds 2**-d of the volume
    assert abs(np.mean(dist <= r / 2) - p) <= 4 * math.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(pts.mean(axis=0) - center) <= 4 * r / math.sqrt(n))


def test_sample_ball_rejects_bad_input():
    with pytest.raises(ValueError, match=r"radius must be a finite real number in \(0.0"):
        bounds.sample_ball(None, 0.0, 2, 10)
    with pytest.raises(ValueError, match=r"center must have shape \(3,\) to match d"):
        bounds.sample_ball([0.0, 0.0], 1.0, 3, 10)
    with pytest.raises(ValueError, match=r"n must be an integer >= 1; got 0"):
        bounds.sample_ball(None, 1.0, 3, 0)


def test_equal_norm_rows_give_equal_cells_and_the_two_rules_agree():
    v = 6
    angles = 2 * math.pi * np.arange(v) / v
    W = 2.0 * np.column_stack([np.cos(angles), np.sin(angles)])
    n = 120_000
    pts = bounds.sample_ball(None, 5.0, 2, n, random_state=0)
    arg = bounds.argmax_cells(pts, W)
    np.testing.assert_array_equal(arg, bounds.nearest_row_cells(pts, W))
    p = bounds.cell_proportions(arg, v).proportions
    assert np.all(np.abs(p - 1 / v) <= 4 * math.sqrt((1 / v) * (1 - 1 / v) / n))


def test_rows_of_different_norm_hand_checked_in_one_dimension():
    # W = [[1], [2]] on the box [-1, 3]:
    #   argmax(w h): token 1 iff 2h > h, i.e. h > 0         -> p = [1/4, 3/4];
    #   nearest row: token 1 iff |h - 2| < |h - 1|, h > 1.5 -> p = [5/8, 3/8].
    W = np.array([[1.0], [2.0]])
    pts = np.linspace(-1, 3, 4001)[:, None]
    arg = bounds.cell_proportions(bounds.argmax_cells(pts, W), 2).proportions
    near = bounds.cell_proportions(bounds.nearest_row_cells(pts, W), 2).proportions
    np.testing.assert_allclose(arg, [0.25, 0.75], atol=1e-3)
    np.testing.assert_allclose(near, [0.625, 0.375], atol=1e-3)
    # with a bias b = [0.5, 0]: token 1 iff 2h > h + 0.5, i.e. h > 0.5 -> p = [3/8, 5/8]
    biased = bounds.argmax_cells(pts, W, bias=[0.5, 0.0])
    np.testing.assert_allclose(bounds.cell_proportions(biased, 2).proportions,
                               [0.375, 0.625], atol=1e-3)


def test_decision_rules_match_brute_force_and_chunking():
    rng = np.random.RandomState(0)
    pts, W, b = rng.normal(size=(500, 4)), rng.normal(size=(37, 4)), rng.normal(size=37)
    arg = bounds.argmax_cells(pts, W, b)
    np.testing.assert_array_equal(arg, np.argmax(pts @ W.T + b, axis=1))
    near = bounds.nearest_row_cells(pts, W)
    dist = np.linalg.norm(pts[:, None, :] - W[None, :, :], axis=2)
    np.testing.assert_array_equal(near, np.argmin(dist, axis=1))
    for cap in (1, 40, 10_000):
        np.testing.assert_array_equal(bounds.argmax_cells(pts, W, b, max_elements=cap), arg)
        np.testing.assert_array_equal(bounds.nearest_row_cells(pts, W, max_elements=cap), near)
    assert np.mean(arg != bounds.argmax_cells(pts, W)) > 0  # the bias matters


@pytest.mark.parametrize(
    "points, weight, bias, match",
    [
        (np.zeros(3), np.zeros((2, 3)), None, r"points must be a non-empty 2-D array"),
        (np.zeros((4, 3)), np.zeros((2, 2)), None, r"weight must have d = 3 columns"),
        (np.zeros((4, 3)), np.zeros(3), None, r"weight must be a non-empty 2-D array"),
        (np.full((4, 3), np.nan), np.zeros((2, 3)), None, r"points must be finite"),
        (np.zeros((4, 3)), np.full((2, 3), np.inf), None, r"weight must be finite"),
        (np.zeros((4, 3)), np.zeros((2, 3)), [0.0], r"bias must have shape \(2,\)"),
    ],
)
def test_argmax_cells_rejects_bad_arrays(points, weight, bias, match):
    with pytest.raises(ValueError, match=match):
        bounds.argmax_cells(points, weight, bias)


def test_cell_proportions_counts_and_empty_cells():
    cells = bounds.cell_proportions(np.array([[0, 2], [2, 2]]), 5)
    np.testing.assert_array_equal(cells.counts, [1, 0, 3, 0, 0])
    np.testing.assert_allclose(cells.proportions, [0.25, 0, 0.75, 0, 0])
    assert (cells.n_empty, cells.n_samples, cells.vocab_size) == (3, 4, 5)


@pytest.mark.parametrize(
    "assignments, vocab_size, match",
    [
        ([0, 5], 5, r"assignments must lie in \[0, vocab_size=5\); got 5 at index 1"),
        ([-1, 0], 5, r"got -1 at index 0"),
        ([0.0, 1.0], 5, r"assignments must be integer token ids; got dtype float64"),
        ([], 5, r"assignments must hold at least one token id"),
        ([0], 1, r"vocab_size must be an integer >= 2; got 1"),
    ],
)
def test_cell_proportions_rejects_bad_input(assignments, vocab_size, match):
    with pytest.raises(ValueError, match=match):
        bounds.cell_proportions(assignments, vocab_size)


@pytest.mark.parametrize("v", [2, 7, 64])
def test_uniform_cells_decay_at_log_vocab(v):
    decay = bounds.cell_decay(np.full(v, 1 / v), n_samples=10**6, n_bootstrap=20)
    assert decay.closed_form == pytest.approx(math.log(v), abs=1e-12)
    assert decay.fitted == pytest.approx(math.log(v), abs=1e-9)
    assert decay.fitted_r2 == pytest.approx(1.0)
    assert decay.n_empty == 0 and decay.n_cells == v
    assert 0 <= decay.closed_form_se < 1e-2 and 0 <= decay.fitted_se < 1e-2
    assert bounds.cell_slope_bound(80.0, v, decay) == pytest.approx(80.0)


def test_fitted_decay_agrees_with_closed_form_on_a_synthetic_distribution():
    rng = np.random.RandomState(0)
    p = rng.dirichlet(np.full(1000, 0.7))
    c_true = -np.mean(np.log(p))
    decay = bounds.cell_decay(p, n_samples=10**7, n_bootstrap=60, random_state=1)
    assert decay.closed_form == pytest.approx(c_true)
    assert abs(decay.fitted - decay.closed_form) <= 4 * decay.fitted_se
    assert decay.closed_form > math.log(1000)  # unequal cells decay faster than ln N
    assert decay.fitted_r2 > 0.999
    assert decay.ks.tolist() == list(range(1, 17)) and decay.median_log_volume.shape == (16,)


def test_fitted_decay_is_close_to_the_closed_form_for_a_small_vocabulary():
    # With few tokens the median of a discrete product sits on an atom: a small
    # deterministic bias (documented) that fitted_se does not cover; it stays under 1%.
    for seed in range(5):
        p = np.random.RandomState(seed).dirichlet(np.ones(20))
        decay = bounds.cell_decay(p, n_samples=10**7, n_bootstrap=0, random_state=seed)
        assert decay.fitted == pytest.approx(decay.closed_form, rel=0.01)


def test_monte_carlo_decay_recovers_the_true_rate_within_its_standard_error():
    rng = np.random.RandomState(2)
    p = rng.dirichlet(np.full(20, 1.0))
    c_true = -np.mean(np.log(p))
    n = 200_000
    assignments = rng.choice(20, size=n, p=p)
    decay = bounds.cell_decay(bounds.cell_proportions(assignments, 20), n_bootstrap=100)
    assert decay.n_samples == n
    assert abs(decay.closed_form - c_true) <= 4 * decay.closed_form_se
    assert decay.fitted == pytest.approx(c_true, rel=0.01)


def test_empty_cells_are_excluded_and_counted():
    p = np.array([0.5, 0.0, 0.25, 0.25, 0.0])
    decay = bounds.cell_decay(p, n_samples=1000, n_bootstrap=0)
    assert decay.n_empty == 2 and decay.n_cells == 3 and decay.vocab_size == 5
    assert decay.closed_form == pytest.approx(-np.mean(np.log([0.5, 0.25, 0.25])))
    assert math.isnan(decay.closed_form_se) and math.isnan(decay.fitted_se)


def test_cell_decay_is_reproducible_and_its_estimate_does_not_depend_on_the_bootstrap():
    p = np.random.RandomState(5).dirichlet(np.ones(10))
    a = bounds.cell_decay(p, 5000, n_bootstrap=10, random_state=4)
    b = bounds.cell_decay(p, 5000, n_bootstrap=10, random_state=4)
    c = bounds.cell_decay(p, 5000, n_bootstrap=0, random_state=4)
    assert a.fitted == b.fitted == c.fitted and a.fitted_se == b.fitted_se


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(proportions=[0.5, 0.6], n_samples=10), r"proportions must sum to 1"),
        (dict(proportions=[1.5, -0.5], n_samples=10), r"proportions must be nonnegative"),
        (dict(proportions=[1.0], n_samples=10), r"one entry per token"),
        (dict(proportions=[0.5, np.nan], n_samples=10), r"proportions must be finite"),
        (dict(proportions=[0.5, 0.5]), r"n_samples is required"),
        (dict(proportions=[0.5, 0.5], n_samples=0), r"n_samples must be an integer >= 1"),
        (dict(proportions=[0.5, 0.5], n_samples=10, max_k=1), r"max_k must be an integer >= 2"),
        (dict(proportions=[0.5, 0.5], n_samples=10, n_bootstrap=-1),
         r"n_bootstrap must be an integer >= 0"),
    ],
)
def test_cell_decay_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bounds.cell_decay(**kwargs)


def test_cell_slope_bound():
    assert bounds.cell_slope_bound(30.0, 100, 2 * math.log(100)) == pytest.approx(15.0)
    decay = {"closed_form": 6.0, "fitted": 5.0}
    assert bounds.cell_slope_bound(10.0, 64, decay) == pytest.approx(10 * math.log(64) / 6)
    assert bounds.cell_slope_bound(10.0, 64, decay, estimate="fitted") == pytest.approx(
        10 * math.log(64) / 5)
    with pytest.raises(ValueError, match=r"decay must be > 0; got 0.0 \(a single non-empty"):
        bounds.cell_slope_bound(10.0, 64, bounds.cell_decay([1.0, 0.0], 10, n_bootstrap=0))
    with pytest.raises(ValueError, match=r"decay must be a finite real number in \(0.0"):
        bounds.cell_slope_bound(10.0, 64, -1.0)
    with pytest.raises(ValueError, match=r"estimate must be 'closed_form' or 'fitted'"):
        bounds.cell_slope_bound(10.0, 64, decay, estimate="median")
    with pytest.raises(ValueError, match=r"box_slope must be"):
        bounds.cell_slope_bound(-1.0, 64, 1.0)


# ---------------------------------------------------------------------- precision


def test_precision_conventions():
    assert set(bounds.PRECISION_CONVENTIONS) == {"machine", "paper", "relative"}
    for dtype in ("float16", "bfloat16", "torch.float32", np.float64):
        assert bounds.precision_for("machine", dtype=dtype) == bounds.precision_from_dtype(dtype)
    assert bounds.precision_for("paper") == 2.0**-10
    assert bounds.precision_for("paper", dtype="float32", radius_inf=50.0) == 2.0**-10
    # the authors' notebook: epsilon = 2 ** (log2(r_inf) - 11)
    for r in (0.3, 8.0, 59.90625):
        assert bounds.precision_for("relative", radius_inf=r) == pytest.approx(
            2 ** (math.log(r) / math.log(2) - 11), rel=1e-14)
    assert bounds.precision_for("relative", radius_inf=59.90625) == pytest.approx(0.029251,
                                                                                  rel=1e-4)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("ulp",), {}, r"convention must be one of 'machine', 'paper', 'relative'; got 'ulp'"),
        ((None,), {}, r"convention must be one of 'machine', 'paper', 'relative'"),
        (("machine",), {}, r"dtype is required for convention='machine'"),
        (("machine",), {"dtype": "int8"}, r"dtype must be a floating dtype"),
        (("relative",), {}, r"radius_inf is required for convention='relative'"),
        (("relative",), {"radius_inf": 0.0}, r"radius_inf must be a finite real number in \(0"),
        (("relative",), {"radius_inf": float("inf")}, r"radius_inf must be a finite real"),
    ],
)
def test_precision_for_rejects_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        bounds.precision_for(*args, **kwargs)


def test_refinements_do_not_import_torch():
    code = (
        "import importlib, sys, types\n"
        "package = types.ModuleType('intrinsic_rank')\n"
        "package.__path__ = [%r]\n"
        "sys.modules['intrinsic_rank'] = package\n"
        "b = importlib.import_module('intrinsic_rank.bounds')\n"
        "import numpy as np\n"
        "pts = b.sample_box([-1.0, -1.0], [1.0, 1.0], 100, 0)\n"
        "cells = b.cell_proportions(b.argmax_cells(pts, np.eye(2)), 2)\n"
        "b.cell_decay(cells, n_bootstrap=2)\n"
        "b.cone_slope_bound(2, 2, 1.0, b.precision_for('paper'), "
        "b.cone_half_angle(b.min_pairwise_cosine(pts)))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    ) % str(pathlib.Path(bounds.__file__).parents[1])
    subprocess.run([sys.executable, "-c", code], check=True)


def test_refinements_at_the_float_limits():
    # sin(theta)**2 underflows below theta ~ 1.5e-154: d = 2 is theta / pi exactly
    assert bounds.cone_log_fraction(1e-300, 2) == pytest.approx(math.log(1e-300 / math.pi),
                                                                rel=1e-14)
    assert bounds.cone_log_fraction(5e-324, 5) > -math.inf
    ball = bounds.reachable_log_count_bound(4, 2, 1e308, 1e-10)
    assert 0.0 < bounds.cone_log_count_bound(4, 2, 1e308, 1e-10, 1e-300) < ball  # nan before
    # logits that overflow (or underflow) float64 keep their argmax
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    for s in (1e200, 1e-200):
        assert bounds.argmax_cells(np.array([[1.0, 2.0]]) * s, w * s).tolist() == [1]
        assert bounds.nearest_row_cells(np.array([[1.0, 2.0]]) * s,
                                        np.array([[1.0, 0.0], [0.0, 3.0]]) * s).tolist() == [1]
    pts = bounds.sample_box([-1e308], [1e308], 100, random_state=0)
    assert np.all(np.isfinite(pts)) and pts.min() < 0 < pts.max()
    with pytest.raises(ValueError, match="beyond float64's range"):
        bounds.sample_ball([1e308], 1e308, 1, 100, random_state=0)
    with pytest.raises(ValueError, match="cell slope bound .* overflows float64"):
        bounds.cell_slope_bound(1e308, 10, 1e-10)
    with pytest.raises(ValueError, match="radius_inf must be at least 2\\*\\*-1011"):
        bounds.precision_for("relative", radius_inf=1e-320)
    with pytest.raises(ValueError, match="random_state must be an integer"):
        bounds.sample_box([0.0], [1.0], 3, random_state=-1)
