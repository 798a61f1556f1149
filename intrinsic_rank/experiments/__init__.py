"""Reproductions of the three papers: pure functions returning records, plus plots.

One subpackage per paper, each importing only the runner and the rooms below
(import-linter checks both, and that the papers never import each other):

* ``experiments.entropic`` -- "The Entropic Bound" (Byeong Hoon Yoon, 2026):
  ``sweep``, ``ladder``, ``frontier`` and the appendix on real models,
  ``profile``, ``corpus-ranks`` and ``head-ranks``;
* ``experiments.min_ip`` -- "Three tokens force exponential feature rank in
  nonnegative kernel attention" (Vicente Opazo, 2026): ``min-ip``,
  ``min-ip-law``;
* ``experiments.reachability`` -- "How many different outputs can a Transformer
  generate?" (Meyer, Michelessa, Chaux and Tan, ICML 2026, arXiv 2605.22223):
  ``reach``, ``copy``, ``lm-geometry``;
* ``experiments.runner`` -- what they share: the registry,
  the reproduce runner, output, progress, argument types and parallel tasks.

Each experiment is one :class:`Experiment`, declared in its paper's
``__init__`` (its words, its :class:`Option` list, its quick and full settings,
and the module that holds its run, tables, plots and verdicts);
:data:`REPORT_ORDER` below gathers them, paper by paper, in the order of the
report and of ``intrinsic-rank --help``, and registers them in
:data:`EXPERIMENTS`, which the command line and :func:`reproduce` read. The
measuring functions these experiments use
(:func:`~intrinsic_rank.inspection.profile_heads`,
:func:`~intrinsic_rank.inspection.head_pattern_scores`,
:func:`~intrinsic_rank.inspection.reachability_geometry`) live in
:mod:`intrinsic_rank.inspection` and are re-exported here.

Importing this package imports nothing heavy: the declarations are plain data,
and every function, class and constant of the papers, the runner and
:mod:`intrinsic_rank.inspection` loads on first use (Scientific Python's SPEC 1),
so the command line builds its parser, and every ``--help``, without torch.
"""

from .._lazy import lazy_names

from . import entropic, min_ip, reachability, runner
from .runner import (
    EXPERIMENTS,
    NOT_COMPARABLE,
    VERDICTS,
    Experiment,
    Option,
    Verdict,
    parse_ranks,
    register,
)

REPORT_ORDER = (*entropic.REPORT, *min_ip.REPORT, *reachability.REPORT, *entropic.APPENDIX)
"""Every experiment of the three papers, in report order (the order of ``--help`` too): each
paper's experiments in the paper's own order (its ``REPORT``), then the Entropic Bound's
appendix on real language models."""

for _experiment in REPORT_ORDER:
    register(_experiment)
del _experiment

_LAZY = {
    "entropic": (
        "CORPORA", "CORPUS_RANK_COLUMNS", "FRONTIER_TEACHERS", "RUNGS", "SWEEP_GRID_KEYS",
        "ModelVersionWarning", "corpus_inputs", "corpus_rank_profiles", "fit_seeds",
        "head_rank_findings", "head_rank_map", "impose_ranks", "interpolation_ladder",
        "measure_head", "plot_head_rank_curves", "plot_impose", "MODEL_ALLOCATIONS",
        "budget_allocation", "model_rank", "plot_model_rank", "plot_model_rank_currency",
        "plot_model_rank_healing", "plot_model_rank_maps",
        "kernel_rank_trajectory", "load_model_file", "load_xy", "plot_corpus_ranks",
        "plot_frontier", "plot_head_profile", "plot_head_rank_map", "plot_head_scores",
        "plot_kernel_rank_trajectory", "plot_ladder", "plot_sweep",
        "predictability_frontier", "rank_sweep", "save_model_file", "sweep_data",
        "sweep_grid",
    ),
    "min_ip": (
        "OOD_SETTINGS", "fit_rank_law", "min_ip_ood_scaling", "min_ip_phase_transition",
        "min_ip_rank_law", "min_ip_witness_suite_sweep", "plot_min_ip", "plot_min_ip_law",
        "summarize_min_ip",
    ),
    "reachability": (
        "AUTO_LENGTHS", "COPY_SETTINGS", "LM_GEOMETRY_TOKEN_COLUMNS",
        "accessibility_curves", "cell_share_facts", "equal_cell_null", "copy_length_cliff",
        "default_copy_lengths", "fit_cliff", "fit_logistic_midpoint", "fit_n50",
        "fit_slope", "fit_tail_decay", "fit_tail_decays", "greedy_copy",
        "lm_reachability_geometry", "plot_accessibility", "plot_cell_shares",
        "plot_copy_cliff", "score_copies",
    ),
    # what users call; the runner's internals (the folder lock, the atomic JSON and CSV
    # writers, the output checks) stay in experiments.runner, for the papers' packages
    "runner": ("format_table", "reproduce", "run_parallel", "save_records", "write_report"),
    # the measuring functions of intrinsic_rank.inspection stay importable from here,
    # but are documented (and listed in __all__) where they live
    "..inspection": (
        "HEAD_PATTERNS", "PROFILE_COLUMNS", "head_pattern_masks", "head_pattern_scores",
        "profile_heads", "reachability_geometry", "save_profile_csv",
    ),
}
"""Where each name that loads on first use lives."""

_HOME, __getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "AUTO_LENGTHS",
    "COPY_SETTINGS",
    "CORPORA",
    "CORPUS_RANK_COLUMNS",
    "EXPERIMENTS",
    "Experiment",
    "FRONTIER_TEACHERS",
    "LM_GEOMETRY_TOKEN_COLUMNS",
    "MODEL_ALLOCATIONS",
    "ModelVersionWarning",
    "NOT_COMPARABLE",
    "OOD_SETTINGS",
    "Option",
    "REPORT_ORDER",
    "RUNGS",
    "SWEEP_GRID_KEYS",
    "VERDICTS",
    "Verdict",
    "accessibility_curves",
    "budget_allocation",
    "cell_share_facts",
    "copy_length_cliff",
    "corpus_inputs",
    "corpus_rank_profiles",
    "default_copy_lengths",
    "equal_cell_null",
    "fit_cliff",
    "fit_logistic_midpoint",
    "fit_n50",
    "fit_rank_law",
    "fit_seeds",
    "fit_slope",
    "fit_tail_decay",
    "fit_tail_decays",
    "format_table",
    "greedy_copy",
    "head_rank_findings",
    "head_rank_map",
    "impose_ranks",
    "interpolation_ladder",
    "kernel_rank_trajectory",
    "lm_reachability_geometry",
    "load_model_file",
    "load_xy",
    "measure_head",
    "min_ip_ood_scaling",
    "min_ip_phase_transition",
    "min_ip_rank_law",
    "min_ip_witness_suite_sweep",
    "model_rank",
    "parse_ranks",
    "plot_accessibility",
    "plot_cell_shares",
    "plot_copy_cliff",
    "plot_corpus_ranks",
    "plot_frontier",
    "plot_head_profile",
    "plot_head_rank_curves",
    "plot_head_rank_map",
    "plot_head_scores",
    "plot_impose",
    "plot_kernel_rank_trajectory",
    "plot_ladder",
    "plot_min_ip",
    "plot_min_ip_law",
    "plot_model_rank",
    "plot_model_rank_currency",
    "plot_model_rank_healing",
    "plot_model_rank_maps",
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
    "write_report",
]

