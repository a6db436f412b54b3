"""A second package's point of view, in Cython: an extension that cimports
``streamfit.cython.<module>`` compiles with numpy's headers alone (no
streamfit header, nothing of streamfit's linked) and gets the kernels' own
answers. Skipped where no C compiler or Cython is at hand (a wheel user's
machine need not have one)."""
import importlib
import importlib.util
import pathlib
import shlex
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import streamfit
import streamfit.cython

PUBLIC = ("common", "eigen", "goe", "linear", "rank1", "simplex", "topk")

EXT = '''
# cython: language_level=3, boundscheck=False, wraparound=False
import numpy as np
from libc.string cimport memset
from streamfit.cython.common cimport API_VERSION, OK, interrupted
from streamfit.cython.eigen cimport EigWork, eig_work_init, eig_work_free, eig_top, EIG_EVR
from streamfit.cython.rank1 cimport Rank1Work, rank1_work_init, rank1_work_free, rank1_update
from streamfit.cython.simplex cimport euclid_project
from streamfit.cython.topk cimport (TopKState, TopKWork, topk_work_init, topk_work_free,
                                    topk_exact)


def version():
    return API_VERSION


def poll():
    cdef bint r
    with nogil:
        r = interrupted()
    return r


def top(double[:, ::1] A, int m):
    cdef int n = A.shape[0], code
    cdef EigWork ws
    w = np.empty(n)
    Z = np.empty((m, n))
    B = np.empty((n, n))
    cdef double[::1] wv = w
    cdef double[:, ::1] zv = Z
    cdef double[:, ::1] bv = B
    with nogil:
        code = eig_work_init(&ws, n, m, False)
        if code == OK:
            code = eig_top(&ws, EIG_EVR, n, &A[0, 0], n, 1.0, m, &wv[0], &zv[0, 0], n,
                           &bv[0, 0], True)
        eig_work_free(&ws)
    return code, w[:m], Z


def project(double[::1] v, int k):
    w = np.empty(v.shape[0])
    u = np.empty(v.shape[0])
    cdef double[::1] wv = w, uv = u
    euclid_project(&v[0], v.shape[0], k, &uv[0], &wv[0])
    return w


def rank_one(double[:, ::1] U, double[::1] d, double[::1] x, double rho):
    cdef int n = d.shape[0], code, block = 0
    cdef Rank1Work ws
    mu = np.empty(n)
    cdef double[::1] mv = mu
    code = rank1_work_init(&ws, n)
    if code == OK:
        code = rank1_update(&ws, n, &U[0, 0], &d[0], &x[0], rho, &mv[0], &block)
    rows = np.asarray(<double[:n, :n]> ws.Unew).copy() if code == OK else None
    rank1_work_free(&ws)
    return code, mu, rows


def top_block(double[:, ::1] S, int k, int threads):
    cdef int n = S.shape[0], code
    cdef TopKWork w
    cdef TopKState st
    memset(&st, 0, sizeof(TopKState))
    V = np.zeros((k, n))
    cdef double[:, ::1] vv = V
    code = topk_work_init(&w, n, k, k, 30)
    w.threads = threads
    if code == OK:
        code = topk_exact(&w, &S[0, 0], &vv[0, 0], &st)
    topk_work_free(&w)
    return code, V, st.solves, st.kept
'''


def _compiler():
    cc = sysconfig.get_config_var("CC") or "cc"
    argv = shlex.split(cc)
    return argv if argv and shutil.which(argv[0]) else None


def _build(tmp_path, source, libs=()):
    """Cythonize with streamfit.get_include() on Cython's path, then compile
    with Python's and numpy's headers only, linking `libs` alone."""
    pytest.importorskip("Cython")
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "sf_user_ext.pyx").write_text(source)
    done = subprocess.run([sys.executable, "-m", "cython", "-3", "-I", streamfit.get_include(),
                           "--module-name", "sf_user_ext", "sf_user_ext.pyx",
                           "-o", "sf_user_ext.c"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    target = "sf_user_ext" + sysconfig.get_config_var("EXT_SUFFIX")
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    ldshared = ["-bundle", "-undefined", "dynamic_lookup"] if sys.platform == "darwin" \
        else ["-shared"]
    done = subprocess.run([*cc, *flags, *ldshared, "-O1", "-I", sysconfig.get_paths()["include"],
                           "-I", np.get_include(), "sf_user_ext.c", "-o", target, *libs],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("sf_user_ext", tmp_path / target)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    return ext


def _shipped_files():
    """Every file of the installed package: its Python tree and, in an
    editable install, the tree its compiled modules were installed to."""
    import streamfit._kernels._common as compiled
    roots = {pathlib.Path(streamfit.__file__).resolve().parent,
             pathlib.Path(compiled.__file__).resolve().parents[1]}
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def test_only_the_public_declarations_ship():
    """The .pxd files are the documented modules', under streamfit/cython;
    no C header and none of the kernels' private declarations is installed."""
    files = _shipped_files()
    pxds = sorted(p.name for p in files if p.suffix == ".pxd")
    assert pxds == sorted(f"{m}.pxd" for m in PUBLIC)
    assert all(p.parent.name == "cython" for p in files if p.suffix == ".pxd")
    assert [p.name for p in files if p.suffix == ".h"] == []
    root = pathlib.Path(streamfit.get_include())
    for m in PUBLIC:
        assert (root / "streamfit" / "cython" / f"{m}.pxd").is_file()
        assert importlib.import_module(f"streamfit.cython.{m}").__pyx_capi__


def test_api_version_is_an_int_the_compiled_modules_agree_with():
    assert type(streamfit.cython.API_VERSION) is int and streamfit.cython.API_VERSION >= 1
    # the module refuses to load if common.pxd declares another number
    importlib.import_module("streamfit.cython.common")


def test_a_cython_extension_cimports_every_public_module(tmp_path):
    ext = _build(tmp_path, EXT)
    assert ext.version() == streamfit.cython.API_VERSION
    assert ext.poll() is False
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 40))
    A = (A + A.T) / 2
    code, w, Z = ext.top(A, 3)
    assert code == 0
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[-3:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.einsum("ij,jk,ik->i", Z[:3], A, Z[:3])),
                               np.abs(w), rtol=1e-10)
    # the simplex projection is the kernels' own
    from streamfit.kernels import project_capped_simplex
    v = np.sort(rng.standard_normal(12) * 2)
    np.testing.assert_array_equal(ext.project(v, 3), project_capped_simplex(v, 3))
    # the rank-one update gives the eigendecomposition of the updated matrix
    d, U = np.linalg.eigh(A)
    x = rng.standard_normal(40)
    code, mu, rows = ext.rank_one(np.ascontiguousarray(U.T), d, x, 0.7)
    assert code == 0
    B = A + 0.7 * np.outer(x, x)
    np.testing.assert_allclose(mu, np.linalg.eigvalsh(B), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rows @ B @ rows.T, np.diag(mu), atol=1e-9)
    # the top-k solver's exact solve, on two threads as on one
    for threads in (1, 2):
        code, V, solves, kept = ext.top_block(np.ascontiguousarray(A), 3, threads)
        assert (code, solves, kept) == (0, 1, 0)
        np.testing.assert_allclose(np.sort(np.diag(V @ A @ V.T)), w, rtol=1e-10)


DOCS_EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cython" / "sf_user_ext.pyx"


@pytest.mark.skipif(not DOCS_EXAMPLE.exists(), reason="docs/ not beside the tests")
def test_the_documented_cython_example_builds_and_runs(tmp_path):
    """docs/cython/sf_user_ext.pyx, the Cython API page's complete example,
    built as the page says: numpy's headers, nothing linked (the GOE draw
    runs in streamfit's own module, which links numpy's npyrandom)."""
    ext = _build(tmp_path, DOCS_EXAMPLE.read_text())
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 30))
    A = (A + A.T) / 2
    code, w, Z = ext.top(A, 2)
    assert code == 0
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[-2:], rtol=1e-12, atol=1e-12)
    N = ext.goe(50, 2.0, np.random.default_rng(1))
    np.testing.assert_array_equal(N, N.T)
    from streamfit.kernels import goe
    expected = goe(50, 2.0, random_state=np.random.default_rng(1))
    np.testing.assert_allclose(N, expected, rtol=0, atol=0)
    # the linear learner driven row by row from compiled code is the learner
    # fed the same block (bit for bit), and a bad row raises naming it
    from streamfit.kernels import LinearSGD
    from streamfit.simulate import make_linear_stream
    X, y, beta = make_linear_stream(5000, 4, tau=0.5, random_state=0)
    ours, block = LinearSGD(4, average=True), LinearSGD(4, average=True)
    mae = ext.prequential(ours, X, y)
    block.learn(X, y)
    np.testing.assert_array_equal(ours.coef, block.coef)
    assert ours.n_samples_seen == 5000 and np.isfinite(mae)
    bad = X[:3].copy()
    bad[1, 2] = np.nan
    before = ours.to_state()
    with pytest.raises(ValueError, match="NaN or inf"):
        ext.prequential(ours, bad, y[:3])
    assert ours.n_samples_seen == 5001        # the row before the bad one
    assert ext.count_slowly(1000) == 1000


def test_raise_pending_reraises_the_handler_exception(tmp_path):
    """The documented pattern after interrupted(): raise_pending() raises
    the signal handler's own exception (a bare `raise KeyboardInterrupt`
    would be a SystemError with an exception already set)."""
    import signal
    if not hasattr(signal, "SIGALRM"):
        pytest.skip("no SIGALRM on this platform")
    ext = _build(tmp_path, DOCS_EXAMPLE.read_text()) if DOCS_EXAMPLE.exists() else None
    if ext is None:
        pytest.skip("docs/ not beside the tests")

    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Stop):
            ext.count_slowly(10**13)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
