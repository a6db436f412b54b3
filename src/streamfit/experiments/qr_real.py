"""Real data for online quantile regression, shipped inside statsmodels (no
download): Engel's food expenditure data (Koenker's classic QR example) and
the RAND Health Insurance Experiment, streamed in file order, against the
offline answer. The paper's own real-data example (Table 1, news popularity)
is not shippable."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor, offline_quantile_regression
from . import _plot
from ._qr_common import check_loss
from ._runner import Task
from ._types import BEYOND, Check, Experiment, Outcome


def _standardize(X, n_warm):
    # streaming-legal scaling: the first n_warm rows' mean and sd only
    mu, sd = X[:n_warm].mean(axis=0), X[:n_warm].std(axis=0)
    return (X - mu) / np.where(sd > 0, sd, 1.0)


def load_engel():
    from statsmodels.datasets import engel

    df = engel.load_pandas().data
    return df[["income"]].to_numpy(float), df["foodexp"].to_numpy(float)


def load_randhie(jitter_seed=0):
    """RAND HIE: outpatient visits (mdvis) on 9 covariates, 20,190 rows. Visits
    are counts: jittered by U[0, 1) (Machado & Santos Silva 2005) so the
    conditional quantiles are continuous; the seed is fixed."""
    from statsmodels.datasets import randhie

    ds = randhie.load_pandas()
    y = ds.endog.to_numpy(float)
    y = y + np.random.default_rng(jitter_seed).uniform(0, 1, y.size)
    return ds.exog.to_numpy(float), y


def _fit(X, y, tau, passes=1, **kw):
    est = OnlineQuantileRegressor(tau, **kw)
    for _ in range(passes):
        est.partial_fit(X, y)
    return est


def run_engel(tau, passes, n_warm, seed=None):
    """Engel: online fits (plain and averaged, 1 and ``passes`` passes in file
    order) against the offline LP; in-sample mean check loss of each."""
    X, y = load_engel()
    Z = _standardize(X, n_warm)
    coef, b = offline_quantile_regression(Z, y, tau, fit_intercept=True)
    out = {"offline": float(check_loss(y - Z @ coef - b, tau).mean()), "offline_slope": coef[0]}
    for avg in (False, True):
        for k in (1, passes):
            est = _fit(Z, y, tau, passes=k, average=avg)
            r = y - est.predict(Z)
            name = f"{k} pass{'es' if k > 1 else ''}{' averaged' if avg else ''}"
            out[name] = float(check_loss(r, tau).mean())
            out[name + " slope"] = float(est.coef_[0])
    return out


def run_randhie(tau, n_train, n_warm, batch_size, seed=None):
    """RAND HIE: train on the first ``n_train`` rows in file order, test on the
    rest; test mean check loss (and MAE) of the online learners, offline QR
    and least squares."""
    X, y = load_randhie()
    Z = _standardize(X, n_warm)
    tr, te = slice(0, n_train), slice(n_train, None)
    out = {}
    preds = {}
    for name, kw in (("online", {}), ("online averaged", dict(average=True)),
                     ("online batch", dict(mode="batch", batch_size=batch_size)),
                     ("online batch averaged", dict(mode="batch", batch_size=batch_size,
                                                    average=True))):
        preds[name] = _fit(Z[tr], y[tr], tau, **kw).predict(Z[te])
    coef, b = offline_quantile_regression(Z[tr], y[tr], tau, fit_intercept=True)
    preds["offline QR"] = Z[te] @ coef + b
    A = np.hstack([Z[tr], np.ones((n_train, 1))])
    w = np.linalg.lstsq(A, y[tr], rcond=None)[0]
    preds["OLS"] = Z[te] @ w[:-1] + w[-1]
    for name, pr in preds.items():
        out[name] = (float(check_loss(y[te] - pr, tau).mean()), float(np.abs(y[te] - pr).mean()))
    return out


def _tasks(p):
    return ([Task(run_engel, dict(tau=t, passes=p["engel_passes"], n_warm=p["n_warm_engel"]))
             for t in p["taus_engel"]]
            + [Task(run_randhie, dict(tau=t, n_train=p["n_train"], n_warm=p["n_warm_hie"],
                                      batch_size=p["batch_size"])) for t in p["taus_hie"]])


def _analyse(p, results):
    ne = len(p["taus_engel"])
    engel, hie = results[:ne], results[ne:]
    P = p["engel_passes"]
    keys = ["1 pass", f"{P} passes", "1 pass averaged", f"{P} passes averaged"]
    t_engel = {"tau": list(p["taus_engel"])}
    for k in keys:
        t_engel[f"{k}: loss / offline"] = [r[k] / r["offline"] for r in engel]
    t_engel["offline slope"] = [r["offline_slope"] for r in engel]
    t_engel[f"{P} passes averaged slope"] = [r[f"{P} passes averaged slope"] for r in engel]
    methods = list(hie[0])
    t_hie = {"tau": list(p["taus_hie"])}
    for m in methods:
        t_hie[f"{m}: test check loss"] = [r[m][0] for r in hie]
    for m in methods:
        if m != "offline QR":
            t_hie[f"{m} / offline"] = [r[m][0] / r["offline QR"][0] for r in hie]
    fig, (ax, ax2) = _plot.new_figure(2, width=5.2)
    x = np.arange(ne)
    for j, k in enumerate(keys):
        ax.bar(x + (j - 1.5) * 0.2, [r[k] / r["offline"] - 1 for r in engel], 0.2, label=k)
    ax.set_xticks(x)
    ax.set_xticklabels([f"tau={t}" for t in p["taus_engel"]])
    _plot.finish(ax, xlabel="quantile", ylabel="in-sample check loss / offline - 1",
                 title="Engel (n = 235, statsmodels): online vs offline, file order",
                 logx=False, legend=False)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 40)          # room for the legend above the bars (log axis)
    ax.legend(fontsize=7, ncol=2, loc="upper center")
    xs = np.arange(len(hie))
    for j, m in enumerate(methods):
        ax2.bar(xs + (j - (len(methods) - 1) / 2) * 0.13, [r[m][0] for r in hie], 0.13, label=m)
    ax2.set_xticks(xs)
    ax2.set_xticklabels([f"tau={t}" for t in p["taus_hie"]])
    _plot.finish(ax2, xlabel="quantile", ylabel="test mean check loss",
                 title=f"RAND HIE (n = 20,190): train {p['n_train']:,} rows in file order, "
                       "test the rest", logx=False, logy=False, legend=False)
    ax2.set_ylim(0, ax2.get_ylim()[1] * 1.3)
    ax2.legend(fontsize=6.5, ncol=3, loc="upper center")
    worst = max(r["online averaged"][0] / r["offline QR"][0] for r in hie)
    worst_plain = max(r["online"][0] / r["offline QR"][0] for r in hie)
    i5 = list(p["taus_hie"]).index(0.5) if 0.5 in p["taus_hie"] else None
    # 5%: the gap the paper itself reports in Table 1 (online 8.58 vs offline 8.19)
    checks = [Check(f"RAND HIE: online QR's test check loss within 5% of offline QR's "
                    f"(worst plain {worst_plain:.3f}x, averaged {worst:.3f}x)",
                    worst_plain <= 1.05)]
    if i5 is not None:
        r = hie[i5]
        qr = max(r[m][1] for m in ("online", "online batch", "offline QR"))
        checks.append(Check(f"RAND HIE, tau = 0.5: every QR beats OLS in test MAE (worst QR "
                            f"{qr:.3f} < OLS {r['OLS'][1]:.3f})", qr < r["OLS"][1]))
    e_worst = max(r[f"{P} passes averaged"] / r["offline"] for r in engel)
    checks.append(Check(f"Engel: {P} averaged passes reach the offline check loss within 5% "
                        f"(worst {e_worst:.4f}x)", e_worst <= 1.05))
    setting = ("Engel food expenditure on income (statsmodels.datasets.engel, 235 households, "
               "Koenker's QR example) and RAND HIE outpatient visits on 9 covariates "
               "(statsmodels.datasets.randhie, 20,190 rows; counts jittered by U[0,1) with a "
               "fixed seed so quantiles are continuous). Both are streamed in file order, "
               "features standardised with the mean and sd of the first "
               f"{p['n_warm_engel']} (Engel) / {p['n_warm_hie']} (HIE) rows -- what a stream "
               "knows -- and an intercept. Online = the library's default schedule, one pass "
               f"(Engel also {P} passes over the same order); batch = {p['batch_size']} rows. "
               "Offline = the exact LP on the same standardised data; OLS by least squares. "
               "The paper's Table 1 (news popularity, n = 29,928, d = 7) reports test mean "
               "absolute error: online 8.58, batch 8.51, offline 8.19, OLS 9.88 -- offline "
               "best, although its text says online and batch are 'slightly lower'.")
    return Outcome(setting=setting,
                   tables=[("Engel: in-sample mean check loss over offline's", t_engel),
                           ("RAND HIE: test mean check loss (and ratios to offline QR)",
                            t_hie)],
                   figures={"qr_real_data": fig}, checks=checks)


EXPERIMENT = Experiment(
    name="qr-real", paper="001", kind=BEYOND,
    title="Real data: Engel and RAND HIE (statsmodels)",
    claim=("Section 3.2, Table 1 (news popularity data, not shippable): online and batch QR "
           "predict about as well as offline QR (test error within ~5%), and all QR methods "
           "clearly beat OLS."),
    presets={"quick": dict(taus_engel=(0.1, 0.25, 0.5, 0.75, 0.9), engel_passes=20,
                           n_warm_engel=50, taus_hie=(0.5, 0.75, 0.9), n_train=15_000,
                           n_warm_hie=500, batch_size=100),
             "tiny": dict(taus_engel=(0.5,), engel_passes=2, n_warm_engel=50, taus_hie=(0.5,),
                          n_train=2000, n_warm_hie=200, batch_size=50),
             "full": dict(taus_engel=(0.1, 0.25, 0.5, 0.75, 0.9), engel_passes=20,
                          n_warm_engel=50, taus_hie=(0.25, 0.5, 0.75, 0.9), n_train=15_000,
                          n_warm_hie=500, batch_size=100)},
    tasks=_tasks, analyse=_analyse)
