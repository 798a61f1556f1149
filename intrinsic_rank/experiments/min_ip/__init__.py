"""Three tokens force exponential feature rank: the Min-IP experiments.

* the phase transition and out-of-distribution scaling ``min-ip``
  (``_transition``, its command and figure in ``_transition_experiment``): kernel students of growing rank on two and three tokens;
* the rank law ``min-ip-law`` (``_law``): the smallest feature rank that solves
  Min-IP on three m-bit tokens, per m and feature map.
"""

from ._transition import (
    OOD_SETTINGS,
    min_ip_ood_scaling,
    min_ip_phase_transition,
    min_ip_witness_suite_sweep,
    summarize_min_ip,
)
from ._transition_experiment import (
    MIN_IP_COLUMNS,
    MIN_IP_OOD_COLUMNS,
    MIN_IP_OOD_TRANSITION_COLUMNS,
    plot_min_ip,
    EXPERIMENT as MIN_IP,
)
from ._law import (
    fit_rank_law,
    min_ip_rank_law,
    plot_min_ip_law,
    EXPERIMENT as MIN_IP_LAW,
)

__all__ = [
    "MIN_IP",
    "MIN_IP_COLUMNS",
    "MIN_IP_LAW",
    "MIN_IP_OOD_COLUMNS",
    "MIN_IP_OOD_TRANSITION_COLUMNS",
    "OOD_SETTINGS",
    "fit_rank_law",
    "min_ip_ood_scaling",
    "min_ip_phase_transition",
    "min_ip_rank_law",
    "min_ip_witness_suite_sweep",
    "plot_min_ip",
    "plot_min_ip_law",
    "summarize_min_ip",
]
