"""The test entries (streamfit._kernels._testing): production code never
imports them, and what they wrap behaves as the kernels rely on."""
import pathlib
import re

import numpy as np
import pytest

from streamfit._kernels import _testing

ROOT = pathlib.Path(__file__).resolve().parents[2]
# an import or cimport of the module, in Python or Cython
IMPORTS_TESTING = re.compile(r"^\s*(from\s+\S*\s+c?import\s+.*\b_testing\b|c?import\s+\S*\b_testing\b"
                             r"|from\s+\S*\b_testing\b\s+c?import)", re.M)


def production_files():
    for path in sorted((ROOT / "src" / "streamfit").rglob("*.py")):
        yield path
    for pattern in ("*.pyx", "*.pxd"):
        for path in sorted((ROOT / "csrc").glob(pattern)):
            if path.name != "_testing.pyx":
                yield path


def test_the_pattern_sees_every_import_form():
    # (so that the test below cannot pass by a blind pattern)
    for line in ("from streamfit._kernels import _testing",
                 "from .._kernels import _quantile, _testing",
                 "import streamfit._kernels._testing as t",
                 "from streamfit._kernels._testing import pav",
                 "from _testing cimport x",
                 "    cimport _testing"):
        assert IMPORTS_TESTING.search(line), line
    for line in ("import numpy.testing", "from numpy.testing import assert_equal",
                 "# the tests import _testing"):
        assert not IMPORTS_TESTING.search(line), line


def test_no_production_module_imports_the_test_entries():
    files = list(production_files())
    assert len(files) > 30 and any(p.suffix == ".pyx" for p in files)
    offenders = [str(p.relative_to(ROOT)) for p in files
                 if IMPORTS_TESTING.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_power_iteration_finds_the_top_eigenvalue(fit_intercept, weighted):
    """_power_iter.pxd (the batch and storage modes' step-size scale): the
    largest eigenvalue of [X 1]' W [X 1] / sum(W), to the accuracy 30 power
    iterations reach with a clear spectral gap; -1 without weight."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 6)) * np.array([4.0, 1.0, 0.8, 0.6, 0.5, 0.3]) + 0.2
    sw = rng.uniform(0.0, 2.0, 400) if weighted else np.ones(400)
    Z = np.hstack([X, np.ones((400, 1))]) if fit_intercept else X
    want = np.linalg.eigvalsh(Z.T @ (sw[:, None] * Z) / sw.sum())[-1]
    got = _testing.top_eigenvalue(X, fit_intercept, sw if weighted else None)
    assert got == pytest.approx(want, rel=1e-9)
    assert _testing.top_eigenvalue(X, fit_intercept, np.zeros(400)) == -1.0
    with pytest.raises(ValueError, match="sample_weight"):
        _testing.top_eigenvalue(X, fit_intercept, np.ones(3))
