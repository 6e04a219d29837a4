"""A run's arguments validated once, in the user's terms, before anything is compiled:
`RunSettings`, the only thing `simulate` passes down to the solve on its clock."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._errors import ConfigError
from .._solvers import (
    AUTO_FOURTH_ORDER_MAX_RTOL,
    AUTO_PILOT_STEP,
    AUTO_PILOT_STEPS,
    AUTO_STIFF_RHO_SPAN,
    SolverChoice,
    auto_solver,
    cached,
    check_error_norm,
    is_matrix_free,
    outlier_spectrum,
    resolve_solver,
    solver_key,
    spectral_radius,
    steps_to_saves,
    with_chunked_jacobian,
)
from .._validate import MIN_RTOL, as_tolerance
from .arguments import (
    check_common,
    check_dt0,
    check_initial_state,
    check_max_steps,
    check_observables,
    check_problem,
    check_span,
    check_stop,
    save_times,
)
from .clocks import AbstractClock, as_clock
from .companion import companion_active, scaled_tolerances
from .flow import FlowSettings, flow_config
from .problem import Problem
from .resources import MEMORY_SHARE, physical_memory

__all__ = ["KINKS_WARNING", "RunSettings", "fit_dense_jacobian", "measure_stiffness"]


def measure_stiffness(problem: Problem, t0: float, t1: float, rtol: float) -> dict:
    """What `simulate(solver='auto')` chooses from: ρ, the spectral radius of ∇²L(θ(0))
    (20 Hessian-vector products, power iteration; an estimate from below), ρ·(t1 − t0)
    in physical time, and the rule (`flows.auto_solver`). Where that says stiff, the
    Hessian again after a pilot of `AUTO_PILOT_STEPS` gradient-descent steps of
    η = `AUTO_PILOT_STEP`/ρ: the Hessian's two largest eigenvalues λ₁, λ₂ there
    (`flows.outlier_spectrum`, 20 products: `outlier_rate`, `bulk_rate`) and λ₂·(t1 − t0)
    (`bulk_span`), whether the stiffness is one outlier. The pilot only samples the
    Hessian; the run starts at θ(0). `chosen`: the pick at this rtol.

    What `simulate` records as `config["solver_auto"]`; call it to see what 'auto' would
    pick, and why, without running the flow. Raises `ConfigError` for a `problem` that is
    not a `flows.Problem`, t1 ≤ t0, or an rtol outside (eps, 1)."""
    problem = check_problem(problem)
    t0, t1 = check_span(t0, t1)
    rtol = as_tolerance("rtol", rtol, example="1e-6", floor=MIN_RTOL)
    key = ("stiffness", jax.tree_util.tree_structure(problem)) + tuple(
        (v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)
    )
    fn, _ = cached(
        key,
        lambda: jax.jit(
            lambda prob: spectral_radius(
                lambda th: jax.tree_util.tree_map(jnp.negative, prob.grad(th)), prob.theta0, 20
            )
        ),
    )
    rho = float(fn(problem))
    span = t1 - t0
    out: dict[str, float | str] = {"rho": rho, "rho_span": rho * span, "rtol": rtol}
    bulk_span = None
    if rho * span >= AUTO_STIFF_RHO_SPAN:
        pilot, _ = cached(key + ("pilot",), lambda: jax.jit(_pilot_spectrum))
        eta = AUTO_PILOT_STEP / rho
        lam1, lam2 = (float(v) for v in pilot(problem, jnp.asarray(eta, problem.dtype)))
        bulk_span = lam2 * span
        out |= {
            "pilot_time": AUTO_PILOT_STEPS * eta,
            "outlier_rate": lam1,
            "bulk_rate": lam2,
            "bulk_span": bulk_span,
        }
    out["rule"] = (
        f"tsit5 if rho*(t1-t0) < {AUTO_STIFF_RHO_SPAN:g}; else at rtol >= "
        f"{AUTO_FOURTH_ORDER_MAX_RTOL:g} etdrk4 if bulk_rate*(t1-t0) < "
        f"{AUTO_STIFF_RHO_SPAN:g} (one outlier, after {AUTO_PILOT_STEPS} gradient steps of "
        f"{AUTO_PILOT_STEP:g}/rho) else rkc; below it rock4"
    )
    out["chosen"] = auto_solver(rtol, rho * span, bulk_span)
    return out


def _pilot_spectrum(prob: Problem, eta):
    """(λ₁, λ₂), the Hessian's two largest eigenvalues (`outlier_spectrum`), after
    `AUTO_PILOT_STEPS` gradient-descent steps of size `eta` from θ(0) (NaN where they
    diverged)."""

    def step(_, th):
        return jax.tree_util.tree_map(lambda a, g: a - eta.astype(a.dtype) * g, th, prob.grad(th))

    theta = jax.lax.fori_loop(0, AUTO_PILOT_STEPS, step, prob.theta0)
    return outlier_spectrum(
        lambda th: jax.tree_util.tree_map(jnp.negative, prob.grad(th)), theta, 20
    )


#: Columns of a dense Jacobian formed at once where all of them do not fit (`ChunkedLU`).
#: Measured on the multi-stage net at m = n = 1000 (a loaded 2-core machine): 7–9 ms a
#: column for batches of 4 … 32 Jacobian-vector products, 17 ms for 64 (one jvp alone:
#: 3.8–16 ms); larger batches only hold more memory.
MAX_JACOBIAN_CHUNK = 32
#: A column's working memory in units of one gradient's (`tangent_bytes`): a tangent pushed
#: through the linearised field holds its own copies of the n × m intermediates. Measured
#: at m = n = 1000 (2000 parameters): 1170 columns sized by one gradient's memory (16 MiB)
#: asked for more than 20 GiB and were killed for memory.
JACOBIAN_TANGENT_FACTOR = 4


def fit_dense_jacobian(problem: Problem, choice: SolverChoice) -> SolverChoice:
    """An implicit solver with a dense Jacobian (named in `IMPLICIT_SOLVERS` or given as an
    object: every implicit solver that is not matrix-free) fitted to this machine's memory.
    lineax forms the P × P Jacobian by pushing all P tangents through the field at once:
    about P × (the working memory of one gradient, measured from its compiled program) +
    8·P² bytes — at m = n = 1000 on the multi-stage net, 30 GiB for a 32 MB matrix. Where
    that fits, `choice` as it is; where it does not, the same solver with `ChunkedLU`: the
    matrix formed `chunk` columns at a time (at most `MAX_JACOBIAN_CHUNK`), as many as
    `MEMORY_SHARE` of the memory allows at `JACOBIAN_TANGENT_FACTOR` gradients' memory
    each, beside three copies of the matrix (its columns, its transpose, its LU). Refused
    (`ConfigError`) where not even one column fits, or where the solver's linear solver
    cannot be chunked (lineax's automatic choice and `LU` can). Nothing is changed where
    the platform does not say its memory or the gradient's program does not report its
    own."""
    if not choice.implicit or is_matrix_free(choice.solver):
        return choice
    total = physical_memory()
    if total is None:
        return choice
    per_tangent = tangent_bytes(problem)
    if per_tangent is None:
        return choice
    p = int(problem.n_params)
    itemsize = np.dtype(problem.dtype).itemsize
    column = max(per_tangent, itemsize * p)
    matrix = itemsize * p * p
    budget = MEMORY_SHARE * total
    if p * column + matrix <= budget:
        return choice
    chunk = min(
        MAX_JACOBIAN_CHUNK, int((budget - 3 * matrix) // (JACOBIAN_TANGENT_FACTOR * column))
    )
    solver = with_chunked_jacobian(choice.solver, chunk) if chunk >= 1 else None
    if solver is None and chunk >= 1:
        root = getattr(choice.solver, "root_finder", None)
        linear = type(getattr(root, "linear_solver", None)).__name__
        raise ConfigError(
            f"solver {choice.name!r} forms the dense {p} × {p} Jacobian of the field with "
            f"all {p} tangents at once (about {(p * column + matrix) / 2**30:.3g} GiB; this "
            f"machine has {total / 2**30:.3g} GiB), and its linear solver ({linear}) is not "
            "one the toolkit can form in chunks. Use 'kvaerno5' (chunked where needed), "
            "'kvaerno5-cg' (matrix-free), 'rkc' or 'rock4'."
        )
    if solver is None:
        raise ConfigError(
            f"solver {choice.name!r} forms the dense {p} × {p} Jacobian of the field "
            f"({matrix / 2**20:.3g} MiB, three copies) from tangents of "
            f"{per_tangent / 2**20:.3g} MiB each: not even one at a time fits in "
            f"{MEMORY_SHARE:.0%} of this machine's {total / 2**30:.3g} GiB. Use 'kvaerno5-cg' "
            "(matrix-free Newton–Krylov), 'rkc' or 'rock4' (stabilized explicit), or a "
            "problem with fewer parameters."
        )
    return dataclasses.replace(choice, solver=solver, key=solver_key(solver))


def tangent_bytes(problem: Problem) -> int | None:
    """The working memory of one gradient of `problem` (bytes, from its compiled program's
    memory analysis): what each tangent pushed through the field costs when a Jacobian is
    formed. None where the platform does not report it."""
    dynamic, static = eqx.partition(problem, eqx.is_array)
    try:
        grad = jax.jit(lambda d, th: eqx.combine(d, static).grad(th))
        analysis = grad.lower(dynamic, problem.theta0).compile().memory_analysis()
        return int(analysis.temp_size_in_bytes)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - no estimate: the solve itself will say
        return None


#: What `simulate` says when the model's activation has kinks (ReLU, leaky ReLU).
KINKS_WARNING = (
    "this model's activation has kinks: `simulate` integrates its flow as if the field were "
    "smooth (switches are not located; error control is unreliable at kinks, and a sliding "
    "mode can stall the solver). Use flows.simulate_nonsmooth for the exact flow through "
    "the kinks, or a smoothed activation (smoothing=ε)."
)


_UNSET: Any = object()


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """`simulate`'s arguments after `validate`: the solver resolved (`choice`, with the
    stiffness measurement `auto` behind 'auto'), the clock an object, the observables and
    the stop event checked on a first abstract evaluation (`obs_bytes`: what the
    observables save per time). `ts`/`n_save` are the save times as asked; each clock
    derives its own from them (`save_times`)."""

    t0: float
    t1: float
    rtol: float
    atol: float
    error_norm: str
    ts: Any
    n_save: int
    save_params: str
    observables: Callable
    obs_bytes: int
    clock: AbstractClock
    max_steps: int
    dt0: float | None
    count_evals: bool | str
    stop: Callable | None
    progress: bool
    throw: bool
    choice: SolverChoice
    auto: dict | None
    step_midpoints: bool = False

    @classmethod
    def validate(
        cls, problem, *, t1, t0, solver, rtol, atol, error_norm, ts, n_save, save_params,
        observables, clock, max_steps, dt0, count_evals, stop, progress, throw,
    ) -> tuple[Problem, RunSettings]:  # fmt: skip
        """`simulate`'s arguments checked in the user's terms (before anything is
        compiled) and the solver resolved: (the problem as checked, the settings)."""
        problem = check_problem(problem)
        rtol, atol = scaled_tolerances(rtol, atol)  # a companion computation's, if any
        t0, t1, rtol, atol = check_common(t0, t1, rtol, atol, save_params)
        error_norm = check_error_norm(error_norm)
        if getattr(problem.model, "activation_kinks", None) is not None:
            warnings.warn(KINKS_WARNING, stacklevel=3)  # simulate (as before the settings object)
        clock = as_clock(clock)
        max_steps = check_max_steps(max_steps)
        dt0 = check_dt0(dt0)
        check_initial_state(problem)
        observables, obs_bytes = check_observables(problem, observables, t0)
        stop = check_stop(problem, stop, t0)
        is_auto = isinstance(solver, str) and solver == "auto"
        auto = measure_stiffness(problem, t0, t1, rtol) if is_auto else None
        choice = resolve_solver(
            solver,
            rtol,
            atol,
            problem.n_params,
            problem.dtype,
            rho_span=None if auto is None else auto["rho_span"],
            error_norm=error_norm,
            bulk_span=None if auto is None else auto.get("bulk_span"),
        )
        choice = fit_dense_jacobian(problem, choice)
        if count_evals not in (True, False, "auto"):
            raise ConfigError(f"`count_evals` must be True, False or 'auto'; got {count_evals!r}.")
        return problem, cls(
            t0=t0, t1=t1, rtol=rtol, atol=atol, error_norm=error_norm, ts=ts, n_save=n_save,
            save_params=save_params, observables=observables, obs_bytes=obs_bytes,
            clock=clock, max_steps=max_steps, dt0=dt0, count_evals=count_evals, stop=stop,
            progress=progress, throw=throw, choice=choice, auto=auto,
            step_midpoints=companion_active(),
        )  # fmt: skip

    def save_times(self) -> np.ndarray:
        """The physical save times asked for (`ts`, else `n_save` points on [t0, t1])."""
        return save_times(self.t0, self.t1, self.ts, self.n_save)

    def flow_settings(self, *, count_evals: bool) -> FlowSettings:
        """The compiled flow's settings (`count_evals`: by a host callback)."""
        return FlowSettings(
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            dt0=self.dt0,
            count_evals=count_evals,
            progress=self.progress,
            observables=self.observables,
            clock=self.clock,
            stop=self.stop,
            error_norm=self.error_norm,
            # only where it changes the steps: other solvers' companions reuse the program
            step_midpoints=self.step_midpoints and steps_to_saves(self.choice.solver),
        )

    def config(self, problem: Problem, *, dt0=_UNSET, method: str | None = None) -> dict:
        """The trajectory's `config` (`flow.flow_config`) of a run with these settings."""
        return flow_config(
            problem,
            self.choice,
            self.clock,
            rtol=self.rtol,
            atol=self.atol,
            t0=self.t0,
            t1=self.t1,
            max_steps=self.max_steps,
            dt0=self.dt0 if dt0 is _UNSET else dt0,
            save_params=self.save_params,
            stop=self.stop,
            method=method,
            error_norm=self.error_norm,
        )
