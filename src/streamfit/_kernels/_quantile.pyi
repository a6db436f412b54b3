# Stub of the compiled module streamfit._kernels._quantile (csrc/_quantile.pyx):
# the linear learner's state object, LinearSGD (public as
# streamfit.kernels.LinearSGD).
from typing import Any, Literal, Mapping, Sequence, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

_F64: TypeAlias = NDArray[np.float64]
_Row: TypeAlias = ArrayLike | Mapping[Any, float]

KIND_CONSTANT: int
KIND_INVERSE_TIME: int
KIND_STATISTICAL: int
KIND_ARRAY: int
MODE_SINGLE: int
MODE_BATCH: int
MODE_STORAGE: int
LOSS_CHECK: int
LOSS_SQUARED: int
NONCROSS_NONE: int
NONCROSS_PROJECT: int
STATE_DTYPE: np.dtype[Any]
PARAMS_DTYPE: np.dtype[Any]
STATE_FIELDS: tuple[str, ...]
FORMAT: int

def rs_length(da: int) -> int: ...
def random_scaling_matrix(rs: NDArray[np.float64], z: NDArray[np.float64], k: float) -> NDArray[np.float64]: ...
def _interrupt_at(polls: int, signum: int) -> None: ...
def river_learn_one(self: Any, x: Any, y: float) -> None: ...
def river_predict_one(self: Any, x: Any) -> float: ...

class LinearSGD:
    n_features: int
    feature_names: Any
    feature_index: dict[Any, int] | None
    refuse_new: bool
    source: Any
    def __init__(
        self,
        n_features: int,
        *,
        tau: float | Sequence[float] | NDArray[np.floating[Any]] = ...,
        loss: Literal["check", "squared"] = ...,
        mode: Literal["single", "batch", "storage"] = ...,
        schedule: Any = ...,
        batch_size: int | None = ...,
        average: bool = ...,
        fit_intercept: bool = ...,
        inference: bool = ...,
        scale: Literal["online"] | None = ...,
        drift: Literal["restart"] | None = ...,
        noncrossing: Literal["rearrange", "project"] = ...,
        coef_init: ArrayLike | None = ...,
        intercept_init: ArrayLike | float | None = ...,
    ) -> None: ...
    def learn(
        self,
        X: NDArray[np.floating[Any]],
        y: _F64,
        sample_weight: _F64 | None = ...,
        predictions: _F64 | None = ...,
        batch_size: int | None = ...,
    ) -> int: ...
    def learn_one(self, x: _Row, y: float, weight: float = ...) -> None: ...
    def predict(self, X: NDArray[np.floating[Any]]) -> _F64: ...
    def predict_one(self, x: _Row) -> Any: ...
    def configure(self, **changes: Any) -> bool: ...
    def random_scaling(self) -> tuple[_F64, _F64]: ...
    def copy(self) -> LinearSGD: ...
    def __copy__(self) -> LinearSGD: ...
    def __deepcopy__(self, memo: Any) -> LinearSGD: ...
    def to_state(self) -> dict[str, Any]: ...
    @staticmethod
    def from_state(state: dict[str, Any]) -> LinearSGD: ...
    @property
    def coef(self) -> _F64: ...
    @property
    def intercept(self) -> Any: ...
    @property
    def iterate(self) -> tuple[_F64, Any]: ...
    @property
    def n_samples_seen(self) -> int: ...
    @property
    def n_updates(self) -> int: ...
    @property
    def cumulative_loss(self) -> Any: ...
    @property
    def schedule_state(self) -> Any: ...
    @property
    def drift_rows(self) -> NDArray[np.int64]: ...
    @property
    def settings(self) -> dict[str, Any]: ...
    @property
    def n_quantiles(self) -> int: ...
    @property
    def warm_up_rows(self) -> int: ...
