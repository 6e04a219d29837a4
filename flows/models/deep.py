"""Deep fully connected networks f(x) = V_r σ(⋯σ(V_1 x)) + b (Theorem 1 of the bias-plateau
paper)."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._errors import ConfigError
from .._validate import as_choice, as_int
from ._kinks import PiecewiseLinear, leaky_relu_kinks
from .base import AbstractModel, ArrayIn, bool_field, float_field, int_field

__all__ = ["DeepFCN", "DEEP_ACTIVATIONS"]

#: Activations Theorem 1 allows: identity and ReLU (both positively 1-homogeneous).
DEEP_ACTIVATIONS = {"identity": lambda z: z, "relu": jax.nn.relu}


_WIDTH_HINT = "`width` is the hidden-layer width: an int, or one int per hidden layer."


def _widths(value) -> int | tuple[int, ...]:
    """`width` as a Python int, or a tuple of them (a list or a 1-d integer array is fine)."""
    if isinstance(value, list | tuple) or getattr(value, "ndim", 0) == 1:
        return tuple(as_int("width", w, minimum=1, hint=_WIDTH_HINT) for w in value)
    return as_int("width", value, minimum=1, hint=_WIDTH_HINT)


def _activation(value) -> str:
    return as_choice(
        "activation", value, sorted(DEEP_ACTIVATIONS), hint="Theorem 1 allows these two."
    )


class DeepFCN(AbstractModel):
    """f(x) = V_r σ(V_{r−1} σ(⋯ σ(V_1 x))) + b, depth r (number of weight matrices).

    Theorem 1 of the bias-plateau paper (its formula reconstructed from the text; checked in
    `reduced.derive.bias_plateau`).
    Layer widths n_0 = d, n_1 … n_{r−1} = `width` (an int, or one per hidden layer),
    n_r = k. Initialization as in the paper's experiments: Kaiming/He normal
    (std = gain/√fan_in with gain √2 for ReLU, 1 for identity) with every layer multiplied
    by δ^{1/r}, so the output is scaled by δ; the output bias starts at 0.

    **Arguments:**
    - `d`: input dimension ≥ 1. `k`: classes (output width) ≥ 2.
    - `depth`: r ≥ 1 weight matrices (Theorem 1 needs r ≥ 3: see `theorem_applicable`).
    - `width`: hidden width(s), ≥ 1 each (one per hidden layer when a tuple).
    - `activation`: 'identity' or 'relu'. `bias`: whether the output bias b exists.
    - `delta`: output scale δ > 0 of the initialization.
    - `smoothing`: ε ≥ 0; with ReLU and ε > 0 the hidden activation is the smoothed
      σ_ε(z) = ε softplus(z/ε) (the ε → 0 cross-check of the exact flow through the kinks).

    Parameters: `{"V1": (n_1, d), …, "V{r}": (k, n_{r−1}), "b": (k,)}` (no `b` without bias).
    """

    d: int = int_field("d", minimum=1, hint="`d` is the input dimension.")
    k: int = int_field("k", minimum=2, hint="`k` is the number of classes (outputs).")
    depth: int = int_field(
        "depth", minimum=1, hint="`depth` is the number of weight matrices; Theorem 1 needs ≥ 3."
    )
    width: int | tuple[int, ...] = eqx.field(static=True, default=16, converter=_widths)
    activation: str = eqx.field(static=True, default="relu", converter=_activation)
    bias: bool = bool_field("bias", default=True)
    delta: float = float_field(
        "delta", positive=True, default=1e-3, hint="`delta` is the init scale δ, e.g. 1e-3."
    )
    smoothing: float = float_field(
        "smoothing", default=0.0, hint="`smoothing` is ε ≥ 0 of σ_ε (0: the exact kink)."
    )

    @property
    def activation_kinks(self) -> PiecewiseLinear | None:
        """ReLU's kink at 0 (None for the identity, or when smoothed)."""
        if self.activation != "relu" or self.smoothing > 0:
            return None
        return leaky_relu_kinks(0.0)

    def sigma(self, z):
        """The hidden activation: identity, ReLU, or σ_ε with `smoothing` = ε > 0."""
        if self.activation == "relu" and self.smoothing > 0:
            return leaky_relu_kinks(0.0).smoothed(self.smoothing)(z)
        return DEEP_ACTIVATIONS[self.activation](z)

    def __check_init__(self):
        if self.smoothing < 0:
            raise ConfigError(f"`smoothing` (ε of σ_ε) must be ≥ 0; got {self.smoothing!r}.")
        if isinstance(self.width, tuple) and len(self.width) != self.depth - 1:
            raise ConfigError(
                f"`width` as a tuple needs one entry per hidden layer (depth − 1 = "
                f"{self.depth - 1}); got {len(self.width)} entries."
            )

    @property
    def widths(self) -> tuple[int, ...]:
        """(n_0, n_1, …, n_r): input, hidden and output widths."""
        hidden = self.width if isinstance(self.width, tuple) else (self.width,) * (self.depth - 1)
        return (self.d, *hidden, self.k)

    @property
    def layer_names(self) -> tuple[str, ...]:
        return tuple(f"V{i}" for i in range(1, self.depth + 1))

    def theorem_applicable(self) -> tuple[bool, str]:
        """Whether Theorem 1's architecture assumptions hold (r ≥ 3, output bias), with why."""
        reasons = []
        if self.depth < 3:
            reasons.append(f"depth r = {self.depth} < 3 (Theorem 1 needs r ≥ 3)")
        if not self.bias:
            reasons.append("no output bias (Theorem 1's error plateau needs the bias gap)")
        if reasons:
            return False, "; ".join(reasons)
        return True, f"r = {self.depth} ≥ 3, σ = {self.activation}, output bias"

    def init(self, key: PRNGKeyArray) -> dict[str, Array]:
        gain = math.sqrt(2.0) if self.activation == "relu" else 1.0
        scale = self.delta ** (1.0 / self.depth)
        n = self.widths
        keys = jax.random.split(key, self.depth)
        params = {
            name: scale * gain / math.sqrt(n[i]) * jax.random.normal(keys[i], (n[i + 1], n[i]))
            for i, name in enumerate(self.layer_names)
        }
        if self.bias:
            params["b"] = jnp.zeros((self.k,))
        return params

    def features(
        self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"], act=None
    ) -> Float[Array, "n k"]:
        """The weights' signal V_r σ(⋯ σ(V_1 x)), without the bias (`act` as in `forward`)."""
        h = jnp.asarray(x)
        for i, name in enumerate(self.layer_names):
            h = h @ params[name].T
            if i < self.depth - 1:
                h = self.sigma(h) if act is None else act(f"h{i + 1}", h)
        return h

    def forward(
        self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"], act
    ) -> Float[Array, "n k"]:
        """The network with the hidden activation given as `act(layer, z)`: layers 'h1' …
        'h{r−1}', pre-activations z of shape (n, width). `__call__` is `forward` with σ."""
        out = self.features(params, x, act)
        if self.bias:
            out = out + params["b"]
        return out

    def __call__(self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"]) -> Float[Array, "n k"]:
        return self.forward(params, x, None)

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        dims = {}
        for i, name in enumerate(self.layer_names):
            rows = "class" if i == self.depth - 1 else f"hidden{i + 1}"
            cols = "dim" if i == 0 else f"hidden{i}"
            dims[name] = (rows, cols)
        dims["b"] = ("class",)
        return dims

    def describe(self) -> dict:
        return {
            "family": "deep-fcn",
            "d": self.d,
            "k": self.k,
            "depth": self.depth,
            "widths": list(self.widths),
            "activation": self.activation,
            "bias": self.bias,
            "delta": self.delta,
            "smoothing": self.smoothing,
        }
