"""Reduced models and theorem bounds of the multi-stage loss-curve paper.

Paper: *Analyzing Multi-Stage Loss Curves: Plateau and Descent Mechanisms in Neural
Networks* (Theorems 1–2, Corollaries 1–4, Proposition 2, eqs. (10), (15)–(23)).

Model: f(x) = Σ_k a_k σ(w_kᵀx), σ tanh-like, small initialization a_k, w_k ~ N(0, m^{-2α}).
Under Assumptions 1–2 (E xxᵀ = I, E[f x] = e₁) and to first order in θ, gradient flow on
the risk R is the *linearized flow* (eq. 15); near the plateau's end it is the *descent
stage reduced flow* (eq. 16), whose macroscopic quantities K = Σ a_k w_k¹ and
K′ = Σ (a_k² + (w_k¹)²) obey a closed two-dimensional ODE and, when K′ ≈ 2K, the logistic
law (eqs. 18–19).

For data with E xxᵀ = s² I and b = E[f x] ≠ e₁ (the paper's own experiments), the same
laws hold after the normalization of `normalization` (time in units of 1/‖b‖).

Everything here is pure theory: closed forms, small vector fields and bound formulas.
Arrays may be NumPy or JAX; functions are written with `jax.numpy` so they can be jitted.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

__all__ = [
    "Table1",
    "table1",
    "plateau_time",
    "linearization_thresholds",
    "theorem1_loss_rate_bound",
    "theorem1_noncondensed_bound",
    "proposition2_ratio_error",
    "descent_time_leading",
    "theorem2_descent_time_interval",
    "theorem2_qmax_bound",
    "theorem2_rate_ratio_scale",
    "secondary_plateau_end",
    "proposition1_bound",
    "lemma2_rate_bound",
    "corollary1_w2_terms",
    "corollary2_condensation_bound",
    "corollary3_lower_deficit",
    "corollary4_w2_terms",
    "theorem2_wperp_bound",
    "linearized_closed_form",
    "linearized_solution",
    "linearized_vector_field",
    "descent_vector_field",
    "macroscopic_vector_field",
    "conserved_quantity",
    "logistic_K",
    "logistic_time_to",
    "logistic_vector_field",
    "Normalization",
    "normalization",
    "plateau_departure_terms",
]


def _check_alpha(alpha: float) -> None:
    if not alpha > 0.5:
        raise ValueError(
            f"`alpha` must be > 1/2 (small initialization) for the multi-stage theorems; "
            f"got {alpha}."
        )


def _check_m(m: float) -> None:
    if not m > 1:
        raise ValueError(f"`m` (the width) must be > 1 for the bounds (they use ln m); got {m}.")


class Table1(NamedTuple):
    """Hyper-parameters of Theorem 1 (Table 1): exponents α₁, γ₁ and T_p = tp_coeff · ln m."""

    alpha1: float
    gamma1: float
    tp_coeff: float


def table1(alpha: float) -> Table1:
    """Table 1 of the multi-stage paper.

    For 1/2 < α ≤ 3/2: (α₁, γ₁) = (α/2 + 1/4, 3α/2 − 1/4), T_p = (2α − 1)/4 · ln m;
    for α > 3/2: (α₁, γ₁) = (1, 2), T_p = (α − 1) · ln m.
    """
    _check_alpha(alpha)
    if alpha <= 1.5:
        return Table1(alpha / 2 + 0.25, 1.5 * alpha - 0.25, (2 * alpha - 1) / 4)
    return Table1(1.0, 2.0, alpha - 1.0)


def plateau_time(m: float, alpha: float) -> float:
    """T_p of Theorem 1 (Table 1), in the theorem's time units."""
    _check_m(m)
    return table1(alpha).tp_coeff * math.log(m)


def linearization_thresholds(m: float, alpha: float) -> tuple[float, float]:
    """Thresholds of the test time T₁ (eq. 26): (m^{-α₁} ln m, m^{-γ₁} (ln m)³).

    T₁ = inf{t : q_max ≥ first or r_max ≥ second}; Theorem 1 says T_p ≤ T₁.
    """
    _check_m(m)
    a1, g1, _ = table1(alpha)
    lm = math.log(m)
    return m ** (-a1) * lm, m ** (-g1) * lm**3


def theorem1_loss_rate_bound(m: float, alpha: float) -> float:
    """Right side of eq. (29): |R(T_p) − R(0)| / T_p ≲ 1 / (m^{2α₁−1} ln m)."""
    _check_m(m)
    a1 = table1(alpha).alpha1
    return 1.0 / (m ** (2 * a1 - 1) * math.log(m))


def theorem1_noncondensed_bound(m: float, alpha: float) -> float:
    """Right side of eq. (28): max_{k,i≥2} |w_kⁱ(T_p)| ≲ max{m^{-α} ln m, m^{-3} (ln m)⁶}."""
    _check_m(m)
    _check_alpha(alpha)
    lm = math.log(m)
    return max(m ** (-alpha) * lm, m**-3.0 * lm**6)


def proposition2_ratio_error(m: float, alpha: float) -> float:
    """Proposition 2: at T_p, K/K′ = 1/2 + O(m^{-(2α₁−1)} (ln m)⁴); this returns the O(·)."""
    _check_m(m)
    a1 = table1(alpha).alpha1
    return m ** (-(2 * a1 - 1)) * math.log(m) ** 4


def descent_time_leading(m: float, alpha: float) -> float:
    """Leading order of the descent time, T_d ≈ (2α − 1)/2 · ln m (Theorem 2, eq. 3)."""
    _check_m(m)
    _check_alpha(alpha)
    return (2 * alpha - 1) / 2 * math.log(m)


def theorem2_descent_time_interval(
    m: float, alpha: float, delta_prime: float
) -> tuple[float, float]:
    """Theorem 2: (2α−1)/(2+δ′) · ln m ≤ T_d ≤ (2α−1)/(2−δ′) · ln m (as m → ∞)."""
    _check_m(m)
    _check_alpha(alpha)
    if not 0 < delta_prime < 2:
        raise ValueError(f"`delta_prime` must lie in (0, 2); got {delta_prime}.")
    lm = math.log(m)
    return (2 * alpha - 1) / (2 + delta_prime) * lm, (2 * alpha - 1) / (2 - delta_prime) * lm


def theorem2_qmax_bound(m: float, alpha: float, delta_prime: float) -> float:
    """Theorem 2: q_max(T_d) ≤ m^{-(1/2 − (2α−1)δ′)}."""
    _check_m(m)
    _check_alpha(alpha)
    return m ** (-(0.5 - (2 * alpha - 1) * delta_prime))


def theorem2_rate_ratio_scale(m: float, alpha: float) -> float:
    """Theorem 2: descent-stage / plateau average decay rate ≥ C · m^{2α₁−1}; returns m^{2α₁−1}."""
    _check_m(m)
    return m ** (2 * table1(alpha).alpha1 - 1)


def secondary_plateau_end(t_d: float, m: float, beta: float) -> float:
    """T_sp = T_d + ln m / (40 β) (eq. 63)."""
    _check_m(m)
    if not beta > 0:
        raise ValueError(f"`beta` must be > 0; got {beta}.")
    return t_d + math.log(m) / (40 * beta)


def proposition1_bound(m: float, alpha: float) -> float:
    """Proposition 1 (30): (Σ_k (w_kⁱ)²)^{1/2} ≤ C max{m^{-(2α−1)/2}, (ln m)⁵ m^{-5/2}} for
    t ≤ min{T_p, T₁}, i ≥ 2; this returns the max{·}."""
    _check_m(m)
    _check_alpha(alpha)
    lm = math.log(m)
    return max(m ** (-(2 * alpha - 1) / 2), lm**5 * m**-2.5)


def lemma2_rate_bound(m: float, beta: float, gamma: float) -> float:
    """Lemma 2 (22): while q_max ≤ m^{-β}(ln m)^γ, (Σ_k (w_kⁱ)²)^{1/2} grows at most at the
    rate C max{(ln m)^{3γ} / m^{3β−1/2}, (ln m)^{5γ} / m^{5β−3/2}}; this returns the max{·}."""
    _check_m(m)
    lm = math.log(m)
    return max(
        lm ** (3 * gamma) * m ** (-(3 * beta - 0.5)), lm ** (5 * gamma) * m ** (-(5 * beta - 1.5))
    )


def corollary1_w2_terms(m: float, alpha: float) -> tuple[float, float]:
    """Corollary 1 (42) at T_p: W₂(ρ_|a|, ρ_‖w‖)/W₂(ρ_|a|) ≤ C·first + C·second with
    first = m^{-(γ₁−α₁)} (ln m)³ and second = max{m^{-(α−α₁)}, (ln m)⁵ / m^{3−α₁}}."""
    _check_m(m)
    a1, g1, _ = table1(alpha)
    lm = math.log(m)
    return m ** (-(g1 - a1)) * lm**3, max(m ** (-(alpha - a1)), lm**5 * m ** (-(3 - a1)))


def corollary2_condensation_bound(m: float, alpha: float) -> float:
    """Corollary 2 (43) at T_p, read the right way up: 1 − Σ(w¹)²/Σ‖w‖² ≤ C max{m^{-(2α−2α₁)},
    (ln m)¹⁰ / m^{6−2α₁}}; this returns the max{·}."""
    _check_m(m)
    a1 = table1(alpha).alpha1
    lm = math.log(m)
    return max(m ** (-(2 * alpha - 2 * a1)), lm**10 * m ** (-(6 - 2 * a1)))


def corollary3_lower_deficit(m: float, alpha: float) -> float:
    """Corollary 3 (60): at T_fp,α (= T_p, the only time the notation stands for in the
    proofs), ‖∇R‖_∞ ≥ (1 − C m^{-2α₁}) ‖θ‖_∞; this returns m^{-2α₁}."""
    _check_m(m)
    return m ** (-2 * table1(alpha).alpha1)


def corollary4_w2_terms(m: float, alpha: float, delta_prime: float) -> tuple[float, float]:
    """Corollary 4 (61) at T_d: W₂(ρ_|a|, ρ_‖w‖)/W₂(ρ_|a|) ≤ first + C·second with
    first = m^{-(α−1/2)} (no constant) and second = max{m^{-(2α−1)/2}, ln m / m^{1−5α₂}},
    α₂ = (2α−1)δ′."""
    _check_m(m)
    _check_alpha(alpha)
    a2 = (2 * alpha - 1) * delta_prime
    lm = math.log(m)
    return m ** (-(alpha - 0.5)), max(m ** (-(2 * alpha - 1) / 2), lm * m ** (-(1 - 5 * a2)))


def theorem2_wperp_bound(m: float, alpha: float, delta_prime: float) -> float:
    """Theorem 2 (47), second line: max_{k, i≥2} |w_kⁱ(T_d)| ≤ m^{-(α − 2(2α−1)δ′)}."""
    _check_m(m)
    _check_alpha(alpha)
    return m ** (-(alpha - 2 * (2 * alpha - 1) * delta_prime))


# ---------------------------------------------------------------------------------------
# Linearized flow (eq. 15) and its closed form (eq. 23)


def linearized_closed_form(
    a0: ArrayLike, u0: ArrayLike, t: ArrayLike, rate: ArrayLike = 1.0
) -> tuple[Array, Array]:
    """Closed form (eq. 23) of the linearized flow ȧ = rate·u, u̇ = rate·a.

    **Arguments:** `a0`, `u0`: initial output weights a_k(0) and w_k¹(0) (any equal shapes);
    `t`: a time (scalar); `rate`: the growth rate, 1 under Assumptions 1–2 and ‖E[f x]‖ in
    general.

    **Returns:** (ã(t), ũ(t)) with ã = ½(a0+u0)e^{rate t} + ½(a0−u0)e^{−rate t} and
    ũ = ½(a0+u0)e^{rate t} − ½(a0−u0)e^{−rate t}.
    """
    a0, u0 = jnp.asarray(a0), jnp.asarray(u0)
    grow = 0.5 * (a0 + u0) * jnp.exp(rate * t)
    decay = 0.5 * (a0 - u0) * jnp.exp(jnp.negative(rate * t))  # ArrayLike: no typed unary -
    return grow + decay, grow - decay


def linearized_solution(
    a0: Float[ArrayLike, " m"], w0: Float[ArrayLike, "m d"], b: Float[ArrayLike, " d"], t
) -> tuple[Float[Array, " m"], Float[Array, "m d"]]:
    """Closed-form solution of the general-moment linearized flow ȧ_k = bᵀw_k, ẇ_k = a_k b.

    Only the component u_k = w_k·b̂ (b̂ = b/‖b‖) moves; it and a_k follow eq. (23) with rate
    ‖b‖. With b = e₁ this is exactly eq. (23).
    """
    a0, w0, b = jnp.asarray(a0), jnp.asarray(w0), jnp.asarray(b)
    rate = jnp.linalg.norm(b)
    bhat = b / rate
    u0 = w0 @ bhat
    a_t, u_t = linearized_closed_form(a0, u0, t, rate)
    return a_t, w0 + (u_t - u0)[:, None] * bhat[None, :]


def linearized_vector_field(t, state, b):
    """Linearized flow for general moments: ȧ_k = bᵀw_k, ẇ_k = a_k b (eq. 15 when b = e₁).

    `state` = (a (m,), w (m, d)); `b` = E[f x] (d,). Diffrax signature `(t, y, args)`.
    """
    a, w = state
    return w @ b, a[:, None] * b[None, :]


def descent_vector_field(t, state, args=None):
    """Descent-stage reduced flow (eq. 16): ȧ_k = (1 − K) u_k, u̇_k = (1 − K) a_k, K = Σ a_k u_k.

    `state` = (a (m,), u (m,)), u_k = w_k¹; the directions i ≥ 2 are frozen and omitted.
    """
    a, u = state
    one_minus_k = 1.0 - jnp.sum(a * u)
    return one_minus_k * u, one_minus_k * a


def macroscopic_vector_field(t, state, args=None):
    """Closed macroscopic system of eq. (16): K̇ = K′(1 − K), K̇′ = 4K(1 − K)."""
    k, kp = state
    return kp * (1.0 - k), 4.0 * k * (1.0 - k)


def conserved_quantity(k: ArrayLike, kp: ArrayLike) -> Array:
    """K′² − 4K², conserved by the macroscopic system (16)."""
    k, kp = jnp.asarray(k), jnp.asarray(kp)
    return kp**2 - 4.0 * k**2


def logistic_vector_field(t, k, rate=2.0):
    """Eq. (18): K̇ = rate · K (1 − K) (rate 2 under Assumptions 1–2)."""
    return rate * k * (1.0 - k)


def logistic_K(t: ArrayLike, k0: ArrayLike, t0: ArrayLike = 0.0, rate: ArrayLike = 2.0) -> Array:
    """Closed form (eq. 19) of K̇ = rate·K(1 − K) with K(t0) = k0 ∈ (0, 1).

    K(t) = C e^{rate (t−t0)} / (1 + C e^{rate (t−t0)}), C = k0/(1 − k0), evaluated as a
    logistic sigmoid so it neither overflows for large t nor loses precision near K = 1.
    """
    k0 = jnp.asarray(k0)
    logit0 = jnp.log(k0) - jnp.log1p(-k0)
    return 1.0 / (1.0 + jnp.exp(-(rate * (jnp.asarray(t) - t0) + logit0)))


def logistic_time_to(k: ArrayLike, k0: ArrayLike, t0: ArrayLike = 0.0, rate: ArrayLike = 2.0):
    """Inverse of `logistic_K`: the time at which K reaches `k` starting from K(t0) = k0.

    t = t0 + (logit k − logit k0) / rate; both `k` and `k0` must lie in (0, 1).
    """
    k, k0 = jnp.asarray(k), jnp.asarray(k0)
    return t0 + ((jnp.log(k) - jnp.log1p(-k)) - (jnp.log(k0) - jnp.log1p(-k0))) / rate


class Normalization(NamedTuple):
    """Map from data with E xxᵀ = s² I and b = E[f x] onto the form of Assumptions 1–2.

    a = lam·â, w = lam·ŵ, t = τ / time_rate with lam² = ‖b‖ / s² and time_rate = ‖b‖.
    Then â, ŵ follow the dynamics of Assumptions 1–2 in time τ, and K = Σ a_k w_k·b̂ is
    K̂ · lam², so K saturates at k_inf = ‖b‖ / s² instead of 1.
    """

    lam: float
    time_rate: float
    k_inf: float


def normalization(s2: float, b_norm: float) -> Normalization:
    """The normalization for data with second moment s² (per direction) and ‖E[f x]‖ = b_norm.

    Derived here for data that do not satisfy Assumptions 1–2 and checked
    symbolically in `reduced.derive`.
    """
    if not s2 > 0:
        raise ValueError(f"the input second moment s² must be > 0; got {s2}.")
    if not b_norm > 0:
        raise ValueError(
            f"‖E[f x]‖ must be > 0 for the multi-stage theory (no linear signal to grow); "
            f"got {b_norm}."
        )
    return Normalization(math.sqrt(b_norm / s2), float(b_norm), b_norm / s2)


def plateau_departure_terms(a, w, c4: ArrayLike, b3: ArrayLike, sigma3: float = -2.0):
    """Third-order terms f_k, g_k of §4.3.2 for d = 1 (σ‴(0) = −2 for tanh).

    f_k = −(1/6) c₄ σ‴(0) (Σ_l a_l w_l³) w_k + (1/6) b₃ σ‴(0) w_k³
          − (1/6) c₄ σ‴(0) (Σ_l a_l w_l) w_k³,
    g_k = −(1/6) c₄ σ‴(0) (Σ_l a_l w_l³) a_k + (1/2) b₃ σ‴(0) a_k w_k²
          − (1/2) σ‴(0) c₄ (Σ_l a_l w_l) a_k w_k²,
    with c₄ = E x⁴ and b₃ = E[f x³]. The paper prints f_k without its last
    term; `reduced.derive.multistage` re-derives both from the Taylor expansion of the
    risk (the term comes from (Σ_l a_l w_l x − f) · σ‴(0) w_k³ x³ / 6).
    """
    a, w = jnp.asarray(a), jnp.asarray(w)
    s_aw3 = jnp.sum(a * w**3)
    s_aw = jnp.sum(a * w)
    f = (
        -(1 / 6) * c4 * sigma3 * s_aw3 * w
        + (1 / 6) * b3 * sigma3 * w**3
        - (1 / 6) * c4 * sigma3 * s_aw * w**3
    )
    g = (
        -(1 / 6) * c4 * sigma3 * s_aw3 * a
        + 0.5 * b3 * sigma3 * a * w**2
        - 0.5 * sigma3 * c4 * s_aw * a * w**2
    )
    return f, g
