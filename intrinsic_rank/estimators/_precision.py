"""Whether bfloat16 training is fast here: measured once per process, device and problem size.

``precision="auto"`` trains in bfloat16 only where that is measured to be faster.
Two measurements, each cached for the rest of the process:

* the **device** (:func:`device_bfloat16`): a 512 x 512 float32 matrix product
  against the same product under bfloat16 autocast, best of a few runs. The
  device has fast bfloat16 when autocast is at least :data:`SPEEDUP_NEEDED`
  times faster (on a CPU with AMX or AVX512-BF16 it is several times faster;
  without them bfloat16 is emulated and slower). A CUDA device must also report
  ``torch.cuda.is_bf16_supported()``. No CPU name is read.
* the **problem** (:func:`problem_bfloat16`): one training step of the student
  about to be trained (its class, sizes, ranks and batch), timed in both
  precisions. At small sizes the casts autocast adds cost more than the
  products save (``d = 16`` on the AMX CPU), and ``"auto"`` then stays float32.

The escape hatches, for tests and for users who want the answer fixed:
the environment variable ``INTRINSIC_RANK_BF16`` (``"0"``/``"off"``: no fast
bfloat16 anywhere; ``"1"``/``"on"``: fast everywhere and for every problem size,
skipping both measurements; unset or ``"measure"``: measure), read at every
decision, and :func:`clear_cache`, which forgets every measurement.
"""

import os
import time

import torch

from ._batching import training_autocast

__all__ = ["ENV_VAR", "SPEEDUP_NEEDED", "clear_cache", "device_bfloat16", "problem_bfloat16"]

ENV_VAR = "INTRINSIC_RANK_BF16"
"""Environment variable overriding the measurements (see the module docstring)."""

SPEEDUP_NEEDED = 1.25
"""Measured float32 / bfloat16 time ratio at or above which bfloat16 counts as faster.

Above 1 by a margin: the measurement is noisy on a shared machine, and a
bfloat16 sweep may add a short float32 polish."""

_DEVICE_SIZE = 512
_REPEATS = 5
_device_cache = {}
_problem_cache = {}


def clear_cache():
    """Forget every measurement of this process (the next decision measures again).

    Examples
    --------
    >>> clear_cache()
    """
    _device_cache.clear()
    _problem_cache.clear()


def _forced():
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("", "measure"):
        return None
    if value in ("0", "off", "no", "false"):
        return False
    if value in ("1", "on", "yes", "true"):
        return True
    raise ValueError(f"{ENV_VAR} must be '0'/'off', '1'/'on' or 'measure'; got {value!r}")


def _device_key(device):
    device = torch.device(device)
    index = device.index
    if device.type == "cuda" and index is None:
        index = torch.cuda.current_device()
    return device.type, index


def _synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _best_time(function, device, repeats=_REPEATS):
    function()  # warm-up: kernels chosen, buffers allocated
    _synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def _ratio(run, device, repeats=_REPEATS):
    """float32 time over bfloat16 time of ``run(precision)``, interleaved (best of each)."""
    times = {"float32": float("inf"), "bfloat16": float("inf")}
    for precision in times:
        run(precision)  # warm-up
    _synchronize(device)
    for _ in range(repeats):
        for precision in times:
            start = time.perf_counter()
            run(precision)
            _synchronize(device)
            times[precision] = min(times[precision], time.perf_counter() - start)
    return times["float32"] / times["bfloat16"]


def device_bfloat16(device):
    """Whether ``device`` has fast bfloat16 matrix products, measured once per process.

    Parameters
    ----------
    device : str or torch.device

    Returns
    -------
    result : dict
        ``fast`` (bool), ``speedup`` (float32 time over bfloat16-autocast time of a
        512 x 512 product; ``nan`` when not measured) and ``reason`` (text).

    Examples
    --------
    >>> sorted(device_bfloat16("cpu"))
    ['fast', 'reason', 'speedup']
    """
    forced = _forced()
    if forced is not None:
        return {"fast": forced, "speedup": float("nan"),
                "reason": f"{ENV_VAR}={os.environ[ENV_VAR]} (measurement skipped)"}
    key = _device_key(device)
    if key in _device_cache:
        return _device_cache[key]
    kind = key[0]
    name = f"{kind}" if key[1] is None else f"{kind}:{key[1]}"
    if kind == "cuda" and not torch.cuda.is_bf16_supported():
        result = {"fast": False, "speedup": float("nan"),
                  "reason": f"{name} does not support bfloat16 (torch.cuda.is_bf16_supported())"}
    elif kind not in ("cpu", "cuda"):
        result = {"fast": False, "speedup": float("nan"),
                  "reason": f"bfloat16 autocast is not measured on {kind} devices"}
    else:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(_DEVICE_SIZE, _DEVICE_SIZE, generator=generator).to(device)
        b = torch.randn(_DEVICE_SIZE, _DEVICE_SIZE, generator=generator).to(device)

        def product(precision):
            with training_autocast(precision, device):
                return a @ b

        try:
            speedup = _ratio(product, device)
        except RuntimeError as error:  # autocast unsupported: never fail a fit on it
            result = {"fast": False, "speedup": float("nan"),
                      "reason": f"bfloat16 autocast failed on {name}: {error}"}
        else:
            result = _judged(speedup, f"a {_DEVICE_SIZE}^2 product under bfloat16 autocast "
                             f"took 1/{speedup:.2f} of float32's time on {name}")
    _device_cache[key] = result
    return result


def _judged(speedup, measured):
    """The result of a measured speed-up: fast when it reaches :data:`SPEEDUP_NEEDED`."""
    fast = speedup >= SPEEDUP_NEEDED
    return {"fast": fast, "speedup": speedup,
            "reason": f"{measured} ({'at least' if fast else 'below'} {SPEEDUP_NEEDED})"}


def problem_bfloat16(key, step, device):
    """Whether one training step of a problem is faster in bfloat16, measured once per ``key``.

    Parameters
    ----------
    key : hashable
        What determines the step's speed (student class, sizes, ranks, batch);
        the device is added to it.
    step : callable
        ``step(precision)`` runs one training step (forward, loss, backward) at
        ``"float32"`` or ``"bfloat16"``. It is run a few times in each precision
        under :func:`torch.random.fork_rng`, so the global random state is left
        as it was.
    device : str or torch.device

    Returns
    -------
    result : dict
        ``fast``, ``speedup`` (float32 step time over bfloat16 step time) and
        ``reason``, as :func:`device_bfloat16`.

    Examples
    --------
    >>> import torch
    >>> w = torch.randn(64, 64, requires_grad=True)
    >>> def step(precision):
    ...     with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
    ...         loss = (torch.ones(32, 64) @ w).float().square().sum()
    ...     loss.backward()
    >>> sorted(problem_bfloat16(("example", 64), step, "cpu"))
    ['fast', 'reason', 'speedup']
    """
    forced = _forced()
    if forced is not None:
        return {"fast": forced, "speedup": float("nan"),
                "reason": f"{ENV_VAR}={os.environ[ENV_VAR]} (measurement skipped)"}
    full_key = (_device_key(device), key)
    if full_key in _problem_cache:
        return _problem_cache[full_key]
    devices = [torch.device(device)] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        speedup = _ratio(step, device, repeats=3)
    result = _judged(speedup, f"a training step of this problem took 1/{speedup:.2f} of "
                     "float32's time under bfloat16 autocast")
    _problem_cache[full_key] = result
    return result

