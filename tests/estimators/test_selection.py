"""Scale: the adaptive rank search, early stopping, bounded memory, bench_scale."""

import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators import _net, _scaling
from intrinsic_rank.estimators._selection import (
    adaptive_rank_search,
    coarse_rank_grid,
    refinement_ranks,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


# -- the search plan, without training ------------------------------------------
def test_coarse_grid_and_refinement_ranks():
    assert coarse_rank_grid(1) == [1]
    assert coarse_rank_grid(64) == [1, 2, 4, 8, 16, 32, 64]
    assert coarse_rank_grid(20) == [1, 2, 4, 8, 16, 20]
    assert refinement_ranks(16, 32) == [20, 24, 28]
    assert refinement_ranks(4, 8) == [5, 6, 7]
    assert refinement_ranks(0, 1) == []
    assert refinement_ranks(7, 8) == []


@pytest.mark.parametrize("limit", [8, 16, 64])
def test_search_finds_every_rank_of_a_monotone_risk_with_little_work(limit):
    # a step risk: every rank >= r* is at the floor; the search must return r*
    # (the smallest reaching rank) for every r*, never training a rank twice
    worst = 0
    for r_star in range(1, limit + 1):
        def risk(ranks):
            return [0.5 + (1.0 if r < r_star else 0.0) + 1e-3 * r for r in ranks]
        rounds = adaptive_rank_search(coarse_rank_grid(limit), risk, 1.0, 0.02)
        trained = [r for round_ in rounds for r in round_]
        assert len(trained) == len(set(trained))
        risks = dict(zip(trained, risk(trained)))
        floor = min(risks.values())
        selected = min(r for r in trained if risks[r] - floor <= 0.02)
        assert selected == r_star
        worst = max(worst, len(trained))
    if limit == 64:
        # the full grid 1..64 trains 64 ranks: at least 4x more (14 at most here)
        assert worst == 14 and 64 / worst >= 4


def test_search_stops_when_no_rank_reaches_a_given_floor():
    rounds = adaptive_rank_search([1, 2, 4], lambda ranks: [1.0] * len(ranks), 1.0, 0.02,
                                  noise_floor=0.0)
    assert rounds == [[1, 2, 4]]


# -- the adaptive search on teachers the docs do not use ------------------------
HELD_OUT_TEACHERS = [  # kind, d, L, r*, seed
    ("linear", 10, 5, 3, 11),
    ("softmax", 12, 6, 5, 23),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind,d,L,r_star,seed", HELD_OUT_TEACHERS)
def test_auto_matches_the_full_grid_on_held_out_teachers(kind, d, L, r_star, seed):
    X, Y = make_attention_task(kind, n_samples=512, seq_len=L, d=d, rank=r_star,
                               noise=0.1, random_state=seed)
    params = dict(attention=kind, max_epochs=60, random_state=seed)
    full = AttentionRankEstimator(rank_grid=list(range(1, d + 1)), **params).fit(X, Y)
    auto = AttentionRankEstimator(rank_grid="auto", **params).fit(X, Y)
    assert auto.rank_ == full.rank_ == r_star
    assert auto.rank_epochs_ < full.rank_epochs_ == d * 60
    assert auto.rank_epochs_ == sum(len(r["ranks"]) * r["epochs"] for r in auto.search_rounds_)
    assert auto.search_rounds_[0]["ranks"] == coarse_rank_grid(d)
    assert auto.trained_ranks_.tolist() == auto.ranks_.tolist()
    # a slot's training does not depend on the rest of its batch: the same risks
    full_risk = {rec["rank"]: rec["heldout_risk"] for rec in full.sweep_}
    for rec in auto.sweep_:
        assert rec["heldout_risk"] == pytest.approx(full_risk[rec["rank"]], rel=1e-5)
    # the merged net predicts with the trained slots
    i = auto.ranks_.tolist().index(auto.rank_)
    j = full.ranks_.tolist().index(full.rank_)
    np.testing.assert_allclose(auto.predict_per_rank(X[:16])[:, i],
                               full.predict_per_rank(X[:16])[:, j], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind,d,L,r_star,seed", [
    ("linear", 16, 8, 6, 101), ("softmax", 16, 8, 2, 202), ("linear", 20, 6, 11, 303),
    ("softmax", 24, 8, 7, 404),
])
def test_auto_matches_the_full_grid_on_more_teachers(kind, d, L, r_star, seed):
    X, Y = make_attention_task(kind, n_samples=1024, seq_len=L, d=d, rank=r_star,
                               noise=0.1, random_state=seed)
    params = dict(attention=kind, max_epochs=150, random_state=seed)
    full = AttentionRankEstimator(rank_grid=list(range(1, d + 1)), **params).fit(X, Y)
    auto = AttentionRankEstimator(rank_grid="auto", **params).fit(X, Y)
    assert auto.rank_ == full.rank_
    assert auto.rank_epochs_ < full.rank_epochs_


def test_bad_ranks_string_names_the_parameter():
    X, Y = make_attention_task("linear", n_samples=32, seq_len=3, d=2, rank=1, random_state=0)
    with pytest.raises(ValueError, match="The 'rank_grid' parameter of AttentionRankEstimator "
                                         "must be None, a str among {'auto'} or an array-like"):
        AttentionRankEstimator(rank_grid="all").fit(X, Y)
    with pytest.raises(ValueError, match="The 'n_iter_no_change' parameter .* Got 0 instead"):
        AttentionRankEstimator(rank_grid=[1, 2], early_stopping=True, n_iter_no_change=0).fit(X, Y)
    with pytest.raises(ValueError, match="The 'early_stopping' parameter .* Got 10 instead"):
        AttentionRankEstimator(rank_grid=[1, 2], early_stopping=10).fit(X, Y)


# -- convergence-aware stopping -------------------------------------------------
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_early_stopping_ends_when_every_slot_plateaued_and_keeps_the_answer():
    X, Y = make_attention_task("linear", n_samples=512, seq_len=4, d=6, rank=2,
                               noise=0.1, random_state=5)
    params = dict(attention="linear", rank_grid=[1, 2, 3, 6], max_epochs=300, random_state=5)
    long = AttentionRankEstimator(**params).fit(X, Y)
    early = AttentionRankEstimator(early_stopping=True, n_iter_no_change=10, **params).fit(X, Y)
    assert early.n_epochs_ < 300 == long.n_epochs_
    assert early.rank_epochs_ == 4 * early.n_epochs_
    assert early.rank_ == long.rank_ == 2
    assert len(early.history_[-1]["heldout_risk_per_rank"]) == 4
    # the last recorded held-out risks are the sweep's
    np.testing.assert_allclose(early.history_[-1]["heldout_risk_per_rank"],
                               [rec["heldout_risk"] for rec in early.sweep_], rtol=1e-6)
    # the stop is the documented rule: no slot improved by more than min_delta
    # over the last `patience` epochs
    risks = np.array([row["heldout_risk_per_rank"] for row in early.history_])
    delta = 0.01 * early.tol * np.mean(np.var(Y[_heldout(early, len(X))], axis=0))
    best_before = risks[:-10].min(axis=0)
    assert np.all(risks[-10:].min(axis=0) >= best_before - delta * (1 + 1e-9))
    # max_epochs stays an upper bound
    capped = AttentionRankEstimator(early_stopping=True, **{**params, "max_epochs": 5}).fit(X, Y)
    assert capped.n_epochs_ == 5


def _heldout(est, n):
    from intrinsic_rank._validation import draw_seed
    order = np.random.RandomState(draw_seed(est.random_state)).permutation(n)
    return np.sort(order[:int(round(est.validation_fraction * n))])


# -- bounded memory -------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_chunked_evaluation_agrees_with_one_pass(monkeypatch):
    X, Y = make_attention_task("softmax", n_samples=300, seq_len=4, d=5, rank=2,
                               noise=0.1, random_state=1)
    params = dict(attention="softmax", rank_grid=[1, 2, 5], max_epochs=8, batch_size=32,
                  random_state=1)
    one = AttentionRankEstimator(**params).fit(X, Y)
    monkeypatch.setattr(_scaling, "CHUNK_ELEMENTS", 200)  # chunks of 32 rows (one batch)
    many = AttentionRankEstimator(**params).fit(X, Y)
    np.testing.assert_allclose([r["heldout_risk"] for r in many.sweep_],
                               [r["heldout_risk"] for r in one.sweep_], rtol=1e-12)
    np.testing.assert_allclose(many.predict_per_rank(X), one.predict_per_rank(X), rtol=1e-12)
    np.testing.assert_allclose(many.history_[-1]["train_loss_per_rank"],
                               one.history_[-1]["train_loss_per_rank"], rtol=1e-12)
    assert _scaling.scale_factor(X * 1e-6) == 2.0**20
    t = _scaling.rows_as_tensor(X, "X", "cpu", rows=np.arange(3, 90), scale=0.25)
    np.testing.assert_array_equal(t.numpy(), (X[3:90] * 0.25).astype(np.float32))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_float32_and_memmap_input_give_the_float64_answer(tmp_path):
    X, Y = make_attention_task("linear", n_samples=256, seq_len=4, d=4, rank=2,
                               noise=0.1, random_state=2)
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    params = dict(attention="linear", rank_grid=[1, 2, 4], max_epochs=10, random_state=2)
    ref = AttentionRankEstimator(**params).fit(X32.astype(np.float64), Y32.astype(np.float64))
    mem = np.memmap(tmp_path / "X.f32", dtype=np.float32, mode="w+", shape=X32.shape)
    mem[:] = X32
    mem.flush()
    mem = np.memmap(tmp_path / "X.f32", dtype=np.float32, mode="r", shape=X32.shape)
    for data in (X32, mem):
        est = AttentionRankEstimator(**params).fit(data, Y32)
        assert est.rank_ == ref.rank_
        np.testing.assert_allclose([r["heldout_risk"] for r in est.sweep_],
                                   [r["heldout_risk"] for r in ref.sweep_], rtol=1e-12)
        np.testing.assert_array_equal(est.predict(data), ref.predict(X32))


def test_big_input_never_builds_all_outputs(monkeypatch):
    # with tiny chunks, fit's evaluation never asks the net for more rows than a chunk
    X, Y = make_attention_task("linear", n_samples=256, seq_len=4, d=4, rank=2,
                               random_state=3)
    monkeypatch.setattr(_scaling, "CHUNK_ELEMENTS", 256)
    whole, batches = [], []
    forward, evaluation_step = _net.RankSweepNet.forward, _net.RankSweepNet.evaluation_step

    def recorded_forward(self, X, training=False, **kwargs):
        whole.append(len(X))  # a pass whose outputs are concatenated
        return forward(self, X, training=training, **kwargs)

    def recorded_step(self, batch, training=False):
        batches.append(len(batch[0]))  # one batch of an evaluation
        return evaluation_step(self, batch, training=training)

    monkeypatch.setattr(_net.RankSweepNet, "forward", recorded_forward)
    monkeypatch.setattr(_net.RankSweepNet, "evaluation_step", recorded_step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AttentionRankEstimator(attention="linear", rank_grid=[1, 2], max_epochs=2, batch_size=16,
                               random_state=0).fit(X, Y)
    # no concatenated pass beyond one chunk (256 outputs, 8 rows here), and every batch of
    # the chunked evaluations at most the training batch
    assert max(whole, default=0) <= 8 and batches and max(batches) <= 16


# -- the benchmark --------------------------------------------------------------
def _bench_scale():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_scale",
                                                  ROOT / "benchmarks" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_scale_worker_records_time_rank_and_memory():
    bench = _bench_scale()
    X, Y = bench.float32_teacher(64, 4, 6, 2, seed=0)
    assert X.dtype == Y.dtype == np.float32 and X.shape == Y.shape == (64, 4, 6)
    common = dict(kind="softmax", seed=0, threads=1, device="cpu", data="float32", n=64,
                  L=4, d=6, r_star=2, epochs=2)
    rec = bench.worker(dict(common, how="fit", rank_grid="auto"))
    assert rec["rounds"][0]["ranks"] == [1, 2, 4, 6]
    assert rec["rank_epochs"] == sum(len(r["ranks"]) * r["epochs"] for r in rec["rounds"])
    assert rec["peak_rss_mb"] >= rec["rss_before_fit_mb"] > 0
    grid = bench.worker(dict(common, how="gridsearch", rank_grid=[1, 2], epochs=1))
    assert grid["folds"] == 5 and grid["rank_epochs"] == 10 and grid["rank"] in (1, 2)
    assert bench.exponent([1, 2, 4], [3, 12, 48]) == pytest.approx(2.0)


@pytest.mark.slow
def test_bench_scale_quick_smoke_run():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--quick",
         "--threads", "1"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "same_rstar_all: True" in out
    assert "auto_rank_epoch_ratio:" in out and "(target >= 4)" in out
    assert "peak above import" in out and "s/epoch" in out
    assert "equal_work_speedup_batch256:" in out
