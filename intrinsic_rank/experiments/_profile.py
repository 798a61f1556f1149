"""Per-head rank profiles of real models (Entropic Bound, appendix B).

For every layer and head of a pretrained model this measures the static
query-key kernel ``W_Q W_K^T`` (its spectrum and rank measures), the realised
attention matrices on a batch of inputs (their energy rank, averaged over
inputs) and two diagnostics of the task-independent structure that the paper
says dominates real mixers: attention sinks (mass on the first token, or on
any single key) and locality (mass on a band around the diagonal). A uniform
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
from ..datasets import load_sample_texts, make_induction_corpus
from ..datasets._min_ip import _check_int
from ..nn._heads import (
    _check_inputs,
    _max_positions,
    _unwrap,
    _vocab_size,
    attention_maps,
    query_key_weights,
)
from ..nn._pretrained import _resolve
from ._plotting import pyplot, save_figure

__all__ = [
    "PROFILE_COLUMNS",
    "kernel_rank_trajectory",
    "plot_head_profile",
    "plot_kernel_rank_trajectory",
    "profile_heads",
    "save_profile_csv",
]

#: columns of the printed profile table (every record has more, see profile_heads)
PROFILE_COLUMNS = [
    "layer", "head", "d_head", "kernel_energy_rank", "kernel_numerical_rank",
    "attn_energy_rank", "sink_mass", "max_key_mass", "band_mass", "entropy",
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
    model, kind = _unwrap(module)
    family = ("tiny_causal_lm" if kind == "tiny"
              else getattr(model.config, "model_type", type(model).__name__))
    return (_vocab_size(model, kind), _max_positions(model, kind), family,
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
    ids, mask = _check_inputs(ids, mask, vocab, context)
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
                  band=1, q=0.99, threshold=0.5, batch_size=8, random_state=0):
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
      ``entropy`` (of each query's attention row, in nats).

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
        A head counts as a sink head (``sink_mass``) or a local head
        (``band_mass``) in the summary when that mass exceeds ``threshold``.
    batch_size : int, default=8
        Inputs per forward pass, at most; fewer when one batch's attention maps
        would take more than 256 MiB (long inputs on large models).
    random_state : int, default=0
        Seed of generated default inputs.

    Returns
    -------
    profile : Bunch
        ``records`` (one dict per layer and head: every column of
        :data:`PROFILE_COLUMNS` and the other rank measures and spreads),
        ``kernel_spectra`` (``(n_layers, n_heads, d_head)``), ``baselines``
        (the same diagnostics for uniform attention over the visible keys on
        the same inputs), ``summary`` (sink and local head counts, the Spearman
        correlation of static-kernel and realised-attention energy ranks across
        heads), ``config`` (model, family, sizes, whether it is causal or
        rotary, the inputs) and ``seconds``.

    Examples
    --------
    >>> profile = profile_heads("default", n_inputs=4, max_length=16)
    >>> len(profile.records), profile.config["n_layers"], profile.config["n_heads"]
    (8, 2, 4)
    >>> bool(profile.config["causal"])
    True
    """
    start = time.perf_counter()
    n_inputs = _check_int(n_inputs, "n_inputs")
    max_length = _check_int(max_length, "max_length", 2)
    band = _check_int(band, "band", 0)
    batch_size = _check_int(batch_size, "batch_size")
    if not 0 < float(threshold) < 1:
        raise ValueError(f"threshold must lie in (0, 1); got {threshold!r}")
    if not 0 < float(q) <= 1:
        raise ValueError(f"q must satisfy 0 < q <= 1; got {q!r}")
    module, folder_tokenizer, label = _resolve(model)
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
    causal, lengths = True, []
    # a batch's maps take n_layers * n_heads * T^2 floats per input: keep them
    # under _MAP_BUDGET bytes so long inputs on big models do not exhaust memory
    per_input_bytes = 4 * n_layers * n_heads * ids.shape[1] ** 2
    batch_size = max(1, min(batch_size, _MAP_BUDGET // per_input_bytes))
    for begin in range(0, len(ids), batch_size):
        maps = attention_maps(module, ids[begin:begin + batch_size],
                              mask[begin:begin + batch_size])
        for A, valid in zip(maps, mask[begin:begin + batch_size]):
            A = A[:, :, valid][:, :, :, valid]
            causal = causal and _is_causal(A)  # one-token inputs cannot tell
            lengths.append(A.shape[-1])
            for key, value in _map_diagnostics(A, band).items():
                per_input[key].append(value)
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
            records.append(rec)

    baselines = {key: float(np.mean(values)) for key, values in uniform.items()}
    summary = _summarize(records, threshold, baselines)
    rotary = any(getattr(layer, "rotary", False) for layer in heads)
    qk_norm = any(getattr(layer, "qk_norm", False) for layer in heads)
    config = dict(model=label, family=family, n_layers=int(n_layers), n_heads=int(n_heads),
                  d_model=int(d_model), d_head=int(d_head), vocab_size=vocab,
                  context=context, causal=bool(causal), rotary=rotary, qk_norm=qk_norm,
                  dtype=str(dtype).replace("torch.", ""), inputs=source,
                  n_inputs=int(len(ids)), mean_length=float(np.mean(lengths)),
                  min_length=int(min(lengths)), max_length=int(max(lengths)), band=band,
                  q=float(q), threshold=float(threshold), random_state=random_state)
    return Bunch(records=records, kernel_spectra=spectra, baselines=baselines,
                 summary=summary, config=config, texts=texts,
                 seconds=time.perf_counter() - start)


def _summarize(records, threshold, baselines):
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
    )


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
    ("kernel_energy_rank", "static QK kernel: energy rank", "viridis"),
    ("attn_energy_rank", "realised attention: energy rank", "viridis"),
    ("entropy", "attention entropy (nats)", "viridis"),
    ("sink_mass", "sink: mass on the first token", "magma"),
    ("max_key_mass", "mass on the most-attended key", "magma"),
    ("band_mass", "locality: mass within the band", "magma"),
]


def plot_head_profile(profile, path=None):
    """Heat maps (layer x head) of the profile's rank measures and diagnostics.

    Six panels: static-kernel energy rank (out of ``d_head``), realised
    attention energy rank (out of the input length), attention entropy, and
    the sink, most-attended-key and band masses (0 to 1). Each panel's title
    gives the uniform-attention baseline where one applies.

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
    grids = {key: np.array([r[key] for r in profile.records]).reshape(L, H)
             for key, _, _ in _PANELS}
    width = min(22.0, 3.0 + 3 * max(2.2, 0.42 * H))
    height = min(16.0, 1.6 + 2 * max(1.6, 0.42 * L))
    fig, axes = plt.subplots(2, 3, figsize=(width, height))
    annotate = L * H <= 160
    for ax, (key, title, cmap) in zip(axes.ravel(), _PANELS):
        grid = grids[key]
        if key.endswith("_mass"):
            vmin, vmax = 0.0, 1.0
        elif key == "kernel_energy_rank":
            vmin, vmax = 0.0, float(cfg["d_head"])
        elif key == "attn_energy_rank":
            vmin, vmax = 1.0, max(1.0 + 1e-9, float(np.nanmax(grid)))
        else:
            vmin, vmax = float(np.nanmin(grid)), float(np.nanmax(grid)) + 1e-9
        image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
        base = profile.baselines.get(key)
        if key == "kernel_energy_rank":
            detail = f" (of d_head = {cfg['d_head']})"
        elif key == "attn_energy_rank":
            detail = f"\n(mean length {cfg['mean_length']:.1f}; uniform {base:.2f})"
        else:
            detail = f"\n(uniform attention: {base:.2f})"
        ax.set_title(title + detail, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(H))
        ax.set_yticks(range(L))
        ax.tick_params(labelsize=7)
        if annotate:
            middle = (vmin + vmax) / 2
            for (i, j), value in np.ndenumerate(grid):
                text = f"{value:.2f}" if key.endswith("_mass") else f"{value:.1f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=6,
                        color="white" if value < middle else "black")
    kind = "causal" if cfg["causal"] else "bidirectional"
    fig.suptitle(
        f"Per-head profile of {cfg['model']} ({cfg['family']}, {kind}, {L} layers x {H} "
        f"heads, d = {cfg['d_model']}) on {cfg['n_inputs']} inputs ({cfg['inputs']}); "
        f"band = +/-{cfg['band']}",
        fontsize=10,
    )
    return save_figure(fig, path)


def kernel_rank_trajectory(steps=(0, 100, 200, 400, 800), vocab_size=32, d_model=32,
                           n_layers=2, n_heads=4, seq_len=32, max_segment=8, lr=3e-3,
                           batch_size=32, n_inputs=16, random_state=0):
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
        Seeds the initialisation, the training stream and the held-out data.

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
        _check_int(value, name, low)
    torch.manual_seed(int(random_state))
    lm = TinyCausalLM(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                      n_heads=n_heads, max_length=seq_len)

    def sample(size, rng):
        X = make_induction_corpus(size, seq_len + 1, vocab_size, max_segment=max_segment,
                                  random_state=rng)
        return X[:, :-1], X[:, 1:]

    held_out = make_induction_corpus(n_inputs, seq_len, vocab_size, max_segment=max_segment,
                                     random_state=int(random_state) + 7919)
    ids = torch.as_tensor(held_out)
    records, summary, done = [], [], 0
    for step in steps:
        if step > done:
            train_causal_lm(lm, sample, step - done, batch_size=batch_size, lr=lr,
                            warmup=min(20, step - done), random_state=int(random_state) + step)
            done = step
        lm.eval()
        with torch.no_grad():
            logits = lm(ids[:, :-1])
            loss = float(torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab_size), ids[:, 1:].reshape(-1)))
        profile = profile_heads(lm, held_out)
        keys = ("kernel_energy_rank", "kernel_stable_rank", "attn_energy_rank", "sink_mass",
                "band_mass")
        for layer in range(n_layers):
            rows = [r for r in profile.records if r["layer"] == layer]
            records.append(dict(step=step, layer=layer, loss=loss,
                                **{k: float(np.mean([r[k] for r in rows])) for k in keys}))
        summary.append(dict(step=step, loss=loss, **{
            k: float(np.mean([r[k] for r in profile.records])) for k in keys}))
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
    fig, (ax_k, ax_a, ax_l) = plt.subplots(1, 3, figsize=(11, 3.5))
    for layer in range(cfg["n_layers"]):
        rows = [r for r in trajectory.records if r["layer"] == layer]
        steps = [r["step"] for r in rows]
        ax_k.plot(steps, [r["kernel_energy_rank"] for r in rows], "o-", label=f"layer {layer}")
        ax_a.plot(steps, [r["attn_energy_rank"] for r in rows], "o-", label=f"layer {layer}")
    ax_l.plot([s["step"] for s in trajectory.summary], [s["loss"] for s in trajectory.summary],
              "o-", color="k")
    ax_k.set_title(f"static QK kernel: energy rank (of d_head = {cfg['d_head']})", fontsize=10)
    ax_a.set_title(f"realised attention: energy rank (length {cfg['seq_len']})", fontsize=10)
    ax_l.set_title("held-out next-token loss (nats)", fontsize=10)
    for ax in (ax_k, ax_a, ax_l):
        ax.set_xlabel("training steps")
    ax_k.legend(frameon=False, fontsize=8)
    fig.suptitle(
        f"One fixed task (induction sequences, |V| = {cfg['vocab_size']}), a TinyCausalLM "
        f"with {cfg['n_layers']} layers x {cfg['n_heads']} heads, d = {cfg['d_model']}, "
        f"profiled on {cfg['n_inputs']} held-out sequences", fontsize=9)
    return save_figure(fig, path)
