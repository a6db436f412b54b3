"""Cases of test_review_faults.py that may crash the interpreter, run in
child processes by _isolated.run_cases (imported by name: no relative
imports here)."""
import pickle

import numpy as np
import scipy.sparse as sp


def _linear(kind):
    from streamfit import OnlineQuantileRegressor
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5))
    y = X @ np.arange(1.0, 6.0) + rng.standard_normal(60)
    if kind == "hashed":
        est = OnlineQuantileRegressor(tau=0.3, hashing=16)
        for i in range(60):
            est.learn_one({f"f{j}": float(X[i, j]) for j in range(5)}, float(y[i]))
        return est._state, lambda s: s.learn_one({"f1": 0.5, "f3": -1.0}, 1.0), \
            lambda s: s.predict_one({"f1": 0.5, "f3": -1.0})
    if kind == "multi":
        est = OnlineQuantileRegressor(tau=[0.2, 0.5, 0.8], average=True).fit(X, y)
    elif kind == "batch":
        est = OnlineQuantileRegressor(mode="batch", batch_size=7, average=True,
                                      inference=True).fit(X, y)
    else:
        est = OnlineQuantileRegressor(tau=0.3, average=True, inference=True).fit(X, y)
    return est._state, lambda s: s.learn_one(X[0], 1.0), lambda s: s.predict_one(X[0])


def _lowrank():
    from streamfit.lowrank import OnlineLowRankQuantileRegressor
    rng = np.random.default_rng(0)
    est = OnlineLowRankQuantileRegressor(rank=2, shape=(6, 4))
    for _ in range(80):
        i, j = int(rng.integers(6)), int(rng.integers(4))
        est.learn_one((i, j), float(rng.standard_normal()))
    x = rng.standard_normal((6, 4))
    return est._state, lambda s: s.learn_one(x, 0.5), lambda s: s.predict_one(x)


def _pca(name):
    import streamfit
    X = np.random.default_rng(0).standard_normal((40, 6))
    est = getattr(streamfit, name)(2, random_state=0).partial_fit(X)
    return est._state, lambda s: s.learn_one(X[0]), lambda s: s.transform_one(X[1])


def state_object(kind):
    """(a learnt state object, a learn call, a predict call) of one family."""
    if kind.startswith("linear-"):
        return _linear(kind[len("linear-"):])
    if kind == "lowrank":
        return _lowrank()
    return _pca(kind)


def _mutated(value, how):
    if how == "nan":
        if isinstance(value, np.ndarray):
            out = value.copy()
            if out.size and out.dtype.kind == "f":
                out.flat[out.size // 2] = np.nan
                return out
            return np.float64("nan")
        return float("nan")
    if how == "minus1":
        if isinstance(value, np.ndarray):
            out = value.copy()
            if out.size:
                out.flat[0] = -1
            return out
        return -1
    if how == "huge":
        if isinstance(value, np.ndarray):
            out = value.copy()
            if out.size and out.dtype.kind == "f":
                out.flat[0] = 1e300
                return out
            return 1e300
        return 1e300
    if how == "shape":
        if isinstance(value, np.ndarray):
            return value.reshape(-1)[:-1].copy() if value.size else np.zeros(3)
        return np.zeros(3)
    raise AssertionError(how)


def edited_record(case):
    """from_state of a to_state() record with one field edited. Returns
    ("refused", type, message), ("accepted-then-error", type, message, the
    state unchanged by the failed learn) or ("accepted", finite after a
    learn and a predict, detail)."""
    state, learn, predict = state_object(case["kind"])
    rec = state.to_state()
    field, how = case["field"], case["how"]
    if field not in rec:
        return ["absent"]
    rec = dict(rec)
    rec[field] = _mutated(rec[field], how)
    try:
        new = type(state).from_state(rec)
    except (ValueError, TypeError) as exc:
        return ["refused", type(exc).__name__, str(exc)]
    # accepted: the edit was harmless (the object usable and finite), or the
    # next learn refuses it with a clear error, the state unchanged
    before = pickle.dumps(new.to_state())
    try:
        learn(new)
    except (ValueError, TypeError, FloatingPointError, ArithmeticError) as exc:
        unchanged = pickle.dumps(new.to_state()) == before
        return ["accepted-then-error", type(exc).__name__, str(exc), unchanged]
    try:
        out = np.asarray(predict(new), dtype=float)
        back = new.to_state()
    except (ValueError, TypeError, FloatingPointError, ArithmeticError) as exc:
        return ["accepted", False, f"then predict: {type(exc).__name__}: {exc}"]
    floats = [k for k, v in back.items()
              if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.all(np.isfinite(v))
              and not (k in rec and isinstance(rec[k], np.ndarray)
                       and np.array_equal(rec[k], v, equal_nan=True)
                       and field != k)]
    return ["accepted", bool(np.all(np.isfinite(out))) and not floats,
            f"prediction {out.tolist()}, non-finite fields {floats}"]


def record_fields(kind):
    state, _, _ = state_object(kind)
    return sorted(state.to_state())


def extreme_row(case):
    """One row with an extreme value through learn_one / learn (sparse) of
    the linear state: 'refused' (the state unchanged, bytes compared) or
    'learnt' (finite coefficients)."""
    from streamfit import OnlineQuantileRegressor
    rng = np.random.default_rng(1)
    # past the statistical schedule's warm-up of 50 rows: the model has moved
    X = rng.standard_normal((120, 6))
    y = X @ np.ones(6) + rng.standard_normal(120)
    est = OnlineQuantileRegressor(tau=0.4, average=True, hashing=case.get("hashing"))
    if case.get("hashing"):
        rows = [{f"k{j}": float(X[i, j]) for j in range(6)} for i in range(120)]
        for r, t in zip(rows, y):
            est.learn_one(r, float(t))
    else:
        est.fit(sp.csr_matrix(X), y)
    state = est._state
    before = pickle.dumps(state.to_state())
    value, where, path = case["value"], case["where"], case["path"]
    x = X[0].copy()
    t, w = 1.0, 1.0
    if where == "x":
        x[2] = value
    elif where == "y":
        t = value
    else:
        w = value
    try:
        if path == "learn_one-dict":
            est.learn_one({f"k{j}": float(x[j]) for j in range(6)}, t, w)
        elif path == "learn_one-csr":
            est.learn_one(sp.csr_matrix(x[None]), t, w)
        elif path == "learn-csr":
            Xb = np.vstack([X[1:4], x[None]])
            est.partial_fit(sp.csr_matrix(Xb), np.r_[y[1:4], t], np.r_[1.0, 1.0, 1.0, w])
        elif path == "predict_one-csr":
            out = est.predict_one(sp.csr_matrix(x[None]))
            return ["predicted", float(out)]
        elif path == "predict_one-dict":
            out = est.predict_one({f"k{j}": float(x[j]) for j in range(6)})
            return ["predicted", float(out)]
        else:
            raise AssertionError(path)
    except (ValueError, TypeError, OverflowError) as exc:
        after = pickle.dumps(est._state.to_state())
        return ["refused", type(exc).__name__, str(exc), after == before]
    coef = est._state.coef
    return ["learnt", bool(np.all(np.isfinite(coef))) and bool(np.all(np.isfinite(est.intercept_))),
            coef.tolist()]
