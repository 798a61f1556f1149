"""The rank sweep on a teacher task: deficiency, achievability and recovery at once.

The work of the experiment ``sweep`` (declared in :mod:`intrinsic_rank.experiments.entropic`):
the command sweeps one teacher, the reproduce piece a linear and a softmax teacher.
"""

import math
import os
import time

import numpy as np
from sklearn.utils import Bunch

from ...datasets import make_attention_task, make_fixed_operator_task
from ...estimators import AttentionRankEstimator
from ..._validation import check_allocation
from ..runner import (
    Verdict,
    grade,
    is_finite,
    jsonable,
    number_text,
    pyplot,
    save_figure,
    save_plot,
    write_csv,
)
from ._data import evidence, sweep_data
from ._files import check_model_path, load_xy, save_model_file

__all__ = ["rank_sweep", "plot_sweep", "sweep_warnings"]

TEACHERS = ("linear", "softmax", "fixed")


def rank_sweep(
    teacher="softmax",
    r_star=4,
    d=16,
    seq_len=8,
    n_samples=2048,
    noise=0.1,
    rank_grid=None,
    attention=None,
    kernel_scale=2.0,
    max_epochs=200,
    random_state=0,
    progress=False,
    device="cpu",
    noise_floor=None,
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
    rank_grid : sequence of int or None, default=None
        Rank grid; ``None`` means ``1 .. min(limit, 2 r*)`` where the limit is
        ``d`` (``seq_len`` for the fixed teacher).
    attention : str or None, default=None
        Student rung; ``None`` matches the teacher (``"fixed"`` for the fixed
        operator); ``"auto"`` chooses the class by held-out risk (the
        estimator's ``attention="auto"``).
    kernel_scale : float, default=2.0
        Scale of the attention teacher's kernel.
    max_epochs : int, default=200
        Training epochs of the batched sweep.
    random_state : int, default=0
        Seed of the task and of the sweep.
    progress : bool, default=False
        Draw the estimator's progress bar (its ``verbose=1``).
    device : str or torch.device, default="cpu"
        Where the students train (the estimator's ``device``).
    noise_floor : float or None, default=None
        The floor the sweep judges against (the estimator's ``noise_floor``);
        ``None`` estimates it from the sweep, as before.

    Returns
    -------
    result : Bunch
        ``records`` (one dict per rank), ``rank_`` (estimated ``r*``),
        ``r_star``, ``noise_floor`` (true), ``noise_floor_`` (the floor the
        ranks were judged against: estimated, or the one given),
        ``noise_floor_given`` (``None`` unless given) and
        ``noise_floor_estimated`` (the smallest held-out risk of the grid),
        ``excess_tol`` (the excess risk that counts as reaching the floor),
        ``floor_reached``, ``reference_risk``, ``estimate_supported`` and
        ``heldout_r2`` (the estimator's ``floor_reached_``,
        ``reference_risk_``, ``estimate_supported_`` and ``heldout_r2_``),
        ``attention`` (the class trained) and ``class_risks`` (after
        ``"auto"``, else ``None``), ``config`` and the fitted ``estimator``.

    Examples
    --------
    >>> result = rank_sweep("linear", r_star=2, d=6, seq_len=4, n_samples=600,
    ...                     max_epochs=60)
    >>> result.rank_, result.r_star
    (2, 2)
    """
    verbose = int(bool(progress))
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
    if rank_grid is None:
        rank_grid = list(range(1, min(limit, 2 * r_star) + 1))
    attention = attention or teacher
    # the paper's protocol, and every published number: one initialisation per rank
    est = AttentionRankEstimator(
        attention=attention, rank_grid=list(rank_grid), max_epochs=max_epochs, n_init=1,
        noise_floor=noise_floor, random_state=random_state, device=device, verbose=verbose,
    ).fit(X, Y)
    config = dict(
        teacher=teacher, attention=attention, r_star=r_star, d=d, seq_len=seq_len,
        n_samples=n_samples, noise=noise, rank_grid=[int(r) for r in rank_grid],
        kernel_scale=kernel_scale, max_epochs=max_epochs, random_state=random_state,
    )
    if noise_floor is not None:  # only then: the configs of earlier runs stay as they were
        config["noise_floor"] = noise_floor
    return Bunch(
        records=est.sweep_,
        rank_=est.rank_,
        r_star=r_star,
        noise_floor=info.noise_floor,
        noise_floor_=est.noise_floor_,
        excess_tol=est.excess_tol_,
        floor_reached=est.floor_reached_,
        reference_risk=est.reference_risk_,
        **evidence(est, noise_floor),
        config=config,
        estimator=est,
    )



def plot_sweep(result, path=None):
    """Plot held-out risk and learned-kernel rank against student rank.

    Left: the held-out risk (MSE) of every rank on a log axis, with the
    quantities it is judged against on the same axis -- the true noise floor
    ``sigma^2`` and the reach threshold (the estimated floor plus the excess
    tolerance; a rank below it reaches the floor) -- the true ``r*`` as a
    vertical band and the estimated ``r*`` as a star on the curve. Right: the
    energy effective rank and the numerical rank of each student's learned
    kernel against the student rank (its ceiling, drawn as a wide light band
    so that the lines on it stay visible; the two measures are drawn slightly
    apart, with distinct markers and line styles), and the true ``r*``.
    Legends sit under the panels, off the data.

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
    from matplotlib.ticker import MaxNLocator
    records = result.records
    ranks = np.array([rec["rank"] for rec in records])
    risk = np.array([rec["heldout_risk"] for rec in records], dtype=float)
    cfg = result.config
    fig, (ax_risk, ax_rank) = plt.subplots(1, 2, figsize=(11, 5.2))

    known = result.r_star is not None  # a teacher; None for your own data (--data)
    attention = result.get("attention") or cfg["attention"]
    if known:
        ax_risk.axvspan(result.r_star - 0.12, result.r_star + 0.12, color="C2", alpha=0.25,
                        lw=0, label=f"true $r^*$ = {result.r_star}")
    ax_risk.semilogy(ranks, risk, "o-", color="C0", label="held-out risk of the rank-r student")
    if result.noise_floor is not None:
        what = "true noise floor $\\sigma^2$" if known else "given noise floor"
        ax_risk.axhline(result.noise_floor, color="grey", ls=":",
                        label=f"{what} = {result.noise_floor:.3g}")
    threshold = result.noise_floor_ + result.excess_tol
    which = "given" if result.get("noise_floor_given") is not None else "estimated"
    ax_risk.axhline(threshold, color="C1", ls="--", lw=1,
                    label=f"reach threshold {threshold:.3g} ({which} floor "
                          f"{result.noise_floor_:.3g} + tolerance {result.excess_tol:.3g})")
    if result.rank_ is not None:
        at = risk[list(ranks).index(result.rank_)]
        ax_risk.plot([result.rank_], [at], "*", color="C3", ms=16, mec="k", zorder=5,
                     label=f"estimated $r^*$ = {result.rank_} (smallest rank below the "
                           "threshold)")
    ax_risk.set_xlabel(f"student rank r ({attention} students)")
    ax_risk.set_ylabel("held-out risk (MSE, log scale)")
    ax_risk.set_title("Deficiency below $r^*$, achievability from $r^*$")
    ax_risk.set_xticks(ranks)
    ax_risk.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1,
                   frameon=False)

    offset = 0.06 * (ranks.max() > ranks.min())
    ax_rank.plot(ranks, ranks, color="0.75", lw=7, alpha=0.6, solid_capstyle="butt",
                 label="student rank r (the ceiling)")
    if known:
        ax_rank.axhline(result.r_star, color="C2", ls="-.", lw=1.2,
                        label=f"true $r^*$ = {result.r_star}")
    ax_rank.plot(ranks + offset, [rec["numerical_rank"] for rec in records], "s--", color="C1",
                 ms=6, mfc="none", mew=1.5, label="numerical rank of the learned kernel")
    ax_rank.plot(ranks - offset, [rec["energy_effective_rank"] for rec in records], "o-",
                 color="C0", ms=5, label="energy effective rank of the learned kernel")
    ax_rank.set_xlabel("student rank r")
    ax_rank.set_ylabel("rank of the learned kernel")
    ax_rank.set_title("Recovery: what the student learned")
    ax_rank.set_xticks(ranks)
    ax_rank.yaxis.set_major_locator(MaxNLocator(integer=True))  # ranks are integers
    ax_rank.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1,
                   frameon=False)
    if known:
        title = (f"Rank sweep: {cfg['teacher']} teacher, r* = {cfg['r_star']}, d = {cfg['d']}, "
                 f"L = {cfg['seq_len']}, n = {cfg['n_samples']}, noise = {cfg['noise']}, "
                 f"seed {cfg['random_state']}")
    else:
        title = (f"Rank sweep on {os.path.basename(str(cfg.get('data')))}: d = {cfg['d']}, "
                 f"L = {cfg['seq_len']}, n = {cfg['n_samples']}, seed {cfg['random_state']}")
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


# -- the experiment: ``entropic`` (command ``sweep``) ----------------------------------

SWEEP_COLUMNS = ["rank", "train_risk", "heldout_risk", "excess_risk", "reached",
                 "energy_effective_rank", "numerical_rank"]
"""Columns of the rank sweep's table (the CLI's and the reproduce report's)."""


_DATA_KEYS = ("data", "targets", "save_model")


def _all_like_the_first(array, block=1024):
    """Whether every sample (row) of ``array`` equals the first; compared a block of rows
    at a time, so that no copy of the data's size is made, and stopping at the first
    difference."""
    first = array[:1]
    return all(bool((array[start:start + block] == first).all())
               for start in range(1, len(array), block))


def _check_signal(X, Y, data, targets=None):
    """``--data``: refuse arrays that hold no sample, or nothing to estimate ``r*`` from.

    With no sample there is nothing to fit. When ``Y`` is the same for every
    sample, or ``X`` is (the same input gives the same prediction), every rank
    fits equally well, and the sweep's ``r* = 1`` would describe the grid, not
    the data. The estimator judges everything else (shapes, finiteness).
    """
    where = {"X": ("--data", data), "Y": ("--targets", targets) if targets is not None
             else ("--data", data)}
    for name, array in (("X", X), ("Y", Y)):
        option, path = where[name]
        array = np.asarray(array)
        if array.ndim == 0:
            continue  # a single number: the estimator says what shapes it takes
        if len(array) == 0:
            raise ValueError(f"{option}: {path!r} holds no samples ({name} has shape "
                             f"{array.shape}); give n >= 1 sequences")
        # one sample is the estimator's to refuse (too few to hold any out)
        if len(array) > 1 and array.dtype.kind in "biuf" and _all_like_the_first(array):
            what = " (all zero)" if not array.any() else ""
            raise ValueError(f"{option}: {path!r}: {name} is the same for every sample{what}, "
                             "so the data carry no signal: every rank would fit them equally "
                             "well and r* cannot be estimated")


def _run(settings, *, random_state, progress, device):
    """One :func:`rank_sweep` per teacher of ``settings["teachers"]``, or one sweep of
    ``settings["data"]`` (your own ``X`` and ``Y``, ``--data``)."""
    kwargs = {k: v for k, v in settings.items() if k not in ("teachers", *_DATA_KEYS)}
    save_model = settings.get("save_model")
    sweeps = {}
    tic = time.perf_counter()
    if settings.get("data") is not None:
        X, Y = load_xy(settings["data"], settings.get("targets"))
        _check_signal(X, Y, settings["data"], settings.get("targets"))
        result = sweep_data(X, Y, attention=kwargs.get("attention") or "auto",
                            rank_grid=kwargs.get("rank_grid"), max_epochs=kwargs["max_epochs"],
                            noise_floor=kwargs.get("noise_floor"), random_state=random_state,
                            progress=progress, device=device, source=settings["data"])
        results = {"data": result}
    else:
        results = {teacher: rank_sweep(teacher=teacher, random_state=random_state,
                                       progress=progress, device=device, **kwargs)
                   for teacher in settings["teachers"]}
    for name, result in results.items():
        estimator = result.pop("estimator")
        if save_model is not None:  # the command runs one sweep: its fitted estimator
            save_model_file(estimator, save_model)
        sweeps[name] = dict(result)
        sweeps[name]["warnings"] = sweep_warnings(sweeps[name])
    payload = {"sweeps": sweeps, "seconds": time.perf_counter() - tic}
    if save_model is not None:
        payload["model_file"] = save_model
    return jsonable(payload)


def _plot(result, folder):
    sweeps = result["sweeps"]
    # the command (one teacher) writes sweep.png; the reproduce piece sweep_<teacher>.png
    names = (["sweep.png"] if len(sweeps) == 1
             else [f"sweep_{teacher}.png" for teacher in sweeps])
    return [save_plot(plot_sweep(Bunch(**sweep)), folder, name)
            for name, sweep in zip(names, sweeps.values())]


def _tables(result):
    tables = []
    for teacher, sweep in result["sweeps"].items():
        if sweep.get("r_star") is not None:
            what = (f"{teacher} teacher, r* = {sweep['r_star']} (noise floor "
                    f"{number_text(sweep['noise_floor'])}")
        else:
            which = "given" if sweep.get("noise_floor_given") is not None else "estimated"
            what = f"your data ({which} noise floor {number_text(sweep['noise_floor_'])}"
        tables.append((what + f"; a rank reaches it when its excess risk is below "
                       f"{number_text(sweep['excess_tol'])})", sweep["records"], SWEEP_COLUMNS))
        if sweep.get("class_risks"):
            rows = [dict(attention=name, heldout_risk=risk,
                         chosen="yes" if name == sweep["attention"] else "no")
                    for name, risk in sweep["class_risks"].items()]
            tables.append(("attention classes: held-out risk of a full-rank student of each "
                           "(the simplest within the tolerance of the lowest is chosen)",
                           rows, ["attention", "heldout_risk", "chosen"]))
    return tables


def _class_text(sweep):
    """``"linear (full-rank held-out risks: fixed 0.6, linear 0.0025, softmax 0.46)"``."""
    risks = sweep.get("class_risks")
    if not risks:
        return sweep.get("attention") or sweep["config"]["attention"]
    listed = ", ".join(f"{name} {number_text(risk)}" for name, risk in risks.items())
    return f"{sweep['attention']} (full-rank held-out risks: {listed})"


def sweep_warnings(sweep):
    """The ``warning:`` texts of one sweep record: the floor, and the evidence for ``r*``.

    Parameters
    ----------
    sweep : dict
        A record of :func:`rank_sweep` or :func:`sweep_data`.

    Returns
    -------
    warnings : list of str
        Empty when the estimate carries none. A floor given by ``--noise-floor``
        is never asked for again.
    """
    lines = []
    config = sweep["config"]
    given = sweep.get("noise_floor_given", config.get("noise_floor"))
    floor, rank, tol = sweep["noise_floor_"], sweep["rank_"], sweep["excess_tol"]
    reference = sweep.get("reference_risk")
    beaten = is_finite(reference) and floor > reference + tol
    attention = sweep.get("attention") or config["attention"]
    trained = [rec["rank"] for rec in sweep["records"]]
    cut = [r for r in config.get("rank_grid") or [] if r not in trained]
    if cut:  # ranks above the chosen class's limit (--attention auto): none can be trained
        listed = (f"{cut[0]}-{cut[-1]}" if cut == list(range(cut[0], cut[-1] + 1))
                  else ", ".join(map(str, cut)))
        lines.append(
            f"--rank-grid was cut to the rank limit of the {attention} class: ranks "
            f"{listed} left out, {', '.join(map(str, trained))} trained (no larger rank "
            "exists for these data)")
    if sweep.get("floor_reached") is False and given is None:
        ls_map = (f" (a least-squares map of the whole sequence reaches a held-out risk of "
                  f"{reference:.4g})" if is_finite(reference) else "")
        widen = "" if cut else "widen --rank-grid, "
        lines.append(
            f"the estimated floor {floor:.4g} is probably not the "
            f"floor: the largest ranks are still improving or a simpler fit does "
            f"better{ls_map}, so estimated r* = {rank} is probably too small; "
            f"{widen}train longer (--epochs) or give --noise-floor")
    elif sweep.get("floor_reached") is False and beaten:
        lines.append(
            f"the given noise floor {floor:.4g} lies above the held-out risk {reference:.4g} "
            f"of a least-squares map of the whole sequence: the data allow a lower floor, so "
            f"r* = {rank} may be too small; check the value of --noise-floor")
    elif sweep.get("floor_reached") is False:
        best = sweep.get("noise_floor_estimated")
        lowest = f" (lowest held-out risk {best:.4g})" if is_finite(best) else ""
        lines.append(
            f"no rank reaches the given noise floor {floor:.4g} within {tol:.4g}{lowest}, so "
            f"r* = {rank} is only the rank of lowest risk: the {attention} students may not "
            "fit these data (--attention auto compares the classes), training may be too "
            "short (--epochs), or the data's floor lies above the one given")
    if sweep.get("estimate_supported") is False:
        r2 = sweep.get("heldout_r2")
        best = sweep.get("noise_floor_estimated")
        classes = (f"no class does better ({_class_text(sweep)})" if sweep.get("class_risks")
                   else "--attention auto compares the classes")
        if is_finite(reference) and attention != "fixed" and best >= reference - tol:
            lines.append(
                f"the {attention} students do no better than a least-squares map of the "
                f"whole sequence (best held-out risk {best:.4g} against {reference:.4g}): "
                f"the attention explains nothing a linear map does not, so r* = {rank} is "
                f"not supported by the data; {classes}")
        else:
            lines.append(
                f"the rank-{rank} {attention} student explains {max(r2, 0.0):.1%} of the "
                f"held-out variance of Y (held-out R² {r2:.3g}): Y depends little on X through "
                f"this class, or not at all, so r* = {rank} is not supported by the data; "
                f"{classes}; check that X and Y are paired, or give more data")
    return lines


RECOVERY_TOL = 0.5
"""How far the widest student's energy rank may lie from ``r*`` and still recover it: half
a rank, the distance within which rounding the energy rank gives ``r*`` itself."""


def _verdicts(result, recovery_tol=RECOVERY_TOL):
    """The Entropic Bound's three principles and ``r*`` itself, per teacher.

    The claims are the paper's ("The Entropic Bound", Byeong Hoon Yoon, 2026,
    section 3, restoring the entropic bound: rank-deficient students keep a
    high excess risk, students with ``r >= r*`` reach the noise floor, an
    over-parameterised student's effective rank concentrates at ``r*``). The
    rules, fixed before any run:

    * **r*:** agrees when the estimated ``r*`` (the smallest rank reaching the
      floor) equals the true one, does not agree otherwise.
    * **Deficiency / achievability:** a rank *reaches the floor* when its
      held-out excess risk is at most ``excess_tol``, the estimator's own
      selection tolerance (``tol = 0.02`` times the held-out variance of ``Y``,
      fixed in :class:`~intrinsic_rank.AttentionRankEstimator`): the same rule
      that reads ``r*``. Deficiency agrees when every rank below ``r*`` stays
      above it, achievability when every rank from ``r*`` on is within it;
      some of them: partly; none: does not agree.
    * **Recovery:** agrees when the widest student's kernel energy rank is
      within ``recovery_tol`` = 0.5 of ``r*`` (rounding it gives ``r*``), does
      not agree otherwise.

    Plausible alternatives these rules refuse: an estimate one rank off, a rank
    below ``r*`` already at the floor, a rank above it not at the floor, an
    over-parameterised student that keeps a spread-out spectrum.
    """
    verdicts = []
    for teacher, sweep in result["sweeps"].items():
        r_star, estimate, tol = sweep["r_star"], sweep["rank_"], sweep["excess_tol"]
        floor = sweep["noise_floor"]
        records = sweep["records"]
        off = abs(estimate - r_star) if estimate is not None else math.inf
        verdicts.append(Verdict(
            f"{teacher} teacher: the smallest rank reaching the noise floor is the true r*",
            f"estimated r* = {estimate}, true r* = {r_star}",
            "agrees" if off == 0 else "does not agree",
            "equal" if off == 0 else f"off by {off}: the claim is that the transition is at "
            "r* itself",
        ))
        below = [rec for rec in records if rec["rank"] < r_star]
        if below:
            failing = [rec for rec in below if rec["excess_risk"] > tol]
            smallest = min(rec["excess_risk"] for rec in below)
            verdicts.append(Verdict(
                f"{teacher} teacher, deficiency: every rank r < r* keeps an excess risk "
                "bounded away from zero",
                f"ranks {below[0]['rank']}-{below[-1]['rank']}: excess risk >= "
                f"{number_text(smallest)} ({number_text(smallest / floor)}x the noise floor)",
                grade(len(failing), len(below)),
                f"{len(failing)} of {len(below)} ranks below r* stay above the reach "
                f"tolerance {number_text(tol)} (the estimator's tol = 2% of the held-out "
                "variance of Y, the rule that reads r*); all agrees, some partly",
            ))
        above = [rec for rec in records if rec["rank"] >= r_star]
        if above:
            reaching = [rec for rec in above if rec["excess_risk"] <= tol]
            largest = max(rec["excess_risk"] for rec in above)
            verdicts.append(Verdict(
                f"{teacher} teacher, achievability: every rank r >= r* reaches the noise "
                "floor",
                f"ranks {above[0]['rank']}-{above[-1]['rank']}: excess risk <= "
                f"{number_text(largest)}",
                grade(len(reaching), len(above)),
                f"{len(reaching)} of {len(above)} ranks from r* on are within the reach "
                f"tolerance {number_text(tol)} (2% of the held-out variance of Y); all "
                "agrees, some partly",
            ))
        widest = max(records, key=lambda rec: rec["rank"])
        if widest["rank"] > r_star:
            energy = widest["energy_effective_rank"]
            gap = abs(energy - r_star) if is_finite(energy) else math.inf
            verdicts.append(Verdict(
                f"{teacher} teacher, recovery: an over-parameterised student ends with an "
                "effective rank concentrated at r*",
                f"rank-{widest['rank']} student: learned kernel of energy effective rank "
                f"{number_text(energy)} (numerical rank {widest['numerical_rank']})",
                "agrees" if gap <= recovery_tol else "does not agree",
                f"|energy rank - r*| = {number_text(gap)}; within {recovery_tol:g} (so that "
                "it rounds to r*) agrees",
            ))
    return verdicts


def _prepare(settings, folder):
    """The command's settings: ``--save-model`` checked against the files of ``--out``."""
    if settings.get("save_model") is not None and folder is not None:
        settings["save_model"] = check_model_path(settings["save_model"], folder)
    return settings


def _check(settings):
    """``--targets`` only with ``--data``; a teacher task within memory, before it is drawn."""
    if settings.get("targets") is not None and settings.get("data") is None:
        raise ValueError("--targets: give it with --data X.npy (the file of X)")
    if settings.get("data") is None:
        n, d, L = settings["n_samples"], settings["d"], settings["seq_len"]
        check_allocation(8 * d * d + 24 * n * L * d, "--d, --seq-len and --n-samples",
                         "the teacher task")


def _summary(result):
    heads, tails = [], []
    for sweep in result["sweeps"].values():
        cfg = sweep["config"]
        given = sweep.get("noise_floor_given", cfg.get("noise_floor"))
        estimated = sweep.get("noise_floor_estimated")
        own = (f"; the sweep's own estimate {estimated:.4g}" if is_finite(estimated) else "")
        floor = (f"noise floor = {given:.4g} (given){own}" if given is not None else
                 f"estimated noise floor = {sweep['noise_floor_']:.4g}")
        attention = sweep.get("attention") or cfg["attention"]
        r2 = sweep.get("heldout_r2")
        fit = f"; held-out R² {r2:.4g}" if is_finite(r2) else ""
        if sweep.get("class_risks"):
            tails.append(f"attention class: {_class_text(sweep)}")
        if sweep.get("r_star") is None:  # your own data
            heads.append(
                f"Rank sweep: {attention} students on {cfg['data']} "
                f"(d = {cfg['d']}, L = {cfg['seq_len']}, n = {cfg['n_samples']}), "
                f"{cfg['max_epochs']} epochs, seed {cfg['random_state']}")
            tails.append(f"estimated r* = {sweep['rank_']}; {floor}{fit}")
        else:
            heads.append(
                f"Rank sweep: {attention} students on a {cfg['teacher']} teacher "
                f"(r* = {cfg['r_star']}, d = {cfg['d']}, L = {cfg['seq_len']}, "
                f"n = {cfg['n_samples']}, noise floor = {sweep['noise_floor']:.4g}), "
                f"{cfg['max_epochs']} epochs, seed {cfg['random_state']}"
            )
            tails.append(f"estimated r* = {sweep['rank_']} (true r* = {sweep['r_star']}); "
                         + floor.replace("(given)", "(given by --noise-floor)") + fit)
        estimate_line = len(tails) - 1
        tails.extend(f"warning: {text}" for text in sweep_warnings(sweep))
    tails[estimate_line] += f"; {result['seconds']:.1f} s"
    return ["\n".join(heads), *tails]


def _saved(result):
    """The command's ``sweep.json``: the one sweep's records and estimates."""
    if len(result["sweeps"]) != 1:
        return result
    (sweep,) = result["sweeps"].values()
    saved = dict(records=sweep["records"], config=sweep["config"], rank_=sweep["rank_"],
                 noise_floor=sweep["noise_floor"], noise_floor_=sweep["noise_floor_"],
                 noise_floor_given=sweep.get("noise_floor_given"),
                 noise_floor_estimated=sweep.get("noise_floor_estimated"),
                 floor_reached=sweep.get("floor_reached"),
                 reference_risk=sweep.get("reference_risk"),
                 attention=sweep.get("attention"), class_risks=sweep.get("class_risks"),
                 heldout_r2=sweep.get("heldout_r2"),
                 estimate_supported=sweep.get("estimate_supported"),
                 compute_dtype=sweep.get("compute_dtype"), n_init=sweep.get("n_init"),
                 warnings=sweep.get("warnings", sweep_warnings(sweep)),
                 seconds=result["seconds"])
    if "model_file" in result:
        saved["model_file"] = result["model_file"]
    return saved


def _extra_files(result, folder):
    """The command's ``sweep.csv`` (one row per rank); the reproduce piece writes none."""
    if len(result["sweeps"]) != 1:
        return []
    (sweep,) = result["sweeps"].values()
    write_csv(os.path.join(folder, "sweep.csv"), sweep["records"])
    return ["sweep.csv"]
