"""The settings of a map of ``r*_attn``, validated once, where they enter.

Every rule on the settings of :func:`~intrinsic_rank.experiments.head_rank_map` and of the
command ``head-ranks`` is written here, once: :func:`head_rank_settings` checks them all
and returns one :class:`HeadRankSettings`, which the map passes down; nothing below it
(a layer's task, a head's measurement) checks them again. The map and the command's
check (the CLI's and ``reproduce``'s, before any work) call it alike. What needs the
model's shape -- heads inside the model, planted ranks below its width, the map within
this machine's memory -- is :meth:`HeadRankSettings.for_model`, called before the model
loads when its shape is known from its name (a packaged model), else once it has loaded.
:func:`measure_options` is the part one head's measurement takes
(:func:`~intrinsic_rank.experiments.measure_head` checks its own arguments with it).
"""

import numbers
from dataclasses import dataclass, field
from typing import Optional

from ..._validation import check_allocation, check_int, check_real
from . import DISTILL_MARGIN, HEAD_RANK_TRAINING, HEAD_RANK_WINDOWS, PLANT_SHARPNESS, TOLERANCES
from ._plants import check_plant_rank

__all__ = ["ACTIVATION_BATCH_BYTES", "DISTILL_MODES", "HeadRankSettings", "activation_batch",
           "check_map_memory", "check_tolerances", "checked_heads", "head_rank_settings",
           "map_memory", "measure_options"]

DISTILL_MODES = ("auto", "all", "none")
"""``"auto"``: the margin rule, at tolerances no finer than the head's precision floor;
``"all"``: every rank below the training-free answer, at every tolerance; ``"none"``: the
training-free curve alone."""

ACTIVATION_BATCH_BYTES = 1 << 30
"""The attention maps one batch of the hooked forward pass may take (they are ``L x L`` per
head): the batch shrinks for long windows."""


def check_tolerances(tolerances):
    """Tolerances as a sorted list of distinct floats in ``(0, 1)``, or one line naming the bound.

    Examples
    --------
    >>> check_tolerances([0.05, 0.01])
    [0.01, 0.05]
    """
    if isinstance(tolerances, (str, bytes)) or not hasattr(tolerances, "__iter__"):
        raise ValueError(f"tolerances must be a sequence of numbers in (0, 1); got "
                         f"{tolerances!r}")
    values = []
    for tol in tolerances:
        tol = check_real(tol, "tolerance", 0.0, 1.0, low_open=True, high_open=True)
        values.append(float(tol))
    if not values or len(set(values)) != len(values):
        raise ValueError(f"tolerances must be distinct numbers in (0, 1), at least one; got "
                         f"{list(tolerances)!r}")
    return sorted(values)


def _checked_training(training):
    """The distillation's settings: ``HEAD_RANK_TRAINING`` with ``training``'s overrides."""
    if training is not None and not isinstance(training, dict):
        raise ValueError(f"training must be a dict of overrides of "
                         f"{sorted(HEAD_RANK_TRAINING)}; got {training!r}")
    merged = {**HEAD_RANK_TRAINING, **(training or {})}
    unknown = sorted(set(merged) - set(HEAD_RANK_TRAINING))
    if unknown:
        raise ValueError(f"training: unknown option(s) {unknown}; use "
                         f"{sorted(HEAD_RANK_TRAINING)}")
    return dict(lr=check_real(merged["lr"], "lr", 0.0, 1000.0, low_open=True),
                batch_size=check_int(merged["batch_size"], "batch_size", minimum=1),
                max_epochs=check_int(merged["max_epochs"], "max_epochs", minimum=1),
                patience=check_int(merged["patience"], "patience", minimum=1),
                min_fall=check_real(merged["min_fall"], "min_fall", 0.0))


def measure_options(tolerances=TOLERANCES, distill="auto", margin=DISTILL_MARGIN, restarts=0,
                    training=None, precision_draws=3):
    """The options of one head's measurement, checked: what ``measure_head`` runs with.

    Parameters
    ----------
    tolerances, distill, margin, restarts, training, precision_draws
        As :func:`~intrinsic_rank.experiments.measure_head`'s.

    Returns
    -------
    options : dict
        ``tolerances`` (a sorted list), ``distill``, ``margin``, ``restarts``,
        ``training`` (every key of ``HEAD_RANK_TRAINING``) and ``precision_draws``.

    Raises
    ------
    ValueError
        One line naming the first bad argument.

    Examples
    --------
    >>> measure_options(tolerances=(0.1, 0.05))["tolerances"]
    [0.05, 0.1]
    >>> measure_options(distill="some")
    Traceback (most recent call last):
    ...
    ValueError: distill must be one of auto, all, none; got 'some'
    """
    if distill not in DISTILL_MODES:
        raise ValueError(f"distill must be one of {', '.join(DISTILL_MODES)}; got {distill!r}")
    return dict(tolerances=check_tolerances(tolerances), distill=distill,
                margin=check_real(margin, "margin", 1.0),
                restarts=check_int(restarts, "restarts", minimum=0),
                training=_checked_training(training),
                precision_draws=check_int(precision_draws, "precision_draws", minimum=0))


def checked_heads(heads, n_layers, n_heads):
    """The (layer, head) pairs asked for, checked against the model's shape.

    Parameters
    ----------
    heads : "all", str or sequence of str or (layer, head)
        ``"all"``, names such as ``"L18H6"`` (a comma-separated string or a
        list), or pairs.
    n_layers, n_heads : int

    Returns
    -------
    pairs : list of (int, int)

    Examples
    --------
    >>> checked_heads("L1H2,L0H0", 2, 4)
    [(1, 2), (0, 0)]
    """
    pairs = _head_pairs(heads)
    if pairs == "all":
        return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    for layer, head in pairs:
        if layer >= n_layers or head >= n_heads:
            raise ValueError(f"head L{layer}H{head} is not in the model: it has "
                             f"layers 0..{n_layers - 1} and heads 0..{n_heads - 1}")
    return list(pairs)


def _head_pairs(heads):
    """``"all"``, or the distinct (layer, head) pairs ``heads`` names (not yet the model's)."""
    from ...inspection import parse_head

    if isinstance(heads, str) and heads.strip() == "all":
        return "all"
    if isinstance(heads, str):
        heads = [part for part in heads.split(",") if part.strip()]
    try:
        pairs = tuple(parse_head(item) for item in heads)
    except TypeError:
        raise ValueError(f"heads must be 'all' or a list of heads such as 'L18H6'; got "
                         f"{heads!r}") from None
    if not pairs or len(set(pairs)) != len(pairs):
        raise ValueError(f"heads must name distinct heads, at least one; got {heads!r}")
    return pairs


def _checked_corpora(corpora):
    from ...inspection import TOKEN_CORPORA

    if isinstance(corpora, str):
        corpora = [part.strip() for part in corpora.split(",") if part.strip()]
    corpora = list(corpora)
    if not corpora or len(set(corpora)) != len(corpora):
        raise ValueError(f"corpora must name distinct corpora of {', '.join(TOKEN_CORPORA)}; "
                         f"got {corpora}")
    for corpus in corpora:
        if corpus not in TOKEN_CORPORA:
            raise ValueError(f"corpora: {corpus!r} is not one of {', '.join(TOKEN_CORPORA)}")
    return tuple(corpora)


def _checked_plant_ranks(plant_ranks):
    """Distinct ranks of at least 2 (their bound by the head width: ``for_model``)."""
    if plant_ranks is None:
        return None
    if isinstance(plant_ranks, numbers.Integral) and not isinstance(plant_ranks, bool):
        plant_ranks = [plant_ranks]  # one rank, a Python or numpy integer
    try:
        ranks = tuple(check_int(k, "plant_rank", minimum=2) for k in plant_ranks)
    except TypeError:
        raise ValueError(f"plant_ranks must be an int, a sequence of ints or None; got "
                         f"{plant_ranks!r}") from None
    if not ranks or len(set(ranks)) != len(ranks):
        raise ValueError(f"plant_ranks must be distinct ranks, at least one; got {plant_ranks}")
    return ranks


def _checked_plant_tol(plant_tol, tolerances, planting):
    tol = check_real(plant_tol, "plant_tol", 0.0, 1.0, low_open=True, high_open=True)
    if not planting:
        return tol
    if tol not in tolerances:
        raise ValueError(f"plant_tol (--plant-tol) {tol:g} must be one of the tolerances "
                         f"(--tolerances) {', '.join(f'{t:g}' for t in tolerances)}: the plants "
                         "are judged at it")
    if PLANT_SHARPNESS * tol >= 1:
        raise ValueError(
            f"plant_tol (--plant-tol) {tol:g} makes every plant impossible: a plant must be "
            f"sharp, its best rank k-1 truncation leaving at least {PLANT_SHARPNESS:g} x tol = "
            f"{PLANT_SHARPNESS * tol:g} of its output's variance, and a truncation leaves at "
            f"most all of it; give a tolerance below {1 / PLANT_SHARPNESS:g}")
    return tol


def _checked_jobs(n_jobs):
    if n_jobs is None:
        return None
    n_jobs = check_int(n_jobs, "n_jobs", minimum=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs (--jobs) must be -1 (one task per CPU), a positive integer "
                         "or None; got 0, which runs nothing")
    return n_jobs


@dataclass(frozen=True)
class HeadRankSettings:
    """The checked settings of a map of ``r*_attn`` (made by :func:`head_rank_settings`).

    Attributes
    ----------
    corpora : tuple of str
    heads : "all" or tuple of (int, int)
    n_fit, n_heldout, length : int
    measure : dict
        One head's measurement (:func:`measure_options`).
    plant_ranks : tuple of int or None
    plant_noise : bool or "both"
    plant_tol : float
    n_jobs : int or None
    checkpoint : str or None
    """

    corpora: tuple
    heads: object
    n_fit: int
    n_heldout: int
    length: int
    measure: dict = field(default_factory=dict)
    plant_ranks: Optional[tuple] = None
    plant_noise: object = False
    plant_tol: float = 0.02
    n_jobs: Optional[int] = None
    checkpoint: Optional[str] = None

    @property
    def options(self):
        """What a layer's task measures each head with: :attr:`measure` and ``plant_tol``."""
        return dict(self.measure, plant_tol=self.plant_tol)

    @property
    def plants(self):
        """``(rank, approximate)`` of every plant, or ``[None]`` for the heads as trained."""
        if self.plant_ranks is None:
            return [None]
        noises = [False, True] if self.plant_noise == "both" else [bool(self.plant_noise)]
        return [(k, noisy) for k in self.plant_ranks for noisy in noises]

    def for_model(self, shape):
        """The heads and plants on a model of this shape, and the map within memory.

        Parameters
        ----------
        shape : dict
            ``n_layers``, ``n_heads``, ``d_model``, ``head_dim`` and ``width``
            (the query rank limit) of the model.

        Returns
        -------
        pairs : list of (int, int)
        plants : list of (int, bool) or [None]

        Raises
        ------
        ValueError
            A head outside the model, a planted rank outside ``[2, width - 1]``,
            or a map larger than this machine's memory.
        """
        pairs = checked_heads(self.heads, shape["n_layers"], shape["n_heads"])
        for k in self.plant_ranks or ():
            check_plant_rank(k, shape["width"])
        check_map_memory(shape, pairs, self.n_fit, self.n_heldout, self.length,
                         len(self.measure["tolerances"]), self.measure["training"]["batch_size"])
        return pairs, self.plants


def head_rank_settings(corpora=("code",), heads="all", *, tolerances=TOLERANCES,
                       n_fit=HEAD_RANK_WINDOWS["n_fit"], n_heldout=HEAD_RANK_WINDOWS["n_heldout"],
                       length=HEAD_RANK_WINDOWS["length"], distill="auto",
                       margin=DISTILL_MARGIN, restarts=0, training=None, plant_ranks=None,
                       plant_noise=False, plant_tol=0.02, precision_draws=3, checkpoint=None,
                       n_jobs=None):
    """Every setting of a map of ``r*_attn``, checked once: one :class:`HeadRankSettings`.

    The arguments are :func:`~intrinsic_rank.experiments.head_rank_map`'s (less the
    model, the seed and the device, which their own checks take). A plant
    tolerance must be one of ``tolerances`` and below ``1 / PLANT_SHARPNESS``
    when something is planted (above it no plant can be sharp).

    Returns
    -------
    settings : HeadRankSettings

    Raises
    ------
    ValueError
        One line naming the first bad setting.

    Examples
    --------
    >>> settings = head_rank_settings(["code"], "L1H2,L0H0", plant_ranks=[4])
    >>> settings.heads, settings.plants
    (((1, 2), (0, 0)), [(4, False)])
    >>> head_rank_settings(plant_ranks=[4], plant_tol=0.05)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: plant_tol (--plant-tol) 0.05 makes every plant impossible: ...
    """
    measure = measure_options(tolerances, distill, margin, restarts, training, precision_draws)
    ranks = _checked_plant_ranks(plant_ranks)
    if plant_noise not in (False, True, "both"):
        raise ValueError(f"plant_noise must be False, True or 'both'; got {plant_noise!r}")
    return HeadRankSettings(
        corpora=_checked_corpora(corpora), heads=_head_pairs(heads),
        n_fit=check_int(n_fit, "n_fit", minimum=2),
        n_heldout=check_int(n_heldout, "n_heldout", minimum=2),
        length=check_int(length, "length", minimum=4), measure=measure, plant_ranks=ranks,
        plant_noise=plant_noise,
        plant_tol=_checked_plant_tol(plant_tol, measure["tolerances"], ranks is not None),
        n_jobs=_checked_jobs(n_jobs), checkpoint=checkpoint)


# -- memory, from the model's shape ---------------------------------------------------


def activation_batch(n_heads, length):
    """Windows per forward pass of the hooked model: at most 64, maps within 1 GiB.

    Examples
    --------
    >>> activation_batch(9, 128), activation_batch(9, 4096)
    (64, 1)
    """
    return int(max(1, min(64, ACTIVATION_BATCH_BYTES // (4 * n_heads * length ** 2))))


def map_memory(shape, pairs, n_fit, n_heldout, length, n_tolerances, batch_size):
    """Bytes a map needs at once, from the model's shape, before anything is allocated.

    The inputs of every measured layer and the outputs of every measured head for the
    training and held-out windows (float32); one batch of the hooked forward pass's
    attention maps; and one distillation step of a head: its batch's scores for as
    many slots as a search round can hold (the powers of two and three per
    tolerance), kept with their softmax and gradients (four copies).

    Parameters
    ----------
    shape : dict
        ``n_heads``, ``d_model`` and ``head_dim`` of the model.
    pairs : list of (int, int)
    n_fit, n_heldout, length, n_tolerances, batch_size : int

    Returns
    -------
    n_bytes : int

    Examples
    --------
    >>> shape = dict(n_heads=9, d_model=576, head_dim=64)
    >>> map_memory(shape, [(0, 0)], 48, 16, 128, 5, 8) < 2 ** 30
    True
    """
    windows = (n_fit + n_heldout) * length
    layers = len({layer for layer, _ in pairs})
    data = 4 * windows * (layers * shape["d_model"] + len(pairs) * shape["head_dim"])
    maps = 4 * activation_batch(shape["n_heads"], length) * shape["n_heads"] * length ** 2
    slots = 6 + 3 * n_tolerances
    step = 4 * 4 * batch_size * slots * length ** 2
    return int(data + maps + step)


def check_map_memory(shape, pairs, n_fit, n_heldout, length, n_tolerances, batch_size):
    """Refuse a map larger than this machine's memory, in one line, before any work.

    Examples
    --------
    >>> shape = dict(n_heads=9, d_model=576, head_dim=64)
    >>> check_map_memory(shape, [(0, 0)], 48, 16, 128, 5, 8) > 0
    True
    """
    return check_allocation(
        map_memory(shape, pairs, n_fit, n_heldout, length, n_tolerances, batch_size),
        "--length, --n-fit and --n-heldout",
        f"the map of {len(pairs)} heads ({n_fit} + {n_heldout} windows of {length} tokens)")
