"""Real data for online PCA, shipped inside scikit-learn (no download): the
8x8 handwritten digits as a stream of 64-dimensional vectors, in file order and
sorted by digit (a drifting stream), against the offline answer, the best
rank-k projection of all rows."""
from __future__ import annotations

import numpy as np

from ..pca import FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA, \
    regret_bound
from . import _plot
from ._runner import Task
from ._stats import mean_ci
from ._types import BEYOND, Check, Experiment, Outcome

ALGORITHMS = ("FTL", "FPL", "MEG", "GD")


def load_digits_stream(order="file"):
    """Digits rows scaled by the largest row norm (so ||x|| <= 1, relative norms
    kept), in file order or stably sorted by label."""
    from sklearn.datasets import load_digits

    ds = load_digits()
    X = ds.data.astype(float)
    X /= np.linalg.norm(X, axis=1).max()
    if order == "by label":
        X = X[np.argsort(ds.target, kind="stable")]
    return X


def run_digits(order, k, algorithm, n_points, rows, seed):
    X = load_digits_stream(order)[:rows]
    T, n = X.shape
    est = {"FTL": lambda: FollowTheLeaderPCA(k),
           "FPL": lambda: PerturbedLeaderPCA(k, random_state=seed),
           "MEG": lambda: MatrixEGPCA(k, random_state=seed),
           "GD": lambda: MatrixGDPCA(k, random_state=seed)}[algorithm]()
    pts = np.unique(np.geomspace(20, T, n_points).astype(int))
    reg, prev = [], 0
    for t in pts:
        est.partial_fit(X[prev:t])
        prev = t
        reg.append(float(est.regret_))
    if algorithm == "FPL":
        bound = regret_bound(T, n, k, est.sigma_)
    elif algorithm == "FTL":
        bound = np.nan
    else:
        bound = float(est.regret_bound())
    # the final subspace against the offline one: captured energy over lambda_1:k
    V = est.components_
    C = X.T @ X
    captured = float(np.trace(V @ C @ V.T) / np.linalg.eigvalsh(C)[-k:].sum())
    return {"t": pts.tolist(), "regret": reg, "bound": float(bound),
            "best": float(est.best_gain_), "captured": captured}


def _runs(p):
    return [(o, a, seed) for o in p["orders"] for a in ALGORITHMS
            for seed in (range(p["reps"]) if a == "FPL" else (0,))]


def _tasks(p):
    return [Task(run_digits, dict(order=o, k=p["k"], algorithm=a, n_points=p["n_points"],
                                  rows=p["rows"]), s)
            for o, a, s in _runs(p)]


def _analyse(p, results):
    grouped = {}
    for (o, a, _), r in zip(_runs(p), results):
        grouped.setdefault((o, a), []).append(r)
    fig, axes = _plot.new_figure(len(p["orders"]), width=4.8)
    table = {k: [] for k in ("order", "algorithm", "regret", "95% CI +-", "regret / offline gain",
                             "bound", "final subspace: captured / offline")}
    checks = []
    for ax, o in zip(axes, p["orders"]):
        shown = []
        for j, a in enumerate(ALGORITHMS):
            rs = grouped[(o, a)]
            t = rs[0]["t"]
            reg = np.mean([r["regret"] for r in rs], axis=0)
            m, h = mean_ci([r["regret"][-1] for r in rs])
            cap = float(np.mean([r["captured"] for r in rs]))
            bound = rs[0]["bound"]
            shown.extend(reg)
            ax.plot(t, reg, "o-", ms=3, color=f"C{j}",
                    label=f"{a}: regret {reg[-1]:.1f} ({100 * reg[-1] / rs[0]['best']:.2f}% of "
                          "the offline gain)")
            for key, v in zip(table, (o, a, m, h, m / rs[0]["best"], bound, cap)):
                table[key].append(v)
            if np.isfinite(bound):
                checks.append(Check(f"digits, {o}: {a} regret {m:.1f} below its bound "
                                    f"{bound:.0f}", m < bound))
        _plot.finish(ax, xlabel="t (digits seen)", ylabel="regret", fontsize=6.5, logy=False,
                     title=f"sklearn digits (n = 64, k = {p['k']}), {o} order")
        _plot.signed_log_y(ax, shown)
    rows = "all 1,797" if p["rows"] is None else f"the first {p['rows']} of 1,797"
    setting = (f"sklearn.datasets.load_digits: {rows} rows of 64 pixels, scaled by the largest "
               f"row norm (||x|| <= 1), streamed once in file order and sorted by digit; "
               f"k = {p['k']}. FPL: sigma 'auto', mean over {p['reps']} seeds; MEG, GD: eta "
               "'auto', expected regret; FTL. The offline answer is the best rank-k projection "
               "of all rows (uncentred PCA, the paper's comparator): regret is measured against "
               "it, and the final subspace's captured energy is compared with it (FPL's plays "
               "the perturbed leader, so it need not equal the offline subspace: its noise "
               "sqrt(T) sigma N is of the order of the k-th eigenvalue here).")
    return Outcome(setting=setting, tables=[("Regret at the end of the stream", table)],
                   figures={"pca_digits": fig}, checks=checks)


EXPERIMENT = Experiment(
    name="pca-digits", paper="000", kind=BEYOND,
    title="Real data: scikit-learn digits as a PCA stream",
    claim=("The paper has no data experiment. Its guarantee is worst-case: on any stream with "
           "||x|| <= 1, FPL's regret against the best rank-k projection in hindsight stays "
           "below its bound."),
    presets={"quick": dict(orders=("file", "by label"), k=5, reps=3, n_points=25, rows=None),
             "tiny": dict(orders=("file", "by label"), k=2, reps=2, n_points=6, rows=300),
             "full": dict(orders=("file", "by label"), k=5, reps=50, n_points=40, rows=None)},
    tasks=_tasks, analyse=_analyse)
