"""Shared pieces of the quantile regression experiments: the paper's model,
streams fed block by block with the error (and the schedule's state) read at
checkpoints, the prequential regret against beta*, and the paper's stepsizes
with oracle constants (for the figures where the paper knows them).
"""
from __future__ import annotations

import numpy as np

from ..schedules import Schedule
from ..simulate import make_linear_stream, noise_mean_abs, noise_sparsity

__all__ = ["paper_stream", "checkpoints", "run_path", "check_loss", "PaperSchedule",
           "PaperBatchSchedule", "noise_facts", "default_decay", "DECAY_PAPER"]

D_PAPER = 100          # Section 3.1: d = 100
T_PAPER = 100_000      # Section 3.1: T = 1e5
DF_PAPER = 1.1         # t_1.1 noise
DECAY_PAPER = 0.5      # Section 3.1: first phase eta_t = (1 - 0.5/d)^t eta_0


def default_decay(mode="single"):
    """The phase-one decay StatisticalSchedule uses when none is given (check
    loss), so that a report states the default it ran, whatever it is."""
    from ..schedules import StatisticalSchedule

    return float(StatisticalSchedule()._kernel_params(None, mode, D_PAPER)["decay"])


def noise_facts(tau=0.5, noise="t", df=DF_PAPER, noise_scale=1.0):
    """(E|xi|, b0 = 1/f(0)) of the noise after its shift to a zero tau-quantile."""
    from scipy import integrate, stats

    dist = stats.t(df) if noise == "t" else stats.norm()
    q = dist.ppf(tau)
    if tau == 0.5:
        gamma = noise_mean_abs(noise, df)
    else:
        gamma = integrate.quad(lambda u: abs(u - q) * dist.pdf(u), -np.inf, np.inf,
                               limit=400)[0]
    return gamma * noise_scale, noise_sparsity(tau, noise, df, noise_scale)


def paper_stream(n, d=D_PAPER, *, tau=0.5, snr=20.0, noise="t", seed=0, noise_scale=1.0):
    """(X, y, beta*) of the paper's model: x ~ N(0, I_d), t_1.1 (or Gaussian)
    noise with zero tau-quantile, ||beta*|| = snr * E|eps| (the paper's SNR
    ||beta*|| / E|xi|), beta_0 = 0 by the estimators' start."""
    return make_linear_stream(n, d, tau=tau, snr=snr, noise=noise, df=DF_PAPER,
                              noise_scale=noise_scale, random_state=seed)


def checkpoints(T, n_points=40, start=10):
    """Roughly log-spaced sample counts from ``start`` to ``T`` (both included)."""
    return np.unique(np.geomspace(start, T, n_points).astype(int))


def check_loss(r, tau):
    return r * (tau - (r < 0))


def _state(est):
    # schedule_state_ is read through .get so that a renamed or missing field
    # shows as NaN in the tables instead of stopping the report
    try:
        st = est.schedule_state_
    except AttributeError:
        return {}
    return st if isinstance(st, dict) else {}


def run_path(est, X, y, beta, points, *, state=False, oracle_loss=None, unit=1):
    """Feed (X, y) to ``est`` in blocks ending at ``points`` (sample counts);
    after each block record the relative error ||coef - beta|| / ||beta||,
    optionally the schedule state, and (with ``oracle_loss``, the cumulative
    check loss of beta*) the prequential regret cumulative_loss_ - oracle.
    A diverged run (FloatingPointError) reads inf from there on.
    ``unit`` rounds the block ends to whole batches."""
    points = [int(p) // unit * unit for p in points]
    norm = np.linalg.norm(beta)
    out = {"t": [], "err": [], "regret": [], "phase": [], "b0": [], "stepsize": [],
           "t_switch": [], "d0": []}
    start, broken = 0, False
    for p in points:
        if p <= start and out["t"]:
            continue
        if not broken:
            try:
                est.partial_fit(X[start:p], y[start:p])
            except FloatingPointError:
                broken = True
        out["t"].append(p)
        if broken:
            for key in ("err", "regret"):
                out[key].append(float("inf"))
        else:
            out["err"].append(float(np.linalg.norm(est.coef_ - beta) / norm))
            if oracle_loss is not None:
                out["regret"].append(float(est.cumulative_loss_ - oracle_loss[p - 1]))
        if state:
            st = {} if broken else _state(est)
            for key in ("phase", "b0", "stepsize", "t_switch", "d0"):
                out[key].append(float(st.get(key, np.nan)))
        start = p
    return {k: v for k, v in out.items() if v}


class PaperSchedule(Schedule):
    """The paper's single-sample stepsizes with oracle constants (Theorem 1):
    eta_t = eta0 (1 - decay / d)^t for t < t1, then
    (b0 / Cl) Ca / (t - t1 + 1 + Cb d) (the "+ 1" so that Cb = 0, one of
    the paper's Figure 8 cases, starts at a finite step). ``t1=None`` is the
    continuity rule: phase one ends when its stepsize falls to phase two's
    first one. ``t1=0`` starts in phase two (Remark 3)."""

    def __init__(self, eta0=1.0, decay=0.5, d=D_PAPER, Ca=20.0, Cb=30.0, b0=1.0, Cl=1.0,
                 t1=None):
        self.eta0 = eta0
        self.decay = decay
        self.d = d
        self.Ca = Ca
        self.Cb = Cb
        self.b0 = b0
        self.Cl = Cl
        self.t1 = t1

    def switch_time(self):
        if self.t1 is not None:
            return int(self.t1)
        first = self.b0 / self.Cl * self.Ca / (1.0 + self.Cb * self.d)
        if first >= self.eta0:
            return 0
        return int(np.ceil(np.log(first / self.eta0) / np.log1p(-self.decay / self.d)))

    def stepsizes(self, start, count):
        t = np.arange(start, start + count, dtype=float)
        t1 = self.switch_time()
        out = self.eta0 * np.exp(t * np.log1p(-self.decay / self.d))
        late = t >= t1
        out[late] = self.b0 / self.Cl * self.Ca / (t[late] - t1 + 1.0 + self.Cb * self.d)
        return out


class PaperBatchSchedule(Schedule):
    """Theorem 5's three batch phases with oracle constants (Cl = Cu = 1, the
    true b0 = 1/f(0), D0 = ||beta_0 - beta*||), one stepsize per batch update:
    geometric eta0 (1 - decay)^t until t1, the constant ``eta_const`` for
    ``n2`` updates (Theorem 5: O(log((n/d) (gamma/b0))) of them), then
    (b0 / Cl) Ca / (t - t2 + Cb). ``t1=None``: when the geometric step falls
    to the constant (continuity). An experiment may set ``t1`` and ``t2``
    mid-stream (oracle switches), since the estimator asks for each batch's
    stepsize when the batch arrives."""

    def __init__(self, eta0=1.0, decay=0.1, eta_const=1.0, n2=5, Ca=20.0, Cb=30.0, b0=1.0,
                 Cl=1.0, t1=None, t2=None):
        self.eta0 = eta0
        self.decay = decay
        self.eta_const = eta_const
        self.n2 = n2
        self.Ca = Ca
        self.Cb = Cb
        self.b0 = b0
        self.Cl = Cl
        self.t1 = t1
        self.t2 = t2

    def continuity_time(self):
        if self.eta_const >= self.eta0:
            return 0
        return int(np.ceil(np.log(self.eta_const / self.eta0) / np.log1p(-self.decay)))

    def switch_times(self):
        t1 = self.continuity_time()
        if self.t1 is not None:
            t1 = min(int(self.t1), t1)
        return t1, t1 + int(self.n2) if self.t2 is None else max(int(self.t2), t1)

    def stepsizes(self, start, count):
        t = np.arange(start, start + count, dtype=float)
        t1, t2 = self.switch_times()
        out = self.eta0 * np.exp(t * np.log1p(-self.decay))
        out[(t >= t1) & (t < t2)] = self.eta_const
        late = t >= t2
        out[late] = self.b0 / self.Cl * self.Ca / (t[late] - t2 + self.Cb)
        return out
