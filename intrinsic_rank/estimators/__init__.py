"""scikit-learn estimators wrapping torch attention students trained through skorch,
and the transformer that standardises their sequence inputs."""

from ._attention_rank import AttentionRankEstimator
from ._energy_rank import EnergyEffectiveRank
from ._errors import TrainingDivergedError
from ._reachability import CrammingNet, ReachabilityEstimator
from ._selection import adaptive_rank_search, refinement_ranks, select_rank
from ._sequence_scaler import SequenceScaler

__all__ = [
    "AttentionRankEstimator",
    "EnergyEffectiveRank",
    "ReachabilityEstimator",
    "SequenceScaler",
    "TrainingDivergedError",
    "adaptive_rank_search",
    "refinement_ranks",
    "select_rank",
]
