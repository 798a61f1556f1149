"""The kernel-rank trajectory: per-head profiles of one small causal LM along its training.

Part of the Entropic Bound's appendix on real models: on a fixed task, whatever
the static kernel rank does while the model trains is the optimisation's
doing, not the task's.
"""

import time

import numpy as np
import torch
from sklearn.utils import Bunch

from ..._validation import check_device, check_int, torch_rng
from ...datasets import make_induction_corpus
from ...inspection import profile_heads
from ..runner import pyplot, save_figure, progress_steps

__all__ = ["TRAJECTORY_COLUMNS", "kernel_rank_trajectory", "plot_kernel_rank_trajectory"]

TRAJECTORY_COLUMNS = ["step", "loss", "kernel_energy_rank", "kernel_stable_rank",
                      "attn_energy_rank", "sink_mass", "band_mass"]
"""Columns of the trajectory table (the ``summary`` of :func:`kernel_rank_trajectory`)."""

def kernel_rank_trajectory(steps=(0, 100, 200, 400, 800), vocab_size=32, d_model=32,
                           n_layers=2, n_heads=4, seq_len=32, max_segment=8, lr=3e-3,
                           batch_size=32, n_inputs=16, random_state=0, progress=False,
                           device="cpu"):
    """Per-head profiles of one small causal LM at checkpoints of its training.

    A :class:`~intrinsic_rank.nn.TinyCausalLM` is trained on induction
    sequences (:func:`~intrinsic_rank.datasets.make_induction_corpus`, a fixed
    task) with :func:`~intrinsic_rank.nn.train_causal_lm`, and after each
    number of steps in ``steps`` every head is profiled with
    :func:`~intrinsic_rank.inspection.profile_heads` on the same held-out sequences. The task never
    changes, so whatever the static kernel rank does along the way is the
    optimisation's doing (the Entropic Bound's appendix: kernel rank tracks
    optimisation progress, not task complexity).

    Parameters
    ----------
    steps : sequence of int, default=(0, 100, 200, 400, 800)
        Cumulative training steps at which to profile, increasing, ``0`` for
        the initialisation.
    vocab_size, d_model, n_layers, n_heads : int, default=32, 32, 2, 4
        The model.
    seq_len : int, default=32
        Training and held-out sequence length (the model's context).
    max_segment : int, default=8
        Longest repeated segment of the induction sequences.
    lr : float, default=3e-3
        Peak learning rate (20 warm-up steps, cosine decay per stretch).
    batch_size : int, default=32
    n_inputs : int, default=16
        Held-out sequences that every profile uses.
    random_state : int, default=0
        Seeds the initialisation (torch, without touching the global torch
        generator), the training stream and the held-out data.
    progress : bool, default=False
        Report each checkpoint through the commands' progress convention (a
        bar on a terminal, the status line off one).
    device : str or torch.device, default="cpu"
        Where the model trains and is profiled (initialised on the CPU first,
        so a seed gives the same initial weights on every device).

    Returns
    -------
    trajectory : Bunch
        ``records`` (one per checkpoint and layer: ``step``, ``layer``,
        ``loss`` -- the held-out next-token loss in nats -- and the layer's mean
        ``kernel_energy_rank``, ``kernel_stable_rank``, ``attn_energy_rank``,
        ``sink_mass`` and ``band_mass``), ``summary`` (per checkpoint, means
        over all heads), ``config`` and ``seconds``.

    Examples
    --------
    >>> t = kernel_rank_trajectory(steps=(0, 20), d_model=16, n_heads=2, seq_len=16,
    ...                            n_inputs=4)
    >>> [(r["step"], r["layer"]) for r in t.records]
    [(0, 0), (0, 1), (20, 0), (20, 1)]
    """
    from ...nn import TinyCausalLM, train_causal_lm

    start = time.perf_counter()
    steps = [int(s) for s in steps]
    if not steps or steps[0] < 0 or any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"steps must be increasing integers >= 0; got {steps}")
    for value, name, low in ((vocab_size, "vocab_size", 2), (seq_len, "seq_len", 2),
                             (n_inputs, "n_inputs", 1), (batch_size, "batch_size", 1),
                             (max_segment, "max_segment", 1)):
        check_int(value, name, low)
    device = check_device(device)
    with torch_rng(random_state):
        lm = TinyCausalLM(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                          n_heads=n_heads, max_length=seq_len)
    lm = lm.to(device)

    def sample(size, rng):
        X = make_induction_corpus(size, seq_len + 1, vocab_size, max_segment=max_segment,
                                  random_state=rng)
        return X[:, :-1], X[:, 1:]

    held_out = make_induction_corpus(n_inputs, seq_len, vocab_size, max_segment=max_segment,
                                     random_state=int(random_state) + 7919)
    ids = torch.as_tensor(held_out).to(device)
    records, summary, done = [], [], 0
    with progress_steps(len(steps), "profile trajectory", enabled=progress) as bar:
        for step in steps:
            if step > done:
                train_causal_lm(lm, sample, step - done, batch_size=batch_size, lr=lr,
                                warmup=min(20, step - done),
                                random_state=int(random_state) + step)
                done = step
            lm.eval()
            with torch.no_grad():
                logits = lm(ids[:, :-1])
                loss = float(torch.nn.functional.cross_entropy(
                    logits.reshape(-1, vocab_size), ids[:, 1:].reshape(-1)))
            profile = profile_heads(lm, held_out, device=device)
            keys = ("kernel_energy_rank", "kernel_stable_rank", "attn_energy_rank",
                    "sink_mass", "band_mass")
            for layer in range(n_layers):
                rows = [r for r in profile.records if r["layer"] == layer]
                records.append(dict(step=step, layer=layer, loss=loss,
                                    **{k: float(np.mean([r[k] for r in rows])) for k in keys}))
            summary.append(dict(step=step, loss=loss, **{
                k: float(np.mean([r[k] for r in profile.records])) for k in keys}))
            bar.update(f"step {step}: held-out loss {loss:.3f}, mean kernel energy rank "
                       f"{summary[-1]['kernel_energy_rank']:.2f}")
    config = dict(steps=steps, vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                  n_heads=n_heads, d_head=d_model // n_heads, seq_len=seq_len,
                  max_segment=max_segment, lr=lr, batch_size=batch_size, n_inputs=n_inputs,
                  random_state=random_state)
    return Bunch(records=records, summary=summary, config=config,
                 seconds=time.perf_counter() - start)


def plot_kernel_rank_trajectory(trajectory, path=None):
    """Static kernel rank, realised attention rank and loss along training.

    Parameters
    ----------
    trajectory : Bunch
        The output of :func:`kernel_rank_trajectory`.
    path : str or None
        Where to save the PNG; ``None`` only returns the figure.

    Returns
    -------
    figure : matplotlib.figure.Figure
    """
    plt = pyplot()
    cfg = trajectory.config
    fig, (ax_k, ax_a, ax_l) = plt.subplots(1, 3, figsize=(11, 4.2))
    for layer in range(cfg["n_layers"]):
        rows = [r for r in trajectory.records if r["layer"] == layer]
        steps = [r["step"] for r in rows]
        ax_k.plot(steps, [r["kernel_energy_rank"] for r in rows], "o-", label=f"layer {layer}")
        ax_a.plot(steps, [r["attn_energy_rank"] for r in rows], "o-", label=f"layer {layer}")
    ax_l.plot([s["step"] for s in trajectory.summary], [s["loss"] for s in trajectory.summary],
              "o-", color="k")
    ax_k.set_title(f"static QK kernel: energy rank\n(of d_head = {cfg['d_head']})", fontsize=10)
    ax_a.set_title(f"realised attention: energy rank\n(length {cfg['seq_len']})", fontsize=10)
    ax_l.set_title("held-out next-token loss", fontsize=10)
    ax_k.set_ylabel("energy effective rank (mean over heads)")
    ax_a.set_ylabel("energy effective rank (mean over heads)")
    ax_l.set_ylabel("cross-entropy (nats)")
    for ax in (ax_k, ax_a, ax_l):
        ax.set_xlabel("training steps")
    for ax in (ax_k, ax_a):
        ax.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18),
                  ncol=cfg["n_layers"])
    fig.suptitle(
        f"One fixed task (induction sequences, |V| = {cfg['vocab_size']}), a TinyCausalLM "
        f"with {cfg['n_layers']} layers x {cfg['n_heads']} heads, d = {cfg['d_model']}, "
        f"profiled on {cfg['n_inputs']} held-out sequences", fontsize=9)
    return save_figure(fig, path)
