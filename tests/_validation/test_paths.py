"""Output paths checked before any work: what is really wrong, in one line."""

import errno
import os
import sys

import pytest

from intrinsic_rank._validation import check_output_folder


def test_a_folder_where_no_file_can_be_created_says_so(tmp_path, monkeypatch):
    """A folder that exists, where creating a file answers 'No such file or directory'
    (a virtual file system such as /proc): not "does not exist"."""
    def refused(*args, **kwargs):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr("tempfile.mkstemp", refused)
    with pytest.raises(ValueError) as error:
        check_output_folder(str(tmp_path / "foo"), "--out")
    message = str(error.value)
    assert message == (f"--out {str(tmp_path / 'foo')!r} is not writable: {tmp_path} is a "
                       "folder of a special file system (such as /proc or /sys), where no "
                       "file can be created (it answers 'No such file or directory'); give a "
                       "folder on a disk")


def test_a_folder_without_permission_keeps_its_reason(tmp_path, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refused)
    with pytest.raises(ValueError, match=r"is not writable \(.*: Permission denied\)$"):
        check_output_folder(str(tmp_path / "foo"), "--out")


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"),
                    reason="needs Linux's /proc")
def test_out_in_proc_is_refused_for_what_it_is(capsys):
    from intrinsic_rank.cli import main

    assert main(["sweep", "--out", "/proc/intrinsic-rank-test", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "argument --out: '/proc/intrinsic-rank-test' is not writable: /proc is a folder " \
           "of a special file system" in err
    assert "does not exist" not in err
