"""r-homogeneous-weight networks f_i(x) = ⟨W_i, x⟩^r + b_i of the bias-plateau paper (§4)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .base import AbstractModel, ArrayIn, float_field, int_field

__all__ = ["Homogeneous"]


class Homogeneous(AbstractModel):
    """The r-homogeneous-weight network f_i(x) = ⟨W_{i,:}, x⟩^r + b_i, i = 1…k.

    Section 4 of the bias-plateau paper (*Plateau in Monotonic Linear Interpolation — A
    "Biased" View*, §4). Initialization as in the paper: every entry of W is
    |N(0, δ²)| (absolute value of a Gaussian), b = 0.

    **Arguments:**
    - `k`: number of classes (outputs), ≥ 2.
    - `d`: input dimension, ≥ 1 (the paper's orthogonal data need d ≥ k; checked there).
    - `r`: the degree, a positive integer. Proposition 1 needs r ≥ 3; smaller r runs, and
      the experiment reports its checks as not applicable (`theorem_applicable`).
    - `delta`: the initialization scale δ > 0.

    Parameters: `{"W": (k, d), "b": (k,)}`.
    """

    k: int = int_field("k", minimum=2, hint="`k` is the number of classes.")
    d: int = int_field("d", minimum=1, hint="`d` is the input dimension.")
    r: int = int_field(
        "r", minimum=1, hint="`r` is the degree of ⟨W_i, x⟩^r; Proposition 1 needs r ≥ 3."
    )
    delta: float = float_field(
        "delta", positive=True, hint="`delta` is the init scale δ, e.g. delta=1e-3."
    )

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

    def __call__(self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"]) -> Float[Array, "n k"]:
        # `self.r` is a Python int, so `**` is an integer power: exact for negative bases.
        return (jnp.asarray(x) @ params["W"].T) ** self.r + params["b"]

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
