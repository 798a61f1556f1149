"""Every figure the package draws has its titles and axis labels inside the canvas.

Each plot function gets a small synthetic result of the shape its experiment returns
(no training), with the long names a real run gives (SmolLM2's 30 x 9 heads, a data file,
Min-IP's settings), and is drawn as ``save_figure`` lays it out.
"""

import math

import numpy as np
import pytest
from sklearn.utils import Bunch

from intrinsic_rank import experiments
from intrinsic_rank.experiments.runner import pyplot
from intrinsic_rank.experiments.runner._figures import fit_titles, save_figure

MODEL = "smollm2-135m"


def _sweep():
    """A sweep of the user's own data (``--data``): no true r*, a file name in the title."""
    risk = [0.61, 0.12, 0.031, 0.0302, 0.0301]
    records = [dict(rank=r, heldout_risk=x, excess_risk=x - 0.03, numerical_rank=r,
                    energy_effective_rank=min(r, 3.0)) for r, x in zip(range(1, 6), risk)]
    return Bunch(records=records, rank_=3, r_star=None, noise_floor=None, noise_floor_=0.03,
                 excess_tol=0.006, attention="linear", noise_floor_given=None,
                 config=dict(data="runs/measurements/my_recorded_sequences_2026.npz",
                             attention="auto", d=12, seq_len=16, n_samples=5000,
                             random_state=0))


def _ladder():
    floor = 0.01
    records = [dict(rung=rung, rank=16, test_risk=floor * (1 + ratio), excess_risk=floor * ratio,
                    excess_to_floor_ratio=ratio)
               for rung, ratio in (("B0 fixed", 0.01), ("B1 linear", 40.0),
                                   ("B2 softmax", 30.0), ("B3 block", 20.0))]
    return Bunch(records=records, noise_floor=floor,
                 config=dict(r_star=4, d=16, seq_len=8, random_state=0))


def _frontier():
    teachers = ["linear, V known", "linear, V unknown (lifted)", "softmax, linear-QK fit"]
    records = [dict(teacher=t, r_star=r, numerical_rank=r, energy_rank=r + 0.01,
                    mixer_energy_rank=min(r, 3), recovery_energy_rank=r - 0.2,
                    recovery_numerical_rank=r)
               for t in teachers for r in range(1, 9)]
    return Bunch(records=records, config=dict(teachers=teachers, d=16, seq_len=8,
                                              n_samples=4096, noise=0.1, kernel_scale=2.0))


def _trajectory():
    steps = [0, 200, 400, 800, 1600, 3200]
    records = [dict(layer=layer, step=s, kernel_energy_rank=8 - s / 800,
                    attn_energy_rank=3 + s / 1600) for layer in range(2) for s in steps]
    summary = [dict(step=s, loss=4.0 / (1 + s / 400), kernel_energy_rank=8 - s / 800)
               for s in steps]
    return Bunch(records=records, summary=summary, config=dict(
        n_layers=2, n_heads=4, d_head=16, d_model=64, seq_len=64, vocab_size=64, n_inputs=32))


def _profile(n_layers=30, n_heads=9, measure="mul"):
    """A per-head profile of SmolLM2's shape: 270 heads, long title, scores under 0.5."""
    rng = np.random.default_rng(0)
    records = []
    for layer in range(n_layers):
        for head in range(n_heads):
            records.append(dict(
                layer=layer, head=head, d_head=64, kernel_energy_rank=rng.uniform(10, 60),
                attn_energy_rank=rng.uniform(1, 30), entropy=rng.uniform(0, 3),
                sink_mass=rng.uniform(), max_key_mass=rng.uniform(), band_mass=rng.uniform(),
                previous_token_score=rng.uniform(0, 0.9),
                duplicate_token_score=rng.uniform(0, 0.37),
                induction_score=rng.uniform(0, 0.45)))
    baselines = dict(kernel_energy_rank=64.0, attn_energy_rank=4.59, entropy=3.19,
                     sink_mass=0.075, max_key_mass=0.075, band_mass=0.134,
                     previous_token_score=0.059, duplicate_token_score=0.011,
                     induction_score=0.011, perfect_previous_token_score=0.984,
                     perfect_duplicate_token_score=0.492, perfect_induction_score=0.492)
    config = dict(model=MODEL, family="llama", causal=True, n_layers=n_layers, n_heads=n_heads,
                  d_model=576, d_head=64, n_inputs=8, inputs="repeated random tokens",
                  mean_length=63.0, band=1, score_measure=measure, exclude_bos=True,
                  exclude_current_token=True, sink_rate_threshold=0.3,
                  pattern_queries=dict(previous_token=496, duplicate_token=248, induction=248))
    return Bunch(records=records, baselines=baselines, config=config,
                 summary=dict(sink_rate=0.774))


def _corpus_ranks():
    corpora = ["random", "repeated", "prose", "code"]
    records = [dict(corpus=c, layer=layer, head=h, attn_energy_rank=1.5 + k + 0.1 * h)
               for k, c in enumerate(corpora) for layer in range(30) for h in range(9)]
    summary = [dict(corpus=c, next_token_loss=2.0 + k, uniform_attn_energy_rank=4.6)
               for k, c in enumerate(corpora)]
    return dict(records=records, summary=summary,
                separation=dict(separation=0.317, kernel_energy_rank_median=41.5,
                                friedman_p=8.2e-19, kendall_w=0.108),
                config=dict(model=MODEL, corpora=corpora, n_inputs=8, length=64, n_layers=30,
                            d_head=64))


def _head_ranks(n_layers=30, n_heads=9):
    width, tolerances = 64, [0.02, 0.05]
    records = []
    for layer in range(n_layers):
        for head in range(n_heads):
            risks = [min(2.0, 3.0 / r ** (1 + (layer + head) % 3)) for r in range(1, width)]
            answers = [next((r for r, v in enumerate(risks, 1) if v <= t), None)
                       for t in tolerances]
            records.append(dict(layer=layer, head=head, corpus="code", width=width,
                                tolerances=tolerances, r_star=answers, planted_rank=None,
                                free_risks=[*(1.5 * v for v in risks), 0.0],
                                risks=[*risks, 0.0]))
    rows = [dict(tol=t, allocation=kind, rank_share=share, loss=2.6 * (1 + rise))
            for t, share in zip(tolerances, (0.5, 0.3))
            for kind, rise in (("r*_attn", 0.005), ("training-free", 0.01),
                               ("uniform", 0.03), ("query energy", 0.02), ("half", 0.08))]
    return dict(records=records, config=dict(
        model=MODEL, corpora=["code"], tolerances=tolerances, n_layers=n_layers,
        n_heads=n_heads, width=width), impose=dict(corpus="code", unedited=2.6, rows=rows))


def _min_ip():
    ranks = [1, 2, 4, 8, 16, 32, 64]
    phase_rows = [dict(length=n, model=m, rank=r, error_mean=e, error_min=e / 2,
                       error_max=min(1.0, 2 * e))
                  for n in (3, 2) for m in ("kernel", "dense") for r in ranks
                  for e in [0.8 / r if m == "kernel" and n == 3 else 0.0]]
    phase = Bunch(summary=phase_rows, config=dict(
        lengths=[3, 2], rank_grid=ranks, threshold=0.5, n_codewords=16, n_bits=24, min_gap=1,
        n_seeds=3))
    settings = [dict(n_bits=12, pool=64), dict(n_bits=16, pool=128)]
    ood_rows = [dict(n_bits=s["n_bits"], pool=s["pool"], model="kernel", rank=r,
                     test_error_mean=0.7, test_error_min=0.6, test_error_max=0.8)
                for s in settings for r in ranks]
    ood_rows += [dict(n_bits=s["n_bits"], pool=s["pool"], model="dense", rank=None,
                      test_error_mean=0.65, test_error_min=0.6, test_error_max=0.7)
                 for s in settings]
    ood = Bunch(summary=ood_rows, config=dict(settings=settings, rank_grid=ranks,
                                              threshold=0.5, n_seeds=1))
    return phase, ood


def _min_ip_law():
    def row(task, fmap, m, r):
        return dict(task=task, feature_map=fmap, n_heads=1, m=m, r_needed=r, total_rank=r,
                    lower_bound=2.0 ** (m / 2), errors_at_full=[0.0], flagged=0,
                    unconverged=0)

    law = [row("length3", f, m, 2 ** (m - 1)) for f in ("exp", "taylor") for m in (2, 3, 4, 5)]
    law += [row("length2", "exp", m, 1) for m in (2, 3, 4, 5)]
    law += [row("dense", "dense", m, m) for m in (2, 3, 4, 5)]
    fits = [dict(task=t, feature_map=f, n_heads=1, slope=1.0, slope_se=0.1, intercept=-1.0)
            for t, f in (("length3", "exp"), ("length3", "taylor"), ("length2", "exp"),
                         ("dense", "dense"))]
    return dict(law=law, fits=fits, config=dict(n_seeds=4))


def _accessibility():
    n50 = [dict(n_memory=m, n50=4.0 * m, scale=1.0) for m in (1, 2, 3, 4, 5)]
    records = [dict(n_memory=m, length=n, accessibility=1 / (1 + math.exp(n - 4.0 * m)))
               for m in (1, 2, 3, 4, 5) for n in range(2, 26, 2)]
    bound = dict(slope_bound=283.6, box_slope_bound=274.0, cone_slope_bound=283.6,
                 cell_slope_bound=261.1, width=64, vocab_size=64, radius=6.02,
                 precision=2.0 ** -10, ratio=70.9, box_ratio=68.5, cone_ratio=70.9,
                 cell_ratio=65.3)
    return Bunch(n50=n50, records=records, slope=dict(slope=4.0, intercept=0.0, r2=0.999),
                 bound=bound, bounds=[dict(bound="ball", precision=2.0 ** -10,
                                           convention="paper fp16 ε = 2^-10")])


def _copy():
    lengths = list(range(5, 151, 5))
    records = [dict(length=n, exact_match=float(n <= 50), token_accuracy=1.0 if n <= 50 else 0.2)
               for n in lengths]
    return Bunch(records=records, losses=list(np.geomspace(4, 0.01, 500)),
                 cliff=dict(bracketed=True, midpoint=52.5, scale=1.2),
                 config=dict(train_lengths=[5, 50], vocab_size=36, d_model=64, n_layers=2,
                             n_steps=5000, n_eval=200))


def _cell_shares():
    counts = sorted(np.random.default_rng(0).integers(0, 500, 3000).tolist(), reverse=True)
    tokens = [dict(text=repr(t), share=0.1 / (k + 1), share_se=0.001)
              for k, t in enumerate([" ", " and", ",", " (", "\n", ".", " the", " of"])]
    return dict(model=MODEL, shares=dict(n_samples=int(sum(counts)), vocab_size=49152,
                                         sorted_counts=counts, n_nonempty=3000, n_half=8),
                tokens=tokens, config=dict(n_prompts=256))


def _model_rank(n_layers=30, n_heads=9, corpora=("code", "prose")):
    rng = np.random.default_rng(0)
    rows, found, maps = [], [], []
    kinds = ("output share", "uniform", "query energy", "r*_attn")
    for corpus in corpora:
        for share in (0.3, 0.4, 0.5, 0.6, 0.7):
            for k, kind in enumerate(kinds):
                for calibration in ("none", "output", "sequential")[:3 if k == 0 else 2]:
                    loss = 1.77 * (1 + (0.7 - share) ** 2 * (1 + k) * (2 if calibration ==
                                                                       "none" else 1))
                    rows.append(dict(corpus=corpus, stage="grid", split="test", budget=share,
                                     allocation=kind, calibration=calibration, healed=False,
                                     rank_share=share, loss=loss, rise=loss / 1.77 - 1))
        for eps, share in ((0.005, 0.62), (0.01, 0.5), (0.02, 0.44), (0.05, 0.35)):
            found.append(dict(corpus=corpus, epsilon=eps, rank_share=share,
                              test_loss=1.77 * (1 + 0.8 * eps), test_rise=0.8 * eps))
        grid = rng.integers(1, 65, (n_layers, n_heads)).tolist()
        maps.append(dict(corpus=corpus, epsilon=0.01, model=grid, attn=grid[::-1], tol=0.05,
                         rho=0.3, low=0.2, high=0.4, n=n_layers * n_heads))
    pairs = [dict(rise=float(r), **{p: float(r * rng.uniform(0.5, 2)) for p in (
        "output share (first order)", "Fisher (query)", "head variance")})
        for r in rng.exponential(0.002, 60)]
    currency = dict(pairs=pairs, spearman={p: dict(rho=0.5, low=0.3, high=0.7, n=60) for p in (
        "output share (first order)", "Fisher (query)", "head variance")})
    history = [dict(step=s, kl=0.1, validation=2.96 * (1 + 0.01 / (1 + s / 20)),
                    test=1.77 * (1 + 0.012 / (1 + s / 20))) for s in range(0, 201, 20)]
    healing = dict(corpus=corpora[0], epsilon=0.01, rank_share=0.5, history=history,
                   best_step=200)
    return Bunch(rows=rows, r_star_model=found, maps=maps, currency=currency, healing=healing,
                 unedited={c: dict(validation=2.96, test=1.77) for c in corpora},
                 config=dict(model="smollm2-135m"))


FIGURES = {
    "plot_sweep": lambda f: f(_sweep()),
    "plot_ladder": lambda f: f(_ladder()),
    "plot_frontier": lambda f: f(_frontier()),
    "plot_kernel_rank_trajectory": lambda f: f(_trajectory()),
    "plot_head_profile": lambda f: f(_profile()),
    "plot_head_scores": lambda f: f(_profile()),
    "plot_corpus_ranks": lambda f: f(_corpus_ranks()),
    "plot_head_rank_map": lambda f: f(_head_ranks()),
    "plot_head_rank_curves": lambda f: f(_head_ranks()),
    "plot_impose": lambda f: f(_head_ranks()),
    "plot_min_ip": lambda f: f(*_min_ip()),
    "plot_min_ip_law": lambda f: f(_min_ip_law()),
    "plot_accessibility": lambda f: f(_accessibility()),
    "plot_copy_cliff": lambda f: f(_copy()),
    "plot_cell_shares": lambda f: f(_cell_shares()),
    "plot_model_rank": lambda f: f(_model_rank()),
    "plot_model_rank_maps": lambda f: f(_model_rank()),
    "plot_model_rank_healing": lambda f: f(_model_rank()),
    "plot_model_rank_currency": lambda f: f(_model_rank()),
}
# the embedded model's shape too: one row of short maps, whose colour-bar labels are longer
# than the maps are tall
CASES = [(name, FIGURES[name]) for name in sorted(FIGURES)] + [
    ("plot_head_profile", lambda f: f(_profile(n_layers=2, n_heads=4))),
    ("plot_head_scores", lambda f: f(_profile(n_layers=2, n_heads=4))),
    ("plot_head_rank_map", lambda f: f(_head_ranks(n_layers=2, n_heads=4))),
    ("plot_model_rank_maps", lambda f: f(_model_rank(n_layers=2, n_heads=4,
                                                     corpora=("random",)))),
]


def test_every_plot_function_is_drawn_here():
    drawn = {name for name in experiments.__all__ if name.startswith("plot_")}
    assert drawn == set(FIGURES)


def _title_boxes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    suptitle = fig._suptitle if fig._suptitle is not None and fig._suptitle.get_text() else None
    titles = [(ax, ax.title) for ax in fig.axes if ax.get_visible() and ax.get_title()]
    return renderer, suptitle, titles


def _inside(box, canvas):
    return (box.x0 >= canvas.x0 - 0.5 and box.x1 <= canvas.x1 + 0.5
            and box.y0 >= canvas.y0 - 0.5 and box.y1 <= canvas.y1 + 0.5)


@pytest.mark.parametrize("name, draw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_titles_and_labels_lie_inside_the_canvas_and_clear_of_the_suptitle(name, draw):
    fig = draw(getattr(experiments, name))
    try:
        renderer, suptitle, titles = _title_boxes(fig)
        canvas = fig.bbox
        assert titles or suptitle is not None, "a figure without a title"
        for _ax, title in titles:
            box = title.get_window_extent(renderer)
            assert _inside(box, canvas), (name, title.get_text(), box, canvas)
        for ax in fig.axes:
            for label in (ax.xaxis.label, ax.yaxis.label):
                if ax.get_visible() and label.get_text():
                    box = label.get_window_extent(renderer)
                    assert _inside(box, canvas), (name, label.get_text(), box, canvas)
        if suptitle is not None:
            top = suptitle.get_window_extent(renderer)
            assert _inside(top, canvas), (name, suptitle.get_text(), top, canvas)
            for _ax, title in titles:
                assert title.get_window_extent(renderer).y1 <= top.y0, (name, title.get_text())
    finally:
        pyplot().close(fig)


def test_a_title_too_wide_for_its_figure_is_wrapped_and_a_short_one_kept():
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    long = "held-out risk of $r^* = 4$ students " * 4
    left.set_title(long)
    right.set_title("short")
    fig.suptitle("a suptitle " * 12)
    save_figure(fig, None)
    renderer, suptitle, titles = _title_boxes(fig)
    assert right.get_title() == "short"
    assert left.get_title() != long and left.get_title().replace("\n", " ") == long.strip()
    assert "$r^* = 4$" in left.get_title()  # mathtext is never cut
    # each title stays in its half of the figure, the suptitle in the canvas
    assert left.title.get_window_extent(renderer).x1 <= fig.bbox.width / 2
    assert _inside(suptitle.get_window_extent(renderer), fig.bbox)
    assert fit_titles(fig) == 0  # nothing left to wrap
    plt.close(fig)


@pytest.mark.parametrize("measure, low", [("mul", 0.0), ("abs", -1.0)])
def test_score_colour_scales_run_to_the_perfect_head(measure, low):
    profile = _profile(n_layers=4, n_heads=3, measure=measure)
    fig = experiments.plot_head_scores(profile)
    try:
        maps = [ax for ax in fig.axes if ax.images]
        bars = [ax for ax in fig.axes if not ax.images]
        for ax, bar, name in zip(maps, bars, ("previous_token", "duplicate_token", "induction")):
            perfect = profile.baselines[f"perfect_{name}_score"]
            grid = [r[f"{name}_score"] for r in profile.records]
            vmin, vmax = ax.images[0].get_clim()
            # from the measure's floor to the perfect head (or the best head, if above it)
            assert (vmin, vmax) == (low, max(perfect, max(grid)))
            labels = [t.get_text() for t in bar.get_yticklabels()]
            assert f"perfect {perfect:.2f}" in labels, labels
    finally:
        pyplot().close(fig)


def test_a_pattern_no_input_defines_keeps_the_unit_scale():
    profile = _profile(n_layers=2, n_heads=2)
    profile.baselines["perfect_induction_score"] = float("nan")
    for record in profile.records:
        record["induction_score"] = float("nan")
    fig = experiments.plot_head_scores(profile)
    try:
        induction = [ax for ax in fig.axes if ax.images][2]
        assert induction.images[0].get_clim() == (0.0, 1.0)
    finally:
        pyplot().close(fig)
