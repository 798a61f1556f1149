"""Sizes and input files: memory limits, text files and token ids, checked before work."""

import numbers
import os

import numpy as np

from ._numbers import _is_bool, check_int, describe_value

def format_bytes(n):
    """``n`` bytes in binary units: ``'74.5 GiB'``.

    Examples
    --------
    >>> format_bytes(80_000_000_000), format_bytes(512)
    ('74.5 GiB', '512 B')
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def _cgroup_limit():
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def memory_limit():
    """The bytes one allocation may take: this machine's memory.

    The physical memory (``os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")``),
    or the cgroup's memory limit when that is lower (a container);
    ``None`` where neither can be read (then nothing is refused).

    Returns
    -------
    limit : int or None
    """
    limits = []
    try:
        limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        pass
    cgroup = _cgroup_limit()
    if cgroup is not None:
        limits.append(cgroup)
    limits = [v for v in limits if v > 0]
    return min(limits) if limits else None


def check_allocation(n_bytes, name, what="this", limit=None):
    """Refuse an allocation of ``n_bytes`` beyond :func:`memory_limit`, before making it.

    Parameters
    ----------
    n_bytes : int
        The size the work would allocate (Python integers: no overflow).
    name : str
        The option or parameter that asks for it, named in the error.
    what : str, default="this"
        What would be allocated, for the message (``"X"``, ``"the task"``).
    limit : int or None, default=None
        ``None``: :func:`memory_limit`.

    Returns
    -------
    n_bytes : int

    Raises
    ------
    ValueError
        ``"{name}: {what} needs 74.5 GiB, more than this machine's memory (23.5 GiB)"``.

    Examples
    --------
    >>> check_allocation(10, "--d")
    10
    >>> check_allocation(10**18, "--d", "the task", limit=2**30)
    Traceback (most recent call last):
    ...
    ValueError: --d: the task needs 888.2 PiB, more than this machine's memory (1.0 GiB)
    """
    n_bytes = int(n_bytes)
    limit = memory_limit() if limit is None else int(limit)
    if limit is not None and n_bytes > limit:
        raise ValueError(f"{name}: {what} needs {format_bytes(n_bytes)}, more than this "
                         f"machine's memory ({format_bytes(limit)})")
    return n_bytes


MAX_TEXT_BYTES = 64 << 20
"""The largest text file :func:`read_text_lines` reads by default (64 MiB)."""

MAX_TEXT_LINE = 100_000
"""The longest line (characters) :func:`read_text_lines` accepts by default."""


def read_text_lines(path, name, *, max_bytes=MAX_TEXT_BYTES, max_line=MAX_TEXT_LINE):
    """The non-empty lines (stripped) of a UTF-8 text file, with its name in every error.

    The file's size and each line's length are checked before the text is
    kept, so a 50 MB line is refused in one line instead of being tokenised.

    Parameters
    ----------
    path : str or path-like
    name : str
        The option, e.g. ``"--texts"``.
    max_bytes : int, default=MAX_TEXT_BYTES
    max_line : int, default=MAX_TEXT_LINE
        Characters per line.

    Returns
    -------
    lines : list of str
        At least one.

    Raises
    ------
    ValueError
        A missing or unreadable file, not a regular file, larger than
        ``max_bytes``, not UTF-8 text (binary), a line longer than
        ``max_line``, or no non-empty line.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "texts.txt")
    >>> _ = open(path, "w").write("one\\n\\n two \\n")
    >>> read_text_lines(path, "--texts")
    ['one', 'two']
    """
    import stat

    path = os.fspath(path)
    try:
        info = os.stat(path)
    except OSError as error:
        raise ValueError(f"{name}: cannot read {path!r} ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{name}: {path!r} is not a regular file")
    if info.st_size > max_bytes:
        raise ValueError(f"{name}: {path!r} holds {format_bytes(info.st_size)}; at most "
                         f"{format_bytes(max_bytes)} are read")
    lines = []
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise ValueError(f"{name}: cannot read {path!r} ({error.strerror})") from None
    if b"\0" in data:
        raise ValueError(f"{name}: {path!r} is a binary file, not UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{name}: {path!r} is not UTF-8 text (byte {error.start}: "
                         f"{error.reason})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) > max_line:
            raise ValueError(f"{name}: line {number} of {path!r} has {len(line)} characters; "
                             f"at most {max_line} per line")
        if line.strip():
            lines.append(line.strip())
    if not lines:
        raise ValueError(f"{name}: {path!r} holds no non-empty line")
    return lines


def check_token_ids(X, vocab_size, name="X"):
    """``X`` as an ``int64`` array of token ids in ``[0, vocab_size)``.

    Accepts integer arrays, integer-valued floats and Python integers of any
    size; an id outside the vocabulary (``2**70`` included, which fits no
    integer dtype) is one ``ValueError`` naming it, before anything is cast.

    Parameters
    ----------
    X : array-like
    vocab_size : int
    name : str, default="X"

    Returns
    -------
    ids : ndarray of int64

    Examples
    --------
    >>> check_token_ids([[1, 2]], 4)
    array([[1, 2]])
    >>> check_token_ids([[1, 2**70]], 4)
    Traceback (most recent call last):
    ...
    ValueError: X holds token id 1180591620717411303424, outside the model's vocabulary 0..3
    """
    vocab_size = check_int(vocab_size, "vocab_size")
    array = np.asarray(X) if not isinstance(X, np.ndarray) else X
    kind = array.dtype.kind
    if kind == "O":
        flat = array.ravel()
        for value in flat:
            if _is_bool(value) or not isinstance(value, numbers.Real):
                raise ValueError(f"{name} must hold integer token ids; found "
                                 f"{describe_value(value)}")
            if isinstance(value, numbers.Integral):
                whole = int(value)
            else:
                number = float(value)
                if not np.isfinite(number) or number != int(number):
                    raise ValueError(f"{name} must hold integer token ids; found {number!r}")
                whole = int(number)
            if not 0 <= whole < vocab_size:
                raise ValueError(f"{name} holds token id {whole}, outside the model's "
                                 f"vocabulary 0..{vocab_size - 1}")
        return np.array([int(v) for v in flat], dtype=np.int64).reshape(array.shape)
    if kind == "f":
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} must hold integer token ids; it holds NaN or infinity")
        fractional = array != np.round(array)
        if fractional.any():
            raise ValueError(f"{name} must hold integer token ids; found the non-integer "
                             f"value {float(array[fractional][0])!r}")
    elif kind not in "iu":
        raise ValueError(f"{name} must hold integer token ids; got dtype {array.dtype}")
    outside = (array < 0) | (array >= vocab_size)
    if outside.any():
        value = array[outside][0]
        value = int(value) if kind in "iu" else float(value)
        raise ValueError(f"{name} holds token id {value}, outside the model's vocabulary "
                         f"0..{vocab_size - 1}")
    return array.astype(np.int64, copy=False)
