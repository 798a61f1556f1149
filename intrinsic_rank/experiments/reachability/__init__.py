"""How many outputs can a Transformer generate: reachability and copying.

"How many different outputs can a Transformer generate?" (Meyer, Michelessa,
Chaux and Tan, ICML 2026, arXiv 2605.22223); its experiments:

* accessibility curves and the reachable-length slope ``reach`` (``_reach``);
* the copy-length cliff ``copy`` (``_copy``);
* a pretrained LM's geometry and decoder cells ``lm-geometry`` (``_lm_geometry``);
* the curve fits both use (``_curves``): n50, slopes, cliffs, tail decay.

This file is the paper's table of contents, and imports nothing heavy: each
experiment's declaration (its words, options and scales; its work is in its
module, loaded when it runs), and the public names of the modules, each loaded
on first use (Scientific Python's SPEC 1).
"""

from ..._lazy import lazy_names

from ..runner import (
    MAX_EPOCHS,
    SHARED_OPTIONS,
    Experiment,
    Option,
    bounded_int,
    parse_lengths,
    parse_ranks,
    shared_option,
)

_REACH = "How many different outputs can a Transformer generate?"
_MODULE = f"{__name__}.{{}}"

# -- reach --------------------------------------------------------------------------------

_REACH_FULL = dict(model="default", n_memory=[1, 2, 3, 4, 5], lengths="auto", n_targets=20,
                   max_steps=3000, patience=500, precision="float16")

REACH = Experiment(
    name="reach",
    command="reach",
    title="Reachable outputs: accessibility, n50 against m, and the slope bounds",
    paper=_REACH,
    help="accessibility of random targets by cramming prompt vectors",
    description="Cram random target sequences into m prompt vectors of a frozen causal LM "
    "(the embedded default model unless a model is given), for a grid of m and target "
    "lengths (the paper's sizes by default: m = 1-5, 20 targets per point); fit n50 per "
    "m, the decay past it, the slope of n50 against m, and compare it with the slope "
    "bounds (ball d ln(1 + 2r/eps) / ln|V|, box, cone, box + decoder cells) under the "
    "three precision conventions. Prints the tables.",
    writes="reach.json and reach.png (accessibility against length, per m)",
    full=_REACH_FULL,
    quick=dict(_REACH_FULL, n_memory=[1, 2, 3, 4], n_targets=16, max_steps=600,
               patience=200, quick=True),
    options=(
        shared_option("model", scaled=True),
        shared_option("--n-memory", type=parse_ranks, scaled=True,
                      help="numbers of prompt vectors m, e.g. 1-4 or 1,2,4,8 (the paper's: "
                      "1-5)"),
        Option("--lengths", type=parse_lengths, scaled=True,
               help="target lengths, e.g. 2-16 or 2,4,8, or auto: until nobody is reached "
               "twice in a row"),
        Option("--n-targets", type=bounded_int(1, 4096), scaled=True,
               help="random targets per point (the paper's: 20)"),
        shared_option("--epochs", dest="max_steps", scaled=True,
                      help="the most optimiser steps per point, each over all its targets at "
                      "once (full-batch: one optimiser step is one epoch)"),
        shared_option("--patience", scaled=True,
                      help="stop a target after this many steps without a better accuracy"),
        shared_option("--precision",
                      help=SHARED_OPTIONS["--precision"].help.replace("eps of the bounds",
                                                                      "eps of the headline "
                                                                      "bound")),
        shared_option("--quick", setting=True, help="seconds per point"),
    ),
    module=_MODULE.format("_reach"),
    floatfmt="{:.3g}",
)
"""Cramming and the slope bounds as a registered experiment (piece and command ``reach``)."""

# -- copy ---------------------------------------------------------------------------------

COPY_SETTINGS = {
    "full": dict(train_lengths=[5, 50], d_model=64, n_steps=5000, batch_size=64, lr=1e-3,
                 n_eval=200),
    "quick": dict(train_lengths=[5, 20], d_model=48, n_steps=1000, batch_size=64, lr=3e-3,
                  n_eval=100),
}
"""Defaults of :func:`copy_length_cliff` (``"quick"`` when ``quick=True``); an
explicit argument overrides its entry."""

MAX_COPY_CONTEXT = 2048
"""The longest context (positions) the command's copy model may have: a length ``n``
needs ``2 n + 2`` positions (the string, a separator, its copy and the end)."""

MAX_EVAL_LENGTH = (MAX_COPY_CONTEXT - 2) // 2
"""The longest string ``--eval-max`` (and ``--train-max``) may ask for."""

_COPY_FULL, _COPY_QUICK = COPY_SETTINGS["full"], COPY_SETTINGS["quick"]

COPY = Experiment(
    name="copy",
    command="copy",
    title="The copy task: abrupt failure past the training length",
    paper=_REACH,
    help="copy-task length cliff of a small causal Transformer",
    description="Train a small causal Transformer (learned absolute positions) to copy "
    "random strings with lengths in a training range, then measure greedy exact-match "
    "copying inside and beyond that range and fit where it collapses. Prints the table and "
    "the fitted cliff.",
    writes="copy.json and copy.png (exact-match rate against length)",
    full=dict(_COPY_FULL),
    quick=dict(_COPY_QUICK, quick=True),
    options=(
        shared_option("--quick", setting=True,
                      help=f"d = {_COPY_QUICK['d_model']}, lr {_COPY_QUICK['lr']:g} and "
                      f"{_COPY_QUICK['n_eval']} strings per length (instead of "
                      f"{_COPY_FULL['d_model']}, {_COPY_FULL['lr']:g} and "
                      f"{_COPY_FULL['n_eval']})"),
        Option("--train-min", type=bounded_int(1, MAX_EVAL_LENGTH),
               default=_COPY_FULL["train_lengths"][0], quick=_COPY_QUICK["train_lengths"][0],
               help="shortest training string"),
        Option("--train-max", type=bounded_int(None, MAX_EVAL_LENGTH),
               default=_COPY_FULL["train_lengths"][1], quick=_COPY_QUICK["train_lengths"][1],
               help="longest training string"),
        Option("--eval-max", type=bounded_int(1, MAX_EVAL_LENGTH), shown="3 x --train-max",
               help=f"longest evaluated string: the model's context holds "
               f"{MAX_COPY_CONTEXT} positions"),
        Option("--steps", dest="n_steps", type=bounded_int(1, MAX_EPOCHS), scaled=True,
               help="mini-batch training steps"),
    ),
    module=_MODULE.format("_copy"),
    floatfmt="{:.3f}",
)
"""The copy task as a registered experiment (piece and command ``copy``)."""

# -- lm-geometry --------------------------------------------------------------------------

_LM_GEOMETRY = dict(model="smollm2-135m", n_prompts=256, n_cell_samples=2**17, missing_ok=True)

LM_GEOMETRY = Experiment(
    name="lm-geometry",
    command="lm-geometry",
    title="Reachability geometry of a pretrained LM: radius, cone, bounds and decoder cells",
    paper=_REACH,
    help="a real LM's hidden-state geometry, bounds and decoder cells (SmolLM2-135M-Instruct)",
    description="Measures the reachability geometry of a pretrained causal LM (default "
    "SmolLM2-135M-Instruct): the radius, box and cone of its final hidden states under "
    "random prompts, the bounds at the three precision conventions, and the decoder cells "
    "of its head ranked by their share of the box, with the top tokens decoded.",
    writes="lm_geometry.json and lm_geometry.png (the decoder cells' shares)",
    full=_LM_GEOMETRY,
    quick=dict(_LM_GEOMETRY, n_prompts=64, n_cell_samples=2**15),
    options=(
        shared_option("model", scaled=True),
        shared_option("--n-memory", default=1),
        shared_option("--tokens"),
        Option("--prompts", dest="n_prompts", type=bounded_int(1, 65536), scaled=True,
               help="random prompts whose final hidden states span the box, within memory"),
        Option("--cell-samples", dest="n_cell_samples", type=bounded_int(1, 2**24),
               scaled=True, help="Monte Carlo points of the decoder cells (2^24: hours "
               "through a 49,152-token head)"),
        Option("--top", type=bounded_int(1, 4096), default=15, help="tokens listed"),
        shared_option("--quick", help="about a minute on one CPU thread after the load"),
    ),
    module=_MODULE.format("_lm_geometry"),
)
"""A pretrained LM's geometry and decoder cells as a registered experiment (``lm-geometry``)."""

REPORT = (REACH, COPY, LM_GEOMETRY)
"""The paper's experiments, in the order of the report and of ``--help``."""

# -- the public names of the modules, loaded on first use ----------------------------------

_LAZY = {
    "_reach": ("AUTO_LENGTHS", "BOUND_COLUMNS", "BOUND_TABLE_COLUMNS", "N50_COLUMNS",
               "REACH_COLUMNS", "TAIL_COLUMNS", "accessibility_curves", "plot_accessibility"),
    "_copy": ("CLIFF_COLUMNS", "COPY_COLUMNS", "copy_length_cliff", "default_copy_lengths",
              "greedy_copy", "plot_copy_cliff", "score_copies"),
    "_lm_geometry": ("LM_GEOMETRY_TOKEN_COLUMNS", "cell_share_facts", "equal_cell_null",
                     "lm_reachability_geometry", "plot_cell_shares"),
    "_curves": ("fit_cliff", "fit_logistic_midpoint", "fit_n50", "fit_slope", "fit_tail_decay",
                "fit_tail_decays"),
}
"""Each module and the public names it gives this package."""

_HOME, __getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = sorted(["COPY", "COPY_SETTINGS", "LM_GEOMETRY", "REACH", "REPORT", *_HOME])

