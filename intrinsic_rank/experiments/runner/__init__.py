"""The experiments' runner: what every paper's experiments share, and no experiment itself.

This package imports no paper package (import-linter checks it). A paper's
``__init__`` declares each of its experiments as an :class:`Experiment` -- its
words, its :class:`Option` list, its quick and full settings, and the module
that holds its work -- and :mod:`intrinsic_rank.experiments` registers them in
report order; the command line and :func:`reproduce` read them from
:data:`EXPERIMENTS`.

The public names below are the runner's API for the papers' packages and for
users: the registry and its declarations, the option types, the verdict
helpers, the records and figures an experiment writes, progress, parallel
tasks and the reproduce runner. Everything else (the output stage that renames
a run's files in together, the companion-file list, the status lines, the
Markdown report's table helpers) is private to the runner's modules:

* ``_registry``: :class:`Experiment`, :class:`Verdict`, :func:`register`, and the
  small helpers of verdict text;
* ``_arguments``: :class:`Option` and the option types;
* ``_shared_options``: the options several experiments take, each declared once
  (:func:`shared_option`), and the flags every command takes (:data:`COMMON_FLAGS`);
* ``_registry_checks``: what :func:`register` refuses, read from a declaration and
  its module's source without importing it;
* ``_reproduce``: the reproduce runner and its report;
* ``_output``, ``_tables``, ``_figures``: atomic JSON and CSV files, the folder lock,
  the printed tables and the one text of a missing value, the figures;
* ``_stage``: the output stage that renames a run's files in together, and the
  checks that no output overwrites an input or another output;
* ``_geometry_text``: the reachability geometry's words (the labels, rows and
  not-applicable notes that ``reach``, ``lm-geometry`` and ``profile`` print);
* ``_progress``: one status-line and bar convention for long runs;
* ``_parallel``: parallel tasks through joblib, :func:`run_parallel`.

Only ``_registry``, ``_registry_checks``, ``_arguments`` and ``_shared_options`` (the
standard library only) load with the package; the others load on first use of one of
their names, so that declaring an experiment and building ``--help`` import no numpy or
torch.
"""

from ..._lazy import lazy_names

from ._arguments import (
    MAX_EPOCHS,
    CommandParser,
    Option,
    bounded_float,
    bounded_int,
    parse_lengths,
    parse_precision,
    parse_ranks,
)
from ._registry import (
    EXPERIMENTS,
    NOT_COMPARABLE,
    VERDICTS,
    Experiment,
    Verdict,
    get_experiment,
    grade,
    is_finite,
    one_plot,
    register,
    save_plot,
)
from ._shared_options import (
    COMMON_FLAGS,
    DEFAULT_JOBS,
    JOBS_RULE,
    MAX_JOBS,
    SHARED_OPTIONS,
    refused_data,
    shared_option,
)

_LAZY = {
    "_output": ("atomic_file", "check_output_folder", "jsonable", "lock_folder", "save_records",
                "write_csv", "write_json"),
    "_tables": ("MISSING", "format_table", "number_text"),
    "_geometry_text": ("GEOMETRY_BOUND_COLUMNS", "geometry_record", "label_bound_rows",
                       "refinement_rows"),
    "_figures": ("pyplot", "save_figure"),
    "_progress": ("progress_steps",),
    "_parallel": ("run_parallel",),
    "_reproduce": ("reproduce", "write_report"),
}
"""The names of the modules that load on first use (numpy, matplotlib, joblib, torch)."""

_HOME, __getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = sorted([
    "COMMON_FLAGS",
    "DEFAULT_JOBS",
    "JOBS_RULE",
    "MAX_JOBS",
    "SHARED_OPTIONS",
    "shared_option",
    "EXPERIMENTS",
    "CommandParser",
    "Experiment",
    "MAX_EPOCHS",
    "NOT_COMPARABLE",
    "Option",
    "VERDICTS",
    "Verdict",
    "bounded_float",
    "bounded_int",
    "get_experiment",
    "grade",
    "is_finite",
    "one_plot",
    "parse_lengths",
    "parse_precision",
    "parse_ranks",
    "refused_data",
    "register",
    "save_plot",
    *_HOME,
])

