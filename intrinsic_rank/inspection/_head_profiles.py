"""Per-head rank profiles of a model: static query-key kernels and realised attention.

For every layer and head of a model this measures the static query-key kernel
``W_Q W_K^T`` (its spectrum and rank measures), the realised attention
matrices on a batch of inputs (their energy rank, averaged over inputs), two
diagnostics of task-independent structure: attention sinks (mass on the first
token, or on any single key) and locality (mass on a band around the
diagonal), and the head-pattern scores of :mod:`._head_scores`. A uniform
attention baseline on the same inputs says what "a lot" means.
"""

import csv
import os
import time

import numpy as np
import torch
from scipy import stats
from sklearn.utils import Bunch

from .. import spectral
from .._validation import check_device, check_int
from ..datasets import load_sample_texts, make_induction_corpus
from ..nn import (
    attention_maps,
    check_token_inputs,
    load_model,
    model_max_positions,
    model_vocab_size,
    query_key_weights,
    unwrap_model,
)
from ._head_scores import HEAD_PATTERNS, SCORE_MEASURES, _PatternScores, head_pattern_masks
from ._repeated_tokens import (
    REPEATED_RANDOM,
    _copy_accuracy,
    _has_next_token_head,
    _repeated_random_inputs,
)

__all__ = ["PROFILE_COLUMNS", "profile_heads", "save_profile_csv"]

#: columns of the printed profile table (every record has more, see profile_heads)
PROFILE_COLUMNS = [
    "layer", "head", "d_head", "kernel_energy_rank", "kernel_numerical_rank",
    "attn_energy_rank", "sink_mass", "max_key_mass", "band_mass", "entropy",
    "previous_token_score", "duplicate_token_score", "induction_score",
]

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


def _perfect_maps(tokens):
    """Per pattern, a perfect head's map: even on the pattern's positions where it names one.

    Rows where the pattern names nothing spread evenly over the keys up to the
    query, so the exclusions never leave a whole sequence without attention.
    """
    n = len(tokens)
    maps = {}
    for name, mask in head_pattern_masks(tokens).items():
        P = mask.astype(np.float64)
        empty = P.sum(1) == 0
        P[empty] = np.tril(np.ones((n, n)))[empty]
        maps[name] = P / P.sum(1, keepdims=True)
    return maps


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
                  half_length=None, band=1, q=0.99, threshold=0.5, score_measure="mul",
                  exclude_bos=False, exclude_current_token=False, n_top=5,
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
    * the head scores of the interpretability literature
      (:func:`head_pattern_scores`): ``previous_token_score``,
      ``duplicate_token_score`` and ``induction_score`` in ``score_measure``
      (TransformerLens's ``"mul"`` by default: the share of all the head's
      attention on the positions the pattern names, averaged over inputs),
      and always ``<pattern>_conditional_score``, the share over only the
      queries where the pattern names a position, pooled over inputs (NaN
      where no input repeats a token). On repeated random tokens
      (``inputs="repeated_random"``, the field's induction test) every token of
      the second copy defines them; on texts, the tokens that recur do.

    Parameters
    ----------
    model : "default", str, path or model, default="default"
        ``"default"`` (the embedded :class:`~intrinsic_rank.nn.TinyCausalLM`), a
        name in :data:`~intrinsic_rank.nn.PACKAGED_MODELS` (e.g.
        ``"all-MiniLM-L6-v2"``), a Hugging Face model folder (loaded offline),
        a ``.pt`` file of :func:`~intrinsic_rank.nn.save_tiny_lm`, or an
        instance (``TinyCausalLM``, a ``transformers`` model, an adapter).
    inputs : None, "repeated_random", list of str, dict or array-like of int, default=None
        Texts (tokenized with the model's tokenizer, padded, truncated to
        ``max_length``), a tokenizer output (``input_ids`` and
        ``attention_mask``), or token ids ``(n_inputs, length)``. ``None``: the
        package's :func:`~intrinsic_rank.datasets.load_sample_texts` for models
        with a tokenizer, induction sequences for the project's own models,
        uniform random tokens otherwise. ``"repeated_random"``: the field's
        induction test, ``n_inputs`` sequences of the tokenizer's BOS token
        (``bos_token_id``, where there is one), ``half_length`` distinct random
        tokens of the ordinary vocabulary (special and added tokens left out)
        and the same tokens again; a model with a next-token head then also
        gets its greedy accuracy on each copy in the summary. (A single text
        that reads ``"repeated_random"`` is passed as a one-element list.)
    tokenizer : transformers tokenizer or None, default=None
        Overrides the tokenizer found in the model folder.
    n_inputs : int, default=32
        Number of default or repeated-random inputs (ignored when ``inputs``
        holds texts or ids).
    max_length : int, default=64
        Truncation length of texts and length of default token inputs, capped
        at the model's context. Token ids given directly are never cut: longer
        than the context is an error.
    half_length : int or None, default=None
        The ``k`` random tokens of each copy for ``inputs="repeated_random"``;
        ``None``: as many as fit in ``max_length`` (``(max_length - 1) // 2``
        with a BOS token, ``max_length // 2`` without).
    band : int, default=1
        Half-width of the diagonal band for ``band_mass`` (``0``: the diagonal).
    q : float, default=0.99
        Energy fraction of ``kernel_energy_threshold_rank``.
    threshold : float, default=0.5
        A head counts as a sink head (``sink_mass``) or a local head
        (``band_mass``) in the summary when that mass exceeds ``threshold``,
        and as a previous-token, duplicate-token or induction head when its
        score exceeds ``threshold`` times the score of a perfect head on the
        same inputs (``baselines["perfect_<pattern>_score"]``: all attention on
        the pattern's positions where it names one, spread evenly over the keys
        up to the query elsewhere), so that the count means the same under
        every measure.
    score_measure : {"mul", "abs", "conditional"}, default="mul"
        The measure of the ``<pattern>_score`` columns (see
        :func:`head_pattern_scores`).
    exclude_bos, exclude_current_token : bool, default=False
        Leave the first key, or each query's own position, out of the head
        scores, as TransformerLens's options of the same names do.
    n_top : int, default=5
        Heads listed per pattern in ``summary["top_<pattern>_heads"]``.
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
        the same inputs, head scores included, and the perfect heads' scores),
        ``summary`` (sink, local, previous-token, duplicate-token and induction
        head counts, the best score of each pattern and its head, the
        ``top_<pattern>_heads`` as ``[layer, head, score]`` (the ``n_top``
        best), ``counted_<pattern>_heads`` (every head that the count counts,
        the same way, best first), the sink rate, the Spearman correlation of
        static-kernel and realised-attention energy ranks across heads; on
        repeated random tokens with a next-token head, ``copy_accuracy_first``
        and ``copy_accuracy_second``), ``config``
        (model, family, sizes, whether it is causal or rotary, the inputs, the
        score options and ``pattern_queries``: how many queries define each
        pattern) and ``seconds``.

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
    (0.23, 0.15)
    >>> profile.summary["sink_rate"], profile.summary["induction_heads"]
    (0.5, 0)

    The field's induction test, random tokens and the same tokens again:

    >>> test = profile_heads("default", "repeated_random", n_inputs=4, half_length=8)
    >>> test.config["inputs"], test.config["max_length"]
    ('repeated random tokens', 16)
    """
    start = time.perf_counter()
    n_inputs, max_length, band, batch_size, n_top = _check_profile_options(
        n_inputs, max_length, band, batch_size, threshold, q, sink_rate_threshold, n_top,
        score_measure)
    exclusions = dict(exclude_bos=bool(exclude_bos),
                      exclude_current_token=bool(exclude_current_token))
    device = check_device(device)
    module, folder_tokenizer, label = load_model(model)
    unwrap_model(module)[0].to(device)
    tokenizer = tokenizer if tokenizer is not None else folder_tokenizer
    vocab, context, family, dtype = _model_facts(module)
    if context is not None:  # default inputs and truncated texts fit the context
        max_length = min(max_length, context)
    ids, mask, texts, source, repeated = _profile_inputs(
        module, inputs, tokenizer, vocab, context, n_inputs, half_length, max_length,
        random_state)

    heads = query_key_weights(module)
    spectra, kernel, d_model = _kernel_measures(heads, dtype, q)
    n_layers, n_heads, d_head = spectra.shape
    realised = _realised_attention(module, ids, mask, batch_size, band, score_measure,
                                   exclusions, n_layers, n_heads)
    references = _reference_scores(realised, band, score_measure, exclusions)
    records = _head_records(spectra, kernel, realised)
    baselines = _baselines(references, score_measure)
    summary = _summarize(records, threshold, baselines, sink_rate_threshold, n_top)
    if repeated is not None and realised.causal and _has_next_token_head(module):
        summary["copy_accuracy_first"], summary["copy_accuracy_second"] = _copy_accuracy(
            module, ids, *repeated, realised.batch_size, device)
    rotary = any(getattr(layer, "rotary", False) for layer in heads)
    qk_norm = any(getattr(layer, "qk_norm", False) for layer in heads)
    lengths = realised.lengths
    config = dict(model=label, family=family, n_layers=int(n_layers), n_heads=int(n_heads),
                  d_model=int(d_model), d_head=int(d_head), vocab_size=vocab,
                  context=context, causal=bool(realised.causal), rotary=rotary,
                  qk_norm=qk_norm, dtype=str(dtype).replace("torch.", ""), inputs=source,
                  n_inputs=int(len(ids)), mean_length=float(np.mean(lengths)),
                  min_length=int(min(lengths)), max_length=int(max(lengths)), band=band,
                  q=float(q), threshold=float(threshold), score_measure=score_measure,
                  **exclusions, half_length=None if repeated is None else repeated[1],
                  bos=None if repeated is None else bool(repeated[0]),
                  sink_rate_threshold=float(sink_rate_threshold),
                  pattern_queries=dict(realised.selected.queries), random_state=random_state)
    return Bunch(records=records, kernel_spectra=spectra, baselines=baselines,
                 summary=summary, config=config, texts=texts,
                 seconds=time.perf_counter() - start)


def _check_profile_options(n_inputs, max_length, band, batch_size, threshold, q,
                           sink_rate_threshold, n_top, score_measure):
    """The integer options of :func:`profile_heads`, checked; one ValueError for a bad one."""
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
    n_top = check_int(n_top, "n_top")
    if score_measure not in SCORE_MEASURES:
        raise ValueError(f"score_measure must be one of "
                         f"{', '.join(map(repr, SCORE_MEASURES))}; got {score_measure!r}")
    return n_inputs, max_length, band, batch_size, n_top


def _profile_inputs(module, inputs, tokenizer, vocab, context, n_inputs, half_length,
                    max_length, random_state):
    """The token ids, mask and texts a profile runs on, what they are, and the repeat layout.

    ``repeated`` is ``(offset, half_length)`` for the repeated-random-tokens test, else None.
    """
    repeated = None
    if isinstance(inputs, str) and inputs == REPEATED_RANDOM:
        inputs, offset, half_length = _repeated_random_inputs(
            tokenizer, vocab, n_inputs, half_length, max_length, random_state)
        repeated, source = (offset, half_length), "repeated random tokens"
    elif inputs is None:
        inputs, source = _default_inputs(module, tokenizer, vocab, n_inputs, max_length,
                                         random_state)
    else:
        source = "given"
    ids, mask, texts = _encode(inputs, tokenizer, max_length, vocab, context)
    return ids, mask, texts, source, repeated


def _kernel_measures(heads, dtype, q):
    """Singular values ``(n_layers, n_heads, d_head)`` of the static kernels, their rank
    measures per column of the records, and the model width."""
    eps = float(torch.finfo(dtype).eps) if dtype.is_floating_point else float(
        np.finfo(np.float32).eps)
    cores = _kernel_cores(heads)
    spectra = np.linalg.svd(cores, compute_uv=False)
    d_model = heads[0].w_q.shape[1]
    # the matrix_rank rule for the d x d kernel at the precision of the weights
    tol = spectra[..., 0] * d_model * eps
    measures = spectral.rank_profile(cores, tol=tol, q=q)
    kernel = {column: np.asarray(measures[measure])
              for measure, column in _KERNEL_MEASURES.items()}
    return spectra, kernel, d_model


def _realised_attention(module, ids, mask, batch_size, band, score_measure, exclusions,
                        n_layers, n_heads):
    """The diagnostics and head scores of the attention maps the model computes on the inputs.

    Returns a Bunch: ``per_input`` (each diagnostic per input, ``(L, H)``), the
    pattern-score accumulators ``selected`` and ``conditional``, whether every map
    is ``causal``, the inputs' ``lengths`` and token ``sequences`` (padding
    removed), and the ``batch_size`` used.
    """
    per_input = {key: [] for key in _DIAGNOSTICS}
    selected = _PatternScores(score_measure, **exclusions)
    conditional = _PatternScores("conditional", **exclusions)
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
            selected.add(A, tokens)
            conditional.add(A, tokens)
    if max(lengths) < 2:
        raise ValueError("every input has a single token: attention maps of one token say "
                         "nothing; give inputs of at least two tokens")
    return Bunch(per_input=per_input, selected=selected, conditional=conditional,
                 causal=causal, lengths=lengths, sequences=sequences, batch_size=batch_size)


def _reference_scores(realised, band, score_measure, exclusions):
    """Uniform attention's diagnostics and head scores on the same inputs, and the perfect
    heads' scores: what a head's numbers are read against."""
    uniform = {key: [] for key in _DIAGNOSTICS}
    at_length = {}
    for n in realised.lengths:  # the same diagnostics for uniform attention on the same lengths
        if n not in at_length:
            at_length[n] = _map_diagnostics(_uniform_maps(n, realised.causal), band)
        for key, value in at_length[n].items():
            uniform[key].append(value)
    # the head scores of uniform attention and of perfect heads on the same tokens
    uniform_scores = {measure: _PatternScores(measure, **exclusions)
                      for measure in {score_measure, "conditional"}}
    perfect = {name: _PatternScores(score_measure, **exclusions) for name in HEAD_PATTERNS}
    for tokens in realised.sequences:
        for accumulator in uniform_scores.values():
            accumulator.add(_uniform_maps(len(tokens), realised.causal)[0, 0], tokens)
        for name, P in _perfect_maps(tokens).items():
            perfect[name].add(P, tokens)
    return Bunch(uniform=uniform, uniform_scores=uniform_scores, perfect=perfect)


def _head_records(spectra, kernel, realised):
    """One record per layer and head: kernel measures, mean diagnostics, head scores."""
    n_layers, n_heads, d_head = spectra.shape
    scores = realised.selected.scores()
    conditional_scores = realised.conditional.scores()
    stacked = {key: np.stack(values) for key, values in realised.per_input.items()}  # (n, L, H)
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
                for column, values in ((f"{name}_score", scores[name]),
                                       (f"{name}_conditional_score", conditional_scores[name])):
                    rec[column] = float(np.broadcast_to(values, (n_layers, n_heads))[layer, head])
            records.append(rec)
    return records


def _baselines(references, score_measure):
    """Uniform attention's mean diagnostics and scores, and the perfect heads' scores."""
    baselines = {key: float(np.mean(values)) for key, values in references.uniform.items()}
    for name in HEAD_PATTERNS:
        baselines[f"{name}_score"] = float(
            references.uniform_scores[score_measure].scores()[name])
        baselines[f"{name}_conditional_score"] = float(
            references.uniform_scores["conditional"].scores()[name])
        baselines[f"perfect_{name}_score"] = float(references.perfect[name].scores()[name])
    return baselines


def _summarize(records, threshold, baselines, sink_rate_threshold=0.3, n_top=5):
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
        **_score_summary(records, threshold, baselines, n_top),
    )


def _score_summary(records, threshold, baselines, n_top):
    """Per pattern: heads above ``threshold`` of a perfect head, the best and the top heads."""
    summary = {}
    for name in HEAD_PATTERNS:
        values = np.array([r[f"{name}_score"] for r in records], dtype=float)
        perfect = baselines[f"perfect_{name}_score"]
        with np.errstate(invalid="ignore"):
            counted = values > threshold * perfect
        summary[f"{name}_heads"] = int(np.sum(counted))
        order = [i for i in np.argsort(-values, kind="stable") if np.isfinite(values[i])]
        summary[f"top_{name}_heads"] = [
            [records[i]["layer"], records[i]["head"], float(values[i])] for i in order[:n_top]]
        summary[f"counted_{name}_heads"] = [
            [records[i]["layer"], records[i]["head"], float(values[i])] for i in order
            if counted[i]]
        if not order:
            summary[f"max_{name}_score"], summary[f"best_{name}_head"] = float("nan"), None
        else:
            best = records[order[0]]
            summary[f"max_{name}_score"] = float(values[order[0]])
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
