"""Non-uniform decoder cells: the cell-volume refinement of the reachability paper (numpy only).

A decoder splits the hidden-state region into one cell per next token. With
``p_t`` the fraction of the region that goes to token ``t`` (estimated by Monte
Carlo: sample the region, apply the decision rule, count), the cell of a random
``k``-token sequence has a typical volume ``exp(-c k)`` of the region, and the
box slope bound ``C_box`` (which counts cells of a uniform decoder, ``c =
ln|V|``) becomes ``C_cell = C_box ln|V| / c``.

This module is the model-free side: regions to sample, the two decision rules
on given arrays, the proportions and the decay ``c``.
"""

from collections.abc import Mapping

import numpy as np

from .._validation import check_int, check_random_state, check_real, child_seeds
from ._common import Certificate, finite_result

__all__ = [
    "sample_box",
    "sample_ball",
    "argmax_cells",
    "nearest_row_cells",
    "cell_proportions",
    "cell_decay",
    "cell_slope_bound",
]

_DEFAULT_MAX_ELEMENTS = 2**22  # logits held at once by the decision rules (32 MiB)


def _finite_vector(value, name):
    v = np.asarray(value, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return v


def sample_box(low, high, n, random_state=None):
    """``n`` points drawn uniformly from the box ``[low, high]`` (one row each).

    Parameters
    ----------
    low, high : array-like of shape (d,)
        The box's corners, e.g. the per-coordinate min and max of the final
        hidden states (``geometry.center -/+ geometry.widths / 2`` from
        :func:`~intrinsic_rank.bounds.hidden_state_geometry`). ``high > low`` in
        every coordinate: a box of zero width has no volume to split into cells.
    n : int
        Number of points, ``n >= 1``.
    random_state : None, int or numpy.random.RandomState, default=None

    Returns
    -------
    points : ndarray of shape (n, d)

    Examples
    --------
    >>> pts = sample_box([0.0, -1.0], [1.0, 1.0], 1000, random_state=0)
    >>> pts.shape, bool(pts.min(axis=0)[1] >= -1.0), bool(pts.max(axis=0)[0] <= 1.0)
    ((1000, 2), True, True)
    """
    lo = _finite_vector(low, "low")
    hi = _finite_vector(high, "high")
    if lo.shape != hi.shape:
        raise ValueError(f"low and high must have the same shape; got {lo.shape} and {hi.shape}")
    flat = np.flatnonzero(hi <= lo)
    if flat.size:
        raise ValueError(
            f"high must exceed low in every coordinate (a region of zero width has no "
            f"volume); {flat.size} coordinate(s) fail, first at index {int(flat[0])}"
        )
    count = check_int(n, "n", 1)
    rng = check_random_state(random_state)
    u = rng.random_sample((count, lo.size))
    with np.errstate(over="ignore"):
        width = hi - lo
    if np.all(np.isfinite(width)):
        return lo + u * width
    # A box wider than float64's range (low < 0 < high, both huge): the convex
    # combination of opposite-signed corners cannot overflow.
    return np.where(np.isfinite(width), lo + u * width, (1.0 - u) * lo + u * hi)


def sample_ball(center, radius, d, n, random_state=None):
    """``n`` points drawn uniformly from the Euclidean ball of ``radius`` about ``center``.

    A Gaussian direction scaled by ``radius * U**(1/d)``, ``U`` uniform on (0, 1).

    Parameters
    ----------
    center : None or array-like of shape (d,)
        The ball's centre; ``None`` is the origin.
    radius : float
        ``radius > 0`` (a ball of radius 0 has no volume).
    d : int
        Dimension ``d >= 1``.
    n : int
        Number of points, ``n >= 1``.
    random_state : None, int or numpy.random.RandomState, default=None

    Returns
    -------
    points : ndarray of shape (n, d)

    Examples
    --------
    >>> import numpy as np
    >>> pts = sample_ball(None, 2.0, 3, 500, random_state=0)
    >>> pts.shape, bool(np.linalg.norm(pts, axis=1).max() <= 2.0)
    ((500, 3), True)
    """
    dim = check_int(d, "d", 1)
    r = check_real(radius, "radius", 0.0, low_open=True)
    count = check_int(n, "n", 1)
    if center is None:
        c = np.zeros(dim)
    else:
        c = _finite_vector(center, "center")
        if c.size != dim:
            raise ValueError(f"center must have shape ({dim},) to match d; got {c.shape}")
    rng = check_random_state(random_state)
    direction = rng.standard_normal((count, dim))
    norms = np.linalg.norm(direction, axis=1, keepdims=True)
    direction /= np.where(norms > 0, norms, 1.0)
    scale = r * rng.random_sample((count, 1)) ** (1.0 / dim)
    with np.errstate(over="ignore"):
        points = c + direction * scale
    if not np.all(np.isfinite(points)):
        raise ValueError(
            "center and radius reach beyond float64's range (|center| + radius > "
            f"{np.finfo(np.float64).max:.4g}); rescale them"
        )
    return points


def _points_and_weight(points, weight, max_elements):
    h = np.asarray(points, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if h.ndim != 2 or h.shape[0] == 0 or h.shape[1] == 0:
        raise ValueError(f"points must be a non-empty 2-D array (n, d); got shape {h.shape}")
    if w.ndim != 2 or w.shape[0] == 0:
        raise ValueError(
            f"weight must be a non-empty 2-D array (vocab_size, d); got shape {w.shape}"
        )
    if w.shape[1] != h.shape[1]:
        raise ValueError(
            f"weight must have d = {h.shape[1]} columns to match points; got shape {w.shape}"
        )
    if not np.all(np.isfinite(h)):
        raise ValueError("points must be finite (no NaN or inf)")
    if not np.all(np.isfinite(w)):
        raise ValueError("weight must be finite (no NaN or inf)")
    cap = check_int(max_elements, "max_elements", 1)
    return h, w, max(1, cap // w.shape[0])


_SAFE_EXPONENT = 250  # |entries| in [2**-250, 2**250]: logits neither overflow nor underflow


def _exponent(amax):
    """``e`` with ``amax / 2**e`` in ``[0.5, 1)`` outside ``[2**-250, 2**250]``, else 0."""
    _, e = np.frexp(amax)
    outside = (amax > 0) & ((amax < 2.0**-_SAFE_EXPONENT) | (amax > 2.0**_SAFE_EXPONENT))
    return np.where(outside, e, 0)


def _argmax_rows(h, w, b, rows, *, scale_rows=True):
    """``argmax(h @ w.T + b)`` per row, in chunks, safe at the float limits.

    The argmax is unchanged when a row's logits are all multiplied by the same
    power of two, so ``w`` (as a whole) and, with ``scale_rows``, each row of
    ``h`` whose largest entry lies outside ``[2**-250, 2**250]`` are scaled by
    one first (exactly), with ``b`` scaled to match; at ordinary scales nothing
    is scaled and the logits are the plain ``h @ w.T + b``.
    """
    e_w = int(_exponent(np.max(np.abs(w))))
    e_h = _exponent(np.max(np.abs(h), axis=1)) if scale_rows else np.zeros(h.shape[0], int)
    if e_w:
        w = np.ldexp(w, -e_w)
    if np.any(e_h):
        h = np.ldexp(h, -e_h[:, None])
    elif e_w and b is not None:
        with np.errstate(over="ignore", under="ignore"):
            b = np.ldexp(b, -e_w)
        e_w = 0
    out = np.empty(h.shape[0], dtype=np.intp)
    for start in range(0, h.shape[0], rows):
        logits = h[start:start + rows] @ w.T
        if b is not None:
            if np.any(e_h):
                with np.errstate(over="ignore", under="ignore"):
                    logits += np.ldexp(b[None, :], -(e_w + e_h[start:start + rows, None]))
            else:
                logits += b
        out[start:start + rows] = np.argmax(logits, axis=1)
    return out


def argmax_cells(points, weight, bias=None, *, max_elements=_DEFAULT_MAX_ELEMENTS):
    """Next token of each point under the real decision rule ``argmax(W h + b)``.

    Parameters
    ----------
    points : array-like of shape (n, d)
        Hidden states (e.g. from :func:`sample_box` or :func:`sample_ball`).
    weight : array-like of shape (vocab_size, d)
        The unembedding ``W``, one row per token (the layout of a torch
        ``Linear`` head's ``weight``).
    bias : None or array-like of shape (vocab_size,), default=None
        The head's bias ``b``; ``None`` is no bias.
    max_elements : int, default=2**22
        At most about this many logits are held at once (the points are taken
        in chunks of ``max(1, max_elements // vocab_size)`` rows).

    Returns
    -------
    tokens : ndarray of shape (n,), integer
        ``argmax_t (W h + b)_t`` for each point; a tie goes to the lowest id.

    Examples
    --------
    Rows of different norm: the longer row wins more than its Voronoi share.

    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 3.0]])
    >>> argmax_cells(np.array([[1.0, 0.5], [2.0, 0.1]]), W).tolist()
    [1, 0]
    """
    h, w, rows = _points_and_weight(points, weight, max_elements)
    b = None
    if bias is not None:
        b = _finite_vector(bias, "bias")
        if b.size != w.shape[0]:
            raise ValueError(
                f"bias must have shape ({w.shape[0]},) to match weight; got {b.shape}"
            )
    return _argmax_rows(h, w, b, rows)


def nearest_row_cells(points, weight, *, max_elements=_DEFAULT_MAX_ELEMENTS):
    """Next token of each point as the Euclidean-nearest unembedding row (Voronoi cells).

    The authors' rule (``voronoi_visualizer/voronoi_volume.py``). It is
    ``argmax_t (w_t . h - |w_t|**2 / 2)``, so it equals :func:`argmax_cells`
    only when every row has the same norm (and there is no bias).

    Parameters
    ----------
    points : array-like of shape (n, d)
    weight : array-like of shape (vocab_size, d)
        One row per token.
    max_elements : int, default=2**22
        At most about this many distances are held at once.

    Returns
    -------
    tokens : ndarray of shape (n,), integer
        ``argmin_t |h - w_t|``; a tie goes to the lowest id.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 3.0]])
    >>> nearest_row_cells(np.array([[1.0, 0.5], [2.0, 0.1]]), W).tolist()
    [0, 0]
    """
    h, w, rows = _points_and_weight(points, weight, max_elements)
    # Distances scale together: one power of two for points and rows alike
    # (exact), where their largest entry lies outside the safe range.
    e = int(_exponent(max(np.max(np.abs(h)), np.max(np.abs(w)))))
    if e:
        h, w = np.ldexp(h, -e), np.ldexp(w, -e)
    with np.errstate(under="ignore"):
        return _argmax_rows(h, w, -0.5 * np.einsum("ij,ij->i", w, w), rows, scale_rows=False)


def cell_proportions(assignments, vocab_size):
    """Fraction ``p_t`` of Monte Carlo points that the decoder sends to each token.

    Parameters
    ----------
    assignments : array-like of int
        The next-token id of each point sampled uniformly in the region (e.g.
        :func:`argmax_cells` of :func:`sample_box`); any shape, flattened.
    vocab_size : int
        ``|V| >= 2``; every id must lie in ``[0, |V|)``.

    Returns
    -------
    cells : dict with attribute access
        ``proportions`` (array of shape ``(|V|,)``, ``counts / n_samples``, summing
        to 1), ``counts`` (int array), ``n_empty`` (tokens no point reached: an
        estimated empty cell), ``n_samples`` and ``vocab_size``.

    Examples
    --------
    >>> cells = cell_proportions([0, 0, 1, 3], vocab_size=4)
    >>> cells.proportions.tolist(), cells.n_empty
    ([0.5, 0.25, 0.0, 0.25], 1)
    """
    v = check_int(vocab_size, "vocab_size", 2)
    a = np.asarray(assignments)
    if a.size == 0:
        raise ValueError("assignments must hold at least one token id; got an empty array")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"assignments must be integer token ids; got dtype {a.dtype}")
    a = a.ravel()
    bad = np.flatnonzero((a < 0) | (a >= v))
    if bad.size:
        raise ValueError(
            f"assignments must lie in [0, vocab_size={v}); got {int(a[bad[0]])} "
            f"at index {int(bad[0])}"
        )
    counts = np.bincount(a, minlength=v)
    return Certificate(
        proportions=counts / a.size,
        counts=counts,
        n_empty=int(np.count_nonzero(counts == 0)),
        n_samples=int(a.size),
        vocab_size=v,
    )


def _closed_form(p):
    return float(-np.mean(np.log(p)))


def _median_log_volume(log_p, max_k, n_sequences, rng):
    """Median over random sequences of ``sum_i ln p_{t_i}``, for ``k = 1..max_k``."""
    tokens = rng.randint(log_p.size, size=(n_sequences, max_k))
    return np.median(np.cumsum(log_p[tokens], axis=1), axis=0)


def _fit_decay(ks, med):
    slope, intercept = np.polyfit(ks, med, 1)
    resid = med - (slope * ks + intercept)
    total = np.sum((med - med.mean()) ** 2)
    r2 = 1.0 - float(np.sum(resid**2) / total) if total > 0 else 1.0
    return float(-slope), r2


def cell_decay(proportions, n_samples=None, *, max_k=16, n_sequences=10_000,
               n_bootstrap=100, random_state=0):
    """Decay rate ``c`` of a random sequence's cell volume, ``~ exp(-c k)``, two ways.

    With ``p_t`` the share of the region in token ``t``'s cell, a ``k``-token
    sequence ``t_1..t_k`` owns a share ``prod_i p_{t_i}`` of the ``k``-fold
    product of regions.

    * ``closed_form``: ``c = -mean_t ln p_t``, the mean over tokens (each
      equally likely) of ``-ln p_t``; ``c >= ln N`` for ``N`` non-empty cells,
      with equality for equal cells.
    * ``fitted`` (the authors' ``cell_convolution.py`` and bounds notebook):
      the median over random sequences (tokens drawn uniformly among the
      non-empty cells) of ``ln prod_i p_{t_i}`` for ``k = 1..max_k``, fitted
      by least squares with a line in ``k``; ``c = -slope``. The authors compute
      the median of the exact (compressed) product distribution; here it is
      taken over ``n_sequences`` sampled sequences. For a small vocabulary the
      median of this discrete distribution sits on one of its atoms, a small
      deterministic bias that ``fitted_se`` does not fully cover (measured with
      the defaults on Dirichlet-distributed cells: at most 0.7% of ``c`` at
      ``|V| = 20``, 0.3% at 64, 0.15% at 1000); the closed form has none and
      is the default of :func:`cell_slope_bound`.

    **Empty cells** (tokens that no Monte Carlo point reached) are excluded from
    both, as the authors do, and counted in ``n_empty``. Excluding them lowers
    ``c`` and so raises :func:`cell_slope_bound`: the conservative side for an
    upper bound.

    Parameters
    ----------
    proportions : array-like of shape (vocab_size,) or mapping
        ``p_t >= 0`` summing to 1, or the result of :func:`cell_proportions`
        (its ``proportions`` and ``n_samples`` are used).
    n_samples : int, optional
        The Monte Carlo sample count behind ``proportions``, which sets the
        standard errors; required unless ``proportions`` is a mapping that
        holds it.
    max_k : int, default=16
        Longest sequence of the fit, ``>= 2``.
    n_sequences : int, default=10000
        Random sequences per median.
    n_bootstrap : int, default=100
        Parametric bootstrap replicates for the standard errors: each draws
        counts ``~ Multinomial(n_samples, p)`` (empty cells of a replicate are
        excluded as above) and, for ``fitted``, fresh sequences, so the errors
        cover the Monte Carlo noise of both the cells and the sequences. 0
        skips it (standard errors NaN, as with 1). A bootstrap rather than the delta
        method, whose first-order term vanishes at equal cells.
    random_state : None, int or numpy.random.RandomState, default=0
        Seeds the sequences and the bootstrap (two independent streams, so the
        estimates do not depend on ``n_bootstrap``).

    Returns
    -------
    decay : dict with attribute access
        ``closed_form``, ``closed_form_se``, ``fitted``, ``fitted_se`` and
        ``fitted_r2`` (nats per token); ``ks`` and ``median_log_volume`` (the
        fitted points); ``n_empty``, ``n_cells`` (non-empty cells),
        ``vocab_size``, ``n_samples``, ``max_k``, ``n_sequences`` and
        ``n_bootstrap``.

    Examples
    --------
    Equal cells decay at exactly ``ln|V|``:

    >>> import math
    >>> decay = cell_decay([0.25] * 4, n_samples=1000, n_bootstrap=0)
    >>> decay.closed_form == math.log(4), round(decay.fitted, 12) == round(math.log(4), 12)
    (True, True)
    """
    if isinstance(proportions, Mapping):
        if n_samples is None:
            n_samples = proportions.get("n_samples")
        proportions = proportions["proportions"]
    p = _finite_vector(proportions, "proportions")
    if p.size < 2:
        raise ValueError(f"proportions must have one entry per token (>= 2); got {p.size}")
    if np.any(p < 0):
        raise ValueError("proportions must be nonnegative")
    if not np.isclose(p.sum(), 1.0, rtol=0.0, atol=1e-6):
        raise ValueError(f"proportions must sum to 1; got {p.sum()!r}")
    if n_samples is None:
        raise ValueError("n_samples is required (the Monte Carlo sample count); got None")
    n = check_int(n_samples, "n_samples", 1)
    k_max = check_int(max_k, "max_k", 2)
    n_seq = check_int(n_sequences, "n_sequences", 1)
    n_boot = check_int(n_bootstrap, "n_bootstrap", 0)
    seq_seed, boot_seed = child_seeds(random_state, 2)

    p = p / p.sum()
    nonempty = p[p > 0]
    ks = np.arange(1, k_max + 1, dtype=float)
    log_p = np.log(nonempty)
    closed = _closed_form(nonempty)
    med = _median_log_volume(log_p, k_max, n_seq, np.random.RandomState(seq_seed))
    fitted, r2 = _fit_decay(ks, med)

    closed_se = fitted_se = float("nan")
    if n_boot:
        rng = np.random.RandomState(boot_seed)
        reps = np.empty((n_boot, 2))
        for i in range(n_boot):
            star = rng.multinomial(n, p)
            star = star[star > 0] / n
            reps[i, 0] = _closed_form(star)
            reps[i, 1] = _fit_decay(ks, _median_log_volume(np.log(star), k_max, n_seq, rng))[0]
        if n_boot > 1:
            closed_se, fitted_se = (float(s) for s in reps.std(axis=0, ddof=1))
    return Certificate(
        closed_form=closed,
        closed_form_se=closed_se,
        fitted=fitted,
        fitted_se=fitted_se,
        fitted_r2=r2,
        ks=ks.astype(int),
        median_log_volume=med,
        n_empty=int(p.size - nonempty.size),
        n_cells=int(nonempty.size),
        vocab_size=int(p.size),
        n_samples=n,
        max_k=k_max,
        n_sequences=n_seq,
        n_bootstrap=n_boot,
    )


def cell_slope_bound(box_slope, vocab_size, decay, *, estimate="closed_form"):
    """Cell-volume refined slope bound ``C_cell = C_box ln|V| / c`` (the reachability paper).

    The box bound counts cells as if every token's cell were equal (a volume
    ``|V|**-k`` for ``k`` tokens); with the measured decay ``c`` of a typical
    ``k``-token cell, ``exp(-c k)``, a memory vector's ``exp(C_box ln|V|)``
    cells reach sequences of length about ``C_box ln|V| / c``.

    Parameters
    ----------
    box_slope : float
        ``C_box >= 0``, :func:`~intrinsic_rank.bounds.box_slope_bound` (tokens
        per memory vector).
    vocab_size : int
        ``|V| >= 2``.
    decay : float or mapping
        ``c > 0`` in nats per token, or the result of :func:`cell_decay`
        (``c = 0`` means a single non-empty cell and is rejected).
    estimate : {"closed_form", "fitted"}, default="closed_form"
        Which entry of a :func:`cell_decay` result to use; ignored for a float.

    Returns
    -------
    slope : float
        ``C_cell``, in tokens per memory vector; equal to ``C_box`` when
        ``c = ln|V|``, below it when the cells are unequal (``c > ln|V|``).

    Examples
    --------
    >>> import math
    >>> cell_slope_bound(100.0, 64, decay=2 * math.log(64))
    50.0
    """
    c_box = check_real(box_slope, "box_slope", 0.0)
    log_v = float(np.log(check_int(vocab_size, "vocab_size", 2)))
    if estimate not in ("closed_form", "fitted"):
        raise ValueError(f"estimate must be 'closed_form' or 'fitted'; got {estimate!r}")
    if isinstance(decay, Mapping):
        decay = decay[estimate]
    if not isinstance(decay, (bool, np.bool_)) and decay == 0:
        raise ValueError(
            "decay must be > 0; got 0.0 (a single non-empty cell: the decoder sends the "
            "whole region to one token)"
        )
    c = check_real(decay, "decay", 0.0, low_open=True)
    return finite_result(lambda: c_box * log_v / c, "the cell slope bound C_box ln|V| / c")
