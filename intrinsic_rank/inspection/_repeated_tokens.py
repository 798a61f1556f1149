"""The field's induction test: random tokens, then the same tokens again.

Inputs of the tokenizer's BOS token (where it has one), ``k`` random tokens of
the ordinary vocabulary and the same ``k`` tokens repeated, on which induction
heads attend to the token after the earlier copy and a model that uses them
predicts the second copy; and that prediction's greedy accuracy.
"""

import numpy as np
import torch

from .._validation import check_int
from ..nn import unwrap_model

__all__ = ["REPEATED_RANDOM", "ordinary_token_ids"]

REPEATED_RANDOM = "repeated_random"
"""The ``inputs`` of :func:`profile_heads` that names the repeated-random-tokens test."""


def ordinary_token_ids(tokenizer, vocab):
    """The token ids random inputs are drawn from: the vocabulary less special tokens.

    Parameters
    ----------
    tokenizer : transformers tokenizer or None
        Its ``all_special_ids`` and added tokens (``added_tokens_decoder``) are
        left out, and so are ids past its length (embedding rows that no text
        produces). ``None``: every id of the vocabulary.
    vocab : int
        The model's vocabulary size.

    Returns
    -------
    ids : ndarray of int
        Increasing.

    Examples
    --------
    >>> ordinary_token_ids(None, 5)
    array([0, 1, 2, 3, 4])
    """
    ids = np.arange(vocab)
    if tokenizer is None:
        return ids
    special = set(getattr(tokenizer, "all_special_ids", None) or [])
    special |= set(getattr(tokenizer, "added_tokens_decoder", None) or {})
    # ids past the tokenizer's length are embedding rows no text ever produces
    ids = ids[ids < len(tokenizer)]
    return ids[~np.isin(ids, sorted(special))]


def _repeated_random_inputs(tokenizer, vocab, n_inputs, half_length, max_length,
                            random_state):
    """``(ids, bos)``: BOS (where the tokenizer has one), ``k`` random tokens, the same again.

    The ``k = half_length`` tokens of each sequence are distinct, drawn without
    replacement from the ordinary vocabulary, so the duplicate and induction
    patterns name positions in the second copy only.
    """
    bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
    offset = int(bos is not None)
    if half_length is None:
        half_length = (max_length - offset) // 2
    half_length = check_int(half_length, "half_length")
    if offset + 2 * half_length > max_length:
        raise ValueError(f"half_length={half_length} does not fit: {offset} + 2 x "
                         f"{half_length} tokens exceed max_length={max_length}")
    pool = ordinary_token_ids(tokenizer, vocab)
    if half_length > len(pool):
        raise ValueError(f"half_length={half_length} exceeds the {len(pool)} ordinary tokens "
                         "of the vocabulary (a copy has distinct tokens)")
    rng = np.random.default_rng(random_state)
    halves = np.stack([rng.choice(pool, half_length, replace=False) for _ in range(n_inputs)])
    ids = np.concatenate([halves, halves], axis=1)
    if bos is not None:
        ids = np.concatenate([np.full((n_inputs, 1), bos), ids], axis=1)
    return ids, offset, half_length


def _has_next_token_head(module):
    model, kind = unwrap_model(module)
    return kind == "tiny" or getattr(model, "get_output_embeddings", lambda: None)() is not None


def _copy_accuracy(module, ids, offset, half_length, batch_size, device):
    """Greedy next-token accuracy on the first and on the second copy of repeated tokens.

    A target is a token of a copy predicted from the positions before it, the
    copy's first token left out (nothing before it tells it): ``k - 1``
    targets per copy. Induction shows as the second copy's accuracy far above
    the first's, which is chance.
    """
    model, kind = unwrap_model(module)
    hits = []
    with torch.no_grad():
        for begin in range(0, len(ids), batch_size):
            batch = torch.as_tensor(ids[begin:begin + batch_size], device=device)
            logits = model(batch) if kind == "tiny" else model(input_ids=batch).logits
            hits.append((logits[:, :-1].argmax(-1) == batch[:, 1:]).cpu().numpy())
    hits = np.concatenate(hits)  # hits[:, p - 1]: the prediction of the token at p
    first = hits[:, offset:offset + half_length - 1]
    second = hits[:, offset + half_length:offset + 2 * half_length - 1]
    return float(first.mean()), float(second.mean())
