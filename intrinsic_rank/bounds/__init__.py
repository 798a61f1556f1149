"""Closed-form theory (numpy only): deficiency floors of the Entropic Bound,
Min-IP feature-rank bounds and reachable-sequence counts.

One module per paper, every name re-exported here:

* ``_entropic`` -- "The Entropic Bound" (Byeong Hoon Yoon, 2026):
  :func:`tail_energy`, :func:`fixed_operator_deficiency`;
* ``_min_ip`` -- Min-IP and nonnegative kernel attention ("Three tokens force
  exponential feature rank in nonnegative kernel attention", Vicente Opazo, 2026):
  :func:`transcript_bound`, :func:`approximate_identity_rank_bound`,
  :func:`witness_feature_rank_bound` (its code machinery is
  :mod:`intrinsic_rank.codes`);
* ``_reachability`` -- reachable output sequences ("How many different outputs can
  a Transformer generate?", Meyer, Michelessa, Chaux and Tan, ICML 2026, the
  reachability paper):
  :func:`precision_from_dtype`, :func:`reachable_log_count_bound`,
  :func:`reachable_slope_bound`, :func:`box_log_count_bound`,
  :func:`box_slope_bound`, :func:`hidden_state_geometry`;
* ``_cone``, ``_cells`` and ``_precision`` -- the reachability paper's refinements:
  the cone (:func:`min_pairwise_cosine`, :func:`cone_half_angle`,
  :func:`cone_log_fraction`, :func:`cone_log_count_bound`,
  :func:`cone_slope_bound`, :data:`CONE_CONVENTIONS`), non-uniform decoder
  cells (:func:`sample_box`, :func:`sample_ball`, :func:`argmax_cells`,
  :func:`nearest_row_cells`, :func:`cell_proportions`, :func:`cell_decay`,
  :func:`cell_slope_bound`) and the precision conventions
  (:func:`precision_for`, :data:`PRECISION_CONVENTIONS`).

Nothing here imports torch (numpy, scipy and scikit-learn only), so the bounds
can be evaluated without it.
"""

from ._cells import (
    argmax_cells,
    cell_decay,
    cell_proportions,
    cell_slope_bound,
    nearest_row_cells,
    sample_ball,
    sample_box,
)
from ._cone import (
    CONE_CONVENTIONS,
    cone_half_angle,
    cone_log_count_bound,
    cone_log_fraction,
    cone_slope_bound,
    min_pairwise_cosine,
)
from ._entropic import fixed_operator_deficiency, tail_energy
from ._min_ip import (
    approximate_identity_rank_bound,
    transcript_bound,
    witness_feature_rank_bound,
)
from ._precision import PRECISION_CONVENTIONS, precision_for
from ._reachability import (
    box_log_count_bound,
    box_slope_bound,
    hidden_state_geometry,
    precision_from_dtype,
    reachable_log_count_bound,
    reachable_slope_bound,
)

__all__ = [
    "tail_energy",
    "fixed_operator_deficiency",
    "transcript_bound",
    "approximate_identity_rank_bound",
    "witness_feature_rank_bound",
    "precision_from_dtype",
    "reachable_log_count_bound",
    "reachable_slope_bound",
    "box_log_count_bound",
    "box_slope_bound",
    "hidden_state_geometry",
    "PRECISION_CONVENTIONS",
    "precision_for",
    "CONE_CONVENTIONS",
    "min_pairwise_cosine",
    "cone_half_angle",
    "cone_log_fraction",
    "cone_log_count_bound",
    "cone_slope_bound",
    "sample_box",
    "sample_ball",
    "argmax_cells",
    "nearest_row_cells",
    "cell_proportions",
    "cell_decay",
    "cell_slope_bound",
]
