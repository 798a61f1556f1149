"""Training-free estimates of the teachers' mixers (intrinsic_rank/operator_fit)."""

import doctest
import math
import pathlib

import numpy as np
import pytest

from intrinsic_rank import operator_fit as of
from intrinsic_rank import spectral
from intrinsic_rank.datasets import make_attention_task, make_fixed_operator_task


def _cosine(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---------------------------------------------------------------------------
# Exact recovery without noise
# ---------------------------------------------------------------------------


def test_linear_kernel_known_value_map_recovers_kernel_exactly():
    # Also pins the index convention of G = sum_n kron(X^T X, S S^T): a wrong
    # ordering would not reproduce K.reshape(-1).
    X, Y, info = make_attention_task(
        "linear", n_samples=300, seq_len=8, d=8, d_out=5, rank=3, noise=0.0,
        random_state=0, return_info=True,
    )
    fit = of.fit_linear_kernel(X, Y, value_map=info.value_map, ridge=0.0)
    np.testing.assert_allclose(fit.kernel, info.kernel, rtol=0, atol=1e-8)
    assert fit.matrix is fit.kernel
    np.testing.assert_allclose(of.predict(fit, X), Y, rtol=0, atol=1e-8)
    assert (fit.n_equations, fit.n_unknowns) == (300 * 8 * 5, 64)
    # The default relative ridge (1e-8) only perturbs at that level.
    default = of.fit_linear_kernel(X, Y, value_map=info.value_map)
    np.testing.assert_allclose(default.kernel, info.kernel, rtol=0, atol=1e-6)


def test_fixed_operator_known_value_map_recovers_operator_exactly():
    X, Y, info = make_fixed_operator_task(
        n_samples=200, seq_len=8, d=6, d_out=3, rank=3, noise=0.0,
        random_state=0, return_info=True,
    )
    fit = of.fit_fixed_operator(X, Y, value_map=info.value_map, ridge=0.0)
    np.testing.assert_allclose(fit.operator, info.operator, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fit.singular_values[:3], info.singular_values, atol=1e-8)
    assert fit.noise_aware_rank == 3
    assert (fit.n_equations, fit.n_unknowns, fit.n_targets) == (200 * 3, 8, 8)


def test_fixed_operator_unknown_value_map_recovers_operator_up_to_scale():
    X, Y, info = make_fixed_operator_task(
        n_samples=200, seq_len=6, d=4, d_out=3, rank=2, noise=0.0,
        random_state=1, return_info=True,
    )
    fit = of.fit_fixed_operator(X, Y, ridge=0.0)
    assert abs(_cosine(fit.operator, info.operator)) == pytest.approx(1.0, abs=1e-10)
    # The product A V (what the data determine) is recovered exactly.
    np.testing.assert_allclose(of.predict(fit, X), Y, rtol=0, atol=1e-8)
    assert fit.noise_aware_rank == 2
    assert (fit.n_equations, fit.n_unknowns) == (200, 6 * 4)
    # R = vec(A) vec(V^T)^T is rank one: the second singular value is roundoff.
    assert fit.kronecker_singular_values[1] < 1e-10 * fit.kronecker_singular_values[0]


def test_lifted_linear_fit_is_exact_without_noise():
    X, Y, info = make_attention_task(
        "linear", n_samples=300, seq_len=8, d=5, d_out=4, rank=2, noise=0.0,
        random_state=0, return_info=True,
    )
    fit = of.fit_linear_kernel(X, Y, ridge=0.0)
    d, q, d_out = 5, 15, 4
    assert fit.lifted_coef.shape == (d, q, d_out)
    assert fit.matrix.shape == (d, q * d_out)
    # T[a, (bc), e] = K_ab V_ce + K_ac V_be (b < c), K_ab V_be (b = c).
    K, V = info.kernel, info.value_map
    rows, cols = np.triu_indices(d)
    expected = K[:, rows, None] * V[None, cols, :] + K[:, cols, None] * V[None, rows, :]
    expected[:, rows == cols] /= 2
    np.testing.assert_allclose(fit.lifted_coef, expected, rtol=0, atol=1e-8)
    np.testing.assert_allclose(of.predict_linear_lifted(X, fit.lifted_coef), Y, atol=1e-8)
    assert fit.noise_aware_rank == 2


# ---------------------------------------------------------------------------
# Ranks under noise
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("d, rank", [(8, 2), (12, 5), (16, 11)])
def test_linear_kernel_known_value_map_gives_exact_rank_under_noise(d, rank):
    X, Y, info = make_attention_task(
        "linear", n_samples=1024, seq_len=8, d=d, rank=rank, noise=0.1,
        random_state=3, return_info=True,
    )
    fit = of.fit_linear_kernel(X, Y, value_map=info.value_map)
    assert spectral.energy_effective_rank(fit.matrix) == pytest.approx(rank, abs=0.15)
    assert fit.energy_effective_rank == pytest.approx(rank, abs=0.15)
    # The noise-aware threshold separates signal from estimation noise exactly.
    assert fit.noise_aware_rank == rank
    assert np.count_nonzero(fit.singular_values > fit.noise_threshold) == rank
    assert fit.residual_variance == pytest.approx(0.01, rel=0.05)
    assert np.all(np.diff(fit.singular_values) <= 0)


def test_lifted_linear_fit_gives_exact_rank_under_noise():
    X, Y, info = make_attention_task(
        "linear", n_samples=2000, seq_len=8, d=6, rank=2, noise=0.1,
        random_state=0, return_info=True,
    )
    fit = of.fit_linear_kernel(X, Y)
    assert fit.singular_values.shape == (6,)
    assert fit.noise_aware_rank == 2
    assert np.count_nonzero(fit.singular_values > fit.noise_threshold) == 2
    assert fit.energy_effective_rank == pytest.approx(2, abs=0.2)
    assert (fit.n_equations, fit.n_unknowns, fit.n_targets) == (2000 * 8, 6 * 21, 6)
    assert fit.residual_variance == pytest.approx(0.01, rel=0.05)


def test_fixed_operator_ranks_under_noise():
    X, Y, info = make_fixed_operator_task(
        n_samples=1024, seq_len=8, d=8, d_out=4, rank=3, noise=0.1,
        random_state=0, return_info=True,
    )
    known = of.fit_fixed_operator(X, Y, value_map=info.value_map)
    assert known.noise_aware_rank == 3
    assert known.energy_effective_rank == pytest.approx(3, abs=0.05)
    unknown = of.fit_fixed_operator(X, Y)
    assert unknown.noise_aware_rank == 3
    assert abs(_cosine(unknown.operator, info.operator)) > 0.999
    assert unknown.residual_variance == pytest.approx(0.01, rel=0.1)


def test_noise_threshold_is_reproducible():
    X, Y, info = make_attention_task(
        "linear", n_samples=256, seq_len=8, d=6, rank=2, noise=0.1,
        random_state=0, return_info=True,
    )
    first = of.fit_linear_kernel(X, Y, value_map=info.value_map)
    second = of.fit_linear_kernel(X, Y, value_map=info.value_map)
    assert first.noise_threshold == second.noise_threshold
    assert first.noise_threshold > 0 and first.iid_noise_threshold > 0


@pytest.mark.parametrize("rank", [2, 4, 8])
def test_softmax_kernel_estimate_correlates_with_true_kernel(rank):
    X, Y, info = make_attention_task(
        "softmax", n_samples=4000, seq_len=8, d=16, d_out=16, rank=rank,
        noise=0.05, kernel_scale=2.0, random_state=0, return_info=True,
    )
    fit = of.fit_softmax_kernel(X, Y, info.value_map)
    # Measured 0.999 for r* = 2, 4, 8; the clipping biases the scale, not the
    # direction, so only the normalised inner product is asserted.
    assert _cosine(fit.kernel, info.kernel) > 0.8
    assert fit.mixers.shape == (4000, 8, 8)
    assert np.all(fit.mixers > 0)
    np.testing.assert_allclose(fit.mixers.sum(axis=-1), 1.0)
    assert 1.0 <= fit.mixer_energy_rank <= 8.0
    assert fit.mixer_energy_rank == pytest.approx(
        np.mean(spectral.energy_effective_rank(fit.mixers))
    )
    assert fit.noise_variance == pytest.approx(0.05**2, rel=0.05)
    assert (fit.n_equations, fit.n_unknowns) == (4000 * 8 * 7, 256)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_lifted_system_reports_the_minimum_number_of_sequences():
    X, Y = make_attention_task("linear", n_samples=100, seq_len=8, d=16, random_state=0)
    message = (
        "the lifted system for 'linear' attention with an unknown value map has "
        "2176 unknowns per output channel but only 800 equations "
        "(n_samples * L = 100 * 8); it needs at least 272 sequences"
    )
    with pytest.raises(ValueError) as error:
        of.fit_linear_kernel(X, Y)
    assert str(error.value) == message
    assert math.ceil(16 * 136 / 8) == 272


def test_minimum_number_of_sequences_is_enough():
    # d = 6: 126 unknowns per channel, 8 equations per sequence -> 16 sequences.
    X, Y = make_attention_task("linear", n_samples=16, seq_len=8, d=6, random_state=0)
    with pytest.raises(ValueError, match="it needs at least 16 sequences"):
        of.fit_linear_kernel(X[:15], Y[:15])
    fit = of.fit_linear_kernel(X, Y)
    assert (fit.n_equations, fit.n_unknowns) == (128, 126)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda X, Y: of.fit_fixed_operator(X, Y[:3]), "Y.shape=.3, 8, 6."),
        (lambda X, Y: of.fit_fixed_operator(X[:2], Y[:2]), "at least 40 sequences"),
        (
            lambda X, Y: of.fit_linear_kernel(X[0], Y),
            r"X must be a 3-D array .* got shape \(8, 5\)",
        ),
        (lambda X, Y: of.fit_linear_kernel(X, Y, ridge=-1.0), "ridge"),
        (lambda X, Y: of.fit_linear_kernel(X, Y, ridge=True), "ridge"),
        (lambda X, Y: of.fit_linear_kernel(X.astype(complex), Y), "real numbers"),
        (lambda X, Y: of.fit_softmax_kernel(X, Y, None), "needs the value map"),
        (
            lambda X, Y: of.fit_softmax_kernel(X[:, :4], Y[:, :4], np.ones((5, 6)), floor=0),
            "floor",
        ),
        (lambda X, Y: of.predict_linear_lifted(X, np.zeros((5, 14, 2))), "T must have shape"),
    ],
)
def test_bad_input(call, match):
    X, Y = make_attention_task(
        "linear", n_samples=40, seq_len=8, d=5, d_out=6, random_state=0
    )
    with pytest.raises(ValueError, match=match):
        call(X, Y)


@pytest.mark.parametrize(
    "fit", [of.fit_fixed_operator, of.fit_linear_kernel, of.fit_softmax_kernel]
)
def test_wrong_value_map_shape(fit):
    X, Y = make_attention_task(
        "linear", n_samples=40, seq_len=4, d=5, d_out=6, random_state=0
    )
    expected = r"\(d, d_out\) = \(5, 6\).*got shape \(6, 5\)"
    with pytest.raises(ValueError, match=expected):
        fit(X, Y, np.ones((6, 5)))


@pytest.mark.parametrize("where", ["X", "Y", "value_map"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_are_rejected(where, bad):
    X, Y, info = make_attention_task(
        "linear", n_samples=40, seq_len=4, d=5, d_out=6, random_state=0, return_info=True
    )
    arrays = {"X": X.copy(), "Y": Y.copy(), "value_map": info.value_map.copy()}
    arrays[where].flat[7] = bad
    for fit in (of.fit_fixed_operator, of.fit_linear_kernel, of.fit_softmax_kernel):
        with pytest.raises(ValueError, match=f"{where} contains NaN or inf"):
            fit(arrays["X"], arrays["Y"], arrays["value_map"])


def test_softmax_needs_at_least_as_many_output_channels_as_tokens():
    X, Y, info = make_attention_task(
        "softmax", n_samples=40, seq_len=8, d=6, d_out=6, random_state=0, return_info=True
    )
    with pytest.raises(ValueError, match="d_out = 6 < L = 8; it needs d_out >= L"):
        of.fit_softmax_kernel(X, Y, info.value_map)


# ---------------------------------------------------------------------------
# Module hygiene
# ---------------------------------------------------------------------------


def _submodules():
    import importlib

    folder = pathlib.Path(of.__file__).parent
    return [of] + [importlib.import_module(f"{of.__name__}.{path.stem}")
                   for path in sorted(folder.glob("_*.py")) if path.stem != "__init__"]


def test_doctests_pass():
    attempted = 0
    for module in _submodules():
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted > 0
