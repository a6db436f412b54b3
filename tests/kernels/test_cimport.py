"""A second package's point of view, in Cython: an extension compiled against
``streamfit.get_include()`` cimports the nogil eigen-solver chain and gets
LAPACK's answer. Skipped where no C compiler or Cython is at hand (a wheel
user's machine need not have one)."""
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

EXT = '''
# cython: language_level=3, boundscheck=False, wraparound=False
import numpy as np
from _eigen cimport EigWork, eig_work_init, eig_work_free, eig_top, EIG_EVR


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
        if code == 0:
            code = eig_top(&ws, EIG_EVR, n, &A[0, 0], n, 1.0, m, &wv[0], &zv[0, 0], n,
                           &bv[0, 0], True)
        eig_work_free(&ws)
    return code, w[:m], Z
'''


def _compiler():
    cc = sysconfig.get_config_var("CC") or "cc"
    argv = shlex.split(cc)
    return argv if argv and shutil.which(argv[0]) else None


def test_get_include_holds_every_declaration():
    include = pathlib.Path(streamfit.get_include())
    names = {p.name for p in include.iterdir()}
    for name in ("_blas.pxd", "_common.pxd", "_eigen.pxd", "_goe.pxd", "_goe.h", "_topk.pxd",
                 "_rank1.pxd", "_simplex.pxd", "_work_poll.pxd"):
        assert name in names


def test_a_cython_extension_cimports_the_eigen_chain(tmp_path):
    pytest.importorskip("Cython")
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    include = streamfit.get_include()
    (tmp_path / "sf_user_ext.pyx").write_text(EXT)
    subprocess.run([sys.executable, "-m", "cython", "-3", "-I", include,
                    "--module-name", "sf_user_ext", "sf_user_ext.pyx", "-o", "sf_user_ext.c"],
                   cwd=tmp_path, check=True, capture_output=True)
    target = "sf_user_ext" + sysconfig.get_config_var("EXT_SUFFIX")
    flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    ldshared = ["-bundle", "-undefined", "dynamic_lookup"] if sys.platform == "darwin" \
        else ["-shared"]
    subprocess.run([*cc, *flags, *ldshared, "-O1", "-I", sysconfig.get_paths()["include"],
                    "-I", np.get_include(), "-I", include, "sf_user_ext.c", "-o", target],
                   cwd=tmp_path, check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("sf_user_ext", tmp_path / target)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 40))
    A = (A + A.T) / 2
    code, w, Z = ext.top(A, 3)
    assert code == 0
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[-3:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.abs(np.einsum("ij,jk,ik->i", Z[:3], A, Z[:3])),
                               np.abs(w), rtol=1e-10)
