"""The Entropic Bound: the intrinsic rank r* of a task and what limits it.

"The Entropic Bound" (Byeong Hoon Yoon, 2026); its experiments:

* the rank sweep ``sweep`` (``_sweep``), on a user's own data (``_data``), data
  files and saved models (``_files``) and grids of sweeps or seeds run in
  parallel (``_grid``);
* the B0-B3 interpolation ladder ``ladder`` (``_ladder``);
* the predictability frontier ``frontier`` (``_frontier``): how well r* can be
  read from data before training;
* the appendix on real models ``profile`` (``_profile``, its heat maps in
  ``_profile_plots``): per-head static and realised ranks of pretrained models,
  and the kernel-rank trajectory of a small causal LM along its training
  (``_trajectory``), and ``corpus-ranks`` (``_corpus_ranks``): one causal LM's
  per-head ranks on corpora of different complexity; ``head-ranks``
  (``_head_ranks``): the map of the attention-native rank ``r*_attn`` over a
  causal LM's heads (``_real_heads``; its settings checked once, ``_head_settings``),
  each head measured by its training-free curve and distillation (``_head_measure``),
  and the measured ranks imposed on the model and judged by its loss
  (``_impose_ranks``).

This file is the paper's table of contents, and imports nothing heavy: each
experiment's declaration (its words, options and scales; its work is in its
module, loaded when it runs), and the public names of the modules, each loaded
on first use (Scientific Python's SPEC 1).
"""

from ..._lazy import lazy_names

from ..._packaged_models import model_option_help
from ..runner import (
    DEFAULT_JOBS,
    JOBS_RULE,
    SHARED_OPTIONS,
    Experiment,
    Option,
    bounded_float,
    bounded_int,
    parse_ranks,
    refused_data,
    shared_option,
)

_ENTROPIC = "The Entropic Bound"

CORPORA = ("random", "repeated", "prose", "code")
"""The corpora of :func:`corpus_rank_profiles`, from the least to the most structured input
they are not: uniform random tokens, a repeated short passage, English prose, Python code."""

_QUICK = shared_option("--quick")
_MODULE = f"{__name__}.{{}}"

_STUDENT_EPOCHS = (
    "the epochs of every {who}: passes over its n training sequences in mini-batches of "
    "min(256, max(16, n // 8)) sequences, about 8 optimiser steps an epoch up to n = 2048")
"""What an epoch of AttentionRankEstimator is (its batch_size="auto"), for --epochs."""

_CORPORA_OPTION = Option("--corpora", type="_corpus_list", scaled=True,
                         help="comma-separated corpora, of " + ", ".join(CORPORA))
"""``--corpora``, which corpus-ranks, head-ranks and model-rank take (each with its own
count)."""

# -- sweep --------------------------------------------------------------------------------

_SWEEP = dict(teachers=["linear", "softmax"], r_star=4, d=16, seq_len=8, n_samples=2048,
              noise=0.1, max_epochs=200)

SWEEP = Experiment(
    name="sweep",
    command="sweep",
    title="The Entropic Bound: deficiency, achievability and recovery of r*",
    paper=_ENTROPIC,
    help="rank sweep on a teacher task with known r*",
    description="Train a grid of student ranks at once on a teacher task (or your X, Y "
    "with --data) and estimate r* (the smallest rank reaching the noise floor).",
    writes="sweep.json (settings, every rank's risks, r*), sweep.csv (one row per rank) "
    "and sweep.png (risk against rank)",
    full=_SWEEP,
    quick=dict(_SWEEP, n_samples=1536, max_epochs=150),
    options=(
        _QUICK,
        Option("--teacher", dest="teachers", choices=["linear", "softmax", "fixed"],
               default="softmax", convert=lambda teacher: [teacher], help="the teacher task"),
        Option("--attention", choices=["auto", "fixed", "linear", "softmax", "block"],
               shown="match the teacher; with --data: auto",
               help="student class; auto chooses fixed, linear or softmax by the held-out "
               "risk of a full-rank student of each"),
        shared_option("--r-star", scaled=True),
        shared_option("--d", scaled=True),
        shared_option("--seq-len", scaled=True),
        shared_option("--n-samples", scaled=True),
        shared_option("--noise", scaled=True),
        shared_option("--rank-grid", shown="1..2r*"),
        shared_option("--epochs", scaled=True, help=_STUDENT_EPOCHS.format(who="student")),
        Option("--noise-floor", type=bounded_float(0.0), metavar="RISK",
               shown="estimated from the sweep",
               help="the noise floor (an MSE) the ranks are judged against, when you know it"),
        shared_option("--data", group="your own data",
                      help=SHARED_OPTIONS["--data"].help + "; the rank grid then defaults to "
                      "1..min(d, 16), --attention to auto"),
        Option("--targets", metavar="Y.npy", group="your own data", shown="none",
               help="the .npy file of Y when --data is an .npy file of X"),
        Option("--save-model", metavar="PATH", group="your own data", shown="not saved",
               help="also store the fitted estimator in PATH, checked before any work (a "
               "pickle behind a header with the package version and a SHA-256; load it with "
               "intrinsic_rank.experiments.load_model_file(PATH), which checks the hash "
               "before unpickling: that detects a damaged file, not a malicious author, so "
               "load only files you trust)"),
    ),
    groups={"your own data": "sweep X and Y from files instead of a teacher (--teacher, "
            "--r-star, --d, --seq-len, --n-samples and --noise then do not apply): X of "
            "shape (n, L, d), Y of shape (n, L, d_out), (n,) or (n, k), checked by "
            "AttentionRankEstimator"},
    module=_MODULE.format("_sweep"),
    json_name="sweep",
)
"""The rank sweep as a registered experiment (piece and command ``sweep``)."""

# -- ladder -------------------------------------------------------------------------------

_LADDER = dict(n_samples=2048, n_test=1024, seq_len=8, d=16, r_star=4, noise=0.1,
               max_epochs=200)

LADDER = Experiment(
    name="ladder",
    command="ladder",
    title="The interpolation ladder: why static rank fails",
    paper=_ENTROPIC,
    help="the interpolation ladder B0-B3 on a fixed-operator task",
    description="Fit B0 (fixed operator), B1 (linear QK), B2 (softmax QK) and B3 "
    "(Transformer block) at full rank on one fixed-operator task and compare their test "
    "excess risk.",
    writes="ladder.json and ladder.png (excess risk per rung)",
    full=_LADDER,
    quick=dict(_LADDER, n_samples=1536, max_epochs=150),
    options=(
        _QUICK,
        shared_option("--r-star", scaled=True, help="rank of the operator, at most L"),
        shared_option("--d", scaled=True),
        shared_option("--seq-len", scaled=True),
        shared_option("--n-samples", scaled=True, help="training sequences, within memory"),
        shared_option("--noise", scaled=True),
        shared_option("--epochs", scaled=True, help=_STUDENT_EPOCHS.format(who="rung's fit")),
        refused_data("compares the rungs B0-B3 on a fixed-operator task it draws itself"),
    ),
    module=_MODULE.format("_ladder"),
)
"""The interpolation ladder as a registered experiment."""

# -- frontier -----------------------------------------------------------------------------

_FRONTIER = dict(r_stars=list(range(1, 17)), d=16, seq_len=8, n_samples=4096, noise=0.1,
                 kernel_scale=2.0, recovery=True, max_epochs=200)
_FRONTIER_QUICK = dict(_FRONTIER, r_stars=[1, 2, 4, 8, 12, 16], max_epochs=150)

FRONTIER = Experiment(
    name="frontier",
    command="frontier",
    title="The predictability frontier: r* from data, before training",
    paper=_ENTROPIC,
    help="how far r* can be predicted from data before training",
    description="For a grid of r*, fit each teacher's operator by least squares (no "
    "training) and compare the numerical, energy and realised-mixer ranks with the true "
    "r*; softmax teachers also get a recovery student.",
    writes="frontier.json and frontier.png (estimated against true r*)",
    full=_FRONTIER,
    quick=_FRONTIER_QUICK,
    options=(
        shared_option("--quick", setting=True,
                      help="without --r-star, r* in "
                      + ",".join(map(str, _FRONTIER_QUICK["r_stars"])) + " up to d"),
        shared_option("--r-star", dest="r_stars", type=parse_ranks, shown="1..d",
                      help="true ranks, e.g. 1-16 or 1,2,4,8"),
        shared_option("--d", scaled=True,
                      help="token dimension, within memory (the lifted least squares of an "
                      "unknown value map holds about d^6 / 4 numbers)"),
        shared_option("--seq-len", scaled=True),
        shared_option("--n-samples", scaled=True),
        shared_option("--noise", scaled=True),
        Option("--kernel-scale", type=bounded_float(0.0, 1e6), scaled=True,
               help="scale of the attention teachers' kernel"),
        Option("--no-recovery", dest="recovery", action="store_false",
               help="skip the recovery students (data-only estimates only)"),
        shared_option("--epochs", scaled=True,
                      help=_STUDENT_EPOCHS.format(who="recovery student")),
        refused_data("varies the true r* of teachers it draws itself"),
    ),
    module=_MODULE.format("_frontier"),
    floatfmt="{:.3g}",
)
"""The predictability frontier as a registered experiment."""

# -- the appendix on real models: profile, corpus-ranks, head-ranks -------------------------

_PRECISION_HELP = (
    "eps of the {what}: a number, a dtype name such as float16, or a convention: machine, "
    "paper (2^-10) or relative (r_inf / 2048); the bounds table shows all three conventions")

PROFILE = Experiment(
    name="profile",
    command="profile",
    title="Real models: per-head static kernel ranks, realised mixers, sinks and locality",
    paper=f"{_ENTROPIC} (appendix B: real language models)",
    help="per-head rank profile of a pretrained model (static QK kernel, realised "
    "attention, sinks, locality) and its reachability geometry",
    description="For every layer and head: the static query-key kernel's spectrum and rank "
    "measures, the realised attention matrices' energy rank averaged over inputs, the mass "
    "on the first token (sink), on the most-attended key and on a diagonal band "
    "(locality); then the hidden-state radius and the bounds of \"How many different "
    "outputs can a Transformer generate?\" that apply to the model. Prints the tables. "
    "Runs offline.",
    writes="profile.json, profile.csv (one row per head), profile.png (layer x head heat "
    "maps) and, when head scores were measured, profile_scores.png",
    quick=dict(models=["default", "all-MiniLM-L6-v2"], n_inputs=32, max_length=64,
               steps=[0, 100, 200, 400, 800]),
    full=dict(models=["default", "all-MiniLM-L6-v2"], n_inputs=32, max_length=128,
              steps=[0, 200, 400, 800, 1600, 3200]),
    options=(
        shared_option("model", default="default", help=model_option_help),
        Option("--texts", shown="none, the inputs of --inputs", convert="_read_texts",
               help="a text file, one input per line"),
        Option("--inputs", choices=["default", "repeated-random"], default="default",
               help="'default': the package's 32 sample passages for a model with a "
               "tokenizer, induction sequences for the embedded model; 'repeated-random': "
               "the field's induction test, the tokenizer's BOS token, --half-length random "
               "tokens and the same tokens again, with the model's next-token accuracy on "
               "each copy"),
        shared_option("--n-inputs", default=32,
                      help="number of generated inputs (--inputs; not --texts)"),
        Option("--half-length", type=bounded_int(1, 4096),
               shown="as many as fit in --max-length",
               help="random tokens per copy for --inputs repeated-random"),
        Option("--max-length", type=bounded_int(2, 8192), default=64,
               help="truncation length in tokens"),
        Option("--band", type=bounded_int(0, 8192), default=1,
               help="half-width of the locality band (0: the diagonal)"),
        shared_option("--n-memory", default=1,
                      help="prompt vectors m for the reachability geometry, within the "
                      "model's context"),
        shared_option("--tokens", help="random tokens after the prompt vectors (geometry), "
                      "within the model's context"),
        shared_option("--precision", help=_PRECISION_HELP.format(what="summary's bounds")),
        Option("--slope", type=bounded_float(0.0, 1e9, low_open=True),
               shown="none, the ratio column reads –",
               help="a measured slope (tokens per prompt vector, e.g. of 'intrinsic-rank "
               "reach') to divide the slope bounds by"),
        Option("--no-geometry", dest="geometry", action="store_false",
               help="skip the reachability geometry"),
        Option("--score-measure", choices=["mul", "abs", "conditional"], default="mul",
               help="the head scores' measure: TransformerLens's 'mul' (share of all "
               "attention on the pattern) or 'abs' (1 - rounded mean |A - D| n), or "
               "'conditional' (share over the queries where the pattern names a position, "
               "pooled over inputs)"),
        Option("--exclude-bos", action="store_true",
               help="leave the first key out of the head scores (previous-token, "
               "duplicate-token, induction), as TransformerLens's exclude_bos (default: off)"),
        Option("--exclude-current-token", action="store_true",
               help="leave each query's own position out of the head scores, as "
               "TransformerLens's exclude_current_token (default: off)"),
    ),
    module=_MODULE.format("_profile"),
    floatfmt="{:.3g}",
)
"""Per-head profiles as a registered experiment (piece and command ``profile``)."""

_CORPUS_RANKS = dict(model="smollm2-135m", corpora=list(CORPORA), n_inputs=8, length=64,
                     period=16)

CORPUS_RANKS = Experiment(
    name="corpus-ranks",
    command="corpus-ranks",
    title="A real causal LM: per-head ranks on corpora of different complexity",
    paper=f"{_ENTROPIC} (appendix B: real language models)",
    help="per-head static and realised ranks of a causal LM on random tokens, a repeated "
    "passage, prose and code, and whether the corpora separate them",
    description="Profiles every head of one causal LM (SmolLM2-135M-Instruct by default) on four "
    "offline corpora of clearly different complexity: uniform random tokens, a short "
    "passage repeated, English prose and Python source, all of the same length. Reports per "
    "corpus the median and interquartile range over heads of the realised attention energy "
    "rank, the model's next-token loss, and whether the corpora separate the ranks (range "
    "of medians against the head spread; Friedman's test).",
    writes="corpus_ranks.json and corpus_ranks.png (energy rank per corpus)",
    full=_CORPUS_RANKS,
    quick=dict(_CORPUS_RANKS, model="default"),
    options=(
        shared_option("model", scaled=True,
                      help=lambda: model_option_help(causal=True)
                      + "; the embedded model reads byte-level texts"),
        _CORPORA_OPTION.replace(help=_CORPORA_OPTION.help.replace("corpora, of",
                                                                   "corpora, two or more of")),
        shared_option("--n-inputs", scaled=True, help="inputs per corpus"),
        shared_option("--length", scaled=True),
        Option("--period", type=bounded_int(1, 8192), scaled=True,
               help="length of the repeated passage, below --length - 1"),
    ),
    module=_MODULE.format("_corpus_ranks"),
    floatfmt="{:.3g}",
)
"""The per-corpus ranks of a causal LM as a registered experiment (``corpus-ranks``)."""

TOLERANCES = (0.01, 0.02, 0.05, 0.1, 0.2)
"""The tolerances of ``r*_attn(tol)``: shares of the held-out variance of a head's output
that a student may leave unexplained."""

HEAD_RANK_WINDOWS = dict(n_fit=48, n_heldout=16, length=128)
"""Windows per corpus for training and for held-out scoring, and tokens per window."""

HEAD_RANK_TRAINING = dict(lr=2e-3, batch_size=8, max_epochs=300, patience=10, min_fall=0.01)
"""The distillation of a head's ranks (:func:`~intrinsic_rank.nn.distill_slots`): Adam's
learning rate, windows per step, the most epochs, and the plateau (no fall of a rank's
best held-out risk by ``min_fall`` of itself in ``patience`` epochs)."""

DISTILL_MARGIN = 10.0
"""Training is tried at a rank only where its truncation is within this factor of ``tol``."""

PLANT_SHARPNESS = 20.0
"""A plant of rank ``k`` is sharp when its best truncation to rank ``k - 1`` is at least this
many times ``tol`` away from it (held-out error relative to the variance of its output):
twice the distillation's margin, so that no rank below ``k`` is near enough for training to
reach ``tol`` (the largest fall training gave on real heads was about 4-fold, on the toy
model's heads about 7-fold). A truncation leaves at most all of the variance, so a plant
tolerance of ``1 / PLANT_SHARPNESS`` or more can make no plant sharp."""

_HEAD_RANKS = dict(model="smollm2-135m", heads="all", corpora=["code"],
                   tolerances=list(TOLERANCES), **HEAD_RANK_WINDOWS, distill="auto",
                   restarts=0, **{k: v for k, v in HEAD_RANK_TRAINING.items()
                                  if k != "min_fall"},
                   plant_ranks=None, plant_noise="exact", plant_tol=0.02, impose=True,
                   n_test=32, n_jobs=DEFAULT_JOBS)

HEAD_RANKS = Experiment(
    name="head-ranks",
    command="head-ranks",
    title="Real heads: the map of r*_attn over a causal LM's heads, judged by its own loss",
    paper=f"{_ENTROPIC} (open problem: the ranks of trained models' realised operators)",
    help="r*_attn of every head of a causal LM: training-free curve, distillation, "
    "precision floor, planted ranks, and the ranks imposed on the model",
    description="Reads every head of a causal LM (SmolLM2-135M-Instruct, Q4_1 GGUF "
    "dequantised to float32, by default) by hooks on windows of a corpus split by document. "
    "For each head: the training-free curve (its query truncated on the SVD of its realised "
    "queries, at every rank), its precision floor (one more quantisation step of its query "
    "weights), then students with the head's own positions, keys and values distilled from "
    "those starts where training can change the answer, to a plateau, keeping the best "
    "held-out epoch. r*_attn(tol) is the smallest rank leaving at most tol of Y's variance "
    "unexplained ('> w-1' when only the full width does). Then every head's rank is imposed "
    "on the model and its loss measured on held-out documents, against a uniform rank and "
    "a query-energy allocation at the same total. Every finished head is kept in "
    "head_ranks.parts/ beside the outputs: a rerun with the same settings resumes.",
    writes="head_ranks.json (one record per head, corpus and plant), head_ranks.csv, "
    "head_ranks.png (the map), head_ranks_curves.png and head_ranks_impose.png",
    full=_HEAD_RANKS,
    # ten heads, one every three layers: too few to impose (imposing takes every head)
    quick=dict(_HEAD_RANKS, heads=["L0H0", "L3H2", "L6H4", "L9H6", "L12H8", "L15H1",
                                   "L18H6", "L21H3", "L24H5", "L27H7"],
               n_fit=24, n_heldout=8, length=64),
    options=(
        _QUICK,
        shared_option("model", scaled=True),
        Option("--heads", type="_head_list", scaled=True,
               help="'all' or comma-separated heads such as L18H6,L16H0"),
        _CORPORA_OPTION.replace(help=_CORPORA_OPTION.help.replace(
            "corpora, of", "corpora, one or more of") + " (prose and code: the Python "
            "standard library's files, split by file)"),
        Option("--tolerances", type="_tolerance_list", scaled=True,
               help="comma-separated tolerances in (0, 1)"),
        shared_option("--n-fit", scaled=True),
        Option("--n-heldout", type=bounded_int(2, 65536), scaled=True,
               help="held-out windows per corpus"),
        shared_option("--length", type=bounded_int(4, 4096), scaled=True,
                      help="tokens per window, BOS included"),
        Option("--distill", choices=["auto", "all", "none"], scaled=True,
               help=f"where training is tried: auto: ranks whose truncation is within "
               f"{DISTILL_MARGIN:g} x tol, below the training-free answer, at tolerances no "
               "finer than the head's precision floor; all: every rank below the "
               "training-free answer; none: the training-free curve alone"),
        Option("--restarts", type=bounded_int(0, 64), scaled=True,
               help="random starts per trained rank besides the data-aware one"),
        shared_option("--epochs", scaled=True,
                      help="the most epochs of a distillation: passes over the training "
                      "windows in mini-batches of --batch-size windows, one optimiser step "
                      "each"),
        shared_option("--patience", scaled=True,
                      help=f"epochs without a fall of a rank's best held-out risk by "
                      f"{HEAD_RANK_TRAINING['min_fall']:g} of itself before it has "
                      "converged"),
        Option("--lr", type=bounded_float(0.0, 1000.0, low_open=True), scaled=True,
               help="Adam's learning rate"),
        Option("--batch-size", type=bounded_int(1, 65536), scaled=True,
               help="windows per optimiser step"),
        Option("--plant-rank", dest="plant_ranks", type="_rank_list", scaled=True,
               shown="none, the heads as trained",
               help="comma-separated query ranks to plant in every head, each 2..width-1, "
               "and test that the map finds them"),
        Option("--plant-noise", choices=["exact", "quantisation", "both"], scaled=True,
               help="plants as given, moved by one quantisation step of the weights, or both"),
        Option("--plant-tol", type=bounded_float(0.0, 1.0, low_open=True), scaled=True,
               help="the tolerance a plant is made sharp at and judged at: one of "
               f"--tolerances, below 1 / {PLANT_SHARPNESS:g} (a plant is sharp when its best "
               f"rank k-1 truncation leaves at least {PLANT_SHARPNESS:g} x tol of its "
               "variance)"),
        Option("--no-impose", dest="impose", action="store_false", scaled=True,
               help="skip imposing the ranks on the model (done when every head is measured "
               "and nothing is planted)"),
        shared_option("--n-test", scaled=True),
        shared_option("--jobs", scaled=True, help="layers measured at once: " + JOBS_RULE),
    ),
    module=_MODULE.format("_head_ranks"),
    floatfmt="{:.3g}",
)
"""``r*_attn`` of real heads as a registered experiment (``head-ranks``)."""

# -- model-rank ---------------------------------------------------------------------------

MODEL_RANK_WINDOWS = dict(n_fit=48, n_validation=32, n_test=32, length=128)
"""Windows per corpus for calibration, for the budget search and for the reported loss."""

_MODEL_RANK = dict(model="smollm2-135m", corpora=["code", "prose"],
                   epsilons=[0.005, 0.01, 0.02, 0.05], budgets=[0.3, 0.4, 0.5, 0.6, 0.7],
                   **MODEL_RANK_WINDOWS, metric_windows=16,
                   calibrations=["none", "output", "sequential"], map_distill="none",
                   allocation="output share", n_pairs=60, heal=True, heal_windows=256,
                   heal_steps=400, heal_lr=1e-4,
                   heal_batch=8, heal_every=20, heal_seconds=1200.0, save=None,
                   save_epsilon=0.01,
                   n_jobs=DEFAULT_JOBS)

MODEL_RANK = Experiment(
    name="model-rank",
    command="model-rank",
    title="From heads to the model: r*_model(eps), the query rank the whole model needs",
    paper=f"{_ENTROPIC} (open problem: the ranks of trained models' realised operators)",
    help="r*_model(eps) of a causal LM: the smallest total query rank within eps of its "
    "loss, every head calibrated, healed and saved",
    description="Reads every head of a causal LM (SmolLM2-135M-Instruct, Q4_1 GGUF "
    "dequantised to float32, by default) on training windows, cuts each head's query in its "
    "output metric (the error a rank leaves in the head's output through the output "
    "projection, as a share of the layer's attention output) and allocates one budget over "
    "all heads by that currency. It measures the model's loss on test documents at a grid "
    "of budgets against uniform, query-energy and r*_attn allocations, with and without "
    "the calibration, searches r*_model(eps) on validation documents, checks the currency "
    "against single-head losses, heals the low-rank queries end to end (KL to the unedited "
    "model), judges the factors of one corpus on the other, and saves the model. Finished "
    "measurements are kept in model_rank.parts/ beside the outputs: a rerun resumes.",
    writes="model_rank.json (every loss, r*_model, the maps, the currency, healing, "
    "transfer), model_rank.csv, model_rank.png (loss against the query rank kept), "
    "model_rank_maps.png, model_rank_healing.png and model_rank_currency.png",
    full=_MODEL_RANK,
    quick=dict(_MODEL_RANK, corpora=["code"], epsilons=[0.01, 0.05], budgets=[0.4, 0.6],
               n_fit=16, n_validation=8, n_test=8, length=64, metric_windows=4, n_pairs=8,
               heal_windows=16, heal_steps=10, heal_every=5),
    options=(
        _QUICK,
        shared_option("model", scaled=True),
        _CORPORA_OPTION.replace(help=_CORPORA_OPTION.help.replace(
            "corpora, of", "corpora, one or more of") + "; the first is the one saved, healed "
            "and whose currency is checked"),
        Option("--epsilons", type="_share_list", scaled=True,
               help="comma-separated loss rises of r*_model(eps), each in (0, 1)"),
        Option("--budgets", type="_share_list", scaled=True,
               help="comma-separated shares of the total query rank every allocation is "
               "measured at, each in (0, 1)"),
        shared_option("--n-fit", scaled=True,
                      help="training windows per corpus (calibration, healing)"),
        Option("--n-validation", type=bounded_int(2, 65536), scaled=True,
               help="validation windows per corpus (the search, healing's stop)"),
        shared_option("--n-test", scaled=True,
                      help="test windows per corpus (every loss reported)"),
        shared_option("--length", type=bounded_int(4, 4096), scaled=True,
                      help="tokens per window, BOS included"),
        Option("--metric-windows", type=bounded_int(1, 65536), scaled=True,
               help="training windows each head's output metric is averaged over"),
        Option("--calibrations", type="_calibration_list", scaled=True,
               help="comma-separated calibrations measured at the grid: none, output (the "
               "one searched and saved), sequential"),
        Option("--map-distill", type="_map_distill", scaled=True,
               help="the r*_attn map beside it: none (training-free), auto or all (as "
               "head-ranks --distill), off (no map, no r*_attn allocation)"),
        Option("--allocation", choices=["output share", "uniform", "query energy", "r*_attn"],
               scaled=True, help="the allocation whose r*_model is searched, healed and "
               "saved (every one is measured at the grid); quote the names with a space"),
        Option("--n-pairs", type=bounded_int(0, 4096), scaled=True,
               help="(head, rank) pairs measured alone to check the currency, 0 or at least 4"),
        Option("--no-heal", dest="heal", action="store_false", scaled=True,
               help="skip healing the low-rank queries"),
        Option("--heal-windows", type=bounded_int(2, 65536), scaled=True,
               help="training windows healing draws its batches from (more than --n-fit: "
               "healing trains every head at once and would learn a few windows by heart)"),
        Option("--heal-steps", type=bounded_int(0, 10**6), scaled=True,
               help="the most healing steps (Adam, a batch of training windows each)"),
        Option("--heal-lr", type=bounded_float(0.0, 1.0, low_open=True), scaled=True,
               help="healing's Adam learning rate"),
        Option("--heal-batch", type=bounded_int(1, 65536), scaled=True,
               help="training windows per healing step"),
        Option("--heal-every", type=bounded_int(1, 10**6), scaled=True,
               help="healing steps between validation losses"),
        Option("--heal-seconds", type=bounded_float(0.0, 1e7, low_open=True), scaled=True,
               help="stop healing at the first validation loss after this many seconds"),
        Option("--save", metavar="DIR", scaled=True, shown="not saved",
               help="a new folder: the model at r*_model(--save-epsilon) of the first corpus "
               "(healed), loadable by transformers' from_pretrained, with its factors"),
        Option("--save-epsilon", type=bounded_float(0.0, 1.0, low_open=True), scaled=True,
               help="the eps whose r*_model is saved and healed; one of --epsilons"),
        shared_option("--jobs", scaled=True,
                      help="layers of the r*_attn map measured at once: " + JOBS_RULE),
    ),
    module=_MODULE.format("_model_rank"),
    floatfmt="{:.4g}",
)
"""``r*_model(eps)`` of a causal LM as a registered experiment (``model-rank``)."""

REPORT = (SWEEP, LADDER, FRONTIER)
"""The paper's experiments on teacher tasks, in the order of the report and of ``--help``."""

APPENDIX = (PROFILE, CORPUS_RANKS, HEAD_RANKS, MODEL_RANK)
"""The experiments on real language models, last in the report (after every paper's
:data:`REPORT`)."""

# -- the public names of the modules, loaded on first use ----------------------------------

_LAZY = {
    "_sweep": ("plot_sweep", "rank_sweep"),
    "_data": ("DEFAULT_MAX_RANK", "sweep_data"),
    "_files": ("MODEL_FORMAT", "ModelVersionWarning", "load_model_file", "load_xy",
               "save_model_file"),
    "_grid": ("SWEEP_GRID_KEYS", "fit_seeds", "sweep_grid"),
    "_ladder": ("RUNGS", "interpolation_ladder", "plot_ladder"),
    "_frontier": ("FRONTIER_TEACHERS", "plot_frontier", "predictability_frontier"),
    "_profile": ("PROFILE_SUMMARY_COLUMNS",),
    "_profile_plots": ("plot_head_profile", "plot_head_scores"),
    "_corpus_ranks": ("CORPUS_RANK_COLUMNS", "corpus_inputs", "corpus_rank_profiles",
                      "plot_corpus_ranks"),
    "_head_measure": ("measure_head",),
    "_real_heads": ("HEAD_TYPES", "head_rank_map", "select_heads"),
    "_plants": ("plant_query",),
    "_impose_ranks": ("ALLOCATIONS", "impose_ranks"),
    "_head_ranks": ("head_rank_findings",),
    "_head_rank_plots": ("plot_head_rank_curves", "plot_head_rank_map", "plot_impose"),
    "_allocations": ("MODEL_ALLOCATIONS", "budget_allocation"),
    "_model_rank": ("model_rank",),
    "_model_rank_plots": ("plot_model_rank", "plot_model_rank_currency",
                          "plot_model_rank_healing", "plot_model_rank_maps"),
    "_trajectory": ("TRAJECTORY_COLUMNS", "kernel_rank_trajectory",
                    "plot_kernel_rank_trajectory"),
}
"""Each module and the public names it gives this package."""

_HOME, __getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = sorted(["APPENDIX", "CORPORA", "CORPUS_RANKS", "DISTILL_MARGIN", "FRONTIER",
                  "HEAD_RANKS", "HEAD_RANK_TRAINING", "HEAD_RANK_WINDOWS", "LADDER",
                  "MODEL_RANK", "MODEL_RANK_WINDOWS", "PLANT_SHARPNESS", "PROFILE", "REPORT",
                  "SWEEP", "TOLERANCES", *_HOME])

