"""The one home of saving and showing results: JSON, tables, figures.

Every command, experiment and the reproduce runner write their files through
these functions.

* JSON is written atomically (a temporary file in the same folder, flushed to
  disk, then a rename), so an interrupted or failed write leaves the old file
  or the new one, never half of one.
* JSON is standard JSON: a non-finite float (NaN, inf) is written as ``null``
  (``json.dumps(..., allow_nan=False)`` proves that nothing else slips
  through). A writer that needs the exact values back (the reproduce cache)
  passes ``mark_nonfinite=True``: the places and values of the non-finite
  floats are then stored under the top-level key ``"nonfinite"``, and
  ``read_json(..., restore_nonfinite=True)`` puts them back.
* Tables (:func:`format_table`, :func:`markdown_table`) print every float
  column by one rule: 4 significant digits (trailing zeros dropped), in fixed
  point when every value of the column lies in ``[1e-4, 1e6)`` (or is zero),
  otherwise in scientific notation for the whole column; a missing value,
  ``None`` or NaN, reads "–".
"""

import contextlib
import json
import math
import os
import tempfile

import numpy as np

__all__ = [
    "MISSING",
    "write_csv",
    "format_table",
    "format_column",
    "check_output_folder",
    "jsonable",
    "lock_folder",
    "markdown_table",
    "markdown_text",
    "pyplot",
    "read_json",
    "save_figure",
    "save_records",
    "write_figure",
    "write_json",
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
def atomic_file(path, suffix=".tmp"):
    """Write a file atomically: yield a temporary path beside ``path``, then rename it.

    The block writes the temporary file (whatever writer it uses); when the
    block ends normally the file gets the usual permissions and replaces
    ``path`` in one rename; when it raises (an error, an interrupt) the
    temporary file is removed and ``path`` is left as it was. Missing folders
    are created.

    Parameters
    ----------
    path : str or path-like
    suffix : str, default=".tmp"
        The temporary file's ending (writers that infer the format from it,
        like matplotlib's ``savefig``, need the real one).

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
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                   suffix=suffix)
    os.close(handle)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


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
        ``None`` also when ``path`` is a folder or not valid JSON.

    Examples
    --------
    >>> read_json("/nonexistent/file.json") is None
    True
    """
    try:
        with open(path) as handle:
            payload = json.load(handle)
        return _restore(payload) if restore_nonfinite else payload
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


@contextlib.contextmanager
def lock_folder(folder, wait_message=None):
    """Hold an exclusive lock on ``folder`` (``folder/.lock``, ``fcntl.flock``) in the block.

    Two runs writing the same output folder take turns: the second waits
    until the first leaves its block (on platforms without ``fcntl``, or file
    systems without locks, the block runs unlocked, and the atomic writes make
    the last writer win). The lock
    is released when the block ends or the process dies.

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
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: atomic writes, last writer wins
        yield
        return
    import errno

    with open(os.path.join(folder, ".lock"), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                locked = False  # a file system without locks: atomic writes, last one wins
            else:
                if wait_message:
                    import sys

                    print(wait_message, file=sys.stderr, flush=True)
                fcntl.flock(handle, fcntl.LOCK_EX)
                locked = True
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def check_output_folder(path, name="out"):
    """Check that ``path`` can be an output folder, before any work is done.

    It must be a non-empty path that is a folder or does not exist yet, whose
    nearest existing parent is a writable folder.

    Parameters
    ----------
    path : str or path-like
    name : str, default="out"
        The argument's name, for the message.

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
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name} must be a folder path; got {type(path).__name__}")
    path = os.fspath(path)
    if not path.strip():
        raise ValueError(f"{name} must be a folder path; got an empty string")
    if "\0" in path:
        raise ValueError(f"{name} must be a folder path; got one with a NUL character")
    probe = os.path.abspath(path)
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        what = "" if probe == os.path.abspath(path) else f" ({probe} is a file)"
        raise ValueError(f"{name} {path!r} is not a folder{what}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{name} {path!r} is not writable ({probe!r} does not let us write)")
    return path


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


MISSING = "\u2013"
"""What a table shows for a value that does not apply (``None`` or NaN): an en dash."""


def _is_float(value):
    return isinstance(value, (float, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_missing(value):
    return value is None or (_is_float(value) and math.isnan(value))


def _significant(value, digits, scientific):
    """``value`` to ``digits`` significant digits, trailing zeros dropped."""
    if value == 0:
        return "0"
    if scientific:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{exponent}"
    magnitude = math.floor(math.log10(abs(value)))
    text = f"{value:.{max(0, digits - 1 - magnitude)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def format_column(values, floatfmt=None, digits=4):
    """The cells of one table column: the tables' one rule for numbers.

    Floats get ``digits`` significant digits (trailing zeros dropped), all in
    fixed point when every finite non-zero value lies in ``[1e-4, 1e6)``, all in
    scientific notation otherwise; ``None`` and NaN read :data:`MISSING` ("–"),
    infinities ``inf``/``-inf``, booleans yes/no, integers and text as they are.

    Parameters
    ----------
    values : sequence
        The column's values, one per row.
    floatfmt : str or None, default=None
        A format such as ``"{:.3f}"`` for the floats instead of the rule
        (missing values still read "–").
    digits : int, default=4
        Significant digits of the rule.

    Returns
    -------
    cells : list of str

    Examples
    --------
    >>> format_column([0.35, 0.009987, 0.5])
    ['0.35', '0.009987', '0.5']
    >>> format_column([0.35, 0.009987, 1.866e-06, None, float("nan")])
    ['3.5e-01', '9.987e-03', '1.866e-06', '–', '–']
    >>> format_column([2, 3.0, 12345.678])
    ['2', '3', '12346']
    """
    finite = [abs(float(v)) for v in values if _is_float(v) and math.isfinite(v) and v != 0]
    scientific = bool(finite) and (min(finite) < 1e-4 or max(finite) >= 1e6)
    cells = []
    for value in values:
        if _is_missing(value):
            cells.append(MISSING)
        elif isinstance(value, (bool, np.bool_)):
            cells.append("yes" if value else "no")
        elif _is_float(value):
            if not math.isfinite(value):
                cells.append("inf" if value > 0 else "-inf")
            elif floatfmt is not None:
                cells.append(floatfmt.format(value))
            else:
                cells.append(_significant(float(value), digits, scientific))
        else:
            cells.append(str(value))
    return cells


def format_table(records, columns=None, floatfmt=None):
    """Render records (a list of dicts) as a fixed-width text table.

    Every column follows ``format_column``'s rule: 4 significant digits,
    one style (fixed point or scientific) per column, "–" where a value does
    not apply (``None``, NaN or a missing key).

    Parameters
    ----------
    records : list of dict
    columns : list of str or None
        Columns to show, in order; ``None`` shows the keys of the first record.
    floatfmt : str or None, default=None
        A format of the floats (such as ``"{:.3f}"``) instead of the rule.

    Returns
    -------
    table : str

    Examples
    --------
    >>> print(format_table([{"rank": 1, "risk": 0.5}, {"rank": 2, "risk": 0.01}]))
    rank  risk
       1   0.5
       2  0.01
    >>> print(format_table([{"rank": 1, "risk": 0.5, "floor": float("nan")},
    ...                     {"rank": 2, "risk": 2e-7, "floor": 0.01}]))
    rank   risk  floor
       1  5e-01      –
       2  2e-07   0.01
    """
    columns = list(records[0]) if columns is None else list(columns)
    cells = [format_column([rec.get(c) for rec in records], floatfmt) for c in columns]
    rows = [[column[i] for column in cells] for i in range(len(records))]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    # text columns read best left-aligned, numbers right-aligned
    left = [isinstance(records[0].get(c), str) for c in columns]

    def line(values):
        return "  ".join(
            v.ljust(w) if is_left else v.rjust(w) for v, w, is_left in zip(values, widths, left)
        )

    lines = [line(columns)] + [line(row) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def markdown_text(text):
    """Plain text safe inside a Markdown table or emphasis ("r*" stays an asterisk).

    Parameters
    ----------
    text : object
        Shown as ``str(text)``.

    Returns
    -------
    text : str

    Examples
    --------
    >>> print(markdown_text("r* | n_50"))
    r\\* \\| n\\_50
    """
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace(
        "*", "\\*").replace("_", "\\_").replace("\n", " ")


def markdown_table(records, columns, floatfmt=None):
    """Records (a list of dicts) as a Markdown table, by ``format_column``'s rule.

    Missing cells (``None``, NaN or an absent key) read "–"; lists read
    ``a, b, c``.

    Parameters
    ----------
    records : list of dict
    columns : list of str
    floatfmt : str or None, default=None
        A format of the floats instead of the rule.

    Returns
    -------
    table : str

    Examples
    --------
    >>> print(markdown_table([{"rank": 1, "risk": 0.5}], ["rank", "risk"]))
    | rank | risk |
    |---|---|
    | 1 | 0.5 |
    """
    def plain(value):
        if isinstance(value, (list, tuple)):
            return ", ".join(str(v) for v in value)
        return value

    cells = [format_column([plain(rec.get(c)) for rec in records], floatfmt) for c in columns]
    lines = ["| " + " | ".join(markdown_text(c) for c in columns) + " |",
             "|" + "---|" * len(columns)]
    for i in range(len(records)):
        lines.append("| " + " | ".join(markdown_text(column[i]) for column in cells) + " |")
    return "\n".join(lines)


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (no display needed).

    Returns
    -------
    plt : module
        ``matplotlib.pyplot``.

    Raises
    ------
    ImportError
        If matplotlib is not installed (the message says what to install).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            f"plotting needs matplotlib, which cannot be imported ({error}): pip install "
            "matplotlib, or pip install \"intrinsic_rank[plot]\"") from None
    return plt


def save_figure(fig, path):
    """Lay out ``fig`` and save it as a PNG at ``path`` (folders created); ``None`` skips.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or None

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    fig.tight_layout()
    if path is not None:
        write_figure(fig, path)
    return fig


def write_figure(fig, path, dpi=120):
    """Save ``fig`` at ``path`` atomically (a temporary file, then a rename).

    A failed or interrupted save leaves the previous file; two runs saving the
    same path leave one whole figure (the last writer's). The format follows
    the file name's extension.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or path-like
        Missing folders are created.
    dpi : int, default=120

    Returns
    -------
    path : str
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1]
    with atomic_file(path, suffix=ext or ".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format=(ext[1:] or "png"))
    return path
