"""The runner's tables: one number style and one missing-value mark in cells and prose.
"""

import math

from intrinsic_rank.experiments.runner import MISSING, format_table, number_text
from intrinsic_rank.experiments.runner._tables import format_column, markdown_table


def test_format_column_keeps_one_style_and_four_significant_digits():
    assert format_column([0.35, 0.009987, 1.866e-06]) == ["3.5e-01", "9.987e-03", "1.866e-06"]
    assert format_column([0.35, 0.009987, 0.12345678]) == ["0.35", "0.009987", "0.1235"]
    assert format_column([1.0, 2.5, 1234567.0]) == ["1e+00", "2.5e+00", "1.235e+06"]
    assert format_column([None, math.nan, 0.0, math.inf]) == [MISSING, MISSING, "0", "inf"]
    assert format_column([True, 3, "text"]) == ["yes", "3", "text"]
    assert format_column([0.5, math.nan], floatfmt="{:.3f}") == ["0.500", MISSING]


def test_a_missing_value_reads_the_same_in_a_table_cell_and_in_prose():
    import numpy as np

    for value in (None, math.nan, np.float32("nan"), np.float64("nan")):
        assert number_text(value) == format_column([value])[0] == MISSING
        assert number_text(value, "{:.2f}") == MISSING
    for value, text in ((math.inf, "inf"), (-math.inf, "-inf"), (True, "yes"),
                        (np.bool_(False), "no"), (7, "7"), (np.int64(12), "12"),
                        ("r*", "r*")):
        assert number_text(value) == format_column([value])[0] == text
    assert number_text(1 / 3) == "0.333" and number_text(1 / 3, "{:.1%}") == "33.3%"
    assert number_text([1, 2]) == "[1, 2]"


def test_format_table_prints_a_dash_for_what_does_not_apply():
    records = [{"rank": 1, "risk": 0.35, "floor": math.nan, "note": "a"},
               {"rank": 2, "risk": 0.009987, "floor": None, "note": "b"},
               {"rank": 3, "risk": 1.866e-06, "floor": 0.01, "note": "c"}]
    lines = format_table(records).splitlines()
    assert lines[0].split() == ["rank", "risk", "floor", "note"]
    assert [line.split() for line in lines[1:]] == [
        ["1", "3.5e-01", MISSING, "a"], ["2", "9.987e-03", MISSING, "b"],
        ["3", "1.866e-06", "0.01", "c"]]
    assert "nan" not in format_table(records)
    # a caller's own format still works
    assert format_table([{"x": 0.5}], floatfmt="{:.3f}").splitlines()[1].strip() == "0.500"
    table = markdown_table(records, ["rank", "risk", "floor"])
    assert table.splitlines()[2] == f"| 1 | 3.5e-01 | {MISSING} |"
