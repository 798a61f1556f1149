"""Grids of rank sweeps and one estimator's seeds, as tasks of :func:`run_parallel`.

Each task is independent and seeded, so the records do not depend on the
backend or on ``n_jobs`` (only on the torch thread count, which
``threads_per_job`` fixes). See ``docs/scale_out.md``.
"""

import numbers
import os
import socket
import time
import warnings

import numpy as np
import torch
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import Bunch

from ..._validation import check_seed
from ..runner import run_parallel
from ._sweep import rank_sweep

__all__ = ["SWEEP_GRID_KEYS", "fit_seeds", "sweep_grid"]

#: Keyword arguments of :func:`rank_sweep` that a :func:`sweep_grid` setting may vary
#: (the seed is given separately, through ``seeds``).
SWEEP_GRID_KEYS = (
    "teacher", "r_star", "d", "seq_len", "n_samples", "noise", "rank_grid", "attention",
    "kernel_scale", "max_epochs",
)

# -- a grid of rank sweeps --------------------------------------------------------


def _check_grid(settings):
    grid = list(ParameterGrid(settings))
    for setting in grid:
        unknown = sorted(set(setting) - set(SWEEP_GRID_KEYS))
        if unknown:
            hint = " (give seeds through seeds=)" if "random_state" in unknown else ""
            raise ValueError(
                f"unknown rank_sweep setting(s) {unknown}{hint}; a setting may vary "
                f"{list(SWEEP_GRID_KEYS)}"
            )
    return grid


def _check_seeds(seeds):
    """Distinct seeds in numpy's range; a repeated seed would count one fit twice."""
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"seeds must be a sequence of integers; got {seeds!r}")
    seeds = [check_seed(seed, "every seed") for seed in seeds]
    if not seeds:
        raise ValueError("seeds is empty: give at least one seed")
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise ValueError(f"seeds must be distinct; {repeated} repeated")
    return seeds


def _check_jobs(n_jobs, threads_per_job):
    """``n_jobs`` None or a non-zero integer, ``threads_per_job`` None or an integer >= 1."""
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral)
                               or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero integer (-1: every core); "
                         f"got {n_jobs!r}")
    if threads_per_job is not None and (isinstance(threads_per_job, bool) or not isinstance(
            threads_per_job, numbers.Integral) or threads_per_job < 1):
        raise ValueError(f"threads_per_job must be None or an integer >= 1; "
                         f"got {threads_per_job!r}")


def _recorded(function, **kwargs):
    """``function(**kwargs)`` and the warnings it raised, for the caller to raise again.

    A worker's warnings (another process, or a thread with its own filters)
    never reach the caller's ``warnings`` filters or ``pytest.warns``; the
    task records them and :func:`_warn_again` raises them in the caller.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = function(**kwargs)
    return value, [(w.category, str(w.message)) for w in caught]


def _warn_again(outcomes):
    """The tasks' values; their recorded warnings raised here, in the caller, in task order."""
    values = []
    for value, caught in outcomes:
        for category, message in caught:
            warnings.warn(message, category, stacklevel=3)
        values.append(value)
    return values


def _sweep_record(setting, seed, device="cpu"):
    """One :func:`rank_sweep` as a flat record (the task of :func:`sweep_grid`)."""
    start = time.perf_counter()
    result = rank_sweep(**setting, random_state=seed, device=device)
    seconds = time.perf_counter() - start
    config = result.config
    record = {key: config[key] for key in SWEEP_GRID_KEYS}
    record["rank_grid"] = tuple(config["rank_grid"])  # hashable: pandas can group on it
    record.update(
        seed=seed,
        estimated_r_star=int(result.rank_),
        correct=bool(result.rank_ == result.r_star),
        noise_floor=float(result.noise_floor),
        estimated_noise_floor=float(result.noise_floor_),
        seconds=seconds,
        threads=torch.get_num_threads(),
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )
    return record


def sweep_grid(settings, seeds=(0,), n_jobs=None, threads_per_job=None, progress=False,
               device="cpu"):
    """Run :func:`rank_sweep` on every task setting and seed, through joblib.

    Each combination of a setting and a seed is one task of
    :func:`run_parallel`: it builds its teacher task from the seed, trains the
    batched rank sweep and returns one record. Tasks are independent and
    seeded, so the records do not depend on the backend or on ``n_jobs``
    (only on the torch thread count, which ``threads_per_job`` fixes).

    Parameters
    ----------
    settings : dict or list of dict
        A parameter grid as in :class:`~sklearn.model_selection.GridSearchCV`
        (expanded by :class:`~sklearn.model_selection.ParameterGrid`): each key
        a keyword of :func:`rank_sweep` from :data:`SWEEP_GRID_KEYS`, each
        value the list of values to try; a list of such dicts is the union of
        their grids. A rank grid is one value, so it is given as a list of
        lists: ``{"rank_grid": [[1, 2, 3, 4]]}``.
    seeds : sequence of int, default=(0,)
        Seeds of each setting (the ``random_state`` of :func:`rank_sweep`).
    n_jobs : int or None, default=None
        See :func:`run_parallel`: under ``joblib.parallel_backend("dask")``
        ``None`` uses every worker of the cluster.
    threads_per_job : int or None, default=None
        Torch threads of each task; see :func:`run_parallel`.
    progress : bool, default=False
        Progress bar over finished tasks.
    device : str or torch.device, default="cpu"
        Where every task trains (passed to :func:`rank_sweep`); with several
        tasks sharing one GPU, they share its memory.

    Returns
    -------
    records : list of dict
        One per setting and seed, settings varying slowest: the resolved
        settings (``teacher``, ``r_star``, ``d``, ``seq_len``, ``n_samples``,
        ``noise``, ``rank_grid`` as a tuple, ``attention``, ``kernel_scale``,
        ``max_epochs``), ``seed``, ``estimated_r_star``, ``correct``
        (estimate equals ``r_star``), ``noise_floor`` (true) and
        ``estimated_noise_floor``, ``seconds`` (of the task), ``threads`` (torch
        threads the task ran with) and ``worker`` (``host:pid`` that ran it).
        ``pandas.DataFrame(records)`` makes a table.

    Examples
    --------
    >>> grid = {"teacher": ["linear"], "r_star": [1, 2], "d": [6], "seq_len": [4],
    ...         "n_samples": [600], "max_epochs": [60]}
    >>> records = sweep_grid(grid, seeds=[1])
    >>> [(rec["r_star"], rec["estimated_r_star"], rec["correct"]) for rec in records]
    [(1, 1, True), (2, 2, True)]
    """
    grid = _check_grid(settings)
    seeds = _check_seeds(seeds)
    _check_jobs(n_jobs, threads_per_job)
    tasks = [dict(function=_sweep_record, setting=setting, seed=seed, device=device)
             for setting in grid for seed in seeds]
    return _warn_again(run_parallel(
        _recorded, tasks, n_jobs=n_jobs, threads_per_job=threads_per_job,
        progress=progress,
    ))


# -- one estimator, many seeds ----------------------------------------------------


def _majority(ranks):
    """The value most entries hold (the smallest among ties) and its share."""
    values, counts = np.unique(ranks, return_counts=True)  # sorted: ties -> smallest
    best = int(np.argmax(counts))
    return int(values[best]), float(counts[best]) / len(ranks)


def _fit_one(estimator, X, Y):
    return estimator.fit(X) if Y is None else estimator.fit(X, Y)


def fit_seeds(estimator, X, Y=None, seeds=(0, 1, 2), n_jobs=None, threads_per_job=None,
              progress=False):
    """Fit one estimator under several seeds, each seed a task of :func:`run_parallel`.

    The scale-out of one big sweep: the same data, the same settings, one
    clone of ``estimator`` per seed (``random_state=seed``), run locally or,
    inside ``with joblib.parallel_backend("dask"):``, on a Dask cluster. Each
    fit is seeded, so the result does not depend on the backend or on
    ``n_jobs`` (only on the torch thread count, which ``threads_per_job``
    fixes).

    Parameters
    ----------
    estimator : estimator with a ``random_state`` parameter
        Cloned, never fitted itself (e.g. an
        :class:`~intrinsic_rank.AttentionRankEstimator` with its rank grid).
    X : array-like
        Passed to every ``fit``. With a process-based backend it is pickled
        to each task; for large arrays on Dask, scatter them first or load
        them inside the workers.
    Y : array-like or None, default=None
        Targets, passed to ``fit`` when given.
    seeds : sequence of int, default=(0, 1, 2)
        One fit per seed, each an integer >= 0.
    n_jobs, threads_per_job, progress
        As in :func:`run_parallel`.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``seeds``; ``estimators`` (the fitted clones, in the order of
        ``seeds``); and, when the fitted estimators have a ``rank_``:
        ``ranks`` (``rank_`` per seed), ``rank`` (the value most seeds
        gave; the smallest among ties) and ``agreement`` (the share of seeds
        that gave it).

    Raises
    ------
    ValueError
        If ``seeds`` is empty, repeats a seed or holds a negative or
        non-integer value, ``n_jobs`` is not ``None`` or a non-zero integer,
        or ``estimator`` has no ``random_state`` parameter.

    Warns
    -----
    Every warning a fit raised (``ConvergenceWarning``, ...), raised again in
    the caller's process and thread, so its filters and ``pytest.warns`` see it.

    Examples
    --------
    >>> from intrinsic_rank import AttentionRankEstimator
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y = make_attention_task("linear", n_samples=400, seq_len=4, d=6, rank=2,
    ...                            random_state=3)
    >>> est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], max_epochs=60)
    >>> result = fit_seeds(est, X, Y, seeds=[0, 1])
    >>> result.ranks, result.rank, result.agreement
    ([2, 2], 2, 1.0)
    """
    if "random_state" not in estimator.get_params(deep=False):
        raise ValueError(
            f"estimator {type(estimator).__name__} has no random_state parameter; "
            "fit_seeds varies the seed"
        )
    seeds = _check_seeds(seeds)
    _check_jobs(n_jobs, threads_per_job)
    calls = [dict(function=_fit_one, estimator=clone(estimator).set_params(random_state=seed),
                  X=X, Y=Y) for seed in seeds]
    fitted = _warn_again(run_parallel(_recorded, calls, n_jobs=n_jobs,
                                      threads_per_job=threads_per_job, progress=progress))
    result = Bunch(seeds=seeds, estimators=fitted)
    if all(hasattr(est, "rank_") for est in fitted):
        ranks = [int(est.rank_) for est in fitted]
        rank, agreement = _majority(ranks)
        result.update(ranks=ranks, rank=rank, agreement=agreement)
    return result
