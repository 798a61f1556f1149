import numpy as np
import pytest

from intrinsic_rank.datasets import (
    attention_mixer,
    make_attention_task,
    make_fixed_operator_task,
)


def test_fixed_operator_ground_truth_and_noise_floor():
    X, Y, info = make_fixed_operator_task(
        n_samples=4000, seq_len=6, d=5, d_out=3, rank=2, noise=0.3,
        random_state=0, return_info=True,
    )
    assert X.shape == (4000, 6, 5) and Y.shape == (4000, 6, 3)
    s = np.linalg.svd(info.operator, compute_uv=False)
    np.testing.assert_allclose(s[:2], np.sqrt(3.0))  # ||A||_F^2 = L, equal values
    np.testing.assert_allclose(s[2:], 0, atol=1e-12)
    signal = np.einsum("lk,nkd,de->nle", info.operator, X, info.value_map)
    residual = Y - signal
    assert info.noise_floor == pytest.approx(0.09)
    assert np.mean(residual**2) == pytest.approx(0.09, rel=0.03)
    assert np.mean(signal**2) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("kind", ["linear", "softmax"])
def test_attention_teacher_kernel_rank_scale_and_signal(kind):
    X, Y, info = make_attention_task(
        kind, n_samples=3000, seq_len=5, d=8, rank=3, noise=0.2,
        kernel_scale=1.5, random_state=1, return_info=True,
    )
    s = np.linalg.svd(info.kernel, compute_uv=False)
    np.testing.assert_allclose(s[:3], 1.5 / np.sqrt(3))
    np.testing.assert_allclose(s[3:], 0, atol=1e-12)
    assert np.linalg.norm(info.kernel) == pytest.approx(1.5)
    signal = attention_mixer(X, info.kernel, kind) @ X @ info.value_map
    assert np.mean((Y - signal) ** 2) == pytest.approx(0.04, rel=0.05)
    assert np.mean(signal**2) == pytest.approx(1.0, rel=0.1)


def test_decaying_and_explicit_spectra():
    _, _, info = make_attention_task(
        rank=4, d=8, spectrum="decaying", decay=0.5, random_state=0,
        return_info=True, n_samples=10,
    )
    ratios = info.singular_values[1:] / info.singular_values[:-1]
    np.testing.assert_allclose(ratios, 0.5)
    _, _, info = make_attention_task(
        rank=2, d=8, spectrum=[1.0, 3.0], random_state=0, return_info=True,
        n_samples=10,
    )
    assert info.singular_values[0] / info.singular_values[1] == pytest.approx(3.0)


def test_seeded_and_prefix_stable():
    X1, Y1 = make_attention_task("softmax", n_samples=50, random_state=3)
    X2, Y2 = make_attention_task("softmax", n_samples=200, random_state=3)
    np.testing.assert_array_equal(X1, X2[:50])
    np.testing.assert_array_equal(Y1, Y2[:50])
    X3, _ = make_attention_task("softmax", n_samples=50, random_state=4)
    assert not np.allclose(X1, X3)


def test_softmax_mixer_rows_are_distributions():
    X, _, info = make_attention_task(
        "softmax", n_samples=20, seq_len=7, d=4, rank=2, random_state=0,
        return_info=True,
    )
    M = attention_mixer(X, info.kernel, "softmax")
    np.testing.assert_allclose(M.sum(-1), 1.0)
    assert (M > 0).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rank=0), "rank must be an integer >= 1"),
        (dict(rank=9, d=8), "rank must be <= 8"),
        (dict(kind="cubic"), "unknown teacher kind"),
        (dict(noise=-1.0), "noise must be"),
        (dict(n_samples=0), "n_samples"),
        (dict(spectrum="flat"), "unknown spectrum"),
        (dict(rank=2, spectrum=[1.0]), "spectrum must hold rank=2"),
        (dict(kernel_scale=0.0), "kernel_scale must be > 0"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_attention_task(**kwargs)


def test_fixed_rank_cannot_exceed_length():
    with pytest.raises(ValueError, match="rank must be <= 4"):
        make_fixed_operator_task(seq_len=4, rank=5)
