"""The arithmetic of one head (intrinsic_rank.nn._head_math), against transformers' own.

Partial rotation against GPT-NeoX's ``apply_rotary_pos_emb``, the norms against Qwen3's,
OLMo-2's and Gemma 3's RMS norm modules, the mask against transformers' sliding-window
mask function; and the rotary student's options refused in one line.
"""

import numpy as np
import pytest
import torch

from intrinsic_rank.nn import (
    HeadNorm,
    RotarySoftmaxStudent,
    rope_frequencies,
    rope_tables,
    rotate,
    soft_cap,
    visible_keys,
)

tf = pytest.importorskip("transformers")


def test_a_partial_rotation_is_gpt_neox_s_and_passes_the_other_channels():
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 7, 8, generator=generator, dtype=torch.float64).unbind(0)
    cos, sin = rope_tables(rope_frequencies(4, 100.0), 7, scaling=1.3)
    theirs = apply_rotary_pos_emb(q[None], k[None], cos[None], sin[None])
    torch.testing.assert_close(rotate(q, cos, sin), theirs[0][0])
    torch.testing.assert_close(rotate(k, cos, sin), theirs[1][0])
    assert torch.equal(rotate(q, cos, sin)[..., 4:], q[..., 4:])
    with pytest.raises(ValueError, match="the rotary tables turn 4 channels; x has 2"):
        rotate(q[..., :2], cos, sin)


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_a_norm_over_the_head_is_the_family_s_own(family):
    torch.manual_seed(0)
    if family == "qwen3":
        module = tf.models.qwen3.modeling_qwen3.Qwen3RMSNorm(8, eps=1e-5)
        gain_offset = 0.0
    else:
        module = tf.models.gemma3.modeling_gemma3.Gemma3RMSNorm(8, eps=1e-5)
        gain_offset = 1.0
    with torch.no_grad():
        module.weight.normal_()
    u = torch.randn(5, 8, dtype=torch.float64)
    norm = HeadNorm(gain=module.weight.detach().double().numpy() + gain_offset, eps=1e-5)
    with torch.no_grad():
        expected = module(u.float()).double()
    torch.testing.assert_close(norm.apply(u, None), expected, rtol=1e-5, atol=1e-6)
    assert norm.axis == "head" and norm.width == 8


def test_a_norm_over_the_layer_is_olmo2_s_on_the_whole_projection():
    torch.manual_seed(0)
    module = tf.models.olmo2.modeling_olmo2.Olmo2RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        module.weight.uniform_(0.5, 1.5)
    w, b = np.random.default_rng(0).normal(size=(2, 6, 12))
    b = b[0]
    x = torch.randn(4, 6, dtype=torch.float64)
    full = x @ torch.from_numpy(w) + torch.from_numpy(b)
    with torch.no_grad():
        expected = module(full.float()).double()[:, 4:8]
    gain = module.weight.detach().double().numpy()
    norm = HeadNorm(gain=gain[4:8], eps=1e-6, layer_w=w, layer_b=b, columns=(4, 8))
    torch.testing.assert_close(norm.apply(full[:, 4:8], x), expected, rtol=1e-5, atol=1e-6)
    # with a column of ones for the biases, the same norm
    ones = torch.cat([x, torch.ones(4, 1, dtype=torch.float64)], dim=1)
    torch.testing.assert_close(norm.with_bias_row().apply(full[:, 4:8], ones),
                               norm.apply(full[:, 4:8], x))
    # the head alone is another norm: the axis matters
    alone = HeadNorm(gain=gain[4:8], eps=1e-6).apply(full[:, 4:8], None)
    assert float((alone - expected).abs().max()) > 1e-2


def test_the_sliding_window_is_transformers_mask():
    from transformers.masking_utils import causal_mask_function, sliding_window_overlay

    window = sliding_window_overlay(3)
    expected = torch.tensor([[bool(causal_mask_function(0, 0, q, k)) and bool(window(0, 0, q, k))
                              for k in range(6)] for q in range(6)])
    assert torch.equal(visible_keys(6, window=3), expected)
    assert torch.equal(visible_keys(6), torch.ones(6, 6, dtype=torch.bool).tril())
    assert visible_keys(3, causal=False).all()


def test_soft_capping_bounds_the_scores_and_keeps_small_ones():
    scores = torch.tensor([-100.0, -0.01, 0.0, 0.01, 100.0])
    capped = soft_cap(scores, 2.0)
    assert float(capped.abs().max()) <= 2.0 and float(capped[-1]) > 1.99
    torch.testing.assert_close(capped[1:4], scores[1:4], rtol=1e-4, atol=0)
    assert soft_cap(scores, None) is scores


@pytest.mark.parametrize("options, message", [
    (dict(rotary_dim=3), "rotary_dim must be even, in 2..head_dim = 4; got 3"),
    (dict(rotary_dim=6), "rotary_dim must be even, in 2..head_dim = 4; got 6"),
    (dict(softcap=0.0), "softcap must be None or a finite number > 0; got 0.0"),
    (dict(window=0), "window must be None or an integer >= 1; got 0"),
    (dict(rope_scaling=float("nan")), "rope_scaling must be a finite number > 0"),
    (dict(query_norm=HeadNorm(np.ones(3), 1e-6)), "query_norm must be a HeadNorm of 4 "
                                                   "channels"),
    (dict(inv_freq=[1.0, 0.5, 0.25]), "rotary_dim must be even, in 2..head_dim = 4; got 6"),
])
def test_the_rotary_student_refuses_bad_steps_in_one_line(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RotarySoftmaxStudent(d=6, d_out=4, ranks=[2], **options)


def test_the_student_s_window_and_cap_act_as_the_head_s():
    torch.manual_seed(0)
    X = torch.randn(2, 9, 6)
    plain = RotarySoftmaxStudent(d=6, d_out=4, ranks=[4], rotary_dim=2, random_state=0)
    windowed = RotarySoftmaxStudent(d=6, d_out=4, ranks=[4], rotary_dim=2, window=2,
                                    softcap=0.5, random_state=0)
    weights = windowed.mixer(X)[:, 0]
    assert torch.equal(weights > 0, visible_keys(9, window=2).expand(2, -1, -1))
    assert not torch.allclose(plain(X), windowed(X))
