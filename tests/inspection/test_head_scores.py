"""Head scores against TransformerLens's head detector, as its code defines them.

The reference below re-derives ``transformer_lens.head_detector`` with plain loops:
the detection patterns (``get_previous_token_head_detection_pattern`` and its two
siblings, including the roll-and-zero-column construction of the induction pattern)
and ``compute_head_attention_similarity_score``: ``"mul"`` is
``sum(A * D) / sum(A)`` over all rows after zeroing the attention's BOS column and/or
diagonal; ``"abs"`` is ``1 - round(mean(|A - D|) * n, 3)`` with the exclusions zeroing
those entries of ``|A - D|``; a list of sequences is the mean of per-sequence scores.
The known answers (0.96, 0.48, ...) are worked out by hand in the comments.
"""

import math

import numpy as np
import pytest

from intrinsic_rank.inspection import (
    HEAD_PATTERNS,
    SCORE_MEASURES,
    head_pattern_masks,
    head_pattern_scores,
    profile_heads,
)

K = 12  # BOS + 12 random tokens + the same 12 again: n = 25
RNG = np.random.default_rng(0)
REPEATED = np.concatenate([[1], np.tile(RNG.choice(np.arange(100, 900), K, replace=False), 2)])


# ------------------------------------------------------------- the reference, by loops

def tl_patterns(tokens):
    """The detector's three patterns, built the way its code builds them."""
    n = len(tokens)
    previous = [[1.0 if j == i - 1 else 0.0 for j in range(n)] for i in range(n)]
    # eq_mask with its diagonal zeroed, then tril
    duplicate = [[1.0 if (j < i and tokens[j] == tokens[i]) else 0.0 for j in range(n)]
                 for i in range(n)]
    # torch.roll(duplicate, 1, dims=1), first column replaced by zeros, then tril
    induction = [[(duplicate[i][(j - 1) % n] if j > 0 else 0.0) if j <= i else 0.0
                  for j in range(n)] for i in range(n)]
    return {"previous_token": previous, "duplicate_token": duplicate, "induction": induction}


def tl_score(A, D, *, exclude_bos=False, exclude_current_token=False, measure="mul"):
    n = len(A)
    A = [list(map(float, row)) for row in A]
    if measure == "mul":
        for i in range(n):
            if exclude_bos:
                A[i][0] = 0.0
            if exclude_current_token:
                A[i][i] = 0.0
        on = sum(A[i][j] * D[i][j] for i in range(n) for j in range(n))
        total = sum(A[i][j] for i in range(n) for j in range(n))
        return on / total if total else math.nan
    diff = [[abs(A[i][j] - D[i][j]) for j in range(n)] for i in range(n)]
    assert all(diff[i][j] == 0 for i in range(n) for j in range(i + 1, n))
    for i in range(n):
        if exclude_bos:
            diff[i][0] = 0.0
        if exclude_current_token:
            diff[i][i] = 0.0
    mean = sum(map(sum, diff)) / (n * n)
    return 1 - round(mean * n, 3)


def tl_scores(A, tokens, **options):
    return {name: tl_score(A, D, **options) for name, D in tl_patterns(tokens).items()}


def tl_mean_scores(maps, sequences, **options):
    per = [tl_scores(A, t, **options) for A, t in zip(maps, sequences)]
    return {name: sum(p[name] for p in per) / len(per) for name in HEAD_PATTERNS}


# ------------------------------------------------------------- heads with known scores

def one_hot_rows(n, key_of):
    """A map whose row i puts all its weight on key ``key_of(i)``."""
    A = np.zeros((n, n))
    for i in range(n):
        A[i, key_of(i)] = 1.0
    return A


def perfect_head(tokens, pattern):
    """All attention on the pattern's (first) position, on BOS where there is none."""
    mask = head_pattern_masks(tokens)[pattern]
    return one_hot_rows(len(tokens), lambda i: int(np.argmax(mask[i])) if mask[i].any() else 0)


def uniform_causal(n):
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def random_causal(n, seed):
    logits = np.random.default_rng(seed).normal(scale=2.0, size=(n, n))
    logits[np.triu_indices(n, 1)] = -np.inf
    A = np.exp(logits - logits.max(1, keepdims=True))
    return A / A.sum(1, keepdims=True)


def test_the_masks_are_the_detectors_patterns():
    for tokens in (REPEATED, [3, 3, 3, 5], [7, 1, 7, 1, 7, 2], [4]):
        ours = head_pattern_masks(tokens)
        for name, D in tl_patterns(list(tokens)).items():
            assert np.array_equal(ours[name], np.array(D, dtype=bool)), name


def test_perfect_heads_on_bos_random_and_repeat():
    n = len(REPEATED)  # 25
    previous = perfect_head(REPEATED, "previous_token")
    induction = perfect_head(REPEATED, "induction")
    duplicate = perfect_head(REPEATED, "duplicate_token")
    # mul: row 0 (BOS on itself) has no previous token, so 24 of 25 rows score: 0.96
    assert head_pattern_scores(previous, REPEATED)["previous_token"] == pytest.approx(0.96)
    # the 12 queries of the second copy follow the pattern, 13 rows cannot: 12 / 25
    assert head_pattern_scores(induction, REPEATED)["induction"] == pytest.approx(0.48)
    assert head_pattern_scores(duplicate, REPEATED)["duplicate_token"] == pytest.approx(0.48)
    # the conditional share is 1 for a perfect head, whatever the share of defined rows
    for A, name in ((previous, "previous_token"), (induction, "induction"),
                    (duplicate, "duplicate_token")):
        assert head_pattern_scores(A, REPEATED, measure="conditional")[name] == 1.0
        assert head_pattern_scores(A, REPEATED)[name] == pytest.approx(
            tl_scores(A, REPEATED)[name], abs=1e-12)
    # exclude_bos: the 13 BOS-parked rows leave the denominator, so induction scores 1
    assert head_pattern_scores(induction, REPEATED, exclude_bos=True)["induction"] == 1.0
    # ... but the previous-token head loses row 1 (its previous token is BOS): 23 / 23
    assert head_pattern_scores(previous, REPEATED, exclude_bos=True)[
        "previous_token"] == pytest.approx(1.0)
    # abs: every row that misses D by one unit costs 1 / n: 1 - 1/25 and 1 - 13/25
    assert head_pattern_scores(previous, REPEATED, measure="abs")["previous_token"] == 0.96
    assert head_pattern_scores(induction, REPEATED, measure="abs")["induction"] == \
        pytest.approx(0.48)
    assert head_pattern_scores(induction, REPEATED, measure="abs", exclude_bos=True)[
        "induction"] == 1.0
    # the induction head scores nothing as a previous-token head (its keys are i - 11)
    assert head_pattern_scores(induction, REPEATED)["previous_token"] == pytest.approx(1 / n)


def test_uniform_causal_attention_has_the_harmonic_closed_form():
    n = len(REPEATED)
    U = uniform_causal(n)
    # previous token: rows 1..n-1 give 1/(i+1) to key i - 1; summed over all n rows
    harmonic = sum(1 / (i + 1) for i in range(1, n))
    assert head_pattern_scores(U, REPEATED)["previous_token"] == pytest.approx(harmonic / n)
    # induction and duplicate: each second-copy query i = 13..24 gives 1/(i+1) to one key
    copy = sum(1 / (i + 1) for i in range(K + 1, n))
    for name in ("duplicate_token", "induction"):
        assert head_pattern_scores(U, REPEATED)[name] == pytest.approx(copy / n)
        assert head_pattern_scores(U, REPEATED, measure="conditional")[name] == \
            pytest.approx(copy / K)
    expected = tl_scores(U, list(REPEATED), measure="abs")
    got = head_pattern_scores(U, REPEATED, measure="abs")
    assert {k: float(v) for k, v in got.items()} == pytest.approx(expected, abs=1e-12)


def test_a_sink_head():
    n = len(REPEATED)
    sink = one_hot_rows(n, lambda i: 0)
    # only row 1 (whose previous token is BOS) scores: 1 / 25; no repeat starts at BOS
    scores = head_pattern_scores(sink, REPEATED)
    assert scores["previous_token"] == pytest.approx(1 / n)
    assert scores["duplicate_token"] == 0.0 and scores["induction"] == 0.0
    # with the BOS column zeroed nothing is left: 0 / 0, as the detector's division gives
    assert all(math.isnan(v) for v in head_pattern_scores(sink, REPEATED,
                                                          exclude_bos=True).values())
    # abs: row 0 misses by 1 (its BOS weight), row 1 by 0, rows 2..24 by 2 (the BOS
    # weight and the missed previous key): 1 - (1 + 23 * 2) / 25 = -0.88
    assert head_pattern_scores(sink, REPEATED, measure="abs")["previous_token"] == \
        pytest.approx(1 - 47 / n)
    # half sink, half previous token
    half = 0.5 * sink + 0.5 * perfect_head(REPEATED, "previous_token")
    assert head_pattern_scores(half, REPEATED)["previous_token"] == pytest.approx(
        (1 + 23 * 0.5) / n)  # row 1 gives all to BOS = its previous token
    assert head_pattern_scores(half, REPEATED, exclude_bos=True)[
        "previous_token"] == pytest.approx(1.0)


@pytest.mark.parametrize("exclude_bos", [False, True])
@pytest.mark.parametrize("exclude_current_token", [False, True])
@pytest.mark.parametrize("measure", ["mul", "abs"])
def test_random_heads_match_the_reference(exclude_bos, exclude_current_token, measure):
    options = dict(exclude_bos=exclude_bos, exclude_current_token=exclude_current_token)
    maps = np.stack([random_causal(len(REPEATED), seed) for seed in range(4)])
    got = head_pattern_scores(maps, REPEATED, measure=measure, **options)
    for h in range(4):
        expected = tl_scores(maps[h], list(REPEATED), measure=measure, **options)
        for name in HEAD_PATTERNS:
            assert got[name][h] == pytest.approx(expected[name], abs=1e-12), (name, h)


def test_a_self_attending_head_with_the_current_token_excluded():
    n = len(REPEATED)
    self_and_rest = np.tril(np.ones((n, n))) * 0.1 + np.eye(n)
    self_and_rest /= self_and_rest.sum(1, keepdims=True)
    # the diagonal leaves A but not D: query i keeps i keys of weight 0.1 / (0.1 (i+1) + 1)
    w = 0.1 / (0.1 * (np.arange(n) + 1) + 1.0)
    on = w[1:].sum()  # every row but the first has its previous key
    total = (w * np.arange(n)).sum()
    got = head_pattern_scores(self_and_rest, REPEATED, exclude_current_token=True)
    assert got["previous_token"] == pytest.approx(on / total)
    assert got["previous_token"] == pytest.approx(tl_scores(
        self_and_rest, list(REPEATED), exclude_current_token=True)["previous_token"])


def test_two_inputs_of_different_lengths_average_their_scores():
    short = np.array([1, 5, 6, 7, 5, 6, 7])  # BOS + 3 + 3: n = 7
    plain = np.array([1, 9, 8, 4, 3])         # nothing repeats: n = 5
    maps = [perfect_head(short, "induction"), uniform_causal(len(plain))]
    sequences = [short, plain]
    for options in (dict(), dict(exclude_bos=True), dict(exclude_current_token=True),
                    dict(exclude_bos=True, exclude_current_token=True)):
        for measure in ("mul", "abs"):
            expected = tl_mean_scores(maps, [list(t) for t in sequences], measure=measure,
                                      **options)
            got = head_pattern_scores(maps, sequences, measure=measure, **options)
            assert {k: float(v) for k, v in got.items()} == pytest.approx(
                expected, abs=1e-12), (measure, options)
    # by hand: (3/7 + 0) / 2 for mul; the pooled conditional share ignores the plain input
    assert head_pattern_scores(maps, sequences)["induction"] == pytest.approx(3 / 14)
    assert head_pattern_scores(maps, sequences, measure="conditional")["induction"] == 1.0
    # options apply per sequence (the detector's own list path drops them): with
    # exclude_bos the short input's BOS rows leave, (1 + 0) / 2
    assert head_pattern_scores(maps, sequences, exclude_bos=True)["induction"] == \
        pytest.approx(0.5)


def test_abs_rounds_to_three_decimals():
    tokens = [1, 2, 3, 4]
    U = uniform_causal(4)
    # |U - D| sums to 1 + 1 + 4/3 + 3/2 = 29/6 over 4 rows; * 4 / 16 = 1.2083 -> 1.208
    assert head_pattern_scores(U, tokens, measure="abs")["previous_token"] == \
        pytest.approx(1 - 1.208, abs=1e-15)
    # with the BOS column out: row 0 (1), row 1 (1/2 + 1/2 -> 1/2 left), ... by the loop
    assert head_pattern_scores(U, tokens, measure="abs", exclude_bos=True)[
        "previous_token"] == tl_score(U, tl_patterns(tokens)["previous_token"],
                                      exclude_bos=True, measure="abs")
    with pytest.raises(ValueError, match="measure='abs' needs causal attention"):
        head_pattern_scores(np.full((4, 4), 0.25), tokens, measure="abs")


def test_option_errors():
    assert SCORE_MEASURES == ("mul", "abs", "conditional")
    with pytest.raises(ValueError, match="measure must be one of 'mul', 'abs', 'conditional'"):
        head_pattern_scores(np.eye(3), [1, 2, 3], measure="max")
    with pytest.raises(ValueError, match="attention must be a list of as many arrays"):
        head_pattern_scores(np.eye(3), [[1, 2, 3], [1, 2, 3]])
    with pytest.raises(ValueError, match="score_measure must be one of"):
        profile_heads("default", n_inputs=1, max_length=8, score_measure="max")


def test_profile_columns_are_the_detectors_mean_over_inputs():
    from intrinsic_rank.nn import attention_maps, load_default_model

    lm = load_default_model()
    rng = np.random.default_rng(3)
    half = rng.integers(0, 64, size=(3, 10))
    ids = np.concatenate([half, half], axis=1)
    profile = profile_heads(lm, ids)
    maps = attention_maps(lm, ids)
    for rec in profile.records[::3]:
        layer, head = rec["layer"], rec["head"]
        expected = tl_mean_scores([m[layer, head] for m in maps], [list(t) for t in ids])
        for name in HEAD_PATTERNS:
            assert rec[f"{name}_score"] == pytest.approx(expected[name], abs=1e-6)
    conditional = head_pattern_scores(list(maps), list(ids), measure="conditional")
    assert profile.records[5]["induction_conditional_score"] == pytest.approx(
        float(conditional["induction"][1, 1]), abs=1e-9)
