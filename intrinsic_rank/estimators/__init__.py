"""scikit-learn estimators wrapping torch attention students trained through skorch,
the transformer that standardises their sequence inputs, and fitted estimators saved to
files and loaded back."""

from ._attention_rank import AttentionRankEstimator
from ._energy_rank import EnergyEffectiveRank
from ._errors import TrainingDivergedError
from ._persistence import (
    MODEL_FORMAT,
    ModelVersionWarning,
    load_model_file,
    load_xy,
    save_model_file,
)
from ._reachability import CrammingNet, ReachabilityEstimator
from ._selection import adaptive_rank_search, refinement_ranks, select_rank
from ._sequence_scaler import SequenceScaler

__all__ = [
    "AttentionRankEstimator",
    "EnergyEffectiveRank",
    "ModelVersionWarning",
    "ReachabilityEstimator",
    "SequenceScaler",
    "TrainingDivergedError",
    "adaptive_rank_search",
    "load_model_file",
    "load_xy",
    "refinement_ranks",
    "save_model_file",
    "select_rank",
]
