"""Offline text at scale: the running Python's standard library as code and English prose.

Every Python installation carries its standard library as source: hundreds of
modules of Python code, and in their docstrings and comments a large body of
technical English. One document per file gives two corpora with held-out
documents that share no text with the training ones:

* ``"code"``: a file's source text;
* ``"prose"``: the same file's docstrings (module, classes, functions) and
  comments, doctest examples removed.

Each file falls in ``"train"``, ``"validation"`` or ``"test"`` by a hash of its
relative path alone, so a file lands in the same split on every machine and in
every Python version that has it. The text itself changes between Python
versions: :func:`stdlib_corpus_record` names the version and a digest of every
document, so a run can be tied to the exact text it read.
"""

import ast
import functools
import hashlib
import io
import platform
import re
import sysconfig
import tokenize
from pathlib import Path

__all__ = ["STDLIB_KINDS", "STDLIB_SPLITS", "stdlib_corpus_record", "stdlib_documents"]

STDLIB_KINDS = ("code", "prose")
"""The corpora of :func:`stdlib_documents`."""

STDLIB_SPLITS = ("train", "validation", "test")
"""The splits of :func:`stdlib_documents`, holding about 60, 20 and 20 % of the files."""

# path parts whose files are not the library proper: test suites and their data, the IDLE
# editor, the retired 2to3 tool, the turtle demos, installed third-party packages
_EXCLUDED_PARTS = frozenset({"test", "tests", "idle_test", "idlelib", "lib2to3", "turtledemo",
                             "site-packages", "dist-packages", "__pycache__"})
# files the build writes for this one machine (its compiler flags and paths), not the library
_MACHINE_FILES = re.compile(r"(^|/)_sysconfigdata_[^/]*\.py$|^config-[^/]*/")
# the source-encoding declaration of PEP 263, read from the first two lines only
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")
_PRAGMAS = ("noqa", "type:", "pragma:", "fmt:", "pylint:")
_SPLIT_OF_REMAINDER = ("train", "train", "train", "validation", "test")


def _split_of(relative_path):
    """The split of a file: its sha256 path digest, as an integer, modulo 5 (3 train)."""
    digest = hashlib.sha256(relative_path.encode("utf-8")).digest()
    return _SPLIT_OF_REMAINDER[int.from_bytes(digest, "big") % 5]


def _without_doctests(text):
    """``text`` less its doctest examples: each ``>>>`` line through the next blank line.

    Those are the examples as :mod:`doctest` reads them (the source lines and
    the expected output after them); a line starting with ``...`` goes too.
    """
    kept, in_example = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(">>>"):
            in_example = True
        elif not stripped:
            in_example = False
        if in_example or stripped.startswith("..."):
            continue
        if stripped or (kept and kept[-1]):  # one blank line where examples left several
            kept.append(line if stripped else "")
    return "\n".join(kept).strip()


def _docstrings(tree):
    """``[(line, docstring)]`` of the module, its classes and its functions."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node)
            if text:
                found.append((getattr(node, "lineno", 0), text))
    return found


def _is_pragma(text, line):
    if line == 1 and text.startswith("#!"):
        return True
    if line <= 2 and _CODING.match(text):
        return True
    return text.lstrip("#").strip().lower().startswith(_PRAGMAS)


def _comments(source):
    """``[(line, paragraph)]``: runs of comments on consecutive lines, ``#``, pragmas dropped."""
    paragraphs, last = [], None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        text = token.string.lstrip("#").strip()
        if not text or _is_pragma(token.string, line):
            continue
        if last is not None and line == last + 1:
            paragraphs[-1][1].append(text)
        else:
            paragraphs.append((line, [text]))
        last = line
    return [(line, "\n".join(lines)) for line, lines in paragraphs]


def _prose(source, tree):
    """A file's docstrings and comments in source order, doctest examples removed."""
    pieces = sorted(_docstrings(tree) + _comments(source), key=lambda item: item[0])
    kept = (_without_doctests(text) for _, text in pieces)
    return "\n\n".join(text for text in kept if text)


def _read(path):
    """``(code, prose)`` of one file, or None when it does not decode as UTF-8 or parse."""
    try:
        source = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
        tree = ast.parse(source)
        prose = _prose(source, tree)
    except (UnicodeDecodeError, SyntaxError, ValueError, tokenize.TokenError):
        return None
    return source, prose


def _stdlib_root(root):
    return Path(sysconfig.get_paths()["stdlib"] if root is None else root).resolve()


@functools.lru_cache(maxsize=4)
def _documents(root):
    """``{kind: ((relative path, split, text), ...)}`` of a folder, parsed once per process."""
    paths = sorted(root.rglob("*.py")) if root.is_dir() else []
    if not paths:
        raise ValueError(f"the standard library at {root} has no .py sources (this Python "
                         "ships it compiled or zipped): the stdlib corpora need its source")
    documents = {kind: [] for kind in STDLIB_KINDS}
    for path in paths:
        relative = path.relative_to(root).as_posix()
        if _EXCLUDED_PARTS & set(path.relative_to(root).parts) or \
                _MACHINE_FILES.search(relative):
            continue
        texts = _read(path)
        if texts is None:
            continue
        split = _split_of(relative)
        for kind, text in zip(STDLIB_KINDS, texts):
            if text.strip():
                documents[kind].append((relative, split, text))
    return {kind: tuple(items) for kind, items in documents.items()}


def _checked(kind, split):
    if kind not in STDLIB_KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, STDLIB_KINDS))}; got "
                         f"{kind!r}")
    if split is not None and split not in STDLIB_SPLITS:
        raise ValueError(f"split must be None or one of {', '.join(map(repr, STDLIB_SPLITS))}"
                         f"; got {split!r}")


def stdlib_documents(kind, split=None, *, root=None):
    """The documents of one standard-library corpus: ``(relative path, text)`` per file.

    The documents are the ``.py`` files of the running Python's standard
    library (``sysconfig.get_paths()["stdlib"]``), sorted by relative path,
    leaving out test suites (any folder named ``test``, ``tests`` or
    ``idle_test``), ``idlelib``, ``lib2to3``, ``turtledemo``, installed
    packages (``site-packages``), ``__pycache__``, the two files the build
    writes for one machine (``_sysconfigdata_*.py``, ``config-*/``), and
    files that do not decode as UTF-8 or do not parse. The folder is read once
    per process.

    Parameters
    ----------
    kind : {"code", "prose"}
        * ``"code"``: the file's source text (line ends ``\\n``);
        * ``"prose"``: its docstrings (module, classes, functions, as
          ``ast.get_docstring`` gives them) and comments (``#`` removed;
          runs of comments on consecutive lines form one paragraph; the
          shebang, the encoding declaration and ``noqa``, ``type:``,
          ``pragma:``, ``fmt:``, ``pylint:`` pragmas left out), in source
          order, one blank line apart, with doctest examples removed (each
          ``>>>`` line through the next blank line, and every line starting
          with ``...``). A file with none gives no prose document.
    split : {"train", "validation", "test"} or None, default=None
        A file's split follows from its relative path alone (``/`` between
        folders): the sha256 digest of the path (UTF-8) read as a big-endian
        integer, modulo 5, is 0, 1 or 2 for ``"train"``, 3 for
        ``"validation"`` and 4 for ``"test"``. None: every split.
    root : str or PathLike or None, default=None
        Another folder to read as if it were the standard library (tests use
        a small one); None for the running Python's.

    Returns
    -------
    documents : list of (str, str)
        ``(relative path, text)``, sorted by path.

    Raises
    ------
    ValueError
        For an unknown kind or split, or a folder without ``.py`` sources.

    Examples
    --------
    >>> code = stdlib_documents("code", "train")
    >>> len(code) > 200, all(path.endswith(".py") for path, _ in code)
    (True, True)
    >>> prose = dict(stdlib_documents("prose"))
    >>> prose["colorsys.py"].splitlines()[0]
    'Conversion functions between RGB and other color systems.'
    """
    _checked(kind, split)
    return [(path, text) for path, at, text in _documents(_stdlib_root(root))[kind]
            if split is None or at == split]


def stdlib_corpus_record(kind, *, root=None):
    """Where a standard-library corpus comes from, and a digest of its text.

    Parameters
    ----------
    kind : {"code", "prose"}
        As in :func:`stdlib_documents`.
    root : str or PathLike or None, default=None
        As in :func:`stdlib_documents`.

    Returns
    -------
    record : dict
        ``kind``; ``source``: the folder read; ``python_version``:
        ``platform.python_version()``, since the text changes between
        versions; ``digest``: the sha256 hex digest of every document of that
        kind in path order, all splits (each path and text as UTF-8, each
        preceded by its length in bytes as 8 big-endian bytes);
        ``n_documents`` and ``characters``: dicts by split.

    Raises
    ------
    ValueError
        As :func:`stdlib_documents`.

    Examples
    --------
    >>> record = stdlib_corpus_record("code")
    >>> sorted(record["n_documents"]) == sorted(STDLIB_SPLITS), len(record["digest"])
    (True, 64)
    """
    _checked(kind, None)
    folder = _stdlib_root(root)
    documents = _documents(folder)[kind]
    digest = hashlib.sha256()
    for path, _, text in documents:
        for part in (path.encode("utf-8"), text.encode("utf-8")):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return dict(
        kind=kind, source=str(folder), python_version=platform.python_version(),
        digest=digest.hexdigest(),
        n_documents={s: sum(at == s for _, at, _ in documents) for s in STDLIB_SPLITS},
        characters={s: sum(len(t) for _, at, t in documents if at == s)
                    for s in STDLIB_SPLITS})
