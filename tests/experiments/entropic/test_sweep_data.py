"""``intrinsic-rank sweep --data``: what the sweep's data path refuses, in one line each.

Hand-made ``.npy`` headers (inside an ``.npz`` archive too) and data that carry nothing to
estimate ``r*`` from are refused before any training, naming the option and the file.
"""

import csv
import json
import zipfile

import numpy as np
import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.experiments import EXPERIMENTS, load_xy
from intrinsic_rank.experiments.entropic import _sweep
from intrinsic_rank.experiments.entropic._files import load_model_file


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


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    X, Y = make_attention_task("linear", n_samples=600, seq_len=4, d=6, rank=2,
                               random_state=0)
    np.savez(folder / "task.npz", X=X, Y=Y)
    np.save(folder / "X.npy", X)
    np.save(folder / "Y.npy", Y)
    return folder


def test_sweep_on_your_own_data_saves_table_plot_json_csv_and_model(task, tmp_path, capsys):
    out, model = tmp_path / "run", tmp_path / "models" / "sweep.joblib"
    status = main(["sweep", "--data", str(task / "task.npz"), "--attention", "linear",
                   "--rank-grid", "1-3", "--epochs", "60", "--out", str(out), "--quiet",
                   "--save-model", str(model)])
    assert status == 0
    text = capsys.readouterr().out
    assert "Rank sweep: linear students on" in text and "(d = 6, L = 4, n = 600)" in text
    assert "estimated r* = 2; estimated noise floor" in text
    saved = json.loads((out / "sweep.json").read_text())
    assert saved["rank_"] == 2 and saved["config"]["r_star"] is None
    assert saved["model_file"] == str(model)
    with open(out / "sweep.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["rank"]) for row in rows] == [1, 2, 3]
    assert float(rows[0]["heldout_risk"]) == pytest.approx(saved["records"][0]["heldout_risk"])
    assert float(rows[0]["excess_risk"]) > 10 * float(rows[1]["excess_risk"])
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    est = load_model_file(model)
    assert est.rank_ == 2
    X, _ = load_xy(task / "task.npz")
    assert est.predict(X[:5]).shape == (5, 4, 6)


def test_two_npy_files_and_a_given_noise_floor(task, tmp_path, capsys):
    status = main(["sweep", "--data", str(task / "X.npy"), "--targets", str(task / "Y.npy"),
                   "--attention", "linear", "--rank-grid", "1-3", "--epochs", "60",
                   "--noise-floor", "0.01", "--out", str(tmp_path), "--quiet"])
    assert status == 0
    assert "noise floor = 0.01 (given)" in capsys.readouterr().out
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["noise_floor_"] == pytest.approx(0.01) and saved["rank_"] == 2


@pytest.mark.parametrize("argv, message", [
    (["--data", "{task}/X.npy"], "--data: '{task}/X.npy' is an .npy file of X; give Y with "
                                 "--targets"),
    (["--data", "{task}/missing.npz"], "--data: no such file"),
    (["--data", "{task}/task.npz", "--targets", "{task}/Y.npy"], "--targets: "),
    (["--targets", "{task}/Y.npy"], "--targets: give it with --data"),
    (["--noise-floor", "-1"], "argument --noise-floor: must be a finite number >= 0"),
    (["--data", "{task}/task.npz", "--save-model", "{task}"], "--save-model '{task}' is a folder"),
])
def test_bad_data_options_are_one_line(task, tmp_path, capsys, argv, message):
    argv = [a.format(task=task) for a in argv]
    assert main(["sweep", *argv, "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message.format(task=task) in err and len(err.strip().splitlines()) == 1


def test_the_estimator_checks_the_data(tmp_path, capsys):
    np.savez(tmp_path / "bad.npz", X=np.zeros((8, 3, 2)), Y=np.zeros((5, 3, 2)))
    assert main(["sweep", "--data", str(tmp_path / "bad.npz"), "--rank-grid", "1-2",
                 "--out", str(tmp_path), "--quiet"]) == 2
    assert "intrinsic-rank sweep: error:" in capsys.readouterr().err


def test_the_sweep_summary_warns_when_the_floor_is_not_reached():
    sweep = dict(config=dict(attention="linear", teacher="linear", r_star=4, d=16, seq_len=8,
                             n_samples=100, max_epochs=10, random_state=0),
                 r_star=4, rank_=2, noise_floor=0.01, noise_floor_=0.5, excess_tol=0.01,
                 floor_reached=False, reference_risk=0.02, records=[])
    lines = EXPERIMENTS["sweep"].summary({"sweeps": {"linear": sweep}, "seconds": 1.0})
    warning = [line for line in lines if line.startswith("warning:")]
    assert len(warning) == 1
    assert "the estimated floor 0.5 is probably not the floor" in warning[0]
    assert "held-out risk of 0.02" in warning[0] and "--noise-floor" in warning[0]
    sweep["floor_reached"] = True
    lines = EXPERIMENTS["sweep"].summary({"sweeps": {"linear": sweep}, "seconds": 1.0})
    assert not any(line.startswith("warning:") for line in lines)
