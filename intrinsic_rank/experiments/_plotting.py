"""Shared plotting plumbing: a headless pyplot and saving figures."""

import os

__all__ = ["pyplot", "save_figure"]


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
