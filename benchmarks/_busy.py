"""A busy-loop process on one core, ended on every way out of the process
that started it (standard library only).

``with busy_core(): ...`` starts ``python -c 'while True: pass'``-like child
and ends it when the block exits. A benchmark session can also end without
running the block's exit (pytest-timeout's thread method calls
``os._exit``, a crash, ``kill -9``), so the child does not rely on it:

- on Linux it asks the kernel to kill it when its parent dies
  (``prctl(PR_SET_PDEATHSIG, SIGKILL)``);
- everywhere it checks, every ~0.1 s, that its parent is still the process
  that started it, and exits otherwise;
- an ``atexit`` handler kills any child still running when the interpreter
  exits normally.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import time

# The child: dies with its parent (prctl on Linux, and polling its parent's
# pid everywhere), spins otherwise. argv[1]: the parent's pid.
CHILD = r"""
import os, sys
parent = int(sys.argv[1])
if sys.platform.startswith("linux"):
    import ctypes, signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
while os.getppid() == parent:
    for _ in range(200000):
        pass
"""

_children = set()


def _kill(proc):
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:       # pragma: no cover - a stuck kernel
        pass
    _children.discard(proc)


@atexit.register
def _kill_all():
    for proc in list(_children):
        _kill(proc)


@contextlib.contextmanager
def busy_core(on=True, settle=0.2):
    """A busy-loop process on one core for the block (none when `on` is
    False); `settle` seconds for it to start spinning."""
    if not on:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(os.getpid())],
                            stdin=subprocess.DEVNULL)
    _children.add(proc)
    try:
        time.sleep(settle)
        yield proc
    finally:
        _kill(proc)
