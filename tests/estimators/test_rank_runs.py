"""The batched runs and their restarts: what n_init="auto" reads to decide a second restart."""

from types import SimpleNamespace

import numpy as np
import pytest

from intrinsic_rank.estimators._rank_runs import (
    PROBE_FRACTION,
    evaluation_rows,
    last_epoch_losses,
    restarts_needed,
    stalled_slots,
)


def _run(*epochs, ranks=(1, 2, 3)):
    history = [{"train_loss_per_rank": list(row)} for row in epochs]
    return SimpleNamespace(history=history, module_=SimpleNamespace(ranks=ranks))


def test_a_probe_below_the_first_restart_or_a_stalled_rank_above_a_smaller_one_restarts():
    first, tolerance = [0.50, 0.40, 0.45], 0.02
    # rank 3 ends above rank 2 by 0.05: an optimisation failure once it has stalled
    assert restarts_needed([1, 2, 3], first, [np.inf] * 3, tolerance) == [2]
    assert restarts_needed([1, 2, 3], first, [np.inf] * 3, tolerance,
                           stalled=[True, True, False]) == []
    # within the tolerance of a smaller rank: no restart
    assert restarts_needed([1, 2, 3], [0.50, 0.40, 0.41], [np.inf] * 3, tolerance) == []
    # a probe a fifth as long already lower by more than the tolerance: a poorer basin
    assert restarts_needed([1, 2, 3], first, [0.60, 0.30, 0.44], tolerance) == [1, 2]
    assert restarts_needed([1, 2, 3], first, [0.60, 0.39, 0.44], tolerance,
                           stalled=[False] * 3) == []
    assert PROBE_FRACTION == 0.2


def test_stalled_slots_read_the_last_tenth_of_the_epochs():
    falling = np.linspace(1.0, 0.5, 20)  # still falling by 0.025 an epoch
    flat = np.full(20, 0.3)
    run = _run(*zip(falling, flat, falling[::-1]))
    assert stalled_slots(run, 0.02).tolist() == [False, True, True]
    # in the units of Y: training units divided by y_scale squared
    assert stalled_slots(run, 0.02, y_scale=4.0).tolist() == [True, True, True]
    assert stalled_slots(_run([1.0, 1.0, 1.0]), 0.02).tolist() == [False] * 3  # one epoch


def test_a_probe_that_ended_inside_an_epoch_reads_its_last_whole_one():
    run = _run([0.5, 0.2, 0.3], [0.4, np.nan, 0.3])
    run.history.append({"batches": [{"train_loss_per_rank": [np.inf, np.inf, np.inf]}]})
    assert last_epoch_losses(run).tolist() == [0.4, np.inf, 0.3]
    assert last_epoch_losses(run, y_scale=2.0)[0] == pytest.approx(0.1)
    empty = _run()
    empty.history.append({"batches": []})  # every spare restart diverged in epoch 1
    assert last_epoch_losses(empty).tolist() == [np.inf] * 3


def test_evaluation_batches_hold_at_most_a_mebi_outputs():
    assert evaluation_rows(13, 32, 64, 256) == 39  # 13 ranks of 32 x 64 outputs a sequence
    assert evaluation_rows(3, 8, 6, 64) == 64  # the training batch where it fits
    assert evaluation_rows(64, 512, 512, 256) == 8  # never fewer than 8 sequences
