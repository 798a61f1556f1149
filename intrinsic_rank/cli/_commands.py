"""The command table: what ``intrinsic-rank --help`` needs of each experiment, without torch.

The command line builds its parser from :data:`COMMANDS` -- each experiment's
piece name, sub-command, paper, one-line help, description, the files it writes
and its options -- and imports the experiment itself (and with it torch) only
when the command runs. So ``intrinsic-rank --help``, ``--version`` and every
sub-command's ``--help`` import argparse and this module, nothing heavy.

One source of truth: the registered :class:`~intrinsic_rank.experiments.Experiment`
is what runs; this table is its command line. ``tests/test_startup.py`` builds
both parsers and fails when they disagree on the name, command, paper, one-line
help, file stem or any option (its flags, destination, default, type, choices,
nargs, const, action and metavar). An option's parsing type that is more than
``int``/``float`` is the experiment's own, looked up on first use
(:func:`_own_type`), so the values parsed here are those of the experiment's
parser. The words shown by ``--help`` (the description, the files written,
what ``--quick`` changes, each option's help with its default) are this table's.
"""

import argparse
from typing import Callable, NamedTuple, Optional

from .._packaged_models import model_option_help

__all__ = ["COMMANDS", "Command"]


class Command(NamedTuple):
    """The command line of one experiment.

    Attributes
    ----------
    name : str
        The reproduce piece's name (the key in ``EXPERIMENTS``).
    command : str
        The sub-command.
    paper : str
        The paper the claims come from (as the experiment's ``paper``).
    help : str
        One line for ``intrinsic-rank --help`` (as the experiment's ``help``).
    description : str
        The sub-command's description.
    writes : str
        The files the command writes in ``--out``, in words.
    add_arguments : callable
        ``add_arguments(parser)``: the command's own options.
    json_name : str or None
        As the experiment's ``json_name``.
    """

    name: str
    command: str
    paper: str
    help: str
    description: str
    writes: str
    add_arguments: Callable
    json_name: Optional[str] = None

    @property
    def file_stem(self):
        """Stem of the command's JSON file, as ``Experiment.file_stem``."""
        return self.json_name or self.command.replace("-", "_")


class _own_type:
    """The parsing type of option ``dest`` of experiment ``name``, looked up when first used.

    Calling it imports the experiments (torch) and calls the type the
    experiment's own ``add_arguments`` gives that option; ``--help`` never calls it.
    """

    __name__ = "value"  # argparse's word in "invalid <type> value"; __call__ words errors

    def __init__(self, name, dest):
        self.name, self.dest = name, dest
        self._type = None

    def resolve(self):
        """The experiment's own type of this option."""
        if self._type is None:
            from ..experiments.runner import get_experiment

            parser = argparse.ArgumentParser(add_help=False)
            get_experiment(self.name).add_arguments(parser)
            (action,) = [a for a in parser._actions if a.dest == self.dest]
            self._type = action.type
        return self._type

    def __call__(self, text):
        own = self.resolve()
        try:
            return own(text)
        except (TypeError, ValueError) as error:
            if isinstance(error, argparse.ArgumentTypeError):
                raise
            # what argparse says of the experiment's own type
            name = getattr(own, "__name__", repr(own))
            raise argparse.ArgumentTypeError(f"invalid {name} value: {text!r}") from None

    def __repr__(self):
        return f"<the {self.dest} type of {self.name}>"


def _quick(text):
    return f"the quick size of the reproduce report: {text}"


_PRECISION_HELP = (
    "eps of the {what}: a number, a dtype name such as float16, or a convention: machine, "
    "paper (2^-10) or relative (r_inf / 2048) (default: the model's own dtype); the "
    "bounds table shows all three conventions")


def _sweep(parser):
    parser.add_argument("--quick", action="store_true",
                        help=_quick("1536 samples, 150 epochs (instead of 2048, 200)"))
    parser.add_argument("--teacher", choices=["linear", "softmax", "fixed"], default="softmax",
                        help="the teacher task")
    parser.add_argument("--attention", choices=["auto", "fixed", "linear", "softmax", "block"],
                        default=None, help="student class; auto chooses fixed, linear or "
                        "softmax by the held-out risk of a full-rank student of each "
                        "(default: match the teacher; with --data: auto)")
    parser.add_argument("--r-star", type=_own_type("sweep", "r_star"), default=4,
                        help="true rank of the teacher, 1..d (at most 4096) (default: 4)")
    parser.add_argument("--d", type=_own_type("sweep", "d"), default=16,
                        help="token dimension, 1..4096 (default: 16)")
    parser.add_argument("--seq-len", type=_own_type("sweep", "seq_len"), default=8,
                        help="sequence length L, 1..4096 (default: 8)")
    parser.add_argument("--n-samples", type=_own_type("sweep", "n_samples"), default=None,
                        help="number of sequences, 2..10^8 and within memory (default 2048, "
                        "--quick 1536)")
    parser.add_argument("--noise", type=_own_type("sweep", "noise"), default=0.1,
                        help="noise standard deviation, 0..1e6 (default: 0.1)")
    parser.add_argument("--rank-grid", dest="rank_grid", type=_own_type("sweep", "rank_grid"),
                        default=None,
                        help="rank grid, e.g. 1-8 or 1,2,4,8 (default 1..2r*)")
    parser.add_argument("--epochs", type=_own_type("sweep", "epochs"), default=None,
                        help="full-batch optimiser steps, 1..1000000 (default 200, --quick "
                        "150)")
    parser.add_argument("--noise-floor", type=_own_type("sweep", "noise_floor"), default=None,
                        metavar="RISK",
                        help="the noise floor (an MSE) the ranks are judged against, when "
                        "you know it (default: estimated from the sweep)")
    data = parser.add_argument_group(
        "your own data",
        "sweep X and Y from files instead of a teacher (--teacher, --r-star, --d, --seq-len, "
        "--n-samples and --noise then do not apply): X of shape (n, L, d), Y of shape "
        "(n, L, d_out), (n,) or (n, k), checked by AttentionRankEstimator")
    data.add_argument("--data", default=None, metavar="FILE",
                      help="an .npz file with arrays X and Y (numpy.savez(FILE, X=X, Y=Y)), "
                      "or an .npy file of X with --targets (default: a teacher task); the "
                      "rank grid then defaults to 1..min(d, 16), the students to softmax")
    data.add_argument("--targets", default=None, metavar="Y.npy",
                      help="the .npy file of Y when --data is an .npy file of X (default: none)")
    data.add_argument("--save-model", default=None, metavar="PATH",
                      help="also store the fitted estimator in PATH (joblib, with the "
                      "package version; load it with "
                      "intrinsic_rank.experiments.load_model_file(PATH); default: not saved)")


def _refused_data(parser):
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)


def _ladder(parser):
    parser.add_argument("--quick", action="store_true",
                        help=_quick("1536 samples, 150 epochs (instead of 2048, 200)"))
    parser.add_argument("--r-star", type=_own_type("ladder", "r_star"), default=4,
                        help="rank of the operator, 1..L (at most 4096)")
    parser.add_argument("--d", type=_own_type("ladder", "d"), default=16,
                        help="token dimension, 1..4096")
    parser.add_argument("--seq-len", type=_own_type("ladder", "seq_len"), default=8,
                        help="sequence length L, 1..4096")
    parser.add_argument("--n-samples", type=_own_type("ladder", "n_samples"), default=None,
                        help="training sequences, 2..10^8 and within memory (default 2048, "
                        "--quick 1536)")
    parser.add_argument("--noise", type=_own_type("ladder", "noise"), default=0.1,
                        help="noise standard deviation, 0..1e6")
    parser.add_argument("--epochs", type=_own_type("ladder", "epochs"), default=None,
                        help="full-batch optimiser steps, 1..1000000 (default 200, --quick "
                        "150)")
    _refused_data(parser)  # the sweep's option, refused with a reason


def _frontier(parser):
    parser.add_argument("--quick", action="store_true",
                        help=_quick("r* in 1,2,4,8,12,16 (instead of 1..16), 150 recovery "
                                    "epochs (instead of 200)"))
    parser.add_argument("--r-star", dest="r_stars", type=_own_type("frontier", "r_stars"),
                        default=None,
                        help="true ranks, e.g. 1-16 or 1,2,4,8 (default 1..d; --quick "
                        "1,2,4,8,12,16 when d = 16)")
    parser.add_argument("--d", type=_own_type("frontier", "d"), default=16,
                        help="token dimension, 1..4096 and within memory (the lifted "
                        "least squares of an unknown value map holds about d^6 / 4 numbers)")
    parser.add_argument("--seq-len", type=_own_type("frontier", "seq_len"), default=8,
                        help="sequence length L, 1..4096")
    parser.add_argument("--n-samples", type=_own_type("frontier", "n_samples"), default=4096,
                        help="number of sequences, 2..10^8 and within memory")
    parser.add_argument("--noise", type=_own_type("frontier", "noise"), default=0.1,
                        help="noise standard deviation, 0..1e6")
    parser.add_argument("--kernel-scale", type=_own_type("frontier", "kernel_scale"),
                        default=2.0, help="scale of the attention teachers' kernel, 0..1e6")
    parser.add_argument("--no-recovery", action="store_true",
                        help="skip the recovery students (data-only estimates only)")
    parser.add_argument("--epochs", type=_own_type("frontier", "epochs"), default=None,
                        help="full-batch optimiser steps of the recovery students, "
                        "1..1000000 (default 200, --quick 150)")
    _refused_data(parser)


def _min_ip(parser):
    parser.add_argument("--quick", action="store_true",
                        help=_quick("feature ranks 1,4,16 and 2 seeds in-sample (instead of "
                                    "1,2,4,...,64 and 3); OOD: the first two settings, ranks "
                                    "1,4,16,64, 1 seed"))
    parser.add_argument("--n-seeds", type=_own_type("min-ip", "n_seeds"), default=None,
                        help="seeds per setting, an integer in [1, 64] (default 3, --quick 2 "
                        "in-sample / 1 OOD)")
    parser.add_argument("--rank-grid", dest="rank_grid", type=_own_type("min-ip", "rank_grid"),
                        default=None,
                        help="feature ranks, e.g. 1-8 or 1,2,4 (default 1,2,4,8,16,32,64; "
                        "--quick 1,4,16 in-sample, 1,4,16,64 OOD)")
    parser.add_argument("--epochs", type=_own_type("min-ip", "epochs"), default=None,
                        help="full-batch optimiser steps of every fit, 1..1000000 (default "
                        "400 in-sample, 200 OOD)")
    parser.add_argument("--n-bits", type=_own_type("min-ip", "n_bits"), default=24,
                        help="bits of the in-sample witness family, 2..64")
    parser.add_argument("--n-codewords", type=_own_type("min-ip", "n_codewords"), default=16,
                        help="codewords of the in-sample witness family, 3..256 and within "
                        "memory (the family holds about n^3 sequences)")
    parser.add_argument("--no-ood", action="store_true",
                        help="skip the out-of-distribution experiment")


_FEATURE_MAPS = ["elu+1", "exp", "favor+", "hedgehog", "relu", "signed", "taylor"]


def _min_ip_law(parser):
    def own(dest):
        return _own_type("min-ip-law", dest)

    parser.add_argument("--quick", action="store_true",
                        help=_quick("m = 2,3,4 (instead of 2..5), 1500 steps (instead of 3000)"))
    parser.add_argument("--bits", type=own("bits"), nargs="+", default=None,
                        help="values of m, distinct integers in [1, 8] (the exhaustive set "
                        "of m = 8 takes 0.5 GiB) (default 2 3 4 5, --quick 2 3 4)")
    parser.add_argument("--n-seeds", type=own("n_seeds"), default=4,
                        help="seeds per m, an integer in [1, 64]")
    parser.add_argument("--feature-maps", nargs="+", default=["exp"], metavar="MAP",
                        choices=_FEATURE_MAPS,
                        help="feature maps of the Min-IP head, distinct, some of "
                        + ", ".join(_FEATURE_MAPS))
    parser.add_argument("--heads", type=own("heads"), nargs="+", default=[1],
                        help="head counts of the Min-IP model, distinct, each at most 2^m for "
                        "every m it runs at; several compare h heads of rank r with one head "
                        "of rank h r (default 1)")
    parser.add_argument("--map-bits", type=own("map_bits"), nargs="+", default=None,
                        help="values of m, among --bits, for the maps and head counts after "
                        "the first (default: all of --bits)")
    parser.add_argument("--epochs", type=own("epochs"), default=None,
                        help="full-batch optimiser steps of every fit, an integer in "
                        "[1, 1000000] (default 3000, --quick 1500)")


def _reach(parser):
    parser.add_argument("--model", default="default",
                        help=model_option_help(causal=True))
    parser.add_argument("--n-memory", dest="n_memory", type=_own_type("reach", "n_memory"),
                        default=None,
                        help="numbers of prompt vectors m, e.g. 1-4 or 1,2,4,8 (default: "
                        "1-5, the paper's; 1-4 with --quick)")
    parser.add_argument("--lengths", type=_own_type("reach", "lengths"), default="auto",
                        help="target lengths, e.g. 2-16 or 2,4,8 (default: auto, until "
                        "nobody is reached twice in a row)")
    parser.add_argument("--targets", type=_own_type("reach", "targets"), default=None,
                        help="random targets per point, 1..4096 (default: 20, the paper's; "
                        "16 with --quick)")
    parser.add_argument("--epochs", type=_own_type("reach", "epochs"), default=3000,
                        help="at most this many full-batch optimiser steps per point, "
                        "1..1000000 (default 3000, --quick 600)")
    parser.add_argument("--patience", type=_own_type("reach", "patience"), default=500,
                        help="stop a target after this many steps without a better accuracy, "
                        "1..1000000 (default 500, --quick 200)")
    parser.add_argument("--precision", type=_own_type("reach", "precision"), default=None,
                        help=_PRECISION_HELP.format(what="headline bound"))
    parser.add_argument("--quick", action="store_true",
                        help=_quick("600 steps, patience 200, m = 1-4, 16 targets (instead "
                                    "of 3000, 500, 1-5, 20): seconds per point"))


def _copy(parser):
    parser.add_argument("--quick", action="store_true",
                        help=_quick("train lengths 5-20, d = 48, 1000 steps, 100 strings "
                                    "per length (instead of 5-50, 64, 5000, 200)"))
    parser.add_argument("--train-min", type=_own_type("copy", "train_min"), default=None,
                        help="shortest training string, 1..1023 (default 5)")
    parser.add_argument("--train-max", type=_own_type("copy", "train_max"), default=None,
                        help="longest training string, at most 1023 (default 50, --quick 20)")
    parser.add_argument("--eval-max", type=_own_type("copy", "eval_max"), default=None,
                        help="longest evaluated string (default 3 x train max; at most "
                        "1023: the model's context holds 2048 positions)")
    parser.add_argument("--steps", type=_own_type("copy", "steps"), default=None,
                        help="mini-batch training steps, 1..1000000 (default 5000, --quick "
                        "1000)")


def _profile(parser):
    parser.add_argument("model", nargs="?", default="default",
                        help=model_option_help())
    parser.add_argument("--texts", default=None,
                        help="a text file, one input per line (default: none, the inputs "
                        "of --inputs)")
    parser.add_argument("--inputs", choices=["default", "repeated-random"], default="default",
                        help="'default': the package's 32 sample passages for a model with a "
                        "tokenizer, induction sequences for the embedded model; "
                        "'repeated-random': the field's induction test, the tokenizer's BOS "
                        "token, --half-length random tokens and the same tokens again, with "
                        "the model's next-token accuracy on each copy (default: default)")
    parser.add_argument("--n-inputs", type=_own_type("profile", "n_inputs"), default=32,
                        help="number of generated inputs (--inputs; not --texts), 1..4096 "
                        "(default: 32)")
    parser.add_argument("--half-length", type=_own_type("profile", "half_length"),
                        default=None,
                        help="random tokens per copy for --inputs repeated-random, 1..4096 "
                        "(default: as many as fit in --max-length)")
    parser.add_argument("--max-length", type=_own_type("profile", "max_length"), default=64,
                        help="truncation length in tokens, 2..8192")
    parser.add_argument("--band", type=_own_type("profile", "band"), default=1,
                        help="half-width of the locality band, 0..8192 (0: the diagonal)")
    parser.add_argument("--n-memory", dest="n_memory", type=_own_type("profile", "n_memory"),
                        default=1,
                        help="prompt vectors m for the reachability geometry, 1..8192 and "
                        "within the model's context")
    parser.add_argument("--tokens", type=_own_type("profile", "tokens"), default=8,
                        help="random tokens after the prompt vectors (geometry), 0..8192 and "
                        "within the model's context")
    parser.add_argument("--precision", type=_own_type("profile", "precision"), default=None,
                        help=_PRECISION_HELP.format(what="summary's bounds"))
    parser.add_argument("--slope", type=_own_type("profile", "slope"), default=None,
                        help="a measured slope (tokens per prompt vector, e.g. of "
                        "'intrinsic-rank reach'), a number in (0, 1e9], to divide the slope "
                        "bounds by (default: none, the ratio column reads –)")
    parser.add_argument("--no-geometry", action="store_true",
                        help="skip the reachability geometry")
    parser.add_argument("--score-measure", choices=["mul", "abs", "conditional"],
                        default="mul",
                        help="the head scores' measure: TransformerLens's 'mul' (share of all "
                        "attention on the pattern) or 'abs' (1 - rounded mean |A - D| n), or "
                        "'conditional' (share over the queries where the pattern names a "
                        "position, pooled over inputs) (default: mul)")
    parser.add_argument("--exclude-bos", action="store_true",
                        help="leave the first key out of the head scores (previous-token, "
                        "duplicate-token, induction), as TransformerLens's exclude_bos "
                        "(default: off)")
    parser.add_argument("--exclude-current-token", action="store_true",
                        help="leave each query's own position out of the head scores, as "
                        "TransformerLens's exclude_current_token (default: off)")


def _lm_geometry(parser):
    parser.add_argument("model", nargs="?", default="smollm2-135m",
                        help=model_option_help(causal=True))
    def own(dest):
        return _own_type("lm-geometry", dest)

    parser.add_argument("--n-memory", dest="n_memory", type=own("n_memory"), default=1,
                        help="prompt vectors m, 1..8192 and within the model's context "
                        "(default 1)")
    parser.add_argument("--tokens", type=own("tokens"), default=8,
                        help="random tokens after the prompt vectors, 0..8192 and within "
                        "the model's context (default 8)")
    parser.add_argument("--prompts", type=own("prompts"), default=None,
                        help="random prompts whose final hidden states span the box, "
                        "1..65536 and within memory (default 256; 64 with --quick)")
    parser.add_argument("--cell-samples", type=own("cell_samples"), default=None,
                        help="Monte Carlo points of the decoder cells, 1..16777216 (2^24: "
                        "hours through a 49,152-token head) (default 131072; 32768 with "
                        "--quick)")
    parser.add_argument("--top", type=own("top"), default=15,
                        help="tokens listed, 1..4096 (default 15)")
    parser.add_argument("--quick", action="store_true",
                        help=_quick("64 prompts, 32768 points (instead of 256, 131072): "
                                    "about a minute on one CPU thread after the load"))


_CORPORA = ("random", "repeated", "prose", "code")


def _corpus_ranks(parser):
    parser.add_argument("model", nargs="?", default="smollm2-135m",
                        help=model_option_help(causal=True)
                        + "; the embedded model reads byte-level texts")
    parser.add_argument("--corpora", type=_own_type("corpus-ranks", "corpora"),
                        default=list(_CORPORA),
                        help=f"comma-separated corpora (default: {','.join(_CORPORA)})")
    parser.add_argument("--n-inputs", type=_own_type("corpus-ranks", "n_inputs"), default=8,
                        help="inputs per corpus, 1..4096 (default: 8)")
    parser.add_argument("--length", type=_own_type("corpus-ranks", "length"), default=64,
                        help="tokens per input, BOS included, 4..8192 and within the "
                        "model's context (default: 64)")
    parser.add_argument("--period", type=_own_type("corpus-ranks", "period"), default=16,
                        help="length of the repeated passage, 1..8192 and below --length "
                        "- 1 (default: 16)")


def _head_ranks(parser):
    parser.add_argument("model", nargs="?", default="smollm2-135m",
                        help=model_option_help(causal=True))
    parser.add_argument("--heads", type=_own_type("head-ranks", "heads"), default=None,
                        help="comma-separated heads such as L18H6,L16H0 (default: 3 induction, "
                        "2 previous-token, 2 sink and 4 drawn heads, chosen by measurement)")
    parser.add_argument("--plant-rank", type=_own_type("head-ranks", "plant_rank"), default=None,
                        help="plant this query rank, 2..4096, in every head and test that "
                        "the sweep finds it (default: none, the heads as trained)")
    parser.add_argument("--corpora", type=_own_type("head-ranks", "corpora"),
                        default=list(_CORPORA),
                        help=f"comma-separated corpora (default: {','.join(_CORPORA)})")
    parser.add_argument("--n-inputs", type=_own_type("head-ranks", "n_inputs"), default=768,
                        help="sequences per corpus, 5..65536 (default: 768)")
    parser.add_argument("--length", type=_own_type("head-ranks", "length"), default=64,
                        help="tokens per sequence, BOS included, 4..4096 (default: 64)")
    parser.add_argument("--rank-grid", type=_own_type("head-ranks", "rank_grid"), default=None,
                        help="query ranks to sweep (default: 1, 2, 4, ... up to the head width)")
    parser.add_argument("--epochs", type=_own_type("head-ranks", "epochs"), default=None,
                        help="epochs per sweep, 1..1000000 (default: 40 from the head's own "
                        "truncations, 150 from a random draw with --plant-rank)")
    parser.add_argument("--lr", type=float, default=None,
                        help="learning rate (default: 1e-3, or 6e-3 with --plant-rank)")


_ENTROPIC = "The Entropic Bound"
_MIN_IP = "Three tokens force exponential feature rank in nonnegative kernel attention"
_REACH = "How many different outputs can a Transformer generate?"

COMMANDS = (
    Command(
        name="sweep", command="sweep", paper=_ENTROPIC,
        help="rank sweep on a teacher task with known r*",
        description="Train a grid of student ranks at once on a teacher task (or your X, "
        "Y with --data) and estimate r* (the smallest rank reaching the noise floor).",
        writes="sweep.json (settings, every rank's risks, r*), sweep.csv (one row per rank) "
        "and sweep.png (risk against rank)",
        add_arguments=_sweep, json_name="sweep"),
    Command(
        name="ladder", command="ladder", paper=_ENTROPIC,
        help="the interpolation ladder B0-B3 on a fixed-operator task",
        description="Fit B0 (fixed operator), B1 (linear QK), B2 (softmax QK) and B3 "
        "(Transformer block) at full rank on one fixed-operator task and compare their "
        "test excess risk.",
        writes="ladder.json and ladder.png (excess risk per rung)",
        add_arguments=_ladder),
    Command(
        name="frontier", command="frontier", paper=_ENTROPIC,
        help="how far r* can be predicted from data before training",
        description="For a grid of r*, fit each teacher's operator by least squares (no "
        "training) and compare the numerical, energy and realised-mixer ranks with the "
        "true r*; softmax teachers also get a recovery student.",
        writes="frontier.json and frontier.png (estimated against true r*)",
        add_arguments=_frontier),
    Command(
        name="min-ip", command="min-ip", paper=_MIN_IP,
        help="Min-IP phase transition of nonnegative kernel attention",
        description="Train normalised nonnegative kernel heads of a grid of feature ranks "
        "(one batched optimisation) on an anchored Min-IP witness family, in-sample at "
        "lengths 3 and 2, with dense softmax attention as the reference; then train on one "
        "codeword pool and test on a disjoint one as the bit width grows. Prints the "
        "tables and transition ranks.",
        writes="min_ip.json and min_ip.png (error against feature rank)",
        add_arguments=_min_ip, json_name="min_ip"),
    Command(
        name="min-ip-law", command="min-ip-law", paper=_MIN_IP,
        help="the Min-IP rank law on every sequence of all m-bit tokens, with controls",
        description="Train kernel heads of feature ranks 1..2^m on every length-3 Min-IP "
        "sequence over all m-bit tokens and measure the smallest rank that solves all of "
        "them, beside length-2, dense and memorisation controls and the exact "
        "constructions. Prints one summary row per m and map; every fit is in the JSON.",
        writes="min_ip_law.json (every fit) and min_ip_law.png (smallest rank against m)",
        add_arguments=_min_ip_law),
    Command(
        name="reach", command="reach", paper=_REACH,
        help="accessibility of random targets by cramming prompt vectors",
        description="Cram random target sequences into m prompt vectors of a frozen causal "
        "LM (the embedded default model unless --model is given), for a grid of m and "
        "target lengths (the paper's sizes by default: m = 1-5, 20 targets per point); fit "
        "n50 per m, the decay past it, the slope of n50 against m, and compare it with the "
        "slope bounds (ball d ln(1 + 2r/eps) / ln|V|, box, cone, box + decoder cells) under "
        "the three precision conventions. Prints the tables.",
        writes="reach.json and reach.png (accessibility against length, per m)",
        add_arguments=_reach),
    Command(
        name="copy", command="copy", paper=_REACH,
        help="copy-task length cliff of a small causal Transformer",
        description="Train a small causal Transformer (learned absolute positions) to copy "
        "random strings with lengths in a training range, then measure greedy exact-match "
        "copying inside and beyond that range and fit where it collapses. Prints the table "
        "and the fitted cliff.",
        writes="copy.json and copy.png (exact-match rate against length)",
        add_arguments=_copy),
    Command(
        name="lm-geometry", command="lm-geometry",
        paper=_REACH,
        help="a real LM's hidden-state geometry, bounds and decoder cells (SmolLM2-135M)",
        description="Measures the reachability geometry of a pretrained causal LM (default "
        "SmolLM2-135M-Instruct): the radius, box and cone of its final hidden states under "
        "random prompts, the bounds at the three precision conventions, and the decoder "
        "cells of its head ranked by their share of the box, with the top tokens decoded.",
        writes="lm_geometry.json and lm_geometry.png (the decoder cells' shares)",
        add_arguments=_lm_geometry),
    Command(
        name="profile", command="profile",
        paper="The Entropic Bound (appendix B: real language models)",
        help="per-head rank profile of a pretrained model (static QK kernel, realised "
        "attention, sinks, locality) and its reachability geometry",
        description="For every layer and head: the static query-key kernel's spectrum and "
        "rank measures, the realised attention matrices' energy rank averaged over inputs, "
        "the mass on the first token (sink), on the most-attended key and on a diagonal "
        "band (locality); then the hidden-state radius and the bounds of \"How many "
        "different outputs can a Transformer generate?\" that apply to the model. Prints "
        "the tables. Runs offline.",
        writes="profile.json, profile.csv (one row per head), profile.png (layer x head "
        "heat maps) and, when head scores were measured, profile_scores.png",
        add_arguments=_profile),
    Command(
        name="corpus-ranks", command="corpus-ranks",
        paper="The Entropic Bound (appendix B: real language models)",
        help="per-head static and realised ranks of a causal LM on random tokens, a "
        "repeated passage, prose and code, and whether the corpora separate them",
        description="Profiles every head of one causal LM (SmolLM2-135M by default) on "
        "four offline corpora of clearly different complexity: uniform random tokens, a "
        "short passage repeated, English prose and Python source, all of the same length. "
        "Reports per corpus the median and interquartile range over heads of the realised "
        "attention energy rank, the model's next-token loss, and whether the corpora "
        "separate the ranks (range of medians against the head spread; Friedman's test).",
        writes="corpus_ranks.json and corpus_ranks.png (energy rank per corpus)",
        add_arguments=_corpus_ranks),
    Command(
        name="head-ranks", command="head-ranks",
        paper="The Entropic Bound (open problem: the ranks of trained models' realised "
        "operators)",
        help="r*_attn of a causal LM's heads by distillation under each head's own rotary or "
        "absolute positions, per corpus, with a planted-rank test",
        description="Reads chosen heads of a causal LM (SmolLM2-135M by default) by hooks: X, "
        "the input of the head's attention, and Y, the head's output. For each head and "
        "corpus (random tokens, repeated random tokens, prose, code) a causal softmax "
        "student with the head's own positions, scale and values sweeps its query rank, and "
        "r*_attn is the smallest rank leaving at most tol of Y's variance unexplained (the "
        "head's floor is 0). With --plant-rank K every head's query is replaced by a sharp "
        "rank-K plant first, and the sweep must find K.",
        writes="head_ranks.json (one record per head and corpus), head_ranks.csv and "
        "head_ranks.png (relative risk against rank per head)",
        add_arguments=_head_ranks),
)
"""Every experiment's command line, in report order (``experiments.REPORT_ORDER``'s)."""
