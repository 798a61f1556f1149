"""EnergyEffectiveRank: recovery and training-free data fits on teachers of known r*."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from intrinsic_rank import EnergyEffectiveRank, spectral
from intrinsic_rank.datasets import make_attention_task, make_fixed_operator_task
from intrinsic_rank.experiments import predictability_frontier


def _task(kind, r_star, d=12, seq_len=8, n=2000, seed=0, **kwargs):
    return make_attention_task(
        kind, n_samples=n, seq_len=seq_len, d=d, rank=r_star, noise=0.1,
        random_state=seed, return_info=True, **kwargs,
    )


@pytest.mark.parametrize("d, r_star", [(8, 2), (12, 7), (16, 1), (16, 11), (16, 16)])
def test_data_linear_value_known_is_exact(d, r_star):
    X, Y, info = _task("linear", r_star, d=d, seed=r_star)
    est = EnergyEffectiveRank(method="data", value_map=info.value_map).fit(X, Y)
    assert est.rank_ == r_star
    assert est.numerical_rank_ == r_star  # noise-aware threshold
    assert est.energy_effective_rank_ == pytest.approx(r_star, abs=0.05)
    np.testing.assert_allclose(est.matrix_, info.kernel, atol=0.05)


@pytest.mark.parametrize("r_star", [1, 2, 4])
def test_data_linear_value_unknown_is_exact_at_small_d(r_star):
    X, Y, info = _task("linear", r_star, d=6, n=1500, seed=10 + r_star)
    est = EnergyEffectiveRank(method="data").fit(X, Y)
    assert est.numerical_rank_ == r_star
    assert est.rank_ == r_star
    assert est.matrix_.shape == (6, 21 * 6)  # d x (d (d + 1) / 2 * d_out)
    assert est.mixer_energy_rank_ is None  # K itself is not identified
    assert est.score(X, Y) > 0.95


def test_data_fixed_operator_with_and_without_value_map():
    X, Y, info = make_fixed_operator_task(
        n_samples=1500, seq_len=8, d=6, rank=3, random_state=0, return_info=True
    )
    known = EnergyEffectiveRank(method="data", attention="fixed", value_map=info.value_map)
    unknown = EnergyEffectiveRank(method="data", attention="fixed")
    for est in (known.fit(X, Y), unknown.fit(X, Y)):
        assert est.rank_ == 3 and est.numerical_rank_ == 3
        assert est.score(X, Y) > 0.95
    np.testing.assert_allclose(known.matrix_, info.operator, atol=0.05)


def test_data_softmax_log_inversion_tracks_r_star():
    # V known and d_out >= L: each sequence's mixer is solved and log-inverted.
    for r_star in (2, 6):
        X, Y, info = _task("softmax", r_star, d=12, seq_len=8, n=3000, seed=r_star)
        est = EnergyEffectiveRank(
            method="data", attention="softmax", value_map=info.value_map
        ).fit(X, Y)
        assert est.energy_effective_rank_ == pytest.approx(r_star, abs=0.2)
        cosine = np.sum(est.matrix_ * info.kernel) / (
            np.linalg.norm(est.matrix_) * np.linalg.norm(info.kernel)
        )
        assert cosine > 0.95


def test_softmax_frontier_shows_the_linear_surrogate_saturating():
    result = predictability_frontier(
        r_stars=[1, 3], d=12, seq_len=8, n_samples=3000,
        teachers=["softmax, linear-QK fit"], recovery=False,
    )
    for rec in result.records:
        # the measured behaviour: numerical rank saturates far above r*,
        # the energy rank of the same fit stays near r* but biased upwards
        assert rec["numerical_rank"] >= rec["r_star"] + 4
        assert rec["r_star"] < rec["energy_rank"] < rec["r_star"] + 0.6


@pytest.mark.parametrize("kind", ["linear", "softmax"])
def test_recovery_tracks_r_star_while_numerical_rank_saturates(kind):
    X, Y, _ = _task(kind, 3, d=10, seq_len=6, n=1500, seed=3)
    est = EnergyEffectiveRank(method="recovery", attention=kind, random_state=0).fit(X, Y)
    assert est.rank_ == 3
    assert abs(est.energy_effective_rank_ - 3) < 0.3
    assert est.numerical_rank_ > 6
    assert est.student_.rank_ == 10  # full rank
    assert est.score(X, Y) > 0.95
    np.testing.assert_allclose(est.predict(X), est.student_.predict(X))


def test_every_spectral_measure_is_reported_on_the_same_spectrum():
    X, Y, info = _task("linear", 4, d=8, seed=1)
    est = EnergyEffectiveRank(method="data", value_map=info.value_map).fit(X, Y)
    profile = spectral.rank_profile(est.matrix_)
    assert est.participation_ratio_ == pytest.approx(profile["participation_ratio"])
    assert est.entropy_effective_rank_ == pytest.approx(profile["entropy_effective_rank"])
    assert est.stable_rank_ == pytest.approx(profile["stable_rank"])
    assert est.energy_threshold_rank_ == profile["energy_threshold_rank"]
    np.testing.assert_allclose(est.singular_values_, np.linalg.svd(est.matrix_, compute_uv=False))


def test_ridge_shrinks_the_estimate():
    X, Y, info = _task("linear", 2, d=6, n=300, seed=2)
    loose = EnergyEffectiveRank(method="data", value_map=info.value_map).fit(X, Y)
    tight = EnergyEffectiveRank(method="data", value_map=info.value_map, ridge=10.0).fit(X, Y)
    assert np.linalg.norm(tight.matrix_) < 0.5 * np.linalg.norm(loose.matrix_)


# -- composition ------------------------------------------------------------------
def test_clone_grid_search_cross_validation_pipeline_and_pickle():
    X, Y, info = _task("linear", 2, d=6, seq_len=6, n=600, seed=4)
    est = EnergyEffectiveRank(method="data")
    assert clone(est).get_params() == est.get_params()
    search = GridSearchCV(
        EnergyEffectiveRank(method="data", attention="linear"),
        {"ridge": [1e-8, 1e3]}, cv=KFold(3, shuffle=True, random_state=0),
    ).fit(X, Y)
    assert search.best_params_["ridge"] == 1e-8
    scores = cross_val_score(EnergyEffectiveRank(method="data"), X, Y, cv=3)
    assert scores.min() > 0.95
    pipe = Pipeline([
        ("scale", FunctionTransformer(lambda Z: 2.0 * Z)),  # a preprocessing step
        ("rank", EnergyEffectiveRank(method="data", value_map=info.value_map)),
    ]).fit(X, Y)
    assert pipe.named_steps["rank"].rank_ == 2
    fitted = EnergyEffectiveRank(method="data").fit(X, Y)
    loaded = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(loaded.predict(X), fitted.predict(X))


def test_data_fit_is_deterministic_and_unfitted_error():
    X, Y, _ = _task("linear", 2, d=6, seq_len=6, n=400, seed=5)
    a = EnergyEffectiveRank(method="data").fit(X, Y)
    b = EnergyEffectiveRank(method="data").fit(X, Y)
    np.testing.assert_array_equal(a.singular_values_, b.singular_values_)
    assert a.noise_threshold_ == b.noise_threshold_
    with pytest.raises(NotFittedError):
        EnergyEffectiveRank().predict(X)


# -- bad input --------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, match",
    [
        (dict(method="oracle"), "The 'method' parameter of EnergyEffectiveRank must be a str "
                                "among .* Got 'oracle' instead"),
        (dict(method="data", attention="block"), "unknown attention 'block' for method='data'"),
        (dict(method="recovery", attention="cosine"), "The 'attention' parameter of "
                                                      "EnergyEffectiveRank must be a str among"),
        (dict(method="data", value_map=np.ones((3, 3))), r"value_map must have shape \(d, d_out\) = \(6, 6\); got \(3, 3\)"),
        (dict(method="recovery", value_map=np.ones((6, 6))), "value_map is used by method='data' only"),
        (dict(method="data", attention="softmax"), "needs value_map"),
        (dict(method="data", ridge=-1.0), r"The 'ridge' parameter .* \[0\.0, inf\)"),
    ],
)
def test_bad_parameters(params, match):
    X, Y, _ = _task("linear", 2, d=6, seq_len=6, n=100, seed=6)
    with pytest.raises(ValueError, match=match):
        EnergyEffectiveRank(**params).fit(X, Y)


def test_too_few_samples_for_the_lifted_system_says_how_many_are_needed():
    X, Y, _ = _task("linear", 2, d=8, seq_len=4, n=40, seed=7)
    # d * d (d + 1) / 2 = 288 unknowns per channel, 4 equations per sequence
    with pytest.raises(ValueError, match="288 unknowns per output channel .* needs at least 72 sequences"):
        EnergyEffectiveRank(method="data").fit(X, Y)


def test_data_method_needs_per_token_targets():
    X, Y, _ = _task("linear", 2, d=6, seq_len=6, n=100, seed=8)
    with pytest.raises(ValueError, match="per-token targets: Y must be 3-D"):
        EnergyEffectiveRank(method="data").fit(X, Y[:, -1, 0])


# -- the recovery student is a parameter ---------------------------------------------
def _small_task():
    return _task("linear", 2, d=5, seq_len=4, n=200, seed=20)


def test_default_student_is_the_estimators_default_and_is_exposed():
    from intrinsic_rank import AttentionRankEstimator

    X, Y, _ = _small_task()
    est = EnergyEffectiveRank(random_state=0).fit(X, Y)
    student = AttentionRankEstimator(attention="linear", rank=None, random_state=0).fit(X, Y)
    assert isinstance(est.student_, AttentionRankEstimator)
    assert est.student_.get_params() == student.get_params()
    np.testing.assert_array_equal(est.matrix_, student.kernel_)
    np.testing.assert_array_equal(est.predict(X), student.predict(X))
    assert est.net_ is est.student_.net_
    assert (est.n_features_in_, est.seq_len_, est.token_dim_, est.d_out_, est.target_) == (
        student.n_features_in_, student.seq_len_, student.token_dim_, student.d_out_,
        student.target_)


def test_given_student_is_cloned_and_seeded_by_random_state():
    from intrinsic_rank import AttentionRankEstimator

    X, Y, _ = _small_task()
    student = AttentionRankEstimator(attention="linear", max_epochs=4, random_state=3)
    est = EnergyEffectiveRank(student=student).fit(X, Y)
    assert not hasattr(student, "net_")  # the given student stays unfitted
    assert est.student_ is not student and est.student_.random_state == 3
    reference = clone(student).fit(X, Y)
    np.testing.assert_array_equal(est.matrix_, reference.kernel_)
    seeded = EnergyEffectiveRank(student=student, random_state=0).fit(X, Y)
    assert seeded.student_.random_state == 0 and student.random_state == 3
    np.testing.assert_array_equal(
        seeded.matrix_, clone(student).set_params(random_state=0).fit(X, Y).kernel_)
    # nested parameters reach the student, scikit-learn style
    assert est.get_params()["student__max_epochs"] == 4
    tuned = clone(est).set_params(student__max_epochs=2).fit(X, Y)
    assert tuned.student_.max_epochs == 2 and len(tuned.student_.history_) == 2


@pytest.mark.parametrize("name", ["max_epochs", "lr", "batch_size", "init_scale", "device",
                                  "verbose"])
def test_training_settings_are_the_students_only(name):
    assert name not in EnergyEffectiveRank().get_params()
    with pytest.raises(TypeError):
        EnergyEffectiveRank(**{name: 1})


def test_no_future_warning_by_default():
    import warnings

    X, Y, _ = _small_task()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        EnergyEffectiveRank(method="data").fit(X, Y)


def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        EnergyEffectiveRank("data")


@pytest.mark.parametrize("method, student, match", [
    ("data", dict(attention="linear"), "student is used by method='recovery' only"),
    ("recovery", "an estimator", "The 'student' parameter of EnergyEffectiveRank must be None "
                                 "or an instance of"),
    ("recovery", dict(attention="softmax"),
     "the student's attention='softmax' differs from attention='linear'"),
    ("recovery", dict(attention="linear", rank_grid=[1, 2]), r"one rank \(rank_grid=None\)"),
])
def test_bad_student(method, student, match):
    from intrinsic_rank import AttentionRankEstimator

    if isinstance(student, dict):
        student = AttentionRankEstimator(**student)
    X, Y, _ = _small_task()
    with pytest.raises(ValueError, match=match):
        EnergyEffectiveRank(method=method, student=student).fit(X, Y)
