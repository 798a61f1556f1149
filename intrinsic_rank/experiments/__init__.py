"""Reproductions of the papers: pure functions returning records, plus plots."""

from ._frontier import FRONTIER_TEACHERS, plot_frontier, predictability_frontier
from ._ladder import RUNGS, interpolation_ladder, plot_ladder
from ._min_ip import (
    OOD_SETTINGS,
    min_ip_ood_scaling,
    min_ip_phase_transition,
    plot_min_ip,
    summarize_min_ip,
)
from ._sweep import format_table, plot_sweep, rank_sweep, save_records

__all__ = [
    "FRONTIER_TEACHERS",
    "OOD_SETTINGS",
    "RUNGS",
    "plot_frontier",
    "predictability_frontier",
    "format_table",
    "interpolation_ladder",
    "min_ip_ood_scaling",
    "min_ip_phase_transition",
    "plot_ladder",
    "plot_min_ip",
    "plot_sweep",
    "rank_sweep",
    "save_records",
    "summarize_min_ip",
]
