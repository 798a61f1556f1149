"""Every head's query basis on a model's own inputs: once, or layer by layer as edited.

Two ways to fit the low-rank queries of all heads of a causal LM on calibration
windows (the training documents of a corpus):

* :func:`model_query_bases` reads every head's input and output once, on the
  unedited model, and gives each head the basis its rank is cut on: the
  data-aware one (``metric=None``, :func:`~intrinsic_rank.inspection.query_basis`)
  or the one in the head's output metric
  (:func:`~intrinsic_rank.inspection.query_output_metric`), with the
  first-order output error of every rank as a share of its layer's attention
  output;
* :func:`sequential_query_bases` fits the heads of layer ``l`` on the inputs that
  the already-edited layers ``0 .. l-1`` produce, in one forward pass (each
  layer's heads are fitted and imposed by a hook on the layer's attention before
  it runs), as "GPTQ" (Frantar, Ashkboos, Hoefler and Alistarh, ICLR 2023) and
  "SVD-LLM" (Wang et al., ICLR 2025) calibrate a compressed model on its own
  activations.
"""

import contextlib
from typing import Any, NamedTuple

import numpy as np
import torch

from .._validation import check_int
from ..nn import check_token_inputs, model_max_positions, model_vocab_size
from ._head_io import _facts_of, _resolve, _sites, head_activations
from ._impose import imposed_queries
from ._query_metric import (
    metric_query_basis,
    metric_truncated_query,
    output_error_curve,
    query_output_metric,
)

__all__ = ["HeadBasis", "model_query_bases", "query_edits", "query_loss_gradients",
           "sequential_query_bases"]

METRICS = (None, "output")
"""The metrics a basis is cut in: None (the realised queries' own, data-aware) or the head's
output metric."""


class HeadBasis(NamedTuple):
    """One head's query basis on calibration inputs.

    Attributes
    ----------
    facts : HeadFacts
    basis : MetricBasis
        What a rank is cut on (:func:`~intrinsic_rank.inspection.metric_truncated_query`).
    curve : ndarray of shape (head_dim + 1,) or None
        In the output metric: the first-order error each rank leaves in the layer's
        attention output, as a share of it
        (:func:`~intrinsic_rank.inspection.output_error_curve`); None otherwise.
    plain : MetricBasis
        The realised queries' own basis (the data-aware truncation's); its
        ``energies`` are the query energy along each direction, largest first.
    w_o : ndarray of shape (head_dim, d_model)
        The head's rows of the output projection (``facts.w_o``).
    output_energy : float or None
        The mean energy per position of the head's layer's attention output on the
        calibration windows (what ``curve`` is a share of); None when not measured.
    """

    facts: Any
    basis: Any
    curve: Any
    plain: Any
    w_o: Any
    output_energy: Any

    @property
    def query_energy(self):
        """The realised queries' mean energy per position along their singular directions."""
        return self.plain.energies


def _layer_energy(heads):
    """Mean energy per position of a layer's attention output ``sum_h Y_h w_o,h + b_o``."""
    total = sum(np.asarray(data.Y, dtype=np.float64) @ data.facts.w_o for data in heads)
    total = total + np.asarray(heads[0].facts.b_o, dtype=np.float64)
    return float(np.mean(np.sum(total ** 2, axis=-1)))


def _all_pairs(bare, kind, label):
    from ..nn import query_key_weights

    return [(layer, head) for layer, heads in enumerate(query_key_weights(bare))
            for head in range(heads.n_heads)]


def model_query_bases(model, input_ids, *, metric="output", max_windows=16, batch_size=16,
                      device="cpu", progress=False):
    """Every head's query basis (and output-error curve) on calibration windows.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        A causal LM whose heads :func:`~intrinsic_rank.inspection.head_facts` reads.
    input_ids : array-like of shape (n, L), integer
        Calibration windows (for instance a corpus's training split).
    metric : {"output", None}, default="output"
        Cut the ranks in the head's output metric, or on the realised queries alone.
    max_windows : int, default=16
        Windows the output metric is averaged over (the basis and the curve use
        every window).
    batch_size : int, default=16
        Windows per forward pass.
    device : str, default="cpu"
    progress : bool, default=False

    Returns
    -------
    bases : dict of (layer, head) -> HeadBasis
        Every head of the model, in order.

    Raises
    ------
    ValueError
        For a model the reader refuses, an unknown metric, or windows out of the
        vocabulary or context.

    Examples
    --------
    >>> ids = np.random.default_rng(0).integers(0, 64, (6, 16))
    >>> bases = model_query_bases("default", ids)
    >>> len(bases), bases[1, 2].curve.shape, float(bases[1, 2].curve[-1])
    (8, (17,), 0.0)
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be 'output' or None; got {metric!r}")
    max_windows = check_int(max_windows, "max_windows")
    bare, kind, label = _resolve(model)
    pairs = _all_pairs(bare, kind, label)
    data = head_activations(model, input_ids, pairs, batch_size=batch_size, device=device,
                            progress=progress)
    energy = {layer: _layer_energy([data[key] for key in pairs if key[0] == layer])
              for layer in sorted({layer for layer, _ in pairs})}
    return {key: _head_basis(data[key].X, data[key].facts, energy[key[0]], metric, max_windows)
            for key in pairs}


def _head_basis(X, facts, layer_energy, metric, max_windows):
    plain = metric_query_basis(X, facts)
    if metric is None:
        return HeadBasis(facts, plain, None, plain, facts.w_o, layer_energy)
    weights = query_output_metric(X, facts, max_windows=max_windows)
    basis = metric_query_basis(X, facts, weights)
    curve = output_error_curve(basis, layer_energy) if layer_energy > 0 else \
        np.zeros(facts.head_dim + 1)
    return HeadBasis(facts, basis, curve, plain, facts.w_o, layer_energy)


def query_edits(bases, ranks):
    """The query projections that put every head at its rank, for ``imposed_queries``.

    Parameters
    ----------
    bases : dict of (layer, head) -> HeadBasis
    ranks : dict of (layer, head) -> int
        A head at its full width keeps its own query (no edit).

    Returns
    -------
    edits : dict of (layer, head) -> ndarray or (ndarray, ndarray)
        ``w_q`` (``(w_q, b_q)`` for a head with a query bias).
    factors : dict of (layer, head) -> (A, a, C)

    Examples
    --------
    >>> ids = np.random.default_rng(0).integers(0, 64, (6, 16))
    >>> bases = model_query_bases("default", ids, metric=None)
    >>> edits, factors = query_edits(bases, {(1, 2): 3, (0, 0): 16})
    >>> list(edits), factors[1, 2][0].shape
    ([(1, 2)], (64, 3))
    """
    edits, factors = {}, {}
    for key, rank in ranks.items():
        head = bases[key]
        width = min(head.facts.d_model, head.facts.head_dim)
        rank = check_int(rank, f"rank of L{key[0]}H{key[1]}", minimum=1,
                         maximum=head.facts.head_dim)
        if rank >= width:
            continue
        A, a, C = metric_truncated_query(head.facts, head.basis, rank)
        factors[key] = A, a, C
        biased = np.any(np.asarray(head.facts.b_q) != 0)
        edits[key] = (A @ C, a @ C) if biased else A @ C
    return edits, factors


def sequential_query_bases(model, input_ids, ranks, *, metric="output", max_windows=16,
                           device="cpu"):
    """Each layer's heads fitted on the inputs the already-edited layers produce.

    One forward pass over all ``input_ids`` at once: a hook on each layer's
    attention reads its input (from the layers below, already edited), fits
    that layer's heads on it (their basis in ``metric``, the metric itself on the
    edited keys, values and attention), imposes their ranks, and lets the layer
    run. The model is restored when the pass ends, normally or not.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
    input_ids : array-like of shape (n, L), integer
        Calibration windows; they go through the model in one batch.
    ranks : dict of (layer, head) -> int
        The rank of every edited head (a head at its width, or absent, keeps
        its own query).
    metric : {"output", None}, default="output"
    max_windows : int, default=16
    device : str, default="cpu"

    Returns
    -------
    bases : dict of (layer, head) -> HeadBasis
        The heads of ``ranks`` below their width, fitted on edited inputs
        (``curve`` is None: the curves of the unedited model are what an
        allocation reads).

    Examples
    --------
    >>> ids = np.random.default_rng(0).integers(0, 64, (6, 16))
    >>> fitted = sequential_query_bases("default", ids, {(0, 1): 4, (1, 2): 3})
    >>> sorted(fitted), fitted[1, 2].basis.basis.shape
    ([(0, 1), (1, 2)], (16, 16))
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be 'output' or None; got {metric!r}")
    max_windows = check_int(max_windows, "max_windows")
    bare, kind, label = _resolve(model)
    ids, _ = check_token_inputs(input_ids, None, model_vocab_size(bare, kind),
                                model_max_positions(bare, kind))
    facts = _facts_of(bare, kind, label, list(ranks))
    edited = {key: rank for key, rank in ranks.items()
              if rank < min(facts[key].d_model, facts[key].head_dim)}
    layers = sorted({layer for layer, _ in edited})
    fitted, handles = {}, []
    with contextlib.ExitStack() as imposed:
        def fit_layer(module, args, kwargs, layer):
            X = (args[0] if args else kwargs["hidden_states"]).detach()
            X = X.to("cpu", torch.float32).numpy()
            keys = [key for key in edited if key[0] == layer]
            for key in keys:
                f = facts[key]
                weights = (None if metric is None else
                           query_output_metric(X, f, max_windows=max_windows))
                plain = metric_query_basis(X, f)
                basis = plain if weights is None else metric_query_basis(X, f, weights)
                fitted[key] = HeadBasis(f, basis, None, plain, f.w_o, None)
            edits, _ = query_edits(fitted, {key: edited[key] for key in keys})
            imposed.enter_context(imposed_queries(bare, edits))

        for layer in layers:
            site, _ = _sites(bare, kind, layer)
            handles.append(site.register_forward_pre_hook(
                lambda m, a, k, layer=layer: fit_layer(m, a, k, layer), with_kwargs=True))
        training = [(m, m.training) for m in bare.modules()]
        try:
            bare.to(device).eval()
            with torch.no_grad():
                batch = ids.to(device)
                bare(batch) if kind == "tiny" else bare(input_ids=batch, use_cache=False)
        finally:
            for handle in handles:
                handle.remove()
            for module, mode in training:
                module.training = mode
    return fitted


def query_loss_gradients(model, input_ids, heads, *, batch_size=8, device="cpu"):
    """The next-token loss's gradient at heads' query activations, per position.

    For every window, the gradient of the model's mean next-token cross-entropy
    (over the window's predictions) with respect to each head's queries ``q_t``
    (``X w_q + b_q``, before any rotation or norm), by one backward pass per
    batch; the model's weights get no gradient.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
    input_ids : array-like of shape (n, L), integer
    heads : sequence of (layer, head)
    batch_size : int, default=8
    device : str, default="cpu"

    Returns
    -------
    gradients : dict of (layer, head) -> ndarray of shape (n, L, head_dim), float32

    Examples
    --------
    >>> ids = np.random.default_rng(0).integers(0, 64, (4, 12))
    >>> g = query_loss_gradients("default", ids, [(1, 2)])
    >>> g[1, 2].shape, bool(np.abs(g[1, 2]).sum() > 0)
    ((4, 12, 16), True)
    """
    from ._impose import _next_token_losses, _query_block

    bare, kind, label = _resolve(model)
    pairs = [tuple(p) for p in heads]
    layers = {}
    facts = _facts_of(bare, kind, label, pairs, layers)
    ids, _ = check_token_inputs(input_ids, None, model_vocab_size(bare, kind),
                                model_max_positions(bare, kind))
    batch_size = check_int(batch_size, "batch_size")
    owners = {}
    for key in pairs:
        param, index, _ = _query_block(layers, *key)
        module = next(m for m in bare.modules()
                      if any(p is param for p in m.parameters(recurse=False)))
        rows = index if not isinstance(index, tuple) else index[1]
        owners.setdefault(id(module), (module, []))[1].append((key, rows))
    n, L = ids.shape
    out = {key: np.empty((n, L, facts[key].head_dim), np.float32) for key in pairs}
    kept = {}

    def keep(module, args, output):
        output.retain_grad()
        kept[id(module)] = output

    handles = [module.register_forward_hook(keep) for module, _ in owners.values()]
    training = [(m, m.training) for m in bare.modules()]
    grads = [(p, p.requires_grad) for p in bare.parameters()]
    # only the query parameters take part in the graph, so every query activation has
    # one and the loss's gradient reaches it along every path through the layers above
    queried = [p for module, _ in owners.values() for p in module.parameters(recurse=False)]
    try:
        bare.to(device).eval()
        for p, _ in grads:
            p.requires_grad_(False)
        for p in queried:
            p.requires_grad_(True)
        for start in range(0, n, batch_size):
            kept.clear()
            batch = ids[start:start + batch_size].to(device)
            with torch.enable_grad():
                _next_token_losses(bare, kind, batch).mean().backward()
            for key_id, (_, items) in owners.items():
                grad = kept[key_id].grad.detach().to("cpu", torch.float32)
                for key, rows in items:
                    out[key][start:start + batch_size] = grad[..., rows].numpy()
    finally:
        for handle in handles:
            handle.remove()
        for p, flag in grads:
            p.grad = None
            p.requires_grad_(flag)
        for module, mode in training:
            module.training = mode
    return out
