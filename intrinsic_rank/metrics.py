"""Task metrics usable as scikit-learn scorers (numpy and scikit-learn only).

``exact_sequence_error`` is the Min-IP paper's error: the fraction of
sequences whose rounded prediction is wrong at any position or output.
"""

import numpy as np
from sklearn.metrics import make_scorer

__all__ = ["exact_sequence_error", "exact_sequence_scorer"]


def exact_sequence_error(y_true, y_pred):
    """Fraction of sequences not solved exactly (after rounding the predictions).

    A sequence counts as solved when every one of its targets equals the rounded
    prediction, which is the right notion for integer-valued targets such as
    Min-IP's minimum inner products.

    Parameters
    ----------
    y_true : array-like of shape (n,) or (n, ...)
        Integer-valued targets, one row per sequence.
    y_pred : array-like of the same shape
        Real-valued predictions.

    Returns
    -------
    error : float
        In ``[0, 1]``.

    Examples
    --------
    >>> exact_sequence_error([[1, 2], [0, 3]], [[1.2, 1.9], [0.4, 2.4]])
    0.5
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"y_true and y_pred have different shapes: {y_true.shape} and {y_pred.shape}"
        )
    if y_true.size == 0:
        raise ValueError("y_true is empty")
    wrong = np.rint(y_pred) != y_true
    return float(np.mean(wrong.reshape(len(y_true), -1).any(axis=1)))


exact_sequence_scorer = make_scorer(exact_sequence_error, greater_is_better=False)
"""Scorer for ``GridSearchCV(scoring=...)`` and ``cross_val_score``: the negated
:func:`exact_sequence_error` (greater is better)."""
