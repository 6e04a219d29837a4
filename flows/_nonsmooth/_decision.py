"""The Filippov decision at an event: which pairs at a kink cross, which slide, which
leave sliding — decided for every candidate pair together.

`decide(net, y, pat)` runs, in order:

1. `candidates`: the pairs at a kink (crossed, or within kink_tol of an edge; up to C of
   them) and the sliding ones (M), each with a first side from its crossing or its λ;
2. `settle`: the active set, one pair at a time: the worst violator of its side's
   condition is moved (`_after_violation`; its own Filippov condition decides where the
   first guess disagrees, `_after_right`, with a bisection for a sliding root inside the
   box, `_after_inside`, `_after_bisect`);
3. if that does not settle (`_unsettled`): the box complementarity problem for all
   candidates at once by semismooth Newton (`complementarity`), then the minimum-norm
   element of the Clarke subdifferential (`min_norm_sides`);
4. `new_pattern`: pieces written, sliding pairs compacted into the M slots, margins offset
   so that nothing re-triggers at once, and the event's counts.

Steps 2–3 are one `lax.while_loop` (`_decision_step`) with a single `solve_sides` (λ and
ż of every candidate under given sides, the costly part): each iteration solves the sides
its phase asks for, so that part is compiled once, not once per caller.

Sides are coded 0 = the left piece (z < c), 1 = the right piece, 2 = sliding.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ._net import BOX_TOL, NEWTON_RESIDUAL, Net
from ._pattern import Pattern, affine, box, layer_scales, loss_pat, sliding_mask, zdot_all, zdot_z
from ._sliding import damped_solve, jac_columns, margins, slaved, with_jacobian


@dataclasses.dataclass(frozen=True, eq=False)
class Event:
    """The state at an event and its K = C + M candidates (C pairs at a kink, then the M
    sliding slots): which pair (`idx`), used or not (`on`), the kink (`kink`), its left and
    right slopes (`sl_l`, `sl_r`) and λ box (`blo`, `bhi`)."""

    theta: object
    pat: Pattern
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
    # candidates: up to C pairs at a kink, nearest first, then the sliding ones
    score = jnp.where(near, -jnp.minimum(d_lo, d_hi) / scale_j, -jnp.inf)
    cand = jax.lax.cond(
        n_near <= C,
        lambda: _nearest_few(score, near, n_near, C),
        lambda: jax.lax.top_k(score, C)[1].astype(jnp.int32),
    )
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


def _nearest_few(score, near, n_near, C: int):
    """`lax.top_k(score, C)`'s indices where at most C pairs are `near` (the others' score
    −inf), without its sort over all P pairs (0.5–1 ms on a CPU at P = 4800, more than the
    rest of the decision): the near pairs by descending score, ties in index order, then
    the first pairs not near, in index order — top_k's order."""
    pos = jnp.arange(C)
    near_idx = jnp.nonzero(near, size=C, fill_value=0)[0]
    # at most C of the first 2C pairs are near, so the first C others are among them
    rest = jnp.nonzero(~near[: 2 * C], size=C, fill_value=0)[0]
    valid = pos < n_near
    key = jnp.where(valid, -score[near_idx], jnp.inf)
    # stable ranks by pairwise comparison (C² compares instead of a sort)
    ahead = (key[None, :] < key[:, None]) | (
        (key[None, :] == key[:, None]) & (pos[None, :] < pos[:, None])
    )
    order = jnp.zeros((C,), jnp.int32).at[jnp.sum(ahead, axis=1)].set(pos.astype(jnp.int32))
    return jnp.where(valid, near_idx[order], rest[jnp.clip(pos - n_near, 0, C - 1)]).astype(
        jnp.int32
    )


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
    piece, off = ev.pat.piece, ev.pat.off
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
    """λ of the candidates `on_k` with ż + κ(z − c) = 0: two damped Newton steps, fewer
    where ż is at rounding first (`NEWTON_RESIDUAL`; one where ż is affine in λ)."""
    piece_b, off_b = ev.pat.piece, ev.pat.off
    idx_k, kink_b = ev.idx, ev.kink

    def zdot_scaled(lam):
        # with the return term κ(z − c) of the field's equivalent control, so the decision
        # and the flow agree on λ
        A, S = affine(net, (piece_b, off_b, idx_k, kink_b, on_k), lam)
        A, S = fix(A, S)
        zd, _, z = zdot_z(net, ev.theta, A, S)
        ret = ev.pat.kappa * (z[idx_k] - net.c[kink_b])
        r = jnp.where(on_k, zd[idx_k] + ret, 0.0)
        return r, jnp.max(jnp.abs(r)) <= NEWTON_RESIDUAL * jnp.max(jnp.abs(zd))

    eye = jnp.eye(ev.K, dtype=net.dtype)

    def newton(c):
        k, lam_k, r, _ = c
        J = jac_columns(lambda lm: zdot_scaled(lm)[0], lam_k, on_k)
        J = jnp.where(on_k[:, None] & on_k[None, :], J, eye)
        lam_k = lam_k - damped_solve(J, r, on_k)
        # ż at the new λ only where another step may follow
        r, small = jax.lax.cond(k < 1, zdot_scaled, lambda lm: (r, jnp.bool_(True)), lam_k)
        return k + 1, lam_k, r, small

    def solve(lam_k):
        r, small = zdot_scaled(lam_k)
        # in a loop, not unrolled: the step is compiled once
        return jax.lax.while_loop(
            lambda c: (c[0] < 2) & ~c[3], newton, (jnp.int32(0), lam_k, r, small)
        )[1]

    lam_k = jax.lax.cond(jnp.any(on_k), solve, lambda v: v, lam0)
    return jnp.where(on_k, lam_k, 0.0)


# The decision is one `lax.while_loop` whose every iteration solves the candidates under
# one set of sides (`solve_sides`, the costly part, compiled once instead of once per
# place that needs it): its phase says which set and what is done with the result.
# Phases of the active-set iteration (one pair moved per pass: `_VIOLATION`, then for a
# violator `_LEFT`, `_RIGHT`, and where it slides `_INSIDE` and 40 × `_BISECT`), the
# final solve where it did not settle (`_FINAL`), the end (`_DONE`), and `_MOVED`: the
# pass moved its pair (set between iterations, never at an iteration's start).
_VIOLATION, _LEFT, _RIGHT, _INSIDE, _BISECT, _FINAL, _DONE, _MOVED = range(8)
#: Bisection steps for a sliding root inside the box (`_after_bisect`).
_BISECT_STEPS = 40


def _phase_sides(net: Net, ev: Event, c):
    """(sides, override) the iteration in phase `c["phase"]` solves: the sides as they
    are (`_VIOLATION`, `_FINAL`), or with the moving pair j on its left (`_LEFT`), right
    (`_RIGHT`) or sliding (`_INSIDE`), or on its left with its slope set to the
    bisection's midpoint (`_BISECT`). The override is NaN (none) elsewhere."""
    ph, side, j = c["phase"], c["side"], c["j"]
    side_j = jnp.where(ph == _RIGHT, 1, jnp.where(ph == _INSIDE, 2, 0)).astype(side.dtype)
    moved = (ph == _LEFT) | (ph == _RIGHT) | (ph == _INSIDE) | (ph == _BISECT)
    side_in = jnp.where(moved, side.at[j].set(side_j), side)
    mid = 0.5 * (c["a"] + c["b"])
    lam_j = ev.sl_l[j] + mid * (ev.sl_r[j] - ev.sl_l[j])
    nan = jnp.full((ev.K,), jnp.nan, net.dtype)
    override = nan.at[j].set(jnp.where(ph == _BISECT, lam_j, jnp.nan))
    return side_in, override


def _after_violation(net: Net, ev: Event, c, lam_all, zd):
    """How far each candidate violates its side's condition (> 0 when it does); the worst
    violator moves, or the iteration has settled. First guess for it: a side whose field
    points back into the kink → sliding; a sliding λ past an end → the side whose slope
    that end is."""
    side = c["side"]
    sl_l, sl_r = ev.sl_l, ev.sl_r
    zs = jnp.max(jnp.abs(zd)) + net.tiny
    ztol = 1e-10 * zs
    btol = 0.5 * BOX_TOL * (ev.bhi - ev.blo)
    v_left = jnp.where(side == 0, zd - ztol, -jnp.inf)  # left needs ż ≤ 0
    v_right = jnp.where(side == 1, -zd - ztol, -jnp.inf)  # right needs ż ≥ 0
    v_box = jnp.where(side == 2, jnp.maximum(ev.blo - lam_all, lam_all - ev.bhi) - btol, -jnp.inf)
    v = jnp.where(ev.on, jnp.maximum(jnp.maximum(v_left / zs, v_right / zs), v_box), -1)
    worst = jnp.argmax(v)
    bad = v[worst] > 0
    guess = jnp.where(
        side[worst] == 2,
        jnp.where(
            lam_all[worst] < ev.blo[worst],
            jnp.where(sl_l[worst] <= sl_r[worst], 0, 1),
            jnp.where(sl_l[worst] <= sl_r[worst], 1, 0),
        ),
        2,
    )
    # λ under the sides and starts this pass was given: unchanged ones where it settles
    return {
        **c,
        "lam_all": lam_all,
        "bad": bad,
        "j": worst.astype(jnp.int32),
        "guess": guess.astype(side.dtype),
        "it": c["it"] + 1,
        "phase": jnp.where(bad, _LEFT, _DONE),
    }


def _after_left(net: Net, ev: Event, c, lam_all, zd):
    return {**c, "zd_l": zd, "phase": jnp.int32(_RIGHT)}


def _after_right(net: Net, ev: Event, c, lam_all, zd):
    """Pair j's side by its own Filippov condition, the others held as they are, where it
    disagrees with the first guess: the left field pointing away (ż ≤ 0) → left, else the
    right one pointing away → right (a crossing), else both point in → sliding. Without
    this a pair whose sliding λ leaves its box at the end it came from, while its field
    there points back in, cycles between that side and sliding (seen in deep nets, where
    ∂ż/∂λ of one pair, the others re-solved, can have either sign) instead of crossing."""
    side, j, guess = c["side"], c["j"], c["guess"]
    zd_l, zd_r = c["zd_l"], zd
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
    # sliding by its own condition: check that Newton finds its λ in the box
    return {**c, "new": new, "phase": jnp.where((new == 2) & ok_s, _INSIDE, _MOVED)}


def _after_inside(net: Net, ev: Event, c, lam_in, zd):
    """Where pair j slides (its left field points in, ż_L > 0, and its right one too,
    ż_R < 0) but Newton from the start puts its λ outside the box, ż_j(λ) (the other
    sliding pairs re-solved) has another root inside it: in deep nets ż is multilinear in
    the slopes of pairs on one sample in different layers, so a tracked root can leave the
    box while the Filippov condition still holds. Then the root in the box is found by
    bisection between the two slopes (`_BISECT`) and Newton starts there."""
    j, blo, bhi = c["j"], ev.blo, ev.bhi
    inside = (lam_in[j] >= blo[j] - BOX_TOL * (bhi[j] - blo[j])) & (
        lam_in[j] <= bhi[j] + BOX_TOL * (bhi[j] - blo[j])
    )
    return {
        **c,
        "a": jnp.zeros((), net.dtype),
        "b": jnp.ones((), net.dtype),
        "k": jnp.int32(0),
        "phase": jnp.where(inside, _MOVED, _BISECT),
    }


def _after_bisect(net: Net, ev: Event, c, lam_all, zd):
    """One bisection step on u ∈ [0, 1], λ_j = s_left + u (s_right − s_left): g(u) = ż_j
    with j's slope set to λ_j (g(0) = ż_L > 0, g(1) = ż_R < 0); after the last, the start
    of j is the midpoint."""
    j, a, b = c["j"], c["a"], c["b"]
    mid = 0.5 * (a + b)
    pos = zd[j] > 0
    a, b = jnp.where(pos, mid, a), jnp.where(pos, b, mid)
    k = c["k"] + 1
    last = k == _BISECT_STEPS
    u = 0.5 * (a + b)
    start = c["start"]
    start = jnp.where(last, start.at[j].set(ev.sl_l[j] + u * (ev.sl_r[j] - ev.sl_l[j])), start)
    return {**c, "a": a, "b": b, "k": k, "start": start, "phase": jnp.where(last, _MOVED, _BISECT)}


def _after_final(net: Net, ev: Event, c, lam_all, zd):
    return {**c, "lam_all": lam_all, "phase": jnp.int32(_DONE)}


def _unsettled(net: Net, ev: Event, c):
    """Where the active-set iteration did not settle: the complementarity problem of all
    candidates, else the minimum-norm sides (counted as unresolved); then `_FINAL`."""
    side, start = c["side"], c["start"]
    side_m, lam_m, mcp_ok = complementarity(net, ev, start)
    side = jnp.where(mcp_ok, side_m, side)
    start = jnp.where(mcp_ok, jnp.where(ev.on, lam_m, 0.0), start)
    side = jax.lax.cond(mcp_ok, lambda _: side, lambda _: min_norm_sides(net, ev), None)
    start = jnp.where(mcp_ok, start, jnp.where(ev.on, 0.5 * (ev.blo + ev.bhi), 0.0))
    return {**c, "side": side, "start": start, "unresolved": ~mcp_ok, "phase": jnp.int32(_FINAL)}


def _decision_step(net: Net, ev: Event, fallback: bool, c):
    """One iteration of the decision's loop: one `solve_sides`, then its phase's use of it;
    a pass that moved its pair writes it and starts the next pass, or, after 2K + 2
    passes still violated, the fallbacks (`_unsettled`; with `fallback` False, the end)."""
    side_in, override = _phase_sides(net, ev, c)
    lam_all, zd = solve_sides(net, ev, side_in, c["start"], override)
    after = (_after_violation, _after_left, _after_right, _after_inside, _after_bisect)

    def branch(f):
        # the carry's dtypes kept (phases and indices int32)
        return lambda c, lam_all, zd: jax.tree_util.tree_map(
            lambda new, old: jnp.asarray(new).astype(old.dtype), f(net, ev, c, lam_all, zd), c
        )

    c = jax.lax.switch(c["phase"], [branch(f) for f in (*after, _after_final)], c, lam_all, zd)
    moved = c["phase"] == _MOVED
    c["side"] = jnp.where(moved, c["side"].at[c["j"]].set(c["new"]), c["side"])
    more = c["it"] < 2 * ev.K + 2
    c["phase"] = jnp.where(moved & more, jnp.int32(_VIOLATION), c["phase"])
    if not fallback:
        c["phase"] = jnp.where(moved & ~more, jnp.int32(_DONE), c["phase"])
        return c
    return jax.lax.cond(moved & ~more, functools.partial(_unsettled, net, ev), lambda c: c, c)


def settle(net: Net, ev: Event, fallback: bool = True):
    """(sides, Newton starts, λ, whether the active set stayed violated, whether the
    fallbacks did not resolve it either). The active set: one pair at a time, the worst
    violator of its side's condition moves (at most 2K + 2 moves), each solve warm-started
    from the pairs' starts. Where it settled, λ is its last pass's (that pass checked
    exactly those sides and changed nothing); else the complementarity solve, the
    minimum-norm fallback, and λ solved under the sides they give (with `fallback` False:
    the active set alone, λ its last pass's)."""
    C, K, dtype = net.C, ev.K, net.dtype
    # Newton starts: the current λ of pairs that slide now, the box middles otherwise
    start0 = jnp.concatenate([0.5 * (ev.blo[:C] + ev.bhi[:C]), jnp.clip(ev.lam, ev.lo_s, ev.hi_s)])
    start0 = jnp.where(ev.on, start0, 0.0)
    c0 = {
        "phase": jnp.int32(_VIOLATION),
        "side": ev.side0,
        "start": start0,
        "it": jnp.int32(0),
        "bad": jnp.bool_(True),
        "lam_all": jnp.zeros_like(start0),
        "j": jnp.int32(0),
        "guess": jnp.zeros((), ev.side0.dtype),
        "new": jnp.zeros((), ev.side0.dtype),
        "zd_l": jnp.zeros((K,), dtype),
        "a": jnp.zeros((), dtype),
        "b": jnp.ones((), dtype),
        "k": jnp.int32(0),
        "unresolved": jnp.bool_(False),
    }
    c = jax.lax.while_loop(
        lambda c: c["phase"] != _DONE, functools.partial(_decision_step, net, ev, fallback), c0
    )
    return c["side"], c["start"], c["lam_all"], c["bad"], c["unresolved"]


def active_set(net: Net, ev: Event):
    """(sides, Newton starts, still violated, λ) after the one-pair-at-a-time iteration
    alone (at most 2K + 2 moves; `settle` without the fallbacks). Where it settled (not
    still violated), λ is `solve_sides(net, ev, sides, starts)[0]`: its last pass checked
    exactly those sides and changed nothing."""
    side, start, lam_all, still_bad, _ = settle(net, ev, fallback=False)
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
    piece, off = ev.pat.piece, ev.pat.off
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
    piece, off = ev.pat.piece, ev.pat.off
    all_on, blo, bhi = ev.on, ev.blo, ev.bhi
    dtype = net.dtype
    # F ≥ 0 at the lower end of the box: ż ≤ 0 there when that end is the left piece's
    # slope (convex kink, ReLU), ż ≥ 0 when it is the right piece's
    sgn = jnp.where(ev.sl_l <= ev.sl_r, -1.0, 1.0).astype(dtype)

    def zdot_c(lam):
        A, S = affine(net, (piece, off, ev.idx, ev.kink, all_on), lam)
        zd, _, z = zdot_z(net, ev.theta, A, S)
        ret = ev.pat.kappa * (z[ev.idx] - net.c[ev.kink])
        return jnp.where(all_on, zd[ev.idx] + ret, 0.0)

    lam0 = jnp.where(all_on, jnp.clip(start, blo, bhi), 0.0)
    # max |ż| over the two ends of the boxes, in a loop: ż compiled once for both
    ends = jnp.stack([blo, bhi])
    zs = jax.lax.fori_loop(
        0, 2, lambda i, m: jnp.maximum(m, jnp.max(jnp.abs(zdot_c(ends[i])))), -jnp.inf
    )
    zs = jnp.maximum(zs, net.tiny)
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
                jnp.where(k == 0, nc, best[3]),  # the full step's (t = 1)
            )

        lam_n, n_new, found, n_full = jax.lax.fori_loop(
            0, 12, try_t, (lam, n0, jnp.bool_(False), n0)
        )
        # no descent: take the full step anyway (semismooth Newton is locally convergent;
        # the residual test below decides)
        lam_n = jnp.where(found, lam_n, jnp.where(all_on, lam + d, 0.0))
        n_new = jnp.where(found, n_new, n_full)
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
    piece, off, on = ev.pat.piece, ev.pat.off, ev.pat.on
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
    off2 = jnp.where(slaved(net, theta, pat2, pat2.lam0)[0] & near2, jnp.inf, off2)
    pat2 = pat2._replace(piece=piece2, off=off2)
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
    side, start, lam_all, _, unresolved = settle(net, ev)
    return new_pattern(net, y, ev, side, start, unresolved, lam_all)
