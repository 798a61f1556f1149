"""Tests for intrinsic_rank.spectral."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from intrinsic_rank import spectral
from intrinsic_rank.spectral import (
    energy_effective_rank,
    energy_threshold_rank,
    entropy_effective_rank,
    numerical_rank,
    participation_ratio,
    rank_profile,
    singular_values,
    stable_rank,
)

CONTINUOUS = [
    energy_effective_rank,
    participation_ratio,
    entropy_effective_rank,
    stable_rank,
]
COUNTS = [numerical_rank, energy_threshold_rank]
ALL_MEASURES = CONTINUOUS + COUNTS


def _entropy(p):
    return -sum(x * math.log(x) for x in p if x > 0)


def _random_rank_r(rng, m, n, s):
    """U diag(s) V^T with orthonormal U (m x r), V (n x r)."""
    r = len(s)
    u, _ = np.linalg.qr(rng.standard_normal((m, r)))
    v, _ = np.linalg.qr(rng.standard_normal((n, r)))
    return (u * s) @ v.T


# ---------------------------------------------------------------- equal values


@pytest.mark.parametrize("r, n", [(1, 1), (1, 5), (3, 8), (7, 7), (50, 64)])
@pytest.mark.parametrize("measure", ALL_MEASURES)
def test_r_equal_singular_values_give_r(measure, r, n):
    s = np.r_[np.full(r, 2.5), np.zeros(n - r)]
    assert measure(s) == pytest.approx(r, rel=1e-12)


def test_equal_values_are_exact_not_just_close():
    # Scaling by s_max makes equal values exactly 1, so no log/exp roundoff.
    assert energy_effective_rank([1, 1, 1, 0]) == 3.0
    assert participation_ratio([7, 7, 7]) == 3.0
    assert entropy_effective_rank([0.3] * 5) == 5.0
    assert stable_rank([0.3] * 5) == 5.0


def test_energy_threshold_rank_counts_nonzero_with_q_one():
    s = np.array([0.1, 0.7, 0.3, 0.0, 0.2, 0.0])
    assert energy_threshold_rank(s, q=1.0) == 4


# ------------------------------------------------------------- hand computed


def test_hand_computed_three_four():
    s = [3.0, 4.0]
    assert participation_ratio(s) == pytest.approx(625 / 337, rel=1e-14)
    assert stable_rank(s) == pytest.approx(25 / 16, rel=1e-14)
    assert entropy_effective_rank(s) == pytest.approx(
        math.exp(_entropy([3 / 7, 4 / 7])), rel=1e-14
    )
    assert energy_effective_rank(s) == pytest.approx(
        math.exp(_entropy([9 / 25, 16 / 25])), rel=1e-14
    )
    assert numerical_rank(s) == 2
    assert energy_threshold_rank(s, q=0.64) == 1  # 16/25 = 0.64 exactly
    assert energy_threshold_rank(s, q=0.65) == 2


def test_hand_computed_entropy_value():
    # p = [9/25, 16/25]: H = -(0.36 ln 0.36 + 0.64 ln 0.64) = 0.653418...,
    # so exp(H) = 1.922100 (worked out by hand, not by the code under test).
    assert energy_effective_rank([3, 4]) == pytest.approx(1.922100, abs=1e-6)


def test_order_of_singular_values_does_not_matter():
    s = np.array([0.5, 3.0, 0.0, 1.2, 2.0])
    for measure in ALL_MEASURES:
        assert measure(s) == measure(s[::-1]) == measure(np.sort(s))


def test_scale_invariance():
    s = np.array([3.0, 1.0, 0.4, 0.01])
    for measure in ALL_MEASURES:
        assert measure(1e-150 * s) == pytest.approx(measure(s), rel=1e-12)
        assert measure(1e150 * s) == pytest.approx(measure(s), rel=1e-12)


# ------------------------------------------------------------- matrix input


def test_matrix_input_matches_singular_value_input():
    rng = np.random.default_rng(0)
    s = np.array([5.0, 2.0, 0.5])
    a = _random_rank_r(rng, 10, 8, s)
    s_full = np.r_[s, np.zeros(5)]

    np.testing.assert_allclose(singular_values(a)[:3], s, rtol=1e-12)
    assert singular_values(a).shape == (8,)
    assert numerical_rank(a) == 3
    assert numerical_rank(a) == np.linalg.matrix_rank(a)
    for measure in [energy_effective_rank, participation_ratio, stable_rank]:
        assert measure(a) == pytest.approx(measure(s_full), rel=1e-12)
        assert measure(a) == pytest.approx(measure(s), rel=1e-12)
    # Roundoff singular values (~1e-16) weigh s_i, not s_i**2, so only close.
    assert entropy_effective_rank(a) == pytest.approx(
        entropy_effective_rank(s), rel=1e-12
    )
    assert energy_threshold_rank(a) == energy_threshold_rank(s)


def test_matrix_results_are_python_scalars():
    a = np.diag([3.0, 2.0, 1.0])
    for measure in CONTINUOUS:
        assert type(measure(a)) is float
    for measure in COUNTS:
        assert type(measure(a)) is int


def test_wide_and_tall_and_complex_and_integer_matrices():
    a = np.array([[3, 0, 0, 0], [0, 4, 0, 0]])  # integer, wide
    assert stable_rank(a) == pytest.approx(25 / 16)
    assert stable_rank(a.T) == pytest.approx(25 / 16)
    assert stable_rank(1j * a) == pytest.approx(25 / 16)
    assert participation_ratio(a.astype(np.float32)) == pytest.approx(
        625 / 337, rel=1e-6
    )


def test_default_threshold_follows_matrix_rank_for_float32():
    rng = np.random.default_rng(1)
    a = _random_rank_r(rng, 20, 12, np.array([1.0, 1e-5, 1e-9]))
    for dtype in (np.float64, np.float32):
        assert numerical_rank(a.astype(dtype)) == np.linalg.matrix_rank(
            a.astype(dtype)
        )
    assert numerical_rank(a) == 3
    assert numerical_rank(a.astype(np.float32)) == 2  # 1e-9 < 1 * 20 * 1.2e-7


def test_one_d_default_threshold_uses_length_and_float64_eps():
    eps = np.finfo(np.float64).eps
    assert numerical_rank([1.0, 0.0, 0.0, 3.5 * eps]) == 1
    assert numerical_rank([1.0, 0.0, 0.0, 4.5 * eps]) == 2


# ---------------------------------------------------------------- stacks


def test_stacks_are_computed_per_matrix():
    rng = np.random.default_rng(2)
    ranks = rng.integers(1, 7, size=(4, 5))
    a = np.empty((4, 5, 6, 6))
    for idx in np.ndindex(4, 5):
        s = np.sort(rng.uniform(0.1, 3.0, size=ranks[idx]))[::-1]
        a[idx] = _random_rank_r(rng, 6, 6, s)
    a[0, 0] = 0.0  # an all-zero member of the stack

    for measure in ALL_MEASURES:
        out = measure(a)
        assert isinstance(out, np.ndarray)
        assert out.shape == (4, 5)
        expected = np.array(
            [measure(a[idx]) for idx in np.ndindex(4, 5)]
        ).reshape(4, 5)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(numerical_rank(a)[1:], ranks[1:])
    assert numerical_rank(a)[0, 0] == 0
    assert singular_values(a).shape == (4, 5, 6)


def test_stack_profile_and_broadcast_tol():
    a = np.stack([np.diag([4.0, 2.0, 1.0]), np.diag([4.0, 0.5, 0.1])])
    profile = rank_profile(a, tol=0.3)
    for name, value in profile.items():
        assert value.shape == (2,), name
    np.testing.assert_array_equal(profile["numerical_rank"], [3, 2])
    np.testing.assert_array_equal(numerical_rank(a, tol=[0.3, 0.05]), [3, 3])
    np.testing.assert_array_equal(numerical_rank(a, rtol=[0.3, 0.05]), [2, 2])


# -------------------------------------------------------- tol and rtol


def test_numerical_rank_tol_and_rtol():
    s = [10.0, 1.0, 0.1, 0.01]
    assert numerical_rank(s, tol=0.05) == 3
    assert numerical_rank(s, tol=1.0) == 1  # strict: s > tol
    assert numerical_rank(s, tol=0.0) == 4
    assert numerical_rank(s, rtol=0.05) == 2  # threshold 0.5
    assert numerical_rank(s, rtol=1e-3) == 3  # threshold 0.01, strict
    assert numerical_rank(s, rtol=9e-4) == 4
    assert numerical_rank(s, rtol=0.99) == 1


def test_numerical_rank_rejects_both_tol_and_rtol():
    with pytest.raises(ValueError, match="tol and rtol"):
        numerical_rank([1.0, 0.5], tol=0.1, rtol=0.1)


@pytest.mark.parametrize("kwargs", [{"tol": -1.0}, {"rtol": np.nan}])
def test_numerical_rank_rejects_bad_thresholds(kwargs):
    with pytest.raises(ValueError, match="nonnegative"):
        numerical_rank([1.0, 0.5], **kwargs)


# --------------------------------------------------------- decaying spectrum


@pytest.mark.parametrize("decay", [0.3, 0.7, 0.95])
def test_decaying_spectrum_ordering(decay):
    s = decay ** np.arange(20)
    sr, pr, er = stable_rank(s), participation_ratio(s), energy_effective_rank(s)
    nr = numerical_rank(s)
    assert nr == 20
    assert 1.0 <= sr <= pr <= er < nr
    assert er < entropy_effective_rank(s)  # s_i weighs the tail more than s_i**2
    assert energy_threshold_rank(s) <= nr


def test_ordering_holds_on_random_spectra():
    # sr = 1/p_max <= PR = 1/sum p^2 <= exp(H(p)) <= #nonzero: exp of Renyi
    # entropies of orders inf, 2, 1, 0, which decrease with the order.
    rng = np.random.default_rng(3)
    s = rng.exponential(size=(200, 15)) ** 3
    s[:, 10:] *= rng.integers(0, 2, size=(200, 5))  # some exact zeros
    a = s[:, :, None] * np.eye(15)  # a stack of diagonal matrices: 2-D is one matrix
    sr, pr, er = stable_rank(a), participation_ratio(a), energy_effective_rank(a)
    nonzero = np.count_nonzero(s, axis=-1)
    tol = 1e-12
    assert np.all(1 - tol <= sr)
    assert np.all(sr <= pr * (1 + tol))
    assert np.all(pr <= er * (1 + tol))
    assert np.all(er <= nonzero * (1 + tol))
    assert np.all(entropy_effective_rank(a) <= nonzero * (1 + tol))


def test_geometric_spectrum_closed_forms():
    # p_i proportional to x**i (i = 0..n-1), x = decay**2.
    decay, n = 0.5, 12
    s = decay ** np.arange(n)
    x = decay**2
    total = (1 - x**n) / (1 - x)
    assert stable_rank(s) == pytest.approx(total, rel=1e-14)
    pr = total**2 / ((1 - x ** (2 * n)) / (1 - x**2))
    assert participation_ratio(s) == pytest.approx(pr, rel=1e-14)
    p = x ** np.arange(n) / total
    assert energy_effective_rank(s) == pytest.approx(
        math.exp(_entropy(p)), rel=1e-13
    )
    # Cumulative energy fraction after k terms is (1 - x**k) / (1 - x**n).
    k = next(k for k in range(1, n + 1) if (1 - x**k) / (1 - x**n) >= 0.99)
    assert energy_threshold_rank(s) == k == 4


# ------------------------------------------------------------------ threshold


def test_energy_threshold_rank_values():
    s = [3.0, 2.0, 1.0]  # energies 9, 4, 1 of 14
    assert energy_threshold_rank(s, q=9 / 14) == 1
    assert energy_threshold_rank(s, q=9 / 14 + 1e-9) == 2
    assert energy_threshold_rank(s, q=13 / 14) == 2
    assert energy_threshold_rank(s, q=0.99) == 3
    assert energy_threshold_rank(s, q=1e-12) == 1


@pytest.mark.parametrize("r", [3, 10, 99])
def test_energy_threshold_rank_equal_values_q99(r):
    assert energy_threshold_rank(np.ones(r), q=0.99) == r
    assert energy_threshold_rank(np.ones(r), q=1.0) == r


def test_energy_threshold_rank_equal_values_from_100_is_ceil():
    # ceil(0.99 * r) < r once r >= 100; 0.99 * 100 is exactly 99 in float64.
    assert energy_threshold_rank(np.ones(100), q=0.99) == 99
    assert energy_threshold_rank(np.ones(200), q=0.99) == 198


@pytest.mark.parametrize("q", [0.0, -0.1, 1.01, np.nan])
def test_energy_threshold_rank_rejects_bad_q(q):
    with pytest.raises(ValueError, match=r"q must be a finite real number in \(0, 1\]"):
        energy_threshold_rank([1.0, 0.5], q=q)


# ------------------------------------------------------------------ zeros


def test_all_zero_spectrum_gives_zero():
    for a in [np.zeros(4), np.zeros((3, 5)), [0, 0]]:
        for measure in ALL_MEASURES:
            result = measure(a)
            assert result == 0.0
            assert not np.isnan(result)
    for value in rank_profile(np.zeros(3)).values():
        assert value == 0


def test_all_zero_stack_gives_zeros():
    for measure in ALL_MEASURES:
        np.testing.assert_array_equal(measure(np.zeros((2, 3, 4, 4))), 0.0)


# ------------------------------------------------------------------ profile


def test_rank_profile_matches_individual_functions():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((7, 5)) * np.array([5.0, 2.0, 1.0, 0.1, 1e-3])
    profile = rank_profile(a, tol=0.05, q=0.9)
    assert list(profile) == [
        "numerical_rank",
        "energy_effective_rank",
        "participation_ratio",
        "entropy_effective_rank",
        "stable_rank",
        "energy_threshold_rank",
    ]
    assert profile["numerical_rank"] == numerical_rank(a, tol=0.05)
    assert profile["energy_threshold_rank"] == energy_threshold_rank(a, q=0.9)
    for f in CONTINUOUS:
        assert profile[f.__name__] == f(a)
    assert type(profile["numerical_rank"]) is int
    assert type(profile["stable_rank"]) is float


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("measure", ALL_MEASURES + [singular_values, rank_profile])
@pytest.mark.parametrize(
    "bad, message",
    [
        ([1.0, np.nan], "finite.*1 NaN"),
        ([1.0, np.inf], "finite.*1 inf"),
        ([[1.0, 0.0], [-np.inf, 1.0]], "finite"),
        ([1.0, -0.3], "nonnegative; got min -0.3"),
        ([], "empty"),
        (np.zeros((0, 3)), "empty"),
        (np.zeros((2, 0, 3)), "empty"),
        (["a", "b"], "numeric"),
        ([[1, "x"], [2, 3]], "numeric"),
        (np.array([1.0, 2.0], dtype=object), "numeric"),
        (3.0, "scalar"),
        (np.array([1.0 + 1j, 2.0]), "real"),
    ],
)
def test_invalid_input_raises(measure, bad, message):
    with pytest.raises(ValueError, match=message):
        measure(bad)


def test_negative_entries_allowed_in_matrices():
    # Only 1-D input is read as singular values; matrices may be negative.
    assert stable_rank([[-3.0, 0.0], [0.0, -4.0]]) == pytest.approx(25 / 16)


def test_singular_values_sorted_descending_float64():
    s = singular_values(np.array([1, 5, 3], dtype=np.int32))
    assert s.dtype == np.float64
    np.testing.assert_array_equal(s, [5.0, 3.0, 1.0])
    assert singular_values([True, False]).tolist() == [1.0, 0.0]


def test_public_names():
    assert sorted(spectral.__all__) == sorted(
        [
            "singular_values",
            "numerical_rank",
            "energy_effective_rank",
            "participation_ratio",
            "entropy_effective_rank",
            "stable_rank",
            "energy_threshold_rank",
            "rank_profile",
        ]
    )
    for name in spectral.__all__:
        doc = getattr(spectral, name).__doc__
        for section in ["Parameters", "Returns", "Notes", "References", "Examples"]:
            assert section in doc, (name, section)


def test_doctests_pass():
    import doctest

    result = doctest.testmod(spectral, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize("scale", [1e308, 1e-310, 2.0**-1074])
def test_measures_at_the_float_limits_equal_those_at_unit_scale(scale):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 4)) @ np.diag([1.0, 0.5, 0.25, 0.0])
    a = a / np.max(np.abs(a))
    if scale > 1:  # a scaling that overflows nothing but the SVD's own sums
        expected, scaled = rank_profile(a), a * scale
    else:  # a subnormal matrix: compare with the same stored values at unit scale
        scaled = np.eye(3) * scale
        expected = rank_profile(np.eye(3))
    got = rank_profile(scaled)
    assert got["numerical_rank"] == expected["numerical_rank"]
    for name in ("energy_effective_rank", "participation_ratio", "entropy_effective_rank",
                 "stable_rank"):
        assert got[name] == pytest.approx(expected[name], rel=1e-12), name


PROFILE = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


CONTINUOUS_NAMES = ("energy_effective_rank", "participation_ratio", "entropy_effective_rank",
              "stable_rank")


COUNTING_NAMES = ("numerical_rank", "energy_threshold_rank")


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


@PROFILE
@given(a=any_matrix)
def test_rank_measures_are_finite_and_within_their_ranges(a):
    k = min(a.shape)
    profile = _measures(a)
    for name in COUNTING_NAMES:
        assert type(profile[name]) is int and 0 <= profile[name] <= k
    for name in CONTINUOUS_NAMES:
        assert type(profile[name]) is float and math.isfinite(profile[name])
    if not np.any(a):
        assert all(v == 0 for v in profile.values())
        return
    for name in CONTINUOUS_NAMES:
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
    for name in CONTINUOUS_NAMES:
        assert _close(p[name], q[name]), name


@PROFILE
@given(a=moderate_matrix, c=st.floats(-150, 150).map(lambda e: 10.0**e))
def test_rank_measures_are_invariant_to_positive_scaling(a, c):
    p, q = _measures(a), _measures(a * c)
    for name in CONTINUOUS_NAMES:
        assert _close(p[name], q[name]), (name, p[name], q[name])


@PROFILE
@given(a=_matrices(_magnitudes(-20, 20)), e=st.integers(-950, 950))
def test_rank_measures_are_invariant_to_scaling_by_powers_of_two(a, e):
    """Exact scalings (every entry stays normal), out to the float limits."""
    p, q = _measures(a), _measures(np.ldexp(a, e))
    for name in CONTINUOUS_NAMES:
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


@pytest.mark.parametrize("scale", [1e308, 1e300, 1e-300, 1e-310, 5e-324])
def test_identity_keeps_full_rank_at_the_float_limits(scale):
    """Identity times a huge, tiny or subnormal scale keeps rank 3 (it read 0 at 1e308)."""
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
