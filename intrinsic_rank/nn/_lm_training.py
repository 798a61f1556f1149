"""Next-token training of a small causal LM (pre-training and the copy task)."""

import math

import numpy as np
import torch
from torch.nn import functional as F

__all__ = ["train_causal_lm"]


def train_causal_lm(model, sample_batch, n_steps, batch_size=32, lr=1e-3, weight_decay=0.01,
                    warmup=100, random_state=0, progress=False, callback=None):
    """Train a causal LM on next-token cross-entropy with AdamW and a cosine schedule.

    Parameters
    ----------
    model : torch.nn.Module
        Maps ids ``(B, T)`` to logits ``(B, T, V)`` (e.g. :class:`TinyCausalLM`),
        or to an output object whose ``.logits`` are those logits (a Hugging
        Face causal LM such as ``transformers.GPT2LMHeadModel``: it is called
        as ``model(ids)``, so ``ids`` are its ``input_ids``).
    sample_batch : callable
        ``sample_batch(batch_size, rng) -> (inputs, targets)``: int arrays of
        shape ``(B, T)``; ``targets`` holds the next token, or -100 where the
        position is not scored. ``rng`` is a ``numpy.random.RandomState``: every
        step draws fresh data, so the training stream is set by ``random_state``.
    n_steps : int
    batch_size : int, default=32
    lr : float, default=1e-3
        Peak learning rate, reached after ``warmup`` steps, then cosine-decayed to 0.
    weight_decay : float, default=0.01
    warmup : int, default=100
    random_state : int, default=0
        Seeds the data stream (numpy) and nothing else; the model's initial
        weights are whatever ``model`` holds.
    progress : bool, default=False
        Show a tqdm bar (only when the output is a terminal).
    callback : callable or None, default=None
        ``callback(step, model)`` after each optimiser step (``step`` counts
        from 1), e.g. to save checkpoints; the model is in train mode then,
        and a callback that switches it to eval mode must switch it back.

    Returns
    -------
    losses : ndarray of shape (n_steps,)
        Training loss of every step.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from intrinsic_rank.nn import TinyCausalLM
    >>> _ = torch.manual_seed(0)
    >>> lm = TinyCausalLM(vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_length=8)
    >>> def sample_batch(batch_size, rng):  # predict a constant next token
    ...     ids = rng.randint(8, size=(batch_size, 8))
    ...     return ids, np.zeros_like(ids)
    >>> losses = train_causal_lm(lm, sample_batch, 60, lr=1e-2, warmup=5)
    >>> bool(losses[-5:].mean() < 0.5 * losses[:5].mean())
    True
    """
    rng = np.random.RandomState(int(random_state))
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                                  betas=(0.9, 0.98))

    def schedule(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, n_steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    steps = range(n_steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="training LM", unit="step", disable=None)
    losses = np.empty(n_steps)
    model.train()
    for step in steps:
        inputs, targets = sample_batch(batch_size, rng)
        inputs = torch.as_tensor(inputs, dtype=torch.long, device=device)
        targets = torch.as_tensor(targets, dtype=torch.long, device=device)
        logits = model(inputs)
        logits = getattr(logits, "logits", logits)  # transformers' CausalLMOutput
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses[step] = loss.item()
        if not math.isfinite(losses[step]):
            raise FloatingPointError(f"LM training diverged at step {step}; lower lr")
        if callback is not None:
            callback(step + 1, model)
    model.eval()
    return losses
