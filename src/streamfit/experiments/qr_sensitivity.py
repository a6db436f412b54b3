"""Figure 8 of Shen, Xia & Zhou (2025): sensitivity to the decay c of phase
one and to Ca, Cb of phase two, on the paper's own values, with the paper's
oracle constants (Cl = Cu = 1, b0 = 1/f(0), D0 = ||beta*||)."""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from . import _plot
from ._qr_common import D_PAPER, T_PAPER, PaperSchedule, checkpoints, noise_facts, \
    paper_stream, run_path
from ._runner import Task
from ._stats import check_above, check_below, check_inside, last_decade_slope, median
from ._types import CORRECTION, Experiment, Outcome
from .qr_efficiency import rm_factor

# 8a's phase two, 15 / (t - t1 + 20 d)
REF_CA, REF_CB = 15.0, 20.0


def settings():
    """(panel, label, decay c, Ca, Cb, phase-two step has the b0 factor)."""
    out = [("a", f"c = {c:g}", c, 15.0, 20.0, True) for c in (0.5, 0.3, 0.2, 0.1, 0.05)]
    # 8b-8d: the decay is the common phase one's (the preset's common_decay)
    out += [("b", f"Ca = {a:g}, Cb = {b:g}", None, a, b, True)
            for a, b in ((1.0, 0.0), (5.0, 5.0), (15.0, 20.0), (20.0, 30.0), (50.0, 100.0))]
    out += [("b", "Ca = 1, Cb = 0, step 1/(t - t1 + 1) (no b0)", None, 1.0, 0.0, False)]
    out += [("c", f"Cb = {b:g}", None, 15.0, b, True) for b in (1.0, 5.0, 20.0, 100.0)]
    out += [("d", f"Ca = {a:g}", None, a, 100.0, True) for a in (1.0, 5.0, 15.0, 20.0, 50.0)]
    return out


def run_figure8(n, d, snr, panel, decay, Ca, Cb, with_b0, common_decay, n_points, seed):
    """One replication of one curve: the paper's schedule with oracle
    constants; 8a switches by continuity for its own c, 8b-8d share one phase
    one (decay ``common_decay``) and the switch time it gives the reference
    phase two (Ca = 15, Cb = 20)."""
    X, y, beta = paper_stream(n, d, snr=snr, seed=seed)
    _, b0 = noise_facts(0.5)
    eta0 = 2.0 * np.linalg.norm(beta) / d       # the library's eta0 rule with the true D0
    if panel != "a":
        decay = common_decay
    ref = PaperSchedule(eta0=eta0, decay=decay, d=d, Ca=REF_CA, Cb=REF_CB, b0=b0)
    t1 = None if panel == "a" else ref.switch_time()
    sched = PaperSchedule(eta0=eta0, decay=decay, d=d, Ca=Ca, Cb=Cb,
                          b0=b0 if with_b0 else 1.0, t1=t1)
    path = run_path(OnlineQuantileRegressor(0.5, fit_intercept=False, schedule=sched), X, y,
                    beta, checkpoints(n, n_points))
    return {"t": path["t"], "err": path["err"], "t1": sched.switch_time()}


def _tasks(p):
    return [Task(run_figure8, dict(n=p["n"], d=p["d"], snr=p["snr"], panel=panel, decay=c,
                                   Ca=a, Cb=b, with_b0=wb, common_decay=p["common_decay"],
                                   n_points=p["n_points"]), seed)
            for panel, _, c, a, b, wb in settings() for seed in range(p["reps"])]


def _analyse(p, results):
    reps = p["reps"]
    fig, axes = _plot.new_figure(2, 2, width=5.0, height=3.6)
    panels = {"a": axes[0], "b": axes[1], "c": axes[2], "d": axes[3]}
    final, slope = {}, {}
    table = {k: [] for k in ("panel", "setting", "switch t1", "final rel. err",
                             "last-decade slope")}
    count = {k: 0 for k in panels}
    for i, (panel, label, c, a, b, wb) in enumerate(settings()):
        res = results[i * reps:(i + 1) * reps]
        t = res[0]["t"]
        paths = np.array([r["err"] for r in res])
        _plot.path_band(panels[panel], t, paths, label, color=f"C{count[panel]}",
                        style="-" if wb else "--")
        count[panel] += 1
        final[(panel, label)] = median(paths[:, -1])
        slope[(panel, label)] = last_decade_slope(t, np.median(paths, axis=0))
        for key, v in zip(table, (panel, label, res[0]["t1"], final[(panel, label)],
                                  slope[(panel, label)])):
            table[key].append(v)
    titles = {"a": "8a: decay c of phase one (phase two 15 b0 / (t - t1 + 20 d))",
              "b": f"8b: (Ca, Cb) after a common phase one (c = {p['common_decay']:g})",
              "c": "8c: Cb with Ca = 15", "d": "8d: Ca with Cb = 100"}
    for key, ax in panels.items():
        ax.axhline(1 / p["snr"], color="grey", lw=0.8, ls="-.", label="E|xi| / ||b*||")
        _plot.finish(ax, xlabel="t (samples)", ylabel="relative error", title=titles[key],
                     fontsize=6.5)

    per = {}
    for i, (panel, label, *_rest) in enumerate(settings()):
        per[(panel, label)] = np.array([r["err"][-1] for r in results[i * reps:(i + 1) * reps]])

    def log_spread(panel, keep=lambda label: True):
        # per replication (one stream for every curve): log(max / min) final error
        v = np.array([per[k] for k in per if k[0] == panel and keep(k[1])])
        return np.log(v.max(axis=0) / v.min(axis=0))

    not_small = lambda label: not label.startswith("Ca = 1")     # noqa: E731
    d_cas = [float(k[1].split("= ")[1]) for k in final if k[0] == "d"]
    big = [c for c in d_cas if c >= 5]
    rm = rm_factor(max(big)) / rm_factor(min(big))
    checks = [
        check_below(log_spread("a"), np.log(1.5), "8a: 'different choices of the decay rate c "
                    "result in similar convergence behavior', log(max / min final error over c)",
                    n_of="replications", requires="the whole 95% interval at or below log 1.5"),
        check_below(log_spread("c"), np.log(1.5), "8c: 'the choice of Cb has minimal impact', "
                    "log(max / min final error over Cb)", n_of="replications",
                    requires="the whole 95% interval at or below log 1.5"),
        check_below(log_spread("d", not_small), np.log(2.0), "8d: 'as long as Ca [...] not too "
                    "small, the estimation error remains on the same scale', log(max / min "
                    "final error over Ca >= 5)", n_of="replications",
                    requires="the whole 95% interval at or below log 2"),
        check_inside(log_spread("d", not_small), np.log(rm / 1.25), np.log(rm * 1.25),
                     f"8d: the spread over Ca is Robbins-Monro's, sqrt(c^2 / (2c - 1)) from "
                     f"c = {min(big):g} to {max(big):g}: {rm:.2f}x, log(max / min)",
                     role=CORRECTION, n_of="replications",
                     requires=f"the whole 95% interval within 1.25x of {rm:.2f}")]
    small, ref = ("b", "Ca = 1, Cb = 0"), ("b", "Ca = 15, Cb = 20")
    lit = ("b", "Ca = 1, Cb = 0, step 1/(t - t1 + 1) (no b0)")
    checks.append(check_above(
        np.log(per[small] / per[ref]), np.log(2.0), "8b: with Ca = 1, Cb = 0 'the O(1/t) rate "
        "is no longer guaranteed': final error over the reference (15, 20)'s, log ratio",
        n_of="replications", center="median",
        requires="the whole 95% interval of the median above log 2"))
    notes = (f"8d's spread over Ca >= 5 is what Robbins-Monro predicts for the last iterate: "
             f"its error grows like sqrt(c^2 / (2c - 1)) with c = Ca, a factor {rm:.2f} from "
             f"Ca = {min(big):g} to {max(big):g} (see `qr-efficiency`). "
             f"With Theorem 1's stepsize (b0/Cl) Ca / (t - t1 + Cb d), Ca = 1 and Cb = 0 is the "
             f"Robbins-Monro step 1 / (f(0) t), efficient in the long run, but its first steps "
             f"b0, b0/2, ... throw the iterate far off. Read literally as "
             f"the caption's '15 / (t - t1 + 20 d)' form, without b0, the same constants give "
             f"c = 1/b0 = {1 / noise_facts(0.5)[1]:.2f} < 1/2 for unit-scale t_1.1 noise: final "
             f"{final[lit] / final[ref]:.2f}x the reference, slope {slope[lit]:+.2f} (dashed "
             "curve in 8b) -- the loss of rate the paper describes. The text does not say "
             "which form its experiments used, nor the noise scale.")
    setting = (f"d = {p['d']}, T = {p['n']:,}, t_1.1 noise (unit scale), SNR {p['snr']:g}, "
               f"tau = 0.5, beta_0 = 0, {reps} replications. The paper's oracle constants: "
               "Cl = Cu = 1, b0 = 1/f(0), eta_0 = 2 ||beta*|| / d (the library's rule with the "
               "true D0). 8a: c in {0.5, 0.3, 0.2, 0.1, 0.05} (the text: 'c in {0.5, ..., "
               "0.05}'), phase two 15 b0 / (t - t1 + 1 + 20 d), t1 by continuity for each c. "
               f"8b-8d: one common phase one, c = {p['common_decay']:g} (the text does not give "
               "it; at the paper's 0.5 phase one stalls above the noise level, see "
               "`qr-phase-one`, and every phase two then starts from the stall), and t1 of its "
               "reference phase two (15, 20) by continuity; the legend "
               "values of 8b-8d are not in the text extraction: ours bracket the values the "
               "text names (Ca = 15, Cb = 100, and the 'too small' Ca = 1, Cb = 0). Phase two "
               "counts t - t1 from 1 so that Cb = 0 starts at a finite step.")
    return Outcome(setting=setting, tables=[("Final relative errors (medians)", table)],
                   figures={"fig8_sensitivity": fig}, checks=checks, notes=notes)


EXPERIMENT = Experiment(
    name="qr-fig8", paper="001",
    title="Figure 8: sensitivity to c, Ca, Cb",
    claim=("d = 100, Cl = Cu = 1, ||beta*|| / E|xi| = 20, t_1.1, T = 1e5. In the paper's "
           "words: (8a, the decay c in {0.5, ..., 0.05}, phase two 15/(t - t1 + 20d)) 'when t "
           "is sufficiently large, different choices of the decay rate c result in similar "
           "convergence behavior'; (8b-8d; 8c: Ca = 15, 8d: Cb = 100) 'as long as Ca and Cb "
           "are not too small, the estimation error remains on the same scale, and the choice "
           "of Cb has minimal impact on performance. In contrast, when both parameters are "
           "set to overly small values, for example, Ca = 1 and Cb = 0, the convergence "
           "guarantee at the O(1/t) rate no longer holds.'"),
    presets={"quick": dict(n=T_PAPER, d=D_PAPER, snr=20.0, common_decay=0.2, reps=10,
                           n_points=40),
             "tiny": dict(n=3000, d=10, snr=20.0, common_decay=0.2, reps=6, n_points=8),
             "full": dict(n=T_PAPER, d=D_PAPER, snr=20.0, common_decay=0.2, reps=50,
                          n_points=50)},
    tasks=_tasks, analyse=_analyse)
