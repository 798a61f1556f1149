"""The map's checkpoints: every finished head kept as it finishes, read back by a rerun.

A head (on one corpus, with one plant or none) is one *part*: a JSON record and an
``.npz`` of the factors of its query projections, under
``checkpoint/corpus/L{l}H{h}[.plant...]``. Files are written through the package's
atomic writer while the map runs (not at its end, as the command's own outputs are),
so an interrupted map loses only the heads it was measuring.

**A part knows what it measured.** Its key (:func:`part_key`) holds

* the model's content digest (:func:`~intrinsic_rank.nn.model_digest`: its weights
  and configuration, never its file name or label);
* the corpus: the digest of its text (the standard library's, with the Python
  version it comes from) and of the token windows read from it;
* the settings that decide a head's record;
* the version of intrinsic-rank and of the parts' layout (:data:`PARTS_FORMAT`).

The ``.json`` and the ``.npz`` of a part carry the same key and the part's own name,
and the ``.json`` holds a digest of the ``.npz``'s arrays, so a pair that disagrees
(an ``.npz`` swapped with another head's, emptied, truncated, or left from another
run) is never used. A rerun reads a part back only when all of this holds and its
record is whole (:func:`read_part`); otherwise the head is measured again with one
warning line saying why. A folder standing where a part's file goes cannot be
replaced: :func:`check_replaceable` refuses it in one line before any measurement.
"""

import hashlib
import json
import os
import warnings
import zipfile

import numpy as np

from ..._atomic import replaced_atomically
from ..._validation import check_output_folder

__all__ = ["PARTS_FORMAT", "check_checkpoint", "check_replaceable", "corpus_digest",
           "part_key", "part_name", "part_path", "read_part", "save_part", "saved_parts"]

PARTS_FORMAT = 2
"""The layout of a part (1: keyed by the settings and the model's name only)."""


def _version():
    from ..._version import __version__

    return __version__


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def check_checkpoint(checkpoint):
    """The checkpoint folder, checked before any work: ``None``, or a writable folder path.

    Parameters
    ----------
    checkpoint : str, path-like or None

    Returns
    -------
    checkpoint : str or None

    Raises
    ------
    ValueError
        One line: an empty path (which would write into the current folder), a
        file, a folder where no file can be written.

    Examples
    --------
    >>> check_checkpoint("")
    Traceback (most recent call last):
    ...
    ValueError: checkpoint must be a folder path; got an empty string
    """
    if checkpoint is None:
        return None
    return os.fspath(check_output_folder(checkpoint, "checkpoint"))


def part_name(layer, head, plant):
    """A part's name: ``L{layer}H{head}``, then ``.plant{k}`` (``q``: approximate).

    Examples
    --------
    >>> part_name(3, 1, None), part_name(3, 1, (4, True))
    ('L3H1', 'L3H1.plant4q')
    """
    tag = "" if plant is None else f".plant{plant[0]}{'q' if plant[1] else ''}"
    return f"L{layer}H{head}{tag}"


def part_path(checkpoint, corpus, layer, head, plant):
    """Where a part's files go, without their ending (``.json``, ``.npz``)."""
    return os.path.join(checkpoint, corpus, part_name(layer, head, plant))


def corpus_digest(source, windows):
    """The digest of a corpus as a map read it: its text and the token windows taken from it.

    Parameters
    ----------
    source : dict
        :func:`~intrinsic_rank.inspection.corpus_record` of the corpus: for a text
        corpus its ``digest`` and ``python_version`` (the standard library's text
        depends on it).
    windows : sequence of array-like of int
        The token windows (training and held-out): they depend on the text, the
        tokenizer and the seed.

    Returns
    -------
    digest : str

    Examples
    --------
    >>> a = corpus_digest({"corpus": "random"}, [np.zeros((2, 4), int)])
    >>> a == corpus_digest({"corpus": "random"}, [np.ones((2, 4), int)])
    False
    """
    digest = hashlib.sha256()
    text = {k: source.get(k) for k in ("corpus", "digest", "python_version")}
    digest.update(json.dumps(text, sort_keys=True).encode())
    for ids in windows:
        ids = np.ascontiguousarray(np.asarray(ids, dtype=np.int64))
        digest.update(f"{ids.shape}".encode())
        digest.update(ids.tobytes())
    return digest.hexdigest()


def part_key(model, corpus, settings):
    """The key of every part of one corpus of a map.

    Parameters
    ----------
    model : str
        The model's content digest (:func:`~intrinsic_rank.nn.model_digest`).
    corpus : str
        :func:`corpus_digest` of the corpus.
    settings : dict
        Everything else that decides a head's record (JSON-able).

    Returns
    -------
    key : dict
        ``model``, ``corpus``, ``settings`` (a digest), ``version`` (of
        intrinsic-rank), ``format`` (:data:`PARTS_FORMAT`) and ``digest``, the
        digest of them all.

    Examples
    --------
    >>> key = part_key("m" * 64, "c" * 64, {"n_fit": 48})
    >>> key["digest"] == part_key("m" * 64, "c" * 64, {"n_fit": 48})["digest"]
    True
    >>> key["digest"] == part_key("m" * 64, "c" * 64, {"n_fit": 32})["digest"]
    False
    """
    key = dict(model=model, corpus=corpus,
               settings=_sha(json.dumps(settings, sort_keys=True, default=str)),
               version=_version(), format=PARTS_FORMAT)
    key["digest"] = _sha(json.dumps(key, sort_keys=True))
    return key


def check_replaceable(checkpoint, corpora, names):
    """Refuse, before any measurement, a checkpoint whose parts could not be written.

    A file where a corpus's folder goes, or a folder (or anything but a file)
    where a part's ``.json`` or ``.npz`` goes, would only fail when its head has
    been measured; nothing here is removed.

    Parameters
    ----------
    checkpoint : str
    corpora : sequence of str
    names : sequence of str
        The parts' names (:func:`part_name`) of every corpus.

    Raises
    ------
    ValueError
        One line naming the path.
    """
    for corpus in corpora:
        folder = os.path.join(checkpoint, corpus)
        if os.path.lexists(folder) and not os.path.isdir(folder):
            what = ("a link that leads to no folder" if os.path.islink(folder) else
                    "a file")
            raise ValueError(f"checkpoint: {folder} is {what} where the folder of the "
                             f"finished heads of {corpus!r} goes; move it, or give another "
                             "checkpoint folder")
        if not os.path.isdir(folder):
            continue
        for name in names:
            for ending in (".json", ".npz"):
                path = os.path.join(folder, name + ending)
                if os.path.lexists(path) and not os.path.isfile(path):
                    what = "a folder" if os.path.isdir(path) else "not a regular file"
                    raise ValueError(f"checkpoint: {path} is {what}, where a finished head's "
                                     "file goes; move it, or give another checkpoint folder")


def _projections_digest(projections):
    digest = hashlib.sha256()
    for rank in sorted(projections):
        for factor in projections[rank]:
            factor = np.ascontiguousarray(factor)
            digest.update(f"{rank} {factor.dtype.str} {factor.shape}".encode())
            digest.update(factor.tobytes())
    return digest.hexdigest()


def save_part(base, record, projections, key):
    """Write one part: its ``.npz`` first, then its ``.json`` (each whole or not at all).

    Parameters
    ----------
    base : str
        :func:`part_path` of the part.
    record : dict
    projections : dict of int -> (ndarray, ndarray)
        Rank -> the factors ``(A, C)`` of the query projection ``A @ C``.
    key : dict
        :func:`part_key` of its corpus.
    """
    name = os.path.basename(base)
    projections = {int(r): tuple(np.ascontiguousarray(f) for f in pair)
                   for r, pair in projections.items()}
    arrays = {f"{part}{r}": factor for r, pair in projections.items()
              for part, factor in zip("AC", pair)}
    with replaced_atomically(base + ".npz") as tmp:
        with open(tmp, "wb") as stream:
            np.savez(stream, __key__=np.array(key["digest"]), __part__=np.array(name),
                     **arrays)
    payload = dict(format=PARTS_FORMAT, part=name, key=key,
                   projections=_projections_digest(projections), record=record)
    with replaced_atomically(base + ".json") as tmp:
        with open(tmp, "w", encoding="utf-8") as stream:
            json.dump(payload, stream)


def _why_foreign(saved_key, key):
    """Why a part's key is not this run's, in words (``None``: it is)."""
    if not isinstance(saved_key, dict) or saved_key.get("format") != key["format"]:
        return "it was written by an older intrinsic-rank, whose parts did not know their model"
    if saved_key.get("digest") == key["digest"]:
        return None
    for field, why in (("model", "it was measured on another model (other weights or "
                                 "configuration)"),
                       ("corpus", "it was measured on other text or token windows of the "
                                  "corpus (another Python's standard library, tokenizer or "
                                  "seed)"),
                       ("settings", "it was measured with other settings"),
                       ("version", f"it was measured by intrinsic-rank "
                                   f"{saved_key.get('version')} (this is {key['version']})")):
        if saved_key.get(field) != key[field]:
            return why
    return "its key does not match this run's"


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream), None
    except UnicodeDecodeError:
        return None, "its .json is not text"
    except ValueError as error:
        return None, f"its .json is damaged ({str(error).splitlines()[0]})"
    except OSError as error:
        return None, f"its .json cannot be read ({error.strerror or error})"


def _read_npz(path, name, digest):
    """The projections of a part's ``.npz``, or the reason they cannot be used."""
    try:  # the file opened here: numpy leaves it open when the zip is damaged
        with open(path, "rb") as stream, np.load(stream, allow_pickle=False) as arrays:
            files = set(arrays.files)
            if {"__key__", "__part__"} - files:
                return None, "its .npz carries no key"
            if str(arrays["__part__"]) != name:
                return None, f"its .npz is the part of {arrays['__part__']}"
            if str(arrays["__key__"]) != digest:
                return None, "its .npz and its .json come from different runs"
            ranks = sorted(int(f[1:]) for f in files if f[:1] == "A" and f[1:].isdigit())
            if any(f"C{r}" not in files for r in ranks):
                return None, "its .npz lacks a factor"
            return {r: (arrays[f"A{r}"], arrays[f"C{r}"]) for r in ranks}, None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        return None, f"its .npz is damaged ({text})"


def _record_problem(record, expected):
    """What is wrong with a saved record for the part ``expected`` describes (``None``: nothing)."""
    if not isinstance(record, dict):
        return f"its record is {type(record).__name__}, not a head's record"
    plant = expected["plant"]
    place = dict(layer=expected["layer"], head=expected["head"], corpus=expected["corpus"],
                 planted_rank=None if plant is None else plant[0],
                 plant_noise=None if plant is None else bool(plant[1]))
    for field, value in place.items():
        saved = record.get(field, "absent")
        if type(saved) is not type(value) or saved != value:  # True is not the layer 1
            return f"its record says {field} {saved!r}, not {value!r}"
    if (plant is not None and record.get("plantable") is False) or (
            record.get("constant_output") is True):
        return None  # measured, with nothing to answer: no ranks
    tolerances = expected["tolerances"]
    if record.get("tolerances") != list(tolerances):
        return "its record has other tolerances"
    width = record.get("width")
    if not isinstance(width, int) or isinstance(width, bool) or width < 2:
        return "its record has no head width"
    for field in ("r_star", "r_star_free", "r_star_text", "r_star_lower", "below_precision"):
        values = record.get(field)
        if not isinstance(values, list) or len(values) != len(tolerances):
            return f"its record has no {field} per tolerance"
    for rank in record["r_star"] + record["r_star_free"]:
        if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)
                                 or not 1 <= rank < width):
            return f"its record holds the rank {rank!r} (the head's width is {width})"
    return None


def _needed_ranks(record):
    ranks = {r for r in record.get("r_star") or () if r is not None}
    return ranks | {max(1, r // 2) for r in ranks} | ({0} if "r_star" in record else set())


def _projection_problem(projections, record):
    missing = sorted(_needed_ranks(record) - set(projections), reverse=True)
    if missing:
        return f"its .npz lacks the projections of rank {', '.join(map(str, missing))}"
    shapes = set()
    for rank, (a, c) in projections.items():
        if a.ndim != 2 or c.ndim != 2 or (rank and (a.shape[1] != rank or c.shape[0] != rank)):
            return f"its .npz holds factors of rank {rank} of the wrong shape"
        if rank:
            shapes.add((a.shape[0], c.shape[1]))
        if not (np.isfinite(a).all() and np.isfinite(c).all()):
            return f"its .npz holds factors of rank {rank} that are not finite"
    if len(shapes) > 1:
        return "its .npz holds factors of different heads' shapes"
    return None


def read_part(base, key, expected):
    """A saved part, if it is this run's and whole; else why it is measured again.

    Parameters
    ----------
    base : str
        :func:`part_path` of the part.
    key : dict
        :func:`part_key` of this run's corpus.
    expected : dict
        ``layer``, ``head``, ``corpus``, ``plant`` (``None`` or ``(k, noisy)``) and
        ``tolerances`` of the part.

    Returns
    -------
    part : (dict, dict) or None
        ``(record, projections)`` when the part can be used.
    why : str or None
        Why a part that is there cannot be used (``None`` when it can, or when
        nothing is there).
    """
    json_path, npz_path = base + ".json", base + ".npz"
    have_json, have_npz = os.path.lexists(json_path), os.path.lexists(npz_path)
    if not (have_json or have_npz):
        return None, None
    if not have_json:
        return None, "its .json is missing"
    saved, why = _read_json(json_path)
    if why is not None:
        return None, why
    if not isinstance(saved, dict):
        return None, "its .json is not a part"
    why = _why_foreign(saved.get("key"), key)
    if why is not None:
        return None, why
    name = os.path.basename(base)
    if saved.get("part") != name:
        return None, f"its .json is the part of {saved.get('part')!r}"
    if not have_npz:
        return None, "its .npz is missing"
    projections, why = _read_npz(npz_path, name, key["digest"])
    if why is not None:
        return None, why
    if _projections_digest(projections) != saved.get("projections"):
        return None, "its .npz is not the one its .json was written with"
    record = saved.get("record")
    why = _record_problem(record, expected)
    if why is None and "r_star" in record:
        why = _projection_problem(projections, record)
    return (None, why) if why is not None else ((record, projections), None)


def saved_parts(checkpoint, corpus, pairs, plants, key, tolerances):
    """The parts of one corpus that a checkpoint holds for this run.

    Each part that is there but cannot be used (measured on another model, with
    other settings, damaged, ...) gives one warning line saying why; its head is
    then measured again and its files replaced.

    Parameters
    ----------
    checkpoint, corpus : str
    pairs : list of (int, int)
    plants : list of (int, bool) or [None]
    key : dict
        :func:`part_key` of the corpus.
    tolerances : list of float

    Returns
    -------
    saved : dict of (layer, head, plant) -> (record, projections)
    """
    saved = {}
    for layer, head in pairs:
        for plant in plants:
            expected = dict(layer=layer, head=head, corpus=corpus, plant=plant,
                            tolerances=tolerances)
            part, why = read_part(part_path(checkpoint, corpus, layer, head, plant), key,
                                  expected)
            if why is not None:
                warnings.warn(f"head-ranks: the finished head {corpus}/"
                              f"{part_name(layer, head, plant)} in {checkpoint} is measured "
                              f"again: {why}", UserWarning, stacklevel=4)
            if part is not None:
                saved[layer, head, plant] = part
    return saved
