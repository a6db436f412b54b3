"""pytest plugin: the test suite as a Windows run would see it, on Linux.

    PYTHONPATH=.ci python -m pytest -p windows_shaped tests
    (or, for any pytest command: PYTHONPATH=.ci PYTEST_ADDOPTS='-p windows_shaped')

Loaded with -p, it runs before pytest imports any conftest, test module or
streamfit itself. From then on, what streamfit's Python modules and the
project's own files (tests, benchmarks, docs, .ci) import is shaped as
CPython on Windows has it:

- ``signal`` has only the names Windows' signal module has (SIGINT, SIGTERM,
  SIGABRT, SIGFPE, SIGILL, SIGSEGV, signal/getsignal/raise_signal, ...):
  SIGALRM, SIGUSR1, setitimer, alarm, pthread_kill, pthread_sigmask and the
  rest are missing, whatever a future test reaches for;
- ``os`` lacks the POSIX-only process calls (fork, register_at_fork,
  sched_getaffinity, killpg, getuid, ...);
- the POSIX-only modules (``resource``, ``fcntl``, ``pwd``, ...) cannot be
  imported.

So a test that evaluates a POSIX-only name while it is collected (a
parametrize list, a module-level constant) fails collection here, as it
would on a Windows runner; a test that uses one without a skip fails when it
runs; and code that tests for the names with hasattr() (streamfit's deferred
signals, the estimator checks' interrupt check) takes its Windows branch.

Third-party packages and the standard library see the real modules: they
choose their POSIX implementation by sys.platform (psutil imports resource,
distributed calls os.getuid) and would fail here where Windows runs their
other branch. For the process as a whole, the Windows paths that can run
here are forced: no os.fork/forkpty/register_at_fork at all (so compiled
code, such as the kernels' fork handler, takes its no-fork branch too), and
multiprocessing offers only "spawn", its one start method on Windows, as the
default. Child processes a test starts are real POSIX processes. MSVC's
compilation of the kernels is not shaped here: .ci/run tests the portable
path it builds.
"""
import builtins
import importlib
import multiprocessing
import multiprocessing.context
import os
import pathlib
import signal
import sys
import types

# CPython's signal module on Windows (Modules/signalmodule.c under MS_WINDOWS,
# Lib/signal.py): every other public name is POSIX-only
WINDOWS_SIGNAL_NAMES = frozenset({
    "SIGABRT", "SIGFPE", "SIGILL", "SIGINT", "SIGSEGV", "SIGTERM", "SIGBREAK",
    "CTRL_C_EVENT", "CTRL_BREAK_EVENT", "NSIG", "SIG_DFL", "SIG_IGN",
    "default_int_handler", "getsignal", "raise_signal", "set_wakeup_fd", "signal",
    "strsignal", "valid_signals", "Signals", "Handlers",
})

# os names documented as "Availability: Unix" (not Windows) that code reaches
# for: process creation and control, scheduling, identity, limits. (os.kill,
# os.getppid and os.waitpid exist on Windows.)
POSIX_OS_NAMES = frozenset({
    "fork", "forkpty", "register_at_fork", "killpg", "getpgid", "getpgrp", "setpgrp",
    "setpgid", "getsid", "setsid", "nice", "getpriority", "setpriority",
    "sched_getaffinity", "sched_setaffinity", "sched_getscheduler", "sched_setscheduler",
    "sched_param", "getloadavg", "getuid", "geteuid", "getgid", "getegid", "getgroups",
    "setuid", "seteuid", "setgid", "setegid", "uname", "sysconf", "wait3", "wait4",
    "mkfifo", "sync", "WNOHANG", "WIFSTOPPED", "WSTOPSIG", "WIFSIGNALED", "WTERMSIG",
})

# modules that do not exist on Windows
POSIX_MODULES = frozenset({"resource", "fcntl", "termios", "tty", "pty", "grp", "pwd",
                           "posix", "syslog", "crypt", "readline"})

# removed from the real os module, for everyone (see the docstring)
NO_FORK = ("fork", "forkpty", "register_at_fork")

PROJECT = pathlib.Path(__file__).resolve().parents[1]


class _Shaped(types.ModuleType):
    """A view of a module without the names a Windows build lacks; every
    other attribute (and every assignment, e.g. a test's monkeypatch) goes to
    the real module."""

    def __init__(self, real, removed):
        super().__init__(real.__name__, real.__doc__)
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_removed", frozenset(removed))

    def __getattr__(self, name):
        if name in self._removed:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} "
                                 "(POSIX-only: this run is shaped as Windows)")
        return getattr(self._real, name)

    def __setattr__(self, name, value):
        setattr(self._real, name, value)

    def __delattr__(self, name):
        delattr(self._real, name)

    def __dir__(self):
        return [n for n in dir(self._real) if n not in self._removed]

    @property
    def __dict__(self):
        # the real module's names, less the removed ones (a copy: writes go
        # through __setattr__). pytest's monkeypatch reads a module's old
        # value from its __dict__ and deletes the name on undo when it is
        # absent there: with the view's own (nearly empty) dict, undoing a
        # patch of signal.signal deleted signal.signal from the real module
        return {n: v for n, v in vars(self._real).items() if n not in self._removed}

    def __reduce__(self):
        # pickled by name, as a module is (cloudpickle sends a test's
        # functions to Dask workers with their globals): the unpickling
        # process imports its own
        return importlib.import_module, (self.__name__,)


SHAPED = {
    "signal": _Shaped(signal, [n for n in dir(signal)
                               if not n.startswith("_") and n not in WINDOWS_SIGNAL_NAMES]),
    "os": _Shaped(os, [n for n in POSIX_OS_NAMES if hasattr(os, n)]),
}

_real_import = builtins.__import__


def _ours(globals_):
    """Whether an import statement runs in streamfit or in the project's own
    files (tests, benchmarks, docs, .ci), from the importer's globals."""
    if not globals_:
        return False
    if str(globals_.get("__name__", "")).partition(".")[0] == "streamfit":
        return True
    path = globals_.get("__file__")
    if not path:
        return False
    path = pathlib.Path(path).resolve()
    return PROJECT in path.parents and "site-packages" not in path.parts


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0:
        top = name.partition(".")[0]
        if top in SHAPED and _ours(globals):
            module = _real_import(name, globals, locals, fromlist, level)
            # `import os.path` binds the top package, `from os.path import x`
            # reads the submodule: only the top package is a view
            return SHAPED[top] if (module is SHAPED[top]._real) else module
        if top in POSIX_MODULES and _ours(globals):
            raise ModuleNotFoundError(f"No module named {name!r} (POSIX-only: this run is "
                                      "shaped as Windows)", name=name)
    return _real_import(name, globals, locals, fromlist, level)


def _shape():
    builtins.__import__ = _import
    for name in NO_FORK:
        if hasattr(os, name):
            delattr(os, name)
    # Windows has "spawn" only: get_context("fork") raises there, as here
    concrete = getattr(multiprocessing.context, "_concrete_contexts", {})
    for method in ("fork", "forkserver"):
        concrete.pop(method, None)
    multiprocessing.set_start_method("spawn", force=True)


_shape()


def pytest_report_header(config):
    return (f"windows-shaped: the project's signal lacks "
            f"{len(SHAPED['signal']._removed)} POSIX-only names, its os "
            f"{len(SHAPED['os']._removed)}, {len(POSIX_MODULES)} POSIX-only modules "
            f"not importable; no fork anywhere; multiprocessing 'spawn' only")
