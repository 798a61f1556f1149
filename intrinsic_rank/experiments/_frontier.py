"""The predictability frontier: how far ``r*`` can be read from data before training."""

import warnings

import numpy as np
from sklearn.utils import Bunch

from ..datasets import make_attention_task
from ..estimators import EnergyEffectiveRank
from ._plotting import pyplot, save_figure

__all__ = ["predictability_frontier", "plot_frontier", "FRONTIER_TEACHERS"]

FRONTIER_TEACHERS = {
    "linear, V known": ("linear", "linear", True),
    "linear, V unknown": ("linear", "linear", False),
    "softmax, linear-QK fit": ("softmax", "linear", True),
    "softmax, log-inverted mixers": ("softmax", "softmax", True),
}
"""Frontier settings: label -> (teacher kind, fitted operator family, value map known).

``"softmax, linear-QK fit"`` fits the linear-in-``K`` model to a softmax teacher
(the surrogate whose spectrum softmax corrupts); ``"softmax, log-inverted
mixers"`` solves each sequence's realised mixer and inverts it through the log,
which needs ``V`` and ``d_out >= L``."""


def predictability_frontier(
    r_stars=None,
    d=16,
    seq_len=8,
    n_samples=4096,
    noise=0.1,
    kernel_scale=2.0,
    teachers=tuple(FRONTIER_TEACHERS),
    recovery=True,
    max_epochs=200,
    random_state=0,
    progress=False,
):
    """Predicted against true ``r*`` for data-only estimators (and recovery).

    For every ``r*`` of the grid and every teacher setting, one teacher task is
    drawn and :class:`~intrinsic_rank.EnergyEffectiveRank` with
    ``method="data"`` reads three estimates off it: the noise-aware numerical
    rank, the energy effective rank of the fitted kernel (or lifted matrix) and
    the input-averaged energy rank of the realised mixers. With ``recovery``, an
    over-parameterised student (``method="recovery"``) is trained on the softmax
    teachers too (once per ``r*``, in the log-inversion rows), and its kernel's
    energy and numerical ranks are recorded.

    Parameters
    ----------
    r_stars : sequence of int or None, default=None
        True ranks; ``None`` means ``1 .. d``.
    d, seq_len, n_samples, noise, kernel_scale : int, int, int, float, float
        Teacher sizes (``d_out = d``).
    teachers : sequence of str, default=all of ``FRONTIER_TEACHERS``
        Which teacher settings to run.
    recovery : bool, default=True
        Also train the recovery student on softmax teachers.
    max_epochs : int, default=200
        Epochs of the recovery student.
    random_state : int, default=0
        Seed; teacher ``r*`` uses ``random_state + r*``.
    progress : bool, default=False
        Draw a progress bar over the grid.

    Returns
    -------
    result : Bunch
        ``records``: one dict per (teacher, ``r*``) with ``teacher``, ``r_star``,
        ``numerical_rank``, ``energy_rank``, ``mixer_energy_rank`` (NaN where the
        kernel is not identified), and for recovery rows
        ``recovery_energy_rank`` / ``recovery_numerical_rank``; ``config``.

    Examples
    --------
    >>> result = predictability_frontier(r_stars=[1, 3], d=6, seq_len=6,
    ...                                  n_samples=800, teachers=["linear, V known"],
    ...                                  recovery=False)
    >>> [(rec["r_star"], rec["numerical_rank"]) for rec in result.records]
    [(1, 1), (3, 3)]
    """
    unknown = [t for t in teachers if t not in FRONTIER_TEACHERS]
    if unknown:
        raise ValueError(f"unknown teacher setting(s) {unknown}; use {list(FRONTIER_TEACHERS)}")
    if d < seq_len and "softmax, log-inverted mixers" in teachers:
        # The solved mixers need d_out = d >= L; say so rather than fail the grid.
        warnings.warn(
            f"skipping 'softmax, log-inverted mixers': it needs d >= L (d_out = d = {d}, "
            f"L = {seq_len})",
            UserWarning,
        )
        teachers = [t for t in teachers if t != "softmax, log-inverted mixers"]
    r_stars = list(range(1, d + 1)) if r_stars is None else [int(r) for r in r_stars]
    jobs = [(t, r) for t in teachers for r in r_stars]
    if progress:
        from tqdm.auto import tqdm

        jobs = tqdm(jobs, desc="frontier", leave=False, disable=None)
    records = []
    for label, r_star in jobs:
        kind, family, value_known = FRONTIER_TEACHERS[label]
        X, Y, info = make_attention_task(
            kind, n_samples, seq_len, d, rank=r_star, noise=noise,
            kernel_scale=kernel_scale, random_state=random_state + r_star,
            return_info=True,
        )
        est = EnergyEffectiveRank(
            method="data", attention=family,
            value_map=info.value_map if value_known else None,
        ).fit(X, Y)
        record = {
            "teacher": label,
            "r_star": r_star,
            "numerical_rank": int(est.numerical_rank_),
            "energy_rank": float(est.effective_rank_),
            "mixer_energy_rank": (
                float("nan") if est.mixer_energy_rank_ is None else float(est.mixer_energy_rank_)
            ),
            "recovery_energy_rank": float("nan"),
            "recovery_numerical_rank": float("nan"),
        }
        if recovery and kind == "softmax" and family == "softmax":
            student = EnergyEffectiveRank(
                method="recovery", attention=kind, max_epochs=max_epochs,
                random_state=random_state + r_star,
            ).fit(X, Y)
            record["recovery_energy_rank"] = float(student.effective_rank_)
            record["recovery_numerical_rank"] = int(student.numerical_rank_)
        records.append(record)
    config = dict(
        r_stars=r_stars, d=d, seq_len=seq_len, n_samples=n_samples, noise=noise,
        kernel_scale=kernel_scale, teachers=list(teachers), recovery=recovery,
        max_epochs=max_epochs, random_state=random_state,
    )
    return Bunch(records=records, config=config)


_ESTIMATORS = [
    ("numerical_rank", "numerical rank (noise-aware)", "s--"),
    ("energy_rank", "energy effective rank", "o-"),
    ("mixer_energy_rank", "realised-mixer energy rank", "^:"),
    ("recovery_energy_rank", "recovery student: energy rank", "D-"),
    ("recovery_numerical_rank", "recovery student: numerical rank", "x--"),
]


def plot_frontier(result, path=None):
    """Predicted against true ``r*``, one panel per teacher setting.

    Parameters
    ----------
    result : Bunch
        The output of :func:`predictability_frontier`.
    path : str or None
        Where to save the PNG.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    teachers = result.config["teachers"]
    columns = min(2, len(teachers))
    rows_of_panels = -(-len(teachers) // columns)
    fig, axes = plt.subplots(
        rows_of_panels, columns, figsize=(5.5 * columns, 4.6 * rows_of_panels), squeeze=False
    )
    for ax in axes.flat[len(teachers):]:
        ax.set_visible(False)
    d = result.config["d"]
    for ax, label in zip(axes.flat, teachers):
        rows = [rec for rec in result.records if rec["teacher"] == label]
        truth = np.array([rec["r_star"] for rec in rows])
        ax.plot([0, d + 1], [0, d + 1], color="grey", lw=1, ls=":", label="exact")
        for key, name, style in _ESTIMATORS:
            values = np.array([rec[key] for rec in rows], dtype=float)
            if np.all(np.isnan(values)):
                continue
            ax.plot(truth, values, style, label=name, ms=5)
        ax.set_title(label)
        ax.set_xlabel("true r*")
        ax.set_ylabel("predicted r*")
        ax.set_xlim(0, d + 1)
        ax.set_ylim(0, max(d + 1, np.nanmax([[rec[k] for k, _, _ in _ESTIMATORS] for rec in rows]) + 1))
        ax.legend(fontsize=7, loc="upper left")
    cfg = result.config
    fig.suptitle(
        f"Predictability frontier: d = {cfg['d']}, L = {cfg['seq_len']}, "
        f"n = {cfg['n_samples']}, noise = {cfg['noise']}, kernel scale = {cfg['kernel_scale']}",
        fontsize=10,
    )
    return save_figure(fig, path)
