"""Safe-format hooks for estimators whose state objects do not have their
own ``_get_state_dict`` / ``_set_state_dict`` yet (see :mod:`._model_file`).

Interim: FollowTheLeaderPCA, through the attributes it pickles. The state
dict names each field; loading rebuilds the pickled attributes from it and
hands them to the estimator's ``__setstate__``, whose checks of a loaded
state (every array's dtype, layout, shape, finiteness; the counts; the
solver's block orthonormal) are the ones unpickling runs. When the PCA
state objects get their own hooks, this entry goes.
"""
from __future__ import annotations

import numpy as np

from .pca import FollowTheLeaderPCA

_LEADER_VERSION = 1


def _record_fields(dtype, prefix=""):
    """[(dotted name, field path, kind 'i' or 'f')] of a structured dtype's
    leaves (a record's nested records flattened)."""
    out = []
    for name in dtype.names:
        sub = dtype.fields[name][0]
        if sub.names is not None:
            out += [(f"{prefix}{name}.{n}", (name,) + path, kind)
                    for n, path, kind in _record_fields(sub)]
        else:
            out.append((f"{prefix}{name}", (name,), sub.kind))
    return out


def _leader_get(est):
    d = est.__getstate__()
    if d.get("state_") is None:
        return None
    params = set(est._get_param_names())
    known = params | {"state_", "_rng", "_fitted_random_state", "_fitted_noise",
                      "n_components_", "instances_", "n_features_in_", "feature_names_in_",
                      *type(est)._LOADED_ARRAYS}
    other = sorted(set(d) - known)
    if other:       # a state this adapter does not know would be lost: refuse
        raise TypeError(f"{type(est).__name__} holds state the safe format does not know "
                        f"({other}); use pickle or joblib, for trusted use only")
    record = d["state_"]
    fields = {}
    for name, path, kind in _record_fields(record.dtype):
        value = record
        for part in path:
            value = value[part]
        fields[name] = int(value[0]) if kind == "i" else float(value[0])
    state = {"version": _LEADER_VERSION, "n_features_in_": int(d["n_features_in_"]),
             "n_components_": int(d["n_components_"]), "instances_": d["instances_"],
             "fitted_noise": int(d["_fitted_noise"]), "record": fields,
             "arrays": {name: d[name] for name in type(est)._LOADED_ARRAYS}}
    if "feature_names_in_" in d:
        state["feature_names_in_"] = [str(n) for n in d["feature_names_in_"]]
    return state


def _leader_set(est, state):
    cls = type(est)
    expected = {"version", "n_features_in_", "n_components_", "instances_", "fitted_noise",
                "record", "arrays"}
    keys = set(state)
    if not expected <= keys <= expected | {"feature_names_in_"}:
        raise ValueError(f"the state's fields are {sorted(keys)}, expected "
                         f"{sorted(expected)} (and optionally feature_names_in_)")
    if state["version"] != _LEADER_VERSION or type(state["version"]) is not int:
        raise ValueError(f"version is {state['version']!r}, expected {_LEADER_VERSION}")
    record = np.zeros(1, dtype=cls._STATE_DTYPE)
    fields = state["record"]
    leaves = _record_fields(record.dtype)
    if not isinstance(fields, dict) or set(fields) != {name for name, _, _ in leaves}:
        raise ValueError(f"record has the fields "
                         f"{sorted(fields) if isinstance(fields, dict) else fields!r}, "
                         f"expected {sorted(name for name, _, _ in leaves)}")
    for name, path, kind in leaves:
        value = fields[name]
        ok = type(value) is int if kind == "i" else type(value) is float
        if not ok:
            raise ValueError(f"record[{name!r}] is {value!r}, expected "
                             f"{'an integer' if kind == 'i' else 'a float'}")
        if kind == "i" and not -2 ** 63 <= value < 2 ** 63:
            raise ValueError(f"record[{name!r}] is {value}, outside int64")
        target = record
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
    arrays = state["arrays"]
    if not isinstance(arrays, dict) or set(arrays) != set(cls._LOADED_ARRAYS):
        raise ValueError(f"arrays has the fields "
                         f"{sorted(arrays) if isinstance(arrays, dict) else arrays!r}, "
                         f"expected {sorted(cls._LOADED_ARRAYS)}")
    pickled = dict(est.get_params(deep=False))
    pickled.update({name: arrays[name] for name in cls._LOADED_ARRAYS})
    pickled.update(state_=record, _rng=np.random.default_rng(), _fitted_random_state=None,
                   _fitted_noise=state["fitted_noise"], n_components_=state["n_components_"],
                   instances_=state["instances_"], n_features_in_=state["n_features_in_"])
    names = state.get("feature_names_in_")
    if names is not None:
        if not isinstance(names, list) or len(names) != state["n_features_in_"] or \
                not all(isinstance(n, str) for n in names):
            raise ValueError("feature_names_in_ is not a list of n_features_in_ strings")
        pickled["feature_names_in_"] = np.array(names, dtype=object)
    # the checks of a loaded state that unpickling runs (ValueError naming
    # the attribute)
    est.__setstate__(pickled)


# (get, set) by class
ADAPTERS = {FollowTheLeaderPCA: (_leader_get, _leader_set)}
