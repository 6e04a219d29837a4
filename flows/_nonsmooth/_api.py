"""`simulate_nonsmooth`: arguments checked, the loop compiled once per (structure,
settings) and run, continued with more slots where they ran out, and the result assembled
into a `Trajectory` with its switching certificate."""

from __future__ import annotations

import dataclasses
import functools
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _compile
from .._compile import callback_free, compile_lowered, jit_kept_on
from .._errors import ConfigError, SolverError
from .._solve.arguments import ControllerSpec, SaveSpec, ungroup
from .._solve.companion import scaled_tolerances
from .._solve.global_error import GLOBAL_ERROR_FACTOR, global_error_asked, with_global_error
from .._solve.problem import Problem
from .._solve.stats import Result, SolveStats
from .._solve.trajectory import Trajectory, assemble_trajectory, flat_params
from .._solvers import check_error_norm
from .._validate import as_float, as_int
from ._loop import Carry, loop, run
from ._net import SWITCH_RESIDUAL_MAX, UNRESOLVED_RUN, Layout, Net, Settings, Stop, layout_of
from ._pattern import Pattern

#: Clocks of the non-smooth solver: dt/ds = 1 (physical), 1 + t (log: s = ln(1 + t)) or
#: 1/L (loss); t is carried as a state, so save times are located like events.
NONSMOOTH_CLOCKS = ("physical", "log", "loss")

#: The observables every non-smooth run records (per save time).
KINK_OBSERVABLES = {
    "kink_pairs": "pairs (unit, sample) on a kink: sliding, or |z − c| ≤ kink_tol·scale",
    "sliding_pairs": "pairs sliding on a kink (Filippov equivalent control)",
    "switches": "pattern changes so far (a pair changing piece, entering or leaving sliding)",
    "crossings": "transversal crossings of a kink so far",
    "sliding_entries": "sliding intervals begun so far",
    "pattern_mismatch": "pairs whose z lies outside their pattern's piece by more than "
    "kink_tol·scale (0 on a correct run: a missed switch shows here)",
    "switch_residual": "largest |z − c|/scale of a located event so far (0 up to rounding)",
}

_CODES = {
    Stop.OK: Result.successful,
    Stop.MAX_STEPS: Result.max_steps_reached,
    Stop.STEP_COLLAPSED: Result.step_size_collapsed,
    Stop.NONFINITE: Result.nonfinite,
    Stop.STORM: Result.solver_failed,
    Stop.OUT_OF_SLOTS: Result.solver_failed,
    Stop.UNDECIDED: Result.solver_failed,
}

#: Compiled loops, keyed by (run/resume, settings, problem structure); at most 16.
_CACHE: dict = {}
_compile.register_cache(_CACHE.clear)


def _no_observables(problem, theta, t):
    return {}


def _run(dynamic, tols, ts, pts_mask, t0, t1, *, static, settings, layout):
    """The loop for a (traced) problem: its tables built per trace, its arrays and the
    tolerances `tols` = (rtol, atol) as arguments."""
    problem = eqx.combine(dynamic, static)
    net = Net.build(problem, settings, layout, tols)
    return run(net, problem.theta0, ts, pts_mask, t0, t1)


def _resume(dynamic, tols, carry, ts, pts_mask, t1, *, static, settings, layout):
    """The loop continued from `carry` (a stopped run's final carry, its slots padded to
    `settings`' sizes by `grow_slots`)."""
    problem = eqx.combine(dynamic, static)
    carry = carry._replace(code=jnp.int32(Stop.OK), pair=jnp.int32(-1))
    return loop(Net.build(problem, settings, layout, tols), carry, ts, pts_mask, t1)


def grow_slots(carry: Carry, m_new: int) -> Carry:
    """The carry with its M sliding slots padded to `m_new` with empty ones (index 0,
    kink 0, not on, identity Jacobian block, λ 0); the occupied slots are kept, in order.
    Candidate slots live only inside each event's decision: nothing to pad."""
    piece, off, idx, kink, on, J, lam0, kappa = carry.pat
    m = idx.shape[0]
    extra = m_new - m
    eye = jnp.eye(m_new, dtype=J.dtype)
    pat = Pattern(
        piece=piece,
        off=off,
        idx=jnp.pad(idx, (0, extra)),
        kink=jnp.pad(kink, (0, extra)),
        on=jnp.pad(on, (0, extra)),
        J=eye.at[:m, :m].set(J),
        lam0=jnp.pad(lam0, (0, extra)),
        kappa=kappa,
    )
    return carry._replace(pat=pat)


@dataclasses.dataclass(frozen=True)
class _Bounds:
    """The user's slot bounds and budgets (the settings start below them)."""

    max_sliding: int
    max_candidates: int
    max_steps: int
    max_events: int
    slots: int


@dataclasses.dataclass(frozen=True, eq=False)
class NonsmoothRun:
    """`simulate_nonsmooth`'s arguments after `validate`: the span and tolerances, the save
    times (`ts`, t1 always among them) and which of them store θ (`pts_mask`), the loop's
    starting settings (`settings`: clock, slots, kink and storm rules, observables) under
    the user's bounds (`bounds`), the kink pairs' layout, and `throw`. The only thing
    `simulate_nonsmooth` passes down."""

    t0: float
    t1: float
    rtol: float
    atol: float
    ts: np.ndarray
    pts_mask: np.ndarray
    save_params: str
    settings: Settings
    bounds: _Bounds
    layout: Layout
    throw: bool

    @classmethod
    def validate(
        cls, problem, *, t1, t0, rtol, atol, ts, n_save, save_params, observables, clock,
        max_steps, max_events, max_sliding, max_candidates, slots, kink_tol, storm_window,
        storm_span, error_norm, throw,
    ) -> tuple[Problem, NonsmoothRun]:  # fmt: skip
        """`simulate_nonsmooth`'s arguments checked (`ConfigError` naming the argument):
        (the problem as checked, the run)."""
        from .._solve.arguments import (
            check_common,
            check_max_steps,
            check_n_save,
            check_observables,
            check_problem,
            param_save_times,
            save_times,
        )

        problem = check_problem(problem)
        rtol, atol = scaled_tolerances(rtol, atol)  # a companion computation's, if any
        t0, t1, rtol, atol = check_common(t0, t1, rtol, atol, save_params)
        if ts is None:
            n_save = check_n_save(n_save)
        if problem.model.activation_kinks is None:
            raise ConfigError(
                f"{type(problem.model).__name__} declares no kink points (`activation_kinks`) "
                "and no `forward(params, x, act)`, so its flow cannot be integrated through "
                "the kinks exactly. For a smooth or smoothed activation (e.g. "
                "`smoothing=1e-3` on the leaky-ReLU net or DeepFCN) use `flows.simulate`."
            )
        if clock not in NONSMOOTH_CLOCKS:
            raise ConfigError(f"`clock` must be one of {NONSMOOTH_CLOCKS}; got {clock!r}.")
        if clock in ("log", "loss") and t0 < 0:
            raise ConfigError(f"the {clock} clock needs t0 ≥ 0; got t0 = {t0}.")
        max_steps = check_max_steps(max_steps)
        max_events = as_int("max_events", max_events, minimum=1)
        max_sliding = as_int("max_sliding", max_sliding, minimum=1)
        max_candidates = as_int("max_candidates", max_candidates, minimum=1)
        slots = as_int("slots", slots, minimum=1)
        storm_window = as_int("storm_window", storm_window, minimum=2)
        kink_tol = as_float("kink_tol", kink_tol, positive=True)
        storm_span = as_float("storm_span", storm_span, positive=True)
        error_norm = check_error_norm(error_norm)
        if observables is not None:
            observables, _ = check_observables(problem, observables, t0)
        layout = layout_of(problem)
        max_candidates = min(max_candidates, layout.size)
        max_sliding = min(max_sliding, layout.size)
        ts = save_times(t0, t1, ts, n_save)
        if ts[-1] < t1:
            ts = np.append(ts, t1)
        pts_mask = np.isin(ts, param_save_times(ts, save_params))
        settings = Settings(
            clock=clock,
            max_steps=max_steps,
            max_events=max_events,
            max_sliding=min(slots, max_sliding),
            max_candidates=min(slots, max_candidates),
            kink_tol=kink_tol,
            storm_window=storm_window,
            storm_span=storm_span,
            observables=observables or _no_observables,
            n_save=len(ts),
            n_psave=int(pts_mask.sum()),
            error_norm=error_norm,
        )
        bounds = _Bounds(max_sliding, max_candidates, max_steps, max_events, slots)
        return problem, cls(
            t0, t1, rtol, atol, ts, pts_mask, save_params, settings, bounds, layout, throw
        )

    def config(self, problem) -> dict:
        """The trajectory's `config` of this run."""
        kinks = problem.model.activation_kinks
        settings, bounds = self.settings, self.bounds
        return {
            "method": "gradient flow, piecewise-smooth (Tsit5 within an activation pattern, "
            "located switching, Filippov sliding)",
            "problem": problem.describe(),
            "solver": "tsit5-events",
            "solver_requested": "nonsmooth",
            "solver_class": "flows._nonsmooth (diffrax.Tsit5 steps)",
            "solver_settings": {
                "kink_tol": settings.kink_tol,
                "max_sliding": bounds.max_sliding,
                "max_candidates": bounds.max_candidates,
                "slots": bounds.slots,
                "max_events": bounds.max_events,
                "storm_window": settings.storm_window,
                "storm_span": settings.storm_span,
                "activation_kinks": list(kinks.kinks),
                "activation_slopes": list(kinks.slopes),
            },
            "clock": settings.clock,
            "rtol": self.rtol,
            "atol": self.atol,
            "error_norm": settings.error_norm,
            "t0": self.t0,
            "t1": self.t1,
            "max_steps": bounds.max_steps,
            "dt0": None,
            "save_params": self.save_params,
            "dtype": str(problem.dtype),
            "stop": "none",
        }


def _solve(problem, run: NonsmoothRun):
    """(final carry, slot growth, compile s, wall s): the loop compiled and run, continued
    from where slots ran out (code 5) with twice the slots that ran out (or the power of
    two the event needs), unless one that ran out is at its bound."""
    # the problem (data, θ(0)) is an argument of the compiled loop: one compilation per
    # structure (model, loss, shapes), reused across seeds and data values
    settings, bounds, layout = run.settings, run.bounds, run.layout
    dynamic, static = eqx.partition(problem, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(dynamic)
    s_leaves, s_def = jax.tree_util.tree_flatten(static)
    structure = (treedef, s_def, tuple(s_leaves), tuple((v.shape, v.dtype) for v in leaves))
    ts_j, mask_j = jnp.asarray(run.ts, problem.dtype), jnp.asarray(run.pts_mask)
    t0_j, t1_j = jnp.asarray(run.t0, problem.dtype), jnp.asarray(run.t1, problem.dtype)
    tols_j = jnp.asarray((run.rtol, run.atol), problem.dtype)

    def compiled_for(kind, fn, settings, *args):
        key = (kind, settings, structure)
        if key not in _CACHE:
            _compile.relieve_map_pressure()  # before compiling: see `flows._compile`
            jitted = jax.jit(functools.partial(fn, static=static, settings=settings, layout=layout))
            if len(_CACHE) >= 16:
                _CACHE.pop(next(iter(_CACHE)))
            with callback_free(), jax.disable_jit(False):  # compiled even under disable_jit
                _CACHE[key] = compile_lowered(jitted.lower(*args))
        return _CACHE[key]

    start = time.perf_counter()
    args = (dynamic, tols_j, ts_j, mask_j, t0_j, t1_j)
    compiled = compiled_for("run", _run, settings, *args)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    wall_s = time.perf_counter() - start
    growth = []
    while int(out.code) == Stop.OUT_OF_SLOTS:
        n_near, n_slide = (int(v) for v in out.need)
        grow_c = n_near > settings.max_candidates
        grow_m = n_slide > settings.max_sliding
        if (grow_c and settings.max_candidates >= bounds.max_candidates) or (
            grow_m and settings.max_sliding >= bounds.max_sliding
        ):
            break

        def grown(now, need, bound):
            return min(max(2 * now, 1 << max(need - 1, 0).bit_length()), bound)

        settings = dataclasses.replace(
            settings,
            max_sliding=grown(settings.max_sliding, n_slide, bounds.max_sliding)
            if grow_m
            else settings.max_sliding,
            max_candidates=grown(settings.max_candidates, n_near, bounds.max_candidates)
            if grow_c
            else settings.max_candidates,
        )
        growth.append(
            {
                "t": float(out.y[2]),
                "max_sliding": settings.max_sliding,
                "max_candidates": settings.max_candidates,
            }
        )
        carry = grow_slots(out, settings.max_sliding)
        args = (dynamic, tols_j, carry, ts_j, mask_j, t1_j)
        start = time.perf_counter()
        compiled = compiled_for("resume", _resume, settings, *args)
        compile_s += time.perf_counter() - start
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        wall_s += time.perf_counter() - start
    return out, growth, compile_s, wall_s


def _reason(code: int, t_reached: float, pair, bounds: _Bounds, settings: Settings) -> str:
    """Why the loop stopped, in the user's terms."""
    return {
        Stop.OK: "successful",
        Stop.MAX_STEPS: f"max_steps ({bounds.max_steps}) or max_events ({bounds.max_events}) "
        "reached",
        Stop.STEP_COLLAPSED: "step size collapsed (h < 1e-14·|s|)",
        Stop.NONFINITE: "non-finite (NaN/Inf) state",
        Stop.STORM: f"event storm: {settings.storm_window} switching events within a time span ≤ "
        f"{settings.storm_span:g}·max(1, t) near t = {t_reached:.6g} (last pair: {pair}) — "
        "chattering that the sliding decision did not catch",
        Stop.UNDECIDED: f"{UNRESOLVED_RUN} events in a row near t = {t_reached:.6g} whose "
        f"Filippov decision did not settle (last pair: {pair}): several coupled kinks — in "
        "deep nets ż is multilinear in the slopes of one sample's pairs in different layers — "
        "that neither the active-set decision, the semismooth Newton solve of the complementarity "
        "problem nor the minimum-norm Clarke fallback resolves",
        Stop.OUT_OF_SLOTS: f"more than max_candidates = {bounds.max_candidates} pairs at a kink at "
        f"once, or more than max_sliding = {bounds.max_sliding} pairs sliding, at "
        f"t = {t_reached:.6g} (pair: {pair})",
    }[Stop(code)]


_ADVICE = {
    Stop.MAX_STEPS: "Increase `max_steps`/`max_events`, or shorten `t1`.",
    Stop.STEP_COLLAPSED: "Loosen rtol, or check for a finite-time blow-up.",
    Stop.NONFINITE: "Check the data and initialization for overflow.",
    Stop.STORM: "Raise `max_sliding`, or use a smoothed activation (`smoothing=ε`) to compare.",
    Stop.OUT_OF_SLOTS: "Raise `max_candidates`/`max_sliding` (symmetric data puts many pairs on "
    "a kink at once).",
    Stop.UNDECIDED: "Use a smoothed activation (`smoothing=ε`, ε → 0) with `flows.simulate`, or "
    "`flows.gradient_descent` rerun at η/4 to check its convergence in η.",
}


@jit_kept_on  # compiled even inside `jax.disable_jit()`
def simulate_nonsmooth(
    problem: Problem,
    *,
    t1: float,
    t0: float = 0.0,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    ts=None,
    n_save: int = 201,
    save_params: str = "ends",
    observables=None,
    clock: str = "physical",
    max_steps: int = 1_000_000,
    max_events: int = 1_000_000,
    max_sliding: int = 128,
    max_candidates: int = 128,
    slots: int = 16,
    kink_tol: float = 1e-9,
    storm_window: int = 1000,
    storm_span: float = 1e-9,
    error_norm: str = "rms",
    throw: bool = True,
    global_error: bool | None = None,
    save: SaveSpec | None = None,
    controller: ControllerSpec | None = None,
) -> Trajectory:
    """The exact gradient flow of a network whose activation has kinks (see the module).

    **Arguments** (as `flows.simulate`, plus):
    - `clock`: 'physical', 'log' (dt/ds = 1 + t) or 'loss' (dt/ds = 1/L), for late-phase
      runs to t ~ 1e8; t is a state, save times are located on the dense output. On the
      log and loss clocks t's local error is bounded on its own, relative to the step's
      increment of t (its errors add up; L ∝ 1/t late makes the loss as accurate as t).
    - `max_events`: budget of located switching events.
    - `max_sliding`: most pairs sliding at once (the equivalent control is an M×M Newton
      solve); `max_candidates`: most non-sliding pairs at a kink at one event. More stops
      the run (with `throw`, a `SolverError` naming the bound).
    - `slots`: the pair slots the loop is compiled with at first (sliding and candidate
      slots alike, each at most its bound above). Every slot costs at every step and event
      whether used or not (static shapes), so the run starts small; an event that needs
      more slots stops the loop *before its decision*, and the run continues from that
      state with twice the slots of the kind that ran out, sliding or candidate (one more
      compilation; `stats.extra["slot_growth"]` records when and to what), up to the
      bounds.
    - `kink_tol`: a pair is "on the kink" when |z − c| ≤ kink_tol × (RMS of its layer's z).
    - `storm_window`, `storm_span`: an event storm — `storm_window` switching events
      within a time span ≤ `storm_span`·max(1, t) (chattering that sliding should have
      caught) — stops the run with the time reached and the pair involved.
    - `error_norm`: the norm of the scaled local error the step size controls, as in
      `flows.simulate`: 'rms' (default) or 'max' (its largest component; on deep nets from
      small init the error sits in few parameters, see the README).
    - `global_error`: also estimate the run's global error, as `flows.simulate` does: a
      companion solve at rtol and atol `GLOBAL_ERROR_FACTOR` (10) times tighter, the
      same save times and event settings (switches are located to rounding in both, so
      the difference is the step error carried through the events); `traj.global_error`
      and `config["global_error"]`. The tolerances are run-time values of the
      compiled loop, so the companion reuses the run's program.
    - `save`, `controller`: those arguments grouped (`flows.SaveSpec`,
      `flows.ControllerSpec` without `dt0`), as in `flows.simulate`.

    The model must declare its kinks: `model.activation_kinks` (a `flows.PiecewiseLinear`)
    and `model.forward(params, x, act)` with the activation as an argument (the leaky-ReLU
    net and `DeepFCN` do). Models without them get a `ConfigError` pointing to the
    smoothed activation (`smoothing=ε`) and `flows.simulate`.

    **Returns:** a `Trajectory` with the observables of `KINK_OBSERVABLES` besides the
    usual ones, and `stats.extra`: `events`, `crossings`, `switches`, `sliding_entries`,
    `root_evals`, `max_switch_residual`, `max_pattern_mismatch`, `unresolved_events` (events
    decided by the minimum-norm fallback).
    """
    call = {
        "t1": t1, "t0": t0, "rtol": rtol, "atol": atol, "ts": ts, "n_save": n_save,
        "save_params": save_params, "observables": observables, "clock": clock,
        "max_steps": max_steps, "max_events": max_events, "max_sliding": max_sliding,
        "max_candidates": max_candidates, "slots": slots, "kink_tol": kink_tol,
        "storm_window": storm_window, "storm_span": storm_span, "error_norm": error_norm,
    }  # fmt: skip
    if save is not None or controller is not None:
        call = ungroup(simulate_nonsmooth, save, controller, call)
    if global_error_asked(global_error):
        plain = simulate_nonsmooth(problem, **call, throw=throw, global_error=False)
        f = GLOBAL_ERROR_FACTOR
        tight = {**call, "rtol": call["rtol"] / f, "atol": call["atol"] / f}
        return with_global_error(
            plain, lambda: simulate_nonsmooth(problem, **tight, global_error=False), f
        )
    problem, run = NonsmoothRun.validate(problem, throw=throw, **call)
    out, growth, compile_s, wall_s = _solve(problem, run)
    return _assemble(problem, out, run, growth=growth, compile_s=compile_s, wall_s=wall_s)


def _assemble(problem, out, run: NonsmoothRun, *, growth, compile_s, wall_s) -> Trajectory:
    """The final carry as a `Trajectory` (or a `SolverError` with `run.throw`), its
    statistics and the switching certificate."""
    ts, pts_mask, layout, config = run.ts, run.pts_mask, run.layout, run.config(problem)
    k = int(out.k)
    code = Stop(int(out.code))
    t_reached = float(out.y[2])
    obs = {name: np.asarray(v)[:k] for name, v in out.buf.items()}
    kp = int(out.kp)
    params = {name: v[:kp] for name, v in flat_params(out.pbuf).items()}
    steps, rejected = int(out.steps), int(out.rejected)
    pair = layout.decode(int(out.pair)) if int(out.pair) >= 0 else None
    reason = _reason(code, t_reached, pair, run.bounds, run.settings)
    extra = {
        "events": int(out.events),
        "crossings": int(out.counts.crossings),
        "switches": int(out.counts.switches),
        "sliding_entries": int(out.counts.entries),
        "root_evals": int(out.root_evals),
        "max_switch_residual": float(out.counts.resid),
        "max_pattern_mismatch": float(np.max(obs["pattern_mismatch"])) if k else 0.0,
        "unresolved_events": int(out.unresolved),
        "pairs": layout.size,
        "slot_growth": growth,
    }
    stats = SolveStats(
        result=_CODES[code],
        reason=reason,
        t_reached=t_reached,
        steps=steps,
        accepted_steps=steps - rejected,
        rejected_steps=rejected,
        vf_evals=6 * steps + int(out.events) + 1,
        compile_s=compile_s,
        wall_s=wall_s,
        vf_evals_counted_by="step count (6 per Tsit5 step, 1 per event)",
        extra=extra,
    )
    if code != 0 and run.throw:
        raise SolverError(
            f"non-smooth gradient flow stopped at t = {t_reached:.6g} of t1 = "
            f"{config['t1']}: {reason}. " + _ADVICE[code],
            t_reached=t_reached,
            reason=reason,
        )
    traj = assemble_trajectory(
        problem,
        times=ts[:k],
        observables=obs,
        param_times=ts[pts_mask][:kp],
        params=params,
        stats=stats,
        config=config,
        certify_rtol=config["rtol"],
    )
    # the switching certificate: every located switch at its kink, no missed switch at any
    # save (a pair outside its pattern's piece by more than kink_tol)
    cert = dict(traj.stats["certificate"])
    resid, mismatch = extra["max_switch_residual"], extra["max_pattern_mismatch"]
    switch_ok = resid <= SWITCH_RESIDUAL_MAX and mismatch == 0
    cert.update(
        switch_residual=resid,
        switch_residual_bound=SWITCH_RESIDUAL_MAX,
        pattern_mismatch=mismatch,
        switching_ok=switch_ok,
        ok=bool(cert.get("ok", True) and switch_ok),
    )
    assert isinstance(traj.stats, SolveStats)
    traj.stats = traj.stats.replace(certificate=cert)
    return traj
