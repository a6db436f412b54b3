"""
Regret of the four online PCA algorithms
========================================

Follow the Leader (FTL), Follow the Perturbed Leader (FPL), Matrix
Exponentiated Gradient (MEG) and matrix gradient descent (GD) play the same
stream: :func:`~streamfit.simulate.make_ftl_adversary`, built so that FTL's
leader always points the wrong way. FTL's regret grows linearly in T; the
three others grow like sqrt(T), FPL at O(k n^2) a trial against the O(n^3) of
MEG's and GD's eigendecompositions.
"""
import matplotlib.pyplot as plt
import numpy as np

from streamfit import (FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA,
                       PerturbedLeaderPCA)
from streamfit.simulate import make_ftl_adversary

T, n, k = 8_000, 10, 2
X = make_ftl_adversary(T, n, n_components=k)
algorithms = {
    "FTL": FollowTheLeaderPCA(k),
    "FPL": PerturbedLeaderPCA(k, random_state=0),
    "MEG": MatrixEGPCA(k, random_state=0),
    "GD": MatrixGDPCA(k, random_state=0),
}
checkpoints = np.unique(np.geomspace(100, T, 15).astype(int))
curves = {name: [] for name in algorithms}
for name, est in algorithms.items():
    done = 0
    for t in checkpoints:              # feed the stream up to each checkpoint
        est.partial_fit(X[done:t])
        done = t
        curves[name].append(est.regret_)

# %%
# On log-log axes a slope of 1 is linear regret, 1/2 is sqrt(T).
fig, ax = plt.subplots(figsize=(6, 4))
for name, regret in curves.items():
    tail = np.log(np.maximum(regret[-6:], 1e-9))
    slope = np.polyfit(np.log(checkpoints[-6:]), tail, 1)[0]
    ax.loglog(checkpoints, regret, marker="o", ms=3,
              label=f"{name} (slope {slope:.2f})")
ax.loglog(checkpoints, np.sqrt(checkpoints), "k:", lw=0.8, label="sqrt(T)")
ax.set(xlabel="trials T", ylabel="regret",
       title=f"FTL's adversary, n = {n}, k = {k}")
ax.legend()
fig.tight_layout()
plt.show()

for name, est in algorithms.items():
    print(f"{name}: regret {est.regret_:8.1f} after {est.n_trials_} trials")
