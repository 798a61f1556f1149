"""Distilling a teacher into every slot of a rank-batched student, keeping each slot's best epoch.

The measurement of a real head's rank asks one question per rank: how close can a
student of that rank come to the head on inputs it was not trained on? Three rules
keep the optimiser from answering instead of the head:

* **the best held-out epoch is kept**, never the last: every slot is scored on the
  held-out inputs before training (its start, epoch 0) and after every epoch, and
  ends holding the parameters of its best score. A slot's reported risk is
  therefore never above its start's;
* **training runs to a stated plateau**, not a fixed count: a slot has converged
  when its best held-out risk has not fallen by more than ``min_fall`` of itself
  in ``patience`` epochs; it then stops training (it is left out of the forward
  pass), and the run ends when every slot has converged or at ``max_epochs``,
  which leaves the slots still improving marked as not converged;
* **slots are independent**: the loss is the sum of the slots' own losses and the
  optimiser (Adam) is elementwise, so a slot follows the same path whatever other
  slots share its run -- the minibatches are drawn from a generator seeded by
  ``random_state`` alone.
"""

import math
import time

import numpy as np
import torch
from sklearn.utils import Bunch

from .._validation import check_int, check_real, keyed_seed

__all__ = ["distill_slots"]


def _as_tensor(array, name, device):
    if isinstance(array, torch.Tensor):
        tensor = array.detach().to(device=device, dtype=torch.float32)
    else:  # a copy: the array may be read-only (memory-mapped by a parallel worker)
        tensor = torch.from_numpy(np.array(array, dtype=np.float32)).to(device)
    if tensor.dim() != 3 or not torch.isfinite(tensor).all():
        raise ValueError(f"{name} must be a finite array of shape (n, L, width); got "
                         f"shape {tuple(tensor.shape)}")
    return tensor


def _pooled_variance(Y):
    """Mean over output features of the variance of ``Y`` over every token (float64)."""
    flat = Y.reshape(-1, Y.shape[-1]).double()
    return float(flat.var(dim=0, unbiased=False).mean())


def _slot_risks(student, X, Y, slots, rows):
    """Mean squared error of each of ``slots`` on ``(X, Y)``, float64, in chunks of ``rows``."""
    total = torch.zeros(len(slots), dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, len(X), rows):
            out = student(X[start:start + rows], slots=slots)
            diff = (out - Y[start:start + rows, None]).double()
            total += diff.square().sum(dim=tuple(i for i in range(diff.dim()) if i != 1)).cpu()
    return (total / (Y.numel())).numpy()


def _snapshot(student, slot):
    """The parameters of one slot (copies), to be put back by :func:`_restore`."""
    return {name: value[slot].detach().clone() for name, value in student.named_parameters()}


def _restore(student, slot, snapshot):
    with torch.no_grad():
        for name, value in student.named_parameters():
            value[slot].copy_(snapshot[name])


def distill_slots(student, X, Y, X_heldout, Y_heldout, *, lr=3e-3, batch_size=16,
                  max_epochs=300, patience=20, min_fall=0.01, random_state=0, device="cpu",
                  eval_rows=64):
    """Train every slot of ``student`` to reproduce ``Y`` from ``X``; keep each slot's best epoch.

    The rules (module docstring): the loss of a minibatch is the sum over slots of
    each slot's mean squared error; after every epoch each slot's held-out relative
    risk is measured, the best kept; a slot stops when its best has not fallen by
    more than ``min_fall`` of itself in ``patience`` epochs.

    Parameters
    ----------
    student : RotarySoftmaxStudent
        A student whose ``forward(X, slots=...)`` computes chosen slots, started
        as wanted (for instance :meth:`RotarySoftmaxStudent.start_from`). It ends
        holding each slot's best parameters.
    X, Y : array-like of shape (n, L, d) and (n, L, d_out)
        Training inputs and the teacher's outputs.
    X_heldout, Y_heldout : array-like
        Held-out inputs and outputs: the scores that choose each slot's epoch.
    lr : float, default=3e-3
        Adam's learning rate.
    batch_size : int, default=16
    max_epochs : int, default=300
        The most epochs; a slot still improving then is reported unconverged.
    patience : int, default=20
    min_fall : float, default=0.01
        The fall of a slot's best risk, as a share of it, that counts as progress.
    random_state : int, default=0
        Seed of the minibatch order.
    device : str, default="cpu"
    eval_rows : int, default=64
        Held-out sequences per forward pass when scoring.

    Returns
    -------
    result : Bunch
        ``start`` and ``best`` (relative held-out risks per slot: mean squared
        error over the pooled variance of ``Y_heldout``), ``best_epoch`` (0: the
        start), ``epochs`` (epochs each slot trained), ``converged`` (bool per
        slot), ``variance`` and ``seconds``.

    Examples
    --------
    >>> import torch
    >>> from intrinsic_rank.nn import RotarySoftmaxStudent
    >>> teacher = RotarySoftmaxStudent(d=6, d_out=4, ranks=[2], random_state=1, init_scale=2.0)
    >>> X = torch.randn(40, 5, 6)
    >>> with torch.no_grad():
    ...     Y = teacher(X)[:, 0]
    >>> student = RotarySoftmaxStudent(d=6, d_out=4, ranks=[1, 2], random_state=2)
    >>> fit = distill_slots(student, X[:32], Y[:32], X[32:], Y[32:], max_epochs=5)
    >>> bool((fit.best <= fit.start).all()), fit.best_epoch.shape
    (True, (2,))
    """
    lr = check_real(lr, "lr", 0.0, low_open=True)
    if not math.isfinite(lr) or lr > 1e3:
        raise ValueError(f"lr must be a finite number in (0, 1000]; got {lr}")
    batch_size = check_int(batch_size, "batch_size")
    max_epochs = check_int(max_epochs, "max_epochs", minimum=0)
    patience = check_int(patience, "patience")
    min_fall = check_real(min_fall, "min_fall", 0.0, 1.0)
    start_time = time.perf_counter()
    X, Y = _as_tensor(X, "X", device), _as_tensor(Y, "Y", device)
    X_held = _as_tensor(X_heldout, "X_heldout", device)
    Y_held = _as_tensor(Y_heldout, "Y_heldout", device)
    variance = _pooled_variance(Y_held)
    if not variance > 0:
        raise ValueError("the held-out outputs do not vary (zero variance): no relative "
                         "risk can be measured on them")
    student = student.to(device)
    R = len(student.ranks)
    everyone = list(range(R))
    start = _slot_risks(student, X_held, Y_held, everyone, eval_rows) / variance
    best, best_epoch = start.copy(), np.zeros(R, dtype=int)
    snapshots = [_snapshot(student, slot) for slot in everyone]  # the starts
    since = np.zeros(R, dtype=int)
    epochs = np.zeros(R, dtype=int)
    parameters = [p for p in student.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=lr) if parameters else None
    generator = torch.Generator(device="cpu").manual_seed(keyed_seed(random_state, 0))
    active = [s for s in everyone if best[s] > 0] if optimizer else []
    for epoch in range(1, max_epochs + 1):
        if not active:
            break
        order = torch.randperm(len(X), generator=generator).to(X.device)
        for first in range(0, len(X), batch_size):
            rows = order[first:first + batch_size]
            out = student(X[rows], slots=active)
            loss = (out - Y[rows, None]).square().mean(
                dim=tuple(i for i in range(out.dim()) if i != 1)).sum()
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"the distillation diverged at epoch {epoch} (loss {float(loss)}); "
                    "lower lr")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        risks = _slot_risks(student, X_held, Y_held, active, eval_rows) / variance
        for slot, risk in zip(list(active), risks):
            epochs[slot] = epoch
            if risk < best[slot]:
                progress = risk < best[slot] * (1.0 - min_fall)
                best[slot], best_epoch[slot] = risk, epoch
                snapshots[slot] = _snapshot(student, slot)
                since[slot] = 0 if progress else since[slot] + 1
            else:
                since[slot] += 1
            if since[slot] >= patience or best[slot] == 0:
                active.remove(slot)
    converged = np.array([s not in active for s in everyone])
    for slot, snapshot in enumerate(snapshots):  # each slot's best epoch, 0 its start
        _restore(student, slot, snapshot)
    return Bunch(start=start, best=best, best_epoch=best_epoch, epochs=epochs,
                 converged=converged, variance=variance,
                 seconds=time.perf_counter() - start_time)
