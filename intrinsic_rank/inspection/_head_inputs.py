"""Token inputs of four corpora, for measuring one head of a causal LM on each.

Uniform random tokens, the field's induction test (random tokens, then the same
tokens again), English prose and Python source; the last two are windows of the
package's offline texts (:func:`~intrinsic_rank.datasets.load_text_corpus`).
"""

import numpy as np

from .._validation import check_int, check_seed, keyed_rng
from ..datasets import load_text_corpus
from ._repeated_tokens import _repeated_random_inputs, ordinary_token_ids

__all__ = ["TOKEN_CORPORA", "corpus_token_ids"]

TOKEN_CORPORA = ("random", "repeated", "prose", "code")
"""The corpora of :func:`corpus_token_ids`."""


def _text_ids(text, tokenizer, vocab):
    """Token ids of a text: the tokenizer's, or UTF-8 bytes modulo ``vocab`` without one."""
    if tokenizer is None:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) % vocab
    return np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


def _window_starts(n_starts, n_inputs, rng):
    """``n_inputs`` window starts: every start once, in a random order, before any repeats."""
    rounds = -(-n_inputs // n_starts)
    return np.concatenate([rng.permutation(n_starts) for _ in range(rounds)])[:n_inputs]


def _text_windows(corpus, tokenizer, vocab, n_inputs, body, seed):
    text = _text_ids(load_text_corpus(corpus), tokenizer, vocab)
    n_starts = len(text) - body + 1
    if n_starts < 1:
        raise ValueError(f"the {corpus} corpus has {len(text)} tokens, fewer than the "
                         f"{body} of one input: ask for shorter inputs")
    starts = _window_starts(n_starts, n_inputs, keyed_rng(seed, 0))
    return text[starts[:, None] + np.arange(body)]


def _repeated(tokenizer, vocab, n_inputs, length, body, seed):
    ids, _, _ = _repeated_random_inputs(tokenizer, vocab, n_inputs, body // 2, length, seed)
    if body % 2:  # one more ordinary token after the second copy fills the length
        pool = ordinary_token_ids(tokenizer, vocab)
        ids = np.concatenate([ids, keyed_rng(seed, 1).choice(pool, (n_inputs, 1))], axis=1)
    return ids


def corpus_token_ids(corpus, tokenizer, vocab, *, n_inputs, length, random_state=0):
    """Token ids ``(n_inputs, length)`` of one corpus, the tokenizer's BOS token first.

    Parameters
    ----------
    corpus : {"random", "repeated", "prose", "code"}
        * ``"random"``: uniform random tokens of the ordinary vocabulary
          (:func:`ordinary_token_ids`: special tokens left out);
        * ``"repeated"``: the field's induction test, ``k`` distinct random
          ordinary tokens then the same ``k`` again, ``k = (length - 1) // 2``
          after a BOS (``length // 2`` without one); when that leaves one
          position over, it ends with one more random ordinary token;
        * ``"prose"``, ``"code"``: windows of consecutive tokens of the
          tokenized :func:`~intrinsic_rank.datasets.load_text_corpus`. The
          texts are short (about 700 SmolLM2 tokens each), so the windows
          overlap: each input starts at a different token offset (every
          possible start once, in a random order, before any start is used
          again). Inputs split into training and held-out sets therefore share
          text.
    tokenizer : transformers tokenizer or None
        ``None`` (a model without one, such as the embedded one): no BOS token,
        and the texts become their UTF-8 bytes modulo ``vocab``.
    vocab : int
        The model's vocabulary size.
    n_inputs, length : int
        Inputs, and tokens per input (BOS included).
    random_state : int, default=0
        Seed of the random tokens and of the window order.

    Returns
    -------
    ids : ndarray of shape (n_inputs, length), int64

    Raises
    ------
    ValueError
        For an unknown corpus, a length that leaves no room for a copy of
        ``"repeated"``, more distinct tokens than the ordinary vocabulary
        holds, or inputs longer than a text.

    Examples
    --------
    >>> ids = corpus_token_ids("repeated", None, 64, n_inputs=2, length=9)
    >>> ids.shape, bool((ids[:, :4] == ids[:, 4:8]).all())
    ((2, 9), True)
    >>> from intrinsic_rank.datasets import load_text_corpus
    >>> text = np.frombuffer(load_text_corpus("prose").encode(), np.uint8) % 64
    >>> windows = corpus_token_ids("prose", None, 64, n_inputs=3, length=5)
    >>> [any((text[s:s + 5] == w).all() for s in range(len(text) - 4)) for w in windows]
    [True, True, True]
    """
    if corpus not in TOKEN_CORPORA:
        raise ValueError(f"corpus must be one of {', '.join(map(repr, TOKEN_CORPORA))}; got "
                         f"{corpus!r}")
    vocab = check_int(vocab, "vocab")
    n_inputs = check_int(n_inputs, "n_inputs")
    seed = check_seed(random_state)
    bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
    length = check_int(length, "length", minimum=1 + int(bos is not None))
    body = length - int(bos is not None)
    if corpus == "repeated":
        if body < 2:
            raise ValueError(f"length={length} leaves no room for two copies of a token "
                             "(the repeated corpus needs at least 2 tokens after BOS)")
        return _repeated(tokenizer, vocab, n_inputs, length, body, seed).astype(np.int64)
    if corpus == "random":
        ids = np.random.default_rng(seed).choice(ordinary_token_ids(tokenizer, vocab),
                                                 size=(n_inputs, body))
    else:
        ids = _text_windows(corpus, tokenizer, vocab, n_inputs, body, seed)
    if bos is not None:
        ids = np.concatenate([np.full((n_inputs, 1), bos), ids], axis=1)
    return ids.astype(np.int64)
