"""stream_fit on a real two-process LocalCluster: bit-for-bit equality with
partial_fit in memory for every estimator, no chunk moved, errors and faults
reaching the caller with the estimator unchanged, bad input refused."""
import copy
import inspect
import json
import os
import pickle
import subprocess
import sys
import threading
import time

import dask.array as da
import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from streamfit import (FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA,  # noqa: E402
                       OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                       PerturbedLeaderPCA)
from streamfit.dask import stream_fit  # noqa: E402
from streamfit.simulate import (make_dense_stream, make_linear_stream,  # noqa: E402
                                make_spiked_stream)

from .conftest import (TransferLog, assert_same_state, by_value, generated_stream,  # noqa: E402
                       make_cluster, pinned_stream, task_workers, worker_only_array)

N, D, CHUNK = 1000, 5, 230          # chunks of 230, 230, 230, 230, 80 rows
REGRESSORS = {
    "qr-single": lambda: OnlineQuantileRegressor(0.3),
    "qr-single-avg": lambda: OnlineQuantileRegressor(0.3, average=True),
    # 64 does not divide 230: rows wait for the next chunk's batch
    "qr-batch": lambda: OnlineQuantileRegressor(0.3, mode="batch", batch_size=64),
    "qr-batch-avg": lambda: OnlineQuantileRegressor(0.7, mode="batch", batch_size=64,
                                                    average=True),
    "qr-batch-whole": lambda: OnlineQuantileRegressor(0.5, mode="batch"),
    "qr-storage": lambda: OnlineQuantileRegressor(0.3, mode="storage"),
    "ls": lambda: OnlineLeastSquaresRegressor(),
    "ls-avg": lambda: OnlineLeastSquaresRegressor(average=True),
}
N_PCA, P, K, CHUNK_PCA = 300, 16, 2, 70
PCAS = {
    "fpl-fixed": lambda: PerturbedLeaderPCA(K, random_state=1),
    "fpl-random-walk": lambda: PerturbedLeaderPCA(K, noise="random_walk", random_state=2),
    "fpl-independent": lambda: PerturbedLeaderPCA(K, noise="independent", random_state=3),
    "fpl-krylov": lambda: PerturbedLeaderPCA(K, solver="krylov", random_state=4),
    "ftl": lambda: FollowTheLeaderPCA(K),
    "meg": lambda: MatrixEGPCA(K, random_state=5),
    "gd": lambda: MatrixGDPCA(K, random_state=6),
}


@pytest.fixture(scope="module")
def regression():
    X, y, _ = make_linear_stream(N, D, tau=0.3, snr=5.0, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def rows():
    return make_spiked_stream(N_PCA, P, n_spikes=3, random_state=0)


def in_memory(est, chunks, method="partial_fit"):
    for args in chunks:
        getattr(est, method)(*args)
    return est


def row_chunks(n, size, *arrays):
    return [tuple(a[s:s + size] for a in arrays) for s in range(0, n, size)]


@pytest.mark.parametrize("name", REGRESSORS)
def test_regressors_equal_in_memory_fit(client, regression, name):
    X, y = regression
    est = REGRESSORS[name]()
    out = stream_fit(est, da.from_array(X, chunks=(CHUNK, 2)), da.from_array(y, chunks=CHUNK),
                     client=client)
    assert out is est                       # updated in place, like partial_fit
    ref = in_memory(REGRESSORS[name](), row_chunks(N, CHUNK, X, y))
    assert_same_state(est, ref)
    assert est.n_samples_seen_ == N


@pytest.mark.parametrize("name", PCAS)
def test_pca_equal_in_memory_fit(client, rows, name):
    est = stream_fit(PCAS[name](), da.from_array(rows, chunks=CHUNK_PCA), client=client)
    ref = in_memory(PCAS[name](), row_chunks(N_PCA, CHUNK_PCA, rows))
    assert_same_state(est, ref)
    assert est.n_trials_ == N_PCA and est.cumulative_gain_ == ref.cumulative_gain_


def test_dense_instances_go_to_partial_fit_dense(client):
    Xs = make_dense_stream(60, 8, random_state=0)
    est = stream_fit(PerturbedLeaderPCA(2, random_state=0), da.from_array(Xs, chunks=(25, 4, 8)),
                     client=client)
    ref = in_memory(PerturbedLeaderPCA(2, random_state=0), row_chunks(60, 25, Xs),
                    "partial_fit_dense")
    assert_same_state(est, ref)
    assert est.instances_ == "dense"


def test_large_state_is_scattered_once(client):
    # S and N, n x n with n = 300: a 1.4 MB state, sent ahead of the chain
    # rather than inside its first task
    X = make_spiked_stream(60, 300, n_spikes=2, random_state=1)
    est = PerturbedLeaderPCA(2, random_state=0).partial_fit(X[:10])
    assert len(pickle.dumps(est)) > (1 << 20)
    stream_fit(est, da.from_array(X[10:], chunks=20), client=client)
    ref = in_memory(PerturbedLeaderPCA(2, random_state=0).partial_fit(X[:10]),
                    row_chunks(50, 20, X[10:]))
    assert_same_state(est, ref)


def test_stream_continues_a_fitted_estimator(client, regression):
    X, y = regression
    est = OnlineQuantileRegressor(0.3, average=True).partial_fit(X[:300], y[:300])
    stream_fit(est, da.from_array(X[300:], chunks=CHUNK), da.from_array(y[300:], chunks=CHUNK),
               client=client)
    ref = OnlineQuantileRegressor(0.3, average=True).partial_fit(X[:300], y[:300])
    ref = in_memory(ref, row_chunks(N - 300, CHUNK, X[300:], y[300:]))
    assert_same_state(est, ref)


def _frame(X, y, npartitions):
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    df["target"] = y
    return dd.from_pandas(df, npartitions=npartitions, sort=False)


def test_dataframe_partitions_equal_in_memory_fit(client, regression):
    X, y = regression
    ddf = _frame(X, y, 4)
    parts = [p for p in ddf.to_delayed()]
    pieces = [part.compute() for part in parts]
    ref = in_memory(OnlineQuantileRegressor(0.3, average=True),
                    [(p.drop(columns=["target"]), p["target"]) for p in pieces])
    by_name = stream_fit(OnlineQuantileRegressor(0.3, average=True), ddf, "target",
                         client=client)
    assert_same_state(by_name, ref)
    features = ddf[[c for c in ddf.columns if c != "target"]]
    by_series = stream_fit(OnlineQuantileRegressor(0.3, average=True), features,
                           ddf["target"], client=client)
    assert_same_state(by_series, ref)


def test_dataframe_without_y_for_pca(client, rows):
    ddf = dd.from_pandas(pd.DataFrame(rows), npartitions=3, sort=False)
    est = stream_fit(FollowTheLeaderPCA(K), ddf, client=client)
    pieces = [part.compute() for part in ddf.to_delayed()]
    assert_same_state(est, in_memory(FollowTheLeaderPCA(K), [(p,) for p in pieces]))


@pytest.mark.skipif("sample_weight" not in inspect.signature(
    OnlineQuantileRegressor.partial_fit).parameters,
    reason="partial_fit(sample_weight=...) not in this streamfit yet (issue: quantile rewrite)")
def test_sample_weight_travels_with_its_chunk(client, regression):
    X, y = regression
    w = np.random.default_rng(0).uniform(0.5, 2.0, N)
    est = stream_fit(OnlineQuantileRegressor(0.3), da.from_array(X, chunks=CHUNK),
                     da.from_array(y, chunks=CHUNK), sample_weight=da.from_array(w, chunks=CHUNK),
                     client=client)
    ref = OnlineQuantileRegressor(0.3)
    for Xc, yc, wc in row_chunks(N, CHUNK, X, y, w):
        ref.partial_fit(Xc, yc, sample_weight=wc)
    assert_same_state(est, ref)


# -- the data stays where it is ------------------------------------------------------------
def test_chunks_are_computed_on_workers_only(client):
    X = worker_only_array((600, 6), 100)
    with pytest.raises(ValueError):
        X.compute(scheduler="sync")          # the guard works outside a worker
    est = stream_fit(FollowTheLeaderPCA(2), X, client=client)
    assert est.n_trials_ == 600


def test_no_chunk_is_transferred(client):
    # Chunks large against the state (8 x 5000 x 8 bytes vs < 2 kB), several
    # of them per worker: a scheduler free to place the fits moves some.
    X = worker_only_array((40_000, 8), 5000)
    y = worker_only_array((40_000,), 5000, seed=8)
    with TransferLog(client) as log:
        est = stream_fit(OnlineQuantileRegressor(0.5), X, y, client=client)
    assert est.n_samples_seen_ == 40_000
    # the only data sent anywhere (to the client or another worker) are the
    # states and y's chunks: never a chunk of X
    assert any(key.startswith("stream_fit-") for key in log.moved)     # the log is read
    # a block made from scratch is made under a key of the call's
    # ("stream_fit-block-..."; its X part "...-0") on the worker that fits it
    assert not [key for key in log.moved if X.name in key or "-block-" in key], log.moved
    assert all(key.startswith("stream_fit-") or y.name in key for key in log.moved), log.moved


def test_generated_chunks_are_not_moved(client):
    X, y = generated_stream(6, 5000, 8, seed0=90)
    with TransferLog(client) as log:
        est = stream_fit(OnlineQuantileRegressor(0.5), X, y, client=client)
    assert not [key for key in log.moved if not key.startswith("stream_fit-")
                or "-block-" in key], log.moved
    ref = OnlineQuantileRegressor(0.5).fit(X.compute(), y.compute())
    assert_same_state(est, ref)


def test_consecutive_chunks_on_a_worker_are_fitted_by_one_task(client):
    # 3 partitions of 2000 rows on the workers in turn, cut into chunks of
    # 250 there: 24 chunks in 3 runs, each run one step on its worker
    X, y, where = pinned_stream(client, 3, 2000, 6, 250, seed0=40)
    with TransferLog(client) as log, distributed.get_task_stream(client=client) as ts:
        est = stream_fit(OnlineQuantileRegressor(0.5, average=True), X, y, client=client)
    ran = task_workers(ts, "stream_fit-")
    # each run's chunks are put together as one value on their worker
    # ("stream_fit-run-..."), which the step then takes there
    steps = {k: w for k, w in ran.items() if not k.startswith("stream_fit-run-")}
    bundles = {k: w for k, w in ran.items() if k.startswith("stream_fit-run-")}
    runs = [w for i, w in enumerate(where) if i == 0 or where[i - 1] != w]
    assert sorted(steps.values()) == sorted(runs), (steps, runs)
    assert sorted(bundles.values()) == sorted(runs), (bundles, runs)
    assert all(key.startswith("stream_fit-") and not key.startswith("stream_fit-run-")
               for key in log.moved), log.moved
    Xl, yl = client.compute([X, y], sync=True)
    ref = in_memory(OnlineQuantileRegressor(0.5, average=True), row_chunks(6000, 250, Xl, yl))
    assert_same_state(est, ref)


def test_chunks_made_from_scratch_are_made_and_fitted_in_runs(client, regression):
    # 1000 rows in chunks of 10: 100 chunks of a few hundred bytes, made
    # on one worker in one run and fitted by one task
    X, y = regression
    with distributed.get_task_stream(client=client) as ts:
        est = stream_fit(OnlineQuantileRegressor(0.3), da.from_array(X, chunks=10),
                         da.from_array(y, chunks=10), client=client)
    assert len(task_workers(ts, "stream_fit-").keys() - {k for k in task_workers(
        ts, "stream_fit-block-")}) == 1
    assert_same_state(est, in_memory(OnlineQuantileRegressor(0.3), row_chunks(N, 10, X, y)))


def test_a_from_array_block_sends_its_chunk_not_the_array(client):
    # 16 MB in memory here, 2 MB a chunk: Dask warns (an error under this
    # suite's filterwarnings) when a graph over 10 MB is sent, as sending
    # from_array's whole graph with every block would
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((200_000, 10)), rng.standard_normal(200_000)
    est = stream_fit(OnlineQuantileRegressor(0.5), da.from_array(X, chunks=25_000),
                     da.from_array(y, chunks=25_000), client=client)
    assert est.n_samples_seen_ == 200_000


# -- errors and faults ---------------------------------------------------------------------
def test_error_on_a_worker_leaves_the_estimator_unchanged(client, regression):
    X, y = regression
    X = X.copy()
    X[N - 50, 2] = np.nan                       # a bad row in the last chunk
    est = OnlineQuantileRegressor(0.3, average=True).partial_fit(X[:100], y[:100])
    before = copy.deepcopy(est)
    with pytest.raises(ValueError, match="NaN") as info:
        stream_fit(est, da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK),
                   client=client)
    assert any("chunk 4 of 5 (rows 920..999)" in note for note in info.value.__notes__)
    assert_same_state(est, before)


def _fail_on_third(block, block_info=None):
    if block_info[0]["chunk-location"][0] == 2:
        raise RuntimeError("the storage is unreadable")
    return block


def test_error_computing_a_chunk_names_it(client, rows):
    X = da.from_array(rows, chunks=CHUNK_PCA).map_blocks(by_value(_fail_on_third), dtype=float)
    est = FollowTheLeaderPCA(K)
    with pytest.raises(RuntimeError, match="unreadable") as info:
        stream_fit(est, X, client=client)
    assert any("chunk 2 of 5" in note for note in info.value.__notes__)
    assert not hasattr(est, "state_")


def _die_once(block, marker, block_info=None):
    # the worker computing chunk 3 dies the first time (the marker file
    # makes the second attempt succeed)
    if block_info[0]["chunk-location"][0] == 3 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return block


def test_worker_killed_mid_run_fails_clearly_or_gives_the_same_result(tmp_path, rows):
    marker = str(tmp_path / "died")
    with make_cluster() as cluster, distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        X = da.from_array(rows, chunks=CHUNK_PCA).map_blocks(by_value(_die_once), marker, dtype=float)
        est = PerturbedLeaderPCA(K, random_state=0)
        before = copy.deepcopy(est)
        try:
            stream_fit(est, X, client=c, timeout=5)
        except RuntimeError as exc:
            # the dead worker held a state or a chunk a fit was pinned to
            assert "left (died or was retired)" in str(exc) and "nothing was kept" in str(exc)
            assert_same_state(est, before)
            failed = True
        else:
            failed = False
    assert os.path.exists(marker)               # a worker did die
    if not failed:      # it held nothing the chain still needed: Dask re-ran the chunk
        ref = in_memory(PerturbedLeaderPCA(K, random_state=0),
                        row_chunks(N_PCA, CHUNK_PCA, rows))
        assert_same_state(est, ref)


def _slow(block):
    time.sleep(0.5)
    return block


def _slow_marked(block, marker):
    if block.size:              # (not the empty block dask computes its meta on)
        open(marker, "a").close()
    time.sleep(0.5)
    return block


def test_estimator_is_not_locked_while_the_cluster_works(client, regression, tmp_path):
    """stream_fit locks the estimator only to take its state and to commit:
    meanwhile its attributes are readable and its calls run (issue 40, case
    7: the lock was held for the whole run). A call that changed it makes
    the commit refuse, keeping that call's update (neither is lost)."""
    X, y = regression
    est = OnlineQuantileRegressor(0.3).partial_fit(X[:200], y[:200])
    marker = tmp_path / "computing"
    Xd = da.from_array(X, chunks=CHUNK).map_blocks(by_value(_slow_marked), str(marker),
                                                   dtype=float)
    outcome = {}

    def run():
        try:
            stream_fit(est, Xd, da.from_array(y, chunks=CHUNK), client=client)
        except BaseException as exc:         # noqa: BLE001 - handed to the test
            outcome["error"] = exc
        outcome["returned"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not marker.exists():              # a worker is computing a chunk
        assert time.monotonic() < deadline and thread.is_alive(), outcome
        time.sleep(0.02)
    seen = est.n_samples_seen_              # readable while the run goes on
    est.partial_fit(X[200:300], y[200:300])    # and callable
    called = time.monotonic()
    thread.join(60)
    assert not thread.is_alive()
    assert seen == 200 and called < outcome["returned"]
    assert isinstance(outcome.get("error"), RuntimeError), outcome
    assert "changed while its chunks were fitted" in str(outcome["error"])
    ref = OnlineQuantileRegressor(0.3).partial_fit(X[:200], y[:200]).partial_fit(X[200:300],
                                                                               y[200:300])
    assert_same_state(est, ref)             # the other call's update, and nothing else

    # untouched meanwhile: the run commits as before
    est = OnlineQuantileRegressor(0.3).partial_fit(X[:200], y[:200])
    stream_fit(est, da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK),
               client=client)
    assert est.n_samples_seen_ == 200 + N


def test_restart_mid_run_raises_and_leaves_the_estimator_unchanged(rows):
    with make_cluster() as cluster, distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        X = da.from_array(np.tile(rows, (4, 1)), chunks=30).map_blocks(by_value(_slow), dtype=float)
        est = FollowTheLeaderPCA(K)
        outcome = {}

        def run():
            try:
                stream_fit(est, X, client=c)
            except BaseException as exc:         # noqa: BLE001 - handed to the test
                outcome["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        time.sleep(2.0)
        c.restart(timeout=30)
        thread.join(60)
        assert not thread.is_alive()
    assert isinstance(outcome.get("error"), RuntimeError), outcome
    assert "restarted" in str(outcome["error"])
    assert not hasattr(est, "state_")           # nothing partial was published


def test_cluster_without_workers_fails_within_the_timeout(rows):
    with make_cluster() as cluster, distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        X = da.from_array(np.tile(rows, (4, 1)), chunks=30).map_blocks(by_value(_slow), dtype=float)
        est = FollowTheLeaderPCA(K)
        outcome = {}

        def run():
            try:
                stream_fit(est, X, client=c, timeout=2)
            except BaseException as exc:         # noqa: BLE001 - handed to the test
                outcome["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        time.sleep(2.0)
        cluster.scale(0)                        # every worker leaves
        thread.join(30)
        assert not thread.is_alive()
    assert isinstance(outcome.get("error"), RuntimeError), outcome
    # whichever the wait noticed first: a worker holding the chain's chunk
    # or state left, or none is left at all
    message = str(outcome["error"])
    assert "no worker" in message or "left (died or was retired)" in message, message
    assert not hasattr(est, "state_")


def _spawn(*args):
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_scheduler_lost_mid_run_fails_within_the_timeout(tmp_path, rows):
    # a scheduler in its own process (as on a real cluster), killed mid-run
    info = tmp_path / "scheduler.json"
    scheduler = _spawn("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                       "--dashboard-address", ":0", "--scheduler-file", str(info))
    worker = None
    try:
        for _ in range(300):
            if info.exists() and info.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        worker = _spawn("distributed.cli.dask_worker", address, "--nthreads", "1",
                        "--no-nanny", "--death-timeout", "5", "--host", "127.0.0.1")
        with distributed.Client(address, set_as_default=False, timeout=30) as c:
            c.wait_for_workers(1, timeout=30)
            X = da.from_array(np.tile(rows, (4, 1)), chunks=30).map_blocks(by_value(_slow), dtype=float)
            est = FollowTheLeaderPCA(K)
            outcome = {}

            def run():
                try:
                    stream_fit(est, X, client=address, timeout=3)
                except BaseException as exc:         # noqa: BLE001 - handed to the test
                    outcome["error"] = exc
                outcome["at"] = time.monotonic()

            thread = threading.Thread(target=run)
            thread.start()
            time.sleep(3.0)
            lost = time.monotonic()
            scheduler.kill()
            thread.join(30)
            assert not thread.is_alive()
    finally:
        for proc in (scheduler, worker):
            if proc is not None:
                proc.kill()
                proc.wait(10)
    assert isinstance(outcome.get("error"), ConnectionError), outcome
    assert "lost the connection to the Dask scheduler" in str(outcome["error"])
    assert outcome["at"] - lost < 10
    assert not hasattr(est, "state_")


# -- bad input -----------------------------------------------------------------------------
def test_unknown_chunk_sizes_are_refused(client, regression):
    X, y = regression
    Xd = da.from_array(X, chunks=CHUNK)
    unknown = Xd[Xd[:, 0] > 0]
    est = OnlineQuantileRegressor(0.3)
    with pytest.raises(ValueError, match=r"X has unknown chunk sizes.*compute_chunk_sizes"):
        stream_fit(est, unknown, da.from_array(y, chunks=CHUNK), client=client)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        stream_fit(est, _frame(X, y, 3).to_dask_array(), client=client)
    assert not hasattr(est, "_state_")


def test_misaligned_y_is_refused(client, regression):
    X, y = regression
    Xd = da.from_array(X, chunks=CHUNK)
    est = OnlineQuantileRegressor(0.3)
    with pytest.raises(ValueError, match="y has 999 rows but X has 1000"):
        stream_fit(est, Xd, da.from_array(y[:-1], chunks=CHUNK), client=client)
    with pytest.raises(ValueError, match=r"y's chunks .* differ from X's row chunks"):
        stream_fit(est, Xd, da.from_array(y, chunks=200), client=client)
    ddf = _frame(X, y, 4)
    with pytest.raises(ValueError, match="y has 3 partitions but X has 4"):
        stream_fit(est, ddf, _frame(X, y, 3)["target"], client=client)
    # same partition count, different rows: found on the worker
    left = dd.from_pandas(pd.DataFrame(X), npartitions=4, sort=False).clear_divisions()
    right = dd.from_pandas(pd.Series(y[:-20]), npartitions=4, sort=False).clear_divisions()
    with pytest.raises(ValueError, match="y has .* rows but X has"):
        stream_fit(est, left, right, client=client)
    assert not hasattr(est, "_state_")


def test_bad_arguments_are_refused(client, regression):
    X, y = regression
    Xd, yd = da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    with pytest.raises(TypeError, match="Dask array, DataFrame or Series.*ndarray"):
        stream_fit(OnlineQuantileRegressor(), X, yd, client=client)
    with pytest.raises(TypeError, match="partial_fit"):
        stream_fit(object(), Xd, yd, client=client)
    with pytest.raises(TypeError, match="client must be"):
        stream_fit(OnlineQuantileRegressor(), Xd, yd, client=42)
    with pytest.raises(ValueError, match="prefetch"):
        stream_fit(OnlineQuantileRegressor(), Xd, yd, client=client, prefetch=-1)
    with pytest.raises(ValueError, match="X must be 2-dimensional"):
        stream_fit(OnlineQuantileRegressor(), yd, yd, client=client)
    strings = dd.from_pandas(pd.DataFrame({"a": ["u", "v"] * 5, "b": np.arange(10.0)}),
                             npartitions=2)
    with pytest.raises(TypeError, match="column 'a' must hold real numbers"):
        stream_fit(FollowTheLeaderPCA(1), strings, client=client)
    with pytest.raises(ValueError, match="no column 'nope'"):
        stream_fit(OnlineQuantileRegressor(), _frame(X, y, 2), "nope", client=client)


def test_dead_scheduler_address_fails_fast(regression):
    X, y = regression
    start = time.monotonic()
    # a TimeoutError naming the address, and a ConnectionError as before
    with pytest.raises(TimeoutError, match="no Dask scheduler answered at 'tcp://127.0.0.1:9'"):
        stream_fit(OnlineQuantileRegressor(), da.from_array(X, chunks=CHUNK),
                   da.from_array(y, chunks=CHUNK), client="tcp://127.0.0.1:9", timeout=2)
    assert time.monotonic() - start < 15


# -- which cluster -------------------------------------------------------------------------
def test_scheduler_address_and_default_client(cluster, regression):
    X, y = regression
    Xd, yd = da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    ref = in_memory(OnlineQuantileRegressor(0.3), row_chunks(N, CHUNK, X, y))
    by_address = stream_fit(OnlineQuantileRegressor(0.3), Xd, yd,
                            client=cluster.scheduler_address)
    assert_same_state(by_address, ref)
    with distributed.Client(cluster) as default:      # set as the default client
        with distributed.get_task_stream(client=default) as stream:
            est = stream_fit(OnlineQuantileRegressor(0.3), Xd, yd)
        assert any(str(t["key"]).startswith("stream_fit-") for t in stream.data)
    assert_same_state(est, ref)


def test_no_client_starts_and_closes_a_local_cluster(regression):
    X, y = regression
    assert distributed.client._get_global_client() is None
    est = stream_fit(OnlineQuantileRegressor(0.3), da.from_array(X, chunks=CHUNK),
                     da.from_array(y, chunks=CHUNK))
    assert distributed.client._get_global_client() is None
    assert_same_state(est, in_memory(OnlineQuantileRegressor(0.3), row_chunks(N, CHUNK, X, y)))


def test_own_local_cluster_workers_keep_glibcs_heap_trimming():
    # Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 in their workers; the
    # clusters streamfit starts for one call unset it (local_cluster's
    # docstring says why). In a fresh interpreter: a Nanny started earlier in
    # this one has already put the variable in os.environ, which children
    # inherit.
    code = (
        "import os\n"
        "from distributed import Client\n"
        "from streamfit.dask._client import local_cluster\n"
        "if __name__ == '__main__':\n"
        "    with local_cluster(1) as cluster, Client(cluster) as c:\n"
        "        env = c.run(lambda: os.environ.get('MALLOC_TRIM_THRESHOLD_'))\n"
        "        print(sorted(map(repr, env.values())))\n")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['None']", done.stdout


@pytest.mark.parametrize("make", [lambda: OnlineQuantileRegressor(0.3),
                                  lambda: PerturbedLeaderPCA(K, random_state=0)])
def test_result_pickles_and_copies(client, rows, make):
    est = make()
    X = da.from_array(rows, chunks=CHUNK_PCA)
    y = da.from_array(rows[:, 0], chunks=CHUNK_PCA) if est.__class__.__name__.startswith(
        "Online") else None
    stream_fit(est, X[:, 1:] if y is not None else X, y, client=client)
    assert_same_state(pickle.loads(pickle.dumps(est)), est)
    assert_same_state(copy.deepcopy(est), est)


def test_result_pickles_and_resumes(client, regression):
    X, y = regression
    est = stream_fit(OnlineQuantileRegressor(0.3), da.from_array(X[:600], chunks=CHUNK),
                     da.from_array(y[:600], chunks=CHUNK), client=client)
    again = pickle.loads(pickle.dumps(est)).partial_fit(X[600:], y[600:])
    ref = in_memory(OnlineQuantileRegressor(0.3),
                    row_chunks(600, CHUNK, X[:600], y[:600]) + [(X[600:], y[600:])])
    assert_same_state(again, ref)


def test_commit_publishes_a_new_state_object(regression):
    """stream_fit takes the state by a copy of the state object and commits
    by one assignment of the fitted one (no Python lock, no handler swaps):
    the estimator's old state object is left as it was, and a call that
    changed the estimator in between (rows or parameters) makes the commit
    refuse with that call's update kept."""
    from streamfit.dask._state import commit, take_state

    X, y = regression
    est = OnlineQuantileRegressor(0.3).partial_fit(X[:100], y[:100])
    old = est._state
    before = take_state(est)

    def fitted_on(rows):
        model = pickle.loads(before)
        return pickle.dumps(model.partial_fit(X[rows], y[rows]))

    assert commit(est, before, fitted_on(slice(100, 200))) is est
    assert est._state is not old and old.n_samples_seen == 100
    assert est.n_samples_seen_ == 200 and "_lock" not in vars(est)
    assert_same_state(est, OnlineQuantileRegressor(0.3).partial_fit(X[:100], y[:100])
                      .partial_fit(X[100:200], y[100:200]))

    before = take_state(est)
    est.partial_fit(X[200:210], y[200:210])           # rows meanwhile
    with pytest.raises(RuntimeError, match="changed while its chunks were fitted"):
        commit(est, before, fitted_on(slice(200, 300)))
    assert est.n_samples_seen_ == 210
    before = take_state(est)
    est.set_params(average=True)                      # parameters meanwhile
    with pytest.raises(RuntimeError, match="changed while its chunks were fitted"):
        commit(est, before, fitted_on(slice(210, 300)))
    assert est.n_samples_seen_ == 210 and est.average

    # an estimator fitted from scratch on the cluster gets its first state
    fresh = OnlineQuantileRegressor(0.3)
    before = take_state(fresh)
    commit(fresh, before, fitted_on(slice(0, 50)))
    assert fresh.n_samples_seen_ == 50
