"""Bad input gets a ValueError that names the problem, never a torch trace."""

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator, TrainingDivergedError
from intrinsic_rank.datasets import make_attention_task

X, Y = make_attention_task("linear", n_samples=60, seq_len=4, d=5, rank=2, random_state=0)
FAST = dict(max_epochs=2, random_state=0)


def _fit(X_, Y_, **params):
    return AttentionRankEstimator(**{**FAST, **params}).fit(X_, Y_)


@pytest.mark.parametrize(
    "X_, Y_, match",
    [
        (X[0, 0], Y, r"X must be 2-D .* got an array of shape \(5,\)\. Reshape your data"),  # 1-D X, not printed
        (X[..., None], Y, "X must be 2-D .* or 3-D .*; got an array with 4 dimensions"),
        (X, Y[:50], "different numbers of samples: 60 and 50"),
        (X, Y[:, :3], "different sequence lengths: 4 and 3"),
        (np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X), Y, "X contains NaN"),
        (X, np.where(np.arange(Y.size).reshape(Y.shape) == 3, np.inf, Y), "Y contains infinity"),
        (X[:0], Y[:0], "minimum of 1 is required|empty"),
        (X, None, "requires y to be passed"),
        (np.full(X.shape, "a", dtype=object), Y, "could not convert"),
    ],
)
def test_bad_arrays(X_, Y_, match):
    with pytest.raises(ValueError, match=match):
        _fit(X_, Y_)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(rank=0), "rank must be an integer >= 1; got 0"),
        (dict(rank=6), r"rank=6 exceeds the token dimension d = 5"),
        (dict(attention="fixed", rank=5), r"rank=5 exceeds the sequence length L = 4"),
        (dict(rank_grid=[1, 2, 9]), r"rank 9 in rank_grid exceeds the token dimension d = 5"),
        (dict(rank_grid=[0, 1]), "every entry of rank_grid must be an integer >= 1"),
        (dict(rank_grid=[]), "rank_grid must be a non-empty"),
        (dict(rank_grid=[1, 1]), "duplicates"),
        (dict(rank_grid=[1, 2], rank=2), "either rank .* or rank_grid"),
        (dict(rank=2.5), "rank must be an integer"),
        (dict(attention="cosine"), "unknown attention 'cosine'"),
        (dict(optimizer="lion"), "unknown optimizer 'lion'"),
        (dict(lr=-1.0), r"lr must be a finite real number in \(0.0, inf\)"),
        (dict(max_epochs=0), "max_epochs must be an integer >= 1"),
        (dict(batch_size=0), "batch_size must be an integer >= 1"),
        (dict(validation_fraction=1.5, rank_grid=[1]), "validation_fraction must be a finite real number in"),
        (dict(noise_floor=-0.1), "noise_floor must be a finite real number in"),
        (dict(device="tpu:9"), "unknown device"),
        (dict(verbose=-1), "verbose must be an integer >= 0"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        _fit(X, Y, **params)


def test_sweep_needs_a_held_out_part():
    with pytest.raises(ValueError, match="at least 2 held-out sequences"):
        _fit(X[:1], Y[:1], rank_grid=[1, 2])


def test_predict_checks_shapes_against_fit():
    est = _fit(X, Y, rank=2)
    with pytest.raises(ValueError, match="sequences of length 3, but .* fitted on length 4"):
        est.predict(X[:, :3])
    with pytest.raises(ValueError, match="tokens of dimension 4, but .* fitted on dimension 5"):
        est.predict(X[:, :, :4])
    with pytest.raises(ValueError, match="X contains NaN"):
        est.predict(np.full_like(X, np.nan))


def test_divergent_training_stops_with_a_clear_error():
    with pytest.raises(TrainingDivergedError, match=r"training diverged at epoch \d+: the loss of rank\(s\) \[2\] is not finite"):
        _fit(X, Y, attention="linear", rank=2, lr=1e8, max_epochs=5)
    assert issubclass(TrainingDivergedError, FloatingPointError)


UNUSABLE_DEVICES = ["hpu", "privateuseone", "xla", "xpu", "vulkan", "ipu", "mkldnn"]
"""Device types torch names, each failing its own way in a CPU build (a missing module, an
operator with no kernel, an assertion, an internal assert)."""


@pytest.mark.parametrize("device", UNUSABLE_DEVICES)
def test_a_device_this_torch_cannot_use_is_one_value_error(device):
    from intrinsic_rank._validation import check_device

    with pytest.raises(ValueError) as raised:
        check_device(device)
    text = str(raised.value)
    assert text.startswith(f"device={device!r} is not available here (")
    assert text.endswith("; use 'cpu' or an available accelerator")
    assert "\n" not in text and len(text) < 220
    with pytest.raises(ValueError, match=f"device={device!r} is not available here"):
        _fit(X, Y, device=device)


@pytest.mark.parametrize("device", ["hpu", "xla"])
@pytest.mark.parametrize("command", [["sweep"], ["lm-geometry", "default"], ["head-ranks"],
                                     ["reproduce", "lm-geometry"]])
def test_every_command_refuses_an_unusable_device_before_any_work(tmp_path, capsys, device,
                                                                  command):
    """One line and exit 2, and nothing written: `reproduce` never caches a piece that ran
    on no device (it cached {"missing": "No module named 'torch.hpu'"})."""
    from intrinsic_rank.cli import main

    out = tmp_path / "out"
    assert main([*command, "--device", device, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"intrinsic-rank {command[0]}: error: device={device!r} is not available "
                   f"here ({err.split('here (', 1)[1].rsplit(');', 1)[0]}); use 'cpu' or an "
                   "available accelerator")
    assert not out.exists()


def test_cuda_request_without_gpu_is_clear():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="no CUDA device is available"):
        _fit(X, Y, device="cuda")
