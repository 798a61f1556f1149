"""Seeds: checked, and derived from a ``random_state`` in a few documented ways."""

import contextlib
import numbers

import numpy as np

from ._numbers import _is_bool, check_int

MAX_SEED = int(np.iinfo(np.int32).max)
"""Seeds drawn here lie in ``[0, MAX_SEED)``; :func:`check_seed` accepts ``[0, 2**32 - 1]``."""


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
        from sklearn.utils import check_random_state as sklearn_check_random_state

        return sklearn_check_random_state(random_state)
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
