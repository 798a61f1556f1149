"""The skorch side of the estimators: the nets, their batches and loss, chunked evaluation,
and the dtype the training forward pass runs in.

:class:`InterruptibleNet` passes a user's interrupt on (every estimator's nets);
:class:`RankSweepNet` trains the rank slots of :class:`~intrinsic_rank.AttentionRankEstimator`
at once, in the dtype of ``compute_dtype`` (:func:`resolve_compute_dtype`,
:func:`training_autocast`). Rules that act during training (divergence, the plateau rule,
the per-epoch records) are skorch callbacks (:mod:`._callbacks`); the nets here hold only
what a callback cannot: the handling of an exception around the training loop, and the
rank-batched loss itself. The rank-batched data flow: :class:`TensorBatchIterator` slices
mini-batches from the whole tensors, :class:`RankwiseMSELoss` is the per-rank loss, and
every evaluation goes through the net a chunk of rows at a time (:func:`forward_chunks`,
:func:`rankwise_risks`).

**The training dtype**, chosen without a timing: ``compute_dtype="auto"`` trains in
bfloat16 on a CUDA device with native bfloat16 arithmetic
(``torch.cuda.is_bf16_supported(including_emulation=False)``, compute capability 8.0 and
later) and in float32 everywhere else, the CPU included. The choice follows from the
device alone, so the same data, seed and device type give the same numbers whatever else
the machine is doing. ``"float32"`` and ``"bfloat16"`` are explicit requests;
``"bfloat16"`` is refused on a CUDA device that cannot run it at all.
"""

import contextlib
import ctypes
import functools

import numpy as np
import torch
from skorch import NeuralNet
from skorch.callbacks import EarlyStopping
from skorch.dataset import unpack_data

from . import _scaling
from ._errors import TrainingFinished

__all__ = ["COMPUTE_DTYPES", "InterruptibleNet", "RankSweepNet", "RankwiseMSELoss",
           "TensorBatchIterator", "forward_chunks", "kept_outputs", "output_entries_per_row",
           "rankwise_risks", "release_freed_memory", "resolve_compute_dtype", "slot_kernels",
           "slot_mixers", "training_autocast"]


COMPUTE_DTYPES = ("auto", "float32", "bfloat16")
"""The values of ``AttentionRankEstimator(compute_dtype=...)``."""


def _cuda_bfloat16(device, including_emulation):
    with torch.cuda.device(device):
        return torch.cuda.is_bf16_supported(including_emulation=including_emulation)


def resolve_compute_dtype(compute_dtype, device):
    """The dtype a fit trains in: ``compute_dtype`` with ``"auto"`` resolved by the device.

    Parameters
    ----------
    compute_dtype : {"auto", "float32", "bfloat16"}
    device : str or torch.device

    Returns
    -------
    dtype : {"float32", "bfloat16"}

    Raises
    ------
    ValueError
        ``"bfloat16"`` on a CUDA device without bfloat16 support, or an
        unknown value.

    Examples
    --------
    >>> resolve_compute_dtype("auto", "cpu")
    'float32'
    >>> resolve_compute_dtype("bfloat16", "cpu")
    'bfloat16'
    """
    device = torch.device(device)
    if compute_dtype == "float32":
        return "float32"
    if compute_dtype == "auto":
        native = device.type == "cuda" and _cuda_bfloat16(device, including_emulation=False)
        return "bfloat16" if native else "float32"
    if compute_dtype == "bfloat16":
        if device.type == "cuda" and not _cuda_bfloat16(device, including_emulation=True):
            raise ValueError(f"compute_dtype='bfloat16' needs a device that supports "
                             f"bfloat16; {device} does not (torch.cuda.is_bf16_supported() "
                             "is False): use compute_dtype='float32' or 'auto'")
        return "bfloat16"
    raise ValueError(f"compute_dtype must be one of {list(COMPUTE_DTYPES)}; got "
                     f"{compute_dtype!r}")


def training_autocast(compute_dtype, device):
    """The context a student's training forward pass runs in at ``compute_dtype``.

    ``"float32"``: no change. ``"bfloat16"``: ``torch.autocast`` to bfloat16 on
    ``device``'s type, so matrix products (projections, scores, mixing) run in
    bfloat16 while the parameters, the optimiser state, the loss (computed on
    the outputs cast back to float32) and every evaluation stay float32.

    Parameters
    ----------
    compute_dtype : {"float32", "bfloat16"}
        A resolved dtype (:func:`resolve_compute_dtype`).
    device : str or torch.device

    Returns
    -------
    context : context manager

    Examples
    --------
    >>> import torch
    >>> with training_autocast("bfloat16", "cpu"):
    ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
    torch.bfloat16
    >>> with training_autocast("float32", "cpu"):
    ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
    torch.float32
    """
    if compute_dtype == "float32":
        return contextlib.nullcontext()
    if compute_dtype == "bfloat16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"training_autocast takes a resolved compute dtype, 'float32' or "
                     f"'bfloat16'; got {compute_dtype!r}")


class InterruptibleNet(NeuralNet):
    """A skorch net whose ``fit`` re-raises a user's :class:`KeyboardInterrupt`.

    skorch's ``partial_fit`` catches ``KeyboardInterrupt`` around its training
    loop, runs the ``on_train_end`` callbacks (closing progress bars) and
    returns as if training had finished. Here the loop notes the interrupt and
    ``partial_fit`` raises it again once the callbacks have run, so a Ctrl-C
    never yields a truncated net that looks trained. A callback's early stop
    still ends training normally: :class:`~._errors.TrainingFinished`, and the
    stop of a :class:`skorch.callbacks.EarlyStopping` whose patience ran out
    (skorch raises a plain ``KeyboardInterrupt`` for it). Callbacks never see
    the exception that ends the loop, so this stays a method of the net.
    """

    def notify(self, method_name, **cb_kwargs):
        getattr(self, method_name)(self, **cb_kwargs)
        for _, callback in self.callbacks_:
            try:
                getattr(callback, method_name)(self, **cb_kwargs)
            except TrainingFinished:
                raise
            except KeyError as missing:
                monitor = getattr(callback, "monitor", None)
                if not (isinstance(monitor, str) and self.history
                        and monitor not in self.history[-1]):
                    raise
                recorded = ", ".join(k for k in self.history[-1] if k != "batches")
                raise ValueError(
                    f"the callback {type(callback).__name__} monitors {monitor!r}, which "
                    f"this estimator's history does not record (each epoch records: "
                    f"{recorded}); give monitor='train_loss' or a key that one of your "
                    "callbacks records") from missing
            except KeyboardInterrupt as stop:
                patience_ran_out = (isinstance(callback, EarlyStopping)
                                    and getattr(callback, "misses_", 0) >= callback.patience)
                if patience_ran_out:
                    raise TrainingFinished(f"{type(callback).__name__} stopped training") from stop
                raise

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        try:
            return super().fit_loop(X, y, epochs=epochs, **fit_params)
        except TrainingFinished:
            raise
        except KeyboardInterrupt:
            self.interrupted_ = True
            raise

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        self.interrupted_ = False
        super().partial_fit(X, y, classes, **fit_params)
        if self.interrupted_:
            raise KeyboardInterrupt(
                f"training interrupted at epoch {len(self.history)} of {self.max_epochs}"
            )
        return self


class RankSweepNet(InterruptibleNet):
    """skorch net that trains every rank slot of a batched student at once.

    The criterion returns one loss per rank slot; the net sums them, so every
    slot gets exactly its own gradient, and records the per-rank losses of
    every training batch in the history (``train_loss_per_rank``), where the
    callbacks of :mod:`._callbacks` read them (divergence, the epoch mean).

    Parameters
    ----------
    *args, **kwargs
        As :class:`skorch.NeuralNet`; ``criterion`` returns ``(R,)`` losses.
    compute_dtype : {"float32", "bfloat16"}, default="float32"
        The dtype of the training forward pass
        (:func:`~intrinsic_rank.estimators._net.training_autocast`); the
        outputs are cast back to float32 before the loss, and evaluation
        (``training=False``) always runs in float32.
    """

    def __init__(self, *args, compute_dtype="float32", **kwargs):
        super().__init__(*args, **kwargs)
        self.compute_dtype = compute_dtype

    def infer(self, x, **fit_params):
        if self.compute_dtype == "float32" or not self.module_.training:
            return super().infer(x, **fit_params)
        with training_autocast(self.compute_dtype, self.device):
            out = super().infer(x, **fit_params)
        return out.float()

    def train_step_single(self, batch, **fit_params):
        """skorch's training step, without keeping the predictions through the backward.

        The per-rank loss keeps its own residual, so nothing needs ``y_pred`` once the
        loss is computed; skorch would hold it until the step returns (15 MB a batch at
        ``d = 64``, ``L = 32`` and seven ranks, at the moment memory peaks). The
        ``on_batch_end`` of a training batch therefore gets ``y_pred=None``.
        """
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        loss = self.get_loss(self.infer(Xi, **fit_params), yi, X=Xi, training=True)
        loss.backward()
        return {"loss": loss, "y_pred": None}

    def on_epoch_end(self, net, **kwargs):
        super().on_epoch_end(net, **kwargs)
        # the steps' freed heap, back to the system once an epoch (a tenth of a
        # millisecond): what the allocator keeps no longer grows over a long run
        release_freed_memory()

    def get_loss(self, y_pred, y_true, X=None, training=False):
        per_rank = self.criterion_(y_pred, y_true)
        if training:
            self.history.record_batch("train_loss_per_rank", per_rank.detach().cpu().tolist())
        return per_rank.sum()


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

    Parameters
    ----------
    reuse_residual : bool, default=False
        Compute the gradient in the memory of the residual the loss keeps, instead of
        a new tensor of the predictions' size: for a graph backpropagated once, as a
        training step's (the estimators' nets set it). A second backward through the
        same graph (``retain_graph=True``, ``gradcheck``) is then refused by autograd's
        check of modified saved tensors.

    Examples
    --------
    >>> import torch
    >>> RankwiseMSELoss()(torch.ones(4, 2, 3), torch.zeros(4, 3))
    tensor([1., 1.])
    """

    def __init__(self, reuse_residual=False):
        super().__init__()
        self.reuse_residual = reuse_residual

    def forward(self, y_pred, y_true):
        return _RankwiseMSE.apply(y_pred, y_true, self.reuse_residual)


class _RankwiseMSE(torch.autograd.Function):
    """Per-rank MSE with one residual and one product in the backward.

    Autograd's ``(y_pred - y).pow(2).mean`` keeps the residual, the square and
    their gradients as separate full-size tensors; here the backward is
    ``2 g_r / m * residual``, in whatever memory layout ``y_pred`` has (in the
    residual's own memory with ``reuse_residual``).
    """

    @staticmethod
    def forward(ctx, y_pred, y_true, reuse_residual=False):
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
        ctx.reuse_residual = bool(reuse_residual)
        return per_rank

    @staticmethod
    def backward(ctx, grad):
        (residual,) = ctx.saved_tensors
        scale = grad * (2.0 / ctx.count)
        shape = (-1, 1, 1) if ctx.rank_major else (1, -1) + (1,) * (residual.dim() - 2)
        if ctx.reuse_residual:
            grad_pred = residual.mul_(scale.view(shape))
        else:
            grad_pred = residual * scale.view(shape)
        if ctx.rank_major:
            grad_pred = grad_pred.view(ctx.pred_shape[1], ctx.pred_shape[0],
                                       *ctx.pred_shape[2:]).movedim(0, 1)
        grad_true = -grad_pred.sum(dim=1) if ctx.true_needs_grad else None
        return grad_pred, grad_true, None


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, Windows, musl)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None


def release_freed_memory():
    """Hand the memory freed by training back to the operating system (glibc only).

    On the CPU, torch's tensors of a training step (a few to a few tens of MB each)
    come from the C library's heap, and glibc keeps what they free for later use:
    after a run over ``d = 64, L = 32`` data it held about 150 MB no tensor used. The
    evaluation that follows allocates tensors of other sizes and grew the process
    above both. ``malloc_trim(0)`` returns those free pages between the two, as dask's
    workers do; where the C library has no ``malloc_trim`` this does nothing.

    Returns
    -------
    released : bool
        Whether the C library released any memory.

    Examples
    --------
    >>> release_freed_memory() in (True, False)
    True
    """
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def forward_chunks(net, X_t):
    """``net.forward`` on ``X_t`` a chunk of rows at a time: ``(start, outputs)`` pairs.

    One chunk (the whole of ``X_t``, on the CPU) when the outputs hold at most
    ``_scaling.CHUNK_ELEMENTS`` entries; otherwise one of the net's batches at a time,
    on the net's device and never concatenated, so every sample goes through the same
    batched forward as in one call and the memory is one batch's outputs. Outputs
    are float32 tensors without gradient.

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
    release_freed_memory()  # what the training steps freed, before the outputs are built
    start = 0
    for outputs in net.forward_iter(X_t, training=False, device=net.device):
        yield start, outputs.detach()
        start += len(outputs)


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
    total, finite = None, True
    for start, outputs in forward_chunks(net, X_t):
        m = len(outputs)
        if m == len(X_t):  # one pass over at most CHUNK_ELEMENTS outputs
            out = outputs.cpu().double().numpy()
            target = Y_t[:m].detach().cpu().double().numpy()[:, None]
            squared = ((out - target) ** 2).reshape(m, out.shape[1], -1)
            return squared.mean(axis=(0, 2)), bool(np.all(np.isfinite(out)))
        # a chunk a slot at a time: float64 temporaries of one slot's outputs, not of
        # every slot's (at R = 13 slots of 256 x 32 x 64 outputs, 4 MB instead of 160 MB)
        target = Y_t[start:start + m].detach().to(outputs.device, torch.float64)
        part = np.empty(outputs.shape[1])
        for slot in range(outputs.shape[1]):
            residual = outputs[:, slot].double() - target
            part[slot] = float(torch.dot(residual.reshape(-1), residual.reshape(-1)))
            finite = finite and bool(torch.isfinite(outputs[:, slot]).all())
        total = part if total is None else total + part
    return total / Y_t[0].numel() / len(X_t), finite


def slot_kernels(module, attention, X_t, x_scale):
    """The kernel (the operator for ``"fixed"``) of every slot, in the units of ``X``.

    Parameters
    ----------
    module : RankBatchedStudent
        The trained batched student.
    attention : str
        Its class.
    X_t : torch.Tensor
        The training sequences, in training units (the ``"kernel"`` class's tokens).
    x_scale : float
        The power of two ``X`` was trained in units of.

    Returns
    -------
    kernels : ndarray of shape (R, d, d) or (R, L, L)
        Float32, except ``"linear"``/``"softmax"`` kernels rescaled to float64 when
        ``x_scale != 1``.
    """
    with torch.no_grad():
        if attention == "fixed":
            kernels = module.operator()
        elif attention == "kernel":
            # no static d x d kernel: the kernel between the data's distinct
            # tokens (at most 512), of rank <= the feature rank
            tokens = X_t[:len(X_t)]  # a tensor (a part given as Rows is gathered)
            tokens = torch.unique(tokens.reshape(-1, tokens.shape[-1]), dim=0)
            step = max(1, -(-len(tokens) // 512))
            kernels = module.token_kernel(tokens[::step])
        else:
            kernels = module.kernel()
    # Kept in the parameters' dtype (float32): the numerical rank's
    # threshold then uses float32's epsilon, not float64's.
    kernels = kernels.detach().cpu().numpy()
    if attention in ("linear", "softmax"):
        # scores x K x^T of standardised tokens: K in the units of X is s^2 K, taken
        # to float64 where s != 1 (a float32 product overflows for X below 1e-19)
        kernels = _scaling.in_user_units(kernels, x_scale**2)
    return kernels


def kept_outputs(net, X_t, kept):
    """The outputs of the kept slots, ``(n, R, ...)``, as a float64 array (training units).

    Filled a chunk at a time (:func:`~._training_data.forward_chunks`), so no array of every
    slot's outputs for all of ``X_t`` is built beyond one chunk.

    Parameters
    ----------
    net : RankSweepNet
    X_t : torch.Tensor
    kept : callable
        ``kept(values, axis)``: the kept slots of an array along ``axis``.

    Returns
    -------
    outputs : ndarray
    """
    out = None
    for start, chunk in forward_chunks(net, X_t):
        chunk = kept(chunk.cpu().double().numpy(), axis=1)
        if len(chunk) == len(X_t):
            return chunk
        if out is None:
            out = np.empty((len(X_t),) + chunk.shape[1:])
        out[start:start + len(chunk)] = chunk
    return out


def slot_mixers(module, X_t, slot):
    """The ``L x L`` token mixer of one slot for each sequence, in chunks of sequences.

    Parameters
    ----------
    module : RankBatchedStudent
    X_t : torch.Tensor of shape (n, L, d)
    slot : int

    Returns
    -------
    mixers : ndarray of shape (n, L, L)
    """
    L = X_t.shape[1]
    slots = len(module.ranks)
    rows = len(X_t) if len(X_t) * slots * L * L <= _scaling.CHUNK_ELEMENTS else max(
        1, _scaling.CHUNK_ELEMENTS // (slots * L * L))
    mixers = np.empty((len(X_t), L, L))
    with torch.no_grad():
        for start in range(0, len(X_t), rows):
            part = module.mixer(X_t[start:start + rows])[:, slot]
            mixers[start:start + rows] = part.cpu().double().numpy()
    return mixers
