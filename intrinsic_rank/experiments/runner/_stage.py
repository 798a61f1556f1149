"""The output stage: one run's files written beside their targets and renamed in together.

A command's files are written through one :func:`output_stage`: every
:func:`~._output.atomic_file` inside it writes its temporary file beside its
target and the renames wait until the stage ends, so a folder always holds the
files of one run (see :func:`output_stage` for interrupts and failures). Before
any work, :func:`check_outputs_apart` and :func:`check_command_files` make sure
that no output overwrites an input or another output, and that no folder stands
where the command writes one of its files.
"""

import contextlib
import json
import os

from ..._atomic import replaced_atomically
from ..._interrupts import StopGuard
from ..._validation import check_paths_apart
from ._output import _STAGE, read_json

__all__ = [
    "OutputStage",
    "check_command_files",
    "check_outputs_apart",
    "command_files",
    "output_stage",
]


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
        try:
            with replaced_atomically(record) as tmp:
                with open(tmp, "w") as stream:
                    json.dump(names, stream)
        except OSError:
            pass

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
    >>> from intrinsic_rank.experiments.runner._output import write_json
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
