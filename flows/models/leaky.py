# ruff: noqa: F722  (jaxtyping shape strings such as " n" are not forward annotations)
"""The ±v leaky-ReLU network of the linear-teacher paper (eq. 1).

N_W(x) = v Σ_{j=1}^k σ(w^(j)·x) − v Σ_{j=1}^k σ(u^(j)·x), σ(z) = max(α z, z), with a fixed
output weight v > 0 and trainable first-layer rows w^(j) ("w neurons") and u^(j)
("u neurons"). The network is 1-homogeneous in W = (w, u).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._errors import ConfigError
from .._validate import as_float
from ._kinks import PiecewiseLinear, leaky_relu_kinks
from .base import AbstractModel, ArrayIn, bool_field, float_field, int_field

__all__ = ["LeakyReLUNet"]


_SLOPE_HINT = "The paper's theorems need 0 < α < 1; α = 0 is plain ReLU."


def _slope(value) -> float:
    """The leaky slope α as a Python float in [0, 1)."""
    v = as_float("slope", value, lo=0.0, hint=_SLOPE_HINT)
    if not v < 1:
        raise ConfigError(
            f"`slope` (the leaky-ReLU slope α) must lie in [0, 1); got {v!r}. {_SLOPE_HINT}"
        )
    return v


class LeakyReLUNet(AbstractModel):
    """N_W(x) = v Σ_j σ(w^(j)·x) − v Σ_j σ(u^(j)·x), σ the leaky ReLU with slope α (eq. 1).

    **Arguments:**
    - `k`: neurons of each type (≥ 1); the network has 2k hidden neurons.
    - `d`: input dimension of the data (≥ 1).
    - `slope`: the leaky slope α ∈ [0, 1). The paper's theorems need 0 < α < 1; α = 0
      (ReLU) is allowed for counterexamples, and the Theorem 5.1 checks then report
      "not applicable".
    - `v`: the fixed output weight (> 0).
    - `init_scale`: standard deviation of every entry of w^(j), u^(j) at initialization
      (> 0; tiny, e.g. 1e-4, for the clustering regime; large, e.g. 1, for little clustering).
    - `bias`: append a constant feature 1 to x, which is a first-layer bias per neuron and
      keeps the model 1-homogeneous (App. K). The parameters then have d + 1 columns.
    - `smoothing`: ε ≥ 0. 0 (default): the leaky ReLU itself, whose kink at 0 the flow
      meets (`simulate` integrates it exactly: `flows.simulate_nonsmooth`); ε > 0: the
      smoothed σ_ε(z) = α z + (1 − α) ε softplus(z/ε), the ε → 0 cross-check.

    **Parameters:** `{"w": (k, d′), "u": (k, d′)}` with d′ = d (+1 with `bias`).

    Raises `ConfigError` for α outside [0, 1), v ≤ 0, k < 1, d < 1 or init_scale ≤ 0.
    """

    k: int = int_field("k", minimum=1, hint="`k` is the number of neurons of each type.")
    d: int = int_field("d", minimum=1, hint="`d` is the input dimension.")
    slope: float = eqx.field(static=True, default=0.1, converter=_slope)
    v: float = float_field("v", positive=True, default=1.0, hint="`v` is the fixed output weight.")
    init_scale: float = float_field(
        "init_scale", positive=True, default=1e-3, hint="Try e.g. init_scale=1e-3."
    )
    bias: bool = bool_field("bias", default=False)
    smoothing: float = float_field(
        "smoothing", default=0.0, hint="`smoothing` is ε ≥ 0 of σ_ε (0: the exact kink)."
    )

    def __check_init__(self):
        if self.smoothing < 0:
            raise ConfigError(f"`smoothing` (ε of σ_ε) must be ≥ 0; got {self.smoothing!r}.")

    @property
    def activation_kinks(self) -> PiecewiseLinear | None:
        """The activation's kinks (None when smoothed: the flow is then smooth)."""
        return None if self.smoothing > 0 else leaky_relu_kinks(self.slope)

    @property
    def d_features(self) -> int:
        """Columns of w and u: d, or d + 1 with the constant bias feature."""
        return self.d + int(self.bias)

    @property
    def leaky(self) -> bool:
        """Whether α > 0 (the paper's setting; Theorem 5.1 needs it)."""
        return self.slope > 0

    def features(self, x: Float[ArrayIn, "n d"]) -> Float[Array, "n dp"]:
        """The inputs the neurons see: x, or [x, 1] with `bias` (App. K)."""
        x = jnp.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ConfigError(
                f"inputs must have shape (n, {self.d}) for this model; got {tuple(x.shape)}."
            )
        if self.bias:
            return jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)
        return x

    def sigma(self, z):
        """σ(z) = max(αz, z) (eq. 1), or σ_ε with `smoothing` = ε > 0."""
        if self.smoothing > 0:
            return leaky_relu_kinks(self.slope).smoothed(self.smoothing)(z)
        return jnp.where(z >= 0, z, self.slope * z)

    def init(self, key: PRNGKeyArray) -> dict[str, Array]:
        kw, ku = jax.random.split(key)
        shape = (self.k, self.d_features)
        return {
            "w": self.init_scale * jax.random.normal(kw, shape),
            "u": self.init_scale * jax.random.normal(ku, shape),
        }

    def check_params(self, params: dict) -> None:
        """Raise `ConfigError` unless `params` has w and u of shape (k, d′)."""
        shape = (self.k, self.d_features)
        for name in ("w", "u"):
            if name not in params:
                raise ConfigError(f"parameters need a {name!r} entry of shape {shape}.")
            if tuple(jnp.shape(params[name])) != shape:
                raise ConfigError(
                    f"parameter {name!r} must have shape {shape} (k, d′); "
                    f"got {tuple(jnp.shape(params[name]))}."
                )

    def forward(
        self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"], act
    ) -> Float[Array, " n"]:
        """The network with the activation given as `act(layer, z)`: layers 'w' and 'u',
        pre-activations z of shape (n, k). `__call__` is `forward` with σ."""
        z = self.features(x)
        hw = act("w", z @ params["w"].T)
        hu = act("u", z @ params["u"].T)
        return self.v * (jnp.sum(hw, axis=1) - jnp.sum(hu, axis=1))

    def __call__(self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"]) -> Float[Array, " n"]:
        return self.forward(params, x, lambda layer, z: self.sigma(z))

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        # With a bias feature the columns are not the data's `dim`, so they get their own name.
        col = "dim_bias" if self.bias else "dim"
        return {"w": ("neuron", col), "u": ("neuron", col)}

    def describe(self) -> dict:
        return {
            "family": "leaky-relu ±v (linear teacher)",
            "k": self.k,
            "d": self.d,
            "slope": self.slope,
            "v": self.v,
            "init_scale": self.init_scale,
            "bias": self.bias,
            "smoothing": self.smoothing,
        }
