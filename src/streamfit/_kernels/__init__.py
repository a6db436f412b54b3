"""The compiled kernels (one extension module per ``csrc/*.pyx``).

Importing this package first loads the OpenMP runtime the kernels link
(through ``_threads``), with a short spin-wait unless the user chose one.
The kernels' parallel regions are short (an FPL trial at n = 1000 runs
~10 of 0.1-1 ms each), and libgomp's threads spin ~300,000 times at each
region's end before they sleep: on a machine with more runnable threads than
cores a region then waits for a spinning thread that holds another's core,
and a trial on two threads took 5-10x its one-thread time (load ~10 on two
cores). With ``GOMP_SPINCOUNT=10000`` (LLVM's runtime: ``KMP_BLOCKTIME=1``,
ms) the threads give their core up after ~10 us, which back-to-back regions
on an idle machine still find them spinning. A runtime reads these once,
when it loads, so they are set only around that first import and removed
again: the user's environment, and any other OpenMP runtime in the process
(scikit-learn's own copy, for one), are left as they were. A user's
``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` wins.
"""
import os

_WAIT_SETTINGS = {"GOMP_SPINCOUNT": "10000", "KMP_BLOCKTIME": "1"}


def _load_runtime():
    chosen = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
    if any(name in os.environ for name in chosen):
        from . import _threads  # noqa: F401
        return
    os.environ.update(_WAIT_SETTINGS)
    try:
        from . import _threads  # noqa: F401
    finally:
        for name in _WAIT_SETTINGS:
            os.environ.pop(name, None)


_load_runtime()
