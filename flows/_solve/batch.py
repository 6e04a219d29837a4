"""Batched gradient flows: runs of equal shape integrated together under `jax.vmap`.

Runs that differ only in traced leaves of the `Problem` (θ(0), α, the data values) and in
their horizon share one compiled, vmapped solve. Each member keeps its own adaptive step
size (diffrax's while loop runs until every member has reached its own t1; finished
members are masked), so a member's result equals the unbatched `simulate` run to
round-off. A member that fails (max steps, step-size collapse, NaN/Inf) is reported as a
`SolverError` for that member only; the others are returned as usual.
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

from .._compile import compile_program, jit_kept_on
from .._errors import ConfigError, SolverError
from .._solvers import (
    SolverChoice,
    cached,
    check_error_norm,
    resolve_solver,
    runtime_solver,
    solver_report,
)
from .._validate import as_float
from .arguments import (
    ControllerSpec,
    Observables,
    SaveSpec,
    check_common,
    check_dt0,
    check_max_steps,
    check_n_save,
    check_observables,
    check_problem,
    check_save_memory,
    param_save_times,
    ungroup,
)
from .clocks import PhysicalClock
from .companion import scaled_tolerances
from .flow import FlowSettings, flow_config, solve_flow
from .problem import Problem
from .stats import Result, SolveStats, advice, failure_reason
from .trajectory import Trajectory, assemble_trajectory, flat_params

__all__ = ["simulate_batch", "stack_problems"]


def _same(a, b) -> bool:
    if a is b:
        return True
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


#: Fields of `Problem` that are passed unbatched when equal in every member.
_SHAREABLE = ("x", "y")


def _field(path) -> str | None:
    return getattr(path[0], "name", None) if path else None


def check_same_shape(problems: list[Problem]) -> None:
    """Refuse (`ConfigError`) an empty list, or problems that differ in structure, static
    fields (m, d, activation, loss, data name) or leaf shapes: only runs of equal shape can
    be batched."""
    if not problems:
        raise ConfigError("`problems` is empty: give at least one Problem to simulate.")
    leaves0, treedef = jax.tree_util.tree_flatten(problems[0])
    for i, p in enumerate(problems[1:], start=1):
        leaves, td = jax.tree_util.tree_flatten(p)
        if td != treedef:
            raise ConfigError(
                f"problems[{i}] differs from problems[0] in structure or static fields "
                "(width m, input dimension d, activation, loss, data name); only runs of equal "
                "shape can be batched."
            )
        for j, (a, b) in enumerate(zip(leaves0, leaves, strict=True)):
            if jnp.shape(a) != jnp.shape(b) or jnp.result_type(a) != jnp.result_type(b):
                raise ConfigError(
                    f"problems[{i}] differs from problems[0] in the shape of leaf {j} "
                    f"({jnp.shape(b)} vs {jnp.shape(a)}); only runs of equal shape can be batched."
                )


def stack_problems(problems: list[Problem]) -> tuple[Problem, Problem]:
    """Split `problems` into (batched, shared) halves for `jax.vmap`.

    The data `x`, `y` are shared (kept once, not mapped) when equal in every problem; every
    other leaf (θ(0), α, …) is stacked along a new leading axis, even when equal, so that
    every batch of one shape uses one compiled solve. Recombine a member with
    `eqx.combine(batched_member, shared)`. Raises `ConfigError` when the problems differ in
    structure, static fields (m, d, activation, loss, data name) or leaf shapes.
    """
    check_same_shape(problems)
    paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(problems[0])
    leaves0 = [leaf for _, leaf in paths_leaves]
    shareable = [_field(path) in _SHAREABLE for path, _ in paths_leaves]
    all_leaves = [leaves0] + [jax.tree_util.tree_leaves(p) for p in problems[1:]]
    batched, shared = [], []
    for j in range(len(leaves0)):
        column = [leaves[j] for leaves in all_leaves]
        if shareable[j] and all(_same(column[0], c) for c in column[1:]):
            batched.append(None)
            shared.append(column[0])
        else:
            batched.append(jnp.stack([jnp.asarray(c) for c in column]))
            shared.append(None)
    return (
        jax.tree_util.tree_unflatten(treedef, batched),
        jax.tree_util.tree_unflatten(treedef, shared),
    )


def _solve_batch(settings: FlowSettings, solver, batched, shared, ts, pts, t0, t1, tol):
    def one(b, ts_, pts_, t1_):
        return solve_flow(settings, solver, eqx.combine(b, shared), ts_, pts_, t0, t1_, tol)

    return jax.vmap(one)(batched, ts, pts, t1)


def _member(tree, i: int):
    return jax.tree_util.tree_map(lambda v: v[i], tree)


@dataclasses.dataclass(frozen=True)
class BatchSettings:
    """`simulate_batch`'s arguments after `validate`: one horizon per member (`t1s`), the
    saves (`n_save` equally spaced times on [0, t1] per member, `save_params`), the solver
    resolved (`choice`) and the compiled flow's settings (`flow`: tolerances, controller,
    observables, physical clock). The only thing `simulate_batch` passes down."""

    t1s: tuple[float, ...]
    n_save: int
    save_params: str
    choice: SolverChoice
    flow: FlowSettings

    @classmethod
    def validate(
        cls, problems, *, t1s, n_save, solver, rtol, atol, observables, max_steps,
        save_params, dt0, error_norm,
    ) -> tuple[list[Problem], BatchSettings]:  # fmt: skip
        """`simulate_batch`'s arguments checked in the user's terms before anything is
        compiled: (the problems as a checked list, the settings)."""
        rtol, atol = scaled_tolerances(rtol, atol)  # a companion computation's, if any
        error_norm = check_error_norm(error_norm)
        if isinstance(problems, Problem):
            raise ConfigError(
                "`problems` must be a list of flows.Problem; got one Problem. Pass [problem] "
                "(or use flows.simulate for a single run)."
            )
        try:
            problems = list(problems)
        except TypeError:
            raise ConfigError(
                f"`problems` must be a list of flows.Problem; got {type(problems).__name__}."
            ) from None
        for i, p in enumerate(problems):
            check_problem(p, f"problems[{i}]")
        t1s = [
            as_float(f"t1s[{i}]", t)
            for i, t in enumerate(np.atleast_1d(np.asarray(t1s, dtype=object)).tolist())
        ]
        if len(t1s) != len(problems):
            raise ConfigError(
                f"`t1s` must give one final time per problem: got {len(t1s)} for "
                f"{len(problems)} problems."
            )
        for t1 in t1s:
            check_common(0.0, t1, rtol, atol, save_params)
        n_save = check_n_save(n_save)
        max_steps = check_max_steps(max_steps)
        dt0 = check_dt0(dt0)
        check_same_shape(problems)
        observables, obs_bytes = check_observables(problems[0], observables)
        check_save_memory(
            problems[0],
            len(problems) * n_save,
            len(problems) * len(param_save_times(np.zeros(n_save), save_params)),
            obs_bytes,
        )
        choice = resolve_solver(
            solver, rtol, atol, problems[0].n_params, problems[0].dtype, error_norm=error_norm
        )
        flow = FlowSettings(
            rtol=rtol,
            atol=atol,
            max_steps=max_steps,
            dt0=dt0,
            count_evals=False,
            progress=False,
            observables=observables,
            clock=PhysicalClock(),
            error_norm=error_norm,
        )
        return problems, cls(tuple(t1s), n_save, save_params, choice, flow)

    def save_times(self) -> tuple[np.ndarray, np.ndarray]:
        """(save times, parameter save times), one row per member."""
        ts = np.stack([np.linspace(0.0, t1, self.n_save) for t1 in self.t1s])
        return ts, np.stack([param_save_times(row, self.save_params) for row in ts])

    def config(self, problem: Problem, t1: float) -> dict:
        """The trajectory's `config` (`flow.flow_config`) of the member ending at `t1`."""
        assert self.flow.rtol is not None and self.flow.atol is not None  # set by `validate`
        return flow_config(
            problem,
            self.choice,
            PhysicalClock(),
            rtol=self.flow.rtol,
            atol=self.flow.atol,
            t0=0.0,
            t1=t1,
            max_steps=self.flow.max_steps,
            dt0=self.flow.dt0,
            save_params=self.save_params,
            method=f"gradient flow ({self.choice.name}, batched)",
            error_norm=self.flow.error_norm,
        )


@jit_kept_on  # compiled even inside `jax.disable_jit()`
def simulate_batch(
    problems: list[Problem],
    *,
    t1s,
    n_save: int = 201,
    solver: str | diffrax.AbstractSolver = "tsit5",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    observables: Observables | None = None,
    max_steps: int = 200_000,
    save_params: str = "none",
    dt0: float | None = None,
    error_norm: str = "rms",
    save: SaveSpec | None = None,
    controller: ControllerSpec | None = None,
) -> list[Trajectory | SolverError]:
    """Integrate the gradient flows of several problems of equal shape in one vmapped solve.

    **Arguments:**
    - `problems`: `Problem`s with equal structure, static fields and leaf shapes (e.g. one
      width m, different α and seeds).
    - `t1s`: one final (physical) time per problem; each run saves at `n_save` equally
      spaced times on [0, t1].
    - `solver`, `rtol`, `atol`, `observables`, `max_steps`, `save_params`, `dt0`,
      `error_norm` ('rms', the default, or 'max'; recorded as `config["error_norm"]`): as
      in `simulate` (physical clock; vector-field evaluations counted from the step count for
      the explicit solvers in `EVALS_PER_STEP`, from RKC2's state (accepted steps), not
      counted (None; −1 in the mapping view) for the others).
    - `save`, `controller`: those arguments grouped (`flows.SaveSpec` without `ts`,
      `flows.ControllerSpec`), as in `simulate`.

    **Returns:** one entry per problem, in order: a `Trajectory` (as `simulate` returns it;
    `stats.wall_s` is the whole batch's wall time divided by the batch size, and
    `stats.batch_wall_s`, `stats.batch_size` give the batch's) or, for a member whose
    solve failed, a `SolverError` (not raised) naming the time reached and the reason, with
    the partial run as its `trajectory` attribute. Raises `ConfigError` on bad input.
    """
    flat = {
        "n_save": n_save, "save_params": save_params, "observables": observables,
        "rtol": rtol, "atol": atol, "error_norm": error_norm, "dt0": dt0,
    }  # fmt: skip
    if save is not None or controller is not None:
        flat = ungroup(simulate_batch, save, controller, flat)
    problems, settings = BatchSettings.validate(
        problems, t1s=t1s, solver=solver, max_steps=max_steps, **flat
    )
    return _run_batch(problems, settings)


def _run_batch(problems: list[Problem], settings: BatchSettings) -> list:
    """The one vmapped solve of `problems` under `settings`, then one result per member."""
    batched, shared = stack_problems(problems)
    ts, pts = settings.save_times()
    flow = settings.flow
    args = (
        batched,
        shared,
        jnp.asarray(ts),
        jnp.asarray(pts),
        jnp.asarray(0.0),
        jnp.asarray(np.asarray(settings.t1s)),
        flow.tol(),
    )
    static = flow.compile_settings()
    solver, solver_k = runtime_solver(settings.choice.solver)
    key = (
        "batch",
        static,
        solver_k,
        len(problems),
        settings.n_save,
        pts.shape[1],
        jax.tree_util.tree_structure(batched),
        jax.tree_util.tree_structure(shared),
    ) + tuple((v.shape, v.dtype) for v in jax.tree_util.tree_leaves((batched, shared)))
    start = time.perf_counter()
    compiled, _ = cached(key, lambda: compile_program(_solve_batch, static, solver, *args))
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    sol = compiled(static, solver, *args)
    jax.block_until_ready(sol.ys)
    wall_s = time.perf_counter() - start
    return [
        _member_result(problem, sol, i, ts[i], pts[i], settings, compile_s, wall_s)
        for i, problem in enumerate(problems)
    ]


def _member_result(problem, sol, i, ts, pts, settings: BatchSettings, compile_s, wall_s):
    """Member `i` of the batch's solution: its `Trajectory`, or its `SolverError`."""
    t1, choice = settings.t1s[i], settings.choice
    batch = int(np.asarray(sol.stats["num_steps"]).shape[0])
    obs = {k: np.asarray(v[i]) for k, v in sol.ys[0].items()}
    end = _member(sol.ys[1], i)  # (t, θ[, observables]) at the last step, save axis of 1
    theta_end = jax.tree_util.tree_map(lambda v: v[0], end[1])
    t_reached = float(np.asarray(end[0]).reshape(-1)[0])
    stats_i = {k: np.asarray(v)[i] for k, v in sol.stats.items()}
    result_i = _member(sol.result, i)
    ok = bool(result_i == diffrax.RESULTS.successful)
    if ok:
        result, reason = Result.successful, "successful"
    else:
        result, reason = failure_reason(problem, result_i, stats_i, theta_end)
    steps = int(stats_i["num_steps"])
    vf_evals = choice.evals_per_step * steps + 1 if choice.evals_per_step is not None else None
    own, extra = solver_report(choice.solver, sol.solver_state, index=i, last_stages=False)
    if own is not None:  # its own counts, accepted steps only (as in `simulate`)
        vf_evals = own
    stats = SolveStats(
        result=result,
        reason=reason,
        t_reached=t_reached,
        steps=steps,
        accepted_steps=int(stats_i["num_accepted_steps"]),
        rejected_steps=int(stats_i["num_rejected_steps"]),
        vf_evals=vf_evals,
        compile_s=compile_s,
        wall_s=wall_s / batch,
        batch_wall_s=wall_s,
        batch_size=batch,
        extra=extra,
    )
    config = settings.config(problem, t1)
    params = {}
    if len(pts):
        params = flat_params(_member(sol.ys[2], i))
    traj = assemble_trajectory(
        problem,
        times=ts,
        observables=obs,
        param_times=pts,
        params=params,
        stats=stats,
        config=config,
        certify_rtol=settings.flow.rtol,
    )
    if ok:
        return traj
    t_str = f"{t_reached:.6g}" if math.isfinite(t_reached) else str(t_reached)
    err = SolverError(
        f"gradient-flow solve stopped at t = {t_str} of t1 = {t1:g}: {reason}. "
        + advice(result, choice.implicit),
        t_reached=t_reached,
        reason=reason,
    )
    err.trajectory = traj
    return err
