"""scikit-learn estimators wrapping torch attention students trained through skorch."""

from ._attention_rank import AttentionRankEstimator
from ._energy_rank import EnergyEffectiveRank
from ._errors import TrainingDivergedError
from ._reachability import CrammingNet, ReachabilityEstimator

__all__ = [
    "AttentionRankEstimator",
    "EnergyEffectiveRank",
    "ReachabilityEstimator",
    "TrainingDivergedError",
]
