"""Torch modules: the interpolation ladder's students (B0-B3), batched over ranks."""

from ._students import (
    STUDENTS,
    FixedOperatorStudent,
    LinearAttentionStudent,
    RankBatchedStudent,
    SoftmaxAttentionStudent,
    TransformerBlockStudent,
    make_student,
    row_softmax,
)

__all__ = [
    "STUDENTS",
    "FixedOperatorStudent",
    "LinearAttentionStudent",
    "RankBatchedStudent",
    "SoftmaxAttentionStudent",
    "TransformerBlockStudent",
    "make_student",
    "row_softmax",
]
