"""Parameters in scikit-learn's own form, the rules that form cannot state, and a fit from scratch.

Every estimator of the package states each constructor parameter in one place,
``_parameter_constraints``, in **scikit-learn's own form**: a list of accepted
forms per parameter (a type, :class:`Interval` (here :class:`Integers` and
:class:`Reals`, which refuse booleans), :class:`StrOptions`, ``"boolean"``,
``"random_state"``, ``"array-like"``, ``None``, or ``"no_validation"``).
scikit-learn's own ``BaseEstimator._validate_params()`` checks it, so its
``_fit_context``, its ``check_param_validation`` and any tool that calls them work on
these estimators, and a bad value is scikit-learn's one-line
``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``)::

    The 'max_epochs' parameter of AttentionRankEstimator must be an int in the range
    [1, inf). Got 0 instead.

What a type and a range cannot say -- a parameter that depends on another
(``feature_map`` only with ``attention="kernel"``), a device that must exist here, the
entries of a list -- is a **rule** in the estimator's ``_parameter_rules``:
``{name: rule(estimator, value) -> value}``, applied to every value other than ``None``
once the constraints hold. A rule raises a one-line ``ValueError``, which
:func:`checked_params` prefixes with the estimator's name::

    AttentionRankEstimator: feature_map applies to attention='kernel' only; got ...

and returns the value ``fit`` uses (a ``torch.device``, a sorted grid). Checks that only
the data can decide (a rank above the token dimension) are made in ``fit`` once the data
are known.

Every ``fit`` starts from scratch (:func:`fits_from_scratch`): the fitted attributes of
an earlier fit (every attribute whose name ends with ``_``) are removed first, and again
when the fit fails, so a failed or interrupted fit leaves the estimator unfitted.
"""

import functools
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from .._validation import check_device

__all__ = ["HasMethods", "Integers", "Reals", "StrOptions", "callbacks_rule", "checked_params",
           "clear_fitted", "device_rule", "fits_from_scratch"]


def _is_bool(value):
    return isinstance(value, (bool, np.bool_))


class Integers(Interval):
    """scikit-learn's ``Interval(Integral, left, right, closed=...)``, without ``bool``.

    ``True`` is an ``Integral`` to Python; a count of ``True`` epochs is a mistake, so
    it is refused like any other value outside the interval.

    Parameters
    ----------
    left : int
    right : int or None, default=None
        ``None`` is unbounded.
    closed : {"left", "right", "both", "neither"}, default="left"

    Examples
    --------
    >>> Integers(1).is_satisfied_by(3), Integers(1).is_satisfied_by(True)
    (True, False)
    >>> str(Integers(1, 100, closed="both"))
    'an int in the range [1, 100]'
    """

    def __init__(self, left, right=None, *, closed="left"):
        super().__init__(Integral, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not _is_bool(val) and super().is_satisfied_by(val)


class Reals(Interval):
    """scikit-learn's ``Interval(Real, left, right, closed=...)``, without ``bool``.

    NaN is outside every interval; with ``right=None`` and ``closed`` ``"left"`` or
    ``"neither"`` so is ``inf``, so a value that passes is a finite number.

    Parameters
    ----------
    left : float or None
    right : float or None, default=None
    closed : {"left", "right", "both", "neither"}, default="left"

    Examples
    --------
    >>> lr = Reals(0.0, closed="neither")
    >>> lr.is_satisfied_by(3e-3), lr.is_satisfied_by(float("inf")), lr.is_satisfied_by(True)
    (True, False, False)
    """

    def __init__(self, left, right=None, *, closed="left"):
        super().__init__(Real, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not _is_bool(val) and super().is_satisfied_by(val)


def device_rule(estimator, value):
    """``device``: a torch device that exists here and can hold a tensor (probed).

    Examples
    --------
    >>> device_rule(None, "cpu")
    device(type='cpu')
    """
    return check_device(value, probe=True)


def callbacks_rule(estimator, value):
    """``callbacks``: skorch callbacks or ``(name, callback)`` pairs, as a list.

    Examples
    --------
    >>> from skorch.callbacks import LRScheduler
    >>> callbacks_rule(None, [("lr", LRScheduler())])[0][0]
    'lr'
    >>> callbacks_rule(None, [3])
    Traceback (most recent call last):
    ...
    ValueError: callbacks must be a list of skorch callbacks or (name, callback) pairs; got 3 in it
    """
    from skorch.callbacks import Callback

    entries = list(value)
    for entry in entries:
        named = (isinstance(entry, tuple) and len(entry) == 2
                 and isinstance(entry[0], str) and isinstance(entry[1], Callback))
        if not (named or isinstance(entry, Callback)):
            raise ValueError("callbacks must be a list of skorch callbacks or (name, callback) "
                             f"pairs; got {entry!r:.200} in it")
    return entries


def checked_params(estimator):
    """Check every parameter of ``estimator``: scikit-learn's constraints, then the rules.

    Parameters
    ----------
    estimator : BaseEstimator
        Its class declares ``_parameter_constraints`` (scikit-learn's form, one entry
        per constructor parameter) and ``_parameter_rules`` (``{name: rule}``).

    Returns
    -------
    checked : dict
        ``{name: value}`` for every parameter: as given, or as its rule returned it.

    Raises
    ------
    sklearn.utils._param_validation.InvalidParameterError
        scikit-learn's message for the first parameter outside its constraints.
    ValueError
        ``"<Estimator>: <what is wrong>"`` for the first rule that refuses its value.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> class Est(BaseEstimator):
    ...     _parameter_constraints = {"n": [Integers(1)], "tol": [None, Reals(0.0)]}
    ...     _parameter_rules = {"n": lambda est, n: n * 2}
    ...     def __init__(self, n=1, tol=None):
    ...         self.n, self.tol = n, tol
    >>> checked_params(Est(n=2))
    {'n': 4, 'tol': None}
    >>> checked_params(Est(n=0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sklearn...InvalidParameterError: The 'n' parameter of Est must be an int in the range ...
    """
    estimator._validate_params()
    checked = estimator.get_params(deep=False)
    for name, rule in type(estimator)._parameter_rules.items():
        if checked[name] is None:
            continue
        try:
            checked[name] = rule(estimator, checked[name])
        except ValueError as refusal:
            raise ValueError(f"{type(estimator).__name__}: {refusal}") from None
    return checked


def clear_fitted(estimator):
    """Remove every fitted attribute: each name that ends with ``_`` and is not a parameter.

    Parameters
    ----------
    estimator : BaseEstimator
        Its constructor parameters are kept, and so is scikit-learn's own state
        (``set_output``'s configuration, metadata requests: names that start with ``_``).

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
        if name.endswith("_") and not name.startswith("__") and name not in params:
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
