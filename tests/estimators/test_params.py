"""The estimators' parameters: every bad setting is refused naming the estimator and the
parameter, and a refit with other settings leaves no stale attribute.
"""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import check_is_fitted

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank, ReachabilityEstimator
from intrinsic_rank.datasets import make_attention_task, make_random_targets
from intrinsic_rank.estimators._attention_params import check_student_options
from intrinsic_rank.nn import STUDENTS

X_SHORT, Y_SHORT = make_attention_task("linear", n_samples=96, seq_len=3, d=4, rank=2, random_state=0)


SHORT_FIT = dict(attention="linear", max_epochs=3, random_state=0)


X_TASK, Y_TASK, TASK_INFO = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                                random_state=0, return_info=True)


QUICK_FIT = dict(attention="linear", max_epochs=4, random_state=0)


TARGETS = make_random_targets(4, 4, vocab_size=64, random_state=0)


CRAM = dict(max_epochs=20, n_radius_prompts=2, random_state=0)


def _quiet_fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args)


X_FEW, Y_FEW = make_attention_task("linear", n_samples=60, seq_len=4, d=5, rank=2, random_state=0)


FEW_EPOCHS = dict(max_epochs=2, random_state=0)


def _fit_few(X_, Y_, **params):
    return AttentionRankEstimator(**{**FEW_EPOCHS, **params}).fit(X_, Y_)


@pytest.mark.parametrize("options, message", [
    ({"hidden": 2.5}, r"student_options\['hidden'\] must be an integer"),
    ({"hidden": -3}, r"student_options\['hidden'\] must be an integer in \[1, 65536\]"),
    ({"hidden": 10**7}, r"student_options\['hidden'\] must be an integer in \[1, 65536\]"),
    ({"positional": "yes"}, r"student_options\['positional'\] must be True or False"),
    (5, "student_options must be a dict"),
    ({"d": 3}, "cannot set"),
    ({"widht": 3}, "unknown key"),
])
def test_student_option_values_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        check_student_options(options, "kernel", STUDENTS["kernel"])


def test_the_estimator_refuses_a_fractional_hidden_size():
    X = np.random.default_rng(0).normal(size=(16, 3, 2))
    with pytest.raises(ValueError, match="hidden"):
        AttentionRankEstimator(attention="kernel", rank_grid=[1], max_epochs=1,
                               student_options={"hidden": 2.5}).fit(X, X.sum(-1))


@pytest.mark.parametrize("params, match", [
    (dict(rank_grid=[True, 2]), "every entry of rank_grid must be an integer >= 1; got True"),
    (dict(rank_grid=[np.True_, 2]), "every entry of rank_grid must be an integer >= 1; got "
                                    "(np.)?True"),
    (dict(rank_grid=np.array([True, False])), "every entry of rank_grid must be an integer"),
    (dict(rank=True), r"The 'rank' parameter of AttentionRankEstimator must be None or an int "
                      r"in the range \[1, inf\)\. Got True instead\."),
    (dict(rank=np.True_), "The 'rank' parameter of AttentionRankEstimator must be None or an "
                          "int"),
])
def test_booleans_are_not_ranks(params, match):
    with pytest.raises(ValueError, match=match):
        AttentionRankEstimator(**SHORT_FIT, **params).fit(X_SHORT, Y_SHORT)


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
        (dict(verbose=1.5), r"The 'verbose' parameter of AttentionRankEstimator must be an "
                            r"int in the range \[0, inf\)\. Got 1\.5 instead\."),
        (dict(verbose="2"), "The 'verbose' parameter of AttentionRankEstimator must be an int"),
        (dict(random_state=-1), r"The 'random_state' parameter of AttentionRankEstimator must "
                                r"be an int in the range \[0, 4294967295\]"),
        (dict(random_state=2**40), "The 'random_state' parameter .* Got 1099511627776"),
        (dict(random_state=1.5), "The 'random_state' parameter .* Got 1.5 instead"),
    ],
)
def test_bad_settings_name_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        AttentionRankEstimator(**{**QUICK_FIT, **params}).fit(X_TASK, Y_TASK)


def test_unavailable_mps_is_a_value_error():
    if torch.backends.mps.is_available():
        pytest.skip("MPS is available here")
    with pytest.raises(ValueError, match="device='mps'"):
        AttentionRankEstimator(**QUICK_FIT, device="mps").fit(X_TASK, Y_TASK)
    with pytest.raises(ValueError, match="device='mps'"):
        ReachabilityEstimator(**CRAM, device="mps").fit(TARGETS)


def test_optimizer_without_weight_decay_is_named():
    class Plain(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

    with pytest.raises(ValueError, match=r"optimizer Plain does not accept \['weight_decay'\]"):
        AttentionRankEstimator(**QUICK_FIT, optimizer=Plain).fit(X_TASK, Y_TASK)


@pytest.mark.parametrize("params, match", [
    (dict(random_state=-1), "The 'random_state' parameter of ReachabilityEstimator must be"),
    (dict(device="meta"), "^ReachabilityEstimator: device='meta'"),
    (dict(verbose=0.5), "The 'verbose' parameter of ReachabilityEstimator must be an int"),
])
def test_reachability_settings_name_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        ReachabilityEstimator(**{**CRAM, **params}).fit(TARGETS)


def test_refit_with_other_settings_clears_the_old_attributes():
    est = _quiet_fit(AttentionRankEstimator(**QUICK_FIT, rank_grid=[1, 2]), X_TASK, Y_TASK)
    assert hasattr(est, "sweep_") and hasattr(est, "excess_tol_")
    _quiet_fit(est.set_params(rank_grid=None), X_TASK, Y_TASK)
    for name in ("sweep_", "excess_tol_", "floor_reached_", "reference_risk_"):
        assert not hasattr(est, name), name
    assert est.rank_ == 5
    # a refit that fails leaves nothing of the earlier fit behind either
    with pytest.raises(ValueError):
        est.set_params(rank=99).fit(X_TASK, Y_TASK)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_energy_rank_refit_from_data_to_recovery_clears_data_attributes():
    est = EnergyEffectiveRank(method="data", value_map=TASK_INFO.value_map).fit(X_TASK, Y_TASK)
    assert hasattr(est, "fit_")
    _quiet_fit(est.set_params(method="recovery", value_map=None,
                              student=AttentionRankEstimator(**QUICK_FIT)), X_TASK, Y_TASK)
    assert not hasattr(est, "fit_") and not hasattr(est, "x_scale_")
    assert hasattr(est, "student_")


@pytest.mark.parametrize("est, data", [
    (AttentionRankEstimator(max_epochs=0), (X_TASK, Y_TASK)),
    (EnergyEffectiveRank(ridge=-1.0), (X_TASK, Y_TASK)),
    (ReachabilityEstimator(max_epochs=0), (TARGETS,)),
])
def test_parameter_errors_name_the_estimator_and_the_parameter(est, data):
    name = type(est).__name__
    bad = (r"'ridge' parameter of EnergyEffectiveRank must be a float in the range "
           r"\[0\.0, inf\)\. Got -1\.0 instead\.") if name == "EnergyEffectiveRank" else (
        rf"'max_epochs' parameter of {name} must be an int in the range \[1, inf\)\. Got 0 "
        r"instead\.")
    with pytest.raises(InvalidParameterError, match=f"^The {bad}$"):
        est.fit(*data)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(rank=0), "The 'rank' parameter .* must be None or an int in the range .* Got 0"),
        (dict(rank=6), r"rank=6 exceeds the token dimension d = 5"),
        (dict(attention="fixed", rank=5), r"rank=5 exceeds the sequence length L = 4"),
        (dict(rank_grid=[1, 2, 9]), r"rank 9 in rank_grid exceeds the token dimension d = 5"),
        (dict(rank_grid=[0, 1]), "every entry of rank_grid must be an integer >= 1"),
        (dict(rank_grid=[]), "rank_grid must be a non-empty"),
        (dict(rank_grid=[1, 1]), "duplicates"),
        (dict(rank_grid=[1, 2], rank=2), "either rank .* or rank_grid"),
        (dict(rank=2.5), "The 'rank' parameter .* must be None or an int"),
        (dict(attention="cosine"), "The 'attention' parameter .* must be a str among .* Got "
                                   "'cosine' instead"),
        (dict(optimizer="lion"), "^AttentionRankEstimator: unknown optimizer 'lion'"),
        (dict(lr=-1.0), r"The 'lr' parameter .* must be a float in the range \(0\.0, inf\)"),
        (dict(max_epochs=0), r"The 'max_epochs' parameter .* range \[1, inf\)"),
        (dict(batch_size=0), "The 'batch_size' parameter .* Got 0 instead"),
        (dict(validation_fraction=1.5, rank_grid=[1]),
         r"The 'validation_fraction' parameter .* must be a float in the range \[0\.0, 0\.9\]"),
        (dict(noise_floor=-0.1), r"The 'noise_floor' parameter .* None or a float in the range "
                                 r"\[0\.0, inf\)"),
        (dict(device="tpu:9"), "^AttentionRankEstimator: unknown device"),
        (dict(verbose=-1), "The 'verbose' parameter .* Got -1 instead"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        _fit_few(X_FEW, Y_FEW, **params)
