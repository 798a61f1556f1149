"""A small causal language model and the adapter interface used for reachability.

The reachability paper studies a *frozen* causal Transformer steered by trainable prompt
vectors. Everything the reachability code needs from such a model is four
operations, collected in :class:`CausalLMAdapter`:

* ``embed(ids)`` -- input embeddings of token ids (the space prompt vectors live in),
* ``final_hidden(inputs_embeds)`` -- the last hidden states, the ones the
  unembedding reads (the "embedding space" partitioned by the decoder in the reachability
  paper),
* ``logits(inputs_embeds)`` -- next-token logits,
* ``decode(hidden)`` -- the output head alone, ``W h + b``: the decision rule
  that sends a final hidden state to a next token (``logits(x)`` equals
  ``decode(final_hidden(x))``); ``output_head()`` returns its ``W`` and ``b``,
* ``vocab_size``, ``width`` (model dimension ``d``), ``max_length`` (context);
* ``extend(inputs_embeds, cache)`` -- the logits of new positions after the
  cached ones (a key-value cache where the model has one), which
  :func:`greedy_decode` runs one token at a time.

:class:`TinyCausalLM` is the project's own model; :class:`TinyLMAdapter` wraps
it, and :class:`HFCausalLMAdapter` wraps any Hugging Face ``transformers``
causal LM (see :func:`as_causal_lm`).
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

from .._validation import check_int

__all__ = [
    "CausalLMAdapter",
    "TinyCausalLM",
    "TinyLMAdapter",
    "check_causal",
    "greedy_decode",
]


class _Block(nn.Module):
    """Pre-LN Transformer block: causal self-attention then an MLP."""

    def __init__(self, d_model, n_heads, d_ff, causal):
        super().__init__()
        self.n_heads = n_heads
        self.causal = causal
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, h):
        B, T, D = h.shape
        q, k, v = self.qkv(self.norm1(h)).split(D, dim=-1)
        heads = lambda t: t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # noqa: E731
        att = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=self.causal)
        h = h + self.proj(att.transpose(1, 2).reshape(B, T, D))
        return h + self.mlp(self.norm2(h))

    def extend(self, h, past=None):
        """:meth:`forward` of new positions ``h`` after cached keys and values.

        ``past`` is ``(keys, values)`` of the earlier positions, each
        ``(B, heads, T_past, d_head)``, or None; returns the new hidden states
        and the cache extended by ``h``'s positions. Query ``i`` of ``h`` sees
        every cached position and the new ones up to itself.
        """
        if not self.causal:
            raise ValueError("a bidirectional block has no key-value cache")
        B, T, D = h.shape
        q, k, v = self.qkv(self.norm1(h)).split(D, dim=-1)
        heads = lambda t: t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        n_past = k.shape[2] - T
        if n_past == 0:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif T == 1:  # one new query sees everything
            att = F.scaled_dot_product_attention(q, k, v)
        else:  # causal with the diagonal shifted right by the cached positions
            mask = torch.ones(T, T + n_past, dtype=torch.bool, device=h.device).tril(n_past)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        h = h + self.proj(att.transpose(1, 2).reshape(B, T, D))
        return h + self.mlp(self.norm2(h)), (k, v)


class TinyCausalLM(nn.Module):
    """A small decoder-only Transformer (pre-LN, learned absolute positions).

    It is the project's own causal LM: the embedded default model of
    :func:`intrinsic_rank.nn.load_default_model` and the copy-task model are
    instances of it.

    Parameters
    ----------
    vocab_size : int, default=64
        Number of token ids.
    d_model : int, default=64
        Width ``d`` (embedding and hidden-state dimension).
    n_layers : int, default=2
    n_heads : int, default=4
        Must divide ``d_model``.
    max_length : int, default=128
        Context length (number of learned positions).
    d_ff : int or None, default=None
        MLP width; ``4 * d_model`` when None.
    causal : bool, default=True
        ``False`` builds a bidirectional encoder (used to test that
        reachability rejects non-causal models).

    Examples
    --------
    >>> import torch
    >>> lm = TinyCausalLM(vocab_size=10, d_model=8, n_layers=1, n_heads=2, max_length=16)
    >>> lm(torch.tensor([[1, 2, 3]])).shape
    torch.Size([1, 3, 10])
    """

    def __init__(self, vocab_size=64, d_model=64, n_layers=2, n_heads=4, max_length=128,
                 d_ff=None, causal=True):
        super().__init__()
        vocab_size = check_int(vocab_size, "vocab_size")
        d_model = check_int(d_model, "d_model")
        n_layers = check_int(n_layers, "n_layers")
        n_heads = check_int(n_heads, "n_heads")
        max_length = check_int(max_length, "max_length")
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                           n_heads=n_heads, max_length=max_length,
                           d_ff=d_ff or 4 * d_model, causal=bool(causal))
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_length, d_model)
        self.blocks = nn.ModuleList(
            _Block(d_model, n_heads, self.config["d_ff"], bool(causal)) for _ in range(n_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.unembedding = nn.Linear(d_model, vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        """GPT-2 style init: N(0, 0.02) weights, residual projections scaled by depth."""
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02
                if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                    std /= math.sqrt(2 * self.config["n_layers"])
                nn.init.normal_(p, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def hidden_states(self, inputs_embeds):
        """Final hidden states (after the last layer norm) of input embeddings.

        Parameters
        ----------
        inputs_embeds : Tensor of shape (B, T, d_model)

        Returns
        -------
        hidden : Tensor of shape (B, T, d_model)
        """
        T = inputs_embeds.shape[1]
        if T > self.config["max_length"]:
            raise ValueError(
                f"input of {T} positions exceeds the model's context of "
                f"{self.config['max_length']}"
            )
        positions = torch.arange(T, device=inputs_embeds.device)
        h = inputs_embeds + self.position_embedding(positions)
        for block in self.blocks:
            h = block(h)
        return self.final_norm(h)

    def forward(self, ids):
        """Next-token logits of token ids ``(B, T)`` -> ``(B, T, vocab_size)``."""
        return self.unembedding(self.hidden_states(self.token_embedding(ids)))

    def extend_hidden_states(self, inputs_embeds, cache=None):
        """Final hidden states of new positions after cached ones (a key-value cache).

        Parameters
        ----------
        inputs_embeds : Tensor of shape (B, T, d_model)
            Input embeddings of the positions after the cached ones.
        cache : list of (Tensor, Tensor) or None
            Per block, the keys and values of the earlier positions (as
            returned by a previous call); None when there are none.

        Returns
        -------
        hidden : Tensor of shape (B, T, d_model)
            What :meth:`hidden_states` gives at these positions on the whole
            sequence (equal up to rounding).
        cache : list of (Tensor, Tensor)
            The cache extended by these positions.
        """
        start = 0 if cache is None else cache[0][0].shape[2]
        T = inputs_embeds.shape[1]
        if start + T > self.config["max_length"]:
            raise ValueError(
                f"input of {start + T} positions exceeds the model's context of "
                f"{self.config['max_length']}"
            )
        positions = torch.arange(start, start + T, device=inputs_embeds.device)
        h = inputs_embeds + self.position_embedding(positions)
        extended = []
        for i, block in enumerate(self.blocks):
            h, past = block.extend(h, None if cache is None else cache[i])
            extended.append(past)
        return self.final_norm(h), extended


class CausalLMAdapter(nn.Module):
    """Uniform view of a causal LM for prompt optimisation (abstract base).

    Subclasses set ``vocab_size``, ``width``, ``max_length`` (int or None when
    the model has no fixed context) and implement :meth:`embed`,
    :meth:`final_hidden` and :meth:`logits`; a model with a next-token head
    also implements :meth:`output_head` (then :meth:`decode` works), and one
    without sets ``has_head = False``. The wrapped model's parameters are
    frozen (``requires_grad=False``) and it is kept in eval mode.

    Attributes
    ----------
    has_head : bool
        Whether the model has a next-token head (:meth:`decode`); False for
        :class:`~intrinsic_rank.nn.HFEncoderAdapter`.
    """

    vocab_size: int
    width: int
    max_length: int | None
    has_head = True

    def freeze(self):
        """Turn off gradients for every parameter and switch to eval mode."""
        for p in self.parameters():
            p.requires_grad_(False)
        return self.eval()

    def train(self, mode=True):
        # a frozen model never leaves eval mode (no dropout while cramming)
        return super().train(False)

    @property
    def dtype(self):
        """Floating dtype of the model's input embeddings."""
        return self.embedding_matrix().dtype

    def embedding_matrix(self):
        """The input embedding matrix, shape ``(vocab_size, width)``."""
        raise NotImplementedError

    def embed(self, ids):
        """Input embeddings of token ids ``(B, T)`` -> ``(B, T, width)``."""
        return self.embedding_matrix()[ids]

    def final_hidden(self, inputs_embeds):
        """Final hidden states, the vectors the unembedding reads."""
        raise NotImplementedError

    def logits(self, inputs_embeds):
        """Next-token logits ``(B, T, vocab_size)`` of input embeddings."""
        raise NotImplementedError

    def output_head(self):
        """The output head's weight ``W`` ``(vocab_size, width)`` and bias ``b`` (or None).

        The linear map that :meth:`decode` applies to :meth:`final_hidden`
        states; nothing of the model runs between the two.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not define output_head(): its next-token "
            "head W h + b is unknown, so decode() and decoder cells are unavailable"
        )

    def extend(self, inputs_embeds, cache=None):
        """Logits of new positions after the ones a cache holds.

        Subclasses with a key-value cache override it; this default keeps the
        earlier input embeddings as its cache and runs :meth:`logits` on the
        whole sequence again.

        Parameters
        ----------
        inputs_embeds : Tensor of shape (B, T, width)
            Input embeddings of the new positions.
        cache : object or None
            What the previous call returned (None: no earlier positions).

        Returns
        -------
        logits : Tensor of shape (B, T, vocab_size)
            Equal (up to rounding) to the last ``T`` positions of
            :meth:`logits` on the whole sequence.
        cache : object
            The cache extended by these positions, for the next call.
        """
        inputs = inputs_embeds if cache is None else torch.cat([cache, inputs_embeds], dim=1)
        return self.logits(inputs)[:, -inputs_embeds.shape[1]:], inputs

    def decode(self, hidden):
        """Next-token logits ``W h + b`` of final hidden states ``(..., width)``.

        The decision rule on the space of :meth:`final_hidden`: the next token
        is ``argmax(decode(h))``, and ``logits(x) == decode(final_hidden(x))``.

        Parameters
        ----------
        hidden : Tensor of shape (..., width)

        Returns
        -------
        logits : Tensor of shape (..., vocab_size)

        Examples
        --------
        >>> import torch
        >>> from intrinsic_rank.nn import as_causal_lm
        >>> lm = as_causal_lm("default")
        >>> x = lm.embed(torch.tensor([[1, 2, 3]]))
        >>> torch.equal(lm.decode(lm.final_hidden(x)), lm.logits(x))
        True
        """
        weight, bias = self.output_head()
        return F.linear(hidden, weight, bias)


class TinyLMAdapter(CausalLMAdapter):
    """Adapter for :class:`TinyCausalLM`.

    :meth:`final_hidden` is the output of the model's final LayerNorm (its
    affine part included), which the bias-free ``unembedding`` reads:
    :meth:`decode` is ``unembedding.weight @ h``, and the hidden-state region
    measured for the bounds is the one this rule partitions.

    Parameters
    ----------
    model : TinyCausalLM
    """

    def __init__(self, model):
        super().__init__()
        if not isinstance(model, TinyCausalLM):
            raise TypeError(f"TinyLMAdapter wraps a TinyCausalLM; got {type(model).__name__}")
        self.model = model
        self.vocab_size = model.config["vocab_size"]
        self.width = model.config["d_model"]
        self.max_length = model.config["max_length"]
        self.freeze()

    def embedding_matrix(self):
        return self.model.token_embedding.weight

    def final_hidden(self, inputs_embeds):
        return self.model.hidden_states(inputs_embeds)

    def logits(self, inputs_embeds):
        return self.model.unembedding(self.model.hidden_states(inputs_embeds))

    def output_head(self):
        return self.model.unembedding.weight, self.model.unembedding.bias

    def extend(self, inputs_embeds, cache=None):
        if not self.model.config["causal"]:
            return super().extend(inputs_embeds, cache)
        hidden, cache = self.model.extend_hidden_states(inputs_embeds, cache)
        return self.model.unembedding(hidden), cache


@torch.no_grad()
def greedy_decode(lm, inputs_embeds, n_tokens, use_cache=True):
    """Greedy decoding: ``n_tokens`` argmax tokens after the inputs, each fed back.

    Parameters
    ----------
    lm : CausalLMAdapter
        See :func:`~intrinsic_rank.nn.as_causal_lm`.
    inputs_embeds : Tensor of shape (B, T, width)
        The prompt: any input vectors (prompt vectors, token embeddings).
    n_tokens : int
        Tokens to decode.
    use_cache : bool, default=True
        Run each step on the new token only, through the adapter's key-value
        cache (:meth:`CausalLMAdapter.extend`): one pass over the prompt, then
        one position per token. False runs the model on the whole sequence at
        every step (the reference; the same tokens up to float rounding ties).

    Returns
    -------
    ids : LongTensor of shape (B, n_tokens)

    Examples
    --------
    >>> import torch
    >>> from intrinsic_rank.nn import as_causal_lm
    >>> lm = as_causal_lm("default")
    >>> prompt = lm.embed(torch.tensor([[1, 5, 9, 2]]))
    >>> torch.equal(greedy_decode(lm, prompt, 6), greedy_decode(lm, prompt, 6, use_cache=False))
    True
    """
    n_tokens = check_int(n_tokens, "n_tokens", 0)
    B = inputs_embeds.shape[0]
    ids = torch.zeros(B, n_tokens, dtype=torch.long, device=inputs_embeds.device)
    if n_tokens == 0:
        return ids
    if use_cache:
        logits, cache = lm.extend(inputs_embeds)
        for t in range(n_tokens):
            ids[:, t] = logits[:, -1].argmax(-1)
            if t + 1 < n_tokens:
                logits, cache = lm.extend(lm.embed(ids[:, t:t + 1]), cache)
        return ids
    inputs = inputs_embeds
    for t in range(n_tokens):
        ids[:, t] = lm.logits(inputs)[:, -1].argmax(-1)
        inputs = torch.cat([inputs, lm.embed(ids[:, t:t + 1])], dim=1)
    return ids


def check_causal(adapter, random_state=0):
    """Raise ``ValueError`` unless changing a late input leaves earlier outputs unchanged.

    The test is empirical, so it covers any architecture: the logits at the
    first positions of a random input must not move when the embedding of the
    last position is replaced.

    Parameters
    ----------
    adapter : CausalLMAdapter
    random_state : int, default=0

    Returns
    -------
    adapter : CausalLMAdapter
        The same adapter, for chaining.
    """
    if not _earlier_outputs_unchanged(adapter, adapter.logits, random_state):
        raise ValueError(
            f"the model ({type(getattr(adapter, 'model', adapter)).__name__}) is not causal: "
            "changing the last input token changed the outputs at earlier positions; "
            "reachability needs a causal (decoder-only) language model (for an encoder, "
            "intrinsic_rank.experiments.reachability_geometry measures the geometry part)"
        )
    return adapter


def _earlier_outputs_unchanged(adapter, outputs, random_state=0):
    """Whether replacing the last input embedding leaves ``outputs`` at earlier positions.

    ``outputs`` maps input embeddings ``(1, T, width)`` to per-position outputs
    (an adapter's ``logits`` or ``final_hidden``). Inputs shorter than two
    positions cannot tell and count as unchanged.
    """
    generator = torch.Generator().manual_seed(int(random_state))
    length = 6 if adapter.max_length is None else min(6, adapter.max_length)
    if length < 2:
        return True
    E = adapter.embedding_matrix()
    ids = torch.randint(adapter.vocab_size, (1, length), generator=generator).to(E.device)
    with torch.no_grad():
        base = adapter.embed(ids)
        changed = base.clone()
        changed[:, -1] = changed[:, -1] + 3 * E.float().std().to(E.dtype) * torch.randn(
            changed.shape[-1], generator=generator).to(E.device, E.dtype)
        before = outputs(base)[:, :-1].float()
        after = outputs(changed)[:, :-1].float()
    scale = before.abs().max().clamp_min(1e-6)
    return bool(torch.allclose(before, after, atol=1e-4 * float(scale), rtol=1e-3))
