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
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "format_resolved",
    "FLOAT64_EPS",
    "describe_unresolved",
    "loss_floor",
    "loss_floors",
    "resolution",
]

FLOAT64_EPS = float(np.finfo(np.float64).eps)

#: Fixed ±1 probes of the curvature term (reproducible: no randomness at run time).
_PROBE_KEYS = (0, 1)


def _leaves(tree):
    return jax.tree_util.tree_leaves(tree)


def _floor_terms(problem, theta, rtol, atol):
    """(L, first-order term, curvature term) at tolerances (rtol, atol): traced once per
    structure and shapes (`loss_floors`)."""
    loss0, grad = problem.loss_and_grad(theta)
    treedef = jax.tree_util.tree_structure(theta)
    scale = [atol + rtol * jnp.abs(p) for p in _leaves(theta)]
    first = sum(jnp.sum(jnp.abs(g) * s) for g, s in zip(_leaves(grad), scale, strict=True))
    second = jnp.zeros((), dtype=jnp.result_type(loss0))
    for k in _PROBE_KEYS:
        keys = jax.random.split(jax.random.PRNGKey(k), treedef.num_leaves)
        step = [
            jax.random.rademacher(key, jnp.shape(s), dtype=jnp.result_type(s)) * s
            for key, s in zip(keys, scale, strict=True)
        ]
        moved = jax.tree_util.tree_unflatten(
            treedef, [p + d for p, d in zip(_leaves(theta), step, strict=True)]
        )
        linear = sum(jnp.vdot(g, d) for g, d in zip(_leaves(grad), step, strict=True))
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
    known (non-finite)."""
    resolved = bool(math.isfinite(floor) and math.isfinite(value) and abs(value) > floor)
    return {
        "quantity": quantity,
        "value": value,
        "floor": floor,
        "t": t,
        "roundoff_floor": roundoff_floor,
        "resolved": resolved,
    }


def format_resolved(value: float, floor: float) -> str:
    """`value ± floor` with as many significant digits as the floor leaves it (at least
    one, at most 15): `0.4901872920 ± 1.8e-09`, not `0.490187` (whose rounding alone is
    larger than its error) nor `22.2907` for a number known to ± 370."""
    if not (math.isfinite(value) and math.isfinite(floor)) or floor <= 0 or value == 0:
        return f"{value:.6g} ± {floor:.2g}"
    digits = math.floor(math.log10(abs(value) / floor)) + 1
    return f"{value:.{min(max(digits, 1), 15)}g} ± {floor:.2g}"


def describe_unresolved(res) -> str:
    """One sentence for an unresolved number: which, its value, its floor, what to try."""
    at = f" at t = {res['t']:g}" if res.get("t") is not None else ""
    what = f"the {res['quantity']}{at} is {res['value']:.6g}"
    if not math.isfinite(res["floor"]):
        return (
            f"unresolved: {what}, and the error it can be known to is not finite (the loss "
            "or its gradient overflows there). Try a smaller initialisation scale or a "
            "rescaled problem."
        )
    ro = res.get("roundoff_floor")
    if ro is not None and math.isfinite(ro) and abs(res["value"]) <= ro:
        return (
            f"unresolved: {what}, below its float64 round-off {ro:.3g} (the loss is a "
            "difference of terms too large for float64 to resolve it at any tolerance), so "
            "it has no significant digit. Rescale the problem: a smaller initialisation "
            "scale (a larger --alpha) or normalised data."
        )
    return (
        f"unresolved: {what}, below the error it can be known to, {res['floor']:.3g} (the "
        "solver's tolerance carried through the loss, float64 round-off, and the "
        "global-error estimate where there is one), so it has no significant digit. Try a "
        "tighter --rtol/--atol, a smaller initialisation scale (a larger --alpha), or a "
        "rescaled problem."
    )
