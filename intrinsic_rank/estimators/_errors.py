"""The estimators' two training signals: divergence (an error) and an early stop."""

__all__ = ["TrainingDivergedError", "TrainingFinished"]


class TrainingDivergedError(FloatingPointError):
    """Training produced a non-finite loss, or a loss far above where it started.

    Raised by all three estimators (:class:`~intrinsic_rank.AttentionRankEstimator`,
    :class:`~intrinsic_rank.EnergyEffectiveRank` through its student, and
    :class:`~intrinsic_rank.ReachabilityEstimator`); the remedy is a lower
    ``lr`` or ``init_scale``. A subclass of :class:`FloatingPointError`.

    Examples
    --------
    >>> issubclass(TrainingDivergedError, FloatingPointError)
    True
    """


class TrainingFinished(KeyboardInterrupt):
    """Raised by a callback to end training early (skorch's stop signal).

    skorch ends ``fit`` quietly on any :class:`KeyboardInterrupt`; this subclass
    is an intended early stop, every other one a user's interrupt, which
    :class:`~intrinsic_rank.estimators._net.InterruptibleNet` passes on.

    Examples
    --------
    >>> issubclass(TrainingFinished, KeyboardInterrupt)
    True
    """
