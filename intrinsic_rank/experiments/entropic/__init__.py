"""The Entropic Bound: the intrinsic rank r* of a task and what limits it.

* the rank sweep ``sweep`` (``_sweep``), on a user's own data (``_data``), data
  files and saved models (``_files``) and grids of sweeps or seeds run in parallel (``_grid``);
* the B0-B3 interpolation ladder ``ladder`` (``_ladder``);
* the predictability frontier ``frontier`` (``_frontier``): how well r* can be
  read from data before training;
* the appendix on real models ``profile`` (``_profile``, its heat maps in ``_profile_plots``): per-head static and
  realised ranks of pretrained models, and the kernel-rank trajectory of a
  small causal LM along its training (``_trajectory``), and ``corpus-ranks``
  (``_corpus_ranks``): one causal LM's per-head ranks on corpora of different
  complexity; ``head-ranks`` (``_head_ranks``): the map of the attention-native
  rank ``r*_attn`` over a causal LM's heads (``_real_heads``), each head measured
  by its training-free curve and distillation (``_head_measure``), and the
  measured ranks imposed on the model and judged by its loss (``_impose_ranks``).
"""

from ._sweep import (
    plot_sweep,
    rank_sweep,
    EXPERIMENT as SWEEP,
)
from ._data import DEFAULT_MAX_RANK, sweep_data
from ._files import (
    MODEL_FORMAT,
    ModelVersionWarning,
    load_model_file,
    load_xy,
    save_model_file,
)
from ._grid import (
    SWEEP_GRID_KEYS,
    fit_seeds,
    sweep_grid,
)
from ._ladder import (
    RUNGS,
    interpolation_ladder,
    plot_ladder,
    EXPERIMENT as LADDER,
)
from ._frontier import (
    FRONTIER_TEACHERS,
    plot_frontier,
    predictability_frontier,
    EXPERIMENT as FRONTIER,
)
from ._profile import (
    PROFILE_SUMMARY_COLUMNS,
    EXPERIMENT as PROFILE,
)
from ._profile_plots import plot_head_profile, plot_head_scores
from ._corpus_ranks import (
    CORPORA,
    CORPUS_RANK_COLUMNS,
    corpus_inputs,
    corpus_rank_profiles,
    plot_corpus_ranks,
    EXPERIMENT as CORPUS_RANKS,
)
from ._head_measure import TOLERANCES, measure_head
from ._real_heads import HEAD_TYPES, head_rank_map, plant_query, select_heads
from ._impose_ranks import ALLOCATIONS, impose_ranks
from ._head_ranks import (
    head_rank_findings,
    plot_head_rank_curves,
    plot_head_rank_map,
    plot_impose,
    EXPERIMENT as HEAD_RANKS,
)
from ._trajectory import (
    TRAJECTORY_COLUMNS,
    kernel_rank_trajectory,
    plot_kernel_rank_trajectory,
)

__all__ = [
    "CORPORA",
    "CORPUS_RANKS",
    "ALLOCATIONS",
    "HEAD_RANKS",
    "HEAD_TYPES",
    "CORPUS_RANK_COLUMNS",
    "FRONTIER",
    "FRONTIER_TEACHERS",
    "LADDER",
    "DEFAULT_MAX_RANK",
    "MODEL_FORMAT",
    "ModelVersionWarning",
    "PROFILE",
    "PROFILE_SUMMARY_COLUMNS",
    "RUNGS",
    "SWEEP",
    "SWEEP_GRID_KEYS",
    "TRAJECTORY_COLUMNS",
    "corpus_inputs",
    "TOLERANCES",
    "head_rank_findings",
    "head_rank_map",
    "impose_ranks",
    "measure_head",
    "plant_query",
    "plot_head_rank_curves",
    "plot_head_rank_map",
    "plot_impose",
    "select_heads",
    "corpus_rank_profiles",
    "fit_seeds",
    "interpolation_ladder",
    "kernel_rank_trajectory",
    "load_model_file",
    "load_xy",
    "plot_corpus_ranks",
    "plot_frontier",
    "plot_head_profile",
    "plot_head_scores",
    "plot_kernel_rank_trajectory",
    "plot_ladder",
    "plot_sweep",
    "predictability_frontier",
    "rank_sweep",
    "save_model_file",
    "sweep_data",
    "sweep_grid",
]
