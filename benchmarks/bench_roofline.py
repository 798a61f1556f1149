"""Benchmark: achieved GFLOP/s of the package's hot loops against the matmul peak of the same run.

For each workload the useful floating-point work is counted analytically (the
formulas below), the workload is timed, and the achieved rate is divided by the
peak of a large ``torch.matmul`` measured in the same process, at the same
thread count, just before (fp32, and bf16 where the CPU has AMX/AVX-512-BF16 or
the GPU supports it). Timings on a shared machine are noisy; the fraction of the
peak measured in the same run, and the before/after ratio of two code paths timed
side by side (interleaved), are what to read.

Workloads and their useful work
-------------------------------

**Sweep step** (one Adam step of a rank-batched softmax student, batch ``B``,
``L`` tokens of width ``d``, outputs of width ``e = d``, ``R`` rank slots of
ranks ``r_1..r_R``, ``S = sum r``). Forward, per step:

* projections ``X W_Q``, ``X W_K`` per slot: ``2 B L d r`` each, ``4 B L d S`` in all;
* scores ``Q K^T``: ``2 B L^2 S``;
* softmax: ``5 B R L^2`` (max, subtract, exp, sum, divide);
* values ``X W_V``: ``2 B L d e R``;
* mixing ``A V``: ``2 B L^2 e R``;
* loss: ``3 B R L e`` (subtract, square, sum).

Backward: a matrix product ``C = A B`` costs two more of its size when both
operands need a gradient (scores, mixing: x3 in all), one more when only the
weight does (the projections read the input ``X``, which needs none: x2 in all);
softmax backward ``4 B R L^2``, loss backward ``2 B R L e``. The masked columns
of a slot (``r_max - r`` of them) are not useful work. ``S`` counts the factor
form ``(X W_Q)(X W_K)^T``; the kernel form ``X (W_Q W_K^T) X^T`` costs
``2 B L d^2 + 2 B L^2 d`` per slot and is cheaper only for ``r > d L / (2 d + L)``
(38 at ``d = 64``, ``L = 32``).

**Sweep epoch**: the estimator's fit (``AttentionRankEstimator``) at
``n = 4,096``; seconds per epoch from fits of 1 and 3 epochs (their difference
over 2, so validation, the split and the post-fit scoring cancel), work = the
steps of one epoch over the training part (``B`` rows each, the last one short).

**Kernel bound** of the sweep step: each of the step's matrix products timed
alone at its exact shape (hot in cache, fastest of 7), then the elementwise
passes no step can skip (softmax forward and backward, the loss residual and its
gradient, Adam); the step's useful work over their summed time, against the fp32
peak, bounds what the step can reach with these kernels (``products_bound``:
the products only; ``kernel_bound``: with the elementwise passes).

**Cramming step** on SmolLM2-135M-Instruct (``intrinsic_rank.nn.as_causal_lm("smollm2-135m")``;
8 targets of 64 tokens after one trainable prefix vector each, cross-entropy,
Adam on the prefix; the model is frozen). Per token of ``T = 65``: every linear
layer of the decoder ``2 P_lin`` (``P_lin`` its weights: attention q, k, v, o and
the MLP), the head ``2 d V``; attention ``4 T d`` per layer (scores and mixing
over all ``T`` positions, the causal mask not subtracted). Backward needs the
input gradients only (the model's weights are frozen): x2 for the linear
layers and the head, x3 for the attention products.

**Decoder cells** (``intrinsic_rank.inspection.decoder_cell_proportions``):
``n`` points through the ``V x d`` head by two rules (the real argmax and the
authors' nearest row): ``2 x 2 n V d`` in the reduced precision, plus the
exact check of ``check_points`` points, ``2 x 2 c V d``; the rescoring of near
ties is not counted.

Run::

    OMP_NUM_THREADS=1 python benchmarks/bench_roofline.py            # full (~3 min + SmolLM2)
    OMP_NUM_THREADS=1 python benchmarks/bench_roofline.py --skip-lm  # SmolLM2 left out
    python benchmarks/bench_roofline.py --quick                      # smoke run (seconds)
    python benchmarks/bench_roofline.py --device cuda
"""

import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

DEFAULT_THREADS = 1
HALF_ROOFLINE = 0.5
COARSE_64 = [1, 2, 4, 8, 16, 32, 64]


# -- set-up ---------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help=f"torch intra-op threads (default {DEFAULT_THREADS})")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: tiny sizes, few steps, no estimator epochs, no SmolLM2")
    parser.add_argument("--skip-lm", action="store_true",
                        help="skip the SmolLM2 workloads (loading the model takes ~30 s)")
    parser.add_argument("--skip-sweep", action="store_true",
                        help="skip the sweep step and epoch (time the SmolLM2 workloads only)")
    parser.add_argument("--full-grid", action="store_true",
                        help="also time the full grid 1..64 at d=64, L=32 (seconds per step)")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per path and round (default 4; 1 with --quick)")
    parser.add_argument("--precision-study", action="store_true",
                        help="also fit teachers in float32 and bfloat16 and compare rank_ "
                             "(several minutes)")
    parser.add_argument("--cells-samples", type=int, default=2**14,
                        help="Monte Carlo points of the decoder-cell estimate (default 2^14)")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 1 if args.quick else 4
    if args.quick:
        args.skip_lm = True
    return args


def load():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def synchronize(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def has_bf16(device):
    """Whether bf16 matmuls have hardware support on ``device``."""
    if str(device).startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo") as info:
            flags = info.read()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def best_time(function, device, repeats=7, inner=2, warmups=1):
    """Seconds of the fastest of ``repeats`` runs of ``function`` (``inner`` calls each),
    after ``warmups`` untimed calls."""
    for _ in range(warmups):
        function()
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            function()
        synchronize(device)
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def matmul_peak(dtype, device, n, repeats=8):
    """GFLOP/s of the best of ``repeats`` ``n x n`` matmuls (``2 n^3`` each), after two warm-ups."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    best = best_time(lambda: torch.matmul(a, b), device, repeats=repeats, inner=1, warmups=2)
    return 2 * n**3 / best / 1e9


def remeasured(peaks, args):
    """The peaks measured again now (the load of a shared machine changes by the minute)."""
    fresh = {"n": peaks["n"], "fp32": matmul_peak(torch.float32, args.device, peaks["n"])}
    if "bf16" in peaks:
        fresh["bf16"] = matmul_peak(torch.bfloat16, args.device, peaks["n"])
    print("\nmatmul peak, measured again: "
          + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in fresh.items() if k != "n"))
    return fresh


# -- work counts ------------------------------------------------------------------------
def sweep_step_flops(B, L, d, e, ranks):
    """Useful flops of one training step of the softmax student, by operation."""
    S, R = sum(ranks), len(ranks)
    return {
        "projections Q, K": 2 * 4 * B * L * d * S,
        "scores Q K^T": 3 * 2 * B * L * L * S,
        "softmax": (5 + 4) * B * R * L * L,
        "values X W_V": 2 * 2 * B * L * d * e * R,
        "mixing A V": 3 * 2 * B * L * L * e * R,
        "loss": (3 + 2) * B * R * L * e,
    }


def lm_step_flops(model, n_targets, T):
    """Useful flops of one cramming step (forward and input gradients) of a HF causal LM."""
    config = model.config
    head = model.get_output_embeddings().weight
    linear = sum(m.weight.numel() for name, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and m.weight is not head)
    tokens = n_targets * T
    attention = config.num_hidden_layers * 4 * T * config.hidden_size * tokens
    return {
        "linear layers": 2 * 2 * linear * tokens,
        "head": 2 * 2 * head.numel() * tokens,
        "attention": 3 * attention,
    }


# -- the sweep step: before (padded) and after (rank-major) side by side ------------------
def padded_forward(module, X):
    """The padded layout: every slot ``r_max`` wide (masked factors), slot-major outputs."""
    from intrinsic_rank.nn import row_softmax

    q = torch.einsum("nld,rdk->nrlk", X, module._masked(module.query))
    k = torch.einsum("nld,rdk->nrlk", X, module._masked(module.key))
    values = torch.einsum("nld,rde->nrle", X, module.value)
    return row_softmax(q @ k.transpose(-1, -2)) @ values


def padded_loss(y_pred, y_true):
    """The unfused per-rank MSE: ``(y_pred - y)^2`` averaged, autograd's backward."""
    return (y_pred - y_true.unsqueeze(1)).pow(2).flatten(2).mean(dim=(0, 2))


def sweep_paths(args, bf16):
    from intrinsic_rank.estimators._net import RankwiseMSELoss, training_autocast

    criterion = RankwiseMSELoss()

    def after(module, X, Y):
        return criterion(module(X), Y)

    def after_bf16(module, X, Y):
        with training_autocast("bfloat16", args.device):
            out = module(X)
        return criterion(out.float(), Y)

    paths = {"padded (before)": lambda m, X, Y: padded_loss(padded_forward(m, X), Y),
             "rank-major": after}
    if bf16:
        paths["rank-major, bf16 autocast"] = after_bf16
    return paths


def time_sweep_step(args, label, B, L, d, ranks, peaks, rounds):
    from intrinsic_rank.nn import make_student

    torch.manual_seed(0)
    X = torch.randn(B, L, d, device=args.device)
    Y = torch.randn(B, L, d, device=args.device)
    work = sweep_step_flops(B, L, d, d, ranks)
    total = sum(work.values())
    paths = sweep_paths(args, "bf16" in peaks)
    states = {}
    for name, loss_of in paths.items():
        module = make_student("softmax", d=d, d_out=d, ranks=ranks, seq_len=L).to(args.device)
        states[name] = (module, torch.optim.Adam(module.parameters(), lr=3e-3), loss_of, [])

    def step(module, optimizer, loss_of):
        optimizer.zero_grad()
        loss_of(module, X, Y).sum().backward()
        optimizer.step()

    for module, optimizer, loss_of, _ in states.values():  # warm-up
        step(module, optimizer, loss_of)
    fp32_peaks = []
    for _ in range(rounds):  # interleaved, so load changes hit every path alike
        fp32_peaks.append(matmul_peak(torch.float32, args.device, peaks["n"], repeats=4))
        for module, optimizer, loss_of, times in states.values():
            synchronize(args.device)
            start = time.perf_counter()
            for _ in range(args.steps):
                step(module, optimizer, loss_of)
            synchronize(args.device)
            times.append((time.perf_counter() - start) / args.steps)
    print(f"\n== sweep step: {label}: B={B} L={L} d={d} R={len(ranks)} ranks "
          f"{ranks if len(ranks) <= 8 else f'{ranks[0]}..{ranks[-1]}'} "
          f"(load {load()})")
    print("  useful work per step: " + ", ".join(
        f"{k} {v / total:.0%}" for k, v in work.items()) + f"; {total / 1e9:.3f} GFLOP")
    peak = statistics.median(fp32_peaks)
    print(f"  fp32 matmul peak between the rounds: {', '.join(f'{p:.1f}' for p in fp32_peaks)} "
          f"GFLOP/s (median {peak:.1f}: the reference of this section)")
    result = {}
    for name, (_, _, _, times) in states.items():
        seconds = statistics.median(times)
        rate = total / seconds / 1e9
        ref = peaks["bf16"] if "bf16" in name else peak
        result[name] = dict(seconds=seconds, gflops=rate, fraction=rate / peak)
        print(f"  {name:<28} {seconds * 1e3:9.2f} ms/step  {rate:7.2f} GFLOP/s  "
              f"{rate / peak:.2f} of the fp32 peak"
              + (f", {rate / ref:.2f} of the bf16 peak" if "bf16" in name else ""))
    before = result["padded (before)"]["seconds"]
    for name in result:
        if name != "padded (before)":
            print(f"  speed-up {name} / padded: {before / result[name]['seconds']:.2f}x")
    return result


def kernel_bound(args, label, B, L, d, ranks, peaks):
    """The step's own operations timed one at a time: how close the kernels allow it to get.

    Every matrix product of one step of the rank-major student (the projection
    and its weight gradient, each slot's scores and their two gradients, the
    values and their weight gradient, the mixing and its two gradients) is
    timed alone at its exact shape, hot in cache, fastest of several runs; then
    the elementwise passes a step cannot skip (softmax forward and backward, the
    loss residual and its gradient, the Adam update). The step's useful work over
    the sum of these times, divided by the fp32 peak measured just before, is an
    upper bound on the fraction the step itself can reach with these kernels:
    the step also pays for copies, the cache misses of operands that are not hot,
    and the autograd bookkeeping.
    """
    from intrinsic_rank.nn import make_student, row_softmax

    device = args.device
    e, R, S = d, len(ranks), sum(ranks)
    gen = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(device)

    width = S + (-S % 16)
    X2, gP = randn(B * L, d), randn(B * L, 2 * width)
    W = randn(d, 2 * width)
    Wv, V = randn(R, d, e), randn(R, B * L, e)
    A, Vb, G = randn(R * B, L, L), randn(R * B, L, e), randn(R * B, L, e)
    products = {
        "projection and its weight gradient": [lambda: X2 @ W, lambda: X2.t() @ gP],
        "values and their weight gradient": [lambda: torch.matmul(X2, Wv),
                                             lambda: torch.matmul(X2.t(), V)],
        "mixing and its two gradients": [lambda: torch.bmm(A, Vb),
                                         lambda: torch.bmm(G, Vb.transpose(1, 2)),
                                         lambda: torch.bmm(A.transpose(1, 2), G)],
        "scores and their two gradients": [],
    }
    for r in ranks:
        q, k, gs = randn(B, L, r), randn(B, L, r), randn(B, L, L)
        products["scores and their two gradients"] += [
            lambda q=q, k=k: torch.bmm(q, k.transpose(1, 2)),
            lambda q=q, k=k, gs=gs: torch.bmm(gs, k),
            lambda q=q, k=k, gs=gs: torch.bmm(gs.transpose(1, 2), q)]
    scores4, y = randn(R, B, L, L), randn(B, L, e)
    weights = torch.softmax(scores4, -1)
    out = randn(R, B, L, e)
    residual = out - y
    scale = randn(R, 1, 1)
    student = make_student("softmax", d=d, d_out=e, ranks=ranks, seq_len=L).to(device)
    for parameter in student.parameters():
        parameter.grad = torch.randn_like(parameter)
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
    elementwise = {
        "softmax forward and backward": [
            lambda: row_softmax(scores4),
            lambda: torch._softmax_backward_data(scores4, weights, -1, weights.dtype)],
        "loss residual and gradient": [lambda: out - y,
                                       lambda: residual.view(R, B, -1) * scale],
        "Adam update": [optimizer.step],
    }
    work = sum(sweep_step_flops(B, L, d, e, ranks).values())
    peak = matmul_peak(torch.float32, device, peaks["n"], repeats=4)
    print(f"\n== kernel bound: {label}: the step's operations timed alone "
          f"(fastest of 7, hot caches; load {load()}; fp32 peak now {peak:.1f} GFLOP/s)")
    totals = {}
    for kind, groups in (("products", products), ("elementwise", elementwise)):
        totals[kind] = 0.0
        for name, functions in groups.items():
            seconds = sum(best_time(f, device) for f in functions)
            totals[kind] += seconds
            print(f"  {name:<38} {seconds * 1e3:8.2f} ms")
    products_bound = work / totals["products"] / 1e9 / peak
    kernel_bound_ = work / (totals["products"] + totals["elementwise"]) / 1e9 / peak
    print(f"  products alone: {totals['products'] * 1e3:.2f} ms for {work / 1e9:.3f} GFLOP of "
          f"useful work = {products_bound:.2f} of the fp32 peak")
    print(f"  with the elementwise passes: {(totals['products'] + totals['elementwise']) * 1e3:.2f}"
          f" ms = {kernel_bound_:.2f} of the fp32 peak (the bound on the step)")
    return dict(products=products_bound, kernels=kernel_bound_)


def time_epoch(args, peaks, n=4096, L=32, d=64, ranks=COARSE_64):
    """Seconds per epoch of the estimator's fit (difference of a 3- and a 1-epoch fit)."""
    import warnings

    from intrinsic_rank import AttentionRankEstimator

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_scale import float32_teacher

    X, Y = float32_teacher(n, L, d, 4, 0)
    peaks = remeasured(peaks, args)
    seconds = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # untimed: the first fit of a process pays one-off lazy imports
        AttentionRankEstimator(attention="softmax", rank_grid=[1], max_epochs=1,
                               device=args.device).fit(X[:64], Y[:64])
        for epochs in (1, 3):
            est = AttentionRankEstimator(attention="softmax", rank_grid=list(ranks),
                                         max_epochs=epochs, random_state=0,
                                         device=args.device)
            start = time.perf_counter()
            est.fit(X, Y)
            seconds[epochs] = time.perf_counter() - start
    per_epoch = (seconds[3] - seconds[1]) / 2
    n_train = n - int(round(est.validation_fraction * n))
    B = est._batch_size(n_train)
    full, last = divmod(n_train, B)
    work = full * sum(sweep_step_flops(B, L, d, d, ranks).values())
    if last:
        work += sum(sweep_step_flops(last, L, d, d, ranks).values())
    rate = work / per_epoch / 1e9
    print(f"\n== sweep epoch: estimator fit, softmax, n={n} ({n_train} trained, batch {B}) "
          f"L={L} d={d} ranks {ranks} (load {load()})")
    print(f"  fits of 1 and 3 epochs: {seconds[1]:.2f} s, {seconds[3]:.2f} s; "
          f"{per_epoch:.2f} s per epoch, {work / 1e9:.1f} GFLOP per epoch, {rate:.2f} GFLOP/s, "
          f"{rate / peaks['fp32']:.2f} of the fp32 peak")
    return dict(seconds=per_epoch, gflops=rate, fraction=rate / peaks["fp32"])


# -- bfloat16 training on teachers: same r*? -------------------------------------------
PRECISION_TASKS = [  # kind, n, L, d, r*, rank grid, epochs
    ("softmax", 2048, 8, 16, 4, list(range(1, 9)), 150),
    ("linear", 2048, 8, 16, 4, list(range(1, 9)), 150),
    ("softmax", 1024, 32, 64, 8, COARSE_64, 60),
]


def precision_study(args, seeds=(0, 1)):
    """``rank_`` and held-out risks of float32 and bfloat16 training, fit for fit."""
    import warnings

    import numpy as np

    from intrinsic_rank import AttentionRankEstimator
    from intrinsic_rank.datasets import make_attention_task

    print(f"\n== bfloat16 training against float32 on teachers (load {load()})")
    same, ratios = [], []
    for kind, n, L, d, r_star, grid, epochs in PRECISION_TASKS:
        for seed in seeds:
            X, Y = make_attention_task(kind, n_samples=n, seq_len=L, d=d, rank=r_star,
                                       noise=0.1, random_state=seed)
            params = dict(attention=kind, rank_grid=grid, max_epochs=epochs,
                          random_state=seed, device=args.device)
            fits = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for name in ("float32", "bfloat16"):
                    start = time.perf_counter()
                    est = AttentionRankEstimator(**params, compute_dtype=name).fit(X, Y)
                    fits[name] = (time.perf_counter() - start, est)
            (t32, e32), (t16, e16) = fits["float32"], fits["bfloat16"]
            r32 = np.array([rec["heldout_risk"] for rec in e32.sweep_])
            r16 = np.array([rec["heldout_risk"] for rec in e16.sweep_])
            same.append(e32.rank_ == e16.rank_)
            ratios.append(t32 / t16)
            print(f"  {kind} n={n} L={L} d={d} r*={r_star} seed={seed}: rank_ "
                  f"{e32.rank_} (fp32) {e16.rank_} (bf16); largest relative risk change "
                  f"{np.max(np.abs(r16 - r32) / r32):.1e}; time {t32:.1f} s / {t16:.1f} s "
                  f"= {t32 / t16:.2f}x")
    print(f"bf16_same_rank_all: {all(same)}")
    print(f"bf16_fit_speedup_median: {statistics.median(ratios):.2f}")


# -- SmolLM2 ----------------------------------------------------------------------------
def smollm2_unavailable():
    """None when SmolLM2-135M-Instruct can be loaded, else the reason it cannot."""
    if importlib.util.find_spec("transformers") is None:
        return "transformers is not installed"
    try:
        from intrinsic_rank.nn import packaged_model_path

        packaged_model_path("smollm2-135m")
    except (ImportError, ValueError, OSError) as error:
        return str(error)
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    return f"pip install {' '.join(missing)}" if missing else None


def time_cramming(args, adapter, peaks, n_targets=8, T=64, steps=3):
    model = adapter.model
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, adapter.vocab_size, (n_targets, T), generator=generator)
    ids = ids.to(args.device)
    with torch.no_grad():
        scale = adapter.embedding_matrix().std()
    prefix = torch.nn.Parameter(torch.randn(n_targets, 1, adapter.width, device=args.device)
                                * scale)
    optimizer = torch.optim.Adam([prefix], lr=1e-2)
    work = lm_step_flops(model, n_targets, T + 1)
    total = sum(work.values())
    device_type = torch.device(args.device).type

    def step(bf16):
        optimizer.zero_grad()
        embeds = torch.cat([prefix, adapter.embed(ids)], dim=1)
        if bf16:
            with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
                logits = adapter.logits(embeds)
        else:
            logits = adapter.logits(embeds)
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].float().transpose(1, 2), ids)
        loss.backward()
        optimizer.step()

    modes = [False] + ([True] if "bf16" in peaks else [])
    times = {mode: [] for mode in modes}
    for mode in modes:
        step(mode)  # warm-up
    for _ in range(steps):
        for mode in modes:
            synchronize(args.device)
            start = time.perf_counter()
            step(mode)
            synchronize(args.device)
            times[mode].append(time.perf_counter() - start)
    print(f"\n== cramming step on SmolLM2-135M-Instruct: {n_targets} targets of {T} tokens "
          f"after one prefix vector (load {load()})")
    print("  useful work per step: " + ", ".join(
        f"{k} {v / total:.0%}" for k, v in work.items()) + f"; {total / 1e9:.1f} GFLOP")
    result = {}
    for mode, values in times.items():
        seconds = statistics.median(values)
        rate = total / seconds / 1e9
        name = "bf16 autocast" if mode else "fp32"
        ref = peaks["bf16"] if mode else peaks["fp32"]
        result[name] = dict(seconds=seconds, gflops=rate, fraction=rate / ref)
        print(f"  {name:<14} {seconds:7.2f} s/step  {rate:7.2f} GFLOP/s  "
              f"{rate / ref:.2f} of the {'bf16' if mode else 'fp32'} peak")
    return result


def time_decoder_cells(args, adapter, peaks, check_points=4096):
    from intrinsic_rank.inspection import decoder_cell_proportions

    weight, _ = adapter.output_head()
    V, d = weight.shape
    n = int(args.cells_samples)
    check = min(check_points, n)
    # the region: the box of the final hidden states of a few random prompts
    ids = torch.randint(0, V, (4, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        states = adapter.final_hidden(adapter.embed(ids.to(args.device)))
    states = states.reshape(-1, d).float().cpu().numpy()
    start = time.perf_counter()
    decoder_cell_proportions(adapter, states, n_samples=n, check_points=check,
                             device=args.device)
    synchronize(args.device)
    seconds = time.perf_counter() - start
    reduced = 2 * 2 * n * V * d
    exact = 2 * 2 * check * V * d
    rate = (reduced + exact) / seconds / 1e9
    ref = peaks.get("bf16", peaks["fp32"])
    print(f"\n== decoder cells on SmolLM2-135M-Instruct: {n} points, head {V} x {d}, "
          f"{check} exact check points (load {load()})")
    print(f"  {seconds:.2f} s, {(reduced + exact) / 1e9:.1f} GFLOP "
          f"({reduced / 1e9:.1f} reduced, {exact / 1e9:.1f} exact), {rate:.2f} GFLOP/s, "
          f"{rate / ref:.2f} of the {'bf16' if 'bf16' in peaks else 'fp32'} peak")
    return dict(seconds=seconds, gflops=rate, fraction=rate / ref)


# -- main ---------------------------------------------------------------------------------
def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"bench_roofline: threads={torch.get_num_threads()} device={args.device}"
          f" steps={args.steps}" + (" (quick)" if args.quick else ""))
    print(f"load average before start: {load()}")
    n = 512 if args.quick else 2048
    peaks = {"fp32": matmul_peak(torch.float32, args.device, n), "n": n}
    if has_bf16(args.device):
        peaks["bf16"] = matmul_peak(torch.bfloat16, args.device, n)
    print("matmul peak (%d x %d, same threads): " % (n, n)
          + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in peaks.items() if k != "n")
          + ("" if "bf16" in peaks else " (no bf16 matmul units found)"))

    rounds = 1 if args.quick else 3
    if args.quick:
        sizes = [("tiny", 32, 8, 16, [1, 2, 4, 8])]
    else:
        sizes = [("bench_sweep's default size", 256, 8, 16, list(range(1, 9))),
                 ("the docs' scaling size, coarse grid", 256, 32, 64, COARSE_64)]
        if args.full_grid:
            sizes.append(("full grid", 256, 32, 64, list(range(1, 65))))
    if args.skip_sweep:
        sizes = []
    steps = {label: time_sweep_step(args, label, B, L, d, ranks, peaks, rounds)
             for label, B, L, d, ranks in sizes}
    bounds = {label: kernel_bound(args, label, B, L, d, ranks, peaks)
              for label, B, L, d, ranks in sizes}
    epoch = None if args.quick or args.skip_sweep else time_epoch(args, peaks)

    if args.precision_study:
        precision_study(args)

    lm = {}
    if args.skip_lm:
        print("\nSmolLM2 workloads skipped (--skip-lm or --quick)")
    else:
        reason = smollm2_unavailable()
        if reason:
            print(f"\nSmolLM2 workloads skipped: SmolLM2-135M-Instruct is not available ({reason})")
        else:
            from intrinsic_rank.nn import as_causal_lm

            start = time.perf_counter()
            adapter = as_causal_lm("smollm2-135m", progress=False).to(args.device)
            print(f"\nSmolLM2-135M-Instruct loaded in {time.perf_counter() - start:.1f} s")
            lm["cramming"] = time_cramming(args, adapter, remeasured(peaks, args))
            lm["cells"] = time_decoder_cells(args, adapter, remeasured(peaks, args))

    print()
    for label, result in steps.items():
        key = "d64" if "coarse" in label else ("full64" if "full" in label else
                                               ("d16" if "default" in label else "tiny"))
        after = result["rank-major"]
        print(f"sweep_step_gflops_{key}: {after['gflops']:.2f}")
        print(f"sweep_step_speedup_vs_padded_{key}: "
              f"{result['padded (before)']['seconds'] / after['seconds']:.2f}")
        target = f" (target >= {HALF_ROOFLINE:g})" if key == "d64" else ""
        print(f"sweep_step_fraction_of_fp32_peak_{key}: {after['fraction']:.3f}{target}")
        print(f"sweep_step_products_bound_{key}: {bounds[label]['products']:.3f}")
        print(f"sweep_step_kernel_bound_{key}: {bounds[label]['kernels']:.3f}")
        bf16 = result.get("rank-major, bf16 autocast")
        if bf16:
            print(f"sweep_step_bf16_speedup_{key}: {after['seconds'] / bf16['seconds']:.2f}")
    if epoch:
        print(f"sweep_epoch_fraction_of_fp32_peak_d64: {epoch['fraction']:.3f}")
    for mode, value in lm.get("cramming", {}).items():
        print(f"cramming_step_fraction_of_peak_{mode.split()[0]}: {value['fraction']:.3f}")
    if "cells" in lm:
        print(f"decoder_cells_fraction_of_peak: {lm['cells']['fraction']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
