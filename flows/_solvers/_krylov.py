"""Exponential Rosenbrock solvers with Krylov φ-functions (`EXPRB43`, `EXPRB32`) for diffrax.

A gradient flow dθ/dt = F(θ) = −∇L(θ) has the Jacobian J = −∇²L: symmetric, its products
J v (Hessian-vector products, `jax.jvp` of the field) cost about two gradients, and on the
networks of this toolkit its spectrum is a few large outliers over a bulk near 0 (the
multi-stage net, m = 1000: one eigenvalue −34 … −31 for t ≥ 0.5 and every other one in
[−0.33, 0.25]; at t = 0 two tight clusters at ±18.7). An *exponential Rosenbrock* method
linearises at every step, F(u) = F(u_n) + J_n (u − u_n) + D_n(u), integrates the linear part
exactly by the φ-functions φ_k(hJ_n) and only the small nonlinear remainder D_n by
quadrature: no stability limit from the stiff outliers, and step sizes set by the
nonlinearity. φ_k(hJ)v is computed in a Krylov space K_m(J, v) (Arnoldi, i.e. Lanczos with
full reorthogonalisation when J is symmetric), whose size m adapts to the step: a tight
cluster of eigenvalues costs one basis vector, so m stays small on these spectra.

Methods (Hochbruck & Ostermann, "Exponential integrators", Acta Numerica 19 (2010), §5.1;
Hochbruck, Ostermann & Schweitzer, SIAM J. Numer. Anal. 47 (2009) 786–803):

- `EXPRB43` (default): order 4 with an embedded order-3 solution,

      U₂ = u + (h/2) φ₁(hJ/2) F(u),
      U₃ = u + h φ₁(hJ) F(u) + h φ₁(hJ) D₂,
      u₁ = u + h φ₁(hJ) F(u) + h (16φ₃ − 48φ₄)(hJ) D₂ + h (−2φ₃ + 12φ₄)(hJ) D₃,
      û₁ = u + h φ₁(hJ) F(u) + h 16φ₃(hJ) D₂ − 2h φ₃(hJ) D₃,

  D_i = F(U_i) − F(u) − J (U_i − u): three field evaluations per step (F(U₂), F(U₃), and
  F(u₁), which is the next step's F(u) and the dense output's end slope) and three Krylov
  spaces (of F(u), D₂, D₃).
- `EXPRB32`: order 3 with the exponential Rosenbrock–Euler method (order 2) embedded,

      U₂ = u + h φ₁(hJ) F(u),   u₁ = U₂ + 2h φ₃(hJ) D₂,   û₁ = U₂;

  two field evaluations and two Krylov spaces per step.

J (U_i − u) is not an extra product: U_i − u lies in the Krylov space, and the Arnoldi
relation J V_m = V_{m+1} H̄_m gives it from the small matrix.

**Krylov error control.** For w = φ_k(τJ)v ≈ β V_m φ_k(τH_m) e₁ the leading error term is
β h_{m+1,m} τ [φ_{k+1}(τH_m)]_{m,1} v_{m+1} (Saad 1992; the residual of u′ = Ju + …, an
upper bound when J ≤ 0). The basis grows until this vector, for every product the step
uses, is below `krylov_fraction` (default 0.1) in the step-size controller's own norm of
error / (atol + rtol |y|) — so the tolerance is the controller's (`root_finder`, below), as
diffrax's implicit solvers take theirs. The estimates of the products that make up u₁ are
added to the step's error estimate: a step whose Krylov approximation is inaccurate is
rejected like any other inaccurate step (the controller shrinks h, and the basis a smaller
step needs is smaller), never accepted silently. Sizes are checked at `_CHECKS` (≤ 40 %
apart) up to `max_krylov`.

**Loud failure.** If the basis reaches `max_krylov` vectors without the tolerance at a
step where h ρ̂ ≤ 1 (ρ̂ = ‖H_m‖₁ ≥ the spectral radius of the Krylov matrix), shrinking the
step will not help — there φ_k(hJ)v is a low-degree polynomial in hJ — so the basis is too
small for the asked tolerance (or the tolerance is below rounding): with `throw=True`
(default) the solve stops with an error naming `max_krylov`; with `throw=False` the step
returns `RESULTS.stagnation` (diffrax's "stagnation in an iterative linear solve"), which
ends the solve with that result.

**Tolerances (`root_finder`).** The Krylov tolerance is the controller's: the solver is
an `AbstractImplicitSolver` whose `root_finder` carries rtol, atol and norm, and
`diffrax.diffeqsolve` fills them from its `PIDController` (default
`diffrax.with_stepsize_controller_tols(diffrax.VeryChord)()`, exactly as for
`diffrax.Kvaerno5`). With `ConstantStepSize` pass them explicitly:
`EXPRB43(root_finder=diffrax.VeryChord(rtol=…, atol=…, norm=optimistix.rms_norm))`.

**Counting.** `KrylovState` counts the field evaluations (`vf_evals`) and Jacobian-vector
products (`jvp_evals`: the basis vectors) along the accepted path, the largest basis used
(`max_basis`) and the steps; read them with `SaveAt(..., solver_state=True)` and
`krylov_eval_counts`. Rejected steps' work is not in the state (diffrax restores it).

**Limits.** ODE terms (`ODETerm`) with an autonomous field for the stated order (a
time-dependent field is evaluated at the stage times, but J has no ∂F/∂t column: first
order in t); the Krylov basis is a dense `(max_krylov + 1) × n` array; the Arnoldi loops
have run-time trip counts (no reverse-mode differentiation through the solve).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array

from .record import final_state, flat_step_start

__all__ = ["EXPRB32", "EXPRB43", "KrylovState", "krylov_eval_counts"]

# Basis sizes at which convergence is checked (consecutive sizes ≤ 40 % apart, so at most
# that many products are spent past the size that was needed), and the padded sizes of the
# small matrix exponentials that check them (one compiled copy per bucket).
_CHECK_SIZES = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    10,
    12,
    14,
    16,
    20,
    24,
    28,
    32,
    40,
    48,
    56,
    64,
    80,
    96,
    112,
    128,
)
_BUCKETS = (8, 16, 32, 64, 128)
# Tolerance proportionality. Under local error control the global error of EXPRB43 grew
# like rtol^0.8 (err/rtol 0.056 at rtol 1e-3 to 0.45 at 1e-8 on the rotated Bernoulli flow
# of the tests): the reported error is scaled by (_PROP_RTOL/rtol)^_PROP_EXPONENT (≤ 1),
# i.e. the steps are controlled to rtol·(rtol/_PROP_RTOL)^0.2, so the global error follows
# rtol (the tolerance transformation of RADAU5 and of `RKC2`).
_PROP_RTOL = 1e-8
_PROP_EXPONENT = 0.2
# Taylor degree of the exponential after scaling to ‖A‖₁ ≤ 1/2: 0.5¹⁵/15! ≈ 2e-17.
_TAYLOR = 14


def _expm(a: Array) -> Array:
    """exp(A) by scaling and squaring with a degree-14 Taylor polynomial (a small graph: the
    number of squarings is a run-time loop count)."""
    nrm = jnp.max(jnp.sum(jnp.abs(a), axis=0))
    j = jnp.maximum(0, jnp.ceil(jnp.log2(jnp.maximum(nrm, 1e-300))) + 1).astype(jnp.int32)
    a = a / (2.0 ** j.astype(a.dtype))
    eye = jnp.eye(a.shape[0], dtype=a.dtype)
    e = eye
    for k in range(_TAYLOR, 0, -1):
        e = eye + (a @ e) / k
    return jax.lax.fori_loop(0, j, lambda _, x: x @ x, e)


def _phi_columns(a: Array, p: int) -> Array:
    """[φ₁(A)e₁, …, φ_p(A)e₁] (s × p) from one exponential of the (s+p) × (s+p) matrix
    [[A, e₁ e₁ᵀ], [0, N]] (N the p × p upper shift): its top-right block (Saad 1992,
    Sidje's Expokit)."""
    s = a.shape[0]
    aug = jnp.zeros((s + p, s + p), a.dtype)
    aug = aug.at[:s, :s].set(a).at[0, s].set(1.0)
    aug = aug.at[jnp.arange(s, s + p - 1), jnp.arange(s + 1, s + p)].set(1.0)
    return _expm(aug)[:s, s:]


class _Request(eqx.Module):
    """One product Σ_k a_k φ_k(c h J) v wanted from a Krylov space of v: `c` (static) and
    the pairs (k, a_k) (a_k an array or float; k static)."""

    c: float = eqx.field(static=True)
    ks: tuple[int, ...] = eqx.field(static=True)
    coefs: tuple[Any, ...]
    final: bool = eqx.field(static=True, default=True)  # part of u₁: its error is reported


def _krylov(matvec, b, h, requests, scaled_norm, *, max_krylov: int, fraction: float | Array):
    """Arnoldi on (J, b) until every request's error estimate is ≤ `fraction` in the
    controller's scaled norm (checked at `_CHECK_SIZES`), or `max_krylov` vectors.

    Returns (outputs [one flat vector per request], J·outputs, error vector of the `final`
    requests (componentwise ≥ 0), basis size used, converged, h ρ̂ at that size)."""
    n = b.shape[0]
    dt = b.dtype
    m_max = max_krylov
    beta = jnp.sqrt(jnp.sum(b * b))
    safe_beta = jnp.where(beta > 0, beta, 1.0)
    tiny = 100 * jnp.finfo(dt).eps
    p = max(max(r.ks) for r in requests) + 1
    n_req = len(requests)
    checks = np.zeros(m_max + 1, bool)
    checks[[c for c in _CHECK_SIZES if c < m_max] + [m_max]] = True
    checks = jnp.asarray(checks)
    buckets = [bk for bk in _BUCKETS if bk < m_max] + [m_max]
    bucket_of = jnp.asarray(np.searchsorted(np.asarray(buckets), np.arange(m_max + 1)))

    def evaluate_padded(size, s, hm):
        """Coefficients (padded to m_max), error coefficients and h ρ̂ at basis size s,
        from the leading `size` × `size` block (rows and columns ≥ s masked)."""
        keep = jnp.arange(size) < s
        hs = jnp.where(keep[:, None] & keep[None, :], hm[:size, :size], 0.0)
        hsub = hm[s, s - 1]
        gs, errs = [], []
        cols = {}
        for r in requests:
            if r.c not in cols:
                cols[r.c] = _phi_columns(r.c * h * hs, p)
            phis = cols[r.c]
            g = sum(a * phis[:, k - 1] for k, a in zip(r.ks, r.coefs, strict=True))
            e = sum(a * phis[s - 1, k] for k, a in zip(r.ks, r.coefs, strict=True))
            gs.append(jnp.zeros(m_max, dt).at[:size].set(beta * g))
            errs.append(jnp.abs(beta * hsub * r.c * h * e))
        hrho = max(r.c for r in requests) * h * jnp.max(jnp.sum(jnp.abs(hs), axis=0))
        return jnp.stack(gs), jnp.stack(errs), hrho

    branches = [lambda s, hm, size=size: evaluate_padded(size, s, hm) for size in buckets]

    def body(c):
        j, v, hm, broke = c["j"], c["v"], c["hm"], c["broke"]
        w = matvec(v[j])
        # classical Gram–Schmidt twice (rows past j are zero, so no mask is needed)
        c1 = v @ w
        w = w - v.T @ c1
        c2 = v @ w
        w = w - v.T @ c2
        hnext = jnp.sqrt(jnp.sum(w * w))
        # happy breakdown: the space is invariant, the approximation exact
        broke = broke | (hnext <= tiny * jnp.maximum(jnp.max(jnp.abs(c1)), 1.0))
        col = jnp.where(jnp.arange(m_max + 1) > j, 0.0, c1 + c2)
        col = col.at[j + 1].set(jnp.where(broke, 0.0, hnext))
        vnext = jnp.where(broke, 0.0, w / jnp.where(broke, 1.0, hnext))
        v = v.at[j + 1].set(vnext)
        hm = hm.at[:, j].set(col)
        s = j + 1

        def check(_):
            g, err, hrho = jax.lax.switch(bucket_of[s], branches, s, hm)
            conv = jnp.max(err) * scaled_norm(v[s]) <= fraction
            return g, err, hrho, conv

        def skip(_):
            return c["g"], c["err"], c["hrho"], jnp.asarray(False)

        g, err, hrho, conv = jax.lax.cond(checks[s] | broke, check, skip, None)
        return dict(j=s, v=v, hm=hm, broke=broke, conv=conv | broke, g=g, err=err, hrho=hrho)

    def cond(c):
        return (~c["conv"]) & (c["j"] < m_max)

    init = dict(
        j=jnp.zeros((), jnp.int32),
        v=jnp.zeros((m_max + 1, n), dt).at[0].set(b / safe_beta),
        hm=jnp.zeros((m_max + 1, m_max), dt),
        broke=beta == 0,
        conv=beta == 0,
        g=jnp.zeros((n_req, m_max), dt),
        err=jnp.zeros((n_req,), dt),
        hrho=jnp.zeros((), dt),
    )
    c = jax.lax.while_loop(cond, body, init)
    v, hm, size, g = c["v"], c["hm"], c["j"], c["g"]
    outs = [v[:m_max].T @ g[i] for i in range(n_req)]
    jouts = [v.T @ (hm @ g[i]) for i in range(n_req)]
    final = [i for i, r in enumerate(requests) if r.final]
    err_coef = jnp.max(c["err"][jnp.asarray(final)]) if final else jnp.zeros((), dt)
    err_vec = jnp.where(c["broke"], 0.0, err_coef * jnp.abs(v[size]))
    return outs, jouts, err_vec, size, c["conv"], c["hrho"]


class KrylovState(eqx.Module):
    """State of `EXPRB43` / `EXPRB32` between steps (all leaves arrays: diffrax keeps the
    old state leaf-wise when a step is rejected).

    - `f0`: F(t_n, y_n), flat (first same as last).
    - `n_steps`, `vf_evals`, `jvp_evals`: accepted steps, field evaluations and
      Jacobian-vector products along the accepted path (`init`'s F(y₀) included).
    - `max_basis`: the largest Krylov basis an accepted step used.
    - `last_basis`: the basis sizes of the last accepted step (one per Krylov space).
    """

    f0: Array
    n_steps: Array
    vf_evals: Array
    jvp_evals: Array
    max_basis: Array
    last_basis: Array


_MESSAGE = (
    "{name}: a Krylov basis of max_krylov={m} vectors did not reach the tolerance at a step "
    "with h·ρ ≤ 1 (where a smaller step cannot help): raise `max_krylov` or loosen rtol/atol."
)


class AbstractExpRosenbrock(diffrax.AbstractImplicitSolver, diffrax.AbstractAdaptiveSolver):
    """What `EXPRB43` and `EXPRB32` share: flat state, the Krylov products, error
    assembly, counting, the loud failure. A member provides `_scheme` and its orders."""

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation.from_k
    )

    root_finder: Any = diffrax.with_stepsize_controller_tols(diffrax.VeryChord)()
    root_find_max_steps: int = eqx.field(static=True, default=0)  # unused: no Newton
    max_krylov: int = eqx.field(static=True, default=64)
    krylov_fraction: float = eqx.field(static=True, default=0.1)
    throw: bool = eqx.field(static=True, default=True)
    proportional: bool = eqx.field(static=True, default=True)

    _n_spaces: ClassVar[int] = 0

    def __check_init__(self):
        if self.max_krylov < 2:
            raise ValueError(f"`max_krylov` must be ≥ 2; got {self.max_krylov}.")
        if not 0 < self.krylov_fraction <= 1:
            raise ValueError(f"`krylov_fraction` must be in (0, 1]; got {self.krylov_fraction}.")

    def _scheme(self, fvec, matvec, t0, h, y, f0, krylov):
        """One step: (y1, embedded error, Krylov error, field evaluations, basis sizes,
        Krylov failure flag)."""
        raise NotImplementedError

    def init(self, terms, t0, t1, y0, args):
        f0, _ = ravel_pytree(terms.vf(t0, y0, args))
        z = jnp.zeros((), jnp.int32)
        return KrylovState(
            f0=f0,
            n_steps=z,
            vf_evals=jnp.ones((), jnp.int32),
            jvp_evals=z,
            max_basis=z,
            last_basis=jnp.zeros((self._n_spaces,), jnp.int32),
        )

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state: KrylovState, made_jump):
        st = solver_state
        yf, unravel, dt, h, fvec, f0, vf_evals = flat_step_start(
            terms, t0, t1, y0, args, st.f0, st.vf_evals, made_jump
        )

        def matvec(v):
            return jax.jvp(lambda y: fvec(t0, y), (yf,), (v,))[1]

        rtol, atol, norm = self.root_finder.rtol, self.root_finder.atol, self.root_finder.norm
        scale = 1.0 / (atol + rtol * jnp.abs(yf))
        # tolerance proportionality: the step's error is reported × (rtol_ref/rtol)^q ≤ 1
        # (see `_PROP_EXPONENT`); the Krylov products are held to the same looser level
        shrink = (
            jnp.minimum(_PROP_RTOL / jnp.asarray(rtol, dt), 1.0) ** _PROP_EXPONENT
            if self.proportional
            else jnp.ones((), dt)
        )

        def scaled_norm(v):
            return norm(unravel(v * scale))

        def krylov(b, requests):
            return _krylov(
                matvec,
                b,
                h,
                requests,
                scaled_norm,
                max_krylov=self.max_krylov,
                fraction=self.krylov_fraction / shrink,
            )

        y1, emb, kerr, n_f, sizes, failed = self._scheme(fvec, matvec, t0, h, yf, f0, krylov)
        f1 = fvec(t1, y1)
        n_f = n_f + 1
        y_error = (jnp.abs(emb) + kerr) * shrink
        if self.throw:
            y1 = eqx.error_if(
                y1, failed, _MESSAGE.format(name=type(self).__name__, m=self.max_krylov)
            )
        finite = jnp.all(jnp.isfinite(y1)) & jnp.all(jnp.isfinite(y_error))
        y_error = jnp.where(finite, y_error, jnp.inf)
        result = diffrax.RESULTS.where(
            failed,
            diffrax.RESULTS.stagnation,  # pyright: ignore[reportArgumentType]
            diffrax.RESULTS.where(
                finite,
                diffrax.RESULTS.successful,
                diffrax.RESULTS.nonfinite,  # pyright: ignore[reportArgumentType]
            ),
        )
        if not self.throw:  # the failure must end the solve: report the step as accepted
            y_error = jnp.where(failed, 0.0, y_error)
        sizes = jnp.stack(sizes).astype(jnp.int32)
        new_state = KrylovState(
            f0=f1,
            n_steps=st.n_steps + 1,
            vf_evals=vf_evals + n_f,
            jvp_evals=st.jvp_evals + jnp.sum(sizes).astype(jnp.int32),
            max_basis=jnp.maximum(st.max_basis, jnp.max(sizes)).astype(jnp.int32),
            last_basis=sizes,
        )
        k = jnp.stack([h * f0, h * f1])
        dense_info = dict(
            y0=y0,
            y1=unravel(y1),
            k=jax.vmap(unravel)(k),
        )
        return unravel(y1), unravel(y_error), dense_info, new_state, result


class EXPRB43(AbstractExpRosenbrock):
    r"""Fourth-order exponential Rosenbrock method `exprb43` (embedded order 3) with
    Krylov φ-functions; see the module docstring for the scheme, the Krylov error control
    and the loud failure.

    **Cost per step:** 3 field evaluations (F(U₂), F(U₃), F(u₁)) and m₁ + m₂ + m₃
    Jacobian-vector products, m_i the basis sizes of the Krylov spaces of F(u), D₂ and D₃
    (each ≥ 2).

    **Arguments (fields):**

    - `root_finder`: carries the Krylov tolerance (rtol, atol, norm); by default taken
      from the `PIDController` (see the module docstring).
    - `max_krylov`: largest basis per Krylov space (default 64).
    - `krylov_fraction`: the Krylov error allowed per product, as a fraction of the
      step's tolerance (default 0.1).
    - `throw`: raise when the basis cannot reach the tolerance (default True); False:
      the solve ends with `RESULTS.stagnation`.
    - `proportional`: control the steps to rtol·(rtol/1e-8)^0.2 (the reported error is
      scaled by (1e-8/rtol)^0.2 ≤ 1), so that the global error follows rtol (default
      True; see `_PROP_EXPONENT`). False: plain local error control.

    **References:** M. Hochbruck, A. Ostermann, "Exponential integrators", Acta Numerica
    19 (2010) 209–286, §5.1 (exprb43); M. Hochbruck, A. Ostermann, J. Schweitzer,
    "Exponential Rosenbrock-type methods", SIAM J. Numer. Anal. 47 (2009) 786–803;
    Y. Saad, "Analysis of some Krylov subspace approximations to the matrix exponential
    operator", SIAM J. Numer. Anal. 29 (1992) 209–228.
    """

    _n_spaces: ClassVar[int] = 3

    def order(self, terms):
        return 4

    def error_order(self, terms):
        return 4  # the embedded solution is of order 3: local error O(h⁴)

    def _scheme(self, fvec, matvec, t0, h, y, f0, krylov):
        r_a = _Request(0.5, (1,), (0.5 * h,), final=False)
        r_b = _Request(1.0, (1,), (h,))
        (a, b), (ja, jb), e1, m1, ok1, rho1 = krylov(f0, (r_a, r_b))
        u2 = y + a
        d2 = fvec(t0 + 0.5 * h, u2) - f0 - ja
        r_c = _Request(1.0, (1,), (h,), final=False)
        r_g2 = _Request(1.0, (3, 4), (16.0 * h, -48.0 * h))
        r_p2 = _Request(1.0, (4,), (-48.0 * h,), final=False)
        (c, g2, p2), (jc, _, _), e2, m2, ok2, rho2 = krylov(d2, (r_c, r_g2, r_p2))
        u3 = y + b + c
        d3 = fvec(t0 + h, u3) - f0 - jb - jc
        r_g3 = _Request(1.0, (3, 4), (-2.0 * h, 12.0 * h))
        r_p3 = _Request(1.0, (4,), (12.0 * h,), final=False)
        (g3, p3), _, e3, m3, ok3, rho3 = krylov(d3, (r_g3, r_p3))
        y1 = y + b + g2 + g3
        failed = _failed((ok1, ok2, ok3), (rho1, rho2, rho3))
        return y1, p2 + p3, e1 + e2 + e3, 2, (m1, m2, m3), failed


class EXPRB32(AbstractExpRosenbrock):
    r"""Third-order exponential Rosenbrock method `exprb32` (the exponential
    Rosenbrock–Euler method, order 2, embedded) with Krylov φ-functions; see the module
    docstring.

    **Cost per step:** 2 field evaluations (F(U₂), F(u₁)) and m₁ + m₂ Jacobian-vector
    products (Krylov spaces of F(u) and D₂). Arguments as `EXPRB43`.

    **References:** as `EXPRB43` (exprb32: Hochbruck & Ostermann 2010, §5.1).
    """

    _n_spaces: ClassVar[int] = 2

    def order(self, terms):
        return 3

    def error_order(self, terms):
        return 3

    def _scheme(self, fvec, matvec, t0, h, y, f0, krylov):
        r_b = _Request(1.0, (1,), (h,))
        (b,), (jb,), e1, m1, ok1, rho1 = krylov(f0, (r_b,))
        u2 = y + b
        d2 = fvec(t0 + h, u2) - f0 - jb
        r_g = _Request(1.0, (3,), (2.0 * h,))
        (g,), _, e2, m2, ok2, rho2 = krylov(d2, (r_g,))
        return u2 + g, g, e1 + e2, 1, (m1, m2), _failed((ok1, ok2), (rho1, rho2))


def _failed(oks, rhos) -> Array:
    """A Krylov space that did not converge at a step where h ρ̂ ≤ 1."""
    bad = [(~ok) & (rho <= 1.0) for ok, rho in zip(oks, rhos, strict=True)]
    return jnp.any(jnp.stack(bad))


def krylov_eval_counts(solver_state: KrylovState | diffrax.Solution) -> dict[str, Array]:
    """Counts of an `EXPRB43` / `EXPRB32` solve along its accepted path: `vf_evals`,
    `jvp_evals`, `steps`, `max_basis`. Pass `sol.solver_state` of a solve with
    `SaveAt(..., solver_state=True)`, or that `Solution`."""
    state = final_state(solver_state, KrylovState, "EXPRB43/EXPRB32")
    return dict(
        vf_evals=state.vf_evals,
        jvp_evals=state.jvp_evals,
        steps=state.n_steps,
        max_basis=state.max_basis,
    )
