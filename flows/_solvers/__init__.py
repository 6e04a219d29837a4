"""The solvers `flows.simulate` knows by name, how a name or a diffrax solver object is
resolved and checked, and the state the solves share: one cache of compiled solves and one
vector-field evaluation counter."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx

from .. import _compile
from .._errors import ConfigError
from ._eserk import ESERK4
from ._implicit import is_matrix_free, kvaerno5, matrix_free_kvaerno5, reports_products_to
from ._rkc import RKC2
from ._rock import ROCK4
from ._stabilized import ERROR_NORMS, AbstractStabilizedSolver

__all__ = [
    "AUTO_ESERK_MAX_RTOL",
    "AUTO_RKC_MIN_RTOL",
    "AUTO_STIFF_RHO_SPAN",
    "ERROR_NORMS",
    "EVALS_PER_STEP",
    "FLOAT32_IMPLICIT_MIN_RTOL",
    "FLOAT32_MIN_RTOL",
    "IMPLICIT_SOLVERS",
    "MAX_IMPLICIT_PARAMS",
    "SOLVERS",
    "SOLVER_METHODS",
    "EVAL_COUNTER",
    "EvalCounter",
    "SolverChoice",
    "auto_solver",
    "cached",
    "check_error_norm",
    "error_norm_fn",
    "STEP_TO_SAVES",
    "initial_step",
    "spectral_radius",
    "steps_to_saves",
    "describe_solver",
    "make_solver",
    "pid_controller",
    "resolve_solver",
    "resolve_solver_name",
]

#: Solvers by name. Tsit5 (default, 5th order explicit), Dopri5, Dopri8 (tight
#: tolerances), Kvaerno5 (implicit, for stiff runs; forms the dense Hessian, so small
#: problems only), RKC2 (second-order Runge–Kutta–Chebyshev: stabilized explicit, for
#: gradient flows whose step is limited by the Hessian's spectral radius; its non-stiff,
#: accuracy-limited steps are Tsit5 steps; tolerance-proportional control; `flows.RKC2`),
#: ESERK4 (fourth-order stabilized explicit, extrapolated Chebyshev steps, for the same
#: flows at tight tolerances; `flows.ESERK4`), ROCK4 (fourth-order stabilized explicit
#: with a three-term recurrence: s evaluations a step for h ρ ≤ 0.318 s²; `flows.ROCK4`),
#: Kvaerno5-CG (Kvaerno5 whose Newton systems are solved by conjugate gradients on
#: Hessian-vector products: matrix-free, any size; `flows._solvers._implicit`).
SOLVERS: dict[str, Callable[[], diffrax.AbstractSolver]] = {
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "kvaerno5": kvaerno5,
    "rkc": RKC2,
    "eserk4": ESERK4,
    "rock4": ROCK4,
    "kvaerno5-cg": lambda: matrix_free_kvaerno5(1e-6, 1e-9, EVAL_COUNTER.add_products),
}
#: The implicit solvers among `SOLVERS` that form the dense Jacobian of the field
#: ('kvaerno5-cg' is implicit but matrix-free, so not limited by `MAX_IMPLICIT_PARAMS`).
IMPLICIT_SOLVERS = frozenset({"kvaerno5"})
#: The algorithm behind a solver name where the name alone does not say it (recorded in
#: sweep manifests, so results of an earlier algorithm are not mixed with the new one).
SOLVER_METHODS = {
    "kvaerno5": "Kvaerno5, chord iterations stopped on the correction (StepChord)",
    "rkc": (
        "RKC2, non-stiff steps (h·rho < 1.95) by Tsit5, RKC steps controlled to "
        "rtol·sqrt(rtol/1e-3), sub-steps beyond max_stages, secant check for a stale rho"
    ),
    "eserk4": (
        "ESERK4 (extrapolated first-order Chebyshev, eps = 2, at most 600 stages), "
        "non-stiff steps by Tsit5"
    ),
    "rock4": (
        "ROCK4-type (orthogonal-polynomial recurrence + 4-stage finishing procedure, "
        "degrees 5-292, coefficients derived in flows._solvers._rock), non-stiff steps by Tsit5"
    ),
    "kvaerno5-cg": (
        "Kvaerno5, Newton stopped on the correction (StepNewton), HessianCG on "
        "Hessian-vector products"
    ),
}
#: Vector-field evaluations per step of the explicit solvers as diffrax implements them
#: (plus one at the start): Tsit5 and Dopri5 are FSAL with 7 stages, Dopri8 has 13.
#: Checked against a host-callback count in the tests.
EVALS_PER_STEP = {"tsit5": 6, "dopri5": 6, "dopri8": 13}
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
#: long: Tsit5's stability bound alone costs < 6·ρT/3.3 ≈ 450 evaluations); else a
#: stabilized solver, RKC2 at rtol ≥ `AUTO_ESERK_MAX_RTOL` and a fourth-order one below:
#: ROCK4 (ESERK4 until ROCK4 existed; on every stiff problem of
#: benchmarks/results/work_precision_stiff.md ROCK4 needs 2.5–4× fewer evaluations than
#: ESERK4 at rtol ≤ 1e-6 and never exceeds rtol by more than 1.3×). The constant keeps
#: its name for compatibility.
AUTO_STIFF_RHO_SPAN = 250.0
AUTO_ESERK_MAX_RTOL = 1e-6
#: Without a measurement (`resolve_solver_name` for sweeps, `auto_solver(rtol)`): RKC2 at
#: rtol ≥ this, else Tsit5 (the rule of thumb before the measurement existed).
AUTO_RKC_MIN_RTOL = 1e-5


def auto_solver(rtol: float, rho_span: float | None = None) -> str:
    """The solver `simulate(solver='auto')` uses at this rtol, given the measured
    ρ·(t1 − t0) (`rho_span`; None: the rule of thumb without a measurement, 'rkc' at
    rtol ≥ 1e-5 else 'tsit5')."""
    if rho_span is None:
        return "rkc" if rtol >= AUTO_RKC_MIN_RTOL else "tsit5"
    if not rho_span >= AUTO_STIFF_RHO_SPAN:  # also for NaN: the safe general choice
        return "tsit5"
    return "rkc" if rtol >= AUTO_ESERK_MAX_RTOL else "rock4"


def spectral_radius(fn, y, n_iters: int = 20):
    """Power-iteration estimate ‖J v‖ of the spectral radius of the Jacobian of `fn` at `y`
    (a pytree), from a fixed pseudo-random start; jnp, traceable. For a gradient flow
    fn = −∇L it estimates the largest |eigenvalue| of the Hessian, from below."""
    from ._trees import _start_vector, _tree_norm

    def body(_, carry):
        v, _ = carry
        _, jv = jax.jvp(fn, (y,), (v,))
        nrm = _tree_norm(jv).astype(jnp.result_type(float))
        ok = nrm > 0
        v = jax.tree_util.tree_map(
            lambda a, b: jnp.where(ok, a / jnp.where(ok, nrm, 1).astype(a.dtype), b), jv, v
        )
        return v, nrm

    _, nrm = jax.lax.fori_loop(
        0, n_iters, body, (_start_vector(y), jnp.zeros((), jnp.result_type(float)))
    )
    return nrm


def initial_step(fn, t0, y0, *, rtol, atol, order: int, rho, stability: float | None, span):
    """First step of a solve, chosen by the toolkit (diffrax 0.7's own choice is skipped for
    wrapped terms: its `dt0=None` start is then always 0.01, which overflowed a quartic
    flow with Tsit5). Hairer–Nørsett–Wanner's rule (Solving ODEs I, §II.4) — h₀ = 0.01
    ‖y₀‖/‖f₀‖, then (0.01/max(‖f₀‖, ‖f(y₀ + h₀f₀) − f₀‖/h₀))^{1/(p+1)} in the controller's
    scaled norm — capped by `stability`/ρ for a method whose real stability interval is
    [−stability, 0] (None: stabilized or implicit, no cap), by `span` and by
    `FIRST_STEP_MAX` = 0.01 (below it rounded down to a power of two). jnp, traceable;
    `fn(t, y)` is the vector field.
    """
    fdt = jnp.result_type(float)
    leaves0 = jax.tree_util.tree_leaves(y0)
    size = sum(jnp.size(x) for x in leaves0)

    def norm(tree):
        sq = [
            jnp.sum((a / (atol + rtol * jnp.abs(b))) ** 2)
            for a, b in zip(jax.tree_util.tree_leaves(tree), leaves0, strict=True)
        ]
        return jnp.sqrt(sum(sq) / size).astype(fdt)

    f0 = fn(t0, y0)
    d0, d1 = norm(y0), norm(f0)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = jnp.where(small, 1e-6, 0.01 * d0 / jnp.where(small, 1.0, d1))
    if stability is not None:
        h0 = jnp.minimum(h0, stability / rho)
    y1 = jax.tree_util.tree_map(lambda a, b: a + h0.astype(a.dtype) * b, y0, f0)
    f1 = fn(t0 + h0, y1)
    d2 = norm(jax.tree_util.tree_map(lambda a, b: a - b, f1, f0)) / h0
    m = jnp.maximum(d1, d2)
    h1 = jnp.where(
        m <= 1e-15,
        jnp.maximum(1e-6, h0 * 1e-3),
        (0.01 / jnp.where(m > 0, m, 1.0)) ** (1.0 / (order + 1)),
    )
    h = jnp.minimum(100 * h0, h1)
    if stability is not None:
        h = jnp.minimum(h, stability / rho)
    # rounded down to a power of two: only its magnitude matters, and then the same problem
    # gets bit-for-bit the same first step alone and in a vmapped batch (whose reductions
    # round differently in the last bits)
    # and at most 0.01, the start diffrax used before: the controller grows an accepted step
    # up to 10× at once, so a cap costs a few steps, while a too-long first step costs a
    # rejection (and a batch whose members reject differently rounds differently)
    h = jnp.where(h >= FIRST_STEP_MAX, FIRST_STEP_MAX, 2.0 ** jnp.floor(jnp.log2(h)))
    h = jnp.minimum(h, span)
    return jnp.where(jnp.isfinite(h) & (h > 0), h, jnp.minimum(1e-6, span))


#: Longest first step the toolkit chooses (clock units).
FIRST_STEP_MAX = 0.01
#: Cap on h·ρ for the first step the toolkit chooses with a classical explicit solver
#: (Tsit5, Dopri5, Dopri8): h₀ ≤ `FIRST_STEP_STABILITY`/ρ, ρ the spectral radius of the
#: Hessian at θ(0) (`spectral_radius`), passed to `initial_step` as `stability`. Their
#: real stability intervals reach about −3.3 (Tsit5, Dopri5) and −6 (Dopri8); 2 leaves a
#: margin for a ρ estimated from below. Stabilized and implicit solvers: no cap. Later
#: steps are the step-size controller's.
FIRST_STEP_STABILITY = 2.0


def check_error_norm(error_norm) -> str:
    """`error_norm` validated: 'rms' or 'max' (`ERROR_NORMS`), else `ConfigError`."""
    if not isinstance(error_norm, str) or error_norm not in ERROR_NORMS:
        raise ConfigError(
            f"`error_norm` must be 'rms' (root mean square of the scaled error over the "
            f"state, diffrax's default) or 'max' (its largest component); got {error_norm!r}."
        )
    return error_norm


def error_norm_fn(error_norm: str) -> Callable[[Any], Any]:
    """The `norm` of `diffrax.PIDController` for an `error_norm` name: 'rms' →
    `optimistix.rms_norm` (the controller's default), 'max' → `optimistix.max_norm`."""
    return {"rms": optx.rms_norm, "max": optx.max_norm}[check_error_norm(error_norm)]


def pid_controller(
    rtol: float, atol: float, error_norm: str = "rms", step_ts=None
) -> diffrax.AbstractAdaptiveStepSizeController:
    """The step-size controller of the toolkit's solves: diffrax's PID controller with the
    given tolerances and norm ('rms': built exactly as before the option existed, i.e.
    with diffrax's default norm). `step_ts` (None: none): times every solve must step to
    (diffrax's `ClipStepSizeController`), e.g. the save times of a solver whose dense
    output cannot be trusted between steps (`steps_to_saves`); without them the controller
    is the same object as before the option existed (same steps, bit for bit)."""
    if check_error_norm(error_norm) == "rms":
        pid = diffrax.PIDController(rtol=rtol, atol=atol)
    else:
        pid = diffrax.PIDController(rtol=rtol, atol=atol, norm=error_norm_fn(error_norm))
    if step_ts is None:
        return pid
    return diffrax.ClipStepSizeController(pid, step_ts=step_ts)


#: Solvers that step to the save times (`pid_controller(step_ts=...)`) because a save
#: between their steps is far less accurate than a step end
#: (`benchmarks/results/dense_output.md`, worst save / worst step-end error): Dopri8, whose
#: diffrax interpolant is of lower order than its steps (linear ODE, rtol 1e-10: 24×), and
#: Kvaerno5, whose dense output is a cubic Hermite interpolant of an order-5 method
#: (Prothero–Robinson, rtol 1e-10: 129×; after stepping to saves ≤ 1 on the closed-form
#: problems). Stepping to saves costs them 5–80 % more steps.
#:
#: Not here, measured and left (the Limits page): the stabilized solvers (RKC2, ESERK4,
#: ROCK4: cubic Hermite on stiff steps, up to 3.3× for ROCK4 and 15× for ESERK4 on a
#: problem whose observable is a difference of large terms, ≤ 2 elsewhere) — stepping to
#: the multistage check's 401 saves costs them 2.3–2.5× the evaluations (RKC2 1057 → 2419,
#: ROCK4 1018 → 2569 at m = 1000, t = 20), the price of their long stiff steps; Tsit5 and
#: Dopri5 (3–7× in a stiff start-up only, ≤ 2 elsewhere).
STEP_TO_SAVES = frozenset({"dopri8", "kvaerno5", "kvaerno5-cg"})


def steps_to_saves(solver) -> bool:
    """Whether a solve with this solver (a name or a solver object) steps to its save
    times rather than interpolating between steps (`STEP_TO_SAVES`): Dopri8 and diffrax's
    implicit solvers with a cubic Hermite dense output (Kvaerno5)."""
    if isinstance(solver, str):
        return solver in STEP_TO_SAVES
    if isinstance(solver, AbstractStabilizedSolver):
        return False
    if isinstance(solver, diffrax.Dopri8):
        return True
    interp = getattr(solver, "interpolation_cls", None)
    hermite = diffrax.ThirdOrderHermitePolynomialInterpolation
    return interp is hermite or getattr(interp, "__self__", None) is hermite


def make_solver(
    name: str,
    rtol: float,
    atol: float,
    error_norm: str = "rms",
    on_products: Callable[[Any], None] | None = None,
) -> diffrax.AbstractSolver:
    """The solver object for a name in `SOLVERS`. 'rkc', 'eserk4' and 'rock4' take their non-stiff
    steps with Tsit5 and RKC2 controls to a transformed tolerance; both need the
    controller's tolerances and norm (`flows.RKC2`, `nonstiff`, `proportional`,
    `error_norm`). 'kvaerno5-cg' reports the Hessian-vector products of each linear
    solve to `on_products` (a host function of their number; default: the solves'
    evaluation counter, which `flows.simulate` reads)."""
    if name == "rkc":
        return RKC2(nonstiff="tsit5", tolerances=(float(rtol), float(atol)), error_norm=error_norm)
    if name == "eserk4":
        return ESERK4(
            nonstiff="tsit5", tolerances=(float(rtol), float(atol)), error_norm=error_norm
        )
    if name == "rock4":
        return ROCK4(nonstiff="tsit5", tolerances=(float(rtol), float(atol)), error_norm=error_norm)
    if name == "kvaerno5-cg":
        count = on_products if on_products is not None else EVAL_COUNTER.add_products
        return matrix_free_kvaerno5(rtol, atol, count)
    return SOLVERS[name]()


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
    dataclass-like module): what a trajectory's config records about the solver used."""
    fields = dataclasses.fields(solver) if dataclasses.is_dataclass(solver) else ()
    return {
        "class": type(solver).__name__,
        "settings": {f.name: _setting(getattr(solver, f.name, None)) for f in fields},
    }


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
    - `implicit`: a `diffrax.AbstractImplicitSolver` (dense Jacobian: small problems).
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
) -> SolverChoice:
    """Resolve `solver` — 'auto', a name in `SOLVERS`, or a `diffrax.AbstractSolver` object
    (e.g. `flows.RKC2(...)`, `diffrax.Dopri5()`) — and check it against the problem.

    **Raises** `ConfigError` for an unknown name or object, a solver without an error
    estimate (the step-size controller is adaptive), an implicit solver on a problem too
    large for its dense Jacobian (`MAX_IMPLICIT_PARAMS`), an rtol that float32 cannot meet
    (`FLOAT32_MIN_RTOL`, `FLOAT32_IMPLICIT_MIN_RTOL`), or an RKC2 whose Tsit5 steps use
    tolerances other than the controller's (checked when `atol` is given), an `error_norm`
    other than 'rms' or 'max', or an RKC2/ESERK4 object whose `error_norm` is not the
    controller's. 'auto' uses the measured ρ·(t1 − t0) `rho_span` when given
    (`auto_solver`). Named stabilized solvers are built with `error_norm`.
    """
    error_norm = check_error_norm(error_norm)
    atol_ = 0.0 if atol is None else atol
    if isinstance(solver, str):
        requested = solver
        name = auto_solver(rtol, rho_span) if solver == "auto" else solver
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
    implicit = isinstance(obj, diffrax.AbstractImplicitSolver)
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


class EvalCounter:
    """Counts vector-field calls, and those that returned NaN/Inf, from inside jitted code
    (host callback). Non-finite trial stages are normally rejected by the step-size
    controller; when a solve then fails, this count names the cause."""

    def __init__(self):
        self.n = 0
        self.nonfinite = 0
        self.products = 0

    def reset(self):
        self.n = 0
        self.nonfinite = 0
        self.products = 0

    def __call__(self, bad):
        self.n += 1
        self.nonfinite += int(bad)

    def add_products(self, k) -> None:
        """Jacobian-vector products of a matrix-free linear solve (`HessianCG.on_solve`)."""
        self.products += int(k)


#: The one evaluation counter of the solves (reset at the start of each).
EVAL_COUNTER = EvalCounter()

#: Compiled solves, keyed by the kind of solve, its settings, the solver and the problem's
#: structure and shapes, so repeated runs (seeds, benchmarks, sweeps over equal shapes)
#: compile once.
_COMPILED: dict[Hashable, Any] = {}
_compile.register_cache(_COMPILED.clear)

_T = TypeVar("_T")


def cached(key: Hashable, build: Callable[[], _T]) -> tuple[_T, bool]:
    """The compiled solve stored under `key`, built by `build()` on first use; returns it and
    whether it was built now. The key names what `build` makes, so a hit has `build`'s type."""
    fn = _COMPILED.get(key)
    if fn is not None:
        return fn, False
    _compile.relieve_map_pressure()  # before compiling: see `flows._compile`
    fn = build()
    _COMPILED[key] = fn
    return fn, True


# --- what a solver declares: the one interface `simulate` and `simulate_batch` use -------
#
# Solver families differ in what they carry and report; the differences live here, not in
# the solves.


def counts_own_evals(solver) -> bool:
    """Whether the solver counts its evaluations in its state (exact on accepted steps; a
    host callback would double its wall time on mid-size nets): the stabilized solvers
    (RKC2, ESERK4, ROCK4). The solve then saves its final state for `solver_report`."""
    return isinstance(solver, AbstractStabilizedSolver)


def has_stability_cap(solver) -> bool:
    """Whether the toolkit's first step must respect the solver's stability bound (ρ at θ(0)
    measured for it): the classical explicit solvers. Stabilized solvers estimate ρ
    themselves, implicit ones have no such bound."""
    return not isinstance(solver, AbstractStabilizedSolver | diffrax.AbstractImplicitSolver)


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
    if isinstance(solver, AbstractStabilizedSolver):
        return solver.report(solver_state, index, last_stages=last_stages)
    if counter is not None and reports_products_to(solver, counter.add_products):
        return counter.n + counter.products, {"jvp_evals": counter.products}
    return None, {}
