"""Layer x head heat maps of a per-head profile and of its head-pattern scores."""

import numpy as np

from ..runner import number_text, pyplot, save_figure

__all__ = ["plot_head_profile", "plot_head_scores"]

_PANELS = [
    ("kernel_energy_rank", "static QK kernel: energy rank", "viridis", "energy effective rank"),
    ("attn_energy_rank", "realised attention: energy rank", "viridis", "energy effective rank"),
    ("entropy", "attention entropy", "viridis", "entropy per query (nats)"),
    ("sink_mass", "sink: mass on the first token", "magma", "share of attention"),
    ("max_key_mass", "mass on the most-attended key", "magma", "share of attention"),
    ("band_mass", "locality: mass within the band", "magma", "share of attention"),
]

_SCORE_PANELS = [
    ("previous_token_score", "previous-token score", "key i - 1"),
    ("duplicate_token_score", "duplicate-token score", "earlier copies of the token"),
    ("induction_score", "induction score", "tokens after earlier copies"),
]

#: heads above which the heat maps carry no numbers (they would not be readable)
_ANNOTATE_MAX = 200


def _heat_map_layout(plt, n_panels, L, H, wide_columns=2):
    """A figure of ``n_panels`` heat maps sized so that every cell can hold a number.

    Three maps a row for up to six heads, ``wide_columns`` for more.
    """
    columns = min(n_panels, 3 if H <= 6 else wide_columns)
    rows = -(-n_panels // columns)
    cell_w, cell_h = (0.8 if H <= 6 else 0.55), 0.45
    width = min(24.0, columns * (1.9 + cell_w * H))
    height = min(18.0, 0.5 + rows * (1.4 + cell_h * max(L, 3)))
    fig, axes = plt.subplots(rows, columns, figsize=(width, height), squeeze=False)
    for ax in axes.ravel()[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.ravel()[:n_panels])


def _heat_map(fig, ax, grid, *, cmap, vmin, vmax, label, digits, annotate):
    """One layer x head heat map with a labelled colour bar and, if asked, its numbers.

    Returns the colour bar.
    """
    L, H = grid.shape
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label(label, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(H))
    ax.set_yticks(range(L))
    ax.tick_params(labelsize=7)
    if annotate:
        middle = (vmin + vmax) / 2  # viridis and magma run from dark to light
        for (i, j), value in np.ndenumerate(grid):
            if not np.isfinite(value):
                text, colour = "–", "black"
            else:
                text = f"{value:.{digits}f}"
                colour = "white" if value < middle else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    return bar


def _score_scale(grid, perfect, low):
    """The colour scale of one head score: from ``low`` to the perfect head's score.

    So the best heads of a pattern are bright however small a perfect head's
    score is under the measure (about 0.49 under TransformerLens's mul on BOS
    + k + k tokens); a head above it (it cannot be, but rounding) widens the
    scale. Without a perfect score (no input defines the pattern) the scale is
    the measure's own, up to 1.
    """
    top = float(perfect) if np.isfinite(perfect) and perfect > low else 1.0
    finite = grid[np.isfinite(grid)]
    if finite.size:
        top = max(top, float(finite.max()))
    return low, top


def _mark_perfect(bar, perfect, low, top):
    """A tick on the colour bar at the perfect head's score, labelled as such."""
    from matplotlib.ticker import MaxNLocator

    if not (np.isfinite(perfect) and low < perfect <= top):
        return
    ticks = [t for t in MaxNLocator(5).tick_values(low, top)
             if low <= t <= top and abs(t - perfect) > 0.08 * (top - low)]
    bar.set_ticks(ticks + [perfect])
    bar.set_ticklabels([f"{t:.2g}" for t in ticks] + [f"perfect {perfect:.2f}"])


def _profile_title(cfg, what):
    kind = "causal" if cfg["causal"] else "bidirectional"
    return (f"{what} of {cfg['model']} ({cfg['family']}, {kind}, {cfg['n_layers']} layers x "
            f"{cfg['n_heads']} heads, d = {cfg['d_model']}) on {cfg['n_inputs']} inputs "
            f"({cfg['inputs']})")


def plot_head_profile(profile, path=None):
    """Heat maps (layer x head) of the profile's rank measures and diagnostics.

    Six panels: static-kernel energy rank (out of ``d_head``), realised
    attention energy rank (out of the input length), attention entropy, and
    the sink, most-attended-key and band masses (0 to 1), each with a labelled
    colour bar. Each panel's title gives the uniform-attention baseline where
    one applies. Cells carry their value (one decimal for ranks and entropy,
    two for masses) up to 200 heads; larger models get the colours only.

    Parameters
    ----------
    profile : Bunch
        The output of :func:`~intrinsic_rank.inspection.profile_heads`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = profile.config
    L, H = cfg["n_layers"], cfg["n_heads"]
    fig, axes = _heat_map_layout(plt, len(_PANELS), L, H)
    annotate = L * H <= _ANNOTATE_MAX
    for ax, (key, title, cmap, label) in zip(axes, _PANELS):
        grid = np.array([r[key] for r in profile.records], dtype=float).reshape(L, H)
        if key.endswith("_mass"):
            vmin, vmax = 0.0, 1.0
        elif key == "kernel_energy_rank":
            vmin, vmax = 0.0, float(cfg["d_head"])
        elif key == "attn_energy_rank":
            vmin, vmax = 1.0, max(1.0 + 1e-9, float(np.nanmax(grid)))
        else:
            vmin, vmax = float(np.nanmin(grid)), float(np.nanmax(grid)) + 1e-9
        _heat_map(fig, ax, grid, cmap=cmap, vmin=vmin, vmax=vmax, label=label,
                  digits=2 if key.endswith("_mass") else 1, annotate=annotate)
        base = profile.baselines.get(key)
        if key == "kernel_energy_rank":
            detail = f"\n(of d_head = {cfg['d_head']})"
        elif key == "attn_energy_rank":
            detail = f"\n(mean length {cfg['mean_length']:.1f}; uniform {base:.2f})"
        elif key == "band_mass":
            detail = f" +/-{cfg['band']}\n(uniform attention: {base:.2f})"
        else:
            detail = f"\n(uniform attention: {base:.2f})"
        ax.set_title(title + detail, fontsize=9)
    fig.suptitle(_profile_title(cfg, "Per-head profile"), fontsize=10)
    return save_figure(fig, path)


def plot_head_scores(profile, path=None):
    """Heat maps (layer x head) of the previous-token, duplicate-token and induction scores.

    The scores of :func:`~intrinsic_rank.inspection.profile_heads` in its ``score_measure`` (see
    :func:`~intrinsic_rank.inspection.head_pattern_scores`), each map's colour scale
    running from 0 (-1 for ``"abs"``) to the score of a perfect head of that pattern on
    the same inputs, marked on its labelled colour bar, so the best heads stand out
    however low a perfect head scores; each title gives the
    uniform-attention and perfect-head scores on the same inputs and how many
    queries define the pattern, the figure's title the sink rate. Cells carry their value (two
    decimals) up to 200 heads; a pattern no input defines is drawn as "–".

    Parameters
    ----------
    profile : Bunch
        The output of :func:`~intrinsic_rank.inspection.profile_heads`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure

    Examples
    --------
    >>> from intrinsic_rank.inspection import profile_heads
    >>> profile = profile_heads("default", n_inputs=2, max_length=16)
    >>> len(plot_head_scores(profile).axes)  # three maps and their colour bars
    6
    """
    plt = pyplot()
    cfg, summary = profile.config, profile.summary
    L, H = cfg["n_layers"], cfg["n_heads"]
    fig, axes = _heat_map_layout(plt, len(_SCORE_PANELS), L, H, wide_columns=1)
    annotate = L * H <= _ANNOTATE_MAX
    excluded = [what for what, on in (("first key", cfg.get("exclude_bos")),
                                      ("current token", cfg.get("exclude_current_token"))) if on]
    measure = cfg.get("score_measure", "mul")
    label = {"mul": "share of all attention on the pattern (TL mul)",
             "abs": "1 - rounded mean |A - D| n (TL abs)",
             "conditional": "share where the pattern applies"}[measure]
    for ax, (key, title, where) in zip(axes, _SCORE_PANELS):
        grid = np.array([r[key] for r in profile.records], dtype=float).reshape(L, H)
        name = key[:-len("_score")]
        perfect = profile.baselines.get(f"perfect_{name}_score", float("nan"))
        low, top = _score_scale(grid, perfect, -1.0 if measure == "abs" else 0.0)
        bar = _heat_map(fig, ax, grid, cmap="magma", vmin=low, vmax=top, label=label,
                        digits=2, annotate=annotate)
        _mark_perfect(bar, perfect, low, top)
        ax.set_title(f"{title}: {where}\n(uniform attention: "
                     f"{number_text(profile.baselines[key], '{:.2f}')}; perfect head "
                     f"{number_text(perfect, '{:.2f}')}; "
                     f"{cfg['pattern_queries'][name]} queries)", fontsize=9)
    note = f"; {' and '.join(excluded)} left out" if excluded else ""
    fig.suptitle(_profile_title(cfg, "Head scores") + f"\nsink rate "
                 f"{summary['sink_rate']:.2f} (share of heads with more than "
                 f"{cfg['sink_rate_threshold']:g} of their attention on the first token)"
                 + note, fontsize=10)
    return save_figure(fig, path)
