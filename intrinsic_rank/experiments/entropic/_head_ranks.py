"""The experiment ``head-ranks``: the map of ``r*_attn`` over a causal LM's heads, what it answers.

The measurement is :func:`~intrinsic_rank.experiments.head_rank_map` (every head, the training-free
curve, distillation where it can change the answer, each head's precision floor);
imposing the measured ranks on the model is :func:`~._impose_ranks.impose_ranks`. Here
are the answers they give by rules fixed before the run (:func:`head_rank_findings`,
the planted-rank and impose verdicts), the tables, figures and command line.

The work of the experiment ``head-ranks`` (piece and command), declared in
:mod:`intrinsic_rank.experiments.entropic`.
"""

import math
import os

import numpy as np
from scipy import stats

from ..runner import (
    Verdict,
    jsonable,
    number_text,
    save_plot,
    write_csv,
)
from ._head_records import FINDINGS_TOL, answer_at, findings_tol, model_name, unplanted
from . import PLANT_SHARPNESS
from ._head_settings import check_tolerances, head_rank_settings
from ._real_heads import head_name

__all__ = ["ALPHA", "FINDINGS_TOL", "PLANT_RECOVERY", "SCORES", "findings_tol",
           "head_rank_findings", "planted_recovery", "spearman_interval"]

ALPHA = 0.05
"""The level of every test of :func:`head_rank_findings` (95 % intervals)."""

PLANT_RECOVERY = 0.9
"""The share of plantable heads whose planted rank must be found, at every planted rank."""

SCORES = ("induction_score", "previous_token_score", "sink_mass", "kernel_energy_rank",
          "attn_energy_rank")
"""What ``r*_attn`` is correlated with: the head's TransformerLens scores, its first-token
mass, its static kernel's and realised attention's energy ranks."""


# -- what the measurements answer ---------------------------------------------------


def _rank_at(record, tol):
    """``r*_attn(tol)``, a not-reached fit as its width (the rule of the findings)."""
    value = answer_at(record, tol)
    return record["width"] if value is None else value


def spearman_interval(x, y, alpha=ALPHA):
    """Spearman's rho with the Bonett-Wright interval (Fisher z, variance (1 + rho^2/2)/(n-3)).

    Parameters
    ----------
    x, y : sequence of float
    alpha : float, default=0.05

    Returns
    -------
    rho, low, high : float
        ``nan`` when fewer than 4 pairs or a constant variable.

    Examples
    --------
    >>> rho, low, high = spearman_interval([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    >>> round(rho, 3), low < rho < high
    (0.829, True)
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    if n < 4 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan"), float("nan")
    rho = float(stats.spearmanr(x, y).statistic)
    if abs(rho) >= 1:
        return rho, rho, rho
    half = stats.norm.ppf(1 - alpha / 2) * math.sqrt((1 + rho ** 2 / 2) / (n - 3))
    z = math.atanh(rho)
    return rho, math.tanh(z - half), math.tanh(z + half)


def _correlations(records, tol):
    rows = []
    for corpus in dict.fromkeys(r["corpus"] for r in records):
        here = [r for r in records if r["corpus"] == corpus]
        reached = [r for r in here if answer_at(r, tol) is not None]
        for score in SCORES:
            for label, subset in (("all heads, not reached as the width", here),
                                  ("reached fits only", reached)):
                pairs = [(_rank_at(r, tol), r[score]) for r in subset
                         if r.get(score) is not None and np.isfinite(r[score])]
                rho, low, high = spearman_interval(*zip(*pairs)) if len(pairs) >= 4 else (
                    float("nan"),) * 3
                answer = ("not testable" if not np.isfinite(rho) else
                          "yes" if low > 0 or high < 0 else "no")
                rows.append(dict(
                    question=f"does r*_attn({tol:g}) follow {score.replace('_', ' ')}?",
                    corpus=corpus, heads=label, n=len(pairs), rho=rho, low=low, high=high,
                    answer=answer))
    return rows


def _small_sample(records, tol):
    """Kruskal-Wallis across the typed heads, Friedman across corpora (the small-sample case)."""
    typed = [r for r in records if r["head_type"] != "other"]
    rows = []
    per_head = {}
    for r in typed:
        per_head.setdefault((r["layer"], r["head"], r["head_type"]), []).append(
            math.log2(_rank_at(r, tol)))
    groups = {}
    for (_, _, kind), values in per_head.items():
        groups.setdefault(kind, []).append(float(np.median(values)))
    groups = [g for g in groups.values() if len(g) >= 2]
    pooled = [v for g in groups for v in g]
    p = (None if len(groups) < 2 else 1.0 if max(pooled) == min(pooled)
         else float(stats.kruskal(*groups).pvalue))
    rows.append(dict(question=f"do the typed heads' types separate r*_attn({tol:g})?",
                     corpus="all", heads=f"{len(per_head)} typed heads (small sample)",
                     n=len(per_head), rho=None, low=None, high=p,
                     answer="not testable" if p is None else "yes" if p < ALPHA else "no"))
    corpora = list(dict.fromkeys(r["corpus"] for r in records))
    table = {}
    for r in records:
        table.setdefault((r["layer"], r["head"]), {})[r["corpus"]] = math.log2(_rank_at(r, tol))
    blocks = np.array([[row[c] for c in corpora] for row in table.values()
                       if len(row) == len(corpora)], dtype=float)
    p = None
    if len(corpora) >= 3 and len(blocks) >= 2:
        p = (1.0 if np.all(np.ptp(blocks, axis=1) == 0)
             else float(stats.friedmanchisquare(*blocks.T).pvalue))
    elif len(corpora) == 2 and len(blocks) >= 2:
        diff = blocks[:, 1] - blocks[:, 0]
        p = 1.0 if np.all(diff == 0) else float(stats.wilcoxon(blocks[:, 0],
                                                                blocks[:, 1]).pvalue)
    rows.append(dict(question=f"do corpora separate r*_attn({tol:g})?", corpus="all",
                     heads=f"{len(blocks)} heads as blocks", n=len(blocks), rho=None, low=None,
                     high=p, answer="not testable" if p is None else
                     "yes" if p < ALPHA else "no"))
    return rows


def head_rank_findings(records, tol=None):
    """What the map answers, each by a rule fixed before the run.

    * **Does r*_attn follow what a head does?** Per corpus, Spearman's rho of
      ``r*_attn(tol)`` against each of ``SCORES`` over all heads, with its
      95 % interval (``spearman_interval``); "yes" when the interval excludes
      0. The rule for fits that reached no rank below the head width: they enter
      as the width (they need more than any fit that reached, which is all a rank
      statistic uses), and the same test is also given over the reached fits only.
    * **The small-sample case:** a Kruskal-Wallis test of the typed heads (three
      induction, two previous-token, two sink heads, ``select_heads``) across
      types, and a Friedman (Wilcoxon for two corpora) test across corpora with
      heads as blocks, of ``log2 r*_attn``; "yes" when ``p < ALPHA``. Seven heads
      cannot give a small p: with groups of 3/2/2 no arrangement reaches 0.05 by
      much, so a "no" there says little.

    Planted heads are not asked these questions (the plant sets the rank).

    Parameters
    ----------
    records : list of dict
        The records of :func:`~intrinsic_rank.experiments.head_rank_map`.
    tol : float or None, default=None
        One of the records' tolerances; ``None``: ``findings_tol`` of them
        (``FINDINGS_TOL``, 0.05, when it was measured).

    Returns
    -------
    findings : list of dict
        ``question``, ``corpus``, ``heads``, ``n``, ``rho``, ``low``, ``high``
        (the interval; for the small-sample tests ``high`` holds the p-value) and
        ``answer`` ("yes", "no" or "not testable").

    Examples
    --------
    >>> recs = [dict(layer=0, head=h, corpus="code", head_type="other", width=8,
    ...              tolerances=[0.05], r_star=[r], planted_rank=None,
    ...              **{s: float(h) for s in SCORES}) for h, r in enumerate([1, 2, 3, 5, None, 6])]
    >>> [f["answer"] for f in head_rank_findings(recs)][:2]
    ['yes', 'yes']
    """
    records = unplanted(records)
    if not records:
        return []
    tol = findings_tol(records[0]["tolerances"]) if tol is None else tol
    if tol not in records[0]["tolerances"]:
        raise ValueError(f"tol={tol:g} is not one of the measured tolerances "
                         f"{records[0]['tolerances']}")
    return _correlations(records, tol) + _small_sample(records, tol)


def planted_recovery(records):
    """Per planted rank (and plant kind), how many plantable heads the sweep found it in.

    Parameters
    ----------
    records : list of dict

    Returns
    -------
    rows : list of dict
        ``planted_rank``, ``plant``, ``heads``, ``plantable``, ``found``, ``share``
        and ``found_ranks`` (what the others read).

    Examples
    --------
    >>> recs = [dict(layer=0, head=h, planted_rank=4, plant_noise=False, plantable=True,
    ...              plant_tol=0.02, tolerances=[0.02], width=16, r_star=[r],
    ...              r_star_text=[str(r)]) for h, r in enumerate([4, 4, 3])]
    >>> planted_recovery(recs)[0]["share"]
    0.6666666666666666
    """
    rows = []
    planted = [r for r in records if r.get("planted_rank") is not None]
    for k, noisy in dict.fromkeys((r["planted_rank"], r["plant_noise"]) for r in planted):
        here = [r for r in planted if (r["planted_rank"], r["plant_noise"]) == (k, noisy)]
        counted = [r for r in here if r.get("plantable")]
        found = [r for r in counted if answer_at(r, r["plant_tol"]) == k]
        rows.append(dict(
            planted_rank=k, plant="approximate" if noisy else "exact", heads=len(here),
            plantable=len(counted), found=len(found),
            share=len(found) / len(counted) if counted else None,
            found_ranks=", ".join(
                f"{head_name(r['layer'], r['head'])} "
                f"{r['r_star_text'][r['tolerances'].index(r['plant_tol'])]}"
                for r in counted if r not in found) if counted else ""))
    return rows


def _plant_verdict(result):
    """The planted-rank test, the Entropic Bound's deficiency and achievability on real heads.

    Rule (fixed before the run): for every planted rank ``k`` and plant kind, the
    share of plantable heads whose ``r*_attn(plant_tol)`` is ``k``; "agrees" when
    every share is at least ``PLANT_RECOVERY`` (0.9), "does not agree" when none
    is, "partly" otherwise; "not comparable" when no head was plantable. Heads
    without a sharp plant are listed, not counted.
    """
    rows = result["plant_recovery"]
    if not rows:
        return []
    shares = [r["share"] for r in rows if r["share"] is not None]
    if not shares:
        verdict = "not comparable"
    elif all(s >= PLANT_RECOVERY for s in shares):
        verdict = "agrees"
    else:
        verdict = "does not agree" if all(s < PLANT_RECOVERY for s in shares) else "partly"
    cfg = result["config"]
    measured = "; ".join(f"k = {r['planted_rank']} ({r['plant']}): {r['found']} of "
                         f"{r['plantable']} plantable heads (of {r['heads']})" for r in rows)
    return [Verdict(
        "deficiency and achievability inside the attention class: below a planted query "
        "rank k a student keeps an excess risk, at k it reaches the floor",
        f"{model_name(cfg)}: {measured}", verdict,
        f"agrees when at every planted rank at least {PLANT_RECOVERY:.0%} of the plantable "
        f"heads read r*_attn({cfg['plant_tol']:g}) = k, does not agree when no rank does, "
        "partly otherwise; a plant is sharp when its own best rank-(k-1) truncation leaves "
        f"at least {PLANT_SHARPNESS:g} x tol of its variance")]


def _verdicts(result):
    if "missing" in result:
        return []
    verdicts = _plant_verdict(result)
    if result.get("impose"):
        from ._impose_ranks import impose_verdicts

        verdicts += [Verdict(*v) for v in impose_verdicts(result["impose"])]
    return verdicts


# -- tables, figures, files ---------------------------------------------------------


def _summary_rows(result):
    """Per corpus and tolerance: the distribution of r*_attn over the heads."""
    rows = []
    records = unplanted(result["records"])
    for corpus in result["config"]["corpora"]:
        here = [r for r in records if r["corpus"] == corpus]
        if not here:
            continue
        for tol in result["config"]["tolerances"]:
            answers = [(answer_at(r, tol), answer_at(r, tol, "r_star_free")) for r in here]
            reached = [a for a, _ in answers if a is not None]
            free = [f for _, f in answers if f is not None]
            rows.append(dict(
                corpus=corpus, tol=tol, heads=len(here), reached=len(reached),
                median=float(np.median(reached)) if reached else None,
                q10=float(np.quantile(reached, 0.1)) if reached else None,
                q90=float(np.quantile(reached, 0.9)) if reached else None,
                median_free=float(np.median(free)) if free else None,
                lowered=sum(1 for a, f in answers if a is not None and (f is None or a < f)),
                below_precision=sum(1 for r in here if answer_at(r, tol, "below_precision")),
                total_rank_share=sum(a or r["width"] for r, (a, _) in zip(here, answers))
                / sum(r["width"] for r in here)))
    return rows


_SUMMARY_COLUMNS = ["corpus", "tol", "heads", "reached", "q10", "median", "q90", "median_free",
                    "lowered", "below_precision", "total_rank_share"]
_FINDING_COLUMNS = ["question", "corpus", "heads", "n", "rho", "low", "high", "answer"]
_PLANT_COLUMNS = ["planted_rank", "plant", "heads", "plantable", "found", "share",
                  "found_ranks"]
_IMPOSE_COLUMNS = ["tol", "allocation", "total_rank", "rank_share", "loss", "rise"]


def _tables(result):
    if "missing" in result:
        return []
    cfg = result["config"]
    tables = []
    summary = _summary_rows(result)
    if summary:
        heads = len({(r["layer"], r["head"]) for r in result["records"]})
        tables.append((f"{model_name(cfg)}: r*_attn over {heads} "
                       "heads (held-out MSE / pooled variance of Y <= tol; 'reached': below "
                       "the head width; 'lowered': heads where distillation beat the "
                       "training-free answer)", summary, _SUMMARY_COLUMNS))
    if result["findings"]:
        tables.append((f"what the map answers at tol {findings_tol(cfg['tolerances']):g} "
                       "(rules fixed before the run; small-sample rows: 'high' is the p-value)",
                       result["findings"], _FINDING_COLUMNS))
    if result["plant_recovery"]:
        tables.append(("planted ranks found (r*_attn at the plant's tolerance)",
                       result["plant_recovery"], _PLANT_COLUMNS))
    if result.get("impose"):
        tables.append((f"the LM's held-out loss with the ranks imposed (unedited "
                       f"{result['impose']['unedited']:.4f} nats per token)",
                       result["impose"]["rows"], _IMPOSE_COLUMNS))
    return tables


def _csv_rows(result):
    rows = []
    tolerances = result["config"]["tolerances"]
    for r in result["records"]:
        row = {k: r.get(k) for k in ("layer", "head", "head_type", "corpus", "planted_rank",
                                     "plant_noise", "plantable", "precision_floor",
                                     "induction_score", "previous_token_score", "sink_mass",
                                     "kernel_energy_rank", "attn_energy_rank", "fit_seconds")}
        row.update(constant_output=bool(r.get("constant_output")),
                   output_spread=r.get("output_spread"))
        if r.get("r_star"):
            for tol in tolerances:
                free = answer_at(r, tol, "r_star_free")
                row[f"r_attn@{tol:g}"] = answer_at(r, tol, "r_star_text")
                row[f"r_free@{tol:g}"] = free if free is not None else f"> {r['width'] - 1}"
                row[f"below_precision@{tol:g}"] = answer_at(r, tol, "below_precision")
            for rank, risk in enumerate(r["risks"], start=1):
                row[f"risk_r{rank}"] = risk
        rows.append(row)
    return rows


def _extra_files(result, folder):
    if "missing" in result:
        return []
    write_csv(os.path.join(folder, "head_ranks.csv"), _csv_rows(result))
    return ["head_ranks.csv"]


def _plot(result, folder):
    if "missing" in result or not unplanted(result["records"]):
        return []
    from sklearn.utils import Bunch

    from ._head_rank_plots import plot_head_rank_curves, plot_head_rank_map, plot_impose

    result = Bunch(**result)
    files = [save_plot(plot_head_rank_map(result), folder, "head_ranks.png"),
             save_plot(plot_head_rank_curves(result), folder, "head_ranks_curves.png")]
    if result.get("impose"):
        files.append(save_plot(plot_impose(result), folder, "head_ranks_impose.png"))
    return files


# -- the experiment -----------------------------------------------------------------


_NOISE = {"exact": False, "quantisation": True, "both": "both"}
"""``--plant-noise`` and the map's ``plant_noise``."""

_TRAINING_KEYS = ("lr", "batch_size", "max_epochs", "patience")


def _map_arguments(settings):
    """The arguments of :func:`head_rank_map` (less the model) that the settings give."""
    if settings["plant_noise"] not in _NOISE:
        raise ValueError(f"--plant-noise must be one of {', '.join(_NOISE)}; got "
                         f"{settings['plant_noise']!r}")
    keys = ("corpora", "heads", "tolerances", "n_fit", "n_heldout", "length", "distill",
            "restarts", "plant_ranks", "plant_tol", "n_jobs")
    return dict({key: settings[key] for key in keys},
                training={key: settings[key] for key in _TRAINING_KEYS},
                plant_noise=_NOISE[settings["plant_noise"]],
                checkpoint=settings.get("checkpoint"))


def _run(settings, *, random_state, progress, device):
    from ...nn import ModelNotInstalledError, load_model
    from ._impose_ranks import impose_ranks
    from ._real_heads import head_rank_map

    try:
        loaded = load_model(settings["model"], progress=progress)
    except ModelNotInstalledError as error:  # a packaged model (or its reader) not installed
        return {"missing": str(error), "config": dict(settings)}
    result = head_rank_map(loaded, random_state=random_state, progress=progress,
                           device=device, **_map_arguments(settings))
    out = dict(records=result.records, config=result.config, corpora=result.corpora,
               seconds=result.seconds)
    out["findings"] = head_rank_findings(result.records)
    out["plant_recovery"] = planted_recovery(
        [dict(r, plant_tol=settings["plant_tol"]) for r in result.records])
    if settings["impose"] and settings["heads"] == "all" and not settings["plant_ranks"]:
        first = settings["corpora"][0]
        chosen = [i for i, r in enumerate(result.records) if r["corpus"] == first]
        out["impose"] = impose_ranks(
            loaded, [result.records[i] for i in chosen],
            [result.projections[i] for i in chosen], n_test=settings["n_test"],
            length=settings["length"], random_state=random_state, device=device,
            progress=progress)
    return jsonable(out)


def _summary(result):
    if "missing" in result:
        return [f"head ranks of {model_name(result['config'])}: missing ({result['missing']})"]
    cfg = result["config"]
    heads = len({(r["layer"], r["head"]) for r in result["records"]})
    lines = [f"r*_attn of {heads} heads of {model_name(cfg)} on {', '.join(cfg['corpora'])} "
             f"({cfg['n_fit']} training and {cfg['n_heldout']} held-out windows of "
             f"{cfg['length']} tokens, split by document)"]
    for f in result["findings"]:
        if f["rho"] is not None and f["heads"].startswith("all"):
            lines.append(f"{f['question']} ({f['corpus']}): {f['answer']} (rho = "
                         f"{number_text(f['rho'], '{:.2f}')}, 95 % interval "
                         f"{number_text(f['low'], '{:.2f}')} .. "
                         f"{number_text(f['high'], '{:.2f}')}, n = {f['n']})")
    unplantable = [f"{head_name(r['layer'], r['head'])} (k = {r['planted_rank']})"
                   for r in result["records"] if r.get("plantable") is False]
    if unplantable:
        lines.append(f"not plantable (no sharp plant): {', '.join(unplantable)}")
    for v in _verdicts(result):
        lines.append(f"{v.verdict}: {v.claim} -- {v.measured}")
    lines.append(f"{result['seconds']:.1f} s")
    return lines


def _parsed(kind, text):
    """A comma-separated list of ``kind`` (``int`` or ``float``), or argparse's one-line error."""
    import argparse

    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"give comma-separated {'integers' if kind is int else 'numbers'}; got "
            f"{text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"give at least one value; got {text!r}")
    return values


def _rank_list(text):
    """``--plant-rank``: comma-separated integers of at least 2 (the width is checked later)."""
    import argparse

    ranks = _parsed(int, text)
    if min(ranks) < 2 or max(ranks) > 4096 or len(set(ranks)) != len(ranks):
        raise argparse.ArgumentTypeError(
            f"give distinct ranks of at least 2 and below the head width; got {text!r}")
    return ranks


def _tolerance_list(text):
    import argparse

    try:
        return check_tolerances(_parsed(float, text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _head_list(text):
    import argparse

    from ...inspection import parse_head

    if text.strip() == "all":
        return "all"
    try:
        return [head_name(*parse_head(item)) for item in text.split(",") if item.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _corpus_list(text):
    import argparse

    from . import CORPORA

    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in CORPORA]
    if bad or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"give one or more distinct of {', '.join(CORPORA)}, comma-separated; got "
            f"{text!r}")
    return names


def _prepare(settings, folder):
    """The command's settings, with the folder of the finished heads beside ``--out``."""
    settings["checkpoint"] = None if folder is None else os.path.join(folder,
                                                                      "head_ranks.parts")
    return settings


def _check(settings):
    checkpoint = settings.get("checkpoint")
    if checkpoint is not None and os.path.exists(checkpoint) and not os.path.isdir(checkpoint):
        raise ValueError(f"{checkpoint} is a file where the folder of the finished heads goes: "
                         "move it, or give another --out")
    checked = head_rank_settings(**_map_arguments(settings))  # the map's own checks, once
    from ..._packaged_models import model_heads

    shape = model_heads(settings["model"])
    if shape is not None:  # a packaged model: its size is known before it loads
        checked.for_model(shape)
