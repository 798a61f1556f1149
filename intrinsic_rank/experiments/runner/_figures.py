"""Figures: matplotlib on the Agg backend, titles that fit, saved atomically."""

import os
import re
import textwrap

from ._output import atomic_file

__all__ = ["fit_titles", "pyplot", "save_figure", "write_figure"]

# a mathtext span ($r^*$, $\log_2$) is never cut: its spaces are held by this mark
_MATH = re.compile(r"\$[^$]*\$")
_HELD_SPACE = "\x00"


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


def _wrap(text, columns):
    """``text`` with every line wrapped at ``columns`` characters, mathtext kept whole."""
    held = _MATH.sub(lambda m: m.group(0).replace(" ", _HELD_SPACE), text)
    lines = [textwrap.fill(line, max(columns, 8), break_on_hyphens=False) if line else line
             for line in held.split("\n")]
    return "\n".join(lines).replace(_HELD_SPACE, " ")


def _titles(fig):
    """``(text, axes)`` of the figure's suptitle (axes ``None``) and its visible axes' titles."""
    titles = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        titles.append((suptitle, None))
    for ax in fig.axes:
        if ax.get_visible():
            for name in ("title", "_left_title", "_right_title"):
                text = getattr(ax, name, None)
                if text is not None and text.get_text():
                    titles.append((text, ax))
    return titles


def _room(fig, ax, renderer):
    """The horizontal span (pixels) an axes' title may take: up to halfway to a neighbour.

    A neighbour is another titled axes of the same row; the figure's edges bound the
    rest (the suptitle's span is the whole figure).
    """
    low, high = 0.0, fig.bbox.width
    if ax is None:
        return low, high
    box = ax.get_window_extent(renderer)
    for other in fig.axes:
        if other is ax or not other.get_visible() or not other.get_title():
            continue
        near = other.get_window_extent(renderer)
        if near.y1 <= box.y0 or near.y0 >= box.y1:
            continue  # another row
        if near.x1 <= box.x0:
            low = max(low, (near.x1 + box.x0) / 2)
        elif near.x0 >= box.x1:
            high = min(high, (box.x1 + near.x0) / 2)
    return low, high


def _title_room(fig, text, ax, renderer, pad):
    """The widest ``text`` may be where it is anchored, in pixels."""
    low, high = _room(fig, ax, renderer)
    low, high = low + pad, high - pad
    extent = text.get_window_extent(renderer)
    align = text.get_horizontalalignment()
    if align == "left":
        return high - extent.x0
    if align == "right":
        return extent.x1 - low
    middle = (extent.x0 + extent.x1) / 2
    return 2 * min(middle - low, high - middle)


def _axis_labels(fig):
    """``(label, axes, vertical)`` of every visible axes' x and y labels (colour bars' too)."""
    return [(label, ax, vertical) for ax in fig.axes if ax.get_visible()
            for label, vertical in ((ax.xaxis.label, False), (ax.yaxis.label, True))
            if label.get_text()]


def _label_room(fig, label, ax, vertical, renderer, pad, reach=1.1):
    """The longest an axis label may be, centred where it is: inside the canvas, and at
    most ``reach`` times its axes' length (a colour bar's label no longer than the bar)."""
    extent = label.get_window_extent(renderer)
    box = ax.get_window_extent(renderer)
    low, high = (extent.y0, extent.y1) if vertical else (extent.x0, extent.x1)
    size = fig.bbox.height if vertical else fig.bbox.width
    along = box.height if vertical else box.width
    middle = (low + high) / 2
    return min(2 * min(middle - pad, size - pad - middle), reach * along), high - low


def _rewrap(text, room, length_of):
    """Wrap ``text`` at spaces until ``length_of(text)`` is at most ``room`` pixels."""
    original = text.get_text()
    longest = max(len(line) for line in original.split("\n"))
    columns = int(longest * room / length_of(text))
    for _ in range(8):  # shrink until it fits (proportional fonts are uneven)
        text.set_text(_wrap(original, columns))
        if length_of(text) <= room or columns <= 8:
            return
        columns = int(columns * 0.9)


def fit_titles(fig, pad=4.0):
    """Wrap the suptitle, every axes title and any axis label that would reach past its room.

    A title's room is the figure's width for the suptitle, and for an axes
    title the span up to halfway to the next titled axes of its row (or the
    figure's edge); an axis label's (a colour bar's too) is its axes' length
    (10% more) inside the canvas, centred where it is. Each room is less ``pad`` pixels at either
    end. Lines are wrapped at spaces, never inside a mathtext span
    (``$...$``), until the text fits.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    pad : float, default=4.0
        Margin in pixels at each end of the room.

    Returns
    -------
    n_wrapped : int
        How many titles were rewrapped (0: all fitted as they were).

    Examples
    --------
    >>> plt = pyplot()
    >>> fig, ax = plt.subplots(figsize=(3, 2))
    >>> _ = fig.suptitle("a long title " * 8)
    >>> fit_titles(fig), len(fig.get_suptitle().splitlines()) > 1
    (1, True)
    >>> plt.close(fig)
    """
    fig.draw_without_rendering()  # titles and labels move to their final place on drawing
    renderer = fig.canvas.get_renderer()
    wrapped = 0
    for text, ax in _titles(fig):
        room = _title_room(fig, text, ax, renderer, pad)
        if text.get_window_extent(renderer).width > room:
            _rewrap(text, room, lambda t: t.get_window_extent(renderer).width)
            wrapped += 1
    for label, ax, vertical in _axis_labels(fig):
        room, length = _label_room(fig, label, ax, vertical, renderer, pad)
        if length > room:
            extent = "height" if vertical else "width"
            _rewrap(label, room, lambda t: getattr(t.get_window_extent(renderer), extent))
            wrapped += 1
    return wrapped


def _clear_suptitle(fig, gap=6.0):
    """Lower the axes until their titles end ``gap`` pixels under the suptitle.

    ``tight_layout`` leaves a suptitle of several lines touching the axes' titles.
    """
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is None or not suptitle.get_text():
        return
    for _ in range(3):
        fig.draw_without_rendering()  # titles move to their final place on drawing
        renderer = fig.canvas.get_renderer()
        bottom = suptitle.get_window_extent(renderer).y0
        tops = [ax.get_tightbbox(renderer).y1 for ax in fig.axes if ax.get_visible()]
        overlap = (max(tops) + gap - bottom) if tops else 0.0
        if overlap <= 0.5:
            return
        fig.subplots_adjust(top=fig.subplotpars.top - overlap / fig.bbox.height)


def save_figure(fig, path):
    """Lay out ``fig`` with titles that fit and save it as a PNG at ``path``; ``None`` skips.

    The layout is matplotlib's ``tight_layout``, after ``fit_titles``
    has wrapped every title that would reach past the figure or over its
    neighbour's (repeated while the layout changes what fits); the axes are then
    lowered where their titles would touch the suptitle.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or None
        Missing folders are created.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    fig.tight_layout()
    for _ in range(3):
        if not fit_titles(fig):
            break
        fig.tight_layout()
    _clear_suptitle(fig)
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
