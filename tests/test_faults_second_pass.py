"""The second fault pass: lost output, silent acceptance, tracebacks, long messages.

Each test fails on the code before the fix it names. Tests of a guarantee that
needs a line in a module owned elsewhere (``cli.py``, ``_sweep.py``,
``_attention_rank.py``, ``_reachability.py``, ``_profile.py``) test the shared
helper directly and, where the whole path is cheap, the end-to-end behaviour as
a strict ``xfail`` until that line lands.
"""

import argparse
import hashlib
import io
import json
import os
import warnings

import joblib
import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator, __version__
from intrinsic_rank._validation import (
    check_allocation,
    check_distinct,
    check_output_file,
    check_token_ids,
    describe_value,
    read_text_lines,
)
from intrinsic_rank.estimators._inputs import check_dtype
from intrinsic_rank.estimators._options import check_student_options
from intrinsic_rank.estimators._scaling import check_units, in_user_units
from intrinsic_rank.experiments import EXPERIMENTS, fit_seeds
from intrinsic_rank.experiments.entropic._files import (
    MODEL_FORMAT,
    check_model_path,
    load_model_file,
    load_xy,
    save_model_file,
)
from intrinsic_rank.experiments.runner import write_csv, write_json
from intrinsic_rank.experiments.runner._arguments import bounded_float
from intrinsic_rank.experiments.runner._output import read_json
from intrinsic_rank.experiments.runner._stage import output_stage
from intrinsic_rank.nn import STUDENTS


def _fitted():
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0])


# -- lost output: --save-model checked before any work ---------------------------------


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


def test_a_full_disk_is_refused_before_work(tmp_path):
    with pytest.raises(ValueError, match="the disk is full"):
        check_output_file(str(tmp_path / "m.joblib"), "--save-model", min_free=1 << 62)


def test_the_sweep_refuses_its_own_json_as_save_model(tmp_path, capsys):
    from intrinsic_rank.cli import main

    status = main(["sweep", "--d", "4", "--seq-len", "3", "--n-samples", "64", "--epochs", "2",
                   "--rank-grid", "1-2", "--out", str(tmp_path), "--quiet",
                   "--save-model", str(tmp_path / "sweep.json")])
    assert status == 2 and "--save-model" in capsys.readouterr().err
    assert not (tmp_path / "sweep.json").exists()


# -- lost output: one run's files together ------------------------------------------


def _previous_run(folder):
    with output_stage(folder, "sweep") as stage:
        write_json(folder / "sweep.json", {"seed": 0})
        write_csv(folder / "sweep.csv", [{"seed": 0}])
        stage.results_saved()
        write_json(folder / "sweep.png", {"seed": 0})  # stands for the figure


def _seeds(folder):
    seeds = {}
    for name in ("sweep.json", "sweep.png"):
        if (folder / name).exists():
            seeds[name] = read_json(folder / name)["seed"]
    if (folder / "sweep.csv").exists():
        seeds["sweep.csv"] = int((folder / "sweep.csv").read_text().split()[1])
    return seeds


def test_an_interrupt_during_plotting_keeps_the_previous_run_whole(tmp_path):
    _previous_run(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with output_stage(tmp_path, "sweep") as stage:
            write_json(tmp_path / "sweep.json", {"seed": 7})
            write_csv(tmp_path / "sweep.csv", [{"seed": 7}])
            stage.results_saved()
            raise KeyboardInterrupt  # Ctrl-C while plotting
    assert _seeds(tmp_path) == {"sweep.json": 0, "sweep.png": 0, "sweep.csv": 0}
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp") or ".png." in f]


def test_a_failed_plot_keeps_the_results_and_drops_the_old_figure(tmp_path):
    _previous_run(tmp_path)
    with pytest.raises(ImportError):
        with output_stage(tmp_path, "sweep") as stage:
            write_json(tmp_path / "sweep.json", {"seed": 7})
            write_csv(tmp_path / "sweep.csv", [{"seed": 7}])
            stage.results_saved()
            raise ImportError("matplotlib is not installed")
    assert _seeds(tmp_path) == {"sweep.json": 7, "sweep.csv": 7}  # no PNG of seed 0 beside


def test_a_failed_run_writes_nothing(tmp_path):
    _previous_run(tmp_path)
    with pytest.raises(RuntimeError):
        with output_stage(tmp_path, "sweep"):
            save_model_file(_fitted(), tmp_path / "model.joblib")
            raise RuntimeError("the fit failed")
    assert not (tmp_path / "model.joblib").exists()
    assert _seeds(tmp_path) == {"sweep.json": 0, "sweep.png": 0, "sweep.csv": 0}


def test_a_finished_run_replaces_every_file(tmp_path):
    _previous_run(tmp_path)
    with output_stage(tmp_path, "sweep") as stage:
        write_json(tmp_path / "sweep.json", {"seed": 7})
        assert read_json(tmp_path / "sweep.json") == {"seed": 0}  # renamed in at the end
        write_csv(tmp_path / "sweep.csv", [{"seed": 7}])
        save_model_file(_fitted(), tmp_path / "model.joblib")
        stage.results_saved()
        write_json(tmp_path / "sweep.png", {"seed": 7})
    assert _seeds(tmp_path) == {"sweep.json": 7, "sweep.png": 7, "sweep.csv": 7}
    assert (tmp_path / "model.joblib").exists()


def _sweep_result():
    record = {"rank": 1, "train_risk": 0.1, "heldout_risk": 0.1, "excess_risk": 0.0,
              "reached": True, "energy_effective_rank": 1.0, "numerical_rank": 1}
    config = {"data": "x.npz", "attention": "softmax", "d": 2, "seq_len": 3, "n_samples": 4,
              "max_epochs": 1, "random_state": 0, "rank_grid": [1]}
    sweep = {"records": [record], "config": config, "rank_": 1, "r_star": None,
             "noise_floor": None, "noise_floor_": 0.1, "excess_tol": 0.01,
             "floor_reached": True, "reference_risk": 0.2}
    return {"sweeps": {"data": sweep}, "seconds": 0.0}


def test_the_csv_is_written_with_the_json_before_plotting(tmp_path):
    """Without matplotlib the CSV is written all the same: it is a result, not a plot."""
    experiment = EXPERIMENTS["sweep"]
    with pytest.raises(ImportError):
        with experiment.output_stage(str(tmp_path)):
            json_path, files = experiment.save_results(_sweep_result(), str(tmp_path))
            raise ImportError("matplotlib is not installed")  # the plot that follows
    assert files == ["sweep.csv"] and os.path.exists(json_path)
    assert (tmp_path / "sweep.csv").read_text().startswith("rank,")


# -- silent: saved models -----------------------------------------------------------


def _model_bytes(tmp_path):
    path = save_model_file(_fitted(), tmp_path / "model.joblib")
    return path, open(path, "rb").read()


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


class _Payload:
    """A pickle that runs code when it is loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_plain_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    joblib.dump({"format": MODEL_FORMAT, "version": __version__,
                 "estimator": _Payload(str(marker))}, tmp_path / "crafted.joblib")
    with pytest.raises(ValueError, match="no intrinsic-rank header"):
        load_model_file(tmp_path / "crafted.joblib")
    assert not marker.exists()


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


# -- silent: min-ip-law options -----------------------------------------------------


class _Refusing(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def _min_ip_law(*argv):
    experiment = EXPERIMENTS["min-ip-law"]
    parser = _Refusing()
    experiment.add_arguments(parser)
    settings = experiment.settings(parser.parse_args(list(argv)))
    experiment.validate(settings)
    return settings


@pytest.mark.parametrize("argv, message", [
    (["--epochs", "0"], "--epochs"),
    (["--n-seeds", "0"], "--n-seeds"),
    (["--bits", "2", "2", "3"], "--bits: 2 is given twice"),
    (["--heads", "1", "1"], "--heads: 1 is given twice"),
    (["--feature-maps", "exp", "relu", "--map-bits", "9"], "--map-bits"),
    (["--bits", "2", "3", "--feature-maps", "exp", "relu", "--map-bits", "4"],
     "--map-bits: 4 is not among --bits"),
    (["--bits", "2", "--heads", "100"], "--heads: 100 heads need at least 100 features"),
    (["--bits", "9"], "--bits"),
])
def test_min_ip_law_options_are_checked_before_work(argv, message):
    with pytest.raises(ValueError, match=message):
        _min_ip_law(*argv)


def test_min_ip_law_epochs_are_honoured():
    assert _min_ip_law("--epochs", "7")["max_steps"] == 7


# -- silent: estimator inputs and options -------------------------------------------


@pytest.mark.parametrize("dtype, word", [("datetime64[D]", "datetime"),
                                         ("timedelta64[s]", "timedelta"),
                                         ([("a", "f8"), ("b", "f8")], "structured")])
def test_dates_and_records_are_not_data(dtype, word):
    X = np.zeros((8, 3, 2), dtype=dtype)
    with pytest.raises(ValueError, match=f"X must hold real numbers; got a {word}"):
        AttentionRankEstimator(max_epochs=1).fit(X, np.zeros(8))


@pytest.mark.parametrize("options, message", [
    ({"hidden": 2.5}, r"student_options\['hidden'\] must be an integer"),
    ({"hidden": -3}, r"student_options\['hidden'\] must be an integer in \[1, 65536\]"),
    ({"hidden": 10**7}, r"student_options\['hidden'\] must be an integer in \[1, 65536\]"),
    ({"positional": "yes"}, r"student_options\['positional'\] must be True or False"),
    (5, "student_options must be a dict"),
    ({"d": 3}, "cannot set"),
    ({"widht": 3}, "unknown key"),
])
def test_student_option_values_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        check_student_options(options, "kernel", STUDENTS["kernel"])


def test_the_estimator_refuses_a_fractional_hidden_size():
    X = np.random.default_rng(0).normal(size=(16, 3, 2))
    with pytest.raises(ValueError, match="hidden"):
        AttentionRankEstimator(attention="kernel", rank_grid=[1], max_epochs=1,
                               student_options={"hidden": 2.5}).fit(X, X.sum(-1))


def test_fit_seeds_checks_n_jobs():
    with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
        fit_seeds(AttentionRankEstimator(), np.zeros((4, 2, 2)), np.zeros(4), n_jobs="x")


def test_warnings_of_worker_processes_reach_the_caller():
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 2
    with pytest.warns(ConvergenceWarning):
        fit_seeds(LogisticRegression(max_iter=1, solver="saga"), X, y, seeds=[0, 1],
                  n_jobs=2, threads_per_job=1)


# -- tracebacks: data files ---------------------------------------------------------


@pytest.fixture
def task(tmp_path):
    np.savez(tmp_path / "task.npz", X=np.zeros((4, 3, 2)), Y=np.zeros((4, 3, 2)))
    return tmp_path


def _one_line(error):
    text = str(error.value)
    assert "\n" not in text and len(text) < 400, text
    return text


def test_a_truncated_archive_is_one_line(task):
    data = (task / "task.npz").read_bytes()
    (task / "short.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="--data") as error:
        load_xy(task / "short.npz")
    _one_line(error)


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
    _one_line(error)


@pytest.mark.parametrize("array, word", [
    (np.zeros((4, 3, 2), dtype=[("a", "f8")]), "structured"),
    (np.zeros((4, 3, 2), dtype="datetime64[D]"), "datetime"),
    (np.zeros((4, 3, 2), dtype=complex), "complex"),
])
def test_unsupported_dtypes_in_a_file_are_one_line(tmp_path, array, word):
    np.savez(tmp_path / "odd.npz", X=array, Y=np.zeros(4))
    with pytest.raises(ValueError, match=f"holds a {word} array") as error:
        load_xy(tmp_path / "odd.npz")
    _one_line(error)


def test_a_text_file_as_data_is_named_as_such(tmp_path):
    (tmp_path / "x.npz").write_text("rank,risk\n1,0.5\n")
    with pytest.raises(ValueError, match="a text file") as error:
        load_xy(tmp_path / "x.npz")
    assert "allow_pickle" not in _one_line(error)


def test_allocations_beyond_memory_are_refused_without_allocating():
    with pytest.raises(ValueError, match=r"--d: the task needs .* more than this machine"):
        check_allocation(80 * 2**30, "--d", "the task", limit=16 * 2**30)
    assert check_allocation(2**20, "--d", "the task", limit=16 * 2**30) == 2**20


# -- tracebacks: extreme scales -----------------------------------------------------


def test_kernels_in_user_units_do_not_overflow_float32():
    kernels = np.ones((2, 3, 3), dtype=np.float32)
    factor = 2.0**132  # x_scale**2 for X * 1e-20
    assert np.isfinite(in_user_units(kernels, factor)).all()
    assert in_user_units(kernels, 1.0) is kernels  # unit scale: unchanged
    check_units(factor, "X")
    with pytest.raises(ValueError, match="X is too far from unit size"):
        check_units(2.0**1000, "X")


def test_tiny_inputs_train_to_finite_kernels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3, 2))
    est = AttentionRankEstimator(attention="linear", rank_grid=[1], max_epochs=2)
    # two epochs on a one-rank grid cannot reach the floor: the estimate says so
    with pytest.warns(UserWarning) as caught:
        est.fit(X * 1e-20, X.sum(-1))
    assert any("not supported by the data" in str(w.message) for w in caught)
    assert np.isfinite(est.kernel_).all()


@pytest.mark.parametrize("text", ["1e200", "nan", "inf", "-1", "1e400"])
def test_bounded_floats_refuse_what_overflows(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number in"):
        bounded_float(0.0, 1e6)(text)


def test_token_ids_beyond_int64_are_one_line():
    with pytest.raises(ValueError, match="token id 1180591620717411303424, outside"):
        check_token_ids([[1, 2**70]], 64)
    with pytest.raises(ValueError, match="token id 1e\\+30"):
        check_token_ids(np.array([[1.0, 1e30]]), 64)
    assert check_token_ids(np.array([[1, 2]], dtype=np.uint8), 64).dtype == np.int64


# -- tracebacks: a cache FIFO, text files --------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    assert read_json(tmp_path / "result.json") is None  # returns, instead of blocking


def test_a_long_line_is_refused_before_tokenising(tmp_path):
    (tmp_path / "texts.txt").write_text("short\n" + "word " * 30_000 + "\n")
    with pytest.raises(ValueError, match="--texts: line 2 of .* has 150000 characters"):
        read_text_lines(tmp_path / "texts.txt", "--texts")


def test_a_binary_text_file_names_the_file(tmp_path):
    (tmp_path / "texts.bin").write_bytes(b"\xff\xfe\x00\x01binary")
    with pytest.raises(ValueError, match="--texts: .*texts.bin' is a binary file"):
        read_text_lines(tmp_path / "texts.bin", "--texts")
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="--texts: .*latin.txt' is not UTF-8 text"):
        read_text_lines(tmp_path / "latin.txt", "--texts")


def test_an_oversized_text_file_is_refused_by_its_size(tmp_path):
    (tmp_path / "big.txt").write_text("a\n" * 1000)
    with pytest.raises(ValueError, match="at most"):
        read_text_lines(tmp_path / "big.txt", "--texts", max_bytes=100)


# -- smaller: messages never print an array ------------------------------------------


@pytest.mark.parametrize("X", [np.arange(5000.0), np.zeros((50, 30), dtype=complex)])
def test_errors_about_x_are_one_short_line(X):
    with pytest.raises(ValueError) as error:
        AttentionRankEstimator(max_epochs=1).fit(X, np.zeros(len(X)))
    _one_line(error)


def test_check_dtype_reads_only_the_dtype():
    check_dtype([[1, 2]], "X")  # lists go on to scikit-learn's conversion
    assert describe_value(np.zeros(10**6)) == "an array of shape (1000000,) and dtype float64"


def test_check_distinct_names_the_option():
    with pytest.raises(ValueError, match="--bits: 2 is given twice"):
        check_distinct([2, 3, 2], "--bits")


def test_no_warning_escapes_a_plain_model_round_trip(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save_model_file(_fitted(), tmp_path / "m.joblib")
        load_model_file(tmp_path / "m.joblib")
