# ruff: noqa: F722  (jaxtyping shape strings such as " k" are not forward annotations)
r"""Exact mode dynamics of two-layer linear networks.

Paper: Saxe, McClelland & Ganguli, *Exact solutions to the nonlinear dynamics of learning in
deep linear neural networks* (ICLR 2014, arXiv:1312.6120). The paper's text is not in
this repository's sources, so its equations are cited here by their content rather than by number.

**Setting and conventions.** A linear network ŷ = W₂W₁x with x ∈ ℝ^{d_in}, hidden width h,
y ∈ ℝ^{d_out}, W₁ (h × d_in) and W₂ (d_out × h), trained on n samples (x_i, y_i) by gradient
flow on the *averaged* squared loss

    L(W₁, W₂) = (1/2n) Σ_i ‖y_i − W₂W₁x_i‖²
              = ½ tr Σ_yy − tr(Wᵀ Σ_yx) + ½ tr(W Σ_xx Wᵀ),      W = W₂W₁,

with the correlations Σ_xx = (1/n) Σ_i x_i x_iᵀ, Σ_yx = (1/n) Σ_i y_i x_iᵀ,
Σ_yy = (1/n) Σ_i y_i y_iᵀ (not centred: the network has no bias). Gradient flow, time
constant τ = 1:

    Ẇ₁ = W₂ᵀ(Σ_yx − W₂W₁Σ_xx),      Ẇ₂ = (Σ_yx − W₂W₁Σ_xx)W₁ᵀ.

These are the paper's continuous-time learning equations with τ = 1 and its correlation
matrices Σ³¹, Σ¹¹ taken as sample *averages*. (With sums over the n samples instead, every
s_α below is multiplied by n; equivalently time is rescaled by n. With a learning rate λ,
gradient descent follows this flow in the time t = λ·(number of steps).)

**Whitened inputs** (Σ_xx = I, see `whiten`) and the SVD Σ_yx = U S Vᵀ = Σ_α s_α u_α v_αᵀ.
Writing W₁ = R_k diag(a) V_kᵀ and W₂ = U_k diag(b) R_kᵀ, with k = min(h, d_in, d_out) modes and R
an h × h orthogonal matrix (R_k its first k columns), this family is invariant under the flow
and the modes decouple exactly (the paper's scalar dynamics of one mode):

    ȧ_α = b_α (s_α − a_α b_α),      ḃ_α = a_α (s_α − a_α b_α),

the gradient flow of ½(s_α − a_α b_α)². It conserves a_α² − b_α² (the paper's hyperbolas);
on the balanced branch a_α = b_α the mode strength u_α = a_α b_α obeys

    u̇ = 2u(s − u),   u(t) = s e^{2st} / (e^{2st} − 1 + s/u₀)        (sigmoidal learning curve)

(the paper's solution with τ = 1; the factor 2 is because both layers grow), and the time to
go from u₀ to u_f is t = (1/2s) ln[u_f (s − u₀) / (u₀ (s − u_f))]. For any initialization the
matrix W₁W₁ᵀ − W₂ᵀW₂ is conserved. Along the aligned family the loss is

    L(t) = ½ Σ_α (s_α − u_α(t))² + ½ (tr Σ_yy − Σ_α s_α²),

the sum running over all min(d_in, d_out) singular values (u_α = 0 for α > k); the constant is
the loss of the least-squares fit, the part of y no linear map of x captures.

Everything here is pure theory written with `jax.numpy` (jittable); the derivations are
checked symbolically in `reduced.derive.deep_linear`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

__all__ = [
    "correlations",
    "whiten",
    "mode_vector_field",
    "mode_pair_vector_field",
    "mode_strength",
    "mode_time",
    "random_orthogonal",
    "balanced_init",
    "predicted_weights",
    "predicted_product",
    "loss",
    "balancedness",
    "linear_net_vector_field",
]


# ---------------------------------------------------------------------------------------
# Data


def correlations(
    x: Float[ArrayLike, "n d_in"], y: Float[ArrayLike, "n d_out"]
) -> tuple[Float[Array, "d_in d_in"], Float[Array, "d_out d_in"], Float[Array, "d_out d_out"]]:
    """Sample correlations (averages, not centred) of the deep-linear setting.

    **Arguments:** `x`: inputs, one sample per row; `y`: targets, one sample per row.

    **Returns:** (Σ_xx, Σ_yx, Σ_yy) = ((1/n) Σ x xᵀ, (1/n) Σ y xᵀ, (1/n) Σ y yᵀ), the
    input, input–output and output correlation matrices (Σ¹¹, Σ³¹ of Saxe et al., *Exact
    solutions to the nonlinear dynamics of learning in deep linear neural networks*, as
    averages).
    """
    x, y = jnp.asarray(x), jnp.asarray(y)
    n = x.shape[0]
    return x.T @ x / n, y.T @ x / n, y.T @ y / n


def whiten(x: Float[ArrayLike, "n d"]) -> Float[Array, "n d"]:
    """Inputs transformed so that their correlation (1/n) Σ x xᵀ is exactly the identity.

    ZCA whitening without centring: x ↦ Σ_xx^{-1/2} x with the symmetric inverse square
    root from an eigendecomposition Σ_xx = Q Λ Qᵀ. The exact solutions of Saxe et al.
    (*Exact solutions to the nonlinear dynamics of learning in deep linear neural networks*)
    assume whitened inputs, Σ¹¹ = I.

    **Arguments:** `x`: inputs, one sample per row; needs n ≥ d and a nonsingular Σ_xx
    (otherwise the result is not finite).

    **Returns:** the whitened inputs, same shape; (1/n) x_wᵀ x_w = I to machine precision.
    """
    x = jnp.asarray(x)
    n = x.shape[0]

    def once(z):
        lam, q = jnp.linalg.eigh(z.T @ z / n)
        return z @ (q / jnp.sqrt(lam)[None, :]) @ q.T

    # the second pass (its matrix is I + O(rounding · cond Σ_xx)) removes the rounding error
    # of the first, so that (1/n) x_wᵀ x_w = I to machine precision even for ill-conditioned
    # Σ_xx; the composite map stays symmetric to that precision.
    return once(once(x))


# ---------------------------------------------------------------------------------------
# One mode


def mode_vector_field(
    t, u: Float[ArrayLike, "*#k"], s: Float[ArrayLike, "*#k"]
) -> Float[Array, "*#k"]:
    """Balanced mode dynamics u̇ = 2u(s − u) (τ = 1), diffrax signature `(t, y, args)`.

    Saxe et al., *Exact solutions to the nonlinear dynamics of learning in deep linear
    neural networks*: the scalar mode dynamics with a = b and u = ab.

    **Arguments:** `t`: unused; `u`: mode strengths; `s`: singular values of Σ_yx.

    **Returns:** u̇, same shape as `u`.
    """
    u, s = jnp.asarray(u), jnp.asarray(s)
    return 2.0 * u * (s - u)


def mode_pair_vector_field(t, state, s):
    """One mode's two layers: ȧ = b(s − ab), ḃ = a(s − ab) (τ = 1), signature `(t, y, args)`.

    The paper's decoupled dynamics of a single mode (gradient flow of ½(s − ab)²), Saxe et
    al., *Exact solutions to the nonlinear dynamics of learning in deep linear neural
    networks*. It conserves a² − b².

    **Arguments:** `t`: unused; `state` = (a, b), arrays of equal shape; `s`: singular values.

    **Returns:** (ȧ, ḃ).
    """
    a, b = state
    a, b, s = jnp.asarray(a), jnp.asarray(b), jnp.asarray(s)
    err = s - a * b
    return b * err, a * err


def mode_strength(
    t: Float[ArrayLike, "*#k"], s: Float[ArrayLike, "*#k"], u0: Float[ArrayLike, "*#k"]
) -> Float[Array, "*#k"]:
    """Closed form u(t) = s e^{2st} / (e^{2st} − 1 + s/u₀) of u̇ = 2u(s − u), u(0) = u₀.

    Saxe et al., *Exact solutions to the nonlinear dynamics of learning in deep linear
    neural networks*: the sigmoidal learning curve of one mode (τ = 1). Evaluated as

        u(t) = 1 / (g + e^{−2st}/u₀),   g = (1 − e^{−2st})/s = −expm1(−2st)/s,

    which only uses e^{−2st} ≤ 1 (no overflow for large t, u → s), keeps full precision for
    small s·t, and is also right at s = 0 (g = 2t: u = u₀/(1 + 2u₀t)) and for u₀ > s (then u
    decreases to s). Broadcasts over modes and times.

    **Arguments:** `t`: time(s) ≥ 0; `s`: singular value(s) s_α ≥ 0; `u0`: initial
    strength(s) u_α(0) > 0 (u₀ = 0 is the fixed point u ≡ 0).

    **Returns:** u(t), broadcast shape of the arguments.
    """
    t, s, u0 = jnp.asarray(t), jnp.asarray(s), jnp.asarray(u0)
    decay = jnp.exp(-2.0 * s * t)
    zero = s == 0
    s_safe = jnp.where(zero, 1.0, s)
    g = jnp.where(zero, 2.0 * t, -jnp.expm1(-2.0 * s_safe * t) / s_safe)
    return 1.0 / (g + decay / u0)


def mode_time(
    fraction: Float[ArrayLike, "*#k"], s: Float[ArrayLike, "*#k"], u0: Float[ArrayLike, "*#k"]
) -> Float[Array, "*#k"]:
    """Time at which the balanced mode reaches u = fraction·s from u(0) = u₀.

    Inverting the closed form (Saxe et al., *Exact solutions to the nonlinear dynamics of
    learning in deep linear neural networks*, learning time of a mode, τ = 1):

        t(f) = (1/2s) ln[ f (s − u₀) / (u₀ (1 − f)) ]

    (the paper's t = (τ/2s) ln[u_f (s − u₀)/(u₀ (s − u_f))] with u_f = f s). Evaluated as
    [ln f − ln|1 − f| + ln|s − u₀| − ln u₀]/(2s).

    **Arguments:** `fraction`: f, strictly between u₀/s and 1 (for u₀ < s the mode grows,
    for u₀ > s it decays to s; an f on the other side of u₀/s is reached in the past and gives
    a negative time); `s` > 0: singular value(s); `u0` > 0: initial strength(s), ≠ s.

    **Returns:** t(f), broadcast shape of the arguments (NaN or ±inf outside the domain).
    """
    f, s, u0 = jnp.asarray(fraction), jnp.asarray(s), jnp.asarray(u0)
    logs = jnp.log(f) - jnp.log(jnp.abs(1.0 - f)) + jnp.log(jnp.abs(s - u0)) - jnp.log(u0)
    return logs / (2.0 * s)


# ---------------------------------------------------------------------------------------
# Weights


def _svd(sigma_yx):
    u, s, vt = jnp.linalg.svd(jnp.asarray(sigma_yx), full_matrices=True)
    return u, s, vt.T


def _n_modes(sigma_yx, h: int) -> int:
    d_out, d_in = jnp.shape(sigma_yx)
    if h < 1:
        raise ValueError(f"the hidden width `h` must be ≥ 1; got {h}.")
    return min(h, d_out, d_in)


def random_orthogonal(key: Array, h: int) -> Float[Array, "h h"]:
    """A Haar-random h × h orthogonal matrix (QR of a Gaussian matrix, signs fixed).

    **Arguments:** `key`: a JAX PRNG key; `h`: the hidden width.

    **Returns:** R with RᵀR = I, for `balanced_init` and `predicted_weights`.
    """
    q, r = jnp.linalg.qr(jax.random.normal(key, (h, h)))
    return q * jnp.sign(jnp.diagonal(r))[None, :]


def _hidden_basis(h: int, k: int, R, key) -> Array:
    if R is not None and key is not None:
        raise ValueError("pass either `R` or `key`, not both.")
    if key is not None:
        R = random_orthogonal(key, h)
    if R is None:
        return jnp.eye(h)[:, :k]
    R = jnp.asarray(R)
    if R.ndim != 2 or R.shape[0] != h or R.shape[1] < k:
        raise ValueError(
            f"`R` must be h × h orthogonal or h × k with orthonormal columns (h = {h}, k = {k} "
            f"modes); got shape {R.shape}."
        )
    return R[:, :k]


def _mode_u0(u0, k: int) -> Array:
    u0 = jnp.asarray(u0, dtype=float)
    if u0.ndim == 0:
        return jnp.full((k,), u0)
    if u0.shape != (k,):
        raise ValueError(
            f"`u0` must be a scalar or have one entry per mode, shape ({k},) with "
            f"k = min(h, d_in, d_out); got shape {u0.shape}."
        )
    return u0


def predicted_weights(
    t,
    sigma_yx: Float[ArrayLike, "d_out d_in"],
    h: int,
    u0: Float[ArrayLike, "*k"],
    R: Float[ArrayLike, "h hk"] | None = None,
    *,
    key: Array | None = None,
) -> tuple[Float[Array, "h d_in"], Float[Array, "d_out h"]]:
    """Exact weights W₁(t), W₂(t) of gradient flow from the balanced, aligned initialization.

    W₁(t) = R_k diag(√u(t)) V_kᵀ, W₂(t) = U_k diag(√u(t)) R_kᵀ with u_α(t) =
    `mode_strength(t, s_α, u0_α)`: on this family the matrix flow reduces exactly to the
    decoupled balanced modes of Saxe et al., *Exact solutions to the nonlinear dynamics of
    learning in deep linear neural networks* (a_α = b_α = √u_α). Requires whitened inputs,
    Σ_xx = I. At t = 0 this is `balanced_init` with the same arguments.

    **Arguments:** `t`: a time (scalar; `jax.vmap` for many); `sigma_yx`: Σ_yx = (1/n) Σ y xᵀ
    (its SVD gives U, s, V); `h`: hidden width; `u0`: initial strengths of the
    k = min(h, d_in, d_out) modes (scalar or shape (k,)), > 0; `R`: h × h orthogonal (or
    h × k with orthonormal columns) hidden basis, or `key` to draw it with
    `random_orthogonal(key, h)`; neither gives R = I.

    **Returns:** (W₁(t), W₂(t)).
    """
    k = _n_modes(sigma_yx, h)
    U, s, V = _svd(sigma_yx)
    Rk = _hidden_basis(h, k, R, key)
    root = jnp.sqrt(mode_strength(t, s[:k], _mode_u0(u0, k)))
    w1 = (Rk * root[None, :]) @ V[:, :k].T
    w2 = (U[:, :k] * root[None, :]) @ Rk.T
    return w1, w2


def balanced_init(
    sigma_yx: Float[ArrayLike, "d_out d_in"],
    h: int,
    u0: Float[ArrayLike, "*k"],
    R: Float[ArrayLike, "h hk"] | None = None,
    *,
    key: Array | None = None,
) -> tuple[Float[Array, "h d_in"], Float[Array, "d_out h"]]:
    """Balanced initialization aligned with the SVD of Σ_yx, mode strengths u₀.

    W₁ = R_k diag(√u₀) V_kᵀ, W₂ = U_k diag(√u₀) R_kᵀ, so W₂W₁ = Σ_α u₀_α u_α v_αᵀ and
    W₁W₁ᵀ − W₂ᵀW₂ = 0: the initial condition of the exact solutions of Saxe et al., *Exact
    solutions to the nonlinear dynamics of learning in deep linear neural networks*, from
    which a full-flow integration can start and be compared with `predicted_weights`.

    **Arguments:** as `predicted_weights` (without `t`).

    **Returns:** (W₁(0), W₂(0)).
    """
    return predicted_weights(0.0, sigma_yx, h, u0, R, key=key)


def predicted_product(
    t, sigma_yx: Float[ArrayLike, "d_out d_in"], h: int, u0: Float[ArrayLike, "*k"]
) -> Float[Array, "d_out d_in"]:
    """W₂(t)W₁(t) = Σ_{α≤k} u_α(t) u_α v_αᵀ from the balanced, aligned initialization.

    Independent of the hidden basis R (Saxe et al., *Exact solutions to the nonlinear
    dynamics of learning in deep linear neural networks*). Arguments as `predicted_weights`.
    """
    k = _n_modes(sigma_yx, h)
    U, s, V = _svd(sigma_yx)
    u = mode_strength(t, s[:k], _mode_u0(u0, k))
    return (U[:, :k] * u[None, :]) @ V[:, :k].T


def loss(
    t: Float[ArrayLike, "*times"],
    sigma_yx: Float[ArrayLike, "d_out d_in"],
    h: int,
    u0: Float[ArrayLike, "*k"],
    sigma_yy: Float[ArrayLike, "d_out d_out"] | None = None,
) -> Float[Array, "*times"]:
    """Predicted loss curve L(t) = ½ Σ_α (s_α − u_α(t))² + ½ (tr Σ_yy − Σ_α s_α²).

    The averaged loss (1/2n) Σ_i ‖y_i − W₂W₁x_i‖² along the exact balanced, aligned solution
    with whitened inputs (Σ_xx = I): ½‖W₂W₁ − Σ_yx‖²_F + ½(tr Σ_yy − ‖Σ_yx‖²_F), where the
    first term is Σ_α ½(s_α − u_α)² over all min(d_in, d_out) singular values (u_α ≡ 0 for the
    modes beyond the width h). Saxe et al., *Exact solutions to the nonlinear dynamics of
    learning in deep linear neural networks*, decoupled-mode error with τ = 1.

    **Arguments:** `t`: time(s), any shape; `sigma_yx`, `h`, `u0`: as `predicted_weights`;
    `sigma_yy`: Σ_yy = (1/n) Σ y yᵀ. Without it the constant ½(tr Σ_yy − Σ s²) (the loss of
    the least-squares fit) is left out and the result is ½‖W₂W₁ − Σ_yx‖²_F.

    **Returns:** L(t), shape of `t`.
    """
    k = _n_modes(sigma_yx, h)
    s = jnp.linalg.svd(jnp.asarray(sigma_yx), compute_uv=False)
    u = mode_strength(jnp.asarray(t)[..., None], s[:k], _mode_u0(u0, k))
    out = 0.5 * jnp.sum((s[:k] - u) ** 2, axis=-1) + 0.5 * jnp.sum(s[k:] ** 2)
    if sigma_yy is not None:
        out = out + 0.5 * (jnp.trace(jnp.asarray(sigma_yy)) - jnp.sum(s**2))
    return out


# ---------------------------------------------------------------------------------------
# The full two-layer flow


def balancedness(
    w1: Float[ArrayLike, "h d_in"], w2: Float[ArrayLike, "d_out h"]
) -> Float[Array, "h h"]:
    """W₁W₁ᵀ − W₂ᵀW₂, conserved by the gradient flow of any loss of W₂W₁ (any init).

    Zero on the balanced initializations of Saxe et al., *Exact solutions to the nonlinear
    dynamics of learning in deep linear neural networks* (per mode: a² − b² conserved).
    """
    w1, w2 = jnp.asarray(w1), jnp.asarray(w2)
    return w1 @ w1.T - w2.T @ w2


def linear_net_vector_field(t, state, args):
    """Full gradient flow of the averaged loss: Ẇ₁ = W₂ᵀE, Ẇ₂ = EW₁ᵀ, E = Σ_yx − W₂W₁Σ_xx.

    The continuous-time learning equations of Saxe et al., *Exact solutions to the nonlinear
    dynamics of learning in deep linear neural networks*, with τ = 1 and averaged
    correlations. Diffrax signature `(t, y, args)`.

    **Arguments:** `t`: unused; `state` = (W₁ (h × d_in), W₂ (d_out × h));
    `args` = (Σ_xx, Σ_yx), e.g. the first two outputs of `correlations`.

    **Returns:** (Ẇ₁, Ẇ₂).
    """
    w1, w2 = state
    sigma_xx, sigma_yx = args
    err = jnp.asarray(sigma_yx) - w2 @ w1 @ jnp.asarray(sigma_xx)
    return w2.T @ err, err @ w1.T
