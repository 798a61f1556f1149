"""Head-pattern scores: how much of a head's attention falls where a pattern says.

The previous-token, duplicate-token and induction patterns of the
interpretability literature, as masks over (query, key) positions of one
sequence, and the scores of attention maps against them.
"""

import numpy as np

__all__ = ["HEAD_PATTERNS", "head_pattern_masks", "head_pattern_scores"]

HEAD_PATTERNS = ("previous_token", "duplicate_token", "induction")
"""The attention patterns scored per head; record column ``<pattern>_score``."""

def head_pattern_masks(tokens):
    """The key positions each attention pattern names, for one sequence of token ids.

    For query ``i`` (rows) and key ``j`` (columns), the three patterns of the
    interpretability literature (TransformerLens's ``detect_head``):

    * ``previous_token``: ``j = i - 1``;
    * ``duplicate_token``: ``j < i`` with ``tokens[j] == tokens[i]`` (an earlier
      copy of the current token);
    * ``induction``: ``j = k + 1`` for every ``k < i`` with
      ``tokens[k] == tokens[i]`` (the token that followed an earlier copy of the
      current token; ``j <= i``).

    Parameters
    ----------
    tokens : array-like of int, shape (n,)
        One sequence's token ids (padding removed).

    Returns
    -------
    masks : dict
        ``{pattern: bool ndarray of shape (n, n)}`` for each pattern of
        :data:`HEAD_PATTERNS`.

    Examples
    --------
    >>> masks = head_pattern_masks([5, 7, 5, 7])
    >>> masks["duplicate_token"].nonzero()
    (array([2, 3]), array([0, 1]))
    >>> masks["induction"].nonzero()
    (array([2, 3]), array([1, 2]))
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or len(tokens) == 0:
        raise ValueError(f"tokens must be a non-empty 1-D sequence of ids; got shape "
                         f"{tokens.shape}")
    n = len(tokens)
    duplicate = np.tril(tokens[:, None] == tokens[None, :], -1)
    induction = np.zeros((n, n), dtype=bool)
    induction[:, 1:] = duplicate[:, :-1]
    return {"previous_token": np.eye(n, k=-1, dtype=bool), "duplicate_token": duplicate,
            "induction": induction}


def _pattern_sums(A, tokens, exclude_first, exclude_diagonal):
    """Per pattern: attention on its positions and in its defined queries, and their count.

    ``A`` has shape ``(..., n, n)``. The first key and the diagonal, when
    excluded, are removed from the attention and from the pattern; a query
    counts where the pattern still names a position.
    """
    n = A.shape[-1]
    keep = np.ones((n, n), dtype=bool)
    if exclude_first:
        keep[:, 0] = False
    if exclude_diagonal:
        keep[np.diag_indices(n)] = False
    A = np.where(keep, np.asarray(A, dtype=np.float64), 0.0)
    sums = {}
    for name, mask in head_pattern_masks(tokens).items():
        mask = mask & keep
        rows = mask.any(axis=1)
        on_pattern = (A * mask).sum(-1)[..., rows].sum(-1)
        total = A.sum(-1)[..., rows].sum(-1)
        sums[name] = (on_pattern, total, int(rows.sum()))
    return sums


def _ratio(on_pattern, total):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, on_pattern / np.where(total > 0, total, 1.0), np.nan)


def head_pattern_scores(attention, tokens, *, exclude_first=False, exclude_diagonal=False):
    """Previous-token, duplicate-token and induction scores of attention maps.

    The attention-pattern *match* score of the interpretability literature
    (TransformerLens's ``detect_head`` with its ``"mul"`` measure): the share
    of a head's attention that falls on the positions a pattern names
    (:func:`head_pattern_masks`), taken over the queries for which the pattern
    names at least one position. With no exclusion each attention row sums to
    one, so the score is the mean over those queries of the mass on the
    pattern's positions. ``exclude_first`` and ``exclude_diagonal`` remove the
    first key and the query's own position from both the attention and the
    pattern first, so that a sink or self-attention does not count against a
    head (the score then is a share of the remaining attention).

    Parameters
    ----------
    attention : array-like of shape (..., n, n)
        Attention probabilities, queries on the rows (for instance one input's
        maps of shape ``(n_layers, n_heads, n, n)``).
    tokens : array-like of int, shape (n,)
        The input's token ids.
    exclude_first : bool, default=False
        Leave out the first key (an attention sink, ``[CLS]`` or ``<bos>``).
    exclude_diagonal : bool, default=False
        Leave out each query's own position.

    Returns
    -------
    scores : dict
        ``{pattern: ndarray of shape attention.shape[:-2]}`` for each pattern of
        :data:`HEAD_PATTERNS`, in ``[0, 1]``; NaN where the pattern names no
        position (no repeated token, for the duplicate and induction patterns).

    Examples
    --------
    A head that attends to the previous token scores 1 on that pattern:

    >>> A = np.eye(5, k=-1)
    >>> A[0, 0] = 1.0
    >>> scores = head_pattern_scores(A, [3, 1, 4, 1, 5])
    >>> float(scores["previous_token"]), float(scores["duplicate_token"])
    (1.0, 0.0)

    Uniform causal attention over ``i + 1`` keys gives ``1 / (i + 1)`` to each:

    >>> U = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    >>> round(float(head_pattern_scores(U, [1, 2, 3, 4])["previous_token"]), 4)
    0.3611
    """
    attention = np.asarray(attention, dtype=np.float64)
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must have shape (..., n, n); got {attention.shape}")
    tokens = np.asarray(tokens)
    if tokens.shape != attention.shape[-1:]:
        raise ValueError(f"tokens must have shape ({attention.shape[-1]},), one id per "
                         f"position of attention; got {tokens.shape}")
    sums = _pattern_sums(attention, tokens, bool(exclude_first), bool(exclude_diagonal))
    return {name: _ratio(on, total) for name, (on, total, _) in sums.items()}
