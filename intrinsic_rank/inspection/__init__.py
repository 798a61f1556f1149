"""Measuring a model: head profiles and scores, hidden-state geometry, decoder cells.

This room sits between :mod:`intrinsic_rank.nn` (the torch modules and model
loading it measures) and the estimators and experiments that use its numbers:

* per-head rank profiles (``_head_profiles``): :func:`profile_heads` measures
  every head's static query-key kernel and realised attention, sinks and
  locality on a batch of inputs;
* head-pattern scores (``_head_scores``): previous-token, duplicate-token and
  induction scores of attention maps, as TransformerLens's head detector
  defines them, and this package's conditional share; the field's induction
  test (``_repeated_tokens``): BOS, random tokens and the same tokens again;
* one head as a function (``_head_io``): :func:`head_facts` (its weights,
  positional scheme, scale and mask), :func:`head_activations` (its input
  ``X`` and output ``Y`` on given inputs, by forward hooks) and
  :func:`head_output` (``Y`` recomputed from ``X``); the inputs of four corpora
  (``_head_inputs``): :func:`corpus_token_ids`, split into training and held-out
  parts, and :func:`corpus_record`, what each corpus is; the head's query
  truncated on its own inputs and the precision of its weights
  (``_head_truncation``): :func:`query_basis`, :func:`truncation_risks`,
  :func:`precision_floor`;
* heads' query projections imposed on the model (``_impose``):
  :func:`imposed_queries` replaces them inside the LM and restores them when
  the block ends, and :func:`lm_loss` is the LM's next-token loss, to judge an
  imposed rank by what the model does;
* where a head's query error enters the model (``_query_metric``):
  :func:`query_output_metric`, the metric that turns a query change into the
  change of the head's output through the output projection, the realised
  queries cut to a rank in it (:func:`metric_query_basis`,
  :func:`metric_truncated_query`) and the first-order output error of every
  rank as a share of the layer's output (:func:`output_error_curve`);
* hidden-state geometry (``_geometry``): :func:`reachability_geometry`, the
  radius, box and cone of a model's final hidden states and the reachability
  bounds they give at each precision convention, from :func:`states_geometry`,
  which :class:`~intrinsic_rank.ReachabilityEstimator` uses as well;
* decoder cells (``_decoder_cells``): :func:`decoder_cell_proportions`, each
  token's share of a region of hidden states under the model's real head, by
  Monte Carlo on the device.
"""

from ._decoder_cells import check_decoder, decoder_cell_proportions
from ._geometry import (
    BOUND_NAMES,
    CONVENTION_NAMES,
    bound_rows,
    bound_table_row,
    cell_facts,
    check_precision,
    reachability_geometry,
    slope_ratio,
    states_geometry,
)
from ._head_inputs import TOKEN_CORPORA, corpus_record, corpus_token_ids
from ._head_io import (
    READ_FAMILIES,
    SELF_CHECK_TOLERANCES,
    SELF_CHECK_WINDOWS,
    HeadData,
    HeadFacts,
    head_activations,
    head_facts,
    parse_head,
)
from ._head_recompute import head_attention, head_output
from ._head_truncation import (
    QUANTISATION_BLOCK,
    QUANTISATION_LEVELS,
    precision_floor,
    quantisation_noise,
    query_basis,
    relative_error,
    truncated_head,
    truncation_risks,
)
from ._impose import imposed_queries, lm_loss
from ._calibration import (
    HeadBasis,
    model_query_bases,
    query_edits,
    query_loss_gradients,
    sequential_query_bases,
)
from ._healing import HealResult, heal_queries
from ._low_rank_model import FACTORS_FILE, RANKS_FILE, load_query_factors, save_low_rank_model
from ._query_metric import (
    MetricBasis,
    metric_query_basis,
    metric_truncated_query,
    output_error_curve,
    query_output_metric,
)
from ._head_profiles import PROFILE_COLUMNS, profile_heads, save_profile_csv
from ._head_scores import HEAD_PATTERNS, SCORE_MEASURES, head_pattern_masks, head_pattern_scores
from ._repeated_tokens import ordinary_token_ids

__all__ = [
    "BOUND_NAMES",
    "CONVENTION_NAMES",
    "FACTORS_FILE",
    "HEAD_PATTERNS",
    "HeadBasis",
    "HeadData",
    "HealResult",
    "HeadFacts",
    "MetricBasis",
    "PROFILE_COLUMNS",
    "QUANTISATION_BLOCK",
    "QUANTISATION_LEVELS",
    "RANKS_FILE",
    "READ_FAMILIES",
    "SELF_CHECK_TOLERANCES",
    "SELF_CHECK_WINDOWS",
    "SCORE_MEASURES",
    "TOKEN_CORPORA",
    "bound_rows",
    "bound_table_row",
    "cell_facts",
    "check_decoder",
    "check_precision",
    "corpus_record",
    "corpus_token_ids",
    "decoder_cell_proportions",
    "head_activations",
    "head_attention",
    "head_facts",
    "heal_queries",
    "head_output",
    "imposed_queries",
    "lm_loss",
    "load_query_factors",
    "metric_query_basis",
    "metric_truncated_query",
    "model_query_bases",
    "output_error_curve",
    "parse_head",
    "precision_floor",
    "quantisation_noise",
    "query_basis",
    "query_edits",
    "query_loss_gradients",
    "query_output_metric",
    "relative_error",
    "truncated_head",
    "truncation_risks",
    "head_pattern_masks",
    "head_pattern_scores",
    "ordinary_token_ids",
    "profile_heads",
    "reachability_geometry",
    "save_low_rank_model",
    "save_profile_csv",
    "sequential_query_bases",
    "slope_ratio",
    "states_geometry",
]
