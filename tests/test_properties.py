"""Property-based fuzz of the validators, the rank measures and a few bounds.

One fixed hypothesis profile, registered here and applied test by test (it is
not loaded globally, so other files keep their own settings): derandomised, no
example database, no deadline, and few enough examples that the whole file runs
in a few seconds. The same examples run on every machine, so CI is
deterministic; raise ``max_examples`` locally to fuzz harder.
"""

import math
import numbers
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from intrinsic_rank import bounds, spectral
from intrinsic_rank._validation import check_int, check_real, check_seed

settings.register_profile(
    "intrinsic_rank_properties",
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PROFILE = settings.get_profile("intrinsic_rank_properties")

CONTINUOUS = ("energy_effective_rank", "participation_ratio", "entropy_effective_rank",
              "stable_rank")
COUNTING = ("numerical_rank", "energy_threshold_rank")

# -- the validators ---------------------------------------------------------------

anything = st.one_of(
    st.integers(), st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(), st.booleans(), st.none(), st.text(max_size=3),
    st.fractions(), st.just(Fraction(10**400, 3)), st.complex_numbers(),
    st.integers(-(2**62), 2**62).map(np.int64), st.floats(width=32).map(np.float32),
    st.just(np.bool_(True)), st.just([1]), st.just(np.array([1.0])),
)
bound = st.one_of(st.none(), st.integers(-100, 100))
real_bound = st.one_of(st.none(), st.floats(-1e3, 1e3))


@PROFILE
@given(value=anything, low=bound, high=bound)
def test_check_int_returns_an_int_in_range_or_names_the_parameter(value, low, high):
    try:
        result = check_int(value, "my_param", low, high)
    except ValueError as error:
        assert "my_param" in str(error)
        return
    assert type(result) is int
    assert not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Integral)
    assert result == value
    assert low is None or result >= low
    assert high is None or result <= high


@PROFILE
@given(value=anything, low=real_bound, high=real_bound,
       low_open=st.booleans(), high_open=st.booleans())
def test_check_real_returns_a_finite_float_in_the_interval_or_names_the_parameter(
        value, low, high, low_open, high_open):
    try:
        result = check_real(value, "my_param", low, high, low_open=low_open,
                            high_open=high_open)
    except ValueError as error:
        assert "my_param" in str(error)
        return
    assert type(result) is float and math.isfinite(result)
    assert not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real)
    if low is not None:
        assert result > low if low_open else result >= low
    if high is not None:
        assert result < high if high_open else result <= high


@PROFILE
@given(value=anything)
def test_check_seed_returns_a_numpy_seed_or_names_the_parameter(value):
    try:
        result = check_seed(value)
    except ValueError as error:
        assert "random_state" in str(error)
        return
    assert type(result) is int and 0 <= result <= 2**32 - 1
    np.random.RandomState(result)  # numpy accepts every seed check_seed accepts


# -- the rank measures ------------------------------------------------------------

def _magnitudes(low_exp, high_exp):
    """Floats of either sign with magnitudes 10**low_exp .. 10**high_exp, and zeros."""
    mag = st.floats(min_value=float(low_exp), max_value=float(high_exp)).map(lambda e: 10.0**e)
    signed = st.tuples(st.sampled_from([-1.0, 1.0]), mag).map(lambda t: t[0] * t[1])
    return st.one_of(st.just(0.0), signed, st.floats(-4, 4, allow_subnormal=False))


def _matrices(elements):
    shapes = st.tuples(st.integers(1, 8), st.integers(1, 8))
    return shapes.flatmap(lambda s: hnp.arrays(np.float64, s, elements=elements))


any_matrix = _matrices(st.one_of(_magnitudes(-300, 300), st.floats(allow_nan=False,
                                                                  allow_infinity=False)))
# Entries that stay in float64's normal range after a scaling by 10**+-150.
moderate_matrix = _matrices(_magnitudes(-150, 150))


@st.composite
def low_rank_products(draw):
    """``U @ V`` with small integer factors (an exact product, of rank <= k) times 2**e."""
    m, n = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    k = draw(st.integers(1, min(m, n)))
    entries = st.integers(-3, 3).map(float)
    u = draw(hnp.arrays(np.float64, (m, k), elements=entries))
    v = draw(hnp.arrays(np.float64, (k, n), elements=entries))
    e = draw(st.integers(-1000, 1000))
    return np.ldexp(u @ v, e), k


def _measures(a):
    profile = spectral.rank_profile(a)
    assert profile == {
        "numerical_rank": spectral.numerical_rank(a),
        "energy_effective_rank": spectral.energy_effective_rank(a),
        "participation_ratio": spectral.participation_ratio(a),
        "entropy_effective_rank": spectral.entropy_effective_rank(a),
        "stable_rank": spectral.stable_rank(a),
        "energy_threshold_rank": spectral.energy_threshold_rank(a),
    }
    return profile


def _close(x, y):
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)


@PROFILE
@given(a=any_matrix)
def test_rank_measures_are_finite_and_within_their_ranges(a):
    k = min(a.shape)
    profile = _measures(a)
    for name in COUNTING:
        assert type(profile[name]) is int and 0 <= profile[name] <= k
    for name in CONTINUOUS:
        assert type(profile[name]) is float and math.isfinite(profile[name])
    if not np.any(a):
        assert all(v == 0 for v in profile.values())
        return
    for name in CONTINUOUS:
        assert 1.0 - 1e-12 <= profile[name] <= k * (1 + 1e-12), name
    assert profile["energy_threshold_rank"] >= 1
    assert profile["numerical_rank"] >= 1  # the largest value is above its own threshold
    # exp of the Renyi entropies of orders infinity, 2 and 1 of the same energies
    slack = 1 + 1e-12
    assert profile["stable_rank"] <= profile["participation_ratio"] * slack
    assert profile["participation_ratio"] <= profile["energy_effective_rank"] * slack


@PROFILE
@given(a=any_matrix)
def test_rank_measures_are_invariant_to_transposition(a):
    p, q = _measures(a), _measures(a.T)
    for name in CONTINUOUS:
        assert _close(p[name], q[name]), name


@PROFILE
@given(a=moderate_matrix, c=st.floats(-150, 150).map(lambda e: 10.0**e))
def test_rank_measures_are_invariant_to_positive_scaling(a, c):
    p, q = _measures(a), _measures(a * c)
    for name in CONTINUOUS:
        assert _close(p[name], q[name]), (name, p[name], q[name])


@PROFILE
@given(a=_matrices(_magnitudes(-20, 20)), e=st.integers(-950, 950))
def test_rank_measures_are_invariant_to_scaling_by_powers_of_two(a, e):
    """Exact scalings (every entry stays normal), out to the float limits."""
    p, q = _measures(a), _measures(np.ldexp(a, e))
    for name in CONTINUOUS:
        assert _close(p[name], q[name]), name
    assert p["numerical_rank"] == q["numerical_rank"]


@PROFILE
@given(case=low_rank_products())
def test_numerical_rank_of_a_product_of_rank_k_factors_is_at_most_k(case):
    a, k = case
    rank = spectral.numerical_rank(a)
    assert rank <= k
    assert rank == spectral.numerical_rank(a.T)
    assert spectral.energy_threshold_rank(a, q=1.0) <= k
    assert spectral.energy_effective_rank(a) <= k * (1 + 1e-12)


@PROFILE
@given(stack=st.integers(1, 3).flatmap(
    lambda b: hnp.arrays(np.float64, st.tuples(st.just(b), st.integers(1, 5), st.integers(1, 5)),
                         elements=_magnitudes(-300, 300))))
def test_a_stack_gives_each_matrix_its_own_measures(stack):
    profile = spectral.rank_profile(stack)
    for i, matrix in enumerate(stack):
        one = spectral.rank_profile(matrix)
        for name, value in profile.items():
            assert value[i] == one[name], name


# -- a few bounds -----------------------------------------------------------------

radii = st.floats(0.0, 1e308)
precisions = st.floats(5e-324, 1.0, exclude_max=True)


@PROFILE
@given(d=st.integers(1, 10**6), dd=st.integers(0, 10**6), m=st.integers(1, 1000),
       r1=radii, r2=radii, eps=precisions, v=st.integers(2, 10**6))
def test_count_and_slope_bounds_grow_with_radius_and_width(d, dd, m, r1, r2, eps, v):
    r1, r2 = min(r1, r2), max(r1, r2)
    for f, args in ((bounds.reachable_log_count_bound, (m,)),
                    (bounds.reachable_slope_bound, (v,))):
        low, high = f(d, *args, r1, eps), f(d, *args, r2, eps)
        assert 0.0 <= low <= high < math.inf
        assert f(d, *args, r1, eps) <= f(d + dd, *args, r1, eps)
    widths = np.full(d % 64 + 1, r1)
    assert (bounds.box_slope_bound(widths, v, eps)
            <= bounds.box_slope_bound(np.full(widths.size, r2), v, eps) < math.inf)
    assert bounds.box_log_count_bound(widths, m, eps) <= bounds.box_log_count_bound(
        np.append(widths, r2), m, eps)


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


@pytest.mark.parametrize("scale", [1e308, 1e300, 1e-300, 1e-310, 5e-324])
def test_the_float_limits_of_issue_8(scale):
    """The issue's reproduction, and its subnormal twin: identity times a scale."""
    assert spectral.numerical_rank(np.eye(3) * scale) == 3
    assert spectral.rank_profile(np.eye(3) * scale) == {
        "numerical_rank": 3, "energy_effective_rank": 3.0, "participation_ratio": 3.0,
        "entropy_effective_rank": 3.0, "stable_rank": 3.0, "energy_threshold_rank": 3}


def test_singular_values_beyond_float64_raise_and_below_it_scale_back():
    with pytest.raises(ValueError, match="singular values of a overflow float64"):
        spectral.singular_values(np.ones((3, 2)) * 1e308)
    assert spectral.rank_profile(np.ones((3, 2)) * 1e308)["numerical_rank"] == 1
    np.testing.assert_array_equal(spectral.singular_values(np.eye(2) * 1e-310), [1e-310, 1e-310])
    # an absolute tol is compared at the input's own scale
    assert spectral.numerical_rank(np.diag([1e300, 1e299]), tol=5e299) == 1
    assert spectral.numerical_rank(np.diag([1e-310, 1e-311]), tol=5e-311) == 1


# -- seeds and devices (the other validators) -----------------------

@pytest.mark.parametrize("seed", [-1, 2**32, 10**30, np.int64(-5)])
def test_child_seeds_and_draw_seed_name_random_state(seed):
    from intrinsic_rank._validation import child_seeds, draw_seed

    with pytest.raises(ValueError, match=r"random_state must be an integer in \[0, 4294967295\]"):
        child_seeds(seed, 2)
    with pytest.raises(ValueError, match=r"random_state must be an integer in \[0, 4294967295\]"):
        draw_seed(seed)
    with pytest.raises(ValueError, match=r"random_state must be None, an integer"):
        draw_seed("seven")


def test_valid_seeds_draw_the_same_values_as_before():
    from sklearn.utils import check_random_state as sklearn_check

    from intrinsic_rank._validation import child_seeds, draw_seed

    for seed in (0, 1, 2**32 - 1, np.uint32(7), True):
        expected = sklearn_check(seed).randint(2**31 - 1, size=3)
        np.testing.assert_array_equal(child_seeds(seed, 3), expected)
        assert draw_seed(seed) == expected[0]
    assert child_seeds(0, 2).tolist() == [209652396, 398764591]


def test_check_device_rejects_meta_absent_mps_and_cuda_beyond_the_count(monkeypatch):
    torch = pytest.importorskip("torch")
    from intrinsic_rank._validation import check_device

    with pytest.raises(ValueError, match="cannot train on the meta device"):
        check_device("meta")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device='mps'.*MPS backend is not available"):
        check_device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert check_device("mps").type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda:1").index == 1
    assert check_device("cuda").type == "cuda"
    with pytest.raises(ValueError, match=r"device='cuda:2'.*only 2 CUDA device\(s\).*0 to 1"):
        check_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA device is available"):
        check_device("cuda:0")
    with pytest.raises(ValueError, match="unknown device 'tpu"):
        check_device("tpu")
