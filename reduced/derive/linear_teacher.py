r"""Symbolic derivations for the linear-teacher paper, *Towards Understanding Learning in
Neural Networks with Linear Teachers*, §4–§6.

Setting. N_W(x) = v Σ_{j≤k} σ(w^(j)·x) − v Σ_{j≤k} σ(u^(j)·x), σ(z) = max(αz, z) with leaky
slope 0 < α < 1 (written α = 1/(1 + γ), γ > 0, which covers (0, 1) exactly), v > 0.
"Perfectly clustered": all w^(j) = w and all u^(j) = u; p = w·x, q = u·x.

What is derived (each item is one `Identity`):

1. Region-wise form (perfectly clustered, k = 3 neurons per type):
   p ≥ 0, q ≥ 0: N = vk(p − q);   p ≥ 0, q < 0: N = vk(p − αq);
   p < 0, q ≥ 0: N = vk(αp − q);  p < 0, q < 0: N = vkα(p − q).
2. PAR margins (c^w = y, c^u = −y): y = +1: y N = vk(w·x − α u·x); y = −1:
   y N = vk(u·x − α w·x) — the reconstruction of eq. (1) is right; and ‖W‖² = k(‖w‖² + ‖u‖²).
3. KKT inside an NAR (k = 2, d = 2, n = 3; slopes, labels, multipliers symbolic). In an NAR
   every pre-activation is bounded away from 0 (≥ β‖·‖ in absolute value), so N_W is
   differentiable there and on each point i all w-neurons share one slope s^w_i ∈ {1, α}
   and all u-neurons one slope s^u_i: N_W(x_i) = v Σ_j s^w_i w^(j)·x_i − v Σ_j s^u_i u^(j)·x_i.
   Stationarity of ½‖W‖² − Σ_i λ_i (y_i N_W(x_i) − 1), solved for W, gives
       w^(j) = v Σ_i λ_i y_i s^w_i x_i,   u^(j) = −v Σ_i λ_i y_i s^u_i x_i   for every j,
   the right sides being independent of j: **every KKT point inside an NAR is perfectly
   clustered** (primal feasibility and complementary slackness are not needed for this).
   In the PAR (s^w_i = 1, s^u_i = α for y_i = +1; α, 1 for y_i = −1; checked for labels
   (+1, +1, −1)) this reads w = v(Σ₊ λ_i x_i − α Σ₋ λ_i x_i), u = v(Σ₋ λ_i x_i − α Σ₊ λ_i x_i),
   and (w, u) with the same multipliers is a stationary point of the reduced problem
   min (k/2)(‖w‖² + ‖u‖²) s.t. PAR margins ≥ 1 (k(‖w‖² + ‖u‖²) in another reading: same
   minimizer). What is *not* proved here: that gradient flow converges to a KKT direction
   (Lyu & Li), nor that it stays in the NAR.
4. Smoothed margin (Lyu & Li 2020) for ℓ(q) = log(1 + e^{−q}): writing ℓ = e^{−f},
   f(q) = −log log(1 + e^{−q}) with inverse g(y) = −log(exp(e^{−y}) − 1), the smoothed
   margin of a 1-homogeneous net is γ̃ = g(log(1/L_sum))/‖W‖ = −log(exp(L_sum) − 1)/‖W‖,
   i.e. ℓ^{−1}(L_sum)/‖W‖; ℓ^{−1} is decreasing (derivative −e^s/(e^s − 1)), so
   ℓ^{−1}(L_sum) ≤ ℓ^{−1}(ℓ(min_i q_i)) = min_i q_i: γ̃ ≤ γ.
"""

from __future__ import annotations

import sympy as sp

from ._core import Identity
from ._tools import jax_function

PAPER = "linear-teacher"

__all__ = ["IDENTITIES", "generated_functions", "leaky"]

gamma = sp.Symbol("gamma", positive=True)
alpha = 1 / (1 + gamma)  # leaky slope, 0 < α < 1
v = sp.Symbol("v", positive=True)
P, Q = sp.symbols("P Q", positive=True)  # |w·x|, |u·x|
_K = 3


def leaky(z, slope=alpha):
    """σ(z) = max(slope·z, z)."""
    return sp.Max(slope * z, z)


def network(p_list, q_list):
    """N_W(x) from the pre-activations p_j = w^(j)·x, q_j = u^(j)·x (eq. 1)."""
    return v * sum(leaky(p) for p in p_list) - v * sum(leaky(q) for q in q_list)


def regionwise(p, q, k=_K, slope=alpha):
    """The claimed region-wise form of a perfectly clustered net."""
    if p.is_nonnegative and q.is_nonnegative:
        return v * k * (p - q)
    if p.is_nonnegative and q.is_negative:
        return v * k * (p - slope * q)
    if p.is_negative and q.is_nonnegative:
        return v * k * (slope * p - q)
    return v * k * slope * (p - q)


# the four open sign regions, and their boundaries (where both neighbouring forms agree)
_REGIONS = (
    (P, Q),
    (P, -Q),
    (-P, Q),
    (-P, -Q),
    *((p, sp.S.Zero) for p in (P, -P, sp.S.Zero)),
    *((sp.S.Zero, q) for q in (Q, -Q)),
)


def _regionwise_residual():
    return [network([p] * _K, [q] * _K) - regionwise(p, q) for p, q in _REGIONS]


# ---------------------------------------------------------------------------------------
# 2. PAR margins and the norm of a clustered W

_D = 2
_w = sp.symbols(f"wv1:{_D + 1}", real=True)
_u = sp.symbols(f"uv1:{_D + 1}", real=True)


def par_margin(y, p, q, k=_K, slope=alpha):
    """§4 (reconstructed): y = +1: vk(w·x − α u·x); y = −1: vk(u·x − α w·x)."""
    return v * k * (p - slope * q) if y == 1 else v * k * (q - slope * p)


def _par_residual():
    # PAR: sign(w·x) = y and sign(u·x) = −y on every point.
    res = [
        1 * network([P] * _K, [-Q] * _K) - par_margin(1, P, -Q),  # y = +1: p > 0 > q
        -1 * network([-P] * _K, [Q] * _K) - par_margin(-1, -P, Q),  # y = −1: p < 0 < q
    ]
    W_rows = [_w] * _K + [_u] * _K  # W ∈ ℝ^{2k×d}, rows w^(j), u^(j)
    norm2 = sum(c**2 for row in W_rows for c in row)
    res.append(norm2 - _K * (sum(c**2 for c in _w) + sum(c**2 for c in _u)))
    return res


# ---------------------------------------------------------------------------------------
# 3. KKT inside an NAR

_KN, _N = 2, 3
_X = [sp.symbols(f"x{i}_1:{_D + 1}", real=True) for i in range(1, _N + 1)]
_y = sp.symbols(f"y1:{_N + 1}", real=True)
_lam = sp.symbols(f"lambda1:{_N + 1}", nonnegative=True)
_sw = sp.symbols(f"sw1:{_N + 1}", positive=True)  # slope of the w neurons on x_i (1 or α)
_su = sp.symbols(f"su1:{_N + 1}", positive=True)  # slope of the u neurons on x_i (1 or α)
_Wn = [sp.symbols(f"w{j}_1:{_D + 1}", real=True) for j in range(1, _KN + 1)]
_Un = [sp.symbols(f"u{j}_1:{_D + 1}", real=True) for j in range(1, _KN + 1)]


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def _network_nar(i, sw=_sw, su=_su):
    """N_W(x_i) inside an NAR: one slope per point and neuron type."""
    return v * sum(sw[i] * _dot(w, _X[i]) for w in _Wn) - v * sum(
        su[i] * _dot(u, _X[i]) for u in _Un
    )


def kkt_stationary_point(sw=_sw, su=_su):
    """Solve ∇_W [½‖W‖² − Σ λ_i (y_i N_W(x_i) − 1)] = 0 for W."""
    params = [c for row in _Wn + _Un for c in row]
    lagrangian = sp.Rational(1, 2) * sum(c**2 for c in params) - sum(
        lam * (y * _network_nar(i, sw, su) - 1)
        for i, (lam, y) in enumerate(zip(_lam, _y, strict=True))
    )
    sol = sp.solve([sp.diff(lagrangian, c) for c in params], params, dict=True)
    if len(sol) != 1:
        raise RuntimeError(f"stationarity should have one solution; got {sol}")
    return [[sol[0][c] for c in row] for row in _Wn], [[sol[0][c] for c in row] for row in _Un]


def _kkt_residual():
    W, U = kkt_stationary_point()
    w_claim = [
        v * sum(lam * y * s * x[c] for lam, y, s, x in zip(_lam, _y, _sw, _X, strict=True))
        for c in range(_D)
    ]
    u_claim = [
        -v * sum(lam * y * s * x[c] for lam, y, s, x in zip(_lam, _y, _su, _X, strict=True))
        for c in range(_D)
    ]
    res = [W[j][c] - w_claim[c] for j in range(_KN) for c in range(_D)]
    res += [U[j][c] - u_claim[c] for j in range(_KN) for c in range(_D)]
    return res


_Y_PAR = (1, 1, -1)


def _kkt_par_residual():
    a = alpha
    sw = [1 if y == 1 else a for y in _Y_PAR]
    su = [a if y == 1 else 1 for y in _Y_PAR]
    W, U = kkt_stationary_point(sw, su)
    W = [[c.subs(dict(zip(_y, _Y_PAR, strict=True))) for c in row] for row in W]
    U = [[c.subs(dict(zip(_y, _Y_PAR, strict=True))) for c in row] for row in U]
    pos = [i for i, y in enumerate(_Y_PAR) if y == 1]
    neg = [i for i, y in enumerate(_Y_PAR) if y == -1]

    def s(idx, c):
        return sum(_lam[i] * _X[i][c] for i in idx)

    w_par = [v * (s(pos, c) - a * s(neg, c)) for c in range(_D)]
    u_par = [v * (s(neg, c) - a * s(pos, c)) for c in range(_D)]
    res = [W[j][c] - w_par[c] for j in range(_KN) for c in range(_D)]
    res += [U[j][c] - u_par[c] for j in range(_KN) for c in range(_D)]
    # reduced problem: ∇_{w,u} [(k/2)(‖w‖²+‖u‖²) − Σ λ_i (margin_i − 1)] at (w_par, u_par)
    wr, ur = sp.symbols(f"wr1:{_D + 1}", real=True), sp.symbols(f"ur1:{_D + 1}", real=True)
    margins = [
        par_margin(y, _dot(wr, _X[i]), _dot(ur, _X[i]), k=_KN, slope=a)
        for i, y in enumerate(_Y_PAR)
    ]
    lag = sp.Rational(_KN, 2) * (sum(c**2 for c in wr) + sum(c**2 for c in ur)) - sum(
        lam * (mi - 1) for lam, mi in zip(_lam, margins, strict=True)
    )
    at = dict(zip((*wr, *ur), (*w_par, *u_par), strict=True))
    res += [sp.diff(lag, c).subs(at) for c in (*wr, *ur)]
    return res


_KKT_SYMBOLS = (
    v,
    gamma,
    *_y,
    *_lam,
    *_sw,
    *_su,
    *[c for x in _X for c in x],
)

# ---------------------------------------------------------------------------------------
# 4. Smoothed margin

sl = sp.Symbol("s", positive=True)  # a loss value L_sum > 0
q = sp.Symbol("q", real=True)  # a margin
yv = sp.Symbol("y", real=True)  # Lyu & Li's y = log(1/L)


def logistic_loss(qq):
    return sp.log(1 + sp.exp(-qq))


def inverse_logistic_loss(ss):
    """ℓ^{−1}(s) = −log(exp(s) − 1), s > 0."""
    return -sp.log(sp.exp(ss) - 1)


def _smoothed_margin_residual():
    f = -sp.log(logistic_loss(q))  # ℓ = e^{−f}

    def g(yy):  # f^{−1}
        return -sp.log(sp.exp(sp.exp(-yy)) - 1)

    return [
        sp.exp(-f) - logistic_loss(q),  # ℓ = e^{−f(q)}
        logistic_loss(inverse_logistic_loss(sl)) - sl,  # ℓ(ℓ^{−1}(s)) = s
        inverse_logistic_loss(logistic_loss(q)) - q,  # ℓ^{−1}(ℓ(q)) = q
        f.subs(q, g(yv)) - yv,  # f(g(y)) = y
        g(sp.log(1 / sl)) - inverse_logistic_loss(sl),  # Lyu–Li form = −log(e^{L} − 1)
        sp.diff(inverse_logistic_loss(sl), sl) + sp.exp(sl) / (sp.exp(sl) - 1),  # decreasing
    ]


# ---------------------------------------------------------------------------------------

IDENTITIES: tuple[Identity, ...] = (
    Identity(
        "region-wise N_W (perfectly clustered)",
        PAPER,
        "σ(z) = max(αz, z), 0 < α < 1, all w^(j) = w, u^(j) = u, p = w·x, q = u·x: N = vk(p − q) "
        "(p ≥ 0, q ≥ 0), vk(p − αq) (p ≥ 0, q < 0), vk(αp − q) (p < 0, q ≥ 0), vkα(p − q) "
        "(p < 0, q < 0), boundaries included. k = 3.",
        _regionwise_residual,
        (v, gamma, P, Q),
    ),
    Identity(
        "PAR margins; ‖W‖² = k(‖w‖² + ‖u‖²)",
        PAPER,
        "In the PAR (sign w·x = y, sign u·x = −y): y = +1: yN = vk(w·x − α u·x); y = −1: "
        "yN = vk(u·x − α w·x); a clustered W has ‖W‖² = k(‖w‖² + ‖u‖²). k = 3, d = 2.",
        _par_residual,
        (v, gamma, P, Q, *_w, *_u),
    ),
    Identity(
        "KKT in an NAR ⇒ perfectly clustered",
        PAPER,
        "Stationarity of ½‖W‖² − Σλ_i(y_i N_W(x_i) − 1) with N_W linear per NAR pattern (slopes "
        "s^w_i, s^u_i shared by all neurons of a type) gives w^(j) = vΣλ_i y_i s^w_i x_i and "
        "u^(j) = −vΣλ_i y_i s^u_i x_i for every j: all neurons of a type coincide. "
        "k = 2, d = 2, n = 3, symbolic labels, slopes, multipliers.",
        _kkt_residual,
        (*_KKT_SYMBOLS,),
    ),
    Identity(
        "KKT in the PAR ⇒ reduced convex problem",
        PAPER,
        "In the PAR (labels +1, +1, −1): w = v(Σ₊λ_i x_i − αΣ₋λ_i x_i), u = v(Σ₋λ_i x_i − "
        "αΣ₊λ_i x_i), and (w, u) is stationary for min (k/2)(‖w‖² + ‖u‖²) s.t. PAR margins ≥ 1 "
        "with the same multipliers.",
        _kkt_par_residual,
        (*_KKT_SYMBOLS,),
    ),
    Identity(
        "smoothed margin = ℓ⁻¹(L_sum)/‖W‖",
        PAPER,
        "ℓ(q) = log(1 + e^{−q}) = e^{−f(q)}, f = −log ℓ, g = f⁻¹: g(log 1/L) = −log(e^L − 1) = "
        "ℓ⁻¹(L), ℓ(ℓ⁻¹(s)) = s, ℓ⁻¹(ℓ(q)) = q, (ℓ⁻¹)′(s) = −e^s/(e^s − 1) < 0.",
        _smoothed_margin_residual,
        (sl, q, yv),
    ),
)


# ---------------------------------------------------------------------------------------
# Code generation


def generated_functions() -> dict:
    """JAX functions generated from the symbolic definitions.

    **Returns:** a dict with
    - `network_clustered(p, q, v, k, slope)`: v k (σ(p) − σ(q)) from `sympy.Max`;
    - `smoothed_margin(l_sum, norm)`: ℓ^{−1}(l_sum)/norm from the inverse loss.
    """
    p_, q_, v_, k_, a_ = sp.symbols("p q v k a", real=True)
    net = v_ * k_ * (leaky(p_, a_) - leaky(q_, a_))
    f_net = jax_function((p_, q_, v_, k_, a_), [net])
    l_, n_ = sp.symbols("l n", positive=True)
    f_margin = jax_function((l_, n_), [inverse_logistic_loss(l_) / n_])
    return {
        "network_clustered": lambda p, q, v, k, slope: f_net(p, q, v, k, slope)[0],
        "smoothed_margin": lambda l_sum, norm: f_margin(l_sum, norm)[0],
    }
