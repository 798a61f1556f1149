"""The map's checkpoints: a part is used only when it is this run's and whole.

Every case runs the map of two heads of the embedded model (or a copy of it with one
weight moved) on random tokens, with the training-free curve only, so that each map
takes about a second; ``measure_head`` is counted to see which heads were measured.
"""

import copy
import json
import os
import shutil
import warnings

import numpy as np
import pytest
import torch

from intrinsic_rank.experiments.entropic import _head_parts, _real_heads, head_rank_map
from intrinsic_rank.nn import LoadedModel, load_model

HEADS = ["L0H1", "L1H2"]
OPTIONS = dict(n_fit=8, n_heldout=4, length=8, distill="none", precision_draws=0,
               tolerances=(0.05, 0.2))


@pytest.fixture(scope="module")
def toy():
    return load_model("default", progress=False)


@pytest.fixture
def calls(monkeypatch):
    measured = []
    real = _real_heads._measure_checked

    def counted(facts, *args, **kwargs):
        measured.append(facts.name)
        return real(facts, *args, **kwargs)

    monkeypatch.setattr(_real_heads, "_measure_checked", counted)
    return measured


def _map(model, folder, **changes):
    return head_rank_map(model, ["random"], HEADS, checkpoint=str(folder),
                         **{**OPTIONS, **changes})


def _quiet_map(model, folder, **changes):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a part used as it is says nothing
        return _map(model, folder, **changes)


@pytest.fixture(scope="module")
def finished(toy, tmp_path_factory):
    """A checkpoint holding both heads, and the map that wrote it."""
    folder = tmp_path_factory.mktemp("finished")
    return folder, _map(toy, folder)


@pytest.fixture
def parts(finished, tmp_path):
    """A copy of the finished checkpoint that a test may damage."""
    folder = tmp_path / "parts"
    shutil.copytree(finished[0], folder)
    return folder


def _answers(result):
    return [(r["layer"], r["head"], r["r_star"], r["free_risks"]) for r in result.records]


def test_a_rerun_reads_every_head_back_without_a_forward_pass(toy, finished, parts, calls,
                                                             monkeypatch):
    monkeypatch.setattr(_real_heads, "head_activations",
                        lambda *a, **k: pytest.fail("the hooked pass ran"))
    again = _quiet_map(toy, parts)
    assert calls == [] and _answers(again) == _answers(finished[1])
    saved = json.loads((parts / "random" / "L0H1.json").read_text())
    assert saved["part"] == "L0H1" and saved["format"] == _head_parts.PARTS_FORMAT
    assert set(saved["key"]) == {"model", "corpus", "settings", "version", "format", "digest"}
    with np.load(parts / "random" / "L0H1.npz") as arrays:
        assert str(arrays["__key__"]) == saved["key"]["digest"]


def _moved(toy):
    """The embedded model with one weight moved by one float32 step: another model."""
    module = copy.deepcopy(toy.module)
    with torch.no_grad():
        weight = module.blocks[0].qkv.weight
        weight[0, 0] = torch.nextafter(weight[0, 0], torch.tensor(10.0))
    return module


def test_another_model_under_the_same_name_is_measured_again(toy, parts, calls):
    other = LoadedModel(_moved(toy), toy.tokenizer, toy.label)  # the same label
    with pytest.warns(UserWarning) as caught:
        result = _map(other, parts)
    assert calls == ["L0H1", "L1H2"]
    lines = [str(w.message) for w in caught]
    assert len(lines) == 2 and all("measured on another model" in line for line in lines)
    calls.clear()
    assert _answers(_quiet_map(other, parts)) == _answers(result) and calls == []


def test_two_model_files_of_one_name_in_two_folders(toy, tmp_path, calls):
    from intrinsic_rank.nn import save_tiny_lm

    for folder, module in (("a", toy.module), ("b", _moved(toy))):
        (tmp_path / folder).mkdir()
        save_tiny_lm(module, tmp_path / folder / "lm.pt")
    _map(str(tmp_path / "a" / "lm.pt"), tmp_path / "parts")
    calls.clear()
    with pytest.warns(UserWarning, match="another model"):
        _map(str(tmp_path / "b" / "lm.pt"), tmp_path / "parts")
    assert calls == ["L0H1", "L1H2"]


def test_another_corpus_text_settings_or_version_is_measured_again(toy, parts, calls,
                                                                   monkeypatch):
    import intrinsic_rank.inspection as inspection

    record = inspection.corpus_record
    monkeypatch.setattr(inspection, "corpus_record", lambda corpus, tokenizer=None: dict(
        record(corpus, tokenizer), digest="another text", python_version="3.99.0"))
    with pytest.warns(UserWarning, match="other text or token windows of the corpus"):
        _map(toy, parts)
    monkeypatch.setattr(inspection, "corpus_record", record)
    with pytest.warns(UserWarning, match="other text or token windows"):
        _map(toy, parts, random_state=1)  # other windows of the same corpus
    with pytest.warns(UserWarning, match="measured with other settings"):
        _map(toy, parts, random_state=1, margin=20.0)
    monkeypatch.setattr(_head_parts, "_version", lambda: "9.9")
    with pytest.warns(UserWarning, match=r"measured by intrinsic-rank .* \(this is 9\.9\)"):
        _map(toy, parts, random_state=1, margin=20.0)
    assert calls == ["L0H1", "L1H2"] * 4


def _edit_json(path, change):
    saved = json.loads(path.read_text())
    change(saved)
    path.write_text(json.dumps(saved))


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


DAMAGES = {
    "truncated npz": (lambda p: _truncate(p / "L0H1.npz"), "its .npz is damaged"),
    "empty npz": (lambda p: (p / "L0H1.npz").write_bytes(b""), "its .npz is damaged"),
    "npz swapped": (lambda p: shutil.copy(p / "L1H2.npz", p / "L0H1.npz"),
                    "its .npz is the part of L1H2"),
    "npz missing": (lambda p: (p / "L0H1.npz").unlink(), "its .npz is missing"),
    "json missing": (lambda p: (p / "L0H1.json").unlink(), "its .json is missing"),
    "json truncated": (lambda p: _truncate(p / "L0H1.json"), "its .json is damaged"),
    "json binary": (lambda p: (p / "L0H1.json").write_bytes(b"\xff\xfe\x00"),
                    "its .json is not text"),
    "json a list": (lambda p: (p / "L0H1.json").write_text("[]"), "its .json is not a part"),
    "record null": (lambda p: _edit_json(p / "L0H1.json", lambda s: s.update(record=None)),
                    "its record is NoneType"),
    "layer edited": (lambda p: _edit_json(p / "L0H1.json",
                                          lambda s: s["record"].update(layer=1)),
                     "its record says layer 1, not 0"),
    "layer as a bool": (lambda p: _edit_json(p / "L0H1.json",
                                             lambda s: s["record"].update(layer=False)),
                        "its record says layer False, not 0"),
    "no r_star": (lambda p: _edit_json(p / "L0H1.json", lambda s: s["record"].pop("r_star")),
                  "its record has no r_star per tolerance"),
    "rank past the width": (lambda p: _edit_json(
        p / "L0H1.json", lambda s: s["record"].update(r_star=[99, 99])),
        "its record holds the rank 99"),
    "json of another part": (lambda p: shutil.copy(p / "L1H2.json", p / "L0H1.json"),
                             "its .json is the part of 'L1H2'"),
    "npz edited": (lambda p: np.savez(p / "L0H1.npz", **{
        **dict(np.load(p / "L0H1.npz")), "A0": np.zeros((16, 16), np.float32)}),
        "its .npz is not the one its .json was written with"),
    "old format": (lambda p: (p / "L0H1.json").write_text(json.dumps(
        {"settings_key": "0123456789abcdef", "record": {}})), "an older intrinsic-rank"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_part_is_measured_again_with_one_line(toy, finished, parts, calls, damage):
    spoil, why = DAMAGES[damage]
    spoil(parts / "random")
    with pytest.warns(UserWarning) as caught:
        result = _map(toy, parts)
    lines = [str(w.message) for w in caught]
    assert len(lines) == 1 and "random/L0H1" in lines[0] and why in lines[0], lines
    assert "\n" not in lines[0]
    assert calls == ["L0H1"]  # the other head is read back
    assert _answers(result) == _answers(finished[1])
    calls.clear()
    _quiet_map(toy, parts)  # the part was written again, whole
    assert calls == []


def test_a_folder_where_a_part_goes_is_refused_before_any_measurement(toy, parts, calls):
    (parts / "random" / "L1H2.npz").unlink()
    (parts / "random" / "L1H2.npz").mkdir()
    with pytest.raises(ValueError, match=r"checkpoint: .*L1H2\.npz is a folder, where a "
                                         "finished head's file goes"):
        _map(toy, parts)
    shutil.rmtree(parts / "random")
    (parts / "random").write_text("x")
    with pytest.raises(ValueError, match="is a file where the folder of the finished heads "
                                         "of 'random' goes"):
        _map(toy, parts)
    (parts / "random").unlink()
    (parts / "random").symlink_to(parts / "random")  # a link to itself: a loop
    with pytest.raises(ValueError, match="is a link that leads to no folder where"):
        _map(toy, parts)
    assert calls == []


def test_checkpoint_paths_are_checked_before_the_model_loads(tmp_path, calls, monkeypatch):
    monkeypatch.setattr(_real_heads, "load_model", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(ValueError, match="checkpoint must be a folder path; got an empty "
                                         "string"):
        head_rank_map("default", ["random"], HEADS, checkpoint="", **OPTIONS)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        head_rank_map("default", ["random"], HEADS, checkpoint=str(tmp_path / "file"),
                      **OPTIONS)
    assert calls == [] and not os.path.exists("random")


def test_a_part_that_is_not_this_runs_is_never_returned(tmp_path):
    key = _head_parts.part_key("m", "c", {"n": 1})
    base = str(tmp_path / "random" / "L0H0")
    record = dict(layer=0, head=0, corpus="random", planted_rank=None, plant_noise=None,
                  tolerances=[0.1], width=4, r_star=[2], r_star_free=[2], r_star_text=["2"],
                  r_star_lower=[1], below_precision=[None])
    factors = {0: (np.eye(4, dtype=np.float32), np.zeros((0, 0), np.float32)),
               1: (np.ones((4, 1), np.float32), np.ones((1, 4), np.float32)),
               2: (np.ones((4, 2), np.float32), np.ones((2, 4), np.float32))}
    _head_parts.save_part(base, record, factors, key)
    expected = dict(layer=0, head=0, corpus="random", plant=None, tolerances=[0.1])
    (saved, projections), why = _head_parts.read_part(base, key, expected)
    assert why is None and saved == record and sorted(projections) == [0, 1, 2]
    assert _head_parts.read_part(base, key, dict(expected, plant=(2, False)))[1] == (
        "its record says planted_rank None, not 2")
    del factors[1]  # the half of rank 2 is needed by the deficiency test
    _head_parts.save_part(base, record, factors, key)
    assert _head_parts.read_part(base, key, expected) == (
        None, "its .npz lacks the projections of rank 1")
    factors[1] = (np.full((4, 1), np.nan, np.float32), np.ones((1, 4), np.float32))
    _head_parts.save_part(base, record, factors, key)
    assert "not finite" in _head_parts.read_part(base, key, expected)[1]
