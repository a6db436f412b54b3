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

        def compute_block(i):
            return [c.submit(by_value(_block), i, pure=False)]

        def submit_task(i, block, workers):
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
