"""Train the embedded default causal LM shipped as ``intrinsic_rank/data/default_lm.pt``.

A randomly initialised Transformer ignores prompt vectors, so cramming fails on
it (SPEC section 6: 0 of 16 targets of length 4). This script pre-trains a small
:class:`~intrinsic_rank.nn.TinyCausalLM` on an induction corpus (repeated random
segments ``a a``, :func:`~intrinsic_rank.datasets.make_induction_corpus`) so that
it reads its context, prompt vectors included. Every position of the context is
trained. The run is seeded: the same torch build reproduces the same weights.

Usage::

    python scripts/train_default_model.py            # writes the package file
    python scripts/train_default_model.py --out my_lm.pt --steps 6000

Measured on a 2-core CPU (torch 2.13): about 4 minutes for the default 3000 steps.
"""

import argparse
import os
import time

import numpy as np
import torch

from intrinsic_rank.datasets import make_induction_corpus
from intrinsic_rank.nn import DEFAULT_MODEL_FILE, TinyCausalLM, save_tiny_lm, train_causal_lm

CONFIG = dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4, max_length=128)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = os.path.join(os.path.dirname(__file__), "..", "intrinsic_rank", "data",
                               DEFAULT_MODEL_FILE)
    parser.add_argument("--out", default=default_out)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-segment", type=int, default=16,
                        help="segment lengths of the induction corpus are 1..max-segment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = TinyCausalLM(**CONFIG)
    seq_len = CONFIG["max_length"]

    def sample_batch(batch_size, rng):
        ids = make_induction_corpus(batch_size, seq_len + 1, CONFIG["vocab_size"],
                                    max_segment=args.max_segment, random_state=rng)
        return ids[:, :-1], ids[:, 1:]

    start = time.perf_counter()
    losses = train_causal_lm(model, sample_batch, args.steps, batch_size=args.batch_size,
                             lr=args.lr, random_state=args.seed, progress=True)
    seconds = time.perf_counter() - start
    # the best a model can do on this corpus: the second copy of each segment is
    # predictable, the first is uniform noise (a lower bound on the loss, not exact)
    print(f"trained {args.steps} steps in {seconds:.0f} s; loss {losses[:50].mean():.3f} "
          f"-> {losses[-100:].mean():.3f} (uniform guessing: {np.log(CONFIG['vocab_size']):.3f})")
    metadata = dict(
        corpus="make_induction_corpus", max_segment=args.max_segment, seq_len=seq_len,
        steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
        final_loss=float(losses[-100:].mean()), seconds=round(seconds, 1),
        torch=str(torch.__version__), script="scripts/train_default_model.py",
    )
    save_tiny_lm(model, args.out, metadata)
    print(f"saved {os.path.normpath(args.out)} ({os.path.getsize(args.out) / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
