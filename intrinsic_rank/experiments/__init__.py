"""Reproductions of the papers: pure functions returning records, plus plots."""

from ._copy import (
    COPY_SETTINGS,
    copy_length_cliff,
    default_copy_lengths,
    greedy_copy,
    plot_copy_cliff,
    score_copies,
)
from ._curves import fit_cliff, fit_logistic_midpoint, fit_n50, fit_slope
from ._frontier import FRONTIER_TEACHERS, plot_frontier, predictability_frontier
from ._ladder import RUNGS, interpolation_ladder, plot_ladder
from ._min_ip import (
    OOD_SETTINGS,
    min_ip_ood_scaling,
    min_ip_phase_transition,
    plot_min_ip,
    summarize_min_ip,
)
from ._parallel import SWEEP_GRID_KEYS, run_parallel, sweep_grid
from ._profile import (
    PROFILE_COLUMNS,
    kernel_rank_trajectory,
    plot_head_profile,
    plot_kernel_rank_trajectory,
    profile_heads,
    save_profile_csv,
)
from ._reach import AUTO_LENGTHS, accessibility_curves, plot_accessibility, reachability_geometry
from ._reproduce import PIECES, VERDICTS, ReproductionPiece, Verdict, reproduce, write_report
from ._sweep import format_table, plot_sweep, rank_sweep, save_records

__all__ = [
    "SWEEP_GRID_KEYS",
    "run_parallel",
    "sweep_grid",
    "PIECES",
    "VERDICTS",
    "ReproductionPiece",
    "Verdict",
    "reproduce",
    "write_report",
    "COPY_SETTINGS",
    "copy_length_cliff",
    "default_copy_lengths",
    "greedy_copy",
    "plot_copy_cliff",
    "score_copies",
    "PROFILE_COLUMNS",
    "kernel_rank_trajectory",
    "plot_head_profile",
    "plot_kernel_rank_trajectory",
    "profile_heads",
    "save_profile_csv",
    "reachability_geometry",
    "AUTO_LENGTHS",
    "accessibility_curves",
    "plot_accessibility",
    "fit_cliff",
    "fit_logistic_midpoint",
    "fit_n50",
    "fit_slope",
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
