"""Theorem 8 / Corollary 9 of Shen, Xia & Zhou (2025): sequential learning
with infinite storage -- every update is one sub-gradient step on the check
loss over all data so far (``mode="storage"``) -- at the paper's constants
and the library's.

Theorem 8: with n0 >= C1 d rows stored at the start, phase one
(eta_t = (Cl / (8 Cu)) (1 - Cl / (100 Cu))^t D0) contracts the error
linearly until it is below 8 gamma (gamma = E|xi|), after
O(log(||beta_0 - beta*|| / gamma)) updates; phase two, a constant step
eta Cl b1^2 / (Cu^2 b0), contracts it linearly towards the statistical
floor. Corollary 9 (n new rows per update): after a burn-in of order
||beta_0 - beta*|| / gamma updates, ||beta_T - beta*||^2 <= C b0^2 d / (n0 + T n):
the offline rate at every T, with the horizon unknown.
"""
from __future__ import annotations

import numpy as np

from ..quantile import OnlineQuantileRegressor
from ._frisch_newton import frisch_newton
from ..schedules import StatisticalSchedule
from . import _plot
from ._qr_common import D_PAPER, default_decay, noise_facts, paper_stream
from ._runner import Task
from ._stats import check_below, median
from ._types import CLAIM, VARIANT, Experiment, Outcome

#: Theorem 8's phase one with Cl = Cu (isotropic design): eta_0 = D0 / 8,
#: decay 1/100 per update
PAPER_SCALE, PAPER_DECAY = 1.0 / 8.0, 0.01
#: phase one ends below this many gamma (Theorem 8's region boundary)
PHASE_ONE_EDGE = 8.0
VARIANTS = ("paper's constants", "library default")
#: "comparable to offline": the same threshold `qr-fig5-6` uses for the
#: paper's "only slightly better"
NEAR_OFFLINE = 1.5


def theorem_switch(beta_norm, gamma, decay=PAPER_DECAY):
    """Updates until Theorem 8's phase-one certificate (1 - decay)^t D0 falls
    to 8 gamma (D0 = ||beta_0 - beta*||, beta_0 = 0): the paper's t1."""
    return int(np.ceil(np.log(beta_norm / (PHASE_ONE_EDGE * gamma)) / -np.log1p(-decay)))


def offline_floor(tau, d, N, beta_norm):
    """Offline QR's asymptotic relative error b0 sqrt(tau (1 - tau) d / N) / ||beta*||
    (x ~ N(0, I)): the rate Corollary 9 promises at every N."""
    return noise_facts(tau)[1] * np.sqrt(tau * (1 - tau) * d / np.asarray(N, float)) / beta_norm


def _schedule(variant, beta_norm, gamma):
    if variant == VARIANTS[0]:
        # phase two's eta is a universal constant the text does not give: the
        # library's 0.5 (half a Newton step, b1 = b0 for a density peaked at 0)
        return StatisticalSchedule(eta0_scale=PAPER_SCALE, decay=PAPER_DECAY,
                                   t_switch=theorem_switch(beta_norm, gamma))
    return StatisticalSchedule()


def run_storage(n0, n_new, N, d, snr, tau, seed, offline=True):
    """One replication: relative error, phase and stepsize after every storage
    update for each variant; the single-sample and batch (n_new rows)
    defaults on the same stream at the same N; the offline LP on all N rows."""
    X, y, beta = paper_stream(N, d, tau=tau, snr=snr, seed=seed)
    gamma, _ = noise_facts(tau)
    norm = float(np.linalg.norm(beta))
    ends = list(range(n0 + n_new, N + 1, n_new))
    out = {"N": ends, "beta_norm": norm}
    for variant in VARIANTS:
        est = OnlineQuantileRegressor(tau, mode="storage", fit_intercept=False,
                                      schedule=_schedule(variant, norm, gamma))
        est.partial_fit(X[:n0], y[:n0])         # the initial storage: its own update
        err, phase, step = [], [], []
        for end in ends:
            est.partial_fit(X[end - n_new:end], y[end - n_new:end])
            err.append(float(np.linalg.norm(est.coef_ - beta) / norm))
            state = getattr(est, "schedule_state_", {}) or {}
            phase.append(float(state.get("phase", np.nan)))
            step.append(float(state.get("stepsize", np.nan)))
        out[variant] = {"err": err, "phase": phase, "step": step}
    for name, kw in (("single", {}), ("batch", dict(mode="batch", batch_size=n_new))):
        est = OnlineQuantileRegressor(tau, fit_intercept=False, **kw)
        est.partial_fit(X[:ends[-1]], y[:ends[-1]])
        out[name] = float(np.linalg.norm(est.coef_ - beta) / norm)
    if offline:
        coef = frisch_newton(X[:ends[-1]], y[:ends[-1]], tau)
        out["offline"] = float(np.linalg.norm(coef - beta) / norm)
    return out


def _tasks(p):
    return [Task(run_storage, dict(n0=p["n0"], n_new=p["n_new"], N=p["N"], d=p["d"],
                                   snr=p["snr"], tau=p["tau"]), seed, priority=1)
            for seed in range(p["reps"])]


def _analyse(p, results):
    tau, d = p["tau"], p["d"]
    gamma, _ = noise_facts(tau)
    norm = results[0]["beta_norm"]
    Ns = np.asarray(results[0]["N"], float)
    T = len(Ns)
    floor = offline_floor(tau, d, Ns, norm)
    edge = PHASE_ONE_EDGE * gamma / norm          # 8 gamma, relative to ||beta*||
    burn = T // 2
    fig, (ax, ax_r) = _plot.new_figure(2, width=5.6, height=4.6)
    table = {k: [] for k in ("schedule", "eta0 / D0", "decay", "phase-one switch (update)",
                             "first update below 8 gamma", "certificate's updates",
                             "final rel. err", "final / offline LP",
                             "max err / offline rate, 2nd half", "phase-two step / b0")}
    checks, summary = [], {}
    off = median([r["offline"] for r in results]) if "offline" in results[0] else np.nan
    for j, variant in enumerate(VARIANTS):
        errs = np.array([r[variant]["err"] for r in results])
        mid = np.median(errs, axis=0)
        below = [int(np.argmax(e < edge)) + 1 if np.any(e < edge) else np.nan for e in errs]
        first = median(below)
        phases = np.array([r[variant]["phase"] for r in results])
        switch = median([int(np.argmax(ph >= 2)) + 1 if np.any(ph >= 2) else np.nan
                         for ph in phases])
        decay = PAPER_DECAY if j == 0 else default_decay("storage")
        scale = PAPER_SCALE if j == 0 else 1.0
        cert = np.log(norm / (PHASE_ONE_EDGE * gamma)) / -np.log1p(-decay)
        ratio = float(np.max(mid[burn:] / floor[burn:]))
        final = float(mid[-1])
        steps = np.array([r[variant]["step"] for r in results])
        step2 = median(steps[:, -1]) / noise_facts(tau)[1]
        for k, v in zip(table, (variant, scale, decay, switch, first, cert, final, final / off,
                                ratio, step2)):
            table[k].append(v)
        role = CLAIM if j == 0 else VARIANT
        offs = np.array([r["offline"] for r in results])
        checks.append(check_below(
            below, 2 * cert, f"{variant}: phase one converges linearly into Theorem 8's "
            f"phase-two region (error < 8 E|xi|) within twice its certificate (1 - {decay:g})^t "
            f"D0 = 8 E|xi| at {cert:.0f} updates: first update below", role=role,
            n_of="replications", fmt=".0f", center="median",
            requires=f"the whole 95% interval of the median at or below {2 * cert:.0f} updates"))
        checks.append(check_below(
            [float(np.max(e[burn:] / floor[burn:])) for e in errs], NEAR_OFFLINE,
            f"{variant}: Corollary 9's anytime rate -- from update {burn} (T/2) on, the largest "
            f"error / offline rate b0 sqrt(tau(1-tau) d / N)", role=role, n_of="replications",
            fmt=".2f", requires=f"the whole 95% interval at or below {NEAR_OFFLINE}"))
        checks.append(check_below(
            errs[:, -1] / offs, NEAR_OFFLINE, f"{variant}: at N = {int(Ns[-1]):,} the error is "
            f"comparable to offline QR on the same rows, error / offline LP's", role=role,
            n_of="replications", fmt=".2f",
            requires=f"the whole 95% interval at or below {NEAR_OFFLINE}"))
        key = "paper" if j == 0 else "library"
        summary.update({f"{key}_final_over_offline": final / off,
                        f"{key}_max_over_rate_second_half": ratio,
                        f"{key}_first_update_below_8gamma": first})
        _plot.path_band(ax, Ns, errs, f"storage, {variant}", color=f"C{j}", slope="none",
                        style="-" if j else "--")
        _plot.path_band(ax_r, Ns, errs / floor, f"storage, {variant}", color=f"C{j}",
                        slope="none", style="-" if j else "--")
        if np.isfinite(switch):
            ax.plot([Ns[int(switch) - 1]], [mid[int(switch) - 1]], "o", ms=7, mfc="none",
                    color=f"C{j}", label=f"phase two starts ({variant})")
    single, batch = (median([r[k] for r in results]) for k in ("single", "batch"))
    ax.plot(Ns, floor, "k:", lw=1, label="offline rate b0 sqrt(tau(1-tau) d / N) / ||b*||")
    ax.axhline(edge, color="grey", lw=0.8, ls="-.", label="8 E|xi| (Theorem 8's phase one)")
    ax.plot([Ns[-1]], [off], "k*", ms=10, label=f"offline LP on all {int(Ns[-1]):,} rows")
    ax.plot([Ns[-1]], [single], "v", color="C2", ms=7,
            label="single-sample default, one pass")
    ax.plot([Ns[-1]], [batch], "^", color="C4", ms=7,
            label=f"batch default ({p['n_new']} rows), one pass")
    _plot.finish(ax, xlabel="N = n0 + t n (rows stored)", ylabel="relative error ||b_t - b*|| / ||b*||",
                 title=f"Theorem 8: storage updates, d = {d}, n0 = {p['n0']:,}, n = {p['n_new']} "
                       f"({p['reps']} reps)", below=True, ncol=1, fontsize=7.5)
    ax_r.axhline(1.0, color="k", lw=0.8, ls=":")
    ax_r.axhline(NEAR_OFFLINE, color="grey", lw=0.8, ls="-.", label=f"{NEAR_OFFLINE}x (criterion)")
    ax_r.axvline(Ns[burn], color="grey", lw=0.7, ls="--", label="T/2: the criterion's range starts")
    _plot.finish(ax_r, xlabel="N (rows stored)", ylabel="error / offline rate",
                 title="Corollary 9: error over the offline rate (1 = optimal)", below=True,
                 ncol=1, fontsize=7.5)
    setting = (f"d = {d}, tau = {tau}, t_1.1 noise, SNR {p['snr']:g}, beta_0 = 0, x ~ N(0, I) "
               f"(Cl = Cu = 1); n0 = {p['n0']:,} rows stored before the first update (Theorem "
               f"8 needs n0 >= C1 d), then {p['n_new']} new rows per update up to N = "
               f"{int(Ns[-1]):,} ({T} updates), each update one sub-gradient step on the mean "
               f"check loss over all rows so far (OnlineQuantileRegressor(mode='storage')); "
               f"{p['reps']} replications, medians. **Paper's constants**: phase one eta_t = "
               f"(Cl / (8 Cu)) (1 - Cl/(100 Cu))^t D0, i.e. StatisticalSchedule(eta0_scale="
               f"{PAPER_SCALE:g}, decay={PAPER_DECAY:g}) with D0 and Cl estimated, switching at "
               "the theorem's own phase-one length (its certificate reaching 8 E|xi|, from the "
               "true ||beta*|| and E|xi|: an oracle switch); phase two's constant eta Cl b1^2 / "
               "(Cu^2 b0) has a universal eta the text does not give: the library's 0.5 b0 / Cu "
               "(b1 = b0 for a density peaked at 0). **Library default**: StatisticalSchedule() "
               f"in storage mode: eta0 = D0 / Cl, decay {default_decay('storage'):g}, switch by "
               "its plateau test, phase two 0.5 b0 / Cu, every constant estimated. In both, "
               "the library never steps above its phase-two constant (a longer step on a mean "
               "gradient overshoots); with b0 estimated on all residuals that cap is large far "
               "from beta* and binds near the noise level. Offline = the exact LP on the same "
               "N rows (Frisch-Newton, quantreg's algorithm); the single-sample and batch defaults (one pass over the same rows) are "
               "shown for scale.")
    notes = (f"Single-sample and batch defaults end at {single / off:.2f}x and "
             f"{batch / off:.2f}x offline on the same rows (plain iterates, see "
             "`qr-efficiency` for why); the storage updates, at a cost of O(N d) per update "
             f"(all rows, every time), end at {table['final / offline LP'][0]:.2f}x "
             f"(paper's constants) and {table['final / offline LP'][1]:.2f}x (library). The "
             "criteria's burn-in is the second half of the updates: Corollary 9 asks for "
             f"T >= C ||beta_0 - beta*|| / E|xi| = C x {norm / gamma:.0f} with C unstated.")
    summary["single_over_offline"] = single / off
    summary["batch_over_offline"] = batch / off
    return Outcome(setting=setting, tables=[("Storage updates (medians over replications)",
                                             table)],
                   figures={"thm8_storage": fig}, checks=checks, notes=notes, summary=summary)


EXPERIMENT = Experiment(
    name="qr-thm8", paper="001",
    title="Theorem 8 / Corollary 9: infinite storage, the offline rate at every T",
    claim=("Section 2.3: with all data stored, each update is a sub-gradient step on the loss "
           "over all of it. Theorem 8: for n0 >= C1 d, phase one eta_t = (Cl/(8 Cu)) "
           "(1 - Cl/(100 Cu))^t D0 converges linearly until the error is below 8 gamma, after "
           "O(log(||beta_0 - beta*|| / gamma)) updates; phase two, a constant step "
           "eta Cl b1^2 / (Cu^2 b0), converges linearly to the statistical error. Corollary 9 "
           "(n rows per update): for T >= C ||beta_0 - beta*|| / gamma, ||beta_T - beta*||^2 "
           "<= C b0^2 d / (n0 + T n) -- 'the procedure consistently achieves statistical "
           "optimality, even when the total time horizon is unknown'. No figure in the paper."),
    presets={"quick": dict(n0=1000, n_new=100, N=30_000, d=D_PAPER, snr=20.0, tau=0.5, reps=8),
             "tiny": dict(n0=200, n_new=20, N=2000, d=10, snr=20.0, tau=0.5, reps=6),
             "full": dict(n0=1000, n_new=100, N=100_000, d=D_PAPER, snr=20.0, tau=0.5,
                          reps=50)},
    tasks=_tasks, analyse=_analyse)
