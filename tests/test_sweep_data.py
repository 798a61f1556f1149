"""``intrinsic-rank sweep --data``: what the sweep's data path refuses, in one line each.

Hand-made ``.npy`` headers (inside an ``.npz`` archive too) and data that carry nothing to
estimate ``r*`` from are refused before any training, naming the option and the file.
"""

import zipfile

import numpy as np
import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments import load_xy
from intrinsic_rank.experiments.entropic import _sweep


def _npy(path, shape_text, payload=b"\0" * 64):
    """An .npy file (format 1.0) whose header declares ``shape_text``, written by hand."""
    header = ("{'descr': '<f8', 'fortran_order': False, 'shape': " + shape_text
              + ", }").encode("latin1")
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
                     + payload)
    return path


def _npz(path, member):
    """An .npz archive holding ``member`` as X and a valid Y."""
    Y = path.parent / "Y_member.npy"
    np.save(Y, np.zeros((4, 3, 2)))
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(member, "X.npy")
        archive.write(Y, "Y.npy")
    return path


@pytest.fixture
def no_training(monkeypatch):
    def train(*args, **kwargs):
        raise AssertionError("the sweep trained on data it should have refused")

    monkeypatch.setattr(_sweep, "sweep_data", train)


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


SHAPES = {"a negative size": "(-1, 3, 2)", "a negative later size": "(4, -3, 2)",
          "a boolean size": "(True, 3, 2)", "a fractional size": "(2.5, 3, 2)",
          "too many dimensions": str((1,) * 70)}


@pytest.mark.parametrize("kind", ["npy", "npz"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_hand_made_header_is_one_line_naming_the_option_and_the_file(tmp_path, capsys,
                                                                       no_training, kind,
                                                                       shape):
    X = _npy(tmp_path / "X.npy", SHAPES[shape])
    argv = ["sweep", "--out", str(tmp_path / "out"), "--quiet"]
    if kind == "npy":
        np.save(tmp_path / "Y.npy", np.zeros((4, 3, 2)))
        data = X
        argv += ["--data", str(X), "--targets", str(tmp_path / "Y.npy")]
    else:
        data = _npz(tmp_path / "data.npz", X)
        argv += ["--data", str(data)]
    assert main(argv) == 2
    err = _one_line(capsys)
    assert err.startswith(f"intrinsic-rank sweep: error: --data: {str(data)!r}")
    assert "has a damaged NumPy header (shape " in err
    assert len(err) < 300
    if shape != "a fractional size":  # numpy's own header check names that one
        assert "each a whole number >= 0" in err
    with pytest.raises(ValueError, match=r"^--data: .* damaged NumPy header"):
        load_xy(data, tmp_path / "Y.npy" if kind == "npy" else None)


def test_a_header_of_size_zero_is_read_and_the_sweep_says_there_is_no_sample(tmp_path, capsys,
                                                                          no_training):
    data = _npz(tmp_path / "empty.npz", _npy(tmp_path / "X.npy", "(0, 3, 2)", b""))
    assert main(["sweep", "--data", str(data), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert _one_line(capsys) == (f"intrinsic-rank sweep: error: --data: {str(data)!r} holds no "
                                 "samples (X has shape (0, 3, 2)); give n >= 1 sequences")


@pytest.mark.parametrize("case", ["all zero", "X constant", "Y constant", "Y zero targets"])
def test_data_without_signal_are_refused_before_training(tmp_path, capsys, no_training, case):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(40, 4, 3)), rng.normal(size=(40, 4, 3))
    argv = ["sweep", "--out", str(tmp_path / "o"), "--quiet"]
    if case == "all zero":
        X, Y = np.zeros_like(X), np.zeros_like(Y)
    elif case == "X constant":
        X = np.broadcast_to(X[:1], X.shape).copy()
    elif case == "Y constant":
        Y = np.full(40, 2.5)  # a target read at the final position
    if case == "Y zero targets":
        np.save(tmp_path / "X.npy", X)
        np.save(tmp_path / "Y.npy", np.zeros_like(Y))
        option, path = "--targets", tmp_path / "Y.npy"
        argv += ["--data", str(tmp_path / "X.npy"), "--targets", str(path)]
    else:
        np.savez(tmp_path / "d.npz", X=X, Y=Y)
        option, path = "--data", tmp_path / "d.npz"
        argv += ["--data", str(path)]
    assert main(argv) == 2
    err = _one_line(capsys)
    name = "Y" if case.startswith("Y") else "X"
    zero = " (all zero)" if case in ("all zero", "Y zero targets") else ""
    assert err == (f"intrinsic-rank sweep: error: {option}: {str(path)!r}: {name} is the same "
                   f"for every sample{zero}, so the data carry no signal: every rank would "
                   "fit them equally well and r* cannot be estimated")


def test_data_with_signal_pass_the_check():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(6, 4, 3)), rng.normal(size=(6,))
    _sweep._check_signal(X, Y, "d.npz")  # varies across samples: nothing to refuse
    X[1:] = X[0]
    X[-1, -1, -1] += 1.0  # one number differs: the inputs are not all the same
    _sweep._check_signal(X, Y, "d.npz")
    _sweep._check_signal(X[:1], Y[:1], "d.npz")  # one sample: the estimator's to judge


def test_the_sameness_check_reads_every_block_of_samples():
    same = np.zeros((2500, 2, 3))
    assert _sweep._all_like_the_first(same, block=1024)
    for row in (1, 1024, 1025, 2049, 2499):  # the first row of a block, the last of all
        differs = same.copy()
        differs[row, 1, 2] = 1e-300
        assert not _sweep._all_like_the_first(differs, block=1024), row
