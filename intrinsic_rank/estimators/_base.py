"""Pieces shared by the estimators: input and parameter checks, deprecations, the skorch net.

Input convention (SPEC sections 1 and 6)
----------------------------------------
* ``X`` of shape ``(n, L, d)`` is ``n`` sequences of ``L`` tokens of dimension ``d``.
* ``X`` of shape ``(n, L)`` is read as ``L`` one-dimensional tokens, ``(n, L, 1)``;
  this is what scikit-learn's own tooling (and its common checks) feed.
* ``Y`` of shape ``(n, L, d_out)`` is a per-token target.
* ``Y`` of shape ``(n,)`` or ``(n, k)`` is a target of the whole sequence, read at
  the final position (the model's output there, like a causal final query).

``n_features_in_`` is the size of the last axis of ``X`` as scikit-learn counts
columns: the token dimension ``d`` for 3-D input, the number of scalar tokens
``L`` for 2-D input. The sequence length is always stored as ``seq_len_`` and
the token dimension as ``token_dim_``.
"""

import functools
import inspect
import math
import numbers
import warnings

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_array, validate_data
from skorch import NeuralNet
from skorch.callbacks import Callback

from .._validation import check_device, check_int

__all__ = ["ProgressBar", "TrainingDivergedError"]

DIVERGENCE_FACTOR = 1e6
"""A training loss above this many times the targets' mean square is divergence.

The mean square of the targets is the risk of predicting zero, which is about
where a student from a small initialisation starts; a loss a million times
larger is a blow-up, never a transient (the shipped tests and examples stay
below 10 times it)."""

SCALE_WINDOW = (1e-2, 1e2)
"""Root-mean-square sizes of ``X`` or ``Y`` outside this window are standardised."""


class TrainingDivergedError(FloatingPointError):
    """Training produced a non-finite loss (lower ``lr`` or ``init_scale``).

    Raised by all three estimators (:class:`~intrinsic_rank.AttentionRankEstimator`,
    :class:`~intrinsic_rank.EnergyEffectiveRank` through its student, and
    :class:`~intrinsic_rank.ReachabilityEstimator`); a subclass of
    :class:`FloatingPointError`, so code that caught that keeps working.

    Examples
    --------
    >>> issubclass(TrainingDivergedError, FloatingPointError)
    True
    """


class TrainingFinished(KeyboardInterrupt):
    """Raised by a net to end its own training early (skorch's stop signal).

    skorch ends ``fit`` quietly on any :class:`KeyboardInterrupt`; this subclass
    is the intended early stop, every other one a user's interrupt that
    :class:`InterruptibleNet` passes on.
    """


class InterruptibleNet(NeuralNet):
    """A skorch net whose ``fit`` re-raises a user's :class:`KeyboardInterrupt`.

    skorch's ``partial_fit`` catches ``KeyboardInterrupt`` around its training
    loop, runs the ``on_train_end`` callbacks (closing progress bars) and
    returns as if training had finished. Here the loop notes the interrupt and
    ``partial_fit`` raises it again once the callbacks have run, so a Ctrl-C
    never yields a truncated net that looks trained. :class:`TrainingFinished`
    (a net's own early stop) still ends training normally.
    """

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


def clear_fitted(estimator):
    """Remove every fitted attribute (``name_``, and the private state of a fit).

    Parameters
    ----------
    estimator : BaseEstimator
        Its constructor parameters (no trailing underscore) are kept.
    """
    params = set(estimator.get_params(deep=False))
    for name in list(vars(estimator)):
        fitted = name.endswith("_") and not name.startswith("__")
        if name not in params and (fitted or name in _PRIVATE_FIT_STATE):
            delattr(estimator, name)


_PRIVATE_FIT_STATE = frozenset({"_x_ndim", "_seed", "_settings", "_target_rows"})


def fits_from_scratch(fit):
    """Decorate ``fit``: forget the previous fit first, and leave nothing on failure.

    A refit with other settings then keeps no attribute of the old ones (no
    stale ``sweep_`` after ``set_params(ranks=None)``), and a fit that raises,
    a :class:`KeyboardInterrupt` included, leaves the estimator unfitted
    (``check_is_fitted`` raises), never with a half-finished result.
    """

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        clear_fitted(self)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            clear_fitted(self)
            raise

    return wrapper


def checked_device(device):
    """The estimators' device check: a known torch device that can hold tensors here.

    :func:`~intrinsic_rank._validation.check_device` first (unknown names,
    CUDA without a GPU), then ``"meta"`` (a device without data) and any device
    torch knows but this build or machine cannot use (``"mps"`` off macOS,
    ``"cuda:7"`` on a one-GPU machine) are refused with a :class:`ValueError`
    naming ``device``.

    Parameters
    ----------
    device : str or torch.device

    Returns
    -------
    device : torch.device

    Examples
    --------
    >>> checked_device("cpu").type
    'cpu'
    >>> try:
    ...     checked_device("meta")
    ... except ValueError as error:
    ...     print("device='meta'" in str(error))
    True
    """
    device = check_device(device)
    if device.type == "meta":
        raise ValueError(
            "device='meta' holds no data, so nothing can be trained on it; use 'cpu' or 'cuda'"
        )
    if device.type != "cpu":
        try:
            torch.empty(1, device=device)
        except (RuntimeError, AssertionError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ValueError(
                f"device={str(device)!r} is not available here ({reason}); use 'cpu' "
                "or an available accelerator"
            ) from None
    return device


def scale_factor(array):
    """The power of two that brings ``array`` to unit size, or exactly 1.0.

    ``1.0`` when the root mean square of ``array`` lies in ``SCALE_WINDOW``
    (``[1e-2, 1e2]``) or is 0; otherwise ``2^k`` with ``2^k * rms`` in
    ``[2^-0.5, 2^0.5]``. A power of two rescales floats exactly, so undoing it
    loses nothing. Arrays of more than ``CHUNK_ELEMENTS`` entries (a float32
    array or an ``np.memmap`` included) are read in chunks of rows, in float64,
    without a whole float64 copy.

    Parameters
    ----------
    array : ndarray

    Returns
    -------
    factor : float

    Examples
    --------
    >>> import numpy as np
    >>> scale_factor(np.ones(3)), scale_factor(np.full(3, 1e-6)) * 1e-6
    (1.0, 1.048576)
    """
    if getattr(array, "size", 0) > CHUNK_ELEMENTS and getattr(array, "ndim", 0) >= 1:
        rows = _chunk_rows(array)
        peak = 0.0
        for start in range(0, len(array), rows):
            part = np.abs(np.asarray(array[start:start + rows], dtype=np.float64))
            peak = max(peak, float(np.max(part)) if part.size else 0.0)
        if peak == 0.0 or not np.isfinite(peak):
            return 1.0
        total = 0.0
        for start in range(0, len(array), rows):
            part = np.asarray(array[start:start + rows], dtype=np.float64) / peak
            total += float(np.sum(np.square(part)))
        rms = peak * math.sqrt(total / array.size)
    else:
        array = np.asarray(array, dtype=np.float64)
        peak = float(np.max(np.abs(array))) if array.size else 0.0
        if peak == 0.0 or not np.isfinite(peak):
            return 1.0
        rms = peak * math.sqrt(float(np.mean(np.square(array / peak))))
    if SCALE_WINDOW[0] <= rms <= SCALE_WINDOW[1]:
        return 1.0
    return math.ldexp(1.0, -round(math.log2(rms)))


CHUNK_ELEMENTS = 2**22
"""Arrays and evaluation outputs above this many entries are processed in chunks of rows.

At and below it (every shipped test, example and documented run) the code takes
the unchunked path, so those numbers are bit-identical to unchunked evaluation;
above it, memory stays bounded: about ``CHUNK_ELEMENTS`` float64 entries (32 MiB)
per temporary instead of the whole data set's."""


def _chunk_rows(array, per_row=None):
    """Rows per chunk so that one chunk holds about ``CHUNK_ELEMENTS`` entries."""
    if per_row is None:
        per_row = int(np.prod(array.shape[1:], dtype=np.int64)) if array.ndim > 1 else 1
    return max(1, CHUNK_ELEMENTS // max(1, per_row))


def rows_as_tensor(array, name, device, rows=None, scale=1.0):
    """Rows of ``array``, times ``scale``, as one float32 tensor on ``device``, checked finite.

    The tensor is filled chunk by chunk, so the only whole copy made is the
    float32 tensor itself: no float64 or scaled copy of the data, and an
    ``np.memmap`` is read a chunk at a time. Every entry gets the same
    arithmetic as ``as_tensor(array[rows] * scale, ...)``: the two are
    bit-identical.

    Parameters
    ----------
    array : ndarray
    name : str
        Named in the error for entries too large for float32.
    device : torch.device
    rows : ndarray of int or None, default=None
        Row indices to take (all rows when ``None``).
    scale : float, default=1.0
        A power of two multiplying every entry (see :func:`scale_factor`).

    Returns
    -------
    tensor : torch.Tensor of float32

    Examples
    --------
    >>> import numpy as np
    >>> rows_as_tensor(np.arange(6.0).reshape(3, 2), "X", "cpu", rows=np.array([0, 2]),
    ...                scale=0.5)
    tensor([[0.0000, 0.5000],
            [2.0000, 2.5000]])
    """
    n = len(array) if rows is None else len(rows)
    if n * int(np.prod(array.shape[1:], dtype=np.int64)) <= CHUNK_ELEMENTS:
        part = array if rows is None else array[rows]
        return as_tensor(part if scale == 1.0 else part * scale, name, device)
    out = torch.empty((n,) + tuple(array.shape[1:]), dtype=torch.float32, device=device)
    step = _chunk_rows(array)
    for start in range(0, n, step):
        stop = min(n, start + step)
        part = array[start:stop] if rows is None else array[rows[start:stop]]
        part = np.asarray(part)
        out[start:stop] = as_tensor(part if scale == 1.0 else part * scale, name, device)
    return out


def as_tensor(array, name, device):
    """``array`` as a contiguous float32 tensor on ``device``, checked finite.

    Negative strides, Fortran order and other views become one contiguous
    copy (torch accepts no negative stride); a finite float64 entry that
    overflows float32 is a :class:`ValueError` naming ``name``.

    Parameters
    ----------
    array : ndarray
    name : str
    device : torch.device

    Returns
    -------
    tensor : torch.Tensor of float32
    """
    with np.errstate(over="ignore"):  # checked just below
        array32 = np.ascontiguousarray(array, dtype=np.float32)
    if not np.all(np.isfinite(array32)):
        raise ValueError(
            f"{name} has entries too large for float32 (largest |{name}| = "
            f"{float(np.max(np.abs(array))):.3g}, float32 ends at 3.4e+38); rescale {name}"
        )
    return torch.tensor(array32, device=device)


def check_verbose(verbose):
    """The estimators' one check of ``verbose``: an integer ``>= 0``.

    ``0`` is silent, ``1`` draws a progress bar (on a terminal only), ``2`` and
    more print skorch's per-epoch table instead.

    Parameters
    ----------
    verbose : int

    Returns
    -------
    verbose : int
    """
    return check_int(verbose, "verbose", 0)


def is_set(value):
    """Whether a deprecated parameter was given: its value is not ``"deprecated"``.

    Parameters
    ----------
    value : object

    Returns
    -------
    given : bool

    Examples
    --------
    >>> is_set("deprecated"), is_set(None), is_set(300)
    (False, True, True)
    """
    return not (isinstance(value, str) and value == "deprecated")


def renamed(estimator, old, new):
    """The value of a parameter renamed in 0.2, warning if the old name was used.

    scikit-learn's deprecation pattern: the old parameter stays in ``__init__``
    with the default ``"deprecated"``; when it is set, ``fit`` warns with a
    :class:`FutureWarning` and uses its value (it wins over the new name).

    Parameters
    ----------
    estimator : BaseEstimator
    old, new : str
        The parameter's old and new names.

    Returns
    -------
    value : object
        ``getattr(estimator, old)`` if it was set, else ``getattr(estimator, new)``.
    name : str
        The name the value was given under (``old`` or ``new``), for error messages.
    """
    value = getattr(estimator, old)
    if not is_set(value):
        return getattr(estimator, new), new
    warnings.warn(
        f"`{old}` was renamed `{new}` in 0.2 and will be removed in 0.3; "
        f"use {new}={value!r}",
        FutureWarning,
        stacklevel=4,
    )
    return value, old


class ProgressBar(Callback):
    """skorch callback: a tqdm bar over epochs, used by every estimator at ``verbose=1``.

    The bar is drawn only on a terminal (tqdm's ``disable=None``), so logs,
    pipes and CI stay clean; it is dropped when training ends, so it never
    travels with a pickled estimator.

    Parameters
    ----------
    desc : str, default="epochs"
        Label of the bar.
    unit : str, default="epoch"
    postfix : dict or None, default=None
        ``{label: history key}``: values of the last history row shown after
        the bar (floats with four significant digits).
    total : int or None, default=None
        Length of the bar; ``None`` takes the net's ``max_epochs``.

    Examples
    --------
    >>> bar = ProgressBar(desc="cramming", unit="step", postfix={"active": "n_active"})
    >>> bar.get_params()["unit"]
    'step'
    """

    def __init__(self, desc="epochs", unit="epoch", postfix=None, total=None):
        self.desc = desc
        self.unit = unit
        self.postfix = postfix
        self.total = total

    def on_train_begin(self, net, **kwargs):
        from tqdm.auto import tqdm

        total = net.max_epochs if self.total is None else self.total
        # disable=None: no bar when stderr is not a terminal (CI logs, pipes)
        self.bar_ = tqdm(total=total, desc=self.desc, unit=self.unit, leave=False,
                         disable=None)

    def on_epoch_end(self, net, **kwargs):
        self.bar_.update(1)
        if self.postfix:
            row = net.history[-1]
            values = {label: row.get(key) for label, key in self.postfix.items()}
            self.bar_.set_postfix(
                {label: f"{v:.4g}" if isinstance(v, float) else v for label, v in values.items()},
                refresh=False,
            )

    def on_train_end(self, net, **kwargs):
        self.bar_.close()
        del self.bar_  # a closed bar need not travel with a pickled estimator


def _finite_float_array(array, name, ndims, keep_float32=False):
    dtype = (np.float64, np.float32) if keep_float32 else np.float64
    array = check_array(
        array,
        ensure_2d=False,
        allow_nd=True,
        dtype=dtype,
        ensure_all_finite=False,
        ensure_min_samples=1,
        input_name=name,
        copy=False,
    )
    if array.ndim not in ndims:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, ndims))} dimensions; "
            f"got an array of shape {array.shape}"
        )
    # checked a chunk of rows at a time: no whole boolean temporary on big data
    step = _chunk_rows(array)
    for start in range(0, len(array), step):
        part = array[start:start + step]
        if not np.all(np.isfinite(part)):
            bad = "NaN" if np.isnan(part).any() else "infinity"
            raise ValueError(f"{name} contains {bad}; remove or impute those entries")
    if array.size == 0:
        raise ValueError(f"{name} is empty (shape {array.shape})")
    return array


def validate_sequences(estimator, X, Y=None, reset=True, keep_float32=False):
    """Check ``X`` (and ``Y``) and return them as float arrays ``(n, L, d)``.

    Parameters
    ----------
    estimator : BaseEstimator
        Receives ``n_features_in_``, ``seq_len_``, ``token_dim_`` (and with ``Y``
        on reset, ``target_``: ``"sequence"`` or ``"final"``, and ``d_out_``).
    X : array-like of shape (n, L) or (n, L, d)
    Y : array-like of shape (n,), (n, k) or (n, L, d_out), optional
    reset : bool
        ``True`` in ``fit`` (store the shapes), ``False`` at predict time (check
        them against the fitted ones).
    keep_float32 : bool, default=False
        Keep 3-D float32 input (and its ``Y``) in float32 instead of making a
        float64 copy; for callers that compute in float32 anyway (and reduce in
        float64 themselves).

    Returns
    -------
    X : ndarray of shape (n, L, d)
    Y : ndarray of shape (n, L, d_out) or (n, d_out), only if ``Y`` was given
    """
    ndim = getattr(X, "ndim", None)
    if ndim is None:
        ndim = np.asarray(X).ndim
    if ndim > 3:
        raise ValueError(
            "X must be 2-D (n, L) or 3-D (n, L, d); "
            f"got an array with {ndim} dimensions"
        )
    if ndim != 3:
        # 2-D input (and malformed 0-D/1-D input) goes through scikit-learn's own
        # validation so that feature names, sparse input and n_features_in_
        # behave exactly as its tools expect.
        if Y is None:
            X = validate_data(
                estimator, X, reset=reset, dtype=np.float64, ensure_all_finite=True
            )
        else:
            X, Y = validate_data(
                estimator, X, Y, reset=reset, dtype=np.float64,
                ensure_all_finite=True, multi_output=True, y_numeric=True,
            )
        X = X[:, :, None]
    else:
        X = _finite_float_array(X, "X", (3,), keep_float32)
        if reset:
            estimator.n_features_in_ = X.shape[2]
            if hasattr(estimator, "feature_names_in_"):
                del estimator.feature_names_in_
        elif X.shape[2] != estimator.token_dim_:
            raise ValueError(
                f"X has tokens of dimension {X.shape[2]}, but "
                f"{type(estimator).__name__} was fitted on dimension "
                f"{estimator.token_dim_}"
            )
    n, L, d = X.shape
    if reset:
        estimator._x_ndim = ndim
        estimator.seq_len_ = L
        estimator.token_dim_ = d
    elif L != estimator.seq_len_:
        raise ValueError(
            f"X has sequences of length {L}, but {type(estimator).__name__} was "
            f"fitted on length {estimator.seq_len_}"
        )
    if Y is None:
        return X
    Y = _finite_float_array(Y, "Y", (1, 2, 3), keep_float32 and ndim == 3)
    if Y.shape[0] != n:
        raise ValueError(
            f"X and Y have different numbers of samples: {n} and {Y.shape[0]}"
        )
    if Y.ndim == 3 and Y.shape[1] != L:
        raise ValueError(
            f"X and Y have different sequence lengths: {L} and {Y.shape[1]}"
        )
    if reset:
        estimator.target_ = "sequence" if Y.ndim == 3 else "final"
        # predict returns targets shaped like those seen in fit (1-D stays 1-D)
        estimator.y_ndim_ = Y.ndim
    if Y.ndim == 1:
        Y = Y[:, None]
    if reset:
        estimator.d_out_ = Y.shape[-1]
    return X, Y


def select_rank(ranks, heldout_risk, heldout_variance, tol, noise_floor=None):
    """Estimate ``r*``: the smallest rank whose held-out excess risk reaches the floor.

    Parameters
    ----------
    ranks : array-like of shape (R,)
        The rank grid, ascending.
    heldout_risk : array-like of shape (R,)
        Held-out mean squared error of each rank.
    heldout_variance : float
        Mean per-entry variance of the held-out targets (the scale of ``tol``).
    tol : float
        A rank reaches the floor when its excess risk is at most
        ``tol * heldout_variance``.
    noise_floor : float or None
        Known floor; ``None`` takes the smallest held-out risk of the grid.

    Returns
    -------
    selection : dict
        ``index`` (of the selected rank, or of the lowest risk if no rank
        reaches), ``floor``, ``excess`` (array), ``threshold``, ``reached``
        (boolean array) and ``any_reached``.
    """
    risk = np.asarray(heldout_risk, dtype=float)
    floor = float(risk.min()) if noise_floor is None else float(noise_floor)
    excess = risk - floor
    threshold = float(tol) * float(heldout_variance)
    reached = excess <= threshold
    index = int(np.argmax(reached)) if reached.any() else int(np.argmin(risk))
    return dict(index=index, floor=floor, excess=excess, threshold=threshold,
                reached=reached, any_reached=bool(reached.any()))


def sequence_r2(Y_true, Y_pred, sample_weight=None):
    """R^2 of per-token or per-sequence predictions, averaged over output entries.

    ``Y`` is flattened to ``(n, -1)`` and scored with
    :func:`sklearn.metrics.r2_score` (uniform average over columns), so 1-D and
    2-D targets score exactly as scikit-learn scores them and 3-D targets get the
    natural extension.
    """
    Y_true = np.asarray(Y_true, dtype=np.float64)
    n = Y_true.shape[0]
    return r2_score(
        Y_true.reshape(n, -1),
        np.asarray(Y_pred, dtype=np.float64).reshape(n, -1),
        sample_weight=sample_weight,
    )


class SequenceRegressorMixin(RegressorMixin):
    """Tags and ``score`` shared by the sequence estimators.

    The estimators accept 3-D sequence input and multi-output targets; attention
    without positions over scalar tokens is permutation equivariant, so it is
    not meant to be a good generic tabular regressor (``poor_score``).
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = True
        return tags

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 of ``predict``.

        Unlike skorch's default, 3-D targets are accepted: ``Y`` is flattened to
        ``(n, L * d_out)`` and scored with :func:`sklearn.metrics.r2_score`.

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)
        y : array-like, shaped like the targets given to ``fit``
        sample_weight : array-like of shape (n,), optional

        Returns
        -------
        score : float
        """
        Y_pred = self.predict(X)
        Y_true = np.asarray(y)
        shape = Y_true.shape
        if len(shape) == 0:
            raise ValueError(
                f"y must be an array of targets shaped like predict(X), {Y_pred.shape}; "
                f"got {type(y).__name__}"
            )
        n = Y_pred.shape[0]
        per_sample = int(np.prod(Y_pred.shape[1:], dtype=np.int64))
        size = int(np.prod(shape, dtype=np.int64))
        if shape[0] != n or size != n * per_sample:
            raise ValueError(
                f"y has shape {tuple(shape)}, but predict(X) gives {Y_pred.shape}: y must "
                "be shaped like the targets given to fit, one row per sequence of X"
            )
        return sequence_r2(Y_true, Y_pred, sample_weight=sample_weight)


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
    """

    def forward(self, y_pred, y_true):
        residual = y_pred - y_true.unsqueeze(1)
        return residual.pow(2).flatten(2).mean(dim=(0, 2))


def forward_chunks(net, X_t):
    """``net.forward`` on ``X_t`` a chunk of rows at a time: ``(start, outputs)`` pairs.

    One chunk (the whole of ``X_t``) when the outputs hold at most
    ``CHUNK_ELEMENTS`` entries; otherwise chunks of a whole number of the net's
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
    per_row = _output_entries_per_row(net, X_t)
    if n * per_row <= CHUNK_ELEMENTS:
        yield 0, net.forward(X_t, training=False).detach()
        return
    batch = int(net.batch_size) if isinstance(net.batch_size, int) and net.batch_size > 0 else 256
    step = max(batch, (CHUNK_ELEMENTS // per_row) // batch * batch)
    for start in range(0, n, step):
        yield start, net.forward(X_t[start:start + step], training=False).detach()


def _output_entries_per_row(net, X_t):
    """Output entries per sample of ``net`` (from a forward pass on one sample)."""
    with torch.no_grad():
        was_training = net.module_.training
        net.module_.eval()
        one = net.module_(X_t[:1].to(net.device))
        net.module_.train(was_training)
    return int(one[0].numel())


def rankwise_risks(net, X_t, Y_t):
    """Per-rank mean squared error of a rank-batched net on ``(X_t, Y_t)``, in float64.

    Evaluated in chunks (:func:`forward_chunks`): the memory is one chunk's
    outputs, not ``(n, R, ...)`` of them. At most ``CHUNK_ELEMENTS`` outputs
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


class PlateauStopping(Callback):
    """skorch callback: end a rank sweep once every slot's held-out risk has plateaued.

    After each epoch the held-out risk of every rank slot is evaluated (in
    chunks, without gradient). A slot has **plateaued** when its held-out risk
    has not fallen below its best so far by more than ``min_delta`` for
    ``patience`` consecutive epochs. Training ends (:class:`TrainingFinished`)
    at the end of the first epoch at which every slot has plateaued;
    ``max_epochs`` stays the upper bound. The per-epoch held-out risks are
    recorded in the history (``heldout_risk_per_rank``).

    Parameters
    ----------
    X_valid, y_valid : torch.Tensor
        The held-out data (training units).
    patience : int, default=20
    min_delta : float, default=0.0
        Smallest fall of the held-out risk that counts as an improvement.

    Examples
    --------
    >>> PlateauStopping(None, None, patience=5).patience
    5
    """

    def __init__(self, X_valid, y_valid, patience=20, min_delta=0.0):
        self.X_valid = X_valid
        self.y_valid = y_valid
        self.patience = patience
        self.min_delta = min_delta

    def on_train_begin(self, net, **kwargs):
        self.best_ = None
        self.since_ = None
        self.stopped_epoch_ = None

    def on_epoch_end(self, net, **kwargs):
        risks, _ = rankwise_risks(net, self.X_valid, self.y_valid)
        net.history.record("heldout_risk_per_rank", risks.tolist())
        risks = np.where(np.isfinite(risks), risks, np.inf)
        if self.best_ is None:
            self.best_ = risks.copy()
            self.since_ = np.zeros(len(risks), dtype=int)
            return
        improved = risks < self.best_ - self.min_delta
        self.best_ = np.minimum(self.best_, risks)
        self.since_ = np.where(improved, 0, self.since_ + 1)
        if np.all(self.since_ >= self.patience) and len(net.history) < net.max_epochs:
            self.stopped_epoch_ = len(net.history)
            raise TrainingFinished(f"every slot plateaued at epoch {self.stopped_epoch_}")


class RankSweepNet(InterruptibleNet):
    """skorch net that trains every rank slot of a batched student at once.

    It records the per-rank training loss of every epoch in the history
    (``train_loss_per_rank``) and the per-rank loss on all the training data
    before the first step (``initial_loss_``). It stops with :class:`TrainingDivergedError`
    as soon as a batch loss is not finite, or is finite but above
    ``loss_limit`` (a blow-up: ``DIVERGENCE_FACTOR`` times the targets' mean
    square, set by the estimator). A user's interrupt is re-raised
    (:class:`InterruptibleNet`).

    Parameters
    ----------
    *args, **kwargs
        As :class:`skorch.NeuralNet`.
    loss_limit : float or None, default=None
        Largest batch loss of a rank that still counts as training.
    """

    def __init__(self, *args, loss_limit=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_limit = loss_limit

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        self.initial_loss_ = None
        if X is not None and y is not None:
            # the loss before any step, on all the training data (no randomness used)
            if len(X) * _output_entries_per_row(self, X) <= CHUNK_ELEMENTS:
                per_rank = self.criterion_(self.forward(X, training=False), y.to(self.device))
                self.initial_loss_ = per_rank.tolist()
            else:  # in chunks: never all (n, R, ...) outputs at once
                self.initial_loss_ = [float(v) for v in rankwise_risks(self, X, y)[0]]
            self._check_loss(self.initial_loss_, "at initialisation")
        super().on_train_begin(net, X=X, y=y, **kwargs)

    def _check_loss(self, losses, when):
        bad = [r for r, v in zip(self.module_.ranks, losses) if not np.isfinite(v)]
        if bad:
            raise TrainingDivergedError(
                f"training diverged {when}: the loss of rank(s) {bad} is not finite; "
                "lower lr or init_scale"
            )
        limit = self.loss_limit
        if limit is not None and max(losses) > limit:
            bad = [r for r, v in zip(self.module_.ranks, losses) if v > limit]
            raise TrainingDivergedError(
                f"training diverged {when}: the loss of rank(s) {bad} reached "
                f"{max(losses):.3g}, more than {DIVERGENCE_FACTOR:.0e} times the mean "
                f"square of the targets ({limit / DIVERGENCE_FACTOR:.3g}, the risk of "
                "predicting zero); lower lr or init_scale"
            )

    def get_loss(self, y_pred, y_true, X=None, training=False):
        per_rank = self.criterion_(y_pred, y_true)
        if training:
            values = per_rank.detach()
            if not torch.isfinite(values).all():
                bad = [r for r, v in zip(self.module_.ranks, values.tolist())
                       if not np.isfinite(v)]
                raise TrainingDivergedError(
                    f"training diverged at epoch {len(self.history)}: the loss of "
                    f"rank(s) {bad} is not finite; lower lr or init_scale"
                )
            losses = values.cpu().tolist()
            self._check_loss(losses, f"at epoch {len(self.history)}")
            self.history.record_batch("train_loss_per_rank", losses)
        return per_rank.sum()

    def on_epoch_end(self, net, **kwargs):
        batches = self.history[-1, "batches"]
        losses = [b["train_loss_per_rank"] for b in batches if "train_loss_per_rank" in b]
        sizes = [b["train_batch_size"] for b in batches if "train_loss_per_rank" in b]
        if losses:
            mean = np.average(np.asarray(losses), axis=0, weights=sizes)
            self.history.record("train_loss_per_rank", mean.tolist())
        super().on_epoch_end(net, **kwargs)


def warn_if_loss_never_fell(net, what="training"):
    """A :class:`~sklearn.exceptions.ConvergenceWarning` for ranks whose loss never fell.

    Compares each rank's mean loss over the last epoch with its loss on all the
    training data before the first optimiser step: a rank that ended no lower
    than it started learned nothing (``lr`` too small or too large, or a
    saddle). Needs at least two epochs.

    Parameters
    ----------
    net : RankSweepNet
        A trained net.
    what : str
        Named in the message.

    Returns
    -------
    ranks : list of int
        The ranks warned about.
    """
    from sklearn.exceptions import ConvergenceWarning

    if len(net.history) < 2 or net.initial_loss_ is None:
        return []
    final = net.history[-1, "train_loss_per_rank"]
    stuck = [(r, a, b) for r, a, b in zip(net.module_.ranks, net.initial_loss_, final)
             if b >= a]
    if stuck:
        detail = "; ".join(f"rank {r}: {a:.4g} -> {b:.4g}" for r, a, b in stuck)
        warnings.warn(
            f"the {what} loss never fell below its initial value ({detail}) in "
            f"{len(net.history)} epochs: nothing was learned. Change lr (too small "
            "or too large), init_scale or max_epochs.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return [r for r, _, _ in stuck]
