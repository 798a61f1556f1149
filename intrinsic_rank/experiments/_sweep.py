"""The rank sweep on a teacher task: deficiency, achievability and recovery at once."""

import json
import os

import numpy as np
from sklearn.utils import Bunch

from ..datasets import make_attention_task, make_fixed_operator_task
from ..estimators import AttentionRankEstimator
from ._plotting import pyplot, save_figure

__all__ = ["rank_sweep", "plot_sweep", "format_table", "save_records"]

TEACHERS = ("linear", "softmax", "fixed")


def rank_sweep(
    teacher="softmax",
    r_star=4,
    d=16,
    seq_len=8,
    n_samples=2048,
    noise=0.1,
    ranks=None,
    attention=None,
    kernel_scale=2.0,
    max_epochs=200,
    random_state=0,
    verbose=0,
):
    """Sweep student ranks on a teacher of known ``r*`` and estimate ``r*`` back.

    Parameters
    ----------
    teacher : {"linear", "softmax", "fixed"}, default="softmax"
        Teacher task: an attention teacher (:func:`~intrinsic_rank.datasets.make_attention_task`)
        or a fixed operator (:func:`~intrinsic_rank.datasets.make_fixed_operator_task`).
    r_star : int, default=4
        True rank of the teacher.
    d, seq_len, n_samples, noise : int, int, int, float
        Task sizes and noise standard deviation.
    ranks : sequence of int or None, default=None
        Rank grid; ``None`` means ``1 .. min(limit, 2 r*)`` where the limit is
        ``d`` (``seq_len`` for the fixed teacher).
    attention : str or None, default=None
        Student rung; ``None`` matches the teacher (``"fixed"`` for the fixed
        operator).
    kernel_scale : float, default=2.0
        Scale of the attention teacher's kernel.
    max_epochs : int, default=200
        Training epochs of the batched sweep.
    random_state : int, default=0
        Seed of the task and of the sweep.
    verbose : int, default=0
        Passed to the estimator (1 draws a progress bar).

    Returns
    -------
    result : Bunch
        ``records`` (one dict per rank), ``rank_`` (estimated ``r*``),
        ``r_star``, ``noise_floor`` (true), ``noise_floor_`` (estimated),
        ``excess_tol`` (the excess risk that counts as reaching the floor),
        ``config`` and the fitted ``estimator``.

    Examples
    --------
    >>> result = rank_sweep("linear", r_star=2, d=6, seq_len=4, n_samples=600,
    ...                     max_epochs=60)
    >>> result.rank_, result.r_star
    (2, 2)
    """
    if teacher not in TEACHERS:
        raise ValueError(f"unknown teacher {teacher!r}; use one of {TEACHERS}")
    if teacher == "fixed":
        X, Y, info = make_fixed_operator_task(
            n_samples, seq_len, d, rank=r_star, noise=noise,
            random_state=random_state, return_info=True,
        )
        limit = seq_len
    else:
        X, Y, info = make_attention_task(
            teacher, n_samples, seq_len, d, rank=r_star, noise=noise,
            kernel_scale=kernel_scale, random_state=random_state, return_info=True,
        )
        limit = d
    if ranks is None:
        ranks = list(range(1, min(limit, 2 * r_star) + 1))
    attention = attention or teacher
    est = AttentionRankEstimator(
        attention=attention, ranks=list(ranks), max_epochs=max_epochs,
        random_state=random_state, verbose=verbose,
    ).fit(X, Y)
    config = dict(
        teacher=teacher, attention=attention, r_star=r_star, d=d, seq_len=seq_len,
        n_samples=n_samples, noise=noise, ranks=[int(r) for r in ranks],
        kernel_scale=kernel_scale, max_epochs=max_epochs, random_state=random_state,
    )
    return Bunch(
        records=est.sweep_,
        rank_=est.rank_,
        r_star=r_star,
        noise_floor=info.noise_floor,
        noise_floor_=est.noise_floor_,
        excess_tol=est.excess_tol_,
        config=config,
        estimator=est,
    )


def format_table(records, columns=None, floatfmt="{:.4g}"):
    """Render records (a list of dicts) as a fixed-width text table.

    Parameters
    ----------
    records : list of dict
    columns : list of str or None
        Columns to show, in order; ``None`` shows the keys of the first record.
    floatfmt : str, default="{:.4g}"
        Format of floats.

    Returns
    -------
    table : str

    Examples
    --------
    >>> print(format_table([{"rank": 1, "risk": 0.5}, {"rank": 2, "risk": 0.01}]))
    rank  risk
       1   0.5
       2  0.01
    """
    columns = list(records[0]) if columns is None else list(columns)

    def cell(value):
        if isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if isinstance(value, (float, np.floating)):
            return floatfmt.format(value)
        return str(value)

    rows = [[cell(rec[c]) for c in columns] for rec in records]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    # text columns read best left-aligned, numbers right-aligned
    left = [isinstance(records[0][c], str) for c in columns]

    def line(values):
        return "  ".join(
            v.ljust(w) if is_left else v.rjust(w) for v, w, is_left in zip(values, widths, left)
        )

    lines = [line(columns)] + [line(row) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def save_records(path, records, **metadata):
    """Write ``{"records": records, **metadata}`` as JSON (numpy values converted).

    Parameters
    ----------
    path : str or path-like
    records : list of dict
    **metadata
        Extra top-level keys (configuration, estimates).
    """

    def default(value):
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
        raise TypeError(f"cannot write {type(value).__name__} to JSON")

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump({"records": records, **metadata}, handle, indent=2, default=default)


def plot_sweep(result, path=None):
    """Plot excess risk and learned-kernel rank against student rank.

    Parameters
    ----------
    result : Bunch
        The output of :func:`rank_sweep`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    records = result.records
    ranks = np.array([rec["rank"] for rec in records])
    excess = np.array([rec["excess_risk"] for rec in records])
    cfg = result.config
    fig, (ax_risk, ax_rank) = plt.subplots(1, 2, figsize=(11, 4.2))

    # Risks at the floor are ~0 or slightly negative: show them at a visible
    # floor on the log axis rather than dropping them.
    shown = np.maximum(excess, 1e-5)
    ax_risk.semilogy(ranks, shown, "o-", color="C0",
                     label="held-out excess risk (values < 1e-5 drawn at 1e-5)")
    ax_risk.axhline(result.excess_tol, color="C1", ls="--", lw=1,
                    label=f"reaches the floor below {result.excess_tol:.3g}")
    ax_risk.axhline(result.noise_floor, color="grey", ls=":", label=f"noise floor $\\sigma^2$={result.noise_floor:.3g}")
    ax_risk.axvline(result.r_star, color="C2", ls="--", label=f"true $r^*$ = {result.r_star}")
    ax_risk.axvline(result.rank_, color="C3", ls="-.", label=f"estimated $r^*$ = {result.rank_}")
    ax_risk.set_xlabel(f"student rank r ({cfg['attention']})")
    ax_risk.set_ylabel("held-out risk - noise floor (MSE)")
    ax_risk.set_title("Deficiency below $r^*$, achievability from $r^*$")
    ax_risk.set_xticks(ranks)
    ax_risk.legend(fontsize=8, loc="center right")

    ax_rank.plot(ranks, ranks, color="grey", ls=":", label="student rank")
    ax_rank.plot(ranks, [rec["energy_effective_rank"] for rec in records], "o-",
                 label="energy effective rank")
    ax_rank.plot(ranks, [rec["numerical_rank"] for rec in records], "s--",
                 label="numerical rank")
    ax_rank.axhline(result.r_star, color="C2", ls="--", label="true $r^*$")
    ax_rank.set_xlabel("student rank r")
    ax_rank.set_ylabel("rank of the learned kernel")
    ax_rank.set_title("Recovery: what the student learned")
    ax_rank.set_xticks(ranks)
    ax_rank.legend(fontsize=8)
    fig.suptitle(
        f"{cfg['teacher']} teacher, r*={cfg['r_star']}, d={cfg['d']}, L={cfg['seq_len']}, "
        f"n={cfg['n_samples']}, noise={cfg['noise']}, seed={cfg['random_state']}",
        fontsize=10,
    )
    return save_figure(fig, path)
