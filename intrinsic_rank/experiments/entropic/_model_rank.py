"""``model-rank``: the query rank a whole causal LM needs, its per-head map, and the model saved.

For each corpus, :func:`model_rank` reads every head of the model on training
windows, cuts every head's query in its output metric, and measures the model's
loss under four allocations at a grid of budgets, with and without that
calibration (and, for the library's allocation, calibrated layer by layer on the
edited model's own inputs). It then searches ``r*_model(eps)`` on validation
documents (:func:`~._model_search.search_budget`), reports each on test
documents, sets the per-head ranks at ``r*_model`` beside the ``r*_attn`` map,
checks the allocation's currency against measured losses
(:func:`~._model_currency.currency_check`), optionally heals the low-rank
queries end to end (:func:`~intrinsic_rank.inspection.heal_queries`), judges the
factors chosen on one corpus on every other corpus's test documents, and saves
the edited model (:func:`~intrinsic_rank.inspection.save_low_rank_model`).
"""

import os
import time

import numpy as np

from ..._validation import check_device, check_int, check_real, check_seed
from ...inspection import save_low_rank_model
from ._allocations import MODEL_ALLOCATIONS
from ._head_ranks import _corpus_list  # noqa: F401 - the type of --corpora, looked up here
from ._head_ranks import spearman_interval
from ._head_records import answer_at, findings_tol
from ._model_currency import currency_check
from ._model_healing import heal_at
from ._model_search import (
    CALIBRATIONS,
    DEFAULT_ALLOCATION,
    ModelEvaluator,
    check_shares,
    corpus_windows,
    search_budget,
)

__all__ = ["BUDGETS", "EPSILONS", "GOAL_EPSILON", "GOAL_SHARE", "check_budgets", "model_rank",
           "model_rank_verdicts"]

EPSILONS = (0.005, 0.01, 0.02, 0.05)
"""The loss rises of ``r*_model(eps)``: shares of the unedited model's loss."""

BUDGETS = (0.3, 0.4, 0.5, 0.6, 0.7)
"""The budgets every allocation is measured at: shares of the total query rank."""

GOAL_EPSILON = 0.01
"""The goal's loss: ``r*_model`` at a rise of at most this share of the unedited loss."""

GOAL_SHARE = 0.5
"""The goal's budget: ``r*_model(GOAL_EPSILON)`` at most this share of the total query rank."""

DEFAULT_CALIBRATION = "output"
"""The calibration of the search and of the saved model (chosen by measurement:
docs/model_rank.md)."""


def _head_map(ranks, n_layers, n_heads):
    grid = [[None] * n_heads for _ in range(n_layers)]
    for (layer, head), rank in ranks.items():
        grid[layer][head] = int(rank)
    return grid


def _map_records(loaded, corpora, settings, checkpoint, n_jobs, progress, device):
    """The ``r*_attn`` map on every corpus (training-free unless distillation is asked).

    Read on at most head-ranks' own windows (:data:`HEAD_RANK_WINDOWS`, of the
    training and validation documents): at the default sizes its parts are the ones a
    ``head-ranks`` run of the same settings keeps.
    """
    from . import HEAD_RANK_WINDOWS
    from ._real_heads import head_rank_map

    distill = settings["map_distill"]
    result = head_rank_map(
        loaded, list(corpora), "all", n_fit=min(settings["n_fit"], HEAD_RANK_WINDOWS["n_fit"]),
        n_heldout=min(settings["n_validation"], HEAD_RANK_WINDOWS["n_heldout"]),
        length=settings["length"],
        distill=distill, precision_draws=0 if distill == "none" else 3,
        checkpoint=None if checkpoint is None else os.path.join(checkpoint, "head_ranks"),
        n_jobs=n_jobs, random_state=settings["random_state"], progress=progress,
        device=device)
    return result.records


def _row(evaluator, split, share, allocation, calibration, ranks, loss, stage="grid"):
    base = evaluator.unedited(split)
    total = int(sum(ranks.values()))
    return dict(corpus=evaluator.corpus, stage=stage, split=split, budget=share,
                allocation=allocation, calibration=calibration, healed=stage == "healed",
                total_rank=total, rank_share=total / evaluator.total, loss=loss,
                rise=loss / base - 1.0)


def _ranks_of(found):
    """``{(layer, head): rank}`` of a found budget's ``"L{l}H{h}"`` names."""
    return {tuple(int(p) for p in name[1:].split("H")): r for name, r in found["ranks"].items()}


def _grid_rows(evaluator, budgets, calibrations, known, searched=DEFAULT_ALLOCATION):
    """Every allocation at every budget of the grid on test, the searched one on validation."""
    rows = []
    kinds = [k for k in MODEL_ALLOCATIONS if k != "r*_attn" or evaluator.map_risks]
    for share in budgets:
        budget = evaluator.budget(share)
        for kind in kinds:
            ranks = evaluator.allocation(kind, budget)
            cuts = calibrations if kind == searched else [
                c for c in calibrations if c != "sequential"]
            for calibration in cuts:
                loss = evaluator.loss(ranks, calibration, "test", label=kind)
                rows.append(_row(evaluator, "test", share, kind, calibration, ranks, loss))
        ranks = evaluator.allocation(searched, budget)
        known[budget] = evaluator.loss(ranks, DEFAULT_CALIBRATION, "validation", label=searched)
    return rows


def _search_rows(evaluator, epsilons, known, searched=DEFAULT_ALLOCATION):
    """``r*_model(eps)`` per eps: the budget found on validation, its test loss and ranks."""
    found, rows = [], []
    for eps in epsilons:
        budget = search_budget(evaluator, eps, known=known, calibration=DEFAULT_CALIBRATION,
                               allocation=searched)
        ranks = evaluator.allocation(searched, budget)
        test = evaluator.loss(ranks, DEFAULT_CALIBRATION, "test", label=searched)
        found.append(dict(corpus=evaluator.corpus, epsilon=eps, total_rank=int(budget),
                          rank_share=budget / evaluator.total,
                          validation_rise=known[budget] / evaluator.unedited("validation") - 1,
                          test_loss=test, test_rise=test / evaluator.unedited("test") - 1,
                          ranks={f"L{l}H{h}": r for (l, h), r in ranks.items()}))
        rows.append(_row(evaluator, "test", budget / evaluator.total, searched,
                         DEFAULT_CALIBRATION, ranks, test, stage=f"r*_model({eps:g})"))
    return found, rows


def _maps(evaluator, found, records, save_epsilon, n_layers, n_heads):
    """The per-head ranks at ``r*_model(save_epsilon)`` beside the ``r*_attn`` map."""
    ranks = _ranks_of(next(f for f in found if f["epsilon"] == save_epsilon))
    out = dict(corpus=evaluator.corpus, epsilon=save_epsilon,
               model=_head_map(ranks, n_layers, n_heads), attn=None, tol=None, rho=None,
               low=None, high=None, n=0)
    here = [r for r in records or () if r["corpus"] == evaluator.corpus and r.get("r_star")]
    if here:
        tol = findings_tol(here[0]["tolerances"])
        attn = {(r["layer"], r["head"]): answer_at(r, tol) or r["width"] for r in here}
        keys = sorted(set(attn) & set(ranks))
        rho, low, high = spearman_interval([attn[k] for k in keys], [ranks[k] for k in keys])
        out.update(attn=_head_map(attn, n_layers, n_heads), tol=tol, rho=rho, low=low,
                   high=high, n=len(keys))
    return out


def _transfer_rows(evaluators, found, searched=DEFAULT_ALLOCATION):
    """The factors chosen on one corpus, judged on every other corpus's test documents."""
    rows = []
    for source, evaluator in evaluators.items():
        for other in evaluators:
            if other == source:
                continue
            split = f"test:{other}"
            for f in (f for f in found if f["corpus"] == source):
                ranks = _ranks_of(f)
                loss = evaluator.loss(ranks, DEFAULT_CALIBRATION, split, label=searched)
                base = evaluator.unedited(split)
                rows.append(dict(calibrated_on=source, judged_on=other, epsilon=f["epsilon"],
                                 rank_share=f["rank_share"], loss=loss,
                                 rise=loss / base - 1.0, rise_on_source=f["test_rise"]))
    return rows


def _checked(settings):
    s = dict(settings)
    s["corpora"] = list(dict.fromkeys(s["corpora"]))
    if not s["corpora"] or any(c not in ("prose", "code", "random", "repeated")
                               for c in s["corpora"]):
        raise ValueError(f"corpora must be one or more of prose, code, random, repeated; got "
                         f"{settings['corpora']!r}")
    s["epsilons"] = check_shares(s["epsilons"], "epsilons")
    s["budgets"] = check_shares(s["budgets"], "budgets")
    s["save_epsilon"] = check_real(s["save_epsilon"], "save_epsilon", 0.0, 1.0, low_open=True,
                                   high_open=True)
    if s["save_epsilon"] not in s["epsilons"]:
        raise ValueError(f"save_epsilon={s['save_epsilon']:g} must be one of the epsilons "
                         f"{', '.join(f'{e:g}' for e in s['epsilons'])}")
    for name, low in (("n_fit", 2), ("n_validation", 2), ("n_test", 2), ("length", 4),
                      ("metric_windows", 1), ("n_pairs", 0), ("heal_steps", 0),
                      ("heal_batch", 1), ("heal_every", 1), ("heal_windows", 2)):
        s[name] = check_int(s[name], name, minimum=low)
    if 0 < s["n_pairs"] < 4:
        raise ValueError(f"n_pairs must be 0 (no currency check) or at least 4; got "
                         f"{s['n_pairs']}")
    s["calibrations"] = list(dict.fromkeys(s["calibrations"]))
    bad = [c for c in s["calibrations"] if c not in CALIBRATIONS]
    if bad or DEFAULT_CALIBRATION not in s["calibrations"]:
        raise ValueError(f"calibrations must be of {', '.join(CALIBRATIONS)} and hold "
                         f"{DEFAULT_CALIBRATION!r}; got {settings['calibrations']!r}")
    if s["map_distill"] not in ("none", "auto", "all", None):
        raise ValueError(f"map_distill must be 'none', 'auto', 'all' or None (no map); got "
                         f"{s['map_distill']!r}")
    if s["allocation"] not in MODEL_ALLOCATIONS:
        raise ValueError(f"allocation must be one of {', '.join(MODEL_ALLOCATIONS)}; got "
                         f"{s['allocation']!r}")
    if s["allocation"] == "r*_attn" and s["map_distill"] is None:
        raise ValueError("allocation='r*_attn' needs the r*_attn map: give map_distill "
                         "'none', 'auto' or 'all', not None")
    s["heal_lr"] = check_real(s["heal_lr"], "heal_lr", 0.0, 1.0, low_open=True)
    s["heal_seconds"] = check_real(s["heal_seconds"], "heal_seconds", 0.0, low_open=True)
    s["random_state"] = check_seed(s["random_state"])
    return s


MODEL_RANK_DEFAULTS = dict(
    corpora=["code", "prose"], epsilons=list(EPSILONS), budgets=list(BUDGETS), n_fit=48,
    n_validation=32, n_test=32, length=128, metric_windows=16,
    calibrations=list(CALIBRATIONS), map_distill="none", allocation=DEFAULT_ALLOCATION,
    n_pairs=60, heal=True,
    heal_windows=256, heal_steps=400, heal_lr=1e-4, heal_batch=8, heal_every=20,
    heal_seconds=1200.0,
    save_epsilon=GOAL_EPSILON, random_state=0)
"""The settings of :func:`model_rank` a call does not give."""


def model_rank(model="smollm2-135m", *, save=None, checkpoint=None, n_jobs=1, progress=False,
               device="cpu", **settings):
    """``r*_model(eps)`` of a causal LM: the query rank the whole model needs, and the model saved.

    Parameters
    ----------
    model : str, path, LoadedModel or model, default="smollm2-135m"
        A causal LM whose heads :func:`~intrinsic_rank.inspection.head_facts` reads.
    save : str or None, default=None
        A new folder: the model at ``r*_model(save_epsilon)`` of the first corpus
        (healed when ``heal``) is written there, with its factors
        (:func:`~intrinsic_rank.inspection.save_low_rank_model`).
    checkpoint : str or None, default=None
        A folder keeping the map's heads, and every measured loss: a rerun with
        the same settings resumes.
    n_jobs : int, default=1
        Tasks at once for the ``r*_attn`` map.
    progress : bool, default=False
    device : str, default="cpu"
    **settings
        Any of these (their defaults are ``MODEL_RANK_DEFAULTS`` in this module,
        also shown by ``intrinsic-rank model-rank --help``): ``corpora``,
        ``epsilons``, ``budgets``, the windows (``n_fit`` training, ``n_validation``, ``n_test``,
        ``length``), ``metric_windows``, ``calibrations``, ``map_distill`` (the
        ``r*_attn`` map's distillation, None for no map), ``allocation`` (the
        one searched, healed and saved: ``"output share"``, ``"uniform"``,
        ``"query energy"`` or ``"r*_attn"``), ``n_pairs`` (the
        currency check), ``heal`` and its ``heal_*`` settings, ``save_epsilon``,
        ``random_state``.

    Returns
    -------
    result : Bunch
        ``frame`` (a pandas DataFrame: one row per corpus, split, budget,
        allocation, calibration and healing, with the loss and its rise), ``rows``
        (the same as dicts), ``r_star_model``, ``maps``, ``currency``, ``healing``,
        ``transfer``, ``unedited``, ``config``, ``saved``, ``seconds`` and
        ``stage_seconds`` (the time of each stage).
    """
    from ...nn import LoadedModel, load_model

    start = time.perf_counter()
    unknown = sorted(set(settings) - set(MODEL_RANK_DEFAULTS))
    if unknown:
        raise TypeError(f"model_rank got unknown settings {', '.join(unknown)}")
    s = _checked({**MODEL_RANK_DEFAULTS, **settings})
    device = check_device(device)
    n_jobs = check_int(n_jobs, "n_jobs", minimum=-1)
    if save is not None:
        save = _checked_save(save)
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=progress)
    check_budgets(loaded, s["budgets"])
    windows = {c: corpus_windows(loaded, c, n_fit=s["n_fit"], n_validation=s["n_validation"],
                                 n_test=s["n_test"], length=s["length"],
                                 random_state=s["random_state"]) for c in s["corpora"]}
    for corpus, own in windows.items():
        own.update({f"test:{other}": windows[other]["test"] for other in windows
                    if other != corpus})
    begin = time.perf_counter()
    records = (None if s["map_distill"] is None else
               _map_records(loaded, s["corpora"], s, checkpoint, n_jobs, progress, device))
    map_seconds = time.perf_counter() - begin
    from ..runner import progress_steps

    with progress_steps(None, "model-rank", enabled=progress) as steps:
        result = _measure_all(loaded, windows, records, s, checkpoint, device, steps)
    result.config["model"] = loaded.label
    result.stage_seconds = dict(load_and_windows=begin - start, map=map_seconds,
                                **result.stage_seconds)
    if save is not None:
        begin = time.perf_counter()
        result.saved = _save(result.evaluators[s["corpora"][0]], result.r_star_model,
                             result.pop("factors"), s, result, save)
        result.stage_seconds["save"] = time.perf_counter() - begin
    result.pop("evaluators")
    result.pop("factors", None)
    result.seconds = time.perf_counter() - start
    return result


def _settings_key(loaded, settings):
    """What every measured loss depends on: the model, the windows, the metric, the version."""
    import hashlib
    import json

    from ..._version import __version__

    shaping = {k: settings[k] for k in ("n_fit", "n_validation", "n_test", "length",
                                        "metric_windows", "random_state")}
    text = json.dumps(dict(model=loaded.label, version=__version__, **shaping),
                      sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _measure_all(loaded, windows, records, s, checkpoint, device, steps):
    """Every corpus's grid and search, the currency, transfer and healing, each timed."""
    from sklearn.utils import Bunch

    rows, found, maps, evaluators, seconds = [], [], [], {}, {}

    def timed(stage, start):
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - start

    for corpus in s["corpora"]:
        risks = None if records is None else {
            (r["layer"], r["head"]): r["risks"] for r in records if r["corpus"] == corpus}
        start = time.perf_counter()
        evaluators[corpus] = evaluator = ModelEvaluator(
            loaded, corpus, windows[corpus], metric_windows=s["metric_windows"],
            map_risks=risks, cache_path=None if checkpoint is None else
            os.path.join(checkpoint, f"{corpus}.losses.json"), settings_key=_settings_key(
                loaded, s), device=device, steps=steps)
        timed("bases", start)
        known, start = {}, time.perf_counter()
        rows += _grid_rows(evaluator, s["budgets"], s["calibrations"], known, s["allocation"])
        timed("grid", start)
        start = time.perf_counter()
        here, searched = _search_rows(evaluator, s["epsilons"], known, s["allocation"])
        found += here
        rows += searched
        timed("search", start)
        shape = max(k[0] for k in evaluator.keys) + 1, max(k[1] for k in evaluator.keys) + 1
        maps.append(_maps(evaluator, here, records, s["save_epsilon"], *shape))
    first = evaluators[s["corpora"][0]]
    start = time.perf_counter()
    currency = (currency_check(first, n_pairs=s["n_pairs"], n_windows=s["metric_windows"],
                               random_state=s["random_state"]) if s["n_pairs"] else None)
    timed("currency", start)
    start = time.perf_counter()
    transfer = _transfer_rows(evaluators, found, s["allocation"])
    timed("transfer", start)
    healing, factors = None, None
    if s["heal"]:
        start = time.perf_counter()
        factors, healing, chosen = heal_at(first, [f for f in found
                                                   if f["corpus"] == first.corpus],
                                           s, steps.update, checkpoint)
        rows.append(_row(first, "test", chosen["rank_share"], s["allocation"],
                         DEFAULT_CALIBRATION, _ranks_of(chosen), healing["after"],
                         stage="healed"))
        timed("healing", start)
    unedited = {c: {split: e.unedited(split) for split in ("validation", "test")}
                for c, e in evaluators.items()}
    config = dict(s, n_heads_total=len(first.keys), total_rank=first.total,
                  calibration=DEFAULT_CALIBRATION, dtype="float32")
    return Bunch(rows=rows, frame=_frame(rows), r_star_model=found, maps=maps,
                 currency=currency, healing=healing, transfer=transfer, unedited=unedited,
                 config=config, saved=None, evaluators=evaluators, factors=factors,
                 stage_seconds=seconds)


def check_budgets(loaded, budgets):
    """Refuse, before any work, a budget below one query rank per head of the model.

    Parameters
    ----------
    loaded : LoadedModel
    budgets : sequence of float
        Shares of the total query rank.

    Raises
    ------
    ValueError
        Naming the smallest budget the model allows (one rank per head), and
        also for a model whose heads the library does not read.
    """
    from ...inspection import head_facts
    from ...nn import query_key_weights

    layers = query_key_weights(loaded.module)
    head_facts(loaded, 0, 0)  # a family the reader does not recompute: its one line, now
    widths = [min(layer.d_model, layer.d_head) for layer in layers for _ in range(layer.n_heads)]
    least = len(widths) / sum(widths)
    low = [b for b in budgets if b < least]
    if low:
        raise ValueError(f"budgets {', '.join(f'{b:g}' for b in low)} are below one query rank "
                         f"per head: {loaded.label} has {len(widths)} heads and a total query "
                         f"rank of {sum(widths)}, so the smallest budget is {least:.4f}")


def _checked_save(path):
    path = os.path.abspath(os.fspath(path))
    if os.path.isfile(path) or (os.path.isdir(path) and os.listdir(path)):
        raise FileExistsError(f"--save {path}: exists and is not an empty folder; give a new "
                              "folder (nothing was written)")
    return path


def _save(evaluator, found, factors, settings, result, path):
    chosen = next(f for f in found if f["corpus"] == evaluator.corpus
                  and f["epsilon"] == settings["save_epsilon"])
    if factors is None:
        _, factors = evaluator.edits(_ranks_of(chosen), DEFAULT_CALIBRATION)
    healed = result.healing is not None
    test = result.healing["after"] if healed else chosen["test_loss"]
    record = dict(corpus=evaluator.corpus, epsilon=chosen["epsilon"],
                  rank_share=chosen["rank_share"], total_rank=chosen["total_rank"],
                  allocation=settings["allocation"], calibration=DEFAULT_CALIBRATION,
                  healed=healed, test_loss=test,
                  unedited_test_loss=evaluator.unedited("test"),
                  windows=dict(n_test=settings["n_test"], length=settings["length"],
                               random_state=settings["random_state"]))
    return save_low_rank_model(evaluator.loaded, factors, path, record=record)


def _frame(rows):
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas comes with the plot extra
        return None
    return pd.DataFrame(rows)


def model_rank_verdicts(result):
    """What ``model-rank`` says, each by a rule fixed before the run (docs/model_rank.md).

    * **The goal** (``r*_model(1 %) <= 50 %``): on every corpus, the budget found
      on validation documents is at most ``GOAL_SHARE`` of the total query rank
      and the loss it gives on test documents is within ``GOAL_EPSILON``:
      "agrees"; on some corpora, or everywhere with a test rise within twice
      ``GOAL_EPSILON``: "partly"; else "does not agree".
    * **The allocation**: at every budget of the grid, the library's allocation
      with its calibration gives a test loss at or below the best of the uniform,
      query-energy and ``r*_attn`` allocations as ``head-ranks`` imposes them
      (data-aware truncation): "agrees"; at some budgets: "partly"; at none:
      "does not agree".
    * **The currency**: the first-order output share's Spearman correlation with
      the measured rise of the loss is above the Fisher proxy's and its 95 %
      interval is above zero: "agrees"; above the Fisher proxy's only: "partly";
      else "does not agree".

    Parameters
    ----------
    result : dict
        From :func:`model_rank` (or its JSON).

    Returns
    -------
    verdicts : list of (claim, measured, verdict, rule)
    """
    found = [f for f in result["r_star_model"] if f["epsilon"] == GOAL_EPSILON]
    met = [f["rank_share"] <= GOAL_SHARE and f["test_rise"] <= GOAL_EPSILON for f in found]
    near = all(f["rank_share"] <= GOAL_SHARE and f["test_rise"] <= 2 * GOAL_EPSILON
               for f in found)
    goal = ("agrees" if found and all(met) else "partly" if any(met) or (found and near)
            else "does not agree")
    goal_text = "; ".join(f"{f['corpus']}: {100 * f['rank_share']:.1f} % of the query rank, "
                          f"test {100 * f['test_rise']:+.2f} %" for f in found) or "not measured"
    searched = result.get("config", {}).get("allocation", DEFAULT_ALLOCATION)
    wins, total, parts = 0, 0, []
    test = [r for r in result["rows"] if r["split"] == "test" and r["stage"] == "grid"]
    for corpus in dict.fromkeys(r["corpus"] for r in test):
        for share in sorted({r["budget"] for r in test if r["corpus"] == corpus}):
            here = {(r["allocation"], r["calibration"]): r["loss"] for r in test
                    if r["corpus"] == corpus and r["budget"] == share}
            ours = here.get((searched, DEFAULT_CALIBRATION))
            others = [v for (k, c), v in here.items()
                      if k in ("uniform", "query energy", "r*_attn") and c == "none"]
            if ours is None or not others:
                continue
            total += 1
            wins += ours <= min(others)
            parts.append(f"{corpus} {100 * share:.0f} %: {ours:.4f} vs best {min(others):.4f}")
    allocation = ("agrees" if total and wins == total else "partly" if wins else
                  "does not agree")
    currency = result.get("currency")
    if currency:
        ours = currency["spearman"]["output share (first order)"]
        fisher = currency["spearman"]["Fisher (query)"]
        better = _finite(ours["rho"]) > _finite(fisher["rho"])
        sure = better and _finite(ours["low"]) > 0
        currency_verdict = "agrees" if sure else "partly" if better else "does not agree"
        currency_text = (f"rho {ours['rho']:.2f} [{ours['low']:.2f}, {ours['high']:.2f}] "
                         f"against Fisher's {fisher['rho']:.2f} on {ours['n']} pairs")
    else:
        currency_verdict, currency_text = "not comparable", "not measured (n_pairs=0)"
    return [
        ("the goal: r*_model(1 %) at most 50 % of the total query rank on every corpus",
         goal_text, goal, "agrees when every corpus's budget found on validation is at most "
         "50 % and its test rise at most 1 %; partly on some corpora or within 2 %"),
        (f"the allocation: at every budget, the {searched} allocation with its calibration "
         "is at or below the best of uniform, query energy and r*_attn",
         "; ".join(parts) or "not measured", allocation,
         "agrees at every budget of the grid, partly at some"),
        ("the currency: a head's output share orders (head, rank) pairs by the model's loss "
         "better than the Fisher proxy", currency_text, currency_verdict,
         "agrees when its Spearman rho is above Fisher's and its 95 % interval above 0; "
         "partly when above Fisher's only"),
    ]


def _finite(value):
    return value if value is not None and np.isfinite(value) else -np.inf


# -- the experiment ------------------------------------------------------------------


def _run(settings, *, random_state, progress, device):
    from ...nn import ModelNotInstalledError, load_model
    from ..runner import jsonable

    s = dict(settings)
    model, save = s.pop("model"), s.pop("save", None)
    checkpoint, jobs = s.pop("checkpoint", None), s.pop("n_jobs", 1)
    try:
        loaded = load_model(model, progress=progress)
    except ModelNotInstalledError as error:  # a packaged model (or its reader) not installed
        return {"missing": str(error), "config": dict(settings)}
    result = model_rank(loaded, save=save, checkpoint=checkpoint, n_jobs=jobs,
                        progress=progress, device=device, random_state=random_state, **s)
    out = {key: result[key] for key in ("rows", "r_star_model", "maps", "currency", "healing",
                                        "transfer", "unedited", "config", "saved", "seconds",
                                        "stage_seconds")}
    return jsonable(out)


_FOUND_COLUMNS = ["corpus", "epsilon", "total_rank", "rank_share", "validation_rise",
                  "test_loss", "test_rise"]
_GRID_COLUMNS = ["corpus", "budget", "allocation", "calibration", "total_rank", "rank_share",
                 "loss", "rise"]
_CURRENCY_COLUMNS = ["proxy", "rho", "low", "high", "n"]
_TRANSFER_COLUMNS = ["calibrated_on", "judged_on", "epsilon", "rank_share", "rise_on_source",
                     "rise"]
_MAP_COLUMNS = ["corpus", "epsilon", "tol", "n", "rho", "low", "high"]


def _tables(result):
    if "missing" in result:
        return []
    cfg = result["config"]
    tables = [(f"r*_model(eps) of {cfg['model']}: the smallest share of the total query rank "
               f"({cfg['total_rank']}) at which the output-share allocation, cut in the heads' "
               "output metric, keeps the loss within eps (found on validation documents, "
               "reported on test documents)", result["r_star_model"], _FOUND_COLUMNS),
              ("every allocation at every budget, test documents (calibration 'none': the "
               "data-aware truncation head-ranks imposes; 'output': cut in the head's output "
               "metric; 'sequential': the same, layer by layer on the edited model's inputs)",
               [r for r in result["rows"] if r["stage"] == "grid"], _GRID_COLUMNS)]
    tables.append(("the per-head ranks at r*_model beside the r*_attn map (Spearman, 95 % "
                   "interval)", result["maps"], _MAP_COLUMNS))
    if result.get("currency"):
        rows = [dict(proxy=k, **v) for k, v in result["currency"]["spearman"].items()]
        tables.append(("proxies of a head's damage against the rise of the validation loss "
                       "with that head cut alone (Spearman, 95 % interval)", rows,
                       _CURRENCY_COLUMNS))
    if result["transfer"]:
        tables.append(("the factors chosen on one corpus, judged on another's test documents",
                       result["transfer"], _TRANSFER_COLUMNS))
    if result.get("healing"):
        h = result["healing"]
        tables.append(("healing: the low-rank queries distilled end to end toward the unedited "
                       "model (KL), stopped by the validation loss", [dict(
                           corpus=h["corpus"], rank_share=h["rank_share"],
                           steps=h["history"][-1]["step"], best_step=h["best_step"],
                           stopped=h["stopped"], rise_before=h["rise_before"],
                           rise_after=h["rise_after"], seconds=h["seconds"])],
                       ["corpus", "rank_share", "steps", "best_step", "stopped", "rise_before",
                        "rise_after", "seconds"]))
    return tables


def _verdicts(result):
    if "missing" in result:
        return []
    from ..runner import Verdict

    return [Verdict(*v) for v in model_rank_verdicts(result)]


def _summary(result):
    if "missing" in result:
        return [f"model rank of {result['config']['model']}: missing ({result['missing']})"]
    cfg = result["config"]
    lines = [f"r*_model of {cfg['model']} ({cfg['n_heads_total']} heads, total query rank "
             f"{cfg['total_rank']}) on {', '.join(cfg['corpora'])}: {cfg['n_fit']} training, "
             f"{cfg['n_validation']} validation and {cfg['n_test']} test windows of "
             f"{cfg['length']} tokens, split by document"]
    for f in result["r_star_model"]:
        lines.append(f"r*_model({100 * f['epsilon']:g} %) on {f['corpus']}: "
                     f"{100 * f['rank_share']:.1f} % of the query rank ({f['total_rank']}); "
                     f"test loss {100 * f['test_rise']:+.2f} %")
    if result.get("saved"):
        lines.append(f"saved the model at r*_model({100 * cfg['save_epsilon']:g} %) in "
                     f"{result['saved']}")
    for v in _verdicts(result):
        lines.append(f"{v.verdict}: {v.claim} -- {v.measured}")
    lines.append(f"{result['seconds']:.1f} s")
    return lines


def _csv_rows(result):
    return [{k: r[k] for k in ("corpus", "stage", "split", "budget", "allocation",
                               "calibration", "healed", "total_rank", "rank_share", "loss",
                               "rise")} for r in result["rows"]]


def _head_rows(result):
    """One row per corpus and head: its rank at every ``r*_model(eps)`` and its ``r*_attn``."""
    rows = []
    for m in result["maps"]:
        found = [f for f in result["r_star_model"] if f["corpus"] == m["corpus"]]
        for layer, heads in enumerate(m["model"]):
            for head in range(len(heads)):
                name = f"L{layer}H{head}"
                row = dict(corpus=m["corpus"], layer=layer, head=head)
                for f in found:
                    row[f"rank@{f['epsilon']:g}"] = f["ranks"].get(name)
                if m["attn"] is not None:
                    row[f"r_attn@{m['tol']:g}"] = m["attn"][layer][head]
                rows.append(row)
    return rows


def _extra_files(result, folder):
    if "missing" in result:
        return []
    from ..runner import write_csv

    write_csv(os.path.join(folder, "model_rank.csv"), _csv_rows(result))
    write_csv(os.path.join(folder, "model_rank_heads.csv"), _head_rows(result))
    return ["model_rank.csv", "model_rank_heads.csv"]


def _plot(result, folder):
    if "missing" in result:
        return []
    from ..runner import save_plot
    from ._model_rank_plots import (
        plot_model_rank_currency,
        plot_model_rank_healing,
        plot_model_rank,
        plot_model_rank_maps,
    )

    files = [save_plot(plot_model_rank(result), folder, "model_rank.png"),
             save_plot(plot_model_rank_maps(result), folder, "model_rank_maps.png")]
    if result.get("healing"):
        files.append(save_plot(plot_model_rank_healing(result), folder, "model_rank_healing.png"))
    if result.get("currency"):
        files.append(save_plot(plot_model_rank_currency(result), folder, "model_rank_currency.png"))
    return files


def _prepare(settings, folder):
    """The command's settings, with the folder of its finished measurements beside ``--out``."""
    settings["checkpoint"] = None if folder is None else os.path.join(folder,
                                                                      "model_rank.parts")
    return settings


def _check(settings):
    s = {k: v for k, v in settings.items() if k in MODEL_RANK_DEFAULTS}
    _checked({**MODEL_RANK_DEFAULTS, **s})
    if settings.get("save") is not None:
        try:
            _checked_save(settings["save"])
        except FileExistsError as error:  # the command's bad input: one line, exit 2
            raise ValueError(str(error)) from None
    checkpoint = settings.get("checkpoint")
    if checkpoint is not None and os.path.exists(checkpoint) and not os.path.isdir(checkpoint):
        raise ValueError(f"{checkpoint} is a file where the folder of the finished measurements "
                         "goes: move it, or give another --out")
    from ..._packaged_models import model_heads

    shape = model_heads(settings["model"])
    if shape is not None:  # a packaged model: its size is known before it loads
        heads = shape["n_layers"] * shape["n_heads"]
        least = 1 / shape["width"]
        low = [b for b in settings.get("budgets", ()) if b < least]
        if low:
            raise ValueError(f"budgets {', '.join(f'{b:g}' for b in low)} are below one query "
                             f"rank per head: {settings['model']} has {heads} heads of width "
                             f"{shape['width']}, so the smallest budget is {least:.4f}")


def _share_list(text):
    """``--epsilons`` / ``--budgets``: comma-separated distinct shares in (0, 1)."""
    import argparse

    from ._head_ranks import _parsed

    try:
        return check_shares(_parsed(float, text), "shares")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).replace("shares ", "")) from None


def _calibration_list(text):
    import argparse

    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or any(n not in CALIBRATIONS for n in names) or DEFAULT_CALIBRATION not in names:
        raise argparse.ArgumentTypeError(
            f"give comma-separated calibrations of {', '.join(CALIBRATIONS)}, with "
            f"{DEFAULT_CALIBRATION!r}; got {text!r}")
    return names


def _map_distill(text):
    import argparse

    if text not in ("none", "auto", "all", "off"):
        raise argparse.ArgumentTypeError(f"give none, auto, all or off; got {text!r}")
    return None if text == "off" else text

