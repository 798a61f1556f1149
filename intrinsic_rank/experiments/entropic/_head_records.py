"""What the figures and the answers of ``head-ranks`` read alike from a map's records."""

from ..._packaged_models import model_title

__all__ = ["FINDINGS_TOL", "findings_tol", "model_name", "unplanted"]

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
