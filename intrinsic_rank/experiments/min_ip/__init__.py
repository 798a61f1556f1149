"""Three tokens force exponential feature rank: the Min-IP experiments.

"Three tokens force exponential feature rank in nonnegative kernel attention"
(Vicente Opazo, 2026); its experiments:

* the phase transition and out-of-distribution scaling ``min-ip``
  (``_transition``, its command and figure in ``_transition_experiment``):
  kernel students of growing rank on two and three tokens;
* the rank law ``min-ip-law`` (``_law``): the smallest feature rank that solves
  Min-IP on three m-bit tokens, per m and feature map.

This file is the paper's table of contents, and imports nothing heavy: each
experiment's declaration (its words, options and scales; its work is in its
module, loaded when it runs), and the public names of the modules, each loaded
on first use (Scientific Python's SPEC 1).
"""

from ..._lazy import lazy_names

from ..runner import Experiment, Option, bounded_int, shared_option

_MIN_IP = "Three tokens force exponential feature rank in nonnegative kernel attention"
_MODULE = f"{__name__}.{{}}"

OOD_SETTINGS = (
    {"n_bits": 8, "pool": 35, "n_train_sequences": 3000},
    {"n_bits": 12, "pool": 60, "n_train_sequences": 3000},
    {"n_bits": 16, "pool": 100, "n_train_sequences": 3000},
)
"""Default OOD settings: bit width ``n_bits``, codewords per pool ``pool`` (train
and test pools alike), and the number of training sequences sampled from the
train pool's family (the test set samples ``n_test_sequences`` from the test
pool's)."""

_FEATURE_MAPS = ("elu+1", "exp", "favor+", "hedgehog", "relu", "signed", "taylor")
# The names of nn.FEATURE_MAPS (torch), for --help without torch;
# tests/cli/test_startup.py checks that they are the same.

MIN_IP = Experiment(
    name="min-ip",
    command="min-ip",
    title="Min-IP: three tokens force feature rank in nonnegative kernel attention",
    paper=_MIN_IP,
    help="Min-IP phase transition of nonnegative kernel attention",
    description="Train normalised nonnegative kernel heads of a grid of feature ranks (one "
    "batched optimisation) on an anchored Min-IP witness family, in-sample at lengths 3 and "
    "2, with dense softmax attention as the reference; then on the paper-like suite of "
    "1,272 sequences of 24-bit words; then train on one codeword pool and test on a "
    "disjoint one as the bit width grows. Prints the tables and transition ranks.",
    writes="min_ip.json and min_ip.png (error against feature rank)",
    # The OOD sizes are fixed here, before any run; docs/reproduce.md records the one
    # change of the quick ones and its reason.
    quick=dict(
        phase=dict(rank_grid=[1, 4, 16], n_seeds=2, quick=True),
        suite=dict(rank_grid=[1, 4, 32], n_seeds=1, quick=True),
        ood=dict(settings=[dict(s) for s in OOD_SETTINGS[:2]], rank_grid=[1, 4, 16, 64],
                 n_seeds=1, quick=True),
    ),
    full=dict(
        phase=dict(rank_grid=[1, 2, 4, 8, 16, 32, 64], n_seeds=3),
        suite=dict(rank_grid=[1, 2, 4, 8, 16, 32, 64], n_seeds=3),
        ood=dict(settings=[dict(s) for s in OOD_SETTINGS], rank_grid=[1, 2, 4, 8, 16, 32, 64],
                 n_seeds=3),
    ),
    options=(
        # Each part's sizes are its function's own (quick=True chooses the smaller ones);
        # the help states them as those functions document them.
        shared_option("--quick", setting=True,
                      help="fewer feature ranks and seeds, and two smaller OOD settings (the "
                      "quick sizes of min_ip_phase_transition, min_ip_witness_suite_sweep and "
                      "min_ip_ood_scaling)"),
        shared_option("--n-seeds", shown="3; --quick: 2 in-sample, 1 for the suite and OOD"),
        shared_option("--rank-grid",
                      shown="1,2,4,8,16,32,64; --quick: 1,4,16 in-sample, 1,4,32 for the "
                      "suite, 1,4,16,64 OOD", help="feature ranks, e.g. 1-8 or 1,2,4"),
        shared_option("--epochs", shown="400 in-sample and for the suite, 200 OOD",
                      help="the epochs of every fit: passes over its training sequences in "
                      "mini-batches of 32 sequences (in-sample and the suite) or 128 (OOD), "
                      "one optimiser step each"),
        Option("--n-bits", type=bounded_int(2, 64), default=24,
               help="bits of the in-sample witness family"),
        Option("--n-codewords", type=bounded_int(3, 256), default=16,
               help="codewords of the in-sample witness family, within memory (the family "
               "holds about n^3 sequences)"),
        Option("--no-ood", dest="ood", action="store_false",
               help="skip the out-of-distribution experiment"),
    ),
    module=_MODULE.format("_transition_experiment"),
    json_name="min_ip",
    floatfmt="{:.3f}",
)
"""The Min-IP experiments as a registered experiment (piece and command ``min-ip``)."""

_LAW = dict(n_bits=[2, 3, 4, 5], n_seeds=4, max_steps=3000)

MIN_IP_LAW = Experiment(
    name="min-ip-law",
    command="min-ip-law",
    title="Min-IP: the exponential rank law on the worst case",
    paper=_MIN_IP,
    help="the Min-IP rank law on every sequence of all m-bit tokens, with controls",
    description="Train kernel heads of feature ranks 1..2^m on every length-3 Min-IP "
    "sequence over all m-bit tokens and measure the smallest rank that solves all of them, "
    "beside length-2, dense and memorisation controls and the exact constructions. Prints "
    "one summary row per m and map; every fit is in the JSON.",
    writes="min_ip_law.json (every fit) and min_ip_law.png (smallest rank against m)",
    full=_LAW,
    quick=dict(_LAW, n_bits=[2, 3, 4], max_steps=1500),
    options=(
        shared_option("--quick"),
        Option("--bits", dest="n_bits", type=bounded_int(1, 8), nargs="+", scaled=True,
               help="values of m, distinct (the exhaustive set of m = 8 takes 0.5 GiB)"),
        shared_option("--n-seeds", scaled=True, help="seeds per m"),
        Option("--feature-maps", nargs="+", default=["exp"], metavar="MAP",
               choices=_FEATURE_MAPS, help="feature maps of the Min-IP head, distinct"),
        Option("--n-heads", type=bounded_int(1), nargs="+", default=[1],
               help="head counts of the Min-IP model, distinct, each at most 2^m for every "
               "m it runs at; several compare h heads of rank r with one head of rank h r"),
        Option("--map-bits", type=bounded_int(1, 8), nargs="+", shown="all of --bits",
               help="values of m, among --bits, for the maps and head counts after the "
               "first"),
        shared_option("--epochs", dest="max_steps", scaled=True,
                      help="the most optimiser steps of every fit, each over all the distinct "
                      "triples at once (full-batch: one optimiser step is one epoch)"),
    ),
    module=_MODULE.format("_law"),
)
"""The Min-IP rank law as a registered experiment."""

REPORT = (MIN_IP, MIN_IP_LAW)
"""The paper's experiments, in the order of the report and of ``--help``."""

# -- the public names of the modules, loaded on first use ----------------------------------

_LAZY = {
    "_transition": ("min_ip_ood_scaling", "min_ip_phase_transition",
                    "min_ip_witness_suite_sweep", "summarize_min_ip"),
    "_transition_experiment": ("MIN_IP_COLUMNS", "MIN_IP_OOD_COLUMNS",
                               "MIN_IP_OOD_TRANSITION_COLUMNS", "plot_min_ip"),
    "_law": ("fit_rank_law", "min_ip_rank_law", "plot_min_ip_law"),
}
"""Each module and the public names it gives this package."""

_HOME, __getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

__all__ = sorted(["MIN_IP", "MIN_IP_LAW", "OOD_SETTINGS", "REPORT", *_HOME])

