"""Theory bounds of the Min-IP paper: transcript, approximate identity, witness rank."""

import itertools
import math
from collections import deque

import numpy as np
import pytest

from intrinsic_rank import bounds
from intrinsic_rank.datasets import make_min_ip_witness_suite


def _weight_code(n_bits, weight):
    return np.array([[int(i in s) for i in range(n_bits)]
                     for s in itertools.combinations(range(n_bits), weight)])


# ----------------------------------------------------------------- transcript


@pytest.mark.parametrize(
    "q, s, bits", [(10, 3, 20.0), (1, 1, 1.0), (3, 0, 0.0), (4, 7, 12.0), (2, 2, 2 * np.log2(3))]
)
def test_transcript_bound_values(q, s, bits):
    assert bounds.transcript_bound(q, s) == pytest.approx(bits)


# ----------------------------------------------------------------- approximate identity


def test_approximate_identity_exact_values():
    assert bounds.approximate_identity_rank_bound(7, 0.0) == 7.0
    assert bounds.approximate_identity_rank_bound(7, 1.0) == 1.0
    assert bounds.approximate_identity_rank_bound(1, 0.9) == 1.0
    assert bounds.approximate_identity_rank_bound(10, 1 / 3) == pytest.approx(5.0)
    # rank-1 all-ones matrix: unit diagonal, eps = 1, and the bound is attained
    assert np.linalg.matrix_rank(np.ones((7, 7))) >= bounds.approximate_identity_rank_bound(7, 1.0)


def test_approximate_identity_holds_on_random_matrices():
    rng = np.random.RandomState(0)
    for _ in range(30):
        n = rng.randint(2, 40)
        # identity plus small symmetric noise
        noise = rng.uniform(-1, 1, size=(n, n))
        noise = (noise + noise.T) / 2
        np.fill_diagonal(noise, 0)
        eps = rng.uniform(0, 0.5)
        A = np.eye(n) + eps * noise / np.abs(noise).max()
        assert np.linalg.matrix_rank(A) >= bounds.approximate_identity_rank_bound(n, eps) - 1e-9
        # rank-deficient: Gram matrix of n unit vectors in d < n dimensions
        d = rng.randint(1, n)
        V = rng.standard_normal((n, d))
        V /= np.linalg.norm(V, axis=1, keepdims=True)
        G = V @ V.T
        off = np.abs(G[~np.eye(n, dtype=bool)]).max()
        assert np.linalg.matrix_rank(G) == d
        assert d >= bounds.approximate_identity_rank_bound(n, off) - 1e-9
        # non-symmetric low rank with rows scaled to a unit diagonal
        B = rng.uniform(0.5, 1.5, size=(n, d)) @ rng.uniform(0.5, 1.5, size=(d, n))
        B /= np.diag(B)[:, None]
        off = np.abs(B[~np.eye(n, dtype=bool)]).max()
        assert np.linalg.matrix_rank(B) >= bounds.approximate_identity_rank_bound(n, off) - 1e-9


# ----------------------------------------------------------------- witness rank


def test_witness_bound_on_the_complement_code_by_hand():
    # Weight-2 words of 4 bits: complements overlap 0, all other pairs 1. The
    # pairs (q, complement q), one per complementary pair, dominate each other
    # with one gap step: r >= 3 / (1 + 2 * ratio**-2).
    code = _weight_code(4, 2)
    assert bounds.witness_feature_rank_bound(code) == pytest.approx(2.0)
    assert bounds.witness_feature_rank_bound(code, ratio=4) == pytest.approx(3 / (1 + 2 / 16))
    bound, cert = bounds.witness_feature_rank_bound(code, return_info=True)
    assert cert.n_pairs == 3
    for q, z in zip(cert.queries, cert.candidates):
        assert code[q] @ code[z] == 0  # each key is its query's complement


def _reach_by_bfs(codewords, gap):
    """Chain lengths of the full witness family, by breadth-first search."""
    O = codewords @ codewords.T
    n = len(codewords)
    reach = {}
    for q in range(n):
        cand = [c for c in range(n) if c != q]
        for z in cand:
            depth = {z: 0}
            queue = deque([z])
            while queue:
                a = queue.popleft()
                for b in cand:
                    if O[q, b] == O[q, a] + gap and b not in depth:
                        depth[b] = depth[a] + 1
                        queue.append(b)
            reach[q, z] = depth
    return O, reach


@pytest.mark.parametrize("gap", [1, 2])
def test_witness_certificate_checked_independently(gap):
    _, _, info = make_min_ip_witness_suite(n_bits=10, n_codewords=24, n_sequences=5,
                                           gap=gap, random_state=0, return_info=True)
    C = info.codewords
    ratio = 2.0
    bound, cert = bounds.witness_feature_rank_bound(C, gap=gap, return_info=True)
    assert bound >= 1.0
    O, reach = _reach_by_bfs(C, gap)
    n = cert.n_pairs
    assert len(set(cert.queries)) == n and len(set(cert.candidates)) == n
    for i, j in itertools.permutations(range(n), 2):
        qi, zi, zj = cert.queries[i], cert.candidates[i], cert.candidates[j]
        depth = reach[qi, zi]
        assert zj in depth and depth[zj] >= 1  # a chain of witnesses leads there
        assert depth[zj] == cert.steps[i, j] == (O[qi, zj] - O[qi, zi]) // gap
    off = ~np.eye(n, dtype=bool)
    expected = n**2 / (n + np.sum(ratio ** (-2.0 * cert.steps[off])))
    assert bound == pytest.approx(expected)
    # The same relations given as explicit triples give the same bound.
    triples = np.array([(q, a, b) for q in range(len(C)) for a in range(len(C))
                        for b in range(len(C))
                        if q not in (a, b) and O[q, b] == O[q, a] + gap])
    assert bounds.witness_feature_rank_bound(C, gap=gap, triples=triples) == pytest.approx(bound)
    # A kernel meeting the assumption with equality on every witness,
    # alpha(q, z) = ratio**(-<q, z> / gap), respects the certificate and has
    # rank at least the bound on it.
    K = ratio ** (-O[np.ix_(cert.queries, cert.candidates)] / gap)
    M = K / np.diag(K)[:, None]
    assert np.all(M <= cert.offdiag_bound + 1e-12)
    assert np.linalg.matrix_rank(M) >= bound - 1e-9


def test_witness_bound_default_suite_and_sampled_triples():
    _, _, info = make_min_ip_witness_suite(random_state=0, return_info=True)
    full, cert = bounds.witness_feature_rank_bound(info.codewords, return_info=True)
    sampled = bounds.witness_feature_rank_bound(info.codewords, triples=info.triples)
    # The full family of the 400-word code at ratio 2, from the definition: the chosen
    # pairs (q_i, z_i) dominate each other through chains of k_ij = (<q_i, z_j> -
    # <q_i, z_i>) / gap >= 1 witnesses, and r >= n^2 / (n + sum_{i != j} 2^(-2 k_ij)).
    code = np.asarray(info.codewords, dtype=np.int64)
    q, z = code[cert.queries], code[cert.candidates]
    overlaps = q @ z.T
    steps = (overlaps - np.diag(overlaps)[:, None]) // cert.gap
    n = len(q)
    assert n == cert.n_pairs and np.array_equal(steps, cert.steps)
    assert (steps[~np.eye(n, dtype=bool)] >= 1).all()
    off = 2.0 ** (-2.0 * steps[~np.eye(n, dtype=bool)])
    assert full == pytest.approx(n**2 / (n + off.sum()), rel=1e-12)
    assert math.ceil(full) == 28  # the docstring's "r >= 28"
    assert 1.0 <= sampled < full
    assert bounds.witness_feature_rank_bound(info.codewords, ratio=1.5) < full


def test_witness_bound_without_any_witness():
    # Three weight-1 words: every overlap between distinct words is 0, no gap.
    code = np.eye(3)
    assert bounds.witness_feature_rank_bound(code) == 0.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bounds.transcript_bound(0, 3), "n_answers must be an integer >= 1"),
        (lambda: bounds.transcript_bound(2.5, 3), "n_answers must be an integer"),
        (lambda: bounds.transcript_bound(True, 3), "n_answers must be an integer"),
        (lambda: bounds.transcript_bound(3, -1), "alphabet_size must be an integer >= 0"),
        (lambda: bounds.approximate_identity_rank_bound(0, 0.1), "n must be an integer >= 1"),
        (lambda: bounds.approximate_identity_rank_bound(5, -0.1), r"eps must be a finite real number in \[0.0, inf\)"),
        (lambda: bounds.approximate_identity_rank_bound(5, np.nan), "eps must be a finite"),
        (lambda: bounds.approximate_identity_rank_bound(5, "x"), "eps must be a finite real number"),
        (lambda: bounds.witness_feature_rank_bound(_weight_code(4, 2), ratio=1.0), "ratio must be"),
        (lambda: bounds.witness_feature_rank_bound(_weight_code(4, 2), gap=0), "gap must be"),
        (lambda: bounds.witness_feature_rank_bound([[1, 0, 0], [1, 1, 0], [0, 1, 1]]), "constant-weight"),
        (lambda: bounds.witness_feature_rank_bound([[1, 0, 0], [1, 0, 0], [0, 1, 0]]), "distinct"),
        (lambda: bounds.witness_feature_rank_bound([[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), r"Boolean \(0/1\)"),
        (lambda: bounds.witness_feature_rank_bound(np.ones(4)), "must be 2-D"),
        (lambda: bounds.witness_feature_rank_bound(_weight_code(4, 2), triples=[[0, 1, 2]]),
         "must be witnesses"),
        (lambda: bounds.witness_feature_rank_bound(_weight_code(4, 2), triples=[[0, 5, 9]]),
         "must index"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
