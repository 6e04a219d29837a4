"""The arguments every run takes, checked in the user's terms before anything is compiled:
the problem and θ(0), the time span, save times and what is saved, observables, stop
conditions, memory. Shared by `simulate`, `simulate_batch`, `gradient_descent` and
`simulate_nonsmooth`."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import ConfigError
from .._solvers import cached
from .._trees import tree_sq_norm
from .._validate import (
    MAX_SAVES,
    MAX_STEPS,
    MIN_RTOL,
    as_float,
    as_int,
    as_tolerance,
    check_bytes,
    evaluate_abstractly,
    short_repr,
    tracer_advice,
)
from .problem import Problem, available_bytes

#: An observables function: (problem, θ, t) → {name: array}. Evaluated inside the solve.
Observables = Callable[[Problem, dict, jax.Array], dict]


#: A stop condition: (problem, θ, t) → scalar; the run ends where it first falls to 0.
StopCondition = Callable[[Problem, dict, jax.Array], jax.Array]


def no_observables(problem, theta, t):
    """The observables function that records nothing beyond loss and energy."""
    return {}


@dataclasses.dataclass(frozen=True)
class stop_at_loss:  # noqa: N801 (used like a function: `stop=stop_at_loss(1e-3)`)
    """Stop condition for `simulate(stop=…)`: end the run when the loss reaches `eps`."""

    eps: float

    def __call__(self, problem, theta, t):
        return problem.loss(theta) - self.eps


@dataclasses.dataclass(frozen=True)
class stop_when_converged:  # noqa: N801 (used like a function)
    """Stop condition for `simulate(stop=…)`: end the run when the flow has stopped moving
    on the scale of log t,

        ln(10) · t · ‖∇L(θ)‖ ≤ atol + rtol · ‖θ‖,

    i.e. θ would move by less than `atol + rtol·‖θ‖` over the next decade of t if the
    field stayed as it is (dθ/d ln t = −t∇L; ‖·‖ the Euclidean norm over all parameters;
    t is physical time on every clock). A run that never gets there (a loss with no
    minimizer, where ‖θ‖ grows like log t) runs to its `t1`, and the trajectory says it
    was not stopped (`stats.result`). The condition is checked at every step: one
    gradient more per step. θ's limit is then θ(T) to within about that change; for a
    scalar observable's limit with an error bar, use `flows.claims.limit_in_time` on
    log-spaced saves.

    The run also stops where ‖∇L(θ)‖ has fallen to the solve's own noise floor,
    `NOISE_FACTOR`·‖∇L(θ + δ) − ∇L(θ)‖ with δ a fixed ±1 pattern times the solver's
    `atol + rtol·|θ|`: an adaptive solve hovers within its tolerance of the minimiser, so
    ‖∇L‖ stops decaying there while t keeps growing, and the first condition alone would
    never be met (stop rtol 1e-8 under a solve at rtol 1e-6 ran to t1). θ is then at its
    limit to within what the solve's tolerances can tell. Checked at every step: two
    gradients more per step."""

    #: ‖∇L‖ within this factor of its value's change over the solve's tolerance is noise
    NOISE_FACTOR = 2.0
    rtol: float = 1e-6
    atol: float = 1e-12

    def __post_init__(self):
        for name in ("rtol", "atol"):
            v = getattr(self, name)
            if not (isinstance(v, numbers.Real) and math.isfinite(v) and float(v) >= 0):
                raise ConfigError(
                    f"stop_when_converged: `{name}` must be a finite number ≥ 0; got {v!r}."
                )
        if self.rtol == 0 and self.atol == 0:
            raise ConfigError(
                "stop_when_converged: `rtol` and `atol` are both 0, so the run could never "
                "stop; give e.g. rtol=1e-6."
            )

    def __call__(self, problem, theta, t):
        g = jnp.sqrt(tree_sq_norm(problem.grad(theta)))
        size = jnp.sqrt(tree_sq_norm(theta))
        return math.log(10.0) * t * g - (self.atol + self.rtol * size)

    def at_noise_floor(self, problem, theta, solver_tol):
        """Whether ‖∇L(θ)‖ ≤ `NOISE_FACTOR`·‖∇L(θ + δ) − ∇L(θ)‖, δ a fixed ±1 pattern
        times the solver's `atol + rtol·|θ|` (`solver_tol` = (rtol, atol), run-time
        values): a boolean condition, met at a step's end (no root to locate in noise)."""
        rtol, atol = solver_tol
        grad = problem.grad(theta)
        leaves, treedef = jax.tree_util.tree_flatten(theta)
        keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
        moved = [
            p
            + jax.random.rademacher(k, jnp.shape(p), dtype=jnp.result_type(p))
            * (atol + rtol * jnp.abs(p))
            for p, k in zip(leaves, keys, strict=True)
        ]
        diff = jax.tree_util.tree_map(
            jnp.subtract, problem.grad(jax.tree_util.tree_unflatten(treedef, moved)), grad
        )
        noise = self.NOISE_FACTOR * jnp.sqrt(tree_sq_norm(diff))
        return jnp.sqrt(tree_sq_norm(grad)) <= noise


def describe_stop(stop) -> str:
    if stop is None:
        return "none"
    if isinstance(stop, stop_at_loss):
        return f"loss <= {stop.eps}"
    if isinstance(stop, stop_when_converged):
        return (
            f"converged: ln(10)·t·‖∇L‖ <= {stop.atol:g} + {stop.rtol:g}·‖θ‖ "
            "(change per decade of t), or ‖∇L‖ at the solve's noise floor"
        )
    return getattr(stop, "__name__", repr(stop))


# --- grouped arguments ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SaveSpec:
    """When a run saves and what — the flow's counterpart of diffrax's `SaveAt` — given to
    `flows.simulate`, `flows.simulate_batch` or `flows.simulate_nonsmooth` as `save=`.

    Each field is the flat argument of the same meaning (`ts`, `n_save`, `save_params`,
    `observables`); a field left None takes the flat argument (and so the function's
    default). Setting a field here *and* the flat argument to something other than its
    default is refused (`ConfigError`): one value, one place.

        flows.simulate(problem, t1=100.0,
                       save=flows.SaveSpec(ts=flows.log_save_times(100.0, 60), params="all"))
    """

    ts: Any = None
    n_save: int | None = None
    params: str | None = None
    observables: Any = None


@dataclasses.dataclass(frozen=True)
class ControllerSpec:
    """How steps are accepted — the flow's counterpart of diffrax's `PIDController` —
    given as `controller=`: `rtol`, `atol`, the error `norm` ('rms' or 'max'; the flat
    `error_norm`) and the first step `dt0`. A field left None takes the flat argument; set
    in both places (the flat one off its default) it is refused, as for `SaveSpec`.

        flows.simulate(problem, t1=20.0,
                       controller=flows.ControllerSpec(rtol=1e-8, atol=1e-11, norm="max"))
    """

    rtol: float | None = None
    atol: float | None = None
    norm: str | None = None
    dt0: float | None = None


#: (spec field, flat argument) of each grouped argument.
_SAVE_FIELDS = (("ts", "ts"), ("n_save", "n_save"), ("params", "save_params"),
                ("observables", "observables"))  # fmt: skip
_CONTROLLER_FIELDS = (("rtol", "rtol"), ("atol", "atol"), ("norm", "error_norm"), ("dt0", "dt0"))


def ungroup(fn: Callable, save, controller, flat: dict) -> dict:
    """The flat arguments of `fn` (`simulate`, `simulate_batch`, `simulate_nonsmooth`) with
    the fields of a `SaveSpec` (`save`) and a `ControllerSpec` (`controller`) filled in.

    `flat` holds the flat arguments as called; a spec field that is set (not None)
    replaces its flat argument, which must then be at `fn`'s default. A field whose flat
    argument `fn` does not take (e.g. `ts` for `simulate_batch`) is refused."""
    import inspect

    params = inspect.signature(fn).parameters
    out = dict(flat)
    for arg, spec, kind, fields in (
        ("save", save, SaveSpec, _SAVE_FIELDS),
        ("controller", controller, ControllerSpec, _CONTROLLER_FIELDS),
    ):
        if spec is None:
            continue
        if not isinstance(spec, kind):
            raise ConfigError(
                f"{fn.__name__}: `{arg}` must be a flows.{kind.__name__} (or None); got "
                f"{short_repr(spec)}. Or pass its fields as the flat arguments."
            )
        for field, name in fields:
            value = getattr(spec, field)
            if value is None:
                continue
            if name not in params:
                raise ConfigError(
                    f"{fn.__name__} takes no `{name}`: leave {kind.__name__}.{field} unset"
                    + (" (each run saves at n_save equally spaced times)" if name == "ts" else "")
                )
            default = params[name].default
            given = out.get(name, default)
            if not (given is default or _same(given, default)):
                raise ConfigError(
                    f"{fn.__name__}: `{name}` is given twice, as {name}={short_repr(given)} "
                    f"and as {arg}={kind.__name__}({field}={short_repr(value)}); give it once"
                )
            out[name] = value
    return out


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and other values without a plain ==
        return False


# --- argument checks (shared with flows._solve.batch and flows._solve.baselines) ---


def check_n_save(n_save) -> int:
    """`n_save` as an int in [2, `MAX_SAVES`] (before anything of that length is allocated)."""
    return as_int(
        "n_save",
        n_save,
        minimum=2,
        maximum=MAX_SAVES,
        hint="Save at fewer times (a few hundred draw any curve), or observables only.",
    )


def check_max_steps(max_steps) -> int:
    """`max_steps` as an int in [1, `MAX_STEPS`]."""
    return as_int(
        "max_steps",
        max_steps,
        minimum=1,
        maximum=MAX_STEPS,
        hint="It is a budget of solver steps; a stiff run wants a stiff solver instead.",
    )


def save_times(t0: float, t1: float, ts, n_save) -> np.ndarray:
    """`ts` checked (1-D, finite, increasing, within [t0, t1], at most `MAX_SAVES`), or
    `n_save` equally spaced times on [t0, t1]."""
    if ts is None:
        return np.linspace(t0, t1, check_n_save(n_save))
    try:
        ts = np.asarray(ts, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"`ts` must be a 1-D array of real save times; got {ts!r}.") from None
    if ts.ndim != 1 or ts.size < 2:
        raise ConfigError(
            f"`ts` must be a 1-D array of at least 2 save times; got shape {ts.shape}."
        )
    if ts.size > MAX_SAVES:
        raise ConfigError(
            f"`ts` holds {ts.size} save times; at most {MAX_SAVES} are supported. Save at "
            "fewer times (flows.log_save_times(t1, n) for late-phase runs)."
        )
    if not np.all(np.isfinite(ts)) or np.any(np.diff(ts) <= 0):
        raise ConfigError("`ts` must be finite and strictly increasing.")
    if ts[0] < t0 or ts[-1] > t1:
        raise ConfigError(f"`ts` must lie within [t0, t1] = [{t0}, {t1}]; got [{ts[0]}, {ts[-1]}].")
    return ts


def check_span(t0, t1) -> tuple[float, float]:
    """(t0, t1) as Python floats with t1 > t0 (NumPy and 0-d JAX numbers accepted)."""
    t0, t1 = as_float("t0", t0), as_float("t1", t1)
    if not t1 > t0:
        raise ConfigError(f"`t1` must be > t0 = {t0}; got t1 = {t1}.")
    return t0, t1


def check_save_params(save_params) -> None:
    if save_params not in ("all", "ends", "none"):
        raise ConfigError(
            f"`save_params` must be 'all', 'ends' or 'none'; got {save_params!r} "
            "('none' keeps only observables, for very wide networks)."
        )


def check_common(t0, t1, rtol, atol, save_params):
    """Validated (t0, t1, rtol, atol); tolerances must lie in (0, 1) (`as_tolerance`) and
    rtol must not be below float64's unit roundoff (`MIN_RTOL`)."""
    t0, t1 = check_span(t0, t1)
    rtol = as_tolerance("rtol", rtol, example="1e-6", floor=MIN_RTOL)
    atol = as_tolerance("atol", atol, example="1e-9")
    check_save_params(save_params)
    return t0, t1, rtol, atol


def check_dt0(dt0) -> float | None:
    if dt0 is None:
        return None
    return as_float("dt0", dt0, positive=True, hint="Or pass dt0=None to let the solver choose.")


def check_problem(problem, name: str = "problem") -> Problem:
    """`problem` if it is a `flows.Problem`, else `ConfigError` saying how to build one."""
    if not isinstance(problem, Problem):
        raise ConfigError(
            f"`{name}` must be a flows.Problem; got {type(problem).__name__} "
            f"{short_repr(problem)}. Build one with flows.make_problem(model, data, key=0) "
            "(or theta0=… for a model given as a function f(params, x))."
        )
    return problem


def _initial_state(problem: Problem):
    loss, g = problem.loss_and_grad(problem.theta0)
    return loss, tree_sq_norm(g)


def check_initial_state(problem: Problem) -> None:
    """Refuse a θ(0) at which the loss or ‖∇L‖² is NaN/Inf (an initialization so large that
    the network overflows): no solver can start there, and each would spend its whole step
    budget finding that out. A model or loss that JAX cannot differentiate (`np.` on
    traced values, a Python `if` on them) is refused with what to write instead.

    The loss and gradient at θ(0) are computed by one compiled program, kept per structure
    and shapes (op by op they cost 16 programs and 4–40 ms a call: a sweep of 200 gradient
    descent runs spent 7 s here). Only when that program cannot be traced, or finds a
    non-finite value, is the check run op by op, to refuse with its message."""
    key = ("initial state", jax.tree_util.tree_structure(problem)) + tuple(
        (v.shape, v.dtype) for v in jax.tree_util.tree_leaves(problem)
    )
    try:
        fn, _ = cached(key, lambda: jax.jit(_initial_state))
        if all(math.isfinite(float(v)) for v in fn(problem)):
            return
    except Exception:  # not traceable: the op-by-op check below says what to change
        pass
    _check_initial_state_eagerly(problem)


def _check_initial_state_eagerly(problem: Problem) -> None:
    try:
        loss, g = problem.loss_and_grad(problem.theta0)
    except ConfigError:
        raise
    except Exception as exc:
        advice = tracer_advice(exc)
        if advice is None:
            raise
        raise ConfigError(
            f"the model or loss cannot be differentiated by JAX at θ(0): {advice} "
            f"(JAX: {type(exc).__name__})"
        ) from exc
    loss, g2 = float(loss), float(tree_sq_norm(g))
    if not (math.isfinite(loss) and math.isfinite(g2)):
        raise ConfigError(
            f"the loss or its gradient is not finite at θ(0) (L = {loss:.4g}, ‖∇L‖² = "
            f"{g2:.4g}): the initialization overflows the network. Use a smaller init scale "
            "(or check the data for huge values)."
        )


def _first_t(problem: Problem, t0: float):
    return jnp.asarray(t0, dtype=problem.dtype)


def check_observables(problem: Problem, observables, t0: float = 0.0) -> tuple[Callable, int]:
    """`observables` (None: none) checked on a first evaluation at (θ(0), t0), traced as the
    solve traces it: a function returning a dict {name: array or number} of real values,
    names without `/` (netCDF reserves it). Returns the function and the bytes one save of
    its values takes (for `check_save_memory`). Anything else is a `ConfigError` naming
    `observables` and what it returned."""
    if observables is None:
        return no_observables, 0
    if not callable(observables):
        raise ConfigError(
            "`observables` must be a function (problem, θ, t) -> {name: array}, e.g. "
            f"multistage.multistage_observables; got {short_repr(observables)}."
        )
    call = f"observables(problem, θ(0), t = {t0:g})"
    out = evaluate_abstractly(
        "observables", observables, problem, problem.theta0, _first_t(problem, t0), call=call
    )
    expect = "a dict {name: array}, e.g. {'norm_a': jnp.linalg.norm(theta['a'])}"
    if not isinstance(out, Mapping):
        raise ConfigError(
            f"`observables` must return {expect}; {call} returned "
            f"{type(out).__name__} {short_repr(out)}."
        )
    nbytes = 0
    for key, value in out.items():
        if not isinstance(key, str) or not key or "/" in key:
            raise ConfigError(
                f"`observables` must return a dict whose names are non-empty strings without "
                f"'/' (they become netCDF variables); {call} returned the name {key!r}."
            )
        if isinstance(value, numbers.Real | np.generic) and not isinstance(value, str):
            arr = np.asarray(value)
            value = jax.ShapeDtypeStruct(arr.shape, arr.dtype)
        if not isinstance(value, jax.ShapeDtypeStruct):
            raise ConfigError(
                f"`observables` must return {expect}; the value of {key!r} is "
                f"{type(value).__name__} {short_repr(value)}, not one array or number."
            )
        if value.dtype.kind not in "biuf":
            raise ConfigError(
                f"`observables` must return real values; {key!r} has dtype {value.dtype}. "
                "Return the real part or the magnitude (jnp.real, jnp.abs)."
            )
        nbytes += math.prod(value.shape) * value.dtype.itemsize
    return observables, nbytes


def check_stop(
    problem: Problem, stop: StopCondition | None, t0: float = 0.0
) -> StopCondition | None:
    """`stop` (None: none) checked on a first evaluation at (θ(0), t0): a function (problem,
    θ, t) → one real number (the run ends where it falls to 0), else `ConfigError`."""
    if stop is None:
        return None
    expect = (
        "a function (problem, θ, t) -> one real number, the run ending where it falls to 0 "
        "(e.g. flows.stop_at_loss(1e-3))"
    )
    if not callable(stop):
        raise ConfigError(f"`stop` must be {expect}; got {short_repr(stop)}.")
    call = f"stop(problem, θ(0), t = {t0:g})"
    out = evaluate_abstractly(
        "stop", stop, problem, problem.theta0, _first_t(problem, t0), call=call
    )
    if isinstance(out, numbers.Real | np.generic) and not isinstance(out, bool | np.bool_):
        return stop
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise ConfigError(
            f"`stop` must be {expect}; {call} returned {type(out).__name__} {short_repr(out)}."
        )
    if out.shape != ():
        raise ConfigError(
            f"`stop` must be {expect}; {call} returned an array of shape {out.shape}. Reduce "
            "it to one number (e.g. jnp.min(...) to stop when the first entry reaches 0)."
        )
    if out.dtype.kind not in "iuf":
        what = "a bool" if out.dtype.kind == "b" else f"dtype {out.dtype}"
        raise ConfigError(
            f"`stop` must be {expect}; {call} returned {what}. Return a signed distance "
            "instead (e.g. jnp.where(done, -1.0, 1.0))."
        )
    return stop


def check_save_memory(problem: Problem, n_saves: int, n_param_saves: int, obs_bytes: int):
    """Refuse before the solve a run whose saved arrays (observables, loss and energy at
    `n_saves` times, θ at `n_param_saves`) cannot fit in the device's memory."""
    item = np.dtype(problem.dtype).itemsize
    need = n_saves * (obs_bytes + 2 * item) + n_param_saves * problem.n_params * item
    check_bytes(
        f"saving {n_saves} times ({n_param_saves} with θ, {problem.n_params} parameters)",
        need,
        available_bytes(),
        hint="save at fewer times, or pass save_params='ends' or 'none'.",
    )


def param_save_times(ts: np.ndarray, save_params: str) -> np.ndarray:
    return {"all": ts, "ends": ts[[0, -1]], "none": ts[:0]}[save_params]
