"""The rank-sweep building blocks under one import, for the benchmarks in ``benchmarks/``.

The estimators import each piece from its own module (:mod:`._selection`,
:mod:`._batching`, ...); nothing is defined here.
"""

from ._batching import RankwiseMSELoss
from ._selection import select_rank

__all__ = ["RankwiseMSELoss", "select_rank"]
