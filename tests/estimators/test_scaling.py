"""Data far from unit size: the estimators fit in a power-of-two rescaled copy and report
in the user's units, and refuse what cannot be represented.
"""

import warnings

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank
from intrinsic_rank.datasets import make_attention_task, make_fixed_operator_task
from intrinsic_rank.estimators._scaling import check_units, in_user_units, scale_factor

X_SHORT, Y_SHORT = make_attention_task("linear", n_samples=96, seq_len=3, d=4, rank=2, random_state=0)


SHORT_FIT = dict(attention="linear", max_epochs=3, random_state=0)


@pytest.fixture
def no_training(monkeypatch):
    from intrinsic_rank.estimators import _net

    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(_net.RankSweepNet, "fit", refuse)


def _quiet(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


X_TASK, Y_TASK, TASK_INFO = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                                random_state=0, return_info=True)


QUICK_FIT = dict(attention="linear", max_epochs=4, random_state=0)


def _quiet_fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args)


def test_kernels_in_user_units_do_not_overflow_float32():
    kernels = np.ones((2, 3, 3), dtype=np.float32)
    factor = 2.0**132  # x_scale**2 for X * 1e-20
    assert np.isfinite(in_user_units(kernels, factor)).all()
    assert in_user_units(kernels, 1.0) is kernels  # unit scale: unchanged
    check_units(factor, "X")
    with pytest.raises(ValueError, match="X is too far from unit size"):
        check_units(2.0**1000, "X")


def test_tiny_inputs_train_to_finite_kernels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3, 2))
    est = AttentionRankEstimator(attention="linear", rank_grid=[1], max_epochs=2)
    # two epochs on a one-rank grid cannot reach the floor: the estimate says so
    with pytest.warns(UserWarning) as caught:
        est.fit(X * 1e-20, X.sum(-1))
    assert any("not supported by the data" in str(w.message) for w in caught)
    assert np.isfinite(est.kernel_).all()


@pytest.mark.parametrize("x_scale, y_scale, name", [
    (1e-200, 1.0, "X"), (1.0, 1e-200, "Y"), (1.0, 1e300, "Y"), (1.0, 1e160, "Y"),
    (1.0, 1e-160, "Y"), (1e-310, 1.0, "X"), (1e200, 1.0, "X"), (1e140, 1.0, "X"),
])
def test_data_far_from_unit_size_is_refused_before_training(no_training, x_scale, y_scale,
                                                            name):
    with pytest.raises(ValueError, match=rf"^{name} is too far from unit size: its root mean "
                                         r"square .* lies outside \[2\^-450, 2\^450\]"):
        AttentionRankEstimator(**SHORT_FIT, rank_grid=[1, 2]).fit(X_SHORT * x_scale, Y_SHORT * y_scale)
    with pytest.raises(ValueError, match=f"{name} is too far from unit size"):
        EnergyEffectiveRank(attention="linear").fit(X_SHORT * x_scale, Y_SHORT * y_scale)


@pytest.mark.parametrize("x_scale, y_scale", [(1e-130, 1.0), (1e130, 1.0), (1.0, 1e130),
                                              (1.0, 1e-130)])
def test_data_inside_the_window_reports_finite_numbers(x_scale, y_scale):
    est = _quiet(AttentionRankEstimator(**SHORT_FIT, rank_grid=[1, 2]), X_SHORT * x_scale, Y_SHORT * y_scale)
    risks = [rec["heldout_risk"] for rec in est.sweep_]
    assert np.isfinite(risks).all() and np.isfinite(est.kernel_).all()
    assert np.isfinite(est.history_[-1]["train_loss"]) and est.history_[-1]["train_loss"] > 0
    assert 1e-3 < risks[0] / (y_scale**2) < 1e3  # in the units of Y, not 0 or inf


@pytest.mark.parametrize("scale, what", [(1e150, "X is too far"), (1e300, "X is too far"),
                                         (1e100, "underflow to 0"), (1e-100, "overflow")])
def test_an_underflowed_operator_fit_is_refused(scale, what):
    with pytest.raises(ValueError, match=what):
        EnergyEffectiveRank(method="data", attention="linear").fit(X_SHORT * scale, Y_SHORT)
    fit = EnergyEffectiveRank(method="data", attention="linear").fit(X_SHORT * 1e60, Y_SHORT)
    assert fit.rank_ == 2 and fit.singular_values_[0] > 0


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_the_softmax_data_fit_holds_y_to_the_window_too(scale):
    Xs, Ys, info = make_attention_task("softmax", n_samples=200, seq_len=4, d=6, rank=2,
                                       random_state=0, return_info=True)
    # Y's units are tied to X's in this model; Y * 1e-300 gave rank_ = 1 from a zero matrix
    with pytest.raises(ValueError, match="Y is too far from unit size"):
        EnergyEffectiveRank(method="data", attention="softmax",
                            value_map=info.value_map).fit(Xs, Ys * scale)


def test_scale_factor_is_one_inside_the_window_and_a_power_of_two_outside():
    assert scale_factor(X_TASK) == 1.0 and scale_factor(Y_TASK * 50) == 1.0
    factor = scale_factor(X_TASK * 1e-6)
    assert factor == 2.0 ** round(np.log2(factor))
    rms = np.sqrt(np.mean((X_TASK * 1e-6 * factor) ** 2))
    assert 2**-0.5 <= rms <= 2**0.5
    assert scale_factor(np.zeros(3)) == 1.0


def test_unit_scale_fits_are_not_rescaled():
    est = _quiet_fit(AttentionRankEstimator(**QUICK_FIT), X_TASK, Y_TASK)
    assert est.x_scale_ == 1.0 and est.y_scale_ == 1.0


@pytest.mark.parametrize("sx, sy", [(1e-6, 1.0), (1e6, 1.0), (1.0, 1e-6), (1.0, 1e6),
                                    (1e-6, 1e-6)])
def test_far_from_unit_scale_gives_the_unit_scale_answer_in_the_users_units(sx, sy):
    # A true r* = 2: at X * 1e-6 the sweep used to answer 1 with equal held-out
    # risks at every rank; at X * 1e6 the loss froze at 3e30.
    Xl, Yl = make_attention_task("linear", n_samples=512, seq_len=4, d=6, rank=2,
                                 random_state=0)
    params = dict(attention="linear", rank_grid=[1, 2, 3], max_epochs=100, random_state=0)
    base = _quiet_fit(AttentionRankEstimator(**params), Xl, Yl)
    est = _quiet_fit(AttentionRankEstimator(**params), Xl * sx, Yl * sy)
    assert base.rank_ == 2 and est.rank_ == 2
    risk = np.array([r["heldout_risk"] for r in est.sweep_])
    base_risk = np.array([r["heldout_risk"] for r in base.sweep_])
    # the same training up to float32 rounding of the rescaled inputs, in Y's units
    np.testing.assert_allclose(risk / sy**2, base_risk, rtol=0.1)
    assert est.noise_floor_ == pytest.approx(base.noise_floor_ * sy**2, rel=0.05)
    pred = est.predict(Xl * sx)
    np.testing.assert_allclose(pred / sy, base.predict(Xl), rtol=0.05, atol=0.05)
    assert est.score(Xl * sx, Yl * sy) == pytest.approx(base.score(Xl, Yl), abs=0.01)
    # the kernel is in the units of X: the mixer of linear attention is X K X^T / L
    Xs = Xl[:3] * sx
    mixer = np.einsum("nld,de,nme->nlm", Xs, est.kernel_.astype(float), Xs) / Xs.shape[1]
    np.testing.assert_allclose(est.realized_mixer(Xs), mixer, rtol=1e-4,
                               atol=1e-5 * np.abs(mixer).max())
    assert est.history_[0]["train_loss"] == pytest.approx(
        base.history_[0]["train_loss"] * sy**2, rel=0.05)


def test_fixed_operator_far_from_unit_scale():
    Xf, Yf = make_fixed_operator_task(n_samples=512, seq_len=6, d=4, rank=2, random_state=0)
    params = dict(attention="fixed", rank_grid=[1, 2, 3], max_epochs=60, random_state=0)
    for sx in (1e-6, 1e6):
        est = _quiet_fit(AttentionRankEstimator(**params), Xf * sx, Yf)
        assert est.rank_ == 2


@pytest.mark.parametrize("scale", [1e-80, 1e60])
@pytest.mark.parametrize("attention, value", [("linear", False), ("linear", True),
                                              ("fixed", False)])
def test_data_fit_is_scale_free(scale, attention, value):
    if attention == "fixed":
        Xd, Yd, info = make_fixed_operator_task(n_samples=400, seq_len=6, d=4, rank=2,
                                                random_state=0, return_info=True)
    else:
        Xd, Yd, info = make_attention_task("linear", n_samples=400, seq_len=4, d=6, rank=2,
                                           random_state=0, return_info=True)
    V = info.value_map if value else None
    base = EnergyEffectiveRank(method="data", attention=attention, value_map=V).fit(Xd, Yd)
    # X alone (the units of the matrix change) and X and Y together
    est = EnergyEffectiveRank(method="data", attention=attention, value_map=V).fit(
        Xd * scale, Yd * scale if attention == "fixed" else Yd)
    assert est.rank_ == base.rank_ == 2 and est.numerical_rank_ == 2
    assert est.energy_effective_rank_ == pytest.approx(base.energy_effective_rank_, rel=1e-6)
    pred = est.predict(Xd[:5] * scale)
    expected = base.predict(Xd[:5]) * (scale if attention == "fixed" else 1.0)
    np.testing.assert_allclose(pred, expected, rtol=1e-6, atol=1e-9 * np.abs(expected).max())


def test_data_fit_whose_matrix_overflows_in_the_users_units_raises():
    # X * 1e-120 with Y unchanged needs a kernel 1e360 times larger: not a float64
    Xd, Yd = make_attention_task("linear", n_samples=200, seq_len=4, d=6, rank=2,
                                 random_state=0)
    with pytest.raises(ValueError, match=r"it would overflow in float64\); rescale X or Y"):
        EnergyEffectiveRank(method="data").fit(Xd * 1e-120, Yd)
    # the same scale on a fixed operator (linear in X) is fine
    Xf, Yf = make_fixed_operator_task(n_samples=200, seq_len=6, d=4, rank=2, random_state=0)
    assert EnergyEffectiveRank(method="data", attention="fixed").fit(Xf * 1e-120, Yf).rank_ == 2


def test_data_fit_matrix_is_in_the_users_units():
    Xd, Yd, info = make_attention_task("linear", n_samples=400, seq_len=4, d=6, rank=2,
                                       random_state=0, return_info=True)
    base = EnergyEffectiveRank(method="data", value_map=info.value_map).fit(Xd, Yd)
    est = EnergyEffectiveRank(method="data", value_map=info.value_map).fit(Xd * 1e-3, Yd)
    assert est.x_scale_ != 1.0 and est.y_scale_ == 1.0
    # Y = (X K X^T / L) X V: X * 1e-3 needs K * 1e9
    np.testing.assert_allclose(est.matrix_, base.matrix_ * 1e9, rtol=1e-6)
    np.testing.assert_allclose(est.singular_values_, base.singular_values_ * 1e9, rtol=1e-6)


def test_data_fit_at_unit_scale_is_not_rescaled():
    est = EnergyEffectiveRank(method="data", value_map=TASK_INFO.value_map).fit(X_TASK, Y_TASK)
    assert est.x_scale_ == 1.0 and est.y_scale_ == 1.0


def test_predict_that_overflows_float32_raises():
    est = _quiet_fit(AttentionRankEstimator(**QUICK_FIT), X_TASK, Y_TASK)
    with pytest.raises(ValueError, match="prediction overflows float32"):
        est.predict(X_TASK * 1e13)
    with pytest.raises(ValueError, match="too large for float32"):
        est.predict(X_TASK * 1e40)
