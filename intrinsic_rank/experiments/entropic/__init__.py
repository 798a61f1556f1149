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
  complexity; ``head-ranks`` (``_head_ranks``, its measurements in
  ``_real_heads``): the attention-native rank
  ``r*_attn`` of a causal LM's heads, by distillation under each head's own
  positional scheme, with a planted-rank test.
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
from ._real_heads import HEAD_TYPES, head_rank_profiles, plant_query, select_heads
from ._head_ranks import (
    HEAD_RANK_COLUMNS,
    head_rank_findings,
    plot_head_ranks,
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
    "HEAD_RANKS",
    "HEAD_RANK_COLUMNS",
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
    "head_rank_findings",
    "head_rank_profiles",
    "plant_query",
    "plot_head_ranks",
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
