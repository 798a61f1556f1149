"""
Grid search, cross-validation and pipelines
===========================================

``AttentionRankEstimator`` is a scikit-learn regressor: search over ``rank`` with
``GridSearchCV``, cross-validate it, and put it after a preprocessing step.
"""

import numpy as np
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from intrinsic_rank import AttentionRankEstimator
from intrinsic_rank.datasets import make_attention_task

X, Y = make_attention_task("linear", n_samples=1200, seq_len=6, d=8, rank=2, random_state=0)
search = GridSearchCV(
    AttentionRankEstimator(attention="linear", max_epochs=100, random_state=0),
    {"rank": [1, 2, 3, 4]}, cv=3, n_jobs=2,
).fit(X, Y)
for rank, score in zip(search.cv_results_["param_rank"], search.cv_results_["mean_test_score"]):
    print(f"rank {rank}: mean R^2 {score:.3f}")

scores = cross_val_score(
    AttentionRankEstimator(attention="linear", rank=2, max_epochs=100, random_state=0), X, Y, cv=3
)
print("cross-validated R^2 at rank 2:", np.round(scores, 3))

# 2-D input: each row is a sequence of scalar tokens, y a target of the sequence
# (read at the final position).
rng = np.random.RandomState(0)
X2 = rng.normal(3.0, 2.0, size=(800, 6))
y2 = X2.mean(axis=1) - 3.0
pipe = make_pipeline(StandardScaler(), AttentionRankEstimator(attention="softmax", random_state=0))
print("pipeline R^2:", round(pipe.fit(X2, y2).score(X2, y2), 3))
