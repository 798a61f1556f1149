"""Reproductions of the papers: pure functions returning records, plus plots."""

from ._frontier import FRONTIER_TEACHERS, plot_frontier, predictability_frontier
from ._ladder import RUNGS, interpolation_ladder, plot_ladder
from ._sweep import format_table, plot_sweep, rank_sweep, save_records

__all__ = [
    "FRONTIER_TEACHERS",
    "RUNGS",
    "plot_frontier",
    "predictability_frontier",
    "format_table",
    "interpolation_ladder",
    "plot_ladder",
    "plot_sweep",
    "rank_sweep",
    "save_records",
]
