"""A model's digest: its weights and configuration decide it, never its name."""

import pytest
import torch

from intrinsic_rank.nn import TinyCausalLM, load_model, model_digest, save_tiny_lm

SHAPE = dict(vocab_size=12, d_model=8, n_layers=1, n_heads=2, max_length=16)


def _tiny(seed):
    torch.manual_seed(seed)
    return TinyCausalLM(**SHAPE).eval()


def test_the_same_weights_give_the_same_digest_and_one_weight_changes_it():
    a, b = _tiny(0), _tiny(0)
    assert model_digest(a) == model_digest(b) == model_digest(load_model(a, progress=False))
    with torch.no_grad():
        weight = b.blocks[0].qkv.weight
        weight[3, 2] = torch.nextafter(weight[3, 2], torch.tensor(2.0))  # one weight, one ulp
    assert model_digest(a) != model_digest(b)


def test_two_models_under_one_file_name_differ(tmp_path):
    first, second = tmp_path / "a" / "lm.pt", tmp_path / "b" / "lm.pt"
    first.parent.mkdir()
    second.parent.mkdir()
    save_tiny_lm(_tiny(0), first)
    save_tiny_lm(_tiny(1), second)
    loaded = [load_model(str(p), progress=False) for p in (first, second)]
    assert loaded[0].label == loaded[1].label  # the name the old checkpoints keyed on
    assert model_digest(loaded[0]) != model_digest(loaded[1])
    copy = tmp_path / "c" / "other-name.pt"
    copy.parent.mkdir()
    save_tiny_lm(_tiny(0), copy)
    assert model_digest(load_model(str(copy), progress=False)) == model_digest(loaded[0])


def test_the_configuration_counts_but_not_the_keys_that_name_the_model():
    tf = pytest.importorskip("transformers")
    config = dict(hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                  num_hidden_layers=1, intermediate_size=32, vocab_size=20,
                  max_position_embeddings=32, tie_word_embeddings=True)

    def llama(**changes):
        torch.manual_seed(0)
        return tf.LlamaForCausalLM(tf.LlamaConfig(**{**config, **changes})).eval()

    base = llama()
    renamed = llama()
    renamed.config._name_or_path = "v2/my-model"
    assert model_digest(base) == model_digest(renamed)
    other = llama(rms_norm_eps=1e-3)  # the same weights, another computation
    assert model_digest(other) != model_digest(base)
    half = llama().to(torch.bfloat16)  # another dtype: other bytes
    assert model_digest(half) != model_digest(base) and len(model_digest(half)) == 64


def test_what_is_not_a_model_is_one_line():
    with pytest.raises(TypeError, match="model_digest: model must be a torch model"):
        model_digest("default")
    with torch.device("meta"):
        ghost = TinyCausalLM(**SHAPE)
    with pytest.raises(ValueError, match="meta device"):
        model_digest(ghost)
