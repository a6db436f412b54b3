"""Every python block of the documentation's pages runs: the blocks of one
page, in order, as one script in a fresh interpreter (a page's later blocks
may use what its earlier ones made, never another page's)."""
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted([*DOCS.glob("*.md"), *DOCS.glob("user_guide/*.md")]) if DOCS.is_dir() else []
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
WITH_CODE = [p for p in PAGES if BLOCK.search(p.read_text(encoding="utf-8"))]


def test_the_guide_has_examples():
    if not DOCS.is_dir():
        pytest.skip("docs/ not beside the tests")
    assert len(WITH_CODE) >= 6


@pytest.mark.parametrize("page", WITH_CODE, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page, tmp_path):
    code = "\n\n".join(BLOCK.findall(page.read_text(encoding="utf-8")))
    for name in ("dask", "distributed", "river"):
        if re.search(rf"^\s*(from|import) {name}\b", code, flags=re.M) and \
                importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed")
    script = tmp_path / f"guide_{page.stem}.py"     # not dask.py: it would shadow dask
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"{page.name}:\n{done.stderr[-3000:]}"


FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", flags=re.S | re.M)


def test_code_fits_the_page():
    """A code line longer than 79 characters is cut off in the site's code boxes
    (about 80 characters wide beside the page's table of contents): the reader
    scrolls sideways. The pages' blocks, the gallery's scripts, the README's."""
    if not DOCS.is_dir():
        pytest.skip("docs/ not beside the tests")
    sources = {p: "\n".join(FENCE.findall(p.read_text(encoding="utf-8")))
               for p in [*PAGES, DOCS.parent / "README.md"] if p.exists()}
    sources.update({p: p.read_text(encoding="utf-8")
                    for p in sorted(DOCS.glob("examples/*.py"))})
    assert len(sources) >= 10
    long = [f"{p.name}: {line}" for p, text in sources.items()
            for line in text.splitlines() if len(line) > 79]
    assert not long, "\n".join(long)
