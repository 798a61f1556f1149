"""The bfloat16 training path of the rank-batched students, and ``precision="auto"``."""

import numpy as np
import pytest
import torch

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators._batching import (PRECISIONS, RankwiseMSELoss,
                                                 training_autocast)
from intrinsic_rank.estimators._net import RankSweepNet
from intrinsic_rank.nn import STUDENTS, make_student


def test_precisions_and_a_wrong_one():
    assert PRECISIONS == ("float32", "bfloat16", "auto")
    with pytest.raises(ValueError, match="precision must be one of"):
        training_autocast("float16", "cpu")
    with pytest.raises(ValueError, match="resolved"):
        training_autocast("auto", "cpu")


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


def _net(precision):
    net = RankSweepNet(module=STUDENTS["softmax"], module__d=4, module__d_out=4, module__ranks=[1, 2], module__seq_len=3,
                       criterion=RankwiseMSELoss, optimizer=torch.optim.Adam, lr=1e-3,
                       max_epochs=1, batch_size=8, train_split=None, precision=precision)
    return net.initialize()


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_net_autocasts_training_only(precision):
    net = _net(precision)
    X = torch.randn(8, 3, 4)
    seen = []
    net.module_.register_forward_hook(lambda module, inputs, out: seen.append(out.dtype))
    net.module_.train()
    out = net.infer(X)
    assert out.dtype == torch.float32
    assert seen[-1] == (torch.bfloat16 if precision == "bfloat16" else torch.float32)
    net.forward(X, training=False)  # evaluation: always float32
    assert seen[-1] == torch.float32
    assert net.get_params()["precision"] == precision


class _Bfloat16Estimator(AttentionRankEstimator):
    """The estimator with its nets trained in bfloat16 (what its ``precision`` would set)."""

    def _build_net(self, *args, **kwargs):
        net = super()._build_net(*args, **kwargs)
        net.precision = "bfloat16"
        return net


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind,seed", [("softmax", 0), ("linear", 1)])
def test_bfloat16_training_finds_the_same_rank_on_a_teacher(kind, seed):
    X, Y = make_attention_task(kind, n_samples=384, seq_len=6, d=8, rank=3, noise=0.1,
                               random_state=seed)
    params = dict(attention=kind, rank_grid=list(range(1, 7)), max_epochs=60, random_state=seed)
    exact = AttentionRankEstimator(**params, precision="float32").fit(X, Y)
    reduced = _Bfloat16Estimator(**params, precision="float32").fit(X, Y)
    assert reduced.rank_ == exact.rank_
    risks = [rec["heldout_risk"] for rec in exact.sweep_]
    np.testing.assert_allclose([rec["heldout_risk"] for rec in reduced.sweep_], risks,
                               rtol=0.05)


def test_the_estimator_trains_in_bfloat16_when_asked_and_keeps_rank(monkeypatch):
    monkeypatch.setenv("INTRINSIC_RANK_BF16", "1")  # the suite's default is "0"
    from intrinsic_rank import AttentionRankEstimator
    from intrinsic_rank.datasets import make_attention_task

    X, Y = make_attention_task("linear", n_samples=300, seq_len=5, d=6, rank=2, noise=0.05,
                               random_state=3)
    params = dict(attention="linear", rank_grid=[1, 2, 3, 4], max_epochs=120, random_state=1)
    fp32 = AttentionRankEstimator(**params, precision="float32").fit(X, Y)
    bf16 = AttentionRankEstimator(**params, precision="bfloat16").fit(X, Y)
    assert bf16.net_.precision == "bfloat16" and fp32.net_.precision == "float32"
    assert bf16.rank_ == fp32.rank_ == 2
    risks = [[row["heldout_risk"] for row in est.sweep_] for est in (fp32, bf16)]
    assert risks[0] != risks[1]  # it really ran in bfloat16
    assert np.allclose(risks[0], risks[1], rtol=0.1)
    with pytest.raises(ValueError, match="AttentionRankEstimator: precision must be one of"):
        AttentionRankEstimator(**params, precision="float16").fit(X, Y)
