r"""Symbolic derivations for the bias / interpolation-plateau paper, *Plateau in Monotonic
Linear Interpolation — A "Biased" View of Loss Landscape for Deep Networks*, §4.

Setting (§4 of the paper). Logits f_i(x) = ⟨W_{i,:}, x⟩^r + b_i (r ≥ 3), k balanced classes
with N/k samples each, cross-entropy L = Σ_i Σ_{x∈S_i} −log u_i(x), softmax outputs
u_i(x) = e^{f_i(x)} / Σ_j e^{f_j(x)}, gradient flow on (k/N)·L.

What is derived (each item is one `Identity`):

1. The bias derivative ḃ_i = 1 − (k/N) Σ_{x∈S} u_i(x), for *any* signal part of the logits
   (checked for k = 3 classes with 2 samples each and generic logits).
2. The tensor-power bias ODE. For noise-free data x = e_c the set {W_ij = 0, i ≠ j} is
   invariant (∂L/∂W_ij ∝ W_ij^{r−1} = 0 there since r > 1), and on it gradient flow on
   (k/N)L is *exactly*, with w_i = W_ii,
       ẇ_i = r w_i^{r−1} (1 − u_i(e_i)),   ḃ_i = 1 − Σ_c u_i(e_c),
   z_j(e_c) = [j = c] w_c^r + b_j. The (k/N) normalization and the N/k copies per class
   cancel, so the reconstructed form is right as stated (checked for k = 3, symbolic r > 2).
3. Early phase: at u ≡ 1/k, ẇ_i = r(1 − 1/k) w_i^{r−1}, solved by
   w_i(t) = (w_i(0)^{2−r} − r(r−2)(1 − 1/k)t)^{−1/(r−2)} for t < t_i*, which blows up at
   t_i* = w_i(0)^{2−r} / (r(r−2)(1 − 1/k)); dt*/dw(0) = −w(0)^{1−r}/(r(1 − 1/k)) < 0, so the
   class with the largest initial W_ii is learned first.
4. Interpolation of a deep linear chain (Theorem 1's intuition, made exact). With
   identity activation, layers V_i^[α] = (1−α)δA_i + αB_i (init δA_i, trained B_i) and
   output bias b^[α] = αb (the bias starts at 0):
       `f^[α](x)` = α^r B_r⋯B_1 x + α b + Σ_{∅≠S⊆[r]} ((1−α)δ)^{|S|} α^{r−|S|} P_S x,
   where P_S is the ordered product with A_i in the positions of S and B_i elsewhere.
   Every extra term carries the factor (1−α)δ: the formula f ≈ α^r·signal + αb is exact
   at δ = 0 (and at α = 1). Checked for r = 3 and r = 4 with 2×2 layers.
5. For ReLU the δ = 0 statement survives by positive homogeneity, relu(αz) = α relu(z)
   for α > 0 (proved on both sign regions); layer by layer the chain gives α^r·signal.
"""

from __future__ import annotations

import itertools

import sympy as sp

from ._core import Identity
from ._tools import jax_function

PAPER = "bias-plateau"

__all__ = ["IDENTITIES", "generated_vector_fields", "tensor_power_field_derived"]

rho = sp.Symbol("rho", positive=True)
r = 2 + rho  # the degree r > 2 (the paper takes r ≥ 3)
kk = sp.Symbol("k", positive=True)  # number of classes in the early-phase formulas
t = sp.Symbol("t", real=True)


def _softmax(logits):
    total = sum(sp.exp(z) for z in logits)
    return [sp.exp(z) / total for z in logits]


def _neg_log_softmax(logits, i):
    """−log u_i = −log(e^{z_i} / Σ_j e^{z_j}) = −z_i + log Σ_j e^{z_j} (z real)."""
    return sp.expand_log(-sp.log(_softmax(logits)[i]), force=True)


# ---------------------------------------------------------------------------------------
# 1. Bias derivative

_K1, _PER_CLASS = 3, 2
_N1 = _K1 * _PER_CLASS
_b1 = sp.symbols(f"b1:{_K1 + 1}", real=True)
# signal part g_j(x) of the logit j on sample x (anything: the bias enters additively)
_g1 = [[sp.Symbol(f"g{j}_{n}", real=True) for j in range(1, _K1 + 1)] for n in range(1, _N1 + 1)]
_label1 = [n // _PER_CLASS for n in range(_N1)]


def _bias_residual():
    logits = [[g + bj for g, bj in zip(gx, _b1, strict=True)] for gx in _g1]
    loss = sp.Rational(_K1, _N1) * sum(
        _neg_log_softmax(z, c) for z, c in zip(logits, _label1, strict=True)
    )
    u = [_softmax(z) for z in logits]
    return [
        -sp.diff(loss, _b1[i]) - (1 - sp.Rational(_K1, _N1) * sum(ux[i] for ux in u))
        for i in range(_K1)
    ]


# ---------------------------------------------------------------------------------------
# 2. Tensor-power ODE from the full r-homogeneous-weight model

_K2 = 3
_W2 = sp.Matrix(_K2, _K2, lambda i, j: sp.Symbol(f"W{i + 1}{j + 1}", positive=True))
_b2 = sp.symbols(f"b1:{_K2 + 1}", real=True)
_w2 = sp.symbols(f"w1:{_K2 + 1}", positive=True)  # w_i = W_ii
_copies = sp.Symbol("n_per_class", positive=True)  # N/k identical copies of each e_c


def _full_loss_noise_free():
    """(k/N) Σ_c Σ_{x∈S_c} −log u_c(x) with x = e_c and N/k copies of each e_c."""
    n_samples = _K2 * _copies
    loss = 0
    for c in range(_K2):
        e_c = sp.Matrix([int(j == c) for j in range(_K2)])
        # ⟨W_j, e_c⟩^r + b_j; sympy types a matrix product as Expr, hence the ignore
        logits = [(_W2[j, :] * e_c)[0] ** r + _b2[j] for j in range(_K2)]  # pyright: ignore[reportIndexIssue]
        loss += _copies * _neg_log_softmax(logits, c)
    return _K2 / n_samples * loss


def tensor_power_field_derived():
    """(ẇ, ḃ) and the off-diagonal Ẇ_ij, derived from the full loss on the diagonal set."""
    loss = _full_loss_noise_free()
    diag = {_W2[i, j]: (_w2[i] if i == j else 0) for i in range(_K2) for j in range(_K2)}

    def flow(p):
        # sympy writes d(W^r)/dW as r W^r / W; powsimp makes it r W^{r−1} so that W = 0
        # can be substituted (r − 1 > 0).
        # expand: the factors N/k and k/N cancel term by term
        return sp.expand(sp.powsimp(-sp.diff(loss, p)).subs(diag))

    w_dot = [flow(_W2[i, i]) for i in range(_K2)]
    b_dot = [flow(bi) for bi in _b2]
    off = [flow(_W2[i, j]) for i in range(_K2) for j in range(_K2) if i != j]
    return w_dot, b_dot, off


def tensor_power_field_claim(w, b_):
    """§4 (reconstructed): ẇ_i = r w_i^{r−1}(1 − u_i(e_i)), ḃ_i = 1 − Σ_c u_i(e_c)."""
    k = len(w)
    u = [_softmax([(w[c] ** r if j == c else 0) + b_[j] for j in range(k)]) for c in range(k)]
    w_dot = [r * w[i] ** (r - 1) * (1 - u[i][i]) for i in range(k)]
    b_dot = [1 - sum(u[c][i] for c in range(k)) for i in range(k)]
    return w_dot, b_dot


def _tensor_power_residual():
    w_dot, b_dot, off = tensor_power_field_derived()
    cw, cb = tensor_power_field_claim(_w2, _b2)
    return [x - y for x, y in zip(w_dot + b_dot, cw + cb, strict=True)] + off


# ---------------------------------------------------------------------------------------
# 3. Early phase and blow-up

w0 = sp.Symbol("w0", positive=True)
D = sp.Symbol("D", positive=True)  # D(t) = w0^{2−r} − r(r−2)(1−1/k)t > 0 before blow-up


def early_closed_form(tt):
    return (w0 ** (2 - r) - r * (r - 2) * (1 - 1 / kk) * tt) ** (-1 / (r - 2))


def blowup_time():
    return w0 ** (2 - r) / (r * (r - 2) * (1 - 1 / kk))


def _early_residual():
    # ẇ at u_i ≡ 1/k (all logits equal: signal w^r ≈ 0, biases equal at the start)
    b_eq = sp.Symbol("beta", real=True)
    u_flat = _softmax([b_eq] * 3)[0]
    w_dot_early = r * w0 ** (r - 1) * (1 - u_flat)
    # the closed form as a function of D(t); chain rule dw/dt = (dw/dD)(dD/dt), valid for D > 0
    D_of_t = w0 ** (2 - r) - r * (r - 2) * (1 - 1 / kk) * t
    w_of_D = D ** (-1 / (r - 2))
    w_dot = sp.diff(w_of_D, D) * sp.diff(D_of_t, t)
    t_star = blowup_time()
    return [
        w_dot_early - r * (1 - sp.Rational(1, 3)) * w0 ** (r - 1),  # k = 3: u = 1/k
        early_closed_form(t).subs(D_of_t, D) - w_of_D,  # w(t) = D(t)^{−1/(r−2)}
        w_dot - r * (1 - 1 / kk) * w_of_D ** (r - 1),  # ẇ = r(1 − 1/k) w^{r−1}
        early_closed_form(0) - w0,  # w(0) = w0
        D_of_t.subs(t, t_star),  # D(t*) = 0: w blows up at t*
        sp.diff(t_star, w0) + w0 ** (1 - r) / (r * (1 - 1 / kk)),  # dt*/dw0 < 0
    ]


# ---------------------------------------------------------------------------------------
# 4. Interpolated deep linear chain

alpha, delta = sp.symbols("alpha delta", real=True)
_WIDTH = 2


def _layers(name, depth):
    return [
        sp.Matrix(_WIDTH, _WIDTH, lambda i, j, n=n: sp.Symbol(f"{name}{n}_{i}{j}", real=True))
        for n in range(1, depth + 1)
    ]


_x4 = sp.Matrix(sp.symbols(f"x1:{_WIDTH + 1}", real=True))
_bias4 = sp.Matrix(sp.symbols(f"bias1:{_WIDTH + 1}", real=True))
_DEPTHS = (3, 4)
_A4 = {depth: _layers(f"A{depth}_", depth) for depth in _DEPTHS}
_B4 = {depth: _layers(f"B{depth}_", depth) for depth in _DEPTHS}


def _chain(mats, x):
    out = x
    for m in mats:  # V_1 first
        out = m * out
    return out


def interpolation_expansion(A, B, x, bias):
    """α^r B_r⋯B_1 x + α b + Σ_{∅≠S} ((1−α)δ)^{|S|} α^{r−|S|} P_S x."""
    depth = len(A)
    total = alpha**depth * _chain(B, x) + alpha * bias
    for pattern in itertools.product((False, True), repeat=depth):
        j = sum(pattern)
        if j == 0:
            continue
        mats = [a if use_a else bb for a, bb, use_a in zip(A, B, pattern, strict=True)]
        total += ((1 - alpha) * delta) ** j * alpha ** (depth - j) * _chain(mats, x)
    return total


def _interpolation_residual():
    res = []
    for depth in _DEPTHS:
        A, B = _A4[depth], _B4[depth]
        layers = [(1 - alpha) * delta * a + alpha * bb for a, bb in zip(A, B, strict=True)]
        f_alpha = _chain(layers, _x4) + alpha * _bias4  # b^[α] = (1−α)·0 + α b
        res += list(f_alpha - interpolation_expansion(A, B, _x4, _bias4))
    return res


# sympy types a matrix's entries as MatrixElement | list (they are its Symbols)
_INTERP_SYMBOLS: tuple[sp.Symbol, ...] = (  # pyright: ignore[reportAssignmentType]
    alpha,
    delta,
    *_x4,
    *_bias4,
    *[s for d in _DEPTHS for m in _A4[d] + _B4[d] for s in m],
)

# 5. ReLU positive homogeneity
_Z = sp.Symbol("Z", positive=True)
_alpha_pos = sp.Symbol("alpha_pos", positive=True)


def _relu(x):
    return sp.Max(0, x)


def _relu_residual():
    return [_relu(_alpha_pos * zz) - _alpha_pos * _relu(zz) for zz in (_Z, -_Z, sp.S.Zero)]


# ---------------------------------------------------------------------------------------

IDENTITIES: tuple[Identity, ...] = (
    Identity(
        "ḃ_i = 1 − (k/N) Σ_x u_i(x)",
        PAPER,
        "For gradient flow on (k/N) Σ_i Σ_{x∈S_i} −log softmax_i(f(x)) with f_j(x) = g_j(x) + b_j "
        "(any signal g), ḃ_i = 1 − (k/N) Σ_{x∈S} u_i(x). Checked for k = 3, N = 6.",
        _bias_residual,
        (*_b1, *[g for gx in _g1 for g in gx]),
    ),
    Identity(
        "tensor-power bias ODE (exact on W diagonal)",
        PAPER,
        "Noise-free x = e_c, N/k copies each, r > 2: on {W_ij = 0, i ≠ j} the off-diagonal "
        "gradient vanishes (the set is invariant) and −∇((k/N)L) is ẇ_i = r w_i^{r−1}(1 − "
        "u_i(e_i)), ḃ_i = 1 − Σ_c u_i(e_c), z_j(e_c) = [j = c] w_c^r + b_j. Checked for k = 3.",
        _tensor_power_residual,
        # sympy types a matrix's entries as MatrixElement | list (they are its Symbols)
        (*_W2, *_b2, *_w2, _copies, rho),  # pyright: ignore[reportArgumentType]
    ),
    Identity(
        "early phase w(t), blow-up t*",
        PAPER,
        "At u ≡ 1/k, ẇ = r(1−1/k)w^{r−1}; w(t) = (w₀^{2−r} − r(r−2)(1−1/k)t)^{−1/(r−2)} solves "
        "it with w(0) = w₀ while the base D(t) > 0; D(t*) = 0 at t* = w₀^{2−r}/(r(r−2)(1−1/k)), "
        "and dt*/dw₀ = −w₀^{1−r}/(r(1−1/k)) < 0 (largest W_ii learned first).",
        _early_residual,
        (w0, D, t, kk, rho, sp.Symbol("beta", real=True)),
    ),
    Identity(
        "interpolated deep linear chain",
        PAPER,
        "Identity activation, V_i^[α] = (1−α)δA_i + αB_i, b^[α] = αb: f^[α](x) = α^r B_r⋯B_1 x "
        "+ αb + Σ_{∅≠S⊆[r]} ((1−α)δ)^{|S|} α^{r−|S|} P_S x; every correction has the factor "
        "(1−α)δ, so f^[α] = α^r·signal + αb exactly at δ = 0. Checked for r = 3, 4, 2×2 layers.",
        _interpolation_residual,
        _INTERP_SYMBOLS,
    ),
    Identity(
        "ReLU positive homogeneity",
        PAPER,
        "relu(αz) = α relu(z) for α > 0 (z > 0, z < 0, z = 0): at δ = 0 a ReLU chain "
        "interpolates as α^r·signal + αb too.",
        _relu_residual,
        (_Z, _alpha_pos),
    ),
)


# ---------------------------------------------------------------------------------------
# Code generation


def generated_vector_fields() -> dict:
    """JAX function generated from the *derived* tensor-power field (k = 3).

    **Returns:** `{"tensor_power_vector_field": f}` with `f(t, (w, b), (r, k))` the
    signature of `reduced.bias_plateau.tensor_power_vector_field` (k must be 3).
    """
    import jax.numpy as jnp

    w_dot, b_dot, _ = tensor_power_field_derived()
    fn = jax_function((*_w2, *_b2, rho), [*w_dot, *b_dot])

    def tensor_power(t, state, args):
        r_, k_ = args
        if k_ != _K2:
            raise ValueError(f"the generated field is for k = {_K2} classes; got k = {k_}.")
        w, b_ = state
        vals = fn(*w, *b_, r_ - 2)
        return jnp.stack(vals[:_K2]), jnp.stack(vals[_K2:])

    return {"tensor_power_vector_field": tensor_power}
