"""
Nine quantiles in one pass, and intervals that narrow
=====================================================

One :class:`~streamfit.OnlineQuantileRegressor` with ``tau=[0.1, ..., 0.9]``
reads a heteroscedastic stream once, y = 1 + 2x + (0.2 + x) xi with standard
normal xi, and predicts nine quantile lines, sorted at every x so that they
never cross. A second regressor, the median with ``average=True,
inference=True``, gives 95% confidence intervals from the same single pass
(random scaling: no density estimate), read here along the stream.
"""
import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from streamfit import OnlineQuantileRegressor

rng = np.random.default_rng(0)
n = 20_000
x = rng.uniform(0, 1, n)
y = 1 + 2 * x + (0.2 + x) * rng.standard_normal(n)
X = x[:, None]

taus = np.round(np.arange(0.1, 0.91, 0.1), 2)
fan = OnlineQuantileRegressor(tau=list(taus))
median = OnlineQuantileRegressor(tau=0.5, average=True, inference=True)
checkpoints, slopes = [], []
for start in range(0, n, 1_000):                     # the stream, in blocks
    block = slice(start, start + 1_000)
    fan.partial_fit(X[block], y[block])
    median.partial_fit(X[block], y[block])
    checkpoints.append(start + 1_000)
    slopes.append(median.conf_int(alpha=0.05)[0])    # the slope's interval

# %%
# Left, the fan: each line against the true conditional quantile (dashed).
# Right, the median's slope and its 95% interval along the stream.
grid = np.linspace(0, 1, 101)[:, None]
lines = fan.predict(grid)                            # (101, 9), sorted per row
assert (np.diff(lines, axis=1) >= 0).all()

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.scatter(x[:2_000], y[:2_000], s=2, color="0.75")
for j, tau in enumerate(taus):
    label = f"tau = {tau:.1f}" if j in (0, 4, 8) else None
    left.plot(grid[:, 0], lines[:, j], lw=1.5, label=label)
    truth = 1 + 2 * grid[:, 0] + (0.2 + grid[:, 0]) * stats.norm.ppf(tau)
    left.plot(grid[:, 0], truth, "k--", lw=0.7)
left.set(xlabel="x", ylabel="y", title="predict: nine quantiles, one pass")
left.legend(loc="upper left")

slopes = np.array(slopes)
right.fill_between(checkpoints, slopes[:, 0], slopes[:, 1], alpha=0.3,
                   label="95% interval")
right.axhline(2.0, color="k", ls="--", lw=0.8, label="true slope")
right.plot(checkpoints, slopes.mean(axis=1), lw=1)
right.set(xscale="log", xlabel="rows read", ylabel="slope",
          title="conf_int along the stream")
right.legend()
fig.tight_layout()
plt.show()

print("slope, 95% interval at the end:", median.coef_[0].round(3),
      slopes[-1].round(3))
