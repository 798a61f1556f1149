"""Healing low-rank queries end to end: distil the edited model toward the unedited one.

After every head's query projection is cut to a low rank (factors ``A @ C``), a
short distillation trains only those factors so that the edited model's
next-token distribution follows the unedited model's (the KL divergence from the
unedited distribution, averaged over positions), on training windows; every
other weight stays frozen. This is the end-to-end step of the fine-tuned methods
that compress attention projections ("MHA2MLA", Ji et al., 2025), kept short and
judged on documents it never read.

The factors enter the model through a parametrization of the parameter that
holds the queries (``q_proj``, or the fused projection of families that fuse
them): the head's rows are recomputed from ``A @ C`` at every forward pass, so
gradients reach only the factors; the unedited distribution is the same model
with the parametrization switched off. When healing ends (or stops on an error
or a signal), the parametrization is removed and the model's weights are
exactly what they were.
"""

import time
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.nn.utils import parametrize

from .._interrupts import StopGuard
from .._validation import check_device, check_int, check_real, check_seed
from ..nn import check_token_inputs, model_max_positions, model_vocab_size
from ._head_io import _facts_of, _resolve
from ._impose import _bias_block, _query_block, lm_loss
from ._low_rank_model import _checked_factors

__all__ = ["HealResult", "heal_queries"]


class HealResult(NamedTuple):
    """What :func:`heal_queries` returns.

    Attributes
    ----------
    factors : dict of (layer, head) -> (A, a, C)
        The healed factors of the best step (by the validation loss), float64.
    history : list of dict
        One row per evaluation: ``step``, ``kl`` (the mean training KL since the
        last evaluation), ``validation`` (the edited model's loss on the
        validation windows) and ``test`` (on the test windows, when given;
        read for the record only, never to decide).
    best_step : int
        The step whose factors are returned (0: healing did not improve on the start).
    stopped : str
        Why healing ended: ``"plateau"``, ``"max_steps"`` or ``"max_seconds"``.
    seconds : float
    """

    factors: Any
    history: list
    best_step: int
    stopped: str
    seconds: float


class _LowRankRows(torch.nn.Module):
    """A parametrization: the rows (or columns) of some heads' queries from their factors."""

    def __init__(self, blocks, factors, dtype):
        super().__init__()
        self.enabled = True
        self.blocks = blocks  # (index, transposed, bias) per factor
        self.A = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.as_tensor(A, dtype=dtype)) for A, _, _ in factors])
        self.C = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.as_tensor(C, dtype=dtype)) for _, _, C in factors])

    def forward(self, weight):
        if not self.enabled:
            return weight
        weight = weight.clone()
        for (index, transposed), A, C in zip(self.blocks, self.A, self.C):
            product = A @ C
            weight[index] = product.T if transposed else product
        return weight


class _LowRankBias(torch.nn.Module):
    """A parametrization: some heads' query biases ``a @ C``, ``C`` shared with their rows."""

    def __init__(self, blocks, coordinates, rows, slots, dtype):
        super().__init__()
        self.blocks = blocks  # the bias index of each head
        self.slots = slots  # each head's place in ``rows``' factors
        self.a = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.as_tensor(a, dtype=dtype)) for a in coordinates])
        object.__setattr__(self, "rows", rows)  # not a submodule: its factors train there

    def forward(self, bias):
        if not self.rows.enabled:
            return bias
        bias = bias.clone()
        for index, slot, a in zip(self.blocks, self.slots, self.a):
            bias[index] = a @ self.rows.C[slot]
        return bias


def _owner(bare, param):
    """``(module, name)`` holding ``param`` as a direct attribute."""
    for module in bare.modules():
        for name, value in module.named_parameters(recurse=False):
            if value is param:
                return module, name
    raise RuntimeError("the query parameter belongs to no module")  # pragma: no cover


def _parametrize(bare, layers, factors):
    """Parametrizations of the query weights (and biases): ``[(module, name, rows, keys)]``
    for the weights, and ``[(module, name, biases)]`` for the biases."""
    groups = {}
    for key, (A, a, C) in factors.items():
        param, index, transposed = _query_block(layers, *key)
        groups.setdefault(id(param), (param, []))[1].append((key, (index, transposed),
                                                             (A, a, C)))
    installed, biases = [], []
    for param, items in groups.values():
        module, name = _owner(bare, param)
        rows = _LowRankRows([b for _, b, _ in items], [f for _, _, f in items], param.dtype)
        parametrize.register_parametrization(module, name, rows, unsafe=True)
        installed.append((module, name, rows, [key for key, _, _ in items]))
        with_bias = {}
        for slot, (key, _, (_, a, _)) in enumerate(items):
            block = _bias_block(layers, *key)
            if block is not None:
                with_bias.setdefault(id(block[0]), (block[0], []))[1].append(
                    (block[1], slot, a))
            elif np.any(np.asarray(a) != 0):
                raise ValueError(f"heal_queries: factors of L{key[0]}H{key[1]} give a query "
                                 "bias, but the model's queries have none")
        for bias, entries in with_bias.values():
            owner, bias_name = _owner(bare, bias)
            terms = _LowRankBias([i for i, _, _ in entries], [a for _, _, a in entries], rows,
                                 [slot for _, slot, _ in entries], bias.dtype)
            parametrize.register_parametrization(owner, bias_name, terms, unsafe=True)
            biases.append((owner, bias_name, terms))
    return installed, biases


def _balanced(A, a, C):
    """The same product with each rank's column of ``A`` and row of ``C`` of one norm.

    ``A @ C`` has a gauge (``A S``, ``S^{-1} C``); the metric's cut leaves the two
    factors at very different scales, and Adam's steps, about ``lr`` per entry, would
    then move one of them by far more than the other. Balanced, both move alike.
    """
    left = np.linalg.norm(A, axis=0)
    right = np.linalg.norm(C, axis=1)
    scale = np.sqrt(np.where(left > 0, right / np.where(left > 0, left, 1.0), 1.0))
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    return A * scale, a * scale, C / scale[:, None]


def _kl(teacher_logits, student_logits):
    teacher = torch.log_softmax(teacher_logits.float(), dim=-1)
    student = torch.log_softmax(student_logits.float(), dim=-1)
    return (teacher.exp() * (teacher - student)).sum(-1).mean()


def _logits(bare, kind, batch):
    return bare(batch) if kind == "tiny" else bare(input_ids=batch, use_cache=False).logits


def _checked_ids(ids, bare, kind, name):
    ids, _ = check_token_inputs(ids, None, model_vocab_size(bare, kind),
                                model_max_positions(bare, kind))
    if ids.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 positions; got shape {tuple(ids.shape)}")
    return ids


def heal_queries(model, factors, train_ids, validation_ids, *, test_ids=None, max_steps=200,
                 lr=1e-4, batch_size=8, eval_every=10, patience=3, min_fall=1e-3,
                 max_seconds=None, random_state=0, device="cpu", progress=False):
    """Train heads' low-rank query factors so the edited model follows the unedited one.

    Parameters
    ----------
    model : LoadedModel, model name or path, TinyCausalLM, transformers model or adapter
        A causal LM with its next-token head, whose heads
        :func:`~intrinsic_rank.inspection.head_facts` reads. It is edited only
        while this function runs and restored bit for bit when it returns or
        stops.
    factors : dict of (layer, head) -> (A, a, C)
        Each head's query at its rank, ``w_q = A @ C`` with ``A`` of shape
        ``(d_model, r)`` and ``C`` of shape ``(r, head_dim)`` (as
        :func:`~intrinsic_rank.inspection.metric_truncated_query` gives them;
        ``b_q = a @ C`` for a head whose queries have a bias, ``a`` zero
        otherwise).
    train_ids, validation_ids : array-like of shape (n, L), integer
        Windows to train on, and windows whose loss decides the stop and the
        step kept.
    test_ids : array-like of shape (n, L) or None, default=None
        Windows whose loss is recorded at each evaluation for the record (the
        test-loss-against-steps curve); never used to decide anything.
    max_steps : int, default=200
        Adam steps at most.
    lr : float, default=1e-4
        Adam's learning rate.
    batch_size : int, default=8
        Training windows per step, drawn without replacement each epoch.
    eval_every : int, default=10
        Steps between evaluations on the validation windows.
    patience : int, default=3
        Stop after this many evaluations without a fall of the best validation
        loss by ``min_fall`` of itself.
    min_fall : float, default=1e-3
    max_seconds : float or None, default=None
        Stop at the first evaluation after this much time.
    random_state : int, default=0
        Seed of the order of the training windows.
    device : str or torch.device, default="cpu"
    progress : bool or callable, default=False
        Told of each evaluation: a callable receives one line of text; True
        writes the line on stderr.

    Returns
    -------
    result : HealResult

    Raises
    ------
    ValueError
        Before any step: for a model or head the reader refuses, factors of the
        wrong shapes or with a bias, windows out of the vocabulary or context.

    Examples
    --------
    >>> import numpy as np
    >>> from intrinsic_rank.inspection import head_facts, query_basis
    >>> from intrinsic_rank.nn import load_model
    >>> lm = load_model("default")
    >>> rng = np.random.default_rng(0)
    >>> train, val = rng.integers(0, 64, (16, 24)), rng.integers(0, 64, (8, 24))
    >>> facts = head_facts(lm, 1, 2)
    >>> basis, _ = query_basis(rng.normal(size=(4, 8, 64)), facts)
    >>> A, C = facts.w_q @ basis[:, :2], basis[:, :2].T
    >>> healed = heal_queries(lm.module, {(1, 2): (A, np.zeros(2), C)}, train, val,
    ...                       max_steps=4, eval_every=2)
    >>> healed.history[0]["step"], healed.factors[1, 2][0].shape
    (0, (64, 2))
    """
    bare, kind, label = _resolve(model)
    if not factors:
        raise ValueError("factors must name at least one head")
    layers = {}
    facts = _facts_of(bare, kind, label, list(factors), layers)
    checked = {key: _balanced(*value) for key, value in _checked_factors(factors, facts).items()}
    train = _checked_ids(train_ids, bare, kind, "train_ids")
    val = _checked_ids(validation_ids, bare, kind, "validation_ids")
    test = None if test_ids is None else _checked_ids(test_ids, bare, kind, "test_ids")
    max_steps = check_int(max_steps, "max_steps", minimum=0)
    lr = check_real(lr, "lr", 0.0, low_open=True)
    batch_size = check_int(batch_size, "batch_size")
    eval_every = check_int(eval_every, "eval_every")
    patience = check_int(patience, "patience")
    min_fall = check_real(min_fall, "min_fall", 0.0)
    if max_seconds is not None:
        max_seconds = check_real(max_seconds, "max_seconds", 0.0, low_open=True)
    device = check_device(device)
    rng = np.random.default_rng(check_seed(random_state))
    start = time.perf_counter()
    training = [(m, m.training) for m in bare.modules()]
    grads = [(p, p.requires_grad) for p in bare.parameters()]
    installed, biases = [], []
    with StopGuard():
        try:
            bare.to(device).eval()
            for p, _ in grads:
                p.requires_grad_(False)
            installed, biases = _parametrize(bare, layers, checked)
            return _heal(bare, kind, installed, biases, train, val, test, max_steps, lr,
                         batch_size, eval_every, patience, min_fall, max_seconds, rng, device,
                         progress, start)
        finally:
            for module, name, _ in biases:
                parametrize.remove_parametrizations(module, name, leave_parametrized=False)
            for module, name, _, _ in installed:
                parametrize.remove_parametrizations(module, name, leave_parametrized=False)
            for p, flag in grads:
                p.requires_grad_(flag)
            for module, mode in training:
                module.training = mode


def _numpy(tensor):
    return tensor.detach().to("cpu", torch.float64).numpy().copy()


def _state(installed, biases):
    """The current factors, ``{key: (A, a, C)}`` in float64."""
    coordinates = {}
    for _, _, terms in biases:
        for slot, a in zip(terms.slots, terms.a):
            coordinates[id(terms.rows), slot] = _numpy(a)
    out = {}
    for _, _, rows, keys in installed:
        for slot, (key, A, C) in enumerate(zip(keys, rows.A, rows.C)):
            a = coordinates.get((id(rows), slot), np.zeros(A.shape[1]))
            out[key] = _numpy(A), a, _numpy(C)
    return out


def _set_enabled(installed, enabled):
    for _, _, rows, _ in installed:
        rows.enabled = enabled


def _heal(bare, kind, installed, biases, train, val, test, max_steps, lr, batch_size,
          eval_every, patience, min_fall, max_seconds, rng, device, progress, start):
    params = [p for _, _, rows, _ in installed for p in rows.parameters()]
    params += [p for _, _, terms in biases for p in terms.parameters()]
    for p in params:
        p.requires_grad_(True)
    optimiser = torch.optim.Adam(params, lr=lr)

    def evaluate(step, kl):
        with torch.no_grad():
            row = dict(step=step, kl=kl, validation=lm_loss(bare, val, device=device),
                       test=None if test is None else lm_loss(bare, test, device=device))
        if progress:
            text = (f"heal step {step}: validation {row['validation']:.4f}"
                    + ("" if row["test"] is None else f", test {row['test']:.4f}"))
            if callable(progress):
                progress(text)
            else:
                import sys

                print(text, file=sys.stderr, flush=True)
        return row

    history = [evaluate(0, None)]
    best, best_step, best_state = history[0]["validation"], 0, _state(installed, biases)
    waited, stopped, step, losses = 0, "max_steps", 0, []
    epoch = []
    while step < max_steps:
        if len(epoch) < batch_size:
            epoch = list(rng.permutation(len(train)))
        batch = train[[epoch.pop() for _ in range(min(batch_size, len(train)))]].to(device)
        with torch.no_grad():
            _set_enabled(installed, False)
            teacher = _logits(bare, kind, batch)
            _set_enabled(installed, True)
        loss = _kl(teacher, _logits(bare, kind, batch))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
        step += 1
        if step % eval_every and step < max_steps:
            continue
        row = evaluate(step, float(np.mean(losses)))
        losses = []
        history.append(row)
        if row["validation"] < best * (1 - min_fall):
            best, best_step, waited = row["validation"], step, 0
            best_state = _state(installed, biases)
        else:
            waited += 1
        if waited >= patience:
            stopped = "plateau"
            break
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            stopped = "max_seconds"
            break
    return HealResult(best_state, history, best_step, stopped, time.perf_counter() - start)

