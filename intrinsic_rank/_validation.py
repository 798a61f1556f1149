"""The one home of argument checks and seed derivation, for every package.

Everything here needs numpy and scikit-learn only; the two helpers that touch
torch (:func:`check_device` and :func:`torch_rng`) import it when called, so
:mod:`intrinsic_rank.spectral` and :mod:`intrinsic_rank.bounds` can use this
module in an environment without torch.

Conventions
-----------
* Integers: :func:`check_int` accepts any :class:`numbers.Integral` except
  ``bool`` and checks the closed range ``[minimum, maximum]``.
* Reals: :func:`check_real` accepts any :class:`numbers.Real` except ``bool``,
  always requires a finite value, and reads its bounds as *closed* unless
  ``low_open`` / ``high_open`` say otherwise; the error names the interval in
  the usual notation, e.g. ``(0, 1]``.
* Seeds: a ``random_state`` (``None``, an integer or a ``RandomState``) becomes
  integer seeds in ``[0, 2**31 - 1)`` in exactly one of these documented ways:
  :func:`child_seeds` (independent draws, scikit-learn style),
  :func:`draw_seed` (the first of them), :func:`keyed_seed` (a seed tied to a
  tuple of integers, stable whatever else is drawn; :func:`keyed_rng` is the
  same stream as a numpy ``Generator``) and :func:`consecutive_seeds`
  (``seed, seed + 1, ...``, kept where documented results were measured with
  them).
"""

import contextlib
import numbers

import numpy as np
from sklearn.utils import check_random_state as _sklearn_check_random_state

__all__ = [
    "MAX_SEED",
    "check_device",
    "check_int",
    "check_random_state",
    "check_real",
    "check_seed",
    "child_seeds",
    "consecutive_seeds",
    "draw_seed",
    "keyed_rng",
    "keyed_seed",
    "torch_rng",
]

MAX_SEED = int(np.iinfo(np.int32).max)
"""Seeds drawn here lie in ``[0, MAX_SEED)``; :func:`check_seed` accepts ``[0, 2**32 - 1]``."""


def _is_bool(value):
    return isinstance(value, (bool, np.bool_))


def _range_text(minimum, maximum):
    if minimum is None and maximum is None:
        return ""
    if maximum is None:
        return f" >= {minimum}"
    if minimum is None:
        return f" <= {maximum}"
    return f" in [{minimum}, {maximum}]"


def check_int(value, name, minimum=1, maximum=None):
    """Validate an integer argument and return it as ``int``.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        Its name, used in the error message.
    minimum, maximum : int or None, default=1, None
        Closed bounds; ``None`` leaves that side open.

    Returns
    -------
    value : int

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` included) or lies outside
        ``[minimum, maximum]``.

    Examples
    --------
    >>> check_int(3, "rank")
    3
    >>> check_int(0, "rank")
    Traceback (most recent call last):
    ...
    ValueError: rank must be an integer >= 1; got 0
    """
    bounds = _range_text(minimum, maximum)
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer{bounds}; got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{bounds}; got {value}")
    return int(value)


def check_real(value, name, low=None, high=None, *, low_open=False, high_open=False):
    """Validate a finite real argument and return it as ``float``.

    Parameters
    ----------
    value : object
        The argument as given.
    name : str
        Its name, used in the error message.
    low, high : float or None, default=None
        Bounds; ``None`` leaves that side unbounded.
    low_open, high_open : bool, default=False
        Whether ``low`` (``high``) itself is excluded. By default both bounds
        are included: ``[low, high]``.

    Returns
    -------
    value : float

    Raises
    ------
    ValueError
        If ``value`` is not a real number (``bool`` included), is not finite,
        or lies outside the interval.

    Examples
    --------
    >>> check_real(0.5, "tol", 0.0, 1.0, low_open=True)
    0.5
    >>> check_real(0.0, "tol", 0.0, 1.0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: tol must be a finite real number in (0.0, 1.0]; got 0.0
    """
    left = "-inf" if low is None else f"{low}"
    right = "inf" if high is None else f"{high}"
    interval = (("(" if low_open or low is None else "[") + f"{left}, {right}"
                + (")" if high_open or high is None else "]"))
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number in {interval}; got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an int or Fraction beyond float64's range
        raise ValueError(
            f"{name} must be a finite real number in {interval}; got {value!r}, "
            "which overflows float64"
        ) from None
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if not np.isfinite(value) or too_low or too_high:
        raise ValueError(f"{name} must be a finite real number in {interval}; got {value}")
    return value


def check_seed(value, name="random_state"):
    """Validate an integer seed in ``[0, 2**32 - 1]`` (numpy's range).

    Parameters
    ----------
    value : object
    name : str, default="random_state"

    Returns
    -------
    seed : int

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` included) or lies outside
        ``[0, 2**32 - 1]``; the message names ``name``.

    Examples
    --------
    >>> check_seed(7)
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: random_state must be an integer in [0, 4294967295]; got -1
    """
    return check_int(value, name, minimum=0, maximum=2**32 - 1)


def check_random_state(random_state):
    """A ``numpy.random.RandomState`` from ``random_state``, with the seed checked first.

    Exactly :func:`sklearn.utils.check_random_state` for every valid
    ``random_state`` (so no drawn value changes), but an integer seed outside
    numpy's range, or anything that is not a seed, gets a ``ValueError`` that
    names ``random_state`` rather than numpy's own message.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        ``None`` is numpy's global generator, an integer in ``[0, 2**32 - 1]``
        seeds a new one, a ``RandomState`` is returned as is.

    Returns
    -------
    rng : numpy.random.RandomState

    Raises
    ------
    ValueError
        If ``random_state`` is an integer outside ``[0, 2**32 - 1]`` or not a
        seed at all.

    Examples
    --------
    >>> check_random_state(0).randint(10)
    5
    >>> check_random_state(-1)
    Traceback (most recent call last):
    ...
    ValueError: random_state must be an integer in [0, 4294967295]; got -1
    """
    if isinstance(random_state, numbers.Integral) and not _is_bool(random_state):
        check_seed(random_state, "random_state")
    try:
        return _sklearn_check_random_state(random_state)
    except ValueError:
        raise ValueError(
            "random_state must be None, an integer in [0, 2**32 - 1] or a "
            f"numpy.random.RandomState; got {random_state!r}"
        ) from None


def child_seeds(random_state, count):
    """``count`` independent integer seeds drawn from ``random_state``.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
    count : int

    Returns
    -------
    seeds : ndarray of shape (count,)
        Integers in ``[0, MAX_SEED)``; the same ``random_state`` gives the same
        seeds.

    Raises
    ------
    ValueError
        If ``random_state`` is an integer outside ``[0, 2**32 - 1]`` or not a
        seed at all, or ``count`` is not an integer ``>= 0``.

    Examples
    --------
    >>> child_seeds(0, 2).tolist()
    [209652396, 398764591]
    """
    return check_random_state(random_state).randint(MAX_SEED, size=check_int(count, "count", 0))


def draw_seed(random_state):
    """One integer seed from ``random_state``: the first of :func:`child_seeds`.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState

    Returns
    -------
    seed : int

    Raises
    ------
    ValueError
        If ``random_state`` is an integer outside ``[0, 2**32 - 1]`` or not a
        seed at all.

    Examples
    --------
    >>> draw_seed(0) == int(child_seeds(0, 1)[0])
    True
    """
    return int(check_random_state(random_state).randint(MAX_SEED))


def keyed_seed(seed, *keys):
    """A seed tied to ``(seed, *keys)``: independent of any other draw.

    Parameters
    ----------
    seed : int
    *keys : int
        E.g. a rank or a length, so that each gets its own stream whatever
        else the grid holds.

    Returns
    -------
    seed : int
        ``numpy.random.SeedSequence([seed, *keys])``'s first 32-bit word.

    Examples
    --------
    >>> keyed_seed(0, 4) == keyed_seed(0, 4) != keyed_seed(0, 5)
    True
    """
    words = [int(seed), *(int(k) for k in keys)]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def keyed_rng(seed, *keys):
    """A numpy ``Generator`` tied to ``(seed, *keys)``, for a draw per item.

    The same stream as :func:`keyed_seed`'s ``SeedSequence``, handed to
    :func:`numpy.random.default_rng` whole (all its entropy, not one word).

    Parameters
    ----------
    seed : int
    *keys : int
        E.g. the token ids of one target, so that each target's draw depends
        on the seed and the target alone.

    Returns
    -------
    rng : numpy.random.Generator

    Examples
    --------
    >>> a = keyed_rng(0, 3, 1).standard_normal()
    >>> b = keyed_rng(0, 3, 1).standard_normal()
    >>> a == b
    True
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), *(int(k) for k in keys)]))


def consecutive_seeds(seed, count):
    """The seeds ``seed, seed + 1, ..., seed + count - 1``.

    Parameters
    ----------
    seed : int
    count : int

    Returns
    -------
    seeds : list of int

    Examples
    --------
    >>> consecutive_seeds(3, 3)
    [3, 4, 5]
    """
    return [int(seed) + s for s in range(check_int(count, "count", 0))]


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


@contextlib.contextmanager
def torch_rng(seed):
    """Seed torch's global CPU generator inside the block, and restore it after.

    Code that draws from torch's global generator (module initialisation,
    dropout) becomes reproducible without changing the caller's stream.

    Parameters
    ----------
    seed : int

    Examples
    --------
    >>> import torch
    >>> with torch_rng(0):
    ...     a = torch.rand(1)
    >>> with torch_rng(0):
    ...     b = torch.rand(1)
    >>> bool(a == b)
    True
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield
