"""The Hugging Face causal path on a model that can be steered.

``tests/data/tiny_gpt2_steerable`` is a tiny ``GPT2LMHeadModel`` (|V| = 64,
n_embd = 64, 2 layers, 4 heads, context 128) trained on the induction corpus by
``python scripts/train_default_model.py --arch gpt2 --steps 1500`` (seed 0, 155 s
on one thread; the folder's ``training.json`` records the run). Unlike the random GPT-2s of
``test_hf.py`` it reads its prompt vectors, so cramming reaches targets
and ``n50`` grows with the number of prompt vectors.
"""

import importlib.util
import json
import os

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from intrinsic_rank import ReachabilityEstimator  # noqa: E402
from intrinsic_rank.datasets import make_random_targets  # noqa: E402
from intrinsic_rank.experiments import accessibility_curves  # noqa: E402
from intrinsic_rank.inspection import decoder_cell_proportions  # noqa: E402
from intrinsic_rank.nn import (  # noqa: E402
    HFCausalLMAdapter,
    as_causal_lm,
    random_prompt_hidden_states,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDER = os.path.join(ROOT, "tests", "data", "tiny_gpt2_steerable")

# measured (1 thread, seed 0): n50 = 3.00, 6.22, 7.51 for m = 1, 2, 3, slope 2.25 (R² 0.94),
# about 10 s; the assertions keep a margin of more than 2x on the slope
QUICK_LENGTHS = (2, 3, 4, 5, 6, 7, 8, 10)
QUICK_MIN_SLOPE = 1.0
# slow version (m = 1..4, 16 targets, quick cramming, auto lengths; 102 s on a loaded
# thread): n50 = 2.98, 6.12, 8.09, 8.77, slope 1.94, R² 0.925
SLOW_MIN_SLOPE = 1.0


@pytest.fixture(scope="module")
def lm():
    return as_causal_lm(FOLDER)


def test_folder_is_a_small_steerable_gpt2(lm):
    assert isinstance(lm, HFCausalLMAdapter)
    assert type(lm.model).__name__ == "GPT2LMHeadModel"
    assert (lm.vocab_size, lm.width, lm.max_length) == (64, 64, 128)
    size = sum(os.path.getsize(os.path.join(FOLDER, f)) for f in os.listdir(FOLDER))
    assert size < 1_000_000
    assert os.path.isfile(os.path.join(FOLDER, "model.safetensors"))


def test_n50_grows_with_the_number_of_prompt_vectors(lm):
    # short protocol: 4 targets per point, 300 steps / patience 100, fixed lengths
    result = accessibility_curves(model=lm, n_memory=(1, 2, 3), lengths=QUICK_LENGTHS,
                                  n_targets=4, max_steps=300, patience=100, random_state=0)
    n50 = [f["n50"] for f in result.n50]
    assert all(np.isfinite(n50)), n50
    assert n50[0] < n50[1] < n50[2], n50
    assert result.slope["slope"] > QUICK_MIN_SLOPE, result.slope


@pytest.mark.slow
def test_n50_grows_with_the_number_of_prompt_vectors_full_protocol(lm):
    result = accessibility_curves(model=lm, n_memory=(1, 2, 3, 4), n_targets=16, quick=True,
                                  random_state=0)
    n50 = [f["n50"] for f in result.n50]
    assert all(a < b for a, b in zip(n50, n50[1:])), n50
    assert result.slope["slope"] > SLOW_MIN_SLOPE, result.slope
    assert result.slope["r2"] > 0.9
    assert result.slope["slope"] < result.bound["box_slope_bound"] <= result.bound["slope_bound"]


def test_decoder_cells_run_through_the_hf_head(lm):
    X = make_random_targets(4, 4, vocab_size=64, random_state=0)
    est = ReachabilityEstimator(model=FOLDER, n_memory=1, max_epochs=20, patience=10,
                                n_cell_samples=2**14, random_state=0).fit(X)
    p = est.geometry_.cells.proportions
    assert p.shape == (64,)
    assert p.min() >= 0 and p.sum() == pytest.approx(1.0, abs=1e-12)
    # the closed form c = -mean ln p_t over the non-empty cells, computed here independently
    nonempty = p[p > 0]
    decay = est.geometry_.decay
    assert decay["closed_form"] == pytest.approx(-np.mean(np.log(nonempty)), rel=1e-9)
    assert est.geometry_.decay["n_empty"] == int((p == 0).sum())
    # c >= ln N for N non-empty cells (equality only for equal cells)
    assert est.geometry_.decay["closed_form"] >= np.log(len(nonempty)) - 1e-9
    assert np.isfinite(est.geometry_.cell_slope_bound) and est.geometry_.cell_slope_bound > 0


def test_argmax_cells_match_the_gpt2_heads_own_argmax(lm):
    # p_t of the box of measured hidden states, against an independent Monte Carlo
    # estimate on fresh points with the GPT-2's own lm_head module
    hidden = random_prompt_hidden_states(lm, n_memory=1, n_tokens=8, n_prompts=64,
                                         random_state=0)
    flat = np.asarray(hidden, dtype=np.float64).reshape(-1, 64)
    cells = decoder_cell_proportions(lm, flat, n_samples=2**15, random_state=0)
    rng = np.random.RandomState(1)
    points = torch.as_tensor(rng.uniform(flat.min(0), flat.max(0), size=(2**15, 64)),
                             dtype=torch.float32)
    with torch.no_grad():
        tokens = lm.model.lm_head(points).argmax(-1).numpy()
    mine = np.bincount(tokens, minlength=64) / len(tokens)
    assert cells.proportions.sum() == pytest.approx(1.0)
    # total variation between two 2**15-point estimates of the same law: small
    assert 0.5 * np.abs(cells.proportions - mine).sum() < 0.03


@pytest.mark.slow
def test_folder_is_what_the_training_script_produces(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "train_default_model", os.path.join(ROOT, "scripts", "train_default_model.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with open(os.path.join(FOLDER, "training.json")) as handle:
        facts = json.load(handle)
    out = tmp_path / "gpt2"
    script.main(["--arch", "gpt2", "--steps", str(facts["steps"]), "--seed", str(facts["seed"]),
                 "--threads", "1", "--out", str(out)])
    shipped = as_causal_lm(FOLDER)
    rebuilt = as_causal_lm(str(out))
    ids = torch.tensor([[1, 2, 3, 4, 5, 1, 2, 3]])
    with torch.no_grad():
        torch.testing.assert_close(rebuilt.logits(rebuilt.embed(ids)),
                                   shipped.logits(shipped.embed(ids)), atol=1e-4, rtol=1e-4)
