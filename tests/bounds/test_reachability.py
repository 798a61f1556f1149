"""Reachable-sequence bounds of the reachability paper in intrinsic_rank.bounds."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intrinsic_rank import bounds


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (np.float16, 2.0**-10),
        (np.dtype("float32"), 2.0**-23),
        (float, 2.0**-52),  # the Python type is float64 through numpy
        ("half", 2.0**-10),
        ("float", 2.0**-23),  # C / torch naming
        ("double", 2.0**-52),
        ("bfloat16", 2.0**-7),
        ("torch.float16", 2.0**-10),
        ("torch.bfloat16", 2.0**-7),
        ("torch.float32", 2.0**-23),
        (" Float64 ", 2.0**-52),
    ],
)
def test_precision_from_dtype_is_machine_epsilon(dtype, expected):
    assert bounds.precision_from_dtype(dtype) == expected


def test_precision_from_dtype_matches_numpy_and_torch_finfo():
    torch = pytest.importorskip("torch")
    for name in ("float16", "float32", "float64"):
        assert bounds.precision_from_dtype(name) == np.finfo(name).eps
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        # A torch dtype object, and its str, without bounds importing torch.
        assert bounds.precision_from_dtype(dtype) == torch.finfo(dtype).eps
        assert bounds.precision_from_dtype(str(dtype)) == torch.finfo(dtype).eps


@pytest.mark.parametrize("dtype", ["int32", np.int64, "float128x", "complex64", None, True])
def test_precision_from_dtype_rejects_other_types(dtype):
    with pytest.raises(ValueError, match=r"dtype must be a floating dtype.*bfloat16"):
        bounds.precision_from_dtype(dtype)


def test_count_and_slope_closed_forms():
    # 1 + 2*2/0.5 = 9 cells per coordinate, d*m = 6 coordinates: 9**6.
    assert bounds.reachable_log_count_bound(2, 3, 2.0, 0.5) == pytest.approx(6 * math.log(9))
    # d = 64, r = 4, eps = 2**-10: 1 + 8192 cells per axis, |V| = 64 = 2**6.
    log_cells = math.log(8193)
    assert bounds.reachable_log_count_bound(64, 4, 4.0, 2**-10) == pytest.approx(
        256 * log_cells
    )
    assert bounds.reachable_slope_bound(64, 64, 4.0, 2**-10) == pytest.approx(
        64 * log_cells / (6 * math.log(2))
    )
    # Radius 0: a single cell, a single reachable sequence, slope 0.
    assert bounds.reachable_log_count_bound(8, 2, 0.0, 0.1) == 0.0
    assert bounds.reachable_slope_bound(8, 100, 0, 0.1) == 0.0


def test_slope_is_the_count_per_memory_vector_in_units_of_ln_vocab():
    # C * m * ln|V| = ln(count): the length at which |V|**n reaches the count.
    for m in (1, 3, 7):
        count = bounds.reachable_log_count_bound(16, m, 2.5, 2**-7)
        slope = bounds.reachable_slope_bound(16, 1000, 2.5, 2**-7)
        assert slope * m * math.log(1000) == pytest.approx(count)


def test_bounds_grow_with_radius_and_shrink_with_precision():
    radii = [0.5, 1.0, 2.0, 8.0]
    by_radius = [bounds.reachable_slope_bound(32, 500, r, 2**-10) for r in radii]
    assert np.all(np.diff(by_radius) > 0)
    epsilons = [2**-52, 2**-23, 2**-10, 2**-7]
    by_eps = [bounds.reachable_log_count_bound(32, 2, 1.0, e) for e in epsilons]
    assert np.all(np.diff(by_eps) < 0)
    widths = np.linspace(0.1, 2.0, 32)
    assert bounds.box_slope_bound(widths * 2, 500, 2**-10) > bounds.box_slope_bound(
        widths, 500, 2**-10
    )


def test_box_with_widths_two_r_equals_ball():
    d, m, r, eps, V = 48, 5, 3.25, 2**-10, 50257
    widths = np.full(d, 2 * r)
    assert bounds.box_log_count_bound(widths, m, eps) == pytest.approx(
        bounds.reachable_log_count_bound(d, m, r, eps), rel=1e-12
    )
    assert bounds.box_slope_bound(widths, V, eps) == pytest.approx(
        bounds.reachable_slope_bound(d, V, r, eps), rel=1e-12
    )


def test_box_closed_form_and_zero_width_axes():
    # (1 + 2/0.5)(1 + 4/0.5) = 5 * 9 = 45 cells per memory vector; a constant
    # coordinate (width 0) adds a single cell.
    assert bounds.box_log_count_bound([2.0, 4.0, 0.0], 2, 0.5) == pytest.approx(
        2 * math.log(45)
    )
    assert bounds.box_slope_bound([2.0, 4.0], 45, 0.5) == pytest.approx(1.0)


def test_hidden_state_geometry_of_known_states():
    states = np.array(
        [[[1.0, -3.0, 0.5], [2.0, 1.0, 0.5]], [[-0.5, 0.0, 0.5], [1.5, 2.0, 0.5]]]
    )
    g = bounds.hidden_state_geometry(states)
    assert g.radius == 3.0
    np.testing.assert_array_equal(g.widths, [2.5, 5.0, 0.0])
    np.testing.assert_array_equal(g.center, [0.75, -0.5, 0.5])
    assert g.n_states == 4
    assert g["radius"] == g.radius  # a dict with attribute access
    one = bounds.hidden_state_geometry([0.25, -2.0])
    assert one.radius == 2.0 and one.n_states == 1
    np.testing.assert_array_equal(one.widths, [0.0, 0.0])


def test_geometry_box_bound_never_exceeds_ball_bound():
    rng = np.random.RandomState(0)
    states = rng.standard_t(df=3, size=(200, 16)) * rng.uniform(0.1, 3.0, size=16)
    g = bounds.hidden_state_geometry(states.astype(np.float16))
    assert np.all(g.widths <= 2 * g.radius)
    box = bounds.box_slope_bound(g.widths, 1000, 2**-10)
    ball = bounds.reachable_slope_bound(16, 1000, g.radius, 2**-10)
    assert 0 < box < ball


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bounds.reachable_log_count_bound(0, 1, 1.0, 0.1), r"width must be an integer >= 1; got 0"),
        (lambda: bounds.reachable_log_count_bound(4.0, 1, 1.0, 0.1), r"width must be an integer"),
        (lambda: bounds.reachable_log_count_bound(4, 0, 1.0, 0.1), r"n_memory must be an integer >= 1"),
        (lambda: bounds.reachable_log_count_bound(4, True, 1.0, 0.1), r"n_memory must be an integer"),
        (lambda: bounds.reachable_log_count_bound(4, 1, -1.0, 0.1), r"radius must be .*got -1.0"),
        (lambda: bounds.reachable_log_count_bound(4, 1, np.inf, 0.1), r"radius must be a finite"),
        (lambda: bounds.reachable_log_count_bound(4, 1, "1", 0.1), r"radius must be a finite real number"),
        (lambda: bounds.reachable_log_count_bound(4, 1, 1.0, 0.0), r"precision must be .*\(0.0, 1.0\)"),
        (lambda: bounds.reachable_log_count_bound(4, 1, 1.0, 1.0), r"precision must be"),
        (lambda: bounds.reachable_log_count_bound(4, 1, 1.0, np.nan), r"precision must be"),
        (lambda: bounds.reachable_slope_bound(4, 1, 1.0, 0.1), r"vocab_size must be an integer >= 2; got 1"),
        (lambda: bounds.reachable_slope_bound(0, 10, 1.0, 0.1), r"width must be"),
        (lambda: bounds.reachable_slope_bound(4, 10, 1.0, -0.1), r"precision must be"),
        (lambda: bounds.box_log_count_bound([1.0, -1.0], 1, 0.1), r"widths must be finite and nonnegative"),
        (lambda: bounds.box_log_count_bound([1.0, np.nan], 1, 0.1), r"widths must be finite"),
        (lambda: bounds.box_log_count_bound([], 1, 0.1), r"widths must be a non-empty 1-D"),
        (lambda: bounds.box_log_count_bound(np.ones((2, 2)), 1, 0.1), r"widths must be a non-empty 1-D"),
        (lambda: bounds.box_log_count_bound([1.0], 0, 0.1), r"n_memory must be"),
        (lambda: bounds.box_slope_bound([1.0], 1, 0.1), r"vocab_size must be"),
        (lambda: bounds.box_slope_bound([1.0], 10, 2.0), r"precision must be"),
        (lambda: bounds.hidden_state_geometry(np.float64(1.0)), r"hidden_states must be at least 1-D"),
        (lambda: bounds.hidden_state_geometry(np.zeros((3, 0))), r"hidden_states must be at least 1-D"),
        (lambda: bounds.hidden_state_geometry(np.zeros((0, 4))), r"hidden_states holds no states"),
        (lambda: bounds.hidden_state_geometry([[1.0, np.inf]]), r"hidden_states must be finite"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_reach_bounds_at_the_float_limits():
    # 2r/eps overflows, the bound itself does not: ln(2r/eps) computed in logs
    expected = 4 * 2 * (math.log(2.0) + math.log(1e308) - math.log(1e-10))
    assert bounds.reachable_log_count_bound(4, 2, radius=1e308, precision=1e-10) == pytest.approx(
        expected, rel=1e-15)
    assert bounds.box_log_count_bound([1e308, 0.0], 1, 1e-10) == pytest.approx(
        math.log(1e308) - math.log(1e-10), rel=1e-15)
    with pytest.raises(ValueError, match="width must be at most"):
        bounds.reachable_log_count_bound(10**400, 1, 1.0, 0.5)
    with pytest.raises(ValueError, match="vocab_size must be at most"):
        bounds.reachable_slope_bound(4, 10**400, 1.0, 0.5)
    with pytest.raises(ValueError, match="log count .* overflows float64"):
        bounds.reachable_log_count_bound(10**300, 10**300, 1.0, 0.5)
    g = bounds.hidden_state_geometry(np.array([[1e308, 1.0], [1e308, 3.0]]))
    assert g.center.tolist() == [1e308, 2.0] and g.widths.tolist() == [0.0, 2.0]
    with pytest.raises(ValueError, match="max - min overflows, first at index 0"):
        bounds.hidden_state_geometry(np.array([[1e308], [-1e308]]))


PROFILE = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


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
    # 2 ** (log2(r) - 11) is r / 2048
    assert bounds.precision_for("relative", radius_inf=59.90625) == pytest.approx(
        59.90625 / 2048, rel=1e-14)


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
