"""The kernel feature maps equal their references, alone and inside TripleAttentionHead.

The expected values are worked out from the published definitions (the papers and
flash-linear-attention's ``fla/modules/feature_map.py``), written down here as
numbers, so a map that drifted from its reference fails.
"""

import math

import numpy as np
import pytest
import torch

from intrinsic_rank.datasets import min_ip_exhaustive_triples
from intrinsic_rank.nn import (
    FEATURE_MAPS,
    TripleAttentionHead,
    elu_plus_one_features,
    exp_features,
    favor_features,
    gaussian_projection,
    hedgehog_features,
    relu_features,
    taylor_feature_count,
    taylor_features,
)

F64 = dict(dtype=torch.float64)


def test_elu_plus_one_and_relu_equal_flash_linear_attention():
    u = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0], **F64)
    # fla's elu_p1: elu(x) + 1 = exp(x) for x <= 0, x + 1 above
    np.testing.assert_allclose(elu_plus_one_features(u).numpy(),
                               [0.1353352832, 0.6065306597, 1.0, 1.5, 4.0], atol=1e-10)
    # fla's ReLUFeatureMap
    np.testing.assert_allclose(relu_features(u).numpy(), [0, 0, 0, 0.5, 3.0], atol=0)
    np.testing.assert_allclose(exp_features(torch.tensor([0.0, 1.0, 25.0], **F64)).numpy(),
                               [1.0, math.e, math.exp(20.0)], rtol=1e-12)


def test_hedgehog_is_one_softmax_over_tied_pairs():
    # fla's HedgehogFeatureMap on u = [0.25, -0.5]: softmax([2u, -2u]) = softmax(0.5, -1, -0.5, 1)
    u = torch.tensor([0.25, -0.5], **F64)
    features = hedgehog_features(u)
    np.testing.assert_allclose(features.numpy(),
                               [0.3086676145, 0.0688730543, 0.1135524695, 0.5089068617],
                               atol=1e-10)
    assert float(features.sum()) == pytest.approx(1.0, abs=1e-15)
    # the pairs are tied: feature j times feature k + j is 1 / Z^2 for every j
    products = features[:2] * features[2:]
    np.testing.assert_allclose(products.numpy(), [products[0].item()] * 2, rtol=1e-12)
    # a masked pair leaves the softmax: the other pair is softmax(0.5, -0.5)
    masked = hedgehog_features(u, pair_mask=torch.tensor([1.0, 0.0], **F64))
    np.testing.assert_allclose(masked.numpy(), [0.7310585786, 0, 0.2689414214, 0], atol=1e-10)


def test_taylor_has_distinct_features_and_the_exact_second_order_kernel():
    # fla's TaylorFeatureMap on x = [1, 2] (d = 2): [1, x / d^(1/4), x_i^2 / (sqrt(d) sqrt 2),
    # x_1 x_2 / sqrt(d)]
    np.testing.assert_allclose(
        taylor_features(torch.tensor([1.0, 2.0], **F64)).numpy(),
        [1.0, 0.8408964153, 1.6817928305, 0.5, 2.0, 1.4142135624], atol=1e-10)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 5, generator=gen, **F64)
    s = float(q @ k) / math.sqrt(5)
    assert float(taylor_features(q) @ taylor_features(k)) == pytest.approx(
        1 + s + s * s / 2, abs=1e-12)
    # the feature count is the rank: no duplicated product columns
    points = torch.randn(60, 4, generator=gen, **F64)
    features = taylor_features(points)
    assert features.shape[-1] == taylor_feature_count(4) == 15
    assert torch.linalg.matrix_rank(features).item() == 15


def test_orthogonal_projection_blocks_and_chi_norms():
    gen = torch.Generator().manual_seed(0)
    omega = gaussian_projection(20, 8, gen, dtype=torch.float64)
    gram = omega @ omega.T
    for start, stop in ((0, 8), (8, 16), (16, 20)):  # rows within a block are orthogonal
        block = gram[start:stop, start:stop]
        assert (block - torch.diag(torch.diagonal(block))).abs().max() < 1e-10
    assert gram[:8, 8:16].abs().max() > 1e-2  # two blocks are independent draws
    norms = torch.diagonal(gram).sqrt()
    assert norms.std() > 0.1  # chi-distributed, not all sqrt(8)
    iid = gaussian_projection(20, 8, torch.Generator().manual_seed(0), orthogonal=False,
                              dtype=torch.float64)
    assert (iid[:8] @ iid[:8].T - torch.diag((iid[:8] ** 2).sum(1))).abs().max() > 1e-2
    # every row has the N(0, I) marginal: E|w|^2 = d, Var |w|^2 = 2d
    many = gaussian_projection(4000, 8, torch.Generator().manual_seed(1), dtype=torch.float64)
    squared = (many ** 2).sum(1)
    assert abs(float(squared.mean()) - 8) < 4 * math.sqrt(2 * 8 / 4000)


@pytest.mark.parametrize("orthogonal", [True, False])
def test_favor_features_estimate_exp_unbiasedly(orthogonal):
    q = torch.tensor([0.3, -0.2, 0.1, 0.4], **F64)
    k = torch.tensor([0.1, 0.5, -0.3, 0.2], **F64)
    target = math.exp(float(q @ k))
    # one feature exp(w.(q+k) - |q|^2/2 - |k|^2/2) has variance E[X^2] - exp(2 q.k) with
    # E[X^2] = exp(2|q+k|^2 - |q|^2 - |k|^2) for w ~ N(0, I); orthogonal rows of a block
    # do not raise it (Performer, Theorem 2) and the blocks are independent
    sd = math.sqrt(math.exp(2 * float((q + k) @ (q + k)) - float(q @ q) - float(k @ k))
                   - target**2)
    gen = torch.Generator().manual_seed(0)
    draws, rows = 2000, 16
    estimates = []
    for _ in range(draws):
        omega = gaussian_projection(rows, 4, gen, orthogonal=orthogonal, dtype=torch.float64)
        estimates.append(float(favor_features(q[None], omega) @ favor_features(k[None], omega).T))
    assert (np.array(estimates) > 0).all()
    assert abs(np.mean(estimates) - target) < 4 * sd / math.sqrt(draws * rows)


def _features(head):
    with torch.no_grad():
        return head._features(head._code(), "q")[:, 0]  # (S, V, features), head 0


def test_triple_head_maps_are_the_reference_maps():
    data = min_ip_exhaustive_triples(3, 3)
    tokens = torch.as_tensor(data.tokens, dtype=torch.float32)
    ranks = [1, 2, 4, 8]
    # hedgehog: softmax([2u, -2u]) of u = x W + c over the slot's r // 2 pairs; rank 1 constant
    head = TripleAttentionHead(data.tokens, ranks, [0, 1, 2, 3], feature_map="hedgehog")
    features = _features(head)
    assert features.shape[-1] == 8
    for s, r in enumerate(ranks):
        u = tokens @ head.map_q[s, 0].detach() + head.map_q_bias[s, 0].detach()
        if r == 1:
            expected = torch.zeros(8, 8)
            expected[:, 0] = 1.0
        else:
            z = torch.cat([2 * u[:, : r // 2], -2 * u[:, : r // 2]], -1).double()
            soft = (torch.exp(z) / torch.exp(z).sum(-1, keepdim=True)).float()
            expected = torch.zeros(8, 8)
            expected[:, : r // 2], expected[:, 4 : 4 + r // 2] = soft[:, : r // 2], soft[:, r // 2 :]
        torch.testing.assert_close(features[s], expected, atol=1e-6, rtol=1e-5)
    # taylor: ranks 1, 2, 4, 8, 16 use d = 0, 0, 1, 2, 4 inputs and 1, 1, 3, 6, 15 features
    data4 = min_ip_exhaustive_triples(4, 3)
    ranks = [1, 2, 4, 8, 16]
    head = TripleAttentionHead(data4.tokens, ranks, [0] * 5, feature_map="taylor")
    features = _features(head).double()
    for s, count in enumerate([1, 1, 3, 6, 15]):
        assert int((features[s].abs().sum(0) > 0).sum()) == count
        assert torch.linalg.matrix_rank(features[s]).item() == count
    # favor+: the drawn projections are orthogonal within blocks of 8 rows, or i.i.d.
    for kind, orthogonal in (("orthogonal", True), ("iid", False)):
        head = TripleAttentionHead(data.tokens, [8], [0], feature_map="favor+",
                                   random_features=kind)
        omega = head.omega[0, 0].double()
        off = omega @ omega.T - torch.diag((omega ** 2).sum(1))
        assert (off.abs().max() < 1e-4) == orthogonal


def test_feature_count_never_exceeds_the_rank():
    data = min_ip_exhaustive_triples(4, 3)
    ranks = [1, 2, 3, 4, 8, 16]
    for name in FEATURE_MAPS:
        head = TripleAttentionHead(data.tokens, ranks, list(range(6)), feature_map=name)
        features = _features(head).double()
        for s, r in enumerate(ranks):
            used = int((features[s].abs().sum(0) > 0).sum())
            assert used <= r, (name, r, used)
            assert torch.linalg.matrix_rank(features[s]).item() <= r


def test_bad_random_features():
    data = min_ip_exhaustive_triples(2, 3)
    with pytest.raises(ValueError, match="unknown random_features 'sobol'"):
        TripleAttentionHead(data.tokens, [1], [0], feature_map="favor+", random_features="sobol")
    with pytest.raises(ValueError, match="n_features"):
        gaussian_projection(0, 4)
