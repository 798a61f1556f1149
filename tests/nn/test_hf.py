"""Hugging Face causal LMs from a local folder: a tiny random GPT-2 built in the test."""

import os

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from intrinsic_rank import ReachabilityEstimator  # noqa: E402
from intrinsic_rank.datasets import make_random_targets  # noqa: E402
from intrinsic_rank.nn import HFCausalLMAdapter, PromptedLM, as_causal_lm  # noqa: E402
from seeded import own_weights  # noqa: E402

VOCAB = 40


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2,
                                     n_positions=24, bos_token_id=0, eos_token_id=0)
    folder = tmp_path_factory.mktemp("tiny_gpt2")
    # the test's own weights, of std 0.2 (larger logits: steerable)
    own_weights(transformers.GPT2LMHeadModel(config), 0, gain=0.8).save_pretrained(folder)
    return folder


def test_adapter_reads_the_folder(gpt2_folder):
    lm = as_causal_lm(str(gpt2_folder))
    assert isinstance(lm, HFCausalLMAdapter)
    assert (lm.vocab_size, lm.width, lm.max_length) == (VOCAB, 16, 24)
    assert not any(p.requires_grad for p in lm.parameters())
    ids = torch.tensor([[1, 2, 3, 4]])
    # logits from embeddings agree with the model's own forward on ids
    torch.testing.assert_close(lm.logits(lm.embed(ids)), lm.model(input_ids=ids).logits)
    # the final hidden states are what the LM head reads
    hidden = lm.final_hidden(lm.embed(ids))
    torch.testing.assert_close(lm.model.get_output_embeddings()(hidden), lm.logits(lm.embed(ids)))


def test_prompted_teacher_forcing_matches_greedy_decoding(gpt2_folder):
    lm = as_causal_lm(str(gpt2_folder))
    targets = make_random_targets(3, 5, VOCAB, random_state=0)
    module = PromptedLM(lm, targets, n_memory=2, random_state=0)
    index = torch.arange(3)
    first = torch.as_tensor(targets[:, 0])
    greedy = module.generate(index, first, 5)
    # feeding the greedy output back teacher-forced predicts the same tokens
    logits = module(index, greedy)
    torch.testing.assert_close(logits.argmax(-1), greedy[:, 1:])


def test_reachability_on_a_hf_model(gpt2_folder):
    # A random model is hard to steer: LayerNorm bounds what a
    # prompt vector can add to the residual stream. The test checks the plumbing:
    # the loss falls, and reached_ agrees with greedy decoding.
    X = make_random_targets(6, 3, VOCAB, random_state=1)
    est = ReachabilityEstimator(model=str(gpt2_folder), n_memory=2, max_epochs=200,
                                patience=50, n_radius_prompts=16, random_state=0).fit(X)
    assert est.vocab_size_ == VOCAB and est.width_ == 16 and est.context_length_ == 24
    outputs = est.predict(X)
    np.testing.assert_array_equal(est.reached_, (outputs == X).all(axis=1))
    assert est.loss_.sum() < 0.9 * est.history_[0]["train_loss"]  # measured: 0.80
    again = ReachabilityEstimator(model=str(gpt2_folder), n_memory=2, max_epochs=200,
                                  patience=50, n_radius_prompts=16, random_state=0).fit(X)
    np.testing.assert_array_equal(again.memory_, est.memory_)
    with pytest.raises(ValueError, match="context is 24"):
        ReachabilityEstimator(model=str(gpt2_folder), n_memory=2).fit(np.ones((1, 24), int))
    with pytest.raises(ValueError, match=r"token id 40, which is outside"):
        ReachabilityEstimator(model=str(gpt2_folder)).fit(np.array([[1, 40]]))


def test_instance_is_accepted_and_not_modified(gpt2_folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(gpt2_folder)
    model.train()
    X = make_random_targets(2, 3, VOCAB, random_state=2)
    ReachabilityEstimator(model=model, max_epochs=3, n_radius_prompts=4, random_state=0).fit(X)
    assert model.training and all(p.requires_grad for p in model.parameters())


def test_bidirectional_model_is_rejected():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32)
    bert = transformers.BertForMaskedLM(config)
    with pytest.raises(ValueError, match="is not causal"):
        as_causal_lm(bert)


def test_folder_without_a_model(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        as_causal_lm(str(tmp_path))


def test_decode_and_decoder_cells_through_the_hf_head(gpt2_folder):
    from intrinsic_rank import bounds
    from intrinsic_rank._validation import keyed_seed
    from intrinsic_rank.inspection import decoder_cell_proportions
    from intrinsic_rank.nn import random_prompt_hidden_states

    lm = as_causal_lm(str(gpt2_folder))
    x = lm.embed(torch.tensor([[1, 2, 3, 4]]))
    with torch.no_grad():
        torch.testing.assert_close(lm.decode(lm.final_hidden(x)), lm.logits(x))
    weight, bias = lm.output_head()
    assert weight.shape == (VOCAB, 16) and bias is None  # GPT-2's tied, bias-free head
    states = random_prompt_hidden_states(lm, 2, 4, n_prompts=16, random_state=0)
    cells = decoder_cell_proportions(lm, states, n_samples=4096, random_state=0)
    assert cells.vocab_size == VOCAB and cells.argmax.counts.sum() == 4096
    flat = states.reshape(-1, 16).astype(np.float64)
    points = bounds.sample_box(flat.min(0), flat.max(0), 4096, keyed_seed(0, 0))
    real = np.bincount(bounds.argmax_cells(points, weight.detach().double().numpy()),
                       minlength=VOCAB)
    assert np.abs(cells.argmax.counts - real).sum() <= 4
    # and the estimator's refinements run on it
    X = make_random_targets(2, 3, VOCAB, random_state=1)
    est = ReachabilityEstimator(model=str(gpt2_folder), max_epochs=3, n_radius_prompts=8,
                                n_cell_samples=2048, random_state=0).fit(X)
    assert est.geometry_.decay.n_samples == 2048 and len(est.geometry_.table) == 12


def test_encoder_has_no_decoder_cells():
    from intrinsic_rank.inspection import decoder_cell_proportions
    from intrinsic_rank.nn import HFEncoderAdapter

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32)
    encoder = HFEncoderAdapter(transformers.BertModel(config).eval())
    assert encoder.has_head is False
    with pytest.raises(NotImplementedError, match="no next-token head"):
        encoder.decode(torch.zeros(1, 16))
    with pytest.raises(ValueError, match=r"\(BertModel\) has no next-token head"):
        decoder_cell_proportions(encoder, low=np.zeros(16), high=np.ones(16))


# ---------------------------------------------------------------- key-value cache


def _tiny_llama(seed=0):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        tie_word_embeddings=True)
    return own_weights(transformers.LlamaForCausalLM(config), seed, gain=1.2).eval()


@pytest.mark.parametrize("which", ["gpt2", "llama", "tiny"])
def test_cached_greedy_decoding_gives_the_same_tokens(which, gpt2_folder):
    from intrinsic_rank.nn import TinyCausalLM, TinyLMAdapter, greedy_decode

    if which == "gpt2":
        lm = as_causal_lm(str(gpt2_folder))
    elif which == "llama":
        lm = HFCausalLMAdapter(_tiny_llama())
    else:
        torch.manual_seed(0)
        lm = TinyLMAdapter(TinyCausalLM(vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2,
                                        max_length=24))
    prompt = lm.embed(torch.randint(VOCAB, (5, 4), generator=torch.Generator().manual_seed(1)))
    cached = greedy_decode(lm, prompt, 12)
    assert torch.equal(cached, greedy_decode(lm, prompt, 12, use_cache=False))
    assert cached.shape == (5, 12) and len(torch.unique(cached)) > 1
    # several new positions after a cache: the causal mask is shifted by the cached ones
    whole = torch.cat([prompt, lm.embed(cached)], dim=1)
    first, cache = lm.extend(whole[:, :5])
    second, cache = lm.extend(whole[:, 5:9], cache)
    third, _ = lm.extend(whole[:, 9:10], cache)
    torch.testing.assert_close(torch.cat([first, second, third], 1), lm.logits(whole[:, :10]),
                               atol=1e-5, rtol=1e-4)


def test_the_default_extend_recomputes_the_whole_sequence():
    from intrinsic_rank.nn import CausalLMAdapter, TinyLMAdapter, load_default_model

    tiny = TinyLMAdapter(load_default_model())
    ids = torch.tensor([[3, 9, 4, 7, 1]])
    logits, cache = CausalLMAdapter.extend(tiny, tiny.embed(ids[:, :2]))
    more, cache = CausalLMAdapter.extend(tiny, tiny.embed(ids[:, 2:]), cache)
    assert cache.shape == (1, 5, 64)
    whole = tiny.logits(tiny.embed(ids))
    assert torch.equal(more, whole[:, 2:])  # the same pass over the whole sequence
    torch.testing.assert_close(logits, whole[:, :2])


def test_cached_context_is_checked():
    from intrinsic_rank.nn import greedy_decode

    lm = as_causal_lm("default")
    with pytest.raises(ValueError, match="input of 129 positions exceeds the model's context"):
        greedy_decode(lm, lm.embed(torch.zeros(1, 120, dtype=torch.long)), 10)


# ---------------------------------------------------------------- saving a folder


def test_saved_folder_gives_identical_logits(tmp_path):
    from intrinsic_rank.nn import load_model, save_model_folder

    model = _tiny_llama()
    path = save_model_folder(model, tmp_path / "llama")
    assert path == str(tmp_path / "llama") and os.listdir(tmp_path) == ["llama"]
    loaded = load_model(path)
    assert type(loaded.module).__name__ == "LlamaForCausalLM" and loaded.tokenizer is None
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    with torch.no_grad():
        assert torch.equal(loaded.module(ids).logits, model(ids).logits)
    assert loaded.module.lm_head.weight is loaded.module.model.embed_tokens.weight


def test_a_quantizer_is_dropped_and_tensors_are_shared():
    from intrinsic_rank.nn._hf import unquantized

    model = _tiny_llama()
    assert unquantized(model) is model
    model.hf_quantizer = object()  # what a GGUF load leaves
    model.config.quantization_config = {"quant_method": "gguf"}
    model.config.architectures = None
    plain = unquantized(model)
    assert plain is not model and getattr(plain, "hf_quantizer", None) is None
    assert getattr(plain.config, "quantization_config", None) is None
    assert plain.config.architectures == ["LlamaForCausalLM"]
    assert plain.model.embed_tokens.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert plain.lm_head.weight is plain.model.embed_tokens.weight
    assert not any(t.is_meta for t in [*plain.parameters(), *plain.buffers()])
    ids = torch.tensor([[4, 2, 8]])
    with torch.no_grad():
        assert torch.equal(plain(ids).logits, model(ids).logits)


def test_an_interrupted_save_leaves_no_folder(tmp_path, monkeypatch):
    from intrinsic_rank.nn import save_model_folder

    model = _tiny_llama()

    def crash(folder, **kwargs):
        open(os.path.join(folder, "config.json"), "w").write("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save_pretrained", crash)
    with pytest.raises(KeyboardInterrupt):
        save_model_folder(model, tmp_path / "llama")
    assert os.listdir(tmp_path) == []


def test_existing_folders_are_replaced_only_when_asked(tmp_path):
    from intrinsic_rank.nn import TinyCausalLM, load_model, save_model_folder

    path = tmp_path / "m"
    save_model_folder(_tiny_llama(0), path)
    with pytest.raises(FileExistsError, match="exists; choose another folder or pass overwrite"):
        save_model_folder(_tiny_llama(1), path)
    save_model_folder(_tiny_llama(1), path, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["m"]
    new = load_model(str(path)).module
    torch.testing.assert_close(new.lm_head.weight, _tiny_llama(1).lm_head.weight)
    with pytest.raises(TypeError, match="save it as a .pt file with intrinsic_rank.nn.save_tiny_lm"):
        save_model_folder(TinyCausalLM(vocab_size=8, d_model=8, n_layers=1, n_heads=2),
                          tmp_path / "tiny")
