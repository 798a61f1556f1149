"""Adapters for Hugging Face ``transformers`` models (optional extra).

``transformers`` is imported only when a model is loaded from a folder, so the
rest of the package works without it (``pip install "intrinsic_rank[hf]"``).
"""

import os

import torch

from ._causal_lm import CausalLMAdapter, _earlier_outputs_unchanged

__all__ = [
    "HFCausalLMAdapter",
    "HFEncoderAdapter",
    "load_hf_causal_lm",
    "load_hf_model",
    "load_hf_tokenizer",
]

_CONTEXT_KEYS = ("n_positions", "max_position_embeddings", "n_ctx", "seq_length")


def _context_length(config):
    """The model's context from its config (the first positive size found), or None."""
    for key in _CONTEXT_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _full_mask(inputs_embeds, max_length):
    """An all-ones attention mask for ``inputs_embeds``, after checking the context."""
    if max_length is not None and inputs_embeds.shape[1] > max_length:
        raise ValueError(
            f"input of {inputs_embeds.shape[1]} positions exceeds the model's "
            f"context of {max_length}"
        )
    return torch.ones(inputs_embeds.shape[:2], dtype=torch.long, device=inputs_embeds.device)


def _from_folder(auto_class, path, dtype, errors, explain):
    """``transformers.<auto_class>.from_pretrained(path)`` offline, failures as ValueError."""
    transformers = _require_transformers()
    path = _check_folder(path)
    kwargs = {} if dtype is None else {"dtype": dtype}
    try:
        return getattr(transformers, auto_class).from_pretrained(
            path, local_files_only=True, **kwargs)
    except errors as error:
        raise ValueError(explain(path, error)) from None


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
    # AutoModelForCausalLM refuses configurations without a causal-LM head
    return _from_folder(
        "AutoModelForCausalLM", path, dtype, ValueError,
        lambda path, error: f"{path!r} does not hold a causal language model that "
        f"transformers can load with AutoModelForCausalLM: {error}")


class HFCausalLMAdapter(CausalLMAdapter):
    """Adapter for a ``transformers`` causal LM (``PreTrainedModel`` with an LM head).

    The final hidden states are ``hidden_states[-1]`` of the model's output,
    which for GPT-2, Llama, Qwen, Pythia and most decoder-only models is the
    output of the final norm, i.e. what the LM head reads. :meth:`decode` is
    that head, ``get_output_embeddings()``: ``W h + b`` (``b`` None for these
    models). A monotone map some models apply after the head (Gemma's logit
    soft-capping, Granite's logit scaling) is not applied: it changes the
    logits' values, not their argmax, so the decision cells are the same.

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
        self.max_length = _context_length(config)
        self.freeze()

    def embedding_matrix(self):
        return self.model.get_input_embeddings().weight

    def embed(self, ids):
        return self.model.get_input_embeddings()(ids)

    def _run(self, inputs_embeds, hidden):
        return self.model(inputs_embeds=inputs_embeds,
                          attention_mask=_full_mask(inputs_embeds, self.max_length),
                          output_hidden_states=hidden, use_cache=False)

    def final_hidden(self, inputs_embeds):
        return self._run(inputs_embeds, True).hidden_states[-1]

    def logits(self, inputs_embeds):
        return self._run(inputs_embeds, False).logits

    def output_head(self):
        head = (self.model.get_output_embeddings()
                if hasattr(self.model, "get_output_embeddings") else None)
        weight = getattr(head, "weight", None)
        if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != (
                self.vocab_size, self.width):
            raise ValueError(
                f"the model ({type(self.model).__name__}) has no linear output head of "
                f"shape ({self.vocab_size}, {self.width}) (get_output_embeddings() gave "
                f"{type(head).__name__}); decoder cells need the head W h + b"
            )
        bias = getattr(head, "bias", None)
        return weight, bias if isinstance(bias, torch.Tensor) else None

    def decode(self, hidden):
        return self.model.get_output_embeddings()(hidden)


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
    return _from_folder(
        "AutoModel", path, dtype, (ValueError, OSError),
        lambda path, error: f"transformers cannot load a model from {path!r}: {error}").eval()


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
    has_head : bool
        Always False: :meth:`decode` and :meth:`output_head` raise, and so does
        :func:`~intrinsic_rank.nn.decoder_cell_proportions`.
    """

    has_head = False

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
        self.max_length = _context_length(model.config)
        self.freeze()
        self.is_causal = _earlier_outputs_unchanged(self, self.final_hidden)

    def embedding_matrix(self):
        return self.model.get_input_embeddings().weight

    def embed(self, ids):
        return self.model.get_input_embeddings()(ids)

    def final_hidden(self, inputs_embeds):
        mask = _full_mask(inputs_embeds, self.max_length)
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

    def output_head(self):
        raise NotImplementedError(
            f"{type(self.model).__name__} has no next-token head: there is no decision "
            "rule W h + b, so decoder cells (and the box + cells bound) do not apply; "
            "the cone and the count bounds do"
        )

    def decode(self, hidden):
        self.output_head()
