"""Theory / experiment ratios on the reachability authors' published constants.

``tests/data/authors_models.csv`` holds the constants of the authors' ``models_list.csv``
and the cell decay of their bounds notebook (its header names the source). The tests
recompute the ratios that docs/reachability_bounds.md quotes (``scripts/authors_ratio_table.py``
prints them), check our bound functions against the authors' formulas written out here
from reading their notebook, and check the ``reach`` ratio verdict against the same
constants (at their convention, on a pretrained model only).
"""

import csv
import math
from pathlib import Path

import pytest
from scipy.special import beta, betainc, gammaln

from intrinsic_rank import bounds
from intrinsic_rank.experiments import EXPERIMENTS
from intrinsic_rank.experiments.reachability import _reach

CSV_PATH = Path(__file__).resolve().parents[2] / "data" / "authors_models.csv"


def _read_models():
    with open(CSV_PATH, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [dict(model=r["model"], d=int(r["width"]), v=int(r["vocab_size"]),
                 r=float(r["r_inf"]), min_cos=float(r["min_cosine"]), slope=float(r["slope"]),
                 c=float(r["cell_decay"]) if r["cell_decay"] else None,
                 seven=r["paper_range"] == "1") for r in rows]


MODELS = _read_models()
SEVEN = [m for m in MODELS if m["seven"]]
BY_NAME = {m["model"]: m for m in MODELS}


# The authors' formulas (th_bounds_estimation.ipynb), written out independently, in
# float64 as they evaluate them.

def _their_epsilon(r_inf):
    return 2 ** (math.log(r_inf) / math.log(2) - 11)


def _their_ball_slope(r, d, v, eps):
    return d * math.log(1 + 2 * r / eps) / math.log(v)


def _their_log_frac_cone(min_cos, d):
    """Cone plus cap at half-angle arccos(c)/2, as a log-sum-exp of the two terms."""
    half = math.acos(min(max(min_cos, -1 + 1e-8), 1 - 1e-8)) / 2
    norm = gammaln(d / 2 + 1) - gammaln(1.5) - gammaln((d + 1) / 2)
    cone = (math.log(2) - math.log(d) + (d - 1) * math.log(math.sin(half))
            + math.log(math.cos(half)))
    rest = 1 - betainc(0.5, (d + 1) / 2, math.cos(half) ** 2)
    cap = math.log(beta(0.5, (d + 1) / 2)) + math.log(rest) if rest > 0 else -math.inf
    top = max(cone, cap)
    return float(norm + top + math.log(math.exp(cone - top) + math.exp(cap - top)))


def _their_cell_slope(box_slope, v, c):
    return box_slope * math.log(v) / c


def _ratio(m, convention, bound="ball"):
    eps = bounds.precision_for(convention, dtype="float16", radius_inf=m["r"])
    if bound == "ball":
        slope = bounds.reachable_slope_bound(m["d"], m["v"], m["r"], eps)
    elif bound == "ball + cells":
        slope = bounds.cell_slope_bound(
            bounds.reachable_slope_bound(m["d"], m["v"], m["r"], eps), m["v"], m["c"])
    else:  # "cone enclosing" / "cone authors"
        theta = bounds.cone_half_angle(m["min_cos"], convention=bound.split()[1])
        slope = bounds.cone_slope_bound(m["d"], m["v"], m["r"], eps, theta)
    return slope / m["slope"]


def _range(convention, bound="ball"):
    ratios = sorted((_ratio(m, convention, bound), m["model"]) for m in SEVEN)
    return ratios[0], ratios[-1]


def test_the_csv_holds_the_authors_ten_models():
    assert len(MODELS) == 10 and len(SEVEN) == 7
    assert all(m["c"] is not None for m in SEVEN)
    assert BY_NAME["Qwen2-1.5B"]["r"] == 155.75 and BY_NAME["Gemma-3-270m"]["slope"] == 44.54


@pytest.mark.parametrize("convention, low, high", [
    ("relative", (5.48, "Pythia-1B"), (13.45, "Qwen2-1.5B")),
    ("paper", (7.68, "Pythia-1B"), (20.50, "Qwen2-1.5B")),
    ("machine", (7.68, "Pythia-1B"), (20.50, "Qwen2-1.5B")),  # fp16, the authors' dtype
])
def test_ball_ratio_range_over_the_seven(convention, low, high):
    (lo, lo_model), (hi, hi_model) = _range(convention)
    assert (round(lo, 2), lo_model) == low
    assert (round(hi, 2), hi_model) == high


def test_only_a_refined_bound_reaches_the_papers_low_end():
    lowest = {(b, c): _range(c, b)[0][0]
              for b in ("ball", "cone enclosing", "cone authors")
              for c in ("paper", "relative")}
    assert min(lowest.values()) > 4.5
    assert round(lowest[("cone authors", "relative")], 2) == 5.33
    # cells on the ball (an upper bound on box + cells) go below it at r_inf / 2048 only
    assert round(_range("relative", "ball + cells")[0][0], 2) == 4.03
    assert round(_range("paper", "ball + cells")[0][0], 2) == 5.66


@pytest.mark.parametrize("m", MODELS, ids=lambda m: m["model"])
def test_ball_is_the_authors_formula(m):
    eps = _their_epsilon(m["r"])
    assert bounds.precision_for("relative", radius_inf=m["r"]) == pytest.approx(eps, rel=1e-15)
    for e in (eps, 2.0**-10):
        assert bounds.reachable_slope_bound(m["d"], m["v"], m["r"], e) == pytest.approx(
            _their_ball_slope(m["r"], m["d"], m["v"], e), rel=1e-12)


# The notebook's stored output (its last table) for the three larger Pythias, from other
# samples of hidden states than the CSV's: d, slope, theta = arccos(min cosine), and the
# ratios of the ball and of the ball with their cone term, at epsilon = r_inf / 2048.
STORED = [(2048, 261.4, 2.219370, 6.019802, 5.938543),
          (2560, 197.9, 2.159577, 9.939214, 9.787080),
          (4096, 283.55, 2.213061, 11.099110, 10.948394)]


@pytest.mark.parametrize("d, slope, theta, ball, cone", STORED)
def test_the_notebooks_stored_ratios(d, slope, theta, ball, cone):
    # at r_inf / 2048 the ball ratio does not depend on r: ln(1 + 2 * 2048)
    eps = bounds.precision_for("relative", radius_inf=1.0)
    ours = bounds.reachable_slope_bound(d, 50304, 1.0, eps) / slope
    assert ours == pytest.approx(ball, abs=5e-6)
    theirs_cone = (d * math.log(4097) + _their_log_frac_cone(math.cos(theta), d)) / (
        math.log(50304) * slope)
    assert theirs_cone == pytest.approx(cone, abs=5e-6)


def _straight_cone(theta, d):
    """ln of the straight cone's share of the d-ball (no cap), closed form."""
    return (gammaln(d / 2 + 1) - gammaln((d + 1) / 2) - 0.5 * math.log(math.pi) - math.log(d)
            + (d - 1) * math.log(math.sin(theta)) + math.log(math.cos(theta)))


def test_the_authors_float64_cone_term_loses_its_cap():
    losses = []
    for m in MODELS:
        theta = bounds.cone_half_angle(m["min_cos"], convention="authors")
        theirs = _their_log_frac_cone(m["min_cos"], m["d"])
        # in float64 their cap term rounds away: only the straight cone (times 4) is left
        assert theirs == pytest.approx(math.log(4) + _straight_cone(theta, m["d"]), abs=1e-9)
        losses.append(math.log(4) + bounds.cone_log_fraction(theta, m["d"]) - theirs)
    assert (round(min(losses), 2), round(max(losses), 2)) == (0.06, 1.04)
    assert losses[0] == min(losses)  # Pythia-160M, the narrow cone (min cosine 0.890)


def test_cone_is_the_authors_exact_sector_less_ln_4():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for m in MODELS:
        half = mpmath.acos(mpmath.mpf(m["min_cos"])) / 2
        d = mpmath.mpf(m["d"])
        norm = mpmath.loggamma(d / 2 + 1) - mpmath.loggamma(1.5) - mpmath.loggamma((d + 1) / 2)
        cone = mpmath.log(2 / d) + (d - 1) * mpmath.log(mpmath.sin(half)) + mpmath.log(
            mpmath.cos(half))
        # 1 - I_x(1/2, (d+1)/2) = I_{1-x}((d+1)/2, 1/2), with 1 - x = sin^2
        cap = mpmath.log(mpmath.beta(0.5, (d + 1) / 2)) + mpmath.log(mpmath.betainc(
            (d + 1) / 2, 0.5, 0, mpmath.sin(half) ** 2, regularized=True))
        exact = float(norm + mpmath.log(mpmath.exp(cone) + mpmath.exp(cap)))
        ours = bounds.cone_log_fraction(float(half), m["d"])
        assert ours + math.log(4) == pytest.approx(exact, abs=1e-12 * abs(exact))


@pytest.mark.parametrize("m", SEVEN, ids=lambda m: m["model"])
def test_cells_is_the_authors_formula(m):
    box = _their_ball_slope(m["r"], m["d"], m["v"], 2.0**-10)  # any box slope will do
    assert bounds.cell_slope_bound(box, m["v"], m["c"]) == pytest.approx(
        _their_cell_slope(box, m["v"], m["c"]), rel=1e-12)


def test_the_verdicts_constants_are_the_csvs():
    assert [(d, v, r, s) for _, d, v, r, s in _reach._AUTHORS_MODELS] == [
        (m["d"], m["v"], m["r"], m["slope"]) for m in SEVEN]
    for convention in ("relative", "paper"):
        (lo, _), (hi, _) = _range(convention)
        assert _reach._authors_ball_range(convention) == pytest.approx((lo, hi), rel=1e-15)


def _result(relative, paper, box=None, headline=None, model="smollm2-135m"):
    """A reach result whose bounds table holds our ball ratio at two conventions."""
    slope = 3.0
    rows = [dict(bound="ball", precision_convention="relative", ratio=relative),
            dict(bound="ball", precision_convention="paper", ratio=paper)]
    if box is not None:
        rows += [dict(bound="box", precision_convention=c, ratio=box)
                 for c in ("relative", "paper")]
    ratio = paper if headline is None else headline
    return dict(n50=[dict(n_memory=m, n50=4.0 + slope * m, bracketed=True) for m in (1, 2, 3)],
                slope=dict(slope=slope, intercept=1.5, r2=0.995, n_points=3),
                bound=dict(slope_bound=ratio * slope, box_slope_bound=ratio * slope,
                           precision=2.0**-10, ratio=ratio, box_ratio=box or ratio, width=64),
                bounds=rows, config=dict(model=model, n_targets=16))


def test_the_ratio_verdict_compares_at_the_authors_convention_only():
    judge = EXPERIMENTS["reach"].verdicts
    (lo, _), (hi, _) = _range("relative")
    (plo, _), (phi, _) = _range("paper")
    # a pretrained model inside the authors' ball range at r_inf / 2048 agrees
    v = judge(_result(relative=(lo + hi) / 2, paper=50.0))[3]
    assert v.verdict == "agrees"
    assert f"{lo:.2f}-{hi:.2f}" in v.claim and "ε = r∞/2048" in v.claim
    assert "4.5-20.4" in v.claim  # the paper's quote, named as context
    # inside the authors' range at 2^-10 only: no second convention, no second chance
    assert judge(_result(relative=hi + 1, paper=(plo + phi) / 2))[3].verdict == "does not agree"
    # a box ratio in range counts for nothing: the authors publish no box widths
    assert judge(_result(relative=39.3, paper=45.4, box=8.0))[3].verdict == "does not agree"
    # the ends are inclusive
    assert judge(_result(relative=lo, paper=50.0))[3].verdict == "agrees"
    assert judge(_result(relative=4.6, paper=7.0))[3].verdict == "does not agree"
    measured = judge(_result(relative=39.3, paper=45.4))[3].measured
    assert "ball 39.3 at ε = r∞/2048" in measured and "45.4" not in measured


def test_the_toy_model_is_not_compared_with_pretrained_models():
    judge = EXPERIMENTS["reach"].verdicts
    (lo, _), (hi, _) = _range("relative")
    for model in ("default", "runs/tiny.pt"):
        v = judge(_result(relative=(lo + hi) / 2, paper=50.0, model=model))[3]
        assert v.verdict == "not comparable" and "toy" in v.explanation


def test_the_ratio_verdict_without_a_bounds_table_reads_the_headline():
    judge = EXPERIMENTS["reach"].verdicts
    result = _result(relative=0.0, paper=0.0, headline=10.0)
    del result["bounds"]
    v = judge(result)[3]  # headline eps = 2^-10: no ratio at r_inf / 2048
    assert v.verdict == "does not agree" and "– at ε = r∞/2048" in v.measured
    result["bound"].update(radius=2.0, precision=2.0 / 2048, ratio=10.0)
    assert judge(result)[3].verdict == "agrees"
