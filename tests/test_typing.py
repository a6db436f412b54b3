"""The typed public API as a user's type checker sees it: streamfit ships
py.typed, and mypy accepts correct calls and flags wrong ones."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("mypy")

GOOD = '''
import numpy as np
import streamfit
from streamfit.simulate import make_linear_stream, make_spiked_stream

X, y, beta = make_linear_stream(100, 3, tau=0.9, random_state=np.random.default_rng(0))
S: np.ndarray = make_spiked_stream(50, 10, random_state=0)
include: str = streamfit.get_include()
est = streamfit.OnlineQuantileRegressor(tau=0.9).fit(X, y)
'''
BAD = '''
from streamfit.simulate import make_linear_stream

X, y, beta = make_linear_stream("many", 3)
n: int = make_linear_stream(100, 3)
'''


def _mypy(tmp_path, code):
    (tmp_path / "user.py").write_text(code)
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                           "--ignore-missing-imports", "user.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_the_package_is_marked_typed():
    import streamfit
    assert (pathlib.Path(streamfit.__file__).parent / "py.typed").exists()


def test_correct_calls_type_check(tmp_path):
    done = _mypy(tmp_path, GOOD)
    assert done.returncode == 0, done.stdout


def test_wrong_calls_are_flagged(tmp_path):
    done = _mypy(tmp_path, BAD)
    assert done.returncode == 1, done.stdout
    assert 'Argument 1 to "make_linear_stream" has incompatible type "str"' in done.stdout
    assert "Incompatible types in assignment" in done.stdout
