"""The estimators' input checks: arrays, shapes, dtypes and the held-out part, each refused
in one line that names ``X`` or ``Y``.
"""

import warnings

import numpy as np
import pytest

from intrinsic_rank import AttentionRankEstimator, EnergyEffectiveRank
from intrinsic_rank._validation import describe_value
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators._inputs import MIN_HELDOUT_SEQUENCES, check_dtype, heldout_size


def _one_line_error(error):
    text = str(error.value)
    assert "\n" not in text and len(text) < 400, text
    return text


X_SHORT, Y_SHORT = make_attention_task("linear", n_samples=96, seq_len=3, d=4, rank=2, random_state=0)


SHORT_FIT = dict(attention="linear", max_epochs=3, random_state=0)


def _quiet(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, Y)


def _one_line_stderr(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


X_TASK, Y_TASK = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                random_state=0)


QUICK_FIT = dict(attention="linear", max_epochs=4, random_state=0)


def _quiet_fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args)


X_FEW, Y_FEW = make_attention_task("linear", n_samples=60, seq_len=4, d=5, rank=2, random_state=0)


FEW_EPOCHS = dict(max_epochs=2, random_state=0)


def _fit_few(X_, Y_, **params):
    return AttentionRankEstimator(**{**FEW_EPOCHS, **params}).fit(X_, Y_)


@pytest.mark.parametrize("dtype, word", [("datetime64[D]", "datetime"),
                                         ("timedelta64[s]", "timedelta"),
                                         ([("a", "f8"), ("b", "f8")], "structured")])
def test_dates_and_records_are_not_data(dtype, word):
    X = np.zeros((8, 3, 2), dtype=dtype)
    with pytest.raises(ValueError, match=f"X must hold real numbers; got a {word}"):
        AttentionRankEstimator(max_epochs=1).fit(X, np.zeros(8))


@pytest.mark.parametrize("X", [np.arange(5000.0), np.zeros((50, 30), dtype=complex)])
def test_errors_about_x_are_one_short_line(X):
    with pytest.raises(ValueError) as error:
        AttentionRankEstimator(max_epochs=1).fit(X, np.zeros(len(X)))
    _one_line_error(error)


def test_check_dtype_reads_only_the_dtype():
    check_dtype([[1, 2]], "X")  # lists go on to scikit-learn's conversion
    assert describe_value(np.zeros(10**6)) == "an array of shape (1000000,) and dtype float64"


def test_one_held_out_sequence_is_refused_with_the_minimum():
    assert MIN_HELDOUT_SEQUENCES == 2
    assert heldout_size(8, 0.2) == 2
    for n in range(1, 8):  # round(0.2 n) < 2: one held-out sequence has no variance
        with pytest.raises(ValueError, match="at least 2 held-out sequences.*n_samples >= 8"):
            heldout_size(n, 0.2)
    with pytest.raises(ValueError, match="at least 2 sequences; got n_samples = 1"):
        heldout_size(1, 0.0)
    assert heldout_size(2, 0.0) == 2
    with pytest.raises(ValueError, match="at least 2 held-out"):  # the estimator says so too
        AttentionRankEstimator(**SHORT_FIT, rank_grid=[1, 2]).fit(X_SHORT[:5], Y_SHORT[:5])
    est = _quiet(AttentionRankEstimator(**SHORT_FIT, rank_grid=[1, 2]), X_SHORT[:8], Y_SHORT[:8])
    assert est.excess_tol_ > 0 and np.isfinite(est.heldout_r2_)


def test_a_0d_target_is_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"Y must be \(n,\), \(n, k\) or \(n, L, d_out\).*"
                                         "single number"):
        AttentionRankEstimator(**SHORT_FIT).fit(X_SHORT, np.array(3.0))
    np.savez(tmp_path / "d.npz", X=X_SHORT, Y=np.array(3.0))
    assert main(["sweep", "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "o"),
                 "--quiet", "--epochs", "1"]) == 2
    assert "single number" in _one_line_stderr(capsys)


@pytest.mark.parametrize("layout", ["reversed", "fortran", "strided view"])
def test_non_contiguous_input_works_and_gives_the_contiguous_answer(layout):
    if layout == "reversed":
        X_, Y_ = X_TASK[:, ::-1], Y_TASK[:, ::-1]
    elif layout == "fortran":
        X_, Y_ = np.asfortranarray(X_TASK), np.asfortranarray(Y_TASK)
    else:
        X_, Y_ = np.repeat(X_TASK, 2, axis=0)[::2], np.repeat(Y_TASK, 2, axis=0)[::2]
    X_c, Y_c = np.ascontiguousarray(X_), np.ascontiguousarray(Y_)
    est = _quiet_fit(AttentionRankEstimator(**QUICK_FIT), X_, Y_)
    ref = _quiet_fit(AttentionRankEstimator(**QUICK_FIT), X_c, Y_c)
    np.testing.assert_array_equal(est.predict(X_), ref.predict(X_c))
    rec = _quiet_fit(EnergyEffectiveRank(student=AttentionRankEstimator(**QUICK_FIT)), X_, Y_)
    assert rec.energy_effective_rank_ == _quiet_fit(
        EnergyEffectiveRank(student=AttentionRankEstimator(**QUICK_FIT)), X_c, Y_c).energy_effective_rank_
    data = EnergyEffectiveRank(method="data").fit(X_, Y_)
    assert data.rank_ == 2


def test_pandas_input_to_energy_rank_raises_no_feature_name_warning():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X_TASK[:, :, 0], columns=list("abcd"))
    est = EnergyEffectiveRank(student=AttentionRankEstimator(**QUICK_FIT))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(df, Y_TASK[:, -1, 0])
        est.predict(df)
    assert list(est.student_.feature_names_in_) == list("abcd")


def test_score_with_wrongly_shaped_targets_names_y():
    est = _quiet_fit(AttentionRankEstimator(**QUICK_FIT), X_TASK, Y_TASK)
    for bad in (Y_TASK[:, :2], Y_TASK[:10], Y_TASK[:, -1, 0]):
        with pytest.raises(ValueError, match=r"y has shape .* but predict\(X\) gives \(256, 4, 5\)"):
            est.score(X_TASK, bad)
    assert est.score(X_TASK, Y_TASK) == pytest.approx(est.score(X_TASK, Y_TASK.copy()))


@pytest.mark.parametrize(
    "X_, Y_, match",
    [
        (X_FEW[0, 0], Y_FEW, r"X must be 2-D .* got an array of shape \(5,\)\. Reshape your data"),  # 1-D X, not printed
        (X_FEW[..., None], Y_FEW, "X must be 2-D .* or 3-D .*; got an array with 4 dimensions"),
        (X_FEW, Y_FEW[:50], "different numbers of samples: 60 and 50"),
        (X_FEW, Y_FEW[:, :3], "different sequence lengths: 4 and 3"),
        (np.where(np.arange(X_FEW.size).reshape(X_FEW.shape) == 7, np.nan, X_FEW), Y_FEW, "X contains NaN"),
        (X_FEW, np.where(np.arange(Y_FEW.size).reshape(Y_FEW.shape) == 3, np.inf, Y_FEW), "Y contains infinity"),
        (X_FEW[:0], Y_FEW[:0], "minimum of 1 is required|empty"),
        (X_FEW, None, "requires y to be passed"),
        (np.full(X_FEW.shape, "a", dtype=object), Y_FEW, "could not convert"),
    ],
)
def test_bad_arrays(X_, Y_, match):
    with pytest.raises(ValueError, match=match):
        _fit_few(X_, Y_)


def test_sweep_needs_a_held_out_part():
    with pytest.raises(ValueError, match="at least 2 held-out sequences"):
        _fit_few(X_FEW[:1], Y_FEW[:1], rank_grid=[1, 2])


def test_predict_checks_shapes_against_fit():
    est = _fit_few(X_FEW, Y_FEW, rank=2)
    with pytest.raises(ValueError, match="sequences of length 3, but .* fitted on length 4"):
        est.predict(X_FEW[:, :3])
    with pytest.raises(ValueError, match="tokens of dimension 4, but .* fitted on dimension 5"):
        est.predict(X_FEW[:, :, :4])
    with pytest.raises(ValueError, match="X contains NaN"):
        est.predict(np.full_like(X_FEW, np.nan))
