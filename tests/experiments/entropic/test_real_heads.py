"""The map's own rules: a head whose output does not vary has no r*_attn, and says so."""

import copy

import pytest
import torch

from intrinsic_rank.experiments.entropic import head_rank_map, impose_ranks
from intrinsic_rank.experiments.entropic._head_records import CONSTANT_OUTPUT, output_spread
from intrinsic_rank.inspection import corpus_token_ids, head_activations
from intrinsic_rank.nn import LoadedModel, load_model

OPTIONS = dict(n_fit=8, n_heldout=4, length=8, distill="none", precision_draws=0,
               tolerances=(0.05, 0.2))


@pytest.fixture(scope="module")
def toy():
    return load_model("default", progress=False)


def _silenced(toy, layer, head, bias):
    """The embedded model with one head's values set to its bias alone (0: all zero)."""
    module = copy.deepcopy(toy.module)
    d = module.config["d_model"]
    width = d // module.config["n_heads"]
    rows = slice(2 * d + head * width, 2 * d + (head + 1) * width)
    with torch.no_grad():
        qkv = module.blocks[layer].qkv
        qkv.weight[rows] = 0.0
        qkv.bias[rows] = torch.linspace(-1.0, 1.0, width) * bias
    return LoadedModel(module, None, "silenced")


@pytest.mark.parametrize("bias", [0.0, 1.0])
def test_a_constant_head_has_no_r_star_and_says_so(toy, bias):
    model = _silenced(toy, 1, 2, bias)
    ids = corpus_token_ids("random", None, 64, n_inputs=4, length=8, split="validation")
    spread = output_spread(head_activations(model, ids, [(1, 2)])[1, 2].Y)
    live = output_spread(head_activations(model, ids, [(1, 1)])[1, 1].Y)
    assert spread < CONSTANT_OUTPUT / 50 and live > 1000 * CONSTANT_OUTPUT  # margins measured
    with pytest.warns(UserWarning, match=r"L1H2 \(random\) has a constant output on the "
                                         r"held-out windows .* no r\*_attn") as caught:
        result = head_rank_map(model, ["random"], ["L1H1", "L1H2"], **OPTIONS)
    assert len(caught) == 1
    live_record, constant = result.records
    assert constant["constant_output"] is True and "r_star" not in constant
    assert constant["width"] == 16 and constant["output_spread"] == pytest.approx(spread)
    assert result.projections[1] == {}
    assert live_record.get("constant_output") is None and len(live_record["r_star"]) == 2
    frame = result.frame
    assert list(frame["constant_output"]) == [None, True]
    assert frame["r_attn@0.05"].isna().tolist() == [False, True]
    imposed = impose_ranks(model, result.records, result.projections, n_test=2, length=8)
    assert imposed["total_rank"] == 16  # the live head's width alone
    assert {row["allocation"] for row in imposed["rows"]} >= {"r*_attn", "half"}
