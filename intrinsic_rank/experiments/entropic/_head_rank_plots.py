"""The figures of ``head-ranks``: the map of every head, its curves, the ranks imposed.

Each takes the experiment's result (or :func:`~intrinsic_rank.experiments.head_rank_map`'s
records and config) and draws one figure; ``path`` saves it as a PNG.
"""

import math

import numpy as np

from ..runner import pyplot, save_figure
from ._head_records import answer_at, findings_tol, model_name, unplanted

__all__ = ["plot_head_rank_curves", "plot_head_rank_map", "plot_impose"]


def _grid(result, tol):
    cfg = result["config"]
    grid = np.full((cfg["n_layers"], cfg["n_heads"]), np.nan)
    missed = np.zeros_like(grid, dtype=bool)
    for r in unplanted(result["records"]):
        if r["corpus"] != cfg["corpora"][0]:
            continue
        value = answer_at(r, tol)
        grid[r["layer"], r["head"]] = r["width"] if value is None else value
        missed[r["layer"], r["head"]] = value is None
    return grid, missed


def plot_head_rank_map(result, path=None, tol=None):
    """The map: ``r*_attn(tol)`` of every head, layer by head, on the first corpus.

    Parameters
    ----------
    result : Bunch or dict
        The experiment's result (or :func:`~intrinsic_rank.experiments.head_rank_map`'s).
    path : str or None
    tol : float or None, default=None
        One of the measured tolerances; ``None``: ``findings_tol`` of them.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = result["config"]
    tol = findings_tol(cfg["tolerances"]) if tol is None else tol
    grid, missed = _grid(result, tol)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 + 0.45 * cfg["n_heads"]),
                                    max(3.2, 1.2 + 0.22 * cfg["n_layers"])))
    image = ax.imshow(np.log2(grid), aspect="auto", cmap="viridis", vmin=0,
                      vmax=math.log2(cfg["width"]))
    for layer, head in zip(*np.nonzero(missed)):
        ax.text(head, layer, ">", ha="center", va="center", color="white", fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(cfg["n_heads"]))
    ax.set_yticks(range(0, cfg["n_layers"], max(1, math.ceil(cfg["n_layers"] / 32))))
    bar = fig.colorbar(image, ax=ax)
    ticks = [t for t in range(int(math.log2(cfg["width"])) + 1)]
    bar.set_ticks(ticks, labels=[str(2 ** t) for t in ticks])
    bar.set_label(f"r*_attn({tol:g}); '>': above {cfg['width'] - 1}")
    ax.set_title(f"{model_name(cfg)}: r*_attn per head ({cfg['corpora'][0]})",
                 fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def _training_gains(records, width):
    """Per rank trained on at least a tenth of the heads: its heads' start / trained risk."""
    gains = {}
    for r in records:
        for rank, entry in r.get("trained", {}).items():
            if entry["risk"] > 0:
                gains.setdefault(int(rank), []).append(entry["start"] / entry["risk"])
    return {rank: values for rank, values in sorted(gains.items())
            if len(values) >= max(1, len(records) // 10) and rank < width}


def plot_head_rank_curves(result, path=None):
    """The training-free curve of every head, and what distillation gained on it.

    Left: the held-out relative risk of each head's data-aware truncation against
    the rank (median over heads, and the 10-90 % band), on the first corpus, with
    the tolerances. Right: at each rank distilled on at least a tenth of the heads,
    the factor by which training lowered the risk of those heads (their start's risk
    over their best trained risk; median and 10-90 %).

    Parameters
    ----------
    result : Bunch or dict
    path : str or None

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = result["config"]
    here = [r for r in unplanted(result["records"]) if r["corpus"] == cfg["corpora"][0]]
    fig, (ax, right) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    ranks = np.arange(1, cfg["width"])
    curves = np.array([np.maximum(r["free_risks"][:-1], 1e-6) for r in here])
    if len(curves):
        ax.fill_between(ranks, np.quantile(curves, 0.1, axis=0),
                        np.quantile(curves, 0.9, axis=0), color="C1", alpha=0.25, lw=0)
        ax.plot(ranks, np.median(curves, axis=0), color="C1")
    for tol in cfg["tolerances"]:
        ax.axhline(tol, color="grey", lw=0.6, ls=":")
    gains = _training_gains(here, cfg["width"])
    if gains:
        at = list(gains)
        right.fill_between(at, [np.quantile(gains[r], 0.1) for r in at],
                           [np.quantile(gains[r], 0.9) for r in at], color="C0", alpha=0.25,
                           lw=0)
        right.plot(at, [np.median(gains[r]) for r in at], color="C0", marker="o", ms=3)
    right.axhline(1.0, color="grey", lw=0.6)
    ticks = [2 ** i for i in range(int(math.log2(cfg["width"])) + 1) if 2 ** i < cfg["width"]]
    for axis in (ax, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ticks, [str(t) for t in ticks])
        axis.minorticks_off()
        axis.set_xlabel("query rank r")
    ax.set_yscale("log")
    ax.set_ylabel("held-out MSE / variance of Y")
    ax.set_title(f"training-free: {len(here)} heads, {cfg['corpora'][0]} (median, 10-90 %; "
                 "dotted: tolerances)", fontsize=8)
    right.set_ylabel("start's risk / trained risk")
    right.set_title("what distillation gained (heads trained at that rank)", fontsize=8)
    fig.suptitle(model_name(cfg), fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_impose(result, path=None):
    """Held-out loss against the share of the total query rank kept, per allocation.

    Parameters
    ----------
    result : Bunch or dict
        The experiment's result (its ``impose`` entry).
    path : str or None

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    impose = result["impose"]
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for kind, marker in (("r*_attn", "o"), ("training-free", "s"), ("uniform", "^"),
                         ("query energy", "v"), ("half", "x")):
        rows = sorted((r for r in impose["rows"] if r["allocation"] == kind),
                      key=lambda r: r["rank_share"])
        ax.plot([100 * r["rank_share"] for r in rows], [r["loss"] for r in rows],
                marker=marker, ms=4, lw=1, ls="" if kind == "half" else "-", label=kind)
    ax.axhline(impose["unedited"], color="black", lw=1, label="unedited")
    ax.axhline(impose["unedited"] * 1.01, color="black", lw=0.6, ls="--", label="+1 %")
    ax.axvline(50, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("total query rank kept (% of all heads' widths)")
    ax.set_ylabel("held-out next-token loss (nats)")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title(f"{model_name(result['config'])}: ranks imposed on every head, "
                 f"{impose['corpus']} test documents", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)
