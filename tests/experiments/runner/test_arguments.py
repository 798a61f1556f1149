"""The runner's option types: bounded numbers and rank or length grids, checked before any
work and before a grid is expanded.
"""

import argparse

import pytest

from intrinsic_rank.experiments.runner._arguments import bounded_float, bounded_int


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


def test_a_bounded_type_describes_its_range_for_the_help():
    from intrinsic_rank.experiments.runner import Option

    jobs = bounded_int(-1, 512, exclude=[0])
    assert jobs.described == "an integer in [-1, 512] other than 0"
    assert jobs("-1") == -1 and jobs("4") == 4
    with pytest.raises(argparse.ArgumentTypeError, match=r"other than 0; got 0"):
        jobs("0")
    assert bounded_float(0.0, 1000.0, low_open=True).described == "a finite number in (0, 1000]"
    assert bounded_float(0.0).described == "a finite number >= 0"
    option = Option("--n-fit", type=bounded_int(2, 65536), default=48,
                    help="training windows per corpus")
    assert option.help_text() == ("training windows per corpus (an integer in [2, 65536]; "
                                  "default: 48)")
    choice = Option("--distill", choices=["auto", "all"], default="auto", help="where")
    assert choice.help_text() == "where (one of auto, all; default: auto)"


def test_an_options_destination_is_its_settings_key_and_convert_makes_the_setting():
    from intrinsic_rank.experiments.runner import Option

    teacher = Option("--teacher", dest="teachers", default="softmax",
                     convert=lambda name: [name], help="the teacher")
    assert teacher.dest == "teachers" and teacher.setting_value("linear") == ["linear"]
    assert teacher.setting_value(None) is None  # not given, no default
    assert not Option("--quick", action="store_true", help="").setting
    assert Option("--quick", action="store_true", help="", setting=True).setting
    with pytest.raises(ValueError, match="a positional option's name is its destination"):
        Option("model", dest="other", help="x")
    parser = argparse.ArgumentParser()
    Option("--epochs", dest="max_epochs", type=bounded_int(1, 10), default=3,
           help="epochs").add_to(parser)
    assert parser.parse_args(["--epochs", "4"]).max_epochs == 4
    assert "--epochs EPOCHS" in parser.format_help()  # named as written, not by its dest
