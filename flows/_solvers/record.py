"""What the toolkit knows about a solver it offers by name: one `SolverRecord` per name,
declared beside the solver's class and listed once in `registry.RECORDS`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

#: `make(rtol, atol, error_norm, on_products)`: the solver object a name stands for in a
#: solve with these tolerances and error norm; `on_products` receives the Hessian-vector
#: products of a matrix-free linear solve (None: the solves' evaluation counter).
Make = Callable[[float, float, str, "Callable[[Any], None] | None"], diffrax.AbstractSolver]


@dataclasses.dataclass(frozen=True)
class SolverRecord:
    """One solver the toolkit offers by name.

    - `name`: what `simulate(solver=…)` and `--solver` take.
    - `default`: the solver with no tolerances given (`flows.SOLVERS[name]()`).
    - `make`: the solver for a solve's tolerances (`Make`); None: `default()`.
    - `method`: the algorithm behind the name where the name alone does not say it
      (recorded in sweep manifests, so results of an earlier algorithm are not mixed
      with the new one); None: the name says it.
    - `evals_per_step`: vector-field evaluations per step when they follow from the step
      count (diffrax's explicit solvers); None: the solver counts its own or they vary.
    - `dense_jacobian`: implicit with the dense (P × P) Jacobian of the field, so limited
      to `MAX_IMPLICIT_PARAMS` parameters.
    - `steps_to_saves`: the solve steps to its save times, because a save between its
      steps is far less accurate than a step end (`control.steps_to_saves`).
    """

    name: str
    default: Callable[[], diffrax.AbstractSolver]
    make: Make | None = None
    method: str | None = None
    evals_per_step: int | None = None
    dense_jacobian: bool = False
    steps_to_saves: bool = False

    def build(
        self,
        rtol: float,
        atol: float,
        error_norm: str = "rms",
        on_products: Callable[[Any], None] | None = None,
    ) -> diffrax.AbstractSolver:
        if self.make is None:
            return self.default()
        return self.make(rtol, atol, error_norm, on_products)


def final_state(solver_state, cls: type, name: str):
    """The final solver state of class `cls` from `sol.solver_state` or the `Solution`
    itself (what the `*_eval_counts` functions read); otherwise a TypeError saying how to
    save it (`name`: the solver's name in the message)."""
    state = (
        solver_state.solver_state if isinstance(solver_state, diffrax.Solution) else solver_state
    )
    if not isinstance(state, cls):
        raise TypeError(
            f"expected the final {name} solver state; solve with "
            "`saveat=diffrax.SaveAt(..., solver_state=True)` and pass `sol.solver_state` "
            f"(got {type(state).__name__})."
        )
    return state


def flat_step_start(terms, t0, t1, y0, args, f0, vf_evals, made_jump):
    """What a matrix-free step on the flat state starts from: (y flat, unravel, its dtype,
    h, the field on flat states `fvec(t, y)`, F(t0, y0), evaluations so far). F is the
    stored FSAL value `f0`, evaluated afresh (and counted) after a jump."""
    yf, unravel = ravel_pytree(y0)
    dt = yf.dtype
    h = jnp.asarray(t1 - t0, dt)

    def fvec(t, y):
        return ravel_pytree(terms.vf(t, unravel(y), args))[0].astype(dt)

    if made_jump is not False:
        f0 = jax.lax.cond(made_jump, lambda: fvec(t0, yf), lambda: f0)
        vf_evals = vf_evals + jnp.asarray(made_jump, jnp.int32)
    return yf, unravel, dt, h, fvec, f0, vf_evals
