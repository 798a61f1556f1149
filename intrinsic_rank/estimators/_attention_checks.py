"""The parameter rules of :class:`~intrinsic_rank.AttentionRankEstimator` that depend on
another parameter (``rank_grid`` on ``rank``, ``feature_map`` on ``attention``, ...).

Each rule is ``rule(estimator, value) -> checked value`` and raises a one-line
``ValueError`` naming the parameter; the estimator's ``_parameter_constraints`` lists
them beside the simple bounds (:mod:`._params`).
"""

from collections.abc import Mapping

import numpy as np

from .._validation import check_int
from ..nn import KERNEL_STUDENT_MAPS
from ._options import check_student_options
from ._params import Boolean

__all__ = ["POSITIONAL", "SEQUENCE_CLASSES", "check_causal", "check_feature_map",
           "check_init_weights", "check_n_init", "check_positional", "check_rank_grid",
           "check_student_options_of", "check_value_map", "rank_limit_text",
           "ranks_within_limit"]

POSITIONAL = ("rope",)
"""The positional schemes of ``AttentionRankEstimator(positional=...)`` besides ``None``."""

SEQUENCE_CLASSES = ("linear", "softmax")
"""The classes that take ``causal``, ``value_map`` and ``init_weights``."""


def check_feature_map(estimator, value):
    """``feature_map``: a nonnegative map of ``attention="kernel"`` students."""
    if estimator.attention != "kernel":
        raise ValueError(
            f"feature_map applies to attention='kernel' only; got attention="
            f"{estimator.attention!r} with feature_map={value!r}"
        )
    if not isinstance(value, str) or value not in KERNEL_STUDENT_MAPS:
        raise ValueError(
            f"unknown feature_map {value!r}; use one of "
            f"{list(KERNEL_STUDENT_MAPS)} (nonnegative maps: the Min-IP theorem applies)"
        )
    return value


def check_rank_grid(estimator, value):
    """A sweep's grid: ``"auto"`` or distinct integers ``>= 1``, sorted (limits need the data)."""
    if estimator.rank is not None:
        raise ValueError("give either rank (one student) or rank_grid (a sweep), not both")
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"rank_grid must be a list of ranks or 'auto'; got {value!r}")
        return value
    grid = np.asarray(value)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"rank_grid must be a non-empty 1-D list; got {value!r}")
    # the entries as given: numpy would read [True, 2] as [1, 2]
    entries = value.tolist() if isinstance(value, np.ndarray) else list(value)
    checked = [check_int(r, "every entry of rank_grid") for r in entries]
    if len(set(checked)) != len(checked):
        raise ValueError(f"rank_grid contains duplicates: {checked}")
    return sorted(checked)


def check_causal(estimator, value):
    """``causal``: a boolean, ``True`` only for the classes of :data:`SEQUENCE_CLASSES`."""
    value = Boolean().check(value, "causal", estimator)
    if value and estimator.attention not in SEQUENCE_CLASSES:
        raise ValueError(f"causal=True applies to attention in {list(SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    return value


def check_positional(estimator, value):
    """``positional``: one of :data:`POSITIONAL`, for ``attention="softmax"``."""
    if value not in POSITIONAL:
        raise ValueError(f"positional must be None or one of {list(POSITIONAL)}; got {value!r}")
    if estimator.attention != "softmax":
        raise ValueError(f"positional={value!r} applies to attention='softmax' (the rotary "
                         f"heads of causal LMs); got attention={estimator.attention!r}")
    return value


def check_value_map(estimator, value):
    """``value_map``: a finite ``(d, d_out)`` array (its shape is checked against the data)."""
    if estimator.attention not in SEQUENCE_CLASSES:
        raise ValueError(f"value_map applies to attention in {list(SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    array = np.asarray(value, dtype=np.float64)
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
    if not isinstance(value, Mapping) or set(value) != {"query", "key"}:
        raise ValueError("init_weights must be None or a dict with exactly the keys 'query' "
                         f"and 'key' (arrays of shape (d, k)); got {value!r:.200}")
    arrays = {name: np.asarray(value[name], dtype=np.float64) for name in ("query", "key")}
    for name, array in arrays.items():
        if array.ndim != 2 or not np.all(np.isfinite(array)):
            raise ValueError(f"init_weights[{name!r}] must be a finite 2-D array of shape "
                             f"(d, k); got shape {array.shape}")
    return arrays


def check_n_init(estimator, value):
    """``n_init`` other than ``"auto"``: an integer ``>= 1``, and 1 with ``init_weights``
    (every restart would start from the same teacher)."""
    try:
        value = check_int(value, "n_init", 1)
    except ValueError:
        raise ValueError(f"n_init must be 'auto' or an integer >= 1; got {value!r}") from None
    if value > 1 and estimator.init_weights is not None:
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
