"""The students' training dtype: ``compute_dtype``, chosen by the device, and bfloat16 training."""

import numpy as np
import pytest
import torch

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators import _net as net_module
from intrinsic_rank.estimators._net import (
    COMPUTE_DTYPES,
    RankSweepNet,
    RankwiseMSELoss,
    resolve_compute_dtype,
    training_autocast,
)
from intrinsic_rank.nn import STUDENTS, make_student


def test_compute_dtypes_and_a_wrong_one():
    assert COMPUTE_DTYPES == ("auto", "float32", "bfloat16")
    for wrong in ("float16", "auto"):  # autocast takes a resolved dtype only
        with pytest.raises(ValueError, match="resolved compute dtype"):
            training_autocast(wrong, "cpu")
    with pytest.raises(ValueError, match="compute_dtype must be one of"):
        resolve_compute_dtype("float16", "cpu")


def test_auto_is_float32_on_the_cpu_and_an_explicit_request_is_kept():
    assert resolve_compute_dtype("auto", "cpu") == "float32"
    assert resolve_compute_dtype("float32", "cpu") == "float32"
    assert resolve_compute_dtype("bfloat16", "cpu") == "bfloat16"


@pytest.mark.parametrize("native,emulated,auto", [(True, True, "bfloat16"),
                                                  (False, True, "float32"),
                                                  (False, False, "float32")])
def test_auto_on_cuda_follows_the_device_capability(monkeypatch, native, emulated, auto):
    """The answer follows what the device supports (faked here: no GPU in the default run)."""
    support = {False: native, True: emulated}
    monkeypatch.setattr(net_module, "_cuda_bfloat16",
                        lambda device, including_emulation: support[including_emulation])
    assert resolve_compute_dtype("auto", "cuda:0") == auto
    assert resolve_compute_dtype("float32", "cuda:0") == "float32"
    if emulated:
        assert resolve_compute_dtype("bfloat16", "cuda:0") == "bfloat16"
    else:
        with pytest.raises(ValueError, match="compute_dtype='bfloat16' needs a device"):
            resolve_compute_dtype("bfloat16", "cuda:0")


@pytest.mark.parametrize("attention", ["linear", "softmax"])
def test_bfloat16_forward_is_close_and_gradients_stay_float32(attention):
    X = torch.randn(16, 6, 8, generator=torch.Generator().manual_seed(0))
    Y = torch.randn(16, 6, 8, generator=torch.Generator().manual_seed(1))
    student = make_student(attention, d=8, d_out=8, ranks=[1, 3, 8], seq_len=6)
    exact = student(X)
    with training_autocast("bfloat16", "cpu"):
        reduced = student(X)
    assert reduced.dtype == torch.bfloat16
    torch.testing.assert_close(reduced.float(), exact, atol=3e-2, rtol=3e-2)
    RankwiseMSELoss()(reduced.float(), Y).sum().backward()
    for parameter in student.parameters():
        assert parameter.dtype == parameter.grad.dtype == torch.float32
    # the masked columns still get no gradient
    for slot, r in enumerate(student.ranks):
        assert torch.all(student.query.grad[slot, :, r:] == 0)


@pytest.mark.parametrize("rank_major", [False, True])
def test_rankwise_loss_gradient_matches_autograd(rank_major):
    base = torch.randn(3, 5, 4, 2, dtype=torch.float64)
    y_pred = base.transpose(0, 1)  # (n, R, ...) stored rank-major, as the students return it
    y_pred = (y_pred if rank_major else y_pred.contiguous()).requires_grad_()
    y_true = torch.randn(5, 4, 2, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(RankwiseMSELoss(), (y_pred, y_true))
    expected = (y_pred - y_true.unsqueeze(1)).pow(2).mean(dim=(0, 2, 3))
    torch.testing.assert_close(RankwiseMSELoss()(y_pred, y_true), expected)
    # strided (rank-major) predictions give the same losses
    base = torch.randn(3, 5, 4, 2)
    torch.testing.assert_close(RankwiseMSELoss()(base.transpose(0, 1), y_true.float().detach()),
                               RankwiseMSELoss()(base.transpose(0, 1).contiguous(),
                                                 y_true.float().detach()))


def _net(compute_dtype):
    net = RankSweepNet(module=STUDENTS["softmax"], module__d=4, module__d_out=4,
                       module__ranks=[1, 2], module__seq_len=3, criterion=RankwiseMSELoss,
                       optimizer=torch.optim.Adam, lr=1e-3, max_epochs=1, batch_size=8,
                       train_split=None, compute_dtype=compute_dtype)
    return net.initialize()


@pytest.mark.parametrize("compute_dtype", ["float32", "bfloat16"])
def test_net_autocasts_training_only(compute_dtype):
    net = _net(compute_dtype)
    X = torch.randn(8, 3, 4)
    seen = []
    net.module_.register_forward_hook(lambda module, inputs, out: seen.append(out.dtype))
    net.module_.train()
    out = net.infer(X)
    assert out.dtype == torch.float32
    assert seen[-1] == (torch.bfloat16 if compute_dtype == "bfloat16" else torch.float32)
    net.forward(X, training=False)  # evaluation: always float32
    assert seen[-1] == torch.float32
    assert net.get_params()["compute_dtype"] == compute_dtype


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_default_trains_in_float32_on_the_cpu_bit_for_bit():
    X, Y = make_attention_task("linear", n_samples=160, seq_len=4, d=5, rank=2, noise=0.05,
                               random_state=2)
    params = dict(attention="linear", rank_grid=[1, 2, 5], max_epochs=20, random_state=4)
    default = AttentionRankEstimator(**params).fit(X, Y)
    explicit = AttentionRankEstimator(**params, compute_dtype="float32").fit(X, Y)
    assert default.compute_dtype_ == explicit.compute_dtype_ == "float32"
    assert default.net_.compute_dtype == "float32"
    assert np.array_equal(default.predict_per_rank(X), explicit.predict_per_rank(X))
    assert default.noise_floor_ == explicit.noise_floor_


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind,seed", [("softmax", 0), ("linear", 1)])
def test_bfloat16_training_finds_the_same_rank_on_a_teacher(kind, seed):
    X, Y = make_attention_task(kind, n_samples=384, seq_len=6, d=8, rank=3, noise=0.1,
                               random_state=seed)
    params = dict(attention=kind, rank_grid=list(range(1, 7)), max_epochs=60, random_state=seed)
    exact = AttentionRankEstimator(**params, compute_dtype="float32").fit(X, Y)
    reduced = AttentionRankEstimator(**params, compute_dtype="bfloat16").fit(X, Y)
    assert reduced.compute_dtype_ == "bfloat16" and reduced.net_.compute_dtype == "bfloat16"
    assert reduced.rank_ == exact.rank_
    risks = [rec["heldout_risk"] for rec in exact.sweep_]
    reduced_risks = [rec["heldout_risk"] for rec in reduced.sweep_]
    assert reduced_risks != risks  # it really ran in bfloat16
    np.testing.assert_allclose(reduced_risks, risks, rtol=0.05)


def test_an_unknown_compute_dtype_is_one_line():
    X, Y = make_attention_task("linear", n_samples=40, seq_len=3, d=3, rank=1, random_state=0)
    with pytest.raises(ValueError, match="The 'compute_dtype' parameter of "
                                         "AttentionRankEstimator must be a str among"):
        AttentionRankEstimator(rank=1, max_epochs=1, compute_dtype="float16").fit(X, Y)


def test_rankwise_loss_reusing_its_residual_gives_the_same_gradient_once():
    base = torch.randn(3, 5, 4, 2, dtype=torch.float64)
    y_true = torch.randn(5, 4, 2, dtype=torch.float64)
    grads = []
    for reuse in (False, True):
        for rank_major in (False, True):
            y_pred = base.transpose(0, 1)
            y_pred = (y_pred if rank_major else y_pred.contiguous()).requires_grad_()
            RankwiseMSELoss(reuse_residual=reuse)(y_pred, y_true).sum().backward()
            grads.append(y_pred.grad)
    for grad in grads[1:]:
        torch.testing.assert_close(grad, grads[0], rtol=0, atol=0)
    # the residual held the gradient: a second backward through the graph is refused
    y_pred = base.transpose(0, 1).requires_grad_()
    loss = RankwiseMSELoss(reuse_residual=True)(y_pred, y_true).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
