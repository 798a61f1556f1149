"""Adapters for Hugging Face ``transformers`` models (optional extra).

``transformers`` is imported only when a model is loaded from a folder, so the
rest of the package works without it (``pip install "intrinsic_rank[hf]"``).
"""

import os

import torch

from ._causal_lm import CausalLMAdapter

__all__ = [
    "HFCausalLMAdapter",
    "HFEncoderAdapter",
    "load_hf_causal_lm",
    "load_hf_model",
    "load_hf_tokenizer",
]

_CONTEXT_KEYS = ("n_positions", "max_position_embeddings", "n_ctx", "seq_length")


def _require_transformers():
    try:
        import transformers
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "loading a Hugging Face model needs the optional dependency "
            "'transformers': pip install \"intrinsic_rank[hf]\""
        ) from None
    return transformers


def _check_folder(path):
    path = os.fspath(path)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{path!r} is not a model folder (no config.json in it)")
    return path


def load_hf_causal_lm(path, dtype=None):
    """Load a Hugging Face causal LM from a local folder, offline.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by ``save_pretrained`` (``config.json`` and weights).
    dtype : torch.dtype or None
        Load in this dtype; the checkpoint's own when None.

    Returns
    -------
    model : transformers.PreTrainedModel
    """
    transformers = _require_transformers()
    path = _check_folder(path)
    kwargs = {} if dtype is None else {"dtype": dtype}
    try:
        return transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                                 **kwargs)
    except ValueError as error:
        # AutoModelForCausalLM refuses configurations without a causal-LM head
        raise ValueError(
            f"{path!r} does not hold a causal language model that transformers can "
            f"load with AutoModelForCausalLM: {error}"
        ) from None


class HFCausalLMAdapter(CausalLMAdapter):
    """Adapter for a ``transformers`` causal LM (``PreTrainedModel`` with an LM head).

    The final hidden states are ``hidden_states[-1]`` of the model's output,
    which for GPT-2, Llama, Qwen, Pythia and most decoder-only models is the
    output of the final norm, i.e. what the LM head reads.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Must accept ``inputs_embeds`` and return ``logits``.
    """

    def __init__(self, model):
        super().__init__()
        if not hasattr(model, "get_input_embeddings") or not hasattr(model, "config"):
            raise TypeError(
                "HFCausalLMAdapter wraps a transformers PreTrainedModel; "
                f"got {type(model).__name__}"
            )
        config = model.config
        if getattr(config, "is_encoder_decoder", False):
            raise ValueError(
                f"the model ({type(model).__name__}) is an encoder-decoder; "
                "reachability needs a decoder-only causal language model"
            )
        self.model = model
        embeddings = model.get_input_embeddings().weight
        output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.vocab_size = int(output.weight.shape[0] if output is not None
                              else getattr(config, "vocab_size", embeddings.shape[0]))
        self.width = int(embeddings.shape[1])
        context = [getattr(config, key, None) for key in _CONTEXT_KEYS]
        context = [c for c in context if isinstance(c, int) and c > 0]
        self.max_length = context[0] if context else None
        self.freeze()

    def embedding_matrix(self):
        return self.model.get_input_embeddings().weight

    def embed(self, ids):
        return self.model.get_input_embeddings()(ids)

    def _run(self, inputs_embeds, hidden):
        if self.max_length is not None and inputs_embeds.shape[1] > self.max_length:
            raise ValueError(
                f"input of {inputs_embeds.shape[1]} positions exceeds the model's "
                f"context of {self.max_length}"
            )
        mask = torch.ones(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        return self.model(inputs_embeds=inputs_embeds, attention_mask=mask,
                          output_hidden_states=hidden, use_cache=False)

    def final_hidden(self, inputs_embeds):
        return self._run(inputs_embeds, True).hidden_states[-1]

    def logits(self, inputs_embeds):
        return self._run(inputs_embeds, False).logits


def load_hf_model(path, dtype=None):
    """Load any Hugging Face Transformer (encoder or decoder) from a local folder, offline.

    Unlike :func:`load_hf_causal_lm` this loads the bare model
    (``AutoModel``: ``BertModel``, ``GPT2Model``, ``LlamaModel``...) without a
    task head, which is all that per-head profiles and hidden-state geometry
    need; heads present in the checkpoint are ignored.

    Parameters
    ----------
    path : str or os.PathLike
        A folder written by ``save_pretrained`` (``config.json`` and weights).
    dtype : torch.dtype or None
        Load in this dtype; the checkpoint's own when None.

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode.
    """
    transformers = _require_transformers()
    path = _check_folder(path)
    kwargs = {} if dtype is None else {"dtype": dtype}
    try:
        model = transformers.AutoModel.from_pretrained(path, local_files_only=True, **kwargs)
    except (ValueError, OSError) as error:
        raise ValueError(f"transformers cannot load a model from {path!r}: {error}") from None
    return model.eval()


def load_hf_tokenizer(path):
    """The tokenizer saved in a model folder, or None when the folder has none.

    Parameters
    ----------
    path : str or os.PathLike
        A model folder.

    Returns
    -------
    tokenizer : transformers tokenizer or None
    """
    transformers = _require_transformers()
    path = _check_folder(path)
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
             "tokenizer.model", "spiece.model")
    if not any(os.path.isfile(os.path.join(path, name)) for name in names):
        return None
    try:
        return transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (ValueError, OSError):
        return None


class HFEncoderAdapter(CausalLMAdapter):
    """Hidden-state view of a ``transformers`` model that has no next-token head.

    It offers what the reachability *geometry* needs -- input embeddings of
    token ids and final hidden states of input embeddings -- for encoders
    such as BERT or the all-MiniLM-L6-v2 sentence model, and for bare decoder
    bodies saved without their LM head. :meth:`logits` raises: without a
    next-token head there is no generation, so cramming, accessibility and
    the slope bound do not apply (see ``docs/profiles.md``).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Must accept ``inputs_embeds`` and return ``last_hidden_state``
        (``AutoModel`` models do).

    Attributes
    ----------
    is_causal : bool
        Measured, not read from the config: whether changing the last input
        leaves the earlier final hidden states unchanged.
    """

    def __init__(self, model):
        super().__init__()
        if not hasattr(model, "get_input_embeddings") or not hasattr(model, "config"):
            raise TypeError(
                "HFEncoderAdapter wraps a transformers PreTrainedModel; "
                f"got {type(model).__name__}"
            )
        if getattr(model.config, "is_encoder_decoder", False):
            raise ValueError(
                f"the model ({type(model).__name__}) is an encoder-decoder; pass its "
                "encoder (model.get_encoder()) instead"
            )
        self.model = model
        embeddings = model.get_input_embeddings().weight
        self.vocab_size = int(embeddings.shape[0])
        self.width = int(embeddings.shape[1])
        context = [getattr(model.config, key, None) for key in _CONTEXT_KEYS]
        context = [c for c in context if isinstance(c, int) and c > 0]
        self.max_length = context[0] if context else None
        self.freeze()
        self.is_causal = _hidden_states_causal(self)

    def embedding_matrix(self):
        return self.model.get_input_embeddings().weight

    def embed(self, ids):
        return self.model.get_input_embeddings()(ids)

    def final_hidden(self, inputs_embeds):
        if self.max_length is not None and inputs_embeds.shape[1] > self.max_length:
            raise ValueError(
                f"input of {inputs_embeds.shape[1]} positions exceeds the model's "
                f"context of {self.max_length}"
            )
        mask = torch.ones(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)
        # the bare body: a model with a task head (BertForMaskedLM...) would
        # return its head's output first
        body = getattr(self.model, "base_model", self.model)
        return body(inputs_embeds=inputs_embeds, attention_mask=mask).last_hidden_state

    def logits(self, inputs_embeds):
        raise NotImplementedError(
            f"{type(self.model).__name__} has no next-token head: it cannot generate, so "
            "cramming, accessibility and the slope bound do not apply; only the "
            "hidden-state geometry (radius, box, count bound) does"
        )


def _hidden_states_causal(adapter, length=6, seed=0):
    """Whether the last input leaves earlier final hidden states unchanged."""
    if adapter.max_length is not None:
        length = min(length, adapter.max_length)
    if length < 2:
        return True
    generator = torch.Generator().manual_seed(seed)
    E = adapter.embedding_matrix()
    ids = torch.randint(adapter.vocab_size, (1, length), generator=generator).to(E.device)
    with torch.no_grad():
        base = adapter.embed(ids)
        changed = base.clone()
        changed[:, -1] += 3 * E.float().std().to(E.dtype) * torch.randn(
            changed.shape[-1], generator=generator).to(E.device, E.dtype)
        before = adapter.final_hidden(base)[:, :-1].float()
        after = adapter.final_hidden(changed)[:, :-1].float()
    scale = before.abs().max().clamp_min(1e-6)
    return bool(torch.allclose(before, after, atol=1e-4 * float(scale), rtol=1e-3))
