"""Min-IP phase transition: the feature rank a nonnegative kernel head needs.

Paper: "Three tokens force exponential feature rank in nonnegative kernel
attention". Two experiments, each a pure function returning a
:class:`~sklearn.utils.Bunch` of ``records`` plus ``config``:

* :func:`min_ip_phase_transition`: **in-sample capacity**. Can a normalised
  nonnegative kernel head of feature rank ``r`` fit a witness family? Every
  rank of a grid is trained in one batched optimisation on the whole family
  (``validation_fraction=0``) and scored on the same sequences, at length 3
  and, on the same tokens, at length 2; dense softmax attention is the
  reference.
* :func:`min_ip_ood_scaling`: **out of distribution**. Train on the witness
  family of one codeword pool, score on the family of a disjoint pool, for
  growing bit widths and pools; the transition rank of a setting is the
  smallest rank whose test error reaches a threshold.

:func:`~intrinsic_rank.experiments.plot_min_ip` draws both; the experiment ``min-ip``
(``_transition_experiment``) runs them.

Why this witness family
-----------------------
A suite with one fixed gap ``g``
(:func:`~intrinsic_rank.datasets.make_min_ip_witness_suite`) is solved *exactly by
rank 1*: with uniform attention ``o = (a + b + q) / 3`` and the readout
``1.5 <q, o> - (|q| + g) / 2`` the output is ``(<q, a> + <q, b> - g) / 2 = <q, a>``,
so such a suite cannot separate ranks; and sampled from a large code, each
query occurs in a handful of sequences, which a flexible encoder and readout
can memorise one by one.

:func:`~intrinsic_rank.datasets.make_min_ip_witness_family` is dense in
constraints instead: a small code (16 words by default), *every* triple
``(q; a, b)`` whose overlaps differ by at least ``min_gap = 3`` (the gaps vary,
which defeats the fixed-gap trick) and every anchor ``(u, u, q)``. For a
kernel head without positional maps the output on ``(u, w, q)`` is a weighted
average of the outputs on the anchors ``(u, u, q)`` and ``(w, w, q)``; solving
all three within 1/2 with ``<q, w> - <q, u> = g >= 2`` forces
``alpha(q, u) > (g - 1) alpha(q, w)``. Every kernel row must then order the
candidates by their overlap with its query, and queries disagree, which a rank-1
kernel ``f(q) g(z)`` cannot do (:func:`intrinsic_rank.bounds.witness_feature_rank_bound`
with ratio ``g - 1 = 2`` turns the chains of such constraints into the
certificate stored as ``rank_bound``; for these small codes it only says
``r >= 2``).

Training budget
---------------
The same for the kernel sweep and for dense attention: Adam, ``lr = 1e-3``,
batches of 32, 400 epochs, encoder width 64 (in-sample); ``lr = 3e-3``, batches
of 128, 200 epochs (OOD, whose training sets are larger). ``docs/min_ip.md``
shows what this budget measures, and how it was chosen.
"""

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch

from ..._validation import consecutive_seeds
from ...bounds import witness_feature_rank_bound
from ...datasets import (
    make_min_ip_family_pools,
    make_min_ip_witness_family,
    make_min_ip_witness_suite,
    witness_length2,
)
from ...estimators import AttentionRankEstimator
from ...metrics import exact_sequence_error
from ..runner import progress_steps
from . import OOD_SETTINGS  # declared with the experiment, light for its --help

__all__ = [
    "OOD_SETTINGS",
    "min_ip_ood_scaling",
    "min_ip_phase_transition",
    "min_ip_witness_suite_sweep",
    "summarize_min_ip",
]

_FULL_RANKS = (1, 2, 4, 8, 16, 32, 64)
_QUICK_RANKS = (1, 4, 16)
_QUICK_OOD_RANKS = (1, 4, 16, 64)

_QUICK_OOD_SETTINGS = (
    {"n_bits": 8, "pool": 30, "n_train_sequences": 1000},
    {"n_bits": 12, "pool": 50, "n_train_sequences": 1000},
)


def _check_threshold(threshold):
    if not 0 <= float(threshold) < 1:
        raise ValueError(f"threshold must be in [0, 1); got {threshold!r}")
    return float(threshold)


def _check_ranks(ranks, quick):
    if ranks is None:
        return list(_QUICK_RANKS if quick else _FULL_RANKS)
    ranks = sorted(int(r) for r in ranks)
    if not ranks or ranks[0] < 1 or len(set(ranks)) != len(ranks):
        raise ValueError(f"rank_grid must be distinct integers >= 1; got {ranks!r}")
    return ranks


def _fit(attention, X, y, ranks, seed, budget, device="cpu"):
    """One batched fit of every rank of ``ranks`` on ``(X, y)``; returns the estimator."""
    est = AttentionRankEstimator(
        attention=attention,
        rank_grid=ranks,
        n_init=1,
        validation_fraction=0.0,
        max_epochs=budget["max_epochs"],
        lr=budget["lr"],
        batch_size=min(budget["batch_size"], len(X)),
        student_options={"hidden": budget["hidden"]},
        random_state=seed,
        device=device,
    )
    with warnings.catch_warnings():
        # The sweep's r* selection (on the MSE) is not what this experiment
        # reads; its warnings about the noise floor are noise here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        est.fit(X, y)
    return est


def _outputs(est, X):
    """Final-position outputs of every rank slot, ``(n, R)``, float64."""
    return est.predict_per_rank(X)


def _errors(y, out, anchor):
    """Exact-sequence error on all sequences, the witnesses and the anchors."""
    def part(mask):
        return exact_sequence_error(y[mask], out[mask]) if mask.any() else float("nan")

    everything = np.ones(len(y), dtype=bool)
    return {
        "error": part(everything),
        "witness_error": part(~anchor),
        "anchor_error": part(anchor),
        "mse": float(np.mean((out - y) ** 2)),
    }


def _transition(ranks, errors, threshold):
    """Smallest rank whose (mean) error is at most ``threshold``, or None."""
    for r, e in zip(ranks, errors):
        if e <= threshold:
            return int(r)
    return None


def summarize_min_ip(records, keys, value="error"):
    """Mean, min and max of ``value`` over seeds, per group of ``keys``.

    Parameters
    ----------
    records : list of dict
        Records of :func:`min_ip_phase_transition` or :func:`min_ip_ood_scaling`.
    keys : sequence of str
        Columns that define a group (e.g. ``("length", "model", "rank")``).
    value : str, default="error"
        The column to summarise.

    Returns
    -------
    summary : list of dict
        One dict per group, in first-seen order: the ``keys``, ``n_seeds``,
        ``{value}_mean``, ``{value}_min`` and ``{value}_max``.

    Examples
    --------
    >>> rows = [{"rank": 1, "error": 0.5}, {"rank": 1, "error": 0.3},
    ...         {"rank": 2, "error": 0.0}]
    >>> [(s["rank"], round(s["error_mean"], 2), s["error_max"])
    ...  for s in summarize_min_ip(rows, ["rank"])]
    [(1, 0.4, 0.5), (2, 0.0, 0.0)]
    """
    groups = {}
    for rec in records:
        groups.setdefault(tuple(rec[k] for k in keys), []).append(rec[value])
    summary = []
    for group, values in groups.items():
        values = np.asarray(values, dtype=float)
        row = dict(zip(keys, group))
        row.update({
            "n_seeds": int(len(values)),
            f"{value}_mean": float(np.mean(values)),
            f"{value}_min": float(np.min(values)),
            f"{value}_max": float(np.max(values)),
        })
        summary.append(row)
    return summary


def min_ip_phase_transition(
    rank_grid=None,
    n_seeds=None,
    n_bits=24,
    weight=None,
    n_codewords=16,
    min_gap=3,
    lengths=(3, 2),
    dense=True,
    max_epochs=400,
    lr=1e-3,
    batch_size=32,
    hidden=64,
    threshold=0.05,
    quick=False,
    random_state=0,
    progress=False,
    device="cpu",
):
    """In-sample exact-sequence error of kernel heads against feature rank.

    For each seed, one witness family
    (:func:`~intrinsic_rank.datasets.make_min_ip_witness_family`: a code of
    ``n_codewords`` words of ``n_bits`` bits, every witness with overlap gap
    ``>= min_gap`` and every anchor ``(u, u, q)``; see the module docstring
    for why) is drawn with ``random_state + seed``. At length 3 and at
    length 2 (the same sequences with the worse candidate dropped,
    :func:`~intrinsic_rank.datasets.witness_length2`; anchors become
    ``(u, q)``), a batched :class:`~intrinsic_rank.AttentionRankEstimator`
    sweep of ``attention="kernel"`` trains every feature rank of the grid at
    once on the whole family (``validation_fraction=0``) and each rank is
    scored on the same sequences; with ``dense``, dense softmax attention with
    ``n_bits``-dimensional scores is trained with the same budget.

    Error is the fraction of sequences whose rounded prediction is wrong
    (:func:`~intrinsic_rank.metrics.exact_sequence_error`). This is a capacity
    question (can rank ``r`` fit this family?), not a generalisation one; see
    :func:`min_ip_ood_scaling` for the latter.

    Parameters
    ----------
    rank_grid : sequence of int or None, default=None
        Feature ranks; ``None`` means ``1, 2, 4, ..., 64`` (``1, 4, 16`` when
        ``quick``).
    n_seeds : int or None, default=None
        Number of seeds (families); ``None`` means 3 (2 when ``quick``).
    n_bits, weight, n_codewords, min_gap : int, int or None, int, int
        The witness family (defaults: 24 bits, weight 12, 16 codewords, gap
        ``>= 3``).
    lengths : sequence of {2, 3}, default=(3, 2)
        Sequence lengths to run.
    dense : bool, default=True
        Also train the dense softmax reference.
    max_epochs, lr, batch_size, hidden : int, float, int, int
        Training budget, shared by the kernel sweep and dense attention.
    threshold : float, default=0.05
        The transition rank of a length is the smallest rank whose error,
        averaged over seeds, is at most ``threshold``.
    quick : bool, default=False
        Smaller defaults for ``rank_grid`` and ``n_seeds`` (explicit values win).
    random_state : int, default=0
        Base seed: seed ``s`` uses ``random_state + s`` for the family and the
        training.
    progress : bool, default=False
        Print one line per fit.
    device : str or torch.device, default="cpu"
        Where the heads train (the estimators' ``device``).

    Returns
    -------
    result : Bunch
        ``records``: one dict per (length, seed, model, rank) with ``length``,
        ``seed``, ``model`` (``"kernel"`` or ``"dense"``; a dense record's
        ``rank`` is its score dimension ``n_bits``), ``rank``, ``error``,
        ``witness_error``, ``anchor_error``, ``mse``, ``n_sequences``,
        ``seconds`` (of the whole fit). ``summary``: mean / min / max of
        ``error`` over seeds per (length, model, rank). ``transition``: dict
        length -> transition rank (``None`` when no rank of the grid reaches
        the threshold). ``rank_bound``: per seed, the certificate of
        :func:`~intrinsic_rank.bounds.witness_feature_rank_bound` (gap
        ``min_gap``, ratio ``min_gap - 1``; ``None`` when ``min_gap < 3``), a
        lower bound on the rank of an exact solution of the length-3 family.
        ``config``, ``seconds``.

    Examples
    --------
    >>> result = min_ip_phase_transition(
    ...     rank_grid=[1, 8], n_seeds=1, n_bits=12, n_codewords=8, lengths=(3,),
    ...     dense=False, max_epochs=5)
    >>> sorted({rec["rank"] for rec in result.records})
    [1, 8]
    >>> result.records[0]["n_sequences"] == result.records[1]["n_sequences"]
    True
    """
    start = time.perf_counter()
    ranks = _check_ranks(rank_grid, quick)
    n_seeds = (2 if quick else 3) if n_seeds is None else int(n_seeds)
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1; got {n_seeds}")
    lengths = [int(L) for L in lengths]
    if not lengths or any(L not in (2, 3) for L in lengths):
        raise ValueError(f"lengths must be a non-empty subset of (2, 3); got {lengths!r}")
    threshold = _check_threshold(threshold)
    budget = dict(max_epochs=max_epochs, lr=lr, batch_size=batch_size, hidden=hidden)
    records, bounds = [], []
    n_fits = n_seeds * len(lengths) * (2 if dense else 1)
    with progress_steps(n_fits, "min-ip", enabled=progress) as bar:
        for seed in consecutive_seeds(random_state, n_seeds):
            X3, y3, info = make_min_ip_witness_family(
                n_bits=n_bits, weight=weight, n_codewords=n_codewords, min_gap=min_gap,
                random_state=seed, return_info=True,
            )
            bounds.append(
                witness_feature_rank_bound(info.codewords, gap=min_gap, ratio=min_gap - 1.0)
                if min_gap >= 3 else None
            )
            for length in lengths:
                X, y = (X3, y3) if length == 3 else witness_length2(X3, info)
                records.extend(_phase_fits(X, y, info, length, seed, ranks, dense, budget,
                                           device, bar))
    summary = summarize_min_ip(records, ("length", "model", "rank"))
    transition = {
        length: _transition(
            ranks,
            [row["error_mean"] for row in summary
             if row["length"] == length and row["model"] == "kernel"],
            threshold,
        )
        for length in lengths
    }
    config = dict(
        rank_grid=ranks, n_seeds=n_seeds, n_bits=n_bits, weight=weight, n_codewords=n_codewords,
        min_gap=min_gap, lengths=lengths, dense=bool(dense), threshold=threshold,
        quick=bool(quick), random_state=int(random_state), **budget,
    )
    return Bunch(
        records=records, summary=summary, transition=transition, rank_bound=bounds,
        config=config, seconds=time.perf_counter() - start,
    )


def _phase_fits(X, y, info, length, seed, ranks, dense, budget, device, bar):
    """The records of one seed and length: a kernel head of every rank, then dense."""
    records = []
    base = dict(length=length, seed=seed, n_sequences=int(len(X)))
    tic = time.perf_counter()
    est = _fit("kernel", X, y, ranks, seed, budget, device)
    seconds = time.perf_counter() - tic
    out = _outputs(est, X)
    for i, r in enumerate(ranks):
        records.append(dict(base, model="kernel", rank=int(r),
                            **_errors(y, out[:, i], info.anchor), seconds=seconds))
    errs = " ".join(f"{r}:{rec['error']:.3f}"
                    for r, rec in zip(ranks, records[-len(ranks):]))
    bar.update(f"seed {seed} L={length} kernel errors {errs}")
    if dense:
        tic = time.perf_counter()
        est = _fit("dense", X, y, [info.n_bits], seed, budget, device)
        seconds = time.perf_counter() - tic
        rec = dict(base, model="dense", rank=int(info.n_bits),
                   **_errors(y, _outputs(est, X)[:, 0], info.anchor), seconds=seconds)
        records.append(rec)
        bar.update(f"seed {seed} L={length} dense error {rec['error']:.3f}")
    return records


def min_ip_ood_scaling(
    settings=None,
    rank_grid=None,
    n_seeds=None,
    min_gap=1,
    n_test_sequences=1000,
    dense=True,
    max_epochs=200,
    lr=3e-3,
    batch_size=128,
    hidden=64,
    threshold=0.05,
    quick=False,
    random_state=0,
    progress=False,
    device="cpu",
):
    """Out-of-distribution error on a disjoint codeword pool, as the problem grows.

    For every setting (bit width ``n_bits``, pool size ``pool``, training-set
    size) and seed,
    :func:`~intrinsic_rank.datasets.make_min_ip_family_pools` draws one code
    of ``2 * pool`` words of weight ``n_bits // 2``, splits it into disjoint
    train and test pools and samples ``n_train_sequences`` (train) and
    ``n_test_sequences`` (test) sequences from each pool's witness family
    (every triple with overlap gap ``>= min_gap``, plus anchors; the gaps
    vary, so the fixed-gap rank-1 shortcut of the module docstring does not
    apply). A batched kernel sweep and dense attention (same budget) train on
    the train pool; both are scored on the train set and on the test pool,
    whose tokens were never seen.

    The transition rank of a setting is the smallest feature rank whose test
    error, averaged over seeds, is at most ``threshold`` (``None`` when no
    rank of the grid reaches it).

    Parameters
    ----------
    settings : sequence of dict or None, default=None
        Each with ``n_bits``, ``pool`` and ``n_train_sequences``; ``None``
        means :data:`OOD_SETTINGS` (two smaller settings when ``quick``).
    rank_grid : sequence of int or None, default=None
        Feature ranks; ``None`` means ``1, 2, 4, ..., 64`` (``1, 4, 16, 64``
        when ``quick``).
    n_seeds : int or None, default=None
        Seeds per setting; ``None`` means 3 (1 when ``quick``).
    min_gap : int, default=1
        Smallest overlap gap of a witness.
    n_test_sequences : int, default=1000
        Test sequences per setting, sampled from the test pool's family.
    dense : bool, default=True
        Also train the dense softmax reference.
    max_epochs, lr, batch_size, hidden : int, float, int, int
        Training budget, shared by the kernel sweep and dense attention.
    threshold : float, default=0.05
        Test error that defines the transition rank.
    quick : bool, default=False
        Smaller defaults for ``settings``, ``rank_grid`` and ``n_seeds``.
    random_state : int, default=0
        Base seed (seed ``s`` uses ``random_state + s``).
    progress : bool, default=False
        Print one line per fit.
    device : str or torch.device, default="cpu"
        Where the heads train (the estimators' ``device``).

    Returns
    -------
    result : Bunch
        ``records``: one dict per (setting, seed, model, rank) with
        ``n_bits``, ``pool``, ``n_train_sequences``, ``n_test_sequences``,
        ``seed``, ``model``, ``rank``, ``train_error``, ``test_error``,
        ``test_witness_error``, ``seconds``. ``summary``: mean / min / max of
        ``test_error`` per (n_bits, pool, model, rank). ``transition``: list of
        dicts (``n_bits``, ``pool``, ``transition_rank``,
        ``dense_test_error_mean``, ``kernel_best_test_error``). ``config``,
        ``seconds``.

    Examples
    --------
    >>> result = min_ip_ood_scaling(
    ...     settings=[{"n_bits": 8, "pool": 10, "n_train_sequences": 200}],
    ...     rank_grid=[1, 4], n_seeds=1, n_test_sequences=100, dense=False,
    ...     max_epochs=3)
    >>> [(rec["rank"], rec["n_test_sequences"]) for rec in result.records]
    [(1, 100), (4, 100)]
    """
    start = time.perf_counter()
    settings = _check_ood_settings(settings, quick)
    if rank_grid is None and quick:
        rank_grid = _QUICK_OOD_RANKS
    ranks = _check_ranks(rank_grid, quick)
    n_seeds = (1 if quick else 3) if n_seeds is None else int(n_seeds)
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1; got {n_seeds}")
    threshold = _check_threshold(threshold)
    budget = dict(max_epochs=max_epochs, lr=lr, batch_size=batch_size, hidden=hidden)
    records = []
    n_fits = len(settings) * n_seeds * (2 if dense else 1)
    with progress_steps(n_fits, "min-ip ood", enabled=progress) as bar:
        for setting in settings:
            for seed in consecutive_seeds(random_state, n_seeds):
                records.extend(_ood_fits(setting, seed, ranks, dense, min_gap,
                                         n_test_sequences, budget, device, bar))
    summary = summarize_min_ip(records, ("n_bits", "pool", "model", "rank"), "test_error")
    transition = [_ood_transition(setting, summary, threshold) for setting in settings]
    config = dict(
        settings=settings, rank_grid=ranks, n_seeds=n_seeds, min_gap=min_gap,
        n_test_sequences=int(n_test_sequences), dense=bool(dense), threshold=threshold,
        quick=bool(quick), random_state=int(random_state), **budget,
    )
    return Bunch(records=records, summary=summary, transition=transition, config=config,
                 seconds=time.perf_counter() - start)


def _check_ood_settings(settings, quick):
    """The settings (copies), each with ``n_bits``, ``pool`` and ``n_train_sequences``."""
    if settings is None:
        settings = _QUICK_OOD_SETTINGS if quick else OOD_SETTINGS
    settings = [dict(s) for s in settings]
    for s in settings:
        missing = {"n_bits", "pool", "n_train_sequences"} - set(s)
        if missing:
            raise ValueError(f"every setting needs n_bits, pool and n_train_sequences; "
                             f"{s!r} lacks {sorted(missing)}")
    return settings


def _ood_fits(setting, seed, ranks, dense, min_gap, n_test_sequences, budget, device, bar):
    """The records of one setting and seed: train on one pool, test on a disjoint one."""
    n_bits, pool = setting["n_bits"], setting["pool"]
    X_tr, y_tr, X_te, y_te, info = make_min_ip_family_pools(
        n_bits=n_bits, n_train_codewords=pool, n_test_codewords=pool,
        min_gap=min_gap, n_train_sequences=setting["n_train_sequences"],
        n_test_sequences=n_test_sequences, random_state=seed,
    )
    base = dict(n_bits=n_bits, pool=pool, n_train_sequences=int(len(X_tr)),
                n_test_sequences=int(len(X_te)), seed=seed)
    records = []
    fits = [("kernel", ranks)] + ([("dense", [n_bits])] if dense else [])
    for model, grid in fits:
        tic = time.perf_counter()
        est = _fit(model, X_tr, y_tr, grid, seed, budget, device)
        seconds = time.perf_counter() - tic
        out_tr, out_te = _outputs(est, X_tr), _outputs(est, X_te)
        for i, r in enumerate(grid):
            test = _errors(y_te, out_te[:, i], info.test.anchor)
            records.append(dict(
                base, model=model, rank=int(r),
                train_error=exact_sequence_error(y_tr, out_tr[:, i]),
                test_error=test["error"], test_witness_error=test["witness_error"],
                seconds=seconds,
            ))
        errs = " ".join(f"{rec['rank']}:{rec['test_error']:.3f}"
                        for rec in records[-len(grid):])
        bar.update(f"m={n_bits} pool={pool} seed {seed} {model} test errors {errs}")
    return records


def _ood_transition(setting, summary, threshold):
    """One setting's transition rank, best kernel and dense test errors."""
    rows = [row for row in summary
            if row["n_bits"] == setting["n_bits"] and row["pool"] == setting["pool"]]
    kernel = [row for row in rows if row["model"] == "kernel"]
    dense_rows = [row for row in rows if row["model"] == "dense"]
    return dict(
        n_bits=setting["n_bits"], pool=setting["pool"],
        transition_rank=_transition(
            [row["rank"] for row in kernel], [row["test_error_mean"] for row in kernel],
            threshold,
        ),
        kernel_best_test_error=float(min(row["test_error_mean"] for row in kernel)),
        dense_test_error_mean=(
            float(dense_rows[0]["test_error_mean"]) if dense_rows else float("nan")
        ),
    )


def min_ip_witness_suite_sweep(
    rank_grid=None,
    n_seeds=None,
    n_bits=24,
    n_codewords=400,
    n_sequences=1272,
    gap=1,
    dense=True,
    max_epochs=400,
    lr=1e-3,
    batch_size=32,
    hidden=64,
    threshold=0.05,
    quick=False,
    random_state=0,
    progress=False,
    device="cpu",
):
    """In-sample error on the paper-like witness suite: 1,272 sequences of 24-bit tokens.

    The Min-IP paper ("Three tokens force exponential feature rank in
    nonnegative kernel attention", Vicente Opazo, 2026, its experimental
    validation) trains on a
    constructed family of 1,272 inputs derived from 24-bit vectors and reports
    error above 0.80 for feature rank ``r < 8`` and an exact solution at
    ``r = 32``. This runs the same sizes on
    :func:`~intrinsic_rank.datasets.make_min_ip_witness_suite` (a random
    constant-weight code of ``n_codewords`` words, ``n_sequences`` length-3
    witnesses whose candidates' overlaps differ by ``gap``): per seed one
    suite, one batched kernel sweep of every rank of the grid and, with
    ``dense``, dense softmax attention, all with the in-sample budget of
    :func:`min_ip_phase_transition`, trained and scored on the whole suite.

    The suite is not the paper's own construction, which is not published: with
    a single gap it has an exact rank-1 solution (see the module docstring), so
    an error at small rank here measures training, not a capacity limit.

    Parameters
    ----------
    rank_grid : sequence of int or None, default=None
        Feature ranks; ``None`` means ``1, 2, 4, ..., 64`` (``1, 4, 32`` when
        ``quick``: ranks below 8 and the paper's 32).
    n_seeds : int or None, default=None
        Suites (seeds); ``None`` means 3 (1 when ``quick``).
    n_bits, n_codewords, n_sequences, gap : int
        The suite (defaults: the paper's 24 bits and 1,272 sequences).
    dense : bool, default=True
    max_epochs, lr, batch_size, hidden : int, float, int, int
        Training budget (the in-sample one of :func:`min_ip_phase_transition`).
    threshold : float, default=0.05
        The transition rank is the smallest rank whose mean error is at most this.
    quick : bool, default=False
    random_state : int, default=0
        Seed ``s`` uses ``random_state + s`` for the suite and the training.
    progress : bool, default=False
    device : str or torch.device, default="cpu"

    Returns
    -------
    result : Bunch
        ``records`` (one per seed, model and rank: ``seed``, ``model``,
        ``rank``, ``error``, ``mse``, ``n_sequences``, ``seconds``),
        ``summary`` (mean / min / max of ``error`` over seeds per model and
        rank), ``transition`` (rank or ``None``), ``config``, ``seconds``.

    Examples
    --------
    >>> r = min_ip_witness_suite_sweep(rank_grid=[1, 2], n_seeds=1, n_bits=12,
    ...                                n_codewords=40, n_sequences=60, dense=False,
    ...                                max_epochs=3)
    >>> [(row["rank"], row["n_seeds"]) for row in r.summary]
    [(1, 1), (2, 1)]
    """
    start = time.perf_counter()
    ranks = _check_ranks((1, 4, 32) if rank_grid is None and quick else rank_grid, False)
    n_seeds = (1 if quick else 3) if n_seeds is None else int(n_seeds)
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1; got {n_seeds}")
    threshold = _check_threshold(threshold)
    budget = dict(max_epochs=max_epochs, lr=lr, batch_size=batch_size, hidden=hidden)
    records = []
    with progress_steps(n_seeds * (2 if dense else 1), "min-ip suite", enabled=progress) as bar:
        for seed in consecutive_seeds(random_state, n_seeds):
            X, y = make_min_ip_witness_suite(n_bits=n_bits, n_codewords=n_codewords,
                                             n_sequences=n_sequences, gap=gap,
                                             random_state=seed)
            fits = [("kernel", ranks)] + ([("dense", [n_bits])] if dense else [])
            for model, grid in fits:
                tic = time.perf_counter()
                est = _fit(model, X, y, grid, seed, budget, device)
                seconds = time.perf_counter() - tic
                out = _outputs(est, X)
                for i, r in enumerate(grid):
                    records.append(dict(seed=seed, model=model, rank=int(r),
                                        error=exact_sequence_error(y, out[:, i]),
                                        mse=float(np.mean((out[:, i] - y) ** 2)),
                                        n_sequences=int(len(X)), seconds=seconds))
                errs = " ".join(f"{rec['rank']}:{rec['error']:.3f}"
                                for rec in records[-len(grid):])
                bar.update(f"suite seed {seed} {model} errors {errs}")
    summary = summarize_min_ip(records, ("model", "rank"))
    kernel = [row for row in summary if row["model"] == "kernel"]
    config = dict(rank_grid=ranks, n_seeds=n_seeds, n_bits=n_bits, n_codewords=n_codewords,
                  n_sequences=n_sequences, gap=gap, dense=bool(dense), threshold=threshold,
                  quick=bool(quick), random_state=int(random_state), **budget)
    return Bunch(records=records, summary=summary,
                 transition=_transition([row["rank"] for row in kernel],
                                        [row["error_mean"] for row in kernel], threshold),
                 config=config, seconds=time.perf_counter() - start)
