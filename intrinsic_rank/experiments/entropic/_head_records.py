"""What the figures, the answers and impose of ``head-ranks`` read alike from a map's records.

Among them the rule for a head whose output does not vary (:func:`output_spread`,
:data:`CONSTANT_OUTPUT`): its relative risk, a mean squared error over the variance of
the head's output, has nothing to divide by, so such a head has no ``r*_attn``; its
record says ``constant_output`` and holds no ranks.
"""

import numpy as np

from ..._packaged_models import model_title

__all__ = ["CONSTANT_OUTPUT", "FINDINGS_TOL", "answer_at", "findings_tol", "model_name",
           "output_spread", "unplanted"]

CONSTANT_OUTPUT = 1e-5
"""A head's output is constant when its pooled standard deviation over the held-out tokens
is at most this share of its root mean square. At that spread the float32 rounding of a
recomputed output alone (about 1e-7 of its size) is already a relative risk of 1e-4, so
below it a relative risk measures rounding, not the head."""

FINDINGS_TOL = 0.05
"""The tolerance whose ``r*_attn`` the findings test (fixed before the run)."""


def model_name(config):
    """The model's exact name (the packaged model's title, or what was given)."""
    return config.get("model_title") or model_title(config["model"])


def findings_tol(tolerances):
    """The tolerance the findings and the map's figure read: ``FINDINGS_TOL`` when measured,
    else the middle one of ``tolerances``.

    Examples
    --------
    >>> findings_tol([0.01, 0.05, 0.2]), findings_tol([0.02, 0.1, 0.3])
    (0.05, 0.1)
    """
    tolerances = sorted(tolerances)
    return FINDINGS_TOL if FINDINGS_TOL in tolerances else tolerances[len(tolerances) // 2]


def unplanted(records):
    """The records of heads as trained (not planted) that hold an answer."""
    return [r for r in records if r.get("planted_rank") is None and r.get("r_star")]


def answer_at(record, tol, key="r_star"):
    """A head's answer at one of its measured tolerances: ``r*_attn(tol)`` by default.

    Every per-tolerance list of a record (``r_star``, ``r_star_free``,
    ``r_star_text``, ``r_star_lower``, ``below_precision``, ...) is read through
    this accessor, in the order of the record's ``tolerances``.

    Parameters
    ----------
    record : dict
        One head's record (:func:`~intrinsic_rank.experiments.measure_head`, or a
        row of a map's ``records``).
    tol : float
        One of ``record["tolerances"]``.
    key : str, default="r_star"
        The per-tolerance list to read.

    Returns
    -------
    value
        The rank (``None`` when no rank below the head's width reached ``tol``),
        or the list's entry at ``tol``.

    Raises
    ------
    ValueError
        If ``tol`` was not measured for this record, or the record holds no
        answers (a constant head, an unplantable plant).

    Examples
    --------
    >>> rec = dict(tolerances=[0.01, 0.05], r_star=[None, 7], r_star_free=[None, 9])
    >>> answer_at(rec, 0.05), answer_at(rec, 0.01), answer_at(rec, 0.05, "r_star_free")
    (7, None, 9)
    """
    if key not in record or "tolerances" not in record:
        what = ("a constant head" if record.get("constant_output") else
                "a plant that was not sharp" if record.get("plantable") is False else
                "not a measured head's record")
        raise ValueError(f"this record holds no {key} per tolerance ({what})")
    tolerances = record["tolerances"]
    try:
        i = tolerances.index(tol)
    except ValueError:
        raise ValueError(f"tolerance {tol:g} was not measured for this head (its tolerances: "
                         f"{', '.join(f'{t:g}' for t in tolerances)})") from None
    return record[key][i]


def output_spread(Y):
    """A head output's pooled standard deviation over its root mean square (0 when all zero).

    The variance is pooled as in the relative risk: the mean over output
    channels of the variance over every token of every window. A head is
    constant when this is at most :data:`CONSTANT_OUTPUT`.

    Parameters
    ----------
    Y : array-like of shape (..., head_dim)

    Returns
    -------
    spread : float

    Raises
    ------
    ValueError
        If ``Y`` holds no token.

    Examples
    --------
    >>> Y = np.ones((4, 8, 3))
    >>> output_spread(Y), output_spread(np.zeros((4, 8, 3)))
    (0.0, 0.0)
    >>> output_spread(Y + np.arange(8)[None, :, None]) > CONSTANT_OUTPUT
    True
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 0 or Y.size == 0:
        raise ValueError(f"Y must hold a head's output on at least one token; got shape "
                         f"{Y.shape}")
    flat = Y.reshape(-1, Y.shape[-1])
    size = float(np.sqrt(np.mean(flat ** 2)))
    if size == 0:
        return 0.0
    return float(np.sqrt(np.mean(np.var(flat, axis=0)))) / size
