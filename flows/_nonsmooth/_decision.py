"""The Filippov decision at an event: which pairs at a kink cross, which slide, which
leave sliding — decided for every candidate pair together.

`decide(net, y, pat)` runs, in order:

1. `candidates`: the pairs at a kink (crossed, or within kink_tol of an edge; up to C of
   them) and the sliding ones (M), each with a first side from its crossing or its λ;
2. `active_set`: one pair at a time, the worst violator of its side's condition is moved
   (`fix_one`; its own Filippov condition decides where the first guess disagrees,
   `own_condition`, with a bisection for a sliding root inside the box,
   `bracketed_start`);
3. if that does not settle: the box complementarity problem for all candidates at once by
   semismooth Newton (`complementarity`), then the minimum-norm element of the Clarke
   subdifferential (`min_norm_sides`);
4. `new_pattern`: pieces written, sliding pairs compacted into the M slots, margins offset
   so that nothing re-triggers at once, and the event's counts.

Sides are coded 0 = the left piece (z < c), 1 = the right piece, 2 = sliding.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ._net import BOX_TOL, Net
from ._pattern import affine, box, layer_scales, loss_pat, sliding_mask, zdot_all, zdot_z
from ._sliding import damped_solve, jac_columns, margins, slaved, with_jacobian


@dataclasses.dataclass(frozen=True, eq=False)
class Event:
    """The state at an event and its K = C + M candidates (C pairs at a kink, then the M
    sliding slots): which pair (`idx`), used or not (`on`), the kink (`kink`), its left and
    right slopes (`sl_l`, `sl_r`) and λ box (`blo`, `bhi`)."""

    theta: object
    pat: tuple
    z: jax.Array
    m: jax.Array
    lam: jax.Array
    scale_j: jax.Array
    tol_j: jax.Array
    d_lo: jax.Array
    d_hi: jax.Array
    n_near: jax.Array
    cand: jax.Array
    cand_on: jax.Array
    lo_s: jax.Array
    hi_s: jax.Array
    idx: jax.Array
    on: jax.Array
    kink: jax.Array
    side0: jax.Array
    sl_l: jax.Array
    sl_r: jax.Array
    blo: jax.Array
    bhi: jax.Array

    @property
    def K(self) -> int:
        return self.idx.shape[0]


def candidates(net: Net, y, pat) -> Event:
    """The pairs the event concerns and the side each starts from."""
    C = net.C
    theta = y[0]
    piece, off, idx, kink, on = pat[:5]
    _, z, m, lam = margins(net, theta, pat)
    scale_j = layer_scales(net, z)[net.layer_of]
    tol_j = net.settings.kink_tol * scale_j
    sliding = sliding_mask(net, on, idx)
    # pairs held on their kink by the sliding ones or constant (a sample dead upstream)
    frz, dep = slaved(net, theta, pat, lam)
    # non-sliding pairs at a kink: crossed (m ≤ 0) or within kink_tol of an edge
    d_lo, d_hi = z - net.lo[piece], net.hi[piece] - z
    near = (~sliding) & ~frz & ((m <= 0) | (jnp.minimum(d_lo, d_hi) <= tol_j))
    n_near = jnp.sum(near)
    # candidates: up to C pairs at a kink, then the sliding ones
    score = jnp.where(near, -jnp.minimum(d_lo, d_hi) / scale_j, -jnp.inf)
    _, cand = jax.lax.top_k(score, C)
    cand_on = near[cand]
    at_lo = d_lo[cand] <= d_hi[cand]  # at the piece's lower edge: the kink below
    ck = jnp.where(at_lo, piece[cand] - 1, piece[cand])  # kink index
    ck = jnp.clip(ck, 0, net.n_kinks - 1)
    crossed = m[cand] <= 0
    came_right = at_lo  # a pair at its piece's lower edge sits on the kink's right side
    side0 = jnp.where(crossed, jnp.where(came_right, 0, 1), jnp.where(came_right, 1, 0))
    # the sliding pairs join as candidates (after the C near ones)
    all_idx = jnp.concatenate([cand, jnp.where(on, idx, 0)])
    # a sliding pair held by the others (or constant) leaves its slot: it keeps the piece
    # it came from
    all_on = jnp.concatenate([cand_on, on & ~dep])
    all_kink = jnp.concatenate([ck, kink])
    lo_s, hi_s = box(net, kink)
    leave_lo = on & (lam <= lo_s)
    leave_hi = on & (lam >= hi_s)
    s_left, s_right = net.s[kink], net.s[kink + 1]
    # λ past an end of its box: the pair leaves to the side whose slope that end is
    side_sl = jnp.where(
        leave_lo,
        jnp.where(s_left <= s_right, 0, 1),
        jnp.where(leave_hi, jnp.where(s_left <= s_right, 1, 0), 2),
    )
    side = jnp.concatenate([side0, side_sl]).astype(jnp.int32)
    sl_l, sl_r = net.s[all_kink], net.s[all_kink + 1]
    blo, bhi = jnp.minimum(sl_l, sl_r), jnp.maximum(sl_l, sl_r)
    return Event(
        theta, pat, z, m, lam, scale_j, tol_j, d_lo, d_hi, n_near, cand, cand_on,
        lo_s, hi_s, all_idx, all_on, all_kink, side, sl_l, sl_r, blo, bhi,
    )  # fmt: skip


def _fix_sides(net: Net, ev: Event, side, lam_fixed, A, S):
    """Candidates on a side get that side's slope; the others keep the pattern."""
    tgt = jnp.where(ev.on & (side != 2), ev.idx, net.P)
    S = S.at[tgt].set(lam_fixed, mode="drop")
    A = A.at[tgt].set(net.vc[ev.kink] - lam_fixed * net.c[ev.kink], mode="drop")
    return A, S


def solve_sides(net: Net, ev: Event, side, start, override=None):
    """(λ, ż) of every candidate under `side` (sliding ones by the equivalent control,
    Newton from `start`); `override` (K,), where finite, fixes that candidate's slope to
    the value given instead of its side's."""
    piece, off = ev.pat[0], ev.pat[1]
    slide = ev.on & (side == 2)
    lam_fixed = jnp.where(side == 0, ev.sl_l, ev.sl_r)
    if override is not None:
        lam_fixed = jnp.where(jnp.isfinite(override), override, lam_fixed)
    fix = functools.partial(_fix_sides, net, ev, side, lam_fixed)
    # the equivalent control over the sliding candidates (K slots, padded to M+C)
    lam0 = jnp.where(slide, start, 0.0)
    lam_s = _equivalent_control_k(net, ev, slide, lam0, fix)
    lam_all = jnp.where(slide, lam_s, lam_fixed)
    A, S = affine(net, (piece, off, ev.idx, ev.kink, slide), lam_s)
    A, S = fix(A, S)
    zd, _ = zdot_all(net, ev.theta, A, S)
    return lam_all, zd[ev.idx]


def _equivalent_control_k(net: Net, ev: Event, on_k, lam0, fix):
    """λ of the candidates `on_k` with ż + κ(z − c) = 0: two damped Newton steps."""
    piece_b, off_b = ev.pat[0], ev.pat[1]
    idx_k, kink_b = ev.idx, ev.kink

    def zdot_s(lam):
        # with the return term κ(z − c) of the field's equivalent control, so the decision
        # and the flow agree on λ
        A, S = affine(net, (piece_b, off_b, idx_k, kink_b, on_k), lam)
        A, S = fix(A, S)
        zd, _, z = zdot_z(net, ev.theta, A, S)
        ret = ev.pat[7] * (z[idx_k] - net.c[kink_b])
        return jnp.where(on_k, zd[idx_k] + ret, 0.0)

    lam_k = lam0
    eye = jnp.eye(ev.K, dtype=net.dtype)

    def newton(lam_k):
        r = zdot_s(lam_k)
        J = jac_columns(zdot_s, lam_k, on_k)
        J = jnp.where(on_k[:, None] & on_k[None, :], J, eye)
        return lam_k - damped_solve(J, r, on_k)

    lam_k = jax.lax.cond(jnp.any(on_k), lambda v: newton(newton(v)), lambda v: v, lam_k)
    return jnp.where(on_k, lam_k, 0.0)


def violation(net: Net, ev: Event, side, start):
    """(how far each candidate violates its side's condition, > 0 when it does; λ)."""
    lam_all, zd = solve_sides(net, ev, side, start)
    zs = jnp.max(jnp.abs(zd)) + net.tiny
    ztol = 1e-10 * zs
    btol = 0.5 * BOX_TOL * (ev.bhi - ev.blo)
    v_left = jnp.where(side == 0, zd - ztol, -jnp.inf)  # left needs ż ≤ 0
    v_right = jnp.where(side == 1, -zd - ztol, -jnp.inf)  # right needs ż ≥ 0
    v_box = jnp.where(side == 2, jnp.maximum(ev.blo - lam_all, lam_all - ev.bhi) - btol, -jnp.inf)
    v = jnp.where(ev.on, jnp.maximum(jnp.maximum(v_left / zs, v_right / zs), v_box), -1)
    return v, lam_all


def fix_one(net: Net, ev: Event, carry):
    """One step of the active-set iteration: the worst violator moves to another side."""
    sl_l, sl_r = ev.sl_l, ev.sl_r
    side, start, it, _, _ = carry
    v, lam_all = violation(net, ev, side, start)
    worst = jnp.argmax(v)
    bad = v[worst] > 0
    # first guess: a side whose field points back into the kink → sliding; a sliding λ
    # past an end → the side whose slope that end is
    guess = jnp.where(
        side[worst] == 2,
        jnp.where(
            lam_all[worst] < ev.blo[worst],
            jnp.where(sl_l[worst] <= sl_r[worst], 0, 1),
            jnp.where(sl_l[worst] <= sl_r[worst], 1, 0),
        ),
        2,
    )
    # the guess is kept if the worst pair's own Filippov condition (the others held as they
    # are) agrees with it; otherwise that condition decides: the left field pointing away
    # (ż ≤ 0) → left, else the right one pointing away → right (a crossing), else both
    # point in → sliding. Without this a pair whose sliding λ leaves its box at the end it
    # came from, while its field there points back in, cycles between that side and
    # sliding (seen in deep nets, where ∂ż/∂λ of one pair, the others re-solved, can have
    # either sign) instead of crossing.
    guess = guess.astype(side.dtype)
    new, start = jax.lax.cond(
        bad,
        lambda _: own_condition(net, ev, side, start, worst, guess),
        lambda _: (guess, start),
        None,
    )
    side = jnp.where(bad, side.at[worst].set(new), side)
    # λ under the sides and starts this step was given: unchanged ones where it settled
    return side, start, it + 1, bad, lam_all


def own_condition(net: Net, ev: Event, side, start, j, guess):
    """(side of pair j by its own Filippov condition, the others held; Newton start)."""
    _, zd_l = solve_sides(net, ev, side.at[j].set(0), start)
    _, zd_r = solve_sides(net, ev, side.at[j].set(1), start)
    zs = jnp.maximum(jnp.max(jnp.abs(zd_l)), jnp.max(jnp.abs(zd_r))) + net.tiny
    ztol = 1e-10 * zs
    ok_l, ok_r = zd_l[j] <= ztol, zd_r[j] >= -ztol
    ok_s = ~ok_l & ~ok_r
    ok_guess = jnp.where(guess == 0, ok_l, jnp.where(guess == 1, ok_r, ok_s))
    cur = side[j]
    own = jnp.where(
        ok_s, 2, jnp.where(ok_l & (cur != 0), 0, jnp.where(ok_r & (cur != 1), 1, guess))
    )
    new = jnp.where(ok_guess, guess, own).astype(side.dtype)
    start = jax.lax.cond(
        (new == 2) & ok_s,
        lambda st: bracketed_start(net, ev, side.at[j].set(2), st, j),
        lambda st: st,
        start,
    )
    return new, start


def bracketed_start(net: Net, ev: Event, side, start, j):
    """Where pair j slides (its left field points in, ż_L > 0, and its right one too,
    ż_R < 0) but Newton from `start` puts its λ outside the box, ż_j(λ) (the other sliding
    pairs re-solved) has another root inside it: in deep nets ż is multilinear in the
    slopes of pairs on one sample in different layers, so a tracked root can leave the box
    while the Filippov condition still holds. Find the root in the box by bisection between
    the two slopes and start Newton there."""
    sl_l, sl_r, blo, bhi = ev.sl_l, ev.sl_r, ev.blo, ev.bhi
    dtype = net.dtype
    lam_in, _ = solve_sides(net, ev, side, start)
    inside = (lam_in[j] >= blo[j] - BOX_TOL * (bhi[j] - blo[j])) & (
        lam_in[j] <= bhi[j] + BOX_TOL * (bhi[j] - blo[j])
    )

    def bisect(st):
        nan = jnp.full((ev.K,), jnp.nan, dtype)

        def g(u):
            lam_j = sl_l[j] + u * (sl_r[j] - sl_l[j])
            return solve_sides(net, ev, side.at[j].set(0), st, nan.at[j].set(lam_j))[1][j]

        def body(_, c):
            a, b = c
            mid = 0.5 * (a + b)
            pos = g(mid) > 0  # g(0) = ż_L > 0, g(1) = ż_R < 0
            return jnp.where(pos, mid, a), jnp.where(pos, b, mid)

        a, b = jax.lax.fori_loop(0, 40, body, (jnp.zeros((), dtype), jnp.ones((), dtype)))
        u = 0.5 * (a + b)
        return st.at[j].set(sl_l[j] + u * (sl_r[j] - sl_l[j]))

    return jax.lax.cond(inside, lambda st: st, bisect, start)


def active_set(net: Net, ev: Event):
    """(sides, Newton starts, still violated, λ) after the one-pair-at-a-time iteration
    (at most 2K + 2 moves). Where it settled (not still violated), λ is
    `solve_sides(net, ev, sides, starts)[0]`: its last step checked exactly those sides
    and changed nothing."""
    C, K = net.C, ev.K
    # Newton starts: the current λ of pairs that slide now, the box middles otherwise
    start0 = jnp.concatenate([0.5 * (ev.blo[:C] + ev.bhi[:C]), jnp.clip(ev.lam, ev.lo_s, ev.hi_s)])
    start0 = jnp.where(ev.on, start0, 0.0)
    side, start, _, still_bad, lam_all = jax.lax.while_loop(
        lambda c: c[3] & (c[2] < 2 * K + 2),
        functools.partial(fix_one, net, ev),
        (ev.side0, start0, jnp.int32(0), jnp.bool_(True), jnp.zeros_like(start0)),
    )
    return side, start, still_bad, lam_all


def _sides_of(ev: Event, lam):
    """λ at an end of its box → the side whose slope that end is; inside → sliding."""
    tol = BOX_TOL * (ev.bhi - ev.blo)
    lo_side = jnp.where(ev.sl_l <= ev.sl_r, 0, 1)
    new = jnp.where(lam <= ev.blo + tol, lo_side, jnp.where(lam >= ev.bhi - tol, 1 - lo_side, 2))
    return new.astype(jnp.int32)


def min_norm_sides(net: Net, ev: Event):
    """The minimum-norm element of the Clarke subdifferential over the candidates:
    min ‖∇L(λ)‖² on the box (∇L linearized in λ at the box middles; exact for one hidden
    layer), by coordinate descent; λ at an end → that side, inside → sliding. Used when
    the Filippov active-set iteration does not settle."""
    piece, off = ev.pat[0], ev.pat[1]
    all_on, blo, bhi = ev.on, ev.blo, ev.bhi
    lam_c = jnp.where(all_on, 0.5 * (blo + bhi), 0.0)

    def grad_of(lam):
        A, S = affine(net, (piece, off, ev.idx, ev.kink, all_on), lam)
        return ravel_pytree(jax.grad(functools.partial(loss_pat, net))(ev.theta, A, S))[0]

    g0 = grad_of(lam_c)
    G = jac_columns(grad_of, lam_c, all_on)
    Q = G.T @ G
    c = G.T @ (g0 - G @ lam_c)
    qd = jnp.maximum(jnp.diag(Q), net.tiny)

    def sweep(_, lam):
        def coord(i, lam):
            li = jnp.clip(lam[i] - (Q[i] @ lam + c[i]) / qd[i], blo[i], bhi[i])
            return lam.at[i].set(jnp.where(all_on[i], li, lam[i]))

        return jax.lax.fori_loop(0, ev.K, coord, lam)

    lam = jax.lax.fori_loop(0, 100, sweep, lam_c)
    return _sides_of(ev, lam)


def complementarity(net: Net, ev: Event, start):
    """The Filippov decision of every candidate at once, as the box-constrained
    complementarity problem it is: λ ∈ [blo, bhi] per pair with, at the end whose slope is
    the left piece's, ż ≤ 0 (the pair moves into that piece), at the right piece's end
    ż ≥ 0, and ż = 0 inside (it slides), ż taken with every candidate's slope set to its
    λ. Solved by semismooth Newton on the natural residual λ − Π_box(λ − F(λ)), F = ∓ż
    scaled, with a backtracking line search. Where the one-pair-at-a-time iteration cycles
    (deep nets: ż multilinear in the slopes of one sample's pairs in several layers), this
    finds the interior root it misses. Returns (sides, λ, converged)."""
    piece, off = ev.pat[0], ev.pat[1]
    all_on, blo, bhi = ev.on, ev.blo, ev.bhi
    dtype = net.dtype
    # F ≥ 0 at the lower end of the box: ż ≤ 0 there when that end is the left piece's
    # slope (convex kink, ReLU), ż ≥ 0 when it is the right piece's
    sgn = jnp.where(ev.sl_l <= ev.sl_r, -1.0, 1.0).astype(dtype)

    def zdot_c(lam):
        A, S = affine(net, (piece, off, ev.idx, ev.kink, all_on), lam)
        zd, _, z = zdot_z(net, ev.theta, A, S)
        ret = ev.pat[7] * (z[ev.idx] - net.c[ev.kink])
        return jnp.where(all_on, zd[ev.idx] + ret, 0.0)

    lam0 = jnp.where(all_on, jnp.clip(start, blo, bhi), 0.0)
    zs = jnp.maximum(
        jnp.maximum(jnp.max(jnp.abs(zdot_c(blo))), jnp.max(jnp.abs(zdot_c(bhi)))), net.tiny
    )
    width = jnp.where(all_on, bhi - blo, 1.0)

    def F(lam):
        return jnp.where(all_on, sgn * zdot_c(lam) / zs * width, 0.0)

    def resid(lam):
        f = F(lam)
        return jnp.where(all_on, lam - jnp.clip(lam - f, blo, bhi), 0.0), f

    eye = jnp.eye(ev.K, dtype=dtype)

    def newton(c):
        lam, it, _ = c
        r, f = resid(lam)
        free = all_on & (lam - f > blo) & (lam - f < bhi)
        JF = jac_columns(F, lam, all_on)
        Jr = jnp.where(free[:, None], JF, eye)
        d = -damped_solve(Jr, r)
        n0 = jnp.sum(r * r)

        def try_t(k, best):
            t = 0.5**k
            cand = jnp.where(all_on, lam + t * d, 0.0)
            rc, _ = resid(cand)
            nc = jnp.sum(rc * rc)
            better = (nc < (1.0 - 1e-4 * t) * n0) & ~best[2]
            return (
                jnp.where(better, cand, best[0]),
                jnp.where(better, nc, best[1]),
                best[2] | better,
            )

        lam_n, n_new, found = jax.lax.fori_loop(0, 12, try_t, (lam, n0, jnp.bool_(False)))
        # no descent: take the full step anyway (semismooth Newton is locally convergent;
        # the residual test below decides)
        lam_n = jnp.where(found, lam_n, jnp.where(all_on, lam + d, 0.0))
        n_new = jnp.where(found, n_new, jnp.sum(resid(lam_n)[0] ** 2))
        return lam_n, it + 1, jnp.sqrt(n_new)

    lam, _, rn = jax.lax.while_loop(
        lambda c: (c[1] < 40) & (c[2] > 1e-13),
        newton,
        (lam0, jnp.int32(0), jnp.sqrt(jnp.sum(resid(lam0)[0] ** 2))),
    )
    ok = jnp.all(jnp.isfinite(lam)) & (rn <= 1e-11)
    return _sides_of(ev, lam), lam, ok


def new_pattern(net: Net, y, ev: Event, side, start, unresolved, lam_all=None):
    """The pattern after the event (pieces written, sliding pairs compacted into the M
    slots, every pair starting with a positive margin) and the event's counts. `lam_all`:
    `solve_sides(net, ev, side, start)[0]` where the caller has it (else solved here)."""
    C, M, P = net.C, net.M, net.P
    theta = y[0]
    piece, off, on = ev.pat[0], ev.pat[1], ev.pat[4]
    all_idx, all_on, all_kink = ev.idx, ev.on, ev.kink
    if lam_all is None:
        lam_all, _ = solve_sides(net, ev, side, start)
    new_piece_c = jnp.where(side == 0, all_kink, all_kink + 1)
    slide = all_on & (side == 2)
    # non-candidate sliding slots that stayed: keep; write pieces for the others
    tgt = jnp.where(all_on & (side != 2), all_idx, P)
    piece2 = piece.at[tgt].set(new_piece_c.astype(piece.dtype), mode="drop")
    # sliding pairs: compact into M slots
    n_slide = jnp.sum(slide)
    order = jnp.argsort(~slide)  # sliding first (stable)
    sel = order[:M]
    sel_on = slide[sel]
    idx2 = jnp.where(sel_on, all_idx[sel], 0).astype(jnp.int32)
    kink2 = jnp.where(sel_on, all_kink[sel], 0).astype(jnp.int32)
    # a pair that slides keeps the piece on the side it came from (its slope is λ)
    # counts
    was_sliding_c = jnp.concatenate([jnp.zeros((C,), bool), on])
    old_piece_all = piece[all_idx]
    changed_piece = all_on & (side != 2) & (new_piece_c != old_piece_all)
    entered = slide & ~was_sliding_c
    left_sl = all_on & was_sliding_c & (side != 2)
    crossings = jnp.sum(changed_piece & ~was_sliding_c)
    switches = jnp.sum(changed_piece | entered | left_sl)
    # offsets: every pair starts the next segment with a positive margin, measured exactly
    # as the step's event function will (same λ solve, same Jacobian), so a sliding pair's
    # drift cannot re-trigger the event at the same time
    warm = jnp.where(sel_on, lam_all[sel], jnp.nan)
    pat2 = with_jacobian(net, theta, (piece2, jnp.zeros_like(off), idx2, kink2, sel_on), y, warm)
    _, z2, m2, _ = margins(net, theta, pat2)
    floor = 1e-12 * layer_scales(net, z2)[net.layer_of]
    off2 = jnp.where(m2 > floor, 0.0, floor - m2)
    # pairs held by the sliding ones (or constant) under the new pattern cannot switch
    # until the pattern upstream changes (an event, where this is recomputed)
    near2 = jnp.min(jnp.abs(z2[:, None] - net.c[None, :]), axis=1) <= ev.tol_j
    off2 = jnp.where(slaved(net, theta, pat2, pat2[6])[0] & near2, jnp.inf, off2)
    pat2 = (piece2, off2, *pat2[2:])
    # the switching residual: |z − c| of the located pair(s), relative to the scale
    cand = ev.cand
    resid = jnp.max(
        jnp.where(ev.cand_on, jnp.minimum(jnp.abs(ev.d_lo[cand]), jnp.abs(ev.d_hi[cand])), 0.0)
        / ev.scale_j[cand]
    )
    over = (ev.n_near > C) | (n_slide > M)
    info = {
        "crossings": crossings.astype(jnp.int32),
        "switches": switches.astype(jnp.int32),
        "entries": jnp.sum(entered).astype(jnp.int32),
        "resid": resid,
        "over": over,
        "need": jnp.stack([ev.n_near, n_slide]).astype(jnp.int32),
        "unresolved": unresolved,
        "pair": all_idx[jnp.argmax(all_on)],
    }
    return pat2, info


def decide(net: Net, y, pat):
    """(the pattern after the event at state y, the event's counts and diagnostics)."""
    ev = candidates(net, y, pat)
    side, start, still_bad, lam_as = active_set(net, ev)
    side_m, lam_m, mcp_ok = jax.lax.cond(
        still_bad,
        lambda _: complementarity(net, ev, start),
        lambda _: (side, start, jnp.bool_(False)),
        None,
    )
    still_bad_m = still_bad & ~mcp_ok
    side = jnp.where(still_bad & mcp_ok, side_m, side)
    start = jnp.where(still_bad & mcp_ok, jnp.where(ev.on, lam_m, 0.0), start)
    side = jax.lax.cond(still_bad_m, lambda _: min_norm_sides(net, ev), lambda _: side, None)
    # the new pattern
    start = jnp.where(still_bad_m, jnp.where(ev.on, 0.5 * (ev.blo + ev.bhi), 0.0), start)
    # where the active set settled, its last step solved these sides already (most events)
    lam_all = jax.lax.cond(
        still_bad,
        lambda _: solve_sides(net, ev, side, start)[0],
        lambda _: lam_as,
        None,
    )
    return new_pattern(net, y, ev, side, start, still_bad_m, lam_all)
