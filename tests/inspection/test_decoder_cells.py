"""Decoder cells: the region each token wins under the output head, in numpy
(``bounds``: sampling, decision rules, proportions, decay) and on a model
(``inspection.decoder_cell_proportions``, ``check_decoder``).
"""

import math

import numpy as np
import pytest
import torch

from intrinsic_rank import bounds
from intrinsic_rank._validation import keyed_seed
from intrinsic_rank.inspection import check_decoder, decoder_cell_proportions
from intrinsic_rank.nn import TinyCausalLM, TinyLMAdapter, as_causal_lm, random_prompt_hidden_states


@pytest.fixture(scope="module")
def lm():
    return as_causal_lm("default")


def _two_token_adapter(weight, bias=None):
    """A 2-d, 2-token model whose head is ``weight`` (rows of different norm)."""
    torch.manual_seed(0)
    model = TinyCausalLM(vocab_size=2, d_model=2, n_layers=1, n_heads=1, max_length=8)
    with torch.no_grad():
        model.unembedding.weight.copy_(torch.tensor(weight))
    return TinyLMAdapter(model)


@pytest.fixture(scope="module")
def states(lm):
    return random_prompt_hidden_states(lm, 2, 6, n_prompts=32, random_state=0)


def test_sample_box_is_uniform_in_the_box_and_reproducible():
    low, high = np.array([-1.0, 2.0, 0.0]), np.array([1.0, 6.0, 0.5])
    pts = bounds.sample_box(low, high, 50_000, random_state=3)
    assert pts.shape == (50_000, 3)
    assert np.all(pts >= low) and np.all(pts <= high)
    se = (high - low) / math.sqrt(12 * 50_000)
    assert np.all(np.abs(pts.mean(axis=0) - (low + high) / 2) <= 4 * se)
    np.testing.assert_array_equal(pts, bounds.sample_box(low, high, 50_000, random_state=3))


@pytest.mark.parametrize(
    "low, high, match",
    [
        ([0.0, 1.0], [1.0, 1.0], r"high must exceed low.*zero width.*index 1"),
        ([0.0], [1.0, 2.0], r"low and high must have the same shape"),
        ([0.0, np.nan], [1.0, 2.0], r"low must be finite"),
        ([], [], r"low must be a non-empty 1-D array"),
    ],
)
def test_sample_box_rejects_bad_regions(low, high, match):
    with pytest.raises(ValueError, match=match):
        bounds.sample_box(low, high, 10)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_sample_ball_is_uniform_in_the_ball(d):
    n, r = 100_000, 3.0
    center = np.arange(d, dtype=float)
    pts = bounds.sample_ball(center, r, d, n, random_state=1)
    dist = np.linalg.norm(pts - center, axis=1)
    assert dist.max() <= r
    p = 0.5**d  # the inner half-radius ball holds 2**-d of the volume
    assert abs(np.mean(dist <= r / 2) - p) <= 4 * math.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(pts.mean(axis=0) - center) <= 4 * r / math.sqrt(n))


def test_sample_ball_rejects_bad_input():
    with pytest.raises(ValueError, match=r"radius must be a finite real number in \(0.0"):
        bounds.sample_ball(None, 0.0, 2, 10)
    with pytest.raises(ValueError, match=r"center must have shape \(3,\) to match d"):
        bounds.sample_ball([0.0, 0.0], 1.0, 3, 10)
    with pytest.raises(ValueError, match=r"n must be an integer >= 1; got 0"):
        bounds.sample_ball(None, 1.0, 3, 0)


def test_equal_norm_rows_give_equal_cells_and_the_two_rules_agree():
    v = 6
    angles = 2 * math.pi * np.arange(v) / v
    W = 2.0 * np.column_stack([np.cos(angles), np.sin(angles)])
    n = 120_000
    pts = bounds.sample_ball(None, 5.0, 2, n, random_state=0)
    arg = bounds.argmax_cells(pts, W)
    np.testing.assert_array_equal(arg, bounds.nearest_row_cells(pts, W))
    p = bounds.cell_proportions(arg, v).proportions
    assert np.all(np.abs(p - 1 / v) <= 4 * math.sqrt((1 / v) * (1 - 1 / v) / n))


def test_rows_of_different_norm_hand_checked_in_one_dimension():
    # W = [[1], [2]] on the box [-1, 3]:
    #   argmax(w h): token 1 iff 2h > h, i.e. h > 0         -> p = [1/4, 3/4];
    #   nearest row: token 1 iff |h - 2| < |h - 1|, h > 1.5 -> p = [5/8, 3/8].
    W = np.array([[1.0], [2.0]])
    pts = np.linspace(-1, 3, 4001)[:, None]
    arg = bounds.cell_proportions(bounds.argmax_cells(pts, W), 2).proportions
    near = bounds.cell_proportions(bounds.nearest_row_cells(pts, W), 2).proportions
    np.testing.assert_allclose(arg, [0.25, 0.75], atol=1e-3)
    np.testing.assert_allclose(near, [0.625, 0.375], atol=1e-3)
    # with a bias b = [0.5, 0]: token 1 iff 2h > h + 0.5, i.e. h > 0.5 -> p = [3/8, 5/8]
    biased = bounds.argmax_cells(pts, W, bias=[0.5, 0.0])
    np.testing.assert_allclose(bounds.cell_proportions(biased, 2).proportions,
                               [0.375, 0.625], atol=1e-3)


def test_decision_rules_match_brute_force_and_chunking():
    rng = np.random.RandomState(0)
    pts, W, b = rng.normal(size=(500, 4)), rng.normal(size=(37, 4)), rng.normal(size=37)
    arg = bounds.argmax_cells(pts, W, b)
    np.testing.assert_array_equal(arg, np.argmax(pts @ W.T + b, axis=1))
    near = bounds.nearest_row_cells(pts, W)
    dist = np.linalg.norm(pts[:, None, :] - W[None, :, :], axis=2)
    np.testing.assert_array_equal(near, np.argmin(dist, axis=1))
    for cap in (1, 40, 10_000):
        np.testing.assert_array_equal(bounds.argmax_cells(pts, W, b, max_elements=cap), arg)
        np.testing.assert_array_equal(bounds.nearest_row_cells(pts, W, max_elements=cap), near)
    assert np.mean(arg != bounds.argmax_cells(pts, W)) > 0  # the bias matters


@pytest.mark.parametrize(
    "points, weight, bias, match",
    [
        (np.zeros(3), np.zeros((2, 3)), None, r"points must be a non-empty 2-D array"),
        (np.zeros((4, 3)), np.zeros((2, 2)), None, r"weight must have d = 3 columns"),
        (np.zeros((4, 3)), np.zeros(3), None, r"weight must be a non-empty 2-D array"),
        (np.full((4, 3), np.nan), np.zeros((2, 3)), None, r"points must be finite"),
        (np.zeros((4, 3)), np.full((2, 3), np.inf), None, r"weight must be finite"),
        (np.zeros((4, 3)), np.zeros((2, 3)), [0.0], r"bias must have shape \(2,\)"),
    ],
)
def test_argmax_cells_rejects_bad_arrays(points, weight, bias, match):
    with pytest.raises(ValueError, match=match):
        bounds.argmax_cells(points, weight, bias)


def test_cell_proportions_counts_and_empty_cells():
    cells = bounds.cell_proportions(np.array([[0, 2], [2, 2]]), 5)
    np.testing.assert_array_equal(cells.counts, [1, 0, 3, 0, 0])
    np.testing.assert_allclose(cells.proportions, [0.25, 0, 0.75, 0, 0])
    assert (cells.n_empty, cells.n_samples, cells.vocab_size) == (3, 4, 5)


@pytest.mark.parametrize(
    "assignments, vocab_size, match",
    [
        ([0, 5], 5, r"assignments must lie in \[0, vocab_size=5\); got 5 at index 1"),
        ([-1, 0], 5, r"got -1 at index 0"),
        ([0.0, 1.0], 5, r"assignments must be integer token ids; got dtype float64"),
        ([], 5, r"assignments must hold at least one token id"),
        ([0], 1, r"vocab_size must be an integer >= 2; got 1"),
    ],
)
def test_cell_proportions_rejects_bad_input(assignments, vocab_size, match):
    with pytest.raises(ValueError, match=match):
        bounds.cell_proportions(assignments, vocab_size)


@pytest.mark.parametrize("v", [2, 7, 64])
def test_uniform_cells_decay_at_log_vocab(v):
    decay = bounds.cell_decay(np.full(v, 1 / v), n_samples=10**6, n_bootstrap=20)
    assert decay.closed_form == pytest.approx(math.log(v), abs=1e-12)
    assert decay.fitted == pytest.approx(math.log(v), abs=1e-9)
    assert decay.fitted_r2 == pytest.approx(1.0)
    assert decay.n_empty == 0 and decay.n_cells == v
    assert 0 <= decay.closed_form_se < 1e-2 and 0 <= decay.fitted_se < 1e-2
    assert bounds.cell_slope_bound(80.0, v, decay) == pytest.approx(80.0)


def test_fitted_decay_agrees_with_closed_form_on_a_synthetic_distribution():
    rng = np.random.RandomState(0)
    p = rng.dirichlet(np.full(1000, 0.7))
    c_true = -np.mean(np.log(p))
    decay = bounds.cell_decay(p, n_samples=10**7, n_bootstrap=60, random_state=1)
    assert decay.closed_form == pytest.approx(c_true)
    assert abs(decay.fitted - decay.closed_form) <= 4 * decay.fitted_se
    assert decay.closed_form > math.log(1000)  # unequal cells decay faster than ln N
    assert decay.fitted_r2 > 0.999
    assert decay.ks.tolist() == list(range(1, 17)) and decay.median_log_volume.shape == (16,)


def test_fitted_decay_is_close_to_the_closed_form_for_a_small_vocabulary():
    # With few tokens the median of a discrete product sits on an atom: a small
    # deterministic bias (documented) that fitted_se does not cover; it stays under 1%.
    for seed in range(5):
        p = np.random.RandomState(seed).dirichlet(np.ones(20))
        decay = bounds.cell_decay(p, n_samples=10**7, n_bootstrap=0, random_state=seed)
        assert decay.fitted == pytest.approx(decay.closed_form, rel=0.01)


def test_monte_carlo_decay_recovers_the_true_rate_within_its_standard_error():
    rng = np.random.RandomState(2)
    p = rng.dirichlet(np.full(20, 1.0))
    c_true = -np.mean(np.log(p))
    n = 200_000
    assignments = rng.choice(20, size=n, p=p)
    decay = bounds.cell_decay(bounds.cell_proportions(assignments, 20), n_bootstrap=100)
    assert decay.n_samples == n
    assert abs(decay.closed_form - c_true) <= 4 * decay.closed_form_se
    assert decay.fitted == pytest.approx(c_true, rel=0.01)


def test_empty_cells_are_excluded_and_counted():
    p = np.array([0.5, 0.0, 0.25, 0.25, 0.0])
    decay = bounds.cell_decay(p, n_samples=1000, n_bootstrap=0)
    assert decay.n_empty == 2 and decay.n_cells == 3 and decay.vocab_size == 5
    assert decay.closed_form == pytest.approx(-np.mean(np.log([0.5, 0.25, 0.25])))
    assert math.isnan(decay.closed_form_se) and math.isnan(decay.fitted_se)


def test_cell_decay_is_reproducible_and_its_estimate_does_not_depend_on_the_bootstrap():
    p = np.random.RandomState(5).dirichlet(np.ones(10))
    a = bounds.cell_decay(p, 5000, n_bootstrap=10, random_state=4)
    b = bounds.cell_decay(p, 5000, n_bootstrap=10, random_state=4)
    c = bounds.cell_decay(p, 5000, n_bootstrap=0, random_state=4)
    assert a.fitted == b.fitted == c.fitted and a.fitted_se == b.fitted_se


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(proportions=[0.5, 0.6], n_samples=10), r"proportions must sum to 1"),
        (dict(proportions=[1.5, -0.5], n_samples=10), r"proportions must be nonnegative"),
        (dict(proportions=[1.0], n_samples=10), r"one entry per token"),
        (dict(proportions=[0.5, np.nan], n_samples=10), r"proportions must be finite"),
        (dict(proportions=[0.5, 0.5]), r"n_samples is required"),
        (dict(proportions=[0.5, 0.5], n_samples=0), r"n_samples must be an integer >= 1"),
        (dict(proportions=[0.5, 0.5], n_samples=10, max_k=1), r"max_k must be an integer >= 2"),
        (dict(proportions=[0.5, 0.5], n_samples=10, n_bootstrap=-1),
         r"n_bootstrap must be an integer >= 0"),
    ],
)
def test_cell_decay_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bounds.cell_decay(**kwargs)


def test_cell_slope_bound():
    assert bounds.cell_slope_bound(30.0, 100, 2 * math.log(100)) == pytest.approx(15.0)
    decay = {"closed_form": 6.0, "fitted": 5.0}
    assert bounds.cell_slope_bound(10.0, 64, decay) == pytest.approx(10 * math.log(64) / 6)
    assert bounds.cell_slope_bound(10.0, 64, decay, estimate="fitted") == pytest.approx(
        10 * math.log(64) / 5)
    with pytest.raises(ValueError, match=r"decay must be > 0; got 0.0 \(a single non-empty"):
        bounds.cell_slope_bound(10.0, 64, bounds.cell_decay([1.0, 0.0], 10, n_bootstrap=0))
    with pytest.raises(ValueError, match=r"decay must be a finite real number in \(0.0"):
        bounds.cell_slope_bound(10.0, 64, -1.0)
    with pytest.raises(ValueError, match=r"estimate must be 'closed_form' or 'fitted'"):
        bounds.cell_slope_bound(10.0, 64, decay, estimate="median")
    with pytest.raises(ValueError, match=r"box_slope must be"):
        bounds.cell_slope_bound(-1.0, 64, 1.0)


def test_decode_is_the_head_on_final_hidden_states(lm):
    x = lm.embed(torch.tensor([[3, 1, 4, 1, 5]]))
    with torch.no_grad():
        hidden = lm.final_hidden(x)
        # bit for bit: the same Linear on the same post-LayerNorm states
        assert torch.equal(lm.decode(hidden), lm.logits(x))
    weight, bias = lm.output_head()
    assert weight.shape == (64, 64) and bias is None
    assert weight is lm.model.unembedding.weight
    assert check_decoder(lm) is lm


def test_check_decoder_rejects_a_head_that_is_not_the_models_rule(lm):
    class Shifted(TinyLMAdapter):
        def output_head(self):  # a head that is not what logits() applies
            weight, _ = super().output_head()
            return -weight, None

    bad = Shifted(lm.model)
    with pytest.raises(ValueError, match="does not decode its final hidden states"):
        check_decoder(bad)


def test_cells_on_a_hand_checked_head():
    # W = [[1, 0], [0, 3]] on the unit square: argmax sends h to token 0 iff
    # h1 > 3 h2 (area 1/6); the nearest row is always w0 there (|h - w0| < |h - w1|
    # iff h1 - 3 h2 > -4). The two rules differ on 5/6 of the square.
    adapter = _two_token_adapter([[1.0, 0.0], [0.0, 3.0]])
    cells = decoder_cell_proportions(adapter, low=[0, 0], high=[1, 1], n_samples=2**16,
                                     random_state=0)
    se = math.sqrt((1 / 6) * (5 / 6) / 2**16)
    assert cells.proportions[0] == pytest.approx(1 / 6, abs=4 * se)
    assert cells.argmax.counts.sum() == 2**16 and cells.n_samples == 2**16
    assert cells.nearest.proportions.tolist() == [1.0, 0.0]
    assert cells.nearest.n_empty == 1 and cells.n_empty == 0
    assert cells.disagreement == pytest.approx(5 / 6, abs=4 * se)
    assert cells.region == "box" and cells.rule == "argmax"
    nearest = decoder_cell_proportions(adapter, low=[0, 0], high=[1, 1], n_samples=2**16,
                                       random_state=0, rule="nearest")
    np.testing.assert_array_equal(nearest.proportions, cells.nearest.proportions)


def test_ball_region_on_a_hand_checked_head():
    # equal rows, no bias: the two rules agree; w = (+-1, 0) split the ball in halves
    adapter = _two_token_adapter([[1.0, 0.0], [-1.0, 0.0]])
    cells = decoder_cell_proportions(adapter, center=[0.0, 0.0], radius=2.0, region="ball",
                                     n_samples=2**15, random_state=1)
    assert cells.disagreement == 0.0
    assert cells.proportions[0] == pytest.approx(0.5, abs=4 * math.sqrt(0.25 / 2**15))
    # from states: the smallest ball about the origin that holds them
    pts = np.array([[3.0, 4.0], [0.0, 1.0]])
    from_states = decoder_cell_proportions(adapter, pts, region="ball", n_samples=16)
    assert from_states.radius == 5.0 and from_states.center is None


def test_cells_match_the_numpy_rules_on_the_same_points(lm, states):
    n = 5000
    cells = decoder_cell_proportions(lm, states, n_samples=n, random_state=3)
    flat = states.reshape(-1, 64).astype(np.float64)
    np.testing.assert_array_equal(cells.low, flat.min(axis=0))
    # the points are numpy's, drawn in one block seeded by keyed_seed(3, 0)
    points = bounds.sample_box(flat.min(axis=0), flat.max(axis=0), n, keyed_seed(3, 0))
    W = lm.output_head()[0].detach().double().numpy()
    real = np.bincount(bounds.argmax_cells(points, W), minlength=64)
    near = np.bincount(bounds.nearest_row_cells(points, W), minlength=64)
    # float32 on the device against float64 here: a near-tie may flip, rarely
    assert np.abs(cells.argmax.counts - real).sum() <= 4
    assert np.abs(cells.nearest.counts - near).sum() <= 4
    assert cells.argmax.counts.sum() == n == cells.nearest.counts.sum()
    assert 0.0 < cells.disagreement < 0.5  # unequal row norms: the rules differ


def test_cells_do_not_depend_on_the_memory_cap(lm, states):
    a = decoder_cell_proportions(lm, states, n_samples=3000, random_state=0)
    b = decoder_cell_proportions(lm, states, n_samples=3000, random_state=0,
                                 max_bytes=1, device="cpu")
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.nearest.counts, b.nearest.counts)
    c = decoder_cell_proportions(lm, states, n_samples=3000, random_state=1)
    assert not np.array_equal(a.counts, c.counts)


def test_cell_decay_reads_the_result(lm, states):
    cells = decoder_cell_proportions(lm, states, n_samples=2**14, random_state=0)
    decay = bounds.cell_decay(cells, n_bootstrap=10)
    assert decay.n_samples == 2**14 and decay.vocab_size == 64
    # unequal cells: c above ln|V| (equal cells give exactly ln|V|)
    assert decay.closed_form > math.log(64 - decay.n_empty)


@pytest.mark.parametrize("kwargs, match", [
    (dict(hidden_states=np.ones((4, 64))), "zero width in 64 coordinate"),
    (dict(hidden_states=np.full((2, 3, 64), np.nan)), "hidden_states must be finite"),
    (dict(hidden_states=np.zeros((0, 64))), "at least one state"),
    (dict(low=np.zeros(64), high=np.r_[np.ones(63), 0.0]), "high must exceed low"),
    (dict(low=np.zeros(64), high=np.full(64, np.inf)), "high must be finite"),
    (dict(low=np.zeros(3), high=np.ones(3)), r"shape \(64,\)"),
    (dict(radius=0.0, region="ball"), "radius"),
    (dict(region="cube", low=np.zeros(64), high=np.ones(64)), "region must be"),
    (dict(rule="voronoi", low=np.zeros(64), high=np.ones(64)), "rule must be"),
    (dict(), "needs hidden_states or both low and high"),
    (dict(hidden_states=np.ones((2, 64)), low=np.zeros(64)), "not both"),
    (dict(low=np.zeros(64), high=np.ones(64), n_samples=0), "n_samples"),
    (dict(low=np.zeros(64), high=np.full(64, 1e39)), "beyond torch.float32's range"),
])
def test_bad_regions(lm, kwargs, match):
    with pytest.raises(ValueError, match=match):
        decoder_cell_proportions(lm, **kwargs)


def test_no_head_is_a_clear_error(lm):
    class Headless(TinyLMAdapter):
        has_head = False

    with pytest.raises(ValueError, match="no next-token head"):
        decoder_cell_proportions(Headless(lm.model), low=[0] * 64, high=[1] * 64)
    with pytest.raises(TypeError, match="CausalLMAdapter"):
        decoder_cell_proportions(lm.model, low=[0] * 64, high=[1] * 64)


def test_bfloat16_cells_equal_the_float32_cells_point_for_point(lm, states):
    exact = decoder_cell_proportions(lm, states, n_samples=20000, random_state=3,
                                     reduced_precision=None)
    fast = decoder_cell_proportions(lm, states, n_samples=20000, random_state=3)
    assert exact.matmul_dtype == "float32" and fast.matmul_dtype == "bfloat16"
    np.testing.assert_array_equal(fast.counts, exact.counts)
    np.testing.assert_array_equal(fast.nearest.counts, exact.nearest.counts)
    assert fast.disagreement == exact.disagreement
    assert fast.check.points == 4096 and fast.check.mismatched == 0
    # the re-check scores a few candidates per point and rule, never the whole head
    assert 2 * 20000 <= fast.check.rechecked < 20000 * 64
    assert exact.check.points == 0 and exact.check.rechecked == 0


def test_the_float32_head_in_blocks_is_the_full_matmul(lm, states):
    cells = decoder_cell_proportions(lm, states, n_samples=3000, random_state=1,
                                     reduced_precision=None)
    flat = np.asarray(states, dtype=np.float64).reshape(-1, lm.width)
    pts = torch.as_tensor(bounds.sample_box(flat.min(0), flat.max(0), 3000,
                                            keyed_seed(1, 0)), dtype=torch.float32)
    W, _ = lm.output_head()
    with torch.no_grad():
        logits = pts @ W.detach().T
    np.testing.assert_array_equal(cells.counts, np.bincount(logits.argmax(1).numpy(),
                                                            minlength=64))


def test_a_reduced_head_that_disagrees_falls_back_to_float32(lm, states, monkeypatch):
    from intrinsic_rank.inspection import _decoder_cells

    exact = decoder_cell_proportions(lm, states, n_samples=5000, random_state=2,
                                     reduced_precision=None)
    # a zero tolerance keeps only the reduced best: some checked point then disagrees
    monkeypatch.setattr(_decoder_cells, "_RECHECK", 0.0)
    with pytest.warns(UserWarning, match="counted in torch.float32 instead"):
        cells = decoder_cell_proportions(lm, states, n_samples=5000, random_state=2)
    assert cells.check.mismatched > 0 and cells.matmul_dtype == "float32"
    np.testing.assert_array_equal(cells.counts, exact.counts)


def test_the_sample_size_limits_the_decay(lm, states):
    cells = decoder_cell_proportions(lm, states, n_samples=256, random_state=0)
    decay = bounds.cell_decay(cells, random_state=0)
    assert cells.max_decay == pytest.approx(math.log(256))
    assert decay.closed_form <= cells.max_decay + 1e-12
    assert cells.n_empty == int(np.sum(cells.counts == 0))


@pytest.mark.parametrize("params, match", [
    (dict(reduced_precision="int8"), "reduced_precision must be"),
    (dict(check_points=-1), "check_points"),
])
def test_bad_reduced_precision_parameters(lm, states, params, match):
    with pytest.raises(ValueError, match=match):
        decoder_cell_proportions(lm, states, n_samples=16, **params)
