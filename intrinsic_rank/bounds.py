"""Closed-form theory (numpy only): deficiency floors of the Entropic Bound,
Min-IP feature-rank bounds and reachable-sequence counts.

Nothing here imports torch, so the bounds can be evaluated without it.
"""

import numbers

import numpy as np

__all__ = [
    "tail_energy",
    "fixed_operator_deficiency",
    "transcript_bound",
    "approximate_identity_rank_bound",
    "witness_feature_rank_bound",
    "precision_from_dtype",
    "reachable_log_count_bound",
    "reachable_slope_bound",
    "box_log_count_bound",
    "box_slope_bound",
    "hidden_state_geometry",
]


def _spectrum(singular_values):
    s = np.asarray(singular_values, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty 1-D array; got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("singular_values must be finite and nonnegative")
    return np.sort(s)[::-1]


def tail_energy(singular_values, rank):
    """Energy beyond the best rank-``r`` approximation: ``sum_{i > r} s_i^2``.

    By the Eckart-Young theorem this is the squared Frobenius distance from a
    matrix to the nearest matrix of rank ``r``.

    Parameters
    ----------
    singular_values : array-like of shape (k,)
        Singular values (any order).
    rank : int
        Rank ``r >= 0`` of the approximation.

    Returns
    -------
    energy : float

    Examples
    --------
    >>> tail_energy([3.0, 2.0, 1.0], rank=1)
    5.0
    """
    s = _spectrum(singular_values)
    if isinstance(rank, bool) or int(rank) != rank or rank < 0:
        raise ValueError(f"rank must be an integer >= 0; got {rank!r}")
    return float(np.sum(s[int(rank):] ** 2))


def fixed_operator_deficiency(operator_singular_values, rank, value_map):
    """Exact excess-risk floor of a rank-``r`` B0 student on a fixed-operator task.

    For ``Y = A* X V* + E`` with isotropic Gaussian ``X`` (SPEC section 2), the
    best student ``A X V`` with ``rank(A) <= r`` has excess risk (mean squared
    error per output entry above the noise floor)

    ``||V*||_F^2 * sum_{i > r} s_i(A*)^2 / (L * d_out)``.

    Derivation: ``vec(A X V) = (V^T kron A) vec(X)`` and ``E[vec X vec X^T] = I``,
    so the excess risk is ``||V*^T kron A* - V^T kron A||_F^2 / (L d_out)``. The
    rearrangement operator maps ``V^T kron A`` to the rank-one matrix
    ``vec(A) vec(V)^T`` isometrically; the best approximation keeps
    ``V = c V*`` and the best rank-``r`` approximation of ``A*``, leaving
    ``||V*||_F^2`` times the tail energy of ``A*``.

    Parameters
    ----------
    operator_singular_values : array-like of shape (L,)
        Singular values of ``A*``; ``L`` is taken as their number.
    rank : int
        Student rank ``r``.
    value_map : array-like of shape (d, d_out)
        The teacher's value map ``V*``.

    Returns
    -------
    floor : float
        The excess-risk floor (zero for ``r >= rank(A*)``).

    Examples
    --------
    >>> import numpy as np
    >>> fixed_operator_deficiency([2.0, 1.0, 0.0], rank=1, value_map=np.eye(2))
    0.3333333333333333
    """
    s = _spectrum(operator_singular_values)
    value_map = np.asarray(value_map, dtype=float)
    if value_map.ndim != 2:
        raise ValueError(f"value_map must be 2-D (d, d_out); got shape {value_map.shape}")
    L, d_out = s.size, value_map.shape[1]
    return float(np.sum(value_map**2) * tail_energy(s, rank) / (L * d_out))


# ---------------------------------------------------------------------------
# Min-IP and nonnegative kernel attention (seed 003, SPEC section 3)
# ---------------------------------------------------------------------------


def _check_count(value, name, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value}")
    return int(value)


def transcript_bound(n_answers, alphabet_size):
    """Finite-precision transcript lower bound ``q * log2(s + 1)`` bits.

    Seed 003 (SPEC section 3): for multi-head, multi-layer sketch models whose
    cross-token channels carry symbols of a finite alphabet, solving ``q``
    independent answers, each taking one of ``s + 1`` values, needs a transcript
    (total bits communicated across tokens) of at least ``q * log2(s + 1)``
    bits: the transcript must distinguish the ``(s + 1)**q`` joint answers.

    Parameters
    ----------
    n_answers : int
        Number ``q >= 1`` of independent answers.
    alphabet_size : int
        ``s >= 0``, as in the paper: every answer takes ``s + 1`` values.

    Returns
    -------
    bits : float
        The lower bound on the transcript length, in bits.

    Examples
    --------
    >>> transcript_bound(10, 3)
    20.0
    >>> transcript_bound(5, 0)
    0.0
    """
    q = _check_count(n_answers, "n_answers", 1)
    s = _check_count(alphabet_size, "alphabet_size", 0)
    return float(q * np.log2(s + 1))


def approximate_identity_rank_bound(n, eps):
    """Approximate-identity lemma: ``rank(A) >= n / (1 + (n - 1) eps^2)``.

    For a real ``n x n`` matrix ``A`` with unit diagonal and off-diagonal entries
    of absolute value at most ``eps``: the ``k <= rank(A)`` nonzero eigenvalues
    sum to ``tr(A) = n``, and by Cauchy-Schwarz and Schur's inequality
    ``n^2 = |sum lambda_i|^2 <= k sum |lambda_i|^2 <= rank(A) ||A||_F^2``, with
    ``||A||_F^2 <= n + n (n - 1) eps^2``. This is the step of seed 003
    (SPEC section 3) that turns kernel-weight dominance into a feature-rank
    bound.

    Parameters
    ----------
    n : int
        Size ``n >= 1`` of the matrix.
    eps : float
        Bound ``eps >= 0`` on the off-diagonal magnitudes.

    Returns
    -------
    bound : float
        The lower bound on ``rank(A)`` (rank is an integer, so ``rank(A)`` is at
        least its ceiling).

    Examples
    --------
    >>> approximate_identity_rank_bound(10, 0.0)
    10.0
    >>> approximate_identity_rank_bound(10, 1 / 3)
    5.0
    """
    n = _check_count(n, "n", 1)
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, numbers.Real):
        raise ValueError(f"eps must be a real number >= 0; got {eps!r}")
    if not np.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0; got {eps}")
    return float(n / (1.0 + (n - 1) * float(eps) ** 2))


def _constant_weight_overlaps(codewords):
    c = np.asarray(codewords)
    if c.ndim != 2:
        raise ValueError(
            f"codewords must be 2-D (n_codewords, n_bits); got shape {c.shape}"
        )
    if c.shape[0] < 3 or c.shape[1] < 2:
        raise ValueError(
            "codewords must hold at least 3 words of at least 2 bits; "
            f"got shape {c.shape}"
        )
    if c.dtype != bool and not np.issubdtype(c.dtype, np.number):
        raise ValueError(
            f"tokens must be Boolean (0/1); codewords have dtype {c.dtype}"
        )
    if not np.all((c == 0) | (c == 1)):
        raise ValueError("tokens must be Boolean (0/1); codewords hold other values")
    c = c.astype(np.float64)
    weights = c.sum(axis=1)
    if np.any(weights != weights[0]):
        raise ValueError("codewords must form a constant-weight code")
    if np.unique(c, axis=0).shape[0] != c.shape[0]:
        raise ValueError("codewords must be distinct")
    return np.rint(c @ c.T).astype(np.int64), int(weights[0])


def _full_family_reach(overlaps, weight, gap):
    """Reach sets when every valid witness triple of the code is solved.

    For query ``q`` the relations are ``a -> b`` for all candidates ``a, b != q``
    with ``<q, b> = <q, a> + gap``; from a candidate at overlap ``v`` the chains
    reach every candidate at overlap ``v + t gap`` for ``t = 1, 2, ...`` as long as
    each intermediate level holds a candidate.
    """
    n = overlaps.shape[0]
    counts = np.zeros((n, weight + 1), dtype=np.int64)
    for v in range(weight + 1):
        counts[:, v] = np.count_nonzero(overlaps == v, axis=1)
    counts[:, weight] -= 1  # the query itself
    # steps[q, v]: how many consecutive levels v + gap, v + 2 gap, ... are populated.
    steps = np.zeros((n, weight + 1 + gap), dtype=np.int64)
    for v in range(weight - gap, -1, -1):
        steps[:, v] = np.where(counts[:, v + gap] > 0, 1 + steps[:, v + gap], 0)
    steps = steps[:, : weight + 1]
    return counts, steps


def _restricted_reach(overlaps, gap, triples):
    """Reach sets of the relations ``a -> b`` given by explicit witness triples."""
    t = np.asarray(triples)
    n = overlaps.shape[0]
    if t.ndim != 2 or t.shape[1] != 3 or not np.issubdtype(t.dtype, np.integer):
        raise ValueError(
            f"triples must be an integer array of shape (k, 3); got shape {t.shape}"
        )
    if t.size and (t.min() < 0 or t.max() >= n):
        raise ValueError(f"triples must index the {n} codewords")
    q, a, b = t.T
    valid = (a != q) & (b != q) & (overlaps[q, b] == overlaps[q, a] + gap)
    if not np.all(valid):
        raise ValueError(
            f"triples must be witnesses (query, better, worse) with "
            f"<q, better> + gap == <q, worse>; row {int(np.argmin(valid))} is not"
        )
    successors = {}
    for qi, ai, bi in np.unique(t, axis=0).tolist():
        successors.setdefault(qi, {}).setdefault(ai, set()).add(bi)
    reach = {}
    for qi, edges in successors.items():
        memo = {}

        def closure(node):
            if node not in memo:
                out = set()
                for nxt in edges.get(node, ()):
                    out.add(nxt)
                    out |= closure(nxt)
                memo[node] = out
            return memo[node]

        # Overlaps rise by `gap` along every edge, so the recursion depth is at
        # most n_bits / gap.
        reach[qi] = {node: closure(node) for node in edges}
    return reach


def _chain_steps(overlaps, queries, keys, gap):
    """Chain lengths ``k_ij = (<q_i, z_j> - <q_i, z_i>) / gap`` of a certificate."""
    rows = overlaps[queries[:, None], keys[None, :]]
    return (rows - overlaps[queries, keys][:, None]) // gap


class _Certificate(dict):
    """A dict with attribute access (like sklearn's Bunch, without sklearn)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def witness_feature_rank_bound(
    codewords, gap=1, ratio=None, triples=None, return_info=False
):
    """Feature-rank lower bound implied by a Min-IP witness code (seed 003).

    Setting (SPEC section 3): a normalised nonnegative kernel head with kernel
    ``alpha(x, z) = <phi_Q(x), phi_K(z)> >= 0`` of feature rank ``r`` answers the
    length-3 witnesses (two candidates ``a, b``, then the query ``q``, with
    ``<q, a> + gap = <q, b>``) built by ``make_min_ip_witness_suite`` in
    :mod:`intrinsic_rank.datasets`. The matrix ``K[x, z] = alpha(x, z)`` has
    rank at most ``r``.

    **Assumption (dominance with margin ``ratio``), not proved here.** Every
    witness ``(q; a, b)`` of the family is solved with
    ``alpha(q, a) >= ratio * alpha(q, b)`` and ``alpha(q, a) > 0``, with feature
    maps shared by the two candidate positions (as in the students of this
    package, which have no positional information). With ``ratio = 2`` the
    better candidate gets at least 2/3 of the two candidates' normalised
    weight. Be aware that this is a modelling choice: for a readout that
    averages the candidates' overlaps, error < 1/2 only forces
    ``alpha(q, a) > (2 gap - 1) alpha(q, b)``, i.e. a ratio just above 1 when
    ``gap = 1`` (``ratio = 2`` then corresponds to error < 1/3). The paper's
    gap-domination lemma, which derives the ratio from error < 1/2 for any
    affine readout, is not reproduced.

    **Argument (rigorous given the assumption).**

    1. Amplification over Boolean overlaps: for query ``q``, if candidates
       ``c_0, ..., c_k`` have overlaps ``<q, c_t> = <q, c_0> + t gap`` and every
       consecutive ``(q; c_t, c_{t+1})`` is a witness of the family, then
       ``alpha(q, c_0) >= ratio**k alpha(q, c_k)``. Every chain from ``z`` to
       ``z'`` has the same length ``k = (<q, z'> - <q, z>) / gap``.
    2. Pairs ``(q_i, z_i)``, ``i = 1..n``, such that for all ``i != j`` a chain
       leads from ``z_i`` to ``z_j`` for query ``q_i`` (length ``k_ij >= 1``).
       Scaling row ``i`` of the submatrix ``K[q_i, z_j]`` by
       ``1 / alpha(q_i, z_i)`` gives a matrix ``M`` of rank ``<= r`` with unit
       diagonal and ``0 <= M_ij <= ratio**(-k_ij)``.
    3. Approximate identity (:func:`approximate_identity_rank_bound`, in its
       entrywise form ``rank(M) >= tr(M)^2 / ||M||_F^2``):
       ``r >= n^2 / (n + sum_{i != j} ratio**(-2 k_ij))``.

    The pairs are chosen greedily from the code (for each query, the candidates
    with the largest reach; then a greedy clique of mutually dominated pairs,
    keeping its best prefix), so the value is a valid bound under the
    assumption but not necessarily the best this argument gives.

    For the default suite (``make_min_ip_witness_suite(random_state=0)``: 24
    bits, weight 12, 400 codewords) the full family gives about 27.9 (so
    ``r >= 28``) with ``ratio = 2`` and about 11.0 with ``ratio = 1.5``; the
    1272 sampled triples alone (``triples=info.triples``) give only 1.6, since
    few chains of sampled witnesses exist. These numbers follow from the
    assumption above and are not the paper's bound (``r >= 8`` for its own
    construction).

    Parameters
    ----------
    codewords : array-like of shape (n_codewords, n_bits)
        A constant-weight code of distinct 0/1 words (``info.codewords`` of a
        witness suite).
    gap : int, default=1
        Overlap gap of the witnesses.
    ratio : float or None, default=None
        Dominance margin, ``> 1``; ``None`` means 2.
    triples : array-like of shape (k, 3) or None, default=None
        Witnesses assumed solved, as indices (query, better, worse) into
        ``codewords`` (``info.triples`` of a suite). ``None`` means every valid
        witness triple of the code (the full family).
    return_info : bool, default=False
        Also return a dict with attribute access holding the certificate:
        ``queries`` and ``candidates`` (codeword indices of the pairs
        ``(q_i, z_i)``), ``steps`` (the ``k_ij``, 0 on the
        diagonal), ``offdiag_bound`` (``ratio**(-k_ij)``), ``ratio``, ``gap``,
        ``n_pairs``.

    Returns
    -------
    bound : float
        Lower bound on the feature rank ``r`` (0.0 when no witness exists; the
        rank is an integer, so ``r`` is at least its ceiling).
    info : dict with attribute access, only if ``return_info``

    Examples
    --------
    All six words of weight 2 in 4 bits: complements overlap in 0 bits, other
    pairs in 1. The pairs ``(q, complement of q)``, one per complementary pair,
    dominate each other with ``k = 1``: ``r >= 3 / (1 + 2 / 4) = 2``.

    >>> import itertools
    >>> import numpy as np
    >>> code = np.array([[int(i in s) for i in range(4)]
    ...                  for s in itertools.combinations(range(4), 2)])
    >>> witness_feature_rank_bound(code)
    2.0
    """
    overlaps, weight = _constant_weight_overlaps(codewords)
    gap = _check_count(gap, "gap", 1)
    if ratio is None:
        ratio = 2.0
    if isinstance(ratio, (bool, np.bool_)) or not isinstance(ratio, numbers.Real):
        raise ValueError(f"ratio must be a real number > 1; got {ratio!r}")
    if not np.isfinite(ratio) or ratio <= 1:
        raise ValueError(f"ratio must be a finite number > 1; got {ratio}")
    ratio = float(ratio)
    n_codewords = overlaps.shape[0]
    others = ~np.eye(n_codewords, dtype=bool)

    # Candidate pairs (q, z) with their reach sets R(q, z) (boolean rows).
    queries, keys, reach_rows = [], [], []
    if triples is None:
        counts, steps = _full_family_reach(overlaps, weight, gap)
        for q in range(n_codewords):
            # Reach size of a candidate at overlap v: the candidates on the
            # populated levels v + gap, ..., v + steps[q, v] * gap.
            size_of_level = np.array([
                counts[q, v + gap * np.arange(1, steps[q, v] + 1)].sum()
                for v in range(weight + 1)
            ])
            reach_size = np.where(others[q], size_of_level[overlaps[q]], 0)
            if reach_size.max() == 0:
                continue
            for z in np.flatnonzero(reach_size == reach_size.max()):
                diff = overlaps[q] - overlaps[q, z]
                row = (
                    others[q] & (diff > 0) & (diff % gap == 0)
                    & (diff <= gap * steps[q, overlaps[q, z]])
                )
                queries.append(q)
                keys.append(z)
                reach_rows.append(row)
    else:
        for q, nodes in _restricted_reach(overlaps, gap, triples).items():
            sizes = {z: len(r) for z, r in nodes.items()}
            best = max(sizes.values())
            for z in sorted(z for z, s in sizes.items() if s == best):
                row = np.zeros(n_codewords, dtype=bool)
                row[list(nodes[z])] = True
                queries.append(q)
                keys.append(z)
                reach_rows.append(row)

    if not queries:
        bound, chosen = 0.0, np.zeros(0, dtype=np.int64)
        queries = keys = np.zeros(0, dtype=np.int64)
    else:
        queries, keys = np.array(queries), np.array(keys)
        reach = np.array(reach_rows)
        # dominated[i, j]: a chain leads from z_i to z_j for query q_i.
        dominated = reach[:, keys]
        compatible = dominated & dominated.T
        np.fill_diagonal(compatible, False)
        k = _chain_steps(overlaps, queries, keys, gap)
        mass = np.where(compatible, ratio ** (-2.0 * np.where(compatible, k, 0)), 0.0)
        mass = mass + mass.T  # both ordered pairs (i, j) and (j, i)

        # Greedy clique in the compatibility graph, keeping the best prefix.
        candidate = np.ones(len(queries), dtype=bool)
        degree = compatible.sum(axis=1).astype(np.int64)
        added_mass = np.zeros(len(queries))
        order, total, best, best_size = [], 0.0, 0.0, 0
        while candidate.any():
            pool = np.flatnonzero(candidate)
            # Most compatible candidates first, then the least added mass.
            pick = pool[np.lexsort((added_mass[pool], -degree[pool]))[0]]
            order.append(pick)
            total += added_mass[pick]
            size = len(order)
            value = size**2 / (size + total)
            if value > best:
                best, best_size = value, size
            dropped = candidate & ~compatible[pick]
            candidate &= compatible[pick]
            degree -= compatible[:, dropped].sum(axis=1)
            added_mass += mass[:, pick]
        bound, chosen = float(best), np.array(order[:best_size])
        queries, keys = queries[chosen], keys[chosen]
    if not return_info:
        return bound
    steps_ij = _chain_steps(overlaps, queries, keys, gap)
    off_diagonal = ~np.eye(len(queries), dtype=bool)
    return bound, _Certificate(
        queries=queries,
        candidates=keys,
        steps=steps_ij,
        offdiag_bound=np.where(off_diagonal, ratio ** (-steps_ij.astype(float)), 1.0),
        ratio=ratio,
        gap=gap,
        n_pairs=len(queries),
    )


# ---------------------------------------------------------------------------
# Reachable output sequences (seed 004, SPEC section 4)
# ---------------------------------------------------------------------------

# Machine epsilon (spacing of the floats in [1, 2)) of each supported format.
_MACHINE_EPSILON = {
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
    "float32": 2.0**-23,
    "float64": 2.0**-52,
}
# C / torch names: "float" is 32 bits here, unlike ``np.dtype("float")``.
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64"}


def precision_from_dtype(dtype):
    """Machine epsilon of a floating dtype, the ``epsilon`` of seed 004's bounds.

    Parameters
    ----------
    dtype : numpy dtype, numpy scalar type or str
        ``np.float16``, ``np.dtype("float32")``, ... or a name: ``"float16"``
        (``"half"``), ``"bfloat16"``, ``"float32"`` (``"float"``),
        ``"float64"`` (``"double"``), optionally prefixed ``"torch."`` so that
        ``str(torch_dtype)`` works without this module importing torch (a torch
        dtype object itself is read through its ``str``). String names follow
        C and torch: ``"float"`` means 32 bits, whereas the Python type
        ``float`` (through numpy) means 64 bits.

    Returns
    -------
    epsilon : float
        ``2**-10`` (float16), ``2**-7`` (bfloat16), ``2**-23`` (float32) or
        ``2**-52`` (float64): the gap between 1 and the next representable
        number.

    Notes
    -----
    Seed 004 uses this number as an *absolute* cell size ``epsilon`` in the
    hidden-state units (its table uses ``epsilon = 2**-10`` for fp16). The true
    spacing of floats near a value ``x`` is about ``|x| * epsilon``: for hidden
    states with ``|x| > 1`` the real cells are coarser and the bounds of this
    module stay upper bounds, for ``|x| < 1`` they are finer and the convention
    is not a strict bound. See :func:`reachable_log_count_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> precision_from_dtype(np.float16) == 2**-10
    True
    >>> precision_from_dtype("torch.bfloat16")
    0.0078125
    >>> precision_from_dtype("double") == float(np.finfo(np.float64).eps)
    True
    """
    if dtype is None or isinstance(dtype, (bool, np.bool_)):
        name = None
    elif isinstance(dtype, str):
        name = dtype.strip().lower()
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype).strip().lower()
    if name is not None:
        name = name.removeprefix("torch.")
        name = _DTYPE_ALIASES.get(name, name)
    if name not in _MACHINE_EPSILON:
        raise ValueError(
            f"dtype must be a floating dtype: float16 ('half'), bfloat16, "
            f"float32 ('float') or float64 ('double'), optionally prefixed "
            f"'torch.'; got {dtype!r}"
        )
    return _MACHINE_EPSILON[name]


def _check_real(value, name, *, low, high=None, low_inclusive=True):
    """A finite real number in ``[low, high)`` (or ``(low, high)``)."""
    interval = ("[" if low_inclusive else "(") + f"{low}, " + (
        f"{high})" if high is not None else "inf)"
    )
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number in {interval}; got {value!r}")
    value = float(value)
    too_low = value < low if low_inclusive else value <= low
    if not np.isfinite(value) or too_low or (high is not None and value >= high):
        raise ValueError(f"{name} must be a finite number in {interval}; got {value}")
    return value


def _check_precision(precision):
    return _check_real(precision, "precision", low=0.0, high=1.0, low_inclusive=False)


def _log_vocab(vocab_size):
    return float(np.log(_check_count(vocab_size, "vocab_size", 2)))


def _cells_per_memory_vector(widths, precision):
    """``sum_i ln(1 + w_i / epsilon)``: log number of cells of a box."""
    w = np.asarray(widths, dtype=float)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"widths must be a non-empty 1-D array; got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("widths must be finite and nonnegative")
    return float(np.sum(np.log1p(w / precision)))


def reachable_log_count_bound(width, n_memory, radius, precision):
    """Log of the reachable-sequence bound ``(1 + 2r/epsilon)**(d m)`` (Thm. 4.5).

    Seed 004 (SPEC section 4): a frozen Transformer of width ``d`` whose
    output depends on ``m`` trainable ``d``-dimensional memory vectors, run at
    precision ``epsilon`` with hidden states in a region of radius ``r``, can
    produce at most ``(1 + 2r/epsilon)**(d m)`` distinct output sequences,
    whatever the prompt and however long the output. ``(1 + 2r/epsilon)**d``
    is the packing bound for cells of size ``epsilon`` in a ball of radius
    ``r``; with ``r`` the largest infinity-norm (as
    :func:`hidden_state_geometry` measures it) the states lie in the cube
    ``[-r, r]**d``, which holds exactly ``(1 + 2r/epsilon)**d`` cells per
    axis-aligned grid, so the count is the box bound
    :func:`box_log_count_bound` with every width ``2r``.

    Parameters
    ----------
    width : int
        Model width ``d >= 1``.
    n_memory : int
        Number ``m >= 1`` of memory (soft prompt) vectors.
    radius : float
        ``r >= 0``, in hidden-state units.
    precision : float
        ``epsilon`` in ``(0, 1)``: an absolute cell size in hidden-state units,
        usually :func:`precision_from_dtype` (machine epsilon, seed 004's
        convention; the paper's table uses ``2**-10``, fp16). Floats near ``x``
        are spaced about ``|x| * epsilon`` apart, so for ``|x| > 1`` the real
        cells are coarser and this remains an upper bound, while for
        ``|x| < 1`` they are finer and the convention is not a strict bound.

    Returns
    -------
    log_count : float
        ``d * m * ln(1 + 2r/epsilon)``, in nats (natural log of the number of
        sequences); ``exp`` of it is the bound itself, which overflows a float
        for realistic sizes.

    Examples
    --------
    Three memory vectors of width 2, ``r = 2``, ``epsilon = 1/2``: each
    coordinate has ``1 + 2r/epsilon = 9`` cells, so at most ``9**6`` sequences.

    >>> import math
    >>> round(math.exp(reachable_log_count_bound(2, 3, radius=2.0, precision=0.5)))
    531441
    >>> round(reachable_log_count_bound(64, 4, radius=4.0, precision=2**-10), 1)
    2306.8
    """
    d = _check_count(width, "width", 1)
    m = _check_count(n_memory, "n_memory", 1)
    r = _check_real(radius, "radius", low=0.0)
    eps = _check_precision(precision)
    return float(d * m * np.log1p(2.0 * r / eps))


def reachable_slope_bound(width, vocab_size, radius, precision):
    """Upper bound ``C <= d ln(1 + 2r/epsilon) / ln|V|`` on the slope of ``n*(m)``.

    Corollary 4.6 of seed 004 (SPEC section 4): all ``|V|**n`` sequences of
    length ``n`` can be reachable only if ``|V|**n <= (1 + 2r/epsilon)**(d m)``
    (:func:`reachable_log_count_bound`), so the reachable length grows at most
    like ``n* ~ C m`` with this ``C``. Compare it with the measured slope of
    ``n50`` against ``m``; seed 004 reports theory/experiment ratios of 4.5 to
    20.4.

    Parameters
    ----------
    width : int
        Model width ``d >= 1``.
    vocab_size : int
        Vocabulary size ``|V| >= 2``.
    radius : float
        ``r >= 0``, in hidden-state units.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (see :func:`reachable_log_count_bound` for the machine-epsilon
        convention and when it is a strict bound).

    Returns
    -------
    slope : float
        ``C``, in tokens of reachable length per memory vector.

    Examples
    --------
    >>> round(reachable_slope_bound(64, 64, radius=4.0, precision=2**-10), 2)
    138.67
    """
    d = _check_count(width, "width", 1)
    log_v = _log_vocab(vocab_size)
    r = _check_real(radius, "radius", low=0.0)
    eps = _check_precision(precision)
    return float(d * np.log1p(2.0 * r / eps) / log_v)


def box_log_count_bound(widths, n_memory, precision):
    """Log reachable-sequence count for an axis-aligned box support (seed 004).

    Refinement of :func:`reachable_log_count_bound` (SPEC section 4): if the
    hidden states lie in a box whose coordinate ``i`` spans ``w_i`` (as
    :func:`hidden_state_geometry` measures), each memory vector contributes
    ``prod_i (1 + w_i/epsilon)`` cells instead of ``(1 + 2r/epsilon)**d``. With
    every ``w_i = 2r`` the two bounds coincide; since ``w_i <= 2r`` for the
    infinity-norm radius ``r``, the box bound is never larger.

    Parameters
    ----------
    widths : array-like of shape (d,)
        Ranges ``w_i >= 0`` (max - min) of the hidden coordinates, in
        hidden-state units.
    n_memory : int
        Number ``m >= 1`` of memory vectors.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (see :func:`reachable_log_count_bound` for the machine-epsilon
        convention).

    Returns
    -------
    log_count : float
        ``m * sum_i ln(1 + w_i/epsilon)``, in nats.

    Examples
    --------
    A 2 x 4 box with ``epsilon = 1/2`` holds ``5 * 9 = 45`` cells; two memory
    vectors give ``45**2`` sequences.

    >>> import math
    >>> round(math.exp(box_log_count_bound([2.0, 4.0], n_memory=2, precision=0.5)))
    2025
    """
    m = _check_count(n_memory, "n_memory", 1)
    eps = _check_precision(precision)
    return float(m * _cells_per_memory_vector(widths, eps))


def box_slope_bound(widths, vocab_size, precision):
    """Slope bound ``C <= sum_i ln(1 + w_i/epsilon) / ln|V|`` for a box support.

    The box refinement (seed 004, SPEC section 4) of
    :func:`reachable_slope_bound`, from the count of
    :func:`box_log_count_bound`.

    Parameters
    ----------
    widths : array-like of shape (d,)
        Ranges ``w_i >= 0`` (max - min) of the hidden coordinates, in
        hidden-state units.
    vocab_size : int
        Vocabulary size ``|V| >= 2``.
    precision : float
        ``epsilon`` in ``(0, 1)``, an absolute cell size in hidden-state units
        (see :func:`reachable_log_count_bound` for the machine-epsilon
        convention).

    Returns
    -------
    slope : float
        ``C``, in tokens of reachable length per memory vector.

    Examples
    --------
    Widths ``2r = 8`` on all 64 axes reproduce :func:`reachable_slope_bound`:

    >>> round(box_slope_bound([8.0] * 64, vocab_size=64, precision=2**-10), 2)
    138.67
    """
    log_v = _log_vocab(vocab_size)
    eps = _check_precision(precision)
    return float(_cells_per_memory_vector(widths, eps) / log_v)


def hidden_state_geometry(hidden_states):
    """Radius and per-coordinate box of a set of final hidden states.

    Measures the support that seed 004's bounds need (SPEC section 4): the
    radius ``r`` is the largest infinity-norm over all states (the paper
    measures it over random prompts), the box is the per-coordinate range.

    Parameters
    ----------
    hidden_states : array-like of shape (..., d)
        Final hidden states, ``d >= 1`` the model width; all leading axes
        (prompts, positions, ...) are pooled. A 1-D array is one state.

    Returns
    -------
    geometry : dict with attribute access
        ``radius`` (float, ``max |x_i|`` over states and coordinates),
        ``widths`` (array of shape (d,), per-coordinate max - min), ``center``
        (array of shape (d,), per-coordinate midpoint (max + min) / 2) and
        ``n_states`` (number of states pooled), all in hidden-state units.
        ``widths <= 2 * radius`` always.

    Examples
    --------
    >>> import numpy as np
    >>> g = hidden_state_geometry(np.array([[1.0, -3.0], [2.0, 1.0]]))
    >>> g.radius, g.widths.tolist(), g.center.tolist()
    (3.0, [1.0, 4.0], [1.5, -1.0])
    """
    h = np.asarray(hidden_states, dtype=np.float64)
    if h.ndim < 1 or h.shape[-1] < 1:
        raise ValueError(
            "hidden_states must be at least 1-D with a last axis (the width d) "
            f"of size >= 1; got shape {h.shape}"
        )
    h = h.reshape(-1, h.shape[-1])
    if h.shape[0] == 0:
        raise ValueError(f"hidden_states holds no states; got shape {h.shape}")
    if not np.all(np.isfinite(h)):
        raise ValueError("hidden_states must be finite (no NaN or inf)")
    low, high = h.min(axis=0), h.max(axis=0)
    return _Certificate(
        radius=float(np.max(np.abs(h))),
        widths=high - low,
        center=(high + low) / 2.0,
        n_states=int(h.shape[0]),
    )
