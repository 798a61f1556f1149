"""The one atomic writer: a whole new file, or the old one untouched; nothing left behind."""

import os
import stat

import pytest

from intrinsic_rank._atomic import replaced_atomically


def _write(path, text, fail=None):
    with replaced_atomically(path) as tmp:
        assert os.path.dirname(tmp) == os.path.dirname(os.path.abspath(path))
        assert os.path.basename(tmp).startswith(f".{os.path.basename(path)}.")
        with open(tmp, "w") as stream:
            stream.write(text)
        if fail is not None:
            raise fail


def test_the_new_file_replaces_the_old_with_a_new_files_permissions(tmp_path):
    target = tmp_path / "deep" / "er" / "a.json"
    _write(target, "one")
    assert target.read_text() == "one"
    _write(target, "two")
    assert target.read_text() == "two" and os.listdir(target.parent) == ["a.json"]
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~mask  # not mkstemp's 0o600


@pytest.mark.parametrize("fail", [ValueError("bad"), KeyboardInterrupt(), SystemExit(3)])
def test_an_error_or_a_stop_leaves_the_old_file_and_no_temporary(tmp_path, fail):
    target = tmp_path / "a.json"
    _write(target, "old")
    with pytest.raises(type(fail)):
        _write(target, "half", fail=fail)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["a.json"]


def test_a_rename_that_fails_removes_the_temporary(tmp_path):
    folder = tmp_path / "a.json"
    folder.mkdir()  # a folder where the file goes: the rename fails
    with pytest.raises(OSError):
        _write(folder, "x")
    assert os.listdir(tmp_path) == ["a.json"] and folder.is_dir()

    def refuse(tmp, path):
        raise ValueError(f"not {os.path.basename(path)}")

    with pytest.raises(ValueError, match="not b.json"):
        with replaced_atomically(tmp_path / "b.json", rename=refuse) as tmp:
            open(tmp, "w").write("x")
    assert os.listdir(tmp_path) == ["a.json"]


def test_rename_receives_the_temporary_and_the_target(tmp_path):
    seen = []
    with replaced_atomically(tmp_path / "c.png", suffix=".png",
                             rename=lambda tmp, path: seen.append((tmp, path))) as tmp:
        assert tmp.endswith(".png")
    assert seen == [(tmp, str(tmp_path / "c.png"))] and os.path.exists(tmp)
