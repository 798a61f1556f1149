"""One attention head of a causal LM as a function: its facts, its input ``X`` and output ``Y``.

For head ``h`` of layer ``l`` of a causal language model:

* ``X`` is the input of the layer's attention, after the pre-attention norm
  (Llama/Qwen2/Mistral ``self_attn``'s ``hidden_states``, GPT-2 ``ln_1``'s
  output, :class:`~intrinsic_rank.nn.TinyCausalLM` ``norm1``'s output),
  ``d_model`` wide;
* ``Y`` is that head's slice of the input of the output projection (Llama
  ``o_proj``, GPT-2 ``attn.c_proj``, TinyCausalLM ``proj``), ``head_dim``
  wide: columns ``h * head_dim ... (h + 1) * head_dim - 1``;
* :class:`HeadFacts` holds everything that maps one to the other,
  ``Y = softmax(scale * rope(X W_Q + b_Q) rope(X W_K + b_K)^T + causal mask) (X W_V + b_V)``,
  and :func:`head_output` recomputes ``Y`` from ``X`` with it.

This is the teacher of the attention-native rank ``r*_attn`` of a real head
(the Entropic Bound's rank inside the attention class): a student with the
head's own positional scheme, scale, mask and values fits ``Y`` from ``X``.
Only schemes that the recomputation reads exactly are accepted; any other is
refused in one line naming it (never a silent wrong ``Y``).
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
    LoadedModel,
    check_token_inputs,
    load_model,
    model_max_positions,
    model_vocab_size,
    query_key_weights,
    rope_frequencies,
    rope_tables,
    rotate,
    unwrap_model,
    value_weights,
)

__all__ = ["READ_FAMILIES", "HeadData", "HeadFacts", "head_activations", "head_facts",
           "head_output", "parse_head"]

READ_FAMILIES = ("llama", "mistral", "qwen2", "gpt2")
"""The ``transformers`` ``model_type`` values whose heads are read (besides TinyCausalLM)."""

_ROTARY_FAMILIES = frozenset({"llama", "mistral", "qwen2"})
_READ_TEXT = ("Llama, Mistral (without a sliding window), Qwen2 and GPT-2 models and "
              "the package's TinyCausalLM")
_CHUNK_BYTES = 64 << 20  # the float64 working set of one chunk of head_output


@dataclasses.dataclass(frozen=True, eq=False)
class HeadFacts:
    """Everything needed to recompute one attention head's output from its input.

    For an input ``X`` of shape ``(L, d_model)`` (one sequence, positions
    ``0 .. L-1``), the head computes ``q = X @ w_q + b_q``, ``k = X @ w_k +
    b_k``, ``v = X @ w_v + b_v``; with ``positional="rope"`` it rotates ``q``
    and ``k`` by the angles ``position * inv_freq`` in the ``rope_layout``;
    then ``Y = softmax(scale * q k^T, causal) v`` (query ``i`` sees keys
    ``0 .. i``). :func:`head_output` is this recipe.

    Parameters
    ----------
    model : str
        A label of the model (the packaged name, the folder, or the class).
    layer, head : int
        0-based layer and query head.
    n_layers, n_heads, n_kv_heads : int
        Layers of the model; query heads and key/value heads of the layer.
    kv_group : int
        The key/value head this query head reads (grouped-query attention:
        ``head // (n_heads // n_kv_heads)``).
    d_model, head_dim : int
        Width of ``X`` and of the head's queries, keys, values and ``Y``.
    positional : {"rope", "absolute"}
        ``"rope"``: rotary position embeddings applied to ``q`` and ``k``
        (Llama, Mistral, Qwen2); ``"absolute"``: learned or sinusoidal
        positions added to the residual stream before the first layer (GPT-2,
        TinyCausalLM), so they are already inside ``X`` and the head itself
        sees no position.
    rope_theta : float or None
        The rotary base; None without rotary embeddings.
    inv_freq : ndarray of shape (head_dim // 2,), float64, or None
        The rotary frequencies, read from the model's rotary module: for the
        default rope type ``1 / rope_theta ** (arange(0, head_dim, 2) /
        head_dim)``, computed in float32 as ``transformers`` does.
    rope_layout : {"rotate_half"} or None
        How channels pair up in the rotation: ``"rotate_half"`` (``transformers``
        Llama/Qwen2: channel ``i`` with ``i + head_dim // 2``, frequency
        ``inv_freq[i]``); None without rotary embeddings.
    scale : float
        The factor multiplying ``q . k`` before the softmax (``1 /
        sqrt(head_dim)`` for every family read here, GPT-2's
        ``scale_attn_weights`` / ``scale_attn_by_inverse_layer_idx`` included).
    causal : bool
        True: query ``i`` attends to keys ``0 .. i`` only (only causal heads
        are read).
    w_q, w_k, w_v : ndarray of shape (d_model, head_dim), float64
        Projections of this head (``w_k``, ``w_v`` those of its key/value group).
    b_q, b_k, b_v : ndarray of shape (head_dim,), float64
        Their biases, zeros where the model has none.

    Attributes
    ----------
    name : str
        ``"L{layer}H{head}"``.
    value_map : tuple of ndarray
        ``(w_v, b_v)``.

    Examples
    --------
    >>> from intrinsic_rank.nn import load_model
    >>> facts = head_facts(load_model("default"), layer=1, head=2)
    >>> facts.name, facts.positional, facts.d_model, facts.head_dim, facts.scale
    ('L1H2', 'absolute', 64, 16, 0.25)
    >>> facts.w_q.shape, facts.b_v.shape
    ((64, 16), (16,))
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

    @property
    def name(self):
        """``"L{layer}H{head}"``, the field's short name of a head."""
        return f"L{self.layer}H{self.head}"

    @property
    def value_map(self):
        """``(w_v, b_v)``: the head's values are ``X @ w_v + b_v``."""
        return self.w_v, self.b_v


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


def _sliding_window(config):
    """The sliding window a config sets (None without one)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None) or ()
    use = getattr(config, "use_sliding_window", None)
    if use or "sliding_attention" in types:
        return window if window is not None else "on"
    return window if use is None else None


def _rope_parameters(config):
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    return params if isinstance(params, dict) else {}


def _partial_rotary(config, params):
    for value in (params.get("partial_rotary_factor"),
                  getattr(config, "partial_rotary_factor", None),
                  getattr(config, "rotary_pct", None)):
        if isinstance(value, (int, float)) and value < 1:
            return value
    return None


def _scheme_refusal(model):
    """Why ``model``'s attention is not recomputed exactly, or None (config-level schemes)."""
    config = model.config
    model_type = getattr(config, "model_type", None)
    if getattr(config, "is_encoder_decoder", False):
        return "an encoder-decoder model, not a causal LM"
    if _is_encoder(model):
        return "an encoder: its attention is bidirectional, not causal"
    if model_type in ("bloom", "mpt") or getattr(config, "alibi", None) is True:
        return "ALiBi position biases, which this library does not read"
    if getattr(config, "attn_logit_softcapping", None) is not None:
        return (f"soft-capped attention logits (attn_logit_softcapping="
                f"{config.attn_logit_softcapping}), which this library does not read")
    window = _sliding_window(config)
    if window is not None:
        return f"sliding-window attention (sliding_window={window}), which this library " \
               "does not read"
    if "local" in (getattr(config, "attention_layers", None) or ()):
        return "GPT-Neo's local attention, which this library does not read"
    params = _rope_parameters(config)
    if params and all(isinstance(v, dict) for v in params.values()):
        return "rope parameters per layer type, which this library does not read"
    partial = _partial_rotary(config, params)
    if partial is not None:
        return f"partial rotary embeddings (a fraction {partial} of each head rotated), " \
               "which this library does not read"
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type != "default":
        return f"rope scaling of type {rope_type!r}, which this library does not read " \
               "(only the default rope type)"
    return None


def _refuse(label, reason):
    raise ValueError(f"{label}: {reason}; the heads read are those of {_READ_TEXT}")


def _check_readable(model, kind, label):
    """ValueError unless the causal heads of ``model`` are recomputed exactly."""
    if kind == "tiny":
        if not model.config["causal"]:
            _refuse(label, "a bidirectional TinyCausalLM (causal=False), not a causal LM")
        return
    reason = _scheme_refusal(model)
    if reason is None and getattr(model.config, "model_type", None) not in READ_FAMILIES:
        try:
            qk_norm = any(layer.qk_norm for layer in query_key_weights(model))
        except ValueError:
            qk_norm = False
        reason = ("q/k norms after the projections, which this library does not read"
                  if qk_norm else f"model_type={model.config.model_type!r}, a family whose "
                  "heads are not read")
    if reason is not None:
        _refuse(label, reason)


# ----------------------------------------------------------------------------
# the facts


def _rotary_facts(model, label, head_dim):
    """``(rope_theta, inv_freq)`` of a rotary model, from its rotary module."""
    rotary = getattr(model.base_model, "rotary_emb", None)
    inv_freq = getattr(rotary, "inv_freq", None)
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.shape != (head_dim // 2,):
        _refuse(label, "no rotary module with head_dim / 2 frequencies (rotary_emb.inv_freq)")
    if getattr(rotary, "rope_type", "default") != "default" or \
            float(getattr(rotary, "attention_scaling", 1.0)) != 1.0:
        _refuse(label, "a rotary module that is not of the default rope type")
    theta = _rope_parameters(model.config).get("rope_theta",
                                               getattr(model.config, "rope_theta", None))
    inv_freq = inv_freq.detach().to("cpu", torch.float64).numpy().copy()
    # transformers computes them in float32: equal to the float64 formula within 1e-6
    if theta is None or not np.allclose(
            inv_freq, rope_frequencies(head_dim, float(theta)).numpy(), rtol=1e-6, atol=0):
        _refuse(label, f"rotary frequencies that are not the default rope's of "
                       f"rope_theta={theta}")
    return float(theta), inv_freq


def _facts_of(model, kind, label, pairs):
    """``{(layer, head): HeadFacts}``, every pair checked against the model's shape."""
    _check_readable(model, kind, label)
    qk = query_key_weights(model)
    n_layers = len(qk)
    for layer, head in pairs:
        if not 0 <= layer < n_layers:
            raise ValueError(f"layer={layer} is out of range: {label} has layers "
                             f"0..{n_layers - 1}")
        if not 0 <= head < qk[layer].n_heads:
            raise ValueError(f"head={head} is out of range: layer {layer} of {label} has "
                             f"heads 0..{qk[layer].n_heads - 1}")
    values = value_weights(model)
    rotary = kind == "hf" and model.config.model_type in _ROTARY_FAMILIES
    facts = {}
    for layer, head in pairs:
        heads = qk[layer]
        if heads.qk_norm:
            _refuse(label, "q/k norms after the projections, which this library does not read")
        theta, inv_freq = (_rotary_facts(model, label, heads.d_head) if rotary
                           else (None, None))
        w_v, b_v = values[layer]
        facts[layer, head] = HeadFacts(
            model=label, layer=layer, head=head, n_layers=n_layers, n_heads=heads.n_heads,
            n_kv_heads=len(np.unique(heads.kv_group)), kv_group=int(heads.kv_group[head]),
            d_model=heads.d_model, head_dim=heads.d_head,
            positional="rope" if rotary else "absolute", rope_theta=theta,
            inv_freq=inv_freq, rope_layout="rotate_half" if rotary else None,
            scale=heads.scale, causal=True,
            w_q=heads.w_q[head].copy(), w_k=heads.w_k[head].copy(), w_v=w_v[head].copy(),
            b_q=heads.b_q[head].copy(), b_k=heads.b_k[head].copy(), b_v=b_v[head].copy())
    return facts


def head_facts(model, layer, head):
    """The facts of one attention head of a causal LM: weights, positions, scale, mask.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        What :func:`~intrinsic_rank.nn.load_model` returns or resolves
        (``"smollm2-135m"``, ``"default"``, a Hugging Face folder, ...); an
        adapter is read through the model it wraps. Families read: ``transformers``
        Llama, Mistral without a sliding window, Qwen2 and GPT-2 (see
        :data:`READ_FAMILIES`), and :class:`~intrinsic_rank.nn.TinyCausalLM`.
    layer, head : int
        0-based layer and query head.

    Returns
    -------
    facts : HeadFacts

    Raises
    ------
    ValueError
        For a layer or head out of range (naming the valid range); for a model
        that is not causal (an encoder, an encoder-decoder, ``TinyCausalLM(causal=False)``);
        for an attention scheme that :func:`head_output` would not reproduce
        exactly: ALiBi (BLOOM, MPT, Falcon with ``alibi``), soft-capped logits
        (Gemma-2), sliding windows (Mistral's ``sliding_window``, Qwen2's
        ``use_sliding_window``, Gemma-2/3), GPT-Neo's local attention, q/k
        norms (Qwen3, OLMo-2), partial rotary embeddings, rope scaling other
        than the default type; and for any other family.
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
# recomputing a head


def _as_inputs(X, d_model):
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    X = np.asarray(X)
    if X.dtype.kind not in "fiu" or X.ndim != 3 or X.shape[-1] != d_model or 0 in X.shape:
        raise ValueError(f"X must be a real array of shape (n, L, {d_model}) (the head's "
                         f"d_model); got shape {X.shape} and dtype {X.dtype}")
    if not np.isfinite(X).all():
        raise ValueError("X holds NaN or infinity")
    return X


def _as_query(w_q, facts):
    w_q = np.asarray(w_q, dtype=np.float64)
    if w_q.shape != (facts.d_model, facts.head_dim) or not np.isfinite(w_q).all():
        raise ValueError(f"w_q must be a finite array of shape ({facts.d_model}, "
                         f"{facts.head_dim}); got shape {w_q.shape}")
    return w_q


def head_output(X, facts, *, w_q=None):
    """A head's output recomputed from its input with its own weights.

    ``Y = softmax(scale * rope(X w_q + b_q) rope(X w_k + b_k)^T, causal) (X w_v + b_v)``
    per sequence, positions ``0 .. L-1``: the recipe of :class:`HeadFacts`.

    Parameters
    ----------
    X : ndarray or torch.Tensor of shape (n, L, d_model)
        Inputs of the head's layer (as :func:`head_activations` returns them).
    facts : HeadFacts
    w_q : ndarray of shape (d_model, head_dim), default=None
        A query projection in place of the head's own (for instance its
        truncation to a low rank); ``b_q`` stays the head's.

    Returns
    -------
    Y : ndarray of shape (n, L, head_dim), float64
        Computed in float64 throughout (projections, rotations, logits and
        softmax), in chunks of sequences holding about 64 MiB each.

    Raises
    ------
    ValueError
        For ``X`` of another width or not a finite 3-D array, ``w_q`` of
        another shape, or an output that overflows float64 (never NaN from
        finite inputs).

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank.nn import load_model
    >>> loaded = load_model("default")
    >>> ids = np.random.default_rng(0).integers(0, 64, size=(2, 12))
    >>> data = head_activations(loaded, ids, [(1, 2)])[1, 2]
    >>> Y = head_output(data.X, data.facts)
    >>> bool(np.linalg.norm(Y - data.Y) / np.linalg.norm(data.Y) < 1e-5)
    True
    """
    X = _as_inputs(X, facts.d_model)
    w_q = facts.w_q if w_q is None else _as_query(w_q, facts)
    n, L, _ = X.shape
    # a float64 copy: the inputs may be read-only (memory-mapped by a parallel worker)
    t = lambda a: torch.from_numpy(np.array(a, dtype=np.float64))  # noqa: E731
    wq, wk, wv, bq, bk, bv = map(t, (w_q, facts.w_k, facts.w_v, facts.b_q, facts.b_k,
                                     facts.b_v))
    rope = rope_tables(facts.inv_freq, L) if facts.positional == "rope" else None
    future = torch.ones(L, L, dtype=torch.bool).triu(1)
    rows = max(1, _CHUNK_BYTES // (8 * L * (L + facts.d_model + 3 * facts.head_dim)))
    Y = np.empty((n, L, facts.head_dim))
    with torch.no_grad():
        for start in range(0, n, rows):
            x = t(X[start:start + rows])
            q, k, v = x @ wq + bq, x @ wk + bk, x @ wv + bv
            if rope is not None:
                q, k = rotate(q, *rope), rotate(k, *rope)
            logits = facts.scale * (q @ k.transpose(-1, -2))
            if facts.causal:
                logits = logits.masked_fill(future, float("-inf"))
            Y[start:start + rows] = (torch.softmax(logits, dim=-1) @ v).numpy()
    if not np.isfinite(Y).all():
        raise ValueError(f"head_output: {facts.name}'s output overflows float64 on these "
                         f"inputs (largest |X| {float(np.abs(X).max()):.3g}): its projections "
                         "or scores are beyond the range of a number")
    return Y


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
    if kind == "tiny":
        block = model.blocks[layer]
        return block.qkv, block.proj
    if model.config.model_type == "gpt2":
        attention = model.base_model.h[layer].attn
        return attention, attention.c_proj
    attention = model.base_model.layers[layer].self_attn
    return attention, attention.o_proj


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


def _install_hooks(model, kind, facts, X, Y, where):
    """Hooks filling ``X[layer]`` and ``Y[(layer, head)]`` at rows ``where[0]``."""
    deepest = max(layer for layer, _ in facts)
    handles = []
    for layer in sorted(X):
        x_site, y_site = _sites(model, kind, layer)
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


def _batches(n, batch_size, progress):
    starts = range(0, n, batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="head activations", unit="batch", disable=None,
                      file=sys.stderr)
    return starts


def head_activations(model, input_ids, heads, *, batch_size=64, device="cpu", progress=False,
                     max_bytes=None):
    """Inputs ``X`` and outputs ``Y`` of attention heads of a causal LM, by forward hooks.

    One forward pass per batch, with forward pre-hooks on each requested
    layer's attention (``X``: its input, after the pre-attention norm) and
    output projection (``Y``: each requested head's slice of its input); the
    pass stops right after the deepest requested layer's attention, so the
    layers above it and the LM head never run.

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
        and context, no heads, or arrays larger than ``max_bytes``.

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
    facts = _facts_of(bare, kind, label, pairs)
    ids, _ = check_token_inputs(input_ids, None, model_vocab_size(bare, kind),
                                model_max_positions(bare, kind))
    n, L = ids.shape
    _check_budget(n, L, facts, max_bytes)
    X = {layer: np.empty((n, L, f.d_model), np.float32) for (layer, _), f in facts.items()}
    Y = {key: np.empty((n, L, f.head_dim), np.float32) for key, f in facts.items()}
    where = [slice(0, 0)]
    training = [(m, m.training) for m in bare.modules()]
    handles = _install_hooks(bare, kind, facts, X, Y, where)
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
    return {key: HeadData(X[key[0]], Y[key], facts[key]) for key in pairs}
