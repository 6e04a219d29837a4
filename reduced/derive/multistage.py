r"""Symbolic derivations for the multi-stage loss-curve paper, *Analyzing Multi-Stage Loss
Curves: Plateau and Descent Mechanisms in Neural Networks*, eqs. (10)–(23).

Setting. f_θ(x) = Σ_k a_k σ(w_kᵀx), population risk R(θ) = ½ E(f_θ(x) − f(x))², gradient
flow θ̇ = −∇R. Every integrand below is a polynomial in x and f(x), so the risk is a
polynomial in the parameters and in the data moments E[f^j x^α] (see `Moments`);
differentiating under the integral is then exact algebra.

Assumptions (the paper's):

- A1: E x_i² = 1, E x_i x_j = 0 (i ≠ j);
- A2: E[f(x) x] = e₁;
- A3: σ(0) = 0, σ′(0) = 1, σ″(0) = 0; we write σ(z) = z + s₃ z³/3! + s₄ z⁴/4! (s₃ = σ‴(0)),
  a generic Taylor polynomial with the constraints of A3.

What is derived (each item is one `Identity`, in the order of the paper):

1. Eq. (10): with σ(z) = z, −∇R is *exactly* the explicit part of eq. (10) (d = 3, m = 2),
   and with w_kⁱ = 0 (i ≥ 2) it is eq. (16).
2. The remainder f_k, g_k of eq. (10) (generic A3 σ, d = 2, m = 2) has no terms of degree
   0, 1, 2 in (a, w): it is O(q_max³); and it vanishes for σ(z) = z.
3. The closed form (23) solves the linearized flow (15) with the right initial values.
4. General moments Σ = E xxᵀ, b = E[f x] (d = 2, m = 2, cubic σ): the degree-1 part of
   −∇R is ȧ_k = bᵀw_k, ẇ_k = a_k b.
5. The normalization a = λâ, w = λŵ, t = τ/b, λ² = b/s² maps d = 1 data with
   E x² = s², E[f x] = b onto the A1–A2 form of the leading terms, with K = λ² K̂.
6. Eq. (16) closes on K = Σ a_k w_k¹, K′ = Σ (a_k² + (w_k¹)²): K̇ = K′(1 − K),
   K̇′ = 4K(1 − K), d/dt (K′² − 4K²) = 0; with K′ = 2K this is eq. (18).
7. Eq. (19) solves eq. (18) with K(t₀) = K₀, and `logistic_time_to` inverts it.
8. §4.3.2, d = 1: the third-order terms f_k, g_k. **Erratum**: the printed f_k omits
   −(1/3!) c₄ σ‴(0) (Σ_l a_l w_l) w_k³ (it comes from the third integral of the paper's
   own eq. (9)); the printed g_k is right. `reduced.multistage.plateau_departure_terms`
   implements the derived (corrected) f_k; `flows check multistage` compares both with
   the flow (row '§4.3.2': the leading terms cancel in d(Σa² − Σw²)/dt, so this rate is
   the third-order terms' alone).

The module also generates JAX vector fields from the derived expressions
(`generated_vector_fields`), which the tests compare with `reduced.multistage`.
"""

from __future__ import annotations

import functools

import sympy as sp

from ._core import Identity
from ._tools import Moments, homogeneous_part, jax_function, low_degree_parts

PAPER = "multistage"

__all__ = ["IDENTITIES", "generated_vector_fields", "plateau_departure_derived"]

s3, s4 = sp.symbols("s3 s4", real=True)  # σ‴(0), σ⁗(0)
t, t0 = sp.symbols("t t0", real=True)


def sigma_taylor(z, cubic=True, quartic=False):
    """σ(z) = z + s₃ z³/3! (+ s₄ z⁴/4!): Taylor polynomial under Assumption 3."""
    return z + (s3 * z**3 / 6 if cubic else 0) + (s4 * z**4 / 24 if quartic else 0)


class TwoLayer:
    """Parameters a_k, w_kⁱ (k ≤ m, i ≤ d) of f_θ(x) = Σ_k a_k σ(w_kᵀx)."""

    def __init__(self, m: int, d: int):
        self.m, self.d = m, d
        self.a = sp.symbols(f"a1:{m + 1}", real=True)
        self.w = [sp.symbols(f"w{k}_1:{d + 1}", real=True) for k in range(1, m + 1)]
        self.params = (*self.a, *[wi for wk in self.w for wi in wk])

    def risk(self, moments: Moments, sigma) -> sp.Expr:
        """R(θ) = ½ E (Σ_k a_k σ(w_kᵀx) − f(x))²."""
        x = moments.xs
        out = sum(
            ak * sigma(sum(wi * xi for wi, xi in zip(wk, x, strict=True)))
            for ak, wk in zip(self.a, self.w, strict=True)
        )
        return moments.E(sp.Rational(1, 2) * (out - moments.f) ** 2)

    def flow(self, risk: sp.Expr):
        """Gradient flow: (−∂R/∂a_k)_k and (−∂R/∂w_kⁱ)_{k,i}."""
        return (
            [-sp.diff(risk, ak) for ak in self.a],
            [[-sp.diff(risk, wi) for wi in wk] for wk in self.w],
        )


def _a1_a2(d: int) -> dict:
    """Moment values fixed by Assumption 1 (E x_i x_j = δ_ij) and 2 (E[f x] = e₁)."""
    fixed = {}
    for i in range(d):
        for j in range(i, d):
            alpha = [0] * d
            alpha[i] += 1
            alpha[j] += 1
            fixed[(0, tuple(alpha))] = 1 if i == j else 0
        e = [0] * d
        e[i] = 1
        fixed[(1, tuple(e))] = 1 if i == 0 else 0
    return fixed


def eq10_leading(net: TwoLayer):
    """The explicit (non-f_k, g_k) right-hand side of eq. (10)."""
    a, w, d = net.a, net.w, net.d
    K = sum(al * wl[0] for al, wl in zip(a, w, strict=True))
    S = [sum(al * wl[i] for al, wl in zip(a, w, strict=True)) for i in range(d)]  # Σ_l a_l w_lⁱ
    a_dot = [w[k][0] - K * w[k][0] - sum(S[i] * w[k][i] for i in range(1, d)) for k in range(net.m)]
    w_dot = [[a[k] - K * a[k]] + [-S[i] * a[k] for i in range(1, d)] for k in range(net.m)]
    return a_dot, w_dot


def _flat(a_dot, w_dot):
    return [*a_dot, *[e for row in w_dot for e in row]]


# ---------------------------------------------------------------------------------------
# 1. Eq. (10): the leading terms, and eq. (16)

_NET_10 = TwoLayer(m=2, d=3)
_MOM_10 = Moments(d=3, max_degree=2, fixed=_a1_a2(3))


def _eq10_residual():
    net = _NET_10
    a_dot, w_dot = net.flow(net.risk(_MOM_10, lambda z: z))
    la, lw = eq10_leading(net)
    res = [x - y for x, y in zip(_flat(a_dot, w_dot), _flat(la, lw), strict=True)]
    # eq. (16): the same field on the set w_kⁱ = 0 (i ≥ 2), where ẇ_kⁱ vanishes.
    frozen = {wk[i]: 0 for wk in net.w for i in range(1, net.d)}
    K = sum(ak * wk[0] for ak, wk in zip(net.a, net.w, strict=True))
    eq16 = [(1 - K) * wk[0] for wk in net.w] + [
        e for ak in net.a for e in [(1 - K) * ak] + [0] * (net.d - 1)
    ]
    res += [x.subs(frozen) - y for x, y in zip(_flat(a_dot, w_dot), eq16, strict=True)]
    return res


# ---------------------------------------------------------------------------------------
# 2. The remainder f_k, g_k is third order

_NET_R = TwoLayer(m=2, d=2)
_MOM_R = Moments(d=2, max_degree=8, fixed=_a1_a2(2))


def _remainder(net, moments, sigma):
    flow = _flat(*net.flow(net.risk(moments, sigma)))
    return [x - y for x, y in zip(flow, _flat(*eq10_leading(net)), strict=True)]


def _remainder_residual():
    net = _NET_R
    rem = _remainder(net, _MOM_R, functools.partial(sigma_taylor, quartic=True))
    res = [p for r in rem for p in low_degree_parts(r, net.params, 3)]
    res += [r.subs({s3: 0, s4: 0}) for r in rem]
    return res


# ---------------------------------------------------------------------------------------
# 3. Closed form (23) of the linearized flow (15)

a0, u0, v0 = sp.symbols("a0 u0 v0", real=True)  # a_k(0), w_k¹(0), w_kⁱ(0)


def closed_form_23():
    grow, decay = (a0 + u0) / 2 * sp.exp(t), (a0 - u0) / 2 * sp.exp(-t)
    return grow + decay, grow - decay, v0


def _eq23_residual():
    a_t, u_t, v_t = closed_form_23()
    return [
        sp.diff(a_t, t) - u_t,  # ȧ_k = w_k¹
        sp.diff(u_t, t) - a_t,  # ẇ_k¹ = a_k
        sp.diff(v_t, t),  # ẇ_kⁱ = 0
        a_t.subs(t, 0) - a0,
        u_t.subs(t, 0) - u0,
        v_t.subs(t, 0) - v0,
    ]


# ---------------------------------------------------------------------------------------
# 4. General moments: the linearized flow ȧ_k = bᵀw_k, ẇ_k = a_k b

_NET_G = TwoLayer(m=2, d=2)
_MOM_G = Moments(d=2, max_degree=6)  # no assumption: Σ and b are free symbols


def _b_vector(moments):
    return [moments[(1, tuple(int(i == j) for j in range(moments.d)))] for i in range(moments.d)]


def _linearized_general(net, moments, sigma):
    a_dot, w_dot = net.flow(net.risk(moments, sigma))
    return [homogeneous_part(e, net.params, 1) for e in _flat(a_dot, w_dot)]


def linearized_general_claim(net, b):
    a_dot = [sum(bi * wi for bi, wi in zip(b, wk, strict=True)) for wk in net.w]
    w_dot = [[ak * bi for bi in b] for ak in net.a]
    return _flat(a_dot, w_dot)


def _general_linear_residual():
    net, mom = _NET_G, _MOM_G
    lin = _linearized_general(net, mom, sigma_taylor)
    claim = linearized_general_claim(net, _b_vector(mom))
    return [x - y for x, y in zip(lin, claim, strict=True)]


# ---------------------------------------------------------------------------------------
# 5. The normalization for data outside Assumptions 1–2 (d = 1, E x² = s², E[f x] = b)

s, b = sp.symbols("s b", positive=True)
_NET_N = TwoLayer(m=2, d=1)
_MOM_N = Moments(d=1, max_degree=2, fixed={(0, (2,)): s**2, (1, (1,)): b})
_AH = sp.symbols("ah1:3", real=True)  # â_k
_WH = sp.symbols("wh1:3", real=True)  # ŵ_k


def _normalization_residual():
    net = _NET_N
    a_dot, w_dot = net.flow(net.risk(_MOM_N, lambda z: z))
    lam = sp.sqrt(b / s**2)
    ah, wh = _AH, _WH
    scale = {**dict(zip(net.a, [lam * x for x in ah], strict=True))}
    scale |= {wk[0]: lam * x for wk, x in zip(net.w, wh, strict=True)}
    K_hat = sum(x * y for x, y in zip(ah, wh, strict=True))
    res = []
    for k in range(net.m):
        # dâ/dτ = (dt/dτ)(1/λ) ȧ = ȧ/(λ b), and likewise for ŵ.
        res.append(a_dot[k].subs(scale, simultaneous=True) / (lam * b) - (wh[k] - K_hat * wh[k]))
        res.append(w_dot[k][0].subs(scale, simultaneous=True) / (lam * b) - (ah[k] - K_hat * ah[k]))
    K = sp.Add(*(ak * wk[0] for ak, wk in zip(net.a, net.w, strict=True)))
    res.append(K.subs(scale, simultaneous=True) - (b / s**2) * K_hat)  # K = λ² K̂ = (b/s²) K̂
    return res


_NORMALIZATION_SYMBOLS = (*_AH, *_WH, *_NET_N.params, *_MOM_N.symbols)


# ---------------------------------------------------------------------------------------
# 6. Macroscopic system of eq. (16)

_M_MACRO = 3
_au = sp.symbols(f"a1:{_M_MACRO + 1}", real=True), sp.symbols(f"u1:{_M_MACRO + 1}", real=True)
K_sym, Kp_sym = sp.symbols("K Kp", real=True)


def descent_field_16(a, u, K=None):
    """Eq. (16) with u_k = w_k¹: ȧ_k = (1 − K) u_k, u̇_k = (1 − K) a_k."""
    if K is None:
        K = sum(x * y for x, y in zip(a, u, strict=True))
    return [(1 - K) * x for x in u], [(1 - K) * x for x in a]


def _descent_field_derived(m):
    """Eq. (16) *derived*: −∇R for d = 1 under A1–A2 with σ(z) = z (then (16) = (10))."""
    net = TwoLayer(m=m, d=1)
    mom = Moments(d=1, max_degree=2, fixed=_a1_a2(1))
    a_dot, w_dot = net.flow(net.risk(mom, lambda z: z))
    return net, a_dot, [row[0] for row in w_dot]


def macroscopic_field_derived():
    """(K̇, K̇′) as expressions in the symbols K, K′, obtained from eq. (16) by the chain rule.

    K̇ = Σ (u_k ȧ_k + a_k u̇_k) and K̇′ = Σ 2(a_k ȧ_k + u_k u̇_k), with eq. (16) written in
    terms of a symbol K; the sums Σ(a_k² + u_k²) and Σ a_k u_k are then recognised as K′ and
    K. Raises if the result does not close on (K, K′).
    """
    a, u = _au
    a_dot, u_dot = descent_field_16(a, u, K=K_sym)
    k_dot = sp.factor(sum(x * y + z * v for x, y, z, v in zip(u, a_dot, a, u_dot, strict=True)))
    kp_dot = sp.factor(
        sum(2 * (x * y + z * v) for x, y, z, v in zip(a, a_dot, u, u_dot, strict=True))
    )
    # annotated as sympy's `subs` takes it (its Mapping's key type is invariant)
    sums: dict[sp.Basic | complex, sp.Basic | complex]
    sums = {sum(x**2 + y**2 for x, y in zip(a, u, strict=True)): Kp_sym}
    sums |= {sum(x * y for x, y in zip(a, u, strict=True)): K_sym}
    k_dot, kp_dot = k_dot.subs(sums), kp_dot.subs(sums)
    if (k_dot.free_symbols | kp_dot.free_symbols) - {K_sym, Kp_sym}:
        raise RuntimeError(f"eq. (16) did not close on (K, K'): {k_dot}, {kp_dot}")
    return sp.expand(k_dot), sp.expand(kp_dot)


def _macroscopic_residual():
    a, u = _au
    K = sum(x * y for x, y in zip(a, u, strict=True))
    Kp = sum(x**2 + y**2 for x, y in zip(a, u, strict=True))
    a_dot, u_dot = descent_field_16(a, u)
    k_dot = sum(x * y + z * v for x, y, z, v in zip(u, a_dot, a, u_dot, strict=True))
    kp_dot = sum(2 * (x * y + z * v) for x, y, z, v in zip(a, a_dot, u, u_dot, strict=True))
    derived_k, derived_kp = macroscopic_field_derived()
    return [
        k_dot - Kp * (1 - K),  # K̇ = K′(1 − K)
        kp_dot - 4 * K * (1 - K),  # K̇′ = 4K(1 − K)
        2 * Kp * kp_dot - 8 * K * k_dot,  # d/dt (K′² − 4K²) = 0
        derived_k - Kp_sym * (1 - K_sym),
        derived_kp - 4 * K_sym * (1 - K_sym),
        derived_k.subs(Kp_sym, 2 * K_sym) - 2 * K_sym * (1 - K_sym),  # K′ = 2K: eq. (18)
    ]


# ---------------------------------------------------------------------------------------
# 7. Logistic law (18)–(19) and its inverse

K0 = sp.Symbol("K0", positive=True)
z, z0 = sp.symbols("z z0", real=True)  # logits: K = 1/(1 + e^{−z}) ranges over (0, 1)


def logistic_19(tt, k0):
    C = k0 / (1 - k0)
    return C * sp.exp(2 * (tt - t0)) / (1 + C * sp.exp(2 * (tt - t0)))


def _logistic_residual():
    K = logistic_19(t, K0)
    return [sp.diff(K, t) - 2 * K * (1 - K), K.subs(t, t0) - K0]


def _logistic_inverse_residual():
    # `logistic_time_to(k, k0, t0, rate=2)` = t0 + (logit k − logit k0)/2, with k, k0 in
    # (0, 1) parametrized by their logits z, z0 (k = 1/(1 + e^{−z})).
    k, k0 = 1 / (1 + sp.exp(-z)), 1 / (1 + sp.exp(-z0))

    def logit(p):
        return sp.log(p) - sp.log(1 - p)

    t_hit = t0 + (logit(k) - logit(k0)) / 2
    return [logistic_19(t_hit, k0) - k]


# ---------------------------------------------------------------------------------------
# 8. Plateau departure (§4.3.2), d = 1

_M_PD = 3
_NET_PD = TwoLayer(m=_M_PD, d=1)
_MOM_PD = Moments(d=1, max_degree=6, fixed=_a1_a2(1))
c4, c6, b3 = _MOM_PD[(0, (4,))], _MOM_PD[(0, (6,))], _MOM_PD[(1, (3,))]


def plateau_departure_printed(a, w):
    """f_k, g_k exactly as printed in §4.3.2 (σ‴(0) = s₃)."""
    S3 = sum(x * y**3 for x, y in zip(a, w, strict=True))
    S1 = sum(x * y for x, y in zip(a, w, strict=True))
    f = [-c4 * s3 * S3 * wk / 6 + b3 * s3 * wk**3 / 6 for wk in w]
    g = [
        -c4 * s3 * S3 * ak / 6 + b3 * s3 * ak * wk**2 / 2 - s3 * c4 * S1 * ak * wk**2 / 2
        for ak, wk in zip(a, w, strict=True)
    ]
    return f, g


def plateau_departure_derived(a=None, w=None):
    """f_k, g_k derived: the σ‴(0)-linear part of −∇R − (eq. 10 leading), d = 1, cubic σ.

    f_k = −(1/6) c₄ s₃ (Σ a_l w_l³) w_k + (1/6) b₃ s₃ w_k³ − (1/6) c₄ s₃ (Σ a_l w_l) w_k³,
    g_k = −(1/6) c₄ s₃ (Σ a_l w_l³) a_k + (1/2) b₃ s₃ a_k w_k² − (1/2) c₄ s₃ (Σ a_l w_l) a_k w_k².
    """
    a = _NET_PD.a if a is None else a
    w = [wk[0] for wk in _NET_PD.w] if w is None else w
    f, g = plateau_departure_printed(a, w)
    S1 = sum(x * y for x, y in zip(a, w, strict=True))
    return [fk - c4 * s3 * S1 * wk**3 / 6 for fk, wk in zip(f, w, strict=True)], g


def _plateau_departure_residual(claim=plateau_departure_derived):
    net = _NET_PD
    rem = _remainder(net, _MOM_PD, sigma_taylor)  # cubic σ: exact third-order truncation
    a, w = net.a, [wk[0] for wk in net.w]
    S3 = sum(x * y**3 for x, y in zip(a, w, strict=True))
    f, g = claim(a, w)
    # the s₃² terms (degree 7 in θ) that the third-order truncation also produces
    f2 = [-c6 * S3 * wk**3 / 36 for wk in w]
    g2 = [-c6 * S3 * ak * wk**2 / 12 for ak, wk in zip(a, w, strict=True)]
    claim_all = [x + s3**2 * y for x, y in zip(f + g, f2 + g2, strict=True)]
    return [x - y for x, y in zip(rem, claim_all, strict=True)]


# ---------------------------------------------------------------------------------------

IDENTITIES: tuple[Identity, ...] = (
    Identity(
        "eq. (10) leading terms; eq. (16)",
        PAPER,
        "With σ(z) = z, −∇R of R = ½E(Σ a_k σ(w_kᵀx) − f)² under A1–A2 equals exactly "
        "ȧ_k = w_k¹ − K w_k¹ − Σ_{i≥2}(Σ_l a_l w_lⁱ) w_kⁱ, ẇ_k¹ = (1 − K) a_k, "
        "ẇ_kⁱ = −(Σ_l a_l w_lⁱ) a_k (eq. 10 without f_k, g_k); at w_kⁱ = 0 (i ≥ 2) it is "
        "eq. (16). Checked for m = 2, d = 3.",
        _eq10_residual,
        (*_NET_10.params, *_MOM_10.symbols),
    ),
    Identity(
        "eq. (10) remainder f_k, g_k is O(q³)",
        PAPER,
        "For σ(z) = z + s₃z³/3! + s₄z⁴/4! (A3) and any moments beyond A1–A2, "
        "−∇R − (eq. 10 leading terms) has no terms of degree 0, 1, 2 in (a, w) and vanishes "
        "when s₃ = s₄ = 0. Checked for m = 2, d = 2.",
        _remainder_residual,
        (*_NET_R.params, *_MOM_R.symbols, s3, s4),
    ),
    Identity(
        "eq. (23) solves eq. (15)",
        PAPER,
        "ã = ½(a₀+u₀)eᵗ + ½(a₀−u₀)e⁻ᵗ, w̃¹ = ½(a₀+u₀)eᵗ − ½(a₀−u₀)e⁻ᵗ, w̃ⁱ = wⁱ(0) satisfy "
        "ȧ = w¹, ẇ¹ = a, ẇⁱ = 0 and the initial values.",
        _eq23_residual,
        (a0, u0, v0, t),
    ),
    Identity(
        "general-moment linearization",
        PAPER,
        "For any Σ = E xxᵀ, b = E[f x] (no A1–A2) and cubic σ, the degree-1 part of −∇R is "
        "ȧ_k = bᵀw_k, ẇ_k = a_k b. Checked for m = 2, d = 2.",
        _general_linear_residual,
        (*_NET_G.params, *_MOM_G.symbols, s3),
    ),
    Identity(
        "normalization a = λâ, w = λŵ, t = τ/b",
        PAPER,
        "d = 1, E x² = s², E[f x] = b > 0, σ(z) = z: with λ² = b/s² and τ = b t, "
        "dâ/dτ = ŵ(1 − K̂), dŵ/dτ = â(1 − K̂) (the A1–A2 form), and K = λ²K̂ = (b/s²)K̂, "
        "so K saturates at b/s². Confirms `reduced.multistage.normalization`.",
        _normalization_residual,
        _NORMALIZATION_SYMBOLS,
    ),
    Identity(
        "eq. (16) ⇒ K̇ = K′(1−K), K̇′ = 4K(1−K)",
        PAPER,
        "Along eq. (16), K = Σ a_k w_k¹ and K′ = Σ(a_k² + (w_k¹)²) obey K̇ = K′(1 − K), "
        "K̇′ = 4K(1 − K), so K′² − 4K² is conserved; at K′ = 2K, K̇ = 2K(1 − K) (eq. 18). "
        "Checked for m = 3.",
        _macroscopic_residual,
        (*_au[0], *_au[1], K_sym, Kp_sym),
    ),
    Identity(
        "eq. (19) solves eq. (18)",
        PAPER,
        "K(t) = C e^{2(t−t₀)}/(1 + C e^{2(t−t₀)}), C = K₀/(1 − K₀), satisfies "
        "K̇ = 2K(1 − K) and K(t₀) = K₀.",
        _logistic_residual,
        (t, t0, K0),
    ),
    Identity(
        "logistic_time_to inverts eq. (19)",
        PAPER,
        "For K, K₀ ∈ (0, 1): K(t₀ + (logit K − logit K₀)/2) = K with K(·) of eq. (19).",
        _logistic_inverse_residual,
        (z, z0, t0),
    ),
    Identity(
        "§4.3.2 f_k, g_k (d = 1), f_k corrected",
        PAPER,
        "d = 1, σ(z) = z + s₃z³/3!, A1–A2: −∇R − (eq. 10 leading) = (f_k, g_k) + s₃²(…) with "
        "g_k as printed and f_k = printed − (1/3!) c₄ σ‴(0) (Σ_l a_l w_l) w_k³ (the paper "
        "omits this term); s₃² terms: −c₆(Σ a_l w_l³) w_k³/36, −c₆(Σ a_l w_l³) a_k w_k²/12. "
        "Checked for m = 3.",
        _plateau_departure_residual,
        (*_NET_PD.params, *_MOM_PD.symbols, s3),
    ),
)


# ---------------------------------------------------------------------------------------
# Code generation


def generated_vector_fields(m: int = 3, d: int = 2) -> dict:
    """JAX vector fields generated from the derived expressions.

    **Returns:** a dict name → function with the signature of the hand-written function in
    `reduced.multistage` of the same name:

    - `linearized_vector_field(t, (a, w), b)` — degree-1 part of −∇R, general moments
      (width m, input dimension d; linear σ suffices for the degree-1 part);
    - `descent_vector_field(t, (a, u))` — eq. (16) derived from the risk (width m);
    - `macroscopic_vector_field(t, (K, K′))` — closed system derived from eq. (16);
    - `logistic_vector_field(t, K)` — eq. (18), the macroscopic system at K′ = 2K.
    """
    import jax.numpy as jnp

    out = {}

    net = TwoLayer(m=m, d=d)
    mom = Moments(d=d, max_degree=2)
    bvec = _b_vector(mom)
    lin = _linearized_general(net, mom, lambda zz: zz)
    f_lin = jax_function((*net.params, *bvec), lin)

    def linearized(t, state, b):
        a, w = state
        vals = f_lin(*a, *jnp.ravel(w), *b)
        return jnp.stack(vals[:m]), jnp.stack(vals[m:]).reshape(m, d)

    out["linearized_vector_field"] = linearized

    net1, a_dot, u_dot = _descent_field_derived(m)
    f_desc = jax_function(net1.params, [*a_dot, *u_dot])

    def descent(t, state, args=None):
        a, u = state
        vals = f_desc(*a, *u)
        return jnp.stack(vals[:m]), jnp.stack(vals[m:])

    out["descent_vector_field"] = descent

    k_dot, kp_dot = macroscopic_field_derived()
    f_macro = jax_function((K_sym, Kp_sym), [k_dot, kp_dot])
    out["macroscopic_vector_field"] = lambda t, state, args=None: f_macro(*state)

    f_log = jax_function((K_sym,), [k_dot.subs(Kp_sym, 2 * K_sym)])
    out["logistic_vector_field"] = lambda t, k, args=None: f_log(k)[0]
    return out
