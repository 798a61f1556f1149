"""Scoring of sequence predictions, and the scikit-learn tags of the sequence estimators."""

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.metrics import r2_score

__all__ = ["SequenceRegressorMixin", "sequence_r2"]


def sequence_r2(Y_true, Y_pred, sample_weight=None):
    """R^2 of per-token or per-sequence predictions, averaged over output entries.

    ``Y`` is flattened to ``(n, -1)`` and scored with
    :func:`sklearn.metrics.r2_score` (uniform average over columns), so 1-D and
    2-D targets score exactly as scikit-learn scores them and 3-D targets get the
    natural extension.

    Parameters
    ----------
    Y_true, Y_pred : array-like of shape (n, ...)
    sample_weight : array-like of shape (n,), optional

    Returns
    -------
    score : float

    Examples
    --------
    >>> import numpy as np
    >>> Y = np.arange(12.0).reshape(3, 2, 2)
    >>> float(sequence_r2(Y, Y)), float(sequence_r2(Y, np.zeros_like(Y)) < 0)
    (1.0, 1.0)
    """
    Y_true = np.asarray(Y_true, dtype=np.float64)
    n = Y_true.shape[0]
    return r2_score(
        Y_true.reshape(n, -1),
        np.asarray(Y_pred, dtype=np.float64).reshape(n, -1),
        sample_weight=sample_weight,
    )


class SequenceRegressorMixin(RegressorMixin):
    """Tags and ``score`` shared by the sequence estimators.

    The estimators accept 3-D sequence input and multi-output targets; attention
    without positions over scalar tokens is permutation equivariant, so it is
    not meant to be a good generic tabular regressor (``poor_score``).
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = True
        return tags

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of ``predict``.

        Unlike skorch's default, 3-D targets are accepted: ``Y`` is flattened to
        ``(n, L * d_out)`` and scored with :func:`sklearn.metrics.r2_score`.

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)
        y : array-like, shaped like the targets given to ``fit``
        sample_weight : array-like of shape (n,), optional

        Returns
        -------
        score : float
        """
        Y_pred = self.predict(X)
        Y_true = np.asarray(y)
        shape = Y_true.shape
        if len(shape) == 0:
            raise ValueError(
                f"y must be an array of targets shaped like predict(X), {Y_pred.shape}; "
                f"got {type(y).__name__}"
            )
        n = Y_pred.shape[0]
        per_sample = int(np.prod(Y_pred.shape[1:], dtype=np.int64))
        size = int(np.prod(shape, dtype=np.int64))
        if shape[0] != n or size != n * per_sample:
            raise ValueError(
                f"y has shape {tuple(shape)}, but predict(X) gives {Y_pred.shape}: y must "
                "be shaped like the targets given to fit, one row per sequence of X"
            )
        return sequence_r2(Y_true, Y_pred, sample_weight=sample_weight)
