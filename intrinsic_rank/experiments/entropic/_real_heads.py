"""The map of ``r*_attn`` over a causal LM's heads: data per corpus, planted ranks, checkpoints.

The Entropic Bound (Byeong Hoon Yoon, 2026) defines ``r*_attn`` inside the attention
class and names the ranks of the realised operators of trained language models as an
open problem. Here each head of a causal LM is the teacher: its input ``X`` (after the
pre-attention norm) and output ``Y`` (its slice of the output projection's input) are
read by hooks (:func:`~intrinsic_rank.inspection.head_activations`) on windows of a
corpus, split by document into training and held-out windows, and
:func:`~intrinsic_rank.experiments.measure_head` measures its ``r*_attn(tol)``: the training-free
curve of data-aware truncations, then distillation where it can change the answer.

**The planted-rank test** (``plant_ranks``, :mod:`._plants`): each head's query replaced
by a sharp rank-``k`` plant, exact or moved by one quantisation step, and measured by
the same procedure; ``r*_attn(tol) == k`` is the test.

**Checkpoints** (``checkpoint=folder``, :mod:`._head_parts`): every finished head (and
corpus, and plant) is written there at once; a rerun of the same model on the same
corpus with the same settings reads it back instead of measuring again (and skips the
hooked forward passes when every head is there), so an interrupted run loses only the
heads it was measuring. A head from another model, corpus, settings or version, or a
damaged one, is measured again with one warning line saying why.

**A constant head** (its held-out output varies by at most ``CONSTANT_OUTPUT`` of its
size, ``_head_records``) has no ``r*_attn``: the relative risk divides by the
output's variance. It is said in one warning line, and its record holds
``constant_output`` and no ranks; imposing ranks leaves its query as it is.

The experiment ``head-ranks`` around the map (its findings, tables, figures and
command line) is :mod:`._head_ranks`; imposing the measured ranks on the model is
:mod:`._impose_ranks`.
"""

import time
import warnings

import numpy as np
from sklearn.utils import Bunch

from ..._packaged_models import model_heads, model_title
from ..._validation import check_device, check_int, check_seed, keyed_seed
from ...inspection import (
    corpus_token_ids,
    head_activations,
    head_facts,
    head_output,
    profile_heads,
    quantisation_noise,
)
from ...nn import LoadedModel, load_model, model_digest, model_vocab_size, unwrap_model
from ..runner import DEFAULT_JOBS, run_parallel
from . import DISTILL_MARGIN, HEAD_RANK_WINDOWS, TOLERANCES
from ._head_measure import _measure_checked, query_rows
from ._head_parts import (
    check_checkpoint,
    check_replaceable,
    corpus_digest,
    part_key,
    part_name,
    part_path,
    save_part,
    saved_parts,
)
from ._head_records import CONSTANT_OUTPUT, output_spread
from ._head_settings import activation_batch, head_rank_settings
from ._plants import plant_query

__all__ = ["HEAD_TYPES", "MAP_COLUMNS", "head_name", "head_rank_map", "measure_layer",
           "records_frame", "select_heads"]

HEAD_TYPES = ("induction", "previous-token", "sink", "other")
"""The head types of :func:`select_heads`, in the order heads are typed."""


# -- which heads, and what they do ---------------------------------------------------


def head_name(layer, head):
    """The field's short name of a head, ``"L{layer}H{head}"``.

    Examples
    --------
    >>> head_name(18, 6)
    'L18H6'
    """
    return f"L{layer}H{head}"


def select_heads(model, *, n_induction=3, n_previous=2, n_sink=2, n_inputs=16, length=64,
                 random_state=0, device="cpu"):
    """Every head of a causal LM with its type and scores: induction, previous-token, sink, other.

    One :func:`~intrinsic_rank.inspection.profile_heads` pass on the field's induction
    test (BOS, random tokens, the same tokens again) scores every head; the
    ``n_induction`` heads with the highest TransformerLens "mul" induction score
    are typed induction, then the ``n_previous`` highest previous-token scores and
    the ``n_sink`` largest masses on the first token (attention sinks), each among
    the heads not yet typed; the rest are "other".

    Parameters
    ----------
    model : LoadedModel, or what :func:`~intrinsic_rank.nn.load_model` loads
    n_induction, n_previous, n_sink : int, default=3, 2, 2
    n_inputs, length : int, default=16, 64
        The induction-test inputs of the scoring pass.
    random_state : int, default=0
    device : str, default="cpu"

    Returns
    -------
    heads : list of dict
        One per head, in (layer, head) order: ``layer``, ``head``, ``head_type``
        (one of :data:`HEAD_TYPES`), ``induction_score``, ``previous_token_score``
        and ``sink_mass``.

    Examples
    --------
    >>> heads = select_heads("default", n_induction=1, n_previous=1, n_sink=1, n_inputs=4)
    >>> len(heads), sorted(h["head_type"] for h in heads)[:3]
    (8, ['induction', 'other', 'other'])
    """
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=False)
    profile = profile_heads(loaded.module, "repeated_random", tokenizer=loaded.tokenizer,
                            n_inputs=n_inputs, max_length=length, random_state=random_state,
                            device=device)
    records = sorted(profile.records, key=lambda r: (r["layer"], r["head"]))
    types = {}
    for kind, key, count in (("induction", "induction_score", n_induction),
                             ("previous-token", "previous_token_score", n_previous),
                             ("sink", "sink_mass", n_sink)):
        ranked = sorted((r for r in records if (r["layer"], r["head"]) not in types),
                        key=lambda r: -r[key])
        for rec in ranked[:check_int(count, f"n_{kind.split('-')[0]}", minimum=0)]:
            types[rec["layer"], rec["head"]] = kind
    return [dict(layer=int(r["layer"]), head=int(r["head"]),
                 head_type=types.get((r["layer"], r["head"]), "other"),
                 induction_score=float(r["induction_score"]),
                 previous_token_score=float(r["previous_token_score"]),
                 sink_mass=float(r["sink_mass"])) for r in records]


# -- one layer's heads on one corpus (a task of run_parallel) -------------------------


def _projections(record, facts, fit_X, trained):
    """The query projections imposing a record's answers needs, as factors ``(A, C)``.

    ``A @ C`` is the query projection at that rank: the trained student's where the
    rank was trained, else the data-aware truncation (``A = W_Q V_r``, ``C = V_r^T``).
    The answers and their halves are kept (the deficiency test imposes half of
    each answer), and under rank 0 the basis ``V`` of the realised queries.
    """
    from ...inspection import query_basis

    basis, _ = query_basis(fit_X, facts)
    ranks = {r for r in record["r_star"] if r is not None}
    out = {0: (basis.astype(np.float32), np.zeros((0, 0), np.float32))}
    for r in sorted(ranks | {max(1, r // 2) for r in ranks}):
        if r in trained:
            out[r] = trained[r]
        else:
            w_q = query_rows(facts)
            out[r] = ((w_q @ basis[:, :r]).astype(np.float32),
                      basis[:, :r].T.astype(np.float32))
    return out


def _measure_one(facts, fit, heldout, plant, options, random_state, device):
    """One head (planted or not): its record and the projections imposing its answers need."""
    record = dict(planted_rank=None, plant_noise=None, plant_scale=None, plant_sharpness=None,
                  plantable=None)
    if plant is not None:
        k, noisy = plant
        noise = (quantisation_noise(facts.w_q, random_state=(random_state, facts.layer,
                                                             facts.head)) if noisy else None)
        made = plant_query(fit[0], facts, k, tol=options["plant_tol"], X_check=heldout[0],
                           noise=noise)
        record.update(planted_rank=k, plant_noise=bool(noisy), plant_scale=made.scale,
                      plant_sharpness=made.sharpness, plantable=bool(made.sharp))
        if not made.sharp:
            return record, {}
        facts = made.facts
        fit = (fit[0], head_output(fit[0], facts).astype(np.float32))
        heldout = (heldout[0], head_output(heldout[0], facts).astype(np.float32))
    spread = output_spread(heldout[1])
    if spread <= CONSTANT_OUTPUT:  # no variance to measure a relative risk by: no answer
        record.update(constant_output=True, output_spread=spread,
                      tolerances=list(options["tolerances"]),
                      width=int(min(facts.d_model, facts.head_dim)))
        return record, {}
    weights = {}
    measured = _measure_checked(facts, fit, heldout, options, random_state=random_state,
                                device=device, keep_weights=weights)
    record.update(measured)
    return record, _projections(record, facts, fit[0], weights)


def measure_layer(layer, todo, fit_X, fit_Y, held_X, held_Y, facts, corpus, options,
                  checkpoint, key, random_state, device):
    """Measure some heads and plants of one layer on one corpus (a task of ``run_parallel``).

    Each part is written to the checkpoint as soon as it is measured.

    Parameters
    ----------
    layer : int
    todo : list of (int, (int, bool) or None)
        ``(head, plant)`` of each part to measure: the plant's rank and whether
        it is approximate, or ``None`` for the head as trained.
    fit_X, held_X : ndarray of shape (n, L, d_model)
        The layer's inputs, training and held-out windows.
    fit_Y, held_Y : dict of int -> ndarray
        Each head's outputs.
    facts : dict of int -> HeadFacts
    corpus : str
    options : dict
        The measurement's options (:func:`head_rank_map`).
    checkpoint : str or None
        Folder of the finished heads; ``None`` keeps nothing.
    key : dict or None
        The parts' key (``_head_parts.part_key``).
    random_state : int
    device : str

    Returns
    -------
    parts : list of (dict, dict)
        ``(record, projections)`` per entry of ``todo``.
    """
    parts = []
    for head, plant in todo:
        seed = keyed_seed(random_state, layer, head)
        record, projections = _measure_one(
            facts[head], (fit_X, fit_Y[head]), (held_X, held_Y[head]), plant, options, seed,
            device)
        record = dict(layer=layer, head=head, corpus=corpus, **record)
        if checkpoint is not None:
            save_part(part_path(checkpoint, corpus, layer, head, plant), record, projections,
                      key)
        parts.append((record, projections))
    return parts


# -- the map ---------------------------------------------------------------------------


def _model_shape(loaded):
    facts = head_facts(loaded, 0, 0)
    return dict(n_layers=facts.n_layers, n_heads=facts.n_heads, d_model=facts.d_model,
                head_dim=facts.head_dim, width=min(facts.d_model, facts.head_dim))


def head_rank_map(model="smollm2-135m", corpora=("code",), heads="all", *,
                  tolerances=TOLERANCES, n_fit=HEAD_RANK_WINDOWS["n_fit"],
                  n_heldout=HEAD_RANK_WINDOWS["n_heldout"],
                  length=HEAD_RANK_WINDOWS["length"], distill="auto",
                  margin=DISTILL_MARGIN, restarts=0, training=None, plant_ranks=None,
                  plant_noise=False, plant_tol=0.02, precision_draws=3, checkpoint=None,
                  n_jobs=DEFAULT_JOBS, random_state=0, progress=False, device="cpu"):
    """``r*_attn(tol)`` of every head of a causal LM: one row per head, as a pandas DataFrame.

    For each corpus, windows of its training documents (``n_fit``) and of its
    held-out documents (``n_heldout``) are read through the model by hooks; every
    head is then measured by :func:`~intrinsic_rank.experiments.measure_head` (the training-free
    curve, distillation where it can change the answer, the precision floor), one
    layer per task of :func:`~intrinsic_rank.experiments.run_parallel` (so a Dask
    cluster can take them), and its static-kernel and realised-attention energy
    ranks and its induction, previous-token and sink scores are added.

    Parameters
    ----------
    model : str, path or model, default="smollm2-135m"
        A causal LM that :func:`~intrinsic_rank.inspection.head_facts` reads.
    corpora : sequence of str, default=("code",)
        Of ``"random"``, ``"repeated"``, ``"prose"``, ``"code"``
        (:func:`~intrinsic_rank.inspection.corpus_token_ids`).
    heads : "all" or sequence of str or (layer, head), default="all"
    tolerances : sequence of float, default=TOLERANCES
    n_fit, n_heldout, length : int, default=48, 16, 128
        Training and held-out windows per corpus, and tokens per window (BOS
        included).
    distill : {"auto", "all", "none"}, default="auto"
    margin : float, default=10.0
    restarts : int, default=0
        Random starts per trained rank besides the data-aware one.
    training : dict or None, default=None
        Overrides of the distillation's defaults (``lr``, ``batch_size``,
        ``max_epochs``, ``patience``, ``min_fall``).
    plant_ranks : int, sequence of int or None, default=None
        Plant these query ranks (each in turn) and measure the planted heads.
    plant_noise : bool or "both", default=False
        Approximate plants (one quantisation step of noise), exact ones, or both.
    plant_tol : float, default=0.02
        The tolerance a plant is made sharp at and judged at: with plants, one of
        ``tolerances`` and below ``1 / PLANT_SHARPNESS`` (0.05), above which no
        plant can be sharp.
    precision_draws : int, default=3
        Draws of each head's precision floor (0 skips it).
    checkpoint : str or None, default=None
        A folder keeping every finished head as it finishes (``_head_parts``). A
        rerun reads a head back only when it was measured on the same model (its
        weights and configuration, whatever its name), the same corpus text and
        windows, with the same settings and intrinsic-rank version, and its files
        are whole; any other head there is measured again, with one warning line
        saying why. Checked before any work: an empty path, a file, or a folder
        standing where a head's file goes is one ``ValueError``.
    n_jobs : int or None, default=DEFAULT_JOBS
        Layers measured at once (``run_parallel``): 1 (the default of ``--jobs``
        too) one at a time in this process, with its threads; -1 one per CPU, in
        processes of one thread each; ``None`` follows an active joblib backend.
    random_state : int, default=0
    progress : bool, default=False
    device : str, default="cpu"

    Returns
    -------
    result : Bunch
        ``records`` (one dict per head, corpus and plant), ``frame`` (the same as
        a DataFrame when pandas is installed, else ``None``), ``projections``
        (per record index: rank -> the factors ``(A, C)`` of the trained or
        truncated query projection ``A @ C``; key 0 holds the basis of the head's
        realised queries), ``config`` (the settings, with ``dtype``: every
        student trains in float32), ``corpora`` (each corpus's source, Python
        version and digest) and ``seconds``.
    """
    start = time.perf_counter()
    checked = head_rank_settings(
        corpora, heads, tolerances=tolerances, n_fit=n_fit, n_heldout=n_heldout, length=length,
        distill=distill, margin=margin, restarts=restarts, training=training,
        plant_ranks=plant_ranks, plant_noise=plant_noise, plant_tol=plant_tol,
        precision_draws=precision_draws, checkpoint=checkpoint, n_jobs=n_jobs)
    random_state = check_seed(random_state)
    device = check_device(device)
    corpora, n_fit, n_heldout, length = (checked.corpora, checked.n_fit, checked.n_heldout,
                                         checked.length)
    options = checked.options
    checkpoint = check_checkpoint(checkpoint)
    known = model_heads(model)
    if known is not None:  # a packaged model: its heads are checked before it loads
        pairs, plants = checked.for_model(known)
    loaded = model if isinstance(model, LoadedModel) else load_model(model, progress=progress)
    shape = _model_shape(loaded)
    n_layers, n_heads, width = shape["n_layers"], shape["n_heads"], shape["width"]
    if known is None:
        pairs, plants = checked.for_model(shape)
    if checkpoint is not None:  # a folder where a part goes: refused before any work
        check_replaceable(checkpoint, corpora, [part_name(layer, head, plant)
                                                for layer, head in pairs for plant in plants])
    types = {(h["layer"], h["head"]): h for h in select_heads(loaded, random_state=random_state,
                                                              device=device)}
    settings = dict(model=loaded.label, n_fit=n_fit, n_heldout=n_heldout, length=length,
                    random_state=random_state, **options)
    run = dict(loaded=loaded, pairs=pairs, plants=plants, settings=settings,
               checkpoint=checkpoint, n_jobs=n_jobs, progress=progress, device=device,
               model_key=None if checkpoint is None else model_digest(loaded))
    records, projections, sources = [], [], {}
    for corpus in corpora:
        parts, sources[corpus] = _map_corpus(corpus, run)
        for record, projection in parts:
            head_key = (record["layer"], record["head"])
            record.update(head_type=types[head_key]["head_type"],
                          **{k: types[head_key][k] for k in ("induction_score",
                                                             "previous_token_score",
                                                             "sink_mass")})
            records.append(record)
            projections.append(projection)
    config = dict(settings, model_title=model_title(loaded.label), corpora=list(corpora),
                  dtype="float32", heads="all" if checked.heads == "all" else
                  [head_name(*p) for p in pairs], plant_ranks=None if plants == [None] else
                  sorted({k for k, _ in plants}), plant_noise=plant_noise, width=width,
                  n_layers=n_layers, n_heads=n_heads, checkpoint=checkpoint)
    return Bunch(records=records, frame=records_frame(records, config),
                 projections=projections, config=config, corpora=sources,
                 seconds=time.perf_counter() - start)


# -- one corpus: its windows, the parts read back, the heads measured ---------------------


def _map_corpus(corpus, run):
    """Every part of one corpus, in (layer, head, plant) order, and the corpus's source.

    The token windows are read first; they and the model decide the parts' key, so
    the parts a checkpoint holds are read back (``_head_parts.saved_parts``) before the
    hooked forward passes, which run only for the heads still to measure.
    """
    loaded, settings = run["loaded"], run["settings"]
    windows = _corpus_windows(loaded, corpus, settings)
    saved, key = {}, None
    if run["checkpoint"] is not None:
        key = part_key(run["model_key"], corpus_digest(windows.source, (windows.fit_ids,
                                                                        windows.held_ids)),
                       {k: v for k, v in settings.items() if k != "model"})
        saved = saved_parts(run["checkpoint"], corpus, run["pairs"], run["plants"], key,
                            settings["tolerances"])
    todo = [(layer, head, plant) for layer, head in run["pairs"] for plant in run["plants"]
            if (layer, head, plant) not in saved]
    measured = _measure_parts(windows, corpus, todo, key, run) if todo else {}
    profile = _profile_of(loaded, windows.held_ids, settings["length"],
                          settings["random_state"], run["device"])
    parts = []
    for layer, head in run["pairs"]:
        for plant in run["plants"]:
            record, projection = saved.get((layer, head, plant)) or measured[layer, head, plant]
            record.update(profile.get((layer, head), {}))
            parts.append((record, projection))
    return parts, windows.source


def _measure_parts(windows, corpus, todo, key, run):
    """Measure the parts ``todo`` (one task per layer), each written as it finishes."""
    loaded, settings = run["loaded"], run["settings"]
    pairs = list(dict.fromkeys((layer, head) for layer, head, _ in todo))
    batch = activation_batch(head_facts(loaded, *pairs[0]).n_heads, settings["length"])
    fit = head_activations(loaded, windows.fit_ids, pairs, batch_size=batch,
                           device=run["device"], progress=run["progress"])
    held = head_activations(loaded, windows.held_ids, pairs, batch_size=batch,
                            device=run["device"], progress=run["progress"])
    _say_constant_heads(held, pairs, corpus, [p for p in run["plants"] if p is None])
    options = {k: settings[k] for k in ("tolerances", "distill", "margin", "restarts",
                                        "training", "precision_draws", "plant_tol")}
    tasks = []
    for layer in dict.fromkeys(layer for layer, _ in pairs):
        here = [(head, plant) for l, head, plant in todo if l == layer]
        heads_here = list(dict.fromkeys(head for head, _ in here))
        first = heads_here[0]
        tasks.append(dict(
            layer=layer, todo=here, fit_X=fit[layer, first].X, held_X=held[layer, first].X,
            fit_Y={h: fit[layer, h].Y for h in heads_here},
            held_Y={h: held[layer, h].Y for h in heads_here},
            facts={h: fit[layer, h].facts for h in heads_here}, corpus=corpus,
            options=options, checkpoint=run["checkpoint"], key=key,
            random_state=settings["random_state"], device=run["device"]))
    measured = {}
    for task, parts in zip(tasks, run_parallel(measure_layer, tasks, n_jobs=run["n_jobs"],
                                               progress=run["progress"])):
        for (head, plant), part in zip(task["todo"], parts):
            measured[task["layer"], head, plant] = part
    return measured


def _say_constant_heads(held, pairs, corpus, unplanted):
    """One warning per head whose held-out output is constant (measured without an answer)."""
    if not unplanted:
        return
    for layer, head in pairs:
        spread = output_spread(held[layer, head].Y)
        if spread <= CONSTANT_OUTPUT:
            warnings.warn(f"head-ranks: {head_name(layer, head)} ({corpus}) has a constant "
                          f"output on the held-out windows (spread {spread:.1e} of its size): "
                          "a relative risk has no variance to divide by, so it has no "
                          "r*_attn; its record says constant_output, and it keeps its own "
                          "query when ranks are imposed", UserWarning, stacklevel=5)


def _corpus_windows(loaded, corpus, settings):
    """The training and held-out token windows of a corpus, and what the corpus is."""
    from ...inspection import corpus_record

    vocab = model_vocab_size(*unwrap_model(loaded.module))
    ids = {split: corpus_token_ids(corpus, loaded.tokenizer, vocab, n_inputs=settings[n],
                                   length=settings["length"],
                                   random_state=settings["random_state"], split=split)
           for split, n in (("train", "n_fit"), ("validation", "n_heldout"))}
    return Bunch(fit_ids=ids["train"], held_ids=ids["validation"],
                 source=corpus_record(corpus, loaded.tokenizer))


def _profile_of(loaded, ids, length, random_state, device):
    """Static-kernel and realised-attention energy ranks of every head on ``ids``."""
    profile = profile_heads(loaded.module, ids[:8], tokenizer=loaded.tokenizer,
                            max_length=length, random_state=random_state, device=device)
    return {(r["layer"], r["head"]): dict(kernel_energy_rank=float(r["kernel_energy_rank"]),
                                          attn_energy_rank=float(r["attn_energy_rank"]))
            for r in profile.records}


MAP_COLUMNS = ["layer", "head", "head_type", "corpus", "planted_rank", "plant_noise",
               "constant_output", "precision_floor", "induction_score", "previous_token_score",
               "sink_mass", "kernel_energy_rank", "attn_energy_rank"]
"""The columns of :func:`records_frame` before the per-tolerance ones."""


def records_frame(records, config):
    """The map's records as a DataFrame (WeightWatcher's ``analyze()`` style), or ``None``.

    One row per head (and corpus, and plant); per tolerance ``tol``: ``r_attn@tol``
    (the rank, or missing when not reached below the head width), ``r_attn_text@tol``
    (``"> w-1"`` then), ``r_free@tol`` (the training-free answer) and
    ``below_precision@tol``.
    """
    try:
        import pandas as pd
    except ImportError:
        return None
    rows = []
    for rec in records:
        row = {c: rec.get(c) for c in MAP_COLUMNS}
        for i, tol in enumerate(config["tolerances"]):
            if rec.get("r_star") is None:
                continue
            row[f"r_attn@{tol:g}"] = rec["r_star"][i]
            row[f"r_attn_text@{tol:g}"] = rec["r_star_text"][i]
            row[f"r_free@{tol:g}"] = rec["r_star_free"][i]
            row[f"below_precision@{tol:g}"] = rec["below_precision"][i]
        row["fit_seconds"] = rec.get("fit_seconds")
        rows.append(row)
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        if column.startswith(("r_attn@", "r_free@")):
            frame[column] = frame[column].astype("Int64")
    return frame

