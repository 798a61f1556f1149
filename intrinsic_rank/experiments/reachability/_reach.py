"""Accessibility curves and the reachable-length slope.

From "How many different outputs can a Transformer generate?" (Meyer, Michelessa,
Chaux and Tan, ICML 2026, arXiv 2605.22223). The work of the experiment ``reach``,
declared in :mod:`intrinsic_rank.experiments.reachability`.
"""

import time

import numpy as np
from sklearn.utils import Bunch

from ..._validation import check_int, keyed_seed
from ...bounds import precision_for, reachable_slope_bound
from ...datasets import make_random_targets
from ...estimators import ReachabilityEstimator
from ...nn import as_causal_lm
from ...inspection import (
    BOUND_NAMES,
    bound_rows,
    bound_table_row,
    cell_facts,
    check_precision,
    slope_ratio,
)
from ..runner import (
    NOT_COMPARABLE,
    Verdict,
    grade,
    is_finite,
    jsonable,
    label_bound_rows,
    number_text,
    one_plot,
    progress_steps,
    pyplot,
    refinement_rows,
    save_figure,
)
from ._curves import fit_n50, fit_slope, fit_tail_decays

__all__ = [
    "AUTO_LENGTHS",
    "BOUND_COLUMNS",
    "BOUND_TABLE_COLUMNS",
    "N50_COLUMNS",
    "REACH_COLUMNS",
    "TAIL_COLUMNS",
    "accessibility_curves",
    "plot_accessibility",
]

_CELL_SAMPLES = 2**17
"""Monte Carlo points of the decoder-cell estimate of the widest fit's geometry (the
estimator's own default skips the cells; the curves' box + cells bound needs them)."""

#: lengths tried, in order, by ``lengths="auto"`` until accessibility stays at zero
AUTO_LENGTHS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64,
                80, 96, 112, 128, 160, 192, 224, 256)


def _length_seed(random_state, length):
    """Seed of the targets of one length: the same targets for every ``m``."""
    return keyed_seed(random_state, length)


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
        ``accessibility``, ``token_accuracy``, ``mean_steps``,
        ``budget_limited`` -- the targets not reached that used every one of
        ``max_steps``, still improving when the budget ran out, rather than
        stopped by ``patience`` --, ``seconds``),
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
    estimator_precision = check_precision(precision)
    n_memory, grid, auto = _check_curve_grid(n_memory, lengths, n_targets)
    lm = as_causal_lm(model)
    settings = dict(model=lm, max_epochs=max_steps, patience=patience, lr=lr,
                    precision=estimator_precision, random_state=random_state, device=device)
    records, fits, radius, widest = _cram_every_point(lm, n_memory, grid, auto, n_targets,
                                                      settings, random_state, progress)
    slope = _n50_slope(fits)
    measured = slope["slope"]
    # The geometry (radius, box, cone, cells, bounds table) depends on the seed, m and the
    # length only, never on the optimisation: one step recomputes the widest fit's, cells on.
    fitted = ReachabilityEstimator(n_memory=widest[0], n_cell_samples=_CELL_SAMPLES,
                                   **dict(settings, max_epochs=1)).fit(widest[1])
    g = fitted.geometry_
    if g.radius != radius:  # pragma: no cover - the geometry is seeded
        raise RuntimeError("the reachability geometry changed between two fits of one seed")
    table = label_bound_rows(bound_rows(g.table, measured))
    bound = _slope_bounds(fitted, table, precision, radius, measured)
    cone_facts = dict(min_cosine=g.min_cosine, half_angle=g.cone_half_angle,
                      log_fraction=g.cone_log_fraction)
    disagreement = float("nan") if g.cells is None else g.cells.disagreement
    cell_numbers = cell_facts(g.decay, disagreement, fitted.cell_region, fitted.vocab_size_)
    tail = fit_tail_decays(records, fits, n_targets=n_targets)
    for row, fit in zip(tail, fits):  # both in increasing m
        # a decreasing logistic falls like exp(-(n - n50) / scale) past n50
        row["logistic_rate"] = 1.0 / fit["scale"] if fit["scale"] > 0 else float("nan")
    config = dict(model=model if isinstance(model, str) else type(model).__name__,
                  n_memory=n_memory, lengths=lengths if auto else grid, n_targets=n_targets,
                  max_steps=max_steps, patience=patience, lr=lr, precision=precision,
                  quick=quick, random_state=random_state)
    return Bunch(records=records, n50=fits, tail=tail, slope=slope, bound=bound, bounds=table,
                 cone=cone_facts, cells=cell_numbers, config=config,
                 seconds=time.perf_counter() - start)


def _check_curve_grid(n_memory, lengths, n_targets):
    """``n_memory`` as a list, the length grid and whether it is ``"auto"``; one ValueError."""
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
    return n_memory, grid, auto


def _cram_every_point(lm, n_memory, grid, auto, n_targets, settings, random_state, progress):
    """Cram the targets of every ``(m, n)`` point; the records, each ``m``'s ``n50`` fit,
    and the largest radius met with the ``(m, targets)`` of its fit."""
    records, fits, radius, widest = [], [], 0.0, None
    with progress_steps(None if auto else len(n_memory) * len(grid), "reach",
                        enabled=progress) as bar:
        for m in n_memory:
            zeros = 0
            for n in grid:
                if lm.max_length is not None and m + n - 1 > lm.max_length:
                    break
                X = make_random_targets(n_targets, n, lm.vocab_size,
                                        random_state=_length_seed(random_state, n))
                rec, est = _cram_point(m, n, X, settings)
                records.append(rec)
                if est.geometry_.radius >= radius:
                    radius, widest = est.geometry_.radius, (m, X)
                bar.update(f"m = {m}, n = {n}: accessibility {rec['accessibility']:.2f}")
                zeros = zeros + 1 if rec["accessibility"] == 0 else 0
                if auto and zeros >= 2:
                    break
            fits.append(_n50_fit(m, [r for r in records if r["n_memory"] == m]))
    if not records:
        raise ValueError(
            f"no (m, length) point fits the model's context of {lm.max_length} positions"
        )
    return records, fits, radius, widest


def _cram_point(m, n, X, settings):
    """One point of a curve: ``m`` prompt vectors crammed for the targets ``X`` of length ``n``."""
    tic = time.perf_counter()
    # the cells are measured once, by the caller, for the fit with the largest radius
    est = ReachabilityEstimator(n_memory=m, n_cell_samples=0, **settings).fit(X)
    rec = dict(n_memory=m, length=n, accessibility=est.accessibility_,
               token_accuracy=float(est.token_accuracy_.mean()),
               mean_steps=float(est.n_steps_.mean()),
               budget_limited=int(np.sum(~est.reached_
                                         & (est.n_steps_ >= settings["max_epochs"]))),
               seconds=time.perf_counter() - tic)
    return rec, est


def _n50_fit(m, rows):
    """The logistic ``n50`` of one ``m``'s points (NaN below two points)."""
    fit = fit_n50([r["length"] for r in rows], [r["accessibility"] for r in rows]) \
        if len(rows) >= 2 else dict(midpoint=np.nan, scale=np.nan, r2=np.nan,
                                    bracketed=False)
    return dict(n_memory=m, n50=float(fit["midpoint"]), scale=float(fit["scale"]),
                r2=float(fit["r2"]), bracketed=bool(fit["bracketed"]))


def _n50_slope(fits):
    """The slope of ``n50`` against ``m`` over the finite fits (NaN below two ``m``)."""
    finite = [f for f in fits if np.isfinite(f["n50"])]
    if len(finite) >= 2 and len({f["n_memory"] for f in finite}) >= 2:
        slope = fit_slope([f["n_memory"] for f in finite], [f["n50"] for f in finite])
        return {k: (float(v) if isinstance(v, (float, np.floating)) else v)
                for k, v in slope.items()}
    return dict(slope=np.nan, intercept=np.nan, r2=np.nan, n_points=len(finite))


def _slope_bounds(fitted, table, precision, radius, measured):
    """The four slope bounds at the chosen precision, with their ratios to the measured slope."""
    if precision == "relative":
        eps = bound_table_row(table, "ball", "relative")["precision"]
        ball, box, cone, cells = (bound_table_row(table, name, "relative")["slope_bound"]
                                  for name in BOUND_NAMES)
    else:
        g = fitted.geometry_
        eps, ball, box = g.precision, g.slope_bound, g.box_slope_bound
        cone, cells = g.cone_slope_bound, g.cell_slope_bound
    return dict(
        width=fitted.width_, vocab_size=fitted.vocab_size_, radius=radius, precision=eps,
        slope_bound=ball, box_slope_bound=box, cone_slope_bound=cone, cell_slope_bound=cells,
        ratio=slope_ratio(ball, measured), box_ratio=slope_ratio(box, measured),
        cone_ratio=slope_ratio(cone, measured), cell_ratio=slope_ratio(cells, measured),
    )


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
        refined = (f", cone {number_text(b['cone_slope_bound'], '{:.0f}')}, box + cells "
                   f"{number_text(b['cell_slope_bound'], '{:.0f}')}")
    ratios = ""
    if "cell_ratio" in b:
        ratios = (f", cone {number_text(b['cone_ratio'], '{:.0f}')}, box + cells "
                  f"{number_text(b['cell_ratio'], '{:.0f}')}")
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
    return save_figure(fig, path)


# -- the experiment: ``reach`` (the same name as piece and command) --------------------

REACH_COLUMNS = ["n_memory", "length", "accessibility", "token_accuracy", "mean_steps",
                 "budget_limited"]
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
                       refinement_rows(result["cone"], result["cells"]),
                       ["quantity", "value"]))
    return tables


PAPER_R2 = 0.99
"""The paper's linearity of ``n50`` in ``m``: "R² > 0.99" (its empirical validation)."""

PAPER_QUOTED_RATIO = (4.5, 20.4)
"""The paper's theory / experiment ratios "from 4.5 to 20.4, depending on the model and the
geometric assumptions" (the paper's empirical validation): context only, since it spans several
bounds."""

RATIO_CONVENTION = "relative"
"""The one precision convention of the ratio verdict: ``eps = r_inf / 2048``, the authors' own
(``2 ** (log2(r_inf) - 11)`` in ``th_bounds_estimation.ipynb`` of
github.com/mario-michelessa/transformers_accessibility at commit d82cea1)."""

#: The authors' published constants of the seven models of that range (``models_list.csv``
#: of their repository at commit d82cea15252559245ea99c3c4642e0b08b0657d8; tests/data/
#: authors_models.csv holds them with their source): name, width d, vocabulary |V|, r_inf
#: (largest absolute hidden coordinate), measured slope.
_AUTHORS_MODELS = (
    ("Pythia-160M", 768, 50304, 22.45, 90.4),
    ("Pythia-410M", 1024, 50304, 43.44, 112.4),
    ("Pythia-1B", 2048, 50304, 57.38, 287.4),
    ("Qwen2.5-0.5B", 896, 151936, 226.75, 71.0),
    ("Qwen2.5-1.5B", 1536, 151936, 155.75, 79.6),
    ("Llama-3.2-1B", 2048, 128256, 20.91, 137.8),
    ("Gemma-3-270M", 640, 262144, 9.95, 44.54),
)

_CONVENTION_TEXT = {"relative": "ε = r∞/2048", "paper": "ε = 2^-10"}


def _authors_ball_range(convention=RATIO_CONVENTION):
    """Min and max over :data:`_AUTHORS_MODELS` of the ball bound / measured slope."""
    ratios = [reachable_slope_bound(d, v, r, precision_for(convention, radius_inf=r)) / s
              for _, d, v, r, s in _AUTHORS_MODELS]
    return min(ratios), max(ratios)


def _ball_ratio(result, convention=RATIO_CONVENTION):
    """Our ball bound / measured slope at one precision convention.

    The ``ball`` row of the bounds table at that convention; without a table, the
    headline bound when its eps is that convention's; NaN when neither is there.
    """
    for row in result.get("bounds") or []:
        if row.get("bound") == "ball" and row.get("precision_convention") == convention:
            return row.get("ratio")
    bound = result["bound"]
    radius = bound.get("radius")
    if convention == "relative" and not (is_finite(radius) and radius > 0):
        return float("nan")
    if bound.get("precision") == precision_for(convention, radius_inf=radius):
        return bound.get("ratio")
    return float("nan")


def _is_pretrained(model):
    """Whether a ``reach`` result's model is a pretrained LM like the paper's.

    The embedded ``"default"`` model and a saved ``.pt`` (a
    :class:`~intrinsic_rank.nn.TinyCausalLM`) are small toy models; a name of a
    packaged or Hugging Face model (``"smollm2-135m"``, a folder) is a pretrained
    LM.

    Examples
    --------
    >>> _is_pretrained("default"), _is_pretrained("run/tiny.pt"), _is_pretrained("smollm2-135m")
    (False, False, True)
    """
    return isinstance(model, str) and model != "default" and not model.endswith(".pt")


def _robust_crossing(records, fit, n_targets):
    """Whether accessibility stays below 1/2 past ``n50`` even if the budget had been larger.

    At some tried length past ``n50``, the reached targets plus every target that was
    still improving when ``max_steps`` ran out (``budget_limited``; all the unreached ones
    when it was not recorded) are fewer than half of the targets.
    """
    if not fit["bracketed"] or not is_finite(fit["n50"]):
        return False
    for rec in records:
        if rec["n_memory"] == fit["n_memory"] and rec["length"] > fit["n50"]:
            unreached = round((1 - rec["accessibility"]) * n_targets)
            limited = rec.get("budget_limited", unreached)
            if rec["accessibility"] + limited / n_targets < 0.5:
                return True
    return False


def _finite_verdict(result):
    fits, records = result["n50"], result.get("records", [])
    n_targets = result.get("config", {}).get("n_targets") or 1
    robust = [f for f in fits if _robust_crossing(records, f, n_targets)]
    bracketed = [f for f in fits if f["bracketed"]]
    return Verdict(
        "only finitely many outputs are reachable: for every m, accessibility falls "
        "through 1/2 at a finite length",
        f"{len(robust)} of {len(fits)} values of m cross 1/2 whatever the step budget "
        f"({len(bracketed)} bracketed at all); n50 = "
        + ", ".join(number_text(f["n50"]) for f in fits),
        grade(len(robust), len(fits)),
        "an m counts when its logistic midpoint n50 lies inside the lengths tried and, at "
        "some length past it, the targets reached plus those still improving when the "
        "step budget ran out (not stopped by the patience rule) are fewer than half: a "
        "larger budget could not lift that length back over 1/2. Every m agrees, some "
        "partly",
    )


def _ratio_verdict(result):
    """The theory / experiment ratio, at one convention, only on a pretrained model."""
    bound, model = result["bound"], result.get("config", {}).get("model")
    ours, (low, high) = _ball_ratio(result), _authors_ball_range()
    quoted = f"{PAPER_QUOTED_RATIO[0]:g}-{PAPER_QUOTED_RATIO[1]:g}"
    where = _CONVENTION_TEXT[RATIO_CONVENTION]
    refined = ""
    if "cell_ratio" in bound:
        refined = (f"; cone {number_text(bound.get('cone_ratio'))}, box + cells "
                   f"{number_text(bound.get('cell_ratio'))} at the headline eps "
                   f"{number_text(bound['precision'])}")
    measured = (f"{model}: ball {number_text(ours)} at {where} (the authors' seven models: "
                f"{low:.2f}-{high:.2f}){refined}")
    claim = (f"the ball bound's theory / experiment ratio at {where} is what the paper's "
             f"pretrained models give: {low:.2f}-{high:.2f} on the authors' seven models (the "
             f"paper quotes {quoted} across its bounds)")
    if not _is_pretrained(model):
        return Verdict(
            claim, measured, NOT_COMPARABLE,
            "the embedded model is a 2-layer, width-64 toy trained on induction sequences, "
            "the paper's models are pretrained LMs of 160M to 1.5B parameters: how much of "
            "its hidden-state volume a model uses is not a property the two share, so the "
            "ratio is shown, not graded; reach on a pretrained model (the GPU script's "
            "SmolLM2-135M-Instruct run) gives a comparable row")
    inside = is_finite(ours) and low <= ours <= high
    return Verdict(
        claim, measured, "agrees" if inside else "does not agree",
        f"one convention, the authors' own ({where}): our ball ratio inside the range of "
        f"their seven models' ball ratios at it (from their published d, |V|, r∞ and "
        f"slopes) agrees, outside does not; the paper's {quoted} is context only",
    )


def _verdicts(result, paper_r2=PAPER_R2):
    """Finitely many outputs, linear growth of n50, the slope under its bound, the ratio.

    The claims are the paper's ("How many different outputs can a Transformer
    generate?": Theorem 4.5 and Corollaries 4.6 and 4.10 for finiteness
    and the bound ``C <= d ln(1 + 2r/eps) / ln|V|``; its empirical validation for
    "n50 scales linearly with m (R² > 0.99)" and the theory / experiment ratios
    of 4.5 to 20.4). The rules, fixed before any run:

    * **Finitely many:** every ``m`` crosses 1/2 inside the lengths tried, and
      at some length past ``n50`` the crossing survives crediting every
      target still improving at the step budget as reached
      (:func:`_robust_crossing`): agrees; some ``m``: partly; none: does not
      agree.
    * **Linear n50:** positive slope with R² > 0.99 (the paper's number)
      agrees; a positive slope with a lower R² partly; otherwise does not
      agree.
    * **Below the bound:** below ``C`` and below its box refinement agrees, one
      of the two partly, neither does not agree.
    * **The ratio:** at one precision convention, :data:`RATIO_CONVENTION`
      (``r_inf / 2048``, the authors'); on a pretrained LM, inside the range of
      the authors' seven models agrees, outside does not; on the embedded toy
      model (or a saved TinyCausalLM) it is ``"not comparable"``.
    """
    slope, bound = result["slope"], result["bound"]
    s, r2 = slope["slope"], slope["r2"]
    verdicts = [_finite_verdict(result)]
    growing = is_finite(s) and s > 0
    verdicts.append(Verdict(
        f"n50 grows linearly with m (R² > {paper_r2:g} in the paper)",
        f"n50 = {number_text(s)} m + {number_text(slope['intercept'])}, R² = "
        f"{number_text(r2, '{:.4f}')} over {slope['n_points']} values of m",
        "agrees" if growing and is_finite(r2) and r2 > paper_r2 else
        ("partly" if growing else "does not agree"),
        f"positive slope with R² > {paper_r2:g} (the paper's) agrees, a positive slope "
        "with a lower R² partly",
    ))
    below = growing and s < bound["slope_bound"]
    below_box = growing and s < bound["box_slope_bound"]
    verdicts.append(Verdict(
        "the measured slope stays below the bound C = d ln(1 + 2r/eps) / ln|V|",
        f"slope {number_text(s)} tokens per vector; C = {number_text(bound['slope_bound'])} (box "
        f"{number_text(bound['box_slope_bound'])}), eps = {number_text(bound['precision'])}",
        grade(below + below_box, 2),
        f"below C ({'yes' if below else 'no'}) and below its box refinement "
        f"({'yes' if below_box else 'no'}); both agree, one partly",
    ))
    verdicts.append(_ratio_verdict(result))
    return verdicts


_plot = one_plot(plot_accessibility, "reach.png")


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
            f"refined ({_convention_of(result)}): cone "
            f"{number_text(b['cone_slope_bound'], '{:.4g}')} "
            f"(ratio {number_text(b['cone_ratio'], '{:.3g}')}), box + cells "
            f"{number_text(b['cell_slope_bound'], '{:.4g}')} "
            f"(ratio {number_text(b['cell_ratio'], '{:.3g}')}); "
            "the authors' ball ratios at ε = r∞/2048: "
            + "-".join(f"{v:.2f}" for v in _authors_ball_range("relative"))
            + " (the paper quotes 4.5-20.4 across ball and refined bounds)")
    return lines
