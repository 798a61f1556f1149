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
  :func:`check_output_file`, :func:`check_outputs_apart`,
  :func:`check_command_files`): a real write probe (permission bits say
  nothing for root), the free space, for a file that it is no folder and not
  one of the run's own output files, that no folder stands where the command
  writes one of its files, and that no output overwrites an input or another
  output.
* A command's files are written through one :func:`output_stage`: every
  :func:`atomic_file` inside it writes its temporary file beside its target
  and the renames wait until the stage ends, so a folder always holds the
  files of one run (see :func:`output_stage` for interrupts and failures).
"""

import contextlib
import contextvars
import json
import math
import os
import stat
import tempfile

import numpy as np

from ..._interrupts import StopGuard
from ..._validation import check_output_file, check_output_folder, check_paths_apart

__all__ = [
    "OutputStage",
    "atomic_file",
    "check_command_files",
    "command_files",
    "check_output_file",
    "check_outputs_apart",
    "check_output_folder",
    "jsonable",
    "lock_folder",
    "output_stage",
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


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path, suffix=".tmp", *, companion=True):
    """Write a file atomically: yield a temporary path beside ``path``, then rename it.

    The block writes the temporary file (whatever writer it uses); when the
    block ends normally the file gets the usual permissions and replaces
    ``path`` in one rename; when it raises (an error, an interrupt) the
    temporary file is removed and ``path`` is left as it was. Missing folders
    are created. Inside an :func:`output_stage` the rename waits for the end
    of the stage, which renames all of its files together.

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
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                   suffix=suffix)
    try:  # from the first moment the temporary file exists, a signal removes it
        os.close(handle)
        stage = _STAGE.get()
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        if stage is None:
            os.replace(tmp, path)
        else:
            stage.add(path, tmp, companion=companion)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# -- the output stage: one run's files renamed in together ---------------------------

_STAGE = contextvars.ContextVar("intrinsic_rank_output_stage", default=None)


def _companions_file(folder, name):
    return os.path.join(folder, f".{name}.files.json")


def command_files(name):
    """The names a command with file stem ``name`` may write in its output folder.

    ``NAME.json``, ``NAME.csv``, ``NAME.png`` and ``NAME_*.png`` (its figures),
    and the folder's record of them, ``.NAME.files.json``; as ``fnmatch``
    patterns.

    Examples
    --------
    >>> command_files("sweep")
    ('sweep.json', 'sweep.csv', 'sweep.png', 'sweep_*.png', '.sweep.files.json')
    """
    return (f"{name}.json", f"{name}.csv", f"{name}.png", f"{name}_*.png",
            f".{name}.files.json")


def check_command_files(folder, name, option="--out"):
    """Before any work: no folder stands where the command writes one of its files.

    A folder named like one of :func:`command_files` in ``folder``
    (``OUT/NAME.json``, ``NAME.csv``, ``NAME.png``, ``NAME_*.png``,
    ``.NAME.files.json``) would be found only at the final rename, after the
    whole run. A symbolic link is no obstacle (the rename replaces the link).

    Parameters
    ----------
    folder : str or path-like
        The output folder; a missing one holds nothing in the way.
    name : str
        The command's file stem.
    option : str, default="--out"
        The option that named ``folder``, for the message.

    Raises
    ------
    ValueError
        One line naming ``option``, the folder in the way and what to do.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> check_command_files(out, "sweep")
    >>> os.mkdir(os.path.join(out, "sweep.png"))
    >>> check_command_files(out, "sweep")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out ...: 'sweep.png' is a folder where the command writes a file; ...
    """
    import fnmatch

    folder = os.fspath(folder)
    try:
        entries = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing is in the way (check_output_folder judges the folder itself)
    for entry in entries:
        path = os.path.join(folder, entry)
        if any(fnmatch.fnmatchcase(entry, pattern) for pattern in command_files(name)) \
                and os.path.isdir(path) and not os.path.islink(path):
            raise ValueError(f"{option} {folder!r}: {entry!r} is a folder where the command "
                             "writes a file; move it away or write elsewhere")


def check_outputs_apart(folder, name, inputs=(), files=()):
    """Before any work: no output of the command would overwrite an input or another output.

    The outputs are the folder ``folder`` (``--out``), every path in it that
    matches :func:`command_files` and the files the user named (``files``:
    ``--save-model``); see :func:`~intrinsic_rank._validation.check_paths_apart`
    for the rule. An input inside ``folder`` whose name is one of the command's
    own files is refused too (the run would replace it), and so is a folder
    standing where the command writes one of its files
    (:func:`check_command_files`).

    Parameters
    ----------
    folder : str
        ``--out``.
    name : str
        The command's file stem.
    inputs : iterable of (str, path)
        ``(option, path)`` of the paths the run reads (``--data``, a model).
    files : iterable of (str, path)
        ``(option, path)`` of the other files the run writes.

    Raises
    ------
    ValueError
        One line naming the options.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> data = os.path.join(out, "sweep.csv")
    >>> _ = open(data, "w").write("x")
    >>> check_outputs_apart(out, "sweep", [("--data", data)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out file 'sweep.csv' would overwrite --data (the same file); ...
    """
    import fnmatch

    check_command_files(folder, name)
    given, folder = os.fspath(folder), os.path.abspath(os.fspath(folder))
    inputs = [(option, os.fspath(path)) for option, path in inputs if path is not None]
    own = [("--out file", os.path.join(folder, pattern), "file")
           for pattern in command_files(name) if "*" not in pattern]
    for _option, path in inputs:  # an input matching a figure's pattern in the folder
        full = os.path.abspath(path)
        if os.path.dirname(os.path.realpath(full)) == os.path.realpath(folder) and any(
                fnmatch.fnmatch(os.path.basename(full), p) for p in command_files(name)):
            own.append(("--out file", full, "file"))
    outputs = [("--out", given, "folder"), *own,
               *((option, os.fspath(path), "file") for option, path in files)]
    try:
        check_paths_apart(outputs, inputs)
    except ValueError as error:  # the folder's files by name, not by their full path
        text = str(error)
        for _, path, _ in own:
            text = text.replace(repr(path), repr(os.path.basename(path)))
        raise ValueError(text) from None


class OutputStage:
    """The files of one run, written beside their targets and renamed in together.

    Made by :func:`output_stage`; :func:`atomic_file` adds to it. The folder
    keeps the list of the files the last committed run of ``name`` wrote in
    it (``FOLDER/.NAME.files.json``): committing renames the new files in and
    removes those of the list that this run did not write, so no file of an
    earlier run is left beside the new ones.

    Attributes
    ----------
    folder : str
    name : str
    protect : tuple of str
        Paths the run reads: staging a file that is one of them, or inside
        one, is an error (the run's inputs are never overwritten).
    """

    def __init__(self, folder, name, protect=()):
        self.folder = os.path.abspath(os.fspath(folder))
        self.name = name
        self.protect = tuple(os.fspath(p) for p in protect if p is not None)
        self._staged = {}  # target -> (temporary file, companion)
        self._results_saved = False

    def add(self, path, tmp, *, companion=True):
        """Stage ``tmp`` to become ``path`` (a second write of ``path`` replaces the first).

        Raises
        ------
        ValueError
            If ``path`` is, or lies inside, one of :attr:`protect` (``tmp`` is removed).
        """
        path = os.path.abspath(path)
        try:
            check_paths_apart([("an output", path, "file")],
                              [("an input of the run", p) for p in self.protect])
        except ValueError:
            os.remove(tmp)
            raise
        earlier = self._staged.get(path)
        if earlier is not None and os.path.exists(earlier[0]):
            os.remove(earlier[0])
        self._staged[path] = (tmp, companion)

    @property
    def paths(self):
        """The targets staged so far, in the order they were written."""
        return list(self._staged)

    def results_saved(self):
        """Mark the results (JSON, tables, model) as written: a failure from here on
        (plotting, a missing matplotlib) still renames in what was staged; an
        interrupt still discards all."""
        self._results_saved = True

    def _previous(self):
        listed = read_json(_companions_file(self.folder, self.name))
        if not isinstance(listed, list):
            return []
        return [name for name in listed if isinstance(name, str) and name
                and os.path.basename(name) == name and not name.startswith(".")]

    def _rename_in(self):
        """Rename every staged file in, each old target set aside; undo all on a failure."""
        done = []  # (target, the old target set aside or None)
        try:
            for path, (tmp, _) in self._staged.items():
                aside = None
                if os.path.lexists(path) and not os.path.isdir(path):
                    aside = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}."
                                         f"{os.urandom(6).hex()}.old")
                    os.replace(path, aside)
                done.append((path, aside))
                os.replace(tmp, path)
        except BaseException:
            for path, aside in reversed(done):  # the folder as the earlier run left it
                with contextlib.suppress(OSError):
                    if aside is not None:
                        os.replace(aside, path)
                    elif os.path.lexists(path) and not os.path.isdir(path):
                        os.remove(path)
            self.discard()
            raise
        for _, aside in done:
            if aside is not None:
                with contextlib.suppress(OSError):
                    os.remove(aside)

    def commit(self):
        """Rename the staged files in, remove the earlier run's others, record the list.

        The stop signals (SIGINT, SIGTERM, SIGHUP) are held back meanwhile: one
        that arrives acts once every file is in. A rename that fails puts back
        the files renamed before it and removes every staged file, so the
        folder is left as the earlier run left it.
        """
        with StopGuard(held=True):
            names = [os.path.basename(path) for path, (_, companion) in self._staged.items()
                     if companion and os.path.dirname(path) == self.folder]
            self._rename_in()
            for name in self._previous():
                old = os.path.join(self.folder, name)
                if name not in names and os.path.isfile(old) and not os.path.islink(old):
                    with contextlib.suppress(OSError):
                        os.remove(old)
            self._staged = {}
            record = _companions_file(self.folder, self.name)
            if names or os.path.lexists(record):
                self._write_record(record, names)

    def _write_record(self, record, names):
        """The folder's list of this run's files; the run is in, so a failure is ignored,
        and the temporary file is removed whatever stood in the record's way."""
        tmp = None
        try:
            handle, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{self.name}.",
                                           suffix=".tmp")
            with os.fdopen(handle, "w") as stream:
                json.dump(names, stream)
            os.replace(tmp, record)
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.remove(tmp)

    def discard(self):
        """Remove the staged temporary files: the folder stays as the earlier run left it."""
        for tmp, _ in self._staged.values():
            with contextlib.suppress(OSError):
                os.remove(tmp)
        self._staged = {}


@contextlib.contextmanager
def output_stage(folder, name, protect=()):
    """Write one run's files so that the folder holds the files of one run only.

    Inside the block every :func:`atomic_file` (and so :func:`write_json`,
    :func:`write_csv`, ``write_figure`` and ``save_model_file``) writes its
    temporary file beside its target and the renames wait:

    * the block ends normally: all files are renamed in together, and the
      files the last run of ``name`` wrote in ``folder`` that this run did not
      write are removed;
    * a stop -- Ctrl-C (``KeyboardInterrupt``), SIGTERM or SIGHUP (any
      ``BaseException`` that is not an ``Exception``) -- at any point:
      nothing is renamed in; the earlier run's files stay, all of them;
    * another error after :meth:`OutputStage.results_saved` (plotting failed,
      matplotlib is missing): what was staged (the JSON, the CSV, the model) is
      renamed in and the earlier run's other files (its PNGs) are removed;
      before it (the run itself failed): nothing is renamed in.

    The stop signals are held back during the renames, so none can split them;
    a rename that fails undoes the others (see :meth:`OutputStage.commit`).

    Parameters
    ----------
    folder : str or path-like
        The output folder (``--out``).
    name : str
        The command's file stem; names the folder's record of its files.
    protect : iterable of path-like, default=()
        The run's inputs: no file staged may be one of them or lie inside one.

    Yields
    ------
    stage : OutputStage

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with output_stage(folder, "demo") as stage:
    ...     write_json(os.path.join(folder, "demo.json"), {"a": 1})
    ...     os.path.exists(os.path.join(folder, "demo.json"))
    False
    >>> read_json(os.path.join(folder, "demo.json"))
    {'a': 1}
    """
    stage = OutputStage(folder, name, protect)
    token = _STAGE.set(stage)
    try:
        yield stage
    except Exception:
        if stage._results_saved:
            stage.commit()
        else:
            stage.discard()
        raise
    except BaseException:  # Ctrl-C, SIGTERM or SIGHUP unwinding: the run is out
        stage.discard()
        raise
    else:
        stage.commit()
    finally:
        _STAGE.reset(token)


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

    Through :func:`write_json`: a dump that fails (a value that is not
    JSON-able) or is interrupted leaves the previous file as it was.

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
