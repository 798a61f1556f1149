"""``r*_attn`` judged by the model's own loss: impose every head's rank, measure held-out loss.

A rank a head *needs* should be enough when imposed on the model, and less should
hurt: the Entropic Bound's achievability and deficiency, judged by the LM's own
next-token loss on held-out documents (the corpus's *test* split, which no
measurement saw). For each tolerance ``tol`` of a map of every head
(:func:`~intrinsic_rank.experiments.head_rank_map`):

* **r*_attn**: every head's query projection becomes its rank-``r*_attn(tol)``
  student (the trained one where that rank was distilled, else its data-aware
  truncation); a head that did not reach ``tol`` below its width keeps its own;
* **training-free**: the same per-head rule on the training-free answers, every
  head truncated (what the allocation alone gives, without training);
* **uniform**: one rank for every head, the nearest to the same total;
* **query energy**: every head at the rank holding all but ``e`` of its realised
  queries' energy, ``e`` chosen so that the total is the nearest to the same;
* **half**: every head at half its ``r*_attn(tol)`` (the deficiency test).

The edits are in place and undone after each evaluation
(:func:`~intrinsic_rank.inspection.imposed_queries`); nothing is written to any
model file.
"""

import numpy as np

from ..._validation import check_int
from ...inspection import corpus_token_ids, head_facts, imposed_queries, lm_loss
from ...nn import LoadedModel, load_model, model_vocab_size, unwrap_model
from ._head_measure import energy_rank, query_rows
from ._head_records import answer_at

__all__ = ["ALLOCATIONS", "GOAL_LOSS_RISE", "GOAL_RANK_SHARE", "allocation_ranks",
           "impose_verdicts", "impose_ranks"]

ALLOCATIONS = ("r*_attn", "training-free", "uniform", "query energy", "half")
"""The allocations of :func:`impose_ranks`, in the order they are evaluated."""

GOAL_LOSS_RISE = 0.01
"""The goal's loss: at most this relative rise of the held-out loss over the unedited model."""

GOAL_RANK_SHARE = 0.5
"""The goal's budget: at most this share of the total query rank kept."""


def allocation_ranks(records, tol, kind):
    """The rank of each head under one allocation at one tolerance.

    Parameters
    ----------
    records : list of dict
        One per head (the unplanted records of one corpus of a map).
    tol : float
        One of the records' tolerances.
    kind : str
        One of :data:`ALLOCATIONS`.

    Returns
    -------
    ranks : dict of (layer, head) -> int
        A head that keeps its own query has its width.

    Examples
    --------
    >>> recs = [dict(layer=0, head=h, width=4, tolerances=[0.1], r_star=[r],
    ...              r_star_free=[r], query_energy=[0.5, 0.8, 0.95, 1.0])
    ...         for h, r in enumerate([1, None, 3])]
    >>> allocation_ranks(recs, 0.1, "r*_attn"), allocation_ranks(recs, 0.1, "half")
    ({(0, 0): 1, (0, 1): 4, (0, 2): 3}, {(0, 0): 1, (0, 1): 2, (0, 2): 1})
    >>> allocation_ranks(recs, 0.1, "uniform")
    {(0, 0): 3, (0, 1): 3, (0, 2): 3}
    """
    if kind not in ALLOCATIONS:
        raise ValueError(f"kind must be one of {', '.join(ALLOCATIONS)}; got {kind!r}")
    key = lambda r: (r["layer"], r["head"])  # noqa: E731
    target = {key(r): answer_at(r, tol) or r["width"] for r in records}
    if kind == "r*_attn":
        return target
    if kind == "training-free":
        return {key(r): answer_at(r, tol, "r_star_free") or r["width"] for r in records}
    if kind == "half":
        return {k: max(1, v // 2) for k, v in target.items()}
    budget = sum(target.values())
    if kind == "uniform":
        width = min(r["width"] for r in records)
        rank = int(min(width, max(1, round(budget / len(records)))))
        return {key(r): rank for r in records}
    return _energy_allocation(records, budget)


def _energy_allocation(records, budget):
    """Every head at the rank keeping all but ``e`` of its query energy; total nearest budget."""
    def ranks(e):
        return {(r["layer"], r["head"]): energy_rank(r["query_energy"], e) for r in records}

    low, high = 0.0, 1.0  # the total falls as e rises
    for _ in range(60):
        middle = 0.5 * (low + high)
        if sum(ranks(middle).values()) > budget:
            low = middle
        else:
            high = middle
    below, above = ranks(high), ranks(low)
    return min((below, above), key=lambda a: abs(sum(a.values()) - budget))


def _query_projection(facts, projections, rank):
    """The head's query at ``rank``: its stored student (trained or truncated), or a truncation.

    ``w_q``, or ``(w_q, b_q)`` for a head with biases (the students carry the bias
    as one more input row); ``None`` at full width: the head keeps its own.
    """
    if rank >= min(facts.d_model, facts.head_dim):
        return None
    if rank in projections:
        A, C = projections[rank]
        w_q = np.asarray(A, dtype=np.float64) @ np.asarray(C, dtype=np.float64)
    else:
        basis = np.asarray(projections[0][0], dtype=np.float64)
        w_q = query_rows(facts) @ basis[:, :rank] @ basis[:, :rank].T
    return (w_q[:-1], w_q[-1]) if len(w_q) == facts.d_model + 1 else w_q


def _loss_with(loaded, facts, projections, ranks, ids, batch_size, device, trained=True):
    edits = {}
    for head, rank in ranks.items():
        stored = projections[head] if trained else {0: projections[head][0]}
        w_q = _query_projection(facts[head], stored, rank)
        if w_q is not None:
            edits[head] = w_q
    with imposed_queries(loaded, edits):
        return lm_loss(loaded, ids, batch_size=batch_size, device=device)


def _checked_records(records, projections):
    """The records that hold answers, with their projections; one line for any misuse.

    A constant head (``constant_output``) has no answer and is left out: it keeps
    its own query under every allocation.
    """
    if isinstance(records, (dict, str, bytes)) or not hasattr(records, "__len__"):
        raise TypeError(f"impose_ranks: records must be a list of a map's records; got "
                        f"{type(records).__name__}")
    if len(records) == 0:
        raise ValueError("impose_ranks: records is empty; give the unplanted records of one "
                         "corpus of a map (head_rank_map(...).records)")
    if not hasattr(projections, "__len__") or len(projections) != len(records):
        got = len(projections) if hasattr(projections, "__len__") else type(projections).__name__
        raise ValueError(f"impose_ranks: projections must hold one entry per record, in the "
                         f"same order; got {got} for {len(records)} records")
    if not all(isinstance(r, dict) for r in records):
        raise TypeError("impose_ranks: every record must be a dict of a map's records")
    corpora = {r.get("corpus") for r in records}
    if len(corpora) != 1:
        raise ValueError(f"impose_ranks: the records must be of one corpus; got "
                         f"{sorted(map(str, corpora))}")
    heads = [(r.get("layer"), r.get("head")) for r in records]
    if len(set(heads)) != len(heads) or any(r.get("planted_rank") is not None for r in records):
        raise ValueError("impose_ranks: give one unplanted record per head (a map's records "
                         "of one corpus, without plants)")
    kept = []
    for record, projection in zip(records, projections):
        if record.get("constant_output"):
            continue
        name = f"L{record.get('layer')}H{record.get('head')}"
        if not isinstance(record.get("r_star"), list):
            raise ValueError(f"impose_ranks: the record of {name} holds no r*_attn")
        if not isinstance(projection, dict) or 0 not in projection:
            raise ValueError(f"impose_ranks: the projections of {name} must be a dict of rank "
                             "-> factors holding rank 0, the basis of its queries (the map's "
                             "projections)")
        kept.append((record, projection))
    if not kept:
        raise ValueError("impose_ranks: no record holds an r*_attn (every head is constant)")
    if len({tuple(r["tolerances"]) for r, _ in kept}) != 1:
        raise ValueError("impose_ranks: the records must share their tolerances (one map)")
    return [r for r, _ in kept], [p for _, p in kept]


def impose_ranks(loaded, records, projections, *, n_test=32, length=128, batch_size=8,
                 random_state=0, device="cpu", progress=False):
    """Held-out next-token loss of the LM with every allocation imposed, at every tolerance.

    Parameters
    ----------
    loaded : LoadedModel, or what :func:`~intrinsic_rank.nn.load_model` loads
        The model the map measured.
    records : list of dict
        The unplanted records of one corpus of :func:`~intrinsic_rank.experiments.head_rank_map`,
        one per head. A constant head (``constant_output``, no ``r*_attn``) keeps
        its own query under every allocation; a head without a record too.
    projections : list of dict
        The map's projections of those records, in the same order.
    n_test, length : int, default=32, 128
        Windows of the corpus's test documents and their length.
    batch_size : int, default=8
    random_state : int, default=0
    device : str, default="cpu"
    progress : bool, default=False

    Returns
    -------
    result : dict
        ``corpus``, ``unedited`` (the loss), ``total_rank`` (the sum of the
        widths of the heads that hold an answer) and ``rows``: per tolerance and
        allocation, ``tol``, ``allocation``, ``total_rank``, ``rank_share``,
        ``loss`` and ``rise`` (relative to the unedited loss).

    Raises
    ------
    ValueError
        Empty records, projections that do not match them one to one, records of
        several corpora, plants, or records without answers.
    """
    from ..runner import progress_steps

    records, projections = _checked_records(records, projections)
    n_test = check_int(n_test, "n_test", minimum=1)
    length = check_int(length, "length", minimum=2)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    if not isinstance(loaded, LoadedModel):
        loaded = load_model(loaded, progress=progress)
    corpus = records[0]["corpus"]
    vocab = model_vocab_size(*unwrap_model(loaded.module))
    ids = corpus_token_ids(corpus, loaded.tokenizer, vocab, n_inputs=n_test, length=length,
                           random_state=random_state, split="test")
    heads = [(r["layer"], r["head"]) for r in records]
    facts = {h: head_facts(loaded, *h) for h in heads}
    stored = dict(zip(heads, projections))
    full = sum(r["width"] for r in records)
    unedited = lm_loss(loaded, ids, batch_size=batch_size, device=device)
    rows = []
    tolerances = records[0]["tolerances"]
    with progress_steps(len(tolerances) * len(ALLOCATIONS), "impose", enabled=progress) as bar:
        for tol in tolerances:
            for kind in ALLOCATIONS:
                ranks = allocation_ranks(records, tol, kind)
                trained = kind in ("r*_attn", "half")
                loss = _loss_with(loaded, facts, stored, ranks, ids, batch_size, device,
                                  trained=trained)
                total = int(sum(ranks.values()))
                rows.append(dict(tol=tol, allocation=kind, total_rank=total,
                                 rank_share=total / full, loss=loss,
                                 rise=loss / unedited - 1.0))
                bar.update(f"tol {tol:g} {kind}: loss {loss:.4f}")
    return dict(corpus=corpus, unedited=unedited, total_rank=full, n_test=n_test,
                length=length, rows=rows)


def impose_verdicts(result):
    """What imposing the ranks says, each by a rule fixed before the run.

    * **Achievability** (the rank a head needs is enough): at the smallest
      tolerance, the ``r*_attn`` allocation's held-out loss is within
      ``GOAL_LOSS_RISE`` (1 %) of the unedited model's: "agrees"; within 5 %:
      "partly"; else "does not agree".
    * **Deficiency** (less hurts): at every tolerance, half of every head's
      ``r*_attn`` raises the loss more than ``r*_attn`` does, by at least one
      percentage point: "agrees" at every tolerance, "partly" at some, else
      "does not agree".
    * **The goal**: at some tolerance the ``r*_attn`` allocation keeps the loss
      within 1 % while keeping at most ``GOAL_RANK_SHARE`` (half) of the total
      query rank, and its loss is below both the uniform and the query-energy
      allocations' at about the same total: "agrees"; the budget or the
      comparison met at some tolerance without the other: "partly"; else
      "does not agree".

    Parameters
    ----------
    result : dict
        From :func:`impose_ranks`.

    Returns
    -------
    verdicts : list of (claim, measured, verdict, rule)
    """
    rows = result["rows"]
    by = {(r["tol"], r["allocation"]): r for r in rows}
    tolerances = sorted({r["tol"] for r in rows})
    first = by[tolerances[0], "r*_attn"]
    achieved = ("agrees" if first["rise"] <= GOAL_LOSS_RISE else
                "partly" if first["rise"] <= 0.05 else "does not agree")
    hurt = [by[t, "half"]["rise"] >= by[t, "r*_attn"]["rise"] + 0.01 for t in tolerances]
    deficiency = "agrees" if all(hurt) else "partly" if any(hurt) else "does not agree"
    goals = []
    for t in tolerances:
        own = by[t, "r*_attn"]
        cheap = own["rise"] <= GOAL_LOSS_RISE and own["rank_share"] <= GOAL_RANK_SHARE
        better = own["loss"] < min(by[t, "uniform"]["loss"], by[t, "query energy"]["loss"])
        goals.append((cheap and better, cheap or better))
    goal = ("agrees" if any(g for g, _ in goals) else
            "partly" if any(p for _, p in goals) else "does not agree")

    def listed(kind):
        return "; ".join(f"tol {t:g}: {100 * by[t, kind]['rise']:+.2f} % at "
                         f"{100 * by[t, kind]['rank_share']:.1f} % of the query rank"
                         for t in tolerances)

    return [
        ("achievability: the rank r*_attn(tol) each head needs, imposed on every head, keeps "
         "the model's held-out loss", f"r*_attn: {listed('r*_attn')}", achieved,
         f"agrees when the smallest tolerance's allocation raises the held-out loss by at "
         f"most {100 * GOAL_LOSS_RISE:g} %, partly within 5 %"),
        ("deficiency: half of every head's r*_attn raises the held-out loss",
         f"half: {listed('half')}", deficiency,
         "agrees when at every tolerance half the ranks raise the loss at least one "
         "percentage point more than r*_attn does, partly at some"),
        ("the goal: within 1 % of the unedited loss at no more than half the total query "
         "rank, better than a uniform rank and the query-energy allocation at the same total",
         f"uniform: {listed('uniform')}; query energy: {listed('query energy')}", goal,
         "agrees when one tolerance meets the loss, the budget and both comparisons; "
         "partly when one meets the loss and budget or the comparisons"),
    ]

