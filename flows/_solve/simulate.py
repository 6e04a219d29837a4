"""Exact gradient flow dθ/dt = −∇L(θ) with diffrax: `simulate`, one entry point for every
solver (a name or a diffrax solver object, `flows._solvers`) and every clock (physical,
log, loss; `flows._solve.clocks`). The physical and log clocks are solved here; the loss clock's
segmented solve is `flows._solve.loss_clock`."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from .._compile import compile_program, jit_kept_on
from .._errors import ConfigError, SolverError
from .._solvers import (
    EVAL_COUNTER,
    SolverChoice,
    cached,
    counts_own_evals,
    runtime_solver,
    solver_report,
)
from .._solvers import SOLVERS as SOLVERS
from .arguments import (
    ControllerSpec,
    Observables,
    SaveSpec,
    StopCondition,
    check_save_memory,
    describe_stop,
    param_save_times,
    stop_at_loss,
    stop_when_converged,
    ungroup,
)
from .clocks import AbstractClock, LossClock
from .companion import tolerances_scaled
from .flow import FIRST_STEP_EVALS, FlowOutput, FlowSettings, flow_program
from .global_error import GLOBAL_ERROR_FACTOR, global_error_asked, with_global_error
from .loss_clock import solve_loss_clock
from .problem import Problem
from .settings import RunSettings
from .stats import Result, SolveStats, advice, failure_reason
from .trajectory import Trajectory, assemble_trajectory, flat_params

__all__ = [
    "Observables",
    "StopCondition",
    "simulate",
    "stop_at_loss",
    "stop_when_converged",
]

# `SOLVERS` is re-exported above for callers not yet moved to `flows._solvers` (or the
# public `flows.SOLVERS`), where the solver registry and its checks live.


@jit_kept_on  # compiled even inside `jax.disable_jit()`
def simulate(
    problem: Problem,
    *,
    t1: float,
    t0: float = 0.0,
    solver: str | diffrax.AbstractSolver = "tsit5",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    error_norm: str = "rms",
    ts=None,
    n_save: int = 201,
    save_params: str = "ends",
    observables: Observables | None = None,
    clock: str | AbstractClock = "physical",
    max_steps: int = 200_000,
    dt0: float | None = None,
    progress: bool = False,
    count_evals: bool | str = "auto",
    throw: bool = True,
    stop: StopCondition | None = None,
    global_error: bool | None = None,
    save: SaveSpec | None = None,
    controller: ControllerSpec | None = None,
) -> Trajectory:
    """Integrate the exact gradient flow dθ/dt = −∇L(θ) from θ(t0) = `problem.theta0`.

    The state is (θ, E) with Ė = ‖∇L‖², so the energy identity L(0) − L(t) = E(t) is an
    accuracy certificate computed alongside (observable `energy_residual`).

    For a model whose activation has kinks (`model.activation_kinks`: ReLU, leaky ReLU) the
    field is discontinuous; `simulate` integrates it as if smooth, with a warning
    (`KINKS_WARNING`) and `config["kinks"]` saying so. The exact flow through the kinks
    (located switches, Filippov sliding) is `flows.simulate_nonsmooth`.

    **Arguments:**
    - `problem`: the objective and θ(0) (`flows.make_problem`).
    - `t1`, `t0`: time span (physical time of the flow).
    - `solver`: a name in `SOLVERS` ('tsit5' default, 'dopri5', 'dopri8', 'kvaerno5',
      'rkc', 'eserk4', 'rock4', 'kvaerno5-cg', 'etdrk4'), 'auto' (measures ρ·(t1 − t0), ρ the
      Hessian's spectral radius at θ(0) by power iteration: 'tsit5' below 250; else, at
      rtol ≥ 1e-6, 'etdrk4' where the stiffness is one outlier — the Hessian's second
      eigenvalue λ₂ after a 20-step gradient-descent pilot has λ₂·(t1 − t0) < 250 — and
      'rkc' where it is not; 'rock4' below rtol 1e-6; `flows.auto_solver`; the numbers and
      the choice are recorded in `config["solver_auto"]` and `stats.extra` `auto_rho`,
      `auto_rho_span`),
      or a diffrax solver object (any adaptive `diffrax.AbstractSolver`, e.g.
      `diffrax.Dopri5()`, `flows.RKC2(rho_every=10)`). An object equal to a named solver is
      recorded under its name; the config records every solver's class and settings.
      The stabilized solvers ('rkc', 'eserk4', 'rock4') add their own counts to
      `stats.extra` (`jvp_evals`, `spectral_radius`, `nonstiff_steps`, …; `flows.RKC2`).
    - `rtol`, `atol`: tolerances of diffrax's PID step-size controller.
    - `error_norm`: the norm in which that controller measures the local error scaled by
      atol + rtol·max(|y_n|, |y_{n+1}|) over the whole state (θ and the energy, whose
      scale includes |L(θ(0))|: `flows._solve.flow.energy_offset`): 'rms'
      (default, diffrax's `optimistix.rms_norm`) or 'max' (`optimistix.max_norm`: every
      component within tolerance). With 'rms', where the error sits in a few of many
      parameters the largest parameter error can exceed rtol by up to sqrt(number of
      parameters); 'max' bounds it at the cost of more steps.
    - `ts` or `n_save`: physical save times (default `n_save` equally spaced points on
      [t0, t1]; `flows.log_save_times` for late-phase runs).
    - `save_params`: θ at every save time ('all'), at the first and last ('ends'), or
      never ('none'; observables only, for very wide networks).
    - `observables`: (problem, θ, t) → dict of arrays, evaluated inside the solve at each
      save time; `loss` and the energy terms are always recorded. Checked (as `stop` is)
      on an abstract evaluation before anything is compiled.
    - `clock`: what the solver steps in — a clock object or its name: 'physical' (t),
      'log' (s = ln(1 + t); late-phase runs to t ~ 10⁶–10¹²) or 'loss' (dt/ds = 1/L, for
      losses decaying to 0; segment by segment between saves; `flows.LossClock` says what
      it allows). Save times stay physical.
    - `max_steps`: solver step budget (at most `MAX_STEPS` = 10¹²; `n_save` and `ts` at
      most `MAX_SAVES` = 10⁷ times, and what they save must fit in memory). `dt0`: initial
      step (None: chosen from the tolerances, and for Tsit5/Dopri from ρ(θ(0)); recorded
      as `stats.extra["dt0"]`, its evaluations as `first_step_evals`, not in `vf_evals`).
    - `progress`: show the solve's progress on stderr (a live bar on a terminal, a plain
      line per tenth elsewhere; `flows._solve.progress`).
    - `count_evals`: how to count vector-field calls: 'auto' (default) from the step
      count (`EVALS_PER_STEP`) or the solver's own count (the stabilized solvers: accepted
      steps), else by a host callback; True: always by callback (~10 % on a wide net on
      CPU; synchronizes on accelerators); False: not at all.
    - `throw`: raise `SolverError` when the solve fails (default). With `throw=False` the
      run up to the time reached is returned (save times after it dropped, the state at
      `stats.t_reached` appended, θ there as the last stored parameters; loss clock: the
      save times reached), with `stats.result` and `stats.reason` naming the failure.
    - `stop`: an event, (problem, θ, t) → scalar: the run ends where it first falls from
      > 0 to 0 (located by a root finder on the dense output), e.g. `stop_at_loss(1e-3)`.
      The trajectory then ends at that time (save times after it are dropped, the stop
      time is appended), `stats.result` is `Result.event_stopped` and `stats.stopped_at`
      records the time (None when not triggered).
    - `global_error`: also estimate the run's global error, by a companion solve at
      rtol and atol `GLOBAL_ERROR_FACTOR` (10) times tighter with the same solver and
      save times (tolerances are run-time values: the compiled program is reused). The
      estimate is `traj.global_error` (`flows.GlobalError`: per-save differences per
      observable and parameter, the companion run, the cost), summarised in
      `config["global_error"]`; the final loss's error floor is then at least the
      estimate. Costs about 1.5–2.5 × the plain run. None (default): off, unless the
      command line's `--global-error` turned it on.
    - `save`, `controller`: the save and step-control arguments grouped as diffrax groups
      them (`flows.SaveSpec`: `ts`, `n_save`, `params`, `observables`;
      `flows.ControllerSpec`: `rtol`, `atol`, `norm`, `dt0`) — the same run as the flat
      arguments; a value given both ways is refused.

    **Returns:** a `Trajectory` whose `stats` is a `SolveStats` (also readable as the
    mapping `stats["steps"]`, …). `stats.certificate` says whether the energy identity
    and the monotone loss hold within their windowed bounds, and `stats.resolution`
    whether the final loss is larger than its error floor (`flows.loss_floors`); the CLI
    refuses to save a run where either does not.
    """
    call: dict[str, Any] = {
        "t1": t1, "t0": t0, "solver": solver, "rtol": rtol, "atol": atol,
        "error_norm": error_norm, "ts": ts, "n_save": n_save, "save_params": save_params,
        "observables": observables, "clock": clock, "max_steps": max_steps, "dt0": dt0,
        "count_evals": count_evals, "stop": stop,
    }  # fmt: skip
    if save is not None or controller is not None:
        call = ungroup(simulate, save, controller, call)
    if global_error_asked(global_error):
        plain = simulate(problem, **call, progress=progress, throw=throw, global_error=False)
        f = GLOBAL_ERROR_FACTOR
        tight = {**call, "rtol": call["rtol"] / f, "atol": call["atol"] / f}
        return with_global_error(plain, lambda: _companion(problem, tight), f)
    problem, run = RunSettings.validate(problem, progress=progress, throw=throw, **call)
    if isinstance(run.clock, LossClock):
        return _simulate_loss_clock(problem, run)
    return _simulate_flow(problem, run)


def _companion(problem, call: dict) -> Trajectory:
    """The companion solve of `simulate(…, global_error=True)` (its tighter tolerances in
    `call`), run as a companion computation: a solver that steps to its save times also
    steps to the midpoints (`flows._solve.companion.companion_active`)."""
    with tolerances_scaled(1.0):
        return simulate(problem, **call, global_error=False)


def _simulate_flow(problem, run: RunSettings) -> Trajectory:
    """`simulate` on the physical or log clock (arguments validated by `simulate`)."""
    choice, t0, t1 = run.choice, run.t0, run.t1
    analytic_count, state_count, callback_count = _eval_counting(run.count_evals, choice)
    if run.clock.name == "log" and t0 < 0:
        raise ConfigError(f"the log clock s = ln(1 + t) needs t0 ≥ 0; got t0 = {t0}.")
    ts = run.save_times()
    pts = param_save_times(ts, run.save_params)
    check_save_memory(problem, len(ts), len(pts), run.obs_bytes)
    settings = run.flow_settings(count_evals=callback_count)
    sol, compile_s, wall_s = _run_flow(problem, settings, choice, ts, pts, t0, t1)
    counting = (analytic_count, state_count, callback_count)
    stats, ok, stopped, (t_reached, theta_end, obs_end) = _flow_stats(
        problem, sol, choice, counting, run.dt0, run.auto, run.stop, timings=(compile_s, wall_s)
    )
    config = run.config(problem)
    if run.auto is not None:
        config["solver_auto"] = {**run.auto, "chosen": choice.name}
    if not ok and run.throw:
        raise SolverError(
            f"gradient-flow solve stopped at t = {t_reached:.6g} of t1 = {t1}: {stats.reason}. "
            + advice(stats.result, choice.implicit),
            t_reached=t_reached,
            reason=stats.reason,
        )
    obs = {k: np.asarray(v) for k, v in sol.ys[0].items()}
    params = flat_params(sol.ys[2]) if len(pts) else {}
    if stopped or not ok:
        # The run ended at t_reached (a stop event, or a failure with throw=False): keep the
        # saves before it and append the state reached, so nothing past t_reached is reported.
        keep, pkeep = ts < t_reached, pts < t_reached
        ts = np.append(ts[keep], t_reached)
        obs = {k: np.concatenate([v[keep], np.asarray(obs_end[k])[None]]) for k, v in obs.items()}
        if len(pts):
            pts = np.append(pts[pkeep], t_reached)
            end = flat_params(theta_end)
            params = {k: np.concatenate([v[pkeep], end[k][None]]) for k, v in params.items()}
    return assemble_trajectory(
        problem,
        times=ts,
        observables=obs,
        param_times=pts,
        params=params,
        stats=stats,
        config=config,
        certify_rtol=run.rtol,
        certify_atol=run.atol,
        observables_fn=run.observables,
        # the state the last save was taken from (save times need not end at t1)
        theta_end=theta_end if len(ts) and np.isclose(ts[-1], t_reached, rtol=1e-12) else None,
    )


def _eval_counting(count_evals, choice: SolverChoice) -> tuple[bool, bool, bool]:
    """How `simulate` counts vector-field evaluations: (from the step count, from the
    solver's own state, by a host callback)."""
    analytic_count = count_evals == "auto" and choice.evals_per_step is not None
    # RKC2 counts its own evaluations in its state (exact on accepted steps; a callback
    # would double its wall time on mid-size nets)
    state_count = count_evals == "auto" and counts_own_evals(choice.solver)
    callback_count = count_evals is True or (
        count_evals == "auto" and not (analytic_count or state_count)
    )
    return analytic_count, state_count, callback_count


def _run_flow(problem, settings: FlowSettings, choice: SolverChoice, ts, pts, t0, t1):
    """(diffrax solution, compile s, wall s): the flow's program, compiled once per key
    (settings without tolerances, solver, structure, shapes) and run."""
    to_s = settings.clock.from_physical
    args = (
        problem,
        jnp.asarray(to_s(ts)),
        jnp.asarray(to_s(pts)),
        jnp.asarray(to_s(t0)),
        jnp.asarray(to_s(t1)),
        settings.tol(),
    )
    static = settings.compile_settings()
    solver, solver_k = runtime_solver(choice.solver)
    key = ("flow", static, solver_k, jax.tree_util.tree_structure(problem), len(ts)) + (
        len(pts),
        *((v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)),
    )
    start = time.perf_counter()

    def build():
        if settings.progress:  # compilation is most of a small run: say so before it starts
            print(
                "flows: compiling the solve (once per model structure, solver and clock; "
                "later runs reuse it)…",
                file=sys.stderr,
                flush=True,
            )
        # kept traced in the cache folder, unless it has host callbacks (never cached)
        persist = not (settings.count_evals or settings.progress)
        return compile_program(flow_program, static, solver, *args, persist=persist)

    compiled, fresh = cached(key, build)
    compile_s = time.perf_counter() - start
    if settings.progress and fresh:
        print(f"flows: compiled in {compile_s:.1f} s; solving…", file=sys.stderr, flush=True)
    EVAL_COUNTER.reset()
    start = time.perf_counter()
    sol = FlowOutput.unpack(compiled(static, solver, *args))
    jax.block_until_ready(sol.ys)
    return sol, compile_s, time.perf_counter() - start


def _flow_stats(problem, sol, choice: SolverChoice, counting, dt0, auto, stop, *, timings):
    """(`SolveStats`, ok, stopped by `stop`, (t reached, θ and observables
    there)) of a finished flow solve."""
    analytic_count, state_count, callback_count = counting
    # drop the length-1 save axis of the final-state save
    t_reached, theta_end, obs_end = jax.tree_util.tree_map(lambda v: v[0], sol.ys[1])
    t_reached = float(np.asarray(t_reached))
    stopped = bool(sol.result == diffrax.RESULTS.event_occurred)
    ok = bool(sol.result == diffrax.RESULTS.successful) or stopped
    if stopped:
        result = Result.event_stopped
        reason = f"stopped by the stop condition ({describe_stop(stop)}) at t = {t_reached:.6g}"
    elif ok:
        result, reason = Result.successful, "successful"
    else:
        result, reason = failure_reason(
            problem, sol.result, sol.stats, theta_end, EVAL_COUNTER.nonfinite, EVAL_COUNTER.n
        )
    steps = int(sol.stats["num_steps"])
    vf_evals = None
    if analytic_count:
        assert choice.evals_per_step is not None  # part of analytic_count
        vf_evals = choice.evals_per_step * steps + 1
    elif callback_count:
        vf_evals = EVAL_COUNTER.n
    own, extra = solver_report(
        choice.solver, sol.solver_state, counter=EVAL_COUNTER if callback_count else None
    )
    # a stabilized solver's own count is used under 'auto' only (a callback counts all)
    if own is not None and (state_count or not counts_own_evals(choice.solver)):
        vf_evals = own
    dt0_used, rho0 = (float(np.asarray(v).reshape(-1)[0]) for v in sol.ys[-1])
    extra["dt0"] = dt0_used  # first step (clock units), the toolkit's when dt0=None
    if dt0 is None:
        if math.isfinite(rho0):  # measured for the classical explicit solvers only
            extra["rho0"] = rho0  # power-iteration estimate of ρ(∇²L(θ(0))) (clock units)
        # its HVPs (if any) and 2 field evaluations
        extra["first_step_evals"] = FIRST_STEP_EVALS if math.isfinite(rho0) else 2
    if auto is not None:
        extra["auto_rho"] = auto["rho"]
        extra["auto_rho_span"] = auto["rho_span"]
    stats = SolveStats(
        result=result,
        reason=reason,
        t_reached=t_reached,
        steps=steps,
        accepted_steps=int(sol.stats["num_accepted_steps"]),
        rejected_steps=int(sol.stats["num_rejected_steps"]),
        vf_evals=vf_evals,
        compile_s=timings[0],
        wall_s=timings[1],
        stopped_at=t_reached if stopped else None,
        stop_supported=True,
        vf_evals_counted_by=(
            "step count"
            if analytic_count
            else "callback"
            if callback_count
            else "solver state (accepted steps only)"
            if state_count
            else "not counted"
        ),
        extra=extra,
    )
    return stats, ok, stopped, (t_reached, theta_end, obs_end)


def _simulate_loss_clock(problem, run: RunSettings) -> Trajectory:
    """`simulate` with the loss clock (arguments validated by `simulate`)."""
    if run.stop is not None:
        raise ConfigError(
            "`stop` is not supported with the loss clock; use clock='log' (or stop at a "
            "physical time through `t1`)."
        )
    if run.dt0 is not None:
        raise ConfigError(
            "`dt0` is not supported with the loss clock (it steps in s = ∫L dt, and picks "
            "its first step in each segment); pass dt0=None."
        )
    if run.choice.implicit:
        raise ConfigError(
            f"the loss clock supports explicit solvers ('tsit5', 'dopri5', 'dopri8', 'rkc' "
            f"or a diffrax explicit solver object); got {run.choice.name!r}."
        )
    ts = run.save_times()
    if ts[-1] < run.t1:
        ts = np.append(ts, run.t1)
    check_save_memory(problem, len(ts), len(param_save_times(ts, run.save_params)), run.obs_bytes)
    config = run.config(
        problem, dt0=None, method=f"gradient flow ({run.choice.name}, loss clock dt/ds = 1/L)"
    )
    return solve_loss_clock(problem, run, ts=ts, config=config)
