"""A frozen causal LM steered by trainable prompt ("memory") vectors (seed 004).

:class:`PromptedLM` holds ``m`` memory vectors per target, for many targets at
once, in front of a frozen :class:`~intrinsic_rank.nn.CausalLMAdapter`: the
cramming protocol of SPEC section 4 trains only these vectors.
"""

import copy
import os
from importlib import resources

import numpy as np
import torch
from torch import nn

from ._causal_lm import CausalLMAdapter, TinyCausalLM, TinyLMAdapter, check_causal

__all__ = [
    "DEFAULT_MODEL_FILE",
    "PromptedLM",
    "as_causal_lm",
    "load_default_model",
    "random_prompt_hidden_states",
    "save_tiny_lm",
]

#: file name of the embedded default model inside ``intrinsic_rank/data``
DEFAULT_MODEL_FILE = "default_lm.pt"


def save_tiny_lm(model, path, metadata=None):
    """Save a :class:`TinyCausalLM` as its config, weights and metadata.

    Parameters
    ----------
    model : TinyCausalLM
    path : str or os.PathLike
    metadata : dict, optional
        JSON-like facts about how the model was trained (kept with the weights).
    """
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save({"config": dict(model.config), "state_dict": state,
                "metadata": dict(metadata or {})}, os.fspath(path))


def _load_tiny_lm(path):
    blob = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    model = TinyCausalLM(**blob["config"])
    model.load_state_dict(blob["state_dict"])
    model.metadata = blob.get("metadata", {})
    return model.eval()


def load_default_model():
    """The embedded default causal LM shipped with the package (offline).

    A :class:`TinyCausalLM` pre-trained on an induction (copy-from-context)
    corpus by ``scripts/train_default_model.py``; its training facts are in
    ``model.metadata``. See ``docs/reachability.md`` for what it can do.

    Returns
    -------
    model : TinyCausalLM
        A fresh copy in eval mode (``vocab_size=64``, ``d_model=64``).

    Examples
    --------
    >>> lm = load_default_model()
    >>> lm.config["vocab_size"], lm.config["d_model"]
    (64, 64)
    """
    path = resources.files("intrinsic_rank") / "data" / DEFAULT_MODEL_FILE
    with resources.as_file(path) as file:
        if not os.path.isfile(file):
            raise FileNotFoundError(
                f"the embedded default model {file} is missing; rebuild it with "
                "python scripts/train_default_model.py"
            )
        return _load_tiny_lm(file)


def as_causal_lm(model="default", copy_model=True):
    """Wrap a causal LM in the adapter the reachability code uses, and check it.

    Parameters
    ----------
    model : "default", str/PathLike, TinyCausalLM, transformers model or CausalLMAdapter
        ``"default"`` loads :func:`load_default_model`; a path to a folder (or the
        name of a packaged model, see :data:`~intrinsic_rank.nn.PACKAGED_MODELS`) loads a Hugging Face
        causal LM from it offline (``transformers`` needed); a path
        to a ``.pt`` file loads a model saved by :func:`save_tiny_lm`; a model
        instance is wrapped.
    copy_model : bool, default=True
        Deep-copy a given model instance before freezing it, so the caller's
        model is never modified (estimators rely on this). An adapter is
        already frozen and is used as it is, never copied.

    Returns
    -------
    adapter : CausalLMAdapter
        Frozen, in eval mode, and checked to be causal.

    Raises
    ------
    ValueError
        If the model is not causal, or the path holds no model.
    """
    if isinstance(model, str) and model == "default":
        return check_causal(TinyLMAdapter(load_default_model()))
    from ._pretrained import PACKAGED_MODELS, packaged_model_path

    if isinstance(model, str) and model in PACKAGED_MODELS:
        model = packaged_model_path(model)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isfile(path):
            return check_causal(TinyLMAdapter(_load_tiny_lm(path)))
        if os.path.isdir(path):
            from ._hf import HFCausalLMAdapter, load_hf_causal_lm
            from ._pretrained import _encoder_folder_error

            _encoder_folder_error(path)
            return check_causal(HFCausalLMAdapter(load_hf_causal_lm(path)))
        raise ValueError(
            f"model={model!r} is neither 'default' nor an existing file or folder"
        )
    if isinstance(model, CausalLMAdapter):
        # adapters are frozen when built, so they are shared, not copied: an
        # experiment can reuse one loaded (possibly large) model for every fit
        return check_causal(model.freeze())
    if copy_model:
        model = copy.deepcopy(model)
    if isinstance(model, TinyCausalLM):
        return check_causal(TinyLMAdapter(model))
    if hasattr(model, "get_input_embeddings") and hasattr(model, "config"):
        from ._hf import HFCausalLMAdapter

        return check_causal(HFCausalLMAdapter(model))
    raise TypeError(
        "model must be 'default', a path, a TinyCausalLM, a transformers causal LM "
        f"or a CausalLMAdapter; got {type(model).__name__}"
    )


def _target_seed(base_seed, ids):
    """Seed of one target's memory: a function of the seed and the target alone."""
    return np.random.SeedSequence([int(base_seed), *map(int, ids)])


class PromptedLM(nn.Module):
    """A frozen causal LM with ``n_memory`` trainable vectors per target.

    The input for target ``t = (t_1, ..., t_n)`` is
    ``[mem_1, ..., mem_m, emb(t_1), ..., emb(t_{n-1})]``; the logits at the last
    ``n - 1`` positions predict ``t_2 .. t_n`` (the first target token is given,
    SPEC section 4). Only ``memory`` has gradients.

    Parameters
    ----------
    lm : CausalLMAdapter
        The frozen model (see :func:`as_causal_lm`).
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
            np.random.default_rng(_target_seed(random_state, row)).standard_normal(
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
    def generate(self, index, first, length):
        """Greedy decoding from each target's memory and first token.

        Parameters
        ----------
        index : LongTensor of shape (B,)
            Rows of ``memory``.
        first : LongTensor of shape (B,)
            The given first token.
        length : int
            Length of the returned sequences, the first token included.

        Returns
        -------
        ids : LongTensor of shape (B, length)
        """
        ids = first[:, None]
        for _ in range(length - 1):
            logits = self.lm.logits(self._inputs(index, ids))[:, -1]
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
        return ids

    @torch.no_grad()
    def final_hidden(self, index, ids):
        """Final hidden states of the prompted inputs ``(B, m + n - 1, width)``."""
        return self.lm.final_hidden(self._inputs(index, ids[:, :-1]))


def random_prompt_hidden_states(lm, n_memory, n_tokens, n_prompts=256, init_std=None,
                                batch_size=256, random_state=0):
    """Final hidden states of a frozen LM under random prompts (seed 004's radius).

    Each prompt is ``n_memory`` random vectors drawn as a cramming run draws its
    initial memory (``randn(m, d)`` times the embedding matrix's standard
    deviation, or ``init_std``), then ``n_tokens`` uniformly random token ids.
    The radius ``r`` of the bound is the largest infinity-norm of the returned
    states (:func:`intrinsic_rank.bounds.hidden_state_geometry`).

    Parameters
    ----------
    lm : CausalLMAdapter
        See :func:`as_causal_lm`.
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
    >>> states = random_prompt_hidden_states(as_causal_lm("default"), 2, 6, n_prompts=8)
    >>> states.shape
    (8, 8, 64)
    >>> bool(hidden_state_geometry(states)["radius"] > 0)
    True
    """
    if n_memory < 0 or n_tokens < 0 or n_memory + n_tokens < 1 or n_prompts < 1:
        raise ValueError(
            f"need n_memory >= 0, n_tokens >= 0 with at least one position, and "
            f"n_prompts >= 1; got {n_memory}, {n_tokens}, {n_prompts}"
        )
    if lm.max_length is not None and n_memory + n_tokens > lm.max_length:
        raise ValueError(
            f"prompts of {n_memory + n_tokens} positions exceed the model's context of "
            f"{lm.max_length}"
        )
    generator = torch.Generator().manual_seed(int(random_state))
    E = lm.embedding_matrix().detach()
    std = float(E.float().std()) if init_std is None else float(init_std)
    chunk = n_prompts if batch_size is None else int(batch_size)
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
