"""Torch devices, checked; torch is imported only when called."""


def check_device(device, *, probe=False):
    """Validate a torch device specification and return a ``torch.device``.

    Parameters
    ----------
    device : str or torch.device
        E.g. ``"cpu"``, ``"cuda"`` or ``"cuda:1"``.
    probe : bool, default=False
        Also allocate one tensor on a CUDA or MPS device, so that one this
        build or machine cannot use after all is refused before any work
        starts (what the estimators ask for). Every other device type (``xpu``,
        ``hpu``, ``xla``, ``vulkan``, ``privateuseone``, ...) is always probed:
        torch names dozens of them, and without its backend installed each
        fails in its own way (a missing module, ``NotImplementedError``, an
        internal assertion) only when the first tensor is made.

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
        False; if a tensor cannot be allocated on a device of another type
        (with ``probe``, on CUDA and MPS too).

    Examples
    --------
    >>> check_device("cpu").type
    'cpu'
    >>> check_device("meta")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: device='meta': cannot train on the meta device (it holds no data); use 'cpu'...
    >>> check_device("hpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: device='hpu' is not available here (...); use 'cpu' or an available accelerator
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
    if device.type != "cpu" and (probe or device.type not in ("cuda", "mps")):
        try:
            torch.empty(1, device=device)
        except Exception as error:  # noqa: BLE001 - each backend fails its own way
            text = str(error).strip()
            reason = text.splitlines()[0].split(". ")[0] if text else type(error).__name__
            if len(reason) > 120:
                reason = reason[:117] + "..."
            raise ValueError(
                f"device={str(device)!r} is not available here ({reason}); use 'cpu' "
                "or an available accelerator"
            ) from None
    return device
