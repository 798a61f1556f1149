"""SequenceScaler: standardise sequences ``(n, L, d)`` per token feature, over all positions."""

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ._inputs import check_dtype

__all__ = ["SequenceScaler"]


def _constant(var, mean, count):
    """Features whose variance is within float64 rounding of zero (scikit-learn's bound)."""
    eps = np.finfo(np.float64).eps
    return var <= count * eps * var + (count * mean * eps) ** 2


class SequenceScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Standardise each token feature of sequences ``(n, L, d)`` over every sequence and position.

    The sequence counterpart of scikit-learn's ``StandardScaler``: feature
    ``k`` of every token of every sequence becomes ``x / scale_[k]`` (``(x -
    mean_[k]) / scale_[k]`` with ``with_mean=True``), with the standard
    deviation (and the mean) taken over all ``n * L`` tokens. So it can stand
    before an attention estimator in a ``Pipeline``, whose tokens need one
    coordinate system at every position (a per-column scaler of the flattened
    ``(n, L * d)`` array would give each position its own units).

    Scaling does not change the rank a task needs: it is an invertible change
    of token coordinates ``x -> x D``, under which a query-key kernel ``K``
    becomes ``D^-1 K D^-1``, of the same rank, so ``r*`` of "The Entropic
    Bound" stays (its singular values, and so the energy effective rank,
    move). Centring is not a change of coordinates of the students: ``x -> x -
    mu`` turns the bilinear scores ``x_i K x_j`` into ones with a key term and
    an output offset, which the bias-free attention students cannot represent
    when the means are far from zero. So the scaler only scales by default
    (``with_mean=False``, unlike ``StandardScaler``); ask for
    ``with_mean=True`` when the features' zero means nothing.

    Parameters
    ----------
    with_mean : bool, default=False
        Subtract each feature's mean first (``StandardScaler``'s default, not
        this one's: see above).
    with_std : bool, default=True
        Divide each feature by its standard deviation (a constant feature is
        left unscaled: its scale is 1).
    copy : bool, default=True
        Work on a copy; ``False`` scales a float array in place where it can.

    Attributes
    ----------
    mean_ : ndarray of shape (d,) or None
        Each feature's mean over all tokens when ``with_mean=True``, else ``None``.
    var_ : ndarray of shape (d,) or None
        Each feature's variance over all tokens; ``None`` when ``with_std=False``.
    scale_ : ndarray of shape (d,) or None
        ``sqrt(var_)``, 1 for a constant feature; ``None`` when ``with_std=False``.
    n_samples_seen_ : int
        Sequences seen in ``fit`` (each of ``seq_len_`` tokens).
    seq_len_ : int
        Their length ``L`` (any length is transformed; this one was fitted).
    token_dim_ : int
        The token dimension ``d`` (1 for 2-D input).
    n_features_in_ : int
        The size of ``X``'s last axis, as the estimators count it: ``d`` for
        3-D input, ``L`` for 2-D input ``(n, L)``, which is read as ``L``
        scalar tokens (``d = 1``: one mean and one scale for all columns).
    feature_names_in_ : ndarray of str
        Column names of a 2-D ``X`` that had them (a pandas frame).
    x_ndim_ : {2, 3}
        The dimensions of the ``X`` seen in ``fit``; ``transform`` takes the same.

    Notes
    -----
    ``get_feature_names_out`` names what the last axis holds, one to one:
    the columns of a 2-D ``X``, the ``d`` token features (``x0``, ...) of a
    3-D one.

    See Also
    --------
    AttentionRankEstimator : the estimator it is meant to stand before.

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank.estimators import SequenceScaler
    >>> X = np.random.default_rng(0).normal(size=(100, 6, 3)) * [1.0, 10.0, 1000.0]
    >>> scaler = SequenceScaler().fit(X)
    >>> (scaler.scale_ / [1.0, 10.0, 1000.0]).round(1)  # each feature's own unit
    array([1., 1., 1.])
    >>> Z = scaler.transform(X)
    >>> Z.shape, Z.reshape(-1, 3).std(axis=0).round(6), scaler.mean_
    ((100, 6, 3), array([1., 1., 1.]), None)
    >>> bool(np.allclose(scaler.inverse_transform(Z), X))
    True
    """

    _parameter_constraints = {
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
        "copy": ["boolean"],
    }

    def __init__(self, *, with_mean=False, with_std=True, copy=True):
        self.with_mean = with_mean
        self.with_std = with_std
        self.copy = copy

    def set_output(self, *, transform=None):
        """Set the container of :meth:`transform`'s output, as scikit-learn's transformers do.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default=None
            ``None`` leaves the setting unchanged.

        Returns
        -------
        self : SequenceScaler
        """
        return super().set_output(transform=transform)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _tokens(self, X, reset, copy):
        """``X`` as a float array ``(n, L, d)`` and how many dimensions it came with."""
        check_dtype(X, "X")
        ndim = getattr(X, "ndim", None)
        if ndim is None:
            ndim = np.asarray(X).ndim
        if ndim < 2:
            raise ValueError(f"X must be 2-D (n, L) or 3-D (n, L, d); got an array with "
                             f"{ndim} dimension{'s' * (ndim != 1)}. Reshape your data, e.g. "
                             "X.reshape(1, -1) for one sequence of scalar tokens")
        if ndim > 3:
            raise ValueError(f"X must be 2-D (n, L) or 3-D (n, L, d); got an array with "
                             f"{ndim} dimensions")
        if not reset and ndim != self.x_ndim_:
            raise ValueError(f"X has {ndim} dimensions, but {type(self).__name__} was fitted "
                             f"on {self.x_ndim_}-D input")
        floats = (np.float64, np.float32)
        if ndim == 2:
            # scikit-learn's own checks: column names, sparse input, n_features_in_
            X = validate_data(self, X, reset=reset, dtype=floats, copy=copy)
            return X[:, :, None], ndim
        self._check_table_output()
        X = check_array(X, allow_nd=True, dtype=floats, copy=copy, input_name="X")
        if reset and 0 in X.shape[1:]:
            # no token, or tokens without a feature: a mean or scale of nothing is NaN
            raise ValueError(f"X of shape {X.shape} holds no token feature to standardise: "
                             "SequenceScaler needs sequences of length L >= 1 and tokens of "
                             "dimension d >= 1")
        if reset:
            self.n_features_in_ = X.shape[2]
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        elif X.shape[2] != self.n_features_in_:
            raise ValueError(f"X has tokens of dimension {X.shape[2]}, but "
                             f"{type(self).__name__} was fitted on dimension "
                             f"{self.n_features_in_}")
        return X, ndim

    def _check_table_output(self):
        """Refuse 3-D input when ``set_output`` asked for a table (pandas or polars)."""
        container = _get_output_config("transform", self)["dense"]
        if container != "default":
            raise ValueError(f"the transform output is set to {container!r} (set_output, or "
                             "scikit-learn's transform_output), which makes 2-D tables, but X "
                             "holds 3-D sequences (n, L, d), which have no table form: use "
                             "set_output(transform='default') for sequences, or give 2-D "
                             "input (n, L) of scalar tokens")

    def fit(self, X, y=None):
        """Compute each token feature's mean and standard deviation over all tokens.

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)
        y : None
            Ignored.

        Returns
        -------
        self : SequenceScaler
        """
        self._validate_params()
        tokens, ndim = self._tokens(X, reset=True, copy=False)
        n, L, d = tokens.shape
        flat = tokens.reshape(-1, d)
        mean = flat.mean(axis=0, dtype=np.float64)
        var = flat.var(axis=0, dtype=np.float64)
        self.x_ndim_ = ndim
        self.n_samples_seen_, self.seq_len_, self.token_dim_ = n, L, d
        self.mean_ = mean if self.with_mean else None
        self.var_ = var if self.with_std else None
        if self.with_std:
            scale = np.sqrt(var)
            scale[_constant(var, mean, n * L) | (scale == 0)] = 1.0
            self.scale_ = scale
        else:
            self.scale_ = None
        return self

    def _apply(self, X, inverse):
        check_is_fitted(self)
        tokens, ndim = self._tokens(X, reset=False, copy=self.copy)
        if not np.issubdtype(tokens.dtype, np.floating):  # pragma: no cover - check_array
            tokens = tokens.astype(np.float64)
        dtype = tokens.dtype
        if inverse:
            if self.scale_ is not None:
                tokens *= self.scale_.astype(dtype)
            if self.mean_ is not None:
                tokens += self.mean_.astype(dtype)
        else:
            if self.mean_ is not None:
                tokens -= self.mean_.astype(dtype)
            if self.scale_ is not None:
                tokens /= self.scale_.astype(dtype)
        return tokens[:, :, 0] if ndim == 2 else tokens

    def transform(self, X):
        """Standardise ``X`` with the fitted means and scales.

        Parameters
        ----------
        X : array-like of shape (n, L', d) or (n, L)
            Sequences of any length ``L'`` for 3-D input (the statistics are
            per token feature); ``L`` columns, as fitted, for 2-D input.

        Returns
        -------
        Z : ndarray of the shape of ``X``
        """
        return self._apply(X, inverse=False)

    def inverse_transform(self, X):
        """Take standardised sequences back to the units of the data ``fit`` saw.

        Parameters
        ----------
        X : array-like of shape (n, L', d) or (n, L)

        Returns
        -------
        X_original : ndarray of the shape of ``X``
        """
        return self._apply(X, inverse=True)
