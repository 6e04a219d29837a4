"""The exact gradient flow of networks whose activations have kinks (ReLU, leaky ReLU, any
`PiecewiseLinear`): a piecewise-smooth ODE, integrated with located switching and Filippov
sliding.

The switching functions are the pre-activations z_j(θ) of every unit on every sample
("pairs" j). Within one activation pattern (each pair's piece of σ fixed) the loss is a
smooth function of θ and the flow is integrated by Tsit5 (diffrax's step, our own step-size
control and event location), on the pattern's smooth extension. After each accepted step
the pairs' margins (distance of z_j to the edges of its piece) are checked along the dense
output; the earliest crossing is located by a bracketing root finder on the interpolant,
the step is cut there, and the pattern is updated by a Filippov decision over every pair at
a kink:

- a pair whose field on the far side points onward crosses (its piece changes);
- a pair whose fields on both sides point into the surface *slides*: its slope λ_j ∈
  [s_left, s_right] is the equivalent control that keeps ż_j = 0 (solved by Newton's method
  on ż(λ), all sliding pairs together), until λ_j reaches an end of its interval — an event
  that returns it to that side.

With several pairs at a kink at once the decision solves the box-constrained
complementarity problem (λ in the box, ż = 0 where interior, ż pointing to the chosen
side where at a bound) by an active-set iteration, one pair at a time; for one-hidden-layer
nets on attractive kinks this is the minimum-norm element of the Clarke subdifferential.
Where the iteration does not settle (several coupled surfaces in deep nets, where ż is
multilinear in the slopes of one sample's pairs in different layers), the same problem is
solved for all candidates at once by semismooth Newton on its natural residual
λ − Π_box(λ − F(λ)), F = ∓ż. Only if that fails too is the minimum-norm element of the
Clarke subdifferential taken (a box-constrained least-squares problem in the candidates'
slopes, ∇L linearized in them; counted in `stats.extra["unresolved_events"]`).
If that still chatters, the event-storm guard stops the run and names the pair.

Redundant surfaces: where a sample is dead in one layer (every unit there off, or a ReLU
unit held on its kink) and there is no hidden bias, the next layer's pairs of that sample
sit at z = 0 with a normal that is zero or a combination of the held units' normals. They
are no switching surfaces of their own while those slide (`slaved`): they are left out of
the decisions and of event detection until the pattern upstream changes, and the sliding
systems are solved by damped least squares (`_damped_solve`), so a dependent constraint
that does reach them leaves them consistent rather than singular.
Everything runs in one compiled `lax.while_loop`: no recompilation per event, thousands of
pairs.

Along the Filippov flow dL/dt = −‖θ̇‖² (chain rule for these piecewise-smooth losses), so
the energy identity remains the accuracy certificate; the switching residual at each
located event and the pattern consistency at each save certify the switching.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ._compile import callback_free
from ._errors import ConfigError, SolverError
from ._problem import Problem
from ._solvers import check_error_norm
from ._stats import Result, SolveStats
from ._trajectory import Trajectory, assemble_trajectory, flat_params
from ._validate import as_float, as_int

__all__ = ["simulate_nonsmooth", "KINK_OBSERVABLES", "NONSMOOTH_CLOCKS"]

#: Clocks of the non-smooth solver: dt/ds = 1 (physical), 1 + t (log: s = ln(1 + t)) or
#: 1/L (loss); t is carried as a state, so save times are located like events.
NONSMOOTH_CLOCKS = ("physical", "log", "loss")

#: The observables every non-smooth run records (per save time).
KINK_OBSERVABLES = {
    "kink_pairs": "pairs (unit, sample) on a kink: sliding, or |z − c| ≤ kink_tol·scale",
    "sliding_pairs": "pairs sliding on a kink (Filippov equivalent control)",
    "switches": "pattern changes so far (a pair changing piece, entering or leaving sliding)",
    "crossings": "transversal crossings of a kink so far",
    "sliding_entries": "sliding intervals begun so far",
    "pattern_mismatch": "pairs whose z lies outside their pattern's piece by more than "
    "kink_tol·scale (0 on a correct run: a missed switch shows here)",
    "switch_residual": "largest |z − c|/scale of a located event so far (0 up to rounding)",
}

#: Largest |z − c|/scale allowed for a pair at a located switch (the switching certificate;
#: a well-located switch has ~1e-15): beyond it a switch was located late or missed.
SWITCH_RESIDUAL_MAX = 1e-6

#: Rate (per unit of the solver's clock s) at which a sliding pair that drifted off its kink
#: by integration error is brought back (Baumgarte-type stabilization of the sliding mode).
SLIDING_RETURN = 1.0

#: Relative tolerance on a sliding pair's λ at the ends of its box [s_left, s_right]: the
#: decision accepts λ within half of it as inside, the leave-event fires beyond all of it.
BOX_TOL = 1e-8

_CODES = {
    0: Result.successful,
    1: Result.max_steps_reached,
    2: Result.step_size_collapsed,
    3: Result.nonfinite,
    4: Result.solver_failed,  # event storm
    5: Result.solver_failed,  # too many pairs at a kink / sliding
    6: Result.solver_failed,  # undecided events in a row
}

#: Consecutive events whose Filippov decision did not settle (the minimum-norm fallback
#: taken) before the run stops: several coupled kinks the decision cannot resolve. Each
#: such event costs many equivalent-control solves, so waiting for the event-storm window
#: would take minutes to report what a few events already show.
UNRESOLVED_RUN = 25


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where each layer's pre-activations (n, units) sit in the flat vector of pairs."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]

    @property
    def size(self) -> int:
        return self.offsets[-1] + math.prod(self.shapes[-1]) if self.names else 0

    def decode(self, j: int) -> dict:
        """Layer, sample and unit of pair `j`."""
        for name, shape, off in zip(self.names, self.shapes, self.offsets, strict=True):
            size = math.prod(shape)
            if off <= j < off + size:
                i, u = divmod(j - off, shape[-1])
                return {"layer": name, "sample": int(i), "unit": int(u)}
        return {"layer": "?", "sample": -1, "unit": -1}


def _layout(problem: Problem) -> _Layout:
    names, shapes = [], []

    def record(name, z):
        names.append(name)
        shapes.append(tuple(z.shape))
        return z

    jax.eval_shape(lambda th: problem.model.forward(th, problem.x, record), problem.theta0)
    offsets, off = [], 0
    for shape in shapes:
        offsets.append(off)
        off += math.prod(shape)
    if len(set(names)) != len(names):
        raise ConfigError(f"the model's `forward` names a layer twice: {names}.")
    return _Layout(tuple(names), tuple(shapes), tuple(offsets))


#: Damping of the least-squares solves of the sliding systems, relative to the system's
#: largest entry: x = Jᵀ(JJᵀ + μI)⁻¹r with √μ = DAMPING·max|J|. Where kink constraints are
#: redundant (a sample dead in one layer holds the next layer's pairs on their kinks, their
#: normals multiples of the first layer's) J is singular but the system consistent, and
#: this is its minimum-norm solution; where J is well conditioned it is J⁻¹r to
#: (DAMPING·cond J)².
DAMPING = 1e-8

#: A pair is held on its kink by the sliding pairs (`slaved`) when its rate of change along
#: a random direction tangent to their kinks is below this fraction of that along the
#: direction itself (exactly zero in exact arithmetic; an independent pair gives O(1)).
SLAVED_RATIO = 1e-8


def _damped_solve(J: jax.Array, r: jax.Array, on: jax.Array | None = None) -> jax.Array:
    """The damped least-squares solution Jᵀ(JJᵀ + μI)⁻¹r (`DAMPING`; the scale of J taken
    over the rows and columns `on`, the others being identity padding)."""
    Jon = J if on is None else jnp.where(on[:, None] & on[None, :], J, 0.0)
    sc = jnp.maximum(jnp.max(jnp.abs(Jon)), jnp.finfo(J.dtype).tiny)
    mu = (DAMPING * sc) ** 2
    G = J @ J.T + mu * jnp.eye(J.shape[0], dtype=J.dtype)
    return J.T @ jnp.linalg.solve(G, r)


def _tree_rms(tree) -> jax.Array:
    leaves = [jnp.ravel(v) for v in jax.tree_util.tree_leaves(tree)]
    flat = jnp.concatenate(leaves)
    return jnp.sqrt(jnp.mean(flat * flat))


def _sq(tree) -> jax.Array:
    return sum((jnp.sum(v * v) for v in jax.tree_util.tree_leaves(tree)), jnp.zeros(()))


@dataclasses.dataclass(frozen=True)
class _Settings:
    rtol: float
    atol: float
    clock: str
    max_steps: int
    max_events: int
    max_sliding: int
    max_candidates: int
    kink_tol: float
    storm_window: int
    storm_span: float
    observables: Callable
    n_save: int
    n_psave: int
    error_norm: str = "rms"


def _build(problem: Problem, settings: _Settings, layout: _Layout):  # noqa: C901
    """The compiled loop for this problem's structure (closure over static settings)."""
    pl = problem.model.activation_kinks
    assert pl is not None  # checked by simulate_nonsmooth
    c_np, vc_np, a_np, s_np = pl.tables()
    n_kinks = len(c_np)
    M, C = settings.max_sliding, settings.max_candidates
    P = layout.size
    dtype = problem.dtype
    c_tab = jnp.asarray(c_np, dtype)
    vc_tab = jnp.asarray(vc_np, dtype)
    a_tab = jnp.asarray(a_np, dtype)
    s_tab = jnp.asarray(s_np, dtype)
    # the piece edges: piece p spans (lo[p], hi[p])
    lo_tab = jnp.concatenate([jnp.array([-jnp.inf], dtype), c_tab])
    hi_tab = jnp.concatenate([c_tab, jnp.array([jnp.inf], dtype)])
    # layer id of every pair (for per-layer scales)
    layer_of = np.concatenate(
        [np.full(math.prod(s), i) for i, s in enumerate(layout.shapes)]
    ).astype(np.int32)
    layer_of_j = jnp.asarray(layer_of)
    n_layers = len(layout.names)
    tiny = jnp.finfo(dtype).tiny
    eps = jnp.finfo(dtype).eps

    # --- the network under a pattern: σ(z_j) = A_j + S_j z_j for every pair -------------

    def forward(theta, A, S):
        zs = []

        def act(name, z):
            i = layout.names.index(name)
            off, shape = layout.offsets[i], layout.shapes[i]
            size = math.prod(shape)
            zs.append(z.reshape(-1))
            return A[off : off + size].reshape(shape) + S[off : off + size].reshape(shape) * z

        out = problem.model.forward(theta, problem.x, act)
        return out, jnp.concatenate(zs)

    def loss_pat(theta, A, S):
        return problem.loss_fn(forward(theta, A, S)[0], problem.y)

    def preacts(theta, A, S):
        return forward(theta, A, S)[1]

    def affine(pat, lam):
        piece, _, sl_idx, sl_kink, sl_on = pat[:5]
        A, S = a_tab[piece], s_tab[piece]
        idx = jnp.where(sl_on, sl_idx, P)  # out of range: dropped
        S = S.at[idx].set(lam, mode="drop")
        A = A.at[idx].set(vc_tab[sl_kink] - lam * c_tab[sl_kink], mode="drop")
        return A, S

    def box(kink):
        """λ interval of a kink: (smaller, larger) of its two neighbouring slopes."""
        sl, sr = s_tab[kink], s_tab[kink + 1]
        return jnp.minimum(sl, sr), jnp.maximum(sl, sr)

    def zdot_z(theta, A, S):
        """(ż of every pair along the field, ∇L, z) under the affine maps (A, S)."""
        g = jax.grad(loss_pat)(theta, A, S)
        f = jax.tree_util.tree_map(jnp.negative, g)
        z, zd = jax.jvp(lambda th: preacts(th, A, S), (theta,), (f,))
        return zd, g, z

    def zdot_all(theta, A, S):
        zd, g, _ = zdot_z(theta, A, S)
        return zd, g

    def slaved(theta, pat, lam):
        """Pairs that are no switching surface of their own under the pattern `pat`
        (sliding slopes `lam`): their pre-activation depends on θ only through other
        sliding pairs' z (its normal lies in the span of theirs; zero included), so while
        those slide it stays where it is. This is what a sample dead in one layer does to
        the next: with every input of a unit zero (units on a zero piece, or ReLU units
        held on their kink), z = c with a normal that is zero or a combination of the held
        units' normals. Such pairs neither cross nor slide until the pattern upstream
        changes (an event, where this is recomputed); they would otherwise make the
        sliding systems singular, and their z, ≈ c up to integration error, would trigger
        events without end. Returns ((P,) non-sliding pairs held, (M,) sliding slots held
        by sliding pairs of earlier layers). Sliding normals: Gram–Schmidt in layer order
        (a slot whose normal the earlier ones span, to `SLAVED_RATIO`, is held); the other
        pairs: the directional derivative of z along a fixed random direction projected
        onto the independent sliding pairs' tangent space vanishes against that along the
        direction itself (exactly zero for a zero normal: structural zeros propagate)."""
        on, idx = pat[4], pat[2]
        A, S = affine(pat, lam)
        flat, unravel = ravel_pytree(theta)
        v = jax.random.normal(jax.random.PRNGKey(20261201), flat.shape, dtype)

        def z_of(vf):
            return preacts(unravel(vf), A, S)

        dz = jax.jvp(z_of, (flat,), (v,))[1]

        def with_sliding(_):
            i = jnp.where(on, idx, 0)
            Jz = jnp.where(on[:, None], jax.jacrev(lambda vf: z_of(vf)[i])(flat), 0.0)
            order = jnp.argsort(jnp.where(on, layer_of_j[i], n_layers))  # upstream first

            def gs(k, c):
                Q, dep = c
                j = order[k]
                n = Jz[j]
                r = n - Q.T @ (Q @ n)
                r = r - Q.T @ (Q @ r)
                nr = jnp.sqrt(jnp.sum(r * r))
                indep = on[j] & (nr > SLAVED_RATIO * jnp.sqrt(jnp.sum(n * n)))
                Q = Q.at[j].set(jnp.where(indep, r / jnp.maximum(nr, tiny), 0.0))
                return Q, dep.at[j].set(on[j] & ~indep)

            Q, dep = jax.lax.fori_loop(0, M, gs, (jnp.zeros_like(Jz), jnp.zeros((M,), bool)))
            return jax.jvp(z_of, (flat,), (v - Q.T @ (Q @ v),))[1], dep

        dz_t, dep = jax.lax.cond(
            jnp.any(on), with_sliding, lambda _: (dz, jnp.zeros((M,), bool)), None
        )
        sliding = jnp.zeros((P,), bool).at[jnp.where(on, idx, P)].set(True, mode="drop")
        return (~sliding) & (jnp.abs(dz_t) <= SLAVED_RATIO * jnp.abs(dz)), dep

    def zdot_sliding(theta, pat, lam):
        """ż + κ(z − c) of the sliding pairs (0 in empty slots) with their slopes set to λ:
        the equivalent control makes it 0, so a pair that drifted off its kink by
        integration error returns at rate κ (`pat[7]`, SLIDING_RETURN per unit of the
        clock) instead of drifting further."""
        _, _, idx, kink, on = pat[:5]
        A, S = affine(pat, lam)
        zd, _, z = zdot_z(theta, A, S)
        i = jnp.where(on, idx, 0)
        return jnp.where(on, zd[i] + pat[7] * (z[i] - c_tab[kink]), 0.0)

    def sliding_jacobian(theta, pat, warm):
        """(λ₀, J): the equivalent control at θ by Newton's method with a fresh Jacobian
        (three steps from `warm` where finite — the previous step's λ, or the decision's:
        ż can have several roots in deep nets, and the flow follows one — else from the
        middle of the boxes), and ∂ż/∂λ there (identity in empty slots). Refreshed at every
        event and accepted step, then held fixed within a step:
        the field's λ is two Newton steps from λ₀ with J (smooth in θ, two gradients per
        evaluation instead of M)."""
        on = pat[4]
        eye = jnp.eye(M, dtype=dtype)

        def jac_at(lam):
            J = jax.jacfwd(lambda lm: zdot_sliding(theta, pat, lm))(lam)
            return jnp.where(on[:, None] & on[None, :], J, eye)

        def solve(_):
            lam = jnp.where(jnp.isfinite(warm), warm, lam_mid(pat))
            for _ in range(3):
                lam = lam - _damped_solve(jac_at(lam), zdot_sliding(theta, pat, lam), on)
            lam = jnp.where(on, lam, 0.0)
            return lam, jac_at(lam)

        return jax.lax.cond(jnp.any(on), solve, lambda _: (jnp.zeros((M,), dtype), eye), None)

    def project(theta, pat):
        """θ moved onto the sliding pairs' kinks (z_S = c) by one Gauss–Newton step of
        least norm, Δθ = −J_zᵀ(J_z J_zᵀ)⁻¹(z_S − c): integration error would otherwise let
        them drift off (by ~100·rtol per unit of the clock). Exact where z is linear in θ
        (first layer); a no-op when nothing slides."""
        on, idx, kink = pat[4], pat[2], pat[3]
        flat, unravel = ravel_pytree(theta)

        def z_s(v):
            A, S = affine(pat, pat[6])
            z = preacts(unravel(v), A, S)
            return jnp.where(on, z[jnp.where(on, idx, 0)] - c_tab[kink], 0.0)

        def proj(_):
            r = z_s(flat)
            Jz = jax.jacrev(z_s)(flat)  # (M, n_params)
            # damped least squares: dependent (redundant) kink normals are allowed
            return unravel(flat - _damped_solve(jnp.where(on[:, None], Jz, 0.0), r))

        return jax.lax.cond(jnp.any(on), proj, lambda _: theta, None)

    def with_jacobian(theta, pat, y, warm):
        """The pattern with the sliding pairs' λ₀, Jacobian and return rate at state y
        (Newton for λ₀ from `warm` where finite)."""
        kappa = SLIDING_RETURN / jnp.maximum(rate(y, theta, pat), tiny)
        pat = (*pat[:5], jnp.eye(M, dtype=dtype), jnp.zeros((M,), dtype), kappa)
        lam0, J = sliding_jacobian(theta, pat, warm)
        return (*pat[:5], J, lam0, kappa)

    def equivalent_control(theta, pat):
        """λ (M,) with ż = 0 at the sliding pairs: two Newton steps on ż(λ) from the step's
        λ₀ with its Jacobian (exact in one where ż is affine in λ, as for one hidden
        layer; quadratically close otherwise, λ moving little within a step)."""
        lam = pat[6]
        for _ in range(2):
            lam = lam - _damped_solve(pat[5], zdot_sliding(theta, pat, lam), pat[4])
        return jnp.where(pat[4], lam, 0.0)

    def lam_mid(pat):
        kink, on = pat[3], pat[4]
        lo, hi = box(kink)
        return jnp.where(on, 0.5 * (lo + hi), 0.0)

    def field_parts(theta, pat):
        """(∇L under the pattern, λ of the sliding pairs)."""
        on = pat[4]

        def with_sliding(_):
            lam = equivalent_control(theta, pat)
            A, S = affine(pat, lam)
            return jax.grad(loss_pat)(theta, A, S), lam

        def without(_):
            A, S = affine(pat, jnp.zeros((M,), dtype))
            return jax.grad(loss_pat)(theta, A, S), jnp.zeros((M,), dtype)

        return jax.lax.cond(jnp.any(on), with_sliding, without, None)

    def rate(y, theta, pat):
        """dt/ds of the clock."""
        if settings.clock == "physical":
            return jnp.ones((), dtype)
        if settings.clock == "log":
            return 1.0 + y[2]
        A, S = affine(pat, lam_mid(pat))  # the loss does not depend on λ (z = c there)
        return 1.0 / loss_pat(theta, A, S)

    def vector_field(s, y, pat):
        theta = y[0]
        g, _ = field_parts(theta, pat)
        r = rate(y, theta, pat)
        return (
            jax.tree_util.tree_map(lambda v: -r * v, g),
            r * _sq(g),
            r,
        )

    term = diffrax.ODETerm(vector_field)
    solver = diffrax.Tsit5()

    # --- margins: how far every pair is from leaving its piece (or its sliding box) ------

    def layer_scales(z):
        """Per-layer RMS of the pre-activations (the unit of `kink_tol`)."""
        sums = jax.ops.segment_sum(z * z, layer_of_j, num_segments=n_layers)
        counts = jnp.asarray([math.prod(s) for s in layout.shapes], dtype)
        return jnp.sqrt(sums / counts) + tiny

    def margins(theta, pat):
        """(φ, z, per-pair margins, sliding λ-margins): φ > 0 while nothing switches."""
        piece, off, idx, kink, on = pat[:5]
        lam = jax.lax.cond(
            jnp.any(on),
            lambda _: equivalent_control(theta, pat),
            lambda _: jnp.zeros((M,), dtype),
            None,
        )
        A, S = affine(pat, lam)
        z = preacts(theta, A, S)
        m = jnp.minimum(z - lo_tab[piece], hi_tab[piece] - z) + off
        sliding = jnp.zeros((P,), bool).at[jnp.where(on, idx, P)].set(True, mode="drop")
        m = jnp.where(sliding, jnp.inf, m)
        lo, hi = box(kink)
        # a sliding pair leaves when λ passes an end of its box by more than the decision's
        # tolerance (BOX_TOL): λ re-solved at the segment start may sit on the end itself
        lm = jnp.where(on, jnp.minimum(lam - lo, hi - lam) / (hi - lo) + BOX_TOL, jnp.inf)
        phi = jnp.minimum(jnp.min(m / layer_scales(z)[layer_of_j]), jnp.min(lm, initial=jnp.inf))
        return phi, z, m, lam

    # --- one event: the Filippov decision over every pair at a kink ----------------------

    def decide(y, pat):
        theta = y[0]
        piece, off, idx, kink, on = pat[:5]
        _, z, m, lam = margins(theta, pat)
        scale_j = layer_scales(z)[layer_of_j]
        tol_j = settings.kink_tol * scale_j
        sliding = jnp.zeros((P,), bool).at[jnp.where(on, idx, P)].set(True, mode="drop")
        # pairs held on their kink by the sliding ones or constant (a sample dead upstream)
        frz, dep = slaved(theta, pat, lam)
        # non-sliding pairs at a kink: crossed (m ≤ 0) or within kink_tol of an edge
        d_lo, d_hi = z - lo_tab[piece], hi_tab[piece] - z
        near = (~sliding) & ~frz & ((m <= 0) | (jnp.minimum(d_lo, d_hi) <= tol_j))
        n_near = jnp.sum(near)
        # candidates: up to C pairs at a kink, then the sliding ones
        score = jnp.where(near, -jnp.minimum(d_lo, d_hi) / scale_j, -jnp.inf)
        _, cand = jax.lax.top_k(score, C)
        cand_on = near[cand]
        at_lo = d_lo[cand] <= d_hi[cand]  # at the piece's lower edge: the kink below
        ck = jnp.where(at_lo, piece[cand] - 1, piece[cand])  # kink index
        ck = jnp.clip(ck, 0, n_kinks - 1)
        crossed = m[cand] <= 0
        # sides: 0 = left piece (z < c), 1 = right piece, 2 = sliding
        came_right = at_lo  # a pair at its piece's lower edge sits on the kink's right side
        side0 = jnp.where(crossed, jnp.where(came_right, 0, 1), jnp.where(came_right, 1, 0))
        # the sliding pairs join as candidates (after the C near ones)
        all_idx = jnp.concatenate([cand, jnp.where(on, idx, 0)])
        # a sliding pair held by the others (or constant) leaves its slot: it keeps the
        # piece it came from
        all_on = jnp.concatenate([cand_on, on & ~dep])
        all_kink = jnp.concatenate([ck, kink])
        lo_s, hi_s = box(kink)
        leave_lo = on & (lam <= lo_s)
        leave_hi = on & (lam >= hi_s)
        s_left, s_right = s_tab[kink], s_tab[kink + 1]
        # λ past an end of its box: the pair leaves to the side whose slope that end is
        side_sl = jnp.where(
            leave_lo,
            jnp.where(s_left <= s_right, 0, 1),
            jnp.where(leave_hi, jnp.where(s_left <= s_right, 1, 0), 2),
        )
        side = jnp.concatenate([side0, side_sl]).astype(jnp.int32)
        K = C + M
        sl_l, sl_r = s_tab[all_kink], s_tab[all_kink + 1]
        blo, bhi = jnp.minimum(sl_l, sl_r), jnp.maximum(sl_l, sl_r)

        def solve(side, start, override=None):
            """λ of every candidate under `side` (sliding ones by the equivalent control,
            Newton from `start`); `override` (K,), where finite, fixes that candidate's
            slope to the value given instead of its side's."""
            slide = all_on & (side == 2)
            lam_fixed = jnp.where(side == 0, sl_l, sl_r)
            if override is not None:
                lam_fixed = jnp.where(jnp.isfinite(override), override, lam_fixed)

            def fix(A, S):
                # candidates on a side get that side's slope; the others keep the pattern
                tgt = jnp.where(all_on & (side != 2), all_idx, P)
                S = S.at[tgt].set(lam_fixed, mode="drop")
                A = A.at[tgt].set(vc_tab[all_kink] - lam_fixed * c_tab[all_kink], mode="drop")
                return A, S

            # the equivalent control over the sliding candidates (K slots, padded to M+C)
            base = (piece, off, all_idx, all_kink, slide)
            lam0 = jnp.where(slide, start, 0.0)
            lam_s = _equivalent_control_k(theta, base, all_idx, slide, lam0, fix)
            lam_all = jnp.where(slide, lam_s, lam_fixed)
            A, S = affine((piece, off, all_idx, all_kink, slide), lam_s)
            A, S = fix(A, S)
            zd, _ = zdot_all(theta, A, S)
            return lam_all, zd[all_idx]

        def _equivalent_control_k(theta, base, idx_k, on_k, lam0, fix):
            piece_b, off_b, _, kink_b, _ = base

            def zdot_s(lam):
                # with the return term κ(z − c) of the field's equivalent control, so the
                # decision and the flow agree on λ
                A, S = affine((piece_b, off_b, idx_k, kink_b, on_k), lam)
                A, S = fix(A, S)
                zd, _, z = zdot_z(theta, A, S)
                ret = pat[7] * (z[idx_k] - c_tab[kink_b])
                return jnp.where(on_k, zd[idx_k] + ret, 0.0)

            lam_k = lam0
            eye = jnp.eye(K, dtype=dtype)

            def newton(lam_k):
                r = zdot_s(lam_k)
                J = jax.jacfwd(zdot_s)(lam_k)
                J = jnp.where(on_k[:, None] & on_k[None, :], J, eye)
                return lam_k - _damped_solve(J, r, on_k)

            lam_k = jax.lax.cond(jnp.any(on_k), lambda v: newton(newton(v)), lambda v: v, lam_k)
            return jnp.where(on_k, lam_k, 0.0)

        def violation(side, start):
            lam_all, zd = solve(side, start)
            zs = jnp.max(jnp.abs(zd)) + tiny
            ztol = 1e-10 * zs
            btol = 0.5 * BOX_TOL * (bhi - blo)
            v_left = jnp.where(side == 0, zd - ztol, -jnp.inf)  # left needs ż ≤ 0
            v_right = jnp.where(side == 1, -zd - ztol, -jnp.inf)  # right needs ż ≥ 0
            v_box = jnp.where(side == 2, jnp.maximum(blo - lam_all, lam_all - bhi) - btol, -jnp.inf)
            v = jnp.where(all_on, jnp.maximum(jnp.maximum(v_left / zs, v_right / zs), v_box), -1)
            return v, lam_all

        def fix_one(carry):
            side, start, it, _ = carry
            v, lam_all = violation(side, start)
            worst = jnp.argmax(v)
            bad = v[worst] > 0
            # first guess: a side whose field points back into the kink → sliding; a
            # sliding λ past an end → the side whose slope that end is
            guess = jnp.where(
                side[worst] == 2,
                jnp.where(
                    lam_all[worst] < blo[worst],
                    jnp.where(sl_l[worst] <= sl_r[worst], 0, 1),
                    jnp.where(sl_l[worst] <= sl_r[worst], 1, 0),
                ),
                2,
            )
            # the guess is kept if the worst pair's own Filippov condition (the others held
            # as they are) agrees with it; otherwise that condition decides: the left field
            # pointing away (ż ≤ 0) → left, else the right one pointing away → right (a
            # crossing), else both point in → sliding. Without this a pair whose sliding λ
            # leaves its box at the end it came from, while its field there points back in,
            # cycles between that side and sliding (seen in deep nets, where ∂ż/∂λ of one
            # pair, the others re-solved, can have either sign) instead of crossing.
            guess = guess.astype(side.dtype)
            new, start = jax.lax.cond(
                bad,
                lambda _: own_condition(side, start, worst, guess),
                lambda _: (guess, start),
                None,
            )
            side = jnp.where(bad, side.at[worst].set(new), side)
            return side, start, it + 1, bad

        def own_condition(side, start, j, guess):
            _, zd_l = solve(side.at[j].set(0), start)
            _, zd_r = solve(side.at[j].set(1), start)
            zs = jnp.maximum(jnp.max(jnp.abs(zd_l)), jnp.max(jnp.abs(zd_r))) + tiny
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
                lambda st: bracketed_start(side.at[j].set(2), st, j, zd_l[j], zd_r[j]),
                lambda st: st,
                start,
            )
            return new, start

        def bracketed_start(side, start, j, g_l, g_r):
            """Where pair j slides (its left field points in, ż_L > 0, and its right one
            too, ż_R < 0) but Newton from `start` puts its λ outside the box, ż_j(λ) (the
            other sliding pairs re-solved) has another root inside it: in deep nets ż is
            multilinear in the slopes of pairs on one sample in different layers, so a
            tracked root can leave the box while the Filippov condition still holds. Find
            the root in the box by bisection between the two slopes and start Newton
            there."""
            lam_in, _ = solve(side, start)
            inside = (lam_in[j] >= blo[j] - BOX_TOL * (bhi[j] - blo[j])) & (
                lam_in[j] <= bhi[j] + BOX_TOL * (bhi[j] - blo[j])
            )

            def bisect(st):
                nan = jnp.full((K,), jnp.nan, dtype)

                def g(u):
                    lam_j = sl_l[j] + u * (sl_r[j] - sl_l[j])
                    return solve(side.at[j].set(0), st, nan.at[j].set(lam_j))[1][j]

                def body(_, c):
                    a, b = c
                    mid = 0.5 * (a + b)
                    pos = g(mid) > 0  # g(0) = ż_L > 0, g(1) = ż_R < 0
                    return jnp.where(pos, mid, a), jnp.where(pos, b, mid)

                a, b = jax.lax.fori_loop(0, 40, body, (jnp.zeros((), dtype), jnp.ones((), dtype)))
                u = 0.5 * (a + b)
                return st.at[j].set(sl_l[j] + u * (sl_r[j] - sl_l[j]))

            del g_l, g_r
            return jax.lax.cond(inside, lambda st: st, bisect, start)

        # Newton starts: the current λ of pairs that slide now, the box middles otherwise
        start0 = jnp.concatenate([0.5 * (blo[:C] + bhi[:C]), jnp.clip(lam, lo_s, hi_s)])
        start0 = jnp.where(all_on, start0, 0.0)
        side, start, iters, still_bad = jax.lax.while_loop(
            lambda c: c[3] & (c[2] < 2 * K + 2),
            fix_one,
            (side, start0, jnp.int32(0), jnp.bool_(True)),
        )

        def min_norm_sides(_):
            """The minimum-norm element of the Clarke subdifferential over the candidates:
            min ‖∇L(λ)‖² on the box (∇L linearized in λ at the box middles; exact for one
            hidden layer), by coordinate descent; λ at an end → that side, inside → sliding.
            Used when the Filippov active-set iteration does not settle."""
            lam_c = jnp.where(all_on, 0.5 * (blo + bhi), 0.0)

            def grad_of(lam):
                A, S = affine((piece, off, all_idx, all_kink, all_on), lam)
                return ravel_pytree(jax.grad(loss_pat)(theta, A, S))[0]

            g0 = grad_of(lam_c)
            G = jnp.where(all_on[None, :], jax.jacfwd(grad_of)(lam_c), 0.0)
            Q = G.T @ G
            c = G.T @ (g0 - G @ lam_c)
            qd = jnp.maximum(jnp.diag(Q), tiny)

            def sweep(_, lam):
                def coord(i, lam):
                    li = jnp.clip(lam[i] - (Q[i] @ lam + c[i]) / qd[i], blo[i], bhi[i])
                    return lam.at[i].set(jnp.where(all_on[i], li, lam[i]))

                return jax.lax.fori_loop(0, K, coord, lam)

            lam = jax.lax.fori_loop(0, 100, sweep, lam_c)
            tol = BOX_TOL * (bhi - blo)
            lo_side = jnp.where(sl_l <= sl_r, 0, 1)
            new = jnp.where(lam <= blo + tol, lo_side, jnp.where(lam >= bhi - tol, 1 - lo_side, 2))
            return new.astype(jnp.int32)

        def mcp(_):
            """The Filippov decision of every candidate at once, as the box-constrained
            complementarity problem it is: λ ∈ [blo, bhi] per pair with, at the end whose
            slope is the left piece's, ż ≤ 0 (the pair moves into that piece), at the right
            piece's end ż ≥ 0, and ż = 0 inside (it slides), ż taken with every candidate's
            slope set to its λ. Solved by semismooth Newton on the natural residual
            λ − Π_box(λ − F(λ)), F = ∓ż scaled, with a backtracking line search. Where the
            one-pair-at-a-time iteration above cycles (deep nets: ż multilinear in the
            slopes of one sample's pairs in several layers), this finds the interior root
            it misses. Returns (sides, λ, converged)."""
            # F ≥ 0 at the lower end of the box: ż ≤ 0 there when that end is the left
            # piece's slope (convex kink, ReLU), ż ≥ 0 when it is the right piece's
            sgn = jnp.where(sl_l <= sl_r, -1.0, 1.0).astype(dtype)

            def zdot_c(lam):
                A, S = affine((piece, off, all_idx, all_kink, all_on), lam)
                zd, _, z = zdot_z(theta, A, S)
                ret = pat[7] * (z[all_idx] - c_tab[all_kink])
                return jnp.where(all_on, zd[all_idx] + ret, 0.0)

            lam0 = jnp.where(all_on, jnp.clip(start, blo, bhi), 0.0)
            zs = jnp.maximum(
                jnp.maximum(jnp.max(jnp.abs(zdot_c(blo))), jnp.max(jnp.abs(zdot_c(bhi)))), tiny
            )
            width = jnp.where(all_on, bhi - blo, 1.0)

            def F(lam):
                return jnp.where(all_on, sgn * zdot_c(lam) / zs * width, 0.0)

            def resid(lam):
                f = F(lam)
                return jnp.where(all_on, lam - jnp.clip(lam - f, blo, bhi), 0.0), f

            eye = jnp.eye(K, dtype=dtype)

            def newton(c):
                lam, it, _ = c
                r, f = resid(lam)
                free = all_on & (lam - f > blo) & (lam - f < bhi)
                JF = jax.jacfwd(F)(lam)
                Jr = jnp.where(free[:, None], JF, eye)
                d = -_damped_solve(Jr, r)
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
                # no descent: take the full step anyway (semismooth Newton is locally
                # convergent; the residual test below decides)
                lam_n = jnp.where(found, lam_n, jnp.where(all_on, lam + d, 0.0))
                n_new = jnp.where(found, n_new, jnp.sum(resid(lam_n)[0] ** 2))
                return lam_n, it + 1, jnp.sqrt(n_new)

            lam, _, rn = jax.lax.while_loop(
                lambda c: (c[1] < 40) & (c[2] > 1e-13),
                newton,
                (lam0, jnp.int32(0), jnp.sqrt(jnp.sum(resid(lam0)[0] ** 2))),
            )
            ok = jnp.all(jnp.isfinite(lam)) & (rn <= 1e-11)
            tol = BOX_TOL * (bhi - blo)
            lo_side = jnp.where(sl_l <= sl_r, 0, 1)
            new = jnp.where(lam <= blo + tol, lo_side, jnp.where(lam >= bhi - tol, 1 - lo_side, 2))
            return new.astype(jnp.int32), lam, ok

        side_m, lam_m, mcp_ok = jax.lax.cond(
            still_bad, mcp, lambda _: (side, start, jnp.bool_(False)), None
        )
        still_bad_m = still_bad & ~mcp_ok
        side = jnp.where(still_bad & mcp_ok, side_m, side)
        start = jnp.where(still_bad & mcp_ok, jnp.where(all_on, lam_m, 0.0), start)
        side = jax.lax.cond(still_bad_m, min_norm_sides, lambda _: side, None)
        # the new pattern
        start = jnp.where(still_bad_m, jnp.where(all_on, 0.5 * (blo + bhi), 0.0), start)
        lam_all, _ = solve(side, start)
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
        # offsets: every pair starts the next segment with a positive margin, measured
        # exactly as the step's event function will (same λ solve, same Jacobian), so a
        # sliding pair's drift cannot re-trigger the event at the same time
        warm = jnp.where(sel_on, lam_all[sel], jnp.nan)
        pat2 = with_jacobian(theta, (piece2, jnp.zeros_like(off), idx2, kink2, sel_on), y, warm)
        _, z2, m2, _ = margins(theta, pat2)
        floor = 1e-12 * layer_scales(z2)[layer_of_j]
        off2 = jnp.where(m2 > floor, 0.0, floor - m2)
        # pairs held by the sliding ones (or constant) under the new pattern cannot switch
        # until the pattern upstream changes (an event, where this is recomputed)
        near2 = jnp.min(jnp.abs(z2[:, None] - c_tab[None, :]), axis=1) <= tol_j
        off2 = jnp.where(slaved(theta, pat2, pat2[6])[0] & near2, jnp.inf, off2)
        pat2 = (piece2, off2, *pat2[2:])
        # the switching residual: |z − c| of the located pair(s), relative to the scale
        resid = jnp.max(
            jnp.where(cand_on, jnp.minimum(jnp.abs(d_lo[cand]), jnp.abs(d_hi[cand])), 0.0)
            / scale_j[cand]
        )
        over = (n_near > C) | (n_slide > M)
        info = {
            "crossings": crossings.astype(jnp.int32),
            "switches": switches.astype(jnp.int32),
            "entries": jnp.sum(entered).astype(jnp.int32),
            "resid": resid,
            "over": over,
            "need": jnp.stack([n_near, n_slide]).astype(jnp.int32),
            "unresolved": still_bad_m,
            "pair": all_idx[jnp.argmax(all_on)],
        }
        return pat2, info

    # --- per-save observables ------------------------------------------------------------

    obs_fn = settings.observables

    def kink_obs(theta, pat):
        piece, off, idx, kink, on = pat[:5]
        _, z, _, _ = margins(theta, pat)
        sc = layer_scales(z)[layer_of_j]
        sliding = jnp.zeros((P,), bool).at[jnp.where(on, idx, P)].set(True, mode="drop")
        d = jnp.min(jnp.abs(z[:, None] - c_tab[None, :]), axis=1)
        on_kink = sliding | (d <= settings.kink_tol * sc)
        true_piece = jnp.searchsorted(c_tab, z, side="right")
        mismatch = (~sliding) & (true_piece != piece) & (d > settings.kink_tol * sc)
        return {
            "kink_pairs": jnp.sum(on_kink).astype(dtype),
            "sliding_pairs": jnp.sum(on).astype(dtype),
            "pattern_mismatch": jnp.sum(mismatch).astype(dtype),
        }

    def save_values(theta, energy, t, pat, counts):
        out = dict(obs_fn(problem, theta, t))
        out["loss"] = problem.loss(theta)
        out["energy"] = energy
        out.update(kink_obs(theta, pat))
        out["switches"] = counts["switches"].astype(dtype)
        out["crossings"] = counts["crossings"].astype(dtype)
        out["sliding_entries"] = counts["entries"].astype(dtype)
        out["switch_residual"] = counts["resid"]
        return out

    # --- the loop ------------------------------------------------------------------------

    def rms_err(y0, y1, yerr):
        def leaf(a, b, e):
            sc = settings.atol + settings.rtol * jnp.maximum(jnp.abs(a), jnp.abs(b))
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
        # t(s) on the log and loss clocks is a quadrature, ∫ dt/ds ds, whose local errors
        # add up: relative to t they sum to ~(steps × rtol) over a long run, and on the
        # loss clock L ∝ 1/t late, so the loss at a save time carries that relative error
        # (measured: 96 × rtol at t = 1e8 with θ at 1.2 ×). So t's error is bounded on its
        # own, whatever the norm of the parameters' (in the RMS norm it would be diluted
        # among them), and relative to the step's increment of t: the global relative error
        # of t stays ~rtol.
        sc_t = settings.atol + settings.rtol * jnp.abs(y1[2] - y0[2])
        return jnp.maximum(err, jnp.abs(yerr[2]) / sc_t)

    def root(fn, a, b, fa, fb):
        """Illinois false position on [a, b] with fn(a) > 0 ≥ fn(b): returns b's side."""

        def body(c):
            a, b, fa, fb, it, side = c
            x = (a * fb - b * fa) / (fb - fa)
            x = jnp.where((x > a) & (x < b), x, 0.5 * (a + b))
            fx = fn(x)
            pos = fx > 0
            fa_new = jnp.where(pos, fx, jnp.where(side == -1, fa * 0.5, fa))
            fb_new = jnp.where(pos, jnp.where(side == 1, fb * 0.5, fb), fx)
            a2 = jnp.where(pos, x, a)
            b2 = jnp.where(pos, b, x)
            return a2, b2, fa_new, fb_new, it + 1, jnp.where(pos, 1, -1).astype(jnp.int32)

        width0 = b - a

        def cond(c):
            a, b, _, _, it, _ = c
            return (b - a > 1e-13 * width0 + 4 * eps * jnp.abs(b)) & (it < 200)

        out = jax.lax.while_loop(cond, body, (a, b, fa, fb, jnp.int32(0), jnp.int32(0)))
        return out[1], out[4]

    def start(theta0, ts, pts_mask, t0, t1):
        """The loop's initial carry (t0 saved)."""
        y0 = (theta0, jnp.zeros((), dtype), jnp.asarray(t0, dtype))
        pat0 = initial_pattern(theta0)
        counts0 = {
            "switches": jnp.int32(0),
            "crossings": jnp.int32(0),
            "entries": jnp.int32(0),
            "resid": jnp.zeros((), dtype),
        }
        obs_shape = jax.eval_shape(lambda: save_values(theta0, y0[1], y0[2], pat0, counts0))
        buf = jax.tree_util.tree_map(
            lambda s: jnp.full((settings.n_save, *s.shape), jnp.nan, s.dtype), obs_shape
        )
        pbuf = jax.tree_util.tree_map(
            lambda v: jnp.full((settings.n_psave, *v.shape), jnp.nan, v.dtype), theta0
        )
        s0 = jnp.asarray(t0 if settings.clock == "physical" else 0.0, dtype)
        # the first step: Hairer's heuristic on the s-field
        f0 = vector_field(s0, y0, pat0)
        d0 = _tree_rms(
            jax.tree_util.tree_map(
                lambda v: v / (settings.atol + settings.rtol * jnp.abs(v)), y0[0]
            )
        )
        d1 = _tree_rms(
            jax.tree_util.tree_map(
                lambda v, f: f / (settings.atol + settings.rtol * jnp.abs(v)), y0[0], f0[0]
            )
        )
        h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
        h0 = jnp.minimum(h0, (t1 - t0) / f0[2])
        st0 = solver.init(term, s0, s0 + h0, y0, pat0)
        ring = jnp.full((settings.storm_window,), -jnp.inf, dtype)
        carry = {
            "s": s0,
            "y": y0,
            "h": h0,
            "st": st0,
            "jump": jnp.bool_(True),
            "pat": pat0,
            "counts": counts0,
            "k": jnp.int32(0),
            "kp": jnp.int32(0),
            "buf": buf,
            "pbuf": pbuf,
            "steps": jnp.int32(0),
            "rejected": jnp.int32(0),
            "events": jnp.int32(0),
            "root_evals": jnp.int32(0),
            "ring": ring,
            "code": jnp.int32(0),
            "pair": jnp.int32(-1),
            "unresolved": jnp.int32(0),
            "unresolved_run": jnp.int32(0),
            "need": jnp.zeros((2,), jnp.int32),
        }
        # t0 is saved before the loop
        return do_saves(carry, lambda tau: carry["y"], jnp.zeros((), dtype), ts, pts_mask)

    def loop(carry, ts, pts_mask, t1):
        """Steps from `carry` until every save time is written or the run stops."""

        def cond(c):
            return (c["k"] < settings.n_save) & (c["code"] == 0)

        def body(c):
            return step(c, ts, pts_mask, t1)

        return jax.lax.while_loop(cond, body, carry)

    def run(theta0, ts, pts_mask, t0, t1):
        return loop(start(theta0, ts, pts_mask, t0, t1), ts, pts_mask, t1)

    def initial_pattern(theta0):
        piece = jnp.zeros((P,), jnp.int32)
        A, S = a_tab[piece], s_tab[piece]
        # preactivations of layer l depend on the pieces of layers < l: fix them layer by layer
        for _ in range(len(layout.names)):
            z = preacts(theta0, A, S)
            piece = jnp.searchsorted(c_tab, z, side="right").astype(jnp.int32)
            A, S = a_tab[piece], s_tab[piece]
        pat = (
            piece,
            jnp.zeros((P,), dtype),
            jnp.zeros((M,), jnp.int32),
            jnp.zeros((M,), jnp.int32),
            jnp.zeros((M,), bool),
            jnp.eye(M, dtype=dtype),
            jnp.zeros((M,), dtype),
            jnp.zeros((), dtype),
        )
        return pat

    def do_saves(c, interp, tau_end, ts, pts_mask):
        """Save at every save time in (t(start), t(start + tau_end)] (and t0 at the start)."""
        y_start = c["y"]

        def t_at(tau):
            return interp(tau)[2]

        def cond(cc):
            k = cc["k"]
            tk = ts[jnp.minimum(k, settings.n_save - 1)]
            return (k < settings.n_save) & (tk <= t_at(tau_end))

        def body(cc):
            k = cc["k"]
            tk = ts[k]
            fa = tk - t_at(jnp.zeros((), dtype))
            fb = tk - t_at(tau_end)
            tau, _ = jax.lax.cond(
                fa <= 0,
                lambda _: (jnp.zeros((), dtype), jnp.int32(0)),
                lambda _: root(lambda x: tk - t_at(x), jnp.zeros((), dtype), tau_end, fa, fb),
                None,
            )
            y = interp(tau)
            # the dense output between steps drifts off the sliding kinks by ~rtol: saved
            # states are projected onto them like the steps' ends
            y = (project(y[0], cc["pat"]), *y[1:])
            vals = save_values(y[0], y[1], tk, cc["pat"], cc["counts"])
            buf = jax.tree_util.tree_map(lambda b, v: b.at[k].set(v), cc["buf"], vals)
            kp = cc["kp"]
            pbuf = jax.lax.cond(
                pts_mask[k],
                lambda pb: jax.tree_util.tree_map(lambda b, v: b.at[kp].set(v), pb, y[0]),
                lambda pb: pb,
                cc["pbuf"],
            )
            return {
                **cc,
                "buf": buf,
                "pbuf": pbuf,
                "k": k + 1,
                "kp": kp + pts_mask[k].astype(jnp.int32),
            }

        del y_start
        return jax.lax.while_loop(cond, body, c)

    def step(c, ts, pts_mask, t1):
        s, y, h, pat = c["s"], c["y"], c["h"], c["pat"]
        # don't step far past t1 (t grows at least as fast as its rate now, for every clock)
        r_now = jnp.maximum(rate(y, y[0], pat), tiny)
        h = jnp.minimum(h, jnp.maximum((t1 - y[2]) / r_now, 1e-300) * 1.0001)
        y1, yerr, dense, st1, _ = solver.step(term, s, s + h, y, pat, c["st"], c["jump"])
        err = rms_err(y, y1, yerr)
        finite = jnp.isfinite(err) & jnp.all(
            jnp.asarray([jnp.all(jnp.isfinite(v)) for v in jax.tree_util.tree_leaves(y1)])
        )
        accept = finite & (err <= 1.0)
        factor = jnp.where(
            finite, jnp.clip(0.9 * jnp.maximum(err, 1e-10) ** (-1.0 / 5.0), 0.2, 5.0), 0.25
        )
        steps = c["steps"] + 1
        code = jnp.where(steps >= settings.max_steps, 1, 0)
        code = jnp.where(h < 1e-14 * jnp.maximum(jnp.abs(s), 1.0), 2, code)

        def rejected(_):
            return {
                **c,
                "h": h * factor,
                "steps": steps,
                "rejected": c["rejected"] + 1,
                "code": jnp.where(finite | (h > 1e-300), code, 3).astype(jnp.int32),
            }

        def accepted(_):
            interp_obj = solver.interpolation_cls(t0=s, t1=s + h, **dense)

            def interp(tau):
                return interp_obj.evaluate(s + tau)

            def phi(tau):
                return margins(interp(tau)[0], pat)[0]

            taus = h * jnp.asarray([0.25, 0.5, 0.75, 1.0], dtype)
            phis = jax.vmap(phi)(taus)
            hit = phis <= 0
            any_hit = jnp.any(hit)
            first = jnp.argmax(hit)
            a = jnp.where(first > 0, taus[jnp.maximum(first - 1, 0)], 0.0)
            fa = jnp.where(first > 0, phis[jnp.maximum(first - 1, 0)], phi(jnp.zeros((), dtype)))
            b, fb = taus[first], phis[first]

            def located(_):
                return root(phi, a, b, jnp.maximum(fa, tiny), fb)

            tau_e, n_root = jax.lax.cond(
                any_hit & (fa > 0), located, lambda _: (h, jnp.int32(0)), None
            )
            # an event at the very start (φ ≤ 0 already): handled as an event at τ = 0
            tau_e = jnp.where(any_hit & (fa <= 0), 0.0, tau_e)
            tau_end = jnp.where(any_hit, tau_e, h)
            cc = do_saves(c, interp, tau_end, ts, pts_mask)

            def with_event(cc):
                y_e = interp(tau_e)
                # onto the sliding kinks first, as after every step: off them by δz, the
                # equivalent control carries the return term κ·δz, which shifts λ by
                # κ·δz/(∂ż/∂λ) — at a sliding pair's exit (λ at an end of its box, ż of the
                # side it leaves to ≈ 0) enough to contradict the side test and chatter
                y_e = (project(y_e[0], pat), *y_e[1:])
                pat2, info = decide(y_e, pat)
                counts = {
                    "switches": cc["counts"]["switches"] + info["switches"],
                    "crossings": cc["counts"]["crossings"] + info["crossings"],
                    "entries": cc["counts"]["entries"] + info["entries"],
                    "resid": jnp.maximum(cc["counts"]["resid"], info["resid"]),
                }
                ring = jnp.roll(cc["ring"], -1).at[-1].set(y_e[2])
                span = ring[-1] - ring[0]
                storm = span <= settings.storm_span * jnp.maximum(1.0, jnp.abs(y_e[2]))
                events = cc["events"] + 1
                unres_run = jnp.where(info["unresolved"], cc["unresolved_run"] + 1, 0)
                stuck = unres_run >= UNRESOLVED_RUN
                code2 = jnp.where(info["over"], 5, jnp.where(storm, 4, jnp.where(stuck, 6, code)))
                code2 = jnp.where(events >= settings.max_events, 1, code2)
                decided = {
                    "pat": pat2,
                    "counts": counts,
                    "events": events,
                    "ring": ring,
                    "unresolved_run": unres_run.astype(jnp.int32),
                    "unresolved": cc["unresolved"] + info["unresolved"].astype(jnp.int32),
                }
                # more pairs at a kink than slots: the run stops at the event *before* its
                # decision (pattern and counts as they were), so that a loop with more
                # slots continues from this state and decides the event in full
                before = {name: cc[name] for name in decided}
                kept = jax.tree_util.tree_map(
                    lambda a, b: jnp.where(info["over"], a, b), before, decided
                )
                return {
                    **cc,
                    **kept,
                    "s": s + tau_e,
                    "y": y_e,
                    "h": jnp.maximum(h * factor, 1e-300),
                    "jump": jnp.bool_(True),
                    "code": code2.astype(jnp.int32),
                    "pair": jnp.where(
                        storm | stuck | info["over"], info["pair"], cc["pair"]
                    ).astype(jnp.int32),
                    "need": jnp.where(info["over"], info["need"], 0).astype(jnp.int32),
                }

            def no_event(cc):
                y_new = (project(y1[0], pat), *y1[1:])
                return {
                    **cc,
                    "s": s + h,
                    "y": y_new,
                    "h": h * factor,
                    "st": st1,
                    # after a projection the step's last stage is no longer f(y): recompute
                    "jump": jnp.any(pat[4]),
                    "pat": with_jacobian(y_new[0], pat, y_new, pat[6]),
                    "unresolved_run": jnp.int32(0),
                    "code": code.astype(jnp.int32),
                }

            cc = {**cc, "steps": steps, "root_evals": cc["root_evals"] + n_root}
            return jax.lax.cond(any_hit, with_event, no_event, cc)

        return jax.lax.cond(accept, accepted, rejected, None)

    return run, loop


def _no_observables(problem, theta, t):
    return {}


def _run(dynamic, ts, pts_mask, t0, t1, *, static, settings, layout):
    """The loop for a (traced) problem: closures built per trace, its arrays as arguments."""
    problem = eqx.combine(dynamic, static)
    return _build(problem, settings, layout)[0](problem.theta0, ts, pts_mask, t0, t1)


def _resume(dynamic, carry, ts, pts_mask, t1, *, static, settings, layout):
    """The loop continued from `carry` (a stopped run's final carry, its slots padded to
    `settings`' sizes by `_grow_slots`)."""
    problem = eqx.combine(dynamic, static)
    carry = {**carry, "code": jnp.int32(0), "pair": jnp.int32(-1)}
    return _build(problem, settings, layout)[1](carry, ts, pts_mask, t1)


def _grow_slots(carry: dict, m_new: int) -> dict:
    """The carry with its M sliding slots padded to `m_new` with empty ones (index 0,
    kink 0, not on, identity Jacobian block, λ 0); the occupied slots are kept, in order.
    Candidate slots live only inside each event's decision: nothing to pad."""
    piece, off, idx, kink, on, J, lam0, kappa = carry["pat"]
    m = idx.shape[0]
    extra = m_new - m
    eye = jnp.eye(m_new, dtype=J.dtype)
    pat = (
        piece,
        off,
        jnp.pad(idx, (0, extra)),
        jnp.pad(kink, (0, extra)),
        jnp.pad(on, (0, extra)),
        eye.at[:m, :m].set(J),
        jnp.pad(lam0, (0, extra)),
        kappa,
    )
    return {**carry, "pat": pat}


def simulate_nonsmooth(
    problem: Problem,
    *,
    t1: float,
    t0: float = 0.0,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    ts=None,
    n_save: int = 201,
    save_params: str = "ends",
    observables=None,
    clock: str = "physical",
    max_steps: int = 1_000_000,
    max_events: int = 1_000_000,
    max_sliding: int = 128,
    max_candidates: int = 128,
    slots: int = 16,
    kink_tol: float = 1e-9,
    storm_window: int = 1000,
    storm_span: float = 1e-9,
    error_norm: str = "rms",
    throw: bool = True,
) -> Trajectory:
    """The exact gradient flow of a network whose activation has kinks (see the module).

    **Arguments** (as `flows.simulate`, plus):
    - `clock`: 'physical', 'log' (dt/ds = 1 + t) or 'loss' (dt/ds = 1/L), for late-phase
      runs to t ~ 1e8; t is a state, save times are located on the dense output. On the
      log and loss clocks t's local error is bounded on its own, relative to the step's
      increment of t (its errors add up; L ∝ 1/t late makes the loss as accurate as t).
    - `max_events`: budget of located switching events.
    - `max_sliding`: most pairs sliding at once (the equivalent control is an M×M Newton
      solve); `max_candidates`: most non-sliding pairs at a kink at one event. More stops
      the run (with `throw`, a `SolverError` naming the bound).
    - `slots`: the pair slots the loop is compiled with at first (sliding and candidate
      slots alike, each at most its bound above). Every slot costs at every step and event
      whether used or not (static shapes), so the run starts small; an event that needs
      more slots stops the loop *before its decision*, and the run continues from that
      state with twice the slots of the kind that ran out, sliding or candidate (one more
      compilation; `stats.extra["slot_growth"]` records when and to what), up to the
      bounds.
    - `kink_tol`: a pair is "on the kink" when |z − c| ≤ kink_tol × (RMS of its layer's z).
    - `storm_window`, `storm_span`: an event storm — `storm_window` switching events
      within a time span ≤ `storm_span`·max(1, t) (chattering that sliding should have
      caught) — stops the run with the time reached and the pair involved.
    - `error_norm`: the norm of the scaled local error the step size controls, as in
      `flows.simulate`: 'rms' (default) or 'max' (its largest component; on deep nets from
      small init the error sits in few parameters, see the README).

    The model must declare its kinks: `model.activation_kinks` (a `flows.PiecewiseLinear`)
    and `model.forward(params, x, act)` with the activation as an argument (the leaky-ReLU
    net and `DeepFCN` do). Models without them get a `ConfigError` pointing to the
    smoothed activation (`smoothing=ε`) and `flows.simulate`.

    **Returns:** a `Trajectory` with the observables of `KINK_OBSERVABLES` besides the
    usual ones, and `stats.extra`: `events`, `crossings`, `switches`, `sliding_entries`,
    `root_evals`, `max_switch_residual`, `max_pattern_mismatch`, `unresolved_events` (events
    decided by the minimum-norm fallback).
    """
    from ._simulate import (
        check_common,
        check_max_steps,
        check_n_save,
        check_observables,
        check_problem,
        param_save_times,
        save_times,
    )

    problem = check_problem(problem)
    t0, t1, rtol, atol = check_common(t0, t1, rtol, atol, save_params)
    if ts is None:
        n_save = check_n_save(n_save)
    pl = problem.model.activation_kinks
    if pl is None:
        raise ConfigError(
            f"{type(problem.model).__name__} declares no kink points (`activation_kinks`) "
            "and no `forward(params, x, act)`, so its flow cannot be integrated through the "
            "kinks exactly. For a smooth or smoothed activation (e.g. `smoothing=1e-3` on "
            "the leaky-ReLU net or DeepFCN) use `flows.simulate`."
        )
    if clock not in NONSMOOTH_CLOCKS:
        raise ConfigError(f"`clock` must be one of {NONSMOOTH_CLOCKS}; got {clock!r}.")
    if clock in ("log", "loss") and t0 < 0:
        raise ConfigError(f"the {clock} clock needs t0 ≥ 0; got t0 = {t0}.")
    max_steps = check_max_steps(max_steps)
    max_events = as_int("max_events", max_events, minimum=1)
    max_sliding = as_int("max_sliding", max_sliding, minimum=1)
    max_candidates = as_int("max_candidates", max_candidates, minimum=1)
    slots = as_int("slots", slots, minimum=1)
    storm_window = as_int("storm_window", storm_window, minimum=2)
    kink_tol = as_float("kink_tol", kink_tol, positive=True)
    storm_span = as_float("storm_span", storm_span, positive=True)
    error_norm = check_error_norm(error_norm)
    if observables is not None:
        observables, _ = check_observables(problem, observables, t0)
    layout = _layout(problem)
    max_candidates = min(max_candidates, layout.size)
    max_sliding = min(max_sliding, layout.size)
    ts = save_times(t0, t1, ts, n_save)
    if ts[-1] < t1:
        ts = np.append(ts, t1)
    pts = param_save_times(ts, save_params)
    pts_mask = np.isin(ts, pts)
    settings = _Settings(
        rtol=rtol,
        atol=atol,
        clock=clock,
        max_steps=max_steps,
        max_events=max_events,
        max_sliding=min(slots, max_sliding),
        max_candidates=min(slots, max_candidates),
        kink_tol=kink_tol,
        storm_window=storm_window,
        storm_span=storm_span,
        observables=observables or _no_observables,
        n_save=len(ts),
        n_psave=int(pts_mask.sum()),
        error_norm=error_norm,
    )
    # the problem (data, θ(0)) is an argument of the compiled loop: one compilation per
    # structure (model, loss, shapes), reused across seeds and data values
    dynamic, static = eqx.partition(problem, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(dynamic)
    s_leaves, s_def = jax.tree_util.tree_flatten(static)
    structure = (treedef, s_def, tuple(s_leaves), tuple((v.shape, v.dtype) for v in leaves))
    ts_j, mask_j = jnp.asarray(ts, problem.dtype), jnp.asarray(pts_mask)
    t0_j, t1_j = jnp.asarray(t0, problem.dtype), jnp.asarray(t1, problem.dtype)

    def compiled_for(kind, fn, settings, *args):
        key = (kind, settings, structure)
        if key not in _CACHE:
            jitted = jax.jit(functools.partial(fn, static=static, settings=settings, layout=layout))
            if len(_CACHE) >= 16:
                _CACHE.pop(next(iter(_CACHE)))
            with callback_free():
                _CACHE[key] = jitted.lower(*args).compile()
        return _CACHE[key]

    start = time.perf_counter()
    args = (dynamic, ts_j, mask_j, t0_j, t1_j)
    compiled = compiled_for("run", _run, settings, *args)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    wall_s = time.perf_counter() - start
    growth = []
    # slots ran out (code 5): continue from the event with twice the slots that ran out (or
    # the power of two the event needs), unless one that ran out is at its bound
    while int(out["code"]) == 5:
        n_near, n_slide = (int(v) for v in out["need"])
        grow_c = n_near > settings.max_candidates
        grow_m = n_slide > settings.max_sliding
        if (grow_c and settings.max_candidates >= max_candidates) or (
            grow_m and settings.max_sliding >= max_sliding
        ):
            break

        def grown(now, need, bound):
            return min(max(2 * now, 1 << max(need - 1, 0).bit_length()), bound)

        settings = dataclasses.replace(
            settings,
            max_sliding=grown(settings.max_sliding, n_slide, max_sliding)
            if grow_m
            else settings.max_sliding,
            max_candidates=grown(settings.max_candidates, n_near, max_candidates)
            if grow_c
            else settings.max_candidates,
        )
        growth.append(
            {
                "t": float(out["y"][2]),
                "max_sliding": settings.max_sliding,
                "max_candidates": settings.max_candidates,
            }
        )
        carry = _grow_slots(out, settings.max_sliding)
        args = (dynamic, carry, ts_j, mask_j, t1_j)
        start = time.perf_counter()
        compiled = compiled_for("resume", _resume, settings, *args)
        compile_s += time.perf_counter() - start
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        wall_s += time.perf_counter() - start
    k = int(out["k"])
    code = int(out["code"])
    t_reached = float(out["y"][2])
    obs = {name: np.asarray(v)[:k] for name, v in out["buf"].items()}
    kp = int(out["kp"])
    params = {name: v[:kp] for name, v in flat_params(out["pbuf"]).items()}
    times = ts[:k]
    ptimes = ts[pts_mask][:kp]
    steps, rejected = int(out["steps"]), int(out["rejected"])
    pair = layout.decode(int(out["pair"])) if int(out["pair"]) >= 0 else None
    reason = {
        0: "successful",
        1: f"max_steps ({max_steps}) or max_events ({max_events}) reached",
        2: "step size collapsed (h < 1e-14·|s|)",
        3: "non-finite (NaN/Inf) state",
        4: f"event storm: {storm_window} switching events within a time span ≤ "
        f"{storm_span:g}·max(1, t) near t = {t_reached:.6g} (last pair: {pair}) — chattering "
        "that the sliding decision did not catch",
        6: f"{UNRESOLVED_RUN} events in a row near t = {t_reached:.6g} whose Filippov decision "
        f"did not settle (last pair: {pair}): several coupled kinks — in deep nets ż is "
        "multilinear in the slopes of one sample's pairs in different layers — that neither "
        "the active-set decision, the semismooth Newton solve of the complementarity "
        "problem nor the minimum-norm Clarke fallback resolves",
        5: f"more than max_candidates = {max_candidates} pairs at a kink at once, or more "
        f"than max_sliding = {max_sliding} pairs sliding, at t = {t_reached:.6g} "
        f"(pair: {pair})",
    }[code]
    result = _CODES[code]
    extra = {
        "events": int(out["events"]),
        "crossings": int(out["counts"]["crossings"]),
        "switches": int(out["counts"]["switches"]),
        "sliding_entries": int(out["counts"]["entries"]),
        "root_evals": int(out["root_evals"]),
        "max_switch_residual": float(out["counts"]["resid"]),
        "max_pattern_mismatch": float(np.max(obs["pattern_mismatch"])) if k else 0.0,
        "unresolved_events": int(out["unresolved"]),
        "pairs": layout.size,
        "slot_growth": growth,
    }
    stats = SolveStats(
        result=result,
        reason=reason,
        t_reached=t_reached,
        steps=steps,
        accepted_steps=steps - rejected,
        rejected_steps=rejected,
        vf_evals=6 * steps + int(out["events"]) + 1,
        compile_s=compile_s,
        wall_s=wall_s,
        vf_evals_counted_by="step count (6 per Tsit5 step, 1 per event)",
        extra=extra,
    )
    config = {
        "method": "gradient flow, piecewise-smooth (Tsit5 within an activation pattern, "
        "located switching, Filippov sliding)",
        "problem": problem.describe(),
        "solver": "tsit5-events",
        "solver_requested": "nonsmooth",
        "solver_class": "flows._nonsmooth (diffrax.Tsit5 steps)",
        "solver_settings": {
            "kink_tol": kink_tol,
            "max_sliding": max_sliding,
            "max_candidates": max_candidates,
            "slots": slots,
            "max_events": max_events,
            "storm_window": storm_window,
            "storm_span": storm_span,
            "activation_kinks": list(pl.kinks),
            "activation_slopes": list(pl.slopes),
        },
        "clock": clock,
        "rtol": rtol,
        "atol": atol,
        "error_norm": error_norm,
        "t0": t0,
        "t1": t1,
        "max_steps": max_steps,
        "dt0": None,
        "save_params": save_params,
        "dtype": str(problem.dtype),
        "stop": "none",
    }
    if code != 0 and throw:
        advice = {
            1: "Increase `max_steps`/`max_events`, or shorten `t1`.",
            2: "Loosen rtol, or check for a finite-time blow-up.",
            3: "Check the data and initialization for overflow.",
            4: "Raise `max_sliding`, or use a smoothed activation (`smoothing=ε`) to compare.",
            5: "Raise `max_candidates`/`max_sliding` (symmetric data puts many pairs on a "
            "kink at once).",
            6: "Use a smoothed activation (`smoothing=ε`, ε → 0) with `flows.simulate`, or "
            "`flows.gradient_descent` rerun at η/4 to check its convergence in η.",
        }[code]
        raise SolverError(
            f"non-smooth gradient flow stopped at t = {t_reached:.6g} of t1 = {t1}: {reason}. "
            + advice,
            t_reached=t_reached,
            reason=reason,
        )
    traj = assemble_trajectory(
        problem,
        times=times,
        observables=obs,
        param_times=ptimes,
        params=params,
        stats=stats,
        config=config,
        certify_rtol=rtol,
    )
    # the switching certificate: every located switch at its kink, no missed switch at
    # any save (a pair outside its pattern's piece by more than kink_tol)
    cert = dict(traj.stats["certificate"])
    resid, mismatch = extra["max_switch_residual"], extra["max_pattern_mismatch"]
    switch_ok = resid <= SWITCH_RESIDUAL_MAX and mismatch == 0
    cert.update(
        switch_residual=resid,
        switch_residual_bound=SWITCH_RESIDUAL_MAX,
        pattern_mismatch=mismatch,
        switching_ok=switch_ok,
        ok=bool(cert.get("ok", True) and switch_ok),
    )
    assert isinstance(traj.stats, SolveStats)
    traj.stats = traj.stats.replace(certificate=cert)
    return traj


_CACHE: dict = {}
