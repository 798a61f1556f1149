"""A rank sweep on your own ``X`` and ``Y``: :func:`sweep_data`.

The arrays come from :func:`~intrinsic_rank.experiments.load_xy` (the command
line's ``--data``) or from the caller.
"""

import numpy as np
from sklearn.utils import Bunch

from ...estimators import AttentionRankEstimator

__all__ = ["DEFAULT_MAX_RANK", "sweep_data"]

DEFAULT_MAX_RANK = 16
"""The largest rank of the default grid of :func:`sweep_data` (``1 .. min(d, 16)``)."""


def sweep_data(X, Y, *, attention="softmax", rank_grid=None, max_epochs=200, noise_floor=None,
               random_state=0, progress=False, device="cpu", source=None):
    """Sweep student ranks on your own ``X`` and ``Y`` and estimate ``r*``.

    The data counterpart of :func:`~intrinsic_rank.experiments.rank_sweep`:
    one :class:`~intrinsic_rank.AttentionRankEstimator` sweep, whose checks
    apply to ``X`` and ``Y``. There is no true ``r*`` or noise floor to
    compare with, so ``r_star`` and ``noise_floor`` are ``None``.

    Parameters
    ----------
    X, Y : array-like
        See :func:`load_xy` (shapes as the estimator takes them).
    attention : str, default="softmax"
        Student rung (``"fixed"``, ``"linear"``, ``"softmax"``, ``"block"``).
    rank_grid : sequence of int or None, default=None
        Rank grid; ``None``: ``1 .. min(limit, 16)`` where the limit is the
        token dimension (the sequence length for ``"fixed"``).
    max_epochs : int, default=200
    noise_floor : float or None, default=None
        The noise floor, when you know it (the estimator's ``noise_floor``);
        ``None`` estimates it from the sweep.
    random_state : int, default=0
    progress : bool, default=False
    device : str, default="cpu"
    source : str or None, default=None
        Where the data came from, for the configuration record.

    Returns
    -------
    result : Bunch
        ``records``, ``rank_``, ``r_star`` (``None``), ``noise_floor``
        (``None``), ``noise_floor_``, ``excess_tol``, ``floor_reached``,
        ``reference_risk``, ``config`` and the fitted ``estimator``.

    Examples
    --------
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y = make_attention_task("linear", n_samples=600, seq_len=4, d=6, rank=2,
    ...                            random_state=0)
    >>> result = sweep_data(X, Y, attention="linear", rank_grid=[1, 2, 3], max_epochs=60)
    >>> result.rank_, result.r_star
    (2, None)
    """
    X = np.asarray(X)
    shape = X.shape
    if rank_grid is None:
        if X.ndim not in (2, 3):
            raise ValueError(f"--data: X must be (n, L, d) or (n, L); got shape {shape}")
        limit = shape[1] if attention == "fixed" or X.ndim == 2 else shape[2]
        rank_grid = list(range(1, max(1, min(limit, DEFAULT_MAX_RANK)) + 1))
    est = AttentionRankEstimator(
        attention=attention, rank_grid=list(rank_grid), max_epochs=max_epochs,
        noise_floor=noise_floor, random_state=random_state, device=device,
        verbose=int(bool(progress)),
    ).fit(X, Y)
    config = dict(
        teacher=None, data=source, attention=attention, r_star=None,
        n_samples=int(shape[0]), seq_len=int(shape[1]) if X.ndim > 1 else None,
        d=int(shape[2]) if X.ndim > 2 else None, noise=None,
        rank_grid=[int(r) for r in rank_grid], max_epochs=max_epochs, noise_floor=noise_floor,
        random_state=random_state,
    )
    return Bunch(records=est.sweep_, rank_=est.rank_, r_star=None, noise_floor=None,
                 noise_floor_=est.noise_floor_, excess_tol=est.excess_tol_,
                 floor_reached=getattr(est, "floor_reached_", None),
                 reference_risk=getattr(est, "reference_risk_", None),
                 config=config, estimator=est)
