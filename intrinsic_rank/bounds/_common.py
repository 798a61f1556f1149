"""What the bounds' modules share: a result dict with attribute access, and float-range guards."""

import sys

import numpy as np

from .._validation import check_int

_FLOAT_MAX = sys.float_info.max


class Certificate(dict):
    """A dict with attribute access (like sklearn's Bunch, without sklearn)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def check_size(value, name, minimum=1):
    """:func:`check_int`, and an integer that float64 can hold (the bounds compute in floats)."""
    value = check_int(value, name, minimum)
    if value > _FLOAT_MAX:
        raise ValueError(
            f"{name} must be at most {_FLOAT_MAX:.4g} (float64's range, in which the bound "
            f"is computed); got an integer of {len(str(value))} digits"
        )
    return value


def log_int(value):
    """``np.log`` of a Python integer of any size (numpy's own loop stops at int64)."""
    return np.log(value) if value < 2**63 else np.log(float(value))


def finite_result(compute, what):
    """``float(compute())``, or a ValueError if the true value lies beyond float64's range."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            value = float(compute())
    except OverflowError:
        value = float("inf")
    if not np.isfinite(value):
        raise ValueError(
            f"{what} overflows float64 (its true value exceeds {_FLOAT_MAX:.4g}); "
            "use smaller arguments"
        )
    return value


def log1p_ratio(num, den):
    """``log1p(num / den)`` for ``num >= 0, den > 0``, finite where ``num / den`` overflows.

    Where the ratio overflows it exceeds ``1e308``, so ``log1p(q) = log(q)``
    to double precision, and ``log(q) = log(num) - log(den)`` is computed
    without forming ``q``.
    """
    with np.errstate(over="ignore"):
        q = np.divide(num, den)
    if np.all(np.isfinite(q)):
        return np.log1p(q)
    with np.errstate(divide="ignore"):  # log(0) in the branch np.where discards
        return np.where(np.isfinite(q), np.log1p(q), np.log(num) - np.log(den))
