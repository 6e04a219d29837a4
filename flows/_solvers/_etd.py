"""Exponential time differencing with a deflated Hessian (`ETDRK4`) for diffrax.

A gradient flow dθ/dt = F(θ) = −∇L(θ) has the Jacobian J = −∇²L, and on the networks of
this toolkit its stiffness is a few outliers over a bulk near 0 (the multi-stage net,
m = 1000: one eigenvalue −34 … −31 for t ≥ 0.5, every other one in [−0.33, 0.25]; the
Hessians of trained classifiers have about one outlier per class). An explicit method
steps at h ≲ 3/34 there for stability alone; an exponential Rosenbrock method (`EXPRB43`)
builds a Krylov space of J at every stage. This method spends on the outliers only:

    L = Q Λ Qᵀ  (the `rank` most negative eigenpairs of J, Rayleigh–Ritz on a subspace
                 refreshed by one block power step per step: `rank` products J v, each
                 a difference of two fields — one evaluation — or a Hessian-vector
                 product, `products`),
    F(u) = L u + N(u),   N(u) = F(u) − L u,

and integrates u′ = L u + N(u) by Krogstad's fourth-order exponential Runge–Kutta method
(ETDRK4-B): the linear part exactly, N by exponential quadrature,

    a  = e^{hL/2} u + (h/2) φ₁(hL/2) N(u),
    b  = a + h φ₂(hL/2) (N(a) − N(u)),
    c  = e^{hL} u + h φ₁(hL) N(u) + 2h φ₂(hL) (N(b) − N(u)),
    u₁ = e^{hL} u + h [(φ₁ − 3φ₂ + 4φ₃) N(u) + 2(φ₂ − 2φ₃)(N(a) + N(b)) + (4φ₃ − φ₂) N(c)],

φ_k = φ_k(hL). Because L has rank k, φ_k(hL) w = w/k! + Q (φ_k(hΛ) − 1/k!) Qᵀ w: no Krylov
space, no matrix function beyond k scalars. Any L gives a consistent method (L = 0 is
classical RK4); L only decides stability: the remainder's Jacobian J − L has the bulk's
spectrum, so the step is set by accuracy where the outliers are captured. (Cox and
Matthews' stages b = e^{hL/2}u + (h/2)φ₁(hL/2)N(a), c = e^{hL/2}a + (h/2)φ₁(hL/2)(2N(b) −
N(u)), with the same weights, were measured first: Krogstad's have a 25–30 % smaller
local error in the multi-stage net's plateau and 20 % smaller global error at equal cost.)

**Error estimate.** The weights are those of the exponential Simpson rule on the nodes
0, ½, 1, with N(c) as the end value; the estimate replaces it by N(u₁) (F(u₁) is evaluated
anyway: the next step's F(u) and the dense output's end slope),

    err = 4 · h (4φ₃ − φ₂)(hL) (N(c) − N(u₁)),

O(h⁴) (c approximates u(t + h) to second order); `error_order` 4; the fourth-order
solution is propagated. The factor 4 (`_SAFETY`) is measured: in the multi-stage net's
plateau the bare estimate is only 0.5–1 × the true local error, and errors made there grow
through the saddle. Measured err/rtol (relative to max |θ|; the toolkit's PI controller,
see below): rotated Bernoulli flows with an outlier at 1e3 … 1e5 or none, rtol 1e-4 …
1e-8, 0.017 under diffrax's I-controller (flat: over-delivered, the bare estimate is ≈ 14 ×
the error on a contracting flow); the small multi-stage net (m = 30, t = 20) through
`simulate`, rtol 1e-4 … 1e-8, 0.033–0.21 for θ and 0.016–0.26 for the energy (2026-12-07,
the predictive PI controller; diffrax's PI controller 0.028–0.17 and 0.018–0.22; earlier,
stepping to its saves, 0.033–0.21 and 0.034–0.16, and 0.12–0.55 and 0.20–0.61 under the
I-controller, for 24–28 % fewer evaluations at each rtol: the same work for the same
error); the multi-stage net, θ alone, rtol 1e-3 … 3e-5: m = 1000 0.10–0.39 (diffrax's PI:
0.12–0.61), m = 5000 0.95–3.1 (1.45–4.6; ETDRK4 alone at rtol 1e-3 … 1e-6 under it
1.5–11, under the I-controller 2.7–18: **under-delivered**, more at tighter rtol: the
saddle's growth, eigenvalues up to +0.24 for t ≈ 18, outruns a per-step error test). No
constant serves both ends; tolerance transformations (as `EXPRB43`'s) need the
controller's rtol, which diffrax hands only to implicit solvers (then fixed steps would
need tolerances too). Error bars of the toolkit's runs come from companion solves, not
from rtol.

**States with quadratures (the toolkit's (θ, E), E′ = ‖∇L‖²).** Their Jacobian is not
symmetric (the E row), and E is not part of the gradient flow: `subspace_mask` keeps the
subspace on θ (a symmetric L on vectors with E components couples E into the stiff mode:
E off by 4–88 × rtol on a Bernoulli flow with an outlier at 500), and the components it
zeroes get an error estimate of their own (`_quadrature_error`): L does not act on them,
their update is RK4's quadrature along the stages, and a transient of an outlier that has
decayed within the step is invisible to the end-value estimate. With both, E is at
0.65–2.15 × rtol where it was at 2–10⁴ × (measured in `_quadrature_error`).

**Cost per step:** 4 field evaluations (F(a), F(b), F(c), F(u₁); a Tsit5 step 6) and
`rank` products J v: by default a field evaluation each, F(u + δv)
(`products='difference'`: L has to be near J's outliers, not equal to them, and a
Hessian-vector product by `jax.jvp` costs 1.6–2.1 gradients of wall on the multi-stage
net); `products='jvp'` takes `jax.jvp` of the field. A rejected step repeats them.

**Step-size control.** The toolkit drives it with a PI controller (pcoeff = 0.4, icoeff
= 0.3, `ETDRK4.controller_coefficients`) that may shrink the step after an accepted one
(`flows._solvers.control.PredictivePIDController`): its error estimate jumps where the
outlier's eigenvector turns and through the saddle, and under diffrax's I-controller
19–29 % of its attempts on the multi-stage net (m = 5000) were rejected, 0–13 % under a
PI one. diffrax's PI controller never shrinks an accepted step, so in the plateau, where
the error grows from step to step at one h, the step was held until it failed (m = 5000,
rtol 1e-4: 3 of 35 attempts rejected, 5 evaluations each); the predictive one shrinks it
ahead of the saddle (rtol 2e-4: 30 steps, none rejected) and reaches GD's error there in
171 evaluations through `simulate` instead of 193 (`benchmarks/results/krylov.md`).

**Non-stiff steps (`nonstiff='tsit5'`, the default).** A step is Tsit5's (6
evaluations, FSAL, its embedded estimate; quadrature components get `_quadrature_error`'s
bound as well) rather than ETDRK4's unless (a) h_prev |λ| ≥ 1 (`_NONSTIFF_MAX_HLAM`; h_prev
the last accepted step, λ the most negative Ritz value of this step's power step) or (b)
the flow is in a stiff transient along the subspace: λ within 10 % of the last step's
Ritz value (an eigenvalue, not a direction still turning) and ≥ 10 % of F's norm along
it (`_TRANSIENT`). Where neither holds, L buys nothing — no stability needed, no linear
motion to integrate exactly — and a fifth-order step goes further for the same error.
The power step is still taken (one product), so L is aligned when the outlier appears.

Measured: the multi-stage net's fast first stage (t ≲ 0.25, where the Ritz value grows
from ≈ 0 to −34 as the outlier forms) goes to Tsit5: at equal error 15–22 % fewer
evaluations than ETDRK4 alone (m = 1000, rtol 1e-3 … 3e-5: 144, 198, 237 against 170,
250, 305; m = 5000 in `benchmarks/results/krylov.md`; thresholds 0.5 … 1 were best, 2 lost
half the gain). Without (b), Tsit5 resolved the transients of a fixed outlier that ETDRK4
integrates exactly (the Bernoulli flow with an outlier at 10³ from z = 1: 1515 evaluations
against 1125 at rtol 1e-8, 303 against 210 at 1e-5); with it, one Tsit5 step (the first,
before a Ritz value has a predecessor) and 1132, 217. Without h_prev (the attempted h
instead), a Tsit5 step's small error proposed an h past the threshold, the ETDRK4 step
there was rejected and the smaller retry was Tsit5's again (the Brusselator at rtol 1e-8:
366 rejected steps against 49; with h_prev 129). On the three stiff problems of
`benchmarks/results/bare_contract.md` (stiff bulks, where ETDRK4 is stability-limited)
it takes at most the evaluations of ETDRK4 alone. Under `jax.vmap` the branch is a
select: a batched solve computes both steps. `nonstiff='none'`: ETDRK4 steps everywhere,
as before.

**When it helps.** Where the stiffness is a few outliers (`rank` or fewer below −3/h). A
stiff bulk (a discretised diffusion, a Hessian with many large eigenvalues) is left in
N: the step is then limited like RK4's, h ρ(J − L) ≲ 2.8, and the method is slower than
`ROCK4`/`RKC2` — it stays error-controlled (unstable steps fail their error test), it
does not become wrong.
`simulate(solver='auto')` picks it where the Hessian's second eigenvalue, after a short
gradient-descent pilot, is non-stiff over the span (`flows.auto_solver`,
`flows.outlier_spectrum`).

**Saves between steps** (`_ETDInterpolation`): on the subspace the step's own continuous
extension (exact on the stiff direction), off it the cubic Hermite of the step's ends, and
Tsit5's interpolant for a Tsit5 step; so `simulate` interpolates instead of stepping to
its save times. Measured (`benchmarks/results/dense_output_etdrk4.md`, the largest save
error over the largest step-end error of the same solve): 1.0–1.1 on a linear problem,
the offset observable and the tanh net at rtol ≥ 1e-6; 3.2 and 5.1 on the tanh net at
rtol 1e-8 and 1e-10 (its Tsit5 steps: Tsit5 alone is 2.1–3.1 there); 1.3–5 on stiff bulks
(Prothero–Robinson, heat), where the steps are held to RK4's stability (saves within 0.65–
3.6 × the tolerance scale). On the multi-stage net (m = 1000, t = 20, 201 saves, rtol
1e-3 … 1e-6) θ at every save within 1.2 × its step-end error, for 28–88 steps where
stepping to the saves took 211–263.

**Limits.** The subspace is `rank` dense vectors; positive eigenvalues of J (directions
of growth, e.g. a saddle's escape) are left in N (their Ritz values are clipped at 0).

**References:** S. Krogstad, "Generalized integrating factor methods for stiff PDEs",
J. Comput. Phys. 203 (2005) 72–88; S. M. Cox, P. C. Matthews, "Exponential time
differencing for stiff systems", J. Comput. Phys. 176 (2002) 430–455; M. Hochbruck,
A. Ostermann, "Exponential integrators", Acta Numerica 19 (2010) 209–286, §2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from .record import SolverRecord, final_state, flat_step_start

__all__ = ["ETDRK4", "ETDState", "etd_eval_counts", "flow_state_mask", "phi_functions"]

# |z| below which φ₁…φ₃ are summed as series (the closed forms lose digits to
# cancellation: (e^z − 1 − z − z²/2)/z³ at z = 0.1 keeps about 13); 16 terms reach
# rounding for |z| < 0.5.
_SERIES_BELOW = 0.5
_SERIES_TERMS = 16


# Block power steps on the starting subspace in `init` (`rank` products J v
# each). The first step's L must already hold the outliers: where a stiff mode starts far
# from its slow manifold, a misaligned L puts λ × (misalignment) of fast-decaying forcing
# into N, which no step size above 1/|λ| integrates — a rotated Bernoulli flow with an
# outlier at 1e4–1e5 and the stiff coordinate starting at 1 ended 1.1–7.9 × rtol off at
# rtol 1e-7/1e-8 from the gradient's direction alone (0.07 × with the coordinate at 1e-3).
_INIT_POWER_STEPS = 4


# The step's error estimate is reported × this. In the multi-stage net's plateau the
# estimate is 0.5–1 × the step's true local error (m = 5000 from θ(5), h = 0.25 … 2: the
# local error grows like h^4.35, pre-asymptotic, and the bulk is flat, so the estimate's
# J-weighted difference is small), and the errors made there grow through the saddle
# (eigenvalues up to +0.24 for t ≈ 18): with the estimate as it is, m = 1000 ended at
# 1.9–8.6 × rtol (relative, rtol 1e-3 … 1e-6) and m = 5000 at 7–39 ×. With 4: m = 1000
# 0.5–2.0 ×, m = 5000 2.7–18 × (under diffrax's I-controller; under its PI (0.3, 0.3)
# controller 0.11–1.7 and 1.5–11: under-delivered, see the module doc). On contracting flows
# (rotated Bernoulli) the estimate is ≈ 14 × the error, so they over-deliver (≈ 0.02 ×).
# The work-precision curve hardly moves (the factor relabels rtol).
_SAFETY = 4.0


#: `nonstiff` values: 'tsit5' (Tsit5 steps where nothing is stiff, see
#: `_NONSTIFF_MAX_HLAM`) or 'none' (ETDRK4 steps everywhere).
_NONSTIFF = ("tsit5", "none")

# A step is taken by Tsit5 (`nonstiff='tsit5'`) while h_prev |λ| is below this, h_prev
# the last accepted step and λ the most negative Ritz value of the step's power step (J's
# stiffest direction, as far as the subspace has found it); Tsit5's real stability
# interval is ≈ [−3.5, 0], and an attempt may grow h_prev by the controller's factor.
_NONSTIFF_MAX_HLAM = 1.0
# ... and while |λ − λ_prev| ≤ this × |λ| (λ_prev the last accepted step's) with F's
# component along the subspace ≥ this × ‖F‖: a transient along a settled stiff
# eigenvalue, which ETDRK4 integrates exactly and Tsit5 would have to resolve.
_TRANSIENT = 0.1


#: How the subspace's products J v are formed (`ETDRK4(products=...)`): 'difference'
#: (the default) (F(y + δv) − F(y))/δ, one field evaluation, F(y) being the step's first
#: stage; 'jvp' `jax.jvp` of the field, a Hessian-vector product (forward over reverse:
#: 1.6–2.1 gradients of wall on the multi-stage net). L only has to be near J's outliers —
#: any symmetric L gives a consistent fourth-order method (see the module doc) — so the
#: difference's O(δ) and O(ε/δ) errors (≈ 1e-8 relative in float64, ≈ 1e-4 in float32)
#: move L, not the order; and it needs no derivative of the field.
_PRODUCTS = ("difference", "jvp")


def _difference_step(y: Array) -> Array:
    """δ of a forward-difference product J v ≈ (F(y + δv) − F(y))/δ with ‖v‖ = 1: √ε (1 +
    ‖y‖), the usual balance of the truncation (O(δ)) and rounding (O(ε/δ)) errors
    (Jacobian-free Newton–Krylov's choice)."""
    eps = jnp.finfo(y.dtype).eps
    return jnp.sqrt(eps) * (1.0 + jnp.linalg.norm(y))


def phi_functions(z: Array) -> tuple[Array, Array, Array, Array]:
    """(e^z, φ₁(z), φ₂(z), φ₃(z)) elementwise, φ_k(z) = Σ_j z^j/(j + k)!: closed forms
    away from 0, series near it."""
    small = jnp.abs(z) < _SERIES_BELOW
    zs = jnp.where(small, 1.0, z)  # keeps the unused branch finite
    e = jnp.exp(zs)
    p1 = (e - 1.0) / zs
    p2 = (p1 - 1.0) / zs
    p3 = (p2 - 0.5) / zs
    zz = jnp.where(small, z, 0.0)
    series = []
    for k in (1, 2, 3):
        acc = jnp.zeros_like(zz)
        for j in range(_SERIES_TERMS - 1, -1, -1):  # Horner
            acc = acc * zz + 1.0 / math.factorial(j + k)
        series.append(acc)
    return (
        jnp.exp(z),
        jnp.where(small, series[0], p1),
        jnp.where(small, series[1], p2),
        jnp.where(small, series[2], p3),
    )


def _quadrature_error(h, n0, na, nb, n1):
    """The error estimate of a component outside the flow (`subspace_mask`'s zeros: a
    quadrature E′ = q(θ), such as the toolkit's energy), elementwise: D²/(|G| + |D|) with
    D = (h/3)(q₀ − 2q_½ + q₁) (Simpson minus the trapezoid rule) and G = h(q₁ − q₀).

    Why: L does not act on such a component, so its update is the classical RK4 quadrature
    of q along the stages, and where q holds a fast transient of an outlier (λ z)² e^{2λt}
    that has decayed within the step, the end-value estimate above sees nothing (E off by
    10²–10⁴ × rtol on a Bernoulli flow with an outlier at 500). D alone sees it but is
    O(h³) on smooth q (3–4 × the steps). D²/(|G| + |D|) is ≈ h B/12 on q = A + B e^{μt}
    with μh ≫ 1 (the error is ≈ h B/6) and O(h⁴) on smooth q (h⁴ q″²/(144 q′)), the
    order of the main estimate. Measured (rtol 1e-5 … 1e-8): E at 0.65–1.25 × rtol on the
    Bernoulli flow from z = 1e-3 and from z = 1, 0.58–2.15 on the small multi-stage net
    (2–14 without it), for 3–8 % more evaluations."""
    return _quadrature_bound((h / 3.0) * (n0 - na - nb + n1), h * (n1 - n0))


def _quadrature_bound(d, g):
    """D²/(|G| + |D|) elementwise (`_quadrature_error`): D a quadrature rule minus the
    trapezoid rule over the step, G the change of the integrand times h."""
    return d * d / (jnp.abs(g) + jnp.abs(d) + jnp.finfo(d.dtype).tiny)


def _columns(matvec, basis: Array) -> Array:
    """[matvec(v) for the columns v of `basis`], column by column: `jax.vmap` of a
    Hessian-vector product over a batch of one column was 10 × one product on the
    multi-stage net (m = 1000: 25 against 2.4 ms; XLA batches the n × m intermediates)."""
    return jnp.stack([matvec(basis[:, i]) for i in range(basis.shape[1])], axis=1)


def _orthonormal(a: Array) -> Array:
    """Orthonormal columns spanning `a`'s, each keeping its column's direction and order
    (QR with the signs of R's diagonal made positive)."""
    q, r = jnp.linalg.qr(a)
    return q * jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0)


def _tsit5_step(terms, t0, t1, y0, args, f0, dtype, outside=None):
    """One step of diffrax's Tsit5 from the FSAL value f0 (6 evaluations, F(t1, y1) the
    last): (y1, error estimate, F(t1, y1), its 7 stages h F for Tsit5's dense output),
    flat. Its estimate is O(h⁵) where ETDRK4's is
    O(h⁴); the controller's exponent (1/4) only scales its proposals, accepting is the
    same test (error ≤ 1). `outside` (flat, 1 on components outside the flow: the
    quadratures of `subspace_mask`) adds to them the bound of `_quadrature_error`, D being
    Tsit5's quadrature of the stages minus the trapezoid rule: its embedded estimate
    under-reads a quadrature of a transient (E at 4.1 × rtol on the Bernoulli flow with an
    outlier at 500 from z = 1, rtol 1e-5, under a rule that took Tsit5 steps in the
    transient; ETDRK4's steps left it at 0.2–0.4 ×)."""
    y1, y_error, dense, state, _ = diffrax.Tsit5().step(
        terms, t0, t1, y0, args, (jnp.asarray(False), f0), False
    )
    assert state is not None  # Tsit5 is first-same-as-last: its state carries F(t1, y1)

    def flat(tree):
        return ravel_pytree(tree)[0].astype(dtype)

    y_error = flat(y_error)
    k = jax.vmap(flat)(dense["k"])  # h F at the 7 stages, the last F(t1, y1)
    if outside is not None:
        b = jnp.asarray(diffrax.Tsit5.tableau.b_sol, dtype)
        d = b @ k - 0.5 * (k[0] + k[-1])
        y_error = y_error + outside * _quadrature_bound(d, k[-1] - k[0])
    return flat(y1), y_error, flat(state[1]), k


#: Stages of a Tsit5 step that its dense output reads (h F at 7 points, FSAL included).
_TSIT5_STAGES = 7


class _ETDInterpolation(diffrax.AbstractLocalInterpolation):
    """Dense output of one `ETDRK4` step, so that a solve saves between steps instead of
    stepping to its save times.

    An ETDRK4 step, on the subspace Q: the step's continuous extension (Hochbruck &
    Ostermann, SIAM J. Numer. Anal. 43 (2005) 1069–1090, §5), its formula at t₀ + ϑh with
    each weight φⱼ(hL) replaced by ϑʲ φⱼ(ϑhL) and e^{hL} by e^{ϑhL},

        u(ϑ) = e^{ϑhL} y₀ + h [b₁(ϑ) N₀ + b₂(ϑ) (N_a + N_b) + b₄(ϑ) N_c],
        b₁ = ϑφ₁ − 3ϑ²φ₂ + 4ϑ³φ₃,  b₂ = 2ϑ²φ₂ − 4ϑ³φ₃,  b₄ = −ϑ²φ₂ + 4ϑ³φ₃,

    which meets the order conditions Σ bᵢ cᵢ^{j−1}/(j−1)! = ϑʲ φⱼ(ϑhL) for j ≤ 3 at every
    ϑ, is the step's own value at ϑ = 1 and integrates the stiff direction exactly. A
    cubic Hermite there weights h F₀, which carries λ × the step-end error of a stiff
    component, and so multiplies that error by up to h|λ|/4
    (`benchmarks/results/dense_output.md`): the reason the solver stepped to its save
    times before. Off the subspace (where L = 0: nothing stiff is left if Q holds the
    outliers) the cubic Hermite of the step's ends and slopes, u = H(ϑ) + Q Qᵀ (u_exp(ϑ)
    − H(ϑ)): RK4's own continuous extension (u_exp off Q) was 3–4.5× less accurate there
    on the slow components of a Prothero–Robinson problem. A Tsit5 step
    (`nonstiff='tsit5'`): Tsit5's own interpolant (order 4).

    Fields: the step's ends `y0`, `y1` (pytrees), `k` (a Tsit5 step's 7 stages h F, flat),
    `nl` (an ETDRK4 step's N₀, N_a + N_b, N_c, flat), `q`, `lam` (L = Q diag(lam) Qᵀ),
    `tsit5` (which kind of step)."""

    t0: Any
    t1: Any
    y0: Any
    y1: Any
    k: Array
    nl: Array
    q: Array
    lam: Array
    tsit5: Array

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return jax.tree_util.tree_map(lambda a, b: a - b, self.evaluate(t1), self.evaluate(t0))
        yf, unravel = ravel_pytree(self.y0)
        dt = yf.dtype
        h = jnp.asarray(self.t1 - self.t0, dt)
        h_safe = jnp.where(h == 0, 1.0, h)
        th = jnp.asarray(t0 - self.t0, dt) / h_safe
        # the exponential step's continuous extension
        e, p1, p2, p3 = phi_functions(th * h * self.lam)
        q = self.q

        def act(coef, lin, v):  # as in `ETDRK4._etd_step`
            return lin * v + q @ ((coef - lin) * (q.T @ v))

        t2, t3 = th * th, th * th * th
        n0, nab, nc = self.nl[0], self.nl[1], self.nl[2]
        etd = act(e, 1.0, yf) + h * (
            act(th * p1 - 3.0 * t2 * p2 + 4.0 * t3 * p3, th - 1.5 * t2 + t3 * 4.0 / 6.0, n0)
            + act(2.0 * t2 * p2 - 4.0 * t3 * p3, t2 - t3 * 4.0 / 6.0, nab)
            + act(-t2 * p2 + 4.0 * t3 * p3, -0.5 * t2 + t3 * 4.0 / 6.0, nc)
        )
        # off the subspace the cubic Hermite of the step's ends and slopes (flat)
        herm = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k(
            t0=self.t0,
            t1=self.t1,
            y0=yf,
            y1=ravel_pytree(self.y1)[0].astype(dt),
            k=jnp.stack([self.k[0], self.k[-1]]),
        ).evaluate(t0)
        exp_herm = herm + q @ (q.T @ (etd - herm))
        # a Tsit5 step's own interpolant
        k = jax.vmap(unravel)(self.k)
        rk = diffrax.Tsit5.interpolation_cls(t0=self.t0, t1=self.t1, y0=self.y0, y1=self.y1, k=k)
        rk = ravel_pytree(rk.evaluate(t0))[0].astype(dt)
        return unravel(jnp.where(self.tsit5, rk, exp_herm))


class ETDState(eqx.Module):
    """State of `ETDRK4` between steps (all leaves arrays: diffrax keeps the old state
    leaf-wise when a step is rejected).

    - `f0`: F(t_n, y_n), flat (first same as last).
    - `basis`: the subspace (n × `rank`, orthonormal columns) whose Rayleigh–Ritz pairs
      make L at the next step: J's dominant eigenvectors by block power iteration.
    - `ritz`: the Ritz values of the last accepted step (unclipped, ascending).
    - `n_steps`, `vf_evals`, `jvp_evals`: accepted steps, field evaluations and
      Hessian-vector products along the accepted path (`init`'s F(y₀) and, with
      `products='difference'`, its products J v among the field evaluations).
    - `nonstiff_steps`: how many of the accepted steps were Tsit5's (`nonstiff`).
    - `h_prev`: the last accepted step's size (0 before the first), which with the step's
      Ritz values picks the method of the next (`nonstiff`).
    """

    f0: Array
    basis: Array
    ritz: Array
    n_steps: Array
    vf_evals: Array
    jvp_evals: Array
    nonstiff_steps: Array
    h_prev: Array


class ETDRK4(diffrax.AbstractAdaptiveSolver):
    r"""Fourth-order exponential time differencing (Krogstad's ETDRK4-B) whose linear part
    is the Hessian's `rank` most negative eigenpairs, for gradient flows with a few stiff
    outliers; see the module `flows._solvers._etd` for the scheme, the error estimate and
    when it helps.

    **Arguments (fields):**

    - `rank`: how many outlying eigenpairs of J = −∇²L form the linear part (default 1;
      static). Each costs one product J v per step (`products`).
    - `products`: how the products J v of the subspace are formed: 'difference'
      (default: (F(y + δv) − F(y))/δ, one field evaluation each) or 'jvp' (`jax.jvp` of
      the field, a Hessian-vector product, ≈ 2 gradients of wall); see `_PRODUCTS`.
    - `nonstiff`: 'tsit5' (default: Tsit5 steps while no direction is stiff — h_prev
      |λ_min(L)| < 1, h_prev the last accepted step — and the flow is not in a transient
      along a settled outlier; see the module doc) or 'none' (ETDRK4 steps everywhere).
    - `subspace_mask`: y ↦ y with the components that are not part of the gradient flow
      set to 0 (static; default None: every component is). For a state that carries
      quadratures of the flow — the toolkit's (θ, E) with E′ = ‖∇L‖², whose row makes J
      non-symmetric — L acts on the flow alone, and the zeroed components get their own
      error estimate (see the module doc). `make_solver('etdrk4')`, and so `simulate`,
      pass `flow_state_mask`.

    Use it in `diffrax.diffeqsolve` with a `PIDController` (its tolerances are the
    controller's, as for `diffrax.Tsit5`), or by name: `flows.simulate(...,
    solver='etdrk4')`, `--solver etdrk4`. Its counts: `flows.etd_eval_counts`. The
    toolkit's solves drive it with a PI controller (`controller_coefficients`) that may
    shrink the step after an accepted one; pass `flows.pid_controller(rtol, atol,
    solver=ETDRK4())` for the same steps in a bare `diffeqsolve`.

    Order 4, `error_order` 4 (an O(h⁴) estimate, the fourth-order solution propagated).
    """

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        _ETDInterpolation
    )
    #: (pcoeff, icoeff) of the toolkit's controller for this solver, a PI controller that
    #: may shrink the step after an accepted one (`PredictivePIDController`). Its estimate
    #: jumps where the outlier's eigenvector turns and in the saddle; under the
    #: I-controller (0, 1) it rejected 19–29 % of its attempts on the multi-stage net at
    #: m = 5000, under diffrax's PI controller (0.3, 0.3) 0–13 %, and reached GD's error
    #: there in 232 evaluations instead of 278 (ETDRK4 alone; `benchmarks/results/krylov.md`).
    #: With the shrink, (θ, E) as `simulate` integrates them, evaluations at GD's error
    #: from a log–log fit over rtol 3e-4 … 5e-5 (m = 5000): (0.3, 0.3) 182, (0.4, 0.3) 176,
    #: (0.3, 0.4) 174, (0.5, 0.3) 176, (0.4, 0.4) 174, against 192 without it; at m = 1000
    #: (rtol 3e-3 … 3e-5, at errors 1e-5 and 3e-6) 167–174 and 220–234 against 168 and
    #: 231. (0.4, 0.3) was within 3 % of the best at every point read.
    controller_coefficients: ClassVar[tuple[float, float]] = (0.4, 0.3)
    rank: int = eqx.field(static=True, default=1)
    subspace_mask: Callable[[Any], Any] | None = eqx.field(static=True, default=None)
    products: str = eqx.field(static=True, default="difference")
    nonstiff: str = eqx.field(static=True, default="tsit5")

    def _mask(self, unravel):
        """The subspace's vectors (columns, flat) with `subspace_mask` applied."""
        if self.subspace_mask is None:
            return lambda a: a
        mask = self.subspace_mask

        def one(v):
            return ravel_pytree(mask(unravel(v)))[0].astype(v.dtype)

        return jax.vmap(one, in_axes=1, out_axes=1)

    def __check_init__(self):
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 1:
            raise ValueError(f"ETDRK4 `rank` must be an integer ≥ 1; got {self.rank!r}.")
        if self.products not in _PRODUCTS:
            raise ValueError(
                f"ETDRK4 `products` must be one of {', '.join(map(repr, _PRODUCTS))} (how "
                f"J v is formed for the subspace); got {self.products!r}."
            )
        if self.nonstiff not in _NONSTIFF:
            raise ValueError(
                f"ETDRK4 `nonstiff` must be one of {', '.join(map(repr, _NONSTIFF))} (the "
                f"method of the steps where no direction is stiff); got {self.nonstiff!r}."
            )

    def _matvec(self, fvec, t, yf, fy):
        """v ↦ J v at (t, yf) (`fy` = F(t, yf)) and whether it costs a field evaluation
        (True) or a Hessian-vector product: see `products` and `_difference_step`."""
        if self.products == "jvp":
            return (lambda v: jax.jvp(lambda y: fvec(t, y), (yf,), (v,))[1]), False
        delta = _difference_step(yf)
        return (lambda v: (fvec(t, yf + delta * v) - fy) / delta), True

    def order(self, terms):
        return 4

    def error_order(self, terms):
        return 4

    def init(self, terms, t0, t1, y0, args):
        yf, unravel = ravel_pytree(y0)
        f0, _ = ravel_pytree(terms.vf(t0, y0, args))
        f0 = f0.astype(yf.dtype)
        if self.rank > yf.size:
            raise ValueError(
                f"ETDRK4 `rank` ({self.rank}) exceeds the number of parameters ({yf.size})."
            )
        # start: the gradient (the direction the flow moves, rich in the stiff
        # eigenvectors) and fixed pseudo-random directions (key 0: reproducible), then
        # `_INIT_POWER_STEPS` block power steps, so the first step's L is already aligned
        # with the outliers (see `_INIT_POWER_STEPS`)
        extra = jax.random.normal(jax.random.PRNGKey(0), (yf.size, self.rank), yf.dtype)
        start = extra.at[:, 0].set(jnp.where(jnp.any(f0 != 0), f0, extra[:, 0]))
        mask = self._mask(unravel)
        basis = _orthonormal(mask(start))

        def fvec(t, y):
            return ravel_pytree(terms.vf(t, unravel(y), args))[0].astype(yf.dtype)

        matvec, as_field = self._matvec(fvec, t0, yf, f0)
        for _ in range(_INIT_POWER_STEPS):
            w = mask(_columns(matvec, basis))
            usable = jnp.all(jnp.isfinite(w)) & jnp.all(jnp.linalg.norm(w, axis=0) > 0)
            basis = jnp.where(usable, _orthonormal(jnp.where(usable, w, basis)), basis)
        z = jnp.zeros((), jnp.int32)
        return ETDState(
            f0=f0,
            basis=basis,
            ritz=jnp.zeros((self.rank,), yf.dtype),
            n_steps=z,
            vf_evals=jnp.asarray(1 + as_field * _INIT_POWER_STEPS * self.rank, jnp.int32),
            jvp_evals=jnp.asarray((not as_field) * _INIT_POWER_STEPS * self.rank, jnp.int32),
            nonstiff_steps=z,
            h_prev=jnp.zeros((), yf.dtype),
        )

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def report(self, solver_state, index: int | None = None, *, last_stages: bool = True):
        """Its own counts from its final state (accepted steps only; member `index` of a
        batched state): (field evaluations plus Hessian-vector products, `SolveStats.extra`
        entries: `jvp_evals`, and `ritz_min`, the most negative Ritz value of J at the last
        step — minus the Hessian's largest eigenvalue there). `last_stages` is unused (the
        stabilized solvers' signature)."""
        del last_stages
        c = etd_eval_counts(solver_state)

        def pick(v):
            return np.asarray(v) if index is None else np.asarray(v)[index]

        vf, jv = int(pick(c["vf_evals"])), int(pick(c["jvp_evals"]))
        return vf + jv, {
            "jvp_evals": jv,
            "ritz_min": float(np.min(pick(c["ritz"]))),
            "nonstiff_steps": int(pick(c["nonstiff_steps"])),
        }

    def _etd_step(self, fvec, t0, t1, h, yf, f0, q, lam, outside):
        """One ETDRK4-B step from (yf, f0) with L = Q diag(lam) Qᵀ: (y1, error estimate ×
        `_SAFETY`, F(t1, y1), the nonlinear parts (N₀, N_a + N_b, N_c) for the dense
        output `_ETDInterpolation`), flat; `outside` (flat mask or None) as in `_tsit5_step`."""
        e1, p1, p2, p3 = phi_functions(h * lam)
        eh, q1, q2, _ = phi_functions(0.5 * h * lam)

        def act(coef, lin, v):
            """(lin·I + Q (coef − lin) Qᵀ) v: a function of hL with values `coef` on the
            Ritz directions and `lin` (its value at 0) elsewhere."""
            return lin * v + q @ ((coef - lin) * (q.T @ v))

        def nonlin(y, f):
            return f - q @ (lam * (q.T @ y))

        n0 = nonlin(yf, f0)
        ta, tb = t0 + 0.5 * (t1 - t0), t1
        e_half_y = act(eh, 1.0, yf)
        a = e_half_y + (0.5 * h) * act(q1, 1.0, n0)
        na = nonlin(a, fvec(ta, a))
        b = a + h * act(q2, 0.5, na - n0)
        nb = nonlin(b, fvec(ta, b))
        c = act(e1, 1.0, yf) + h * act(p1, 1.0, n0) + (2.0 * h) * act(p2, 0.5, nb - n0)
        nc = nonlin(c, fvec(tb, c))
        w_end = 4.0 * p3 - p2
        y1 = act(e1, 1.0, yf) + h * (
            act(p1 - 3.0 * p2 + 4.0 * p3, 1.0 - 1.5 + 4.0 / 6.0, n0)
            + act(2.0 * p2 - 4.0 * p3, 1.0 - 4.0 / 6.0, na + nb)
            + act(w_end, 4.0 / 6.0 - 0.5, nc)
        )
        f1 = fvec(t1, y1)
        n1 = nonlin(y1, f1)
        y_error = h * act(w_end, 4.0 / 6.0 - 0.5, nc - n1)
        if outside is not None:
            # components outside the flow (quadratures such as E): see `_quadrature_error`
            y_error = y_error + outside * _quadrature_error(h, n0, na, nb, n1)

        return y1, _SAFETY * y_error, f1, jnp.stack([n0, na + nb, nc])

    def step(self, terms, t0, t1, y0, args, solver_state: ETDState, made_jump):
        st = solver_state
        yf, unravel, dt, h, fvec, f0, vf_evals = flat_step_start(
            terms, t0, t1, y0, args, st.f0, st.vf_evals, made_jump
        )

        # The stored subspace V, one block power step W = J V (`rank` products J v
        # at y_n): the Ritz values Λ of J on V (VᵀJV = VᵀW = U Λ Uᵀ) and, as their
        # vectors, Q = orth(W U) — the Ritz vectors V U after one power step at this y,
        # so L follows the eigenvectors as they turn (Ritz vectors of V itself lag a step
        # behind: 2–3× the global error on the multi-stage net). Q is the next V.
        matvec, as_field = self._matvec(fvec, t0, yf, f0)
        w = _columns(matvec, st.basis)
        t_small = st.basis.T @ w
        ritz, u = jnp.linalg.eigh(0.5 * (t_small + t_small.T))
        wu = self._mask(unravel)(w @ u)
        usable = jnp.all(jnp.isfinite(wu)) & jnp.all(jnp.linalg.norm(wu, axis=0) > 0)
        q = jnp.where(usable, _orthonormal(jnp.where(usable, wu, st.basis)), st.basis @ u)
        lam = jnp.minimum(ritz, 0.0)

        outside = None
        if self.subspace_mask is not None:  # components outside the flow (quadratures)
            ones = jnp.ones_like(yf)
            outside = ones - ravel_pytree(self.subspace_mask(unravel(ones)))[0].astype(dt)

        def etd():
            y1, err, f1, nl = self._etd_step(fvec, t0, t1, h, yf, f0, q, lam, outside)
            # its dense output's cubic Hermite reads the first and last rows
            k = jnp.zeros((_TSIT5_STAGES, yf.size), dt).at[0].set(h * f0).at[-1].set(h * f1)
            return y1, err, f1, jnp.asarray(4, jnp.int32), nl, k

        def rk():
            y1, err, f1, k = _tsit5_step(terms, t0, t1, y0, args, unravel(f0), dt, outside)
            nl = jnp.zeros((3, yf.size), dt)
            return y1, err, f1, jnp.asarray(6, jnp.int32), nl, k

        if self.nonstiff == "none":
            y1, y_error, f1, stage_evals, nl, k = etd()
        else:  # Tsit5 while no direction is stiff at this h (see `_NONSTIFF_MAX_HLAM`)
            # ETDRK4 where a direction is stiff at the last step's size, or where the flow
            # is in a transient along a settled eigenvalue (see the module doc)
            lam0, lam_prev = jnp.min(lam), jnp.minimum(jnp.min(st.ritz), 0.0)
            along = jnp.linalg.norm(q.T @ f0) / (jnp.linalg.norm(f0) + jnp.finfo(dt).tiny)
            settled = jnp.abs(lam0 - lam_prev) <= _TRANSIENT * jnp.abs(lam0)
            transient = settled & (along >= _TRANSIENT) & (lam0 < 0)
            stiff = (-st.h_prev * lam0 >= _NONSTIFF_MAX_HLAM) | transient
            y1, y_error, f1, stage_evals, nl, k = jax.lax.cond(stiff, etd, rk)
        finite = jnp.all(jnp.isfinite(y1)) & jnp.all(jnp.isfinite(y_error))
        # a non-finite step is rejected (error ∞) and y1 kept finite: the controller scales
        # the error by |y1|, and ∞/∞ would make its next step NaN (a Tsit5 attempt far
        # past its stability bound overflows; the retry must be smaller, not NaN)
        y_error = jnp.where(finite, y_error, jnp.inf)
        y1 = jnp.where(finite, y1, yf)
        result = diffrax.RESULTS.where(
            finite,
            diffrax.RESULTS.successful,
            diffrax.RESULTS.nonfinite,  # pyright: ignore[reportArgumentType]
        )
        new_state = ETDState(
            f0=f1,
            basis=q,
            ritz=ritz,
            n_steps=st.n_steps + 1,
            vf_evals=vf_evals + stage_evals + as_field * self.rank,
            jvp_evals=st.jvp_evals + (not as_field) * self.rank,
            nonstiff_steps=st.nonstiff_steps + (stage_evals == 6).astype(jnp.int32),
            h_prev=h,
        )
        dense_info = dict(y0=y0, y1=unravel(y1), k=k, nl=nl, q=q, lam=lam, tsit5=stage_evals == 6)
        return unravel(y1), unravel(y_error), dense_info, new_state, result


def flow_state_mask(y):
    """The `subspace_mask` of the toolkit's flow states: (θ, E) (the physical and log
    clocks) and (θ, E, t) (the loss clock, whose clock is s and t a quadrature): θ kept,
    the scalars zeroed."""
    if not (isinstance(y, tuple) and len(y) in (2, 3) and all(jnp.ndim(v) == 0 for v in y[1:])):
        raise TypeError(
            "`flow_state_mask` (the subspace mask of make_solver('etdrk4')) expects the "
            "toolkit's flow state (θ, E) or (θ, E, t); for your own diffrax solve use "
            "`flows.ETDRK4()`, with a `subspace_mask` of your own if your state has "
            "quadrature components."
        )
    return (y[0], *(jnp.zeros_like(v) for v in y[1:]))


def _make_etdrk4(rtol, atol, error_norm, on_products):
    return ETDRK4(subspace_mask=flow_state_mask)


def etd_eval_counts(solver_state: ETDState | diffrax.Solution) -> dict[str, Array]:
    """Counts of an `ETDRK4` solve along its accepted path: `vf_evals` (field evaluations,
    `init`'s included), `jvp_evals` (Hessian-vector products), `steps`, `nonstiff_steps`
    (of them, Tsit5's), and `ritz` (the last step's Ritz values of J, ascending). Pass
    `sol.solver_state` of a solve with `SaveAt(..., solver_state=True)`, or that
    `Solution`."""
    state = final_state(solver_state, ETDState, "ETDRK4")
    return dict(
        vf_evals=state.vf_evals,
        jvp_evals=state.jvp_evals,
        steps=state.n_steps,
        nonstiff_steps=state.nonstiff_steps,
        ritz=state.ritz,
    )


#: `solver='etdrk4'`: rank 1, the subspace on θ of the flow state ((θ, E); (θ, E, t) on the
#: loss clock), the controller's tolerances; it saves between steps by its exponential
#: dense output (`_ETDInterpolation`), not stepping to its save times.
RECORD = SolverRecord(
    "etdrk4",
    ETDRK4,
    make=_make_etdrk4,
    method=(
        "Krogstad's ETDRK4-B whose linear part is the Hessian's most negative eigenpair "
        "(Rayleigh-Ritz on one block power step per step), flows._solvers._etd"
    ),
)
