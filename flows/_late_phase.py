"""Late-phase gradient flow (t ~ 10⁶–10¹²) with a loss-based clock.

For the logistic loss on separable data the late phase has L ~ 1/t and ‖W‖ ~ log t
(linear-teacher paper, §6; Lyu & Li 2020), so stepping in physical time costs O(t) steps.
`flows.simulate` already offers the log clock s = ln(1 + t). This module adds the
**loss clock** dt/ds = 1/L: with physical time t carried as a state,

    dθ/ds = −∇L(θ)/L(θ) = −∇ log L(θ),   dt/ds = 1/L(θ),   dE/ds = ‖∇L(θ)‖²/L(θ),

so s = ∫₀ᵗ L dt′ grows like log t and a run to t = 10¹² costs O(log t) steps whatever the
constants. Save times stay physical: the solve is cut into segments between consecutive
save times, each ended by a diffrax `Event` at t = t_next found by root finding; the
observables are computed inside the jitted segment at the exact save time.
"""

from __future__ import annotations

import dataclasses
import math
import time

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ._errors import ConfigError, SolverError
from ._problem import Problem
from ._simulate import (
    SOLVERS,
    Observables,
    _check_common,
    _Counter,
    _make_solver,
    _tree_sq_norm,
    check_initial_state,
    simulate,
)
from ._trajectory import Trajectory
from ._validate import as_int

__all__ = ["LATE_CLOCKS", "late_phase_flow", "late_save_times"]

#: Clocks of `late_phase_flow`: 'loss' (dt/ds = 1/L, here) and the two of `flows.simulate`.
LATE_CLOCKS = ("loss", "log", "physical")


def late_save_times(
    t1: float, n_save: int = 121, t0: float = 0.0, first: float = 1.0
) -> np.ndarray:
    """t0, then `n_save` − 1 log-spaced times from `first` to `t1` (the late-phase default)."""
    if not (isinstance(n_save, int) and n_save >= 2):
        raise ConfigError(f"`n_save` must be an integer ≥ 2; got {n_save!r}.")
    first = max(first, t0 + 1e-12)
    if t1 <= first:
        return np.linspace(t0, t1, n_save)
    return np.concatenate([[t0], np.geomspace(first, t1, n_save - 1)])


_COUNTER = _Counter()
_COMPILED: dict = {}


@dataclasses.dataclass(frozen=True)
class _Settings:
    solver: str
    rtol: float
    atol: float
    max_steps: int
    count_evals: bool
    observables: object


def _segment(settings: _Settings, problem, s0, y0, target, s_end):
    """Integrate the loss-clock field from (s0, y0) until t = target (event) or s = s_end."""

    def vector_field(s, y, prob):
        theta, _, _ = y
        loss, g = prob.loss_and_grad(theta)
        if settings.count_evals:
            jax.debug.callback(_COUNTER, ~jnp.isfinite(_tree_sq_norm(g)))
        h = 1.0 / loss  # dt/ds
        return jax.tree_util.tree_map(lambda v: -h * v, g), h * _tree_sq_norm(g), h

    scale = jnp.maximum(jnp.abs(target), 1.0)

    def cond(t, y, args, **kwargs):  # diffrax passes the clock value as `t`
        # relative residual: the root finder's |f| < atol test is then scale-free
        return (y[2] - target) / scale

    root = optx.Newton(rtol=1e-11, atol=1e-11)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        _make_solver(settings.solver, settings.rtol, settings.atol),
        s0,
        s_end,
        None,
        y0,
        args=problem,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=settings.rtol, atol=settings.atol),
        event=diffrax.Event(cond, root_finder=root),
        max_steps=settings.max_steps,
        throw=False,
    )
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


def _no_obs(problem, theta, t):
    return {}


def late_phase_flow(
    problem: Problem,
    *,
    t1: float,
    t0: float = 0.0,
    clock: str = "loss",
    solver: str = "tsit5",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    ts=None,
    n_save: int = 121,
    save_params: str = "ends",
    observables: Observables | None = None,
    max_steps: int = 200_000,
    progress: bool = False,
    count_evals: bool = True,
    throw: bool = True,
) -> Trajectory:
    """Exact gradient flow dθ/dt = −∇L(θ) to late physical times, with a choice of clock.

    **Arguments** (as `flows.simulate`, plus):
    - `clock`: 'loss' (default; dt/ds = 1/L, physical time carried as a state — for
      losses that decay to 0, e.g. the logistic loss on separable data), 'log'
      (s = ln(1 + t)) or 'physical' (the last two delegate to `flows.simulate`).
    - `ts` or `n_save`: physical save times; by default t0 and `n_save` − 1 log-spaced
      times from 1 to t1 (`late_save_times`).
    - `max_steps`: step budget of each segment between save times (loss clock), or of the
      whole solve (other clocks).

    **Returns:** a `Trajectory` (observables `loss`, `energy` = ∫‖∇L‖² dt,
    `energy_residual`; with the loss clock also `s`, the clock value at each save time).

    **Raises:** `SolverError` naming the physical time reached and what to try when a
    segment fails (max steps, non-finite state) or the loss clock overflows (L underflows
    to 0 so dt/ds = 1/L is infinite); `ConfigError` for bad arguments.

    Paper: linear teachers, §6 (late phase of gradient flow, Assumption 6.1).
    """
    if clock not in LATE_CLOCKS:
        raise ConfigError(f"`clock` must be one of {LATE_CLOCKS}; got {clock!r}.")
    t0, t1, rtol, atol = _check_common(t0, t1, rtol, atol, save_params)
    max_steps = as_int("max_steps", max_steps, minimum=1)
    check_initial_state(problem)
    if ts is None:
        ts = late_save_times(t1, n_save, t0)
    if clock != "loss":
        return simulate(
            problem,
            t1=t1,
            t0=t0,
            solver=solver,
            rtol=rtol,
            atol=atol,
            ts=ts,
            save_params=save_params,
            observables=observables,
            clock=clock,
            max_steps=max_steps,
            progress=progress,
            count_evals=count_evals,
            throw=throw,
        )
    if solver not in SOLVERS or solver == "kvaerno5":
        raise ConfigError(
            f"the loss clock supports the explicit solvers tsit5, dopri5, dopri8; got {solver!r}."
        )
    for name, val in (("rtol", rtol), ("atol", atol)):
        if not (math.isfinite(val) and val > 0):
            raise ConfigError(f"`{name}` must be > 0; got {val!r}.")
    if save_params not in ("all", "ends", "none"):
        raise ConfigError(f"`save_params` must be 'all', 'ends' or 'none'; got {save_params!r}.")
    if not (isinstance(max_steps, int) and max_steps >= 1):
        raise ConfigError(f"`max_steps` must be an integer ≥ 1; got {max_steps!r}.")
    ts = np.asarray(ts, dtype=np.float64)
    if ts.ndim != 1 or ts.size < 2 or np.any(np.diff(ts) <= 0) or not np.all(np.isfinite(ts)):
        raise ConfigError("`ts` must be a finite, strictly increasing 1-D array of ≥ 2 times.")
    if ts[0] < t0 or ts[-1] > t1:
        raise ConfigError(f"`ts` must lie within [t0, t1] = [{t0}, {t1}].")
    if ts[-1] < t1:
        ts = np.append(ts, t1)

    settings = _Settings(solver, rtol, atol, max_steps, count_evals, observables or _no_obs)
    key = (settings, jax.tree_util.tree_structure(problem)) + tuple(
        (v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)
    )
    # explicit dtypes: weakly-typed scalars would make the jitted segment retrace
    y = (problem.theta0, _f64(0.0), _f64(t0))
    s = _f64(0.0)
    start = time.perf_counter()
    seg = _COMPILED.get(key)
    fresh = seg is None  # only then does the first segment call include compilation
    if fresh:
        seg = eqx.filter_jit(_segment)
        _COMPILED[key] = seg

    def loss_fn(prob, th):
        return _loss_jit(prob, th)

    def obs0_fn(prob, th, t):  # observables at ts[0] when no integration precedes it
        return _obs0_jit(settings.observables, prob, th, t)

    _COUNTER.reset()
    compile_s = 0.0
    records, thetas, s_vals, t_vals = [], [], [], []
    steps = [0, 0, 0]
    keep = {"all": set(range(len(ts))), "ends": {0, len(ts) - 1}, "none": set()}[save_params]
    loss0 = float(loss_fn(problem, problem.theta0))
    failure = None
    for i, target in enumerate(ts):
        t_now = float(y[2])
        if target > t_now:
            loss_now = float(loss_fn(problem, y[0]))
            if not (loss_now > 0 and math.isfinite(loss_now)):
                failure = (
                    f"loss clock overflow: L(θ) = {loss_now:.3g}, so dt/ds = 1/L is not finite",
                    t_now,
                )
                break
            s_end = s + loss_now * (target - t_now) * 1.01 + 1e-12
            t_call = time.perf_counter()
            s_new, y_new, obs, st, result = seg(settings, problem, s, y, _f64(target), _f64(s_end))
            jax.block_until_ready(y_new)
            if fresh and (i == 1 or (i == 0 and target > t0)):
                compile_s = time.perf_counter() - t_call
            okay, n, acc, rej = (int(v) for v in st)
            steps[0] += n
            steps[1] += acc
            steps[2] += rej
            t_new = float(y_new[2])
            finite = all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(y_new))
            if not finite:
                failure = ("non-finite (NaN/Inf) state: the loss clock overflowed", t_now)
                break
            if not okay:
                reason = diffrax.RESULTS[result]
                if acc and rej > acc:
                    reason = f"step size collapsed ({rej} rejected vs {acc} accepted steps)"
                elif n >= max_steps:
                    reason = f"max_steps = {max_steps} reached within one segment"
                stalled = _stalled(problem, y_new[0], target - t_new, rtol)
                failure = (stalled or str(reason), t_new)
                break
            if abs(t_new - target) > 1e-8 * max(1.0, abs(target)):
                failure = (
                    f"the clock did not reach t = {target:.6g} (stopped at {t_new:.6g})",
                    t_new,
                )
                break
            s, y = s_new, (y_new[0], y_new[1], _f64(target))
        else:
            obs = obs0_fn(problem, y[0], _f64(target))
            obs["energy"] = y[1]
        records.append(obs)
        s_vals.append(float(s))
        t_vals.append(float(y[2]))
        if i in keep:
            thetas.append(y[0])
        if progress:
            print(f"  loss clock: t = {target:.4g}, s = {float(s):.4g}", flush=True)
    wall_s = time.perf_counter() - start - compile_s
    t_reached = float(y[2])
    stats = {
        "result": "successful" if failure is None else failure[0],
        "t_reached": t_reached,
        "steps": steps[0],
        "accepted_steps": steps[1],
        "rejected_steps": steps[2],
        "vf_evals": _COUNTER.n if count_evals else -1,
        "compile_s": compile_s,
        "wall_s": wall_s,
        "segments": len(records),
    }
    if failure is not None and throw:
        reason, t_at = failure
        raise SolverError(
            f"loss-clock solve stopped at t = {t_at:.6g} of t1 = {t1}: {reason}. "
            + _advice(reason),
            t_reached=t_at,
            reason=reason,
        )
    n_rec = len(records)
    obs = {k: np.stack([np.asarray(r[k]) for r in records]) for k in records[0]} if records else {}
    if obs:
        obs["energy_residual"] = np.abs(loss0 - obs["loss"] - obs["energy"])
        obs["s"] = np.asarray(s_vals)
    times = ts[:n_rec]
    kept = [i for i in range(n_rec) if i in keep]
    params = {}
    if thetas:
        params = {k: np.stack([np.asarray(t[k]) for t in thetas]) for k in thetas[0]}
    config = {
        "method": f"gradient flow ({solver}, loss clock dt/ds = 1/L)",
        "problem": problem.describe(),
        "solver": solver,
        "clock": "loss",
        "rtol": rtol,
        "atol": atol,
        "t0": t0,
        "t1": t1,
        "max_steps": max_steps,
        "save_params": save_params,
        "dtype": str(jnp.asarray(problem.x).dtype),
    }
    return Trajectory(
        times=times,
        observables=obs,
        param_times=times[kept],
        params=params,
        stats=stats,
        config=config,
        param_dims=problem.model.param_dims(),
        data={"x": np.asarray(problem.x), "y": np.asarray(problem.y)},
    )


def _stalled(problem: Problem, theta, remaining: float, rtol: float) -> str | None:
    """A reason when the loss has stopped decaying towards 0: over the time still to go, the
    flow would lower L by less than rtol·L (non-separable data, labels that are not ±1).
    The loss clock dt/ds = 1/L then needs ever longer s-steps for no progress."""
    loss, g = problem.loss_and_grad(theta)
    loss, g2 = float(loss), float(_tree_sq_norm(g))
    if math.isfinite(loss) and loss > 0 and g2 * max(remaining, 1.0) < rtol * loss:
        return (
            f"the loss stopped decaying towards 0 (L = {loss:.4g}, ‖∇L‖² = {g2:.3g}): the "
            "flow converged to a positive minimum"
        )
    return None


def _advice(reason: str) -> str:
    if reason.startswith("the loss stopped decaying"):
        return (
            "The loss clock is for losses that decay to 0 (logistic loss on linearly "
            "separable data with labels ±1). Check the data and labels, or use clock='log'."
        )
    if "overflow" in reason or "non-finite" in reason:
        return (
            "The loss underflowed (margins beyond ~700): use clock='log', stop earlier "
            "(smaller t1), or rescale the data."
        )
    if "step size" in reason:
        return (
            "The flow is stiff here, typically a neuron sliding along a leaky-ReLU kink "
            "(w·x_i = 0 for some point): loosen `rtol`, or use `flows.gradient_descent`."
        )
    if reason.startswith("max_steps"):
        return (
            "Two usual causes: the loss is not decaying to 0 (data not separable by the model, "
            "labels not ±1; the loss clock is for losses that do; use clock='log'), or "
            "neurons crossing activation kinks (ReLU-family nets), where steps are rejected; "
            "then increase `max_steps`, shorten `t1` or loosen `rtol`."
        )
    return "Increase `max_steps`, shorten `t1` or loosen `rtol`."
