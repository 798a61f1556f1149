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

Stop signals. Ctrl-C in a terminal reaches every process of the run. Local worker
processes (joblib's loky backend) ignore it, from their start on: the calling process
unwinds (``KeyboardInterrupt``) and joblib stops the workers, and a second Ctrl-C
during that clean-up waits for it to finish instead of cutting it short
(``_interrupts.StopGuard(then_hold=True)``). So a stopped run prints no worker's
traceback and leaves no worker, file or semaphore behind, even when the program then
leaves at once, as the command line does. For that, each call starts its own local
workers and stops them when it ends (joblib would keep them for the next call), and
arrays travel to them as memory-mapped files above 4 KB (joblib's ``max_nbytes``).
"""

import gc
import os
import signal
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import joblib
import torch

from ..._interrupts import StopGuard, Stopped
from ..._validation import check_int

__all__ = ["run_parallel"]



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
        If ``threads_per_job`` is not ``None`` or an integer of at least 1,
        ``function`` is not callable, or ``kwargs_list`` is not an iterable of
        dicts.

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
    if isinstance(kwargs_list, (str, bytes, Mapping)) or not isinstance(kwargs_list, Iterable):
        raise ValueError(f"kwargs_list must be an iterable of dicts (the keyword arguments of "
                         f"each call); got {type(kwargs_list).__name__}")
    kwargs_list = list(kwargs_list)
    for i, kwargs in enumerate(kwargs_list):
        if not isinstance(kwargs, Mapping):
            raise ValueError(f"kwargs_list[{i}] must be a dict of keyword arguments; got "
                             f"{type(kwargs).__name__}")
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
    options = _worker_options(n_jobs)
    # the first stop signal unwinds; one after it waits until joblib has stopped the workers
    with StopGuard(then_hold=True):
        try:
            return _collect(tasks, len(kwargs_list), n_jobs, progress, options)
        except (KeyboardInterrupt, Stopped) as stop:
            stopped = stop
        finally:
            if options:
                _release_local_pool()
        # joblib has stopped the workers; the frames of the stop's traceback still hold its
        # pool (queues, semaphores): let them go now, before the caller may end the process
        stopped.__traceback__ = stopped.__context__ = None
        del tasks
        gc.collect()
        raise stopped


def _release_local_pool():
    """Stop the local pool of worker processes and let its semaphores go.

    joblib keeps its pool of loky processes alive for the next call. A program
    that a stop signal ends later (the command line leaves at once, ``os._exit``,
    without Python's exit handlers) would leave that pool's semaphores registered,
    and loky's resource tracker would warn of leaks. So each call starts its own
    workers (a few seconds) and stops them when it ends.
    """
    reusable = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(reusable, "_executor", None)  # loky's pool, if one was started
    if executor is not None:  # joblib's terminate also removes its memory-mapped arrays
        stop = getattr(executor, "terminate", None)
        stop(kill_workers=True) if stop is not None else executor.shutdown(kill_workers=True)
    gc.collect()  # the pool's queues and locks, held in reference cycles


@contextmanager
def _ctrl_c_kept_from_new_workers(active):
    """Start worker processes with Ctrl-C blocked, and this process still interruptible.

    A new process inherits the signal mask of the thread that starts it, so with
    SIGINT blocked in this thread (and in the threads joblib starts from it) a worker
    cannot be interrupted while it imports what it needs, before its initializer
    ignores the signal. A thread started first, with SIGINT unblocked, receives a
    Ctrl-C in their place; Python then runs the handler in the main thread as
    always, so the caller unwinds with ``KeyboardInterrupt`` as before.
    """
    if not (active and hasattr(signal, "pthread_sigmask")
            and threading.current_thread() is threading.main_thread()):
        yield
        return
    from multiprocessing import resource_tracker
    from joblib.externals.loky.backend import resource_tracker as loky_tracker

    # the resource trackers (processes that remove what a dead pool leaves) unblock SIGINT
    # in the thread that starts them: started first. They ignore SIGINT and SIGTERM, not
    # SIGHUP: started with it blocked, a closed terminal cannot kill them midway (a new
    # tracker would then be asked to forget what it never knew, and print tracebacks)
    hangup = {signal.SIGHUP} if hasattr(signal, "SIGHUP") else set()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, hangup)
    try:
        for tracker in (resource_tracker, loky_tracker):
            tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    done = threading.Event()
    receiver = threading.Thread(target=done.wait, name="intrinsic-rank-ctrl-c", daemon=True)
    receiver.start()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        done.set()
        receiver.join()


def _worker_options(n_jobs):
    """Local worker processes never act on Ctrl-C or SIGHUP: the caller handles them and
    stops the workers.

    A terminal sends Ctrl-C (and, when it closes, SIGHUP) to every process of the
    foreground group, the workers included; a worker would print its own
    ``KeyboardInterrupt`` traceback, or die midway through reading a task. Only for
    joblib's default process backend (loky): Dask, Ray and threads are left alone.
    ``signal.pthread_sigmask`` itself is the initializer (``signal.signal`` ignoring
    Ctrl-C where there is no signal mask), so that a worker holds the signals before it
    imports anything of the task (and until then they are blocked:
    :func:`_ctrl_c_kept_from_new_workers`).
    """
    backend, _ = joblib.parallel.get_active_backend()
    if not isinstance(backend, joblib.parallel.LokyBackend) or (
            joblib.effective_n_jobs(n_jobs) == 1):
        return {}
    # max_nbytes: every array above 4 KB travels as a memory-mapped file, so that a task's
    # message stays far below a pipe's buffer (64 KB). A larger one, half written to a
    # worker that a stop then kills, blocks the queue's feeding thread for good, and
    # with it the queue's semaphores, which loky's tracker reports leaked at the exit.
    if hasattr(signal, "pthread_sigmask"):
        # Ctrl-C and a closed terminal's SIGHUP stay blocked in the worker for good: a
        # worker that SIGHUP killed midway through reading a task broke the pool's queue,
        # and the tracker reported its semaphores leaked (seen under load); the caller
        # stops its workers itself, as it does on Ctrl-C
        return dict(initializer=signal.pthread_sigmask,
                    initargs=(signal.SIG_BLOCK, _STOP_SIGNALS), max_nbytes="4K")
    return dict(initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN),
                max_nbytes="4K")


#: what a local worker never acts on, the caller stopping it instead
_STOP_SIGNALS = {signal.SIGINT} | ({signal.SIGHUP} if hasattr(signal, "SIGHUP") else set())


def _collect(tasks, n_tasks, n_jobs, progress, options):
    """The tasks' results through joblib, with a progress bar over finished tasks if asked."""
    backend, _ = joblib.parallel.get_active_backend()
    # joblib's Ray backend cannot stream results: its bar moves once, at the end
    streams = getattr(backend, "supports_return_generator", False)
    if not (progress or options) or not streams:
        results = joblib.Parallel(n_jobs=n_jobs, **options)(tasks)
        return _counted(results, n_tasks, progress)
    results = None
    try:
        # a local pool starts and takes its first tasks with the stop signals held: joblib
        # cleans up after a stop only once it is iterating (a stop before would leave the
        # pool's files and semaphores behind); a held stop acts right after
        with StopGuard(held=True), _ctrl_c_kept_from_new_workers(bool(options)):
            results = joblib.Parallel(n_jobs=n_jobs, return_as="generator", **options)(tasks)
        return _counted(results, n_tasks, progress)
    except BaseException:
        if results is not None:
            with warnings.catch_warnings():  # joblib's note on the tasks a stop cancelled
                warnings.simplefilter("ignore")
                results.close()  # joblib stops the workers
        raise


def _counted(results, n_tasks, progress):
    if not progress:
        return list(results)
    from tqdm.auto import tqdm

    collected = []
    # disable=None: no bar when stderr is not a terminal (CI logs, pipes)
    with tqdm(total=n_tasks, desc="tasks", disable=None) as bar:
        for result in results:
            collected.append(result)
            bar.update(1)
    return collected
