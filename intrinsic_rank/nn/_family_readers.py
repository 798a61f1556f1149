"""How each layout of attention projections is read: the heads' slices of the weights.

Every function here reads one attention layer of one layout (the table of families in
``_families`` names the layout of each model type) into a :class:`Projections`: the
query, key, value and output slices of every head as float64 arrays in the convention
``q = x @ w_q[h] + b_q[h]``, the head counts and width, and where the query of each
head lives in the model's own parameters (what an edit of a head's query writes).
The layouts:

* ``"tiny"`` -- :class:`~intrinsic_rank.nn.TinyCausalLM`'s fused ``qkv`` Linear,
  rows ``[q | k | v]``, and its ``proj``;
* ``"gpt2"`` -- GPT-2's fused ``c_attn`` and ``c_proj``, ``Conv1D`` layers whose
  weights are stored ``(in, out)``;
* ``"q_proj"`` -- separate ``q_proj``/``k_proj``/``v_proj`` Linear layers and
  ``o_proj`` (``out_proj`` for OPT and GPT-Neo): Llama, Mistral, Qwen2/3, OLMo-2,
  Gemma 1/2/3, OPT, GPT-Neo;
* ``"gpt_neox"`` -- GPT-NeoX's fused ``query_key_value``, laid out per head as
  ``[q_h | k_h | v_h]``, and ``dense``;
* ``"phi3"`` -- Phi-3's fused ``qkv_proj``, rows ``[q | k | v]`` with grouped keys,
  and ``o_proj``;
* ``"bert"`` and ``"distilbert"`` -- the encoders' ``query``/``key``/``value``
  (``q_lin``/``k_lin``/``v_lin``) and output ``dense`` (``out_lin``).
"""

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

__all__ = ["Projections", "read_projections"]


class Projections(NamedTuple):
    """One attention layer's weights, per head (see the module docstring)."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    w_q: np.ndarray  # (n_heads, d_model, head_dim)
    b_q: np.ndarray  # (n_heads, head_dim)
    w_k: np.ndarray  # (n_kv_heads, d_model, head_dim)
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: Any  # (n_heads, head_dim, d_out) or None where no output projection is found
    b_o: Any  # (d_out,) or None
    query_sites: tuple  # per head: ((param, index, transposed), bias (param, index) or None)


def _as64(tensor):
    return tensor.detach().to("cpu", torch.float64).numpy()


def _rows(weight, bias, start, n, d_head):
    """Heads from rows ``start + h*d_head ...`` of a ``(out, in)`` weight: ``(n, in, d_head)``."""
    rows = weight[start:start + n * d_head]
    w = _as64(rows).reshape(n, d_head, -1).transpose(0, 2, 1)
    b = (np.zeros((n, d_head)) if bias is None
         else _as64(bias[start:start + n * d_head]).reshape(n, d_head))
    return np.ascontiguousarray(w), b


def _output(weight, bias, n, d_head, stored_in_out=False):
    """``(w_o, b_o)`` of an output projection: ``w_o[h]`` the ``(d_head, d_out)`` block of head h.

    ``weight`` is ``(d_out, n * d_head)`` for a Linear, ``(n * d_head, d_out)`` for a
    ``Conv1D`` (``stored_in_out``).
    """
    w = _as64(weight)
    if not stored_in_out:
        w = w.T
    if w.shape[0] != n * d_head:
        return None, None
    w_o = np.ascontiguousarray(w.reshape(n, d_head, -1))
    b_o = np.zeros(w.shape[1]) if bias is None else _as64(bias)
    return w_o, b_o


def _linear_output(module, n, d_head):
    if not isinstance(module, nn.Linear):
        return None, None
    return _output(module.weight, module.bias, n, d_head)


def _row_sites(weight, bias, start, n, d_head, stride=None):
    """Where each head's query lives: rows of a ``(out, in)`` weight (stored transposed)."""
    stride = d_head if stride is None else stride
    sites = []
    for h in range(n):
        rows = slice(start + h * stride, start + h * stride + d_head)
        sites.append(((weight, rows, True), None if bias is None else (bias, rows)))
    return tuple(sites)


def _tiny(attention, output, config):
    D, H = attention.in_features, config["n_heads"]
    dh = D // H
    w_q, b_q = _rows(attention.weight, attention.bias, 0, H, dh)
    w_k, b_k = _rows(attention.weight, attention.bias, D, H, dh)
    w_v, b_v = _rows(attention.weight, attention.bias, 2 * D, H, dh)
    w_o, b_o = _linear_output(output, H, dh)
    sites = _row_sites(attention.weight, attention.bias, 0, H, dh)
    return Projections(H, H, dh, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, sites)


def _gpt2(attention, output, config):
    H, dh = int(attention.num_heads), int(attention.head_dim)
    D = H * dh
    weight, bias = attention.c_attn.weight.t(), attention.c_attn.bias  # Conv1D: (in, out)
    w_q, b_q = _rows(weight, bias, 0, H, dh)
    w_k, b_k = _rows(weight, bias, D, H, dh)
    w_v, b_v = _rows(weight, bias, 2 * D, H, dh)
    w_o, b_o = _output(output.weight, output.bias, H, dh, stored_in_out=True)
    sites = tuple(((attention.c_attn.weight, (slice(None), slice(h * dh, (h + 1) * dh)), False),
                   None if bias is None else (bias, slice(h * dh, (h + 1) * dh)))
                  for h in range(H))
    return Projections(H, H, dh, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, sites)


def _heads_of(value):
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _q_proj_shape(attention, config, name):
    """``(n_heads, n_kv_heads, head_dim)`` of a q_proj attention, checked against its config."""
    q_out, k_out = attention.q_proj.out_features, attention.k_proj.out_features
    heads = _heads_of(getattr(config, "num_attention_heads", None))
    dh = getattr(attention, "head_dim", None) or getattr(config, "head_dim", None)
    if not dh:
        dh = q_out // (heads or getattr(attention, "num_heads", None) or 1)
    dh = int(dh)
    if q_out % dh or k_out % dh or attention.v_proj.out_features != k_out:
        raise ValueError(f"{name}: the projections ({q_out}, {k_out}, "
                         f"{attention.v_proj.out_features} outputs) are not whole heads of "
                         f"width {dh}")
    H, n_kv = q_out // dh, k_out // dh
    kv = _heads_of(getattr(config, "num_key_value_heads", None))
    if (heads is not None and heads != H) or (kv is not None and kv != n_kv):
        said = f"{heads} query heads" + ("" if kv is None else f" and {kv} key/value heads")
        raise ValueError(f"{name}: its config says {said} of width {dh}, but its weights hold "
                         f"{H} and {n_kv} (q_proj has {q_out} outputs, k_proj {k_out}): the "
                         "config and the weights do not match")
    if n_kv < 1 or H % n_kv:
        raise ValueError(f"{name}: {n_kv} key/value heads do not divide {H} query heads")
    return H, n_kv, dh


def _q_proj(attention, output, config, name):
    H, n_kv, dh = _q_proj_shape(attention, config, name)
    q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
    w_q, b_q = _rows(q.weight, q.bias, 0, H, dh)
    w_k, b_k = _rows(k.weight, k.bias, 0, n_kv, dh)
    w_v, b_v = _rows(v.weight, v.bias, 0, n_kv, dh)
    w_o, b_o = _linear_output(output, H, dh)
    sites = _row_sites(q.weight, q.bias, 0, H, dh)
    return Projections(H, n_kv, dh, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, sites)


def _neox(attention, output, config, name):
    H = int(config.num_attention_heads)
    dh = int(attention.head_size)
    fused = attention.query_key_value
    if fused.out_features != 3 * H * dh:
        raise ValueError(f"{name}: its config says {H} heads of width {dh}, but its "
                         f"query_key_value has {fused.out_features} outputs, not {3 * H * dh}: "
                         "the config and the weights do not match")
    weight = fused.weight.reshape(H, 3, dh, -1)
    bias = None if fused.bias is None else fused.bias.reshape(H, 3, dh)
    parts = []
    for part in range(3):  # the fused output is viewed as (..., H, 3 * dh), chunked q, k, v
        w = np.ascontiguousarray(_as64(weight[:, part]).transpose(0, 2, 1))
        parts.append((w, np.zeros((H, dh)) if bias is None else _as64(bias[:, part])))
    w_o, b_o = _linear_output(output, H, dh)
    sites = _row_sites(fused.weight, fused.bias, 0, H, dh, stride=3 * dh)
    (w_q, b_q), (w_k, b_k), (w_v, b_v) = parts
    return Projections(H, H, dh, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, sites)


def _phi3(attention, output, config, name):
    H, n_kv = int(config.num_attention_heads), int(attention.num_key_value_heads)
    dh = int(attention.head_dim)
    fused = attention.qkv_proj
    if fused.out_features != (H + 2 * n_kv) * dh:
        raise ValueError(f"{name}: its config says {H} query and {n_kv} key/value heads of "
                         f"width {dh}, but its qkv_proj has {fused.out_features} outputs: the "
                         "config and the weights do not match")
    w_q, b_q = _rows(fused.weight, fused.bias, 0, H, dh)
    w_k, b_k = _rows(fused.weight, fused.bias, H * dh, n_kv, dh)
    w_v, b_v = _rows(fused.weight, fused.bias, (H + n_kv) * dh, n_kv, dh)
    w_o, b_o = _linear_output(output, H, dh)
    sites = _row_sites(fused.weight, fused.bias, 0, H, dh)
    return Projections(H, n_kv, dh, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, sites)


def _encoder(attention, output, layout):
    if layout == "bert":
        H = int(attention.num_attention_heads)
        q, k, v = attention.query, attention.key, attention.value
    else:
        H = int(attention.n_heads)
        q, k, v = attention.q_lin, attention.k_lin, attention.v_lin
    dh = int(attention.attention_head_size)
    (w_q, b_q), (w_k, b_k), (w_v, b_v) = (_rows(p.weight, p.bias, 0, H, dh) for p in (q, k, v))
    w_o, b_o = _linear_output(output, H, dh)
    sites = _row_sites(q.weight, q.bias, 0, H, dh)
    return Projections(H, H, dh, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, sites)


def read_projections(layout, attention, output, config, name):
    """The :class:`Projections` of one layer of ``layout`` (module docstring).

    Parameters
    ----------
    layout : str
    attention : torch.nn.Module
        The attention module (TinyCausalLM: its fused ``qkv``).
    output : torch.nn.Module or None
        Its output projection.
    config : transformers config or dict
    name : str
        The model's name, for errors.

    Raises
    ------
    ValueError
        When the weights are not whole heads, or disagree with the config.
    """
    if layout == "tiny":
        return _tiny(attention, output, config)
    if layout == "gpt2":
        return _gpt2(attention, output, config)
    if layout == "gpt_neox":
        return _neox(attention, output, config, name)
    if layout == "phi3":
        return _phi3(attention, output, config, name)
    if layout in ("bert", "distilbert"):
        return _encoder(attention, output, layout)
    return _q_proj(attention, output, config, name)
