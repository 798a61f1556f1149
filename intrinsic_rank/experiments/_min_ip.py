"""Min-IP phase transition: the feature rank a nonnegative kernel head needs (seed 003).

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

:func:`plot_min_ip` draws both.

Why this witness family
-----------------------
A first attempt used :func:`~intrinsic_rank.datasets.make_min_ip_witness_suite`
(400 codewords of 24 bits, 1,272 sampled witnesses, gap 1; 20% held out):
kernel heads of every rank 1-64 erred on 10-42% of the sequences,
non-monotonically, and no rank transition appeared. Two reasons:

1. A suite with one fixed gap ``g`` is solved *exactly by rank 1*: with
   uniform attention ``o = (a + b + q) / 3`` and the readout
   ``1.5 <q, o> - (|q| + g) / 2`` the output is
   ``(<q, a> + <q, b> - g) / 2 = <q, a>`` (``tests/test_min_ip_experiment.py``
   checks this). Such a suite cannot separate ranks at all.
2. Sampled from a large code, each query occurs in a handful of sequences, so
   a flexible encoder and readout can memorise them one by one.

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
of 128, 200 epochs (OOD, whose training sets are larger). These were chosen on
the length-3 family by comparing a handful of settings on the kernel sweep's
*largest* ranks (which can fit the family): with ``lr = 3e-3`` and batches of
64 or 256 for 200-600 epochs, ranks 16-64 still erred on up to 8% of the
sequences on some seeds; with ``lr = 1e-3``, batches of 32 and 400 epochs they
reached 0-1%. Dense attention fits the family in every setting tried. Nothing
was tuned towards a particular transition rank. On the OOD task dense
attention reached 0-6% test error with 2,000-4,000 training sequences at this
budget.

What was measured (full defaults, 3 seeds; ``intrinsic-rank min-ip``)
--------------------------------------------------------------------
In-sample, length 3 (519, 421 and 521 sequences): rank 1 errs on 0.31-0.40 of
the family (witnesses and anchors alike), rank 2 on 0.00-0.13 (mean 0.06),
ranks 4-16 on at most 0.025, rank 32 on none (rank 64: at most 0.006); dense
attention is exact on every seed. So the transition (mean error <= 0.05) is at
``r = 4``, far below the paper's ``r = 8-32`` and with a rank-1 error of
about 0.36 rather than > 0.8. At length 2, on the same tokens, every rank
including 1 fits the family exactly (dense: 0.00-0.025). Denser families move
the transition up a little (exploratory, 1-2 seeds: 32 codewords, rank 4
errs on 0.04 and rank 8 on 0.005; gap ``>= 2`` with 16 codewords, rank 4 on
0.05-0.11 and rank 8 on 0.01-0.02).

Out of distribution (pools of 35, 60 and 100 words at 8, 12 and 16 bits,
3,000 training sequences, gap ``>= 1``): every kernel rank fits its training
set (error <= 0.03) but none reaches 0.05 on the disjoint pool; the test
error falls with rank and levels off from rank 16-32, at a plateau that rises
with the bit width (mean of the best rank 0.17, 0.26, 0.37). Dense attention
generalises (0.009, 0.016, 0.039). No transition rank is observed within
ranks 1-64, so the paper's 8 -> 16 -> 64 is not reproduced; what is
reproduced is that the gap between kernel and dense attention widens as the
problem grows.
"""

import math
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch

from .._validation import consecutive_seeds
from ..bounds import witness_feature_rank_bound
from ..datasets import (
    make_min_ip_family_pools,
    make_min_ip_witness_family,
    witness_length2,
)
from ..estimators import AttentionRankEstimator
from ..metrics import exact_sequence_error
from ._arguments import add_hidden_alias, parse_ranks
from ._output import jsonable, pyplot, save_figure
from ._progress import steps
from ._registry import Experiment, Verdict, grade, is_finite, number_text, register, save_plot

__all__ = [
    "MIN_IP_COLUMNS",
    "MIN_IP_OOD_COLUMNS",
    "MIN_IP_OOD_TRANSITION_COLUMNS",
    "min_ip_phase_transition",
    "min_ip_ood_scaling",
    "plot_min_ip",
    "summarize_min_ip",
    "OOD_SETTINGS",
]

_FULL_RANKS = (1, 2, 4, 8, 16, 32, 64)
_QUICK_RANKS = (1, 4, 16)
_QUICK_OOD_RANKS = (1, 4, 16, 64)

OOD_SETTINGS = (
    {"n_bits": 8, "pool": 35, "n_train_sequences": 3000},
    {"n_bits": 12, "pool": 60, "n_train_sequences": 3000},
    {"n_bits": 16, "pool": 100, "n_train_sequences": 3000},
)
"""Default OOD settings: bit width ``n_bits``, codewords per pool ``pool`` (train
and test pools alike), and the number of training sequences sampled from the
train pool's family (the test set samples ``n_test_sequences`` from the test
pool's)."""

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
        raise ValueError(f"ranks must be distinct integers >= 1; got {ranks!r}")
    return ranks


def _fit(attention, X, y, ranks, seed, budget, device="cpu"):
    """One batched fit of every rank of ``ranks`` on ``(X, y)``; returns the estimator."""
    est = AttentionRankEstimator(
        attention=attention,
        ranks=ranks,
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
    ranks=None,
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
    ranks : sequence of int or None, default=None
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
        Smaller defaults for ``ranks`` and ``n_seeds`` (explicit values win).
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
    ...     ranks=[1, 8], n_seeds=1, n_bits=12, n_codewords=8, lengths=(3,),
    ...     dense=False, max_epochs=5)
    >>> sorted({rec["rank"] for rec in result.records})
    [1, 8]
    >>> result.records[0]["n_sequences"] == result.records[1]["n_sequences"]
    True
    """
    start = time.perf_counter()
    ranks = _check_ranks(ranks, quick)
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
    with steps(n_fits, "min-ip", enabled=progress) as bar:
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
        ranks=ranks, n_seeds=n_seeds, n_bits=n_bits, weight=weight, n_codewords=n_codewords,
        min_gap=min_gap, lengths=lengths, dense=bool(dense), threshold=threshold,
        quick=bool(quick), random_state=int(random_state), **budget,
    )
    return Bunch(
        records=records, summary=summary, transition=transition, rank_bound=bounds,
        config=config, seconds=time.perf_counter() - start,
    )


def min_ip_ood_scaling(
    settings=None,
    ranks=None,
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
    ranks : sequence of int or None, default=None
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
        Smaller defaults for ``settings``, ``ranks`` and ``n_seeds``.
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
    ...     ranks=[1, 4], n_seeds=1, n_test_sequences=100, dense=False,
    ...     max_epochs=3)
    >>> [(rec["rank"], rec["n_test_sequences"]) for rec in result.records]
    [(1, 100), (4, 100)]
    """
    start = time.perf_counter()
    if settings is None:
        settings = _QUICK_OOD_SETTINGS if quick else OOD_SETTINGS
    settings = [dict(s) for s in settings]
    for s in settings:
        missing = {"n_bits", "pool", "n_train_sequences"} - set(s)
        if missing:
            raise ValueError(f"every setting needs n_bits, pool and n_train_sequences; "
                             f"{s!r} lacks {sorted(missing)}")
    if ranks is None and quick:
        ranks = _QUICK_OOD_RANKS
    ranks = _check_ranks(ranks, quick)
    n_seeds = (1 if quick else 3) if n_seeds is None else int(n_seeds)
    if n_seeds < 1:
        raise ValueError(f"n_seeds must be >= 1; got {n_seeds}")
    threshold = _check_threshold(threshold)
    budget = dict(max_epochs=max_epochs, lr=lr, batch_size=batch_size, hidden=hidden)
    records = []
    n_fits = len(settings) * n_seeds * (2 if dense else 1)
    with steps(n_fits, "min-ip ood", enabled=progress) as bar:
        for setting in settings:
            n_bits, pool = setting["n_bits"], setting["pool"]
            n_train = setting["n_train_sequences"]
            for seed in consecutive_seeds(random_state, n_seeds):
                X_tr, y_tr, X_te, y_te, info = make_min_ip_family_pools(
                    n_bits=n_bits, n_train_codewords=pool, n_test_codewords=pool,
                    min_gap=min_gap, n_train_sequences=n_train,
                    n_test_sequences=n_test_sequences, random_state=seed,
                )
                base = dict(n_bits=n_bits, pool=pool, n_train_sequences=int(len(X_tr)),
                            n_test_sequences=int(len(X_te)), seed=seed)
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
    summary = summarize_min_ip(records, ("n_bits", "pool", "model", "rank"), "test_error")
    transition = []
    for setting in settings:
        rows = [row for row in summary
                if row["n_bits"] == setting["n_bits"] and row["pool"] == setting["pool"]]
        kernel = [row for row in rows if row["model"] == "kernel"]
        dense_rows = [row for row in rows if row["model"] == "dense"]
        transition.append(dict(
            n_bits=setting["n_bits"], pool=setting["pool"],
            transition_rank=_transition(
                [row["rank"] for row in kernel], [row["test_error_mean"] for row in kernel],
                threshold,
            ),
            kernel_best_test_error=float(min(row["test_error_mean"] for row in kernel)),
            dense_test_error_mean=(
                float(dense_rows[0]["test_error_mean"]) if dense_rows else float("nan")
            ),
        ))
    config = dict(
        settings=settings, ranks=ranks, n_seeds=n_seeds, min_gap=min_gap,
        n_test_sequences=int(n_test_sequences), dense=bool(dense), threshold=threshold,
        quick=bool(quick), random_state=int(random_state), **budget,
    )
    return Bunch(records=records, summary=summary, transition=transition, config=config,
                 seconds=time.perf_counter() - start)


def plot_min_ip(phase, ood=None, path=None):
    """Exact-sequence error against feature rank (log2 axis), in-sample and OOD.

    Left panel: :func:`min_ip_phase_transition`, one line per length (mean over
    seeds, with the shaded band from the best to the worst seed), the dense
    references as horizontal dashed lines and the threshold as a dotted line.
    Right panel (with ``ood``): test error on the disjoint pool per setting of
    :func:`min_ip_ood_scaling`, with the same band, dense references dashed.
    The legends, bands included, sit under the panels, off the curves.

    Parameters
    ----------
    phase : Bunch or None
        Output of :func:`min_ip_phase_transition`.
    ood : Bunch or None, default=None
        Output of :func:`min_ip_ood_scaling`.
    path : str or None
        Where to save the PNG.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    panels = [p for p in (phase, ood) if p is not None]
    if not panels:
        raise ValueError("give at least one of phase and ood")
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.6), squeeze=False)
    axes = list(axes.flat)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def ticks(ax, ranks, threshold):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ranks)
        ax.set_xticklabels([str(r) for r in ranks])
        ax.axhline(threshold, color="grey", lw=0.8, ls=":", label=f"threshold {threshold:g}")
        ax.set_ylim(-0.02, 1.0)
        ax.set_xlabel("feature rank r (log2 scale)")
        ax.set_ylabel("exact-sequence error")

    if phase is not None:
        ax = axes.pop(0)
        cfg = phase.config
        for k, length in enumerate(cfg["lengths"]):
            rows = [row for row in phase.summary
                    if row["length"] == length and row["model"] == "kernel"]
            r = np.array([row["rank"] for row in rows])
            colour = colours[k % len(colours)]
            ax.plot(r, [row["error_mean"] for row in rows], "o-", color=colour,
                    label=f"kernel, length {length} (mean)")
            ax.fill_between(r, [row["error_min"] for row in rows],
                            [row["error_max"] for row in rows], color=colour, alpha=0.2,
                            label=f"kernel, length {length}: best to worst seed")
            dense_rows = [row for row in phase.summary
                          if row["length"] == length and row["model"] == "dense"]
            if dense_rows:
                ax.axhline(dense_rows[0]["error_mean"], color=colour, ls="--", lw=1,
                           label=f"dense softmax, length {length}")
        ticks(ax, cfg["ranks"], cfg["threshold"])
        ax.set_title(
            f"In-sample: {cfg['n_codewords']} codewords, {cfg['n_bits']} bits, gap >= "
            f"{cfg['min_gap']}, {cfg['n_seeds']} seeds", fontsize=9,
        )
        _legend_below(ax)
    if ood is not None:
        ax = axes.pop(0)
        cfg = ood.config
        for k, setting in enumerate(cfg["settings"]):
            rows = [row for row in ood.summary if row["n_bits"] == setting["n_bits"]
                    and row["pool"] == setting["pool"]]
            kernel = [row for row in rows if row["model"] == "kernel"]
            colour = colours[k % len(colours)]
            r = np.array([row["rank"] for row in kernel])
            label = f"m={setting['n_bits']}, pools of {setting['pool']}"
            ax.plot(r, [row["test_error_mean"] for row in kernel], "o-", color=colour,
                    label=f"kernel, {label}")
            ax.fill_between(r, [row["test_error_min"] for row in kernel],
                            [row["test_error_max"] for row in kernel], color=colour, alpha=0.15,
                            label=f"kernel, {label}: best to worst seed")
            for row in rows:
                if row["model"] == "dense":
                    ax.axhline(row["test_error_mean"], color=colour, ls="--", lw=1,
                               label=f"dense, {label}")
        ticks(ax, cfg["ranks"], cfg["threshold"])
        ax.set_title(f"Out of distribution: test on a disjoint pool, {cfg['n_seeds']} seed(s)",
                     fontsize=9)
        _legend_below(ax)
    fig.suptitle("Min-IP phase transition: exact-sequence error of rank-r kernel attention "
                 "against dense softmax attention", fontsize=10)
    return save_figure(fig, path)


def _legend_below(ax):
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2,
              frameon=False)


# -- the experiment: ``min-ip`` (the same name as piece and command) -------------------

MIN_IP_COLUMNS = ["length", "model", "rank", "n_seeds", "error_mean", "error_min",
                  "error_max"]
"""Columns of the in-sample table (the ``summary`` of :func:`min_ip_phase_transition`)."""

MIN_IP_OOD_TRANSITION_COLUMNS = ["n_bits", "pool", "transition_rank",
                                 "kernel_best_test_error", "dense_test_error_mean"]
"""Columns of the OOD transition table (the ``transition`` of :func:`min_ip_ood_scaling`)."""

MIN_IP_OOD_COLUMNS = ["n_bits", "pool", "model", "rank", "n_seeds", "test_error_mean",
                      "test_error_min", "test_error_max"]
"""Columns of the OOD test-error table (the ``summary`` of :func:`min_ip_ood_scaling`)."""


def _run(settings, *, random_state, progress, device):
    """The in-sample experiment, then (unless ``settings["ood"]`` is None) the OOD one."""
    tic = time.perf_counter()
    phase = min_ip_phase_transition(random_state=random_state, progress=progress,
                                    device=device, **settings["phase"])
    ood = None
    if settings.get("ood") is not None:
        ood = min_ip_ood_scaling(random_state=random_state, progress=progress, device=device,
                                 **settings["ood"])
    return jsonable({"phase": dict(phase), "ood": None if ood is None else dict(ood),
                     "seconds": time.perf_counter() - tic})


def _plot(result, folder):
    ood = None if result["ood"] is None else Bunch(**result["ood"])
    return [save_plot(plot_min_ip(Bunch(**result["phase"]), ood), folder, "min_ip.png")]


def _tables(result):
    phase = result["phase"]
    tables = [(f"in-sample exact-sequence error, {phase['config']['n_codewords']} codewords "
               f"of {phase['config']['n_bits']} bits, {phase['config']['n_seeds']} seed(s)",
               phase["summary"], MIN_IP_COLUMNS)]
    if result["ood"] is not None:
        ood = result["ood"]
        tables.append((f"out of distribution: transition rank per setting (test error <= "
                       f"{ood['config']['threshold']:g})", ood["transition"],
                       MIN_IP_OOD_TRANSITION_COLUMNS))
        tables.append(("out of distribution: test error on the disjoint pool",
                       ood["summary"], MIN_IP_OOD_COLUMNS))
    return tables


def _verdicts(result, paper_ranks=(8, 32), paper_error=0.8):
    """Rank 1 at length 2, dense at length 3, the transition, its place, and OOD."""
    phase = result["phase"]
    threshold = phase["config"]["threshold"]
    summary = phase["summary"]

    def row(length, model, rank=None):
        for rec in summary:
            if rec["length"] == length and rec["model"] == model and (
                    rank is None or rec["rank"] == rank):
                return rec
        return None

    verdicts = []
    one2 = row(2, "kernel", 1)
    if one2 is not None:
        err = one2["error_mean"]
        verdicts.append(Verdict(
            "with two tokens, rank 1 suffices",
            f"rank-1 kernel head, length 2: error {number_text(err)} (worst seed "
            f"{number_text(one2['error_max'])})",
            "agrees" if err <= threshold else ("partly" if err <= 4 * threshold
                                               else "does not agree"),
            f"mean error <= {threshold:g} agrees, <= {4 * threshold:g} partly",
        ))
    dense3 = row(3, "dense")
    if dense3 is not None:
        worst = dense3["error_max"]
        verdicts.append(Verdict(
            "dense softmax attention solves three tokens",
            f"dense, length 3: error {number_text(dense3['error_mean'])} (worst seed "
            f"{number_text(worst)})",
            "agrees" if worst <= threshold else (
                "partly" if dense3["error_mean"] <= threshold else "does not agree"),
            f"every seed <= {threshold:g} agrees, the mean only partly",
        ))
    one3 = row(3, "kernel", 1)
    transition = phase["transition"].get("3")
    if one3 is not None:
        fails = one3["error_mean"] > threshold
        verdicts.append(Verdict(
            "at three tokens a transition in feature rank exists: small ranks fail, a "
            "large enough rank solves the task",
            f"rank 1 errs on {number_text(one3['error_mean'])}; transition (mean error <= "
            f"{threshold:g}) at {'none of the grid' if transition is None else f'r = {transition}'}"
            f" of ranks {phase['config']['ranks']}",
            grade(fails + (transition is not None), 2),
            f"rank 1 fails ({'yes' if fails else 'no'}) and some rank of the grid succeeds "
            f"({'yes' if transition is not None else 'no'})",
        ))
        placed = transition is not None and paper_ranks[0] <= transition <= paper_ranks[1]
        small = [rec for rec in summary if rec["length"] == 3 and rec["model"] == "kernel"
                 and (transition is None or rec["rank"] < transition)]
        low = min((rec["error_mean"] for rec in small), default=math.nan)
        high_error = bool(small) and low > paper_error
        verdicts.append(Verdict(
            f"the transition lies at r = {paper_ranks[0]}-{paper_ranks[1]} on a 24-bit "
            f"witness suite, with error > {paper_error:g} below it",
            f"transition at {'none of the grid' if transition is None else f'r = {transition}'}"
            f"; ranks below it err on at least {number_text(low)}",
            grade(placed + high_error, 2),
            f"transition in {paper_ranks[0]}-{paper_ranks[1]} "
            f"({'yes' if placed else 'no'}); every rank below it errs on more than "
            f"{paper_error:g} ({'yes' if high_error else 'no'}) -- on our anchored family "
            "small ranks fail less often and succeed sooner",
        ))
    ood = result["ood"]
    if ood is not None and ood["transition"]:
        rows = ood["transition"]
        found = [r["transition_rank"] for r in rows if r["transition_rank"] is not None]
        growing = len(found) == len(rows) and all(
            a <= b for a, b in zip(found, found[1:])) and found[-1] > found[0]
        best = [r["kernel_best_test_error"] for r in rows]
        rising = all(a < b for a, b in zip(best, best[1:]))
        verdicts.append(Verdict(
            "out of distribution, the transition rank grows with the problem "
            "(8 -> 16 -> 64 in the paper)",
            "; ".join(f"m = {r['n_bits']}: "
                      + ("no transition" if r["transition_rank"] is None
                         else f"r = {r['transition_rank']}")
                      + f" (best kernel {number_text(r['kernel_best_test_error'])})" for r in rows),
            "agrees" if growing else ("partly" if found else "does not agree"),
            f"transitions found in {len(found)} of {len(rows)} settings"
            + ("" if found else "; the kernel heads' best test error "
               + ("rises" if rising else "does not rise steadily")
               + f" with the bit width ({', '.join(number_text(b) for b in best)})"),
        ))
        dense = [r["dense_test_error_mean"] for r in rows if is_finite(r["dense_test_error_mean"])]
        if dense:
            ok = sum(e <= ood["config"]["threshold"] for e in dense)
            verdicts.append(Verdict(
                "out of distribution, dense attention stays (near-)exact as the problem grows",
                "dense test error " + ", ".join(number_text(e) for e in dense),
                grade(ok, len(dense)),
                f"{ok} of {len(dense)} settings at or below {ood['config']['threshold']:g}",
            ))
    return verdicts


def _add_arguments(parser):
    parser.add_argument("--quick", action="store_true",
                        help="the quick version (fewer ranks, seeds and OOD settings)")
    parser.add_argument("--n-seeds", type=int, default=None,
                        help="seeds per setting (default 3, quick 2 in-sample / 1 OOD)")
    add_hidden_alias(parser, "--seeds", dest="n_seeds", type=int)
    parser.add_argument("--ranks", type=parse_ranks, default=None,
                        help="feature ranks, e.g. 1,2,4,8,16,32,64 (the default)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="full-batch optimiser steps of every fit (default 400 "
                        "in-sample, 200 OOD)")
    parser.add_argument("--n-bits", type=int, default=24,
                        help="bits of the in-sample witness family")
    parser.add_argument("--n-codewords", type=int, default=16,
                        help="codewords of the in-sample witness family")
    parser.add_argument("--no-ood", action="store_true",
                        help="skip the out-of-distribution experiment")


def _settings(args):
    epochs = {} if args.epochs is None else {"max_epochs": args.epochs}
    phase = dict(ranks=args.ranks, n_seeds=args.n_seeds, n_bits=args.n_bits,
                 n_codewords=args.n_codewords, quick=args.quick, **epochs)
    ood = None if args.no_ood else dict(ranks=args.ranks, n_seeds=args.n_seeds,
                                        quick=args.quick, **epochs)
    return {"phase": phase, "ood": ood}


def _summary(result):
    phase, ood = result["phase"], result["ood"]
    cfg = phase["config"]
    heads = [
        f"Min-IP in-sample phase transition: {cfg['n_codewords']} codewords of "
        f"{cfg['n_bits']} bits, every witness with gap >= {cfg['min_gap']} plus anchors; "
        f"{cfg['n_seeds']} seeds; {cfg['max_epochs']} epochs, lr {cfg['lr']:g}, "
        f"batch {cfg['batch_size']}, hidden {cfg['hidden']} ({phase['seconds']:.0f} s)"
    ]
    if ood is not None:
        ocfg = ood["config"]
        heads.append(
            f"Min-IP out of distribution: train on one pool's family (gap >= "
            f"{ocfg['min_gap']}, anchors), test on a disjoint pool; {ocfg['n_seeds']} "
            f"seed(s); {ocfg['max_epochs']} epochs, lr {ocfg['lr']:g}, batch "
            f"{ocfg['batch_size']} ({ood['seconds']:.0f} s)"
        )
    lines = ["\n".join(heads)]
    dense = [rec for rec in phase["records"] if rec["model"] == "dense"]
    if dense:
        lines.append("dense softmax per seed: " + ", ".join(
            f"length {rec['length']} seed {rec['seed']}: {rec['error']:.3f}" for rec in dense))
    for length, rank in phase["transition"].items():
        where = "none of the grid" if rank is None else f"r = {rank}"
        lines.append(f"length {length}: transition (mean error <= {cfg['threshold']:g}) at "
                     f"{where}")
    bounds = [b for b in phase["rank_bound"] if b is not None]
    if bounds:
        lines.append(f"certificate lower bound on an exact length-3 solution: r >= "
                     f"{math.ceil(max(bounds) - 1e-9)} (per seed {[round(b, 2) for b in bounds]})")
    if ood is not None:
        for row in ood["transition"]:
            where = ("none of the grid" if row["transition_rank"] is None
                     else f"r = {row['transition_rank']}")
            lines.append(
                f"m = {row['n_bits']}, pools of {row['pool']}: transition (test error <= "
                f"{ood['config']['threshold']:g}) at {where}; best kernel "
                f"{row['kernel_best_test_error']:.3f}, dense "
                f"{row['dense_test_error_mean']:.3f}")
    lines.append(f"{result['seconds']:.1f} s")
    return lines


def _saved(result):
    """The command's ``min_ip.json``: both experiments' records, keyed by experiment."""
    phase, ood = result["phase"], result["ood"]
    records = [dict(rec, experiment="in_sample") for rec in phase["records"]]
    if ood is not None:
        records += [dict(rec, experiment="ood") for rec in ood["records"]]
    return dict(
        records=records,
        config={"in_sample": phase["config"], "ood": None if ood is None else ood["config"]},
        summary={"in_sample": phase["summary"], "ood": None if ood is None else ood["summary"]},
        transition={"in_sample": phase["transition"],
                    "ood": None if ood is None else ood["transition"]},
        rank_bound=phase["rank_bound"], seconds=result["seconds"],
    )


EXPERIMENT = register(Experiment(
    name="min-ip",
    command="min-ip",
    title="Min-IP: three tokens force feature rank in nonnegative kernel attention",
    paper="Three tokens force exponential feature rank in nonnegative kernel attention",
    help="Min-IP phase transition of nonnegative kernel attention",
    description="Train normalised nonnegative kernel heads of a grid of feature ranks (one "
    "batched optimisation) on an anchored Min-IP witness family, in-sample at lengths 3 and "
    "2, with dense softmax attention as the reference; then train on one codeword pool and "
    "test on a disjoint one as the bit width grows. Prints the tables and transition ranks, "
    "saves min_ip.png and min_ip.json.",
    quick=dict(
        phase=dict(ranks=[1, 4, 16], n_seeds=2, quick=True),
        # The first two full OOD settings: with the 1,000 training sequences of
        # min_ip_ood_scaling's own quick settings even dense attention does not
        # generalise (test error 0.14 and 0.33), which would misjudge the claim.
        ood=dict(settings=jsonable(OOD_SETTINGS[:2]), ranks=[1, 4, 16, 64], n_seeds=1,
                 quick=True),
    ),
    full=dict(
        phase=dict(ranks=[1, 2, 4, 8, 16, 32, 64], n_seeds=3),
        ood=dict(settings=jsonable(OOD_SETTINGS), ranks=[1, 2, 4, 8, 16, 32, 64], n_seeds=3),
    ),
    run=_run, tables=_tables, plot=_plot, verdicts=_verdicts,
    add_arguments=_add_arguments, settings=_settings, summary=_summary,
    json_name="min_ip", saved=_saved, floatfmt="{:.3f}",
))
"""The Min-IP experiments as a registered experiment (piece and command ``min-ip``)."""
