"""SequenceScaler: per-feature standardisation of sequences, and r* unchanged by scaling.

The statistics are checked against scikit-learn's StandardScaler on the tokens laid out
as rows ``(n * L, d)``; scikit-learn's common checks are in test_sklearn_common_checks.py.
"""

import numpy as np
import pytest
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import intrinsic_rank
from intrinsic_rank import AttentionRankEstimator, SequenceScaler
from intrinsic_rank.datasets import attention_mixer, make_attention_task


def _sequences(n=50, L=7, d=4, seed=0):
    rng = np.random.default_rng(seed)
    # features of very different sizes and offsets
    return rng.normal(size=(n, L, d)) * [1e-3, 1.0, 30.0, 1e4] + [5.0, -2.0, 0.0, 1e5]


def test_top_level_name_is_the_estimators_one():
    from intrinsic_rank import estimators

    assert intrinsic_rank.SequenceScaler is estimators.SequenceScaler is SequenceScaler


def test_standardises_each_feature_over_all_sequences_and_positions():
    X = _sequences()
    scaler = SequenceScaler(with_mean=True).fit(X)
    Z = scaler.transform(X)
    assert Z.shape == X.shape and Z.dtype == np.float64
    flat = Z.reshape(-1, 4)
    # 5 +- 0.001 centred: rounding of 5 * eps / 0.001 ~ 1e-12 is all that is left
    np.testing.assert_allclose(flat.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(flat.std(axis=0), 1.0, rtol=1e-12)
    # the same statistics as StandardScaler on the tokens as rows
    reference = StandardScaler().fit(X.reshape(-1, 4))
    np.testing.assert_allclose(scaler.mean_, reference.mean_, rtol=1e-13)
    np.testing.assert_allclose(scaler.var_, reference.var_, rtol=1e-12)
    np.testing.assert_allclose(scaler.scale_, reference.scale_, rtol=1e-12)
    np.testing.assert_allclose(Z, reference.transform(X.reshape(-1, 4)).reshape(X.shape),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scaler.inverse_transform(Z), X, rtol=1e-12, atol=1e-9)
    assert (scaler.n_samples_seen_, scaler.seq_len_, scaler.token_dim_,
            scaler.n_features_in_) == (50, 7, 4, 4)


def test_the_statistics_are_per_feature_not_per_position():
    # position p of every sequence is offset by 10 p: a per-position scaler would remove it
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 5, 2)) + 10.0 * np.arange(5)[None, :, None]
    scaler = SequenceScaler(with_mean=True)
    Z = scaler.fit_transform(X)
    means = Z.mean(axis=0)  # (L, d): the positions keep their order and spacing, in units
    # of the feature's spread over all positions, sqrt(1 + 200) for offsets 0, 10, ..., 40
    assert scaler.scale_ == pytest.approx([np.sqrt(201)] * 2, rel=0.05)
    np.testing.assert_allclose(np.diff(means, axis=0), np.broadcast_to(10 / scaler.scale_,
                                                                       (4, 2)), atol=0.02)


def test_the_default_scales_without_centring():
    X = _sequences()
    scaler = SequenceScaler().fit(X)
    assert scaler.mean_ is None
    np.testing.assert_allclose(scaler.transform(X), X / X.reshape(-1, 4).std(axis=0),
                               rtol=1e-12)


@pytest.mark.parametrize("with_mean, with_std", [(False, True), (True, False), (False, False)])
def test_with_mean_and_with_std(with_mean, with_std):
    X = _sequences()
    scaler = SequenceScaler(with_mean=with_mean, with_std=with_std).fit(X)
    Z = scaler.transform(X)
    reference = StandardScaler(with_mean=with_mean, with_std=with_std).fit(X.reshape(-1, 4))
    np.testing.assert_allclose(Z.reshape(-1, 4), reference.transform(X.reshape(-1, 4)),
                               rtol=1e-12, atol=1e-12)
    assert (scaler.mean_ is None) is (not with_mean)
    assert (scaler.scale_ is None) is (not with_std) and (scaler.var_ is None) is (not with_std)
    np.testing.assert_allclose(scaler.inverse_transform(Z), X, rtol=1e-12, atol=1e-9)


def test_two_dimensional_input_is_one_scalar_feature():
    rng = np.random.default_rng(2)
    X = rng.normal(3.0, 2.0, size=(40, 6))
    scaler = SequenceScaler(with_mean=True).fit(X)
    Z = scaler.transform(X)
    assert Z.shape == (40, 6) and scaler.n_features_in_ == 6 and scaler.token_dim_ == 1
    # one mean and one scale for every column (d = 1), as the estimators read (n, L)
    assert scaler.mean_ == pytest.approx([X.mean()]) and scaler.scale_ == pytest.approx([X.std()])
    np.testing.assert_allclose(Z, (X - X.mean()) / X.std(), rtol=1e-12, atol=1e-12)
    assert list(scaler.get_feature_names_out()) == [f"x{i}" for i in range(6)]


def test_feature_names_of_a_frame_and_of_sequences():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.arange(12.0).reshape(4, 3), columns=["t0", "t1", "t2"])
    scaler = SequenceScaler().fit(frame)
    assert list(scaler.get_feature_names_out()) == ["t0", "t1", "t2"]
    # a 3-D fit names its d token features and forgets a frame's column names
    scaler.fit(_sequences())
    assert not hasattr(scaler, "feature_names_in_")
    assert list(scaler.get_feature_names_out()) == ["x0", "x1", "x2", "x3"]


def test_sequences_of_another_length_are_transformed():
    X = _sequences(L=7)
    scaler = SequenceScaler().fit(X)
    longer = _sequences(n=3, L=12, seed=5)
    np.testing.assert_allclose(scaler.transform(longer), longer / scaler.scale_, rtol=1e-12)


def test_a_constant_feature_is_centred_and_left_unscaled():
    X = _sequences()
    X[:, :, 1] = 7.0
    scaler = SequenceScaler(with_mean=True).fit(X)
    assert scaler.scale_[1] == 1.0 and scaler.var_[1] == pytest.approx(0.0, abs=1e-20)
    Z = scaler.transform(X)
    assert np.all(Z[:, :, 1] == 0.0) and np.all(np.isfinite(Z))


def test_float32_stays_float32_and_copy_false_scales_in_place():
    X = _sequences().astype(np.float32)
    scaler = SequenceScaler().fit(X)
    assert scaler.transform(X).dtype == np.float32 and scaler.scale_.dtype == np.float64
    Y = _sequences()
    original = Y.copy()
    out = SequenceScaler(copy=False).fit(Y).transform(Y)
    assert out.base is Y or out is Y
    assert not np.allclose(Y, original)
    unchanged = _sequences()
    SequenceScaler().fit(unchanged).transform(unchanged)
    np.testing.assert_array_equal(unchanged, original)


@pytest.mark.parametrize("X, match", [
    (np.ones(5), "2-D \\(n, L\\) or 3-D \\(n, L, d\\); got an array with 1 dimension. Reshape"),
    (np.ones((2, 3, 4, 5)), "got an array with 4 dimensions"),
    (np.full((3, 4, 2), np.nan), "Input X contains NaN"),
    (np.zeros((3, 4), dtype="datetime64[D]"), "X must hold real numbers; got a datetime"),
])
def test_bad_input_is_one_clear_error(X, match):
    with pytest.raises(ValueError, match=match):
        SequenceScaler().fit(X)


def test_transform_refuses_what_fit_did_not_see():
    scaler = SequenceScaler().fit(_sequences(d=4))
    with pytest.raises(ValueError, match="tokens of dimension 3, but SequenceScaler was "
                                         "fitted on dimension 4"):
        scaler.transform(np.ones((2, 7, 3)))
    with pytest.raises(ValueError, match="X has 2 dimensions, but SequenceScaler was fitted "
                                         "on 3-D input"):
        scaler.transform(np.ones((2, 4)))
    with pytest.raises(ValueError, match="The 'with_mean' parameter of SequenceScaler must be "
                                         "an instance of 'bool' or an instance of "
                                         "'numpy.bool'. Got 'yes' instead"):
        SequenceScaler(with_mean="yes").fit(_sequences())


# -- r* does not change under per-feature scaling ------------------------------------------

_UNITS = np.geomspace(1e-3, 1e3, 6)  # each feature in its own unit, six decades apart


@pytest.fixture(scope="module")
def rank_two_task():
    return make_attention_task("linear", n_samples=400, seq_len=8, d=6, rank=2, noise=0.05,
                               random_state=0)


def _sweep():
    return AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], random_state=0)


def test_scaling_each_feature_does_not_change_the_rank_the_pipeline_finds(rank_two_task):
    X, Y = rank_two_task
    plain = _sweep().fit(X, Y)
    assert plain.rank_ == 2
    pipe = Pipeline([("scale", SequenceScaler()), ("rank", _sweep())]).fit(X * _UNITS, Y)
    assert pipe["rank"].rank_ == plain.rank_
    assert pipe["rank"].heldout_r2_ > 0.99
    # the scaler undid the units: its scales are the units times the features' spread (~1)
    np.testing.assert_allclose(pipe["scale"].scale_ / _UNITS, 1.0, atol=0.1)


def test_the_pipeline_cross_validates_on_sequences(rank_two_task):
    X, Y = rank_two_task
    pipe = Pipeline([("scale", SequenceScaler()),
                     ("rank", AttentionRankEstimator(attention="linear", rank=2,
                                                     random_state=0))])
    scores = cross_val_score(pipe, X * _UNITS, Y, cv=KFold(3))
    assert scores.shape == (3,) and scores.min() > 0.99


@pytest.fixture(scope="module")
def offset_task():
    """A rank-2 linear teacher on features whose zero is not their mean (all means 2)."""
    X, _, info = make_attention_task("linear", n_samples=400, seq_len=8, d=6, rank=2,
                                     noise=0.05, random_state=0, return_info=True)
    X = X + 2.0
    signal = attention_mixer(X, info.kernel, "linear") @ X @ info.value_map
    signal /= np.sqrt(np.mean(signal ** 2))
    return X, signal + 0.05 * np.random.default_rng(1).standard_normal(signal.shape)


def test_scaling_keeps_and_centring_breaks_a_task_whose_features_are_not_centred(offset_task):
    X, Y = offset_task
    direct = _sweep().fit(X, Y)
    scaled = Pipeline([("scale", SequenceScaler()), ("rank", _sweep())]).fit(X * _UNITS, Y)
    assert scaled["rank"].rank_ == direct.rank_
    assert scaled["rank"].heldout_r2_ == pytest.approx(direct.heldout_r2_, abs=0.01)
    # centring shifts the scores x_i K x_j by key and output terms that the bias-free
    # students cannot represent: the fit falls apart, which is why it is not the default
    centred = Pipeline([("scale", SequenceScaler(with_mean=True)), ("rank", _sweep())])
    with pytest.warns(UserWarning):
        centred.fit(X * _UNITS, Y)
    assert direct.heldout_r2_ > 0.9 and centred["rank"].heldout_r2_ < 0.5


@pytest.mark.parametrize("shape", [(3, 4, 0), (3, 0, 2), (1, 0, 0)])
def test_no_token_feature_to_standardise_is_refused_not_nan(shape):
    with pytest.raises(ValueError, match=r"^X of shape \(.*\) holds no token feature to "
                                         r"standardise: .* L >= 1 and .* d >= 1$"):
        SequenceScaler().fit(np.zeros(shape))
    # a fitted scaler transforms sequences of length 0: nothing to compute
    scaler = SequenceScaler().fit(_sequences())
    assert scaler.transform(np.zeros((2, 0, 4))).shape == (2, 0, 4)


def test_a_table_output_for_sequences_is_one_line():
    pytest.importorskip("pandas")
    import sklearn

    table = SequenceScaler().set_output(transform="pandas")
    message = r"^the transform output is set to 'pandas' .* 3-D sequences \(n, L, d\)"
    for call in (table.fit, table.fit_transform):
        with pytest.raises(ValueError, match=message):
            call(_sequences())
    fitted = SequenceScaler().fit(_sequences())
    with pytest.raises(ValueError, match=message):  # set after fit: refused at transform
        fitted.set_output(transform="pandas").transform(_sequences())
    with sklearn.config_context(transform_output="pandas"), pytest.raises(ValueError,
                                                                         match=message):
        SequenceScaler().fit(_sequences())
    # 2-D scalar tokens are a table: pandas output works
    frame = table.fit_transform(_sequences()[:, :, 0])
    assert type(frame).__name__ == "DataFrame" and frame.shape == (_sequences().shape[:2])
