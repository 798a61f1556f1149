"""The interpolation ladder: why static rank fails.

"The Entropic Bound" (Byeong Hoon Yoon, 2026), section 2.

The work of the experiment ``ladder``, declared in :mod:`intrinsic_rank.experiments.entropic`.
"""

import time

import numpy as np
from sklearn.utils import Bunch

from ...datasets import make_fixed_operator_task
from ...estimators import AttentionRankEstimator
from ..._validation import check_allocation
from ..runner import jsonable, pyplot, save_figure
from ..runner import Verdict, grade, is_finite, number_text, one_plot

__all__ = ["interpolation_ladder", "plot_ladder", "RUNGS"]

RUNGS = {
    "fixed": "B0 fixed operator",
    "linear": "B1 linear QK",
    "softmax": "B2 softmax QK",
    "block": "B3 Transformer block",
}
"""The rungs of the ladder, in order, with their labels."""


def interpolation_ladder(
    n_samples=2048,
    n_test=1024,
    seq_len=8,
    d=16,
    r_star=4,
    noise=0.1,
    rungs=tuple(RUNGS),
    max_epochs=200,
    random_state=0,
    progress=False,
    device="cpu",
):
    """Fit every rung of the ladder at full rank on one fixed-operator task.

    The task is ``Y = A* X V* + E`` with ``rank(A*) = r*``
    (:func:`~intrinsic_rank.datasets.make_fixed_operator_task`). B0 (``A X V``)
    gets the full operator rank ``L``; B1-B3 get the full kernel rank ``d``. The
    paper's finding: B0 reaches the noise floor while B1, B2 and B3 keep a large
    excess risk, so the failure starts at B1 -- input-conditioned mixing, not
    softmax and not a rank limit.

    Parameters
    ----------
    n_samples : int, default=2048
        Training sequences.
    n_test : int, default=1024
        Fresh test sequences from the same task (risk is measured on them).
    seq_len, d, r_star, noise : int, int, int, float
        Task sizes, operator rank and noise standard deviation.
    rungs : sequence of str, default=("fixed", "linear", "softmax", "block")
        Rungs to fit.
    max_epochs : int, default=200
        Training epochs of every rung.
    random_state : int, default=0
        Seed of the task and of every fit.
    progress : bool, default=False
        Draw the estimators' progress bars (their ``verbose=1``).
    device : str or torch.device, default="cpu"
        Where the rungs train (the estimators' ``device``).

    Returns
    -------
    result : Bunch
        ``records`` (one dict per rung: ``rung``, ``attention``, ``rank``,
        ``train_risk``, ``test_risk``, ``excess_risk`` (test risk minus the
        noise floor) and ``excess_to_floor_ratio`` (that excess divided by the
        noise floor)), ``noise_floor``, ``test_variance`` (the variance of the
        test targets), ``reach_tol`` (the excess risk below which a rung reaches
        the floor: the estimators' ``tol`` times ``test_variance``, the rule by
        which a rank sweep reads ``r*``) and ``config``.

    Examples
    --------
    >>> result = interpolation_ladder(n_samples=400, n_test=200, seq_len=4, d=4,
    ...                               r_star=2, rungs=("fixed", "linear"),
    ...                               max_epochs=60)
    >>> b0, b1 = result.records
    >>> b1["excess_risk"] > 10 * b0["excess_risk"]
    True
    """
    verbose = int(bool(progress))
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown:
        raise ValueError(f"unknown rung(s) {unknown}; use {list(RUNGS)}")
    # One draw, split: the test sequences come from the very same operator.
    X, Y, info = make_fixed_operator_task(
        n_samples + n_test, seq_len, d, rank=r_star, noise=noise,
        random_state=random_state, return_info=True,
    )
    X_train, Y_train = X[:n_samples], Y[:n_samples]
    X_test, Y_test = X[n_samples:], Y[n_samples:]
    records = []
    for attention in rungs:
        est = AttentionRankEstimator(
            attention=attention, max_epochs=max_epochs, n_init=1, random_state=random_state,
            device=device, verbose=verbose,
        ).fit(X_train, Y_train)
        train_risk = float(np.mean((est.predict(X_train) - Y_train) ** 2))
        test_risk = float(np.mean((est.predict(X_test) - Y_test) ** 2))
        excess = test_risk - info.noise_floor
        records.append({
            "rung": RUNGS[attention],
            "attention": attention,
            "rank": int(est.rank_),
            "train_risk": train_risk,
            "test_risk": test_risk,
            "excess_risk": excess,
            "excess_to_floor_ratio": excess / info.noise_floor,
        })
    config = dict(
        n_samples=n_samples, n_test=n_test, seq_len=seq_len, d=d, r_star=r_star,
        noise=noise, rungs=list(rungs), max_epochs=max_epochs,
        random_state=random_state,
    )
    test_variance = float(np.var(Y_test))
    reach_tol = float(AttentionRankEstimator().tol) * test_variance
    return Bunch(records=records, noise_floor=info.noise_floor, test_variance=test_variance,
                 reach_tol=reach_tol, config=config)


def plot_ladder(result, path=None):
    """Bar chart of the test risk of each rung, with the noise floor it is judged against.

    Each bar is a rung's test risk (MSE, log axis); the dotted line is the
    noise floor ``sigma^2`` (the risk of the true operator), so a bar that
    reaches the line is at the floor. A green bar is within 10% of the floor
    in excess (``excess_to_floor_ratio <= 0.1``), a red one is not; each bar is
    labelled with its excess risk and that ratio. The legend sits under the
    axes, off the bars.

    Parameters
    ----------
    result : Bunch
        The output of :func:`interpolation_ladder`.
    path : str or None
        Where to save the PNG.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    from matplotlib.patches import Patch

    records = result.records
    floor = result.noise_floor
    risk = np.array([rec["test_risk"] for rec in records])
    ratio = np.array([_ratio(rec) for rec in records])
    labels = [f"{rec['rung']}\n(rank {rec['rank']})" for rec in records]
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    colors = ["C2" if r <= 0.1 else "C3" for r in ratio]
    bars = ax.bar(labels, risk, color=colors)
    ax.set_yscale("log")
    ax.set_ylim(min(risk.min(), floor) / 3, risk.max() * 4)
    ax.axhline(floor, color="k", ls=":", lw=1.2)
    for bar, rec, r in zip(bars, records, ratio):
        ax.annotate(f"excess {rec['excess_risk']:.2g}\n= {r:.2g} x floor",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8)
    cfg = result.config
    ax.set_ylabel("test risk (MSE, log scale)")
    ax.set_xlabel("rung of the ladder (student rank)")
    ax.set_title(
        f"Interpolation ladder on a fixed operator (r* = {cfg['r_star']}, d = {cfg['d']}, "
        f"L = {cfg['seq_len']}, seed {cfg['random_state']})\nall rungs at full rank: the "
        "failure starts at B1",
        fontsize=10,
    )
    handles = [plt.Line2D([], [], color="k", ls=":", lw=1.2,
                          label=f"noise floor $\\sigma^2$ = {floor:.3g} (the true operator's "
                                "risk)"),
               Patch(color="C2", label="excess within 0.1 x the floor"),
               Patch(color="C3", label="excess above 0.1 x the floor")]
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2),
              ncol=2, frameon=False)
    return save_figure(fig, path)


def _ratio(record):
    """A record's excess risk as a multiple of the noise floor."""
    return record["excess_to_floor_ratio"]


# -- the experiment: ``ladder`` ---------------------------------------------------------

LADDER_COLUMNS = ["rung", "rank", "train_risk", "test_risk", "excess_risk",
                  "excess_to_floor_ratio"]
"""Columns of the ladder's table (the CLI's and the reproduce report's)."""


def _run(settings, *, random_state, progress, device):
    tic = time.perf_counter()
    result = interpolation_ladder(random_state=random_state, progress=progress,
                                  device=device, **settings)
    return jsonable(dict(records=result.records, config=result.config,
                         noise_floor=result.noise_floor, test_variance=result.test_variance,
                         reach_tol=result.reach_tol, seconds=time.perf_counter() - tic))


def _tables(result):
    return [(f"every rung at full rank, noise floor {number_text(result['noise_floor'])}",
             [dict(rec, excess_to_floor_ratio=_ratio(rec)) for rec in result["records"]],
             LADDER_COLUMNS)]


def _verdicts(result):
    """B0 reaches the floor; B1-B3 do not, even at full rank; the failure starts at B1.

    The claims are the paper's (The Entropic Bound, section 2, the
    interpolation ladder: the bound fails at step B1, the
    passage from a fixed operator B0 to input-conditioned mixing causes a
    massive increase in excess risk even with a full-rank kernel, and the
    failure persists through B2 and B3). A rung *reaches the floor* when its
    test excess risk is at most ``reach_tol``: the estimators' ``tol`` (2%) of
    the test targets' variance, the rule by which a rank sweep reads ``r*``,
    fixed before any run. The rules:

    * **B0 reaches the floor:** agrees when it does, does not agree otherwise.
    * **B1-B3 keep an excess risk at full rank:** agrees when none of them
      reaches the floor, partly when some do not, does not agree when all do.
    * **The failure starts at B1:** agrees when B0 reaches the floor and B1
      does not; partly when B1 fails but so does B0 (the failure is not located
      at B1); does not agree when B1 reaches the floor.

    The multiples of the noise floor are reported, not judged. A result without
    ``reach_tol`` gets no verdicts.
    """
    tol = result.get("reach_tol")
    if not is_finite(tol):
        return []
    rungs = {rec["attention"]: rec for rec in result["records"]}
    reaches = {name: rec["excess_risk"] <= tol for name, rec in rungs.items()}
    rule = (f"a rung reaches the floor when its test excess risk is at most "
            f"{number_text(tol)} (2% of the test targets' variance, the rank sweep's rule)")
    verdicts = []
    if "fixed" in rungs:
        verdicts.append(Verdict(
            "B0 (a fixed operator A X V) reaches the noise floor",
            f"B0 excess risk {number_text(rungs['fixed']['excess_risk'])} = "
            f"{number_text(_ratio(rungs['fixed']))}x the noise floor",
            "agrees" if reaches["fixed"] else "does not agree", rule,
        ))
    conditioned = [name for name in ("linear", "softmax", "block") if name in rungs]
    if conditioned:
        high = [name for name in conditioned if not reaches[name]]
        verdicts.append(Verdict(
            "B1, B2 and B3 (input-conditioned mixing) keep a large excess risk even at "
            "full kernel rank",
            ", ".join(f"{rungs[name]['rung'].split()[0]} "
                      f"{number_text(rungs[name]['excess_risk'])} "
                      f"({number_text(_ratio(rungs[name]))}x the floor)" for name in conditioned),
            grade(len(high), len(conditioned)),
            f"{len(high)} of {len(conditioned)} rungs stay above the floor; {rule}",
        ))
    if "linear" in rungs and "fixed" in rungs:
        b0, b1 = reaches["fixed"], reaches["linear"]
        verdicts.append(Verdict(
            "the failure starts at B1: it is caused by input-conditioned mixing, not by "
            "softmax (B2) or the full block (B3)",
            f"B0 reaches the floor: {'yes' if b0 else 'no'}; B1 (linear QK, no softmax) "
            f"reaches it: {'yes' if b1 else 'no'}",
            "agrees" if b0 and not b1 else ("partly" if not b1 else "does not agree"),
            "B0 at the floor and B1 not agrees; B1 failing with B0 failing too partly (the "
            f"failure is not located at B1); B1 at the floor does not agree; {rule}",
        ))
    return verdicts


def _check(settings):
    """The task (train and test, in float64) within memory, before it is drawn."""
    from . import LADDER

    n, n_test = settings["n_samples"], settings.get("n_test", LADDER.full["n_test"])
    check_allocation(8 * settings["seq_len"]**2
                     + 24 * (n + n_test) * settings["seq_len"] * settings["d"],
                     "--d, --seq-len and --n-samples", "the fixed-operator task")


_plot = one_plot(plot_ladder, "ladder.png")


def _summary(result):
    cfg, records, floor = result["config"], result["records"], result["noise_floor"]
    b0 = records[0]["excess_risk"]
    worst = min(rec["excess_risk"] for rec in records[1:]) if len(records) > 1 else b0
    return [
        f"Interpolation ladder on a fixed operator (r* = {cfg['r_star']}, d = {cfg['d']}, "
        f"L = {cfg['seq_len']}, n = {cfg['n_samples']} train / {cfg['n_test']} test, "
        f"noise floor = {floor:.4g}), every rung at full rank",
        f"B0 excess {b0:.3g}; the input-conditioned rungs keep at least {worst:.3g} "
        f"({worst / floor:.0f} times the noise floor); {result['seconds']:.1f} s",
    ]
