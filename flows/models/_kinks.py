"""Activations with kinks: continuous piecewise-linear functions that declare their kink
points, so the flow through them can be integrated exactly (`flows.simulate_nonsmooth`),
and their smoothed versions σ_ε for the ε → 0 cross-check."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._errors import ConfigError

__all__ = ["PiecewiseLinear", "leaky_relu_kinks"]


class PiecewiseLinear(eqx.Module):
    """A continuous piecewise-linear activation σ with kinks c_1 < … < c_K.

    On piece p (p = 0 for z < c_1, …, p = K for z > c_K) σ(z) = a_p + s_p z.

    **Arguments:**
    - `kinks`: the kink points c_1 < … < c_K (at least one).
    - `slopes`: s_0 … s_K, one per piece (K + 1 values; neighbours differ).
    - `value`: σ(c_1) (0 for ReLU and leaky ReLU).

    `smoothed(eps)` is σ_ε = a_0 + s_0 z + Σ_k (s_k − s_{k−1}) ε softplus((z − c_k)/ε), which
    tends to σ uniformly as ε → 0 (error ≤ ε log 2 Σ|s_k − s_{k−1}|).
    """

    kinks: tuple[float, ...] = eqx.field(static=True)
    slopes: tuple[float, ...] = eqx.field(static=True)
    value: float = eqx.field(static=True, default=0.0)

    def __check_init__(self):
        k, s = self.kinks, self.slopes
        if len(k) < 1 or len(s) != len(k) + 1:
            raise ConfigError(
                f"a piecewise-linear activation needs K ≥ 1 kinks and K + 1 slopes; got "
                f"{len(k)} kinks and {len(s)} slopes."
            )
        if not all(math.isfinite(v) for v in (*k, *s, self.value)):
            raise ConfigError("kinks, slopes and value of an activation must be finite.")
        if any(b <= a for a, b in zip(k, k[1:], strict=False)):
            raise ConfigError(f"kinks must be strictly increasing; got {k}.")
        if any(a == b for a, b in zip(s, s[1:], strict=False)):
            raise ConfigError(f"neighbouring slopes must differ (else no kink); got {s}.")

    @property
    def n_pieces(self) -> int:
        return len(self.slopes)

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(c, σ(c), a, s): kinks, values at the kinks, intercepts and slopes per piece."""
        c = np.asarray(self.kinks, dtype=np.float64)
        s = np.asarray(self.slopes, dtype=np.float64)
        vals = [self.value]
        for i in range(1, len(c)):
            vals.append(vals[-1] + s[i] * (c[i] - c[i - 1]))
        vc = np.asarray(vals)
        a = np.empty(len(s))
        a[0] = vc[0] - s[0] * c[0]
        for p in range(1, len(s)):
            a[p] = vc[p - 1] - s[p] * c[p - 1]
        return c, vc, a, s

    def piece(self, z):
        """Index of the piece holding z (a kink belongs to the piece on its right)."""
        return jnp.searchsorted(jnp.asarray(self.kinks, dtype=jnp.result_type(z)), z, side="right")

    def __call__(self, z):
        _, _, a, s = self.tables()
        p = self.piece(z)
        return jnp.asarray(a, z.dtype)[p] + jnp.asarray(s, z.dtype)[p] * z

    def smoothed(self, eps: float):
        """σ_ε (see the class docstring), a smooth function of z for ε > 0."""
        if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
            raise ConfigError(f"the smoothing `eps` must be a finite number > 0; got {eps!r}.")
        c, _, a, s = self.tables()

        def sigma_eps(z):
            out = a[0] + s[0] * z
            for k in range(len(c)):
                out = out + (s[k + 1] - s[k]) * eps * jax.nn.softplus((z - c[k]) / eps)
            return out

        return sigma_eps


def leaky_relu_kinks(slope: float) -> PiecewiseLinear:
    """max(α z, z) (α = 0: ReLU): one kink at 0, slopes (α, 1)."""
    return PiecewiseLinear(kinks=(0.0,), slopes=(float(slope), 1.0), value=0.0)
