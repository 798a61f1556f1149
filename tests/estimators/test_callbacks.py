"""skorch callbacks: the estimators' own rules are named callbacks, and a user's run beside them."""

import json
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import Checkpoint, EarlyStopping, LRScheduler

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

X, Y = make_attention_task("linear", n_samples=128, seq_len=4, d=5, rank=2, random_state=0)
TARGETS = make_random_targets(3, 4, vocab_size=64, random_state=0)
SWEEP = dict(attention="linear", rank_grid=[1, 2, 3], max_epochs=6, lr=4e-3, random_state=0)


def _fit(est, *data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*data)


def test_the_estimators_own_rules_are_named_callbacks():
    est = _fit(AttentionRankEstimator(**SWEEP, early_stopping=True, n_iter_no_change=3), X, Y)
    names = [name for name, _ in est.net_.callbacks_]
    assert {"rankwise_loss", "divergence", "plateau"} <= set(names)
    cram = _fit(ReachabilityEstimator(max_epochs=3, n_radius_prompts=2, n_cell_samples=0,
                                      random_state=0), TARGETS)
    assert {"finite_loss", "all_done"} <= {name for name, _ in cram.net_.callbacks_}


def test_a_users_lr_scheduler_steps_the_optimiser():
    scheduler = LRScheduler(policy="StepLR", step_size=2, gamma=0.5)
    est = _fit(AttentionRankEstimator(**SWEEP, callbacks=[scheduler]), X, Y)
    # StepLR halves the rate every 2 epochs: after 6 epochs it has halved 3 times
    assert est.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(4e-3 / 8, rel=1e-12)
    lrs = [row["event_lr"] for row in est.net_.history]
    assert lrs == pytest.approx([4e-3, 4e-3, 2e-3, 2e-3, 1e-3, 1e-3], rel=1e-12)
    # and it changed the training: the same seed without it trains differently
    plain = _fit(AttentionRankEstimator(**SWEEP), X, Y)
    assert plain.history_[0]["train_loss"] == est.history_[0]["train_loss"]
    assert plain.history_[-1]["train_loss"] != est.history_[-1]["train_loss"]


def test_a_users_checkpoint_writes_files_that_load(tmp_path):
    checkpoint = Checkpoint(dirname=str(tmp_path), monitor=None)
    est = _fit(AttentionRankEstimator(**SWEEP, callbacks=[("checkpoint", checkpoint)]), X, Y)
    for name in ("params.pt", "optimizer.pt", "history.json"):
        assert (tmp_path / name).is_file()
    # monitor=None saves every epoch: the last file holds the final parameters
    saved = torch.load(tmp_path / "params.pt", weights_only=True)
    final = est.net_.module_.state_dict()
    assert saved.keys() == final.keys()
    for key in final:
        torch.testing.assert_close(saved[key], final[key], rtol=0, atol=0)
    history = json.loads((tmp_path / "history.json").read_text())
    assert len(history) == 6
    # and the net takes them back
    est.net_.load_params(checkpoint=checkpoint)
    np.testing.assert_array_equal(est.predict(X), _fit(AttentionRankEstimator(**SWEEP), X, Y)
                                  .predict(X))


def test_user_callbacks_change_no_number_when_they_change_no_state():
    # a checkpoint only reads the net: rank_ and the risks stay those of a plain fit
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        est = _fit(AttentionRankEstimator(**SWEEP, callbacks=[Checkpoint(dirname=folder,
                                                                         monitor=None)]), X, Y)
    plain = _fit(AttentionRankEstimator(**SWEEP), X, Y)
    assert est.rank_ == plain.rank_
    assert [r["heldout_risk"] for r in est.sweep_] == [r["heldout_risk"] for r in plain.sweep_]


def test_skorch_early_stopping_ends_fit_normally():
    # threshold=10: no epoch after the first counts as an improvement, so patience 2
    # stops at epoch 3 of 50; the stop is an early stop, not a KeyboardInterrupt
    stop = EarlyStopping(monitor="train_loss", patience=2, threshold=10.0)
    est = _fit(AttentionRankEstimator(**{**SWEEP, "max_epochs": 50}, callbacks=[stop]), X, Y)
    assert est.n_epochs_ == 3 and len(est.history_) == 3


def test_cramming_takes_a_users_scheduler():
    scheduler = LRScheduler(policy="StepLR", step_size=1, gamma=0.5)
    est = _fit(ReachabilityEstimator(max_epochs=4, patience=50, lr=1e-2, n_radius_prompts=2,
                                     n_cell_samples=0, random_state=0, callbacks=[scheduler]),
               TARGETS)
    # one epoch is one optimiser step: four steps halve the rate four times
    assert est.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(1e-2 / 16, rel=1e-12)


def test_energy_rank_passes_callbacks_through_its_student():
    student = AttentionRankEstimator(attention="linear", max_epochs=4, callbacks=[
        LRScheduler(policy="StepLR", step_size=1, gamma=0.1)])
    est = _fit(EnergyEffectiveRank(student=student, random_state=0), X, Y)
    assert est.student_.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(3e-3 * 1e-4)


def test_energy_rank_adds_its_callbacks_after_the_students():
    student = AttentionRankEstimator(attention="linear", max_epochs=4, callbacks=[
        ("first", LRScheduler(policy="StepLR", step_size=1, gamma=0.1))])
    est = _fit(EnergyEffectiveRank(student=student, random_state=0, callbacks=[
        ("second", LRScheduler(policy="StepLR", step_size=2, gamma=0.5))]), X, Y)
    names = [name for name, _ in est.student_.net_.callbacks_]
    assert names.index("first") < names.index("second")
    # both schedulers step the one optimiser: 0.1 per epoch (4 epochs), 0.5 every 2 epochs
    assert est.student_.net_.optimizer_.param_groups[0]["lr"] == pytest.approx(
        3e-3 * 1e-4 * 0.25, rel=1e-9)
    assert student.callbacks[0][0] == "first" and len(student.callbacks) == 1  # not mutated
    with pytest.raises(ValueError, match="EnergyEffectiveRank: callbacks are used by "
                                         "method='recovery' only"):
        EnergyEffectiveRank(method="data", callbacks=[LRScheduler()]).fit(X, Y)


@pytest.mark.parametrize("callbacks, match", [
    (LRScheduler(), "The 'callbacks' parameter of AttentionRankEstimator must be None, an "
                    "instance of 'list' or an instance of 'tuple'"),
    ("checkpoint", "The 'callbacks' parameter of AttentionRankEstimator must be None"),
    ([3], "^AttentionRankEstimator: callbacks must be a list of skorch callbacks"),
    ([("lr", 3)], "^AttentionRankEstimator: callbacks must be a list of skorch callbacks"),
])
def test_bad_callbacks_are_refused_by_name(callbacks, match):
    with pytest.raises(ValueError, match=match):
        AttentionRankEstimator(**SWEEP, callbacks=callbacks).fit(X, Y)


X_SHORT, Y_SHORT = make_attention_task("linear", n_samples=96, seq_len=3, d=4, rank=2, random_state=0)


SHORT_FIT = dict(attention="linear", max_epochs=3, random_state=0)


def _quiet(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


X_TASK, Y_TASK = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                random_state=0)


QUICK_FIT = dict(attention="linear", max_epochs=4, random_state=0)


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


X_FEW, Y_FEW = make_attention_task("linear", n_samples=60, seq_len=4, d=5, rank=2, random_state=0)


FEW_EPOCHS = dict(max_epochs=2, random_state=0)


def _fit_few(X_, Y_, **params):
    return AttentionRankEstimator(**{**FEW_EPOCHS, **params}).fit(X_, Y_)


def test_early_stopping_with_its_defaults_works_on_all_three_estimators():
    from skorch.callbacks import EarlyStopping

    # a learning rate so small that the training loss stops improving by skorch's 1e-4
    stop = EarlyStopping()
    est = _quiet(AttentionRankEstimator(**{**SHORT_FIT, "max_epochs": 200}, rank=2, lr=1e-8,
                                        callbacks=[stop]), X_SHORT, Y_SHORT)
    assert len(est.history_) < 200 and stop.monitor == "valid_loss"  # the user's untouched
    sweep = _quiet(AttentionRankEstimator(**{**SHORT_FIT, "max_epochs": 200}, rank_grid=[1, 2],
                                          lr=1e-8, callbacks=[("stop", EarlyStopping())]), X_SHORT, Y_SHORT)
    assert len(sweep.history_) < 200
    energy = _quiet(EnergyEffectiveRank(attention="linear", callbacks=[EarlyStopping()],
                                        student=AttentionRankEstimator(attention="linear",
                                                                       max_epochs=200, lr=1e-8)),
                    X_SHORT, Y_SHORT)
    assert len(energy.student_.history_) < 200
    ids = np.random.default_rng(0).integers(0, 64, size=(2, 4))
    reach = _quiet(ReachabilityEstimator(model="default", max_epochs=200, lr=1e-8,
                                         callbacks=[EarlyStopping()]), ids, None)
    assert len(reach.history_) < 200


def test_a_monitor_nothing_records_names_the_recorded_keys():
    from skorch.callbacks import EarlyStopping

    with pytest.raises(ValueError, match=r"monitors 'heldout', which this estimator's history "
                                         r"does not record .*train_loss"):
        AttentionRankEstimator(**SHORT_FIT, rank=2, callbacks=[EarlyStopping(monitor="heldout")]
                               ).fit(X_SHORT, Y_SHORT)


def test_finite_blow_up_raises_training_diverged_error():
    Xf, Yf = make_fixed_operator_task(n_samples=128, seq_len=6, d=4, rank=2, random_state=0)
    with pytest.raises(TrainingDivergedError, match=r"more than 1e\+06 times the mean square"):
        AttentionRankEstimator(attention="fixed", lr=1e4, max_epochs=20,
                               random_state=0).fit(Xf, Yf)


def test_a_huge_initialisation_is_divergence_from_the_start():
    with pytest.raises(TrainingDivergedError, match="at initialisation.*lower lr or init_scale"):
        AttentionRankEstimator(**QUICK_FIT, init_scale=1e6).fit(X_TASK, Y_TASK)
    with pytest.raises(TrainingDivergedError, match="at initialisation"):
        AttentionRankEstimator(attention="fixed", init_scale=1e5, max_epochs=3,
                               random_state=0).fit(X_TASK, Y_TASK)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_loss_that_never_falls_warns(threads):
    # at lr=1e-12 the last epoch's mean batch loss equals the initial full-data loss
    # up to float rounding, which differs with the thread count and the batch order:
    # the rule must warn whichever way the rounding goes
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        est = AttentionRankEstimator(**{**QUICK_FIT, "lr": 1e-12})
        with pytest.warns(ConvergenceWarning, match="loss never fell below its initial value"):
            est.fit(X_TASK, Y_TASK)
    finally:
        torch.set_num_threads(before)


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
        AttentionRankEstimator(**QUICK_FIT).fit(X_TASK, Y_TASK)


def test_divergent_training_stops_with_a_clear_error():
    with pytest.raises(TrainingDivergedError, match=r"training diverged at epoch \d+: the loss of rank\(s\) \[2\] is not finite"):
        _fit_few(X_FEW, Y_FEW, attention="linear", rank=2, lr=1e8, max_epochs=5)
    assert issubclass(TrainingDivergedError, FloatingPointError)


def test_spare_restarts_that_diverge_are_left_behind_without_an_error():
    # n_init="auto"'s probes and second restarts: a diverged slot is left behind, and the
    # run ends normally (TrainingFinished, skorch's early stop) once every slot has
    from types import SimpleNamespace

    from intrinsic_rank.estimators._callbacks import DivergenceCheck
    from intrinsic_rank.estimators._errors import TrainingFinished

    class History(list):
        def __getitem__(self, key):
            return self[-1] if key == (-1, "batches", -1, "train_loss_per_rank") else \
                super().__getitem__(key)

    net = SimpleNamespace(module_=SimpleNamespace(ranks=(2, 3)), history=History())
    check = DivergenceCheck(loss_limit=10.0, spare=True)
    check.on_train_begin(net)
    net.history.append([float("nan"), 1.0])
    check.on_batch_end(net, training=True)
    assert check.diverged_ == {0}
    net.history.append([1.0, 20.0])  # the other slot now exceeds the limit
    with pytest.raises(TrainingFinished, match="every spare restart diverged"):
        check.on_batch_end(net, training=True)
    strict = DivergenceCheck(loss_limit=10.0)
    strict.on_train_begin(net)
    with pytest.raises(TrainingDivergedError, match=r"the loss of rank\(s\) \[3\] reached 20"):
        strict.on_batch_end(net, training=True)
