"""Data sets and their moments.

A `Dataset` is a frozen pair of arrays `x (n, d)` and `y (n,)` with a name and metadata.
`moments` computes what the multi-stage theory needs: Σ = E[xxᵀ], b = E[f x], whether
Assumptions 1–2 hold exactly, or which normalization maps the data onto them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from ._errors import ConfigError

__all__ = [
    "Dataset",
    "TARGETS",
    "paper_data",
    "assumption_data",
    "from_arrays",
    "DataMoments",
    "moments",
]


def _f1(x):
    return np.tanh(x + 7.5) + np.tanh(x) + np.tanh(x - 7.5)


#: Target functions of the multi-stage paper (App. D): f₁, f₂, f₃.
TARGETS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "f1": _f1,
    "f2": np.tanh,
    "f3": np.sin,
}


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Inputs `x (n, d)`, targets `y (n,)` (float64 NumPy arrays), a name and metadata."""

    x: np.ndarray
    y: np.ndarray
    name: str
    meta: dict = dataclasses.field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def d(self) -> int:
        return self.x.shape[1]


def _target(name: str):
    if name not in TARGETS:
        raise ConfigError(
            f"`target` must be one of {sorted(TARGETS)}; got {name!r}. "
            "For your own data use `from_arrays(x, y)`."
        )
    return TARGETS[name]


def from_arrays(x, y, name: str = "user") -> Dataset:
    """A `Dataset` from user arrays: `x` of shape (n,) or (n, d), `y` of shape (n,).

    Raises `ConfigError` for mismatched lengths, empty or non-finite data.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ConfigError(f"`x` must have shape (n,) or (n, d); got shape {x.shape}.")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ConfigError(f"`y` must have shape (n,); got shape {y.shape}.")
    if x.shape[0] != y.shape[0]:
        raise ConfigError(
            f"`x` and `y` must have the same number of samples; got {x.shape[0]} and {y.shape[0]}."
        )
    if x.shape[0] == 0:
        raise ConfigError("the data set is empty: `x` and `y` need at least one sample.")
    for nm, arr in (("x", x), ("y", y)):
        bad = ~np.isfinite(arr)
        if bad.any():
            idx = np.argwhere(bad)[0].tolist()
            raise ConfigError(
                f"`{nm}` contains non-finite values (first at index {idx}); "
                "remove or impute them before training."
            )
    return Dataset(x=x, y=y, name=name)


def paper_data(target: str = "f1", n: int = 1000, lo: float = -15.0, hi: float = 15.0) -> Dataset:
    """The multi-stage paper's data (App. D): `n` equidistant points on [lo, hi], d = 1.

    Targets: f₁ = tanh(x+7.5) + tanh(x) + tanh(x−7.5), f₂ = tanh x, f₃ = sin x. These data
    do **not** satisfy Assumptions 1–2 (E x² = 75, E[f₁ x] ≈ 19): predictions are made in
    the units of the data through `reduced.multistage.normalization`.
    """
    f = _target(target)
    if n < 2:
        raise ConfigError(f"`n` must be ≥ 2; got {n}.")
    if not hi > lo:
        raise ConfigError(f"the interval needs hi > lo; got [{lo}, {hi}].")
    x = np.linspace(lo, hi, n)
    ds = from_arrays(x, f(x), name=f"paper-{target}")
    return dataclasses.replace(ds, meta={"target": target, "n": n, "interval": [lo, hi]})


def assumption_data(target: str = "f2", n: int = 200, d: int = 1, seed: int = 0) -> Dataset:
    """Data satisfying Assumptions 1–2 exactly: E xxᵀ = I and E[f x] = e₁ (sample averages).

    d = 1: `n` equidistant points, rescaled so that mean(x²) = 1. d > 1: Gaussian points
    whitened exactly (sample covariance I, symmetric by adding −x for every x). The target
    is f(x₁) evaluated on the first coordinate, then multiplied by the constant that makes
    E[f x] = e₁; in d > 1 the remaining correlations E[f xᵢ] (i ≥ 2) are removed by adding
    a linear correction, so E[f x] = e₁ to rounding.
    """
    f = _target(target)
    if n < 2 * d:
        raise ConfigError(f"`n` must be ≥ 2·d = {2 * d} to whiten {d}-D data; got {n}.")
    if d < 1:
        raise ConfigError(f"`d` must be ≥ 1; got {d}.")
    if d == 1:
        x = np.linspace(-1.0, 1.0, n)[:, None]
    else:
        rng = np.random.default_rng(seed)
        half = rng.standard_normal((n // 2, d))
        x = np.concatenate([half, -half])
        n = x.shape[0]
    cov = x.T @ x / n
    evals, evecs = np.linalg.eigh(cov)
    x = x @ (evecs @ np.diag(evals**-0.5) @ evecs.T)
    raw = f(x[:, 0])
    b = x.T @ raw / n  # E[raw · x]
    if abs(b[0]) < 1e-12:
        raise ConfigError(
            f"target {target!r} is uncorrelated with x₁ on this data (E[f x₁] = {b[0]:.2e}); "
            "Assumption 2 cannot be met by rescaling. Choose an odd target such as 'f2'."
        )
    y = raw / b[0]
    if d > 1:
        # remove the correlation with x_2..x_d: y ← y − Σ_{i≥2} E[y x_i] x_i (E xxᵀ = I).
        corr = x.T @ y / n
        y = y - x[:, 1:] @ corr[1:]
    ds = from_arrays(x, y, name=f"assumption-{target}-d{d}")
    return dataclasses.replace(ds, meta={"target": target, "n": n, "d": d, "seed": seed})


@dataclasses.dataclass(frozen=True)
class DataMoments:
    """Second moments of a data set as the multi-stage theory uses them.

    `sigma` = E[xxᵀ] (d, d); `b` = E[y x] (d,); `s2` = trace(Σ)/d; `isotropic` when
    ‖Σ − s² I‖_max ≤ 1e-8 s²; `a12` when Σ = I and b = e₁ to 1e-8 (Assumptions 1–2 hold).
    """

    sigma: np.ndarray
    b: np.ndarray
    s2: float
    b_norm: float
    isotropic: bool
    a12: bool

    @property
    def direction(self) -> np.ndarray:
        """b̂ = E[f x] / ‖E[f x]‖, the direction the weights condense on."""
        return self.b / self.b_norm

    def describe(self) -> str:
        if self.a12:
            return "Assumptions 1–2 hold (E xxᵀ = I, E[f x] = e₁)"
        if self.isotropic:
            lam = math.sqrt(self.b_norm / self.s2)
            return (
                f"normalized: E xxᵀ = {self.s2:.4g}·I, ‖E[f x]‖ = {self.b_norm:.4g}; "
                f"a = {lam:.4g}·â, w = {lam:.4g}·ŵ, t = τ/{self.b_norm:.4g} (exact for the "
                f"linear part; the activation acts as σ(√‖b‖ z)/√‖b‖, so σ‴(0) is "
                f"{self.b_norm:.3g}× larger in these units)"
            )
        return "E xxᵀ is not isotropic: whiten the inputs for the theory to apply"


def moments(data: Dataset) -> DataMoments:
    """Moments of `data` (sample averages): Σ = E[xxᵀ], b = E[y x]."""
    x, y = data.x, data.y
    n, d = x.shape
    sigma = x.T @ x / n
    b = x.T @ y / n
    s2 = float(np.trace(sigma) / d)
    isotropic = bool(np.max(np.abs(sigma - s2 * np.eye(d))) <= 1e-8 * s2)
    b_norm = float(np.linalg.norm(b))
    e1 = np.zeros(d)
    e1[0] = 1.0
    a12 = bool(isotropic and abs(s2 - 1) <= 1e-8 and np.max(np.abs(b - e1)) <= 1e-8)
    return DataMoments(sigma=sigma, b=b, s2=s2, b_norm=b_norm, isotropic=isotropic, a12=a12)
