"""Sliding on kinks (Filippov's equivalent control), the vector field under a pattern, and
the margins whose sign change is an event."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ._net import BOX_TOL, DAMPING, NEWTON_RESIDUAL, SLAVED_RATIO, SLIDING_RETURN, Net
from ._pattern import (
    Pattern,
    affine,
    box,
    layer_scales,
    loss_pat,
    preacts,
    sliding_mask,
    zdot_z,
)


def damped_solve(J: jax.Array, r: jax.Array, on: jax.Array | None = None) -> jax.Array:
    """The damped least-squares solution Jᵀ(JJᵀ + μI)⁻¹r (`DAMPING`; the scale of J taken
    over the rows and columns `on`, the others being identity padding)."""
    Jon = J if on is None else jnp.where(on[:, None] & on[None, :], J, 0.0)
    sc = jnp.maximum(jnp.max(jnp.abs(Jon)), jnp.finfo(J.dtype).tiny)
    mu = (DAMPING * sc) ** 2
    G = J @ J.T + mu * jnp.eye(J.shape[0], dtype=J.dtype)
    return J.T @ jnp.linalg.solve(G, r)


def jac_columns(f, x: jax.Array, on: jax.Array) -> jax.Array:
    """∂f/∂x (f(x) of shape (N,), x (K,)) in the columns `on`, 0 in the others: forward
    mode over the used columns only, one at a time, so padded slots cost nothing
    (`jax.jacfwd` would push a tangent through every one of the K). Chunks of 8 tangents
    at a time (vmapped) were no faster on the digits net with up to 14 pairs sliding
    (47.6 against 48.7 s to t = 40, the same result to the last bit), and cost one sliding
    pair 8 tangents (`with_jacobian` 3.1 against 0.8 ms)."""
    K = x.shape[0]
    order = jnp.argsort(~on, stable=True)  # the used columns first
    out = jax.eval_shape(f, x)

    def column(p, J):
        col = order[p]
        return J.at[..., col].set(jax.jvp(f, (x,), (jax.nn.one_hot(col, K, dtype=x.dtype),))[1])

    return jax.lax.fori_loop(0, jnp.sum(on), column, jnp.zeros((*out.shape, K), out.dtype))


def jac_rows(f, x: jax.Array, on: jax.Array) -> jax.Array:
    """∂f/∂x (f(x) of shape (M,), x (N,)) in the rows `on`, 0 in the others: reverse mode
    over the used rows only, one at a time (`jax.jacrev` pulls back all M)."""
    M = on.shape[0]
    order = jnp.argsort(~on, stable=True)
    _, pull = jax.vjp(f, x)

    def row(p, J):
        r = order[p]
        return J.at[r].set(pull(jax.nn.one_hot(r, M, dtype=x.dtype))[0])

    return jax.lax.fori_loop(0, jnp.sum(on), row, jnp.zeros((M, x.shape[0]), x.dtype))


def sq(tree) -> jax.Array:
    return sum((jnp.sum(v * v) for v in jax.tree_util.tree_leaves(tree)), jnp.zeros(()))


def slaved(net: Net, theta, pat, lam):
    """Pairs that are no switching surface of their own under the pattern `pat` (sliding
    slopes `lam`): their pre-activation depends on θ only through other sliding pairs' z
    (its normal lies in the span of theirs; zero included), so while those slide it stays
    where it is. This is what a sample dead in one layer does to the next: with every
    input of a unit zero (units on a zero piece, or ReLU units held on their kink), z = c
    with a normal that is zero or a combination of the held units' normals. Such pairs
    neither cross nor slide until the pattern upstream changes (an event, where this is
    recomputed); they would otherwise make the sliding systems singular, and their z, ≈ c
    up to integration error, would trigger events without end. Returns ((P,) non-sliding
    pairs held, (M,) sliding slots held by sliding pairs of earlier layers). Sliding
    normals: Gram–Schmidt in layer order (a slot whose normal the earlier ones span, to
    `SLAVED_RATIO`, is held); the other pairs: the directional derivative of z along a
    fixed random direction projected onto the independent sliding pairs' tangent space
    vanishes against that along the direction itself (exactly zero for a zero normal:
    structural zeros propagate)."""
    M = net.M
    on, idx = pat.on, pat.idx
    A, S = affine(net, pat, lam)
    flat, unravel = ravel_pytree(theta)
    with jax.ensure_compile_time_eval():  # a constant of the program, not drawn per call
        v = jax.random.normal(jax.random.PRNGKey(20261201), flat.shape, net.dtype)

    def z_of(vf):
        return preacts(net, unravel(vf), A, S)

    dz = jax.jvp(z_of, (flat,), (v,))[1]

    def with_sliding(_):
        i = jnp.where(on, idx, 0)
        Jz = jac_rows(lambda vf: z_of(vf)[i], flat, on)
        order = jnp.argsort(jnp.where(on, net.layer_of[i], net.n_layers))  # upstream first

        def gs(k, c):
            Q, dep = c
            j = order[k]
            n = Jz[j]
            r = n - Q.T @ (Q @ n)
            r = r - Q.T @ (Q @ r)
            nr = jnp.sqrt(jnp.sum(r * r))
            indep = on[j] & (nr > SLAVED_RATIO * jnp.sqrt(jnp.sum(n * n)))
            Q = Q.at[j].set(jnp.where(indep, r / jnp.maximum(nr, net.tiny), 0.0))
            return Q, dep.at[j].set(on[j] & ~indep)

        # the used slots come first in `order`: the unused ones would change nothing
        Q, dep = jax.lax.fori_loop(0, jnp.sum(on), gs, (jnp.zeros_like(Jz), jnp.zeros((M,), bool)))
        return jax.jvp(z_of, (flat,), (v - Q.T @ (Q @ v),))[1], dep

    dz_t, dep = jax.lax.cond(jnp.any(on), with_sliding, lambda _: (dz, jnp.zeros((M,), bool)), None)
    sliding = sliding_mask(net, on, idx)
    return (~sliding) & (jnp.abs(dz_t) <= SLAVED_RATIO * jnp.abs(dz)), dep


def zdot_sliding(net: Net, theta, pat, lam):
    """ż + κ(z − c) of the sliding pairs (0 in empty slots) with their slopes set to λ:
    the equivalent control makes it 0, so a pair that drifted off its kink by integration
    error returns at rate κ (`pat.kappa`, SLIDING_RETURN per unit of the clock) instead of
    drifting further."""
    return _zdot_sliding_scaled(net, theta, pat, lam)[0]


def _zdot_sliding_scaled(net: Net, theta, pat, lam):
    """(`zdot_sliding`, whether it is below `NEWTON_RESIDUAL` × the largest |ż|)."""
    _, _, idx, kink, on = pat[:5]
    A, S = affine(net, pat, lam)
    zd, _, z = zdot_z(net, theta, A, S)
    i = jnp.where(on, idx, 0)
    r = jnp.where(on, zd[i] + pat.kappa * (z[i] - net.c[kink]), 0.0)
    return r, jnp.max(jnp.abs(r)) <= NEWTON_RESIDUAL * jnp.max(jnp.abs(zd))


def sliding_jacobian(net: Net, theta, pat, warm):
    """(λ₀, J): the equivalent control at θ by Newton's method with a fresh Jacobian (at
    most three steps, fewer where ż is at rounding first, `NEWTON_RESIDUAL`; from `warm`
    where finite — the previous step's λ, or the decision's: ż can have
    several roots in deep nets, and the flow follows one — else from the middle of the
    boxes), and ∂ż/∂λ there (identity in empty slots). Refreshed at every event and
    accepted step, then held fixed within a step: the field's λ is two Newton steps from
    λ₀ with J (smooth in θ, two gradients per evaluation instead of M)."""
    M = net.M
    on = pat.on
    eye = jnp.eye(M, dtype=net.dtype)

    def jac_at(lam):
        J = jac_columns(lambda lm: zdot_sliding(net, theta, pat, lm), lam, on)
        return jnp.where(on[:, None] & on[None, :], J, eye)

    def newton(c):
        # ż and the Jacobian at λ, then a step unless ż is at rounding or three were
        # taken: J is the Jacobian at the λ returned
        k, lam, _, _ = c
        r, small = _zdot_sliding_scaled(net, theta, pat, lam)
        J = jac_at(lam)
        done = small | (k == 3)
        return k + 1, jnp.where(done, lam, lam - damped_solve(J, r, on)), J, done

    def solve(_):
        lam = jnp.where(jnp.isfinite(warm), warm, lam_mid(net, pat))
        # a loop, not unrolled: its body (a Jacobian and ż) is compiled once
        _, lam, J, _ = jax.lax.while_loop(
            lambda c: ~c[3], newton, (jnp.int32(0), lam, eye, jnp.bool_(False))
        )
        return jnp.where(on, lam, 0.0), J

    return jax.lax.cond(jnp.any(on), solve, lambda _: (jnp.zeros((M,), net.dtype), eye), None)


def project(net: Net, theta, pat):
    """θ moved onto the sliding pairs' kinks (z_S = c) by one Gauss–Newton step of least
    norm, Δθ = −J_zᵀ(J_z J_zᵀ)⁻¹(z_S − c): integration error would otherwise let them drift
    off (by ~100·rtol per unit of the clock). Exact where z is linear in θ (first layer); a
    no-op when nothing slides."""
    on, idx, kink = pat.on, pat.idx, pat.kink
    flat, unravel = ravel_pytree(theta)

    def z_s(v):
        A, S = affine(net, pat, pat.lam0)
        z = preacts(net, unravel(v), A, S)
        return jnp.where(on, z[jnp.where(on, idx, 0)] - net.c[kink], 0.0)

    def proj(_):
        r = z_s(flat)
        Jz = jac_rows(z_s, flat, on)  # (M, n_params), 0 in the unused slots
        # damped least squares: dependent (redundant) kink normals are allowed
        return unravel(flat - damped_solve(Jz, r))

    return jax.lax.cond(jnp.any(on), proj, lambda _: theta, None)


def with_jacobian(net: Net, theta, pat, y, warm):
    """The pattern with the sliding pairs' λ₀, Jacobian and return rate at state y (Newton
    for λ₀ from `warm` where finite)."""
    M, dtype = net.M, net.dtype
    # `pat` may be the first five fields alone (piece, off, idx, kink, on): the decision's
    # new pattern; the clock's rate reads only those
    piece, off, idx, kink, on = pat[:5]
    eye, zeros = jnp.eye(M, dtype=dtype), jnp.zeros((M,), dtype)
    pat = Pattern(piece, off, idx, kink, on, eye, zeros, jnp.zeros((), dtype))
    kappa = SLIDING_RETURN / jnp.maximum(rate(net, y, theta, pat), net.tiny)
    pat = pat._replace(kappa=kappa)
    lam0, J = sliding_jacobian(net, theta, pat, warm)
    return pat._replace(J=J, lam0=lam0, kappa=kappa)


def equivalent_control(net: Net, theta, pat):
    """λ (M,) with ż = 0 at the sliding pairs: two Newton steps on ż(λ) from the step's λ₀
    with its Jacobian (exact in one where ż is affine in λ, as for one hidden layer;
    quadratically close otherwise, λ moving little within a step)."""
    # a loop, not unrolled: ż is compiled once per copy of the field, not twice
    lam = jax.lax.fori_loop(
        0,
        2,
        lambda _, lam: lam - damped_solve(pat.J, zdot_sliding(net, theta, pat, lam), pat.on),
        pat.lam0,
    )
    return jnp.where(pat.on, lam, 0.0)


def lam_mid(net: Net, pat):
    kink, on = pat.kink, pat.on
    lo, hi = box(net, kink)
    return jnp.where(on, 0.5 * (lo + hi), 0.0)


def sliding_lam(net: Net, theta, pat):
    """λ of the sliding pairs (`equivalent_control`), zeros when none slides."""
    return jax.lax.cond(
        jnp.any(pat.on),
        lambda _: equivalent_control(net, theta, pat),
        lambda _: jnp.zeros((net.M,), net.dtype),
        None,
    )


def field_parts(net: Net, theta, pat):
    """(∇L under the pattern, λ of the sliding pairs)."""
    # one gradient after the cond, not one in each branch: the field is inlined at every
    # stage of the step, and each copy is compiled
    lam = sliding_lam(net, theta, pat)
    A, S = affine(net, pat, lam)
    return jax.grad(functools.partial(loss_pat, net))(theta, A, S), lam


def rate(net: Net, y, theta, pat):
    """dt/ds of the clock."""
    clock = net.settings.clock
    if clock == "physical":
        return jnp.ones((), net.dtype)
    if clock == "log":
        return 1.0 + y[2]
    A, S = affine(net, pat, lam_mid(net, pat))  # the loss does not depend on λ (z = c there)
    return 1.0 / loss_pat(net, theta, A, S)


def vector_field(net: Net, s, y, pat):
    """(θ, energy, t)' on the solver's clock s under the pattern."""
    theta = y[0]
    g, _ = field_parts(net, theta, pat)
    r = rate(net, y, theta, pat)
    return (
        jax.tree_util.tree_map(lambda v: -r * v, g),
        r * sq(g),
        r,
    )


def margins(net: Net, theta, pat):
    """(φ, z, per-pair margins, sliding λ-margins): φ > 0 while nothing switches."""
    phi, z, m, lam, _ = margin_vector(net, theta, pat)
    return phi, z, m, lam


def margin_vector(net: Net, theta, pat):
    """`margins` and the vector φ is the minimum of: each pair's margin over its layer's
    scale (inf while sliding), then each sliding slot's λ-margin (inf where unused). Each
    entry is smooth along a step, φ (their minimum) is not: the event finder interpolates
    the entries (`_loop.root_vector`)."""
    piece, off, idx, kink, on = pat[:5]
    lam = sliding_lam(net, theta, pat)
    A, S = affine(net, pat, lam)
    z = preacts(net, theta, A, S)
    m = jnp.minimum(z - net.lo[piece], net.hi[piece] - z) + off
    sliding = sliding_mask(net, on, idx)
    m = jnp.where(sliding, jnp.inf, m)
    lo, hi = box(net, kink)
    # a sliding pair leaves when λ passes an end of its box by more than the decision's
    # tolerance (BOX_TOL): λ re-solved at the segment start may sit on the end itself
    lm = jnp.where(on, jnp.minimum(lam - lo, hi - lam) / (hi - lo) + BOX_TOL, jnp.inf)
    scaled = m / layer_scales(net, z)[net.layer_of]
    phi = jnp.minimum(jnp.min(scaled), jnp.min(lm, initial=jnp.inf))
    return phi, z, m, lam, jnp.concatenate([scaled, lm])
