"""Healing low-rank queries end to end: the factors learn, nothing else moves, the model
comes back bit for bit, and the validation loss alone chooses the step kept."""

import numpy as np
import pytest
import torch

from intrinsic_rank.inspection import (
    heal_queries,
    imposed_queries,
    lm_loss,
    model_query_bases,
    query_edits,
)
from intrinsic_rank.nn import load_model

RNG = np.random.default_rng(0)
TRAIN, VAL, TEST = (RNG.integers(0, 64, size=(n, 24)) for n in (24, 8, 8))


@pytest.fixture(scope="module")
def cut():
    lm = load_model("default")
    bases = model_query_bases(lm, TRAIN, max_windows=4)
    _, factors = query_edits(bases, {key: 1 for key in bases})
    return lm, factors


def _snapshot(module):
    return {name: p.detach().clone() for name, p in module.state_dict().items()}


def _same(module, snapshot):
    return all(torch.equal(module.state_dict()[k], v) for k, v in snapshot.items())


def _loss_with(lm, factors, ids):
    edits = {key: (A @ C, a @ C) for key, (A, a, C) in factors.items()}
    with imposed_queries(lm, edits):
        return lm_loss(lm, ids)


def test_healing_lowers_the_validation_loss_and_restores_the_model(cut):
    lm, factors = cut
    snapshot = _snapshot(lm.module)
    healed = heal_queries(lm, factors, TRAIN, VAL, test_ids=TEST, max_steps=30, lr=3e-3,
                          eval_every=10, patience=5)
    assert _same(lm.module, snapshot)
    assert healed.best_step > 0 and healed.stopped == "max_steps"
    start, best = healed.history[0], next(h for h in healed.history
                                          if h["step"] == healed.best_step)
    assert best["validation"] < start["validation"] * (1 - 1e-3)
    # the healed factors, imposed, give the loss the history recorded at that step
    assert _loss_with(lm, healed.factors, VAL) == pytest.approx(best["validation"], rel=1e-5)
    assert _loss_with(lm, factors, VAL) == pytest.approx(start["validation"], rel=1e-5)
    for key, (A, _, C) in healed.factors.items():
        assert A.shape == factors[key][0].shape and C.shape == factors[key][2].shape


def test_the_step_kept_is_chosen_by_validation_never_by_test(cut, monkeypatch):
    lm, factors = cut
    import intrinsic_rank.inspection._healing as healing

    calls = {"validation": 0, "test": 0}

    def scripted(model, ids, **kwargs):  # validation worsens after the start, test improves
        split = "validation" if np.array_equal(np.asarray(ids), VAL) else "test"
        calls[split] += 1
        return 10.0 + calls[split] if split == "validation" else 10.0 - calls[split]

    monkeypatch.setattr(healing, "lm_loss", scripted)
    healed = heal_queries(lm, factors, TRAIN, VAL, test_ids=TEST, max_steps=20, lr=3e-3,
                          eval_every=5, patience=2)
    assert healed.best_step == 0 and healed.stopped == "plateau"
    assert len(healed.history) == 3  # the start and two evaluations without a fall


def test_an_interrupted_healing_restores_the_model(cut, monkeypatch):
    lm, factors = cut
    snapshot = _snapshot(lm.module)
    flags = [p.requires_grad for p in lm.module.parameters()]
    import intrinsic_rank.inspection._healing as healing

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(healing, "_kl", stop)
    with pytest.raises(KeyboardInterrupt):
        heal_queries(lm, factors, TRAIN, VAL, max_steps=5)
    assert _same(lm.module, snapshot)
    assert [p.requires_grad for p in lm.module.parameters()] == flags
    assert not any(hasattr(m, "parametrizations") for m in lm.module.modules())


def test_bad_factors_are_named(cut):
    lm, factors = cut
    key = next(iter(factors))
    A, a, C = factors[key]
    with pytest.raises(ValueError, match=f"factors\\[L{key[0]}H{key[1]}\\] must be A"):
        heal_queries(lm, {key: (A[:3], a, C)}, TRAIN, VAL)
    with pytest.raises(ValueError, match="at least one head"):
        heal_queries(lm, {}, TRAIN, VAL)
    with pytest.raises(ValueError, match="validation_ids"):
        heal_queries(lm, factors, TRAIN, VAL[:, :1])


def test_the_factors_start_balanced_with_the_same_product(cut):
    lm, factors = cut
    key = next(iter(factors))
    A, a, C = factors[key]
    skewed = {key: (A * 1e3, a * 1e3, C / 1e3)}
    healed = heal_queries(lm, skewed, TRAIN, VAL, max_steps=0)
    A2, a2, C2 = healed.factors[key]
    assert healed.best_step == 0 and np.allclose(A2 @ C2, A @ C) and np.allclose(a2 @ C2, a @ C)
    assert np.allclose(np.linalg.norm(A2, axis=0), np.linalg.norm(C2, axis=1))
