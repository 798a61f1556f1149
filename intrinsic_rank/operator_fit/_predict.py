"""Predictions of the fits, and the residuals that their noise thresholds need."""

import numpy as np

from ..datasets import attention_mixer
from ._common import _as_real_array, _chunks

__all__ = ["predict", "predict_linear_lifted"]


def _gram(Xc):
    """``X_n^T X_n`` for a chunk, shape ``(n, d, d)``."""
    # batched matmul: several times faster than einsum's generic path here
    return Xc.transpose(0, 2, 1) @ Xc


def _upper_pairs(d):
    return np.triu_indices(d)


def predict_linear_lifted(X, T):
    r"""Predictions of a lifted linear-attention fit.

    Parameters
    ----------
    X : array-like of shape (n_samples, L, d)
        Token sequences.
    T : array-like of shape (d, d (d + 1) / 2, d_out)
        The ``lifted_coef`` of :func:`fit_linear_kernel` with an unknown value
        map.

    Returns
    -------
    Y_pred : ndarray of shape (n_samples, L, d_out)
        :math:`\hat Y_{nie} = \sum_{a,\, b \le c} T_{a,(bc),e}\, X_{nia} M_{n,bc}`
        with ``M_n = X_n^T X_n / L`` and the pairs ``b <= c`` in the row-major
        order of :func:`numpy.triu_indices`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.ones((2, 3, 2))
    >>> T = np.zeros((2, 3, 1)); T[0, 0, 0] = 1.0   # K_00 V_00 = 1
    >>> predict_linear_lifted(X, T)[0, :, 0]
    array([1., 1., 1.])
    """
    X = _as_real_array(X, "X", 3, "(n_samples, seq_len, d)")
    T = _as_real_array(T, "T", 3, "(d, d (d + 1) / 2, d_out)")
    n, L, d = X.shape
    rows, cols = _upper_pairs(d)
    if T.shape[:2] != (d, rows.shape[0]):
        raise ValueError(
            f"T must have shape (d, d (d + 1) / 2, d_out) = ({d}, {rows.shape[0]}, "
            f"d_out) for X of shape {X.shape}; got shape {T.shape}"
        )
    out = np.empty((n, L, T.shape[2]))
    for sl in _chunks(n):
        Xc = X[sl]
        m = _gram(Xc)[:, rows, cols] / L
        # W_n[a, e] = sum_q m_n[q] T[a, q, e]; then Y_n = X_n W_n.
        W = np.einsum("nq,aqe->nae", m, T, optimize=True)
        out[sl] = Xc @ W
    return out


def predict(fit, X):
    """Predict targets from any fit of this module.

    Parameters
    ----------
    fit : Bunch
        The result of :func:`fit_fixed_operator`, :func:`fit_linear_kernel` or
        :func:`fit_softmax_kernel`.
    X : array-like of shape (n_samples, L, d)
        Token sequences.

    Returns
    -------
    Y_pred : ndarray of shape (n_samples, L, d_out)
        ``A X V`` (fixed), ``(X K X^T / L) X V`` (linear),
        :func:`predict_linear_lifted` (lifted) or ``softmax(X K X^T) X V``
        (softmax, with the estimated ``K``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.utils import Bunch
    >>> fit = Bunch(kind="fixed", operator=np.eye(2), value_map=np.eye(3))
    >>> predict(fit, np.ones((1, 2, 3))).shape
    (1, 2, 3)
    """
    X = _as_real_array(X, "X", 3, "(n_samples, seq_len, d)")
    kind = fit.get("kind")
    if kind == "linear_lifted":
        return predict_linear_lifted(X, fit.lifted_coef)
    if kind not in ("fixed", "linear", "softmax"):
        raise ValueError(f"unknown fit kind {kind!r}")
    out = np.empty(X.shape[:2] + (fit.value_map.shape[1],))
    for sl in _chunks(X.shape[0]):
        out[sl] = _predict_chunk(fit, X[sl])
    return out


def _predict_chunk(fit, Xc):
    Z = Xc @ fit.value_map
    if fit.kind == "fixed":
        return np.einsum("lk,nke->nle", fit.operator, Z, optimize=True)
    if fit.kind == "linear":
        return attention_mixer(Xc, fit.kernel, "linear") @ Z
    return attention_mixer(Xc, fit.kernel, "softmax") @ Z


def _rss(fit, X, Y):
    """Residual sum of squares, computed from the residuals (not from ``G``, ``h``).

    ``y^T y - 2 theta^T h + theta^T G theta`` would cancel catastrophically for
    small noise; a second pass over the chunks costs only a prediction.
    """
    if fit.kind == "linear_lifted":
        return float(np.sum((Y - predict_linear_lifted(X, fit.lifted_coef)) ** 2))
    rss = 0.0
    for sl in _chunks(X.shape[0]):
        rss += float(np.sum((Y[sl] - _predict_chunk(fit, X[sl])) ** 2))
    return rss
