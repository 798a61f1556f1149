"""scikit-learn estimators wrapping torch attention students trained through skorch."""

from ._attention_rank import AttentionRankEstimator
from ._base import TrainingDivergedError
from ._energy_rank import EnergyEffectiveRank

__all__ = ["AttentionRankEstimator", "EnergyEffectiveRank", "TrainingDivergedError"]
