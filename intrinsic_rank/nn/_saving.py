"""Saving any loaded model as an ordinary Hugging Face folder, atomically.

A GGUF-loaded model is rebuilt from its config without the quantizer and
given the same tensors, so ``save_pretrained`` writes an ordinary folder that
:func:`~intrinsic_rank.nn.load_model` reads back with identical logits.
"""

import os
import shutil
import tempfile

from .._interrupts import StopGuard
from ._causal_lm import TinyCausalLM
from ._hf import _quiet_transformers, unquantized
from ._loading import LoadedModel, load_model

__all__ = ["save_model_folder"]


def save_model_folder(model, path, tokenizer=None, overwrite=False, progress=True,
                      extra=None):
    """Save a loaded ``transformers`` model, and its tokenizer, as a Hugging Face folder.

    A model read from a GGUF file is saved too (rebuilt without its
    quantizer, from its config, sharing its tensors),
    so a folder written once loads in a fraction of a second instead of the
    GGUF file's half minute. The folder is written beside ``path`` under a
    hidden temporary name and renamed into place only once complete: an
    interrupted save (Ctrl-C, SIGTERM or SIGHUP) leaves no folder at ``path`` and
    removes the temporary one (a SIGTERM or SIGHUP then still ends the process).

    Parameters
    ----------
    model : LoadedModel, packaged model name, str/PathLike, transformers model or adapter
        What :func:`load_model` accepts (it is loaded first), or its result.
        A :class:`~intrinsic_rank.nn.TinyCausalLM` is not a Hugging Face
        model: save it with :func:`save_tiny_lm`.
    path : str or os.PathLike
        The folder to write.
    tokenizer : transformers tokenizer or None, default=None
        Saved with the model; None uses the tokenizer that came with
        ``model`` (a :class:`LoadedModel`'s, or the one loaded with it), and
        writes none when there is none.
    overwrite : bool, default=False
        Replace an existing folder at ``path`` (only once the new one is complete).
    progress : bool, default=True
        As for :func:`load_model`.
    extra : callable or None, default=None
        Called with the path of the hidden temporary folder once the model and
        tokenizer are in it, to write more files that must be part of the
        folder when it appears (it appears whole or not at all).

    Returns
    -------
    path : str
        The absolute path of the written folder; :func:`load_model` reads it
        back with identical logits.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false, or it is a file.
    TypeError
        If the model is not a ``transformers`` model.

    Examples
    --------
    >>> import os, tempfile, transformers
    >>> config = transformers.GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2,
    ...                                  n_positions=16)
    >>> path = save_model_folder(transformers.GPT2LMHeadModel(config),
    ...                          os.path.join(tempfile.mkdtemp(), "tiny"))
    >>> type(load_model(path).module).__name__
    'GPT2LMHeadModel'
    """
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=progress)
    module = loaded.module
    if isinstance(module, TinyCausalLM):
        raise TypeError("a TinyCausalLM is not a Hugging Face model; save it as a .pt file "
                        "with intrinsic_rank.nn.save_tiny_lm")
    if not hasattr(module, "save_pretrained") or not hasattr(module, "config"):
        raise TypeError("save_model_folder saves a transformers model; "
                        f"got {type(module).__name__}")
    tokenizer = loaded.tokenizer if tokenizer is None else tokenizer
    module = unquantized(module)
    path = os.path.abspath(os.fspath(path))
    if os.path.isfile(path) or (os.path.exists(path) and not overwrite):
        raise FileExistsError(
            f"{path!r} exists; choose another folder or pass overwrite=True"
            if os.path.isdir(path) else f"{path!r} is a file, not a folder")
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    # a default SIGTERM or SIGHUP would end the process before the clean-up below
    with StopGuard():
        staging = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent)
        try:
            with _quiet_transformers():
                module.save_pretrained(staging)
                if tokenizer is not None:
                    tokenizer.save_pretrained(staging)
            if extra is not None:
                extra(staging)
            _move_into_place(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return path


def _move_into_place(staging, path):
    """Rename the complete folder ``staging`` to ``path``, replacing an old one last."""
    if not os.path.exists(path):
        os.rename(staging, path)
        return
    old = f"{staging}.old"
    os.rename(path, old)
    try:
        os.rename(staging, path)
    except BaseException:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
