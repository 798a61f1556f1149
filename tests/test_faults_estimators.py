"""Faults in the three estimators: interrupts, scale, divergence, valid input, messages.

Nothing lost, nothing silently wrong. Every test is a tiny task with a
few epochs.
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.validation import check_is_fitted

from intrinsic_rank import (
    AttentionRankEstimator,
    EnergyEffectiveRank,
    ReachabilityEstimator,
    TrainingDivergedError,
)
from intrinsic_rank.datasets import (
    make_attention_task,
    make_fixed_operator_task,
    make_random_targets,
)
from intrinsic_rank.estimators._cramming import CrammingNet
from intrinsic_rank.estimators._net import RankSweepNet
from intrinsic_rank.estimators._scaling import scale_factor

X, Y, INFO = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                 random_state=0, return_info=True)
FAST = dict(attention="linear", max_epochs=4, random_state=0)
TARGETS = make_random_targets(4, 4, vocab_size=64, random_state=0)
CRAM = dict(max_epochs=20, n_radius_prompts=2, random_state=0)


def _quiet_fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args)


# -- 1. an interrupt is an interrupt ------------------------------------------------


def _interrupt_at_epoch(monkeypatch, net_class, epoch=3):
    original = net_class.on_epoch_end
    seen = []

    def on_epoch_end(self, net, **kwargs):
        original(self, net, **kwargs)
        seen.append(len(self.history))
        if len(self.history) == epoch:
            raise KeyboardInterrupt

    monkeypatch.setattr(net_class, "on_epoch_end", on_epoch_end)
    return seen


@pytest.mark.parametrize("sweep", [False, True])
def test_interrupt_reaches_the_caller_and_leaves_attention_unfitted(monkeypatch, sweep):
    est = AttentionRankEstimator(**{**FAST, "max_epochs": 10},
                                 rank_grid=[1, 2] if sweep else None)
    _quiet_fit(est, X, Y)  # a previous, finished fit must not survive the interrupt
    seen = _interrupt_at_epoch(monkeypatch, RankSweepNet)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, Y)
    assert seen == [1, 2, 3]  # stopped at epoch 3 of 10, not run to the end
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    for name in ("rank_", "sweep_", "net_", "history_", "n_features_in_"):
        assert not hasattr(est, name)


def test_interrupt_during_the_recovery_student(monkeypatch):
    _interrupt_at_epoch(monkeypatch, RankSweepNet)
    est = EnergyEffectiveRank(student=AttentionRankEstimator(**{**FAST, "max_epochs": 10}))
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, Y)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert not hasattr(est, "student_") and not hasattr(est, "energy_effective_rank_")


def test_interrupt_during_cramming(monkeypatch):
    seen = _interrupt_at_epoch(monkeypatch, CrammingNet)
    est = ReachabilityEstimator(**{**CRAM, "max_epochs": 50, "patience": 50})
    with pytest.raises(KeyboardInterrupt):
        est.fit(TARGETS)
    assert seen[-1] == 3
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert not hasattr(est, "accessibility_") and not hasattr(est, "width_")


def test_cramming_still_stops_early_when_every_target_is_done():
    # the net's own early stop is not an interrupt: fit returns normally
    est = ReachabilityEstimator(n_memory=2, max_epochs=300, random_state=0).fit(TARGETS)
    assert est.accessibility_ == 1.0
    assert len(est.history_) < 300


# -- 2. scale -----------------------------------------------------------------------


def test_scale_factor_is_one_inside_the_window_and_a_power_of_two_outside():
    assert scale_factor(X) == 1.0 and scale_factor(Y * 50) == 1.0
    factor = scale_factor(X * 1e-6)
    assert factor == 2.0 ** round(np.log2(factor))
    rms = np.sqrt(np.mean((X * 1e-6 * factor) ** 2))
    assert 2**-0.5 <= rms <= 2**0.5
    assert scale_factor(np.zeros(3)) == 1.0


def test_unit_scale_fits_are_not_rescaled():
    est = _quiet_fit(AttentionRankEstimator(**FAST), X, Y)
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
    est = EnergyEffectiveRank(method="data", value_map=INFO.value_map).fit(X, Y)
    assert est.x_scale_ == 1.0 and est.y_scale_ == 1.0


# -- 3. divergence that stays finite ------------------------------------------------


def test_finite_blow_up_raises_training_diverged_error():
    Xf, Yf = make_fixed_operator_task(n_samples=128, seq_len=6, d=4, rank=2, random_state=0)
    with pytest.raises(TrainingDivergedError, match=r"more than 1e\+06 times the mean square"):
        AttentionRankEstimator(attention="fixed", lr=1e4, max_epochs=20,
                               random_state=0).fit(Xf, Yf)


def test_a_huge_initialisation_is_divergence_from_the_start():
    with pytest.raises(TrainingDivergedError, match="at initialisation.*lower lr or init_scale"):
        AttentionRankEstimator(**FAST, init_scale=1e6).fit(X, Y)
    with pytest.raises(TrainingDivergedError, match="at initialisation"):
        AttentionRankEstimator(attention="fixed", init_scale=1e5, max_epochs=3,
                               random_state=0).fit(X, Y)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_loss_that_never_falls_warns(threads):
    # at lr=1e-12 the last epoch's mean batch loss equals the initial full-data loss
    # up to float rounding, which differs with the thread count and the batch order:
    # the rule must warn whichever way the rounding goes
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        est = AttentionRankEstimator(**{**FAST, "lr": 1e-12})
        with pytest.warns(ConvergenceWarning, match="loss never fell below its initial value"):
            est.fit(X, Y)
    finally:
        torch.set_num_threads(before)


class _FakeNet:
    """The two things ``warn_if_loss_never_fell`` reads: the history and the initial loss."""

    def __init__(self, initial, final):
        from skorch.history import History

        from intrinsic_rank.estimators._callbacks import DivergenceCheck

        check = DivergenceCheck()
        check.initial_loss_ = list(initial)
        self.callbacks_ = [("divergence", check)]
        self.history = History()
        for _ in range(2):
            self.history.new_epoch()
            self.history.record("train_loss_per_rank", list(final))
        self.module_ = type("M", (), {"ranks": tuple(range(1, len(final) + 1))})()


@pytest.mark.parametrize("relative_fall, warned", [
    (-1e-6, True),   # rounding pushed the end above the start
    (0.0, True),
    (1e-6, True),    # rounding pushed it below: still nothing learned
    (0.5e-5, True),  # below the tolerance of 1e-5
    (2e-5, False),   # above it
    (0.5, False),
])
def test_loss_fall_rule_uses_a_relative_tolerance(relative_fall, warned):
    from intrinsic_rank.estimators._callbacks import LOSS_FALL_RTOL, warn_if_loss_never_fell

    assert LOSS_FALL_RTOL == 1e-5
    net = _FakeNet([2.0], [2.0 * (1 - relative_fall)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ranks = warn_if_loss_never_fell(net)
    assert ranks == ([1] if warned else [])
    assert any(issubclass(w.category, ConvergenceWarning) for w in caught) == warned


def test_default_training_does_not_warn_about_the_loss():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        AttentionRankEstimator(**FAST).fit(X, Y)


def test_predict_that_overflows_float32_raises():
    est = _quiet_fit(AttentionRankEstimator(**FAST), X, Y)
    with pytest.raises(ValueError, match="prediction overflows float32"):
        est.predict(X * 1e13)
    with pytest.raises(ValueError, match="too large for float32"):
        est.predict(X * 1e40)


# -- 4. a grid that stops below r* ---------------------------------------------------


def test_grid_below_r_star_is_flagged():
    # The CLI's `sweep --rank-grid 1-3 --epochs 5` on the r* = 4 softmax teacher: rank_ = 2
    # with an estimated floor of 0.77, where the teacher's floor is 0.01.
    Xs, Ys, info = make_attention_task("softmax", 2048, 8, 16, rank=4, noise=0.1,
                                       random_state=0, return_info=True)
    est = AttentionRankEstimator(attention="softmax", rank_grid=[1, 2, 3], max_epochs=5,
                                 random_state=0)
    with pytest.warns(ConvergenceWarning, match="estimated noise floor 0.7736 is not the floor"), \
            pytest.warns(UserWarning, match="the softmax students do no better than a least"):
        est.fit(Xs, Ys)  # both say the grid stopped short: the floor and the affine reference
    assert est.rank_ == 2 and not est.floor_reached_
    assert est.reference_risk_ == pytest.approx(0.6018, abs=1e-3)
    assert est.noise_floor_ > 50 * info.noise_floor


def test_a_reached_floor_is_flagged_reached():
    Xl, Yl = make_attention_task("linear", n_samples=512, seq_len=4, d=6, rank=2,
                                 random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], max_epochs=100,
                                     random_state=0).fit(Xl, Yl)
    assert est.rank_ == 2 and est.floor_reached_
    assert est.reference_risk_ > est.noise_floor_


def test_top_of_the_grid_still_improving_is_not_reached():
    Xl, Yl = make_attention_task("linear", n_samples=512, seq_len=4, d=6, rank=3,
                                 random_state=0)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2], max_epochs=60,
                                 random_state=0)
    with pytest.warns(UserWarning, match="largest rank of the grid"):
        est.fit(Xl, Yl)
    assert not est.floor_reached_


def test_in_sample_sweep_has_no_reference():
    est = _quiet_fit(AttentionRankEstimator(**FAST, rank_grid=[1, 2], validation_fraction=0.0),
                     X, Y)
    assert est.reference_risk_ is None


# -- 5. valid input always works -----------------------------------------------------


@pytest.mark.parametrize("layout", ["reversed", "fortran", "strided view"])
def test_non_contiguous_input_works_and_gives_the_contiguous_answer(layout):
    if layout == "reversed":
        X_, Y_ = X[:, ::-1], Y[:, ::-1]
    elif layout == "fortran":
        X_, Y_ = np.asfortranarray(X), np.asfortranarray(Y)
    else:
        X_, Y_ = np.repeat(X, 2, axis=0)[::2], np.repeat(Y, 2, axis=0)[::2]
    X_c, Y_c = np.ascontiguousarray(X_), np.ascontiguousarray(Y_)
    est = _quiet_fit(AttentionRankEstimator(**FAST), X_, Y_)
    ref = _quiet_fit(AttentionRankEstimator(**FAST), X_c, Y_c)
    np.testing.assert_array_equal(est.predict(X_), ref.predict(X_c))
    rec = _quiet_fit(EnergyEffectiveRank(student=AttentionRankEstimator(**FAST)), X_, Y_)
    assert rec.energy_effective_rank_ == _quiet_fit(
        EnergyEffectiveRank(student=AttentionRankEstimator(**FAST)), X_c, Y_c).energy_effective_rank_
    data = EnergyEffectiveRank(method="data").fit(X_, Y_)
    assert data.rank_ == 2


def test_non_contiguous_targets_work_for_reachability():
    est = ReachabilityEstimator(**CRAM).fit(TARGETS[:, ::-1])
    ref = ReachabilityEstimator(**CRAM).fit(np.ascontiguousarray(TARGETS[:, ::-1]))
    np.testing.assert_array_equal(est.memory_, ref.memory_)
    est = ReachabilityEstimator(**CRAM).fit(np.asfortranarray(TARGETS))
    assert est.predict(TARGETS[:, ::-1]).shape == TARGETS.shape


def test_pandas_input_to_energy_rank_raises_no_feature_name_warning():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X[:, :, 0], columns=list("abcd"))
    est = EnergyEffectiveRank(student=AttentionRankEstimator(**FAST))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(df, Y[:, -1, 0])
        est.predict(df)
    assert list(est.student_.feature_names_in_) == list("abcd")


# -- 6. messages that name the parameter ---------------------------------------------


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(device="meta"), "device='meta'"),
        (dict(optimizer=torch.optim.LBFGS), "optimizer=LBFGS is not supported"),
        (dict(optimizer="rmsprop"), "unknown optimizer 'rmsprop'"),
        (dict(student_options={"hiden": 3}),
         r"student_options has unknown key\(s\) \['hiden'\] for attention='linear'"),
        (dict(attention="block", student_options={"hiden": 3}),
         r"unknown key\(s\) \['hiden'\].*accepts \['hidden'\]"),
        (dict(verbose=1.5), "verbose must be an integer >= 0; got 1.5"),
        (dict(verbose="2"), "verbose must be an integer"),
        (dict(random_state=-1), r"random_state must be an integer in \[0, 4294967295\]"),
        (dict(random_state=2**40), "random_state must be an integer"),
        (dict(random_state=1.5), "random_state must be None, an integer"),
    ],
)
def test_bad_settings_name_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        AttentionRankEstimator(**{**FAST, **params}).fit(X, Y)


def test_unavailable_mps_is_a_value_error():
    if torch.backends.mps.is_available():
        pytest.skip("MPS is available here")
    with pytest.raises(ValueError, match="device='mps'"):
        AttentionRankEstimator(**FAST, device="mps").fit(X, Y)
    with pytest.raises(ValueError, match="device='mps'"):
        ReachabilityEstimator(**CRAM, device="mps").fit(TARGETS)


def test_optimizer_without_weight_decay_is_named():
    class Plain(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

    with pytest.raises(ValueError, match=r"optimizer Plain does not accept \['weight_decay'\]"):
        AttentionRankEstimator(**FAST, optimizer=Plain).fit(X, Y)


@pytest.mark.parametrize("params, match", [
    (dict(random_state=-1), "random_state must be an integer"),
    (dict(device="meta"), "device='meta'"),
    (dict(verbose=0.5), "verbose must be an integer"),
])
def test_reachability_settings_name_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        ReachabilityEstimator(**{**CRAM, **params}).fit(TARGETS)


def test_score_with_wrongly_shaped_targets_names_y():
    est = _quiet_fit(AttentionRankEstimator(**FAST), X, Y)
    for bad in (Y[:, :2], Y[:10], Y[:, -1, 0]):
        with pytest.raises(ValueError, match=r"y has shape .* but predict\(X\) gives \(256, 4, 5\)"):
            est.score(X, bad)
    assert est.score(X, Y) == pytest.approx(est.score(X, Y.copy()))


@pytest.mark.parametrize("n", [1, 2, 7])
def test_too_few_samples_for_a_sweep_does_not_contradict_itself(n):
    with pytest.raises(ValueError, match=r"at least 2 held-out sequences.*validation_fraction="
                                         rf"0.2.*n_samples >= 8; got n_samples = {n}\b"):
        AttentionRankEstimator(**FAST, rank_grid=[1, 2]).fit(X[:n], Y[:n])
    # eight sequences are enough, as the message says: two held out
    _quiet_fit(AttentionRankEstimator(**FAST, rank_grid=[1, 2]), X[:8], Y[:8])


def test_refit_with_other_settings_clears_the_old_attributes():
    est = _quiet_fit(AttentionRankEstimator(**FAST, rank_grid=[1, 2]), X, Y)
    assert hasattr(est, "sweep_") and hasattr(est, "excess_tol_")
    _quiet_fit(est.set_params(rank_grid=None), X, Y)
    for name in ("sweep_", "excess_tol_", "floor_reached_", "reference_risk_"):
        assert not hasattr(est, name), name
    assert est.rank_ == 5
    # a refit that fails leaves nothing of the earlier fit behind either
    with pytest.raises(ValueError):
        est.set_params(rank=99).fit(X, Y)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_energy_rank_refit_from_data_to_recovery_clears_data_attributes():
    est = EnergyEffectiveRank(method="data", value_map=INFO.value_map).fit(X, Y)
    assert hasattr(est, "fit_")
    _quiet_fit(est.set_params(method="recovery", value_map=None,
                              student=AttentionRankEstimator(**FAST)), X, Y)
    assert not hasattr(est, "fit_") and not hasattr(est, "x_scale_")
    assert hasattr(est, "student_")


@pytest.mark.parametrize("est, data", [
    (AttentionRankEstimator(max_epochs=0), (X, Y)),
    (EnergyEffectiveRank(ridge=-1.0), (X, Y)),
    (ReachabilityEstimator(max_epochs=0), (TARGETS,)),
])
def test_parameter_errors_name_the_estimator_and_the_parameter(est, data):
    name = type(est).__name__
    bad = "ridge must be a finite real number in \\[0.0, inf\\); got -1.0" if name == \
        "EnergyEffectiveRank" else "max_epochs must be an integer >= 1; got 0"
    with pytest.raises(ValueError, match=f"^{name}: {bad}$"):
        est.fit(*data)
