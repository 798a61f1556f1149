"""``precision="auto"``: choosing the training precision, and keeping the decision float32's.

Three steps of :class:`~intrinsic_rank.AttentionRankEstimator`'s ``fit``:

* :func:`resolve_precision`, before any training: ``"auto"`` becomes
  ``"bfloat16"`` where the device has fast bfloat16 and a training step of this
  problem is measured faster in it (:mod:`._precision`), ``"float32"``
  otherwise; an explicit ``"bfloat16"`` on a device without fast bfloat16 trains
  in float32 with a warning.
* :func:`check_class_choice`, after ``attention="auto"`` compared the classes in
  bfloat16: when a class's risk lies within :data:`CLASS_BAND` times
  ``tol * variance`` of the cut, the comparison is redone in float32.
* :func:`polish_and_check`, after a bfloat16 sweep: all held-out risks are
  float32 evaluations. When the selected rank or the rank below it lies near
  the threshold (:data:`NEAR_FACTOR`), those ranks and their grid neighbours
  train :data:`POLISH_EPOCHS` more epochs in float32 from the bfloat16 weights
  (and optimiser state), at the same learning rate. When the polish moves
  ``rank_``, or moves a risk by more than :data:`MOVE_FACTOR` times smaller than
  its distance to the threshold, the answer could still differ from a float32
  fit's: the fit is then redone in float32, with a warning saying why.
"""

import warnings

import numpy as np
import torch

from ._batching import RankwiseMSELoss, rankwise_risks, training_autocast
from ._errors import TrainingDivergedError
from ._precision import device_bfloat16, problem_bfloat16
from ._selection import coarse_rank_grid, select_rank

__all__ = ["CLASS_BAND", "MOVE_FACTOR", "NEAR_FACTOR", "POLISH_EPOCHS", "check_class_choice",
           "polish_and_check", "resolve_precision"]

POLISH_EPOCHS = 10
"""Float32 epochs of the polish (at most ``max_epochs``)."""

NEAR_FACTOR = 2.0
"""A decision is near when the selected rank's excess risk is above ``threshold / 2`` or
the rank below it has an excess below ``2 * threshold``: then it is polished."""

MOVE_FACTOR = 3.0
"""After the polish, a rank whose excess lies closer to the threshold than three times the
polish's change of its risk could still cross it: the fit is redone in float32."""

CLASS_BAND = 0.5
"""``attention="auto"`` in bfloat16 is redone in float32 when a class's risk lies within
``CLASS_BAND * tol * variance`` of the class cut."""


def _problem_ranks(estimator, rank_grid):
    """The ranks of the first run, inside the class ``attention_`` (softmax for ``"auto"``)."""
    limit = estimator._max_rank()
    if isinstance(rank_grid, str):
        return coarse_rank_grid(limit)
    if rank_grid is not None:
        return [r for r in rank_grid if r <= limit] or [limit]
    return [limit if estimator.rank is None else min(int(estimator.rank), limit)]


def _step(estimator, ranks, seed, device, X_train, Y_train):
    """The cache key of a problem, and its training step (the net built at the first call)."""
    batch = estimator._batch_size(len(X_train))
    x, y = X_train[:batch], Y_train[:batch]
    loss = RankwiseMSELoss()
    built = []

    def step(precision):
        if not built:  # only when measured: a cached problem builds nothing
            net = estimator._build_net(ranks, seed, device, len(X_train))
            net.initialize()
            built.append(net.module_.train())
        module = built[0]
        module.zero_grad(set_to_none=True)
        with training_autocast(precision, device):
            out = module(x)
        loss(out.float(), y).sum().backward()

    cls = estimator._student_class(estimator.attention_)
    key = (cls.__name__, estimator.token_dim_, estimator.d_out_, estimator.seq_len_,
           batch, tuple(ranks), estimator.target_, bool(estimator.causal), estimator.positional,
           repr(sorted((estimator.student_options or {}).items())))
    return key, step


def resolve_precision(estimator, rank_grid, seed, device, X_train, Y_train):
    """The precision ``fit`` trains in, and why.

    Parameters
    ----------
    estimator : AttentionRankEstimator
        During ``fit``, with the data's sizes set (``attention_`` may be None for
        ``attention="auto"``, measured as ``"softmax"``).
    rank_grid : list, str or None
        The checked ``rank_grid``.
    seed : int
    device : torch.device
    X_train, Y_train : torch.Tensor
        The training data (a batch of it is timed).

    Returns
    -------
    precision : {"float32", "bfloat16"}
    reason : str
    """
    asked = estimator.precision
    if asked == "float32":
        return "float32", "precision='float32' (asked for)"
    fast = device_bfloat16(device)
    if not fast["fast"]:
        if asked == "bfloat16":
            warnings.warn(
                f"AttentionRankEstimator: precision='bfloat16' but {device} has no fast "
                f"bfloat16 ({fast['reason']}); training in float32", UserWarning)
            return "float32", f"precision='bfloat16' fell back to float32: {fast['reason']}"
        return "float32", f"precision='auto': no fast bfloat16 ({fast['reason']})"
    if asked == "bfloat16":
        return "bfloat16", f"precision='bfloat16' (asked for; {fast['reason']})"
    chosen = estimator.attention_
    try:
        if chosen is None:
            estimator.attention_ = "softmax"
        key, step = _step(estimator, _problem_ranks(estimator, rank_grid), seed, device,
                          X_train, Y_train)
        problem = problem_bfloat16(key, step, device)
    finally:
        estimator.attention_ = chosen
    if problem["fast"]:
        return "bfloat16", f"precision='auto': {problem['reason']}"
    return "float32", f"precision='auto': {problem['reason']}"


def check_class_choice(risks, variance, tol):
    """Whether ``attention="auto"``'s choice from bfloat16-trained risks is too close to call.

    Parameters
    ----------
    risks : dict
        ``{class: held-out risk}`` (float32 evaluations of bfloat16-trained students).
    variance : float
        Held-out variance of the targets.
    tol : float

    Returns
    -------
    reason : str or None
        Why the choice is redone in float32, or None when it stands.

    Examples
    --------
    >>> check_class_choice({"fixed": 0.6, "linear": 0.0025, "softmax": 0.46}, 1.0, 0.02) is None
    True
    >>> check_class_choice({"fixed": 0.021, "linear": 0.0025, "softmax": 0.002}, 1.0, 0.02)
    'the class risks (fixed 0.021) lie within 0.5 x tol x variance of the cut 0.022'
    """
    finite = {name: float(r) for name, r in risks.items() if np.isfinite(r)}
    if not finite:
        return None
    band = float(tol) * float(variance)
    cut = min(finite.values()) + band
    near = {name: r for name, r in finite.items() if abs(r - cut) <= CLASS_BAND * band}
    if not near:
        return None
    text = ", ".join(f"{name} {r:.4g}" for name, r in near.items())
    return f"the class risks ({text}) lie within {CLASS_BAND} x tol x variance of the cut {cut:.4g}"


def _slot_copy(source, i, target, j, ranked):
    with torch.no_grad():
        if ranked:
            target[j].zero_()
            width = min(source.shape[-1], target.shape[-1])
            target[j][..., :width] = source[i][..., :width]
        else:
            target[j] = source[i]


def _copy_slots(sources, target_net):
    """Weights and optimiser state of each rank of ``target_net`` from the net that trained it."""
    module = target_net.module_
    optimizer = target_net.optimizer_
    for j, r in enumerate(module.ranks):
        net = next(n for n in sources if r in n.module_.ranks)
        i = list(net.module_.ranks).index(r)
        state = getattr(net, "optimizer_", None)
        for name, _shape, _init, _fan_in, ranked in module._initializers:
            source, target = getattr(net.module_, name), getattr(module, name)
            _slot_copy(source, i, target, j, ranked)
            if state is None or source not in state.state:
                continue
            old = state.state[source]
            new = optimizer.state[target]
            for key, value in old.items():
                if torch.is_tensor(value) and value.shape == source.shape:
                    if key not in new:
                        new[key] = torch.zeros_like(target)
                    _slot_copy(value, i, new[key], j, ranked)
                elif key not in new:
                    new[key] = value.clone() if torch.is_tensor(value) else value


def _write_back(polished, net):
    slot_of = {r: i for i, r in enumerate(net.module_.ranks)}
    for name, _shape, _init, _fan_in, ranked in net.module_._initializers:
        source, target = getattr(polished.module_, name), getattr(net.module_, name)
        for j, r in enumerate(polished.module_.ranks):
            _slot_copy(source, j, target, slot_of[r], ranked)


def _heldout_risks(estimator, net, X_held, Y_held):
    values, _ = rankwise_risks(net, X_held, Y_held)
    return np.array([float(v) / estimator.y_scale_**2 if np.isfinite(v) else np.inf
                     for v in values])


def polish_and_check(estimator, nets, net, ranks, data, held, variance, seed, device, limit):
    """Polish a bfloat16 sweep near its decision in float32; say when float32 must redo it.

    Parameters
    ----------
    estimator : AttentionRankEstimator
        During ``fit``, after a bfloat16 sweep.
    nets : list of RankSweepNet
        The runs that trained the ranks (their optimiser states are continued).
    net : RankSweepNet
        The net of every rank (``nets[0]``, or the merged net of a search); the
        polished slots are written back into it.
    ranks : list of int
    data, held : tuple of torch.Tensor
        ``(X_train, Y_train)`` and ``(X_held, Y_held)``.
    variance : float
    seed : int
    device : torch.device
    limit : float or None
        The divergence limit of the runs.

    Returns
    -------
    polish : dict
        ``ranks`` polished (empty when the decision was not near), ``epochs``,
        ``risk_change`` (``{rank: change of the held-out risk}``) and ``fallback``:
        None, or why a float32 fit must redo this one.
    """
    X_train, Y_train = data
    X_held, Y_held = held
    tol, floor_given = estimator.tol, estimator.noise_floor
    before = _heldout_risks(estimator, net, X_held, Y_held)
    selection = select_rank(ranks, before, variance, tol, noise_floor=floor_given)
    i, threshold, excess = selection["index"], selection["threshold"], selection["excess"]
    near = (not selection["any_reached"] or excess[i] > threshold / NEAR_FACTOR
            or (i > 0 and excess[i - 1] < NEAR_FACTOR * threshold))
    result = {"ranks": [], "epochs": 0, "risk_change": {}, "fallback": None}
    if not near:
        return result
    slots = [j for j in (i - 1, i, i + 1) if 0 <= j < len(ranks)]
    polish_ranks = [int(ranks[j]) for j in slots]
    epochs = min(POLISH_EPOCHS, int(estimator.max_epochs))
    polished = estimator._build_net(polish_ranks, seed, device, len(X_train), loss_limit=limit)
    polished.precision = "float32"
    polished.max_epochs = epochs
    polished.initialize()
    _copy_slots(nets, polished)
    try:
        polished.partial_fit(X_train, Y_train)
    except TrainingDivergedError as error:
        result["fallback"] = f"the float32 polish of ranks {polish_ranks} diverged ({error})"
        return result
    _write_back(polished, net)
    after = _heldout_risks(estimator, net, X_held, Y_held)
    change = {int(ranks[j]): float(after[j] - before[j]) for j in slots}
    result.update(ranks=polish_ranks, epochs=epochs, risk_change=change)
    moved = select_rank(ranks, after, variance, tol, noise_floor=floor_given)
    k = moved["index"]
    if k != i:
        result["fallback"] = (f"{epochs} float32 epochs from the bfloat16 weights moved the "
                              f"selected rank from {ranks[i]} to {ranks[k]}")
        return result
    for j in (k - 1, k):
        if j not in slots:
            continue
        distance = abs(moved["excess"][j] - moved["threshold"])
        step = abs(after[j] - before[j])
        if distance < MOVE_FACTOR * step:
            result["fallback"] = (
                f"rank {ranks[j]}'s excess risk lies {distance:.3g} from the threshold "
                f"{moved['threshold']:.3g}, less than {MOVE_FACTOR:g} x the change of "
                f"{step:.3g} that {epochs} float32 epochs made")
            return result
    return result
