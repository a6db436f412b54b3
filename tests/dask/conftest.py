"""A real Dask cluster for the streamfit.dask tests: a LocalCluster of two
single-threaded worker processes, and the helpers the test modules share.

The cluster is shared by the whole directory (session scope): starting one
and importing streamfit in its workers costs seconds, and no test harms it
(the tests that kill workers, restart or close the scheduler start their
own)."""
import contextlib
import logging
import sys
import time

import cloudpickle
import numpy as np
import pytest

distributed = pytest.importorskip("distributed")


class by_value:
    """``by_value(obj)``: a function or object of a test module that travels
    to Dask workers by value, and stands for obj (calls, attributes,
    signature).

    The workers cannot import the test modules: CI runs the suite against
    the installed wheel from outside the source tree, and a worker that
    cannot unpickle its task never runs it (the wait would end only at a
    timeout). ``cloudpickle.register_pickle_by_value`` alone does not help:
    distributed pickles a task with pickle, which takes functions and
    classes by reference (it turns to cloudpickle only when the object
    pickled is itself from a registered module), and the scheduler
    unpickles and pickles tasks again on their way to a worker. So this
    wrapper pickles as cloudpickle's by-value bytes of a call that makes the
    wrapper again, around obj: it stays a wrapper on every hop.
    """

    def __init__(self, obj):
        for module in (__name__, getattr(obj, "__module__", None) or type(obj).__module__):
            if module in sys.modules:       # (not on a worker, which needs none)
                cloudpickle.register_pickle_by_value(sys.modules[module])
        self.__dict__.update(_obj=obj, __wrapped__=obj)

    def __call__(self, *args, **kwargs):
        return self._obj(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["_obj"], name)

    def __reduce__(self):
        return cloudpickle.loads, (cloudpickle.dumps(_Remake(self._obj)),)


class _Remake:
    # pickled by cloudpickle (by value, with by_value itself): unpickles to
    # by_value(obj)
    def __init__(self, obj):
        self.obj = obj

    def __reduce__(self):
        return by_value, (self.obj,)


def make_cluster(n_workers=2):
    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                    host="127.0.0.1", dashboard_address=":0",
                                    silence_logs=logging.CRITICAL)


@pytest.fixture(scope="session")
def cluster():
    with make_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def client(cluster):
    with distributed.Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=30)
        yield client


def _block_on_worker(block, seed):
    # computing a chunk anywhere but on a Dask worker fails: get_worker()
    # raises ValueError outside a worker
    distributed.get_worker()
    rng = np.random.default_rng(seed + block.shape[0])
    return rng.standard_normal(block.shape)


def worker_only_array(shape, chunk, seed=7):
    """A Dask array of normal draws whose chunks can only be made on a worker."""
    import dask.array as da

    template = da.zeros(shape, chunks=(chunk,) + tuple(shape[1:]))
    return template.map_blocks(by_value(_block_on_worker), seed, dtype=np.float64)


def _slow_block(block, seconds=0.7):
    import time

    time.sleep(seconds)
    return block


slow_block = by_value(_slow_block)


def _transfer_log(dask_worker):
    # every get_data a worker served (to another worker or to a client)
    return [str(key) for log in dask_worker.transfer_outgoing_log for key in log["keys"]]


class TransferLog:
    """``with TransferLog(client) as log:`` -- log.moved: the keys the workers
    sent anywhere during the block."""

    def __init__(self, client):
        self.client = client

    def __enter__(self):
        self.before = self.client.run(by_value(_transfer_log))
        return self

    def __exit__(self, *exc):
        after = self.client.run(by_value(_transfer_log))
        self.moved = [key for worker, keys in after.items()
                      for key in keys[len(self.before.get(worker, ())):]]


@contextlib.contextmanager
def copies_on_both_workers(client, futures, timeout=30.0):
    """``client.replicate(futures, n=2)`` (the test cluster has two workers),
    entered once every copy is in the sending workers' transfer logs (a
    sender logs a transfer when the receiver acknowledges it, which can come
    after replicate() returns: under load, the copies then showed up in the
    next block's TransferLog) and the scheduler lists both workers as holding
    every key. Dask's Active Memory Manager is paused inside: its
    ReduceReplicas policy drops the extra copies of keys no task waits for
    (every 2 s), and under load it did so before a fit read the placement (CI:
    every partition left on one worker, so one fit task where the test
    expected one per worker)."""
    keys = {str(f.key) for f in futures}
    running = client.amm.running()
    client.amm.stop()
    try:
        client.replicate(futures, n=2)
        deadline = time.monotonic() + timeout
        while True:
            logged = {key for keys_ in client.run(by_value(_transfer_log)).values()
                      for key in keys_}
            holders = client.who_has(futures)
            if keys <= logged and len(holders) == len(keys) and \
                    all(len(w) == 2 for w in holders.values()):
                break
            assert time.monotonic() < deadline, \
                f"copies never logged or listed: {sorted(keys - logged)}, {holders}"
            time.sleep(0.05)
        yield
    finally:
        if running:
            client.amm.start()


def generated_stream(parts, n, d, seed0):
    """A Dask (X, y) whose partition i is made by one generator task
    (``make_linear_stream``, seed seed0 + i) returning (X, y, beta), split by
    getitem tasks: the graph Dask could place on two workers and move a
    partition between them."""
    import dask
    import dask.array as da

    from streamfit.simulate import make_linear_stream

    Xs, ys = [], []
    for i in range(parts):
        X, y, _ = dask.delayed(make_linear_stream, nout=3, pure=True)(
            n, d, tau=0.5, random_state=seed0 + i)
        Xs.append(da.from_delayed(X, (n, d), dtype=np.float64))
        ys.append(da.from_delayed(y, (n,), dtype=np.float64))
    return da.concatenate(Xs), da.concatenate(ys)


def _transitions(dask_scheduler):
    return [(str(t.key), t.start, t.finish) for t in dask_scheduler.transition_log]


def reused_keys(client, prefix):
    """Keys starting with ``prefix`` that the scheduler forgot (cancelled or
    released) and was later given again. A key reused after a cancel races
    the scheduler's late 'cancelled' message, which cancels the new task."""
    gone, reused = set(), set()
    for key, start, finish in client.run_on_scheduler(by_value(_transitions)):
        if not key.startswith(prefix):
            continue
        if finish == "forgotten":
            gone.add(key)
        elif start == "released" and key in gone:
            reused.add(key)
    return sorted(reused)


def assert_same_state(a, b, path="estimator"):
    """Two estimators (or parts of one) hold the same state, bit for bit:
    the same attributes, arrays equal including NaN positions and dtype,
    generators in the same state. Locks and caches are not state."""
    if hasattr(a, "__dict__") and not isinstance(a, np.ndarray) and \
            not isinstance(a, np.random.Generator):
        assert type(a) is type(b), path
        # locks and caches (an estimator's _TRANSIENT_ATTRS, dropped by pickling)
        skip = {"_lock", "_regret_cache", "_gate"} | \
            set(getattr(type(a), "_TRANSIENT_ATTRS", ()))  # (a first call's gate: not state)
        if hasattr(a, "get_params") and "random_state" not in a.get_params():
            # an estimator without random_state (Follow the Leader) holds an
            # unseeded generator it never draws from
            skip.add("_rng")
        va = {k: v for k, v in vars(a).items() if k not in skip}
        vb = {k: v for k, v in vars(b).items() if k not in skip}
        assert va.keys() == vb.keys(), (path, sorted(va.keys() ^ vb.keys()))
        for key in va:
            assert_same_state(va[key], vb[key], f"{path}.{key}")
    elif callable(getattr(a, "to_state", None)):
        # a state object (issue 39): its whole state as plain data; the
        # schedule by value (the pickled form keeps it as an object)
        assert type(a) is type(b), path
        assert_same_state(a.to_state(), b.to_state(), f"{path}.to_state()")
    elif hasattr(type(a), "__slots__") and not hasattr(a, "__dict__"):
        # a state record with slots (the quantile family's Work and Plan)
        assert type(a) is type(b), path
        for name in type(a).__slots__:
            assert hasattr(a, name) == hasattr(b, name), (path, name)
            if hasattr(a, name):
                assert_same_state(getattr(a, name), getattr(b, name), f"{path}.{name}")
    elif isinstance(a, np.random.Generator):
        assert a.bit_generator.state == b.bit_generator.state, path
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        if a.dtype.names:       # a record (NaN fields: compared field by field)
            for name in a.dtype.names:
                assert_same_state(a[name], b[name], f"{path}[{name!r}]")
            return
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same_state(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), path
    else:
        assert a == b and type(a) is type(b), (path, a, b)


def _cut(made, start, rows):
    return made[0][start:start + rows], made[1][start:start + rows]


def pinned_stream(client, parts, n, d, chunk, seed0, workers=None):
    """A Dask (X, y) persisted on the workers: partition p (n rows of
    ``make_linear_stream``, seed seed0 + p) made on workers[p % len], cut
    there into chunks of ``chunk`` rows. Returns X, y and the worker of
    each chunk."""
    import operator

    import dask
    import dask.array as da

    from streamfit.simulate import make_linear_stream

    workers = workers or sorted(client.nthreads())
    Xs, ys, where = [], [], []
    for p in range(parts):
        on = [workers[p % len(workers)]]
        made = client.submit(make_linear_stream, n, d, tau=0.5, random_state=seed0 + p,
                             workers=on, pure=False)
        for s in range(0, n, chunk):
            c = min(chunk, n - s)
            pair = client.submit(by_value(_cut), made, s, c, workers=on, pure=False)
            X = client.submit(operator.getitem, pair, 0, workers=on, pure=False)
            y = client.submit(operator.getitem, pair, 1, workers=on, pure=False)
            Xs.append(da.from_delayed(dask.delayed(X), (c, d), dtype=np.float64))
            ys.append(da.from_delayed(dask.delayed(y), (c,), dtype=np.float64))
            where.append(on[0])
    X, y = client.persist([da.concatenate(Xs), da.concatenate(ys)])
    with client.as_current():
        distributed.wait(distributed.futures_of([X, y]))
    return X, y, where


def task_workers(task_stream, prefix):
    """{key: worker} of the tasks in a task stream whose keys start with prefix."""
    out = {}
    for task in task_stream.data:
        key = task["key"] if isinstance(task["key"], str) else str(task["key"])
        if key.startswith(prefix):
            out[key] = task["worker"]
    return out
