"""attention="auto": the class chosen from the data, r* inside it, and honest warnings.

Teachers of each class are drawn with seeds, sizes and noise levels no doc uses, saved
with ``numpy.savez`` and run through the command, as a user with their own file would.
"""

import json
import re
import warnings

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import make_attention_task, make_fixed_operator_task
from intrinsic_rank.estimators._selection import AUTO_ATTENTION, choose_attention
from intrinsic_rank.experiments.entropic._sweep import sweep_warnings


def _sweep_file(tmp_path, X, Y, *extra):
    np.savez(tmp_path / "mine.npz", X=X, Y=Y)
    out = tmp_path / "run"
    status = main(["sweep", "--data", str(tmp_path / "mine.npz"), "--out", str(out),
                   "--quiet", *extra])
    assert status == 0
    return json.loads((out / "sweep.json").read_text())


def test_the_simplest_class_within_the_tolerance_of_the_best_is_chosen():
    assert AUTO_ATTENTION == ("fixed", "linear", "softmax")
    risks = {"fixed": 0.6, "linear": 0.0025, "softmax": 0.46}
    assert choose_attention(risks, 1.0, 0.02) == "linear"
    # softmax lower by less than tol * variance = 0.02: the simpler linear class
    assert choose_attention({"fixed": 0.9, "linear": 0.119, "softmax": 0.1}, 1.0, 0.02) == "linear"
    # by more: softmax
    assert choose_attention({"fixed": 0.9, "linear": 0.121, "softmax": 0.1}, 1.0, 0.02) == "softmax"
    assert choose_attention({"fixed": np.inf, "linear": np.inf, "softmax": 0.5}, 1.0, 0.02) \
        == "softmax"
    with pytest.raises(ValueError, match="every class .* diverged"):
        choose_attention({"fixed": np.inf, "linear": np.inf}, 1.0, 0.02)


def test_auto_gives_the_numbers_of_the_chosen_class_with_the_same_seed():
    X, Y = make_attention_task("linear", n_samples=360, seq_len=4, d=5, rank=2, noise=0.06,
                               random_state=7331)
    common = dict(rank_grid=[1, 2, 3], max_epochs=80, random_state=11)
    auto = AttentionRankEstimator(attention="auto", **common).fit(X, Y)
    assert auto.attention_ == "linear" and auto.rank_ == 2
    assert list(auto.class_risks_) == ["fixed", "linear", "softmax"]
    assert auto.class_risks_["linear"] < 0.1 * min(auto.class_risks_["fixed"],
                                                     auto.class_risks_["softmax"])
    explicit = AttentionRankEstimator(attention="linear", **common).fit(X, Y)
    assert explicit.class_risks_ is None and explicit.attention_ == "linear"
    assert [r["heldout_risk"] for r in auto.sweep_] == [r["heldout_risk"] for r in explicit.sweep_]
    # the linear class's full-rank risk is the rank-5 student of that class (same seed)
    full = AttentionRankEstimator(attention="linear", rank_grid=[5], max_epochs=80,
                                  random_state=11).fit(X, Y)
    assert auto.class_risks_["linear"] == pytest.approx(full.sweep_[0]["heldout_risk"], rel=1e-9)
    assert auto.heldout_r2_ > 0.95 and auto.estimate_supported_ and auto.warnings_ == []
    assert auto.predict(X[:3]).shape == (3, 4, 5)


def test_a_fixed_operator_teacher_chooses_fixed_with_the_adaptive_search_and_early_stopping():
    X, Y = make_fixed_operator_task(400, 6, 5, rank=2, noise=0.05, random_state=77)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the attention classes' fits are poor here
        est = AttentionRankEstimator(attention="auto", rank_grid="auto", early_stopping=True,
                                     max_epochs=150, random_state=1).fit(X, Y)
    assert est.attention_ == "fixed" and est.rank_ == 2
    # the coarse grid and the refinement inside the fixed class's limit L = 6
    assert est.trained_ranks_.tolist() == [1, 2, 4, 6]
    assert est.class_risks_["fixed"] < 0.01 < 0.5 < min(est.class_risks_["linear"],
                                                        est.class_risks_["softmax"])
    assert est.operator_.shape == (6, 6) and est.estimate_supported_ and est.warnings_ == []


def test_auto_needs_a_sweep_and_the_classes_defaults():
    X, Y = make_attention_task("linear", n_samples=40, seq_len=3, d=3, rank=1, random_state=2)
    with pytest.raises(ValueError, match="attention='auto' chooses the class by held-out risk"):
        AttentionRankEstimator(attention="auto", max_epochs=1).fit(X, Y)
    with pytest.raises(ValueError, match="student_options applies to an explicit attention"):
        AttentionRankEstimator(attention="auto", rank_grid=[1], max_epochs=1,
                               student_options={"hidden": 4}).fit(X, Y)
    with pytest.raises(ValueError, match="feature_map applies to attention='kernel' only"):
        AttentionRankEstimator(attention="auto", rank_grid=[1], feature_map="relu").fit(X, Y)


@pytest.mark.parametrize("teacher, sizes, grid, r_star", [
    ("linear", dict(n_samples=520, seq_len=5, d=7, rank=2, noise=0.07, random_state=20240611),
     "1-4", 2),
    ("softmax", dict(n_samples=640, seq_len=6, d=6, rank=3, noise=0.03, random_state=987),
     "1-5", 3),
])
def test_the_command_chooses_the_class_of_a_teacher_file_and_finds_its_rank(
        tmp_path, capsys, teacher, sizes, grid, r_star):
    X, Y = make_attention_task(teacher, **sizes)
    saved = _sweep_file(tmp_path, X, Y, "--rank-grid", grid, "--epochs", "120", "--seed", "3")
    text = capsys.readouterr().out
    assert f"attention class: {teacher} (full-rank held-out risks: fixed " in text
    assert f"Rank sweep: {teacher} students on" in text
    assert f"estimated r* = {r_star}; estimated noise floor" in text
    assert "warning:" not in text
    assert saved["config"]["attention"] == "auto" and saved["attention"] == teacher
    assert saved["rank_"] == r_star and saved["warnings"] == []
    risks = saved["class_risks"]
    assert set(risks) == {"fixed", "linear", "softmax"}
    assert risks[teacher] < 0.2 * min(v for k, v in risks.items() if k != teacher)
    assert saved["heldout_r2"] > 0.9 and saved["estimate_supported"] is True
    assert saved["noise_floor_given"] is None
    assert saved["noise_floor_estimated"] == pytest.approx(saved["noise_floor_"])
    # the record says how the students trained: the CPU's dtype, and the restarts of the
    # default n_init="auto" (these fits needed no second restart: one per rank)
    assert saved["compute_dtype"] == "float32" and saved["n_init"] == 1


def _noise_pair():
    """X and Y drawn independently: pure noise."""
    return (np.random.default_rng(31).normal(size=(300, 4, 5)),
            np.random.default_rng(32).normal(size=(300, 4, 5)))


def _shuffled_pair():
    """A linear teacher whose targets are shuffled across sequences: Y independent of X."""
    X, Y = make_attention_task("linear", n_samples=300, seq_len=4, d=5, rank=2, noise=0.02,
                               random_state=4242)
    return X, Y[np.random.default_rng(5).permutation(len(Y))]


@pytest.mark.parametrize("pair", [_noise_pair, _shuffled_pair])
def test_targets_independent_of_x_give_no_rank_without_a_warning(tmp_path, capsys, pair):
    X, Y = pair()
    with pytest.warns(UserWarning, match="is not supported by the data"):
        saved = _sweep_file(tmp_path, X, Y, "--rank-grid", "1-3", "--epochs", "40")
    text = capsys.readouterr().out
    lines = [line for line in text.splitlines() if line.startswith("warning:")]
    assert any("is not supported by the data" in line for line in lines), text
    assert saved["estimate_supported"] is False and saved["heldout_r2"] < 0.1
    assert any("is not supported by the data" in w for w in saved["warnings"])
    assert [f"warning: {w}" for w in saved["warnings"]] == lines


def test_a_given_floor_is_used_recorded_and_never_asked_for(tmp_path, capsys):
    # the measured scenario: a rank-3 linear teacher, noise 0.05 (variance 0.0025)
    X, Y = make_attention_task("linear", n_samples=2000, seq_len=6, d=12, rank=3, noise=0.05,
                               random_state=0)
    saved = _sweep_file(tmp_path, X, Y, "--rank-grid", "1-8", "--attention", "linear",
                        "--epochs", "100", "--noise-floor", "0.0025")
    text = capsys.readouterr().out
    assert re.search(r"estimated r\* = 3; noise floor = 0.0025 \(given\); the sweep's own "
                     r"estimate [0-9.]+", text)
    assert "give --noise-floor" not in text and "warning:" not in text
    assert saved["rank_"] == 3 and saved["noise_floor_"] == 0.0025
    assert saved["noise_floor"] == 0.0025 and saved["noise_floor_given"] == 0.0025
    # the sweep's own estimate of the teacher's noise variance, 0.05 ** 2, from 400 held-out
    # sequences of 6 x 12 values (relative standard error about 1 %)
    assert saved["noise_floor_estimated"] == pytest.approx(0.05**2, rel=0.05)
    assert [r["reached"] for r in saved["records"]] == [False, False] + [True] * 6
    assert saved["warnings"] == []


def _record(**changes):
    record = dict(config=dict(attention="softmax", data="mine.npz", r_star=None),
                  r_star=None, rank_=8, noise_floor=0.0025, noise_floor_=0.0025,
                  noise_floor_given=0.0025, noise_floor_estimated=0.6827, excess_tol=0.02,
                  floor_reached=False, reference_risk=0.698, attention="softmax",
                  class_risks=None, heldout_r2=0.317, estimate_supported=False, records=[])
    record.update(changes)
    return record


def test_the_warnings_of_a_given_floor_do_not_ask_for_it():
    # the measured scenario with softmax students: no rank reaches the given floor
    lines = sweep_warnings(_record())
    assert len(lines) == 2
    assert lines[0].startswith("no rank reaches the given noise floor 0.0025 within 0.02 "
                               "(lowest held-out risk 0.6827)")
    assert "--attention auto" in lines[0] and "--noise-floor" not in lines[0]
    assert lines[1].startswith("the softmax students do no better than a least-squares map")
    # a given floor above what a least-squares map reaches: check the value given
    (line,) = sweep_warnings(_record(noise_floor_=0.9, noise_floor_given=0.9,
                                     estimate_supported=True))
    assert "the given noise floor 0.9 lies above the held-out risk 0.698" in line
    assert "check the value of --noise-floor" in line
    # an estimated floor not reached still asks for one
    (line,) = sweep_warnings(_record(noise_floor_given=None, noise_floor_=0.6827,
                                     estimate_supported=True,
                                     config=dict(attention="softmax", r_star=None)))
    assert "give --noise-floor" in line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sweep_warnings(_record(floor_reached=True, estimate_supported=True)) == []


X_SHORT, Y_SHORT = make_attention_task("linear", n_samples=96, seq_len=3, d=4, rank=2, random_state=0)


def test_a_grid_cut_to_the_chosen_class_limit_says_so():
    with pytest.warns(UserWarning, match=r"rank_grid was cut to the rank limit \d of the "
                                         r"chosen class \w+: ranks \d-8 left out") as caught:
        est = AttentionRankEstimator(attention="auto", rank_grid=list(range(1, 9)),
                                     max_epochs=3, random_state=0).fit(X_SHORT, Y_SHORT)
    limit = {"fixed": 3}.get(est.attention_, 4)  # L = 3, d = 4
    assert est.ranks_.tolist() == list(range(1, limit + 1))
    cut = [str(w.message) for w in caught if "cut to the rank limit" in str(w.message)]
    assert cut == [f"rank_grid was cut to the rank limit {limit} of the chosen class "
                   f"{est.attention_}: ranks {limit + 1}-8 left out, ranks "
                   f"{list(range(1, limit + 1))} trained (no rank above the limit can be "
                   "trained; r* is at most the limit)"]
    assert cut[0] in est.warnings_
    record = dict(records=[{"rank": r} for r in (1, 2, 3, 4)], rank_=4, noise_floor_=1.0,
                  excess_tol=0.01, reference_risk=0.5, floor_reached=False,
                  attention="linear", config=dict(rank_grid=list(range(1, 21)),
                                                  attention="auto"))
    lines = sweep_warnings(record)
    assert lines[0].startswith("--rank-grid was cut to the rank limit of the linear class: "
                               "ranks 5-20 left out")
    assert not any("widen --rank-grid" in line for line in lines)
    record["records"].pop()  # a grid that stops below the limit: widening is advised
    record["config"]["rank_grid"] = [1, 2, 3]
    assert any("widen --rank-grid" in line for line in sweep_warnings(record))
