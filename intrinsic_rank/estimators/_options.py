"""What ``AttentionRankEstimator`` hands to skorch: the optimiser class and the student's options."""

import inspect

import torch

__all__ = ["resolve_optimizer", "student_parameters"]

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
