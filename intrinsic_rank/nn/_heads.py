"""Per-head query/key and value weights of attention models: the static view of their heads.

The *static* view of every attention head of a trained model: the query-key
kernel ``W_Q^h W_K^h^T`` (times the model's logit scale), from the projection
weights alone -- :func:`query_key_weights`, with the value projections beside
it -- :func:`value_weights`. The *realised* view, the attention probabilities
on given inputs, is in ``_attention_maps``.

Both are read by the one reader of heads, :func:`~intrinsic_rank.nn.attention_layers`
and its table of families :data:`~intrinsic_rank.nn.HEAD_FAMILIES` (``_families``),
which the recomputed heads of :func:`~intrinsic_rank.inspection.head_facts` are read
by too. They accept the project's own :class:`~intrinsic_rank.nn.TinyCausalLM`, the
adapters :class:`~intrinsic_rank.nn.TinyLMAdapter` and
:class:`~intrinsic_rank.nn.HFCausalLMAdapter` (the wrapped model is used), and
Hugging Face ``transformers`` models of the families of the table: the BERT-like
encoders and DistilBERT, GPT-2, GPT-Neo, GPT-NeoX / Pythia, Phi-3, OPT, Llama,
Mistral, Qwen2, Qwen3, OLMo-2, Gemma 1/2/3, and any other decoder whose attention has
``q_proj`` / ``k_proj`` / ``v_proj`` linear layers (static kernels only).
``transformers`` is imported only when one of its models is passed, so the package
works without it.
"""

from dataclasses import dataclass

import numpy as np

from ._families import attention_layers

__all__ = [
    "QueryKeyHeads",
    "query_key_weights",
    "value_weights",
]


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


def _heads(layer):
    group = layer.kv_group
    return QueryKeyHeads(layer=layer.layer, w_q=layer.w_q, w_k=layer.w_k[group],
                         b_q=layer.b_q, b_k=layer.b_k[group], scale=float(layer.scale),
                         kv_group=group, rotary=bool(layer.rotary),
                         qk_norm=layer.q_norm is not None or layer.k_norm is not None)


def query_key_weights(model):
    """Query and key projection weights of every head of every layer.

    Parameters
    ----------
    model : TinyCausalLM, transformers.PreTrainedModel, TinyLMAdapter or HFCausalLMAdapter
        An attention model; a model with a task head (``GPT2LMHeadModel``,
        ``LlamaForCausalLM``, ``BertForMaskedLM``, ...) is read through its
        ``base_model``, and an adapter through the model it wraps. See the module
        docstring (and :data:`~intrinsic_rank.nn.HEAD_FAMILIES`) for the
        ``transformers`` families understood.

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
    return [_heads(layer) for layer in attention_layers(model)]


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
    values = []
    for layer in attention_layers(model):
        group = layer.kv_group  # one value head per query head, as w_k
        values.append((np.ascontiguousarray(layer.w_v[group]),
                       np.ascontiguousarray(layer.b_v[group])))
    return values
