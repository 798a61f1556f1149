"""The reachability bound's cone refinement (``bounds``): the cone's solid-angle fraction,
the minimum pairwise cosine of the states, and the cone's count and slope bounds.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.special import betaln, gammaln

from intrinsic_rank import bounds

PROFILE = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _log_cap_fraction_by_quadrature(theta, d):
    """ln of int_0^theta sin^(d-2) / B((d-1)/2, 1/2), the integral taken in logs."""
    top = (d - 2) * math.log(math.sin(theta))
    width = math.tan(theta) / (d - 2)  # the integrand's scale below theta
    low = max(0.0, theta - 200 * width)
    val, _ = quad(lambda phi: math.exp((d - 2) * math.log(math.sin(phi)) - top), low, theta,
                  epsabs=0, epsrel=1e-12, limit=200)
    return top + math.log(val) - betaln((d - 1) / 2, 0.5)


@PROFILE
@given(t1=st.floats(5e-324, math.pi), t2=st.floats(5e-324, math.pi),
       d=st.one_of(st.integers(1, 16), st.integers(1, 5000)))
def test_cone_fraction_is_monotone_in_theta_and_a_log_fraction(t1, t2, d):
    t1, t2 = min(t1, t2), max(t1, t2)
    low, high = bounds.cone_log_fraction(t1, d), bounds.cone_log_fraction(t2, d)
    assert -math.inf <= low <= high <= 0.0
    assert not math.isnan(low)
    assert low > -math.inf  # theta > 0 is a cone with volume, however thin


@PROFILE
@given(t=st.floats(1e-3, math.pi), d=st.integers(1, 256), m=st.integers(1, 8),
       r=st.floats(0.0, 1e6), eps=st.floats(1e-8, 0.5))
def test_the_cone_never_raises_the_ball_bound(t, d, m, r, eps):
    ball = bounds.reachable_log_count_bound(d, m, r, eps)
    assert 0.0 <= bounds.cone_log_count_bound(d, m, r, eps, t) <= ball * (1 + 1e-12)


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
