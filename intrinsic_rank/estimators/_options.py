"""What ``AttentionRankEstimator`` hands to skorch: the optimiser class and the student's options."""

import inspect
import numbers

import torch

__all__ = ["MAX_HIDDEN", "RESERVED_STUDENT_OPTIONS", "check_student_options",
           "resolve_optimizer", "student_parameters"]

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
    from collections.abc import Mapping

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
