# ruff: noqa: F722  (jaxtyping shape strings such as " k" are not forward annotations)
"""Reduced forms of the linear-teacher paper (leaky-ReLU ±v networks).

Paper: *Towards Understanding Learning in Neural Networks with Linear Teachers*.

Network (eq. 1): N_W(x) = v Σ_j σ(w^(j)·x) − v Σ_j σ(u^(j)·x), σ(z) = max(αz, z), leaky slope
0 < α < 1, v > 0, k neurons of each type. "Perfectly clustered": all w^(j) = w, all
u^(j) = u; then N_W(x) = vk(σ(w·x) − σ(u·x)) is linear on each of four sign regions.
Every formula is derived symbolically in `reduced.derive.linear_teacher`.

Everything here is pure theory, written with `jax.numpy` so it can be jitted.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

__all__ = ["leaky_relu", "network_regionwise", "par_margins", "smoothed_margin"]


def leaky_relu(z: Float[ArrayLike, "*s"], slope: float) -> Float[Array, "*s"]:
    """σ(z) = max(slope·z, z) for 0 < slope < 1 (z for z ≥ 0, slope·z for z < 0).

    **Arguments:** `z`: pre-activations, any shape; `slope`: the leaky slope α ∈ (0, 1).

    **Returns:** σ(z), same shape.

    Paper: eq. (1).
    """
    z = jnp.asarray(z)
    return jnp.where(z >= 0, z, slope * z)


def network_regionwise(
    w: Float[ArrayLike, " d"],
    u: Float[ArrayLike, " d"],
    x: Float[ArrayLike, "*n d"],
    v: float,
    k: int,
    slope: float,
) -> Float[Array, "*n"]:
    """Output of a perfectly clustered network, written region by region.

    With p = w·x and q = u·x:

    | region         | N_W(x)        |
    |----------------|---------------|
    | p ≥ 0, q ≥ 0   | vk(p − q)     |
    | p ≥ 0, q < 0   | vk(p − α q)   |
    | p < 0, q ≥ 0   | vk(α p − q)   |
    | p < 0, q < 0   | vk α (p − q)  |

    **Arguments:** `w`, `u`: the common w- and u-neuron (d,); `x`: inputs (d,) or (n, d);
    `v` > 0: the output weight; `k`: neurons per type; `slope`: α ∈ (0, 1).

    **Returns:** N_W(x), shape () or (n,).

    Paper: eq. (1) with all w^(j) = w, u^(j) = u (the limit of Theorems 6.1–6.2).
    """
    x = jnp.asarray(x)
    p, q = x @ jnp.asarray(w), x @ jnp.asarray(u)
    vk = v * k
    return jnp.select(
        [(p >= 0) & (q >= 0), (p >= 0) & (q < 0), (p < 0) & (q >= 0)],
        [vk * (p - q), vk * (p - slope * q), vk * (slope * p - q)],
        vk * slope * (p - q),
    )


def par_margins(
    w: Float[ArrayLike, " d"],
    u: Float[ArrayLike, " d"],
    x: Float[ArrayLike, "n d"],
    y: Float[ArrayLike, " n"],
    v: float,
    k: int,
    slope: float,
) -> Float[Array, " n"]:
    """Margins y_i N_W(x_i) of a perfectly clustered network inside the PAR.

    In the PAR (sign(w·x_i) = y_i, sign(u·x_i) = −y_i):
    y = +1: vk(w·x − α u·x);  y = −1: vk(u·x − α w·x). These are linear in (w, u), so the
    limit direction solves min k(‖w‖² + ‖u‖²) s.t. these margins ≥ 1 (Theorem 6.2).

    **Arguments:** `w`, `u` (d,); `x` (n, d); `y` (n,) labels in {−1, +1}; `v`, `k`, `slope`
    as in `network_regionwise`.

    **Returns:** the margins (n,). Valid only where (w, u) is in the PAR for these points;
    elsewhere use `y * network_regionwise(...)`.

    Paper: §6, PAR(β) and Theorem 6.2 (verified symbolically in `reduced.derive.linear_teacher`).
    """
    x, y = jnp.asarray(x), jnp.asarray(y)
    p, q = x @ jnp.asarray(w), x @ jnp.asarray(u)
    return jnp.where(y > 0, v * k * (p - slope * q), v * k * (q - slope * p))


def smoothed_margin(
    l_sum: Float[ArrayLike, "*s"], norm: Float[ArrayLike, "*s"]
) -> Float[Array, "*s"]:
    """Smoothed margin γ̃ = ℓ^{−1}(L_sum)/‖W‖ = −log(exp(L_sum) − 1)/‖W‖ for the logistic loss.

    ℓ(q) = log(1 + e^{−q}) has inverse ℓ^{−1}(s) = −log(e^s − 1), and Lyu & Li's smoothed
    margin of a 1-homogeneous network is ℓ^{−1}(L_sum)/‖W‖. It is a lower bound on the
    normalized margin min_i y_i N_W(x_i)/‖W‖, positive once L_sum < log 2, and
    non-decreasing along gradient flow from then on.

    **Arguments:** `l_sum`: L_sum = Σ_i ℓ(y_i N_W(x_i)) > 0 (the *sum*, not the mean);
    `norm`: ‖W‖ (Frobenius) > 0.

    **Returns:** γ̃. Computed as −log(expm1(L_sum))/‖W‖, accurate for tiny L_sum.

    Paper: §6 (Assumption 6.1 and the Lyu & Li 2020 margin).
    """
    return -jnp.log(jnp.expm1(jnp.asarray(l_sum))) / jnp.asarray(norm)
