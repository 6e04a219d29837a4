"""r-homogeneous-weight networks f_i(x) = ⟨W_i, x⟩^r + b_i of the bias-plateau paper (§4)."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._errors import ConfigError
from .base import AbstractModel

__all__ = ["Homogeneous", "check_positive_int"]


def check_positive_int(name: str, value, *, minimum: int = 1, why: str = "") -> None:
    """Raise `ConfigError` unless `value` is an integer ≥ `minimum` (bools are refused)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    if not ok:
        extra = f" ({why})" if why else ""
        raise ConfigError(f"`{name}` must be an integer ≥ {minimum}{extra}; got {value!r}.")


class Homogeneous(AbstractModel):
    """The r-homogeneous-weight network f_i(x) = ⟨W_{i,:}, x⟩^r + b_i, i = 1…k.

    Section 4 of the bias-plateau paper (*Plateau in Monotonic Linear Interpolation — A
    "Biased" View*, THEORY.md §B). Initialization as in the paper: every entry of W is
    |N(0, δ²)| (absolute value of a Gaussian), b = 0.

    **Arguments:**
    - `k`: number of classes (outputs), ≥ 2.
    - `d`: input dimension, ≥ 1 (the paper's orthogonal data need d ≥ k; checked there).
    - `r`: the degree, a positive integer. Proposition 1 needs r ≥ 3; smaller r runs, and
      the experiment reports its checks as not applicable (`theorem_applicable`).
    - `delta`: the initialization scale δ > 0.

    Parameters: `{"W": (k, d), "b": (k,)}`.
    """

    k: int = eqx.field(static=True)
    d: int = eqx.field(static=True)
    r: int = eqx.field(static=True)
    delta: float = eqx.field(static=True)

    def __check_init__(self):
        check_positive_int("k", self.k, minimum=2, why="the number of classes")
        check_positive_int("d", self.d, minimum=1, why="the input dimension")
        check_positive_int(
            "r", self.r, minimum=1, why="the degree of ⟨W_i, x⟩^r; Proposition 1 needs r ≥ 3"
        )
        if not (isinstance(self.delta, (int, float)) and math.isfinite(self.delta)):
            raise ConfigError(
                f"`delta` (the init scale δ) must be a finite number; got {self.delta!r}."
            )
        if not self.delta > 0:
            raise ConfigError(f"`delta` (the init scale δ) must be > 0; got {self.delta!r}.")

    def theorem_applicable(self) -> tuple[bool, str]:
        """Whether Proposition 1's degree assumption r ≥ 3 holds, with the reason."""
        if self.r >= 3:
            return True, f"r = {self.r} ≥ 3"
        return False, f"r = {self.r} < 3: Proposition 1 needs r ≥ 3 (tensor-power blow-up)"

    def init(self, key: PRNGKeyArray) -> dict[str, Array]:
        return {
            "W": self.delta * jnp.abs(jax.random.normal(key, (self.k, self.d))),
            "b": jnp.zeros((self.k,)),
        }

    def __call__(self, params: dict[str, Array], x: Float[Array, "n d"]) -> Float[Array, "n k"]:
        # `self.r` is a Python int, so `**` is an integer power: exact for negative bases.
        return (x @ params["W"].T) ** self.r + params["b"]

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        return {"W": ("class", "dim"), "b": ("class",)}

    def describe(self) -> dict:
        return {
            "family": "r-homogeneous",
            "k": self.k,
            "d": self.d,
            "r": self.r,
            "delta": self.delta,
        }
