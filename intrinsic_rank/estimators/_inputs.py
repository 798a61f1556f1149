"""Input checks of the sequence estimators: ``X`` and ``Y`` as float arrays of sequences.

Input convention
----------------
* ``X`` of shape ``(n, L, d)`` is ``n`` sequences of ``L`` tokens of dimension ``d``.
* ``X`` of shape ``(n, L)`` is read as ``L`` one-dimensional tokens, ``(n, L, 1)``;
  this is what scikit-learn's own tooling (and its common checks) feed.
* ``Y`` of shape ``(n, L, d_out)`` is a per-token target.
* ``Y`` of shape ``(n,)`` or ``(n, k)`` is a target of the whole sequence, read at
  the final position (the model's output there, like a causal final query).

``n_features_in_`` is the size of the last axis of ``X`` as scikit-learn counts
columns: the token dimension ``d`` for 3-D input, the number of scalar tokens
``L`` for 2-D input. The sequence length is always stored as ``seq_len_`` and
the token dimension as ``token_dim_``.

Refused before any conversion, in one line that never prints the array: a
datetime, timedelta, complex, structured, string or bytes dtype (``X`` of
dates would otherwise train on the dates as numbers), ``X`` of fewer than
two dimensions and a ``Y`` of none (a single number).

The score of the sequence regressors (:class:`SequenceRegressorMixin`, :func:`sequence_r2`)
lives here too: R² of predictions shaped like these targets, averaged over output entries.
"""

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils import get_tags
from sklearn.utils.validation import check_array, validate_data

from . import _scaling

__all__ = ["MIN_HELDOUT_SEQUENCES", "SequenceRegressorMixin", "check_dtype", "heldout_size",
           "sequence_r2", "validate_sequences"]


MIN_HELDOUT_SEQUENCES = 2
"""The fewest sequences a sweep scores its ranks on (its held-out part, or all the data
in-sample): the reach tolerance is ``tol`` times their variance, and one sequence has
none (a variance of 0 made every rank's tolerance 0 and the held-out R² undefined)."""

_NO_TARGET = "no_validation"

_REFUSED_KINDS = {"M": "datetime", "m": "timedelta", "c": "complex", "V": "structured",
                  "U": "string", "S": "bytes"}


def check_dtype(array, name):
    """Refuse a datetime, timedelta, complex, structured, string or bytes ``array``.

    Reads only ``array.dtype`` (and a pandas frame's ``dtypes``): nothing is
    converted or printed. Lists and object arrays go on to scikit-learn's
    conversion.

    Parameters
    ----------
    array : array-like
    name : str

    Raises
    ------
    ValueError
        ``"X must hold real numbers; got a datetime array (dtype datetime64[D])"``;
        for complex input scikit-learn's ``"Complex data not supported"``.

    Examples
    --------
    >>> import numpy as np
    >>> check_dtype(np.zeros(3), "X")
    >>> check_dtype(np.zeros(3, dtype="datetime64[D]"), "X")
    Traceback (most recent call last):
    ...
    ValueError: X must hold real numbers; got a datetime array (dtype datetime64[D])
    """
    dtypes = getattr(array, "dtypes", None)
    if dtypes is not None and not hasattr(array, "dtype"):  # a pandas DataFrame
        candidates = list(getattr(dtypes, "values", [dtypes]))
    else:
        candidates = [getattr(array, "dtype", None)]
    for dtype in candidates:
        if not isinstance(dtype, np.dtype):
            continue
        kind = "V" if dtype.fields is not None else dtype.kind
        if kind == "c":  # scikit-learn's own wording, which its common checks expect
            raise ValueError(f"{name}: Complex data not supported (dtype {dtype}); it must "
                             "hold real numbers")
        if kind in _REFUSED_KINDS:
            raise ValueError(f"{name} must hold real numbers; got a {_REFUSED_KINDS[kind]} "
                             f"array (dtype {dtype})")


def heldout_size(n, validation_fraction):
    """The sequences a rank sweep holds out, checked: at least ``MIN_HELDOUT_SEQUENCES``.

    ``round(validation_fraction * n)`` held out and at least one left to train on;
    ``validation_fraction=0`` scores in-sample on all ``n``, which must then be at
    least :data:`MIN_HELDOUT_SEQUENCES`.

    Parameters
    ----------
    n : int
        Sequences in the data.
    validation_fraction : float

    Returns
    -------
    n_heldout : int
        ``n`` for an in-sample sweep.

    Raises
    ------
    ValueError
        Stating the smallest ``n`` that works at this ``validation_fraction``.

    Examples
    --------
    >>> heldout_size(100, 0.2)
    20
    >>> heldout_size(5, 0.2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: a rank sweep scores its ranks on at least 2 held-out sequences ...
    """
    least = MIN_HELDOUT_SEQUENCES
    if validation_fraction == 0:
        if n < least:
            raise ValueError(
                f"an in-sample rank sweep (validation_fraction=0) scores its ranks on all "
                f"the sequences, and the reach tolerance needs their variance: at least "
                f"{least} sequences; got n_samples = {n}")
        return n
    n_heldout = int(round(validation_fraction * n))
    if n_heldout < least or n - n_heldout < 1:
        needed = next((m for m in range(least + 1, 10**7)
                       if least <= int(round(validation_fraction * m)) < m), None)
        takes = (f"that takes n_samples >= {needed}" if needed is not None
                 else "no n_samples does")
        raise ValueError(
            f"a rank sweep scores its ranks on at least {least} held-out sequences (the "
            "reach tolerance is tol times their variance, and one sequence has none) and "
            f"trains on at least one; with validation_fraction={validation_fraction} "
            f"(round({validation_fraction} * n_samples) held out) {takes}; got n_samples "
            f"= {n} ({n_heldout} held out). Give more sequences, or validation_fraction=0 "
            "to score the sweep in-sample")
    return n_heldout


def _finite_float_array(array, name, ndims, keep_float32=False):
    """``array`` checked finite and non-empty, with one of ``ndims`` dimensions."""
    dtype = (np.float64, np.float32) if keep_float32 else np.float64
    array = check_array(
        array,
        ensure_2d=False,
        allow_nd=True,
        dtype=dtype,
        ensure_all_finite=False,
        ensure_min_samples=1,
        input_name=name,
        copy=False,
    )
    if array.ndim not in ndims:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, ndims))} dimensions; "
            f"got an array of shape {array.shape}"
        )
    # checked a chunk of rows at a time: no whole boolean temporary on big data
    step = _scaling.chunk_rows(array)
    for start in range(0, len(array), step):
        part = array[start:start + step]
        if not np.all(np.isfinite(part)):
            bad = "NaN" if np.isnan(part).any() else "infinity"
            raise ValueError(f"{name} contains {bad}; remove or impute those entries")
    if array.size == 0:
        raise ValueError(f"{name} is empty (shape {array.shape})")
    return array


def _sequence_ndim(X):
    """The number of axes of ``X``, which must be 2 (scalar tokens) or 3."""
    ndim = getattr(X, "ndim", None)
    if ndim is None:
        ndim = np.asarray(X).ndim
    if ndim < 2:
        shape = getattr(X, "shape", None)
        shape = tuple(shape) if shape is not None else np.shape(X)
        raise ValueError(
            "X must be 2-D (n, L) or 3-D (n, L, d); "
            f"got an array of shape {shape}. Reshape your data, e.g. X.reshape(1, -1) "
            "for one sequence of scalar tokens"
        )
    if ndim > 3:
        raise ValueError(
            "X must be 2-D (n, L) or 3-D (n, L, d); "
            f"got an array with {ndim} dimensions"
        )
    return ndim


def validate_sequences(estimator, X, Y=_NO_TARGET, reset=True, keep_float32=False):
    """Check ``X`` (and ``Y``) and return them as float arrays ``(n, L, d)``.

    Parameters
    ----------
    estimator : BaseEstimator
        Receives ``n_features_in_``, ``seq_len_``, ``token_dim_`` (and with ``Y``
        on reset, ``target_``: ``"sequence"`` or ``"final"``, and ``d_out_``).
    X : array-like of shape (n, L) or (n, L, d)
    Y : array-like of shape (n,), (n, k) or (n, L, d_out), None, or "no_validation"
        ``"no_validation"`` (the default) checks ``X`` alone. ``None`` is a
        ``ValueError`` saying that ``y`` is required when the estimator's
        scikit-learn tags require a target (``target_tags.required``).
    reset : bool
        ``True`` in ``fit`` (store the shapes), ``False`` at predict time (check
        them against the fitted ones).
    keep_float32 : bool, default=False
        Keep 3-D float32 input (and its ``Y``) in float32 instead of making a
        float64 copy; for callers that compute in float32 anyway (and reduce in
        float64 themselves).

    Returns
    -------
    X : ndarray of shape (n, L, d)
    Y : ndarray of shape (n, L, d_out) or (n, d_out), only if ``Y`` was given

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank import AttentionRankEstimator
    >>> est = AttentionRankEstimator()
    >>> X, Y = validate_sequences(est, np.ones((4, 3, 2)), np.ones(4))
    >>> X.shape, Y.shape, est.target_, est.seq_len_
    ((4, 3, 2), (4, 1), 'final', 3)
    >>> validate_sequences(est, np.ones((4, 3, 2)), None)
    Traceback (most recent call last):
    ...
    ValueError: AttentionRankEstimator requires y to be passed, but the target y is None
    """
    if Y is None and get_tags(estimator).target_tags.required:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None"
        )
    with_target = not (isinstance(Y, str) and Y == _NO_TARGET)
    check_dtype(X, "X")
    if with_target and Y is not None:
        check_dtype(Y, "Y")
        y_ndim = getattr(Y, "ndim", None)
        if (np.asarray(Y).ndim if y_ndim is None else y_ndim) == 0:
            raise ValueError("Y must be (n,), (n, k) or (n, L, d_out): one target per "
                             f"sequence or per token; got a single number ({type(Y).__name__} "
                             "with no axis)")
    ndim = _sequence_ndim(X)
    if ndim != 3:
        # 2-D input (and malformed 0-D/1-D input) goes through scikit-learn's own
        # validation so that feature names, sparse input and n_features_in_
        # behave exactly as its tools expect.
        if not with_target:
            X = validate_data(
                estimator, X, reset=reset, dtype=np.float64, ensure_all_finite=True
            )
        else:
            X, Y = validate_data(
                estimator, X, Y, reset=reset, dtype=np.float64,
                ensure_all_finite=True, multi_output=True, y_numeric=True,
            )
        X = X[:, :, None]
    else:
        X = _finite_float_array(X, "X", (3,), keep_float32)
        if reset:
            estimator.n_features_in_ = X.shape[2]
            if hasattr(estimator, "feature_names_in_"):
                del estimator.feature_names_in_
        elif X.shape[2] != estimator.token_dim_:
            raise ValueError(
                f"X has tokens of dimension {X.shape[2]}, but "
                f"{type(estimator).__name__} was fitted on dimension "
                f"{estimator.token_dim_}"
            )
    n, L, d = X.shape
    if reset:
        estimator.x_ndim_ = ndim
        estimator.seq_len_ = L
        estimator.token_dim_ = d
    elif L != estimator.seq_len_:
        raise ValueError(
            f"X has sequences of length {L}, but {type(estimator).__name__} was "
            f"fitted on length {estimator.seq_len_}"
        )
    if not with_target:
        return X
    Y = _finite_float_array(Y, "Y", (1, 2, 3), keep_float32 and ndim == 3)
    if Y.shape[0] != n:
        raise ValueError(
            f"X and Y have different numbers of samples: {n} and {Y.shape[0]}"
        )
    if Y.ndim == 3 and Y.shape[1] != L:
        raise ValueError(
            f"X and Y have different sequence lengths: {L} and {Y.shape[1]}"
        )
    if reset:
        estimator.target_ = "sequence" if Y.ndim == 3 else "final"
        # predict returns targets shaped like those seen in fit (1-D stays 1-D)
        estimator.y_ndim_ = Y.ndim
    if Y.ndim == 1:
        Y = Y[:, None]
    if reset:
        estimator.d_out_ = Y.shape[-1]
    return X, Y


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
