"""ReachabilityEstimator: which target sequences a frozen causal LM can be prompted to produce.

The reachability paper, "How many outputs can a Transformer generate":
``m`` trainable prompt vectors in front of a frozen causal LM are optimised to
make it produce a target sequence (the *cramming* protocol). The fraction of
random targets reached, as a function of target length and ``m``, is compared
with a bound computed from the geometry of the model's final hidden states.

This module holds the estimator's flow: check the targets, cram them (the
net and its rules are in :mod:`._cramming`), decode, then measure the
geometry and the bounds of random-prompt hidden states with
:func:`~intrinsic_rank.inspection.states_geometry`, the computation
:func:`~intrinsic_rank.inspection.reachability_geometry` uses too.
"""

import contextlib
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import bounds
from .._validation import check_token_ids, draw_seed
from ..inspection import states_geometry
from ..nn import CausalLMAdapter, PromptedLM, as_causal_lm, random_prompt_hidden_states
from ._cramming import AllTargetsDone, CrammingNet, FiniteLoss
from ._callbacks import FitProgress, user_callbacks
from ._params import (Integers, Reals, StrOptions, callbacks_rule, checked_params, device_rule,
                      fits_from_scratch)

__all__ = ["ReachabilityEstimator"]


def _check_betas(betas):
    try:
        b1, b2 = (float(b) for b in betas)
    except (TypeError, ValueError):
        raise ValueError(f"betas must be a pair of floats in [0, 1); got {betas!r}") from None
    if not (0 <= b1 < 1 and 0 <= b2 < 1):
        raise ValueError(f"betas must be a pair of floats in [0, 1); got {betas!r}")
    return b1, b2


_CELL_REGIONS = ("box", "ball")



@contextlib.contextmanager
def _frozen(module):
    """``module`` frozen and in eval mode inside the block, its own flags restored after.

    Every parameter's ``requires_grad`` and every submodule's ``training`` flag
    are put back in a ``finally``, so a caller's model shared with a fit (not
    copied) is left as it was, also when the fit fails. Gradients then flow only
    into the prompt vectors: torch computes none for a weight with
    ``requires_grad=False``, so no ``no_grad`` block is needed.
    """
    params = [(p, p.requires_grad) for p in module.parameters()]
    modes = [(m, m.training) for m in module.modules()]
    try:
        for p, _ in params:
            p.requires_grad_(False)
        for m, _ in modes:
            m.training = False
        yield module
    finally:
        for p, flag in params:
            p.requires_grad_(flag)
        for m, mode in modes:
            m.training = mode


def _on_device(module, device):
    """Whether every parameter of ``module`` is already on ``device``."""
    want = torch.device(device)
    for p in module.parameters():
        if p.device.type != want.type or (want.index is not None
                                          and p.device.index != want.index):
            return False
    return True


def _check_precision(estimator, value):
    """A dtype name that :func:`~intrinsic_rank.bounds.precision_from_dtype` knows, or a
    number in ``(0, 1]`` (the constraints' part); the model's own dtype is read at fit."""
    if isinstance(value, str):
        bounds.precision_from_dtype(value)
    return value


class ReachabilityEstimator(BaseEstimator):
    """Cram target sequences into prompt vectors of a frozen causal LM (reachability paper).

    For every target sequence ``t = (t_1, ..., t_n)`` (a row of ``X``), ``fit``
    optimises ``n_memory`` prompt vectors placed in front of ``t_1`` so that the
    frozen model, fed the target teacher-forced, predicts ``t_2 .. t_n``: the
    cramming protocol of the reachability paper (AdamW, lr 1e-2, betas (0.9, 0.9),
    weight decay 0.01, at most 3000 steps, patience 500, stop at exact match).
    All targets train in one batched optimisation. A target is *reached* when
    greedy decoding from its memory and first token reproduces it exactly;
    ``accessibility_`` is the fraction reached.

    ``fit`` also measures the geometry behind the paper's bound (``geometry_``): the
    radius ``r`` (largest infinity-norm of final hidden states over random prompts),
    the per-coordinate ranges of those states, and the precision ``eps``; from them
    the count bound ``(1 + 2r/eps)^(d m)`` (as a log) and the slope bound
    ``C = d ln(1 + 2r/eps) / ln|V|`` on the reachable length per prompt vector
    (:mod:`intrinsic_rank.bounds`).

    From the same hidden states it computes the reachability paper's two refinements
    (``docs/reachability_bounds.md``, "Cone and cell-volume refinements"): the cone
    about one state that holds them all, and the decoder cells of ``n_cell_samples``
    Monte Carlo points sent to next tokens by the model's head. All of it is one
    attribute, ``geometry_``, the result of
    :func:`~intrinsic_rank.inspection.states_geometry`, whose ``table`` lists the four
    slope bounds (ball, box, cone, box + cells) under each of the three precision
    conventions of :func:`~intrinsic_rank.bounds.precision_for`.

    Faults: a :class:`KeyboardInterrupt` during ``fit`` (Ctrl-C) is raised again
    once skorch has closed its callbacks, and the estimator is left unfitted,
    never with a truncated run that looks finished (each ``fit`` starts by
    removing the attributes of the previous one, and a failed one leaves none).
    A non-finite loss raises :class:`~intrinsic_rank.TrainingDivergedError`.
    A finite blow-up needs no rule of its own here: the loss is a cross-entropy
    of a frozen model whose final normalisation bounds its logits (the default
    model ends in a LayerNorm, as causal LMs usually do), so it stays bounded
    whatever the memory vectors do.
    Token arrays of any memory layout (``X[:, ::-1]``, Fortran order) are
    copied to a contiguous one.

    Parameters
    ----------
    model : "default", str, TinyCausalLM, transformers model or CausalLMAdapter, default="default"
        The frozen causal LM: ``"default"`` is the embedded model of
        :func:`intrinsic_rank.nn.load_default_model`; a folder path loads a
        Hugging Face causal LM offline; see :func:`intrinsic_rank.nn.as_causal_lm`.
        A given model instance already on ``device`` is shared, not copied: it is
        frozen (``requires_grad=False``, eval mode) while ``fit``, ``predict``
        or ``score`` runs, and each parameter's ``requires_grad`` and each
        module's training flag are restored afterwards, also after a failed
        fit; an instance on another device is copied there. The fitted
        estimator keeps a reference to it (``net_.module_.lm``). An adapter is
        shared as it is (it is frozen for good).
    n_memory : int, default=1
        Prompt vectors per target, ``m >= 1``.
    max_epochs : int, default=3000
        Most optimisation steps per target. One skorch epoch is one optimiser
        step over all still-active targets (their gradients accumulated over
        chunks of ``chunk_size``), so epochs and steps are the same count.
    patience : int, default=500
        A target stops after this many steps without a better token accuracy.
    lr : float, default=1e-2
    betas : tuple of float, default=(0.9, 0.9)
    weight_decay : float, default=0.01
        AdamW's settings.
    init_scale : float or None, default=None
        Memory starts ``randn(m, d) * init_scale``; None uses the standard
        deviation of the model's input embedding matrix.
    chunk_size : int or None, default=256
        Targets per forward pass: gradients of all active targets are
        accumulated over chunks of this size into one step (so it changes the
        memory needed, not the optimisation); None puts all of them in one pass.
        Decoding and the radius prompts are chunked the same way.
    precision : float, str or None, default=None
        The precision ``eps`` of the bound, an absolute cell size in
        hidden-state units: a number, a dtype name (``"float16"`` gives
        ``2^-10``, the paper's choice), or None for the machine epsilon of the
        model's own dtype (``2^-23`` for float32).
    n_radius_prompts : int, default=256
        Random prompts (random memory vectors as at initialisation, then random
        tokens, of the fitted length) over which the radius and ranges are measured.
    n_cell_samples : int, default=0
        Monte Carlo points of the decoder-cell estimate
        (:func:`~intrinsic_rank.inspection.decoder_cell_proportions`); 0, the
        default, skips it (``geometry_.cells`` is then None), so a fit
        pays only for cramming. Ask for it with a positive count (``2**17``
        takes about a second on the default model and about 80 s on
        SmolLM2-135M-Instruct's 49,152 x 576 head, one idle CPU thread); its standard error
        falls like ``n_cell_samples**-0.5`` and the decay ``c`` it can show is
        at most ``ln n_cell_samples``.
    cell_region : {"box", "ball"}, default="box"
        The region the cells split: the per-coordinate box of the hidden
        states, or the smallest ball about the origin that holds them.
    random_state : None, int or numpy.random.RandomState, default=None
        Seeds the memories, the radius prompts and the cell Monte Carlo. A target's initial memory
        depends only on the seed and the target, so results do not depend on
        which other targets share the batch.
    device : str or torch.device, default="cpu"
    verbose : int, default=0
        0 silent; 1 a progress bar over steps (on a terminal only); 2 skorch's
        per-step table.
    callbacks : list of skorch callbacks or (name, callback) pairs, or None, default=None
        Added to the estimator's own callbacks (the divergence check, the stop
        once every target is done, the progress bar), after them, as skorch's
        ``callbacks`` parameter takes them. One epoch is one optimiser step,
        so an ``LRScheduler`` steps per optimiser step. Targets crammed anew
        by ``predict`` run them too. There is no skorch validation split: a
        callback monitoring ``"valid_loss"`` (``EarlyStopping()``'s default)
        monitors ``"train_loss"`` instead, and a monitor of a key nothing
        records is a ``ValueError`` naming the keys recorded.

    Attributes
    ----------
    memory_ : ndarray of shape (n_targets, n_memory, width)
        The learned prompt vectors (the best of each target's run).
    reached_ : ndarray of shape (n_targets,), bool
        Greedy decoding from the memory reproduces the target exactly.
    token_accuracy_ : ndarray of shape (n_targets,)
        Teacher-forced accuracy on tokens ``2..n`` of the kept memory.
    accessibility_ : float
        Fraction of targets reached.
    n_steps_ : ndarray of shape (n_targets,)
        Optimisation steps each target used.
    loss_ : ndarray of shape (n_targets,)
        Mean token cross-entropy of the kept memory.
    geometry_ : Bunch
        The geometry behind the bounds, from
        :func:`~intrinsic_rank.inspection.states_geometry` of the random-prompt hidden
        states: ``radius`` (largest infinity-norm), ``widths`` (each coordinate's range),
        ``precision`` (the ``eps`` used), ``log_count_bound`` and ``slope_bound`` (the
        ball bounds), ``box_log_count_bound`` and ``box_slope_bound``,
        ``min_cosine``, ``cone_half_angle``, ``cone_log_fraction``,
        ``cone_log_count_bound`` and ``cone_slope_bound``, ``cells`` (the decoder-cell
        proportions of both rules and their ``disagreement``, or None when
        ``n_cell_samples=0`` or the model has no usable head), ``decay``
        (:func:`~intrinsic_rank.bounds.cell_decay`, or None), ``cell_slope_bound``
        (NaN without cells), ``cell_error`` and ``table`` (one row per bound and
        precision convention); and, of the fit, ``learned_radius`` (the largest
        infinity-norm under the learned prompts) and ``log_n_sequences``
        (``(n - 1) ln|V|``, the log of the number of possible targets).
    width_, vocab_size_, context_length_ : int
        Model width ``d``, vocabulary ``|V|`` and context (None if unbounded).
    seq_len_ : int
        Target length ``n`` seen in ``fit``.
    n_features_in_ : int
        Same as ``seq_len_`` (columns of ``X``).
    net_ : CrammingNet
        The skorch net; ``net_.module_`` is the :class:`~intrinsic_rank.nn.PromptedLM`.
    history_ : list of dict
        Per step: ``epoch``, ``train_loss`` (summed over active targets),
        ``n_active`` and ``dur``.
    targets_ : ndarray of int64, shape (n_targets, ``seq_len_``)
        The targets crammed (``X`` as checked); ``predict`` reuses their memories.
    seed_ : int
        The seed this fit drew from ``random_state``: the prompts' initialisation and the
        random prompts of the geometry; ``predict`` crams a new target with it.

    Examples
    --------
    >>> from intrinsic_rank import ReachabilityEstimator
    >>> from intrinsic_rank.datasets import make_random_targets
    >>> X = make_random_targets(8, 4, vocab_size=64, random_state=0)
    >>> est = ReachabilityEstimator(n_memory=2, max_epochs=300, random_state=0).fit(X)
    >>> bool(est.accessibility_ > 0.5), est.geometry_.cells is None
    (True, True)
    >>> bool(est.geometry_.box_slope_bound <= est.geometry_.slope_bound)
    True
    >>> bool((est.predict(X)[est.reached_] == X[est.reached_]).all())
    True
    """

    def __init__(
        self,
        *,
        model="default",
        n_memory=1,
        max_epochs=3000,
        patience=500,
        lr=1e-2,
        betas=(0.9, 0.9),
        weight_decay=0.01,
        init_scale=None,
        chunk_size=256,
        precision=None,
        n_radius_prompts=256,
        n_cell_samples=0,
        cell_region="box",
        random_state=None,
        device="cpu",
        verbose=0,
        callbacks=None,
    ):
        self.model = model
        self.n_memory = n_memory
        self.max_epochs = max_epochs
        self.patience = patience
        self.lr = lr
        self.betas = betas
        self.weight_decay = weight_decay
        self.init_scale = init_scale
        self.chunk_size = chunk_size
        self.precision = precision
        self.n_radius_prompts = n_radius_prompts
        self.n_cell_samples = n_cell_samples
        self.cell_region = cell_region
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.callbacks = callbacks

    _parameter_constraints = {
        "model": "no_validation",  # a name, a file, a folder or a module: checked on loading
        "n_memory": [Integers(1)],
        "max_epochs": [Integers(1)],
        "patience": [Integers(1)],
        "lr": [Reals(0.0, closed="neither")],
        "betas": ["array-like"],
        "weight_decay": [Reals(0.0)],
        "init_scale": [None, Reals(0.0, closed="neither")],
        "chunk_size": [None, Integers(1)],
        "precision": [None, str, Reals(0.0, 1.0, closed="right")],
        "n_radius_prompts": [Integers(1)],
        "n_cell_samples": [Integers(0)],
        "cell_region": [StrOptions(set(_CELL_REGIONS))],
        "random_state": ["random_state"],
        "device": [str, torch.device],
        "verbose": [Integers(0)],
        "callbacks": [None, list, tuple],
    }
    """Every parameter in scikit-learn's own form, checked first in ``fit`` (and by
    scikit-learn's ``_validate_params()``)."""

    _parameter_rules = {
        "betas": lambda estimator, value: _check_betas(value),
        "precision": _check_precision,
        "device": device_rule,
        "callbacks": callbacks_rule,
    }
    """What the constraints cannot say: the pair of ``betas``, a dtype name of
    ``precision``, a device that exists here (:func:`~._params.checked_params`)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # token ids: scikit-learn's checks then feed non-negative integers
        tags.input_tags.categorical = True
        tags.input_tags.positive_only = True
        tags.target_tags.required = False
        return tags

    # -- validation ---------------------------------------------------------------
    def _precision(self, lm):
        if self.precision is None:
            return bounds.precision_from_dtype(str(lm.dtype))
        if isinstance(self.precision, str):
            return bounds.precision_from_dtype(self.precision)
        return float(self.precision)

    def _validate_targets(self, X, reset):
        # "numeric" keeps integer arrays as they are and converts object arrays
        if not hasattr(X, "dtype"):
            try:
                np.asarray(X, dtype=np.int64)
            except OverflowError:  # Python ints beyond every integer dtype (2**70)
                X = check_token_ids(X, self.vocab_size_)  # names the id in one line
            except (TypeError, ValueError):
                pass  # validate_data below says what is wrong
        X = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=True)
        if not np.issubdtype(X.dtype, np.integer):
            fractional = X != np.round(X)
            if fractional.any():
                raise ValueError(
                    "X must hold integer token ids; found the non-integer value "
                    f"{float(X[fractional][0])!r}"
                )
        if X.shape[1] < 2:
            raise ValueError(
                f"X has {X.shape[1]} feature(s) (tokens per target), but a target needs "
                "at least 2 tokens: the first is given as input, the rest are produced"
            )
        vocab = self.vocab_size_
        if (X < 0).any():
            raise ValueError(
                f"Negative values in data passed to {type(self).__name__}: token id "
                f"{int(X[X < 0][0])} is outside the model's vocabulary 0..{vocab - 1}"
            )
        out = X >= vocab
        if out.any():
            raise ValueError(
                f"X holds token id {int(X[out][0])}, which is outside the model's "
                f"vocabulary 0..{vocab - 1}"
            )
        needed = self.n_memory + X.shape[1] - 1
        if self.context_length_ is not None and needed > self.context_length_:
            raise ValueError(
                f"targets of length {X.shape[1]} with n_memory={self.n_memory} need "
                f"{needed} positions, but the model's context is {self.context_length_}"
            )
        # one contiguous copy: torch takes no negative strides (X[:, ::-1])
        return np.ascontiguousarray(X, dtype=np.int64)

    # -- fitting ------------------------------------------------------------------
    @fits_from_scratch
    def fit(self, X, y=None):
        """Learn prompt vectors for every target and measure the bound's geometry.

        Parameters
        ----------
        X : array-like of shape (n_targets, length), int
            Target token sequences (ids in ``0 .. vocab_size - 1``).
        y : None
            Ignored.

        Returns
        -------
        self : ReachabilityEstimator
        """
        params = checked_params(self)
        device = params["device"]
        model = self.model
        if isinstance(model, torch.nn.Module) and not isinstance(model, CausalLMAdapter) \
                and _on_device(model, device):
            with _frozen(model):
                return self._fit(as_causal_lm(model, copy_model=False, progress=False), X,
                                 device)
        return self._fit(as_causal_lm(model).to(device), X, device)

    def _fit(self, lm, X, device):
        self.width_ = int(lm.width)
        self.vocab_size_ = int(lm.vocab_size)
        self.context_length_ = lm.max_length
        X = self._validate_targets(X, reset=True)
        self.seq_len_ = X.shape[1]
        seed = draw_seed(self.random_state)
        self.seed_ = seed
        net = self._cram(lm, X, seed, device)
        self.net_ = net
        self.memory_ = net.best_memory_.cpu().numpy()
        self.token_accuracy_ = net.best_accuracy_.numpy().astype(float)
        self.loss_ = net.best_loss_.numpy().astype(float)
        self.n_steps_ = net.steps_.numpy()
        self.history_ = [
            {key: row.get(key) for key in ("epoch", "train_loss", "n_active", "dur")}
            for row in net.history
        ]
        # the kept memories become the module's, for decoding and later pickling
        with torch.no_grad():
            net.module_.memory.copy_(net.best_memory_)
        self.targets_ = X
        outputs = self._decode(net.module_, X)
        self.reached_ = np.all(outputs == X, axis=1)
        self.accessibility_ = float(self.reached_.mean())
        self._measure_geometry(lm, X, seed)
        return self

    def _build_net(self, lm, X, seed, device):
        callbacks = [("finite_loss", FiniteLoss()), ("all_done", AllTargetsDone())]
        if self.verbose == 1:
            callbacks.append(("progress", FitProgress(desc="cramming", unit="step",
                                                      postfix={"active": "n_active"})))
        callbacks.extend(user_callbacks(self.callbacks))
        # skorch's log table is built every epoch even when silent; a cramming
        # step is a few milliseconds, so it is switched off unless verbose >= 2
        print_log = {} if self.verbose >= 2 else {"callbacks__print_log": None}
        return CrammingNet(
            module=PromptedLM,
            module__lm=lm,
            module__targets=X,
            module__n_memory=self.n_memory,
            module__init_std=self.init_scale,
            module__random_state=seed,
            criterion=torch.nn.CrossEntropyLoss,
            optimizer=torch.optim.AdamW,
            optimizer__betas=_check_betas(self.betas),
            optimizer__weight_decay=self.weight_decay,
            lr=self.lr,
            max_epochs=self.max_epochs,
            patience=self.patience,
            chunk_size=self.chunk_size,
            train_split=None,
            callbacks=callbacks,
            **print_log,
            verbose=int(self.verbose >= 2),
            device=device,
        )

    def _cram(self, lm, X, seed, device):
        net = self._build_net(lm, X, seed, device)
        index = torch.arange(len(X), device=device)
        ids = torch.as_tensor(X, device=device)
        net.fit({"index": index, "ids": ids}, ids)
        return net

    def _decode(self, module, X):
        device = module.memory.device
        chunk_size = self.chunk_size
        chunk = len(X) if chunk_size is None else chunk_size
        out = []
        for start in range(0, len(X), chunk):
            ids = torch.as_tensor(X[start:start + chunk], device=device)
            index = torch.arange(start, start + len(ids), device=device)
            out.append(module.generate(index, ids[:, 0], X.shape[1]).cpu().numpy())
        return np.concatenate(out)

    def _measure_geometry(self, lm, X, seed):
        """``geometry_``: the radius, box, cone, decoder cells and bounds of the fitted model."""
        states = random_prompt_hidden_states(
            lm, self.n_memory, self.seq_len_ - 1, n_prompts=self.n_radius_prompts,
            init_std=self.init_scale, batch_size=self.chunk_size,
            random_state=seed)
        with torch.no_grad():
            device = self.net_.module_.memory.device
            learned = self.net_.module_.final_hidden(
                torch.arange(len(X), device=device), torch.as_tensor(X, device=device))
        geometry = states_geometry(lm, states, self.n_memory, self._precision(lm),
                                   n_cell_samples=self.n_cell_samples,
                                   cell_region=self.cell_region, random_state=seed,
                                   verbose=self.verbose >= 1)
        if geometry.cell_error is not None:
            warnings.warn(f"the decoder-cell refinement was skipped: {geometry.cell_error}",
                          UserWarning, stacklevel=4)
        del geometry["flat"]  # every state again, in float64: not kept with the estimator
        geometry.learned_radius = float(learned.float().abs().max())
        geometry.log_n_sequences = float((self.seq_len_ - 1) * np.log(self.vocab_size_))
        self.geometry_ = geometry

    # -- prediction ---------------------------------------------------------------
    def _memories_for(self, X):
        """Memory of each row: the learned one for fitted targets, crammed anew otherwise."""
        fitted = {tuple(row): i for i, row in enumerate(self.targets_.tolist())}
        rows = [fitted.get(tuple(row)) for row in X.tolist()]
        memory = np.empty((len(X), self.n_memory, self.width_), dtype=np.float32)
        known = np.array([r is not None for r in rows], dtype=bool)
        if known.any():
            memory[known] = self.memory_[[r for r in rows if r is not None]]
        if not known.all():
            # a new target has no memory yet: cram one with the fitted settings
            lm = self.net_.module_.lm
            net = self._cram(lm, X[~known], self.seed_, self.net_.device)
            memory[~known] = net.best_memory_.cpu().numpy()
        return memory

    def predict(self, X):
        """Greedy output of the frozen model from each target's prompt vectors.

        Rows of ``X`` seen in ``fit`` use their learned memory; a row never seen
        gets its memory crammed first, with the fitted settings and seed (the
        only way to find a prompt for a new target).

        Parameters
        ----------
        X : array-like of shape (n, ``seq_len_``), int
            Target sequences; the first token of each row is given as input.

        Returns
        -------
        outputs : ndarray of shape (n, ``seq_len_``), int64
            First token, then the ``seq_len_ - 1`` greedily decoded tokens.
        """
        check_is_fitted(self)
        X = self._validate_targets(X, reset=False)
        module = self.net_.module_
        with _frozen(module.lm):  # a shared caller's model: frozen for the call only
            decoder = PromptedLM(module.lm, X[:0], self.n_memory)
            decoder.memory = torch.nn.Parameter(
                torch.as_tensor(self._memories_for(X), device=module.memory.device),
                requires_grad=False)
            return self._decode(decoder, X)

    def score(self, X, y=None):
        """Accessibility of ``X``: the fraction of rows reproduced exactly by ``predict``.

        Parameters
        ----------
        X : array-like of shape (n, ``seq_len_``), int
        y : None
            Ignored.

        Returns
        -------
        accessibility : float
        """
        X_checked = self._validate_targets(X, reset=False) if hasattr(self, "net_") else X
        return float(np.mean(np.all(self.predict(X) == X_checked, axis=1)))

