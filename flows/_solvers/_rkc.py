"""Second-order damped Runge–Kutta–Chebyshev (RKC) solver for diffrax.

Gradient flows dθ/dt = −∇L(θ) have the Jacobian −∇²L: symmetric, with a real spectrum
that is ≤ 0 near minima. On such *mildly stiff* problems the step size of a classical
explicit method (Tsit5) is set by stability, h ≲ 3/ρ with ρ the spectral radius of the
Jacobian, not by accuracy. A stabilized explicit method with s stages has a real stability
interval [−β(s), 0] with β(s) ≈ 0.653·s², so a step of length h costs s ≈ sqrt(1.54·h·ρ)
vector-field evaluations: evaluations per unit time grow like sqrt(ρ) instead of ρ.

`RKC2` is the method of the RKC code (Sommeijer, Shampine & Verwer 1997) written as a
`diffrax.AbstractAdaptiveSolver`, so it plugs into `diffrax.diffeqsolve` with
`diffrax.PIDController` (whose tolerances it takes) or `diffrax.ConstantStepSize` (with
`nonstiff='bs3'` or `'none'`, which need none). Steps that are not
stability-limited (h ρ < 1.95) are taken by a non-stiff method instead (Bogacki–Shampine
3(2) or Tsit5; `RKC2.nonstiff`), so a flow with a fast accuracy-limited phase followed by
a stiff plateau gets the right tool for each.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ._stabilized import AbstractStabilizedSolver
from ._stabilized_parts import _STAGE_CONST
from .record import SolverRecord

__all__ = ["RKC2", "rkc_stability_bound"]

# Damping parameter ε of the damped Chebyshev polynomials (RKC code: w0 = 1 + 2/(13 s²)).
# With this ε the stability interval is β(s) ≈ 0.653 s² and |P_s(z)| ≤ ~0.95 on most of
# [−β(s), 0], which keeps the internal stages away from the boundary of stability.
_EPS = 2.0 / 13.0


def rkc_stability_bound(s: int) -> float:
    """Length β(s) of the real stability interval [−β(s), 0] of the damped s-stage RKC2
    method (ε = 2/13): β(s) = (1 + w0) T_s″(w0) / T_s′(w0) ≈ 0.653 s².

    **Arguments:**

    - `s`: number of stages (≥ 2).

    **Returns:** β(s) as a Python float.
    """
    w0 = 1.0 + _EPS / s**2
    t, dt, d2t = [1.0, w0], [0.0, 1.0], [0.0, 0.0]
    for _ in range(2, s + 1):
        t.append(2 * w0 * t[-1] - t[-2])
        dt.append(2 * w0 * dt[-1] - dt[-2] + 2 * t[-2])
        d2t.append(2 * w0 * d2t[-1] - d2t[-2] + 4 * dt[-2])
    return (1.0 + w0) * d2t[s] / dt[s]


def _rkc_error(y0, y1, hf0, hf1):
    """RKC's O(h³) local-error estimate 0.8 (y_n − y_{n+1}) + 0.4 h (F_n + F_{n+1})."""
    return jtu.tree_map(lambda a, b, c, d: 0.8 * (a - b) + 0.4 * (c + d), y0, y1, hf0, hf1)


class RKC2(AbstractStabilizedSolver):
    r"""Damped second-order Runge–Kutta–Chebyshev method with adaptive stage count.

    Computes, for a step y_n → y_{n+1} of size h with s stages (ε = 2/13):

    - w0 = 1 + ε/s², w1 = T_s′(w0)/T_s″(w0), b_j = T_j″(w0)/T_j′(w0)² (b_0 = b_1 = b_2),
      a_j = 1 − b_j T_j(w0);
    - Y_0 = y_n, Y_1 = y_n + μ̃_1 h F_0 with μ̃_1 = b_1 w1;
    - Y_j = (1 − μ_j − ν_j) y_n + μ_j Y_{j−1} + ν_j Y_{j−2} + μ̃_j h F(Y_{j−1}) + γ̃_j h F_0
      with μ_j = 2 b_j w0/b_{j−1}, ν_j = −b_j/b_{j−2}, μ̃_j = 2 b_j w1/b_{j−1},
      γ̃_j = −a_{j−1} μ̃_j, for j = 2..s; y_{n+1} = Y_s.

    The stability polynomial is P_s(z) = a_s + b_s T_s(w0 + w1 z): second order, and
    |P_s(z)| ≤ 1 on [−β(s), 0], β(s) ≈ 0.653 s² (`rkc_stability_bound`).

    **Stage count.** Each step uses s = max(2, 1 + floor(sqrt(1 + 1.54 h ρ))) stages, the
    formula of the RKC code (Fortran `int`, i.e. floor; it already gives β(s) ≥ h ρ for
    every h ρ ≥ 0, so a ceiling would only add a stage). The three-term recursion runs in
    a `lax.while_loop` with a run-time trip count that carries only the two previous
    stages and the Chebyshev values T_j, T_j′, T_j″: memory does not grow with s.

    **When h ρ is too large for `max_stages`.** The solver must return y at the `t1` the
    step-size controller asked for. If the stage formula needs more than `max_stages`
    (h ρ ≥ (max_stages² − 1)/1.54), the step is split into n = ceil(h ρ / h ρ_max) equal
    sub-steps of ≤ `max_stages` stages each (the cap is on the sub-step, not a failure):
    the step costs n·s evaluations, its error estimate is the sum of the sub-steps' |est|,
    and no step is rejected for it (an infinite error would make the PID controller cycle
    through rejections). Beyond 10 000 sub-steps the step fails (infinite error,
    `RESULTS.max_steps_reached`).

    **Error estimate** (as in the RKC paper and code): est = 0.8 (y_n − y_{n+1}) + 0.4 h (F_n +
    F_{n+1}), an O(h³) local-error estimate; hence `error_order` = 3 (diffrax's PID
    controller uses factor = err^(−1/error_order), the exponent of h in the local error).
    F_{n+1} = F(t_{n+1}, y_{n+1}) is carried in the state and reused as F_0 of the next
    step (first-same-as-last), so a step costs exactly s vector-field evaluations.

    **Error control and tolerance proportionality.** With local error control a method of
    order p has global error ∝ tol^{p/(p+1)}: for RKC2, tol^{2/3} (measured: rtol^0.6 on
    the heat equation, the Brusselator and a quartic flow, err/rtol from 0.3–1 at rtol 1e-3
    to 23–57 at 1e-8). When tolerances are there (given, or the controller's) and
    `proportional` (the default), the error of the RKC steps is multiplied by
    sqrt(1e-3 / rtol), i.e. they are controlled to tol′ = rtol·sqrt(rtol/1e-3) ∝
    rtol^{3/2}, so the global error ∝ tol′^{2/3}
    ∝ rtol (the tolerance transformation of RADAU5, which controls to rtol^{2/3} for the
    same reason). Measured err/rtol: `benchmarks/results/work_precision_stiff.md`. The
    non-stiff (Bogacki–Shampine, Tsit5) steps propagate their higher-order solution and
    keep their own error.

    **Non-stiff steps (`nonstiff`).** Where h ρ < 3/1.54 ≈ 1.95 the stage formula asks
    for the minimum s = 2: the step is limited by accuracy, not stability, and a
    second-order method is the wrong tool. Such a step is taken instead by

    - `'bs3'` (the default without tolerances): diffrax's `Bosh3`, the
      Bogacki–Shampine 3(2) pair (3 evaluations, FSAL; third-order solution, the
      embedded second-order one gives an O(h³) error estimate, so `error_order` = 3
      holds for both kinds of step and the controller needs nothing more; real stability
      interval [−2.51, 0] ⊃ [−h ρ, 0]);
    - `'tsit5'` (the default with tolerances, given or the controller's): diffrax's
      `Tsit5`, Tsitouras 5(4) (6
      evaluations, FSAL). Its error estimate is O(h⁵), but the controller applies one
      `error_order` (3) to every step,
      so the step reports its error e (in the controller's norm) as e^{3/5}: accepted iff
      e ≤ 1, and the PID controller's factor e^{−1/3·3/5} = e^{−1/5} is Tsit5's own. That needs the
      controller's tolerances and its norm, which diffrax passes (see `tolerances`);
    - `'none'`: plain RKC2 everywhere (the tests of its order and stability polynomial use
      it).

    **Predictive switch** (`predictive_switch`, with tolerances). The RKC steps are
    controlled to the transformed tolerance, the non-stiff steps to rtol itself, so near
    the switch the two would alternate (an RKC step past the switch fails, the controller
    goes back, and again). After each accepted non-stiff step, RKC's estimator on that
    step's own end points (no evaluation), doubled for safety, predicts the RKC step's
    error and so the largest h it would pass, h_s. The next h is capped at h_s when that
    lies past the switch and covers more time per evaluation than the non-stiff method
    can; otherwise the non-stiff steps continue, up to 0.9 × their real stability interval
    (Bogacki–Shampine 2.51, Tsit5 3.51). The cap is imposed through the error the step
    reports (still ≤ 1: it stays accepted). Rejected steps and evaluations, measured:
    `benchmarks/results/work_precision_stiff.md`, `work_precision_multistage.md`.

    **Dense output:** cubic Hermite interpolation from y_n, y_{n+1}, h F_n, h F_{n+1}
    (RKC and Bogacki–Shampine steps); a Tsit5 step uses Tsit5's own fourth-order
    interpolant.

    **Spectral radius.** ρ is estimated by power iteration on Jacobian–vector products
    (`jax.jvp` of y ↦ vf(t, y, args); for a gradient flow these are Hessian–vector
    products) — `init_power_iters` iterations in `init` from a fixed pseudo-random vector,
    then `power_iters` iterations warm-started from the previous eigenvector at the start
    of every `rho_every`-th accepted step. The estimate ‖J v‖ (v unit) approaches |λ|_max
    from below, so it is multiplied by `rho_safety` and `rho_floor` is added. Power
    iteration bounds the largest |λ| whatever its sign: at saddles of L the Jacobian has
    (small) positive eigenvalues; these are integrated with second-order accuracy (P_s(z)
    ≈ eᶻ for small z), and they only matter for ρ if they dominate in magnitude.

    **Stale ρ.** Between re-estimates ρ is frozen. If the true spectral radius grows past
    the bound (progressive sharpening), a step goes unstable. Every step therefore checks
    the secant Rayleigh quotient −⟨F(y₁) − F(y₀), y₁ − y₀⟩ / ‖y₁ − y₀‖² — at most ρ for a
    symmetric Jacobian, ≈ |λ| > ρ when an unstable mode λ dominates the increment — and
    whether y₁ is finite. If y₁ is not finite, or h × the quotient exceeds the step's
    stability bound (h ρ for a stabilized step, 2.5 for a non-stiff one) by 10 % and (when
    tolerances are there) the step would be rejected (a non-autonomous field makes the
    secant large as well; an accepted step is kept), the step is recomputed once with a
    fresh estimate (`init_power_iters` power iterations started from y₁ − y₀, never below
    the ρ used; with `spectral_radius` given: ≥ 2 ρ and ≥ `rho_safety` × the secant), and
    the new ρ is kept if the step is accepted (`RKCState.redos` counts them). A step that
    is still not finite reports an infinite error and `RESULTS.nonfinite`: rejected by an
    adaptive controller, the end of the solve with `ConstantStepSize` — never a
    successful NaN.

    **Arguments (fields):**

    - `max_stages`: largest s per (sub-)step (default 200, i.e. h ρ ≤ 25 973 per sub-step).
    - `rho_every`: re-estimate ρ every this many accepted steps (default 50; ≥ 1).
    - `power_iters`: power iterations per re-estimate (default 3; warm-started, so few
      suffice).
    - `init_power_iters`: power iterations in `init` (default 30).
    - `rho_safety`: factor applied to the power-iteration estimate (default 1.2).
    - `rho_floor`: added to the estimate (default 1e-8) so ρ stays positive even where the
      Jacobian (numerically) vanishes.
    - `nonstiff`: the method of the non-stiff steps (h ρ < 1.95): 'auto' (default:
      'tsit5' when tolerances are there — given, or the controller's — else 'bs3'),
      'bs3', 'tsit5' (needs tolerances) or 'none' (plain RKC2); see above.
    - `tolerances`: `(rtol, atol)` of the step-size controller (used by `nonstiff='tsit5'`
      and the tolerance-proportional control; numbers or JAX scalars). By default (None,
      with `nonstiff` 'auto' or 'tsit5') they are **taken from the controller**: diffrax
      hands an adaptive controller's rtol, atol and norm to the solver as it does to its
      implicit solvers (the `root_finder` field, `flows._solvers._stabilized_parts.
      ControllerTolerances`), so `RKC2()` under `diffrax.PIDController(rtol, atol)` is
      `flows.make_solver('rkc', rtol, atol)` (same steps and error,
      `benchmarks/results/bare_contract.md`), with the controller's norm if it is
      `optimistix.rms_norm` or `max_norm` (else `error_norm`). With `ConstantStepSize`
      diffrax then refuses it and asks for an adaptive controller (as for `Kvaerno5`):
      give `nonstiff='bs3'` or `'none'`, which take no tolerances (as before: plain local
      error control, 23–110 × rtol at rtol 1e-8 under a `PIDController`). Tolerances
      given here take precedence over the controller's: give the controller's.
    - `proportional`: with `tolerances`, control the RKC steps to rtol·sqrt(rtol/1e-3)
      (default True; False: plain local error control).
    - `predictive_switch`: with `tolerances` and a non-stiff method, cap the step size
      after each non-stiff step from the RKC step's predicted error (default True; False:
      the plain switch at h ρ = 1.95, for comparison); see above.
    - `error_norm`: the norm of the scaled error error / (atol + rtol max(|y_n|, |y_{n+1}|))
      over the whole state that the step-size controller uses — 'rms' (default: diffrax's
      `PIDController` default, `optimistix.rms_norm`) or 'max' (`optimistix.max_norm`,
      for a controller built with `norm=optimistix.max_norm`). The solver computes the
      same norm where it judges a step itself (the Tsit5 steps' rescaled error, the
      near-switch retry, the secant check), so it must match the controller's. With
      'rms' the controller bounds the root-mean-square local error: where the error sits
      in a few of many components (a few neurons of a wide net) the largest component's
      error can exceed rtol by up to sqrt(state size); 'max' bounds every component.
    - `spectral_radius`: optional `(t, y, args) -> scalar` returning a bound on the
      spectral radius of the Jacobian of the vector field (used as is: no safety factor,
      no floor); when given, no power iteration is done. It is called at the start of
      every step with the solver's (t_n, y_n, args).

    **Counting evaluations.** The state (`RKCState`) counts vector-field evaluations
    (`vf_evals`: one per stage, plus F(y_0) in `init` and F(y_n) after a jump) and JVPs
    (`jvp_evals`). Read them with `SaveAt(..., solver_state=True)` (works together with
    `SaveAt(subs=[...])`) and `rkc_eval_counts(sol.solver_state)`. Exact for the accepted
    path; two sources of work are *not* included, because diffrax gives the solver no way
    to see them: (1) rejected steps — diffrax restores the solver state when a step is
    rejected, so their evaluations are lost (`sol.stats["num_rejected_steps"]` says how
    many there were; with `ConstantStepSize` there are none); (2) the two calls of
    `solver.func` that `PIDController` makes to choose the first step when `dt0=None`.
    `RKCState.stages` is the evaluation count of the last accepted step (s for a plain RKC
    step, n·s for n sub-steps, 3 or 6 for a non-stiff step).

    Limitations: ODE terms only (`ODETerm`; the step uses scalar controls h = t1 − t0);
    the stage loop is a `lax.while_loop` with a run-time trip count, so reverse-mode
    differentiation through `diffeqsolve` is not supported (forward mode, e.g.
    `diffrax.ForwardMode`, should be, but is untested).

    **References:**

    - B. P. Sommeijer, L. F. Shampine, J. G. Verwer, "RKC: an explicit solver for
      parabolic PDEs", J. Comput. Appl. Math. 88 (1997) 315–326.
    - W. Hundsdorfer, J. G. Verwer, "Numerical Solution of Time-Dependent
      Advection-Diffusion-Reaction Equations", Springer (2003), §V.1.
    """

    _prop_exponent: ClassVar[float] = 0.5

    def order(self, terms):
        return 2

    def error_order(self, terms):
        # est is an O(h³) local-error estimate of a second-order method.
        return 3

    def _max_hrho(self) -> float:
        # s = 1 + floor(sqrt(1 + 1.54 z)) ≤ max_stages iff z < (max_stages² − 1)/1.54
        return 0.999 * (self.max_stages**2 - 1.0) / _STAGE_CONST

    def _core_step(self, terms, t0, t1, y0, args, f0, control, rho):
        h = jnp.abs(jnp.asarray(control, jnp.result_type(float)))
        s_real = 1.0 + jnp.floor(jnp.sqrt(1.0 + _STAGE_CONST * h * rho))
        s = jnp.clip(s_real, 2.0, self.max_stages).astype(jnp.int32)
        y1, f1, hf0, hf1 = self._stages(terms, t0, t1, y0, args, f0, control, s)
        return y1, f1, _rkc_error(y0, y1, hf0, hf1), s

    def _stage_evals(self, hrho):
        return jnp.maximum(1.0 + jnp.floor(jnp.sqrt(1.0 + _STAGE_CONST * hrho)), 2.0)

    def _endpoint_error(self, y0, y1, hf0, hf1):
        return _rkc_error(y0, y1, hf0, hf1)

    def _stages(self, terms, t0, t1, y0, args, f0, control, s):
        """Run the s-stage recursion; returns (y1, F(t1, y1), h F0, h F1)."""
        fdt = jnp.result_type(float)
        sf = s.astype(fdt)
        dt = t1 - t0
        # w0 − 1 = ε/s² is tiny for large s; form w0² − 1 = δ(2 + δ) and log(w0 + √·) via
        # log1p to avoid cancellation.
        delta = _EPS / sf**2
        w0 = 1.0 + delta
        temp1 = delta * (2.0 + delta)
        temp2 = jnp.sqrt(temp1)
        arg = sf * jnp.log1p(delta + temp2)
        # w1 = T_s'(w0) / T_s''(w0) in closed form (w0 = cosh θ, T_s = cosh(sθ)).
        w1 = jnp.sinh(arg) * temp1 / (jnp.cosh(arg) * sf * temp2 - w0 * jnp.sinh(arg))

        b1 = 1.0 / (2.0 * w0) ** 2  # b_0 = b_1 = b_2 = T_2''/T_2'^2
        mus1 = w1 * b1
        hf0 = terms.prod(f0, control)

        def comb(c_y0, c_jm1, c_jm2, c_f, c_f0, y0_, yjm1, yjm2, hf, hf0_):
            dt_ = y0_.dtype
            return (
                c_y0.astype(dt_) * y0_
                + c_jm1.astype(dt_) * yjm1
                + c_jm2.astype(dt_) * yjm2
                + c_f.astype(dt_) * hf
                + c_f0.astype(dt_) * hf0_
            )

        y1_stage = jtu.tree_map(lambda a, b: a + mus1.astype(a.dtype) * b, y0, hf0)
        one, zero = jnp.ones((), fdt), jnp.zeros((), fdt)
        init = (
            jnp.asarray(2, jnp.int32),  # j
            y1_stage,  # Y_{j-1}
            y0,  # Y_{j-2}
            w0,  # T_{j-1}(w0) = T_1
            one,  # T_{j-2} = T_0
            one,  # T'_{j-1}
            zero,  # T'_{j-2}
            zero,  # T''_{j-1}
            zero,  # T''_{j-2}
            b1,  # b_{j-1}
            b1,  # b_{j-2}
            mus1,  # θ_{j-1}: stage time fraction of Y_{j-1}
            zero,  # θ_{j-2}
        )

        def cond(carry):
            return carry[0] <= s

        def body(carry):
            j, yjm1, yjm2, z1, z2, dz1, dz2, d2z1, d2z2, bjm1, bjm2, th1, th2 = carry
            zj = 2.0 * w0 * z1 - z2
            dzj = 2.0 * w0 * dz1 - dz2 + 2.0 * z1
            d2zj = 2.0 * w0 * d2z1 - d2z2 + 4.0 * dz1
            bj = d2zj / dzj**2
            ajm1 = 1.0 - z1 * bjm1
            mu = 2.0 * w0 * bj / bjm1
            nu = -bj / bjm2
            mus = mu * w1 / w0
            f = terms.vf(t0 + th1.astype(jnp.result_type(dt)) * dt, yjm1, args)
            hf = terms.prod(f, control)
            yj = jtu.tree_map(
                lambda a, b, c, d, e: comb(1.0 - mu - nu, mu, nu, mus, -mus * ajm1, a, b, c, d, e),
                y0,
                yjm1,
                yjm2,
                hf,
                hf0,
            )
            thj = mu * th1 + nu * th2 + mus * (1.0 - ajm1)
            return (j + 1, yj, yjm1, zj, z1, dzj, dz1, d2zj, d2z1, bj, bjm1, thj, th1)

        out = jax.lax.while_loop(cond, body, init)
        y1 = out[1]
        f1 = terms.vf(t1, y1, args)
        hf1 = terms.prod(f1, control)
        return y1, f1, hf0, hf1


def _make_rkc(rtol, atol, error_norm, on_products):
    return RKC2(nonstiff="tsit5", tolerances=(float(rtol), float(atol)), error_norm=error_norm)


#: `solver='rkc'`: RKC2 taking its non-stiff steps with Tsit5, its tolerances and error
#: norm those of the controller.
RECORD = SolverRecord(
    "rkc",
    RKC2,
    make=_make_rkc,
    method=(
        "RKC2, non-stiff steps (h·rho < 1.95) by Tsit5, RKC steps controlled to "
        "rtol·sqrt(rtol/1e-3), sub-steps beyond max_stages, secant check for a stale rho"
    ),
)
