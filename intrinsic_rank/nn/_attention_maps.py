"""The realised attention probabilities of a model on given inputs.

:func:`attention_maps` returns them exactly as the model computes them, for the
package's own :class:`~intrinsic_rank.nn.TinyCausalLM` (recomputed layer by
layer) and for Hugging Face ``transformers`` models (run with eager attention,
which returns them); :func:`check_token_inputs` validates the token ids and mask
they are computed on, against :func:`model_vocab_size` and
:func:`model_max_positions`. The static view of the same heads (query-key and
value weights) is in ``_heads``.
"""

import contextlib
import inspect
import math

import numpy as np
import torch
from torch import nn

from ._families import base_of, n_layers_of, unwrap_model
from ._hf import _context_length

__all__ = [
    "attention_maps",
    "check_token_inputs",
    "model_max_positions",
    "model_vocab_size",
]


def model_max_positions(model, kind):
    """The context length of a model: the most positions one input may have.

    Parameters
    ----------
    model : torch.nn.Module
        A bare model, as returned by :func:`unwrap_model`.
    kind : {"tiny", "hf"}
        Its kind, as returned by :func:`unwrap_model`.

    Returns
    -------
    max_positions : int or None
        None when a ``transformers`` config names no context length.

    Examples
    --------
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> model_max_positions(*unwrap_model(lm))
    16
    """
    if kind == "tiny":
        return model.config["max_length"]
    return _context_length(model.config)


def model_vocab_size(model, kind):
    """The number of token ids a model's input embedding accepts.

    Parameters
    ----------
    model : torch.nn.Module
        A bare model, as returned by :func:`unwrap_model`.
    kind : {"tiny", "hf"}
        Its kind, as returned by :func:`unwrap_model`.

    Returns
    -------
    vocab_size : int
        The rows of the input embedding (``config.vocab_size`` when the
        embedding is not an ``nn.Embedding``).

    Examples
    --------
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> model_vocab_size(*unwrap_model(lm))
    10
    """
    if kind == "tiny":
        return model.config["vocab_size"]
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if isinstance(embeddings, nn.Embedding):
        return embeddings.num_embeddings
    return int(model.config.vocab_size)


def _as_array(values, name):
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    try:
        return np.asarray(values)
    except Exception as error:  # ragged lists and the like
        raise ValueError(f"{name} must be a 2-D array; got {type(values).__name__}: {error}") \
            from None


def check_token_inputs(input_ids, attention_mask, vocab_size, max_positions):
    """Validate a batch of token ids and its attention mask, as torch tensors.

    Parameters
    ----------
    input_ids : ndarray or torch.Tensor of shape (n, T), integer
        Token ids in ``[0, vocab_size)``.
    attention_mask : array-like of shape (n, T) of 0/1 or None
        1 for tokens, 0 for padding; all ones when None.
    vocab_size : int
        The model's vocabulary (see :func:`model_vocab_size`).
    max_positions : int or None
        The model's context (see :func:`model_max_positions`); None for no limit.

    Returns
    -------
    input_ids, attention_mask : torch.LongTensor of shape (n, T)
        On the CPU.

    Raises
    ------
    ValueError
        For ids that are not a 2-D integer array within the vocabulary, more
        positions than ``max_positions``, or a mask of another shape or with
        values other than 0/1.

    Examples
    --------
    >>> ids, mask = check_token_inputs([[1, 2, 3]], None, vocab_size=10, max_positions=16)
    >>> ids.dtype, mask.tolist()
    (torch.int64, [[1, 1, 1]])
    >>> check_token_inputs([[1, 12]], None, vocab_size=10, max_positions=16)
    Traceback (most recent call last):
    ...
    ValueError: input_ids must lie in [0, 10) (the model's vocabulary); got values from 1 to 12
    """
    ids = _as_array(input_ids, "input_ids")
    if ids.dtype == bool or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"input_ids must hold integer token ids; got dtype {ids.dtype}")
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise ValueError(f"input_ids must have shape (n, T) with n, T >= 1; got {ids.shape}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(
            f"input_ids must lie in [0, {vocab_size}) (the model's vocabulary); "
            f"got values from {ids.min()} to {ids.max()}"
        )
    if max_positions is not None and ids.shape[1] > max_positions:
        raise ValueError(
            f"input of {ids.shape[1]} positions exceeds the model's context of {max_positions}"
        )
    if attention_mask is None:
        mask = np.ones(ids.shape, dtype=np.int64)
    else:
        mask = _as_array(attention_mask, "attention_mask")
        if mask.shape != ids.shape:
            raise ValueError(
                f"attention_mask must have the shape of input_ids {ids.shape}; got {mask.shape}"
            )
        if mask.dtype.kind not in "biuf" or not np.isin(mask, (0, 1)).all():
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (token)")
        mask = mask.astype(np.int64)
    return torch.as_tensor(ids.astype(np.int64)), torch.as_tensor(mask)


def _device(model):
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _configs(model):
    """Every transformers config reachable from ``model`` (sub-configs included)."""
    seen, stack = {}, [getattr(m, "config", None) for m in model.modules()]
    while stack:
        config = stack.pop()
        if config is None or id(config) in seen or not hasattr(config, "sub_configs"):
            continue
        seen[id(config)] = config
        stack.extend(getattr(config, key, None) for key in config.sub_configs)
    return list(seen.values())


@contextlib.contextmanager
def _eager_eval(model):
    """Eval mode and eager attention inside; every flag restored afterwards."""
    training = [(m, m.training) for m in model.modules()]
    saved = [(c, getattr(c, "_attn_implementation_internal", None)) for c in _configs(model)]
    try:
        model.eval()
        if model.config._attn_implementation != "eager":
            if hasattr(model, "set_attn_implementation"):  # transformers >= 4.48
                model.set_attn_implementation("eager")
            else:  # pragma: no cover - older transformers
                model.config._attn_implementation = "eager"
        yield
    finally:
        for config, implementation in saved:
            config._attn_implementation_internal = implementation
        for module, mode in training:
            module.training = mode


def _tiny_maps(model, ids, mask):
    """Attention probabilities of TinyCausalLM, following its forward pass."""
    n, T = ids.shape
    padded = bool((mask == 0).any())
    maps = []
    with torch.no_grad():
        positions = torch.arange(T, device=ids.device)
        h = model.token_embedding(ids) + model.position_embedding(positions)
        keep = mask.bool()[:, None, None, :]  # (n, 1, 1, T): keys
        if model.config["causal"]:
            keep = keep & torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()
        for block in model.blocks:
            B, _, D = h.shape
            q, k, v = block.qkv(block.norm1(h)).split(D, dim=-1)
            q, k, v = (t.view(B, T, block.n_heads, D // block.n_heads).transpose(1, 2)
                       for t in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(~keep, float("-inf"))
            att = torch.softmax(scores, dim=-1)
            # a query that sees no key (every visible one padded) gets a row of zeros
            att = torch.nan_to_num(att, nan=0.0)
            maps.append(att)
            if padded:
                # continue as a key-masked model would, so padding never leaks in
                out = (att @ v).transpose(1, 2).reshape(B, T, D)
                h = h + block.proj(out)
                h = h + block.mlp(block.norm2(h))
            else:
                h = block(h)
    return torch.stack(maps, dim=1)


def _hf_maps(model, ids, mask):
    name = type(model).__name__
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(f"{name} is an encoder-decoder model, which is not supported")
    base = base_of(model)
    kwargs = dict(input_ids=ids, attention_mask=mask, output_attentions=True,
                  return_dict=True)
    if "use_cache" in inspect.signature(base.forward).parameters:
        kwargs["use_cache"] = False
    with _eager_eval(model), torch.no_grad():
        attentions = base(**kwargs).attentions
    n, T = ids.shape
    n_layers = n_layers_of(model.config)
    if (not attentions or any(a is None for a in attentions)
            or (n_layers is not None and len(attentions) != n_layers)
            or any(a.ndim != 4 or a.shape[0] != n or a.shape[-2:] != (T, T)
                   for a in attentions)):
        raise ValueError(
            f"{name} returned no attention probabilities with output_attentions=True "
            f"(attention implementation {model.config._attn_implementation!r}); it needs an "
            "'eager' attention implementation that returns them"
        )
    return torch.stack(list(attentions), dim=1)


def attention_maps(model, input_ids, attention_mask=None):
    """The attention probabilities a model computes on a batch of token ids.

    Parameters
    ----------
    model : TinyCausalLM, transformers.PreTrainedModel, TinyLMAdapter or HFCausalLMAdapter
        An adapter is replaced by the model it wraps; a model with a task head
        is run through its ``base_model``.
    input_ids : ndarray or torch.Tensor of shape (n, T), integer
        Token ids in ``[0, vocab_size)``; ``T`` at most the model's context.
        One batch: the caller splits large inputs.
    attention_mask : array-like of shape (n, T) of 0/1, default=None
        1 for tokens, 0 for padding; all ones when None.

    Returns
    -------
    maps : ndarray of shape (n, n_layers, n_heads, T, T), float32
        ``maps[i, l, h, s, t]`` is the weight query position ``s`` gives key
        position ``t`` in head ``h`` of layer ``l`` (rows are queries).

    Raises
    ------
    TypeError
        When ``model`` is none of the accepted types.
    ValueError
        For ids that are not a 2-D integer array within the vocabulary, a mask of
        another shape or with values other than 0/1, more positions than the
        model's context, or a model that returns no attention probabilities.

    Notes
    -----
    A ``transformers`` model is run in eval mode, without gradients, with
    ``output_attentions=True`` and its attention implementation switched to
    ``"eager"`` (SDPA and flash attention return no probabilities); its
    training flags and attention implementation are restored afterwards, also
    when the call fails. The maps are exactly what the model returns.

    :class:`~intrinsic_rank.nn.TinyCausalLM` is recomputed layer by layer,
    ``softmax(q k^T / sqrt(d_head))`` from ``block.norm1`` and ``block.qkv``
    with the causal mask when the model is causal: what its
    ``scaled_dot_product_attention`` uses. The model has no notion of padding;
    zeros in ``attention_mask`` are applied as a key mask (padded keys get
    weight 0, and later layers are computed from the masked attention, so padding
    never reaches a token's representation). A query whose visible keys are all
    padding gets a row of zeros.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> _ = torch.manual_seed(0)
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=2, n_heads=2, max_length=16)
    >>> maps = attention_maps(lm, np.array([[1, 2, 3, 4], [5, 6, 7, 8]]))
    >>> maps.shape, maps.dtype
    ((2, 2, 2, 4, 4), dtype('float32'))
    >>> bool(np.allclose(maps.sum(-1), 1)), bool((np.triu(maps, 1) == 0).all())
    (True, True)
    """
    model, kind = unwrap_model(model)
    ids, mask = check_token_inputs(input_ids, attention_mask, model_vocab_size(model, kind),
                                   model_max_positions(model, kind))
    device = _device(model)
    ids, mask = ids.to(device), mask.to(device)
    maps = _tiny_maps(model, ids, mask) if kind == "tiny" else _hf_maps(model, ids, mask)
    return maps.detach().float().cpu().numpy()
