"""The reachability refinements on a model: decode, Monte Carlo decoder cells and the estimator's refinements."""

import math

import numpy as np
import pytest
import torch

from intrinsic_rank import ReachabilityEstimator, bounds
from intrinsic_rank._validation import keyed_seed
from intrinsic_rank.datasets import make_random_targets
from intrinsic_rank.inspection import BOUND_NAMES
from intrinsic_rank.inspection import check_decoder, decoder_cell_proportions
from intrinsic_rank.nn import TinyCausalLM, TinyLMAdapter, as_causal_lm, random_prompt_hidden_states

SHORT = dict(max_epochs=200, patience=100, n_radius_prompts=32)


@pytest.fixture(scope="module")
def lm():
    return as_causal_lm("default")


@pytest.fixture(scope="module")
def states(lm):
    return random_prompt_hidden_states(lm, 2, 6, n_prompts=32, random_state=0)


def _two_token_adapter(weight, bias=None):
    """A 2-d, 2-token model whose head is ``weight`` (rows of different norm)."""
    torch.manual_seed(0)
    model = TinyCausalLM(vocab_size=2, d_model=2, n_layers=1, n_heads=1, max_length=8)
    with torch.no_grad():
        model.unembedding.weight.copy_(torch.tensor(weight))
    return TinyLMAdapter(model)


# -- decode ------------------------------------------------------------------------------

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


# -- decoder_cell_proportions -------------------------------------------------------------

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


# -- ReachabilityEstimator -----------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted():
    X = make_random_targets(6, 5, 64, random_state=3)
    est = ReachabilityEstimator(n_memory=2, random_state=0, n_cell_samples=2**14,
                                **SHORT).fit(X)
    return est, X


def test_estimator_cone(fitted, lm):
    est, X = fitted
    g = est.geometry_
    seed = est._seed
    states = random_prompt_hidden_states(lm, 2, X.shape[1] - 1, n_prompts=32,
                                         batch_size=256, random_state=seed)
    assert g.min_cosine == bounds.min_pairwise_cosine(states.reshape(-1, 64))
    assert g.cone_half_angle == pytest.approx(math.acos(g.min_cosine))
    assert g.cone_log_fraction == bounds.cone_log_fraction(g.cone_half_angle, 64)
    assert g.cone_log_fraction <= 0
    log_term = 64 * math.log1p(2 * g.radius / g.precision)
    assert g.cone_slope_bound == pytest.approx((log_term + g.cone_log_fraction) / math.log(64))
    assert g.cone_log_count_bound == pytest.approx(2 * (log_term + g.cone_log_fraction))
    assert g.cone_slope_bound <= g.slope_bound


def test_estimator_cells_and_table(fitted):
    est, _ = fitted
    g = est.geometry_
    assert g.cells.proportions.shape == (64,) and g.cells.proportions.sum() == pytest.approx(1)
    assert g.cells.nearest.proportions.shape == (64,)
    assert 0 < g.cells.disagreement < 1
    decay = g.decay
    assert decay.n_samples == 2**14 and decay.closed_form_se > 0 and decay.fitted_se > 0
    assert g.cell_slope_bound == pytest.approx(g.box_slope_bound * math.log(64) / decay.closed_form)
    table = g.table
    assert len(table) == 12
    assert [r["bound"] for r in table[:4]] == list(BOUND_NAMES)
    assert [r["precision_convention"] for r in table[::4]] == ["machine", "paper", "relative"]
    machine = {r["bound"]: r["slope_bound"] for r in table[:4]}
    assert machine == {"ball": g.slope_bound, "box": g.box_slope_bound,
                       "cone": g.cone_slope_bound, "box + cells": g.cell_slope_bound}
    paper = [r for r in table if r["precision_convention"] == "paper"]
    assert all(r["precision"] == 2.0**-10 for r in paper)
    relative = [r for r in table if r["precision_convention"] == "relative"]
    assert relative[0]["precision"] == g.radius / 2048
    assert relative[0]["slope_bound"] == pytest.approx(
        64 * math.log1p(2 * 2048) / math.log(64))
    for rows in (table[:4], paper, relative):
        s = {r["bound"]: r["slope_bound"] for r in rows}
        assert s["box + cells"] < s["box"] < s["ball"] and s["cone"] <= s["ball"]


def test_cells_change_no_existing_number(fitted):
    est, X = fitted
    off = ReachabilityEstimator(n_memory=2, random_state=0, n_cell_samples=0, **SHORT).fit(X)
    for name in ("memory_", "reached_", "loss_"):
        np.testing.assert_array_equal(getattr(off, name), getattr(est, name))
    for name in ("radius", "widths", "slope_bound", "box_slope_bound", "log_count_bound",
                 "learned_radius", "min_cosine"):
        np.testing.assert_array_equal(off.geometry_[name], est.geometry_[name])
    assert off.geometry_.cells is None and off.geometry_.decay is None
    assert math.isnan(off.geometry_.cell_slope_bound)
    assert math.isnan(off.geometry_.table[3]["slope_bound"])


def test_a_model_without_a_head_skips_the_cells_with_a_warning(lm):
    class Headless(TinyLMAdapter):
        has_head = False

    X = make_random_targets(2, 3, 64, random_state=0)
    with pytest.warns(UserWarning, match="decoder-cell refinement was skipped"):
        est = ReachabilityEstimator(model=Headless(lm.model), max_epochs=2,
                                    n_radius_prompts=4, n_cell_samples=2**10,
                                    random_state=0).fit(X)
    assert est.geometry_.decay is None and np.isfinite(est.geometry_.cone_slope_bound)


@pytest.mark.parametrize("params, match", [
    (dict(n_cell_samples=-1), "n_cell_samples"),
    (dict(n_cell_samples=1.5), "n_cell_samples"),
    (dict(cell_region="cube"), "cell_region must be 'box' or 'ball'"),
])
def test_bad_cell_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        ReachabilityEstimator(**params).fit(np.array([[1, 2]]))


def test_ball_cell_region(lm):
    X = make_random_targets(2, 3, 64, random_state=0)
    est = ReachabilityEstimator(max_epochs=2, n_radius_prompts=8, random_state=0,
                                n_cell_samples=2**12, cell_region="ball").fit(X)
    assert est.geometry_.decay.n_samples == 2**12 and np.isfinite(est.geometry_.cell_slope_bound)


# -- the reduced-precision head and its float32 re-check ---------------------------------

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
