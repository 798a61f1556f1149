"""Reproduce every paper at once, with a cache and a report that judges each claim.

:func:`reproduce` runs the registered experiments (the registry's
``EXPERIMENTS``: one :class:`Experiment` per experiment, registered in the
report order that :mod:`intrinsic_rank.experiments` lists) at a quick or a full scale,
caches each finished piece under ``out/<piece>/`` and writes ``out/report.md``.
This module is the runner only: every piece's settings, run, tables, plots and
verdict function live in its own experiment module. A verdict function reads
the measured numbers and says, claim by claim, whether the measurement
``"agrees"``, ``"partly"`` agrees or ``"does not agree"``, and why. Nothing in
the report is a hard-coded verdict: change a number and the verdict follows.

The cache
---------
A piece's folder holds ``result.json`` (the measured result as plain JSON,
the key it was computed under, its verdicts, its time and the device it ran
on) and its PNG(s). The key is the piece's name, the mode (``"quick"`` or
``"full"``), ``random_state``, the exact settings passed to the experiment,
the package version, a digest of the package's files (:func:`code_digest`)
and the device when it is not ``"cpu"``; a later run reuses the folder only
when the key is equal, so switching between quick and full, changing the seed,
editing a setting or changing any code of the package recomputes instead of
reusing a stale result. Plots and verdicts are always made from the stored
JSON, whether it was just computed or read back, so a cached and a fresh piece
give the same report.

What the cache promises:

* **Atomic.** Every file is written atomically (a temporary file, then a
  rename): an interrupted or failed write leaves the old file or the new one.
  ``result.json`` is standard JSON (NaN and inf as ``null``); the places of
  the non-finite numbers are recorded in it and restored when it is read, so a
  cached piece gives the same verdicts as a fresh one.
* **Never an interrupted piece.** Each piece runs through
  :meth:`Experiment.execute`, which ends with ``KeyboardInterrupt`` when
  Ctrl-C arrived during the run, even if a library caught it and returned a
  truncated fit; nothing is written for that piece. The pieces finished before
  it stay cached, and a new run resumes at the first unfinished piece.
* **A damaged cache is recomputed.** A ``result.json`` that is unreadable, not
  an object, misses a field, holds a field of the wrong type, a result that
  its piece's verdicts, tables or plot cannot read, or a folder where the file
  should be is reported ("damaged cache") and recomputed, never a traceback
  (a folder in the way is moved aside to ``result.json.damaged``).
* **The manifest is rebuilt from the pieces.** ``manifest.json`` lists every
  piece whose own ``result.json`` is valid, read from those files, so a
  damaged or deleted manifest loses no entry. It is rewritten when a run
  starts and after each piece, and its ``last_run`` always describes the run
  that wrote it: ``"interrupted": true`` until that run has finished, so a run
  stopped in any way (Ctrl-C, SIGTERM, SIGHUP, even SIGKILL or a power cut)
  never leaves the record of an earlier run beside the pieces it cached.
* **One run per folder at a time.** A run holds ``OUT/.lock``
  (an operating-system file lock); a second run on the same folder says so on stderr and
  waits, then reuses what the first one cached.

Examples
--------
>>> EXPERIMENTS["copy"].quick["train_lengths"], EXPERIMENTS["copy"].full["train_lengths"]
([5, 20], [5, 50])
>>> list(EXPERIMENTS)[:3]
['sweep', 'ladder', 'frontier']
"""

import contextlib
import datetime
import json
import math
import numbers
import os
import platform
import time

from sklearn.utils import Bunch

from ..._version import __version__
from ..._validation import check_device, check_seed
from ._output import (
    check_output_folder,
    jsonable,
    lock_folder,
    read_json,
    write_json,
    write_text,
)
from ._stage import check_command_files
from ._tables import markdown_table, markdown_text
from ._registry import EXPERIMENTS, VERDICTS, Verdict

__all__ = ["VERDICTS", "Verdict", "code_digest", "reproduce", "write_report"]

_RESULT_FILE = "result.json"
_MANIFEST_FILE = "manifest.json"
_REPORT_FILE = "report.md"


# -- running ------------------------------------------------------------------------


def _all_pieces():
    return [name for name, piece in EXPERIMENTS.items() if piece.in_reproduce]


def _resolve_pieces(pieces):
    if isinstance(pieces, str):
        pieces = [pieces]
    try:
        names = [str(p) for p in pieces]
    except TypeError:
        raise ValueError(f"pieces must be 'all', a piece name or a list of them; "
                         f"got {pieces!r}") from None
    if not names:
        raise ValueError(f"no piece given; use 'all' or some of {list(EXPERIMENTS)}")
    by_command = {piece.command: name for name, piece in EXPERIMENTS.items()}
    # a command's name stands for its piece
    names = [n if n in EXPERIMENTS else by_command.get(n, n) for n in names]
    unknown = [n for n in names if n != "all" and n not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"unknown piece(s) {unknown}; use 'all' or some of {list(EXPERIMENTS)}")
    wanted = set(names) | (set(_all_pieces()) if "all" in names else set())
    return [n for n in EXPERIMENTS if n in wanted]  # report order, duplicates dropped


_CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The folder of the ``intrinsic_rank`` package whose files :func:`code_digest` hashes."""


def code_digest(root=None):
    """SHA-256 (16 hex digits) of every file of the package but the command line's.

    Every source file and data file (the embedded model, the corpora) under
    ``root`` enters, by its path relative to ``root`` and its bytes, in sorted
    order; ``__pycache__`` folders and ``cli/`` (it parses options into the
    settings, which are in the key themselves) are left out. A change to any
    experiment, estimator, model or verdict therefore changes the digest, and
    with it every piece's cache key.

    Parameters
    ----------
    root : str or None, default=None
        The package folder; ``None`` means the ``intrinsic_rank`` package this
        module belongs to.

    Returns
    -------
    digest : str

    Examples
    --------
    >>> len(code_digest()), code_digest() == code_digest()
    (16, True)
    """
    import hashlib

    root = _CODE_ROOT if root is None else os.fspath(root)
    digest = hashlib.sha256()
    paths = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__"
                               and os.path.relpath(os.path.join(folder, d), root) != "cli")
        paths += [os.path.join(folder, f) for f in files if not f.endswith((".pyc", ".pyo"))]
    for path in sorted(paths, key=lambda p: os.path.relpath(p, root)):
        digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()[:16]


def _cache_key(name, mode, settings, random_state, device="cpu", code=None):
    key = dict(piece=name, mode=mode, random_state=random_state, settings=settings,
               version=__version__, code=code_digest() if code is None else code)
    if device != "cpu":  # a CPU result stays valid; another device is its own result
        key["device"] = device
    return jsonable(key)


def _machine_info(device="cpu"):
    import torch

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return dict(
        platform=platform.platform(),
        processor=platform.processor() or platform.machine(),
        cpu_count=os.cpu_count(),
        python=platform.python_version(),
        torch=torch.__version__,
        torch_threads=torch.get_num_threads(),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        load_average=None if load is None else [round(v, 2) for v in load],
        device=device,
    )


def _compute_context(device):
    """Device, threads and load when a piece starts: what its seconds depend on."""
    import torch

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return dict(torch_threads=torch.get_num_threads(),
                load_average=None if load is None else round(load, 2), device=device)


def _verdict_counts(verdicts):
    return {v: sum(x.verdict == v for x in verdicts) for v in VERDICTS}


def _move_aside(path):
    """Move a file or folder that stands where ours must go to ``path.damaged[.N]``."""
    target, n = path + ".damaged", 1
    while os.path.lexists(target):
        target, n = f"{path}.damaged.{n}", n + 1
    os.replace(path, target)
    return target


def _clear_path(path, want_folder):
    """Make room for our file (``want_folder=False``) or folder at ``path``."""
    if os.path.lexists(path) and os.path.isdir(path) != want_folder:
        _move_aside(path)


def _is_number(value):
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def _cache_problem(cached, key):
    """Why ``cached`` (a result.json read back) cannot be used for ``key``; None if it can."""
    if not isinstance(cached, dict):
        return f"damaged cache (a JSON {type(cached).__name__}, not an object)"
    missing = [k for k in ("key", "result", "seconds", "finished") if k not in cached]
    if missing:
        return f"damaged cache (no {', '.join(missing)})"
    if cached["key"] != key:
        old = cached["key"] if isinstance(cached["key"], dict) else {}
        if {k: v for k, v in old.items() if k != "code"} == {
                k: v for k, v in key.items() if k != "code"}:
            return "cached by other code of the package"
        return "cached under another scale, seed or settings"
    wrong = [name for name, ok in [
        ("result", isinstance(cached["result"], dict)),
        ("seconds", _is_number(cached["seconds"]) and cached["seconds"] >= 0),
        ("finished", isinstance(cached["finished"], str)),
        ("files", isinstance(cached.get("files", []), list)
         and all(isinstance(f, str) for f in cached.get("files", []))),
        ("computed_with", isinstance(cached.get("computed_with", {}), dict)),
        ("device", isinstance(cached.get("device", "cpu"), str)),
    ] if not ok]
    if wrong:
        return f"damaged cache (wrong type of {', '.join(wrong)})"
    return None


def _judge(name, piece, result):
    """The verdicts of ``result``, checked to be verdicts; the tables are tried too."""
    verdicts = [Verdict(*v) for v in piece.verdicts(result)]
    for v in verdicts:
        if v.verdict not in VERDICTS:
            raise ValueError(f"piece {name!r} gave the verdict {v.verdict!r}; "
                             f"a verdict must be one of {VERDICTS}")
    for _caption, records, columns, *_ in piece.tables(result):
        markdown_table(records, columns)
    return verdicts


def _load_cached(name, piece, folder, cached):
    """The pieces of a valid cache, its plot redrawn if a file is gone; raises if damaged."""
    result = cached["result"]
    verdicts = _judge(name, piece, result)
    listed = cached.get("files", [])
    files = [f for f in listed if os.path.isfile(os.path.join(folder, f))]
    if len(files) != len(listed) or not files:
        files = list(piece.plot(result, folder))  # a deleted plot is redrawn, not recomputed
    return result, verdicts, files


def _run_piece(name, piece, folder, key, settings, random_state, force, progress, label,
               device):
    """Load a valid cache or compute; returns the piece's Bunch.

    Nothing is written for a piece whose run is interrupted: the
    ``KeyboardInterrupt`` of :meth:`Experiment.execute` leaves before the
    result file is written.
    """
    path = os.path.join(folder, _RESULT_FILE)
    loaded = None
    if force:
        why = "--force" if os.path.lexists(path) else "no cache"
    elif not os.path.lexists(path):
        why = "no cache"
    elif not (os.path.isdir(path) or os.path.isfile(path)):
        why = "damaged cache (result.json is not a regular file)"  # a FIFO is never opened
    else:
        cached = read_json(path, restore_nonfinite=True)
        why = ("damaged cache (unreadable or not JSON)" if cached is None
               else _cache_problem(cached, key))
        if why is None:
            try:
                loaded = _load_cached(name, piece, folder, cached)
            except (ImportError, OSError):
                raise  # matplotlib missing, a disk full: not the cache's fault
            except Exception as error:  # the result's content does not fit its piece
                why = f"damaged cache ({type(error).__name__}: {error})"
    if loaded is not None:
        result, verdicts, files = loaded
        seconds, finished = cached["seconds"], cached["finished"]
        context = cached.get("computed_with", {})
        ran_on = cached.get("device", context.get("device", "cpu"))
        is_cached = True
        if progress:
            print(f"{label} cached ({seconds:.1f} s when computed on {finished})", flush=True)
    else:
        if progress:
            print(f"{label} computing ({why}) ...", flush=True)
        context = _compute_context(device)
        ran_on = device
        tic = time.perf_counter()
        result = jsonable(piece.execute(settings, random_state=random_state,
                                        progress=progress, device=device))
        seconds = time.perf_counter() - tic
        finished = datetime.datetime.now().isoformat(timespec="seconds")
        _clear_path(folder, want_folder=True)
        os.makedirs(folder, exist_ok=True)
        files = list(piece.plot(result, folder))
        verdicts = _judge(name, piece, result)
        is_cached = False
    _clear_path(path, want_folder=False)
    write_json(path, dict(key=key, seconds=seconds, finished=finished, device=ran_on,
                          computed_with=context, files=files,
                          verdicts=[v._asdict() for v in verdicts], result=result),
               mark_nonfinite=True)
    if progress and not is_cached:
        counts = _verdict_counts(verdicts)
        print(f"{label} done in {seconds:.1f} s: " + ", ".join(
            f"{counts[v]} {v}" for v in VERDICTS), flush=True)
    return Bunch(name=name, title=piece.title, paper=piece.paper, settings=settings,
                 result=result, verdicts=verdicts, seconds=seconds, cached=is_cached,
                 finished=finished, computed_with=context, files=files, folder=folder,
                 device=ran_on)


def _manifest_entry(name, stored):
    """A manifest entry read from a piece's own ``result.json``; None if it is not valid."""
    if _cache_problem(stored, stored.get("key") if isinstance(stored, dict) else None):
        return None
    key = stored["key"]
    if not isinstance(key, dict) or key.get("piece") != name:
        return None
    verdicts = stored.get("verdicts", [])
    kinds = [v.get("verdict") for v in verdicts if isinstance(v, dict)] if isinstance(
        verdicts, list) else []
    return dict(mode=key.get("mode"), random_state=key.get("random_state"),
                settings=key.get("settings"), version=key.get("version"),
                code=key.get("code"),
                seconds=stored["seconds"], finished=stored["finished"],
                device=stored.get("device", "cpu"),
                files=[os.path.join(name, f) for f in [_RESULT_FILE, *stored.get("files", [])]],
                verdicts={v: sum(k == v for k in kinds) for v in VERDICTS})


def _manifest_pieces(out):
    """Every piece under ``out`` with a valid ``result.json``: registered ones in report
    order, then the others by name."""
    try:
        folders = [f for f in os.listdir(out) if os.path.isdir(os.path.join(out, f))]
    except OSError:
        return {}
    order = {name: i for i, name in enumerate(EXPERIMENTS)}
    entries = {}
    for name in sorted(folders, key=lambda f: (order.get(f, len(order)), f)):
        stored = read_json(os.path.join(out, name, _RESULT_FILE))
        entry = _manifest_entry(name, stored) if isinstance(stored, dict) else None
        if entry is not None:
            entries[name] = entry
    return entries


def _write_manifest(out, last_run):
    """Write ``out/manifest.json`` from the pieces' own result files and ``last_run``.

    ``last_run`` is the record of the run writing it (``"interrupted": true``
    while that run has not finished), never an earlier run's.
    """
    path = os.path.join(out, _MANIFEST_FILE)
    _clear_path(path, want_folder=False)
    write_json(path, dict(pieces=_manifest_pieces(out), last_run=last_run))
    return path


def reproduce(pieces="all", quick=True, out="runs/reproduce", force=False, random_state=0,
              progress=True, command=None, device="cpu"):
    """Run the papers' reproductions, cache them, judge every claim and write a report.

    Each requested piece of :data:`EXPERIMENTS` (the registered experiments) is
    loaded from ``out/<piece>/`` when a cached result with the same key (mode,
    ``random_state``, settings, package version, the digest of the package's
    files, and the device unless it is ``"cpu"``) is there, and computed
    otherwise; then its plot(s), its
    tables and its verdicts are made from the stored result, and
    ``out/report.md`` and ``out/manifest.json`` are written. Run it again
    after an interruption and it resumes where it stopped.

    Parameters
    ----------
    pieces : "all", str or list of str, default="all"
        Which pieces, by name (``"sweep"``, ``"ladder"``, ``"frontier"``,
        ``"min-ip"``, ``"reach"``, ``"copy"``, ``"profile"``: the keys of
        :data:`EXPERIMENTS`), or by the command that runs it alone where the
        two differ; they run in that order. ``"all"`` is every piece
        whose ``in_reproduce`` is true.
    quick : bool, default=True
        The quick settings of every piece (minutes in all on a 2-core CPU);
        ``False`` runs the full ones (the papers' sizes, tens of minutes).
    out : str or path-like, default="runs/reproduce"
        Output folder: one sub-folder per piece, the manifest and the report.
    force : bool, default=False
        Recompute the requested pieces even when a valid cache exists.
    random_state : int, default=0
        Seed given to every experiment; part of the cache key.
    progress : bool, default=True
        Print one line per piece and pass ``progress`` to the experiments.
    command : str or None, default=None
        The command line to record in the report; ``None`` records the
        equivalent Python call.
    device : str or torch.device, default="cpu"
        The torch device every piece trains on (each piece's ``run`` gets
        it). It is stored with each result and shown in the report; it is
        part of the cache key only when it is not ``"cpu"``.

    Returns
    -------
    result : Bunch
        ``pieces`` (name -> Bunch with ``result``, ``verdicts``,
        ``seconds``, ``cached``, ``computed_with``, ``files``, ``settings``,
        ``folder``),
        ``verdicts`` (name -> list of :class:`Verdict`), ``report`` (path of
        ``report.md``), ``manifest`` (path of ``manifest.json``),
        ``seconds`` (wall time of this call), ``machine``, ``command``,
        ``device`` and ``summary`` (one record per piece: ``piece``,
        ``seconds``, ``cached``, ``agrees``, ``partly``, ``does_not_agree``).

    Raises
    ------
    ValueError
        Before any work: for an unknown piece name, a ``random_state`` that is
        not an integer in ``[0, 2**32 - 1]``, a device torch does not know (or
        CUDA asked for and absent), an ``out`` that is empty, a file or not
        writable, a folder standing where a piece writes one of its files
        (``out/<piece>/<piece>.png``), or settings a piece's ``check`` refuses.
    KeyboardInterrupt
        When Ctrl-C arrives: the piece that was running is not cached, the
        pieces finished before it are, and the manifest records the
        interrupted run (as it does for any stop: its ``last_run`` says
        ``"interrupted": true`` from the start of a run until its end).

    Examples
    --------
    >>> reproduce("ladder", quick=True, out="runs/reproduce")  # doctest: +SKIP
    """
    start = time.perf_counter()
    names = _resolve_pieces(pieces)
    random_state = check_seed(random_state, "random_state")
    device = str(check_device(device))
    mode = "quick" if quick else "full"
    out = check_output_folder(out, "out")
    plan = []
    for name in names:  # every check before any work
        piece = EXPERIMENTS[name]
        settings = jsonable(piece.quick if quick else piece.full)
        piece.validate(settings)
        check_command_files(os.path.join(out, name), piece.file_stem, option="out")
        plan.append((name, piece, settings))
    if command is None:
        on = "" if device == "cpu" else f", device={device!r}"
        command = (f"intrinsic_rank.experiments.reproduce(pieces={names!r}, quick={bool(quick)}, "
                   f"out={out!r}, force={bool(force)}, random_state={random_state}{on})")
    os.makedirs(out, exist_ok=True)
    with lock_folder(out, wait_message=f"another run is using {out}; waiting for it to "
                     "finish (its finished pieces will be reused)"):
        machine = _machine_info(device)
        done = {}

        def last_run(**extra):
            return dict(command=command, mode=mode, random_state=random_state, pieces=names,
                        seconds=time.perf_counter() - start,
                        cached=[n for n in done if done[n].cached], device=device,
                        machine=machine,
                        finished=datetime.datetime.now().isoformat(timespec="seconds"),
                        **extra)

        # Until this run finishes, the manifest names it as interrupted: whatever stops
        # it (a signal that unwinds or one that kills outright), the record beside the
        # pieces it cached is its own, never the previous run's.
        _write_manifest(out, last_run(interrupted=True))
        try:
            code = code_digest()  # once per run: the code this run computes with
            for i, (name, piece, settings) in enumerate(plan, 1):
                key = _cache_key(name, mode, settings, random_state, device, code)
                done[name] = _run_piece(name, piece, os.path.join(out, name), key, settings,
                                        random_state, force, progress,
                                        f"[{i}/{len(names)}] {name} ({mode}):", device)
                if i < len(plan):
                    _write_manifest(out, last_run(interrupted=True))
        except BaseException:  # Ctrl-C, SIGTERM or SIGHUP unwinding, or a piece that failed
            with contextlib.suppress(Exception):  # the first error is the one to report
                _write_manifest(out, last_run(interrupted=True))
            raise
        seconds = time.perf_counter() - start
        machine["load_average_end"] = (
            [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None)
        manifest_path = _write_manifest(out, last_run())
        report = write_report(out, list(done.values()), command=command, seconds=seconds,
                              machine=machine, mode=mode, random_state=random_state)
    if progress:
        print(f"report: {report}", flush=True)
    summary = [dict(piece=name, seconds=piece.seconds, cached=piece.cached,
                    **{kind.replace(" ", "_"): count
                       for kind, count in _verdict_counts(piece.verdicts).items()})
               for name, piece in done.items()]
    return Bunch(pieces=done, verdicts={n: p.verdicts for n, p in done.items()},
                 report=report, manifest=manifest_path, seconds=seconds, machine=machine,
                 command=command, device=device, summary=summary)


# -- the report -----------------------------------------------------------------------

_VERDICT_MARK = {v: f"**{v}**" for v in VERDICTS}


def _settings_line(settings):
    return "; ".join(f"{k} = {json.dumps(v)}" for k, v in settings.items())


def _context_note(piece):
    context = piece.get("computed_with") or {}
    if not context:
        return ""
    device = context.get("device", "cpu")
    on = "" if device == "cpu" else f" on {device}"
    return (f"{on} with {context.get('torch_threads')} torch thread(s), load average "
            f"{context.get('load_average')} when it started")


def write_report(out, pieces, command, seconds, machine=None, mode="quick", random_state=0):
    """Write ``out/report.md``: per piece its claims and verdicts, tables and plot(s).

    Parameters
    ----------
    out : str or path-like
        The output folder of :func:`reproduce`; image links are relative to it.
    pieces : list of Bunch
        The pieces of ``reproduce(...).pieces``, in report order (each a
        registered experiment's name): each with
        ``name``, ``title``, ``paper``, ``settings``, ``result``,
        ``verdicts``, ``seconds``, ``cached``, ``finished`` and ``files``
        (and optionally ``computed_with``: the torch threads and load average
        the piece was computed under).
    command : str
        The exact command that produced the run.
    seconds : float
        Wall time of the run (cached pieces cost almost nothing).
    machine : dict or None, default=None
        Platform, CPU count, torch version and threads, and the torch device
        (``None``: measured now, on the CPU).
    mode : {"quick", "full"}, default="quick"
    random_state : int, default=0

    Returns
    -------
    path : str
        The report's path.

    Examples
    --------
    >>> import tempfile
    >>> result = {"records": [{"rung": "B0 fixed operator", "attention": "fixed",
    ...                        "rank": 8, "train_risk": 0.01, "test_risk": 0.01,
    ...                        "excess_risk": 0.0, "excess_to_floor_ratio": 0.0}],
    ...           "noise_floor": 0.01, "reach_tol": 0.02}
    >>> piece = Bunch(name="ladder", title="The ladder", paper="The Entropic Bound",
    ...               settings={}, result=result,
    ...               verdicts=EXPERIMENTS["ladder"].verdicts(result), seconds=1.0,
    ...               cached=False, finished="today", files=[])
    >>> path = write_report(tempfile.mkdtemp(), [piece], command="by hand", seconds=1.0)
    >>> "| B0 (a fixed operator A X V) reaches the noise floor |" in open(path).read()
    True
    """
    out = os.fspath(out)
    machine = _machine_info() if machine is None else machine
    computed = sum(p.seconds for p in pieces)
    lines = [
        "# Reproduction report",
        "",
        f"- **Command:** `{command}`",
        f"- **Scale:** {mode}; seed {random_state}; written "
        f"{datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- **Time:** this run {seconds:.1f} s "
        f"({sum(not p.cached for p in pieces)} piece(s) computed, "
        f"{sum(p.cached for p in pieces)} from the cache); computing every result shown "
        f"took {computed:.1f} s",
        f"- **Machine:** {machine['platform']} ({machine['processor']}), "
        f"{machine['cpu_count']} CPUs, Python {machine['python']}, torch {machine['torch']} "
        f"with {machine['torch_threads']} thread(s) (OMP_NUM_THREADS="
        f"{machine['omp_num_threads'] or 'unset'}); load average at the start "
        f"{machine.get('load_average')}, at the end {machine.get('load_average_end')}; "
        f"torch device {machine.get('device', 'cpu')}",
        "",
        "Each claim below is checked by an explicit rule on the measured numbers, written "
        "in the piece's verdict function before the run (the *why* column says which rule "
        "and where its threshold comes from); *agrees*, *partly* and *does not agree* are "
        "computed, not written by hand. *not comparable* marks a claim about another kind "
        "of thing than we measured (the paper's pretrained models against a small toy "
        "model): the numbers are shown, no grade is given.",
        "",
        "## Summary",
        "",
        "| piece | paper | seconds | cached | " + " | ".join(VERDICTS) + " |",
        "|---|---|---|---|" + "---|" * len(VERDICTS),
    ]
    for p in pieces:
        counts = _verdict_counts(p.verdicts)
        lines.append(f"| [{p.name}](#{p.name}) | {p.paper} | {p.seconds:.1f} | "
                     f"{'yes' if p.cached else 'no'} | "
                     + " | ".join(str(counts[v]) for v in VERDICTS) + " |")
    for p in pieces:
        lines += [
            "",
            f'<a id="{p.name}"></a>',
            "",
            f"## {p.name}: {markdown_text(p.title)}",
            "",
            f"From {p.paper}. Settings: {markdown_text(_settings_line(p.settings))}. "
            f"{p.seconds:.1f} s{_context_note(p)}, finished {p.finished}"
            f"{' (read from the cache)' if p.cached else ''}.",
            "",
        ]
        if p.verdicts:
            lines += ["| the paper's claim | our measurement | verdict | why |",
                      "|---|---|---|---|"]
        else:
            missing = p.result.get("missing") if isinstance(p.result, dict) else None
            lines.append("No claim is judged at these settings"
                         + (f": {markdown_text(missing)}" if missing else
                            ": they measure without a rule to grade (the table of "
                            "claims in the docs' reproduce page names the settings each "
                            "claim needs)") + ".")
        for v in p.verdicts:
            lines.append(f"| {markdown_text(v.claim)} | {markdown_text(v.measured)} | "
                         f"{_VERDICT_MARK[v.verdict]} | {markdown_text(v.explanation)} |")
        for caption, records, columns, *_ in EXPERIMENTS[p.name].tables(p.result):
            lines += ["", f"*{markdown_text(caption)}*", "", markdown_table(records, columns)]
        for f in p.files:
            lines += ["", f"![{p.name}]({p.name}/{f})"]
    path = os.path.join(out, _REPORT_FILE)
    _clear_path(path, want_folder=False)
    write_text(path, "\n".join(lines) + "\n")
    return path
