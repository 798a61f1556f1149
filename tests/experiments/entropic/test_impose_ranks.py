"""Imposing a map's ranks: what it refuses, in one line, before touching the model."""

import numpy as np
import pytest

from intrinsic_rank.experiments.entropic import head_rank_map, impose_ranks
from intrinsic_rank.nn import load_model


@pytest.fixture(scope="module")
def toy_map():
    toy = load_model("default", progress=False)
    return toy, head_rank_map(toy, ["random"], ["L0H0", "L1H3"], n_fit=8, n_heldout=4,
                              length=8, distill="none", precision_draws=0, tolerances=(0.2,))


def test_a_model_given_by_name_is_loaded(toy_map):
    toy, result = toy_map
    by_name = impose_ranks("default", result.records, result.projections, n_test=2, length=8)
    loaded = impose_ranks(toy, result.records, result.projections, n_test=2, length=8)
    assert by_name["rows"] == loaded["rows"] and by_name["total_rank"] == 32


@pytest.mark.parametrize("records, projections, error, message", [
    ([], [], ValueError, "impose_ranks: records is empty"),
    ("records", "projections", TypeError, "records must be a list of a map's records"),
    (slice(None), slice(0, 1), ValueError, "projections must hold one entry per record, in "
                                           "the same order; got 1 for 2 records"),
    (slice(None), None, ValueError, "got NoneType for 2 records"),
    ([None, None], slice(None), TypeError, "every record must be a dict"),
    ("twice", slice(None), ValueError, "one unplanted record per head"),
    ("planted", slice(None), ValueError, "one unplanted record per head"),
    ("two corpora", slice(None), ValueError, "must be of one corpus"),
    ("no r_star", slice(None), ValueError, "the record of L0H0 holds no r\\*_attn"),
    (slice(None), "no basis", ValueError, "the projections of L0H0 must be a dict"),
])
def test_misuse_is_one_line(toy_map, records, projections, error, message):
    toy, result = toy_map
    recs, projs = list(result.records), list(result.projections)
    edited = {"twice": [recs[0], recs[0]],
              "planted": [dict(recs[0], planted_rank=4), recs[1]],
              "two corpora": [recs[0], dict(recs[1], corpus="code")],
              "no r_star": [{k: v for k, v in recs[0].items() if k != "r_star"}, recs[1]]}
    if isinstance(records, slice):
        records = recs[records]
    elif isinstance(records, str) and records in edited:
        records = edited[records]
    projections = (projs[projections] if isinstance(projections, slice) else
                   [{1: projs[0][1]}, projs[1]] if projections == "no basis" else projections)
    with pytest.raises(error, match=message):
        impose_ranks(toy, records, projections, n_test=2, length=8)


def test_bad_sizes_are_one_line(toy_map):
    toy, result = toy_map
    with pytest.raises(ValueError, match="n_test"):
        impose_ranks(toy, result.records, result.projections, n_test=0)
    with pytest.raises(ValueError, match="batch_size"):
        impose_ranks(toy, result.records, result.projections, batch_size=np.float64(2.5))
