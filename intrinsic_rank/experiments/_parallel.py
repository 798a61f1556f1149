"""Run many experiments at once through joblib: local processes, Dask or Ray.

Every task goes through ``joblib.Parallel``, so the backend is chosen by
the caller, without changes here: the default runs locally (``n_jobs`` loky
processes), and inside ``with joblib.parallel_backend("dask"):`` (after
creating a ``dask.distributed.Client``) or ``"ray"`` (after
``ray.util.joblib.register_ray()``) the same call runs on that cluster. See
``docs/scale_out.md``.

Torch threads. Each task sets ``torch.set_num_threads(k)`` when it starts and
restores the previous value when it ends, so that tasks sharing a machine do
not oversubscribe its cores. ``k`` is ``threads_per_job`` if given. Otherwise
it follows joblib's own rule for nested parallelism, evaluated on the machine
that runs the task: ``k = max(1, cpu_count // slots)``, where ``cpu_count`` is
``joblib.cpu_count()`` there (it respects cgroup and affinity limits) and
``slots`` is the number of tasks that machine runs at once -- for a Dask
worker, the threads of all Dask workers on its host; elsewhere, the effective
``n_jobs`` of the active backend. ``OMP_NUM_THREADS``, when set in the calling
process, caps ``k`` (``k = min(k, OMP_NUM_THREADS)``): the same rule the command
line follows, so that ``OMP_NUM_THREADS=1`` keeps every task on one thread. A
run of one job in the calling process (plain sequential execution) keeps the
caller's thread setting.
"""

import os
import socket
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import joblib
import numpy as np
import torch
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import Bunch

from .._validation import check_int
from ._sweep import rank_sweep

__all__ = ["fit_seeds", "run_parallel", "sweep_grid", "SWEEP_GRID_KEYS"]

#: Keyword arguments of :func:`rank_sweep` that a :func:`sweep_grid` setting may vary
#: (the seed is given separately, through ``seeds``).
SWEEP_GRID_KEYS = (
    "teacher", "r_star", "d", "seq_len", "n_samples", "noise", "ranks", "attention",
    "kernel_scale", "max_epochs",
)


# -- torch threads ----------------------------------------------------------------

# torch.set_num_threads is global to a process, and in-process workers (a
# threading backend, a Dask LocalCluster with processes=False) run several
# tasks in one process. The first task to start saves the caller's value and
# the last to finish restores it, so overlapping tasks cannot restore each
# other's setting.
_threads_lock = threading.Lock()
_threads_users = 0
_threads_saved = None


@contextmanager
def _torch_threads(n_threads):
    """Run the body with ``torch.set_num_threads(n_threads)``; ``None`` changes nothing."""
    global _threads_users, _threads_saved
    if n_threads is None:
        yield
        return
    with _threads_lock:
        if _threads_users == 0:
            _threads_saved = torch.get_num_threads()
        _threads_users += 1
        torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_saved)


@dataclass(frozen=True)
class _ThreadRule:
    """What a task needs to choose its torch thread count (built by the caller)."""

    threads_per_job: int | None
    slots: int  # effective n_jobs of the active backend
    caller_pid: int
    dask_host_slots: dict = field(default_factory=dict)  # worker address -> slots on its host
    omp_threads: int | None = None  # the caller's OMP_NUM_THREADS: a ceiling

    def threads(self):
        """Thread count for a task running here; ``None`` keeps the current one."""
        if self.threads_per_job is not None:
            return self.threads_per_job
        slots = self.dask_host_slots.get(_dask_worker_address(), self.slots)
        if slots <= 1 and os.getpid() == self.caller_pid:
            return None  # a plain sequential run: the caller's setting stands
        threads = max(1, joblib.cpu_count() // slots)
        if self.omp_threads is not None:
            threads = min(threads, self.omp_threads)
        return threads


def _omp_threads():
    """``OMP_NUM_THREADS`` of this process as an integer >= 1, or ``None`` when unset."""
    try:
        value = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return value if value >= 1 else None


def _dask_worker_address():
    """Address of the Dask worker running this task, or ``None`` outside Dask."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return get_worker().address
    except ValueError:
        return None


def _dask_host_slots():
    """Worker address -> threads of all workers on its host, for an active Dask backend."""
    backend, _ = joblib.parallel.get_active_backend()
    client = getattr(backend, "client", None)
    if client is None or "distributed" not in sys.modules:
        return {}
    try:
        workers = client.scheduler_info()["workers"]
    except Exception:  # noqa: BLE001 -- no scheduler info: fall back to n_jobs
        return {}
    per_host = Counter()
    for info in workers.values():
        per_host[info["host"]] += info["nthreads"]
    return {address: per_host[info["host"]] for address, info in workers.items()}


def _call_with_threads(function, kwargs, rule):
    """The unit of work sent to a joblib worker (module level, so it pickles)."""
    with _torch_threads(rule.threads()):
        return function(**kwargs)


# -- the generic runner -----------------------------------------------------------


def run_parallel(function, kwargs_list, n_jobs=None, threads_per_job=None, progress=False):
    """Call ``function(**kwargs)`` for every entry of ``kwargs_list`` through joblib.

    Parameters
    ----------
    function : callable
        Called once per entry. For process-based backends (loky, Dask, Ray) it
        must pickle: define it at module level.
    kwargs_list : iterable of dict
        Keyword arguments of each call.
    n_jobs : int or None, default=None
        Passed to ``joblib.Parallel``: ``None`` means the active backend's
        default (1 outside a ``joblib.parallel_backend`` context, every worker
        of a Dask or Ray cluster inside one), ``-1`` all local cores.
    threads_per_job : int or None, default=None
        Torch threads of each call (``torch.set_num_threads``), restored when
        the call ends. ``None``: ``max(1, cpu_count // slots)`` on the machine
        running the call, ``slots`` being the calls that machine runs at once,
        and at most the caller's ``OMP_NUM_THREADS`` when that is set (see the
        module notes); a plain sequential run keeps the caller's setting.
    progress : bool, default=False
        Draw a progress bar over finished calls (when stderr is a terminal).
        With joblib's Ray backend, which cannot stream results, it fills at
        the end.

    Returns
    -------
    results : list
        ``function(**kwargs)`` of each entry, in the order of ``kwargs_list``.

    Raises
    ------
    ValueError
        If ``threads_per_job`` is not ``None`` or an integer of at least 1, or
        ``function`` is not callable.

    Examples
    --------
    >>> from joblib import parallel_backend
    >>> calls = [{"number": 2.567, "ndigits": 1}, {"number": 3.14159, "ndigits": 3}]
    >>> with parallel_backend("threading", n_jobs=2):
    ...     run_parallel(round, calls, threads_per_job=1)
    [2.6, 3.142]
    """
    if not callable(function):
        raise ValueError(f"function must be callable; got {function!r}")
    if threads_per_job is not None:
        threads_per_job = check_int(threads_per_job, "threads_per_job", minimum=1)
    kwargs_list = [dict(kwargs) for kwargs in kwargs_list]
    rule = _ThreadRule(
        threads_per_job=threads_per_job,
        slots=joblib.effective_n_jobs(n_jobs),
        caller_pid=os.getpid(),
        dask_host_slots=_dask_host_slots() if threads_per_job is None else {},
        omp_threads=_omp_threads(),
    )
    tasks = (
        joblib.delayed(_call_with_threads)(function, kwargs, rule) for kwargs in kwargs_list
    )
    if not progress:
        return joblib.Parallel(n_jobs=n_jobs)(tasks)
    from tqdm.auto import tqdm

    backend, _ = joblib.parallel.get_active_backend()
    # joblib's Ray backend cannot stream results: its bar moves once, at the end
    streams = getattr(backend, "supports_return_generator", False)
    results = joblib.Parallel(n_jobs=n_jobs, return_as="generator" if streams else "list")(tasks)
    collected = []
    # disable=None: no bar when stderr is not a terminal (CI logs, pipes)
    with tqdm(total=len(kwargs_list), desc="tasks", disable=None) as bar:
        for result in results:
            collected.append(result)
            bar.update(1)
    return collected


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


def _check_seed(seed):
    seed = check_int(seed, "every seed", minimum=None)
    if seed < 0:
        raise ValueError(f"every seed must be >= 0; got {seed}")
    return seed


def _check_seeds(seeds):
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"seeds must be a sequence of integers; got {seeds!r}")
    seeds = [_check_seed(seed) for seed in seeds]
    if not seeds:
        raise ValueError("seeds is empty: give at least one seed")
    return seeds


def _sweep_record(setting, seed, device="cpu"):
    """One :func:`rank_sweep` as a flat record (the task of :func:`sweep_grid`)."""
    start = time.perf_counter()
    result = rank_sweep(**setting, random_state=seed, device=device)
    seconds = time.perf_counter() - start
    config = result.config
    record = {key: config[key] for key in SWEEP_GRID_KEYS}
    record["ranks"] = tuple(config["ranks"])  # hashable: pandas can group on it
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
        lists: ``{"ranks": [[1, 2, 3, 4]]}``.
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
        ``noise``, ``ranks`` as a tuple, ``attention``, ``kernel_scale``,
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
    tasks = [dict(setting=setting, seed=seed, device=device)
             for setting in grid for seed in seeds]
    return run_parallel(
        _sweep_record, tasks, n_jobs=n_jobs, threads_per_job=threads_per_job,
        progress=progress,
    )


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
        If ``seeds`` is empty or holds a negative or non-integer value, or
        ``estimator`` has no ``random_state`` parameter.

    Examples
    --------
    >>> from intrinsic_rank import AttentionRankEstimator
    >>> from intrinsic_rank.datasets import make_attention_task
    >>> X, Y = make_attention_task("linear", n_samples=400, seq_len=4, d=6, rank=2,
    ...                            random_state=3)
    >>> est = AttentionRankEstimator(attention="linear", ranks=[1, 2, 3], max_epochs=60)
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
    calls = [dict(estimator=clone(estimator).set_params(random_state=seed), X=X, Y=Y)
             for seed in seeds]
    fitted = run_parallel(_fit_one, calls, n_jobs=n_jobs, threads_per_job=threads_per_job,
                          progress=progress)
    result = Bunch(seeds=seeds, estimators=fitted)
    if all(hasattr(est, "rank_") for est in fitted):
        ranks = [int(est.rank_) for est in fitted]
        rank, agreement = _majority(ranks)
        result.update(ranks=ranks, rank=rank, agreement=agreement)
    return result
