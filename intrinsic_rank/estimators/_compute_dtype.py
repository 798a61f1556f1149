"""The dtype the students' training forward pass runs in, chosen without a timing.

``compute_dtype="auto"`` trains in bfloat16 on a CUDA device with native
bfloat16 arithmetic (``torch.cuda.is_bf16_supported(including_emulation=False)``,
compute capability 8.0 and later) and in float32 everywhere else, the CPU
included. The choice follows from the device alone, so the same data, seed and
device type give the same numbers whatever else the machine is doing.
``"float32"`` and ``"bfloat16"`` are explicit requests; ``"bfloat16"`` is
refused on a CUDA device that cannot run it at all.
"""

import contextlib

import torch

__all__ = ["COMPUTE_DTYPES", "resolve_compute_dtype", "training_autocast"]

COMPUTE_DTYPES = ("auto", "float32", "bfloat16")
"""The values of ``AttentionRankEstimator(compute_dtype=...)``."""


def _cuda_bfloat16(device, including_emulation):
    with torch.cuda.device(device):
        return torch.cuda.is_bf16_supported(including_emulation=including_emulation)


def resolve_compute_dtype(compute_dtype, device):
    """The dtype a fit trains in: ``compute_dtype`` with ``"auto"`` resolved by the device.

    Parameters
    ----------
    compute_dtype : {"auto", "float32", "bfloat16"}
    device : str or torch.device

    Returns
    -------
    dtype : {"float32", "bfloat16"}

    Raises
    ------
    ValueError
        ``"bfloat16"`` on a CUDA device without bfloat16 support, or an
        unknown value.

    Examples
    --------
    >>> resolve_compute_dtype("auto", "cpu")
    'float32'
    >>> resolve_compute_dtype("bfloat16", "cpu")
    'bfloat16'
    """
    device = torch.device(device)
    if compute_dtype == "float32":
        return "float32"
    if compute_dtype == "auto":
        native = device.type == "cuda" and _cuda_bfloat16(device, including_emulation=False)
        return "bfloat16" if native else "float32"
    if compute_dtype == "bfloat16":
        if device.type == "cuda" and not _cuda_bfloat16(device, including_emulation=True):
            raise ValueError(f"compute_dtype='bfloat16' needs a device that supports "
                             f"bfloat16; {device} does not (torch.cuda.is_bf16_supported() "
                             "is False): use compute_dtype='float32' or 'auto'")
        return "bfloat16"
    raise ValueError(f"compute_dtype must be one of {list(COMPUTE_DTYPES)}; got "
                     f"{compute_dtype!r}")


def training_autocast(compute_dtype, device):
    """The context a student's training forward pass runs in at ``compute_dtype``.

    ``"float32"``: no change. ``"bfloat16"``: ``torch.autocast`` to bfloat16 on
    ``device``'s type, so matrix products (projections, scores, mixing) run in
    bfloat16 while the parameters, the optimiser state, the loss (computed on
    the outputs cast back to float32) and every evaluation stay float32.

    Parameters
    ----------
    compute_dtype : {"float32", "bfloat16"}
        A resolved dtype (:func:`resolve_compute_dtype`).
    device : str or torch.device

    Returns
    -------
    context : context manager

    Examples
    --------
    >>> import torch
    >>> with training_autocast("bfloat16", "cpu"):
    ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
    torch.bfloat16
    >>> with training_autocast("float32", "cpu"):
    ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
    torch.float32
    """
    if compute_dtype == "float32":
        return contextlib.nullcontext()
    if compute_dtype == "bfloat16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"training_autocast takes a resolved compute dtype, 'float32' or "
                     f"'bfloat16'; got {compute_dtype!r}")
