"""Per-head rank profiles of real models (Entropic Bound, appendix B).

For every layer and head of a pretrained model this measures the static
query-key kernel ``W_Q W_K^T`` (its spectrum and rank measures), the realised
attention matrices on a batch of inputs (their energy rank, averaged over
inputs), two diagnostics of the task-independent structure that the paper
says dominates real mixers: attention sinks (mass on the first token, or on
any single key) and locality (mass on a band around the diagonal), and the
head scores of the interpretability literature: previous-token,
duplicate-token and induction scores (the share of a head's attention on the
positions a pattern names) and the sink rate. A uniform attention baseline on
the same inputs says what "a lot" means.

Registered as the experiment ``profile`` (the same name as piece and command):
the command profiles one model and its reachability geometry, the reproduce
piece several models and :func:`kernel_rank_trajectory`.
"""

import csv
import math
import os
import time

import numpy as np
import torch
from scipy import stats
from sklearn.utils import Bunch

from .. import spectral
from .._validation import check_device, check_int, torch_rng
from ..datasets import load_sample_texts, make_induction_corpus
from ..nn import (
    as_model_adapter,
    attention_maps,
    check_token_inputs,
    load_model,
    model_max_positions,
    model_vocab_size,
    query_key_weights,
    unwrap_model,
)
from ._arguments import parse_precision
from ._output import jsonable, pyplot, save_figure
from ._progress import steps as progress_steps
from ._reach import GEOMETRY_BOUND_COLUMNS, _refinement_rows, reachability_geometry
from ._registry import Experiment, Verdict, grade, is_finite, number_text, register, save_plot

__all__ = [
    "HEAD_PATTERNS",
    "PROFILE_COLUMNS",
    "PROFILE_SUMMARY_COLUMNS",
    "TRAJECTORY_COLUMNS",
    "head_pattern_masks",
    "head_pattern_scores",
    "kernel_rank_trajectory",
    "plot_head_profile",
    "plot_head_scores",
    "plot_kernel_rank_trajectory",
    "profile_heads",
    "save_profile_csv",
]

#: columns of the printed profile table (every record has more, see profile_heads)
PROFILE_COLUMNS = [
    "layer", "head", "d_head", "kernel_energy_rank", "kernel_numerical_rank",
    "attn_energy_rank", "sink_mass", "max_key_mass", "band_mass", "entropy",
    "previous_token_score", "duplicate_token_score", "induction_score",
]

HEAD_PATTERNS = ("previous_token", "duplicate_token", "induction")
"""The attention patterns scored per head; record column ``<pattern>_score``."""

_KERNEL_MEASURES = {
    "numerical_rank": "kernel_numerical_rank",
    "energy_effective_rank": "kernel_energy_rank",
    "stable_rank": "kernel_stable_rank",
    "participation_ratio": "kernel_participation_ratio",
    "entropy_effective_rank": "kernel_entropy_rank",
    "energy_threshold_rank": "kernel_energy_threshold_rank",
}
_MAP_BUDGET = 256 * 2**20
_DIAGNOSTICS = ("attn_energy_rank", "attn_numerical_rank", "attn_stable_rank",
                "sink_mass", "max_key_mass", "band_mass", "entropy")


def _model_facts(module):
    """Vocabulary size, context length, family and parameter dtype of a resolved model."""
    model, kind = unwrap_model(module)
    family = ("tiny_causal_lm" if kind == "tiny"
              else getattr(model.config, "model_type", type(model).__name__))
    return (model_vocab_size(model, kind), model_max_positions(model, kind), family,
            next(model.parameters()).dtype)


def _default_inputs(module, tokenizer, vocab, n_inputs, max_length, random_state):
    if tokenizer is not None:
        texts = load_sample_texts()
        reps = -(-n_inputs // len(texts))
        return (texts * reps)[:n_inputs], "sample texts"
    if not hasattr(module, "get_input_embeddings"):
        # the project's own models are trained on (or for) induction sequences
        ids = make_induction_corpus(n_inputs, max_length, vocab,
                                    max_segment=max(1, max_length // 4),
                                    random_state=random_state)
        return ids, "induction sequences"
    rng = np.random.default_rng(random_state)
    return rng.integers(0, vocab, size=(n_inputs, max_length)), "uniform random tokens"


def _encode(inputs, tokenizer, max_length, vocab, context):
    """``(ids, mask, texts)`` from texts, a tokenizer output or an id array."""
    texts = None
    if isinstance(inputs, str):
        inputs = [inputs]
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(t, str) for t in inputs):
        if tokenizer is None:
            raise ValueError(
                "inputs are texts but the model has no tokenizer: pass tokenizer=... or "
                "token ids of shape (n_inputs, length)"
            )
        texts = list(inputs)
        # one text at a time, padded here: many causal LM tokenizers (GPT-2's) have
        # no padding token, and the padded positions are masked out anyway
        encoded = [list(tokenizer(text, truncation=True, max_length=max_length)["input_ids"])
                   for text in texts]
        width = max(1, max(len(e) for e in encoded))
        inputs = {"input_ids": np.array([e + [0] * (width - len(e)) for e in encoded]),
                  "attention_mask": np.array([[1] * len(e) + [0] * (width - len(e))
                                              for e in encoded])}
    if hasattr(inputs, "keys") and "input_ids" in inputs:
        ids, mask = inputs["input_ids"], inputs.get("attention_mask")
    else:
        ids, mask = inputs, None
    ids, mask = check_token_inputs(ids, mask, vocab, context)
    ids, mask = ids.numpy(), mask.numpy().astype(bool)
    if not mask.any(axis=1).all():
        raise ValueError("every input needs at least one unmasked token")
    return ids, mask, texts


def _is_causal(maps):
    """Whether every head puts (numerically) no mass above the diagonal."""
    upper = np.triu(np.ones(maps.shape[-2:], dtype=bool), 1)
    return bool(np.all(maps[..., upper] < 1e-6))


def _map_diagnostics(A, band):
    """Per-head diagnostics of one input's attention maps ``A`` of shape (L, H, n, n).

    ``A`` keeps the model's float32: the numerical rank's default rule then
    uses float32's epsilon, the precision the probabilities were computed in.
    """
    n = A.shape[-1]
    ranks = spectral.rank_profile(A)
    prof = {
        "attn_energy_rank": ranks["energy_effective_rank"],
        "attn_numerical_rank": ranks["numerical_rank"],
        "attn_stable_rank": ranks["stable_rank"],
    }
    A = A.astype(np.float64)
    i, j = np.indices((n, n))
    near = np.abs(i - j) <= band
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(A > 0, A * np.log(np.where(A > 0, A, 1.0)), 0.0)
    prof.update(
        sink_mass=A[..., :, 0].mean(-1),
        max_key_mass=A.mean(-2).max(-1),
        band_mass=(A * near).sum(-1).mean(-1),
        entropy=-plogp.sum(-1).mean(-1),
    )
    return prof


def _uniform_maps(n, causal):
    U = np.tril(np.ones((n, n))) if causal else np.ones((n, n))
    return (U / U.sum(1, keepdims=True))[None, None].astype(np.float32)


def head_pattern_masks(tokens):
    """The key positions each attention pattern names, for one sequence of token ids.

    For query ``i`` (rows) and key ``j`` (columns), the three patterns of the
    interpretability literature (TransformerLens's ``detect_head``):

    * ``previous_token``: ``j = i - 1``;
    * ``duplicate_token``: ``j < i`` with ``tokens[j] == tokens[i]`` (an earlier
      copy of the current token);
    * ``induction``: ``j = k + 1`` for every ``k < i`` with
      ``tokens[k] == tokens[i]`` (the token that followed an earlier copy of the
      current token; ``j <= i``).

    Parameters
    ----------
    tokens : array-like of int, shape (n,)
        One sequence's token ids (padding removed).

    Returns
    -------
    masks : dict
        ``{pattern: bool ndarray of shape (n, n)}`` for each pattern of
        :data:`HEAD_PATTERNS`.

    Examples
    --------
    >>> masks = head_pattern_masks([5, 7, 5, 7])
    >>> masks["duplicate_token"].nonzero()
    (array([2, 3]), array([0, 1]))
    >>> masks["induction"].nonzero()
    (array([2, 3]), array([1, 2]))
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or len(tokens) == 0:
        raise ValueError(f"tokens must be a non-empty 1-D sequence of ids; got shape "
                         f"{tokens.shape}")
    n = len(tokens)
    duplicate = np.tril(tokens[:, None] == tokens[None, :], -1)
    induction = np.zeros((n, n), dtype=bool)
    induction[:, 1:] = duplicate[:, :-1]
    return {"previous_token": np.eye(n, k=-1, dtype=bool), "duplicate_token": duplicate,
            "induction": induction}


def _pattern_sums(A, tokens, exclude_first, exclude_diagonal):
    """Per pattern: attention on its positions and in its defined queries, and their count.

    ``A`` has shape ``(..., n, n)``. The first key and the diagonal, when
    excluded, are removed from the attention and from the pattern; a query
    counts where the pattern still names a position.
    """
    n = A.shape[-1]
    keep = np.ones((n, n), dtype=bool)
    if exclude_first:
        keep[:, 0] = False
    if exclude_diagonal:
        keep[np.diag_indices(n)] = False
    A = np.where(keep, np.asarray(A, dtype=np.float64), 0.0)
    sums = {}
    for name, mask in head_pattern_masks(tokens).items():
        mask = mask & keep
        rows = mask.any(axis=1)
        on_pattern = (A * mask).sum(-1)[..., rows].sum(-1)
        total = A.sum(-1)[..., rows].sum(-1)
        sums[name] = (on_pattern, total, int(rows.sum()))
    return sums


def _ratio(on_pattern, total):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, on_pattern / np.where(total > 0, total, 1.0), np.nan)


def head_pattern_scores(attention, tokens, *, exclude_first=False, exclude_diagonal=False):
    """Previous-token, duplicate-token and induction scores of attention maps.

    The attention-pattern *match* score of the interpretability literature
    (TransformerLens's ``detect_head`` with its ``"mul"`` measure): the share
    of a head's attention that falls on the positions a pattern names
    (:func:`head_pattern_masks`), taken over the queries for which the pattern
    names at least one position. With no exclusion each attention row sums to
    one, so the score is the mean over those queries of the mass on the
    pattern's positions. ``exclude_first`` and ``exclude_diagonal`` remove the
    first key and the query's own position from both the attention and the
    pattern first, so that a sink or self-attention does not count against a
    head (the score then is a share of the remaining attention).

    Parameters
    ----------
    attention : array-like of shape (..., n, n)
        Attention probabilities, queries on the rows (for instance one input's
        maps of shape ``(n_layers, n_heads, n, n)``).
    tokens : array-like of int, shape (n,)
        The input's token ids.
    exclude_first : bool, default=False
        Leave out the first key (an attention sink, ``[CLS]`` or ``<bos>``).
    exclude_diagonal : bool, default=False
        Leave out each query's own position.

    Returns
    -------
    scores : dict
        ``{pattern: ndarray of shape attention.shape[:-2]}`` for each pattern of
        :data:`HEAD_PATTERNS`, in ``[0, 1]``; NaN where the pattern names no
        position (no repeated token, for the duplicate and induction patterns).

    Examples
    --------
    A head that attends to the previous token scores 1 on that pattern:

    >>> A = np.eye(5, k=-1)
    >>> A[0, 0] = 1.0
    >>> scores = head_pattern_scores(A, [3, 1, 4, 1, 5])
    >>> float(scores["previous_token"]), float(scores["duplicate_token"])
    (1.0, 0.0)

    Uniform causal attention over ``i + 1`` keys gives ``1 / (i + 1)`` to each:

    >>> U = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    >>> round(float(head_pattern_scores(U, [1, 2, 3, 4])["previous_token"]), 4)
    0.3611
    """
    attention = np.asarray(attention, dtype=np.float64)
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must have shape (..., n, n); got {attention.shape}")
    tokens = np.asarray(tokens)
    if tokens.shape != attention.shape[-1:]:
        raise ValueError(f"tokens must have shape ({attention.shape[-1]},), one id per "
                         f"position of attention; got {tokens.shape}")
    sums = _pattern_sums(attention, tokens, bool(exclude_first), bool(exclude_diagonal))
    return {name: _ratio(on, total) for name, (on, total, _) in sums.items()}


def _kernel_cores(heads):
    """``(L, H, d_head, d_head)`` cores with the singular values of ``s W_Q^h W_K^hT``."""
    cores = []
    for layer in heads:
        # W_Q W_K^T = Q_q (R_q R_k^T) Q_k^T: the d x d kernel's singular values are
        # those of the small d_head x d_head core
        rq = np.linalg.qr(np.asarray(layer.w_q, dtype=np.float64), mode="r")
        rk = np.linalg.qr(np.asarray(layer.w_k, dtype=np.float64), mode="r")
        cores.append(layer.scale * rq @ np.swapaxes(rk, -1, -2))
    return np.stack(cores)


def profile_heads(model="default", inputs=None, *, tokenizer=None, n_inputs=32, max_length=64,
                  band=1, q=0.99, threshold=0.5, exclude_first=False, exclude_diagonal=False,
                  sink_rate_threshold=0.3, batch_size=8, random_state=0, device="cpu"):
    """Per-layer, per-head rank profile of a (pretrained) attention model.

    For each head ``h`` of each layer it reports

    * the static query-key kernel ``K_h = s W_Q^h W_K^hT`` (``d x d``, rank at
      most ``d_head``; ``s`` the model's logit scale, biases left out): its
      singular values and the six rank measures of
      :func:`intrinsic_rank.spectral.rank_profile`;
    * the realised attention matrices on the inputs (``n x n`` probabilities,
      padding removed): energy effective rank, numerical rank and stable rank,
      each averaged over inputs (``attn_energy_rank_std`` is the spread);
    * sink and locality diagnostics, averaged over queries and inputs:
      ``sink_mass`` (mass on the first token), ``max_key_mass`` (mass on the
      single key that receives the most, wherever it is, e.g. ``[SEP]``),
      ``band_mass`` (mass on keys within ``band`` positions of the query) and
      ``entropy`` (of each query's attention row, in nats);
    * the head scores of the interpretability literature, pooled over the
      inputs (:func:`head_pattern_scores`): ``previous_token_score``,
      ``duplicate_token_score`` and ``induction_score``, the share of the
      head's attention on the positions the pattern names, over the queries
      where it names one (NaN where no input repeats a token). On induction
      sequences (the default inputs of the project's models) every repeated
      segment defines them; on texts, the tokens that recur in the text do.

    Parameters
    ----------
    model : "default", str, path or model, default="default"
        ``"default"`` (the embedded :class:`~intrinsic_rank.nn.TinyCausalLM`), a
        name in :data:`~intrinsic_rank.nn.PACKAGED_MODELS` (e.g.
        ``"all-MiniLM-L6-v2"``), a Hugging Face model folder (loaded offline),
        a ``.pt`` file of :func:`~intrinsic_rank.nn.save_tiny_lm`, or an
        instance (``TinyCausalLM``, a ``transformers`` model, an adapter).
    inputs : None, list of str, dict or array-like of int, default=None
        Texts (tokenized with the model's tokenizer, padded, truncated to
        ``max_length``), a tokenizer output (``input_ids`` and
        ``attention_mask``), or token ids ``(n_inputs, length)``. ``None``: the
        package's :func:`~intrinsic_rank.datasets.load_sample_texts` for models
        with a tokenizer, induction sequences for the project's own models,
        uniform random tokens otherwise.
    tokenizer : transformers tokenizer or None, default=None
        Overrides the tokenizer found in the model folder.
    n_inputs : int, default=32
        Number of default inputs (ignored when ``inputs`` is given).
    max_length : int, default=64
        Truncation length of texts and length of default token inputs, capped
        at the model's context. Token ids given directly are never cut: longer
        than the context is an error.
    band : int, default=1
        Half-width of the diagonal band for ``band_mass`` (``0``: the diagonal).
    q : float, default=0.99
        Energy fraction of ``kernel_energy_threshold_rank``.
    threshold : float, default=0.5
        A head counts as a sink head (``sink_mass``), a local head
        (``band_mass``) or a previous-token, duplicate-token or induction head
        in the summary when that mass or score exceeds ``threshold``.
    exclude_first, exclude_diagonal : bool, default=False
        Leave the first key, or each query's own position, out of the head
        scores (attention and pattern alike), as TransformerLens's
        ``exclude_bos`` and ``exclude_current_token`` do.
    sink_rate_threshold : float, default=0.3
        The summary's ``sink_rate`` is the share of heads whose mean attention
        to the first token (``sink_mass``) exceeds it (0.3 in the attention-sink
        literature).
    batch_size : int, default=8
        Inputs per forward pass, at most; fewer when one batch's attention maps
        would take more than 256 MiB (long inputs on large models).
    random_state : int, default=0
        Seed of generated default inputs.
    device : str or torch.device, default="cpu"
        Where the forward passes run: the model (the instance given, or the
        one loaded) is moved there. Every number returned is CPU numpy.

    Returns
    -------
    profile : Bunch
        ``records`` (one dict per layer and head: every column of
        :data:`PROFILE_COLUMNS` and the other rank measures and spreads),
        ``kernel_spectra`` (``(n_layers, n_heads, d_head)``), ``baselines``
        (the same diagnostics for uniform attention over the visible keys on
        the same inputs, head scores included), ``summary`` (sink, local,
        previous-token, duplicate-token and induction head counts, the best
        score of each pattern and its head, the sink rate, the Spearman
        correlation of static-kernel and realised-attention energy ranks across
        heads), ``config`` (model, family, sizes, whether it is causal or
        rotary, the inputs, the score options and ``pattern_queries``: how many
        queries define each pattern) and ``seconds``.

    Examples
    --------
    >>> profile = profile_heads("default", n_inputs=4, max_length=16)
    >>> len(profile.records), profile.config["n_layers"], profile.config["n_heads"]
    (8, 2, 4)
    >>> bool(profile.config["causal"])
    True
    >>> record = profile.records[5]  # layer 1, head 1
    >>> uniform = profile.baselines["previous_token_score"]
    >>> round(record["previous_token_score"], 2), round(uniform, 2)
    (0.24, 0.16)
    >>> profile.summary["sink_rate"], profile.summary["induction_heads"]
    (0.5, 0)
    """
    start = time.perf_counter()
    n_inputs = check_int(n_inputs, "n_inputs")
    max_length = check_int(max_length, "max_length", 2)
    band = check_int(band, "band", 0)
    batch_size = check_int(batch_size, "batch_size")
    if not 0 < float(threshold) < 1:
        raise ValueError(f"threshold must lie in (0, 1); got {threshold!r}")
    if not 0 < float(q) <= 1:
        raise ValueError(f"q must satisfy 0 < q <= 1; got {q!r}")
    if not 0 < float(sink_rate_threshold) < 1:
        raise ValueError(f"sink_rate_threshold must lie in (0, 1); got "
                         f"{sink_rate_threshold!r}")
    exclude_first, exclude_diagonal = bool(exclude_first), bool(exclude_diagonal)
    device = check_device(device)
    module, folder_tokenizer, label = load_model(model)
    unwrap_model(module)[0].to(device)
    tokenizer = tokenizer if tokenizer is not None else folder_tokenizer
    vocab, context, family, dtype = _model_facts(module)
    if context is not None:  # default inputs and truncated texts fit the context
        max_length = min(max_length, context)
    if inputs is None:
        inputs, source = _default_inputs(module, tokenizer, vocab, n_inputs, max_length,
                                         random_state)
    else:
        source = "given"
    ids, mask, texts = _encode(inputs, tokenizer, max_length, vocab, context)
    eps = float(torch.finfo(dtype).eps) if dtype.is_floating_point else float(
        np.finfo(np.float32).eps)

    heads = query_key_weights(module)
    cores = _kernel_cores(heads)
    spectra = np.linalg.svd(cores, compute_uv=False)
    n_layers, n_heads, d_head = spectra.shape
    d_model = heads[0].w_q.shape[1]
    # the matrix_rank rule for the d x d kernel at the precision of the weights
    tol = spectra[..., 0] * d_model * eps
    measures = spectral.rank_profile(cores, tol=tol, q=q)
    kernel = {column: np.asarray(measures[measure])
              for measure, column in _KERNEL_MEASURES.items()}

    per_input = {key: [] for key in _DIAGNOSTICS}
    pattern_sums = {name: [0.0, 0.0, 0] for name in HEAD_PATTERNS}
    causal, lengths, sequences = True, [], []
    # a batch's maps take n_layers * n_heads * T^2 floats per input: keep them
    # under _MAP_BUDGET bytes so long inputs on big models do not exhaust memory
    per_input_bytes = 4 * n_layers * n_heads * ids.shape[1] ** 2
    batch_size = max(1, min(batch_size, _MAP_BUDGET // per_input_bytes))
    for begin in range(0, len(ids), batch_size):
        maps = attention_maps(module, ids[begin:begin + batch_size],
                              mask[begin:begin + batch_size])
        for A, tokens, valid in zip(maps, ids[begin:begin + batch_size],
                                    mask[begin:begin + batch_size]):
            A, tokens = A[:, :, valid][:, :, :, valid], tokens[valid]
            causal = causal and _is_causal(A)  # one-token inputs cannot tell
            lengths.append(A.shape[-1])
            sequences.append(tokens)
            for key, value in _map_diagnostics(A, band).items():
                per_input[key].append(value)
            _add_pattern_sums(pattern_sums, _pattern_sums(A, tokens, exclude_first,
                                                          exclude_diagonal))
    if max(lengths) < 2:
        raise ValueError("every input has a single token: attention maps of one token say "
                         "nothing; give inputs of at least two tokens")
    uniform = {key: [] for key in _DIAGNOSTICS}
    at_length = {}
    for n in lengths:  # the same diagnostics for uniform attention on the same lengths
        if n not in at_length:
            at_length[n] = _map_diagnostics(_uniform_maps(n, causal), band)
        for key, value in at_length[n].items():
            uniform[key].append(value)
    uniform_sums = {name: [0.0, 0.0, 0] for name in HEAD_PATTERNS}
    for tokens in sequences:  # the head scores of uniform attention on the same tokens
        _add_pattern_sums(uniform_sums, _pattern_sums(
            _uniform_maps(len(tokens), causal), tokens, exclude_first, exclude_diagonal))
    scores = {name: _ratio(np.asarray(on), np.asarray(total))
              for name, (on, total, _) in pattern_sums.items()}
    stacked = {key: np.stack(values) for key, values in per_input.items()}  # (n, L, H)
    means = {key: value.mean(0) for key, value in stacked.items()}

    records = []
    for layer in range(n_layers):
        for head in range(n_heads):
            rec = dict(layer=layer, head=head, d_head=int(d_head),
                       kernel_norm=float(spectra[layer, head, 0]))
            for column in _KERNEL_MEASURES.values():
                value = kernel[column][layer, head]
                rec[column] = int(value) if np.issubdtype(np.asarray(value).dtype,
                                                          np.integer) else float(value)
            for key in _DIAGNOSTICS:
                rec[key] = float(means[key][layer, head])
            rec["attn_energy_rank_std"] = float(stacked["attn_energy_rank"][:, layer, head].std())
            for name in HEAD_PATTERNS:
                rec[f"{name}_score"] = float(np.broadcast_to(scores[name],
                                                             (n_layers, n_heads))[layer, head])
            records.append(rec)

    baselines = {key: float(np.mean(values)) for key, values in uniform.items()}
    for name, (on, total, _) in uniform_sums.items():
        baselines[f"{name}_score"] = float(_ratio(np.asarray(on).ravel()[:1],
                                                  np.asarray(total).ravel()[:1])[0])
    summary = _summarize(records, threshold, baselines, sink_rate_threshold)
    rotary = any(getattr(layer, "rotary", False) for layer in heads)
    qk_norm = any(getattr(layer, "qk_norm", False) for layer in heads)
    config = dict(model=label, family=family, n_layers=int(n_layers), n_heads=int(n_heads),
                  d_model=int(d_model), d_head=int(d_head), vocab_size=vocab,
                  context=context, causal=bool(causal), rotary=rotary, qk_norm=qk_norm,
                  dtype=str(dtype).replace("torch.", ""), inputs=source,
                  n_inputs=int(len(ids)), mean_length=float(np.mean(lengths)),
                  min_length=int(min(lengths)), max_length=int(max(lengths)), band=band,
                  q=float(q), threshold=float(threshold), exclude_first=exclude_first,
                  exclude_diagonal=exclude_diagonal,
                  sink_rate_threshold=float(sink_rate_threshold),
                  pattern_queries={name: int(count) for name, (_, _, count)
                                   in pattern_sums.items()},
                  random_state=random_state)
    return Bunch(records=records, kernel_spectra=spectra, baselines=baselines,
                 summary=summary, config=config, texts=texts,
                 seconds=time.perf_counter() - start)


def _add_pattern_sums(totals, sums):
    for name, (on_pattern, total, count) in sums.items():
        totals[name][0] = totals[name][0] + on_pattern
        totals[name][1] = totals[name][1] + total
        totals[name][2] += count


def _summarize(records, threshold, baselines, sink_rate_threshold=0.3):
    kernel = np.array([r["kernel_energy_rank"] for r in records])
    realised = np.array([r["attn_energy_rank"] for r in records])
    if len(records) > 2 and np.ptp(kernel) > 0 and np.ptp(realised) > 0:
        rho = float(stats.spearmanr(kernel, realised).statistic)
    else:
        rho = float("nan")
    d_head = records[0]["d_head"]
    return dict(
        n_heads_total=len(records),
        sink_heads=int(sum(r["sink_mass"] > threshold for r in records)),
        any_sink_heads=int(sum(r["max_key_mass"] > threshold for r in records)),
        local_heads=int(sum(r["band_mass"] > threshold for r in records)),
        kernel_energy_rank_median=float(np.median(kernel)),
        kernel_energy_rank_fraction=float(np.median(kernel) / d_head),
        attn_energy_rank_median=float(np.median(realised)),
        uniform_attn_energy_rank=baselines["attn_energy_rank"],
        spearman_kernel_vs_attn=rho,
        sink_rate=float(np.mean([r["sink_mass"] > sink_rate_threshold for r in records])),
        **_score_summary(records, threshold),
    )


def _score_summary(records, threshold):
    """Per pattern: heads above ``threshold``, the best score and its (layer, head)."""
    summary = {}
    for name in HEAD_PATTERNS:
        values = np.array([r[f"{name}_score"] for r in records], dtype=float)
        summary[f"{name}_heads"] = int(np.sum(values > threshold))
        if np.all(np.isnan(values)):
            summary[f"max_{name}_score"], summary[f"best_{name}_head"] = float("nan"), None
        else:
            best = records[int(np.nanargmax(values))]
            summary[f"max_{name}_score"] = float(np.nanmax(values))
            summary[f"best_{name}_head"] = [best["layer"], best["head"]]
    return summary


def save_profile_csv(profile, path):
    """Write the profile's records as a tidy CSV (one row per layer and head).

    Parameters
    ----------
    profile : Bunch
        The output of :func:`profile_heads`.
    path : str or path-like

    Returns
    -------
    path : str
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(profile.records[0]))
        writer.writeheader()
        writer.writerows(profile.records)
    return path


_PANELS = [
    ("kernel_energy_rank", "static QK kernel: energy rank", "viridis", "energy effective rank"),
    ("attn_energy_rank", "realised attention: energy rank", "viridis", "energy effective rank"),
    ("entropy", "attention entropy", "viridis", "entropy per query (nats)"),
    ("sink_mass", "sink: mass on the first token", "magma", "share of attention"),
    ("max_key_mass", "mass on the most-attended key", "magma", "share of attention"),
    ("band_mass", "locality: mass within the band", "magma", "share of attention"),
]

_SCORE_PANELS = [
    ("previous_token_score", "previous-token score", "key i - 1"),
    ("duplicate_token_score", "duplicate-token score", "earlier copies of the token"),
    ("induction_score", "induction score", "tokens after earlier copies"),
]

#: heads above which the heat maps carry no numbers (they would not be readable)
_ANNOTATE_MAX = 200


def _heat_map_layout(plt, n_panels, L, H, wide_columns=2):
    """A figure of ``n_panels`` heat maps sized so that every cell can hold a number.

    Three maps a row for up to six heads, ``wide_columns`` for more.
    """
    columns = min(n_panels, 3 if H <= 6 else wide_columns)
    rows = -(-n_panels // columns)
    cell_w, cell_h = (0.8 if H <= 6 else 0.55), 0.45
    width = min(24.0, columns * (1.9 + cell_w * H))
    height = min(18.0, 0.5 + rows * (1.4 + cell_h * max(L, 3)))
    fig, axes = plt.subplots(rows, columns, figsize=(width, height), squeeze=False)
    for ax in axes.ravel()[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.ravel()[:n_panels])


def _heat_map(fig, ax, grid, *, cmap, vmin, vmax, label, digits, annotate):
    """One layer x head heat map with a labelled colour bar and, if asked, its numbers."""
    L, H = grid.shape
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label(label, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(H))
    ax.set_yticks(range(L))
    ax.tick_params(labelsize=7)
    if annotate:
        middle = (vmin + vmax) / 2  # viridis and magma run from dark to light
        for (i, j), value in np.ndenumerate(grid):
            if not np.isfinite(value):
                text, colour = "–", "black"
            else:
                text = f"{value:.{digits}f}"
                colour = "white" if value < middle else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)


def _profile_title(cfg, what):
    kind = "causal" if cfg["causal"] else "bidirectional"
    return (f"{what} of {cfg['model']} ({cfg['family']}, {kind}, {cfg['n_layers']} layers x "
            f"{cfg['n_heads']} heads, d = {cfg['d_model']}) on {cfg['n_inputs']} inputs "
            f"({cfg['inputs']})")


def plot_head_profile(profile, path=None):
    """Heat maps (layer x head) of the profile's rank measures and diagnostics.

    Six panels: static-kernel energy rank (out of ``d_head``), realised
    attention energy rank (out of the input length), attention entropy, and
    the sink, most-attended-key and band masses (0 to 1), each with a labelled
    colour bar. Each panel's title gives the uniform-attention baseline where
    one applies. Cells carry their value (one decimal for ranks and entropy,
    two for masses) up to 200 heads; larger models get the colours only.

    Parameters
    ----------
    profile : Bunch
        The output of :func:`profile_heads`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = profile.config
    L, H = cfg["n_layers"], cfg["n_heads"]
    fig, axes = _heat_map_layout(plt, len(_PANELS), L, H)
    annotate = L * H <= _ANNOTATE_MAX
    for ax, (key, title, cmap, label) in zip(axes, _PANELS):
        grid = np.array([r[key] for r in profile.records], dtype=float).reshape(L, H)
        if key.endswith("_mass"):
            vmin, vmax = 0.0, 1.0
        elif key == "kernel_energy_rank":
            vmin, vmax = 0.0, float(cfg["d_head"])
        elif key == "attn_energy_rank":
            vmin, vmax = 1.0, max(1.0 + 1e-9, float(np.nanmax(grid)))
        else:
            vmin, vmax = float(np.nanmin(grid)), float(np.nanmax(grid)) + 1e-9
        _heat_map(fig, ax, grid, cmap=cmap, vmin=vmin, vmax=vmax, label=label,
                  digits=2 if key.endswith("_mass") else 1, annotate=annotate)
        base = profile.baselines.get(key)
        if key == "kernel_energy_rank":
            detail = f"\n(of d_head = {cfg['d_head']})"
        elif key == "attn_energy_rank":
            detail = f"\n(mean length {cfg['mean_length']:.1f}; uniform {base:.2f})"
        elif key == "band_mass":
            detail = f" +/-{cfg['band']}\n(uniform attention: {base:.2f})"
        else:
            detail = f"\n(uniform attention: {base:.2f})"
        ax.set_title(title + detail, fontsize=9)
    fig.suptitle(_profile_title(cfg, "Per-head profile"), fontsize=10)
    return save_figure(fig, path)


def plot_head_scores(profile, path=None):
    """Heat maps (layer x head) of the previous-token, duplicate-token and induction scores.

    The scores of :func:`profile_heads` (see :func:`head_pattern_scores`), on a
    common 0-1 colour scale with a labelled colour bar; each title gives the
    uniform-attention baseline on the same inputs and how many queries define
    the pattern, the figure's title the sink rate. Cells carry their value (two
    decimals) up to 200 heads; a pattern no input defines is drawn as "–".

    Parameters
    ----------
    profile : Bunch
        The output of :func:`profile_heads`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure

    Examples
    --------
    >>> profile = profile_heads("default", n_inputs=2, max_length=16)
    >>> len(plot_head_scores(profile).axes)  # three maps and their colour bars
    6
    """
    plt = pyplot()
    cfg, summary = profile.config, profile.summary
    L, H = cfg["n_layers"], cfg["n_heads"]
    fig, axes = _heat_map_layout(plt, len(_SCORE_PANELS), L, H, wide_columns=1)
    annotate = L * H <= _ANNOTATE_MAX
    excluded = [what for what, on in (("first token", cfg.get("exclude_first")),
                                      ("diagonal", cfg.get("exclude_diagonal"))) if on]
    for ax, (key, title, where) in zip(axes, _SCORE_PANELS):
        grid = np.array([r[key] for r in profile.records], dtype=float).reshape(L, H)
        _heat_map(fig, ax, grid, cmap="magma", vmin=0.0, vmax=1.0,
                  label="share of attention on the pattern", digits=2, annotate=annotate)
        queries = cfg["pattern_queries"][key[:-len("_score")]]
        ax.set_title(f"{title}: {where}\n(uniform attention: "
                     f"{number_text(profile.baselines[key], '{:.2f}')}; {queries} queries)",
                     fontsize=9)
    note = f"; {' and '.join(excluded)} left out" if excluded else ""
    fig.suptitle(_profile_title(cfg, "Head scores") + f"\nsink rate "
                 f"{summary['sink_rate']:.2f} (share of heads with more than "
                 f"{cfg['sink_rate_threshold']:g} of their attention on the first token)"
                 + note, fontsize=10)
    return save_figure(fig, path)


def kernel_rank_trajectory(steps=(0, 100, 200, 400, 800), vocab_size=32, d_model=32,
                           n_layers=2, n_heads=4, seq_len=32, max_segment=8, lr=3e-3,
                           batch_size=32, n_inputs=16, random_state=0, progress=False,
                           device="cpu"):
    """Per-head profiles of one small causal LM at checkpoints of its training.

    A :class:`~intrinsic_rank.nn.TinyCausalLM` is trained on induction
    sequences (:func:`~intrinsic_rank.datasets.make_induction_corpus`, a fixed
    task) with :func:`~intrinsic_rank.nn.train_causal_lm`, and after each
    number of steps in ``steps`` every head is profiled with
    :func:`profile_heads` on the same held-out sequences. The task never
    changes, so whatever the static kernel rank does along the way is the
    optimisation's doing (the Entropic Bound's appendix: kernel rank tracks
    optimisation progress, not task complexity).

    Parameters
    ----------
    steps : sequence of int, default=(0, 100, 200, 400, 800)
        Cumulative training steps at which to profile, increasing, ``0`` for
        the initialisation.
    vocab_size, d_model, n_layers, n_heads : int, default=32, 32, 2, 4
        The model.
    seq_len : int, default=32
        Training and held-out sequence length (the model's context).
    max_segment : int, default=8
        Longest repeated segment of the induction sequences.
    lr : float, default=3e-3
        Peak learning rate (20 warm-up steps, cosine decay per stretch).
    batch_size : int, default=32
    n_inputs : int, default=16
        Held-out sequences that every profile uses.
    random_state : int, default=0
        Seeds the initialisation (torch, without touching the global torch
        generator), the training stream and the held-out data.
    progress : bool, default=False
        Report each checkpoint through the commands' progress convention (a
        bar on a terminal, the status line off one).
    device : str or torch.device, default="cpu"
        Where the model trains and is profiled (initialised on the CPU first,
        so a seed gives the same initial weights on every device).

    Returns
    -------
    trajectory : Bunch
        ``records`` (one per checkpoint and layer: ``step``, ``layer``,
        ``loss`` -- the held-out next-token loss in nats -- and the layer's mean
        ``kernel_energy_rank``, ``kernel_stable_rank``, ``attn_energy_rank``,
        ``sink_mass`` and ``band_mass``), ``summary`` (per checkpoint, means
        over all heads), ``config`` and ``seconds``.

    Examples
    --------
    >>> t = kernel_rank_trajectory(steps=(0, 20), d_model=16, n_heads=2, seq_len=16,
    ...                            n_inputs=4)
    >>> [(r["step"], r["layer"]) for r in t.records]
    [(0, 0), (0, 1), (20, 0), (20, 1)]
    """
    from ..nn import TinyCausalLM, train_causal_lm

    start = time.perf_counter()
    steps = [int(s) for s in steps]
    if not steps or steps[0] < 0 or any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"steps must be increasing integers >= 0; got {steps}")
    for value, name, low in ((vocab_size, "vocab_size", 2), (seq_len, "seq_len", 2),
                             (n_inputs, "n_inputs", 1), (batch_size, "batch_size", 1),
                             (max_segment, "max_segment", 1)):
        check_int(value, name, low)
    device = check_device(device)
    with torch_rng(random_state):
        lm = TinyCausalLM(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                          n_heads=n_heads, max_length=seq_len)
    lm = lm.to(device)

    def sample(size, rng):
        X = make_induction_corpus(size, seq_len + 1, vocab_size, max_segment=max_segment,
                                  random_state=rng)
        return X[:, :-1], X[:, 1:]

    held_out = make_induction_corpus(n_inputs, seq_len, vocab_size, max_segment=max_segment,
                                     random_state=int(random_state) + 7919)
    ids = torch.as_tensor(held_out).to(device)
    records, summary, done = [], [], 0
    with progress_steps(len(steps), "profile trajectory", enabled=progress) as bar:
        for step in steps:
            if step > done:
                train_causal_lm(lm, sample, step - done, batch_size=batch_size, lr=lr,
                                warmup=min(20, step - done),
                                random_state=int(random_state) + step)
                done = step
            lm.eval()
            with torch.no_grad():
                logits = lm(ids[:, :-1])
                loss = float(torch.nn.functional.cross_entropy(
                    logits.reshape(-1, vocab_size), ids[:, 1:].reshape(-1)))
            profile = profile_heads(lm, held_out, device=device)
            keys = ("kernel_energy_rank", "kernel_stable_rank", "attn_energy_rank",
                    "sink_mass", "band_mass")
            for layer in range(n_layers):
                rows = [r for r in profile.records if r["layer"] == layer]
                records.append(dict(step=step, layer=layer, loss=loss,
                                    **{k: float(np.mean([r[k] for r in rows])) for k in keys}))
            summary.append(dict(step=step, loss=loss, **{
                k: float(np.mean([r[k] for r in profile.records])) for k in keys}))
            bar.update(f"step {step}: held-out loss {loss:.3f}, mean kernel energy rank "
                       f"{summary[-1]['kernel_energy_rank']:.2f}")
    config = dict(steps=steps, vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                  n_heads=n_heads, d_head=d_model // n_heads, seq_len=seq_len,
                  max_segment=max_segment, lr=lr, batch_size=batch_size, n_inputs=n_inputs,
                  random_state=random_state)
    return Bunch(records=records, summary=summary, config=config,
                 seconds=time.perf_counter() - start)


def plot_kernel_rank_trajectory(trajectory, path=None):
    """Static kernel rank, realised attention rank and loss along training.

    Parameters
    ----------
    trajectory : Bunch
        The output of :func:`kernel_rank_trajectory`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = trajectory.config
    fig, (ax_k, ax_a, ax_l) = plt.subplots(1, 3, figsize=(11, 4.2))
    for layer in range(cfg["n_layers"]):
        rows = [r for r in trajectory.records if r["layer"] == layer]
        steps = [r["step"] for r in rows]
        ax_k.plot(steps, [r["kernel_energy_rank"] for r in rows], "o-", label=f"layer {layer}")
        ax_a.plot(steps, [r["attn_energy_rank"] for r in rows], "o-", label=f"layer {layer}")
    ax_l.plot([s["step"] for s in trajectory.summary], [s["loss"] for s in trajectory.summary],
              "o-", color="k")
    ax_k.set_title(f"static QK kernel: energy rank\n(of d_head = {cfg['d_head']})", fontsize=10)
    ax_a.set_title(f"realised attention: energy rank\n(length {cfg['seq_len']})", fontsize=10)
    ax_l.set_title("held-out next-token loss", fontsize=10)
    ax_k.set_ylabel("energy effective rank (mean over heads)")
    ax_a.set_ylabel("energy effective rank (mean over heads)")
    ax_l.set_ylabel("cross-entropy (nats)")
    for ax in (ax_k, ax_a, ax_l):
        ax.set_xlabel("training steps")
    for ax in (ax_k, ax_a):
        ax.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18),
                  ncol=cfg["n_layers"])
    fig.suptitle(
        f"One fixed task (induction sequences, |V| = {cfg['vocab_size']}), a TinyCausalLM "
        f"with {cfg['n_layers']} layers x {cfg['n_heads']} heads, d = {cfg['d_model']}, "
        f"profiled on {cfg['n_inputs']} held-out sequences", fontsize=9)
    return save_figure(fig, path)


# -- the experiment: ``profile`` (the same name as piece and command) ------------------
#
# The command profiles ONE model (settings with ``model``): its result is the
# profile of :func:`profile_heads` plus ``geometry`` and ``texts``, which is what
# ``profile.json`` holds. The reproduce piece profiles SEVERAL models and the
# training trajectory (settings with ``models`` and ``steps``): its result is
# ``{"models": {name: profile}, "trajectory": ...}``.

PROFILE_SUMMARY_COLUMNS = ["model", "heads", "d_head", "kernel_energy_rank_median",
                           "attn_energy_rank_median", "uniform_attn_energy_rank",
                           "sink_heads", "local_heads", "structured_heads",
                           "spearman_kernel_vs_attn", "sink_rate", "max_previous_token_score",
                           "max_duplicate_token_score", "max_induction_score"]
"""Columns of the reproduce piece's per-model table (one row per profiled model)."""

TRAJECTORY_COLUMNS = ["step", "loss", "kernel_energy_rank", "kernel_stable_rank",
                      "attn_energy_rank", "sink_mass", "band_mass"]
"""Columns of the trajectory table (the ``summary`` of :func:`kernel_rank_trajectory`)."""


def _run_one(settings, *, random_state, device):
    """The command: one model's profile and, unless switched off, its geometry."""
    loaded = load_model(settings["model"])
    result = profile_heads(loaded.module, settings["texts"], tokenizer=loaded.tokenizer,
                           n_inputs=settings["n_inputs"], max_length=settings["max_length"],
                           band=settings["band"],
                           exclude_first=settings.get("exclude_first", False),
                           exclude_diagonal=settings.get("exclude_diagonal", False),
                           random_state=random_state, device=device)
    result.config["model"] = loaded.label
    geometry = None
    if settings["geometry"]:
        geometry = dict(reachability_geometry(
            as_model_adapter(loaded.module, copy_model=False), n_memory=settings["memory"],
            n_tokens=settings["tokens"], precision=settings["precision"],
            measured_slope=settings.get("slope"), random_state=random_state))
    return jsonable(dict(records=result.records, config=result.config,
                         baselines=result.baselines, summary=result.summary,
                         kernel_spectra=result.kernel_spectra, geometry=geometry,
                         texts=result.texts, seconds=result.seconds))


def _run_models(settings, *, random_state, progress, device):
    """The reproduce piece: several models' profiles and the training trajectory."""
    models = {}
    with progress_steps(len(settings["models"]), "profile", enabled=progress) as bar:
        for name in settings["models"]:
            try:
                profile = profile_heads(name, n_inputs=settings["n_inputs"],
                                        max_length=settings["max_length"],
                                        random_state=random_state, device=device)
            except ImportError as error:  # a packaged model that is not installed
                models[name] = {"missing": str(error)}
                bar.update(f"{name}: not installed")
                continue
            models[name] = dict(records=profile.records, baselines=profile.baselines,
                                summary=profile.summary, config=profile.config)
            bar.update(f"profiled {name} ({profile.seconds:.1f} s)")
    trajectory = kernel_rank_trajectory(steps=settings["steps"], random_state=random_state,
                                        progress=progress, device=device)
    return jsonable({"models": models, "trajectory": dict(trajectory)})


def _run(settings, *, random_state, progress, device):
    if "models" in settings:
        return _run_models(settings, random_state=random_state, progress=progress,
                           device=device)
    return _run_one(settings, random_state=random_state, device=device)


def _structured(record, baselines, share=1 / 3, factor=3.0):
    """A head that puts a third of its attention on one key or on the band (3x uniform)."""
    return any(record[key] > share and record[key] >= factor * baselines[key]
               for key in ("max_key_mass", "band_mass"))


def _plot_models(result, folder):
    names = []
    for name, model in result["models"].items():
        if "missing" in model:
            continue
        names.append(save_plot(plot_head_profile(Bunch(**model)), folder,
                               f"profile_{name}.png"))
        if "sink_rate" in model["summary"]:
            names.append(save_plot(plot_head_scores(Bunch(**model)), folder,
                                   f"profile_scores_{name}.png"))
    trajectory = plot_kernel_rank_trajectory(Bunch(**result["trajectory"]))
    return names + [save_plot(trajectory, folder, "trajectory.png")]


def _plot(result, folder):
    if "models" in result:
        return _plot_models(result, folder)
    names = [save_plot(plot_head_profile(Bunch(**result)), folder, "profile.png")]
    if "sink_rate" in result["summary"]:
        names.append(save_plot(plot_head_scores(Bunch(**result)), folder,
                               "profile_scores.png"))
    return names


def _tables_models(result):
    rows = []
    for name, model in result["models"].items():
        if "missing" in model:
            continue
        summary, records = model["summary"], model["records"]
        rows.append(dict(
            model=name, heads=summary["n_heads_total"], d_head=model["config"]["d_head"],
            **{k: summary[k] for k in ("kernel_energy_rank_median", "attn_energy_rank_median",
                                       "uniform_attn_energy_rank", "sink_heads",
                                       "local_heads", "spearman_kernel_vs_attn")},
            **{k: summary.get(k, float("nan")) for k in (
                "sink_rate", "max_previous_token_score", "max_duplicate_token_score",
                "max_induction_score")},
            structured_heads=sum(_structured(r, model["baselines"]) for r in records),
        ))
    cfg = result["trajectory"]["config"]
    return [
        ("per-head profiles (medians over heads; sink/local: more than half the mass on the "
         "first token / within +-1; structured: more than a third on one key or the band, "
         "and 3x uniform; sink rate: the share of heads with more than 0.3 on the first "
         "token; max_*_score: the best head's previous-token, duplicate-token and "
         "induction score)", rows, PROFILE_SUMMARY_COLUMNS),
        (f"one fixed task (induction, |V| = {cfg['vocab_size']}), a {cfg['n_layers']}-layer "
         f"TinyCausalLM along training (means over heads)", result["trajectory"]["summary"],
         TRAJECTORY_COLUMNS),
    ]


def _geometry_tables(geometry):
    """The geometry's bounds table and its cone and cell numbers (none before issue [9])."""
    if not geometry or not geometry.get("bounds"):
        return []
    slope = geometry.get("measured_slope")
    ratio = (f"ratio = bound / the given slope {number_text(slope)}" if slope is not None
             else "ratio: – (no measured slope; give one with --slope)")
    cone = {k: geometry[k] for k in ("min_cosine", "cone_half_angle", "cone_log_fraction")}
    return [
        (f"reachability bounds per precision convention (m = {geometry['n_memory']}): "
         f"log_count_bound in nats, slope_bound in tokens per prompt vector ('–' where the "
         f"model has no next-token head); {ratio}", geometry["bounds"],
         GEOMETRY_BOUND_COLUMNS, None),
        ("the cone and the decoder cells of the reachability geometry",
         _refinement_rows(cone, geometry.get("cells")), ["quantity", "value"]),
    ]


def _tables(result):
    if "models" in result:
        return _tables_models(result)
    return [(f"per-head profile of {result['config']['model']}", result["records"],
             PROFILE_COLUMNS), *_geometry_tables(result.get("geometry"))]


def _verdicts(result, structured_share=0.5, spearman_max=0.3, moved=0.25):
    """Sinks and locality in a pretrained model; kernel rank against mixers and training.

    A command's result (one model, no trajectory) is judged as a piece of one model.
    """
    if "models" not in result:
        result = {"models": {result["config"]["model"]: result}, "trajectory": None}
    verdicts = []
    profiled = {name: model for name, model in result["models"].items()
                if "missing" not in model}
    pretrained = {name: model for name, model in profiled.items() if name != "default"}
    for name, model in pretrained.items():
        records = model["records"]
        n = sum(_structured(r, model["baselines"]) for r in records)
        share = n / len(records)
        verdicts.append(Verdict(
            "real mixers are dominated by task-independent structure: attention sinks and "
            "locality",
            f"{name}: {n} of {len(records)} heads put more than a third of their attention "
            f"on one key or within +-{model['config']['band']} positions (uniform attention "
            f"would put {number_text(model['baselines']['max_key_mass'])} and "
            f"{number_text(model['baselines']['band_mass'])}); "
            f"{model['summary']['sink_heads']} put more than half on the first token",
            "agrees" if share >= structured_share else (
                "partly" if share >= structured_share / 2 else "does not agree"),
            f"a head is structured when that mass exceeds 1/3 and 3x uniform; agrees when "
            f"at least {structured_share:.0%} of the heads are, partly from "
            f"{structured_share / 2:.0%}",
        ))
    if profiled:
        rhos = {name: model["summary"]["spearman_kernel_vs_attn"]
                for name, model in profiled.items()}
        low = [name for name, rho in rhos.items() if is_finite(rho) and rho <= spearman_max]
        measured = "; ".join(
            f"{name}: Spearman {number_text(rho, '{:.2f}')} between static-kernel and realised "
            f"energy rank across heads (medians "
            f"{number_text(profiled[name]['summary']['kernel_energy_rank_median'])} of "
            f"{profiled[name]['config']['d_head']} and "
            f"{number_text(profiled[name]['summary']['attn_energy_rank_median'])})"
            for name, rho in rhos.items())
        verdicts.append(Verdict(
            "the static kernel rank of a trained model is not a proxy for the mixer its "
            "heads realise (no single low-rank routing kernel)",
            measured, grade(len(low), len(rhos)),
            f"agrees when the rank correlation across heads is at most {spearman_max:g} on "
            "every profiled model",
        ))
    summary = (result["trajectory"] or {}).get("summary", [])
    if len(summary) >= 2:
        ranks = [row["kernel_energy_rank"] for row in summary]
        change = (max(ranks) - min(ranks)) / max(ranks)
        losses = [row["loss"] for row in summary]
        rho = (float(stats.spearmanr(ranks, losses).statistic)
               if np.ptp(ranks) > 0 and np.ptp(losses) > 0 else float("nan"))
        verdicts.append(Verdict(
            "the measured static kernel rank tracks optimisation progress, not task "
            "complexity",
            f"on one fixed task the mean kernel energy rank goes "
            f"{' -> '.join(number_text(r) for r in ranks)} over steps "
            f"{', '.join(str(row['step']) for row in summary)} while the held-out loss goes "
            f"{number_text(summary[0]['loss'])} -> {number_text(summary[-1]['loss'])} "
            f"({number_text(100 * change, '{:.0f}')}% range; Spearman with the loss over the "
            f"checkpoints {number_text(rho, '{:.2f}')})",
            "agrees" if change >= moved else ("partly" if change >= moved / 2 else
                                             "does not agree"),
            f"the task is fixed, so a rank that moves by at least {moved:.0%} of its maximum "
            "during training is set by the optimisation, not by the task",
        ))
    return verdicts


def _extra_files(result, folder):
    """The command's ``profile.csv`` (every column of every head); none for the piece."""
    if "models" in result:
        return []
    save_profile_csv(Bunch(**result), os.path.join(folder, "profile.csv"))
    return ["profile.csv"]


def _read_texts(path):
    try:
        with open(path, encoding="utf-8") as handle:
            texts = [line.strip() for line in handle if line.strip()]
    except OSError as error:
        raise ValueError(f"cannot read --texts {path!r}: {error.strerror}") from None
    if not texts:
        raise ValueError(f"--texts {path!r} holds no non-empty line")
    return texts


def _add_arguments(parser):
    parser.add_argument("model", nargs="?", default="default",
                        help="'default' (embedded model), a packaged model "
                        "(all-MiniLM-L6-v2), a Hugging Face model folder or a .pt file")
    parser.add_argument("--texts", default=None,
                        help="a text file, one input per line (default: the package's "
                        "32 sample passages, or induction sequences for the default model)")
    parser.add_argument("--n-inputs", type=int, default=32,
                        help="number of default inputs")
    parser.add_argument("--max-length", type=int, default=64,
                        help="truncation length in tokens")
    parser.add_argument("--band", type=int, default=1,
                        help="half-width of the locality band (0: the diagonal)")
    parser.add_argument("--memory", type=int, default=1,
                        help="prompt vectors m for the reachability geometry")
    parser.add_argument("--tokens", type=int, default=8,
                        help="random tokens after the prompt vectors (geometry)")
    parser.add_argument("--precision", type=parse_precision, default=None,
                        help="eps of the summary's bounds: a number, a dtype name such as "
                        "float16, or a convention: machine, paper (2^-10) or relative "
                        "(r_inf / 2048) (default: the model's own dtype); the bounds table "
                        "shows all three conventions")
    parser.add_argument("--slope", type=float, default=None,
                        help="a measured slope (tokens per prompt vector, e.g. of "
                        "'intrinsic-rank reach') to divide the slope bounds by (default: none, the "
                        "ratio column reads –)")
    parser.add_argument("--no-geometry", action="store_true",
                        help="skip the reachability geometry")
    parser.add_argument("--exclude-first", action="store_true",
                        help="leave the first token out of the head scores (previous-token, "
                        "duplicate-token, induction)")
    parser.add_argument("--exclude-diagonal", action="store_true",
                        help="leave each query's own position out of the head scores")


def _settings(args):
    return dict(model=args.model, texts=_read_texts(args.texts) if args.texts else None,
                n_inputs=args.n_inputs, max_length=args.max_length, band=args.band,
                memory=args.memory, tokens=args.tokens, precision=args.precision,
                slope=args.slope, geometry=not args.no_geometry, exclude_first=args.exclude_first,
                exclude_diagonal=args.exclude_diagonal)


def _score_lines(cfg, base, summ):
    """The summary's head-score lines (none for results saved before the scores)."""
    if "sink_rate" not in summ:
        return []
    parts = []
    for name in HEAD_PATTERNS:
        best, head = summ[f"max_{name}_score"], summ[f"best_{name}_head"]
        where = f" (layer {head[0]}, head {head[1]})" if head is not None else ""
        parts.append(f"{name.replace('_', '-')} {number_text(best, '{:.3g}')}{where}, "
                     f"uniform {number_text(base[f'{name}_score'], '{:.3g}')}, "
                     f"{summ[f'{name}_heads']} above {cfg['threshold']:g}")
    queries = cfg["pattern_queries"]
    excluded = [what for what, on in (("the first token", cfg["exclude_first"]),
                                      ("the diagonal", cfg["exclude_diagonal"])) if on]
    return [
        "head scores (best head's share of attention on the pattern's positions, over the "
        f"{queries['previous_token']} / {queries['duplicate_token']} / "
        f"{queries['induction']} queries where previous-token / duplicate-token / induction "
        "positions exist" + (f"; {' and '.join(excluded)} left out" if excluded else "")
        + "): " + "; ".join(parts),
        f"sink rate {summ['sink_rate']:.3g}: the share of heads whose mean attention to the "
        f"first token exceeds {cfg['sink_rate_threshold']:g}",
    ]


def _summary(result):
    if "models" in result:
        return [f"profiled {', '.join(result['models'])} and one model along training"]
    cfg, base, summ = result["config"], result["baselines"], result["summary"]
    kind = "causal" if cfg["causal"] else "bidirectional"
    extra = ", rotary positions (not in the static kernel)" if cfg["rotary"] else ""
    if cfg["qk_norm"]:
        extra += ", per-head query/key norms (the static kernel is approximate)"
    n = summ["n_heads_total"]
    lines = [
        f"Per-head profile of {cfg['model']} ({cfg['family']}, {kind}{extra}): "
        f"{cfg['n_layers']} layers x {cfg['n_heads']} heads, d = {cfg['d_model']}, d_head = "
        f"{cfg['d_head']}, {cfg['dtype']}; {cfg['n_inputs']} inputs ({cfg['inputs']}), "
        f"{cfg['min_length']}-{cfg['max_length']} tokens (mean {cfg['mean_length']:.1f})",
        f"uniform attention on the same inputs: energy rank {base['attn_energy_rank']:.3g}, "
        f"sink mass {base['sink_mass']:.3g}, max key mass {base['max_key_mass']:.3g}, band "
        f"mass {base['band_mass']:.3g}, entropy {base['entropy']:.3g}",
        f"{summ['sink_heads']} of {n} heads put more than {cfg['threshold']:g} of their "
        f"attention on the first token, {summ['any_sink_heads']} on some single key, "
        f"{summ['local_heads']} within +/-{cfg['band']} positions",
        f"static kernel energy rank: median {summ['kernel_energy_rank_median']:.3g} of "
        f"d_head = {cfg['d_head']}; realised attention energy rank: median "
        f"{summ['attn_energy_rank_median']:.3g} (uniform "
        f"{summ['uniform_attn_energy_rank']:.3g}); Spearman correlation across heads "
        f"{summ['spearman_kernel_vs_attn']:.2f}",
        *_score_lines(cfg, base, summ),
    ]
    g = result["geometry"]
    if g is not None:
        line = (f"reachability geometry ({g['kind']}, m = {g['n_memory']}, {g['n_prompts']} "
                f"random prompts of {g['n_tokens']} tokens): radius r = {g['radius']:.4g}, "
                f"eps = {g['precision']:.3g}; count bound ln N <= "
                f"{g['log_count_bound']:.4g} nats (box {g['box_log_count_bound']:.4g})")
        if g["slope_bound"] is not None and math.isfinite(g["slope_bound"]):
            line += (f"; slope bound C = {g['slope_bound']:.4g} tokens per vector (box "
                     f"{g['box_slope_bound']:.4g})")
        lines.append(line)
        if g.get("min_cosine") is not None:
            cells = g.get("cells") or {}
            decay = cells.get("closed_form")
            lines.append(
                f"  cone: smallest pairwise cosine {g['min_cosine']:.3f}, ln(cone share of the "
                f"ball) {g['cone_log_fraction']:.3g} nats per vector; decoder cells: "
                + (f"c = {decay:.4g} nats per token against ln|V| = {cells['ln_vocab']:.4g}, "
                   f"{cells['n_empty']} empty cells, {cells['n_samples']} Monte Carlo points"
                   if decay is not None else "–"))
            slope = g.get("measured_slope")
            lines.append(
                "  bounds table: one row per bound (ball, box, cone, box + cells) and precision "
                "convention; " + (f"ratio = bound / the given slope {number_text(slope)}"
                                  if slope is not None else
                                  "ratio – (no measured slope here; give one with --slope)"))
        lines += [f"  does not apply: {item}" for item in g["not_applicable"]]
    return lines


EXPERIMENT = register(Experiment(
    name="profile",
    command="profile",
    title="Real models: per-head static kernel ranks, realised mixers, sinks and locality",
    paper="The Entropic Bound (appendix B: real language models)",
    help="per-head rank profile of a pretrained model (static QK kernel, realised "
    "attention, sinks, locality) and its reachability geometry",
    description="For every layer and head: the static query-key kernel's spectrum and rank "
    "measures, the realised attention matrices' energy rank averaged over inputs, the mass "
    "on the first token (sink), on the most-attended key and on a diagonal band (locality); "
    "then the hidden-state radius and the bounds of \"How many different outputs can a "
    "Transformer generate?\" that apply to the model. "
    "Prints the tables, saves profile.png (layer x head heat maps), profile.csv and "
    "profile.json. Runs offline.",
    quick=dict(models=["default", "all-MiniLM-L6-v2"], n_inputs=32, max_length=64,
               steps=[0, 100, 200, 400, 800]),
    full=dict(models=["default", "all-MiniLM-L6-v2"], n_inputs=32, max_length=128,
              steps=[0, 200, 400, 800, 1600, 3200]),
    run=_run, tables=_tables, plot=_plot, verdicts=_verdicts,
    add_arguments=_add_arguments, settings=_settings, summary=_summary,
    extra_files=_extra_files, floatfmt="{:.3g}",
))
"""Per-head profiles as a registered experiment (piece and command ``profile``)."""
