"""Token inputs of four corpora, for measuring one head of a causal LM on each.

Uniform random tokens, the field's induction test (random tokens, then the same
tokens again), English prose and Python source; the last two are the running
Python's standard library (:func:`~intrinsic_rank.datasets.stdlib_documents`):
its docstrings and comments, and its modules, split by file so that held-out
inputs share no text with training ones.
"""

import numpy as np

from .._validation import check_int, check_seed, keyed_rng, keyed_seed
from ..datasets import STDLIB_SPLITS, stdlib_corpus_record, stdlib_documents
from ._repeated_tokens import _repeated_random_inputs, ordinary_token_ids

__all__ = ["TOKEN_CORPORA", "corpus_record", "corpus_token_ids"]

TOKEN_CORPORA = ("random", "repeated", "prose", "code")
"""The corpora of :func:`corpus_token_ids`."""

_TEXT_CORPORA = ("prose", "code")
_SPLIT_KEYS = {"validation": 1, "test": 2}  # "train" keeps the seed itself
_SEPARATOR = "\n\n"
_DESCRIPTIONS = {
    "random": "uniform random tokens of the ordinary vocabulary (special tokens left out)",
    "repeated": "the induction test: k distinct random ordinary tokens, then the same k "
                "again",
}


def _split_seed(seed, split):
    """The seed of one split's random draws: ``seed`` for train, keyed for the others."""
    return seed if split == "train" else keyed_seed(seed, _SPLIT_KEYS[split])


def _separator_ids(tokenizer):
    ids = list(tokenizer(_SEPARATOR, add_special_tokens=False)["input_ids"])
    if not ids:
        raise ValueError("the tokenizer gives no token for a blank line, which separates "
                         "the documents of the prose and code corpora")
    return ids


def _text_windows(corpus, split, tokenizer, n_inputs, body, seed):
    """``n_inputs`` non-overlapping windows of ``body`` tokens of one split's documents."""
    documents = stdlib_documents(corpus, split)
    needed = n_inputs * body
    separator = _separator_ids(tokenizer)
    stream, n_tokens = [], 0
    for index in keyed_rng(seed, 0).permutation(len(documents)):
        if n_tokens >= needed:
            break
        ids = tokenizer(documents[index][1], add_special_tokens=False)["input_ids"]
        for piece in (separator, ids) if stream else (ids,):
            stream.append(np.asarray(piece, dtype=np.int64))
            n_tokens += len(piece)
    if n_tokens < needed:
        raise ValueError(f"the {corpus} corpus's {split} split has {n_tokens} tokens "
                         f"({len(documents)} documents), fewer than the {n_inputs} x "
                         f"{body} = {needed} asked: ask for fewer or shorter inputs")
    return np.concatenate(stream)[:needed].reshape(n_inputs, body)


def _repeated(tokenizer, vocab, n_inputs, length, body, seed):
    ids, _, _ = _repeated_random_inputs(tokenizer, vocab, n_inputs, body // 2, length, seed)
    if body % 2:  # one more ordinary token after the second copy fills the length
        pool = ordinary_token_ids(tokenizer, vocab)
        ids = np.concatenate([ids, keyed_rng(seed, 1).choice(pool, (n_inputs, 1))], axis=1)
    return ids


def _checked_split(split):
    if split not in STDLIB_SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, STDLIB_SPLITS))}; got "
                         f"{split!r}")
    return split


def corpus_token_ids(corpus, tokenizer, vocab, *, n_inputs, length, random_state=0,
                     split="train"):
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
        * ``"prose"``, ``"code"``: consecutive tokens of the documents of
          one split of :func:`~intrinsic_rank.datasets.stdlib_documents`
          (the standard library's docstrings and comments, and its source).
          The documents are taken in a random order, each tokenized alone
          (``tokenizer(text, add_special_tokens=False)``) and joined by the
          tokens of a blank line (``"\\n\\n"``), until the inputs are filled;
          the stream is cut into non-overlapping windows. A blank line rather
          than the tokenizer's end-of-sequence token: an instruction-tuned
          model's EOS ends a chat turn, not a document, and so every input
          after its BOS holds only ordinary text.
    tokenizer : transformers tokenizer or None
        The model's tokenizer: its ``bos_token_id`` (where it has one) begins
        every input. ``None`` (a model without one, such as the embedded
        ``"default"``): no BOS, and only ``"random"`` and ``"repeated"``,
        which need no text.
    vocab : int
        The model's vocabulary size.
    n_inputs, length : int
        Inputs, and tokens per input (BOS included).
    random_state : int, default=0
        Seed of the random tokens and of the order of the documents.
    split : {"train", "validation", "test"}, default="train"
        For ``"prose"`` and ``"code"``, the documents read: each file of the
        standard library belongs to one split only, so inputs of different
        splits share no text. For ``"random"`` and ``"repeated"``, the stream
        drawn: ``"train"`` draws from ``random_state`` itself, the others from
        ``keyed_seed(random_state, 1)`` (validation) and ``keyed_seed(random_state,
        2)`` (test), so the three are independent and each reproducible.

    Returns
    -------
    ids : ndarray of shape (n_inputs, length), int64

    Raises
    ------
    ValueError
        For an unknown corpus or split, a length that leaves no room for a
        copy of ``"repeated"``, more distinct tokens than the ordinary
        vocabulary holds, a text corpus without a tokenizer, or a split with
        fewer tokens than the inputs need.

    Examples
    --------
    >>> ids = corpus_token_ids("repeated", None, 64, n_inputs=2, length=9)
    >>> ids.shape, bool((ids[:, :4] == ids[:, 4:8]).all())
    ((2, 9), True)
    >>> held_out = corpus_token_ids("random", None, 64, n_inputs=2, length=9, split="test")
    >>> bool((held_out != corpus_token_ids("random", None, 64, n_inputs=2, length=9)).any())
    True
    >>> corpus_token_ids("prose", None, 64, n_inputs=2, length=9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the prose corpus needs the model's tokenizer ...: use 'random' or 'repeated'
    """
    if corpus not in TOKEN_CORPORA:
        raise ValueError(f"corpus must be one of {', '.join(map(repr, TOKEN_CORPORA))}; got "
                         f"{corpus!r}")
    split = _checked_split(split)
    vocab = check_int(vocab, "vocab")
    n_inputs = check_int(n_inputs, "n_inputs")
    seed = check_seed(random_state)
    if corpus in _TEXT_CORPORA and tokenizer is None:
        raise ValueError(f"the {corpus} corpus needs the model's tokenizer (tokenizer=None "
                         "here, as for the embedded default model): use 'random' or "
                         "'repeated'")
    bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
    length = check_int(length, "length", minimum=1 + int(bos is not None))
    body = length - int(bos is not None)
    if corpus == "repeated":
        if body < 2:
            raise ValueError(f"length={length} leaves no room for two copies of a token "
                             "(the repeated corpus needs at least 2 tokens after BOS)")
        ids = _repeated(tokenizer, vocab, n_inputs, length, body, _split_seed(seed, split))
        return ids.astype(np.int64)
    if corpus == "random":
        ids = np.random.default_rng(_split_seed(seed, split)).choice(
            ordinary_token_ids(tokenizer, vocab), size=(n_inputs, body))
    else:
        ids = _text_windows(corpus, split, tokenizer, n_inputs, body, seed)
    if bos is not None:
        ids = np.concatenate([np.full((n_inputs, 1), bos), ids], axis=1)
    return ids.astype(np.int64)


def _tokenizer_name(tokenizer):
    if tokenizer is None:
        return None
    return getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__


def corpus_record(corpus, tokenizer=None):
    """What one corpus of :func:`corpus_token_ids` is, for a run's record.

    Parameters
    ----------
    corpus : {"random", "repeated", "prose", "code"}
    tokenizer : transformers tokenizer or None, default=None
        Named in the record (its ``name_or_path``), since the same text gives
        other tokens under another tokenizer.

    Returns
    -------
    record : dict
        ``corpus``, ``tokenizer`` and ``description``; for ``"prose"`` and
        ``"code"`` also what
        :func:`~intrinsic_rank.datasets.stdlib_corpus_record` gives: the
        ``source`` folder, the ``python_version``, the ``digest`` of the text,
        and ``n_documents`` and ``characters`` per split.

    Raises
    ------
    ValueError
        For an unknown corpus.

    Examples
    --------
    >>> corpus_record("random")["description"]
    'uniform random tokens of the ordinary vocabulary (special tokens left out)'
    >>> record = corpus_record("code")
    >>> record["python_version"] == __import__("platform").python_version()
    True
    """
    if corpus not in TOKEN_CORPORA:
        raise ValueError(f"corpus must be one of {', '.join(map(repr, TOKEN_CORPORA))}; got "
                         f"{corpus!r}")
    record = dict(corpus=corpus, tokenizer=_tokenizer_name(tokenizer))
    if corpus not in _TEXT_CORPORA:
        return dict(record, description=_DESCRIPTIONS[corpus])
    text = stdlib_corpus_record(corpus)
    what = "docstrings and comments" if corpus == "prose" else "source files"
    record["description"] = (f"the {what} of the Python {text['python_version']} standard "
                             "library, one document per file, split by a hash of its path")
    return dict(record, **{k: v for k, v in text.items() if k != "kind"})
