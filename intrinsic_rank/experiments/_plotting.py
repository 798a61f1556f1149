"""Kept for the modules not yet moved to :mod:`._output` (removed at the end of the move)."""

from ._output import pyplot, save_figure

__all__ = ["pyplot", "save_figure"]
