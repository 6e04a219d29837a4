"""Theorem 1 of the bias-plateau paper: the error and loss plateaus of the linear
interpolation θ^[α] = (1 − α) θ(0) + α θ(T) of a deep network with output bias.

Paper: *Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape for
Deep Networks* (§3, Theorem 1; the statement's display equations are
reconstructed). Network f(x) = V_r σ(⋯ σ(V_1 x)) + b, r ≥ 3, σ identity or ReLU,
inputs ‖x‖ ≤ 1, output biases 0 at initialization, init scale δ. For small δ,
`f^[α](x)` ≈ α^r V_r^(T) σ(⋯ V_1^(T) x) + α b^(T): the signal is of order α^r, the bias of
order α, so for small α the top bias wins on every input.

Pure functions of numbers and NumPy arrays (no `flows` import).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = [
    "BiasGaps",
    "Theorem1",
    "bias_gaps",
    "v_max",
    "theorem1",
    "error_plateau_interval",
    "loss_plateau_alpha",
    "loss_lower_bound",
    "small_delta_logits",
]


@dataclasses.dataclass(frozen=True)
class BiasGaps:
    """k* = argmax_i b_i, Δ_min = min_{i≠k*}(b_{k*} − b_i), Δ_max = max_{i≠k*}(b_{k*} − b_i)."""

    k_star: int
    delta_min: float
    delta_max: float


def bias_gaps(b) -> BiasGaps:
    """Bias gaps of the trained output bias b^(T) (Theorem 1's Δ_min, Δ_max and k*).

    Raises `ValueError` for fewer than two biases or non-finite values.
    """
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if b.size < 2 or not np.all(np.isfinite(b)):
        raise ValueError(f"need ≥ 2 finite biases; got {b.tolist()}")
    ks = int(np.argmax(b))
    gaps = b[ks] - np.delete(b, ks)
    return BiasGaps(ks, float(gaps.min()), float(gaps.max()))


def v_max(layers) -> float:
    """V_max = max_i ‖V_i‖ (spectral norms) over the given weight matrices."""
    norms = [float(np.linalg.norm(np.asarray(v, dtype=np.float64), ord=2)) for v in layers]
    if not norms:
        raise ValueError("need at least one weight matrix")
    return max(norms)


def error_plateau_interval(
    delta: float, delta_min: float, vmax: float, r: int
) -> tuple[float, float]:
    """[α₁, α₂] = [δ/Δ_min, (Δ_min / (2 V_max^r))^{1/(r−1)}] of Theorem 1.

    On it every sample is predicted as class k* (error 1 − 1/k on a balanced set).
    The interval is empty when α₁ > α₂. Needs r ≥ 2, δ > 0, Δ_min > 0, V_max > 0.
    """
    if not (r >= 2 and delta > 0 and delta_min > 0 and vmax > 0):
        raise ValueError(
            f"need r ≥ 2, δ > 0, Δ_min > 0, V_max > 0; got r={r}, δ={delta}, "
            f"Δ_min={delta_min}, V_max={vmax}"
        )
    a1 = delta / delta_min
    a2 = (delta_min / (2.0 * vmax**r)) ** (1.0 / (r - 1))
    return a1, a2


def loss_plateau_alpha(eps: float, vmax: float, r: int) -> float:
    """α_ε = ε^{1/r} / V_max: Theorem 1's loss plateau holds for α ≤ α_ε."""
    return eps ** (1.0 / r) / vmax


def loss_lower_bound(eps, k: int):
    """log k − 2eε: Theorem 1's lower bound on the average loss for α ≤ ε^{1/r}/V_max."""
    return math.log(k) - 2.0 * math.e * np.asarray(eps)


@dataclasses.dataclass(frozen=True)
class Theorem1:
    """Theorem 1's quantities for one trained network (see `theorem1`)."""

    r: int
    delta: float
    k_star: int
    delta_min: float
    delta_max: float
    v_max: float
    alpha_1: float
    alpha_2: float

    @property
    def nonempty(self) -> bool:
        return self.alpha_1 < self.alpha_2

    def loss_bound(self, alphas, k: int):
        """Lower bound on γ_loss(α): log k − 2e(α V_max)^r (ε chosen so α = ε^{1/r}/V_max)."""
        return loss_lower_bound((np.asarray(alphas) * self.v_max) ** self.r, k)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "nonempty": self.nonempty}


def theorem1(b_T, layers_T, r: int, delta: float) -> Theorem1:
    """Theorem 1 from a trained net: b^(T), the trained weight matrices V_i^(T), depth r, δ.

    **Returns:** `Theorem1` with k*, Δ_min, Δ_max, V_max = max_i ‖V_i^(T)‖ and the
    predicted error-plateau interval [α₁, α₂] (empty when Δ_min = 0: no bias gap).
    """
    g = bias_gaps(b_T)
    vm = v_max(layers_T)
    if g.delta_min > 0:
        a1, a2 = error_plateau_interval(delta, g.delta_min, vm, r)
    else:
        a1, a2 = math.inf, 0.0
    return Theorem1(r, float(delta), g.k_star, g.delta_min, g.delta_max, vm, a1, a2)


def small_delta_logits(alpha, signal_T, b_T, r: int):
    """The paper's small-δ approximation `f^[α](x)` ≈ α^r·(signal at θ(T)) + α·b^(T).

    `signal_T` (n, k): V_r^(T) σ(⋯ V_1^(T) x); returns (n, k) logits (exact when θ(0) = 0
    and σ is positively homogeneous).
    """
    return alpha**r * np.asarray(signal_T) + alpha * np.asarray(b_T)
