"""How a solve steps: the first step the toolkit chooses, the error norm, the PID
controller, and which solvers step to their save times."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import optimistix as optx

from .._errors import ConfigError
from ._stabilized import ERROR_NORMS, AbstractStabilizedSolver
from .registry import STEP_TO_SAVES


def initial_step(fn, t0, y0, *, rtol, atol, order: int, rho, stability: float | None, span):
    """First step of a solve, chosen by the toolkit (diffrax 0.7's own choice is skipped for
    wrapped terms: its `dt0=None` start is then always 0.01, which overflowed a quartic
    flow with Tsit5). Hairer–Nørsett–Wanner's rule (Solving ODEs I, §II.4) — h₀ = 0.01
    ‖y₀‖/‖f₀‖, then (0.01/max(‖f₀‖, ‖f(y₀ + h₀f₀) − f₀‖/h₀))^{1/(p+1)} in the controller's
    scaled norm — capped by `stability`/ρ for a method whose real stability interval is
    [−stability, 0] (None: stabilized or implicit, no cap), by `span` and by
    `FIRST_STEP_MAX` = 0.01 (below it rounded down to a power of two). jnp, traceable;
    `fn(t, y)` is the vector field.
    """
    fdt = jnp.result_type(float)
    leaves0 = jax.tree_util.tree_leaves(y0)
    size = sum(jnp.size(x) for x in leaves0)

    def norm(tree):
        sq = [
            jnp.sum((a / (atol + rtol * jnp.abs(b))) ** 2)
            for a, b in zip(jax.tree_util.tree_leaves(tree), leaves0, strict=True)
        ]
        return jnp.sqrt(sum(sq) / size).astype(fdt)

    f0 = fn(t0, y0)
    d0, d1 = norm(y0), norm(f0)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = jnp.where(small, 1e-6, 0.01 * d0 / jnp.where(small, 1.0, d1))
    if stability is not None:
        h0 = jnp.minimum(h0, stability / rho)
    y1 = jax.tree_util.tree_map(lambda a, b: a + h0.astype(a.dtype) * b, y0, f0)
    f1 = fn(t0 + h0, y1)
    d2 = norm(jax.tree_util.tree_map(lambda a, b: a - b, f1, f0)) / h0
    m = jnp.maximum(d1, d2)
    h1 = jnp.where(
        m <= 1e-15,
        jnp.maximum(1e-6, h0 * 1e-3),
        (0.01 / jnp.where(m > 0, m, 1.0)) ** (1.0 / (order + 1)),
    )
    h = jnp.minimum(100 * h0, h1)
    if stability is not None:
        h = jnp.minimum(h, stability / rho)
    # rounded down to a power of two: only its magnitude matters, and then the same problem
    # gets bit-for-bit the same first step alone and in a vmapped batch (whose reductions
    # round differently in the last bits)
    # and at most 0.01, the start diffrax used before: the controller grows an accepted step
    # up to 10× at once, so a cap costs a few steps, while a too-long first step costs a
    # rejection (and a batch whose members reject differently rounds differently)
    h = jnp.where(h >= FIRST_STEP_MAX, FIRST_STEP_MAX, 2.0 ** jnp.floor(jnp.log2(h)))
    h = jnp.minimum(h, span)
    return jnp.where(jnp.isfinite(h) & (h > 0), h, jnp.minimum(1e-6, span))


#: Longest first step the toolkit chooses (clock units).
FIRST_STEP_MAX = 0.01
#: Cap on h·ρ for the first step the toolkit chooses with a classical explicit solver
#: (Tsit5, Dopri5, Dopri8): h₀ ≤ `FIRST_STEP_STABILITY`/ρ, ρ the spectral radius of the
#: Hessian at θ(0) (`spectral_radius`), passed to `initial_step` as `stability`. Their
#: real stability intervals reach about −3.3 (Tsit5, Dopri5) and −6 (Dopri8); 2 leaves a
#: margin for a ρ estimated from below. Stabilized and implicit solvers: no cap. Later
#: steps are the step-size controller's.
FIRST_STEP_STABILITY = 2.0


def check_error_norm(error_norm) -> str:
    """`error_norm` validated: 'rms' or 'max' (`ERROR_NORMS`), else `ConfigError`."""
    if not isinstance(error_norm, str) or error_norm not in ERROR_NORMS:
        raise ConfigError(
            f"`error_norm` must be 'rms' (root mean square of the scaled error over the "
            f"state, diffrax's default) or 'max' (its largest component); got {error_norm!r}."
        )
    return error_norm


def error_norm_fn(error_norm: str) -> Callable[[Any], Any]:
    """The `norm` of `diffrax.PIDController` for an `error_norm` name: 'rms' →
    `optimistix.rms_norm` (the controller's default), 'max' → `optimistix.max_norm`."""
    return {"rms": optx.rms_norm, "max": optx.max_norm}[check_error_norm(error_norm)]


class PredictivePIDController(diffrax.PIDController):
    """diffrax's PID controller, except that an accepted step may be followed by a smaller
    one: the factor the controller computes is used on both sides of 1 (down to
    `factormin`), as in Hairer–Nørsett–Wanner's codes and Söderlind's digital filters.

    Why: diffrax clips the factor to ≥ 1 after an accepted step, so where the error grows
    smoothly from step to step the step is held until it fails, and the failed step is
    repeated — a whole step's evaluations lost. `ETDRK4` in the multi-stage net's plateau
    (m = 5000, rtol 1e-4, its scaled error 0.17, 0.26, 0.43, 0.69 at one h, then 1.07:
    rejected; three such rejections in 35 steps); with the factor applied both ways the
    step shrinks ahead of the growth (no rejection). A rejected step, the first step and
    every clip are diffrax's."""

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        keep, next_t0, next_t1, made_jump, state, result = super().adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )

        def scale(a, b, e):  # as diffrax's: the error over atol + rtol·max(|y0|, |y1|)
            with jax.numpy_dtype_promotion("standard"):
                return e / (self.atol + self.rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)))

        inv = 1.0 / jnp.asarray(self.norm(jax.tree_util.tree_map(scale, y0, y1_candidate, y_error)))
        k = self._get_error_order(error_order)
        factor = self.safety * inv ** ((self.icoeff + self.pcoeff + self.dcoeff) / k)
        for prev, coeff in zip(
            controller_state[:2],
            (-(self.pcoeff + 2 * self.dcoeff) / k, self.dcoeff / k),
            strict=True,
        ):
            if not (isinstance(coeff, (int, float)) and coeff == 0):
                factor = factor * prev**coeff
        # an error of 0 gives inv = ∞ and factor ∞: no shrink; a NaN error is not kept
        shrink = keep & (factor < 1)
        dt = (t1 - t0) * jnp.maximum(factor, self.factormin).astype(jnp.result_type(t1 - t0))
        if self.dtmin is not None:
            dt = jnp.maximum(dt, self.dtmin)
        next_t1 = jnp.where(shrink, next_t0 + dt, next_t1)
        return keep, next_t0, next_t1, made_jump, state, result


def pid_controller(
    rtol: float, atol: float, error_norm: str = "rms", step_ts=None, solver=None
) -> diffrax.AbstractAdaptiveStepSizeController:
    """The step-size controller of the toolkit's solves: diffrax's PID controller with the
    given tolerances and norm ('rms': built exactly as before the option existed, i.e.
    with diffrax's default norm). `step_ts` (None: none): times every solve must step to
    (diffrax's `ClipStepSizeController`), e.g. the save times of a solver whose dense
    output cannot be trusted between steps (`steps_to_saves`); without them the controller
    is the same object as before the option existed (same steps, bit for bit). `solver`
    (None: none): the solver it will drive; one that names its own
    `controller_coefficients` (pcoeff, icoeff) — `ETDRK4` — gets a PI controller with
    them that may also shrink the step after an accepted one (`PredictivePIDController`),
    every other solver diffrax's I-controller (the same object as without `solver`)."""
    coeffs = getattr(solver, "controller_coefficients", None)
    kw = {} if coeffs is None else dict(pcoeff=coeffs[0], icoeff=coeffs[1])
    if check_error_norm(error_norm) != "rms":
        kw["norm"] = error_norm_fn(error_norm)
    cls = diffrax.PIDController if coeffs is None else PredictivePIDController
    pid = cls(rtol=rtol, atol=atol, **kw)
    if step_ts is None:
        return pid
    return diffrax.ClipStepSizeController(pid, step_ts=step_ts)


def steps_to_saves(solver) -> bool:
    """Whether a solve with this solver (a name or a solver object) steps to its save
    times rather than interpolating between steps (`STEP_TO_SAVES`): Dopri8 (its diffrax
    interpolant is of lower order than its steps), the fourth-order stabilized solvers
    (ESERK4, ROCK4) and diffrax's implicit solvers with a cubic Hermite dense output
    (Kvaerno5). A cubic Hermite between long stiff steps multiplies the error of the stiff
    components at the step ends by up to about h·λ/4 (`benchmarks/results/dense_output.md`).
    RKC2 interpolates: its second-order steps are less accurate than its cubic Hermite,
    and its non-stiff steps are Tsit5 steps with Tsit5's interpolant."""
    if isinstance(solver, str):
        return solver in STEP_TO_SAVES
    if isinstance(solver, AbstractStabilizedSolver):
        return (solver.order(None) or 0) >= 4
    if isinstance(solver, diffrax.Dopri8):
        return True
    interp = getattr(solver, "interpolation_cls", None)
    hermite = diffrax.ThirdOrderHermitePolynomialInterpolation
    return interp is hermite or getattr(interp, "__self__", None) is hermite
