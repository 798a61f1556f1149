"""A model with low-rank queries saved as a folder stock transformers loads, with its factors.

The saved folder's loss equals the loss of the edited model in memory; the source model's
weights never change; a folder that exists and is not empty, or a file, is refused before
anything is written; an interrupted save leaves nothing that looks finished.
"""

import os

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    imposed_queries,
    lm_loss,
    load_query_factors,
    model_query_bases,
    query_edits,
    save_low_rank_model,
)
from intrinsic_rank.nn import LoadedModel

IDS = np.random.default_rng(0).integers(0, 64, size=(6, 16))


@pytest.fixture(scope="module")
def llama():
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
    model.eval()
    bases = model_query_bases(model, IDS, max_windows=2)
    ranks = {key: 1 + (key[0] + key[1]) % 4 for key in bases}
    edits, factors = query_edits(bases, ranks)
    return LoadedModel(model, None, "tiny-llama"), edits, factors


def _snapshot(module):
    return {name: p.detach().clone() for name, p in module.state_dict().items()}


def test_stock_transformers_loads_the_saved_model_with_the_edited_loss(llama, tmp_path):
    tf = pytest.importorskip("transformers")
    loaded, edits, factors = llama
    snapshot = _snapshot(loaded.module)
    with imposed_queries(loaded, edits):
        expected = lm_loss(loaded, IDS)
    path = save_low_rank_model(loaded, factors, tmp_path / "cut", record={"note": "test"})
    assert all(torch.equal(loaded.module.state_dict()[k], v) for k, v in snapshot.items())
    again = tf.AutoModelForCausalLM.from_pretrained(path)
    assert lm_loss(again, IDS) == pytest.approx(expected, abs=1e-6)
    for (layer, head), (A, _, C) in factors.items():
        rows = again.model.layers[layer].self_attn.q_proj.weight[head * 8:(head + 1) * 8]
        assert np.allclose(rows.detach().double().numpy().T, A @ C, atol=1e-6)
        assert np.linalg.matrix_rank(rows.detach().double().numpy(), tol=1e-4) == C.shape[0]
    read, manifest = load_query_factors(path)
    assert manifest["record"] == {"note": "test"} and manifest["source"] == "tiny-llama"
    assert sorted(read) == sorted(factors)
    assert all(np.allclose(read[k][0], factors[k][0]) for k in factors)


def test_an_existing_folder_or_a_file_is_refused_before_anything_is_written(llama, tmp_path):
    loaded, _, factors = llama
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        save_low_rank_model(loaded, factors, full)
    assert os.listdir(full) == ["keep.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(FileExistsError, match="is a file"):
        save_low_rank_model(loaded, factors, afile)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert os.path.isfile(os.path.join(save_low_rank_model(loaded, factors, empty),
                                       "query_factors.npz"))


def test_an_interrupted_save_leaves_no_folder(llama, tmp_path, monkeypatch):
    loaded, _, factors = llama
    snapshot = _snapshot(loaded.module)
    import intrinsic_rank.inspection._low_rank_model as low_rank

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(low_rank.np, "savez", stop)
    with pytest.raises(KeyboardInterrupt):
        save_low_rank_model(loaded, factors, tmp_path / "cut")
    assert os.listdir(tmp_path) == []
    assert all(torch.equal(loaded.module.state_dict()[k], v) for k, v in snapshot.items())


def test_bad_factors_are_refused_before_anything_is_written(llama, tmp_path):
    loaded, _, factors = llama
    key = next(iter(factors))
    A, a, C = factors[key]
    with pytest.raises(ValueError, match="must be A"):
        save_low_rank_model(loaded, {key: (A, a, C[:, :3])}, tmp_path / "cut")
    with pytest.raises(ValueError, match="NaN"):
        save_low_rank_model(loaded, {key: (A * np.nan, a, C)}, tmp_path / "cut")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="not a folder of low-rank queries"):
        load_query_factors(tmp_path)
