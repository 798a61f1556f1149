"""The copy task's length cliff (the reachability paper: copying fails abruptly past a length)."""


import numpy as np
import pytest
import torch

from intrinsic_rank import cli
from intrinsic_rank.cli import main
from intrinsic_rank.datasets import make_copy_task
from intrinsic_rank.experiments import (
    EXPERIMENTS,
    copy_length_cliff,
    default_copy_lengths,
    greedy_copy,
    plot_copy_cliff,
    score_copies,
)
from intrinsic_rank.nn import TinyCausalLM


@pytest.fixture(scope="module")
def quick():
    """The quick setting (train lengths 5-20, evaluation up to 60), run once."""
    return copy_length_cliff(quick=True, random_state=0)


def _by_length(result):
    return {rec["length"]: rec for rec in result.records}


def test_quick_setting_shows_an_abrupt_cliff_past_the_training_length(quick):
    low, high = quick.config["train_lengths"]
    assert (low, high) == (5, 20) and max(quick.config["eval_lengths"]) == 60
    records = _by_length(quick)
    inside = [rec for rec in quick.records if rec["in_training_range"]]
    assert len(inside) >= 5
    for rec in inside:
        assert rec["exact_match"] >= 0.9, rec
    far = [rec for rec in quick.records if rec["length"] >= 2 * high]
    assert len(far) >= 3
    for rec in far:
        assert rec["exact_match"] <= 0.1, rec
    cliff = quick.cliff
    first_zero = min(n for n, rec in records.items() if rec["exact_match"] == 0)
    assert cliff["bracketed"] and high <= cliff["midpoint"] <= first_zero
    # abrupt: the fitted drop is narrower than one length step (a gradual
    # decline over the out-of-range lengths would give a width of several tokens)
    assert cliff["scale"] < 1.0 and cliff["sharpness"] < 0.05
    assert cliff["first_low_length"] <= high + 2
    # the training actually learned the copy (loss of random guessing is ln 28 = 3.3)
    assert quick.training["initial"] > 3.0 and quick.training["final"] < 0.05


def test_token_accuracy_stays_above_chance_beyond_the_cliff(quick):
    # exact match collapses to 0 at once while single tokens are still right
    # far above chance (1/28) just past the training range
    rec = _by_length(quick)[21]
    assert rec["exact_match"] == 0 and rec["token_accuracy"] > 2 / 28


def test_teacher_forced_scores_equal_greedy_decoding(quick):
    # score_copies claims exact equality with autoregressive greedy decoding
    # (module docstring); check it on the trained model inside, at and past
    # the training range.
    model, vocab = quick.model, quick.config["vocab_size"]
    for length, seed in ((12, 1), (20, 2), (21, 3), (26, 4)):
        _, _, info = make_copy_task(40, length, length, vocab, random_state=seed,
                                    return_info=True)
        strings = info.strings
        decoded = greedy_copy(model, strings)
        scores = score_copies(model, strings)
        exact = (decoded[:, :length] == strings).all(1)
        np.testing.assert_array_equal(scores["exact"], exact)
        np.testing.assert_array_equal(scores["exact_eos"], exact & (decoded[:, length] == 3))
        wrong = decoded[:, :length] != strings
        first_error = np.where(wrong.any(1), wrong.argmax(1), length)
        np.testing.assert_array_equal(scores["correct_prefix"], first_error)


def test_same_seed_gives_identical_records_and_another_seed_does_not():
    kwargs = dict(train_lengths=(3, 6), eval_lengths=[3, 6, 7, 12], d_model=16,
                  n_steps=40, batch_size=16, n_eval=30)
    first = copy_length_cliff(random_state=3, **kwargs)
    torch.manual_seed(123)  # the global torch generator must not matter
    again = copy_length_cliff(random_state=3, **kwargs)
    other = copy_length_cliff(random_state=4, **kwargs)
    assert first.records == again.records
    np.testing.assert_array_equal(first.losses, again.losses)
    assert not np.array_equal(first.losses, other.losses)


def test_global_torch_generator_is_left_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    copy_length_cliff(train_lengths=(2, 3), eval_lengths=[2, 5], d_model=8, n_heads=2,
                      n_steps=2, n_eval=4)
    np.testing.assert_array_equal(torch.rand(3), expected)


def test_model_context_covers_the_longest_evaluation():
    result = copy_length_cliff(train_lengths=(2, 4), eval_lengths=[2, 9], d_model=8,
                               n_heads=2, n_steps=2, n_eval=4)
    assert result.model.config["max_length"] == 2 * 9 + 2 == result.config["max_length"]
    assert [rec["in_training_range"] for rec in result.records] == [True, False]


def test_default_lengths_span_inside_edge_and_far_beyond():
    lengths = default_copy_lengths(5, 50)
    assert lengths[0] == 5 and lengths[-1] == 150
    assert {50, 51, 52, 53, 54} <= set(lengths)
    assert sum(n <= 50 for n in lengths) == 8 and lengths == sorted(set(lengths))
    assert default_copy_lengths(5, 20, eval_max=22) == [5, 7, 9, 11, 14, 16, 18, 20, 21, 22]


@pytest.mark.parametrize("kwargs, name", [
    (dict(train_lengths=(20, 5)), "train_lengths"),
    (dict(train_lengths=(0, 5)), "train_lengths"),
    (dict(train_lengths=5), "train_lengths"),
    (dict(eval_lengths=[10]), "eval_lengths"),
    (dict(eval_lengths=[0, 10]), "eval_lengths"),
    (dict(eval_lengths=[5, 10], eval_max=30), "eval_max"),
    (dict(eval_max=10), "eval_max"),
    (dict(vocab_size=5), "vocab_size"),
    (dict(d_model=30, n_heads=4), "n_heads"),
    (dict(n_steps=0), "n_steps"),
    (dict(batch_size=2.5), "batch_size"),
    (dict(lr=-1.0), "lr"),
    (dict(n_eval=0), "n_eval"),
    (dict(random_state=-1), "random_state"),
])
def test_bad_inputs_raise_value_error_naming_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        copy_length_cliff(**kwargs)


def test_scoring_rejects_non_matrix_strings():
    lm = TinyCausalLM(vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_length=10)
    with pytest.raises(ValueError, match="strings must be 2-D"):
        score_copies(lm, [4, 5, 6])
    with pytest.raises(ValueError, match="strings must be 2-D"):
        greedy_copy(lm, [4, 5, 6])


def test_plot_marks_training_range_fit_and_midpoint(quick, tmp_path):
    path = tmp_path / "copy.png"
    fig = plot_copy_cliff(quick, path)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(label.startswith("exact match") for label in labels)
    assert any(label.startswith("token accuracy") for label in labels)
    assert any(label.startswith("logistic fit") for label in labels)
    assert any("training lengths 5-20" in p.get_label() for p in ax.patches)
    assert any(t.get_text().startswith("midpoint 20.") for t in ax.texts)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_full_setting_fails_abruptly_past_length_50():
    result = copy_length_cliff(random_state=0)
    assert max(result.config["eval_lengths"]) == 150
    for rec in result.records:
        if rec["in_training_range"]:
            assert rec["exact_match"] >= 0.9, rec
        if rec["length"] >= 100:
            assert rec["exact_match"] <= 0.1, rec
    assert 50 <= result.cliff["midpoint"] <= 55 and result.cliff["scale"] < 1.0


@pytest.mark.parametrize("argv, message", [
    (["--eval-max", "5000"], "argument --eval-max: must be an integer in [1, 1023]; got 5000"),
    (["--train-max", "400"], "--train-max: a string of 1200 tokens needs a context of "
                             "2 x 1200 + 2 = 2402 positions, more than the copy model's 2048"),
    (["--train-max", "100", "--eval-max", "1023"], None),
])
def test_copy_lengths_are_bounded_by_the_context(tmp_path, capsys, argv, message):
    if message is None:  # 2 x 1023 + 2 = 2048 fits: the check passes
        copy = EXPERIMENTS["copy"]
        copy.validate(copy.settings(cli._build_parser().parse_args(["copy", *argv])))
        return
    assert main(["copy", *argv, "--out", str(tmp_path), "--quiet"]) == 2
    assert message in capsys.readouterr().err
