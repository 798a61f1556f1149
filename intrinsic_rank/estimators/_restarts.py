"""``n_init``: independent restarts of every rank, the best kept, and a warning when they disagree.

A student is a non-convex fit: from an unlucky initialisation it can stop in a poor
basin (a rank-3 linear-attention student of a rank-2 teacher explaining 44% of ``Y``
on one fold and 99.7% on the others). With ``n_init > 1`` every rank trains
``n_init`` slots in the same batched run, restart ``i`` of rank ``r`` drawn from
``(seed, r, i)`` (:class:`~intrinsic_rank.nn.RankBatchedStudent`'s ``restarts``;
restart 0 is the draw of ``n_init=1``), and the slot with the lowest training risk
is kept, as :class:`sklearn.cluster.KMeans` keeps its best initialisation. When
the restarts of the rank finally selected end further apart than the selection's
tolerance, the fit depends on its initialisation and says so
(:func:`restart_warning`).

The default, ``n_init="auto"`` (2 restarts; 1 for a warm start), was chosen by a
measurement (``docs/attention_rank_estimator.md``, "Restarts";
``benchmarks/bench_n_init.py``): on 60 cross-validation folds and 20 sweeps of a rank-2
linear teacher, one restart left one fold at R² 0.44 and one sweep at the wrong rank; two
restarts left none, at 1.3 to 2.1 times the training time, and three found nothing more.
"""

import numpy as np

__all__ = ["best_restarts", "gather_restart_risks", "kept_history", "restart_slots",
           "restart_warning"]


def restart_slots(ranks, n_init):
    """The slots of a run with restarts: each rank ``n_init`` times, and the restart indices.

    Examples
    --------
    >>> restart_slots([2, 5], 3)
    ([2, 2, 2, 5, 5, 5], [0, 1, 2, 0, 1, 2])
    """
    return ([r for r in ranks for _ in range(n_init)],
            [i for _ in ranks for i in range(n_init)])


def best_restarts(risks, n_init):
    """The restart of each rank with the lowest training risk.

    Parameters
    ----------
    risks : array-like of shape (R * n_init,)
        Training risk of every slot, rank-major (:func:`restart_slots`); a non-finite
        risk counts as ``inf``.
    n_init : int

    Returns
    -------
    best : ndarray of int, shape (R,)
        The kept restart of each rank (the lowest index among equal risks).
    risks : ndarray of shape (R, n_init)

    Examples
    --------
    >>> best, risks = best_restarts([0.5, 0.1, 0.1, float("nan"), 2.0, 3.0], 3)
    >>> best.tolist(), risks[1].tolist()
    ([1, 1], [inf, 2.0, 3.0])
    """
    risks = np.asarray(risks, dtype=float)
    risks = np.where(np.isfinite(risks), risks, np.inf).reshape(-1, n_init)
    return np.argmin(risks, axis=1), risks


def kept_history(history, slots):
    """A run's per-epoch records with the per-slot entries of the kept slots only.

    Parameters
    ----------
    history : skorch.history.History or list of dict
        The history of a run with restarts.
    slots : sequence of int
        The kept slot of each rank.

    Returns
    -------
    rows : list of dict
        Every epoch's ``train_loss_per_rank`` and ``heldout_risk_per_rank`` reduced to
        ``slots``, and ``train_loss`` their sum, as for a run of those slots alone (the
        per-batch records are left out).

    Examples
    --------
    >>> kept_history([{"train_loss": 6.0, "train_loss_per_rank": [1.0, 2.0, 3.0]}], [2])
    [{'train_loss': 3.0, 'train_loss_per_rank': [3.0]}]
    """
    rows = []
    for row in history:
        row = {key: value for key, value in row.items() if key != "batches"}
        if "train_loss_per_rank" in row:
            row["train_loss_per_rank"] = [row["train_loss_per_rank"][s] for s in slots]
            row["train_loss"] = float(np.sum(row["train_loss_per_rank"]))
        if "heldout_risk_per_rank" in row:
            row["heldout_risk_per_rank"] = [row["heldout_risk_per_rank"][s] for s in slots]
        rows.append(row)
    return rows


def gather_restart_risks(nets, ranks):
    """The training risks of every restart of ``ranks``, ``(R, n_init)``, from their runs.

    Parameters
    ----------
    nets : list of RankSweepNet
        Runs with restarts (``run_ranks_``, ``restart_risks_``).
    ranks : sequence of int

    Returns
    -------
    risks : ndarray of shape (R, n_init)
    """
    by_rank = {r: row for net in nets for r, row in zip(net.run_ranks_, net.restart_risks_)}
    return np.array([by_rank[int(r)] for r in ranks])


def restart_warning(rank, risks, threshold):
    """The warning when the restarts of the selected rank disagree strongly, else None.

    Parameters
    ----------
    rank : int
        The selected rank.
    risks : array-like of shape (n_init,)
        Training risk of each of its restarts.
    threshold : float
        ``tol`` times the variance of the targets: the selection's own tolerance.

    Returns
    -------
    text : str or None

    Examples
    --------
    >>> restart_warning(3, [0.01, 0.011], 0.02) is None
    True
    >>> restart_warning(3, [0.01, 0.5], 0.02)[:48]
    'the 2 restarts (n_init) of rank 3 end at trainin'
    """
    risks = np.asarray(risks, dtype=float)
    if len(risks) < 2:
        return None
    spread = float(np.max(risks) - np.min(risks))
    if not spread > threshold:
        return None
    best = int(np.argmin(risks))
    return (f"the {len(risks)} restarts (n_init) of rank {rank} end at training risks from "
            f"{np.min(risks):.4g} to {np.max(risks):.4g}, further apart than tol * variance "
            f"= {threshold:.4g}: the fit depends on its initialisation (a restart stopped in "
            f"a poorer basin, or training was too short for them to meet). The best "
            f"(restart {best}) is kept; raise n_init or max_epochs.")
