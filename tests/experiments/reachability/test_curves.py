"""Curve fits of the reachability experiments: n50, slope, copy cliff."""

import pathlib
import re

import numpy as np
import pytest

from intrinsic_rank.experiments.reachability import _curves
from intrinsic_rank.experiments.reachability._curves import (
    fit_cliff,
    fit_logistic_midpoint,
    fit_n50,
    fit_slope,
)


def _logistic(x, midpoint, scale):
    return 1.0 / (1.0 + np.exp((np.asarray(x, dtype=float) - midpoint) / scale))


def test_fit_n50_recovers_exact_logistic():
    lengths = np.arange(1, 16)
    fit = fit_n50(lengths, _logistic(lengths, 7.3, 0.8))
    assert fit["n50"] == fit["midpoint"]
    assert fit["n50"] == pytest.approx(7.3, abs=1e-3)
    assert fit["scale"] == pytest.approx(0.8, abs=1e-3)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-9)
    assert fit["bracketed"] is True and fit["n_points"] == 15


def test_fit_logistic_midpoint_recovers_off_grid_midpoint_in_any_units():
    # Unordered points, x in hundreds: the start s = 1 must not matter.
    x = np.array([1400, 200, 900, 100, 600, 1100, 300, 700, 500, 800])
    fit = fit_logistic_midpoint(x, _logistic(x, 655.0, 45.0))
    assert fit["midpoint"] == pytest.approx(655.0, abs=0.1)
    assert fit["scale"] == pytest.approx(45.0, abs=0.1)


def test_fit_n50_from_noisy_accessibility():
    # Accessibility measured on 50 targets per length (binomial noise).
    lengths = np.arange(1, 16)
    p = _logistic(lengths, 7.3, 0.8)
    rng = np.random.RandomState(0)
    fit = fit_n50(lengths, rng.binomial(50, p) / 50)
    assert fit["n50"] == pytest.approx(7.3, abs=0.3)
    assert 0.9 < fit["r2"] < 1.0
    # With the paper's 20 targets per point, over many seeds the typical error
    # stays well under 0.3 tokens.
    errors = [
        abs(fit_n50(lengths, rng.binomial(20, p) / 20)["n50"] - 7.3) for _ in range(30)
    ]
    assert np.median(errors) < 0.3


def test_perfect_step_puts_midpoint_between_the_two_lengths():
    fit = fit_n50([1, 2, 3, 4, 5], [1.0, 1.0, 1.0, 0.0, 0.0])
    assert fit["n50"] == pytest.approx(3.5, abs=1e-3)
    assert fit["scale"] < 0.1
    assert fit["r2"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    "y",
    [
        [1.0, 1.0, 1.0, 1.0],  # all reached: the midpoint lies beyond the data
        [1.0, 0.9, 0.7, 0.5],
        [0.0, 0.0, 0.0, 0.0],  # nothing reached
        [0.45, 0.3, 0.1, 0.0],
        [0.0, 0.2, 0.8, 1.0],  # rising through 1/2: no decreasing midpoint
    ],
)
def test_unbracketed_midpoint_is_nan(y):
    fit = fit_n50([2, 4, 6, 8], y)
    assert fit["bracketed"] is False
    assert np.isnan(fit["n50"]) and np.isnan(fit["midpoint"])
    assert np.isnan(fit["scale"]) and np.isnan(fit["r2"])
    assert fit["n_points"] == 4


def test_fit_cliff_reports_abrupt_cliff():
    lengths = np.arange(10, 71, 5)
    exact = _logistic(lengths, 52.0, 1.5)
    fit = fit_cliff(lengths, exact)
    assert fit["midpoint"] == pytest.approx(52.0, abs=1e-2)
    assert fit["scale"] == pytest.approx(1.5, abs=1e-2)
    assert fit["sharpness"] == pytest.approx(1.5 / 52.0, rel=1e-2)
    # exact >= 0.95 up to 45 (0.991), 0.79 at 50, 0.12 at 55, <= 0.05 from 60 (0.005).
    assert fit["last_high_length"] == 45.0
    assert fit["first_low_length"] == 60.0


def test_fit_cliff_gradual_decline_is_not_sharp():
    lengths = np.arange(10, 71, 5)
    gradual = fit_cliff(lengths, _logistic(lengths, 40.0, 10.0))
    abrupt = fit_cliff(lengths, _logistic(lengths, 40.0, 1.0))
    assert gradual["sharpness"] == pytest.approx(0.25, rel=1e-2)
    assert abrupt["sharpness"] < 0.05 < gradual["sharpness"]


def test_fit_cliff_without_cliff():
    fit = fit_cliff([10, 20, 30], [1.0, 1.0, 0.97])
    assert fit["bracketed"] is False
    assert np.isnan(fit["sharpness"]) and np.isnan(fit["midpoint"])
    assert fit["last_high_length"] == 30.0
    assert np.isnan(fit["first_low_length"])


def test_fit_slope_recovers_line():
    m = np.array([1, 2, 4, 8, 16])
    fit = fit_slope(m, 3.2 * m + 0.5)
    assert fit["slope"] == pytest.approx(3.2, abs=1e-12)
    assert fit["intercept"] == pytest.approx(0.5, abs=1e-12)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-12)
    assert fit["n_points"] == 5 and fit["n_dropped"] == 0


def test_fit_slope_noisy_r2_and_dropped_nan():
    m = np.array([1, 2, 3, 4, 6, 8], dtype=float)
    n50 = 3.2 * m + 0.5 + np.array([0.3, -0.3, 0.3, -0.3, 0.0, 0.0])
    n50_with_gaps = np.concatenate([n50, [np.nan, np.nan]])
    fit = fit_slope(np.concatenate([m, [10, 12]]), n50_with_gaps)
    slope, intercept = np.polyfit(m, n50, 1)
    residual = n50 - (slope * m + intercept)
    r2 = 1 - np.sum(residual**2) / np.sum((n50 - n50.mean()) ** 2)
    assert fit["slope"] == pytest.approx(slope) and fit["intercept"] == pytest.approx(intercept)
    assert fit["r2"] == pytest.approx(r2) and 0.98 < fit["r2"] < 1.0
    assert fit["n_points"] == 6 and fit["n_dropped"] == 2


def test_fit_slope_two_points_and_constant():
    two = fit_slope([1, 3], [4.0, 10.0])
    assert (two["slope"], two["intercept"], two["r2"]) == (3.0, 1.0, 1.0)
    flat = fit_slope([1, 2, 3], [5.0, 5.0, 5.0])
    assert (flat["slope"], flat["intercept"], flat["r2"]) == (0.0, 5.0, 1.0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: fit_logistic_midpoint([1, 2, 3], [1.0, 0.0]), "x and y must have equal lengths"),
        (lambda: fit_logistic_midpoint([1], [1.0]), "x must hold at least 2 points"),
        (lambda: fit_logistic_midpoint([1, 1, 1], [1.0, 0.0, 0.0]), "x must hold at least 2 distinct"),
        (lambda: fit_logistic_midpoint([1, np.nan], [1.0, 0.0]), "x must be finite"),
        (lambda: fit_logistic_midpoint([1, 2], [1.0, np.nan]), r"y must be finite fractions in \[0, 1\]"),
        (lambda: fit_logistic_midpoint([1, 2], [1.2, 0.0]), r"y must be finite fractions"),
        (lambda: fit_logistic_midpoint([[1, 2]], [[1.0, 0.0]]), "must be 1-D"),
        (lambda: fit_n50([1, 2], [1.0, -0.1]), "accessibility must be finite fractions"),
        (lambda: fit_n50([0, 2], [1.0, 0.0]), "lengths must be positive"),
        (lambda: fit_n50([1, 2, 3], [1.0, 0.0]), "lengths and accessibility must have equal"),
        (lambda: fit_cliff([1, 2], [1.0, 2.0]), "exact_match must be finite fractions"),
        (lambda: fit_cliff([-1, 2], [1.0, 0.0]), "lengths must be positive"),
        (lambda: fit_slope([1, 2, 3], [1.0, 2.0]), "n_memory and n50 must be 1-D of equal"),
        (lambda: fit_slope([1, 2, np.nan], [1.0, 2.0, 3.0]), "n_memory must be finite"),
        (lambda: fit_slope([1, 2, 3], [1.0, np.inf, 3.0]), "n50 must be finite or NaN"),
        (lambda: fit_slope([1, 2, 3], [1.0, np.nan, np.nan]), "at least 2 non-NaN"),
        (lambda: fit_slope([2, 2, 3], [1.0, 2.0, np.nan]), "distinct n_memory"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_curves_module_has_no_torch_import():
    # Importing the module imports the package (and torch), so read the source;
    # no relative imports either, so nothing of the package comes in through them.
    source = pathlib.Path(_curves.__file__).read_text()
    assert not re.search(r"^\s*(import|from)\s+torch\b", source, flags=re.MULTILINE)
    assert not re.search(r"^\s*from\s+\.\.?\w*\s+import", source, flags=re.MULTILINE)


# -- exponential decay past n50 ------------------------------------------------------------

from intrinsic_rank.experiments.reachability._curves import fit_tail_decay, fit_tail_decays  # noqa: E402


def test_tail_decay_recovers_a_known_rate_exactly():
    n = np.arange(2, 41, 2)
    acc = np.minimum(1.0, np.exp(2.0 - 0.3 * n))
    fit = fit_tail_decay(n, acc, n50=(2.0 + np.log(2)) / 0.3)
    assert fit["rate"] == pytest.approx(0.3, rel=1e-12)
    assert fit["intercept"] == pytest.approx(2.0, rel=1e-10)
    assert fit["rate_se"] == pytest.approx(0.0, abs=1e-12) and fit["r2"] == pytest.approx(1.0)
    assert fit["method"] == "log-ols" and fit["n_points"] == 16 and fit["n_zero"] == 0
    # n50 from the logistic fit when not given: the same tail, the same rate
    assert fit_tail_decay(n, acc)["rate"] == pytest.approx(0.3, rel=1e-9)


def test_binomial_tail_decay_is_calibrated_and_keeps_zeros():
    rng = np.random.default_rng(0)
    n = np.arange(2, 41, 2.0)
    z_binomial, z_ols = [], []
    for _ in range(100):
        k = rng.binomial(200, np.minimum(1.0, np.exp(3.0 - 0.3 * n)))
        b = fit_tail_decay(n, k / 200, n50=12.3, n_targets=200)
        o = fit_tail_decay(n, k / 200, n50=12.3)
        assert b["method"] == "binomial" and b["n_points"] == o["n_points"] + o["n_zero"]
        z_binomial.append((b["rate"] - 0.3) / b["rate_se"])
        z_ols.append((o["rate"] - 0.3) / o["rate_se"])
    # the binomial fit is unbiased with honest errors; dropping zeros biases OLS low
    assert abs(np.mean(z_binomial)) < 0.35 and 0.75 < np.std(z_binomial) < 1.25
    assert np.mean(z_ols) < -1.0


def test_tail_decay_without_a_tail():
    nan = fit_tail_decay([2, 4, 6], [1.0, 0.9, 0.6])  # never falls through 1/2
    assert np.isnan(nan["rate"]) and np.isnan(nan["n50"]) and nan["method"] is None
    few = fit_tail_decay([2, 4, 6, 8], [1.0, 0.9, 0.2, 0.0], n50=5.0)
    assert np.isnan(few["rate"]) and few["n_points"] == 1 and few["n_zero"] == 1
    zeros = fit_tail_decay([2, 4, 6, 8], [1.0, 0.9, 0.0, 0.0], n50=5.0, n_targets=20)
    assert zeros["method"] is None and zeros["n_zero"] == 2


@pytest.mark.parametrize("kwargs, match", [
    (dict(n50=np.inf), "n50 must be finite or NaN"),
    (dict(n_targets=0), "n_targets must be an integer >= 1"),
    (dict(n_targets=2.5), "n_targets must be an integer >= 1"),
])
def test_tail_decay_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_tail_decay([2, 4, 6], [1.0, 0.4, 0.1], **kwargs)


def test_tail_decays_per_m():
    records = [dict(n_memory=m, length=n, accessibility=min(1.0, np.exp(0.5 * (3 * m - n))))
               for m in (3, 1, 2) for n in range(2, 31, 2)]
    fits = fit_tail_decays(records)
    assert [f["n_memory"] for f in fits] == [1, 2, 3]
    assert [f["rate"] for f in fits] == pytest.approx([0.5] * 3, rel=1e-9)
    given = fit_tail_decays(records, n50=[dict(n_memory=1, n50=4.0), dict(n_memory=2, n50=7.0)])
    assert given[0]["n50"] == 4.0 and np.isnan(given[2]["rate"])  # m = 3 has no n50
    one = fit_tail_decays([dict(n_memory=1, length=4, accessibility=0.5)])
    assert np.isnan(one[0]["rate"])


def test_binomial_tail_needs_two_nonzero_lengths():
    # one nonzero length and zeros after it: the rate is not identified (it runs off to
    # infinity), so no number is reported rather than an arbitrary large one
    one = fit_tail_decay([2, 4, 6, 8, 10], [1.0, 0.9, 0.15, 0.0, 0.0], n50=5.0, n_targets=20)
    assert one["method"] is None and np.isnan(one["rate"]) and np.isnan(one["rate_se"])
    assert (one["n_points"], one["n_zero"]) == (3, 2)
    # two nonzero lengths identify it: k = 8 and 2 of 20 give rate ln(4) / 2 per token
    two = fit_tail_decay([2, 4, 6, 8], [1.0, 0.6, 0.4, 0.1], n50=5.0, n_targets=20)
    assert two["method"] == "binomial"
    assert two["rate"] == pytest.approx(np.log(4) / 2, rel=1e-4)
