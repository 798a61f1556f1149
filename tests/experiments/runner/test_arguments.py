"""The runner's option types: bounded numbers and rank or length grids, checked before any
work and before a grid is expanded.
"""

import argparse

import pytest

from intrinsic_rank.experiments.runner._arguments import bounded_float


@pytest.mark.parametrize("text", ["1e200", "nan", "inf", "-1", "1e400"])
def test_bounded_floats_refuse_what_overflows(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number in"):
        bounded_float(0.0, 1e6)(text)


def test_grid_types_check_before_expanding():
    import argparse

    from intrinsic_rank.experiments.runner._arguments import (
        MAX_GRID_SIZE,
        bounded_int,
        parse_lengths,
        parse_ranks,
    )

    assert parse_ranks("1-3,8") == [1, 2, 3, 8] and parse_ranks("0") == [0]
    assert len(parse_ranks(f"1-{MAX_GRID_SIZE}")) == MAX_GRID_SIZE
    for text, message in [(f"1-{MAX_GRID_SIZE + 1}", "at most 4096"),
                          ("1-4,2-4096", "4099 entries"), ("9-3", "ends below its start"),
                          ("1-2-3", "cannot read"), ("-3", "cannot read"), (",", "empty")]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse_ranks(text)
    assert parse_lengths("auto") == "auto" and parse_lengths("2,4") == [2, 4]
    with pytest.raises(argparse.ArgumentTypeError, match="integers >= 1"):
        parse_lengths("0-3")
    assert bounded_int(1, 10)("10") == 10
    with pytest.raises(argparse.ArgumentTypeError, match=r"in \[1, 10\]; got 11"):
        bounded_int(1, 10)("11")
    with pytest.raises(argparse.ArgumentTypeError, match="got 'x'"):
        bounded_int(minimum=0)("x")
