"""Cramming: the skorch net that optimises prompt vectors of many targets at once.

Its two rules between optimiser steps are callbacks: :class:`FiniteLoss`
(divergence) and :class:`AllTargetsDone` (the stop once no target is active).
"""

import torch
from skorch.callbacks import Callback
from skorch.dataset import unpack_data
from torch.nn import functional as F

from ._errors import TrainingDivergedError, TrainingFinished
from ._net import InterruptibleNet

__all__ = ["AllTargetsDone", "CrammingNet", "FiniteLoss"]


class _ActiveTargets:
    """Iterable of one batch per step: the targets still being optimised."""

    def __init__(self, net, dataset):
        self.net = net
        self.index = torch.as_tensor(dataset.X["index"])
        self.ids = torch.as_tensor(dataset.X["ids"])

    def __len__(self):
        return 1

    def __iter__(self):
        active = torch.nonzero(self.net.active_.to(self.index.device)).flatten()
        if len(active):
            index, ids = self.index[active], self.ids[active]
            yield {"index": index, "ids": ids}, ids


class CrammingNet(InterruptibleNet):
    """skorch net that optimises the memory vectors of many targets at once.

    Every step (one skorch "epoch") runs all still-active targets through the
    frozen model, in chunks of ``chunk_size`` whose gradients are accumulated,
    then takes one optimiser step. The loss is the *sum* over targets of each
    target's mean token cross-entropy, so with an elementwise optimiser (AdamW)
    each target's trajectory is the one it would follow alone.

    Per target it keeps the memory with the best teacher-forced token accuracy
    (ties broken by lower loss) and stops the target at exact match or after
    ``patience`` steps without a better accuracy: that bookkeeping reads the
    logits of each chunk inside the step, which no callback sees. The rules
    between steps are callbacks: :class:`FiniteLoss` (divergence) and
    :class:`AllTargetsDone` (the early stop). A user's
    :class:`KeyboardInterrupt` is raised again after skorch's clean-up
    (:class:`~._net.InterruptibleNet`).

    Parameters
    ----------
    *args, **kwargs
        As :class:`skorch.NeuralNet`; ``module`` is a :class:`PromptedLM`.
    patience : int, default=500
    chunk_size : int or None, default=None
        Targets per forward pass; all active targets when None.
    """

    def __init__(self, *args, patience=500, chunk_size=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.patience = patience
        self.chunk_size = chunk_size

    def get_all_learnable_params(self):
        # only the memory vectors: the language model is frozen
        for name, param in self.module_.named_parameters():
            if param.requires_grad:
                yield name, param

    def get_iterator(self, dataset, training=False):
        return _ActiveTargets(self, dataset)

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        memory = self.module_.memory
        n = memory.shape[0]
        self.active_ = torch.ones(n, dtype=torch.bool)
        self.best_accuracy_ = torch.full((n,), -1.0)
        self.best_loss_ = torch.full((n,), float("inf"))
        self.since_improved_ = torch.zeros(n, dtype=torch.long)
        self.steps_ = torch.zeros(n, dtype=torch.long)
        self.best_memory_ = memory.detach().clone()
        super().on_train_begin(net, X=X, y=y, **kwargs)

    def train_step_single(self, batch, **fit_params):
        self._set_training(True)
        Xi, _ = unpack_data(batch)
        index, ids = Xi["index"], Xi["ids"]
        chunk = len(index) if self.chunk_size is None else int(self.chunk_size)
        total = torch.zeros((), device=self.device)
        for start in range(0, len(index), chunk):
            part = {"index": index[start:start + chunk], "ids": ids[start:start + chunk]}
            y_pred = self.infer(part)
            loss = self.get_loss(y_pred, part["ids"], X=part, training=True)
            loss.backward()
            total = total + loss.detach()
        return {"loss": total, "y_pred": None}

    def get_loss(self, y_pred, y_true, X=None, training=False):
        per_token = F.cross_entropy(y_pred.transpose(1, 2), y_true[:, 1:], reduction="none")
        per_target = per_token.mean(dim=1)
        if training:
            self._track(X["index"], y_pred.detach(), y_true[:, 1:], per_target.detach())
        return per_target.sum()

    def _track(self, index, logits, targets, loss):
        correct = logits.argmax(-1) == targets
        accuracy = correct.float().mean(dim=1).cpu()
        loss = loss.cpu()
        index_cpu = index.cpu()
        best_acc = self.best_accuracy_[index_cpu]
        improved = accuracy > best_acc
        keep = improved | ((accuracy == best_acc) & (loss < self.best_loss_[index_cpu]))
        if keep.any():
            rows = index_cpu[keep]
            self.best_accuracy_[rows] = accuracy[keep]
            self.best_loss_[rows] = loss[keep]
            # the memory that produced these logits: the optimiser has not stepped yet
            self.best_memory_[rows.to(self.best_memory_.device)] = (
                self.module_.memory.detach()[index[keep.to(index.device)]])
        self.since_improved_[index_cpu] = torch.where(
            improved, 0, self.since_improved_[index_cpu] + 1)
        self.steps_[index_cpu] += 1
        exact = correct.all(dim=1).cpu()
        stalled = self.since_improved_[index_cpu] >= self.patience
        self.active_[index_cpu[exact | stalled]] = False


class FiniteLoss(Callback):
    """skorch callback: a non-finite cramming loss is :class:`~._errors.TrainingDivergedError`.

    Examples
    --------
    >>> FiniteLoss().get_params()
    {}
    """

    def on_batch_end(self, net, training=False, loss=None, **kwargs):
        if training and loss is not None and not torch.isfinite(loss).all():
            raise TrainingDivergedError(
                f"cramming diverged at step {len(net.history)}: a target's loss is not "
                "finite; lower lr or init_scale"
            )


class AllTargetsDone(Callback):
    """skorch callback: record ``n_active`` per step, and stop once no target is active.

    The stop is a :class:`~._errors.TrainingFinished`, the early stop that
    ends ``fit`` normally.

    Examples
    --------
    >>> AllTargetsDone().get_params()
    {}
    """

    def on_epoch_end(self, net, **kwargs):
        net.history.record("n_active", int(net.active_.sum()))
        if not net.active_.any():
            raise TrainingFinished("every target is reached or stalled")
