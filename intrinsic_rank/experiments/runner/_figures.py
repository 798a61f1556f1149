"""Figures: matplotlib on the Agg backend, saved atomically."""

import os

from ._output import atomic_file

__all__ = ["pyplot", "save_figure", "write_figure"]


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
