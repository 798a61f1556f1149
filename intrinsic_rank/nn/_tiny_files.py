"""The package's own model files: a :class:`~intrinsic_rank.nn.TinyCausalLM` saved as ``.pt``.

:func:`save_tiny_lm` writes one (its config, weights and metadata), ``_load_tiny_lm``
reads one back with one clear error for every way a file can fail to be such a
model, and :func:`load_default_model` loads the one embedded in the package. The
dispatch over every way of naming a model is ``_loading``'s.
"""

import os
from importlib import resources

import torch

from ._causal_lm import TinyCausalLM

__all__ = ["DEFAULT_MODEL_FILE", "load_default_model", "save_tiny_lm"]

#: file name of the embedded default model inside ``intrinsic_rank/data``
DEFAULT_MODEL_FILE = "default_lm.pt"


# ----------------------------------------------------------------------------
# the embedded model and .pt files


def save_tiny_lm(model, path, metadata=None):
    """Save a :class:`~intrinsic_rank.nn.TinyCausalLM` as its config, weights and metadata.

    Parameters
    ----------
    model : TinyCausalLM
    path : str or os.PathLike
    metadata : dict, optional
        JSON-like facts about how the model was trained (kept with the weights).

    Examples
    --------
    >>> import os, tempfile
    >>> from intrinsic_rank.nn import TinyCausalLM, load_model
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> path = os.path.join(tempfile.mkdtemp(), "lm.pt")
    >>> save_tiny_lm(lm, path, metadata={"steps": 0})
    >>> load_model(path).module.metadata
    {'steps': 0}
    """
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save({"config": dict(model.config), "state_dict": state,
                "metadata": dict(metadata or {})}, os.fspath(path))


def _file_kind(path):
    """``"zip"`` (torch's format), ``"text"``, ``"binary"`` or ``"unreadable"``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return "unreadable"
    if head.startswith(b"PK"):
        return "zip"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        # a multi-byte character cut at the end of the sample is still text
        try:
            head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return "binary"
    return "text" if b"\0" not in head else "binary"


def _one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _nonfinite_weight(model):
    """The name of the first parameter of ``model`` holding NaN or inf, or None.

    A model file whose weights are not all finite is damaged (a flipped bit in
    a GGUF scale reads as NaN); found here, it is named as such instead of
    surfacing later as "input must be finite" or a torch error. Buffers are not
    read: a causal mask may hold -inf on purpose.
    """
    for name, weight in model.named_parameters():
        if weight.is_floating_point() and not bool(torch.isfinite(weight).all()):
            return name
    return None


def _check_weights(model, what):
    """``model`` as loaded from ``what`` (a file or folder, described), or one ValueError."""
    name = _nonfinite_weight(model)
    if name is not None:
        raise ValueError(f"{what} is damaged: its weight {name!r} holds NaN or inf (a model "
                         "file's weights are finite numbers); download or write it again")
    return model


def _load_tiny_lm(path):
    """The :class:`TinyCausalLM` of a ``.pt`` file written by :func:`save_tiny_lm`.

    Every way a file can fail to be such a model -- empty, truncated, corrupt,
    a text file, a pickle of other objects, a tensor or a dict of another
    shape, a config that builds no model, weights that do not fit the config
    -- is one ``ValueError`` naming the file and what is wrong. The file is
    read with ``weights_only=True``: no code in it runs.
    """
    path = os.fspath(path)

    def bad(what):
        return ValueError(f"the model file {path!r} cannot be loaded: {what} (a model file "
                          "is written by intrinsic_rank.nn.save_tiny_lm)")

    try:
        size = os.path.getsize(path)
    except OSError as error:
        raise bad(f"it cannot be read ({error.strerror or error})") from None
    if size == 0:
        raise bad("the file is empty")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # UnpicklingError, RuntimeError, EOFError, OSError from torch
        kind = _file_kind(path)
        if kind == "unreadable":
            what = f"it cannot be read ({_one_line(error)})"
        elif kind == "zip" and "weights only" in str(error).lower():
            what = ("it holds Python objects other than tensors, numbers and plain "
                    "containers (a whole pickled model?), which are not loaded because "
                    "unpickling them could run code")
        elif kind == "zip":
            what = "the file is damaged or truncated (torch cannot read its archive)"
        elif kind == "text":
            what = "it is a text file, not a torch file"
        else:
            what = "it is not a torch file (corrupt, truncated or another format)"
        raise bad(what) from None
    if not isinstance(blob, dict):
        raise bad(f"it holds a {type(blob).__name__}, not a dict with a model's 'config' "
                  "and 'state_dict'")
    missing = [k for k in ("config", "state_dict") if k not in blob]
    if missing:
        raise bad(f"it holds a dict without {' and '.join(repr(k) for k in missing)} "
                  f"(its keys: {', '.join(map(repr, list(blob)[:8]))})")
    config, state, metadata = blob["config"], blob["state_dict"], blob.get("metadata", {})
    if not isinstance(config, dict):
        raise bad(f"its 'config' is a {type(config).__name__}, not a dict")
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise bad("its 'state_dict' is not a dict of named tensors")
    if not isinstance(metadata, dict):
        raise bad(f"its 'metadata' is a {type(metadata).__name__}, not a dict")
    try:
        model = TinyCausalLM(**config)
    except (TypeError, ValueError, RuntimeError) as error:
        raise bad(f"its config {_one_line(config, 200)} does not build a TinyCausalLM: "
                  f"{_one_line(error)}") from None
    try:
        model.load_state_dict(state)
    except (RuntimeError, ValueError, TypeError) as error:
        raise bad(f"its weights do not fit its config: {_one_line(error)}") from None
    name = _nonfinite_weight(model)
    if name is not None:
        raise bad(f"the file is damaged: its weight {name!r} holds NaN or inf")
    model.metadata = metadata
    return model.eval()


def load_default_model():
    """The embedded default causal LM shipped with the package (offline).

    A :class:`~intrinsic_rank.nn.TinyCausalLM` pre-trained on an induction
    (copy-from-context) corpus by ``scripts/train_default_model.py``; its
    training facts are in ``model.metadata``. See ``docs/reachability.md`` for
    what it can do.

    Returns
    -------
    model : TinyCausalLM
        A fresh copy in eval mode (``vocab_size=64``, ``d_model=64``).

    Raises
    ------
    FileNotFoundError
        If the embedded file :data:`DEFAULT_MODEL_FILE` is missing.

    Examples
    --------
    >>> lm = load_default_model()
    >>> lm.config["vocab_size"], lm.config["d_model"]
    (64, 64)
    """
    path = resources.files("intrinsic_rank") / "data" / DEFAULT_MODEL_FILE
    with resources.as_file(path) as file:
        if not os.path.isfile(file):
            raise FileNotFoundError(
                f"the embedded default model {file} is missing; rebuild it with "
                "python scripts/train_default_model.py"
            )
        return _load_tiny_lm(file)
