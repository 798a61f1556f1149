"""The estimators' training rules as named skorch callbacks.

* :class:`RankwiseEpochLoss` records each rank's mean training loss per epoch.
* :class:`DivergenceCheck` raises :class:`~._errors.TrainingDivergedError` on a
  non-finite loss or a blow-up, and keeps the loss before the first step for
  :func:`warn_if_loss_never_fell`.
* :class:`PlateauStopping` ends a sweep once every rank slot's held-out risk
  has plateaued.
* :class:`FitProgress` draws a progress bar at ``verbose=1``.

A user's own callbacks (the estimators' ``callbacks`` parameter) run after
these, in the order given (:func:`user_callbacks`).
"""

import copy
import warnings

import numpy as np
from skorch.callbacks import Callback

from . import _scaling
from ._errors import TrainingDivergedError, TrainingFinished
from ._net import output_entries_per_row, rankwise_risks

__all__ = ["DIVERGENCE_FACTOR", "LOSS_FALL_RTOL", "MONITORED_INSTEAD", "DivergenceCheck",
           "FitProgress", "PlateauStopping", "RankwiseEpochLoss", "user_callbacks",
           "warn_if_loss_never_fell"]

DIVERGENCE_FACTOR = 1e6
"""A training loss above this many times the targets' mean square is divergence.

The mean square of the targets is the risk of predicting zero, which is about
where a student from a small initialisation starts; a loss a million times
larger is a blow-up, never a transient."""


LOSS_FALL_RTOL = 1e-5
"""A loss counts as having fallen when it ends lower than its start by more than this share.

The start is the loss on all the training data before any step, the end the
last epoch's mean batch loss. Without training the two are equal in exact
arithmetic but differ in float32 by the rounding of a different summation
order (batches, threads, SIMD width): measured at ``lr=1e-12`` on the linear,
softmax and fixed-operator teachers of the tests, at one and two threads, by
at most ``1.1e-6`` of the loss, ten times below this tolerance. A fit that
learned anything falls by far more (``1e-4`` after three epochs on the random
data of scikit-learn's common checks, a tenth or more in the test suite's fits)."""


MONITORED_INSTEAD = {"valid_loss": "train_loss", "valid_loss_best": "train_loss_best"}
"""What a user's callback monitoring skorch's validation loss reads instead.

skorch's ``EarlyStopping()`` monitors ``"valid_loss"`` and ``Checkpoint()``
``"valid_loss_best"`` by default; the estimators' nets train without a skorch
validation split (a sweep holds its held-out part out itself), so those keys
are never recorded and the callback read the training loss's instead."""


def user_callbacks(callbacks):
    """The ``callbacks`` parameter as the net takes it: monitors of skorch's validation loss
    become the training loss's.

    A callback whose ``monitor`` is a key of :data:`MONITORED_INSTEAD` is copied
    with the training loss's key (the user's object is not changed); every other
    callback is passed as given. A monitor of a key that no callback records is
    refused when training reads it (``InterruptibleNet.notify``), naming the keys
    the history holds.

    Parameters
    ----------
    callbacks : list of callbacks or (name, callback) pairs, or None

    Returns
    -------
    callbacks : list

    Examples
    --------
    >>> from skorch.callbacks import EarlyStopping
    >>> stop = EarlyStopping()
    >>> user_callbacks([stop])[0].monitor, stop.monitor
    ('train_loss', 'valid_loss')
    """
    entries = []
    for entry in callbacks or []:
        name, callback = entry if isinstance(entry, tuple) else (None, entry)
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor in MONITORED_INSTEAD:
            callback = copy.copy(callback)
            callback.monitor = MONITORED_INSTEAD[monitor]
        entries.append(callback if name is None else (name, callback))
    return entries


class FitProgress(Callback):
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
    >>> bar = FitProgress(desc="cramming", unit="step", postfix={"active": "n_active"})
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


class RankwiseEpochLoss(Callback):
    """skorch callback: each rank's mean training loss of the epoch, ``train_loss_per_rank``.

    The batch losses a :class:`~._net.RankSweepNet` records are averaged with
    the batch sizes as weights, like skorch's own ``train_loss``.

    Examples
    --------
    >>> RankwiseEpochLoss().get_params()
    {}
    """

    def on_epoch_end(self, net, **kwargs):
        batches = net.history[-1, "batches"]
        losses = [b["train_loss_per_rank"] for b in batches if "train_loss_per_rank" in b]
        sizes = [b["train_batch_size"] for b in batches if "train_loss_per_rank" in b]
        if losses:
            mean = np.average(np.asarray(losses), axis=0, weights=sizes)
            net.history.record("train_loss_per_rank", mean.tolist())


class DivergenceCheck(Callback):
    """skorch callback: stop a rank sweep with :class:`~._errors.TrainingDivergedError`.

    Before the first step it evaluates each rank's loss on all the training
    data (``initial_loss_``, in chunks above ``CHUNK_ELEMENTS`` outputs); after
    every training batch it reads the per-rank batch losses. A loss that is
    not finite, or finite but above ``loss_limit``, is divergence.

    Parameters
    ----------
    loss_limit : float or None, default=None
        Largest loss of a rank that still counts as training (the estimator
        sets ``DIVERGENCE_FACTOR`` times the targets' mean square).
    restarts : bool, default=False
        Whether the net's slots are restarts of their ranks (``n_init``): then a
        slot that diverges is left behind (``diverged_``; its slot never shares
        arithmetic with another) and training stops only when every restart of
        some rank has diverged.
    spare : bool, default=False
        Whether the slots are spare restarts of ranks trained already (the probes and
        second restarts of ``n_init="auto"``): a slot that diverges is left behind,
        and the run ends without an error once every slot has. Nothing is evaluated
        before the first step (``initial_loss_`` is None): the first batch's losses
        show a draw that diverges.

    Examples
    --------
    >>> DivergenceCheck(loss_limit=2.0).loss_limit
    2.0
    """

    def __init__(self, loss_limit=None, restarts=False, spare=False):
        self.loss_limit = loss_limit
        self.restarts = restarts
        self.spare = spare

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        self.initial_loss_ = None
        self.diverged_ = set()
        if X is None or y is None or self.spare:
            return
        # the loss before any step, on all the training data (no randomness used)
        if len(X) * output_entries_per_row(net, X) <= _scaling.CHUNK_ELEMENTS:
            per_rank = net.criterion_(net.forward(X, training=False), y.to(net.device))
            self.initial_loss_ = per_rank.tolist()
        else:  # in chunks: never all (n, R, ...) outputs at once
            self.initial_loss_ = [float(v) for v in rankwise_risks(net, X, y)[0]]
        self._check(net, self.initial_loss_, "at initialisation")

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            losses = net.history[-1, "batches", -1, "train_loss_per_rank"]
            self._check(net, losses, f"at epoch {len(net.history)}")

    def _check(self, net, losses, when):
        ranks = [int(r) for r in net.module_.ranks]
        if self.spare:
            # every slot may be left behind: each is a spare of a rank trained already
            ranks = list(range(len(losses)))
            losses = self._left_behind(ranks, losses)
            if len(self.diverged_) == len(losses):
                raise TrainingFinished("every spare restart diverged")
            return
        if self.restarts:
            losses = self._left_behind(ranks, losses)
        bad = list(dict.fromkeys(r for r, v in zip(ranks, losses) if not np.isfinite(v)))
        if bad:
            raise TrainingDivergedError(
                f"training diverged {when}: the loss of rank(s) {bad} is not finite; "
                "lower lr or init_scale"
            )
        limit = self.loss_limit
        if limit is not None and max(losses) > limit:
            bad = list(dict.fromkeys(r for r, v in zip(ranks, losses) if v > limit))
            raise TrainingDivergedError(
                f"training diverged {when}: the loss of rank(s) {bad} reached "
                f"{max(losses):.3g}, more than {DIVERGENCE_FACTOR:.0e} times the mean "
                f"square of the targets ({limit / DIVERGENCE_FACTOR:.3g}, the risk of "
                "predicting zero); lower lr or init_scale"
            )


    def _left_behind(self, ranks, losses):
        """The losses with diverged restarts counted healthy while their rank has another."""
        limit = np.inf if self.loss_limit is None else self.loss_limit
        self.diverged_ |= {i for i, v in enumerate(losses) if not (np.isfinite(v) and v <= limit)}
        alive = {r for i, r in enumerate(ranks) if i not in self.diverged_}
        return [0.0 if i in self.diverged_ and r in alive else v
                for i, (r, v) in enumerate(zip(ranks, losses))]


class PlateauStopping(Callback):
    """skorch callback: end a rank sweep once every slot's held-out risk has plateaued.

    After each epoch the held-out risk of every rank slot is evaluated (in
    chunks, without gradient). A slot has **plateaued** when its held-out risk
    has not fallen below its best so far by more than ``min_delta`` for
    ``patience`` consecutive epochs. Training ends (:class:`~._errors.TrainingFinished`)
    at the end of the first epoch at which every slot has plateaued;
    ``max_epochs`` stays the upper bound. The per-epoch held-out risks are
    recorded in the history (``heldout_risk_per_rank``).

    Parameters
    ----------
    X_valid, y_valid : torch.Tensor
        The held-out data (training units). Released when training ends: a fitted
        estimator keeps no copy of its data (nor, for a view of the caller's float32
        arrays, a reference to them).
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

    def on_train_end(self, net, **kwargs):
        self.X_valid = self.y_valid = None


def warn_if_loss_never_fell(net, what="training", slots=None):
    """A :class:`~sklearn.exceptions.ConvergenceWarning` for ranks whose loss never fell.

    Compares each rank's mean loss over the last epoch with its loss on all the
    training data before the first optimiser step (the ``initial_loss_`` of
    the net's :class:`DivergenceCheck`): a rank whose loss did not fall below
    ``(1 - LOSS_FALL_RTOL)`` times its start learned nothing (``lr`` too small
    or too large, or a saddle). The relative tolerance makes the rule
    independent of float rounding, which alone moves the two numbers by about
    ``1e-6`` of their size. Needs at least two epochs.

    Parameters
    ----------
    net : RankSweepNet
        A trained net.
    what : str
        Named in the message.
    slots : sequence of int or None, default=None
        The slots checked (the kept restart of each rank); None: every slot.

    Returns
    -------
    ranks : list of int
        The ranks warned about.
    """
    from sklearn.exceptions import ConvergenceWarning

    checks = [cb for _, cb in getattr(net, "callbacks_", []) if isinstance(cb, DivergenceCheck)]
    initial = getattr(checks[0], "initial_loss_", None) if checks else None
    if len(net.history) < 2 or initial is None:
        return []
    final = net.history[-1, "train_loss_per_rank"]
    slots = range(len(final)) if slots is None else slots
    stuck = [(net.module_.ranks[s], initial[s], final[s]) for s in slots
             if final[s] > (1.0 - LOSS_FALL_RTOL) * initial[s]]
    if stuck:
        detail = "; ".join(f"rank {r}: {a:.4g} -> {b:.4g}" for r, a, b in stuck)
        warnings.warn(
            f"the {what} loss never fell below its initial value by more than "
            f"{LOSS_FALL_RTOL:.0e} of it ({detail}) in "
            f"{len(net.history)} epochs: nothing was learned. Change lr (too small "
            "or too large), init_scale or max_epochs.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return [r for r, _, _ in stuck]
