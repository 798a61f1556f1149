"""Token-id tasks of the reachability paper: cramming targets, pre-training and copying.

* :func:`make_random_targets` -- uniformly random target sequences to cram into
  prompt vectors (accessibility of *random* outputs, the paper's hardest case);
* :func:`make_induction_corpus` -- repeated random segments ``a a`` that teach a
  small causal LM to copy from its context (how the embedded default model is
  pre-trained, so that it attends to prompt vectors usefully);
* :func:`make_copy_task` -- ``<bos> s <sep> s <eos>`` copy sequences with
  next-token targets scored only on the copy.
"""

import numpy as np
from sklearn.utils import Bunch

from .._validation import check_int, check_random_state

__all__ = [
    "COPY_SPECIAL_TOKENS",
    "make_copy_task",
    "make_induction_corpus",
    "make_random_targets",
    "load_sample_texts",
]

#: ids of the special tokens of :func:`make_copy_task`; content tokens follow them
COPY_SPECIAL_TOKENS = {"pad": 0, "bos": 1, "sep": 2, "eos": 3}
IGNORE_INDEX = -100


def make_random_targets(n_targets, length, vocab_size, random_state=None):
    """Uniformly random token sequences, the targets of a cramming experiment.

    Parameters
    ----------
    n_targets : int
        Number of sequences.
    length : int
        Tokens per sequence (``>= 2``: the first token is given as input, the
        rest must be produced).
    vocab_size : int
        Ids are drawn uniformly from ``0 .. vocab_size - 1``.
    random_state : None, int or numpy.random.RandomState

    Returns
    -------
    X : ndarray of shape (n_targets, length), dtype int64

    Examples
    --------
    >>> make_random_targets(2, 4, 10, random_state=0)
    array([[5, 0, 3, 3],
           [7, 9, 3, 5]])
    """
    n_targets = check_int(n_targets, "n_targets")
    length = check_int(length, "length", minimum=2)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2)
    rng = check_random_state(random_state)
    return rng.randint(vocab_size, size=(n_targets, length)).astype(np.int64)


def make_induction_corpus(n_samples, seq_len, vocab_size, max_segment=32, random_state=None):
    """Sequences made of repeated random segments ``a a b b c c ...``.

    Every second copy of a segment is predictable from the context, so a causal
    LM trained on this corpus learns induction (find the previous occurrence of
    the current token and copy what followed). Such a model reads its context,
    prompt vectors included, which a randomly initialised model does not.

    Parameters
    ----------
    n_samples : int
    seq_len : int
        Tokens per sequence; the last segment is cut to fit.
    vocab_size : int
    max_segment : int, default=32
        Segment lengths are uniform on ``1 .. max_segment``.
    random_state : None, int or numpy.random.RandomState

    Returns
    -------
    X : ndarray of shape (n_samples, seq_len), dtype int64
        Token ids; train a causal LM on next-token prediction over ``X``.

    Examples
    --------
    >>> X = make_induction_corpus(1, 12, 50, max_segment=3, random_state=0)
    >>> X.shape
    (1, 12)
    """
    n_samples = check_int(n_samples, "n_samples")
    seq_len = check_int(seq_len, "seq_len", minimum=2)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2)
    max_segment = check_int(max_segment, "max_segment")
    rng = check_random_state(random_state)
    X = np.empty((n_samples, seq_len), dtype=np.int64)
    for i in range(n_samples):
        row, filled = X[i], 0
        while filled < seq_len:
            segment = rng.randint(vocab_size, size=rng.randint(1, max_segment + 1))
            chunk = np.concatenate([segment, segment])[: seq_len - filled]
            row[filled:filled + len(chunk)] = chunk
            filled += len(chunk)
    return X


def make_copy_task(n_samples, min_length=5, max_length=50, vocab_size=32,
                   random_state=None, return_info=False):
    """Copy sequences ``<bos> s <sep> s <eos>`` with targets on the copy only.

    Parameters
    ----------
    n_samples : int
    min_length, max_length : int, default=5, 50
        String lengths are uniform on ``min_length .. max_length``.
    vocab_size : int, default=32
        Total vocabulary, including the four special tokens of
        :data:`COPY_SPECIAL_TOKENS` (pad, bos, sep, eos = 0, 1, 2, 3); content
        tokens are ``4 .. vocab_size - 1``.
    random_state : None, int or numpy.random.RandomState
    return_info : bool, default=False
        Also return a Bunch with ``lengths``, ``strings`` (padded with pad) and
        ``special_tokens``.

    Returns
    -------
    X : ndarray of shape (n_samples, 2 * max_length + 2), dtype int64
        Input ids ``<bos> s <sep> s``, right-padded with pad.
    Y : ndarray of the same shape, dtype int64
        Next-token targets: ``Y[:, t]`` is the token after ``X[:, t]`` where it
        belongs to the copy (``s`` then ``<eos>``), and ``-100`` (ignored by
        ``torch.nn.functional.cross_entropy``) everywhere else.
    info : Bunch, only if ``return_info``

    Examples
    --------
    >>> X, Y = make_copy_task(1, 2, 2, vocab_size=8, random_state=0)
    >>> X
    array([[1, 4, 7, 2, 4, 7]])
    >>> Y
    array([[-100, -100, -100,    4,    7,    3]])
    """
    n_samples = check_int(n_samples, "n_samples")
    min_length = check_int(min_length, "min_length")
    max_length = check_int(max_length, "max_length", minimum=min_length)
    n_special = len(COPY_SPECIAL_TOKENS)
    vocab_size = check_int(vocab_size, "vocab_size", minimum=n_special + 2)
    rng = check_random_state(random_state)
    tok = COPY_SPECIAL_TOKENS
    lengths = rng.randint(min_length, max_length + 1, size=n_samples)
    strings = np.full((n_samples, max_length), tok["pad"], dtype=np.int64)
    width = 2 * max_length + 2
    X = np.full((n_samples, width), tok["pad"], dtype=np.int64)
    Y = np.full((n_samples, width), IGNORE_INDEX, dtype=np.int64)
    for i, n in enumerate(lengths):
        s = rng.randint(n_special, vocab_size, size=n)
        strings[i, :n] = s
        X[i, : 2 * n + 2] = np.concatenate([[tok["bos"]], s, [tok["sep"]], s])
        # position of <sep> predicts s[0]; the last copied token predicts <eos>
        Y[i, n + 1: 2 * n + 2] = np.concatenate([s, [tok["eos"]]])
    if return_info:
        return X, Y, Bunch(lengths=lengths, strings=strings, special_tokens=dict(tok))
    return X, Y


def load_sample_texts():
    """Thirty-two short English passages shipped with the package.

    The default inputs of :func:`intrinsic_rank.inspection.profile_heads` for
    text models with a tokenizer: everyday prose of 14 to 22 words (narrative,
    instructions, facts, numbers), written for this project, so profiles run
    offline and are comparable between models.

    Returns
    -------
    texts : list of str

    Examples
    --------
    >>> texts = load_sample_texts()
    >>> len(texts), texts[0].split()[:3]
    (32, ['The', 'river', 'had'])
    """
    from importlib import resources

    text = (resources.files("intrinsic_rank") / "data" / "sample_texts.txt").read_text("utf-8")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
