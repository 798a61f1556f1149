"""Theory / experiment ratios of the reachability bounds on the authors' published constants.

Reads ``tests/data/authors_models.csv`` (the constants of the authors' ``models_list.csv``
and the cell decay of their bounds notebook; the file's header names the source) and
prints, in Markdown, the ratio of each bound of :mod:`intrinsic_rank.bounds` to each
model's measured slope at the three precision conventions of
:func:`~intrinsic_rank.bounds.precision_for`, the range of each over the seven models of
the paper's "4.5-20.4", and the size of the cap that the authors' cone term loses to
rounding. Every number is computed here from the CSV; the only number typed in is the
paper's quoted range 4.5-20.4 ("How many different outputs can a Transformer
generate?", Meyer, Michelessa, Chaux and Tan, ICML 2026, arXiv 2605.22223, its empirical
validation), printed beside the computed ranges as context.

Usage::

    python scripts/authors_ratio_table.py [--csv PATH] [--machine-dtype float16]
"""

import argparse
import csv
import math
from pathlib import Path

from scipy.special import gammaln

from intrinsic_rank import bounds

CSV_PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "authors_models.csv"

CONVENTIONS = ("machine", "paper", "relative")

#: The paper's quoted range of theory / experiment ratios (its empirical validation).
PAPER_RANGE = (4.5, 20.4)

BOUNDS = ("ball", "cone (enclosing)", "cone (authors)", "ball + cells",
          "cone (authors) + cells")


def read_models(path=CSV_PATH):
    """The CSV's rows, numbers parsed; ``cell_decay`` None where not published."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = [line for line in f if not line.startswith("#")]
    models = []
    for row in csv.DictReader(lines):
        models.append(dict(
            model=row["model"], width=int(row["width"]), vocab_size=int(row["vocab_size"]),
            r_inf=float(row["r_inf"]), min_cosine=float(row["min_cosine"]),
            slope=float(row["slope"]),
            cell_decay=float(row["cell_decay"]) if row["cell_decay"] else None,
            paper_range=row["paper_range"] == "1"))
    return models


def epsilon(model, convention, dtype):
    return bounds.precision_for(convention, dtype=dtype, radius_inf=model["r_inf"])


def ratios(model, convention, dtype):
    """Bound / measured slope for each of :data:`BOUNDS` (NaN where ``c`` is unknown)."""
    d, v, r, s = model["width"], model["vocab_size"], model["r_inf"], model["slope"]
    eps = epsilon(model, convention, dtype)
    ball = bounds.reachable_slope_bound(d, v, r, eps)
    cones = {name: bounds.cone_slope_bound(
        d, v, r, eps, bounds.cone_half_angle(model["min_cosine"], convention=name))
        for name in bounds.CONE_CONVENTIONS}
    c = model["cell_decay"]
    cells = (lambda slope: bounds.cell_slope_bound(slope, v, c)) if c else (
        lambda slope: math.nan)
    slopes = {"ball": ball, "cone (enclosing)": cones["enclosing"],
              "cone (authors)": cones["authors"], "ball + cells": cells(ball),
              "cone (authors) + cells": cells(cones["authors"])}
    return {name: slopes[name] / s for name in BOUNDS}


def straight_cone_log_fraction(theta, d):
    """``ln`` of the straight cone's share of the ball, without its cap (closed form).

    The cone of half-angle ``theta`` cut at height ``cos theta`` from the apex has
    volume ``V_{d-1} sin^{d-1}(theta) cos(theta) / d``; over ``V_d`` this is
    ``Gamma(d/2 + 1) / (sqrt(pi) Gamma((d + 1)/2) d) sin^{d-1}(theta) cos(theta)``.
    The sector of :func:`~intrinsic_rank.bounds.cone_log_fraction` is this cone plus
    the cap beyond it.
    """
    return float(gammaln(d / 2 + 1) - gammaln((d + 1) / 2) - 0.5 * math.log(math.pi)
                 - math.log(d) + (d - 1) * math.log(math.sin(theta))
                 + math.log(math.cos(theta)))


def cell(x):
    return "–" if math.isnan(x) else f"{x:.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=CSV_PATH)
    parser.add_argument("--machine-dtype", default="float16",
                        help="dtype of the machine convention (default float16, the "
                        "authors' cramming dtype)")
    args = parser.parse_args(argv)
    models = read_models(args.csv)
    seven = [m for m in models if m["paper_range"]]
    dtype = args.machine_dtype

    print("Box: no per-coordinate widths are published, so there is no box row. "
          "Cells are applied to the ball (and the authors' cone), an upper bound on "
          "box + cells at the same ε.\n")
    for conv in CONVENTIONS:
        if conv == "machine" and all(epsilon(m, "machine", dtype) == epsilon(m, "paper", dtype)
                                     for m in models):
            print(f"machine ε ({dtype}) is 2^-10 for every model: the same numbers as the "
                  "paper convention below.\n")
            continue
        label = {"machine": f"machine ε ({dtype})", "paper": "paper ε = 2^-10",
                 "relative": "relative ε = r∞/2048"}[conv]
        print(f"**{label}**\n")
        print("| model | d | \\|V\\| | r∞ | min cos | ε | slope | " + " | ".join(BOUNDS) + " |")
        print("|---" * (7 + len(BOUNDS)) + "|")
        for m in models:
            row = ratios(m, conv, dtype)
            mark = "" if m["paper_range"] else " †"
            print(f"| {m['model']}{mark} | {m['width']} | {m['vocab_size']} | {m['r_inf']:g} | "
                  f"{m['min_cosine']:+.3f} | {epsilon(m, conv, dtype):.3g} | {m['slope']:g} | "
                  + " | ".join(cell(row[b]) for b in BOUNDS) + " |")
        print()
    print("† not among the seven models of the paper's range.\n")

    print(f"**Ranges over the seven models** (the paper quotes {PAPER_RANGE[0]}–"
          f"{PAPER_RANGE[1]})\n")
    print("| bound | " + " | ".join(CONVENTIONS) + " |")
    print("|---" * (1 + len(CONVENTIONS)) + "|")
    for b in BOUNDS:
        cells_ = []
        for conv in CONVENTIONS:
            vals = sorted((ratios(m, conv, dtype)[b], m["model"]) for m in seven)
            (lo, lo_m), (hi, hi_m) = vals[0], vals[-1]
            cells_.append(f"{lo:.2f} ({lo_m}) – {hi:.2f} ({hi_m})")
        print(f"| {b} | " + " | ".join(cells_) + " |")
    print()

    print("**The cone term at the authors' half-angle arccos(c)/2** (nats per vector)\n")
    print("| model | d | exact sector ln frac + ln 4 | straight cone only + ln 4 "
          "(the authors' float64 value) | cap lost | in slope (tokens/vector) |")
    print("|---|---|---|---|---|---|")
    for m in models:
        theta = bounds.cone_half_angle(m["min_cosine"], convention="authors")
        exact = bounds.cone_log_fraction(theta, m["width"]) + math.log(4)
        straight = straight_cone_log_fraction(theta, m["width"]) + math.log(4)
        print(f"| {m['model']} | {m['width']} | {exact:.3f} | {straight:.3f} | "
              f"{exact - straight:.3f} | {(exact - straight) / math.log(m['vocab_size']):.3f} |")


if __name__ == "__main__":
    main()
