import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _two_threads():
    # CI has 2 cores; a fixed thread count keeps timings and results stable.
    torch.set_num_threads(2)
