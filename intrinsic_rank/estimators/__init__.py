"""scikit-learn estimators wrapping torch attention students trained through skorch."""

from ._attention_rank import AttentionRankEstimator
from ._base import TrainingDivergedError

__all__ = ["AttentionRankEstimator", "TrainingDivergedError"]
