"""A rank sweep on your own ``X`` and ``Y``: :func:`sweep_data`.

The arrays come from :func:`~intrinsic_rank.experiments.load_xy` (the command
line's ``--data``) or from the caller.
"""

import numpy as np
from sklearn.utils import Bunch

from ...estimators import AttentionRankEstimator

__all__ = ["DEFAULT_MAX_RANK", "evidence", "sweep_data"]

DEFAULT_MAX_RANK = 16
"""The largest rank of the default grid of :func:`sweep_data` (``1 .. min(d, 16)``)."""


def sweep_data(X, Y, *, attention="auto", rank_grid=None, max_epochs=200, noise_floor=None,
               random_state=0, progress=False, device="cpu", source=None):
    """Sweep student ranks on your own ``X`` and ``Y`` and estimate ``r*``.

    The data counterpart of :func:`~intrinsic_rank.experiments.rank_sweep`:
    one :class:`~intrinsic_rank.AttentionRankEstimator` sweep, whose checks
    apply to ``X`` and ``Y``. There is no true ``r*`` to compare with, so
    ``r_star`` is ``None``. ``r*`` is defined inside an attention class; the
    default ``attention="auto"`` chooses it from the data (the held-out risks
    of full-rank students of ``"fixed"``, ``"linear"`` and ``"softmax"``),
    since data of unknown origin come with no class.

    Parameters
    ----------
    X, Y : array-like
        See :func:`load_xy` (shapes as the estimator takes them).
    attention : str, default="auto"
        Student class: ``"auto"`` (chosen by held-out risk), ``"fixed"``,
        ``"linear"``, ``"softmax"`` or ``"block"``.
    rank_grid : sequence of int or None, default=None
        Rank grid; ``None``: ``1 .. min(limit, 16)`` where the limit is the
        token dimension (the sequence length for ``"fixed"``). With ``"auto"``
        the ranks above the chosen class's limit are left out.
    max_epochs : int, default=200
    noise_floor : float or None, default=None
        The noise floor, when you know it (the estimator's ``noise_floor``):
        the ranks are judged against it. ``None`` estimates it from the sweep.
    random_state : int, default=0
    progress : bool, default=False
    device : str, default="cpu"
    source : str or None, default=None
        Where the data came from, for the configuration record.

    Returns
    -------
    result : Bunch
        ``records``, ``rank_``, ``r_star`` (``None``), ``noise_floor`` (the
        one given, else ``None``), ``noise_floor_`` (the floor the ranks were
        judged against), ``excess_tol``, ``floor_reached``, ``reference_risk``,
        the keys of ``evidence`` (the class trained and the other classes'
        risks, the held-out R², the given and the estimated floor), ``config``
        and the fitted ``estimator``, whose ``warnings_`` lists the warnings
        about the estimate.

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
    return Bunch(records=est.sweep_, rank_=est.rank_, r_star=None, noise_floor=noise_floor,
                 noise_floor_=est.noise_floor_, excess_tol=est.excess_tol_,
                 floor_reached=getattr(est, "floor_reached_", None),
                 reference_risk=getattr(est, "reference_risk_", None),
                 **evidence(est, noise_floor), config=config, estimator=est)


def evidence(est, noise_floor=None):
    """The record's keys on the class and the evidence of a fitted sweep ``est``.

    Parameters
    ----------
    est : AttentionRankEstimator
        Fitted with a ``rank_grid``.
    noise_floor : float or None
        The floor given to it, if any.

    Returns
    -------
    keys : dict
        ``attention`` (the class trained: ``attention_``), ``class_risks``
        (``{class: held-out risk}`` of the full-rank students that
        ``attention="auto"`` compared, else ``None``), ``heldout_r2`` (of the
        selected rank), ``estimate_supported`` (``False`` when the data give no
        evidence for the estimate), ``noise_floor_given`` (``None`` when none was
        given), ``noise_floor_estimated`` (the smallest held-out risk of the
        grid, also when a floor is given), and how the students trained:
        ``compute_dtype`` (``compute_dtype_``) and ``n_init`` (``n_init_``).
    """
    return dict(attention=est.attention_, class_risks=est.class_risks_,
                heldout_r2=est.heldout_r2_, estimate_supported=est.estimate_supported_,
                noise_floor_given=noise_floor, noise_floor_estimated=est.estimated_noise_floor_,
                compute_dtype=est.compute_dtype_, n_init=est.n_init_)
