"""Per-head rank profiles of real models (Entropic Bound, appendix B).

For every layer and head of a pretrained model this measures the static
query-key kernel ``W_Q W_K^T`` (its spectrum and rank measures), the realised
attention matrices on a batch of inputs (their energy rank, averaged over
inputs), two diagnostics of the task-independent structure that the paper
says dominates real mixers: attention sinks (mass on the first token, or on
any single key) and locality (mass on a band around the diagonal), and the
head scores of the interpretability literature: previous-token,
duplicate-token and induction scores (the share of a head's attention on the
positions a pattern names) and the sink rate. A uniform attention baseline on
the same inputs says what "a lot" means.

The work of the experiment ``profile`` (the same name as piece and command), declared in
:mod:`intrinsic_rank.experiments.entropic`: the command profiles one model and its
reachability geometry, the reproduce piece several models and
:func:`kernel_rank_trajectory`.
"""

import math
import os
from typing import Callable, NamedTuple

import numpy as np
from scipy import stats
from sklearn.utils import Bunch

from ..._validation import read_text_lines
from ...inspection import (
    check_precision,
    HEAD_PATTERNS,
    PROFILE_COLUMNS,
    profile_heads,
    reachability_geometry,
    save_profile_csv,
)
from ...nn import ModelNotInstalledError, as_model_adapter, load_model
from ..runner import (
    GEOMETRY_BOUND_COLUMNS,
    Verdict,
    geometry_record,
    jsonable,
    number_text,
    save_plot,
    progress_steps,
    refinement_rows,
)
from ._profile_plots import plot_head_profile, plot_head_scores
from ._trajectory import TRAJECTORY_COLUMNS, kernel_rank_trajectory, plot_kernel_rank_trajectory

__all__ = ["PROFILE_SUMMARY_COLUMNS"]

# -- the experiment: ``profile`` (the same name as piece and command) ------------------
#
# The command profiles ONE model (settings with ``model``): its result is the
# profile of :func:`profile_heads` plus ``geometry`` and ``texts``, which is what
# ``profile.json`` holds. The reproduce piece profiles SEVERAL models and the
# training trajectory (settings with ``models`` and ``steps``): its result is
# ``{"models": {name: profile}, "trajectory": ...}``.

PROFILE_SUMMARY_COLUMNS = ["model", "heads", "d_head", "kernel_energy_rank_median",
                           "attn_energy_rank_median", "uniform_attn_energy_rank",
                           "sink_heads", "local_heads", "structured_heads",
                           "spearman_kernel_vs_attn", "sink_rate", "max_previous_token_score",
                           "max_duplicate_token_score", "max_induction_score"]
"""Columns of the reproduce piece's per-model table (one row per profiled model)."""



def _run_one(settings, *, random_state, progress, device):
    """The command: one model's profile and, unless switched off, its geometry."""
    del progress  # one profile: the status line of the command is enough
    loaded = load_model(settings["model"])
    inputs = settings["texts"]
    if settings.get("inputs", "default") == "repeated-random":
        inputs = "repeated_random"
    result = profile_heads(loaded.module, inputs, tokenizer=loaded.tokenizer,
                           n_inputs=settings["n_inputs"], max_length=settings["max_length"],
                           half_length=settings.get("half_length"), band=settings["band"],
                           score_measure=settings.get("score_measure", "mul"),
                           exclude_bos=settings.get("exclude_bos", False),
                           exclude_current_token=settings.get("exclude_current_token", False),
                           random_state=random_state, device=device)
    result.config["model"] = loaded.label
    geometry = None
    if settings["geometry"]:
        geometry = geometry_record(reachability_geometry(
            as_model_adapter(loaded.module, copy_model=False), n_memory=settings["n_memory"],
            n_tokens=settings["n_tokens"], precision=settings["precision"],
            measured_slope=settings.get("slope"), random_state=random_state))
    return jsonable(dict(records=result.records, config=result.config,
                         baselines=result.baselines, summary=result.summary,
                         kernel_spectra=result.kernel_spectra, geometry=geometry,
                         texts=result.texts, seconds=result.seconds))


def _run_models(settings, *, random_state, progress, device):
    """The reproduce piece: several models' profiles and the training trajectory."""
    models = {}
    with progress_steps(len(settings["models"]), "profile", enabled=progress) as bar:
        for name in settings["models"]:
            try:
                profile = profile_heads(name, n_inputs=settings["n_inputs"],
                                        max_length=settings["max_length"],
                                        random_state=random_state, device=device)
            except ModelNotInstalledError as error:  # a packaged model not installed
                models[name] = {"missing": str(error)}
                bar.update(f"{name}: not installed")
                continue
            models[name] = dict(records=profile.records, baselines=profile.baselines,
                                summary=profile.summary, config=profile.config)
            bar.update(f"profiled {name} ({profile.seconds:.1f} s)")
    trajectory = kernel_rank_trajectory(steps=settings["steps"], random_state=random_state,
                                        progress=progress, device=device)
    return jsonable({"models": models, "trajectory": dict(trajectory)})




DOMINATED = 0.5
"""A head is *dominated* by a sink or by locality when more than this share of its attention
(a majority) goes to one key or to the band around the diagonal; the model's mixers are
dominated when more than this share of its heads are (a majority again): the appendix's
word "dominated" read as "more than half"."""

EFFECT_RHO = 0.3
"""Cohen's "medium" correlation: a rank correlation of at least this size between the static
kernel rank and the realised rank across heads would make one a usable proxy of the other."""

LEVEL = 0.05
"""The level of the profile's statistical tests (Spearman's across heads, the exact
permutation test along training)."""


def _structured(record, baselines, share=DOMINATED):
    """A head with a majority of its attention on one key or on the band, above uniform."""
    return any(record[key] > share and record[key] > baselines[key]
               for key in ("max_key_mass", "band_mass"))


def _exact_spearman_test(x, y):
    """Spearman's rho of ``x`` and ``y`` and its exact two-sided permutation p-value.

    Every permutation of ``y`` against ``x`` is tried (up to 8 points, 40,320
    permutations); the p-value is the share whose ``|rho|`` is at least the
    observed one (within 1e-12). A constant ``x`` or ``y`` gives ``(nan, 1.0)``:
    no association can be shown.

    Parameters
    ----------
    x, y : sequence of float, of equal length 3 to 8

    Returns
    -------
    rho : float
    p : float

    Examples
    --------
    >>> rho, p = _exact_spearman_test([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    >>> round(rho, 12), round(p * 120)
    (1.0, 2)
    """
    import itertools

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or not 3 <= x.size <= 8:
        raise ValueError(f"x and y must have the same length, 3 to 8; got {x.size}, {y.size}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), 1.0
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    observed = abs(float(np.corrcoef(rx, ry)[0, 1]))
    rhos = [abs(float(np.corrcoef(rx, ry[list(order)])[0, 1]))
            for order in itertools.permutations(range(x.size))]
    p = float(np.mean([r >= observed - 1e-12 for r in rhos]))
    return float(stats.spearmanr(x, y).statistic), p


def _plot_models(result, folder):
    names = []
    for name, model in result["models"].items():
        if "missing" in model:
            continue
        names.append(save_plot(plot_head_profile(Bunch(**model)), folder,
                               f"profile_{name}.png"))
        if "sink_rate" in model["summary"]:
            names.append(save_plot(plot_head_scores(Bunch(**model)), folder,
                                   f"profile_scores_{name}.png"))
    trajectory = plot_kernel_rank_trajectory(Bunch(**result["trajectory"]))
    return names + [save_plot(trajectory, folder, "profile_trajectory.png")]


def _plot_one(result, folder):
    names = [save_plot(plot_head_profile(Bunch(**result)), folder, "profile.png")]
    if "sink_rate" in result["summary"]:
        names.append(save_plot(plot_head_scores(Bunch(**result)), folder,
                               "profile_scores.png"))
    return names


def _tables_models(result):
    rows = []
    for name, model in result["models"].items():
        if "missing" in model:
            continue
        summary, records = model["summary"], model["records"]
        rows.append(dict(
            model=name, heads=summary["n_heads_total"], d_head=model["config"]["d_head"],
            **{k: summary[k] for k in ("kernel_energy_rank_median", "attn_energy_rank_median",
                                       "uniform_attn_energy_rank", "sink_heads",
                                       "local_heads", "spearman_kernel_vs_attn")},
            **{k: summary.get(k, float("nan")) for k in (
                "sink_rate", "max_previous_token_score", "max_duplicate_token_score",
                "max_induction_score")},
            structured_heads=sum(_structured(r, model["baselines"]) for r in records),
        ))
    cfg = result["trajectory"]["config"]
    return [
        ("per-head profiles (medians over heads; sink/local: more than half the mass on the "
         "first token / within +-1; structured: more than half on one key or on the band, "
         "and more than uniform; sink rate: the share of heads with more than 0.3 on the first "
         "token; max_*_score: the best head's previous-token, duplicate-token and "
         "induction score)", rows, PROFILE_SUMMARY_COLUMNS),
        (f"one fixed task (induction, |V| = {cfg['vocab_size']}), a {cfg['n_layers']}-layer "
         f"TinyCausalLM along training (means over heads)", result["trajectory"]["summary"],
         TRAJECTORY_COLUMNS),
    ]


def _geometry_tables(geometry):
    """The geometry's bounds table and its cone and cell numbers (none without bounds)."""
    if not geometry or not geometry.get("bounds"):
        return []
    slope = geometry.get("measured_slope")
    ratio = (f"ratio = bound / the given slope {number_text(slope)}" if slope is not None
             else "ratio: – (no measured slope; give one with --slope)")
    cone = {k: geometry[k] for k in ("min_cosine", "cone_half_angle", "cone_log_fraction")}
    return [
        (f"reachability bounds per precision convention (m = {geometry['n_memory']}): "
         f"log_count_bound in nats, slope_bound in tokens per prompt vector ('–' where the "
         f"model has no next-token head); {ratio}", geometry["bounds"],
         GEOMETRY_BOUND_COLUMNS, None),
        ("the cone and the decoder cells of the reachability geometry",
         refinement_rows(cone, geometry.get("cells")), ["quantity", "value"]),
    ]


#: models with at most this many heads get the per-head table on the terminal too; every
#: model gets it in profile.csv (a table of hundreds of rows would bury the summary)
_PRINTED_HEADS = 32


def _tables_one(result):
    heads = []
    if len(result["records"]) <= _PRINTED_HEADS:
        heads = [(f"per-head profile of {result['config']['model']}", result["records"],
                  PROFILE_COLUMNS)]
    return [*heads, *_geometry_tables(result.get("geometry"))]


def _proxy_outcome(records):
    """Spearman's rho (kernel vs realised energy rank across heads), its p and the outcome."""
    kernel = [r["kernel_energy_rank"] for r in records]
    realised = [r["attn_energy_rank"] for r in records]
    if len(records) < 3 or np.ptp(kernel) == 0 or np.ptp(realised) == 0:
        return float("nan"), float("nan"), "partly"
    test = stats.spearmanr(kernel, realised)
    rho, p = float(test.statistic), float(test.pvalue)
    if abs(rho) < EFFECT_RHO:
        return rho, p, "agrees"
    return rho, p, "does not agree" if p < LEVEL else "partly"


def _verdicts(result):
    """Sinks and locality in a pretrained model; kernel rank against mixers and training.

    The claims are the appendix's ("The Entropic Bound", Byeong Hoon Yoon, 2026,
    section 3, real-world limitations, appendix B: real mixers are dominated
    by task-independent structure -- locality, positional priors, attention
    sinks -- rather than one low-rank routing kernel; the measured rank tracks
    the optimisation progress (the loss), not the task's complexity). The
    rules, fixed before any run:

    * **Sinks and locality dominate** (pretrained models only): a head is
      dominated when more than half of its attention goes to one key or within
      the +-band, and more than uniform attention puts there
      (:data:`DOMINATED`); agrees when more than half of the heads are, does
      not agree otherwise.
    * **The static kernel rank is not a proxy for the realised one:** per model,
      Spearman's rho across heads. ``|rho|`` below Cohen's medium correlation
      0.3 (:data:`EFFECT_RHO`): that model agrees; ``|rho| >= 0.3`` with
      Spearman's test significant at 0.05: it does not agree; ``|rho| >= 0.3``
      not significant (too few heads to tell): partly. All models agree:
      agrees; all do not: does not agree; otherwise partly. The sign of rho
      does not matter: an anti-correlation is a proxy too.
    * **The kernel rank tracks optimisation:** on one fixed task, the mean
      kernel energy rank and the held-out loss over the checkpoints, Spearman's
      rho with its exact permutation p-value (:func:`_exact_spearman_test`, all
      orderings of the checkpoints); agrees when p <= 0.05, does not agree
      otherwise. A rank that jumps away from its initial value and then wanders
      while the loss keeps falling does not track it. With five checkpoints only
      a perfectly monotone relation reaches p <= 0.05 (p = 2/120). One fixed
      task cannot test "not task complexity"; that half of the claim is not
      judged.
    """
    if _mode(result) is _ONE_MODEL:
        result = {"models": {result["config"]["model"]: result}, "trajectory": None}
    verdicts = []
    profiled = {name: model for name, model in result["models"].items()
                if "missing" not in model}
    pretrained = {name: model for name, model in profiled.items() if name != "default"}
    for name, model in pretrained.items():
        records = model["records"]
        n = sum(_structured(r, model["baselines"]) for r in records)
        verdicts.append(Verdict(
            "real mixers are dominated by task-independent structure: attention sinks and "
            "locality",
            f"{name}: {n} of {len(records)} heads put more than half of their attention "
            f"on one key or within +-{model['config']['band']} positions (uniform attention "
            f"would put {number_text(model['baselines']['max_key_mass'])} and "
            f"{number_text(model['baselines']['band_mass'])}); "
            f"{model['summary']['sink_heads']} put more than half on the first token",
            "agrees" if n > DOMINATED * len(records) else "does not agree",
            "a head is dominated when a majority of its attention goes to one key or to the "
            "band (and more than uniform attention puts there); agrees when a majority of "
            "the heads are",
        ))
    if profiled:
        outcomes = {name: _proxy_outcome(model["records"]) for name, model in profiled.items()}
        kinds = {outcome for _, _, outcome in outcomes.values()}
        overall = kinds.pop() if len(kinds) == 1 else "partly"
        measured = "; ".join(
            f"{name}: Spearman {number_text(rho, '{:.2f}')} (p = {number_text(p, '{:.2g}')}, "
            f"{len(profiled[name]['records'])} heads) between static-kernel and realised "
            f"energy rank across heads (medians "
            f"{number_text(profiled[name]['summary']['kernel_energy_rank_median'])} of "
            f"{profiled[name]['config']['d_head']} and "
            f"{number_text(profiled[name]['summary']['attn_energy_rank_median'])}): {outcome}"
            for name, (rho, p, outcome) in outcomes.items())
        verdicts.append(Verdict(
            "the static kernel rank of a trained model is not a proxy for the mixer its "
            "heads realise (no single low-rank routing kernel)",
            measured, overall,
            f"per model: |rho| < {EFFECT_RHO:g} (below Cohen's medium correlation) agrees; "
            f"|rho| >= {EFFECT_RHO:g} with Spearman's test at p < {LEVEL:g} does not agree; "
            "otherwise partly (too few heads to tell); every model agreeing agrees, every "
            "model not agreeing does not agree",
        ))
    summary = (result["trajectory"] or {}).get("summary", [])
    if 3 <= len(summary) <= 8:
        ranks = [row["kernel_energy_rank"] for row in summary]
        losses = [row["loss"] for row in summary]
        rho, p = _exact_spearman_test(ranks, losses)
        verdicts.append(Verdict(
            "the measured static kernel rank tracks optimisation progress, not task "
            "complexity",
            f"on one fixed task the mean kernel energy rank goes "
            f"{' -> '.join(number_text(r) for r in ranks)} over steps "
            f"{', '.join(str(row['step']) for row in summary)} while the held-out loss goes "
            f"{' -> '.join(number_text(x) for x in losses)}; Spearman with the loss "
            f"{number_text(rho, '{:.2f}')}, exact permutation p = {number_text(p, '{:.2g}')}",
            "agrees" if p <= LEVEL else "does not agree",
            f"the rank tracks the loss when their rank correlation over the checkpoints is "
            f"significant at {LEVEL:g} (exact permutation test over all "
            f"{math.factorial(len(summary))} orderings); the task is fixed, so 'not task "
            "complexity' is not tested here",
        ))
    return verdicts


def _extra_files_one(result, folder):
    """The command's ``profile.csv`` (every column of every head)."""
    save_profile_csv(Bunch(**result), os.path.join(folder, "profile.csv"))
    return ["profile.csv"]


def _read_texts(path):
    """The ``--texts`` file's lines: size and line length capped, the name in every error."""
    return read_text_lines(path, "--texts")


def _check(settings):
    """One source of inputs, and a precision the bounds can read, before any work."""
    if settings.get("texts") and settings.get("inputs", "default") != "default":
        raise ValueError(f"--texts and --inputs {settings['inputs']} both name the inputs: "
                         "give one")
    try:  # checked whatever else is given (--no-geometry skips the code that uses it)
        check_precision(settings.get("precision"))
    except ValueError as error:
        raise ValueError(f"argument --precision: {str(error).replace('precision ', '', 1)}"
                         ) from None


_MEASURE_TEXT = {
    "mul": "TransformerLens's mul: the share of all the head's attention on the pattern's "
           "positions, averaged over inputs",
    "abs": "TransformerLens's abs: 1 - round(mean |A - D| n, 3), averaged over inputs",
    "conditional": "the share of attention on the pattern's positions over the queries "
                   "where it names one, pooled over inputs",
}


def _head_text(head):
    return f"L{head[0]}H{head[1]} {number_text(head[2], '{:.3f}')}"


def _pattern_line(name, cfg, base, summ):
    """One pattern's line: its baselines and every head it counts (the best few if none)."""
    threshold = cfg["threshold"]
    counted, top = summ[f"counted_{name}_heads"], summ[f"top_{name}_heads"]
    if counted:
        heads = (f"{len(counted)} head{'s' * (len(counted) != 1)} above {threshold:g} of "
                 "perfect: " + ", ".join(_head_text(head) for head in counted))
    else:
        heads = (f"no head above {threshold:g} of perfect; the best {len(top)}: "
                 + (", ".join(_head_text(head) for head in top) or "–"))
    return (f"  {name.replace('_', '-')} ({cfg['pattern_queries'][name]} queries; uniform "
            f"{number_text(base[f'{name}_score'], '{:.3g}')}, perfect head "
            f"{number_text(base[f'perfect_{name}_score'], '{:.3g}')}): {heads}")


def _score_lines(cfg, base, summ):
    """The summary's head-score lines: per pattern every head counted, then the copy accuracy."""
    excluded = [what for what, on in (("the first key", cfg["exclude_bos"]),
                                      ("the current token", cfg["exclude_current_token"]))
                if on]
    lines = [
        f"head scores ({_MEASURE_TEXT[cfg['score_measure']]}"
        + (f"; {' and '.join(excluded)} left out" if excluded else "")
        + f"; a head counts when it scores more than {cfg['threshold']:g} of a perfect head; "
        "queries: those where the pattern names a position):"]
    lines += [_pattern_line(name, cfg, base, summ) for name in HEAD_PATTERNS]
    if "copy_accuracy_second" in summ:
        lines.append(
            f"next-token accuracy on repeated random tokens ({cfg['half_length']} per copy): "
            f"first copy {summ['copy_accuracy_first']:.3f}, second copy "
            f"{summ['copy_accuracy_second']:.3f} (greedy, each copy's first token left out)")
    lines.append(f"sink rate {summ['sink_rate']:.3g}: the share of heads whose mean attention "
                 f"to the first token exceeds {cfg['sink_rate_threshold']:g}")
    return lines


def _summary_models(result):
    return [f"profiled {', '.join(result['models'])} and one model along training"]


def _summary_one(result):
    """The whole summary above the tables (one entry of several lines), then where the table is.

    The head counts name every head they count; a model of more than
    ``_PRINTED_HEADS`` heads has its per-head table in ``profile.csv`` only.
    """
    cfg, base, summ = result["config"], result["baselines"], result["summary"]
    kind = "causal" if cfg["causal"] else "bidirectional"
    extra = ", rotary positions (not in the static kernel)" if cfg["rotary"] else ""
    if cfg["qk_norm"]:
        extra += ", per-head query/key norms (the static kernel is approximate)"
    n = summ["n_heads_total"]
    lines = [
        f"Per-head profile of {cfg['model']} ({cfg['family']}, {kind}{extra}): "
        f"{cfg['n_layers']} layers x {cfg['n_heads']} heads, d = {cfg['d_model']}, d_head = "
        f"{cfg['d_head']}, {cfg['dtype']}; {cfg['n_inputs']} inputs ({cfg['inputs']}), "
        f"{cfg['min_length']}-{cfg['max_length']} tokens (mean {cfg['mean_length']:.1f})",
        f"uniform attention on the same inputs: energy rank {base['attn_energy_rank']:.3g}, "
        f"sink mass {base['sink_mass']:.3g}, max key mass {base['max_key_mass']:.3g}, band "
        f"mass {base['band_mass']:.3g}, entropy {base['entropy']:.3g}",
        f"{summ['sink_heads']} of {n} heads put more than {cfg['threshold']:g} of their "
        f"attention on the first token, {summ['any_sink_heads']} on some single key, "
        f"{summ['local_heads']} within +/-{cfg['band']} positions",
        f"static kernel energy rank: median {summ['kernel_energy_rank_median']:.3g} of "
        f"d_head = {cfg['d_head']}; realised attention energy rank: median "
        f"{summ['attn_energy_rank_median']:.3g} (uniform "
        f"{summ['uniform_attn_energy_rank']:.3g}); Spearman correlation across heads "
        f"{summ['spearman_kernel_vs_attn']:.2f}",
        *_score_lines(cfg, base, summ),
    ]
    g = result["geometry"]
    if g is not None:
        line = (f"reachability geometry ({g['kind']}, m = {g['n_memory']}, {g['n_prompts']} "
                f"random prompts of {g['n_tokens']} tokens): radius r = {g['radius']:.4g}, "
                f"eps = {g['precision']:.3g}; count bound ln N <= "
                f"{g['log_count_bound']:.4g} nats (box {g['box_log_count_bound']:.4g})")
        if g["slope_bound"] is not None and math.isfinite(g["slope_bound"]):
            line += (f"; slope bound C = {g['slope_bound']:.4g} tokens per vector (box "
                     f"{g['box_slope_bound']:.4g})")
        lines.append(line)
        if g.get("min_cosine") is not None:
            cells = g.get("cells") or {}
            decay = cells.get("closed_form")
            lines.append(
                f"  cone: smallest pairwise cosine {g['min_cosine']:.3f}, ln(cone share of the "
                f"ball) {g['cone_log_fraction']:.3g} nats per vector; decoder cells: "
                + (f"c = {decay:.4g} nats per token against ln|V| = {cells['ln_vocab']:.4g}, "
                   f"{cells['n_empty']} empty cells, {cells['n_samples']} Monte Carlo points"
                   if decay is not None else "–"))
            slope = g.get("measured_slope")
            lines.append(
                "  bounds table: one row per bound (ball, box, cone, box + cells) and precision "
                "convention; " + (f"ratio = bound / the given slope {number_text(slope)}"
                                  if slope is not None else
                                  "ratio – (no measured slope here; give one with --slope)"))
        lines += [f"  does not apply: {item}" for item in g["not_applicable"]]
    after = []
    if n > _PRINTED_HEADS:
        after.append(f"the per-head table ({n} heads x {len(PROFILE_COLUMNS)} columns, and "
                     "every other rank measure): profile.csv, beside profile.json")
    return ["\n".join(lines), *after]


class _Mode(NamedTuple):
    """What one of the two kinds of profile result is run, shown and saved with."""

    run: Callable
    tables: Callable
    plot: Callable
    summary: Callable
    extra_files: Callable


_ONE_MODEL = _Mode(_run_one, _tables_one, _plot_one, _summary_one, _extra_files_one)
_SEVERAL_MODELS = _Mode(_run_models, _tables_models, _plot_models, _summary_models,
                        lambda result, folder: [])


def _mode(data):
    """The command's settings and results name one ``model``; the piece's, ``models``."""
    return _SEVERAL_MODELS if "models" in data else _ONE_MODEL


def _run(settings, *, random_state, progress, device):
    return _mode(settings).run(settings, random_state=random_state, progress=progress,
                               device=device)


def _tables(result):
    return _mode(result).tables(result)


def _plot(result, folder):
    return _mode(result).plot(result, folder)


def _summary(result):
    return _mode(result).summary(result)


def _extra_files(result, folder):
    return _mode(result).extra_files(result, folder)
