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

from ._errors import ConfigError
from ._rkc import RKC2

__all__ = [
    "AUTO_RKC_MIN_RTOL",
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
    "describe_solver",
    "make_solver",
    "resolve_solver",
    "resolve_solver_name",
]

#: Solvers by name. Tsit5 (default, 5th order explicit), Dopri5, Dopri8 (tight
#: tolerances), Kvaerno5 (implicit, for stiff runs; forms the dense Hessian, so small
#: problems only), RKC2 (second-order Runge–Kutta–Chebyshev: stabilized explicit, for
#: gradient flows whose step is limited by the Hessian's spectral radius; its non-stiff,
#: accuracy-limited steps are Tsit5 steps; `flows.RKC2`).
SOLVERS: dict[str, Callable[[], diffrax.AbstractSolver]] = {
    "tsit5": diffrax.Tsit5,
    "dopri5": diffrax.Dopri5,
    "dopri8": diffrax.Dopri8,
    "kvaerno5": diffrax.Kvaerno5,
    "rkc": RKC2,
}
#: The implicit solvers among `SOLVERS` (they form the dense Jacobian of the field).
IMPLICIT_SOLVERS = frozenset({"kvaerno5"})
#: The algorithm behind a solver name where the name alone does not say it (recorded in
#: sweep manifests, so results of an earlier algorithm are not mixed with the new one).
SOLVER_METHODS = {"rkc": "RKC2, non-stiff steps (h·rho < 1.95) by Tsit5"}
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


def make_solver(name: str, rtol: float, atol: float) -> diffrax.AbstractSolver:
    """The solver object for a name in `SOLVERS`. 'rkc' takes its non-stiff steps
    (h ρ < 1.95) with Tsit5, which needs the controller's tolerances (`flows.RKC2`,
    `nonstiff`)."""
    if name == "rkc":
        return RKC2(nonstiff="tsit5", tolerances=(float(rtol), float(atol)))
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


def _solver_key(solver) -> Hashable:
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

    @property
    def is_rkc(self) -> bool:
        """RKC2 counts its own evaluations in its state (`flows.rkc_eval_counts`)."""
        return isinstance(self.solver, RKC2)

    def describe(self) -> dict:
        return describe_solver(self.solver)


def _named(solver: diffrax.AbstractSolver, rtol: float, atol: float) -> str | None:
    """The name in `SOLVERS` whose solver equals this object (None if none does)."""
    for name in SOLVERS:
        ref = make_solver(name, rtol, atol)
        if type(ref) is type(solver) and _tree_equal(ref, solver):
            return name
    return None


def _tree_equal(a, b) -> bool:
    try:
        return eqx.tree_equal(a, b) is True
    except Exception:  # noqa: BLE001 - incomparable leaves: not equal
        return False


def resolve_solver(
    solver, rtol: float, atol: float | None, n_params: int, dtype=None
) -> SolverChoice:
    """Resolve `solver` — 'auto', a name in `SOLVERS`, or a `diffrax.AbstractSolver` object
    (e.g. `flows.RKC2(...)`, `diffrax.Dopri5()`) — and check it against the problem.

    **Raises** `ConfigError` for an unknown name or object, a solver without an error
    estimate (the step-size controller is adaptive), an implicit solver on a problem too
    large for its dense Jacobian (`MAX_IMPLICIT_PARAMS`), an rtol that float32 cannot meet
    (`FLOAT32_MIN_RTOL`, `FLOAT32_IMPLICIT_MIN_RTOL`), or an RKC2 whose Tsit5 steps use
    tolerances other than the controller's (checked when `atol` is given).
    """
    atol_ = 0.0 if atol is None else atol
    if isinstance(solver, str):
        requested = solver
        name = auto_solver(rtol) if solver == "auto" else solver
        if name not in SOLVERS:
            raise ConfigError(
                f"`solver` must be 'auto', one of {sorted(SOLVERS)} or a diffrax solver "
                f"object (e.g. flows.RKC2(), diffrax.Dopri5()); got {solver!r}."
            )
        obj = make_solver(name, rtol, atol_)
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
            isinstance(obj, RKC2)
            and obj.nonstiff == "tsit5"
            and atol is not None
            and obj.tolerances is not None
        ):
            if tuple(map(float, obj.tolerances)) != (float(rtol), float(atol)):
                raise ConfigError(
                    f"RKC2(nonstiff='tsit5', tolerances={obj.tolerances}) must be given the "
                    f"solve's tolerances (rtol, atol) = ({rtol:g}, {atol:g}): its Tsit5 steps "
                    "rescale their error by them."
                )
        name = _named(obj, rtol, atol_) or requested
    else:
        raise ConfigError(
            f"`solver` must be 'auto', one of {sorted(SOLVERS)} or a diffrax solver object "
            f"(a diffrax.AbstractSolver, e.g. flows.RKC2()); got {solver!r}."
        )
    implicit = isinstance(obj, diffrax.AbstractImplicitSolver)
    if implicit and n_params > MAX_IMPLICIT_PARAMS:
        raise ConfigError(
            f"solver {name!r} forms the dense {n_params}×{n_params} Hessian; it is limited "
            f"to {MAX_IMPLICIT_PARAMS} parameters. Use 'tsit5' (explicit) for wide networks."
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
        key=_solver_key(obj),
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

    def reset(self):
        self.n = 0
        self.nonfinite = 0

    def __call__(self, bad):
        self.n += 1
        self.nonfinite += int(bad)


#: The one evaluation counter of the solves (reset at the start of each).
EVAL_COUNTER = EvalCounter()

#: Compiled solves, keyed by the kind of solve, its settings, the solver and the problem's
#: structure and shapes, so repeated runs (seeds, benchmarks, sweeps over equal shapes)
#: compile once.
_COMPILED: dict[Hashable, Any] = {}

_T = TypeVar("_T")


def cached(key: Hashable, build: Callable[[], _T]) -> tuple[_T, bool]:
    """The compiled solve stored under `key`, built by `build()` on first use; returns it and
    whether it was built now. The key names what `build` makes, so a hit has `build`'s type."""
    fn = _COMPILED.get(key)
    if fn is not None:
        return fn, False
    fn = build()
    _COMPILED[key] = fn
    return fn, True
