"""Running what may crash or hang in a child process, and saying which case did.

- :func:`run_cases` runs ``module.function(case)`` for each case in one child
  Python (``module`` is a file of this folder imported by name, so it uses no
  relative imports), printing each case before it runs. A case that kills the
  child (SIGSEGV, SIGABRT from ``free(): invalid pointer``...) or runs past its
  time limit (a hang: the child is killed with SIGKILL, as a loop that ignores
  SIGINT would need) is recorded as such, and a new child runs the rest. Each
  case's outcome is a dict (see :func:`run_cases`).
- :func:`run_script` runs a script in a child with a time limit and returns
  its last JSON line; a signal or a hang fails the calling test.

Imported relatively by the tests (pytest's importlib mode puts no test folder
on sys.path); the children put this folder on their sys.path.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = "@@case "        # the protocol's lines (an editable install may print its rebuild)

# the child: import the module, then the cases it is given, one after the other
_CHILD = r"""
import faulthandler, json, sys, traceback
faulthandler.enable()              # a crash prints the Python stack to stderr
sys.path.insert(0, sys.argv[1])
import importlib
func = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])
job = json.loads(sys.stdin.read())
MARK = "@@case "


def plain(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)[:300]


for i in job["indices"]:
    print(MARK + json.dumps({"begin": i}), flush=True)
    try:
        out = {"status": "ok", "value": plain(func(job["cases"][i]))}
    except Exception as exc:
        out = {"status": "raised", "type": type(exc).__name__,
               "mro": [c.__name__ for c in type(exc).__mro__],
               "message": str(exc)[:2000],
               "where": traceback.format_exc(limit=-3)[-1500:]}
    out["end"] = i
    print(MARK + json.dumps(out), flush=True)
print(MARK + json.dumps({"done": True}), flush=True)
"""


def signal_name(returncode):
    """'SIGSEGV' for a child killed by signal 11; None for a normal exit."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def child_env(one_blas_thread=True, **extra):
    env = dict(os.environ)
    if one_blas_thread:
        # many small kernels on shared cores: OpenBLAS's pool only costs here
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.update(PYTHONFAULTHANDLER="1", **extra)
    return env


def _reader(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def _one_child(module, function, cases, indices, outcomes, timeout, startup, env):
    """Run the cases at ``indices`` in one child until it ends, crashes or
    hangs; fill ``outcomes``; return (index of the case it died on or None,
    how: "hang", "signal", "died" or None, returncode, stderr tail)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, HERE, module, function],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        lines = queue.Queue()
        reader = threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True)
        reader.start()
        proc.stdin.write(json.dumps({"cases": cases, "indices": indices}))
        proc.stdin.close()
        current, finished, hung = None, False, False
        deadline = time.monotonic() + startup
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    hung = True
                    break
                if line is None:
                    break
                if not line.startswith(MARK):
                    continue
                msg = json.loads(line[len(MARK):])
                if "begin" in msg:
                    current = msg["begin"]
                    deadline = time.monotonic() + timeout
                elif "end" in msg:
                    outcomes[msg.pop("end")] = msg
                    current = None
                elif msg.get("done"):
                    finished = True
                    deadline = time.monotonic() + startup
            if hung:
                proc.kill()
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=10)
            proc.stdout.close()
        err.seek(0)
        tail = err.read()[-3000:]
    if finished and proc.returncode == 0:
        return None, None, 0, tail
    how = "hang" if hung else ("signal" if signal_name(proc.returncode) else "died")
    return current, how, proc.returncode, tail


def _run_some(module, function, cases, indices, outcomes, timeout, startup, env, alone):
    todo = list(indices)
    while todo:
        current, how, code, tail = _one_child(module, function, cases, todo, outcomes,
                                              timeout, startup, env)
        if how is None:
            return
        if current is None:
            done = [i for i in todo if outcomes[i] is not None]
            raise AssertionError(
                f"the child running {module}.{function} {how} (exit {code}) outside a "
                f"case, after {len(done)} of its {len(todo)} cases"
                + (" (at exit: one of them corrupted memory)" if len(done) == len(todo)
                   else "") + f":\n{tail}")
        if how == "hang":
            outcomes[current] = {"status": "hang", "timeout": timeout, "stderr": tail}
        elif how == "signal":
            outcomes[current] = {"status": "signal", "signal": signal_name(code),
                                 "stderr": tail}
        else:
            outcomes[current] = {"status": "died", "code": code, "stderr": tail}
        position = todo.index(current)
        if position > 0 and how != "hang" and not alone:
            # earlier cases of this child may have corrupted memory that this
            # one tripped on: say whether it fails alone too
            solo = [None] * len(cases)
            _run_some(module, function, cases, [current], solo, timeout, startup, env, True)
            outcomes[current]["alone"] = solo[current]["status"]
            if solo[current]["status"] in ("ok", "raised"):
                outcomes[current]["note"] = (
                    f"alone it {solo[current]['status']}: one of the {position} cases the "
                    f"child ran before corrupted memory")
        todo = todo[position + 1:]


def run_cases(module, function, cases, *, timeout=20.0, startup=120.0, env=None, workers=1,
              alone=False):
    """``module.function(case)`` for each JSON-able case, in child processes
    (``workers`` of them at a time, the cases dealt out in turn).

    Returns one dict per case, in order, with ``status``:

    - ``"ok"``: returned; ``value`` is what it returned (JSON, or its repr);
    - ``"raised"``: raised an Exception: ``type``, ``mro`` (class names),
      ``message``, ``where`` (the traceback's tail);
    - ``"signal"``: killed the child: ``signal`` (e.g. ``"SIGSEGV"``),
      ``stderr`` (its tail: glibc's ``free(): invalid pointer``, the stack);
      ``alone`` and ``note`` say whether it crashes alone as well;
    - ``"died"``: the child exited without finishing the case (``code``);
    - ``"hang"``: did not finish within ``timeout`` seconds (child killed).
    """
    outcomes = [None] * len(cases)
    env = child_env() if env is None else env
    parts = [list(range(len(cases)))[w::workers] for w in range(workers)]
    errors = []

    def work(indices):
        try:
            _run_some(module, function, cases, indices, outcomes, timeout, startup, env,
                      alone)
        except BaseException as exc:        # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p,)) for p in parts if p]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return outcomes


def returned(cases, outcomes, failures):
    """(case, outcome, value) for each case whose child returned a value;
    every other outcome (raised, crashed, hung) goes to ``failures``,
    described."""
    for case, out in zip(cases, outcomes):
        if out["status"] == "ok":
            yield case, out, out["value"]
        else:
            failures.append(describe(case, out))


def describe(case, outcome):
    """One line for a failure message."""
    what = outcome["status"]
    if what == "raised":
        detail = f"{outcome['type']}: {outcome['message'][:300]}"
    elif what == "signal":
        glibc = [ln for ln in outcome["stderr"].splitlines()
                 if "free()" in ln or "corrupted" in ln or "double free" in ln]
        detail = outcome["signal"] + (f" ({glibc[0].strip()})" if glibc else "")
    elif what == "hang":
        detail = f"no end within {outcome['timeout']} s (killed)"
    elif what == "died":
        detail = f"exit code {outcome['code']}: {outcome['stderr'][-300:]}"
    else:
        detail = f"returned {str(outcome.get('value'))[:300]}"
    if outcome.get("note"):
        detail += f" [{outcome['note']}]"
    return f"{json.dumps(case)}: {what}: {detail}"


def run_script(code, *, timeout=60.0, env=None, args=()):
    """Run ``code`` in a child Python (this folder on its sys.path); return
    its last stdout line parsed as JSON. A signal, a hang (killed after
    ``timeout`` seconds) or a non-zero exit fails with what the child said."""
    env = child_env(one_blas_thread=False) if env is None else env
    proc = subprocess.Popen([sys.executable, "-c", code, HERE, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"hang: the child did not end within {timeout} s (killed); "
                             f"its output:\n{out[-2000:]}\n{err[-3000:]}") from None
    name = signal_name(proc.returncode)
    if name:
        raise AssertionError(f"the child was killed by {name}:\n{out[-2000:]}\n{err[-3000:]}")
    if proc.returncode != 0:
        raise AssertionError(f"the child exited with {proc.returncode}:\n{out[-2000:]}\n"
                             f"{err[-3000:]}")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError(f"the child printed no result:\n{out[-2000:]}\n{err[-3000:]}")
    return json.loads(lines[-1])
