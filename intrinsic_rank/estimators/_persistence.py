"""Fitted estimators saved to a file and loaded back, and your own data read from files.

A model file is a small text header (the format, the package version, the estimator's
class, the size and the SHA-256 of the body) and a joblib pickle of the estimator:
:func:`save_model_file` writes it, :func:`load_model_file` checks the header, the size
and the hash **before** unpickling, then the payload's shape (a fitted scikit-learn
estimator of the class the header names) and the version that wrote it. The hash (of the
header's other fields and the body) detects a damaged file (truncation, a flipped bit);
it cannot detect a malicious author, who can write a matching hash: unpickling runs code
stored in the file, so **load only model files that you or someone you trust wrote**. The
estimators hold skorch nets with torch modules and optimisers, which ``skops``' code-free
format cannot load without trusting exactly those types, so a pickle it is.

:func:`load_xy` reads ``X`` and ``Y`` for :class:`~intrinsic_rank.AttentionRankEstimator`:
``FILE.npz`` holding two arrays named ``X`` and ``Y`` (``numpy.savez``), or ``X.npy``
and ``Y.npy``. Before anything is loaded it reads each array's header and refuses, in one
line naming ``--data`` or ``--targets`` (the command-line options that read them): a
file that is neither ``.npy`` nor ``.npz`` (a text file), a damaged or truncated archive
or array (the header's size must match the bytes stored), an unsupported dtype
(datetime, timedelta, complex, structured, object, strings: only booleans, integers and
reals are data) and an array larger than this machine's memory
(:func:`~intrinsic_rank._validation.memory_limit`).

``intrinsic-rank sweep --data FILE --save-model PATH`` uses both, through
:mod:`intrinsic_rank.experiments`, whose ``save_model_file`` writes inside the command's
output stage.
"""

import hashlib
import io
import json
import os
import stat
import warnings
import zipfile
import zlib

import numpy as np

from .._atomic import replaced_atomically
from .._version import __version__
from .._validation import check_allocation, check_output_file, format_bytes

__all__ = ["MODEL_FORMAT", "ModelVersionWarning", "load_model_file", "load_xy",
           "save_model_file"]

MODEL_FORMAT = "intrinsic-rank fitted estimator"
"""The ``format`` entry of a file written by :func:`save_model_file`."""

_MAGIC = b"intrinsic-rank model file 1\n"
_MAX_HEADER = 4096


class ModelVersionWarning(UserWarning):
    """A saved estimator was written by another version of ``intrinsic_rank``."""


# -- data files ---------------------------------------------------------------------

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_DTYPE_NAMES = {"M": "datetime", "m": "timedelta", "c": "complex", "V": "structured",
                "O": "object", "U": "string", "S": "bytes"}


def _header(stream, where, option):
    """``(shape, dtype, header bytes)`` of the .npy array starting at ``stream``'s position."""
    start = stream.tell()
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as error:
        raise ValueError(f"{option}: {where} has a damaged NumPy header "
                         f"({str(error).splitlines()[0][:120]})") from None
    return shape, dtype, stream.tell() - start


_MAX_DIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32
"""NumPy's largest number of dimensions (``NPY_MAXDIMS``)."""


def _check_header(shape, dtype, stored, where, option):
    """The declared array has a shape, fits the bytes stored, is numeric, fits in memory."""
    # a hand-made header can declare anything: numpy then says "negative dimensions
    # are not allowed" or fails inside read_array, naming neither the option nor the file
    if not (isinstance(shape, tuple) and len(shape) <= _MAX_DIMS and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        text = repr(shape) if len(repr(shape)) <= 60 else repr(shape)[:56] + " ..."
        raise ValueError(f"{option}: {where} has a damaged NumPy header (shape {text}: "
                         f"at most {_MAX_DIMS} sizes, each a whole number >= 0)")
    if dtype.fields is not None or dtype.kind in _DTYPE_NAMES:
        what = _DTYPE_NAMES["V" if dtype.fields is not None else dtype.kind]
        raise ValueError(f"{option}: {where} holds a {what} array (dtype {dtype}); only "
                         "boolean, integer and real arrays are data")
    n_bytes = int(np.prod([int(n) for n in shape], dtype=object)) * dtype.itemsize
    if stored is not None and stored < n_bytes:
        raise ValueError(f"{option}: {where} is truncated: its header declares shape "
                         f"{tuple(shape)} ({format_bytes(n_bytes)}) but it holds "
                         f"{format_bytes(stored)} of data")
    check_allocation(n_bytes, option, f"{where} (shape {tuple(shape)})")
    return n_bytes


def _read_npy(path, option):
    with open(path, "rb") as stream:
        shape, dtype, header = _header(stream, repr(path), option)
    _check_header(shape, dtype, os.path.getsize(path) - header, repr(path), option)
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ValueError(f"{option}: {path!r} is not a readable NumPy file "
                         f"({str(error).splitlines()[0][:120]})") from None


def _read_npz(path, option):
    """``{name: array}`` of an .npz file, each member's header checked before it is read."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = {}
            total = 0
            for info in archive.infolist():
                name = info.filename[:-4] if info.filename.endswith(".npy") else None
                if name is None:
                    continue
                with archive.open(info) as member:
                    stream = io.BytesIO(member.read(_MAX_HEADER + 16))
                shape, dtype, header = _header(stream, f"{path!r} (array {name})", option)
                total += _check_header(shape, dtype, info.file_size - header,
                                       f"{path!r} (array {name})", option)
                members[name] = info
            check_allocation(total, option, repr(path))
            arrays = {}
            for name in ("X", "Y"):
                if name in members:
                    with archive.open(members[name]) as member:
                        arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
            return arrays, sorted(members)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise ValueError(f"{option}: {path!r} is a damaged .npz archive ({error})") from None
    except (OSError, NotImplementedError) as error:
        raise ValueError(f"{option}: cannot read the .npz archive {path!r} ({error})") from None


def _read_array(path, option):
    """An .npy array, or ``({name: array}, names)`` of an .npz file, checked first."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{option}: {path!r} is not a regular file")
        with open(path, "rb") as stream:
            start = stream.read(8)
    except FileNotFoundError:
        raise ValueError(f"{option}: no such file {path!r}") from None
    except OSError as error:
        raise ValueError(f"{option}: cannot read {path!r} ({error.strerror})") from None
    if start.startswith(_NPY_MAGIC):
        return _read_npy(path, option)
    if start.startswith(_ZIP_MAGIC):
        return _read_npz(path, option)
    what = "an empty file" if not start else (
        "a text file" if all(32 <= b < 127 or b in b"\t\r\n" for b in start) else
        "another kind of file")
    raise ValueError(f"{option}: {path!r} is not a NumPy .npy or .npz file ({what}); save "
                     "X and Y with numpy.savez(path, X=X, Y=Y) or numpy.save")


def load_xy(data, targets=None):
    """Read ``X`` and ``Y`` from an ``.npz`` file, or from two ``.npy`` files.

    Each array's header is read and checked before the array is: see the
    module's documentation for what is refused.

    Parameters
    ----------
    data : str or path-like
        An ``.npz`` file with arrays ``X`` and ``Y`` (then ``targets`` is
        ``None``), or an ``.npy`` file holding ``X`` (then ``targets`` names
        the ``.npy`` file holding ``Y``).
    targets : str, path-like or None, default=None
        The ``.npy`` file of ``Y`` when ``data`` is an ``.npy`` file.

    Returns
    -------
    X, Y : ndarray
        As stored; the estimator checks their shapes and values when it fits.

    Raises
    ------
    ValueError
        Naming ``--data`` or ``--targets``: a missing or unreadable file, one
        that is not ``.npy``/``.npz``, damaged or truncated, of an unsupported
        dtype or too large for memory, an ``.npz`` without ``X`` or ``Y``, an
        ``.npy`` without ``--targets`` (or an ``.npz`` with one).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "task.npz")
    >>> np.savez(path, X=np.zeros((4, 3, 2)), Y=np.ones((4, 3, 2)))
    >>> X, Y = load_xy(path)
    >>> X.shape, Y.shape
    ((4, 3, 2), (4, 3, 2))
    """
    data = os.fspath(data)
    stored = _read_array(data, "--data")
    if isinstance(stored, tuple):
        arrays, names = stored
        if targets is not None:
            raise ValueError(f"--targets: {data!r} is an .npz file, which holds Y "
                             "itself; give --targets only with an .npy file of X")
        missing = [name for name in ("X", "Y") if name not in arrays]
        if missing:
            raise ValueError(
                f"--data: {data!r} has no array named {' or '.join(missing)} (it holds "
                f"{', '.join(names) or 'nothing'}); save it with "
                "numpy.savez(path, X=X, Y=Y)")
        return arrays["X"], arrays["Y"]
    if targets is None:
        raise ValueError(f"--data: {data!r} is an .npy file of X; give Y with --targets "
                         "Y.npy, or both in one file with numpy.savez(path, X=X, Y=Y)")
    Y = _read_array(os.fspath(targets), "--targets")
    if isinstance(Y, tuple):
        raise ValueError(f"--targets: {os.fspath(targets)!r} must be an .npy file of Y")
    return stored, Y


# -- model files --------------------------------------------------------------------


def _class_name(obj):
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def _check_estimator(estimator, where):
    """``estimator`` is a fitted scikit-learn estimator, else a one-line ValueError."""
    from sklearn.base import BaseEstimator
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    if not isinstance(estimator, BaseEstimator):
        raise ValueError(f"{where} must be a fitted scikit-learn estimator; got "
                         f"{type(estimator).__name__}")
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        raise ValueError(f"{where} is a {type(estimator).__name__} that is not fitted") from None


def save_model_file(estimator, path, *, atomic_file=None):
    """Store a fitted estimator in ``path``: a checked header, then a joblib pickle.

    The header holds the format, the package version, the estimator's class, and
    the size and SHA-256 of the pickle, which
    :func:`~intrinsic_rank.experiments.load_model_file` checks before unpickling.
    Written atomically (a temporary file, then a rename), so ``path`` holds either
    the old file or the whole new one.

    Parameters
    ----------
    estimator : BaseEstimator
        A fitted scikit-learn estimator.
    path : str or path-like
    atomic_file : callable or None, default=None
        ``atomic_file(path)``: a context manager yielding the temporary file to
        write, which it renames onto ``path`` when the block ends normally and
        removes otherwise. None: a temporary file beside ``path``. The command
        line passes its output stage's, which renames the model in together with
        the run's other files (:func:`intrinsic_rank.experiments.save_model_file`).

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        One line, before anything is pickled: ``estimator`` is not a fitted
        scikit-learn estimator, or ``path`` cannot be written as a file (empty, a
        folder, something else than a regular file, under a file or a read-only
        folder: the package's output-file check); or the
        write itself failed (a full disk).

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.linear_model import LinearRegression
    >>> model = LinearRegression().fit([[0.0], [1.0]], [0.0, 2.0])
    >>> path = save_model_file(model, os.path.join(tempfile.mkdtemp(), "m.joblib"))
    >>> load_model_file(path).coef_
    array([2.])
    """
    import joblib

    _check_estimator(estimator, "estimator")
    path = check_output_file(os.fspath(path), "path")
    body = io.BytesIO()
    joblib.dump({"format": MODEL_FORMAT, "version": __version__, "estimator": estimator},
                body)
    body = body.getvalue()
    header = {"format": MODEL_FORMAT, "version": __version__,
              "estimator": _class_name(estimator), "size": len(body)}
    header["sha256"] = _digest(header, body)
    try:
        with (replaced_atomically if atomic_file is None else atomic_file)(path) as tmp:
            with open(tmp, "wb") as stream:
                stream.write(_MAGIC)
                stream.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                stream.write(body)
                stream.flush()
                os.fsync(stream.fileno())
    except OSError as error:  # found only while writing: a full disk, a folder gone
        raise ValueError(f"path: cannot write {path!r} "
                         f"({error.strerror or type(error).__name__})") from None
    return path


def _digest(header, body):
    """SHA-256 of the header's other fields and the body: a flip in either is caught."""
    fields = {key: value for key, value in header.items() if key != "sha256"}
    text = json.dumps(fields, sort_keys=True).encode()
    return hashlib.sha256(text + b"\n" + body).hexdigest()


def _read_model_header(stream, where):
    if stream.read(len(_MAGIC)) != _MAGIC:
        raise ValueError(f"{where} is not a model file written by --save-model (no "
                         "intrinsic-rank header)")
    line = stream.readline(_MAX_HEADER)
    try:
        header = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        header = None
    expected = {"format": str, "version": str, "estimator": str, "size": int, "sha256": str}
    if not (isinstance(header, dict) and header.get("format") == MODEL_FORMAT
            and all(isinstance(header.get(k), t) and not isinstance(header.get(k), bool)
                    for k, t in expected.items())):
        raise ValueError(f"{where} has a damaged header (it must hold "
                         f"{', '.join(expected)})")
    return header


def load_model_file(path, *, strict=False):
    """Load an estimator stored by ``--save-model`` (:func:`save_model_file`).

    Checked in this order, each failure one ``ValueError`` naming the file:
    the header; the body's size and SHA-256 against it (before anything is
    unpickled: a truncated file or a flipped bit is refused); then the
    unpickled payload's shape (the format, a fitted scikit-learn estimator of
    the class the header names); then the version of ``intrinsic_rank`` that
    wrote it against the one running.

    **Trust**: the body is a pickle, and unpickling runs code stored in it.
    The hash detects damage, not a malicious author (who can write a matching
    hash): load only model files that you or someone you trust wrote.

    Parameters
    ----------
    path : str or path-like
    strict : bool, default=False
        ``True`` raises on a version mismatch instead of warning.

    Returns
    -------
    estimator : BaseEstimator
        The fitted estimator, e.g. an :class:`~intrinsic_rank.AttentionRankEstimator`
        (``predict``, ``rank_``, ``sweep_`` ...).

    Raises
    ------
    ValueError
        If ``path`` is not a file written by :func:`save_model_file`, is
        damaged, or (with ``strict=True``) was written by another version.

    Warns
    -----
    ModelVersionWarning
        When the file was written by another version of ``intrinsic_rank``
        (its numbers and attributes may differ).

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.linear_model import LinearRegression
    >>> model = LinearRegression().fit([[0.0], [1.0]], [1.0, 1.0])
    >>> path = save_model_file(model, os.path.join(tempfile.mkdtemp(), "m.joblib"))
    >>> type(load_model_file(path)).__name__
    'LinearRegression'
    """
    import joblib

    path = os.fspath(path)
    where = f"path: {path!r}"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"path: {path!r} is not a regular file")
        with open(path, "rb") as stream:
            header = _read_model_header(stream, where)
            size = header["size"]
            check_allocation(size, "path", f"the model in {path!r}")
            body = stream.read(size + 1)
    except FileNotFoundError:
        raise ValueError(f"path: no such model file {path!r}") from None
    except OSError as error:
        raise ValueError(f"path: cannot read {path!r} ({error.strerror})") from None
    if len(body) != size or _digest(header, body) != header["sha256"]:
        raise ValueError(f"{where} is damaged: its content does not match the size and "
                         "SHA-256 in its header (truncated or altered); save the model again")
    try:
        payload = joblib.load(io.BytesIO(body))
    except Exception as error:  # noqa: BLE001 -- a valid hash but an unloadable pickle
        raise ValueError(f"{where} cannot be loaded here ({type(error).__name__}: "
                         f"{str(error)[:200]})") from None
    if not (isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT
            and "estimator" in payload):
        raise ValueError(f"{where} is not a model file written by --save-model (its "
                         "payload has no estimator)")
    estimator = payload["estimator"]
    _check_estimator(estimator, f"the estimator in {path!r}")
    if _class_name(estimator) != header["estimator"]:
        raise ValueError(f"{where} holds a {_class_name(estimator)}, but its header names "
                         f"{header['estimator']}")
    running = __version__
    # the header's version and the payload's should agree; name the one that differs
    saved = next((v for v in (header["version"], payload.get("version")) if v != running),
                 running)
    if saved != running:
        message = (f"{path!r} was written by intrinsic_rank {saved}; this is {running}: "
                   "refit it with this version if its numbers matter")
        if strict:
            raise ValueError(message)
        warnings.warn(message, ModelVersionWarning, stacklevel=2)
    return estimator
