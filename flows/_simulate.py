"""Exact gradient flow dθ/dt = −∇L(θ) with diffrax: `simulate`, one entry point for every
solver (a name or a diffrax solver object, `flows._solvers`) and every clock (physical,
log, loss; `flows._clocks`). The physical and log clocks are solved here; the loss clock's
segmented solve is `flows._loss_clock`."""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ._clocks import AbstractClock, LossClock, PhysicalClock, as_clock
from ._compile import compile_program
from ._errors import ConfigError, SolverError
from ._loss_clock import solve_loss_clock
from ._misc import tree_sq_norm
from ._problem import Problem, available_bytes
from ._solvers import (
    AUTO_ESERK_MAX_RTOL,
    AUTO_STIFF_RHO_SPAN,
    EVAL_COUNTER,
    FIRST_STEP_STABILITY,
    SolverChoice,
    cached,
    check_error_norm,
    counts_own_evals,
    has_stability_cap,
    initial_step,
    pid_controller,
    resolve_solver,
    runtime_solver,
    runtime_tolerances,
    solver_report,
    spectral_radius,
)
from ._solvers import SOLVERS as SOLVERS
from ._stats import Result, SolveStats, advice, failure_reason
from ._trajectory import GlobalError, Trajectory, assemble_trajectory, flat_params
from ._validate import (
    MAX_SAVES,
    MAX_STEPS,
    as_float,
    as_int,
    as_tolerance,
    check_bytes,
    evaluate_abstractly,
    short_repr,
    tracer_advice,
)

__all__ = [
    "Observables",
    "StopCondition",
    "simulate",
    "stop_at_loss",
    "stop_when_converged",
]

# `SOLVERS` is re-exported above for callers not yet moved to `flows._solvers` (or the
# public `flows.SOLVERS`), where the solver registry and its checks live.

#: An observables function: (problem, θ, t) → {name: array}. Evaluated inside the solve.
Observables = Callable[[Problem, dict, jax.Array], dict]


#: A stop condition: (problem, θ, t) → scalar; the run ends where it first falls to 0.
StopCondition = Callable[[Problem, dict, jax.Array], jax.Array]


def no_observables(problem, theta, t):
    """The observables function that records nothing beyond loss and energy."""
    return {}


@dataclasses.dataclass(frozen=True)
class stop_at_loss:  # noqa: N801 (used like a function: `stop=stop_at_loss(1e-3)`)
    """Stop condition for `simulate(stop=…)`: end the run when the loss reaches `eps`."""

    eps: float

    def __call__(self, problem, theta, t):
        return problem.loss(theta) - self.eps


@dataclasses.dataclass(frozen=True)
class stop_when_converged:  # noqa: N801 (used like a function)
    """Stop condition for `simulate(stop=…)`: end the run when the flow has stopped moving
    on the scale of log t,

        ln(10) · t · ‖∇L(θ)‖ ≤ atol + rtol · ‖θ‖,

    i.e. θ would move by less than `atol + rtol·‖θ‖` over the next decade of t if the
    field stayed as it is (dθ/d ln t = −t∇L; ‖·‖ the Euclidean norm over all parameters;
    t is physical time on every clock). A run that never gets there (a loss with no
    minimizer, where ‖θ‖ grows like log t) runs to its `t1`, and the trajectory says it
    was not stopped (`stats.result`). The condition is checked at every step: one
    gradient more per step. θ's limit is then θ(T) to within about that change; for a
    scalar observable's limit with an error bar, use `flows.claims.limit_in_time` on
    log-spaced saves."""

    rtol: float = 1e-6
    atol: float = 1e-12

    def __post_init__(self):
        for name in ("rtol", "atol"):
            v = getattr(self, name)
            if not (isinstance(v, numbers.Real) and math.isfinite(v) and float(v) >= 0):
                raise ConfigError(
                    f"stop_when_converged: `{name}` must be a finite number ≥ 0; got {v!r}."
                )
        if self.rtol == 0 and self.atol == 0:
            raise ConfigError(
                "stop_when_converged: `rtol` and `atol` are both 0, so the run could never "
                "stop; give e.g. rtol=1e-6."
            )

    def __call__(self, problem, theta, t):
        g = jnp.sqrt(tree_sq_norm(problem.grad(theta)))
        size = jnp.sqrt(tree_sq_norm(theta))
        return math.log(10.0) * t * g - (self.atol + self.rtol * size)


def describe_stop(stop) -> str:
    if stop is None:
        return "none"
    if isinstance(stop, stop_at_loss):
        return f"loss <= {stop.eps}"
    if isinstance(stop, stop_when_converged):
        return (
            f"converged: ln(10)·t·‖∇L‖ <= {stop.atol:g} + {stop.rtol:g}·‖θ‖ "
            "(change per decade of t)"
        )
    return getattr(stop, "__name__", repr(stop))


# --- argument checks (shared with flows._batch and flows._baselines) -------------------


def check_n_save(n_save) -> int:
    """`n_save` as an int in [2, `MAX_SAVES`] (before anything of that length is allocated)."""
    return as_int(
        "n_save",
        n_save,
        minimum=2,
        maximum=MAX_SAVES,
        hint="Save at fewer times (a few hundred draw any curve), or observables only.",
    )


def check_max_steps(max_steps) -> int:
    """`max_steps` as an int in [1, `MAX_STEPS`]."""
    return as_int(
        "max_steps",
        max_steps,
        minimum=1,
        maximum=MAX_STEPS,
        hint="It is a budget of solver steps; a stiff run wants a stiff solver instead.",
    )


def save_times(t0: float, t1: float, ts, n_save) -> np.ndarray:
    """`ts` checked (1-D, finite, increasing, within [t0, t1], at most `MAX_SAVES`), or
    `n_save` equally spaced times on [t0, t1]."""
    if ts is None:
        return np.linspace(t0, t1, check_n_save(n_save))
    try:
        ts = np.asarray(ts, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"`ts` must be a 1-D array of real save times; got {ts!r}.") from None
    if ts.ndim != 1 or ts.size < 2:
        raise ConfigError(
            f"`ts` must be a 1-D array of at least 2 save times; got shape {ts.shape}."
        )
    if ts.size > MAX_SAVES:
        raise ConfigError(
            f"`ts` holds {ts.size} save times; at most {MAX_SAVES} are supported. Save at "
            "fewer times (flows.log_save_times(t1, n) for late-phase runs)."
        )
    if not np.all(np.isfinite(ts)) or np.any(np.diff(ts) <= 0):
        raise ConfigError("`ts` must be finite and strictly increasing.")
    if ts[0] < t0 or ts[-1] > t1:
        raise ConfigError(f"`ts` must lie within [t0, t1] = [{t0}, {t1}]; got [{ts[0]}, {ts[-1]}].")
    return ts


def check_span(t0, t1) -> tuple[float, float]:
    """(t0, t1) as Python floats with t1 > t0 (NumPy and 0-d JAX numbers accepted)."""
    t0, t1 = as_float("t0", t0), as_float("t1", t1)
    if not t1 > t0:
        raise ConfigError(f"`t1` must be > t0 = {t0}; got t1 = {t1}.")
    return t0, t1


def check_save_params(save_params) -> None:
    if save_params not in ("all", "ends", "none"):
        raise ConfigError(
            f"`save_params` must be 'all', 'ends' or 'none'; got {save_params!r} "
            "('none' keeps only observables, for very wide networks)."
        )


#: Tightest rtol accepted: float64's unit roundoff. A relative tolerance below it asks for
#: more than the state can represent; such a run spun until `max_steps` (`flows simulate
#: multistage --rtol 1e-30`: ~70 s, then exit 3). float32 problems have a stricter floor
#: (`FLOAT32_MIN_RTOL`, checked with the solver).
MIN_RTOL = float(np.finfo(np.float64).eps)


def check_common(t0, t1, rtol, atol, save_params):
    """Validated (t0, t1, rtol, atol); tolerances must lie in (0, 1) (`as_tolerance`) and
    rtol must not be below float64's unit roundoff (`MIN_RTOL`)."""
    t0, t1 = check_span(t0, t1)
    rtol = as_tolerance("rtol", rtol, example="1e-6")
    if rtol < MIN_RTOL:
        raise ConfigError(
            f"`rtol` = {rtol:g} is below float64's unit roundoff ({MIN_RTOL:.3g}): no solver "
            "can meet a relative error smaller than the rounding of the state itself. Use "
            "rtol ≥ 1e-13 for the tightest meaningful runs."
        )
    atol = as_tolerance("atol", atol, example="1e-9")
    check_save_params(save_params)
    return t0, t1, rtol, atol


def check_dt0(dt0) -> float | None:
    if dt0 is None:
        return None
    return as_float("dt0", dt0, positive=True, hint="Or pass dt0=None to let the solver choose.")


def check_problem(problem, name: str = "problem") -> Problem:
    """`problem` if it is a `flows.Problem`, else `ConfigError` saying how to build one."""
    if not isinstance(problem, Problem):
        raise ConfigError(
            f"`{name}` must be a flows.Problem; got {type(problem).__name__} "
            f"{short_repr(problem)}. Build one with flows.make_problem(model, data, key=0) "
            "(or theta0=… for a model given as a function f(params, x))."
        )
    return problem


def check_initial_state(problem: Problem) -> None:
    """Refuse a θ(0) at which the loss or ‖∇L‖² is NaN/Inf (an initialization so large that
    the network overflows): no solver can start there, and each would spend its whole step
    budget finding that out. A model or loss that JAX cannot differentiate (`np.` on
    traced values, a Python `if` on them) is refused with what to write instead."""
    try:
        loss, g = problem.loss_and_grad(problem.theta0)
    except ConfigError:
        raise
    except Exception as exc:
        advice = tracer_advice(exc)
        if advice is None:
            raise
        raise ConfigError(
            f"the model or loss cannot be differentiated by JAX at θ(0): {advice} "
            f"(JAX: {type(exc).__name__})"
        ) from exc
    loss, g2 = float(loss), float(tree_sq_norm(g))
    if not (math.isfinite(loss) and math.isfinite(g2)):
        raise ConfigError(
            f"the loss or its gradient is not finite at θ(0) (L = {loss:.4g}, ‖∇L‖² = "
            f"{g2:.4g}): the initialization overflows the network. Use a smaller init scale "
            "(or check the data for huge values)."
        )


def _first_t(problem: Problem, t0: float):
    return jnp.asarray(t0, dtype=problem.dtype)


def check_observables(problem: Problem, observables, t0: float = 0.0) -> tuple[Callable, int]:
    """`observables` (None: none) checked on a first evaluation at (θ(0), t0), traced as the
    solve traces it: a function returning a dict {name: array or number} of real values,
    names without `/` (netCDF reserves it). Returns the function and the bytes one save of
    its values takes (for `check_save_memory`). Anything else is a `ConfigError` naming
    `observables` and what it returned."""
    if observables is None:
        return no_observables, 0
    if not callable(observables):
        raise ConfigError(
            "`observables` must be a function (problem, θ, t) -> {name: array}, e.g. "
            f"multistage.multistage_observables; got {short_repr(observables)}."
        )
    call = f"observables(problem, θ(0), t = {t0:g})"
    out = evaluate_abstractly(
        "observables", observables, problem, problem.theta0, _first_t(problem, t0), call=call
    )
    expect = "a dict {name: array}, e.g. {'norm_a': jnp.linalg.norm(theta['a'])}"
    if not isinstance(out, Mapping):
        raise ConfigError(
            f"`observables` must return {expect}; {call} returned "
            f"{type(out).__name__} {short_repr(out)}."
        )
    nbytes = 0
    for key, value in out.items():
        if not isinstance(key, str) or not key or "/" in key:
            raise ConfigError(
                f"`observables` must return a dict whose names are non-empty strings without "
                f"'/' (they become netCDF variables); {call} returned the name {key!r}."
            )
        if isinstance(value, numbers.Real | np.generic) and not isinstance(value, str):
            arr = np.asarray(value)
            value = jax.ShapeDtypeStruct(arr.shape, arr.dtype)
        if not isinstance(value, jax.ShapeDtypeStruct):
            raise ConfigError(
                f"`observables` must return {expect}; the value of {key!r} is "
                f"{type(value).__name__} {short_repr(value)}, not one array or number."
            )
        if value.dtype.kind not in "biuf":
            raise ConfigError(
                f"`observables` must return real values; {key!r} has dtype {value.dtype}. "
                "Return the real part or the magnitude (jnp.real, jnp.abs)."
            )
        nbytes += math.prod(value.shape) * value.dtype.itemsize
    return observables, nbytes


def check_stop(
    problem: Problem, stop: StopCondition | None, t0: float = 0.0
) -> StopCondition | None:
    """`stop` (None: none) checked on a first evaluation at (θ(0), t0): a function (problem,
    θ, t) → one real number (the run ends where it falls to 0), else `ConfigError`."""
    if stop is None:
        return None
    expect = (
        "a function (problem, θ, t) -> one real number, the run ending where it falls to 0 "
        "(e.g. flows.stop_at_loss(1e-3))"
    )
    if not callable(stop):
        raise ConfigError(f"`stop` must be {expect}; got {short_repr(stop)}.")
    call = f"stop(problem, θ(0), t = {t0:g})"
    out = evaluate_abstractly(
        "stop", stop, problem, problem.theta0, _first_t(problem, t0), call=call
    )
    if isinstance(out, numbers.Real | np.generic) and not isinstance(out, bool | np.bool_):
        return stop
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise ConfigError(
            f"`stop` must be {expect}; {call} returned {type(out).__name__} {short_repr(out)}."
        )
    if out.shape != ():
        raise ConfigError(
            f"`stop` must be {expect}; {call} returned an array of shape {out.shape}. Reduce "
            "it to one number (e.g. jnp.min(...) to stop when the first entry reaches 0)."
        )
    if out.dtype.kind not in "iuf":
        what = "a bool" if out.dtype.kind == "b" else f"dtype {out.dtype}"
        raise ConfigError(
            f"`stop` must be {expect}; {call} returned {what}. Return a signed distance "
            "instead (e.g. jnp.where(done, -1.0, 1.0))."
        )
    return stop


def check_save_memory(problem: Problem, n_saves: int, n_param_saves: int, obs_bytes: int):
    """Refuse before the solve a run whose saved arrays (observables, loss and energy at
    `n_saves` times, θ at `n_param_saves`) cannot fit in the device's memory."""
    item = np.dtype(problem.dtype).itemsize
    need = n_saves * (obs_bytes + 2 * item) + n_param_saves * problem.n_params * item
    check_bytes(
        f"saving {n_saves} times ({n_param_saves} with θ, {problem.n_params} parameters)",
        need,
        available_bytes(),
        hint="save at fewer times, or pass save_params='ends' or 'none'.",
    )


def param_save_times(ts: np.ndarray, save_params: str) -> np.ndarray:
    return {"all": ts, "ends": ts[[0, -1]], "none": ts[:0]}[save_params]


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

    def save_obs(s, y, prob):
        theta, energy = y
        out = dict(obs_fn(prob, theta, clock.to_physical(s)))
        out["loss"] = prob.loss(theta)
        out["energy"] = energy
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

        # downcrossing only: a run that starts at or below 0 is not stopped at t0
        event = diffrax.Event(
            cond, root_finder=optx.Newton(rtol=1e-10, atol=1e-10), direction=False
        )
    if pts.shape[0]:
        subs.append(diffrax.SubSaveAt(ts=pts, fn=lambda t, y, prob: y[0]))
    meter = diffrax.TextProgressMeter() if settings.progress else diffrax.NoProgressMeter()
    rkc = counts_own_evals(solver)  # its counts are in its state
    y0 = (problem.theta0, jnp.zeros((), dtype=problem.dtype))
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
        stepsize_controller=pid_controller(tol[0], tol[1], settings.error_norm),
        max_steps=settings.max_steps,
        throw=False,
        progress_meter=meter,
        event=event,
    )


def measure_stiffness(problem: Problem, t0: float, t1: float, rtol: float) -> dict:
    """What `simulate(solver='auto')` chooses from: ρ, the spectral radius of ∇²L(θ(0))
    (20 Hessian-vector products, power iteration; an estimate from below), ρ·(t1 − t0)
    in physical time, and the rule (`flows.auto_solver`)."""
    fn, _ = cached(
        ("stiffness", jax.tree_util.tree_structure(problem))
        + tuple((v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)),
        lambda: jax.jit(
            lambda prob: spectral_radius(
                lambda th: jax.tree_util.tree_map(jnp.negative, prob.grad(th)), prob.theta0, 20
            )
        ),
    )
    rho = float(fn(problem))
    return {
        "rho": rho,
        "rho_span": rho * (t1 - t0),
        "rtol": rtol,
        "rule": (
            f"tsit5 if rho*(t1-t0) < {AUTO_STIFF_RHO_SPAN:g}, else rkc at rtol >= "
            f"{AUTO_ESERK_MAX_RTOL:g}, else rock4"
        ),
    }


#: What `simulate` says when the model's activation has kinks (ReLU, leaky ReLU).
KINKS_WARNING = (
    "this model's activation has kinks: `simulate` integrates its flow as if the field were "
    "smooth (switches are not located; error control is unreliable at kinks, and a sliding "
    "mode can stall the solver). Use flows.simulate_nonsmooth for the exact flow through "
    "the kinks, or a smoothed activation (smoothing=ε)."
)


#: `simulate(…, global_error=True)` solves again at tolerances this many times tighter.
GLOBAL_ERROR_FACTOR = 10.0


def with_global_error(plain: Trajectory, companion, factor: float) -> Trajectory:
    """`plain` with its `global_error` from `companion()` (a run of the same problem at
    tolerances `factor` times tighter); a failed companion leaves the estimate missing."""
    import dataclasses as _dc

    def missing(why: str) -> Trajectory:
        ge = GlobalError(factor, {}, {}, None, float("nan"), why)
        plain.config["global_error"] = ge.summary()
        return _dc.replace(plain, global_error=ge)

    if not plain.stats["result"] == "successful":
        return missing(f"the run itself did not succeed ({plain.stats['result']})")
    try:
        tight = companion()
    except (SolverError, ConfigError) as e:
        return missing(f"the companion solve at tolerances /{factor:g} failed: {e}")
    same = plain.times.shape == tight.times.shape and np.allclose(
        plain.times, tight.times, rtol=0, atol=0
    )
    if not same:
        return missing(
            "the companion's save times differ from the run's (a stop event "
            "triggered at a different time)"
        )
    obs = {
        k: np.abs(np.asarray(v, float) - np.asarray(tight.observables[k], float))
        for k, v in plain.observables.items()
        if k in tight.observables and np.issubdtype(np.asarray(v).dtype, np.number)
    }
    par = {
        k: np.abs(np.asarray(v, float) - np.asarray(tight.params[k], float))
        for k, v in plain.params.items()
        if k in tight.params and np.shape(v) == np.shape(tight.params[k])
    }
    w0 = float(plain.stats["wall_s"])
    cost = (w0 + float(tight.stats["wall_s"])) / w0 if w0 > 0 else float("nan")
    ge = GlobalError(factor, obs, par, tight, cost)
    plain.config["global_error"] = ge.summary()
    return _dc.replace(plain, global_error=ge)


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
    global_error: bool = False,
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
      'rkc', 'eserk4', 'rock4'), 'auto' (measures ρ·(t1 − t0), ρ the Hessian's spectral radius at
      θ(0) by power iteration: 'tsit5' below 250, else 'rkc' at rtol ≥ 1e-6 and 'rock4'
      below; `flows.auto_solver`; the numbers and the choice are recorded in
      `config["solver_auto"]` and `stats.extra` `auto_rho`, `auto_rho_span`),
      or a diffrax solver object (any adaptive `diffrax.AbstractSolver`, e.g.
      `diffrax.Dopri5()`, `flows.RKC2(rho_every=10)`). An object equal to a named solver is
      recorded under its name; the config records every solver's class and settings.
      RKC2 ('rkc' is `RKC2(nonstiff='tsit5', tolerances=(rtol, atol))`) also reports
      `stats.extra`: `jvp_evals` (Hessian-vector products of its power iteration;
      `vf_evals` counts each once more, as the primal evaluation inside it),
      `spectral_radius`, `last_stages`, `nonstiff_steps` (accuracy-limited steps that it
      took with its non-stiff method; see `flows.RKC2`), `rho_redos` and `split_steps`;
      ESERK4 ('eserk4', `flows.ESERK4`) and ROCK4 ('rock4', `flows.ROCK4`) the same.
    - `rtol`, `atol`: tolerances of diffrax's PID step-size controller.
    - `error_norm`: the norm in which that controller measures the local error scaled by
      atol + rtol·max(|y_n|, |y_{n+1}|) over the whole state (θ and the energy): 'rms'
      (default, diffrax's `optimistix.rms_norm`) or 'max' (`optimistix.max_norm`: every
      component within tolerance). 'rkc', 'eserk4' and 'rock4' judge their own steps in the same
      norm (`flows.RKC2`, `error_norm`). With 'rms', where the error sits in a few of many
      parameters (a few neurons of a wide net) the largest parameter error can exceed
      rtol by up to sqrt(number of parameters); 'max' bounds it at the cost of more
      steps. Recorded as `config["error_norm"]`.
    - `ts` or `n_save`: physical save times (default `n_save` equally spaced points on
      [t0, t1]; `flows.log_save_times` for late-phase runs).
    - `save_params`: θ at every save time ('all'), at the first and last ('ends'), or
      never ('none'; observables only, for very wide networks).
    - `observables`: (problem, θ, t) → dict of arrays, evaluated inside the solve at each
      save time; `loss` and the energy terms are always recorded. Checked (as `stop` is)
      on a first, abstract evaluation at (θ(0), t0) before anything is compiled: a
      `ConfigError` names what it returned, or what to change when JAX cannot trace it.
    - `clock`: what the solver steps in — a clock object or its name: 'physical' (t),
      'log' (s = ln(1 + t); for late-phase runs to t ~ 10⁶–10¹², at a cost growing like
      log t) or 'loss' (dt/ds = 1/L, t carried as a state, for losses decaying to 0; solved
      segment by segment between save times, `max_steps` per segment, t1 always saved, the
      observable `s` records the clock; no `stop`, no `dt0`, explicit solvers only; see
      `flows.LossClock`). Save times stay physical.
    - `max_steps`: solver step budget (at most `MAX_STEPS` = 10¹²; `n_save` and `ts` at
      most `MAX_SAVES` = 10⁷ times, and what they save must fit in memory). `dt0`: initial
      step (None: chosen by the toolkit from the tolerances, and for Tsit5/Dopri from
      ρ(θ(0)), `flows._solvers.initial_step`;
      recorded as `stats.extra["dt0"]`, with `first_step_evals` — 22 evaluations with the
      ρ measurement (then `rho0`), 2 without — not in `vf_evals`).
    - `progress`: print a progress meter. `count_evals`: how to count vector-field calls:
      'auto' (default) from the step count for Tsit5, Dopri5, Dopri8 (`EVALS_PER_STEP`), from
      the solver's own count for RKC2 (exact on accepted steps; evaluations of rejected
      steps are not seen — `stats.rejected_steps` says how many) and by a host callback
      for the others and for the loss clock; True: always by callback (costs ~10 % on a
      wide net on CPU, and synchronizes on accelerators); False: not at all.
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
      observable and parameter, the companion run, the cost) and its summary
      `config["global_error"]`. Costs about 1.5–2.5 × the plain run; a companion that
      fails leaves the estimate missing, with why.

    **Returns:** a `Trajectory` whose `stats` is a `SolveStats` (also readable as the
    mapping `stats["steps"]`, …). `stats.certificate` (`flows._stats.certificate`) says
    whether the energy identity and the monotone loss hold within 100·rtol·L(0)
    (`CERTIFICATE_FACTOR`); the CLI refuses to save a run where they do not.
    """
    if global_error:
        same: dict[str, Any] = {
            "t1": t1, "t0": t0, "solver": solver, "rtol": rtol, "atol": atol,
            "error_norm": error_norm, "ts": ts, "n_save": n_save, "save_params": save_params,
            "observables": observables, "clock": clock, "max_steps": max_steps, "dt0": dt0,
            "count_evals": count_evals, "stop": stop,
        }  # fmt: skip
        plain = simulate(problem, **same, progress=progress, throw=throw)
        f = GLOBAL_ERROR_FACTOR
        tight: dict[str, Any] = {**same, "rtol": rtol / f, "atol": atol / f}
        return with_global_error(plain, lambda: simulate(problem, **tight), f)
    problem = check_problem(problem)
    t0, t1, rtol, atol = check_common(t0, t1, rtol, atol, save_params)
    error_norm = check_error_norm(error_norm)
    if getattr(problem.model, "activation_kinks", None) is not None:
        warnings.warn(KINKS_WARNING, stacklevel=2)
    clock = as_clock(clock)
    max_steps = check_max_steps(max_steps)
    dt0 = check_dt0(dt0)
    check_initial_state(problem)
    observables, obs_bytes = check_observables(problem, observables, t0)
    stop = check_stop(problem, stop, t0)
    is_auto = isinstance(solver, str) and solver == "auto"
    auto = measure_stiffness(problem, t0, t1, rtol) if is_auto else None
    rho_span = None if auto is None else auto["rho_span"]
    choice = resolve_solver(
        solver,
        rtol,
        atol,
        problem.n_params,
        problem.dtype,
        rho_span=rho_span,
        error_norm=error_norm,
    )
    if count_evals not in (True, False, "auto"):
        raise ConfigError(f"`count_evals` must be True, False or 'auto'; got {count_evals!r}.")
    checked = {
        "t0": t0, "t1": t1, "rtol": rtol, "atol": atol, "ts": ts, "n_save": n_save,
        "save_params": save_params, "observables": observables, "max_steps": max_steps,
        "dt0": dt0, "progress": progress, "count_evals": count_evals, "throw": throw,
        "stop": stop, "error_norm": error_norm, "obs_bytes": obs_bytes,
    }  # fmt: skip
    if isinstance(clock, LossClock):
        return _simulate_loss_clock(problem, choice, clock, **checked)
    return _simulate_flow(problem, choice, clock, auto=auto, **checked)


def _simulate_flow(
    problem,
    choice: SolverChoice,
    clock,
    *,
    t0,
    t1,
    rtol,
    atol,
    ts,
    n_save,
    save_params,
    observables,
    max_steps,
    dt0,
    progress,
    count_evals,
    throw,
    stop,
    error_norm,
    obs_bytes,
    auto,
) -> Trajectory:
    """`simulate` on the physical or log clock (arguments validated by `simulate`)."""
    analytic_count, state_count, callback_count = _eval_counting(count_evals, choice)
    if clock.name == "log" and t0 < 0:
        raise ConfigError(f"the log clock s = ln(1 + t) needs t0 ≥ 0; got t0 = {t0}.")
    ts = save_times(t0, t1, ts, n_save)
    pts = param_save_times(ts, save_params)
    check_save_memory(problem, len(ts), len(pts), obs_bytes)
    settings = FlowSettings(
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        dt0=dt0,
        count_evals=callback_count,
        progress=progress,
        observables=observables,
        clock=clock,
        stop=stop,
        error_norm=error_norm,
    )
    sol, compile_s, wall_s = _run_flow(problem, settings, choice, ts, pts, t0, t1)
    counting = (analytic_count, state_count, callback_count)
    stats, ok, stopped, (t_reached, theta_end, obs_end) = _flow_stats(
        problem, sol, choice, counting, dt0, auto, stop, timings=(compile_s, wall_s)
    )
    config = flow_config(
        problem,
        choice,
        clock,
        rtol=rtol,
        atol=atol,
        t0=t0,
        t1=t1,
        max_steps=max_steps,
        dt0=dt0,
        save_params=save_params,
        stop=stop,
        error_norm=error_norm,
    )
    if auto is not None:
        config["solver_auto"] = {**auto, "chosen": choice.name}
    if not ok and throw:
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
        certify_rtol=rtol,
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
    compiled, _ = cached(key, lambda: compile_program(solve_flow, static, solver, *args))
    compile_s = time.perf_counter() - start
    EVAL_COUNTER.reset()
    start = time.perf_counter()
    sol = compiled(static, solver, *args)
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


def _simulate_loss_clock(
    problem,
    choice,
    clock,
    *,
    t0,
    t1,
    rtol,
    atol,
    ts,
    n_save,
    save_params,
    observables,
    max_steps,
    dt0,
    progress,
    count_evals,
    throw,
    stop,
    error_norm="rms",
    obs_bytes=0,
) -> Trajectory:
    """`simulate` with the loss clock (arguments validated by `simulate`)."""
    if stop is not None:
        raise ConfigError(
            "`stop` is not supported with the loss clock; use clock='log' (or stop at a "
            "physical time through `t1`)."
        )
    if dt0 is not None:
        raise ConfigError(
            "`dt0` is not supported with the loss clock (it steps in s = ∫L dt, and picks "
            "its first step in each segment); pass dt0=None."
        )
    if choice.implicit:
        raise ConfigError(
            f"the loss clock supports explicit solvers ('tsit5', 'dopri5', 'dopri8', 'rkc' "
            f"or a diffrax explicit solver object); got {choice.name!r}."
        )
    ts = save_times(t0, t1, ts, n_save)
    if ts[-1] < t1:
        ts = np.append(ts, t1)
    check_save_memory(problem, len(ts), len(param_save_times(ts, save_params)), obs_bytes)
    config = flow_config(
        problem,
        choice,
        clock,
        rtol=rtol,
        atol=atol,
        t0=t0,
        t1=t1,
        max_steps=max_steps,
        dt0=None,
        save_params=save_params,
        method=f"gradient flow ({choice.name}, loss clock dt/ds = 1/L)",
        error_norm=error_norm,
    )
    return solve_loss_clock(
        problem,
        choice=choice,
        rtol=rtol,
        atol=atol,
        t0=t0,
        t1=t1,
        ts=ts,
        save_params=save_params,
        observables=observables or no_observables,
        max_steps=max_steps,
        progress=progress,
        count_evals=count_evals is not False,
        throw=throw,
        config=config,
        error_norm=error_norm,
    )
