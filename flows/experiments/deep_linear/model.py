# ruff: noqa: F722  (jaxtyping shape strings such as "n d_in" are not forward annotations)
"""The two-layer linear network ŷ = W₂W₁x of Saxe, McClelland & Ganguli (2014).

Defined here, not in `flows.models`: no other experiment uses it, and a paper plug-in adds
nothing to the engine. Its objective is the engine's `flows.squared_error`, which for vector
outputs is the paper's L = (1/2n) Σ_i ‖y_i − W₂W₁x_i‖² (summed over outputs, averaged over
samples).
"""

from __future__ import annotations

import jax
from jaxtyping import Array, Float, PRNGKeyArray

from flows.models.base import AbstractModel, float_field, int_field

__all__ = ["TwoLayerLinear"]


class TwoLayerLinear(AbstractModel):
    """f_θ(x) = W₂W₁x with W₁ (h × d_in), W₂ (d_out × h), no biases.

    `init(key)` draws a small *random* initialization, every entry N(0, `init_std`²)
    (unbalanced and unaligned); the balanced, aligned initialization of the closed forms is
    passed to `flows.make_problem` as `theta0` (`reduced.deep_linear.balanced_init`).

    **Arguments:** `d_in` input dimension, `h` hidden width, `d_out` output dimension (all
    ≥ 1); `init_std` > 0, the standard deviation of the random init.
    """

    d_in: int = int_field("d_in", hint="`d_in` is the input dimension.")
    h: int = int_field("h", hint="`h` is the hidden width.")
    d_out: int = int_field("d_out", hint="`d_out` is the output dimension.")
    init_std: float = float_field(
        "init_std", positive=True, default=1e-2, hint="std of the random init, e.g. 1e-2."
    )

    @property
    def d(self) -> int:
        """The input dimension under the name `flows.make_problem` checks the data against."""
        return self.d_in

    def init(self, key: PRNGKeyArray) -> dict[str, Array]:
        k1, k2 = jax.random.split(key)
        return {
            "W1": self.init_std * jax.random.normal(k1, (self.h, self.d_in)),
            "W2": self.init_std * jax.random.normal(k2, (self.d_out, self.h)),
        }

    def __call__(
        self, params: dict[str, Array], x: Float[Array, "n d_in"]
    ) -> Float[Array, "n d_out"]:
        return (x @ params["W1"].T) @ params["W2"].T

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        return {"W1": ("hidden", "dim"), "W2": ("output", "hidden")}

    def describe(self) -> dict:
        return {
            "family": "two-layer linear",
            "d_in": self.d_in,
            "h": self.h,
            "d_out": self.d_out,
            "init_std": self.init_std,
        }
