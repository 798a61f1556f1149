"""intrinsic_rank: how much capacity an attention model needs for a task.

It turns three papers into tools: "The Entropic Bound" (Byeong Hoon Yoon, 2026),
"Three tokens force exponential feature rank in nonnegative kernel attention"
(Vicente Opazo, 2026) and "How many different outputs can a Transformer
generate?" (Meyer, Michelessa, Chaux and Tan, ICML 2026, arXiv 2605.22223).

The public API is the estimators and the sub-modules:

* :class:`AttentionRankEstimator` -- students of a given query-key rank, rank
  sweeps and the attention-native intrinsic rank ``r*``;
* :class:`EnergyEffectiveRank` -- ``r*`` read off the spectrum of a recovered
  (trained) or data-fitted (training-free) token mixer;
* :class:`ReachabilityEstimator` -- which target sequences a frozen causal LM
  can be prompted to produce, and the bound from its hidden-state geometry;
* :class:`SequenceScaler` -- standardises sequences ``(n, L, d)`` per token
  feature, for a ``Pipeline`` before the estimators;
* :mod:`intrinsic_rank.datasets` -- seeded teacher tasks with known ground truth;
* :mod:`intrinsic_rank.spectral` -- rank measures (numpy only);
* :mod:`intrinsic_rank.bounds` -- closed-form theory (numpy only);
* :mod:`intrinsic_rank.operator_fit` -- training-free least-squares fits of the
  teachers' token mixers (numpy only);
* :mod:`intrinsic_rank.metrics` -- the exact-sequence error and its scorer;
* :mod:`intrinsic_rank.nn` -- the torch students, causal LMs and model loading;
* :mod:`intrinsic_rank.inspection` -- measuring a model: head profiles and scores,
  hidden-state geometry, decoder cells through a real head;
* :mod:`intrinsic_rank.experiments` -- reproductions returning records and plots.

Every sub-module loads on first use (PEP 562): ``import intrinsic_rank`` imports
nothing heavy, the torch parts (the estimators, :mod:`~intrinsic_rank.nn`,
:mod:`~intrinsic_rank.inspection`, :mod:`~intrinsic_rank.experiments`) load only
when used, and ``import intrinsic_rank.spectral`` works in an environment with
numpy and scipy only.
"""

from ._lazy import lazy_names

from ._version import __version__


# Every sub-module loads on first use, the numpy ones too: ``import intrinsic_rank`` and
# the command line's ``--help`` and ``--version`` then import no numpy, scipy,
# scikit-learn or torch.
_LAZY = {"estimators": ("AttentionRankEstimator", "EnergyEffectiveRank", "ReachabilityEstimator",
                        "SequenceScaler", "TrainingDivergedError")}
_LAZY_MODULES = ("bounds", "datasets", "metrics", "spectral", "codes", "estimators",
                 "experiments", "inspection", "nn", "operator_fit", "cli")

__all__ = [
    "AttentionRankEstimator",
    "EnergyEffectiveRank",
    "ReachabilityEstimator",
    "SequenceScaler",
    "TrainingDivergedError",
    "bounds",
    "datasets",
    "metrics",
    "spectral",
    "__version__",
]


_HOME, __getattr__, __dir__ = lazy_names(__name__, _LAZY, globals(),
                                        submodules=_LAZY_MODULES)
