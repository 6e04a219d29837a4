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

from .._errors import ConfigError
from .._validate import as_choice, as_float, as_int, as_real_array, as_seed

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
    """Inputs `x (n, d)`, targets `y (n,)` (or `(n, …)`), a name and metadata.

    Checked on construction (`ConfigError` otherwise): `x` is stored as a float64 NumPy
    array of shape (n, d), n ≥ 1, d ≥ 1; `y` as a NumPy array of real numbers with n rows
    (its integer or float dtype is kept: class labels stay integers; bool becomes 0/1);
    both finite. For (n,) inputs or your own arrays use `from_arrays(x, y)`.
    """

    x: np.ndarray
    y: np.ndarray
    name: str
    meta: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        x = as_real_array("x", self.x)
        if x.ndim != 2:
            raise ConfigError(
                f"`x` must have shape (n, d); got shape {x.shape}. "
                "`from_arrays(x, y)` also takes x of shape (n,)."
            )
        if x.shape[0] == 0:
            raise ConfigError("the data set is empty: `x` and `y` need at least one sample.")
        if x.shape[1] == 0:
            raise ConfigError(f"`x` has no input dimensions (shape {x.shape}); need d ≥ 1.")
        y = as_real_array("y", self.y, dtype=None)
        if y.ndim < 1 or y.shape[0] != x.shape[0]:
            raise ConfigError(
                f"`y` must have one row per sample of `x` ({x.shape[0]}); got shape {y.shape}."
            )
        if not isinstance(self.name, str):
            raise ConfigError(f"`name` must be a string; got {self.name!r}.")
        if not isinstance(self.meta, dict):
            raise ConfigError(f"`meta` must be a dict; got {type(self.meta).__name__}.")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def d(self) -> int:
        return self.x.shape[1]


def _target(name: str):
    hint = "For your own data use `from_arrays(x, y)`."
    name = as_choice("target", name, sorted(TARGETS), hint=hint)
    return TARGETS[name]


def from_arrays(x, y, name: str = "user") -> Dataset:
    """A `Dataset` from user arrays: `x` of shape (n,) or (n, d), `y` of shape (n,) (scalar
    targets; (n, 1) is read as (n,)) or (n, p) (vector targets, p ≥ 2), stored as float64.

    Any real numeric dtype is accepted (NumPy, JAX, lists); bool arrays are read as 0/1.
    Raises `ConfigError` for mismatched lengths, empty, ragged, complex, non-numeric or
    non-finite data.
    """
    x = as_real_array("x", x)
    y = as_real_array("y", y)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ConfigError(f"`x` must have shape (n,) or (n, d); got shape {x.shape}.")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim not in (1, 2):
        raise ConfigError(
            f"`y` must have shape (n,) (scalar targets) or (n, p) (vector targets); got shape "
            f"{y.shape}."
        )
    if x.shape[0] != y.shape[0]:
        raise ConfigError(
            f"`x` and `y` must have the same number of samples; got {x.shape[0]} and {y.shape[0]}."
        )
    if x.shape[0] == 0:
        raise ConfigError("the data set is empty: `x` and `y` need at least one sample.")
    return Dataset(x=x, y=y, name=name)


def paper_data(target: str = "f1", n: int = 1000, lo: float = -15.0, hi: float = 15.0) -> Dataset:
    """The multi-stage paper's data (App. D): `n` equidistant points on [lo, hi], d = 1.

    Targets: f₁ = tanh(x+7.5) + tanh(x) + tanh(x−7.5), f₂ = tanh x, f₃ = sin x. These data
    do **not** satisfy Assumptions 1–2 (E x² = 75, E[f₁ x] ≈ 19): predictions are made in
    the units of the data through `reduced.multistage.normalization`.
    """
    f = _target(target)
    n = as_int("n", n, minimum=2, hint="`n` is the number of points, e.g. n=1000.")
    lo, hi = as_float("lo", lo), as_float("hi", hi)
    if not hi > lo:
        raise ConfigError(f"the interval needs hi > lo; got lo = {lo}, hi = {hi}.")
    x = np.linspace(lo, hi, n)
    ds = from_arrays(x, f(x), name=f"paper-{target}")
    return dataclasses.replace(ds, meta={"target": target, "n": n, "interval": [lo, hi]})


def assumption_data(target: str = "f2", n: int = 200, d: int = 1, seed: int = 0) -> Dataset:
    """Data satisfying Assumptions 1–2 exactly: E xxᵀ = I and E[f x] = e₁ (sample averages).

    d = 1: `n` equidistant points, rescaled so that mean(x²) = 1. d > 1: Gaussian points
    whitened exactly (sample covariance I, symmetric by adding −x for every x; for odd `n`
    the origin is the n-th point, so there are exactly `n` points). The target
    is f(x₁) evaluated on the first coordinate, then multiplied by the constant that makes
    E[f x] = e₁; in d > 1 the remaining correlations E[f xᵢ] (i ≥ 2) are removed by adding
    a linear correction, so E[f x] = e₁ to rounding.
    """
    f = _target(target)
    d = as_int("d", d, minimum=1, hint="`d` is the input dimension.")
    n = as_int("n", n, minimum=2 * d, hint=f"Whitening {d}-D data needs n ≥ 2·d = {2 * d}.")
    seed = as_seed("seed", seed)
    if d == 1:
        x = np.linspace(-1.0, 1.0, n)[:, None]
    else:
        rng = np.random.default_rng(seed)
        half = rng.standard_normal((n // 2, d))
        # odd n: the origin completes the set (still symmetric; every target has f(0) = 0)
        x = np.concatenate([half, -half, np.zeros((n % 2, d))])
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
    if not isinstance(data, Dataset):
        raise ConfigError(
            f"`data` must be a Dataset (e.g. `from_arrays(x, y)`); got {type(data).__name__}."
        )
    x, y = data.x, data.y
    if y.ndim != 1:
        raise ConfigError(f"moments need scalar targets y of shape (n,); got {y.shape}.")
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
