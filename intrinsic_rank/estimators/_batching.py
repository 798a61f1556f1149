"""Rank-batched training data flow: slicing batches, the per-rank loss, chunked evaluation."""

import numpy as np
import torch

from . import _scaling

__all__ = ["RankwiseMSELoss", "TensorBatchIterator", "forward_chunks",
           "output_entries_per_row", "rankwise_risks"]


class TensorBatchIterator:
    """Mini-batches sliced from whole tensors, with a seeded shuffle.

    skorch's default ``DataLoader`` indexes and collates one sample at a time,
    which dominates the cost of the tiny models trained here. This iterator
    slices the dataset's tensors directly.

    Parameters
    ----------
    dataset : skorch.dataset.Dataset
        Holds ``X`` and ``y`` as tensors of equal length.
    batch_size : int
    shuffle : bool, default=False
    seed : int, default=0
        Seed of the shuffling order; each pass over the data draws a new order.

    Examples
    --------
    >>> import torch
    >>> from skorch.dataset import Dataset
    >>> batches = TensorBatchIterator(Dataset(torch.arange(5.0), torch.zeros(5)), 2)
    >>> [len(X) for X, _ in batches]
    [2, 2, 1]
    """

    def __init__(self, dataset, batch_size, shuffle=False, seed=0):
        self.X = dataset.X
        self.y = dataset.y
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(int(seed))

    def __len__(self):
        return -(-len(self.X) // self.batch_size)

    def __iter__(self):
        n = len(self.X)
        if self.shuffle:
            order = torch.randperm(n, generator=self.generator).to(self.X.device)
        for start in range(0, n, self.batch_size):
            if self.shuffle:
                index = order[start:start + self.batch_size]
                yield self.X[index], (None if self.y is None else self.y[index])
            else:
                stop = start + self.batch_size
                yield self.X[start:stop], (None if self.y is None else self.y[start:stop])


class RankwiseMSELoss(torch.nn.Module):
    """Per-rank mean squared error, ``(n, R, ...)`` predictions against ``(n, ...)``.

    Returns the ``R`` per-rank losses; the net sums them so every rank slot gets
    exactly its own gradient.

    Examples
    --------
    >>> import torch
    >>> RankwiseMSELoss()(torch.ones(4, 2, 3), torch.zeros(4, 3))
    tensor([1., 1.])
    """

    def forward(self, y_pred, y_true):
        return _RankwiseMSE.apply(y_pred, y_true)


class _RankwiseMSE(torch.autograd.Function):
    """Per-rank MSE with one residual and one product in the backward.

    Autograd's ``(y_pred - y).pow(2).mean`` keeps the residual, the square and
    their gradients as separate full-size tensors; here the backward is
    ``2 g_r / m * residual``, in whatever memory layout ``y_pred`` has.
    """

    @staticmethod
    def forward(ctx, y_pred, y_true):
        R = y_pred.shape[1]
        count = y_pred.numel() // R
        rank_major = y_pred.movedim(1, 0)
        if rank_major.is_contiguous():
            # the students' rank-major outputs: a contiguous (R, m) residual whose
            # squared norms are R dot products (no squared temporary)
            residual = (rank_major - y_true).view(R, 1, count)
            per_rank = torch.bmm(residual, residual.transpose(1, 2)).view(R) / count
            ctx.rank_major = True
        else:
            residual = y_pred - y_true.unsqueeze(1)
            dims = (0, *range(2, residual.dim()))
            per_rank = residual.square().sum(dim=dims) / count
            ctx.rank_major = False
        ctx.save_for_backward(residual)
        ctx.count = count
        ctx.pred_shape = y_pred.shape
        ctx.true_needs_grad = ctx.needs_input_grad[1]
        return per_rank

    @staticmethod
    def backward(ctx, grad):
        (residual,) = ctx.saved_tensors
        scale = grad * (2.0 / ctx.count)
        if ctx.rank_major:
            grad_pred = (residual * scale.view(-1, 1, 1)).view(
                ctx.pred_shape[1], ctx.pred_shape[0], *ctx.pred_shape[2:]).movedim(0, 1)
        else:
            shape = (1, -1) + (1,) * (residual.dim() - 2)
            grad_pred = residual * scale.view(shape)
        grad_true = -grad_pred.sum(dim=1) if ctx.true_needs_grad else None
        return grad_pred, grad_true


def forward_chunks(net, X_t):
    """``net.forward`` on ``X_t`` a chunk of rows at a time: ``(start, outputs)`` pairs.

    One chunk (the whole of ``X_t``) when the outputs hold at most
    ``_scaling.CHUNK_ELEMENTS`` entries; otherwise chunks of a whole number of the net's
    batches, so every sample goes through the same batched forward as in one
    call. Outputs are float32 tensors on the net's device, without gradient.

    Parameters
    ----------
    net : skorch.NeuralNet
        An initialised net whose module returns ``(n, R, ...)``.
    X_t : torch.Tensor of shape (n, ...)

    Yields
    ------
    start : int
    outputs : torch.Tensor of shape (m, R, ...)
    """
    n = len(X_t)
    per_row = output_entries_per_row(net, X_t)
    if n * per_row <= _scaling.CHUNK_ELEMENTS:
        yield 0, net.forward(X_t, training=False).detach()
        return
    batch = int(net.batch_size) if isinstance(net.batch_size, int) and net.batch_size > 0 else 256
    step = max(batch, (_scaling.CHUNK_ELEMENTS // per_row) // batch * batch)
    for start in range(0, n, step):
        yield start, net.forward(X_t[start:start + step], training=False).detach()


def output_entries_per_row(net, X_t):
    """Output entries per sample of ``net`` (from a forward pass on one sample).

    Parameters
    ----------
    net : skorch.NeuralNet
        An initialised net.
    X_t : torch.Tensor of shape (n, ...)

    Returns
    -------
    entries : int
    """
    with torch.no_grad():
        was_training = net.module_.training
        net.module_.eval()
        one = net.module_(X_t[:1].to(net.device))
        net.module_.train(was_training)
    return int(one[0].numel())


def rankwise_risks(net, X_t, Y_t):
    """Per-rank mean squared error of a rank-batched net on ``(X_t, Y_t)``, in float64.

    Evaluated in chunks (:func:`forward_chunks`): the memory is one chunk's
    outputs, not ``(n, R, ...)`` of them. At most ``_scaling.CHUNK_ELEMENTS`` outputs
    take one float64 pass over the whole array, bit-identical to unchunked
    evaluation.

    Parameters
    ----------
    net : skorch.NeuralNet
    X_t, Y_t : torch.Tensor
        Inputs ``(n, ...)`` and targets ``(n, ...)`` (one target per sample for
        every rank slot).

    Returns
    -------
    risks : ndarray of float64, shape (R,)
        ``nan`` where a slot's outputs are not finite.
    finite : bool
        Whether every output was finite.
    """
    total, finite, count = None, True, 0
    for start, outputs in forward_chunks(net, X_t):
        out = outputs.cpu().double().numpy()
        if not np.all(np.isfinite(out)):
            finite = False
        m = len(out)
        target = Y_t[start:start + m].detach().cpu().double().numpy()[:, None]
        squared = ((out - target) ** 2).reshape(m, out.shape[1], -1)
        if m == len(X_t):
            return squared.mean(axis=(0, 2)), finite
        part = squared.sum(axis=(0, 2))
        total = part if total is None else total + part
        count = squared.shape[2]
    return total / (len(X_t) * count), finite
