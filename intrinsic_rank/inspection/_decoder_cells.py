"""Decoder cells of a model's output head, by Monte Carlo on the device (the reachability paper).

The cell-volume refinement of the reachability paper needs the share ``p_t`` of
the region of final hidden states that the model's head sends to each next
token ``t``. :func:`decoder_cell_proportions` samples the region (the box of
the measured states, or a ball), applies the real rule ``argmax(W h + b)`` and
the authors' nearest-unembedding-row rule to the same points on the device, in
chunks under a memory cap, and counts. The model-free pieces (samplers, the
rules on numpy arrays, the decay ``c`` and the refined bound) are in
:mod:`intrinsic_rank.bounds`.
"""

import contextlib
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.utils import Bunch

from .. import bounds
from .._validation import check_device, check_int, check_real, check_seed, keyed_seed
from ..nn import CausalLMAdapter

__all__ = ["decoder_cell_proportions", "check_decoder"]

REGIONS = ("box", "ball")
RULES = ("argmax", "nearest")
REDUCED_PRECISIONS = ("bfloat16", "float16")
_BLOCK_ELEMENTS = 2**22  # host floats per sampling block (32 MiB of float64)
_VOCAB_BLOCK = 4096  # head rows per matmul: a chunk's scores stay in the cache
_ROWS = 256  # points per chunk
_RECHECK = 1.0
# The reduced matmul's tolerance is _RECHECK * u * max_t |w_t| * |h| (u the reduced
# dtype's unit roundoff): on SmolLM2-135M-Instruct the largest gap between the reduced score
# of the exact argmax and the reduced best was 0.24 of this (0.12 for the nearest-row
# rule) over 4096 box points, so candidates within it always hold the exact token.


def _adapter_device(adapter):
    for p in adapter.parameters():
        return p.device
    return torch.device("cpu")


def _check_has_head(adapter):
    if not isinstance(adapter, CausalLMAdapter):
        raise TypeError(
            f"adapter must be a CausalLMAdapter (see intrinsic_rank.nn.as_causal_lm); "
            f"got {type(adapter).__name__}"
        )
    if not getattr(adapter, "has_head", True):
        name = type(getattr(adapter, "model", adapter)).__name__
        raise ValueError(
            f"the model ({name}) has no next-token head: decoder cells need the "
            "decision rule argmax(W h + b) of an output head, and an encoder has none "
            "(the cone and the count bounds apply without one)"
        )
    try:
        weight, bias = adapter.output_head()
    except NotImplementedError as error:
        raise ValueError(str(error)) from None
    return weight, bias


def check_decoder(adapter, random_state=0):
    """Raise ``ValueError`` unless ``decode(final_hidden(x))`` is the model's own rule.

    The cells are counted on the space of
    :meth:`~intrinsic_rank.nn.CausalLMAdapter.final_hidden`, with the rule
    :meth:`~intrinsic_rank.nn.CausalLMAdapter.output_head`; both must describe
    what the model does. On a short random input the next token of
    ``W final_hidden(x) + b`` must equal that of ``logits(x)`` at every
    position (values may differ by a monotone map after the head, such as
    soft-capping).

    Parameters
    ----------
    adapter : CausalLMAdapter
        With a next-token head.
    random_state : int, default=0

    Returns
    -------
    adapter : CausalLMAdapter
        The same adapter, for chaining.

    Examples
    --------
    >>> from intrinsic_rank.nn import as_causal_lm
    >>> check_decoder(as_causal_lm("default")).width
    64
    """
    weight, bias = _check_has_head(adapter)
    generator = torch.Generator().manual_seed(int(check_seed(random_state)))
    length = 6 if adapter.max_length is None else min(6, adapter.max_length)
    E = adapter.embedding_matrix()
    ids = torch.randint(adapter.vocab_size, (2, length), generator=generator).to(E.device)
    with torch.no_grad():
        x = adapter.embed(ids)
        hidden = adapter.final_hidden(x)
        ours = torch.nn.functional.linear(hidden, weight, bias).float()
        theirs = adapter.logits(x).float()
    if ours.shape != theirs.shape:
        raise ValueError(
            f"the output head maps final hidden states to shape {tuple(ours.shape)}, but "
            f"the model's logits have shape {tuple(theirs.shape)}"
        )
    close = torch.allclose(ours, theirs, rtol=1e-3, atol=1e-4 * float(theirs.abs().max()))
    if not close and not torch.equal(ours.argmax(-1), theirs.argmax(-1)):
        raise ValueError(
            f"the model ({type(getattr(adapter, 'model', adapter)).__name__}) does not "
            "decode its final hidden states with its output head: argmax(W h + b) of "
            "final_hidden(x) differs from the argmax of logits(x), so the region and the "
            "rule of the cell estimate would not match"
        )
    return adapter


def _region_from_states(hidden_states, region):
    h = np.asarray(hidden_states, dtype=np.float64)
    if h.ndim < 2 or h.shape[-1] == 0 or h.size == 0:
        raise ValueError(
            f"hidden_states must have shape (..., d) with at least one state; got {h.shape}"
        )
    if not np.all(np.isfinite(h)):
        raise ValueError("hidden_states must be finite (no NaN or inf)")
    h = h.reshape(-1, h.shape[-1])
    if region == "box":
        low, high = h.min(axis=0), h.max(axis=0)
        flat = np.flatnonzero(high <= low)
        if flat.size:
            raise ValueError(
                f"the box of hidden_states has zero width in {flat.size} coordinate(s) "
                f"(first at index {int(flat[0])}): a degenerate region has no volume to "
                "split into cells"
            )
        return dict(low=low, high=high)
    radius = float(np.max(np.linalg.norm(h, axis=1)))
    if radius == 0:
        raise ValueError("hidden_states are all zero: a ball of radius 0 has no volume")
    return dict(center=None, radius=radius)


def _finite(value, name):
    v = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return v


def _rule_cells(counts, n):
    counts = counts.astype(np.int64)
    return Bunch(proportions=counts / n, counts=counts,
                 n_empty=int(np.count_nonzero(counts == 0)), n_samples=int(n),
                 vocab_size=int(counts.size))


def decoder_cell_proportions(adapter, hidden_states=None, *, low=None, high=None,
                             center=None, radius=None, region="box", n_samples=2**17,
                             rule="argmax", random_state=0, max_bytes=2**27, device=None,
                             reduced_precision="bfloat16", check_points=4096, verbose=False):
    """Share ``p_t`` of a hidden-state region that a model's head sends to each token.

    Monte Carlo: ``n_samples`` points uniform in the region, each assigned its
    next token by the real decision rule ``argmax(W h + b)`` of the model's
    output head (:meth:`~intrinsic_rank.nn.CausalLMAdapter.output_head`) and,
    on the same points, by the authors' rule, the Euclidean-nearest row of ``W``
    (``argmax(w . h - |w|**2 / 2)``, their ``voronoi_volume.py``). The two agree
    only when every row has the same norm and there is no bias.

    The points are drawn on the host with numpy in blocks whose seeds depend
    only on ``random_state`` and the block's index (so the numbers do not depend
    on ``device`` or ``max_bytes``). Both rules then run on ``device`` in chunks
    of points and blocks of 4096 head rows, so no chunk's logits exceed about
    ``max_bytes`` (never all ``n_samples x |V|`` at once). The region is the one
    ``final_hidden`` states live in: after the model's final norm, which is what
    the head reads (:func:`check_decoder` verifies it on the model first).

    The matmul runs in ``reduced_precision`` (bfloat16 by default, about twice
    as fast as float32 on a CPU with bfloat16 instructions and far more on a
    GPU), and the answer is float32's: every token whose reduced score is within
    ``u max_t |w_t| |h|`` of the reduced best (``u`` the reduced dtype's unit
    roundoff, ``|.|`` Euclidean) is scored again in the head's own dtype
    (float32, or float64 for a float64 head) and the best of those is the
    point's token. On SmolLM2-135M-Instruct the reduced score of the exact winner was
    never more than 0.24 of that tolerance below the reduced best. The first
    ``check_points`` points are also sent through the exact head; if any of
    them gets another token, a warning says so and every point is counted
    again in the exact dtype. ``reduced_precision=None`` computes every logit
    in the exact dtype.

    With ``n`` points a non-empty cell has ``p_t >= 1/n``, so the decay
    ``c = -mean ln p_t`` over the non-empty cells is at most ``ln n``
    (``max_decay``) and ``n_empty`` cells are not resolved at all: the cell
    refinement is limited by the sample size when ``n_empty`` is a large part
    of ``vocab_size``.

    Parameters
    ----------
    adapter : CausalLMAdapter
        A causal LM with a next-token head (:func:`~intrinsic_rank.nn.as_causal_lm`);
        an encoder (:class:`~intrinsic_rank.nn.HFEncoderAdapter`) raises.
    hidden_states : array-like of shape (..., d), optional
        Measured final hidden states (e.g. of
        :func:`~intrinsic_rank.nn.random_prompt_hidden_states`); they define the
        region: for ``"box"`` the per-coordinate min and max, for ``"ball"`` the
        smallest ball about the origin that holds them all (radius the largest
        Euclidean norm). Give either these or the region's own parameters.
    low, high : array-like of shape (d,), optional
        The box, for ``region="box"`` without ``hidden_states``; ``high > low``.
    center : array-like of shape (d,), optional
        The ball's centre (None: the origin), for ``region="ball"``.
    radius : float, optional
        The ball's Euclidean radius ``> 0``, for ``region="ball"`` without
        ``hidden_states``.
    region : {"box", "ball"}, default="box"
    n_samples : int, default=131072
        Monte Carlo points, ``>= 1``.
    rule : {"argmax", "nearest"}, default="argmax"
        Whose cells go in the top-level ``proportions``, ``counts`` and
        ``n_empty`` (what :func:`~intrinsic_rank.bounds.cell_decay` reads); both
        are always in ``argmax`` and ``nearest``.
    random_state : int, default=0
        Seeds the points.
    max_bytes : int, default=2**27
        Memory cap of one chunk on the device (logits of both rules and the
        points), at least one point's worth is always used.
    device : None, str or torch.device, default=None
        Where the rules run; None: where the adapter's parameters are. Only
        the head's weights are copied there.
    reduced_precision : {"bfloat16", "float16"} or None, default="bfloat16"
        The matmul's dtype, with the exact re-check above; None: the head's dtype.
        (float16 matmuls are slow on most CPUs; it is for GPUs.)
    check_points : int, default=4096
        Points also counted through the exact head, ``>= 0``; a disagreement on
        any of them switches the whole count to the exact dtype.
    verbose : bool, default=False
        A progress line on stderr (points counted, seconds) per host block.

    Returns
    -------
    cells : Bunch
        ``proportions``, ``counts``, ``n_empty`` (of ``rule``), ``argmax`` and
        ``nearest`` (each a Bunch of ``proportions``, ``counts``, ``n_empty``,
        ``n_samples``, ``vocab_size``), ``disagreement`` (share of points the
        two rules send to different tokens), ``n_samples``, ``vocab_size``,
        ``region``, ``rule``, ``max_decay`` (``ln n_samples``, the largest decay
        the sample can show), ``matmul_dtype`` (the dtype the matmul ran in),
        ``check`` (a Bunch: ``points`` checked exactly, ``mismatched`` among
        them, ``rechecked`` candidate scores recomputed exactly,
        ``reduced_precision`` asked for), ``seconds`` (of the count) and the
        region's parameters (``low``/``high`` or ``center``/``radius``).

    Raises
    ------
    ValueError
        A model without a next-token head, a degenerate region (zero width or
        radius), non-finite hidden states, an unknown ``region`` or ``rule``,
        or a region given twice or not at all, an unknown
        ``reduced_precision``, a negative ``check_points``.

    Warns
    -----
    UserWarning
        When the reduced matmul disagrees with the exact one on a checked point
        (the count is then exact).

    Examples
    --------
    >>> from intrinsic_rank.bounds import cell_decay
    >>> from intrinsic_rank.nn import as_causal_lm, random_prompt_hidden_states
    >>> lm = as_causal_lm("default")
    >>> states = random_prompt_hidden_states(lm, 2, 6, n_prompts=16)
    >>> cells = decoder_cell_proportions(lm, states, n_samples=4096, random_state=0)
    >>> cells.proportions.shape, round(float(cells.proportions.sum()), 6), cells.n_samples
    ((64,), 1.0, 4096)
    >>> bool(0 <= cells.disagreement <= 1), bool(cell_decay(cells).closed_form > 0)
    (True, True)
    """
    weight, bias = _check_has_head(adapter)
    if region not in REGIONS:
        raise ValueError(f"region must be 'box' or 'ball'; got {region!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be 'argmax' or 'nearest'; got {rule!r}")
    n = check_int(n_samples, "n_samples", 1)
    cap = check_int(max_bytes, "max_bytes", 1)
    reduced = _check_reduced(reduced_precision)
    check = check_int(check_points, "check_points", 0)
    seed = check_seed(random_state)
    params = _region_params(adapter, hidden_states, region, low, high, center, radius)
    check_decoder(adapter)
    dev = _adapter_device(adapter) if device is None else check_device(device)
    dtype = torch.float64 if weight.dtype == torch.float64 else torch.float32
    with torch.no_grad():
        W = weight.detach().to(dev, dtype)
        b = None if bias is None else bias.detach().to(dev, dtype)
        half_norm = 0.5 * (W * W).sum(dim=1)
    _check_region_in_range(params, region, dtype)
    draw = _Sampler(params, region, adapter.width, seed)
    head = _Head(W, b, half_norm, reduced, cap)
    tic = time.perf_counter()
    counts, nearest, differ, checked, mismatched = _count(head, draw, n, check, verbose)
    if mismatched:
        warnings.warn(
            f"the {reduced} head's argmax differed from the {dtype} one on {mismatched} of "
            f"{checked} checked points (either rule); every point is counted in {dtype} "
            "instead", UserWarning, stacklevel=2)
        head = _Head(W, b, half_norm, None, cap)
        counts, nearest, differ, _, _ = _count(head, draw, n, 0, verbose)
    seconds = time.perf_counter() - tic
    real_cells = _rule_cells(counts.cpu().numpy(), n)
    near_cells = _rule_cells(nearest.cpu().numpy(), n)
    chosen = real_cells if rule == "argmax" else near_cells
    return Bunch(
        proportions=chosen.proportions, counts=chosen.counts, n_empty=chosen.n_empty,
        argmax=real_cells, nearest=near_cells, disagreement=float(int(differ) / n),
        n_samples=n, vocab_size=int(adapter.vocab_size), region=region, rule=rule,
        max_decay=float(np.log(n)), matmul_dtype=str(head.reduced or dtype).replace("torch.", ""),
        check=Bunch(points=int(checked), mismatched=int(mismatched),
                    rechecked=int(head.rechecked), reduced_precision=reduced),
        seconds=float(seconds), **params,
    )


def _region_params(adapter, hidden_states, region, low, high, center, radius):
    """The region's ``low``/``high`` (box) or ``center``/``radius`` (ball), from the
    hidden states or as given, checked against the model's width; one ValueError."""
    given = [v for v in (low, high, center, radius) if v is not None]
    if hidden_states is not None:
        if given:
            raise ValueError(
                "give either hidden_states or the region (low/high, center/radius), not both"
            )
        params = _region_from_states(hidden_states, region)
    elif region == "box":
        params = _given_box(low, high, center, radius)
    else:
        if radius is None or low is not None or high is not None:
            raise ValueError(
                "region='ball' needs hidden_states or radius (and optionally center), "
                "not low/high"
            )
        params = dict(center=None if center is None else _finite(center, "center"),
                      radius=check_real(radius, "radius", 0.0, low_open=True))
    d = adapter.width
    dim = params["low"].shape[-1] if region == "box" else d
    if region == "box" and (params["low"].shape != (d,) or params["high"].shape != (d,)):
        raise ValueError(
            f"low and high must have shape ({d},), the model's width; got "
            f"{params['low'].shape} and {params['high'].shape}"
        )
    if region == "ball" and params["center"] is not None and params["center"].shape != (d,):
        raise ValueError(
            f"center must have shape ({d},), the model's width; got {params['center'].shape}"
        )
    if hidden_states is not None and dim != d:
        raise ValueError(f"hidden_states must have d = {d} columns; got {dim}")
    return params


def _given_box(low, high, center, radius):
    """A box given by its corners: finite, of positive width in every coordinate."""
    if low is None or high is None or center is not None or radius is not None:
        raise ValueError(
            "region='box' needs hidden_states or both low and high (not center/radius)"
        )
    params = dict(low=_finite(low, "low"), high=_finite(high, "high"))
    if params["low"].shape == params["high"].shape:
        flat = np.flatnonzero(params["high"] <= params["low"])
        if flat.size:
            raise ValueError(
                f"high must exceed low in every coordinate (a region of zero width "
                f"has no volume); {flat.size} coordinate(s) fail, first at index "
                f"{int(flat[0])}"
            )
    return params


def _check_region_in_range(params, region, dtype):
    """One ValueError when the region reaches beyond the largest number of ``dtype``."""
    if region == "box":
        reach = max(float(np.max(np.abs(params["low"]))), float(np.max(np.abs(params["high"]))))
    else:
        centre = 0.0 if params["center"] is None else float(np.max(np.abs(params["center"])))
        reach = centre + params["radius"]
    if not reach < torch.finfo(dtype).max:
        raise ValueError(
            f"the region reaches coordinates of {reach:.3g}, beyond {dtype}'s range "
            f"({torch.finfo(dtype).max:.3g}); rescale it"
        )


class _Sampler:
    """The region's points, in host blocks seeded by ``random_state`` and the block index."""

    def __init__(self, params, region, d, seed):
        self.params, self.region, self.d, self.seed = params, region, d, seed
        self.block = max(1, _BLOCK_ELEMENTS // d)

    def blocks(self, n):
        for index, start in enumerate(range(0, n, self.block)):
            size = min(self.block, n - start)
            block_seed = keyed_seed(self.seed, index)
            if self.region == "box":
                points = bounds.sample_box(self.params["low"], self.params["high"], size,
                                           block_seed)
            else:
                points = bounds.sample_ball(self.params["center"], self.params["radius"],
                                            self.d, size, block_seed)
            yield torch.from_numpy(points)


class _Head:
    """Both rules' next tokens of a chunk of points, through vocabulary blocks of the head.

    With ``reduced`` None every logit is computed in the head's dtype. With a
    reduced dtype (``"bfloat16"``, ``"float16"``) the matmul runs in it, and every
    token whose reduced score lies within ``tolerance(h)`` of the reduced best
    is scored again in the head's dtype; the best of those is the answer, so a
    point's token differs from the exact one only when the reduced error of a
    logit exceeds the tolerance (which the first ``check_points`` points test).
    """

    def __init__(self, W, b, half_norm, reduced, cap):
        self.W, self.b, self.half_norm, self.reduced = W, b, half_norm, reduced
        V, d = W.shape
        self.vblock = min(V, _VOCAB_BLOCK)
        itemsize = torch.finfo(W.dtype).bits // 8
        # one vocabulary block's scores of both rules and the chunk's points under the cap
        self.rows = max(1, min(_ROWS, cap // (itemsize * (3 * self.vblock + d))))
        self.rechecked = 0
        if reduced is not None:
            self.Wr = W.to(getattr(torch, reduced))
            unit = torch.finfo(self.Wr.dtype).eps / 2
            self.scale = _RECHECK * unit * float(W.norm(dim=1).max())

    def exact_tokens(self, h):
        real_best, near_best = _Best(len(h), h), _Best(len(h), h)
        for lo in range(0, self.W.shape[0], self.vblock):
            hi = lo + self.vblock
            scores = h @ self.W[lo:hi].T
            real_best.update(scores if self.b is None else scores + self.b[lo:hi], lo)
            near_best.update(scores.sub_(self.half_norm[lo:hi]), lo)
        return real_best.index, near_best.index

    def tokens(self, h):
        if self.reduced is None:
            return self.exact_tokens(h)
        hr = h.to(self.Wr.dtype)
        tolerance = self.scale * h.float().norm(dim=1).to(h.dtype)
        real_best, near_best = _Best(len(h), h), _Best(len(h), h)
        for lo in range(0, self.W.shape[0], self.vblock):
            hi = lo + self.vblock
            scores = (hr @ self.Wr[lo:hi].T).to(h.dtype)
            real_best.collect(scores if self.b is None else scores + self.b[lo:hi], lo,
                              tolerance)
            near_best.collect(scores.sub_(self.half_norm[lo:hi]), lo, tolerance)
        real = real_best.rescore(h, self.W, self.b, None, tolerance)
        near = near_best.rescore(h, self.W, None, self.half_norm, tolerance)
        self.rechecked += real_best.n_candidates + near_best.n_candidates
        return real, near


class _Best:
    """Running best score and token of each row over vocabulary blocks."""

    def __init__(self, rows, like):
        self.value = torch.full((rows,), -torch.inf, dtype=like.dtype, device=like.device)
        self.index = torch.zeros(rows, dtype=torch.int64, device=like.device)
        self.rows, self.tokens, self.scores = [], [], []
        self.n_candidates = 0

    def update(self, scores, offset):
        value, index = scores.max(dim=1)
        better = value > self.value  # ties keep the earlier block: the first index wins
        self.value = torch.where(better, value, self.value)
        self.index = torch.where(better, index + offset, self.index)

    def collect(self, scores, offset, tolerance):
        # a token is a candidate if it is within the tolerance of the best so far; one
        # dropped here stays dropped, since the best only grows over later blocks
        self.value = torch.maximum(self.value, scores.max(dim=1).values)
        row, col = torch.nonzero(scores >= (self.value - tolerance)[:, None], as_tuple=True)
        self.rows.append(row)
        self.tokens.append(col + offset)
        self.scores.append(scores[row, col])

    def rescore(self, h, W, b, minus, tolerance):
        row, token = torch.cat(self.rows), torch.cat(self.tokens)
        keep = torch.cat(self.scores) >= (self.value - tolerance)[row]
        row, token = row[keep], token[keep]
        self.n_candidates = int(row.numel())
        exact = (h[row] * W[token]).sum(dim=1)
        if b is not None:
            exact = exact + b[token]
        if minus is not None:
            exact = exact - minus[token]
        best = torch.full((len(h),), -torch.inf, dtype=h.dtype, device=h.device)
        best = best.scatter_reduce(0, row, exact, "amax")
        # among the candidates at the best exact score, the lowest token (argmax's rule)
        at_best = exact == best[row]
        first = torch.full((len(h),), W.shape[0], dtype=torch.int64, device=h.device)
        return first.scatter_reduce(0, row[at_best], token[at_best], "amin")


def _count(head, draw, n, check, verbose):
    """Both rules' cell counts over ``n`` points, and the exact check of the first ones."""
    V = head.W.shape[0]
    dev = head.W.device
    counts = torch.zeros(V, dtype=torch.int64, device=dev)
    nearest = torch.zeros(V, dtype=torch.int64, device=dev)
    differ = torch.zeros((), dtype=torch.int64, device=dev)
    checked = mismatched = done = 0
    with _progress(verbose, n) as advance, torch.no_grad():
        for host in draw.blocks(n):
            for lo in range(0, len(host), head.rows):
                h = host[lo:lo + head.rows].to(dev, head.W.dtype)
                real, near = head.tokens(h)
                if head.reduced is not None and checked < check:
                    take = min(len(h), check - checked)
                    exact_real, exact_near = head.exact_tokens(h[:take])
                    mismatched += int((exact_real != real[:take]).sum()
                                      + (exact_near != near[:take]).sum())
                    checked += take
                    if mismatched:
                        return counts, nearest, differ, checked, mismatched
                counts += torch.bincount(real, minlength=V)
                nearest += torch.bincount(near, minlength=V)
                differ += (real != near).sum()
            done += len(host)
            advance(done)
    return counts, nearest, differ, checked, mismatched


@contextlib.contextmanager
def _progress(verbose, n):
    """A line per block on stderr when ``verbose``: points counted so far."""
    if not verbose:
        yield lambda done: None
        return
    tic = time.perf_counter()

    def advance(done):
        elapsed = time.perf_counter() - tic
        print(f"\rdecoder cells: {done}/{n} points, {elapsed:.0f} s", end="",
              file=sys.stderr, flush=True)

    try:
        yield advance
    finally:
        print(file=sys.stderr, flush=True)


def _check_reduced(value):
    if value is None:
        return None
    if value not in REDUCED_PRECISIONS:
        raise ValueError(
            f"reduced_precision must be 'bfloat16', 'float16' or None; got {value!r}")
    return value
