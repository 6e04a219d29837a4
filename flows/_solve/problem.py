"""A `Problem`: model family + data + loss + θ(0). Everything `simulate` and the baselines need."""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._errors import ConfigError
from .._validate import (
    as_choice,
    as_key,
    as_real_array,
    check_bytes,
    evaluate_abstractly,
    short_repr,
)
from ..models.base import AbstractModel
from ..models.function import FunctionModel
from .data import Dataset
from .losses import TARGET_KINDS, check_labels, check_sign_labels, squared_error
from .trajectory import param_names

VECTOR_FIELDS = ("auto", "autodiff", "fused")

#: `vector_field='auto'` takes the hand-derived fused field for the toolkit's two-layer net
#: with the squared error once autodiff's n×m temporaries reach this many elements (n
#: samples × m neurons: 76 MiB per array in float64), autodiff below. Measured in one compiled
#: loop against the floor Σ tanh(X Wᵀ) (`benchmarks/results/field_floor.md`, n = 1000): at
#: m = 1000 and 5000 autodiff is the faster (2.1× / 3.2× the floor against 3.4× / 4.1×), at
#: 10 000 they tie (3.1× / 3.2×), from m = 20 000 the fused field is the faster (3.7× against
#: 3.8×; at m = 10⁵ 2.7× against 3.8×, 13 MiB of temporaries against 1.5 GiB). Below the
#: threshold the results stay autodiff's, the reference any model and loss get.
AUTO_FUSED_MIN_ELEMENTS = 10**7
DTYPES = {"float64": jnp.float64, "float32": jnp.float32}


class Problem(eqx.Module):
    """The objective L(θ) = loss(model(θ, x), y) and the initial point θ(0).

    A pytree (arrays are leaves), so it can be passed as `args` into jitted solves
    without being baked in as constants.
    """

    model: AbstractModel
    x: Float[Array, "n d"]
    y: Array
    theta0: PyTree
    loss_fn: Callable = eqx.field(static=True)
    data_name: str = eqx.field(static=True)
    #: 'autodiff' (jax.grad) or 'fused' (the model's hand-derived `fused_grad`, and its
    #: blocked `fused_loss`); `make_problem` resolves 'auto' to one of them.
    vector_field: str = eqx.field(static=True, default="autodiff")

    def loss(self, theta: PyTree) -> Float[Array, ""]:
        if self.vector_field == "fused":  # a blocked forward pass (what every save costs)
            return self.model.fused_loss(theta, self.x, self.y)  # type: ignore[attr-defined]
        return self.loss_fn(self.model(theta, self.x), self.y)

    def grad(self, theta: PyTree) -> PyTree:
        if self.vector_field == "fused":
            return self.model.fused_grad(theta, self.x, self.y)  # type: ignore[attr-defined]
        return jax.grad(self.loss)(theta)

    def loss_and_grad(self, theta: PyTree):
        if self.vector_field == "fused":
            return self.model.fused_loss_and_grad(theta, self.x, self.y)  # type: ignore[attr-defined]
        return jax.value_and_grad(self.loss)(theta)

    @property
    def dtype(self):
        return jnp.asarray(self.x).dtype

    @property
    def n_params(self) -> int:
        return int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(self.theta0)))

    def describe(self) -> dict:
        return {
            "model": self.model.describe(),
            "data": self.data_name,
            "n_samples": int(self.x.shape[0]),
            "loss": getattr(self.loss_fn, "description", self.loss_fn.__name__),
            "n_params": self.n_params,
            "vector_field": self.vector_field,
            "dtype": str(self.dtype),
        }


def _dtype_name(dtype) -> str:
    """'float64' / 'float32' from a name or a dtype-like (np.float32, jnp.float64, …)."""
    if not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            pass
    return as_choice("dtype", dtype, tuple(DTYPES), hint="float64 is the default.")


def _available_bytes() -> int | None:
    """Memory of the default device (GPU limit, or the host's RAM on CPU); None if unknown."""
    try:
        stats = jax.devices()[0].memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"])
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError, IndexError):  # pragma: no cover
        return None


def available_bytes() -> int | None:
    """Memory of the default device (GPU limit, or the host's RAM on CPU); None if unknown:
    what a run's allocations are checked against before they are attempted."""
    return _available_bytes()


def _init_params(model: AbstractModel, key, dt) -> PyTree:
    """θ(0) = model.init(key), refusing up front (ConfigError) what cannot fit in memory."""
    shapes = jax.eval_shape(model.init, key)
    need = sum(
        math.prod(leaf.shape) * np.dtype(dt).itemsize for leaf in jax.tree_util.tree_leaves(shapes)
    )
    check_bytes(
        f"θ(0) of {type(model).__name__}",
        need,
        _available_bytes(),
        hint="use a smaller model (e.g. a smaller width).",
    )
    try:
        return model.init(key)
    except Exception as exc:  # XLA's RESOURCE_EXHAUSTED, MemoryError
        if isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc):
            raise ConfigError(
                f"out of memory drawing θ(0) of {type(model).__name__} ({need / 2**30:.3g} GiB);"
                " use a smaller model (e.g. a smaller width)."
            ) from None
        raise


def check_params_like(name: str, value, expected, what: str) -> PyTree:
    """`value` with every leaf a finite real array, of the structure and leaf shapes of
    `expected` (a pytree of arrays or `jax.ShapeDtypeStruct`s, described as `what`), else
    `ConfigError` naming the first mismatch (`name['a']`)."""
    want_paths = jax.tree_util.tree_flatten_with_path(expected)
    try:
        got_paths = jax.tree_util.tree_flatten_with_path(value)
    except Exception:  # pragma: no cover - unflattenable objects
        got_paths = ([], None)
    if got_paths[1] != want_paths[1]:
        raise ConfigError(
            f"`{name}` must have the structure of {what}, "
            f"{jax.tree_util.tree_map(lambda s: s.shape, expected)}; got "
            f"{jax.tree_util.tree_map(lambda v: np.shape(v), value)}."
        )
    leaves = []
    for (path, want), (_, got) in zip(want_paths[0], got_paths[0], strict=True):
        where = f"{name}{jax.tree_util.keystr(path)}"
        arr = as_real_array(where, got, dtype=None)
        if arr.shape != want.shape:
            raise ConfigError(
                f"`{where}` must have shape {want.shape} for this model; got {arr.shape}."
            )
        leaves.append(arr)
    return jax.tree_util.tree_unflatten(want_paths[1], leaves)


def _check_theta0(model: AbstractModel, key, theta0) -> PyTree:
    """`theta0` with every leaf a finite real array, of the structure and shapes `model.init`
    gives (else `ConfigError` naming the first mismatch)."""
    expected = jax.eval_shape(model.init, key)
    return check_params_like("theta0", theta0, expected, f"{type(model).__name__}.init(key)")


def _check_model(model, theta0, x) -> jax.ShapeDtypeStruct:
    """The shape and dtype of `model(theta0, x)`, checked on a first (abstract) evaluation:
    one real floating-point array with one row per sample, shape (n,) or (n, k, …); else
    `ConfigError` naming `model` (with what to change when JAX cannot trace it)."""
    n = x.shape[0]
    call = f"model(theta0, x) with x of shape {tuple(x.shape)}"
    # a function model is checked as the user wrote it (not through the annotations of
    # `FunctionModel.__call__`, which the test suite's type checker enforces)
    fn = model.fn if isinstance(model, FunctionModel) else model
    out = evaluate_abstractly("model", lambda m, th, xx: m(th, xx), fn, theta0, x, call=call)
    expect = f"one array of outputs with one row per sample, shape ({n},) or ({n}, k)"
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise ConfigError(
            f"`model` must return {expect}; {call} returned {type(out).__name__} "
            f"{short_repr(out)}. Return one jnp array (stack several outputs with jnp.stack)."
        )
    if out.ndim == 0 or out.shape[0] != n:
        raise ConfigError(
            f"`model` must return {expect}; {call} returned shape {tuple(out.shape)}. "
            "Evaluate it on every row of x (x has shape (n, d)), e.g. x @ W.T, not W @ x."
        )
    if jnp.issubdtype(out.dtype, jnp.complexfloating):
        raise ConfigError(
            f"`model` must return real floating-point outputs; {call} returned complex "
            f"outputs (dtype {out.dtype}): a gradient flow needs a real objective. Return "
            "their real part or magnitude (jnp.real, jnp.abs)."
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise ConfigError(
            f"`model` must return real floating-point outputs; {call} returned dtype "
            f"{out.dtype}, through which no gradient flows. Compute it in floats (no "
            "rounding, casts to int or comparisons)."
        )
    return out


def _check_loss(loss_fn, out: jax.ShapeDtypeStruct, y) -> None:
    """`loss_fn(model outputs, y)` checked on a first (abstract) evaluation: one real
    floating-point number, the objective L; else `ConfigError` naming `loss_fn`."""
    name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
    call = (
        f"loss_fn(outputs, y) ({name}) with outputs of shape {tuple(out.shape)} and y of "
        f"shape {tuple(y.shape)}"
    )
    val = evaluate_abstractly("loss_fn", loss_fn, out, y, call=call)
    expect = "one real number (the mean over samples, e.g. jnp.mean((pred - y) ** 2) / 2)"
    if not isinstance(val, jax.ShapeDtypeStruct):
        raise ConfigError(
            f"`loss_fn` must return {expect}; {call} returned {type(val).__name__} "
            f"{short_repr(val)}."
        )
    if val.shape != ():
        raise ConfigError(
            f"`loss_fn` must return {expect}; {call} returned an array of shape "
            f"{tuple(val.shape)}. Reduce it over the samples (jnp.mean or jnp.sum)."
        )
    if jnp.issubdtype(val.dtype, jnp.complexfloating):
        raise ConfigError(
            f"`loss_fn` must return {expect}; {call} returned a complex value (dtype "
            f"{val.dtype}): a gradient flow needs a real objective. Use the squared "
            "magnitude, jnp.abs(z) ** 2."
        )
    if not jnp.issubdtype(val.dtype, jnp.floating):
        raise ConfigError(
            f"`loss_fn` must return {expect}; {call} returned dtype {val.dtype}, through "
            "which no gradient flows. Compute it in floats."
        )


def _refuse_broadcast(name: str, out: tuple[int, ...], y: tuple[int, ...], n: int) -> None:
    """A custom loss given model outputs and per-sample targets of shapes that broadcast
    into a larger array — outputs (n, 1) against y (n,) make an n × n array, whose mean is
    a number but not the objective meant — is refused, naming both shapes."""
    if out == y or not y or y[0] != n:
        return
    try:
        both = np.broadcast_shapes(out, y)
    except ValueError:  # not broadcastable: the loss pairs them its own way (labels)
        return
    if math.prod(both) > max(math.prod(out), math.prod(y)):
        raise ConfigError(
            f"the model outputs shape {out} and the targets `y` have shape {y}: inside "
            f"`loss_fn` ({name}) they broadcast to shape {both}, so the loss would compare "
            f"every output with every target (a {' × '.join(map(str, both))} array) instead "
            "of each sample with its own. Reshape one to the other's shape (e.g. "
            "y.reshape(-1, 1), or the model's output[:, 0])."
        )


def _check_targets(model, loss_fn, x, y, out: tuple[int, ...]):
    """The targets as the loss needs them, per its `targets` kind (see `flows._solve.losses`):
    class labels in [0, k) (int), ±1 signs, or real values of the model's output shape
    `out` (what `_check_model` found: the model is not traced again)."""
    kind = getattr(loss_fn, "targets", None)
    name = getattr(loss_fn, "__name__", repr(loss_fn))
    if kind is None:
        _refuse_broadcast(name, tuple(out), tuple(y.shape), x.shape[0])
        return y
    if kind not in TARGET_KINDS:
        raise ConfigError(
            f"loss {name!r} declares targets={kind!r}; expected one of {TARGET_KINDS}."
        )
    out = tuple(out)
    n = x.shape[0]
    if kind == "classes":
        if len(out) != 2:
            raise ConfigError(
                f"the cross-entropy loss {name!r} needs a model with k class outputs, shape "
                f"(n, k); {type(model).__name__} outputs shape {out}. Use a classifier "
                "(e.g. Homogeneous, DeepFCN) or the squared error."
            )
        return check_labels(y, out[-1])
    if kind == "signs":
        if out != (n,):
            raise ConfigError(
                f"the logistic loss needs a model with one output per sample, shape ({n},); "
                f"{type(model).__name__} outputs shape {out}."
            )
        return check_sign_labels(y)
    if tuple(y.shape) != tuple(out):
        raise ConfigError(
            f"the targets `y` have shape {tuple(y.shape)} but {type(model).__name__} outputs "
            f"shape {out}; they must match for loss {name!r} (else they broadcast into a wrong "
            "objective). Reshape y, or build the model with the right number of outputs."
        )
    return y


def two_layer_field(vector_field: str, n: int, m: int) -> str:
    """The field `make_problem(vector_field=...)` takes for the toolkit's two-layer net (m
    neurons) with the squared error on n samples: 'auto' is 'fused' from n·m ≥
    `AUTO_FUSED_MIN_ELEMENTS`, else 'autodiff'; 'autodiff' and 'fused' are themselves."""
    vector_field = as_choice("vector_field", vector_field, VECTOR_FIELDS)
    if vector_field != "auto":
        return vector_field
    return "fused" if n * m >= AUTO_FUSED_MIN_ELEMENTS else "autodiff"


def make_problem(
    model: AbstractModel | Callable,
    data: Dataset,
    key: PRNGKeyArray | int = 0,
    *,
    loss_fn: Callable = squared_error,
    theta0: PyTree | None = None,
    vector_field: str = "auto",
    dtype: str = "float64",
) -> Problem:
    """Build a `Problem`; θ(0) = `model.init(key)` unless `theta0` is given.

    - `model`: a flows model (`flows.models`, or your own `AbstractModel`), or a plain
      function `f(params, x)` of a parameter pytree — then `theta0` is required
      (`flows.models.FunctionModel`).

    - `key`: an integer seed in [0, 2⁶³ − 1] (Python, NumPy or 0-d JAX integer) or a key
      already made by `jax.random.key(seed)` / `jax.random.PRNGKey(seed)`.
    - `theta0`: must have the structure and shapes of `model.init(key)`; for a function
      model any pytree of arrays (a dict, nested dicts, a tuple or list, a bare array).
      Results name each parameter by its path (`W`, `layer1.W`, `0`, `theta`;
      `flows._solve.trajectory.param_names`).
    - `vector_field`: 'auto' (default), 'autodiff' (any model and loss) or 'fused' (a
      hand-derived ∇L evaluated in blocks of samples: two-layer nets with the squared error
      only; tested against autodiff). 'auto' is 'fused' where it exists and the data have
      n·m ≥ `AUTO_FUSED_MIN_ELEMENTS` (10⁷: m ≥ 10 000 at n = 1000), where it is the faster
      and holds no n×m arrays; else 'autodiff'. The problem records the field it took
      (`Problem.vector_field`, and `describe()` in every saved result).
    - `dtype`: 'float64' (default) or 'float32' (or np.float32 / jnp.float64; data and θ(0)
      cast, and `simulate` then integrates in float32; about half the cost per evaluation
      on CPU. `benchmarks/bench_work_precision.py` and `bench_descent_time.py` measure
      what it changes in the error — use it where they say so, with rtol ≥ 1e-6).

    The targets are checked against what the loss declares (its `targets`, see
    `flows._solve.losses`): cross-entropy losses need integer class labels in [0, k) (k = the
    model's number of outputs), the logistic loss labels −1/+1, the squared error targets
    of the model's output shape.

    The model and the loss are checked on a first (abstract: traced, nothing computed)
    evaluation at θ(0): the model must return one real floating-point array with one row per
    sample, the loss one real number.

    Raises `ConfigError` when the data's input dimension does not match the model's, an
    option does not apply to this model and loss, the targets do not suit the loss, the
    key, θ(0) or dtype is malformed, or the model or loss returns the wrong thing, raises,
    or cannot be traced by JAX (`np.` on traced values, a Python `if` on them: the message
    says what to write instead).
    """
    if not isinstance(model, AbstractModel):
        if not callable(model):
            raise ConfigError(
                "`model` must be a flows model (e.g. flows.models.TwoLayer(m=100, d=1, "
                f"alpha=1.0)) or a function f(params, x); got {type(model).__name__}."
            )
        if theta0 is None:
            raise ConfigError(
                "a model given as a function f(params, x) needs `theta0` (its parameters at "
                "t = 0, any pytree of arrays)."
            )
        model = FunctionModel.of(model, theta0)
    if not isinstance(data, Dataset):
        raise ConfigError(
            f"`data` must be a flows Dataset; got {type(data).__name__}. Build one with "
            "`flows.from_arrays(x, y)`."
        )
    if not callable(loss_fn):
        raise ConfigError(
            f"`loss_fn` must be a function (pred, y) -> scalar such as flows.squared_error; "
            f"got {loss_fn!r}."
        )
    d_model = getattr(model, "d", None)
    if d_model is not None and data.d != d_model:
        raise ConfigError(
            f"the data have d = {data.d} input dimensions but the model expects d = {d_model}; "
            f"build the model with d={data.d}."
        )
    vector_field = as_choice("vector_field", vector_field, VECTOR_FIELDS)
    fusable = hasattr(model, "fused_grad") and loss_fn is squared_error
    if vector_field == "auto":
        m = int(getattr(model, "m", 0))
        vector_field = two_layer_field("auto", int(data.x.shape[0]), m) if fusable else "autodiff"
    if vector_field == "fused" and not fusable:
        raise ConfigError(
            "`vector_field='fused'` exists for two-layer nets (`TwoLayer`) with the squared "
            f"error only; got model {type(model).__name__} with loss "
            f"{getattr(loss_fn, '__name__', loss_fn)!r}. Use vector_field='autodiff'."
        )
    dt = DTYPES[_dtype_name(dtype)]
    key = as_key("key", key)
    if theta0 is None:
        theta0 = _init_params(model, key, dt)
    else:
        theta0 = _check_theta0(model, key, theta0)
    theta0 = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=dt), theta0)
    param_names(theta0)  # the names results will carry: refuse two leaves sharing one
    x = jnp.asarray(data.x, dtype=dt)
    out = _check_model(model, theta0, x)
    y = _check_targets(model, loss_fn, data.x, data.y, out.shape)
    # real targets in the problem's dtype, others as they are; the dtype is always named:
    # `jnp.asarray` of a NumPy array without one, or a cast to the same dtype, runs a
    # program of its own (one compile or cache read each, on every command)
    y_dtype = y.dtype if hasattr(y, "dtype") else np.asarray(y).dtype
    y = jnp.asarray(y, dtype=dt if jnp.issubdtype(y_dtype, jnp.floating) else y_dtype)
    _check_loss(loss_fn, out, y)
    return Problem(
        model=model,
        x=x,
        y=y,
        theta0=theta0,
        loss_fn=loss_fn,
        data_name=data.name,
        vector_field=vector_field,
    )
