"""The figures of ``model-rank``: loss against the query rank kept, the maps, healing, currency.

Each takes the experiment's result (or :func:`~intrinsic_rank.experiments.model_rank`'s)
and draws one figure; ``path`` saves it as a PNG.
"""

import math

import numpy as np

from ..runner import pyplot, save_figure
from ._allocations import MODEL_ALLOCATIONS

__all__ = ["plot_model_rank", "plot_model_rank_currency", "plot_model_rank_healing",
           "plot_model_rank_maps"]

_COLOURS = dict(zip(MODEL_ALLOCATIONS, ("C3", "C0", "C2", "C1")))
_STYLES = {"output": "-", "none": "--", "sequential": ":"}


def _corpora(result):
    return list(dict.fromkeys(r["corpus"] for r in result["rows"]))


def plot_model_rank(result, path=None):
    """Held-out loss against the share of the total query rank kept, one panel per corpus.

    Every allocation with the data-aware truncation (dashed) and cut in the heads'
    output metric (solid), the library's allocation also calibrated layer by layer
    (dotted); the unedited loss and the ``(1 + eps)`` lines; each ``r*_model(eps)``
    marked where the search found it (a star), and the healed model (a cross).

    Parameters
    ----------
    result : Bunch or dict
    path : str or None

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    corpora = _corpora(result)
    fig, axes = plt.subplots(1, len(corpora), figsize=(6.2 * len(corpora), 4.6), squeeze=False)
    for ax, corpus in zip(axes[0], corpora):
        grid = [r for r in result["rows"] if r["corpus"] == corpus and r["stage"] == "grid"]
        base = result["unedited"][corpus]["test"]
        for kind in MODEL_ALLOCATIONS:
            for calibration, style in _STYLES.items():
                line = sorted((r["rank_share"], r["loss"]) for r in grid
                              if r["allocation"] == kind and r["calibration"] == calibration)
                if line:
                    x, y = zip(*line)
                    ax.plot(100 * np.array(x), y, style, marker="o", ms=3,
                            color=_COLOURS[kind], label=f"{kind}, {calibration}")
        ax.axhline(base, color="black", lw=0.8, label="unedited")
        found = [f for f in result["r_star_model"] if f["corpus"] == corpus]
        for f in found:
            ax.axhline(base * (1 + f["epsilon"]), color="grey", lw=0.6, ls="-.")
            ax.annotate(f"+{100 * f['epsilon']:g} %", (1.0, base * (1 + f["epsilon"])),
                        xycoords=("axes fraction", "data"), xytext=(2, 0),
                        textcoords="offset points", fontsize=7, va="center", color="grey")
            ax.plot(100 * f["rank_share"], f["test_loss"], "*", ms=11, color="black")
            ax.annotate(f"r*({100 * f['epsilon']:g} %)", (100 * f["rank_share"],
                                                           f["test_loss"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
        for r in result["rows"]:
            if r["corpus"] == corpus and r["stage"] == "healed":
                ax.plot(100 * r["rank_share"], r["loss"], "P", ms=8, color="purple",
                        label="healed", zorder=5)
        top = max([r["loss"] for r in grid] + [f["test_loss"] for f in found]
                  + [base * (1 + f["epsilon"]) for f in found] + [base * 1.01])
        ax.set_ylim(base * 0.995, min(base + 1.03 * (top - base), base * 1.3))
        ax.set_xlabel("query rank kept (% of all heads' widths)")
        ax.set_ylabel("test loss (nats per token)")
        ax.set_title(f"{result['config']['model']} on {corpus}")
    axes[0][0].legend(fontsize=6, ncol=2, loc="upper right")
    return save_figure(fig, path)


def _heatmap(ax, grid, width, title):
    values = np.array([[np.nan if v is None else v for v in row] for row in grid], dtype=float)
    image = ax.imshow(np.log2(values), aspect="auto", cmap="viridis", vmin=0,
                      vmax=math.log2(width))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    return image


def plot_model_rank_maps(result, path=None):
    """Per corpus: every head's rank at ``r*_model`` beside its ``r*_attn`` (layer by head).

    Parameters
    ----------
    result : Bunch or dict
    path : str or None

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    maps = result["maps"]
    panels = sum(2 if m["attn"] is not None else 1 for m in maps)
    fig, axes = plt.subplots(1, panels, figsize=(3.6 * panels, 5.0), squeeze=False)
    width = max(v for m in maps for row in m["model"] for v in row if v is not None)
    ax_iter = iter(axes[0])
    image = None
    for m in maps:
        eps = 100 * m["epsilon"]
        image = _heatmap(next(ax_iter), m["model"], width,
                         f"{m['corpus']}: rank at r*_model({eps:g} %)")
        if m["attn"] is not None:
            rho = "" if m["rho"] is None or not np.isfinite(m["rho"]) else \
                f"\nSpearman {m['rho']:.2f} [{m['low']:.2f}, {m['high']:.2f}]"
            _heatmap(next(ax_iter), m["attn"], width,
                     f"{m['corpus']}: r*_attn({m['tol']:g}){rho}")
    bar = fig.colorbar(image, ax=axes[0][-1])
    ticks = list(range(int(math.log2(width)) + 1))
    bar.set_ticks(ticks)
    bar.set_ticklabels([str(2 ** t) for t in ticks])
    bar.set_label("query rank")
    return save_figure(fig, path)


def plot_model_rank_healing(result, path=None):
    """Healing: the edited model's validation and test loss against the healing steps.

    Parameters
    ----------
    result : Bunch or dict
    path : str or None

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    healing = result["healing"]
    steps = [h["step"] for h in healing["history"]]
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    base = result["unedited"][healing["corpus"]]
    for split, colour in (("test", "C3"), ("validation", "C0")):
        values = [h[split] for h in healing["history"]]
        if any(v is None for v in values):
            continue
        ax.plot(steps, np.array(values) / base[split] - 1, marker="o", ms=3, color=colour,
                label=f"{split} documents")
    ax.axvline(healing["best_step"], color="grey", ls="--", lw=0.8,
               label=f"kept (step {healing['best_step']}, by validation)")
    ax.axhline(healing["epsilon"], color="black", ls="-.", lw=0.6,
               label=f"eps = {100 * healing['epsilon']:g} %")
    ax.set_xlabel("healing step (Adam, KL to the unedited model)")
    ax.set_ylabel("loss rise over the unedited model")
    ax.set_title(f"healing at {100 * healing['rank_share']:.1f} % of the query rank "
                 f"({healing['corpus']})")
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_model_rank_currency(result, path=None):
    """The measured rise of the loss against each proxy of a head's damage (log-log).

    Parameters
    ----------
    result : Bunch or dict
    path : str or None

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    currency = result["currency"]
    proxies = list(currency["spearman"])
    fig, axes = plt.subplots(1, len(proxies), figsize=(3.3 * len(proxies), 3.6), squeeze=False)
    rise = np.array([p["rise"] for p in currency["pairs"]])
    for ax, proxy in zip(axes[0], proxies):
        values = np.array([p[proxy] for p in currency["pairs"]])
        ax.scatter(np.maximum(values, 1e-12), np.maximum(rise, 1e-7), s=8,
                   c=np.where(rise > 0, "C0", "C3"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        stats = currency["spearman"][proxy]
        ax.set_title(f"{proxy}\nSpearman {stats['rho']:.2f} "
                     f"[{stats['low']:.2f}, {stats['high']:.2f}]", fontsize=8)
        ax.set_xlabel("proxy")
    axes[0][0].set_ylabel("measured rise of the loss (red: below 0, at 1e-7)")
    return save_figure(fig, path)
