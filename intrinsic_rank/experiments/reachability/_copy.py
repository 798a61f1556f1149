"""The copy task: a Transformer copies strings up to the trained length, then falls off a cliff.

"How many different outputs can a Transformer generate?" reports that a model trained to copy
strings of length up to 50 fails *abruptly* beyond a threshold, not
gradually. :func:`copy_length_cliff` reproduces this: it trains a
:class:`~intrinsic_rank.nn.TinyCausalLM` (learned absolute positions) on
:func:`~intrinsic_rank.datasets.make_copy_task` sequences
``<bos> s <sep> s <eos>`` with string lengths uniform in the training range,
measures greedy exact-match copying of fresh strings at lengths inside and
beyond that range, and fits the cliff with
:func:`~intrinsic_rank.experiments.fit_cliff`. :func:`plot_copy_cliff` draws it.

One module, though it is longer than most: the training, the greedy decoding,
the scoring and the command all read the one token layout of the copy task.

How copies are scored
---------------------
A copy of ``s`` (length ``n``) is the greedy continuation of the prompt
``<bos> s <sep>``: ``n`` tokens, each the argmax of the model's next-token
logits given the prompt and the tokens decoded so far. It is *exact* when the
``n`` decoded tokens equal ``s``; the following ``<eos>`` is **not** required
(the cliff is about copying the content), but the fraction that is exact *and*
then emits ``<eos>`` is recorded as ``exact_match_eos``.

The scores are computed from one teacher-forced forward pass over
``<bos> s <sep> s`` instead of ``n`` autoregressive passes, which is exact, not
an approximation. Proof: the model is causal, so its logits at position ``t``
depend only on the tokens at positions ``<= t``. If the teacher-forced argmax
equals the true next token at every copy position, then by induction on ``k``
the greedy decoder's ``k``-th input prefix equals the teacher-forced one and it
emits the same (correct) token; conversely, if greedy decoding is exact, every
prefix it sees is the teacher-forced prefix, so every teacher-forced argmax is
correct. The same argument shows that the greedy decoder's first error is at
the first position where the teacher-forced argmax is wrong, so
``correct_prefix`` (the number of tokens copied before the first error) is
exact too. :func:`greedy_copy` is the honest autoregressive decoder;
``tests/experiments/reachability/test_copy.py`` checks that both agree on a trained model.
``token_accuracy`` is the teacher-forced one: the fraction of copy positions
whose next token is predicted correctly *given a correct prefix*.

Why the cliff is at the training length
---------------------------------------
A copy of length ``n`` puts ``<sep>`` at position ``n + 1`` and needs
positions up to ``2 n + 1``. Training strings of length ``<= n_max`` never
show the model ``<sep>`` beyond position ``n_max + 1`` nor any token beyond
position ``2 n_max + 1``; those position embeddings keep their random
initialisation (shrunk by weight decay). A string one token longer than
``n_max`` therefore already meets both, and in the measurements exact match
drops from ~1 to 0 between ``n_max`` and ``n_max + 1``, while teacher-forced
token accuracy falls to 0.1-0.5 there and to near chance (1/28) a few tokens
later. The model has learned to copy *at the positions it was trained on*,
not a length-independent rule.

What was measured
-----------------
See ``docs/copy_task.md`` for the numbers of the quick and full settings.
"""

import time

import numpy as np
import torch
from sklearn.utils import Bunch

from ..._validation import check_device, check_int, check_real, torch_rng
from ...datasets import COPY_SPECIAL_TOKENS, make_copy_task
from ...nn import TinyCausalLM, train_causal_lm
from ._curves import fit_cliff
from ..runner import jsonable, pyplot, save_figure
from ..runner import Verdict, grade, is_finite, number_text, one_plot
from . import COPY_SETTINGS, MAX_COPY_CONTEXT, MAX_EVAL_LENGTH  # declared with the experiment

__all__ = [
    "CLIFF_COLUMNS",
    "COPY_COLUMNS",
    "COPY_SETTINGS",
    "copy_length_cliff",
    "default_copy_lengths",
    "greedy_copy",
    "plot_copy_cliff",
    "score_copies",
]

_EVAL_CHUNK = 256  # strings per forward pass when scoring (bounds memory)


def _check_train_lengths(train_lengths):
    try:
        low, high = train_lengths
    except (TypeError, ValueError):
        raise ValueError(
            f"train_lengths must be a pair (min, max) of string lengths; got {train_lengths!r}"
        ) from None
    low = check_int(low, "train_lengths[0] (the shortest training length)")
    high = check_int(high, "train_lengths[1] (the longest training length)")
    if low > high:
        raise ValueError(
            f"train_lengths must have min <= max; got train_lengths=({low}, {high})"
        )
    return low, high


def default_copy_lengths(train_min, train_max, eval_max=None):
    """Default evaluation lengths: across the training range and far beyond it.

    Eight lengths spread over ``train_min .. train_max``, every length of
    ``train_max + 1 .. train_max + 4`` (the cliff is expected right there, and
    one-token steps resolve its width), then eight lengths spread up to
    ``eval_max``.

    Parameters
    ----------
    train_min, train_max : int
        The training range of string lengths.
    eval_max : int or None, default=None
        Longest evaluation length; ``None`` means ``3 * train_max``. Must be
        ``>= train_max``.

    Returns
    -------
    lengths : list of int
        Sorted, distinct.

    Examples
    --------
    >>> default_copy_lengths(5, 20)
    [5, 7, 9, 11, 14, 16, 18, 20, 21, 22, 23, 24, 28, 33, 38, 42, 46, 51, 56, 60]
    """
    train_min, train_max = _check_train_lengths((train_min, train_max))
    eval_max = 3 * train_max if eval_max is None else check_int(eval_max, "eval_max")
    if eval_max < train_max:
        raise ValueError(
            f"eval_max must be >= the longest training length {train_max}; got {eval_max}"
        )
    inside = np.linspace(train_min, train_max, 8)
    edge = np.arange(train_max + 1, min(train_max + 4, eval_max) + 1)
    beyond = np.linspace(min(train_max + 4, eval_max), eval_max, 9)[1:]
    lengths = np.unique(np.rint(np.concatenate([inside, edge, beyond])).astype(int))
    return [int(n) for n in lengths]


def _check_eval_lengths(eval_lengths):
    try:
        lengths = list(eval_lengths)
    except TypeError:
        raise ValueError(
            f"eval_lengths must be a sequence of string lengths; got {eval_lengths!r}"
        ) from None
    lengths = [check_int(n, "every entry of eval_lengths") for n in lengths]
    if len(set(lengths)) < 2:
        raise ValueError(
            f"eval_lengths must hold at least 2 distinct lengths; got {eval_lengths!r}"
        )
    return sorted(set(lengths))


def _model_device(model):
    return next(model.parameters()).device


def score_copies(model, strings):
    """Greedy copy scores of equal-length strings, from one teacher-forced pass.

    Exact for greedy decoding (see the module docstring for the proof): a
    string is copied exactly iff the teacher-forced argmax is right at every
    copy position, and greedy decoding's first error is the first wrong
    teacher-forced argmax.

    Parameters
    ----------
    model : TinyCausalLM
        A causal LM trained on :func:`~intrinsic_rank.datasets.make_copy_task`
        sequences; its context must hold ``2 * n + 2`` positions.
    strings : array-like of int, shape (n_strings, n)
        Content tokens (ids ``>= 4``) of the strings to copy.

    Returns
    -------
    scores : dict of ndarray, each of shape (n_strings,)
        ``exact`` (bool: the ``n`` greedy tokens equal the string),
        ``exact_eos`` (bool: exact and then ``<eos>``), ``token_accuracy``
        (fraction of the ``n`` copy positions predicted right given a correct
        prefix), ``correct_prefix`` (tokens copied before the first greedy
        error, ``0 .. n``).

    Examples
    --------
    >>> import torch
    >>> lm = TinyCausalLM(vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_length=10)
    >>> scores = score_copies(lm, [[4, 5, 6], [7, 7, 4]])
    >>> sorted(scores), scores["correct_prefix"].shape
    (['correct_prefix', 'exact', 'exact_eos', 'token_accuracy'], (2,))
    """
    strings = torch.as_tensor(np.asarray(strings), dtype=torch.long)
    if strings.ndim != 2 or strings.shape[1] < 1:
        raise ValueError(
            f"strings must be 2-D (n_strings, n >= 1); got shape {tuple(strings.shape)}"
        )
    tok = COPY_SPECIAL_TOKENS
    n_strings, n = strings.shape
    bos = torch.full((n_strings, 1), tok["bos"], dtype=torch.long)
    sep = torch.full((n_strings, 1), tok["sep"], dtype=torch.long)
    eos = torch.full((n_strings, 1), tok["eos"], dtype=torch.long)
    inputs = torch.cat([bos, strings, sep, strings], dim=1)  # 2n + 2 positions
    targets = torch.cat([strings, eos], dim=1)  # predicted at positions n+1 .. 2n+1
    device = _model_device(model)
    predicted = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for chunk in torch.split(inputs, _EVAL_CHUNK):
            logits = model(chunk.to(device))[:, n + 1:]
            predicted.append(logits.argmax(-1).cpu())
    model.train(was_training)
    correct = torch.cat(predicted) == targets
    content = correct[:, :n]
    # index of the first wrong position, or n when there is none
    first_error = torch.where(content.all(1), n, (~content).int().argmax(1))
    exact = content.all(1)
    return {
        "exact": exact.numpy(),
        "exact_eos": (exact & correct[:, n]).numpy(),
        "token_accuracy": content.double().mean(1).numpy(),
        "correct_prefix": first_error.numpy().astype(np.int64),
    }


def greedy_copy(model, strings, n_tokens=None):
    """Greedy autoregressive continuation of ``<bos> s <sep>`` (no shortcuts, no cache).

    Each step runs the model on the whole prefix and appends the argmax token.
    :func:`copy_length_cliff` uses the equivalent, much cheaper
    :func:`score_copies`; this decoder is the reference it is checked against.

    Parameters
    ----------
    model : TinyCausalLM
    strings : array-like of int, shape (n_strings, n)
    n_tokens : int or None, default=None
        Tokens to decode; ``None`` means ``n + 1`` (the copy and its ``<eos>``).

    Returns
    -------
    decoded : ndarray of shape (n_strings, n_tokens), dtype int64

    Examples
    --------
    >>> lm = TinyCausalLM(vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_length=10)
    >>> greedy_copy(lm, [[4, 5, 6]]).shape
    (1, 4)
    """
    strings = torch.as_tensor(np.asarray(strings), dtype=torch.long)
    if strings.ndim != 2 or strings.shape[1] < 1:
        raise ValueError(
            f"strings must be 2-D (n_strings, n >= 1); got shape {tuple(strings.shape)}"
        )
    n_strings, n = strings.shape
    n_tokens = n + 1 if n_tokens is None else check_int(n_tokens, "n_tokens")
    tok = COPY_SPECIAL_TOKENS
    device = _model_device(model)
    ids = torch.cat([
        torch.full((n_strings, 1), tok["bos"], dtype=torch.long), strings,
        torch.full((n_strings, 1), tok["sep"], dtype=torch.long),
    ], dim=1).to(device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for _ in range(n_tokens):
            next_token = model(ids)[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, next_token], dim=1)
    model.train(was_training)
    return ids[:, n + 2:].cpu().numpy()


def _eval_strings(n_eval, length, vocab_size, random_state):
    # One stream per (seed, length): a length's strings do not depend on the
    # rest of the grid, and never share the training stream.
    rng = np.random.RandomState([random_state, 1, length])
    _, _, info = make_copy_task(n_eval, length, length, vocab_size, random_state=rng,
                                return_info=True)
    return info.strings


def _loss_summary(losses):
    window = max(1, len(losses) // 20)
    return {
        "initial": float(np.mean(losses[:window])),
        "final": float(np.mean(losses[-window:])),
        "min": float(np.min(losses)),
        "window": int(window),
    }


def copy_length_cliff(
    train_lengths=None,
    eval_lengths=None,
    eval_max=None,
    vocab_size=32,
    d_model=None,
    n_layers=2,
    n_heads=4,
    n_steps=None,
    batch_size=None,
    lr=None,
    n_eval=None,
    quick=False,
    random_state=0,
    progress=False,
    device="cpu",
):
    """Train a small causal LM to copy, then measure exact match against string length.

    "How many different outputs can a Transformer generate?": a model trained to copy
    strings of length up to
    50 fails abruptly beyond a threshold, not gradually. A
    :class:`~intrinsic_rank.nn.TinyCausalLM` (pre-LN, learned absolute
    positions; context ``2 n + 2`` for the longest evaluated or trained length
    ``n``) is trained with :func:`~intrinsic_rank.nn.train_causal_lm` (AdamW,
    ``min(100, n_steps // 10)`` warm-up steps, then cosine decay) on
    fresh :func:`~intrinsic_rank.datasets.make_copy_task` batches whose string
    lengths are uniform in ``train_lengths``, scored on the copy only. Then, at
    each evaluation length, ``n_eval`` fresh strings are copied greedily (see
    the module docstring: exact match does not require ``<eos>``, and the
    teacher-forced scoring of :func:`score_copies` is provably identical to
    greedy decoding) and the cliff is fitted with
    :func:`~intrinsic_rank.experiments.fit_cliff`.

    Parameters
    ----------
    train_lengths : (int, int) or None, default=None
        ``(min, max)`` string length of training; ``None`` means ``(5, 50)``
        (``(5, 20)`` when ``quick``).
    eval_lengths : sequence of int or None, default=None
        String lengths to evaluate (at least 2 distinct); ``None`` means
        :func:`default_copy_lengths` up to ``eval_max``.
    eval_max : int or None, default=None
        Longest length of the default grid; ``None`` means three times the
        longest training length. Only with ``eval_lengths=None``.
    vocab_size : int, default=32
        Including the 4 special tokens (28 content tokens by default).
    d_model : int or None, default=None
        Model width; ``None`` means 64 (48 when ``quick``).
    n_layers, n_heads : int, default=2, 4
    n_steps, batch_size, lr : int, int, float or None
        Training budget; ``None`` means the entry of :data:`COPY_SETTINGS`
        (full: 5000 steps of 64 at ``lr = 1e-3``; quick: 1000 of 64 at 3e-3).
    n_eval : int or None, default=None
        Strings per evaluation length; ``None`` means 200 (100 when ``quick``).
    quick : bool, default=False
        Use the ``"quick"`` entry of :data:`COPY_SETTINGS` for the arguments
        left at ``None`` (explicit values win).
    random_state : int, default=0
        Seeds the initial weights (torch, without touching the global torch
        generator), the training stream and the evaluation strings (one
        stream per length, disjoint from training's).
    progress : bool, default=False
        Show a training progress bar.
    device : str or torch.device, default="cpu"
        Where the model trains and is scored (initialised on the CPU first, so
        a seed gives the same initial weights on every device).

    Returns
    -------
    result : Bunch
        ``records``: one dict per evaluation length with ``length``,
        ``in_training_range``, ``exact_match`` (fraction copied exactly),
        ``exact_match_eos`` (exactly and then ``<eos>``), ``token_accuracy``
        (teacher-forced), ``correct_prefix`` (mean tokens copied before the
        first greedy error) and ``n_eval``. ``cliff``: the dict of
        :func:`~intrinsic_rank.experiments.fit_cliff` on exact match.
        ``losses``: training loss per step; ``training``: its ``initial`` and
        ``final`` (means over the first and last 5% of steps) and ``min``,
        plus ``seconds``. ``model``: the trained model. ``config``,
        ``seconds`` (whole run), ``eval_seconds``.

    Examples
    --------
    >>> result = copy_length_cliff(train_lengths=(2, 4), eval_lengths=[2, 8],
    ...                            d_model=16, n_steps=20, n_eval=8)
    >>> [rec["length"] for rec in result.records], result.records[1]["in_training_range"]
    ([2, 8], False)
    """
    start = time.perf_counter()
    settings = COPY_SETTINGS["quick" if quick else "full"]

    def pick(value, name):
        return settings[name] if value is None else value

    train_min, train_max = _check_train_lengths(pick(train_lengths, "train_lengths"))
    if eval_lengths is None:
        lengths = default_copy_lengths(train_min, train_max, eval_max)
    elif eval_max is not None:
        raise ValueError("give eval_lengths or eval_max, not both")
    else:
        lengths = _check_eval_lengths(eval_lengths)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=len(COPY_SPECIAL_TOKENS) + 2)
    d_model = check_int(pick(d_model, "d_model"), "d_model")
    n_layers = check_int(n_layers, "n_layers")
    n_heads = check_int(n_heads, "n_heads")
    if d_model % n_heads:
        raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
    n_steps = check_int(pick(n_steps, "n_steps"), "n_steps")
    batch_size = check_int(pick(batch_size, "batch_size"), "batch_size")
    lr = check_real(pick(lr, "lr"), "lr", 0.0, low_open=True)
    n_eval = check_int(pick(n_eval, "n_eval"), "n_eval")
    random_state = check_int(random_state, "random_state", minimum=0)
    device = check_device(device)

    max_length = 2 * max(max(lengths), train_max) + 2
    with torch_rng(random_state):
        model = TinyCausalLM(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                             n_heads=n_heads, max_length=max_length)
    model = model.to(device)
    tic = time.perf_counter()
    losses = _train_copier(model, train_min, train_max, vocab_size, n_steps, batch_size, lr,
                           random_state, progress)
    train_seconds = time.perf_counter() - tic
    tic = time.perf_counter()
    records = [_copy_record(model, length, train_min, train_max, n_eval, vocab_size,
                            random_state) for length in lengths]
    eval_seconds = time.perf_counter() - tic
    cliff = fit_cliff([r["length"] for r in records], [r["exact_match"] for r in records])
    config = dict(
        train_lengths=[train_min, train_max], eval_lengths=[int(n) for n in lengths],
        vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
        max_length=max_length, n_steps=n_steps, batch_size=batch_size, lr=lr,
        n_eval=n_eval, quick=bool(quick), random_state=random_state,
    )
    return Bunch(
        records=records,
        cliff=cliff,
        losses=losses,
        training=dict(_loss_summary(losses), seconds=train_seconds),
        model=model,
        config=config,
        eval_seconds=eval_seconds,
        seconds=time.perf_counter() - start,
    )


def _train_copier(model, train_min, train_max, vocab_size, n_steps, batch_size, lr,
                  random_state, progress):
    """Train ``model`` on copy strings of the training lengths; the loss of every step."""

    def sample_batch(size, rng):
        X, Y, info = make_copy_task(size, train_min, train_max, vocab_size, random_state=rng,
                                    return_info=True)
        width = 2 * int(info.lengths.max()) + 2  # drop all-padding columns
        return X[:, :width], Y[:, :width]

    return train_causal_lm(model, sample_batch, n_steps, batch_size=batch_size, lr=lr,
                           warmup=min(100, max(1, n_steps // 10)),
                           random_state=random_state, progress=progress)


def _copy_record(model, length, train_min, train_max, n_eval, vocab_size, random_state):
    """How well the model copies ``n_eval`` fresh strings of one length."""
    scores = score_copies(model, _eval_strings(n_eval, length, vocab_size, random_state))
    return {
        "length": int(length),
        "in_training_range": bool(train_min <= length <= train_max),
        "exact_match": float(scores["exact"].mean()),
        "exact_match_eos": float(scores["exact_eos"].mean()),
        "token_accuracy": float(scores["token_accuracy"].mean()),
        "correct_prefix": float(scores["correct_prefix"].mean()),
        "n_eval": int(n_eval),
    }


def plot_copy_cliff(result, path=None):
    """Plot exact match and token accuracy against string length, with the cliff fit.

    Left: exact match and (teacher-forced) token accuracy per evaluation
    length, the training range shaded, the fitted logistic of
    :func:`~intrinsic_rank.experiments.fit_cliff` and its midpoint. Right: the
    training loss.

    Parameters
    ----------
    result : Bunch
        The output of :func:`copy_length_cliff`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    records, cfg, cliff = result.records, result.config, result.cliff
    lengths = np.array([r["length"] for r in records])
    exact = np.array([r["exact_match"] for r in records])
    token = np.array([r["token_accuracy"] for r in records])
    low, high = cfg["train_lengths"]
    fig, (ax, ax_loss) = plt.subplots(1, 2, figsize=(12, 5.2),
                                      gridspec_kw={"width_ratios": [2.2, 1]})
    ax.axvspan(low, high, color="tab:green", alpha=0.12,
               label=f"training lengths {low}-{high}")
    ax.plot(lengths, exact, "o-", color="tab:blue", label="exact match (greedy copy)")
    ax.plot(lengths, token, "s--", color="tab:orange", markersize=4,
            label="token accuracy (teacher-forced)")
    if cliff["bracketed"]:
        grid = np.linspace(lengths.min(), lengths.max(), 400)
        fitted = 1 / (1 + np.exp(np.clip((grid - cliff["midpoint"]) / cliff["scale"], -50, 50)))
        ax.plot(grid, fitted, ":", color="black", linewidth=1.2,
                label=f"logistic fit (width {cliff['scale']:.2g})")
        ax.axvline(cliff["midpoint"], color="tab:red", linewidth=1, linestyle="--")
        ax.annotate(f"midpoint {cliff['midpoint']:.1f}", (cliff["midpoint"], 0.5),
                    xytext=(8, 0), textcoords="offset points", color="tab:red",
                    va="center", backgroundcolor="white")
    chance = 1 / (cfg["vocab_size"] - len(COPY_SPECIAL_TOKENS))
    ax.axhline(chance, color="tab:gray", linewidth=0.8, linestyle=":",
               label=f"chance per token (1/{cfg['vocab_size'] - len(COPY_SPECIAL_TOKENS)})")
    ax.set_xlabel("string length n")
    ax.set_ylabel("fraction")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(
        f"Copy task: d = {cfg['d_model']}, {cfg['n_layers']} layers, "
        f"{cfg['n_steps']} steps, {cfg['n_eval']} strings per length"
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=8,
              frameon=False)
    ax.grid(alpha=0.3)
    steps = np.arange(1, len(result.losses) + 1)
    ax_loss.plot(steps, result.losses, color="tab:gray", linewidth=0.6)
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("cross-entropy on the copy")
    ax_loss.set_title("training loss")
    ax_loss.grid(alpha=0.3, which="both")
    return save_figure(fig, path)


# -- the experiment: ``copy`` (the same name as piece and command) ---------------------

COPY_COLUMNS = ["length", "in_training_range", "exact_match", "token_accuracy",
                "correct_prefix"]
"""Columns of the copy table, printed by the command and shown in the reproduce report."""

CLIFF_COLUMNS = ["midpoint", "scale", "sharpness", "last_high_length", "first_low_length",
                 "r2", "bracketed"]
"""Columns of the fitted-cliff table (one row: the dict of :func:`fit_cliff`)."""


def _run(settings, *, random_state, progress, device):
    """One :func:`copy_length_cliff`; the trained model is left out of the result."""
    result = copy_length_cliff(random_state=random_state, progress=progress, device=device,
                               **settings)
    result.pop("model")
    return jsonable(dict(result))


def _tables(result):
    low, high = result["config"]["train_lengths"]
    return [(f"greedy copy of {result['config']['n_eval']} fresh strings per length "
             f"(trained on lengths {low}-{high})", result["records"], COPY_COLUMNS),
            ("the fitted cliff (logistic in length)", [result["cliff"]], CLIFF_COLUMNS)]


EXACT = 0.95
"""A length is copied when at least this share of its strings is copied exactly, and fails
when at most ``1 - EXACT``: the paper's "perfect copy, then total failure" with 5% allowed for
a training shortfall (the same 0.95 / 0.05 as :func:`fit_cliff`'s ``last_high_length`` and
``first_low_length``)."""


def _verdicts(result):
    """Copies inside the trained range; fails abruptly past it.

    The claims are the paper's ("How many different outputs can a Transformer
    generate?", Meyer, Michelessa, Chaux and Tan, ICML 2026, arXiv 2605.22223:
    the copy task and its explanation of empirical failures: perfect copy up to
    a length, then total failure, not a gradual decline).
    Rules, fixed before any run: **copies** -- exact match >= 0.95
    (:data:`EXACT`) at every trained length agrees, at some partly; **abrupt
    failure** -- exact match falls from >= 0.95 to <= 0.05 between two
    evaluated lengths one token apart (a gradual decline fails this), and the
    last length copied is the longest trained one or beyond (a collapse inside
    the range fails this): both agree, one partly, none or no fall through 1/2
    does not agree.
    """
    low, high = result["config"]["train_lengths"]
    inside = [rec["exact_match"] for rec in result["records"] if rec["in_training_range"]]
    verdicts = []
    if inside:
        ok = sum(e >= EXACT for e in inside)
        verdicts.append(Verdict(
            f"a model trained to copy strings up to length {high} copies them",
            f"exact match >= {number_text(min(inside))} at every trained length ({low}-{high}); "
            f"{ok} of {len(inside)} evaluated trained lengths at >= {EXACT:g}",
            grade(ok, len(inside)),
            f"exact match >= {EXACT:g} (perfect, up to a 5% training shortfall) at every "
            "trained length agrees, at some partly",
        ))
    cliff = result["cliff"]
    if not cliff["bracketed"]:
        verdicts.append(Verdict(
            "copying fails abruptly past the training length, not gradually",
            "exact match never falls through 1/2 over the lengths tried",
            "does not agree", "no cliff to fit",
        ))
        return verdicts
    last, first = cliff["last_high_length"], cliff["first_low_length"]
    tried = sorted(rec["length"] for rec in result["records"])
    between = [n for n in tried if is_finite(last) and is_finite(first) and last < n < first]
    sharp = is_finite(last) and is_finite(first) and first - last == 1 and not between
    past = is_finite(last) and last >= high
    verdicts.append(Verdict(
        "copying fails abruptly past the training length, not gradually",
        f"exact match falls through 1/2 at length {number_text(cliff['midpoint'])} (logistic "
        f"width {number_text(cliff['scale'])} tokens); last length >= {EXACT:g}: "
        f"{number_text(last)}, first <= {1 - EXACT:.2g}: {number_text(first)}",
        grade(sharp + past, 2),
        f"abrupt: from >= {EXACT:g} to <= {1 - EXACT:.2g} between two lengths one token apart "
        f"({'yes' if sharp else 'no'}); past the training length: the last length copied is "
        f"{high} or more ({'yes' if past else 'no'}); both agree, one partly",
    ))
    return verdicts


_plot = one_plot(plot_copy_cliff, "copy.png")


def _prepare(settings, folder):
    """The command's settings: ``--train-min`` and ``--train-max`` make ``train_lengths``."""
    settings["train_lengths"] = [settings.pop("train_min"), settings.pop("train_max")]
    return settings


def _check(settings):
    """Refuse train/eval lengths whose copy needs more than :data:`MAX_COPY_CONTEXT` positions."""
    preset = COPY_SETTINGS["quick" if settings.get("quick") else "full"]
    train_lengths = settings.get("train_lengths") or preset["train_lengths"]
    train_max = int(train_lengths[1])
    eval_max = settings.get("eval_max")
    longest = max(train_max, 3 * train_max if eval_max is None else int(eval_max))
    if 2 * longest + 2 > MAX_COPY_CONTEXT:
        which = ("--eval-max" if eval_max is not None and int(eval_max) >= train_max
                 else "--train-max")
        raise ValueError(
            f"{which}: a string of {longest} tokens needs a context of 2 x {longest} + 2 = "
            f"{2 * longest + 2} positions, more than the copy model's {MAX_COPY_CONTEXT}; "
            f"keep the longest evaluated string (default 3 x --train-max) at most "
            f"{MAX_EVAL_LENGTH}")


def _summary(result):
    cfg, cliff, training = result["config"], result["cliff"], result["training"]
    low, high = cfg["train_lengths"]
    lines = [
        f"Copy task: a causal Transformer (d = {cfg['d_model']}, {cfg['n_layers']} layers, "
        f"{cfg['n_heads']} heads, learned absolute positions) trained for {cfg['n_steps']} "
        f"steps of {cfg['batch_size']} (lr {cfg['lr']:g}) to copy random strings of "
        f"{low}-{high} tokens (vocabulary of {cfg['vocab_size']} ids, "
        f"{len(COPY_SPECIAL_TOKENS)} of them special; loss {training['initial']:.3g} -> "
        f"{training['final']:.3g}); then {cfg['n_eval']} fresh strings per length are copied "
        f"greedily. Exact match: all tokens right (<eos> not required); token accuracy: "
        f"teacher-forced. Seed {cfg['random_state']}."
    ]
    if cliff["bracketed"]:
        lines.append(
            f"Exact match falls through 1/2 at length {cliff['midpoint']:.1f} (logistic "
            f"width {cliff['scale']:.2g} tokens, sharpness width/midpoint "
            f"{cliff['sharpness']:.2g}); the last length with exact match >= 0.95 is "
            f"{cliff['last_high_length']:g} and the first with <= 0.05 is "
            f"{cliff['first_low_length']:g}."
        )
    else:
        lines.append("Exact match never falls through 1/2 over these lengths: no cliff fitted.")
    lines.append(f"{result['seconds']:.1f} s (training {training['seconds']:.1f} s)")
    return lines


def _saved(result):
    """The command's ``copy.json``: records, config, cliff, training summary and time."""
    return {key: result[key] for key in ("records", "config", "cliff", "training", "seconds")}
