"""The performance gate: instructions per unit of work, counted by Valgrind,
against a recorded baseline; the exit status is the verdict.

    python benchmarks/gate.py record DIR          # the installed build's baseline, DIR/gate.json
    python benchmarks/gate.py check DIR           # the installed build against it: exit 0 or 1
    python benchmarks/gate.py compare-commits A B # build both commits (cached), then the same

``check`` and ``compare-commits`` exit 0 when no gated benchmark regressed,
1 when one did (each named, with its change and noise band), 2 on an error
(no valgrind, no baseline, a workload that failed). A benchmark regressed
when its instructions per unit of work rose by the threshold (default 10%)
less its noise band, or more: a change the noise could hide from a 10% test
counts as reaching it.

The measure. Each workload of benchmarks/gate_workloads.py runs in a Python
process under Valgrind's callgrind, instrumented only while the workload
runs (a 4-function C helper, compiled once, switches counting on and off by
client requests; start-up, imports and data are not counted and run ~4x
faster than instrumented), at two sizes n1 < n2; its cost per unit is
``(count(n2) - count(n1)) / (n2 - n1)`` instructions, so the per-call and
first-call costs cancel. Instruction counts do not depend on the machine's
load or clock: on identical code, 10 gate runs with another process busy on
one core agree to within each benchmark's band (see gate_workloads.BAND).
The measuring process pins what would make counts depend on the host:
PYTHONHASHSEED=0, one BLAS and one OpenMP thread, and OPENBLAS_CORETYPE
(default Haswell: OpenBLAS's kernels are chosen by name, not by the CPU;
Valgrind runs AVX2 but not AVX-512, whatever the CPU has). Counts depend on
the Python, NumPy, SciPy and Valgrind versions: record and check in the same
environment (``check`` warns when they differ).

Benchmarks marked as baselines (a NumPy loop, scipy's eigh) are measured the
same way and reported as ratios to ours, never gated.

``compare-commits A B`` builds each revision (``git archive`` into a cache
directory, ``pip install --target``; a build is reused while the commit's
tree is unchanged) or takes ``installed`` for the streamfit the current
environment imports, then measures A and checks B against it. Both runs use
this checkout's gate and workloads.

Test hook: STREAMFIT_GATE_INJECT=NAME makes the measuring process slow one
path down by 10% (benchmarks/gate_inject.py; never part of the package), to
show that the gate catches it.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import hashlib
import io
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = "gate.json"
FORMAT = 1
THRESHOLD = 0.10
CORETYPE = "Haswell"
INJECT = "STREAMFIT_GATE_INJECT"
TIMEOUT = 900           # seconds, one measuring process
MEASURE = "instructions per unit of work (callgrind Ir, difference of two sizes)"

# What would make a count depend on the host, pinned in the measuring process.
# JE_ARROW_MALLOC_CONF: pyarrow (imported with pandas) starts jemalloc's
# background thread, which purges memory on a timer; Valgrind counts every
# thread's instructions, so its work, which depends on the wall time a run
# takes, entered the counts (a wrapper-partial-fit run 3.4% high, 1 in 10,
# on a loaded machine). Without it the measuring process has one thread
# (the other threads of each run are noted: _other_threads).
PINNED = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
          "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
          "JE_ARROW_MALLOC_CONF": "background_thread:false"}
# The only variables the measuring process inherits (when set).
KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "CC")
# The measuring process's arguments and environment, padded to this many
# bytes: their strings sit at the top of its stack, so their length shifts
# every stack address and with it some counts (0.5% for 100 more bytes of
# environment in a one-row call, measured): padded, the stack starts alike
# whatever the paths and the variables' lengths.
PADDED = 32768

# Callgrind's client requests, for ctypes: counting on, off, zeroed, dumped.
HELPER_C = r"""
#include <valgrind/callgrind.h>
void sf_gate_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void sf_gate_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
void sf_gate_zero(void) { CALLGRIND_ZERO_STATS; }
void sf_gate_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""


class GateError(Exception):
    """A failure that is no verdict (exit status 2)."""


# -- the measuring process (runs under valgrind) ---------------------------------------------

def _drop_editable_finders():
    # An editable install's import hook sits first on sys.meta_path and
    # would import the source tree's streamfit instead of the build named.
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not type(f).__name__.startswith("ScikitBuild")]


def _environment():
    import numpy
    import scipy
    import sklearn

    import streamfit
    env = {"python": platform.python_version(), "implementation": sys.implementation.name,
           "machine": platform.machine(), "numpy": numpy.__version__,
           "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
           "streamfit": getattr(streamfit, "__version__", "?"),
           "streamfit_path": str(Path(streamfit.__file__).resolve().parent),
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "")}
    try:
        from streamfit._kernels import _simd
        env["simd"] = str(_simd.paths())
    except Exception:       # a build without the module: nothing to note
        pass
    return env


def _other_threads():
    """The measuring process's other threads (Linux), noted with each run:
    Valgrind counts every thread's instructions, so a thread that works on
    a timer makes the count depend on the run's wall time (threads that
    wait, as a thread pool's idle workers do, execute nothing)."""
    task = Path("/proc/self/task")
    if not task.is_dir():
        return []
    return sorted((t / "comm").read_text().strip() for t in task.iterdir()
                  if t.name != str(os.getpid()))


class _NoCounting:
    """The helper's functions as no-ops: a dry run, outside Valgrind."""

    def __getattr__(self, name):
        return lambda *args: None


def run_workloads(names, helper, out, build=None):
    """In the measuring process: each workload at each of its two sizes in a
    child forked from this process once the libraries are imported (so a
    run's count depends neither on the workloads before it nor on what
    another size left behind), counting on only around the run; the counts
    go to callgrind's dump files (label "name|n"), the workloads'
    descriptions, the runs' CPU seconds and the environment to `out`.
    Without a helper (a dry run) nothing is counted."""
    if build:
        _drop_editable_finders()
        sys.path.insert(0, build)
    lib = ctypes.CDLL(helper) if helper else _NoCounting()
    injected = os.environ.get(INJECT)
    if injected:
        import gate_inject
        gate_inject.apply(injected)
    import gate_workloads
    env = _environment()
    if build and not env["streamfit_path"].startswith(str(Path(build).resolve())):
        raise GateError(f"imported streamfit from {env['streamfit_path']}, not from {build}")
    gate_workloads.preload(names)
    info = {}
    errors = Path(out).with_suffix(".error")
    cpu = Path(out).with_suffix(".cpu")
    threads = Path(out).with_suffix(".threads")
    for name in names:
        w = gate_workloads.WORKLOADS[name]
        info[name] = {"unit": w.unit, "sizes": list(w.sizes), "gated": w.gated,
                      "against": w.against, "band": w.band, "doc": w.doc}
        if w.when is not None and not w.when():
            info[name]["absent"] = True
            continue
        for n in w.sizes:
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:                # the child: one measured run, then exit
                code = 1
                try:
                    w.setup(w.sizes[0])()   # warm-up: lazy imports, caches, specialisation
                    run = w.setup(n)
                    threads.write_text(json.dumps(_other_threads()))
                    gc.collect()
                    gc.disable()
                    lib.sf_gate_start()
                    lib.sf_gate_zero()
                    start = time.process_time()
                    run()
                    seconds = time.process_time() - start
                    lib.sf_gate_dump(f"{name}|{n}".encode())
                    lib.sf_gate_stop()
                    cpu.write_text(repr(seconds))
                    if injected:
                        gate_inject.check_fired(name)
                    code = 0
                except BaseException:
                    import traceback
                    errors.write_text(traceback.format_exc())
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            if status:
                # recorded, and the others measured: a workload the baseline's
                # build cannot run is no comparison; one the new build cannot
                # run is an error (see main)
                detail = errors.read_text() if errors.exists() else f"wait status {status}"
                info[name]["failed"] = f"n = {n}: {detail.strip().splitlines()[-1]}"
                info[name]["traceback"] = detail[-4000:]
                break
            info[name].setdefault("cpu_seconds", []).append(float(cpu.read_text()))
            info[name]["other_threads"] = json.loads(threads.read_text())
    if injected:
        env["injected"] = injected
    Path(out).write_text(json.dumps({"environment": env, "workloads": info}))


# -- running it ------------------------------------------------------------------------------

def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.environ.get("STREAMFIT_GATE_CACHE") or os.path.join(base, "streamfit-gate"))


def helper_library(cc=None):
    """The C helper, compiled once per source and compiler into the cache."""
    cc = cc or os.environ.get("CC") or "cc"
    key = hashlib.sha256((HELPER_C + cc).encode()).hexdigest()[:16]
    lib = cache_dir() / f"callgrind-helper-{key}.so"
    if lib.exists():
        return lib
    if shutil.which(cc) is None:
        raise GateError(f"no C compiler ({cc}) to build the callgrind helper")
    lib.parent.mkdir(parents=True, exist_ok=True)
    src = lib.with_suffix(".c")
    src.write_text(HELPER_C)
    tmp = lib.with_name(lib.name + f".{os.getpid()}")
    proc = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(tmp), str(src)],
                          capture_output=True, text=True)
    if proc.returncode:
        hint = (" (valgrind/callgrind.h missing: install valgrind, e.g. apt-get install "
                "valgrind)" if "callgrind.h" in proc.stderr else "")
        raise GateError(f"building the callgrind helper failed{hint}:\n{proc.stderr}")
    os.replace(tmp, lib)
    return lib


def valgrind_version(valgrind):
    if shutil.which(valgrind) is None:
        raise GateError(f"{valgrind} not found: the gate counts instructions under Valgrind "
                        f"(Debian/Ubuntu: apt-get install valgrind)")
    return subprocess.run([valgrind, "--version"], capture_output=True,
                          text=True).stdout.strip()


REQUEST = "desc: Trigger: Client Request: "


def parse_dumps(folder):
    """{label: instructions} of the callgrind dump files in folder."""
    counts = {}
    for path in sorted(Path(folder).glob("cg.*.*")):
        label = total = None
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(REQUEST):
                    label = line[len(REQUEST):].strip()
                elif line.startswith("summary: "):
                    total = int(line.split()[1])
                    break
        if label is not None and total is not None:
            counts[label] = total
    return counts


def _split(names, jobs):
    groups = [[] for _ in range(max(1, min(jobs, len(names))))]
    for i, name in enumerate(names):
        groups[i % len(groups)].append(name)
    return groups


def padded(env, argv, total=PADDED):
    """env plus a filler variable that brings argv's and env's strings to
    `total` bytes."""
    used = sum(len(os.fsencode(a)) + 1 for a in argv) + sum(
        len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items())
    room = total - used - len("STREAMFIT_GATE_PAD=") - 1
    if room < 0:
        raise GateError(f"the measuring process's arguments and environment take {used} "
                        f"bytes, over {total}")
    return dict(env, STREAMFIT_GATE_PAD="x" * room)


def measure(names, build=None, jobs=2, coretype=CORETYPE, valgrind="valgrind",
            timeout=TIMEOUT, dry=False):
    """Measure the named workloads (all when None) of the build at `build`
    (a folder holding the streamfit package) or the installed one; returns
    the result document that `record` saves. `dry`: run them without
    Valgrind, counting nothing (their CPU seconds only)."""
    import gate_workloads
    names = list(gate_workloads.WORKLOADS) if not names else list(names)
    unknown = [n for n in names if n not in gate_workloads.WORKLOADS]
    if unknown:
        raise GateError(f"unknown benchmark(s) {unknown}; known: "
                        f"{', '.join(gate_workloads.WORKLOADS)}")
    version = "none (dry run)" if dry else valgrind_version(valgrind)
    helper = None if dry else helper_library()
    base_env = {k: os.environ[k] for k in KEPT if k in os.environ}
    base_env.update(PINNED, OPENBLAS_CORETYPE=coretype)
    if os.environ.get(INJECT):
        base_env[INJECT] = os.environ[INJECT]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="streamfit-gate-") as tmp:
        procs = []
        try:
            for i, group in enumerate(_split(names, jobs)):
                sub = Path(tmp) / f"p{i}"
                sub.mkdir()
                cmd = [] if dry else [
                    valgrind, "-q", "--tool=callgrind", "--instr-atstart=no",
                    f"--callgrind-out-file={sub / 'cg.%p'}", "--dump-instr=no",
                    "--collect-jumps=no"]
                # run in its own folder, named relatively: the measuring
                # process's strings are the same from run to run (the
                # temporary folder's random name would change their hashes)
                cmd += [sys.executable, str(Path(__file__).resolve()), "_measure",
                        "--out", "info.json",
                        *(["--helper", str(helper)] if helper else []),
                        *(["--build", str(build)] if build else []), *group]
                log_file = open(sub / "log", "w+")
                client = cmd[cmd.index(sys.executable):]
                procs.append((sub, group, log_file, subprocess.Popen(
                    cmd, env=padded(base_env, client), cwd=sub, stdout=log_file,
                    stderr=subprocess.STDOUT, start_new_session=True)))
            deadline = time.monotonic() + timeout
            for sub, group, log_file, proc in procs:
                try:
                    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise GateError(f"measuring {group} took over {timeout} s") from None
                if proc.returncode:
                    log_file.seek(0)
                    raise GateError(f"measuring {group} failed (exit {proc.returncode}):\n"
                                    + log_file.read()[-4000:])
        finally:
            for _, _, log_file, proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                log_file.close()
        results, environment = {}, None
        for sub, group, _, _ in procs:
            info = json.loads((sub / "info.json").read_text())
            environment = environment or info["environment"]
            counts = parse_dumps(sub)
            for name, entry in info["workloads"].items():
                if not (entry.get("absent") or entry.get("failed") or dry):
                    n1, n2 = entry["sizes"]
                    c1, c2 = counts[f"{name}|{n1}"], counts[f"{name}|{n2}"]
                    entry["counts"] = [c1, c2]
                    entry["per_unit"] = (c2 - c1) / (n2 - n1)
                    entry["fixed"] = c1 - n1 * entry["per_unit"]
                results[name] = entry
    environment["valgrind"] = version
    results = {name: results[name] for name in names}
    return {"format": FORMAT, "measure": MEASURE, "environment": environment,
            "results": results, "seconds": round(time.perf_counter() - start, 1),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


# -- comparing -------------------------------------------------------------------------------

def _measured(entry):
    return entry is not None and "per_unit" in entry


def failures(doc):
    """{benchmark: why} of the workloads that failed in a measurement."""
    return {name: e["failed"] for name, e in doc["results"].items() if e.get("failed")}


def compare(saved, new, threshold=THRESHOLD):
    """Rows (benchmark, unit, saved, new, change, band, verdict) of the gated
    benchmarks in both documents, and the lists of the others. Verdicts:
    REGRESSED (change >= threshold - band), slower (beyond the band), ok,
    faster (below minus the band)."""
    a, b = saved["results"], new["results"]
    rows, only = [], []
    for name in [*a, *(n for n in b if n not in a)]:
        ea, eb = a.get(name), b.get(name)
        if not (_measured(ea) and _measured(eb)):
            has = [side for side, e in (("saved", ea), ("new", eb)) if _measured(e)]
            only.append((name, has[0] if len(has) == 1 else None))
            continue
        if not (ea["gated"] and eb["gated"]):
            continue
        change = eb["per_unit"] / ea["per_unit"] - 1
        band = max(ea["band"], eb["band"])
        if change >= threshold - band:
            verdict = "REGRESSED"
        elif change > band:
            verdict = "slower"
        elif change < -band:
            verdict = "faster"
        else:
            verdict = "ok"
        rows.append((name, eb["unit"], ea["per_unit"], eb["per_unit"], change, band, verdict))
    return rows, only


def ratios(doc):
    """{baseline: (ours, baseline / ours)} of a document's baselines."""
    out = {}
    res = doc["results"]
    for name, e in res.items():
        ours = res.get(e.get("against") or "")
        if not e["gated"] and _measured(e) and _measured(ours):
            out[name] = (e["against"], e["per_unit"] / ours["per_unit"])
    return out


def table(cells, right=()):
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    return ["  ".join(c[i].rjust(w) if i in right else c[i].ljust(w)
                      for i, w in enumerate(widths)).rstrip() for c in cells]


def show_one(doc):
    cells = [("benchmark", "unit", "instructions/unit", "fixed/run")]
    for name, e in doc["results"].items():
        if e.get("absent") or e.get("failed"):
            cells.append((name, e["unit"], "(API absent)" if e.get("absent") else "FAILED", ""))
        else:
            cells.append((name + ("" if e["gated"] else " (baseline)"), e["unit"],
                          f"{e['per_unit']:,.0f}", f"{e['fixed']:,.0f}"))
    lines = table(cells, right={2, 3})
    for base, (ours, r) in ratios(doc).items():
        lines.append(f"{base} / {ours}: {r:.2f}x")
    return "\n".join(lines)


def show_dry(doc):
    cells = [("benchmark", "unit", "CPU us/unit (indicative)")]
    for name, e in doc["results"].items():
        if e.get("absent") or e.get("failed"):
            cells.append((name, e["unit"], "(API absent)" if e.get("absent") else "FAILED"))
        else:
            (n1, n2), (t1, t2) = e["sizes"], e["cpu_seconds"]
            cells.append((name, e["unit"], f"{(t2 - t1) / (n2 - n1) * 1e6:.2f}"))
    return "\n".join(table(cells, right={2}))


def env_differences(saved, new):
    keys = ("python", "implementation", "machine", "numpy", "scipy", "scikit-learn",
            "valgrind", "openblas_coretype", "simd")
    sa, sb = saved["environment"], new["environment"]
    return [f"{k}: {sa.get(k)} -> {sb.get(k)}" for k in keys if sa.get(k) != sb.get(k)]


def report(saved, new, threshold=THRESHOLD, labels=("baseline", "new")):
    """The comparison as text and the verdict (True: a regression)."""
    rows, only = compare(saved, new, threshold)
    cells = [("benchmark", "unit", labels[0], labels[1], "change", "band", "verdict")]
    cells += [(name, unit, f"{x:,.0f}", f"{y:,.0f}", f"{c:+.2%}", f"±{band:.1%}", v)
              for name, unit, x, y, c, band, v in rows]
    lines = [f"instructions per unit of work; threshold {threshold:.0%} (a change of "
             f"threshold - band or more fails)", ""]
    lines += table(cells, right={2, 3, 4, 5}) if rows else ["no gated benchmark in both runs"]
    ra, rb = ratios(saved), ratios(new)
    shared = [k for k in ra if k in rb]
    if shared:
        lines += ["", "baselines / ours (instructions per unit; reported, not gated):"]
        lines += table([(f"{k} / {ra[k][0]}", f"{ra[k][1]:.2f}x", "->", f"{rb[k][1]:.2f}x")
                        for k in shared], right={1, 3})
    if only:
        lines += ["", "not compared:"]
        why = {"saved": failures(saved), "new": failures(new)}
        for name, side in only:
            if side:
                other = "new" if side == "saved" else "saved"
                label = labels[0] if side == "saved" else labels[1]
                reason = (f" ({labels[0] if other == 'saved' else labels[1]} failed: "
                          f"{why[other][name]})" if name in why[other] else "")
                lines.append(f"  {name}: measured in the {label} run only{reason}")
            else:
                lines.append(f"  {name}: absent from both builds (API)" if name not in
                             why["saved"] and name not in why["new"] else
                             f"  {name}: failed in both runs: {why['new'].get(name)}")
    diffs = env_differences(saved, new)
    if diffs:
        lines += ["", "WARNING: the environments differ, which moves instruction counts:"]
        lines += [f"  {d}" for d in diffs]
    if new["environment"].get("injected"):
        lines += ["", f"(test hook {INJECT}={new['environment']['injected']} was set in the "
                      f"new run)"]
    bad = [r for r in rows if r[6] == "REGRESSED"]
    lines.append("")
    if bad:
        lines.append(f"gate: FAIL: {len(bad)} benchmark{'s' if len(bad) > 1 else ''} "
                     f"regressed by {threshold:.0%} or more:")
        lines += [f"  {name}: {c:+.2%} instructions per {unit} (noise band ±{band:.1%})"
                  for name, unit, _, _, c, band, _ in bad]
    else:
        lines.append(f"gate: PASS: no gated benchmark regressed by {threshold:.0%} or more "
                     f"({len(rows)} compared)")
    return "\n".join(lines), bool(bad)


def save(doc, folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULT).write_text(json.dumps(doc, indent=1) + "\n")
    return folder / RESULT


def load(folder):
    path = Path(folder)
    path = path / RESULT if path.is_dir() else path
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise GateError(f"cannot read a gate baseline at {path}: {exc} (make one with "
                        f"'gate.py record {folder}')") from None
    if doc.get("format") != FORMAT:
        raise GateError(f"{path}: format {doc.get('format')!r}, this gate reads {FORMAT}: "
                        f"record the baseline again")
    return doc


# -- building commits ------------------------------------------------------------------------

def git(*args, cwd=None):
    proc = subprocess.run(["git", *args], cwd=cwd or HERE.parent, capture_output=True)
    if proc.returncode:
        raise GateError(f"git {' '.join(args)}: {proc.stderr.decode().strip()}")
    return proc.stdout


def build_commit(rev, isolated=True, log=print):
    """A folder holding the streamfit package built from commit `rev`
    (pip install --target), reused from the cache while the commit's tree
    is the same."""
    sha = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    tree = git("rev-parse", f"{sha}^{{tree}}").decode().strip()
    key = f"{tree[:16]}-{sys.implementation.cache_tag}-{platform.machine()}"
    target = cache_dir() / "builds" / key
    if (target / ".complete").exists():
        log(f"{rev} ({sha[:10]}): reusing the build in {target}")
        return target, sha, tree
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="streamfit-gate-src-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(git("archive", "--format=tar", sha))) as tar:
            tar.extractall(work / "src", filter="data") if hasattr(tarfile, "data_filter") \
                else tar.extractall(work / "src")
        tmp_target = work / "target"
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
               "--target", str(tmp_target), str(work / "src")]
        if not isolated:
            cmd.insert(4, "--no-build-isolation")
        log(f"{rev} ({sha[:10]}): building ({' '.join(cmd[3:])})")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise GateError(f"building {rev} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(tmp_target), str(target))
        seconds = time.perf_counter() - start
        (target / ".complete").write_text(json.dumps({"commit": sha, "tree": tree,
                                                      "seconds": round(seconds, 1)}))
        log(f"{rev} ({sha[:10]}): built in {seconds:.0f} s")
        return target, sha, tree
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measurement_key(tree, only, coretype, valgrind):
    """What a measurement of a commit depends on, hashed: its tree, this
    gate and its workloads, the environment's versions."""
    from importlib import metadata
    parts = [tree, repr(sorted(only or [])), coretype, valgrind_version(valgrind),
             sys.version, platform.machine()]
    parts += [metadata.version(d) for d in ("numpy", "scipy", "scikit-learn")]
    parts += [(HERE / f).read_text() for f in ("gate.py", "gate_workloads.py")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def compare_commits(revs, only, isolated=True, reuse=True, log=print, **kw):
    """Build and measure each revision (a measurement is reused from the
    cache while the commit's tree, this gate and the environment are the
    same); "installed" measures the environment's streamfit where it is.
    Both builds are measured through one path (a link in the cache, taken
    under a lock), so that the measuring processes differ in the build only."""
    import fcntl
    docs = []
    links = cache_dir() / "measuring"
    links.mkdir(parents=True, exist_ok=True)
    with open(links / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for rev in revs:
            if rev == "installed":
                log("measuring the installed build")
                doc = measure(only, None, **kw)
            else:
                target, sha, tree = build_commit(rev, isolated=isolated, log=log)
                key = measurement_key(tree, only, kw.get("coretype", CORETYPE),
                                      kw.get("valgrind", "valgrind"))
                saved = cache_dir() / "measurements" / f"{key}.json"
                if reuse and saved.exists():
                    log(f"{rev} ({sha[:10]}): reusing its measurement ({saved})")
                    docs.append(load(saved) | {"revision": rev})
                    continue
                link = links / "build"
                if link.is_symlink() or link.exists():
                    link.unlink()
                link.symlink_to(target, target_is_directory=True)
                log(f"measuring {rev} ({sha[:10]})")
                doc = measure(only, link, **kw)
                doc["commit"] = sha
                save(doc, saved.parent).rename(saved)
            docs.append(doc | {"revision": rev})
    return docs


# -- command line ----------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(prog="gate.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--only", nargs="+", metavar="NAME", help="these benchmarks only")
        p.add_argument("--jobs", type=int, default=2, help="measuring processes run at once "
                       "(default %(default)s; counts do not depend on it)")
        p.add_argument("--openblas-coretype", default=CORETYPE, help="OpenBLAS's kernel "
                       "family in the measuring process (default %(default)s)")
        p.add_argument("--valgrind", default="valgrind", help="the valgrind command")
        p.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds a measuring "
                       "process may take (default %(default)s)")

    p = sub.add_parser("record", help="measure the installed build and save it as DIR's "
                       "baseline")
    p.add_argument("dir")
    p.add_argument("--build", help="a folder holding the streamfit package to measure "
                   "instead of the installed one (pip install --target)")
    common(p)
    p = sub.add_parser("check", help="measure the installed build against DIR's baseline: "
                       "exit 1 on a regression")
    p.add_argument("dir")
    p.add_argument("--build", help="as for record")
    p.add_argument("--threshold", type=float, default=THRESHOLD,
                   help="relative rise that fails (default %(default)s)")
    p.add_argument("--save", metavar="DIR2", help="also save this measurement in DIR2")
    common(p)
    p = sub.add_parser("compare-commits", help="build commits A and B (or 'installed') and "
                       "check B against A: exit 1 on a regression")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--threshold", type=float, default=THRESHOLD)
    p.add_argument("--out", metavar="DIR", help="save both measurements in DIR/a, DIR/b")
    p.add_argument("--no-build-isolation", action="store_true", help="build in the current "
                   "environment (its build requirements must be installed)")
    p.add_argument("--again", action="store_true", help="measure again a commit measured "
                   "before (by default its measurement is reused from the cache)")
    common(p)
    p = sub.add_parser("dry-run", help="run every workload once without Valgrind (no "
                       "counts, no verdict): checks the workloads, shows CPU time per unit")
    p.add_argument("--build", help="as for record")
    common(p)
    p = sub.add_parser("_measure")         # the measuring process itself
    p.add_argument("--helper")
    p.add_argument("--out", required=True)
    p.add_argument("--build")
    p.add_argument("names", nargs="+")
    args = parser.parse_args(argv)

    if args.command == "_measure":
        run_workloads(args.names, args.helper, args.out, args.build)
        return 0
    if not (0 < getattr(args, "threshold", THRESHOLD) < 1):
        parser.error("--threshold must be between 0 and 1")
    kw = dict(jobs=args.jobs, coretype=args.openblas_coretype, valgrind=args.valgrind,
              timeout=args.timeout)

    def log(msg):
        print(f"gate: {msg}", flush=True)

    def failed_workloads(doc, status):
        """status, or 2 when a workload of doc (the build under test) failed."""
        bad = failures(doc)
        for name in bad:
            print(f"\n{name} failed:\n{doc['results'][name]['traceback']}", file=sys.stderr)
        if bad:
            print(f"gate.py: error: {len(bad)} workload(s) failed: {', '.join(bad)}",
                  file=sys.stderr)
            return 2
        return status

    try:
        if args.command == "record":
            doc = measure(args.only, args.build, **kw)
            path = save(doc, args.dir)
            print(show_one(doc))
            log(f"baseline saved in {path} ({doc['seconds']:.0f} s)")
            return failed_workloads(doc, 0)
        if args.command == "dry-run":
            doc = measure(args.only, args.build, dry=True, **kw)
            print(show_dry(doc))
            log(f"dry run ({doc['seconds']:.0f} s); nothing was counted")
            return failed_workloads(doc, 0)
        if args.command == "check":
            saved = load(args.dir)
            doc = measure(args.only, args.build, **kw)
            if args.save:
                save(doc, args.save)
            text, failed = report(saved, doc, args.threshold)
            print(text)
            log(f"measured in {doc['seconds']:.0f} s")
            return failed_workloads(doc, 1 if failed else 0)
        # compare-commits
        start = time.perf_counter()
        docs = compare_commits((args.a, args.b), args.only,
                               isolated=not args.no_build_isolation, reuse=not args.again,
                               log=log, **kw)
        if args.out:
            for doc, sub in zip(docs, ("a", "b")):
                save(doc, Path(args.out) / sub)
        text, failed = report(*docs, args.threshold, labels=(args.a, args.b))
        print(text)
        log(f"compare-commits took {time.perf_counter() - start:.0f} s")
        return failed_workloads(docs[1], 1 if failed else 0)
    except GateError as exc:
        print(f"gate.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
