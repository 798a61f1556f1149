"""The reach/profile bound tables: ratios, conventions, refinements, sizes, bad input."""

import json
import math

import pytest

from intrinsic_rank import bounds
from intrinsic_rank.cli import _build_parser, main
from intrinsic_rank.experiments import EXPERIMENTS, accessibility_curves, reachability_geometry
from intrinsic_rank.experiments.runner import format_table, jsonable
from intrinsic_rank.experiments.runner._geometry_text import (
    convention_label,
    geometry_record,
    label_bound_rows,
    not_applicable,
    refinement_rows,
)

BOUNDS = ["ball", "box", "cone", "box + cells"]
CONVENTIONS = ["machine", "paper", "relative"]


@pytest.fixture(scope="module")
def curves():
    # small but bracketed for both m: a finite measured slope to divide by
    return accessibility_curves(n_memory=(1, 2), lengths=[2, 4, 6, 8, 10], n_targets=4,
                                max_steps=200, patience=100, precision="float16",
                                random_state=0)


def _row(rows, bound, convention):
    (row,) = [r for r in rows if r["bound"] == bound and r["precision_convention"] == convention]
    return row


def test_every_bound_row_names_its_convention_and_divides_by_the_measured_slope(curves):
    slope = curves.slope["slope"]
    assert math.isfinite(slope) and slope > 0
    assert [(r["bound"], r["precision_convention"]) for r in curves.bounds] == [
        (b, c) for c in CONVENTIONS for b in BOUNDS]
    r_inf = curves.bound["radius"]
    labels = {"machine": "machine ε = 2^-23", "paper": "paper fp16 ε = 2^-10",
              "relative": f"relative ε = 2^(log2 r∞ − 11) = 2^{math.log2(r_inf) - 11:.2f}"}
    for row in curves.bounds:
        assert row["convention"] == labels[row["precision_convention"]]
        assert row["ratio"] == pytest.approx(row["slope_bound"] / slope, rel=1e-12)
    assert _row(curves.bounds, "ball", "relative")["precision"] == pytest.approx(r_inf / 2048)
    # the cell bound is the box bound times ln|V| / c, c the closed-form decay
    c = curves.cells["closed_form"]
    assert c > math.log(64)  # unequal cells decay faster than ln|V|
    for convention in CONVENTIONS:
        box = _row(curves.bounds, "box", convention)["slope_bound"]
        cell = _row(curves.bounds, "box + cells", convention)["slope_bound"]
        assert cell == pytest.approx(box * math.log(64) / c, rel=1e-12)
        ball = _row(curves.bounds, "ball", convention)["slope_bound"]
        assert cell < box <= ball
        assert _row(curves.bounds, "cone", convention)["slope_bound"] <= ball


def test_the_headline_bound_is_the_table_row_of_its_convention(curves):
    b = curves.bound
    assert b["precision"] == 2.0 ** -10
    for key, name in (("slope_bound", "ball"), ("box_slope_bound", "box"),
                      ("cone_slope_bound", "cone"), ("cell_slope_bound", "box + cells")):
        assert b[key] == pytest.approx(_row(curves.bounds, name, "paper")["slope_bound"])
    assert b["cell_ratio"] == pytest.approx(b["cell_slope_bound"] / curves.slope["slope"])
    assert b["ratio"] == pytest.approx(
        bounds.reachable_slope_bound(64, 64, b["radius"], 2.0 ** -10) / curves.slope["slope"])


def test_cone_cells_and_tail_numbers(curves):
    cone, cells = curves.cone, curves.cells
    assert -1 <= cone["min_cosine"] <= 1
    assert cone["half_angle"] == pytest.approx(math.acos(cone["min_cosine"]))
    assert cone["log_fraction"] == pytest.approx(
        bounds.cone_log_fraction(cone["half_angle"], 64))
    assert cells["n_samples"] == 2**17 and cells["n_empty"] + cells["n_cells"] == 64
    assert 0 < cells["closed_form_se"] < 0.05 and 0 < cells["fitted_se"] < 0.05
    assert abs(cells["fitted"] - cells["closed_form"]) < 0.05
    assert 0 <= cells["rule_disagreement"] < 1
    assert cells["ln_vocab"] == pytest.approx(math.log(64))
    assert [t["n_memory"] for t in curves.tail] == [1, 2]
    for tail, fit in zip(curves.tail, curves.n50):
        assert tail["n50"] == fit["n50"]
        assert tail["logistic_rate"] == pytest.approx(1 / fit["scale"])
        if tail["method"] is not None:
            assert tail["method"] == "binomial" and tail["rate"] > 0


def test_the_printed_tables_and_the_json_agree(curves):
    result = jsonable(dict(curves))
    result = json.loads(json.dumps(result))  # what reach.json holds
    experiment = EXPERIMENTS["reach"]
    tables = {caption.split(";")[0].split(" (")[0]: (records, columns, *fmt)
              for caption, records, columns, *fmt in experiment.tables(result)}
    records, columns, *fmt = tables["slope bounds"]
    assert columns == ["bound", "convention", "slope_bound", "ratio"]
    text = format_table(records, columns, *fmt)
    lines = text.splitlines()
    assert len(lines) == 13 and max(len(line) for line in lines) <= 100
    paper_ball = _row(result["bounds"], "ball", "paper")
    assert any(line.startswith("ball") and "paper fp16 ε = 2^-10" in line
               and line.endswith(f"{paper_ball['ratio']:.4g}")
               for line in lines)
    refinements = {r["quantity"]: r["value"] for r in tables["the cone and the decoder cells"][0]}
    assert refinements["tokens whose estimated cell is empty"] == str(result["cells"]["n_empty"])
    assert refinements["Monte Carlo points, uniform in the box of the states"] == "131072"
    summary = "\n".join(experiment.summary(result))
    assert "refined (paper fp16 ε = 2^-10)" in summary


def test_geometry_rows_without_and_with_a_measured_slope():
    g = reachability_geometry("default", n_memory=2, n_tokens=5, n_prompts=16,
                              n_cell_samples=4096, random_state=0)
    assert all(math.isnan(r["ratio"]) for r in g.bounds)
    assert g.cells["n_samples"] == 4096
    paper = _row(g.bounds, "ball", "paper")
    assert paper["log_count_bound"] == pytest.approx(
        bounds.reachable_log_count_bound(64, 2, g.radius, 2.0 ** -10))
    assert math.isnan(_row(g.bounds, "box + cells", "paper")["log_count_bound"])
    box = _row(g.bounds, "box", "machine")["slope_bound"]
    assert _row(g.bounds, "box + cells", "machine")["slope_bound"] == pytest.approx(
        box * math.log(64) / g.cells["closed_form"])
    assert g.cell_slope_bound == pytest.approx(
        _row(g.bounds, "box + cells", "machine")["slope_bound"])
    measured = reachability_geometry("default", n_memory=2, n_tokens=5, n_prompts=16,
                                     n_cell_samples=0, measured_slope=3.0, random_state=0,
                                     precision="relative")
    assert measured.cells is None and math.isnan(measured.cell_slope_bound)
    assert measured.radius == g.radius and measured.precision == pytest.approx(g.radius / 2048)
    for row in measured.bounds:
        if row["bound"] != "box + cells":
            assert row["ratio"] == pytest.approx(row["slope_bound"] / 3.0)


def test_the_geometry_is_numbers_and_its_words_come_from_the_runner():
    g = reachability_geometry("default", n_memory=1, n_tokens=3, n_prompts=8,
                              n_cell_samples=1024, random_state=0)
    for row in g.bounds:  # names and numbers only: the label is added for printing
        assert set(row) == {"bound", "precision_convention", "precision", "log_count_bound",
                            "slope_bound", "ratio"}
    record = geometry_record(g)
    assert record["not_applicable"] == [] and record["radius"] == g.radius
    assert [r["convention"] for r in record["bounds"]][::4] == [
        "machine ε = 2^-23", "paper fp16 ε = 2^-10",
        f"relative ε = 2^(log2 r∞ − 11) = 2^{math.log2(g.radius) - 11:.2f}"]
    assert all({k: v for k, v in labelled.items() if k != "convention"} == row
               for labelled, row in zip(record["bounds"], g.bounds))
    assert list(record["bounds"][0])[:2] == ["bound", "convention"]


def test_convention_labels_follow_the_precision():
    assert convention_label("machine", 2.0 ** -52) == "machine ε = 2^-52"
    assert convention_label("paper", 2.0 ** -10) == "paper fp16 ε = 2^-10"
    # r∞ = 3: eps = 3 / 2048, log2 = log2(3) - 11 = -9.415
    assert convention_label("relative", 3 / 2048) == "relative ε = 2^(log2 r∞ − 11) = 2^-9.42"
    for eps in (float("nan"), 0.0, -1.0, None):
        assert convention_label("relative", eps) == "relative ε: –"
    (row,) = label_bound_rows([dict(bound="box", precision_convention="machine",
                                    precision=2.0 ** -23, slope_bound=5.0, ratio=2.5)])
    assert row == dict(bound="box", convention="machine ε = 2^-23",
                       precision_convention="machine", precision=2.0 ** -23, slope_bound=5.0,
                       ratio=2.5)


def test_what_does_not_apply_follows_the_kind_and_the_cells():
    encoder = not_applicable(dict(kind="encoder", cell_error=None))
    assert len(encoder) == 3 and "no next-token head" in encoder[0]
    assert not_applicable(dict(kind="causal LM", cell_error=None)) == []
    assert not_applicable(dict(kind="causal LM", cell_error="head too large")) == [
        "decoder cells (box + cells bound): head too large"]


def test_refinement_rows_print_the_cells_or_a_dash():
    cone = dict(min_cosine=0.5, cone_half_angle=math.acos(0.5), cone_log_fraction=-0.25)
    cells = dict(closed_form=4.5, closed_form_se=0.012, fitted=math.nan, fitted_se=math.nan,
                 ln_vocab=math.log(64), n_empty=2, n_samples=4096, region="ball",
                 rule_disagreement=0.0125)
    rows = {r["quantity"]: r["value"] for r in refinement_rows(cone, cells)}
    assert rows["smallest pairwise cosine of the hidden states"] == "0.500"
    assert rows["cone half-angle θ = arccos(min cosine)"] == "1.047 rad (60.0°)"
    assert rows["ln(share of the ball inside the cone), per vector"] == "-0.25 nats"
    assert rows["cell decay c, closed form −mean_t ln p_t"] == "4.5 ± 0.012 nats per token"
    assert rows["cell decay c, fitted (median of the k-fold product)"] == "–"
    assert rows["ln|V| (equal cells)"] == "4.159"
    assert rows["tokens whose estimated cell is empty"] == "2"
    assert rows["Monte Carlo points, uniform in the ball of the states"] == "4096"
    assert rows["points where argmax(W h + b) and the nearest row differ"] == "1.25%"
    unmeasured = refinement_rows(dict(min_cosine=math.nan, half_angle=None,
                                      log_fraction=None), None)
    assert [r["value"] for r in unmeasured] == ["–", "–", "– nats"] + ["–"] * 6


@pytest.mark.parametrize("call, match", [
    (lambda: accessibility_curves(precision="fp17"), "precision convention"),
    (lambda: accessibility_curves(precision=2.0), "precision must lie in"),
    (lambda: reachability_geometry(precision="halfish", n_prompts=2), "precision convention"),
    (lambda: reachability_geometry(measured_slope=-1.0, n_prompts=2), "measured_slope"),
    (lambda: reachability_geometry(n_cell_samples=-1, n_prompts=2), "n_cell_samples"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cli_bad_precision_convention_is_one_line(tmp_path, capsys):
    assert main(["reach", "--precision", "fp17", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "precision convention (machine, paper, relative); got 'fp17'" in err


def test_cli_model_without_a_head_is_one_line(tmp_path, capsys):
    from intrinsic_rank.nn import packaged_model_path

    try:
        packaged_model_path("all-MiniLM-L6-v2")
    except ImportError as error:  # pragma: no cover - the test extra installs it
        pytest.skip(str(error))
    assert main(["reach", "all-MiniLM-L6-v2", "--quick", "--out", str(tmp_path),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bidirectional encoder" in err
    assert "Traceback" not in err


def test_full_and_quick_sizes():
    settings = EXPERIMENTS["reach"].settings
    parser = _build_parser()
    full = settings(parser.parse_args(["reach"]))
    assert (full["n_memory"], full["n_targets"]) == ([1, 2, 3, 4, 5], 20)
    quick = settings(parser.parse_args(["reach", "--quick"]))
    assert (quick["n_memory"], quick["n_targets"]) == ([1, 2, 3, 4], 16)
    given = settings(parser.parse_args(["reach", "--quick", "--n-memory", "1-2", "--n-targets", "3"]))
    assert (given["n_memory"], given["n_targets"]) == ([1, 2], 3)
    assert EXPERIMENTS["reach"].full["n_memory"] == [1, 2, 3, 4, 5]
    assert EXPERIMENTS["reach"].full["n_targets"] == 20


def test_progress_prints_nothing_per_fit(capsys):
    accessibility_curves(n_memory=[1], lengths=[2, 3], n_targets=2, max_steps=20, patience=5,
                         random_state=0, progress=True)
    assert capsys.readouterr().out == ""


@pytest.mark.slow
def test_accessibility_decays_exponentially_past_n50_with_200_targets():
    """The paper's tail claim at m = 2 (docs/reachability.md: rate 1.19 +- 0.10, R^2 0.991)."""
    res = accessibility_curves(n_memory=(2,), lengths=[8, 9, 10, 11, 12, 13], n_targets=200,
                               random_state=0)
    (tail,) = res["tail"]
    assert tail["method"] == "binomial" and tail["n_points"] >= 4
    assert 0.9 < tail["rate"] < 1.5 and tail["rate_se"] < 0.2
    assert tail["r2"] > 0.95
