"""Every docstring example runs as written (the README's: tests/test_readme.py)."""
import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import streamfit

MODULES = sorted(m.name for m in pkgutil.walk_packages(streamfit.__path__, "streamfit.")
                 if "._kernels" not in m.name and not m.name.endswith("__main__"))


def _import(name):
    if name == "streamfit.river" or name.startswith("streamfit.river."):
        pytest.importorskip("river", reason="river is not installed (an optional extra)")
    return importlib.import_module(name)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = _import(name)
    result = doctest.testmod(module, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_public_class_has_an_example():
    from streamfit import schedules

    public = [getattr(streamfit, name) for name in streamfit.__all__]
    public += [obj for obj in map(schedules.__dict__.get, schedules.__all__)
               if isinstance(obj, type)]
    assert len(public) >= 10
    for obj in public:
        if callable(obj):
            assert obj.__doc__ and ">>>" in obj.__doc__, obj.__name__


@pytest.mark.parametrize("name", MODULES)
def test_examples_fit_the_page(name):
    """An example line longer than 79 characters is cut off in the site's code
    boxes (and in a terminal's help()): the reader scrolls sideways."""
    long = [f"{test.name}: {line}"
            for test in doctest.DocTestFinder().find(_import(name)) if test.docstring
            for line in map(str.strip, test.docstring.splitlines())
            if line.startswith((">>>", "...")) and len(line) > 79]
    assert not long, "\n".join(long)
