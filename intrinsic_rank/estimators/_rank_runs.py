"""The batched training runs of :class:`~intrinsic_rank.AttentionRankEstimator`, and their restarts.

A run is one skorch :class:`~._net.RankSweepNet` that trains every rank of a list at
once (:func:`train_run`). A fit makes one run (a rank, or an explicit grid), or several
(``rank_grid="auto"``: :func:`adaptive_runs`; ``attention="auto"``: a full-rank run per
class), whose trained slots :func:`merged_net` gathers into one net over all their ranks.
:func:`run_history` joins the runs' per-epoch records in the units of the data.

**Restarts** (``n_init``). A student is a non-convex fit: from an unlucky initialisation
it can stop in a poor basin (a rank-3 linear-attention student of a rank-2 teacher
explaining 44% of ``Y`` on one fold and 99.7% on the others). With ``n_init > 1`` every
rank trains ``n_init`` slots in the same batched run, restart ``i`` of rank ``r`` drawn
from ``(seed, r, i)`` (:class:`~intrinsic_rank.nn.RankBatchedStudent`'s ``restarts``;
restart 0 is the draw of ``n_init=1``), and the slot with the lowest training risk is
kept, as :class:`sklearn.cluster.KMeans` keeps its best initialisation. When the
restarts of the rank finally selected end further apart than the selection's tolerance,
the fit depends on its initialisation and says so (:func:`restart_warning`).
"""

import math

import numpy as np
import torch

from .._validation import check_allocation
from ..nn import RotarySoftmaxStudent
from ._attention_params import SEQUENCE_CLASSES
from ._callbacks import (
    DivergenceCheck,
    FitProgress,
    PlateauStopping,
    RankwiseEpochLoss,
    user_callbacks,
)
from ._net import (RankSweepNet, RankwiseMSELoss, TensorBatchIterator, rankwise_risks,
                   release_freed_memory)
from ._selection import adaptive_rank_search

__all__ = ["EVALUATION_OUTPUTS", "PROBE_FRACTION", "adaptive_runs", "best_restarts", "build_net",
           "copy_slots", "evaluation_rows", "gather_restart_risks", "kept_history",
           "last_epoch_losses", "merged_net", "restart_slots", "restart_warning",
           "restarts_needed", "run_history", "stalled_slots", "train_run"]


def _feature_map(estimator):
    """The kernel student's feature map option (``{}`` when not given)."""
    return {} if estimator.feature_map is None else {"feature_map": estimator.feature_map}


def _sequence_options(estimator, data, attention):
    """The student arguments of ``causal``, ``positional`` and ``value_map``, in training units.

    A known value map acts on ``X`` and produces ``Y``: trained on ``X * x_scale``
    against ``Y * y_scale``, it becomes ``W_V * y_scale / x_scale`` (powers of two,
    exact).
    """
    options = {}
    if attention not in SEQUENCE_CLASSES:
        return options
    rotary = estimator._student_class(attention) is RotarySoftmaxStudent
    if estimator.causal or rotary:
        options["causal"] = bool(estimator.causal)
    if rotary:
        options["rope_theta"] = float(estimator.rope_theta)
    if data.value_map is not None:
        value_map = data.value_map
        expected = (estimator.token_dim_, estimator.d_out_)
        if value_map.shape != expected:
            raise ValueError(f"value_map must have shape (d, d_out) = {expected} for these "
                             f"data; got {value_map.shape}")
        options["value_map"] = value_map * (data.y_scale / data.x_scale)
    return options


def build_net(estimator, ranks, data, attention, extra_callbacks=(), restarts=None,
              max_epochs=None, spare=False, probe=False):
    """The net of one batched run over ``ranks``: the estimator's callbacks, then the user's.

    Parameters
    ----------
    estimator : AttentionRankEstimator
        During ``fit`` (the data's sizes set).
    ranks : list of int
    data : Bunch
        :func:`~._training_data.training_data` (seed, device, sizes, divergence limit)
        with the fit's resolved settings (``compute_dtype``, ``optimizer``,
        ``callbacks``, ``value_map``, ...).
    attention : str
        The class of the students.
    extra_callbacks : sequence of (name, callback), default=()
        Rules of this run (the plateau rule of ``early_stopping``).
    restarts : list of int or None, default=None
        The restart index of each slot (``n_init``); None: every slot is restart 0.
    max_epochs : int or None, default=None
        The run's epochs; None: the estimator's ``max_epochs``.
    spare : bool, default=False
        The slots are spare restarts (``n_init="auto"``): one that diverges is left
        behind, never an error (:class:`~._callbacks.DivergenceCheck`).
    probe : bool, default=False
        A probe of ``n_init="auto"``, which only decides whether a rank needs a second
        restart: the user's callbacks (a ``Checkpoint``) do not run on it.

    Returns
    -------
    net : RankSweepNet
        Not initialised.
    """
    divergence = DivergenceCheck(data.limit, restarts=restarts is not None, spare=spare)
    callbacks = [("rankwise_loss", RankwiseEpochLoss()), ("divergence", divergence),
                 *extra_callbacks]
    if estimator.verbose == 1:
        callbacks.append(("progress", FitProgress(postfix={"summed_loss": "train_loss"})))
    if not probe:
        callbacks.extend(user_callbacks(data.callbacks))
    # student_options cannot hold the keys the estimator sets (RESERVED_STUDENT_OPTIONS)
    options = {**(estimator.student_options or {}), **_feature_map(estimator),
               **_sequence_options(estimator, data, attention)}
    if restarts is not None:
        options["restarts"] = restarts
    batch_size = estimator._batch_size(len(data.X_train))
    return RankSweepNet(
        module=estimator._student_class(attention),
        module__d=estimator.token_dim_,
        module__d_out=estimator.d_out_,
        module__ranks=ranks,
        module__seq_len=estimator.seq_len_,
        module__init_scale=estimator.init_scale,
        module__random_state=data.seed,
        module__final_only=estimator.target_ == "final",
        **{f"module__{key}": value for key, value in options.items()},
        criterion=RankwiseMSELoss,
        criterion__reuse_residual=True,  # each step's graph is backpropagated once
        optimizer=data.optimizer,
        optimizer__weight_decay=estimator.weight_decay,
        lr=estimator.lr,
        max_epochs=estimator.max_epochs if max_epochs is None else max_epochs,
        batch_size=batch_size,
        train_split=None,
        iterator_train=TensorBatchIterator,
        iterator_train__shuffle=True,
        iterator_train__seed=data.seed,
        iterator_valid=TensorBatchIterator,
        iterator_valid__batch_size=evaluation_rows(len(ranks), estimator.seq_len_,
                                                   estimator.d_out_, batch_size),
        callbacks=callbacks,
        verbose=int(estimator.verbose >= 2),
        device=data.device,
        compute_dtype=data.compute_dtype,
    )


EVALUATION_OUTPUTS = 2**20
"""Outputs (float32 entries, 4 MiB) a batch of an evaluation holds at most: every risk,
prediction and kernel a fit evaluates goes through the net in batches of
:func:`evaluation_rows` sequences, in one pass and in chunks alike."""


def evaluation_rows(n_slots, seq_len, d_out, batch_size):
    """Sequences per evaluation batch: the training batch, or fewer where its outputs of
    every slot would exceed :data:`EVALUATION_OUTPUTS` (at least 8).

    Examples
    --------
    >>> evaluation_rows(3, 8, 6, 64), evaluation_rows(13, 32, 64, 256)
    (64, 39)
    """
    per_row = max(1, int(n_slots) * int(seq_len) * int(d_out))
    return int(min(batch_size, max(8, EVALUATION_OUTPUTS // per_row)))


def train_run(estimator, ranks, data, attention):
    """Train one batched net over ``ranks`` on the training part (one round of a search).

    With ``n_init > 1`` every rank trains ``n_init`` restarts in the same run, and the
    one with the lowest training risk is the rank's. With ``n_init="auto"`` a rank
    trains a second restart only where its first needs one (:func:`restarts_needed`).
    With ``init_weights`` every slot starts from the teacher's truncation instead of a
    random draw.

    Parameters
    ----------
    estimator : AttentionRankEstimator
    ranks : list of int
    data : Bunch
    attention : str

    Returns
    -------
    net : RankSweepNet
        Trained, with ``run_ranks_`` (``ranks``), ``kept_slots_`` (the slot of each
        rank: its own for ``n_init=1`` and ``"auto"``, its best restart's otherwise),
        ``restart_risks_`` (``(R, n_init)`` training risks in the units of ``Y``, NaN
        for a restart not trained; None when every rank trained once) and
        ``restart_record_`` (``"auto"`` only: ``probe_epochs`` and the ``restarted``
        ranks).
    """
    n_init = data.n_init
    if n_init == "auto":
        return _restarts_where_needed(estimator, ranks, data, attention)
    if n_init == 1:
        net = _fit(estimator, ranks, data, attention)
        net.run_ranks_, net.kept_slots_, net.restart_risks_ = list(ranks), list(
            range(len(ranks))), None
        return net
    # a lower bound of the slots' parameters, checked before the slot lists are built
    n_slots = len(ranks) * n_init
    check_allocation(4 * n_slots * max(ranks) * min(estimator.token_dim_, estimator.seq_len_),
                     "n_init", f"{n_init} restarts of {len(ranks)} rank(s)")
    slots, restarts = restart_slots(ranks, n_init)
    net = _fit(estimator, slots, data, attention, restarts)
    best, net.restart_risks_ = best_restarts(_training_risks(net, data), n_init)
    net.run_ranks_ = list(ranks)
    net.kept_slots_ = [i * n_init + int(b) for i, b in enumerate(best)]
    return net


PROBE_FRACTION = 0.2
"""The share of the first run's epochs a probe restart trains (``n_init="auto"``)."""


def _training_risks(net, data):
    """Training risk of every slot of a run, in the units of ``Y`` (``inf`` if not finite)."""
    values, _ = rankwise_risks(net, data.X_train, data.Y_train)
    values = np.asarray(values, dtype=float) / data.y_scale**2
    return np.where(np.isfinite(values), values, np.inf)


def restarts_needed(ranks, first, probe, tolerance, stalled=None):
    """The ranks whose first restart stopped in a poorer basin: they train a second one.

    A rank needs a restart when a short probe of its second restart already ends below
    the first's final training risk by more than ``tolerance``, or when its first has
    stalled above a smaller rank's by more than ``tolerance``: a rank-``r`` student can
    represent every smaller rank's solution, so it stopping worse is an optimisation
    failure, not the task. A first restart whose loss is still falling is not compared
    with the smaller ranks (short training leaves the larger ranks behind for a while).

    Parameters
    ----------
    ranks : sequence of int
        Ascending.
    first : array-like of shape (R,)
        The first restarts' final training risks.
    probe : array-like of shape (R,)
        The probes' training risks (``inf`` for one that diverged).
    tolerance : float
        ``tol`` times the variance of the training targets.
    stalled : array-like of bool, shape (R,), or None, default=None
        Whether each first restart's loss had stopped falling (:func:`stalled_slots`);
        None: all had.

    Returns
    -------
    needed : list of int
        Indices into ``ranks``.

    Examples
    --------
    >>> restarts_needed([1, 2, 3], [0.5, 0.01, 0.2], [0.6, 0.3, 0.3], 0.02)  # rank 3 > rank 2
    [2]
    >>> restarts_needed([1, 2, 3], [0.5, 0.01, 0.2], [0.6, 0.3, 0.3], 0.02,
    ...                 stalled=[True, True, False])  # rank 3 is still learning
    []
    >>> restarts_needed([3], [0.53], [0.08], 0.02)  # the probe beat the first already
    [0]
    """
    first, probe = np.asarray(first, dtype=float), np.asarray(probe, dtype=float)
    stalled = np.ones(len(first), dtype=bool) if stalled is None else np.asarray(stalled)
    best_below = np.minimum.accumulate(np.concatenate([[np.inf], first[:-1]]))
    worse_than_smaller = stalled & (first > best_below + tolerance)
    probe_beats_it = probe < first - tolerance
    return [i for i in range(len(ranks)) if worse_than_smaller[i] or probe_beats_it[i]]


def stalled_slots(net, tolerance, y_scale=1.0):
    """Whether each slot's training loss had stopped falling when its run ended.

    A slot has stalled when its epoch loss fell by at most ``tolerance`` over the last
    tenth of the run's epochs (at least one); after a single epoch nothing is known and
    no slot counts as stalled.

    Parameters
    ----------
    net : RankSweepNet
        A trained run (its history's ``train_loss_per_rank``, in training units).
    tolerance : float
        In the units of ``Y``.
    y_scale : float, default=1.0

    Returns
    -------
    stalled : ndarray of bool, shape (R,)

    Examples
    --------
    >>> from types import SimpleNamespace as Run
    >>> run = Run(history=[{"train_loss_per_rank": [1.0, 1.0]},
    ...                    {"train_loss_per_rank": [0.5, 0.99]}], module_=Run(ranks=(1, 2)))
    >>> stalled_slots(run, 0.02).tolist()
    [False, True]
    """
    losses = np.array([row["train_loss_per_rank"] for row in _whole_epochs(net)],
                      dtype=float) / y_scale**2
    window = max(1, math.ceil(0.1 * len(losses)))
    if len(losses) <= window:
        return np.zeros(len(net.module_.ranks), dtype=bool)
    return ~(losses[-1 - window] - losses[-1] > tolerance)


def _whole_epochs(net):
    """The run's epochs that ended (a run stopped inside an epoch leaves one without its
    per-rank loss: every spare restart diverged)."""
    return [row for row in net.history if "train_loss_per_rank" in row]


def last_epoch_losses(net, y_scale=1.0):
    """Each slot's mean training loss over the run's last whole epoch, in the units of ``Y``.

    ``inf`` for a slot whose loss is not finite, and for every slot of a run that ended
    no epoch.

    Examples
    --------
    >>> from types import SimpleNamespace as Run
    >>> run = Run(history=[{"train_loss_per_rank": [0.5, 0.2]},
    ...                    {"train_loss_per_rank": [0.4, float("nan")]}, {"batches": []}],
    ...           module_=Run(ranks=(1, 2)))
    >>> last_epoch_losses(run).tolist()
    [0.4, inf]
    """
    epochs = _whole_epochs(net)
    if not epochs:
        return np.full(len(net.module_.ranks), np.inf)
    losses = np.asarray(epochs[-1]["train_loss_per_rank"], dtype=float) / y_scale**2
    return np.where(np.isfinite(losses), losses, np.inf)


def _restarts_where_needed(estimator, ranks, data, attention):
    """``n_init="auto"``: every rank once, a short probe of a second restart, and a whole
    second restart of the ranks that need one (:func:`restarts_needed`), kept where it
    ends lower. Every run holds one slot per rank, so the memory is ``n_init=1``'s.

    The decision reads the runs' last-epoch losses (no evaluation pass); only when a rank
    restarts are the two restarts' training risks evaluated, to keep the lower."""
    R = len(ranks)
    net = _fit(estimator, ranks, data, attention)
    probe_epochs = max(1, math.ceil(PROBE_FRACTION * len(net.history)))
    probe = _fit(estimator, ranks, data, attention, [1] * R, max_epochs=probe_epochs,
                 spare=True, probe=True)
    needed = restarts_needed(ranks, last_epoch_losses(net, data.y_scale),
                             last_epoch_losses(probe, data.y_scale), data.restart_tolerance,
                             stalled_slots(net, data.restart_tolerance, data.y_scale))
    del probe
    net.run_ranks_, net.kept_slots_, net.restart_risks_ = list(ranks), list(range(R)), None
    net.restart_record_ = {"probe_epochs": probe_epochs,
                           "restarted": [int(ranks[i]) for i in needed]}
    if not needed:
        return net
    second = _fit(estimator, [ranks[i] for i in needed], data, attention, [1] * len(needed),
                  spare=True)
    risks = np.column_stack([_training_risks(net, data), np.full(R, np.nan)])
    risks[needed, 1] = _training_risks(second, data)
    kept = [(j, i) for j, i in enumerate(needed) if risks[i, 1] < risks[i, 0]]
    copy_slots(second.module_, net.module_, kept)  # the second restart where it won
    replaced = {i for _, i in kept}
    net.module_.restarts = tuple(int(i in replaced) for i in range(R))
    net.restart_risks_ = risks
    return net


def _fit(estimator, ranks, data, attention, restarts=None, max_epochs=None, spare=False,
         probe=False):
    """Train one net over ``ranks`` (slots), from random draws or the teacher's weights
    (a probe: without the plateau rule and the user's callbacks)."""
    callbacks = []
    if data.patience is not None and not probe:
        callbacks.append(("plateau", PlateauStopping(data.X_held, data.Y_held, data.patience,
                                                     data.min_delta)))
    net = build_net(estimator, ranks, data, attention, extra_callbacks=callbacks,
                    restarts=restarts, max_epochs=max_epochs, spare=spare, probe=probe)
    release_freed_memory()  # what the previous run's evaluations freed
    if data.init_weights is None:
        net.fit(data.X_train, data.Y_train)
        return net
    # a warm start: skorch's fit is initialize() then partial_fit()
    net.initialize()
    weights = data.init_weights
    # scores of tokens scaled by x_scale: each projection divided by it
    net.module_.start_from(weights["query"] / data.x_scale, weights["key"] / data.x_scale)
    net.partial_fit(data.X_train, data.Y_train)
    return net


def heldout_risks(net, data):
    """Held-out risk of every rank of a run (its kept slot), in the units of ``Y``.

    A risk that is not finite is ``inf``.
    """
    values, _ = rankwise_risks(net, data.X_held, data.Y_held)
    return [float(values[s]) / data.y_scale**2 if np.isfinite(values[s]) else np.inf
            for s in net.kept_slots_]


def adaptive_runs(estimator, coarse, data, attention):
    """``rank_grid="auto"``: a coarse batched grid, then batched bisection of the bracket.

    Parameters
    ----------
    estimator : AttentionRankEstimator
    coarse : list of int
        The coarse grid (:func:`~._selection.coarse_rank_grid`).
    data : Bunch
    attention : str

    Returns
    -------
    nets : list of RankSweepNet
        The net of every round, in order.
    ranks : list of int
        Every rank trained, sorted.
    """
    nets = []

    def evaluate(ranks):
        nets.append(train_run(estimator, ranks, data, attention))
        return heldout_risks(nets[-1], data)

    adaptive_rank_search(coarse, evaluate, data.variance, estimator.tol, estimator.noise_floor)
    return nets, sorted({r for net in nets for r in net.run_ranks_})


def merged_net(estimator, nets, ranks, data, attention):
    """One initialised net over the union of the runs' ranks, with their kept slots.

    Parameters
    ----------
    estimator : AttentionRankEstimator
    nets : list of RankSweepNet
        Trained runs; each rank of ``ranks`` is a slot of one of them.
    ranks : list of int
    data : Bunch
    attention : str

    Returns
    -------
    net : RankSweepNet
    """
    net = build_net(estimator, ranks, data, attention)
    net.initialize()
    slot_of = {r: i for i, r in enumerate(ranks)}
    for part in nets:
        copy_slots(part.module_, net.module_,
                   [(s, slot_of[r]) for r, s in zip(part.run_ranks_, part.kept_slots_)])
    net.run_ranks_, net.kept_slots_ = list(ranks), list(range(len(ranks)))
    return net


def copy_slots(source, target, pairs):
    """Copy trained slots between batched students: ``(source slot, target slot)`` pairs.

    A factor's rank axis may be shorter in ``source`` (a run of smaller ranks): the
    target slot is zeroed first, so the columns beyond the source's width stay masked.
    """
    with torch.no_grad():
        for name, _shape, _init, _fan_in, ranked in source._initializers:
            values, into = getattr(source, name), getattr(target, name)
            for i, j in pairs:
                if ranked:
                    into[j].zero_()
                    into[j][..., :values.shape[-1]] = values[i]
                else:
                    into[j] = values[i]


def run_history(nets, y_scale):
    """The runs' per-epoch records in order, in the units of ``Y``.

    Parameters
    ----------
    nets : list of RankSweepNet
    y_scale : float
        The power of two ``Y`` was trained in units of.

    Returns
    -------
    history : list of dict
        ``epoch``, ``train_loss``, ``train_loss_per_rank``, ``dur``, with
        ``heldout_risk_per_rank`` under ``early_stopping``, and ``round`` and ``ranks``
        when there are several runs; the per-rank entries are the kept slots' (and
        ``train_loss`` their sum) when the runs trained restarts.
    """
    keys = ("epoch", "train_loss", "train_loss_per_rank", "dur")
    history = []
    for i, net in enumerate(nets):
        rows = net.history
        if len(net.kept_slots_) != len(net.module_.ranks):  # n_init > 1
            rows = kept_history(rows, net.kept_slots_)
        for row in rows:
            entry = {key: row[key] for key in keys}
            if "heldout_risk_per_rank" in row:
                entry["heldout_risk_per_rank"] = [
                    v / y_scale**2 for v in row["heldout_risk_per_rank"]]
            if len(nets) > 1:
                entry["round"] = i
                entry["ranks"] = list(net.run_ranks_)
            history.append(entry)
    if y_scale != 1.0:
        for row in history:
            row["train_loss"] = row["train_loss"] / y_scale**2
            row["train_loss_per_rank"] = [v / y_scale**2 for v in row["train_loss_per_rank"]]
    return history


def restart_slots(ranks, n_init):
    """The slots of a run with restarts: each rank ``n_init`` times, and the restart indices.

    Examples
    --------
    >>> restart_slots([2, 5], 3)
    ([2, 2, 2, 5, 5, 5], [0, 1, 2, 0, 1, 2])
    """
    return ([r for r in ranks for _ in range(n_init)],
            [i for _ in ranks for i in range(n_init)])


def best_restarts(risks, n_init):
    """The restart of each rank with the lowest training risk.

    Parameters
    ----------
    risks : array-like of shape (R * n_init,)
        Training risk of every slot, rank-major (:func:`restart_slots`); a non-finite
        risk counts as ``inf``.
    n_init : int

    Returns
    -------
    best : ndarray of int, shape (R,)
        The kept restart of each rank (the lowest index among equal risks).
    risks : ndarray of shape (R, n_init)

    Examples
    --------
    >>> best, risks = best_restarts([0.5, 0.1, 0.1, float("nan"), 2.0, 3.0], 3)
    >>> best.tolist(), risks[1].tolist()
    ([1, 1], [inf, 2.0, 3.0])
    """
    risks = np.asarray(risks, dtype=float)
    risks = np.where(np.isfinite(risks), risks, np.inf).reshape(-1, n_init)
    return np.argmin(risks, axis=1), risks


def kept_history(history, slots):
    """A run's per-epoch records with the per-slot entries of the kept slots only.

    Parameters
    ----------
    history : skorch.history.History or list of dict
        The history of a run with restarts.
    slots : sequence of int
        The kept slot of each rank.

    Returns
    -------
    rows : list of dict
        Every epoch's ``train_loss_per_rank`` and ``heldout_risk_per_rank`` reduced to
        ``slots``, and ``train_loss`` their sum, as for a run of those slots alone (the
        per-batch records are left out).

    Examples
    --------
    >>> kept_history([{"train_loss": 6.0, "train_loss_per_rank": [1.0, 2.0, 3.0]}], [2])
    [{'train_loss': 3.0, 'train_loss_per_rank': [3.0]}]
    """
    rows = []
    for row in history:
        row = {key: value for key, value in row.items() if key != "batches"}
        if "train_loss_per_rank" in row:
            row["train_loss_per_rank"] = [row["train_loss_per_rank"][s] for s in slots]
            row["train_loss"] = float(np.sum(row["train_loss_per_rank"]))
        if "heldout_risk_per_rank" in row:
            row["heldout_risk_per_rank"] = [row["heldout_risk_per_rank"][s] for s in slots]
        rows.append(row)
    return rows


def gather_restart_risks(nets, ranks, kept_risks):
    """The training risks of every restart of ``ranks``, ``(R, n_init)``, from their runs.

    Parameters
    ----------
    nets : list of RankSweepNet
        The runs (``run_ranks_``, ``restart_risks_``: None for a run that trained each
        rank once).
    ranks : sequence of int
    kept_risks : array-like of shape (R,)
        The fitted students' training risks: the one restart of a rank trained once.

    Returns
    -------
    risks : ndarray of shape (R, n_init)
        ``n_init`` the most restarts any rank trained; NaN where a rank trained fewer.

    Examples
    --------
    >>> from types import SimpleNamespace as Run
    >>> runs = [Run(run_ranks_=[1, 2], restart_risks_=None),
    ...         Run(run_ranks_=[3], restart_risks_=np.array([[0.4, 0.05]]))]
    >>> gather_restart_risks(runs, [1, 3], [0.5, 0.05]).tolist()
    [[0.5, nan], [0.4, 0.05]]
    """
    by_rank = {r: row for net in nets if net.restart_risks_ is not None
               for r, row in zip(net.run_ranks_, net.restart_risks_)}
    rows = [np.asarray(by_rank.get(int(r), [kept]), dtype=float)
            for r, kept in zip(ranks, kept_risks)]
    width = max(len(row) for row in rows)
    return np.array([np.pad(row, (0, width - len(row)), constant_values=np.nan)
                     for row in rows])


def restart_warning(rank, risks, threshold):
    """The warning when the restarts of the selected rank disagree strongly, else None.

    Parameters
    ----------
    rank : int
        The selected rank.
    risks : array-like of shape (n_init,)
        Training risk of each of its restarts.
    threshold : float
        ``tol`` times the variance of the targets: the selection's own tolerance.

    Returns
    -------
    text : str or None

    Examples
    --------
    >>> restart_warning(3, [0.01, 0.011], 0.02) is None
    True
    >>> restart_warning(3, [0.01, 0.5], 0.02)[:48]
    'the 2 restarts (n_init) of rank 3 end at trainin'
    """
    risks = np.asarray(risks, dtype=float)
    risks = risks[~np.isnan(risks)]  # a restart not trained (n_init="auto")
    if len(risks) < 2:
        return None
    spread = float(np.max(risks) - np.min(risks))
    if not spread > threshold:
        return None
    best = int(np.argmin(risks))
    return (f"the {len(risks)} restarts (n_init) of rank {rank} end at training risks from "
            f"{np.min(risks):.4g} to {np.max(risks):.4g}, further apart than tol * variance "
            f"= {threshold:.4g}: the fit depends on its initialisation (a restart stopped in "
            f"a poorer basin, or training was too short for them to meet). The best "
            f"(restart {best}) is kept; raise n_init or max_epochs.")
