"""The one home of saving results: JSON, CSV, text, the folder lock, the output stage.

Every command, experiment and the reproduce runner write their files through
these functions (tables are formatted in ``_tables``, figures saved in
``_figures``).

* JSON is written atomically (a temporary file in the same folder, flushed to
  disk, then a rename), so an interrupted or failed write leaves the old file
  or the new one, never half of one.
* JSON is standard JSON: a non-finite float (NaN, inf) is written as ``null``
  (``json.dumps(..., allow_nan=False)`` proves that nothing else slips
  through). A writer that needs the exact values back (the reproduce cache)
  passes ``mark_nonfinite=True``: the places and values of the non-finite
  floats are then stored under the top-level key ``"nonfinite"``, and
  ``read_json(..., restore_nonfinite=True)`` puts them back.
* Output paths are checked before any work (:func:`check_output_folder`,
  :func:`check_output_file`, and ``_stage``'s ``check_outputs_apart`` and
  ``check_command_files``): a real write probe (permission bits say nothing
  for root), the free space, for a file that it is no folder and not one of
  the run's own output files, that no folder stands where the command writes
  one of its files, and that no output overwrites an input or another output.
* A command's files are written through one output stage (``_stage``): every
  :func:`atomic_file` inside it writes its temporary file beside its target
  and the renames wait until the stage ends, so a folder always holds the
  files of one run.
"""

import contextlib
import contextvars
import json
import math
import os
import stat

import numpy as np

from ..._atomic import replaced_atomically
from ..._validation import check_output_file, check_output_folder

__all__ = [
    "atomic_file",
    "check_output_file",
    "check_output_folder",
    "jsonable",
    "lock_folder",
    "read_json",
    "save_records",
    "write_csv",
    "write_json",
    "write_text",
]


def _plain(value):
    """JSON ``default`` hook: numpy scalars and arrays become Python values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def jsonable(value):
    """``value`` as it reads back from JSON (tuples -> lists, int keys -> str, ...).

    Parameters
    ----------
    value : object
        Built of dicts, lists, tuples, numbers, strings, numpy scalars and arrays.

    Returns
    -------
    value : object

    Examples
    --------
    >>> jsonable({1: (np.int64(2), 3.5)})
    {'1': [2, 3.5]}
    """
    return json.loads(json.dumps(value, default=_plain))


_NONFINITE_KEY = "nonfinite"
_NONFINITE_TEXT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _nonfinite_name(value):
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _standard(value, where, places):
    """``value`` with every non-finite float as ``None``; their places go to ``places``."""
    if isinstance(value, dict):
        return {key: _standard(item, (*where, key), places) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_standard(item, (*where, i), places) for i, item in enumerate(value)]
    if isinstance(value, np.ndarray):
        return _standard(value.tolist(), where, places)
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        places.append([list(where), _nonfinite_name(value)])
        return None
    return value


def write_json(path, payload, *, mark_nonfinite=False):
    """Write ``payload`` as standard JSON, atomically (numpy values converted).

    The text goes to a temporary file in the destination folder, flushed to
    disk, which then replaces ``path`` in one rename: a crash, an interrupt or
    a value that cannot be written leaves the previous file untouched. A
    non-finite float (NaN, inf) is written as ``null``.

    Parameters
    ----------
    path : str or path-like
        Destination; missing folders are created.
    payload : object
        JSON-able after ``jsonable``'s conversions.
    mark_nonfinite : bool, default=False
        Also record where the non-finite floats were, under the top-level key
        ``"nonfinite"`` (a list of ``[path, "NaN" | "Infinity" | "-Infinity"]``,
        each path a list of keys and indices; only written when there is
        one), so that ``read_json(path, restore_nonfinite=True)`` gives them
        back. ``payload`` must then be a dict.

    Raises
    ------
    TypeError
        If a value cannot be written as JSON (the old file is kept).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.json")
    >>> write_json(path, {"risk": float("nan"), "rank": np.int64(2)})
    >>> open(path).read().split()
    ['{', '"risk":', 'null,', '"rank":', '2', '}']
    >>> write_json(path, {"risk": float("nan")}, mark_nonfinite=True)
    >>> read_json(path)
    {'risk': None, 'nonfinite': [[['risk'], 'NaN']]}
    >>> read_json(path, restore_nonfinite=True)
    {'risk': nan}
    """
    path = os.fspath(path)
    places = []
    payload = _standard(payload, (), places)
    if mark_nonfinite:
        if not isinstance(payload, dict):
            raise TypeError(f"mark_nonfinite=True needs a dict payload; got "
                            f"{type(payload).__name__}")
        if places:
            payload = {**payload, _NONFINITE_KEY: places}
    # allow_nan=False: anything non-finite that _standard missed is an error, not "NaN"
    write_text(path, json.dumps(payload, indent=2, default=_plain, allow_nan=False))


def write_csv(path, records, columns=None):
    """Write ``records`` (a list of dicts) as a CSV file, atomically.

    One row per record, one column per key (``columns``, or the keys of the
    records in first-seen order); ``None`` and NaN are written as empty cells,
    floats with Python's shortest exact ``repr``.

    Parameters
    ----------
    path : str or path-like
    records : list of dict
    columns : list of str or None, default=None

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "sweep.csv")
    >>> write_csv(path, [{"rank": 1, "risk": 0.5}, {"rank": 2, "risk": None}])
    >>> print(open(path).read(), end="")
    rank,risk
    1,0.5
    2,
    """
    import csv
    import io

    path = os.fspath(path)
    if columns is None:
        columns = []
        for record in records:
            columns += [key for key in record if key not in columns]
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(columns)
    for record in records:
        row = []
        for key in columns:
            value = _plain(record.get(key)) if hasattr(record.get(key), "dtype") else \
                record.get(key)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                row.append("")
            else:
                row.append(value)
        writer.writerow(row)
    write_text(path, stream.getvalue())


@contextlib.contextmanager
def atomic_file(path, suffix=".tmp", *, companion=True):
    """Write a file atomically: yield a temporary path beside ``path``, then rename it.

    The block writes the temporary file (whatever writer it uses); when the
    block ends normally the file gets the usual permissions and replaces
    ``path`` in one rename; when it raises (an error, an interrupt) the
    temporary file is removed and ``path`` is left as it was. Missing folders
    are created (the package's one writer, ``intrinsic_rank._atomic``'s
    ``replaced_atomically``). Inside an output stage (``_stage.output_stage``) the rename
    waits for the end of the stage, which renames all of its files together.

    Parameters
    ----------
    path : str or path-like
    suffix : str, default=".tmp"
        The temporary file's ending (writers that infer the format from it,
        like matplotlib's ``savefig``, need the real one).
    companion : bool, default=True
        Inside a stage: whether the file is one of the command's own outputs,
        recorded in the folder's list of them (a later run removes it when it
        writes no such file). ``False`` for a file the user named (``--save-model``).

    Yields
    ------
    tmp : str

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> with atomic_file(target) as tmp:
    ...     _ = open(tmp, "w").write("done")
    >>> open(target).read()
    'done'
    """
    stage = _STAGE.get()
    rename = None if stage is None else (
        lambda tmp, target: stage.add(target, tmp, companion=companion))
    with replaced_atomically(path, suffix=suffix, rename=rename) as tmp:
        yield tmp


# -- the output stage (``_stage``) sets this while a run's files are staged --------

_STAGE = contextvars.ContextVar("intrinsic_rank_output_stage", default=None)


def write_text(path, text):
    """Write ``text`` at ``path`` atomically and durably (flushed to disk, then renamed).

    Parameters
    ----------
    path : str or path-like
    text : str
    """
    with atomic_file(path) as tmp:
        with open(tmp, "w", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())


def _restore(payload):
    """Put back the non-finite floats that ``write_json(mark_nonfinite=True)`` recorded."""
    if not isinstance(payload, dict) or _NONFINITE_KEY not in payload:
        return payload
    payload = dict(payload)
    places = payload.pop(_NONFINITE_KEY)
    try:
        for where, name in places:
            *parents, last = where
            node = payload
            for key in parents:
                node = node[key]
            if node[last] is not None:
                raise ValueError(f"no null at {where}")
            node[last] = _NONFINITE_TEXT[name]
    except (TypeError, ValueError, KeyError, IndexError) as error:
        raise ValueError(f"the record of non-finite values is damaged: {error}") from None
    return payload


def read_json(path, *, restore_nonfinite=False):
    """The JSON in ``path``, or ``None`` if it is missing or unreadable.

    Parameters
    ----------
    path : str or path-like
    restore_nonfinite : bool, default=False
        Put back the non-finite floats recorded by
        ``write_json(..., mark_nonfinite=True)`` (a damaged record reads as an
        unreadable file: ``None``).

    Returns
    -------
    payload : object or None
        ``None`` also when ``path`` is a folder, not a regular file (a FIFO is
        never opened) or not valid JSON.

    Examples
    --------
    >>> read_json("/nonexistent/file.json") is None
    True
    """
    try:
        # a FIFO, a device or a socket would block or never end: only regular files
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path) as handle:
            payload = json.load(handle)
        return _restore(payload) if restore_nonfinite else payload
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


@contextlib.contextmanager
def lock_folder(folder, wait_message=None):
    """Hold an exclusive lock on ``folder`` (the file ``folder/.lock``) in the block.

    Two runs writing the same output folder take turns: the second waits
    until the first leaves its block. The lock is the operating system's own
    (``flock`` on Linux and macOS, ``msvcrt.locking`` on Windows, through the
    ``filelock`` package), so it is released when the block ends or the
    process dies. On a file system without locks the block runs unlocked and
    the atomic writes make the last writer win.

    Parameters
    ----------
    folder : str or path-like
        Created if missing.
    wait_message : str or None, default=None
        Printed on stderr when another process holds the lock and this one
        starts to wait; ``None`` waits silently.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with lock_folder(folder):
    ...     pass
    >>> os.path.exists(os.path.join(folder, ".lock"))
    True
    """
    import sys

    import filelock

    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    lock = filelock.FileLock(os.path.join(folder, ".lock"), thread_local=False)
    try:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            if wait_message:
                print(wait_message, file=sys.stderr, flush=True)
            lock.acquire()
    except OSError:  # a file system without locks: atomic writes, the last one wins
        yield
        return
    try:
        yield
    finally:
        lock.release()


def save_records(path, records, **metadata):
    """Write ``{"records": records, **metadata}`` as standard JSON, atomically.

    Through :func:`~intrinsic_rank.experiments.runner.write_json`: a dump that fails (a
    value that is not JSON-able) or is interrupted leaves the previous file as it was.

    Parameters
    ----------
    path : str or path-like
    records : list of dict
    **metadata
        Extra top-level keys (configuration, estimates).

    Raises
    ------
    TypeError
        If a value cannot be written as JSON (the old file is kept).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "records.json")
    >>> save_records(path, [{"rank": 1, "risk": 0.5}], seed=0)
    >>> read_json(path)
    {'records': [{'rank': 1, 'risk': 0.5}], 'seed': 0}
    """
    write_json(path, {"records": records, **metadata})
