"""Full-batch training of every slot of a :class:`~intrinsic_rank.nn.TripleAttentionHead`.

:func:`fit_triple_heads` trains all slots at once (their losses are summed, and
each parameter has a leading slot axis), with a per-slot plateau rule: solved
slots freeze, stalled ones decay their learning rate and then restart from a
fresh seed. ``_SlotAdam`` is Adam with a step count and a learning rate per
slot, so a restarted or frozen slot does not disturb the others.
"""

import math

import torch

from .._validation import check_int, check_real

__all__ = ["fit_triple_heads"]


class _SlotAdam:
    """Adam on parameters whose leading axis is the slot, with per-slot steps and rates.

    The update of "Adam: A Method for Stochastic Optimization" (Kingma and Ba,
    2015), bias-corrected, ``beta = (0.9, 0.999)``, ``eps = 1e-8``, applied only
    to the active slots: an inactive slot keeps its parameters, moments and
    step count.
    """

    beta1, beta2, eps = 0.9, 0.999, 1e-8

    def __init__(self, params, n_slots, lr):
        self.params = list(params)
        first = self.params[0]
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]
        self.t = torch.zeros(n_slots, device=first.device, dtype=first.dtype)
        self.rate = torch.full((n_slots,), lr, device=first.device, dtype=first.dtype)

    @torch.no_grad()
    def step(self, active):
        """One update of the slots where ``active`` (a boolean ``(S,)`` tensor) holds."""
        beta1, beta2 = self.beta1, self.beta2
        self.t += active.to(self.t.dtype)
        for p, (m1, m2) in zip(self.params, self.moments):
            g = p.grad
            shape = (len(self.t),) + (1,) * (p.dim() - 1)
            keep = active.view(shape)
            m1.copy_(torch.where(keep, beta1 * m1 + (1 - beta1) * g, m1))
            m2.copy_(torch.where(keep, beta2 * m2 + (1 - beta2) * g * g, m2))
            tt = self.t.clamp_min(1).view(shape)
            upd = self.rate.view(shape) * (m1 / (1 - beta1**tt)) / (
                (m2 / (1 - beta2**tt)).sqrt() + self.eps)
            p.sub_(torch.where(keep, upd, torch.zeros_like(upd)))

    def reset(self, slot, lr):
        """Fresh state for one slot: zero moments and step count, learning rate ``lr``."""
        for m1, m2 in self.moments:
            m1[slot].zero_()
            m2[slot].zero_()
        self.t[slot], self.rate[slot] = 0, lr


@torch.no_grad()
def _triple_scores(outputs, targets, weights, sequence_triples):
    wrong = (outputs - targets).abs() >= 0.5  # (S, n): not solved after rounding
    position = (wrong.to(weights.dtype) * weights).sum(-1) / weights.sum()
    if sequence_triples is None:
        return position, position
    sequence = wrong[:, sequence_triples].any(-1).to(weights.dtype).mean(-1)
    return position, sequence


def fit_triple_heads(head, data, max_steps=3000, lr=0.02, check_every=100, patience=3,
                     tol=1e-3, restarts=1, device="cpu", targets=None, margin=50.0,
                     decays=2, decay_factor=0.3, margin_on="triples"):
    """Train every slot of a :class:`TripleAttentionHead` full-batch on weighted triples.

    The loss of a slot is the multiplicity-weighted mean squared error over the
    distinct triples of ``data`` (:func:`~intrinsic_rank.datasets.min_ip_exhaustive_triples`),
    which equals the mean over every position of every sequence, plus a margin
    term that pushes every position inside the rounding interval. Adam with a
    step count and a learning rate per slot, so that a restarted slot gets a
    fresh optimiser state. Every ``check_every`` steps each slot is scored; a
    slot that solves every sequence is *solved* and frozen; a slot whose best
    loss improved by less than the relative ``tol`` over ``patience`` checks has
    *plateaued*: if unsolved, its learning rate is first multiplied by
    ``decay_factor`` (up to ``decays`` times, to polish a slot that bounces
    around a solution); after that, if restarts remain it is re-drawn from a new
    seed (fresh initialisation, the initial learning rate), otherwise it is
    frozen. The best state of each slot (fewest unsolved sequences, then lowest
    loss) is the one reported, and its parameters are restored at the end.
    The optimiser is Adam ("Adam: A Method for Stochastic Optimization",
    Kingma and Ba, 2015) with bias correction, kept per slot (``_SlotAdam``).

    Parameters
    ----------
    head : TripleAttentionHead
    data : Bunch
        ``triples``, ``weights``, ``targets`` and optionally ``sequence_triples``.
    max_steps : int, default=3000
    lr : float, default=0.02
        Initial learning rate (higher rates make the exponential maps spike).
    check_every, patience : int
        The plateau rule.
    tol : float, default=1e-3
    restarts : int, default=1
        Fresh-initialisation restarts per slot after an unsolved plateau (once
        its learning-rate decays are used up).
    device : str or torch.device, default="cpu"
    targets : array-like of shape (n,) or None
        Targets to fit instead of ``data.targets`` (the controls).
    margin : float, default=50.0
        Weight of the margin term ``relu(|error| - 0.3)^2`` added to the squared
        error (0: plain weighted MSE, which is what ``loss`` reports).
    decays : int, default=2
        Learning-rate decays per initialisation of a slot, on an unsolved plateau.
    decay_factor : float, default=0.3
        Factor of each decay, in ``(0, 1)``.
    margin_on : {"triples", "positions"}, default="triples"
        Weights of the margin term: every distinct triple alike (a triple is
        solved or not whatever its multiplicity, and every one of them occurs in
        some sequence, so this matches the exactness criterion), or by
        multiplicity like the squared error.

    Returns
    -------
    result : dict
        Per slot (lists): ``loss`` (the weighted MSE of the reported state),
        ``position_error`` (share of positions not solved), ``sequence_error``
        (share of sequences with any position not solved), ``converged`` (solved,
        or plateaued with every decay and restart used, before ``max_steps``),
        ``restarts`` (used), ``steps`` (trained), ``curve`` (the loss at every
        check, restarts included); and ``steps_run``.

    Examples
    --------
    >>> from intrinsic_rank.datasets import min_ip_exhaustive_triples
    >>> data = min_ip_exhaustive_triples(2, 2)
    >>> from intrinsic_rank.nn import TripleAttentionHead
    >>> head = TripleAttentionHead(data.tokens, ranks=[1], seeds=[0])
    >>> fit_triple_heads(head, data, max_steps=600)["sequence_error"]
    [0.0]
    """
    max_steps = check_int(max_steps, "max_steps", 1)
    check_every = check_int(check_every, "check_every", 1)
    patience = check_int(patience, "patience", 1)
    restarts = check_int(restarts, "restarts", 0)
    decays = check_int(decays, "decays", 0)
    lr = check_real(lr, "lr", 0, low_open=True)
    decay_factor = check_real(decay_factor, "decay_factor", 0, 1, low_open=True, high_open=True)
    margin = check_real(margin, "margin", 0)
    if margin_on not in ("triples", "positions"):
        raise ValueError(f"margin_on must be 'triples' or 'positions'; got {margin_on!r}")
    device = torch.device(device)
    head = head.to(device)
    triples, y, w, w_margin, seq = _training_tensors(head, data, targets, margin_on, device)
    params = [p for p in head.parameters()]
    S = len(head.ranks)
    adam = _SlotAdam(params, S, lr)
    active = torch.ones(S, dtype=torch.bool, device=device)
    state = _SlotState(S, params)
    schedule = dict(tol=tol, patience=patience, decays=decays, decay_factor=decay_factor,
                    restarts=restarts, lr=lr)
    step = 0
    while step < max_steps and bool(active.any()):
        n_inner = min(check_every, max_steps - step)
        live = active.nonzero().squeeze(1)  # solved and frozen slots are not computed
        for _ in range(n_inner):
            _train_step(head, triples, y, w, w_margin, margin, live, adam, active)
        step += n_inner
        losses, pos, sq = _slot_scores(head, triples, y, w, seq, live, S)
        for s in range(S):
            if not active[s]:
                continue
            state.record(s, n_inner, float(losses[s]), float(pos[s]), float(sq[s]), params)
            _schedule_slot(state, s, float(losses[s]), float(sq[s]), active, head, adam,
                           **schedule)
    with torch.no_grad():
        for b, p in zip(state.best_params, params):
            p.copy_(b)
    return dict(state.out, converged=state.converged, restarts=state.used, steps=state.steps,
                curve=state.curves, steps_run=step)


def _training_tensors(head, data, targets, margin_on, device):
    """The triples, targets, weights (of the loss and of its margin term) and the
    sequences' triples of ``data``, as tensors on ``device``."""
    dtype = head.tokens.dtype
    triples = torch.as_tensor(data.triples, device=device)
    y = torch.as_tensor(data.targets if targets is None else targets, dtype=dtype,
                        device=device)
    if y.shape != (len(triples),):
        raise ValueError(f"targets must have shape ({len(triples)},); got {tuple(y.shape)}")
    w = torch.as_tensor(data.weights, dtype=dtype, device=device)
    w = w / w.sum()
    # exactness is decided per distinct triple (each occurs in some sequence), so
    # the margin term weighs the distinct triples equally, not by multiplicity
    w_margin = torch.full_like(w, 1.0 / len(w)) if margin_on == "triples" else w
    seq = data.get("sequence_triples") if hasattr(data, "get") else None
    seq = None if seq is None else torch.as_tensor(seq, device=device)
    return triples, y, w, w_margin, seq


def _train_step(head, triples, y, w, w_margin, margin, live, adam, active):
    """One full-batch step of the live slots."""
    pred = head(triples, slots=live)
    err = pred - y
    # squared error plus a margin term that pushes every position inside
    # the rounding interval (|error| < 1/2), where exactness is decided
    losses = (err**2 * w).sum(-1) + margin * (
        torch.relu(err.abs() - 0.3) ** 2 * w_margin).sum(-1)
    head.zero_grad(set_to_none=False)
    losses.sum().backward()
    adam.step(active)


@torch.no_grad()
def _slot_scores(head, triples, y, w, seq, live, S):
    """Loss, position error and sequence error of every slot (NaN where not live)."""
    pred = head(triples, slots=live)
    live_losses = ((pred - y) ** 2 * w).sum(-1).cpu()
    live_pos, live_sq = _triple_scores(pred, y, w, seq)
    losses, pos, sq = (torch.full((S,), math.nan, dtype=head.tokens.dtype) for _ in range(3))
    losses[live.cpu()], pos[live.cpu()], sq[live.cpu()] = (
        live_losses, live_pos.cpu(), live_sq.cpu())
    return losses, pos, sq


class _SlotState:
    """Per slot: the best scores and parameters so far, the plateau counters, the curve."""

    def __init__(self, S, params):
        self.best_loss = torch.full((S,), math.inf)
        self.stall = torch.zeros(S, dtype=torch.long)
        self.used, self.decayed, self.steps = [0] * S, [0] * S, [0] * S
        self.out = {k: [math.nan] * S for k in ("loss", "position_error", "sequence_error")}
        self.curves = [[] for _ in range(S)]
        self.converged = [False] * S
        self.best_key = [(math.inf, math.inf)] * S
        self.best_params = [p.detach().clone() for p in params]

    def record(self, s, n_inner, loss_s, pos_s, sq_s, params):
        """Count the steps of slot ``s``, extend its curve, keep its best state (the lowest
        sequence error, then loss)."""
        self.steps[s] += n_inner
        self.curves[s].append(loss_s if math.isfinite(loss_s) else math.inf)
        key = (sq_s, loss_s if math.isfinite(loss_s) else math.inf)
        if key < self.best_key[s]:
            self.best_key[s] = key
            self.out["loss"][s], self.out["position_error"][s] = loss_s, pos_s
            self.out["sequence_error"][s] = sq_s
            with torch.no_grad():
                for b, p in zip(self.best_params, params):
                    b[s].copy_(p[s])


def _schedule_slot(state, s, loss_s, sq_s, active, head, adam, *, tol, patience, decays,
                   decay_factor, restarts, lr):
    """After a check: freeze a solved slot; on a plateau decay its rate, restart it, or
    freeze it when both are spent."""
    solved = sq_s == 0.0
    if loss_s < state.best_loss[s] * (1 - tol):
        state.best_loss[s], state.stall[s] = loss_s, 0
    else:
        state.stall[s] += 1
    if not math.isfinite(loss_s):
        state.stall[s] = patience  # diverged: go straight to a restart
        state.decayed[s] = decays
    if solved:
        active[s], state.converged[s] = False, True
    elif state.stall[s] >= patience:
        if state.decayed[s] < decays:
            state.decayed[s] += 1
            adam.rate[s] *= decay_factor
            state.stall[s] = 0
        elif state.used[s] < restarts:
            state.used[s] += 1
            state.decayed[s] = 0
            head.reset_slot(s, head.seeds[s] + 1000 * state.used[s])
            adam.reset(s, lr)
            state.best_loss[s], state.stall[s] = math.inf, 0
        else:
            active[s], state.converged[s] = False, True
