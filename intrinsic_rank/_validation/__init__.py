"""The one home of argument checks and seed derivation, for every package.

One module per kind of check (``_numbers``, ``_seeds``, ``_devices``,
``_resources``, ``_paths``, and ``_signals``: the guards that let a block
finish or clean up under a stop signal); every name is imported from here.

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
* Sizes: :func:`memory_limit` is the memory one allocation may take (the
  machine's physical memory, or the cgroup limit when lower);
  :func:`check_allocation` refuses a size beyond it in one line *before*
  anything is allocated.
* Output paths: :func:`check_output_file` (a real write probe, the free
  space, not a folder, not one of the run's own files) and
  :func:`check_paths_apart` (no output equals or lies inside an input or
  another output).
* Files read as input: :func:`read_text_lines` (size and line-length caps,
  the file's name in every error) and :func:`check_token_ids`.
* Error messages name the parameter and never print a whole array:
  :func:`describe_value` is the short form of a value in a message.
"""

from ._numbers import check_distinct, check_int, check_real, describe_value
from ._seeds import (
    MAX_SEED,
    check_random_state,
    check_seed,
    child_seeds,
    consecutive_seeds,
    draw_seed,
    keyed_rng,
    keyed_seed,
    torch_rng,
)
from ._devices import check_device
from ._resources import (
    MAX_TEXT_BYTES,
    MAX_TEXT_LINE,
    check_allocation,
    check_token_ids,
    format_bytes,
    memory_limit,
    read_text_lines,
)
from ._paths import MIN_FREE_BYTES, check_output_file, check_output_folder, check_paths_apart

__all__ = [
    "MAX_SEED",
    "MAX_TEXT_BYTES",
    "MAX_TEXT_LINE",
    "MIN_FREE_BYTES",
    "check_allocation",
    "check_device",
    "check_distinct",
    "check_output_file",
    "check_output_folder",
    "check_paths_apart",
    "check_int",
    "check_random_state",
    "check_real",
    "check_seed",
    "check_token_ids",
    "child_seeds",
    "consecutive_seeds",
    "describe_value",
    "draw_seed",
    "format_bytes",
    "keyed_rng",
    "keyed_seed",
    "memory_limit",
    "read_text_lines",
    "torch_rng",
]
