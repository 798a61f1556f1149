"""Healing the low-rank queries of ``model-rank`` at ``r*_model``, kept for a rerun.

The factors at ``r*_model(save_epsilon)`` of the first corpus, cut in the heads' output
metric, are distilled end to end toward the unedited model
(:func:`~intrinsic_rank.inspection.heal_queries`): on ``heal_windows`` windows of the
corpus's training documents (the calibration's first ones among them),
stopped and chosen by its validation windows, the test loss recorded at each reading.
A finished healing is kept in the run's checkpoint folder (the factors as ``.npz``, the
history as JSON, with the key of what shaped them) and reused by a rerun of the same
settings; an interrupted one starts again from its calibrated start.
"""

import os

import numpy as np

from ..._atomic import replaced_atomically
from ...inspection import heal_queries
from ._model_search import corpus_windows, write_part

__all__ = ["heal_at"]

CALIBRATION = "output"
"""The calibration the healed factors start from (the search's)."""


def _healing_key(evaluator, settings, chosen):
    import hashlib
    import json

    heal = {k: settings[k] for k in settings if k.startswith("heal_")}
    text = json.dumps(dict(cache=evaluator.cache.key, ranks=chosen["ranks"], **heal),
                      sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _cached_healing(path, key):
    """The healed factors and result a finished healing kept, or None."""
    import json

    from sklearn.utils import Bunch

    try:
        with open(f"{path}.json", encoding="utf-8") as handle:
            stored = json.load(handle)
        if stored.get("key") != key:
            return None
        arrays = np.load(f"{path}.npz")
        factors = {}
        for name in stored["heads"]:
            layer, head = (int(p) for p in name[1:].split("H"))
            factors[layer, head] = tuple(arrays[f"{name}.{part}"] for part in "AaC")
        return factors, Bunch(**stored["result"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _keep_healing(path, key, factors, result):
    """The healed factors and their record, in place at once (not held by an output stage)."""
    arrays = {f"L{l}H{h}.{part}": value for (l, h), three in factors.items()
              for part, value in zip("AaC", three)}
    with replaced_atomically(f"{path}.npz") as tmp:
        with open(tmp, "wb") as stream:
            np.savez(stream, **arrays)
    write_part(f"{path}.json", dict(key=key, heads=[f"L{l}H{h}" for l, h in factors],
                                    result=dict(history=result.history,
                                                best_step=result.best_step,
                                                stopped=result.stopped,
                                                seconds=result.seconds)))


def heal_at(evaluator, found, settings, progress, checkpoint=None):
    """Heal the factors at ``r*_model(save_epsilon)``.

    Parameters
    ----------
    evaluator : ModelEvaluator
        The corpus healed on.
    found : list of dict
        Its ``r*_model`` records (one per eps).
    settings : dict
        The run's settings (``save_epsilon``, ``heal_*``, ``random_state``).
    progress : callable or bool
    checkpoint : str or None, default=None
        The folder a finished healing is kept in (and read from by a rerun of the
        same settings).

    Returns
    -------
    factors : dict of (layer, head) -> (A, a, C)
        The healed factors.
    record : dict
        The history, the step kept, why it stopped, and the test loss before and after.
    chosen : dict
        The ``r*_model`` record healed.
    """
    chosen = next(f for f in found if f["epsilon"] == settings["save_epsilon"])
    ranks = {tuple(int(p) for p in name[1:].split("H")): r for name, r in chosen["ranks"].items()}
    key = _healing_key(evaluator, settings, chosen)
    path = None if checkpoint is None else os.path.join(checkpoint,
                                                        f"{evaluator.corpus}.healing")
    kept = None if path is None else _cached_healing(path, key)
    if kept is None:
        _, factors = evaluator.edits(ranks, CALIBRATION)
        train = corpus_windows(evaluator.loaded, evaluator.corpus,
                               n_fit=settings["heal_windows"], n_validation=2, n_test=2,
                               length=settings["length"],
                               random_state=settings["random_state"])["train"]
        result = heal_queries(
            evaluator.loaded, factors, train,
            evaluator.windows["validation"], test_ids=evaluator.windows["test"],
            max_steps=settings["heal_steps"], lr=settings["heal_lr"],
            batch_size=settings["heal_batch"], eval_every=settings["heal_every"],
            max_seconds=settings["heal_seconds"], random_state=settings["random_state"],
            device=evaluator.device, progress=progress)
        if path is not None:
            os.makedirs(checkpoint, exist_ok=True)
            _keep_healing(path, key, result.factors, result)
        healed = result.factors
    else:
        healed, result = kept
    base = evaluator.unedited("test")
    record = dict(corpus=evaluator.corpus, epsilon=settings["save_epsilon"],
                  total_rank=chosen["total_rank"], rank_share=chosen["rank_share"],
                  history=result.history, best_step=result.best_step,
                  stopped=result.stopped, seconds=result.seconds,
                  before=result.history[0]["test"],
                  after=next(h["test"] for h in result.history
                             if h["step"] == result.best_step))
    record["rise_before"] = record["before"] / base - 1
    record["rise_after"] = record["after"] / base - 1
    return healed, record, chosen
