"""The settings of a map of r*_attn, checked once where they enter (CLI and Python alike)."""

import pytest

from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.entropic import PLANT_SHARPNESS, _head_settings, head_rank_map
from intrinsic_rank.experiments.entropic._head_settings import (
    HeadRankSettings,
    head_rank_settings,
    measure_options,
)

SMOLLM2 = dict(n_layers=30, n_heads=9, d_model=576, head_dim=64, width=64)


def test_one_object_holds_every_setting_checked():
    settings = head_rank_settings("code,random", "L1H2, L0H0", tolerances=(0.1, 0.02),
                                  plant_ranks=4, plant_noise="both", n_jobs=-1,
                                  training={"lr": 0.01})
    assert isinstance(settings, HeadRankSettings)
    assert settings.corpora == ("code", "random") and settings.heads == ((1, 2), (0, 0))
    assert settings.measure["tolerances"] == [0.02, 0.1]
    assert settings.measure["training"]["lr"] == 0.01
    assert settings.measure["training"]["batch_size"] == 8  # the declared default kept
    assert settings.plants == [(4, False), (4, True)] and settings.n_jobs == -1
    assert settings.options == dict(settings.measure, plant_tol=0.02)
    pairs, plants = settings.for_model(SMOLLM2)
    assert pairs == [(1, 2), (0, 0)] and plants == settings.plants
    import numpy as np

    assert head_rank_settings(plant_ranks=np.int64(6)).plant_ranks == (6,)


@pytest.mark.parametrize("tol", [1 / PLANT_SHARPNESS, 0.05, 0.1, 0.2])
def test_a_plant_tolerance_that_makes_every_plant_impossible_is_refused(tol):
    """A plant is sharp when its rank k-1 truncation leaves 20 x tol of its variance; a
    truncation leaves at most all of it, so tol >= 1/20 can plant nothing."""
    with pytest.raises(ValueError, match=r"makes every plant impossible: .* give a tolerance "
                                         r"below 0\.05$"):
        head_rank_settings(plant_ranks=[4], tolerances=(tol,), plant_tol=tol)
    # without plants the plant tolerance asks nothing
    assert head_rank_settings(tolerances=(tol,), plant_tol=tol).plant_tol == tol
    assert head_rank_settings(plant_ranks=[4], tolerances=(0.04,), plant_tol=0.04).plants


def test_the_plant_tolerance_is_one_of_the_tolerances_only_when_something_is_planted():
    with pytest.raises(ValueError, match=r"plant_tol \(--plant-tol\) 0.03 must be one of the "
                                         r"tolerances \(--tolerances\) 0.01, 0.02"):
        head_rank_settings(plant_ranks=[4], tolerances=(0.01, 0.02), plant_tol=0.03)
    assert head_rank_settings(tolerances=(0.01, 0.02), plant_tol=0.03).plant_tol == 0.03


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_jobs=0), r"n_jobs \(--jobs\) must be -1 \(one task per CPU\), a positive integer"),
    (dict(n_jobs=-2), "n_jobs must be an integer >= -1"),
    (dict(training={"lr": 0.0}), "lr must be a finite real number in"),
    (dict(training={"batch_size": 0}), "batch_size must be an integer >= 1"),
    (dict(training=[1]), "training must be a dict"),
    (dict(plant_ranks=[4, 4]), "plant_ranks must be distinct"),
    (dict(plant_ranks=[1]), "plant_rank must be an integer >= 2"),
    (dict(plant_noise="some"), "plant_noise must be False, True or 'both'"),
    (dict(heads=["L0H1", "l0h1"]), "distinct"),
    (dict(corpora=["poetry"]), "'poetry' is not one of"),
    (dict(length=3), "length must be an integer >= 4"),
])
def test_each_bad_setting_is_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        head_rank_settings(**kwargs)


def test_what_needs_the_model_is_checked_against_its_shape():
    settings = head_rank_settings(heads=["L30H0"])
    with pytest.raises(ValueError, match="head L30H0 is not in the model"):
        settings.for_model(SMOLLM2)
    with pytest.raises(ValueError, match=r"plant_rank must be an integer in \[2, 63\]"):
        head_rank_settings(plant_ranks=[64]).for_model(SMOLLM2)
    with pytest.raises(ValueError, match="--length, --n-fit and --n-heldout"):
        head_rank_settings(length=4096).for_model(SMOLLM2)


def test_the_command_and_the_function_share_the_one_validation(monkeypatch, tmp_path):
    """The command's check and head_rank_map run the same checks, by the same function."""
    from intrinsic_rank.experiments.entropic import _head_ranks, _real_heads

    calls = []
    real = _head_settings.head_rank_settings

    def counted(*args, **kwargs):
        calls.append(kwargs.get("plant_tol"))
        return real(*args, **kwargs)

    monkeypatch.setattr(_head_ranks, "head_rank_settings", counted)
    monkeypatch.setattr(_real_heads, "head_rank_settings", counted)
    command = EXPERIMENTS["head-ranks"]
    settings = dict(command.full, plant_ranks=[4], plant_tol=0.05, tolerances=[0.05])
    with pytest.raises(ValueError, match="makes every plant impossible") as by_command:
        command.validate(settings)
    monkeypatch.setattr(_real_heads, "load_model", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(ValueError, match="makes every plant impossible") as by_function:
        head_rank_map("smollm2-135m", plant_ranks=[4], plant_tol=0.05, tolerances=[0.05])
    assert str(by_command.value) == str(by_function.value)
    assert calls == [0.05, 0.05]  # once each, and nowhere below


def test_measure_options_are_the_ones_of_one_head():
    options = measure_options(tolerances=[0.2, 0.1], restarts=1)
    assert options["tolerances"] == [0.1, 0.2] and options["restarts"] == 1
    assert set(options) == {"tolerances", "distill", "margin", "restarts", "training",
                            "precision_draws"}
    with pytest.raises(ValueError, match="training: unknown option"):
        measure_options(training={"momentum": 0.9})
