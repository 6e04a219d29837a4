# ruff: noqa: F722  (jaxtyping shape strings such as " k" are not forward annotations)
"""Reduced models of the bias / interpolation-plateau paper.

Paper: *Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape for
Deep Networks* (Wang, Wang, Zhou & Ge, ICLR 2023, arXiv:2210.01019).

Model (§4): logits f_i(x) = ⟨W_{i,:}, x⟩^r + b_i (r ≥ 3), k balanced classes, data
x = e_c + noise, cross-entropy, gradient flow on (k/N)·L. Without noise the set of
diagonal W is invariant, and on it gradient flow is *exactly* the tensor-power bias ODE
below (w_i = W_ii); derived symbolically in `reduced.derive.bias_plateau`.

Everything here is pure theory, written with `jax.numpy` so it can be jitted (the ODE
solve with `diffrax`).
"""

from __future__ import annotations

import functools

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

__all__ = [
    "tensor_power_vector_field",
    "tensor_power_early_closed_form",
    "blowup_times",
    "predicted_learning_order",
    "reduced_solve",
    "reduced_trajectory",
]


def tensor_power_vector_field(
    t, state: tuple[Float[Array, " k"], Float[Array, " k"]], args: tuple[float, int]
) -> tuple[Float[Array, " k"], Float[Array, " k"]]:
    """Tensor-power bias dynamics of the paper's §4, a diffrax vector field.

    With logits on class c's input z_j(e_c) = [j = c] w_c^r + b_j and softmax outputs
    u_j(e_c):

        ẇ_i = r w_i^{r−1} (1 − u_i(e_i)),    ḃ_i = 1 − Σ_c u_i(e_c).

    **Arguments:**

    - `t`: time (unused; the field is autonomous).
    - `state`: `(w, b)`, the diagonal weights w_i = W_ii ≥ 0 and the biases, shape (k,) each.
    - `args`: `(r, k)`, the degree r > 2 and the number of classes k (must equal the
      length of `w`).

    **Returns:** `(ẇ, ḃ)`, shapes (k,) each. Σ_i ḃ_i = 0 (the biases' sum is conserved).

    Paper: §4, the bias derivative ḃ_i = 1 − (k/N) Σ_x u_i(x) and the tensor-power phase of
    Proposition 1, restricted to noise-free data where it is exact.
    """
    r, k = args
    w, b = state
    if w.shape[0] != k:
        raise ValueError(f"`args` says k = {k} classes but `w` has {w.shape[0]} entries.")
    logits = b[None, :] + jnp.diag(w**r)  # row c: z(e_c)
    u = jax.nn.softmax(logits, axis=-1)  # u[c, i] = u_i(e_c)
    w_dot = r * w ** (r - 1) * (1.0 - jnp.diagonal(u))
    b_dot = 1.0 - jnp.sum(u, axis=0)
    return w_dot, b_dot


def tensor_power_early_closed_form(
    w0: Float[ArrayLike, "*k"], t: Float[ArrayLike, ""], r: float, k: int
) -> Float[Array, "*k"]:
    """Early-phase closed form w_i(t) = (w_i(0)^{2−r} − r(r−2)(1 − 1/k) t)^{−1/(r−2)}.

    It solves ẇ = r(1 − 1/k) w^{r−1}, the tensor-power ODE while all softmax outputs are
    ≈ 1/k (small weights, equal biases).

    **Arguments:** `w0`: initial diagonal weights (> 0, any shape); `t`: time; `r` > 2: the
    degree; `k` ≥ 2: the number of classes.

    **Returns:** w(t), same shape as `w0`; `inf` at and after the blow-up time
    (`blowup_times`).

    Paper: §4 (tensor power method phase of Proposition 1).
    """
    w0 = jnp.asarray(w0)
    base = w0 ** (2.0 - r) - r * (r - 2.0) * (1.0 - 1.0 / k) * jnp.asarray(t)
    safe = jnp.where(base > 0, base, 1.0)
    return jnp.where(base > 0, safe ** (-1.0 / (r - 2.0)), jnp.inf)


def blowup_times(w0: Float[ArrayLike, "*k"], r: float, k: int) -> Float[Array, "*k"]:
    """Blow-up times t_i* = w_i(0)^{2−r} / (r(r−2)(1 − 1/k)) of the early-phase closed form.

    **Arguments:** `w0`: initial diagonal weights (> 0); `r` > 2; `k` ≥ 2 classes.

    **Returns:** t* per entry of `w0`: the predicted (leading-order) time at which class i
    is learned.

    Paper: §4.
    """
    w0 = jnp.asarray(w0)
    return w0 ** (2.0 - r) / (r * (r - 2.0) * (1.0 - 1.0 / k))


def predicted_learning_order(w0: Float[ArrayLike, " k"]) -> Int[Array, " k"]:
    """Classes in the order they are predicted to be learned: by decreasing W_ii(0).

    t* is decreasing in w(0) for every r > 2 (dt*/dw0 = −w0^{1−r}/(r(1−1/k)) < 0), so the
    order does not depend on r or k. Ties keep index order.

    **Arguments:** `w0`: initial diagonal weights W_ii(0), shape (k,).

    **Returns:** class indices, first-learned first (Proposition 1 assumes
    W_11(0) > ⋯ > W_kk(0) and learns classes 1, …, k in that order; the last-learned class
    ends with the largest bias).
    """
    return jnp.argsort(-jnp.asarray(w0), stable=True)


@functools.partial(jax.jit, static_argnums=(3, 4))
def reduced_solve(w0, b0, ts, r: int, k: int):
    """The tensor-power ODE (`tensor_power_vector_field`) from (w0, b0), saved at `ts`.

    **Arguments:** `w0`, `b0`: initial diagonal weights and biases, shape (k,) each; `ts`:
    increasing save times (the solve runs from `ts[0]` to `ts[-1]`); `r`, `k`: degree and
    number of classes (static: one compile per pair).

    **Returns:** `(w, b)`, shape (len(ts), k) each (Tsit5, rtol 1e-10, atol 1e-12); all
    NaN when the solve failed (max steps, a non-finite value), which `reduced_trajectory`
    turns into an error. Failure is returned, not raised from inside the program, so the
    compiled solve has no host callback of its own and can be cached across processes.
    """
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(tensor_power_vector_field),
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        (w0, b0),
        args=(r, k),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
        max_steps=200_000,
        throw=False,
    )
    ok = sol.result == diffrax.RESULTS.successful
    return jax.tree_util.tree_map(lambda y: jnp.where(ok, y, jnp.nan), sol.ys)


def reduced_trajectory(w0, r: int, k: int, ts) -> tuple[np.ndarray, np.ndarray]:
    """(w(t), b(t)) of the reduced tensor-power ODE from w(0) = `w0`, b(0) = 0 at times `ts`.

    A failed solve (`reduced_solve` returns NaN) raises `RuntimeError`. Its remaining run-time
    checks (save times increasing, inside the span) are equinox's; traced under
    `flows.plugin.callback_free` they too give NaN instead of a host callback, and the
    compiled solve can be cached."""
    w, b = reduced_solve(
        jnp.asarray(w0, jnp.float64), jnp.zeros(k), jnp.asarray(ts, jnp.float64), r, k
    )
    w, b = np.asarray(w), np.asarray(b)
    if not (np.isfinite(w).all() and np.isfinite(b).all()):
        raise RuntimeError(
            f"the reduced tensor-power solve (r = {r}, k = {k}) to t = {float(ts[-1]):g} "
            "failed (max steps or a non-finite value); shorten the horizon"
        )
    return w, b
