"""Fitted state: every ``fit`` starts from scratch and leaves nothing behind when it fails."""

import functools

__all__ = ["clear_fitted", "fits_from_scratch"]

_PRIVATE_FIT_STATE = frozenset({"_x_ndim", "_seed", "_target_rows", "_grid_cut"})


def clear_fitted(estimator):
    """Remove every fitted attribute (``name_``, and the private state of a fit).

    Parameters
    ----------
    estimator : BaseEstimator
        Its constructor parameters (no trailing underscore) are kept.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> class Est(BaseEstimator):
    ...     def __init__(self, a=1):
    ...         self.a = a
    >>> est = Est()
    >>> est.coef_ = 2
    >>> clear_fitted(est)
    >>> hasattr(est, "coef_"), est.a
    (False, 1)
    """
    params = set(estimator.get_params(deep=False))
    for name in list(vars(estimator)):
        fitted = name.endswith("_") and not name.startswith("__")
        if name not in params and (fitted or name in _PRIVATE_FIT_STATE):
            delattr(estimator, name)


def fits_from_scratch(fit):
    """Decorate ``fit``: forget the previous fit first, and leave nothing on failure.

    A refit with other settings then keeps no attribute of the old ones (no
    stale ``sweep_`` after ``set_params(rank_grid=None)``), and a fit that raises,
    a :class:`KeyboardInterrupt` included, leaves the estimator unfitted
    (``check_is_fitted`` raises), never with a half-finished result.

    Parameters
    ----------
    fit : callable
        The estimator's ``fit`` method.

    Returns
    -------
    wrapper : callable
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        clear_fitted(self)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            clear_fitted(self)
            raise

    return wrapper
