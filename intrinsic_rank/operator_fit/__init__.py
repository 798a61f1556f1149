"""Training-free estimates of a teacher's token mixer from the data alone.

The three fits share their input checks, the chunked normal equations and the
noise threshold below (``_common``); each lives in its own module (``_fixed``,
``_linear``, ``_softmax``), the predictions in ``_predict``, and users import
them together from here.

The teacher tasks (:mod:`intrinsic_rank.datasets`) are linear in the unknown
mixer once the right features are formed, so the mixer can be estimated by
ordinary least squares on the data, without training a student:

* fixed operator ``Y = A* X V* + E``: linear in ``A*`` (``V*`` known), or in
  the Kronecker product ``A* (x) V*`` (``V*`` unknown);
* linear-QK teacher ``Y = (X K* X^T / L) X V* + E``: linear in ``K*``
  (``V*`` known), or in the "lifted" tensor ``K*_ab V*_ce`` (``V*`` unknown);
* softmax teacher ``Y = softmax(X K* X^T) X V* + E``: with ``V*`` known and
  ``d_out >= L`` the realised mixers can be solved for sequence by sequence, and
  their centred logarithms are linear in ``K*``.

The singular values of the estimated matrix reveal the rank ``r*`` of the
teacher (the "predictability frontier" of the Entropic Bound paper). Each fit
returns a :class:`~sklearn.utils.Bunch` holding that matrix, its singular
values, a noise-aware singular-value threshold and the rank counted against it.

Noise threshold of the least-squares fits. The estimate is
``coef_hat = coef + G^-1 F^T E``: for Gaussian noise its error is exactly
Gaussian with covariance ``sigma^2 G^-1`` (independently for each right-hand
side sharing ``G``). ``noise_threshold`` is the largest top singular value of
``64`` noise matrices drawn from that law, with ``sigma^2`` replaced by
``residual_variance`` and a fixed seed: about the 98.5% quantile of
``||N||_2``. By Weyl's inequality the singular values of ``matrix`` beyond the
true rank are at most ``||N||_2``, so counting the singular values above the
threshold (``noise_aware_rank``) over-counts with probability about 1.5% or
less, and under-counts only when a true singular value is below about twice
the threshold. Without noise the threshold is floored at the floating-point
error of the solve, ``10 eps tr(G) tr(G^-1) s_1`` (``tr(G) tr(G^-1)`` bounds
the condition number of ``G``), so that roundoff does not count as rank.
``iid_noise_threshold`` is the closed-form approximation
``tau (sqrt(m) + sqrt(k))`` with ``tau^2 = sigma^2 mean(diag(G^-1))``, the
spectral edge of an ``m x k`` matrix of iid entries of the typical size of
one estimated entry. It is kept for reference: the estimation errors are
neither independent nor equally variable, and on the teacher tasks it sits
right at (sometimes just below) the largest noise singular value, so counting
against it over-counts ``r*`` by one in a fraction of cases (measured on
linear teachers with ``d = 16``, ``n = 4096``: ``r* = 1, 2`` gave 2, 3).

All fits accumulate the normal equations ``G = F^T F`` and ``h = F^T y`` in
float64 over chunks of sequences: the design ``F`` itself would have
``n L d_out`` rows (``n L`` rows and ``d^2 (d + 1) / 2`` columns for the
lifted system) and is never built. This package uses NumPy and SciPy only (no torch).
"""

from ._fixed import fit_fixed_operator
from ._linear import fit_linear_kernel
from ._predict import predict, predict_linear_lifted
from ._softmax import fit_softmax_kernel

__all__ = [
    "fit_fixed_operator",
    "fit_linear_kernel",
    "fit_softmax_kernel",
    "predict_linear_lifted",
    "predict",
]
