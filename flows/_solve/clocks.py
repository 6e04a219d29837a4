"""Clocks: the variable `flows.simulate` steps in, while save times stay physical.

- `PhysicalClock`: t itself.
- `LogClock`: s = ln(1 + t), so dθ/ds = −(1 + t)∇L and a run to t = 10⁸ costs O(log t)
  steps once the flow is slow.
- `LossClock`: dt/ds = 1/L(θ), with physical time carried as a state:

      dθ/ds = −∇L(θ)/L(θ) = −∇ log L(θ),   dt/ds = 1/L(θ),   dE/ds = ‖∇L(θ)‖²/L(θ),

  so s = ∫₀ᵗ L dt′ grows like log t for a loss decaying like 1/t (the logistic loss on
  separable data: linear-teacher paper, §6; Lyu & Li 2020) and a run to t = 10¹² costs
  O(log t) steps whatever the constants. The solve is cut into segments between
  consecutive save times, each ended by a diffrax `Event` at t = t_next found by root
  finding (`flows._solve.loss_clock`).

`simulate(clock=...)` takes a clock object or its name ('physical', 'log', 'loss').
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from .._errors import ConfigError
from .._validate import check_log_save_grid

__all__ = [
    "CLOCKS",
    "AbstractClock",
    "LogClock",
    "LossClock",
    "PhysicalClock",
    "as_clock",
    "log_save_times",
]


@dataclasses.dataclass(frozen=True)
class AbstractClock:
    """A clock for `flows.simulate`: what the solver steps in. Subclasses are frozen
    dataclasses (hashable: part of the compile-cache key) with a `name`, and define the
    three maps below, which `simulate` steps with (the loss clock, solved on its own by
    `flows._solve.loss_clock`, has none)."""

    name: ClassVar[str]

    def describe(self) -> str:
        return self.name

    def from_physical(self, t) -> np.ndarray:
        """Clock values of physical times (host side)."""
        raise NotImplementedError(f"the {self.name} clock has no map from physical time")

    def to_physical(self, s):
        """Physical time at clock value `s` (traced)."""
        raise NotImplementedError(f"the {self.name} clock has no map to physical time")

    def rate(self, s, dtype):
        """dt/ds at clock value `s` (traced)."""
        raise NotImplementedError(f"the {self.name} clock has no closed-form rate dt/ds")


@dataclasses.dataclass(frozen=True)
class PhysicalClock(AbstractClock):
    """Step in physical time t."""

    name: ClassVar[str] = "physical"

    def from_physical(self, t) -> np.ndarray:
        """Clock values of physical times (host side)."""
        return np.asarray(t, dtype=np.float64)

    def to_physical(self, s):
        """Physical time at clock value `s` (traced)."""
        return s

    def rate(self, s, dtype):
        """dt/ds at clock value `s` (traced)."""
        return 1.0


@dataclasses.dataclass(frozen=True)
class LogClock(AbstractClock):
    """Step in s = ln(1 + t) (needs t0 ≥ 0); dt/ds = 1 + t = eˢ."""

    name: ClassVar[str] = "log"

    def from_physical(self, t) -> np.ndarray:
        return np.log1p(t)

    def to_physical(self, s):
        return jnp.expm1(s)

    def rate(self, s, dtype):
        return jnp.exp(s).astype(dtype)


@dataclasses.dataclass(frozen=True)
class LossClock(AbstractClock):
    """Step in s with dt/ds = 1/L(θ), physical time t carried as a state — for losses
    that decay to 0 (logistic loss on separable data). `max_steps` of `simulate` applies to
    each segment between save times; the save times are reached by root finding, and the
    last saved time is always t1 (appended if `ts` ends before it); the observable `s`
    records the clock. No `stop`, no `dt0`, explicit solvers only. The solve runs in
    float64 whatever the problem's dtype (t runs to 10¹²; θ is promoted with it)."""

    name: ClassVar[str] = "loss"

    def describe(self) -> str:
        return "loss (dt/ds = 1/L)"


#: The clock names `simulate(clock=...)` accepts.
CLOCKS = ("physical", "log", "loss")
_BY_NAME = {"physical": PhysicalClock, "log": LogClock, "loss": LossClock}


def as_clock(clock) -> AbstractClock:
    """A clock object from a clock object or one of the names in `CLOCKS`."""
    if isinstance(clock, AbstractClock):
        return clock
    if isinstance(clock, str) and clock in _BY_NAME:
        return _BY_NAME[clock]()
    raise ConfigError(
        f"`clock` must be one of {CLOCKS} or a clock object (flows.PhysicalClock(), "
        f"flows.LogClock(), flows.LossClock()); got {clock!r}."
    )


def log_save_times(t1: float, n_save: int = 121, t0: float = 0.0, first: float = 1.0) -> np.ndarray:
    """t0, then `n_save` − 1 log-spaced times from `first` to `t1`: save times for late-phase
    runs (linearly spaced from t0 to t1 when t1 ≤ `first`)."""
    t1, n_save, t0, first = check_log_save_grid(t1, n_save, t0, first)
    first = max(first, t0 + 1e-12)
    if t1 <= first:
        return np.linspace(t0, t1, n_save)
    return np.concatenate([[t0], np.geomspace(first, t1, n_save - 1)])
