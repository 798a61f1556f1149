"""The map's checkpoints: every finished head kept as it finishes, read back by a rerun.

A head (on one corpus, with one plant or none) is one JSON record and one ``.npz`` of
the factors of its query projections, under ``checkpoint/corpus/L{l}H{h}[.plant...]``,
with a digest of the settings that decided it: a rerun with the same settings reads it
back, other settings measure it again. Files are written through a temporary file and
one rename at once, while the map runs (not at its end, as the command's own outputs
are), so an interrupted map loses only the heads it was measuring.
"""

import hashlib
import json
import os
import tempfile

import numpy as np

__all__ = ["load_part", "part_path", "save_part", "settings_key"]

def settings_key(settings):
    """A digest of everything that decides a head's record (the checkpoints' validity)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def part_path(checkpoint, corpus, layer, head, plant):
    tag = "" if plant is None else f".plant{plant[0]}{'q' if plant[1] else ''}"
    return os.path.join(checkpoint, corpus, f"L{layer}H{head}{tag}")


def _write_atomic(path, write):
    """Write a file through a temporary file beside it and one rename (never a half file)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".part.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def save_part(base, record, projections, key):
    arrays = {f"{part}{r}": factor for r, pair in projections.items()
              for part, factor in zip("AC", pair)}
    _write_atomic(base + ".npz", lambda stream: np.savez(stream, **arrays))
    payload = json.dumps({"settings_key": key, "record": record}).encode()
    _write_atomic(base + ".json", lambda s: s.write(payload))


def load_part(base, key):
    """The record and projections saved at ``base`` for the settings ``key``, or ``None``."""
    try:
        with open(base + ".json", encoding="utf-8") as stream:
            saved = json.load(stream)
        if saved.get("settings_key") != key:
            return None
        with np.load(base + ".npz") as arrays:
            projections = {int(name[1:]): (arrays[name], arrays["C" + name[1:]])
                           for name in arrays.files if name.startswith("A")}
        return saved["record"], projections
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent or damaged: measured again
