"""Exact gradient flow dθ/dt = −∇L(θ) with diffrax, and the discrete baselines (GD)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ._errors import ConfigError, SolverError
from ._problem import Problem
from ._rkc import RKC2, rkc_eval_counts
from ._trajectory import Trajectory
from ._validate import as_float, as_int, as_tolerance

__all__ = [
    "SOLVERS",
    "simulate",
    "gradient_descent",
    "Observables",
    "StopCondition",
    "stop_at_loss",
]

#: Solvers by name. Tsit5 (default, 5th order explicit), Dopri5, Dopri8 (tight
#: tolerances), Kvaerno5 (implicit, for stiff runs; forms the dense Hessian, so small
#: problems only), RKC2 (second-order Runge–Kutta–Chebyshev: stabilized explicit, for
#: gradient flows whose step is limited by the Hessian's spectral radius; its non-stiff,
#: accuracy-limited steps are Tsit5 steps; `flows._rkc`).
SOLVERS: dict[str, Callable[[], diffrax.AbstractSolver]] = {
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "kvaerno5": diffrax.Kvaerno5,
    "rkc": RKC2,
}
_IMPLICIT = {"kvaerno5"}
#: The algorithm behind a solver name where the name alone does not say it (recorded in
#: sweep manifests, so results of an earlier algorithm are not mixed with the new one).
SOLVER_METHODS = {"rkc": "RKC2, non-stiff steps (h·rho < 1.95) by Tsit5"}
#: Vector-field evaluations per step of the explicit solvers as diffrax implements them
#: (plus one at the start): Tsit5 and Dopri5 are FSAL with 7 stages, Dopri8 has 13.
#: Checked against a host-callback count in the tests.
EVALS_PER_STEP = {"tsit5": 6, "dopri5": 6, "dopri8": 13}


def _make_solver(name: str, rtol: float, atol: float) -> diffrax.AbstractSolver:
    """The solver object for `name`. 'rkc' takes its non-stiff steps (h ρ < 1.95) with Tsit5,
    which needs the controller's tolerances (see `flows._rkc.RKC2`, `nonstiff`)."""
    if name == "rkc":
        return RKC2(nonstiff="tsit5", tolerances=(float(rtol), float(atol)))
    return SOLVERS[name]()


#: Clocks: the variable the solver steps in. 'physical': t itself. 'log': s = ln(1 + t), so
#: dθ/ds = −(1 + t)∇L and a run to t = 10⁸ costs O(log t) steps once the flow is slow.
CLOCKS = ("physical", "log")
#: The implicit solver materializes the (n_params × n_params) Jacobian; refuse beyond this.
MAX_IMPLICIT_PARAMS = 4000

#: An observables function: (problem, θ, t) → {name: array}. Evaluated inside the solve.
Observables = Callable[[Problem, dict, jax.Array], dict]


#: A stop condition: (problem, θ, t) → scalar; the run ends where it first falls to 0.
StopCondition = Callable[[Problem, dict, jax.Array], jax.Array]


def _no_observables(problem, theta, t):
    return {}


@dataclasses.dataclass(frozen=True)
class stop_at_loss:  # noqa: N801 (used like a function: `stop=stop_at_loss(1e-3)`)
    """Stop condition for `simulate(stop=…)`: end the run when the loss reaches `eps`."""

    eps: float

    def __call__(self, problem, theta, t):
        return problem.loss(theta) - self.eps


def _tree_sq_norm(tree) -> jax.Array:
    return sum(jnp.vdot(v, v) for v in jax.tree_util.tree_leaves(tree))


def _save_times(t0: float, t1: float, ts, n_save) -> np.ndarray:
    if ts is None:
        n_save = as_int("n_save", n_save, minimum=2)
        return np.linspace(t0, t1, n_save)
    try:
        ts = np.asarray(ts, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"`ts` must be a 1-D array of real save times; got {ts!r}.") from None
    if ts.ndim != 1 or ts.size < 2:
        raise ConfigError(
            f"`ts` must be a 1-D array of at least 2 save times; got shape {ts.shape}."
        )
    if not np.all(np.isfinite(ts)) or np.any(np.diff(ts) <= 0):
        raise ConfigError("`ts` must be finite and strictly increasing.")
    if ts[0] < t0 or ts[-1] > t1:
        raise ConfigError(f"`ts` must lie within [t0, t1] = [{t0}, {t1}]; got [{ts[0]}, {ts[-1]}].")
    return ts


def _check_span(t0, t1) -> tuple[float, float]:
    """(t0, t1) as Python floats with t1 > t0 (NumPy and 0-d JAX numbers accepted)."""
    t0, t1 = as_float("t0", t0), as_float("t1", t1)
    if not t1 > t0:
        raise ConfigError(f"`t1` must be > t0 = {t0}; got t1 = {t1}.")
    return t0, t1


def _check_save_params(save_params) -> None:
    if save_params not in ("all", "ends", "none"):
        raise ConfigError(
            f"`save_params` must be 'all', 'ends' or 'none'; got {save_params!r} "
            "('none' keeps only observables, for very wide networks)."
        )


def _check_common(t0, t1, rtol, atol, save_params):
    """Validated (t0, t1, rtol, atol); tolerances must lie in (0, 1) (`as_tolerance`)."""
    t0, t1 = _check_span(t0, t1)
    rtol = as_tolerance("rtol", rtol, example="1e-6")
    atol = as_tolerance("atol", atol, example="1e-9")
    _check_save_params(save_params)
    return t0, t1, rtol, atol


def _check_dt0(dt0) -> float | None:
    if dt0 is None:
        return None
    return as_float("dt0", dt0, positive=True, hint="Or pass dt0=None to let the solver choose.")


def check_initial_state(problem: Problem) -> None:
    """Refuse a θ(0) at which the loss or ‖∇L‖² is NaN/Inf (an initialization so large that
    the network overflows): no solver can start there, and each would spend its whole step
    budget finding that out."""
    loss, g = problem.loss_and_grad(problem.theta0)
    loss, g2 = float(loss), float(_tree_sq_norm(g))
    if not (math.isfinite(loss) and math.isfinite(g2)):
        raise ConfigError(
            f"the loss or its gradient is not finite at θ(0) (L = {loss:.4g}, ‖∇L‖² = "
            f"{g2:.4g}): the initialization overflows the network. Use a smaller init scale "
            "(or check the data for huge values)."
        )


#: Accuracy certificate of a flow run: along an exact flow L(0) − L(t) = ∫‖∇L‖² and L is
#: non-increasing. A solve meeting its tolerances keeps both within a small multiple of
#: rtol·L(0); beyond `CERTIFICATE_FACTOR`·rtol·L(0) the run is not the flow it claims to be.
CERTIFICATE_FACTOR = 100.0


def certificate(observables: dict, rtol: float) -> dict:
    """The energy-identity and monotone-loss certificate of a flow run.

    **Arguments:** `observables` with `loss` and `energy_residual` (leading axis: time);
    `rtol`, the solve's relative tolerance.

    **Returns:** a dict: `max_residual`, `max_rise` (largest increase of the saved loss),
    `bound` = `CERTIFICATE_FACTOR`·rtol·L(0) (the same for both), and `ok`.
    """
    loss = np.asarray(observables["loss"], dtype=np.float64)
    res = np.asarray(observables["energy_residual"], dtype=np.float64)
    scale = float(abs(loss[0])) if len(loss) and np.isfinite(loss[0]) else float("nan")
    bound = CERTIFICATE_FACTOR * rtol * max(scale, 1e-300)
    max_res = float(np.max(res)) if len(res) else 0.0
    max_rise = max(float(np.max(np.diff(loss))), 0.0) if len(loss) > 1 else 0.0
    ok = bool(np.isfinite(max_res) and max_res <= bound and max_rise <= bound)
    return {"max_residual": max_res, "max_rise": max_rise, "bound": bound, "ok": ok}


def describe_certificate(cert: dict) -> str:
    """One line for a failed certificate, with what to try."""
    return (
        f"accuracy certificate failed: energy-identity residual {cert['max_residual']:.3g} and "
        f"loss rise {cert['max_rise']:.3g} must both be ≤ {CERTIFICATE_FACTOR:g}·rtol·L(0) = "
        f"{cert['bound']:.3g}. The solve did not follow the flow: tighten rtol/atol."
    )


def _param_save_times(ts: np.ndarray, save_params: str) -> np.ndarray:
    return {"all": ts, "ends": ts[[0, -1]], "none": ts[:0]}[save_params]


class _Counter:
    """Counts vector-field calls, and those that returned NaN/Inf, from inside jitted code
    (host callback). Non-finite trial stages are normally rejected by the step-size
    controller; when a solve then fails, this count names the cause."""

    def __init__(self):
        self.n = 0
        self.nonfinite = 0

    def reset(self):
        self.n = 0
        self.nonfinite = 0

    def __call__(self, bad):
        self.n += 1
        self.nonfinite += int(bad)


_COUNTER = _Counter()
#: Compiled solves, keyed by settings and the problem's structure and shapes, so repeated
#: runs (seeds, benchmarks, sweeps over equal shapes) compile once.
_COMPILED: dict = {}


@dataclasses.dataclass(frozen=True)
class _FlowSettings:
    solver: str
    rtol: float
    atol: float
    max_steps: int
    dt0: float | None
    count_evals: bool
    progress: bool
    observables: Callable
    clock: str = "physical"
    stop: Callable | None = None


def _solve_flow(settings: _FlowSettings, problem, ts, pts, t0, t1):
    # diffrax promotes the state to the times' dtype: float64 times would silently turn a
    # float32 problem's θ (and so its whole vector field) into float64
    ts, pts, t0, t1 = (jnp.asarray(v, dtype=problem.dtype) for v in (ts, pts, t0, t1))
    obs_fn = settings.observables
    log_clock = settings.clock == "log"

    def physical_time(s):
        return jnp.expm1(s) if log_clock else s

    def vector_field(s, y, prob):
        theta, _ = y
        g = prob.grad(theta)
        if settings.count_evals:
            bad = ~jnp.isfinite(_tree_sq_norm(g))
            jax.debug.callback(_COUNTER, bad)
        h = jnp.exp(s).astype(y[1].dtype) if log_clock else 1.0  # dt/ds
        return jax.tree_util.tree_map(lambda v: -h * v, g), h * _tree_sq_norm(g)

    def save_obs(s, y, prob):
        theta, energy = y
        out = dict(obs_fn(prob, theta, physical_time(s)))
        out["loss"] = prob.loss(theta)
        out["energy"] = energy
        return out

    subs = [
        diffrax.SubSaveAt(ts=ts, fn=save_obs),
        diffrax.SubSaveAt(
            t1=True, fn=lambda s, y, prob: (physical_time(s), y[0], save_obs(s, y, prob))
        ),
    ]
    event = None
    if settings.stop is not None:
        stop = settings.stop

        def cond(t, y, args, **kwargs):  # diffrax passes the clock value as `t`
            return stop(args, y[0], physical_time(t))

        # downcrossing only: a run that starts at or below 0 is not stopped at t0
        event = diffrax.Event(
            cond, root_finder=optx.Newton(rtol=1e-10, atol=1e-10), direction=False
        )
    if pts.shape[0]:
        subs.append(diffrax.SubSaveAt(ts=pts, fn=lambda t, y, prob: y[0]))
    meter = diffrax.TextProgressMeter() if settings.progress else diffrax.NoProgressMeter()
    rkc = settings.solver == "rkc"
    return diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        _make_solver(settings.solver, settings.rtol, settings.atol),
        t0,
        t1,
        settings.dt0,
        (problem.theta0, jnp.zeros((), dtype=problem.dtype)),
        args=problem,
        saveat=diffrax.SaveAt(subs=subs, solver_state=rkc),
        stepsize_controller=diffrax.PIDController(rtol=settings.rtol, atol=settings.atol),
        max_steps=settings.max_steps,
        throw=False,
        progress_meter=meter,
        event=event,
    )


def simulate(
    problem: Problem,
    *,
    t1: float,
    t0: float = 0.0,
    solver: str = "tsit5",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    ts=None,
    n_save: int = 201,
    save_params: str = "ends",
    observables: Observables | None = None,
    clock: str = "physical",
    max_steps: int = 200_000,
    dt0: float | None = None,
    progress: bool = False,
    count_evals: bool | str = "auto",
    throw: bool = True,
    stop: StopCondition | None = None,
) -> Trajectory:
    """Integrate the exact gradient flow dθ/dt = −∇L(θ) from θ(t0) = `problem.theta0`.

    The state is (θ, E) with Ė = ‖∇L‖², so the energy identity L(0) − L(t) = E(t) is an
    accuracy certificate computed alongside (observable `energy_residual`).

    **Arguments:**
    - `problem`: the objective and θ(0) (`flows.make_problem`).
    - `t1`, `t0`: time span (physical time of the flow).
    - `solver`: one of `SOLVERS` ('tsit5' default, 'dopri5', 'dopri8', 'kvaerno5', 'rkc'),
      or 'auto': 'rkc' at rtol ≥ `AUTO_RKC_MIN_RTOL`, else 'tsit5' (`auto_solver`).
      'rkc' also reports `stats["jvp_evals"]` (Hessian-vector products of its power
      iteration; `vf_evals` counts each once more, as the primal evaluation inside it),
      `stats["spectral_radius"]` and `stats["nonstiff_steps"]` (accuracy-limited steps,
      h ρ < 1.95, that it took with Tsit5; see `flows._rkc.RKC2`).
    - `rtol`, `atol`: tolerances of diffrax's PID step-size controller.
    - `ts` or `n_save`: save times (default `n_save` equally spaced points on [t0, t1]).
    - `save_params`: θ at every save time ('all'), at the first and last ('ends'), or
      never ('none'; observables only, for very wide networks).
    - `observables`: (problem, θ, t) → dict of arrays, evaluated inside the solve at each
      save time; `loss` and the energy terms are always recorded.
    - `clock`: 'physical' (step in t) or 'log' (step in s = ln(1 + t); for late-phase runs
      to t ~ 10⁶–10¹², at a cost growing like log t). Save times stay physical.
    - `max_steps`: solver step budget. `dt0`: initial step (None: chosen automatically).
    - `progress`: print a progress meter. `count_evals`: how to count vector-field calls:
      'auto' (default) from the step count for explicit solvers (`EVALS_PER_STEP`), from
      the solver's own count for 'rkc' (exact on accepted steps; evaluations of rejected
      steps are not seen — `stats["rejected_steps"]` says how many) and by a host callback
      for implicit ones; True: always by callback (costs ~10 % on a
      wide net on CPU, and synchronizes on accelerators); False: not at all.
    - `throw`: raise `SolverError` when the solve fails (default). With `throw=False` the
      run up to the time reached is returned (save times after it dropped, the state at
      `stats["t_reached"]` appended, θ there as the last stored parameters), with
      `stats["result"]` naming the failure.
    - `stop`: an event, (problem, θ, t) → scalar: the run ends where it first falls from
      > 0 to 0 (located by a root finder on the dense output), e.g. `stop_at_loss(1e-3)`.
      The trajectory then ends at that time (save times after it are dropped, the stop
      time is appended) and `stats["stopped_at"]` records it (NaN when not triggered).

    **Returns:** a `Trajectory`. `stats["certificate"]` (`certificate`) says whether the
    energy identity and the monotone loss hold within `CERTIFICATE_FACTOR`·rtol·L(0); the
    CLI refuses to save a run where they do not.
    """
    t0, t1, rtol, atol = _check_common(t0, t1, rtol, atol, save_params)
    max_steps = as_int("max_steps", max_steps, minimum=1)
    dt0 = _check_dt0(dt0)
    check_initial_state(problem)
    requested = solver
    solver = _resolve_solver(solver, rtol, problem.n_params, problem.dtype)
    if count_evals not in (True, False, "auto"):
        raise ConfigError(f"`count_evals` must be True, False or 'auto'; got {count_evals!r}.")
    analytic_count = count_evals == "auto" and solver in EVALS_PER_STEP
    # RKC2 counts its own evaluations in its state (exact on accepted steps; a callback
    # would double its wall time on mid-size nets)
    state_count = count_evals == "auto" and solver == "rkc"
    callback_count = count_evals is True or (
        count_evals == "auto" and not (analytic_count or state_count)
    )
    if clock not in CLOCKS:
        raise ConfigError(f"`clock` must be one of {CLOCKS}; got {clock!r}.")
    if clock == "log" and t0 < 0:
        raise ConfigError(f"the log clock s = ln(1 + t) needs t0 ≥ 0; got t0 = {t0}.")
    ts = _save_times(t0, t1, ts, n_save)
    pts = _param_save_times(ts, save_params)
    to_s = np.log1p if clock == "log" else (lambda v: np.asarray(v, dtype=np.float64))
    settings = _FlowSettings(
        solver=solver,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        dt0=dt0,
        count_evals=callback_count,
        progress=progress,
        observables=observables or _no_observables,
        clock=clock,
        stop=stop,
    )
    args = (
        problem,
        jnp.asarray(to_s(ts)),
        jnp.asarray(to_s(pts)),
        jnp.asarray(to_s(t0)),
        jnp.asarray(to_s(t1)),
    )
    key = (settings, jax.tree_util.tree_structure(problem), len(ts), len(pts)) + tuple(
        (v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)
    )
    start = time.perf_counter()
    compiled = _COMPILED.get(key)
    if compiled is None:
        compiled = eqx.filter_jit(_solve_flow).lower(settings, *args).compile()
        _COMPILED[key] = compiled
    compile_s = time.perf_counter() - start
    _COUNTER.reset()
    start = time.perf_counter()
    sol = compiled(settings, *args)
    jax.block_until_ready(sol.ys)
    wall_s = time.perf_counter() - start
    counter = _COUNTER

    obs = {k: np.asarray(v) for k, v in sol.ys[0].items()}
    # drop the length-1 save axis of the final-state save
    t_reached, theta_end, obs_end = jax.tree_util.tree_map(lambda v: v[0], sol.ys[1])
    t_reached = float(np.asarray(t_reached))
    stopped = bool(sol.result == diffrax.RESULTS.event_occurred)
    ok = bool(sol.result == diffrax.RESULTS.successful) or stopped
    stats = {
        "result": "successful" if ok else _failure_reason(problem, sol, theta_end, _COUNTER),
        "t_reached": t_reached,
        "steps": int(sol.stats["num_steps"]),
        "accepted_steps": int(sol.stats["num_accepted_steps"]),
        "rejected_steps": int(sol.stats["num_rejected_steps"]),
        "vf_evals": (
            EVALS_PER_STEP[solver] * int(sol.stats["num_steps"]) + 1
            if analytic_count
            else (counter.n if callback_count else -1)
        ),
        "compile_s": compile_s,
        "wall_s": wall_s,
        "stopped_at": t_reached if stopped else float("nan"),
    }
    stats["vf_evals_counted_by"] = (
        "step count"
        if analytic_count
        else "callback"
        if callback_count
        else "solver state (accepted steps only)"
        if state_count
        else "not counted"
    )
    if solver == "rkc":  # the stabilized solver's own counts (accepted steps only)
        counts = {k: np.asarray(v).item() for k, v in rkc_eval_counts(sol.solver_state).items()}
        if state_count:
            stats["vf_evals"] = int(counts["vf_evals"] + counts["jvp_evals"])
        stats["jvp_evals"] = int(counts["jvp_evals"])  # Hessian-vector products (power iteration)
        stats["spectral_radius"] = float(counts["rho"])  # last bound used (safety factor in)
        stats["last_stages"] = int(counts["stages"])
        stats["nonstiff_steps"] = int(counts["nonstiff_steps"])  # non-stiff (Tsit5) steps
    config = {
        "method": f"gradient flow ({solver})",
        "problem": problem.describe(),
        "solver": solver,
        "solver_requested": requested,
        "clock": clock,
        "rtol": rtol,
        "atol": atol,
        "t0": t0,
        "t1": t1,
        "max_steps": max_steps,
        "dt0": dt0,
        "save_params": save_params,
        "dtype": str(problem.dtype),
        "stop": _describe_stop(stop),
    }
    if not ok and throw:
        raise SolverError(
            f"gradient-flow solve stopped at t = {t_reached:.6g} of t1 = {t1}: {stats['result']}. "
            + _advice(stats["result"], solver),
            t_reached=t_reached,
            reason=stats["result"],
        )
    params = {}
    if len(pts):
        params = {k: np.asarray(v) for k, v in sol.ys[2].items()}
    if stopped or not ok:
        # The run ended at t_reached (a stop event, or a failure with throw=False): keep the
        # saves before it and append the state reached, so nothing past t_reached is reported.
        keep, pkeep = ts < t_reached, pts < t_reached
        ts = np.append(ts[keep], t_reached)
        obs = {k: np.concatenate([v[keep], np.asarray(obs_end[k])[None]]) for k, v in obs.items()}
        if len(pts):
            pts = np.append(pts[pkeep], t_reached)
            params = {
                k: np.concatenate([v[pkeep], np.asarray(theta_end[k])[None]])
                for k, v in params.items()
            }
    loss0 = float(problem.loss(problem.theta0))
    obs["energy_residual"] = np.abs(loss0 - obs["loss"] - obs["energy"])
    stats["certificate"] = certificate(obs, rtol)
    return Trajectory(
        times=ts,
        observables=obs,
        param_times=pts,
        params=params,
        stats=stats,
        config=config,
        param_dims=problem.model.param_dims(),
        data={"x": np.asarray(problem.x), "y": np.asarray(problem.y)},
    )


#: `solver='auto'` picks RKC2 at tolerances where a second-order method is accurate enough
#: (rtol ≥ this) and Tsit5 below. Measured on the multi-stage default
#: (benchmarks/results/work_precision_multistage.md): there the flow is stability-limited,
#: and RKC2 at rtol 1e-5 reaches gradient descent's (η = 1e-3) error with 35× fewer
#: evaluations (3× fewer than Tsit5 at any tolerance); at tighter targets Tsit5's fifth
#: order wins (RKC2's error there is set by its second-order stabilized steps).
AUTO_RKC_MIN_RTOL = 1e-5


def auto_solver(rtol: float) -> str:
    """The solver `simulate(solver='auto')` uses at this rtol ('rkc' or 'tsit5')."""
    return "rkc" if rtol >= AUTO_RKC_MIN_RTOL else "tsit5"


#: Tightest rtol accepted for float32 problems (float32 resolves ~1.2e-7), and for the
#: implicit solvers in float32: their Newton iterations stall below it (measured: Kvaerno5 on
#: the linear teacher, float32, rtol 1e-6 did not finish in 15 min; rtol 1e-4: 0.35 s).
FLOAT32_MIN_RTOL = 1e-6
FLOAT32_IMPLICIT_MIN_RTOL = 1e-4


def _resolve_solver(solver: str, rtol: float, n_params: int, dtype=None) -> str:
    """The solver name to use ('auto' resolved), or `ConfigError` for an unknown name, an
    implicit solver on a problem too large for its dense Hessian, or an rtol that float32
    cannot meet."""
    if solver == "auto":
        solver = auto_solver(rtol)
    if solver not in SOLVERS:
        raise ConfigError(f"`solver` must be 'auto' or one of {sorted(SOLVERS)}; got {solver!r}.")
    if solver in _IMPLICIT and n_params > MAX_IMPLICIT_PARAMS:
        raise ConfigError(
            f"solver {solver!r} forms the dense {n_params}×{n_params} Hessian; it is limited "
            f"to {MAX_IMPLICIT_PARAMS} parameters. Use 'tsit5' (explicit) for wide networks."
        )
    if dtype is not None and jnp.dtype(dtype) == jnp.float32:
        floor = FLOAT32_IMPLICIT_MIN_RTOL if solver in _IMPLICIT else FLOAT32_MIN_RTOL
        if rtol < floor:
            raise ConfigError(
                f"rtol = {rtol:g} is below what solver {solver!r} can meet in float32 "
                f"(rtol ≥ {floor:g}). Raise rtol, or build the problem with dtype='float64'."
            )
    return solver


def _describe_stop(stop) -> str:
    if stop is None:
        return "none"
    if isinstance(stop, stop_at_loss):
        return f"loss <= {stop.eps}"
    return getattr(stop, "__name__", repr(stop))


#: A failed solve whose ‖θ‖ grew beyond this factor × max(‖θ(0)‖, 1) is reported as a
#: finite-time blow-up of the flow (not as stiffness: no solver can pass a blow-up time).
BLOWUP_FACTOR = 1e6


def _failure_reason(problem: Problem, sol, theta_end, counter: _Counter) -> str:
    finite = all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(theta_end))
    if finite:
        g = problem.grad(theta_end)
        finite = all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(g))
    if finite:
        n_end = float(jnp.sqrt(_tree_sq_norm(theta_end)))
        n_0 = float(jnp.sqrt(_tree_sq_norm(problem.theta0)))
        if n_end > BLOWUP_FACTOR * max(n_0, 1.0):
            return (
                f"blow-up: ‖θ‖ grew from {n_0:.3g} to {n_end:.3g} (the flow leaves every "
                "bounded set in finite time)"
            )
    if not finite:
        return "non-finite (NaN/Inf) state or gradient"
    if counter.nonfinite:
        return (
            f"non-finite (NaN/Inf) vector field in {counter.nonfinite} of {counter.n} "
            "evaluations: trial steps leave the region where the loss is finite"
        )
    # Without a callback count: probe along the flow direction for a non-finite field just
    # ahead of the reached state (trial stages that fail there are rejected silently).
    for h in np.logspace(-12, 0, 25):
        ahead = jax.tree_util.tree_map(lambda p, gi, h=h: p - h * gi, theta_end, g)
        g_ahead = problem.grad(ahead)
        if not all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(g_ahead)):
            return (
                f"non-finite (NaN/Inf) vector field a step h = {h:.1e} ahead of the reached "
                "state: trial steps leave the region where the loss is finite"
            )
    if sol.result == diffrax.RESULTS.max_steps_reached:
        acc, rej = int(sol.stats["num_accepted_steps"]), int(sol.stats["num_rejected_steps"])
        if rej > acc:
            return f"step size collapsed ({rej} rejected vs {acc} accepted steps)"
        return "max_steps reached"
    return diffrax.RESULTS[sol.result]


def _advice(reason: str, solver: str) -> str:
    if reason.startswith("blow-up"):
        return (
            "This is the ODE, not the solver: its solution escapes to infinity near the time "
            "reached. Shorten `t1` below it, or check that the loss is bounded below."
        )
    if reason.startswith("non-finite"):
        return (
            "Check the data and initialization for overflow; a smaller init scale or a "
            "tighter rtol may help."
        )
    if reason.startswith("step size"):
        return "The flow is stiff here: try solver='kvaerno5' (small problems) or a looser rtol."
    stiff = "" if solver in _IMPLICIT else " or a stiff solver ('kvaerno5', small problems)"
    return f"Increase `max_steps`, shorten `t1`, loosen `rtol`{stiff}."


@eqx.filter_jit
def _gd_chunk(carry, n, prob, lr):
    """`n` steps of θ ← θ − η∇L(θ), accumulating η‖∇L‖² (module level: compiled once)."""

    def body(_, c):
        theta, energy = c
        g = prob.grad(theta)
        theta = jax.tree_util.tree_map(lambda p, gi: p - lr * gi, theta, g)
        return theta, energy + lr * _tree_sq_norm(g)

    return jax.lax.fori_loop(0, n, body, carry)


@eqx.filter_jit
def _gd_record(carry, t, prob, obs_fn):
    theta, energy = carry
    out = dict(obs_fn(prob, theta, t))
    out["loss"] = prob.loss(theta)
    out["energy"] = energy
    return out


def gradient_descent(
    problem: Problem,
    *,
    learning_rate: float,
    t1: float,
    n_save: int = 201,
    save_params: str = "ends",
    observables: Observables | None = None,
    throw: bool = True,
) -> Trajectory:
    """Discrete gradient descent θ ← θ − η∇L(θ) (forward Euler with step η), the papers'
    stand-in for gradient flow; time t = η · steps.

    Runs round(t1/η) steps, saving at `n_save` equally spaced step counts (rounded to whole
    steps, so save times are exact multiples of η). `energy` accumulates η·Σ‖∇L‖² (the
    Riemann sum of the energy identity).

    GD whose saved loss becomes non-finite, or ends above L(0), has diverged (η too large
    for the curvature it meets): with `throw=True` (default) that raises `SolverError`
    naming the time; with `throw=False` the run (up to the last finite save) is returned
    with `stats["result"]` saying so. `stats["max_loss_rise"]` records the largest rise of
    the saved loss: a transient rise (a spike GD recovers from) is not divergence, but there
    GD does not follow the gradient flow.
    """
    _, t1 = _check_span(0.0, t1)
    _check_save_params(save_params)
    learning_rate = as_float(
        "learning_rate", learning_rate, positive=True, hint="Try e.g. learning_rate=1e-3."
    )
    n_save = as_int("n_save", n_save, minimum=2)
    check_initial_state(problem)
    n_steps = int(round(t1 / learning_rate))
    if n_steps < 1:
        raise ConfigError(f"`t1` = {t1} is shorter than one step of η = {learning_rate}.")
    save_steps = np.unique(np.round(np.linspace(0, n_steps, n_save)).astype(np.int64))
    ts = save_steps * learning_rate
    pts_idx = {"all": np.arange(len(ts)), "ends": np.array([0, len(ts) - 1]), "none": []}[
        save_params
    ]
    obs_fn = observables or _no_observables
    lr = jnp.asarray(learning_rate)

    def chunk(carry, n, prob):
        return _gd_chunk(carry, n, prob, lr)

    def rec(carry, t, prob):
        return _gd_record(carry, t, prob, obs_fn)

    carry = (problem.theta0, jnp.zeros((), dtype=problem.dtype))
    start = time.perf_counter()
    jax.block_until_ready(chunk(carry, jnp.asarray(0), problem))  # compile outside the timing
    jax.block_until_ready(rec(carry, jnp.asarray(0.0), problem))
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    records, thetas = [], []
    keep = set(np.asarray(pts_idx, dtype=int).tolist())
    prev = 0
    for i, step in enumerate(save_steps):
        if step > prev:
            carry = chunk(carry, jnp.asarray(int(step - prev)), problem)
            prev = int(step)
        records.append(rec(carry, jnp.asarray(ts[i]), problem))
        if i in keep:
            thetas.append(carry[0])
    jax.block_until_ready(records[-1])
    wall_s = time.perf_counter() - start
    obs = {k: np.stack([np.asarray(r[k]) for r in records]) for k in records[0]}
    loss0 = float(problem.loss(problem.theta0))
    obs["energy_residual"] = np.abs(loss0 - obs["loss"] - obs["energy"])
    params = {}
    if thetas:
        params = {k: np.stack([np.asarray(t[k]) for t in thetas]) for k in thetas[0]}
    loss = obs["loss"]
    result, t_reached = "successful", float(ts[-1])
    nonfinite = ~np.isfinite(loss)
    if nonfinite.any() or loss[-1] > loss0:
        i = int(np.argmax(nonfinite)) if nonfinite.any() else int(np.nanargmax(loss))
        result = (
            f"diverged: loss {loss0:.4g} → {loss[i]:.4g} at t = {ts[i]:g} (step "
            f"{int(save_steps[i])}), ending at {loss[-1]:.4g}; η = {learning_rate:g} is too large"
        )
        if throw:
            raise SolverError(
                f"gradient descent {result}. Try a smaller learning rate (e.g. η/10).",
                t_reached=float(ts[i]),
                reason="diverged",
            )
        if nonfinite.any():  # keep the run up to the last finite save
            obs = {k: v[:i] for k, v in obs.items()}
            keep_p = np.asarray(pts_idx, dtype=int) < i
            params = {k: v[keep_p] for k, v in params.items()}
            pts_idx = np.asarray(pts_idx, dtype=int)[keep_p]
            ts = ts[:i]
            t_reached = float(ts[-1]) if i else 0.0
    stats = {
        "result": result,
        "t_reached": t_reached,
        "steps": n_steps,
        "accepted_steps": n_steps,
        "rejected_steps": 0,
        "vf_evals": n_steps,
        "compile_s": compile_s,
        "wall_s": wall_s,
        # GD is no gradient flow where its loss rises: the largest rise between saves
        "max_loss_rise": max(float(np.max(np.diff(obs["loss"]))), 0.0)
        if len(obs["loss"]) > 1
        else 0.0,
    }
    config = {
        "method": f"gradient descent (lr={learning_rate})",
        "problem": problem.describe(),
        "learning_rate": learning_rate,
        "t1": n_steps * learning_rate,
        "save_params": save_params,
    }
    return Trajectory(
        times=ts,
        observables=obs,
        param_times=ts[np.asarray(pts_idx, dtype=int)],
        params=params,
        stats=stats,
        config=config,
        param_dims=problem.model.param_dims(),
        data={"x": np.asarray(problem.x), "y": np.asarray(problem.y)},
    )
