"""Adapter for Hugging Face ``transformers`` causal language models (optional extra).

``transformers`` is imported only when a model is loaded from a folder, so the
rest of the package works without it (``pip install "intrinsic_rank[hf]"``).
"""

import os

import torch

from ._causal_lm import CausalLMAdapter

__all__ = ["HFCausalLMAdapter", "load_hf_causal_lm"]

_CONTEXT_KEYS = ("n_positions", "max_position_embeddings", "n_ctx", "seq_length")


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
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "loading a Hugging Face model needs the optional dependency "
            "'transformers': pip install \"intrinsic_rank[hf]\""
        ) from None
    path = os.fspath(path)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{path!r} is not a model folder (no config.json in it)")
    kwargs = {} if dtype is None else {"dtype": dtype}
    try:
        return AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)
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
