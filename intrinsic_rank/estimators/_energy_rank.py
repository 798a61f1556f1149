"""EnergyEffectiveRank: the rank a task needs, read off a spectrum."""

import math

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from .. import spectral
from ..datasets import attention_mixer
from .. import operator_fit as fits
from ._attention_rank import AttentionRankEstimator
from ._inputs import SequenceRegressorMixin, validate_sequences
from ._params import Reals, StrOptions, callbacks_rule, checked_params, fits_from_scratch
from ._scaling import MAX_UNIT_FACTOR, scale_factor

__all__ = ["EnergyEffectiveRank"]

_METHODS = ("recovery", "data")
_ATTENTIONS = ("fixed", "linear", "softmax", "block")
_DATA_ATTENTIONS = ("fixed", "linear", "softmax")
_MIXER_SAMPLE = 512


def _check_attention(estimator, value):
    allowed = _ATTENTIONS if estimator.method == "recovery" else _DATA_ATTENTIONS
    if value not in allowed:
        raise ValueError(
            f"unknown attention {value!r} for method={estimator.method!r}; "
            f"use one of {allowed}"
        )
    return value


def _check_value_map(estimator, value):
    if estimator.method == "recovery":
        raise ValueError(
            "value_map is used by method='data' only; the recovery student learns V"
        )
    return value


def _check_student(estimator, student):
    if estimator.method != "recovery":
        raise ValueError(
            "student is used by method='recovery' only; method='data' trains nothing"
        )
    if student.attention != estimator.attention:
        raise ValueError(
            f"the student's attention={student.attention!r} differs from "
            f"attention={estimator.attention!r}; give both the same operator family"
        )
    if student.rank_grid is not None:
        raise ValueError(
            "the student must train one rank (rank_grid=None), not a sweep; its "
            "spectrum is the estimate"
        )
    return student


def _check_callbacks(estimator, callbacks):
    if estimator.method != "recovery":
        raise ValueError(
            "callbacks are used by method='recovery' only; method='data' trains no net"
        )
    return callbacks_rule(estimator, callbacks)


def _mixer_sample(X):
    """At most ``_MIXER_SAMPLE`` evenly spaced sequences: an average over inputs
    needs no more, and one SVD per sequence would dominate a data-only fit."""
    step = max(1, -(-len(X) // _MIXER_SAMPLE))
    return X[::step]


class EnergyEffectiveRank(SequenceRegressorMixin, BaseEstimator):
    """Estimate ``r*`` from the spectrum of a learned or fitted token mixer.

    Two ways to get the spectrum (the Entropic Bound paper):

    * ``method="recovery"`` trains an over-parameterised student (full rank,
      small initialisation) through skorch -- the ``student``, by default an
      :class:`~intrinsic_rank.AttentionRankEstimator` with ``rank=None`` -- and
      measures the energy effective rank of the kernel (or operator) it learned.
      Gradient descent from a small initialisation concentrates the spectrum on
      ``r*`` (the recovery principle). ``predict`` uses the trained student,
      ``student_``.
    * ``method="data"`` is training-free: it fits the task's operator by (ridge)
      least squares on normal equations and reads its spectrum.

      - ``attention="fixed"``: the operator ``A`` of ``Y = A X V`` (``V``
        known: linear in ``A``; unknown: linear in the lifted ``V^T kron A``,
        rearranged into the rank-one ``vec(A) vec(V)^T`` whose top singular
        vector is ``A``).
      - ``attention="linear"``: ``V`` known -- ``Y`` is linear in ``K``; ``V``
        unknown -- ``Y`` is linear in the lifted ``K kron V``, reshaped to a
        ``d x (...)`` matrix whose rank is ``rank(K)``.
      - ``attention="softmax"``: the best partial estimate -- with ``V`` known and
        ``d_out >= L``, each sequence's realised mixer is solved from
        ``Y = M Z`` (``Z = X V``) and inverted through the log, which is linear in
        ``K``. The input-averaged energy rank of the solved mixers is reported too
        (``mixer_energy_rank_``).

      ``predict`` uses the fitted operator.

    Faults and scale: ``method="recovery"`` inherits the student's handling
    (:class:`~intrinsic_rank.AttentionRankEstimator`: data far from unit size
    trained in its own units, divergence and interrupts raised, the estimator
    left unfitted after a failed ``fit``). ``method="data"`` fits ``X`` and
    ``Y`` whose root mean square lies outside ``[1e-2, 1e2]`` after multiplying
    each by a power of two (exact) that brings it near 1 (for the softmax fit
    ``Y`` gets the factor of ``X``: ``Y = softmax(X K X^T) X V`` ties their
    units), since far from unit size the normal equations underflow or overflow.
    ``X`` or ``Y`` whose root mean square lies outside ``[2^-450, 2^450]``, and a
    fitted matrix whose factor to the data's units lies beyond ``2^±900``, are
    refused before fitting (the matrix would over- or underflow float64).
    The rank measures are scale-free; ``matrix_``, ``singular_values_``,
    ``noise_threshold_`` and ``predict`` are converted back to the units of the
    data (``fit_`` stays in the fitted units, ``x_scale_`` and ``y_scale_``
    give the factors). At unit scale nothing is rescaled. A pandas ``X`` keeps
    its feature names all the way into the student.

    Parameters
    ----------
    method : {"recovery", "data"}, default="recovery"
        Where the spectrum comes from.
    attention : {"fixed", "linear", "softmax", "block"}, default="linear"
        The operator family (``"block"`` only with ``method="recovery"``).
    value_map : array-like of shape (d, d_out) or None, default=None
        The value map ``V`` if it is known (``method="data"`` only).
    ridge : float, default=1e-8
        Relative ridge of the least-squares fits: ``ridge * trace(G) / p`` is
        added to the diagonal of the ``p x p`` normal matrix ``G``.
    student : AttentionRankEstimator or None, default=None
        The recovery student (``method="recovery"`` only), unfitted: it is
        cloned at ``fit`` and the fitted clone is ``student_``. Its
        ``attention`` must equal ``attention``, and it trains one rank
        (``rank_grid=None``; ``rank=None``, full rank, is the recovery
        principle's over-parameterised student). ``None``
        trains ``AttentionRankEstimator(attention=attention, rank=None,
        random_state=random_state)``, the student's defaults otherwise
        (``max_epochs=200``, ``lr=3e-3``, ``batch_size="auto"``,
        ``init_scale=0.1``, ``device="cpu"``, ``verbose=0``). Training settings,
        the device and progress output are the student's parameters:
        ``student=AttentionRankEstimator(attention="linear", max_epochs=50,
        device="cuda")``.
    random_state : None, int or numpy.random.RandomState, default=None
        Seeds the recovery student: it replaces the student's own
        ``random_state`` unless it is None. The data fits are deterministic.
    callbacks : list of skorch callbacks, (name, callback) pairs, or None, default=None
        Added to the recovery student's callbacks (after its own and after
        those given to ``student``), as skorch's ``callbacks`` adds to a
        net's defaults (``method="recovery"`` only: ``method="data"`` trains
        no net). A monitor of ``"valid_loss"`` (``EarlyStopping()``'s default)
        reads ``"train_loss"``, as in :class:`~intrinsic_rank.AttentionRankEstimator`.

    Attributes
    ----------
    energy_effective_rank_ : float
        Energy effective rank of the spectrum (the headline measure).
    rank_ : int
        The estimated ``r*``: ``energy_effective_rank_`` rounded to the nearest integer
        (at least 1).
    singular_values_ : ndarray
        The spectrum, descending.
    matrix_ : ndarray
        The matrix whose spectrum is read: the learned or fitted kernel ``K`` or
        operator ``A``, or for the lifted fits the reshaped ``d x (...)`` matrix.
    numerical_rank_, participation_ratio_, entropy_effective_rank_, stable_rank_,
    energy_threshold_rank_
        Every other measure of :mod:`intrinsic_rank.spectral` on the same
        spectrum. With ``method="data"`` the numerical rank counts the singular
        values above ``noise_threshold_``; with ``"recovery"`` it uses NumPy's
        ``matrix_rank`` threshold.
    noise_threshold_ : float or None
        ``method="data"``: singular-value edge of the estimation noise
        (``tau (sqrt(m) + sqrt(k))`` for an ``m x k`` matrix whose entries have
        standard error ``tau``).
    mixer_energy_rank_ : float or None
        Energy effective rank of the realised mixers, averaged over the training
        sequences (at most 512 of them, evenly spaced) (solved mixers for softmax data
        fits; the fitted or learned
        kernel's mixers otherwise; ``None`` where no kernel is identified).
    n_equations_, n_unknowns_ : int
        Size of the least-squares system (``method="data"``).
    x_scale_, y_scale_ : float
        ``method="data"``: the powers of two ``X`` and ``Y`` were multiplied by
        before the fit (``1.0`` at unit scale).
    student_ : AttentionRankEstimator
        The trained student (``method="recovery"``): the fitted clone of
        ``student``. ``matrix_`` is its selected kernel (or operator) and
        ``net_`` is its skorch net, ``student_.net_``.
    n_features_in_, seq_len_, token_dim_, d_out_, target_, x_ndim_, y_ndim_
        As for :class:`~intrinsic_rank.AttentionRankEstimator`.

    Examples
    --------
    >>> from intrinsic_rank import EnergyEffectiveRank
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y, info = make_attention_task("linear", n_samples=1000, seq_len=6, d=8,
    ...                                  rank=3, random_state=0, return_info=True)
    >>> est = EnergyEffectiveRank(method="data", value_map=info.value_map).fit(X, Y)
    >>> est.rank_, est.numerical_rank_
    (3, 3)

    The recovery student is a parameter; its training settings are its own:

    >>> from intrinsic_rank import AttentionRankEstimator
    >>> student = AttentionRankEstimator(attention="linear", max_epochs=5)
    >>> rec = EnergyEffectiveRank(student=student, random_state=0).fit(X, Y)
    >>> rec.student_.max_epochs, rec.student_.random_state, student.random_state
    (5, 0, None)
    """

    def __init__(
        self,
        *,
        method="recovery",
        attention="linear",
        value_map=None,
        ridge=1e-8,
        student=None,
        random_state=None,
        callbacks=None,
    ):
        self.method = method
        self.attention = attention
        self.value_map = value_map
        self.ridge = ridge
        self.student = student
        self.random_state = random_state
        self.callbacks = callbacks

    _parameter_constraints = {
        "method": [StrOptions(set(_METHODS))],
        "attention": [StrOptions(set(_ATTENTIONS))],
        "value_map": [None, "array-like"],
        "ridge": [Reals(0.0)],
        "student": [None, AttentionRankEstimator],
        "random_state": ["random_state"],
        "callbacks": [None, list, tuple],
    }
    """Every parameter in scikit-learn's own form, checked first in ``fit`` (and by
    scikit-learn's ``_validate_params()``)."""

    _parameter_rules = {
        "attention": _check_attention,
        "value_map": _check_value_map,
        "student": _check_student,
        "callbacks": _check_callbacks,
    }
    """The rules that depend on ``method`` and ``attention`` (:func:`~._params.checked_params`)."""

    def _make_student(self):
        """The student to train: a clone of ``student`` or the default one."""
        if self.student is None:
            student = AttentionRankEstimator(attention=self.attention, rank=None)
        else:
            student = clone(self.student)
        if self.student is None or self.random_state is not None:
            student.set_params(random_state=self.random_state)
        if self.callbacks is not None:
            student.set_params(callbacks=list(student.callbacks or []) + list(self.callbacks))
        return student

    def _checked_value_map(self):
        if self.value_map is None:
            return None
        value = np.asarray(self.value_map, dtype=np.float64)
        expected = (self.token_dim_, self.d_out_)
        if value.shape != expected:
            raise ValueError(
                f"value_map must have shape (d, d_out) = {expected}; got {value.shape}"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError("value_map contains NaN or infinity")
        return value

    @fits_from_scratch
    def fit(self, X, Y):
        """Estimate the spectrum and ``r*``.

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)
        Y : array-like of shape (n, L, d_out), (n, k) or (n,)
            ``method="data"`` needs per-token targets (3-D ``Y``).

        Returns
        -------
        self : EnergyEffectiveRank
        """
        checked_params(self)
        if self.method == "recovery":
            student = self._make_student()
            # the shapes seen in fit are this estimator's own (the student checks
            # the same data again, the same way)
            validate_sequences(self, X, Y, reset=True)
            self.student_ = student.fit(X, Y)
            return self._fit_recovery(X)
        X, Y = validate_sequences(self, X, Y, reset=True)
        if self.target_ != "sequence":
            raise ValueError(
                "method='data' fits the token mixer from per-token targets: Y must be "
                "3-D (n, L, d_out); got a target of the final position only "
                "(use method='recovery' for such targets)"
            )
        return self._fit_data(X, Y)

    # -- recovery -----------------------------------------------------------------
    def _fit_recovery(self, X):
        student = self.student_
        self.net_ = student.net_
        # the kernel (operator for "fixed") of the trained rank
        self.matrix_ = student.kernels_[student.rank_index_]
        self.noise_threshold_ = None
        self.n_equations_ = self.n_unknowns_ = None
        self._store_spectrum(numerical_rank=int(spectral.numerical_rank(self.matrix_)))
        if self.attention == "fixed":
            self.mixer_energy_rank_ = self.energy_effective_rank_
        else:
            # a DataFrame stays one (feature names and all, so the student sees
            # what it was fitted on); anything else becomes an array, as before
            sample = X.iloc[::max(1, -(-len(X) // _MIXER_SAMPLE))] if hasattr(X, "iloc") \
                else _mixer_sample(np.asarray(X))
            mixers = student.realized_mixer(sample)
            self.mixer_energy_rank_ = float(np.mean(spectral.energy_effective_rank(mixers)))
        return self

    # -- data ---------------------------------------------------------------------
    def _data_scales(self, X, Y):
        """Powers of two for ``X`` and ``Y`` far from unit size, and the matrix's unit.

        Returns ``(x_scale, y_scale, unit)``: ``unit`` takes the matrix fitted
        to ``(x_scale X, y_scale Y)`` back to the units of the data (1.0 when
        nothing is rescaled). The fixed operator's model is linear in ``X``
        (``unit = x_scale / y_scale``), linear attention's cubic
        (``x_scale^3 / y_scale``); the softmax model ``Y = softmax(X K X^T) X V``
        with ``V`` known ties the units of ``Y`` to those of ``X``, so ``Y``
        gets the factor of ``X`` and ``unit = x_scale^2``.
        """
        x_scale = scale_factor(X, "X")
        y_own = scale_factor(Y, "Y")  # the float64 window holds for Y in every model
        y_scale = x_scale if self.attention == "softmax" else y_own
        if x_scale == 1.0 and y_scale == 1.0:
            return 1.0, 1.0, 1.0
        kx, ky = round(math.log2(x_scale)), round(math.log2(y_scale))
        exponent = {"fixed": kx - ky, "linear": 3 * kx - ky, "softmax": 2 * kx}[self.attention]
        # both ways: an underflowed unit made matrix_ and singular_values_ all 0
        if abs(exponent) > math.log2(MAX_UNIT_FACTOR):
            raise ValueError(
                f"the fitted matrix in the units of X and Y (root mean squares about "
                f"2^{-kx} and 2^{-ky}) would be 2^{exponent} times the one fitted at "
                f"unit size, beyond 2^±{math.log2(MAX_UNIT_FACTOR):.0f} (it would "
                f"{'overflow' if exponent > 0 else 'underflow to 0'} in float64); "
                "rescale X or Y nearer to 1")
        return x_scale, y_scale, math.ldexp(1.0, exponent)

    def _fit_data(self, X, Y):
        value = self._checked_value_map()
        # far from unit size the normal equations under- or overflow (linear
        # attention's are of degree 6 in X): fit in units of the data's size
        x_scale, y_scale, unit = self._data_scales(X, Y)
        self.x_scale_, self.y_scale_ = x_scale, y_scale
        X_fit = X if x_scale == 1.0 else X * x_scale
        Y_fit = Y if y_scale == 1.0 else Y * y_scale
        X, Y = X_fit, Y_fit
        if self.attention == "fixed":
            fit = fits.fit_fixed_operator(X, Y, value_map=value, ridge=self.ridge)
        elif self.attention == "linear":
            fit = fits.fit_linear_kernel(X, Y, value_map=value, ridge=self.ridge)
        else:
            if value is None:
                raise ValueError(
                    "method='data' with attention='softmax' needs value_map: the "
                    "realised mixers are solved from Y = M(X) X V"
                )
            fit = fits.fit_softmax_kernel(X, Y, value_map=value, ridge=self.ridge)
        self.fit_ = fit
        self.matrix_ = fit.matrix
        self.noise_threshold_ = float(fit.noise_threshold)
        self.n_equations_ = int(fit.n_equations)
        self.n_unknowns_ = int(fit.n_unknowns)
        s = spectral.singular_values(self.matrix_)
        self._store_spectrum(numerical_rank=int(np.sum(s > self.noise_threshold_)))
        self.mixer_energy_rank_ = self._data_mixer_energy_rank(X, fit)
        if unit != 1.0:
            # the measures above are scale-free; the matrix and its spectrum are
            # reported in the units of the data
            self.matrix_ = self.matrix_ * unit
            self.singular_values_ = self.singular_values_ * unit
            self.noise_threshold_ = self.noise_threshold_ * unit
        return self

    def _data_mixer_energy_rank(self, X, fit):
        if self.attention == "softmax":
            return float(fit.mixer_energy_rank)
        if self.attention == "fixed":
            return self.energy_effective_rank_
        if "kernel" not in fit:  # lifted fit: K itself is not identified
            return None
        mixers = attention_mixer(_mixer_sample(X), fit.kernel, "linear")
        return float(np.mean(spectral.energy_effective_rank(mixers)))

    def _store_spectrum(self, numerical_rank):
        profile = spectral.rank_profile(self.matrix_)
        self.singular_values_ = spectral.singular_values(self.matrix_)
        self.energy_effective_rank_ = float(profile["energy_effective_rank"])
        self.rank_ = max(1, int(round(self.energy_effective_rank_)))
        self.numerical_rank_ = numerical_rank
        self.participation_ratio_ = float(profile["participation_ratio"])
        self.entropy_effective_rank_ = float(profile["entropy_effective_rank"])
        self.stable_rank_ = float(profile["stable_rank"])
        self.energy_threshold_rank_ = int(profile["energy_threshold_rank"])

    # -- prediction ---------------------------------------------------------------
    def predict(self, X):
        """Predictions of the trained student (recovery) or the fitted operator (data).

        Parameters
        ----------
        X : array-like of shape (n, L, d) or (n, L)

        Returns
        -------
        Y_pred : ndarray, shaped like the targets seen in ``fit``
        """
        check_is_fitted(self)
        if self.method == "recovery":
            return self.student_.predict(X)
        X = validate_sequences(self, X, reset=False)
        x_scale, y_scale = getattr(self, "x_scale_", 1.0), getattr(self, "y_scale_", 1.0)
        Y_pred = fits.predict(self.fit_, X if x_scale == 1.0 else X * x_scale)
        if y_scale != 1.0:
            Y_pred = Y_pred / y_scale
        if not np.all(np.isfinite(Y_pred)):
            raise ValueError(
                "the prediction overflows (not finite) for X of largest |X| = "
                f"{float(np.max(np.abs(X))):.3g}: X is far outside the scale the "
                "operator was fitted on"
            )
        return Y_pred
