"""Torch devices, checked; torch is imported only when called."""


def check_device(device, *, probe=False):
    """Validate a torch device specification and return a ``torch.device``.

    Parameters
    ----------
    device : str or torch.device
        E.g. ``"cpu"``, ``"cuda"`` or ``"cuda:1"``.
    probe : bool, default=False
        Also allocate one tensor on a device other than the CPU, so that a
        device torch knows but this build or machine cannot use is refused
        before any work starts (what the estimators ask for).

    Returns
    -------
    device : torch.device

    Raises
    ------
    ValueError
        If torch does not know the device; if it is ``"meta"`` (tensors without
        data, nothing can be trained there); if CUDA is asked for and absent, or
        ``"cuda:N"`` names a GPU beyond ``torch.cuda.device_count()``; or if
        ``"mps"`` is asked for where ``torch.backends.mps.is_available()`` is
        False; with ``probe``, if a tensor cannot be allocated there.

    Examples
    --------
    >>> check_device("cpu").type
    'cpu'
    >>> check_device("meta")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: device='meta': cannot train on the meta device (it holds no data); use 'cpu'...
    """
    import torch

    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"unknown device {device!r}: {error}") from None
    if device.type == "meta":
        raise ValueError(
            "device='meta': cannot train on the meta device (it holds no data); "
            "use 'cpu' or 'cuda'"
        )
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device='cuda' was requested but no CUDA device is available")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"device='{device}' names CUDA device {device.index}, but only {count} "
                f"CUDA device(s) are available (indices 0 to {count - 1})"
            )
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(
                f"device='{device}' was requested but the MPS backend is not available "
                "here (torch.backends.mps.is_available() is False); use 'cpu'"
            )
    if probe and device.type != "cpu":
        try:
            torch.empty(1, device=device)
        except (RuntimeError, AssertionError) as error:
            text = str(error).strip()
            reason = text.splitlines()[0] if text else type(error).__name__
            raise ValueError(
                f"device={str(device)!r} is not available here ({reason}); use 'cpu' "
                "or an available accelerator"
            ) from None
    return device
