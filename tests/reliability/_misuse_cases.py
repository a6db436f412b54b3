"""What a user can do to streamfit that it did not arrange itself -- hand a
kernel or an estimator edited records, share one kernel object between
threads, fork while a thread is inside a call, limit BLAS threads from
another thread, fit inside a forked multiprocessing worker -- as case
functions run in a child process (``_isolated.run_cases``; this module is
imported there by name, so no relative imports).

Each case returns a JSON dict: ``{"result": "refused", "type", "message"}``
when the library raised, ``{"result": "correct", ...}`` when it did the
right thing, ``{"result": "wrong", "why"}`` when it returned something wrong
(a silent use of a bad value, a lost update, a changed thread count). A
signal or a hang is what the runner sees of the child.

``run(name)`` runs one case by its name in :data:`CASES`, so that a script
can run them against any installed streamfit, e.g. an older build.
"""
import math
import os
import pickle
import sys
import threading
import time

import numpy as np

FILL = {"-1e6": -1e6, "-1": -1.0, "nan": math.nan}


def _refused(exc):
    return {"result": "refused", "type": type(exc).__name__, "message": str(exc)[:500]}


def _stream(n=400, d=4, seed=5):
    from streamfit.simulate import make_linear_stream
    X, y, _ = make_linear_stream(n, d, tau=0.3, random_state=seed)
    return X, y


def _blank(rec, value):
    """A copy of a record with every field set to ``value``."""
    out = np.array(rec, copy=True)
    for name in out.dtype.names:
        out[name] = value
    return out


# -- records ------------------------------------------------------------------------------

def _fitted_linear(n=300, **kw):
    """A kernels.LinearSGD that learnt the first n rows of the stream."""
    from streamfit import kernels as K
    X, y = _stream()
    state = K.LinearSGD(4, tau=0.3, average=True, **kw)
    state.learn(X[:n], y[:n])
    return state


def _edited_pickle(obj, edit):
    """A pickle of ``obj`` whose LinearSGD's state dict (what its rebuild
    function receives) went through ``edit`` on the way."""
    import io
    from streamfit import kernels as K
    buf = io.BytesIO()

    class Editing(pickle.Pickler):
        def reducer_override(self, o):
            if type(o) is K.LinearSGD:
                rebuild, (state,) = type(o).__reduce__(o)
                edit(state)
                return rebuild, (state,)
            return NotImplemented

    Editing(buf).dump(obj)
    return buf.getvalue()


def _fill_records(value):
    def edit(state):
        state["records"][...] = FILL[value]
    return edit


def linear_records_filled(value, entry):
    """A kernels.LinearSGD that ran on a stream, pickled with its schedule
    record's every field set to ``value``; unpickled, then more rows by
    learn or learn_one."""
    X, y = _stream()
    state = _fitted_linear()
    try:
        state = pickle.loads(_edited_pickle(state, _fill_records(value)))
        if entry == "learn":
            state.learn(X[300:], y[300:])
        else:
            for x, target in zip(X[300:], y[300:]):
                state.learn_one(x, float(target))
    except Exception as exc:
        return _refused(exc)
    sched = state.schedule_state
    return {"result": "wrong", "why": f"a record of {value}s was used: phase "
                                      f"{sched['phase']}, stepsize {sched['stepsize']}, "
                                      f"n_samples_seen {state.n_samples_seen}"}


def estimator_state_filled(value):
    """A fitted OnlineQuantileRegressor whose learnt state record has every
    field set to ``value`` in its pickle, unpickled and fed more rows."""
    from streamfit import OnlineQuantileRegressor
    X, y = _stream()
    est = OnlineQuantileRegressor(tau=0.3).fit(X[:300], y[:300])
    blob = _edited_pickle(est, _fill_records(value))
    try:
        est = pickle.loads(blob)
        est.partial_fit(X[300:], y[300:])
        pred = est.predict(X[300:])
    except Exception as exc:
        return _refused(exc)
    return {"result": "wrong", "why": f"a record of {value}s was used: n_samples_seen_ "
                                      f"{est.n_samples_seen_}, predictions finite: "
                                      f"{bool(np.isfinite(pred).all())}"}


def _nan_window_setting(state):
    # the statistical schedule's window parameter, as the state dict holds it
    schedule = state["settings"]["schedule"]
    if isinstance(schedule, dict):              # as plain data: (class, params)
        schedule["params"]["window"] = math.nan
    else:
        schedule.window = math.nan


def window_nan(target):
    """The schedule's ``window`` parameter set to NaN in the pickle of a
    kernels.LinearSGD or of a fitted estimator, then more rows."""
    from streamfit.schedules import StatisticalSchedule
    X, y = _stream()
    try:
        if target == "kernel":
            state = _fitted_linear(schedule=StatisticalSchedule())
            state = pickle.loads(_edited_pickle(state, _nan_window_setting))
            state.learn(X[300:], y[300:])
            return {"result": "wrong", "why": f"a NaN window was used "
                                              f"({state.schedule_state})"}
        from streamfit import OnlineQuantileRegressor
        est = OnlineQuantileRegressor(tau=0.3, schedule=StatisticalSchedule()).fit(X[:300],
                                                                                  y[:300])
        est = pickle.loads(_edited_pickle(est, _nan_window_setting))
        est.partial_fit(X[300:], y[300:])
    except Exception as exc:
        return _refused(exc)
    return {"result": "wrong", "why": "a NaN window was used"}


def window_values_nan(target):
    """The residual window's filled part (the values the schedule's order
    statistics read) set to NaN, in the pickle of a kernels.LinearSGD (in its
    warm-up) or of a fitted estimator, then more rows: quickselect never
    splits a range around a NaN pivot."""
    X, y = _stream()

    def edit(state):
        state["window"][...] = math.nan

    try:
        if target == "kernel":
            state = _fitted_linear(n=30)
            fill = state.to_state()["window"].shape[1]
            state = pickle.loads(_edited_pickle(state, edit))
            state.learn(X[30:], y[30:])
            return {"result": "wrong", "why": f"a NaN window was used (fill {fill})"}
        from streamfit import OnlineQuantileRegressor
        est = OnlineQuantileRegressor(tau=0.3).fit(X[:330], y[:330])
        est = pickle.loads(_edited_pickle(est, edit))
        est.partial_fit(X[330:], y[330:])
    except Exception as exc:
        return _refused(exc)
    return {"result": "wrong", "why": "a NaN window was used"}


def topk_block_edited():
    """A kernels.TopK's block of vectors edited to other finite values (as
    in an edited pickle), then a warm-started solve: refused, not a wrong
    top-k."""
    from streamfit import kernels as K
    rng = np.random.default_rng(2)
    A = rng.standard_normal((30, 30))
    topk = K.TopK(30, 2)
    topk.update(matrix=A + A.T)
    topk.solve()
    topk._V[0] = -1.0
    try:
        topk = pickle.loads(pickle.dumps(topk))
    except Exception as exc:
        return _refused(exc)
    topk._V[0] = -1.0           # (an older build loads it: edit the loaded copy too)
    try:
        topk.update(vector=rng.standard_normal(30), scale=0.1)
        values, _ = topk.solve(1e-8)
    except Exception as exc:
        return _refused(exc)
    top = np.linalg.eigvalsh(topk.matrix)[::-1][:2]
    ok = np.allclose(values, top, rtol=1e-6)
    return {"result": "correct" if ok else "wrong",
            "why": f"values {values.tolist()} for the top eigenvalues {top.tolist()}"}


# -- kernel objects shared by threads -------------------------------------------------------

N_THREADS = 4


def _together(work):
    """Run work(i) in N_THREADS threads started at once; re-raise an error."""
    start, errors = threading.Barrier(N_THREADS), []

    def run(i):
        try:
            start.wait()
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def topk_threads():
    """One kernels.TopK updated by rank-one terms (a compiled loop over S's
    rows, without the GIL) and rank-m terms from several threads at once,
    and solved now and then: S must be the sum of every term (to rounding)."""
    from streamfit import kernels as K
    n, rounds = 300, 400
    rng = np.random.default_rng(0)
    terms = rng.standard_normal((N_THREADS, rounds, n))

    def work(i):
        for r in range(rounds):
            if r % 100 == 99:
                topk.update(rows=terms[i, r - 3:r + 1])
                topk.solve(1e-6)
            else:
                topk.update(vector=terms[i, r], scale=0.5 if r % 2 else 1.0)

    topk = K.TopK(n, 3)
    _together(work)
    exact = np.zeros((n, n))
    for i in range(N_THREADS):
        for r in range(rounds):
            t = terms[i, r - 3:r + 1] if r % 100 == 99 else terms[i, r:r + 1]
            exact += (0.5 if r % 2 and r % 100 != 99 else 1.0) * (t.T @ t)
    rel = float(np.abs(topk.matrix - exact).max() / np.abs(exact).max())
    return {"result": "correct" if rel < 1e-12 else "wrong", "relative_error": rel,
            "why": f"S is {rel:.2g} (relative) away from the sum of the terms"}


def linear_state_threads():
    """One kernels.LinearSGD fed 80,000 rows from several threads (100-row
    learn calls; one call at a time, the others wait): every row must be
    counted, every update made."""
    from streamfit import kernels as K
    from streamfit.schedules import ConstantSchedule
    rows = 80_000 // N_THREADS
    rng = np.random.default_rng(1)
    X = rng.standard_normal((N_THREADS, rows, 5))
    y = X.sum(axis=2) + rng.standard_normal((N_THREADS, rows))
    state = K.LinearSGD(5, schedule=ConstantSchedule(1e-3))

    def work(i):
        for s in range(0, rows, 100):
            state.learn(X[i, s:s + 100], y[i, s:s + 100])

    _together(work)
    seen, updates = state.n_samples_seen, state.n_updates
    ok = seen == updates == 80_000 and bool(np.isfinite(state.coef).all())
    return {"result": "correct" if ok else "wrong", "n_seen": seen, "n_updates": updates,
            "why": f"n_samples_seen {seen}, n_updates {updates} of 80000 rows"}


# -- fork while another thread is inside a call ---------------------------------------------

class _Gate:
    """Array-like data whose conversion holds the calling thread until
    released: the estimator's call lock is then held (the conversion runs
    inside the call), so a fork at that moment is a fork mid-call."""

    def __init__(self, a):
        self.a, self.inside, self.go = a, threading.Event(), threading.Event()

    def __array__(self, dtype=None, copy=None):
        self.inside.set()
        self.go.wait(60)
        return self.a if dtype is None else self.a.astype(dtype)

    def __len__(self):
        return len(self.a)

    @property
    def shape(self):
        return self.a.shape


def _one_blas_thread(case):
    """Run a fork-mid-call case with BLAS on one thread (inherited by the
    child). These cases test streamfit's state across a fork; OpenBLAS's own
    thread pool is not fork-safe while another thread's call is in flight:
    its pthread_atfork handler shuts the pool down under that call, which
    then waits forever in exec_blas_async_wait (seen in the GD case with
    OpenBLAS 0.3.30; OpenMathLib/OpenBLAS#5520, #5556). On one thread
    OpenBLAS runs every call on the caller's thread and has no pool to lose.
    (The BLAS-count cases below keep the process's own count.)"""
    import functools

    @functools.wraps(case)
    def run_case(*args):
        from threadpoolctl import threadpool_limits
        with threadpool_limits(1, user_api="blas"):
            return case(*args)

    return run_case


def _in_child(how, body, timeout=30):
    """Run body() in a child forked by ``how`` ("os.fork" or "mp-fork");
    return its JSON result, or ``{"result": "hang"}`` if it did not end
    within ``timeout`` seconds (it is then killed)."""
    import json
    import multiprocessing
    r, w = os.pipe()

    def child():
        os.close(r)
        try:
            out = body()
        except BaseException as exc:
            out = _refused(exc)
        os.write(w, json.dumps(out).encode())
        os.close(w)

    if how == "os.fork":
        pid = os.fork()
        if pid == 0:
            try:
                child()
            finally:
                os._exit(0)
        os.close(w)
        proc = None
    else:
        proc = multiprocessing.get_context("fork").Process(target=child)
        proc.start()
        os.close(w)
    deadline = time.monotonic() + timeout
    while True:
        if proc is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
        elif not proc.is_alive():
            code = proc.exitcode
            break
        if time.monotonic() > deadline:
            if proc is None:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            else:
                proc.kill()
                proc.join()
            os.close(r)
            return {"result": "hang", "why": f"the forked child did not end within {timeout} s"}
        time.sleep(0.01)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    if code:
        return {"result": "wrong", "why": f"the forked child ended with {code}"}
    return json.loads(data)


def _fork_mid_call(est, X, y, how, body):
    """Fork while another thread is inside est.partial_fit (held at its data's
    conversion); body(est) runs in the child. The parent's call then ends."""
    gate = _Gate(X)
    args = (gate,) if y is None else (gate, y)
    caller = threading.Thread(target=lambda: est.partial_fit(*args))
    caller.start()
    if not gate.inside.wait(60):
        raise RuntimeError("partial_fit never converted its data")
    try:
        return _in_child(how, lambda: body(est))
    finally:
        gate.go.set()
        caller.join()


@_one_blas_thread
def fork_quantile(how):
    """Fork while a thread is inside OnlineQuantileRegressor.partial_fit: in
    the child, pickling the estimator and going on with it must work."""
    from streamfit import OnlineQuantileRegressor
    X, y = _stream()
    est = OnlineQuantileRegressor(tau=0.3).fit(X[:200], y[:200])
    before = est.n_samples_seen_

    def body(est):
        again = pickle.loads(pickle.dumps(est))
        est.partial_fit(X[300:], y[300:])
        ok = again.n_samples_seen_ == before and est.n_samples_seen_ == before + 100
        return {"result": "correct" if ok else "wrong",
                "why": f"n_samples_seen_ {again.n_samples_seen_}, then {est.n_samples_seen_}"}

    return _fork_mid_call(est, X[200:300], y[200:300], how, body)


def _fork_inside_trials(est, X, how, body):
    """Fork while another thread is inside est's state object, in its trial
    loop (an FPL block long enough to be caught there: the main thread
    forks once the trial count moved); body(est) runs in the child."""
    caller = threading.Thread(target=est.partial_fit, args=(X,))
    start = est.n_trials_
    caller.start()
    deadline = time.monotonic() + 60
    while est._state.n_trials_ == start and caller.is_alive() and time.monotonic() < deadline:
        time.sleep(0.0005)
    mid_fit = caller.is_alive() and est._state.n_trials_ < start + len(X)
    try:
        out = _in_child(how, lambda: body(est))
    finally:
        caller.join()
    return {**out, "mid_fit": mid_fit}


@_one_blas_thread
def fork_pca(how):
    """Fork while a thread is inside PerturbedLeaderPCA's trial loop (which
    updates the state in place): in the child, a next partial_fit must raise
    a RuntimeError saying so (not hang, not run on a torn state), and fit
    must work."""
    from streamfit import PerturbedLeaderPCA
    from streamfit.simulate import make_spiked_stream
    X = make_spiked_stream(3040, 120, n_spikes=2, random_state=0)
    est = PerturbedLeaderPCA(2, random_state=0).fit(X[:40])

    def body(est):
        try:
            est.partial_fit(X[:80])
            return {"result": "wrong", "why": "partial_fit ran on a state a fork may have torn"}
        except RuntimeError as exc:
            refusal = str(exc)
        if "fork" not in refusal or "fit()" not in refusal:
            return {"result": "wrong", "why": f"the refusal does not say why: {refusal!r}"}
        est.fit(X[:200])
        V = est.components_
        ok = est.n_trials_ == 200 and np.allclose(V @ V.T, np.eye(2), atol=1e-8)
        return {"result": "correct" if ok else "wrong", "message": refusal[:300],
                "why": f"fit after the refusal: n_trials_ {est.n_trials_}"}

    return _fork_inside_trials(est, X[40:], how, body)


@_one_blas_thread
def fork_river_pca(how):
    """The same through streamfit.river's PCA adapter (issue 40, case 8):
    in the child, learn_one is refused saying what happened and what to do
    -- clone() the model, not the fit() the adapter does not have."""
    from streamfit.river import PerturbedLeaderPCA
    from streamfit.simulate import make_spiked_stream
    X = make_spiked_stream(3040, 120, n_spikes=2, random_state=0)
    model = PerturbedLeaderPCA(n_components=2, seed=0)
    dicts = [dict(enumerate(row)) for row in X[:41].tolist()]
    for x in dicts[:40]:
        model.learn_one(x)

    def body(est):
        try:
            model.learn_one(dicts[40])
            return {"result": "wrong", "why": "learn_one ran on a state a fork may have torn"}
        except RuntimeError as exc:
            refusal = str(exc)
        fresh = model.clone()
        fresh.learn_one(dicts[40])
        ok = "fork" in refusal and "clone()" in refusal and "fit()" not in refusal
        return {"result": "correct" if ok else "wrong", "message": refusal[:300],
                "why": f"the refusal: {refusal!r}"}

    return _fork_inside_trials(model.estimator, X[40:], how, body)


@_one_blas_thread
def fork_capped(how):
    """Fork while a thread is inside MatrixGDPCA's trial loop (which plays on
    a copy and commits by one store): the child's state is whole -- the one
    before the call -- and carries on as a run without that call would."""
    from streamfit import MatrixGDPCA
    from streamfit.simulate import make_spiked_stream
    # a block long enough (~1 s on one BLAS thread) to be inside its trials
    # when the fork comes, 0.3 s in
    X = make_spiked_stream(40040, 100, n_spikes=2, random_state=0)
    est = MatrixGDPCA(2, random_state=0).fit(X[:40])
    ref = pickle.loads(pickle.dumps(est)).partial_fit(X[40:60])
    caller = threading.Thread(target=est.partial_fit, args=(X[40:],))
    caller.start()
    time.sleep(0.3)
    mid_fit = caller.is_alive()

    def body():
        if est.n_trials_ != 40:
            return {"result": "wrong", "why": f"the child's state has {est.n_trials_} trials"}
        est.partial_fit(X[40:60])
        ok = np.array_equal(est.components_, ref.components_) and \
            est.cumulative_gain_ == ref.cumulative_gain_
        return {"result": "correct" if ok else "wrong", "why": "carried on differently"}

    try:
        out = _in_child(how, body)
    finally:
        caller.join()
    return {**out, "mid_fit": mid_fit}


# -- BLAS thread counts ---------------------------------------------------------------------

def _blas_counts():
    """Each loaded BLAS library's thread count, in the order of their paths."""
    from threadpoolctl import threadpool_info
    libs = sorted((lib["filepath"], lib["num_threads"]) for lib in threadpool_info()
                  if lib["user_api"] == "blas")
    return [count for _, count in libs]


def _fpl_fit(n_jobs=1, n=400):
    from streamfit import PerturbedLeaderPCA
    from streamfit.simulate import make_spiked_stream
    X = make_spiked_stream(n, 300, n_spikes=5, random_state=0)
    return PerturbedLeaderPCA(5, random_state=0, n_jobs=n_jobs).fit(X)


def _load_every_blas():
    # a first small fit loads every BLAS library the fits use (scipy's may
    # come in lazily), so that the counts compared are of the same libraries
    _fpl_fit(n=20)


def blas_limits_in_another_thread():
    """An FPL fit in one thread, and a user's threadpool_limits(1) block
    entered in another while the fit runs: inside the block BLAS stays at 1
    thread (during the fit and after it ended), and after the block the
    process is back at its count. (The process's own count is used as it
    is: under a threadpool_limits block of the main thread around all this,
    OpenBLAS 0.3.30's counts read as set per thread.)"""
    from threadpoolctl import threadpool_limits
    _load_every_blas()
    outer = _blas_counts()
    if not outer or max(outer) < 2:
        return {"result": "skipped", "why": f"no BLAS with more than one thread: {outer}"}
    fitting = threading.Thread(target=_fpl_fit, kwargs={"n": 1000})
    fitting.start()
    time.sleep(0.3)
    seen = []
    with threadpool_limits(1, user_api="blas"):
        mid_fit = fitting.is_alive()
        while fitting.is_alive():
            seen.append(tuple(_blas_counts()))
            time.sleep(0.005)
        fitting.join()
        seen.append(tuple(_blas_counts()))           # after the fit ended
    after = _blas_counts()
    inside = sorted(set(seen))
    ok = inside == [tuple(1 for _ in outer)] and after == outer
    return {"result": "correct" if ok else "wrong", "inside": inside, "after": after,
            "mid_fit": mid_fit,
            "why": f"the user's block saw {inside}, and after it the process has {after} "
                   f"(it had {outer}; the block began mid-fit: {mid_fit})"}


def fork_keeps_blas_count(how="os.fork"):
    """A child forked while an FPL partial_fit runs in another thread has the
    BLAS thread count of its parent, not one a call took for itself. (The fit
    is initialised first: a fork while OpenBLAS's own threads run a call --
    the first decision's LAPACK solve -- can deadlock in OpenBLAS's fork
    handler, with numpy alone too; the trial loop itself calls no BLAS.)"""
    from streamfit import PerturbedLeaderPCA
    from streamfit.simulate import make_spiked_stream
    _load_every_blas()
    outer = _blas_counts()
    if not outer or max(outer) < 2:
        return {"result": "skipped", "why": f"no BLAS with more than one thread: {outer}"}
    X = make_spiked_stream(1000, 300, n_spikes=5, random_state=0)
    est = PerturbedLeaderPCA(5, random_state=0, solver="krylov").fit(X[:10])
    fitting = threading.Thread(target=est.partial_fit, args=(X[10:],))
    fitting.start()
    time.sleep(0.3)
    try:
        mid_fit = fitting.is_alive()
        out = _in_child(how, lambda: {"counts": _blas_counts()})
    finally:
        fitting.join()
    if "counts" not in out:
        return out
    ok = out["counts"] == outer
    return {"result": "correct" if ok else "wrong", "mid_fit": mid_fit, **out,
            "why": f"the child has {out['counts']} BLAS threads, its parent {outer} (forked "
                   f"mid-fit: {mid_fit})"}


# -- a fork multiprocessing worker ----------------------------------------------------------

def _worker_fit(n_jobs):
    est = _fpl_fit(n_jobs)
    return int(est.n_trials_)


def fit_in_fork_worker(n_jobs=-1):
    """An FPL fit in a fork-multiprocessing worker with warnings as errors
    (the worker inherits the filter): no warning, e.g. joblib's about loky."""
    import multiprocessing
    import warnings
    warnings.simplefilter("error")
    try:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            trials = pool.apply(_worker_fit, (n_jobs,))
    except Exception as exc:
        return _refused(exc)
    return {"result": "correct" if trials == 400 else "wrong", "why": f"{trials} trials"}


# -- by name ---------------------------------------------------------------------------------

CASES = {
    **{f"LinearSGD records state = {v}, unpickled -> learn": (linear_records_filled,
                                                             (v, "learn")) for v in FILL},
    **{f"LinearSGD records state = {v}, unpickled -> learn_one": (linear_records_filled,
                                                                 (v, "learn_one"))
       for v in FILL},
    **{f"OnlineQuantileRegressor state = {v}, unpickled -> partial_fit":
       (estimator_state_filled, (v,)) for v in FILL},
    "LinearSGD schedule window = NaN, unpickled -> learn": (window_nan, ("kernel",)),
    "OnlineQuantileRegressor params window = NaN, unpickled -> partial_fit":
        (window_nan, ("estimator",)),
    "LinearSGD window values = NaN, unpickled -> learn": (window_values_nan, ("kernel",)),
    "OnlineQuantileRegressor window values = NaN, unpickled -> partial_fit":
        (window_values_nan, ("estimator",)),
    "TopK block edited to non-orthonormal, pickled -> solve(tol)": (topk_block_edited, ()),
    "TopK updated from 4 threads": (topk_threads, ()),
    "LinearSGD fed 80,000 rows from 4 threads": (linear_state_threads, ()),
    "os.fork mid partial_fit (quantile): pickle.dumps in child": (fork_quantile, ("os.fork",)),
    "'fork' Process mid partial_fit (quantile): pickle.dumps in child":
        (fork_quantile, ("mp-fork",)),
    "os.fork mid partial_fit (FPL): child partial_fit / fit": (fork_pca, ("os.fork",)),
    "'fork' Process mid partial_fit (FPL): child partial_fit / fit": (fork_pca, ("mp-fork",)),
    "os.fork mid learn_one (river PCA): child learn_one / clone": (fork_river_pca,
                                                                  ("os.fork",)),
    "os.fork mid partial_fit (GD): child carries on whole": (fork_capped, ("os.fork",)),
    "os.fork mid FPL fit: child's BLAS thread count": (fork_keeps_blas_count, ("os.fork",)),
    "threadpool_limits(1) in one thread, FPL fit in another": (blas_limits_in_another_thread,
                                                               ()),
    "FPL fit (n_jobs=-1) in a fork Pool worker, -W error": (fit_in_fork_worker, (-1,)),
    "FPL fit (n_jobs=None) in a fork Pool worker, -W error": (fit_in_fork_worker, (None,)),
}


def run(name):
    func, args = CASES[name]
    return func(*args)


def by_name(case):
    """Case function for ``_isolated.run_cases``: ``{"name": ...}``."""
    return run(case["name"])


if __name__ == "__main__":
    import json
    print("@@" + json.dumps(run(sys.argv[1])), flush=True)
