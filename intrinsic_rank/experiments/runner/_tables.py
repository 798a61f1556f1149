"""Tables and numbers as the commands print them and as the report shows them.

Every float column follows one rule: 4 significant digits (trailing zeros
dropped), in fixed point when every value of the column lies in
``[1e-4, 1e6)`` (or is zero), otherwise in scientific notation for the whole
column. A missing value, ``None`` or NaN, reads "–" (:data:`MISSING`) in a
table cell and in prose alike: :func:`number_text` is the one place that says
so, and the tables call it.
"""

import math

import numpy as np

__all__ = ["MISSING", "format_column", "format_table", "markdown_table", "markdown_text",
           "number_text"]


MISSING = "\u2013"
"""What a table shows for a value that does not apply (``None`` or NaN): an en dash."""


def _is_float(value):
    return isinstance(value, (float, np.floating)) and not isinstance(value, (bool, np.bool_))


def number_text(value, fmt="{:.3g}"):
    """A value as text: :data:`MISSING` for None and NaN, in tables and prose alike.

    Booleans read yes/no, infinities ``inf``/``-inf``, integers as they are,
    other numbers by ``fmt``, anything else as ``str(value)``.

    Parameters
    ----------
    value : object
    fmt : str, default="{:.3g}"
        The format of a finite non-integer number.

    Returns
    -------
    text : str

    Examples
    --------
    >>> number_text(0.123456), number_text(float("nan")), number_text(None), number_text(3)
    ('0.123', '–', '–', '3')
    >>> number_text(float("inf")), number_text(True), number_text(2.5, "{:.2f}")
    ('inf', 'yes', '2.50')
    """
    if value is None:
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        if math.isnan(value):
            return MISSING
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    except TypeError:  # not a real number: text, a list
        return str(value)
    return fmt.format(value)


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
        if floatfmt is None and _is_float(value) and math.isfinite(value):
            cells.append(_significant(float(value), digits, scientific))
        elif _is_float(value):  # missing, infinite, or formatted by floatfmt
            cells.append(number_text(value, floatfmt))
        else:
            cells.append(number_text(value, "{}"))
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
