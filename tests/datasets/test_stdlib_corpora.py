"""The standard-library corpora: documents, their split by path hash, and the record."""

import ast
import hashlib
import io
import platform
import shutil
import sysconfig
import tokenize
from pathlib import Path

import pytest

from intrinsic_rank.datasets import (
    STDLIB_SPLITS,
    stdlib_corpus_record,
    stdlib_documents,
)

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _expected_split(relative_path):
    """The split by its definition: sha256 of the path as an integer, modulo 5."""
    value = int(hashlib.sha256(relative_path.encode()).hexdigest(), 16) % 5
    return "train" if value < 3 else ("validation" if value == 3 else "test")


# ---------------------------------------------------------------- the real library


@pytest.mark.parametrize("kind", ["code", "prose"])
def test_the_splits_are_disjoint_and_cover_every_document(kind):
    everything = stdlib_documents(kind)
    parts = {split: stdlib_documents(kind, split) for split in STDLIB_SPLITS}
    paths = {split: {path for path, _ in docs} for split, docs in parts.items()}
    assert not paths["train"] & paths["validation"]
    assert not paths["train"] & paths["test"]
    assert not paths["validation"] & paths["test"]
    assert sum(len(docs) for docs in parts.values()) == len(everything)
    assert [path for path, _ in everything] == sorted(path for path, _ in everything)
    for split, docs in parts.items():
        assert all(_expected_split(path) == split for path, _ in docs)
    # each split holds its expected share of several hundred files, give or take
    n = len(everything)
    assert n > 300
    assert 0.5 * n < len(parts["train"]) < 0.7 * n
    assert 0.12 * n < len(parts["validation"]) < 0.28 * n


def test_a_known_file_is_where_its_hash_says_and_the_code_is_its_source():
    path = "json/__init__.py"
    split = _expected_split(path)
    code = dict(stdlib_documents("code", split))
    assert code[path] == (STDLIB / path).read_text("utf-8")
    for other in set(STDLIB_SPLITS) - {split}:
        assert path not in dict(stdlib_documents("code", other))


def test_excluded_folders_are_left_out():
    paths = [path for path, _ in stdlib_documents("code")]
    for part in ("test", "tests", "idle_test", "idlelib", "lib2to3", "turtledemo",
                 "site-packages", "__pycache__"):
        assert not any(part in path.split("/") for path in paths), part
    assert "json/decoder.py" in paths and "os.py" in paths


def test_the_prose_holds_docstrings_and_comments_without_doctests():
    prose = dict(stdlib_documents("prose"))
    source = (STDLIB / "json/__init__.py").read_text("utf-8")
    first = ast.get_docstring(ast.parse(source)).splitlines()[0]
    text = prose["json/__init__.py"]
    assert text.startswith(first)
    assert ">>>" in source and ">>>" not in text
    assert not any(line.lstrip().startswith((">>>", "...")) for t in prose.values()
                   for line in t.splitlines())
    assert "import json" not in text  # the source lines of its examples are gone
    # every comment of a module is there, its "#" removed
    source = (STDLIB / "os.py").read_text("utf-8")
    comments = [token.string.lstrip("#").strip()
                for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT]
    lines = prose["os.py"].splitlines()
    pragmas = ("noqa", "type:", "pragma:", "fmt:", "pylint:", "!", "-*-")
    assert len(comments) > 10
    assert all(c in lines for c in comments if c and not c.lower().startswith(pragmas))


def test_the_record_matches_the_documents():
    for kind in ("code", "prose"):
        record = stdlib_corpus_record(kind)
        assert record["source"] == str(STDLIB.resolve())
        assert record["python_version"] == platform.python_version()
        for split in STDLIB_SPLITS:
            docs = stdlib_documents(kind, split)
            assert record["n_documents"][split] == len(docs)
            assert record["characters"][split] == sum(len(text) for _, text in docs)


# ---------------------------------------------------------------- a small fake library


FILES = {
    "alpha.py": '#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n'
                '"""Alpha module.\n\n>>> 1 + 1\n2\n\nAfter the example."""\n\n'
                'import os  # noqa: F401\n# A comment\n# on two lines.\nX = 1  # type: int\n',
    "pkg/beta.py": 'def f():\n    """Beta function."""\n    return 1\n',
    "pkg/gamma.py": 'Y = 2\n',
    "test/test_alpha.py": '"""Never read."""\n',
    "broken.py": 'def (:\n',
    "latin.py": b'"""caf\xe9"""\n',
}


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, "utf-8")
    return root


def test_a_small_folder_is_read_by_the_rules(tmp_path):
    root = _write(tmp_path / "lib", FILES)
    code = dict(stdlib_documents("code", root=root))
    assert sorted(code) == ["alpha.py", "pkg/beta.py", "pkg/gamma.py"]  # no test, no bad
    prose = dict(stdlib_documents("prose", root=root))
    assert prose == {"alpha.py": "Alpha module.\n\nAfter the example.\n\n"
                                 "A comment\non two lines.",
                     "pkg/beta.py": "Beta function."}  # gamma has no prose: no document
    for split in STDLIB_SPLITS:
        assert [p for p, _ in stdlib_documents("code", split, root=root)] == \
            [p for p in sorted(code) if _expected_split(p) == split]


def test_the_digest_follows_the_text(tmp_path):
    first = stdlib_corpus_record("code", root=_write(tmp_path / "a", FILES))
    same = stdlib_corpus_record("code", root=_write(tmp_path / "b", FILES))
    changed = stdlib_corpus_record("code", root=_write(
        tmp_path / "c", dict(FILES, **{"pkg/gamma.py": "Y = 3\n"})))
    renamed = stdlib_corpus_record("code", root=_write(
        tmp_path / "d", {("pkg/delta.py" if k == "pkg/gamma.py" else k): v
                         for k, v in FILES.items()}))
    assert first["digest"] == same["digest"]
    assert len({first["digest"], changed["digest"], renamed["digest"]}) == 3
    expected = hashlib.sha256()
    for path in ("alpha.py", "pkg/beta.py", "pkg/gamma.py"):
        for part in (path.encode(), FILES[path].encode()):
            expected.update(len(part).to_bytes(8, "big") + part)
    assert first["digest"] == expected.hexdigest()
    assert sum(first["n_documents"].values()) == 3
    assert sum(first["characters"].values()) == sum(len(FILES[p]) for p in
                                                    ("alpha.py", "pkg/beta.py", "pkg/gamma.py"))
    # the prose digest is a different text's
    assert stdlib_corpus_record("prose", root=tmp_path / "a")["digest"] != first["digest"]


def test_a_library_without_sources_and_bad_names_are_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "os.pyc").write_bytes(b"\0")
    with pytest.raises(ValueError, match=r"has no \.py sources") as error:
        stdlib_documents("code", root=tmp_path / "empty")
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="kind must be one of 'code', 'prose'; got 'poetry'"):
        stdlib_documents("poetry")
    with pytest.raises(ValueError, match="split must be None or one of 'train', "
                                         "'validation', 'test'; got 'dev'"):
        stdlib_documents("code", "dev")
    with pytest.raises(ValueError, match="kind must be one of"):
        stdlib_corpus_record("words")


def test_a_copied_library_gives_the_same_split_and_digest(tmp_path):
    """Only the relative paths and texts count, not where the folder is."""
    copy = tmp_path / "json"
    shutil.copytree(STDLIB / "json", copy)
    here = stdlib_corpus_record("code", root=copy)
    again = stdlib_corpus_record("code", root=shutil.copytree(copy, tmp_path / "x" / "json"))
    assert here["digest"] == again["digest"] and here["source"] != again["source"]
