"""Slow reproductions: run on purpose with ``python -m pytest -m slow``."""

import pathlib
import runpy

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
CASES = runpy.run_path(str(BENCH / "defaults_accuracy.py"))


@pytest.mark.slow
@pytest.mark.parametrize("kind, task, seed", CASES["CASES"], ids=lambda v: str(v))
def test_defaults_find_r_star_on_unnamed_sizes(kind, task, seed):
    est, r_star = CASES["run_case"](kind, task, seed)
    assert est.rank_ == r_star
