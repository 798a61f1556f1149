"""Accessibility curves and the reachable-length slope.

From "How many different outputs can a Transformer generate?".
"""

import math
import time

import numpy as np
from sklearn.utils import Bunch

from .. import bounds
from .._validation import check_int, keyed_seed
from ..datasets import make_random_targets
from ..estimators import ReachabilityEstimator
from ..nn import as_causal_lm
from ._arguments import add_hidden_alias, parse_lengths, parse_precision, parse_ranks
from ._curves import fit_n50, fit_slope, fit_tail_decays
from ._output import jsonable, pyplot, save_figure
from ._progress import steps
from ._registry import (
    Experiment,
    Verdict,
    grade,
    is_finite,
    number_text,
    one_plot,
    register,
)

__all__ = [
    "AUTO_LENGTHS",
    "BOUND_COLUMNS",
    "BOUND_NAMES",
    "BOUND_TABLE_COLUMNS",
    "GEOMETRY_BOUND_COLUMNS",
    "N50_COLUMNS",
    "REACH_COLUMNS",
    "TAIL_COLUMNS",
    "accessibility_curves",
    "plot_accessibility",
    "reachability_geometry",
]

#: lengths tried, in order, by ``lengths="auto"`` until accessibility stays at zero
AUTO_LENGTHS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64,
                80, 96, 112, 128, 160, 192, 224, 256)


def _length_seed(random_state, length):
    """Seed of the targets of one length: the same targets for every ``m``."""
    return keyed_seed(random_state, length)


BOUND_NAMES = ("ball", "box", "cone", "box + cells")
"""The slope bounds of the table, loosest first (the rows of ``bounds``)."""

#: ``precision`` names that select a convention of :func:`~intrinsic_rank.bounds.precision_for`
_CONVENTION_NAMES = tuple(bounds.PRECISION_CONVENTIONS)


def _check_precision(precision):
    """Validate ``precision`` before any fit; return what the estimators get.

    A number in (0, 1), a dtype name, None, or a precision convention name
    (``"machine"`` is None, ``"paper"`` is ``2**-10``; ``"relative"`` needs
    the measured radius, so the estimators get None and the bounds are read
    from the relative rows afterwards).
    """
    if precision is None:
        return None
    if isinstance(precision, (bool, np.bool_)):
        pass  # not a number: the error below
    elif isinstance(precision, str):
        if precision in _CONVENTION_NAMES:
            return {"machine": None, "paper": bounds.precision_for("paper"),
                    "relative": None}[precision]
        try:
            bounds.precision_from_dtype(precision)
        except ValueError:
            pass
        else:
            return precision
    elif isinstance(precision, (int, float, np.integer, np.floating)):
        if 0 < float(precision) < 1:
            return float(precision)
        raise ValueError(f"precision must lie in (0, 1); got {precision!r}")
    raise ValueError(
        "precision must be a number in (0, 1), a dtype name (float16, bfloat16, float32, "
        f"float64) or a precision convention ({', '.join(_CONVENTION_NAMES)}); "
        f"got {precision!r}"
    )


def _convention_label(convention, eps):
    """The row label of a convention: ``machine ε = 2^-23``, ``paper fp16 ε = 2^-10``, ..."""
    if not (isinstance(eps, float) and math.isfinite(eps) and eps > 0):
        return f"{convention} ε: –"
    exponent = math.log2(eps)
    power = f"2^{exponent:.0f}" if exponent == round(exponent) else f"2^{exponent:.2f}"
    if convention == "paper":
        return f"paper fp16 ε = {power}"
    if convention == "relative":
        return f"relative ε = 2^(log2 r∞ − 11) = {power}"
    return f"{convention} ε = {power}"


def _ratio(bound, slope):
    """Theory over experiment, NaN where either is missing or the slope is not positive."""
    if slope is None or not (math.isfinite(slope) and slope > 0) or not math.isfinite(bound):
        return float("nan")
    return bound / slope


def _bound_rows(table, slope):
    """Rows (bound, convention, precision_convention, precision, slope_bound, ratio)."""
    rows = []
    for row in table:
        eps = float(row["precision"])
        slope_bound = float(row["slope_bound"])
        rows.append(dict(bound=row["bound"],
                         convention=_convention_label(row["precision_convention"], eps),
                         precision_convention=row["precision_convention"], precision=eps,
                         slope_bound=slope_bound, ratio=_ratio(slope_bound, slope),
                         **{k: row[k] for k in ("log_count_bound",) if k in row}))
    return rows


def _table_row(table, bound, convention):
    for row in table:
        if row["bound"] == bound and row["precision_convention"] == convention:
            return row
    raise KeyError((bound, convention))  # pragma: no cover - every table has every row


def _decay_facts(decay, disagreement, region, vocab_size):
    """The cell numbers of a result: decay both ways with SEs, n_empty, samples, rules."""
    nan = float("nan")
    facts = dict(region=region, ln_vocab=float(np.log(vocab_size)),
                 rule_disagreement=float(disagreement) if disagreement is not None else nan,
                 closed_form=nan, closed_form_se=nan, fitted=nan, fitted_se=nan,
                 fitted_r2=nan, n_empty=None, n_cells=None, n_samples=None)
    if decay is not None:
        facts.update({k: float(decay[k]) for k in ("closed_form", "closed_form_se", "fitted",
                                                   "fitted_se", "fitted_r2")})
        facts.update({k: int(decay[k]) for k in ("n_empty", "n_cells", "n_samples")})
    return facts


def accessibility_curves(
    model="default",
    n_memory=(1, 2, 3, 4, 5),
    lengths="auto",
    n_targets=20,
    max_steps=3000,
    patience=500,
    lr=1e-2,
    precision=None,
    quick=False,
    random_state=0,
    progress=False,
    device="cpu",
):
    """Accessibility against target length for each number of prompt vectors.

    For every ``m`` in ``n_memory`` and every length ``n``, a
    :class:`~intrinsic_rank.ReachabilityEstimator` crams ``n_targets`` random
    target sequences (the same targets for every ``m``: a paired design) and
    records the fraction reached. Per ``m`` a decreasing logistic in ``n`` gives
    ``n50(m)`` (:func:`fit_n50`) and the exponential decay of accessibility past
    it (:func:`fit_tail_decays`, binomial fit); the slope of ``n50`` against
    ``m`` (:func:`fit_slope`, with its R^2) is compared with the four slope
    bounds (ball, box, cone, box + cells) under each precision convention of
    :func:`~intrinsic_rank.bounds.precision_for`. The defaults are the paper's
    protocol sizes: ``m = 1..5``, 20 targets per point.

    Parameters
    ----------
    model : "default", str, model instance or CausalLMAdapter, default="default"
        The frozen causal LM (:func:`intrinsic_rank.nn.as_causal_lm`); it is
        loaded and checked once and shared by every fit.
    n_memory : sequence of int, default=(1, 2, 3, 4, 5)
    lengths : "auto" or sequence of int, default="auto"
        Target lengths (``>= 2``). ``"auto"`` walks :data:`AUTO_LENGTHS` for each
        ``m`` and stops after two consecutive lengths with accessibility 0, or
        at the model's context.
    n_targets : int, default=20
        Random targets per point (the paper's 20).
    max_steps, patience, lr : int, int, float, default=3000, 500, 1e-2
        The paper's cramming protocol.
    precision : float, str or None, default=None
        ``eps`` of the ``bound`` entry: a number in (0, 1), a dtype name
        (``"float16"``), None (the model dtype's machine epsilon) or a precision
        convention name (``"machine"``, ``"paper"``, ``"relative"``). The
        ``bounds`` rows always hold all three conventions.
    quick : bool, default=False
        ``max_steps=600, patience=200``: a few seconds per point on a CPU. Such
        short runs under-estimate ``n50`` somewhat; the slope's sign and the
        linear trend remain.
    random_state : int, default=0
    progress : bool, default=False
        Report each finished point through the commands' progress convention
        (a bar on a terminal, the status line off one).
    device : str or torch.device, default="cpu"
        Where the prompt vectors are crammed (the estimators' ``device``).

    Returns
    -------
    result : Bunch
        ``records`` (one per ``(m, n)``: ``n_memory``, ``length``,
        ``accessibility``, ``token_accuracy``, ``mean_steps``, ``seconds``),
        ``n50`` (one record per ``m``: ``n_memory``, ``n50``, ``scale``, ``r2``,
        ``bracketed``), ``tail`` (one record per ``m``: ``n_memory``, the keys
        of :func:`fit_tail_decay` -- ``rate`` in nats per token, NaN when fewer
        than 2 lengths past ``n50`` are reached at all -- and ``logistic_rate``,
        ``1 / scale``, the decay rate of the fitted logistic's own tail), ``slope``
        (``slope``, ``intercept``, ``r2``, ``n_points``), ``bound`` (``width``,
        ``vocab_size``, ``radius``, ``precision``, ``slope_bound``,
        ``box_slope_bound``, ``cone_slope_bound``, ``cell_slope_bound`` and
        their ratios ``ratio``, ``box_ratio``, ``cone_ratio``, ``cell_ratio``
        -- theory over experiment), ``bounds`` (one row per bound and precision
        convention: ``bound``, ``convention`` -- e.g. ``"paper fp16 ε = 2^-10"``
        --, ``precision_convention``, ``precision``, ``slope_bound``, ``ratio``),
        ``cone`` (``min_cosine``, ``half_angle``, ``log_fraction``), ``cells``
        (the decay ``c`` ``closed_form`` and ``fitted`` with standard errors
        ``closed_form_se``, ``fitted_se``, ``fitted_r2``, ``ln_vocab``,
        ``n_empty``, ``n_cells``, ``n_samples``, ``rule_disagreement`` and
        ``region``; NaN/None without a usable head), ``config`` and
        ``seconds``. The geometry (radius, cone, cells) is that of the fit with
        the largest radius.
    """
    start = time.perf_counter()
    if quick:
        max_steps, patience = min(max_steps, 600), min(patience, 200)
    estimator_precision = _check_precision(precision)
    n_memory = [int(m) for m in n_memory]
    if not n_memory or min(n_memory) < 1:
        raise ValueError(f"n_memory must be a non-empty list of integers >= 1; got {n_memory}")
    check_int(n_targets, "n_targets", 1)
    if isinstance(lengths, str):
        if lengths != "auto":
            raise ValueError(f"lengths must be 'auto' or a list of integers; got {lengths!r}")
        grid, auto = list(AUTO_LENGTHS), True
    else:
        grid, auto = sorted(int(n) for n in lengths), False
        if not grid or grid[0] < 2:
            raise ValueError(f"lengths must be integers >= 2; got {list(lengths)}")
    lm = as_causal_lm(model)
    records, fits, radius, widest = [], [], 0.0, None
    settings = dict(model=lm, max_epochs=max_steps, patience=patience, lr=lr,
                    precision=estimator_precision, random_state=random_state, device=device)
    with steps(None if auto else len(n_memory) * len(grid), "reach", enabled=progress) as bar:
        for m in n_memory:
            zeros = 0
            for n in grid:
                if lm.max_length is not None and m + n - 1 > lm.max_length:
                    break
                X = make_random_targets(n_targets, n, lm.vocab_size,
                                        random_state=_length_seed(random_state, n))
                tic = time.perf_counter()
                # the cells are measured once, below, for the fit with the largest radius
                est = ReachabilityEstimator(n_memory=m, n_cell_samples=0, **settings).fit(X)
                rec = dict(n_memory=m, length=n, accessibility=est.accessibility_,
                           token_accuracy=float(est.token_accuracy_.mean()),
                           mean_steps=float(est.n_steps_.mean()),
                           seconds=time.perf_counter() - tic)
                records.append(rec)
                if est.radius_ >= radius:
                    radius, widest = est.radius_, (m, X)
                bar.update(f"m = {m}, n = {n}: accessibility {rec['accessibility']:.2f}")
                zeros = zeros + 1 if rec["accessibility"] == 0 else 0
                if auto and zeros >= 2:
                    break
            rows = [r for r in records if r["n_memory"] == m]
            fit = fit_n50([r["length"] for r in rows], [r["accessibility"] for r in rows]) \
                if len(rows) >= 2 else dict(midpoint=np.nan, scale=np.nan, r2=np.nan,
                                            bracketed=False)
            fits.append(dict(n_memory=m, n50=float(fit["midpoint"]), scale=float(fit["scale"]),
                             r2=float(fit["r2"]), bracketed=bool(fit["bracketed"])))
    if not records:
        raise ValueError(
            f"no (m, length) point fits the model's context of {lm.max_length} positions"
        )
    finite = [f for f in fits if np.isfinite(f["n50"])]
    if len(finite) >= 2 and len({f["n_memory"] for f in finite}) >= 2:
        slope = fit_slope([f["n_memory"] for f in finite], [f["n50"] for f in finite])
        slope = {k: (float(v) if isinstance(v, (float, np.floating)) else v)
                 for k, v in slope.items()}
    else:
        slope = dict(slope=np.nan, intercept=np.nan, r2=np.nan, n_points=len(finite))
    measured = slope["slope"]
    # The geometry (radius, box, cone, cells, bounds table) depends on the seed, m and the
    # length only, never on the optimisation: one step recomputes the widest fit's, cells on.
    fitted = ReachabilityEstimator(n_memory=widest[0], **dict(settings, max_epochs=1)).fit(
        widest[1])
    if fitted.radius_ != radius:  # pragma: no cover - the geometry is seeded
        raise RuntimeError("the reachability geometry changed between two fits of one seed")
    table = _bound_rows(fitted.bounds_table_, measured)
    if precision == "relative":
        eps = _table_row(table, "ball", "relative")["precision"]
        ball, box, cone, cells = (_table_row(table, name, "relative")["slope_bound"]
                                  for name in BOUND_NAMES)
    else:
        eps, ball, box = fitted.precision_, fitted.slope_bound_, fitted.box_slope_bound_
        cone, cells = fitted.cone_slope_bound_, fitted.cell_slope_bound_
    bound = dict(
        width=fitted.width_, vocab_size=fitted.vocab_size_, radius=radius, precision=eps,
        slope_bound=ball, box_slope_bound=box, cone_slope_bound=cone, cell_slope_bound=cells,
        ratio=_ratio(ball, measured), box_ratio=_ratio(box, measured),
        cone_ratio=_ratio(cone, measured), cell_ratio=_ratio(cells, measured),
    )
    cone_facts = dict(min_cosine=fitted.min_cosine_, half_angle=fitted.cone_half_angle_,
                      log_fraction=fitted.cone_log_fraction_)
    cell_facts = _decay_facts(fitted.cell_decay_, fitted.rule_disagreement_,
                              fitted.cell_region, fitted.vocab_size_)
    tail = fit_tail_decays(records, fits, n_targets=n_targets)
    for row, fit in zip(tail, fits):  # both in increasing m
        # a decreasing logistic falls like exp(-(n - n50) / scale) past n50
        row["logistic_rate"] = 1.0 / fit["scale"] if fit["scale"] > 0 else float("nan")
    config = dict(model=model if isinstance(model, str) else type(model).__name__,
                  n_memory=n_memory, lengths=lengths if auto else grid, n_targets=n_targets,
                  max_steps=max_steps, patience=patience, lr=lr, precision=precision,
                  quick=quick, random_state=random_state)
    return Bunch(records=records, n50=fits, tail=tail, slope=slope, bound=bound, bounds=table,
                 cone=cone_facts, cells=cell_facts, config=config,
                 seconds=time.perf_counter() - start)


def plot_accessibility(result, path=None):
    """Plot accessibility against length per ``m`` and ``n50`` against ``m``.

    Parameters
    ----------
    result : Bunch
        The output of :func:`accessibility_curves`.
    path : str or None
        Save the figure there as PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.0))
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(result.n50)))
    for k, (color, fit) in enumerate(zip(colors, result.n50)):
        rows = [r for r in result.records if r["n_memory"] == fit["n_memory"]]
        n = np.array([r["length"] for r in rows], dtype=float)
        left.plot(n, [r["accessibility"] for r in rows], "o", color=color,
                  label=f"m = {fit['n_memory']}")
        if np.isfinite(fit["n50"]):
            grid = np.linspace(n.min(), n.max(), 200)
            left.plot(grid, 1 / (1 + np.exp((grid - fit["n50"]) / fit["scale"])), "-",
                      color=color, alpha=0.7,
                      label="logistic fit (solid)" if k == 0 else None)
            left.axvline(fit["n50"], color=color, ls=":", lw=1,
                         label="its n50 (dotted)" if k == 0 else None)
    left.axhline(0.5, color="grey", lw=0.8, label="accessibility 0.5")
    left.set_xlabel("target length n (tokens)")
    left.set_ylabel("accessibility (fraction reached)")
    left.set_title("Cramming random targets: accessibility vs length")
    left.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14),
                ncol=3)
    ms = np.array([f["n_memory"] for f in result.n50], dtype=float)
    n50 = np.array([f["n50"] for f in result.n50], dtype=float)
    right.plot(ms, n50, "o", color="C0", label="measured n50")
    slope = result.slope
    if np.isfinite(slope["slope"]):
        grid = np.linspace(0, ms.max(), 50)
        right.plot(grid, slope["slope"] * grid + slope["intercept"], "-", color="C0",
                   label=f"fit: {slope['slope']:.2f}·m + {slope['intercept']:.2f} "
                         f"(R² = {slope['r2']:.3f})")
    b = result.bound
    right.set_xlabel("prompt vectors m")
    right.set_ylabel("n50 (tokens)")
    right.set_title("Reachable length grows linearly in m")
    # the bound's numbers go in the legend, under the axes, where they cover no point
    refined = ""
    if "cell_slope_bound" in b:
        refined = (f", cone {_text(b['cone_slope_bound'], '{:.0f}')}, box + cells "
                   f"{_text(b['cell_slope_bound'], '{:.0f}')}")
    ratios = ""
    if "cell_ratio" in b:
        ratios = (f", cone {_text(b['cone_ratio'], '{:.0f}')}, box + cells "
                  f"{_text(b['cell_ratio'], '{:.0f}')}")
    for text in (f"slope bound C = {b['slope_bound']:.0f} tokens/vector (box "
                 f"{b['box_slope_bound']:.0f}{refined})",
                 f"d = {b['width']}, |V| = {b['vocab_size']}, r = {b['radius']:.2f}, "
                 f"ε = {b['precision']:.3g}" + (f" ({_convention_of(result)})"
                                                  if result.get("bounds") else ""),
                 f"theory / experiment = {b['ratio']:.0f} (box {b['box_ratio']:.0f}{ratios})"):
        right.plot([], [], " ", label=text)
    right.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    right.set_xlim(0, ms.max() + 0.5)
    right.set_ylim(0, None)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def _geometry_table(d, m, vocab_size, dtype, radius, widths, theta, decay, causal):
    """Rows of the bounds table of a geometry: log counts (nats) and slope bounds."""
    nan = float("nan")
    rows = []
    for convention in bounds.PRECISION_CONVENTIONS:
        try:
            eps = float(bounds.precision_for(convention, dtype=dtype, radius_inf=radius))
            logs = (bounds.reachable_log_count_bound(d, m, radius, eps),
                    bounds.box_log_count_bound(widths, m, eps),
                    bounds.cone_log_count_bound(d, m, radius, eps, theta), nan)
            slopes = [nan] * 4
            if causal:
                box = float(bounds.box_slope_bound(widths, vocab_size, eps))
                cells = nan
                if decay is not None:
                    cells = (float("inf") if decay["closed_form"] == 0 else
                             float(bounds.cell_slope_bound(box, vocab_size, decay)))
                slopes = [float(bounds.reachable_slope_bound(d, vocab_size, radius, eps)), box,
                          float(bounds.cone_slope_bound(d, vocab_size, radius, eps, theta)),
                          cells]
        except ValueError:  # e.g. "relative" with r >= 2048: eps >= 1
            eps, logs, slopes = nan, (nan,) * 4, [nan] * 4
        for name, log_count, slope in zip(BOUND_NAMES, logs, slopes):
            rows.append(dict(bound=name, precision_convention=convention, precision=eps,
                             log_count_bound=float(log_count), slope_bound=float(slope)))
    return rows


def reachability_geometry(model="default", n_memory=1, n_tokens=8, precision=None,
                          n_prompts=256, n_cell_samples=2**17, measured_slope=None,
                          random_state=0):
    """Seed 004's radius, box, cone, decoder cells and bounds on any model.

    Draws ``n_prompts`` random prompts (``n_memory`` random vectors drawn as a
    cramming run initialises its memory, then ``n_tokens`` random tokens),
    measures the final hidden states' radius and per-coordinate box
    (:func:`~intrinsic_rank.nn.random_prompt_hidden_states`,
    :func:`~intrinsic_rank.bounds.hidden_state_geometry`), their smallest
    pairwise cosine (the cone, :func:`~intrinsic_rank.bounds.min_pairwise_cosine`)
    and, for a model with a next-token head, the decoder's cells in the box of
    the states (:func:`~intrinsic_rank.nn.decoder_cell_proportions`,
    :func:`~intrinsic_rank.bounds.cell_decay`). It evaluates the bounds that
    the model's kind allows:

    * every model: the count bound ``(1 + 2r/eps)**(d m)`` on the number of
      distinct outputs ``m`` prompt vectors can produce at precision ``eps``,
      and its box and cone refinements -- geometry only, they need no head;
    * only a causal LM with a next-token head: the slope bound
      ``C = d ln(1 + 2r/eps) / ln|V|`` on reachable output length per prompt
      vector, its box and cone refinements and the cell-volume refinement
      ``C_cell = C_box ln|V| / c``. An encoder (all-MiniLM-L6-v2, BERT) does
      not generate, so the slope bounds, decoder cells, accessibility curves,
      cramming and the copy cliff do not apply; ``not_applicable`` says so,
      and the slope entries are NaN.

    Parameters
    ----------
    model : "default", str, path, model instance or adapter, default="default"
        See :func:`~intrinsic_rank.nn.as_model_adapter` (packaged model names
        such as ``"all-MiniLM-L6-v2"`` work).
    n_memory : int, default=1
        Prompt vectors ``m``.
    n_tokens : int, default=8
        Random tokens after the prompt vectors.
    precision : float, str or None, default=None
        ``eps`` of the top-level entries: a number in (0, 1), a dtype name
        (``"float16"`` gives the paper's ``2**-10``), None for the machine
        epsilon of the model's dtype, or a precision convention name
        (``"machine"``, ``"paper"``, ``"relative"``). ``bounds`` holds all
        three conventions whatever it is.
    n_prompts : int, default=256
    n_cell_samples : int, default=131072
        Monte Carlo points of the decoder-cell estimate; 0 skips it.
    measured_slope : float or None, default=None
        A measured slope (tokens per prompt vector, e.g. of
        :func:`accessibility_curves` on the same model) to divide the slope
        bounds by: the ``ratio`` column of ``bounds``; None leaves it NaN.
    random_state : int, default=0
        Seeds the prompts and the cell Monte Carlo.

    Returns
    -------
    geometry : Bunch
        ``kind`` (``"causal LM"`` or ``"encoder"``), ``causal`` (measured),
        ``width``, ``vocab_size``, ``n_memory``, ``n_tokens``, ``radius``,
        ``widths`` (per coordinate), ``precision``, ``log_count_bound``,
        ``box_log_count_bound`` and ``cone_log_count_bound`` (nats),
        ``slope_bound``, ``box_slope_bound``, ``cone_slope_bound`` and
        ``cell_slope_bound`` (tokens per vector, NaN where they do not apply),
        ``min_cosine``, ``cone_half_angle``, ``cone_log_fraction``, ``cells``
        (as the ``cells`` of :func:`accessibility_curves`; None for an encoder
        or ``n_cell_samples=0``), ``bounds`` (one row per bound and precision
        convention: ``bound``, ``convention``, ``precision_convention``,
        ``precision``, ``log_count_bound``, ``slope_bound``, ``ratio``),
        ``measured_slope`` and ``not_applicable`` (list of what does not
        apply, with why).

    Examples
    --------
    >>> g = reachability_geometry("default", n_memory=2, n_tokens=6, n_prompts=16,
    ...                           n_cell_samples=4096)
    >>> g.kind, g.width, bool(g.radius > 0), g.not_applicable
    ('causal LM', 64, True, [])
    >>> [(r["bound"], r["convention"]) for r in g.bounds][4:6]
    [('ball', 'paper fp16 ε = 2^-10'), ('box', 'paper fp16 ε = 2^-10')]
    """
    from ..nn import (
        HFEncoderAdapter,
        as_model_adapter,
        decoder_cell_proportions,
        random_prompt_hidden_states,
    )

    for value, name, low in ((n_memory, "n_memory", 1), (n_tokens, "n_tokens", 0),
                             (n_prompts, "n_prompts", 1), (n_cell_samples, "n_cell_samples", 0)):
        check_int(value, name, low)
    fixed = _check_precision(precision)
    if measured_slope is not None:
        measured_slope = float(measured_slope)
        if not (math.isfinite(measured_slope) and measured_slope > 0):
            raise ValueError(f"measured_slope must be a positive number or None; "
                             f"got {measured_slope!r}")
    lm = as_model_adapter(model)
    dtype = str(lm.dtype)
    states = random_prompt_hidden_states(lm, int(n_memory), int(n_tokens),
                                         n_prompts=int(n_prompts), random_state=random_state)
    geo = bounds.hidden_state_geometry(states)
    radius = float(geo["radius"])
    if precision in _CONVENTION_NAMES:
        eps = float(bounds.precision_for(precision, dtype=dtype, radius_inf=radius))
    elif fixed is None:
        eps = bounds.precision_from_dtype(dtype)
    elif isinstance(fixed, str):
        eps = bounds.precision_from_dtype(fixed)
    else:
        eps = float(fixed)
    encoder = isinstance(lm, HFEncoderAdapter)
    d, m = lm.width, int(n_memory)
    flat = np.asarray(states, dtype=np.float64).reshape(-1, d)
    min_cosine = float(bounds.min_pairwise_cosine(flat))
    theta = float(bounds.cone_half_angle(min_cosine))
    nan = float("nan")
    result = Bunch(
        kind="encoder" if encoder else "causal LM",
        causal=bool(lm.is_causal) if encoder else True,
        model=model if isinstance(model, str) else type(model).__name__,
        width=int(d), vocab_size=int(lm.vocab_size), n_memory=m, n_tokens=int(n_tokens),
        n_prompts=int(n_prompts), radius=radius, widths=geo["widths"],
        precision=float(eps),
        log_count_bound=bounds.reachable_log_count_bound(d, m, radius, eps),
        box_log_count_bound=bounds.box_log_count_bound(geo["widths"], m, eps),
        cone_log_count_bound=float(bounds.cone_log_count_bound(d, m, radius, eps, theta)),
        slope_bound=nan, box_slope_bound=nan, cone_slope_bound=nan, cell_slope_bound=nan,
        min_cosine=min_cosine, cone_half_angle=theta,
        cone_log_fraction=float(bounds.cone_log_fraction(theta, d)),
        cells=None, bounds=[], measured_slope=measured_slope, not_applicable=[],
    )
    decay = None
    if encoder:
        result.not_applicable = [
            "slope bound C = d ln(1 + 2r/eps) / ln|V| and its box, cone and box + cells "
            "refinements: they bound the length of generated token sequences, and this "
            "model has no next-token head (so no decoder cells either)",
            "cramming, accessibility curves and n50 (ReachabilityEstimator, "
            "accessibility_curves): they decode tokens greedily from the model",
            "copy-length cliff: it trains and decodes a causal LM",
        ]
    else:
        if n_cell_samples:
            try:
                cells = decoder_cell_proportions(lm, flat, region="box",
                                                 n_samples=int(n_cell_samples),
                                                 random_state=random_state, max_bytes=2**27)
            except ValueError as error:
                result.not_applicable = [f"decoder cells (box + cells bound): {error}"]
            else:
                decay = bounds.cell_decay(cells, random_state=random_state)
                result.cells = _decay_facts(decay, cells.disagreement, "box", lm.vocab_size)
        result.slope_bound = bounds.reachable_slope_bound(d, lm.vocab_size, radius, eps)
        result.box_slope_bound = bounds.box_slope_bound(geo["widths"], lm.vocab_size, eps)
        result.cone_slope_bound = float(bounds.cone_slope_bound(d, lm.vocab_size, radius,
                                                                 eps, theta))
        if decay is not None:
            result.cell_slope_bound = (float("inf") if decay["closed_form"] == 0 else float(
                bounds.cell_slope_bound(result.box_slope_bound, lm.vocab_size, decay)))
    table = _geometry_table(d, m, int(lm.vocab_size), dtype, radius, geo["widths"], theta,
                            decay, not encoder)
    result.bounds = _bound_rows(table, measured_slope)
    return result


# -- the experiment: ``reach`` (the same name as piece and command) --------------------

REACH_COLUMNS = ["n_memory", "length", "accessibility", "token_accuracy", "mean_steps"]
"""Columns of the accessibility table (one row per ``(m, length)``)."""

N50_COLUMNS = ["n_memory", "n50", "scale", "r2", "bracketed"]
"""Columns of the ``n50`` table (one row per ``m``)."""

TAIL_COLUMNS = ["n_memory", "n50", "rate", "rate_se", "n_points", "n_zero", "method",
                "logistic_rate"]
"""Columns of the tail-decay table (one row per ``m``: accessibility ~ exp(a - rate n))."""

BOUND_COLUMNS = ["width", "vocab_size", "radius", "precision", "slope_bound",
                 "box_slope_bound", "ratio", "box_ratio"]
"""Columns of the slope-bound table (one row)."""

BOUND_TABLE_COLUMNS = ["bound", "convention", "slope_bound", "ratio"]
"""Columns of the bounds table (one row per bound and precision convention)."""

GEOMETRY_BOUND_COLUMNS = ["bound", "convention", "log_count_bound", "slope_bound", "ratio"]
"""Columns of a geometry's bounds table (``reachability_geometry(...).bounds``)."""

_QUICK_SIZES = dict(n_memory=[1, 2, 3, 4], n_targets=16)
"""``reach --quick`` without ``--memory``/``--targets``: fewer points than the paper's."""

_PAPER_SIZES = dict(n_memory=[1, 2, 3, 4, 5], n_targets=20)
"""The paper's protocol sizes, the defaults of ``reach`` and :func:`accessibility_curves`."""


def _text(value, fmt="{:.4g}"):
    """A number for a table cell; "–" where it does not apply."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–" if value is None or math.isnan(value) else str(value)
    return fmt.format(value)


def _refinement_rows(cone, cells):
    """The cone and decoder-cell numbers as ``quantity``/``value`` rows (text).

    Parameters
    ----------
    cone : mapping
        ``min_cosine``, ``half_angle`` (radians) and ``log_fraction`` (the
        ``cone`` of :func:`accessibility_curves`; a geometry's
        ``min_cosine``, ``cone_half_angle`` and ``cone_log_fraction`` work too).
    cells : mapping or None
        The ``cells`` of :func:`accessibility_curves` or
        :func:`reachability_geometry`; None gives "–" rows.

    Returns
    -------
    rows : list of dict

    Examples
    --------
    >>> rows = _refinement_rows(dict(min_cosine=-0.4, half_angle=1.982, log_fraction=-1e-6),
    ...                        None)
    >>> rows[0]["value"], rows[-1]["value"]
    ('-0.400', '–')
    """
    theta = cone.get("half_angle", cone.get("cone_half_angle"))
    log_fraction = cone.get("log_fraction", cone.get("cone_log_fraction"))
    cells = cells or {}

    def pm(key):
        value = cells.get(key)
        if value is None or not math.isfinite(value):
            return "–"
        se = cells.get(f"{key}_se")
        return f"{value:.4g} ± {_text(se, '{:.2g}')} nats per token"

    n_samples = cells.get("n_samples")
    empty = cells.get("n_empty")
    disagree = cells.get("rule_disagreement")
    return [
        dict(quantity="smallest pairwise cosine of the hidden states",
             value=_text(cone["min_cosine"], "{:.3f}")),
        dict(quantity="cone half-angle θ = arccos(min cosine)",
             value="–" if theta is None else f"{theta:.3f} rad ({math.degrees(theta):.1f}°)"),
        dict(quantity="ln(share of the ball inside the cone), per vector",
             value=_text(log_fraction, "{:.3g}") + " nats"),
        dict(quantity="cell decay c, closed form −mean_t ln p_t", value=pm("closed_form")),
        dict(quantity="cell decay c, fitted (median of the k-fold product)", value=pm("fitted")),
        dict(quantity="ln|V| (equal cells)", value=_text(cells.get("ln_vocab"))),
        dict(quantity="tokens whose estimated cell is empty", value=_text(empty, "{:d}")),
        dict(quantity=f"Monte Carlo points, uniform in the {cells.get('region', 'box')} "
                      "of the states", value=_text(n_samples, "{:d}")),
        dict(quantity="points where argmax(W h + b) and the nearest row differ",
             value="–" if disagree is None or not math.isfinite(disagree)
             else f"{100 * disagree:.2f}%"),
    ]


def _run(settings, *, random_state, progress, device):
    """One :func:`accessibility_curves`; its result is already plain data."""
    result = accessibility_curves(random_state=random_state, progress=progress,
                                  device=device, **settings)
    return jsonable(dict(result))


def _tables(result):
    slope = result["slope"]
    tables = [
        ("accessibility per (m, length)", result["records"], REACH_COLUMNS),
        (f"n50 per m; n50 = {number_text(slope['slope'])} m + {number_text(slope['intercept'])} "
         f"(R² = {number_text(slope['r2'], '{:.4f}')})", result["n50"], N50_COLUMNS),
    ]
    if result.get("tail"):
        tables.append(("decay past n50 per m: accessibility ~ exp(a − rate·n), binomial fit "
                       "(nats per token; – where fewer than 2 lengths past n50 are reached); "
                       "logistic_rate = 1 / scale, the fitted logistic's tail",
                       result["tail"], TAIL_COLUMNS, "{:.3g}"))
    tables.append(("the slope bound C = d ln(1 + 2r/eps) / ln|V| and theory / experiment",
                   [result["bound"]], BOUND_COLUMNS))
    if result.get("bounds"):
        tables.append((f"slope bounds (tokens per prompt vector) per precision convention; "
                       f"ratio = bound / measured slope {number_text(slope['slope'])}",
                       result["bounds"], BOUND_TABLE_COLUMNS, None))
        tables.append(("the cone and the decoder cells (the refinements' numbers)",
                       _refinement_rows(result["cone"], result["cells"]),
                       ["quantity", "value"]))
    return tables


def _verdicts(result, paper_r2=0.99, paper_ratio=(4.5, 20.4)):
    """Linear growth of n50, the slope under its bound, and the size of the gap."""
    slope, bound = result["slope"], result["bound"]
    s, r2 = slope["slope"], slope["r2"]
    verdicts = []
    fits = result["n50"]
    bracketed = [f for f in fits if f["bracketed"]]
    verdicts.append(Verdict(
        "only finitely many outputs are reachable: for every m, accessibility falls "
        "through 1/2 at a finite length",
        f"{len(bracketed)} of {len(fits)} values of m bracketed, n50 = "
        + ", ".join(number_text(f["n50"]) for f in fits),
        grade(len(bracketed), len(fits)),
        "a logistic midpoint inside the lengths tried counts as bracketed",
    ))
    growing = is_finite(s) and s > 0
    verdicts.append(Verdict(
        f"n50 grows linearly with m (R² > {paper_r2:g} in the paper)",
        f"n50 = {number_text(s)} m + {number_text(slope['intercept'])}, R² = "
        f"{number_text(r2, '{:.4f}')} over {slope['n_points']} values of m",
        "agrees" if growing and r2 > paper_r2 else
        ("partly" if growing and is_finite(r2) and r2 > 0.9 else "does not agree"),
        f"positive slope with R² > {paper_r2:g} agrees, R² > 0.9 partly",
    ))
    below = growing and s < bound["slope_bound"]
    below_box = growing and s < bound["box_slope_bound"]
    verdicts.append(Verdict(
        "the measured slope stays below the bound C = d ln(1 + 2r/eps) / ln|V|",
        f"slope {number_text(s)} tokens per vector; C = {number_text(bound['slope_bound'])} (box "
        f"{number_text(bound['box_slope_bound'])}), eps = {number_text(bound['precision'])}",
        grade(below + below_box, 2),
        f"below C ({'yes' if below else 'no'}) and below its box refinement "
        f"({'yes' if below_box else 'no'})",
    ))
    ratio, box = bound["ratio"], bound["box_ratio"]
    low, high = paper_ratio
    refined = ""
    if "cell_ratio" in bound:
        refined = (f"; cone {number_text(bound.get('cone_ratio'))}, box + cells "
                   f"{number_text(bound.get('cell_ratio'))} (the paper's refined ratios: "
                   "4.56-10.82)")
    verdicts.append(Verdict(
        f"theory / experiment ratio of {low:g}-{high:g} (the paper's pretrained models)",
        f"ratio {number_text(ratio)} (box refinement {number_text(box)}{refined}), eps = "
        f"{number_text(bound['precision'])}",
        "agrees" if is_finite(ratio) and low <= ratio <= high else
        ("partly" if is_finite(box) and low <= box <= high else "does not agree"),
        "the ball bound's ratio in the range agrees, only the box's partly"
        + ("" if not (is_finite(ratio) and ratio > high) else
           "; ours is looser: the embedded 2-layer induction model uses little of its "
           "hidden-state volume" if result.get("config", {}).get("model") == "default"
           else "; ours is looser"),
    ))
    return verdicts


def _add_arguments(parser):
    parser.add_argument("--model", default="default",
                        help="'default', a Hugging Face model folder, or a saved "
                        "TinyCausalLM .pt")
    parser.add_argument("--memory", type=parse_ranks, default=None,
                        help="numbers of prompt vectors m, e.g. 1-4 or 1,2,4,8 (default: "
                        "1-5, the paper's; 1-4 with --quick)")
    parser.add_argument("--lengths", type=parse_lengths, default="auto",
                        help="target lengths, e.g. 2-16 or 2,4,8 (default: auto, until "
                        "nobody is reached twice in a row)")
    parser.add_argument("--targets", type=int, default=None,
                        help="random targets per point (default: 20, the paper's; 16 with "
                        "--quick)")
    parser.add_argument("--epochs", type=int, default=3000,
                        help="at most this many full-batch optimiser steps per point")
    add_hidden_alias(parser, "--max-steps", "--steps", dest="epochs", type=int)
    parser.add_argument("--patience", type=int, default=500,
                        help="stop a target after this many steps without a better accuracy")
    parser.add_argument("--precision", type=parse_precision, default=None,
                        help="eps of the headline bound: a number, a dtype name such as "
                        "float16, or a convention: machine, paper (2^-10) or relative "
                        "(r_inf / 2048) (default: the model's own dtype); the bounds table "
                        "shows all three conventions")
    parser.add_argument("--quick", action="store_true",
                        help="600 steps, patience 200, m = 1-4, 16 targets: seconds per point")


def _settings(args):
    sizes = _QUICK_SIZES if args.quick else _PAPER_SIZES
    return dict(model=args.model,
                n_memory=args.memory if args.memory is not None else sizes["n_memory"],
                lengths=args.lengths,
                n_targets=args.targets if args.targets is not None else sizes["n_targets"],
                max_steps=args.epochs, patience=args.patience,
                precision=args.precision, quick=args.quick)


def _convention_of(result):
    """The convention label of the headline bound's eps (or "eps given")."""
    eps = result["bound"]["precision"]
    for row in result.get("bounds") or []:
        if row["bound"] == "ball" and row["precision"] == eps:
            return row["convention"]
    return "ε given"


def _summary(result):
    cfg, b, s = result["config"], result["bound"], result["slope"]
    lines = [
        f"Cramming {cfg['n_targets']} random targets per point into m prompt vectors of "
        f"the frozen model {cfg['model']!r} (d = {b['width']}, |V| = {b['vocab_size']}); "
        f"AdamW lr {cfg['lr']:g}, at most {cfg['max_steps']} steps, patience "
        f"{cfg['patience']}, seed {cfg['random_state']}",
        f"n50 = {s['slope']:.3g}·m + {s['intercept']:.3g} (R² = {s['r2']:.3f}, "
        f"{s['n_points']} points)",
        f"slope bound C = d ln(1 + 2r/eps) / ln|V| = {b['slope_bound']:.4g} tokens per "
        f"vector (box refinement {b['box_slope_bound']:.4g}) with r = {b['radius']:.3g}, "
        f"eps = {b['precision']:.3g}; theory / experiment = {b['ratio']:.3g} "
        f"(box {b['box_ratio']:.3g}); {result['seconds']:.1f} s",
    ]
    if "cell_ratio" in b:
        lines.append(
            f"refined ({_convention_of(result)}): cone {_text(b['cone_slope_bound'])} "
            f"(ratio {_text(b['cone_ratio'], '{:.3g}')}), box + cells "
            f"{_text(b['cell_slope_bound'])} (ratio {_text(b['cell_ratio'], '{:.3g}')}); "
            "the paper's ball ratios 4.5-20.4, refined 4.56-10.82")
    return lines


EXPERIMENT = register(Experiment(
    name="reach",
    command="reach",
    title="Reachable outputs: accessibility, n50 against m, and the slope bounds",
    paper="How many different outputs can a Transformer generate?",
    help="accessibility of random targets by cramming prompt vectors",
    description="Cram random target sequences into m prompt vectors of a frozen causal LM "
    "(the embedded default model unless --model is given), for a grid of m and target "
    "lengths (the paper's sizes by default: m = 1-5, 20 targets per point); fit n50 per "
    "m, the decay past it, the slope of n50 against m, and compare it with the slope "
    "bounds (ball d ln(1 + 2r/eps) / ln|V|, box, cone, box + decoder cells) under the "
    "three precision conventions. Prints the tables, saves reach.png and reach.json.",
    quick=dict(model="default", n_memory=[1, 2, 3, 4], lengths="auto", n_targets=16,
               max_steps=600, patience=200, precision="float16", quick=True),
    full=dict(model="default", n_memory=[1, 2, 3, 4, 5], lengths="auto", n_targets=20,
              max_steps=3000, patience=500, precision="float16"),
    run=_run, tables=_tables, plot=one_plot(plot_accessibility, "reach.png"),
    verdicts=_verdicts, add_arguments=_add_arguments, settings=_settings, summary=_summary,
    floatfmt="{:.3g}",
))
"""Cramming and the slope bounds as a registered experiment (piece and command ``reach``)."""
