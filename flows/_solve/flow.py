"""The compiled gradient-flow solve on the physical and log clocks (`solve_flow`): the
vector field with the energy identity, the toolkit's first step, saves, the stop event and
evaluation counting; `FlowSettings` (what is compiled in) and the run's config record
(`flow_config`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import optimistix as optx

from .._solvers import (
    EVAL_COUNTER,
    FIRST_STEP_STABILITY,
    SolverChoice,
    counts_own_evals,
    has_stability_cap,
    initial_step,
    pid_controller,
    runtime_tolerances,
    spectral_radius,
    steps_to_saves,
)
from .._solvers import SOLVERS as SOLVERS
from .._trees import tree_sq_norm
from .arguments import describe_stop
from .clocks import AbstractClock, PhysicalClock
from .problem import Problem
from .progress import RunMeter


def flow_config(
    problem: Problem,
    choice: SolverChoice,
    clock: AbstractClock,
    *,
    rtol: float,
    atol: float,
    t0: float,
    t1: float,
    max_steps: int,
    dt0: float | None,
    save_params: str,
    stop=None,
    method: str | None = None,
    error_norm: str = "rms",
) -> dict:
    """The `config` of a flow's trajectory: problem, solver (name, what was asked for, its
    class and settings), clock and tolerances — what it takes to rerun it."""
    solver = choice.describe()
    return {
        "method": method or f"gradient flow ({choice.name})",
        "problem": problem.describe(),
        "solver": choice.name,
        "solver_requested": choice.requested,
        "solver_class": solver["class"],
        "solver_settings": solver["settings"],
        "clock": clock.name,
        "rtol": rtol,
        "atol": atol,
        "error_norm": error_norm,
        "t0": t0,
        "t1": t1,
        "max_steps": max_steps,
        "dt0": dt0,
        "save_params": save_params,
        "dtype": str(problem.dtype),
        "stop": describe_stop(stop),
        "kinks": (
            "integrated as if smooth (the kinks are not located: see "
            "flows.simulate_nonsmooth for the exact flow)"
            if getattr(problem.model, "activation_kinks", None) is not None
            else "none"
        ),
    }


# --- the physical- and log-clock solve --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FlowSettings:
    """Settings of a compiled flow solve. All but `rtol`/`atol` are static (part of the
    compile key; the solver object is passed alongside); the tolerances are run-time
    values (`solve_flow`'s `tol`), so `compile_settings()` drops them from the key."""

    rtol: float | None
    atol: float | None
    max_steps: int
    dt0: float | None
    count_evals: bool
    progress: bool
    observables: Callable
    clock: AbstractClock = PhysicalClock()
    stop: Callable | None = None
    error_norm: str = "rms"
    #: a companion solve (`flows._solve.companion`): a solver that steps to its save times
    #: also steps to the midpoints between them
    step_midpoints: bool = False

    def compile_settings(self) -> FlowSettings:
        """These settings without the tolerances: what the compiled program depends on."""
        return dataclasses.replace(self, rtol=None, atol=None)

    def tol(self) -> tuple:
        """(rtol, atol) as run-time arrays. Weakly typed, as the Python floats they replace:
        in a float32 solve they act in float32, and the program is the same."""
        assert self.rtol is not None and self.atol is not None
        return runtime_tolerances((self.rtol, self.atol))


#: Power iterations (Hessian-vector products) behind the toolkit's first step of a classical
#: explicit solver; with the two field evaluations of the step rule, `FIRST_STEP_EVALS`
#: evaluations, reported apart as `stats.extra["first_step_evals"]` (not in
#: `stats.vf_evals`, which counts the solver's).
FIRST_STEP_POWER_ITERS = 20
FIRST_STEP_EVALS = FIRST_STEP_POWER_ITERS + 2


def first_step(settings: FlowSettings, solver, vector_field, problem, y0, t0, t1, tol):
    """(first step, ρ at θ(0)) in clock units: `settings.dt0` when given (ρ then NaN, not
    measured), else the toolkit's choice (`flows._solvers.initial_step`) from the
    tolerances, capped by the stability bound of a classical explicit solver — for which
    ρ is measured by 20 Hessian-vector products at θ(0). Stabilized and implicit solvers
    have no such bound (ρ NaN, not measured: RKC2 and ESERK4 estimate their own). diffrax
    0.7 would start every wrapped-term solve at 0.01 (its own heuristic only sees an
    unwrapped `ODETerm`)."""
    fdt = problem.dtype
    if settings.dt0 is not None:
        return jnp.asarray(settings.dt0, fdt), jnp.asarray(jnp.nan, fdt)
    e0 = y0[1]
    explicit_classic = has_stability_cap(solver)
    if explicit_classic:
        rho = spectral_radius(
            lambda th: vector_field(t0, (th, e0), problem)[0], y0[0], FIRST_STEP_POWER_ITERS
        )
    else:  # unused by the rule without a stability cap: 20 HVPs saved
        rho = jnp.asarray(jnp.nan, jnp.result_type(float))
    order = solver.order(diffrax.ODETerm(vector_field)) or 1
    # θ only: the energy E starts at 0 with only atol as its scale, which would make the
    # first step needlessly tiny (the controller then spends steps growing it)
    h = initial_step(
        lambda t, th: vector_field(t, (th, e0), problem)[0],
        t0,
        y0[0],
        rtol=tol[0],
        atol=tol[1],
        order=int(order),
        # the estimate approaches ρ from below: 1.2 as the stabilized solvers use
        rho=1.2 * rho + 1e-12,
        stability=FIRST_STEP_STABILITY if explicit_classic else None,
        span=t1 - t0,
    )
    # one first step for a whole vmapped batch (`flows.simulate_batch`): the smallest of its
    # members'. Unbatched, the solve then takes bit-for-bit the steps it takes alone (a
    # batched start time rounds differently in the last bits).
    h = -eqxi.unvmap_max(-h)
    return h.astype(fdt), rho.astype(fdt)


def energy_offset(loss0):
    """The constant that the energy E = ∫‖∇L‖² carries in a flow's state: the state holds
    E + |L(θ(0))|, and the saves subtract it again (E then carries float64's round-off of
    L(0), up to eps·|L(0)| a step, as the energy identity's residual L(0) − L(t) − E does).

    Why: the step controller scales a component's local error by atol + rtol·|component|.
    E starts at 0, so in the first steps only atol scaled its error, and E — judged
    against its own tiny size — set the steps where θ did not: on the multi-stage net
    (m = 5000, t = 20, rtol 1e-4) ETDRK4 took 36 steps and 215 evaluations where θ alone
    takes 30 and 175 (the extra ones in the fast first stage); with the offset 32 and 187.
    With it E's error is judged against rtol·(|L(0)| + E), the scale of the certificate
    that reads it (100·rtol·max L, `flows._solve.stats.certificate`). A non-finite L(0)
    gets no offset (the solve fails on it anyway)."""
    return jnp.where(jnp.isfinite(loss0), jnp.abs(loss0), 0.0)


def solve_flow(settings: FlowSettings, solver, problem, ts, pts, t0, t1, tol):
    """One `diffrax.diffeqsolve` of the flow with the energy as an extra state; `ts`, `pts`,
    `t0`, `t1` are clock values, `tol` the run-time (rtol, atol) (`FlowSettings.tol`).
    Saves the observables at `ts`, (t, θ, observables) at the end, θ at `pts`, (first
    step, ρ(θ(0))) last, and a stabilized solver's state (its evaluation counts). With
    `settings.dt0` None the first step is the toolkit's (`first_step`)."""
    # diffrax promotes the state to the times' dtype: float64 times would silently turn a
    # float32 problem's θ (and so its whole vector field) into float64
    ts, pts, t0, t1 = (jnp.asarray(v, dtype=problem.dtype) for v in (ts, pts, t0, t1))
    obs_fn = settings.observables
    clock = settings.clock

    def field(s, y, prob, count: bool):
        theta, _ = y
        g = prob.grad(theta)
        if count:
            bad = ~jnp.isfinite(tree_sq_norm(g))
            jax.debug.callback(EVAL_COUNTER, bad)
        h = clock.rate(s, y[1].dtype)  # dt/ds
        return jax.tree_util.tree_map(lambda v: -h * v, g), h * tree_sq_norm(g)

    def vector_field(s, y, prob):
        return field(s, y, prob, settings.count_evals)

    # the state carries E + |L(θ(0))| (`energy_offset`); the saves give E
    offset = energy_offset(problem.loss(problem.theta0))

    def save_obs(s, y, prob):
        theta, energy = y
        out = dict(obs_fn(prob, theta, clock.to_physical(s)))
        out["loss"] = prob.loss(theta)
        out["energy"] = energy - offset
        return out

    subs = [
        diffrax.SubSaveAt(ts=ts, fn=save_obs),
        diffrax.SubSaveAt(
            t1=True, fn=lambda s, y, prob: (clock.to_physical(s), y[0], save_obs(s, y, prob))
        ),
    ]
    event = None
    if settings.stop is not None:
        stop = settings.stop

        def cond(t, y, args, **kwargs):  # diffrax passes the clock value as `t`
            return stop(args, y[0], clock.to_physical(t))

        cond_fn, direction = cond, False  # downcrossing only: not stopped at t0 when ≤ 0
        if hasattr(stop, "at_noise_floor"):  # `stop_when_converged`: also at the noise floor

            def noise(t, y, args, **kwargs):
                return stop.at_noise_floor(args, y[0], tol)

            cond_fn, direction = (cond, noise), (False, None)
        event = diffrax.Event(
            cond_fn, root_finder=optx.Newton(rtol=1e-10, atol=1e-10), direction=direction
        )
    if pts.shape[0]:
        subs.append(diffrax.SubSaveAt(ts=pts, fn=lambda t, y, prob: y[0]))
    meter = (
        RunMeter(s0=t0, s1=t1, t1=clock.to_physical(t1), to_physical=clock.to_physical)
        if settings.progress
        else diffrax.NoProgressMeter()
    )
    rkc = counts_own_evals(solver)  # its counts are in its state
    y0 = (problem.theta0, offset.astype(problem.dtype))
    # the first-step choice is not counted by the callback: `stats.extra["first_step_evals"]`
    plain = lambda s_, y_, prob: field(s_, y_, prob, False)  # noqa: E731
    dt0, rho0 = first_step(settings, solver, plain, problem, y0, t0, t1, tol)
    # reported in the trajectory's stats (`dt0`, `rho0`): saved once, at t0
    subs.append(diffrax.SubSaveAt(t0=True, fn=lambda t, y, prob: (dt0, rho0)))
    return diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        solver,
        t0,
        t1,
        dt0,
        y0,
        args=problem,
        saveat=diffrax.SaveAt(subs=subs, solver_state=rkc),
        # a solver whose saves between steps are less accurate than its step ends steps
        # to the save times instead (`steps_to_saves`; pts are among ts)
        stepsize_controller=pid_controller(
            tol[0],
            tol[1],
            settings.error_norm,
            step_ts=_step_ts(settings, solver, ts),
            solver=solver,
        ),
        max_steps=settings.max_steps,
        throw=False,
        progress_meter=meter,
        event=event,
    )


def _step_ts(settings: FlowSettings, solver, ts):
    """The times a solve must step to: none, or the save times `ts` for a solver whose
    saves between steps are less accurate than its step ends (`steps_to_saves`) — and, in
    a companion solve (`settings.step_midpoints`), the midpoints between them too."""
    if not steps_to_saves(solver):
        return None
    if not settings.step_midpoints or ts.shape[0] < 2:
        return ts
    mids = 0.5 * (ts[:-1] + ts[1:])
    return jnp.concatenate([jnp.stack([ts[:-1], mids], axis=1).reshape(-1), ts[-1:]])


def flow_program(settings: FlowSettings, solver, problem, ts, pts, t0, t1, tol) -> dict:
    """`solve_flow` with its solution as plain containers of arrays — what `simulate` reads
    of it (`FlowOutput.unpack`) — so that the program can be exported and read back by a
    later process (`flows._compile.compile_program(..., persist=True)`): the saves, the
    result code, diffrax's statistics and a stabilized solver's final state."""
    sol = solve_flow(settings, solver, problem, ts, pts, t0, t1, tol)
    return {
        "ys": sol.ys,
        "result": jax.tree_util.tree_leaves(sol.result),
        "stats": sol.stats,
        "solver_state": sol.solver_state,
    }


@dataclasses.dataclass(frozen=True)
class FlowOutput:
    """What `simulate` reads of a flow's `diffrax.Solution`: `ys` (the saves), `result` (a
    `diffrax.RESULTS` item), `stats` and `solver_state`."""

    ys: tuple
    result: diffrax.RESULTS
    stats: dict
    solver_state: object

    @classmethod
    def unpack(cls, out: dict) -> FlowOutput:
        """From `flow_program`'s result."""
        item = jax.tree_util.tree_structure(diffrax.RESULTS.successful)
        result = jax.tree_util.tree_unflatten(item, out["result"])
        return cls(out["ys"], result, out["stats"], out["solver_state"])
