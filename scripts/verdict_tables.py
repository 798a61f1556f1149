"""Write the docs' verdict tables from a real ``reproduce`` run folder.

Reads ``OUT/manifest.json`` (the run's command, date, machine and load) and each piece's
``OUT/<piece>/result.json`` (the verdicts the run gave, by the rules of the code it ran
with), and prints Markdown: a line naming the run, the summary table (seconds and verdict
counts per piece) and one row per claim. Nothing is typed in: rerun ``reproduce`` and this
script, and the tables follow.

``--extra NAME=PATH`` adds the claims of a command's own JSON (for instance the GPU
script's ``reach`` on SmolLM2-135M-Instruct, ``reach_smollm2/reach.json``), judged by the
registered experiment ``NAME``'s verdict function, as rows of their own.

``--write FILE`` replaces the block between ``<!-- verdict-tables:start -->`` and
``<!-- verdict-tables:end -->`` in ``FILE`` instead of printing.

A run folder that is not a finished run's, or is damaged (a manifest or a result file
that is missing, truncated, of the wrong shape or with a field of the wrong type), is
refused in one line naming the file and what is wrong; so are a ``--write`` file that
cannot be read or written and an ``--extra`` file its experiment cannot judge.

Usage::

    OMP_NUM_THREADS=1 python -m intrinsic_rank.cli reproduce all --quick --out /tmp/repro
    python scripts/verdict_tables.py /tmp/repro --write docs/reproduce.md
"""

import argparse
import datetime
import json
import math
import numbers
import os
import stat
import sys
from pathlib import Path

START = "<!-- verdict-tables:start -->"
END = "<!-- verdict-tables:end -->"

KINDS = ("agrees", "partly", "does not agree", "not comparable")
"""The verdicts a claim can get, in the order of the summary table's columns."""

_FINISHED_RUN = "give the --out folder of a finished reproduce run"


def _refuse(text):
    """End the script with one line on stderr (exit status 1)."""
    raise SystemExit(f"verdict_tables: {text}")


def _read_text(path, what):
    """The text of the regular file ``path``; one line naming it and ``what`` if it cannot be."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        _refuse(f"{path} is missing; {what}")
    except OSError as error:
        _refuse(f"{path} cannot be read ({error.strerror or error}); {what}")
    if not stat.S_ISREG(mode):  # a folder, a FIFO (which would block), a device
        _refuse(f"{path} is not a regular file; {what}")
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        _refuse(f"{path} cannot be read ({getattr(error, 'strerror', None) or error}); "
                f"{what}")


def _read_object(path, what):
    """The JSON object in ``path``; one line if it is missing, not JSON or not an object."""
    text = _read_text(path, what)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        _refuse(f"{path} is not valid JSON (truncated or damaged: {error}); {what}")
    if not isinstance(value, dict):
        _refuse(f"{path} holds a JSON {type(value).__name__}, not an object; {what}")
    return value


def _is_number(value):
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_names(value):
    """A list of piece names: plain folder names, never a path out of the run folder."""
    return isinstance(value, list) and all(
        isinstance(v, str) and v and v not in (".", "..") and "/" not in v
        and os.sep not in v for v in value)


def _is_loads(value):
    return value is None or (isinstance(value, list) and all(_is_number(v) for v in value))


_LAST_RUN_FIELDS = (
    # (field, check, what it must be); the first six are required
    ("command", lambda v: isinstance(v, str), "a string"),
    ("finished", lambda v: isinstance(v, str), "a string"),
    ("mode", lambda v: isinstance(v, str), "a string"),
    ("seconds", lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    ("random_state", _is_int, "an integer"),
    ("pieces", _is_names, "a list of piece names"),
    ("cached", lambda v: v is None or _is_names(v), "a list of piece names"),
    ("machine", lambda v: v is None or isinstance(v, dict), "an object"),
)

_MACHINE_FIELDS = (
    ("load_average", _is_loads, "a list of numbers or null"),
    ("load_average_end", _is_loads, "a list of numbers or null"),
    ("cpu_count", lambda v: v is None or _is_int(v), "an integer or null"),
    ("torch", lambda v: v is None or isinstance(v, str), "a string or null"),
    ("torch_threads", lambda v: v is None or _is_int(v), "an integer or null"),
    ("omp_num_threads", lambda v: v is None or isinstance(v, str), "a string or null"),
)


def _check_last_run(path, last):
    """Refuse a ``last_run`` that is missing, interrupted or has a field of the wrong type."""
    if not isinstance(last, dict) or last.get("interrupted"):
        _refuse(f"{path.parent} holds no finished run (last_run missing or interrupted); "
                f"{_FINISHED_RUN}")
    for number, (field, check, kind) in enumerate(_LAST_RUN_FIELDS):
        if field not in last:
            if number < 6:
                _refuse(f"{path}: last_run has no {field!r}; {_FINISHED_RUN}")
            continue
        if not check(last[field]):
            _refuse(f"{path}: last_run's {field!r} must be {kind}; got "
                    f"{json.dumps(last[field])[:60]}")
    machine = last.get("machine") or {}
    for field, check, kind in _MACHINE_FIELDS:
        if field in machine and not check(machine[field]):
            _refuse(f"{path}: last_run's machine {field!r} must be {kind}; got "
                    f"{json.dumps(machine[field])[:60]}")


def _check_verdicts(path, verdicts):
    """Refuse verdicts that are not a list of {claim, measured, verdict} strings."""
    if not isinstance(verdicts, list):
        _refuse(f"{path}: 'verdicts' must be a list; got a JSON {type(verdicts).__name__}")
    for i, v in enumerate(verdicts):
        if not (isinstance(v, dict) and all(isinstance(v.get(k), str)
                                            for k in ("claim", "measured", "verdict"))):
            _refuse(f"{path}: verdict {i} must be an object with the strings claim, "
                    "measured and verdict")
        if v["verdict"] not in KINDS:
            _refuse(f"{path}: verdict {i} is {v['verdict']!r}, not one of {', '.join(KINDS)}")


def _cell(text):
    """Text for a Markdown table cell: pipes escaped, one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def read_run(out):
    """The run's ``last_run`` record and, per piece in report order, its stored result file.

    Raises
    ------
    SystemExit
        One line naming the file and what is wrong, for a folder that holds no finished
        run or a damaged one.
    """
    out = Path(out)
    path = out / "manifest.json"
    manifest = _read_object(path, _FINISHED_RUN)
    last = manifest.get("last_run")
    _check_last_run(path, last)
    pieces = {}
    for name in last["pieces"]:
        result = out / name / "result.json"
        stored = _read_object(result, f"piece {name!r} of the run is damaged or was deleted; "
                                      "rerun reproduce on this folder")
        if not (_is_number(stored.get("seconds")) and stored["seconds"] >= 0):
            _refuse(f"{result}: 'seconds' must be a number >= 0")
        if "verdicts" not in stored:
            _refuse(f"{result} has no 'verdicts'; rerun reproduce on this folder")
        _check_verdicts(result, stored["verdicts"])
        pieces[name] = stored
    return last, pieces


def _load_line(machine):
    from intrinsic_rank.experiments.runner import number_text

    def load(values):
        return number_text(values[0] if values else None, "{:g}")

    return (f"load average (1 min) {load(machine.get('load_average'))} at the start and "
            f"{load(machine.get('load_average_end'))} at the end on {machine.get('cpu_count')} "
            f"CPUs")


def _extra_rows(extras):
    """``(label, verdicts)`` for each ``NAME=PATH`` of ``--extra``, judged now."""
    from intrinsic_rank.experiments import EXPERIMENTS, Verdict

    rows = []
    for item in extras:
        name, _, path = item.partition("=")
        if name not in EXPERIMENTS or not path:
            _refuse(f"--extra takes NAME=PATH with NAME one of {', '.join(EXPERIMENTS)}; "
                    f"got {item!r}")
        result = _read_object(path, f"--extra {name}=PATH takes the JSON a '{name}' run wrote")
        config = result.get("config")
        model = config.get("model", "?") if isinstance(config, dict) else "?"
        written = datetime.datetime.fromtimestamp(os.path.getmtime(path)).isoformat(
            timespec="seconds")
        try:
            verdicts = [Verdict(*v)._asdict() for v in EXPERIMENTS[name].verdicts(result)]
        except Exception as error:  # noqa: BLE001 - any content the verdicts cannot read
            _refuse(f"--extra {item}: {name}'s verdicts cannot read this file "
                    f"({type(error).__name__}: {error}); give the JSON a '{name}' run wrote")
        rows.append((f"{name} ({model}; {os.path.basename(path)})", verdicts,
                     f"`{path}` (written {written}), judged by `{name}`'s verdict function"))
    return rows


def verdict_tables(out, extras=()):
    """The Markdown block for the run in ``out`` (a ``reproduce`` output folder).

    Parameters
    ----------
    out : str or path
    extras : sequence of str
        ``NAME=PATH`` items (see the module docstring).

    Returns
    -------
    text : str
    """
    last, pieces = read_run(out)
    machine = last.get("machine") or {}
    kinds = list(KINDS)
    cached = set(last.get("cached") or [])
    lines = [
        f"Generated by `scripts/verdict_tables.py` from the run folder of `{last['command']}` "
        f"(finished {last['finished']}, {last['seconds']:.0f} s wall; {last['mode']} scale, "
        f"seed {last['random_state']}; "
        f"{len(pieces) - len(cached)} piece(s) computed in that run, {len(cached)} read from "
        f"its cache; torch {machine.get('torch')} with {machine.get('torch_threads')} "
        f"thread(s), OMP_NUM_THREADS={machine.get('omp_num_threads') or 'unset'}; "
        f"{_load_line(machine)}). Timings under that load.",
        "",
        "| piece | seconds | " + " | ".join(kinds) + " |",
        "|---|---:|" + "---:|" * len(kinds),
    ]
    totals = dict.fromkeys(kinds, 0)
    seconds = 0.0
    for name, stored in pieces.items():
        counts = {k: sum(v["verdict"] == k for v in stored["verdicts"]) for k in kinds}
        for k in kinds:
            totals[k] += counts[k]
        seconds += stored["seconds"]
        lines.append(f"| {name} | {stored['seconds']:.1f} | "
                     + " | ".join(str(counts[k]) for k in kinds) + " |")
    lines.append(f"| **total** | **{seconds:.1f}** | "
                 + " | ".join(f"**{totals[k]}**" for k in kinds) + " |")
    lines += ["", "| piece | claim | measured | verdict |", "|---|---|---|---|"]
    rows = [(name, stored["verdicts"], None) for name, stored in pieces.items()]
    extra = _extra_rows(extras)
    for label, verdicts, _ in rows + extra:
        for v in verdicts:
            lines.append(f"| {_cell(label)} | {_cell(v['claim'])} | {_cell(v['measured'])} | "
                         f"**{v['verdict']}** |")
    if extra:
        lines += ["", "Rows not from that run: " + "; ".join(
            f"{label}: {source}" for label, _, source in extra) + "."]
    return "\n".join(lines) + "\n"


def write_between_markers(path, block):
    """Replace the text between :data:`START` and :data:`END` in ``path`` by ``block``."""
    markers = f"--write takes an existing file holding one {START} line followed by one {END} line"
    text = _read_text(path, markers)
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        _refuse(f"{path} must hold one {START} line followed by one {END} line")
    head, rest = text.split(START)
    _, tail = rest.split(END)
    try:
        Path(path).write_text(f"{head}{START}\n{block}{END}{tail}", encoding="utf-8")
    except OSError as error:
        _refuse(f"--write {path} cannot be written ({error.strerror or error})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the --out folder of a finished reproduce run")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=PATH",
                        help="a command's JSON judged by experiment NAME, as extra rows")
    parser.add_argument("--write", metavar="FILE",
                        help="replace the marked block of FILE instead of printing")
    args = parser.parse_args(argv)
    block = verdict_tables(args.out, args.extra)
    if args.write:
        write_between_markers(args.write, block)
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
