"""Reproductions of the papers: pure functions returning records, plus plots.

Each experiment is one module that ends by registering one
:class:`Experiment` (its run, tables, plots, verdicts, quick and full
settings, command-line options); the command line and :func:`reproduce` read
them from :data:`EXPERIMENTS`. The experiments are imported below in
report order (entropic, ladder, frontier, min-ip, min-ip-law, reach, copy, profile); any
other module of this package is imported after them, so a new experiment
module registers itself without a change here.
"""

import importlib as _importlib
import pkgutil as _pkgutil

# The experiments, in registration order = report order (not sorted).
from ._sweep import plot_sweep, rank_sweep
from ._ladder import RUNGS, interpolation_ladder, plot_ladder
from ._frontier import FRONTIER_TEACHERS, plot_frontier, predictability_frontier
from ._min_ip import (
    OOD_SETTINGS,
    min_ip_ood_scaling,
    min_ip_phase_transition,
    plot_min_ip,
    summarize_min_ip,
)
from ._min_ip_law import fit_rank_law, min_ip_rank_law, plot_min_ip_law
from ._reach import AUTO_LENGTHS, accessibility_curves, plot_accessibility, reachability_geometry
from ._copy import (
    COPY_SETTINGS,
    copy_length_cliff,
    default_copy_lengths,
    greedy_copy,
    plot_copy_cliff,
    score_copies,
)
from ._profile import (
    PROFILE_COLUMNS,
    kernel_rank_trajectory,
    plot_head_profile,
    plot_kernel_rank_trajectory,
    profile_heads,
    save_profile_csv,
    HEAD_PATTERNS,
    head_pattern_masks,
    head_pattern_scores,
    plot_head_scores,
)
from ._arguments import parse_ranks
from ._data import ModelVersionWarning, load_model_file, load_xy, save_model_file, sweep_data
from ._curves import (
    fit_cliff,
    fit_logistic_midpoint,
    fit_n50,
    fit_slope,
    fit_tail_decay,
    fit_tail_decays,
)
from ._output import (
    check_output_folder,
    format_table,
    lock_folder,
    save_records,
    write_csv,
    write_json,
)
from ._parallel import SWEEP_GRID_KEYS, fit_seeds, run_parallel, sweep_grid
from ._registry import EXPERIMENTS, Experiment, register
from ._reproduce import PIECES, VERDICTS, ReproductionPiece, Verdict, reproduce, write_report


def _import_every_module():
    """Import the package's other modules, so that each experiment registers itself."""
    for info in _pkgutil.iter_modules(__path__):
        if info.name.startswith("_") and not info.name.startswith("__"):
            _importlib.import_module(f"{__name__}.{info.name}")


_import_every_module()

__all__ = [
    "ModelVersionWarning",
    "load_model_file",
    "load_xy",
    "save_model_file",
    "sweep_data",
    "write_csv",
    "HEAD_PATTERNS",
    "head_pattern_masks",
    "head_pattern_scores",
    "plot_head_scores",
    "fit_tail_decay",
    "fit_tail_decays",
    "check_output_folder",
    "lock_folder",
    "fit_rank_law",
    "min_ip_rank_law",
    "plot_min_ip_law",
    "EXPERIMENTS",
    "Experiment",
    "register",
    "parse_ranks",
    "write_json",
    "SWEEP_GRID_KEYS",
    "fit_seeds",
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
