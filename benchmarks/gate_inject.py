"""Test hook of benchmarks/gate.py: a 10% slowdown of one path, to show the
gate catches it. Not part of the package: only gate.py's measuring process
imports this file, and only when STREAMFIT_GATE_INJECT=NAME[:PERCENT] is set
(PERCENT defaults to 10):

    STREAMFIT_GATE_INJECT=rows:0 python benchmarks/gate.py record base/
    STREAMFIT_GATE_INJECT=rows python benchmarks/gate.py check base/   # exit 1, names
                                                                       # quantile-rows-*

Each injection makes one path do PERCENT% more of its own work, in whole
units, on the same objects (so the extra work costs what the path costs):

==========  ========================================================  ==================
name        what is done again                                        meant for
==========  ========================================================  ==================
rows        OnlineQuantileRegressor.fit: one row in ten of the block  quantile-rows-*
            fed twice, evenly spaced through it
trial       PerturbedLeaderPCA.partial_fit: one trial (row) in ten    fpl-trial
            of the block played twice, evenly spaced through it
one-row     partial_fit on one row, learn_one, predict_one: one call  one-row-*
            in ten made twice
wrapper     partial_fit and predict on a block of rows: one call in   wrapper-*
            ten made twice
dask-task   the Dask task (streamfit.dask._stream._fit_blocks): one   dask-task
            task in ten run twice
==========  ========================================================  ==================

("a tenth", "one in ten": at PERCENT = 10.) Units are counted per path over
the measuring process (the measured runs are sized in multiples of ten).
The wrapper that counts them costs a few thousand instructions a call (as
much as a one-row call itself) whatever PERCENT is: record the baseline with
PERCENT = 0 (the wrapper without the extra work) and the check measures the
extra work alone; a repeated call goes through the wrapper too, so the
extra is PERCENT% of the baseline's work. If an injection never fires in a run of a benchmark it is
meant for -- its target was renamed -- the run fails, naming it, rather than
report a slowdown that was never there.
"""
from __future__ import annotations

import functools

_percent = [10]
_fired = {}
_active = []


def _wrap(owner, name, make):
    original = getattr(owner, name)
    setattr(owner, name, functools.wraps(original)(make(original)))


def _units_again(label, units_of):
    """A wrapper maker: after each call, the whole units owed so far
    (PERCENT% of the units of work seen, units_of(args) a call) done again
    by calling the wrapped path again, through this wrapper (the repeats are
    not counted as seen): a repeat costs what a measured call costs in the
    baseline recorded at PERCENT = 0, this wrapper's own work included, so
    the check sees PERCENT% more of the baseline's work per unit."""
    seen = [0, 0]                   # units seen, units done again
    replaying = [False]
    percent = _percent[0]

    def make(original):
        def wrapper(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            if replaying[0]:
                return out
            units = units_of(args)
            if units:
                seen[0] += units
                owed = seen[0] * percent // 100 - seen[1]
                if owed:
                    seen[1] += owed
                    replaying[0] = True
                    try:
                        for _ in range(owed):
                            wrapper(self, *args, **kwargs)
                    finally:
                        replaying[0] = False
                    _fired[label] = _fired.get(label, 0) + owed
            return out
        return wrapper
    return make


def _spread(cls, method, label):
    """cls.method(X, y=None, ...) on a block whose rows are units of work
    (rows of the quantile loop, FPL's trials): row i once, and a second
    time for PERCENT% of the rows, evenly spaced through the block. The
    cost of a row depends on where in the stream it falls (the statistical
    schedule's phases, averaging once it starts; the state an FPL decision
    starts from), so the extra rows are spread through the block rather
    than fed again at its end: the path runs PERCENT% more units of the same
    mix. The block is copied by the same indexing at PERCENT = 0, so that
    the copy's cost is in the baseline too."""
    import numpy as np

    original, percent = getattr(cls, method), _percent[0]

    @functools.wraps(original)
    def wrapper(self, X, *args, **kwargs):
        n = len(X)
        extra = n * percent // 100
        # how many times each row is fed: once, and twice at the midpoints
        # of `extra` equal parts of the block (the extra rows of a longer
        # block include a shorter one's, and those in the part only the
        # longer block has sit at the middle of each tenth: a midpoint rule
        # for a cost that drifts along the stream). np.repeat costs the same
        # per row fed at any PERCENT (a sort would not)
        times = np.ones(n, dtype=np.intp)
        if extra:
            times[((2 * np.arange(extra) + 1) * n) // (2 * extra)] = 2
            _fired[label] = _fired.get(label, 0) + extra
        index = np.repeat(np.arange(n), times)
        if args and args[0] is not None:
            args = (np.asarray(args[0])[index], *args[1:])
        return original(self, np.asarray(X)[index], *args, **kwargs)

    setattr(cls, method, wrapper)


def _rows():
    from streamfit import OnlineQuantileRegressor
    _spread(OnlineQuantileRegressor, "fit", "rows")


def _trial():
    from streamfit import PerturbedLeaderPCA
    _spread(PerturbedLeaderPCA, "partial_fit", "trial")


def _calls(label, one_row):
    """partial_fit (and predict, for blocks) on one row or on blocks: one
    call in ten made twice."""
    from streamfit import OnlineQuantileRegressor

    def units_of(args):
        return int(bool(args) and (len(args[0]) == 1) == one_row)

    make = _units_again(label, units_of)
    _wrap(OnlineQuantileRegressor, "partial_fit", make)
    if one_row:
        for name in ("learn_one", "predict_one"):
            if hasattr(OnlineQuantileRegressor, name):
                _wrap(OnlineQuantileRegressor, name,
                      _units_again(label, lambda args: 1))
    else:
        _wrap(OnlineQuantileRegressor, "predict", make)


def _dask_task():
    from streamfit.dask import _stream
    task = _stream._fit_blocks
    make = _units_again("dask-task", lambda args: 1)
    # a module function, not a method: its first argument plays `self`
    _stream._fit_blocks = functools.wraps(task)(make(task))


# name: (install, the benchmarks whose runs must see it fire: name prefixes)
INJECTIONS = {"rows": (_rows, ("quantile-rows-",)),
              "trial": (_trial, ("fpl-trial",)),
              "one-row": (lambda: _calls("one-row", one_row=True), ("one-row-",)),
              "wrapper": (lambda: _calls("wrapper", one_row=False), ("wrapper-",)),
              "dask-task": (_dask_task, ("dask-task",))}


def apply(spec):
    """Install the injection spec = "NAME[:PERCENT]" in this process."""
    name, _, percent = spec.partition(":")
    if name not in INJECTIONS or not (percent.isdigit() or percent == ""):
        raise ValueError(f"STREAMFIT_GATE_INJECT={spec!r}: not NAME[:PERCENT] with NAME one "
                         f"of {', '.join(INJECTIONS)} and PERCENT a whole number")
    _percent[0] = int(percent or 10)
    INJECTIONS[name][0]()
    if _percent[0]:
        _active.append(name)


def check_fired(benchmark):
    """After a run of `benchmark`: raise if an installed injection meant for
    it never fired (its target was renamed or is no longer called)."""
    silent = [name for name in _active if benchmark.startswith(INJECTIONS[name][1])
              and not _fired.get(name)]
    if silent:
        raise RuntimeError(f"injection {silent[0]} never fired in {benchmark}: its target "
                           f"was not called (renamed?); update benchmarks/gate_inject.py")
