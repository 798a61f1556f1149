"""The estimators' files: a fitted model's file (write, read, refuse what is damaged) and
the ``(X, Y)`` arrays of ``sweep --data`` (``.npy``/``.npz``), read without trusting them.
"""

import hashlib
import io
import json
import os
import warnings

import joblib
import numpy as np
import pytest

from intrinsic_rank import __version__
from intrinsic_rank.experiments.entropic._files import (
    MODEL_FORMAT,
    check_model_path,
    load_model_file,
    load_xy,
    save_model_file,
)


def _fitted():
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0])


def _model_bytes(tmp_path):
    path = save_model_file(_fitted(), tmp_path / "model.joblib")
    return path, open(path, "rb").read()


class _Payload:
    """A pickle that runs code when it is loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _with_header(tmp_path, payload, estimator_class="builtins.str", version=__version__):
    body = io.BytesIO()
    joblib.dump(payload, body)
    body = body.getvalue()
    header = {"format": MODEL_FORMAT, "version": version, "estimator": estimator_class,
              "size": len(body)}
    header["sha256"] = hashlib.sha256(json.dumps(header, sort_keys=True).encode() + b"\n"
                                      + body).hexdigest()
    path = tmp_path / "hashed.joblib"
    path.write_bytes(b"intrinsic-rank model file 1\n" + json.dumps(header).encode() + b"\n"
                     + body)
    return path


@pytest.fixture
def task(tmp_path):
    np.savez(tmp_path / "task.npz", X=np.zeros((4, 3, 2)), Y=np.zeros((4, 3, 2)))
    return tmp_path


def _one_line_error(error):
    text = str(error.value)
    assert "\n" not in text and len(text) < 400, text
    return text


@pytest.mark.parametrize("make, message", [
    (lambda out: "", "empty string"),
    (lambda out: "   ", "empty string"),
    (lambda out: str(out), "is a folder"),
    (lambda out: str(out / "sweep.json"), "one of this run's own output files"),
    (lambda out: str(out / "sweep.png"), "one of this run's own output files"),
    (lambda out: str(out / "sweep.csv"), "one of this run's own output files"),
    (lambda out: "/proc/intrinsic-rank-test/model.joblib", "is not writable"),
    (lambda out: str(out / "a-file" / "model.joblib"), "is a file, not a folder"),
])
def test_save_model_paths_are_refused_before_work(tmp_path, make, message):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match=message) as error:
        check_model_path(make(tmp_path), str(tmp_path))
    assert str(error.value).startswith("--save-model") and "\n" not in str(error.value)


def test_a_model_under_a_missing_folder_is_accepted_and_written(tmp_path):
    path = tmp_path / "new" / "deeper" / "model.joblib"
    assert check_model_path(str(path), str(tmp_path)) == str(path)
    assert not (tmp_path / "new").exists()  # the check itself creates nothing
    save_model_file(_fitted(), path)
    assert load_model_file(path).coef_.shape == (1,)


def test_the_sweep_refuses_its_own_json_as_save_model(tmp_path, capsys):
    from intrinsic_rank.cli import main

    status = main(["sweep", "--d", "4", "--seq-len", "3", "--n-samples", "64", "--epochs", "2",
                   "--rank-grid", "1-2", "--out", str(tmp_path), "--quiet",
                   "--save-model", str(tmp_path / "sweep.json")])
    assert status == 2 and "--save-model" in capsys.readouterr().err
    assert not (tmp_path / "sweep.json").exists()


def test_every_bit_flip_of_a_model_is_refused(tmp_path):
    path, data = _model_bytes(tmp_path)
    rng = np.random.default_rng(0)
    for position in rng.choice(len(data), size=40, replace=False):
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        (tmp_path / "flipped.joblib").write_bytes(bytes(flipped))
        with pytest.raises(ValueError):
            load_model_file(tmp_path / "flipped.joblib")


def test_a_truncated_model_is_refused_before_unpickling(tmp_path):
    path, data = _model_bytes(tmp_path)
    (tmp_path / "short.joblib").write_bytes(data[:-10])
    with pytest.raises(ValueError, match="is damaged: its content does not match"):
        load_model_file(tmp_path / "short.joblib")


def test_a_plain_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    joblib.dump({"format": MODEL_FORMAT, "version": __version__,
                 "estimator": _Payload(str(marker))}, tmp_path / "crafted.joblib")
    with pytest.raises(ValueError, match="no intrinsic-rank header"):
        load_model_file(tmp_path / "crafted.joblib")
    assert not marker.exists()


@pytest.mark.parametrize("payload, message", [
    ({"format": MODEL_FORMAT, "version": __version__, "estimator": "fitted"},
     "must be a fitted scikit-learn estimator; got str"),
    ({"format": MODEL_FORMAT, "version": __version__}, "its payload has no estimator"),
    ([1, 2], "its payload has no estimator"),
])
def test_a_payload_of_the_wrong_shape_is_one_line(tmp_path, payload, message):
    with pytest.raises(ValueError, match=message) as error:
        load_model_file(_with_header(tmp_path, payload))
    assert "\n" not in str(error.value)


def test_an_unfitted_or_mislabelled_estimator_is_refused(tmp_path):
    from sklearn.linear_model import LinearRegression

    with pytest.raises(ValueError, match="not fitted"):
        save_model_file(LinearRegression(), tmp_path / "m.joblib")
    payload = {"format": MODEL_FORMAT, "version": __version__, "estimator": _fitted()}
    with pytest.raises(ValueError, match="but its header names builtins.str"):
        load_model_file(_with_header(tmp_path, payload))


def test_a_model_of_another_version_warns_or_raises(tmp_path):
    payload = {"format": MODEL_FORMAT, "version": "0.0.1", "estimator": _fitted()}
    path = _with_header(tmp_path, payload, "sklearn.linear_model._base.LinearRegression",
                        version="0.0.1")
    with pytest.warns(UserWarning, match="written by intrinsic_rank 0.0.1"):
        load_model_file(path)
    with pytest.raises(ValueError, match="written by intrinsic_rank 0.0.1"):
        load_model_file(path, strict=True)


def test_a_truncated_archive_is_one_line(task):
    data = (task / "task.npz").read_bytes()
    (task / "short.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="--data") as error:
        load_xy(task / "short.npz")
    _one_line_error(error)


def test_every_one_byte_corruption_of_an_archive_is_one_line_or_loads(task):
    data = (task / "task.npz").read_bytes()
    rng = np.random.default_rng(1)
    for position in rng.choice(len(data), size=40, replace=False):
        broken = bytearray(data)
        broken[position] ^= 0xFF
        (task / "broken.npz").write_bytes(bytes(broken))
        try:
            X, Y = load_xy(task / "broken.npz")
        except ValueError as error:
            assert str(error).startswith("--data") and "\n" not in str(error)
        else:  # a byte of the zip's slack (a timestamp): the arrays are intact
            assert X.shape == (4, 3, 2) and Y.shape == (4, 3, 2)


def test_a_header_larger_than_the_file_is_refused_before_allocation(tmp_path):
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**15, 4, 5)}
    with open(tmp_path / "huge.npy", "wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(b"\0" * 64)
    assert os.path.getsize(tmp_path / "huge.npy") < 300
    np.save(tmp_path / "Y.npy", np.zeros(4))
    with pytest.raises(ValueError, match="truncated: its header declares shape") as error:
        load_xy(tmp_path / "huge.npy", tmp_path / "Y.npy")
    _one_line_error(error)


@pytest.mark.parametrize("array, word", [
    (np.zeros((4, 3, 2), dtype=[("a", "f8")]), "structured"),
    (np.zeros((4, 3, 2), dtype="datetime64[D]"), "datetime"),
    (np.zeros((4, 3, 2), dtype=complex), "complex"),
])
def test_unsupported_dtypes_in_a_file_are_one_line(tmp_path, array, word):
    np.savez(tmp_path / "odd.npz", X=array, Y=np.zeros(4))
    with pytest.raises(ValueError, match=f"holds a {word} array") as error:
        load_xy(tmp_path / "odd.npz")
    _one_line_error(error)


def test_a_text_file_as_data_is_named_as_such(tmp_path):
    (tmp_path / "x.npz").write_text("rank,risk\n1,0.5\n")
    with pytest.raises(ValueError, match="a text file") as error:
        load_xy(tmp_path / "x.npz")
    assert "allow_pickle" not in _one_line_error(error)


def test_no_warning_escapes_a_plain_model_round_trip(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save_model_file(_fitted(), tmp_path / "m.joblib")
        load_model_file(tmp_path / "m.joblib")


def test_a_future_version_header_names_its_own_version(tmp_path):
    import hashlib
    import io

    import joblib
    from sklearn.linear_model import LinearRegression

    from intrinsic_rank import __version__
    from intrinsic_rank.experiments.entropic._files import MODEL_FORMAT, load_model_file

    body = io.BytesIO()
    joblib.dump({"format": MODEL_FORMAT, "version": __version__,
                 "estimator": LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0])}, body)
    body = body.getvalue()
    header = {"format": MODEL_FORMAT, "version": "9.9.9", "size": len(body),
              "estimator": "sklearn.linear_model._base.LinearRegression"}
    header["sha256"] = hashlib.sha256(json.dumps(header, sort_keys=True).encode() + b"\n"
                                      + body).hexdigest()
    path = tmp_path / "future.joblib"
    path.write_bytes(b"intrinsic-rank model file 1\n" + json.dumps(header).encode() + b"\n"
                     + body)
    with pytest.warns(UserWarning, match=f"written by intrinsic_rank 9.9.9; this is "
                                         f"{__version__}"):
        load_model_file(path)


def test_an_npz_without_y_names_what_it_holds(tmp_path):
    np.savez(tmp_path / "bad.npz", X=np.zeros((3, 2, 2)), Z=np.zeros(3))
    with pytest.raises(ValueError, match=r"has no array named Y \(it holds X, Z\)"):
        load_xy(tmp_path / "bad.npz")


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp, "is a folder; give a file name such as"),
    (lambda tmp: str(tmp) + os.sep, "is a folder; give a file name such as"),
    (lambda tmp: "", "empty string"),
    (lambda tmp: tmp / "a-file" / "m.joblib", "is a file, not a folder"),
])
def test_save_model_file_refuses_a_path_it_cannot_write_in_one_line(tmp_path, make, message):
    # a folder gave IsADirectoryError from deep inside the atomic write
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match=message) as error:
        save_model_file(_fitted(), make(tmp_path))
    assert _one_line_error(error).startswith("path ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing written
