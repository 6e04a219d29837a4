"""What a solver declares: the one interface `simulate` and `simulate_batch` use. Solver
families differ in what they carry and report; the differences live here, not in the
solves."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from ._etd import ETDRK4
from ._implicit import (
    reports_products_to,
)
from ._stabilized import AbstractStabilizedSolver
from .cache import EvalCounter
from .choose import is_implicit, solver_key


def counts_own_evals(solver) -> bool:
    """Whether the solver counts its evaluations in its state (exact on accepted steps; a
    host callback would double its wall time on mid-size nets): the stabilized solvers
    (RKC2, ESERK4, ROCK4) and `ETDRK4`. The solve then saves its final state for
    `solver_report`."""
    return isinstance(solver, (AbstractStabilizedSolver, ETDRK4))


def has_stability_cap(solver) -> bool:
    """Whether the toolkit's first step must respect the solver's stability bound (ρ at θ(0)
    measured for it): the classical explicit solvers. Stabilized solvers estimate ρ
    themselves, implicit ones and `ETDRK4` (whose linear part takes the stiff outliers)
    have no such bound."""
    return not (isinstance(solver, (AbstractStabilizedSolver, ETDRK4)) or is_implicit(solver))


def runtime_tolerances(tol) -> tuple:
    """(rtol, atol) as weakly typed 0-d arrays: traced, so a new value does not recompile."""
    return tuple(jnp.asarray(float(v)) for v in tol)


def runtime_solver(solver):
    """The solver with the tolerances it carries (RKC2, ESERK4, ROCK4 with a non-stiff
    method: those of the controller) as run-time arrays, and its compile key."""
    if isinstance(solver, AbstractStabilizedSolver) and solver.tolerances is not None:
        solver = eqx.tree_at(lambda s: s.tolerances, solver, runtime_tolerances(solver.tolerances))
    return solver, solver_key(solver)


def solver_report(
    solver, solver_state=None, *, counter: EvalCounter | None = None, index=None, last_stages=True
) -> tuple[int | None, dict]:
    """What the solver reports about a finished solve: (evaluations it counted, or None;
    entries for `SolveStats.extra`).

    - The stabilized solvers: their own counts from the final `solver_state` (accepted
      steps only; member `index` of a batched state; `last_stages` the stage count of the
      last step), `AbstractStabilizedSolver.report`.
    - An implicit solver whose linear solves are `HessianCG`s reporting to `counter`
      ('kvaerno5-cg', `HessianCG.on_solve`): their Hessian-vector products (`jvp_evals`),
      counted as evaluations as RKC2's power iterations are (one costs ≈ 1.8 gradients:
      m = 10⁵ float32 fused, 63 against 35 ms), added to the counter's evaluations. A
      matrix-free solver that does not report them (lineax's CG, a `HessianCG` without
      `on_solve`) gets no such entry.
    - Any other solver: (None, {})."""
    if isinstance(solver, (AbstractStabilizedSolver, ETDRK4)):
        return solver.report(solver_state, index, last_stages=last_stages)
    if counter is not None and reports_products_to(solver, counter.add_products):
        return counter.n + counter.products, {"jvp_evals": counter.products}
    return None, {}
