import os

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _torch_threads():
    # CI has 2 cores; a fixed thread count keeps timings and results stable.
    # INTRINSIC_RANK_TEST_THREADS=1 helps on a machine shared with other work,
    # where two threads per process oversubscribe the cores and crawl.
    torch.set_num_threads(int(os.environ.get("INTRINSIC_RANK_TEST_THREADS", "2")))
