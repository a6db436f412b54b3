"""Every python block of the README runs as a file of its own, in a fresh
interpreter, as a new user who saves it as a script would run it (so each block
imports what it uses, and the Dask one needs its ``__main__`` guard)."""
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = (re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
          if README.exists() else [])


def _needs(block):
    """The optional packages a block imports."""
    return [name for name in ("dask", "distributed")
            if re.search(rf"^\s*(from|import) {name}\b", block, flags=re.M)]


def test_the_readme_has_its_examples():
    if not README.exists():
        pytest.skip("README.md not beside the tests")
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_a_script(index, tmp_path):
    block = BLOCKS[index]
    for name in _needs(block):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed")
    script = tmp_path / f"readme_example_{index}.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"README block {index} failed:\n{block}\n{done.stderr}"
    assert done.stdout.strip(), "every README example prints its result"
