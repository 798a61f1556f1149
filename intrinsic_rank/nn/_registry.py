"""The students by their ``attention`` name."""

from ._kernel_students import DenseAttentionStudent, KernelAttentionStudent
from ._students import (
    FixedOperatorStudent,
    LinearAttentionStudent,
    SoftmaxAttentionStudent,
    TransformerBlockStudent,
)

__all__ = ["STUDENTS", "make_student"]

STUDENTS = {
    "fixed": FixedOperatorStudent,
    "linear": LinearAttentionStudent,
    "softmax": SoftmaxAttentionStudent,
    "block": TransformerBlockStudent,
    "kernel": KernelAttentionStudent,
    "dense": DenseAttentionStudent,
}
"""Rungs B0-B3 of the interpolation ladder, and the two Min-IP heads of the Min-IP paper."""


def make_student(attention, **kwargs):
    """Build the student of one ladder rung or Min-IP head.

    Parameters
    ----------
    attention : {"fixed", "linear", "softmax", "block", "kernel", "dense"}
        Rung B0, B1, B2 or B3, normalised nonnegative kernel attention, or dense
        softmax attention.
    **kwargs
        Passed to the student class (``d``, ``d_out``, ``ranks``, ...).

    Returns
    -------
    student : RankBatchedStudent

    Examples
    --------
    >>> make_student("linear", d=4, d_out=4, ranks=[1, 2]).kernel().shape
    torch.Size([2, 4, 4])
    """
    if attention not in STUDENTS:
        raise ValueError(
            f"unknown attention {attention!r}; use one of {sorted(STUDENTS)}"
        )
    return STUDENTS[attention](**kwargs)
