"""Weights drawn from the test's own generator, whatever library built the model.

A model built from a ``transformers`` config starts from that library's own
initialisation, which changes between its versions; a test whose threshold rests on
it can turn red on a fresh machine. :func:`own_weights` overwrites every parameter
from a ``torch.Generator`` seeded by the test: matrices ``N(0, gain^2 / fan_in)``,
norm gains ``1 + N(0, 0.1^2)``, other vectors (biases, norm biases) ``N(0, bias^2)``.
"""

import math

import torch

__all__ = ["own_weights"]


def own_weights(model, seed, *, gain=1.0, bias=0.1):
    """Overwrite every parameter of ``model`` from a generator seeded by ``seed``; return it.

    Examples
    --------
    >>> layer = own_weights(torch.nn.Linear(4, 2), 0)
    >>> torch.equal(layer.weight, own_weights(torch.nn.Linear(4, 2), 0).weight)
    True
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            draw = torch.randn(p.shape, generator=generator, dtype=torch.float64)
            if p.ndim >= 2:
                value = draw * gain / math.sqrt(p.shape[-1])
            elif ("norm" in name or "ln_" in name) and name.endswith("weight"):
                value = 1.0 + 0.1 * draw
            else:
                value = bias * draw
            p.copy_(value.to(p.dtype))
    return model
