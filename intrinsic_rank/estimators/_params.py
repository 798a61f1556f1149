"""Declarative parameter checks: each estimator's ``_parameter_constraints``, one checker.

Every estimator declares, in one class attribute ``_parameter_constraints``, a
list of accepted forms per constructor parameter (in the spirit of
scikit-learn's ``utils/_param_validation.py``). :func:`validate_params` checks
them all at the start of ``fit`` and raises one error style::

    AttentionRankEstimator: max_epochs must be an integer >= 1; got 0

A parameter passes when it satisfies any of its forms (``None`` in the list
accepts ``None``); when none accepts it, the message of the last form that
refused it is raised, prefixed with the estimator's name. Forms that only
the data can decide (a rank above the token dimension) are checked in ``fit``
once the data are known.
"""

from skorch.callbacks import Callback

from .._validation import check_device, check_int, check_random_state, check_real

__all__ = ["Boolean", "Callbacks", "Device", "Integer", "NoCheck", "Options", "Real", "Rule",
           "Seed", "validate_params"]


class Boolean:
    """``True`` or ``False`` (numpy booleans too; ``0`` and ``1`` are not booleans here).

    Examples
    --------
    >>> Boolean().check(True, "early_stopping", None)
    True
    >>> Boolean().check(3, "early_stopping", None)
    Traceback (most recent call last):
    ...
    ValueError: early_stopping must be True or False; got 3
    """

    def check(self, value, name, estimator):
        """Return ``value`` as ``bool``, or raise a ``ValueError`` naming ``name``."""
        import numpy as np

        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ValueError(f"{name} must be True or False; got {value!r}")


class Integer:
    """An integer (``bool`` excluded) in the closed range ``[minimum, maximum]``.

    Parameters
    ----------
    minimum, maximum : int or None, default=1, None

    Examples
    --------
    >>> Integer(1).check(0, "max_epochs", None)
    Traceback (most recent call last):
    ...
    ValueError: max_epochs must be an integer >= 1; got 0
    """

    def __init__(self, minimum=1, maximum=None):
        self.minimum = minimum
        self.maximum = maximum

    def check(self, value, name, estimator):
        """Return ``value`` as ``int``, or raise a ``ValueError`` naming ``name``."""
        return check_int(value, name, self.minimum, self.maximum)


class Real:
    """A finite real number (``bool`` excluded) in an interval, closed unless told.

    Parameters
    ----------
    low, high : float or None, default=None
    low_open, high_open : bool, default=False

    Examples
    --------
    >>> Real(0.0, low_open=True).check(0.5, "lr", None)
    0.5
    """

    def __init__(self, low=None, high=None, *, low_open=False, high_open=False):
        self.low = low
        self.high = high
        self.low_open = low_open
        self.high_open = high_open

    def check(self, value, name, estimator):
        """Return ``value`` as ``float``, or raise a ``ValueError`` naming ``name``."""
        return check_real(value, name, self.low, self.high,
                          low_open=self.low_open, high_open=self.high_open)


class Options:
    """One of a few strings.

    Parameters
    ----------
    values : sequence of str
    message : str or None, default=None
        Error text, formatted with ``name``, ``value`` and ``options``;
        ``None`` gives ``"{name} must be one of {options}; got {value!r}"``.

    Examples
    --------
    >>> Options(["box", "ball"]).check("cube", "cell_region", None)
    Traceback (most recent call last):
    ...
    ValueError: cell_region must be one of ['box', 'ball']; got 'cube'
    """

    def __init__(self, values, message=None):
        self.values = tuple(values)
        self.message = message

    def check(self, value, name, estimator):
        """Return ``value`` if it is one of the options, else raise a ``ValueError``."""
        if isinstance(value, str) and value in self.values:
            return value
        template = self.message or "{name} must be one of {options}; got {value!r}"
        raise ValueError(template.format(name=name, value=value, options=list(self.values)))


class Rule:
    """A check written as a function ``rule(estimator, value) -> value``.

    For constraints that depend on another parameter (``feature_map`` only
    with ``attention="kernel"``) or that a type and a range cannot say. The
    function raises a ``ValueError`` whose message names the parameter.

    Parameters
    ----------
    rule : callable

    Examples
    --------
    >>> Rule(lambda est, value: value * 2).check(3, "x", None)
    6
    """

    def __init__(self, rule):
        self.rule = rule

    def check(self, value, name, estimator):
        """The rule's value for ``value``."""
        return self.rule(estimator, value)


class NoCheck:
    """Any value: the parameter is checked where it is used (a model, an array).

    Examples
    --------
    >>> NoCheck().check(object, "model", None) is object
    True
    """

    def check(self, value, name, estimator):
        """Return ``value`` unchanged."""
        return value


class Seed:
    """A ``random_state``: ``None``, an integer in ``[0, 2**32 - 1]`` or a ``RandomState``.

    Nothing is drawn; the value is returned as given.

    Examples
    --------
    >>> Seed().check(-1, "random_state", None)
    Traceback (most recent call last):
    ...
    ValueError: random_state must be an integer in [0, 4294967295]; got -1
    """

    def check(self, value, name, estimator):
        """Return ``value`` if it is a valid seed, else raise a ``ValueError``."""
        check_random_state(value)
        return value


class Device:
    """A torch device that exists here and can hold a tensor (a :class:`torch.device`).

    Examples
    --------
    >>> Device().check("cpu", "device", None)
    device(type='cpu')
    """

    def check(self, value, name, estimator):
        """Return ``value`` as a ``torch.device`` (:func:`~intrinsic_rank._validation.check_device`)."""
        return check_device(value, probe=True)


class Callbacks:
    """A list of skorch callbacks or ``(name, callback)`` pairs, added to the estimator's own.

    Examples
    --------
    >>> from skorch.callbacks import LRScheduler
    >>> Callbacks().check([("lr", LRScheduler())], "callbacks", None)[0][0]
    'lr'
    >>> Callbacks().check([3], "callbacks", None)
    Traceback (most recent call last):
    ...
    ValueError: callbacks must be a list of skorch callbacks or (name, callback) pairs; got 3 in it
    """

    def check(self, value, name, estimator):
        """Return ``value`` as a list, or raise a ``ValueError`` naming the bad entry."""
        if isinstance(value, (str, bytes, Callback)) or not hasattr(value, "__iter__"):
            raise ValueError(
                f"{name} must be a list of skorch callbacks or (name, callback) pairs; "
                f"got {value!r}"
            )
        entries = list(value)
        for entry in entries:
            named = (isinstance(entry, tuple) and len(entry) == 2
                     and isinstance(entry[0], str) and isinstance(entry[1], Callback))
            if not (named or isinstance(entry, Callback)):
                raise ValueError(
                    f"{name} must be a list of skorch callbacks or (name, callback) "
                    f"pairs; got {entry!r} in it"
                )
        return entries


def validate_params(estimator):
    """Check every parameter of ``estimator`` against its ``_parameter_constraints``.

    Parameters
    ----------
    estimator : BaseEstimator
        Its class declares ``_parameter_constraints``: ``{name: [form, ...]}``,
        one entry per constructor parameter, where a form is ``None`` or an
        object with ``check(value, name, estimator)`` (:class:`Integer`,
        :class:`Real`, :class:`Options`, :class:`Rule`, ...).

    Returns
    -------
    checked : dict
        ``{name: value}`` as the accepting form returned it (``int``,
        ``float``, ``torch.device``, ...).

    Raises
    ------
    ValueError
        ``"<Estimator>: <parameter> must be ...; got ..."`` for the first
        parameter, in declaration order, that no form accepts.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> class Est(BaseEstimator):
    ...     _parameter_constraints = {"n": [Integer(1)], "tol": [None, Real(0.0)]}
    ...     def __init__(self, n=1, tol=None):
    ...         self.n, self.tol = n, tol
    >>> validate_params(Est(n=2))
    {'n': 2, 'tol': None}
    >>> validate_params(Est(n=0))
    Traceback (most recent call last):
    ...
    ValueError: Est: n must be an integer >= 1; got 0
    """
    params = estimator.get_params(deep=False)
    constraints = type(estimator)._parameter_constraints
    missing = sorted(set(params) - set(constraints))
    if missing:
        raise TypeError(f"{type(estimator).__name__} declares no constraint for {missing}")
    checked = {}
    for name, forms in constraints.items():
        value = params[name]
        if value is None and None in forms:
            checked[name] = None
            continue
        error = None
        for form in forms:
            if form is None:
                continue
            try:
                checked[name] = form.check(value, name, estimator)
            except ValueError as refusal:
                error = refusal
            else:
                break
        else:
            raise ValueError(f"{type(estimator).__name__}: {error}") from None
    return checked

