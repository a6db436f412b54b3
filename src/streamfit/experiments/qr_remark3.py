"""Figure 2 / Remark 3 of Shen, Xia & Zhou (2025): when beta_0 already lies
in the phase-two region, a small Ca wins in the short term and loses in the
long term, a large Ca the opposite."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from . import _plot
from ._qr_common import D_PAPER, T_PAPER, PaperSchedule, checkpoints, noise_facts, \
    paper_stream, run_path
from ._runner import Task
from ._stats import check_above, check_below
from ._types import Experiment, Outcome


def run_remark3(n, d, ratio, cas, Cb, n_points, seed):
    """One replication of one panel: beta_0 = 0 with ||beta*|| = ratio E|xi|,
    phase two from the first update (t1 = 0) with the oracle b0, one error
    path per Ca."""
    X, y, beta = paper_stream(n, d, snr=ratio, seed=seed)
    _, b0 = noise_facts(0.5)
    pts = checkpoints(n, n_points, start=1)
    out = {}
    for ca in cas:
        est = OnlineQuantileRegressor(0.5, fit_intercept=False,
                                      schedule=PaperSchedule(d=d, Ca=ca, Cb=Cb, b0=b0, t1=0))
        path = run_path(est, X, y, beta, pts)
        out[ca] = path["err"]
    out["t"] = path["t"]
    return out


def _tasks(p):
    return [Task(run_remark3, dict(n=p["n"], d=p["d"], ratio=r, cas=p["cas"], Cb=p["Cb"],
                                   n_points=p["n_points"]), seed)
            for r in p["ratios"] for seed in range(p["reps"])]


def _analyse(p, results):
    gamma, b0 = noise_facts(0.5)
    fig, axes = _plot.new_figure(len(p["ratios"]))
    checks, notes, headline = [], [], {}
    table = {k: [] for k in ("||b0 - b*|| / E|xi|", "Ca", "Remark 3 small-Ca threshold",
                             "err at t = 100", f"err at t = {p['t_short']}", "err at T")}
    for i, (ratio, ax) in enumerate(zip(p["ratios"], axes)):
        res = results[i * p["reps"]:(i + 1) * p["reps"]]
        t = np.asarray(res[0]["t"])
        # Remark 3: Ca < min{12, (Cl / sqrt(Cu)) ||beta_0 - beta*|| / b0}, Cl = Cu = 1
        threshold = min(12.0, ratio * gamma / b0)
        i_short = int(np.searchsorted(t, p["t_short"]))
        med = {ca: np.median([r[ca] for r in res], axis=0) for ca in p["cas"]}
        for j, ca in enumerate(p["cas"]):
            kind = "small" if ca < threshold else ("large" if ca > 12 else "between")
            _plot.path_band(ax, t, [r[ca] for r in res], f"Ca = {ca:g} ({kind})",
                            color=f"C{j}", slope="none")
            i100 = int(np.searchsorted(t, 100))
            for key, v in zip(table, (ratio, ca, threshold, med[ca][i100], med[ca][i_short],
                                      med[ca][-1])):
                table[key].append(v)
        small = [ca for ca in p["cas"] if ca < threshold]
        large = [ca for ca in p["cas"] if ca > 12]
        ax.axhline(1.0, color="grey", lw=0.8, ls=":", label="initial error (beta_0 = 0)")
        ax.axvline(t[i_short], color="grey", lw=0.6, ls="--")
        _plot.finish(ax, xlabel="t (samples)", ylabel="relative error ||b_t - b*|| / ||b*||",
                     title=f"Figure 2{'ab'[i]}: ||b_0 - b*|| = {ratio:g} E|xi|, phase two from "
                           f"t = 0 ({p['reps']} reps)")
        if not small or not large:
            notes.append(f"panel {ratio:g}: no Ca below the threshold {threshold:.3g} or above "
                         "12 in the grid")
            continue
        s, L = max(small), min(large)
        # per replication (the same stream for every Ca): log of the small
        # Ca's error over the large one's, at t_short and at T
        short = [np.log(r[s][i_short] / r[L][i_short]) for r in res]
        final = [np.log(r[s][-1] / r[L][-1]) for r in res]
        panel = f"Figure 2{'ab'[i]} (||b0 - b*|| = {ratio:g} E|xi|)"
        checks.append(check_below(
            short, np.log(0.98), f"{panel}: small Ca = {s:g} ahead of large Ca = {L:g} in the "
            f"short term, log(err small / err large) at t = {t[i_short]:,}", n_of="replications",
            requires="the whole 95% interval below log 0.98 (the small Ca's error at least 2% "
                     "below the large one's)"))
        checks.append(check_above(
            final, np.log(1.02), f"{panel}: ... and behind it in the long term, log(err small "
            f"/ err large) at T = {t[-1]:,}", n_of="replications",
            requires="the whole 95% interval above log 1.02 (the small Ca's error at least 2% "
                     "above the large one's)"))
        headline[f"panel_{'ab'[i]}_final_err"] = {f"Ca={ca:g}": float(med[ca][-1])
                                                   for ca in p["cas"]}
    setting = (f"d = {p['d']}, T = {p['n']:,}, t_1.1 noise, tau = 0.5, beta_0 = 0 with "
               f"||beta*|| = {' and '.join(f'{r:g}' for r in p['ratios'])} E|xi| (panels a, b: "
               "the captions' ||beta_0 - beta*|| / E|xi|). Phase two from the first update, "
               "eta_t = (b0 / Cl) Ca / (t + 1 + Cb d) with the oracle b0 = 1/f(0) and Cl = 1 "
               f"(Theorem 1's form), Cb = {p['Cb']:g}; Ca in {list(p['cas'])} (the text names no "
               "values: 'small' means below Remark 3's threshold min{12, ||beta_0 - beta*|| / "
               "b0}, 'large' above 12). Short term: the small Ca's error at least 2% below the "
               f"large one's at t = {p['t_short']}; long term: at least 2% above it at T; each "
               f"judged by the 95% interval of the log ratio over {p['reps']} replications "
               "(each replication runs every Ca on one stream); curves are medians.")
    for i, ratio in enumerate(p["ratios"]):
        fin = headline.get(f"panel_{'ab'[i]}_final_err")
        if fin:
            best = min(fin, key=fin.get)
            notes.append(f"Figure 2{'ab'[i]}: the median error at T is "
                         + ", ".join(f"{v:.3g} ({k})" for k, v in fin.items())
                         + f"; the best at T is {best}")
    return Outcome(setting=setting, tables=[("Median relative errors", table)],
                   figures={"fig2_remark3": fig}, checks=checks, notes="; ".join(notes) + ".",
                   summary=headline)


EXPERIMENT = Experiment(
    name="qr-fig2", paper="001",
    title="Figure 2 / Remark 3: small vs large Ca near beta*",
    claim=("beta_0 = 0 already in the phase-two region (||beta_0 - beta*|| = 0.2 E|xi| in 2a, "
           "0.02 E|xi| in 2b), phase two from t = 0, d = 100, t_1.1 noise (Remark 3: small "
           "means Ca < min{12, ||beta_0 - beta*|| / b0}). In the paper's words: 'in Figure 2a "
           "[...] a small Ca ensures short-term accuracy but compromises long-term optimality. "
           "On the other hand, a large Ca guarantees long-term optimality at the expense of "
           "short-term accuracy. Figure 2b presents even more pronounced differences.'"),
    presets={"quick": dict(n=T_PAPER, d=D_PAPER, ratios=(0.2, 0.02), cas=(0.02, 0.2, 2.0, 20.0),
                           Cb=30.0, reps=20, n_points=40, t_short=1000),
             "tiny": dict(n=3000, d=10, ratios=(0.2, 0.02), cas=(0.02, 20.0), Cb=30.0, reps=6,
                          n_points=10, t_short=300),
             "full": dict(n=T_PAPER, d=D_PAPER, ratios=(0.2, 0.02), cas=(0.02, 0.2, 2.0, 20.0),
                          Cb=30.0, reps=50, n_points=50, t_short=1000)},
    tasks=_tasks, analyse=_analyse)
