r"""Symbolic derivations for deep linear networks (Saxe, McClelland & Ganguli, ICLR 2014).

Paper: *Exact solutions to the nonlinear dynamics of learning in deep linear neural
networks* (arXiv:1312.6120; equations are cited by content).

Setting. ŷ = W₂W₁x, W₁ (h × d_in), W₂ (d_out × h), averaged squared loss
L = (1/2n) Σ_i ‖y_i − W₂W₁x_i‖² with correlations Σ_xx = (1/n) Σ x xᵀ, Σ_yx = (1/n) Σ y xᵀ,
Σ_yy = (1/n) Σ y yᵀ; gradient flow with time constant τ = 1 (the paper's τ d/dt W = … with
τ = 1 and its Σ¹¹, Σ³¹ as averages). Conventions as in `reduced.deep_linear`.

What is derived (each item is one `Identity`):

1. The averaged loss in terms of the correlations: since ½‖y − Wx‖² is a quadratic form in
   (x, y), averaging replaces x_i x_j, y_i x_j, y_i y_j by the entries of Σ_xx, Σ_yx, Σ_yy:
   L = ½ tr Σ_yy − tr(WᵀΣ_yx) + ½ tr(WΣ_xxWᵀ), W = W₂W₁ (d_in = 3, d_out = 2).
2. The matrix gradient flow of that loss (any symmetric Σ_xx): Ẇ₁ = W₂ᵀ(Σ_yx − W₂W₁Σ_xx),
   Ẇ₂ = (Σ_yx − W₂W₁Σ_xx)W₁ᵀ (d_in = 3, h = 2, d_out = 2).
3. Balancedness: along that flow d/dt (W₁W₁ᵀ − W₂ᵀW₂) = 0, for any Σ_xx and any
   initialization (same sizes).
4. Orthogonal equivariance (Σ_xx = I): for orthogonal U, R, V the flow at
   (R W₁′ Vᵀ, U W₂′ Rᵀ) with Σ_yx = U Σ′ Vᵀ is (R Ẇ₁′ Vᵀ, U Ẇ₂′ Rᵀ), so one may work in the
   SVD coordinates of Σ_yx. Checked for 2 × 2 U, R, V all rotations or all reflections
   (entries ±c, ±s, c² + s² = 1): the defect is an explicit combination
   Σ_i q_i (c_i² + s_i² − 1) of the circle relations (Gröbner division, remainder 0).
5. Decoupling in SVD coordinates (Σ_xx = I, Σ_yx = [diag(s₁, s₂) 0], d_in = 3, h = 3,
   d_out = 2, one spare hidden unit): on W₁ = diag(a) and W₂ = diag(b) (padded with zeros)
   the matrix flow is ȧ_α = b_α(s_α − a_α b_α), ḃ_α = a_α(s_α − a_α b_α) and every other
   entry has zero velocity, so the aligned family is invariant; and the loss there is
   ½ Σ_α (s_α − a_α b_α)² + ½(tr Σ_yy − Σ_α s_α²).
6. One mode: the gradient flow of ½(s − ab)² is ȧ = b(s − ab), ḃ = a(s − ab); u = ab obeys
   u̇ = (a² + b²)(s − u), i.e. u̇ = 2u(s − u) when a = b (the factor 2 with τ = 1); a² − b²
   is conserved.
7. The closed form u(t) = s e^{2st}/(e^{2st} − 1 + s/u₀) solves u̇ = 2u(s − u) with
   u(0) = u₀; the overflow-free form 1/((1 − e^{−2st})/s + e^{−2st}/u₀) used by
   `reduced.deep_linear.mode_strength` is the same function, and its s = 0 branch
   u₀/(1 + 2u₀t) solves u̇ = −2u².
8. `mode_time` inverts the closed form: with u_f = f s,
   t(f) = [ln f − ln(1 − f) + ln(s − u₀) − ln u₀]/(2s) gives u(t(f)) = f s (checked for
   0 < u₀ < s, 0 < f < 1, parametrized by f/(1 − f) = p > 0 and (s − u₀)/u₀ = q > 0).

The module also generates JAX functions from the derived expressions
(`generated_vector_fields`), which the tests compare with `reduced.deep_linear`.
"""

from __future__ import annotations

import sympy as sp

from ._core import Identity
from ._tools import jax_function

PAPER = "deep-linear"

__all__ = [
    "IDENTITIES",
    "generated_vector_fields",
    "averaged_loss",
    "correlation_loss",
    "matrix_flow",
    "mode_closed_form",
    "mode_time_formula",
]

t = sp.Symbol("t", nonnegative=True)
s = sp.Symbol("s", positive=True)
u0 = sp.Symbol("u0", positive=True)
a, b, u = sp.symbols("a b u", real=True)


def _matrix(name: str, rows: int, cols: int, symmetric: bool = False) -> sp.Matrix:
    """A matrix of real symbols `name_ij` (1-based); symmetric ones share `name_ij`, i ≤ j."""

    def entry(i, j):
        if symmetric and i > j:
            i, j = j, i
        return sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True)

    return sp.Matrix(rows, cols, entry)


def _syms(*mats) -> tuple[sp.Symbol, ...]:
    out: set[sp.Symbol] = set()
    for m in mats:
        out |= m.free_symbols
    return tuple(sorted(out, key=str))


def correlation_loss(W, Sxx, Syx, Syy):
    """L = ½ tr Σ_yy − tr(WᵀΣ_yx) + ½ tr(WΣ_xxWᵀ)."""
    return Syy.trace() / 2 - (W.T * Syx).trace() + (W * Sxx * W.T).trace() / 2


# ---------------------------------------------------------------------------------------
# 1. The averaged loss in correlations

_DIN, _H, _DOUT = 3, 2, 2
_x = sp.Matrix(sp.symbols(f"x1:{_DIN + 1}", real=True))
_y = sp.Matrix(sp.symbols(f"y1:{_DOUT + 1}", real=True))
_W = _matrix("W", _DOUT, _DIN)
_Sxx = _matrix("Sxx", _DIN, _DIN, symmetric=True)
_Syx = _matrix("Syx", _DOUT, _DIN)
_Syy = _matrix("Syy", _DOUT, _DOUT, symmetric=True)


def averaged_loss(W, x=_x, y=_y, Sxx=_Sxx, Syx=_Syx, Syy=_Syy):
    """(1/n) Σ_i ½‖y_i − Wx_i‖² by linearity of the average: the per-sample loss is a
    quadratic form in (x, y), and averaging maps x_i x_j ↦ (Σ_xx)_ij, y_i x_j ↦ (Σ_yx)_ij,
    y_i y_j ↦ (Σ_yy)_ij. Raises if the per-sample loss is not such a quadratic form."""
    r = y - W * x
    per_sample = sp.expand((r.T * r)[0, 0] / 2)
    # sympy's Matrix iterates through __getitem__, which pyright does not take as Iterable
    xs, ys = list(x), list(y)  # pyright: ignore[reportArgumentType]
    poly = sp.Poly(per_sample, *xs, *ys)
    total = sp.S.Zero
    for monom, coeff in poly.terms():
        px, py = monom[: len(xs)], monom[len(xs) :]
        ix = [i for i, p in enumerate(px) for _ in range(p)]
        iy = [i for i, p in enumerate(py) for _ in range(p)]
        if len(ix) + len(iy) != 2:
            raise RuntimeError(f"per-sample loss has a term of degree ≠ 2 in (x, y): {monom}")
        if len(ix) == 2:
            moment = Sxx[ix[0], ix[1]]
        elif len(iy) == 2:
            moment = Syy[iy[0], iy[1]]
        else:
            moment = Syx[iy[0], ix[0]]
        total += coeff * moment
    return total


def _loss_residual():
    return [averaged_loss(_W) - correlation_loss(_W, _Sxx, _Syx, _Syy)]


# ---------------------------------------------------------------------------------------
# 2. The matrix gradient flow; 3. balancedness

_W1 = _matrix("w1", _H, _DIN)
_W2 = _matrix("w2", _DOUT, _H)


def matrix_flow(W1, W2, Sxx, Syx, Syy):
    """(−∂L/∂W₁, −∂L/∂W₂) of the correlation-form loss, entry by entry (sympy.diff)."""
    L = correlation_loss(W2 * W1, Sxx, Syx, Syy)
    F1 = W1.applyfunc(lambda w: -sp.diff(L, w))
    F2 = W2.applyfunc(lambda w: -sp.diff(L, w))
    return F1, F2


def flow_at(W1, W2, Sxx, Syx, Syy):
    """`matrix_flow` evaluated at the given (possibly non-symbol) weights."""
    P1 = _matrix("P1", *W1.shape)
    P2 = _matrix("P2", *W2.shape)
    F1, F2 = matrix_flow(P1, P2, Sxx, Syx, Syy)
    point = dict(zip([*P1, *P2], [*W1, *W2], strict=True))
    return F1.subs(point, simultaneous=True), F2.subs(point, simultaneous=True)


def _flow_residual():
    F1, F2 = matrix_flow(_W1, _W2, _Sxx, _Syx, _Syy)
    E = _Syx - _W2 * _W1 * _Sxx
    return list(F1 - _W2.T * E) + list(F2 - E * _W1.T)


def _balancedness_residual():
    F1, F2 = matrix_flow(_W1, _W2, _Sxx, _Syx, _Syy)
    d_dt = F1 * _W1.T + _W1 * F1.T - (F2.T * _W2 + _W2.T * F2)
    return list(d_dt)


_FLOW_SYMBOLS = _syms(_W1, _W2, _Sxx, _Syx, _Syy)


# ---------------------------------------------------------------------------------------
# 4. Orthogonal equivariance (Σ_xx = I), 2 × 2

_cs = sp.symbols("c_U s_U c_R s_R c_V s_V", real=True)
_pairs = tuple(zip(_cs[0::2], _cs[1::2], strict=True))  # (c, s) of U, R, V
_CIRCLES = [c**2 + sn**2 - 1 for c, sn in _pairs]
_E1 = _matrix("v1", 2, 2)  # W₁′
_E2 = _matrix("v2", 2, 2)  # W₂′
_Sp = _matrix("Sp", 2, 2)  # Σ′
_Y2 = _matrix("Syy", 2, 2, symmetric=True)


def _orthogonal(c, sn, reflection: bool) -> sp.Matrix:
    """A 2 × 2 rotation or reflection with c² + s² = 1 (together: every orthogonal 2 × 2)."""
    return sp.Matrix([[c, sn], [sn, -c]]) if reflection else sp.Matrix([[c, -sn], [sn, c]])


def _equivariance_residual():
    """Certificates r − Σ_i q_i g_i, g_i = c_i² + s_i² − 1: each is 0 exactly when the
    Gröbner division of the equivariance defect r by the circle relations leaves no
    remainder, so r vanishes wherever U, R, V are orthogonal."""
    F1p, F2p = matrix_flow(_E1, _E2, sp.eye(2), _Sp, _Y2)
    others = sorted(_syms(_E1, _E2, _Sp, _Y2), key=str)
    res = []
    for reflection in (False, True):
        U, R, V = (_orthogonal(c, sn, reflection) for c, sn in _pairs)
        F1, F2 = flow_at(R * _E1 * V.T, U * _E2 * R.T, sp.eye(2), U * _Sp * V.T, _Y2)
        for r in list(F1 - R * F1p * V.T) + list(F2 - U * F2p * R.T):
            r = sp.expand(r)
            quotients, _ = sp.reduced(r, _CIRCLES, *_cs[1::2], *_cs[0::2], *others)
            res.append(r - sum(qi * g for qi, g in zip(quotients, _CIRCLES, strict=True)))
    return res


# ---------------------------------------------------------------------------------------
# 5. Decoupling in SVD coordinates (Σ_xx = I, d_in = 3, h = 3, d_out = 2)

_s = sp.symbols("s1 s2", positive=True)
_a = sp.symbols("a1 a2", real=True)
_b = sp.symbols("b1 b2", real=True)
_Y5 = _matrix("Syy", 2, 2, symmetric=True)


def _padded(diag, rows, cols):
    return sp.Matrix(rows, cols, lambda i, j: diag[i] if i == j and i < len(diag) else 0)


def _decoupling_residual():
    W1, W2 = _padded(_a, 3, 3), _padded(_b, 2, 3)
    Syx = _padded(_s, 2, 3)
    F1, F2 = flow_at(W1, W2, sp.eye(3), Syx, _Y5)
    a_dot = [bb * (ss - aa * bb) for aa, bb, ss in zip(_a, _b, _s, strict=True)]
    b_dot = [aa * (ss - aa * bb) for aa, bb, ss in zip(_a, _b, _s, strict=True)]
    res = list(F1 - _padded(a_dot, 3, 3)) + list(F2 - _padded(b_dot, 2, 3))
    L = correlation_loss(W2 * W1, sp.eye(3), Syx, _Y5)
    modes = sum((ss - aa * bb) ** 2 for aa, bb, ss in zip(_a, _b, _s, strict=True)) / 2
    res.append(L - (modes + (_Y5.trace() - sum(ss**2 for ss in _s)) / 2))
    return res


# ---------------------------------------------------------------------------------------
# 6. One mode; 7. the closed form; 8. its inverse


def mode_pair_field():
    """(ȧ, ḃ) = −∇ of ½(s − ab)², derived."""
    E = (s - a * b) ** 2 / 2
    return -sp.diff(E, a), -sp.diff(E, b)


def mode_field_balanced():
    """u̇ for u = ab on a = b = √u (u > 0), derived from `mode_pair_field` by the chain rule."""
    a_dot, b_dot = mode_pair_field()
    u_dot = a_dot * b + a * b_dot
    up = sp.Symbol("u", positive=True)
    return sp.expand(u_dot.subs({a: sp.sqrt(up), b: sp.sqrt(up)})).subs(up, u)


def _mode_residual():
    a_dot, b_dot = mode_pair_field()
    u_dot = a_dot * b + a * b_dot
    return [
        a_dot - b * (s - a * b),
        b_dot - a * (s - a * b),
        u_dot - (a**2 + b**2) * (s - a * b),  # u̇ = (a² + b²)(s − u)
        u_dot.subs(b, a) - 2 * a**2 * (s - a**2),  # a = b, u = a²: u̇ = 2u(s − u)
        mode_field_balanced() - 2 * u * (s - u),
        2 * a * a_dot - 2 * b * b_dot,  # d/dt (a² − b²) = 0
    ]


def mode_closed_form(tt: sp.Expr = t, ss: sp.Expr = s, uu0: sp.Expr = u0):
    """u(t) = s e^{2st}/(e^{2st} − 1 + s/u₀), the paper's sigmoidal solution (τ = 1)."""
    e = sp.exp(2 * ss * tt)
    return ss * e / (e - 1 + ss / uu0)


def _closed_form_residual():
    U = mode_closed_form()
    stable = 1 / ((1 - sp.exp(-2 * s * t)) / s + sp.exp(-2 * s * t) / u0)
    at_zero = 1 / (2 * t + 1 / u0)
    return [
        sp.diff(U, t) - 2 * U * (s - U),
        U.subs(t, 0) - u0,
        stable - U,
        sp.diff(at_zero, t) + 2 * at_zero**2,  # s = 0: u̇ = −2u²
        at_zero.subs(t, 0) - u0,
    ]


p, q = sp.symbols("p q", positive=True)  # f/(1 − f) and (s − u₀)/u₀


def mode_time_formula(f, ss=s, uu0=u0):
    """t(f) = [ln f − ln(1 − f) + ln(s − u₀) − ln u₀]/(2s), as `mode_time` evaluates it."""
    return (sp.log(f) - sp.log(1 - f) + sp.log(ss - uu0) - sp.log(uu0)) / (2 * ss)


def _inverse_residual():
    f, uu0 = p / (1 + p), s / (1 + q)
    return [mode_closed_form(mode_time_formula(f, s, uu0), s, uu0) - f * s]


# ---------------------------------------------------------------------------------------

IDENTITIES: tuple[Identity, ...] = (
    Identity(
        "averaged loss in correlations",
        PAPER,
        "(1/n) Σ ½‖y − Wx‖² = ½ tr Σ_yy − tr(WᵀΣ_yx) + ½ tr(WΣ_xxWᵀ) with the averaged "
        "correlations Σ_xx = (1/n) Σ x xᵀ, Σ_yx = (1/n) Σ y xᵀ, Σ_yy = (1/n) Σ y yᵀ "
        "(the per-sample loss is a quadratic form in (x, y)). Checked for d_in = 3, d_out = 2.",
        _loss_residual,
        _syms(_W, _x, _y, _Sxx, _Syx, _Syy),
    ),
    Identity(
        "matrix gradient flow (τ = 1)",
        PAPER,
        "−∂L/∂W₁ = W₂ᵀ(Σ_yx − W₂W₁Σ_xx), −∂L/∂W₂ = (Σ_yx − W₂W₁Σ_xx)W₁ᵀ for the averaged "
        "loss and any symmetric Σ_xx: the paper's learning equations with τ = 1 and "
        "averaged correlations. Checked for d_in = 3, h = 2, d_out = 2.",
        _flow_residual,
        _FLOW_SYMBOLS,
    ),
    Identity(
        "balancedness W₁W₁ᵀ − W₂ᵀW₂ conserved",
        PAPER,
        "Along the matrix flow, d/dt (W₁W₁ᵀ − W₂ᵀW₂) = Ẇ₁W₁ᵀ + W₁Ẇ₁ᵀ − Ẇ₂ᵀW₂ − W₂ᵀẆ₂ = 0 "
        "for any Σ_xx and any initialization. Checked for d_in = 3, h = 2, d_out = 2.",
        _balancedness_residual,
        _FLOW_SYMBOLS,
    ),
    Identity(
        "orthogonal equivariance (Σ_xx = I)",
        PAPER,
        "For orthogonal U, R, V: the flow at (R W₁′ Vᵀ, U W₂′ Rᵀ) with Σ_yx = U Σ′ Vᵀ equals "
        "(R Ẇ₁′ Vᵀ, U Ẇ₂′ Rᵀ), Ẇ′ the flow at (W₁′, W₂′) with Σ′; so the SVD coordinates of "
        "Σ_yx may be used. Checked for 2 × 2 U, R, V all rotations or all reflections "
        "(entries ±c, ±s with c² + s² = 1): the defect is Σ_i q_i (c_i² + s_i² − 1).",
        _equivariance_residual,
        _syms(_E1, _E2, _Sp, _Y2) + _cs,
    ),
    Identity(
        "aligned modes decouple; loss ½Σ(s − ab)² + const",
        PAPER,
        "Σ_xx = I, Σ_yx = [diag(s₁, s₂) 0], W₁ = diag(a) and W₂ = diag(b) padded with zeros "
        "(d_in = 3, h = 3, d_out = 2): the matrix flow is ȧ_α = b_α(s_α − a_α b_α), "
        "ḃ_α = a_α(s_α − a_α b_α) with zero velocity in every other entry (the family is "
        "invariant), and L = ½Σ_α(s_α − a_α b_α)² + ½(tr Σ_yy − Σ_α s_α²).",
        _decoupling_residual,
        (*_a, *_b, *_s, *_syms(_Y5)),
    ),
    Identity(
        "one mode: ȧ = b(s−ab), ḃ = a(s−ab); u̇ = 2u(s−u)",
        PAPER,
        "The gradient flow of ½(s − ab)² is ȧ = b(s − ab), ḃ = a(s − ab); u = ab obeys "
        "u̇ = (a² + b²)(s − u), which is u̇ = 2u(s − u) on the balanced branch a = b "
        "(τ = 1; derived on a = b = √u as well); a² − b² is conserved.",
        _mode_residual,
        (a, b, u, s),
    ),
    Identity(
        "sigmoidal closed form solves u̇ = 2u(s − u)",
        PAPER,
        "u(t) = s e^{2st}/(e^{2st} − 1 + s/u₀) satisfies u̇ = 2u(s − u), u(0) = u₀, and equals "
        "the overflow-free 1/((1 − e^{−2st})/s + e^{−2st}/u₀); at s = 0, u₀/(1 + 2u₀t) solves "
        "u̇ = −2u², u(0) = u₀.",
        _closed_form_residual,
        (t, s, u0),
    ),
    Identity(
        "time to fraction f inverts the closed form",
        PAPER,
        "For 0 < u₀ < s and 0 < f < 1: t(f) = (1/2s) ln[f(s − u₀)/(u₀(1 − f))] gives "
        "u(t(f)) = f s (the paper's t = (τ/2s) ln[u_f(s − u₀)/(u₀(s − u_f))], τ = 1).",
        _inverse_residual,
        (p, q, s),
    ),
)


# ---------------------------------------------------------------------------------------
# Code generation


def generated_vector_fields(d_in: int = 4, h: int = 3, d_out: int = 2) -> dict:
    """JAX functions generated from the derived expressions.

    **Returns:** a dict name → function with the signature of the hand-written function in
    `reduced.deep_linear` of the same name:

    - `mode_vector_field(t, u, s)` — u̇ derived on the balanced branch a = b = √u;
    - `mode_pair_vector_field(t, (a, b), s)` — −∇ of ½(s − ab)²;
    - `linear_net_vector_field(t, (W₁, W₂), (Σ_xx, Σ_yx))` — the matrix flow derived by
      differentiating the correlation-form loss entry by entry (sizes d_in, h, d_out; Σ_xx
      is read from its upper triangle);
    - `mode_strength(t, s, u0)` — the paper's closed form (not overflow-safe: moderate s·t);
    - `mode_time(f, s, u0)` — the time-to-fraction formula.
    """
    import jax.numpy as jnp

    out = {}
    f_mode = jax_function((u, s), [mode_field_balanced()])
    out["mode_vector_field"] = lambda t, uu, ss: f_mode(uu, ss)[0]

    f_pair = jax_function((a, b, s), list(mode_pair_field()))
    out["mode_pair_vector_field"] = lambda t, state, ss: f_pair(*state, ss)

    W1, W2 = _matrix("w1", h, d_in), _matrix("w2", d_out, h)
    Sxx, Syx = _matrix("Sxx", d_in, d_in, symmetric=True), _matrix("Syx", d_out, d_in)
    Syy = _matrix("Syy", d_out, d_out, symmetric=True)
    F1, F2 = matrix_flow(W1, W2, Sxx, Syx, Syy)
    upper = [Sxx[i, j] for i in range(d_in) for j in range(i, d_in)]
    # sympy types a matrix's entries as MatrixElement | list (they are its Symbols)
    f_flow = jax_function((*W1, *W2, *upper, *Syx), [*F1, *F2])  # pyright: ignore[reportArgumentType]
    iu = jnp.triu_indices(d_in)

    def flow(t, state, args):
        w1, w2 = state
        sxx, syx = args
        vals = f_flow(*jnp.ravel(w1), *jnp.ravel(w2), *jnp.asarray(sxx)[iu], *jnp.ravel(syx))
        vals = [jnp.broadcast_to(v, ()) for v in vals]  # constant entries come back as ints
        n1 = h * d_in
        return jnp.stack(vals[:n1]).reshape(h, d_in), jnp.stack(vals[n1:]).reshape(d_out, h)

    out["linear_net_vector_field"] = flow

    f_cf = jax_function((t, s, u0), [mode_closed_form()])
    out["mode_strength"] = lambda tt, ss, uu0: f_cf(tt, ss, uu0)[0]
    fs = sp.Symbol("f", positive=True)
    f_time = jax_function((fs, s, u0), [mode_time_formula(fs)])
    out["mode_time"] = lambda ff, ss, uu0: f_time(ff, ss, uu0)[0]
    return out
