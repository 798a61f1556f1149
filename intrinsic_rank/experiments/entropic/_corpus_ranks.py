"""Per-head ranks of one causal LM on corpora of different complexity (Entropic Bound, appendix B).

The appendix's claim on real language models: the ranks measured in a trained
model track its optimisation, not the complexity of the task in front of it.
Here one model is held fixed and the task changes: uniform random tokens, a
short passage repeated, English prose and Python source, all shipped offline
(:func:`~intrinsic_rank.datasets.load_text_corpus`). Per head the static
query-key kernel rank is the same on every corpus by construction; the
realised attention rank is measured on each, and a rule decides whether the
corpora separate it.

The work of the experiment ``corpus-ranks`` (piece and command), declared in
:mod:`intrinsic_rank.experiments.entropic` with :data:`CORPORA`.
"""

import time

import numpy as np
import torch
from scipy import stats
from sklearn.utils import Bunch

from ..._validation import check_device, check_int
from ...datasets import load_text_corpus
from ...inspection import ordinary_token_ids, profile_heads
from ...nn import (
    ModelNotInstalledError,
    as_causal_lm,
    load_model,
    model_vocab_size,
    unwrap_model,
)
from ..runner import (
    Verdict,
    is_finite,
    jsonable,
    number_text,
    one_plot,
    progress_steps,
    pyplot,
    save_figure,
)
from . import CORPORA

__all__ = ["CORPORA", "CORPUS_RANK_COLUMNS", "corpus_inputs", "corpus_rank_profiles",
           "plot_corpus_ranks"]


CORPUS_RANK_COLUMNS = ["corpus", "length", "next_token_loss", "attn_energy_rank_median",
                       "attn_energy_rank_q25", "attn_energy_rank_q75", "sink_mass_mean",
                       "band_mass_mean", "spearman_kernel_vs_attn"]
"""Columns of the per-corpus table (``summary`` of :func:`corpus_rank_profiles`)."""

_SEPARATION_COLUMNS = ["kernel_energy_rank_median", "n_heads", "friedman_statistic",
                       "friedman_p", "kendall_w", "medians_range", "within_spread"]

LEVEL = 0.05
"""The level of Friedman's test."""

SMALL_W = 0.1
"""Kendall's W below this is a negligible effect (Cohen's guidelines as used for W: 0.1
small, 0.3 moderate, 0.5 large; for instance R's ``rstatix::friedman_effsize``)."""

MODERATE_W = 0.3
"""Kendall's W from this on is at least a moderate effect."""


def _text_ids(text, tokenizer, vocab):
    """Token ids of a text: the tokenizer's, or UTF-8 bytes modulo ``vocab`` without one."""
    if tokenizer is None:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) % vocab
    return np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


def corpus_inputs(corpus, tokenizer, vocab, *, n_inputs=8, length=64, period=16,
                  random_state=0):
    """Token ids ``(n_inputs, length)`` of one corpus, the tokenizer's BOS token first.

    Parameters
    ----------
    corpus : {"random", "repeated", "prose", "code"}
        ``"random"``: uniform random tokens of the ordinary vocabulary
        (:func:`~intrinsic_rank.inspection.ordinary_token_ids`); ``"prose"``
        and ``"code"``: consecutive windows of the tokenized
        :func:`~intrinsic_rank.datasets.load_text_corpus`; ``"repeated"``: the
        first ``period`` tokens of each prose window, repeated to the length.
    tokenizer : transformers tokenizer or None
        ``None`` (a model without one, such as the embedded one): texts become
        their UTF-8 bytes modulo ``vocab``, and there is no BOS token.
    vocab : int
        The model's vocabulary size.
    n_inputs, length, period : int, default=8, 64, 16
        Inputs, tokens per input (BOS included) and the repeated passage's length.
    random_state : int, default=0
        Seed of the random corpus.

    Returns
    -------
    ids : ndarray of shape (n_inputs, length)

    Raises
    ------
    ValueError
        For an unknown corpus, or a text too short for ``n_inputs`` windows.

    Examples
    --------
    >>> ids = corpus_inputs("repeated", None, 64, n_inputs=2, length=12, period=4)
    >>> ids.shape, bool((ids[:, :4] == ids[:, 4:8]).all())
    ((2, 12), True)
    """
    if corpus not in CORPORA:
        raise ValueError(f"corpus must be one of {', '.join(map(repr, CORPORA))}; got "
                         f"{corpus!r}")
    bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
    body = length - int(bos is not None)
    if corpus == "random":
        pool = ordinary_token_ids(tokenizer, vocab)
        ids = np.random.default_rng(random_state).choice(pool, size=(n_inputs, body))
    else:
        text = _text_ids(load_text_corpus("code" if corpus == "code" else "prose"),
                         tokenizer, vocab)
        window = period if corpus == "repeated" else body
        if len(text) < n_inputs * body:
            raise ValueError(f"the {corpus} corpus has {len(text)} tokens, fewer than "
                             f"n_inputs x length = {n_inputs} x {body}: ask for fewer or "
                             "shorter inputs")
        windows = text[:n_inputs * body].reshape(n_inputs, body)
        if corpus == "repeated":
            ids = np.tile(windows[:, :window], -(-body // window))[:, :body]
        else:
            ids = windows
    if bos is not None:
        ids = np.concatenate([np.full((n_inputs, 1), bos), ids], axis=1)
    return ids.astype(np.int64)


def _next_token_loss(lm, ids, device):
    """Mean next-token cross-entropy (nats) of a causal LM adapter on ids, BOS not predicted."""
    with torch.no_grad():
        batch = torch.as_tensor(ids, device=device)
        logits = lm.logits(lm.embed(batch))[:, :-1]
        return float(torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1)))


def _separation(realised, kernel):
    """Friedman's test over heads (blocks) and corpora (treatments), with Kendall's W.

    ``kendall_w = friedman_statistic / (n_heads (n_corpora - 1))``, the
    concordance of the heads' orderings of the corpora (0: none, 1: every
    head orders them alike); ``mean_ranks`` is each corpus's mean rank within
    a head (1 = the lowest realised rank). The range of the per-corpus medians
    and the median interquartile range across heads are descriptive only.
    """
    medians = {c: float(np.median(r)) for c, r in realised.items()}
    iqrs = [float(np.subtract(*np.percentile(r, [75, 25]))) for r in realised.values()]
    table = np.column_stack(list(realised.values()))  # heads x corpora
    n, k = table.shape
    if k >= 3 and n >= 2 and np.ptp(table) > 0:
        friedman = stats.friedmanchisquare(*table.T)
        statistic, p = float(friedman.statistic), float(friedman.pvalue)
    else:
        statistic = p = float("nan")
    mean_ranks = stats.rankdata(table, axis=1).mean(axis=0)
    return dict(kernel_energy_rank_median=float(np.median(kernel)), n_heads=int(n),
                medians_range=max(medians.values()) - min(medians.values()),
                within_spread=float(np.median(iqrs)), friedman_statistic=statistic,
                friedman_p=p, kendall_w=statistic / (n * (k - 1)) if k > 1 else float("nan"),
                mean_ranks=dict(zip(realised, (float(r) for r in mean_ranks))))


def corpus_rank_profiles(model="smollm2-135m", corpora=CORPORA, *, n_inputs=8, length=64,
                         period=16, random_state=0, progress=False, device="cpu"):
    """Per-head static and realised ranks of one causal LM on corpora of different complexity.

    For each corpus (:func:`corpus_inputs`: random tokens, a repeated passage,
    prose, code; all inputs of the same length, so ranks compare) every head is
    profiled with :func:`~intrinsic_rank.inspection.profile_heads`: the static
    kernel's energy rank (a property of the weights, equal on every corpus)
    and the realised attention's energy rank, averaged over the inputs. The
    model's next-token loss on each corpus shows how different the corpora are
    for it. Friedman's test (heads as blocks, corpora as treatments) says
    whether the heads' realised ranks shift consistently with the corpus, and
    Kendall's W how strongly.

    Parameters
    ----------
    model : str, path or model, default="smollm2-135m"
        A causal LM, as for :func:`~intrinsic_rank.nn.load_model`.
    corpora : sequence of str, default=CORPORA
        Two or more of :data:`CORPORA`.
    n_inputs, length, period : int, default=8, 64, 16
        As for :func:`corpus_inputs`.
    random_state : int, default=0
    progress : bool, default=False
        Report each corpus through the commands' progress convention.
    device : str or torch.device, default="cpu"

    Returns
    -------
    result : Bunch
        ``records`` (one per corpus and head: ``corpus``, ``layer``, ``head``,
        ``kernel_energy_rank``, ``attn_energy_rank``, ``attn_energy_rank_std``,
        ``sink_mass``, ``band_mass``), ``summary`` (one row per corpus, the
        columns of :data:`CORPUS_RANK_COLUMNS`), ``separation`` (Friedman's
        ``friedman_statistic`` and ``friedman_p``, ``kendall_w``,
        ``mean_ranks`` per corpus, ``n_heads``, the static kernel's median and,
        descriptive, the range of the per-corpus medians and the median head
        IQR), ``config`` and ``seconds``.

    Examples
    --------
    >>> r = corpus_rank_profiles("default", n_inputs=2, length=16, period=4)
    >>> [row["corpus"] for row in r.summary], len(r.records)
    (['random', 'repeated', 'prose', 'code'], 32)
    """
    start = time.perf_counter()
    corpora = list(corpora)
    if len(corpora) < 2 or len(set(corpora)) != len(corpora):
        raise ValueError(f"corpora must name two or more distinct corpora of "
                         f"{', '.join(CORPORA)}; got {corpora}")
    for corpus in corpora:
        if corpus not in CORPORA:
            raise ValueError(f"corpora: {corpus!r} is not one of {', '.join(CORPORA)}")
    n_inputs = check_int(n_inputs, "n_inputs")
    length = check_int(length, "length", 4)
    period = check_int(period, "period")
    if period >= length - 1:
        raise ValueError(f"period must be shorter than length - 1 = {length - 1} so the "
                         f"passage repeats; got {period}")
    device = check_device(device)
    loaded = load_model(model, progress=progress)
    module, tokenizer = loaded.module, loaded.tokenizer
    lm = as_causal_lm(module, copy_model=False, progress=False)
    unwrap_model(module)[0].to(device)
    vocab = model_vocab_size(*unwrap_model(module))
    records, summary, realised, kernel = [], [], {}, None
    with progress_steps(len(corpora), "corpus ranks", enabled=progress) as bar:
        for corpus in corpora:
            ids = corpus_inputs(corpus, tokenizer, vocab, n_inputs=n_inputs, length=length,
                                period=period, random_state=random_state)
            profile = profile_heads(module, ids, tokenizer=tokenizer, max_length=length,
                                    random_state=random_state, device=device)
            for rec in profile.records:
                records.append(dict(corpus=corpus, **{k: rec[k] for k in (
                    "layer", "head", "kernel_energy_rank", "attn_energy_rank",
                    "attn_energy_rank_std", "sink_mass", "band_mass")}))
            ranks = np.array([rec["attn_energy_rank"] for rec in profile.records])
            kernel = np.array([rec["kernel_energy_rank"] for rec in profile.records])
            realised[corpus] = ranks
            q25, q75 = np.percentile(ranks, [25, 75])
            summary.append(dict(
                corpus=corpus, length=int(ids.shape[1]),
                next_token_loss=_next_token_loss(lm, ids, device),
                attn_energy_rank_median=float(np.median(ranks)),
                attn_energy_rank_q25=float(q25), attn_energy_rank_q75=float(q75),
                sink_mass_mean=float(np.mean([r["sink_mass"] for r in profile.records])),
                band_mass_mean=float(np.mean([r["band_mass"] for r in profile.records])),
                spearman_kernel_vs_attn=profile.summary["spearman_kernel_vs_attn"],
                uniform_attn_energy_rank=profile.baselines["attn_energy_rank"]))
            bar.update(f"{corpus}: median realised rank {np.median(ranks):.2f}")
    config = dict(model=loaded.label, corpora=corpora, n_inputs=n_inputs, length=length,
                  period=period, bos=getattr(tokenizer, "bos_token_id", None)
                  if tokenizer is not None else None, tokenized=tokenizer is not None,
                  n_layers=profile.config["n_layers"], n_heads=profile.config["n_heads"],
                  d_head=profile.config["d_head"], random_state=random_state)
    return Bunch(records=records, summary=summary, separation=_separation(realised, kernel),
                 config=config, seconds=time.perf_counter() - start)


def plot_corpus_ranks(result, path=None):
    """Per-head realised energy ranks by corpus (box plots) and their medians by layer.

    Parameters
    ----------
    result : Bunch or dict
        The output of :func:`corpus_rank_profiles`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = result["config"]
    fig, (ax_box, ax_layer) = plt.subplots(1, 2, figsize=(11, 4.2))
    ranks = {c: [r["attn_energy_rank"] for r in result["records"] if r["corpus"] == c]
             for c in cfg["corpora"]}
    losses = {row["corpus"]: row["next_token_loss"] for row in result["summary"]}
    ax_box.boxplot(list(ranks.values()), showfliers=True)
    ax_box.set_xticks(range(1, len(ranks) + 1),
                      [f"{c}\nloss {losses[c]:.2f}" for c in ranks], fontsize=8)
    uniform = result["summary"][0]["uniform_attn_energy_rank"]
    ax_box.axhline(uniform, color="grey", ls="--", lw=1, label=f"uniform attention {uniform:.2f}")
    ax_box.set_ylabel("realised attention energy rank (per head)")
    sep = result["separation"]
    ax_box.set_title(f"per head, {cfg['n_inputs']} inputs of {cfg['length']} tokens\n"
                     f"Friedman p = {number_text(sep['friedman_p'], '{:.2g}')}, Kendall's W = "
                     f"{number_text(sep.get('kendall_w'))}", fontsize=9)
    ax_box.legend(frameon=False, fontsize=8)
    for corpus in cfg["corpora"]:
        per_layer = [np.median([r["attn_energy_rank"] for r in result["records"]
                                if r["corpus"] == corpus and r["layer"] == layer])
                     for layer in range(cfg["n_layers"])]
        ax_layer.plot(range(cfg["n_layers"]), per_layer, "o-", ms=3, label=corpus)
    ax_layer.set_xlabel("layer")
    ax_layer.set_ylabel("median realised energy rank over the layer's heads")
    ax_layer.legend(frameon=False, fontsize=8)
    ax_layer.set_title("by layer", fontsize=9)
    fig.suptitle(f"{cfg['model']}: realised attention ranks on corpora of different "
                 f"complexity (static kernel median "
                 f"{result['separation']['kernel_energy_rank_median']:.1f} of "
                 f"{cfg['d_head']} on all)", fontsize=10)
    return save_figure(fig, path)


# -- the experiment ------------------------------------------------------------------


def _run(settings, *, random_state, progress, device):
    try:
        result = corpus_rank_profiles(settings["model"], settings["corpora"],
                                      n_inputs=settings["n_inputs"], length=settings["length"],
                                      period=settings["period"], random_state=random_state,
                                      progress=progress, device=device)
    except ModelNotInstalledError as error:  # a packaged model (or its reader) not installed
        return {"missing": str(error), "config": dict(settings)}
    return jsonable(dict(result))


def _separation_outcome(sep):
    """Friedman's p and Kendall's W -> the verdict and why."""
    w, p = sep.get("kendall_w"), sep.get("friedman_p")
    if not (is_finite(w) and is_finite(p)):
        return "does not agree", "no Friedman test (fewer than 3 corpora or no variation)"
    if w < SMALL_W:
        return "agrees", f"W < {SMALL_W:g}: a negligible effect, whatever p"
    if p < LEVEL and w >= MODERATE_W:
        return "does not agree", (f"p < {LEVEL:g} and W >= {MODERATE_W:g}: the corpora shift "
                                  "the heads' ranks consistently and at least moderately")
    if p < LEVEL:
        return "partly", (f"p < {LEVEL:g} with {SMALL_W:g} <= W < {MODERATE_W:g}: a "
                          "consistent but small shift")
    return "partly", (f"W >= {SMALL_W:g} but p >= {LEVEL:g}: too few heads to tell a "
                      "shift from chance")


def _verdicts(result):
    """Do inputs of different complexity, through one frozen model, separate its ranks?

    The claim tested is the one one frozen model can test: the paper says that
    on real language models the measured effective rank does not separate
    corpora of different complexity, because the realised mixer is dominated
    by structural priors ("The Entropic Bound", Byeong Hoon Yoon, 2026, section 5,
    the practical frontier; appendix B in section 3). Here the inputs
    change and the model does not, so the static kernel cannot change; what is
    judged is the realised attention rank. The paper's other appendix claim --
    the static rank of models *trained* on corpora of different complexity is
    anti-correlated with that complexity -- needs several trained models and
    is not tested.

    The rule, fixed before any run: Friedman's test with the heads as blocks
    and the corpora as treatments, at level 0.05, together with its effect
    size Kendall's W (Cohen's guidelines: 0.1 small, 0.3 moderate). Agrees
    (no separation) when W < 0.1, a negligible effect whatever p; does not
    agree when p < 0.05 and W >= 0.3, a consistent shift of at least moderate
    size; partly otherwise (a consistent but small shift, or too few heads to
    tell).
    """
    if "missing" in result:
        return []
    sep, rows = result["separation"], result["summary"]
    medians = ", ".join(f"{row['corpus']} {number_text(row['attn_energy_rank_median'])} "
                        f"[{number_text(row['attn_energy_rank_q25'])}-"
                        f"{number_text(row['attn_energy_rank_q75'])}]" for row in rows)
    losses = ", ".join(f"{row['corpus']} {row['next_token_loss']:.2f}" for row in rows)
    ranks = ", ".join(f"{c} {number_text(r)}" for c, r in (sep.get("mean_ranks") or {}).items())
    verdict, why = _separation_outcome(sep)
    return [Verdict(
        "inputs of different complexity through one frozen model: the realised attention "
        "ranks do not separate the corpora (the paper: the measured rank does not separate "
        "corpora of different complexity)",
        f"{result['config']['model']} ({number_text(sep.get('n_heads'))} heads): realised "
        f"attention energy rank, median over heads [interquartile range]: {medians}; Friedman "
        f"chi2 = {number_text(sep['friedman_statistic'])}, p = "
        f"{number_text(sep['friedman_p'], '{:.2g}')}, Kendall's W = "
        f"{number_text(sep.get('kendall_w'))}; mean rank within a head (1 = lowest): {ranks}; "
        f"static kernel median {number_text(sep['kernel_energy_rank_median'])} on every "
        f"corpus; next-token loss (nats) {losses}",
        verdict,
        f"{why}. Rule: Friedman's test (heads as blocks) at {LEVEL:g} with Kendall's W; W < "
        f"{SMALL_W:g} agrees, p < {LEVEL:g} with W >= {MODERATE_W:g} does not agree, "
        "otherwise partly",
    )]


def _tables(result):
    if "missing" in result:
        return []
    cfg = result["config"]
    return [
        (f"{cfg['model']}: per corpus, over its {cfg['n_layers'] * cfg['n_heads']} heads "
         f"({cfg['n_inputs']} inputs of {cfg['length']} tokens; next-token loss in nats)",
         result["summary"], CORPUS_RANK_COLUMNS),
        ("do the corpora separate the heads' realised ranks? Friedman's test with heads as "
         "blocks, Kendall's W = chi2 / (heads (corpora - 1)); the range of the per-corpus "
         "medians and the median head IQR for scale", [result["separation"]],
         _SEPARATION_COLUMNS),
    ]


def _summary(result):
    if "missing" in result:
        return [f"corpus ranks of {result['config']['model']}: missing ({result['missing']})"]
    cfg = result["config"]
    return [f"Per-head ranks of {cfg['model']} ({cfg['n_layers']} layers x {cfg['n_heads']} "
            f"heads) on {', '.join(cfg['corpora'])}",
            f"{result['seconds']:.1f} s"]


def _plot(result, folder):
    if "missing" in result:
        return []
    return one_plot(plot_corpus_ranks, "corpus_ranks.png")(result, folder)


def _corpus_list(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in CORPORA]
    if bad or len(names) < 2:
        import argparse

        raise argparse.ArgumentTypeError(
            f"give two or more of {', '.join(CORPORA)}, comma-separated; got {text!r}")
    return names
