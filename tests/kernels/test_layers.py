"""The layer rule, read from the source: ``streamfit.kernels`` (the low-level
API) and the two modules beneath it (``_validation``, ``_errors``) import
nothing of streamfit's above them -- the estimators import the kernels, never
the reverse. Every import statement counts, those inside functions too."""
import ast
import pathlib
import re

import pytest

import streamfit

# the package as imported: the source tree, or the installed wheel
SRC = pathlib.Path(streamfit.__file__).resolve().parent

# What each lower module may import of streamfit's own (prefixes).
ALLOWED = {
    "kernels": ("streamfit.kernels", "streamfit._validation", "streamfit._errors",
                "streamfit._kernels"),
    "_validation": ("streamfit._kernels",),
    "_errors": ("streamfit._kernels",),
}
# The one import across the rule still in the code: LinearSGD takes the
# estimators' schedule objects (a name or a StatisticalSchedule) and asks
# them for the kernel's parameters. streamfit.schedules imports only
# _validation, so it makes no cycle.
KNOWN = {("csrc/_quantile.pyx", "streamfit.schedules")}
ABOVE = ("streamfit.quantile", "streamfit.pca", "streamfit.lowrank", "streamfit.dask",
         "streamfit.experiments")


def _module_name(path):
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts), \
        path.name == "__init__.py"


def imports(path, source=None):
    """The absolute names of streamfit's modules that a file imports (for
    ``from X import a``: X, and X.a in case a is a submodule); ``source``
    stands in for the file's text."""
    name, is_package = _module_name(path)
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    if source is None:
        source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names
                         if alias.name != "*")
    return {m for m in found if m == "streamfit" or m.startswith("streamfit.")}


def _lower_files():
    for key in ALLOWED:
        if key == "kernels":
            yield from ((key, p) for p in sorted((SRC / "kernels").glob("*.py")))
        else:
            yield key, SRC / f"{key}.py"


@pytest.mark.parametrize("key, path", list(_lower_files()),
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_lower_layers_import_nothing_above_them(key, path):
    rel = path.relative_to(SRC).as_posix()
    wrong = set()
    for module in imports(path):
        if any(f == rel and (module == k or module.startswith(k + ".")) for f, k in KNOWN):
            continue
        # `from .. import _validation` names the package itself, then the module
        if module == "streamfit":
            continue
        if not module.startswith(ALLOWED[key]):
            wrong.add(module)
    assert not wrong, f"{rel} imports {sorted(wrong)}, above its layer"


# The compiled state objects (csrc/*.pyx, built into streamfit._kernels) are
# the lowest layer of all: read from the source tree when it is there.
CSRC = SRC.parent.parent / "csrc"
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(streamfit[\w.]*)\s+import\s|import\s+(streamfit[\w.]*))",
                         re.MULTILINE)


def pyx_imports(source):
    """The streamfit modules a Cython source imports at run time (cimports
    are compile-time and name .pxd files, not modules above)."""
    return {a or b for a, b in _PYX_IMPORT.findall(source)}


@pytest.mark.skipif(not CSRC.is_dir(), reason="the compiled sources are not beside the "
                                              "package (an installed wheel)")
@pytest.mark.parametrize("path", sorted(CSRC.glob("*.pyx")) if CSRC.is_dir() else [],
                         ids=lambda p: p.name)
def test_the_compiled_state_objects_import_nothing_above_them(path):
    rel = f"csrc/{path.name}"
    allowed = ALLOWED["kernels"]
    wrong = {m for m in pyx_imports(path.read_text(encoding="utf-8"))
             if not m.startswith(allowed) and (rel, m) not in KNOWN
             and not any(f == rel and m.startswith(k + ".") for f, k in KNOWN)}
    assert not wrong, f"{rel} imports {sorted(wrong)}, above its layer"


def test_the_pyx_import_reader_sees_imports_and_skips_cimports():
    source = ("from streamfit._validation import a\n    from streamfit.quantile._sgd import b\n"
              "from _common cimport OK\nfrom streamfit.cython cimport x\nimport streamfit.pca\n"
              "import numpy as np\n")
    assert pyx_imports(source) == {"streamfit._validation", "streamfit.quantile._sgd",
                                   "streamfit.pca"}


def test_the_import_parser_sees_relative_and_nested_imports():
    """The check above catches what it must: relative imports of an estimator
    package, written inside a function, and absolute ones."""
    source = ("def f():\n    from ..quantile._sgd import Work\n"
              "    from .. import pca\n\nimport streamfit.dask\nfrom . import quantile\n")
    found = imports(SRC / "kernels" / "quantile.py", source)
    assert {"streamfit.quantile._sgd", "streamfit.pca", "streamfit.dask",
            "streamfit.kernels.quantile"} <= found
    assert sorted(m for m in found if m.startswith(ABOVE)) == [
        "streamfit.dask", "streamfit.pca", "streamfit.quantile._sgd",
        "streamfit.quantile._sgd.Work"]
