"""The one home of saving and showing results: JSON, tables, figures.

Every command, experiment and the reproduce runner write their files through
these functions: JSON is written atomically (a temporary file in the same
folder, then a rename), so an interrupted or failed write leaves the old file
or the new one, never half of one.
"""

import json
import math
import os
import tempfile

import numpy as np

__all__ = [
    "format_table",
    "jsonable",
    "markdown_table",
    "markdown_text",
    "pyplot",
    "read_json",
    "save_figure",
    "save_records",
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


def write_json(path, payload):
    """Write ``payload`` as JSON atomically (numpy values converted).

    The text goes to a temporary file in the destination folder, which then
    replaces ``path`` in one rename: a crash or a value that cannot be written
    leaves the previous file untouched.

    Parameters
    ----------
    path : str or path-like
        Destination; missing folders are created.
    payload : object
        JSON-able after :func:`jsonable`'s conversions.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    text = json.dumps(payload, indent=2, default=_plain)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def read_json(path):
    """The JSON in ``path``, or ``None`` if it is missing or unreadable.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    payload : object or None
    """
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def save_records(path, records, **metadata):
    """Write ``{"records": records, **metadata}`` as JSON, atomically.

    Parameters
    ----------
    path : str or path-like
    records : list of dict
    **metadata
        Extra top-level keys (configuration, estimates).
    """
    write_json(path, {"records": records, **metadata})


def format_table(records, columns=None, floatfmt="{:.4g}"):
    """Render records (a list of dicts) as a fixed-width text table.

    Parameters
    ----------
    records : list of dict
    columns : list of str or None
        Columns to show, in order; ``None`` shows the keys of the first record.
    floatfmt : str, default="{:.4g}"
        Format of floats.

    Returns
    -------
    table : str

    Examples
    --------
    >>> print(format_table([{"rank": 1, "risk": 0.5}, {"rank": 2, "risk": 0.01}]))
    rank  risk
       1   0.5
       2  0.01
    """
    columns = list(records[0]) if columns is None else list(columns)

    def cell(value):
        if isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if isinstance(value, (float, np.floating)):
            return floatfmt.format(value)
        return str(value)

    rows = [[cell(rec[c]) for c in columns] for rec in records]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    # text columns read best left-aligned, numbers right-aligned
    left = [isinstance(records[0][c], str) for c in columns]

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


def _markdown_cell(value, floatfmt):
    if isinstance(value, (bool, np.bool_)):
        text = "yes" if value else "no"
    elif isinstance(value, (float, np.floating)):
        text = "n/a" if math.isnan(value) else floatfmt.format(value)
    elif value is None:
        text = "n/a"
    elif isinstance(value, (list, tuple)):
        text = ", ".join(str(v) for v in value)
    else:
        text = str(value)
    return markdown_text(text)


def markdown_table(records, columns, floatfmt="{:.4g}"):
    """Records (a list of dicts) as a Markdown table; missing cells read "n/a".

    Parameters
    ----------
    records : list of dict
    columns : list of str
    floatfmt : str, default="{:.4g}"

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
    lines = ["| " + " | ".join(markdown_text(c) for c in columns) + " |",
             "|" + "---|" * len(columns)]
    for rec in records:
        lines.append("| " + " | ".join(
            _markdown_cell(rec.get(c), floatfmt) for c in columns) + " |")
    return "\n".join(lines)


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (no display needed).

    Returns
    -------
    plt : module
        ``matplotlib.pyplot``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig
