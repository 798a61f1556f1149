"""The parameters of :class:`~intrinsic_rank.AttentionRankEstimator`: the rules that depend on
another parameter, and what the estimator hands to skorch.

The rules (``rank_grid`` on ``rank``, ``feature_map`` on ``attention``, ...) are
``rule(estimator, value) -> checked value``, each raising a one-line ``ValueError`` naming
the parameter; the estimator's ``_parameter_rules`` lists them, and its
``_parameter_constraints`` (scikit-learn's own form) states the types and ranges checked
before them (:mod:`._params`). What goes to skorch: the optimiser class
(:func:`resolve_optimizer`) and the student's own options (:func:`check_student_options`).
"""

import inspect
import numbers
from collections.abc import Mapping

import numpy as np
import torch

from .._validation import check_int
from ..nn import KERNEL_STUDENT_MAPS, STUDENTS
from ._net import COMPUTE_DTYPES
from ._params import Integers, Reals, StrOptions, callbacks_rule, device_rule

__all__ = ["MAX_HIDDEN", "MAX_N_INIT", "PARAMETER_CONSTRAINTS", "PARAMETER_RULES", "POSITIONAL",
           "RESERVED_STUDENT_OPTIONS", "SEQUENCE_CLASSES", "check_causal", "check_feature_map",
           "check_init_weights", "check_n_init", "check_positional", "check_rank_grid",
           "check_student_options", "check_student_options_of", "check_value_map",
           "rank_limit_text", "ranks_within_limit", "resolve_optimizer", "student_parameters"]


POSITIONAL = ("rope",)
"""The positional schemes of ``AttentionRankEstimator(positional=...)`` besides ``None``."""

SEQUENCE_CLASSES = ("linear", "softmax")
"""The classes that take ``causal``, ``value_map`` and ``init_weights``."""

MAX_N_INIT = 100
"""The most restarts ``n_init`` may ask for. Each restart is a whole training of every rank
(the batched run grows by one slot per rank and restart), so ``n_init=100`` already costs
about a hundred fits; a larger count is refused in one line instead of running for days."""


def check_feature_map(estimator, value):
    """``feature_map`` (one of :data:`~intrinsic_rank.nn.KERNEL_STUDENT_MAPS`): kernel
    students only."""
    if estimator.attention != "kernel":
        raise ValueError(
            f"feature_map applies to attention='kernel' only; got attention="
            f"{estimator.attention!r} with feature_map={value!r}"
        )
    return value


def check_rank_grid(estimator, value):
    """A sweep's grid: ``"auto"`` or distinct integers ``>= 1``, sorted (limits need the data)."""
    if estimator.rank is not None:
        raise ValueError("give either rank (one student) or rank_grid (a sweep), not both")
    if isinstance(value, str):  # "auto", the only string the constraints accept
        return value
    grid = np.asarray(value, dtype=object)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"rank_grid must be a non-empty 1-D list; got {value!r:.200}")
    # the entries as given: numpy would read [True, 2] as [1, 2]
    entries = value.tolist() if isinstance(value, np.ndarray) else list(value)
    checked = [check_int(r, "every entry of rank_grid") for r in entries]
    if len(set(checked)) != len(checked):
        raise ValueError(f"rank_grid contains duplicates: {checked}")
    return sorted(checked)


def check_causal(estimator, value):
    """``causal=True``: only for the classes of :data:`SEQUENCE_CLASSES`."""
    if value and estimator.attention not in SEQUENCE_CLASSES:
        raise ValueError(f"causal=True applies to attention in {list(SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    return bool(value)


def check_positional(estimator, value):
    """``positional="rope"``: for ``attention="softmax"``."""
    if estimator.attention != "softmax":
        raise ValueError(f"positional={value!r} applies to attention='softmax' (the rotary "
                         f"heads of causal LMs); got attention={estimator.attention!r}")
    return value


def check_value_map(estimator, value):
    """``value_map``: a finite ``(d, d_out)`` array (its shape is checked against the data)."""
    if estimator.attention not in SEQUENCE_CLASSES:
        raise ValueError(f"value_map applies to attention in {list(SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("value_map must be a finite 2-D array of shape (d, d_out) of "
                         "numbers") from None
    if array.ndim != 2 or not np.all(np.isfinite(array)):
        raise ValueError(f"value_map must be a finite 2-D array of shape (d, d_out); got "
                         f"shape {array.shape}" + ("" if array.ndim != 2 else
                                                   " with non-finite entries"))
    return array


def check_init_weights(estimator, value):
    """``init_weights``: ``{"query": W_Q, "key": W_K}``, finite 2-D arrays, as float64."""
    if estimator.attention not in SEQUENCE_CLASSES:
        raise ValueError(f"init_weights applies to attention in {list(SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    if set(value) != {"query", "key"}:
        raise ValueError("init_weights must be None or a dict with exactly the keys 'query' "
                         f"and 'key' (arrays of shape (d, k)); got {value!r:.200}")
    arrays = {}
    for name in ("query", "key"):
        try:
            arrays[name] = np.asarray(value[name], dtype=np.float64)
        except (TypeError, ValueError):
            arrays[name] = np.empty(0)
        if arrays[name].ndim != 2 or not np.all(np.isfinite(arrays[name])):
            raise ValueError(f"init_weights[{name!r}] must be a finite 2-D array of shape "
                             f"(d, k); got shape {arrays[name].shape}")
    return arrays


def check_n_init(estimator, value):
    """``n_init``: 1 with ``init_weights`` (every restart would start from the same teacher)."""
    if value != "auto" and value > 1 and estimator.init_weights is not None:
        raise ValueError(f"n_init={value} restarts from independent random draws, but "
                         "init_weights starts every slot from the same teacher; give "
                         "n_init=1 with init_weights")
    return value


def check_student_options_of(estimator, value):
    """``student_options``: keys the explicit class's student accepts (none for ``"auto"``)."""
    if estimator.attention == "auto":
        if value:
            raise ValueError(
                f"student_options applies to an explicit attention; got attention='auto' "
                f"with student_options={value!r} (the classes compared take their defaults)"
            )
        return {}
    return check_student_options(value, estimator.attention, estimator._student_class())


def rank_limit_text(attention, limit, token_dim, head_dim=None, n_scalar_tokens=None):
    """What bounds the rank of ``attention``'s students on these data, for an error message.

    Parameters
    ----------
    attention : str
    limit : int
    token_dim : int
    head_dim : int or None, default=None
        The rotary student's query-key width (None for the other students).
    n_scalar_tokens : int or None, default=None
        The number of scalar tokens of 2-D ``X`` (None for 3-D ``X``).

    Returns
    -------
    text : str

    Examples
    --------
    >>> rank_limit_text("linear", 4, 4)
    'the token dimension d = 4 (the query-key kernel is d x d)'
    """
    if attention == "fixed":
        what = f"the sequence length L = {limit} (the operator is L x L)"
    elif attention == "kernel":
        what = (f"the feature-rank limit {limit} (2^m features realise any kernel on "
                f"m = {token_dim} bits; capped at 4096)")
    elif head_dim is not None:
        what = (f"min(d, head_dim) = {limit}, the largest rank of a query projection "
                f"from d = {token_dim} to head_dim = {head_dim}")
    else:
        what = f"the token dimension d = {limit} (the query-key kernel is d x d)"
    if n_scalar_tokens is not None:
        what += f"; 2-D X holds n_features = {n_scalar_tokens} scalar tokens"
    return what


def ranks_within_limit(rank_grid, rank, limit, what):
    """The ranks to train: the checked ``rank_grid``, or ``[rank]`` (full rank for None).

    Parameters
    ----------
    rank_grid : list of int or None
    rank : int or None
    limit : int
    what : str
        :func:`rank_limit_text`, for the refusal of a rank above ``limit``.

    Returns
    -------
    ranks : list of int

    Examples
    --------
    >>> ranks_within_limit(None, None, 4, "d = 4")
    [4]
    >>> ranks_within_limit([1, 8], None, 4, "d = 4")
    Traceback (most recent call last):
    ...
    ValueError: rank 8 in rank_grid exceeds d = 4
    """
    if rank_grid is not None:
        if max(rank_grid) > limit:
            raise ValueError(f"rank {max(rank_grid)} in rank_grid exceeds {what}")
        return list(rank_grid)
    if rank is None:
        return [limit]
    if rank > limit:
        raise ValueError(f"rank={int(rank)} exceeds {what}")
    return [int(rank)]


MAX_HIDDEN = 65536
"""The largest ``hidden`` or ``value_dim`` a student option may ask for."""

RESERVED_STUDENT_OPTIONS = frozenset({"d", "d_out", "ranks", "seq_len", "init_scale",
                                      "random_state", "final_only", "feature_map", "causal",
                                      "value_map", "rope_theta", "restarts"})
"""Student arguments that the estimator sets itself (or that come from the data)."""

_OPTIMIZERS = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
}


def resolve_optimizer(optimizer):
    """The optimiser class of ``optimizer``: a name or a first-order ``torch.optim.Optimizer``.

    Parameters
    ----------
    optimizer : {"adam", "adamw", "sgd"} or torch.optim.Optimizer subclass
        A subclass must accept ``lr`` and ``weight_decay``; LBFGS (which needs
        a closure) is refused.

    Returns
    -------
    optimizer : type

    Examples
    --------
    >>> resolve_optimizer("AdamW").__name__
    'AdamW'
    """
    if isinstance(optimizer, str):
        if optimizer.lower() not in _OPTIMIZERS:
            raise ValueError(
                f"unknown optimizer {optimizer!r}; use one of {sorted(_OPTIMIZERS)} "
                "or a torch.optim.Optimizer subclass"
            )
        return _OPTIMIZERS[optimizer.lower()]
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        if issubclass(optimizer, torch.optim.LBFGS):
            raise ValueError(
                "optimizer=LBFGS is not supported: it needs a closure that re-evaluates "
                f"the loss; use one of {sorted(_OPTIMIZERS)} or another first-order "
                "torch.optim.Optimizer subclass"
            )
        parameters = inspect.signature(optimizer).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
        missing = [name for name in ("lr", "weight_decay")
                   if name not in parameters and not takes_any]
        if missing:
            raise ValueError(
                f"optimizer {optimizer.__name__} does not accept {missing}, which the "
                f"estimator passes; use one of {sorted(_OPTIMIZERS)} or a "
                "torch.optim.Optimizer subclass taking lr and weight_decay"
            )
        return optimizer
    raise ValueError(
        f"optimizer must be a name or a torch.optim.Optimizer subclass; got {optimizer!r}"
    )


def student_parameters(student_class):
    """Keyword parameters a student class accepts (following ``**kwargs`` up its bases).

    Parameters
    ----------
    student_class : type
        A torch module class of :data:`intrinsic_rank.nn.STUDENTS`.

    Returns
    -------
    names : set of str
    """
    names = set()
    for klass in student_class.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        parameters = inspect.signature(klass.__init__).parameters
        names |= {
            name for name, p in parameters.items()
            if name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        if not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            break
    return names


def _integer_option(value, key):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"student_options[{key!r}] must be an integer in [1, {MAX_HIDDEN}]; "
                         f"got {value!r}")
    if not 1 <= value <= MAX_HIDDEN:
        raise ValueError(f"student_options[{key!r}] must be an integer in [1, {MAX_HIDDEN}]; "
                         f"got {value}")
    return int(value)


def _bool_option(value, key):
    if not isinstance(value, bool):
        raise ValueError(f"student_options[{key!r}] must be True or False; got {value!r}")
    return value


def _positive_real_option(value, key):
    import math

    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"student_options[{key!r}] must be a finite number > 0; "
                         f"got {value!r}")
    return float(value)


def _head_dim_option(value, key):
    value = _integer_option(value, key)
    if value < 2 or value % 2:
        raise ValueError(f"student_options[{key!r}] must be an even integer >= 2 (rotary "
                         f"channels turn in pairs); got {value}")
    return value


_OPTION_CHECKS = {"hidden": _integer_option, "value_dim": _integer_option,
                  "positional": _bool_option, "temperature": _positive_real_option,
                  "head_dim": _head_dim_option, "score_scale": _positive_real_option}
"""The value check of each student option (an option without one is passed as given)."""


def check_student_options(options, attention, student_class, name="student_options"):
    """``options`` as a dict of checked student arguments, or one ``ValueError`` naming the key.

    Parameters
    ----------
    options : mapping or None
    attention : str
        The estimator's ``attention``, for the message.
    student_class : type
        The student the options go to.
    name : str, default="student_options"

    Returns
    -------
    options : dict

    Raises
    ------
    ValueError
        Not a mapping; a key the estimator sets itself; a key the student does
        not accept (the message lists those it does); a value of the wrong type
        or range (``hidden`` and ``value_dim``: integers in ``[1, 65536]``;
        ``positional``: a bool; ``temperature`` and ``score_scale``: a finite
        number > 0; ``head_dim``: an even integer in ``[2, 65536]``).

    Examples
    --------
    >>> from intrinsic_rank.nn import STUDENTS
    >>> check_student_options({"hidden": 8}, "kernel", STUDENTS["kernel"])
    {'hidden': 8}
    >>> check_student_options({"hidden": 2.5}, "kernel", STUDENTS["kernel"])
    Traceback (most recent call last):
    ...
    ValueError: student_options['hidden'] must be an integer in [1, 65536]; got 2.5
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"{name} must be a dict of student arguments or None; got "
                         f"{type(options).__name__}")
    options = dict(options)
    clash = sorted(RESERVED_STUDENT_OPTIONS & set(options), key=str)
    if clash:
        raise ValueError(f"{name} cannot set {clash}: they are the estimator's own "
                         "parameters or come from the data")
    allowed = sorted(student_parameters(student_class) - RESERVED_STUDENT_OPTIONS)
    unknown = sorted(set(options) - set(allowed), key=str)
    if unknown:
        raise ValueError(f"{name} has unknown key(s) {unknown} for attention={attention!r}; "
                         f"its student accepts {allowed or 'no options'}")
    return {key: _OPTION_CHECKS[key](value, key) if key in _OPTION_CHECKS else value
            for key, value in options.items()}


PARAMETER_CONSTRAINTS = {
    "attention": [StrOptions({*STUDENTS, "auto"})],
    "feature_map": [None, StrOptions(set(KERNEL_STUDENT_MAPS))],
    "rank": [None, Integers(1)],
    "rank_grid": [None, StrOptions({"auto"}), "array-like"],
    "max_epochs": [Integers(1)],
    "lr": [Reals(0.0, closed="neither")],
    "batch_size": [StrOptions({"auto"}), Integers(1)],
    "init_scale": [Reals(0.0, closed="neither")],
    "n_init": [StrOptions({"auto"}), Integers(1, MAX_N_INIT, closed="both")],
    "optimizer": [str, type],
    "weight_decay": [Reals(0.0)],
    "noise_floor": [None, Reals(0.0)],
    "tol": [Reals(0.0)],
    "validation_fraction": [Reals(0.0, 0.9, closed="both")],
    "early_stopping": ["boolean"],
    "n_iter_no_change": [Integers(1)],
    "student_options": [None, Mapping],
    "random_state": ["random_state"],
    "device": [str, torch.device],
    "verbose": [Integers(0)],
    "callbacks": [None, list, tuple],
    "compute_dtype": [StrOptions(set(COMPUTE_DTYPES))],
    "causal": ["boolean"],
    "positional": [None, StrOptions(set(POSITIONAL))],
    "rope_theta": [Reals(0.0, closed="neither")],
    "value_map": [None, "array-like"],
    "init_weights": [None, Mapping],
}
"""``AttentionRankEstimator._parameter_constraints``: every parameter in scikit-learn's own
form, checked first in ``fit`` (and by scikit-learn's ``_validate_params()``)."""

PARAMETER_RULES = {
    "feature_map": check_feature_map,
    "rank_grid": check_rank_grid,
    "n_init": check_n_init,
    "optimizer": lambda estimator, value: resolve_optimizer(value),
    "student_options": check_student_options_of,
    "device": device_rule,
    "callbacks": callbacks_rule,
    "causal": check_causal,
    "positional": check_positional,
    "value_map": check_value_map,
    "init_weights": check_init_weights,
}
"""``AttentionRankEstimator._parameter_rules``: what the constraints cannot say (a parameter
that depends on another, a device that exists here), and the value ``fit`` uses
(:func:`~._params.checked_params`)."""
