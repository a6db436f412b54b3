"""Calls into every public kernel of ``streamfit.kernels`` built from JSON
specs (drawn by hypothesis in test_kernel_fuzz.py), run in a child process by
``_isolated.run_cases`` (imported there by name: no relative imports).

A spec names a kernel and describes its arguments: integers and reals as
tokens (``"-1e6"``, ``"nan"``, ``"2^62"``...), arrays by shape, dtype, memory
layout and special values poked in, and for the state objects a sequence of
operations (updates, solves, calls, edits of their records and attributes,
pickle round trips). :func:`kernel_case` runs it and checks every call that
returned against an independent NumPy computation; it returns what happened
(``{"calls": n, "raised": [...]}``) and raises :class:`Wrong` when a call
returned a wrong result. A call that raises is fine if the exception is a
ValueError or TypeError (the test then checks it names something); a signal
or a hang is what the runner sees.
"""
import math
import numbers
import pickle

import numpy as np

from streamfit import kernels as K
from streamfit._kernels._quantile import STATE_DTYPE as _STATE_DTYPE
from streamfit.schedules import StatisticalSchedule

TOKENS = {"-1e6": -1e6, "-1": -1.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf,
          "1e300": 1e300, "0": 0.0, "0.5": 0.5, "1": 1.0, "2": 2.0, "1e-300": 1e-300}
INT_TOKENS = {"-1": -1, "0": 0, "2^62": 2 ** 62, "-2^62": -2 ** 62, "2^31": 2 ** 31}


# set True (replaying a spec by hand) to append the traceback's tail to each
# error logged, to see which check raised it
DEBUG = False


class Wrong(AssertionError):
    """A call returned, and what it returned is wrong."""


def scalar(tok):
    """A Python value from a token: ints as they are, "i:-1" an int token,
    "f:nan" a real token, "s:..." a string, "b:1" a bool, None."""
    if tok is None or isinstance(tok, (int, float)):
        return tok
    kind, _, v = tok.partition(":")
    if kind == "i":
        return INT_TOKENS[v] if v in INT_TOKENS else int(v)
    if kind == "f":
        return TOKENS[v] if v in TOKENS else float(v)
    if kind == "b":
        return bool(int(v))
    if kind == "np":
        return np.int64(int(v))
    return v


def array(spec):
    """An array from a spec: {"shape", "dtype", "layout", "seed", "scale",
    "specials": [[flat index, token], ...]} (or a scalar/None spec)."""
    if not isinstance(spec, dict):
        return scalar(spec)
    shape = tuple(spec["shape"])
    rng = np.random.default_rng(spec.get("seed", 0))
    a = np.asarray(rng.standard_normal(shape) * spec.get("scale", 1.0))
    if spec.get("nonneg"):
        a = np.asarray(np.abs(a))
    flat = a.reshape(-1)
    for at, tok in spec.get("specials", []):
        if flat.size:
            flat[at % flat.size] = TOKENS[tok]
    dtype = spec.get("dtype", "float64")
    with np.errstate(invalid="ignore", over="ignore"):
        if dtype == "object":
            a = a.astype(object)
        elif dtype == "str":
            a = a.astype(str)
        else:
            a = a.astype(dtype)
    a = np.asarray(a)
    layout = spec.get("layout", "C")
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "strided" and a.ndim:
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        a = big[..., ::2]
    elif layout == "reversed" and a.ndim:
        a = a[..., ::-1].copy()[..., ::-1]
    elif layout == "readonly":
        a.flags.writeable = False
    elif layout == "list":
        a = a.tolist()
    elif layout == "memoryview" and dtype not in ("object", "str") and a.ndim:
        a = memoryview(np.ascontiguousarray(a))
    return a


def f64(a):
    """A float64 copy of what the kernel was given (None if it has none)."""
    if a is None:
        return None
    try:
        # (a 0-d value is taken as a vector of one: the kernels promote it)
        return np.atleast_1d(np.array(a, dtype=np.float64))
    except (TypeError, ValueError):
        return None


def _check(cond, why):
    if not cond:
        raise Wrong(why)


def _call(log, func, *args, **kwargs):
    """func(...) -> (True, value) or (False, None) after a ValueError or
    TypeError, which is logged; anything else propagates."""
    log["calls"] += 1
    try:
        out = func(*args, **kwargs)
        log["returned"] += 1
        return True, out
    except (ValueError, TypeError) as exc:
        log["raised"].append(f"{type(exc).__name__}: {str(exc)[:300]}")
        if DEBUG:
            import traceback
            log["raised"][-1] += " @ " + " / ".join(
                ln.strip() for ln in traceback.format_exc().splitlines()[-5:-1])
        return False, None


# -- goe ------------------------------------------------------------------------------------

def _goe_reference(n, sigma, seed):
    z = np.random.default_rng(seed).standard_normal(n * (n + 1) // 2)
    N = np.zeros((n, n))
    pos = 0
    for i in range(n):
        N[i, :i + 1] = z[pos:pos + i + 1] * sigma / math.sqrt(2)
        N[i, i] = z[pos + i] * sigma
        pos += i + 1
    return np.tril(N) + np.tril(N, -1).T


def case_goe(spec, log):
    n, sigma, seed = scalar(spec["n"]), scalar(spec["sigma"]), scalar(spec["seed"])
    out = array(spec["out"]) if spec.get("out") is not None else None
    ok, N = _call(log, K.goe, n, sigma, seed, out=out)
    if not ok:
        return
    _check(isinstance(N, np.ndarray) and N.shape == (n, n), f"shape {N.shape} for n={n}")
    if out is not None:
        _check(N is out, "out was not filled and returned")
    _check(np.array_equal(N, N.T), "not symmetric")
    ref = _goe_reference(n, sigma, seed)
    _check(np.allclose(N, ref, rtol=1e-12, atol=0), "not the documented draw of the seed")


# -- the helpers --------------------------------------------------------------------------

def _valid_nk(n, k):
    return all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (n, k)) \
        and 1 <= k <= n


def case_sizes(spec, log):
    n, k = scalar(spec["n"]), scalar(spec["k"])
    ok, b = _call(log, K.default_block_size, n, k)
    if ok and _valid_nk(n, k):
        _check(b == min(n, k + max(5, k // 2)) and k <= b <= n, f"block {b}")
    elif ok:
        log["accepted_invalid"] = log.get("accepted_invalid", 0) + 1
    ok, it = _call(log, K.default_max_iter, n, k)
    if ok and _valid_nk(n, k):
        _check(isinstance(it, int) and 3 <= it <= 30, f"max_iter {it}")
    elif ok:
        log["accepted_invalid"] = log.get("accepted_invalid", 0) + 1


# -- capped simplex -------------------------------------------------------------------------

def _is_capped(w, k, n, tol=1e-9):
    return w.shape == (n,) and np.isfinite(w).all() and w.min() >= -tol and \
        w.max() <= 1 + tol and abs(w.sum() - k) <= tol * max(k, 1) * 10


def case_project(spec, log):
    v, k, div = array(spec["v"]), scalar(spec["k"]), spec["divergence"]
    vv = f64(v)
    ok, w = _call(log, K.project_capped_simplex, v, k, divergence=div)
    if not ok:
        return
    _check(vv is not None and vv.ndim == 1 and np.isfinite(vv).all(),
           f"accepted v of {np.shape(vv)} with non-finite values")
    n = vv.shape[0]
    _check(_valid_nk(n, k) or (isinstance(k, (int, np.integer)) and 1 <= k <= n), f"k={k}")
    scale = max(1.0, float(np.abs(vv).max()))
    _check(_is_capped(w, k, n, tol=1e-9 * scale), f"w={w} is not in the capped simplex")
    inner = (w > 1e-12) & (w < 1 - 1e-12)
    if div == "euclidean":
        # w = clip(v - theta, 0, 1): one theta for the free entries, and the
        # clipped ones on the right side of it
        if inner.any():
            theta = vv[inner] - w[inner]
            _check(np.ptp(theta) <= 1e-9 * scale, f"no single theta: {theta}")
            t = theta.mean()
            _check((vv[w <= 1e-12] - t <= 1e-9 * scale).all(), "a zero entry above theta")
            _check((vv[w >= 1 - 1e-12] - t >= 1 - 1e-9 * scale).all(), "a capped entry below")
    else:
        _check((vv >= 0).all(), "entropy projection of a negative entry")
        if inner.any():
            c = w[inner] / vv[inner]
            _check(np.ptp(c) <= 1e-9 * c.max(), f"no single rescaling: {c}")
            _check((vv[w >= 1 - 1e-12] * c.mean() >= 1 - 1e-9).all(), "a capped entry below 1")


def _capped_input(spec):
    """w from its spec: a projection of a random vector (valid), then
    specials and dtype/layout as any array."""
    base = dict(spec["w"])
    k = scalar(spec["k"])
    if spec.get("valid") and len(base["shape"]) == 1 and isinstance(k, int) and \
            not isinstance(k, bool) and 1 <= k <= base["shape"][0]:
        n = base["shape"][0]
        raw = np.random.default_rng(base.get("seed", 0)).standard_normal(n)
        w = K.project_capped_simplex(raw, k)
        for at, tok in base.get("specials", []):
            w[at % n] = TOKENS[tok]
        dtype = base.get("dtype", "float64")
        w = w.astype(dtype) if dtype not in ("object", "str") else w.astype(object)
        return w, k
    return array(base), k


def case_mixture(spec, log):
    w, k = _capped_input(spec)
    ww = f64(w)
    ok, res = _call(log, K.mixture_decomposition, w, k)
    if not ok:
        return
    weights, subsets = res
    n = ww.shape[0]
    _check(_is_capped(ww, k, n, tol=1e-6), f"accepted w={ww} that is not capped")
    _check(weights.ndim == 1 and subsets.shape == (weights.shape[0], k), "shapes")
    _check((weights >= -1e-15).all() and abs(weights.sum() - 1) <= 1e-9, f"weights {weights}")
    _check(((subsets >= 0) & (subsets < n)).all(), "an index out of range")
    _check(all(len(set(s)) == k for s in subsets.tolist()), "a subset with a repeated index")
    cover = np.zeros(n)
    for p, s in zip(weights, subsets):
        cover[s] += p
    _check(np.allclose(cover, np.clip(ww, 0, 1), atol=1e-9), f"cover {cover} != w {ww}")


def case_sample(spec, log):
    w, k = _capped_input(spec)
    ww = f64(w)
    size, seed = scalar(spec["size"]), scalar(spec["seed"])
    ok, out = _call(log, K.systematic_sample, w, k, size=size, random_state=seed)
    if not ok:
        return
    n = ww.shape[0]
    _check(_is_capped(ww, k, n, tol=1e-6), f"accepted w={ww} that is not capped")
    rows = out[None] if size is None else out
    _check(rows.shape == ((1 if size is None else size), k), f"shape {out.shape}")
    _check(((rows >= 0) & (rows < n)).all(), "an index out of range")
    _check((np.diff(rows, axis=1) > 0).all(), "indices not distinct and ascending")
    for i in np.flatnonzero(ww >= 1 - 1e-12):
        _check((rows == i).any(axis=1).all(), f"index {i} (w = 1) not always taken")
    for i in np.flatnonzero(ww <= 0):
        _check(not (rows == i).any(), f"index {i} (w = 0) taken")


# -- TopK -----------------------------------------------------------------------------------

def _topk_check(topk, S, tol, log):
    """After a solve: S is the reference sum, the values are Ritz values of
    orthonormal vectors and within the solve's tolerance of the top k."""
    n, k = S.shape[0], topk.k
    V, vals = topk.vectors, topk.values
    _check(V.shape == (k, n) and np.isfinite(V).all(), f"vectors {V.shape}")
    _check(np.allclose(V @ V.T, np.eye(k), atol=1e-8), "vectors not orthonormal")
    scale = max(1.0, float(np.abs(S).max()) * n)
    ritz = np.einsum("ij,jk,ik->i", V, S, V)
    _check(np.allclose(vals, ritz, rtol=1e-8, atol=1e-9 * scale), f"values {vals} != {ritz}")
    top = np.linalg.eigvalsh(S)[::-1][:k].sum()
    gap = top - ritz.sum()
    _check(gap <= 10 * tol + 1e-8 * scale, f"objective gap {gap:.3g} beyond tol {tol}")
    log["solves_checked"] = log.get("solves_checked", 0) + 1


def _topk_field_bad(field, value):
    """Whether a TopK record field set to ``value`` is out of the range its
    solver relies on (counters >= 0, skip and back-off in [0, 64], tol finite
    >= 0, gap and max_gap_ratio >= 0)."""
    v = float(value)
    if field in ("skip", "backoff"):
        return not 0 <= v <= 64
    if field == "tol":
        return not (math.isfinite(v) and v >= 0)
    return not v >= 0


def case_topk(spec, log):
    n, k = scalar(spec["n"]), scalar(spec["k"])
    kw = {key: scalar(spec[key]) for key in ("block", "max_iter") if spec.get(key) is not None}
    ok, topk = _call(log, K.TopK, n, k, **kw)
    if not ok:
        return
    _check(_valid_nk(n, k), f"TopK({n}, {k}) accepted")
    S = np.zeros((n, n))
    edited = False
    bad_edits = {}          # record edits out of range: every later solve must refuse
    for op in spec["ops"]:
        what = op["op"]
        if what in ("vector", "rows", "matrix"):
            term = array(op["term"])
            scale = scalar(op["scale"])
            if what == "matrix" and isinstance(term, np.ndarray) and term.ndim == 2 and \
                    term.shape[0] == term.shape[1] and term.dtype.kind == "f":
                term = (term + term.T) / 2
            before = topk.matrix.copy()
            ok, _ = _call(log, topk.update, **{what: term, "scale": scale})
            if not ok:
                _check(np.array_equal(topk.matrix, before, equal_nan=True),
                       "a refused update changed S")
                continue
            t = f64(term)
            _check(t is not None and np.isfinite(t).all() and math.isfinite(scale),
                   "a non-finite term was accepted")
            t = t[None] if what == "vector" else t
            with np.errstate(over="ignore", invalid="ignore"):
                S = S + scale * (t if what == "matrix" else t.T @ t)
            if not edited:
                _check(np.allclose(topk.matrix, S, rtol=1e-12,
                                   atol=1e-12 * max(1.0, float(np.abs(S).max()))),
                       "S is not the sum of the terms")
        elif what == "solve":
            tol = scalar(op["tol"])
            hint = array(op["hint"]) if op.get("hint") is not None else None
            ok, _ = _call(log, topk.solve, tol, hint=hint, seed=scalar(op.get("seed")))
            if ok:
                _check(not bad_edits, f"solve used the record's {bad_edits}")
                _check(math.isfinite(tol) and tol >= 0, f"tol {tol} accepted")
                if not edited:
                    _topk_check(topk, topk.matrix, tol, log)
                else:
                    _topk_check(topk, topk.matrix, tol, log)
        elif what == "field":
            rec = np.array(topk._state, copy=True)
            try:
                with np.errstate(invalid="ignore", over="ignore"):
                    rec[op["field"]] = scalar(op["value"])
            except (OverflowError, ValueError):
                continue        # the field's type cannot hold it: nobody can store it
            topk._state = rec
            edited = True
            bad_edits.pop(op["field"], None)
            if _topk_field_bad(op["field"], rec[op["field"]][0]):
                bad_edits[op["field"]] = op["value"]
        elif what == "attr":
            value = array(op["value"]) if isinstance(op["value"], dict) else \
                scalar(op["value"])
            setattr(topk, op["name"], value)
            edited = True
        elif what == "pickle":
            ok, blob = _call(log, pickle.dumps, topk)
            if ok:
                ok, topk = _call(log, pickle.loads, blob)
                if not ok:
                    return
                S = topk.matrix
                edited = False


# -- quantile kernels ----------------------------------------------------------------------

def _numpy_sgd(X, y, etas, loss, tau, block, sw, fit_intercept, w, b):
    total, j = 0.0, 0
    sw = np.ones(len(y)) if sw is None else sw
    for start in range(0, len(y), block):
        Xb, yb, wb = X[start:start + block], y[start:start + block], sw[start:start + block]
        r = yb - (Xb @ w + b)
        if loss == "check":
            total += np.sum(wb * r * (tau - (r < 0)))
            g = (r <= 0) - tau
        else:
            total += np.sum(wb * 0.5 * r * r)
            g = -r
        if wb.sum() == 0:
            continue
        eta = etas[j]
        j += 1
        norm = 1.0 if block == 1 else wb.sum()
        w = w - eta * (Xb.T @ (wb * g)) / norm
        if fit_intercept:
            b -= eta * np.sum(wb * g) / norm
    return w, b, total


class GivenSteps:
    """A user schedule handing out the stepsizes of the call under way:
    ``STEPS["etas"]`` from update ``STEPS["base"]`` on (set before each
    call; a module-level class, so that a state holding it pickles)."""

    def stepsizes(self, start, count):
        base = STEPS["base"]
        return STEPS["etas"][start - base:start - base + count]


STEPS = {"etas": np.zeros(0), "base": 0}


def _raw(state):
    # the state dict the object pickles (a user schedule kept as an object)
    rebuild, (st,) = type(state).__reduce__(state)
    return rebuild, st


def _edited(log, state, edit, field, must_refuse):
    """A LinearSGD loaded from ``state``'s state dict after ``edit``: a value
    out of range must be refused, naming ``field``. Returns the new state
    (None when refused)."""
    ok, raw = _call(log, _raw, state)      # (an absurd n_features: no arrays to save)
    if not ok:
        return None
    rebuild, st = raw
    with np.errstate(invalid="ignore", over="ignore"):
        edit(st)
    ok, new = _call(log, rebuild, st)
    if must_refuse:
        _check(not ok, f"an edited {field} was loaded")
    if ok:
        _check(pickle.dumps(new) == pickle.dumps(rebuild(_raw(new)[1])), "reloaded")
    return new if ok else None


def case_linear(spec, log):
    """kernels.LinearSGD: settings drawn (bad ones refused), then blocks of
    rows with given stepsizes (checked against NumPy) or under the
    statistical schedule (checked for sanity), single rows, records and
    coefficients edited through the state dict, pickle round trips."""
    d = scalar(spec["n_features"])
    block = scalar(spec["block"])
    given = spec.get("schedule", "given") == "given"
    tau = spec["tau"]
    kw = dict(tau=tau if isinstance(tau, list) else scalar(tau), loss=spec["loss"], fit_intercept=spec["fit_intercept"],
              average=spec.get("average", False),
              schedule=GivenSteps() if given else StatisticalSchedule(n_warmup=20, window=32))
    if block != 1:
        kw.update(mode="batch", batch_size=block)
    ok, state = _call(log, K.LinearSGD, d, **kw)
    if not ok:
        return
    m = len(np.atleast_1d(kw["tau"]))
    edited = False
    for op in spec["ops"]:
        what = op["op"]
        if what == "field":
            field, value = op["field"], scalar(op["value"])

            def edit(st):
                st["records"].view(_STATE_DTYPE)[field] = value
            new = _edited(log, state, edit, field, _must_refuse("field", field, value))
            if new is not None:
                state, edited = new, True
        elif what == "coef":
            name, value = op["name"], array(op["value"])
            new = _edited(log, state, lambda st: st.__setitem__(name, value), name,
                          not _is_f64(value, (m, int(d))))
            if new is not None:
                state = new
        elif what == "pickle":
            ok, blob = _call(log, pickle.dumps, state)
            if ok:
                ok, state = _call(log, pickle.loads, blob)
                if not ok:
                    return
                _check(pickle.dumps(state) == blob, "an unpickled state pickles to other bytes")
        elif what == "one":
            x, yv, wv = array(op["x"]), scalar(op["y"]), scalar(op.get("weight", 1.0))
            before = (state.iterate, state.n_samples_seen, state.cumulative_loss)
            STEPS.update(etas=f64(array(op["etas"])), base=state.n_updates)
            ok, _ = _call(log, state.learn_one, x, yv, wv)
            if not ok:
                _check(state.n_samples_seen == before[1], "a refused row was counted")
                continue
            _check(state.n_samples_seen == before[1] + 1, f"n_samples_seen "
                                                          f"{state.n_samples_seen}")
            _check(np.isfinite(state.coef).all(), "non-finite iterate")
            if given and not edited and m == 1 and block == 1:
                xf, ef = f64(x).reshape(1, -1), f64(STEPS["etas"])
                w, b, total = _numpy_sgd(xf, np.array([float(yv)]), ef, spec["loss"],
                                         kw["tau"], 1, np.array([float(wv)]),
                                         kw["fit_intercept"], np.atleast_2d(before[0][0])[0],
                                         float(np.atleast_1d(before[0][1])[0]))
                _compare(state, w, b, total, before[2])
        elif what == "learn":
            X, y = array(op["X"]), array(op["y"])
            sw = array(op["sw"]) if op.get("sw") is not None else None
            STEPS.update(etas=array(op["etas"]), base=state.n_updates)
            pending = _raw(state)[1]["pending_X"]
            before = (state.iterate, state.n_samples_seen, state.cumulative_loss,
                      state.n_updates, pending is not None and len(pending) > 0)
            ok, done = _call(log, state.learn, X, y, sw)
            if not ok:
                _check(state.n_samples_seen == before[1], "a refused call changed the state")
                continue
            Xf, yf, swf = f64(X), f64(y), f64(sw)
            _check(Xf is not None and Xf.ndim == 2 and np.isfinite(Xf).all() and
                   np.isfinite(yf).all(), "non-finite rows accepted")
            n = len(yf)
            _check(done == n and state.n_samples_seen == before[1] + n,
                   f"{done} of {n} rows, n_samples_seen {state.n_samples_seen}")
            _check(np.isfinite(state.coef).all(), "non-finite iterate")
            if not given:
                sched = state.schedule_state
                for s in (sched if isinstance(sched, list) else [sched]):
                    _check(s["phase"] in (0, 1, 2, 3) and s["restarts"] >= 0 and
                           math.isfinite(s["stepsize"]) and s["stepsize"] >= 0,
                           f"schedule state {s}")
            # NumPy's loop, from the iterate before the call, with the
            # stepsizes given (a batch: when no rows were pending before it
            # and none are after it)
            if given and not edited and m == 1 and (block == 1 or (
                    not before[4] and n % block == 0)):
                ef = f64(STEPS["etas"])
                w, b, total = _numpy_sgd(Xf, yf, ef, spec["loss"], kw["tau"], block, swf,
                                         kw["fit_intercept"], np.atleast_2d(before[0][0])[0],
                                         float(np.atleast_1d(before[0][1])[0]))
                _compare(state, w, b, total, before[2])


def _compare(state, w, b, total, loss_before):
    coef = np.atleast_2d(state.iterate[0])[0]
    sc = max(1.0, float(np.abs(w).max()))
    _check(np.allclose(coef, w, rtol=1e-9, atol=1e-9 * sc), f"coef {coef} != {w}")
    got_b = float(np.atleast_1d(state.iterate[1])[0])
    _check(abs(got_b - b) <= 1e-9 * max(1.0, abs(b)), f"intercept {got_b} != {b}")
    got = float(np.atleast_1d(state.cumulative_loss)[0]) - \
        float(np.atleast_1d(loss_before)[0])
    _check(abs(got - total) <= 1e-9 * max(1.0, abs(total)), f"loss {got} != {total}")


def _is_f64(a, shape):
    return isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape and \
        bool(np.isfinite(a).all())


def _must_refuse(kind, field, value):
    """Whether a schedule record's field set to ``value`` is out of the range
    the kernels rely on (the rules of _fuzz_cases: state_must_refuse and
    params_must_refuse), so that a call using it must raise."""
    import _fuzz_cases as F
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return True
    token = f"edited:{field}"
    F.VALUES[token] = v
    try:
        return F.state_must_refuse(field, token) if kind == "field" else \
            F.params_must_refuse(field, token)
    finally:
        del F.VALUES[token]


CASES = {"goe": case_goe, "sizes": case_sizes, "project_capped_simplex": case_project,
         "mixture_decomposition": case_mixture, "systematic_sample": case_sample,
         "TopK": case_topk, "LinearSGD": case_linear, "LinearSGD-statistical": case_linear}


def kernel_case(spec):
    """Case function: run one spec; a wrong result raises Wrong."""
    log = {"calls": 0, "returned": 0, "raised": []}
    CASES[spec["kernel"]](spec, log)
    return log
