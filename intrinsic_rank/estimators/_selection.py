"""Choosing the answer of a sweep: the rank, the attention class, and the evidence for both.

* **The rank** (:func:`select_rank`): the smallest rank whose held-out excess risk reaches
  the floor, and the adaptive search (``rank_grid="auto"``, :func:`adaptive_rank_search`)
  that finds it with fewer trained ranks.
* **The class** of ``attention="auto"`` (:func:`choose_attention`): full-rank students of
  each class of :data:`AUTO_ATTENTION`, compared on held-out data; ``r*_attn`` is defined
  inside one attention class, so the simplest class within the selection tolerance of the
  best is kept, and the rank is then estimated inside it (:func:`grid_in_class`).
* **The evidence** behind a sweep's ``r*`` (:func:`judge_sweep`): the selection rule
  applied, and what the data say about the answer -- no rank reached a given floor; the
  held-out risk rises with rank (a stalled slot); the selected rank is the top of a grid
  with an estimated floor (``r*`` may lie beyond); a least-squares affine map of the whole
  sequence (:func:`reference_risk`) beats the floor by more than the tolerance (the floor
  is not the floor); the selected student explains less than :data:`MIN_HELDOUT_R2` of the
  held-out variance, or an attention class does no better than that affine map (no
  evidence for ``r*``). Each check is a short function returning its warning, or None.

The user guide (``docs/attention_rank_estimator.md``, "The evidence behind an estimate")
says the same for users.
"""

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch

from .. import spectral
from ._errors import TrainingDivergedError

__all__ = ["AUTO_ATTENTION", "AUTO_REFINE_WIDTH", "MIN_HELDOUT_R2", "adaptive_rank_search",
           "choose_attention", "class_risk_text", "coarse_rank_grid", "compare_classes",
           "grid_cut_text", "grid_in_class", "judge_sweep", "reference_risk", "refinement_ranks",
           "select_rank", "sweep_records"]


def grid_cut_text(grid, kept, limit, attention):
    """What to say when a rank grid is cut to the chosen class's rank limit, or ``None``.

    With ``attention="auto"`` the limit is known only once the class is chosen
    (``L`` for ``"fixed"``, ``d`` for the others), so the ranks above it are
    left out of the sweep instead of refused; the estimator says so.

    Parameters
    ----------
    grid : sequence of int
        The ``rank_grid`` given.
    kept : sequence of int
        The ranks that are trained.
    limit : int
    attention : str
        The class chosen.

    Returns
    -------
    text : str or None
        ``None`` when nothing was cut.

    Examples
    --------
    >>> grid_cut_text([1, 2, 8], [1, 2], 4, "linear")  # doctest: +ELLIPSIS
    'rank_grid was cut to the rank limit 4 of the chosen class linear: rank 8 left out, ...'
    >>> grid_cut_text([1, 2], [1, 2], 4, "linear") is None
    True
    """
    dropped = [int(r) for r in grid if r not in kept]
    if not dropped:
        return None
    listed = (f"rank {dropped[0]}" if len(dropped) == 1 else
              f"ranks {dropped[0]}-{dropped[-1]}" if dropped == list(
                  range(dropped[0], dropped[-1] + 1)) else
              "ranks " + ", ".join(map(str, dropped)))
    return (f"rank_grid was cut to the rank limit {limit} of the chosen class {attention}: "
            f"{listed} left out, ranks {[int(r) for r in kept]} trained (no rank above the "
            "limit can be trained; r* is at most the limit)")


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

    Examples
    --------
    >>> selection = select_rank([1, 2, 4], [0.5, 0.011, 0.010], 1.0, 0.02)
    >>> selection["index"], selection["floor"]
    (1, 0.01)
    """
    risk = np.asarray(heldout_risk, dtype=float)
    floor = float(risk.min()) if noise_floor is None else float(noise_floor)
    excess = risk - floor
    threshold = float(tol) * float(heldout_variance)
    reached = excess <= threshold
    index = int(np.argmax(reached)) if reached.any() else int(np.argmin(risk))
    return dict(index=index, floor=floor, excess=excess, threshold=threshold,
                reached=reached, any_reached=bool(reached.any()))


AUTO_REFINE_WIDTH = 3
"""Ranks trained per refinement round of ``rank_grid="auto"`` (all of a smaller bracket)."""


def coarse_rank_grid(limit):
    """The coarse grid of ``rank_grid="auto"``: the powers of two below ``limit``, and ``limit``.

    Parameters
    ----------
    limit : int
        The largest rank of the student.

    Returns
    -------
    ranks : list of int

    Examples
    --------
    >>> coarse_rank_grid(64), coarse_rank_grid(12)
    ([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 12])
    """
    ranks, r = [], 1
    while r < limit:
        ranks.append(r)
        r *= 2
    return ranks + [int(limit)]


def refinement_ranks(lower, upper, width=AUTO_REFINE_WIDTH):
    """The ranks of the next refinement round inside the bracket ``(lower, upper)``.

    Every rank strictly between the two when there are at most ``width`` of
    them, else ``width`` ranks spaced evenly across the bracket (bisection with
    ``width + 1`` parts per round, all trained in one batch).

    Parameters
    ----------
    lower : int
        Largest trained rank below the selected one (0 when there is none).
    upper : int
        The selected (smallest reaching) rank.
    width : int, default=3

    Returns
    -------
    ranks : list of int
        Empty when the bracket holds no untrained rank.

    Examples
    --------
    >>> refinement_ranks(4, 8), refinement_ranks(32, 64), refinement_ranks(1, 2)
    ([5, 6, 7], [40, 48, 56], [])
    """
    inside = list(range(lower + 1, upper))
    if len(inside) <= width:
        return inside
    gap = upper - lower
    return sorted({lower + round(gap * j / (width + 1)) for j in range(1, width + 1)})


def adaptive_rank_search(coarse, evaluate, heldout_variance, tol, noise_floor=None,
                         width=AUTO_REFINE_WIDTH):
    """The search of ``rank_grid="auto"``: a coarse grid, then batched refinement of the bracket.

    ``evaluate(ranks)`` trains one batch of ranks and returns their held-out
    risks. After each round the estimator's own rule (:func:`select_rank`) is
    applied to every rank trained so far; the next round trains
    :func:`refinement_ranks` between the selected rank and the largest trained
    rank below it. The search ends when that bracket holds no untrained rank,
    or when no rank reaches the floor. It relies on the held-out excess risk
    falling with rank (a larger rank can represent every smaller one's
    solution), so that "reaches the floor" is monotone in the rank.

    Parameters
    ----------
    coarse : list of int
        The first round (``coarse_rank_grid``).
    evaluate : callable
        ``evaluate(ranks) -> held-out risks``, one per rank.
    heldout_variance, tol, noise_floor
        As :func:`select_rank`.
    width : int, default=3
        Ranks per refinement round.

    Returns
    -------
    rounds : list of list of int
        The ranks of each round, in order.

    Examples
    --------
    >>> risk = lambda ranks: [1.0 if r < 11 else 0.0 for r in ranks]  # r* = 11
    >>> adaptive_rank_search([1, 2, 4, 8, 16, 32, 64], risk, 1.0, 0.02)
    [[1, 2, 4, 8, 16, 32, 64], [10, 12, 14], [11]]
    """
    risks, rounds = {}, []
    todo = list(coarse)
    while todo:
        rounds.append(list(todo))
        risks.update(zip(todo, evaluate(todo)))
        trained = sorted(risks)
        selection = select_rank(trained, [risks[r] for r in trained], heldout_variance,
                                tol, noise_floor=noise_floor)
        if not selection["any_reached"]:
            break
        index = selection["index"]
        lower = trained[index - 1] if index > 0 else 0
        todo = refinement_ranks(lower, trained[index], width)
    return rounds


AUTO_ATTENTION = ("fixed", "linear", "softmax")
"""The classes ``attention="auto"`` compares, simplest first (the ties' order).

Rungs B0-B2 of the interpolation ladder: each is one token mixer whose rank is the
rank of one matrix (the ``L x L`` operator of ``"fixed"``, the ``d x d`` query-key
kernel of ``"linear"`` and ``"softmax"``), defined for any real ``(X, Y)``. Not
compared: ``"block"`` (its residual path and feed-forward layer explain part of ``Y``
without the attention, so a lower risk does not make its attention rank the task's,
and it trains several times slower), ``"kernel"`` (a Min-IP head whose rank is a
feature rank up to ``2^d``, made for binary tokens) and ``"dense"`` (softmax
attention at a fixed temperature: the ``"softmax"`` class with one scale fixed).
"""

def choose_attention(risks, heldout_variance, tol):
    """The simplest class whose full-rank held-out risk is within ``tol * variance`` of the best.

    The rule of :func:`~intrinsic_rank.estimators._selection.select_rank` applied to
    classes: ``r*`` is the smallest rank reaching the floor, the class the first of
    :data:`AUTO_ATTENTION` (simplest first) reaching the lowest risk of all classes.

    Parameters
    ----------
    risks : dict
        ``{class: held-out risk}`` of a full-rank student of each class; a class whose
        training diverged has ``inf``.
    heldout_variance : float
        Mean per-entry variance of the held-out targets (the scale of ``tol``).
    tol : float
        The estimator's ``tol``.

    Returns
    -------
    attention : str

    Raises
    ------
    ValueError
        When no class has a finite risk.

    Examples
    --------
    >>> choose_attention({"fixed": 0.6, "linear": 0.0025, "softmax": 0.46}, 1.0, 0.02)
    'linear'
    >>> choose_attention({"fixed": 0.5, "linear": 0.105, "softmax": 0.1}, 1.0, 0.02)
    'linear'
    """
    finite = {name: float(risk) for name, risk in risks.items() if np.isfinite(risk)}
    if not finite:
        raise ValueError(
            f"attention='auto': the full-rank students of every class {sorted(risks)} "
            "diverged; lower lr or init_scale, or give an explicit attention"
        )
    best = min(finite.values())
    threshold = best + float(tol) * float(heldout_variance)
    order = [name for name in AUTO_ATTENTION if name in finite]
    order += [name for name in finite if name not in order]
    return next(name for name in order if finite[name] <= threshold)


def class_risk_text(risks):
    """``"fixed 0.6028, linear 0.002477, softmax 0.4629"``: the classes' held-out risks.

    Parameters
    ----------
    risks : dict
        ``{class: held-out risk}``.

    Returns
    -------
    text : str

    Examples
    --------
    >>> class_risk_text({"fixed": 0.60276, "linear": 0.0024769})
    'fixed 0.6028, linear 0.002477'
    """
    return ", ".join(f"{name} {float(risk):.4g}" for name, risk in risks.items())


def compare_classes(heldout_risk_of):
    """``{class: held-out risk}`` of a full-rank student of each class of :data:`AUTO_ATTENTION`.

    Parameters
    ----------
    heldout_risk_of : callable
        ``heldout_risk_of(attention)`` trains the full-rank student of one class (with
        the sweep's seed, split, budget and stopping rule) and returns its held-out risk.
        A class whose training diverges (:class:`~._errors.TrainingDivergedError`), or
        whose risk is not finite, gets ``inf``.

    Returns
    -------
    risks : dict

    Examples
    --------
    >>> compare_classes({"fixed": 0.6, "linear": 0.01, "softmax": float("nan")}.get)
    {'fixed': 0.6, 'linear': 0.01, 'softmax': inf}
    """
    risks = {}
    for name in AUTO_ATTENTION:
        try:
            value = float(heldout_risk_of(name))
        except TrainingDivergedError:
            value = float("inf")
        risks[name] = value if np.isfinite(value) else float("inf")
    return risks


def grid_in_class(rank_grid, limit, attention):
    """The grid inside the chosen class: ``rank_grid`` without the ranks above its limit.

    Parameters
    ----------
    rank_grid : list of int
    limit : int
        The chosen class's rank limit for the data.
    attention : str
        The chosen class.

    Returns
    -------
    ranks : list of int
        The ranks kept (``[limit]`` when none is).
    cut : str or None
        What was left out (:func:`~._selection.grid_cut_text`).

    Examples
    --------
    >>> grid_in_class([1, 2, 8], 4, "linear")[0]
    [1, 2]
    """
    kept = [r for r in rank_grid if r <= limit] or [limit]
    return kept, grid_cut_text(rank_grid, kept, limit, attention)


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
