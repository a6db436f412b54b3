"""Edited records and edited pickles, run one by one in a child process by :func:`_isolated.run_cases` (this module is imported there
by name: no relative imports), and the rules the tests judge them by.

A case is a JSON dict. Its function builds a fitted estimator or kernel object
of a named *family* (fixed seeds, small sizes), edits what a user could edit
(a record field, an array of the pickled state, an integer attribute, bytes of
the pickle), and then tries what a user would do next: unpickle it, and on a
fresh copy each of ``partial_fit``, ``predict``/``transform`` and
``pickle.dumps``. It returns what each step did; a step that returned is
checked for sanity (finite, right shapes, orthonormal components, counters that
moved by the rows fed), so that a silent use of a bad value shows up as
``sane: False``.
"""
import functools
import io
import math
import pickle

import numpy as np

from streamfit import (DropoutPCA, FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA,
                       OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                       PerturbedLeaderPCA)
from streamfit import kernels as K
from streamfit._kernels import _quantile as _k
from streamfit.lowrank import OnlineLowRankQuantileRegressor
from streamfit.schedules import ConstantSchedule
from streamfit.simulate import make_linear_stream, make_spiked_stream

# -- values ----------------------------------------------------------------------------

VALUES = {"-1e6": -1e6, "-1": -1.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf,
          "1e300": 1e300, "0.5": 0.5, "1e12": 1e12, "2^53+2": 2.0 ** 53 + 2,
          "0": 0.0, "1": 1.0, "2": 2.0, "3": 3.0}

# exceptions that say what is wrong (NotFittedError and numpy's AxisError are
# ValueErrors); anything else from a library call -- IndexError, KeyError,
# AttributeError, MemoryError, ZeroDivisionError, SystemError -- is not clear
CLEAR = ("ValueError", "TypeError", "RuntimeError", "FloatingPointError")


def clear(outcome):
    return outcome.get("status") == "raised" and any(c in outcome["mro"] for c in CLEAR)


def _raised(exc):
    return {"status": "raised", "type": type(exc).__name__,
            "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)[:1000]}


# -- the schedule's records ------------------------------------------------------------
#
# Which values of each field must be refused (a ValueError naming the field),
# from what the fields mean (csrc/_qr_schedule.pxd): everything else may be
# refused or used, but never crash, hang or be used as a negative index.

STATE_SIGNED = {"intercept", "intercept_avg", "intercept_pi", "intercept_pi2", "pi_avg"}
STATE_INTEGER = {"n_updates", "n_seen", "phase", "fill", "avg_on", "n_flat", "n_high",
                 "n_restarts", "n_drift"}
# codes and indices: a value far out of their range is refused too
STATE_RANGE = {"phase": (0, 3), "avg_on": (0, 1), "fill": (0, 1e9)}
LINEAR_FIELDS = ("intercept", "intercept_avg", "loss", "n_seen", "n_updates", "n_avg")

PARAM_CODES = {"kind": (0, 3), "mode": (0, 2), "loss": (0, 1), "average": (0, 1),
               "fit_intercept": (0, 1), "start": (1, 2)}
PARAM_COUNTS = {"n_warmup", "window", "patience"}       # integers >= 1
PARAM_NAN_OK = {"eta0", "b0", "t_switch", "Cb"}         # NaN: estimate from the stream
PARAM_OPEN01 = {"tau", "plateau"}
PARAM_HALF_OPEN01 = {"decay", "avg_power", "ema"}
# a window or warm-up the residual window cannot hold is refused, not allocated
PARAM_SIZES = {"n_warmup", "window"}


def state_must_refuse(field, value):
    v = VALUES[value]
    if not math.isfinite(v):
        return True
    if v < 0 and field not in STATE_SIGNED and not (field == "k_pow" and v == -1):
        return True
    if field in STATE_INTEGER and v != int(v):
        return True
    lo_hi = STATE_RANGE.get(field)
    return lo_hi is not None and not lo_hi[0] <= v <= lo_hi[1]


def params_must_refuse(field, value):
    v = VALUES[value]
    if math.isnan(v):
        return field not in PARAM_NAN_OK
    if math.isinf(v) or v < 0:
        return True
    if field in PARAM_CODES:
        lo, hi = PARAM_CODES[field]
        return v != int(v) or not lo <= v <= hi
    if field in PARAM_COUNTS:
        return v != int(v) or v < 1 or (field in PARAM_SIZES and v >= 1e12)
    if field in PARAM_OPEN01:
        return not 0 < v < 1
    if field in PARAM_HALF_OPEN01:
        return not 0 < v <= 1
    return False


def record_values(kind, field):
    """The values a field is set to: the issue's (-1e6, -1, NaN, inf, 1e300),
    -inf, a fraction, huge counts, and for codes every other valid code."""
    vals = ["-1e6", "-1", "nan", "inf", "-inf", "1e300", "0.5", "1e12", "2^53+2"]
    if kind == "params" and field in PARAM_CODES:
        lo, hi = PARAM_CODES[field]
        vals += [str(c) for c in range(lo, hi + 1)]
    if kind == "state" and field in STATE_RANGE and field != "fill":
        lo, hi = STATE_RANGE[field]
        vals += [str(c) for c in range(lo, hi + 1)]
    return vals


# -- families: a fitted object, the data to continue with, what is sane -----------------

QUANTILE = {
    "q-single": lambda: OnlineQuantileRegressor(tau=0.3),
    "q-batch": lambda: OnlineQuantileRegressor(mode="batch", batch_size=8),
    "q-storage": lambda: OnlineQuantileRegressor(mode="storage", batch_size=50),
    "q-multi": lambda: OnlineQuantileRegressor(tau=[0.2, 0.5, 0.8]),
    "q-inference": lambda: OnlineQuantileRegressor(average=True, inference=True),
    "q-scaled": lambda: OnlineQuantileRegressor(scale="online"),
    "ols": lambda: OnlineLeastSquaresRegressor(average=True),
}
PCA = {
    **{f"fpl-{noise}-{solver}": (lambda noise=noise, solver=solver: PerturbedLeaderPCA(
        2, noise=noise, solver=solver, random_state=0))
       for noise in ("fixed", "random_walk", "independent") for solver in ("exact", "krylov")},
    "ftl": lambda: FollowTheLeaderPCA(2),
    "meg": lambda: MatrixEGPCA(2, random_state=0),
    "gd": lambda: MatrixGDPCA(2, random_state=0),
    "dropout": lambda: DropoutPCA(2, random_state=0),
    "dropout-fresh": lambda: DropoutPCA(2, resample="fresh", random_state=0),
}
KERNELS = ("topk", "linear-sgd", "linear-sgd-statistical", "linear-sgd-batch",
           "interval-state")
FAMILIES = (*QUANTILE, "lowrank", *PCA, *KERNELS)

N_PCA = 16          # n_features of the PCA streams (Krylov needs n >= 2 b = 14)


@functools.lru_cache(maxsize=None)
def data(family):
    """(X, y) of the fit and (X2, y2) to continue with (y None for PCA)."""
    if family == "lowrank":
        rng = np.random.default_rng(3)
        X = rng.standard_normal((260, 5, 6))
        y = X[:, 0, 0] - 2 * X[:, 1, 2] + 0.1 * rng.standard_normal(260)
        return X[:200], y[:200], X[200:], y[200:]
    if family in PCA or family == "topk":
        X = make_spiked_stream(48, N_PCA, n_spikes=2, random_state=4)
        return X[:40], None, X[40:], None
    X, y, _ = make_linear_stream(361, 4, tau=0.3, random_state=5)
    # 301 rows: batch mode keeps 5 rows pending, storage has spare room
    return X[:301], y[:301], X[301:], y[301:]


def build(family):
    """A fitted object of the family (fresh each call)."""
    X, y, _, _ = data(family)
    if family in QUANTILE:
        return QUANTILE[family]().fit(X, y)
    if family == "lowrank":
        return OnlineLowRankQuantileRegressor(rank=2).fit(X, y)
    if family in PCA:
        return PCA[family]().fit(X)
    if family == "topk":
        topk = K.TopK(N_PCA, 2)
        topk.update(rows=X)
        topk.solve()
        topk.update(vector=X[0], scale=0.5)
        topk.solve(1e-8)
        return topk
    state = KERNEL_STATES[family]()
    state.learn(X, y)
    return state


KERNEL_STATES = {
    "linear-sgd": lambda: K.LinearSGD(4, tau=[0.3, 0.7], schedule=ConstantSchedule(0.01),
                                      average=True),
    "linear-sgd-statistical": lambda: K.LinearSGD(4, tau=0.3, average=True, inference=True,
                                                  drift="restart"),
    # 301 rows in batches of 7: rows pending
    "linear-sgd-batch": lambda: K.LinearSGD(4, tau=0.3, mode="batch", batch_size=7,
                                            average=True),
    "interval-state": lambda: K.IntervalState(4, alpha=0.2),
}


@functools.lru_cache(maxsize=None)
def base_pickle(family):
    return pickle.dumps(build(family))


def _finite(a):
    a = np.asarray(a)
    return a.dtype.kind in "biuf" and bool(np.isfinite(a).all())


def sane_after_fit(family, est, before):
    """(sane, why) for an object that took the continuation data."""
    _, _, X2, y2 = data(family)
    if family in PCA:
        n, k = est.n_features_in_, est.n_components_
        V = est.components_
        if not (1 <= k <= n == N_PCA and V.shape == (k, n) and _finite(V)):
            return False, f"components_ of shape {V.shape} (n_components_ {k}, n {n})"
        if not np.allclose(V @ V.T, np.eye(k), atol=1e-6):
            return False, "components_ not orthonormal"
        if est.n_trials_ != before + len(X2) or not _finite(est.cumulative_gain_):
            return False, f"n_trials_ {est.n_trials_} after {before} + {len(X2)}"
        return True, ""
    if family == "topk":
        vals, vecs = est.values, est.vectors
        top = np.linalg.eigvalsh(est.matrix)[::-1][:est.k]
        if not (_finite(vals) and vecs.shape == (est.k, est.n) and _finite(vecs)):
            return False, "values or vectors not finite"
        if not np.allclose(vecs @ vecs.T, np.eye(est.k), atol=1e-6):
            return False, "vectors not orthonormal"
        if not np.allclose(vals, top, rtol=1e-6, atol=1e-9 * max(1.0, abs(top).max())):
            return False, f"values {vals} are not the top eigenvalues {top}"
        return True, ""
    if family in KERNEL_STATES:
        seen = est.n_samples_seen
        if seen != before + len(y2) or not _finite(est.coef):
            return False, f"n_samples_seen {seen} after {before} + {len(y2)}"
        return True, ""
    seen = est.n_samples_seen_
    coef = est.coef_
    intercept = 0.0 if family == "lowrank" else est.intercept_
    if seen != before + len(y2) or not _finite(coef) or not _finite(intercept):
        return False, f"n_samples_seen_ {seen} after {before} + {len(y2)}, coef_ {coef}"
    return True, ""


def sane_prediction(family, est, out):
    _, _, X2, _ = data(family)
    m = len(X2)
    if family in PCA:
        want = (m, est.n_components_)
        ok = out.shape == want and 1 <= est.n_components_ <= N_PCA and _finite(out)
        ok = ok and np.allclose(out, X2 @ est.components_.T)
        return ok, f"transform gave shape {out.shape}, expected {want}"
    if family == "q-multi":
        return out.shape == (m, 3) and _finite(out), f"predict gave shape {out.shape}"
    return out.shape == (m,) and _finite(out), f"predict gave shape {out.shape}"


def _continue(family, obj):
    """The continuation call of each family; returns what sane_after_fit needs."""
    _, _, X2, y2 = data(family)
    if family in PCA:
        before = obj.n_trials_
        obj.partial_fit(X2)
        return before
    if family == "topk":
        obj.update(rows=X2[:3])
        obj.solve(1e-8)
        return None
    if family in KERNEL_STATES:
        before = obj.n_samples_seen
        obj.learn(X2, y2)
        return before
    before = obj.n_samples_seen_
    obj.partial_fit(X2, y2)
    return before


def _step(family, name, blob):
    """Load a fresh copy and run one of the next calls on it."""
    obj = pickle.loads(blob)
    _, _, X2, y2 = data(family)
    if name == "continue":
        before = _continue(family, obj)
        return sane_after_fit(family, obj, before)
    if name == "dumps":
        again = pickle.loads(pickle.dumps(obj))
        return type(again) is type(obj), "re-pickled as another type"
    if name == "predict":
        if family in PCA:
            return sane_prediction(family, obj, obj.transform(X2))
        return sane_prediction(family, obj, np.asarray(obj.predict(X2)))
    if name == "attributes":
        if family in PCA:
            vals = [obj.n_trials_, obj.cumulative_gain_, obj.regret_]
            ok = obj.n_trials_ >= 0 and _finite(vals[1:])
            return ok, f"n_trials_, cumulative_gain_, regret_ = {vals}"
        if family == "topk":
            return _finite(obj.matrix), "matrix not finite"
        if family == "interval-state":
            vals = [obj.n_samples_seen, obj.coverage, obj.n_updates]
            return (min(vals) >= 0 and vals[1] <= 1 and _finite(obj.coef) and
                    _finite(obj.intercept)), f"{vals}"
        if family in KERNEL_STATES:
            vals = [obj.n_samples_seen, obj.n_updates, obj.cumulative_loss]
            sched = obj.schedule_state
            return (min(np.min(v) for v in vals) >= 0 and _finite(obj.coef) and
                    _finite(obj.intercept) and sched is not None), f"{vals}"
        vals = [obj.n_samples_seen_, obj.n_updates_, obj.cumulative_loss_]
        obj.schedule_state_
        ok = min(vals) >= 0 and _finite(obj.coef_) and _finite(vals)
        if family == "lowrank":
            ok = ok and _finite(obj.singular_values_) and min(obj.singular_values_) >= 0
        else:
            ok = ok and _finite(obj.intercept_)
        return ok, f"n_samples_seen_, n_updates_, cumulative_loss_ = {vals}, or coef_ " \
                   f"not finite"
    raise ValueError(name)


STEPS = {"quantile": ("continue", "predict", "dumps", "attributes"),
         "pca": ("continue", "predict", "dumps", "attributes"),
         "kernel": ("continue", "dumps", "attributes")}


def steps_of(family):
    if family in PCA:
        return STEPS["pca"]
    if family in KERNELS:
        return STEPS["kernel"]
    return STEPS["quantile"]


def try_blob(family, blob):
    """Unpickle ``blob``; then each next call on a fresh copy. Returns
    {"load": outcome, "steps": {name: outcome}}, outcome a dict with
    ``status`` "ok" (and ``sane``, ``why``) or "raised"."""
    try:
        loaded = pickle.loads(blob)
    except Exception as exc:
        return {"load": _raised(exc), "steps": {}}
    if type(loaded) is not type(pickle.loads(base_pickle(family))):
        return {"load": {"status": "ok"}, "steps": {}, "other_type": type(loaded).__name__}
    steps = {}
    for name in steps_of(family):
        try:
            sane, why = _step(family, name, blob)
            steps[name] = {"status": "ok", "sane": bool(sane), "why": "" if sane else why}
        except Exception as exc:
            steps[name] = _raised(exc)
    return {"load": {"status": "ok"}, "steps": steps}


# -- editing a pickled state ---------------------------------------------------------------

STATE_OBJECTS = (K.LinearSGD, K.IntervalState)


class Reduced(dict):
    """A compiled state object's state dict (what its ``__reduce__`` hands to
    its rebuild function), to edit in place; its schedule records viewed with
    their fields named (``STATE_DTYPE``, shape (m, 1)), so that a field can be
    set as in a record."""

    def __init__(self, state_object):
        rebuild, (state,) = type(state_object).__reduce__(state_object)
        super().__init__(_named_records(state))
        self.rebuild = rebuild

    def payload(self):
        return _plain_records(dict(self))


def _named_records(d):
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            value = _named_records(value)
        elif key == "records" and isinstance(value, np.ndarray):
            value = np.ascontiguousarray(value).view(_k.STATE_DTYPE)
        out[key] = value
    return out


def _plain_records(d):
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            value = _plain_records(value)
        elif isinstance(value, np.ndarray) and value.dtype == _k.STATE_DTYPE:
            # (edited or moved) records back to the float64 rows they are stored as
            rows = np.ascontiguousarray(value).view(np.float64)
            value = rows.reshape(value.shape[0], -1) if value.size else \
                np.zeros((0, len(_k.STATE_FIELDS)))
        out[key] = value
    return out


def _payload(value):
    return value.payload() if isinstance(value, Reduced) else value


def _dumps_as(obj, reduced):
    """The pickle of ``obj`` with its reduce tuple replaced by ``reduced`` (an
    edited state): what pickle.dumps would write had the state been so. A
    state object's state dict (a Reduced) is pickled as its rebuild call."""
    buf = io.BytesIO()

    class Pickler(pickle.Pickler):
        def reducer_override(self, o):
            if o is obj:
                return (reduced[0], tuple(_payload(a) for a in reduced[1]), *reduced[2:])
            if isinstance(o, Reduced):
                return o.rebuild, (o.payload(),)
            return NotImplemented

    Pickler(buf, protocol=pickle.DEFAULT_PROTOCOL).dump(obj)
    return buf.getvalue()


def _state_of(family):
    """A fresh unpickled copy, its reduce tuple (a list) and its state (a
    mutable dict) whose nested slot objects (_LowRankFit) are plain objects
    to edit in place, and whose compiled state objects (LinearSGD,
    IntervalState) are their state dicts (Reduced)."""
    obj = pickle.loads(base_pickle(family))
    if isinstance(obj, STATE_OBJECTS):
        state = Reduced(obj)
        reduced = [state.rebuild, (state,)]
        return obj, reduced, state
    reduced = list(obj.__reduce_ex__(pickle.DEFAULT_PROTOCOL))
    state = reduced[2]
    if isinstance(state, tuple):        # (dict, slots) of a slots object
        state = state[0]
    state = {key: Reduced(value) if isinstance(value, STATE_OBJECTS) else value
             for key, value in state.items()}
    return obj, reduced, state


def _container(state, path):
    """(object, key) of the last step of path: dict keys, then slot names."""
    cur = state
    for key in path[:-1]:
        cur = cur[key] if isinstance(cur, dict) else getattr(cur, key)
    return cur, path[-1]


def _get(cur, key):
    return cur[key] if isinstance(cur, dict) else getattr(cur, key)


def _set(cur, key, value):
    if isinstance(cur, dict):
        cur[key] = value
    else:
        object.__setattr__(cur, key, value)


def _slots(obj):
    names = []
    for cls in type(obj).__mro__:
        names += [s for s in getattr(cls, "__slots__", ()) if s not in names]
    return names


def _leaf(value):
    return isinstance(value, (np.ndarray, int, float, np.integer, np.floating)) and \
        not isinstance(value, bool)


def walk(family):
    """(path, value) for every editable leaf of the family's pickled state:
    arrays (records included), ints and floats, into slot objects one level,
    into state objects' state dicts (their settings, their quantile pair's)
    at every depth."""
    _, _, state = _state_of(family)
    out = []

    def dict_leaves(prefix, d):
        for key, value in d.items():
            if _leaf(value):
                out.append((prefix + [key], value))
            elif isinstance(value, dict):
                dict_leaves(prefix + [key], value)

    if isinstance(state, Reduced):
        dict_leaves([], state)
        return out
    for key, value in state.items():
        if _leaf(value):
            out.append(([key], value))
        elif isinstance(value, Reduced):
            dict_leaves([key], value)
        elif hasattr(type(value), "__slots__") and not isinstance(value, np.random.Generator):
            for slot in _slots(value):
                v = getattr(value, slot, None)
                if isinstance(v, (np.ndarray, int, float, np.integer, np.floating)) and \
                        not isinstance(v, bool):
                    out.append(([key, slot], v))
    return out


ARRAY_OPS = ["fill:nan", "fill:inf", "fill:1e300", "fill:-1", "first:nan", "first:-1e6",
             "rows:+1", "rows:-1", "rows:0", "flatten", "add-axis", "transpose", "fortran",
             "dtype:float32", "dtype:int64", "dtype:object", "dtype:complex128",
             "dtype:bytes", "none", "scalar"]
INT_OPS = ["int:-1", "int:0", "int:2^62", "int:1e300", "int:nan", "int:str", "int:none",
           "int:+1"]
FLOAT_OPS = ["float:nan", "float:inf", "float:-1", "float:1e300"]


def record_ops(rec):
    """Per field of a record (nested records flattened with a dot): the
    values it is set to."""
    ops = []

    def fields(dtype, prefix):
        for name in dtype.names:
            sub = dtype.fields[name][0]
            if sub.names is not None:
                fields(sub, prefix + name + ".")
            elif sub.kind == "f":
                ops.extend(f"field:{prefix}{name}={v}" for v in ("-1", "-1e6", "nan", "inf",
                                                                 "1e300"))
            else:
                ops.extend(f"field:{prefix}{name}={v}" for v in ("-1", "-1000000",
                                                                 str(2 ** 62)))
    fields(rec.dtype, "")
    return ops + ["rows:+1", "rows:0", "record:plain", "record:other"]


def structured_cases(family, record_fields=None):
    """Every structured edit of the family's pickled state (the fields of the
    records only if ``record_fields``: by default the PCA and top-k records'
    and the linear state objects' schedule records; an estimator's schedule
    records are the same records as those of the state object it holds)."""
    if record_fields is None:
        record_fields = family in PCA or family == "topk" or family in KERNEL_STATES
    leaves = walk(family)
    cases = []
    arrays = [p for p, v in leaves if isinstance(v, np.ndarray)]
    for path, value in leaves:
        if isinstance(value, np.ndarray):
            ops = record_ops(value) if value.dtype.names else ARRAY_OPS
            if value.dtype.names and not record_fields:
                ops = [op for op in ops if not op.startswith("field:")]
        elif isinstance(value, (int, np.integer)):
            ops = INT_OPS
        else:
            ops = FLOAT_OPS
        cases += [{"family": family, "path": path, "op": op} for op in ops]
    # every pair of arrays of one object swapped
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a[:-1] == b[:-1]:
                cases.append({"family": family, "path": a, "op": "swap", "with": b})
    return cases


def _edited_array(a, op):
    kind, _, arg = op.partition(":")
    if kind == "fill":
        b = np.array(a, copy=True)
        b[...] = VALUES.get(arg, float(arg)) if b.dtype.kind in "fc" else -1
        return b
    if kind == "first":
        b = np.array(a, copy=True)
        if b.size:
            b.flat[0] = VALUES[arg] if b.dtype.kind in "fc" else -1
        return b
    if kind == "rows":
        if a.ndim == 0:
            return a[None]
        if arg == "+1":
            return np.concatenate([a, a[-1:] if len(a) else np.zeros((1,) + a.shape[1:],
                                                                     a.dtype)])
        return a[:max(0, len(a) - 1)] if arg == "-1" else a[:0]
    if kind == "flatten":
        return a.ravel().copy()
    if kind == "add-axis":
        return a[None].copy()
    if kind == "transpose":
        return np.ascontiguousarray(a.T) if a.ndim > 1 else a[:, None].copy()
    if kind == "fortran":
        return np.asfortranarray(a if a.ndim > 1 else a[:, None])
    if kind == "dtype":
        if arg == "bytes":
            return np.frombuffer(a.tobytes(), dtype=np.uint8).copy()
        return a.astype(arg)
    if kind == "none":
        return None
    if kind == "scalar":
        return 1.0
    raise ValueError(op)


def _edited_record(rec, op):
    kind, _, arg = op.partition(":")
    if kind == "field":
        name, _, val = arg.partition("=")
        out = np.array(rec, copy=True)
        cur = out
        parts = name.split(".")
        for p in parts[:-1]:
            cur = cur[p]
        cur[parts[-1]] = VALUES[val] if val in VALUES else int(val)
        return out
    if kind == "record":
        if arg == "plain":       # the same bytes, read as float64
            return np.frombuffer(rec.tobytes(), dtype=np.float64).copy()
        # a record of another layout: one field fewer
        names = rec.dtype.names[:-1]
        return np.zeros(rec.shape, dtype=[(n, rec.dtype.fields[n][0]) for n in names])
    return _edited_array(rec, op)


def _edited_scalar(value, op):
    arg = op.partition(":")[2]
    return {"-1": -1, "0": 0, "2^62": 2 ** 62, "1e300": 1e300, "nan": math.nan,
            "str": str(value), "none": None, "+1": value + 1 if not isinstance(value, str)
            else value, "inf": math.inf}[arg] if op.startswith("int:") else \
        {"nan": math.nan, "inf": math.inf, "-1": -1.0, "1e300": 1e300}[arg]


def edited_pickle(case):
    obj, reduced, state = _state_of(case["family"])
    cur, key = _container(state, case["path"])
    value = _get(cur, key)
    op = case["op"]
    if op == "swap":
        other_cur, other_key = _container(state, case["with"])
        other = _get(other_cur, other_key)
        _set(cur, key, other)
        _set(other_cur, other_key, value)
    elif isinstance(value, np.ndarray):
        _set(cur, key, _edited_record(value, op) if value.dtype.names else
             _edited_array(value, op))
    else:
        _set(cur, key, _edited_scalar(value, op))
    if isinstance(state, Reduced):
        reduced[1] = (state,)
    elif isinstance(reduced[2], tuple):
        reduced[2] = (state, reduced[2][1])
    else:
        reduced[2] = state
    return _dumps_as(obj, reduced)


def structured(case):
    """Case function: a structured edit of a pickled state."""
    return try_blob(case["family"], edited_pickle(case))


def mutated(case):
    """Case function: bytes of the pickle changed (``case["seed"]`` picks
    how many, where and to what)."""
    blob = bytearray(base_pickle(case["family"]))
    rng = np.random.default_rng(case["seed"])
    for _ in range(int(rng.integers(1, 4))):
        at = int(rng.integers(0, len(blob)))
        blob[at] = int(rng.integers(0, 256)) if rng.random() < 0.7 else blob[at] ^ 0x80
    return try_blob(case["family"], bytes(blob))


def truncated(case):
    """Case function: every prefix of the pickle given must be refused."""
    blob = base_pickle(case["family"])
    loaded = []
    for cut in range(0, len(blob), max(1, case.get("stride", 1))):
        try:
            pickle.loads(blob[:cut])
            loaded.append(cut)
        except Exception:
            pass
    return {"length": len(blob), "loaded": loaded[:20]}


def judge_steps(result, must_refuse, field=None):
    """The failures (strings) of a record or pickle case's result: every step
    either raised a clear exception or returned sanely; when ``must_refuse``,
    the first step (loading, or the first call) raised a ValueError/TypeError
    naming ``field`` (if given)."""
    bad = []
    steps = [(k, v) for k, v in result.items() if k != "steps"] + \
        list(result.get("steps", {}).items())
    for name, outcome in steps:
        if outcome["status"] == "raised" and not clear(outcome):
            bad.append(f"{name}: unclear {outcome['type']}: {outcome['message'][:200]}")
        elif outcome["status"] == "ok" and outcome.get("sane") is False:
            bad.append(f"{name}: silently used: {outcome['why'][:200]}")
    if must_refuse:
        first = steps[0][1] if steps else {"status": "none"}
        leaf = field.split(".")[-1] if field else None
        if first["status"] != "raised":
            bad.append(f"accepted by {steps[0][0]} (must be refused)")
        elif not ("ValueError" in first["mro"] or "TypeError" in first["mro"]):
            bad.append(f"{steps[0][0]} raised {first['type']}, not a ValueError/TypeError")
        elif leaf is not None and not _names(first["message"], leaf):
            bad.append(f"{steps[0][0]}'s error does not name {leaf!r}: "
                       f"{first['message'][:200]}")
    return bad


def _names(message, field):
    import re
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(field)}(?![A-Za-z0-9_])", message) \
        is not None
