"""
Grid search, cross-validation and pipelines
===========================================

``AttentionRankEstimator`` is a scikit-learn regressor: search over ``rank`` with
``GridSearchCV``, cross-validate it, and put it after a preprocessing step.
"""

# sphinx_gallery_thumbnail_number = 1

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task

# %%
# A grid search over the rank
# ---------------------------
# A linear-attention teacher of rank 2; ``GridSearchCV`` fits one student per rank and
# fold (three folds, two jobs) and scores it by held-out R².

X, Y = make_attention_task("linear", n_samples=1200, seq_len=6, d=8, rank=2, random_state=0)
search = GridSearchCV(
    AttentionRankEstimator(attention="linear", max_epochs=100, random_state=0),
    {"rank": [1, 2, 3, 4]}, cv=3, n_jobs=2,
).fit(X, Y)
for rank, score in zip(search.cv_results_["param_rank"], search.cv_results_["mean_test_score"]):
    print(f"rank {rank}: mean R^2 {score:.3f}")

# %%
# The scores by rank
# ------------------
# The mean held-out R² over the folds, with the folds' standard deviation:
# rank 1 falls short, and from the teacher's rank 2 on the score is flat.

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.errorbar(np.asarray(search.cv_results_["param_rank"], dtype=int),
            search.cv_results_["mean_test_score"], yerr=search.cv_results_["std_test_score"],
            fmt="o-", capsize=3, label="mean over 3 folds (bars: one std)")
ax.axvline(2, color="grey", linestyle=":", label="teacher rank r* = 2")
ax.set_xticks([1, 2, 3, 4])
ax.set_xlabel("student rank")
ax.set_ylabel("held-out $R^2$")
ax.set_title("GridSearchCV over rank")
ax.legend(frameon=False, loc="center right")
fig.tight_layout()

# %%
# Cross-validation at one rank
# ----------------------------

scores = cross_val_score(
    AttentionRankEstimator(attention="linear", rank=2, max_epochs=100, random_state=0), X, Y, cv=3
)
print("cross-validated R^2 at rank 2:", np.round(scores, 3))

# %%
# A pipeline on 2-D input
# -----------------------
# Each row is a sequence of scalar tokens, ``y`` a target of the sequence (read at the
# final position); a ``StandardScaler`` goes first.

rng = np.random.RandomState(0)
X2 = rng.normal(3.0, 2.0, size=(800, 6))
y2 = X2.mean(axis=1) - 3.0
pipe = make_pipeline(StandardScaler(), AttentionRankEstimator(attention="softmax", random_state=0))
print("pipeline R^2:", round(pipe.fit(X2, y2).score(X2, y2), 3))
