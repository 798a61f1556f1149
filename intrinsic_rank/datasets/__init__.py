"""Seeded task generators with known ground truth.

Every ``make_*`` function takes ``random_state`` and returns ``X, Y`` (and, on
request, a :class:`~sklearn.utils.Bunch` describing the ground truth), so tests,
examples and the documentation all draw from the same tasks. Text corpora at scale
come from the running Python's standard library (:func:`stdlib_documents`): its
modules as code and their docstrings and comments as English prose, split by file.
"""

from ._teachers import (
    attention_mixer,
    low_rank_matrix,
    make_attention_task,
    make_fixed_operator_task,
)
from ._tokens import (
    COPY_SPECIAL_TOKENS,
    load_sample_texts,
    make_copy_task,
    make_induction_corpus,
    make_random_targets,
)
from ._corpora import load_text_corpus
from ._stdlib_corpora import (
    STDLIB_KINDS,
    STDLIB_SPLITS,
    stdlib_corpus_record,
    stdlib_documents,
)
from ._min_ip import make_min_ip, min_ip_targets
from ._min_ip_exhaustive import exhaustive_triples_bytes, min_ip_exhaustive_triples
from ._min_ip_pools import make_min_ip_family_pools, make_min_ip_pools
from ._min_ip_witness_family import make_min_ip_witness_family
from ._min_ip_witness_suite import make_min_ip_witness_suite, witness_length2

__all__ = [
    "COPY_SPECIAL_TOKENS",
    "STDLIB_KINDS",
    "STDLIB_SPLITS",
    "load_sample_texts",
    "load_text_corpus",
    "make_copy_task",
    "make_induction_corpus",
    "make_random_targets",
    "attention_mixer",
    "low_rank_matrix",
    "make_attention_task",
    "make_fixed_operator_task",
    "make_min_ip",
    "make_min_ip_family_pools",
    "make_min_ip_pools",
    "make_min_ip_witness_family",
    "make_min_ip_witness_suite",
    "exhaustive_triples_bytes",
    "min_ip_exhaustive_triples",
    "min_ip_targets",
    "stdlib_corpus_record",
    "stdlib_documents",
    "witness_length2",
]
