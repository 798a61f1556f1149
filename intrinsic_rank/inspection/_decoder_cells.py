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

import numpy as np
import torch
from sklearn.utils import Bunch

from .. import bounds
from .._validation import check_device, check_int, check_real, check_seed, keyed_seed
from ..nn import CausalLMAdapter

__all__ = ["decoder_cell_proportions", "check_decoder"]

REGIONS = ("box", "ball")
RULES = ("argmax", "nearest")
_BLOCK_ELEMENTS = 2**22  # host floats per sampling block (32 MiB of float64)


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
                             rule="argmax", random_state=0, max_bytes=2**27, device=None):
    """Share ``p_t`` of a hidden-state region that a model's head sends to each token.

    Monte Carlo: ``n_samples`` points uniform in the region, each assigned its
    next token by the real decision rule ``argmax(W h + b)`` of the model's
    output head (:meth:`~intrinsic_rank.nn.CausalLMAdapter.output_head`) and,
    on the same points, by the authors' rule, the Euclidean-nearest row of ``W``
    (``argmax(w . h - |w|**2 / 2)``, their ``voronoi_volume.py``). The two agree
    only when every row has the same norm and there is no bias.

    The points are drawn on the host with numpy in blocks whose seeds depend
    only on ``random_state`` and the block's index (so the numbers do not depend
    on ``device`` or ``max_bytes``), then both rules run on ``device`` in chunks
    whose logits take at most about ``max_bytes``, in float32 (float64 for a
    float64 head). The region is the one ``final_hidden`` states live in:
    after the model's final norm, which is what the head reads
    (:func:`check_decoder` verifies it on the model first).

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

    Returns
    -------
    cells : Bunch
        ``proportions``, ``counts``, ``n_empty`` (of ``rule``), ``argmax`` and
        ``nearest`` (each a Bunch of ``proportions``, ``counts``, ``n_empty``,
        ``n_samples``, ``vocab_size``), ``disagreement`` (share of points the
        two rules send to different tokens), ``n_samples``, ``vocab_size``,
        ``region``, ``rule`` and the region's parameters (``low``/``high`` or
        ``center``/``radius``).

    Raises
    ------
    ValueError
        A model without a next-token head, a degenerate region (zero width or
        radius), non-finite hidden states, an unknown ``region`` or ``rule``,
        or a region given twice or not at all.

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
    seed = check_seed(random_state)
    given = [v for v in (low, high, center, radius) if v is not None]
    if hidden_states is not None:
        if given:
            raise ValueError(
                "give either hidden_states or the region (low/high, center/radius), not both"
            )
        params = _region_from_states(hidden_states, region)
    elif region == "box":
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
    else:
        if radius is None or low is not None or high is not None:
            raise ValueError(
                "region='ball' needs hidden_states or radius (and optionally center), "
                "not low/high"
            )
        params = dict(center=None if center is None else _finite(center, "center"),
                      radius=check_real(radius, "radius", 0.0, low_open=True))
    d, V = adapter.width, adapter.vocab_size
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
    check_decoder(adapter)

    dev = _adapter_device(adapter) if device is None else check_device(device)
    dtype = torch.float64 if weight.dtype == torch.float64 else torch.float32
    with torch.no_grad():
        W = weight.detach().to(dev, dtype)
        b = None if bias is None else bias.detach().to(dev, dtype)
        half_norm = 0.5 * (W * W).sum(dim=1)
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
    itemsize = torch.finfo(dtype).bits // 8
    rows = max(1, cap // (itemsize * (3 * V + d)))
    block = max(1, _BLOCK_ELEMENTS // d)
    counts = torch.zeros(V, dtype=torch.int64, device=dev)
    nearest = torch.zeros(V, dtype=torch.int64, device=dev)
    differ = torch.zeros((), dtype=torch.int64, device=dev)
    for index, start in enumerate(range(0, n, block)):
        size = min(block, n - start)
        block_seed = keyed_seed(seed, index)
        if region == "box":
            points = bounds.sample_box(params["low"], params["high"], size, block_seed)
        else:
            points = bounds.sample_ball(params["center"], params["radius"], d, size,
                                        block_seed)
        host = torch.from_numpy(points)
        with torch.no_grad():
            for lo in range(0, size, rows):
                h = host[lo:lo + rows].to(dev, dtype)
                scores = h @ W.T
                real = (scores if b is None else scores + b).argmax(dim=1)
                near = (scores - half_norm).argmax(dim=1)
                counts += torch.bincount(real, minlength=V)
                nearest += torch.bincount(near, minlength=V)
                differ += (real != near).sum()
    real_cells = _rule_cells(counts.cpu().numpy(), n)
    near_cells = _rule_cells(nearest.cpu().numpy(), n)
    chosen = real_cells if rule == "argmax" else near_cells
    return Bunch(
        proportions=chosen.proportions, counts=chosen.counts, n_empty=chosen.n_empty,
        argmax=real_cells, nearest=near_cells, disagreement=float(int(differ) / n),
        n_samples=n, vocab_size=int(V), region=region, rule=rule, **params,
    )
