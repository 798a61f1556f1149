"""Min-IP phase-transition experiment: witness family, fits, records, CLI."""

import itertools
import json

import numpy as np
import pytest
import torch

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import (
    make_min_ip_family_pools,
    make_min_ip_witness_family,
    make_min_ip_witness_suite,
    min_ip_targets,
    witness_length2,
)
from intrinsic_rank.experiments import (
    min_ip_ood_scaling,
    min_ip_phase_transition,
    plot_min_ip,
    summarize_min_ip,
)
from intrinsic_rank.experiments.min_ip import _transition as min_ip_module
from intrinsic_rank.metrics import exact_sequence_error
from intrinsic_rank.nn import KernelAttentionStudent, NormalizedKernelHead

# ------------------------------------------------------------ the witness family


def test_family_is_every_witness_with_the_gap_plus_every_anchor():
    X, y, info = make_min_ip_witness_family(
        n_bits=12, n_codewords=9, min_gap=2, random_state=3, return_info=True
    )
    C = info.codewords
    O = C @ C.T
    n = len(C)
    expected = {
        (q, a, b) for q, a, b in itertools.product(range(n), repeat=3)
        if len({q, a, b}) == 3 and O[q, b] - O[q, a] >= 2
    } | {(q, u, u) for q, u in itertools.product(range(n), repeat=2) if q != u}
    got = [tuple(t) for t in info.triples.tolist()]
    assert len(got) == len(set(got)) == len(expected) and set(got) == expected
    assert info.n_anchors == n * (n - 1) and info.n_witnesses + info.n_anchors == len(X)
    assert info.n_family == len(X)
    np.testing.assert_array_equal(info.anchor, info.triples[:, 1] == info.triples[:, 2])
    # tokens, targets and the recorded overlaps agree with a brute-force minimum
    np.testing.assert_array_equal(X[:, 2], C[info.triples[:, 0]])
    np.testing.assert_array_equal(y, min_ip_targets(X, "final"))
    np.testing.assert_array_equal(y, info.overlaps[:, 0])
    # the better candidate sits where better_position says
    rows = np.arange(len(X))
    np.testing.assert_array_equal(X[rows, info.better_position], C[info.triples[:, 1]])
    # both candidate orders occur
    witness = ~info.anchor
    assert set(info.better_position[witness].tolist()) == {0, 1}
    # sorted by query, then better, then worse candidate
    assert np.all(np.diff(info.triples[:, 0]) >= 0)


def test_family_options_sampling_both_orders_length2_and_pools():
    X, y, info = make_min_ip_witness_family(
        n_bits=12, n_codewords=9, min_gap=2, random_state=3, return_info=True
    )
    Xb, yb, both = make_min_ip_witness_family(
        n_bits=12, n_codewords=9, min_gap=2, random_state=3, both_orders=True,
        return_info=True,
    )
    assert len(Xb) == len(X) + info.n_witnesses and both.n_anchors == info.n_anchors
    Xs, ys, sample = make_min_ip_witness_family(
        n_bits=12, n_codewords=9, min_gap=2, random_state=3, n_sequences=50,
        return_info=True,
    )
    assert len(Xs) == 50 and sample.n_family == len(X)
    assert {tuple(t) for t in sample.triples.tolist()} <= {tuple(t) for t in info.triples.tolist()}
    Xn, _, none = make_min_ip_witness_family(
        n_bits=12, n_codewords=9, min_gap=2, anchors=False, random_state=3, return_info=True
    )
    assert none.n_anchors == 0 and len(Xn) == info.n_witnesses
    # length 2 on the same tokens: (better, query), same final target
    X2, y2 = witness_length2(X, info)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(X2[:, 1], X[:, 2])
    # disjoint pools
    X_tr, y_tr, X_te, y_te, pools = make_min_ip_family_pools(
        n_bits=12, n_train_codewords=8, n_test_codewords=8, min_gap=2,
        n_test_sequences=40, random_state=0,
    )
    train = {w.tobytes() for w in pools.train_codewords}
    assert not any(w.tobytes() in train for w in pools.test_codewords)
    assert len(X_te) == 40 and len(X_tr) == pools.train.n_family
    with pytest.raises(ValueError, match="the family has only"):
        make_min_ip_witness_family(n_bits=12, n_codewords=5, n_sequences=10**6)
    with pytest.raises(ValueError, match="no witness with overlap gap >= 12"):
        make_min_ip_witness_family(n_bits=12, n_codewords=5, min_gap=12, anchors=False)


def _fixed_gap_rank_one_head(gap):
    """Uniform attention (rank 1), values x, readout 1.5 <q, o> - (|q| + gap) / 2."""
    ones = lambda X: torch.ones(*X.shape[:-1], 1, dtype=X.dtype)  # noqa: E731
    return NormalizedKernelHead(
        ones, ones, lambda X: X, lambda X: 1.5 * X, lambda X: -(X.sum(-1) + gap) / 2
    )


@pytest.mark.parametrize("gap", [1, 2])
def test_fixed_gap_suites_are_solved_exactly_by_rank_one(gap):
    # Why make_min_ip_witness_suite cannot show a rank transition: with one
    # fixed gap the target <q, a> = (<q, a> + <q, b> - gap) / 2 is affine in
    # the uniform average of the tokens.
    X, y = make_min_ip_witness_suite(n_bits=24, n_codewords=400, n_sequences=1272,
                                     gap=gap, random_state=0)
    out = _fixed_gap_rank_one_head(gap)(torch.tensor(X))[:, -1].numpy()
    np.testing.assert_allclose(out, y, atol=1e-9)
    # ... and the same head fails the family, whose gaps vary and which has anchors
    Xf, yf = make_min_ip_witness_family(n_bits=24, n_codewords=16, min_gap=3, random_state=0)
    out = _fixed_gap_rank_one_head(3)(torch.tensor(Xf))[:, -1].numpy()
    assert exact_sequence_error(yf, out) > 0.3


@pytest.mark.parametrize("rank", [1, 4])
def test_weighted_average_identity_behind_the_anchors(rank):
    # For any kernel head without positions, out(u, w, q) is the average of
    # out(u, u, q) and out(w, w, q) with weight lam on the first.
    X, y, info = make_min_ip_witness_family(
        n_bits=12, n_codewords=8, min_gap=2, random_state=1, return_info=True
    )
    student = KernelAttentionStudent(d=12, d_out=1, ranks=[rank], hidden=16, random_state=2)
    q, u, w = info.codewords[info.triples[~info.anchor][0]]
    seqs = torch.tensor(np.array([[u, w, q], [u, u, q], [w, w, q]]), dtype=torch.float64)
    student = student.double()
    with torch.no_grad():
        for p in student.parameters():
            p.add_(0.5 * torch.randn_like(p))
        out = student(seqs)[:, 0, -1, 0].numpy()
        alpha = student.attention_weights(seqs[:1])[0, 0, -1].numpy()  # alpha(q, u), (q, w), (q, q)
    lam = (2 * alpha[0] + alpha[2]) / (2 * alpha.sum())
    assert out[0] == pytest.approx(lam * out[1] + (1 - lam) * out[2], rel=1e-9, abs=1e-9)


# ------------------------------------------------------------------ training


@pytest.mark.filterwarnings("ignore")  # the sweep's r* selection warnings: not read here
def test_rank_one_fails_the_anchored_family_where_rank_eight_and_dense_fit_it():
    X, y, info = make_min_ip_witness_family(
        n_bits=12, n_codewords=8, min_gap=2, random_state=0, return_info=True
    )
    options = dict(validation_fraction=0.0, max_epochs=200, lr=3e-3, batch_size=32,
                   student_options={"hidden": 32}, random_state=0)
    kernel = AttentionRankEstimator(attention="kernel", rank_grid=[1, 8], **options).fit(X, y)
    out = kernel.predict_per_rank(X)
    assert exact_sequence_error(y, out[:, 0]) > 0.15  # measured 0.28
    assert exact_sequence_error(y, out[:, 1]) == 0.0
    dense = AttentionRankEstimator(attention="dense", **options).fit(X, y)
    assert exact_sequence_error(y, dense.predict(X)) == 0.0
    # the same tokens at length 2: rank 1 fits them
    X2, y2 = witness_length2(X, info)
    short = AttentionRankEstimator(attention="kernel", rank=1, **options).fit(X2, y2)
    assert exact_sequence_error(y2, short.predict(X2)) == 0.0


def test_phase_transition_records_summary_and_plot(tmp_path):
    result = min_ip_phase_transition(
        rank_grid=[1, 8], n_seeds=2, n_bits=12, n_codewords=8, min_gap=3, max_epochs=3,
        lr=3e-3, hidden=8,
    )
    cfg = result.config
    assert cfg["rank_grid"] == [1, 8] and cfg["lengths"] == [3, 2] and cfg["min_gap"] == 3
    # 2 seeds x 2 lengths x (2 kernel ranks + dense)
    assert len(result.records) == 12
    keys = {"length", "seed", "model", "rank", "error", "witness_error", "anchor_error",
            "mse", "n_sequences", "seconds"}
    assert all(set(rec) == keys for rec in result.records)
    assert {(rec["model"], rec["rank"]) for rec in result.records} == {
        ("kernel", 1), ("kernel", 8), ("dense", 12)}
    for rec in result.records:
        assert 0 <= rec["error"] <= 1 and 0 <= rec["anchor_error"] <= 1
    rows = [r for r in result.summary if r["model"] == "kernel" and r["length"] == 3]
    errors = [[rec["error"] for rec in result.records
               if rec["model"] == "kernel" and rec["length"] == 3 and rec["rank"] == r]
              for r in (1, 8)]
    assert [row["error_mean"] for row in rows] == pytest.approx([np.mean(e) for e in errors])
    assert [row["error_max"] for row in rows] == [max(e) for e in errors]
    assert set(result.transition) == {3, 2} and len(result.rank_bound) == 2
    assert all(b >= 1 for b in result.rank_bound)
    # length 2 uses the same sequences (one per length-3 sequence)
    n3 = {rec["seed"]: rec["n_sequences"] for rec in result.records if rec["length"] == 3}
    n2 = {rec["seed"]: rec["n_sequences"] for rec in result.records if rec["length"] == 2}
    assert n3 == n2
    ood = min_ip_ood_scaling(
        settings=[{"n_bits": 8, "pool": 10, "n_train_sequences": 150}], rank_grid=[1, 2],
        n_seeds=1, n_test_sequences=60, max_epochs=2, hidden=8,
    )
    assert [(r["model"], r["rank"]) for r in ood.records] == [
        ("kernel", 1), ("kernel", 2), ("dense", 8)]
    assert all(r["n_train_sequences"] == 150 and r["n_test_sequences"] == 60
               for r in ood.records)
    assert set(ood.transition[0]) == {"n_bits", "pool", "transition_rank",
                                      "kernel_best_test_error", "dense_test_error_mean"}
    fig = plot_min_ip(result, ood, path=str(tmp_path / "min_ip.png"))
    assert len(fig.axes) == 2
    assert (tmp_path / "min_ip.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_and_transition_helpers():
    rows = [{"rank": r, "error": e} for r, e in ((1, 0.5), (1, 0.3), (2, 0.04), (2, 0.0))]
    summary = summarize_min_ip(rows, ["rank"])
    assert [(s["rank"], s["n_seeds"]) for s in summary] == [(1, 2), (2, 2)]
    assert min_ip_module._transition([1, 2, 4], [0.5, 0.04, 0.0], 0.05) == 2
    assert min_ip_module._transition([1, 2], [0.5, 0.3], 0.05) is None
    with pytest.raises(ValueError, match="lengths"):
        min_ip_phase_transition(lengths=(4,), max_epochs=1)
    with pytest.raises(ValueError, match="n_train_sequences"):
        min_ip_ood_scaling(settings=[{"n_bits": 8, "pool": 10}], max_epochs=1)


def test_min_ip_command_prints_tables_and_saves_png_and_json(tmp_path, capsys, monkeypatch):
    # The CLI runs the quick version; shrink it so that the test stays fast.
    monkeypatch.setattr(min_ip_module, "_QUICK_OOD_SETTINGS",
                        ({"n_bits": 8, "pool": 18, "n_train_sequences": 120},))
    out = tmp_path / "run"
    status = main(["min-ip", "--quick", "--n-seeds", "1", "--rank-grid", "1,2", "--epochs", "2",
                   "--n-bits", "12", "--n-codewords", "8", "--out", str(out), "--quiet"])
    assert status == 0
    text = capsys.readouterr().out
    assert "error_mean" in text and "test_error_mean" in text
    assert "length 3: transition" in text and "m = 8, pools of 18: transition" in text
    assert "dense softmax per seed" in text
    assert (out / "min_ip.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "min_ip.json").read_text())
    kinds = {rec["experiment"] for rec in saved["records"]}
    assert kinds == {"in_sample", "suite", "ood"}
    assert saved["config"]["in_sample"]["rank_grid"] == [1, 2]
    # the paper-like suite: its sizes, the command's ranks and budget
    assert (saved["config"]["suite"]["n_sequences"], saved["config"]["suite"]["n_bits"]) == (
        1272, 24)
    assert saved["config"]["suite"]["rank_grid"] == [1, 2]
    assert "paper-like suite (1272 sequences of 24 bits): transition" in text
    assert saved["config"]["in_sample"]["max_epochs"] == 2
    assert set(saved["transition"]["in_sample"]) == {"3", "2"}


def test_min_ip_command_reports_bad_input(tmp_path, capsys):
    status = main(["min-ip", "--rank-grid", "1,70", "--n-bits", "6", "--n-codewords", "6",
                   "--epochs", "1", "--no-ood", "--out", str(tmp_path), "--quiet"])
    assert status == 2
    assert "exceeds the feature-rank limit" in capsys.readouterr().err


# ------------------------------------------------------------------ slow


@pytest.mark.slow
def test_full_phase_transition_as_measured():
    """The full in-sample experiment (about 3 minutes on 2 cores).

    Asserts what was measured on 3 seeds, with margins: rank 1 fails the
    length-3 family on every seed (measured 0.31-0.46), ranks 32 and 64 fit
    it on every seed (0.00), dense is exact on every seed, and at length 2
    rank 1 fits the same tokens (0.00).
    """
    result = min_ip_phase_transition()
    by = {(r["length"], r["model"], r["rank"]): r for r in result.summary}
    assert by[(3, "kernel", 1)]["error_min"] > 0.2
    assert by[(3, "kernel", 32)]["error_max"] <= 0.02
    assert by[(3, "kernel", 64)]["error_max"] <= 0.02
    assert by[(3, "dense", 24)]["error_max"] == 0.0
    assert by[(2, "kernel", 1)]["error_max"] <= 0.02
    assert by[(3, "kernel", 1)]["error_mean"] > by[(3, "kernel", 2)]["error_mean"] > (
        by[(3, "kernel", 16)]["error_mean"])
    assert result.transition[3] is not None and 2 < result.transition[3] <= 16


def test_min_ip_reports_its_fits_through_steps_not_prints(capsys):
    from intrinsic_rank.experiments import min_ip_phase_transition

    min_ip_phase_transition(rank_grid=[1, 2], n_seeds=1, n_bits=12, n_codewords=8, min_gap=3,
                            max_epochs=2, hidden=8, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""  # no line per fit on stdout; the bar is off a terminal
    assert "seed 0 length" not in captured.err
