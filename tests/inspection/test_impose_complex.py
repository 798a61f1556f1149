"""imposed_queries refuses a complex matrix (its imaginary part would be dropped).

For the lead: these cases belong in ``test_impose.py``'s
``test_a_bad_matrix_is_refused_before_any_weight_changes`` list (another helper owns
that file); they are kept apart only until the branches are merged.
"""

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import head_facts, imposed_queries
from intrinsic_rank.nn import load_model


@pytest.fixture(scope="module")
def lm():
    return load_model("default", progress=False).module


@pytest.mark.parametrize("bad", [
    np.full((64, 16), 1 + 1j),
    torch.full((64, 16), 1 + 1j, dtype=torch.complex64),
    np.full((64, 16), 1 + 0j),  # even with no imaginary part: a complex array is refused
    [[1j] * 16] * 64,
    np.array([[1j] * 16] * 64, dtype=object),
])
def test_a_complex_matrix_is_refused_before_any_weight_changes(lm, bad):
    before = {name: p.detach().clone() for name, p in lm.state_dict().items()}
    good = head_facts(lm, 0, 0).w_q
    with pytest.raises(ValueError, match=r"projections\[L1H0\] must be a real array; got a "
                                         r"complex") as error:
        with imposed_queries(lm, {(0, 0): good, "L1H0": bad}):
            pytest.fail("the block ran")  # pragma: no cover
    assert "\n" not in str(error.value)
    assert all(torch.equal(before[n], p) for n, p in lm.state_dict().items())
    with pytest.raises(ValueError, match=r"query bias must be a real array; got a complex"
                                         r"|projections\[L1H0\] must be a real array; got a "
                                         r"complex"):
        with imposed_queries(lm, {"L1H0": (good, np.full(16, 1j))}):
            pytest.fail("the block ran")  # pragma: no cover
