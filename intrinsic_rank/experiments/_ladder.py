"""The interpolation ladder: why static rank fails (SPEC section 2, seeds 000-002)."""


import numpy as np
from sklearn.utils import Bunch

from ..datasets import make_fixed_operator_task
from ..estimators import AttentionRankEstimator
from ._plotting import pyplot, save_figure

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
    verbose=0,
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
    verbose : int, default=0
        Passed to the estimators.

    Returns
    -------
    result : Bunch
        ``records`` (one dict per rung: ``rung``, ``attention``, ``rank``,
        ``train_risk``, ``test_risk``, ``excess_risk``, ``excess_over_floor``),
        ``noise_floor`` and ``config``.

    Examples
    --------
    >>> result = interpolation_ladder(n_samples=400, n_test=200, seq_len=4, d=4,
    ...                               r_star=2, rungs=("fixed", "linear"),
    ...                               max_epochs=60)
    >>> b0, b1 = result.records
    >>> b1["excess_risk"] > 10 * b0["excess_risk"]
    True
    """
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
            attention=attention, max_epochs=max_epochs, random_state=random_state,
            verbose=verbose,
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
            "excess_over_floor": excess / info.noise_floor,
        })
    config = dict(
        n_samples=n_samples, n_test=n_test, seq_len=seq_len, d=d, r_star=r_star,
        noise=noise, rungs=list(rungs), max_epochs=max_epochs,
        random_state=random_state,
    )
    return Bunch(records=records, noise_floor=info.noise_floor, config=config)


def plot_ladder(result, path=None):
    """Bar chart of the test excess risk of each rung, with the noise floor.

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
    records = result.records
    excess = np.array([rec["excess_risk"] for rec in records])
    labels = [f"{rec['rung']}\n(rank {rec['rank']})" for rec in records]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = ["C2" if e <= result.noise_floor else "C3" for e in excess]
    bars = ax.bar(labels, np.maximum(excess, 1e-5), color=colors)
    ax.set_yscale("log")
    ax.axhline(result.noise_floor, color="grey", ls=":",
               label=f"noise floor $\\sigma^2$ = {result.noise_floor:.3g}")
    for bar, value in zip(bars, excess):
        ax.annotate(f"{value:.3g}", (bar.get_x() + bar.get_width() / 2, max(value, 1e-5)),
                    ha="center", va="bottom", fontsize=9)
    cfg = result.config
    ax.set_ylabel("test excess risk (MSE, < 1e-5 drawn at 1e-5)")
    ax.set_title(
        f"Interpolation ladder on a fixed operator (r* = {cfg['r_star']}, d = {cfg['d']}, "
        f"L = {cfg['seq_len']})\nall rungs at full rank: the failure starts at B1",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return save_figure(fig, path)
