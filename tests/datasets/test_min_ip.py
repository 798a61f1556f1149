"""Min-IP generators: exact targets and witness invariants."""

import itertools
import math

import numpy as np
import pytest

from intrinsic_rank.datasets import (
    make_min_ip,
    make_min_ip_family_pools,
    make_min_ip_pools,
    make_min_ip_witness_suite,
    min_ip_targets,
    witness_length2,
)


def _brute_force_targets(X):
    n, L, _ = X.shape
    out = np.empty((n, L))
    for s in range(n):
        for i in range(L):
            out[s, i] = min(int(X[s, i] @ X[s, j]) for j in range(L))
    return out


def _all_triples(codewords, gap):
    O = codewords @ codewords.T
    n = len(codewords)
    return {
        (q, a, b)
        for q in range(n)
        for a in range(n)
        for b in range(n)
        if q not in (a, b) and O[q, b] == O[q, a] + gap
    }


# ----------------------------------------------------------------- targets


@pytest.mark.parametrize(
    "sequence, expected",
    [
        # <x1,.> = (2, 1, 1); <x2,.> = (1, 1, 0); <x3,.> = (1, 0, 2)
        ([[1, 1, 0], [1, 0, 0], [0, 1, 1]], [1, 0, 0]),
        # <x1,.> = (3, 2); <x2,.> = (2, 2): the query's own overlap counts
        ([[1, 1, 1], [1, 1, 0]], [2, 2]),
        # a single token: its own weight
        ([[1, 0, 1, 1]], [3]),
        # the zero token forces 0 everywhere
        ([[0, 0], [1, 1], [1, 0]], [0, 0, 0]),
        # disjoint tokens
        ([[1, 0, 0], [0, 1, 1], [1, 0, 0]], [0, 0, 0]),
    ],
)
def test_targets_by_hand(sequence, expected):
    X = np.array([sequence])
    np.testing.assert_array_equal(min_ip_targets(X)[0, :, 0], expected)
    np.testing.assert_array_equal(min_ip_targets(X, target="final"), [expected[-1]])
    np.testing.assert_array_equal(min_ip_targets(X.astype(bool))[0, :, 0], expected)


def test_targets_match_brute_force_and_shapes():
    X, Y = make_min_ip(n_samples=40, seq_len=5, n_bits=6, density=0.4, random_state=3)
    assert X.dtype == np.float64 and Y.dtype == np.float64
    assert X.shape == (40, 5, 6) and Y.shape == (40, 5, 1)
    np.testing.assert_array_equal(Y[:, :, 0], _brute_force_targets(X))
    _, y = make_min_ip(n_samples=40, seq_len=5, n_bits=6, density=0.4,
                       target="final", random_state=3)
    assert y.shape == (40,)
    np.testing.assert_array_equal(y, Y[:, -1, 0])


# ----------------------------------------------------------------- make_min_ip


def test_make_min_ip_seeded_bernoulli_tokens():
    X1, Y1, info = make_min_ip(n_samples=2000, seq_len=3, n_bits=8, density=0.3,
                               random_state=0, return_info=True)
    X2, Y2 = make_min_ip(n_samples=2000, seq_len=3, n_bits=8, density=0.3, random_state=0)
    X3, _ = make_min_ip(n_samples=2000, seq_len=3, n_bits=8, density=0.3, random_state=1)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(Y1, Y2)
    assert not np.array_equal(X1, X3)
    assert set(np.unique(X1)) == {0.0, 1.0}
    assert X1.mean() == pytest.approx(0.3, abs=0.01)
    assert (info.kind, info.n_bits, info.seq_len, info.target) == ("min_ip", 8, 3, "all")


def test_exhaustive_count_and_lexicographic_order():
    X, Y, info = make_min_ip(n_samples=3, n_bits=2, seq_len=2, exhaustive=True,
                             return_info=True)
    assert X.shape == (16, 2, 2) and Y.shape == (16, 2, 1) and info.exhaustive
    tokens = [(0, 0), (0, 1), (1, 0), (1, 1)]
    expected = [list(seq) for seq in itertools.product(tokens, repeat=2)]
    np.testing.assert_array_equal(X, np.array(expected, dtype=float))
    assert X[1].tolist() == [[0, 0], [0, 1]] and X[4].tolist() == [[0, 1], [0, 0]]
    np.testing.assert_array_equal(Y[:, :, 0], _brute_force_targets(X))
    # e.g. ((1,1), (1,0)): <x1,.> = (2, 1), <x2,.> = (1, 1)
    assert Y[14, :, 0].tolist() == [1.0, 1.0]
    X3, y3 = make_min_ip(n_bits=3, seq_len=3, exhaustive=True, target="final")
    assert X3.shape == (512, 3, 3) and y3.shape == (512,)
    assert np.unique(X3.reshape(512, -1), axis=0).shape[0] == 512


# ----------------------------------------------------------------- witness suite


def test_witness_suite_invariants():
    X, y, info = make_min_ip_witness_suite(random_state=0, return_info=True)
    n, w = 1272, 12
    assert X.shape == (n, 3, 24) and y.shape == (n,)
    assert info.weight == w and info.gap == 1 and info.n_bits == 24
    C = info.codewords
    assert C.shape == (400, 24)
    np.testing.assert_array_equal(C.sum(axis=1), w)
    assert np.unique(C, axis=0).shape[0] == 400
    np.testing.assert_array_equal(X.sum(axis=2), w)  # every token is a codeword
    q, a, b = info.triples.T
    assert np.all(q != a) and np.all(q != b) and np.all(a != b)
    assert np.unique(info.triples, axis=0).shape[0] == n  # no duplicate triple
    np.testing.assert_array_equal(X[:, 2], C[q])  # query last
    rows = np.arange(n)
    np.testing.assert_array_equal(X[rows, info.better_position], C[a])
    np.testing.assert_array_equal(X[rows, 1 - info.better_position], C[b])
    assert 0.4 < info.better_position.mean() < 0.6  # random order of candidates
    qa = np.einsum("nd,nd->n", C[q], C[a])
    qb = np.einsum("nd,nd->n", C[q], C[b])
    np.testing.assert_array_equal(info.overlaps, np.stack([qa, qb], axis=1))
    np.testing.assert_array_equal(qa + 1, qb)
    assert np.all(qb < w)  # the query's own overlap is strictly the largest
    np.testing.assert_array_equal(y, qa)
    np.testing.assert_array_equal(y, min_ip_targets(X, "final"))


def test_witness_suite_seeds_targets_and_prefix():
    X1, y1 = make_min_ip_witness_suite(n_bits=12, n_codewords=60, n_sequences=200,
                                       random_state=5)
    X2, y2 = make_min_ip_witness_suite(n_bits=12, n_codewords=60, n_sequences=200,
                                       random_state=5)
    X3, _ = make_min_ip_witness_suite(n_bits=12, n_codewords=60, n_sequences=200,
                                      random_state=6)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3)
    X4, _ = make_min_ip_witness_suite(n_bits=12, n_codewords=60, n_sequences=300,
                                      random_state=5)
    np.testing.assert_array_equal(X4[:200], X1)  # a larger suite extends the same one
    Xa, Ya = make_min_ip_witness_suite(n_bits=12, n_codewords=60, n_sequences=200,
                                       target="all", random_state=5)
    np.testing.assert_array_equal(Xa, X1)
    assert Ya.shape == (200, 3, 1)
    np.testing.assert_array_equal(Ya[:, :, 0], _brute_force_targets(Xa))
    np.testing.assert_array_equal(Ya[:, -1, 0], y1)


@pytest.mark.parametrize("gap", [1, 2])
def test_witness_suite_draws_exactly_the_valid_triples(gap):
    # Small code: asking for every valid triple must return each exactly once.
    _, _, info = make_min_ip_witness_suite(n_bits=8, n_codewords=12, n_sequences=1,
                                           gap=gap, random_state=2, return_info=True)
    expected = _all_triples(info.codewords, gap)
    assert info.n_valid_triples == len(expected)
    _, y, full = make_min_ip_witness_suite(n_bits=8, n_codewords=12,
                                           n_sequences=len(expected), gap=gap,
                                           random_state=2, return_info=True)
    assert {tuple(t) for t in full.triples.tolist()} == expected
    np.testing.assert_array_equal(full.overlaps[:, 0] + gap, full.overlaps[:, 1])
    np.testing.assert_array_equal(y, full.overlaps[:, 0])
    with pytest.raises(ValueError, match=f"only {len(expected)} valid"):
        make_min_ip_witness_suite(n_bits=8, n_codewords=12,
                                  n_sequences=len(expected) + 1, gap=gap, random_state=2)


def test_witness_suite_on_given_codewords_and_large_sample_path():
    code = np.array([[int(i in s) for i in range(6)]
                     for s in itertools.combinations(range(6), 3)])
    X, y, info = make_min_ip_witness_suite(n_sequences=50, codewords=code,
                                           random_state=0, return_info=True)
    np.testing.assert_array_equal(info.codewords, code)
    assert info.weight == 3 and info.n_bits == 6 and X.shape == (50, 3, 6)
    # More than 2**20 valid triples: the rejection-sampling path.
    _, _, big = make_min_ip_witness_suite(n_bits=16, n_codewords=300, n_sequences=500,
                                          random_state=0, return_info=True)
    assert big.n_valid_triples > 2**20
    assert np.unique(big.triples, axis=0).shape[0] == 500
    np.testing.assert_array_equal(big.overlaps[:, 0] + 1, big.overlaps[:, 1])


def test_disjoint_pools():
    X_tr, y_tr, X_te, y_te, info = make_min_ip_pools(
        n_bits=16, n_train_codewords=80, n_test_codewords=60,
        n_train_sequences=400, n_test_sequences=200, random_state=0)
    assert X_tr.shape == (400, 3, 16) and X_te.shape == (200, 3, 16)
    assert y_tr.shape == (400,) and y_te.shape == (200,)
    train_words = {row.tobytes() for row in info.train_codewords}
    test_words = {row.tobytes() for row in info.test_codewords}
    assert len(train_words) == 80 and len(test_words) == 60
    assert not train_words & test_words
    train_tokens = {row.tobytes() for row in X_tr.reshape(-1, 16)}
    test_tokens = {row.tobytes() for row in X_te.reshape(-1, 16)}
    assert train_tokens <= train_words and test_tokens <= test_words
    assert not train_tokens & test_tokens
    np.testing.assert_array_equal(y_te, info.test.overlaps[:, 0])
    np.testing.assert_array_equal(info.train.codewords.sum(axis=1), 8)
    again = make_min_ip_pools(n_bits=16, n_train_codewords=80, n_test_codewords=60,
                              n_train_sequences=400, n_test_sequences=200,
                              random_state=0)
    np.testing.assert_array_equal(again[2], X_te)


def test_one_pool_function_for_suites_and_families():
    # make_min_ip_family_pools is make_min_ip_pools(family=True) with its own defaults
    a = make_min_ip_pools(n_bits=12, n_train_codewords=8, n_test_codewords=8, family=True,
                          min_gap=2, random_state=0)
    b = make_min_ip_family_pools(n_bits=12, n_train_codewords=8, n_test_codewords=8,
                                 min_gap=2, random_state=0)
    for x, y in zip(a[:4], b[:4]):
        np.testing.assert_array_equal(x, y)
    assert a[4].kind == b[4].kind == "min_ip_family_pools" and a[4].min_gap == 2
    # the whole family of each pool, every sequence a witness or an anchor of that pool
    assert len(a[0]) == a[4].train.n_witnesses + a[4].train.n_anchors
    train_words = {row.tobytes() for row in a[4].train_codewords}
    assert {row.tobytes() for row in a[2].reshape(-1, 12)}.isdisjoint(train_words)
    # a suite draws 1000 and 500 witnesses unless told otherwise
    X_tr, _, X_te, _, info = make_min_ip_pools(n_bits=16, n_train_codewords=80,
                                               n_test_codewords=60, random_state=0)
    assert (len(X_tr), len(X_te), info.kind, info.gap) == (1000, 500, "min_ip_pools", 1)


def test_length2_witnesses_and_their_rank1_solution():
    X, y, info = make_min_ip_witness_suite(n_bits=10, n_codewords=40, n_sequences=150,
                                           random_state=1, return_info=True)
    X2, y2 = witness_length2(X, info)
    C = info.codewords
    np.testing.assert_array_equal(X2[:, 0], C[info.triples[:, 1]])  # better candidate
    np.testing.assert_array_equal(X2[:, 1], C[info.triples[:, 0]])  # query last
    np.testing.assert_array_equal(y2, y)
    _, Y2 = witness_length2(X, info, target="all")
    np.testing.assert_array_equal(Y2[:, :, 0], _brute_force_targets(X2))
    # Rank-1 head (uniform kernel weights), values v(z) = z and the affine readout
    # a(q) = 2q, b(q) = -|q|: (2<q,a> - |q| + 2<q,q> - |q|) / 2 = <q,a>, exactly.
    a, q = X2[:, 0], X2[:, 1]
    values = 0.5 * (a + q)  # normalised uniform attention over the two tokens
    prediction = np.einsum("nd,nd->n", 2 * q, values) - q.sum(axis=1)
    np.testing.assert_array_equal(prediction, y2)
    with pytest.raises(ValueError, match="does not match info"):
        witness_length2(X[::-1], info)
    with pytest.raises(ValueError, match="must have shape"):
        witness_length2(X[:10], info)


# ----------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", [0.5, np.nan, 2.0, -1.0])
def test_non_boolean_tokens_are_rejected(bad):
    X = np.zeros((2, 3, 4))
    X[1, 2, 3] = bad
    with pytest.raises(ValueError, match=r"tokens must be Boolean \(0/1\)"):
        min_ip_targets(X)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: min_ip_targets(np.zeros((3, 4))), "X must be 3-D"),
        (lambda: min_ip_targets(np.zeros((1, 0, 4))), "no empty axis"),
        (lambda: min_ip_targets(np.array([[["a"]]])), r"Boolean \(0/1\)"),
        (lambda: min_ip_targets(np.zeros((1, 2, 2)), target="first"), "unknown target"),
        (lambda: make_min_ip(target="mean"), "unknown target"),
        (lambda: make_min_ip(n_bits=0), "n_bits must be an integer in \\[1, 64\\]"),
        (lambda: make_min_ip(n_bits=65), "n_bits must be an integer in \\[1, 64\\]"),
        (lambda: make_min_ip(seq_len=0), "seq_len must be an integer >= 1"),
        (lambda: make_min_ip(n_samples=2.5), "n_samples must be an integer"),
        (lambda: make_min_ip(density=0.0), "density must be a finite real number in \\(0, 1\\)"),
        (lambda: make_min_ip(density=1.0), "density must be"),
        (lambda: make_min_ip(n_bits=7, seq_len=3, exhaustive=True),
         r"2\*\*21 = 2097152 sequences"),
        (lambda: make_min_ip_witness_suite(target="all_of_them"), "unknown target"),
        (lambda: make_min_ip_witness_suite(n_bits=1), "n_bits must be an integer in"),
        (lambda: make_min_ip_witness_suite(n_bits=80), "n_bits must be an integer in"),
        (lambda: make_min_ip_witness_suite(n_bits=8, weight=8), "weight must be"),
        (lambda: make_min_ip_witness_suite(gap=0), "gap must be an integer >= 1"),
        (lambda: make_min_ip_witness_suite(n_bits=6, n_codewords=21),
         r"only C\(6, 3\) = 20 distinct words"),
        (lambda: make_min_ip_witness_suite(n_bits=8, n_codewords=10,
                                           n_sequences=10**6), "only .* valid"),
        (lambda: make_min_ip_witness_suite(codewords=[[1, 0, 0], [1, 1, 0], [0, 1, 1]]),
         "constant-weight"),
        (lambda: make_min_ip_witness_suite(codewords=[[1, 0, 0], [1, 0, 0], [0, 1, 0]]),
         "distinct"),
        (lambda: make_min_ip_witness_suite(codewords=[[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                                           weight=2), "weight=2 but"),
        (lambda: make_min_ip_witness_suite(codewords=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]),
         r"Boolean \(0/1\)"),
        (lambda: make_min_ip_pools(n_bits=6, n_train_codewords=15, n_test_codewords=10),
         r"only C\(6, 3\) = 20"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_constant_weight_code_size_check_uses_binomial():
    assert math.comb(6, 3) == 20
    X, _ = make_min_ip_witness_suite(n_bits=6, n_codewords=20, n_sequences=10,
                                     random_state=0)
    assert X.shape == (10, 3, 6)
