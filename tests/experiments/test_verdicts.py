"""Every verdict function, on synthetic results: the plausible alternative does not agree.

Each verdict rule is written in its experiment's docstring before any run. Here each
one meets a result built to agree, and the alternative a careless rule would let
pass -- a null model, a polynomial law, equal cells, a head population with real
corpus shifts, a crossing made by the step budget, an estimate with noise only --
and must print "does not agree" on it (and "partly" where the rule has one). No
training: the results are dicts.
"""

import math

import numpy as np
import pytest

from intrinsic_rank.experiments import EXPERIMENTS, NOT_COMPARABLE, VERDICTS
from intrinsic_rank.experiments.entropic import _corpus_ranks, _profile
from intrinsic_rank.experiments.min_ip import _law
from intrinsic_rank.experiments.reachability import _lm_geometry, _reach
from intrinsic_rank.experiments.reachability._curves import fit_cliff
from intrinsic_rank.experiments.reachability._lm_geometry import cell_share_facts


def by(verdicts):
    return [v.verdict for v in verdicts]


def judge(name, result):
    verdicts = EXPERIMENTS[name].verdicts(result)
    assert all(v.verdict in VERDICTS for v in verdicts)
    return verdicts


# -- sweep ---------------------------------------------------------------------------


def _sweep(estimate=4, excess=(0.6, 0.3, 0.15, 0.0, 1e-5, 1e-5), energy=4.0):
    records = [dict(rank=r, excess_risk=e, energy_effective_rank=min(r, energy),
                    numerical_rank=r) for r, e in enumerate(excess, 1)]
    return {"sweeps": {"linear": dict(records=records, rank_=estimate, r_star=4,
                                      noise_floor=0.01, excess_tol=0.02)}}


def test_sweep_agrees_on_a_sharp_transition_at_r_star():
    assert by(judge("sweep", _sweep())) == ["agrees"] * 4


def test_sweep_refuses_an_estimate_one_off_and_a_spread_spectrum():
    # one rank off is not the claim; a rank below r* at the floor; one above it not
    v = judge("sweep", _sweep(estimate=3, excess=(0.6, 0.3, 0.01, 0.0, 0.5, 1e-5),
                              energy=6.0))
    assert by(v) == ["does not agree", "partly", "partly", "does not agree"]
    # no transition at all: every rank at the floor
    v = judge("sweep", _sweep(estimate=1, excess=(0.0,) * 6))
    assert by(v)[:2] == ["does not agree", "does not agree"]
    # an energy rank of 4.6 rounds to 5: not recovered
    assert by(judge("sweep", _sweep(energy=4.6)))[3] == "does not agree"
    assert by(judge("sweep", _sweep(energy=4.4)))[3] == "agrees"


# -- ladder --------------------------------------------------------------------------


def _ladder(b0, b1, b2, b3, tol=0.02):
    names = [("fixed", "B0 fixed operator"), ("linear", "B1 linear QK"),
             ("softmax", "B2 softmax QK"), ("block", "B3 Transformer block")]
    return {"records": [dict(attention=a, rung=label, excess_risk=x, excess_to_floor_ratio=x / 0.01)
                        for (a, label), x in zip(names, (b0, b1, b2, b3))],
            "noise_floor": 0.01, "reach_tol": tol}


def test_ladder_agrees_when_the_failure_starts_at_b1():
    assert by(judge("ladder", _ladder(1e-4, 0.95, 0.93, 0.97))) == ["agrees"] * 3


def test_ladder_refuses_a_failure_caused_by_softmax():
    # the alternative the ladder exists to rule out: B1 fine, softmax (B2) breaks it
    v = judge("ladder", _ladder(1e-4, 0.001, 0.9, 0.9))
    assert by(v) == ["agrees", "partly", "does not agree"]
    # no failure anywhere
    assert by(judge("ladder", _ladder(1e-4, 0.01, 0.01, 0.01)))[1] == "does not agree"
    # B0 fails too: the failure is not located at B1
    assert by(judge("ladder", _ladder(0.5, 0.95, 0.93, 0.97))) == [
        "does not agree", "agrees", "partly"]
    # a result without the tolerance is not judged
    assert judge("ladder", {"records": [], "noise_floor": 0.01}) == []


# -- frontier ------------------------------------------------------------------------

R_STARS = [1, 2, 4, 8, 12, 16]


def _frontier(energy, mixer, fit_numerical=lambda r: 13 + r // 8, inverted_exact=True,
              recovery_error=0.0):
    records = []
    for r in R_STARS:
        base = dict(r_star=r, mixer_energy_rank=float("nan"),
                    recovery_energy_rank=float("nan"), recovery_numerical_rank=float("nan"))
        records.append(dict(base, teacher="linear, V known", numerical_rank=r,
                            energy_rank=float(r), mixer_energy_rank=mixer(r)))
        records.append(dict(base, teacher="linear, V unknown", numerical_rank=r,
                            energy_rank=float(r)))
        records.append(dict(base, teacher="softmax, linear-QK fit",
                            numerical_rank=fit_numerical(r), energy_rank=energy(r)))
        records.append(dict(base, teacher="softmax, log-inverted mixers",
                            numerical_rank=r if inverted_exact else r + 1,
                            energy_rank=float(r), recovery_energy_rank=r + recovery_error,
                            recovery_numerical_rank=16))
    return {"records": records, "config": {"seq_len": 8, "d": 16}}


def _paper_energy(r):  # over-estimates small r*, compresses large r*
    return {1: 1.2, 2: 2.8, 4: 4.9, 8: 8.3, 12: 11.2, 16: 15.7}[r]


def _saturating_mixer(r):
    return {1: 1.0, 2: 1.9, 4: 3.0, 8: 3.5, 12: 3.8, 16: 3.99}[r]


def test_frontier_agrees_on_the_papers_picture():
    v = judge("frontier", _frontier(_paper_energy, _saturating_mixer, inverted_exact=False))
    assert by(v) == ["agrees"] * 7
    assert v[3].measured == "r* = 2: 2.8; r* = 4: 4.9; r* = 12: 11.2"


def test_frontier_refuses_a_noisy_exact_estimate_at_the_interior_points():
    # an estimate that is right up to noise passes the ends (>= 1 at r* = 1, <= 16 at
    # r* = 16) whatever it does; the interior points catch it
    noisy = {1: 1.2, 2: 2.1, 4: 3.9, 8: 8.2, 12: 12.1, 16: 15.8}
    v = judge("frontier", _frontier(noisy.get, _saturating_mixer))
    assert v[3].claim.startswith("softmax: the energy effective rank over-estimates")
    assert v[3].verdict == "does not agree"
    one_sided = {1: 1.2, 2: 2.8, 4: 4.9, 8: 8.1, 12: 12.0, 16: 15.8}
    assert by(judge("frontier", _frontier(one_sided.get, _saturating_mixer)))[3] == "partly"


def test_frontier_refuses_a_mixer_rank_that_follows_r_star_up_to_L():
    # min(r*, L) is below "half the largest r*" = 8 nowhere, but 7.9 at r* >= 8 would be;
    # the slope over r* <= L is what saturation means
    following = judge("frontier", _frontier(_paper_energy, lambda r: min(r, 7.9)))
    mixer = [v for v in following if v.claim.startswith("the realised mixer")][0]
    assert mixer.verdict == "does not agree" and "slope 0.985" in mixer.measured


def test_frontier_refuses_an_exact_softmax_fit_and_a_missed_recovery():
    v = judge("frontier", _frontier(float, _saturating_mixer, fit_numerical=lambda r: r,
                                    recovery_error=0.8))
    assert by(v)[2] == "does not agree"  # exact, range not compressed
    assert by(v)[4] == "does not agree"  # both estimators exact
    assert by(v)[6] == "does not agree"  # recovery 0.8 away
    assert "the linear-QK surrogate is exact" in v[4].explanation


# -- min-ip --------------------------------------------------------------------------


def _row(length, model, rank, mean, worst=None):
    return dict(length=length, model=model, rank=rank, error_mean=mean,
                error_max=mean if worst is None else worst)


def _min_ip(rank1_len3=0.85, solving=16, dense3=(0.0, 0.0), rank1_len2=0.0, suite=None,
            ood=None):
    summary = [_row(2, "kernel", 1, rank1_len2),
               _row(3, "kernel", 1, rank1_len3),
               _row(3, "kernel", 16, 0.01 if solving else rank1_len3),
               _row(3, "dense", 24, sum(dense3) / 2, max(dense3))]
    phase = dict(summary=summary, transition={"3": solving, "2": 1},
                 config=dict(threshold=0.05, rank_grid=[1, 16], n_codewords=16, min_gap=3))
    return {"phase": phase, "suite": suite, "ood": ood}


def _suite(errors, dense=0.0):
    summary = [dict(model="kernel", rank=r, error_mean=e, error_max=e) for r, e in errors]
    summary.append(dict(model="dense", rank=24, error_mean=dense, error_max=dense))
    return dict(summary=summary, config=dict(threshold=0.05, n_sequences=1272, n_bits=24,
                                             n_codewords=400, gap=1, n_seeds=1))


def _ood(ranks, best, dense_worst):
    transition = [dict(n_bits=m, pool=10 * m, transition_rank=r, kernel_best_test_error=b,
                       dense_test_error_mean=d / 2)
                  for m, r, b, d in zip((8, 12, 16), ranks, best, dense_worst)]
    summary = [dict(n_bits=m, pool=10 * m, model="dense", rank=m, test_error_mean=d / 2,
                    test_error_max=d) for m, d in zip((8, 12, 16), dense_worst)]
    return dict(config=dict(threshold=0.05), transition=transition, summary=summary)


def test_min_ip_agrees_on_the_papers_picture():
    result = _min_ip(suite=_suite([(1, 0.9), (4, 0.85), (32, 0.0)]),
                     ood=_ood([8, 16, 64], [0.0, 0.0, 0.01], [0.0, 0.0, 0.0]))
    v = judge("min-ip", result)
    assert by(v) == ["agrees"] * 6
    assert "1,272 length-3 inputs of 24-bit vectors" in v[3].claim
    assert "exact rank-1 solution" not in v[3].explanation


def test_min_ip_refuses_a_suite_nothing_solves_and_no_ood_transition():
    result = _min_ip(suite=_suite([(1, 0.3), (4, 0.3), (32, 0.3)]),
                     ood=_ood([None, None, None], [0.17, 0.26, 0.37], [0.0, 0.02, 0.2]))
    v = judge("min-ip", result)
    assert by(v)[3:] == ["does not agree", "does not agree", "partly"]
    assert "rises with the bit width" in v[4].explanation
    # a suite every rank solves (what a fixed gap allows): the wall is not there
    solved = judge("min-ip", _min_ip(suite=_suite([(1, 0.0), (4, 0.0), (32, 0.0)])))
    assert solved[3].verdict == "partly"
    assert "exact rank-1 solution" in solved[3].explanation


def test_min_ip_refuses_rank1_at_length3_and_a_dense_shortfall():
    v = judge("min-ip", _min_ip(rank1_len2=0.5, rank1_len3=0.01, solving=1,
                                dense3=(0.01, 0.08)))
    assert by(v) == ["does not agree", "partly", "partly"]
    # the explanation follows the outcome: which half of the transition failed
    assert "rank 1 fails (no)" in v[2].explanation and "succeeds (yes)" in v[2].explanation
    growing_somewhere = judge("min-ip", _min_ip(ood=_ood([None, 32, 16], [0.3, 0.04, 0.03],
                                                        [0.0, 0.0, 0.0])))
    assert growing_somewhere[3].verdict == "partly"
    assert "not a growing sequence" in growing_somewhere[3].explanation


# -- min-ip-law ----------------------------------------------------------------------


def _law_result(ranks, m=None):
    m = list(range(2, 2 + len(ranks))) if m is None else m
    law = [dict(task="length3", feature_map="exp", n_heads=1, m=mm, r_needed=r, total_rank=r,
                flagged=0) for mm, r in zip(m, ranks)]
    fit = dict(task="length3", feature_map="exp", n_heads=1,
               **_law.fit_rank_law(m, ranks))
    return dict(law=law, fits=[fit])


def _power_of_two_above(x):
    return 2 ** math.ceil(math.log2(x)) if x > 1 else 1


def test_min_ip_law_agrees_only_when_no_power_law_fits():
    exponential = [2 ** (m - 1) for m in range(2, 9)]  # 2, 4, ..., 128
    (v,) = judge("min-ip-law", _law_result(exponential))
    assert v.verdict == "agrees"
    assert "upper bounds on a power-of-two grid" in v.measured


def test_min_ip_law_refuses_a_polynomial_law():
    # m^2 rounded up to the grid over m = 2..8: no exponential passes through it
    square = [_power_of_two_above(m * m) for m in range(2, 9)]
    (v,) = judge("min-ip-law", _law_result(square))
    assert v.verdict == "does not agree"
    assert "power law consistent: yes" in v.measured


def test_min_ip_law_cannot_tell_m4_over_200_from_an_exponential():
    # m^4 / 200 rounded up to powers of two gives 1, 1, 2, 4, 8 at m = 2..6: a positive
    # slope of about 0.7 per bit, "agrees" by a slope rule; here both laws fit: partly
    quartic = [_power_of_two_above(m ** 4 / 200) for m in range(2, 7)]
    assert quartic == [1, 1, 2, 4, 8]
    (v,) = judge("min-ip-law", _law_result(quartic))
    assert v.verdict == "partly" and "cannot tell them apart" in v.explanation
    # the measured 1, 2, 8, 16 at m = 2..5: a cubic passes through it as well
    (v,) = judge("min-ip-law", _law_result([1, 2, 8, 16]))
    assert v.verdict == "partly"


def test_min_ip_law_refuses_no_growth_and_drops_unsolved_m():
    (v,) = judge("min-ip-law", _law_result([1, 1, 1]))
    assert v.verdict == "does not agree" and "does not grow" in v.explanation
    (v,) = judge("min-ip-law", _law_result([1, 2, None]))
    assert v.verdict == "partly"  # two points: both laws fit


# -- reach ---------------------------------------------------------------------------


def _reach_result(model="default", budget_limited=0, slope=3.0, r2=0.995, ratio=48.0,
           relative=39.0, paper=45.0, n_targets=16):
    records, n50 = [], []
    for m in (1, 2, 3):
        mid = 4.0 + slope * m
        for n in (2, 4, 8, 12, 16, 20):
            acc = 1.0 if n < mid else 0.0
            records.append(dict(n_memory=m, length=n, accessibility=acc,
                                budget_limited=0 if acc else budget_limited))
        n50.append(dict(n_memory=m, n50=mid, bracketed=True))
    bounds = [dict(bound="ball", precision_convention="relative", ratio=relative),
              dict(bound="ball", precision_convention="paper", ratio=paper)]
    return dict(records=records, n50=n50, bounds=bounds,
                slope=dict(slope=slope, intercept=1.5, r2=r2, n_points=3),
                bound=dict(slope_bound=ratio * slope, box_slope_bound=0.9 * ratio * slope,
                           precision=2 ** -10, ratio=ratio, box_ratio=0.9 * ratio, width=64),
                config=dict(model=model, n_targets=n_targets))


def test_reach_agrees_and_the_toy_ratio_is_not_comparable():
    v = judge("reach", _reach_result())
    assert by(v) == ["agrees", "agrees", "agrees", NOT_COMPARABLE]
    assert "ball 39 at ε = r∞/2048" in v[3].measured
    assert "2^-10" not in v[3].measured  # one convention only


def test_reach_refuses_a_crossing_the_step_budget_made():
    # every target past n50 was still improving when the steps ran out
    v = judge("reach", _reach_result(budget_limited=16))
    assert v[0].verdict == "does not agree" and "0 of 3" in v[0].measured
    # half of them: crediting 8 of 16 as reachable puts accessibility at 1/2, not below
    assert judge("reach", _reach_result(budget_limited=8))[0].verdict == "does not agree"
    assert judge("reach", _reach_result(budget_limited=7))[0].verdict == "agrees"


def test_reach_refuses_a_saturating_n50_and_a_slope_above_the_bound():
    assert judge("reach", _reach_result(r2=0.9))[1].verdict == "partly"
    assert judge("reach", _reach_result(slope=-0.5))[1].verdict == "does not agree"
    assert judge("reach", _reach_result(ratio=0.5))[2].verdict == "does not agree"


def test_reach_ratio_on_a_pretrained_model_has_one_chance():
    low, high = _reach._authors_ball_range()
    inside = judge("reach", _reach_result(model="smollm2-135m", relative=(low + high) / 2))
    assert inside[3].verdict == "agrees"
    # in the authors' 2^-10 range (7.68-20.50) but not at r_inf / 2048: no second chance
    v = judge("reach", _reach_result(model="smollm2-135m", relative=high + 1, paper=15.0))
    assert v[3].verdict == "does not agree"
    # a saved TinyCausalLM is a toy too
    assert judge("reach", _reach_result(model="runs/tiny.pt"))[3].verdict == NOT_COMPARABLE


# -- copy ----------------------------------------------------------------------------


def _copy(curve, train=(5, 20)):
    records = [dict(length=n, in_training_range=n <= train[1], exact_match=e)
               for n, e in curve.items()]
    cliff = fit_cliff(list(curve), list(curve.values()))
    return dict(records=records, cliff={k: float(v) for k, v in cliff.items()},
                config=dict(train_lengths=list(train)))


def test_copy_agrees_on_an_abrupt_failure_right_past_training():
    curve = {5: 1.0, 12: 1.0, 20: 0.97, 21: 0.0, 22: 0.0, 30: 0.0}
    assert by(judge("copy", _copy(curve))) == ["agrees", "agrees"]


def test_copy_refuses_a_gradual_decline():
    gradual = {5: 1.0, 12: 1.0, 20: 0.97, 21: 0.6, 22: 0.3, 23: 0.0, 30: 0.0}
    assert by(judge("copy", _copy(gradual))) == ["agrees", "partly"]
    early = {5: 1.0, 12: 0.9, 16: 0.5, 20: 0.2, 21: 0.0, 30: 0.0}
    assert by(judge("copy", _copy(early))) == ["partly", "does not agree"]
    never = {5: 1.0, 20: 1.0, 21: 0.9, 30: 0.8}
    assert by(judge("copy", _copy(never)))[1] == "does not agree"


# -- lm-geometry ---------------------------------------------------------------------


def _geometry(counts):
    shares = cell_share_facts(counts)
    return dict(model="m", shares=shares,
                tokens=[dict(text="' '", share=shares["sorted_counts"][0] / shares["n_samples"])])


def test_lm_geometry_refuses_equal_cells_at_the_same_size():
    # equal cells: the top 1% still own 2-4x their share by chance (N / V = 4 points a cell)
    V, n = 4096, 2**14
    counts = np.random.default_rng(1).multinomial(n, np.full(V, 1 / V))
    (v,) = _lm_geometry._verdicts(_geometry(counts))
    assert _geometry(counts)["shares"]["top_factor"] > 2  # what a fixed factor would pass
    assert v.verdict == "does not agree"


def test_lm_geometry_agrees_on_a_few_large_cells():
    V, n = 4096, 2**14
    p = 1 / np.arange(1, V + 1) ** 1.2  # Zipf-like cells
    counts = np.random.default_rng(1).multinomial(n, p / p.sum())
    (v,) = _lm_geometry._verdicts(_geometry(counts))
    assert v.verdict == "agrees" and "p = 0.005" in v.measured


def test_the_equal_cell_null_is_seeded_and_sized():
    a = _lm_geometry.equal_cell_null(2**14, 4096)
    assert a.shape == (199,) and np.array_equal(a, _lm_geometry.equal_cell_null(2**14, 4096))
    assert 1 < a.min() and a.max() < 5


# -- profile -------------------------------------------------------------------------


def _profile_model(kernel, attn, max_key=None, band=None):
    n = len(kernel)
    max_key = [0.05] * n if max_key is None else max_key
    band = [0.1] * n if band is None else band
    records = [dict(kernel_energy_rank=k, attn_energy_rank=a, max_key_mass=m, band_mass=b)
               for k, a, m, b in zip(kernel, attn, max_key, band)]
    return dict(records=records, baselines=dict(max_key_mass=0.05, band_mass=0.13),
                summary=dict(sink_heads=sum(m > 0.5 for m in max_key),
                             kernel_energy_rank_median=float(np.median(kernel)),
                             attn_energy_rank_median=float(np.median(attn))),
                config=dict(band=1, d_head=32))


def _profile_result(pretrained, default=None, ranks=(6.2, 4.1, 3.6, 3.1, 2.9),
             losses=(3.5, 3.4, 3.3, 3.25, 3.2)):
    rng = np.random.default_rng(0)
    default = default or _profile_model(rng.uniform(1, 2, 8), rng.uniform(1, 20, 8))
    summary = [dict(step=100 * i, loss=x, kernel_energy_rank=r)
               for i, (r, x) in enumerate(zip(ranks, losses))]
    return dict(models={"default": default, "all-MiniLM-L6-v2": pretrained},
                trajectory=dict(summary=summary))


def _heads(n=72, dominated=40, rho=None, seed=0):
    rng = np.random.default_rng(seed)
    kernel = rng.uniform(20, 32, n)
    attn = rng.uniform(1, 5, n) if rho is None else 40 - rho * kernel + rng.normal(0, 0.5, n)
    mass = [0.6] * dominated + [0.4] * (n - dominated)
    return _profile_model(kernel, attn, max_key=mass)


def test_profile_agrees_on_dominated_heads_unrelated_ranks_and_a_tracking_rank():
    v = judge("profile", _profile_result(_heads()))
    assert by(v) == ["agrees", "agrees", "agrees"]


def test_profile_refuses_a_minority_of_sinks_and_an_anticorrelated_proxy():
    # 30 heads at 0.6 and 42 at 0.4: "structured" at a third, not dominated
    v = judge("profile", _profile_result(_heads(dominated=30)))
    assert v[0].verdict == "does not agree"
    # rho = -0.9 across 72 heads: a proxy, whatever its sign (a signed rule passed it)
    anti = _heads(rho=1.0)
    v = judge("profile", _profile_result(anti, default=anti))
    assert v[1].verdict == "does not agree" and "Spearman -0.9" in v[1].measured
    # on the pretrained model a proxy, on the small one not: partly
    assert judge("profile", _profile_result(anti))[1].verdict == "partly"


def test_profile_refuses_a_rank_that_jumps_and_wanders():
    # the rank leaves its random initialisation, then wanders while the loss keeps falling
    v = judge("profile", _profile_result(_heads(), ranks=(6.23, 3.59, 2.90, 3.21, 3.44),
                                  losses=(3.47, 3.35, 3.3, 3.27, 3.24)))
    assert v[2].verdict == "does not agree" and "p = 0.35" in v[2].measured
    flat = judge("profile", _profile_result(_heads(), ranks=(3.0,) * 5))
    assert flat[2].verdict == "does not agree"


def test_the_exact_spearman_test():
    assert _profile._exact_spearman_test([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]) == pytest.approx(
        (-1.0, 2 / 120))
    rho, p = _profile._exact_spearman_test([1, 2, 3, 4], [1, 3, 2, 4])
    assert rho == pytest.approx(0.8) and p == pytest.approx(8 / 24)  # +-1, +-0.8: 1 + 3 each
    with pytest.raises(ValueError, match="3 to 8"):
        _profile._exact_spearman_test([1, 2], [2, 1])


# -- corpus-ranks --------------------------------------------------------------------


def _corpora(shift, noise=1.0, n_heads=270, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.lognormal(0.7, 0.6, n_heads)
    realised = {c: base * (1 + s) + rng.normal(0, noise * 0.05, n_heads)
                for c, s in zip(("random", "repeated", "prose", "code"), shift)}
    sep = _corpus_ranks._separation(realised, np.full(n_heads, 40.0))
    rows = [dict(corpus=c, attn_energy_rank_median=float(np.median(r)),
                 attn_energy_rank_q25=1.0, attn_energy_rank_q75=3.0, next_token_loss=1.0)
            for c, r in realised.items()]
    return dict(config=dict(model="m"), summary=rows, separation=sep)


def test_corpus_ranks_agrees_when_the_corpora_do_not_move_the_heads():
    (v,) = judge("corpus-ranks", _corpora((0, 0, 0, 0)))
    assert v.verdict == "agrees"
    assert "Kendall's W" in v.measured and "one frozen model" in v.claim


def test_corpus_ranks_refuses_real_corpus_shifts_across_heads():
    # every head's rank moves with the corpus: consistent and large, whatever the spread
    # between heads (the range-over-IQR statistic called this "similar": 0.2 / 2)
    result = _corpora((0, 0.2, 0.1, 0.05))
    (v,) = judge("corpus-ranks", result)
    assert result["separation"]["kendall_w"] > 0.3 and v.verdict == "does not agree"
    small = _corpora((0, 0.03, 0.015, 0.0075), noise=1.0)
    assert 0.1 <= small["separation"]["kendall_w"] < 0.3
    assert judge("corpus-ranks", small)[0].verdict == "partly"
    # a moderate W on eight heads that Friedman cannot tell from chance: partly
    few = _corpora((0, 0.02, 0.01, 0.005), noise=4.0, n_heads=8, seed=3)
    assert few["separation"]["friedman_p"] >= 0.05
    assert judge("corpus-ranks", few)[0].verdict in ("partly", "agrees")


# -- the fourth outcome in the report ------------------------------------------------


def test_not_comparable_is_a_verdict_counted_apart(tmp_path):
    import json

    from intrinsic_rank.experiments import Experiment, reproduce
    from intrinsic_rank.experiments.runner import register

    def plot(result, folder):
        (tmp_path / "out" / "unlike" / "unlike.png").write_bytes(b"png")
        return ["unlike.png"]

    experiment = register(Experiment(
        name="unlike", command="unlike-cmd", title="Unlike things", paper="none", help="h",
        description="d", quick=dict(size=1), full=dict(size=2),
        run=lambda settings, **kw: dict(records=[dict(size=1)]),
        tables=lambda result: [("rows", result["records"], ["size"])], plot=plot,
        verdicts=lambda result: [("a claim about big models", "a toy's number",
                                  NOT_COMPARABLE, "a toy is not a big model"),
                                 ("a claim it can test", "1", "agrees", "equal")],
        summary=lambda result: [], in_reproduce=False))
    try:
        run = reproduce("unlike", out=tmp_path / "out", progress=False)
    finally:
        EXPERIMENTS.pop(experiment.name)
    assert run.summary[0]["not_comparable"] == 1 and run.summary[0]["agrees"] == 1
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| agrees | partly | does not agree | not comparable |" in report
    assert "| 1 | 0 | 0 | 1 |" in report and "| **not comparable** |" in report
    assert "*not comparable* marks a claim about another kind" in report
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["pieces"]["unlike"]["verdicts"]["not comparable"] == 1
