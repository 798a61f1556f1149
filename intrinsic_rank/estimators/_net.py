"""The skorch nets: one that passes a user's interrupt on, and the rank-batched one.

Rules that act during training (divergence, the plateau rule, the per-epoch
records) are skorch callbacks (:mod:`._callbacks`); the nets here hold only
what a callback cannot: the handling of an exception around the training
loop, and the rank-batched loss itself.
"""

from skorch import NeuralNet
from skorch.callbacks import EarlyStopping

from ._compute_dtype import training_autocast
from ._errors import TrainingFinished

__all__ = ["InterruptibleNet", "RankSweepNet"]


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
        (:func:`~intrinsic_rank.estimators._compute_dtype.training_autocast`); the
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

    def get_loss(self, y_pred, y_true, X=None, training=False):
        per_rank = self.criterion_(y_pred, y_true)
        if training:
            self.history.record_batch("train_loss_per_rank", per_rank.detach().cpu().tolist())
        return per_rank.sum()

