"""``device="cuda"``: GPU fits agree with CPU fits, and a missing GPU is a clear error.

The GPU tests run only where CUDA is available (not in CI); the error tests
run everywhere, with CUDA hidden on a GPU machine.
"""

import numpy as np
import pytest
import torch

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank, ReachabilityEstimator
from intrinsic_rank.datasets import make_attention_task, make_random_targets

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

# CPU and GPU kernels round differently (and the CPU has its own short-row
# softmax); over a few epochs of Adam the difference stays near 1e-6 for
# outputs of order 1, far inside this tolerance.
TOL = dict(rtol=1e-3, atol=1e-3)


def softmax_task():
    return make_attention_task("softmax", n_samples=256, seq_len=4, d=6, rank=2,
                               random_state=0)


def linear_task():
    return make_attention_task("linear", n_samples=256, seq_len=4, d=6, rank=2,
                               random_state=0)


def targets():
    return make_random_targets(4, 4, vocab_size=64, random_state=0)


def on_cuda(module):
    return {p.device.type for p in module.parameters()} == {"cuda"}


@needs_cuda
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_attention_rank_estimator_on_cuda_matches_cpu():
    X, Y = softmax_task()
    params = dict(attention="softmax", rank_grid=[1, 2, 3], max_epochs=20, random_state=0)
    cpu = AttentionRankEstimator(**params).fit(X, Y)
    gpu = AttentionRankEstimator(**params, device="cuda").fit(X, Y)
    assert on_cuda(gpu.net_.module_)
    assert gpu.rank_ == cpu.rank_
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), **TOL)
    np.testing.assert_allclose(gpu.kernels_, cpu.kernels_, **TOL)
    np.testing.assert_allclose(
        [rec["heldout_risk"] for rec in gpu.sweep_],
        [rec["heldout_risk"] for rec in cpu.sweep_], **TOL)
    np.testing.assert_allclose(gpu.realized_mixer(X[:8]), cpu.realized_mixer(X[:8]), **TOL)


@needs_cuda
def test_energy_effective_rank_recovery_on_cuda_matches_cpu():
    X, Y = linear_task()
    def student(device):
        return AttentionRankEstimator(attention="linear", max_epochs=20, device=device)

    params = dict(method="recovery", attention="linear", random_state=0)
    cpu = EnergyEffectiveRank(**params, student=student("cpu")).fit(X, Y)
    gpu = EnergyEffectiveRank(**params, student=student("cuda")).fit(X, Y)
    assert on_cuda(gpu.net_.module_)
    assert gpu.energy_effective_rank_ == pytest.approx(cpu.energy_effective_rank_, rel=1e-3)
    assert gpu.mixer_energy_rank_ == pytest.approx(cpu.mixer_energy_rank_, rel=1e-3)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), **TOL)


@needs_cuda
def test_reachability_estimator_on_cuda_matches_cpu():
    X = targets()
    params = dict(n_memory=2, max_epochs=150, patience=50, n_radius_prompts=16,
                  random_state=0)
    cpu = ReachabilityEstimator(**params).fit(X)
    gpu = ReachabilityEstimator(**params, device="cuda").fit(X)
    assert gpu.net_.module_.memory.device.type == "cuda"
    # the radius prompts are drawn on the CPU: the same states, up to rounding
    assert gpu.geometry_.radius == pytest.approx(cpu.geometry_.radius, rel=1e-3)
    assert gpu.geometry_.slope_bound == pytest.approx(cpu.geometry_.slope_bound, rel=1e-3)
    # cramming stops at discrete events (exact match, patience), so a rounding
    # difference can end a target a step earlier: compare outcomes, not steps
    outputs = gpu.predict(X)
    np.testing.assert_array_equal(outputs[gpu.reached_], X[gpu.reached_])
    assert np.mean(outputs == cpu.predict(X)) >= 0.9
    assert abs(gpu.accessibility_ - cpu.accessibility_) <= 0.25  # one target of 4


# -- without a GPU ------------------------------------------------------------------


def fit_calls():
    X, Y = linear_task()
    ids = targets()
    return {
        "AttentionRankEstimator": lambda device: AttentionRankEstimator(
            attention="linear", rank=1, max_epochs=1, device=device).fit(X, Y),
        "EnergyEffectiveRank": lambda device: EnergyEffectiveRank(
            method="recovery", student=AttentionRankEstimator(
                attention="linear", max_epochs=1, device=device)).fit(X, Y),
        "ReachabilityEstimator": lambda device: ReachabilityEstimator(
            max_epochs=1, n_radius_prompts=1, device=device).fit(ids),
    }


@pytest.mark.parametrize("name", sorted(fit_calls()))
def test_cuda_without_a_gpu_is_a_clear_error(name, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    fit = fit_calls()[name]
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(ValueError, match="device='cuda' was requested but no CUDA device"):
            fit(device)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        fit("tpu")


def test_the_recovery_student_rejects_an_unknown_device():
    from intrinsic_rank import EnergyEffectiveRank
    from intrinsic_rank.datasets import make_attention_task

    X, Y = make_attention_task("linear", n_samples=64, seq_len=4, d=3, rank=1, random_state=0)
    # the device is the student's; EnergyEffectiveRank takes none of its own
    with pytest.raises(ValueError, match="unknown device"):
        EnergyEffectiveRank(student=AttentionRankEstimator(attention="linear", device="tpu9")).fit(X, Y)
