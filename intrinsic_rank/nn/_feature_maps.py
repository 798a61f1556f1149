"""Kernel feature maps of linear attention, each equal to its published definition.

Every map takes logits ``u`` of shape ``(..., d)`` (an affine function of a
token) and returns features ``phi(u)`` of shape ``(..., r)`` along the last
axis; a kernel is ``<phi(u), phi(u')>``. The maps and their references:

* ``exp``: ``exp(u)``, the positive map of the Min-IP paper's students;
* ``elu+1``: ``elu(u) + 1``, from "Transformers are RNNs: Fast Autoregressive
  Transformers with Linear Attention" (Katharopoulos et al., 2020), as
  flash-linear-attention's ``elu`` map;
* ``relu``: ``max(u, 0)``, flash-linear-attention's ``ReLUFeatureMap``;
* ``hedgehog``: ``softmax([2u, -2u])`` over the ``2d`` features, from "The
  Hedgehog & the Porcupine: Expressive Linear Attentions with Softmax Mimicry"
  (Zhang et al., 2024), as flash-linear-attention's ``HedgehogFeatureMap``;
* ``taylor``: the second-order Taylor map of ``exp``, without duplicate
  features, from "Simple linear attention language models balance the
  recall-throughput tradeoff" (Arora et al., 2024, Based), in
  flash-linear-attention's ``TaylorFeatureMap`` convention;
* ``favor+``: positive random features, from "Rethinking Attention with
  Performers" (Choromanski et al., 2021), with orthogonal projections drawn as
  in the authors' ``create_projection_matrix``.

:data:`FEATURE_MAPS` lists the maps of
:class:`~intrinsic_rank.nn.TripleAttentionHead`, which adds a learned signed
map.
"""

import math

import torch

from .._validation import check_int

__all__ = [
    "FEATURE_MAPS",
    "exp_features",
    "elu_plus_one_features",
    "relu_features",
    "hedgehog_features",
    "taylor_features",
    "taylor_feature_count",
    "favor_features",
    "gaussian_projection",
]

# exp of a clamped logit keeps the features positive and finite in float32
LOGIT_CLAMP = 20.0

FEATURE_MAPS = {
    "exp": (True, "learned exponential map exp(u), u = H W + c (the students' map)"),
    "elu+1": (True, "elu(u) + 1, u = H W + c (linear transformers; flash-linear-attention "
                    "'elu')"),
    "relu": (True, "relu(u), u = H W + c (flash-linear-attention ReLUFeatureMap)"),
    "favor+": (True, "positive random features exp(w_k . u - |u|^2 / 2) / sqrt(r), u = H W, "
                     "w_k orthogonal Gaussian rows with chi norms (Performer FAVOR+)"),
    "hedgehog": (True, "softmax([2u, -2u]) over the 2k features, u = x W + c an affine map "
                       "of the raw bits (Hedgehog; flash-linear-attention "
                       "HedgehogFeatureMap)"),
    "taylor": (False, "2nd-order Taylor map [1, u / d^(1/4), u_i^2 / sqrt(2 d), "
                      "u_i u_j / sqrt(d) (i < j)], u = H W (Based; flash-linear-attention "
                      "TaylorFeatureMap): 1 + d + d(d+1)/2 distinct signed features, "
                      "kernel 1 + s + s^2 / 2 with s = <u, u'> / sqrt(d)"),
    "signed": (False, "learned signed linear map u = H W + c (no sign constraint)"),
}
"""Feature maps of :class:`~intrinsic_rank.nn.TripleAttentionHead`.

Name -> (nonnegative?, description).

The Min-IP theorem covers the nonnegative maps; ``"taylor"`` and ``"signed"``
have signed features, the Min-IP paper's "signed kernel" loophole
(``"signed"`` gives kernels of either sign; ``"taylor"``'s kernel values are
positive, its features are not). Every map's feature count is the rank of its
features (no duplicated columns), so a slot of rank ``r`` uses at most ``r``
features:

* ``"taylor"`` uses the largest ``d`` with ``1 + d + d(d+1)/2 <= r``
  (:func:`taylor_feature_count`), so ranks 1 and 2 are the constant (rank-1)
  kernel and ranks 4, 8, 16, 32, 64 use 3, 6, 15, 28, 55 features;
* ``"hedgehog"`` uses ``r // 2`` pairs (``r`` features for even ``r``); rank 1
  has no pair and is the constant kernel;
* the other maps use ``r`` features.

With the free token table (``encoder="table"``) every map whose input is the
table code realises any ``r``-column positive feature matrix on up to
``hidden`` tokens (``exp``, ``elu+1``; ``relu`` any nonnegative one), so these
differ only in how they train; ``"favor+"`` (random features of an
8-dimensional code) and ``"hedgehog"`` (a softmax of affine functions of the
raw bits) are structurally restricted.
"""


def exp_features(u):
    """``exp(u)``, the logits clamped to ``[-20, 20]`` (positive and finite in float32).

    Parameters
    ----------
    u : torch.Tensor of shape (..., r)

    Returns
    -------
    features : torch.Tensor of shape (..., r)

    Examples
    --------
    >>> import torch
    >>> exp_features(torch.tensor([0.0, 30.0])) == torch.exp(torch.tensor([0.0, 20.0]))
    tensor([True, True])
    """
    return torch.exp(u.clamp(-LOGIT_CLAMP, LOGIT_CLAMP))


def elu_plus_one_features(u):
    """``elu(u) + 1``: ``u + 1`` for ``u > 0``, ``exp(u)`` otherwise.

    The map of "Transformers are RNNs: Fast Autoregressive Transformers with
    Linear Attention" (Katharopoulos et al., 2020); flash-linear-attention's
    ``elu`` feature map (``elu_p1``).

    Parameters
    ----------
    u : torch.Tensor of shape (..., r)

    Returns
    -------
    features : torch.Tensor of shape (..., r)

    Examples
    --------
    >>> import torch
    >>> elu_plus_one_features(torch.tensor([-1.0, 0.0, 2.0]))
    tensor([0.3679, 1.0000, 3.0000])
    """
    return torch.nn.functional.elu(u) + 1.0


def relu_features(u):
    """``max(u, 0)``: flash-linear-attention's ``ReLUFeatureMap``.

    Parameters
    ----------
    u : torch.Tensor of shape (..., r)

    Returns
    -------
    features : torch.Tensor of shape (..., r)

    Examples
    --------
    >>> import torch
    >>> relu_features(torch.tensor([-1.0, 0.5]))
    tensor([0.0000, 0.5000])
    """
    return torch.relu(u)


def hedgehog_features(u, pair_mask=None):
    """The Hedgehog map ``softmax([2u, -2u])``: ``2k`` positive features summing to 1.

    From "The Hedgehog & the Porcupine: Expressive Linear Attentions with
    Softmax Mimicry" (Zhang et al., 2024): the pairs ``exp(u_j)``,
    ``exp(-u_j)`` of one affine map ``u = x W + c``, normalised by a softmax
    over the feature dimension. This is flash-linear-attention's
    ``HedgehogFeatureMap`` (``fla/modules/feature_map.py``): one softmax over
    the ``2k`` logits ``[2u, -2u]``, features ``j`` and ``k + j`` tied to the
    same ``u_j``.

    Parameters
    ----------
    u : torch.Tensor of shape (..., k)
    pair_mask : torch.Tensor of shape (..., k) or None, default=None
        Nonzero for the pairs in use; the others are dropped from the softmax
        (features 0). Every row must keep at least one pair.

    Returns
    -------
    features : torch.Tensor of shape (..., 2k)
        ``[softmax part of 2u, softmax part of -2u]``.

    Examples
    --------
    >>> import torch
    >>> hedgehog_features(torch.tensor([0.0]))
    tensor([0.5000, 0.5000])
    >>> float(hedgehog_features(torch.tensor([0.3, -1.0])).sum())
    1.0
    """
    logits = torch.cat([2 * u, -2 * u], dim=-1)
    if pair_mask is not None:
        keep = torch.cat([pair_mask, pair_mask], dim=-1) != 0
        logits = logits.masked_fill(~keep, -math.inf)
    return torch.softmax(logits, dim=-1)


def taylor_feature_count(d):
    """``1 + d + d(d+1)/2``: the distinct features of the Taylor map of ``d`` inputs.

    Parameters
    ----------
    d : int
        Input width, ``>= 0``.

    Returns
    -------
    count : int

    Examples
    --------
    >>> [taylor_feature_count(d) for d in range(5)]
    [1, 3, 6, 10, 15]
    """
    d = check_int(d, "d", 0)
    return 1 + d + d * (d + 1) // 2


def taylor_features(u, dim=None):
    """The second-order Taylor map of ``exp``, ``1 + d + d(d+1)/2`` distinct features.

    ``phi(u) = [1, u / d^(1/4), u_i^2 / sqrt(2 d), u_i u_j / sqrt(d) (i < j)]``,
    so that ``<phi(u), phi(u')> = 1 + s + s^2 / 2`` with ``s = <u, u'> / sqrt(d)``
    exactly: the second-order Taylor expansion of ``exp(s)``, with each product
    ``u_i u_j`` once (the off-diagonal ones carry the factor ``sqrt 2`` of the
    two equal terms of ``vec(u u^T)``), so the feature count is the rank. From
    "Simple linear attention language models balance the recall-throughput
    tradeoff" (Arora et al., 2024, Based), in the convention of
    flash-linear-attention's ``TaylorFeatureMap``: the columns are ``1``, the
    ``d`` linear terms, the ``d`` squares, then the products ``i < j`` in
    row-major (``torch.triu_indices``) order.

    Parameters
    ----------
    u : torch.Tensor of shape (..., d)
    dim : torch.Tensor broadcastable to (..., 1), or None, default=None
        The ``d`` of the scaling (``None``: ``u.shape[-1]``). Coordinates of
        ``u`` set to zero beyond a smaller ``dim`` give zero features, so a
        narrower map is a masked wider one.

    Returns
    -------
    features : torch.Tensor of shape (..., 1 + d + d(d+1)/2)

    Examples
    --------
    >>> import torch
    >>> q, k = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0])
    >>> s = float(q @ k) / 2 ** 0.5
    >>> round(float(taylor_features(q) @ taylor_features(k)), 6) == round(1 + s + s * s / 2, 6)
    True
    """
    d = u.shape[-1]
    scale = torch.full_like(u[..., :1], float(max(d, 1))) if dim is None else (
        torch.as_tensor(dim, dtype=u.dtype, device=u.device).clamp_min(1))
    root = scale.sqrt()
    rows, cols = torch.triu_indices(d, d, 1, device=u.device)
    return torch.cat([
        torch.ones_like(u[..., :1]),
        u / root.sqrt(),
        u * u / (root * math.sqrt(2.0)),
        u[..., rows] * u[..., cols] / root,
    ], dim=-1)


def favor_features(u, omega, feature_mask=None):
    """Performer's positive random features ``exp(w_k·u - |u|^2 / 2) / sqrt(r)``.

    From "Rethinking Attention with Performers" (Choromanski et al., 2021),
    FAVOR+: for rows ``w_k`` with marginal ``N(0, I)``,
    ``E[<phi(u), phi(u')>] = exp(<u, u'>)`` (unbiased), every feature positive.
    The exponent is clamped to ``[-20, 20]`` (finite in float32).

    Parameters
    ----------
    u : torch.Tensor of shape (..., L, d)
    omega : torch.Tensor of shape (..., r, d)
        The projection (:func:`gaussian_projection`).
    feature_mask : torch.Tensor broadcastable to (..., L, r) or None, default=None
        Nonzero for the features in use; ``r`` in ``1 / sqrt(r)`` is then their
        number.

    Returns
    -------
    features : torch.Tensor of shape (..., L, r)

    Examples
    --------
    >>> import torch
    >>> favor_features(torch.zeros(1, 3), torch.eye(3) * 2.0)
    tensor([[0.5774, 0.5774, 0.5774]])
    """
    proj = u @ omega.transpose(-1, -2)
    expo = proj - 0.5 * (u * u).sum(-1, keepdim=True)
    features = torch.exp(expo.clamp(-LOGIT_CLAMP, LOGIT_CLAMP))
    if feature_mask is None:
        return features / math.sqrt(omega.shape[-2])
    count = (feature_mask != 0).sum(-1, keepdim=True).clamp_min(1).to(u.dtype)
    return features * feature_mask / count.sqrt()


def _orthogonal_block(dim, generator, dtype):
    gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)
    # the sign fix makes q Haar-distributed, so each row is uniform on the sphere
    q = q * torch.sign(torch.diagonal(r))[None, :]
    return q.T.to(dtype)


def gaussian_projection(n_features, dim, generator=None, orthogonal=True,
                        dtype=torch.float32):
    """Random projection rows ``w_k`` with marginal ``N(0, I_dim)``, for :func:`favor_features`.

    ``orthogonal=True`` (Performer's default, "Rethinking Attention with
    Performers", Choromanski et al., 2021; ``create_projection_matrix`` of the
    authors' code with ``scaling=0``): blocks of ``dim`` rows, each block the
    rows of a Haar-random orthogonal matrix (QR of a Gaussian matrix, signs
    fixed by ``R``'s diagonal), the last block truncated, every row then
    rescaled to the norm of an independent ``N(0, I_dim)`` vector (chi with
    ``dim`` degrees of freedom). Rows of one block are mutually orthogonal;
    each row is still exactly ``N(0, I)``, so the features stay unbiased and
    their variance drops. ``orthogonal=False``: i.i.d. Gaussian rows.

    Parameters
    ----------
    n_features : int
        Number of rows ``r``.
    dim : int
        Their dimension.
    generator : torch.Generator or None, default=None
    orthogonal : bool, default=True
    dtype : torch.dtype, default=torch.float32

    Returns
    -------
    omega : torch.Tensor of shape (n_features, dim)

    Examples
    --------
    >>> import torch
    >>> w = gaussian_projection(4, 4, torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> gram = w @ w.T
    >>> bool((gram - torch.diag(torch.diagonal(gram))).abs().max() < 1e-12)
    True
    """
    n_features = check_int(n_features, "n_features", 1)
    dim = check_int(dim, "dim", 1)
    if not orthogonal:
        return torch.randn(n_features, dim, generator=generator, dtype=dtype)
    n_blocks = -(-n_features // dim)
    rows = torch.cat([_orthogonal_block(dim, generator, dtype) for _ in range(n_blocks)])
    norms = torch.randn(n_features, dim, generator=generator, dtype=torch.float64).norm(dim=1)
    return rows[:n_features] * norms[:, None].to(dtype)
