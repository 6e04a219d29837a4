"""The event loop: Tsit5 steps with our own error control, margins checked along each
accepted step's dense output, the earliest event located by a bracketing root finder and
decided (`_decision.decide`), saves located on the dense output — all in one
`lax.while_loop` over a `Carry`."""

from __future__ import annotations

from typing import Any, NamedTuple

import diffrax
import jax
import jax.numpy as jnp

from .._trees import tree_rms
from ._decision import decide
from ._net import UNRESOLVED_RUN, Net, Stop
from ._pattern import initial_pattern, layer_scales, sliding_mask
from ._sliding import margin_vector, margins, project, rate, vector_field, with_jacobian

#: The step within a pattern (diffrax's; the error control, event location and saves are
#: this module's).
SOLVER = diffrax.Tsit5()


class Counts(NamedTuple):
    """What the events did so far: pattern changes, transversal crossings, sliding
    intervals begun, and the largest |z − c|/scale of a located event."""

    switches: Any
    crossings: Any
    entries: Any
    resid: Any


class Carry(NamedTuple):
    """The event loop's state (a pytree: `lax.while_loop`'s carry)."""

    s: Any  #: the solver's clock
    y: Any  #: (θ, energy, t)
    h: Any  #: the next trial step
    st: Any  #: Tsit5's state (its FSAL stage)
    jump: Any  #: the last stage is stale (after an event or a projection): recompute it
    pat: Any  #: the activation `Pattern`
    counts: Counts
    k: Any  #: saves written
    kp: Any  #: parameter saves written
    buf: Any  #: the observables at the save times
    pbuf: Any  #: θ at the parameter save times
    steps: Any  #: trial steps
    rejected: Any  #: rejected trial steps
    events: Any  #: located events
    root_evals: Any  #: root-finder evaluations
    ring: Any  #: the times of the last `storm_window` events
    code: Any  #: `Stop` code
    pair: Any  #: the pair a stop concerns (−1: none)
    unresolved: Any  #: events decided by the minimum-norm fallback
    unresolved_run: Any  #: such events in a row
    need: Any  #: (candidate, sliding) slots the event that ran out of them needs


def term(net: Net) -> diffrax.ODETerm:
    """The flow on the solver's clock s, (θ, energy, t)' = (−r∇L, r‖∇L‖², r) with
    r = dt/ds, under the pattern passed as the term's `args`."""
    return diffrax.ODETerm(lambda s, y, pat: vector_field(net, s, y, pat))


def kink_obs(net: Net, theta, pat):
    """The per-save kink observables (`KINK_OBSERVABLES`) that depend on the state."""
    dtype, kink_tol = net.dtype, net.settings.kink_tol
    piece, off, idx, kink, on = pat[:5]
    _, z, _, _ = margins(net, theta, pat)
    sc = layer_scales(net, z)[net.layer_of]
    sliding = sliding_mask(net, on, idx)
    d = jnp.min(jnp.abs(z[:, None] - net.c[None, :]), axis=1)
    on_kink = sliding | (d <= kink_tol * sc)
    true_piece = jnp.searchsorted(net.c, z, side="right")
    mismatch = (~sliding) & (true_piece != piece) & (d > kink_tol * sc)
    return {
        "kink_pairs": jnp.sum(on_kink).astype(dtype),
        "sliding_pairs": jnp.sum(on).astype(dtype),
        "pattern_mismatch": jnp.sum(mismatch).astype(dtype),
    }


def save_values(net: Net, theta, energy, t, pat, counts):
    problem, dtype = net.problem, net.dtype
    out = dict(net.settings.observables(problem, theta, t))
    out["loss"] = problem.loss(theta)
    out["energy"] = energy
    out.update(kink_obs(net, theta, pat))
    out["switches"] = counts.switches.astype(dtype)
    out["crossings"] = counts.crossings.astype(dtype)
    out["sliding_entries"] = counts.entries.astype(dtype)
    out["switch_residual"] = counts.resid
    return out


def rms_err(net: Net, y0, y1, yerr):
    """The step's scaled local error (RMS or max over θ and the energy; t bounded apart)."""
    settings = net.settings

    def leaf(a, b, e):
        sc = net.atol + net.rtol * jnp.maximum(jnp.abs(a), jnp.abs(b))
        return jnp.ravel(e / sc)

    parts = [
        leaf(a, b, e)
        for a, b, e in zip(
            jax.tree_util.tree_leaves(y0[:2]),
            jax.tree_util.tree_leaves(y1[:2]),
            jax.tree_util.tree_leaves(yerr[:2]),
            strict=True,
        )
    ]
    if settings.clock == "physical":
        parts.append(leaf(y0[2], y1[2], yerr[2]))  # t = s: no error
    flat = jnp.concatenate(parts)
    if settings.error_norm == "max":
        err = jnp.max(jnp.abs(flat))
    else:
        err = jnp.sqrt(jnp.mean(flat * flat))
    if settings.clock == "physical":
        return err
    # t(s) on the log and loss clocks is a quadrature, ∫ dt/ds ds, whose local errors add
    # up: relative to t they sum to ~(steps × rtol) over a long run, and on the loss clock
    # L ∝ 1/t late, so the loss at a save time carries that relative error (measured:
    # 96 × rtol at t = 1e8 with θ at 1.2 ×). So t's error is bounded on its own, whatever
    # the norm of the parameters' (in the RMS norm it would be diluted among them), and
    # relative to the step's increment of t: the global relative error of t stays ~rtol.
    sc_t = net.atol + net.rtol * jnp.abs(y1[2] - y0[2])
    return jnp.maximum(err, jnp.abs(yerr[2]) / sc_t)


def root(net: Net, fn, a, b, fa, fb):
    """Illinois false position on [a, b] with fn(a) > 0 ≥ fn(b), fn scalar: returns
    (b's side, its evaluations). `root_vector` with one entry."""
    b, evals = root_vector(net, lambda x: fn(x)[None], a, b, fa[None], fb[None])
    return b, evals


def root_vector(net: Net, fn, a, b, va, vb):
    """The earliest zero of φ = min fn on [a, b], fn a vector of smooth entries with
    min va > 0 ≥ min vb: Illinois false position whose next point is the earliest secant
    root of the entries that change sign on the bracket (the secant of φ itself would
    interpolate between whichever entries are smallest at the two ends, and φ has a kink
    wherever that entry changes). Returns (b's side, its evaluations)."""

    def body(c):
        a, b, va, vb, it, side = c
        # every entry of va is > 0 (φ(a) > 0): those ≤ 0 at b crossed inside the bracket
        cross = vb <= 0
        xi = (a * vb - b * va) / jnp.where(cross, vb - va, -1.0)
        x = jnp.min(jnp.where(cross, xi, jnp.inf))
        x = jnp.where((x > a) & (x < b), x, 0.5 * (a + b))
        vx = fn(x)
        pos = jnp.min(vx) > 0
        va_new = jnp.where(pos, vx, jnp.where(side == -1, va * 0.5, va))
        vb_new = jnp.where(pos, jnp.where(side == 1, vb * 0.5, vb), vx)
        a2 = jnp.where(pos, x, a)
        b2 = jnp.where(pos, b, x)
        return a2, b2, va_new, vb_new, it + 1, jnp.where(pos, 1, -1).astype(jnp.int32)

    width0 = b - a

    def cond(c):
        a, b, _, _, it, _ = c
        return (b - a > 1e-13 * width0 + 4 * net.eps * jnp.abs(b)) & (it < 200)

    out = jax.lax.while_loop(cond, body, (a, b, va, vb, jnp.int32(0), jnp.int32(0)))
    return out[1], out[4]


def start(net: Net, theta0, ts, pts_mask, t0, t1):
    """The loop's initial carry (t0 saved)."""
    settings, dtype = net.settings, net.dtype
    y0 = (theta0, jnp.zeros((), dtype), jnp.asarray(t0, dtype))
    pat0 = initial_pattern(net, theta0)
    counts0 = Counts(jnp.int32(0), jnp.int32(0), jnp.int32(0), jnp.zeros((), dtype))
    obs_shape = jax.eval_shape(lambda: save_values(net, theta0, y0[1], y0[2], pat0, counts0))
    buf = jax.tree_util.tree_map(
        lambda s: jnp.full((settings.n_save, *s.shape), jnp.nan, s.dtype), obs_shape
    )
    pbuf = jax.tree_util.tree_map(
        lambda v: jnp.full((settings.n_psave, *v.shape), jnp.nan, v.dtype), theta0
    )
    s0 = jnp.asarray(t0 if settings.clock == "physical" else 0.0, dtype)
    # the first step: Hairer's heuristic on the s-field
    f0 = vector_field(net, s0, y0, pat0)
    d0 = tree_rms(jax.tree_util.tree_map(lambda v: v / (net.atol + net.rtol * jnp.abs(v)), y0[0]))
    d1 = tree_rms(
        jax.tree_util.tree_map(lambda v, f: f / (net.atol + net.rtol * jnp.abs(v)), y0[0], f0[0])
    )
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    h0 = jnp.minimum(h0, (t1 - t0) / f0[2])
    st0 = SOLVER.init(term(net), s0, s0 + h0, y0, pat0)
    ring = jnp.full((settings.storm_window,), -jnp.inf, dtype)
    carry = Carry(
        s=s0,
        y=y0,
        h=h0,
        st=st0,
        jump=jnp.bool_(True),
        pat=pat0,
        counts=counts0,
        k=jnp.int32(0),
        kp=jnp.int32(0),
        buf=buf,
        pbuf=pbuf,
        steps=jnp.int32(0),
        rejected=jnp.int32(0),
        events=jnp.int32(0),
        root_evals=jnp.int32(0),
        ring=ring,
        code=jnp.int32(Stop.OK),
        pair=jnp.int32(-1),
        unresolved=jnp.int32(0),
        unresolved_run=jnp.int32(0),
        need=jnp.zeros((2,), jnp.int32),
    )
    # t0 is saved before the loop
    return do_saves(net, carry, lambda tau: carry.y, jnp.zeros((), dtype), ts, pts_mask)


def loop(net: Net, carry, ts, pts_mask, t1):
    """Steps from `carry` until every save time is written or the run stops."""
    n_save = net.settings.n_save

    def cond(c):
        return (c.k < n_save) & (c.code == Stop.OK)

    return jax.lax.while_loop(cond, lambda c: step(net, c, ts, pts_mask, t1), carry)


def run(net: Net, theta0, ts, pts_mask, t0, t1):
    return loop(net, start(net, theta0, ts, pts_mask, t0, t1), ts, pts_mask, t1)


def do_saves(net: Net, c, interp, tau_end, ts, pts_mask):
    """Save at every save time in (t(start), t(start + tau_end)] (and t0 at the start)."""
    n_save, dtype = net.settings.n_save, net.dtype

    def t_at(tau):
        return interp(tau)[2]

    def cond(cc):
        k = cc.k
        tk = ts[jnp.minimum(k, n_save - 1)]
        return (k < n_save) & (tk <= t_at(tau_end))

    def body(cc):
        k = cc.k
        tk = ts[k]
        fa = tk - t_at(jnp.zeros((), dtype))
        fb = tk - t_at(tau_end)
        tau, _ = jax.lax.cond(
            fa <= 0,
            lambda _: (jnp.zeros((), dtype), jnp.int32(0)),
            lambda _: root(net, lambda x: tk - t_at(x), jnp.zeros((), dtype), tau_end, fa, fb),
            None,
        )
        y = interp(tau)
        # the dense output between steps drifts off the sliding kinks by ~rtol: saved
        # states are projected onto them like the steps' ends
        y = (project(net, y[0], cc.pat), *y[1:])
        vals = save_values(net, y[0], y[1], tk, cc.pat, cc.counts)
        buf = jax.tree_util.tree_map(lambda b, v: b.at[k].set(v), cc.buf, vals)
        kp = cc.kp
        pbuf = jax.lax.cond(
            pts_mask[k],
            lambda pb: jax.tree_util.tree_map(lambda b, v: b.at[kp].set(v), pb, y[0]),
            lambda pb: pb,
            cc.pbuf,
        )
        return cc._replace(buf=buf, pbuf=pbuf, k=k + 1, kp=kp + pts_mask[k].astype(jnp.int32))

    return jax.lax.while_loop(cond, body, c)


def step(net: Net, c, ts, pts_mask, t1):
    """One trial step from the carry: rejected (smaller h) or accepted (saves, and an
    event located and decided if a margin changes sign along it)."""
    settings = net.settings
    s, y, h, pat = c.s, c.y, c.h, c.pat
    # don't step far past t1 (t grows at least as fast as its rate now, for every clock)
    r_now = jnp.maximum(rate(net, y, y[0], pat), net.tiny)
    h = jnp.minimum(h, jnp.maximum((t1 - y[2]) / r_now, 1e-300) * 1.0001)
    y1, yerr, dense, st1, _ = SOLVER.step(term(net), s, s + h, y, pat, c.st, c.jump)
    err = rms_err(net, y, y1, yerr)
    finite = jnp.isfinite(err) & jnp.all(
        jnp.asarray([jnp.all(jnp.isfinite(v)) for v in jax.tree_util.tree_leaves(y1)])
    )
    accept = finite & (err <= 1.0)
    factor = jnp.where(
        finite, jnp.clip(0.9 * jnp.maximum(err, 1e-10) ** (-1.0 / 5.0), 0.2, 5.0), 0.25
    )
    steps = c.steps + 1
    code = jnp.where(steps >= settings.max_steps, Stop.MAX_STEPS, Stop.OK)
    code = jnp.where(h < 1e-14 * jnp.maximum(jnp.abs(s), 1.0), Stop.STEP_COLLAPSED, code)

    def rejected(_):
        return c._replace(
            h=h * factor,
            steps=steps,
            rejected=c.rejected + 1,
            code=jnp.where(finite | (h > 1e-300), code, Stop.NONFINITE).astype(jnp.int32),
        )

    trial = {"h": h, "y1": y1, "dense": dense, "st1": st1, "factor": factor, "code": code}

    def accepted(_):
        return _accepted(net, c, steps, trial, ts, pts_mask)

    return jax.lax.cond(accept, accepted, rejected, None)


def _accepted(net: Net, c, steps, trial, ts, pts_mask):
    """An accepted step: the earliest sign change of the margins along its dense output
    located (checked at h/4, h/2, 3h/4, h, then Illinois), saves up to there, and then the
    event decided or the step taken in full."""
    dtype = net.dtype
    s, pat, h = c.s, c.pat, trial["h"]
    interp_obj = SOLVER.interpolation_cls(t0=s, t1=s + h, **trial["dense"])

    def interp(tau):
        return interp_obj.evaluate(s + tau)

    def vec(tau):
        return margin_vector(net, interp(tau)[0], pat)[4]

    taus = h * jnp.asarray([0.25, 0.5, 0.75, 1.0], dtype)
    vs = jax.vmap(vec)(taus)
    phis = jnp.min(vs, axis=1)
    hit = phis <= 0
    any_hit = jnp.any(hit)
    first = jnp.argmax(hit)
    a = jnp.where(first > 0, taus[jnp.maximum(first - 1, 0)], 0.0)
    va = jnp.where(first > 0, vs[jnp.maximum(first - 1, 0)], vec(jnp.zeros((), dtype)))
    fa = jnp.min(va)
    b, vb = taus[first], vs[first]

    def located(_):
        return root_vector(net, vec, a, b, va, vb)

    tau_e, n_root = jax.lax.cond(any_hit & (fa > 0), located, lambda _: (h, jnp.int32(0)), None)
    # an event at the very start (φ ≤ 0 already): handled as an event at τ = 0
    tau_e = jnp.where(any_hit & (fa <= 0), 0.0, tau_e)
    tau_end = jnp.where(any_hit, tau_e, h)
    cc = do_saves(net, c, interp, tau_end, ts, pts_mask)
    cc = cc._replace(steps=steps, root_evals=cc.root_evals + n_root)
    # the state the step ends in (the event's, or the step's end), projected onto the
    # sliding kinks (one projection compiled for both branches). At an event, before the
    # decision: off them by δz, the equivalent control carries the return term κ·δz, which
    # shifts λ by κ·δz/(∂ż/∂λ) — at a sliding pair's exit (λ at an end of its box, ż of
    # the side it leaves to ≈ 0) enough to contradict the side test and chatter
    y_end = jax.tree_util.tree_map(
        lambda a, b: jnp.where(any_hit, a, b), interp(tau_e), trial["y1"]
    )
    y_end = (project(net, y_end[0], pat), *y_end[1:])
    return jax.lax.cond(
        any_hit,
        lambda cc: _with_event(net, cc, s, pat, y_end, tau_e, trial),
        lambda cc: _no_event(net, cc, s, pat, trial, y_end),
        cc,
    )


def _with_event(net: Net, cc, s, pat, y_e, tau_e, trial):
    """The carry after the event at s + tau_e (state y_e, already projected onto the
    sliding kinks): decided, counted, and checked for storms, undecided runs and slots
    that ran out."""
    settings = net.settings
    h, factor, code = trial["h"], trial["factor"], trial["code"]
    pat2, info = decide(net, y_e, pat)
    counts = Counts(
        switches=cc.counts.switches + info["switches"],
        crossings=cc.counts.crossings + info["crossings"],
        entries=cc.counts.entries + info["entries"],
        resid=jnp.maximum(cc.counts.resid, info["resid"]),
    )
    ring = jnp.roll(cc.ring, -1).at[-1].set(y_e[2])
    span = ring[-1] - ring[0]
    storm = span <= settings.storm_span * jnp.maximum(1.0, jnp.abs(y_e[2]))
    events = cc.events + 1
    unres_run = jnp.where(info["unresolved"], cc.unresolved_run + 1, 0)
    stuck = unres_run >= UNRESOLVED_RUN
    code2 = jnp.where(
        info["over"],
        Stop.OUT_OF_SLOTS,
        jnp.where(storm, Stop.STORM, jnp.where(stuck, Stop.UNDECIDED, code)),
    )
    code2 = jnp.where(events >= settings.max_events, Stop.MAX_STEPS, code2)
    decided = {
        "pat": pat2,
        "counts": counts,
        "events": events,
        "ring": ring,
        "unresolved_run": unres_run.astype(jnp.int32),
        "unresolved": cc.unresolved + info["unresolved"].astype(jnp.int32),
    }
    # more pairs at a kink than slots: the run stops at the event *before* its decision
    # (pattern and counts as they were), so that a loop with more slots continues from
    # this state and decides the event in full
    before = {name: getattr(cc, name) for name in decided}
    kept = jax.tree_util.tree_map(lambda a, b: jnp.where(info["over"], a, b), before, decided)
    return cc._replace(
        **kept,
        s=s + tau_e,
        y=y_e,
        h=jnp.maximum(h * factor, 1e-300),
        jump=jnp.bool_(True),
        code=code2.astype(jnp.int32),
        pair=jnp.where(storm | stuck | info["over"], info["pair"], cc.pair).astype(jnp.int32),
        need=jnp.where(info["over"], info["need"], 0).astype(jnp.int32),
    )


def _no_event(net: Net, cc, s, pat, trial, y_new):
    """The carry after a step taken in full (`y_new`: its end projected onto the sliding
    kinks)."""
    h = trial["h"]
    return cc._replace(
        s=s + h,
        y=y_new,
        h=h * trial["factor"],
        st=trial["st1"],
        # after a projection the step's last stage is no longer f(y): recompute
        jump=jnp.any(pat.on),
        pat=with_jacobian(net, y_new[0], pat, y_new, pat.lam0),
        unresolved_run=jnp.int32(0),
        code=trial["code"].astype(jnp.int32),
    )
