"""The Cython kernels (csrc/_quantile.pyx) against a NumPy re-implementation.

`Reference` below redoes, one sample (or one block) at a time in plain Python
and NumPy, exactly what the kernel does: the prequential loss, the
(sub-)gradient step, Polyak-Ruppert averaging and the whole statistical
schedule (warm-up, D0 from the median, Cl, Siddiqui's sparsity quotient, the
phase switches, the window refresh with its EMA, the plateau/patience rule,
the start of averaging and the t^-avg_power last phase). The order statistics
come from np.partition, an independent selection algorithm. The estimators must
agree with it to RTOL, and in single mode feeding the data in uneven chunks
must give bit-identical results to one call.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from streamfit import OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from streamfit.schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream

from ._cases import RTOL, SqrtSchedule, assert_same_results, feed, state_of

INV_MAD = 1.482602218505602     # 1 / Phi^{-1}(3/4), as in the kernel
NAN = float("nan")


# -- the reference ---------------------------------------------------------------

def median_abs(r):
    # the upper median of |r|, index n // 2, as select_kth(|r|, n, n // 2)
    a = np.abs(r)
    return np.partition(a, len(a) // 2)[len(a) // 2]


def sparsity(r, tau):
    # Siddiqui's quotient on order statistics 0 <= klo < khi <= n - 1 of r
    n = len(r)
    if n < 2:
        return NAN              # no spacing: no estimate
    h = min(0.1, 0.5 * tau, 0.5 * (1.0 - tau))
    khi = max(min(int((tau + h) * n), n - 1), 1)
    klo = max(min(int((tau - h) * n), khi - 1), 0)
    part = np.partition(r, (klo, khi))
    return (part[khi] - part[klo]) * n / (khi - klo)


def error_scale(r):
    # D0: median |r| / 0.6745; the mean |r| sqrt(pi / 2) if that is 0; else 1
    d0 = median_abs(r) * INV_MAD
    if d0 > 0:
        return d0
    acc = float(np.sum(np.abs(r)))
    return acc / len(r) * 1.2533141373155003 if acc > 0 else 1.0


def top_eigenvalue(X, fit_intercept, sw=None):
    # 30 power iterations on [X 1]' W [X 1] / sum(W) from the all-ones vector;
    # norms by np.linalg.norm (scaled, as the kernel's)
    m, d = X.shape
    sw = np.ones(m) if sw is None else sw
    wsum = sw.sum()
    if not wsum > 0:
        return -1.0
    v, vb, lam = np.ones(d), 1.0 if fit_intercept else 0.0, -1.0
    for _ in range(30):
        nold = np.linalg.norm(np.append(v, vb))
        u = sw * (X @ v + vb) / wsum
        av = X.T @ u
        sb = u.sum() if fit_intercept else 0.0
        nv = np.linalg.norm(np.append(av, sb))
        if not (nv > 0 and nold > 0 and np.isfinite(nv)):
            break
        lam = nv / nold
        v, vb = av / nv, sb / nv
    return lam


def tau_star2(tau):
    ts = tau if tau > 0.5 else 1.0 - tau
    return 4.0 * ts * ts


def ref_params(est):
    """The kernel's parameters, read off the estimator's public parameters.
    Statistical schedules must give every constant (no None but eta0, b0,
    t_switch and restart), so that this does not depend on the library's
    defaults."""
    squared = isinstance(est, OnlineLeastSquaresRegressor)
    p = SimpleNamespace(squared=squared, tau=0.5 if squared else est.tau,
                        mode=getattr(est, "mode", "single"), average=est.average,
                        fit_intercept=est.fit_intercept, avg_power=1.0)
    sched = est.schedule
    if isinstance(sched, ConstantSchedule):
        p.kind, p.c = "constant", float(sched.eta)
    elif isinstance(sched, InverseTimeSchedule):
        p.kind, p.c = "inverse_time", float(sched.c)
    elif isinstance(sched, StatisticalSchedule):
        p.kind = "statistical"
        for name in ("eta0_scale", "decay", "Ca", "window", "eta_const", "avg_power",
                     "plateau", "patience", "ema", "C0", "n_warmup"):
            assert getattr(sched, name) is not None, name
            setattr(p, name, float(getattr(sched, name)))
        p.Cb = NAN if squared else float(sched.Cb)
        for name in ("eta0", "b0", "t_switch"):
            value = getattr(sched, name)
            setattr(p, name, NAN if value is None else float(value))
        p.start = 2 if sched.start == "phase2" else 1
        p.restart = 0.0 if sched.restart is None else float(sched.restart)
    else:
        p.kind, p.user = "user", sched
    return p


STATE = ("t", "n_updates", "n_seen", "intercept", "intercept_avg", "loss", "phase", "eta_geo",
         "t_switch", "d0", "b0", "cl", "sumsq", "n_sumsq", "n_avg", "min_med", "last_eta",
         "eta_start", "avg_on", "n_flat", "b0_cap", "block", "k_pow", "eta_pow", "cu",
         "level", "n_high", "n_restarts", "win_sumsq", "win_wsum", "xmax")


class Reference:
    """Per-sample NumPy mirror of csrc/_quantile.pyx and of the estimator's
    partial_fit/fit bookkeeping (pending batch rows, stored data, weights,
    warm starts). `events` records which branches of the statistical
    schedule ran."""

    def __init__(self, est, d, coef_init=None, intercept_init=0.0):
        self.p = ref_params(est)
        self.batch_size = getattr(est, "batch_size", None)
        self.d = d
        self.da = d + (1 if self.p.fit_intercept else 0)
        self.w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=float)
        self.wbar = self.w.copy()
        self.s = SimpleNamespace(**{name: 0.0 for name in STATE})
        self.s.intercept = self.s.intercept_avg = float(intercept_init)
        self.s.intercept_pi = self.s.intercept_pi2 = self.s.pi_avg = 0.0
        self.win = []                               # residuals of the current window
        self.pending_X, self.pending_y, self.pending_w = np.zeros((0, d)), np.zeros(0), \
            np.zeros(0)
        self.store_X, self.store_y, self.store_w = np.zeros((0, d)), np.zeros(0), np.zeros(0)
        self.n_user = 0                             # user stepsizes handed out
        self.events = set()

    # results, as the estimator's properties report them
    @property
    def averaged(self):
        return self.p.average and self.s.n_avg > 0

    @property
    def coef(self):
        return self.wbar if self.averaged else self.w

    @property
    def intercept(self):
        return self.s.intercept_avg if self.averaged else self.s.intercept

    # -- shared pieces ------------------------------------------------------
    def score(self, r, count=True, weight=1.0):
        # adds the sample's weighted loss; returns g, the gradient being g * x
        p = self.p
        if p.squared:
            loss, g = 0.5 * r * r, -r
        else:
            loss = r * (p.tau - 1.0) if r < 0 else r * p.tau
            g = (1.0 if r <= 0 else 0.0) - p.tau   # 1{y <= x'b} - tau: ties count as below
            if r == 0:
                self.events.add("r == 0")
        if count:
            self.s.loss += weight * loss
            self.s.n_seen += 1
        return g

    def fixed_eta(self):
        # the data-free schedules: constant, c / (t + 1), a user schedule
        # (indexed by updates)
        p, t = self.p, self.s.t
        if p.kind == "constant":
            return p.c
        if p.kind == "inverse_time":
            return p.c / (t + 1.0)
        return float(p.user.stepsizes(int(self.s.n_updates), 1)[0])

    def average_step(self, x=None, wi=1.0):
        # x: the row (weight wi), when the plug-in intercept runs (single mode)
        s = self.s
        s.n_avg += 1.0
        inv = 1.0 / s.n_avg
        self.wbar = self.wbar + (self.w - self.wbar) * inv
        if x is None:
            s.intercept_avg += (s.intercept - s.intercept_avg) * inv
            return
        # the plug-ins' average, moved to the last wbar by the lag
        # xbar'(mean of the wbar path - last wbar), xbar the rows' weighted mean
        s.pi_avg += (2.0 * s.intercept_pi - s.intercept_pi2 - s.pi_avg) * inv
        if inv == 1.0:
            self.xbar, self.wwbar, self.x_wsum = x.copy(), self.wbar.copy(), wi
        else:
            self.x_wsum += wi
            self.xbar = self.xbar + (x - self.xbar) * (wi / self.x_wsum)
            self.wwbar = self.wwbar + (self.wbar - self.wwbar) * inv
        s.intercept_avg = s.pi_avg + self.xbar @ (self.wwbar - self.wbar)

    def plug_in_step(self, x, target, step):
        # single mode's intercept with averaging (check loss): two plug-in
        # intercepts take the quantile steps (and twice them) on y - x'wbar,
        # from the iterate's intercept when the average starts
        s, tau = self.s, self.p.tau
        if s.n_avg == 0:
            s.intercept_pi = s.intercept_pi2 = s.intercept
            return
        xw = x @ self.wbar
        r = target - xw - s.intercept_pi
        s.intercept_pi -= step * ((1.0 if r <= 0 else 0.0) - tau)
        r = target - xw - s.intercept_pi2
        s.intercept_pi2 -= 2.0 * step * ((1.0 if r <= 0 else 0.0) - tau)

    def start_phase(self, phase, eta_start, avg_on):
        s = self.s
        self.events.add(f"phase{int(s.phase)}->{phase}")
        s.phase, s.t_switch, s.eta_start = float(phase), s.t, eta_start
        s.n_avg = s.n_flat = 0.0
        s.avg_on = float(avg_on)
        s.k_pow = -1.0

    def last_phase_eta(self, scale):
        # eta_start scale / (scale + k), k = t - t1; when averaging
        # eta_start (1 + k / scale)^-avg_power, recomputed only when k has
        # moved by scale / 64 since the cached value (or eta_start moved)
        s, p = self.s, self.p
        k = s.t - s.t_switch
        if p.average and p.avg_power != 1.0:
            self.events.add("t^-avg_power")
            if s.k_pow < 0 or k < s.k_pow or k >= s.k_pow + scale * (1.0 / 64.0) \
                    or not s.eta_pow > 0:
                s.k_pow = k
                s.eta_pow = s.eta_start * (1.0 + k / scale) ** -p.avg_power
            else:
                self.events.add("cached power")
            return s.eta_pow
        return s.eta_start * scale / (scale + k)

    def phase_start_eta(self, phase):
        s, p = self.s, self.p
        if p.squared:
            return s.eta_geo
        if p.mode == "single":
            return s.b0 * p.Ca / (s.cl * p.Cb * self.da)
        const = p.eta_const * s.b0 / s.cu
        if phase == 2:
            return const
        return min(const, p.Ca * s.b0 * self.block_ratio() / (s.cl * p.Cb))

    def phase_one_cap(self):
        # eta_const b / Cu, b the residuals' sparsity at 0: at least b0 and
        # that of a centred Gaussian of the best window's median |r|
        s, p = self.s, self.p
        if p.squared:
            return s.eta_geo
        gauss = math.sqrt(2.0 * math.pi) * INV_MAD
        return p.eta_const * max(s.b0, gauss * s.min_med) / s.cu

    def block_ratio(self):
        return self.s.block / self.da if self.s.block < self.da else 1.0

    def end_phase_one(self):
        s, p = self.s, self.p
        s.b0_cap = s.b0
        if p.mode == "batch" and s.block < p.C0 * tau_star2(p.tau) / 4.0 * self.da:
            self.start_phase(3, self.phase_start_eta(3), True)
        else:
            self.start_phase(2, self.phase_start_eta(2), False)

    def fresh_estimates(self, r):
        # D0, b0, the level, eta0 and phase one from the residuals r (end of
        # the warm-up, or a restart); Cl and Cu set before
        s, p, da = self.s, self.p, self.da
        med = median_abs(r)
        s.level, s.n_high = med, 0.0
        if not p.squared:
            s.d0 = error_scale(r)
            s.b0 = sparsity(r, p.tau) if math.isnan(p.b0) else p.b0
            if not s.b0 > 1e-9 * s.d0:
                s.b0 = s.d0
            if not math.isnan(p.eta0):
                s.eta_geo = p.eta0
            elif p.mode == "single":
                s.eta_geo = p.eta0_scale * s.d0 / (s.cl * da * tau_star2(p.tau))
            else:
                s.eta_geo = p.eta0_scale * s.d0 * self.block_ratio() / s.cl
        else:
            s.eta_geo = p.eta0_scale / (s.cl * da) if math.isnan(p.eta0) else p.eta0
        assert np.isfinite(s.eta_geo)
        if not s.eta_geo > 0:
            s.eta_geo = 1e-12
        s.min_med = med if p.mode == "single" else s.d0 / INV_MAD
        s.phase, s.t_switch = 1.0, s.t
        s.n_avg = s.avg_on = s.n_flat = 0.0
        s.k_pow = -1.0
        if p.start == 2:
            self.events.add("start phase2")
            self.end_phase_one()

    def restart(self, r, cu):
        # the residual scale jumped: Cl from the window's rows, phase one afresh
        s = self.s
        self.events.add("restart")
        if s.win_wsum > 0 and s.win_sumsq / s.win_wsum >= np.finfo(float).tiny:
            s.cl = s.win_sumsq / (s.win_wsum * self.da)
        s.cu = cu if cu >= s.cl else s.cl
        s.n_restarts += 1
        self.fresh_estimates(r)

    def jump_test(self, med):
        # the restart rule: 0 a window like the others, 1 high, 2 restart
        s, p = self.s, self.p
        if p.squared or not p.restart > 0 or s.phase < 1:
            return 0
        if s.level > 0 and med > p.restart * s.level:
            s.n_high += 1
            self.events.add("high window")
            return 2 if s.n_high >= p.patience else 1
        s.n_high = 0.0
        s.level = med if not s.level > 0 else s.level + p.ema * (med - s.level)
        return 0

    def full_window(self, r):
        # single and batch windows: True when phase one must restart on r
        med = median_abs(r)
        jump = self.jump_test(med)
        if jump == 0:
            self.window_done(r, med)
        return jump == 2

    def window_done(self, r, med):
        s, p = self.s, self.p
        if s.min_med <= 0 or med < p.plateau * s.min_med:
            s.n_flat = 0.0
        else:
            s.n_flat += 1
        if s.min_med <= 0 or med < s.min_med:
            s.min_med = med
        flat = s.n_flat >= p.patience
        if flat:
            self.events.add("plateau")
        if not p.squared and math.isnan(p.b0):
            est = sparsity(r, p.tau)
            if est > 1e-9 * s.d0:
                if s.phase >= 2 and p.mode != "storage":
                    self.events.add("b0 ema")
                    s.b0 += p.ema * (est - s.b0)
                else:
                    s.b0 = est
                if s.phase >= 2 and s.b0 > s.b0_cap:
                    self.events.add("b0 cap")
                    s.b0 = s.b0_cap
        if flat and s.phase == 1 and math.isnan(p.t_switch) and \
                not (p.mode == "single" and not p.squared and not math.isnan(p.b0)):
            self.end_phase_one()
        elif flat and s.phase == 2 and p.mode == "batch":
            self.start_phase(3, self.phase_start_eta(3), True)
        elif flat and s.phase >= 2 and s.avg_on == 0:
            self.events.add("average on")
            s.avg_on, s.n_avg = 1.0, 0.0
        elif s.phase >= 2 and not p.squared:
            s.eta_start = self.phase_start_eta(s.phase)
            s.k_pow = -1.0

    # -- single-sample updates ------------------------------------------------------
    def single_eta(self, weight):
        s, p = self.s, self.p
        if s.phase == 1:
            self.events.add("geometric")
            eta = s.eta_geo
            if not p.squared:
                factor = 1.0 - p.decay / (self.da * tau_star2(p.tau))
                s.eta_geo *= factor if weight == 1.0 else factor ** weight
            if (not math.isnan(p.t_switch) and s.t + 1 >= p.t_switch) or \
                    (not p.squared and not math.isnan(p.b0) and math.isnan(p.t_switch)
                     and eta <= self.phase_start_eta(2)):
                s.b0_cap = s.b0
                self.start_phase(2, self.phase_start_eta(2), False)
                s.t_switch = s.t + weight
            return eta
        if not p.squared:
            return self.last_phase_eta(p.Cb * self.da)
        return self.last_phase_eta(p.Ca / (s.eta_start * s.cl))

    def single(self, X, y, sw):
        s, p = self.s, self.p
        fit_one = 1.0 if p.fit_intercept else 0.0
        for x, target, wi in zip(X, y, sw):
            r = target - (x @ self.w + s.intercept)
            g = self.score(r, weight=wi)
            if wi == 0:
                self.events.add("weight 0")
                continue
            if p.kind == "statistical":
                # once settled (averaging on), every 4th update's residual joins the window
                if not s.avg_on or int(s.n_updates) % 4 == 0:
                    self.win.append(r)
                    s.win_sumsq += wi * (x @ x + fit_one)
                    s.win_wsum += wi
                else:
                    self.events.add("settled")
                if s.phase == 0:
                    # warm-up: scored and remembered, no update
                    s.sumsq += wi * (x @ x + fit_one)
                    s.n_sumsq += wi
                    s.xmax = max(s.xmax, float(np.abs(x).max()))
                    if len(self.win) >= p.n_warmup:
                        self.events.add("warm-up")
                        s.cl = s.sumsq / (s.n_sumsq * self.da)
                        if not s.cl > 0:
                            s.cl = 1.0
                        self.fresh_estimates(np.array(self.win))
                        self.win, s.win_sumsq, s.win_wsum = [], 0.0, 0.0
                    continue
                if len(self.win) >= p.window:
                    r_win = np.array(self.win)
                    if self.full_window(r_win):
                        self.restart(r_win, 0.0)
                    self.win, s.win_sumsq, s.win_wsum = [], 0.0, 0.0
                eta = self.single_eta(wi)
            else:
                eta = self.fixed_eta()
            self.w = self.w + (-eta * g * wi) * x           # w -= eta * g * w_i * x
            if p.fit_intercept:
                s.intercept -= eta * g * wi
            s.t += wi
            s.n_updates += 1
            s.last_eta = eta
            if p.average and (s.avg_on or p.kind != "statistical"):
                if p.fit_intercept and not p.squared:
                    self.plug_in_step(x, target, eta * wi)
                    self.average_step(x, wi)
                else:
                    self.average_step()

    # -- block updates (batch, storage) ----------------------------------------------
    def block(self, X, y, sw, score_from=0):
        s, p = self.s, self.p
        m, d = X.shape
        fit_one = 1.0 if p.fit_intercept else 0.0
        resid = (y - X @ self.w) - s.intercept
        gs = np.empty(m)
        for i in range(m):
            gs[i] = self.score(resid[i], count=i >= score_from, weight=sw[i])
        wsum = sw.sum()
        if not wsum > 0:
            self.events.add("block of weight 0")
            return
        grad = X.T @ (sw * gs)                              # sum w_i g_i x_i
        gsum = float(np.sum(sw * gs))
        sumsq = float(np.sum(sw * (np.einsum("ij,ij->i", X, X) + fit_one)))
        s.block = wsum
        kept = resid[sw != 0]                               # positive weights, in order
        if p.kind == "statistical":
            if s.phase == 0:
                # warm-up over the first n_warmup rows (all rows in storage mode)
                self.events.add("first block")
                s.sumsq += sumsq
                s.n_sumsq += wsum
                s.xmax = max(s.xmax, float(np.abs(X).max()))
                if p.mode == "storage":
                    r0 = kept
                else:
                    self.win.extend(kept)
                    if len(self.win) < p.n_warmup:
                        self.events.add("warm-up block")
                        return
                    r0 = np.array(self.win)
                    self.win = []
                cu = top_eigenvalue(X, p.fit_intercept, sw)
                s.cl = s.sumsq / (s.n_sumsq * self.da)
                if not s.cl > 0:
                    s.cl = 1.0
                s.cu = cu if cu >= s.cl else s.cl
                self.fresh_estimates(r0)
            elif p.mode == "storage":
                # all residuals are the plateau/b0 window; the restart rule
                # watches windows of the newest rows' residuals
                new = slice(score_from, None)
                kept_new = resid[new][sw[new] != 0]
                sumsq_new = float(np.sum(sw[new] * (np.einsum("ij,ij->i", X[new], X[new])
                                                    + fit_one)))
                wsum_new = float(sw[new].sum())
                rj = None
                if len(kept_new) >= p.window:
                    rj, self.win = kept_new, []
                    s.win_sumsq, s.win_wsum = sumsq_new, wsum_new
                elif len(kept_new):
                    self.win.extend(kept_new)
                    s.win_sumsq += sumsq_new
                    s.win_wsum += wsum_new
                    if len(self.win) >= p.window:
                        rj = np.array(self.win)
                jump = self.jump_test(median_abs(rj)) if rj is not None else 0
                if jump == 2:
                    self.restart(rj, top_eigenvalue(X[new], p.fit_intercept, sw[new]))
                elif jump == 0:
                    self.window_done(kept, median_abs(kept))
                if rj is not None:
                    self.win, s.win_sumsq, s.win_wsum = [], 0.0, 0.0
            else:
                self.win.extend(kept)
                s.win_sumsq += sumsq
                s.win_wsum += wsum
                if len(self.win) >= p.window:
                    r_win = np.array(self.win)
                    if self.full_window(r_win):
                        self.restart(r_win, top_eigenvalue(X, p.fit_intercept, sw))
                    self.win, s.win_sumsq, s.win_wsum = [], 0.0, 0.0
            if s.phase == 1:
                self.events.add("geometric")
                eta = min(s.eta_geo, self.phase_one_cap())
                if eta < s.eta_geo:
                    self.events.add("geometric capped")
                s.eta_geo *= 1.0 - p.decay * self.block_ratio()
                if not math.isnan(p.t_switch) and s.t + 1 >= p.t_switch:
                    s.b0_cap = s.b0
                    self.start_phase(2, self.phase_start_eta(2), False)
                    s.t_switch = s.t + 1
            elif s.phase == 2:
                eta = s.eta_start
            else:
                eta = self.last_phase_eta(p.Cb / self.block_ratio())
        else:
            eta = self.fixed_eta()
        self.w = self.w + (-eta / wsum) * grad              # w -= eta * grad / sum(w)
        if p.fit_intercept:
            s.intercept -= eta * (gsum / wsum)
        s.t += 1
        s.n_updates += 1
        s.last_eta = eta
        if p.average and (s.avg_on or p.kind != "statistical"):
            self.average_step()

    # -- the estimator's partial_fit / fit ----------------------------------------------
    def partial_fit(self, X, y, sample_weight=None, batch_size="param"):
        bs = self.batch_size if batch_size == "param" else batch_size
        sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        if self.p.mode == "single":
            self.single(X, y, sw)
        elif self.p.mode == "batch":
            X = np.concatenate([self.pending_X, X])
            y = np.concatenate([self.pending_y, y])
            sw = np.concatenate([self.pending_w, sw])
            block = bs or len(X)
            n_full = len(X) // block * block if len(X) else 0
            for a in range(0, n_full, block):
                self.block(X[a:a + block], y[a:a + block], sw[a:a + block])
            self.pending_X, self.pending_y, self.pending_w = X[n_full:], y[n_full:], sw[n_full:]
        else:
            n_old = len(self.store_y)
            self.store_X = np.concatenate([self.store_X, X])
            self.store_y = np.concatenate([self.store_y, y])
            self.store_w = np.concatenate([self.store_w, sw])
            if len(X) and sw.any():
                self.block(self.store_X, self.store_y, self.store_w, score_from=n_old)
            elif len(X):
                self.s.n_seen += len(X)     # weight 0 only: no step
        return self

    def fit(self, X, y, sample_weight=None):
        sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        if self.p.mode == "single":
            return self.partial_fit(X, y, sw)
        bs = self.batch_size
        n_full = len(X) // bs * bs
        if self.p.mode == "batch":
            self.partial_fit(X[:n_full], y[:n_full], sw[:n_full], bs)
            if n_full < len(X):
                self.partial_fit(X[n_full:], y[n_full:], sw[n_full:], None)
        else:
            for a in range(0, len(X), bs):
                self.partial_fit(X[a:a + bs], y[a:a + bs], sw[a:a + bs], None)
        return self


# -- helpers ----------------------------------------------------------------------------

# The schedule's estimated constants and its stepsize end a chain of sums and
# ratios, each rounded in the kernel's order, not NumPy's: measured up to
# 1.2e-12 off the reference on the portable path (no fused products).
SCHEDULE_RTOL = 10 * RTOL[np.float64]


def assert_matches(est, ref, rtol=RTOL[np.float64]):
    # rounding differences scale with the largest coefficient, so a near-zero
    # intercept is compared on that scale
    got, want = np.append(est.coef_, est.intercept_), np.append(ref.coef, ref.intercept)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    np.testing.assert_allclose(est.cumulative_loss_, ref.s.loss, rtol=rtol)
    assert est.n_updates_ == ref.s.n_updates
    assert state_of(est)["t"][0] == ref.s.t        # the schedule's clock
    state = est.schedule_state_
    assert state["phase"] == ref.s.phase
    np.testing.assert_allclose(state["stepsize"], ref.s.last_eta, rtol=SCHEDULE_RTOL)


def data(loss, n, d=5, tau=0.3, seed=0):
    # t_1.1 noise for the check loss (the paper's), Gaussian for least squares
    noise = "gaussian" if loss == "squared" else "t"
    X, y, _ = make_linear_stream(n, d, tau=tau, noise=noise, snr=5.0, random_state=seed)
    return X, y


def chunks(n, seed=1):
    # uneven chunk boundaries, including empty and one-row chunks
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(2, n, 12))
    return [0, 0, 1, 2, *cuts.tolist(), n - 1, n]


def estimator(loss, **kw):
    if loss == "squared":
        kw.pop("tau", None)
        return OnlineLeastSquaresRegressor(**kw)
    return OnlineQuantileRegressor(**kw)


def statistical(**kw):
    # every constant given (see ref_params); window 64 and warm-up 50 make
    # several windows and every phase happen within a few thousand samples
    base = dict(eta0_scale=2.0, decay=0.5, Ca=20.0, Cb=30.0, n_warmup=50, window=64,
                eta_const=1.0, avg_power=2.0 / 3.0, plateau=0.9, patience=3, ema=0.3,
                C0=10.0)
    return StatisticalSchedule(**{**base, **kw})


def test_inv_mad_is_the_normal_mad_constant():
    assert INV_MAD == pytest.approx(1.0 / stats.norm.ppf(0.75), rel=1e-15)


@pytest.mark.parametrize("n", [2, 3, 5, 16, 64])
@pytest.mark.parametrize("tau", [0.01, 0.05, 0.3, 0.5, 0.9, 0.99])
def test_order_statistics_helpers(tau, n):
    # the oracle's own order statistics agree with sorting, and stay in range
    r = np.random.default_rng(0).standard_normal(n)
    srt = np.sort(r)
    assert median_abs(r) == np.sort(np.abs(r))[n // 2]
    quotient = sparsity(r, tau)
    spacings = {(srt[j] - srt[i]) * n / (j - i) for i in range(n) for j in range(i + 1, n)}
    assert quotient in spacings and quotient > 0
    assert math.isnan(sparsity(r[:1], tau))


# -- single mode: every schedule, loss, averaging and intercept setting ------------------

SINGLE_SCHEDULES = {
    "constant": {"check": ConstantSchedule(0.5), "squared": ConstantSchedule(0.02)},
    "inverse_time": {"check": InverseTimeSchedule(20.0), "squared": InverseTimeSchedule(0.1)},
    "user": {"check": SqrtSchedule(2.0), "squared": SqrtSchedule(0.05)},
    "statistical": {"check": statistical(), "squared": statistical(eta0_scale=0.5, Ca=2.0)},
}


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("schedule", sorted(SINGLE_SCHEDULES))
@pytest.mark.parametrize("loss", ["check", "squared"])
def test_single_matches_reference(loss, schedule, average, fit_intercept):
    X, y = data(loss, 2000)
    kw = dict(tau=0.3, schedule=SINGLE_SCHEDULES[schedule][loss], average=average,
              fit_intercept=fit_intercept)
    est = estimator(loss, **kw).fit(X, y)
    ref = Reference(est, X.shape[1]).fit(X, y)
    assert_matches(est, ref)
    assert not fit_intercept or est.intercept_ != 0.0
    # many uneven partial_fit calls: bit-identical to one call
    assert_same_results(feed(estimator(loss, **kw), X, y, chunks(len(y))), est)


@pytest.mark.parametrize("d", [8, 21])
@pytest.mark.parametrize("schedule", ["user", "statistical"])
@pytest.mark.parametrize("loss", ["check", "squared"])
def test_single_wide_rows_match_reference(loss, schedule, d):
    # d >= 8 runs the kernel's 8-wide dot/axpy loops (d = 21 with a tail of 5),
    # which d = 5 never reaches; the fused update-and-next-dot must sum as the
    # plain dot does, or chunking would change the results
    X, y = data(loss, 1500, d=d, seed=6)
    kw = dict(tau=0.3, schedule=SINGLE_SCHEDULES[schedule][loss], average=True)
    est = estimator(loss, **kw).fit(X, y)
    assert_matches(est, Reference(est, d).fit(X, y))
    assert_same_results(feed(estimator(loss, **kw), X, y, chunks(len(y))), est)


# Schedule variants for the branch coverage of the single-sample statistical
# schedule; each lists the branches (Reference.events) that it must run.
SINGLE_VARIANTS = {
    "check-default": (
        "check", 0.3, False, dict(),
        {"warm-up", "geometric", "plateau", "phase1->2", "b0 ema"}),
    "check-average": (
        "check", 0.3, True, dict(),
        {"warm-up", "geometric", "phase1->2", "b0 ema", "average on", "settled",
         "t^-avg_power", "cached power"}),
    "check-average-power-1": (
        "check", 0.7, True, dict(avg_power=1.0),
        {"warm-up", "phase1->2", "average on"}),
    "check-known-b0": (      # the paper's continuity rule ends phase one
        "check", 0.5, True, dict(b0=3.0, eta0=40.0),
        {"warm-up", "geometric", "phase1->2", "average on", "t^-avg_power"}),
    "check-t_switch": (
        "check", 0.3, False, dict(t_switch=400, ema=1.0),
        {"warm-up", "geometric", "phase1->2", "b0 ema"}),
    "check-patience-1": (
        "check", 0.9, True, dict(patience=1, plateau=0.5, window=32),
        {"warm-up", "phase1->2", "b0 ema", "average on"}),
    "squared-default": (
        "squared", 0.5, False, dict(eta0_scale=0.5, Ca=2.0),
        {"warm-up", "geometric", "plateau", "phase1->2"}),
    "squared-average": (
        "squared", 0.5, True, dict(eta0_scale=0.5, Ca=2.0),
        {"warm-up", "geometric", "phase1->2", "average on", "t^-avg_power"}),
    "squared-t_switch": (
        "squared", 0.5, True, dict(eta0=0.05, Ca=2.0, t_switch=300, avg_power=0.8),
        {"warm-up", "geometric", "phase1->2", "average on", "t^-avg_power"}),
}


@pytest.mark.parametrize("variant", sorted(SINGLE_VARIANTS))
def test_statistical_single_matches_reference(variant):
    loss, tau, average, kw, branches = SINGLE_VARIANTS[variant]
    X, y = data(loss, 3000, tau=tau, seed=2)
    est = estimator(loss, tau=tau, schedule=statistical(**kw), average=average)
    feed(est, X, y, chunks(len(y), seed=3))
    ref = Reference(est, X.shape[1]).fit(X, y)
    assert branches <= ref.events, sorted(ref.events)
    assert_matches(est, ref)
    assert est.n_updates_ == len(y) - 50                # no update during the warm-up
    state = est.schedule_state_
    for key in ("t_switch", "d0", "b0", "cl"):
        np.testing.assert_allclose(state[key], getattr(ref.s, key), rtol=SCHEDULE_RTOL)
    assert_same_results(est, estimator(loss, tau=tau, schedule=statistical(**kw),
                                    average=average).fit(X, y))


# -- batch and storage modes ------------------------------------------------------------

BLOCK_SCHEDULES = {
    "constant": ConstantSchedule(0.5),
    "inverse_time": InverseTimeSchedule(20.0),
    "user": SqrtSchedule(2.0),
    "statistical": statistical(eta0_scale=1.0, decay=0.1),
}


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("schedule", sorted(BLOCK_SCHEDULES))
@pytest.mark.parametrize("mode", ["batch", "storage"])
def test_block_modes_match_reference(mode, schedule, average, fit_intercept):
    X, y = data("check", 1200 if mode == "batch" else 600)
    est = OnlineQuantileRegressor(tau=0.3, mode=mode, batch_size=24, average=average,
                                  fit_intercept=fit_intercept,
                                  schedule=BLOCK_SCHEDULES[schedule]).fit(X[:-5], y[:-5])
    ref = Reference(est, X.shape[1]).fit(X[:-5], y[:-5])   # a short last block
    assert_matches(est, ref)
    # partial_fit in uneven chunks: batch rows wait for a full batch of 24
    bounds = chunks(len(y))
    est = feed(OnlineQuantileRegressor(**est.get_params(deep=False)), X, y, bounds)
    ref = Reference(est, X.shape[1])
    for a, b in zip(bounds[:-1], bounds[1:]):
        ref.partial_fit(X[a:b], y[a:b])
    assert_matches(est, ref)
    if mode == "batch":
        # statistical: blocks that end before n_warmup = 50 rows only warm up
        skipped = -(-50 // 24) - 1 if schedule == "statistical" else 0
        assert est.n_samples_seen_ == len(y)
        assert est.n_updates_ == len(y) // 24 - skipped
        # chunks or one call: the same blocks, bit-identical
        assert_same_results(est, OnlineQuantileRegressor(**est.get_params(deep=False))
                         .partial_fit(X, y))


# name: (mode, tau, batch_size, average, schedule constants, branches)
BLOCK_VARIANTS = {
    "batch-phases-1-2-3": (
        "batch", 0.3, 64, False, dict(eta0_scale=1.0, decay=0.1, C0=1.0),
        {"first block", "geometric", "phase1->2", "phase2->3"}),
    "batch-average": (
        "batch", 0.5, 64, True, dict(eta0_scale=1.0, decay=0.1, C0=1.0),
        {"first block", "geometric", "phase1->2", "phase2->3", "t^-avg_power"}),
    "batch-small-blocks": (   # block < C0 tau*^2 d / 4: straight to phase three
        "batch", 0.3, 8, True, dict(eta0_scale=1.0, decay=0.1, window=32),
        {"first block", "geometric", "phase1->3", "t^-avg_power"}),
    "batch-t_switch": (
        "batch", 0.7, 32, True, dict(eta0_scale=0.3, decay=0.1, t_switch=10, C0=1.0),
        {"first block", "geometric", "phase1->2"}),
    "batch-capped": (
        "batch", 0.5, 32, False, dict(eta0_scale=5.0, decay=0.1, C0=1.0),
        {"first block", "geometric", "geometric capped", "phase1->2"}),
    "storage": (
        "storage", 0.3, 25, True, dict(eta0_scale=1.0, decay=0.1),
        {"first block", "geometric", "phase1->2", "average on"}),
    "storage-known-b0": (
        "storage", 0.5, 25, False, dict(eta0=50.0, decay=0.1, b0=3.0),
        {"first block", "geometric", "geometric capped", "phase1->2"}),
}


@pytest.mark.parametrize("variant", sorted(BLOCK_VARIANTS))
def test_statistical_blocks_match_reference(variant):
    mode, tau, bs, average, kw, branches = BLOCK_VARIANTS[variant]
    n = 6400 if mode == "batch" else 1500
    X, y = data("check", n, tau=tau, seed=4)
    est = OnlineQuantileRegressor(tau=tau, mode=mode, batch_size=bs, average=average,
                                  schedule=statistical(**kw)).fit(X, y)
    ref = Reference(est, X.shape[1]).fit(X, y)
    assert branches <= ref.events, sorted(ref.events)
    assert_matches(est, ref)
    state = est.schedule_state_
    for key in ("t_switch", "d0", "b0", "cl"):
        np.testing.assert_allclose(state[key], getattr(ref.s, key), rtol=SCHEDULE_RTOL)


@pytest.mark.parametrize("mode, tau, n_rows", [
    ("single", 0.99, 3000),     # warm-up of 50 and windows of 64: (tau + h) n >= n - 1
    ("single", 0.9, 5),         # n_warmup = 5 (the smallest allowed): int((tau - h) n) = 4
    ("storage", 0.3, 1),        # a first call of one row: no spacing at all
    ("storage", 0.9, 6),        # six rows: int((tau - h) n) = 5 = n - 1
    ("storage", 0.5, 3),        # three rows: int((tau - h) n) = int((tau + h) n) = 1
])
def test_sparsity_quotient_stays_inside_the_residuals(mode, tau, n_rows):
    # Extreme tau or few residuals put the quantile spacing's order statistics
    # at or past index n - 1; the estimate must come from the residuals alone
    # (the kernel once read r[n], past the buffer: garbage b0, up to 3e15).
    X, y = data("check", 3000, tau=tau, seed=5)
    sched = statistical(n_warmup=5) if tau == 0.9 and mode == "single" else statistical()
    est = OnlineQuantileRegressor(tau=tau, mode=mode, batch_size=25, schedule=sched)
    est.partial_fit(X[:n_rows], y[:n_rows])
    ref = Reference(est, X.shape[1]).partial_fit(X[:n_rows], y[:n_rows])
    np.testing.assert_allclose(est.schedule_state_["b0"], ref.s.b0, rtol=RTOL[np.float64])
    assert_matches(est, ref)


@pytest.mark.parametrize("mode", ["single", "batch", "storage"])
def test_exact_ties_count_as_below(mode):
    # Integer data and a stepsize of 1/4 leave many residuals exactly 0: the
    # sub-gradient there is 1{y <= x'b} - tau = 1 - tau (and the loss 0).
    rng = np.random.default_rng(7)
    X = rng.integers(-1, 2, (400, 3)).astype(float)
    y = X @ np.array([1.0, -2.0, 0.0]) + rng.integers(-1, 2, 400)
    y[:4] = 0.0         # ties at the start, beta = 0, in every mode
    est = OnlineQuantileRegressor(tau=0.5, mode=mode, batch_size=4,
                                  schedule=ConstantSchedule(0.25)).fit(X, y)
    ref = Reference(est, 3).fit(X, y)
    assert "r == 0" in ref.events
    assert_matches(est, ref)


# -- weights, warm starts, restarts ---------------------------------------------------------

def weights(n, seed=8):
    # zeros (as if absent), fractions, 1 and integers
    return np.random.default_rng(seed).choice([0.0, 0.25, 1.0, 1.0, 2.0, 3.5], n)


def feed_weighted(est, ref, X, y, sw, bounds):
    for a, b in zip(bounds[:-1], bounds[1:]):
        est.partial_fit(X[a:b], y[a:b], sample_weight=sw[a:b])
        ref.partial_fit(X[a:b], y[a:b], sw[a:b])


WEIGHTED = {
    "single-statistical": ("single", statistical(), True),
    "single-inverse_time": ("single", InverseTimeSchedule(20.0), False),
    "single-user": ("single", SqrtSchedule(2.0), True),
    "batch-statistical": ("batch", statistical(eta0_scale=1.0, decay=0.1, C0=1.0), True),
    "batch-user": ("batch", SqrtSchedule(2.0), False),
    "storage-statistical": ("storage", statistical(eta0_scale=1.0, decay=0.1), True),
    "storage-constant": ("storage", ConstantSchedule(0.5), False),
}


@pytest.mark.parametrize("case", sorted(WEIGHTED))
def test_sample_weights_match_reference(case):
    # the weighted check loss: weights scale each row's loss and gradient,
    # single mode's clock moves by the weight, blocks take weighted means
    mode, schedule, average = WEIGHTED[case]
    n = {"single": 3000, "batch": 3000, "storage": 800}[mode]
    X, y = data("check", n, tau=0.3, seed=9)
    sw = weights(n)
    if mode == "storage":
        sw[100:160] = 0.0           # a call whose new rows all weigh 0: no step
    kw = dict(tau=0.3, mode=mode, batch_size=24, average=average, schedule=schedule)
    est = OnlineQuantileRegressor(**kw).fit(X, y, sample_weight=sw)
    ref = Reference(est, X.shape[1]).fit(X, y, sw)
    assert "weight 0" in ref.events or mode != "single"
    assert_matches(est, ref)
    bounds = [0, 100, 160, 401, 402, 777, n] if mode == "storage" else chunks(n)
    est, ref = OnlineQuantileRegressor(**kw), Reference(est, X.shape[1])
    feed_weighted(est, ref, X, y, sw, bounds)
    assert_matches(est, ref)
    assert est.n_samples_seen_ == n


@pytest.mark.parametrize("mode", ["single", "batch", "storage"])
@pytest.mark.parametrize("start", ["phase1", "phase2"])
def test_warm_start_matches_reference(mode, start):
    # coef_init / intercept_init start the iterate (and the average) there;
    # start="phase2" skips phase one after the warm-up
    X, y = data("check", 2000, tau=0.5, seed=10)
    coef0 = np.linalg.lstsq(X[:300], y[:300], rcond=None)[0]
    kw = dict(tau=0.5, mode=mode, batch_size=40, average=True,
              schedule=statistical(eta0_scale=2.0 if mode == "single" else 1.0,
                                   decay=0.5 if mode == "single" else 0.1, start=start))
    est = OnlineQuantileRegressor(**kw).fit(X, y, coef_init=coef0, intercept_init=0.5)
    ref = Reference(est, X.shape[1], coef_init=coef0, intercept_init=0.5).fit(X, y)
    assert ("start phase2" in ref.events) == (start == "phase2")
    assert_matches(est, ref)
    state = est.schedule_state_
    np.testing.assert_allclose(state["d0"], ref.s.d0, rtol=RTOL[np.float64])


@pytest.mark.parametrize("mode", ["single", "batch", "storage"])
def test_restart_after_stuck_prefix_matches_reference(mode):
    # a stuck sensor (constant y) for 1000 rows, then the stream: the window
    # medians jump far above their level and phase one restarts
    # (at d = 5 the 1/t phase catches up before a restart is needed: d = 20)
    n = 4000 if mode != "storage" else 6600
    X, y = data("check", n, d=20, tau=0.5, seed=11)
    y[:1000 if mode != "storage" else 600] = y[0]
    kw = dict(tau=0.5, mode=mode, batch_size=40,
              schedule=statistical(eta0_scale=2.0 if mode == "single" else 1.0,
                                   decay=0.5 if mode == "single" else 0.1, restart=4.0))
    est = OnlineQuantileRegressor(**kw)
    ref = Reference(est, X.shape[1])
    # storage mode's window is all data so far: several stuck calls bring its
    # level down, then calls of mostly clean rows jump
    bounds = [0, 200, 1000, 1050, 1900, n] if mode != "storage" else \
        [*range(0, 650, 50), 2600, 4600, n]
    feed_weighted(est, ref, X, y, np.ones(n), bounds)
    assert {"restart", "high window"} <= ref.events, sorted(ref.events)
    assert est.schedule_state_["restarts"] == ref.s.n_restarts >= 1
    # the restart's power iteration for Cu (near-isotropic rows, 30 steps: far
    # from converged) turns summation-order rounding into ~1e-12 differences
    rtol = RTOL[np.float64] if mode == "single" else 1e-10
    assert_matches(est, ref, rtol)
    for key in ("d0", "b0", "cl"):
        np.testing.assert_allclose(est.schedule_state_[key], getattr(ref.s, key), rtol=rtol)


@pytest.mark.parametrize("kind", ["normal", "ties", "equal", "sorted", "reversed", "zeros",
                                  "two_values"])
def test_selection_is_numpy_partition(kind):
    """The windows' order statistics (_order_stats.pxd's select_kth) give
    np.partition's k-th value for every k, and leave the k smallest in front
    (sparsity's second selection reads only those), whatever the ties."""
    from streamfit._kernels import _testing

    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 16, 17, 18, 64, 250, 1001):
        base = {"normal": rng.standard_normal(n),
                "ties": rng.integers(0, 5, n).astype(float),
                "equal": np.full(n, 2.5),
                "sorted": np.sort(rng.standard_normal(n)),
                "reversed": np.sort(rng.standard_normal(n))[::-1].copy(),
                "zeros": np.where(rng.random(n) < 0.7, 0.0, rng.standard_t(1.1, n)),
                "two_values": np.where(rng.random(n) < 0.5, -1.0, 1.0)}[kind]
        want = np.sort(base)
        for k in sorted({0, n // 2, n - 1, n // 3, (9 * n) // 10}):
            a = base.copy()
            assert _testing.select_kth(a, k) == want[k], (n, k)
            np.testing.assert_array_equal(np.sort(a), want)          # a permutation
            assert (a[:k] <= want[k]).all() and (a[k + 1:] >= want[k]).all(), (n, k)
    with pytest.raises(ValueError, match="k must be"):
        _testing.select_kth(np.zeros(3), 3)
