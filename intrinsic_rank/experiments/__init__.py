"""Reproductions of the three papers: pure functions returning records, plus plots.

One subpackage per paper, each importing only the runner and the rooms below
(import-linter checks both, and that the papers never import each other):

* ``experiments.entropic`` -- the Entropic Bound (``sweep``,
  ``ladder``, ``frontier`` and the appendix on real models, ``profile``);
* ``experiments.min_ip`` -- three tokens force exponential
  feature rank (``min-ip``, ``min-ip-law``);
* ``experiments.reachability`` -- how many outputs a
  Transformer can generate (``reach``, ``copy``);
* ``experiments.runner`` -- what they share: the registry,
  the reproduce runner, output, progress, argument types and parallel tasks.

Each experiment is one :class:`Experiment` (its run, tables, plots, verdicts,
quick and full settings, command-line options); :data:`REPORT_ORDER` below
lists them in the order of the report and of ``intrinsic-rank --help``, and
registers them in :data:`EXPERIMENTS`, which the command line and
:func:`reproduce` read. The measuring functions these experiments use
(:func:`~intrinsic_rank.inspection.profile_heads`, :func:`~intrinsic_rank.inspection.head_pattern_scores`,
:func:`~intrinsic_rank.inspection.reachability_geometry`) live in :mod:`intrinsic_rank.inspection` and are
re-exported here.
"""

from ..inspection import (
    HEAD_PATTERNS,
    PROFILE_COLUMNS,
    head_pattern_masks,
    head_pattern_scores,
    profile_heads,
    reachability_geometry,
    save_profile_csv,
)
from . import entropic, min_ip, reachability, runner
from .entropic import (
    CORPORA,
    CORPUS_RANK_COLUMNS,
    FRONTIER_TEACHERS,
    RUNGS,
    SWEEP_GRID_KEYS,
    ModelVersionWarning,
    corpus_inputs,
    corpus_rank_profiles,
    fit_seeds,
    head_rank_findings,
    head_rank_map,
    interpolation_ladder,
    kernel_rank_trajectory,
    load_model_file,
    load_xy,
    plot_corpus_ranks,
    plot_frontier,
    plot_head_profile,
    plot_head_rank_map,
    plot_head_scores,
    plot_kernel_rank_trajectory,
    plot_ladder,
    plot_sweep,
    predictability_frontier,
    rank_sweep,
    save_model_file,
    sweep_data,
    sweep_grid,
)
from .min_ip import (
    OOD_SETTINGS,
    fit_rank_law,
    min_ip_ood_scaling,
    min_ip_phase_transition,
    min_ip_rank_law,
    min_ip_witness_suite_sweep,
    plot_min_ip,
    plot_min_ip_law,
    summarize_min_ip,
)
from .reachability import (
    AUTO_LENGTHS,
    COPY_SETTINGS,
    LM_GEOMETRY_TOKEN_COLUMNS,
    accessibility_curves,
    cell_share_facts,
    equal_cell_null,
    copy_length_cliff,
    default_copy_lengths,
    fit_cliff,
    fit_logistic_midpoint,
    fit_n50,
    fit_slope,
    fit_tail_decay,
    fit_tail_decays,
    greedy_copy,
    lm_reachability_geometry,
    plot_accessibility,
    plot_cell_shares,
    plot_copy_cliff,
    score_copies,
)
from .runner import (
    EXPERIMENTS,
    NOT_COMPARABLE,
    VERDICTS,
    Experiment,
    Verdict,
    check_output_folder,
    format_table,
    lock_folder,
    parse_ranks,
    register,
    reproduce,
    run_parallel,
    save_records,
    write_csv,
    write_json,
    write_report,
)

REPORT_ORDER = (
    entropic.SWEEP,
    entropic.LADDER,
    entropic.FRONTIER,
    min_ip.MIN_IP,
    min_ip.MIN_IP_LAW,
    reachability.REACH,
    reachability.COPY,
    reachability.LM_GEOMETRY,
    entropic.PROFILE,
    entropic.CORPUS_RANKS,
    entropic.HEAD_RANKS,
)
"""Every experiment of the three papers, in report order (the order of ``--help`` too)."""

for _experiment in REPORT_ORDER:
    register(_experiment)
del _experiment

# The measuring functions of intrinsic_rank.inspection stay importable from here,
# but are documented (and listed in __all__) where they live.
__all__ = [
    "AUTO_LENGTHS",
    "CORPORA",
    "CORPUS_RANK_COLUMNS",
    "LM_GEOMETRY_TOKEN_COLUMNS",
    "COPY_SETTINGS",
    "EXPERIMENTS",
    "Experiment",
    "FRONTIER_TEACHERS",
    "ModelVersionWarning",
    "NOT_COMPARABLE",
    "OOD_SETTINGS",
    "REPORT_ORDER",
    "RUNGS",
    "SWEEP_GRID_KEYS",
    "VERDICTS",
    "Verdict",
    "accessibility_curves",
    "check_output_folder",
    "cell_share_facts",
    "equal_cell_null",
    "copy_length_cliff",
    "corpus_inputs",
    "corpus_rank_profiles",
    "default_copy_lengths",
    "fit_cliff",
    "fit_logistic_midpoint",
    "fit_n50",
    "fit_rank_law",
    "fit_seeds",
    "head_rank_findings",
    "head_rank_map",
    "fit_slope",
    "fit_tail_decay",
    "fit_tail_decays",
    "format_table",
    "greedy_copy",
    "interpolation_ladder",
    "kernel_rank_trajectory",
    "lm_reachability_geometry",
    "load_model_file",
    "load_xy",
    "lock_folder",
    "min_ip_ood_scaling",
    "min_ip_phase_transition",
    "min_ip_rank_law",
    "min_ip_witness_suite_sweep",
    "parse_ranks",
    "plot_accessibility",
    "plot_cell_shares",
    "plot_copy_cliff",
    "plot_corpus_ranks",
    "plot_frontier",
    "plot_head_profile",
    "plot_head_rank_map",
    "plot_head_scores",
    "plot_kernel_rank_trajectory",
    "plot_ladder",
    "plot_min_ip",
    "plot_min_ip_law",
    "plot_sweep",
    "predictability_frontier",
    "rank_sweep",
    "register",
    "reproduce",
    "run_parallel",
    "save_model_file",
    "save_records",
    "score_copies",
    "summarize_min_ip",
    "sweep_data",
    "sweep_grid",
    "write_csv",
    "write_json",
    "write_report",
]
