"""Files written whole or not at all: a temporary file beside the target, then one rename.

The package's one atomic writer. Every file the package writes -- a command's
JSON, tables and figures (through the runner's ``atomic_file``, which stages
the rename until a run's files are all written), a saved estimator, the
finished heads of a ``head-ranks`` map -- goes through :func:`replaced_atomically`,
so a reader never sees half a file and an interrupted write leaves the old
file as it was. It imports only the standard library, so every room may use it.
"""

import contextlib
import os
import tempfile

__all__ = ["replaced_atomically"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replaced_atomically(path, *, suffix=".tmp", rename=None):
    """A temporary file beside ``path``, renamed onto it when the block ends normally.

    The block writes the temporary file with whatever writer it likes. When the
    block ends normally the file gets the permissions a new file would get (the
    umask's) and replaces ``path`` in one rename, so a reader sees the old file
    or the new one, never a part. When the block raises -- an error, Ctrl-C, a
    stop signal -- the temporary file is removed and ``path`` is left as it
    was. Missing folders are created.

    Parameters
    ----------
    path : str or path-like
        The file to write.
    suffix : str, default=".tmp"
        The temporary file's ending (a writer that infers the format from the
        name, like matplotlib's ``savefig``, needs the real one). Its name is
        ``.<name of path>.<random><suffix>``.
    rename : callable or None, default=None
        ``rename(tmp, path)`` instead of ``os.replace(tmp, path)``: the runner's
        output stage uses it to hold every file of a run back until all are
        written. If it raises, the temporary file is removed.

    Yields
    ------
    tmp : str
        The temporary file's absolute path (it exists, empty).

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "new", "a.txt")
    >>> with replaced_atomically(target) as tmp:
    ...     _ = open(tmp, "w").write("done")
    >>> open(target).read(), os.listdir(os.path.dirname(target))
    ('done', ['a.txt'])
    >>> try:
    ...     with replaced_atomically(target) as tmp:
    ...         _ = open(tmp, "w").write("half")
    ...         raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> open(target).read(), os.listdir(os.path.dirname(target))
    ('done', ['a.txt'])
    """
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                   suffix=suffix)
    try:  # from the moment the temporary file exists, any way out but the rename removes it
        os.close(handle)
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        (os.replace if rename is None else rename)(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
