"""AttentionRankEstimator: the attention-native intrinsic rank of a task.

The estimator's flow, each step one idea in its own module: the parameter rules
(:mod:`._attention_params`), the data on the device (:mod:`._training_data`), the
attention class of ``attention="auto"`` (:mod:`._selection`), the batched training
runs (:mod:`._rank_runs`), rank selection and the adaptive search (:mod:`._selection`),
and the evidence checks of a sweep (:mod:`._selection`). What stays here is the
estimator's API and the order of the steps. The user guide
(``docs/attention_rank_estimator.md``) explains the estimator at length.
"""

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import spectral
from .._validation import draw_seed
from ..nn import STUDENTS, RotarySoftmaxStudent
from ._attention_params import (
    PARAMETER_CONSTRAINTS,
    PARAMETER_RULES,
    rank_limit_text,
    ranks_within_limit,
)
from ._callbacks import warn_if_loss_never_fell
from ._errors import TrainingDivergedError
from ._inputs import SequenceRegressorMixin, validate_sequences
from ._net import (kept_outputs, rankwise_risks, resolve_compute_dtype, slot_kernels,
                   slot_mixers)
from ._params import checked_params, fits_from_scratch
from ._rank_runs import (adaptive_runs, gather_restart_risks, merged_net, restart_warning,
                         run_history, train_run)
from ._scaling import rows_as_tensor
from ._selection import (choose_attention, coarse_rank_grid, compare_classes, grid_in_class,
                         judge_sweep, reference_risk, sweep_records)
from ._training_data import mean_variance, training_data

__all__ = ["AttentionRankEstimator"]

EARLY_STOPPING_PATIENCE = 20
"""The default of ``n_iter_no_change``: epochs without improvement before a slot has plateaued."""

class AttentionRankEstimator(SequenceRegressorMixin, BaseEstimator):
    """Attention students of a given query-key rank, and the rank a task needs.

    Trains one rung of the interpolation ladder of "The Entropic Bound" (Yoon, 2026):
    B0 ``"fixed"`` (``Y = A X V``, an input-independent operator of rank ``r``), B1
    ``"linear"`` attention, B2 ``"softmax"`` attention or B3 ``"block"`` (a Transformer
    block around the rank-``r`` softmax attention). With ``rank`` it fits one student.
    With ``rank_grid`` it trains the whole grid in one batched optimisation, measures
    each rank's held-out risk and estimates the attention-native intrinsic rank
    ``r*_attn``: the smallest rank whose held-out excess risk reaches the noise floor
    within ``tol``. The user guide (``docs/attention_rank_estimator.md``) explains the
    class choice, the evidence checks, the adaptive search, the training faults and
    the memory used.

    Parameters
    ----------
    attention : str, default="softmax"
        The student class: ``"fixed"``, ``"linear"``, ``"softmax"``, ``"block"``, or
        for the Min-IP heads ``"kernel"`` (normalised nonnegative kernel attention of
        feature rank ``rank``) and ``"dense"`` (softmax scores of ``rank`` dimensions at
        a fixed temperature); see :mod:`intrinsic_rank.nn`. ``"auto"`` (a sweep only)
        compares full-rank students of ``"fixed"``, ``"linear"`` and ``"softmax"`` on
        held-out data and keeps the simplest within ``tol`` of the best
        (``attention_``, ``class_risks_``).
    rank : int or None, default=None
        Rank of a single student (``1 <= rank <= d``, or ``<= L`` for ``"fixed"``);
        ``None`` is full rank. Must be ``None`` when ``rank_grid`` is given.
    rank_grid : sequence of int, "auto" or None, default=None
        Ranks of a sweep, trained at once on a training part and scored on the held-out
        part; ``rank_`` is the estimated ``r*``. ``"auto"`` searches for the same ``r*``
        with less training: a coarse grid of powers of two, then batched refinement of
        the bracket (``trained_ranks_``, ``search_rounds_``).
    max_epochs : int, default=200
        Passes over the training data.
    lr : float, default=3e-3
        Learning rate.
    batch_size : int or "auto", default="auto"
        Sequences per mini-batch; ``"auto"`` is ``min(256, max(16, n_train // 8))``.
    init_scale : float, default=0.1
        Factor matrices start ``N(0, init_scale^2 / fan_in)``; small values give the
        implicit low-rank bias behind the recovery principle.
    n_init : int in [1, 100] or "auto", default="auto"
        Independent initialisations of the ranks. ``"auto"`` trains every rank once,
        probes a second restart of each for a fifth of the epochs, and trains that
        second restart in full only for the ranks whose probe already beats their first
        restart, or whose first restart ends above a smaller rank's, by more than ``tol``
        times the variance of the training targets (the user guide gives the
        measurement); 1 with ``init_weights``, whose slots all start from the same
        teacher. An integer ``k`` trains ``k`` restarts of every rank in the same batched
        run (``n_init=1``: each rank once). The restart with the lowest training risk is
        kept, and a :class:`~sklearn.exceptions.ConvergenceWarning` says when the
        restarts of the selected rank end further apart than ``tol`` times the target
        variance.
    optimizer : {"adam", "adamw", "sgd"} or torch.optim.Optimizer subclass, default="adam"
        Elementwise optimisers keep the rank slots of a sweep exactly independent.
    weight_decay : float, default=0.0
        Passed to the optimiser.
    noise_floor : float or None, default=None
        Known noise variance of the task; ``None`` estimates it after a sweep as the
        smallest held-out risk over the grid.
    tol : float, default=0.02
        A rank reaches the floor when its held-out excess risk is at most ``tol`` times
        the held-out variance of the targets.
    validation_fraction : float, default=0.2
        Share of the sequences a sweep holds out (at least two); ``0`` scores the sweep
        in-sample. A single rank trains on all the data.
    early_stopping : bool, default=False
        End a sweep once every slot's held-out risk has stopped falling by more than
        ``0.01 * tol * variance`` for ``n_iter_no_change`` epochs.
    n_iter_no_change : int, default=20
        The patience of ``early_stopping``.
    feature_map : {None, "exp", "elu+1", "relu"}, default=None
        The nonnegative feature map of ``attention="kernel"`` students
        (:data:`~intrinsic_rank.nn.KERNEL_STUDENT_MAPS`); other classes take ``None``.
    student_options : dict or None, default=None
        Extra keyword arguments of the student class (``{"hidden": 32}`` for
        ``"kernel"``); an unknown key is a ``ValueError`` listing the accepted ones.
    random_state : None, int or numpy.random.RandomState, default=None
        Seeds the split, the initialisation and the batch order. The slot of rank ``r``
        starts from ``(seed, r)``, so a sweep's rank-``r`` student is the one a
        single-rank fit with the same seed trains.
    device : str or torch.device, default="cpu"
        Torch device.
    verbose : int, default=0
        0 silent; 1 a progress bar over epochs; 2 skorch's per-epoch table.
    callbacks : list of skorch callbacks or (name, callback) pairs, or None, default=None
        Added after the estimator's own callbacks, as skorch's ``callbacks`` takes them
        (an ``LRScheduler``, a ``Checkpoint``); every run of a fit runs them.
    compute_dtype : {"auto", "float32", "bfloat16"}, default="auto"
        The dtype of the training forward pass: ``"auto"`` is bfloat16 on a CUDA
        device with native bfloat16 and float32 elsewhere, the CPU included (chosen by
        the device, never by a timing). Parameters, the loss and every held-out
        evaluation stay float32.
    causal : bool, default=False
        ``"linear"`` and ``"softmax"`` students with a causal mask, as the heads of a
        causal LM.
    positional : {None, "rope"}, default=None
        ``"rope"`` (``attention="softmax"`` only): the rotary student
        :class:`~intrinsic_rank.nn.RotarySoftmaxStudent`, whose rank is the rank of the
        query projection; ``student_options`` may set ``head_dim`` and ``score_scale``.
    rope_theta : float, default=10000.0
        The rotary base of ``positional="rope"``.
    value_map : array-like of shape (d, d_out) or None, default=None
        A known, untrained value map ``W_V`` of ``"linear"`` and ``"softmax"`` students
        (distilling a head whose values are known).
    init_weights : dict or None, default=None
        ``{"query": W_Q, "key": W_K}`` of shape ``(d, k)``: every slot starts from the
        rank-``r`` truncation of this teacher instead of a random draw.

    Attributes
    ----------
    net_ : skorch.NeuralNet
        The trained net; ``net_.module_`` is the batched student.
    ranks_ : ndarray of shape (R,)
        Ranks trained (one entry for a single rank).
    rank_ : int
        The estimated ``r*_attn`` after a sweep; the trained rank otherwise.
    rank_index_ : int
        Index of ``rank_`` in ``ranks_``.
    kernel_ : ndarray of shape (d, d)
        Query-key kernel ``W_Q W_K^T`` of the selected student (for ``"kernel"``: the
        kernel between at most 512 distinct training tokens).
    operator_ : ndarray of shape (L, L)
        Learned operator ``A`` of the selected student (``"fixed"`` only).
    kernels_ : ndarray of shape (R, d, d) or (R, L, L)
        Kernels (operators for ``"fixed"``) of every trained rank, in float32.
    singular_values_ : ndarray
        Singular values of ``kernel_`` (or ``operator_``).
    energy_effective_rank_ : float
        :func:`~intrinsic_rank.spectral.energy_effective_rank` of ``kernel_``.
    numerical_rank_ : int
        Numerical rank of ``kernel_`` (NumPy's ``matrix_rank`` threshold).
    compute_dtype_ : {"float32", "bfloat16"}
        The dtype the students trained in (``compute_dtype`` resolved).
    attention_ : str
        The class trained: ``attention``, or the class ``"auto"`` chose.
    class_risks_ : dict or None
        After ``attention="auto"``: held-out risk of the full-rank student of each class
        (``inf`` for one that diverged); ``None`` otherwise.
    noise_floor_ : float or None
        The noise floor used: given, or estimated after a sweep; ``None`` for one rank.
    estimated_noise_floor_ : float
        After a sweep: the smallest held-out risk over the grid.
    excess_tol_ : float
        After a sweep: ``tol`` times the held-out variance of the targets.
    heldout_r2_ : float
        After a sweep: held-out R² of the selected rank.
    estimate_supported_ : bool
        After a sweep: ``False`` (with a warning) when the selected student explains
        less than 10% of the held-out variance, or an attention class does no better
        than the affine reference ``reference_risk_``.
    floor_reached_ : bool
        After a sweep: whether the noise floor is believed reached.
    reference_risk_ : float or None
        After a sweep: held-out risk of a least-squares affine map of the whole
        sequence (``None`` in-sample, above 1024 features or with too few sequences).
    warnings_ : list of str
        The text of every warning about the estimate.
    train_risk_ : float
        After a single-rank fit: the training risk.
    x_scale_, y_scale_ : float
        The powers of two ``X`` and ``Y`` were trained in units of (``1.0`` near unit
        size).
    sweep_ : list of dict
        After a sweep, one record per rank: ``rank``, ``train_risk``, ``heldout_risk``,
        ``excess_risk``, ``reached`` and the rank measures of its kernel.
    history_ : list of dict
        Per epoch: ``epoch``, ``train_loss`` (summed over ranks),
        ``train_loss_per_rank``, ``dur``; ``heldout_risk_per_rank`` with
        ``early_stopping``; ``round`` and ``ranks`` after ``rank_grid="auto"``. The
        first restart of every rank (``n_init="auto"``), or the kept one (an integer).
    trained_ranks_ : ndarray
        Every rank trained.
    search_rounds_ : list of dict
        One record per batched run: ``ranks`` and ``epochs``; with ``n_init="auto"``
        also ``probe_epochs`` and the ``restarted`` ranks.
    rank_epochs_ : int
        Training work: the sum over runs of ranks times epochs (an integer ``n_init``
        trains its restarts within it; the probes and second restarts of ``"auto"``
        are counted in ``search_rounds_``, not here).
    n_init_ : int
        The most restarts a rank trained (``n_init``, or 1 or 2 for ``"auto"``).
    restart_risks_ : ndarray of shape (R, ``n_init_``)
        Training risk of every restart of every rank in ``ranks_`` (NaN where a rank
        trained fewer); the kept one is the lowest of each row.
    kept_slots_ : ndarray of int, shape (R,)
        The slot of ``net_.module_`` holding each rank of ``ranks_``: its kept
        restart (an integer ``n_init`` trains every restart in ``net_.module_``;
        ``0, ..., R-1`` for ``n_init=1`` and ``"auto"``, whose kept second restarts are
        copied into their rank's slot).
    n_epochs_ : int
        Epochs of the longest run.
    n_features_in_ : int
        Size of the last axis of ``X``.
    seq_len_, token_dim_, d_out_ : int
        Sequence length, token dimension and output dimension seen in ``fit``.
    target_ : {"sequence", "final"}
        Per-token targets (3-D ``Y``) or a target of the final position.
    x_ndim_, y_ndim_ : int
        The dimensions of the ``X`` and ``Y`` seen in ``fit`` (``predict`` returns
        ``Y``'s shape).

    See Also
    --------
    intrinsic_rank.datasets.make_attention_task : teachers with known ``r*``.

    Notes
    -----
    ``X`` is ``(n, L, d)``, or ``(n, L)`` read as ``L`` scalar tokens. ``Y`` is
    ``(n, L, d_out)`` for per-token targets, or ``(n,)`` / ``(n, k)`` for a target read
    at the final position; ``predict`` returns the selected rank's predictions shaped
    like ``Y``.

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
        n_init="auto",
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
        self.n_init = n_init
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

    _parameter_constraints = PARAMETER_CONSTRAINTS
    """Every parameter in scikit-learn's own form
    (:data:`~._attention_params.PARAMETER_CONSTRAINTS`), checked first in ``fit`` and by
    scikit-learn's ``_validate_params()``."""

    _parameter_rules = PARAMETER_RULES
    """What the constraints cannot say, and the value ``fit`` uses
    (:data:`~._attention_params.PARAMETER_RULES`, :func:`~._params.checked_params`)."""

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

    def _max_rank(self, attention):
        """The largest rank of ``attention``'s students on the data seen in ``fit``."""
        limit = STUDENTS[attention].rank_limit(self.token_dim_, self.seq_len_)
        if self._student_class(attention) is RotarySoftmaxStudent:
            return min(limit, self._head_dim())
        return limit

    def _rank_grid(self, ranks, attention):
        """The ranks to train: ``rank_grid`` as checked, or the single rank, within the limit."""
        limit = self._max_rank(attention)
        if isinstance(ranks, str):
            return coarse_rank_grid(limit)
        rotary = self._student_class(attention) is RotarySoftmaxStudent
        what = rank_limit_text(attention, limit, self.token_dim_,
                               self._head_dim() if rotary else None,
                               self.n_features_in_ if self.x_ndim_ == 2 else None)
        return ranks_within_limit(ranks, self.rank, limit, what)

    def _batch_size(self, n_train):
        if isinstance(self.batch_size, str):
            return min(256, max(16, n_train // 8))
        return self.batch_size

    # -- fitting: short steps, in order ------------------------------------------------
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
        params = checked_params(self)
        X, Y = validate_sequences(self, X, Y, reset=True, keep_float32=True)
        auto_class = self.attention == "auto"
        if auto_class and self.rank_grid is None:
            raise ValueError(
                "AttentionRankEstimator: attention='auto' chooses the class by held-out "
                "risk, which needs a sweep; give rank_grid, or an explicit attention for "
                "one rank"
            )
        ranks = None if auto_class else self._rank_grid(params["rank_grid"], self.attention)
        data = self._training_data(X, Y, params)
        attention, class_risks, cut = self.attention, None, None
        if auto_class:
            attention, class_risks, ranks, cut = self._choose_class(params["rank_grid"], data)
        nets, ranks = self._train(ranks, data, attention)
        self.attention_, self.class_risks_ = attention, class_risks
        self.compute_dtype_ = data.compute_dtype
        self._store_runs(nets, ranks, data)
        self._store_kernels(data.X_train)
        train_risk = self._risks(data.X_train, data.Y_train, "the training data")
        if data.heldout is None:
            self._store_single(train_risk)
        else:
            self._judge_sweep(X, Y, data, train_risk, cut)
        self._check_restarts(nets, train_risk, data)
        self._store_selected()
        return self

    def _training_data(self, X, Y, params):
        """The split, units and tensors of this fit (:func:`~._training_data.training_data`),
        and its settings resolved: the runs read them from the returned Bunch."""
        sweep = self.rank_grid is not None
        patience = params["n_iter_no_change"] if params["early_stopping"] else None
        data = training_data(X, Y, sweep=sweep, validation_fraction=self.validation_fraction,
                             seed=draw_seed(self.random_state), device=params["device"],
                             tol=self.tol, patience=patience)
        self.x_scale_, self.y_scale_ = data.x_scale, data.y_scale
        n_init = params["n_init"]
        if n_init == "auto" and params["init_weights"] is not None:
            n_init = 1  # every slot starts from the same teacher: nothing to draw
        # restarts disagree, or one is needed, beyond the selection's own tolerance
        # (tol times the variance of the training targets, in the units of Y)
        restart_tolerance = self.tol * mean_variance(data.Y_train) / data.y_scale**2
        data.update(compute_dtype=resolve_compute_dtype(params["compute_dtype"], data.device),
                    n_init=n_init, restart_tolerance=restart_tolerance,
                    optimizer=params["optimizer"], init_weights=params["init_weights"],
                    value_map=params["value_map"], callbacks=params["callbacks"])
        return data

    def _choose_class(self, rank_grid, data):
        """``attention="auto"``: the class kept, every class's risk, its grid, what was cut."""

        def heldout_risk_of(name):
            net = train_run(self, [self._max_rank(name)], data, name)
            risks, _ = rankwise_risks(net, data.X_held, data.Y_held)
            return float(risks[net.kept_slots_[0]]) / data.y_scale**2

        class_risks = compare_classes(heldout_risk_of)
        attention = choose_attention(class_risks, data.variance, self.tol)
        if isinstance(rank_grid, str):
            return attention, class_risks, self._rank_grid(rank_grid, attention), None
        ranks, cut = grid_in_class(rank_grid, self._max_rank(attention), attention)
        return attention, class_risks, ranks, cut

    def _train(self, ranks, data, attention):
        """The runs of this fit: one batched run, or the rounds of ``rank_grid="auto"``."""
        if self._auto():
            return adaptive_runs(self, ranks, data, attention)
        return [train_run(self, ranks, data, attention)], ranks

    def _store_runs(self, nets, ranks, data):
        """``net_`` over every rank trained, and the record of the runs."""
        self.net_ = (merged_net(self, nets, ranks, data, self.attention_) if self._auto()
                     else nets[0])
        self.ranks_ = np.asarray(ranks)
        self.kept_slots_ = np.asarray(self.net_.kept_slots_)
        self.trained_ranks_ = np.asarray(ranks)
        self.search_rounds_ = [
            {"ranks": list(n.run_ranks_), "epochs": len(n.history),
             **getattr(n, "restart_record_", {})} for n in nets
        ]
        self.rank_epochs_ = int(sum(len(r["ranks"]) * r["epochs"] for r in self.search_rounds_))
        self.n_epochs_ = int(max(r["epochs"] for r in self.search_rounds_))
        self.history_ = run_history(nets, data.y_scale)
        if self.init_weights is None:
            # a warm start may begin at the teacher itself, where the loss cannot fall
            for n in nets:
                warn_if_loss_never_fell(n, slots=n.kept_slots_)

    def _check_restarts(self, nets, train_risk, data):
        """``restart_risks_`` and ``n_init_``, and a warning when the selected rank's
        restarts disagree."""
        if all(n.restart_risks_ is None for n in nets):  # n_init=1
            self.restart_risks_ = np.asarray(train_risk, dtype=float)[:, None]
            self.n_init_ = 1
            return
        self.restart_risks_ = gather_restart_risks(nets, self.ranks_, train_risk)
        self.n_init_ = int(self.restart_risks_.shape[1])
        if data.heldout is None:  # the selection's tolerance, on the training targets
            threshold = data.restart_tolerance
        else:
            threshold = self.excess_tol_
        text = restart_warning(self.rank_, self.restart_risks_[self.rank_index_], threshold)
        if text is not None:
            self._warn(text, ConvergenceWarning)

    def _store_single(self, train_risk):
        self.rank_index_ = 0
        self.rank_ = int(self.ranks_[0])
        self.noise_floor_ = self.noise_floor
        self.train_risk_ = float(train_risk[0])
        self.warnings_ = []

    def _judge_sweep(self, X, Y, data, train_risk, cut):
        """Select ``r*`` from the held-out risks, and warn where the evidence is weak.

        ``cut`` says which ranks of the grid ``attention="auto"`` left out (or None)."""
        heldout_risk = self._risks(data.X_held, data.Y_held, "the held-out data")
        reference = None
        if self.validation_fraction != 0:
            reference = reference_risk(X, Y, data.train, data.heldout, data.x_scale,
                                       data.y_scale)
        judged = judge_sweep(self.ranks_, heldout_risk, data.variance, self.tol,
                             self.noise_floor, attention=self.attention_,
                             max_rank=self._max_rank(self.attention_), reference=reference,
                             class_risks=self.class_risks_)
        self.rank_index_, self.rank_ = judged.rank_index, judged.rank
        self.noise_floor_ = judged.noise_floor
        self.estimated_noise_floor_ = judged.estimated_noise_floor
        self.excess_tol_ = judged.excess_tol
        self.reference_risk_ = reference
        self.floor_reached_ = judged.floor_reached
        self.heldout_r2_ = judged.heldout_r2
        self.estimate_supported_ = judged.estimate_supported
        self.warnings_ = []
        for message, category in ([(cut, UserWarning)] if cut else []) + judged.warnings:
            self._warn(message, category)
        self.sweep_ = sweep_records(self.ranks_, train_risk, heldout_risk, judged.excess,
                                    judged.reached, self.kernels_)

    # -- the fitted students ------------------------------------------------------
    def _outputs(self, X_t):
        """Outputs of every rank (its kept slot), ``(n, R, ...)``, float64, training units."""
        return kept_outputs(self.net_, X_t, self._kept)

    def _risks(self, X_t, Y_t, where):
        risk, finite = rankwise_risks(self.net_, X_t, Y_t)
        if len(self.kept_slots_) != len(self.net_.module_.ranks):
            # restarts left behind may have diverged: only the kept slots count
            risk = self._kept(risk, axis=0)
            finite = bool(np.all(np.isfinite(risk)))
        if not finite:
            raise TrainingDivergedError(
                f"the trained students' outputs on {where} overflow float32 (not "
                "finite); lower lr or init_scale"
            )
        y_scale = getattr(self, "y_scale_", 1.0)
        return risk if y_scale == 1.0 else risk / y_scale**2

    def _store_kernels(self, X_t):
        kernels = slot_kernels(self.net_.module_, self.attention_, X_t, self.x_scale_)
        self.kernels_ = self._kept(kernels, axis=0)

    def _kept(self, values, axis):
        """The kept slot of each rank along ``axis`` (every slot when there are no restarts)."""
        if len(self.kept_slots_) == len(self.net_.module_.ranks):
            return values
        return np.take(values, self.kept_slots_, axis=axis)

    def _warn(self, message, category):
        """Warn about the estimate, and keep the text in ``warnings_``.

        Called by the steps of ``fit`` (``_judge_sweep``, ``_check_restarts``): the warning
        points at the caller's ``fit`` (this method, the step, ``fit``, its wrapper)."""
        self.warnings_.append(message)
        warnings.warn(message, category, stacklevel=5)

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
        X_t = self._tensor(X)  # checks that the estimator is fitted
        return slot_mixers(self.net_.module_, X_t, self.kept_slots_[self.rank_index_])
