"""Output paths, checked before any work: a real write probe and the free space."""

import errno
import os
import tempfile



# -- output paths -------------------------------------------------------------------

MIN_FREE_BYTES = 1 << 20
"""The free space (1 MiB) an output path's file system must have before a run starts."""


def _nearest_existing(path):
    probe = path
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return probe


def _check_path_text(path, name, what):
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name} must be a {what} path; got {type(path).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise ValueError(f"{name} must be a {what} path; got bytes")
    if not path.strip():
        raise ValueError(f"{name} must be a {what} path; got an empty string")
    if "\0" in path:
        raise ValueError(f"{name} must be a {what} path; got one with a NUL character")
    return path


def _check_writable_folder(folder, path, name, min_free):
    """``folder`` (absolute) exists or can be created under a writable, non-full folder."""
    probe = _nearest_existing(folder)
    if not os.path.isdir(probe):
        raise ValueError(f"{name} {path!r} cannot be written: {probe} is a file, not a folder")
    try:  # a real write: permission bits say nothing for root or on a read-only mount
        handle, tmp = tempfile.mkstemp(dir=probe, prefix=".intrinsic-rank-probe.")
        os.close(handle)
        os.remove(tmp)
    except OSError as error:
        if error.errno == errno.ENOENT and os.path.isdir(probe):
            # the folder exists, yet creating a file in it "does not exist": a virtual
            # file system (/proc, /sys), which holds no files but its own
            raise ValueError(
                f"{name} {path!r} is not writable: {probe} is a folder of a special file "
                f"system (such as /proc or /sys), where no file can be created (it answers "
                f"{error.strerror or 'No such file or directory'!r}); give a folder on a "
                "disk") from None
        raise ValueError(f"{name} {path!r} is not writable ({probe}: "
                         f"{error.strerror or error})") from None
    try:
        info = os.statvfs(probe)
        free = info.f_bavail * info.f_frsize
    except (OSError, AttributeError):  # no statvfs (Windows): the write will tell
        return
    if free < min_free:
        raise ValueError(f"{name} {path!r}: the disk is full ({free} bytes free in "
                         f"{probe}; at least {min_free} needed)")


def check_output_folder(path, name="out", *, min_free=MIN_FREE_BYTES):
    """Check that ``path`` can be an output folder, before any work is done.

    It must be a non-empty path that is a folder or does not exist yet, whose
    nearest existing parent is a folder where a file can really be created (a
    probe file is made and removed), on a file system with ``min_free`` bytes
    free.

    Parameters
    ----------
    path : str or path-like
    name : str, default="out"
        The argument's name, for the message.
    min_free : int, default=MIN_FREE_BYTES
        Free bytes the file system must have.

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        Naming ``name`` and what is wrong.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> target = os.path.join(folder, "new", "run")
    >>> check_output_folder(target) == target
    True
    >>> check_output_folder("")
    Traceback (most recent call last):
    ...
    ValueError: out must be a folder path; got an empty string
    """
    path = _check_path_text(path, name, "folder")
    full = os.path.abspath(path)
    probe = _nearest_existing(full)
    if not os.path.isdir(probe):
        what = "" if probe == full else f" ({probe} is a file)"
        raise ValueError(f"{name} {path!r} is not a folder{what}")
    _check_writable_folder(full, path, name, min_free)
    return path


def check_output_file(path, name, *, reserved=(), min_free=MIN_FREE_BYTES):
    """Check that ``path`` can be written as an output file, before any work is done.

    A non-empty path that is not a folder and not one of ``reserved`` (the
    run's own output files: ``--save-model OUT/sweep.json`` would be
    overwritten by the JSON), whose folder exists or can be created under a
    folder where a file can really be created, with ``min_free`` bytes free.
    An existing regular file is replaced; anything else in the way (a FIFO, a
    device) is refused.

    Parameters
    ----------
    path : str or path-like
    name : str
        The option, for the message (``"--save-model"``).
    reserved : iterable of str or path-like, default=()
        Paths the run writes itself.
    min_free : int, default=MIN_FREE_BYTES

    Returns
    -------
    path : str
        As given.

    Raises
    ------
    ValueError
        One line naming ``name`` and what is wrong.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> os.path.basename(check_output_file(os.path.join(out, "models", "m.joblib"),
    ...                                    "--save-model"))
    'm.joblib'
    >>> check_output_file(os.path.join(out, "sweep.json"), "--save-model",
    ...                   reserved=[os.path.join(out, "sweep.json")])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --save-model ...sweep.json' is one of this run's own output files ...
    """
    path = _check_path_text(path, name, "file")
    full = os.path.abspath(path)
    if path.endswith((os.sep, "/")) or os.path.isdir(full):
        raise ValueError(f"{name} {path!r} is a folder; give a file name such as "
                         f"{os.path.join(path, 'model.joblib')!r}")
    own = {os.path.realpath(os.fspath(p)) for p in reserved}
    if os.path.realpath(full) in own:
        names = ", ".join(sorted(os.path.basename(p) for p in own))
        raise ValueError(f"{name} {path!r} is one of this run's own output files "
                         f"({names}); give another file name")
    if os.path.lexists(full) and not os.path.isfile(full):
        raise ValueError(f"{name} {path!r} exists and is not a regular file")
    _check_writable_folder(os.path.dirname(full), path, name, min_free)
    return path


# -- outputs that would destroy inputs or each other ---------------------------------


def _resolved(path):
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _same(a, b):
    """Whether paths ``a`` and ``b`` name one file: the same resolved path, or a hard link."""
    if _resolved(a) == _resolved(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _inside(path, folder):
    """Whether ``path`` lies strictly inside ``folder`` (both resolved)."""
    path, folder = _resolved(path), _resolved(folder)
    return path != folder and path.startswith(folder.rstrip(os.sep) + os.sep)


def check_paths_apart(outputs, inputs=()):
    """Refuse an output path that would overwrite an input or another output, before work.

    The rule: no output equals or lies inside an input (a data file, a model
    file or folder), and no two outputs are one path or lie one inside the
    other, except a file inside an output folder (``--out``), which is what the
    folder is for. Paths are compared resolved (symbolic links followed, ``..``
    removed), and existing files also by identity (a hard link is the same file).

    Parameters
    ----------
    outputs : iterable of (str, path, {"file", "folder"})
        ``(option, path, kind)`` of every path the run writes: its output
        folder, its files in it (the JSON, the CSV, the figures and the
        folder's record of them) and any file the user named (``--save-model``).
    inputs : iterable of (str, path)
        ``(option, path)`` of every existing path the run reads.

    Raises
    ------
    ValueError
        One line naming both options and the path.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> data = os.path.join(folder, "d.npz")
    >>> _ = open(data, "w").write("x")
    >>> check_paths_apart([("--out", folder, "folder")], [("--data", data)])
    >>> check_paths_apart([("--save-model", data, "file")],
    ...                   [("--data", data)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --save-model '...d.npz' would overwrite --data (the same file); ...
    """
    outputs = [(name, os.fspath(path), kind) for name, path, kind in outputs]
    inputs = [(name, os.fspath(path)) for name, path in inputs
              if path is not None and os.path.lexists(os.fspath(path))]
    for name, path, _kind in outputs:
        for source, read in inputs:
            if _same(path, read):
                raise ValueError(f"{name} {path!r} would overwrite {source} (the same "
                                 "file); give another path")
            if _inside(path, read):
                raise ValueError(f"{name} {path!r} lies inside {source} {read!r}, which "
                                 "the run reads; write the output elsewhere")
    for i, (name, path, kind) in enumerate(outputs):
        for other, second, other_kind in outputs[i + 1:]:
            if _same(path, second):
                raise ValueError(f"{name} {path!r} and {other} are the same path; each "
                                 "output needs its own")
            for (a, pa, ka), (b, pb, _) in (((name, path, kind), (other, second, other_kind)),
                                            ((other, second, other_kind), (name, path, kind))):
                if _inside(pb, pa) and ka == "file":
                    raise ValueError(f"{b} {pb!r} lies inside {a} {pa!r}, which is a file "
                                     "the run writes; give paths apart")
