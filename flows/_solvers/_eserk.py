"""Fourth-order extrapolated stabilized explicit Runge–Kutta solver (ESERK4-type) for diffrax.

The building block is the first-order damped Chebyshev method: s stages, stability
polynomial R_s(z) = T_s(w0 + w1 z)/T_s(w0) with w0 = 1 + ε/s², w1 = T_s(w0)/T_s′(w0)
(so R_s(z) = 1 + z + O(z²)), real stability interval [−β(s), 0], β(s) = (1 + w0)/w1 ≈
tanh(√(2ε))·2/√(2ε)·s². Its stages follow from the three-term recurrence of the Chebyshev
polynomials — nothing is read from a table:

    b_j = 1/T_j(w0),  Y_0 = y,  Y_1 = y + (w1/w0) τ F(Y_0),
    Y_j = μ_j Y_{j−1} + ν_j Y_{j−2} + μ̃_j τ F(Y_{j−1}),
    μ_j = 2 w0 b_j/b_{j−1},  ν_j = −b_j/b_{j−2},  μ̃_j = 2 w1 b_j/b_{j−1}  (μ_j + ν_j = 1),

with stage times c_j = w1 T_j′(w0)/T_j(w0) (c_s = 1).

A step of size h computes Z_k, k = 1…4: k steps of size h/k of that method (the same s),
and combines them by Richardson extrapolation. The global error of a first-order one-step
method has an expansion e₁τ + e₂τ² + e₃τ³ + O(τ⁴) in its step τ, so the combination
Σ a_k Z_k with Σ a_k = 1 and Σ a_k k^{−j} = 0 (j = 1, 2, 3) is of order 4: a = (−1, 24,
−81, 64)/6 (solved in `extrapolation_weights`). The same with k = 1…3 and j = 1, 2 gives a
third-order solution (1/2, −4, 9/2); their difference is an O(h⁴) local-error estimate of
the third-order one, so `error_order` = 4, and the fourth-order solution is propagated
(local extrapolation: global error ∝ tol, no tolerance transformation needed).

The stability polynomial of the step is P_s(z) = Σ a_k R_s(z/k)^k. With weak damping the
|a_k| (which sum to 28) make |P_s| exceed 1 where R_s oscillates; ε = 2 damps R_s to
|R_s| ≤ 1/cosh 2 ≈ 0.27 away from 0, and then |P_s| ≤ 1 on all of [−β(s), 0], β(s)/s²
decreasing from 1.07 (s = 2) to tanh 2 ≈ 0.964 (checked for s = 2…1000 in
tests/test_solvers_eserk.py; with ε = 1.5 it fails for s ≥ 20). A step costs 10 s − 3
evaluations (the k = 1…4 sequences share F(y_n); F(y_{n+1}) included, first same as
last), so
s = ceil(sqrt(h ρ / 0.964)), i.e. ≈ 10.2 sqrt(h ρ) evaluations per step against RKC2's
≈ 1.24 sqrt(h ρ): an ESERK4 step is ~8× dearer at equal h, and pays off where a
fourth-order method takes ≫ 8× longer steps, i.e. at tight tolerances.

References: J. Martín-Vaquero, A. Kleefeld, "ESERK4: a fourth-order extrapolated
stabilized explicit Runge–Kutta method", arXiv:1401.5624 (2014); the method here is that
idea, with the damping and stage formula derived and checked above.
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._stabilized import AbstractStabilizedSolver
from .record import SolverRecord

__all__ = ["ESERK4", "eserk4_stability_bound", "extrapolation_weights"]

# Damping ε of the first-order Chebyshev polynomials (w0 = 1 + ε/s²); see the module doc.
ESERK_EPS = 2.0
# lim β(s)/s² = 2 tanh(√(2ε))/√(2ε) = tanh 2 for ε = 2, and β(s)/s² decreases to it, so
# s = ceil(sqrt(h ρ / _BETA_C)) gives β(s) ≥ h ρ.
_BETA_C = math.tanh(math.sqrt(2.0 * ESERK_EPS)) * 2.0 / math.sqrt(2.0 * ESERK_EPS) * (1 - 1e-12)
# The O(h⁴) estimate is the error of the third-order combination, while the fourth-order
# one is propagated: it overestimates the local error, by a factor that does not depend on
# the tolerance (measured err/rtol 0.015–0.06 at every rtol 1e-3…1e-8 on the heat
# equation, the Brusselator and a quartic flow). Reported × this (a smaller reported
# error: longer steps), err/rtol lands in ≈ [0.1, 2.5]
# (benchmarks/results/work_precision_stiff.md).
_ERROR_FACTOR = 0.05
# Default `max_stages` of ESERK4 (RKC2: 200): h ρ ≤ 0.964 · 600² ≈ 3.5e5 per (sub-)step.
# With 200 (h ρ ≤ 3.9e4), the heat equation N = 1000 (ρ ≈ 4e6, t = 0.05, rough data) had its
# steps split into sub-steps at loose tolerances, which over-delivered: err/rtol 0.0043 /
# 0.03 / 0.16 at rtol 1e-3 / 1e-4 / 1e-5 (17 253 / 19 655 / 23 201 evaluations); with 600:
# 0.14 / 0.21 / 0.33 (14 969 / 17 721 / 22 364), the same with 1000. |P_s| ≤ 1 on
# [−β(s), 0] is checked to s = 1000 (tests). Round-off: in float32 (coefficients in
# float64, the state in float32) the same problem's error at rtol 1e-4 is 6.5 × rtol with
# 200 and 18 × with 600 — both far outside what float32 resolves there; float32 runs that
# need s > 200 should set `max_stages=200` or use float64.
ESERK_MAX_STAGES = 600
# non-stiff steps (Tsit5) where h ρ < this (Tsit5's real stability interval is ≈ [−3.3, 0])
_ESERK_NONSTIFF_MAX_HRHO = 2.5


def extrapolation_weights(n: int) -> np.ndarray:
    """Weights a_1…a_n of Richardson extrapolation of a first-order method from k = 1…n
    steps of size h/k: Σ a_k = 1 and Σ a_k k^{−j} = 0 for j = 1…n−1 (order n).

    **Returns:** the weights as a float64 array (n = 4: (−1, 24, −81, 64)/6).
    """
    k = np.arange(1, n + 1, dtype=np.float64)
    m = np.vstack([k ** (-j) for j in range(n)])
    rhs = np.zeros(n)
    rhs[0] = 1.0
    return np.linalg.solve(m, rhs)


_A4 = tuple(float(a) for a in extrapolation_weights(4))
_A3 = tuple(float(a) for a in extrapolation_weights(3)) + (0.0,)
# the 10 sub-steps of a step, in order: (k, index within the k sequence)
_SEQ = [(k, m) for k in range(1, 5) for m in range(k)]


def eserk4_stability_bound(s: int, eps: float = ESERK_EPS) -> float:
    """β(s) = (1 + w0) T_s′(w0)/T_s(w0): the first-order method's stability interval
    [−β(s), 0] with s stages (w0 = 1 + ε/s²), which the extrapolated step keeps."""
    w0 = 1.0 + eps / s**2
    th = math.acosh(w0)
    return (1.0 + w0) * s * math.tanh(s * th) / math.sinh(th)


class ESERK4(AbstractStabilizedSolver):
    r"""Fourth-order stabilized explicit method: Richardson extrapolation of first-order
    damped Chebyshev steps (see the module `flows._solvers._eserk`), for gradient flows whose step
    is limited by the spectral radius ρ of the Hessian at tolerances where a second-order
    method (`RKC2`) needs many steps.

    Shares `RKC2`'s machinery (`flows.AbstractStabilizedSolver`): ρ by Hessian-vector
    power iteration (`init_power_iters` in `init`, `power_iters` every `rho_every` steps),
    sub-steps when h ρ needs more than `max_stages`, the secant check with a fresh ρ for a
    stale one, non-finite steps reported as `RESULTS.nonfinite`, evaluation counts in the
    state (`flows.rkc_eval_counts`), cubic Hermite dense output (Tsit5's own interpolant
    on Tsit5 steps).

    **Fields** as `RKC2`, except:

    - `max_stages`: default 600 (`ESERK_MAX_STAGES`; RKC2: 200), h ρ ≤ 3.5·10⁵ per
      (sub-)step: a smaller cap splits long steps of very stiff problems into sub-steps,
      which over-delivers at loose tolerances (heat equation N = 1000, rtol 1e-3:
      err/rtol 0.004 with 200, 0.14 with 600).

    - `nonstiff`: 'tsit5' (steps with h ρ < 2.5 by diffrax's Tsit5, whose error is reported
      to the controller as e^{4/5}; needs tolerances), 'none' (ESERK4 with s ≥ 2
      everywhere) or 'auto' (default: 'tsit5' when tolerances are there, else 'none').
      Without `tolerances` it takes the adaptive controller's (`RKC2`, `tolerances`):
      `ESERK4()` under `diffrax.PIDController(rtol, atol)` is `make_solver('eserk4',
      rtol, atol)`, what `flows.simulate(solver='eserk4')` uses; with
      `ConstantStepSize`, give `nonstiff='none'`.
    - No tolerance transformation (`proportional` has no effect): the fourth-order solution
      is propagated and the estimate is O(h⁴), so the global error already follows rtol.
      The estimate (the third-order combination's error) is reported × 0.05: it
      overestimates the propagated solution's error by a tolerance-independent factor
      (err/rtol 0.015–0.06 measured without it).

    Order 4, `error_order` 4; a step with s stages costs 10 s − 3 evaluations (F(y_{n+1})
    included).
    """

    nonstiff: str = eqx.field(static=True, default="auto")
    max_stages: int = eqx.field(static=True, default=ESERK_MAX_STAGES)

    _nonstiff_methods: ClassVar[tuple[str, ...]] = ("tsit5", "none")
    _bare_nonstiff: ClassVar[str] = "none"
    _nonstiff_max_hrho: ClassVar[float] = _ESERK_NONSTIFF_MAX_HRHO

    def order(self, terms):
        return 4

    def error_order(self, terms):
        return 4

    def _max_hrho(self) -> float:
        return _BETA_C * self.max_stages**2

    def _core_step(self, terms, t0, t1, y0, args, f0, control, rho):
        fdt = jnp.result_type(float)
        h = jnp.abs(jnp.asarray(control, fdt))
        s = jnp.clip(jnp.ceil(jnp.sqrt(h * rho / _BETA_C)), 2.0, self.max_stages)
        s = s.astype(jnp.int32)
        sf = s.astype(fdt)
        delta = ESERK_EPS / sf**2
        w0 = 1.0 + delta
        th = jnp.log1p(delta + jnp.sqrt(delta * (2.0 + delta)))  # acosh(w0), no cancellation
        w1 = jnp.sinh(th) / (sf * jnp.tanh(sf * th))  # T_s(w0) / T_s'(w0)
        dt = t1 - t0

        a4 = jnp.asarray(_A4, fdt)
        a3 = jnp.asarray(_A3, fdt)
        ks = jnp.asarray([k for k, _ in _SEQ], jnp.int32)
        ms = jnp.asarray([m for _, m in _SEQ], jnp.int32)

        def chebyshev(t, tau_c, y, fy):
            """s stages of the first-order method from (t, y), F(y) = fy, step τ (the
            control `tau_c`); returns Y_s (s − 1 evaluations)."""
            tau = jnp.asarray(tau_c, fdt)
            y1 = jtu.tree_map(
                lambda a, b: a + (w1 / w0).astype(a.dtype) * b, y, terms.prod(fy, tau_c)
            )
            one, zero = jnp.ones((), fdt), jnp.zeros((), fdt)
            # j, Y_{j−1}, Y_{j−2}, T_{j−1}, T_{j−2}, T'_{j−1}, T'_{j−2}
            init = (jnp.asarray(2, jnp.int32), y1, y, w0, one, one, zero)

            def body(c):
                j, yjm1, yjm2, t1_, t2_, d1_, d2_ = c
                tj = 2.0 * w0 * t1_ - t2_
                dj = 2.0 * w0 * d1_ - d2_ + 2.0 * t1_
                mu = 2.0 * w0 * t1_ / tj  # b_j / b_{j−1} = T_{j−1}/T_j
                nu = -t2_ / tj
                mus = 2.0 * w1 * t1_ / tj
                cjm1 = w1 * d1_ / t1_  # stage time of Y_{j−1}
                f = terms.vf(t + (cjm1 * tau).astype(jnp.result_type(t)), yjm1, args)
                hf = terms.prod(f, tau_c)
                yj = jtu.tree_map(
                    lambda a, b, c_: (
                        mu.astype(a.dtype) * a + nu.astype(a.dtype) * b + mus.astype(a.dtype) * c_
                    ),
                    yjm1,
                    yjm2,
                    hf,
                )
                return j + 1, yj, yjm1, tj, t1_, dj, d1_

            out = jax.lax.while_loop(lambda c: c[0] <= s, body, init)
            return out[1]

        zeros = jtu.tree_map(jnp.zeros_like, y0)

        def body(i, c):
            z, acc4, acc3, evals = c
            k, m = ks[i], ms[i]
            first = m == 0
            kf = k.astype(fdt)
            tau_c = control / kf.astype(jnp.result_type(control))
            t_start = t0 + (m.astype(fdt) / kf).astype(jnp.result_type(dt)) * dt
            z = jtu.tree_map(lambda a, b: jnp.where(first, a, b), y0, z)
            fz = jax.lax.cond(first, lambda: f0, lambda: terms.vf(t_start, z, args))
            evals = evals + jnp.where(first, 0, 1) + (s - 1)
            z = chebyshev(t_start, tau_c, z, fz)
            last = m == k - 1
            acc4 = jtu.tree_map(
                lambda a, b: a + jnp.where(last, a4[k - 1], 0.0).astype(a.dtype) * b, acc4, z
            )
            acc3 = jtu.tree_map(
                lambda a, b: a + jnp.where(last, a3[k - 1], 0.0).astype(a.dtype) * b, acc3, z
            )
            return z, acc4, acc3, evals

        init = (y0, zeros, zeros, jnp.zeros((), jnp.int32))
        _, y1, y3, evals = jax.lax.fori_loop(0, len(_SEQ), body, init)
        f1 = terms.vf(t1, y1, args)
        err = jtu.tree_map(lambda a, b: _ERROR_FACTOR * (a - b), y1, y3)
        return y1, f1, err, evals + 1


def _make_eserk4(rtol, atol, error_norm, on_products):
    return ESERK4(nonstiff="tsit5", tolerances=(float(rtol), float(atol)), error_norm=error_norm)


#: `solver='eserk4'`: ESERK4 taking its non-stiff steps with Tsit5, its tolerances and error
#: norm those of the controller; it steps to its save times (its cubic Hermite between
#: stiff steps is not trusted, `control.steps_to_saves`).
RECORD = SolverRecord(
    "eserk4",
    ESERK4,
    make=_make_eserk4,
    method=(
        "ESERK4 (extrapolated first-order Chebyshev, eps = 2, at most 600 stages), "
        "non-stiff steps by Tsit5, steps to its save times"
    ),
    steps_to_saves=True,
)
