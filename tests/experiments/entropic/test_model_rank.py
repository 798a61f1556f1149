"""``model-rank``: r*_model(eps), every allocation at a grid of budgets, the maps, the
currency check, healing, transfer and the saved model, on the embedded model (its random
and repeated corpora need no tokenizer) and on a tiny random Llama saved as a folder."""

import json
import os

import numpy as np
import pytest
import torch

from intrinsic_rank import cli
from intrinsic_rank.experiments.entropic import _model_search
from intrinsic_rank.experiments.entropic._model_currency import PROXIES
from intrinsic_rank.experiments.entropic._model_rank import model_rank, model_rank_verdicts
from intrinsic_rank.inspection import lm_loss, load_query_factors

SMALL = dict(corpora=["random", "repeated"], n_fit=12, n_validation=6, n_test=6, length=24,
             metric_windows=3, n_pairs=6, heal_steps=4, heal_every=2, budgets=[0.4, 0.7],
             epsilons=[0.01, 0.05], map_distill="none")


def _entries(cache):
    """The measured losses by (label, calibration, total, split), the ranks' digest left out."""
    out = {}
    for key, value in cache.items():
        parts = key.split("|")
        if len(parts) == 5:
            out[parts[0], parts[1], int(parts[2]), parts[3]] = value
    return out


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model_rank")
    return model_rank("default", checkpoint=str(folder / "parts"),
                      save=str(folder / "saved"), **SMALL), folder


def test_the_frame_holds_every_allocation_calibration_and_budget(result):
    out, _ = result
    frame = out.frame
    grid = frame[frame.stage == "grid"]
    assert set(grid.corpus) == {"random", "repeated"}
    assert set(grid.allocation) == {"output share", "uniform", "query energy", "r*_attn"}
    assert set(grid[grid.allocation == "output share"].calibration) == {"none", "output",
                                                                        "sequential"}
    assert set(grid[grid.allocation == "uniform"].calibration) == {"none", "output"}
    # every allocation of one budget keeps the same total (uniform exactly; the others
    # within the step of their shared threshold)
    for _, rows in grid.groupby(["corpus", "budget"]):
        exact = rows[rows.allocation.isin(["output share", "uniform"])].total_rank
        assert exact.nunique() == 1
        assert abs(rows.total_rank - exact.iloc[0]).max() <= 8
    for row in out.rows:
        base = out.unedited[row["corpus"]][row["split"]]
        assert row["rise"] == pytest.approx(row["loss"] / base - 1)


def test_r_star_model_is_the_smallest_budget_that_holds_on_validation(result):
    out, folder = result
    cache = json.load(open(folder / "parts" / "random.losses.json"))["losses"]
    base = cache["unedited|validation"]
    for found in (f for f in out.r_star_model if f["corpus"] == "random"):
        goal = (1 + found["epsilon"]) * base
        searched = {total: v for (label, cut, total, split), v in _entries(cache).items()
                    if (label, cut, split) == ("output share", "output", "validation")}
        assert searched[found["total_rank"]] <= goal
        failing = [b for b, v in searched.items() if v > goal and b < found["total_rank"]]
        step = max(1, out.config["total_rank"] // _model_search.RESOLUTION)
        assert not failing or found["total_rank"] - max(failing) <= step
        assert sum(found["ranks"].values()) == found["total_rank"]


def test_the_maps_and_their_spearman(result):
    out, _ = result
    for m in out.maps:
        grid = np.array(m["model"], dtype=float)
        assert grid.shape == (2, 4) and np.all(grid >= 1)
        assert m["attn"] is not None and -1 <= m["rho"] <= 1 and m["n"] == 8


def test_the_currency_check_measures_each_pair_alone(result):
    out, folder = result
    pairs = out.currency["pairs"]
    assert len(pairs) == 6 and set(out.currency["spearman"]) == set(PROXIES)
    cache = json.load(open(folder / "parts" / "random.losses.json"))["losses"]
    base = cache["unedited|validation"]
    entries = _entries(cache)
    for p in pairs:  # the rise is the loss measured with that head alone cut
        key = (f"pair L{p['layer']}H{p['head']} r{p['rank']}", "output", p["rank"], "validation")
        assert p["rise"] == pytest.approx(entries[key] / base - 1)


def test_the_saved_model_gives_the_reported_test_loss(result):
    out, folder = result
    factors, manifest = load_query_factors(out.saved)
    record = manifest["record"]
    assert record["healed"] is True and record["epsilon"] == 0.01
    saved = os.path.join(out.saved, "model.pt")
    windows = _model_search.corpus_windows(
        __import__("intrinsic_rank.nn", fromlist=["load_model"]).load_model("default"),
        "random", n_fit=12, n_validation=6, n_test=6, length=24, random_state=0)
    assert lm_loss(saved, windows["test"]) == pytest.approx(record["test_loss"], abs=1e-4)
    assert sum(int(c.shape[0]) for _, _, c in factors.values()) <= record["total_rank"]


def test_a_rerun_reads_every_loss_from_the_checkpoint(result, monkeypatch):
    _, folder = result
    calls = []
    real = _model_search.lm_loss
    monkeypatch.setattr(_model_search, "lm_loss", lambda *a, **k: calls.append(1) or real(
        *a, **k))
    model_rank("default", checkpoint=str(folder / "parts"), **dict(SMALL, n_pairs=0,
                                                                   heal=False))
    assert calls == []


def test_every_verdict_outcome_is_printed():
    def synthetic(share, rise, ours, others, rho, fisher):
        rows = [dict(corpus="code", stage="grid", split="test", budget=0.5, allocation=k,
                     calibration=c, healed=False, loss=v)
                for k, c, v in [("output share", "output", ours)] +
                [(k, "none", v) for k, v in zip(("uniform", "query energy"), others)]]
        found = [dict(corpus="code", epsilon=0.01, rank_share=share, test_rise=rise)]
        stats = dict(rho=rho, low=rho - 0.2, high=rho + 0.1, n=60)
        currency = dict(spearman={"output share (first order)": stats,
                                  "Fisher (query)": dict(stats, rho=fisher)})
        return dict(rows=rows, r_star_model=found, currency=currency)

    verdicts = [v[2] for v in model_rank_verdicts(synthetic(0.45, 0.008, 1.0, (1.1, 1.2),
                                                            0.8, 0.3))]
    assert verdicts == ["agrees", "agrees", "agrees"]
    verdicts = [v[2] for v in model_rank_verdicts(synthetic(0.45, 0.015, 1.15, (1.1, 1.2),
                                                            0.1, 0.05))]
    assert verdicts == ["partly", "does not agree", "partly"]
    verdicts = [v[2] for v in model_rank_verdicts(synthetic(0.6, 0.03, 1.15, (1.1, 1.2),
                                                            0.1, 0.3))]
    assert verdicts == ["does not agree", "does not agree", "does not agree"]


def test_the_command_runs_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["model-rank", "default", "--corpora", "random", "--n-fit", "8",
            "--n-validation", "4", "--n-test", "4", "--length", "16", "--metric-windows",
            "2", "--n-pairs", "0", "--budgets", "0.5", "--epsilons", "0.05",
            "--save-epsilon", "0.05", "--heal-steps", "2", "--heal-every", "1",
            "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    written = sorted(os.listdir(out))
    assert {"model_rank.json", "model_rank.csv", "model_rank.png", "model_rank_maps.png",
            "model_rank_healing.png"} <= set(written)
    capsys.readouterr()
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep")
    for extra, words in ((["--epsilons", "0.05,1.5"], "--epsilons"),
                         (["--budgets", "0"], "--budgets"),
                         (["--save", str(full)], "exists and is not an empty folder"),
                         (["--save-epsilon", "0.02"], "save_epsilon=0.02 must be one of")):
        status = cli.main(argv[:-3] + ["--out", str(tmp_path / "other")] + extra + ["--quiet"])
        assert status == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3
    assert os.listdir(full) == ["mine.txt"]


def test_a_llama_folder_is_saved_and_loaded_by_stock_transformers(tmp_path):
    tf = pytest.importorskip("transformers")
    generator = torch.Generator().manual_seed(0)
    config = tf.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                            num_hidden_layers=2, intermediate_size=64, vocab_size=64,
                            max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
                            pad_token_id=0)
    model = tf.LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (0.5 if p.ndim > 1 else 0.1))
    source = tmp_path / "source"
    model.save_pretrained(source)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = model_rank(str(source), save=str(tmp_path / "cut"), **dict(
        SMALL, corpora=["random"], n_pairs=0, heal=False, map_distill=None))
    again = tf.AutoModelForCausalLM.from_pretrained(out.saved)
    record = load_query_factors(out.saved)[1]["record"]
    windows = _model_search.corpus_windows(
        __import__("intrinsic_rank.nn", fromlist=["load_model"]).load_model(str(source)),
        "random", n_fit=12, n_validation=6, n_test=6, length=24, random_state=0)
    assert lm_loss(again, windows["test"]) == pytest.approx(record["test_loss"], abs=1e-4)
    reread = tf.AutoModelForCausalLM.from_pretrained(source).state_dict()
    assert all(torch.equal(reread[k], v) for k, v in before.items())  # the source untouched


def test_a_rerun_reuses_the_healing_and_other_settings_measure_again(result, monkeypatch):
    _, folder = result
    import intrinsic_rank.experiments.entropic._model_healing as healing

    healed = []
    real = healing.heal_queries
    monkeypatch.setattr(healing, "heal_queries", lambda *a, **k: healed.append(1) or real(
        *a, **k))
    again = model_rank("default", checkpoint=str(folder / "parts"), **dict(SMALL, n_pairs=0))
    assert healed == [] and again.healing["history"]
    calls = []
    real_loss = _model_search.lm_loss
    monkeypatch.setattr(_model_search, "lm_loss", lambda *a, **k: calls.append(1) or real_loss(
        *a, **k))
    model_rank("default", checkpoint=str(folder / "parts"),
               **dict(SMALL, n_pairs=0, heal=False, n_test=5))  # other test windows
    assert len(calls) > 10


def test_an_interrupted_run_leaves_the_model_as_it_was(monkeypatch):
    from intrinsic_rank.nn import load_model

    loaded = load_model("default")
    before = {k: v.clone() for k, v in loaded.module.state_dict().items()}
    count = []
    real = _model_search.lm_loss

    def stop_on_the_fifth(*args, **kwargs):
        count.append(1)
        if len(count) == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(_model_search, "lm_loss", stop_on_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        model_rank(loaded, **dict(SMALL, n_pairs=0, heal=False))
    after = loaded.module.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_a_budget_below_one_rank_per_head_and_an_unread_model_are_one_line(tmp_path, capsys):
    # the embedded model: 8 heads of width 16, so the least budget is 8 / 128
    with pytest.raises(ValueError, match="below one query rank per head.*0.0625"):
        model_rank("default", **dict(SMALL, budgets=[0.05, 0.5]))
    status = cli.main(["model-rank", "default", "--budgets", "0.05", "--out",
                       str(tmp_path / "o"), "--quiet"])
    assert status == 2 and "smallest budget is 0.0625" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    tf = pytest.importorskip("transformers")
    encoder = tf.BertForMaskedLM(tf.BertConfig(hidden_size=16, num_attention_heads=2,
                                               num_hidden_layers=1, intermediate_size=32,
                                               vocab_size=64))
    with pytest.raises(ValueError, match="encoder") as refused:
        model_rank(encoder, **SMALL)
    assert "\n" not in str(refused.value)


def test_another_allocation_is_searched_saved_and_judged(tmp_path):
    small = dict(SMALL, corpora=["random"], n_pairs=0, heal=False, budgets=[0.5],
                 epsilons=[0.05], save_epsilon=0.05, calibrations=["none", "output"])
    out = model_rank("default", allocation="query energy", save=str(tmp_path / "saved"),
                     checkpoint=str(tmp_path / "parts"), **small)
    found = out.r_star_model[0]
    searched = out.frame[out.frame.stage == "r*_model(0.05)"]
    assert list(searched.allocation) == ["query energy"]
    entries = _entries(json.load(open(tmp_path / "parts" / "random.losses.json"))["losses"])
    # the budget found was measured with the query-energy ranks, on validation and on test
    for split in ("validation", "test"):
        assert ("query energy", "output", found["total_rank"], split) in entries
    assert searched.loss.iloc[0] == entries["query energy", "output", found["total_rank"],
                                            "test"]
    assert not any(key[0] == "output share" and key[3] == "validation" for key in entries)
    _, manifest = load_query_factors(str(tmp_path / "saved"))
    assert manifest["record"]["allocation"] == "query energy"
    claim = model_rank_verdicts(out)[1][0]
    assert "query energy allocation" in claim
    for bad, words in ((dict(allocation="energy"), "allocation must be one of"),
                       (dict(allocation="r*_attn", map_distill=None), "needs the r\\*_attn map")):
        with pytest.raises(ValueError, match=words):
            model_rank("default", **dict(small, **bad))


def test_a_loss_is_kept_under_its_ranks_not_only_their_total():
    evaluator = _model_search.ModelEvaluator.__new__(_model_search.ModelEvaluator)
    evaluator.cache = _model_search._Cache(None, "k")
    measured = []
    evaluator._measure = lambda ranks, cut, split, key: measured.append(ranks) or len(measured)
    one, other = {(0, 0): 3, (0, 1): 1}, {(0, 0): 1, (0, 1): 3}   # one label, one total
    assert evaluator.loss(one, "output", "test", label="r*_attn") == 1
    assert evaluator.loss(other, "output", "test", label="r*_attn") == 2
    assert evaluator.loss(dict(one), "output", "test", label="r*_attn") == 1  # read again
    assert measured == [one, other]


def test_a_finished_loss_is_on_disk_at_once_inside_a_command_output_stage(tmp_path):
    from intrinsic_rank.experiments.runner._stage import output_stage

    path = tmp_path / "parts" / "code.losses.json"
    with pytest.raises(KeyboardInterrupt):
        with output_stage(tmp_path, "model_rank"):
            cache = _model_search._Cache(str(path), "k")
            cache.get("unedited|test", lambda: 1.5)
            assert json.load(open(path))["losses"] == {"unedited|test": 1.5}
            raise KeyboardInterrupt  # a stop: the stage renames nothing in
    assert _model_search._Cache(str(path), "k").values == {"unedited|test": 1.5}
