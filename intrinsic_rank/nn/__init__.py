"""Torch modules: the ladder's students (B0-B3) and Min-IP heads, batched over ranks."""

from ._kernel_attention import (
    DenseAttentionStudent,
    DenseSoftmaxHead,
    KernelAttentionStudent,
    NormalizedKernelHead,
    dense_error_bound,
    dense_min_ip_head,
    normalized_kernel_attention,
    rank_one_min_ip_head,
)
from ._registry import STUDENTS, make_student
from ._students import (
    FixedOperatorStudent,
    LinearAttentionStudent,
    RankBatchedStudent,
    SoftmaxAttentionStudent,
    TransformerBlockStudent,
    row_softmax,
)

__all__ = [
    "STUDENTS",
    "DenseAttentionStudent",
    "DenseSoftmaxHead",
    "FixedOperatorStudent",
    "KernelAttentionStudent",
    "LinearAttentionStudent",
    "NormalizedKernelHead",
    "RankBatchedStudent",
    "SoftmaxAttentionStudent",
    "TransformerBlockStudent",
    "dense_error_bound",
    "dense_min_ip_head",
    "make_student",
    "normalized_kernel_attention",
    "rank_one_min_ip_head",
    "row_softmax",
]
