"""How many outputs can a Transformer generate: reachability and copying.

* accessibility curves and the reachable-length slope ``reach`` (``_reach``);
* the copy-length cliff ``copy`` (``_copy``);
* a pretrained LM's geometry and decoder cells ``lm-geometry`` (``_lm_geometry``);
* the curve fits both use (``_curves``): n50, slopes, cliffs, tail decay.
"""

from ._reach import (
    AUTO_LENGTHS,
    BOUND_COLUMNS,
    BOUND_TABLE_COLUMNS,
    N50_COLUMNS,
    REACH_COLUMNS,
    TAIL_COLUMNS,
    accessibility_curves,
    plot_accessibility,
    EXPERIMENT as REACH,
)
from ._copy import (
    CLIFF_COLUMNS,
    COPY_COLUMNS,
    COPY_SETTINGS,
    copy_length_cliff,
    default_copy_lengths,
    greedy_copy,
    plot_copy_cliff,
    score_copies,
    EXPERIMENT as COPY,
)
from ._lm_geometry import (
    LM_GEOMETRY_TOKEN_COLUMNS,
    cell_share_facts,
    equal_cell_null,
    lm_reachability_geometry,
    plot_cell_shares,
    EXPERIMENT as LM_GEOMETRY,
)
from ._curves import (
    fit_cliff,
    fit_logistic_midpoint,
    fit_n50,
    fit_slope,
    fit_tail_decay,
    fit_tail_decays,
)

__all__ = [
    "AUTO_LENGTHS",
    "BOUND_COLUMNS",
    "BOUND_TABLE_COLUMNS",
    "CLIFF_COLUMNS",
    "COPY",
    "COPY_COLUMNS",
    "COPY_SETTINGS",
    "LM_GEOMETRY",
    "LM_GEOMETRY_TOKEN_COLUMNS",
    "N50_COLUMNS",
    "REACH",
    "REACH_COLUMNS",
    "TAIL_COLUMNS",
    "accessibility_curves",
    "cell_share_facts",
    "equal_cell_null",
    "copy_length_cliff",
    "default_copy_lengths",
    "fit_cliff",
    "fit_logistic_midpoint",
    "fit_n50",
    "fit_slope",
    "fit_tail_decay",
    "fit_tail_decays",
    "greedy_copy",
    "lm_reachability_geometry",
    "plot_accessibility",
    "plot_cell_shares",
    "plot_copy_cliff",
    "score_copies",
]
