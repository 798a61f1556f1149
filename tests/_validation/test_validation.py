"""The shared checks (``intrinsic_rank._validation``): numbers, seeds, devices, token ids,
text files and the memory an allocation would need; each names what it refuses.
"""

import math
import numbers
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank._validation import (
    check_allocation,
    check_distinct,
    check_int,
    check_real,
    check_seed,
    check_token_ids,
    read_text_lines,
)
from intrinsic_rank.datasets import make_attention_task

X_FEW, Y_FEW = make_attention_task("linear", n_samples=60, seq_len=4, d=5, rank=2, random_state=0)


FEW_EPOCHS = dict(max_epochs=2, random_state=0)


def _fit_few(X_, Y_, **params):
    return AttentionRankEstimator(**{**FEW_EPOCHS, **params}).fit(X_, Y_)


UNUSABLE_DEVICES = ["hpu", "privateuseone", "xla", "xpu", "vulkan", "ipu", "mkldnn"]
"""Device types torch names, each failing its own way in a CPU build (a missing module, an
operator with no kernel, an assertion, an internal assert)."""


PROFILE = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


anything = st.one_of(
    st.integers(), st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(), st.booleans(), st.none(), st.text(max_size=3),
    st.fractions(), st.just(Fraction(10**400, 3)), st.complex_numbers(),
    st.integers(-(2**62), 2**62).map(np.int64), st.floats(width=32).map(np.float32),
    st.just(np.bool_(True)), st.just([1]), st.just(np.array([1.0])),
)


bound = st.one_of(st.none(), st.integers(-100, 100))


real_bound = st.one_of(st.none(), st.floats(-1e3, 1e3))


def test_allocations_beyond_memory_are_refused_without_allocating():
    with pytest.raises(ValueError, match=r"--d: the task needs .* more than this machine"):
        check_allocation(80 * 2**30, "--d", "the task", limit=16 * 2**30)
    assert check_allocation(2**20, "--d", "the task", limit=16 * 2**30) == 2**20


def test_token_ids_beyond_int64_are_one_line():
    with pytest.raises(ValueError, match="token id 1180591620717411303424, outside"):
        check_token_ids([[1, 2**70]], 64)
    with pytest.raises(ValueError, match="token id 1e\\+30"):
        check_token_ids(np.array([[1.0, 1e30]]), 64)
    assert check_token_ids(np.array([[1, 2]], dtype=np.uint8), 64).dtype == np.int64


def test_a_long_line_is_refused_before_tokenising(tmp_path):
    (tmp_path / "texts.txt").write_text("short\n" + "word " * 30_000 + "\n")
    with pytest.raises(ValueError, match="--texts: line 2 of .* has 150000 characters"):
        read_text_lines(tmp_path / "texts.txt", "--texts")


def test_a_binary_text_file_names_the_file(tmp_path):
    (tmp_path / "texts.bin").write_bytes(b"\xff\xfe\x00\x01binary")
    with pytest.raises(ValueError, match="--texts: .*texts.bin' is a binary file"):
        read_text_lines(tmp_path / "texts.bin", "--texts")
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="--texts: .*latin.txt' is not UTF-8 text"):
        read_text_lines(tmp_path / "latin.txt", "--texts")


def test_an_oversized_text_file_is_refused_by_its_size(tmp_path):
    (tmp_path / "big.txt").write_text("a\n" * 1000)
    with pytest.raises(ValueError, match="at most"):
        read_text_lines(tmp_path / "big.txt", "--texts", max_bytes=100)


def test_check_distinct_names_the_option():
    with pytest.raises(ValueError, match="--bits: 2 is given twice"):
        check_distinct([2, 3, 2], "--bits")


def test_the_prompts_of_a_geometry_are_checked_against_memory(monkeypatch):
    from intrinsic_rank._validation import _resources
    from intrinsic_rank.nn import as_causal_lm, random_prompt_hidden_states

    monkeypatch.setattr(_resources, "memory_limit", lambda: 2**20)
    with pytest.raises(ValueError, match=r"n_prompts: 4096 prompts of 8 \+ 8 positions needs"):
        random_prompt_hidden_states(as_causal_lm("default"), 8, 8, n_prompts=4096)


@pytest.mark.parametrize("device", UNUSABLE_DEVICES)
def test_a_device_this_torch_cannot_use_is_one_value_error(device):
    from intrinsic_rank._validation import check_device

    with pytest.raises(ValueError) as raised:
        check_device(device)
    text = str(raised.value)
    assert text.startswith(f"device={device!r} is not available here (")
    assert text.endswith("; use 'cpu' or an available accelerator")
    assert "\n" not in text and len(text) < 220
    with pytest.raises(ValueError, match=f"device={device!r} is not available here"):
        _fit_few(X_FEW, Y_FEW, device=device)


def test_cuda_request_without_gpu_is_clear():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="no CUDA device is available"):
        _fit_few(X_FEW, Y_FEW, device="cuda")


@PROFILE
@given(value=anything, low=bound, high=bound)
def test_check_int_returns_an_int_in_range_or_names_the_parameter(value, low, high):
    try:
        result = check_int(value, "my_param", low, high)
    except ValueError as error:
        assert "my_param" in str(error)
        return
    assert type(result) is int
    assert not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Integral)
    assert result == value
    assert low is None or result >= low
    assert high is None or result <= high


@PROFILE
@given(value=anything, low=real_bound, high=real_bound,
       low_open=st.booleans(), high_open=st.booleans())
def test_check_real_returns_a_finite_float_in_the_interval_or_names_the_parameter(
        value, low, high, low_open, high_open):
    try:
        result = check_real(value, "my_param", low, high, low_open=low_open,
                            high_open=high_open)
    except ValueError as error:
        assert "my_param" in str(error)
        return
    assert type(result) is float and math.isfinite(result)
    assert not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real)
    if low is not None:
        assert result > low if low_open else result >= low
    if high is not None:
        assert result < high if high_open else result <= high


@PROFILE
@given(value=anything)
def test_check_seed_returns_a_numpy_seed_or_names_the_parameter(value):
    try:
        result = check_seed(value)
    except ValueError as error:
        assert "random_state" in str(error)
        return
    assert type(result) is int and 0 <= result <= 2**32 - 1
    np.random.RandomState(result)  # numpy accepts every seed check_seed accepts


@pytest.mark.parametrize("seed", [-1, 2**32, 10**30, np.int64(-5)])
def test_child_seeds_and_draw_seed_name_random_state(seed):
    from intrinsic_rank._validation import child_seeds, draw_seed

    with pytest.raises(ValueError, match=r"random_state must be an integer in \[0, 4294967295\]"):
        child_seeds(seed, 2)
    with pytest.raises(ValueError, match=r"random_state must be an integer in \[0, 4294967295\]"):
        draw_seed(seed)
    with pytest.raises(ValueError, match=r"random_state must be None, an integer"):
        draw_seed("seven")


def test_valid_seeds_draw_the_same_values_as_before():
    from sklearn.utils import check_random_state as sklearn_check

    from intrinsic_rank._validation import child_seeds, draw_seed

    for seed in (0, 1, 2**32 - 1, np.uint32(7), True):
        expected = sklearn_check(seed).randint(2**31 - 1, size=3)
        np.testing.assert_array_equal(child_seeds(seed, 3), expected)
        assert draw_seed(seed) == expected[0]
    assert child_seeds(0, 2).tolist() == [209652396, 398764591]


def test_check_device_rejects_meta_absent_mps_and_cuda_beyond_the_count(monkeypatch):
    torch = pytest.importorskip("torch")
    from intrinsic_rank._validation import check_device

    with pytest.raises(ValueError, match="cannot train on the meta device"):
        check_device("meta")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device='mps'.*MPS backend is not available"):
        check_device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert check_device("mps").type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda:1").index == 1
    assert check_device("cuda").type == "cuda"
    with pytest.raises(ValueError, match=r"device='cuda:2'.*only 2 CUDA device\(s\).*0 to 1"):
        check_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA device is available"):
        check_device("cuda:0")
    with pytest.raises(ValueError, match="unknown device 'tpu"):
        check_device("tpu")
