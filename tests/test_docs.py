"""Every docstring example and every README code block runs as written."""
import doctest
import importlib
import pathlib
import pkgutil
import re

import numpy as np
import pytest

import streamfit

MODULES = sorted(m.name for m in pkgutil.walk_packages(streamfit.__path__, "streamfit.")
                 if "._kernels" not in m.name and not m.name.endswith("__main__"))
README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
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


@pytest.mark.skipif(not README.exists(), reason="README.md not beside the tests")
def test_readme_code_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    namespace = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
