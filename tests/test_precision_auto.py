"""``precision="auto"``: the measured choice, the float32 decision, and that it changes no answer.

The matrix compares ``auto`` (with bfloat16 forced on through ``INTRINSIC_RANK_BF16=1``,
so that the bfloat16 path runs whatever this machine measures) against ``float32``.
A teacher is one entry of ``TEACHERS``; add entries to rerun the check on new ones.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators import _polish, _precision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = "/work/main"  # the code path before precision="auto" (skipped when absent)

DEVICE = os.environ.get("INTRINSIC_RANK_TEST_DEVICE", "cpu")
"""Device of the matrix (``gpu_check.sh`` sets ``cuda``)."""

FLOOR_RTOL = 0.05
"""Relative tolerance of the noise floor (``noise_floor_``) of ``auto`` against float32."""


@pytest.fixture
def bf16(monkeypatch):
    """Force the measurements' answer: ``bf16(True)`` fast everywhere, ``bf16(False)`` nowhere."""
    def force(fast):
        monkeypatch.setenv(_precision.ENV_VAR, "1" if fast else "0")
        _precision.clear_cache()
    yield force
    _precision.clear_cache()


def _fit(X, Y, **params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = AttentionRankEstimator(**params).fit(X, Y)
    return est, [str(w.message) for w in caught]


# -- the measurement ----------------------------------------------------------------
def test_device_measurement_is_cached_and_overridable(monkeypatch):
    monkeypatch.delenv(_precision.ENV_VAR, raising=False)
    _precision.clear_cache()
    first = _precision.device_bfloat16("cpu")
    assert first is _precision.device_bfloat16("cpu")  # once per process
    assert first["fast"] == (first["speedup"] >= _precision.SPEEDUP_NEEDED)
    monkeypatch.setenv(_precision.ENV_VAR, "off")
    assert _precision.device_bfloat16("cpu")["fast"] is False
    monkeypatch.setenv(_precision.ENV_VAR, "on")
    assert _precision.device_bfloat16("cpu")["fast"] is True
    monkeypatch.setenv(_precision.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="INTRINSIC_RANK_BF16 must be"):
        _precision.device_bfloat16("cpu")
    _precision.clear_cache()


def test_problem_measurement_leaves_the_random_state_alone(monkeypatch):
    import torch

    monkeypatch.delenv(_precision.ENV_VAR, raising=False)
    _precision.clear_cache()
    w = torch.randn(32, 32, requires_grad=True)

    def step(precision):
        torch.randn(3)  # a draw inside the step must not leak out
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            (torch.ones(8, 32) @ w).float().sum().backward()

    torch.manual_seed(5)
    expected = torch.randn(4)
    torch.manual_seed(5)
    result = _precision.problem_bfloat16(("test", 32), step, "cpu")
    assert torch.equal(torch.randn(4), expected)
    assert result["speedup"] > 0 and isinstance(result["fast"], bool)
    _precision.clear_cache()


# -- float32 is today's path, bit for bit -------------------------------------------
_MAIN_FIT = """
import json, sys
import numpy as np
from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
cases = json.loads(sys.argv[1])
out = []
for kind, seed in cases:
    X, Y = make_attention_task(kind, n_samples=160, seq_len=5, d=6, rank=2, noise=0.1,
                               random_state=seed)
    est = AttentionRankEstimator(attention=kind, rank_grid=[1, 2, 3, 5], max_epochs=25,
                                 random_state=seed).fit(X, Y)
    out.append({"rank": est.rank_, "risks": [r["heldout_risk"] for r in est.sweep_],
                "kernel": np.asarray(est.kernels_).ravel().tolist()})
print(json.dumps(out))
"""
_CASES = [["linear", 0], ["softmax", 2]]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.skipif(not os.path.isdir(os.path.join(MAIN, "intrinsic_rank")),
                    reason="the main checkout (the float32 path before 'auto') is absent")
def test_float32_reproduces_the_previous_code_path_bit_for_bit():
    env = dict(os.environ, PYTHONPATH=MAIN, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _MAIN_FIT, json.dumps(_CASES)], env=env,
                          capture_output=True, text=True, check=True, cwd=MAIN)
    expected = json.loads(done.stdout.strip().splitlines()[-1])
    for (kind, seed), old in zip(_CASES, expected):
        X, Y = make_attention_task(kind, n_samples=160, seq_len=5, d=6, rank=2, noise=0.1,
                                   random_state=seed)
        est = AttentionRankEstimator(attention=kind, rank_grid=[1, 2, 3, 5], max_epochs=25,
                                     random_state=seed, precision="float32").fit(X, Y)
        assert est.precision_ == "float32" and est.precision_polish_ is None
        assert est.rank_ == old["rank"]
        assert [r["heldout_risk"] for r in est.sweep_] == old["risks"]
        assert np.asarray(est.kernels_).ravel().tolist() == old["kernel"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_auto_without_fast_bfloat16_is_float32_exactly(bf16):
    bf16(False)
    X, Y = make_attention_task("linear", n_samples=160, seq_len=5, d=6, rank=2, noise=0.1,
                               random_state=4)
    params = dict(attention="linear", rank_grid=[1, 2, 6], max_epochs=20, random_state=4)
    auto = AttentionRankEstimator(**params).fit(X, Y)
    exact = AttentionRankEstimator(**params, precision="float32").fit(X, Y)
    assert auto.precision_ == "float32" and "no fast bfloat16" in auto.precision_reason_
    assert auto.net_.precision == "float32"
    assert [r["heldout_risk"] for r in auto.sweep_] == [r["heldout_risk"] for r in exact.sweep_]


def test_bfloat16_asked_without_fast_bfloat16_warns_and_trains_float32(bf16):
    bf16(False)
    X, Y = make_attention_task("softmax", n_samples=96, seq_len=4, d=4, rank=2,
                               random_state=0)
    with pytest.warns(UserWarning, match="precision='bfloat16' but cpu has no fast bfloat16"):
        est = AttentionRankEstimator(attention="softmax", rank=2, max_epochs=3,
                                     precision="bfloat16", random_state=0).fit(X, Y)
    assert est.precision_ == "float32" and est.net_.precision == "float32"
    assert "fell back to float32" in est.precision_reason_


# -- the float32 decision after bfloat16 training ------------------------------------
def test_class_choice_near_the_cut_is_redone():
    assert _polish.check_class_choice({"fixed": 0.5, "linear": 0.005, "softmax": 0.0}, 1.0,
                                      0.02) is None
    reason = _polish.check_class_choice({"fixed": 0.5, "linear": 0.025, "softmax": 0.0},
                                        1.0, 0.02)
    assert "linear 0.025" in reason


def test_a_decision_that_could_move_falls_back_to_float32(bf16):
    X, Y = make_attention_task("linear", n_samples=160, seq_len=5, d=6, rank=2, noise=0.1,
                               random_state=2)
    params = dict(attention="linear", rank_grid=[1, 2, 3, 6], max_epochs=30, random_state=2)
    probe, _ = _fit(X, Y, **params, precision="float32")
    # a tol at which rank 1's excess risk lies just under the threshold: a decision on edge
    params["tol"] = 1.02 * probe.sweep_[0]["excess_risk"] / probe.excess_tol_ * probe.tol
    bf16(True)
    auto, messages = _fit(X, Y, **params)
    exact, _ = _fit(X, Y, **params, precision="float32")
    polish = auto.precision_polish_
    assert polish["ranks"] == [1, 2] and polish["epochs"] == 10 and polish["fallback"]
    assert any("redone in float32" in m for m in messages)
    assert auto.precision_ == "float32" and "fell back" in auto.precision_reason_
    assert auto.rank_ == exact.rank_
    assert [r["heldout_risk"] for r in auto.sweep_] == [r["heldout_risk"] for r in exact.sweep_]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_clear_decision_keeps_bfloat16_and_float32_evaluations(bf16):
    bf16(True)
    X, Y = make_attention_task("linear", n_samples=256, seq_len=5, d=6, rank=2, noise=0.05,
                               random_state=3)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 4, 6], max_epochs=80,
                                 random_state=3).fit(X, Y)
    assert est.precision_ == "bfloat16" and est.precision_polish_["fallback"] is None
    assert est.rank_ == 2
    assert est.kernels_.dtype == np.float32
    # the reported risks are float32 evaluations of the final weights
    Y_pred = est.predict_per_rank(X)
    assert Y_pred.dtype == np.float64


# -- the matrix: same rank_, same class, floors within FLOOR_RTOL ---------------------
# teacher name -> (teacher kind, n_samples, seq_len, d, teacher rank, noise); every teacher
# is fitted with each class of CLASSES. "softmax-boundary" has a noisy rank-3 teacher whose
# third direction is hard to tell from the noise: near a rank boundary.
TEACHERS = {
    "linear": ("linear", 192, 5, 6, 2, 0.05),
    "softmax": ("softmax", 256, 5, 6, 2, 0.05),
    "softmax-boundary": ("softmax", 256, 5, 6, 3, 0.3),
}
CLASSES = ("fixed", "linear", "softmax")
SIZES = {"small": 1, "big": 2}  # n and d multiplied by it


def _compare(name, attention, size, seed, epochs):
    kind, n, L, d, r, noise = TEACHERS[name]
    n, d = n * SIZES[size], d * SIZES[size]
    X, Y = make_attention_task(kind, n_samples=n, seq_len=L, d=d, rank=r, noise=noise,
                               random_state=seed)
    limit = {"fixed": L, "auto": L}.get(attention, d)  # "auto" cuts the grid per class
    grid = sorted({rank for rank in (1, 2, 3, 4, limit) if rank <= limit})
    params = dict(attention=attention, rank_grid=grid, max_epochs=epochs, random_state=seed,
                  device=DEVICE)
    auto, _ = _fit(X, Y, **params)
    exact, _ = _fit(X, Y, **params, precision="float32")
    assert auto.rank_ == exact.rank_, (auto.precision_reason_, auto.precision_polish_)
    assert auto.attention_ == exact.attention_
    np.testing.assert_allclose(auto.noise_floor_, exact.noise_floor_, rtol=FLOOR_RTOL)
    return auto


@pytest.mark.parametrize("name,attention", [("linear", "linear"), ("softmax-boundary", "softmax"),
                                            ("linear", "fixed")])
def test_auto_changes_no_answer_small(bf16, name, attention):
    bf16(True)
    auto = _compare(name, attention, "small", seed=0, epochs=40)
    assert auto.precision_polish_ is not None or auto.precision_ == "float32"


def test_auto_class_choice_changes_no_answer_small(bf16):
    bf16(True)
    _compare("linear", "auto", "small", seed=1, epochs=40)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("attention", CLASSES)
@pytest.mark.parametrize("name", sorted(TEACHERS))
def test_auto_changes_no_answer_matrix(bf16, name, attention, size, seed):
    bf16(True)
    _compare(name, attention, size, seed=seed, epochs=150)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(TEACHERS))
def test_auto_class_choice_changes_no_answer_matrix(bf16, name, seed):
    bf16(True)
    _compare(name, "auto", "small", seed=seed, epochs=150)
