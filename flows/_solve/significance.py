"""Which numbers a run can resolve: the error a reported loss cannot go below.

An adaptive solver controls each component of the state to `atol + rtol·|θ_j|` per step;
it never tries to know θ better than that, so no number computed from θ can be known
better than that spread carried through it. `loss_floor` carries it through the loss:

    floor = Σ_j |∂L/∂θ_j| · s_j  +  max over probes |L(θ + ε⊙s) − L(θ) − ∇L·(ε⊙s)|
            + 4·eps·|L|,        s_j = atol + rtol·|θ_j|,  ε a fixed ±1 probe,

the first-order worst case, the curvature a first-order bound misses (at a minimiser,
where ∇L = 0), and float64 round-off of L itself. A loss whose value lies below its floor
has no significant digit: it is *unresolved*. Where the run also has a global-error
estimate (a companion solve), the floor is at least that estimate.

This is what caught `flows simulate multistage --alpha -5 …`: initial weights of size
m⁵ make the output a sum of huge, nearly cancelling terms, and a loss of 22 was printed
where the true value is 0.49 — its floor here is ≈ 370.

The observables a run saves get floors the same way (`observable_resolutions`): each
scalar observable, and each component of a vector observable of at most
`MAX_COMPONENTS` entries, carried through to first order with its own gradient, plus the
probes' remainder and round-off. An observable that is not a differentiable function of
θ alone — it is computed from t, it is integer-valued, or it is not a function of θ at
the save (a running integral such as `energy`) — gets no floor: its record says why and
is neither resolved nor unresolved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Var

__all__ = [
    "format_resolved",
    "FLOAT64_EPS",
    "MAX_COMPONENTS",
    "describe_unresolved",
    "loss_floor",
    "loss_floors",
    "no_floor",
    "observable_resolutions",
    "raise_floors",
    "resolution",
    "unresolved",
]

FLOAT64_EPS = float(np.finfo(np.float64).eps)

#: Fixed ±1 probes of the curvature term (reproducible: no randomness at run time).
_PROBE_KEYS = (0, 1)


def _leaves(tree):
    return jax.tree_util.tree_leaves(tree)


def _scale(theta, rtol, atol) -> list:
    """What the solver controls each component of θ to: `atol + rtol·|θ_j|`, per leaf."""
    return [atol + rtol * jnp.abs(p) for p in _leaves(theta)]


def _probe(theta, scale: list, key: int) -> tuple:
    """(θ + ε⊙s, ε⊙s) for the fixed ±1 probe ε of PRNG key `key` (one draw per leaf)."""
    treedef = jax.tree_util.tree_structure(theta)
    keys = jax.random.split(jax.random.PRNGKey(key), treedef.num_leaves)
    step = [
        jax.random.rademacher(k, jnp.shape(s), dtype=jnp.result_type(s)) * s
        for k, s in zip(keys, scale, strict=True)
    ]
    moved = [p + d for p, d in zip(_leaves(theta), step, strict=True)]
    unflatten = jax.tree_util.tree_unflatten
    return unflatten(treedef, moved), unflatten(treedef, step)


def _floor_terms(problem, theta, rtol, atol):
    """(L, first-order term, curvature term) at tolerances (rtol, atol): traced once per
    structure and shapes (`loss_floors`)."""
    loss0, grad = problem.loss_and_grad(theta)
    scale = _scale(theta, rtol, atol)
    first = sum(jnp.sum(jnp.abs(g) * s) for g, s in zip(_leaves(grad), scale, strict=True))
    second = jnp.zeros((), dtype=jnp.result_type(loss0))
    for k in _PROBE_KEYS:
        moved, step = _probe(theta, scale, k)
        linear = sum(jnp.vdot(g, d) for g, d in zip(_leaves(grad), _leaves(step), strict=True))
        second = jnp.maximum(second, jnp.abs(problem.loss(moved) - loss0 - linear))
    return loss0, first, second


def _both_floors(problem, theta, rtol, atol):
    eps = jnp.finfo(problem.dtype).eps
    loss0, f_tol, s_tol = _floor_terms(problem, theta, rtol, atol)
    _, f_ro, s_ro = _floor_terms(problem, theta, 4 * eps, jnp.zeros_like(atol))
    return loss0, f_tol + s_tol, f_ro + s_ro


#: `_both_floors` compiled once per problem structure, shapes and static fields
_floors_program = eqx.filter_jit(_both_floors)


def loss_floors(problem, theta, rtol: float, atol: float) -> tuple[float, float]:
    """(tolerance floor, round-off floor) of L(θ): the error L(θ) cannot be resolved below
    when θ is known to `atol + rtol·|θ|` per component (module docstring), and the same
    with θ known to float64 round-off only (`4·eps·|θ|`) — the level below which no solve,
    however tight, can resolve L. Both add 4·eps·|L|. One compiled program per structure
    and shapes (two gradients and four losses); NaN when L or ∇L at θ is not finite."""
    dt = problem.dtype
    tols = (jnp.asarray(rtol, dt), jnp.asarray(atol, dt))
    try:
        loss0, tol, ro = _floors_program(problem, theta, *tols)
    except Exception:  # a model JAX cannot trace as a whole: op by op, as it runs
        loss0, tol, ro = _both_floors(problem, theta, *tols)
    loss0, tol, ro = float(loss0), float(tol), float(ro)
    eps = float(np.finfo(np.dtype(dt)).eps)
    if not (math.isfinite(loss0) and math.isfinite(tol) and math.isfinite(ro)):
        return float("nan"), float("nan")
    return tol + 4 * eps * abs(loss0), ro + 4 * eps * abs(loss0)


def loss_floor(problem, theta, rtol: float, atol: float) -> float:
    """The tolerance floor of `loss_floors`: the error L(θ) cannot be resolved below when
    θ is known to `atol + rtol·|θ|` per component."""
    return loss_floors(problem, theta, rtol, atol)[0]


def resolution(
    value: float,
    floor: float,
    *,
    quantity: str = "loss",
    t: float | None = None,
    roundoff_floor: float | None = None,
):
    """The record of one number against its floor: `quantity`, `value`, `floor`, `t`,
    `roundoff_floor` (the part no tolerance can lower; None when not measured) and
    `resolved` — False when |value| ≤ floor (no significant digit) or the floor is not
    known (non-finite); True when |value| > floor, or when the floor is 0: the number does
    not move within the tolerance at all (a count that no probe changes), so it is exact."""
    known = math.isfinite(floor) and math.isfinite(value)
    resolved = bool(known and (abs(value) > floor or floor == 0))
    return {
        "quantity": quantity,
        "value": value,
        "floor": floor,
        "t": t,
        "roundoff_floor": roundoff_floor,
        "resolved": resolved,
    }


def no_floor(value: float, reason: str, *, quantity: str, t: float | None = None) -> dict:
    """The record of a number that has no floor (`resolution`'s fields, `floor` NaN and
    `resolved` None: neither resolved nor unresolved) and `reason`, why it has none."""
    rec = resolution(value, math.nan, quantity=quantity, t=t)
    return rec | {"resolved": None, "reason": reason}


def unresolved(records) -> list[dict]:
    """The records among `records` (an iterable of `resolution` records, None skipped)
    whose number has no significant digit (`resolved` False; a record without a floor is
    not among them)."""
    return [dict(r) for r in records if r is not None and r["resolved"] is False]


#: Vector observables of at most this many components get a floor per component; larger
#: ones none (each component costs one reverse pass through the observables function).
MAX_COMPONENTS = 16

#: Why an observable gets no floor (`observable_resolutions`).
NO_FLOOR_INTEGER = "integer-valued (a count or a flag): no tolerance error is carried into it"
NO_FLOOR_NOT_FINITE = "its value at the last save is not a finite number"
NO_FLOOR_TIME = (
    "it is computed from t as well as θ, so it is not a function of θ alone: the tolerance "
    "on θ does not bound it"
)
NO_FLOOR_DERIVATIVE = "its derivative in θ is not finite at the last save"
NO_FLOOR_ERROR_MEASURE = (
    "an error measure (its exact value along the flow is 0, e.g. the drift of a conserved "
    "quantity): a value below its floor is what an accurate run gives"
)
NO_FLOOR_NOT_RETURNED = (
    "recorded by the solve, not returned by the observables function: not a function of θ "
    "at the save"
)


def _component_key(name: str, index: tuple[int, ...]) -> str:
    """How one component of an observable is named in the records: `b[2]`, `M[0,1]`; a
    scalar keeps its name."""
    return f"{name}[{','.join(str(i) for i in index)}]" if index else name


def _components(name: str, arr: np.ndarray):
    """(key, index, value) of every component of `arr` (one for a scalar)."""
    for index in np.ndindex(arr.shape):
        yield _component_key(name, index), index, float(arr[index])


def _moves_with_t(observables, problem, theta, t, names) -> list[bool]:
    """Which of the observables `names` the function computes from t, read from its
    traced program: an output reached from t through any operation. An operation that
    calls a program of its own counts as a whole, so an output that only shares such a
    call with t may be counted too — never one that uses t left out."""
    closed = jax.make_jaxpr(lambda tt: [observables(problem, theta, tt)[n] for n in names])(t)
    reached = set(closed.jaxpr.invars)
    for eqn in closed.jaxpr.eqns:
        if any(isinstance(v, Var) and v in reached for v in eqn.invars):
            reached.update(eqn.outvars)
    return [isinstance(v, Var) and v in reached for v in closed.jaxpr.outvars]


def _observable_terms(observables, shapes, problem, theta, t, rtol, atol):
    """For the components of the observables in `shapes` ((name, shape) pairs) at (θ, t),
    flattened in order: their values; per scale s (rows: atol + rtol·|θ|, then round-off
    4·eps·|θ|) the first-order term Σ_j |∂o/∂θ_j|·s_j; the two ±1 probes' remainder
    |o(θ+ε⊙s) − o(θ) − ∂o·(ε⊙s)| and plain difference |o(θ+ε⊙s) − o(θ)| (maxima over the
    probes, at the tolerance scale); whether each is computed from t
    (`_moves_with_t`); and whether the function returns it at all. Each observable that
    is returned and not computed from t is differentiated on its own, so its reverse pass
    runs through what it depends on only. Traced once per observables function, names,
    structure and shapes (`observable_resolutions`)."""
    dt = problem.dtype
    returns = set(jax.eval_shape(lambda th: observables(problem, th, t), theta))
    known = [n for n, _ in shapes if n in returns]
    moves = dict(zip(known, _moves_with_t(observables, problem, theta, t, known), strict=True))

    def flat(th):
        out = observables(problem, th, t)
        parts = [
            jnp.ravel(jnp.asarray(out[n], dtype=dt))
            if n in returns
            else jnp.full(math.prod(shape), jnp.nan, dtype=dt)
            for n, shape in shapes
        ]
        return jnp.concatenate(parts)

    scales = (_scale(theta, rtol, atol), _scale(theta, 4 * jnp.finfo(dt).eps, 0.0))
    probes = [_probe(theta, scales[0], k) for k in _PROBE_KEYS]
    value = flat(theta)
    first, linear = [], []
    for name, shape in shapes:
        size = math.prod(shape)
        if name not in returns or moves[name]:  # no floor: nothing to differentiate
            first.append(jnp.zeros((2, size), dt))
            linear.append(jnp.zeros((len(probes), size), dt))
            continue

        def one(th, name=name):
            return jnp.ravel(jnp.asarray(observables(problem, th, t)[name], dtype=dt))

        jac = _leaves(jax.jacrev(one)(theta))  # per leaf: (size, *leaf's shape)

        def contract(weights, absolute: bool, jac=jac, size=size):
            rows = [jnp.abs(j) if absolute else j for j in jac]
            return sum(
                jnp.sum(r.reshape(size, -1) * jnp.ravel(w), axis=1)
                for r, w in zip(rows, weights, strict=True)
            )

        first.append(jnp.stack([contract(s, True) for s in scales]))
        linear.append(jnp.stack([contract(_leaves(step), False) for _, step in probes]))
    first, linear = jnp.concatenate(first, axis=1), jnp.concatenate(linear, axis=1)
    shifts = jnp.stack([flat(moved) - value for moved, _ in probes])
    remainder = jnp.max(jnp.abs(shifts - linear), axis=0)
    difference = jnp.max(jnp.abs(shifts), axis=0)

    def per_component(flag):
        return np.concatenate([np.full(math.prod(shape), flag(n)) for n, shape in shapes])

    timed = per_component(lambda n: n in returns and moves[n])
    returned = per_component(lambda n: n in returns)
    return value, first, remainder, difference, timed, returned


#: `_observable_terms` compiled once per observables function, names, problem structure
#: and shapes; the tolerances and t are run-time values
_observables_program = eqx.filter_jit(_observable_terms)


def observable_resolutions(
    problem,
    observables,
    theta,
    t: float,
    rtol: float,
    atol: float,
    *,
    values=None,
    skip=(),
) -> dict[str, dict]:
    """The floors of the observables a run saves, at one save (θ, t): what each number
    cannot be known below when θ is known to `atol + rtol·|θ_j|` per component — the
    loss's floor (`loss_floors`) carried through the observable instead: its own gradient
    against that spread (first order, worst case over signs), the two fixed ±1 probes'
    remainder, and 4·eps·|o| round-off; `roundoff_floor` is the first-order term with θ
    known to 4·eps·|θ| only, plus 4·eps·|o|. Like the loss's, the floor sees what θ's
    spread does to the number, not round-off inside the observable's own constants (a
    direction computed from the data that is 1 ± eps where it should be 1).

    **Arguments:** `observables`, the run's function (problem, θ, t) → {name: array}; an
    attribute `error_measures` on it (a set of names) marks observables whose exact value
    is 0 — the drift of a conserved quantity — which are measured against their floor
    but never flagged; `values`, its values at (θ, t) as the run saved them (None:
    evaluated here); names in `skip` are left out.

    **Returns:** name → record (`resolution`'s fields), one per scalar observable and per
    component of a vector observable of at most `MAX_COMPONENTS` entries (named `b[2]`).
    A record that is not judged (`resolved` None) says why in `reason`: an error measure
    (its floor kept); or no floor (`no_floor`, `floor` NaN): integer-valued, a vector of
    more components (one record for all), not finite, computed from t, a
    derivative in θ that is not finite where the probes' plain difference
    |o(θ+ε⊙s) − o(θ)| is not finite either (where it is, it is the floor), or a function
    that could not be differentiated (the error named). One compiled program per
    observables function and shapes: the tolerances and t are run-time values.
    """
    dt = problem.dtype
    t_arr = jnp.asarray(t, dt)
    if values is None:
        values = observables(problem, theta, t_arr)
    arrays = {k: np.asarray(v) for k, v in values.items() if k not in skip}
    t = float(t)
    records: dict[str, dict] = {}
    chosen = []
    for name, arr in arrays.items():
        if arr.dtype.kind in "biu":
            for key, _, v in _components(name, arr):
                records[key] = no_floor(v, NO_FLOOR_INTEGER, quantity=key, t=t)
        elif arr.size > MAX_COMPONENTS:
            why = (
                f"a vector of {arr.size} components: floors are measured for observables of "
                f"at most {MAX_COMPONENTS}"
            )
            records[name] = no_floor(math.nan, why, quantity=name, t=t)
        else:
            chosen.append(name)
    if not chosen:
        return records
    shapes = tuple((name, arrays[name].shape) for name in chosen)
    args = (shapes, problem, theta, t_arr, jnp.asarray(rtol, dt), jnp.asarray(atol, dt))
    try:
        try:
            terms = _observables_program(observables, *args)
        except Exception:  # a function JAX cannot trace as a whole: op by op, as it runs
            terms = _observable_terms(observables, *args)
    except Exception as e:  # noqa: BLE001 - the run stands; its observables get no floor
        why = f"it could not be differentiated in θ ({type(e).__name__}: {str(e)[:200]})"
        for name in chosen:
            for key, _, v in _components(name, arrays[name]):
                records[key] = no_floor(v, why, quantity=key, t=t)
        return records
    _, first, remainder, difference, moves, returned = (np.asarray(x) for x in terms)
    eps = float(np.finfo(np.dtype(dt)).eps)
    measures = frozenset(getattr(observables, "error_measures", ()))
    i = 0
    for name in chosen:
        for key, _, v in _components(name, arrays[name]):
            floors = []
            probed = (remainder[i], difference[i])
            for row, (rem, dif) in enumerate((probed, (0.0, 0.0))):  # tolerance, round-off
                f = float(first[row, i] + rem)
                f = f if math.isfinite(f) else float(dif)
                floors.append(f + 4 * eps * abs(v))
            if not returned[i]:
                records[key] = no_floor(v, NO_FLOOR_NOT_RETURNED, quantity=key, t=t)
            elif not math.isfinite(v):
                records[key] = no_floor(v, NO_FLOOR_NOT_FINITE, quantity=key, t=t)
            elif moves[i]:
                records[key] = no_floor(v, NO_FLOOR_TIME, quantity=key, t=t)
            elif not math.isfinite(floors[0]):
                records[key] = no_floor(v, NO_FLOOR_DERIVATIVE, quantity=key, t=t)
            else:
                rec = resolution(v, floors[0], quantity=key, t=t, roundoff_floor=floors[1])
                if name in measures:
                    rec |= {"resolved": None, "reason": NO_FLOOR_ERROR_MEASURE}
                records[key] = rec
            i += 1
    return records


def raise_floors(records: Mapping[str, Mapping], estimates: Mapping) -> dict[str, dict]:
    """`records` (`observable_resolutions`) with every floor at least the observable's
    global-error estimate at the last save (`estimates`: name → array over the save
    times, `flows.GlobalError.observables`), re-judged. Records without a floor keep none;
    an error measure's floor is raised but it stays unjudged."""
    out = {k: dict(v) for k, v in records.items()}
    for name, est in estimates.items():
        last = np.asarray(est, dtype=np.float64)
        if not last.size:
            continue
        for key, _, e in _components(name, last[-1]):
            rec = out.get(key)
            if rec is None or not math.isfinite(rec["floor"]) or not math.isfinite(e):
                continue
            raised = resolution(
                rec["value"],
                max(float(rec["floor"]), e),
                quantity=rec["quantity"],
                t=rec["t"],
                roundoff_floor=rec.get("roundoff_floor"),
            )
            if "reason" in rec:  # an error measure
                raised |= {"resolved": None, "reason": rec["reason"]}
            out[key] = raised
    return out


def format_resolved(value: float, floor: float) -> str:
    """`value ± floor` with as many significant digits as the floor leaves it (at least
    one, at most 15): `0.4901872920 ± 1.8e-09`, not `0.490187` (whose rounding alone is
    larger than its error) nor `22.2907` for a number known to ± 370."""
    if not (math.isfinite(value) and math.isfinite(floor)) or floor <= 0 or value == 0:
        return f"{value:.6g} ± {floor:.2g}"
    digits = math.floor(math.log10(abs(value) / floor)) + 1
    return f"{value:.{min(max(digits, 1), 15)}g} ± {floor:.2g}"


def describe_unresolved(res) -> str:
    """One sentence for an unresolved number (the loss or an observable): which, its
    value, its floor, what to try."""
    loss = res["quantity"] == "loss"
    noun = "loss" if loss else "observable"
    at = f" at t = {res['t']:g}" if res.get("t") is not None else ""
    name = "" if loss else f" {res['quantity']}"
    what = f"the {noun}{name}{at} is {res['value']:.6g}"
    if not math.isfinite(res["floor"]):
        return (
            f"unresolved: {what}, and the error it can be known to is not finite (the {noun} "
            "or its gradient overflows there). Try a smaller initialisation scale or a "
            "rescaled problem."
        )
    ro = res.get("roundoff_floor")
    if ro is not None and math.isfinite(ro) and abs(res["value"]) <= ro:
        return (
            f"unresolved: {what}, below its float64 round-off {ro:.3g} (the {noun} is a "
            "difference of terms too large for float64 to resolve it at any tolerance), so "
            "it has no significant digit. Rescale the problem: a smaller initialisation "
            "scale (a larger --alpha) or normalised data."
        )
    return (
        f"unresolved: {what}, below the error it can be known to, {res['floor']:.3g} (the "
        f"solver's tolerance carried through the {noun}, float64 round-off, and the "
        "global-error estimate where there is one), so it has no significant digit. Try a "
        "tighter --rtol/--atol, a smaller initialisation scale (a larger --alpha), or a "
        "rescaled problem."
    )
