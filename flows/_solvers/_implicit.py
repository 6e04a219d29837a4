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

Where the matrix is indefinite (a saddle with γ h |λ₋| > 1) `HessianCG` stops at the first
direction of non-positive curvature and reports the system unsolved; the nonlinear solve
then fails, the step is rejected and h shrinks until the matrix is positive definite again.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.flatten_util as jfu
import jax.numpy as jnp
import lineax as lx
import optimistix as optx

from .record import SolverRecord

__all__ = [
    "ChunkedLU",
    "HessianCG",
    "StepChord",
    "StepNewton",
    "is_matrix_free",
    "kvaerno5",
    "matrix_free_kvaerno5",
    "newton_kvaerno5",
    "reports_products_to",
    "with_chunked_jacobian",
]


#: Most CG iterations per Newton system in 'kvaerno5-cg'. A positive definite system that CG
#: has not solved by then is too ill-conditioned for the step (γ h ρ too large): the Newton
#: iteration fails, the step is rejected and h shrinks. lineax's default, 10 × n (2·10⁶ at
#: m = 10⁵), let one such system cost more than a whole solve.
CG_MAX_STEPS = 1000


class _AbstractRealFullRank(lx.AbstractLinearSolver):
    """What lineax asks of a solver for real, square, nonsingular systems."""

    def conj(self, state, options):
        return state, options  # real

    def assume_full_rank(self):
        return True

    def allow_dependent_columns(self, operator):
        return False

    def allow_dependent_rows(self, operator):
        return False


class HessianCG(_AbstractRealFullRank):
    """Conjugate gradients for the Newton matrix A = I − γ h J of a gradient flow (J = −∇²L
    symmetric), one Jacobian-vector product (a Hessian-vector product) per iteration, that
    **stops at the first direction of non-positive curvature** pᵀAp ≤ 0 — A is indefinite
    there (a saddle of L with γ h |λ₋| > 1), CG's iterates are meaningless, and the system
    is reported unsolved (`RESULTS.singular`): Newton fails, the step is rejected and h
    shrinks until A is positive definite. lineax's `CG` has no such test.

    **`flows.simulate`'s state (θ, E)** (E the energy integral, dE/dt = ‖∇L‖²) makes the
    full Jacobian [[−H, 0], [2 (H g)ᵀ, 0]] non-symmetric: CG then runs on the θ block
    (symmetric) and E follows by substitution. Measured on the multi-stage flow (m = 200,
    n = 1000, t = 20, rtol 1e-4): lineax's CG on the full state, 10 × n iterations allowed:
    not finished in 400 s; capped at 1000: 226 s; this CG on the full state: 160 s (181 of
    1099 systems ran to the cap, 41 of 87 steps rejected); on the θ block: 7.2 s, 16 steps,
    none rejected, 763 CG iterations in all.

    Converged when ‖r‖_∞ ≤ atol + rtol ‖b‖_∞ (r = b − A x); `max_steps` iterations at most
    (then `RESULTS.max_steps_reached`). Stats: `num_steps`, `negative_curvature`.

    **Fields:** `rtol`, `atol`, `max_steps` (default `CG_MAX_STEPS`), `on_solve` (None, or
    a host function called after each system with the number of products with A it took
    — one Jacobian-vector product each; `flows.simulate` counts them this way).
    """

    rtol: float = 1e-10
    atol: float = 1e-12
    max_steps: int = eqx.field(static=True, default=CG_MAX_STEPS)
    on_solve: Callable[[Any], None] | None = eqx.field(static=True, default=None)

    def init(self, operator, options: dict[str, Any]):
        del options
        return operator

    def compute(self, state, vector, options):
        del options
        operator = state
        if _is_flow_with_energy(vector):
            # `flows.simulate`'s state (θ, E), dE/dt = ‖∇L‖²: the Jacobian is
            # [[−H, 0], [2 (H g)ᵀ, 0]], not symmetric, so CG runs on the θ block
            # (I + γ h H, symmetric) alone and E follows by substitution (its diagonal
            # entry is 1 − γ h · 0 = 1): one more product.
            b_th, b_e = vector
            zero_e = jnp.zeros_like(b_e)
            sub = lx.FunctionLinearOperator(
                lambda th: operator.mv((th, zero_e))[0], jax.eval_shape(lambda: b_th)
            )
            x_th, result, stats = self._cg(sub, b_th)
            x_e = b_e - operator.mv((x_th, zero_e))[1]
            self._count(stats["num_steps"] + 1)
            return (x_th, x_e), result, stats
        x, result, stats = self._cg(operator, vector)
        self._count(stats["num_steps"])
        return x, result, stats

    def _count(self, products) -> None:
        if self.on_solve is not None:
            jax.debug.callback(self.on_solve, products)

    def _cg(self, operator, vector):
        b, unravel = jfu.ravel_pytree(vector)

        def mv(x):
            return jfu.ravel_pytree(operator.mv(unravel(x)))[0]

        bound = self.atol + self.rtol * jnp.max(jnp.abs(b))
        tiny = jnp.finfo(b.dtype).tiny

        def cond(c):
            _, r, _, _, k, neg = c
            return (jnp.max(jnp.abs(r)) > bound) & (k < self.max_steps) & ~neg

        def body(c):
            x, r, p, rr, k, _ = c
            ap = mv(p)
            pap = p @ ap
            neg = ~(pap > tiny * (p @ p))  # also catches NaN
            alpha = jnp.where(neg, 0.0, rr / jnp.where(neg, 1.0, pap))
            x = x + alpha * p
            r = r - alpha * ap
            rr_new = r @ r
            p = r + (rr_new / jnp.where(rr > 0, rr, 1.0)) * p
            return x, r, p, rr_new, k + 1, neg

        init = (jnp.zeros_like(b), b, b, b @ b, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
        x, r, _, _, k, neg = jax.lax.while_loop(cond, body, init)
        done = jnp.max(jnp.abs(r)) <= bound
        result = lx.RESULTS.where(
            done,
            lx.RESULTS.successful,
            lx.RESULTS.where(neg, lx.RESULTS.singular, lx.RESULTS.max_steps_reached),
        )
        return unravel(x), result, {"num_steps": k, "negative_curvature": neg}

    def transpose(self, state, options):
        return state, options  # symmetric


def _ravel(tree):
    """(flat vector, unravel) with the leaves in `tree_leaves` order, each row-major — the
    order of lineax's own dense matrices."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    shapes = [jnp.shape(x) for x in leaves]
    dtypes = [jnp.result_type(x) for x in leaves]
    sizes = [math.prod(sh) for sh in shapes]
    dtype = jnp.result_type(*leaves)
    flat = jnp.concatenate([jnp.reshape(x, -1).astype(dtype) for x in leaves])

    def unravel(v):
        parts = jnp.split(v, list(itertools.accumulate(sizes))[:-1])
        return jax.tree_util.tree_unflatten(
            treedef,
            [x.reshape(sh).astype(dt) for x, sh, dt in zip(parts, shapes, dtypes, strict=True)],
        )

    return flat, unravel


class ChunkedLU(_AbstractRealFullRank):
    """LU on the dense matrix of an operator, the matrix formed `chunk` columns at a time:
    `chunk` products A eᵢ (one Jacobian-vector product each, `jax.vmap`ped) per pass of a
    `lax.map` over the columns, so the working memory is `chunk` tangents through the field
    instead of all P — lineax's `LU` forms it with all P tangents at once (on the
    multi-stage net at m = n = 1000, 30 GiB for a 32 MB matrix). Then as `lineax.LU`: one
    factorization (`jax.scipy.linalg.lu_factor`), a triangular solve per right-hand side.

    For square operators whose input and output have the same structure (the Jacobian of a
    root function g: Y → Y, as in diffrax's implicit stages). Not differentiable (no
    `transpose`): diffrax stops gradients through its linear solves' state.

    **Fields:** `chunk` (≥ 1; `flows.simulate` sizes it to the memory at hand,
    `flows._solve.settings.fit_dense_jacobian`).
    """

    chunk: int = eqx.field(static=True)

    def __check_init__(self):
        if not (isinstance(self.chunk, int) and self.chunk >= 1):
            raise ValueError(f"ChunkedLU `chunk` must be an integer ≥ 1; got {self.chunk!r}.")

    def init(self, operator, options: dict[str, Any]):
        del options
        ins, outs = operator.in_structure(), operator.out_structure()
        if jax.tree_util.tree_structure(ins) != jax.tree_util.tree_structure(outs) or any(
            a.shape != b.shape
            for a, b in zip(
                jax.tree_util.tree_leaves(ins), jax.tree_util.tree_leaves(outs), strict=True
            )
        ):
            raise ValueError("ChunkedLU needs an operator whose input and output match.")
        zero, unravel = _ravel(jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), ins))
        n = zero.size
        k = min(self.chunk, n)
        blocks = -(-n // k)

        def columns(b):  # A e_i for the k columns i = b k … b k + k − 1 (rows past n: 0)
            idx = b * k + jnp.arange(k)
            basis = jax.nn.one_hot(idx, n, dtype=zero.dtype)
            return jax.vmap(lambda e: _ravel(operator.mv(unravel(e)))[0])(basis)

        cols = jax.lax.map(columns, jnp.arange(blocks)).reshape(blocks * k, n)[:n]
        return jax.scipy.linalg.lu_factor(cols.T)

    def compute(self, state, vector, options: dict[str, Any]):
        del options
        b, unravel = _ravel(vector)
        x = jax.scipy.linalg.lu_solve(state, b)
        return unravel(x), lx.RESULTS.successful, {}

    def transpose(self, state, options):
        raise NotImplementedError("ChunkedLU is not differentiable (no transpose).")


def with_chunked_jacobian(solver, chunk: int):
    """`solver` (an implicit diffrax solver whose root finder forms the dense Jacobian with
    lineax's automatic choice or `LU`) with its linear solver replaced by `ChunkedLU(chunk)`;
    None for any other solver."""
    ls = getattr(getattr(solver, "root_finder", None), "linear_solver", None)
    if not isinstance(ls, lx.AutoLinearSolver | lx.LU):
        return None
    return eqx.tree_at(lambda s: s.root_finder.linear_solver, solver, ChunkedLU(chunk=chunk))


def _is_flow_with_energy(vector) -> bool:
    """Whether a Newton right-hand side has the structure of `flows.simulate`'s state: a pair
    (θ, E) with E a scalar (the energy integral)."""
    return (
        isinstance(vector, tuple)
        and len(vector) == 2
        and isinstance(vector[1], jax.Array)  # tracers are jax.Array instances too
        and jnp.ndim(vector[1]) == 0
    )


class _StopOnCorrection(optx.AbstractRootFinder):
    """A root finder whose iterations are another's (`_inner`) and which stops when the
    correction is below the tolerance: ‖Δ/(atol + rtol |y|)‖ < 1 in `norm`, or when a
    linear solve failed (its result is reported)."""

    def _inner(self) -> optx.AbstractRootFinder:
        raise NotImplementedError

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        return self._inner().init(fn, y, args, options, f_struct, aux_struct, tags)

    def step(self, fn, y, args, options, state, tags):
        # y ← y − Δ, Δ = J⁻¹ g(y); state.diffsize = norm(Δ / (atol + rtol |y|))
        return self._inner().step(fn, y, args, options, state, tags)

    def terminate(self, fn, y, args, options, state, tags):
        del fn, y, args, options, tags
        failed = state.result != optx.RESULTS.successful
        converged = state.diffsize < 1  # NaN: not converged (the step count ends it)
        result = optx.RESULTS.where(failed, state.result, optx.RESULTS.successful)
        return (state.step > 0) & (converged | failed), result

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        del fn, args, options, state, tags, result
        return y, aux, {}


class StepNewton(_StopOnCorrection):
    """Newton's method (optimistix's `Newton` iterations: linearised at every iterate, the
    given linear solver) that stops when the **correction** is below the tolerance:
    RMS‖Δ/(atol + rtol |y|)‖ < 1 — with quadratic convergence the error left is far below
    it.

    Why not optimistix's Cauchy test (its default): it also asks ‖g(y)‖_∞ < atol for the
    residual g(f) = f − F(y₀ + γ h f) of a stage, in units of dy/dt, where rounding in F
    alone is ≈ ε ρ |y|. At tight tolerances on stiff flows that is out of reach, Newton
    "fails", the step is rejected and shrinks: 'kvaerno5-cg' on the heat equation
    (N = 200, ρ ≈ 1.6·10⁵) at rtol 1e-8 took 772 632 field evaluations (66 s) — with this
    test 1838, none rejected; on N = 1000 (ρ ≈ 4·10⁶) it did not finish rtol 1e-3 … 1e-8 in
    15 min — now 68 s, every rtol (rtol 1e-8 still rejects 4253 steps there: the rounding
    floor of the stage derivatives reaches atol = 1e-11). On the multi-stage flow the same
    errors with 10–16 % fewer evaluations. The max norm (optimistix's default) over the
    stage derivatives hit the same rounding floor in components where F ≈ 0 (heat
    N = 200, rtol 1e-8: 229 rejected steps); the RMS norm is the step-size controller's.

    A failed linear solve (`HessianCG` at negative curvature or its iteration cap) stops
    the iteration with that result; no convergence in the root finder's `max_steps`
    (diffrax: `root_find_max_steps` = 10) is reported by optimistix as
    `max_steps_reached`. Either rejects the step.

    **Fields:** `rtol`, `atol` (the scale of the correction: those of the step-size
    controller), `linear_solver`, `norm` (default RMS).
    """

    rtol: float
    atol: float
    linear_solver: lx.AbstractLinearSolver
    norm: Callable[[Any], Any] = optx.rms_norm

    def _inner(self) -> optx.Newton:
        return optx.Newton(
            rtol=self.rtol, atol=self.atol, norm=self.norm, linear_solver=self.linear_solver
        )


class StepChord(_StopOnCorrection):
    """diffrax's chord iterations (`VeryChord`: the Jacobian of the field at the step's
    start, factorized once and reused for every iteration of every stage) that stop when
    the correction is below the tolerance, as `StepNewton` — the root finder of the
    toolkit's 'kvaerno5' (`kvaerno5` in this module).

    Why not `VeryChord`'s own test (Hairer's rate test: at least two iterations, the
    convergence rate r = ‖Δₖ‖/‖Δₖ₋₁‖ from them, "diverged" when r > 2): a stage whose
    first correction is already tiny (a good predictor) is declared divergent when the
    second, at the rounding level, is larger — the step is rejected and shrinks. On the
    multi-stage flow (m = 50, n = 200, t = 20) diffrax's default Kvaerno5 ended 300–1000×
    more accurate than asked (err/rtol 0.0009–0.003) with 1444 … 17 840 evaluations at
    rtol 1e-3 … 1e-8; with this test 0.27–0.59 with 220 … 2096 (0–2 rejected steps). On
    linear fields (heat equation) both are the same. On the Brusselator (not a gradient
    flow) err/rtol goes from 0.0014–0.0019 to 0.05–9.1: Kvaerno5's estimate with
    converged stages underestimates there (Newton with exact solves measures the same).

    **Fields:** `rtol`, `atol`, `norm` (default: taken from the step-size controller, by
    `diffrax.with_stepsize_controller_tols`), `linear_solver` (default lineax's
    automatic choice: LU for the dense Jacobian).
    """

    rtol: Any
    atol: Any
    norm: Callable[[Any], Any] = optx.rms_norm
    linear_solver: lx.AbstractLinearSolver = lx.AutoLinearSolver(well_posed=None)

    def _inner(self) -> diffrax.VeryChord:
        return diffrax.VeryChord(
            rtol=self.rtol, atol=self.atol, norm=self.norm, linear_solver=self.linear_solver
        )


def kvaerno5() -> diffrax.Kvaerno5:
    """The toolkit's 'kvaerno5': diffrax's Kvaerno5 (ESDIRK 5(4), L-stable, dense
    Jacobian) whose chord iterations stop on the correction (`StepChord`), with the
    step-size controller's tolerances and norm."""
    return diffrax.Kvaerno5(root_finder=diffrax.with_stepsize_controller_tols(StepChord)())


def matrix_free_kvaerno5(
    rtol: float, atol: float, on_solve: Callable[[Any], None] | None = None
) -> diffrax.Kvaerno5:
    """diffrax's Kvaerno5 (ESDIRK 5(4), L-stable) whose stage equations are solved by
    Newton's method with `HessianCG` (matrix-free) — the solver `flows.simulate` calls
    'kvaerno5-cg'. Newton (`StepNewton`: the Jacobian-vector products taken at each
    iterate, stopped when the correction is below the solve's tolerances; diffrax's default
    `VeryChord` keeps a linearised operator in its state, which diffrax 0.7.2 cannot carry
    for a matrix-free one); CG's tolerances are 1e-3 of the solve's, at most
    `CG_MAX_STEPS` iterations per system. For gradient flows (symmetric Jacobian): on
    another field CG solves the wrong problem (the Brusselator: err/rtol 3.9 at rtol
    1e-8). `on_solve`: `HessianCG`'s count of Jacobian-vector products."""
    cg = HessianCG(rtol=1e-3 * float(rtol), atol=1e-3 * float(atol), on_solve=on_solve)
    root = StepNewton(rtol=float(rtol), atol=float(atol), linear_solver=cg)
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


def reports_products_to(solver, counter) -> bool:
    """Whether an implicit diffrax solver's linear solves are `HessianCG`s that report their
    Jacobian-vector products to `counter` (`on_solve`)."""
    ls = getattr(getattr(solver, "root_finder", None), "linear_solver", None)
    return isinstance(ls, HessianCG) and ls.on_solve == counter


def is_matrix_free(solver) -> bool:
    """Whether an implicit diffrax solver's linear solves are matrix-free (`HessianCG`,
    lineax's CG / GMRES / BiCGStab): then it never forms the dense Jacobian."""
    root = getattr(solver, "root_finder", None)
    ls = getattr(root, "linear_solver", None)
    return isinstance(ls, HessianCG | lx.CG | lx.GMRES | lx.BiCGStab)


def _make_kvaerno5_cg(rtol, atol, error_norm, on_products):
    from .cache import EVAL_COUNTER

    count = on_products if on_products is not None else EVAL_COUNTER.add_products
    return matrix_free_kvaerno5(rtol, atol, count)


def _default_kvaerno5_cg() -> diffrax.Kvaerno5:
    from .cache import EVAL_COUNTER

    return matrix_free_kvaerno5(1e-6, 1e-9, EVAL_COUNTER.add_products)


#: `solver='kvaerno5'`: the dense Jacobian, so `MAX_IMPLICIT_PARAMS` parameters at most;
#: its cubic Hermite dense output is of lower order than its steps: it steps to saves.
KVAERNO5_RECORD = SolverRecord(
    "kvaerno5",
    kvaerno5,
    method="Kvaerno5, chord iterations stopped on the correction (StepChord)",
    dense_jacobian=True,
    steps_to_saves=True,
)
#: `solver='kvaerno5-cg'`: matrix-free (CG on Hessian-vector products), any size.
KVAERNO5_CG_RECORD = SolverRecord(
    "kvaerno5-cg",
    _default_kvaerno5_cg,
    make=_make_kvaerno5_cg,
    method="Kvaerno5, Newton stopped on the correction (StepNewton), HessianCG on "
    "Hessian-vector products",
    steps_to_saves=True,
)
