"""Observables of the two-layer family (multi-stage paper), computed inside the solve.

All are functions of (problem, θ, t); the data moments b = E[y x], s² = tr E[xxᵀ]/d are
recomputed from `problem` inside the jitted solve (cheap: one pass over x).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from reduced.multistage import linearized_solution, plateau_departure_terms

__all__ = ["DESCRIPTIONS", "LEFT_OUT", "multistage_observables", "relative_w2"]

#: One line per observable of `multistage_observables`: its formula and what it means
#: (the `flows simulate multistage` report lists them beside their final values).
DESCRIPTIONS: dict[str, str] = {
    "K": "K = Σ_k a_k u_k (u_k = w_k·b̂, b = E[y x]): the network's component along the "
    "teacher's linear part; grows from ≈ 0 and saturates at the end of the descent",
    "Kp": "K′ = Σ_k (a_k² + u_k²): the squared size of the weights along b̂ (eq. 16's "
    "companion of K)",
    "K_hat": "K / (‖b‖/s²): K in units of the value it saturates at in the linear theory "
    "(1 under Assumptions 1–2)",
    "Kp_hat": "K′ / (‖b‖/s²): K′ in the same units as K_hat",
    "q_max": "max_{k,i} {|a_k|, |w_kⁱ|}: the largest single weight (Theorem 1's T₁ uses it)",
    "w_perp_max": "max_k ‖w_k − u_k b̂‖_∞: the largest weight off the direction b̂ "
    "(frozen in the linearized flow)",
    "condensation": "Σ u_k² / Σ ‖w_k‖²: share of the first-layer weights along b̂ "
    "(Corollary 2: → 1 as the neurons condense)",
    "a2_over_u2": "Σ a_k² / Σ u_k²: balance of the two layers along b̂ (1 when balanced)",
    "norm_a": "‖a‖: Euclidean norm of the output weights",
    "norm_w": "‖w‖: Frobenius norm of the input weights",
    "ratio_aw": "‖a‖ / ‖w‖: ratio of the two layers' norms",
    "w2_rel": "W₂(ρ_|a|, ρ_‖w‖) / W₂(ρ_|a|, δ₀): distance between the distributions of |a_k| "
    "and ‖w_k‖, relative to the size of |a| (Corollaries 1 and 4: → 0 on [T_p, T_d])",
    "grad_rel": "‖∇R‖_∞ / ‖θ‖_∞: relative size of the gradient (Corollary 3: ≤ β at T_d)",
    "r_max": "max_k (|a_k − ã_k| + |u_k − ũ_k|): distance from the linearized flow's closed "
    "form (eq. 23) started at the same θ(0); small while the linearization holds",
    "w_perp_l2": "max_i (Σ_k (w_k⊥ⁱ)²)^{1/2}: the largest coordinate norm of the weights off "
    "b̂ (Proposition 1, Lemma 2)",
    "split_rate": "d/dt (Σ a_k² − Σ ‖w_k‖²) along the flow: how fast the layers' balance "
    "changes (0 to leading order)",
    "split_rate_3": "the third-order prediction of split_rate (§4.3.2, derived f_k, g_k; "
    "NaN for d > 1): compare with split_rate near K ≈ 1",
    "split_rate_3_printed": "the same prediction with the paper's printed f_k (NaN for "
    "d > 1): differs from split_rate_3 by the missing −(1/6) c₄ σ‴(0) (Σ a_l w_l) w_k³",
}

#: Observables left out of the report's summary of final values, with the reason.
LEFT_OUT: dict[str, str] = {
    "r_max": "its final value measures the linearized closed form, not the network: ã_k, ũ_k "
    "grow like e^{‖b‖t} for ever, while the network's weights saturate once the plateau "
    "ends, so r_max grows without bound after the linearization breaks down (its use is "
    "early: the time T₁ it first crosses m^{−γ₁}(ln m)³, Theorem 1); the whole curve is in "
    "trajectory.nc",
}


def relative_w2(a, w_norms):
    """W₂(ρ_|a|, ρ_‖w‖) / W₂(ρ_|a|, δ₀) for the empirical measures of |a_k| and ‖w_k‖.

    In 1-D the W₂ distance between two empirical measures with m atoms each is the RMS
    difference of the sorted values; W₂(ρ_|a|, δ₀) = RMS(|a|).
    """
    sa = jnp.sort(jnp.abs(a))
    sw = jnp.sort(w_norms)
    return jnp.sqrt(jnp.mean((sa - sw) ** 2)) / jnp.sqrt(jnp.mean(a**2))


def multistage_observables(problem, theta, t):
    """The multi-stage paper's macroscopic quantities at one time.

    With b = E[y x], b̂ = b/‖b‖, u_k = w_k·b̂ (= w_k¹ under Assumption 2):
    - `K` = Σ a_k u_k; `Kp` (K′) = Σ (a_k² + u_k²); `K_hat`, `Kp_hat`: the same divided by
      ‖b‖/s² (the value K saturates at in the linear theory; 1 under A1–A2).
    - `q_max` = max_{k,i}{|a_k|, |w_kⁱ|}; `w_perp_max` = max_k ‖w_k − u_k b̂‖_∞.
    - `condensation` = Σ u_k² / Σ ‖w_k‖² (Corollary 2); `a2_over_u2` = Σ a_k² / Σ u_k².
    - `norm_a`, `norm_w`, `ratio_aw` = ‖a‖/‖w‖; `w2_rel` = relative W₂ (Corollaries 1, 4).
    - `grad_rel` = ‖∇R‖_∞ / ‖θ‖_∞ (Corollary 3).
    - `w_perp_l2` = max_i (Σ_k (w_k⊥ⁱ)²)^{1/2} over the coordinates of w_k⊥ = w_k − u_k b̂
      (Proposition 1, Lemma 2: under Assumption 2, b̂ = e₁ and these are the wⁱ, i ≥ 2).
    - `split_rate` = d/dt (Σa² − Σ‖w‖²) along the flow (θ̇ = −∇R), and, for d = 1, its
      third-order prediction of §4.3.2, `split_rate_3` = 2 Σ_k (a_k f_k − w_k g_k) with the
      derived f_k, g_k (`reduced.multistage.plateau_departure_terms`), and
      `split_rate_3_printed` with the paper's printed f_k (NaN for d > 1). The leading
      terms of eq. (10) cancel in this difference for any moments, and the third-order
      terms hold in the data's own units (c₄ = E x⁴, b₃ = E[f x³]).
    - `r_max` = max_k (|a_k − ã_k| + |u_k − ũ_k|) against the linearized closed form
      (eq. 23, growth rate ‖b‖) from the same θ(0).
    """
    x, y = problem.x, problem.y
    n, d = x.shape
    b = x.T @ y / n
    s2 = jnp.trace(x.T @ x / n) / d
    b_norm = jnp.linalg.norm(b)
    bhat = b / b_norm
    k_inf = b_norm / s2
    a, w = theta["a"], theta["w"]
    u = w @ bhat
    K = jnp.sum(a * u)
    Kp = jnp.sum(a**2 + u**2)
    w_norms = jnp.linalg.norm(w, axis=1)
    g = problem.grad(theta)
    leaves_g = jax.tree_util.tree_leaves(g)
    leaves_t = jax.tree_util.tree_leaves(theta)
    g_inf = jnp.max(jnp.stack([jnp.max(jnp.abs(v)) for v in leaves_g]))
    t_inf = jnp.max(jnp.stack([jnp.max(jnp.abs(v)) for v in leaves_t]))
    a_lin, w_lin = linearized_solution(problem.theta0["a"], problem.theta0["w"], b, t)
    w_perp = w - u[:, None] * bhat[None, :]
    split = -2.0 * (jnp.sum(a * g["a"]) - jnp.sum(w * g["w"]))
    if d == 1:
        x1 = x[:, 0]
        c4, b3 = jnp.mean(x1**4), jnp.mean(y * x1**3)
        f3, g3 = plateau_departure_terms(a, w[:, 0], c4, b3)
        split_3 = 2.0 * (jnp.sum(a * f3) - jnp.sum(w[:, 0] * g3))
        # the printed f_k lacks −(1/6) c₄ σ‴(0) (Σ a_l w_l) w_k³ (σ‴(0) = −2)
        s_aw, w1 = jnp.sum(a * w[:, 0]), w[:, 0]
        f3_printed = f3 - (1 / 3) * c4 * s_aw * w1**3
        split_3_printed = 2.0 * (jnp.sum(a * f3_printed) - jnp.sum(w1 * g3))
    else:
        split_3 = split_3_printed = jnp.asarray(jnp.nan, dtype=a.dtype)
    u_lin = w_lin @ bhat
    return {
        "K": K,
        "Kp": Kp,
        "K_hat": K / k_inf,
        "Kp_hat": Kp / k_inf,
        "q_max": jnp.maximum(jnp.max(jnp.abs(a)), jnp.max(jnp.abs(w))),
        "w_perp_max": jnp.max(jnp.abs(w - u[:, None] * bhat[None, :])),
        "condensation": jnp.sum(u**2) / jnp.sum(w**2),
        "a2_over_u2": jnp.sum(a**2) / jnp.sum(u**2),
        "norm_a": jnp.linalg.norm(a),
        "norm_w": jnp.linalg.norm(w),
        "ratio_aw": jnp.linalg.norm(a) / jnp.linalg.norm(w),
        "w2_rel": relative_w2(a, w_norms),
        "grad_rel": g_inf / t_inf,
        "r_max": jnp.max(jnp.abs(a - a_lin) + jnp.abs(u - u_lin)),
        "w_perp_l2": jnp.max(jnp.sqrt(jnp.sum(w_perp**2, axis=0))),
        "split_rate": split,
        "split_rate_3": split_3,
        "split_rate_3_printed": split_3_printed,
    }


# the weights off b̂: exactly 0 at d = 1 (b̂ = ±1 spans the inputs) and small by
# Proposition 1 otherwise — departures measured against their floor, never flagged as
# numbers without digits (`flows.loss_floors`' observable records)
multistage_observables.error_measures = frozenset({"w_perp_max", "w_perp_l2"})  # type: ignore[attr-defined]
