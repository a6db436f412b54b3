"""map_pinned (streamfit.dask._chains), the loop under parallel_quantile_fit
and best_gain, on a two-process LocalCluster: a task that finished and then
lost its result with its worker, before the result was taken, is fitted again
-- not waited for (the scheduler would recompute it on the dead worker it is
pinned to, forever), not raised as 'cancelled for reason: unknown'."""
import os
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from streamfit.dask._chains import map_pinned  # noqa: E402

from .conftest import by_value, make_cluster  # noqa: E402


def _block(i):
    return np.full(10, float(i))


def _total(block):
    return float(block.sum())


def test_a_result_lost_with_its_worker_before_it_is_taken_is_fitted_again():
    with make_cluster() as cluster, distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        killed, results, order = [], {}, []

        def compute_block(i, place, attempt):
            return [c.submit(by_value(_block), i, pure=False)], None

        def submit_task(i, block, workers, attempt):
            task = c.submit(by_value(_total), block[0], workers=workers,
                            allow_other_workers=False, pure=False)
            if i == 0 and not killed:
                # let it finish, then kill the worker that holds its result
                task.result()
                holder = sorted(c.who_has(task)[task.key])[0]
                c.submit(os._exit, 1, workers=[holder], allow_other_workers=False, pure=False)
                deadline = time.monotonic() + 20
                while holder in c.nthreads() and time.monotonic() < deadline:
                    time.sleep(0.05)
                killed.append(holder)
            return task

        def on_result(i, value):
            order.append(i)
            results[i] = value

        map_pinned(c, 4, compute_block, submit_task, on_result, 2, str, "test", 10)
    assert killed and killed[0] is not None
    assert results == {i: 10.0 * i for i in range(4)}
    assert sorted(order) == [0, 1, 2, 3]            # each result taken once


def _step(state, block):
    return state + float(block.sum())


def test_a_final_state_lost_with_its_worker_is_a_clear_error_not_a_hang(monkeypatch):
    """drive_chains (under stream_fit and fit_groups): the last step's state
    lost with its worker between the last wait and taking it. A plain gather
    would wait forever for a recomputation pinned to the dead worker; the
    call must fail with WorkerLost, naming the call, within its timeouts."""
    from streamfit.dask import _chains
    from streamfit.dask._client import WorkerLost

    with make_cluster() as cluster, distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        n_blocks, killed, last = 3, [], []
        settle = _chains.settle

        def settle_then_kill(client, futures, what, *args, **kwargs):
            futures = list(futures)
            settle(client, futures, what, *args, **kwargs)
            if what.endswith(f"block {n_blocks - 1}") and last and futures == last[-1]:
                # the final wait is over: kill the worker holding the state
                holder = sorted(c.who_has(futures[0])[futures[0].key])[0]
                c.submit(os._exit, 1, workers=[holder], allow_other_workers=False,
                         pure=False)
                deadline = time.monotonic() + 20
                while holder in c.nthreads() and time.monotonic() < deadline:
                    time.sleep(0.05)
                killed.append(holder)

        monkeypatch.setattr(_chains, "settle", settle_then_kill)

        def compute_block(i, place):
            return [c.submit(by_value(_block), i, pure=False)], None

        def submit_step(chain, i, state, block, workers):
            step = c.submit(by_value(_step), state, block[0], workers=workers,
                            allow_other_workers=False, pure=False)
            if i == n_blocks - 1:
                last.append([step])
            return step

        start = time.monotonic()
        with pytest.raises(WorkerLost, match="test run"):
            _chains.drive_chains(c, n_blocks, compute_block, submit_step, [0.0],
                                 lambda i: f"block {i}", "test run", 1, 10)
        assert killed and time.monotonic() - start < 60


def test_only_blocks_made_from_scratch_are_placed(client):
    """submit_block asks the placer only for a block it restricts to a
    worker: a block of persisted data is computed where the data is, and is
    not reported as placed (a false pin would refit it when that worker
    leaves, under its data's own keys)."""
    import dask.array as da

    from streamfit.dask._blocks import row_blocks, submit_block

    asked = []

    def place():
        asked.append(1)
        return sorted(client.nthreads())[0]

    fresh = row_blocks(da.from_array(np.arange(40.0).reshape(20, 2), chunks=10))
    futures, worker = submit_block(client, fresh.items[1], place, "test-block-fresh")
    assert worker == sorted(client.nthreads())[0] and asked == [1]
    assert [f.key for f in futures] == ["test-block-fresh-0"]
    np.testing.assert_array_equal(futures[0].result(), np.arange(20.0, 40.0).reshape(10, 2))
    assert list(client.who_has(futures)[futures[0].key]) == [worker]

    held = client.persist(da.from_array(np.arange(40.0).reshape(20, 2), chunks=10))
    futures, worker = submit_block(client, row_blocks(held).items[0], place, "test-block-held")
    assert worker is None and asked == [1]
    np.testing.assert_array_equal(futures[0].result(), np.arange(20.0).reshape(10, 2))
