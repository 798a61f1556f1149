"""AttentionRankEstimator: the attention-native intrinsic rank of a task.

One file for one estimator: its pieces (parameter checks, the net and its
callbacks, batching, scaling, rank selection and the adaptive search, the
attention class of ``attention="auto"``) live in their own modules; what remains
is the estimator's flow (split, choose the class, train one or several batched
runs, select, check the evidence, store the kernels, predict), whose methods
share the fitted attributes they write. About a quarter of the file is its
docstring.
"""

import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import spectral
from .._validation import check_int, draw_seed
from ..nn import KERNEL_STUDENT_MAPS, STUDENTS, RotarySoftmaxStudent
from . import _scaling
from ._attention_class import AUTO_ATTENTION, MIN_HELDOUT_R2, choose_attention, class_risk_text
from ._batching import RankwiseMSELoss, TensorBatchIterator, forward_chunks, rankwise_risks
from ._callbacks import (
    DIVERGENCE_FACTOR,
    DivergenceCheck,
    FitProgress,
    PlateauStopping,
    RankwiseEpochLoss,
    user_callbacks,
    warn_if_loss_never_fell,
)
from ._compute_dtype import COMPUTE_DTYPES, resolve_compute_dtype
from ._errors import TrainingDivergedError
from ._fitted import fits_from_scratch
from ._inputs import heldout_size, validate_sequences
from ._net import RankSweepNet
from ._options import check_student_options, resolve_optimizer
from ._params import (
    Boolean,
    Callbacks,
    Device,
    Integer,
    Options,
    Real,
    Rule,
    Seed,
    validate_params,
)
from ._scaling import rows_as_tensor, scale_factor
from ._scoring import SequenceRegressorMixin
from ._selection import adaptive_rank_search, coarse_rank_grid, grid_cut_text, select_rank

__all__ = ["AttentionRankEstimator"]

EARLY_STOPPING_PATIENCE = 20
"""The default of ``n_iter_no_change``: epochs without improvement before a slot has plateaued."""

EARLY_STOPPING_DELTA = 0.01
"""An improvement is a fall of the held-out risk by more than this share of ``tol * variance``."""

def _mean_square(Y_t):
    """Mean square of a tensor's entries, accumulated in float64 by chunks of rows."""
    total, rows = 0.0, max(1, _scaling.CHUNK_ELEMENTS // max(1, Y_t[0].numel()))
    for start in range(0, len(Y_t), rows):
        total += float(Y_t[start:start + rows].double().square().sum())
    return total / Y_t.numel()


def _heldout_variance(Y, rows):
    """Mean per-entry variance of ``Y[rows]`` (float64 arithmetic, whatever ``Y``'s dtype)."""
    part = Y[rows]
    if part.dtype == np.float64:
        return np.mean(np.var(part, axis=0))
    return np.mean(np.var(part, axis=0, dtype=np.float64))


def _check_feature_map(estimator, value):
    if estimator.attention != "kernel":
        raise ValueError(
            f"feature_map applies to attention='kernel' only; got attention="
            f"{estimator.attention!r} with feature_map={value!r}"
        )
    if not isinstance(value, str) or value not in KERNEL_STUDENT_MAPS:
        raise ValueError(
            f"unknown feature_map {value!r}; use one of "
            f"{list(KERNEL_STUDENT_MAPS)} (nonnegative maps: the Min-IP theorem applies)"
        )
    return value


def _check_rank_grid(estimator, value):
    """A sweep's grid: ``"auto"`` or distinct integers ``>= 1``, sorted (limits need the data)."""
    if estimator.rank is not None:
        raise ValueError("give either rank (one student) or rank_grid (a sweep), not both")
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"rank_grid must be a list of ranks or 'auto'; got {value!r}")
        return value
    grid = np.asarray(value)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"rank_grid must be a non-empty 1-D list; got {value!r}")
    # the entries as given: numpy would read [True, 2] as [1, 2]
    entries = value.tolist() if isinstance(value, np.ndarray) else list(value)
    checked = [check_int(r, "every entry of rank_grid") for r in entries]
    if len(set(checked)) != len(checked):
        raise ValueError(f"rank_grid contains duplicates: {checked}")
    return sorted(checked)




POSITIONAL = ("rope",)
"""The positional schemes of ``AttentionRankEstimator(positional=...)`` besides ``None``."""

_SEQUENCE_CLASSES = ("linear", "softmax")


def _check_causal(estimator, value):
    value = Boolean().check(value, "causal", estimator)
    if value and estimator.attention not in _SEQUENCE_CLASSES:
        raise ValueError(f"causal=True applies to attention in {list(_SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    return value


def _check_positional(estimator, value):
    if value not in POSITIONAL:
        raise ValueError(f"positional must be None or one of {list(POSITIONAL)}; got {value!r}")
    if estimator.attention != "softmax":
        raise ValueError(f"positional={value!r} applies to attention='softmax' (the rotary "
                         f"heads of causal LMs); got attention={estimator.attention!r}")
    return value


def _check_value_map(estimator, value):
    if estimator.attention not in _SEQUENCE_CLASSES:
        raise ValueError(f"value_map applies to attention in {list(_SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 2 or not np.all(np.isfinite(array)):
        raise ValueError(f"value_map must be a finite 2-D array of shape (d, d_out); got "
                         f"shape {array.shape}" + ("" if array.ndim != 2 else
                                                   " with non-finite entries"))
    return array


def _check_init_weights(estimator, value):
    from collections.abc import Mapping

    if estimator.attention not in _SEQUENCE_CLASSES:
        raise ValueError(f"init_weights applies to attention in {list(_SEQUENCE_CLASSES)}; got "
                         f"attention={estimator.attention!r}")
    if not isinstance(value, Mapping) or set(value) != {"query", "key"}:
        raise ValueError("init_weights must be None or a dict with exactly the keys 'query' "
                         f"and 'key' (arrays of shape (d, k)); got {value!r:.200}")
    arrays = {name: np.asarray(value[name], dtype=np.float64) for name in ("query", "key")}
    for name, array in arrays.items():
        if array.ndim != 2 or not np.all(np.isfinite(array)):
            raise ValueError(f"init_weights[{name!r}] must be a finite 2-D array of shape "
                             f"(d, k); got shape {array.shape}")
    return arrays


def _check_student_options(estimator, value):
    if estimator.attention == "auto":
        if value:
            raise ValueError(
                f"student_options applies to an explicit attention; got attention='auto' "
                f"with student_options={value!r} (the classes compared take their defaults)"
            )
        return {}
    return check_student_options(value, estimator.attention, estimator._student_class())


class AttentionRankEstimator(SequenceRegressorMixin, BaseEstimator):
    """Attention students of a given query-key rank, and the rank a task needs.

    The estimator trains one rung of the interpolation ladder (the Entropic Bound paper):
    B0 ``"fixed"`` (``Y = A X V`` with an input-independent operator of rank
    ``r``), B1 ``"linear"`` attention, B2 ``"softmax"`` attention or B3
    ``"block"`` (a Transformer block around the rank-``r`` softmax attention).
    With ``rank`` it fits one student. With ``rank_grid`` it trains the whole grid in
    one batched optimisation, measures each rank's held-out risk and estimates the
    attention-native intrinsic rank ``r*_attn``: the smallest rank whose held-out
    excess risk reaches the noise floor within ``tol``.

    Parameters
    ----------
    attention : str, default="softmax"
        ``"fixed"``, ``"linear"``, ``"softmax"``, ``"block"``, ``"kernel"``,
        ``"dense"`` or ``"auto"``. The student: rung B0, B1, B2 or B3 of the ladder, or for Min-IP
        normalised nonnegative kernel attention of feature rank ``rank``
        (``"kernel"``, ranks up to ``min(2^d, 4096)``) or dense softmax attention
        with ``rank``-dimensional scores and a fixed temperature (``"dense"``);
        see :mod:`intrinsic_rank.nn`. ``r*`` is defined inside the class.
        ``"auto"`` (a sweep only) chooses the class from the data: a full-rank
        student of each of ``"fixed"``, ``"linear"`` and ``"softmax"``
        (``AUTO_ATTENTION``)
        trains with the sweep's seed, split, ``max_epochs`` and stopping rule, one
        after the other, and the simplest class whose held-out risk is within
        ``tol`` times the held-out variance of the lowest is kept
        (``attention_``, ``class_risks_``); ``r*`` is then estimated inside it,
        exactly as an explicit ``attention=attention_`` with the same seed would
        (a grid rank above the chosen class's limit is left out). The three extra
        full-rank runs cost about three single-rank fits.
        ``student_options`` and ``feature_map`` need an explicit class.
    rank : int or None, default=None
        Rank of a single student: the query-key kernel rank (``1 <= rank <= d``),
        or the operator rank for ``"fixed"`` (``1 <= rank <= L``). ``None``
        means full rank. Must be ``None`` when ``rank_grid`` is given.
    rank_grid : sequence of int, "auto" or None, default=None
        Rank grid of a sweep. ``fit`` trains every rank at once on a training
        part of the data, scores each on the held-out part
        (``validation_fraction``; at least two held-out sequences, whose
        variance scales ``tol``) and sets ``rank_`` to the estimated ``r*``.
        ``"auto"`` is an adaptive search for the same ``r*`` with less training:
        a coarse batched grid (the powers of two below the rank limit, and the
        limit: ``1, 2, 4, ..., 64`` at ``d = 64``), then batched refinement
        rounds of at most three ranks inside the bracket between the selected
        rank and the trained rank below it, until the bracket is closed (see
        ``adaptive_rank_search``). It relies on the excess risk falling
        with rank. At ``d = 64`` it trains at most 14 ranks instead of 64
        (``trained_ranks_``, ``rank_epochs_``), in up to four rounds one after
        the other. The noise floor is estimated from the ranks trained.
    max_epochs : int, default=200
        Passes over the training data.
    lr : float, default=3e-3
        Learning rate.
    batch_size : int or "auto", default="auto"
        Mini-batch size (sequences). ``"auto"`` uses
        ``min(256, max(16, n_train // 8))``: batches of 256 on large data, and
        at least about 8 optimisation steps per epoch on small data, so that the
        default ``max_epochs`` trains small data sets as far as large ones.
    init_scale : float, default=0.1
        Factor matrices start ``N(0, init_scale^2 / fan_in)``; small values give
        the implicit low-rank bias behind the recovery principle.
    optimizer : {"adam", "adamw", "sgd"} or torch.optim.Optimizer subclass, default="adam"
        Optimiser. Elementwise optimisers keep the rank slots of a sweep exactly
        independent.
    weight_decay : float, default=0.0
        Weight decay passed to the optimiser.
    noise_floor : float or None, default=None
        Known noise floor (noise variance ``sigma^2``) of the task. ``None``
        estimates it after a sweep as the smallest held-out risk over the grid,
        which assumes that the grid's largest ranks reach the floor.
    tol : float, default=0.02
        A rank reaches the floor when its held-out excess risk is at most
        ``tol`` times the held-out variance of the targets (a scale-free
        "fraction of unexplained variance" above the floor).
    validation_fraction : float, default=0.2
        Share of the sequences held out to score a sweep (ignored for a single
        rank, which trains on all data). ``0`` trains every rank on all the data
        and scores the sweep in-sample: a capacity question (can rank ``r`` fit
        this family?) rather than a generalisation one.
    early_stopping : bool, default=False
        Convergence-aware stopping of a sweep (ignored for a single rank). After
        every epoch each rank slot's held-out risk is evaluated; a slot has
        plateaued when that risk has not fallen below its best so far by more
        than ``0.01 * tol * variance`` (the held-out variance of the targets)
        for ``n_iter_no_change`` consecutive epochs. Training ends when every
        slot has plateaued; ``max_epochs`` stays the upper bound. The held-out risks
        per epoch are in ``history_`` (``heldout_risk_per_rank``). The
        per-epoch evaluation costs a forward pass over the held-out part.
    n_iter_no_change : int, default=20
        The patience of ``early_stopping``: epochs without improvement after
        which a slot has plateaued (the name scikit-learn's estimators use).
    feature_map : {None, "exp", "elu+1", "relu"}, default=None
        The nonnegative feature map of ``attention="kernel"`` students,
        applied to their logits: ``None`` or ``"exp"`` the learned exponential
        map, ``"elu+1"`` (linear transformers), ``"relu"``
        (:data:`~intrinsic_rank.nn.KERNEL_STUDENT_MAPS`). All keep the kernel
        nonnegative with feature rank at most the student's rank. Any other
        attention takes only ``None``.
    student_options : dict or None, default=None
        Extra keyword arguments of the student class, for example
        ``{"hidden": 32, "positional": True}`` for ``"kernel"`` or
        ``{"temperature": 0.5}`` for ``"dense"``. An unknown key is a
        ``ValueError`` that lists the keys the student accepts.
    random_state : None, int or numpy.random.RandomState, default=None
        Seeds the split, the initialisation and the batch order: the same seed
        gives the same numbers. The slot of rank ``r`` is initialised from
        ``(seed, r)``, so a sweep's rank-``r`` student is the student a
        single-rank fit with the same seed and data would train.
    device : str or torch.device, default="cpu"
        Torch device.
    verbose : int, default=0
        0 silent; 1 a progress bar over epochs; 2 skorch's per-epoch table.
    compute_dtype : {"auto", "float32", "bfloat16"}, default="auto"
        The dtype of the students' training forward pass. ``"bfloat16"`` runs
        their products under bfloat16 autocast; parameters, optimiser state,
        the loss and every held-out evaluation (so the choice of ``r*``, the
        floor, the class of ``attention="auto"`` and the kernels) stay
        float32. ``"auto"`` is bfloat16 on a CUDA device with native bfloat16
        arithmetic and float32 elsewhere (the CPU included): chosen by the
        device, never by a timing, so one seed on one device type gives one
        answer. ``compute_dtype_`` records the dtype trained in.
    causal : bool, default=False
        ``"linear"`` and ``"softmax"`` students with a causal mask: position
        ``i`` mixes positions ``j <= i`` only, as every head of a causal LM.
    positional : {None, "rope"}, default=None
        ``"rope"`` (``attention="softmax"`` only): the rotary student
        :class:`~intrinsic_rank.nn.RotarySoftmaxStudent`, whose scores rotate
        queries and keys by their positions as the heads of rotary language
        models do (Llama, Qwen2, SmolLM2; the ``"rotate_half"`` layout).
        Its **rank is the rank of the query projection** ``W_Q = A C``
        (``A`` of shape ``(d, r)``), keys at the full head width, so that the
        query-key kernel at every relative offset has rank at most ``r``;
        ranks go up to ``min(d, head_dim)``. ``student_options`` may set
        ``head_dim`` (default ``d_out``) and ``score_scale`` (default
        ``1 / sqrt(head_dim)``). ``kernel_`` is the kernel at offset 0.
    rope_theta : float, default=10000.0
        The rotary base of ``positional="rope"`` (ignored otherwise).
    value_map : array-like of shape (d, d_out) or None, default=None
        A known value map ``W_V`` of ``"linear"`` and ``"softmax"`` students
        (not trained): for distilling a head whose values are known, so that
        only the query-key part, and with it the rank, is fitted.
    init_weights : dict or None, default=None
        ``{"query": W_Q, "key": W_K}``, arrays of shape ``(d, k)``, for
        ``"linear"`` and ``"softmax"``: every rank slot starts from the
        rank-``r`` truncation (SVD) of a teacher instead of a random draw --
        of the query projection for the rotary student (keys copied), of the
        kernel ``W_Q W_K^T`` otherwise. The warm start of distilling a known
        head, whose full-rank slot then starts at the head itself.
    callbacks : list of skorch callbacks or (name, callback) pairs, or None, default=None
        Added to the estimator's own callbacks (the per-rank epoch loss, the
        divergence check, the plateau rule, the progress bar), after them, as
        skorch's ``callbacks`` parameter takes them: for example
        ``[LRScheduler(policy="StepLR", step_size=50)]`` or a ``Checkpoint``.
        With ``rank_grid="auto"`` every round's net runs them, with
        ``attention="auto"`` every class's full-rank net too. A
        :class:`skorch.callbacks.EarlyStopping` whose patience runs out ends
        training normally; any other :class:`KeyboardInterrupt` is an
        interrupt (see "Interrupts" below). The nets train without a skorch
        validation split, so a callback monitoring ``"valid_loss"`` (the default
        of ``EarlyStopping()``) or ``"valid_loss_best"`` (``Checkpoint()``'s)
        monitors ``"train_loss"`` / ``"train_loss_best"`` instead; a monitor of
        a key nothing records is a ``ValueError`` naming the keys recorded.

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The trained net; ``net_.module_`` is the batched student.
    ranks_ : ndarray of shape (R,)
        Ranks trained (one entry for a single rank).
    rank_ : int
        The estimated ``r*_attn`` after a sweep; the trained rank otherwise.
    kernel_ : ndarray of shape (d, d)
        Query-key kernel ``W_Q W_K^T`` of the selected student (attention rungs).
        For ``"kernel"`` attention: the kernel ``alpha`` between the distinct
        training tokens (at most 512), whose rank is at most the feature rank.
    operator_ : ndarray of shape (L, L)
        Learned operator ``A`` of the selected student (``"fixed"`` only).
    compute_dtype_ : {"float32", "bfloat16"}
        The dtype the students trained in (``compute_dtype`` resolved).
    kernels_ : ndarray of shape (R, d, d) or (R, L, L)
        Kernels (operators for ``"fixed"``) of every trained rank, in the
        parameters' dtype (float32, whatever ``compute_dtype_``).
    singular_values_ : ndarray
        Singular values of ``kernel_`` (or ``operator_``).
    energy_effective_rank_ : float
        Energy effective rank of ``kernel_`` (:func:`intrinsic_rank.spectral.energy_effective_rank`).
    numerical_rank_ : int
        Numerical rank of ``kernel_`` (NumPy's ``matrix_rank`` threshold).
    attention_ : str
        The class trained: ``attention``, or the class ``"auto"`` chose.
    class_risks_ : dict or None
        After ``attention="auto"``: ``{class: held-out risk}`` of the full-rank
        student of each class compared (``inf`` for one whose training
        diverged); ``None`` for an explicit class.
    noise_floor_ : float or None
        The noise floor used: ``noise_floor`` if given, else estimated after a
        sweep, else ``None``.
    estimated_noise_floor_ : float
        After a sweep: the smallest held-out risk over the grid (the estimate,
        computed also when ``noise_floor`` is given).
    heldout_r2_ : float
        After a sweep: held-out R² of the selected rank, ``1 - risk / variance``
        with the held-out variance of the targets (in-sample for
        ``validation_fraction=0``; ``nan`` for constant targets).
    estimate_supported_ : bool
        After a sweep: ``False`` (with a warning) when the selected student
        explains less than 10% of the held-out variance
        (``heldout_r2_``), or when an attention class (not ``"fixed"``, itself
        affine in ``X``) has a smallest held-out risk not lower than the affine
        reference ``reference_risk_`` by ``tol`` times the variance: the data
        then give no evidence for ``r*`` of the class.
    warnings_ : list of str
        After a sweep: the text of every warning about the estimate (a floor
        not reached, a rising risk, the top of the grid, a selected student that
        explains less than 10% of the held-out variance or no more than the
        affine reference); empty when the estimate carries none.
    excess_tol_ : float
        After a sweep, the excess risk below which a rank counts as reaching
        the floor: ``tol`` times the held-out variance of the targets.
    floor_reached_ : bool
        After a sweep: whether the floor is believed reached (see "A floor not
        reached" above); ``False`` means ``rank_`` and ``noise_floor_`` are
        probably too small and too large.
    reference_risk_ : float or None
        After a sweep: held-out risk of the least-squares affine map from the
        flattened sequence to the flattened target (``None`` for an in-sample
        sweep, or more than 1024 features, or too few training sequences).
    x_scale_, y_scale_ : float
        The powers of two ``X`` and ``Y`` were multiplied by for training
        (``1.0`` at unit scale).
    sweep_ : list of dict
        After a sweep, one record per rank: ``rank``, ``train_risk``,
        ``heldout_risk``, ``excess_risk``, ``reached`` and the rank measures of
        the learned kernel. ``pandas.DataFrame(est.sweep_)`` makes a table.
    history_ : list of dict
        Per epoch: ``epoch``, ``train_loss`` (summed over ranks),
        ``train_loss_per_rank`` and ``dur`` (seconds); with ``early_stopping``
        also ``heldout_risk_per_rank``; after ``rank_grid="auto"`` the rows of every
        round in order, each with ``round`` and that round's ``ranks``.
    trained_ranks_ : ndarray
        Every rank trained (equal to ``ranks_``; after ``rank_grid="auto"`` the
        ranks of all rounds).
    search_rounds_ : list of dict
        One record per batched training run: ``ranks`` and ``epochs`` (one
        round for an explicit grid).
    rank_epochs_ : int
        Training work: the sum over rounds of ranks times epochs trained.
    n_epochs_ : int
        Epochs trained by the longest round (``max_epochs`` unless stopped early).
    n_features_in_ : int
        Size of the last axis of ``X``: token dimension ``d`` for 3-D input,
        number of scalar tokens for 2-D input.
    seq_len_, token_dim_, d_out_ : int
        Sequence length, token dimension and output dimension seen in ``fit``.
    target_ : {"sequence", "final"}
        Per-token targets (3-D ``Y``) or a target of the final position.

    See Also
    --------
    intrinsic_rank.datasets.make_attention_task : teachers with known ``r*``.

    Notes
    -----
    **Memory.** ``X`` and ``Y`` are held on the device once, in float32 (a training part
    and a held-out part, filled a chunk at a time); float32 and ``np.memmap``
    input is not copied to float64. Held-out risks, kernels, predictions and
    mixers are evaluated in chunks of about ``2^22`` outputs, so no
    ``(n, R, L, d_out)`` array of every rank's outputs is built during ``fit``
    (``predict_per_rank`` returns one, as documented). Below that size the
    evaluation takes one pass, bit-identical to unchunked evaluation.

    **Training faults.**

    * **Scale.** ``X`` and ``Y`` whose root mean square lies outside
      ``[1e-2, 1e2]`` are trained on internally in units of their own size: each
      is multiplied by a power of two (exact in floating point; ``x_scale_``,
      ``y_scale_``) that brings it near 1, since far from unit size the students
      stall or freeze. Every reported number is converted back to the units of
      the data: predictions, risks, ``history_``, ``noise_floor_``, the noise
      floor you pass, and the ``"linear"``/``"softmax"`` kernels (``s^2 K``
      for tokens scaled by ``s``; operators, ``"block"`` kernels, which act on
      normalised tokens, and Min-IP kernels are unit-free). Inside the window
      nothing is rescaled, so results there are exactly those of plain training.
      ``X`` or ``Y`` whose root mean square lies outside ``[2^-450, 2^450]``
      (about ``3.5e-136`` to ``2.9e135``) is refused before training: a kernel
      or a risk in its units would leave float64.
    * **Divergence.** Training stops with :class:`TrainingDivergedError` when a
      batch loss is not finite, or exceeds ``1e6`` times the mean square of the
      training targets (the risk of predicting zero, about where training
      starts; a blow-up such as ``lr=1e6`` or ``init_scale=1e6``). A rank whose
      loss in the last epoch is not lower than before the first step by more
      than ``LOSS_FALL_RTOL = 1e-5`` of it (ten times the float rounding) gets a
      :class:`~sklearn.exceptions.ConvergenceWarning`. ``predict`` whose output
      overflows float32 raises a ``ValueError`` instead of returning inf/NaN.
    * **Interrupts.** A :class:`KeyboardInterrupt` during ``fit`` is raised
      again after skorch's clean-up (skorch itself would swallow it); the
      estimator is then unfitted, as after any failed ``fit``. Each ``fit``
      starts by removing the attributes of the previous one.
    * **A floor not reached.** After a sweep with an estimated floor,
      ``floor_reached_`` is ``False`` (with a warning) when the top of the grid
      is still improving (the largest rank alone reaches the floor, below the
      rank limit) or when a least-squares affine map of the whole sequence
      (``reference_risk_``) has a held-out risk lower than the floor by more
      than ``tol`` times the variance: then the grid has not reached the floor
      the data allow and ``rank_`` is probably too small.

    Input shapes: ``X`` is ``(n, L, d)``, or ``(n, L)`` read as ``L`` scalar
    tokens. ``Y`` is ``(n, L, d_out)`` for per-token targets, or ``(n,)`` /
    ``(n, k)`` for a target read at the final position. ``predict`` returns
    the selected rank's predictions shaped like ``Y``; :meth:`predict_per_rank`
    returns every trained rank's, with a rank axis after the sample axis.

    Examples
    --------
    >>> from intrinsic_rank import AttentionRankEstimator
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y = make_attention_task("linear", n_samples=512, seq_len=4, d=6,
    ...                            rank=2, random_state=0)
    >>> est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3],
    ...                              max_epochs=100, random_state=0).fit(X, Y)
    >>> est.rank_
    2

    The adaptive search finds the same rank with fewer trained ranks:

    >>> auto = AttentionRankEstimator(attention="linear", rank_grid="auto",
    ...                               max_epochs=100, random_state=0).fit(X, Y)
    >>> auto.rank_, auto.trained_ranks_.tolist()
    (2, [1, 2, 4, 6])
    """

    def __init__(
        self,
        *,
        attention="softmax",
        feature_map=None,
        rank=None,
        rank_grid=None,
        max_epochs=200,
        lr=3e-3,
        batch_size="auto",
        init_scale=0.1,
        optimizer="adam",
        weight_decay=0.0,
        noise_floor=None,
        tol=0.02,
        validation_fraction=0.2,
        early_stopping=False,
        n_iter_no_change=EARLY_STOPPING_PATIENCE,
        student_options=None,
        random_state=None,
        device="cpu",
        verbose=0,
        callbacks=None,
        compute_dtype="auto",
        causal=False,
        positional=None,
        rope_theta=10000.0,
        value_map=None,
        init_weights=None,
    ):
        self.attention = attention
        self.feature_map = feature_map
        self.rank = rank
        self.rank_grid = rank_grid
        self.max_epochs = max_epochs
        self.lr = lr
        self.batch_size = batch_size
        self.init_scale = init_scale
        self.optimizer = optimizer
        self.weight_decay = weight_decay
        self.noise_floor = noise_floor
        self.tol = tol
        self.validation_fraction = validation_fraction
        self.early_stopping = early_stopping
        self.n_iter_no_change = n_iter_no_change
        self.student_options = student_options
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.callbacks = callbacks
        self.compute_dtype = compute_dtype
        self.causal = causal
        self.positional = positional
        self.rope_theta = rope_theta
        self.value_map = value_map
        self.init_weights = init_weights

    _parameter_constraints = {
        "attention": [Options([*sorted(STUDENTS), "auto"],
                              "unknown attention {value!r}; use one of {options}")],
        "max_epochs": [Integer(1)],
        "batch_size": [Options(["auto"]), Integer(1)],
        "lr": [Real(0.0, low_open=True)],
        "init_scale": [Real(0.0, low_open=True)],
        "weight_decay": [Real(0.0)],
        "tol": [Real(0.0)],
        "validation_fraction": [Real(0.0, 0.9)],
        "noise_floor": [None, Real(0.0)],
        "verbose": [Integer(0)],
        "feature_map": [None, Rule(_check_feature_map)],
        "early_stopping": [Boolean()],
        "n_iter_no_change": [Integer(1)],
        "optimizer": [Rule(lambda estimator, value: resolve_optimizer(value))],
        "student_options": [None, Rule(_check_student_options)],
        "rank_grid": [None, Rule(_check_rank_grid)],
        "rank": [None, Integer(1)],
        "random_state": [Seed()],
        "device": [Device()],
        "callbacks": [None, Callbacks()],
        "compute_dtype": [Options(COMPUTE_DTYPES)],
        "causal": [Rule(_check_causal)],
        "positional": [None, Rule(_check_positional)],
        "rope_theta": [Real(0.0, low_open=True)],
        "value_map": [None, Rule(_check_value_map)],
        "init_weights": [None, Rule(_check_init_weights)],
    }
    """The accepted form of every parameter, checked at the start of ``fit``
    (:func:`~intrinsic_rank.estimators._params.validate_params`)."""

    def _feature_map(self):
        """The kernel student's feature map option (``{}`` when not given)."""
        return {} if self.feature_map is None else {"feature_map": self.feature_map}

    def _auto(self):
        return isinstance(self.rank_grid, str)

    def _student_class(self, attention=None):
        """The student of ``attention`` (default: the fitted class), rotary when asked."""
        attention = self.attention if attention is None else attention
        if self.positional == "rope" and attention == "softmax":
            return RotarySoftmaxStudent
        return STUDENTS[attention]

    def _head_dim(self):
        """Query-key width of the rotary student: ``student_options["head_dim"]`` or ``d_out``."""
        return int((self.student_options or {}).get("head_dim") or self.d_out_)

    def _max_rank(self):
        limit = STUDENTS[self.attention_].rank_limit(self.token_dim_, self.seq_len_)
        if self._student_class(self.attention_) is RotarySoftmaxStudent:
            return min(limit, self._head_dim())
        return limit

    def _sequence_options(self):
        """The student arguments of ``causal``, ``positional`` and ``value_map``, in training units.

        A known value map acts on ``X`` and produces ``Y``: trained on ``X * x_scale``
        against ``Y * y_scale``, it becomes ``W_V * y_scale / x_scale`` (powers of two,
        exact).
        """
        options = {}
        if self.attention_ not in _SEQUENCE_CLASSES:
            return options
        rotary = self._student_class(self.attention_) is RotarySoftmaxStudent
        if self.causal or rotary:
            options["causal"] = bool(self.causal)
        if rotary:
            options["rope_theta"] = float(self.rope_theta)
        if self.value_map is not None:
            options["value_map"] = self._value_map_in_training_units()
        return options

    def _value_map_in_training_units(self):
        value_map = np.asarray(self.value_map, dtype=np.float64)
        expected = (self.token_dim_, self.d_out_)
        if value_map.shape != expected:
            raise ValueError(f"value_map must have shape (d, d_out) = {expected} for these "
                             f"data; got {value_map.shape}")
        return value_map * (self.y_scale_ / self.x_scale_)

    def _rank_grid(self, ranks):
        """The ranks to train: ``rank_grid`` as checked, or the single rank, against the data's limit."""
        limit = self._max_rank()
        if self.attention_ == "fixed":
            what = f"the sequence length L = {limit} (the operator is L x L)"
        elif self.attention_ == "kernel":
            what = (
                f"the feature-rank limit {limit} (2^m features realise any kernel on "
                f"m = {self.token_dim_} bits; capped at 4096)"
            )
        elif self._student_class(self.attention_) is RotarySoftmaxStudent:
            what = (f"min(d, head_dim) = {limit}, the largest rank of a query projection "
                    f"from d = {self.token_dim_} to head_dim = {self._head_dim()}")
        else:
            what = f"the token dimension d = {limit} (the query-key kernel is d x d)"
        if self._x_ndim == 2:
            what += f"; 2-D X holds n_features = {self.n_features_in_} scalar tokens"
        if isinstance(ranks, str):
            return coarse_rank_grid(limit)
        if ranks is not None:
            if max(ranks) > limit:
                raise ValueError(f"rank {max(ranks)} in rank_grid exceeds {what}")
            return list(ranks)
        if self.rank is None:
            return [limit]
        if self.rank > limit:
            raise ValueError(f"rank={int(self.rank)} exceeds {what}")
        return [int(self.rank)]

    # -- training -----------------------------------------------------------------
    def _batch_size(self, n_train):
        if isinstance(self.batch_size, str):
            return min(256, max(16, n_train // 8))
        return self.batch_size

    def _build_net(self, ranks, seed, device, n_train, loss_limit=None, extra_callbacks=()):
        """The net of one batched run: the estimator's callbacks, then the user's."""
        callbacks = [("rankwise_loss", RankwiseEpochLoss()),
                     ("divergence", DivergenceCheck(loss_limit)), *extra_callbacks]
        if self.verbose == 1:
            callbacks.append(("progress", FitProgress(postfix={"summed_loss": "train_loss"})))
        callbacks.extend(user_callbacks(self.callbacks))
        return RankSweepNet(
            module=self._student_class(self.attention_),
            module__d=self.token_dim_,
            module__d_out=self.d_out_,
            module__ranks=ranks,
            module__seq_len=self.seq_len_,
            module__init_scale=self.init_scale,
            module__random_state=seed,
            module__final_only=self.target_ == "final",
            **{f"module__{key}": value for key, value in (self.student_options or {}).items()},
            **{f"module__{key}": value for key, value in self._feature_map().items()},
            **{f"module__{key}": value for key, value in self._sequence_options().items()},
            criterion=RankwiseMSELoss,
            optimizer=resolve_optimizer(self.optimizer),
            optimizer__weight_decay=self.weight_decay,
            lr=self.lr,
            max_epochs=self.max_epochs,
            batch_size=self._batch_size(n_train),
            train_split=None,
            iterator_train=TensorBatchIterator,
            iterator_train__shuffle=True,
            iterator_train__seed=seed,
            iterator_valid=TensorBatchIterator,
            callbacks=callbacks,
            verbose=int(self.verbose >= 2),
            device=device,
            compute_dtype=getattr(self, "compute_dtype_", "float32"),
        )

    @fits_from_scratch
    def fit(self, X, Y):
        """Train the student(s) and, after a sweep, estimate ``r*``.

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)
            Token sequences.
        Y : array-like of shape (n, L, d_out), (n, k) or (n,)
            Per-token targets, or a target of the final position.

        Returns
        -------
        self : AttentionRankEstimator
            The fitted estimator.
        """
        params = validate_params(self)
        device = params["device"]
        X, Y = validate_sequences(self, X, Y, reset=True, keep_float32=True)
        auto_class = self.attention == "auto"
        if auto_class and self.rank_grid is None:
            raise ValueError(
                "AttentionRankEstimator: attention='auto' chooses the class by held-out "
                "risk, which needs a sweep; give rank_grid, or an explicit attention for "
                "one rank"
            )
        self.attention_ = None if auto_class else self.attention
        ranks = None if auto_class else self._rank_grid(params["rank_grid"])
        seed = draw_seed(self.random_state)
        sweep = self.rank_grid is not None
        if sweep:
            train, heldout = self._split(len(X), seed)
        else:
            train, heldout = np.arange(len(X)), None
        # far from unit size, X and Y are trained on in units of their own size
        # (a power of two each, exact); every reported number is converted back
        x_scale, y_scale = scale_factor(X, "X"), scale_factor(Y, "Y")
        # a kernel comes back as x_scale**2 times a unit-size one: refuse, before any
        # training, data so far from unit size that the product would not be finite
        _scaling.check_units(x_scale**2, "X")
        self.x_scale_, self.y_scale_ = x_scale, y_scale
        # the data on the device in float32, once: a training part and a held-out
        # part, filled chunk by chunk (no float64 or scaled copy of X or Y)
        X_train = rows_as_tensor(X, "X", device, train, x_scale)
        Y_train = rows_as_tensor(Y, "Y", device, train, y_scale)
        if sweep and self.validation_fraction > 0:
            X_held = rows_as_tensor(X, "X", device, heldout, x_scale)
            Y_held = rows_as_tensor(Y, "Y", device, heldout, y_scale)
        else:
            X_held, Y_held = X_train, Y_train
        mean_square = _mean_square(Y_train)
        limit = DIVERGENCE_FACTOR * mean_square if mean_square > 0 else None
        variance = _heldout_variance(Y, heldout) if sweep else None
        patience = params["n_iter_no_change"] if sweep and params["early_stopping"] else None
        min_delta = 0.0
        if patience is not None:
            # a fall smaller than a hundredth of the selection tolerance is no progress
            min_delta = EARLY_STOPPING_DELTA * self.tol * variance * y_scale**2
        held = (X_held, Y_held, patience, min_delta)
        self.compute_dtype_ = resolve_compute_dtype(params["compute_dtype"], device)
        self.class_risks_ = None
        if auto_class:
            self.class_risks_ = self._class_risks(seed, device, (X_train, Y_train), held, limit)
            self.attention_ = choose_attention(self.class_risks_, variance, self.tol)
            ranks = self._auto_class_grid(params["rank_grid"])
        if self._auto():
            nets, rounds = self._adaptive_search(
                ranks, seed, device, (X_train, Y_train), held, variance, limit)
            ranks = sorted({r for net in nets for r in net.module_.ranks})
            net = self._merged_net(nets, ranks, seed, device, len(train), limit)
        else:
            net = self._train(ranks, seed, device, (X_train, Y_train), held, limit)
            nets = [net]
        self.net_ = net
        self.ranks_ = np.asarray(ranks)
        self.trained_ranks_ = np.asarray(ranks)
        self.search_rounds_ = [
            {"ranks": list(n.module_.ranks), "epochs": len(n.history)} for n in nets
        ]
        self.rank_epochs_ = int(sum(len(r["ranks"]) * r["epochs"] for r in self.search_rounds_))
        self.n_epochs_ = int(max(r["epochs"] for r in self.search_rounds_))
        keys = ("epoch", "train_loss", "train_loss_per_rank", "dur")
        self.history_ = []
        for i, n in enumerate(nets):
            for row in n.history:
                entry = {key: row[key] for key in keys}
                if "heldout_risk_per_rank" in row:
                    entry["heldout_risk_per_rank"] = [
                        v / y_scale**2 for v in row["heldout_risk_per_rank"]]
                if len(nets) > 1:
                    entry["round"] = i
                    entry["ranks"] = list(n.module_.ranks)
                self.history_.append(entry)
        if y_scale != 1.0:
            for row in self.history_:
                row["train_loss"] = row["train_loss"] / y_scale**2
                row["train_loss_per_rank"] = [v / y_scale**2 for v in row["train_loss_per_rank"]]
        if self.init_weights is None:
            # a warm start may begin at the teacher itself, where the loss cannot fall
            for n in nets:
                warn_if_loss_never_fell(n)
        self._store_kernels(X_train)
        train_risk = self._risks(X_train, Y_train, "the training data")
        if sweep:
            reference = self._reference_risk(X, Y, train, heldout, x_scale, y_scale)
            self._select_rank(
                train_risk, self._risks(X_held, Y_held, "the held-out data"),
                variance, reference,
            )
        else:
            self.rank_index_ = 0
            self.rank_ = ranks[0]
            self.noise_floor_ = self.noise_floor
            self.train_risk_ = float(train_risk[0])
            self.warnings_ = []
        self._store_selected()
        return self

    def _class_risks(self, seed, device, data, held, limit):
        """``attention="auto"``: held-out risk of a full-rank student of each class.

        Every class of ``AUTO_ATTENTION`` trains one full-rank slot with the
        sweep's seed, split, budget and stopping rule (one run after the other); a
        class whose training diverges gets ``inf``.
        """
        X_held, Y_held = held[0], held[1]
        risks = {}
        for name in AUTO_ATTENTION:
            self.attention_ = name
            try:
                net = self._train([self._max_rank()], seed, device, data, held, limit)
            except TrainingDivergedError:
                risks[name] = float("inf")
                continue
            value = float(rankwise_risks(net, X_held, Y_held)[0][0]) / self.y_scale_**2
            risks[name] = value if np.isfinite(value) else float("inf")
        self.attention_ = None
        return risks

    def _auto_class_grid(self, rank_grid):
        """The grid inside the chosen class: ``rank_grid`` without the ranks above its limit."""
        if isinstance(rank_grid, str):
            return self._rank_grid(rank_grid)
        limit = self._max_rank()
        kept = [r for r in rank_grid if r <= limit] or [limit]
        self._grid_cut = grid_cut_text(rank_grid, kept, limit, self.attention_)
        return kept

    def _train(self, ranks, seed, device, data, held, limit):
        """Train one batched net over ``ranks`` (one round of a search)."""
        X_train, Y_train = data
        X_held, Y_held, patience, min_delta = held
        callbacks = []
        if patience is not None:
            callbacks.append(("plateau", PlateauStopping(X_held, Y_held, patience, min_delta)))
        net = self._build_net(ranks, seed, device, len(X_train), loss_limit=limit,
                              extra_callbacks=callbacks)
        if self.init_weights is None:
            net.fit(X_train, Y_train)
            return net
        # a warm start: skorch's fit is initialize() then partial_fit()
        net.initialize()
        weights = _check_init_weights(self, self.init_weights)
        # scores of tokens scaled by x_scale: each projection divided by it
        net.module_.start_from(weights["query"] / self.x_scale_,
                               weights["key"] / self.x_scale_)
        net.partial_fit(X_train, Y_train)
        return net

    def _adaptive_search(self, coarse, seed, device, data, held, variance, limit):
        """``rank_grid="auto"``: a coarse batched grid, then batched bisection of the bracket.

        Returns the nets of every round and the ranks of each round.
        """
        X_held, Y_held = held[0], held[1]
        y_scale = self.y_scale_
        nets = []

        def evaluate(ranks):
            net = self._train(ranks, seed, device, data, held, limit)
            nets.append(net)
            values, _ = rankwise_risks(net, X_held, Y_held)
            return [float(v) / y_scale**2 if np.isfinite(v) else np.inf for v in values]

        rounds = adaptive_rank_search(coarse, evaluate, variance, self.tol, self.noise_floor)
        return nets, rounds

    def _merged_net(self, nets, ranks, seed, device, n_train, limit):
        """One initialised net over the union of the rounds' ranks, with their trained slots."""
        net = self._build_net(ranks, seed, device, n_train, loss_limit=limit)
        net.initialize()
        merged = net.module_
        slot_of = {r: i for i, r in enumerate(ranks)}
        with torch.no_grad():
            for part in nets:
                module = part.module_
                for name, _shape, _init, _fan_in, ranked in module._initializers:
                    source, target = getattr(module, name), getattr(merged, name)
                    for i, r in enumerate(module.ranks):
                        if ranked:
                            target[slot_of[r]].zero_()
                            target[slot_of[r]][..., :source.shape[-1]] = source[i]
                        else:
                            target[slot_of[r]] = source[i]
        return net

    def _split(self, n, seed):
        n_heldout = heldout_size(n, self.validation_fraction)
        if self.validation_fraction == 0:
            # in-sample sweep: every rank is scored on the data it was fitted to
            everything = np.arange(n)
            return everything, everything
        order = np.random.RandomState(seed).permutation(n)
        return np.sort(order[n_heldout:]), np.sort(order[:n_heldout])

    def _outputs(self, X_t):
        """Outputs of every rank slot, ``(n, R, ...)``, as a float64 array (training units).

        Filled a chunk at a time (:func:`~intrinsic_rank.estimators._batching.forward_chunks`).
        """
        out = None
        for start, chunk in forward_chunks(self.net_, X_t):
            chunk = chunk.cpu().double().numpy()
            if len(chunk) == len(X_t):
                return chunk
            if out is None:
                out = np.empty((len(X_t),) + chunk.shape[1:])
            out[start:start + len(chunk)] = chunk
        return out

    def _risks(self, X_t, Y_t, where):
        risk, finite = rankwise_risks(self.net_, X_t, Y_t)
        if not finite:
            raise TrainingDivergedError(
                f"the trained students' outputs on {where} overflow float32 (not "
                "finite); lower lr or init_scale"
            )
        y_scale = getattr(self, "y_scale_", 1.0)
        return risk if y_scale == 1.0 else risk / y_scale**2

    def _reference_risk(self, X, Y, train, heldout, x_scale=1.0, y_scale=1.0):
        """Held-out risk of a cheap reference: least squares of Y on the whole sequence.

        An affine map from the flattened sequence ``X`` to the flattened target,
        fitted on the training part (float64, in training units). ``None`` for an
        in-sample sweep, when there are too few training sequences for it
        (``n_train <= p + 1``) or too many features (``p > 1024``).
        """
        if self.validation_fraction == 0:
            return None
        n = len(X)
        features = X.reshape(n, -1)
        targets = Y.reshape(n, -1)
        p = features.shape[1]
        if p > 1024 or len(train) <= p + 1:
            return None

        def part(array, rows, scale):
            values = np.asarray(array[rows], dtype=np.float64)
            return values if scale == 1.0 else values * scale

        f_train, t_train = part(features, train, x_scale), part(targets, train, y_scale)
        x_mean, y_mean = f_train.mean(axis=0), t_train.mean(axis=0)
        coef = np.linalg.lstsq(f_train - x_mean, t_train - y_mean, rcond=None)[0]
        del f_train, t_train
        pred = (part(features, heldout, x_scale) - x_mean) @ coef + y_mean
        risk = float(np.mean((pred - part(targets, heldout, y_scale)) ** 2))
        y_scale = getattr(self, "y_scale_", 1.0)
        return risk if y_scale == 1.0 else risk / y_scale**2

    def _store_kernels(self, X_t):
        module = self.net_.module_
        with torch.no_grad():
            if self.attention_ == "fixed":
                kernels = module.operator()
            elif self.attention_ == "kernel":
                # no static d x d kernel: the kernel between the data's distinct
                # tokens (at most 512), of rank <= the feature rank
                tokens = torch.unique(X_t.reshape(-1, X_t.shape[-1]), dim=0)
                step = max(1, -(-len(tokens) // 512))
                kernels = module.token_kernel(tokens[::step])
            else:
                kernels = module.kernel()
        # Kept in the parameters' dtype (float32): the numerical rank's
        # threshold then uses float32's epsilon, not float64's.
        kernels = kernels.detach().cpu().numpy()
        if self.attention_ in ("linear", "softmax"):
            # scores x K x^T of standardised tokens: K in the units of X is s^2 K, taken
            # to float64 where s != 1 (a float32 product overflows for X below 1e-19)
            kernels = _scaling.in_user_units(kernels, self.x_scale_**2)
        self.kernels_ = kernels

    def _warn(self, message, category):
        """Warn about the estimate, and keep the text in ``warnings_``."""
        self.warnings_.append(message)
        warnings.warn(message, category)

    def _select_rank(self, train_risk, heldout_risk, heldout_variance, reference=None):
        selection = select_rank(
            self.ranks_, heldout_risk, heldout_variance, self.tol,
            noise_floor=self.noise_floor,
        )
        floor, excess, reached = selection["floor"], selection["excess"], selection["reached"]
        given = self.noise_floor is not None
        self.warnings_ = []
        if getattr(self, "_grid_cut", None):
            self._warn(self._grid_cut, UserWarning)
        self.noise_floor_ = floor
        self.estimated_noise_floor_ = float(np.min(heldout_risk))
        self.excess_tol_ = selection["threshold"]
        self.rank_index_ = selection["index"]
        if not selection["any_reached"]:
            self._warn(
                f"no rank in {self.ranks_.tolist()} reached the noise floor {floor:.4g} "
                f"(given as noise_floor) within tol={self.tol} (smallest excess risk "
                f"{excess.min():.4g}); rank_ is the rank with the lowest held-out risk. The {self.attention_} class may not "
                "fit these data (try attention='auto' or another class), training may be too "
                "short (max_epochs), or the data's floor lies above the one given.",
                ConvergenceWarning,
            )
        self.rank_ = int(self.ranks_[self.rank_index_])
        self._warn_if_not_monotone(heldout_risk)
        top = len(self.ranks_) > 1 and self.rank_index_ == len(self.ranks_) - 1
        below_limit = self.rank_ < self._max_rank()
        not_flat = top and below_limit and not given and selection["any_reached"]
        if not_flat:
            # With an estimated floor the largest rank always "reaches" it: that
            # it is the only one means r* may lie beyond the grid (unless the grid
            # already ends at the largest possible rank).
            self._warn(
                f"rank_ = {self.rank_} is the largest rank of the grid; with the noise "
                f"floor estimated from the grid itself ({floor:.4g}) this only says "
                "that no smaller rank matched it, and r* may be larger. Extend rank_grid "
                "or pass noise_floor.",
                UserWarning,
            )
        self.reference_risk_ = reference
        beaten = reference is not None and floor > reference + self.excess_tol_
        if beaten:
            what = ("the given noise floor" if given else "the estimated noise floor")
            # a grid that already ends at the rank limit cannot be extended
            extend = self.ranks_[-1] < self._max_rank()
            train = "extend rank_grid or train longer" if extend else "train longer"
            advice = (f"Check the class (attention='auto'), {train} (max_epochs)." if given
                      else ("Extend rank_grid, train longer" if extend else "Train longer")
                      + " (max_epochs) or pass noise_floor.")
            self._warn(
                f"{what} {floor:.4g} is not the floor: a least-squares "
                f"affine map of the whole sequence reaches a held-out risk of "
                f"{reference:.4g}, lower by more than tol * variance = "
                f"{self.excess_tol_:.4g}, so the grid has not reached the floor the data allow "
                f"and rank_ = {self.rank_} may be too small. {advice}",
                ConvergenceWarning,
            )
        if not given:
            self.floor_reached_ = not (not_flat or beaten)
        else:
            self.floor_reached_ = selection["any_reached"] and not beaten
        self._check_evidence(heldout_risk[self.rank_index_], heldout_variance, reference)
        self.sweep_ = []
        for i, r in enumerate(self.ranks_):
            profile = spectral.rank_profile(self.kernels_[i])
            record = {
                "rank": int(r),
                "train_risk": float(train_risk[i]),
                "heldout_risk": float(heldout_risk[i]),
                "excess_risk": float(excess[i]),
                "reached": bool(reached[i]),
            }
            record.update({
                k: int(v) if isinstance(v, (int, np.integer)) else float(v)
                for k, v in profile.items()
            })
            self.sweep_.append(record)

    def _check_evidence(self, risk, heldout_variance, reference):
        """``heldout_r2_``, and a warning when the selected student explains little of ``Y``.

        Two checks: the held-out R² of the selected rank is below
        :data:`MIN_HELDOUT_R2`, or an attention class (not ``"fixed"``, itself an
        affine map of ``X``) does no better than the least-squares affine reference
        by more than ``tol * variance``.
        """
        r2 = 1.0 - float(risk) / heldout_variance if heldout_variance > 0 else float("nan")
        self.heldout_r2_ = r2
        classes = (f"no class of {list(self.class_risks_)} does better (held-out risks of "
                   f"full-rank students: {class_risk_text(self.class_risks_)})"
                   if self.class_risks_ else
                   "try attention='auto', which compares the classes")
        little = r2 < MIN_HELDOUT_R2
        no_better = (reference is not None and self.attention_ != "fixed"
                     and self.estimated_noise_floor_ >= reference - self.excess_tol_)
        self.estimate_supported_ = not (little or no_better)
        if little:
            self._warn(
                f"the selected {self.attention_} student of rank {self.rank_} explains "
                f"{max(r2, 0.0):.1%} of the held-out variance of Y (held-out R² {r2:.3g}, "
                f"below {MIN_HELDOUT_R2}): Y depends little on X through this class, or "
                f"not at all, so r* = {self.rank_} is not supported by the data; "
                f"{classes}. Check that X and Y are paired, or give more data.",
                UserWarning,
            )
        elif no_better:
            self._warn(
                f"the {self.attention_} students do no better than a least-squares affine "
                f"map of the whole sequence (best held-out risk "
                f"{self.estimated_noise_floor_:.4g} against {reference:.4g}, not lower by "
                f"tol * variance = {self.excess_tol_:.4g}): their attention explains nothing "
                f"a linear map does not, so r* = {self.rank_} of this class is not supported "
                f"by the data; {classes}.",
                UserWarning,
            )

    def _warn_if_not_monotone(self, heldout_risk):
        # A larger rank can represent every smaller-rank solution, so its held-out
        # risk should not exceed a smaller rank's by more than the tolerance. When
        # it does, that slot's training stalled (for example a square
        # factorisation at r = d stuck at a saddle) and the floor estimate is
        # suspect.
        best_below = np.minimum.accumulate(heldout_risk)
        stalled = [
            (int(r), float(risk), float(best_below[i - 1]))
            for i, (r, risk) in enumerate(zip(self.ranks_, heldout_risk))
            if i > 0 and risk - best_below[i - 1] > self.excess_tol_
        ]
        if stalled:
            detail = "; ".join(
                f"rank {r}: {risk:.4g} against {below:.4g} below it" for r, risk, below in stalled
            )
            self._warn(
                f"held-out risk rises with rank ({detail}): training of those ranks "
                "stalled, so rank_ and the estimated floor may be wrong. Train longer "
                "(max_epochs), change random_state or pass noise_floor.",
                ConvergenceWarning,
            )

    def _store_selected(self):
        kernel = self.kernels_[self.rank_index_]
        if self.attention_ == "fixed":
            self.operator_ = kernel
        else:
            self.kernel_ = kernel
        self.singular_values_ = spectral.singular_values(kernel)
        self.energy_effective_rank_ = float(spectral.energy_effective_rank(kernel))
        self.numerical_rank_ = int(spectral.numerical_rank(kernel))

    # -- prediction ---------------------------------------------------------------
    def _tensor(self, X):
        check_is_fitted(self)
        X = validate_sequences(self, X, reset=False, keep_float32=True)
        x_scale = getattr(self, "x_scale_", 1.0)
        return rows_as_tensor(X, "X", self.net_.device, scale=x_scale)

    def predict(self, X):
        """Predictions of the selected student.

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)

        Returns
        -------
        Y_pred : ndarray
            ``(n, L, d_out)`` for per-token targets, ``(n, k)`` or ``(n,)`` for a
            final-position target (shaped like the ``Y`` seen in ``fit``).
        """
        return self.predict_per_rank(X)[:, self.rank_index_]

    def predict_per_rank(self, X):
        """Predictions of every trained rank, with a rank axis after the sample axis.

        ``predict_per_rank(X)[:, i]`` is the prediction of the student of rank
        ``ranks_[i]``; the slot of the selected rank ``rank_`` (index
        ``ranks_.tolist().index(rank_)``) equals ``predict(X)``. A single-``rank``
        fit has one slot (``R = 1``).

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)
            Validated like ``predict`` (the fitted sequence length and token
            dimension).

        Returns
        -------
        Y_pred : ndarray of float64, of shape (n, R, ...)
            ``R = len(ranks_)``, and the rest shaped like the ``Y`` seen in
            ``fit``: ``(n, R, L, d_out)`` for per-token targets, ``(n, R, k)``
            for a final-position target ``(n, k)``, and ``(n, R)`` for a
            final-position target ``(n,)`` (the raw output of each rank at the
            final position).

        Examples
        --------
        >>> import numpy as np
        >>> from intrinsic_rank import AttentionRankEstimator
        >>> from intrinsic_rank.datasets import make_attention_task
        >>> X, Y = make_attention_task("linear", n_samples=64, seq_len=4, d=3,
        ...                            rank=1, random_state=0)
        >>> est = AttentionRankEstimator(attention="linear", rank_grid=[1, 3],
        ...                              max_epochs=150, random_state=0).fit(X, Y[:, -1, 0])
        >>> est.predict_per_rank(X).shape
        (64, 2)
        >>> i = est.ranks_.tolist().index(est.rank_)
        >>> bool(np.array_equal(est.predict_per_rank(X)[:, i], est.predict(X)))
        True
        """
        Y_pred = self._outputs(self._tensor(X))
        if not np.all(np.isfinite(Y_pred)):
            bad = int(np.sum(~np.all(np.isfinite(Y_pred.reshape(len(Y_pred), -1)), axis=1)))
            raise ValueError(
                f"the prediction overflows float32 for {bad} of {len(Y_pred)} sequences "
                f"of X (largest |X| = {float(np.max(np.abs(np.asarray(X, dtype=float)))):.3g}): "
                "X is far outside the scale the estimator was fitted on"
            )
        y_scale = getattr(self, "y_scale_", 1.0)
        if y_scale != 1.0:
            Y_pred = Y_pred / y_scale
        if self.y_ndim_ == 1:
            Y_pred = Y_pred[:, :, 0]
        return Y_pred

    def realized_mixer(self, X):
        """The ``L x L`` token mixer the selected student applies to each sequence.

        ``M(X) = A`` for ``"fixed"``, ``X K X^T / L`` for ``"linear"``, and
        ``softmax(X K X^T)`` for ``"softmax"`` (on the normalised tokens for
        ``"block"``).

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)

        Returns
        -------
        mixers : ndarray of shape (n, L, L)
        """
        X_t = self._tensor(X)
        module = self.net_.module_
        L = X_t.shape[1]
        rows = len(X_t) if len(X_t) * len(self.ranks_) * L * L <= _scaling.CHUNK_ELEMENTS else max(
            1, _scaling.CHUNK_ELEMENTS // (len(self.ranks_) * L * L))
        mixers = np.empty((len(X_t), L, L))
        with torch.no_grad():
            for start in range(0, len(X_t), rows):
                part = module.mixer(X_t[start:start + rows])[:, self.rank_index_]
                mixers[start:start + rows] = part.cpu().double().numpy()
        return mixers

