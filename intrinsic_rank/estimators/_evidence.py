"""The evidence behind a sweep's ``r*``: the rank selected, and every warning about it.

After a sweep, :func:`judge_sweep` applies the selection rule
(:func:`~intrinsic_rank.estimators._selection.select_rank`) and checks what the data say
about the answer:

* no rank reached a given floor;
* the held-out risk rises with rank (a stalled slot);
* the selected rank is the top of a grid with an estimated floor (``r*`` may lie beyond);
* a least-squares affine map of the whole sequence (:func:`reference_risk`) beats the
  floor by more than the tolerance (the floor is not the floor);
* the selected student explains less than :data:`MIN_HELDOUT_R2` of the held-out variance,
  or an attention class does no better than that affine map (no evidence for ``r*``).

Each check is a short function returning its warning, or None. The user guide
(``docs/attention_rank_estimator.md``, "The evidence behind an estimate") says the same
for users.
"""

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch

from .. import spectral
from ._attention_class import class_risk_text
from ._selection import select_rank

__all__ = ["MIN_HELDOUT_R2", "judge_sweep", "reference_risk", "sweep_records"]

MIN_HELDOUT_R2 = 0.1
"""Below this held-out R² of the selected student, the estimate carries a warning."""

REFERENCE_MAX_FEATURES = 1024
"""Beyond this many features per sequence (``L * d``) no affine reference is fitted."""


def reference_risk(X, Y, train, heldout, x_scale=1.0, y_scale=1.0):
    """Held-out risk of a cheap reference: least squares of ``Y`` on the whole sequence.

    An affine map from the flattened sequence ``X`` to the flattened target, fitted on the
    training part (float64, in training units), scored on the held-out part and returned
    in the units of ``Y``.

    Parameters
    ----------
    X, Y : ndarray
        The data as validated (``Y`` as given, ``X`` 3-D).
    train, heldout : ndarray of int
        Row indices of the two parts.
    x_scale, y_scale : float, default=1.0
        The powers of two the data are trained in units of.

    Returns
    -------
    risk : float or None
        None when there are too few training sequences (``n_train <= p + 1``) or too
        many features (``p > 1024``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.RandomState(0).randn(12, 2, 2)
    >>> risk = reference_risk(X, 2 * X[:, :, :1], np.arange(9), np.arange(9, 12))
    >>> bool(risk < 1e-20)  # Y is a linear map of X: the reference fits it exactly
    True
    """
    n = len(X)
    features = X.reshape(n, -1)
    targets = Y.reshape(n, -1)
    p = features.shape[1]
    if p > REFERENCE_MAX_FEATURES or len(train) <= p + 1:
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
    return risk if y_scale == 1.0 else risk / y_scale**2


def _floor_not_reached(ranks, selection, tol, attention):
    if selection["any_reached"]:
        return None
    return (
        f"no rank in {list(ranks)} reached the noise floor {selection['floor']:.4g} "
        f"(given as noise_floor) within tol={tol} (smallest excess risk "
        f"{selection['excess'].min():.4g}); rank_ is the rank with the lowest held-out risk. "
        f"The {attention} class may not fit these data (try attention='auto' or another "
        "class), training may be too short (max_epochs), or the data's floor lies above "
        "the one given.", ConvergenceWarning)


def _rising_risk(ranks, heldout_risk, threshold):
    # A larger rank can represent every smaller-rank solution, so its held-out risk should
    # not exceed a smaller rank's by more than the tolerance. When it does, that slot's
    # training stalled (for example a square factorisation at r = d stuck at a saddle)
    # and the floor estimate is suspect.
    best_below = np.minimum.accumulate(heldout_risk)
    stalled = [(int(r), float(risk), float(best_below[i - 1]))
               for i, (r, risk) in enumerate(zip(ranks, heldout_risk))
               if i > 0 and risk - best_below[i - 1] > threshold]
    if not stalled:
        return None
    detail = "; ".join(f"rank {r}: {risk:.4g} against {below:.4g} below it"
                       for r, risk, below in stalled)
    return (f"held-out risk rises with rank ({detail}): training of those ranks stalled, so "
            "rank_ and the estimated floor may be wrong. Train longer (max_epochs), change "
            "random_state or pass noise_floor.", ConvergenceWarning)


def _top_of_grid(rank, floor):
    # With an estimated floor the largest rank always "reaches" it: that it is the only
    # one means r* may lie beyond the grid (unless the grid already ends at the largest
    # possible rank).
    return (f"rank_ = {rank} is the largest rank of the grid; with the noise floor "
            f"estimated from the grid itself ({floor:.4g}) this only says that no smaller "
            "rank matched it, and r* may be larger. Extend rank_grid or pass noise_floor.",
            UserWarning)


def _floor_beaten(rank, floor, reference, threshold, given, extendable):
    what = "the given noise floor" if given else "the estimated noise floor"
    train = "extend rank_grid or train longer" if extendable else "train longer"
    advice = (f"Check the class (attention='auto'), {train} (max_epochs)." if given
              else ("Extend rank_grid, train longer" if extendable else "Train longer")
              + " (max_epochs) or pass noise_floor.")
    return (f"{what} {floor:.4g} is not the floor: a least-squares affine map of the whole "
            f"sequence reaches a held-out risk of {reference:.4g}, lower by more than tol * "
            f"variance = {threshold:.4g}, so the grid has not reached the floor the data "
            f"allow and rank_ = {rank} may be too small. {advice}", ConvergenceWarning)


def _no_evidence(judged, attention, class_risks, reference):
    """Whether the data support ``r*`` (held-out R², the affine reference), and the warning."""
    r2, rank = judged.heldout_r2, judged.rank
    classes = (f"no class of {list(class_risks)} does better (held-out risks of "
               f"full-rank students: {class_risk_text(class_risks)})"
               if class_risks else "try attention='auto', which compares the classes")
    little = r2 < MIN_HELDOUT_R2
    no_better = (reference is not None and attention != "fixed"
                 and judged.estimated_noise_floor >= reference - judged.excess_tol)
    if little:
        return False, (
            f"the selected {attention} student of rank {rank} explains {max(r2, 0.0):.1%} of "
            f"the held-out variance of Y (held-out R² {r2:.3g}, below {MIN_HELDOUT_R2}): Y "
            f"depends little on X through this class, or not at all, so r* = {rank} is not "
            f"supported by the data; {classes}. Check that X and Y are paired, or give more "
            "data.", UserWarning)
    if no_better:
        return False, (
            f"the {attention} students do no better than a least-squares affine map of the "
            f"whole sequence (best held-out risk {judged.estimated_noise_floor:.4g} against "
            f"{reference:.4g}, not lower by tol * variance = {judged.excess_tol:.4g}): their "
            f"attention explains nothing a linear map does not, so r* = {rank} of this "
            f"class is not supported by the data; {classes}.", UserWarning)
    return True, None


def judge_sweep(ranks, heldout_risk, variance, tol, noise_floor, *, attention, max_rank,
                reference=None, class_risks=None):
    """The selected rank of a sweep, its floor, and the warnings the evidence calls for.

    Parameters
    ----------
    ranks : sequence of int
        The trained ranks, increasing.
    heldout_risk : ndarray of shape (R,)
        Held-out risk of each rank.
    variance : float
        Mean per-entry variance of the held-out targets.
    tol : float
    noise_floor : float or None
        The floor given, or None to estimate it.
    attention : str
        The class trained.
    max_rank : int
        The class's rank limit for these data.
    reference : float or None, default=None
        :func:`reference_risk`.
    class_risks : dict or None, default=None
        ``{class: held-out risk}`` after ``attention="auto"``.

    Returns
    -------
    judged : Bunch
        ``rank_index``, ``rank``, ``noise_floor``, ``estimated_noise_floor``,
        ``excess_tol``, ``excess`` and ``reached`` (per rank), ``floor_reached``,
        ``heldout_r2``, ``estimate_supported`` and ``warnings`` (``(text, category)``
        pairs in the order they apply).
    """
    ranks = [int(r) for r in ranks]
    selection = select_rank(ranks, heldout_risk, variance, tol, noise_floor=noise_floor)
    i, floor, threshold = selection["index"], selection["floor"], selection["threshold"]
    given = noise_floor is not None
    judged = Bunch(rank_index=i, rank=ranks[i], noise_floor=floor,
                   estimated_noise_floor=float(np.min(heldout_risk)), excess_tol=threshold,
                   excess=selection["excess"], reached=selection["reached"])
    top = len(ranks) > 1 and i == len(ranks) - 1
    not_flat = top and ranks[i] < max_rank and not given and selection["any_reached"]
    beaten = reference is not None and floor > reference + threshold
    warnings = [_floor_not_reached(ranks, selection, tol, attention),
                _rising_risk(ranks, heldout_risk, threshold),
                _top_of_grid(ranks[i], floor) if not_flat else None,
                _floor_beaten(ranks[i], floor, reference, threshold, given,
                              extendable=ranks[-1] < max_rank) if beaten else None]
    if given:
        judged.floor_reached = selection["any_reached"] and not beaten
    else:
        judged.floor_reached = not (not_flat or beaten)
    risk = float(heldout_risk[i])
    judged.heldout_r2 = 1.0 - risk / variance if variance > 0 else float("nan")
    judged.estimate_supported, evidence = _no_evidence(judged, attention, class_risks,
                                                       reference)
    judged.warnings = [w for w in (*warnings, evidence) if w is not None]
    return judged


def sweep_records(ranks, train_risk, heldout_risk, excess, reached, kernels):
    """One record per rank of a sweep: its risks and the rank measures of its kernel.

    Parameters
    ----------
    ranks : sequence of int
    train_risk, heldout_risk, excess : ndarray of shape (R,)
    reached : ndarray of bool, shape (R,)
    kernels : ndarray of shape (R, m, m)

    Returns
    -------
    records : list of dict
        ``rank``, ``train_risk``, ``heldout_risk``, ``excess_risk``, ``reached`` and
        :func:`~intrinsic_rank.spectral.rank_profile` of the kernel.
    """
    records = []
    for i, r in enumerate(ranks):
        record = {"rank": int(r), "train_risk": float(train_risk[i]),
                  "heldout_risk": float(heldout_risk[i]), "excess_risk": float(excess[i]),
                  "reached": bool(reached[i])}
        record.update({k: int(v) if isinstance(v, (int, np.integer)) else float(v)
                       for k, v in spectral.rank_profile(kernels[i]).items()})
        records.append(record)
    return records
