"""One head's ``r*_attn``: the training-free curve, distillation where it can change the answer.

The Entropic Bound's attention-native rank, measured on a real head (the teacher)
by students with the head's own positions, norms, scale, soft-capping, mask (its sliding
window included), keys and values, whose query projection (before any norm) has rank
``r``. The procedure, the same for a head as trained and for a head with a planted rank:

1. **The training-free curve.** The data-aware truncation of the head's query to
   every rank ``r`` (:func:`~intrinsic_rank.inspection.truncated_head`, on the
   SVD of the realised queries of the *training* inputs), scored on held-out
   inputs. It costs seconds per head, and it is an upper bound of every trained
   student's risk, since each trained rank starts from it and keeps its best
   epoch.
2. **Distillation where it can change the answer.** For a tolerance ``tol`` the
   training-free answer ``r0(tol)`` is the smallest rank whose truncation reaches
   it. Training can only lower a rank's risk, so it can change the answer only
   at ranks below ``r0(tol)``; it is tried at those whose truncation is within
   ``margin`` (10) times ``tol`` -- on ten SmolLM2 heads on Python source, the
   largest fall training gave was a factor of about 4 (docs/real_heads.md) --
   and only for tolerances at or above the head's **precision floor** (the change
   of its output under one more quantisation of its query weights,
   :func:`~intrinsic_rank.inspection.precision_floor`): a finer tolerance asks
   for more than the weights themselves hold, and keeps its training-free bound,
   flagged.
   The ranks are searched as the estimators' adaptive search does: the powers
   of two first, one batched run, then batched refinement rounds of the bracket
   between the largest rank that fails and the smallest that reaches
   (:func:`~intrinsic_rank.estimators.refinement_ranks`), until the bracket is
   at most an eighth of the answer (:data:`RESOLUTION`; exact up to 8).
3. **The answer, an upper bound with its evidence.** ``r*_attn(tol)`` is the
   smallest rank shown to reach ``tol``, by training or by truncation; every
   rank's risk is kept. When no rank below the head width reaches it, the
   answer is ``"> w-1"`` (``w`` the width, which always reaches: it *is* the
   head), never a number.

Each trained rank is a slot of one :class:`~intrinsic_rank.nn.RotarySoftmaxStudent`
with the head's keys and values fixed (so a trained query can be put back into
the model) and trained by :func:`~intrinsic_rank.nn.distill_slots`: from its
data-aware start, to a plateau, keeping its best held-out epoch.
"""

import math
import time

import numpy as np

from ...estimators import refinement_ranks
from ...inspection import precision_floor, query_basis, truncation_risks
from ...nn import RotarySoftmaxStudent, distill_slots
from . import DISTILL_MARGIN, TOLERANCES
from ._head_records import CONSTANT_OUTPUT, output_spread
from ._head_settings import measure_options

__all__ = ["RESOLUTION", "energy_rank", "measure_head", "query_rows", "rank_text"]

RESOLUTION = 1 / 8
"""The search stops when the bracket of an answer is at most this share of it (one rank at
least): ``r*_attn`` is then known to within an eighth of itself."""


def rank_text(rank, width):
    """``r*_attn`` as printed: the rank, or ``"> w-1"`` when only the full width ``w`` reached.

    Examples
    --------
    >>> rank_text(12, 64), rank_text(None, 64)
    ('12', '> 63')
    """
    return f"> {width - 1}" if rank is None else str(int(rank))


def _biased(facts):
    """Whether the head has biases (or its norm over the whole layer reads some)."""
    return any(np.any(np.asarray(b) != 0) for b in (facts.b_q, facts.b_k, facts.b_v)) or \
        _biased_norms(facts)


def query_rows(facts):
    """``w_q`` as the students hold it: with ``b_q`` as one more row for a head with biases.

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_facts
    >>> query_rows(head_facts("default", 1, 0)).shape  # the embedded model has biases
    (65, 16)
    """
    w_q = np.asarray(facts.w_q, dtype=np.float64)
    if _biased(facts):
        return np.vstack([w_q, np.asarray(facts.b_q, dtype=np.float64)[None, :]])
    return w_q


def _biased_norms(facts):
    """A norm over the whole layer reads the layer's biases too: a column of ones for them."""
    return any(norm is not None and norm.layer_w is not None and np.any(norm.layer_b != 0)
               for norm in (facts.q_norm, facts.k_norm))


def _with_bias_column(X, facts):
    """``X`` and the head's maps with a constant 1 appended where the head has biases.

    ``[x, 1] [W; b] = x W + b``: the biases become one more row of each map (and of
    the layer's projection a norm over the whole layer reads), and a student
    without biases contains the head exactly.
    """
    maps = {"query": facts.w_q, "key": facts.w_k, "value": facts.w_v,
            "query_norm": facts.q_norm, "key_norm": facts.k_norm}
    if not _biased(facts):
        return X, maps
    ones = np.ones(X.shape[:-1] + (1,), dtype=X.dtype)
    X = np.concatenate([X, ones], axis=-1)
    maps = {name: np.vstack([maps[name], b[None, :]]) for name, b in
            zip(("query", "key", "value"), (facts.b_q, facts.b_k, facts.b_v))}
    maps.update({name: None if norm is None else norm.with_bias_row() for name, norm in
                 (("query_norm", facts.q_norm), ("key_norm", facts.k_norm))})
    return X, maps


def _student(facts, maps, ranks, restarts, random_state):
    """The student of a head: every step of the head (its frequencies, none for absolute
    positions; its norms, scale, soft-capping and window) with its keys and values."""
    inv_freq = (np.asarray(facts.inv_freq) if facts.positional == "rope"
                else np.zeros(facts.head_dim // 2))
    return RotarySoftmaxStudent(
        d=maps["query"].shape[0], d_out=facts.head_dim, ranks=ranks, restarts=restarts,
        head_dim=facts.head_dim, score_scale=facts.scale, causal=facts.causal,
        value_map=maps["value"], key_map=maps["key"], inv_freq=inv_freq,
        rope_scaling=facts.rope_scaling, query_norm=maps["query_norm"],
        key_norm=maps["key_norm"], softcap=facts.softcap, window=facts.window,
        random_state=random_state)


def _train_ranks(ranks, facts, fit, heldout, basis, *, restarts, training, random_state,
                 device):
    """Distil every rank of ``ranks`` (plus its random restarts) in one batched run."""
    X_fit, maps = _with_bias_column(fit[0], facts)
    X_held, _ = _with_bias_column(heldout[0], facts)
    slot_ranks = [r for r in ranks for _ in range(restarts + 1)]
    slot_restarts = [i for _ in ranks for i in range(restarts + 1)]
    student = _student(facts, maps, slot_ranks, slot_restarts, random_state)
    warm = [s for s, i in enumerate(slot_restarts) if i == 0]
    # the basis of the realised queries, with the bias column's row where there is one
    student.start_from(maps["query"], basis=basis, slots=warm)
    run = distill_slots(student, X_fit, fit[1], X_held, heldout[1], random_state=random_state,
                        device=device, **training)
    out, factors = {}, {}
    for slot, (r, i) in enumerate(zip(slot_ranks, slot_restarts)):
        if i == 0:  # the data-aware start: its risk before and after training
            out[r] = dict(start=float(run.start[slot]), warm_risk=float(run.best[slot]))
        if i == 0 or run.best[slot] < out[r]["risk"]:  # restart 0 comes first
            out[r].update(risk=float(run.best[slot]), best_epoch=int(run.best_epoch[slot]),
                          epochs=int(run.epochs[slot]), converged=bool(run.converged[slot]),
                          restart=i)
            factors[r] = (student.query_in[slot, :, :r].detach().cpu().numpy().copy(),
                          student.query_out[slot, :, :r].T.detach().cpu().numpy().copy())
    return out, factors, run.seconds


def _answers(free, trained, tolerances, width):
    """``r*_attn(tol)`` for each tolerance from the per-rank risks (1-based ranks)."""
    risk = {r: min(free[r - 1], trained[r]["risk"]) if r in trained else free[r - 1]
            for r in range(1, width + 1)}
    answers = {}
    for tol in tolerances:
        reaching = [r for r in range(1, width) if risk[r] <= tol]
        answers[tol] = reaching[0] if reaching else None
    return risk, answers


def _lower_bound(risk, trained, tol, upper, eligible):
    """The largest rank below ``upper`` known to fail ``tol``: trained and short, or never
    eligible for training (its truncation too far from ``tol``); 0 when there is none."""
    failing = [r for r in range(1, upper) if (r in trained and risk[r] > tol)
               or not eligible(r, tol)]
    return max(failing, default=0)


def _brackets(free, trained, tolerances, width, eligible):
    """The untrained eligible ranks inside each tolerance's bracket, for the next round.

    A bracket narrower than ``RESOLUTION`` of its upper end (at least one rank) is
    resolved: the answer is then known to within an eighth of itself.
    """
    risk, answers = _answers(free, trained, tolerances, width)
    todo = set()
    for tol in tolerances:
        upper = answers[tol] or width
        lower = _lower_bound(risk, trained, tol, upper, eligible)
        if upper - lower <= max(1, math.ceil(RESOLUTION * upper)):
            continue
        todo.update(r for r in refinement_ranks(lower, upper)
                    if r not in trained and eligible(r, tol))
    return sorted(todo)


def measure_head(facts, fit, heldout, *, tolerances=TOLERANCES, distill="auto",
                 margin=DISTILL_MARGIN, restarts=0, training=None, precision_draws=3,
                 random_state=0, device="cpu", keep_weights=None):
    """``r*_attn(tol)`` of one head: the training-free curve, then distillation where it helps.

    Parameters
    ----------
    facts : HeadFacts
        The head (or a head with a planted query).
    fit, heldout : tuple of (X, Y)
        Training and held-out inputs of the head's layer, ``(n, L, d_model)``, and
        the head's outputs, ``(n, L, head_dim)``. The truncation basis and the
        students see only ``fit``; every reported risk is on ``heldout``.
    tolerances : sequence of float, default=TOLERANCES
        Each in ``(0, 1)``.
    distill : {"auto", "all", "none"}, default="auto"
        Where training is tried (``_head_settings.DISTILL_MODES``); ``"auto"``
        also leaves out the tolerances finer than the head's precision floor.
    margin : float, default=10.0
        The rule of ``"auto"``: ranks whose truncation is within ``margin * tol``.
    restarts : int, default=0
        Random starts per trained rank besides the data-aware one; the best per
        rank is kept.
    training : dict or None, default=None
        Overrides of the distillation's defaults,
        ``experiments.entropic.HEAD_RANK_TRAINING`` (``lr``,
        ``batch_size``, ``max_epochs``, ``patience``, ``min_fall``).
    precision_draws : int, default=3
        Draws of :func:`~intrinsic_rank.inspection.precision_floor`; 0 skips it.
    random_state : int, default=0
    device : str, default="cpu"
    keep_weights : dict or None, default=None
        When given, filled with rank -> ``(A, C)``, the trained factors of the
        query projection of each trained rank (``A @ C`` of shape ``(d_model,
        head_dim)``, one more row, the bias, for a head with biases).

    Returns
    -------
    record : dict
        ``tolerances`` (sorted), ``width`` (the head's query rank limit),
        ``free_risks`` (the training-free curve at ranks ``1 .. width``),
        ``risks`` (per rank, the best of training and truncation), ``trained``
        (per trained rank, keyed by the rank as a string: its ``risk``, its
        data-aware ``start`` and what training made of it, ``warm_risk``, the
        ``restart`` that won (0: the data-aware start), its ``best_epoch``,
        ``epochs`` and whether it ``converged``), ``rounds``; per tolerance, in the
        order of ``tolerances``: ``r_star`` and ``r_star_free`` (the rank, or
        ``None`` when no rank below the width reaches it), ``r_star_text``,
        ``r_star_lower`` (the largest rank known to fail: the answer lies above
        it), ``distilled`` (whether training was tried for it),
        ``below_precision`` (whether the tolerance is finer than the head's
        precision floor) and ``energy_rank`` (the ranks holding all but ``tol``
        of the query energy on the training inputs); ``query_energy`` (the
        share of that energy the first ``r`` directions hold, ``r = 1 ..
        width``), ``precision_floor``, ``fit_seconds`` and ``seconds``.

    Raises
    ------
    ValueError
        For a head whose held-out output is constant (its spread at most
        1e-5 of its size): a relative risk has
        nothing to divide by, and such a head has no ``r*_attn``.

    Examples
    --------
    >>> from intrinsic_rank.inspection import head_activations
    >>> ids = np.random.default_rng(0).integers(0, 64, (24, 12))
    >>> data = head_activations("default", ids, ["L1H0"])[1, 0]
    >>> fit, held = (data.X[:18], data.Y[:18]), (data.X[18:], data.Y[18:])
    >>> rec = measure_head(data.facts, fit, held, tolerances=(0.05,), distill="none",
    ...                    precision_draws=0)
    >>> rec["width"], rec["r_star"] == rec["r_star_free"]
    (16, True)
    """
    options = measure_options(tolerances, distill, margin, restarts, training, precision_draws)
    spread = output_spread(heldout[1])
    if spread <= CONSTANT_OUTPUT:
        raise ValueError(f"{facts.name}: its held-out output is constant (spread {spread:.2g} "
                         f"of its size, at most {CONSTANT_OUTPUT:g}): a relative risk has "
                         "nothing to divide by, so it has no r*_attn")
    return _measure_checked(facts, fit, heldout, options, random_state=random_state,
                            device=device, keep_weights=keep_weights)


def _measure_checked(facts, fit, heldout, options, *, random_state=0, device="cpu",
                     keep_weights=None):
    """:func:`measure_head` with options already checked (:func:`measure_options`).

    What the map calls for each head: its settings were checked once, where they
    entered (:func:`~._head_settings.head_rank_settings`).

    Parameters
    ----------
    facts : HeadFacts
    fit, heldout : tuple of (X, Y)
    options : dict
        ``tolerances``, ``distill``, ``margin``, ``restarts``, ``training`` and
        ``precision_draws``, as :func:`~._head_settings.measure_options` returns them.
    random_state : int, default=0
    device : str, default="cpu"
    keep_weights : dict or None, default=None

    Returns
    -------
    record : dict
        As :func:`measure_head`'s.
    """
    start = time.perf_counter()
    tolerances = tuple(options["tolerances"])
    distill, margin = options["distill"], options["margin"]
    restarts, training = options["restarts"], options["training"]
    precision_draws = options["precision_draws"]
    width = min(facts.d_model, facts.head_dim)
    basis, values = query_basis(fit[0], facts)
    free = np.append(truncation_risks(heldout[0], heldout[1], facts, basis,
                                      range(1, width)), 0.0)
    _, answers_free = _answers(free, {}, tolerances, width)
    floor = (precision_floor(heldout[0], facts, n_draws=precision_draws,
                             random_state=random_state) if precision_draws else None)
    # "auto" distils where training can change an answer the weights can hold: a
    # tolerance finer than the head's precision floor keeps its training-free bound
    distilled = {tol: distill == "all" or (distill == "auto" and (floor is None or tol >= floor))
                 for tol in tolerances}

    def eligible(r, tol):
        if not distilled[tol] or (answers_free[tol] or width) <= r:
            return False
        return distill == "all" or free[r - 1] <= margin * tol

    trained, rounds, fit_seconds = {}, [], 0.0
    todo = sorted({r for r in _powers(width) for tol in tolerances if eligible(r, tol)})
    while todo:
        rounds.append(todo)
        result, factors, seconds = _train_ranks(todo, facts, fit, heldout, basis,
                                                restarts=restarts, training=training,
                                                random_state=random_state, device=device)
        trained.update(result)
        if keep_weights is not None:
            keep_weights.update(factors)
        fit_seconds += seconds
        todo = _brackets(free, trained, tolerances, width, eligible)
    risk, answers = _answers(free, trained, tolerances, width)
    lower = [_lower_bound(risk, trained, tol, answers[tol] or width, eligible)
             for tol in tolerances]
    energy = np.cumsum(values ** 2) / max(float(np.sum(values ** 2)), np.finfo(float).tiny)
    return dict(
        tolerances=list(tolerances), width=int(width), free_risks=[float(v) for v in free],
        risks=[float(risk[r]) for r in range(1, width + 1)],
        trained={str(r): v for r, v in sorted(trained.items())}, rounds=rounds,
        r_star=[answers[tol] for tol in tolerances],
        r_star_free=[answers_free[tol] for tol in tolerances],
        r_star_text=[rank_text(answers[tol], width) for tol in tolerances],
        r_star_lower=lower, distilled=[distilled[tol] for tol in tolerances],
        precision_floor=floor,
        below_precision=[None if floor is None else bool(tol < floor) for tol in tolerances],
        energy_rank=[energy_rank(energy, tol) for tol in tolerances],
        query_energy=[float(v) for v in energy[:width]],
        fit_seconds=fit_seconds, seconds=time.perf_counter() - start)


def energy_rank(cumulative, tol):
    """The smallest rank whose share of the query energy is at least ``1 - tol``.

    Parameters
    ----------
    cumulative : sequence of float
        The share held by the first ``r`` directions, ``r = 1, 2, ...``.
    tol : float

    Returns
    -------
    rank : int

    Examples
    --------
    >>> energy_rank([0.5, 0.9, 0.99, 1.0], 0.05)
    3
    """
    cumulative = np.asarray(cumulative, dtype=float)
    return int(min(len(cumulative), np.searchsorted(cumulative, 1.0 - tol - 1e-12) + 1))


def _powers(width):
    """``1, 2, 4, ...`` below ``width``."""
    return [2 ** i for i in range(int(math.log2(width)) + 1) if 2 ** i < width]
