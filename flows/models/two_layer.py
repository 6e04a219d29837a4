"""Two-layer networks f_θ(x) = Σ_k a_k σ(w_kᵀx [+ c_k]) of the multi-stage paper."""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.core
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._errors import ConfigError
from .._validate import as_choice, as_float
from .base import AbstractModel, ArrayIn, bool_field, int_field


def _scaled_erf(z):
    return 0.5 * math.sqrt(math.pi) * jax.scipy.special.erf(z)


#: σ′ as a function of σ(z) where that is cheaper than σ′(z) (no second transcendental pass).
_DERIVATIVE_FROM_VALUE: dict[str, Callable] = {"tanh": lambda s: 1.0 - s * s}

#: Built-in tanh-like activations: σ(0) = 0, σ′(0) = 1, σ″(0) = 0, bounded σ‴ (Assumption 3).
ACTIVATIONS: dict[str, Callable] = {
    "tanh": jnp.tanh,
    "sin": jnp.sin,
    "erf": _scaled_erf,  # √π/2 · erf(z), so σ′(0) = 1
}


#: Bytes of one block×m slab of activations in `TwoLayer.fused_grad` (fits a 2 MiB L2 cache
#: with room for σ′ and the inputs; measured on the 2-core AMD EPYC CI-class machine).
BLOCK_BYTES = 2**20

#: Fewest samples per block, whatever m: below ~8 rows the per-block work is too thin for
#: the vector units and the scan's per-iteration cost dominates. Measured (best of 6,
#: gradient / loss / Hessian-vector product, n = 1000): m = 10⁵ float32 at 2 rows (what 1 MiB
#: gives) 69 / 19 / 100 ms, at 8 rows 35 / 20 / 63 ms; float64 at 1 row 121 / 1340 / 199 ms,
#: at 8 rows 76 / 52 / 132 ms; m = 2·10⁴ float32 at 4 rows 19 / 5.6 / 30 ms, at 8 rows
#: 7.8 / 3.4 / 14 ms. Above ~64 rows the slab leaves the cache again (m = 10⁵ float32 at
#: 64 rows: 84 / 16 / 174 ms).
MIN_BLOCK_ROWS = 8


def block_rows(m: int, itemsize: int = 8) -> int:
    """Samples per block in `TwoLayer.fused_grad`: ~`BLOCK_BYTES` of activations, but at
    least `MIN_BLOCK_ROWS`. `itemsize`: bytes per element of the activations (8 for float64,
    4 for float32; the caller passes its data's `dtype.itemsize`), so a float32 block holds
    twice the rows."""
    return max(MIN_BLOCK_ROWS, BLOCK_BYTES // (itemsize * m))


def activation_taylor(sigma: Callable) -> tuple[float, float, float, float]:
    """σ(0), σ′(0), σ″(0), σ‴(0) by automatic differentiation."""
    d1 = jax.grad(sigma)
    d2 = jax.grad(d1)
    d3 = jax.grad(d2)
    z = jnp.float64(0.0) if jax.config.read("jax_enable_x64") else jnp.float32(0.0)
    return tuple(float(f(z)) for f in (sigma, d1, d2, d3))  # type: ignore[return-value]


def _alpha(value) -> Float[Array, ""]:
    """α as a 0-d float array (a traced value passes through, for `jax.vmap` over α)."""
    if isinstance(value, jax.core.Tracer):
        if value.shape != ():
            raise ConfigError(f"`alpha` must be a single number; got shape {value.shape}.")
        return value
    hint = "`alpha` is the init exponent α (std m^−α), e.g. alpha=1.0."
    return jnp.asarray(as_float("alpha", value, hint=hint), dtype=float)


def _activation(value) -> str | Callable:
    if callable(value) and not isinstance(value, str):
        return value
    return as_choice("activation", value, sorted(ACTIVATIONS), hint="Or pass a callable σ.")


class TwoLayer(AbstractModel):
    """f_θ(x) = Σ_{k=1}^m a_k σ(w_kᵀx + c_k), c_k present only with `bias=True`.

    Initialization (multi-stage paper): a_k ~ N(0, m^{-2α}), w_k ~ N(0, m^{-2α} I_d)
    (and c_k ~ N(0, m^{-2α}) with biases), i.e. standard deviation m^{-α}.

    **Arguments:** `m` width (≥ 1), `d` input dimension (≥ 1), `alpha` init exponent (any
    real; the theorems need α > 1/2 and report "not applicable" otherwise), `activation`
    a name in `ACTIVATIONS` or a callable, `bias` whether to add first-layer biases.
    """

    m: int = int_field("m", minimum=1, hint="`m` is the width (hidden neurons), e.g. m=1000.")
    d: int = int_field("d", minimum=1, hint="`d` is the input dimension.")
    # a traced leaf, not static: runs that differ only in α reuse the compiled solve (a 0-d
    # array). The ignore: pyright takes `m` and `d` for defaulted fields, as it does not see
    # `int_field` (a wrapper of eqx.field) as a field specifier.
    alpha: Float[Array, ""] = eqx.field(converter=_alpha)  # pyright: ignore[reportGeneralTypeIssues]
    activation: str | Callable = eqx.field(static=True, default="tanh", converter=_activation)
    bias: bool = bool_field("bias", default=False)

    @property
    def sigma(self) -> Callable:
        if isinstance(self.activation, str):
            return ACTIVATIONS[self.activation]
        return self.activation

    def tanh_like(self) -> tuple[bool, str]:
        """Whether σ meets Assumption 3 at 0 (σ(0) = 0, σ′(0) = 1, σ″(0) = 0), with a reason."""
        s0, s1, s2, _ = activation_taylor(self.sigma)
        ok = abs(s0) < 1e-12 and abs(s1 - 1) < 1e-12 and abs(s2) < 1e-12
        if ok:
            return True, "σ(0)=0, σ′(0)=1, σ″(0)=0"
        return False, f"σ is not tanh-like: σ(0)={s0:.3g}, σ′(0)={s1:.3g}, σ″(0)={s2:.3g}"

    def init(self, key: PRNGKeyArray) -> dict[str, Array]:
        std = jnp.asarray(float(self.m)) ** (-self.alpha)
        ka, kw, kc = jax.random.split(key, 3)
        params = {
            "a": std * jax.random.normal(ka, (self.m,)),
            "w": std * jax.random.normal(kw, (self.m, self.d)),
        }
        if self.bias:
            params["c"] = std * jax.random.normal(kc, (self.m,))
        return params

    def __call__(self, params: dict[str, ArrayIn], x: Float[ArrayIn, "n d"]) -> Float[Array, " n"]:
        pre = x @ params["w"].T
        if self.bias:
            pre = pre + params["c"]
        return self.sigma(pre) @ params["a"]

    def fused_grad(
        self,
        params: dict[str, ArrayIn],
        x: Float[ArrayIn, "n d"],
        y: Float[ArrayIn, " n"],
    ) -> dict[str, Array]:
        """∇R by `fused_loss_and_grad` (XLA drops the unused loss)."""
        return self.fused_loss_and_grad(params, x, y)[1]

    def _preactivation(self, params, xi):
        """X Wᵀ (+ c) for a block of samples xi."""
        pre = xi @ params["w"].T
        return pre + params["c"] if self.bias else pre

    def _sample_blocks(self, x, y):
        """x, y and a 0/1 mask of real rows, cut into blocks of `block_rows(m, itemsize)`
        samples (the last block padded with zero rows, mask 0)."""
        n = x.shape[0]
        rows = min(block_rows(self.m, jnp.dtype(x.dtype).itemsize), n)
        nb = -(-n // rows)
        pad = nb * rows - n
        mask = jnp.concatenate([jnp.ones(n, x.dtype), jnp.zeros(pad, x.dtype)])
        xb = jnp.pad(x, ((0, pad), (0, 0))).reshape(nb, rows, x.shape[1])
        yb = jnp.pad(y, (0, pad)).reshape(nb, rows)
        return xb, yb, mask.reshape(nb, rows)

    def fused_loss(
        self,
        params: dict[str, ArrayIn],
        x: Float[ArrayIn, "n d"],
        y: Float[ArrayIn, " n"],
    ) -> Float[Array, ""]:
        """R = 1/(2n) Σ_i (f(x_i) − y_i)², in the blocks of samples of `fused_loss_and_grad`
        (a forward pass only: one σ per sample and neuron, no σ′, no n×m temporaries).
        What a fused problem records as its loss at every save time; equal to the
        autodiff model's loss to round-off (`tests/test_fused.py`)."""
        n = x.shape[0]
        xb, yb, mb = self._sample_blocks(x, y)
        a, w = params["a"], params["w"]

        def block(acc, blk):
            xi, yi, mi = blk
            e = (self.sigma(self._preactivation(params, xi)) @ a - yi) * mi
            return acc + e @ e, None

        zero = jnp.zeros((), jnp.result_type(x, y, a, w))
        total, _ = jax.lax.scan(block, zero, (xb, yb, mb))
        return total / (2 * n)

    def fused_loss_and_grad(
        self,
        params: dict[str, ArrayIn],
        x: Float[ArrayIn, "n d"],
        y: Float[ArrayIn, " n"],
    ) -> tuple[Float[Array, ""], dict[str, Array]]:
        """R and ∇R for R = 1/(2n) Σ_i (f(x_i) − y_i)², derived by hand and evaluated in blocks of
        samples so that the n×m activations never leave the cache.

        With S = σ(XWᵀ + c), r = (S a − y)/n, D = σ′(XWᵀ + c) ⊙ r:
        ∂R/∂a = Sᵀ r, ∂R/∂w_k = a_k (Dᵀ X)_k, ∂R/∂c_k = a_k Σ_i D_ik.
        Each term is a sum over samples, so a `lax.scan` over blocks of
        `block_rows(m, itemsize of x's dtype)` samples accumulates it while holding only a
        block×m slab of S and D (≈ 1 MiB) instead of n×m temporaries. Measured at m = 5000,
        n = 1000: per evaluation inside a jitted solve 6.9 ms against 8.1 ms for autodiff;
        per call from Python (scipy) 7 ms against 31 ms, where autodiff allocates its n×m
        temporaries afresh each call.
        Padded rows carry zero residual.
        Tested against autodiff (`tests/test_fused.py`).
        """
        n = x.shape[0]
        xb, yb, mb = self._sample_blocks(x, y)
        a, w = params["a"], params["w"]
        c = params.get("c") if self.bias else None

        def block(acc, blk):
            xi, yi, mi = blk
            pre = self._preactivation(params, xi)
            if isinstance(self.activation, str) and self.activation in _DERIVATIVE_FROM_VALUE:
                s = self.sigma(pre)
                ds = _DERIVATIVE_FROM_VALUE[self.activation](s)
            else:
                s, ds = jax.jvp(self.sigma, (pre,), (jnp.ones_like(pre),))
            e = (s @ a - yi) * mi
            r = e / n
            dr = ds * r[:, None]
            out = {"loss": acc["loss"] + e @ e, "a": acc["a"] + s.T @ r, "w": acc["w"] + dr.T @ xi}
            if c is not None:
                out["c"] = acc["c"] + jnp.sum(dr, axis=0)
            return out, None

        zero = {
            "loss": jnp.zeros((), jnp.result_type(x, y, a, w)),
            "a": jnp.zeros_like(a),
            "w": jnp.zeros_like(w),
        }
        if c is not None:
            zero["c"] = jnp.zeros_like(c)
        acc, _ = jax.lax.scan(block, zero, (xb, yb, mb))
        grads = {"a": acc["a"], "w": acc["w"] * a[:, None]}
        if c is not None:
            grads["c"] = acc["c"] * a
        return acc["loss"] / (2 * n), grads

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        return {"a": ("neuron",), "w": ("neuron", "dim"), "c": ("neuron",)}

    def describe(self) -> dict:
        act = self.activation if isinstance(self.activation, str) else repr(self.activation)
        return {
            "family": "two-layer",
            "m": self.m,
            "d": self.d,
            "alpha": float(self.alpha),
            "activation": act,
            "bias": self.bias,
        }
