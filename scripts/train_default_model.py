"""Train the embedded default causal LM shipped as ``intrinsic_rank/data/default_lm.pt``.

A randomly initialised Transformer ignores prompt vectors, so cramming fails on
it (SPEC section 6: 0 of 16 targets of length 4). This script pre-trains a small
:class:`~intrinsic_rank.nn.TinyCausalLM` on an induction corpus (repeated random
segments ``a a``, :func:`~intrinsic_rank.datasets.make_induction_corpus`) so that
it reads its context, prompt vectors included. Every position of the context is
trained. The run is seeded: the same torch build reproduces the same weights.

The flags choose the configuration that ``scripts/steerability_study.py``
varies (width, depth, steps, corpus); the defaults are those of the shipped
file. ``--arch gpt2`` trains a tiny ``transformers.GPT2LMHeadModel`` on the same
corpus instead and saves it as a Hugging Face folder (safetensors), by default
``tests/data/tiny_gpt2_steerable``, the steerable model of the Hugging Face tests.

Corpora (``--corpus``):

* ``induction`` -- :func:`~intrinsic_rank.datasets.make_induction_corpus`,
  segment lengths ``1 .. --max-segment`` (the shipped model: 16);
* ``markov`` -- a text-like stream: a fixed random order-2 Markov chain over
  the vocabulary (each context ``(a, b)`` has a sparse Dirichlet(0.1) next-token
  law; chain drawn from ``--corpus-seed``), no long-range dependence;
* ``mixed`` -- each sequence is induction or Markov with probability 1/2.

Usage::

    python scripts/train_default_model.py            # writes the package file
    python scripts/train_default_model.py --out my_lm.pt --steps 6000 --d-model 128
    python scripts/train_default_model.py --arch gpt2   # writes tests/data/tiny_gpt2_steerable

Measured on a 2-core CPU (torch 2.13): about 4 minutes for the default 3000 steps.
"""

import argparse
import json
import os
import time

import numpy as np
import torch

from intrinsic_rank.datasets import make_induction_corpus
from intrinsic_rank.nn import DEFAULT_MODEL_FILE, TinyCausalLM, save_tiny_lm, train_causal_lm

CONFIG = dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4, max_length=128)
CORPORA = ("induction", "markov", "mixed")
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "intrinsic_rank", "data", DEFAULT_MODEL_FILE)
DEFAULT_GPT2_OUT = os.path.join(HERE, "..", "tests", "data", "tiny_gpt2_steerable")


def markov_table(vocab_size, seed, concentration=0.1):
    """Next-token law ``P[a, b] -> (vocab_size,)`` of a random order-2 chain."""
    rng = np.random.RandomState(seed)
    table = rng.dirichlet(np.full(vocab_size, concentration), size=(vocab_size, vocab_size))
    return np.cumsum(table, axis=-1)


def markov_corpus(n_samples, seq_len, cumulative, rng):
    """Sequences of the order-2 chain ``cumulative`` (from :func:`markov_table`)."""
    V = cumulative.shape[0]
    X = np.empty((n_samples, seq_len), dtype=np.int64)
    X[:, :2] = rng.randint(V, size=(n_samples, 2))
    u = rng.random_sample((n_samples, seq_len))
    for t in range(2, seq_len):
        rows = cumulative[X[:, t - 2], X[:, t - 1]]
        X[:, t] = np.minimum((rows < u[:, t:t + 1]).sum(axis=1), V - 1)
    return X


def make_sampler(corpus, vocab_size, seq_len, max_segment=16, corpus_seed=1234):
    """``sample_batch(batch_size, rng) -> (inputs, targets)`` for :func:`train_causal_lm`."""
    if corpus not in CORPORA:
        raise ValueError(f"corpus must be one of {', '.join(CORPORA)}; got {corpus!r}")
    cumulative = markov_table(vocab_size, corpus_seed) if corpus != "induction" else None

    def sample_batch(batch_size, rng):
        if corpus == "induction":
            ids = make_induction_corpus(batch_size, seq_len + 1, vocab_size,
                                        max_segment=max_segment, random_state=rng)
        elif corpus == "markov":
            ids = markov_corpus(batch_size, seq_len + 1, cumulative, rng)
        else:
            ind = make_induction_corpus(batch_size, seq_len + 1, vocab_size,
                                        max_segment=max_segment, random_state=rng)
            mark = markov_corpus(batch_size, seq_len + 1, cumulative, rng)
            ids = np.where(rng.random_sample((batch_size, 1)) < 0.5, ind, mark)
        return ids[:, :-1], ids[:, 1:]

    return sample_batch


def build_model(arch="tiny", vocab_size=64, d_model=64, n_layers=2, n_heads=4, max_length=128):
    """A freshly initialised model of the given architecture (seed torch first)."""
    if arch == "tiny":
        return TinyCausalLM(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                            n_heads=n_heads, max_length=max_length)
    if arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=vocab_size, n_embd=d_model, n_layer=n_layers,
                            n_head=n_heads, n_positions=max_length, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(config)
    raise ValueError(f"arch must be 'tiny' or 'gpt2'; got {arch!r}")


def train(arch="tiny", d_model=64, n_layers=2, n_heads=4, vocab_size=64, max_length=128,
          corpus="induction", max_segment=16, corpus_seed=1234, steps=3000, batch_size=32,
          lr=1e-3, seed=0, callback=None, progress=False):
    """Build and train one model; returns ``(model, losses, seconds, metadata)``."""
    torch.manual_seed(seed)
    model = build_model(arch, vocab_size, d_model, n_layers, n_heads, max_length)
    sample_batch = make_sampler(corpus, vocab_size, max_length, max_segment, corpus_seed)
    start = time.perf_counter()
    losses = train_causal_lm(model, sample_batch, steps, batch_size=batch_size, lr=lr,
                             random_state=seed, progress=progress, callback=callback)
    seconds = time.perf_counter() - start
    metadata = dict(
        arch=arch, corpus="make_induction_corpus" if corpus == "induction" else corpus,
        max_segment=max_segment, seq_len=max_length, steps=steps, batch_size=batch_size,
        lr=lr, seed=seed, final_loss=float(losses[-100:].mean()), seconds=round(seconds, 1),
        torch=str(torch.__version__), script="scripts/train_default_model.py",
    )
    if corpus != "induction":
        metadata["corpus_seed"] = corpus_seed
    return model, losses, seconds, metadata


def save(model, out, metadata):
    """Save a TinyCausalLM as a .pt file, a GPT-2 as a safetensors folder; returns bytes."""
    if isinstance(model, TinyCausalLM):
        save_tiny_lm(model, out, metadata)
        return os.path.getsize(out)
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "training.json"), "w") as handle:
        json.dump(metadata, handle, indent=1)
    return sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None,
                        help="output file (tiny) or folder (gpt2); default: the shipped one")
    parser.add_argument("--arch", choices=("tiny", "gpt2"), default="tiny")
    parser.add_argument("--d-model", type=int, default=CONFIG["d_model"])
    parser.add_argument("--layers", type=int, default=CONFIG["n_layers"])
    parser.add_argument("--heads", type=int, default=CONFIG["n_heads"])
    parser.add_argument("--corpus", choices=CORPORA, default="induction")
    parser.add_argument("--corpus-seed", type=int, default=1234,
                        help="seed of the random Markov chain (markov and mixed corpora)")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-segment", type=int, default=16,
                        help="segment lengths of the induction corpus are 1..max-segment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = args.out or (DEFAULT_GPT2_OUT if args.arch == "gpt2" else DEFAULT_OUT)
    model, losses, seconds, metadata = train(
        arch=args.arch, d_model=args.d_model, n_layers=args.layers, n_heads=args.heads,
        vocab_size=CONFIG["vocab_size"], max_length=CONFIG["max_length"], corpus=args.corpus,
        max_segment=args.max_segment, corpus_seed=args.corpus_seed, steps=args.steps,
        batch_size=args.batch_size, lr=args.lr, seed=args.seed, progress=True)
    # the best a model can do on the induction corpus: the second copy of each
    # segment is predictable, the first is uniform noise (a lower bound, not exact)
    print(f"trained {args.steps} steps in {seconds:.0f} s; loss {losses[:50].mean():.3f} "
          f"-> {losses[-100:].mean():.3f} (uniform guessing: {np.log(CONFIG['vocab_size']):.3f})")
    size = save(model, out, metadata)
    print(f"saved {os.path.normpath(out)} ({size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
