"""Every docstring example runs as written (the README's: tests/test_readme.py)."""
import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import streamfit

MODULES = sorted(m.name for m in pkgutil.walk_packages(streamfit.__path__, "streamfit.")
                 if "._kernels" not in m.name and not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name == "streamfit.river" or name.startswith("streamfit.river."):
        pytest.importorskip("river", reason="river is not installed (an optional extra)")
    module = importlib.import_module(name)
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
