"""pytest plugin (-p one_config_per_family, with .ci on PYTHONPATH): of
tests/test_estimator_checks.py's test over every registered configuration,
keep the configurations that come first in their family in the registry
(tests/_registry.py: quantile, interval, pca, capped, dropout, lowrank, and
any family added later) -- the stream contract on one configuration per
family, for the runs that cannot afford all of them (the emulated aarch64
wheel, .ci/aarch64.sh). Every other test is left as collected."""


import pytest


def pytest_collection_modifyitems(config, items):
    keep, drop, first = [], [], {}
    for item in items:
        if getattr(item, "originalname", None) == "test_shipped_estimators_pass":
            for name, case in item.module.CASES.items():
                first.setdefault(case.family, name)
            name = item.callspec.id.split("-check_")[0]
            (keep if name in first.values() else drop).append(item)
        else:
            keep.append(item)
    kept = {item.callspec.id.split("-check_")[0] for item in keep if hasattr(item, "callspec")}
    if first and not set(first.values()) <= kept:
        # (the test ids changed shape: fail rather than run nothing)
        raise pytest.UsageError(f"one_config_per_family: no test kept for "
                                f"{sorted(set(first.values()) - kept)}")
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
