"""The experiment ``head-ranks``: ``r*_attn`` of real heads, what it answers, its outputs.

The measurements (which heads, the planted-rank test, the sweeps) are in
:mod:`._real_heads`; here are the answers they give to two open questions (do head
types, do corpora separate ``r*_attn``?) by tests fixed before the run, the verdict
of the planted-rank test, the tables, the figure and the command line.

The work of the experiment ``head-ranks`` (piece and command), declared in
:mod:`intrinsic_rank.experiments.entropic`.
"""

import math

import numpy as np
from scipy import stats

from ...inspection import TOKEN_CORPORA, parse_head
from ..runner import (
    Verdict,
    jsonable,
    number_text,
    one_plot,
    pyplot,
    save_figure,
    write_csv,
)
from ._real_heads import (
    HEAD_TYPES,
    SHARPNESS,
    head_name,
    head_rank_profiles,
    relative_risk_at,
)

__all__ = ["ALPHA", "HEAD_RANK_COLUMNS", "SECONDARY_RANK", "head_rank_findings",
           "plot_head_ranks"]

HEAD_RANK_COLUMNS = ["layer", "head", "head_type", "corpus", "rank", "floor_reached",
                     "relative_risk_r1", "relative_risk_r4", "relative_risk_r16",
                     "relative_risk_full", "kernel_energy_rank", "attn_energy_rank",
                     "planted_rank", "plant_scale", "plant_sharpness"]
"""Columns of the table the command prints (the CSV has every relative risk)."""

# -- what the measurements answer ---------------------------------------------------

ALPHA = 0.05
"""The level of the two tests of :func:`head_rank_findings`."""

SECONDARY_RANK = 4
"""The rank whose relative risk is the findings' second, continuous statistic."""


def _log2_ranks(records):
    return {(r["layer"], r["head"], r["corpus"]): math.log2(r["rank"]) for r in records
            if r.get("rank") is not None}


def _statistics(records):
    """Per (head, corpus): log2 r*_attn, and log10 of the relative risk at rank 4."""
    values = {}
    for r in records:
        if r.get("rank") is None:
            continue
        at = relative_risk_at(r, SECONDARY_RANK)
        values[(r["layer"], r["head"], r["corpus"])] = (
            math.log2(r["rank"]), None if at is None else math.log10(max(at, 1e-12)))
    return values


def _types_test(records, which):
    """Kruskal-Wallis of a per-head statistic (its median over corpora) across head types."""
    values, by_type = _statistics(records), {}
    for (layer, head, _), pair in values.items():
        by_type.setdefault((layer, head), []).append(pair[which])
    types = {(r["layer"], r["head"]): r["head_type"] for r in records}
    groups = {}
    for key, vals in by_type.items():
        vals = [v for v in vals if v is not None]
        if vals:
            groups.setdefault(types[key], []).append(float(np.median(vals)))
    groups = {t: g for t, g in groups.items() if len(g) >= 2}
    if len(groups) < 2:
        return None, groups
    pooled = [v for g in groups.values() for v in g]
    if max(pooled) == min(pooled):
        return 1.0, groups
    return float(stats.kruskal(*groups.values()).pvalue), groups


def _corpora_test(records, which):
    """Friedman (three or more corpora) or Wilcoxon (two) with heads as blocks, and Kendall's W."""
    values = _statistics(records)
    corpora = list(dict.fromkeys(r["corpus"] for r in records))
    heads = list(dict.fromkeys((r["layer"], r["head"]) for r in records))
    table = [[values.get((*h, c), (None, None))[which] for c in corpora] for h in heads]
    table = np.array([row for row in table if all(v is not None for v in row)], dtype=float)
    if len(corpora) < 2 or len(table) < 2:
        return None, None
    if np.all(np.ptp(table, axis=1) == 0):  # no head changes across corpora
        return 1.0, 0.0
    ranks = np.apply_along_axis(stats.rankdata, 1, table)
    n, k = ranks.shape
    spread = ((ranks.sum(axis=0) - n * (k + 1) / 2) ** 2).sum()
    kendall_w = float(12 * spread / (n ** 2 * (k ** 3 - k)))
    if k == 2:
        differences = table[:, 1] - table[:, 0]
        if np.all(differences == 0):
            return 1.0, kendall_w
        return float(stats.wilcoxon(table[:, 0], table[:, 1]).pvalue), kendall_w
    return float(stats.friedmanchisquare(*table.T).pvalue), kendall_w


def head_rank_findings(records):
    """The answers the measurements give, each by a rule fixed before the run.

    * **Head types**: a Kruskal-Wallis test across head types (those with at least
      two heads) of each head's median over corpora of ``log2 r*_attn``; "yes" when
      ``p < ALPHA`` (0.05).
    * **Corpora**: a Friedman test (a Wilcoxon signed-rank test for two corpora)
      with heads as blocks and corpora as treatments, of ``log2 r*_attn``, with
      Kendall's ``W`` as the effect size; "yes" when ``p < ALPHA``.

    Each is also given for the log10 of the relative risk at rank
    ``SECONDARY_RANK`` (4), a continuous statistic that still separates heads
    whose ``r*_attn`` are all at the top of the grid. A question with too few heads
    or corpora for its test is "not testable". Planted runs are not asked these
    questions (the plant sets the rank).

    Parameters
    ----------
    records : list of dict
        The records of :func:`head_rank_profiles`.

    Returns
    -------
    findings : list of dict
        ``question``, ``statistic``, ``test``, ``p``, ``effect`` (Kendall's ``W``,
        corpora only) and ``answer`` ("yes", "no" or "not testable").

    Examples
    --------
    >>> recs = [dict(layer=0, head=h, head_type=t, corpus=c, rank=r, ranks=[4],
    ...              relative_risks=[0.1]) for h, t, r in [(0, "a", 2), (1, "a", 2),
    ...         (2, "b", 64), (3, "b", 64)] for c in ("random", "prose")]
    >>> [f["answer"] for f in head_rank_findings(recs)]
    ['no', 'no', 'no', 'no']
    """
    findings = []
    for which, statistic in ((0, "log2 r*_attn"),
                             (1, f"log10 relative risk at rank {SECONDARY_RANK}")):
        p, groups = _types_test(records, which)
        findings.append(dict(
            question="does r*_attn separate head types?", statistic=statistic,
            test="Kruskal-Wallis across head types with >= 2 heads (per head: median over "
                 "corpora)", p=p, effect=None,
            answer="not testable" if p is None else ("yes" if p < ALPHA else "no")))
        p, w = _corpora_test(records, which)
        n_corpora = len(set(r["corpus"] for r in records))
        findings.append(dict(
            question="does r*_attn separate corpora?", statistic=statistic,
            test=("Friedman" if n_corpora > 2 else "Wilcoxon signed-rank")
            + ", heads as blocks", p=p, effect=w,
            answer="not testable" if p is None else ("yes" if p < ALPHA else "no")))
    return findings


def _verdicts(result):
    """The planted-rank test, the one claim this experiment checks against the paper.

    Rule (fixed before the run): the Entropic Bound's deficiency and achievability
    inside the attention class say that a sweep over a head with a planted query rank
    ``k`` returns ``r*_attn = k``. Every plantable (head, corpus) counts; "agrees"
    when all return ``k``, "does not agree" when none does, "partly" otherwise. A
    head with no sharp plant is listed, not counted. Unplanted runs answer open
    questions (:func:`head_rank_findings`), not a claim of the paper: no verdict.
    """
    if "missing" in result or result["config"]["plant_rank"] is None:
        return []
    k = result["config"]["plant_rank"]
    counted = [r for r in result["records"] if r.get("plantable")]
    found = [r for r in counted if r["rank"] == k]
    blunt = [f"{head_name(r['layer'], r['head'])} ({r['corpus']})" for r in result["records"]
             if not r.get("plantable")]
    if not counted:
        verdict = "not comparable"
    elif len(found) == len(counted):
        verdict = "agrees"
    else:
        verdict = "does not agree" if not found else "partly"
    detail = ", ".join(f"{head_name(r['layer'], r['head'])} {r['corpus']} {r['rank']}"
                       for r in counted)
    return [Verdict(
        "deficiency and achievability inside the attention class: below the planted query "
        f"rank k = {k} a student keeps an excess risk, at k it reaches the floor",
        f"{result['config']['model']}: r*_attn of heads with a planted rank {k}: {detail or '-'}"
        + (f"; not plantable (no sharp plant): {', '.join(blunt)}" if blunt else ""),
        verdict,
        f"agrees when every plantable head returns r*_attn = {k} (tol = "
        f"{result['config']['tol']:g} of the held-out variance of Y, noise floor 0), does not "
        "agree when none does, partly otherwise; a plant is sharp when its own rank-k/2 "
        f"truncation is at least {SHARPNESS:g} x tol away from it",
    )]


# -- tables, figure, files ----------------------------------------------------------


def _table_rows(result):
    rows = []
    for r in result["records"]:
        ranks = r.get("ranks") or []
        rows.append(dict(
            layer=r["layer"], head=r["head"], head_type=r["head_type"], corpus=r["corpus"],
            rank=r.get("rank"), floor_reached=r.get("floor_reached"),
            relative_risk_r1=relative_risk_at(r, 1), relative_risk_r4=relative_risk_at(r, 4),
            relative_risk_r16=relative_risk_at(r, 16),
            relative_risk_full=relative_risk_at(r, max(ranks)) if ranks else None,
            kernel_energy_rank=r.get("kernel_energy_rank"),
            attn_energy_rank=r.get("attn_energy_rank"), planted_rank=r.get("planted_rank"),
            plant_scale=r.get("plant_scale"), plant_sharpness=r.get("plant_sharpness")))
    return rows


_FINDING_COLUMNS = ["question", "statistic", "test", "p", "effect", "answer"]


def _tables(result):
    if "missing" in result:
        return []
    cfg = result["config"]
    columns = [c for c in HEAD_RANK_COLUMNS
               if cfg["plant_rank"] is not None or not c.startswith("plant")]
    tables = [(f"{cfg['model']}: r*_attn per head and corpus ({cfg['n_inputs']} sequences of "
               f"{cfg['length']} tokens; relative risk = held-out MSE / held-out variance of "
               f"Y; tol {cfg['tol']:g})", _table_rows(result), columns)]
    if cfg["plant_rank"] is None:
        tables.append(("what the measurements answer (rules fixed before the run)",
                       result["findings"], _FINDING_COLUMNS))
    return tables


def _csv_rows(result):
    rows = []
    for r in result["records"]:
        row = {k: r.get(k) for k in ("layer", "head", "head_type", "corpus", "rank",
                                     "floor_reached", "estimate_supported", "planted_rank",
                                     "plant_scale", "plant_sharpness", "kernel_energy_rank",
                                     "attn_energy_rank", "sink_mass", "heldout_variance",
                                     "epochs", "fit_seconds")}
        for rank, risk in zip(r.get("ranks") or [], r.get("relative_risks") or []):
            row[f"relative_risk_r{rank}"] = risk
        rows.append(row)
    return rows


def _extra_files(result, folder):
    import os

    if "missing" in result:
        return []
    write_csv(os.path.join(folder, "head_ranks.csv"), _csv_rows(result))
    return ["head_ranks.csv"]


def plot_head_ranks(result, path=None):
    """Relative held-out risk against rank, one line per head, one panel per corpus.

    Parameters
    ----------
    result : Bunch or dict
        The output of :func:`head_rank_profiles`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = result["config"]
    corpora = cfg["corpora"]
    fig, axes = plt.subplots(1, len(corpora), figsize=(3.6 * len(corpora) + 1.2, 3.8),
                             sharey=True, squeeze=False)
    styles = {t: s for t, s in zip((*HEAD_TYPES, "given"), ("-", "--", ":", "-.", "-"))}
    for ax, corpus in zip(axes[0], corpora):
        for r in (r for r in result["records"] if r["corpus"] == corpus and r.get("ranks")):
            risks = np.maximum(r["relative_risks"], 1e-6)
            ax.plot(r["ranks"], risks, styles.get(r["head_type"], "-"), marker="o", ms=3,
                    label=f"{head_name(r['layer'], r['head'])} {r['head_type']}")
        ax.axhline(cfg["tol"], color="grey", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(r_ticks := sorted({r for rec in result["records"] for r in
                                         rec.get("ranks") or []}), [str(r) for r in r_ticks])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_title(corpus, fontsize=9)
        ax.set_xlabel("query rank r")
    axes[0][0].set_ylabel("held-out MSE / variance of Y")
    axes[0][-1].legend(fontsize=6, frameon=False, loc="upper right")
    planted = cfg["plant_rank"]
    fig.suptitle(f"{cfg['model']}: r*_attn of real heads" +
                 (f", planted query rank {planted}" if planted else "") +
                 f" (dashed: tol = {cfg['tol']:g})", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


# -- the experiment -----------------------------------------------------------------


def _run(settings, *, random_state, progress, device):
    try:
        result = head_rank_profiles(
            settings["model"], settings["heads"], settings["corpora"],
            plant_rank=settings["plant_rank"], n_inputs=settings["n_inputs"],
            length=settings["length"], rank_grid=settings["rank_grid"],
            max_epochs=settings["max_epochs"], lr=settings["lr"],
            random_state=random_state, progress=progress, device=device)
    except ImportError as error:  # a packaged model (or its reader) that is not installed
        return {"missing": str(error), "config": dict(settings)}
    result = dict(result)
    result["findings"] = head_rank_findings(result["records"])
    return jsonable(result)


def _summary(result):
    if "missing" in result:
        return [f"head ranks of {result['config']['model']}: missing ({result['missing']})"]
    cfg = result["config"]
    heads = ", ".join(f"{head_name(h['layer'], h['head'])} ({h['head_type']})"
                      for h in result["heads"])
    lines = [f"r*_attn of {len(result['heads'])} heads of {cfg['model']} on "
             f"{', '.join(cfg['corpora'])}: {heads}"]
    if cfg["plant_rank"] is None:
        for f in result["findings"]:
            lines.append(f"{f['question']} ({f['statistic']}): {f['answer']} "
                         f"({f['test']}: p = {number_text(f['p'], '{:.2g}')}"
                         + (f", Kendall's W = {number_text(f['effect'])}" if f["effect"]
                            is not None else "") + ")")
    lines.append(f"{result['seconds']:.1f} s")
    return lines


def _plot(result, folder):
    if "missing" in result:
        return []
    return one_plot(plot_head_ranks, "head_ranks.png")(result, folder)


def _head_list(text):
    import argparse

    try:
        return [head_name(*parse_head(item)) for item in text.split(",") if item.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _corpus_list(text):
    import argparse

    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in TOKEN_CORPORA]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"give one or more of {', '.join(TOKEN_CORPORA)}, comma-separated; got {text!r}")
    return names


def _settings(args):
    return dict(model=args.model, heads=args.heads, corpora=list(args.corpora),
                plant_rank=args.plant_rank, n_inputs=args.n_inputs, length=args.length,
                rank_grid=args.rank_grid, max_epochs=args.epochs, lr=args.lr)


def _check(settings):
    if settings["lr"] is not None and not (math.isfinite(settings["lr"]) and settings["lr"] > 0):
        raise ValueError(f"--lr must be a finite number > 0; got {settings['lr']}")
