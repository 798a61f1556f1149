"""A frozen causal LM steered by trainable prompt ("memory") vectors (the reachability paper).

:class:`PromptedLM` holds ``m`` memory vectors per target, for many targets at
once, in front of a frozen :class:`~intrinsic_rank.nn.CausalLMAdapter`: the
cramming protocol of the reachability paper trains only these vectors.
"""

import numpy as np
import torch
from torch import nn

from .._validation import check_allocation, check_int, keyed_rng
from ._causal_lm import CausalLMAdapter, greedy_decode

__all__ = ["PromptedLM", "random_prompt_hidden_states"]


class PromptedLM(nn.Module):
    """A frozen causal LM with ``n_memory`` trainable vectors per target.

    The input for target ``t = (t_1, ..., t_n)`` is
    ``[mem_1, ..., mem_m, emb(t_1), ..., emb(t_{n-1})]``; the logits at the last
    ``n - 1`` positions predict ``t_2 .. t_n`` (the first target token is given,
    the reachability paper). Only ``memory`` has gradients.

    Parameters
    ----------
    lm : CausalLMAdapter
        The frozen model (see :func:`~intrinsic_rank.nn.as_causal_lm`).
    targets : array-like of shape (n_targets, length), int
        Used only to seed each target's initial memory, so that a target's
        memory depends on ``random_state`` and the target itself, not on which
        other targets share the batch.
    n_memory : int
        Memory vectors per target, ``m >= 1``.
    init_std : float or None, default=None
        Initial memory is ``randn(m, d) * init_std``; None uses the standard
        deviation of the input embedding matrix (the protocol's choice).
    random_state : int, default=0

    Attributes
    ----------
    memory : torch.nn.Parameter of shape (n_targets, n_memory, width)
    """

    def __init__(self, lm, targets, n_memory, init_std=None, random_state=0):
        super().__init__()
        if not isinstance(lm, CausalLMAdapter):
            raise TypeError(f"lm must be a CausalLMAdapter; got {type(lm).__name__}")
        self.lm = lm
        self.n_memory = int(n_memory)
        E = lm.embedding_matrix().detach()
        std = float(E.float().std()) if init_std is None else float(init_std)
        targets = np.asarray(targets)
        init = np.stack([
            keyed_rng(random_state, *row).standard_normal(
                (self.n_memory, lm.width))
            for row in targets
        ]) if len(targets) else np.zeros((0, self.n_memory, lm.width))
        self.memory = nn.Parameter(torch.tensor(init * std, dtype=torch.float32, device=E.device))

    def train(self, mode=True):
        # The frozen model always stays in eval mode, so only this module's flag
        # changes; skorch calls this every step and walking the model would cost
        # more than a small model's forward pass.
        self.training = bool(mode)
        return self

    def _inputs(self, index, ids):
        memory = self.memory[index].to(self.lm.dtype)
        return torch.cat([memory, self.lm.embed(ids)], dim=1)

    def forward(self, index, ids):
        """Teacher-forced logits predicting ``ids[:, 1:]``: shape ``(B, n - 1, V)``."""
        logits = self.lm.logits(self._inputs(index, ids[:, :-1]))
        return logits[:, self.n_memory:].float()

    @torch.no_grad()
    def generate(self, index, first, length, use_cache=True):
        """Greedy decoding from each target's memory and first token.

        Parameters
        ----------
        index : LongTensor of shape (B,)
            Rows of ``memory``.
        first : LongTensor of shape (B,)
            The given first token.
        length : int
            Length of the returned sequences, the first token included.
        use_cache : bool, default=True
            Decode through the model's key-value cache
            (:func:`~intrinsic_rank.nn.greedy_decode`): one pass over the
            memory and first token, then one position per token.

        Returns
        -------
        ids : LongTensor of shape (B, length)
        """
        prompt = self._inputs(index, first[:, None])
        decoded = greedy_decode(self.lm, prompt, length - 1, use_cache=use_cache)
        return torch.cat([first[:, None], decoded], dim=1)

    @torch.no_grad()
    def final_hidden(self, index, ids):
        """Final hidden states of the prompted inputs ``(B, m + n - 1, width)``."""
        return self.lm.final_hidden(self._inputs(index, ids[:, :-1]))


def random_prompt_hidden_states(lm, n_memory, n_tokens, n_prompts=256, init_std=None,
                                batch_size=256, random_state=0):
    """Final hidden states of a frozen LM under random prompts (the reachability paper's radius).

    Each prompt is ``n_memory`` random vectors drawn as a cramming run draws its
    initial memory (``randn(m, d)`` times the embedding matrix's standard
    deviation, or ``init_std``), then ``n_tokens`` uniformly random token ids.
    The radius ``r`` of the bound is the largest infinity-norm of the returned
    states (:func:`intrinsic_rank.bounds.hidden_state_geometry`).

    Parameters
    ----------
    lm : CausalLMAdapter
        See :func:`~intrinsic_rank.nn.as_causal_lm`.
    n_memory : int
        Prompt vectors per prompt (``0`` gives plain random token sequences).
    n_tokens : int
        Random tokens after the prompt vectors.
    n_prompts : int, default=256
    init_std : float or None, default=None
    batch_size : int or None, default=256
        Prompts per forward pass.
    random_state : int, default=0

    Returns
    -------
    states : ndarray of shape (n_prompts, n_memory + n_tokens, width), float32

    Examples
    --------
    >>> from intrinsic_rank.bounds import hidden_state_geometry
    >>> from intrinsic_rank.nn import as_causal_lm
    >>> states = random_prompt_hidden_states(as_causal_lm("default"), 2, 6, n_prompts=8)
    >>> states.shape
    (8, 8, 64)
    >>> bool(hidden_state_geometry(states)["radius"] > 0)
    True
    """
    n_memory = check_int(n_memory, "n_memory", 0)
    n_tokens = check_int(n_tokens, "n_tokens", 0)
    n_prompts = check_int(n_prompts, "n_prompts")
    if n_memory + n_tokens < 1:
        raise ValueError(
            f"need at least one position: n_memory + n_tokens >= 1; got {n_memory} + {n_tokens}"
        )
    if lm.max_length is not None and n_memory + n_tokens > lm.max_length:
        raise ValueError(
            f"prompts of {n_memory + n_tokens} positions exceed the model's context of "
            f"{lm.max_length}"
        )
    # the prompts' vectors and ids drawn up front, and the final hidden states kept
    check_allocation(4 * n_prompts * ((2 * n_memory + n_tokens) * lm.width + 2 * n_tokens),
                     "n_prompts", f"{n_prompts} prompts of {n_memory} + {n_tokens} positions")
    generator = torch.Generator().manual_seed(int(random_state))
    E = lm.embedding_matrix().detach()
    std = float(E.float().std()) if init_std is None else float(init_std)
    chunk = n_prompts if batch_size is None else check_int(batch_size, "batch_size")
    # drawn up front, so the prompts do not depend on how they are chunked
    memory = torch.randn(n_prompts, n_memory, lm.width, generator=generator) * std
    ids = torch.randint(lm.vocab_size, (n_prompts, n_tokens), generator=generator)
    states = []
    with torch.no_grad():
        for start in range(0, n_prompts, chunk):
            part = slice(start, start + chunk)
            inputs = torch.cat([memory[part].to(E.device, lm.dtype),
                                lm.embed(ids[part].to(E.device))], 1)
            states.append(lm.final_hidden(inputs).float().cpu().numpy())
    return np.concatenate(states)
