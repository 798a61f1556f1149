"""Hidden-state geometry of a model and the reachability bounds it gives.

The radius, per-coordinate box and cone of a model's final hidden states
under random prompts, the decoder cells of its output head in that box, and
the bounds of "How many different outputs can a Transformer generate?" at the
three precision conventions of :func:`~intrinsic_rank.bounds.precision_for`,
as numbers (the commands' words for them are in
:mod:`intrinsic_rank.experiments.runner`).
"""

import math

import numpy as np
from sklearn.utils import Bunch

from .. import bounds
from .._validation import check_int
from ..nn import HFEncoderAdapter, as_model_adapter, random_prompt_hidden_states
from ._decoder_cells import decoder_cell_proportions

__all__ = [
    "BOUND_NAMES",
    "CONVENTION_NAMES",
    "bound_rows",
    "bound_table_row",
    "cell_facts",
    "check_precision",
    "reachability_geometry",
    "slope_ratio",
    "states_geometry",
]

BOUND_NAMES = ("ball", "box", "cone", "box + cells")
"""The slope bounds of the bounds tables, loosest first (one row each per convention)."""

CONVENTION_NAMES = tuple(bounds.PRECISION_CONVENTIONS)
"""``precision`` names that select a convention of :func:`~intrinsic_rank.bounds.precision_for`."""


def check_precision(precision):
    """Validate a ``precision`` before any fit and return what the estimators get.

    Parameters
    ----------
    precision : float, str or None
        A number in (0, 1), a dtype name (``"float16"``, ``"bfloat16"``,
        ``"float32"``, ``"float64"``), None, or a precision convention of
        :data:`CONVENTION_NAMES`.

    Returns
    -------
    precision : float, str or None
        The number, the dtype name, or for a convention: None for
        ``"machine"``, ``2**-10`` for ``"paper"`` and None for ``"relative"``
        (it needs the measured radius, so its bounds are read from the
        ``relative`` rows of the bounds table afterwards).

    Raises
    ------
    ValueError
        Naming ``precision`` and what it may be.

    Examples
    --------
    >>> check_precision("paper"), check_precision("float16"), check_precision(1e-3)
    (0.0009765625, 'float16', 0.001)
    """
    if precision is None:
        return None
    if isinstance(precision, (bool, np.bool_)):
        pass  # not a number: the error below
    elif isinstance(precision, str):
        if precision in CONVENTION_NAMES:
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
        f"float64) or a precision convention ({', '.join(CONVENTION_NAMES)}); "
        f"got {precision!r}"
    )


def slope_ratio(bound, slope):
    """A bound over a measured slope: theory over experiment.

    Parameters
    ----------
    bound : float
    slope : float or None

    Returns
    -------
    ratio : float
        NaN where either is missing or the slope is not positive.

    Examples
    --------
    >>> slope_ratio(100.0, 4.0), slope_ratio(100.0, None)
    (25.0, nan)
    """
    if slope is None or not (math.isfinite(slope) and slope > 0) or not math.isfinite(bound):
        return float("nan")
    return bound / slope


def bound_rows(table, slope):
    """The rows of a bounds table, divided by a measured slope.

    Parameters
    ----------
    table : list of dict
        One row per bound and precision convention, with ``bound``,
        ``precision_convention``, ``precision``, ``slope_bound`` and optionally
        ``log_count_bound`` (as the estimator's ``bounds_table_``).
    slope : float or None
        The measured slope to divide by; None leaves ``ratio`` NaN.

    Returns
    -------
    rows : list of dict
        ``bound``, ``precision_convention``, ``precision``, ``slope_bound``,
        ``ratio`` and ``log_count_bound`` where the table has it.

    Examples
    --------
    >>> rows = bound_rows([dict(bound="ball", precision_convention="paper",
    ...                         precision=2.0**-10, slope_bound=40.0)], 4.0)
    >>> rows[0]["precision"], rows[0]["ratio"]
    (0.0009765625, 10.0)
    """
    rows = []
    for row in table:
        eps = float(row["precision"])
        slope_bound = float(row["slope_bound"])
        rows.append(dict(bound=row["bound"],
                         precision_convention=row["precision_convention"], precision=eps,
                         slope_bound=slope_bound, ratio=slope_ratio(slope_bound, slope),
                         **{k: row[k] for k in ("log_count_bound",) if k in row}))
    return rows


def bound_table_row(table, bound, convention):
    """The row of ``table`` for one bound at one precision convention.

    Parameters
    ----------
    table : list of dict
        As :func:`bound_rows` returns (or takes).
    bound : str
        One of :data:`BOUND_NAMES`.
    convention : str
        One of :data:`CONVENTION_NAMES`.

    Returns
    -------
    row : dict

    Raises
    ------
    KeyError
        If the table has no such row.
    """
    for row in table:
        if row["bound"] == bound and row["precision_convention"] == convention:
            return row
    raise KeyError((bound, convention))


def cell_facts(decay, disagreement, region, vocab_size):
    """The decoder-cell numbers a result keeps, NaN or None where none were measured.

    Parameters
    ----------
    decay : mapping or None
        :func:`~intrinsic_rank.bounds.cell_decay` of the cells; None when no
        cells were estimated.
    disagreement : float or None
        The share of points where argmax and the nearest-row rule differ.
    region : {"box", "ball"}
    vocab_size : int

    Returns
    -------
    facts : dict
        ``region``, ``ln_vocab``, ``rule_disagreement``, the decay in closed
        form and fitted with their standard errors and the fit's R²,
        ``n_empty``, ``n_cells`` and ``n_samples``.
    """
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


def _bounds_table(d, m, vocab_size, dtype, radius, widths, theta, decay, causal):
    """Rows of the bounds table: log counts (nats) and slope bounds per convention."""
    nan = float("nan")
    rows = []
    for convention in CONVENTION_NAMES:
        try:
            eps = float(bounds.precision_for(convention, dtype=dtype, radius_inf=radius))
            logs = (bounds.reachable_log_count_bound(d, m, radius, eps),
                    bounds.box_log_count_bound(widths, m, eps),
                    bounds.cone_log_count_bound(d, m, radius, eps, theta), nan)
            slopes = [nan] * 4
            if causal:
                box = float(bounds.box_slope_bound(widths, vocab_size, eps))
                slopes = [float(bounds.reachable_slope_bound(d, vocab_size, radius, eps)), box,
                          float(bounds.cone_slope_bound(d, vocab_size, radius, eps, theta)),
                          _cell_slope(box, vocab_size, decay)]
        except ValueError:  # e.g. "relative" with r >= 2048: eps >= 1
            eps, logs, slopes = nan, (nan,) * 4, [nan] * 4
        for name, log_count, slope in zip(BOUND_NAMES, logs, slopes):
            rows.append(dict(bound=name, precision_convention=convention, precision=eps,
                             log_count_bound=float(log_count), slope_bound=float(slope)))
    return rows


def _cell_slope(box_slope, vocab_size, decay):
    """``C_cell`` from the box bound and the cells' decay; NaN without cells."""
    if decay is None:
        return float("nan")
    if decay["closed_form"] == 0:
        return float("inf")  # one cell holds the whole region: no refinement
    return float(bounds.cell_slope_bound(box_slope, vocab_size, decay))


def states_geometry(lm, states, n_memory, precision, *, causal=True, n_cell_samples=0,
                    cell_region="box", random_state=0, verbose=False):
    """The geometry of final hidden states and every reachability bound it gives.

    The one computation behind :func:`reachability_geometry` and
    :class:`~intrinsic_rank.ReachabilityEstimator`: the radius and
    per-coordinate box of ``states``
    (:func:`~intrinsic_rank.bounds.hidden_state_geometry`), their smallest
    pairwise cosine and the cone it gives, for a model with a next-token head
    the decoder cells of ``region`` (:func:`decoder_cell_proportions`,
    :func:`~intrinsic_rank.bounds.cell_decay`), the count and slope bounds at
    ``precision`` and the bounds table at every precision convention.

    Parameters
    ----------
    lm : model adapter
        The model the states came from (its width, vocabulary, dtype and head).
    states : ndarray of shape (n_prompts, n_positions, width)
        Final hidden states, e.g. of
        :func:`~intrinsic_rank.nn.random_prompt_hidden_states`.
    n_memory : int
        Prompt vectors ``m`` of the count bounds.
    precision : float
        ``eps`` of the top-level bounds, in ``(0, 1)``.
    causal : bool, default=True
        Whether the model has a next-token head: without one the slope bounds
        are NaN and no cells are counted.
    n_cell_samples : int, default=0
        Monte Carlo points of the decoder cells; 0 skips them.
    cell_region : {"box", "ball"}, default="box"
    random_state : int, default=0
        Seeds the cell Monte Carlo and the decay's fit.
    verbose : bool, default=False
        A progress line on stderr while the cells are counted.

    Returns
    -------
    geometry : Bunch
        ``radius``, ``widths``, ``flat`` (the states as float64 rows),
        ``precision``, ``min_cosine``, ``cone_half_angle``,
        ``cone_log_fraction``, ``log_count_bound``, ``box_log_count_bound``,
        ``cone_log_count_bound`` (nats), ``slope_bound``, ``box_slope_bound``,
        ``cone_slope_bound``, ``cell_slope_bound`` (NaN where they do not
        apply), ``cells`` (the result of :func:`decoder_cell_proportions`, or
        None), ``decay`` (:func:`~intrinsic_rank.bounds.cell_decay`, or None),
        ``cell_error`` (why the cells could not be counted, or None) and
        ``table`` (one row per bound of :data:`BOUND_NAMES` and convention of
        :data:`CONVENTION_NAMES`: ``bound``, ``precision_convention``,
        ``precision``, ``log_count_bound``, ``slope_bound``).

    Examples
    --------
    >>> from intrinsic_rank.nn import as_causal_lm, random_prompt_hidden_states
    >>> lm = as_causal_lm("default")
    >>> states = random_prompt_hidden_states(lm, 1, 4, n_prompts=8, random_state=0)
    >>> g = states_geometry(lm, states, 1, 2.0**-10)
    >>> bool(g.box_slope_bound <= g.slope_bound), len(g.table), g.cells is None
    (True, 12, True)
    """
    d, m, vocab_size = int(lm.width), int(n_memory), int(lm.vocab_size)
    eps = float(precision)
    geo = bounds.hidden_state_geometry(states)
    radius = float(geo["radius"])
    widths = np.asarray(geo["widths"], dtype=float)
    flat = np.asarray(states, dtype=np.float64).reshape(-1, d)
    min_cosine = float(bounds.min_pairwise_cosine(flat))
    theta = float(bounds.cone_half_angle(min_cosine))
    nan = float("nan")
    result = Bunch(
        radius=radius, widths=widths, flat=flat, precision=eps,
        min_cosine=min_cosine, cone_half_angle=theta,
        cone_log_fraction=float(bounds.cone_log_fraction(theta, d)),
        log_count_bound=float(bounds.reachable_log_count_bound(d, m, radius, eps)),
        box_log_count_bound=float(bounds.box_log_count_bound(widths, m, eps)),
        cone_log_count_bound=float(bounds.cone_log_count_bound(d, m, radius, eps, theta)),
        slope_bound=nan, box_slope_bound=nan, cone_slope_bound=nan, cell_slope_bound=nan,
        cells=None, decay=None, cell_error=None,
    )
    if causal:
        if n_cell_samples:
            try:
                result.cells = decoder_cell_proportions(
                    lm, flat, region=cell_region, n_samples=int(n_cell_samples),
                    random_state=random_state, max_bytes=2**27, verbose=verbose)
            except ValueError as error:
                result.cell_error = str(error)
            else:
                result.decay = bounds.cell_decay(result.cells, random_state=random_state)
        result.slope_bound = float(bounds.reachable_slope_bound(d, vocab_size, radius, eps))
        result.box_slope_bound = float(bounds.box_slope_bound(widths, vocab_size, eps))
        result.cone_slope_bound = float(bounds.cone_slope_bound(d, vocab_size, radius, eps,
                                                                 theta))
        result.cell_slope_bound = _cell_slope(result.box_slope_bound, vocab_size, result.decay)
    result.table = _bounds_table(d, m, vocab_size, str(lm.dtype), radius, widths, theta,
                                 result.decay, causal)
    return result


def reachability_geometry(model="default", n_memory=1, n_tokens=8, precision=None,
                          n_prompts=256, n_cell_samples=2**17, measured_slope=None,
                          random_state=0, keep_cells=False, verbose=False):
    """The reachability paper's radius, box, cone, decoder cells and bounds on any model.

    Draws ``n_prompts`` random prompts (``n_memory`` random vectors drawn as a
    cramming run initialises its memory, then ``n_tokens`` random tokens),
    measures the final hidden states' radius and per-coordinate box
    (:func:`~intrinsic_rank.nn.random_prompt_hidden_states`,
    :func:`~intrinsic_rank.bounds.hidden_state_geometry`), their smallest
    pairwise cosine (the cone, :func:`~intrinsic_rank.bounds.min_pairwise_cosine`)
    and, for a model with a next-token head, the decoder's cells in the box of
    the states (:func:`~intrinsic_rank.inspection.decoder_cell_proportions`,
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
      cramming and the copy cliff do not apply: ``kind`` says so, and the
      slope entries are NaN.

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
        Monte Carlo points of the decoder-cell estimate; 0 skips it. The
        matmul runs in bfloat16 with a float32 re-check of the near-best
        tokens (:func:`~intrinsic_rank.inspection.decoder_cell_proportions`):
        about 80 s on SmolLM2-135M-Instruct's 49,152 x 576 head on one idle CPU thread
        (4.4x faster than float32 in a run measured under load), under a
        second on the default model. With ``n`` points a non-empty cell
        has ``p_t >= 1/n``, so the decay ``c`` is at most ``ln n``
        (``cells["max_decay"]``) and ``cells["n_empty"]`` cells are unresolved.
    measured_slope : float or None, default=None
        A measured slope (tokens per prompt vector, e.g. of
        :func:`~intrinsic_rank.experiments.accessibility_curves` on the same
        model) to divide the slope bounds by: the ``ratio`` column of
        ``bounds``; None leaves it NaN.
    random_state : int, default=0
        Seeds the prompts and the cell Monte Carlo.
    keep_cells : bool, default=False
        Also return the per-token cell counts (``cell_counts``), e.g. to rank
        the tokens by their share of the box.
    verbose : bool, default=False
        A progress line on stderr while the cells are counted.

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
        (as the ``cells`` of
        :func:`~intrinsic_rank.experiments.accessibility_curves`; None for an
        encoder or ``n_cell_samples=0``; besides the keys of :func:`cell_facts` it holds
        ``max_decay`` = ``ln n_cell_samples``, ``matmul_dtype`` and ``seconds``
        of the count), ``cell_counts`` (only with ``keep_cells``: points per
        token under ``argmax(W h + b)``, None without cells), ``bounds`` (one
        row per bound and precision convention, :func:`bound_rows`:
        ``bound``, ``precision_convention``, ``precision``,
        ``log_count_bound``, ``slope_bound``, ``ratio``), ``measured_slope``
        and ``cell_error`` (why the decoder cells could not be counted, e.g.
        a head too large for the memory given; None otherwise).

    Examples
    --------
    >>> g = reachability_geometry("default", n_memory=2, n_tokens=6, n_prompts=16,
    ...                           n_cell_samples=4096)
    >>> g.kind, g.width, bool(g.radius > 0), g.cell_error
    ('causal LM', 64, True, None)
    >>> [(r["bound"], r["precision_convention"], r["precision"]) for r in g.bounds][4:6]
    [('ball', 'paper', 0.0009765625), ('box', 'paper', 0.0009765625)]
    """
    for value, name, low in ((n_memory, "n_memory", 1), (n_tokens, "n_tokens", 0),
                             (n_prompts, "n_prompts", 1), (n_cell_samples, "n_cell_samples", 0)):
        check_int(value, name, low)
    fixed = check_precision(precision)
    if measured_slope is not None:
        measured_slope = float(measured_slope)
        if not (math.isfinite(measured_slope) and measured_slope > 0):
            raise ValueError(f"measured_slope must be a positive number or None; "
                             f"got {measured_slope!r}")
    lm = as_model_adapter(model)
    dtype = str(lm.dtype)
    states = random_prompt_hidden_states(lm, int(n_memory), int(n_tokens),
                                         n_prompts=int(n_prompts), random_state=random_state)
    radius = float(bounds.hidden_state_geometry(states)["radius"])
    if precision in CONVENTION_NAMES:
        eps = float(bounds.precision_for(precision, dtype=dtype, radius_inf=radius))
    elif fixed is None:
        eps = bounds.precision_from_dtype(dtype)
    elif isinstance(fixed, str):
        eps = bounds.precision_from_dtype(fixed)
    else:
        eps = float(fixed)
    encoder = isinstance(lm, HFEncoderAdapter)
    geo = states_geometry(lm, states, n_memory, eps, causal=not encoder,
                          n_cell_samples=n_cell_samples, random_state=random_state,
                          verbose=verbose)
    result = Bunch(
        kind="encoder" if encoder else "causal LM",
        causal=bool(lm.is_causal) if encoder else True,
        model=model if isinstance(model, str) else type(model).__name__,
        width=int(lm.width), vocab_size=int(lm.vocab_size), n_memory=int(n_memory),
        n_tokens=int(n_tokens), n_prompts=int(n_prompts),
        **{key: geo[key] for key in (
            "radius", "widths", "precision", "log_count_bound", "box_log_count_bound",
            "cone_log_count_bound", "slope_bound", "box_slope_bound", "cone_slope_bound",
            "cell_slope_bound", "min_cosine", "cone_half_angle", "cone_log_fraction")},
        cells=None, bounds=bound_rows(geo.table, measured_slope),
        measured_slope=measured_slope, cell_error=geo.cell_error,
    )
    if keep_cells:
        result.cell_counts = None if geo.cells is None else geo.cells.counts
    if geo.cells is not None:
        cells = geo.cells
        result.cells = cell_facts(geo.decay, cells.disagreement, "box", lm.vocab_size)
        result.cells.update(max_decay=cells.max_decay, matmul_dtype=cells.matmul_dtype,
                            seconds=cells.seconds)
    return result

