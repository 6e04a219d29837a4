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

__all__ = ["RKC2", "RKCState", "rkc_eval_counts", "rkc_stability_bound"]

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
    """

    f0: PyTree[Array]
    rho: Array
    v: PyTree[Array] | None
    n_steps: Array
    vf_evals: Array
    jvp_evals: Array
    stages: Array
    nonstiff_steps: Array


def _tree_norm(tree: PyTree[Array]) -> Array:
    leaves = jtu.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves))


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


def _nonstiff_step(method, terms, t0, t1, y0, args, f0, tolerances):
    """One step of diffrax's Bosh3 ('bs3') or Tsit5 ('tsit5') from the FSAL value f0.
    Returns (y1, F(t1, y1), dense stages k, error).

    Bosh3's error estimate is O(h³) like RKC2's and is returned as is. Tsit5's is O(h⁵):
    its size e (RMS norm of error / (atol + rtol max(|y0|, |y1|)), as diffrax.PIDController
    computes it) is reported as e^{3/5}, so the controller, built for RKC2's error order 3,
    accepts iff e ≤ 1 and scales h by e^{−1/5}, as it would for Tsit5 (error order 5)."""
    y1, y_error, dense, state, _ = _NONSTIFF[method].step(
        terms, t0, t1, y0, args, (jnp.asarray(False), f0), False
    )
    if method == "tsit5":
        rtol, atol = tolerances
        sq = [
            jnp.sum((e / (atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)))) ** 2)
            for e, a, b in zip(
                jtu.tree_leaves(y_error), jtu.tree_leaves(y0), jtu.tree_leaves(y1), strict=True
            )
        ]
        size = sum(jnp.size(e) for e in jtu.tree_leaves(y_error))
        e = jnp.sqrt(sum(sq) / size)
        y_error = _tree_scale(y_error, jnp.where(e > 0, e ** (-2.0 / 5.0), 1.0))
    return y1, state[1], dense["k"], y_error


class RKC2(diffrax.AbstractAdaptiveSolver):
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
    step-size controller asked for, so it cannot shorten the step itself. If the stage
    formula needs more than `max_stages`, the step is not computed with too few stages
    (that would be unstable); instead it returns an infinite error estimate (so
    `diffrax.PIDController` rejects it and shrinks h by its `factormin`, until
    h ρ < (max_stages² − 1)/1.54) and the result code `diffrax.RESULTS.max_steps_reached`
    ("here: `max_stages` exceeded"). With an adaptive controller the code of a rejected
    step is discarded; with `diffrax.ConstantStepSize` the step is kept, so the solve
    stops with that code (raises under `throw=True`). Such a rejected step costs only 2
    evaluations (it runs with s = 2 since its result is discarded).

    **Error estimate** (as in the RKC paper and code): est = 0.8 (y_n − y_{n+1}) + 0.4 h (F_n +
    F_{n+1}), an O(h³) local-error estimate; hence `error_order` = 3 (diffrax's PID
    controller uses factor = err^(−1/error_order), the exponent of h in the local error).
    F_{n+1} = F(t_{n+1}, y_{n+1}) is carried in the state and reused as F_0 of the next
    step (first-same-as-last), so a step costs exactly s vector-field evaluations.

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
      controller's `tolerances=(rtol, atol)` and its default RMS norm over the whole state,
      which is what `flows.simulate` uses (and passes);
    - `'none'`: plain RKC2 everywhere (the tests of its order and stability polynomial use
      it).

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

    Caveat: between re-estimates ρ is frozen. If the true spectral radius grows by more
    than the safety margin (e.g. progressive sharpening), the step goes unstable, its
    error estimate blows up and the controller rejects it — but diffrax restores the
    solver state on rejection, so the retry uses the same stale ρ and the controller keeps
    shrinking h until h ρ_true ≤ β(s). That is correct but can be slow; use a smaller
    `rho_every` (even `rho_every=1, power_iters=1`) on problems whose curvature changes
    fast, or supply `spectral_radius`.

    **Arguments (fields):**

    - `max_stages`: largest s allowed per step (default 200, i.e. h ρ ≤ 25 973).
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
    - `tolerances`: `(rtol, atol)` of the `diffrax.PIDController` the solve uses (only
      for `nonstiff='tsit5'`).
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
    tolerances: tuple[float, float] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.max_stages < 2:
            raise ValueError(f"`max_stages` must be ≥ 2; got {self.max_stages}.")
        if self.rho_every < 1:
            raise ValueError(f"`rho_every` must be ≥ 1; got {self.rho_every}.")
        if self.power_iters < 1 or self.init_power_iters < 1:
            raise ValueError("`power_iters` and `init_power_iters` must be ≥ 1.")
        if self.nonstiff not in NONSTIFF_METHODS:
            raise ValueError(
                f"`nonstiff` must be one of {NONSTIFF_METHODS}; got {self.nonstiff!r}."
            )
        if self.nonstiff == "tsit5" and self.tolerances is None:
            raise ValueError(
                "`nonstiff='tsit5'` needs `tolerances=(rtol, atol)`, those of the step-size "
                "controller (its error is rescaled to the controller's error order 3)."
            )

    def order(self, terms):
        return 2

    def error_order(self, terms):
        # est is an O(h³) local-error estimate of a second-order method.
        return 3

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
        )

    def step(self, terms, t0, t1, y0, args, solver_state: RKCState, made_jump):
        st = solver_state
        vf_evals = st.vf_evals
        jvp_evals = st.jvp_evals

        # FSAL value F(t0, y0) is invalid after a discontinuity in the vector field.
        f0 = st.f0
        if made_jump is not False:
            recompute = eqxi.unvmap_any(made_jump)
            f0 = jax.lax.cond(recompute, lambda: terms.vf(t0, y0, args), lambda: f0)
            vf_evals = vf_evals + jnp.asarray(recompute, jnp.int32)

        # Spectral radius at (t0, y0).
        rho, v = st.rho, st.v
        if self.spectral_radius is not None:
            rho = jnp.asarray(self.spectral_radius(t0, y0, args), jnp.result_type(float))
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
            v = jtu.tree_map(lambda a, b: jnp.where(due, a, b), new_v, v)
            jvp_evals = jvp_evals + jnp.where(due, self.power_iters, 0).astype(jnp.int32)

        control = terms.contr(t0, t1)
        h = jnp.abs(jnp.asarray(control, jnp.result_type(float)))
        s_real = 1.0 + jnp.floor(jnp.sqrt(1.0 + _STAGE_CONST * h * rho))
        # `<=` is False for NaN/inf ρ as well, which must also fail the step.
        too_stiff = ~(s_real <= self.max_stages)
        # A failing step is discarded (adaptive) or ends the solve (constant steps), so
        # run it with the cheapest stage count.
        s = jnp.where(too_stiff, 2, jnp.maximum(s_real, 2.0)).astype(jnp.int32)

        if self.nonstiff == "none":
            use_nonstiff = jnp.zeros((), bool)
        else:
            use_nonstiff = h * rho < _NONSTIFF_MAX_HRHO

        def rkc_step():
            y1, f1, hf0, hf1 = self._stages(terms, t0, t1, y0, args, f0, control, s)
            err = jtu.tree_map(lambda a, b, c, d: 0.8 * (a - b) + 0.4 * (c + d), y0, y1, hf0, hf1)
            return y1, f1, _hermite_k(hf0, hf1, _NONSTIFF_K_ROWS[self.nonstiff]), err

        if self.nonstiff == "none":
            y1, f1, k, y_error = rkc_step()
        else:
            # Under vmap with a batched predicate, cond becomes select: both branches run.
            y1, f1, k, y_error = jax.lax.cond(
                use_nonstiff,
                lambda: _nonstiff_step(self.nonstiff, terms, t0, t1, y0, args, f0, self.tolerances),
                rkc_step,
            )
        # RKC: s − 1 stages j = 2..s plus F(t1, y1); BS3 / Tsit5: 3 / 6 (FSAL)
        evals = jnp.where(use_nonstiff, _NONSTIFF_EVALS.get(self.nonstiff, 0), s)
        vf_evals = vf_evals + evals.astype(jnp.int32)

        y_error = jtu.tree_map(lambda e: jnp.where(too_stiff, jnp.inf, e), y_error)
        result = diffrax.RESULTS.where(
            too_stiff, diffrax.RESULTS.max_steps_reached, diffrax.RESULTS.successful
        )
        dense_info = dict(y0=y0, y1=y1, k=k, tsit5=use_nonstiff & (self.nonstiff == "tsit5"))
        new_state = RKCState(
            f0=f1,
            rho=rho,
            v=v,
            n_steps=st.n_steps + 1,
            vf_evals=vf_evals,
            jvp_evals=jvp_evals,
            stages=evals.astype(jnp.int32),
            nonstiff_steps=st.nonstiff_steps + use_nonstiff.astype(jnp.int32),
        )
        return y1, y_error, dense_info, new_state, result

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
    """Evaluation counts of an `RKC2` solve.

    **Arguments:**

    - `solver_state`: the final `RKCState`, i.e. `sol.solver_state` of a
      `diffrax.diffeqsolve(..., saveat=diffrax.SaveAt(..., solver_state=True))` (also with
      `SaveAt(subs=[...], solver_state=True)`), or that `Solution` itself.

    **Returns:** a dict of JAX scalars (batched under vmap): `vf_evals` (vector-field
    evaluations on the accepted path, including the one in `init`), `jvp_evals`
    (Jacobian–vector products of the power iteration), `rho` (the last spectral-radius
    bound, safety factor included), `steps` (accepted steps), `stages` (stage count of
    the last step) and `nonstiff_steps` (accepted steps taken by the non-stiff method).
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
    )
