"""AttentionRankEstimator on teacher tasks whose answer is known by construction."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from intrinsic_rank import AttentionRankEstimator, bounds
from intrinsic_rank.datasets import attention_mixer, make_attention_task, make_fixed_operator_task


def _teacher(kind, rank, d=8, seq_len=6, n=1200, seed=0, **kwargs):
    return make_attention_task(
        kind, n_samples=n, seq_len=seq_len, d=d, rank=rank, noise=0.1,
        random_state=seed, return_info=True, **kwargs,
    )


@pytest.mark.parametrize("kind", ["linear", "softmax"])
@pytest.mark.parametrize("r_star", [2, 4])
def test_deficiency_and_achievability(kind, r_star):
    X, Y, info = _teacher(kind, r_star, seed=r_star)
    est = AttentionRankEstimator(
        attention=kind, rank_grid=[1, 2, 3, 4, 5, 6], noise_floor=info.noise_floor,
        random_state=0,
    ).fit(X, Y)
    assert est.rank_ == r_star
    excess = {rec["rank"]: rec["excess_risk"] for rec in est.sweep_}
    for r, value in excess.items():
        if r < r_star:  # deficiency: far above the floor
            assert value > 3 * info.noise_floor, (r, value)
        else:  # achievability: on the floor
            assert abs(value) < 0.2 * info.noise_floor, (r, value)


@pytest.mark.parametrize(
    "kind, d, seq_len, r_star, n, seed",
    [
        ("linear", 16, 8, 3, 2048, 11),
        ("softmax", 16, 8, 6, 2048, 12),
        ("softmax", 8, 4, 2, 1000, 13),
        ("linear", 12, 6, 5, 1500, 14),
        ("softmax", 10, 5, 7, 3000, 15),
        ("linear", 6, 3, 1, 800, 16),
    ],
)
def test_defaults_find_r_star_without_tuning(kind, d, seq_len, r_star, n, seed):
    X, Y = make_attention_task(
        kind, n_samples=n, seq_len=seq_len, d=d, rank=r_star, noise=0.1,
        random_state=seed,
    )
    grid = list(range(1, min(d, r_star + 3) + 1))
    est = AttentionRankEstimator(attention=kind, rank_grid=grid, random_state=seed)
    assert est.fit(X, Y).rank_ == r_star
    assert est.noise_floor_ == pytest.approx(0.01, rel=0.15)  # estimated, not given


def test_fixed_operator_floor_matches_tail_energy():
    X, Y, info = make_fixed_operator_task(
        n_samples=4000, seq_len=8, d=6, rank=6, spectrum="decaying", decay=0.7,
        random_state=0, return_info=True,
    )
    est = AttentionRankEstimator(
        attention="fixed", rank_grid=[1, 2, 3, 4, 5], noise_floor=info.noise_floor,
        random_state=0,
    ).fit(X, Y)
    spectrum = np.linalg.svd(info.operator, compute_uv=False)
    for rec in est.sweep_:
        theory = bounds.fixed_operator_deficiency(spectrum, rec["rank"], info.value_map)
        assert rec["excess_risk"] == pytest.approx(theory, rel=0.10), rec["rank"]
    assert est.rank_ == 5 or est.sweep_[-1]["reached"] is False


@pytest.mark.parametrize("kind", ["linear", "softmax"])
def test_recovery_full_rank_student_concentrates_at_r_star(kind):
    X, Y, _ = _teacher(kind, 3, d=12, seq_len=6, n=1500, seed=5)
    est = AttentionRankEstimator(attention=kind, random_state=0).fit(X, Y)
    assert est.rank_ == 12  # full rank by default
    assert abs(est.energy_effective_rank_ - 3) <= 0.5
    # the numerical rank of the same kernel saturates: it is not the measure to read
    assert est.numerical_rank_ > 3


@pytest.mark.filterwarnings("ignore:rank_ = .* is the largest rank:UserWarning")  # short training
def test_sweep_slot_equals_single_rank_student():
    X, Y, _ = _teacher("softmax", 2, n=400, seed=1)
    kwargs = dict(attention="softmax", max_epochs=20, random_state=3)
    wide = AttentionRankEstimator(rank_grid=[1, 2, 3, 5], **kwargs).fit(X, Y)
    alone = AttentionRankEstimator(rank_grid=[3], **kwargs).fit(X, Y)
    wide.rank_index_ = 2  # read the rank-3 slot of the batched student
    np.testing.assert_allclose(wide.predict(X), alone.predict(X), atol=2e-5)
    np.testing.assert_allclose(wide.kernels_[2], alone.kernel_, atol=2e-5)
    assert wide.sweep_[2]["heldout_risk"] == pytest.approx(
        alone.sweep_[0]["heldout_risk"], rel=1e-4
    )


# A few epochs on a small task: the estimator rightly warns that the fit has not reached
# the floor the data allow, or that the students explain little of Y; the tests below
# that train this briefly check other things, so they ignore those warnings (tests of
# the warnings themselves are in test_evidence.py and test_callbacks.py).
_short_fit = pytest.mark.filterwarnings(
    "ignore:the estimated noise floor .* is not the floor:sklearn.exceptions.ConvergenceWarning",
    "ignore:the .* students do no better than a least-squares:UserWarning",
    "ignore:the selected .* explains .* of the held-out variance:UserWarning")


@_short_fit
@pytest.mark.filterwarnings("ignore:rank_ = .* is the largest rank:UserWarning")  # short training
def test_same_seed_same_numbers_and_different_seed_differs():
    X, Y, _ = _teacher("linear", 2, n=300, seed=2)
    kwargs = dict(attention="linear", rank_grid=[1, 2, 3], max_epochs=10)
    a = AttentionRankEstimator(random_state=7, **kwargs).fit(X, Y)
    b = AttentionRankEstimator(random_state=7, **kwargs).fit(X, Y)
    c = AttentionRankEstimator(random_state=8, **kwargs).fit(X, Y)
    assert a.sweep_ == b.sweep_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert not np.allclose(a.kernel_, c.kernel_)


@pytest.mark.filterwarnings("ignore:rank_ = .* is the largest rank:UserWarning")  # short training
def test_fitted_attributes_history_and_records():
    X, Y, _ = _teacher("softmax", 2, n=300, seed=3)
    est = AttentionRankEstimator(
        attention="softmax", rank_grid=[1, 2, 4], max_epochs=12, random_state=0
    ).fit(X, Y)
    assert est.kernel_.shape == (8, 8)
    assert est.kernels_.shape == (3, 8, 8)
    assert est.singular_values_.shape == (8,)
    assert np.all(np.diff(est.singular_values_) <= 0)
    assert len(est.history_) == 12
    assert len(est.history_[0]["train_loss_per_rank"]) == 3
    first, last = est.history_[0], est.history_[-1]
    assert last["train_loss"] < first["train_loss"]
    assert last["train_loss"] == pytest.approx(sum(last["train_loss_per_rank"]), rel=1e-5)
    table = pd.DataFrame(est.sweep_)
    assert list(table["rank"]) == [1, 2, 4]
    assert {"train_risk", "heldout_risk", "excess_risk", "reached",
            "energy_effective_rank", "numerical_rank"} <= set(table.columns)
    np.testing.assert_allclose(
        table["heldout_risk"] - est.noise_floor_, table["excess_risk"]
    )
    assert est.n_features_in_ == 8 and est.seq_len_ == 6 and est.d_out_ == 8


def test_fixed_student_exposes_operator():
    X, Y, info = make_fixed_operator_task(
        n_samples=600, seq_len=5, d=4, rank=2, random_state=0, return_info=True
    )
    est = AttentionRankEstimator(attention="fixed", rank=2, random_state=0).fit(X, Y)
    assert est.operator_.shape == (5, 5)
    assert not hasattr(est, "kernel_")
    assert est.numerical_rank_ <= 2
    mixers = est.realized_mixer(X[:3])
    np.testing.assert_allclose(mixers[0], est.operator_, atol=1e-6)
    assert est.score(X, Y) > 0.95


def test_realized_mixer_matches_learned_kernel():
    X, Y, _ = _teacher("linear", 2, n=300, seed=4)
    est = AttentionRankEstimator(attention="linear", rank=3, max_epochs=5, random_state=0)
    est.fit(X, Y)
    expected = attention_mixer(X[:4], est.kernel_, "linear")
    np.testing.assert_allclose(est.realized_mixer(X[:4]), expected, atol=1e-5)
    soft = AttentionRankEstimator(attention="softmax", rank=3, max_epochs=5, random_state=0)
    mixers = soft.fit(X, Y).realized_mixer(X[:4])
    np.testing.assert_allclose(mixers.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(mixers, attention_mixer(X[:4], soft.kernel_, "softmax"), atol=1e-5)


def test_score_is_r2_over_all_entries_of_3d_targets():
    X, Y, _ = _teacher("softmax", 2, n=400, seed=6)
    est = AttentionRankEstimator(
        attention="softmax", rank=2, max_epochs=40, batch_size=32, random_state=0
    ).fit(X, Y)
    pred = est.predict(X)
    assert pred.shape == Y.shape
    expected = r2_score(Y.reshape(len(Y), -1), pred.reshape(len(Y), -1))
    assert est.score(X, Y) == pytest.approx(expected)
    assert est.score(X, Y) > 0.9


def test_final_position_target_from_3d_sequences():
    X, Y, _ = _teacher("softmax", 2, n=600, seed=7, d_out=1)
    y = Y[:, -1, 0]
    est = AttentionRankEstimator(attention="softmax", rank=2, max_epochs=80, random_state=0)
    est.fit(X, y)
    assert est.target_ == "final"
    assert est.predict(X).shape == (600,)
    assert est.score(X, y) > 0.8


# -- composition with scikit-learn ---------------------------------------------------
def test_clone_and_params():
    est = AttentionRankEstimator(attention="linear", rank=3, lr=0.01)
    twin = clone(est)
    assert twin.get_params() == est.get_params()
    twin.set_params(rank=2, max_epochs=3)
    assert twin.rank == 2 and est.rank == 3


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_grid_search_over_rank(n_jobs):
    X, Y, _ = _teacher("linear", 2, d=6, seq_len=4, n=500, seed=8)
    search = GridSearchCV(
        AttentionRankEstimator(
            attention="linear", max_epochs=40, batch_size=32, lr=0.01, random_state=0
        ),
        {"rank": [1, 2, 3]},
        cv=KFold(3, shuffle=True, random_state=0),
        n_jobs=n_jobs,
    ).fit(X, Y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["rank"] in (2, 3)
    assert scores[0] < scores[1] - 0.1  # rank 1 is deficient
    assert search.best_estimator_.rank_ == search.best_params_["rank"]


def test_cross_val_score_on_3d_data():
    X, Y, _ = _teacher("softmax", 2, d=6, seq_len=4, n=450, seed=9)
    scores = cross_val_score(
        AttentionRankEstimator(
            attention="softmax", rank=2, max_epochs=40, batch_size=32, lr=0.01,
            random_state=0,
        ),
        X, Y, cv=3,
    )
    assert scores.shape == (3,)
    assert scores.min() > 0.8


def test_pipeline_with_preprocessing_on_scalar_tokens():
    rng = np.random.RandomState(0)
    X = rng.normal(3.0, 2.0, size=(800, 6))
    y = X.mean(axis=1) - 3.0  # uniform attention over standardised tokens
    pipe = Pipeline([
        ("scale", StandardScaler()),
        ("attention", AttentionRankEstimator(
            attention="softmax", max_epochs=30, batch_size=32, lr=0.01, random_state=0
        )),
    ]).fit(X, y)
    assert pipe.score(X, y) > 0.95
    assert pipe.predict(X).shape == (800,)


@_short_fit
def test_pickle_round_trip_keeps_predictions():
    X, Y, _ = _teacher("softmax", 2, n=300, seed=10)
    est = AttentionRankEstimator(
        attention="softmax", rank_grid=[1, 2], max_epochs=5, random_state=0, verbose=1
    ).fit(X, Y)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert loaded.sweep_ == est.sweep_


def test_fit_returns_self_and_is_idempotent():
    X, Y, _ = _teacher("softmax", 2, n=200, seed=11)
    est = AttentionRankEstimator(attention="block", rank=2, max_epochs=4, random_state=0)
    assert est.fit(X, Y) is est
    first = est.predict(X)
    np.testing.assert_array_equal(est.fit(X, Y).predict(X), first)


def test_unfitted_estimator_raises():
    X, _, _ = _teacher("softmax", 2, n=10, seed=0)
    est = AttentionRankEstimator()
    for method in (est.predict, est.realized_mixer, lambda X: est.score(X, X)):
        with pytest.raises(NotFittedError):
            method(X)


def test_grid_below_r_star_warns_instead_of_answering_silently():
    X, Y, _ = _teacher("linear", 4, n=600, seed=12)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], random_state=0)
    with pytest.warns(UserWarning, match="largest rank of the grid.*r\\* may be larger"):
        est.fit(X, Y)
    assert est.rank_ == 3
    assert est.noise_floor_ > 5 * 0.01  # the estimated floor is not the noise floor


def test_given_floor_that_no_rank_reaches_warns():
    from sklearn.exceptions import ConvergenceWarning

    X, Y, info = _teacher("linear", 4, n=600, seed=12)
    est = AttentionRankEstimator(
        attention="linear", rank_grid=[1, 2], noise_floor=info.noise_floor, random_state=0
    )
    with pytest.warns(ConvergenceWarning, match="no rank in \\[1, 2\\] reached the noise floor"):
        est.fit(X, Y)
    assert est.rank_ == 2  # the lowest held-out risk
    # the given floor is the one used; the sweep's own estimate is kept beside it
    assert est.noise_floor_ == info.noise_floor
    assert est.estimated_noise_floor_ == min(r["heldout_risk"] for r in est.sweep_)
    assert est.estimated_noise_floor_ > 5 * info.noise_floor
    (floor_warning,) = [w for w in est.warnings_ if w.startswith("no rank in [1, 2]")]
    assert "(given as noise_floor)" in floor_warning and "pass noise_floor" not in floor_warning
    assert "try attention='auto'" in floor_warning
    # ranks 1-2 of a rank-4 teacher still explain most of Y: the estimate is evidence-backed
    assert 0.5 < est.heldout_r2_ < 0.99 and est.estimate_supported_
    assert est.attention_ == "linear" and est.class_risks_ is None


def test_no_grid_warning_when_the_grid_ends_at_full_rank():
    import warnings

    X, Y, _ = _teacher("linear", 4, d=4, seq_len=6, n=1000, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = AttentionRankEstimator(attention="linear", rank_grid=[2, 3, 4], random_state=0)
        est.fit(X, Y)
    assert est.rank_ == 4


def test_a_stalled_rank_is_reported_not_hidden():
    # At r = r* = d the square factorisation K = W_Q W_K^T can stall at a saddle
    # (this task and seed do): the sweep must say so rather than answer quietly.
    from sklearn.exceptions import ConvergenceWarning

    X, Y, _ = _teacher("linear", 4, d=4, seq_len=6, n=1000, seed=13)
    est = AttentionRankEstimator(attention="linear", rank_grid=[2, 3, 4], n_init=1,
                                 random_state=0)
    with pytest.warns(ConvergenceWarning, match="held-out risk rises with rank \\(rank 4: "):
        est.fit(X, Y)
    # a second restart of rank 4 escapes the saddle: r* = 4 is found, and the fit says
    # that its restarts disagreed
    with pytest.warns(ConvergenceWarning, match="the 2 restarts \\(n_init\\) of rank 4 end at"):
        est.set_params(n_init=2).fit(X, Y)
    assert est.rank_ == 4
    assert est.restart_risks_[2].min() < est.restart_risks_[2].max() - est.excess_tol_


def test_in_sample_sweep_with_no_held_out_part():
    X, Y, _ = _teacher("linear", 2, d=6, seq_len=4, n=600, seed=14)
    est = AttentionRankEstimator(
        attention="linear", rank_grid=[1, 2, 3], validation_fraction=0.0, random_state=0
    ).fit(X, Y)
    assert est.rank_ == 2
    for rec in est.sweep_:
        assert rec["heldout_risk"] == rec["train_risk"]  # scored on the training data


# -- predictions of every rank --------------------------------------------------------
@_short_fit
@pytest.mark.parametrize("target", ["sequence", "final_2d", "final_1d"])
@pytest.mark.parametrize("ranks", [[1, 2, 3], None])
def test_predict_per_rank_has_a_rank_axis_and_the_selected_slot_is_predict(target, ranks):
    X, Y, _ = _teacher("linear", 2, d=5, seq_len=4, n=200, seed=15, d_out=2)
    Y = {"sequence": Y, "final_2d": Y[:, -1], "final_1d": Y[:, -1, 0]}[target]
    params = dict(rank_grid=ranks) if ranks is not None else dict(rank=2)
    est = AttentionRankEstimator(attention="linear", max_epochs=3, random_state=0,
                                 **params).fit(X, Y)
    per_rank = est.predict_per_rank(X[:7])
    R = len(est.ranks_)
    assert R == (3 if ranks else 1)
    assert per_rank.dtype == np.float64
    assert per_rank.shape == (7, R) + Y.shape[1:]
    slot = est.ranks_.tolist().index(est.rank_)
    np.testing.assert_array_equal(per_rank[:, slot], est.predict(X[:7]))
    if R > 1:  # the other slots are the other ranks' students
        assert not np.allclose(per_rank[:, 0], per_rank[:, -1])


@_short_fit
def test_predict_per_rank_validates_like_predict():
    X, Y, _ = _teacher("linear", 2, d=5, seq_len=4, n=100, seed=16)
    with pytest.raises(NotFittedError):
        AttentionRankEstimator().predict_per_rank(X)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2], max_epochs=2,
                                 random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="sequences of length 3, but .* fitted on length 4"):
        est.predict_per_rank(X[:, :3])
    with pytest.raises(ValueError, match="tokens of dimension 4, but .* fitted on dimension 5"):
        est.predict_per_rank(X[:, :, :4])
    with pytest.raises(ValueError, match="X contains NaN"):
        est.predict_per_rank(np.full_like(X, np.nan))


@_short_fit
def test_predict_per_rank_on_scalar_tokens():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 5))
    y = X.mean(axis=1)
    est = AttentionRankEstimator(attention="fixed", rank_grid=[1, 2], max_epochs=2,
                                 random_state=0).fit(X, y)
    assert est.predict_per_rank(X).shape == (60, 2)


# -- one dialect -------------------------------------------------------------------
def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        AttentionRankEstimator("linear", 2)


@pytest.mark.parametrize("verbose", [-1, 0.5, "yes"])
def test_verbose_is_checked(verbose):
    X, Y, _ = _teacher("linear", 2, n=50, seed=0)
    with pytest.raises(ValueError, match="The 'verbose' parameter of AttentionRankEstimator "
                                         r"must be an int in the range \[0, inf\)"):
        AttentionRankEstimator(max_epochs=1, verbose=verbose).fit(X, Y)


# -- n_init: restarts in the same batched run ------------------------------------------

def _rank_two_teacher(seed):
    """The rank-2 linear teacher of the n_init measurement: X 600 x 8 x 6, noise 0.05."""
    return make_attention_task("linear", n_samples=600, seq_len=8, d=6, rank=2, noise=0.05,
                               random_state=seed)


def test_grid_search_at_rank_3_scores_every_fold_or_warns_on_the_bad_one():
    """On this teacher one restart leaves fold 0 at rank 3 in a poor basin (R² 0.44)."""
    from sklearn.exceptions import ConvergenceWarning

    X, Y = _rank_two_teacher(seed=5)
    search = GridSearchCV(AttentionRankEstimator(attention="linear", random_state=0),
                          {"rank": [3]}, cv=KFold(3)).fit(X, Y)
    for k, (train, _) in enumerate(KFold(3).split(X)):
        if search.cv_results_[f"split{k}_test_score"][0] >= 0.99:
            continue
        with pytest.warns(ConvergenceWarning, match="restarts \\(n_init\\) of rank 3"):
            AttentionRankEstimator(attention="linear", rank=3, random_state=0).fit(
                X[train], Y[train])


def test_n_init_keeps_the_restart_of_lowest_training_risk():
    from sklearn.exceptions import ConvergenceWarning

    X, Y = _rank_two_teacher(seed=5)
    train, test = next(iter(KFold(3).split(X)))
    params = dict(attention="linear", rank=3, random_state=0)
    one = AttentionRankEstimator(**params, n_init=1).fit(X[train], Y[train])
    with pytest.warns(ConvergenceWarning, match="the 3 restarts \\(n_init\\) of rank 3"):
        three = AttentionRankEstimator(**params, n_init=3).fit(X[train], Y[train])
    assert one.restart_risks_.shape == (1, 1) and three.restart_risks_.shape == (1, 3)
    kept = int(np.argmin(three.restart_risks_[0]))
    # net_ is the net that trained every restart; kept_slots_ names the one kept
    assert three.net_.module_.restarts == (0, 1, 2) and three.kept_slots_.tolist() == [kept]
    # the kept restart's risk is the fitted student's, and restart 0 is n_init=1's draw
    assert three.train_risk_ == pytest.approx(three.restart_risks_[0, kept], rel=1e-5)
    assert three.restart_risks_[0, 0] == pytest.approx(one.train_risk_, rel=1e-4)
    assert three.score(X[test], Y[test]) >= 0.99
    assert three.warnings_ and "restarts (n_init)" in three.warnings_[0]
    # the history holds the kept restart's losses
    assert three.n_init_ == 3 and three.rank_epochs_ == one.rank_epochs_
    assert all(len(row["train_loss_per_rank"]) == 1 for row in three.history_)
    assert three.history_[-1]["train_loss"] == three.history_[-1]["train_loss_per_rank"][0]


def test_auto_restarts_the_poor_basin_only():
    """n_init="auto": the fold whose first restart stops at R² 0.44 trains a second one and
    keeps it; a fold whose first restart is good trains no second one and is n_init=1's fit."""
    from sklearn.exceptions import ConvergenceWarning

    X, Y = _rank_two_teacher(seed=5)
    folds = list(KFold(3).split(X))
    train, test = folds[0]
    with pytest.warns(ConvergenceWarning, match="the 2 restarts \\(n_init\\) of rank 3"):
        poor = AttentionRankEstimator(attention="linear", rank=3, random_state=0).fit(
            X[train], Y[train])
    assert poor.search_rounds_[0]["restarted"] == [3] and poor.n_init_ == 2
    assert poor.search_rounds_[0]["probe_epochs"] == 40  # a fifth of the 200 epochs
    first, second = poor.restart_risks_[0]
    variance = np.mean(np.var(Y[train], axis=0))
    assert second < first - 0.02 * variance  # the first stopped in a poorer basin
    assert poor.train_risk_ == pytest.approx(second, rel=1e-5)
    assert poor.net_.module_.restarts == (1,) and poor.score(X[test], Y[test]) >= 0.99
    train, test = folds[1]
    good = AttentionRankEstimator(attention="linear", rank=3, random_state=0).fit(
        X[train], Y[train])
    once = AttentionRankEstimator(attention="linear", rank=3, n_init=1, random_state=0).fit(
        X[train], Y[train])
    assert good.search_rounds_[0]["restarted"] == [] and good.n_init_ == 1
    assert good.restart_risks_.shape == (1, 1)
    np.testing.assert_array_equal(good.predict(X[test]), once.predict(X[test]))


def test_auto_restarts_a_rank_that_does_worse_than_a_smaller_one():
    # on this teacher the first rank-2 student ends above rank 1 (a poorer basin: rank 2
    # can do all rank 1 does); its second restart finds r* = 2
    X, Y = _rank_two_teacher(seed=5)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3, 4, 5, 6],
                                 random_state=0)
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="the 2 restarts \\(n_init\\) of rank 2 end"):
        est.fit(X, Y)
    assert est.search_rounds_[0]["restarted"] == [2] and est.rank_ == 2
    assert est.restart_risks_[1, 0] > est.restart_risks_[0, 0] + est.excess_tol_
    assert np.isnan(est.restart_risks_[[0, 2, 3, 4, 5], 1]).all()


def test_n_init_in_a_sweep_keeps_one_slot_per_rank():
    X, Y = make_attention_task("linear", n_samples=200, seq_len=4, d=5, rank=2, noise=0.05,
                               random_state=1)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 5], max_epochs=40,
                                 early_stopping=True, n_iter_no_change=5, n_init=2,
                                 random_state=0).fit(X, Y)
    assert est.restart_risks_.shape == (3, 2) and est.kernels_.shape == (3, 5, 5)
    assert est.net_.module_.ranks == (1, 1, 2, 2, 5, 5)
    assert est.kept_slots_.tolist() == [2 * i + int(b) for i, b in
                                        enumerate(np.argmin(est.restart_risks_, axis=1))]
    assert est.predict_per_rank(X).shape == (200, 3, 4, 5)
    for row in est.history_:
        assert len(row["train_loss_per_rank"]) == len(row["heldout_risk_per_rank"]) == 3
    # each kept slot is exactly the student its restart trained: its training risk
    train_risks = [rec["train_risk"] for rec in est.sweep_]
    np.testing.assert_allclose(train_risks, est.restart_risks_.min(axis=1), rtol=1e-5)


@pytest.mark.parametrize("n_init,shown", [(0, "0"), (1.5, "1.5"), (True, "True"), (np.nan, "nan"),
                                          ("two", "'two'"), (101, "101"), (10**6, "1000000")])
def test_n_init_is_auto_or_a_count_of_at_most_a_hundred(n_init, shown):
    # 10**6 restarts ran unbounded: the bound is stated and refused in one line
    X, Y = make_attention_task("linear", n_samples=40, seq_len=3, d=3, rank=1, random_state=0)
    with pytest.raises(ValueError, match=r"^The 'n_init' parameter of AttentionRankEstimator "
                                         r"must be a str among \{'auto'\} or an int in the "
                                         rf"range \[1, 100\]\. Got {shown} instead\.$"):
        AttentionRankEstimator(rank=1, max_epochs=1, n_init=n_init).fit(X, Y)


def test_n_init_with_a_warm_start_and_a_huge_count_are_one_line_each(monkeypatch):
    from intrinsic_rank._validation import _resources

    X, Y = make_attention_task("linear", n_samples=40, seq_len=3, d=3, rank=1, random_state=0)
    weights = {"query": np.eye(3), "key": np.eye(3)}
    with pytest.raises(ValueError, match="n_init=2 .* init_weights starts every slot from "
                                         "the same teacher; give n_init=1"):
        AttentionRankEstimator(attention="linear", rank=1, max_epochs=1, n_init=2,
                               init_weights=weights).fit(X, Y)
    # "auto" is 1 for a warm start: there is nothing to draw
    warm = AttentionRankEstimator(attention="linear", rank=1, max_epochs=1,
                                  init_weights=weights).fit(X, Y)
    assert warm.n_init_ == 1 and warm.restart_risks_.shape == (1, 1)
    assert "probe_epochs" not in warm.search_rounds_[0]  # no probe either
    # a count within the bound but beyond memory is one line before anything is allocated
    # (a machine of 1,000 bytes here)
    monkeypatch.setattr(_resources, "memory_limit", lambda: 1000)
    with pytest.raises(ValueError, match="^n_init: 100 restarts of 1 rank\\(s\\) needs .* "
                                         "more than this machine's memory"):
        AttentionRankEstimator(attention="linear", rank=1, max_epochs=1, n_init=100).fit(X, Y)


_SAME_SEED = """
import sys
import numpy as np
import torch
torch.set_num_threads(1)
from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
X, Y = make_attention_task("softmax", n_samples=200, seq_len=20, d=96, rank=8, noise=0.1,
                           random_state=0)
est = AttentionRankEstimator(rank_grid=[8, 16, 96], max_epochs=5, random_state=0).fit(X, Y)
np.savez(sys.argv[1], rank=est.rank_, floor=est.noise_floor_, pred=est.predict(X),
         dtype=est.compute_dtype_)
"""


@pytest.mark.filterwarnings("ignore")
def test_the_same_seed_gives_the_same_numbers_beside_a_busy_loop(tmp_path):
    """The default compute dtype follows the device, never a timing: load changes nothing."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))

    def fit(name):
        subprocess.run([sys.executable, "-c", _SAME_SEED, str(tmp_path / name)], env=env,
                       check=True, timeout=600, capture_output=True)
        return np.load(tmp_path / name)

    quiet = fit("quiet.npz")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = fit("loaded.npz")
    finally:
        busy.kill()
        busy.wait()
    assert str(quiet["dtype"]) == str(loaded["dtype"]) == "float32"
    assert int(quiet["rank"]) == int(loaded["rank"])
    assert quiet["floor"].tobytes() == loaded["floor"].tobytes()
    assert quiet["pred"].tobytes() == loaded["pred"].tobytes()


def test_a_saved_model_file_loads_back_from_the_estimators_package(tmp_path):
    from intrinsic_rank import estimators, experiments

    X, Y = make_attention_task("linear", n_samples=60, seq_len=3, d=3, rank=1, random_state=0)
    est = AttentionRankEstimator(attention="linear", rank=1, max_epochs=2,
                                 random_state=0).fit(X, Y)
    path = estimators.save_model_file(est, tmp_path / "sub" / "model.joblib")
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["model.joblib"]  # no stray file
    loaded = estimators.load_model_file(path)
    assert np.array_equal(loaded.predict(X), est.predict(X))
    # the reading side users know from the experiments is the same; the experiments'
    # writer is the estimators' one inside a command's output stage, the same file
    for name in ("load_model_file", "load_xy", "ModelVersionWarning"):
        assert getattr(experiments, name) is getattr(estimators, name)
    again = experiments.save_model_file(est, tmp_path / "again.joblib")
    assert open(again, "rb").read() == open(path, "rb").read()
