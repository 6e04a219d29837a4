"""Matrix-free implicit solves for gradient flows: Kvaerno5 whose Newton (chord) systems
are solved by conjugate gradients on Hessian-vector products, through lineax.

diffrax's implicit Runge–Kutta methods solve, per implicit stage, g(f) = f − F(y + γ h f)
= 0 for the stage derivative f; the Newton/chord matrix is I − γ h J with J the Jacobian
of the vector field. For a gradient flow J = −∇²L is symmetric, so the matrix is
I + γ h ∇²L: symmetric, and positive definite wherever γ h λ < 1 for every positive
eigenvalue λ of −∇²L (always near minima, where ∇²L ⪰ 0). Conjugate gradients then need
only products with it — one Jacobian-vector product (`jax.jvp` of the field: a
Hessian-vector product) each — instead of the dense n×n Jacobian and its LU
factorization that `diffrax.Kvaerno5()`'s default linear solver forms. Memory is O(n).

Where the matrix is indefinite (a saddle with γ h λ > 1), CG may not converge; the
nonlinear solve then fails, the step is rejected and h shrinks until the matrix is
positive definite again.
"""

from __future__ import annotations

from typing import Any

import diffrax
import equinox as eqx
import lineax as lx
import optimistix as optx

__all__ = ["HessianCG", "is_matrix_free", "matrix_free_kvaerno5", "newton_kvaerno5"]


#: CG iterations per Newton system in 'kvaerno5-cg'. A system that CG has not solved by then
#: is indefinite (a saddle with γ h |λ₋| > 1) or too ill-conditioned (γ h ρ too large for
#: the step): the Newton iteration fails, the step is rejected and h shrinks — after at
#: most this many Hessian-vector products, where lineax's default 10 × n (2·10⁶ at
#: m = 10⁵) made one failed system cost more than the whole solve.
CG_MAX_STEPS = 200


class HessianCG(lx.AbstractLinearSolver):
    """`lineax.CG` for the Newton matrix I − γ h J of a gradient flow, tagged positive
    semidefinite (diffrax passes its operators untagged; CG needs the tag). Each CG
    iteration is one Jacobian-vector product (a Hessian-vector product).

    **Fields:** `rtol`, `atol` (CG's tolerances, lineax's max norm), `max_steps` (CG
    iterations per solve; None: lineax's 10 × n; 'kvaerno5-cg' uses `CG_MAX_STEPS`).
    """

    rtol: float = 1e-10
    atol: float = 1e-12
    max_steps: int | None = eqx.field(static=True, default=None)

    def _cg(self) -> lx.CG:
        return lx.CG(rtol=self.rtol, atol=self.atol, max_steps=self.max_steps)

    def init(self, operator, options: dict[str, Any]):
        tagged = lx.TaggedLinearOperator(operator, lx.positive_semidefinite_tag)
        return self._cg().init(tagged, options)

    def compute(self, state, vector, options):
        return self._cg().compute(state, vector, options)

    def transpose(self, state, options):
        return self._cg().transpose(state, options)

    def conj(self, state, options):
        return self._cg().conj(state, options)

    def assume_full_rank(self):
        return True

    def allow_dependent_columns(self, operator):
        return False

    def allow_dependent_rows(self, operator):
        return False


def matrix_free_kvaerno5(rtol: float, atol: float) -> diffrax.Kvaerno5:
    """diffrax's Kvaerno5 (ESDIRK 5(4), L-stable) whose chord iterations solve their linear
    systems by `HessianCG` (matrix-free) — the solver `flows.simulate` calls 'kvaerno5-cg'.
    Newton's method (`optimistix.Newton`, the Jacobian-vector products taken at each
    iterate; diffrax's default `VeryChord` keeps a linearised operator in its state, which
    diffrax 0.7.2 cannot carry for a matrix-free one) with the solve's tolerances; CG's
    are 1e-3 of them, at most `CG_MAX_STEPS` iterations per system."""
    cg = HessianCG(rtol=1e-3 * float(rtol), atol=1e-3 * float(atol), max_steps=CG_MAX_STEPS)
    root = optx.Newton(rtol=float(rtol), atol=float(atol), linear_solver=cg)
    return diffrax.Kvaerno5(root_finder=root)


def newton_kvaerno5(rtol: float, atol: float) -> diffrax.Kvaerno5:
    """diffrax's Kvaerno5 whose stage equations are solved by Newton's method
    (`optimistix.Newton`, the dense Jacobian and an LU solve at each iterate) with the
    controller's tolerances. Not a solver name (yet): 'kvaerno5' is diffrax's default
    `Kvaerno5()`; pass this object as `solver=` to `flows.simulate`.

    Why not diffrax's default (`VeryChord`: the Jacobian at the step's start, reused for
    every iteration and stage): on nonlinear flows its iterations often fail to converge,
    the step is rejected and shrunk, and the solve ends far more accurate than asked at
    many times the cost. Measured (`benchmarks/work_precision/stiff.py`, err/rtol at rtol
    1e-3 … 1e-8, evaluations by callback): multi-stage m = 20, chord 0.0016–0.0059 with
    1612 … 22 208 evaluations and half the steps rejected; Newton 0.25–0.64 with 262 …
    1776 evaluations, ≤ 3 rejections. On a linear field (the heat equation) both are the
    same method (one Newton iteration is exact). But on the Brusselator (N = 40, not a
    gradient flow) Newton's err/rtol is 0.95 at rtol 1e-3 and 3.7–4.0 from 1e-5 to 1e-8,
    above the band [0.1, 3] that the chord solver meets from below (0.0016)."""
    return diffrax.Kvaerno5(root_finder=optx.Newton(rtol=float(rtol), atol=float(atol)))


def is_matrix_free(solver) -> bool:
    """Whether an implicit diffrax solver's linear solves are matrix-free (`HessianCG`,
    lineax's CG / GMRES / BiCGStab): then it never forms the dense Jacobian."""
    root = getattr(solver, "root_finder", None)
    ls = getattr(root, "linear_solver", None)
    return isinstance(ls, HessianCG | lx.CG | lx.GMRES | lx.BiCGStab)
