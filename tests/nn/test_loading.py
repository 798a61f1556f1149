"""Your own model, as users hold it: a hub id in the local Hugging Face cache, an instance.

A fake cache is built in the layout ``huggingface_hub`` reads
(``models--owner--name/refs/main`` and ``snapshots/<commit>/``), holding a tiny
GPT-NeoX saved with its tokenizer; the network is closed for these tests, so a
download tried anywhere would fail them.
"""

import socket

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import head_facts
from intrinsic_rank.nn import load_model

tf = pytest.importorskip("transformers")
hub = pytest.importorskip("huggingface_hub")

HUB_ID, COMMIT = "EleutherAI/pythia-160m", "0123456789abcdef"


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(40)}
    vocab["[UNK]"] = 40
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return tf.PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]",
                                      bos_token="w0", eos_token="w1")


@pytest.fixture
def no_network(monkeypatch):
    """Every connection attempt fails the test: nothing may be downloaded."""
    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def cache(tmp_path, monkeypatch, no_network):
    """A Hugging Face cache holding HUB_ID (a tiny GPT-NeoX and its tokenizer)."""
    root = tmp_path / "hub"
    repo = root / ("models--" + HUB_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    torch.manual_seed(0)
    model = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        vocab_size=41, rotary_pct=0.25, max_position_embeddings=64, bos_token_id=0,
        eos_token_id=1))
    model.save_pretrained(snapshot)
    _tokenizer().save_pretrained(snapshot)
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(root))
    return root, snapshot, model


def test_a_hub_id_in_the_cache_loads_offline_as_its_folder(cache):
    root, snapshot, model = cache
    loaded = load_model(HUB_ID, progress=False)
    assert loaded.label == HUB_ID and type(loaded.module).__name__ == "GPTNeoXForCausalLM"
    assert loaded.tokenizer("w3 w4", add_special_tokens=False)["input_ids"] == [3, 4]
    facts = head_facts(HUB_ID, 1, 2)
    assert (facts.model, facts.family, facts.rotary_dim) == (HUB_ID, "gpt_neox", 2)
    own = model.gpt_neox.layers[1].attention.query_key_value.weight.detach().double()
    np.testing.assert_array_equal(facts.w_q, own.reshape(4, 3, 8, 32)[2, 0].numpy().T)


def test_an_instance_works_like_the_folder_it_was_loaded_from(cache, tmp_path):
    root, snapshot, _ = cache
    # loaded by transformers from the cache: the id, the tokenizer
    instance = tf.AutoModelForCausalLM.from_pretrained(snapshot)
    loaded = load_model(instance)
    assert loaded.module is instance and loaded.label == HUB_ID
    assert loaded.tokenizer is not None and loaded.tokenizer.bos_token == "w0"
    # from an ordinary folder: its name and tokenizer
    instance.save_pretrained(tmp_path / "mine")
    _tokenizer().save_pretrained(tmp_path / "mine")
    again = load_model(tf.AutoModelForCausalLM.from_pretrained(tmp_path / "mine"))
    assert again.label == "mine" and again.tokenizer.eos_token == "w1"
    # built in Python: nothing to bring
    built = load_model(tf.GPTNeoXForCausalLM(instance.config.__class__(**{
        k: v for k, v in instance.config.to_dict().items() if k != "_name_or_path"})))
    assert built.tokenizer is None and built.label == "GPTNeoXForCausalLM"


def test_the_command_reads_a_cached_hub_id(cache, tmp_path):
    import json

    from intrinsic_rank.cli import main

    status = main(["head-ranks", HUB_ID, "--quick", "--heads", "L1H2", "--corpora", "random",
                   "--no-impose", "--epochs", "5", "--jobs", "1", "--out",
                   str(tmp_path / "out"), "--quiet"])
    assert status == 0
    saved = json.loads((tmp_path / "out" / "head_ranks.json").read_text())
    assert saved["config"]["model"] == HUB_ID and len(saved["records"]) == 1


@pytest.mark.parametrize("name", ["Qwen/Qwen3-0.6B", "someone/model.v2"])
def test_a_hub_id_not_in_the_cache_is_one_line_and_no_download(cache, tmp_path, capsys, name):
    from intrinsic_rank.cli import main

    root, _, _ = cache
    with pytest.raises(ValueError, match=rf"nor a Hugging Face hub id in the local cache "
                                         rf"{root} \(nothing is ever downloaded") as error:
        load_model(name)
    assert "\n" not in str(error.value)
    assert main(["head-ranks", name, "--quick", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"model={name!r} is not 'default'" in err and len(err.strip().splitlines()) == 1
