"""Is a proxy of a head's damage a currency of the model? Checked against measured loss.

An allocation trades rank between heads by a proxy of what each rank costs the
model. A proxy is worth its name when it orders (head, rank) pairs as the model's
own loss does. :func:`currency_check` draws pairs that no allocation reads (heads
and ranks at random), imposes each one alone, measures the rise of the model's
loss on validation windows, and sets five proxies beside it, each computed on the
training windows:

* **output share (first order)**: the error the rank leaves in the head's output
  through its slice of the output projection, as a share of its layer's attention
  output, to first order (the allocation's currency);
* **output share (measured)**: the same share, from the head's output recomputed
  at that rank;
* **head variance**: the head's own relative error (its output's error over its
  output's variance: the currency of ``r*_attn``), at the data-aware truncation;
* **query energy**: the share of the realised queries' energy the rank drops;
* **Fisher (query)**: ``1/2 sum_t (g_t . dq_t)^2``, ``g_t`` the loss's gradient at
  the head's query activations, ``dq_t`` the change of the queries, on the
  training windows (a first-order Fisher estimate of the loss's rise).

Each proxy's Spearman correlation with the measured rise is reported with its
Bonett-Wright 95 % interval.
"""

import dataclasses

import numpy as np

from ..._validation import check_int, keyed_rng
from ...inspection import (
    head_activations,
    head_output,
    metric_truncated_query,
    query_loss_gradients,
    relative_error,
)
from ._head_ranks import spearman_interval

__all__ = ["PROXIES", "currency_check"]

PROXIES = ("output share (first order)", "output share (measured)", "head variance",
           "query energy", "Fisher (query)")
"""The proxies :func:`currency_check` compares with the measured rise of the loss."""


def _draw_pairs(evaluator, n_pairs, random_state):
    rng = keyed_rng(random_state, 7919)
    pairs = []
    seen = set()
    while len(pairs) < n_pairs:
        key = evaluator.keys[int(rng.integers(len(evaluator.keys)))]
        rank = int(rng.integers(1, evaluator.widths[key]))
        if (key, rank) not in seen:
            seen.add((key, rank))
            pairs.append((key, rank))
    return pairs


def _cut(head, basis, rank):
    A, a, C = metric_truncated_query(head.facts, basis, rank)
    return dataclasses.replace(head.facts, w_q=A @ C, b_q=a @ C)


def _head_proxies(head, rank, data, gradient):
    X, Y = data.X, np.asarray(data.Y, dtype=np.float64)
    cut = _cut(head, head.basis, rank)
    error = (head_output(X, cut) - Y) @ head.w_o
    measured_share = float(np.mean(np.sum(error ** 2, axis=-1))) / head.output_energy
    plain = _cut(head, head.plain, rank)
    variance = relative_error(head_output(X, plain), Y)
    energies = np.asarray(head.query_energy, dtype=np.float64)
    tokens = np.asarray(X, dtype=np.float64).reshape(-1, head.facts.d_model)
    dq = tokens @ (np.asarray(head.facts.w_q) - cut.w_q) + (np.asarray(head.facts.b_q)
                                                             - cut.b_q)
    g = np.asarray(gradient, dtype=np.float64).reshape(-1, head.facts.head_dim)
    return {
        "output share (first order)": float(head.curve[rank]),
        "output share (measured)": measured_share,
        "head variance": float(variance),
        "query energy": float(energies[rank:].sum() / max(energies.sum(), 1e-300)),
        "Fisher (query)": 0.5 * float(np.sum(np.sum(g * dq, axis=-1) ** 2)),
    }


def currency_check(evaluator, *, n_pairs=60, n_windows=16, random_state=0):
    """Proxies of a head's damage against the loss measured with that head cut alone.

    Parameters
    ----------
    evaluator : ModelEvaluator
        One corpus of one model (its bases in the output metric).
    n_pairs : int, default=60
        ``(head, rank)`` pairs drawn at random (ranks ``1 .. w-1``).
    n_windows : int, default=16
        Training windows the proxies are computed on (the output shares divide by
        the layer's output energy on all the calibration windows).
    random_state : int, default=0

    Returns
    -------
    result : dict
        ``pairs`` (one row per pair: ``layer``, ``head``, ``rank``, ``rise``
        -- the relative rise of the validation loss -- and every proxy) and
        ``spearman`` (per proxy: ``rho``, ``low``, ``high``, ``n``).
    """
    n_pairs = check_int(n_pairs, "n_pairs", minimum=4)
    n_windows = check_int(n_windows, "n_windows")
    pairs = _draw_pairs(evaluator, n_pairs, random_state)
    ids = evaluator.windows["train"][:n_windows]
    heads = sorted({key for key, _ in pairs})
    gradients = query_loss_gradients(evaluator.loaded, ids, heads,
                                     device=evaluator.device)
    base = evaluator.unedited("validation")
    rows = []
    for layer in sorted({key[0] for key in heads}):
        data = head_activations(evaluator.loaded, ids, [k for k in heads if k[0] == layer],
                                device=evaluator.device)
        for (key, rank) in [p for p in pairs if p[0][0] == layer]:
            head = evaluator.bases["output"][key]
            proxies = _head_proxies(head, rank, data[key], gradients[key])
            loss = evaluator.loss({key: rank}, "output", "validation",
                                  label=f"pair L{key[0]}H{key[1]} r{rank}")
            rows.append(dict(layer=key[0], head=key[1], rank=rank, rise=loss / base - 1.0,
                             **proxies))
    rows.sort(key=lambda r: (r["layer"], r["head"], r["rank"]))
    spearman = {}
    for proxy in PROXIES:
        rho, low, high = spearman_interval([r[proxy] for r in rows], [r["rise"] for r in rows])
        spearman[proxy] = dict(rho=rho, low=low, high=high, n=len(rows))
    return dict(pairs=rows, spearman=spearman)
