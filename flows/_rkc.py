"""Second-order damped Runge–Kutta–Chebyshev (RKC) solver for diffrax.

Gradient flows dθ/dt = −∇L(θ) have the Jacobian −∇²L: symmetric, with a real spectrum
that is ≤ 0 near minima. On such *mildly stiff* problems the step size of a classical
explicit method (Tsit5) is set by stability, h ≲ 3/ρ with ρ the spectral radius of the
Jacobian, not by accuracy. A stabilized explicit method with s stages has a real stability
interval [−β(s), 0] with β(s) ≈ 0.653·s², so a step of length h costs s ≈ sqrt(1.54·h·ρ)
vector-field evaluations: evaluations per unit time grow like sqrt(ρ) instead of ρ.

`RKC2` is the method of the RKC code (Sommeijer, Shampine & Verwer 1997) written as a
`diffrax.AbstractAdaptiveSolver`, so it plugs into `diffrax.diffeqsolve` with
`diffrax.PIDController` or `diffrax.ConstantStepSize`. Steps that are not
stability-limited (h ρ < 1.95) are taken by a non-stiff method instead (Bogacki–Shampine
3(2) or Tsit5; `RKC2.nonstiff`), so a flow with a fast accuracy-limited phase followed by
a stiff plateau gets the right tool for each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array, PyTree

__all__ = [
    "AbstractStabilizedSolver",
    "ERROR_NORMS",
    "RKC2",
    "RKCState",
    "rkc_eval_counts",
    "rkc_stability_bound",
]

# Damping parameter ε of the damped Chebyshev polynomials (RKC code: w0 = 1 + 2/(13 s²)).
# With this ε the stability interval is β(s) ≈ 0.653 s² and |P_s(z)| ≤ ~0.95 on most of
# [−β(s), 0], which keeps the internal stages away from the boundary of stability.
_EPS = 2.0 / 13.0
# 1/0.653 ≈ 1.54: the stage formula s = 1 + floor(sqrt(1 + 1.54 h ρ)) of the RKC code
# guarantees β(s) ≥ h ρ (checked numerically for h ρ ∈ [0, 1e5], see tests/test_rkc.py).
_STAGE_CONST = 1.54
# The stage formula gives s = 2 exactly when h ρ < 3/1.54 ≈ 1.95: such steps are not
# stability-limited, and are taken by the `nonstiff` method instead, whose real stability
# interval (Bogacki–Shampine [−2.51, 0], Tsit5 ≈ [−3.5, 0]) still contains h ρ with room for
# the safety factor.
_NONSTIFF_MAX_HRHO = 3.0 / _STAGE_CONST
NONSTIFF_METHODS = ("bs3", "tsit5", "none")
# diffrax's own implementations; evaluations per step (FSAL) and rows of their dense stages k
_NONSTIFF = {"bs3": diffrax.Bosh3(), "tsit5": diffrax.Tsit5()}
_NONSTIFF_EVALS = {"bs3": 3, "tsit5": 6}
_NONSTIFF_K_ROWS = {"bs3": 4, "tsit5": 7, "none": 2}
# Real stability intervals [−β, 0] of the non-stiff methods (|R(z)| ≤ 1; computed from
# diffrax's tableaus in tests/test_rkc.py): Bogacki–Shampine 2.5127, Tsit5 3.5068. Where a
# stabilized step would cost more per unit time, non-stiff steps go past the switch up to
# h ρ < 0.9 β (ρ carries its own safety factor): `AbstractStabilizedSolver._cap_growth`.
_NONSTIFF_STABILITY = {"bs3": 2.5127, "tsit5": 3.5068}
_NONSTIFF_REACH = {k: 0.9 * v for k, v in _NONSTIFF_STABILITY.items()}
# A step whose h ρ needs more than `max_stages` is split into equal sub-steps (at most this
# many; beyond, the step fails and the controller shrinks h).
_MAX_SUBSTEPS = 10_000
# Tolerance proportionality of RKC2 (see `RKC2`, "Error control"): its RKC steps are
# controlled to rtol·sqrt(rtol/_PROP_RTOL), so the global error of the second-order method
# (∝ tol^{2/3} under local error control) follows rtol itself.
_PROP_RTOL = 1e-3


class RKCState(eqx.Module):
    """Solver state carried by `RKC2` between steps (every leaf is an array, because diffrax
    selects the old or new state leaf-wise when a step is rejected).

    - `f0`: F(t_n, y_n), the vector field at the start of the next step (FSAL: it is the
      F(y_{n+1}) evaluated for the error estimate of the previous step).
    - `rho`: the spectral-radius bound used for the stage count (safety factor and floor
      included; or the user-supplied value).
    - `v`: unit-norm dominant-eigenvector estimate (pytree like y), the warm start for the
      next power iteration; `None` when a `spectral_radius` callable is used.
    - `n_steps`: number of accepted steps so far.
    - `vf_evals`: vector-field evaluations along the accepted path (including `init`).
    - `jvp_evals`: Jacobian–vector products (power iteration), counted separately: each one
      is a `jax.jvp` of the vector field, i.e. one primal plus one tangent evaluation.
    - `stages`: stage count s of the last accepted step (for a non-stiff step: its
      evaluations, 3 for Bogacki–Shampine, 6 for Tsit5).
    - `nonstiff_steps`: how many of the accepted steps were non-stiff steps (`nonstiff`).
    - `redos`: accepted steps that were recomputed with a fresh spectral-radius estimate
      because the first try was not finite or its secant quotient
      −⟨F(y₁) − F(y₀), y₁ − y₀⟩/‖y₁ − y₀‖² exceeded the ρ used (a stale ρ, e.g. under
      progressive sharpening).
    - `substeps`: accepted steps that needed more than `max_stages` and were split.
    - `nonstiff_reach`: the next step is non-stiff where h ρ is below this (the switch
      `_nonstiff_max_hrho`, or past it up to the non-stiff method's stability reach when
      the last non-stiff step predicted the stabilized step to be the costlier one).
    """

    f0: PyTree[Array]
    rho: Array
    v: PyTree[Array] | None
    n_steps: Array
    vf_evals: Array
    jvp_evals: Array
    stages: Array
    nonstiff_steps: Array
    redos: Array
    substeps: Array
    nonstiff_reach: Array


def _tree_norm(tree: PyTree[Array]) -> Array:
    leaves = jtu.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves))


def _secant(y0, f0, y1, f1, fdt):
    """−⟨ΔF, Δy⟩/‖Δy‖²: the Rayleigh quotient of −J along a step's increment (for a
    symmetric J ≤ ρ); an unstable mode makes Δy its eigenvector, q ≈ |λ| > ρ."""
    dy = jtu.tree_map(lambda a, b: a - b, y1, y0)
    df = jtu.tree_map(lambda a, b: a - b, f1, f0)
    dots = [
        jnp.sum(a * b).astype(fdt)
        for a, b in zip(jtu.tree_leaves(df), jtu.tree_leaves(dy), strict=True)
    ]
    num = -jnp.sum(jnp.stack(dots))
    den = (_tree_norm(dy) ** 2).astype(fdt)
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


def _tree_scale(tree: PyTree[Array], c: Array) -> PyTree[Array]:
    return jtu.tree_map(lambda x: x * c.astype(x.dtype), tree)


def _start_vector(y: PyTree[Array]) -> PyTree[Array]:
    """Deterministic pseudo-random unit vector shaped like `y` (fixed key; one fold-in per
    leaf), so that runs are reproducible and the start is almost surely not orthogonal to
    the dominant eigenvector."""
    leaves, treedef = jtu.tree_flatten(y)
    key = jax.random.PRNGKey(0)
    vs = [
        jax.random.normal(jax.random.fold_in(key, i), jnp.shape(x), jnp.result_type(x))
        for i, x in enumerate(leaves)
    ]
    v = jtu.tree_unflatten(treedef, vs)
    return _tree_scale(v, 1.0 / _tree_norm(v))


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


class _RKCInterpolation(diffrax.AbstractLocalInterpolation):
    """Dense output of one `RKC2` step: cubic Hermite from y0, y1 and k = (h F0, …, h F1)
    (only the first and last rows are used), or Tsit5's own interpolant where `tsit5`."""

    t0: Any
    t1: Any
    y0: PyTree[Array]
    y1: PyTree[Array]
    k: PyTree[Array]
    tsit5: Array

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return jtu.tree_map(lambda a, b: a - b, self.evaluate(t1), self.evaluate(t0))
        kw = dict(t0=self.t0, t1=self.t1, y0=self.y0, y1=self.y1, k=self.k)
        herm = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k(**kw).evaluate(t0)
        if jtu.tree_leaves(self.k)[0].shape[0] != _NONSTIFF_K_ROWS["tsit5"]:  # no Tsit5 steps
            return herm
        ts = _NONSTIFF["tsit5"].interpolation_cls(**kw).evaluate(t0)
        return jtu.tree_map(lambda a, b: jnp.where(self.tsit5, a, b), ts, herm)


def _hermite_k(hf0, hf1, rows: int):
    """(h F0, 0, …, 0, h F1) with `rows` rows: the dense-output stages of an RKC step
    (cubic Hermite uses the first and last), shaped like those of the solver's non-stiff
    steps (lax.cond needs both branches to return the same shapes)."""
    return jtu.tree_map(
        lambda a, b: jnp.stack([a] + [jnp.zeros_like(a)] * (rows - 2) + [b]), hf0, hf1
    )


#: Norms of the scaled error that the step-size controller and the stabilized solvers can
#: use (`error_norm`): 'rms' (diffrax's default, `optimistix.rms_norm`) or 'max'
#: (`optimistix.max_norm`).
ERROR_NORMS = ("rms", "max")


def _error_norm(y_error, y0, y1, tolerances, norm: str = "rms") -> Array:
    """Norm of error / (atol + rtol max(|y0|, |y1|)) over the whole state, as
    diffrax.PIDController computes it: 'rms' (root mean square; the controller's default
    norm, `optimistix.rms_norm`) or 'max' (largest component; `optimistix.max_norm`)."""
    rtol, atol = tolerances
    scaled = [
        e / (atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)))
        for e, a, b in zip(
            jtu.tree_leaves(y_error), jtu.tree_leaves(y0), jtu.tree_leaves(y1), strict=True
        )
    ]
    if norm == "max":
        return jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in scaled if jnp.size(x) > 0]))
    if norm != "rms":
        raise ValueError(f"`error_norm` must be one of {ERROR_NORMS}; got {norm!r}.")
    sq = [jnp.sum(x**2) for x in scaled]
    size = sum(jnp.size(e) for e in jtu.tree_leaves(y_error))
    return jnp.sqrt(sum(sq) / size)


def _nonstiff_step(
    method, terms, t0, t1, y0, args, f0, tolerances, error_order=3, error_norm="rms"
):
    """One step of diffrax's Bosh3 ('bs3') or Tsit5 ('tsit5') from the FSAL value f0.
    Returns (y1, F(t1, y1), dense stages k, error).

    Bosh3's error estimate is O(h³) like RKC2's and is returned as is. Tsit5's is O(h⁵):
    its size e (the `error_norm` — 'rms' or 'max' — of error / (atol + rtol max(|y0|,
    |y1|)), as diffrax.PIDController computes it with that norm) is reported as e^{3/5}, so
    the controller, built for RKC2's error order 3, accepts iff e ≤ 1 and scales h by
    e^{−1/5}, as it would for Tsit5 (error order 5). (For a controller of another
    `error_order` q: e^{q/5}.) Both norms are homogeneous, so scaling the error by a
    scalar scales e by the same factor."""
    y1, y_error, dense, state, _ = _NONSTIFF[method].step(
        terms, t0, t1, y0, args, (jnp.asarray(False), f0), False
    )
    if method == "tsit5":
        e = _error_norm(y_error, y0, y1, tolerances, error_norm)
        y_error = _tree_scale(y_error, jnp.where(e > 0, e ** (error_order / 5.0 - 1.0), 1.0))
    return y1, state[1], dense["k"], y_error


def _rkc_error(y0, y1, hf0, hf1):
    """RKC's O(h³) local-error estimate 0.8 (y_n − y_{n+1}) + 0.4 h (F_n + F_{n+1})."""
    return jtu.tree_map(lambda a, b, c, d: 0.8 * (a - b) + 0.4 * (c + d), y0, y1, hf0, hf1)


def _tree_all_finite(tree) -> Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]))


def _tree_where(pred, a, b):
    return jtu.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


class AbstractStabilizedSolver(diffrax.AbstractAdaptiveSolver):
    """What the stabilized explicit solvers (`RKC2`, `flows.ESERK4`) share: the spectral
    radius by Hessian-vector (Jacobian-vector) power iteration, the non-stiff switch, steps
    split into sub-steps when h ρ needs more than `max_stages`, a secant check that
    recomputes a step with a fresh ρ when the stored one is stale, and a non-finite step
    never reported as successful. A member provides its stabilized step for one
    (sub-)step (`_core_step`), the largest h ρ that `max_stages` stabilizes
    (`_max_hrho`) and its orders; for the predictive switch (`RKC2`), an error estimator
    that needs only a step's end points (`_endpoint_error`) and the evaluations of a
    stabilized step (`_stage_evals`). ESERK4's estimator needs its inner steps, so it has
    none: its `predictive_switch` does nothing."""

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., _RKCInterpolation]] = _RKCInterpolation

    max_stages: int = eqx.field(static=True, default=200)
    rho_every: int = eqx.field(static=True, default=50)
    power_iters: int = eqx.field(static=True, default=3)
    init_power_iters: int = eqx.field(static=True, default=30)
    rho_safety: float = 1.2
    rho_floor: float = 1e-8
    spectral_radius: Callable[[Any, Any, Any], Any] | None = None
    nonstiff: str = eqx.field(static=True, default="bs3")
    tolerances: tuple[Any, Any] | None = None
    proportional: bool = eqx.field(static=True, default=True)
    error_norm: str = eqx.field(static=True, default="rms")
    predictive_switch: bool = eqx.field(static=True, default=True)

    # --- what a member provides -------------------------------------------------------

    _nonstiff_methods: ClassVar[tuple[str, ...]] = NONSTIFF_METHODS
    _nonstiff_max_hrho: ClassVar[float] = _NONSTIFF_MAX_HRHO
    # exponent q of the tolerance transformation: the stabilized steps' error is
    # multiplied by (rtol / _PROP_RTOL)^(−q) when `tolerances` is given and `proportional`
    _prop_exponent: ClassVar[float] = 0.0
    # factor on the stabilized step's error predicted from a non-stiff step's end points:
    # on the multi-stage net (m = 1000, max norm, rtol 1e-6) the RKC step's own estimate
    # at h ρ ≈ 2–2.5 was 1.2–2.2× the prediction (with 1: 143 of 545 attempts still
    # rejected, 2577 evaluations; with 2: 9 of 403, 2121; with 4: 8 of 410, 2364 — measured
    # before non-stiff steps went past the switch; with that as well, 2: 10 of 306, 1596)
    _predict_margin: ClassVar[float] = 2.0

    def _max_hrho(self) -> float:
        """Largest h ρ that one (sub-)step with ≤ `max_stages` stages stabilizes."""
        raise NotImplementedError

    def _core_step(self, terms, t0, t1, y0, args, f0, control, rho):
        """One stabilized step over [t0, t1] (h ρ ≤ `_max_hrho()`): (y1, F(t1, y1), error
        estimate, evaluations)."""
        raise NotImplementedError

    def _stage_evals(self, hrho: Array) -> Array:
        """Evaluations of one stabilized step at h ρ = `hrho` (used with `_endpoint_error`)."""
        raise NotImplementedError

    def _endpoint_error(self, y0, y1, hf0, hf1) -> PyTree[Array] | None:
        """The error estimate a stabilized step from y0 to y1 would report, if the member's
        estimator uses only the end points (y0, y1, h F(y0), h F(y1)) — it then predicts,
        from a non-stiff step's end points, whether a stabilized step would be accepted
        (see `_attempt`). None (the default): no prediction."""
        return None

    def error_order(self, terms):
        raise NotImplementedError

    # --- checks ------------------------------------------------------------------------

    def __check_init__(self):
        if self.max_stages < 2:
            raise ValueError(f"`max_stages` must be ≥ 2; got {self.max_stages}.")
        if self.rho_every < 1:
            raise ValueError(f"`rho_every` must be ≥ 1; got {self.rho_every}.")
        if self.power_iters < 1 or self.init_power_iters < 1:
            raise ValueError("`power_iters` and `init_power_iters` must be ≥ 1.")
        if self.nonstiff not in self._nonstiff_methods:
            raise ValueError(
                f"`nonstiff` must be one of {self._nonstiff_methods}; got {self.nonstiff!r}."
            )
        if self.error_norm not in ERROR_NORMS:
            raise ValueError(f"`error_norm` must be one of {ERROR_NORMS}; got {self.error_norm!r}.")
        if self.nonstiff == "tsit5" and self.tolerances is None:
            raise ValueError(
                "`nonstiff='tsit5'` needs `tolerances=(rtol, atol)`, those of the step-size "
                "controller (its error is rescaled to the controller's error order)."
            )

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    # --- spectral radius -------------------------------------------------------------

    def _power_iteration(self, terms, t, y, args, v, n_iters: int):
        """`n_iters` steps of v ← J v / ‖J v‖ from the unit vector `v`; returns (‖J v‖
        of the last iteration, new unit v). Every iteration is one `jax.jvp`."""
        fn = lambda y_: terms.vf(t, y_, args)

        def body(_, carry):
            v, _ = carry
            _, jv = jax.jvp(fn, (y,), (v,))
            nrm = _tree_norm(jv).astype(jnp.result_type(float))
            # A zero product (J v = 0) keeps the old direction instead of dividing by 0.
            ok = nrm > 0
            v_new = jtu.tree_map(
                lambda a, b: jnp.where(ok, a / jnp.where(ok, nrm, 1).astype(a.dtype), b), jv, v
            )
            return v_new, nrm

        nrm0 = jnp.zeros((), jnp.result_type(float))
        v, nrm = jax.lax.fori_loop(0, n_iters, body, (v, nrm0))
        return nrm, v

    def _bound(self, estimate):
        return self.rho_safety * estimate + self.rho_floor

    def _error_scale(self):
        """Factor on the error of the stabilized steps (tolerance proportionality)."""
        if self.tolerances is None or not self.proportional or self._prop_exponent == 0.0:
            return 1.0
        rtol = jnp.asarray(self.tolerances[0], jnp.result_type(float))
        return (rtol / _PROP_RTOL) ** (-self._prop_exponent)

    # --- diffrax interface -------------------------------------------------------------

    def init(self, terms, t0, t1, y0, args) -> RKCState:
        f0 = terms.vf(t0, y0, args)
        zero = jnp.zeros((), jnp.int32)
        if self.spectral_radius is None:
            est, v = self._power_iteration(
                terms, t0, y0, args, _start_vector(y0), self.init_power_iters
            )
            rho = self._bound(est)
            jvps = jnp.asarray(self.init_power_iters, jnp.int32)
        else:
            rho = jnp.asarray(self.spectral_radius(t0, y0, args), jnp.result_type(float))
            v = None
            jvps = zero
        return RKCState(
            f0=f0,
            rho=jnp.asarray(rho, jnp.result_type(float)),
            v=v,
            n_steps=zero,
            vf_evals=jnp.asarray(1, jnp.int32),
            jvp_evals=jvps,
            stages=zero,
            nonstiff_steps=zero,
            redos=zero,
            substeps=zero,
            nonstiff_reach=jnp.asarray(self._nonstiff_max_hrho, jnp.result_type(float)),
        )

    def _attempt(self, terms, t0, t1, y0, args, f0, control, h, rho, reach):
        """The step from (t0, y0) with spectral-radius bound `rho`: non-stiff method where
        h ρ < `reach` (`RKCState.nonstiff_reach`), else the stabilized step, split into n
        equal sub-steps when h ρ > `_max_hrho()`. Returns (y1, f1, dense k, error,
        evaluations, non-stiff?, n, too many sub-steps?, the next step's reach)."""
        fdt = jnp.result_type(float)
        rho = jnp.where(jnp.isfinite(rho), rho, 0.0)
        n_real = jnp.ceil(h * rho / self._max_hrho())
        too_many = n_real > _MAX_SUBSTEPS
        n_sub = jnp.clip(n_real, 1, _MAX_SUBSTEPS).astype(jnp.int32)
        rows = _NONSTIFF_K_ROWS[self.nonstiff]
        if self.nonstiff == "none":
            use_nonstiff = jnp.zeros((), bool)
        else:
            use_nonstiff = h * rho < reach
        scale = self._error_scale()

        def stabilized():
            dt = (t1 - t0) / n_sub.astype(jnp.result_type(t0, t1))
            sub_control = terms.contr(t0, t0 + dt)

            def body(carry):
                i, y, f, err, evals = carry
                ta = t0 + i.astype(dt.dtype) * dt
                tb = jnp.where(i + 1 == n_sub, t1, ta + dt)
                y_new, f_new, e, ev = self._core_step(terms, ta, tb, y, args, f, sub_control, rho)
                err = jtu.tree_map(lambda a, b: a + jnp.abs(b), err, e)
                return i + 1, y_new, f_new, err, evals + ev

            zeros = jtu.tree_map(jnp.zeros_like, y0)
            init = (jnp.zeros((), jnp.int32), y0, f0, zeros, jnp.zeros((), jnp.int32))
            _, y1, f1, err, evals = jax.lax.while_loop(lambda c: c[0] < n_sub, body, init)
            err = _tree_scale(err, jnp.asarray(scale, fdt))
            if self.tolerances is not None and self.nonstiff != "none":
                # A failing stabilized step close to the non-stiff switch: report the error
                # that makes the controller retry at the switch (h ρ just below it, a
                # non-stiff step) rather than far below it. Otherwise, with the transformed
                # tolerance, a failed step near the switch sent h down by up to 5× into
                # needlessly accurate non-stiff steps (RKC2 on the Brusselator at rtol 1e-7:
                # err/rtol 4e-6, half the steps rejected).
                e = _error_norm(err, y0, y1, self.tolerances, self.error_norm)
                h_sw = 0.95 * self._nonstiff_max_hrho / jnp.maximum(rho, 1e-300)
                q = self.error_order(terms)
                e_target = (0.9 * h / h_sw) ** q  # PID (I) factor 0.9 e^{-1/q} → h_sw
                use = (e > 1.0) & (e_target > 1.0) & (e_target < e)
                err = _tree_scale(err, jnp.where(use, e_target / jnp.where(use, e, 1.0), 1.0))
            k = _hermite_k(terms.prod(f0, control), terms.prod(f1, control), rows)
            return y1, f1, k, err, evals, jnp.asarray(self._nonstiff_max_hrho, fdt)

        if self.nonstiff == "none":
            y1, f1, k, y_error, evals, next_reach = stabilized()
        else:

            def nonstiff():
                y1, f1, k, err = _nonstiff_step(
                    self.nonstiff,
                    terms,
                    t0,
                    t1,
                    y0,
                    args,
                    f0,
                    self.tolerances,
                    self.error_order(terms),
                    self.error_norm,
                )
                pred = self._endpoint_error(
                    y0, y1, terms.prod(f0, control), terms.prod(f1, control)
                )
                next_reach = jnp.asarray(self._nonstiff_max_hrho, fdt)
                if self.tolerances is not None and self.predictive_switch and pred is not None:
                    err, next_reach = self._cap_growth(terms, y0, y1, err, pred, h, rho, scale)
                evals = jnp.asarray(_NONSTIFF_EVALS[self.nonstiff], jnp.int32)
                return y1, f1, k, err, evals, next_reach

            # Under vmap with a batched predicate, cond becomes select: both branches run.
            y1, f1, k, y_error, evals, next_reach = jax.lax.cond(use_nonstiff, nonstiff, stabilized)
        return y1, f1, k, y_error, evals, use_nonstiff, n_sub, too_many, next_reach

    def _cap_growth(self, terms, y0, y1, err, pred, h, rho, scale):
        """For an accepted non-stiff step: the error it reports and the h ρ below which the
        next step is non-stiff (`RKCState.nonstiff_reach`), so that the controller's next
        h is neither one where a stabilized step is predicted to fail nor one where it would
        cost more per unit time than non-stiff steps.

        Why: past the switch (h ρ ≥ `_nonstiff_max_hrho`) the next step was always a
        stabilized one, controlled to its own (for RKC2: the transformed, tighter)
        tolerance. The non-stiff step's small error let the controller grow h past the
        switch; where the stabilized step then failed, the near-switch rule sent h back
        below the switch, and the two alternated — every accepted step paid for a rejected
        one (RKC2, max norm, multi-stage m = 1000, rtol 1e-6: 259 of 660 attempts).

        How: the stabilized step's estimator evaluated on this step's end points, `pred`
        (no extra evaluation), times `_predict_margin`, gives its error e_s at this h;
        with error ∝ h^q the controller's rule 0.9 e^{−1/q} gives the largest h where it
        would be accepted, h_s = 0.9 h e_s^{−1/q}. Non-stiff steps can go up to h_n =
        min(0.9 h e^{−1/q}, 0.95 × `_NONSTIFF_REACH` / ρ) (their own error e; their real
        stability interval with a 10 % margin). If h_s lies past the switch and covers more
        time per evaluation (h_s / `_stage_evals`(h_s ρ) ≥ h_n / evaluations of a
        non-stiff step), the next h is capped at h_s and the switch stays at
        `_nonstiff_max_hrho` (a stabilized step follows); otherwise it is capped at 0.95 ×
        the reach and non-stiff steps continue up to the reach. The cap is imposed by
        reporting the error for which the controller proposes it (an error that already
        proposes less is reported as it is); that error is ≤ 1 (h lies below the switch
        or the reach, the cap at or above 0.95 of them): the step remains accepted."""
        q = self.error_order(terms)
        fdt = jnp.result_type(float)
        e = _error_norm(err, y0, y1, self.tolerances, self.error_norm)
        e_stab = self._predict_margin * _error_norm(
            _tree_scale(pred, scale), y0, y1, self.tolerances, self.error_norm
        )
        rho = jnp.maximum(rho, 1e-300)
        h_sw = self._nonstiff_max_hrho / rho
        h_reach = 0.95 * _NONSTIFF_REACH[self.nonstiff] / rho
        h_ns = jnp.minimum(0.9 * h * jnp.where(e > 0, e, 1e-300) ** (-1.0 / q), h_reach)
        h_st = 0.9 * h * jnp.where(e_stab > 0, e_stab, 1e-300) ** (-1.0 / q)
        rate_ns = h_ns / _NONSTIFF_EVALS[self.nonstiff]
        stab = (h_st >= h_sw) & (h_st / self._stage_evals(h_st * rho) >= rate_ns)
        h_cap = jnp.where(stab, h_st, h_reach)
        reach = jnp.where(stab, self._nonstiff_max_hrho, _NONSTIFF_REACH[self.nonstiff])
        e_cap = jnp.minimum((0.9 * h / h_cap) ** q, 1.0)
        use = (e <= 1.0) & (e > 0) & (e_cap > e)
        err = _tree_scale(err, jnp.where(use, e_cap / jnp.where(use, e, 1.0), 1.0))
        return err, jnp.asarray(reach, fdt)

    def _spectral_radius_at(self, terms, t0, y0, args, st: RKCState, jvp_evals):
        """(ρ, power-iteration vector, Hessian-vector products so far) at (t0, y0): the
        user's bound, or the stored estimate refreshed every `rho_every` steps."""
        fdt = jnp.result_type(float)
        rho, v = st.rho, st.v
        if self.spectral_radius is not None:
            rho = jnp.asarray(self.spectral_radius(t0, y0, args), fdt)
        else:
            due = (st.n_steps > 0) & (st.n_steps % self.rho_every == 0)
            # Under vmap `due` may differ across the batch; run the branch if any member
            # needs it (unvmap_any avoids cond → select evaluating it always) and keep
            # the new values only where due.
            new_est, new_v = jax.lax.cond(
                eqxi.unvmap_any(due),
                lambda: self._power_iteration(terms, t0, y0, args, v, self.power_iters),
                lambda: (st.rho, v),
            )
            rho = jnp.where(due, self._bound(new_est), st.rho)
            v = _tree_where(due, new_v, v)
            jvp_evals = jvp_evals + jnp.where(due, self.power_iters, 0).astype(jnp.int32)
        return rho, v, jvp_evals

    def step(self, terms, t0, t1, y0, args, solver_state: RKCState, made_jump):
        st = solver_state
        vf_evals = st.vf_evals
        jvp_evals = st.jvp_evals
        fdt = jnp.result_type(float)

        # FSAL value F(t0, y0) is invalid after a discontinuity in the vector field.
        f0 = st.f0
        if made_jump is not False:
            recompute = eqxi.unvmap_any(made_jump)
            f0 = jax.lax.cond(recompute, lambda: terms.vf(t0, y0, args), lambda: f0)
            vf_evals = vf_evals + jnp.asarray(recompute, jnp.int32)

        rho, v, jvp_evals = self._spectral_radius_at(terms, t0, y0, args, st, jvp_evals)

        control = terms.contr(t0, t1)
        h = jnp.abs(jnp.asarray(control, fdt))
        reach = st.nonstiff_reach

        def secant(y1, f1):
            return _secant(y0, f0, y1, f1, fdt)

        # First try with the stored ρ; a second one with a fresh estimate when the first
        # is not finite or its secant quotient −⟨ΔF, Δy⟩/‖Δy‖² (≤ ρ along the step for a
        # symmetric, autonomous field) exceeds the ρ used while the
        # step fails: the stored ρ may be stale and the step unstable. A while loop keeps
        # one copy of the step in the graph.
        def body(carry):
            i, rho_i, v_i, jvps, redo, prev = carry
            again = i >= 1
            y1p, f1p = prev[0], prev[1]

            def reestimate():
                finite = _tree_all_finite(y1p)
                rho_min = jnp.where(finite, rho_i, 4 * rho_i)
                if self.spectral_radius is not None:
                    sec = secant(y1p, f1p)
                    sec = jnp.where(jnp.isfinite(sec), sec, 0.0)
                    rho_new = jnp.maximum(self.rho_safety * sec, 2 * rho_i)
                    return jnp.maximum(rho_new, rho_min), v_i, jnp.zeros((), jnp.int32)
                # warm start from the step's increment: dominated by the unstable mode
                dy = jtu.tree_map(lambda a, b: a - b, y1p, y0)
                ndy = _tree_norm(dy).astype(fdt)
                ok = finite & (ndy > 0)
                start = _tree_where(ok, _tree_scale(dy, 1.0 / jnp.where(ok, ndy, 1.0)), v_i)
                est, v_new = self._power_iteration(
                    terms, t0, y0, args, start, self.init_power_iters
                )
                return (
                    jnp.maximum(self._bound(est), rho_min),
                    v_new,
                    jnp.asarray(self.init_power_iters, jnp.int32),
                )

            rho_r, v_r, j_r = jax.lax.cond(
                eqxi.unvmap_any(again), reestimate, lambda: (rho_i, v_i, jnp.zeros((), jnp.int32))
            )
            rho_i = jnp.where(again, rho_r, rho_i)
            v_i = _tree_where(again, v_r, v_i) if v_i is not None else None
            jvps = jvps + jnp.where(again, j_r, 0)
            out = self._attempt(terms, t0, t1, y0, args, f0, control, h, rho_i, reach)
            y1, f1, _, err = out[:4]
            bad = ~(_tree_all_finite(y1) & _tree_all_finite(err))
            # unstable only beyond the real stability bound of the step taken: h ρ for a
            # stabilized step (β(s) ≥ h ρ), ≈ 2.5 for a non-stiff one (Bosh3 2.51, Tsit5
            # ≈ 3.3), with a 10 % margin (the quotient is only an estimate)
            bound = jnp.where(out[5], jnp.maximum(h * rho_i, 2.5), h * rho_i)
            suspect = h * secant(y1, f1) > 1.1 * bound
            if self.tolerances is not None:
                # a step the controller accepts is kept (a non-autonomous field also
                # makes the secant large); only a failing one may be unstable
                suspect = suspect & (
                    _error_norm(err, y0, y1, self.tolerances, self.error_norm) > 1.0
                )
            redo = bad | suspect
            return i + 1, rho_i, v_i, jvps, redo, out

        def cond(carry):
            i, redo = carry[0], carry[4]
            return (i == 0) | ((i == 1) & redo)

        # the first pass, traced once to build the carry's shapes (no evaluation: eval_shape)
        proto = jax.eval_shape(
            lambda: self._attempt(terms, t0, t1, y0, args, f0, control, h, rho, reach)
        )
        dummy = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), proto)
        init = (
            jnp.zeros((), jnp.int32),
            rho,
            v,
            jnp.zeros((), jnp.int32),
            jnp.asarray(False),
            dummy,
        )
        n_try, rho, v, jvps, _, out = jax.lax.while_loop(cond, body, init)
        y1, f1, k, y_error, evals, use_nonstiff, n_sub, too_many, next_reach = out
        jvp_evals = jvp_evals + jvps
        vf_evals = vf_evals + evals

        bad = ~(_tree_all_finite(y1) & _tree_all_finite(y_error)) | too_many
        y_error = jtu.tree_map(lambda e: jnp.where(bad, jnp.inf, e), y_error)
        result = diffrax.RESULTS.where(
            too_many,
            diffrax.RESULTS.max_steps_reached,
            diffrax.RESULTS.where(
                bad,
                diffrax.RESULTS.nonfinite,  # pyright: ignore[reportArgumentType]
                diffrax.RESULTS.successful,
            ),
        )
        tsit5 = use_nonstiff & (self.nonstiff == "tsit5")
        dense_info = dict(y0=y0, y1=y1, k=k, tsit5=tsit5)
        new_state = RKCState(
            f0=f1,
            rho=rho,
            v=v,
            n_steps=st.n_steps + 1,
            vf_evals=vf_evals,
            jvp_evals=jvp_evals,
            stages=evals.astype(jnp.int32),
            nonstiff_steps=st.nonstiff_steps + use_nonstiff.astype(jnp.int32),
            redos=st.redos + (n_try > 1).astype(jnp.int32),
            substeps=st.substeps + (n_sub > 1).astype(jnp.int32),
            nonstiff_reach=next_reach,
        )
        return y1, y_error, dense_info, new_state, result


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
    and no step is rejected for it. (Before: an infinite error made the PID controller cut
    h by 5 and grow it again, cycling rejections — on the heat equation with forcing, N =
    1000, rtol 1e-3, 424 of 845 steps were rejected.) Beyond 10 000 sub-steps the step
    fails (infinite error, `RESULTS.max_steps_reached`).

    **Error estimate** (as in the RKC paper and code): est = 0.8 (y_n − y_{n+1}) + 0.4 h (F_n +
    F_{n+1}), an O(h³) local-error estimate; hence `error_order` = 3 (diffrax's PID
    controller uses factor = err^(−1/error_order), the exponent of h in the local error).
    F_{n+1} = F(t_{n+1}, y_{n+1}) is carried in the state and reused as F_0 of the next
    step (first-same-as-last), so a step costs exactly s vector-field evaluations.

    **Error control and tolerance proportionality.** With local error control a method of
    order p has global error ∝ tol^{p/(p+1)}: for RKC2, tol^{2/3} (measured: rtol^0.6 on
    the heat equation, the Brusselator and a quartic flow, err/rtol from 0.3–1 at rtol 1e-3
    to 23–57 at 1e-8). When `tolerances=(rtol, atol)` is given and `proportional` (the
    default), the error of the RKC steps is multiplied by sqrt(1e-3 / rtol), i.e. they are
    controlled to tol′ = rtol·sqrt(rtol/1e-3) ∝ rtol^{3/2}, so the global error ∝ tol′^{2/3}
    ∝ rtol (the tolerance transformation of RADAU5, which controls to rtol^{2/3} for the
    same reason). Measured err/rtol: `benchmarks/results/work_precision_stiff.md`. The
    non-stiff (Bogacki–Shampine, Tsit5) steps propagate their higher-order solution and
    keep their own error.

    **Non-stiff steps (`nonstiff`).** Where h ρ < 3/1.54 ≈ 1.95 the stage formula asks
    for the minimum s = 2: the step is limited by accuracy, not stability, and a
    second-order method is the wrong tool. Such a step is taken instead by

    - `'bs3'` (default): diffrax's `Bosh3`, the Bogacki–Shampine 3(2) pair (3 evaluations,
      FSAL; third-order solution, the embedded second-order one gives an O(h³) error
      estimate, so `error_order` = 3 holds for both kinds of step and the controller needs
      nothing more; real stability interval [−2.51, 0] ⊃ [−h ρ, 0]);
    - `'tsit5'`: diffrax's `Tsit5`, Tsitouras 5(4) (6 evaluations, FSAL). Its error
      estimate is O(h⁵), but the controller applies one `error_order` (3) to every step,
      so the step reports its error e (in the controller's norm) as e^{3/5}: accepted iff
      e ≤ 1, and the PID controller's factor e^{−1/3·3/5} = e^{−1/5} is Tsit5's own. That needs the
      controller's `tolerances=(rtol, atol)` and its norm (`error_norm`), which is what
      `flows.simulate` uses (and passes);
    - `'none'`: plain RKC2 everywhere (the tests of its order and stability polynomial use
      it).

    **Predictive switch** (`predictive_switch`, with `tolerances`). The RKC steps are
    controlled to the transformed tolerance, the non-stiff steps to rtol itself; near
    the switch at tight rtol that made the two alternate: an accepted non-stiff step
    (small error) let the controller grow h past the switch, the RKC step there failed,
    the controller went back below the switch, and again (heat N = 200 at rtol 1e-8:
    4123 of 8059 steps rejected; multi-stage m = 1000 in the max norm at rtol 1e-6: 259
    of 660 attempts). After each accepted non-stiff step, RKC's estimator on that step's
    own end points, 0.8 (y_n − y_{n+1}) + 0.4 h (F_n + F_{n+1}) (no evaluation; it
    measures h³ y‴/15 of the solution, as on an RKC step), doubled for safety, predicts
    the RKC step's error and so the largest h it would pass, h_s. The next h is capped
    at h_s when that lies past the switch and covers more time per evaluation than the
    non-stiff method can (an RKC step follows); otherwise the non-stiff steps continue,
    past the switch up to 0.9 × their real stability interval (Bogacki–Shampine 2.51,
    Tsit5 3.51) — they are accurate enough there and no RKC step would be cheaper. The
    cap is imposed through the error the step reports (still ≤ 1: it stays accepted).
    Measured (`tests/test_solvers_tolerance.py`, `benchmarks/results/
    work_precision_stiff.md`): rejected steps from 25–66 % to ≤ 2 %, the same error,
    1.2–1.7× fewer evaluations on the accepted path at rtol ≤ 1e-6.

    On the multi-stage default (m = 5000, t = 20) the fast first stage (t < 0.5) is
    accuracy-limited and the plateau after it stability-limited (ρ ≈ 37). At rtol 1e-6 plain
    RKC2 spent ~270 two-stage steps on the first part (849 evaluations on the accepted
    path, error 5.4e-5 against Dopri8 at rtol 1e-11); 'bs3' ~126 steps there (705, error
    5.2e-5); 'tsit5' ~30 (≈ 500; with rejected steps and Hessian-vector products 662,
    error 3.5e-5; at rtol 1e-5: 576, error 5.2e-5 — benchmarks/results/
    work_precision_multistage.md). The error is set by the RKC steps of the plateau.

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
    `tolerances` are given) the step would be rejected (a non-autonomous field makes the
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
      suffice: on the multi-stage problem (m = 2000) 50/3 gave the same error as 25/8
      with 40 % fewer JVPs and ~15 % less wall time).
    - `init_power_iters`: power iterations in `init` (default 30).
    - `rho_safety`: factor applied to the power-iteration estimate (default 1.2).
    - `rho_floor`: added to the estimate (default 1e-8) so ρ stays positive even where the
      Jacobian (numerically) vanishes.
    - `nonstiff`: the method of the non-stiff steps (h ρ < 1.95): 'bs3' (default),
      'tsit5' (needs `tolerances`) or 'none' (plain RKC2); see above.
    - `tolerances`: `(rtol, atol)` of the `diffrax.PIDController` the solve uses (needed
      for `nonstiff='tsit5'` and for the tolerance-proportional control; numbers or JAX
      scalars).
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


def rkc_eval_counts(solver_state: RKCState | diffrax.Solution) -> dict[str, Array]:
    """Evaluation counts of an `RKC2` (or `ESERK4`) solve.

    **Arguments:**

    - `solver_state`: the final `RKCState`, i.e. `sol.solver_state` of a
      `diffrax.diffeqsolve(..., saveat=diffrax.SaveAt(..., solver_state=True))` (also with
      `SaveAt(subs=[...], solver_state=True)`), or that `Solution` itself.

    **Returns:** a dict of JAX scalars (batched under vmap): `vf_evals` (vector-field
    evaluations on the accepted path, including the one in `init`), `jvp_evals`
    (Jacobian–vector products of the power iteration), `rho` (the last spectral-radius
    bound, safety factor included), `steps` (accepted steps), `stages` (stage count of
    the last step), `nonstiff_steps` (accepted steps taken by the non-stiff method),
    `redos` (steps recomputed with a fresh ρ) and `substeps` (steps split in sub-steps).
    Evaluations made in rejected steps are not included (see `RKC2`).
    """
    state = (
        solver_state.solver_state if isinstance(solver_state, diffrax.Solution) else solver_state
    )
    if not isinstance(state, RKCState):
        raise TypeError(
            "expected the final RKC2 solver state; solve with "
            "`saveat=diffrax.SaveAt(..., solver_state=True)` and pass `sol.solver_state` "
            f"(got {type(state).__name__})."
        )
    return dict(
        vf_evals=state.vf_evals,
        jvp_evals=state.jvp_evals,
        rho=state.rho,
        steps=state.n_steps,
        stages=state.stages,
        nonstiff_steps=state.nonstiff_steps,
        redos=state.redos,
        substeps=state.substeps,
    )
