"""The experiments' replications as Dask tasks: a LocalCluster of two worker
processes gives the sequential run's numbers, task failures reach the caller,
and a dead scheduler address fails fast with a clear error."""
import pathlib
import site
import sys
import types

import distributed
import pytest

from streamfit.experiments import get_experiment, open_runner
from streamfit.experiments._runner import DaskRunner, SequentialRunner, Task


def _fails(seed):
    raise ValueError(f"task {seed} failed on purpose")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        # Tasks below are functions of this module, sent by reference; CI also
        # runs the suite from outside the source tree (against the installed
        # wheel), so the workers are given the repository root to import it from.
        c.run(site.addsitedir, str(pathlib.Path(__file__).resolve().parents[2]))
        yield c


def test_dask_equals_sequential(client):
    exp = get_experiment("qr-fig4")
    params = exp.params("tiny", reps=2)
    tasks = exp.tasks(params)
    assert len(tasks) == 4          # two SNRs, two seeds
    seq, _ = SequentialRunner().gather(SequentialRunner().submit(tasks))
    runner = DaskRunner(client)
    assert runner.workers == 2
    par, seconds = runner.gather(runner.submit(tasks))
    assert seconds > 0
    assert par == seq               # bit for bit: floats compare equal
    a, b = exp.analyse(params, seq), exp.analyse(params, par)
    assert a.tables == b.tables and a.verdict == b.verdict
    # the runs depend on the seed, so equality is not vacuous
    assert seq[0]["statistical"] != seq[1]["statistical"]


def test_pca_experiment_equal_on_dask(client):
    exp = get_experiment("pca-noise")
    params = exp.params("tiny")
    tasks = exp.tasks(params)
    seq, _ = SequentialRunner().gather(tasks)
    runner = DaskRunner(client)
    par, _ = runner.gather(runner.submit(tasks))
    assert par == seq
    assert len(set(seq)) > 1


def test_worker_error_reaches_the_caller(client):
    runner = DaskRunner(client)
    pending = runner.submit([Task(_fails, {}, 3)])
    with pytest.raises(ValueError, match="task 3 failed on purpose"):
        runner.gather(pending)


def test_unimportable_task_fails_with_a_clear_error_not_a_hang():
    # A function whose module the workers cannot import kills the worker that
    # unpickles it; its nanny retires it and the scheduler would wait forever.
    module = types.ModuleType("streamfit_test_nowhere")
    exec("def task(seed):\n    return seed\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as c:
            runner = DaskRunner(c, timeout=3.0)
            with pytest.raises(RuntimeError, match="no worker for 3 s"):
                runner.gather(runner.submit([Task(module.task, {}, 1)]))
    finally:
        del sys.modules[module.__name__]


def test_sequential_error_reaches_the_caller():
    with pytest.raises(ValueError, match="task 1 failed"):
        SequentialRunner().gather([Task(_fails, {}, 1)])


def test_dead_scheduler_address_fails_fast():
    with pytest.raises(ConnectionError, match="no Dask scheduler answered"):
        with open_runner(scheduler="tcp://127.0.0.1:9", timeout=2):
            pass


def _scaled(x, seed):
    return x * seed


def test_in_process_runner_runs_tasks_in_order():
    with open_runner(workers=0) as runner:
        assert runner.workers == 0
        out, _ = runner.gather(runner.submit([Task(_scaled, {"x": 3}, s) for s in (2, 5, 1)]))
    assert out == [6, 15, 3]
