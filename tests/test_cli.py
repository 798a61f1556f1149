import json

import pytest

from intrinsic_rank.cli import main, parse_ranks


def test_sweep_command_prints_table_and_saves_plot_and_records(tmp_path, capsys):
    out = tmp_path / "run"
    status = main([
        "sweep", "--teacher", "linear", "--r-star", "2", "--d", "6", "--seq-len", "4",
        "--n-samples", "600", "--ranks", "1-4", "--epochs", "80", "--seed", "1",
        "--out", str(out), "--quiet",
    ])
    assert status == 0
    text = capsys.readouterr().out
    assert "estimated r* = 2 (true r* = 2)" in text
    assert "heldout_risk" in text and "excess_risk" in text
    png = (out / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    saved = json.loads((out / "sweep.json").read_text())
    assert [rec["rank"] for rec in saved["records"]] == [1, 2, 3, 4]
    assert saved["rank_"] == 2 and saved["config"]["teacher"] == "linear"
    assert saved["records"][0]["excess_risk"] > 10 * saved["records"][1]["excess_risk"]


def test_sweep_command_reports_bad_input(tmp_path, capsys):
    status = main(["sweep", "--d", "4", "--ranks", "1-6", "--out", str(tmp_path), "--quiet"])
    assert status == 2
    assert "rank 6 in ranks exceeds the token dimension d = 4" in capsys.readouterr().err


def test_parse_ranks():
    assert parse_ranks("1-3,8,16") == [1, 2, 3, 8, 16]
    with pytest.raises(Exception, match="cannot read rank grid"):
        parse_ranks("one")
