"""Measuring ``r*_attn`` of real heads: which heads, the planted-rank test, one sweep per head.

The Entropic Bound defines ``r*_attn`` inside the attention class -- the smallest
query-key rank at which an attention student reaches the noise floor -- and names
the ranks of the realised operators of trained language models as an open problem.
Here a real head is the teacher: its input ``X`` (after the pre-attention norm) and
output ``Y`` (its slice of the output projection's input) are read by hooks
(:func:`~intrinsic_rank.inspection.head_activations`), and
:class:`~intrinsic_rank.AttentionRankEstimator` sweeps the rank of a student with the
head's own positional scheme (rotary positions in the head's layout, or absolute
positions already inside ``X``), causal mask, logit scale and values. The rank is
the rank of the student's query projection, so that the query-key kernel at every
relative offset has rank at most ``r``.

**The floor of a deterministic teacher.** The head is inside the student class at
``r = head_dim``, so its noise floor is zero and is passed as such
(``noise_floor=0``): a rank reaches the floor when its held-out risk is at most
``tol`` times the held-out variance of ``Y`` (a fraction ``tol`` of ``Y``'s variance
left unexplained), the estimator's own rule. A zero floor makes no rank reach it by
itself: rank 1 counts only if it explains all but ``tol`` of the variance.

**The planted-rank test** (``plant_rank=k``): the head's query projection is
truncated to rank ``k`` by the SVD of its realised queries ``X W_Q``, the ``k`` kept
singular values set equal (:func:`plant_query`): the queries then have ``k``
directions of equal variance, as the synthetic teachers' isotropic tokens give
them. The plant must be *sharp*: its own truncation to rank ``k // 2`` must be at
least ``SHARPNESS`` (5) times ``tol`` away from it in held-out relative error. The
equal value is ``gamma`` times the root mean square of the ``k`` kept ones, for the
first ``gamma`` of :data:`PLANT_SCALES` (1, 2, 4, 8) that makes the plant sharp; a
head with none is reported as not plantable at that rank (never fitted against a
blunt plant). The planted student starts from a random draw (a warm start from the
plant would begin at the answer); ``rank_ == k`` is the test.

**Unplanted heads** start from the head's own rank-``r`` SVD truncation of the query
and its keys (``init_weights``): from a random draw the sweep stalls at an
optimisation floor on real heads, the same at every rank, and a rank read from it
would say nothing about the head.

The experiment ``head-ranks`` around these measurements (what they answer, its
tables, figure and command line) is :mod:`._head_ranks`.
"""

import math
import time

import numpy as np
from scipy import stats
from sklearn.utils import Bunch

from ..._validation import check_device, check_int, check_real, keyed_seed
from ...estimators import AttentionRankEstimator
from ...inspection import (
    TOKEN_CORPORA,
    corpus_token_ids,
    head_activations,
    head_output,
    parse_head,
    profile_heads,
)
from ...nn import LoadedModel, load_model, model_vocab_size, unwrap_model
from ..runner import progress_steps

__all__ = ["HEAD_TYPES", "PLANT_SCALES", "SHARPNESS", "head_name", "head_rank_profiles",
           "plant_query", "relative_risk_at", "select_heads"]

HEAD_TYPES = ("induction", "previous-token", "sink", "drawn")
"""The head types of :func:`select_heads`, in the order heads are chosen."""

PLANT_SCALES = (1.0, 2.0, 4.0, 8.0)
"""Factors ``gamma`` tried, in order, for the planted singular values: ``gamma`` times the
root mean square of the ``k`` kept singular values of the head's realised queries."""

SHARPNESS = 5.0
"""A plant of rank ``k`` is sharp when its truncation to rank ``k // 2`` is at least this many
times ``tol`` away from it (held-out error relative to the held-out variance of its output)."""

_DEFAULT_HEADS = dict(n_induction=3, n_previous=2, n_sink=2, n_drawn=4)


# -- which heads --------------------------------------------------------------------


def head_name(layer, head):
    """The field's short name of a head, ``"L{layer}H{head}"``.

    Examples
    --------
    >>> head_name(18, 6)
    'L18H6'
    """
    return f"L{layer}H{head}"


def select_heads(model, *, n_induction=3, n_previous=2, n_sink=2, n_drawn=4, n_inputs=16,
                 length=64, random_state=0, device="cpu"):
    """Heads of a causal LM chosen by what they do: induction, previous-token, sink, drawn.

    One :func:`~intrinsic_rank.inspection.profile_heads` pass on the field's induction
    test (BOS, random tokens, the same tokens again) scores every head; the heads
    with the highest TransformerLens "mul" induction score are taken first, then the
    highest previous-token scores, then the largest mass on the first token (attention
    sinks), each among the heads not yet taken, and finally ``n_drawn`` of the rest
    drawn at random with ``random_state``.

    Parameters
    ----------
    model : LoadedModel, or what :func:`~intrinsic_rank.nn.load_model` loads
    n_induction, n_previous, n_sink, n_drawn : int, default=3, 2, 2, 4
    n_inputs, length : int, default=16, 64
        The induction-test inputs of the scoring pass.
    random_state : int, default=0
    device : str, default="cpu"

    Returns
    -------
    heads : list of dict
        ``layer``, ``head``, ``head_type`` (one of :data:`HEAD_TYPES`) and the
        scores ``induction_score``, ``previous_token_score``, ``sink_mass``.

    Examples
    --------
    >>> [h["head_type"] for h in select_heads("default", n_induction=1, n_previous=1,
    ...                                       n_sink=1, n_drawn=1, n_inputs=4)]
    ['induction', 'previous-token', 'sink', 'drawn']
    """
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=False)
    module, tokenizer = loaded.module, loaded.tokenizer
    profile = profile_heads(module, "repeated_random", tokenizer=tokenizer, n_inputs=n_inputs,
                            max_length=length, random_state=random_state, device=device)
    records = profile.records
    taken, heads = set(), []
    for kind, key, count in (("induction", "induction_score", n_induction),
                             ("previous-token", "previous_token_score", n_previous),
                             ("sink", "sink_mass", n_sink)):
        ranked = sorted((r for r in records if (r["layer"], r["head"]) not in taken),
                        key=lambda r: -r[key])
        for rec in ranked[:check_int(count, f"n_{key}", minimum=0)]:
            taken.add((rec["layer"], rec["head"]))
            heads.append((kind, rec))
    rest = [r for r in records if (r["layer"], r["head"]) not in taken]
    rng = np.random.default_rng(keyed_seed(random_state, 1))  # the draw of heads
    n_drawn = min(check_int(n_drawn, "n_drawn", minimum=0), len(rest))
    for i in sorted(rng.choice(len(rest), n_drawn, replace=False)):
        heads.append(("drawn", rest[i]))
    return [dict(layer=int(rec["layer"]), head=int(rec["head"]), head_type=kind,
                 induction_score=float(rec["induction_score"]),
                 previous_token_score=float(rec["previous_token_score"]),
                 sink_mass=float(rec["sink_mass"])) for kind, rec in heads]


# -- the planted-rank test ----------------------------------------------------------


def _relative_error(prediction, target):
    """Mean squared error relative to the mean per-entry variance of ``target`` (float64)."""
    target = np.asarray(target, dtype=np.float64)
    variance = float(np.mean(np.var(target, axis=0)))
    return float(np.mean((np.asarray(prediction, dtype=np.float64) - target) ** 2)) / variance


def plant_query(X, facts, rank, *, tol=0.02, scales=PLANT_SCALES, X_check=None):
    """The head's query truncated to ``rank`` by the SVD of its queries, equal values, made sharp.

    The SVD is that of the head's realised queries ``X W_Q`` (all positions of
    ``X`` stacked): its ``rank`` leading right singular vectors ``V_k`` and values
    ``s_1 >= ... >= s_k`` give the plant ``W_Q V_k diag(s / s_i) V_k^T``, whose
    queries on ``X`` have ``rank`` uncorrelated directions of equal variance ``s^2``
    -- what equal singular values mean for the synthetic teachers, whose tokens are
    isotropic. ``s`` is ``gamma`` times the root mean square of ``s_1 .. s_k`` (the
    plant's queries carry the energy of the head's own rank-``k`` truncation), for
    the first ``gamma`` of ``scales`` at which the plant is sharp: the head with the
    plant's truncation to rank ``rank // 2`` differs from the planted head, on
    ``X_check``, by at least ``SHARPNESS * tol`` in error relative to the planted
    output's variance. The plant has no query bias, so its query projection has
    rank ``rank`` exactly.

    Parameters
    ----------
    X : ndarray of shape (n, L, d_model)
        Inputs of the head whose queries define the directions.
    facts : HeadFacts
    rank : int
        The planted rank ``k >= 2``.
    tol : float, default=0.02
        The estimator's tolerance.
    scales : sequence of float, default=PLANT_SCALES
    X_check : ndarray or None, default=None
        Inputs on which sharpness is judged (held out from ``X``); ``None``: ``X``.

    Returns
    -------
    plant : Bunch
        ``facts`` (the head with the planted query and no query bias),
        ``scale`` (``gamma``), ``sharpness`` (the relative error of the half-rank
        truncation) and ``sharp`` (whether any scale was sharp; when not, the
        plant at the last scale, which must not be used).

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (16, 12))
    >>> data = head_activations("default", ids, [(1, 0)])[1, 0]
    >>> plant = plant_query(data.X, data.facts, 4)
    >>> plant.facts.w_q.shape, int(np.linalg.matrix_rank(plant.facts.w_q))
    ((64, 16), 4)
    """
    import dataclasses

    rank = check_int(rank, "plant_rank", minimum=2)
    limit = min(facts.d_model, facts.head_dim)
    if rank > limit:
        raise ValueError(f"plant_rank={rank} exceeds the head's query rank limit "
                         f"min(d_model, head_dim) = {limit}")
    w_q = np.asarray(facts.w_q, dtype=np.float64)
    tokens = np.asarray(X, dtype=np.float64).reshape(-1, facts.d_model)
    _, values, Vh = np.linalg.svd(tokens @ w_q / math.sqrt(len(tokens)), full_matrices=False)
    if values[rank - 1] <= values[0] * 1e-6:
        raise ValueError(f"the queries of {facts.name} have rank below {rank} on these inputs: "
                         "nothing to plant")
    level = math.sqrt(float(np.mean(values[:rank] ** 2)))
    X_check = X if X_check is None else X_check
    zero = np.zeros_like(np.asarray(facts.b_q, dtype=np.float64))

    def planted(k, value):
        V = Vh[:k].T
        return dataclasses.replace(facts, w_q=w_q @ V @ np.diag(value / values[:k]) @ V.T,
                                   b_q=zero)

    plant = None
    for gamma in scales:
        full, half = planted(rank, gamma * level), planted(rank // 2, gamma * level)
        target = head_output(X_check, full)
        sharpness = _relative_error(head_output(X_check, half), target)
        plant = Bunch(facts=full, scale=float(gamma), sharpness=sharpness,
                      sharp=sharpness >= SHARPNESS * tol)
        if plant.sharp:
            break
    return plant


# -- one head ------------------------------------------------------------------------


def _power_grid(limit):
    """Ranks ``1, 2, 4, ...`` below ``limit``, and ``limit``."""
    grid = [2 ** i for i in range(int(math.log2(limit)) + 1) if 2 ** i < limit]
    return grid + [int(limit)]


def _with_bias_column(X, facts):
    """``X`` and the head's maps with a constant 1 appended where the head has biases.

    ``[x, 1] [W; b] = x W + b``: the biases become one more row of each map, and a
    student without biases contains the head exactly.
    """
    biased = any(np.any(b != 0) for b in (facts.b_q, facts.b_k, facts.b_v))
    maps = {"query": facts.w_q, "key": facts.w_k, "value": facts.w_v}
    if not biased:
        return X, maps, False
    ones = np.ones(X.shape[:-1] + (1,), dtype=X.dtype)
    X = np.concatenate([X, ones], axis=-1)
    maps = {name: np.vstack([w, b[None, :]]) for (name, w), b in
            zip(maps.items(), (facts.b_q, facts.b_k, facts.b_v))}
    return X, maps, True


def _student(facts, maps, *, grid, tol, max_epochs, lr, batch_size, warm, random_state,
             device):
    """The estimator of one head: its positional scheme, mask, scale and values."""
    common = dict(attention="softmax", causal=True, value_map=maps["value"], noise_floor=0.0,
                  tol=tol, rank_grid=grid, max_epochs=max_epochs, lr=lr,
                  batch_size=batch_size, random_state=random_state, device=device)
    if facts.positional == "rope":
        est = AttentionRankEstimator(
            **common, positional="rope", rope_theta=facts.rope_theta,
            student_options={"head_dim": facts.head_dim, "score_scale": facts.scale})
        query, key = maps["query"], maps["key"]
    else:  # absolute positions are inside X; the plain student's scores are unscaled
        est = AttentionRankEstimator(**common)
        root = math.sqrt(facts.scale)
        query, key = maps["query"] * root, maps["key"] * root
    if warm:
        est.set_params(init_weights={"query": query, "key": key})
    return est


def _fit_head(data, *, plant_rank, settings, random_state, device):
    """One head on one corpus: the sweep, its relative risks and what the estimator said."""
    import warnings

    facts = data.facts
    limit = min(facts.d_model, facts.head_dim)
    grid = settings["rank_grid"] or _power_grid(limit)
    if max(grid) > limit:
        raise ValueError(f"rank_grid reaches {max(grid)}, above the head's query rank limit "
                         f"{limit} (min(d_model, head_dim))")
    X, Y = data.X, data.Y
    record = dict(planted_rank=None, plant_scale=None, plant_sharpness=None)
    if plant_rank is not None:
        n_check = max(1, int(round(0.2 * len(X))))
        plant = plant_query(X[:-n_check], facts, plant_rank, tol=settings["tol"],
                            X_check=X[-n_check:])
        record.update(planted_rank=int(plant_rank), plant_scale=plant.scale,
                      plant_sharpness=plant.sharpness)
        if not plant.sharp:
            return {**record, "rank": None, "plantable": False}
        facts = plant.facts
        Y = head_output(X, facts).astype(np.float32)
    X_fit, maps, biased = _with_bias_column(X, facts)
    est = _student(facts, maps, grid=grid, tol=settings["tol"],
                   max_epochs=settings["max_epochs"], lr=settings["lr"],
                   batch_size=settings["batch_size"], warm=plant_rank is None,
                   random_state=random_state, device=device)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kept in est.warnings_ and the record
        est.fit(X_fit, Y)
    variance = est.excess_tol_ / est.tol
    risks = [float(r["heldout_risk"]) / variance for r in est.sweep_]
    return {**record, "plantable": True, "rank": int(est.rank_),
            "ranks": [int(r) for r in est.ranks_], "relative_risks": risks,
            "floor_reached": bool(est.floor_reached_ and any(r["reached"] for r in est.sweep_)),
            "estimate_supported": bool(est.estimate_supported_),
            "heldout_variance": float(variance), "bias_column": biased,
            "warnings": list(est.warnings_), "fit_seconds": time.perf_counter() - start,
            "epochs": int(est.n_epochs_)}


def relative_risk_at(record, rank):
    """The relative held-out risk of ``rank`` in a record of :func:`head_rank_profiles`, or None."""
    ranks, risks = record.get("ranks") or [], record.get("relative_risks") or []
    return risks[ranks.index(rank)] if rank in ranks else None


# -- the experiment's function ------------------------------------------------------


def head_rank_profiles(model="smollm2-135m", heads=None, corpora=TOKEN_CORPORA, *,
                       plant_rank=None, n_inputs=768, length=64, rank_grid=None,
                       max_epochs=None, lr=None, batch_size=None, tol=0.02, n_profile=8,
                       random_state=0, progress=False, device="cpu"):
    """``r*_attn`` of attention heads of a causal LM, each on each corpus, by distillation.

    For every corpus (:func:`~intrinsic_rank.inspection.corpus_token_ids`) the heads'
    inputs and outputs are read in one hooked pass; every head is then the teacher of
    a rank sweep of :class:`~intrinsic_rank.AttentionRankEstimator` with its own
    positional scheme, causal mask, scale and values (module docstring), and its
    static-kernel and realised-attention energy ranks are measured on the same corpus
    by :func:`~intrinsic_rank.inspection.profile_heads`.

    Parameters
    ----------
    model : str, path or model, default="smollm2-135m"
        A causal LM that :func:`~intrinsic_rank.inspection.head_facts` reads.
    heads : sequence of str or (layer, head), or None, default=None
        ``"L18H6"`` or ``(18, 6)``; ``None`` chooses them with
        ``select_heads`` (3 induction, 2 previous-token, 2 sink and 4 drawn).
        Given heads get the type ``select_heads`` would give them, or
        ``"given"``.
    corpora : sequence of str, default=("random", "repeated", "prose", "code")
    plant_rank : int or None, default=None
        Plant this query rank in every head (module docstring) and test that the
        sweep finds it.
    n_inputs, length : int, default=768, 64
        Sequences per corpus and their length (BOS included).
    rank_grid : list of int or None, default=None
        ``None``: ``1, 2, 4, ...`` up to ``min(d_model, head_dim)``.
    max_epochs, lr : int, float or None
        ``None``: 40 epochs at ``lr=1e-3`` from the head's own truncations; 150
        epochs at ``lr=6e-3`` from a random draw for a planted rank.
    batch_size : int or None, default=None
        ``None``: 64 from the head's own truncations, 32 from a random draw
        (twice the steps for the same work: a cold start needs them).
    tol : float, default=0.02
        The estimator's tolerance: the share of ``Y``'s held-out variance a rank
        may leave unexplained and still reach the (zero) floor.
    n_profile : int, default=8
        Inputs of each corpus given to the profile of static and realised ranks.
    random_state : int, default=0
    progress : bool, default=False
    device : str, default="cpu"

    Returns
    -------
    result : Bunch
        ``records`` (one per head and corpus), ``heads`` (the heads and their
        scores), ``config`` and ``seconds``.
    """
    start = time.perf_counter()
    corpora = _checked_corpora(corpora)
    n_inputs = check_int(n_inputs, "n_inputs", minimum=5)
    length = check_int(length, "length", minimum=4)
    tol = check_real(tol, "tol", 0.0, low_open=True)
    planted = plant_rank is not None
    settings = dict(rank_grid=None if rank_grid is None else sorted(set(rank_grid)), tol=tol,
                    max_epochs=max_epochs or (150 if planted else 40),
                    lr=lr or (6e-3 if planted else 1e-3),
                    batch_size=check_int(batch_size or (32 if planted else 64), "batch_size"))
    device = check_device(device)
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=progress)
    chosen = _heads_with_types(loaded, heads, random_state, device)
    pairs = [(h["layer"], h["head"]) for h in chosen]
    vocab = model_vocab_size(*unwrap_model(loaded.module))
    records = []
    total = len(corpora) * len(chosen)
    with progress_steps(total, "head ranks", enabled=progress) as bar:
        for corpus in corpora:
            ids = corpus_token_ids(corpus, loaded.tokenizer, vocab, n_inputs=n_inputs,
                                   length=length, random_state=random_state)
            data = head_activations(loaded, ids, pairs, device=device)
            profile = _profile_of(loaded, ids[:n_profile], length, random_state, device)
            for head in chosen:
                key = (head["layer"], head["head"])
                fit = _fit_head(data[key], plant_rank=plant_rank, settings=settings,
                                random_state=random_state, device=device)
                records.append(dict(layer=key[0], head=key[1], head_type=head["head_type"],
                                    corpus=corpus, **fit, **profile.get(key, {})))
                bar.update(f"{head_name(*key)} {corpus}: r*_attn {fit['rank']}")
            del data
    config = dict(model=loaded.label, corpora=corpora, n_inputs=n_inputs, length=length,
                  plant_rank=plant_rank, n_profile=n_profile, random_state=random_state,
                  **settings)
    return Bunch(records=records, heads=chosen, config=config,
                 seconds=time.perf_counter() - start)


def _checked_corpora(corpora):
    corpora = list(corpora)
    if not corpora or len(set(corpora)) != len(corpora):
        raise ValueError(f"corpora must name distinct corpora of {', '.join(TOKEN_CORPORA)}; "
                         f"got {corpora}")
    for corpus in corpora:
        if corpus not in TOKEN_CORPORA:
            raise ValueError(f"corpora: {corpus!r} is not one of {', '.join(TOKEN_CORPORA)}")
    return corpora


def _heads_with_types(loaded, heads, random_state, device):
    """The heads to measure, with their types (chosen, or classified when given)."""
    chosen = select_heads(loaded, random_state=random_state, device=device, **_DEFAULT_HEADS)
    if heads is None:
        return chosen
    types = {(h["layer"], h["head"]): h["head_type"] for h in chosen}
    pairs = [parse_head(item) for item in heads]
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"heads must be distinct; got {[head_name(*p) for p in pairs]}")
    return [dict(layer=layer, head=head, head_type=types.get((layer, head), "given"))
            for layer, head in pairs]


def _profile_of(loaded, ids, length, random_state, device):
    """Static-kernel and realised-attention energy ranks of every head on ``ids``."""
    profile = profile_heads(loaded.module, ids, tokenizer=loaded.tokenizer, max_length=length,
                            random_state=random_state, device=device)
    return {(r["layer"], r["head"]): dict(kernel_energy_rank=float(r["kernel_energy_rank"]),
                                          attn_energy_rank=float(r["attn_energy_rank"]),
                                          sink_mass=float(r["sink_mass"]))
            for r in profile.records}
