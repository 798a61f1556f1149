"""
Reachability: how long a target one prompt vector can force
===========================================================

Random targets of growing length are crammed into ``m`` prompt vectors of the
frozen embedded default model, with a shortened protocol (300 steps, patience
100) so that the script runs in a few seconds. The fraction reached falls from
1 to 0 over a few tokens, and the fall moves right as ``m`` grows.
``ReachabilityEstimator`` also reports the geometry bound on how fast it may move.
"""

# sphinx_gallery_thumbnail_number = 1

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from intrinsic_rank import ReachabilityEstimator
from intrinsic_rank.datasets import make_random_targets

# %%
# Cramming targets of each length
# -------------------------------
# For each number of prompt vectors ``m`` and each target length ``n``, eight random
# targets over a 64-token vocabulary; the estimator optimises ``m`` prompt vectors per
# target and reports the fraction it forces exactly (``accessibility_``). The slope
# bound ``C`` caps how many more tokens each extra vector can buy, from the geometry of
# the model's hidden states (their radius ``r``).

lengths = [2, 4, 6, 8, 10, 12]
curves = {}
for m in (1, 2):
    accessibility = []
    for n in lengths:
        X = make_random_targets(8, n, vocab_size=64, random_state=n)
        est = ReachabilityEstimator(n_memory=m, max_epochs=300, patience=100,
                                    n_radius_prompts=32, random_state=0).fit(X)
        accessibility.append(est.accessibility_)
    print(f"m = {m}: accessibility by length {dict(zip(lengths, accessibility))}; "
          f"slope bound C = {est.geometry_.slope_bound:.0f} tokens per vector "
          f"(r = {est.geometry_.radius:.2f})")
    curves[m] = accessibility

# %%
# Accessibility curves
# --------------------
# The fraction of targets reached against their length, one curve per ``m``: a second
# prompt vector moves the fall to longer targets.

fig, ax = plt.subplots(figsize=(5, 3.5))
for m, accessibility in curves.items():
    ax.plot(lengths, accessibility, "o-", label=f"m = {m}")
ax.set_xlabel("target length (tokens)")
ax.set_ylabel("fraction of targets reached")
ax.legend(frameon=False)
fig.tight_layout()
fig.savefig("reachability.png", dpi=120)
print("saved reachability.png")
