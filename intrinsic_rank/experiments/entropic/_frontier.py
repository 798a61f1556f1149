"""The predictability frontier: how far ``r*`` can be read from data before training.

The work of the experiment ``frontier``, declared in :mod:`intrinsic_rank.experiments.entropic`.
"""

import time
import warnings

import numpy as np
from sklearn.utils import Bunch

from ...datasets import make_attention_task
from ...estimators import AttentionRankEstimator, EnergyEffectiveRank
from ..._validation import check_allocation
from ..runner import MISSING, jsonable, pyplot, save_figure
from ..runner import Verdict, grade, is_finite, number_text, one_plot

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
    device="cpu",
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
    device : str or torch.device, default="cpu"
        Where the recovery students train (the data-only fits run in numpy).

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
            UserWarning, stacklevel=2,
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
            "energy_rank": float(est.energy_effective_rank_),
            "mixer_energy_rank": (
                float("nan") if est.mixer_energy_rank_ is None else float(est.mixer_energy_rank_)
            ),
            "recovery_energy_rank": float("nan"),
            "recovery_numerical_rank": float("nan"),
        }
        if recovery and kind == "softmax" and family == "softmax":
            student = EnergyEffectiveRank(
                method="recovery", attention=kind, random_state=random_state + r_star,
                student=AttentionRankEstimator(attention=kind, max_epochs=max_epochs,
                                               n_init=1, device=device),
            ).fit(X, Y)
            record["recovery_energy_rank"] = float(student.energy_effective_rank_)
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

# drawing styles of the estimators above: colour, hollow marker, marker size, and a small
# horizontal offset so that curves on the same values stay visible side by side
_STYLES = {
    "numerical_rank": ("C0", True, 6.5, -0.16),
    "energy_rank": ("C1", False, 4.5, -0.05),
    "mixer_energy_rank": ("C2", False, 5.0, 0.0),
    "recovery_energy_rank": ("C3", True, 6.0, 0.08),
    "recovery_numerical_rank": ("C4", False, 6.0, 0.18),
}


def plot_frontier(result, path=None):
    """Predicted against true ``r*``, one panel per teacher setting.

    Every estimator has its own colour, marker and line style and is drawn a
    fraction of a rank to the side (at most 0.18), so that estimators that
    agree stay visible next to each other rather than on top of each other.
    One legend for all panels sits in its own row under them, off the curves.

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
    fig = plt.figure(figsize=(5.5 * columns, 4.6 * rows_of_panels + 0.9))
    grid = fig.add_gridspec(rows_of_panels + 1, columns,
                            height_ratios=[1.0] * rows_of_panels + [0.2])
    axes = [fig.add_subplot(grid[i // columns, i % columns]) for i in range(len(teachers))]
    d = result.config["d"]
    handles = {}
    for ax, label in zip(axes, teachers):
        rows = [rec for rec in result.records if rec["teacher"] == label]
        truth = np.array([rec["r_star"] for rec in rows])
        handles.setdefault("exact", ax.plot([0, d + 1], [0, d + 1], color="grey", lw=1,
                                            ls=":", label="exact (predicted = true)")[0])
        for key, name, style in _ESTIMATORS:
            values = np.array([rec[key] for rec in rows], dtype=float)
            if np.all(np.isnan(values)):
                continue
            colour, hollow, size, offset = _STYLES[key]
            line, = ax.plot(truth + offset, values, style, color=colour, ms=size, label=name,
                            mfc="none" if hollow else colour, mew=1.3, lw=1.3)
            handles.setdefault(key, line)
        ax.set_title(label)
        ax.set_xlabel("true r*")
        ax.set_ylabel("predicted r*")
        ax.set_xlim(0, d + 1)
        ax.set_ylim(0, max(d + 1, np.nanmax(np.array(
            [[rec[k] for k, _, _ in _ESTIMATORS] for rec in rows], dtype=float)) + 1))
    legend_ax = fig.add_subplot(grid[rows_of_panels, :])
    legend_ax.axis("off")
    legend_ax.legend(list(handles.values()), [h.get_label() for h in handles.values()],
                     loc="center", ncol=3, fontsize=9, frameon=False)
    cfg = result.config
    fig.suptitle(
        f"Predictability frontier: d = {cfg['d']}, L = {cfg['seq_len']}, "
        f"n = {cfg['n_samples']}, noise = {cfg['noise']}, kernel scale = {cfg['kernel_scale']}",
        fontsize=10,
    )
    return save_figure(fig, path)


# -- the experiment: ``frontier`` -------------------------------------------------------

FRONTIER_COLUMNS = ["teacher", "r_star", "numerical_rank", "energy_rank",
                    "mixer_energy_rank", "recovery_energy_rank", "recovery_numerical_rank"]
"""Columns of the frontier's table (the CLI's and the reproduce report's)."""


def _run(settings, *, random_state, progress, device):
    tic = time.perf_counter()
    result = predictability_frontier(random_state=random_state, progress=progress,
                                     device=device, **settings)
    return jsonable(dict(records=result.records, config=result.config,
                         seconds=time.perf_counter() - tic))


def _tables(result):
    return [(f"predicted r* from data alone ({MISSING}: not applicable)", result["records"],
             FRONTIER_COLUMNS)]


RANK_TOL = 0.5
"""Half a rank: an estimate within it of ``r*`` rounds to ``r*``, one beyond it reads another
rank. The frontier's over/under-estimation and recovery rules use it."""

SATURATION_SLOPE = 0.5
"""The mixer energy rank "saturates" when its least-squares slope against ``r*`` over
``r* <= L`` is below this: halfway between an estimator that tracks ``r*`` (slope 1) and one
that does not move (slope 0)."""


def _interior(rows, d):
    """The small (``1 < r* <= d/4``) and large (``3d/4 <= r* < d``) interior grid points.

    The ends ``r* = 1`` and ``r* = d`` are left out: every energy rank of a ``d x d``
    matrix lies in ``[1, d]``, so it cannot be below ``r* = 1`` nor above ``r* = d``.
    """
    small = [rec for rec in rows if 1 < rec["r_star"] <= d / 4]
    large = [rec for rec in rows if 3 * d / 4 <= rec["r_star"] < d]
    return small, large


def _saturation_slope(rows, seq_len):
    """Least-squares slope of the mixer energy rank against ``r*`` over ``r* <= L``."""
    pts = [(rec["r_star"], rec["mixer_energy_rank"]) for rec in rows
           if rec["r_star"] <= seq_len and is_finite(rec["mixer_energy_rank"])]
    if len({r for r, _ in pts}) < 2:
        return float("nan"), pts
    x, y = np.array(pts, dtype=float).T
    return float(np.polyfit(x, y, 1)[0]), pts


def _verdicts(result, rank_tol=RANK_TOL):
    """Exact linear-QK prediction; the softmax frontier; mixer saturation; recovery.

    The claims are the paper's ("The Entropic Bound", Byeong Hoon Yoon, 2026,
    section 3: the data-only predictability frontier). The rules, fixed before
    any run:

    * **Linear QK, V known / unknown** ("numerical and energy rank coincide
      perfectly with r*"): agrees when the noise-aware numerical rank equals
      ``r*`` at every grid point, partly at some, does not agree at none.
    * **Softmax, the linear-QK fit's numerical rank saturates** ("17-23"):
      agrees when it is exact at no more than half of the grid *and* its range
      over the grid is at most half the range of ``r*``; one of the two partly.
    * **Softmax energy rank over-estimates small and compresses large r*:**
      judged at the interior points only (:func:`_interior`: ``1 < r* <= d/4``
      and ``3d/4 <= r* < d``; at ``r* = 1`` and ``r* = d`` the inequalities
      hold for any estimate). Over-estimates: above ``r* + 0.5`` at every small
      point; compresses: below ``r* - 0.5`` at every large point (half a rank:
      :data:`RANK_TOL`, a deviation that rounding does not remove). Both agree,
      one partly, none does not agree.
    * **Softmax r* cannot be read exactly from data:** agrees when neither the
      linear-QK fit nor the log-inverted mixers are exact at every point;
      partly when one of them is; does not agree when both are.
    * **The realised mixer's energy rank saturates on linear teachers:** its
      least-squares slope against ``r*`` over the points ``r* <= L`` (where an
      ``L x L`` mixer could still follow ``r*``) is below
      :data:`SATURATION_SLOPE` = 0.5: agrees; otherwise does not agree.
    * **Recovery on softmax teachers:** every student's energy rank within 0.5
      of ``r*`` agrees, some partly, none does not agree.

    Plausible alternatives these rules refuse: an exact estimate with small
    noise (over/under), a mixer rank that follows ``r*`` up to ``L`` (the
    saturation), an exact softmax fit (the partial frontier).
    """
    rows = {}
    for rec in result["records"]:
        rows.setdefault(rec["teacher"], []).append(rec)
    config = result["config"]
    verdicts = _linear_verdicts(rows)
    if rows.get("softmax, linear-QK fit"):
        verdicts += _softmax_verdicts(rows, config["d"], rank_tol)
    linear = rows.get("linear, V known")
    if linear:
        slope, pts = _saturation_slope(linear, config["seq_len"])
        if is_finite(slope):
            saturated = slope < SATURATION_SLOPE
            verdicts.append(Verdict(
                "the realised mixer's energy rank, averaged over inputs, saturates on linear "
                "teachers",
                f"linear teacher, L = {config['seq_len']}: mixer energy rank "
                + ", ".join(f"{number_text(m)} at r* = {r}" for r, m in pts)
                + f"; slope {number_text(slope)} per unit of r*",
                "agrees" if saturated else "does not agree",
                f"least-squares slope over r* <= L below {SATURATION_SLOPE:g} (halfway between "
                "following r* and not moving) agrees; past r* = L an L x L mixer cannot "
                "follow r* at all, so those points are left out",
            ))
    recovery = [rec for rec in result["records"] if is_finite(rec["recovery_energy_rank"])]
    if recovery:
        close = [rec for rec in recovery
                 if abs(rec["recovery_energy_rank"] - rec["r_star"]) <= rank_tol]
        worst = max(abs(rec["recovery_energy_rank"] - rec["r_star"]) for rec in recovery)
        numerical = sorted({rec["recovery_numerical_rank"] for rec in recovery})
        verdicts.append(Verdict(
            "recovery on softmax teachers: a trained over-parameterised student's energy "
            "rank concentrates at r*",
            f"energy rank within {number_text(worst)} of r* (numerical rank "
            f"{number_text(min(numerical))}-{number_text(max(numerical))})",
            grade(len(close), len(recovery)),
            f"{len(close)} of {len(recovery)} students within {rank_tol:g} of r* (it rounds "
            "to r*); all agrees, some partly",
        ))
    return verdicts


def _exact(rows, label):
    """How many grid points of a setting have numerical rank = r*, and of how many."""
    got = rows.get(label, [])
    return sum(rec["numerical_rank"] == rec["r_star"] for rec in got), len(got)


def _linear_verdicts(rows):
    verdicts = []
    for label, claim in (
        ("linear, V known", "linear QK with V known: least squares for K gives r* exactly "
                            "(numerical rank = r*)"),
        ("linear, V unknown", "linear QK with V unknown: the lifted K (x) V fit gives r* "
                              "exactly at sufficient sample size"),
    ):
        if label in rows:
            k, n = _exact(rows, label)
            worst = max(abs(rec["energy_rank"] - rec["r_star"]) for rec in rows[label])
            verdicts.append(Verdict(
                claim,
                f"numerical rank exact in {k}/{n}; energy rank within {number_text(worst)} "
                "of r*",
                grade(k, n),
                f"exact in {k} of {n} values of r*; all agrees, some partly",
            ))
    return verdicts


def _softmax_verdicts(rows, d, rank_tol):
    fit = rows["softmax, linear-QK fit"]
    k, n = _exact(rows, "softmax, linear-QK fit")
    truth = [rec["r_star"] for rec in fit]
    numerical = [rec["numerical_rank"] for rec in fit]
    compressed = (max(numerical) - min(numerical)) <= 0.5 * (max(truth) - min(truth))
    partial = k <= n / 2
    verdicts = [Verdict(
        "softmax: only partial prediction -- the numerical rank of the linear-QK fit "
        "saturates (the paper saw 17-23)",
        f"numerical rank {min(numerical)}-{max(numerical)} for r* = "
        f"{min(truth)}-{max(truth)}; exact in {k}/{n}",
        grade(partial + compressed, 2),
        f"exact in at most half ({'yes' if partial else 'no'}) and its range at most "
        f"half the range of r* ({'yes' if compressed else 'no'}); both agree, one partly",
    )]
    small, large = _interior(fit, d)
    if small and large:
        over = all(rec["energy_rank"] > rec["r_star"] + rank_tol for rec in small)
        under = all(rec["energy_rank"] < rec["r_star"] - rank_tol for rec in large)
        verdicts.append(Verdict(
            "softmax: the energy effective rank over-estimates small r* and compresses "
            "large r*",
            "; ".join(f"r* = {rec['r_star']}: {number_text(rec['energy_rank'])}"
                      for rec in small + large),
            grade(over + under, 2),
            f"above r* + {rank_tol:g} at every small interior r* "
            f"({', '.join(str(rec['r_star']) for rec in small)}: "
            f"{'yes' if over else 'no'}) and below r* - {rank_tol:g} at every large "
            f"interior r* ({', '.join(str(rec['r_star']) for rec in large)}: "
            f"{'yes' if under else 'no'}); r* = 1 and d are left out, where every "
            "estimate passes; both agree, one partly",
        ))
    if rows.get("softmax, log-inverted mixers"):
        k_inv, n_inv = _exact(rows, "softmax, log-inverted mixers")
        fit_partial, inv_partial = k < n, k_inv < n_inv
        verdicts.append(Verdict(
            "softmax: r* cannot be read exactly from data alone, before training",
            f"linear-QK fit exact in {k}/{n}; log-inverted mixers (V known, "
            f"d_out >= L) exact in {k_inv}/{n_inv}",
            grade(fit_partial + inv_partial, 2),
            "neither estimator exact at every r* agrees, one of them partly; "
            + ("the linear-QK surrogate misses" if fit_partial else
               "the linear-QK surrogate is exact")
            + ("; inverting each sequence's mixer through the log, which the paper did "
               "not try, reads r* exactly in this favourable setting" if not inv_partial
               else "; the log-inverted mixers miss too"),
        ))
    return verdicts


def _prepare(settings, folder):
    """The command's settings: under ``--quick`` without ``--r-star``, the quick r* up to d."""
    from . import FRONTIER

    if settings.pop("quick") and settings["r_stars"] is None:
        settings["r_stars"] = [r for r in FRONTIER.quick["r_stars"] if r <= settings["d"]] or None
    return settings


def _check(settings):
    """The teacher tasks and the lifted normal equations within memory, before any work."""
    d, L, n = settings["d"], settings["seq_len"], settings["n_samples"]
    unknowns = d * d * (d + 1) // 2  # the lifted fit of an unknown value map
    check_allocation(24 * n * L * d + 8 * unknowns**2, "--d, --seq-len and --n-samples",
                     "the teacher tasks and the lifted normal equations")


_plot = one_plot(plot_frontier, "frontier.png")


def _summary(result):
    cfg = result["config"]
    lines = [
        f"Predictability frontier (d = {cfg['d']}, L = {cfg['seq_len']}, "
        f"n = {cfg['n_samples']}, noise = {cfg['noise']}, kernel scale = "
        f"{cfg['kernel_scale']}): predicted r* from data alone, {MISSING} = not applicable"
    ]
    for label in cfg["teachers"]:
        rows = [rec for rec in result["records"] if rec["teacher"] == label]
        exact = sum(rec["numerical_rank"] == rec["r_star"] for rec in rows)
        lines.append(f"{label}: noise-aware numerical rank exact in {exact} of {len(rows)}")
    lines.append(f"{result['seconds']:.1f} s")
    return lines
