"""The precision conventions of the reachability paper's bounds, side by side (numpy only).

The cell size ``epsilon`` of :func:`~intrinsic_rank.bounds.reachable_slope_bound`
and its refinements is a modelling choice; :func:`precision_for` gives the three
in use, by name, so that every printed ratio can say which one it used.
"""

import sys

from .._validation import check_real
from ._reachability import precision_from_dtype

__all__ = ["PRECISION_CONVENTIONS", "precision_for"]

PRECISION_CONVENTIONS = {
    "machine": "the dtype's machine epsilon (2**-10 fp16, 2**-7 bf16, 2**-23 fp32, "
               "2**-52 fp64), as precision_from_dtype; the library's default",
    "paper": "fp16's machine epsilon 2**-10 whatever the dtype, the dtype of the authors' "
             "cramming runs",
    "relative": "2**(log2(r_inf) - 11) = r_inf / 2048, with r_inf the largest absolute "
                "coordinate of the hidden states, as in the authors' bounds notebook",
}
"""Name -> one-line description of each convention :func:`precision_for` knows."""

_PAPER_EPSILON = 2.0**-10
_RELATIVE_EXPONENT = 11  # the authors' notebook: epsilon = 2 ** (log2(r_inf) - 11)


def precision_for(convention, dtype=None, radius_inf=None):
    """The cell size ``epsilon`` of one of the reachability paper's precision conventions.

    Parameters
    ----------
    convention : {"machine", "paper", "relative"}
        ``"machine"``: the machine epsilon of ``dtype``
        (:func:`~intrinsic_rank.bounds.precision_from_dtype`, the library's
        default). ``"paper"``: ``2**-10``, fp16's machine epsilon (the dtype of
        the authors' cramming runs), whatever the dtype. ``"relative"``: the authors'
        code, ``2**(log2(r_inf) - 11) = r_inf * 2**-11``, a cell relative to the
        largest coordinate (fp16's unit roundoff at ``r_inf``; the exponent 11
        is fixed whatever the dtype, as in their notebook). See
        :data:`PRECISION_CONVENTIONS`.
    dtype : numpy dtype, str or torch dtype, optional
        Required by ``"machine"`` (any form
        :func:`~intrinsic_rank.bounds.precision_from_dtype` reads); ignored by
        the other two.
    radius_inf : float, optional
        ``r_inf > 0``, the largest absolute coordinate of the hidden states
        (``hidden_state_geometry(h).radius``). Required by ``"relative"``;
        ignored by the other two.

    Returns
    -------
    epsilon : float
        In hidden-state units. ``"relative"`` gives ``epsilon >= 1`` when
        ``r_inf >= 2048``, which the bounds (``epsilon`` in ``(0, 1)``) reject.

    Raises
    ------
    ValueError
        An unknown convention (the message lists the names), or the argument
        the convention needs is missing or invalid.

    Examples
    --------
    >>> precision_for("machine", dtype="float32") == 2**-23
    True
    >>> precision_for("paper")
    0.0009765625
    >>> precision_for("relative", radius_inf=8.0) == 2**-8
    True
    """
    if not isinstance(convention, str) or convention not in PRECISION_CONVENTIONS:
        raise ValueError(
            f"convention must be one of {', '.join(repr(n) for n in PRECISION_CONVENTIONS)}; "
            f"got {convention!r}"
        )
    if convention == "machine":
        if dtype is None:
            raise ValueError("dtype is required for convention='machine'; got None")
        return precision_from_dtype(dtype)
    if convention == "paper":
        return _PAPER_EPSILON
    if radius_inf is None:
        raise ValueError("radius_inf is required for convention='relative'; got None")
    r = check_real(radius_inf, "radius_inf", 0.0, low_open=True)
    epsilon = float(r * 2.0**-_RELATIVE_EXPONENT)
    if epsilon < sys.float_info.min:  # below the normal range: digits lost, or 0
        raise ValueError(
            f"radius_inf must be at least 2**-1011 (about {2.0**-1011:.3g}) for "
            f"convention='relative', so that r_inf / 2048 is a normal float64; got {r!r}"
        )
    return epsilon
