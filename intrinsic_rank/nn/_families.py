"""The one reader of attention heads: the table of model families and what is read from each.

:data:`HEAD_FAMILIES` names every family whose attention layers this package reads,
and :func:`attention_layers` reads them: for every layer one :class:`AttentionLayer`
with the heads' query, key, value and output slices, their positions (learned
absolute ones inside the layer's input, or rotary ones with their frequencies,
partial width and scaling), their norms after the projections, their scale,
soft-capping, mask and sliding window, and the modules whose input is the layer's
input ``X`` and whose input holds the heads' outputs ``Y``. The static view of
:func:`~intrinsic_rank.nn.query_key_weights` (what ``profile`` reads) and the
facts of :func:`~intrinsic_rank.inspection.head_facts` (what ``head-ranks``,
``corpus-ranks`` and the edits of :func:`~intrinsic_rank.inspection.imposed_queries`
read) are both built from it, so they never disagree on which models they know.
Adding a family is one entry of the table (and, for a new layout of projections,
one reader in ``_family_readers``), and its test in ``tests/nn/test_families.py``.

A family is *recomputed* when every step its heads take is read here, so that
:func:`~intrinsic_rank.inspection.head_output` reproduces their outputs; the
others (the BERT-like encoders, any other decoder with ``q_proj``/``k_proj``
projections) give their static kernels only, and ``AttentionLayer.refusal`` says
why their heads are not recomputed.
"""

import dataclasses
import functools
import sys
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from ._causal_lm import CausalLMAdapter, TinyCausalLM
from ._family_readers import read_projections
from ._head_math import HeadNorm, rope_frequencies

__all__ = ["HEAD_FAMILIES", "AttentionLayer", "HeadFamily", "attention_layers",
           "unwrap_model"]


class HeadFamily(NamedTuple):
    """One entry of :data:`HEAD_FAMILIES`.

    Attributes
    ----------
    title : str
        The family's name in tables.
    model_types : tuple of str
        The ``transformers`` ``config.model_type`` values of the family.
    layout : str
        How its projections are stored (``_family_readers``).
    recomputed : bool
        True when its heads' outputs are recomputed exactly from their inputs
        (:func:`~intrinsic_rank.inspection.head_output`); False: static kernels only.
    read : str
        What is particular to the family and read from it.
    """

    title: str
    model_types: tuple
    layout: str
    recomputed: bool
    read: str


HEAD_FAMILIES = {
    "tiny": HeadFamily("TinyCausalLM (this package)", (), "tiny", True,
                       "fused qkv; learned absolute positions"),
    "gpt2": HeadFamily("GPT-2", ("gpt2",), "gpt2", True,
                       "fused Conv1D c_attn; learned absolute positions; scale 1/sqrt(d), "
                       "1, or divided by the layer"),
    "opt": HeadFamily("OPT", ("opt",), "q_proj", True,
                      "learned absolute positions; the query scaled before the product"),
    "gpt_neo": HeadFamily("GPT-Neo", ("gpt_neo",), "q_proj", True,
                          "learned absolute positions; unscaled logits; local layers as a "
                          "sliding window"),
    "llama": HeadFamily("Llama (Llama 2, Llama 3, SmolLM2)", ("llama",), "q_proj", True,
                        "rotary positions with their rope type (Llama 3's scaling "
                        "included); grouped keys"),
    "mistral": HeadFamily("Mistral", ("mistral",), "q_proj", True,
                          "rotary positions; a sliding window on every layer"),
    "qwen2": HeadFamily("Qwen2", ("qwen2",), "q_proj", True,
                        "rotary positions; q/k/v biases; a sliding window on the layers "
                        "from max_window_layers on"),
    "qwen3": HeadFamily("Qwen3", ("qwen3",), "q_proj", True,
                        "rotary positions; RMS norms of q and k over each head"),
    "olmo2": HeadFamily("OLMo-2", ("olmo2",), "q_proj", True,
                        "rotary positions; RMS norms of q and k over the whole layer"),
    "gemma": HeadFamily("Gemma", ("gemma",), "q_proj", True,
                        "rotary positions; a head width other than d / heads"),
    "gemma2": HeadFamily("Gemma 2", ("gemma2",), "q_proj", True,
                         "rotary positions; query_pre_attn_scalar; logit soft-capping; "
                         "local (sliding-window) and global layers"),
    "gemma3": HeadFamily("Gemma 3 (text)", ("gemma3_text",), "q_proj", True,
                         "rotary positions with a base per layer type; RMS norms of q and k "
                         "over each head (gain 1 + weight); query_pre_attn_scalar; local "
                         "and global layers"),
    "phi3": HeadFamily("Phi-3", ("phi3",), "phi3", True,
                       "fused qkv_proj [q | k | v]; rotary positions, partial where the "
                       "config says; grouped keys; a sliding window where the config sets one"),
    "gpt_neox": HeadFamily("GPT-NeoX / Pythia", ("gpt_neox",), "gpt_neox", True,
                           "fused per-head query_key_value [q_h | k_h | v_h]; rotary "
                           "positions on a fraction of each head (rotary_pct); parallel "
                           "residual (outside the heads)"),
    "bert": HeadFamily("BERT-like encoders", (
        "bert", "roberta", "electra", "camembert", "xlm-roberta", "roberta-prelayernorm",
        "data2vec-text", "ernie", "bert-generation", "xmod"), "bert", False,
        "query/key/value; bidirectional (static kernels and attention maps only)"),
    "distilbert": HeadFamily("DistilBERT", ("distilbert",), "distilbert", False,
                             "q_lin/k_lin/v_lin; bidirectional (static kernels only)"),
    "q_proj": HeadFamily("Other decoders with q_proj/k_proj", (), "q_proj", False,
                         "static kernels only: their other steps are not known here"),
}
"""The families whose attention layers are read (:class:`HeadFamily` per key)."""

_BY_TYPE = {t: key for key, family in HEAD_FAMILIES.items() for t in family.model_types}
_ROTARY = frozenset({"llama", "mistral", "qwen2", "qwen3", "olmo2", "gemma", "gemma2",
                     "gemma3", "phi3", "gpt_neox"})
_STATIC_ROPE = ("default", "linear", "llama3", "yarn")  # inv_freq fixed whatever the length
_GAIN_OFFSET = {"gemma3": 1.0}  # Gemma3RMSNorm multiplies by (1 + weight)
_SUPPORTED = ", ".join(f.title for f in HEAD_FAMILIES.values())


class _Norm(NamedTuple):
    gain: np.ndarray  # (head_dim,) for axis "head", (n * head_dim,) for axis "layer"
    eps: float
    axis: str


@dataclasses.dataclass(frozen=True, eq=False)
class AttentionLayer:
    """One attention layer as read from its model: every head's slices and every step.

    For an input row ``x`` of the layer's attention (``X``: after the
    pre-attention norm where the model has one), head ``h`` computes
    ``q = x @ w_q[h] + b_q[h]``, and with its key/value head ``g = kv_group[h]``
    ``k = x @ w_k[g] + b_k[g]``, ``v = x @ w_v[g] + b_v[g]``; then the steps of
    ``_head_math`` (norms, rotary positions, scale, soft-capping, mask); its
    output ``y`` (``Y``) enters the layer's output projection as
    ``y @ w_o[h]``, summed over heads, plus ``b_o``.

    Attributes
    ----------
    layer, n_layers : int
        The layer (0-based) and the model's number of attention layers.
    family : str
        The key of :data:`HEAD_FAMILIES`.
    model_type : str
        ``config.model_type`` (``"tiny"`` for TinyCausalLM).
    n_heads, n_kv_heads, head_dim, d_model : int
    w_q, b_q : ndarray of shape (n_heads, d_model, head_dim), (n_heads, head_dim)
    w_k, b_k, w_v, b_v : ndarray of shape (n_kv_heads, d_model, head_dim), (n_kv_heads, head_dim)
    w_o : ndarray of shape (n_heads, head_dim, d_out) or None
        Each head's block of the output projection (None where none is found).
    b_o : ndarray of shape (d_out,) or None
        The output projection's bias (zeros where it has none): the layer's, not a head's.
    kv_group : ndarray of shape (n_heads,), int
    scale : float
        The factor of ``q . k``.
    causal : bool
    rotary : bool
        Whether positions enter as rotary embeddings.
    inv_freq : ndarray of shape (rotary_dim // 2,) or None
        The rotary frequencies the model uses for this layer (None without rotary
        embeddings, or where they are not read).
    rope_scaling : float
        The rope type's ``attention_scaling`` (a factor of ``cos`` and ``sin``).
    rope_type, rope_theta : str or None, float or None
    q_norm, k_norm : (gain, eps, axis) or None
        RMS norms after the projections: ``axis`` ``"head"`` (``gain`` of
        ``head_dim``) or ``"layer"`` (``gain`` over every head's channels).
    softcap : float or None
    window : int or None
        A sliding window: query ``i`` sees keys ``i - window < j <= i``.
    refusal : str or None
        None when :func:`~intrinsic_rank.inspection.head_output` recomputes these
        heads exactly; otherwise why not, in a few words.
    sites : (torch.nn.Module, torch.nn.Module)
        The module whose input is ``X`` and the one whose input holds ``Y``.
    query_sites : tuple
        Per head, where its query lives in the model's parameters:
        ``((param, index, transposed), (bias, index) or None)``.

    Examples
    --------
    >>> from intrinsic_rank.nn import load_default_model
    >>> layer = attention_layers(load_default_model())[1]
    >>> layer.family, layer.n_heads, layer.head_dim, layer.w_o.shape, layer.refusal
    ('tiny', 4, 16, (4, 16, 64), None)
    """

    layer: int
    n_layers: int
    family: str
    model_type: str
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    w_q: np.ndarray
    b_q: np.ndarray
    w_k: np.ndarray
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: Any
    b_o: Any
    scale: float
    causal: bool
    rotary: bool
    inv_freq: Any = None
    rope_scaling: float = 1.0
    rope_type: Any = None
    rope_theta: Any = None
    q_norm: Any = None
    k_norm: Any = None
    softcap: Any = None
    window: Any = None
    refusal: Any = None
    sites: tuple = (None, None)
    query_sites: tuple = ()

    @property
    def kv_group(self):
        """The key/value head each query head reads."""
        return np.arange(self.n_heads) // (self.n_heads // self.n_kv_heads)

    @functools.cached_property
    def _whole(self):
        """The layer's query and key projections as ``(d_model, width)`` matrices and biases."""
        def whole(w, b):
            return (np.ascontiguousarray(w.transpose(1, 0, 2).reshape(w.shape[1], -1)),
                    b.reshape(-1))
        return whole(self.w_q, self.b_q), whole(self.w_k, self.b_k)

    def head_norm(self, which, head):
        """The :class:`~intrinsic_rank.nn.HeadNorm` of head ``head``'s queries or keys, or None.

        Parameters
        ----------
        which : {"query", "key"}
        head : int
            A query head (its key/value group for the keys).
        """
        norm = self.q_norm if which == "query" else self.k_norm
        if norm is None:
            return None
        if norm.axis == "head":
            return HeadNorm(gain=norm.gain, eps=norm.eps)
        index = head if which == "query" else int(self.kv_group[head])
        w, b = self._whole[0 if which == "query" else 1]
        columns = (index * self.head_dim, (index + 1) * self.head_dim)
        return HeadNorm(gain=norm.gain[columns[0]:columns[1]], eps=norm.eps, layer_w=w,
                        layer_b=b, columns=columns)


# ----------------------------------------------------------------------------
# model kinds


def unwrap_model(model):
    """The torch model inside ``model`` and its kind.

    Parameters
    ----------
    model : TinyCausalLM, transformers.PreTrainedModel, TinyLMAdapter or HFCausalLMAdapter
        An adapter is replaced by the model it wraps.

    Returns
    -------
    model : torch.nn.Module
        The bare model.
    kind : {"tiny", "hf"}
        ``"tiny"`` for a :class:`~intrinsic_rank.nn.TinyCausalLM`, ``"hf"`` for
        a ``transformers`` model.

    Raises
    ------
    TypeError
        When ``model`` is none of the accepted types.

    Examples
    --------
    >>> from intrinsic_rank.nn import TinyCausalLM, TinyLMAdapter
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> model, kind = unwrap_model(TinyLMAdapter(lm))
    >>> model is lm, kind
    (True, 'tiny')
    """
    if isinstance(model, CausalLMAdapter) and isinstance(getattr(model, "model", None),
                                                         nn.Module):
        model = model.model
    if isinstance(model, TinyCausalLM):
        return model, "tiny"
    if _is_hf_model(model):
        return model, "hf"
    raise TypeError(
        "expected a TinyCausalLM, a transformers PreTrainedModel, or a TinyLMAdapter/"
        f"HFCausalLMAdapter wrapping one; got {type(model).__module__}.{type(model).__name__}"
    )


def _is_hf_model(model):
    # a PreTrainedModel exists only once transformers is imported: no import here
    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(model, nn.Module):
        return False
    from transformers import PreTrainedModel

    return isinstance(model, PreTrainedModel)


def base_of(model):
    """The model body under a task head (``model.base_model``), or the model itself."""
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) else model


def n_layers_of(config):
    """The number of layers a ``transformers`` config names, or None."""
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# ----------------------------------------------------------------------------
# finding the attention layers


def _child(module, name):
    child = getattr(module, name, None)
    return child if isinstance(child, nn.Module) else None


def _has_linear(module, *names):
    return all(isinstance(_child(module, name), nn.Linear) for name in names)


def family_key(model_type):
    """The key of :data:`HEAD_FAMILIES` of a model type (None when not in the table)."""
    return _BY_TYPE.get(model_type)


def _layout_of(module, model_type):
    """Which layout reader understands ``module`` (None when none does)."""
    family = HEAD_FAMILIES.get(family_key(model_type))
    layout = None if family is None else family.layout
    if layout == "bert" and _has_linear(module, "query", "key"):
        return "bert"
    if layout == "distilbert" and _has_linear(module, "q_lin", "k_lin"):
        return "distilbert"
    if (layout == "gpt2" and _child(module, "c_attn") is not None
            and not getattr(module, "is_cross_attention", False)):
        return "gpt2"
    if layout == "gpt_neox" and _has_linear(module, "query_key_value"):
        return "gpt_neox"
    if layout == "phi3" and _has_linear(module, "qkv_proj"):
        return "phi3"
    if layout in (None, "q_proj") and _has_linear(module, "q_proj", "k_proj", "v_proj"):
        return "q_proj"
    return None


def _output_of(layout, attention, layer_module):
    """The output projection of an attention module (its input holds the heads' outputs)."""
    if layout == "bert":
        holder = _child(_child(layer_module, "attention"), "output")
        return _child(holder, "dense")
    names = {"gpt2": ("c_proj",), "gpt_neox": ("dense",), "distilbert": ("out_lin",)}.get(
        layout, ("o_proj", "out_proj", "dense"))
    for name in names:
        if _child(attention, name) is not None:
            return _child(attention, name)
    return None


def _has_attention(model):
    return any("attention" in type(m).__name__.lower() for m in model.modules())


class _Unread(ValueError):
    """A model none of whose layers is read; ``reason`` says why in a few words."""

    def __init__(self, name, model_type, reason):
        self.reason = f"model_type={model_type!r}: {reason}"
        super().__init__(f"{name} ({self.reason}); supported families: {_SUPPORTED}")


def _alibi(model):
    config = model.config
    if getattr(config, "model_type", None) in ("bloom", "mpt") or getattr(
            config, "alibi", None) is True:
        return "ALiBi position biases, which this library does not read"
    return None


def _located(model):
    """``[(layout, attention module, output module)]`` per layer; ValueError if unread."""
    config = model.config
    name, model_type = type(model).__name__, getattr(config, "model_type", None)
    if getattr(config, "is_encoder_decoder", False):
        raise _Unread(name, model_type, "an encoder-decoder model, not a causal LM or an "
                      "encoder")
    n_layers = n_layers_of(config)
    for stack in base_of(model).modules():
        if not isinstance(stack, nn.ModuleList) or len(stack) != n_layers:
            continue
        found = []
        for layer_module in stack:
            for module in layer_module.modules():
                layout = _layout_of(module, model_type)
                if layout is not None:
                    found.append((layout, module, _output_of(layout, module, layer_module)))
                    break
            else:
                break
        if len(found) == n_layers:
            return found
    if not _has_attention(model):
        raise _Unread(name, model_type, "no attention layers, so no heads to read")
    raise _Unread(name, model_type, _alibi(model) or "an attention layout this library "
                  "does not read")


# ----------------------------------------------------------------------------
# what a layer's heads do besides their projections


def _rotary_module(model, attention):
    for holder in (base_of(model), attention):
        rotary = _child(holder, "rotary_emb")
        if rotary is not None:
            return rotary
    return None


def _rope_theta(config, layer_type):
    params = getattr(config, "rope_parameters", None) or {}
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
    return params.get("rope_theta", getattr(config, "rope_theta", None))


def _rope(model, attention, index):
    """``(inv_freq, attention_scaling, rope_type, theta, refusal)`` of a rotary layer."""
    config = model.config
    rotary = _rotary_module(model, attention)
    types = getattr(config, "layer_types", None)
    layer_type = types[index] if types else None
    if rotary is not None and hasattr(rotary, f"{layer_type}_inv_freq"):
        inv_freq = getattr(rotary, f"{layer_type}_inv_freq")
        scaling = getattr(rotary, f"{layer_type}_attention_scaling", 1.0)
        rope_type = (rotary.rope_type or {}).get(layer_type, "default")
    else:
        inv_freq = getattr(rotary, "inv_freq", None)
        scaling = getattr(rotary, "attention_scaling", 1.0)
        rope_type = getattr(rotary, "rope_type", "default")
        layer_type = None
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.ndim != 1:
        return None, 1.0, None, None, "no rotary module with its frequencies (rotary_emb)"
    theta = _rope_theta(config, layer_type)
    if rope_type not in _STATIC_ROPE:
        return None, 1.0, rope_type, theta, (
            f"rope scaling of type {rope_type!r}, whose frequencies change with the length "
            "(this library reads the types " + ", ".join(_STATIC_ROPE) + ")")
    inv_freq = inv_freq.detach().to("cpu", torch.float64).numpy().copy()
    expected = _expected_frequencies(config, rope_type, 2 * len(inv_freq), theta, layer_type)
    # transformers computes them in float32: equal to the float64 formula within 1e-6
    if expected is None or not np.allclose(inv_freq, expected, rtol=1e-6, atol=0):
        return None, 1.0, rope_type, theta, (
            f"rotary frequencies that are not the {rope_type} rope's of rope_theta={theta}")
    return inv_freq, float(scaling), rope_type, theta, None


def _expected_frequencies(config, rope_type, rotary_dim, theta, layer_type):
    if theta is None:
        return None
    if rope_type == "default":
        return rope_frequencies(rotary_dim, float(theta)).numpy()
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kwargs = {} if layer_type is None else {"layer_type": layer_type}
    inv_freq, _ = ROPE_INIT_FUNCTIONS[rope_type](config, None, **kwargs)
    return inv_freq.detach().to(torch.float64).numpy()


def _norm_of(module, family, width, head_dim):
    """``(_Norm or None, refusal or None)`` of a q_norm/k_norm child."""
    if module is None or isinstance(module, nn.Identity):
        return None, None
    weight = getattr(module, "weight", None)
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if (not type(module).__name__.endswith("RMSNorm") or not isinstance(weight, torch.Tensor)
            or eps is None):
        return None, f"a q/k norm of type {type(module).__name__}, which this library does " \
                      "not read"
    gain = weight.detach().to("cpu", torch.float64).numpy() + _GAIN_OFFSET.get(family, 0.0)
    if gain.shape == (head_dim,):
        return _Norm(gain, float(eps), "head"), None
    if gain.shape == (width,):
        return _Norm(gain, float(eps), "layer"), None
    return None, f"a q/k norm over {gain.shape[0]} channels, neither a head nor the layer"


def _window(family, attention, config):
    if family == "gpt_neo":
        local = getattr(attention, "attention_type", None) == "local"
        return int(config.window_size) if local else None
    if hasattr(attention, "sliding_window"):
        window = attention.sliding_window
    else:
        window = getattr(config, "sliding_window", None)
    return int(window) if isinstance(window, (int, np.integer)) and window > 0 else None


def _scale(family, attention, head_dim):
    if family == "gpt_neo":
        return 1.0  # GPT-Neo does not scale its logits
    scale = getattr(attention, "scaling", None)
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        return float(scale)
    return head_dim ** -0.5


def _is_rotary(model):
    config = model.config
    if getattr(config, "position_embedding_type", None) == "rotary":
        return True
    return any("rotary" in type(m).__name__.lower() for m in base_of(model).modules())


def _steps(model, family, index, attention, parts):
    """The keyword fields of a layer besides its projections."""
    config = model.config
    d_model = parts.w_q.shape[1]
    rotary = family in _ROTARY or (family == "q_proj" and _is_rotary(model))
    fields = dict(scale=_scale(family, attention, parts.head_dim), rotary=rotary,
                  softcap=getattr(attention, "attn_logit_softcapping", None),
                  window=_window(family, attention, config),
                  causal=getattr(attention, "is_causal", True) is not False)
    refusals = []
    if family in _ROTARY:
        inv_freq, scaling, rope_type, theta, refusal = _rope(model, attention, index)
        fields.update(inv_freq=inv_freq, rope_scaling=scaling, rope_type=rope_type,
                      rope_theta=None if theta is None else float(theta))
        refusals.append(refusal)
    for which, n in (("q", parts.n_heads), ("k", parts.n_kv_heads)):
        child = _child(attention, f"{which}_norm") or _child(attention, f"{which}_layernorm")
        norm, refusal = _norm_of(child, family, n * parts.head_dim, parts.head_dim)
        fields[f"{which}_norm"] = norm
        refusals.append(refusal)
    fields["refusal"] = next((r for r in refusals if r), None)
    return fields, d_model


def _read(model, kind, index, n_layers, layout, attention, output):
    if kind == "tiny":
        parts = read_projections("tiny", attention, output, model.config, "TinyCausalLM")
        return AttentionLayer(
            layer=index, n_layers=n_layers, family="tiny", model_type="tiny", n_heads=parts.n_heads,
            n_kv_heads=parts.n_kv_heads, head_dim=parts.head_dim, d_model=parts.w_q.shape[1],
            w_q=parts.w_q, b_q=parts.b_q, w_k=parts.w_k, b_k=parts.b_k, w_v=parts.w_v,
            b_v=parts.b_v, w_o=parts.w_o, b_o=parts.b_o, scale=parts.head_dim ** -0.5,
            causal=bool(model.config["causal"]), rotary=False, sites=(attention, output),
            query_sites=parts.query_sites,
            refusal=None if model.config["causal"] else
            "a bidirectional TinyCausalLM (causal=False), not a causal LM")
    model_type = getattr(model.config, "model_type", None)
    family = family_key(model_type) or "q_proj"
    if HEAD_FAMILIES[family].layout != layout:
        family = "q_proj"
    parts = read_projections(layout, attention, output, model.config, type(model).__name__)
    fields, d_model = _steps(model, family, index, attention, parts)
    if not HEAD_FAMILIES[family].recomputed:
        fields["refusal"] = f"model_type={model_type!r}, a family whose heads are not read"
    return AttentionLayer(
        layer=index, n_layers=n_layers, family=family, model_type=str(model_type),
        n_heads=parts.n_heads, n_kv_heads=parts.n_kv_heads, head_dim=parts.head_dim,
        d_model=d_model, w_q=parts.w_q, b_q=parts.b_q, w_k=parts.w_k, b_k=parts.b_k,
        w_v=parts.w_v, b_v=parts.b_v, w_o=parts.w_o, b_o=parts.b_o,
        sites=(attention, output), query_sites=parts.query_sites, **fields)


def attention_layers(model, layers=None, *, name=None):
    """Every attention layer of a model as read by the family table (one reader of heads).

    Parameters
    ----------
    model : TinyCausalLM, transformers.PreTrainedModel, TinyLMAdapter or HFCausalLMAdapter
        A model with a task head is read through its body; an adapter through
        the model it wraps.
    layers : sequence of int or None, default=None
        The layers to read (0-based); None: all of them, in order. Only these
        layers' weights are copied.
    name : str or None, default=None
        The model's name in errors; None: its class name.

    Returns
    -------
    layers : list of AttentionLayer

    Raises
    ------
    TypeError
        When ``model`` is none of the accepted types.
    ValueError
        For a model whose attention layout is in no family of
        :data:`HEAD_FAMILIES`, an encoder-decoder, a model without attention
        layers, a layer out of range, or weights that disagree with the config.

    Examples
    --------
    >>> from intrinsic_rank.nn import load_default_model
    >>> layers = attention_layers(load_default_model())
    >>> [(layer.layer, layer.n_heads, layer.d_model) for layer in layers]
    [(0, 4, 64), (1, 4, 64)]
    """
    bare, kind = unwrap_model(model)
    if kind == "tiny":
        found = [("tiny", block.qkv, block.proj) for block in bare.blocks]
    else:
        found = _located(bare)
    wanted = range(len(found)) if layers is None else list(layers)
    for index in wanted:
        if not 0 <= index < len(found):
            raise ValueError(f"layer={index} is out of range: "
                             f"{name or type(bare).__name__} has layers 0..{len(found) - 1}")
    return [_read(bare, kind, index, len(found), *found[index]) for index in wanted]

