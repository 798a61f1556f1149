"""What a model is, by its content: a digest of its weights and its configuration.

Two models with the same weights and configuration compute the same numbers,
whatever their files are called; two models under one name (``runs/a/lm.pt`` and
``runs/b/lm.pt``, two ``my-model`` folders, two instances of one class) do not.
:func:`model_digest` tells them apart, for the checkpoints of ``head-ranks``
and anything else that must know which model it measured.
"""

import hashlib
import json

import numpy as np
import torch

from ._families import unwrap_model

__all__ = ["model_digest"]

# config keys that name or date a model rather than shape what it computes
_NAME_KEYS = frozenset({"name_or_path", "transformers_version"})


def _config_text(module):
    """The configuration as canonical JSON, without the keys that only name the model."""
    config = getattr(module, "config", None)
    if config is None:
        return "null"
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, dict):
        return json.dumps(repr(config))
    kept = {key: value for key, value in config.items()
            if not key.startswith("_") and key not in _NAME_KEYS}
    return json.dumps(kept, sort_keys=True, default=repr)


def _tensor_bytes(tensor):
    """A tensor's raw bytes as a flat uint8 array (any dtype, bfloat16 included)."""
    if tensor.is_meta:
        raise ValueError("model_digest: the model has weights on the meta device (not "
                         "loaded); load its weights first")
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy() if flat.numel() else np.zeros(0, np.uint8)


def model_digest(model):
    """SHA-256 of a model's content: its class, configuration and every weight, not its name.

    The digest covers the model's class, its configuration (a ``transformers``
    config or :class:`~intrinsic_rank.nn.TinyCausalLM`'s, without the keys that
    only name or date it: ``_name_or_path``, ``transformers_version``, ...) and
    every entry of its ``state_dict`` -- name, dtype, shape and bytes, in name
    order; a weight tied to another (the same storage) is hashed once and
    recorded as the same. The tokenizer is not part of it. It costs one
    SHA-256 pass over the weights' bytes: under a second for a model of 135M
    float32 weights.

    Parameters
    ----------
    model : LoadedModel, torch model or adapter
        What :func:`~intrinsic_rank.nn.load_model` returns, or a
        :class:`~intrinsic_rank.nn.TinyCausalLM`, a ``transformers`` model or an
        adapter of either.

    Returns
    -------
    digest : str
        64 hexadecimal digits.

    Raises
    ------
    TypeError
        If ``model`` is not a model.
    ValueError
        If its weights are not loaded (the meta device).

    Examples
    --------
    >>> import torch
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> torch.manual_seed(0) and None
    >>> a = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> torch.manual_seed(0) and None
    >>> b = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> model_digest(a) == model_digest(b), len(model_digest(a))
    (True, 64)
    >>> with torch.no_grad():
    ...     b.final_norm.weight[0] += 1e-6
    >>> model_digest(a) == model_digest(b)
    False
    """
    module = getattr(model, "module", model)  # a LoadedModel holds its torch model
    try:
        bare, _ = unwrap_model(module)
    except TypeError:
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"model_digest: model must be a torch model, an adapter or what "
                            f"load_model returns; got {type(model).__name__}") from None
        bare = module
    digest = hashlib.sha256()
    kind = type(bare)
    digest.update(f"{kind.__module__}.{kind.__qualname__}\n".encode())
    digest.update(_config_text(bare).encode() + b"\n")
    seen = {}
    for name, tensor in sorted(bare.state_dict(keep_vars=False).items()):
        same = (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()))
        head = f"{name} {tensor.dtype} {tuple(tensor.shape)}"
        if tensor.numel() and same in seen and not tensor.is_meta:
            digest.update(f"{head} = {seen[same]}\n".encode())
            continue
        seen[same] = name
        data = _tensor_bytes(tensor)
        digest.update(f"{head} {data.nbytes}\n".encode())
        digest.update(memoryview(data))
    return digest.hexdigest()
