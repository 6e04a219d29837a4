"""A solver named or given as an object, resolved and checked against the problem:
'auto' (the measured stiffness), the solver objects a name stands for, and what a run
records about the solver it used."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from .._errors import ConfigError
from ._implicit import (
    is_matrix_free,
)
from ._stabilized import AbstractStabilizedSolver
from .control import PredictivePIDController, check_error_norm
from .registry import EVALS_PER_STEP, RECORD_BY_NAME, SOLVERS

#: An implicit solver materializes the (n_params × n_params) Jacobian; refuse beyond this.
MAX_IMPLICIT_PARAMS = 4000
#: Tightest rtol accepted for float32 problems (float32 resolves ~1.2e-7), and for the
#: implicit solvers in float32: their Newton iterations stall below it (measured: Kvaerno5 on
#: the linear teacher, float32, rtol 1e-6 did not finish in 15 min; rtol 1e-4: 0.35 s).
FLOAT32_MIN_RTOL = 1e-6
FLOAT32_IMPLICIT_MIN_RTOL = 1e-4
#: `solver='auto'` measures ρ·(t1 − t0) — ρ the spectral radius of the Hessian at θ(0)
#: (power iteration on Hessian-vector products, `spectral_radius`) — and picks:
#: Tsit5 when ρ·(t1 − t0) < `AUTO_STIFF_RHO_SPAN` (the step is not stability-limited for
#: long: Tsit5's stability bound alone costs < 6·ρT/3.3 ≈ 450 evaluations); else, where
#: the stiffness is one outlier (`AUTO_PILOT_STEPS` below) and rtol ≥
#: `AUTO_FOURTH_ORDER_MAX_RTOL`, ETDRK4; else a stabilized solver, RKC2 at rtol ≥
#: `AUTO_FOURTH_ORDER_MAX_RTOL` and a fourth-order one below: ROCK4 (on every stiff problem
#: of benchmarks/results/work_precision_stiff.md ROCK4 needs 2.5–4× fewer evaluations than
#: ESERK4 at rtol ≤ 1e-6 and never exceeds rtol by more than 1.3×).
AUTO_STIFF_RHO_SPAN = 250.0
AUTO_FOURTH_ORDER_MAX_RTOL = 1e-6
#: One outlier or a stiff bulk? A stiff run's Hessian is sampled again after a pilot of
#: `AUTO_PILOT_STEPS` gradient-descent steps of η = `AUTO_PILOT_STEP`/ρ(θ(0)) — the stiffest
#: mode of θ(0) relaxed by 2⁻²⁰, physical time 10/ρ(θ(0)) — because a bulk may be a
#: transient: on the multi-stage net (m = 200) every one of the 400 eigenvalues at θ(0) has
#: |λ| in [17.4, 18.9], 200 of each sign (t = 0.1: ±13.5 … ±13.7 at the ends); at t = 0.3
#: one is 26.7 and the next 0.31, and so on to t = 20 (26–27 over ≤ 0.31). There
#: `outlier_spectrum` gives the Hessian's two largest eigenvalues λ₁ ≥ λ₂ (Lanczos);
#: λ₂·(t1 − t0) < `AUTO_STIFF_RHO_SPAN` is one outlier, which ETDRK4 integrates exactly
#: (`benchmarks/results/auto.md`: 1.7–3.0× fewer gradients than RKC2 at rtol 1e-3 … 1e-6,
#: with smaller errors, on four one-outlier problems). Below rtol 1e-6 the choice stays
#: ROCK4 (at 1e-8 ETDRK4 takes 0.52–1.42× its evaluations for 0.31–5.1× its error).
AUTO_PILOT_STEPS = 20
AUTO_PILOT_STEP = 0.5
#: Without a measurement (`resolve_solver_name` for sweeps, `auto_solver(rtol)`): RKC2 at
#: rtol ≥ this, else Tsit5 (the rule of thumb before the measurement existed).
AUTO_RKC_MIN_RTOL = 1e-5


def auto_solver(rtol: float, rho_span: float | None = None, bulk_span: float | None = None) -> str:
    """The solver `simulate(solver='auto')` uses at this rtol, given the measured
    ρ·(t1 − t0) (`rho_span`; None: the rule of thumb without a measurement, 'rkc' at
    rtol ≥ 1e-5 else 'tsit5') and λ₂·(t1 − t0) (`bulk_span`: λ₂ the Hessian's second
    largest eigenvalue after the pilot, `outlier_spectrum`; None: not measured, never
    'etdrk4')."""
    if rho_span is None:
        return "rkc" if rtol >= AUTO_RKC_MIN_RTOL else "tsit5"
    if not rho_span >= AUTO_STIFF_RHO_SPAN:  # also for NaN: the safe general choice
        return "tsit5"
    if rtol >= AUTO_FOURTH_ORDER_MAX_RTOL:
        # NaN (a pilot that diverged) is not below: a stabilized solver
        one_outlier = bulk_span is not None and bulk_span < AUTO_STIFF_RHO_SPAN
        return "etdrk4" if one_outlier else "rkc"
    return "rock4"


def spectral_radius(fn, y, n_iters: int = 20):
    """Power-iteration estimate ‖J v‖ of the spectral radius of the Jacobian of `fn` at `y`
    (a pytree), from a fixed pseudo-random start; jnp, traceable. For a gradient flow
    fn = −∇L it estimates the largest |eigenvalue| of the Hessian, from below."""
    from .._trees import start_vector, tree_norm

    def body(_, carry):
        v, _ = carry
        _, jv = jax.jvp(fn, (y,), (v,))
        nrm = tree_norm(jv).astype(jnp.result_type(float))
        ok = nrm > 0
        v = jax.tree_util.tree_map(
            lambda a, b: jnp.where(ok, a / jnp.where(ok, nrm, 1).astype(a.dtype), b), jv, v
        )
        return v, nrm

    _, nrm = jax.lax.fori_loop(
        0, n_iters, body, (start_vector(y), jnp.zeros((), jnp.result_type(float)))
    )
    return nrm


def outlier_spectrum(fn, y, n_products: int = 20):
    """(λ₁, λ₂): the two largest decay rates −μ of the Jacobian J of `fn` at `y` (a pytree),
    μ its two most negative eigenvalues (each clipped at 0: a direction of growth is no
    decay) — for a gradient flow fn = −∇L the Hessian's two largest eigenvalues. Lanczos
    with full reorthogonalization (J symmetric; no spurious copies of a converged value),
    `n_products` products J v (at most the dimension) from `start_vector`: Ritz values
    approach the extreme eigenvalues from inside. λ₂ ≪ λ₁ says the stiffness is one outlier
    (what `ETDRK4` integrates cheaply), λ₂ ≈ λ₁ a cluster. jnp, traceable."""
    from jax.flatten_util import ravel_pytree

    from .._trees import start_vector

    flat0, unravel = ravel_pytree(y)
    v0, _ = ravel_pytree(start_vector(y))
    k = min(int(n_products), int(flat0.size))
    dt = flat0.dtype
    tiny = 100 * jnp.finfo(dt).eps

    def matvec(v):
        return ravel_pytree(jax.jvp(fn, (y,), (unravel(v),))[1])[0].astype(dt)

    def body(j, carry):
        basis, alpha, beta, v, ok = carry
        basis = basis.at[j].set(v)
        w = matvec(v)
        size = jnp.linalg.norm(w)
        a = jnp.vdot(v, w)
        for _ in range(2):  # twice is enough (Kahan–Parlett)
            w = w - basis.T @ (basis @ w)
        b = jnp.linalg.norm(w)
        # an invariant subspace reached: the rest of the tridiagonal stays 0 (its Ritz
        # values 0 are no decay, so they never raise λ₂)
        go = ok & (b > tiny * size)
        alpha = alpha.at[j].set(jnp.where(ok, a, 0))
        beta = beta.at[j].set(jnp.where(go, b, 0))
        v = jnp.where(go, w / jnp.where(go, b, 1), 0)
        return basis, alpha, beta, v, go

    init = (jnp.zeros((k, flat0.size), dt), jnp.zeros(k, dt), jnp.zeros(k, dt), v0, jnp.array(True))
    _, alpha, beta, _, _ = jax.lax.fori_loop(0, k, body, init)
    off = beta[:-1]
    ritz = jnp.linalg.eigvalsh(jnp.diag(alpha) + jnp.diag(off, 1) + jnp.diag(off, -1))
    decay = jnp.maximum(-ritz, 0)  # ascending Ritz values: the most negative first
    second = decay[1] if k > 1 else jnp.zeros((), dt)
    return decay[0], second


def make_solver(
    name: str,
    rtol: float,
    atol: float,
    error_norm: str = "rms",
    on_products: Callable[[Any], None] | None = None,
) -> diffrax.AbstractSolver:
    """The solver object for a name in `SOLVERS`, for a solve with these tolerances and
    norm (`record.SolverRecord.build`): 'rkc', 'eserk4' and 'rock4' take their non-stiff
    steps with Tsit5 and control with the controller's tolerances and norm; 'kvaerno5-cg'
    reports the Hessian-vector products of each linear solve to `on_products` (a host
    function of their number; default: the solves' evaluation counter, which
    `flows.simulate` reads)."""
    return RECORD_BY_NAME[name].build(rtol, atol, error_norm, on_products)


def _setting(value):
    """A solver field in JSON-friendly form (numbers, strings and tuples as they are)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_setting(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, jax.Array) or hasattr(value, "shape"):
        return jnp.asarray(value).tolist()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return describe_solver(value)
    return getattr(value, "__qualname__", None) or repr(value)


def describe_solver(solver) -> dict:
    """`{"class": name, "settings": {field: value}}` of a diffrax solver (or any
    dataclass-like module): what a trajectory's config records about the solver used —
    with the (pcoeff, icoeff) of the step-size controller for a solver that names its own
    (`controller_coefficients`: `ETDRK4`) and that controller's class
    (`PredictivePIDController`, `control.pid_controller`)."""
    fields = dataclasses.fields(solver) if dataclasses.is_dataclass(solver) else ()
    settings = {f.name: _setting(getattr(solver, f.name, None)) for f in fields}
    coeffs = getattr(solver, "controller_coefficients", None)
    if coeffs is not None:
        settings["controller_coefficients"] = list(coeffs)
        settings["controller"] = PredictivePIDController.__name__
    return {"class": type(solver).__name__, "settings": settings}


def solver_key(solver) -> Hashable:
    """A hashable description of a solver object for the compile cache: its tree structure
    (static fields included), its non-array leaves, and the shapes and dtypes of its array
    leaves (arrays are traced, so their values do not change the compiled solve)."""
    leaves, treedef = jax.tree_util.tree_flatten(solver)
    out = []
    for leaf in leaves:
        if isinstance(leaf, jax.Array) or hasattr(leaf, "shape"):
            out.append(("array", jnp.shape(leaf), str(jnp.result_type(leaf))))
        else:
            try:
                hash(leaf)
                out.append(leaf)
            except TypeError:  # unhashable static leaf: identity is the only safe key
                out.append(("id", id(leaf)))
    return (type(solver), treedef, tuple(out))


@dataclasses.dataclass(frozen=True)
class SolverChoice:
    """A resolved solver: what `simulate` integrates with and records.

    - `name`: the name in `SOLVERS` when the object is that name's solver (a solver given
      as an object that equals a named one is recorded under the name), else the class
      name (e.g. 'RKC2' for an RKC2 with other settings).
    - `solver`: the diffrax solver object. `requested`: what the caller passed, as text.
    - `implicit`: an implicit solver (`is_implicit`; dense Jacobian unless matrix-free:
      small problems).
    - `evals_per_step`: vector-field evaluations per step when they follow from the step
      count (`EVALS_PER_STEP`), else None.
    - `key`: hashable description for the compile cache.
    """

    name: str
    solver: diffrax.AbstractSolver = dataclasses.field(compare=False)
    requested: str
    implicit: bool
    evals_per_step: int | None
    key: Hashable

    def describe(self) -> dict:
        return describe_solver(self.solver)


def is_implicit(solver) -> bool:
    """Whether the toolkit treats `solver` as implicit (Newton iterations on the field's
    Jacobian: limited to `MAX_IMPLICIT_PARAMS` unless matrix-free, a higher float32 rtol
    floor, no loss clock): a `diffrax.AbstractImplicitSolver` other than the stabilized
    explicit solvers, which are one only so that diffrax hands them the controller's
    tolerances (`AbstractStabilizedSolver`)."""
    return isinstance(solver, diffrax.AbstractImplicitSolver) and not isinstance(
        solver, AbstractStabilizedSolver
    )


def _named(
    solver: diffrax.AbstractSolver, rtol: float, atol: float, error_norm: str = "rms"
) -> str | None:
    """The name in `SOLVERS` whose solver equals this object (None if none does)."""
    for name in SOLVERS:
        ref = make_solver(name, rtol, atol, error_norm)
        if type(ref) is type(solver) and _tree_equal(ref, solver):
            return name
    return None


def _tree_equal(a, b) -> bool:
    try:
        return eqx.tree_equal(a, b) is True
    except Exception:  # noqa: BLE001 - incomparable leaves: not equal
        return False


def resolve_solver(
    solver,
    rtol: float,
    atol: float | None,
    n_params: int,
    dtype=None,
    rho_span=None,
    error_norm: str = "rms",
    bulk_span=None,
) -> SolverChoice:
    """Resolve `solver` — 'auto', a name in `SOLVERS`, or a `diffrax.AbstractSolver` object
    (e.g. `flows.RKC2(...)`, `diffrax.Dopri5()`) — and check it against the problem.

    **Raises** `ConfigError` for an unknown name or object, a solver without an error
    estimate (the step-size controller is adaptive), an implicit solver on a problem too
    large for its dense Jacobian (`MAX_IMPLICIT_PARAMS`), an rtol that float32 cannot meet
    (`FLOAT32_MIN_RTOL`, `FLOAT32_IMPLICIT_MIN_RTOL`), or an RKC2 whose Tsit5 steps use
    tolerances other than the controller's (checked when `atol` is given), an `error_norm`
    other than 'rms' or 'max', or an RKC2/ESERK4 object whose `error_norm` is not the
    controller's. 'auto' uses the measured ρ·(t1 − t0) `rho_span` and λ₂·(t1 − t0)
    `bulk_span` when given (`auto_solver`). Named stabilized solvers are built with `error_norm`.
    """
    error_norm = check_error_norm(error_norm)
    atol_ = 0.0 if atol is None else atol
    if isinstance(solver, str):
        requested = solver
        name = auto_solver(rtol, rho_span, bulk_span) if solver == "auto" else solver
        if name not in SOLVERS:
            raise ConfigError(
                f"`solver` must be 'auto', one of {sorted(SOLVERS)} or a diffrax solver "
                f"object (e.g. flows.RKC2(), diffrax.Dopri5()); got {solver!r}."
            )
        obj = make_solver(name, rtol, atol_, error_norm)
    elif isinstance(solver, diffrax.AbstractSolver):
        obj = solver
        requested = type(solver).__name__
        if not isinstance(obj, diffrax.AbstractAdaptiveSolver):
            raise ConfigError(
                f"solver {requested} has no error estimate, but `simulate` steps with an "
                "adaptive PID controller; use an adaptive solver (e.g. diffrax.Tsit5(), "
                "diffrax.Dopri5(), flows.RKC2())."
            )
        if (
            isinstance(obj, AbstractStabilizedSolver)
            and atol is not None
            and obj.tolerances is not None
        ):
            if tuple(map(float, obj.tolerances)) != (float(rtol), float(atol)):
                raise ConfigError(
                    f"{requested}(tolerances={obj.tolerances}) must be given the solve's "
                    f"tolerances (rtol, atol) = ({rtol:g}, {atol:g}): its Tsit5 steps and its "
                    "tolerance-proportional control rescale their error by them."
                )
        if (
            isinstance(obj, AbstractStabilizedSolver)
            and obj.tolerances is not None
            and obj.error_norm != error_norm
        ):
            raise ConfigError(
                f"{requested}(error_norm={obj.error_norm!r}) must use the solve's "
                f"`error_norm` = {error_norm!r}: it judges its Tsit5 steps and its retries "
                "in the controller's norm. Pass the same value to both."
            )
        name = _named(obj, rtol, atol_, error_norm) or requested
    else:
        raise ConfigError(
            f"`solver` must be 'auto', one of {sorted(SOLVERS)} or a diffrax solver object "
            f"(a diffrax.AbstractSolver, e.g. flows.RKC2()); got {solver!r}."
        )
    implicit = is_implicit(obj)
    if implicit and not is_matrix_free(obj) and n_params > MAX_IMPLICIT_PARAMS:
        raise ConfigError(
            f"solver {name!r} forms the dense {n_params}×{n_params} Hessian; it is limited "
            f"to {MAX_IMPLICIT_PARAMS} parameters. Use 'kvaerno5-cg' (matrix-free), 'rkc' or "
            "'eserk4' (stabilized explicit) or 'tsit5' for wide networks."
        )
    if dtype is not None and jnp.dtype(dtype) == jnp.float32:
        floor = FLOAT32_IMPLICIT_MIN_RTOL if implicit else FLOAT32_MIN_RTOL
        if rtol < floor:
            raise ConfigError(
                f"rtol = {rtol:g} is below what solver {name!r} can meet in float32 "
                f"(rtol ≥ {floor:g}). Raise rtol, or build the problem with dtype='float64'."
            )
    return SolverChoice(
        name=name,
        solver=obj,
        requested=requested,
        implicit=implicit,
        evals_per_step=EVALS_PER_STEP.get(name),
        key=solver_key(obj),
    )


def resolve_solver_name(solver, rtol: float, n_params: int, dtype=None) -> str:
    """The solver name `simulate` would use ('auto' resolved), or `ConfigError` (as
    `resolve_solver`; the name-only form that sweeps use to check settings up front)."""
    return resolve_solver(solver, rtol, None, n_params, dtype).name
