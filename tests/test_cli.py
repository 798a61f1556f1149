import json

import pytest

from intrinsic_rank.cli import main
from intrinsic_rank.experiments.runner import parse_ranks


def test_sweep_command_prints_table_and_saves_plot_and_records(tmp_path, capsys):
    out = tmp_path / "run"
    status = main([
        "sweep", "--teacher", "linear", "--r-star", "2", "--d", "6", "--seq-len", "4",
        "--n-samples", "600", "--rank-grid", "1-4", "--epochs", "80", "--seed", "1",
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
    status = main(["sweep", "--d", "4", "--rank-grid", "1-6", "--out", str(tmp_path), "--quiet"])
    assert status == 2
    assert "rank 6 in rank_grid exceeds the token dimension d = 4" in capsys.readouterr().err


def test_parse_ranks():
    assert parse_ranks("1-3,8,16") == [1, 2, 3, 8, 16]
    with pytest.raises(Exception, match="cannot read rank grid"):
        parse_ranks("one")


def test_copy_command_prints_table_and_cliff_and_saves_plot_and_records(tmp_path, capsys):
    out = tmp_path / "copy"
    status = main(["copy", "--quick", "--train-max", "8", "--eval-max", "20",
                   "--steps", "300", "--seed", "1", "--out", str(out), "--quiet"])
    assert status == 0
    text = capsys.readouterr().out
    assert "Copy task:" in text and "strings of 5-8 tokens" in text
    assert "length  in_training_range  exact_match  token_accuracy" in text
    png = (out / "copy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    saved = json.loads((out / "copy.json").read_text())
    lengths = [rec["length"] for rec in saved["records"]]
    assert lengths[0] == 5 and lengths[-1] == 20 and 9 in lengths
    assert [rec["in_training_range"] for rec in saved["records"]] == [n <= 8 for n in lengths]
    assert saved["config"]["train_lengths"] == [5, 8] and saved["config"]["n_steps"] == 300
    # past twice the training length no string is copied (unseen positions)
    assert all(rec["exact_match"] == 0 for rec in saved["records"] if rec["length"] >= 16)
    assert set(saved["cliff"]) >= {"midpoint", "scale", "sharpness", "bracketed"}
    if saved["cliff"]["bracketed"]:
        assert f"falls through 1/2 at length {saved['cliff']['midpoint']:.1f}" in text


def test_copy_command_reports_bad_train_lengths(tmp_path, capsys):
    status = main(["copy", "--train-min", "30", "--train-max", "10", "--out", str(tmp_path),
                   "--quiet"])
    assert status == 2
    assert "train_lengths must have min <= max" in capsys.readouterr().err


def test_reach_command_prints_tables_and_bound_and_saves(tmp_path, capsys):
    out = tmp_path / "reach"
    status = main(["reach", "--n-memory", "1,2", "--lengths", "2-6", "--targets", "4",
                   "--epochs", "200", "--patience", "100", "--precision", "float16",
                   "--out", str(out), "--quiet"])
    assert status == 0
    text = capsys.readouterr().out
    assert "n_memory  length  accessibility  token_accuracy  mean_steps" in text
    assert "n_memory   n50" in text and "bracketed" in text
    assert "slope bound C = d ln(1 + 2r/eps) / ln|V|" in text and "eps = 0.000977" in text
    saved = json.loads((out / "reach.json").read_text())
    assert [(r["n_memory"], r["length"]) for r in saved["records"]] == [
        (m, n) for m in (1, 2) for n in range(2, 7)]
    assert saved["bound"]["precision"] == 2.0 ** -10
    assert saved["config"]["max_steps"] == 200
    assert (out / "reach.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reach_command_reports_bad_input(tmp_path, capsys):
    status = main(["reach", "--n-memory", "0", "--out", str(tmp_path), "--quiet"])
    assert status == 2
    assert "n_memory" in capsys.readouterr().err
