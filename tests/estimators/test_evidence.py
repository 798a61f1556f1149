"""The evidence of a rank sweep: whether the noise floor was reached, whether the grid
stopped short, and the reference risk the students must beat.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank._validation import draw_seed
from intrinsic_rank.datasets import make_attention_task
from intrinsic_rank.estimators._training_data import split_rows

X_TASK, Y_TASK = make_attention_task("linear", n_samples=256, seq_len=4, d=5, rank=2,
                                random_state=0)


QUICK_FIT = dict(attention="linear", max_epochs=4, random_state=0)


def _quiet_fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args)


def test_grid_below_r_star_is_flagged():
    # The CLI's `sweep --rank-grid 1-3 --epochs 5` on the r* = 4 softmax teacher: rank_ = 2
    # with an estimated floor of 0.77, where the teacher's floor is 0.01.
    Xs, Ys, info = make_attention_task("softmax", 2048, 8, 16, rank=4, noise=0.1,
                                       random_state=0, return_info=True)
    est = AttentionRankEstimator(attention="softmax", rank_grid=[1, 2, 3], max_epochs=5,
                                 random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"estimated noise floor [\d.]+ is not the floor"), \
            pytest.warns(UserWarning, match="the softmax students do no better than a least"):
        est.fit(Xs, Ys)  # both say the grid stopped short: the floor and the affine reference
    assert est.rank_ == 2 and not est.floor_reached_
    # the reference, from its definition: an affine least-squares map of the flattened
    # sequence, fitted on the sweep's training rows, its mean squared error on the held-out
    train, heldout = split_rows(len(Xs), est.validation_fraction, draw_seed(0))
    flat = Xs.reshape(len(Xs), -1).astype(np.float64)
    target = Ys.reshape(len(Ys), -1).astype(np.float64)
    affine = LinearRegression().fit(flat[train], target[train])
    expected = np.mean((affine.predict(flat[heldout]) - target[heldout]) ** 2)
    assert est.reference_risk_ == pytest.approx(expected, rel=1e-6)
    # what the two warnings say: the floor is above the reference, far above the teacher's
    assert est.estimated_noise_floor_ > est.reference_risk_
    assert est.noise_floor_ > 50 * info.noise_floor


def test_a_reached_floor_is_flagged_reached():
    Xl, Yl = make_attention_task("linear", n_samples=512, seq_len=4, d=6, rank=2,
                                 random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2, 3], max_epochs=100,
                                     random_state=0).fit(Xl, Yl)
    assert est.rank_ == 2 and est.floor_reached_
    assert est.reference_risk_ > est.noise_floor_


def test_top_of_the_grid_still_improving_is_not_reached():
    Xl, Yl = make_attention_task("linear", n_samples=512, seq_len=4, d=6, rank=3,
                                 random_state=0)
    est = AttentionRankEstimator(attention="linear", rank_grid=[1, 2], max_epochs=60,
                                 random_state=0)
    with pytest.warns(UserWarning, match="largest rank of the grid"):
        est.fit(Xl, Yl)
    assert not est.floor_reached_


def test_in_sample_sweep_has_no_reference():
    est = _quiet_fit(AttentionRankEstimator(**QUICK_FIT, rank_grid=[1, 2], validation_fraction=0.0),
                     X_TASK, Y_TASK)
    assert est.reference_risk_ is None


@pytest.mark.parametrize("n", [1, 2, 7])
def test_too_few_samples_for_a_sweep_does_not_contradict_itself(n):
    with pytest.raises(ValueError, match=r"at least 2 held-out sequences.*validation_fraction="
                                         rf"0.2.*n_samples >= 8; got n_samples = {n}\b"):
        AttentionRankEstimator(**QUICK_FIT, rank_grid=[1, 2]).fit(X_TASK[:n], Y_TASK[:n])
    # eight sequences are enough, as the message says: two held out
    _quiet_fit(AttentionRankEstimator(**QUICK_FIT, rank_grid=[1, 2]), X_TASK[:8], Y_TASK[:8])
