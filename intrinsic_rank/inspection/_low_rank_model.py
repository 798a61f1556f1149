"""A causal LM whose heads' queries are cut to low ranks, saved as a model anyone can load.

:func:`save_low_rank_model` writes the model with every edited head's query
projection replaced by its rank-``r`` product ``A @ C`` as an ordinary Hugging
Face folder (config, weights, tokenizer), which stock
``transformers.AutoModelForCausalLM.from_pretrained`` loads, and beside them the
factors of every head (``query_factors.npz``) and what they are
(``query_ranks.json``): the ranks, the source model, and whatever the caller
measured. The folder appears whole or not at all, and the model in memory is the
unedited one again when the function returns; the files the model came from are
never written to. :func:`load_query_factors` reads the factors back.
"""

import json
import os

import numpy as np

from .._interrupts import StopGuard
from .._validation import check_int
from ..nn import LoadedModel, load_model, save_model_folder, save_tiny_lm, unwrap_model
from ._head_io import _facts_of, _resolve
from ._impose import imposed_queries

__all__ = ["FACTORS_FILE", "RANKS_FILE", "load_query_factors", "save_low_rank_model"]

FACTORS_FILE = "query_factors.npz"
"""The factors of every edited head, ``L{layer}H{head}.A`` / ``.a`` / ``.C``."""

RANKS_FILE = "query_ranks.json"
"""The ranks, the source model and the caller's record."""


def _checked_path(path):
    path = os.path.abspath(os.fspath(path))
    if os.path.isfile(path):
        raise FileExistsError(f"{path} is a file, not a folder to save the model into")
    if os.path.isdir(path) and os.listdir(path):
        raise FileExistsError(f"{path} exists and is not empty: choose a new folder (nothing "
                              "was written)")
    return path


def _checked_factors(factors, facts):
    checked = {}
    for key, value in factors.items():
        try:
            A, a, C = (np.asarray(v, dtype=np.float64) for v in value)
        except (TypeError, ValueError):
            raise ValueError(f"factors[L{key[0]}H{key[1]}] must be (A, a, C)") from None
        f = facts[key]
        if (A.ndim != 2 or C.ndim != 2 or A.shape != (f.d_model, C.shape[0])
                or C.shape[1] != f.head_dim or a.shape != (C.shape[0],)):
            raise ValueError(f"factors[L{key[0]}H{key[1]}] must be A ({f.d_model}, r), a (r,), "
                             f"C (r, {f.head_dim}); got {A.shape}, {a.shape}, {C.shape}")
        if not (np.isfinite(A).all() and np.isfinite(a).all() and np.isfinite(C).all()):
            raise ValueError(f"factors[L{key[0]}H{key[1]}] hold NaN or infinity")
        checked[key] = A, a, C
    return checked


def save_low_rank_model(model, factors, path, *, record=None, progress=False):
    """Save a causal LM with heads' queries cut to their factors, and the factors beside it.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        The unedited model (a :class:`~intrinsic_rank.nn.LoadedModel` keeps its
        tokenizer). It is edited in memory only while it is written, and
        restored bit for bit.
    factors : dict of (layer, head) -> (A, a, C)
        Each edited head's query ``w_q = A @ C`` and bias ``b_q = a @ C`` (as
        :func:`~intrinsic_rank.inspection.query_edits` gives them); heads not
        named keep their own.
    path : str or os.PathLike
        A new folder (or an empty one). A ``transformers`` model is written as a
        Hugging Face folder; a :class:`~intrinsic_rank.nn.TinyCausalLM` as
        ``model.pt`` (:func:`~intrinsic_rank.nn.save_tiny_lm`).
    record : dict or None, default=None
        JSON-serialisable facts stored in :data:`RANKS_FILE` (for instance the
        losses measured).
    progress : bool, default=False

    Returns
    -------
    path : str
        The folder's absolute path.

    Raises
    ------
    FileExistsError
        When ``path`` is a file or a folder that is not empty; nothing is written.
    ValueError
        For factors of the wrong shape or not finite (before anything is written).

    Examples
    --------
    >>> import os, tempfile
    >>> from intrinsic_rank.inspection import head_facts
    >>> from intrinsic_rank.nn import load_model
    >>> lm = load_model("default")
    >>> f = head_facts(lm, 1, 2)
    >>> A, C = f.w_q[:, :2], np.eye(2, 16)
    >>> folder = save_low_rank_model(lm, {(1, 2): (A, np.zeros(2), C)},
    ...                              os.path.join(tempfile.mkdtemp(), "cut"))
    >>> sorted(os.listdir(folder))
    ['model.pt', 'query_factors.npz', 'query_ranks.json']
    >>> saved = load_model(os.path.join(folder, "model.pt"))
    >>> bool(np.allclose(head_facts(saved, 1, 2).w_q, A @ C, atol=1e-6))
    True
    """
    path = _checked_path(path)
    if not isinstance(model, LoadedModel) and isinstance(model, (str, os.PathLike)):
        model = load_model(model, progress=progress)
    bare, kind, label = _resolve(model)
    facts = _facts_of(bare, kind, label, list(factors))
    checked = _checked_factors(factors, facts)
    ranks = {f"L{layer}H{head}": int(C.shape[0])
             for (layer, head), (_, _, C) in sorted(checked.items())}
    manifest = dict(source=label, ranks=ranks, record=record or {})
    json.dumps(manifest)  # refused here, before anything is written, if it cannot be stored
    edits = {}
    for key, (A, a, C) in checked.items():
        biased = np.any(np.asarray(facts[key].b_q) != 0)
        edits[key] = (A @ C, a @ C) if biased else A @ C

    def extra(folder):
        arrays = {}
        for (layer, head), (A, a, C) in checked.items():
            arrays.update({f"L{layer}H{head}.A": A, f"L{layer}H{head}.a": a,
                           f"L{layer}H{head}.C": C})
        np.savez(os.path.join(folder, FACTORS_FILE), **arrays)
        with open(os.path.join(folder, RANKS_FILE), "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=1)

    with imposed_queries(bare, edits):
        if kind == "tiny":
            _save_tiny(unwrap_model(bare)[0], path, extra)
        else:
            loaded = model if isinstance(model, LoadedModel) else LoadedModel(bare, None, label)
            save_model_folder(loaded, path, overwrite=os.path.isdir(path), extra=extra)
    return path


def _save_tiny(module, path, extra):
    """The tiny model's folder, written beside ``path`` and renamed into place."""
    import shutil
    import tempfile

    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    with StopGuard():
        staging = tempfile.mkdtemp(prefix=f".{name}.partial-", dir=parent)
        try:
            save_tiny_lm(module, os.path.join(staging, "model.pt"))
            extra(staging)
            if os.path.isdir(path):
                os.rmdir(path)  # empty: checked before any work
            os.rename(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def load_query_factors(path):
    """The factors and ranks a :func:`save_low_rank_model` folder holds.

    Parameters
    ----------
    path : str or os.PathLike
        The folder.

    Returns
    -------
    factors : dict of (layer, head) -> (A, a, C)
    manifest : dict
        ``source``, ``ranks`` and ``record``.

    Raises
    ------
    ValueError
        When the folder lacks the files or they do not agree.

    Examples
    --------
    >>> import os, tempfile
    >>> from intrinsic_rank.inspection import head_facts
    >>> f = head_facts("default", 0, 1)
    >>> folder = save_low_rank_model("default", {(0, 1): (f.w_q[:, :3], np.zeros(3),
    ...                                                    np.eye(3, 16))},
    ...                              os.path.join(tempfile.mkdtemp(), "cut"))
    >>> factors, manifest = load_query_factors(folder)
    >>> manifest["ranks"], factors[0, 1][2].shape
    ({'L0H1': 3}, (3, 16))
    """
    path = os.fspath(path)
    try:
        with open(os.path.join(path, RANKS_FILE), encoding="utf-8") as handle:
            manifest = json.load(handle)
        arrays = np.load(os.path.join(path, FACTORS_FILE))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not a folder of low-rank queries ({error})") from None
    factors = {}
    for name, rank in manifest.get("ranks", {}).items():
        layer, head = (int(part) for part in name[1:].split("H"))
        try:
            A, a, C = (arrays[f"{name}.{part}"] for part in "AaC")
        except KeyError:
            raise ValueError(f"{path}: {FACTORS_FILE} has no factors of {name}") from None
        if C.shape[0] != check_int(rank, "rank"):
            raise ValueError(f"{path}: {name}'s factors have rank {C.shape[0]}, the manifest "
                             f"says {rank}")
        factors[layer, head] = A, a, C
    return factors, manifest
