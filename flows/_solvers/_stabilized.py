"""The stabilized explicit solvers' common machinery: `AbstractStabilizedSolver` (a
`diffrax.AbstractAdaptiveSolver` whose steps cost s evaluations for a real stability
interval growing like s²: spectral-radius estimates, the switch to a non-stiff method where
a step is not stability-limited, sub-steps, the secant check that redoes an unstable step),
its state `RKCState`, its dense output, and `rkc_eval_counts`. The solvers themselves:
`RKC2` (`_rkc.py`), `ESERK4` (`_eserk.py`), `ROCK4` (`_rock.py`).

Gradient flows dθ/dt = −∇L(θ) have the Jacobian −∇²L: symmetric, with a real spectrum
that is ≤ 0 near minima. On such *mildly stiff* problems the step size of a classical
explicit method (Tsit5) is set by stability, h ≲ 3/ρ with ρ the spectral radius of the
Jacobian, not by accuracy; a stabilized method's evaluations per unit time grow like
sqrt(ρ) instead of ρ.
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
import numpy as np
from jaxtyping import Array, PyTree

from .._trees import start_vector, tree_all_finite, tree_norm, tree_scale, tree_where
from ._stabilized_parts import (
    _MAX_SUBSTEPS,
    _NONSTIFF_EVALS,
    _NONSTIFF_K_ROWS,
    _NONSTIFF_MAX_HRHO,
    _NONSTIFF_REACH,
    _PROP_RTOL,
    ERROR_NORMS,
    NONSTIFF_METHODS,
    ControllerTolerances,
    RKCState,
    _error_norm,
    _hermite_k,
    _nonstiff_step,
    _RKCInterpolation,
    _secant,
    rkc_eval_counts,
)

__all__ = [
    "ERROR_NORMS",
    "AbstractStabilizedSolver",
    "ControllerTolerances",
    "RKCState",
    "rkc_eval_counts",
]


class AbstractStabilizedSolver(diffrax.AbstractImplicitSolver, diffrax.AbstractAdaptiveSolver):
    """What the stabilized explicit solvers (`RKC2`, `flows.ESERK4`) share: the spectral
    radius by Hessian-vector (Jacobian-vector) power iteration, the non-stiff switch, steps
    split into sub-steps when h ρ needs more than `max_stages`, a secant check that
    recomputes a step with a fresh ρ when the stored one is stale, and a non-finite step
    never reported as successful. A member provides its stabilized step for one
    (sub-)step (`_core_step`), the largest h ρ that `max_stages` stabilizes
    (`_max_hrho`) and its orders; for the predictive switch (`RKC2`), an error estimator
    that needs only a step's end points (`_endpoint_error`) and the evaluations of a
    stabilized step (`_stage_evals`). ESERK4's estimator needs its inner steps, so it has
    none: its `predictive_switch` does nothing.

    The controller's tolerances: without `tolerances` (and with `nonstiff` 'auto' or
    'tsit5') the solver asks diffrax for the adaptive controller's rtol, atol and norm
    through the mechanism of diffrax's implicit solvers (a `diffrax.AbstractImplicitSolver`
    whose `root_finder`, a `ControllerTolerances`, holds diffrax's marker; no root is
    found and `root_find_max_steps` is unused); so a bare class under a `PIDController`
    is the toolkit's solver (`make_solver`) at the controller's tolerances, and
    `ConstantStepSize` gets diffrax's error asking for an adaptive controller (as
    `Kvaerno5` does) unless `nonstiff` is one that needs no tolerances ('bs3', 'none').
    diffrax fills them in with `eqx.tree_at` after construction, so the tolerances, the
    non-stiff method and the norm in use are resolved where they are read (`_tolerances`,
    `_nonstiff`, `_norm`), at trace time (whether they are there is pytree structure).
    The toolkit does not count these classes as implicit (`choose.resolve_solver`)."""

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., _RKCInterpolation]] = _RKCInterpolation

    max_stages: int = eqx.field(static=True, default=200)
    rho_every: int = eqx.field(static=True, default=50)
    power_iters: int = eqx.field(static=True, default=3)
    init_power_iters: int = eqx.field(static=True, default=30)
    rho_safety: float = 1.2
    rho_floor: float = 1e-8
    spectral_radius: Callable[[Any, Any, Any], Any] | None = None
    # "auto": 'tsit5' when tolerances are there — given (then set in `__post_init__`: the
    # toolkit's `make_solver` object) or the controller's — else `_bare_nonstiff`
    nonstiff: str = eqx.field(static=True, default="auto")
    tolerances: tuple[Any, Any] | None = None
    proportional: bool = eqx.field(static=True, default=True)
    error_norm: str = eqx.field(static=True, default="rms")
    predictive_switch: bool = eqx.field(static=True, default=True)
    # the controller's rtol, atol and norm, filled in by diffrax (see the class docstring);
    # None: set in `__post_init__`
    root_finder: ControllerTolerances | None = None  # pyright: ignore[reportIncompatibleVariableOverride]
    root_find_max_steps: int = eqx.field(static=True, default=0)

    # --- what a member provides -------------------------------------------------------

    _nonstiff_methods: ClassVar[tuple[str, ...]] = NONSTIFF_METHODS
    # `nonstiff='auto'` without `tolerances` (Tsit5 steps need them)
    _bare_nonstiff: ClassVar[str] = "bs3"
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

    def __post_init__(self):
        # Given `tolerances`, `nonstiff='auto'` is Tsit5: the class is the toolkit's solver
        # (`make_solver`, the same object). Without them, 'auto' and 'tsit5' take the
        # controller's (diffrax fills in the markers); another `nonstiff` takes none, so
        # `ConstantStepSize` keeps working with it.
        if self.nonstiff == "auto" and self.tolerances is not None:
            self.nonstiff = "tsit5"
        if self.root_finder is None:
            ask = self.tolerances is None and self.nonstiff in ("auto", "tsit5")
            self.root_finder = (
                ControllerTolerances.from_controller() if ask else ControllerTolerances()
            )

    def __check_init__(self):
        if self.max_stages < 2:
            raise ValueError(f"`max_stages` must be ≥ 2; got {self.max_stages}.")
        if self.rho_every < 1:
            raise ValueError(f"`rho_every` must be ≥ 1; got {self.rho_every}.")
        if self.power_iters < 1 or self.init_power_iters < 1:
            raise ValueError("`power_iters` and `init_power_iters` must be ≥ 1.")
        if self.nonstiff not in ("auto", *self._nonstiff_methods):
            raise ValueError(
                f"`nonstiff` must be 'auto' or one of {self._nonstiff_methods}; "
                f"got {self.nonstiff!r}."
            )
        if self.error_norm not in ERROR_NORMS:
            raise ValueError(f"`error_norm` must be one of {ERROR_NORMS}; got {self.error_norm!r}.")
        if not isinstance(self.root_finder, ControllerTolerances):
            raise TypeError(
                "`root_finder` is where diffrax puts the controller's tolerances (a "
                "`ControllerTolerances`; leave it unset, give `tolerances` instead); got "
                f"{type(self.root_finder).__name__}."
            )
        if (
            self.nonstiff == "tsit5"
            and self.tolerances is None
            and not self.root_finder.waits_for_controller()
            and self.root_finder.tolerances() is None
        ):
            raise ValueError(
                "`nonstiff='tsit5'` needs tolerances (its error is rescaled to the "
                "controller's error order): `tolerances=(rtol, atol)`, or the controller's."
            )

    # --- the tolerances, non-stiff method and norm in use -----------------------------

    def _tolerances(self) -> tuple[Any, Any] | None:
        """(rtol, atol): those given (`tolerances`), else the adaptive controller's once
        diffrax has filled them in (`root_finder`), else None."""
        if self.tolerances is not None:
            return self.tolerances
        rf = self.root_finder
        return rf.tolerances() if isinstance(rf, ControllerTolerances) else None

    def _nonstiff(self) -> str:
        """The non-stiff method in use: `nonstiff`, with 'auto' resolved to 'tsit5' when
        tolerances are there (`_tolerances`), else to `_bare_nonstiff`."""
        if self.nonstiff != "auto":
            return self.nonstiff
        return "tsit5" if self._tolerances() is not None else self._bare_nonstiff

    def _norm(self) -> str:
        """The error norm in use: with the controller's tolerances, its norm where it is
        `optimistix.rms_norm` or `max_norm`; else `error_norm`."""
        rf = self.root_finder
        if self.tolerances is None and isinstance(rf, ControllerTolerances):
            return rf.norm_name() or self.error_norm
        return self.error_norm

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
            nrm = tree_norm(jv).astype(jnp.result_type(float))
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
        tol = self._tolerances()
        if tol is None or not self.proportional or self._prop_exponent == 0.0:
            return 1.0
        rtol = jnp.asarray(tol[0], jnp.result_type(float))
        return (rtol / _PROP_RTOL) ** (-self._prop_exponent)

    # --- diffrax interface -------------------------------------------------------------

    def init(self, terms, t0, t1, y0, args) -> RKCState:
        f0 = terms.vf(t0, y0, args)
        zero = jnp.zeros((), jnp.int32)
        if self.spectral_radius is None:
            est, v = self._power_iteration(
                terms, t0, y0, args, start_vector(y0), self.init_power_iters
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
        method, tol, norm = self._nonstiff(), self._tolerances(), self._norm()
        if method == "tsit5" and tol is None:
            raise ValueError(
                "`nonstiff='tsit5'` needs tolerances: give `tolerances=(rtol, atol)` or "
                "solve with an adaptive step-size controller (diffrax passes its own)."
            )
        rows = _NONSTIFF_K_ROWS[method]
        if method == "none":
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
            err = tree_scale(err, jnp.asarray(scale, fdt))
            if tol is not None and method != "none":
                # A failing stabilized step close to the non-stiff switch: report the error
                # that makes the controller retry at the switch (h ρ just below it, a
                # non-stiff step) rather than far below it. Otherwise, with the transformed
                # tolerance, a failed step near the switch sent h down by up to 5× into
                # needlessly accurate non-stiff steps (RKC2 on the Brusselator at rtol 1e-7:
                # err/rtol 4e-6, half the steps rejected).
                e = _error_norm(err, y0, y1, tol, norm)
                h_sw = 0.95 * self._nonstiff_max_hrho / jnp.maximum(rho, 1e-300)
                q = self.error_order(terms)
                e_target = (0.9 * h / h_sw) ** q  # PID (I) factor 0.9 e^{-1/q} → h_sw
                use = (e > 1.0) & (e_target > 1.0) & (e_target < e)
                err = tree_scale(err, jnp.where(use, e_target / jnp.where(use, e, 1.0), 1.0))
            k = _hermite_k(terms.prod(f0, control), terms.prod(f1, control), rows)
            return y1, f1, k, err, evals, jnp.asarray(self._nonstiff_max_hrho, fdt)

        if method == "none":
            y1, f1, k, y_error, evals, next_reach = stabilized()
        else:

            def nonstiff():
                y1, f1, k, err = _nonstiff_step(
                    method, terms, t0, t1, y0, args, f0, tol, self.error_order(terms), norm
                )
                pred = self._endpoint_error(
                    y0, y1, terms.prod(f0, control), terms.prod(f1, control)
                )
                next_reach = jnp.asarray(self._nonstiff_max_hrho, fdt)
                if tol is not None and self.predictive_switch and pred is not None:
                    err, next_reach = self._cap_growth(terms, y0, y1, err, pred, h, rho, scale)
                evals = jnp.asarray(_NONSTIFF_EVALS[method], jnp.int32)
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
        method, tol, norm = self._nonstiff(), self._tolerances(), self._norm()
        e = _error_norm(err, y0, y1, tol, norm)
        e_stab = self._predict_margin * _error_norm(tree_scale(pred, scale), y0, y1, tol, norm)
        rho = jnp.maximum(rho, 1e-300)
        h_sw = self._nonstiff_max_hrho / rho
        h_reach = 0.95 * _NONSTIFF_REACH[method] / rho
        h_ns = jnp.minimum(0.9 * h * jnp.where(e > 0, e, 1e-300) ** (-1.0 / q), h_reach)
        h_st = 0.9 * h * jnp.where(e_stab > 0, e_stab, 1e-300) ** (-1.0 / q)
        rate_ns = h_ns / _NONSTIFF_EVALS[method]
        stab = (h_st >= h_sw) & (h_st / self._stage_evals(h_st * rho) >= rate_ns)
        h_cap = jnp.where(stab, h_st, h_reach)
        reach = jnp.where(stab, self._nonstiff_max_hrho, _NONSTIFF_REACH[method])
        e_cap = jnp.minimum((0.9 * h / h_cap) ** q, 1.0)
        use = (e <= 1.0) & (e > 0) & (e_cap > e)
        err = tree_scale(err, jnp.where(use, e_cap / jnp.where(use, e, 1.0), 1.0))
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
            v = tree_where(due, new_v, v)
            jvp_evals = jvp_evals + jnp.where(due, self.power_iters, 0).astype(jnp.int32)
        return rho, v, jvp_evals

    def report(self, solver_state, index: int | None = None, *, last_stages: bool = True):
        """Its own counts from its final state (accepted steps only; member `index` of a
        batched state): (vector-field plus Hessian-vector evaluations, `SolveStats.extra`
        entries)."""
        c = rkc_eval_counts(solver_state)
        c = {
            k: (np.asarray(v) if index is None else np.asarray(v)[index]).item()
            for k, v in c.items()
        }
        extra = {
            "jvp_evals": int(c["jvp_evals"]),  # Hessian-vector products (power iteration)
            "spectral_radius": float(c["rho"]),  # last bound used (safety factor in)
        }
        if last_stages:
            extra["last_stages"] = int(c["stages"])
        extra["nonstiff_steps"] = int(c["nonstiff_steps"])  # non-stiff (Tsit5) steps
        extra["rho_redos"] = int(c["redos"])  # steps redone with a fresh ρ (secant check)
        extra["split_steps"] = int(c["substeps"])  # steps split beyond max_stages
        return int(c["vf_evals"] + c["jvp_evals"]), extra

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
        n_try, rho, v, jvps, out = self._attempt_twice(
            terms, t0, t1, y0, args, f0, control, h, rho, v, st.nonstiff_reach
        )
        y1, f1, k, y_error, evals, use_nonstiff, n_sub, too_many, next_reach = out
        jvp_evals = jvp_evals + jvps
        vf_evals = vf_evals + evals

        bad = ~(tree_all_finite(y1) & tree_all_finite(y_error)) | too_many
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
        tsit5 = use_nonstiff & (self._nonstiff() == "tsit5")
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

    def _attempt_twice(self, terms, t0, t1, y0, args, f0, control, h, rho, v, reach):
        """The step from (t0, y0) (`_attempt`): a first try with the stored ρ; a second one
        with a fresh estimate (`_fresh_rho`) when the first is not finite or its secant
        quotient −⟨ΔF, Δy⟩/‖Δy‖² (≤ ρ along the step for a symmetric, autonomous field)
        exceeds the ρ used while the step fails: the stored ρ may be stale and the step
        unstable. A while loop keeps one copy of the step in the graph. Returns (tries, ρ,
        power-iteration vector, Hessian-vector products of the re-estimate, `_attempt`'s
        result)."""
        fdt = jnp.result_type(float)

        def body(carry):
            i, rho_i, v_i, jvps, redo, prev = carry
            again = i >= 1
            rho_r, v_r, j_r = jax.lax.cond(
                eqxi.unvmap_any(again),
                lambda: self._fresh_rho(terms, t0, y0, args, f0, prev[0], prev[1], rho_i, v_i),
                lambda: (rho_i, v_i, jnp.zeros((), jnp.int32)),
            )
            rho_i = jnp.where(again, rho_r, rho_i)
            v_i = tree_where(again, v_r, v_i) if v_i is not None else None
            jvps = jvps + jnp.where(again, j_r, 0)
            out = self._attempt(terms, t0, t1, y0, args, f0, control, h, rho_i, reach)
            y1, f1, _, err = out[:4]
            bad = ~(tree_all_finite(y1) & tree_all_finite(err))
            # unstable only beyond the real stability bound of the step taken: h ρ for a
            # stabilized step (β(s) ≥ h ρ), ≈ 2.5 for a non-stiff one (Bosh3 2.51, Tsit5
            # ≈ 3.3), with a 10 % margin (the quotient is only an estimate)
            bound = jnp.where(out[5], jnp.maximum(h * rho_i, 2.5), h * rho_i)
            suspect = h * _secant(y0, f0, y1, f1, fdt) > 1.1 * bound
            tol = self._tolerances()
            if tol is not None:
                # a step the controller accepts is kept (a non-autonomous field also
                # makes the secant large); only a failing one may be unstable
                suspect = suspect & (_error_norm(err, y0, y1, tol, self._norm()) > 1.0)
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
        return n_try, rho, v, jvps, out

    def _fresh_rho(self, terms, t0, y0, args, f0, y1p, f1p, rho_i, v_i):
        """ρ for the second try of a step whose first try (ending at y1p, F = f1p) was not
        finite or suspect: at least the ρ used (4× it after a non-finite try). With the
        user's `spectral_radius`: 2× it or the secant quotient with the safety factor;
        else by power iteration warm-started from the first try's increment, which an
        unstable mode dominates. Returns (ρ, vector, Hessian-vector products)."""
        fdt = jnp.result_type(float)
        finite = tree_all_finite(y1p)
        rho_min = jnp.where(finite, rho_i, 4 * rho_i)
        if self.spectral_radius is not None:
            sec = _secant(y0, f0, y1p, f1p, fdt)
            sec = jnp.where(jnp.isfinite(sec), sec, 0.0)
            rho_new = jnp.maximum(self.rho_safety * sec, 2 * rho_i)
            return jnp.maximum(rho_new, rho_min), v_i, jnp.zeros((), jnp.int32)
        dy = jtu.tree_map(lambda a, b: a - b, y1p, y0)
        ndy = tree_norm(dy).astype(fdt)
        ok = finite & (ndy > 0)
        start = tree_where(ok, tree_scale(dy, 1.0 / jnp.where(ok, ndy, 1.0)), v_i)
        est, v_new = self._power_iteration(terms, t0, y0, args, start, self.init_power_iters)
        return (
            jnp.maximum(self._bound(est), rho_min),
            v_new,
            jnp.asarray(self.init_power_iters, jnp.int32),
        )
