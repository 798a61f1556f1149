"""The reachability geometry of a real pretrained causal LM (command ``lm-geometry``).

"How many outputs can a Transformer generate?" bounds what ``m`` prompt vectors
can make a frozen model produce by the geometry of its final hidden states: their
radius, their per-coordinate box, the cone they fill and the decoder cells, the
share of the box the head ``argmax(W h + b)`` sends to each next token. The paper
argues that these cells are far from equal: a few frequent tokens own most of
the region. :func:`lm_reachability_geometry` measures all of it on one model
(SmolLM2-135M-Instruct by default) with :func:`~intrinsic_rank.inspection.reachability_geometry`,
cells on, and ranks the tokens by their share, decoded through the model's
tokenizer.
"""

import math
import time

import numpy as np
from sklearn.utils import Bunch

from ...inspection import reachability_geometry
from ...nn import ModelNotInstalledError, as_causal_lm, load_model
from ..runner import (
    GEOMETRY_BOUND_COLUMNS,
    Verdict,
    geometry_record,
    jsonable,
    number_text,
    one_plot,
    progress_steps,
    pyplot,
    refinement_rows,
    save_figure,
)

__all__ = ["LM_GEOMETRY_TOKEN_COLUMNS", "cell_share_facts", "equal_cell_null",
           "lm_reachability_geometry", "plot_cell_shares"]

LM_GEOMETRY_TOKEN_COLUMNS = ["rank", "token", "text", "share", "share_se", "cumulative"]
"""Columns of the table of the tokens with the largest cells."""

TOP_FRACTION = 0.01
"""The verdict's "few tokens": the top 1% of the vocabulary by cell share."""

NULL_DRAWS = 199
"""Monte Carlo draws of the equal-cell null (a p-value resolution of 1/200)."""

LEVEL = 0.05
"""The level of the test against equal cells."""


def _token_text(tokenizer, token):
    """A token's decoded text as ``repr`` (so ``' '`` and ``'\\n'`` show), or ``<id>``."""
    if tokenizer is None:
        return f"<{token}>"
    try:
        return repr(tokenizer.decode([int(token)]))
    except Exception:  # a tokenizer that cannot decode one id alone  # noqa: BLE001
        return f"<{token}>"


def cell_share_facts(counts, top_fraction=TOP_FRACTION):
    """How unequal the decoder cells are: sorted shares, half-box count, top-share.

    Parameters
    ----------
    counts : array-like of shape (vocab_size,), int
        Monte Carlo points per token (``cell_counts`` of
        :func:`~intrinsic_rank.inspection.reachability_geometry` with ``keep_cells``).
    top_fraction : float, default=0.01
        The share of the vocabulary counted as "the top tokens".

    Returns
    -------
    facts : dict
        ``order`` (token ids of the non-empty cells, largest first),
        ``sorted_counts`` (their counts), ``n_samples``, ``vocab_size``,
        ``n_nonempty``, ``n_empty``, ``n_half`` (fewest tokens whose cells
        hold at least half the points), ``n_top`` (``ceil(top_fraction |V|)``),
        ``top_share`` (their share of the box), ``equal_top_share``
        (``n_top / |V|``, their share under equal cells) and ``top_factor``
        (the ratio of the two).

    Examples
    --------
    >>> f = cell_share_facts([50, 30, 10, 10, 0, 0, 0, 0, 0, 0], top_fraction=0.1)
    >>> f["n_half"], f["n_top"], f["top_share"], f["top_factor"], f["n_empty"]
    (1, 1, 0.5, 5.0, 6)
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or counts.size == 0 or counts.sum() <= 0 or (counts < 0).any():
        raise ValueError("counts must be a non-empty 1-d array of non-negative counts "
                         "with at least one point")
    n, V = int(counts.sum()), int(counts.size)
    # largest first; ties by the lower token id (stable sort of the negated counts)
    order = np.argsort(-counts, kind="stable")
    order = order[counts[order] > 0]
    sorted_counts = counts[order]
    cumulative = np.cumsum(sorted_counts)
    n_top = max(1, math.ceil(top_fraction * V))
    top_share = float(sorted_counts[:n_top].sum() / n)
    equal = n_top / V
    return dict(order=order.tolist(), sorted_counts=sorted_counts.tolist(), n_samples=n,
                vocab_size=V, n_nonempty=int(order.size), n_empty=V - int(order.size),
                n_half=int(np.searchsorted(cumulative, n / 2) + 1), n_top=n_top,
                top_fraction=float(top_fraction), top_share=top_share,
                equal_top_share=float(equal), top_factor=float(top_share / equal))


def equal_cell_null(n_samples, vocab_size, top_fraction=TOP_FRACTION, n_draws=NULL_DRAWS,
                    random_state=0):
    """The top tokens' share under equal cells, at the same number of points.

    Under the null hypothesis every decoder cell holds the same share ``1/|V|``
    of the box, so ``n_samples`` Monte Carlo points fall multinomially with equal
    probabilities; the largest ``ceil(top_fraction |V|)`` counts still exceed
    their equal share by chance (with 2^17 points over 49,152 cells, by a few
    times). This draws that statistic ``n_draws`` times.

    Parameters
    ----------
    n_samples, vocab_size : int
    top_fraction : float, default=0.01
    n_draws : int, default=199
    random_state : int, default=0

    Returns
    -------
    factors : ndarray of shape (n_draws,)
        ``top_factor`` of :func:`cell_share_facts` of each draw.

    Examples
    --------
    >>> null = equal_cell_null(4096, 64, n_draws=20)
    >>> bool((null >= 1).all() and (null < 2).all())
    True
    """
    rng = np.random.default_rng(random_state)
    n_top = max(1, math.ceil(top_fraction * vocab_size))
    draws = rng.multinomial(int(n_samples), np.full(int(vocab_size), 1 / vocab_size),
                            size=int(n_draws))
    top = -np.sort(-draws, axis=1)[:, :n_top].sum(axis=1)
    return top / n_samples / (n_top / vocab_size)


def lm_reachability_geometry(model="smollm2-135m", n_memory=1, n_tokens=8, n_prompts=256,
                             n_cell_samples=2**17, top=15, random_state=0, progress=False,
                             device="cpu"):
    """A pretrained causal LM's reachability geometry, with its decoder cells ranked by share.

    Loads the model (with its tokenizer when it has one), runs
    :func:`~intrinsic_rank.inspection.reachability_geometry` with the decoder
    cells on (``n_cell_samples`` points uniform in the box of the final hidden
    states of ``n_prompts`` random prompts, each through the real head), and
    ranks the tokens by the share of the box their cell holds
    (:func:`cell_share_facts`).

    Parameters
    ----------
    model : str, path, model instance or adapter, default="smollm2-135m"
        See :func:`~intrinsic_rank.nn.load_model`; it must be a causal LM with
        a next-token head.
    n_memory : int, default=1
        Prompt vectors ``m`` of the random prompts (and of the bounds).
    n_tokens : int, default=8
        Random tokens after them.
    n_prompts : int, default=256
    n_cell_samples : int, default=131072
        Monte Carlo points of the cells, ``>= 1``.
    top : int, default=15
        Tokens listed in ``tokens`` (the largest cells).
    random_state : int, default=0
    progress : bool, default=False
        Steps on stderr (load, geometry and cells) and a line per block of points.
    device : str, default="cpu"
        Where the model runs; the cells run there too.

    Returns
    -------
    result : Bunch
        ``model`` (label), ``geometry`` (the geometry's numbers: radius, bounds
        table, cone, ``cells`` with ``n_empty`` and ``max_decay``; without the
        per-coordinate widths and counts), ``shares`` (:func:`cell_share_facts`),
        ``tokens`` (one row per listed token, :data:`LM_GEOMETRY_TOKEN_COLUMNS`;
        ``text`` is the ``repr`` of the decoded token, ``share_se`` its binomial
        standard error), ``config`` and ``seconds`` (``load``, ``geometry``
        (states, cone and bounds), ``cells``, ``total``).

    Raises
    ------
    ImportError
        When a packaged model (``smollm2-135m``) is not installed; the message
        says what to install.
    ValueError
        A model without a next-token head, or bad settings.

    Examples
    --------
    >>> r = lm_reachability_geometry("default", n_prompts=16, n_cell_samples=4096, top=3)
    >>> len(r.tokens), r.shares["vocab_size"], bool(r.shares["top_share"] > 0)
    (3, 64, True)
    """
    if isinstance(n_cell_samples, bool) or not isinstance(n_cell_samples, (int, np.integer)) \
            or n_cell_samples < 1:
        raise ValueError(f"n_cell_samples must be an integer >= 1 (the cells are what this "
                         f"experiment measures); got {n_cell_samples!r}")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ValueError(f"top must be an integer >= 1; got {top!r}")
    tic = time.perf_counter()
    seconds = {}
    with progress_steps(2, "lm-geometry", enabled=progress) as bar:
        loaded = load_model(model, progress=progress)
        lm = as_causal_lm(loaded.module, copy_model=False, progress=False).to(device)
        seconds["load"] = time.perf_counter() - tic
        bar.update(f"loaded {loaded.label} ({seconds['load']:.0f} s)")
        geometry = reachability_geometry(lm, n_memory=n_memory, n_tokens=n_tokens,
                                         n_prompts=n_prompts, n_cell_samples=int(n_cell_samples),
                                         random_state=random_state, keep_cells=True,
                                         verbose=progress)
        counts = geometry.pop("cell_counts")
        geometry = geometry_record(geometry)
        if counts is None:
            raise ValueError(f"the model ({loaded.label}) has no decoder cells: "
                             + "; ".join(geometry["not_applicable"]))
        seconds["cells"] = float(geometry["cells"]["seconds"])
        seconds["geometry"] = time.perf_counter() - tic - seconds["load"] - seconds["cells"]
        bar.update(f"geometry and {n_cell_samples} cell points ({seconds['cells']:.0f} s "
                   "for the cells)")
    shares = cell_share_facts(counts)
    n = shares["n_samples"]
    tokens = []
    cumulative = 0
    for rank, (token, count) in enumerate(zip(shares["order"][:top],
                                              shares["sorted_counts"][:top]), start=1):
        share = count / n
        cumulative += count
        tokens.append(dict(rank=rank, token=int(token),
                           text=_token_text(loaded.tokenizer, token), share=share,
                           share_se=math.sqrt(share * (1 - share) / n),
                           cumulative=cumulative / n))
    geometry.pop("widths")
    seconds["total"] = time.perf_counter() - tic
    config = dict(model=loaded.label, n_memory=int(n_memory), n_tokens=int(n_tokens),
                  n_prompts=int(n_prompts), n_cell_samples=int(n_cell_samples), top=int(top),
                  random_state=random_state, device=str(device),
                  tokenizer=loaded.tokenizer is not None)
    return Bunch(model=loaded.label, geometry=geometry, shares=shares, tokens=tokens,
                 config=config, seconds=seconds)


def plot_cell_shares(result, path=None):
    """The cumulative share of the box over tokens sorted by cell, and the top cells.

    Parameters
    ----------
    result : mapping
        Of :func:`lm_reachability_geometry` (or its JSON).
    path : str or None, default=None
        Where to save the PNG.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    plt = pyplot()
    shares, tokens = result["shares"], result["tokens"]
    n, V = shares["n_samples"], shares["vocab_size"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5),
                                      gridspec_kw=dict(width_ratios=[1, 1.3]))
    counts = np.asarray(shares["sorted_counts"], dtype=float)
    k = np.arange(1, counts.size + 1)
    left.plot(k, np.cumsum(counts) / n, lw=2, label=f"measured ({shares['n_nonempty']} "
              f"non-empty cells)")
    grid = np.unique(np.geomspace(1, V, 200).astype(int))
    left.plot(grid, grid / V, ls="--", color="grey", label=f"equal cells (k / {V})")
    half = shares["n_half"]
    left.axvline(half, color="C3", lw=1)
    left.axhline(0.5, color="C3", lw=0.8, ls=":")
    left.annotate(f"{half} tokens own half the box", (half, 0.5), xytext=(6, -18),
                  textcoords="offset points", color="C3")
    left.set_xscale("log")
    left.set_xlim(1, V)
    left.set_ylim(0, 1.02)
    left.set_xlabel("tokens, sorted by cell share (log)")
    left.set_ylabel("cumulative share of the box")
    left.legend(loc="upper left", fontsize=8, title=f"{n} Monte Carlo points, argmax(W h)",
                title_fontsize=8)
    shown = [row["share"] for row in tokens]
    errors = [row["share_se"] for row in tokens]
    x = np.arange(len(tokens))
    right.bar(x, shown, yerr=errors, color="C0", label="share of the box (± 1 s.e.)")
    right.axhline(1 / V, color="grey", ls="--", label=f"equal cells (1/{V})")
    right.set_xticks(x, [row["text"] for row in tokens], rotation=60, ha="right",
                     fontsize=8)
    right.set_ylabel("share of the box")
    right.set_title(f"the {len(tokens)} largest decoder cells", fontsize=10)
    right.legend(fontsize=8)
    fig.suptitle(f"{result['model']}: decoder cells in the box of the final hidden states "
                 f"of {result['config']['n_prompts']} random prompts", fontsize=11)
    return save_figure(fig, path)


# -- the experiment ----------------------------------------------------------------------

def _run(settings, *, random_state, progress, device):
    settings = dict(settings)
    missing_ok = settings.pop("missing_ok", False)
    try:
        result = lm_reachability_geometry(random_state=random_state, progress=progress,
                                          device=device, **settings)
    except ModelNotInstalledError as error:  # a packaged model that is not installed
        if not missing_ok:
            raise
        return {"missing": str(error), "config": dict(model=settings.get("model"))}
    return jsonable(dict(result))


def _plot(result, folder):
    """``lm_geometry.png``; none for a model that is not installed."""
    if _missing(result):
        return []
    return one_plot(plot_cell_shares, "lm_geometry.png")(result, folder)


def _missing(result):
    return "missing" in result


def _verdicts(result):
    """The few-tokens-own-the-box claim, tested against equal cells at the same size.

    The claim is the paper's ("How many different outputs can a Transformer
    generate?", Meyer, Michelessa, Chaux and Tan, ICML 2026, arXiv 2605.22223,
    the distribution of cell volumes: the decoder cells
    are highly asymmetric, a small set of frequent tokens -- whitespace,
    punctuation -- occupies a disproportionate share of the space). The rule,
    fixed before any run: the statistic is the share of the box held by the top
    1% of the vocabulary (``top_factor``: that share over their equal share);
    the null is equal cells at the same number of points and the same
    vocabulary (:func:`equal_cell_null`, 199 draws), whose top 1% also exceed
    their equal share by chance. Agrees when the Monte Carlo p-value
    ``(1 + #{null >= measured}) / 200`` is at most 0.05; does not agree
    otherwise. That the top tokens are the frequent ones is read from their
    decoded text, not tested.
    """
    if _missing(result):
        return []
    s = result["shares"]
    top = ", ".join(f"{row['text']} {100 * row['share']:.1f}%" for row in result["tokens"][:6])
    factor = s["top_factor"]
    null = equal_cell_null(s["n_samples"], s["vocab_size"], s["top_fraction"])
    p = (1 + int(np.sum(null >= factor))) / (1 + null.size)
    return [Verdict(
        "a few frequent tokens own a disproportionate share of the hidden-state region "
        "(the decoder cells are far from equal)",
        f"{result['model']}: the top {100 * s['top_fraction']:g}% of tokens ({s['n_top']} of "
        f"{s['vocab_size']}) own {100 * s['top_share']:.1f}% of the box, "
        f"{number_text(factor)}x their {100 * s['equal_top_share']:.2g}% under equal cells; "
        f"equal cells with the same {s['n_samples']} points give {number_text(null.min())}-"
        f"{number_text(null.max())}x (p = {number_text(p, '{:.2g}')}); {s['n_half']} tokens "
        f"own half the box; largest: {top}; {s['n_empty']} of {s['vocab_size']} cells empty",
        "agrees" if p <= LEVEL else "does not agree",
        f"the top {100 * TOP_FRACTION:g}% of the vocabulary's share against equal cells at "
        f"the same number of points ({NULL_DRAWS} multinomial draws): p <= {LEVEL:g} agrees, "
        "otherwise does not agree; that these tokens are the frequent ones is read from "
        "their decoded text, not measured",
    )]


def _tables(result):
    if _missing(result):
        return []
    g = result["geometry"]
    cone = {k: g[k] for k in ("min_cosine", "cone_half_angle", "cone_log_fraction")}
    return [
        (f"the {len(result['tokens'])} largest decoder cells of {result['model']} (share of "
         f"the box ± binomial s.e.; text is the decoded token's repr)", result["tokens"],
         LM_GEOMETRY_TOKEN_COLUMNS),
        (f"reachability bounds per precision convention (m = {g['n_memory']}): "
         "log_count_bound in nats, slope_bound in tokens per prompt vector; ratio: – (no "
         "measured slope; see 'intrinsic-rank reach')", g["bounds"], GEOMETRY_BOUND_COLUMNS,
         None),
        ("the cone and the decoder cells", refinement_rows(cone, g.get("cells")),
         ["quantity", "value"]),
    ]


def _summary(result):
    if _missing(result):
        return [f"lm-geometry: {result['config']['model']} is not installed: "
                f"{result['missing']}"]
    g, s, t = result["geometry"], result["shares"], result["seconds"]
    cells = g["cells"]
    return [
        f"Reachability geometry of {result['model']} (d = {g['width']}, |V| = "
        f"{g['vocab_size']}, {g['n_prompts']} random prompts of m = {g['n_memory']} vectors + "
        f"{g['n_tokens']} tokens): radius r = {g['radius']:.4g}, smallest pairwise cosine "
        f"{g['min_cosine']:.3f}",
        f"decoder cells: {s['n_half']} tokens own half the box; the top {s['n_top']} "
        f"({100 * s['top_fraction']:g}% of |V|) own {100 * s['top_share']:.1f}%; decay c = "
        f"{cells['closed_form']:.4g} nats per token (ln|V| = {cells['ln_vocab']:.4g})",
        f"sample-size limit: with n = {cells['n_samples']} points c <= ln n = "
        f"{cells['max_decay']:.4g}, and {cells['n_empty']} of {g['vocab_size']} cells were "
        "empty (unresolved); more points resolve more cells",
        f"times: load {t['load']:.1f} s, states and bounds {t['geometry']:.1f} s, cells "
        f"{t['cells']:.1f} s ({cells['matmul_dtype']} matmul), total {t['total']:.1f} s",
    ]


def _check(settings):
    for key, low in (("n_memory", 1), ("n_tokens", 0), ("n_prompts", 1),
                     ("n_cell_samples", 1), ("top", 1)):
        value = settings.get(key)
        if value is not None and value < low:
            option = {"n_memory": "--n-memory", "n_tokens": "--tokens", "n_prompts": "--prompts",
                      "n_cell_samples": "--cell-samples", "top": "--top"}[key]
            raise ValueError(f"{option} must be >= {low}; got {value}")
