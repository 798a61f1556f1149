"""scikit-learn's common estimator checks, run for real on cheap settings.

Every public estimator (and the ``SequenceScaler`` transformer) is discovered from
``intrinsic_rank.estimators.__all__`` and checked under each entry of ``CHEAP_SETTINGS``; ``SEQUENCE_ONLY_SETTINGS``
(training-free fits that need per-token targets) get our 3-D checks only. The common checks feed 2-D
``X``; the estimators read it as ``(n, L)`` scalar tokens (``d = 1``), so the
attention rungs use rank 1 and the fixed-operator rung sweeps operator ranks.
Our own checks on 3-D sequence data follow. ``ReachabilityEstimator`` takes
integer token ids; its ``categorical`` and ``positive_only`` tags make the
common checks feed it non-negative integers, and its own tests are in
``test_reachability.py``.

Expected failures: none. (``check_array_api_input`` is skipped by scikit-learn
itself unless ``SCIPY_ARRAY_API=1`` is set; it is not silenced here.)
"""

import os

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import intrinsic_rank.estimators as estimators_module
from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators._inputs import SequenceRegressorMixin

CHEAP = dict(max_epochs=3, batch_size=64, random_state=0)
# EnergyEffectiveRank's recovery student is a parameter with its own settings
CHEAP_STUDENT = dict(max_epochs=3, batch_size=64)

CHEAP_SETTINGS = {
    "AttentionRankEstimator": [
        dict(attention="softmax", **CHEAP),
        dict(attention="linear", rank_grid=[1], **CHEAP),
        dict(attention="block", rank=1, **CHEAP),
        dict(attention="fixed", rank_grid=[1, 2], **CHEAP),
        # a causal rotary student (the heads of rotary LMs); head_dim 2 fits scalar tokens
        dict(attention="softmax", causal=True, positional="rope", rope_theta=100.0,
             student_options={"head_dim": 2}, rank=1, **CHEAP),
    ],
    "EnergyEffectiveRank": [
        dict(method="recovery", attention="softmax", random_state=0,
             student=AttentionRankEstimator(attention="softmax", **CHEAP_STUDENT)),
        dict(method="recovery", attention="fixed", random_state=0,
             student=AttentionRankEstimator(attention="fixed", **CHEAP_STUDENT)),
    ],
}

# Settings that need per-token (3-D) targets, which scikit-learn's common checks
# never feed (they pass 2-D X with a 1-D y): the training-free fits read the
# token mixer from per-token equations. They get our own 3-D checks below.
SEQUENCE_ONLY_SETTINGS = {
    "EnergyEffectiveRank": [
        dict(method="data", attention="linear"),
        dict(method="data", attention="fixed"),
    ],
}

# A tiny random causal LM (vocab 32, d 16, one layer; saved with
# torch.manual_seed(0)) is enough for the contract checks: they test the API,
# not whether cramming succeeds, and the ids in their data stay below 32. It is
# passed as a file path: a module instance would fail check_estimators_overwrite_params
# only because two pickles of equal torch modules differ byte for byte.
TINY_LM = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                       "data", "tiny_lm.pt"))
CHEAP_SETTINGS["ReachabilityEstimator"] = [
    dict(model=TINY_LM, n_memory=1, max_epochs=4, patience=4, n_radius_prompts=8,
         random_state=0),
    dict(model=TINY_LM, n_memory=2, max_epochs=3, chunk_size=4, n_radius_prompts=8,
         random_state=0),
]

# A transformer, not a sequence regressor: nothing to train, so no cheap settings beyond its
# own switches (and no 3-D regressor checks below; its own tests are in test_sequence_scaler.py)
CHEAP_SETTINGS["SequenceScaler"] = [dict(), dict(with_mean=True), dict(with_std=False)]

EXPECTED_FAILED_CHECKS = {}


def all_estimators():
    """Every public estimator class of the package."""
    return [
        getattr(estimators_module, name)
        for name in estimators_module.__all__
        if isinstance(getattr(estimators_module, name), type)
        and issubclass(getattr(estimators_module, name), BaseEstimator)
    ]


def cheap_instances():
    for cls in all_estimators():
        for params in CHEAP_SETTINGS[cls.__name__]:
            yield cls(**params)


def test_every_estimator_has_cheap_settings():
    assert {cls.__name__ for cls in all_estimators()} == set(CHEAP_SETTINGS)


# The contract checks train for a few epochs on scikit-learn's random data (or 120
# sequences): the estimator then rightly warns that its estimated noise floor is not the
# floor and that the selected student explains almost none of Y. Those warnings are not
# what these tests check (the API is), so these tests alone ignore them; the tests of the
# warnings themselves are in test_evidence.py and test_callbacks.py.
_CHEAP_FIT_WARNINGS = [
    pytest.mark.filterwarnings("ignore:the estimated noise floor .* is not the floor"
                               ":sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore:the selected .* explains .* of the held-out variance"
                               ":UserWarning"),
    # three epochs on the checks' data sets (a constant target, y near 1,800) move
    # the loss by less than LOSS_FALL_RTOL: the checks test the API, not learning
    pytest.mark.filterwarnings("ignore:the training loss never fell"
                               ":sklearn.exceptions.ConvergenceWarning"),
]


@_CHEAP_FIT_WARNINGS[0]
@_CHEAP_FIT_WARNINGS[1]
@_CHEAP_FIT_WARNINGS[2]
@parametrize_with_checks(
    list(cheap_instances()),
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS.get(type(est).__name__, {}),
)
def test_sklearn_common_checks(estimator, check):
    check(estimator)


# -- scikit-learn's own parameter validation -----------------------------------------
@pytest.mark.parametrize("estimator", [cls() for cls in all_estimators()]
                         + list(cheap_instances()), ids=repr)
def test_validate_params_accepts_every_estimator_as_built(estimator):
    # _parameter_constraints is in scikit-learn's own form: its checker runs (it raised
    # "Unknown constraint type" on the home-made scheme) and accepts the defaults and
    # every cheap setting
    assert estimator._validate_params() is None
    assert set(type(estimator)._parameter_constraints) == set(estimator.get_params(deep=False))


@pytest.mark.parametrize("estimator", [cls() for cls in all_estimators()], ids=repr)
def test_validate_params_refuses_a_value_of_the_wrong_type(estimator):
    from sklearn.utils._param_validation import InvalidParameterError

    name = next(name for name, forms in type(estimator)._parameter_constraints.items()
                if forms != "no_validation")
    estimator.set_params(**{name: object()})
    with pytest.raises(InvalidParameterError, match=f"^The '{name}' parameter of "
                                                    f"{type(estimator).__name__} must be "):
        estimator._validate_params()


@pytest.mark.parametrize("estimator", [cls() for cls in all_estimators()], ids=repr)
def test_scikit_learns_check_param_validation(estimator):
    # scikit-learn's own check: every parameter has a constraint, and fit refuses a
    # value of the wrong type or outside the range with scikit-learn's message
    from sklearn.utils.estimator_checks import check_param_validation

    check_param_validation(type(estimator).__name__, estimator)


def test_scikit_learns_fit_context_runs_our_checks():
    # a tool that wraps fit in scikit-learn's _fit_context calls _validate_params()
    from sklearn.base import _fit_context as fit_context
    from sklearn.utils._param_validation import InvalidParameterError

    from intrinsic_rank import SequenceScaler

    fit = fit_context(prefer_skip_nested_validation=True)(SequenceScaler.fit)
    X = np.arange(24.0).reshape(2, 4, 3)
    assert fit(SequenceScaler(), X).scale_.shape == (3,)
    with pytest.raises(InvalidParameterError, match="'with_mean' parameter of SequenceScaler"):
        fit(SequenceScaler(with_mean="yes"), X)


# -- our own checks on 3-D sequence data -------------------------------------------
@pytest.fixture(scope="module")
def sequences():
    X, Y = make_attention_task("softmax", n_samples=120, seq_len=4, d=5, rank=2, random_state=0)
    return X, Y


def sequence_instances():
    for cls in all_estimators():
        if not issubclass(cls, SequenceRegressorMixin):
            continue  # token-id estimators have their own tests
        settings = CHEAP_SETTINGS[cls.__name__] + SEQUENCE_ONLY_SETTINGS.get(cls.__name__, [])
        for params in settings:
            params = dict(params)
            if params.get("rank_grid") == [1, 2] or params.get("rank_grid") == [1]:
                params["rank_grid"] = [1, 3]
            yield cls(**params)


@_CHEAP_FIT_WARNINGS[0]
@_CHEAP_FIT_WARNINGS[1]
@pytest.mark.parametrize("estimator", list(sequence_instances()), ids=repr)
def test_3d_fit_returns_self_and_is_idempotent(estimator, sequences):
    X, Y = sequences
    assert estimator.fit(X, Y) is estimator
    first = estimator.predict(X)
    assert first.shape == Y.shape
    np.testing.assert_array_equal(estimator.fit(X, Y).predict(X), first)


@_CHEAP_FIT_WARNINGS[0]
@_CHEAP_FIT_WARNINGS[1]
@pytest.mark.parametrize("estimator", list(sequence_instances()), ids=repr)
def test_3d_seed_reproducible_and_pickle_round_trip(estimator, sequences):
    import pickle

    from sklearn.base import clone

    X, Y = sequences
    a = clone(estimator).fit(X, Y)
    b = clone(estimator).fit(X, Y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    loaded = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(loaded.predict(X), a.predict(X))
    if getattr(estimator, "method", "recovery") == "data":
        return  # training-free: there is no randomness to seed
    other = clone(estimator).set_params(random_state=1).fit(X, Y)
    assert not np.allclose(other.predict(X), a.predict(X))


@pytest.mark.parametrize("estimator", list(sequence_instances()), ids=repr)
def test_3d_unfitted_error(estimator, sequences):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        estimator.predict(sequences[0])
