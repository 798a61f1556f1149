"""Per-head query/key weights and realised attention maps of attention models.

Each model family's extraction (the package's own LM, GPT-2, BERT, Llama-style
grouped keys) fills the one per-layer record that the profiles read.

The *static* view of every attention head of a trained model: the query-key
kernel ``W_Q^h W_K^h^T`` (times the model's logit scale), from the projection
weights alone -- :func:`query_key_weights`, with the value projections beside
it -- :func:`value_weights`. The *realised* view, the attention probabilities
on given inputs, is in ``_attention_maps``.

Both accept the project's own :class:`~intrinsic_rank.nn.TinyCausalLM`, the
adapters :class:`~intrinsic_rank.nn.TinyLMAdapter` and
:class:`~intrinsic_rank.nn.HFCausalLMAdapter` (the wrapped model is used), and
Hugging Face ``transformers`` models. ``transformers`` is imported only when
one of its models is passed, so the package works without it.

Hugging Face families understood by :func:`query_key_weights` (the layout of
the projections differs between them, so each is read from its own source in
``transformers`` 5):

* BERT-like encoders (BERT, RoBERTa, ELECTRA, CamemBERT, XLM-RoBERTa, ...):
  ``attention.self.query`` / ``attention.self.key``;
* DistilBERT: ``attention.q_lin`` / ``attention.k_lin``;
* GPT-2: the fused ``attn.c_attn`` ``Conv1D`` (weight stored ``(in, out)``);
* GPT-Neo: ``attn.attention.q_proj`` / ``k_proj``, unscaled logits;
* GPT-NeoX / Pythia: the fused ``attention.query_key_value``, laid out per head
  as ``[q_h | k_h | v_h]``; rotary;
* Phi-3: the fused ``self_attn.qkv_proj`` laid out ``[q | k | v]``; rotary, GQA;
* OPT: ``self_attn.q_proj`` / ``k_proj``; OPT multiplies the query by its scale
  before the product, which is reported as ``scale`` here;
* any other decoder whose attention has ``q_proj`` / ``k_proj`` linear layers
  (Llama, Mistral, Qwen2, Qwen3, Gemma, ...), with grouped-query attention
  expanded to one key head per query head.
"""

import math
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ._causal_lm import CausalLMAdapter, TinyCausalLM

__all__ = [
    "QueryKeyHeads",
    "query_key_weights",
    "unwrap_model",
    "value_weights",
]


# model types whose attention is BertSelfAttention-like: query/key/value Linear
# layers, absolute positions, logits scaled by module.scaling
_BERT_LIKE = frozenset({
    "bert", "roberta", "electra", "camembert", "xlm-roberta", "roberta-prelayernorm",
    "data2vec-text", "ernie", "bert-generation", "xmod",
})
_SUPPORTED = (
    "BERT-like (bert, roberta, electra, camembert, xlm-roberta, roberta-prelayernorm, "
    "data2vec-text, ernie, bert-generation, xmod), DistilBERT, GPT-2, GPT-Neo, "
    "GPT-NeoX/Pythia, Phi-3, OPT, and decoders with q_proj/k_proj attention "
    "(Llama, Mistral, Qwen2, Qwen3, Gemma, ...)"
)


@dataclass(frozen=True, eq=False)
class QueryKeyHeads:
    """Query and key projections of every head of one attention layer.

    For an input row ``x`` of the attention projections (the output of the
    pre-attention norm in a pre-LN model -- GPT-2 ``ln_1``, Llama
    ``input_layernorm``, :class:`~intrinsic_rank.nn.TinyCausalLM` ``norm1`` --
    and the layer input in a post-LN model such as BERT), head ``h`` computes

    ``q_h = x @ w_q[h] + b_q[h]``, ``k_h = x @ w_k[h] + b_k[h]``,

    and, before positional rotations, norms, masks and the softmax, the logit of
    query ``x`` and key ``z`` is ``scale * q_h(x) . k_h(z)``.

    Parameters
    ----------
    layer : int
        0-based index of the layer.
    w_q, w_k : ndarray of shape (n_heads, d_model, d_head), float64
        Query and key weights. With grouped-query or multi-query attention
        ``w_k`` is already expanded to one entry per *query* head (head ``h``
        reads key head ``kv_group[h]``).
    b_q, b_k : ndarray of shape (n_heads, d_head), float64
        Biases, zeros when the projection has none.
    scale : float
        The factor multiplying ``q . k`` before the softmax: usually
        ``1 / sqrt(d_head)``; 1 for GPT-Neo and for GPT-2 with
        ``scale_attn_weights=False``; divided by ``layer + 1`` for GPT-2 with
        ``scale_attn_by_inverse_layer_idx``. OPT multiplies its *query* by its
        scale; here ``w_q``, ``b_q`` are the raw projection and the factor is
        reported as ``scale``, which gives the same logits.
    kv_group : ndarray of shape (n_heads,), int
        The key/value head each query head reads (``arange(n_heads)`` without
        grouped-query attention).
    rotary : bool
        True when positions enter through rotary embeddings applied to ``q``
        and ``k``: the static kernel then leaves positions out.
    qk_norm : bool
        True when ``q`` and ``k`` pass through a norm after the projection
        (Qwen3 ``q_norm``/``k_norm``, OLMo-2, ...): the static kernel is then
        only an approximation of the logits.

    Attributes
    ----------
    kernels : ndarray of shape (n_heads, d_model, d_model)
        ``scale * w_q[h] @ w_k[h].T`` per head, the bilinear form of the logits.
    n_heads, d_model, d_head : int

    Examples
    --------
    >>> import torch
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> _ = torch.manual_seed(0)
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=2, n_heads=2, max_length=16)
    >>> heads = query_key_weights(lm)[1]
    >>> heads.layer, heads.n_heads, heads.d_model, heads.d_head
    (1, 2, 8, 4)
    >>> heads.kernels.shape
    (2, 8, 8)
    """

    layer: int
    w_q: np.ndarray
    w_k: np.ndarray
    b_q: np.ndarray
    b_k: np.ndarray
    scale: float
    kv_group: np.ndarray
    rotary: bool = False
    qk_norm: bool = False

    @property
    def n_heads(self):
        """Number of query heads."""
        return int(self.w_q.shape[0])

    @property
    def d_model(self):
        """Width of the input of the projections."""
        return int(self.w_q.shape[1])

    @property
    def d_head(self):
        """Width of one head's queries and keys."""
        return int(self.w_q.shape[2])

    @property
    def kernels(self):
        """``scale * w_q[h] @ w_k[h].T``, shape ``(n_heads, d_model, d_model)``."""
        return self.scale * np.einsum("hik,hjk->hij", self.w_q, self.w_k)


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


def _as64(tensor):
    return tensor.detach().to("cpu", torch.float64).numpy()


def _split_rows(weight, bias, start, n, d_head):
    """Heads from rows ``start + h*d_head ...`` of a ``(out, in)`` Linear weight."""
    rows = weight[start:start + n * d_head]
    w = _as64(rows).reshape(n, d_head, -1).transpose(0, 2, 1)  # (n, d_model, d_head)
    if bias is None:
        b = np.zeros((n, d_head))
    else:
        b = _as64(bias[start:start + n * d_head]).reshape(n, d_head)
    return np.ascontiguousarray(w), b


def _linear_heads(linear, n, d_head):
    return _split_rows(linear.weight, linear.bias, 0, n, d_head)


def _make(layer, wq, bq, wk, bk, scale, n_kv=None, rotary=False, qk_norm=False):
    n_heads = wq.shape[0]
    n_kv = n_heads if n_kv is None else n_kv
    if n_kv < 1 or n_heads % n_kv:
        raise ValueError(
            f"layer {layer}: {n_kv} key/value heads do not divide {n_heads} query heads"
        )
    kv_group = np.arange(n_heads) // (n_heads // n_kv)
    return QueryKeyHeads(layer=layer, w_q=wq, w_k=wk[kv_group], b_q=bq, b_k=bk[kv_group],
                         scale=float(scale), kv_group=kv_group, rotary=bool(rotary),
                         qk_norm=bool(qk_norm))


# ----------------------------------------------------------------------------
# TinyCausalLM


def _tiny_weights(model):
    heads = []
    for index, block in enumerate(model.blocks):
        D = block.qkv.in_features
        H = block.n_heads
        dh = D // H
        wq, bq = _split_rows(block.qkv.weight, block.qkv.bias, 0, H, dh)
        wk, bk = _split_rows(block.qkv.weight, block.qkv.bias, D, H, dh)
        heads.append(_make(index, wq, bq, wk, bk, 1.0 / math.sqrt(dh)))
    return heads


# ----------------------------------------------------------------------------
# Hugging Face models


def _base(model):
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) else model


def _n_layers(config):
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _child(module, name):
    child = getattr(module, name, None)
    return child if isinstance(child, nn.Module) else None


def _has_linear(module, *names):
    return all(isinstance(_child(module, name), nn.Linear) for name in names)


def _attention_kind(module, model_type):
    """Which reader understands ``module`` (None when none does)."""
    if model_type in _BERT_LIKE and _has_linear(module, "query", "key"):
        return "bert"
    if model_type == "distilbert" and _has_linear(module, "q_lin", "k_lin"):
        return "distilbert"
    if (model_type == "gpt2" and _child(module, "c_attn") is not None
            and not getattr(module, "is_cross_attention", False)):
        return "gpt2"
    if model_type == "gpt_neox" and _has_linear(module, "query_key_value"):
        return "gpt_neox"
    if model_type == "phi3" and _has_linear(module, "qkv_proj"):
        return "phi3"
    if _has_linear(module, "q_proj", "k_proj"):
        return "q_proj"
    return None


def _hf_attention_modules(model):
    """``[(kind, attention module)]`` per layer, in order; ValueError if unsupported."""
    config = model.config
    name = type(model).__name__
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"{name} is an encoder-decoder model, which is not supported; supported "
            f"families: {_SUPPORTED}"
        )
    model_type = getattr(config, "model_type", None)
    n_layers = _n_layers(config)
    base = _base(model)
    for stack in base.modules():
        if not isinstance(stack, nn.ModuleList) or len(stack) != n_layers:
            continue
        found = []
        for layer in stack:
            for module in layer.modules():
                kind = _attention_kind(module, model_type)
                if kind is not None:
                    found.append((kind, module))
                    break
            else:
                break
        if len(found) == n_layers:
            return found
    raise ValueError(
        f"{name} (model_type={model_type!r}) has an attention layout this function "
        f"does not read; supported families: {_SUPPORTED}"
    )


def _is_rotary(model):
    config = model.config
    if getattr(config, "position_embedding_type", None) == "rotary":
        return True
    return any("rotary" in type(m).__name__.lower() for m in _base(model).modules())


def _has_qk_norm(module):
    for pair in (("q_norm", "k_norm"), ("q_layernorm", "k_layernorm")):
        children = [_child(module, name) for name in pair]
        if any(c is not None and not isinstance(c, nn.Identity) for c in children):
            return True
    return False


def _q_proj_head_dim(module, model):
    """The head width of a ``q_proj``/``k_proj`` attention, checked to split its projections."""
    config = model.config
    dh = getattr(module, "head_dim", None) or getattr(config, "head_dim", None)
    if not dh:
        heads = getattr(module, "num_heads", None) or config.num_attention_heads
        dh = module.q_proj.out_features // int(heads)
    dh = int(dh)
    if module.q_proj.out_features % dh or module.k_proj.out_features % dh:
        raise ValueError(
            f"{type(model).__name__}: the projections ({module.q_proj.out_features}, "
            f"{module.k_proj.out_features} outputs) are not whole heads of width {dh}"
        )
    return dh


def _head_shape(kind, module, model):
    """``(query heads, key/value heads, head width)`` of one attention layer."""
    config = model.config
    if kind in ("bert", "distilbert"):
        H = int(getattr(module, "num_attention_heads", None) or module.n_heads)
        return H, H, int(module.attention_head_size)
    if kind == "gpt2":
        return int(module.num_heads), int(module.num_heads), int(module.head_dim)
    if kind == "gpt_neox":
        H = int(config.num_attention_heads)
        return H, H, int(module.head_size)
    if kind == "phi3":
        return (int(config.num_attention_heads), int(module.num_key_value_heads),
                int(module.head_dim))
    dh = _q_proj_head_dim(module, model)
    return module.q_proj.out_features // dh, module.k_proj.out_features // dh, dh


def _read_hf_layer(index, kind, module, model, rotary):
    config = model.config
    H, n_kv, dh = _head_shape(kind, module, model)
    if kind in ("bert", "distilbert"):
        q, k = ((module.query, module.key) if kind == "bert" else (module.q_lin, module.k_lin))
        wq, bq = _linear_heads(q, H, dh)
        wk, bk = _linear_heads(k, H, dh)
        scale = getattr(module, "scaling", dh ** -0.5)
        return _make(index, wq, bq, wk, bk, scale)
    if kind == "gpt2":
        D = H * dh
        # Conv1D: y = x @ weight + bias with weight (in, out); transpose to (out, in)
        weight, bias = module.c_attn.weight.t(), module.c_attn.bias
        wq, bq = _split_rows(weight, bias, 0, H, dh)
        wk, bk = _split_rows(weight, bias, D, H, dh)
        return _make(index, wq, bq, wk, bk, module.scaling)
    if kind == "gpt_neox":
        wq, bq = _neox_part(module, H, dh, 0)
        wk, bk = _neox_part(module, H, dh, 1)
        return _make(index, wq, bq, wk, bk, module.scaling, rotary=rotary)
    if kind == "phi3":
        fused = module.qkv_proj
        wq, bq = _split_rows(fused.weight, fused.bias, 0, H, dh)
        wk, bk = _split_rows(fused.weight, fused.bias, H * dh, n_kv, dh)
        return _make(index, wq, bq, wk, bk, module.scaling, n_kv=n_kv, rotary=rotary,
                     qk_norm=_has_qk_norm(module))
    # q_proj / k_proj: Llama, Mistral, Qwen, OPT, GPT-Neo, ...
    wq, bq = _linear_heads(module.q_proj, H, dh)
    wk, bk = _linear_heads(module.k_proj, n_kv, dh)
    if getattr(config, "model_type", None) == "gpt_neo":
        scale = 1.0  # GPT-Neo does not scale its logits
    else:
        scale = getattr(module, "scaling", None)
        if not isinstance(scale, (int, float)):
            scale = dh ** -0.5
    return _make(index, wq, bq, wk, bk, scale, n_kv=n_kv, rotary=rotary,
                 qk_norm=_has_qk_norm(module))


def _neox_part(module, H, dh, part):
    """Part ``part`` (0 query, 1 key, 2 value) of GPT-NeoX's fused per-head projection."""
    # the fused output is viewed as (..., H, 3 * dh) and chunked into q, k, v
    weight = module.query_key_value.weight.reshape(H, 3, dh, -1)
    bias = module.query_key_value.bias
    w = np.ascontiguousarray(_as64(weight[:, part]).transpose(0, 2, 1))
    b = np.zeros((H, dh)) if bias is None else _as64(bias.reshape(H, 3, dh)[:, part])
    return w, b


def _tiny_values(model):
    values = []
    for block in model.blocks:
        D = block.qkv.in_features
        values.append(_split_rows(block.qkv.weight, block.qkv.bias, 2 * D, block.n_heads,
                                  D // block.n_heads))
    return values


def _read_hf_values(kind, module, model):
    """``(w_v, b_v)`` of one layer, from the projections :func:`_read_hf_layer` reads."""
    H, n_kv, dh = _head_shape(kind, module, model)
    if kind in ("bert", "distilbert"):
        return _linear_heads(module.value if kind == "bert" else module.v_lin, H, dh)
    if kind == "gpt2":
        return _split_rows(module.c_attn.weight.t(), module.c_attn.bias, 2 * H * dh, H, dh)
    if kind == "gpt_neox":
        return _neox_part(module, H, dh, 2)
    if kind == "phi3":
        fused = module.qkv_proj
        wv, bv = _split_rows(fused.weight, fused.bias, (H + n_kv) * dh, n_kv, dh)
    else:
        wv, bv = _linear_heads(module.v_proj, n_kv, dh)
    group = np.arange(H) // (H // n_kv)  # one value head per query head, as w_k
    return np.ascontiguousarray(wv[group]), np.ascontiguousarray(bv[group])

# ----------------------------------------------------------------------------
# public functions


def query_key_weights(model):
    """Query and key projection weights of every head of every layer.

    Parameters
    ----------
    model : TinyCausalLM, transformers.PreTrainedModel, TinyLMAdapter or HFCausalLMAdapter
        An attention model; a model with a task head (``GPT2LMHeadModel``,
        ``LlamaForCausalLM``, ``BertForMaskedLM``, ...) is read through its
        ``base_model``, and an adapter through the model it wraps. See the module
        docstring for the ``transformers`` families understood.

    Returns
    -------
    heads : list of QueryKeyHeads
        One entry per layer, in order. ``heads[l].kernels[h]`` is the static
        query-key kernel ``scale * W_Q^h W_K^h^T`` of head ``h`` of layer ``l``;
        it gives the logits exactly (before masking) unless ``rotary`` or
        ``qk_norm`` is set.

    Raises
    ------
    TypeError
        When ``model`` is none of the accepted types.
    ValueError
        For a ``transformers`` architecture whose attention layout is not read.

    Notes
    -----
    Models with soft-capped logits (Gemma-2) or attention biases such as ALiBi
    add terms the kernel does not hold; :func:`attention_maps` gives what the
    model really computes.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> _ = torch.manual_seed(0)
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=2, n_heads=2, max_length=16)
    >>> heads = query_key_weights(lm)
    >>> len(heads), heads[0].w_q.shape, heads[0].scale == 0.5
    (2, (2, 8, 4), True)
    >>> x = np.random.default_rng(0).normal(size=(3, 8))   # inputs of the projections
    >>> q = x @ heads[0].w_q[1] + heads[0].b_q[1]
    >>> k = x @ heads[0].w_k[1] + heads[0].b_k[1]
    >>> np.allclose(heads[0].scale * q @ k.T, x @ heads[0].kernels[1] @ x.T)  # zero biases
    True
    """
    model, kind = unwrap_model(model)
    if kind == "tiny":
        return _tiny_weights(model)
    found = _hf_attention_modules(model)
    rotary = _is_rotary(model)
    return [_read_hf_layer(index, k, module, model, rotary)
            for index, (k, module) in enumerate(found)]


def value_weights(model):
    """Value projection weights of every head of every layer.

    The value side of :func:`query_key_weights`, read from the same
    projections: for an input row ``x`` of the attention projections, head
    ``h`` of layer ``l`` mixes the values ``v_h = x @ w_v[h] + b_v[h]``.

    Parameters
    ----------
    model : TinyCausalLM, transformers.PreTrainedModel, TinyLMAdapter or HFCausalLMAdapter
        The models :func:`query_key_weights` reads.

    Returns
    -------
    values : list of (w_v, b_v)
        One pair per layer, in order: ``w_v`` of shape ``(n_heads, d_model,
        d_head)`` and ``b_v`` of shape ``(n_heads, d_head)``, float64, zeros
        where the projection has no bias. With grouped-query or multi-query
        attention the value heads are expanded to one entry per *query* head,
        as ``w_k`` is (head ``h`` reads value head ``kv_group[h]``).

    Raises
    ------
    TypeError
        When ``model`` is none of the accepted types.
    ValueError
        For a ``transformers`` architecture whose attention layout is not read.

    Examples
    --------
    >>> import torch
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> _ = torch.manual_seed(0)
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=2, n_heads=2, max_length=16)
    >>> w_v, b_v = value_weights(lm)[1]
    >>> w_v.shape, b_v.shape
    ((2, 8, 4), (2, 4))
    >>> block = lm.blocks[1]   # the rows 2 d_model ... 3 d_model of the fused qkv
    >>> bool(torch.allclose(torch.from_numpy(w_v[0].T).float(), block.qkv.weight[16:20]))
    True
    """
    model, kind = unwrap_model(model)
    if kind == "tiny":
        return _tiny_values(model)
    return [_read_hf_values(k, module, model) for k, module in _hf_attention_modules(model)]
