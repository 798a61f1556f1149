"""``r*_model(eps)``: the smallest total query rank at which a model keeps its loss within eps.

"The Entropic Bound" (Byeong Hoon Yoon, 2026) asks for the rank a task needs; the
map of ``r*_attn`` answers it head by head. The question a user brings to a
model is the model's: how much query rank does the *whole* model need? For a
causal LM, a budget ``B`` (a share of the sum of all heads' widths) and an
allocation of ``B`` over the heads, every head's query projection is cut to its
rank (calibrated on training windows) and the model's next-token loss is read on
held-out documents. ``r*_model(eps)`` is the smallest budget at which the
library's allocation keeps the loss within ``eps`` of the unedited model's.

* **Documents.** Three splits of one corpus, by file (:func:`~intrinsic_rank.
  inspection.corpus_token_ids`): the *training* windows calibrate the heads and
  train the healing; the *validation* windows are what the budget search and the
  healing's stop read; the *test* windows, which nothing chose from, give every
  loss reported and judge the goal.
* **The currency and the allocation.** Every head's rank is cut in its output
  metric (:func:`~intrinsic_rank.inspection.model_query_bases`), and the first-order
  error each rank leaves in its layer's attention output, as a share of it, is
  what the heads trade under one budget (:func:`budget_allocation`).
* **The search.** The budgets of the grid first, then bisection on the total rank
  between the largest budget that fails and the smallest that holds, to
  ``1 / RESOLUTION`` of the total rank.
"""

import hashlib
import json
import os

from ..._atomic import replaced_atomically
from ..._validation import check_int, check_real
from ...inspection import (
    corpus_token_ids,
    imposed_queries,
    lm_loss,
    model_query_bases,
    query_edits,
    sequential_query_bases,
)
from ...nn import model_vocab_size, unwrap_model
from ._allocations import (
    attn_allocation,
    budget_allocation,
    query_energy_allocation,
    uniform_allocation,
)

__all__ = ["CALIBRATIONS", "DEFAULT_ALLOCATION", "RESOLUTION", "ModelEvaluator",
           "check_shares", "corpus_windows", "search_budget"]

CALIBRATIONS = ("none", "output", "sequential")
"""How the heads' ranks are cut: ``"none"``, the data-aware truncation on the unedited
model's inputs (what ``head-ranks`` imposes); ``"output"``, the truncation in each head's
output metric on the same inputs; ``"sequential"``, the same fitted layer by layer on the
inputs the already-edited layers produce."""

DEFAULT_ALLOCATION = "output share"
"""The allocation the budget search, the saved model and the verdicts use."""

RESOLUTION = 128
"""The budget search stops when its bracket is at most ``1 / RESOLUTION`` of the total
query rank."""


def check_shares(values, name):
    """Shares as a sorted list of distinct floats in ``(0, 1)``, or one line naming the bound.

    Examples
    --------
    >>> check_shares([0.5, 0.3], "budgets")
    [0.3, 0.5]
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of numbers in (0, 1); got {values!r}")
    checked = sorted(float(check_real(v, name, 0.0, 1.0, low_open=True, high_open=True))
                     for v in values)
    if not checked or len(set(checked)) != len(checked):
        raise ValueError(f"{name} must be distinct numbers in (0, 1), at least one; got "
                         f"{list(values)!r}")
    return checked


def corpus_windows(loaded, corpus, *, n_fit, n_validation, n_test, length, random_state):
    """The training, validation and test windows of one corpus, split by document."""
    vocab = model_vocab_size(*unwrap_model(loaded.module))
    return {split: corpus_token_ids(corpus, loaded.tokenizer, vocab, n_inputs=n, length=length,
                                    random_state=random_state, split=split)
            for split, n in (("train", n_fit), ("validation", n_validation), ("test", n_test))}


class _Cache:
    """Measured losses by key, kept in a JSON file after each one (a rerun resumes).

    The file holds the losses with the key of what they were measured on (the
    settings that shape them); a file of other settings, or one that cannot be
    read, is measured again from the start, never reused.
    """

    def __init__(self, path, settings_key):
        self.path, self.key = path, settings_key
        self.values = {}
        if path is not None and os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    stored = json.load(handle)
                values = stored.get("losses") if stored.get("key") == settings_key else None
                if isinstance(values, dict) and all(isinstance(v, float)
                                                    for v in values.values()):
                    self.values = values
            except (OSError, ValueError, AttributeError):
                self.values = {}

    def get(self, key, compute):
        if key not in self.values:
            self.values[key] = float(compute())
            if self.path is not None:
                write_part(self.path, dict(key=self.key, losses=self.values))
        return self.values[key]


def write_part(path, payload):
    """One finished measurement's file, in place at once, whole or not at all.

    Written with the package's atomic writer directly, not through a command's
    output stage, whose renames wait for the end of the run: a run stopped
    midway keeps every loss it finished, and a rerun reads them.
    """
    from ..runner import jsonable

    with replaced_atomically(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as stream:
            json.dump(jsonable(payload), stream)
            stream.flush()
            os.fsync(stream.fileno())


class ModelEvaluator:
    """One corpus of one model: its heads' bases, the allocations, and losses under edits.

    Parameters
    ----------
    loaded : LoadedModel
    corpus : str
    windows : dict of str -> ndarray
        ``train``, ``validation`` and ``test`` token ids (:func:`corpus_windows`);
        more test windows of other corpora may be added as ``test:<corpus>``.
    metric_windows : int
        Windows the output metric is averaged over.
    map_risks : dict of (layer, head) -> sequence of float or None
        The ``r*_attn`` map's curve of every head (risk at ranks 1..w); None
        leaves the ``r*_attn`` allocation out.
    cache_path : str or None
        A JSON file of the losses measured, read at the start and written after
        each measurement.
    settings_key : str
        What the losses depend on besides the corpus (the model, the windows, the
        metric's windows, the seed, the library's version); a cache file of
        another key is not reused.
    batch_size, device
    steps : object with ``update(text)`` or None
        Told of each measured loss (:func:`~intrinsic_rank.experiments.progress_steps`).
    """

    def __init__(self, loaded, corpus, windows, *, metric_windows=16, map_risks=None,
                 cache_path=None, settings_key="", batch_size=8, device="cpu", steps=None):
        self.loaded, self.corpus, self.windows = loaded, corpus, windows
        self.device, self.batch_size, self.steps = device, batch_size, steps
        self.metric_windows = metric_windows
        self.cache = _Cache(cache_path, f"{corpus}|{settings_key}")
        self.bases = {"output": model_query_bases(loaded, windows["train"], metric="output",
                                                  max_windows=metric_windows, device=device)}
        self._tell(f"{corpus}: every head's output metric")
        self.bases["none"] = {key: head._replace(basis=head.plain)
                              for key, head in self.bases["output"].items()}
        self.keys = list(self.bases["output"])
        self.widths = {key: min(h.facts.d_model, h.facts.head_dim)
                       for key, h in self.bases["output"].items()}
        self.total = int(sum(self.widths.values()))
        self.map_risks = map_risks
        self.sequential = {}

    # -- losses ----------------------------------------------------------------------

    def unedited(self, split):
        """The unedited model's loss on one split's windows."""
        return self.cache.get(f"unedited|{split}", lambda: lm_loss(
            self.loaded, self.windows[split], batch_size=self.batch_size, device=self.device))

    def loss(self, ranks, calibration, split, *, label):
        """The loss on ``split`` with every head at ``ranks``, cut by ``calibration``."""
        total = sum(ranks.values())
        # the ranks themselves are in the key: one label and total can hold other ranks
        # (the r*_attn allocation of another map, say), which must be measured again
        digest = hashlib.sha256(json.dumps(sorted((f"L{l}H{h}", int(r)) for (l, h), r
                                                  in ranks.items())).encode()).hexdigest()
        key = f"{label}|{calibration}|{total}|{split}|{digest[:12]}"
        return self.cache.get(key, lambda: self._measure(ranks, calibration, split, key))

    def _tell(self, text):
        if self.steps is not None:
            self.steps.update(text)

    def _measure(self, ranks, calibration, split, key):
        edits, _ = self.edits(ranks, calibration)
        with imposed_queries(self.loaded, edits):
            loss = lm_loss(self.loaded, self.windows[split], batch_size=self.batch_size,
                           device=self.device)
        self._tell(f"{self.corpus}: {key.replace('|', ' ')}: {loss:.4f}")
        return loss

    def edits(self, ranks, calibration):
        """``(edits, factors)`` for :func:`imposed_queries` at ``ranks``."""
        if calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {', '.join(CALIBRATIONS)}; got "
                             f"{calibration!r}")
        if calibration == "sequential":
            signature = tuple(sorted(ranks.items()))
            if signature not in self.sequential:
                self.sequential = {signature: sequential_query_bases(
                    self.loaded, self.windows["train"], ranks, metric="output",
                    max_windows=self.metric_windows, device=self.device)}
            bases = self.sequential[signature]
            return query_edits(bases, {k: r for k, r in ranks.items() if k in bases})
        return query_edits(self.bases[calibration], ranks)

    # -- allocations -----------------------------------------------------------------

    def allocation(self, kind, budget):
        """The ranks of one allocation at a total ``budget`` (an integer number of ranks)."""
        heads = self.bases["output"]
        if kind == "output share":
            return budget_allocation({k: h.curve for k, h in heads.items()}, budget)
        if kind == "uniform":
            return uniform_allocation(self.widths, budget)
        if kind == "query energy":
            return query_energy_allocation({k: h.query_energy for k, h in heads.items()},
                                           budget)
        if kind == "r*_attn":
            if self.map_risks is None:
                raise ValueError("the r*_attn allocation needs the map's curves")
            return attn_allocation(self.map_risks, budget)
        raise ValueError(f"unknown allocation {kind!r}")

    def budget(self, share):
        """The total rank of a share of all heads' widths (at least one rank per head)."""
        return max(len(self.keys), int(round(share * self.total)))


def search_budget(evaluator, epsilon, *, known, calibration="output", split="validation",
                  resolution=RESOLUTION, allocation=DEFAULT_ALLOCATION):
    """The smallest budget at which an allocation keeps the loss within eps.

    Parameters
    ----------
    evaluator : ModelEvaluator
    epsilon : float
        The relative rise allowed over the unedited loss on ``split``.
    known : dict of int -> float
        Losses already measured on ``split`` at total budgets (read and extended).
    calibration : str, default="output"
    split : str, default="validation"
    resolution : int, default=RESOLUTION
    allocation : str, default=DEFAULT_ALLOCATION

    Returns
    -------
    budget : int
        The smallest total rank found to hold (the total of every width when
        none below it does).
    """
    epsilon = check_real(epsilon, "epsilon", 0.0, 1.0, low_open=True, high_open=True)
    resolution = check_int(resolution, "resolution", minimum=1)
    goal = (1 + epsilon) * evaluator.unedited(split)
    step = max(1, evaluator.total // resolution)

    def holds(budget):
        if budget not in known:
            ranks = evaluator.allocation(allocation, budget)
            known[budget] = evaluator.loss(ranks, calibration, split, label=allocation)
        return known[budget] <= goal

    low = max([b for b in known if not holds(b)], default=len(evaluator.keys) - 1)
    high = min([b for b in known if holds(b) and b > low], default=evaluator.total)
    while high - low > step:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle
    return high
