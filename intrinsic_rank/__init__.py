"""intrinsic_rank: how much capacity an attention model needs for a task.

The public API is the estimators and the sub-modules:

* :class:`AttentionRankEstimator` -- students of a given query-key rank, rank
  sweeps and the attention-native intrinsic rank ``r*``;
* :class:`EnergyEffectiveRank` -- ``r*`` read off the spectrum of a recovered
  (trained) or data-fitted (training-free) token mixer;
* :class:`ReachabilityEstimator` -- which target sequences a frozen causal LM
  can be prompted to produce, and the bound from its hidden-state geometry;
* :mod:`intrinsic_rank.datasets` -- seeded teacher tasks with known ground truth;
* :mod:`intrinsic_rank.spectral` -- rank measures (numpy only);
* :mod:`intrinsic_rank.bounds` -- closed-form theory (numpy only);
* :mod:`intrinsic_rank.metrics` -- the exact-sequence error and its scorer;
* :mod:`intrinsic_rank.nn` -- the torch students;
* :mod:`intrinsic_rank.experiments` -- reproductions returning records and plots.
"""

from . import bounds, datasets, metrics, spectral
from .estimators import (
    AttentionRankEstimator,
    EnergyEffectiveRank,
    ReachabilityEstimator,
    TrainingDivergedError,
)

__version__ = "0.1.0"

__all__ = [
    "AttentionRankEstimator",
    "EnergyEffectiveRank",
    "ReachabilityEstimator",
    "TrainingDivergedError",
    "bounds",
    "datasets",
    "metrics",
    "spectral",
    "__version__",
]
