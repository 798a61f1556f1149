"""One attention head of a causal LM as a function: its facts, its input ``X`` and output ``Y``.

For head ``h`` of layer ``l`` of a causal language model:

* ``X`` is the input of the layer's attention, after the pre-attention norm
  where the model has one (Llama ``self_attn``'s ``hidden_states``, GPT-2 ``ln_1``'s
  output; OLMo-2 has none: its layer input), ``d_model`` wide;
* ``Y`` is that head's slice of the input of the output projection (Llama
  ``o_proj``, GPT-2 ``attn.c_proj``, GPT-NeoX ``dense``), ``head_dim`` wide;
* :class:`HeadFacts` holds everything that maps one to the other, read by the one
  reader of heads (:func:`~intrinsic_rank.nn.attention_layers`, the families of
  :data:`~intrinsic_rank.nn.HEAD_FAMILIES`); :func:`head_output` recomputes ``Y``
  from ``X`` with it (the steps of ``nn._head_math``).

This is the teacher of the attention-native rank ``r*_attn`` of a real head
(the Entropic Bound's rank inside the attention class): a student with the
head's own positional scheme, norms, scale, mask and values fits ``Y`` from ``X``.
Only families that the recomputation reads exactly are accepted; any other is
refused in one line naming it, and every call of :func:`head_activations`
checks on its own inputs that the recomputation equals what the model
computed before it returns anything (never a silent wrong ``Y``).
"""

import dataclasses
import os
import re
import sys
from typing import Any, NamedTuple

import numpy as np
import torch

from .._validation import check_device, check_int, format_bytes, memory_limit
from ..nn import (
    HEAD_FAMILIES,
    LoadedModel,
    attention_layers,
    check_token_inputs,
    load_model,
    model_max_positions,
    model_vocab_size,
    unwrap_model,
)
from ._head_recompute import head_output

__all__ = ["READ_FAMILIES", "SELF_CHECK_TOLERANCES", "SELF_CHECK_WINDOWS", "HeadData",
           "HeadFacts", "head_activations", "head_facts", "parse_head"]

READ_FAMILIES = tuple(t for family in HEAD_FAMILIES.values() if family.recomputed
                      for t in family.model_types)
"""The ``transformers`` ``model_type`` values whose heads are recomputed (besides TinyCausalLM):
the recomputed families of :data:`~intrinsic_rank.nn.HEAD_FAMILIES`."""

_READ_TEXT = ", ".join(family.title for family in HEAD_FAMILIES.values() if family.recomputed)


@dataclasses.dataclass(frozen=True, eq=False)
class HeadFacts:
    """Everything needed to recompute one attention head's output from its input.

    For one sequence ``X`` (``(L, d_model)``, positions ``0 .. L-1``) the head
    computes ``q = X @ w_q + b_q``, ``k = X @ w_k + b_k``, ``v = X @ w_v + b_v``;
    normalises ``q`` and ``k`` by ``q_norm``, ``k_norm``; with ``positional="rope"``
    rotates their first ``rotary_dim`` channels by ``position * inv_freq``
    (``cos``, ``sin`` times ``rope_scaling``); then ``Y = softmax(cap(scale * q
    k^T) + mask) v``, ``cap`` the soft-capping and ``mask`` causal, within a
    sliding ``window`` where the layer has one (:func:`head_output`). The head
    adds ``Y @ w_o`` to the layer's attention output.

    Parameters
    ----------
    model : str
        A label of the model (the packaged name, the folder, or the class).
    layer, head : int
        0-based layer and query head.
    n_layers, n_heads, n_kv_heads : int
        Layers of the model; query heads and key/value heads of the layer.
    kv_group : int
        The key/value head this query head reads (``head // (n_heads // n_kv_heads)``).
    d_model, head_dim : int
        Width of ``X`` and of the head's queries, keys, values and ``Y``.
    positional : {"rope", "absolute"}
        ``"rope"``: rotary position embeddings applied to ``q`` and ``k``;
        ``"absolute"``: positions added to the residual stream before the first
        layer (GPT-2, OPT, GPT-Neo, TinyCausalLM), already inside ``X``.
    rope_theta : float or None
        The rotary base; None without rotary embeddings.
    inv_freq : ndarray of shape (rotary_dim // 2,), float64, or None
        The rotary frequencies the model's rotary module holds for the layer
        (for its type where local and global layers differ), checked against
        the rope type's own formula (``1 / rope_theta ** (arange(0, rotary_dim,
        2) / rotary_dim)`` for the default type; Llama 3's scaling, ...).
    rope_layout : {"rotate_half"} or None
        How channels pair up in the rotation: ``"rotate_half"`` (channel ``i``
        with ``i + rotary_dim // 2``, frequency ``inv_freq[i]``); None without
        rotary embeddings.
    scale : float
        The factor multiplying ``q . k`` (``1 / sqrt(head_dim)`` for most families;
        GPT-Neo's 1, Gemma 2/3's ``query_pre_attn_scalar ** -0.5``, ...).
    causal : bool
        True: query ``i`` attends to keys ``0 .. i`` only (only causal heads are read).
    w_q, w_k, w_v : ndarray of shape (d_model, head_dim), float64
        Projections of this head (``w_k``, ``w_v`` those of its key/value group),
        before any norm.
    b_q, b_k, b_v : ndarray of shape (head_dim,), float64
        Their biases, zeros where the model has none.
    family : str, default="tiny"
        The key of :data:`~intrinsic_rank.nn.HEAD_FAMILIES` that read the head.
    model_type : str, default="tiny"
        The model's ``config.model_type`` (``"tiny"`` for TinyCausalLM).
    rope_scaling : float, default=1.0
        The rope type's ``attention_scaling`` (a factor of ``cos`` and ``sin``).
    rope_type : str or None, default=None
        ``"default"``, ``"linear"``, ``"llama3"`` or ``"yarn"``; None without rotary.
    q_norm, k_norm : HeadNorm or None, default=None
        The RMS norms of the queries and keys after their projections
        (:class:`~intrinsic_rank.nn.HeadNorm`: over the head for Qwen3 and Gemma 3,
        over the whole layer for OLMo-2).
    softcap : float or None, default=None
        Gemma 2's ``attn_logit_softcapping``.
    window : int or None, default=None
        The layer's sliding window: query ``i`` sees keys ``i - window < j <= i``.
    w_o : ndarray of shape (head_dim, d_out), float64, or None, default=None
        The head's block of the layer's output projection (it adds ``Y @ w_o``).
    b_o : ndarray of shape (d_out,), float64, or None, default=None
        The output projection's bias: the *layer's*, added once to the sum over
        its heads (zeros where the model has none).

    Attributes
    ----------
    name : str
        ``"L{layer}H{head}"``.
    value_map : tuple of ndarray
        ``(w_v, b_v)``.
    rotary_dim : int or None
        The channels of ``q`` and ``k`` that turn (``head_dim`` unless the
        family rotates a fraction of each head); None without rotary embeddings.

    Notes
    -----
    With a norm over the whole layer (OLMo-2) the head's query depends on the
    other heads' too: a ``w_q`` given to :func:`head_output` replaces this head's
    columns of the layer's projection and leaves the other heads' as they are.

    Examples
    --------
    >>> from intrinsic_rank.nn import load_model
    >>> facts = head_facts(load_model("default"), layer=1, head=2)
    >>> facts.name, facts.positional, facts.d_model, facts.head_dim, facts.scale
    ('L1H2', 'absolute', 64, 16, 0.25)
    >>> facts.w_q.shape, facts.b_v.shape, facts.w_o.shape
    ((64, 16), (16,), (16, 64))
    """

    model: str
    layer: int
    head: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    kv_group: int
    d_model: int
    head_dim: int
    positional: str
    rope_theta: Any
    inv_freq: Any
    rope_layout: Any
    scale: float
    causal: bool
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    b_q: np.ndarray
    b_k: np.ndarray
    b_v: np.ndarray
    family: str = "tiny"
    model_type: str = "tiny"
    rope_scaling: float = 1.0
    rope_type: Any = None
    q_norm: Any = None
    k_norm: Any = None
    softcap: Any = None
    window: Any = None
    w_o: Any = None
    b_o: Any = None

    @property
    def name(self):
        """``"L{layer}H{head}"``, the field's short name of a head."""
        return f"L{self.layer}H{self.head}"

    @property
    def value_map(self):
        """``(w_v, b_v)``: the head's values are ``X @ w_v + b_v``."""
        return self.w_v, self.b_v

    @property
    def rotary_dim(self):
        """The channels that turn, ``2 * len(inv_freq)``; None without rotary embeddings."""
        return None if self.inv_freq is None else 2 * len(self.inv_freq)


class HeadData(NamedTuple):
    """One head's input, output and facts, as :func:`head_activations` returns them.

    Attributes
    ----------
    X : ndarray of shape (n_inputs, length, d_model), float32
        The input of the head's attention layer; the same array object for
        every head of one layer.
    Y : ndarray of shape (n_inputs, length, head_dim), float32
        The head's output, before the output projection.
    facts : HeadFacts
    """

    X: np.ndarray
    Y: np.ndarray
    facts: HeadFacts


# ----------------------------------------------------------------------------
# which models are read


def _resolve(model):
    """``(bare model, kind, label)`` of a model, a LoadedModel, a name or a path."""
    if isinstance(model, (str, os.PathLike)):
        model = load_model(model, progress=False)
    if isinstance(model, LoadedModel):
        bare, kind = unwrap_model(model.module)
        return bare, kind, model.label
    bare, kind = unwrap_model(model)
    if kind == "tiny":
        return bare, kind, type(bare).__name__
    return bare, kind, getattr(bare.config, "name_or_path", None) or type(bare).__name__


def _is_encoder(model):
    flags = [m.is_causal for m in model.modules()
             if isinstance(getattr(m, "is_causal", None), bool)
             and not getattr(m, "is_cross_attention", False)]
    return bool(flags) and not any(flags)


def _refuse(label, reason):
    raise ValueError(f"{label}: {reason}; the heads read are those of {_READ_TEXT}")


def _layers_of(model, kind, label, layers):
    """The :class:`~intrinsic_rank.nn.AttentionLayer` of each of ``layers``, or one line why not."""
    if kind == "hf":
        config = model.config
        if getattr(config, "is_encoder_decoder", False):
            _refuse(label, "an encoder-decoder model, not a causal LM")
        if _is_encoder(model):
            _refuse(label, "an encoder: its attention is bidirectional, not causal")
    try:
        read = attention_layers(model, layers, name=label)
    except ValueError as error:
        reason = getattr(error, "reason", None)
        if reason is None:
            raise
        _refuse(label, reason)
    for layer in read:
        if layer.refusal is not None:
            _refuse(label, layer.refusal)
    return {layer.layer: layer for layer in read}


# ----------------------------------------------------------------------------
# the facts


def _head_facts(label, n_layers, layer, head):
    group = int(layer.kv_group[head])
    rope = layer.inv_freq is not None
    return HeadFacts(
        model=label, layer=layer.layer, head=head, n_layers=n_layers, n_heads=layer.n_heads,
        n_kv_heads=layer.n_kv_heads, kv_group=group, d_model=layer.d_model,
        head_dim=layer.head_dim, positional="rope" if rope else "absolute",
        rope_theta=layer.rope_theta if rope else None, inv_freq=layer.inv_freq,
        rope_layout="rotate_half" if rope else None, scale=float(layer.scale),
        causal=bool(layer.causal), w_q=layer.w_q[head].copy(), w_k=layer.w_k[group].copy(),
        w_v=layer.w_v[group].copy(), b_q=layer.b_q[head].copy(), b_k=layer.b_k[group].copy(),
        b_v=layer.b_v[group].copy(), family=layer.family, model_type=layer.model_type,
        rope_scaling=float(layer.rope_scaling), rope_type=layer.rope_type if rope else None,
        q_norm=layer.head_norm("query", head), k_norm=layer.head_norm("key", head),
        softcap=None if layer.softcap is None else float(layer.softcap),
        window=layer.window, w_o=None if layer.w_o is None else layer.w_o[head].copy(),
        b_o=None if layer.b_o is None else layer.b_o)


def _facts_of(model, kind, label, pairs, layers=None):
    """``{(layer, head): HeadFacts}``, every pair checked against the model's shape;
    ``layers`` (a dict), when given, receives the AttentionLayer of each layer read."""
    read = _layers_of(model, kind, label, sorted({layer for layer, _ in pairs}))
    facts = {}
    for at, head in pairs:
        layer = read[at]
        if not 0 <= head < layer.n_heads:
            raise ValueError(f"head={head} is out of range: layer {at} of {label} has "
                             f"heads 0..{layer.n_heads - 1}")
        facts[at, head] = _head_facts(label, layer.n_layers, layer, head)
    if layers is not None:
        layers.update(read)
    return facts


def head_facts(model, layer, head):
    """The facts of one attention head of a causal LM: weights, positions, norms, scale, mask.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        What :func:`~intrinsic_rank.nn.load_model` returns or resolves
        (``"smollm2-135m"``, ``"default"``, a Hugging Face folder, a hub id in
        the local cache, ...); an adapter is read through the model it wraps.
        Families read: the recomputed ones of :data:`~intrinsic_rank.nn.HEAD_FAMILIES`
        (:data:`READ_FAMILIES`) and :class:`~intrinsic_rank.nn.TinyCausalLM`.
    layer, head : int
        0-based layer and query head.

    Returns
    -------
    facts : HeadFacts

    Raises
    ------
    ValueError
        For a layer or head out of range; a model that is not causal; a step
        :func:`head_output` would not reproduce exactly (ALiBi, rope types whose
        frequencies change with the length, rotary frequencies other than the rope
        type's, q/k norms other than RMS norms); a model without attention
        layers; a family outside the table (one line naming its ``model_type``).
    TypeError
        When ``model`` is none of the accepted types.

    Examples
    --------
    >>> from intrinsic_rank.nn import load_model
    >>> facts = head_facts(load_model("default"), 0, 3)
    >>> facts.n_layers, facts.n_heads, facts.kv_group, facts.rope_layout
    (2, 4, 3, None)
    >>> head_facts(load_model("default"), 2, 0)
    Traceback (most recent call last):
    ...
    ValueError: layer=2 is out of range: default has layers 0..1
    """
    layer, head = check_int(layer, "layer", minimum=0), check_int(head, "head", minimum=0)
    bare, kind, label = _resolve(model)
    return _facts_of(bare, kind, label, [(layer, head)])[layer, head]


# ----------------------------------------------------------------------------
# hooking a forward pass


class _StopForward(Exception):
    """Raised by the last hook a forward pass needs, so the layers above it never run."""


def parse_head(item):
    """``(layer, head)`` of a head named ``"L18H6"`` (any case) or given as a pair.

    Parameters
    ----------
    item : str or (int, int)

    Returns
    -------
    layer, head : int

    Raises
    ------
    ValueError
        For another spelling, or a negative layer or head.

    Examples
    --------
    >>> parse_head("l18h6"), parse_head((2, 0))
    ((18, 6), (2, 0))
    """
    if isinstance(item, str):
        match = re.fullmatch(r"L(\d{1,6})H(\d{1,6})", item.strip(), flags=re.IGNORECASE)
        if match is None:
            shown = item if len(item) <= 40 else item[:37] + "..."
            raise ValueError(f"a head is (layer, head) or 'L<layer>H<head>' such as 'L18H6' "
                             f"(at most 6 digits each); got {shown!r}")
        return int(match[1]), int(match[2])
    try:
        layer, head = item
    except (TypeError, ValueError):
        raise ValueError(f"a head is (layer, head) or 'L<layer>H<head>'; got {item!r}") \
            from None
    return check_int(layer, "layer", minimum=0), check_int(head, "head", minimum=0)


def _sites(model, kind, layer):
    """``(module whose input is X, module whose input holds Y)`` of one layer."""
    return attention_layers(model, [layer])[0].sites


def _check_budget(n, L, facts, max_bytes):
    layers = {f.layer: f.d_model for f in facts.values()}
    needed = 4 * n * L * (sum(layers.values()) + sum(f.head_dim for f in facts.values()))
    limit = max_bytes
    if limit is None:
        machine = memory_limit()
        limit = None if machine is None else machine // 2
    if limit is not None and needed > limit:
        raise ValueError(
            f"head_activations: X of {len(layers)} layers and Y of {len(facts)} heads for "
            f"{n} inputs of {L} tokens need {format_bytes(needed)} (float32), more than "
            f"max_bytes={limit} ({format_bytes(limit)}); ask for fewer inputs or heads")


def _install_hooks(layers, facts, X, Y, where):
    """Hooks filling ``X[layer]`` and ``Y[(layer, head)]`` at rows ``where[0]``."""
    deepest = max(layer for layer, _ in facts)
    handles = []
    for layer in sorted(X):
        x_site, y_site = layers[layer].sites
        heads = [(h, f.head_dim) for (at, h), f in facts.items() if at == layer]

        def take_x(module, args, kwargs, layer=layer):
            hidden = args[0] if args else kwargs["hidden_states"]
            X[layer][where[0]] = hidden.detach().to("cpu", torch.float32).numpy()

        def take_y(module, args, layer=layer, heads=heads):
            out = args[0].detach().to("cpu", torch.float32)
            for head, dh in heads:
                Y[layer, head][where[0]] = out[..., head * dh:(head + 1) * dh].numpy()
            if layer == deepest:
                raise _StopForward

        handles.append(x_site.register_forward_pre_hook(take_x, with_kwargs=True))
        handles.append(y_site.register_forward_pre_hook(take_y))
    return handles


def _forward(model, kind, ids):
    try:
        if kind == "tiny":
            model(ids)
        else:
            model.base_model(input_ids=ids, use_cache=False)
    except _StopForward:
        return
    raise RuntimeError("the forward pass ended without reaching the deepest requested "
                       "head's output projection")  # pragma: no cover - a model bug


SELF_CHECK_WINDOWS = 2
"""The windows of every call of :func:`head_activations` on which each requested head is
recomputed and compared with what the model computed, before anything is returned."""

SELF_CHECK_TOLERANCES = {"float64": 1e-4, "float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}
"""The largest relative difference (Frobenius norms) of that check, by the model's dtype: ten
times what a float32 model shows at most in the tests, and the rounding of 16-bit weights."""


def _self_check(model, label, facts, X, Y):
    """One line, before anything is returned, for a head whose recomputation is not its output."""
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()),
                 torch.float32)
    dtype = str(dtype).replace("torch.", "")
    tolerance = SELF_CHECK_TOLERANCES.get(dtype, SELF_CHECK_TOLERANCES["float32"])
    rows = slice(0, SELF_CHECK_WINDOWS)
    for (layer, head), f in sorted(facts.items()):
        y = Y[layer, head][rows].astype(np.float64)
        error = float(np.linalg.norm(head_output(X[layer][rows], f) - y)
                      / max(float(np.linalg.norm(y)), np.finfo(float).tiny))
        if not error <= tolerance:
            raise ValueError(
                f"{label}: layer {layer}: the heads recomputed from their inputs differ from "
                f"the model's own outputs by {error:.2g} (relative, head {head}; at most "
                f"{tolerance:g} in {dtype}): model_type={f.model_type!r} is a variant of "
                f"the {HEAD_FAMILIES[f.family].title} family that this library does not "
                "read, so nothing is measured")


def _batches(n, batch_size, progress):
    starts = range(0, n, batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="head activations", unit="batch", disable=None,
                      file=sys.stderr)
    return starts


def head_activations(model, input_ids, heads, *, batch_size=64, device="cpu", progress=False,
                     max_bytes=None, check=True):
    """Inputs ``X`` and outputs ``Y`` of attention heads of a causal LM, by forward hooks.

    One forward pass per batch, with forward pre-hooks on each requested
    layer's attention (``X``: its input, after the pre-attention norm) and
    output projection (``Y``: each requested head's slice of its input); the
    pass stops right after the deepest requested layer's attention, so the
    layers above it and the LM head never run. Then every requested head is
    recomputed by :func:`head_output` on the first :data:`SELF_CHECK_WINDOWS`
    inputs and compared with ``Y``: a difference beyond
    :data:`SELF_CHECK_TOLERANCES` (a variant of a family that the reader does not
    know) stops the call in one line naming the layer, the difference and the
    model's type, before anything is returned.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        The models :func:`head_facts` reads. It is moved to ``device`` and run
        in eval mode without gradients; its training flags are restored after.
    input_ids : array-like of shape (n_inputs, length), integer
        Token ids, no padding (every position attends causally to the ones
        before it, positions ``0 .. length-1``); for instance from
        :func:`corpus_token_ids`.
    heads : sequence of (layer, head) or of str
        The heads, as pairs or as ``"L18H6"``; duplicates are kept once.
    batch_size : int, default=64
        Sequences per forward pass.
    device : str or torch.device, default="cpu"
    progress : bool, default=False
        A tqdm bar over batches on stderr (on a terminal only).
    max_bytes : int or None, default=None
        The most bytes the returned arrays may take; None: half of this
        machine's memory (the physical memory, or the cgroup's limit when lower).
        They take ``4 * n_inputs * length * d_model`` bytes per distinct layer
        (``X``, float32) plus ``4 * n_inputs * length * head_dim`` per head
        (``Y``), allocated once before the first pass; the forward pass of one
        batch needs its own memory on top.
    check : bool, default=True
        The check above; False skips it (for a model already checked).

    Returns
    -------
    data : dict of (layer, head) -> HeadData
        In the order of ``heads``. Heads of one layer share the same ``X``
        array object.

    Raises
    ------
    ValueError
        Before any forward pass: for a model or head that :func:`head_facts`
        refuses, ids that are not a 2-D integer array within the vocabulary
        and context, no heads, or arrays larger than ``max_bytes``; after the
        forward passes, for heads whose recomputation differs from their
        outputs (the check above).

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank.nn import load_model
    >>> ids = np.random.default_rng(0).integers(0, 64, size=(3, 10))
    >>> data = head_activations(load_model("default"), ids, ["L0H1", (1, 3), (1, 0)])
    >>> list(data), data[1, 3].X.shape, data[1, 3].Y.shape
    ([(0, 1), (1, 3), (1, 0)], (3, 10, 64), (3, 10, 16))
    >>> data[1, 3].X is data[1, 0].X
    True
    """
    bare, kind, label = _resolve(model)
    pairs = list(dict.fromkeys(parse_head(item) for item in heads))
    if not pairs:
        raise ValueError("heads must name at least one (layer, head)")
    batch_size = check_int(batch_size, "batch_size")
    if max_bytes is not None:
        max_bytes = check_int(max_bytes, "max_bytes")
    device = check_device(device)
    layers = {}
    facts = _facts_of(bare, kind, label, pairs, layers)
    ids, _ = check_token_inputs(input_ids, None, model_vocab_size(bare, kind),
                                model_max_positions(bare, kind))
    n, L = ids.shape
    _check_budget(n, L, facts, max_bytes)
    X = {layer: np.empty((n, L, f.d_model), np.float32) for (layer, _), f in facts.items()}
    Y = {key: np.empty((n, L, f.head_dim), np.float32) for key, f in facts.items()}
    where = [slice(0, 0)]
    training = [(m, m.training) for m in bare.modules()]
    handles = _install_hooks(layers, facts, X, Y, where)
    try:
        bare.to(device).eval()
        with torch.no_grad():
            for start in _batches(n, batch_size, progress):
                where[0] = slice(start, start + batch_size)
                _forward(bare, kind, ids[where[0]].to(device))
    finally:
        for handle in handles:
            handle.remove()
        for module, mode in training:
            module.training = mode
    if check:
        _self_check(bare, label, facts, X, Y)
    return {key: HeadData(X[key[0]], Y[key], facts[key]) for key in pairs}
