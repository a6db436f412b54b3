"""Several quantiles from one pass: the state of ``OnlineQuantileRegressor``
with a list of taus, and how a call advances it (``_quantile.sgd_multi``:
the row is read once, each quantile has its own iterate, average, schedule
state and residual window).

Like :class:`~streamfit.quantile._state.Work`, a call works on a copy and the
estimator publishes it with one assignment (on success, or after the whole
rows before an interruption).
"""
from __future__ import annotations

import numpy as np

from .._errors import OK
from .._kernels import _quantile as _k
from ._state import (Outcome, Plan, _bad_row, check_layout, check_loaded, track_inference,
                     track_plug_in)

__all__ = ["MultiWork", "advance_multi", "NONCROSSING"]

NONCROSSING = {"rearrange": _k.NONCROSS_NONE, "project": _k.NONCROSS_PROJECT}
# The state records seen as opaque bytes: NumPy copies a structured array field
# by field (~13 us for three records), its bytes in one memcpy (~0.6 us).
_RAW = np.dtype((np.void, _k.STATE_DTYPE.itemsize))


class MultiWork:
    """The learnt state of m quantiles: ``w``/``wbar`` (m, d), ``state`` and
    ``params`` (m,) records, ``window`` (m, capacity), feature names.
    ``pending_X`` is always empty (single mode: no rows wait); ``plug_in``
    (m, 2 d) the plug-in intercepts' running means (None: not kept, or kept
    in the tails of ``rs``); ``rs`` (m, ``rs_length(d + fit_intercept)``) the
    random-scaling sums of each quantile's average (None: not kept)."""

    __slots__ = ("w", "wbar", "state", "params", "window", "names", "pending_X", "rs",
                 "plug_in", "plan")

    def __setstate__(self, state):
        items = state[1] if isinstance(state, tuple) else state
        self.plug_in = self.rs = None     # pickles from before the plug-in intercepts
        if not set(self.__slots__) - {"plug_in", "rs", "plan"} <= set(items) <= \
                set(self.__slots__):
            raise ValueError(f"the loaded state has fields {sorted(items)}, expected "
                             f"{sorted(self.__slots__)} (a corrupted or foreign pickle?)")
        for key, value in items.items():
            setattr(self, key, value)
        check_loaded(self)          # (and the plan, read off the params)

    @classmethod
    def fresh(cls, d, params, coef_init=None, intercept_init=None):
        m = params.shape[0]
        work = cls()
        work.w = np.zeros((m, d)) if coef_init is None else coef_init.copy()
        work.wbar = work.w.copy()
        work.state = np.zeros(m, _k.STATE_DTYPE)
        if intercept_init is not None:
            work.state["intercept"] = intercept_init
            work.state["intercept_avg"] = intercept_init
        work.params, work.plan = params, Plan(params)
        need = int(max(params["window"].max(), params["n_warmup"].max(), 1)) + 1
        work.window = np.zeros((m, need))
        work.names = None
        work.pending_X = np.zeros((0, d))
        work.rs = None
        work.plug_in = None
        return work

    track_inference = track_inference      # (shared with MultiWork / Work)
    track_plug_in = track_plug_in

    def copy(self, spare=None):
        """A working copy (the published state never changes under a call).
        ``spare``: a writable state array of the same shape to copy the
        records into (allocating one costs over a microsecond)."""
        check_layout(self.state)
        work = MultiWork()
        if spare is not None and spare.shape == self.state.shape and spare.flags.writeable:
            np.copyto(spare.view(_RAW), self.state.view(_RAW))
            state = spare
        else:
            state = self.state.view(_RAW).copy().view(_k.STATE_DTYPE)
        work.w, work.wbar, work.state = self.w.copy(), self.wbar.copy(), state
        work.params, work.plan = self.params, self.plan
        work.names, work.pending_X = self.names, self.pending_X
        work.rs = None if self.rs is None else self.rs.copy()
        work.window = self.window.copy()
        work.plug_in = None if self.plug_in is None else self.plug_in.copy()
        return work

    def follow(self, params):
        """New schedule constants mid-stream: a larger window grows the buffers
        (what they hold is kept)."""
        need = int(max(params["window"].max(), params["n_warmup"].max(),
                       self.state["fill"].max(), 1)) + 1
        if self.window.shape[1] < need:
            grown = np.zeros((self.window.shape[0], need))
            grown[:, :self.window.shape[1]] = self.window
            self.window = grown
        self.params, self.plan = params, Plan(params)


def advance_multi(work, X, y, sw, noncrossing, preds=None):
    """One kernel call over (X, y, sw); mutates ``work``; an Outcome.
    ``preds``: None, or an (n, m) array that receives each row's m
    predictions under the iterates before its update (prequential)."""
    work.track_plug_in()
    code, done, exc, row = _k.sgd_multi(X, y, np.zeros(0) if sw is None else sw, work.w,
                                        work.wbar, work.state, work.params, work.window,
                                        NONCROSSING[noncrossing], work.plug_in, work.rs,
                                        preds)
    if code == OK:
        return Outcome(done)
    return Outcome(done, code, exc, _bad_row(row, X, y, sw, 0))


def rearrange(pred):
    """Sort the m predicted quantiles of each row (Chernozhukov, Fernandez-Val &
    Galichon, Econometrica 2010: the sorted curves are monotone and never
    farther from the true quantile curves, nor of larger check loss summed
    over the taus)."""
    return np.sort(pred, axis=1)
