"""Imposing query projections on a causal LM, undoably, and the LM's own next-token loss.

A rank a head "needs" should be enough when it is imposed on the model, and less
should hurt: replace heads' query projections by low-rank ones inside the LM
(:func:`imposed_queries`, an in-place weight edit undone when the block ends)
and measure the LM's next-token cross-entropy on held-out text
(:func:`lm_loss`). This judges the deficiency and achievability of the
attention-native rank of "The Entropic Bound" (Byeong Hoon Yoon, 2026) by the
model's own loss. The matrices follow :class:`~intrinsic_rank.inspection.HeadFacts`
(``q = X @ w_q + b_q``, ``X`` after the pre-attention norm, the projection before any
norm of the queries), in every family the reader of heads reads, fused layouts included.
"""

import contextlib
import os
from collections.abc import Mapping

import numpy as np
import torch

from .._interrupts import StopGuard
from .._validation import check_device, check_int
from ..nn import (
    attention_layers,
    check_token_inputs,
    load_model,
    model_max_positions,
    model_vocab_size,
)
from ._head_io import _facts_of, _resolve, parse_head

__all__ = ["imposed_queries", "lm_loss"]


def _name(layer, head):
    return f"L{layer}H{head}"


def _matrix(value, key):
    """``value`` as a float64 array; ValueError naming the head for anything else.

    A complex array is refused, never cast: the cast would drop its imaginary part.
    """
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise ValueError(f"projections[{_name(*key)}] must be a real array; got a complex "
                             f"tensor ({value.dtype})")
        value = value.detach().to("cpu", torch.float64).numpy()
    try:
        array = np.asarray(value)
        complex_ = np.iscomplexobj(array) or (array.dtype == object and any(
            isinstance(v, complex) for v in array.reshape(-1)))
        if not complex_:
            return np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"projections[{_name(*key)}] must be a real array; got "
                         f"{type(value).__name__}") from None
    raise ValueError(f"projections[{_name(*key)}] must be a real array; got a complex one "
                     f"({array.dtype}): its imaginary part would be dropped")


def _checked_projections(projections, bare, kind, label, layers):
    """``{(layer, head): float64 (d_model, head_dim)}``, every key and matrix checked;
    ``layers`` receives the :class:`~intrinsic_rank.nn.AttentionLayer` of each layer named."""
    if not isinstance(projections, Mapping):
        raise ValueError("projections must map (layer, head) or 'L<layer>H<head>' to a "
                         f"(d_model, head_dim) array; got {type(projections).__name__}")
    keys = [parse_head(item) for item in projections]
    if len(set(keys)) != len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"projections names head {_name(*twice)} twice")
    facts = _facts_of(bare, kind, label, keys, layers)
    checked, biases = {}, {}
    for key, value in zip(keys, projections.values()):
        if isinstance(value, tuple):  # (w_q, b_q)
            if len(value) != 2:
                raise ValueError(f"projections[{_name(*key)}] must be w_q or a pair (w_q, "
                                 f"b_q); got a tuple of {len(value)}")
            value, bias = value
            bias = _matrix(bias, key).reshape(-1)
            if bias.shape != (facts[key].head_dim,) or not np.isfinite(bias).all():
                raise ValueError(f"projections[{_name(*key)}]: its query bias must be a "
                                 f"finite array of shape ({facts[key].head_dim},); got "
                                 f"shape {bias.shape}")
            biases[key] = bias
        w_q = _matrix(value, key)
        shape = (facts[key].d_model, facts[key].head_dim)
        if w_q.shape != shape:
            raise ValueError(f"projections[{_name(*key)}] must have shape {shape} "
                             f"(d_model, head_dim); got {w_q.shape}")
        if not np.isfinite(w_q).all():
            raise ValueError(f"projections[{_name(*key)}] holds NaN or infinity")
        checked[key] = w_q
    return checked, biases


def _query_block(layers, layer, head):
    """``(parameter, index, transposed)``: where head's ``w_q`` lives in the model's weights.

    The parameter's ``[index]`` holds ``w_q.T`` (a ``Linear``: Llama's ``q_proj``,
    the rows of the fused ``qkv`` of TinyCausalLM and Phi-3, the rows ``h * 3 *
    head_dim ...`` of GPT-NeoX's per-head ``query_key_value``) or ``w_q`` itself
    (GPT-2's fused ``Conv1D`` ``c_attn``, stored ``(in, out)``): where the family's
    reader (:func:`~intrinsic_rank.nn.attention_layers`) read it.
    """
    return layers[layer].query_sites[head][0]


def _bias_block(layers, layer, head):
    """``(parameter, index, False)`` of the head's query bias, or ``None`` when there is none."""
    bias = layers[layer].query_sites[head][1]
    return None if bias is None else (*bias, False)


def _bias_edits(layers, checked, biases):
    """The bias blocks and values to write; a bias asked of a model without one is refused
    unless it is zero (the bias the model already has)."""
    blocks, values = [], []
    for (layer, head), bias in biases.items():
        block = _bias_block(layers, layer, head)
        if block is None:
            if np.any(bias != 0):
                raise ValueError(f"projections[{_name(layer, head)}] gives a query bias, but "
                                 "the model's queries have none")
            continue
        blocks.append(block)
        values.append(_stored(bias, block[0], False))
    return blocks, values


def _write(blocks, values):
    with torch.no_grad():
        for (param, index, _), value in zip(blocks, values):
            param[index] = value


def _stored(w_q, param, transposed):
    tensor = torch.as_tensor(w_q.T if transposed else w_q)
    return tensor.to(device=param.device, dtype=param.dtype)


@contextlib.contextmanager
def imposed_queries(model, projections):
    """Replace heads' query projections inside a causal LM, and restore them after the block.

    Every matrix is checked before any weight changes; the edit is in place,
    in memory only (no file is ever written), and the original weights come
    back bit for bit when the block ends: normally, by an exception or by
    ``KeyboardInterrupt``. Stop signals that arrive while weights are being
    written or restored act once that is done, so the model is never left
    half edited. The query biases (unless given), the keys, the values and every
    other weight stay as they are.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        The models :func:`head_facts` reads. A name or path is loaded here,
        and the loaded model is what the block receives.
    projections : mapping of (layer, head) or str to array-like or (array-like, array-like)
        For each head (as ``(layer, head)`` or ``"L18H6"``), its new query
        projection ``w_q`` of shape ``(d_model, head_dim)``, in the convention
        of :class:`HeadFacts`: ``q = X @ w_q + b_q``; or a pair ``(w_q, b_q)``
        that replaces the query bias too (a model whose queries have no bias
        takes only a zero one). Rounded to the weights' dtype (float32 for the
        packaged models). Empty: nothing changes.

    Yields
    ------
    model
        The edited model: ``model`` itself, or the
        :class:`~intrinsic_rank.nn.LoadedModel` loaded from a name or path.

    Raises
    ------
    ValueError
        Before any edit: for a model or head that :func:`head_facts` refuses,
        a head named twice, a matrix of another shape, with NaN or infinity,
        or beyond the range of the weights' dtype; the message names the head.

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank.inspection import head_facts
    >>> from intrinsic_rank.nn import load_model
    >>> lm = load_model("default")
    >>> w_q = head_facts(lm, 1, 2).w_q
    >>> u, s, vt = np.linalg.svd(w_q, full_matrices=False)
    >>> rank_1 = s[0] * np.outer(u[:, 0], vt[0])
    >>> ids = np.random.default_rng(0).integers(0, 64, size=(4, 32))
    >>> with imposed_queries(lm, {"L1H2": rank_1}):
    ...     edited = lm_loss(lm, ids)
    >>> edited != lm_loss(lm, ids), np.array_equal(head_facts(lm, 1, 2).w_q, w_q)
    (True, True)
    """
    if isinstance(model, (str, os.PathLike)):
        model = load_model(model, progress=False)
    bare, kind, label = _resolve(model)
    layers = {}
    checked, biases = _checked_projections(projections, bare, kind, label, layers)
    blocks = [_query_block(layers, layer, head) for layer, head in checked]
    values = [_stored(w_q, param, transposed)
              for w_q, (param, _, transposed) in zip(checked.values(), blocks)]
    for key, value in zip(checked, values):
        if not torch.isfinite(value).all():
            raise ValueError(f"projections[{_name(*key)}] holds values beyond the range "
                             f"of the model's {value.dtype} weights")
    bias_blocks, bias_values = _bias_edits(layers, checked, biases)
    everything = blocks + bias_blocks
    saved = [param[index].detach().clone() for param, index, _ in everything]
    try:
        with StopGuard(held=True):
            _write(everything, values + bias_values)
        _check_written(bare, checked, values, blocks)
        yield model
    finally:
        with StopGuard(held=True):
            _write(everything, saved)


def _check_written(bare, checked, values, blocks):
    """The model's reader sees the imposed matrices: a wrong layout never passes silently."""
    if not checked:
        return
    read = {layer.layer: layer for layer in attention_layers(
        bare, sorted({layer for layer, _ in checked}))}
    for ((layer, head), _), value, (_, _, transposed) in zip(checked.items(), values, blocks):
        expected = (value.T if transposed else value).to("cpu", torch.float64).numpy()
        if not np.array_equal(read[layer].w_q[head], expected):  # pragma: no cover - a bug
            raise RuntimeError(f"imposing {_name(layer, head)}: the model's weights do "
                               "not read back as the imposed matrix")


def _next_token_losses(bare, kind, batch):
    """Per-position cross-entropy (float32) of predicting ``batch[:, 1:]``."""
    logits = bare(batch) if kind == "tiny" else bare(input_ids=batch, use_cache=False).logits
    logits = logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             batch[:, 1:].reshape(-1), reduction="none")


def lm_loss(model, input_ids, *, batch_size=16, device="cpu"):
    """The mean next-token cross-entropy of a causal LM on token ids, in nats per token.

    Every position after the first is predicted from the ones before it
    (targets: the ids shifted by one), and the loss is the mean of
    ``-log p(target)`` over all ``n * (L - 1)`` predictions, summed in float64.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        A causal LM with its next-token head (a ``transformers``
        ``...ForCausalLM``, not a bare ``...Model``). It is moved to
        ``device`` and run in eval mode without gradients; its training flags
        are restored after.
    input_ids : array-like of shape (n, L), integer
        Token ids, ``L >= 2``, no padding; for instance from
        :func:`corpus_token_ids` with ``split="test"``.
    batch_size : int, default=16
        Sequences per forward pass.
    device : str or torch.device, default="cpu"

    Returns
    -------
    loss : float

    Raises
    ------
    ValueError
        For ids that are not a 2-D integer array within the vocabulary and
        context, fewer than 2 positions, or a model without a next-token head.

    Examples
    --------
    >>> import numpy as np
    >>> ids = np.random.default_rng(0).integers(0, 64, size=(8, 16))
    >>> loss = lm_loss("default", ids)
    >>> bool(0 < loss < np.log(64) + 2)
    True
    """
    bare, kind, label = _resolve(model)
    batch_size = check_int(batch_size, "batch_size")
    device = check_device(device)
    if kind != "tiny" and getattr(bare, "get_output_embeddings", lambda: None)() is None:
        raise ValueError(f"{label} has no next-token head (a bare transformers model): "
                         "lm_loss needs the causal LM with its head, e.g. LlamaForCausalLM")
    ids, _ = check_token_inputs(input_ids, None, model_vocab_size(bare, kind),
                                model_max_positions(bare, kind))
    if ids.shape[1] < 2:
        raise ValueError(f"input_ids must have at least 2 positions (the first is never "
                         f"predicted); got shape {tuple(ids.shape)}")
    training = [(m, m.training) for m in bare.modules()]
    total = torch.zeros((), dtype=torch.float64)
    try:
        bare.to(device).eval()
        with torch.no_grad():
            for start in range(0, len(ids), batch_size):
                batch = ids[start:start + batch_size].to(device)
                total += _next_token_losses(bare, kind, batch).to("cpu", torch.float64).sum()
    finally:
        for module, mode in training:
            module.training = mode
    return float(total / (ids.shape[0] * (ids.shape[1] - 1)))
