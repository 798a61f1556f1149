"""The arithmetic of one attention head, shared by its recomputation and by its students.

A head of a causal LM maps its layer's input ``X`` (``(n, L, d)``) to its output ``Y``
(``(n, L, head_dim)``) in the steps the ``transformers`` families take, in this order:

1. the projections ``q = X W_Q + b_Q``, ``k = X W_K + b_K``, ``v = X W_V + b_V``;
2. an RMS norm of ``q`` and of ``k`` where the family has one (:class:`HeadNorm`:
   Qwen3 and Gemma 3 over each head, OLMo-2 over the whole layer's projection);
3. rotary positions on the first ``rotary_dim`` channels of ``q`` and ``k``
   (:func:`rope_tables`, :func:`rotate`: the ``rotate_half`` layout of Llama, with
   ``cos`` and ``sin`` times the rope type's ``attention_scaling``; GPT-NeoX and
   Phi rotate a fraction of each head and pass the rest through);
4. the scores ``scale * q k^T``, soft-capped as ``cap * tanh(s / cap)`` where the
   family caps them (:func:`soft_cap`, Gemma 2);
5. the mask: query ``i`` sees keys ``j <= i`` (causal), and with a sliding window
   of ``w`` only ``i - w < j <= i`` (:func:`visible_keys`, Mistral, Qwen2, Gemma 2/3);
6. ``Y = softmax(scores) v``.

:func:`~intrinsic_rank.inspection.head_output` runs these steps in float64 from a
head's facts; :class:`~intrinsic_rank.nn.RotarySoftmaxStudent` runs the same steps
with a query projection of bounded rank, so a student can be the head exactly.
"""

import dataclasses

import numpy as np
import torch

__all__ = ["ROPE_LAYOUTS", "HeadNorm", "rope_frequencies", "rope_tables", "rotate", "soft_cap",
           "visible_keys"]

ROPE_LAYOUTS = ("rotate_half",)
"""Channel pairings of rotary embeddings that :func:`rotate` implements: ``"rotate_half"``
pairs channel ``i`` with ``i + rotary_dim / 2`` (Hugging Face's Llama, Qwen2, Mistral, Gemma,
GPT-NeoX and Phi-3)."""


def rope_frequencies(head_dim, theta=10000.0):
    """Rotary inverse frequencies ``theta ** (-2 i / head_dim)``, for ``0 <= i < head_dim/2``.

    The default rotary scheme of Hugging Face's Llama-family models (no
    frequency scaling).

    Parameters
    ----------
    head_dim : int
        Even width of a head's queries and keys (of its rotated part, with
        partial rotary embeddings).
    theta : float, default=10000.0
        The rotary base (``rope_theta``; SmolLM2-135M-Instruct uses 100000).

    Returns
    -------
    inv_freq : torch.Tensor of shape (head_dim // 2,), float64

    Examples
    --------
    >>> rope_frequencies(4, theta=100.0)
    tensor([1.0000, 0.1000], dtype=torch.float64)
    """
    if head_dim % 2:
        raise ValueError(f"rotary embeddings need an even head_dim; got {head_dim}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return float(theta) ** (-exponents)


def rope_tables(inv_freq, length, dtype=torch.float64, device="cpu", scaling=1.0):
    """``cos`` and ``sin`` of the rotary angles ``p * f``, positions ``0 <= p < length``.

    In the ``"rotate_half"`` layout: the ``rotary_dim / 2`` frequencies twice, so that
    channel ``i`` and channel ``i + rotary_dim / 2`` turn by the same angle. The
    angles are computed in float64.

    Parameters
    ----------
    inv_freq : array-like of shape (rotary_dim // 2,)
    length : int
    dtype : torch.dtype, default=torch.float64
    device : str or torch.device, default="cpu"
    scaling : float, default=1.0
        A factor of both tables: the ``attention_scaling`` of a rope type
        (YaRN's and LongRoPE's; 1 for the default, linear and Llama 3 types).

    Returns
    -------
    cos, sin : torch.Tensor of shape (length, rotary_dim)

    Examples
    --------
    >>> cos, sin = rope_tables([1.0, 0.5], 3)
    >>> cos.shape, float(sin[2, 1]) == float(sin[2, 3])
    (torch.Size([3, 4]), True)
    """
    inv_freq = torch.as_tensor(inv_freq, dtype=torch.float64).cpu()
    angles = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    scaling = float(scaling)
    return ((angles.cos() * scaling).to(device=device, dtype=dtype),
            (angles.sin() * scaling).to(device=device, dtype=dtype))


def rotate(x, cos, sin):
    """Rotary embedding of ``x`` in the ``"rotate_half"`` layout, on its first channels.

    ``x cos + rotate_half(x) sin`` on the first ``rotary_dim = cos.shape[-1]``
    channels (``rotate_half(x) = [-x2, x1]`` for the halves ``x1, x2`` of those
    channels, so channel ``i`` and channel ``i + rotary_dim / 2`` turn
    together); the channels after them pass unchanged (partial rotary
    embeddings: GPT-NeoX's ``rotary_pct``, Phi's ``partial_rotary_factor``).

    Parameters
    ----------
    x : torch.Tensor of shape (..., L, head_dim)
    cos, sin : torch.Tensor of shape (L, rotary_dim), ``rotary_dim <= head_dim``

    Returns
    -------
    rotated : torch.Tensor of shape (..., L, head_dim)

    Examples
    --------
    >>> import math, torch
    >>> cos = torch.tensor([[math.cos(1.0)] * 2]); sin = torch.tensor([[math.sin(1.0)] * 2])
    >>> rotated = rotate(torch.tensor([[1.0, 0.0]]), cos, sin)
    >>> [round(v, 4) for v in rotated[0].tolist()]
    [0.5403, 0.8415]
    >>> rotate(torch.tensor([[1.0, 0.0, 7.0]]), cos, sin)[0, 2].item()  # not rotated
    7.0
    """
    width = cos.shape[-1]
    if width > x.shape[-1] or width % 2:
        raise ValueError(f"the rotary tables turn {width} channels; x has {x.shape[-1]}")
    part = x[..., :width]
    half = width // 2
    turned = torch.cat([-part[..., half:], part[..., :half]], dim=-1)
    rotated = part * cos + turned * sin
    if width == x.shape[-1]:
        return rotated
    return torch.cat([rotated, x[..., width:]], dim=-1)


def soft_cap(scores, cap):
    """``cap * tanh(scores / cap)``: logit soft-capping (Gemma 2); ``scores`` when ``cap`` is None.

    Parameters
    ----------
    scores : torch.Tensor
    cap : float or None

    Returns
    -------
    capped : torch.Tensor

    Examples
    --------
    >>> import torch
    >>> soft_cap(torch.tensor([0.0, 100.0]), 2.0).tolist()
    [0.0, 2.0]
    """
    if cap is None:
        return scores
    return torch.tanh(scores / float(cap)) * float(cap)


def visible_keys(length, causal=True, window=None, device="cpu"):
    """Which keys each query sees: ``keep[i, j]``, query ``i`` and key ``j``.

    Parameters
    ----------
    length : int
    causal : bool, default=True
        Query ``i`` sees keys ``j <= i`` only.
    window : int or None, default=None
        A sliding window: query ``i`` sees keys ``j > i - window`` only (with
        ``causal``, the ``window`` positions ``i - window + 1 .. i``: the mask of
        ``transformers``' sliding-window layers).
    device : str or torch.device, default="cpu"

    Returns
    -------
    keep : torch.Tensor of shape (length, length), bool

    Examples
    --------
    >>> visible_keys(4, window=2).int().tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    """
    positions = torch.arange(length, device=device)
    query, key = positions[:, None], positions[None, :]
    keep = torch.ones(length, length, dtype=torch.bool, device=device)
    if causal:
        keep &= key <= query
    if window is not None:
        keep &= key > query - int(window)
    return keep


@dataclasses.dataclass(frozen=True, eq=False)
class HeadNorm:
    """The RMS norm a head's queries (or keys) pass through after their projection.

    ``u -> gain * u / sqrt(mean(z ** 2) + eps)``, where ``u`` is the head's
    projection ``X w + b`` and ``z`` the vector the norm averages over:

    * ``u`` itself when ``layer_w`` is None (Qwen3 and Gemma 3 normalise each
      head over its ``head_dim`` channels);
    * the layer's whole projection ``X layer_w + layer_b`` with the head's own
      columns ``columns`` holding ``u`` (OLMo-2 normalises the queries of every
      head of the layer together, and the keys of every key/value head).

    Parameters
    ----------
    gain : ndarray of shape (head_dim,)
        The multiplier after normalising, the head's channels of it: the norm's
        ``weight`` (Qwen3, OLMo-2), ``1 + weight`` (Gemma 3).
    eps : float
        Added to the mean square.
    layer_w : ndarray of shape (d_model, width) or None, default=None
        The layer's whole projection (shared by the heads of the layer, not copied).
    layer_b : ndarray of shape (width,) or None, default=None
        Its bias (zeros where the model has none); needed with ``layer_w``.
    columns : (int, int) or None, default=None
        ``(start, stop)``: the head's columns in ``layer_w``.

    Attributes
    ----------
    axis : {"head", "layer"}
        What the norm averages over.
    width : int
        How many channels it averages over.

    Examples
    --------
    >>> import numpy as np, torch
    >>> norm = HeadNorm(gain=np.ones(2), eps=0.0)
    >>> norm.apply(torch.tensor([[3.0, 4.0]]), None)   # rms 3.5355
    tensor([[0.8485, 1.1314]])
    >>> layer = HeadNorm(gain=np.ones(1), eps=0.0, layer_w=np.eye(2), layer_b=np.zeros(2),
    ...                  columns=(0, 1))
    >>> layer.axis, layer.width
    ('layer', 2)
    >>> layer.apply(torch.tensor([[3.0]]), torch.tensor([[3.0, 4.0]]))  # mean of 3² and 4²
    tensor([[0.8485]])
    """

    gain: np.ndarray
    eps: float
    layer_w: np.ndarray = None
    layer_b: np.ndarray = None
    columns: tuple = None

    @property
    def axis(self):
        """``"head"``: over the head's own channels; ``"layer"``: over the layer's projection."""
        return "head" if self.layer_w is None else "layer"

    @property
    def width(self):
        """The number of channels the mean square is taken over."""
        return len(self.gain) if self.layer_w is None else int(self.layer_w.shape[1])

    def rest_squares(self, X):
        """The sum of squares of the layer's other channels on ``X``: ``(..., L, 1)``, or 0.

        Parameters
        ----------
        X : torch.Tensor of shape (..., L, d_model)
        """
        if self.layer_w is None:
            return 0.0
        w = torch.as_tensor(self.layer_w, dtype=X.dtype, device=X.device)
        b = torch.as_tensor(self.layer_b, dtype=X.dtype, device=X.device)
        full = X @ w + b
        start, stop = self.columns
        full[..., start:stop] = 0.0
        return full.square().sum(dim=-1, keepdim=True)

    def apply(self, u, X, rest=None):
        """``gain * u / sqrt(mean(z ** 2) + eps)`` (class docstring).

        Parameters
        ----------
        u : torch.Tensor of shape (..., L, head_dim)
            The head's projection; leading axes broadcast against ``X``'s (a
            student's slots first).
        X : torch.Tensor of shape (..., L, d_model) or None
            The inputs, read only for the layer axis.
        rest : torch.Tensor or None, default=None
            :meth:`rest_squares` of ``X``, when already computed.

        Returns
        -------
        normalised : torch.Tensor of the shape of ``u``
        """
        if rest is None:
            rest = self.rest_squares(X)
        mean = (u.square().sum(dim=-1, keepdim=True) + rest) / self.width
        gain = torch.as_tensor(self.gain, dtype=u.dtype, device=u.device)
        return u * torch.rsqrt(mean + float(self.eps)) * gain

    def with_bias_row(self):
        """The same norm for inputs with a constant 1 appended (the bias as one more row).

        Examples
        --------
        >>> import numpy as np
        >>> norm = HeadNorm(np.ones(1), 0.0, np.eye(2), np.array([1.0, 2.0]), (0, 1))
        >>> norm.with_bias_row().layer_w.tolist()
        [[1.0, 0.0], [0.0, 1.0], [1.0, 2.0]]
        """
        if self.layer_w is None:
            return self
        return dataclasses.replace(self, layer_w=np.vstack([self.layer_w, self.layer_b[None]]),
                                   layer_b=np.zeros_like(self.layer_b))
