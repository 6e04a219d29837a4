"""The loss clock's solve (`flows.LossClock`; `flows.simulate(clock='loss')`).

With physical time t carried as a state the flow in s, where dt/ds = 1/L, is

    dθ/ds = −∇L(θ)/L(θ),   dt/ds = 1/L(θ),   dE/ds = ‖∇L(θ)‖²/L(θ).

Save times stay physical: the solve is cut into segments between consecutive save times,
each ended by a diffrax `Event` at t = t_next found by root finding; the observables are
computed inside the jitted segment at the exact save time.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .._errors import SolverError
from .._solvers import EVAL_COUNTER, cached, pid_controller
from .._trees import all_finite, tree_sq_norm
from .arguments import no_observables
from .flow import energy_offset
from .stats import Result, SolveStats
from .trajectory import Trajectory, assemble_trajectory, stack_params

if TYPE_CHECKING:
    from .settings import RunSettings

__all__ = ["solve_loss_clock"]


@dataclasses.dataclass(frozen=True)
class _Settings:
    """The compile-time settings of a segment (hashable: part of the compile key); the
    tolerances are run-time arguments of `_segment`, so other tolerances reuse it."""

    max_steps: int
    count_evals: bool
    observables: Callable[..., Mapping[str, Any]]
    error_norm: str = "rms"


def _segment(settings: _Settings, solver, problem, tols, s0, y0, target, s_end):
    """Integrate the loss-clock field from (s0, y0) until t = target (event) or s = s_end,
    with the step controller's tolerances `tols` = (rtol, atol) (an array)."""

    def vector_field(s, y, prob):
        theta, _, _ = y
        loss, g = prob.loss_and_grad(theta)
        if settings.count_evals:
            jax.debug.callback(EVAL_COUNTER, ~jnp.isfinite(tree_sq_norm(g)))
        h = 1.0 / loss  # dt/ds
        return jax.tree_util.tree_map(lambda v: -h * v, g), h * tree_sq_norm(g), h

    scale = jnp.maximum(jnp.abs(target), 1.0)

    def cond(t, y, args, **kwargs):  # diffrax passes the clock value as `t`
        # relative residual: the root finder's |f| < atol test is then scale-free
        return (y[2] - target) / scale

    root = optx.Newton(rtol=1e-11, atol=1e-11)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        solver,
        s0,
        s_end,
        None,
        y0,
        args=problem,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=pid_controller(tols[0], tols[1], settings.error_norm, solver=solver),
        event=diffrax.Event(cond, root_finder=root),
        max_steps=settings.max_steps,
        throw=False,
    )
    assert sol.ts is not None  # SaveAt(t1=True) saves the final time
    s1 = sol.ts[-1]
    y1 = jax.tree_util.tree_map(lambda v: v[-1], sol.ys)
    theta1 = y1[0]
    obs = dict(settings.observables(problem, theta1, y1[2]))
    obs["loss"] = problem.loss(theta1)
    obs["energy"] = y1[1]
    okay = (sol.result == diffrax.RESULTS.successful) | (
        sol.result == diffrax.RESULTS.event_occurred
    )
    stats = (
        okay,
        sol.stats["num_steps"],
        sol.stats["num_accepted_steps"],
        sol.stats["num_rejected_steps"],
    )
    return s1, y1, obs, stats, sol.result


@eqx.filter_jit
def _loss_jit(prob, th):
    return prob.loss(th)


@eqx.filter_jit
def _obs0_jit(obs_fn, prob, th, t):  # module level: compiled once per observables function
    return {**obs_fn(prob, th, t), "loss": prob.loss(th)}


def _f64(v):
    return jnp.asarray(v, dtype=jnp.float64)


def solve_loss_clock(problem, run: RunSettings, *, ts: np.ndarray, config: dict) -> Trajectory:
    """The loss-clock flow from θ(0) at t = t0 through the physical save times `ts`
    (validated by `flows.simulate`, ending at t1), with `run`'s solver, tolerances, norm and
    observables; `run.max_steps` per segment. Observable `s`
    records the clock at each save time.

    **Raises** `SolverError` naming the physical time reached and what to try when a
    segment fails (max steps, non-finite state, a loss that stopped decaying) or the clock
    overflows (L underflows to 0, so dt/ds = 1/L is infinite); with `throw=False` the save
    times reached are returned instead, `stats.result` naming the failure. The tolerances
    are run-time values."""
    choice, rtol, t0, t1, max_steps = run.choice, run.rtol, run.t0, run.t1, run.max_steps
    count_evals = run.count_evals is not False
    settings = _Settings(max_steps, count_evals, run.observables or no_observables, run.error_norm)
    tols = _f64(np.array([rtol, run.atol]))
    key = ("loss clock", settings, choice.key, jax.tree_util.tree_structure(problem)) + tuple(
        (v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)
    )
    # explicit dtypes: weakly-typed scalars would make the jitted segment retrace
    s = _f64(0.0)
    start = time.perf_counter()
    # only when built now does the first segment call include compilation
    seg, fresh = cached(key, lambda: eqx.filter_jit(_segment))

    EVAL_COUNTER.reset()
    compile_s = 0.0
    records, thetas, s_vals = [], [], []
    steps = [0, 0, 0]
    keep = {"all": set(range(len(ts))), "ends": {0, len(ts) - 1}, "none": set()}[run.save_params]
    loss0 = float(_loss_jit(problem, problem.theta0))
    # the state carries E + |L(θ(0))| (`energy_offset`); the records give E
    offset = float(energy_offset(loss0))
    y = (problem.theta0, _f64(offset), _f64(t0))
    failure = None  # (Result, reason, t)
    for i, target in enumerate(ts):
        t_now = float(y[2])
        if target > t_now:
            loss_now = float(_loss_jit(problem, y[0]))
            if not (loss_now > 0 and math.isfinite(loss_now)):
                what = (
                    f"the loss is negative, L(θ) = {loss_now:.4g}; the loss clock's "
                    "dt/ds = 1/L needs L > 0"
                    if loss_now < 0
                    else f"loss clock overflow: L(θ) = {loss_now:.3g}, so dt/ds = 1/L is not finite"
                )
                failure = (Result.clock_overflow, what, t_now)
                break
            s_end = s + loss_now * (target - t_now) * 1.01 + 1e-12
            t_call = time.perf_counter()
            s_new, y_new, obs, st, code = seg(
                settings, choice.solver, problem, tols, s, y, _f64(target), _f64(s_end)
            )
            jax.block_until_ready(y_new)
            if fresh and (i == 1 or (i == 0 and target > t0)):
                compile_s = time.perf_counter() - t_call
            obs["energy"] = obs["energy"] - offset
            okay, n, acc, rej = (int(v) for v in st)
            steps[0] += n
            steps[1] += acc
            steps[2] += rej
            failure = _segment_failure(
                problem, run, (okay, n, acc, rej), code, y_new, t_now, target
            )
            if failure is not None:
                break
            s, y = s_new, (y_new[0], y_new[1], _f64(target))
        else:
            obs = _obs0_jit(settings.observables, problem, y[0], _f64(target))
            obs["energy"] = y[1] - offset
        records.append(obs)
        s_vals.append(float(s))
        if i in keep:
            thetas.append(y[0])
        if run.progress:
            print(f"  loss clock: t = {target:.4g}, s = {float(s):.4g}", flush=True)
    wall_s = time.perf_counter() - start - compile_s
    if failure is None:
        result, reason = Result.successful, "successful"
    else:
        result, reason, t_at = failure
        if run.throw:
            raise SolverError(
                f"loss-clock solve stopped at t = {t_at:.6g} of t1 = {t1}: {reason}. "
                + _advice(result, reason, problem),
                t_reached=t_at,
                reason=reason,
            )
    stats = SolveStats(
        result=result,
        reason=reason,
        t_reached=float(y[2]),
        steps=steps[0],
        accepted_steps=steps[1],
        rejected_steps=steps[2],
        vf_evals=EVAL_COUNTER.n if count_evals else None,
        compile_s=compile_s,
        wall_s=wall_s,
        segments=len(records),
    )
    n_rec = len(records)
    obs = {k: np.stack([np.asarray(r[k]) for r in records]) for k in records[0]} if records else {}
    times = ts[:n_rec]
    kept = [i for i in range(n_rec) if i in keep]
    params = stack_params(thetas)
    traj = assemble_trajectory(
        problem,
        times=times,
        observables=obs,
        param_times=times[kept],
        params=params,
        stats=stats,
        config=config,
        loss0=loss0,
        certify_rtol=rtol,
    )
    if obs:
        traj.observables["s"] = np.asarray(s_vals)
    return traj


def _segment_failure(problem, run: RunSettings, counts, code, y_new, t_now, target):
    """(Result, reason, t) of a loss-clock segment that failed — a non-finite state, the
    solver's failure (step-size collapse, max steps, a stalled loss) or a clock that fell
    short of its target — else None."""
    okay, n, acc, rej = counts
    t_new = float(y_new[2])
    if not all_finite(y_new):
        return (
            Result.clock_overflow,
            "non-finite (NaN/Inf) state: the loss clock overflowed",
            t_now,
        )
    if not okay:
        result, reason = Result.solver_failed, str(diffrax.RESULTS[code])
        if acc and rej > acc:
            result = Result.step_size_collapsed
            reason = f"step size collapsed ({rej} rejected vs {acc} accepted steps)"
        elif n >= run.max_steps:
            result = Result.max_steps_reached
            reason = f"max_steps = {run.max_steps} reached within one segment"
        stalled = _stalled(problem, y_new[0], target - t_new, run.rtol)
        if stalled:
            result, reason = Result.loss_stalled, stalled
        return (result, reason, t_new)
    if abs(t_new - target) > 1e-8 * max(1.0, abs(target)):
        return (
            Result.clock_short,
            f"the clock did not reach t = {target:.6g} (stopped at {t_new:.6g})",
            t_new,
        )
    return None


def _stalled(problem, theta, remaining: float, rtol: float) -> str | None:
    """A reason when the loss has stopped decaying towards 0: over the time still to go, the
    flow would lower L by less than rtol·L (non-separable data, labels that are not ±1).
    The loss clock dt/ds = 1/L then needs ever longer s-steps for no progress."""
    loss, g = problem.loss_and_grad(theta)
    loss, g2 = float(loss), float(tree_sq_norm(g))
    if math.isfinite(loss) and loss > 0 and g2 * max(remaining, 1.0) < rtol * loss:
        return (
            f"the loss stopped decaying towards 0 (L = {loss:.4g}, ‖∇L‖² = {g2:.3g}): the "
            "flow converged to a positive minimum"
        )
    return None


def _advice(result: Result, reason: str = "", problem=None) -> str:
    """What to try after a failed loss-clock solve; `reason` and `problem` keep it to what
    happened (a negative loss is no underflow; a tanh net has no kink to blame)."""
    if result is Result.loss_stalled:
        return (
            "The loss clock is for losses that decay to 0 (logistic loss on linearly "
            "separable data with labels ±1). Check the data and labels, or use clock='log'."
        )
    if result is Result.clock_overflow and reason.startswith("the loss is negative"):
        return (
            "The loss clock is for losses that are positive and decay to 0 (logistic loss "
            "on linearly separable data with labels ±1); this one is not. Use clock='log' "
            "or clock='physical', or check the loss."
        )
    if result in (Result.clock_overflow, Result.nonfinite):
        return (
            "The loss underflowed (margins beyond ~700): use clock='log', stop earlier "
            "(smaller t1), or rescale the data."
        )
    if result is Result.step_size_collapsed:
        model = getattr(problem, "model", None)
        describe = getattr(model, "describe", None)
        described = str(describe() if callable(describe) else "").lower()
        where = (
            ", typically a neuron sliding along a leaky-ReLU kink (w·x_i = 0 for some point)"
            if "relu" in described
            else ""
        )
        return f"The flow is stiff here{where}: loosen `rtol`, or use `flows.gradient_descent`."
    if result is Result.max_steps_reached:
        return (
            "Two usual causes: the loss is not decaying to 0 (data not separable by the model, "
            "labels not ±1; the loss clock is for losses that do; use clock='log'), or "
            "neurons crossing activation kinks (ReLU-family nets), where steps are rejected; "
            "then increase `max_steps`, shorten `t1` or loosen `rtol`."
        )
    return "Increase `max_steps`, shorten `t1` or loosen `rtol`."
