"""The experiments' runner: registry, reproduce, output, progress, arguments, parallel.

Infrastructure every paper's experiments share, and no experiment itself: this
package imports no paper package (import-linter checks it). A paper's module
builds an :class:`Experiment` from its run, tables, plot, verdicts and options;
:mod:`intrinsic_rank.experiments` registers them in report order, and the
command line and :func:`reproduce` read them from :data:`EXPERIMENTS`.

* registry and verdicts (``_registry``): :class:`Experiment`, :class:`Verdict`,
  :func:`register`, :data:`EXPERIMENTS` and the small helpers of verdict text;
* the reproduce runner and its report (``_reproduce``);
* output (``_output``, ``_tables``, ``_figures``): atomic JSON and CSV files, the folder
  lock, the printed and Markdown tables, the figures;
* progress (``_progress``): one status-line and bar convention for long runs;
* argument types (``_arguments``): rank grids, lengths, precisions;
* parallel tasks through joblib (``_parallel``): :func:`run_parallel`.
"""

from ._arguments import (
    MAX_EPOCHS,
    MAX_GRID_SIZE,
    add_refused_data,
    bounded_float,
    bounded_int,
    parse_lengths,
    parse_precision,
    parse_ranks,
    refuse_data,
)
from ._figures import pyplot, save_figure, write_figure
from ._output import (
    OutputStage,
    atomic_file,
    check_output_file,
    check_output_folder,
    check_outputs_apart,
    command_files,
    jsonable,
    lock_folder,
    output_stage,
    read_json,
    save_records,
    write_csv,
    write_json,
    write_text,
)
from ._parallel import run_parallel
from ._tables import MISSING, format_column, format_table, markdown_table, markdown_text
from ._progress import StatusLines, Steps, progress_steps, silence_third_party_bars
from ._registry import (
    EXPERIMENTS,
    NOT_COMPARABLE,
    VERDICTS,
    Experiment,
    Verdict,
    get_experiment,
    grade,
    is_finite,
    number_text,
    one_plot,
    register,
    save_plot,
)
from ._reproduce import reproduce, write_report

__all__ = [
    "EXPERIMENTS",
    "Experiment",
    "MAX_EPOCHS",
    "MAX_GRID_SIZE",
    "MISSING",
    "NOT_COMPARABLE",
    "OutputStage",
    "StatusLines",
    "Steps",
    "VERDICTS",
    "Verdict",
    "add_refused_data",
    "atomic_file",
    "bounded_float",
    "bounded_int",
    "check_output_file",
    "check_output_folder",
    "check_outputs_apart",
    "command_files",
    "format_column",
    "format_table",
    "get_experiment",
    "grade",
    "is_finite",
    "jsonable",
    "lock_folder",
    "markdown_table",
    "markdown_text",
    "number_text",
    "one_plot",
    "output_stage",
    "parse_lengths",
    "parse_precision",
    "parse_ranks",
    "pyplot",
    "read_json",
    "refuse_data",
    "register",
    "reproduce",
    "run_parallel",
    "save_figure",
    "save_plot",
    "save_records",
    "silence_third_party_bars",
    "progress_steps",
    "write_csv",
    "write_figure",
    "write_json",
    "write_report",
    "write_text",
]
