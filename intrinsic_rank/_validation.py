"""The one home of argument checks and seed derivation, for every package.

Everything here needs numpy and scikit-learn only; the two helpers that touch
torch (:func:`check_device` and :func:`torch_rng`) import it when called, so
:mod:`intrinsic_rank.spectral` and :mod:`intrinsic_rank.bounds` can use this
module in an environment without torch.

Conventions
-----------
* Integers: :func:`check_int` accepts any :class:`numbers.Integral` except
  ``bool`` and checks the closed range ``[minimum, maximum]``.
* Reals: :func:`check_real` accepts any :class:`numbers.Real` except ``bool``,
  always requires a finite value, and reads its bounds as *closed* unless
  ``low_open`` / ``high_open`` say otherwise; the error names the interval in
  the usual notation, e.g. ``(0, 1]``.
* Seeds: a ``random_state`` (``None``, an integer or a ``RandomState``) becomes
  integer seeds in ``[0, 2**31 - 1)`` in exactly one of these documented ways:
  :func:`child_seeds` (independent draws, scikit-learn style),
  :func:`draw_seed` (the first of them), :func:`keyed_seed` (a seed tied to a
  tuple of integers, stable whatever else is drawn; :func:`keyed_rng` is the
  same stream as a numpy ``Generator``) and :func:`consecutive_seeds`
  (``seed, seed + 1, ...``, kept where documented results were measured with
  them).
* Sizes: :func:`memory_limit` is the memory one allocation may take (the
  machine's physical memory, or the cgroup limit when lower);
  :func:`check_allocation` refuses a size beyond it in one line *before*
  anything is allocated.
* Output paths: :func:`check_output_file` (a real write probe, the free
  space, not a folder, not one of the run's own files).
* Files read as input: :func:`read_text_lines` (size and line-length caps,
  the file's name in every error) and :func:`check_token_ids`.
* Error messages name the parameter and never print a whole array:
  :func:`describe_value` is the short form of a value in a message.
"""

import contextlib
import numbers
import os
import tempfile

import numpy as np

__all__ = [
    "MAX_SEED",
    "MAX_TEXT_BYTES",
    "MAX_TEXT_LINE",
    "MIN_FREE_BYTES",
    "check_allocation",
    "check_device",
    "check_distinct",
    "check_output_file",
    "check_output_folder",
    "check_int",
    "check_random_state",
    "check_real",
    "check_seed",
    "check_token_ids",
    "child_seeds",
    "consecutive_seeds",
    "describe_value",
    "draw_seed",
    "format_bytes",
    "keyed_rng",
    "keyed_seed",
    "memory_limit",
    "read_text_lines",
    "torch_rng",
]

MAX_SEED = int(np.iinfo(np.int32).max)
"""Seeds drawn here lie in ``[0, MAX_SEED)``; :func:`check_seed` accepts ``[0, 2**32 - 1]``."""


def _is_bool(value):
    return isinstance(value, (bool, np.bool_))


def _range_text(minimum, maximum):
    if minimum is None and maximum is None:
        return ""
    if maximum is None:
        return f" >= {minimum}"
    if minimum is None:
        return f" <= {maximum}"
    return f" in [{minimum}, {maximum}]"


def check_int(value, name, minimum=1, maximum=None):
    """Validate an integer argument and return it as ``int``.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        Its name, used in the error message.
    minimum, maximum : int or None, default=1, None
        Closed bounds; ``None`` leaves that side open.

    Returns
    -------
    value : int

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` included) or lies outside
        ``[minimum, maximum]``.

    Examples
    --------
    >>> check_int(3, "rank")
    3
    >>> check_int(0, "rank")
    Traceback (most recent call last):
    ...
    ValueError: rank must be an integer >= 1; got 0
    """
    bounds = _range_text(minimum, maximum)
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer{bounds}; got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{bounds}; got {value}")
    return int(value)


def check_real(value, name, low=None, high=None, *, low_open=False, high_open=False):
    """Validate a finite real argument and return it as ``float``.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        Its name, used in the error message.
    low, high : float or None, default=None
        Bounds; ``None`` leaves that side unbounded.
    low_open, high_open : bool, default=False
        Whether ``low`` (``high``) itself is excluded. By default both bounds
        are included: ``[low, high]``.

    Returns
    -------
    value : float

    Raises
    ------
    ValueError
        If ``value`` is not a real number (``bool`` included), is not finite,
        or lies outside the interval.

    Examples
    --------
    >>> check_real(0.5, "tol", 0.0, 1.0, low_open=True)
    0.5
    >>> check_real(0.0, "tol", 0.0, 1.0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: tol must be a finite real number in (0.0, 1.0]; got 0.0
    """
    left = "-inf" if low is None else f"{low}"
    right = "inf" if high is None else f"{high}"
    interval = (("(" if low_open or low is None else "[") + f"{left}, {right}"
                + (")" if high_open or high is None else "]"))
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number in {interval}; got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an int or Fraction beyond float64's range
        raise ValueError(
            f"{name} must be a finite real number in {interval}; got {value!r}, "
            "which overflows float64"
        ) from None
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not np.isfinite(value) or too_low or too_high:
        raise ValueError(f"{name} must be a finite real number in {interval}; got {value}")
    return value


def check_seed(value, name="random_state"):
    """Validate an integer seed in ``[0, 2**32 - 1]`` (numpy's range).

    Parameters
    ----------
    value : object
    name : str, default="random_state"

    Returns
    -------
    seed : int

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` included) or lies outside
        ``[0, 2**32 - 1]``; the message names ``name``.

    Examples
    --------
    >>> check_seed(7)
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: random_state must be an integer in [0, 4294967295]; got -1
    """
    return check_int(value, name, minimum=0, maximum=2**32 - 1)


def check_random_state(random_state):
    """A ``numpy.random.RandomState`` from ``random_state``, with the seed checked first.

    Exactly :func:`sklearn.utils.check_random_state` for every valid
    ``random_state`` (so no drawn value changes), but an integer seed outside
    numpy's range, or anything that is not a seed, gets a ``ValueError`` that
    names ``random_state`` rather than numpy's own message.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        ``None`` is numpy's global generator, an integer in ``[0, 2**32 - 1]``
        seeds a new one, a ``RandomState`` is returned as is.

    Returns
    -------
    rng : numpy.random.RandomState

    Raises
    ------
    ValueError
        If ``random_state`` is an integer outside ``[0, 2**32 - 1]`` or not a
        seed at all.

    Examples
    --------
    >>> check_random_state(0).randint(10)
    5
    >>> check_random_state(-1)
    Traceback (most recent call last):
    ...
    ValueError: random_state must be an integer in [0, 4294967295]; got -1
    """
    if isinstance(random_state, numbers.Integral) and not _is_bool(random_state):
        check_seed(random_state, "random_state")
    try:
        from sklearn.utils import check_random_state as sklearn_check_random_state

        return sklearn_check_random_state(random_state)
    except ValueError:
        raise ValueError(
            "random_state must be None, an integer in [0, 2**32 - 1] or a "
            f"numpy.random.RandomState; got {random_state!r}"
        ) from None


def child_seeds(random_state, count):
    """``count`` independent integer seeds drawn from ``random_state``.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
    count : int

    Returns
    -------
    seeds : ndarray of shape (count,)
        Integers in ``[0, MAX_SEED)``; the same ``random_state`` gives the same
        seeds.

    Raises
    ------
    ValueError
        If ``random_state`` is an integer outside ``[0, 2**32 - 1]`` or not a
        seed at all, or ``count`` is not an integer ``>= 0``.

    Examples
    --------
    >>> child_seeds(0, 2).tolist()
    [209652396, 398764591]
    """
    return check_random_state(random_state).randint(MAX_SEED, size=check_int(count, "count", 0))


def draw_seed(random_state):
    """One integer seed from ``random_state``: the first of :func:`child_seeds`.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState

    Returns
    -------
    seed : int

    Raises
    ------
    ValueError
        If ``random_state`` is an integer outside ``[0, 2**32 - 1]`` or not a
        seed at all.

    Examples
    --------
    >>> draw_seed(0) == int(child_seeds(0, 1)[0])
    True
    """
    return int(check_random_state(random_state).randint(MAX_SEED))


def keyed_seed(seed, *keys):
    """A seed tied to ``(seed, *keys)``: independent of any other draw.

    Parameters
    ----------
    seed : int
    *keys : int
        E.g. a rank or a length, so that each gets its own stream whatever
        else the grid holds.

    Returns
    -------
    seed : int
        ``numpy.random.SeedSequence([seed, *keys])``'s first 32-bit word.

    Examples
    --------
    >>> keyed_seed(0, 4) == keyed_seed(0, 4) != keyed_seed(0, 5)
    True
    """
    words = [int(seed), *(int(k) for k in keys)]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def keyed_rng(seed, *keys):
    """A numpy ``Generator`` tied to ``(seed, *keys)``, for a draw per item.

    The same stream as :func:`keyed_seed`'s ``SeedSequence``, handed to
    :func:`numpy.random.default_rng` whole (all its entropy, not one word).

    Parameters
    ----------
    seed : int
    *keys : int
        E.g. the token ids of one target, so that each target's draw depends
        on the seed and the target alone.

    Returns
    -------
    rng : numpy.random.Generator

    Examples
    --------
    >>> a = keyed_rng(0, 3, 1).standard_normal()
    >>> b = keyed_rng(0, 3, 1).standard_normal()
    >>> a == b
    True
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), *(int(k) for k in keys)]))


def consecutive_seeds(seed, count):
    """The seeds ``seed, seed + 1, ..., seed + count - 1``.

    Parameters
    ----------
    seed : int
    count : int

    Returns
    -------
    seeds : list of int

    Examples
    --------
    >>> consecutive_seeds(3, 3)
    [3, 4, 5]
    """
    return [int(seed) + s for s in range(check_int(count, "count", 0))]


def check_device(device, *, probe=False):
    """Validate a torch device specification and return a ``torch.device``.

    Parameters
    ----------
    device : str or torch.device
        E.g. ``"cpu"``, ``"cuda"`` or ``"cuda:1"``.
    probe : bool, default=False
        Also allocate one tensor on a device other than the CPU, so that a
        device torch knows but this build or machine cannot use is refused
        before any work starts (what the estimators ask for).

    Returns
    -------
    device : torch.device

    Raises
    ------
    ValueError
        If torch does not know the device; if it is ``"meta"`` (tensors without
        data, nothing can be trained there); if CUDA is asked for and absent, or
        ``"cuda:N"`` names a GPU beyond ``torch.cuda.device_count()``; or if
        ``"mps"`` is asked for where ``torch.backends.mps.is_available()`` is
        False; with ``probe``, if a tensor cannot be allocated there.

    Examples
    --------
    >>> check_device("cpu").type
    'cpu'
    >>> check_device("meta")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: device='meta': cannot train on the meta device (it holds no data); use 'cpu'...
    """
    import torch

    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"unknown device {device!r}: {error}") from None
    if device.type == "meta":
        raise ValueError(
            "device='meta': cannot train on the meta device (it holds no data); "
            "use 'cpu' or 'cuda'"
        )
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device='cuda' was requested but no CUDA device is available")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"device='{device}' names CUDA device {device.index}, but only {count} "
                f"CUDA device(s) are available (indices 0 to {count - 1})"
            )
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(
                f"device='{device}' was requested but the MPS backend is not available "
                "here (torch.backends.mps.is_available() is False); use 'cpu'"
            )
    if probe and device.type != "cpu":
        try:
            torch.empty(1, device=device)
        except (RuntimeError, AssertionError) as error:
            text = str(error).strip()
            reason = text.splitlines()[0] if text else type(error).__name__
            raise ValueError(
                f"device={str(device)!r} is not available here ({reason}); use 'cpu' "
                "or an available accelerator"
            ) from None
    return device


@contextlib.contextmanager
def torch_rng(seed):
    """Seed torch's global CPU generator inside the block, and restore it after.

    Code that draws from torch's global generator (module initialisation,
    dropout) becomes reproducible without changing the caller's stream.

    Parameters
    ----------
    seed : int

    Examples
    --------
    >>> import torch
    >>> with torch_rng(0):
    ...     a = torch.rand(1)
    >>> with torch_rng(0):
    ...     b = torch.rand(1)
    >>> bool(a == b)
    True
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


# -- sizes, files and short messages ------------------------------------------------


def describe_value(value):
    """A short description of ``value`` for an error message: never a whole array.

    Arrays (and anything with a ``shape`` and a ``dtype``) read as
    ``"an array of shape (5,) and dtype float64"``; other values as their
    ``repr``, cut to 80 characters.

    Examples
    --------
    >>> describe_value(np.zeros(1000))
    'an array of shape (1000,) and dtype float64'
    >>> describe_value("x" * 200)[-3:]
    '...'
    """
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"an array of shape {tuple(shape)} and dtype {dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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


def check_distinct(values, name):
    """``values`` (a list option) unchanged, or one ``ValueError`` naming a repeated entry.

    ``--bits 2 2 3`` would train ``m = 2`` twice; a command refuses it before work.

    Parameters
    ----------
    values : sequence or None
    name : str
        The option, e.g. ``"--bits"``.

    Returns
    -------
    values : sequence or None

    Examples
    --------
    >>> check_distinct([2, 3], "--bits")
    [2, 3]
    >>> check_distinct([2, 2, 3], "--bits")
    Traceback (most recent call last):
    ...
    ValueError: --bits: 2 is given twice; give each value once
    """
    if values is None:
        return None
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{name}: {value} is given twice; give each value once")
        seen.add(value)
    return values


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
