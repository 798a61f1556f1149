"""Head-pattern scores: how much of a head's attention falls where a pattern says.

The previous-token, duplicate-token and induction patterns of the
interpretability literature, as masks over (query, key) positions of one
sequence, and the scores of attention maps against them, defined as
TransformerLens's head detector (``transformer_lens.head_detector``) defines
them: its ``"mul"`` and ``"abs"`` measures, its ``exclude_bos`` and
``exclude_current_token`` options and its mean over sequences. A third
measure, ``"conditional"``, is this package's: the share of attention on the
pattern over only the queries where the pattern names a position, pooled over
the inputs.
"""

import numpy as np

__all__ = ["HEAD_PATTERNS", "SCORE_MEASURES", "head_pattern_masks", "head_pattern_scores"]

HEAD_PATTERNS = ("previous_token", "duplicate_token", "induction")
"""The attention patterns scored per head; record column ``<pattern>_score``."""

SCORE_MEASURES = ("mul", "abs", "conditional")
"""The measures of :func:`head_pattern_scores`: TransformerLens's two, then ours."""


def head_pattern_masks(tokens):
    """The key positions each attention pattern names, for one sequence of token ids.

    For query ``i`` (rows) and key ``j`` (columns), the three detection
    patterns of TransformerLens's head detector:

    * ``previous_token``: ``j = i - 1`` (the sub-diagonal);
    * ``duplicate_token``: ``j < i`` with ``tokens[j] == tokens[i]`` (an earlier
      copy of the current token);
    * ``induction``: the duplicate pattern shifted one column to the right,
      first column zero: ``j = k + 1`` for every ``k < i`` with
      ``tokens[k] == tokens[i]`` (the token that followed an earlier copy of the
      current token; ``j <= i``).

    Parameters
    ----------
    tokens : array-like of int, shape (n,)
        One sequence's token ids (padding removed; a BOS token, where the model
        has one, included).

    Returns
    -------
    masks : dict
        ``{pattern: bool ndarray of shape (n, n)}`` for each pattern of
        :data:`HEAD_PATTERNS`, each lower-triangular.

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


def _excluded(matrix, exclude_bos, exclude_current_token):
    """A float64 copy of ``matrix`` (..., n, n) with the first column and/or diagonal zeroed."""
    matrix = np.array(matrix, dtype=np.float64)
    if exclude_bos:
        matrix[..., :, 0] = 0.0
    if exclude_current_token:
        n = matrix.shape[-1]
        matrix[..., np.arange(n), np.arange(n)] = 0.0
    return matrix


def _mul_scores(A, masks, exclude_bos, exclude_current_token):
    """TransformerLens's ``"mul"``: ``sum(A * D) / sum(A)`` over all rows, after exclusions."""
    A = _excluded(A, exclude_bos, exclude_current_token)
    total = A.sum((-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return {name: (A * mask).sum((-2, -1)) / total for name, mask in masks.items()}


def _abs_scores(A, masks, exclude_bos, exclude_current_token):
    """TransformerLens's ``"abs"``: ``1 - round(mean|A - D| * n, 3)``, after exclusions."""
    A = np.asarray(A, dtype=np.float64)
    n = A.shape[-1]
    if np.any(A[..., ~np.tril(np.ones((n, n), dtype=bool))] != 0):
        raise ValueError("measure='abs' needs causal attention (zero above the diagonal), as "
                         "TransformerLens's detector asserts; this attention is not: use "
                         "measure='mul' or 'conditional'")
    scores = {}
    for name, mask in masks.items():
        diff = _excluded(np.abs(A - mask), exclude_bos, exclude_current_token)
        raw = diff.mean((-2, -1)) * n
        # Python's round on each float, as the detector rounds its .item()
        scores[name] = np.vectorize(lambda x: 1.0 - round(float(x), 3), otypes=[float])(raw)
    return scores


def _conditional_sums(A, masks, exclude_bos, exclude_current_token):
    """Per pattern: attention on its positions and in its queries, over the defined queries.

    The first key and the diagonal, when excluded, are removed from the
    attention *and* from the pattern; a query counts where the pattern still
    names a position.
    """
    n = A.shape[-1]
    keep = _excluded(np.ones((n, n)), exclude_bos, exclude_current_token) > 0
    A = np.where(keep, np.asarray(A, dtype=np.float64), 0.0)
    sums = {}
    for name, mask in masks.items():
        mask = mask & keep
        rows = mask.any(axis=1)
        sums[name] = ((A * mask).sum(-1)[..., rows].sum(-1), A.sum(-1)[..., rows].sum(-1))
    return sums


class _PatternScores:
    """Head-pattern scores accumulated over sequences, one measure and one set of exclusions.

    ``add`` takes one sequence's attention (..., n, n) and its tokens;
    ``scores`` gives ``{pattern: array of shape attention.shape[:-2]}``: the
    mean of the per-sequence scores for TransformerLens's measures, the pooled
    share for ``"conditional"``. ``queries`` counts, per pattern, the queries
    where the pattern names a position (no exclusion applied).
    """

    def __init__(self, measure="mul", exclude_bos=False, exclude_current_token=False):
        if measure not in SCORE_MEASURES:
            raise ValueError(f"measure must be one of {', '.join(map(repr, SCORE_MEASURES))}; "
                             f"got {measure!r}")
        self.measure = measure
        self.exclusions = (bool(exclude_bos), bool(exclude_current_token))
        self.sums = {name: 0.0 for name in HEAD_PATTERNS}
        self.totals = {name: 0.0 for name in HEAD_PATTERNS}
        self.queries = {name: 0 for name in HEAD_PATTERNS}
        self.n_sequences = 0

    def add(self, attention, tokens):
        masks = head_pattern_masks(tokens)
        for name, mask in masks.items():
            self.queries[name] += int(mask.any(axis=1).sum())
        self.n_sequences += 1
        if self.measure == "conditional":
            for name, (on, total) in _conditional_sums(attention, masks,
                                                       *self.exclusions).items():
                self.sums[name] = self.sums[name] + on
                self.totals[name] = self.totals[name] + total
            return
        score = _mul_scores if self.measure == "mul" else _abs_scores
        for name, value in score(attention, masks, *self.exclusions).items():
            self.sums[name] = self.sums[name] + value

    def scores(self):
        if self.measure != "conditional":
            return {name: np.asarray(self.sums[name] / self.n_sequences, dtype=float)
                    for name in HEAD_PATTERNS}
        out = {}
        for name in HEAD_PATTERNS:
            on, total = np.asarray(self.sums[name]), np.asarray(self.totals[name])
            with np.errstate(divide="ignore", invalid="ignore"):
                out[name] = np.where(total > 0, on / np.where(total > 0, total, 1.0), np.nan)
        return out


def _check_sequence(attention, tokens):
    attention = np.asarray(attention, dtype=np.float64)
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must have shape (..., n, n); got {attention.shape}")
    tokens = np.asarray(tokens)
    if tokens.shape != attention.shape[-1:]:
        raise ValueError(f"tokens must have shape ({attention.shape[-1]},), one id per "
                         f"position of attention; got {tokens.shape}")
    return attention, tokens


def head_pattern_scores(attention, tokens, *, measure="mul", exclude_bos=False,
                        exclude_current_token=False):
    """Previous-token, duplicate-token and induction scores of attention maps.

    The detection scores of TransformerLens's head detector
    (``transformer_lens.head_detector.detect_head``), for the detection
    patterns ``D`` of :func:`head_pattern_masks` and one sequence of ``n``
    tokens (the BOS token included where the model has one):

    * ``"mul"`` (the detector's default): ``sum(A * D) / sum(A)``, the sums over
      every query row, so the share of the head's whole attention on the
      pattern's positions. Queries where the pattern names no position count
      in the denominator: a perfect induction head on BOS + ``k`` random
      tokens + the same ``k`` tokens scores ``k / (2k + 1)``.
    * ``"abs"``: ``1 - round(mean(|A - D|) * n, 3)``, so ``1`` minus the summed
      absolute difference per row, rounded to three decimals (Python's
      ``round``); the attention must be causal, as the detector asserts.
    * ``"conditional"`` (this package's): the attention on the pattern's
      positions divided by the attention of only the queries where the pattern
      names a position, pooled (summed) over the sequences before dividing; NaN
      where no query is defined. It answers "where the pattern applies, how
      much of the head follows it", in ``[0, 1]`` with 1 for a perfect head
      whatever the share of defined queries, which is why it is kept.

    ``exclude_bos`` zeroes the first key's column and ``exclude_current_token``
    the diagonal: of the attention ``A`` for ``"mul"`` (``D`` unchanged, so the
    score becomes a share of the remaining attention), of ``|A - D|`` for
    ``"abs"``, and of both the attention and the pattern for
    ``"conditional"``. Several sequences give the mean of their per-sequence
    scores for ``"mul"`` and ``"abs"``, each computed with the options given
    (the detector's own list path drops them, a quirk not reproduced here).

    Parameters
    ----------
    attention : array-like of shape (..., n, n), or a list of them
        Attention probabilities, queries on the rows (for instance one input's
        maps of shape ``(n_layers, n_heads, n, n)``); a list holds one array per
        sequence, of the sequence's own length, with the same leading shape.
    tokens : array-like of int, shape (n,), or a list of them
        The sequence's token ids; a list (one per array of ``attention``) for
        several sequences.
    measure : {"mul", "abs", "conditional"}, default="mul"
        The score, as above.
    exclude_bos : bool, default=False
        Leave out the first key (a BOS token, ``[CLS]``, an attention sink).
    exclude_current_token : bool, default=False
        Leave out each query's own position.

    Returns
    -------
    scores : dict
        ``{pattern: ndarray of shape attention.shape[:-2]}`` for each pattern of
        :data:`HEAD_PATTERNS`. ``"mul"`` is NaN only where the exclusions leave
        no attention at all.

    Raises
    ------
    ValueError
        For attention that is not square, tokens that do not fit it, an unknown
        ``measure``, non-causal attention with ``measure="abs"``, or lists of
        different lengths.

    Examples
    --------
    A head that attends to the previous token puts all of its attention but
    the first row's on that pattern:

    >>> A = np.eye(5, k=-1)
    >>> A[0, 0] = 1.0
    >>> scores = head_pattern_scores(A, [3, 1, 4, 1, 5])
    >>> float(scores["previous_token"]), float(scores["duplicate_token"])
    (0.8, 0.0)
    >>> float(head_pattern_scores(A, [3, 1, 4, 1, 5], measure="conditional")["previous_token"])
    1.0

    Uniform causal attention over ``i + 1`` keys gives ``1 / (i + 1)`` to each:

    >>> U = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    >>> round(float(head_pattern_scores(U, [1, 2, 3, 4])["previous_token"]), 4)
    0.2708
    >>> round(float(head_pattern_scores(U, [1, 2, 3, 4], measure="abs")["previous_token"]), 3)
    -0.208
    """
    accumulator = _PatternScores(measure, exclude_bos, exclude_current_token)
    several = isinstance(tokens, (list, tuple)) and len(tokens) > 0 and np.ndim(tokens[0]) == 1
    if several:
        if not isinstance(attention, (list, tuple)) or len(attention) != len(tokens):
            raise ValueError(f"tokens is a list of {len(tokens)} sequences: attention must be "
                             f"a list of as many arrays; got {type(attention).__name__}"
                             + (f" of {len(attention)}" if isinstance(attention, (list, tuple))
                                else ""))
        pairs = [_check_sequence(A, t) for A, t in zip(attention, tokens)]
        if len({A.shape[:-2] for A, _ in pairs}) > 1:
            raise ValueError("the attention arrays must share their leading (layer, head) "
                             f"shape; got {sorted({A.shape[:-2] for A, _ in pairs})}")
    else:
        pairs = [_check_sequence(attention, tokens)]
    for A, t in pairs:
        accumulator.add(A, t)
    return accumulator.scores()
