"""The words of the reachability geometry's tables: labels, rows and what does not apply.

:mod:`intrinsic_rank.inspection` measures a model's hidden-state geometry and
the bounds of "How many different outputs can a Transformer generate?" as
numbers; the commands that print them (``reach``, ``lm-geometry``,
``profile``) share the text here: the label of each precision convention, the
cone and decoder-cell rows, and, for a model without a next-token head, which
measurements do not apply and why. Missing values read as every table's
(:func:`~intrinsic_rank.experiments.runner.number_text`).
"""

import math

from ._tables import MISSING, number_text

__all__ = ["GEOMETRY_BOUND_COLUMNS", "convention_label", "geometry_record",
           "label_bound_rows", "not_applicable", "refinement_rows"]

GEOMETRY_BOUND_COLUMNS = ["bound", "convention", "log_count_bound", "slope_bound", "ratio"]
"""Columns of a geometry's printed bounds table (rows of :func:`label_bound_rows`)."""


def convention_label(convention, eps):
    """The row label of a precision convention in the bounds tables.

    Parameters
    ----------
    convention : str
        A precision convention of :func:`~intrinsic_rank.bounds.precision_for`
        (``"machine"``, ``"paper"``, ``"relative"``).
    eps : float
        The precision the convention gave; NaN where it does not apply.

    Returns
    -------
    label : str

    Examples
    --------
    >>> convention_label("paper", 2.0**-10), convention_label("machine", 2.0**-23)
    ('paper fp16 ε = 2^-10', 'machine ε = 2^-23')
    >>> convention_label("relative", float("nan"))
    'relative ε: –'
    """
    if not (isinstance(eps, float) and math.isfinite(eps) and eps > 0):
        return f"{convention} ε: {MISSING}"
    exponent = math.log2(eps)
    power = f"2^{exponent:.0f}" if exponent == round(exponent) else f"2^{exponent:.2f}"
    if convention == "paper":
        return f"paper fp16 ε = {power}"
    if convention == "relative":
        return f"relative ε = 2^(log2 r∞ − 11) = {power}"
    return f"{convention} ε = {power}"


def label_bound_rows(rows):
    """Bounds rows with the label of their precision convention (``convention``).

    Parameters
    ----------
    rows : list of dict
        As :func:`~intrinsic_rank.inspection.bound_rows` returns them:
        ``bound``, ``precision_convention``, ``precision`` and the numbers.

    Returns
    -------
    rows : list of dict
        New rows, ``convention`` (:func:`convention_label`) after ``bound``,
        the other keys as given.

    Examples
    --------
    >>> label_bound_rows([dict(bound="ball", precision_convention="paper",
    ...                        precision=2.0**-10, slope_bound=40.0)])[0]["convention"]
    'paper fp16 ε = 2^-10'
    """
    return [dict(bound=row["bound"],
                 convention=convention_label(row["precision_convention"],
                                             float(row["precision"])),
                 **{k: v for k, v in row.items() if k not in ("bound", "convention")})
            for row in rows]


def not_applicable(geometry):
    """What a geometry's model cannot be measured for, in words, with why.

    Parameters
    ----------
    geometry : mapping
        Of :func:`~intrinsic_rank.inspection.reachability_geometry`: its
        ``kind`` (``"encoder"`` has no next-token head) and ``cell_error`` (why
        the decoder cells could not be counted, or None).

    Returns
    -------
    items : list of str
        Empty when everything applies.

    Examples
    --------
    >>> len(not_applicable(dict(kind="encoder", cell_error=None)))
    3
    >>> not_applicable(dict(kind="causal LM", cell_error="too many points"))
    ['decoder cells (box + cells bound): too many points']
    """
    if geometry["kind"] == "encoder":
        return [
            "slope bound C = d ln(1 + 2r/eps) / ln|V| and its box, cone and box + cells "
            "refinements: they bound the length of generated token sequences, and this "
            "model has no next-token head (so no decoder cells either)",
            "cramming, accessibility curves and n50 (ReachabilityEstimator, "
            "accessibility_curves): they decode tokens greedily from the model",
            "copy-length cliff: it trains and decodes a causal LM",
        ]
    if geometry.get("cell_error") is not None:
        return [f"decoder cells (box + cells bound): {geometry['cell_error']}"]
    return []


def geometry_record(geometry):
    """A geometry as the commands save and print it: labelled bounds, what does not apply.

    Parameters
    ----------
    geometry : mapping
        Of :func:`~intrinsic_rank.inspection.reachability_geometry`.

    Returns
    -------
    record : dict
        Its keys, ``bounds`` labelled (:func:`label_bound_rows`) and
        ``not_applicable`` (:func:`not_applicable`) added.
    """
    record = dict(geometry)
    record["bounds"] = label_bound_rows(geometry["bounds"])
    record["not_applicable"] = not_applicable(geometry)
    return record


def refinement_rows(cone, cells):
    """The cone and decoder-cell numbers as ``quantity``/``value`` rows (text).

    Parameters
    ----------
    cone : mapping
        ``min_cosine``, ``half_angle`` (radians) and ``log_fraction`` (the
        ``cone`` of :func:`~intrinsic_rank.experiments.accessibility_curves`; a
        geometry's ``min_cosine``, ``cone_half_angle`` and
        ``cone_log_fraction`` work too).
    cells : mapping or None
        The ``cells`` of :func:`~intrinsic_rank.experiments.accessibility_curves`
        or :func:`~intrinsic_rank.inspection.reachability_geometry`; None gives
        "–" rows.

    Returns
    -------
    rows : list of dict

    Examples
    --------
    >>> rows = refinement_rows(dict(min_cosine=-0.4, half_angle=1.982, log_fraction=-1e-6),
    ...                        None)
    >>> rows[0]["value"], rows[1]["value"], rows[-1]["value"]
    ('-0.400', '1.982 rad (113.6°)', '–')
    """
    theta = cone.get("half_angle", cone.get("cone_half_angle"))
    log_fraction = cone.get("log_fraction", cone.get("cone_log_fraction"))
    cells = cells or {}

    def measured(value):  # a decay or share that was not (or could not be) measured
        return value is not None and math.isfinite(value)

    def pm(key):
        value = cells.get(key)
        if not measured(value):
            return MISSING
        return f"{value:.4g} ± {number_text(cells.get(f'{key}_se'), '{:.2g}')} nats per token"

    disagree = cells.get("rule_disagreement")
    return [
        dict(quantity="smallest pairwise cosine of the hidden states",
             value=number_text(cone["min_cosine"], "{:.3f}")),
        dict(quantity="cone half-angle θ = arccos(min cosine)",
             value=MISSING if theta is None
             else f"{theta:.3f} rad ({math.degrees(theta):.1f}°)"),
        dict(quantity="ln(share of the ball inside the cone), per vector",
             value=number_text(log_fraction, "{:.3g}") + " nats"),
        dict(quantity="cell decay c, closed form −mean_t ln p_t", value=pm("closed_form")),
        dict(quantity="cell decay c, fitted (median of the k-fold product)", value=pm("fitted")),
        dict(quantity="ln|V| (equal cells)", value=number_text(cells.get("ln_vocab"), "{:.4g}")),
        dict(quantity="tokens whose estimated cell is empty",
             value=number_text(cells.get("n_empty"))),
        dict(quantity=f"Monte Carlo points, uniform in the {cells.get('region', 'box')} "
                      "of the states", value=number_text(cells.get("n_samples"))),
        dict(quantity="points where argmax(W h + b) and the nearest row differ",
             value=f"{100 * disagree:.2f}%" if measured(disagree) else MISSING),
    ]
