"""Your own data as files, and fitted estimators saved and loaded back.

``intrinsic-rank sweep --data FILE`` reads ``X`` and ``Y`` with :func:`load_xy`;
``--save-model PATH`` stores the fitted estimator with :func:`save_model_file`
and :func:`load_model_file` reads it back, checking the package version.

The data file
-------------
* ``FILE.npz`` holding two arrays named ``X`` and ``Y`` (``numpy.savez``), or
* ``X.npy`` given as ``--data`` and ``Y.npy`` as ``--targets``.

``X`` is ``(n, L, d)`` (``n`` sequences of ``L`` tokens of dimension ``d``),
``Y`` is ``(n, L, d_out)`` (a target per token) or ``(n,)`` / ``(n, k)`` (a
target read at the final position): exactly what
:class:`~intrinsic_rank.AttentionRankEstimator` takes, which checks them
(shapes, finiteness, sizes) and names what is wrong.
"""

import os
import warnings

import numpy as np

from ... import __version__
from ..runner import atomic_file

__all__ = ["MODEL_FORMAT", "ModelVersionWarning", "load_model_file", "load_xy",
           "save_model_file"]

MODEL_FORMAT = "intrinsic-rank fitted estimator"
"""The ``format`` entry of a file written by :func:`save_model_file`."""


class ModelVersionWarning(UserWarning):
    """A saved estimator was written by another version of ``intrinsic_rank``."""


def _read_array(path, option):
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise ValueError(f"{option}: no such file {path!r}") from None
    except OSError as error:
        raise ValueError(f"{option}: cannot read {path!r} ({error.strerror})") from None
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as error:
        raise ValueError(f"{option}: {path!r} is not a NumPy .npy or .npz file without "
                         f"pickled objects ({error})") from None
    except (OSError, EOFError) as error:
        raise ValueError(f"{option}: {path!r} is not a readable NumPy file ({error})") from None


def load_xy(data, targets=None):
    """Read ``X`` and ``Y`` from an ``.npz`` file, or from two ``.npy`` files.

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
        Naming ``--data`` or ``--targets``: a missing or unreadable file, an
        ``.npz`` without ``X`` or ``Y``, an ``.npy`` without ``--targets`` (or
        an ``.npz`` with one).

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
    if isinstance(stored, np.lib.npyio.NpzFile):
        with stored:
            if targets is not None:
                raise ValueError(f"--targets: {data!r} is an .npz file, which holds Y "
                                 "itself; give --targets only with an .npy file of X")
            missing = [name for name in ("X", "Y") if name not in stored.files]
            if missing:
                raise ValueError(
                    f"--data: {data!r} has no array named {' or '.join(missing)} (it holds "
                    f"{', '.join(stored.files) or 'nothing'}); save it with "
                    "numpy.savez(path, X=X, Y=Y)")
            return stored["X"], stored["Y"]
    if targets is None:
        raise ValueError(f"--data: {data!r} is an .npy file of X; give Y with --targets "
                         "Y.npy, or both in one file with numpy.savez(path, X=X, Y=Y)")
    Y = _read_array(os.fspath(targets), "--targets")
    if isinstance(Y, np.lib.npyio.NpzFile):
        Y.close()
        raise ValueError(f"--targets: {os.fspath(targets)!r} must be an .npy file of Y")
    return stored, Y


def save_model_file(estimator, path):
    """Store a fitted estimator in ``path`` (joblib), with the package version.

    Written atomically (a temporary file, then a rename). Read it back with
    :func:`load_model_file`.

    Parameters
    ----------
    estimator : object
        A fitted estimator (any picklable object).
    path : str or path-like

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile
    >>> path = save_model_file({"a": 1}, os.path.join(tempfile.mkdtemp(), "m.joblib"))
    >>> load_model_file(path)
    {'a': 1}
    """
    import joblib

    path = os.fspath(path)
    payload = {"format": MODEL_FORMAT, "version": __version__, "estimator": estimator}
    with atomic_file(path) as tmp:
        joblib.dump(payload, tmp)
    return path


def load_model_file(path, *, strict=False):
    """Load an estimator stored by ``--save-model`` (:func:`save_model_file`).

    The file is a pickle: load only files you trust. The version of
    ``intrinsic_rank`` that wrote it is checked against the one running.

    Parameters
    ----------
    path : str or path-like
    strict : bool, default=False
        ``True`` raises on a version mismatch instead of warning.

    Returns
    -------
    estimator : object
        The fitted estimator, e.g. an :class:`~intrinsic_rank.AttentionRankEstimator`
        (``predict``, ``rank_``, ``sweep_`` ...).

    Raises
    ------
    ValueError
        If ``path`` is not a file written by :func:`save_model_file`, or (with
        ``strict=True``) was written by another version.

    Warns
    -----
    ModelVersionWarning
        When the file was written by another version of ``intrinsic_rank``
        (its numbers and attributes may differ).

    Examples
    --------
    >>> import os, tempfile
    >>> path = save_model_file([1, 2], os.path.join(tempfile.mkdtemp(), "m.joblib"))
    >>> load_model_file(path)
    [1, 2]
    """
    import joblib

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"path: no such model file {path!r}")
    try:
        payload = joblib.load(path)
    except Exception as error:  # noqa: BLE001 -- any unpickling failure is "not a model file"
        raise ValueError(f"path: {path!r} is not a model file written by --save-model "
                         f"({type(error).__name__}: {error})") from None
    if not (isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT):
        raise ValueError(f"path: {path!r} is not a model file written by --save-model")
    saved, running = payload.get("version"), __version__
    if saved != running:
        message = (f"{path!r} was written by intrinsic_rank {saved}; this is {running}: "
                   "refit it with this version if its numbers matter")
        if strict:
            raise ValueError(message)
        warnings.warn(message, ModelVersionWarning, stacklevel=2)
    return payload["estimator"]
