"""ReachabilityEstimator on the embedded default model: cramming, decoding, bounds, API."""

import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from intrinsic_rank import ReachabilityEstimator, bounds
from intrinsic_rank.datasets import make_random_targets
from intrinsic_rank.inspection import BOUND_NAMES
from intrinsic_rank.nn import (
    TinyCausalLM,
    TinyLMAdapter,
    as_causal_lm,
    load_default_model,
    random_prompt_hidden_states,
)

SHORT = dict(max_epochs=300, patience=100, n_radius_prompts=32)


@pytest.fixture(scope="module")
def fitted():
    X = make_random_targets(12, 6, 64, random_state=3)
    est = ReachabilityEstimator(n_memory=2, random_state=0, **SHORT).fit(X)
    return est, X


def test_default_model_is_shipped_and_trained():
    lm = load_default_model()
    assert lm.config == dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4,
                             max_length=128, d_ff=256, causal=True)
    assert lm.metadata["corpus"] == "make_induction_corpus"
    # trained: well below the loss of uniform guessing, ln 64 = 4.16
    assert lm.metadata["final_loss"] < 3.9


def test_reached_targets_are_reproduced_by_greedy_decoding(fitted):
    est, X = fitted
    outputs = est.predict(X)
    assert outputs.shape == X.shape and outputs.dtype == np.int64
    np.testing.assert_array_equal(outputs[:, 0], X[:, 0])  # the first token is given
    np.testing.assert_array_equal(est.reached_, (outputs == X).all(axis=1))
    assert est.reached_.sum() >= 6  # length 6 with 2 vectors is mostly reachable
    assert np.all(est.token_accuracy_[est.reached_] == 1.0)
    # a target is stopped at its first exact match
    assert est.n_steps_[est.reached_].max() < SHORT["max_epochs"]
    assert est.accessibility_ == pytest.approx(est.reached_.mean())
    assert est.score(X) == pytest.approx(est.accessibility_)


def test_fitted_attributes_and_bounds(fitted):
    est, X = fitted
    n, length = X.shape
    assert est.memory_.shape == (n, 2, 64)
    assert est.seq_len_ == est.n_features_in_ == length
    assert (est.width_, est.vocab_size_, est.context_length_) == (64, 64, 128)
    g = est.geometry_
    assert g.precision == 2.0 ** -23  # float32 model: its machine epsilon
    assert 0.5 < g.radius < 100 and g.learned_radius > 0
    assert g.widths.shape == (64,)
    assert np.all(g.widths <= 2 * g.radius + 1e-9)
    log_term = math.log1p(2 * g.radius / g.precision)
    assert g.log_count_bound == pytest.approx(64 * 2 * log_term)
    assert g.slope_bound == pytest.approx(64 * log_term / math.log(64))
    assert g.box_slope_bound < g.slope_bound
    assert g.log_n_sequences == pytest.approx((length - 1) * math.log(64))
    # one attribute for the geometry: none of the paper-bound numbers beside it
    assert "flat" not in g and not hasattr(est, "radius_") and not hasattr(est, "slope_bound_")
    assert est.history_[0]["n_active"] <= n and "train_loss" in est.history_[0]


def test_precision_options():
    X = make_random_targets(2, 3, 64, random_state=0)
    fp16 = ReachabilityEstimator(precision="float16", max_epochs=2, n_radius_prompts=4,
                                 random_state=0).fit(X)
    assert fp16.geometry_.precision == 2.0 ** -10
    given = ReachabilityEstimator(precision=1e-3, max_epochs=2, n_radius_prompts=4,
                                  random_state=0).fit(X)
    assert given.geometry_.precision == 1e-3
    assert (given.geometry_.slope_bound < fp16.geometry_.slope_bound
            or given.geometry_.radius != fp16.geometry_.radius)


def test_more_memory_reaches_longer_targets():
    X = make_random_targets(8, 10, 64, random_state=5)
    acc = [ReachabilityEstimator(n_memory=m, random_state=0, **SHORT).fit(X).accessibility_
           for m in (1, 4)]
    assert acc[0] <= 0.25 and acc[1] >= 0.5


def test_same_seed_same_numbers_and_batch_independence():
    X = make_random_targets(6, 5, 64, random_state=1)
    a = ReachabilityEstimator(n_memory=1, random_state=7, **SHORT).fit(X)
    b = ReachabilityEstimator(n_memory=1, random_state=7, **SHORT).fit(X)
    np.testing.assert_array_equal(a.memory_, b.memory_)
    np.testing.assert_array_equal(a.reached_, b.reached_)
    # a target's memory depends on the seed and the target, not on its batch mates
    alone = ReachabilityEstimator(n_memory=1, random_state=7, **SHORT).fit(X[2:3])
    np.testing.assert_allclose(alone.memory_[0], a.memory_[2], atol=1e-4)
    assert alone.reached_[0] == a.reached_[2]
    other = ReachabilityEstimator(n_memory=1, random_state=8, **SHORT).fit(X)
    assert not np.allclose(other.memory_, a.memory_)


def test_predict_crams_unseen_targets(fitted):
    est, X = fitted
    new = make_random_targets(4, 6, 64, random_state=99)
    outputs = est.predict(new)
    assert outputs.shape == new.shape
    # the same fitted settings on the new targets give the same result
    refit = clone(est).fit(new)
    np.testing.assert_array_equal(outputs, refit.predict(new))
    mixed = np.concatenate([X[:3], new[:2]])
    np.testing.assert_array_equal(est.predict(mixed)[:3], est.predict(X[:3]))


def test_clone_pickle_and_grid_search(fitted):
    est, X = fitted
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    assert clone(est).get_params()["n_memory"] == 2
    targets = make_random_targets(8, 9, 64, random_state=11)
    search = GridSearchCV(ReachabilityEstimator(random_state=0, **SHORT),
                          {"n_memory": [1, 4]}, cv=2).fit(targets)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"n_memory": 4} and scores[1] > scores[0]


def test_accepts_a_model_instance_without_modifying_it():
    torch.manual_seed(0)
    lm = TinyCausalLM(vocab_size=16, d_model=16, n_layers=1, n_heads=2, max_length=16)
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    X = make_random_targets(3, 4, 16, random_state=0)
    est = ReachabilityEstimator(model=lm, max_epochs=5, n_radius_prompts=4, random_state=0).fit(X)
    assert est.vocab_size_ == 16 and est.width_ == 16
    assert all(p.requires_grad for p in lm.parameters())  # the caller's model untouched
    for key, value in lm.state_dict().items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)


def test_as_causal_lm_shares_adapters():
    adapter = as_causal_lm("default")
    assert as_causal_lm(adapter) is adapter
    assert not any(p.requires_grad for p in adapter.parameters())


# -- bad input ---------------------------------------------------------------------
@pytest.mark.parametrize("X, match", [
    (np.array([[1, 2, 64]]), r"token id 64, which is outside the model's vocabulary 0\.\.63"),
    (np.array([[1, -2, 3]]), r"Negative values in data.*token id -2"),
    (np.array([[1.0, 2.5, 3.0]]), r"integer token ids; found the non-integer value 2\.5"),
    (np.array([[1.0, np.nan, 3.0]]), r"NaN"),
    (np.array([[5], [6]]), r"1 feature\(s\).*at least 2 tokens"),
    (np.ones((2, 130), dtype=int), r"length 130 with n_memory=1 need 130 positions, but the "
                                   r"model's context is 128"),
])
def test_bad_targets(X, match):
    with pytest.raises(ValueError, match=match):
        ReachabilityEstimator(max_epochs=2).fit(X)


@pytest.mark.parametrize("params, match", [
    (dict(n_memory=0), r"The 'n_memory' parameter .* range \[1, inf\)\. Got 0 instead"),
    (dict(n_memory=1.5), r"The 'n_memory' parameter of ReachabilityEstimator must be an int"),
    (dict(max_epochs=0), r"The 'max_epochs' parameter .* range \[1, inf\)"),
    (dict(lr=-1.0), r"The 'lr' parameter .* a float in the range \(0\.0, inf\)"),
    (dict(betas=(0.9, 1.2)), r"^ReachabilityEstimator: betas must be a pair of floats in "
                             r"\[0, 1\)"),
    (dict(precision="float8"), r"float8"),
    (dict(precision=2.0), r"The 'precision' parameter .* \(0\.0, 1\.0\]"),
    (dict(model="no/such/folder"), r"neither 'default' nor an existing file or folder"),
    (dict(device="tpu9"), r"unknown device"),
])
def test_bad_parameters(params, match):
    X = make_random_targets(2, 3, 64, random_state=0)
    with pytest.raises(ValueError, match=match):
        ReachabilityEstimator(**{"max_epochs": 2, **params}).fit(X)


def test_context_counts_the_memory():
    X = np.ones((1, 120), dtype=int)
    ReachabilityEstimator(n_memory=9, max_epochs=1, n_radius_prompts=2).fit(X)  # 128 fits
    with pytest.raises(ValueError, match=r"n_memory=10 need 129 positions"):
        ReachabilityEstimator(n_memory=10, max_epochs=1).fit(X)


def test_non_causal_model_is_rejected():
    torch.manual_seed(0)
    encoder = TinyCausalLM(vocab_size=16, d_model=16, n_layers=1, n_heads=2, max_length=16,
                           causal=False)
    with pytest.raises(ValueError, match="is not causal"):
        ReachabilityEstimator(model=encoder, max_epochs=2).fit(np.array([[1, 2, 3]]))


def test_predict_checks_length_and_fit():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        ReachabilityEstimator().predict(np.array([[1, 2, 3]]))
    est = ReachabilityEstimator(max_epochs=2, n_radius_prompts=2, random_state=0).fit(
        np.array([[1, 2, 3]]))
    with pytest.raises(ValueError, match="3 features"):
        est.predict(np.array([[1, 2, 3, 4]]))


def test_random_prompt_hidden_states_measure_the_radius():
    from intrinsic_rank.bounds import hidden_state_geometry
    from intrinsic_rank.nn import random_prompt_hidden_states

    lm = as_causal_lm("default")
    states = random_prompt_hidden_states(lm, 2, 5, n_prompts=16, batch_size=5, random_state=3)
    assert states.shape == (16, 7, 64)
    again = random_prompt_hidden_states(lm, 2, 5, n_prompts=16, batch_size=16, random_state=3)
    np.testing.assert_allclose(states, again, atol=1e-5)  # chunking does not change them
    est = ReachabilityEstimator(n_memory=2, max_epochs=1, n_radius_prompts=16, chunk_size=5,
                                random_state=0).fit(make_random_targets(2, 6, 64, random_state=0))
    assert est.geometry_.radius == pytest.approx(
        hidden_state_geometry(random_prompt_hidden_states(
            lm, 2, 5, n_prompts=16, random_state=est.seed_))["radius"], rel=1e-5)
    assert random_prompt_hidden_states(lm, 0, 3, n_prompts=2).shape == (2, 3, 64)
    with pytest.raises(ValueError, match="exceed the model's context of 128"):
        random_prompt_hidden_states(lm, 8, 121)


# -- one dialect: one name per parameter, keyword-only, one divergence error --------
@pytest.mark.parametrize("old", ["max_steps", "init_std", "batch_size"])
def test_there_is_one_name_per_parameter(old):
    # max_epochs, init_scale and chunk_size are the only names
    assert old not in ReachabilityEstimator().get_params()
    with pytest.raises(TypeError):
        ReachabilityEstimator(**{old: 1})


def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        ReachabilityEstimator("default", 2)


@pytest.mark.parametrize("verbose", [-1, 1.5, True])
def test_verbose_is_checked(verbose):
    X = make_random_targets(2, 3, 64, random_state=0)
    with pytest.raises(ValueError, match="The 'verbose' parameter of ReachabilityEstimator "
                                         r"must be an int in the range \[0, inf\)"):
        ReachabilityEstimator(max_epochs=1, verbose=verbose).fit(X)


def test_verbose_progress_bar_leaves_nothing_behind():
    X = make_random_targets(2, 3, 64, random_state=0)
    est = ReachabilityEstimator(max_epochs=2, n_radius_prompts=2, random_state=0,
                                verbose=1).fit(X)
    bars = [cb for name, cb in est.net_.callbacks_ if name == "progress"]
    assert len(bars) == 1 and type(bars[0]).__name__ == "FitProgress"
    assert not hasattr(bars[0], "bar_")  # closed and dropped: it does not travel
    pickle.loads(pickle.dumps(est))


def test_divergence_raises_training_diverged_error():
    from intrinsic_rank import TrainingDivergedError

    X = make_random_targets(2, 3, 64, random_state=0)
    with pytest.raises(TrainingDivergedError, match="cramming diverged at step .* lower lr "
                                                    "or init_scale"):
        ReachabilityEstimator(max_epochs=3, init_scale=float("1e300"), n_radius_prompts=2,
                              random_state=0).fit(X)


# -- the caller's model is shared, not copied, and left as it was ----------------------

def _flags(model):
    return ([p.requires_grad for p in model.parameters()],
            [m.training for m in model.modules()])


def _mixed_model():
    """The default model with a mix of requires_grad and training flags."""
    model = load_default_model()
    for i, p in enumerate(model.parameters()):
        p.requires_grad_(i % 2 == 0)
    model.train()
    next(iter(model.children())).eval()
    return model


def test_a_model_instance_is_shared_not_copied_and_left_as_it_was(monkeypatch):
    from intrinsic_rank.nn import _loading

    def no_copy(value, memo=None):
        raise AssertionError("the model was deep-copied")

    monkeypatch.setattr(_loading.copy, "deepcopy", no_copy)
    model = _mixed_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = _flags(model)
    X = make_random_targets(3, 4, 64, random_state=0)
    fits = [ReachabilityEstimator(model=model, max_epochs=20, n_radius_prompts=4,
                                  random_state=seed).fit(X) for seed in (0, 1)]
    for est in fits:  # both fits read the caller's model itself: no copy grows memory
        assert est.net_.module_.lm.model is model
    new = make_random_targets(2, 4, 64, random_state=9)
    fits[0].predict(new)  # crams new targets through the shared model
    assert _flags(model) == flags
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    shared = fits[1].net_.module_.lm.model.parameters()
    assert [id(p) for p in model.parameters()] == [id(p) for p in shared]


def test_a_failed_fit_restores_the_callers_model():
    model = _mixed_model()
    flags = _flags(model)
    X = make_random_targets(2, 4, 64, random_state=0)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        ReachabilityEstimator(model=model, max_epochs=2).fit(X + 64)
    assert _flags(model) == flags

    class Boom(RuntimeError):
        pass

    def explode(*args, **kwargs):
        raise Boom("mid-fit")

    est = ReachabilityEstimator(model=model, max_epochs=2, n_radius_prompts=4)
    est._measure_geometry = explode  # fails after cramming, inside the frozen block
    with pytest.raises(Boom):
        est.fit(X)
    assert _flags(model) == flags and not hasattr(est, "net_")


def test_the_cells_are_off_by_default():
    est = ReachabilityEstimator()
    assert est.n_cell_samples == 0
    X = make_random_targets(2, 4, 64, random_state=0)
    est.set_params(max_epochs=2, n_radius_prompts=4).fit(X)
    assert est.geometry_.cells is None and math.isnan(est.geometry_.cell_slope_bound)
    assert np.isfinite(est.geometry_.box_slope_bound)


def test_token_ids_beyond_every_integer_dtype_are_one_line():
    from intrinsic_rank import ReachabilityEstimator

    est = ReachabilityEstimator(max_epochs=1, n_radius_prompts=2, random_state=0)
    with pytest.raises(ValueError, match="token id 1180591620717411303424, outside the model's "
                                         "vocabulary 0..63"):
        est.fit([[1, 2, 3], [1, 2**70, 3]])


TARGETS = make_random_targets(4, 4, vocab_size=64, random_state=0)


CRAM = dict(max_epochs=20, n_radius_prompts=2, random_state=0)


CELL_FIT = dict(max_epochs=200, patience=100, n_radius_prompts=32)


@pytest.fixture(scope="module")
def lm():
    return as_causal_lm("default")


@pytest.fixture(scope="module")
def states(lm):
    return random_prompt_hidden_states(lm, 2, 6, n_prompts=32, random_state=0)


@pytest.fixture(scope="module")
def fitted_cells():
    X = make_random_targets(6, 5, 64, random_state=3)
    est = ReachabilityEstimator(n_memory=2, random_state=0, n_cell_samples=2**14,
                                **CELL_FIT).fit(X)
    return est, X


def test_cramming_still_stops_early_when_every_target_is_done():
    # the net's own early stop is not an interrupt: fit returns normally
    est = ReachabilityEstimator(n_memory=2, max_epochs=300, random_state=0).fit(TARGETS)
    assert est.accessibility_ == 1.0
    assert len(est.history_) < 300


def test_non_contiguous_targets_work_for_reachability():
    est = ReachabilityEstimator(**CRAM).fit(TARGETS[:, ::-1])
    ref = ReachabilityEstimator(**CRAM).fit(np.ascontiguousarray(TARGETS[:, ::-1]))
    np.testing.assert_array_equal(est.memory_, ref.memory_)
    est = ReachabilityEstimator(**CRAM).fit(np.asfortranarray(TARGETS))
    assert est.predict(TARGETS[:, ::-1]).shape == TARGETS.shape


def test_estimator_cone(fitted_cells, lm):
    est, X = fitted_cells
    g = est.geometry_
    seed = est.seed_
    states = random_prompt_hidden_states(lm, 2, X.shape[1] - 1, n_prompts=32,
                                         batch_size=256, random_state=seed)
    assert g.min_cosine == bounds.min_pairwise_cosine(states.reshape(-1, 64))
    assert g.cone_half_angle == pytest.approx(math.acos(g.min_cosine))
    assert g.cone_log_fraction == bounds.cone_log_fraction(g.cone_half_angle, 64)
    assert g.cone_log_fraction <= 0
    log_term = 64 * math.log1p(2 * g.radius / g.precision)
    assert g.cone_slope_bound == pytest.approx((log_term + g.cone_log_fraction) / math.log(64))
    assert g.cone_log_count_bound == pytest.approx(2 * (log_term + g.cone_log_fraction))
    assert g.cone_slope_bound <= g.slope_bound


def test_estimator_cells_and_table(fitted_cells):
    est, _ = fitted_cells
    g = est.geometry_
    assert g.cells.proportions.shape == (64,) and g.cells.proportions.sum() == pytest.approx(1)
    assert g.cells.nearest.proportions.shape == (64,)
    assert 0 < g.cells.disagreement < 1
    decay = g.decay
    assert decay.n_samples == 2**14 and decay.closed_form_se > 0 and decay.fitted_se > 0
    assert g.cell_slope_bound == pytest.approx(g.box_slope_bound * math.log(64) / decay.closed_form)
    table = g.table
    assert len(table) == 12
    assert [r["bound"] for r in table[:4]] == list(BOUND_NAMES)
    assert [r["precision_convention"] for r in table[::4]] == ["machine", "paper", "relative"]
    machine = {r["bound"]: r["slope_bound"] for r in table[:4]}
    assert machine == {"ball": g.slope_bound, "box": g.box_slope_bound,
                       "cone": g.cone_slope_bound, "box + cells": g.cell_slope_bound}
    paper = [r for r in table if r["precision_convention"] == "paper"]
    assert all(r["precision"] == 2.0**-10 for r in paper)
    relative = [r for r in table if r["precision_convention"] == "relative"]
    assert relative[0]["precision"] == g.radius / 2048
    assert relative[0]["slope_bound"] == pytest.approx(
        64 * math.log1p(2 * 2048) / math.log(64))
    for rows in (table[:4], paper, relative):
        s = {r["bound"]: r["slope_bound"] for r in rows}
        assert s["box + cells"] < s["box"] < s["ball"] and s["cone"] <= s["ball"]


def test_cells_change_no_existing_number(fitted_cells):
    est, X = fitted_cells
    off = ReachabilityEstimator(n_memory=2, random_state=0, n_cell_samples=0, **CELL_FIT).fit(X)
    for name in ("memory_", "reached_", "loss_"):
        np.testing.assert_array_equal(getattr(off, name), getattr(est, name))
    for name in ("radius", "widths", "slope_bound", "box_slope_bound", "log_count_bound",
                 "learned_radius", "min_cosine"):
        np.testing.assert_array_equal(off.geometry_[name], est.geometry_[name])
    assert off.geometry_.cells is None and off.geometry_.decay is None
    assert math.isnan(off.geometry_.cell_slope_bound)
    assert math.isnan(off.geometry_.table[3]["slope_bound"])


def test_a_model_without_a_head_skips_the_cells_with_a_warning(lm):
    class Headless(TinyLMAdapter):
        has_head = False

    X = make_random_targets(2, 3, 64, random_state=0)
    with pytest.warns(UserWarning, match="decoder-cell refinement was skipped"):
        est = ReachabilityEstimator(model=Headless(lm.model), max_epochs=2,
                                    n_radius_prompts=4, n_cell_samples=2**10,
                                    random_state=0).fit(X)
    assert est.geometry_.decay is None and np.isfinite(est.geometry_.cone_slope_bound)


@pytest.mark.parametrize("params, match", [
    (dict(n_cell_samples=-1), "n_cell_samples"),
    (dict(n_cell_samples=1.5), "n_cell_samples"),
    (dict(cell_region="cube"), "The 'cell_region' parameter of ReachabilityEstimator must "
                               "be a str among .* Got 'cube' instead"),
])
def test_bad_cell_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        ReachabilityEstimator(**params).fit(np.array([[1, 2]]))


def test_ball_cell_region(lm):
    X = make_random_targets(2, 3, 64, random_state=0)
    est = ReachabilityEstimator(max_epochs=2, n_radius_prompts=8, random_state=0,
                                n_cell_samples=2**12, cell_region="ball").fit(X)
    assert est.geometry_.decay.n_samples == 2**12 and np.isfinite(est.geometry_.cell_slope_bound)
