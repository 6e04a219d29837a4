"""Shared argument validators: accept what a user means (Python, NumPy and 0-d JAX numbers),
refuse everything else with a `ConfigError` naming the argument and what to try.

The scalar validators return the value as a plain Python `float`, `int` or `bool`, so
downstream code (json, hashing, equinox static fields, diffrax) sees one type whatever the
caller passed. Accepted: Python numbers (`int`, `float`, `fractions.Fraction`,
`decimal.Decimal`), NumPy scalars (`np.int64`, `np.float32`, …) and 0-d NumPy or JAX
arrays. Refused: `bool` where a number is meant (`m=True` is a typo, not a width of 1),
strings, `None`, complex numbers, NaN/±inf, arrays with a shape (even shape (1,)) and
traced JAX values. `as_int` refuses integral floats such as 3.0 on purpose: a width or a
count written as a float is usually a computation gone wrong (2.5 → 2 would be a silent
truncation); pass `int(x)` when it is meant.

Arrays (`as_real_array`): real numbers of any integer or float dtype; **bool arrays are
accepted as 0/1** (indicator features and binary labels are common); complex, strings,
objects that are not numbers, ragged nesting and traced values are refused.
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from ._errors import ConfigError

__all__ = [
    "MAX_SAVES",
    "MAX_SEED",
    "MAX_STEPS",
    "MIN_RTOL",
    "as_bool",
    "as_choice",
    "as_float",
    "as_int",
    "as_key",
    "as_real_array",
    "as_seed",
    "as_tolerance",
    "check_bytes",
    "check_log_save_grid",
    "evaluate_abstractly",
    "short_repr",
    "tracer_advice",
]

#: PRNG seeds: jax.random.key takes a 64-bit value; beyond it numpy/jax overflow.
MAX_SEED = 2**63 - 1
#: Tightest rtol accepted: float64's unit roundoff. A relative tolerance below it asks for
#: more than the state can represent; such a run spun until `max_steps` (`flows simulate
#: multistage --rtol 1e-30`: ~70 s, then exit 3). float32 problems have a stricter floor
#: (`FLOAT32_MIN_RTOL`, checked with the solver).
MIN_RTOL = float(np.finfo(np.float64).eps)

#: The most save times one run may ask for (`n_save`, a `ts` grid). Each is a stop of the
#: solver and a row of every saved array; 10⁷ is far past any figure, and the grid alone is
#: then 80 MB. Beyond it a count is a typo (`n_save=10**13` would try to allocate 73 TiB).
MAX_SAVES = 10**7

#: The most steps one run may be given (`max_steps`; gradient descent's t1/η). At a
#: microsecond a step — a tiny network — 10¹² steps take 11 days; beyond it a count is a
#: typo (η = 1e-300), and past 2⁶³ it no longer fits the solvers' integer counters.
MAX_STEPS = 10**12


def short_repr(value, limit: int = 80) -> str:
    """`repr(value)` on one line, shortened for messages."""
    try:
        text = " ".join(repr(value).split())
    except Exception:  # pragma: no cover - exotic objects
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_show = short_repr


def _tail(hint: str) -> str:
    return f" {hint}" if hint else ""


def _scalar(name: str, value, kind: str, hint: str = ""):
    """`value` as a Python int or float, or ConfigError (bools, strings, None, complex,
    arrays with a shape, traced values, non-numbers)."""
    extra = _tail(hint)
    if isinstance(value, bool | np.bool_):
        raise ConfigError(f"`{name}` must be {kind}; got the bool {value!r}.{extra}")
    if value is None:
        raise ConfigError(f"`{name}` must be {kind}; got None.{extra}")
    if isinstance(value, str | bytes):
        raise ConfigError(
            f"`{name}` must be {kind}; got the string {_show(value)}: pass a number, "
            f"not text.{extra}"
        )
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real | decimal.Decimal):
        return float(value)
    if isinstance(value, numbers.Complex):
        raise ConfigError(
            f"`{name}` must be {kind} (a real number); got the complex value {value!r}."
        )
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise ConfigError(
            f"`{name}` must be {kind}; got {_show(value)} of type {type(value).__name__}.{extra}"
        )
    try:
        shape = tuple(value.shape)
        arr = np.asarray(value)
    except Exception:
        raise ConfigError(
            f"`{name}` must be {kind}; got {_show(value)}, which cannot be read as a number "
            "(a traced JAX value or a PRNG key?). Pass a concrete Python or NumPy number."
        ) from None
    if shape != ():
        raise ConfigError(
            f"`{name}` must be {kind}, a single number; got an array of shape {shape}.{extra}"
        )
    if arr.dtype.kind == "b":
        raise ConfigError(f"`{name}` must be {kind}; got the bool {value!r}.{extra}")
    if arr.dtype.kind == "c":
        raise ConfigError(
            f"`{name}` must be {kind} (a real number); got the complex value {value!r}."
        )
    if arr.dtype.kind in "iu":
        return int(arr)
    if arr.dtype.kind == "f":
        return float(arr)
    raise ConfigError(f"`{name}` must be {kind}; got {_show(value)}.{extra}")


def as_float(
    name: str,
    value,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    hint: str = "",
) -> float:
    """`value` as a finite Python float (optionally > 0, ≥ 0, within [lo, hi])."""
    extra = _tail(hint)
    kind = "a finite number" + (" > 0" if positive else " ≥ 0" if nonnegative else "")
    v = _scalar(name, value, kind, hint)
    try:
        v = float(v)
    except OverflowError:  # a Python int beyond float range
        raise ConfigError(f"`{name}` must be {kind}; got {_show(value)}.{extra}") from None
    if not math.isfinite(v):
        raise ConfigError(f"`{name}` must be {kind}; got {v!r}.{extra}")
    if positive and not v > 0:
        raise ConfigError(f"`{name}` must be > 0; got {v!r}.{extra}")
    if nonnegative and not v >= 0:
        raise ConfigError(f"`{name}` must be ≥ 0; got {v!r}.{extra}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        if lo is not None and hi is not None:
            where = f"lie in [{lo:g}, {hi:g}]"
        elif lo is not None:
            where = f"be ≥ {lo:g}"
        else:
            where = f"be ≤ {hi:g}"
        raise ConfigError(f"`{name}` must {where}; got {v!r}.{extra}")
    return v


def as_int(
    name: str,
    value,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    hint: str = "",
) -> int:
    """`value` as a Python int (integral floats such as 3.0 are refused: a width of 2.5 is a
    typo, not a request)."""
    extra = _tail(hint)
    if minimum is not None and maximum is not None:
        bound = f" in [{minimum}, {maximum}]"
    elif minimum is not None:
        bound = f" ≥ {minimum}"
    elif maximum is not None:
        bound = f" ≤ {maximum}"
    else:
        bound = ""
    v = _scalar(name, value, f"an integer{bound}", hint)
    if isinstance(v, float):
        what = "an integral float" if math.isfinite(v) and v == int(v) else "a float"
        try_ = f" Pass int({value!r}) if that is meant." if what == "an integral float" else ""
        raise ConfigError(
            f"`{name}` must be an integer{bound}; got {_show(value)} ({what}).{try_}{extra}"
        )
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        raise ConfigError(f"`{name}` must be an integer{bound}; got {v}.{extra}")
    return v


def as_seed(name: str, value) -> int:
    """A PRNG seed: an integer in [0, 2⁶³ − 1]."""
    return as_int(
        name, value, minimum=0, maximum=MAX_SEED, hint="Seeds are integers such as 0, 1, 2."
    )


def as_tolerance(name: str, value, *, example: str, floor: float | None = None) -> float:
    """A solver tolerance: a finite number in (0, 1). Above 1 error control is switched off
    (an atol of 1e300 accepts any step); refuse it up front. `floor`: the smallest value
    accepted (a relative tolerance: float64's unit roundoff, `MIN_RTOL`)."""
    v = as_float(name, value, positive=True, hint=f"Try e.g. {name}={example}.")
    if not v < 1:
        raise ConfigError(
            f"`{name}` must be < 1; got {v!r}: with it the step-size controller accepts "
            f"almost any step and the flow is not integrated. Try e.g. {name}={example}."
        )
    if floor is not None and v < floor:
        raise ConfigError(
            f"`{name}` = {v!r} is below float64's unit roundoff ({floor:.3g}): no solver "
            "can meet a relative error smaller than the rounding of the state itself. Use "
            f"{name} ≥ 1e-13 for the tightest meaningful runs."
        )
    return v


def as_bool(name: str, value, *, hint: str = "") -> bool:
    """`value` as a Python bool: `True`/`False`, `np.bool_` or a 0-d bool array.

    Strings (`"False"` is truthy), numbers and None are refused."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        try:
            arr = np.asarray(value)
        except Exception:
            arr = None
        if arr is not None and arr.shape == () and arr.dtype.kind == "b":
            return bool(arr)
    raise ConfigError(f"`{name}` must be True or False; got {_show(value)}.{_tail(hint)}")


def as_choice(name: str, value, choices: Iterable[str], *, hint: str = "") -> str:
    """`value` if it is one of the strings `choices` (any type, hashable or not, else
    `ConfigError` listing them)."""
    options = tuple(choices)
    if isinstance(value, str) and value in options:
        return value
    listed = ", ".join(repr(c) for c in options)
    raise ConfigError(f"`{name}` must be one of {listed}; got {_show(value)}.{_tail(hint)}")


def as_real_array(
    name: str,
    value,
    *,
    dtype: DTypeLike | None = np.float64,
    finite: bool = True,
    hint: str = "",
) -> np.ndarray:
    """`value` as a NumPy array of real numbers (a copy only when a conversion needs one).

    `dtype`: the dtype returned (default float64); `None` keeps an integer or float dtype
    (bool becomes int64). Bool arrays are accepted as 0/1. Refused with `ConfigError`:
    None, strings, complex numbers, ragged nesting, non-numeric objects, traced values and
    (with `finite`) NaN/±inf — the message gives the index of the first offender.
    """
    extra = _tail(hint)
    if value is None:
        raise ConfigError(f"`{name}` must be an array of real numbers; got None.{extra}")
    if isinstance(value, str | bytes):
        raise ConfigError(
            f"`{name}` must be an array of real numbers; got the string {_show(value)}.{extra}"
        )
    try:
        arr = np.asarray(value)
    except ValueError as exc:
        if "inhomogeneous" in str(exc) or "sequence" in str(exc):
            raise ConfigError(
                f"`{name}` is ragged (rows of different lengths); it must be a rectangular "
                f"array of real numbers.{extra}"
            ) from None
        raise ConfigError(
            f"`{name}` cannot be read as an array of numbers: {exc}.{extra}"
        ) from None
    except Exception:
        raise ConfigError(
            f"`{name}` cannot be read as an array of numbers (a traced JAX value or a PRNG "
            f"key?); got {_show(value)}.{extra}"
        ) from None
    kind = arr.dtype.kind
    if kind == "O":
        flat = arr.ravel()
        if any(isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real) for v in flat):
            raise ConfigError(
                f"`{name}` must be real; it holds complex numbers. Pass the real part "
                f"(`np.real`) or the magnitude (`np.abs`) explicitly.{extra}"
            )
        bad = [
            v
            for v in flat
            if isinstance(v, str | bytes)
            or not isinstance(v, numbers.Real | decimal.Decimal | np.generic)
        ]
        if bad:
            raise ConfigError(
                f"`{name}` must be an array of real numbers; it holds {_show(bad[0])} "
                f"({type(bad[0]).__name__}).{extra}"
            )
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise ConfigError(f"`{name}` must be an array of real numbers.{extra}") from None
        kind = "f"
    if kind == "c":
        raise ConfigError(
            f"`{name}` must be real; got complex values (dtype {arr.dtype}). Pass the real part "
            f"(`np.real`) or the magnitude (`np.abs`) explicitly.{extra}"
        )
    if kind in "US":
        raise ConfigError(
            f"`{name}` must be an array of real numbers; it holds strings (dtype {arr.dtype}), "
            f"e.g. {_show(arr.ravel()[0]) if arr.size else ''}. Convert them to numbers "
            f"first.{extra}"
        )
    if kind not in "biuf":
        raise ConfigError(
            f"`{name}` must be an array of real numbers; got dtype {arr.dtype}.{extra}"
        )
    if dtype is not None:
        arr = np.asarray(arr, dtype=dtype)
    elif kind == "b":
        arr = arr.astype(np.int64)
    if finite and arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            idx = np.argwhere(bad)[0].tolist()
            where = f"index {idx}" if arr.ndim > 1 else f"index {idx[0]}" if idx else "it"
            raise ConfigError(
                f"`{name}` contains non-finite values (first at {where}: {arr[bad].flat[0]}); "
                f"remove or impute them.{extra}"
            )
    return arr


def as_key(name: str, value):
    """A JAX PRNG key: an already-made key (`jax.random.key(s)`, a typed key array of shape
    (), or a legacy `jax.random.PRNGKey(s)`, uint32 of shape (2,)) is returned as it is;
    anything else must be a seed (`as_seed`) and becomes `jax.random.key(seed)`."""
    import jax
    import jax.numpy as jnp

    dtype = getattr(value, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        if tuple(value.shape) != ():
            raise ConfigError(
                f"`{name}` must be one PRNG key (shape ()); got a key array of shape "
                f"{tuple(value.shape)}. Pass one key, e.g. {name}=keys[0], or an integer seed."
            )
        return value
    if (
        dtype is not None
        and not isinstance(value, np.generic)
        and tuple(getattr(value, "shape", ())) == (2,)
        and np.dtype(dtype) == np.uint32
    ):
        return jnp.asarray(value)  # a legacy raw key, jax.random.PRNGKey(seed)
    seed = _seed_or_key(name, value)
    return jax.random.key(seed)


def _seed_or_key(name: str, value) -> int:
    hint = "Pass an integer seed such as 0, or a key made by jax.random.key(seed)."
    return as_int(name, value, minimum=0, maximum=MAX_SEED, hint=hint)


def check_log_save_grid(t1, n_save, t0, first) -> tuple[float, int, float, float]:
    """The arguments of `flows.log_save_times(t1, n_save, t0, first)` checked: `t1` a finite
    horizon > 0 and > `t0`, `t0` finite, `first` finite > 0, `n_save` an integer in
    [2, `MAX_SAVES`] (before the grid is allocated). Returns them as Python numbers."""
    t1 = as_float("t1", t1, positive=True, hint="It is the final save time, e.g. t1=1e6.")
    t0 = as_float("t0", t0)
    if not t1 > t0:
        raise ConfigError(f"`t1` must be > t0 = {t0!r}; got t1 = {t1!r}.")
    first = as_float(
        "first", first, positive=True, hint="It is the first log-spaced save time, e.g. 1.0."
    )
    n_save = as_int(
        "n_save",
        n_save,
        minimum=2,
        maximum=MAX_SAVES,
        hint="A few hundred log-spaced times draw any late-phase curve.",
    )
    return t1, n_save, t0, first


# --- a user's functions, evaluated once before a run ------------------------------------

#: What to change when JAX cannot trace a user's function, by the error it raised (most
#: specific first: `TracerBoolConversionError` is a `ConcretizationTypeError`).
_TRACER_ADVICE = (
    (
        "TracerArrayConversionError",
        "it converts a traced JAX array to NumPy — an `np.` function (np.tanh, np.exp, "
        "np.linalg.norm, np.asarray, …) applied to the parameters, the data or t. Write it "
        "with `jax.numpy` instead (`import jax.numpy as jnp`; jnp.tanh, jnp.linalg.norm).",
    ),
    (
        "TracerBoolConversionError",
        "it branches in Python (`if`, `while`, `and`/`or`, `bool(…)`, `min`/`max` of arrays) "
        "on a traced value, which has no True/False while the solve is compiled. Use "
        "`jnp.where(cond, a, b)` (or `jax.lax.cond(cond, f, g, …)`) instead of the `if`, "
        "`jnp.minimum`/`jnp.maximum` instead of `min`/`max`.",
    ),
    (
        "TracerIntegerConversionError",
        "it uses a traced value as a Python integer (`int(…)`, `range(…)`, an index of a "
        "list). Keep integer quantities static (Python numbers, shapes), or index arrays "
        "with `jnp.take`/`x[i]` on JAX arrays.",
    ),
    (
        "ConcretizationTypeError",
        "it needs the concrete value of a traced array (`float(…)`, `int(…)`, `.item()`, a "
        "Python `if`, or a shape that depends on values). Use `jnp.where`/`jax.lax.cond` "
        "for branches, `x.astype(…)` for conversions, and shapes that do not depend on "
        "the values.",
    ),
)


def tracer_advice(exc: BaseException) -> str | None:
    """What to change in a user's function that raised `exc` while JAX traced it (a
    `jax.errors.Tracer…Error`/`ConcretizationTypeError`); None for any other error."""
    import jax

    for cls_name, advice in _TRACER_ADVICE:
        if isinstance(exc, getattr(jax.errors, cls_name)):
            return advice
    return None


def _first_line(exc: BaseException, limit: int = 200) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def evaluate_abstractly(name: str, fn, *args, call: str):
    """The shapes and dtypes of `fn(*args)`, traced as the solve will trace it but computing
    nothing (`jax.eval_shape`; array outputs come back as `jax.ShapeDtypeStruct`, anything
    else as it is; array and `ShapeDtypeStruct` leaves of `args` are traced, the rest
    static): a user's model, loss, observables or stop condition checked on a first
    evaluation, before any compilation or allocation.

    An error inside is a `ConfigError` naming the argument `name` and the evaluation
    `call` (e.g. "observables(problem, θ(0), t = 0.0)"), chained to the original: for
    JAX's tracer errors (`np.` on traced values, a Python `if` on them) with what to write
    instead (`tracer_advice`); a `ConfigError` raised inside passes as it is.
    """
    import equinox as eqx
    import jax

    def abstract(v) -> bool:
        return eqx.is_array(v) or isinstance(v, jax.ShapeDtypeStruct)

    dynamic, static = eqx.partition(args, abstract)
    kept = {}

    def run(dyn):
        out = fn(*eqx.combine(dyn, static))
        # non-array outputs (a string, a list of numbers) come back as they are, to be
        # named by the caller's check rather than refused by JAX as "not a valid JAX type"
        arrays, kept["static"] = eqx.partition(out, eqx.is_array)
        return arrays

    try:
        shapes = jax.eval_shape(run, dynamic)
    except ConfigError:
        raise
    except Exception as exc:
        advice = tracer_advice(exc)
        if advice is not None:
            raise ConfigError(
                f"`{name}` cannot be traced by JAX on its first evaluation, {call}: {advice} "
                f"(JAX: {type(exc).__name__}: {_first_line(exc)})"
            ) from exc
        raise ConfigError(
            f"`{name}` raised {type(exc).__name__} on its first evaluation, {call}: "
            f"{_first_line(exc)}"
        ) from exc
    return eqx.combine(shapes, kept["static"])


def check_bytes(what: str, need: int, have: int | None, *, hint: str) -> None:
    """Refuse (`ConfigError`) an allocation of `need` bytes where only `have` exist (None:
    unknown, nothing refused), before it is attempted."""
    if have is not None and need > have:
        raise ConfigError(
            f"{what} needs {need / 2**30:.3g} GiB but the device has {have / 2**30:.3g} GiB; {hint}"
        )
