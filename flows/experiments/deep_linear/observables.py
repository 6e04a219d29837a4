# ruff: noqa: F722  (jaxtyping shape strings are not forward annotations)
"""What the deep-linear checks measure on a run, and the theory they compare it with.

`deep_linear_observables` is evaluated inside the solve (so `flows simulate deep-linear`
records it whatever θ is saved); `Theory` holds the data's correlations and the closed-form
predictions of `reduced.deep_linear` for the same data and init strength.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from flows import Dataset
from reduced import deep_linear as dl

__all__ = [
    "DESCRIPTIONS",
    "Theory",
    "deep_linear_observables",
    "crossing_times",
    "mode_strengths",
]

#: One line per observable of `deep_linear_observables`: its formula and what it means
#: (the `flows simulate deep-linear` report lists them beside their final values).
DESCRIPTIONS: dict[str, str] = {
    "mode_strength": "per mode α: u_α = u_αᵀ W₂W₁ v_α, the strength the network gives the "
    "α-th singular mode of Σ_yx (rises along a sigmoid to s_α)",
    "balance_drift": "max |(W₁W₁ᵀ − W₂ᵀW₂)(t) − (W₁W₁ᵀ − W₂ᵀW₂)(0)|: drift of a quantity the "
    "exact flow conserves (0 up to the solver's error)",
    "weight_norm_sq": "‖W₁‖²_F + ‖W₂‖²_F: the squared size of all the weights",
}


def _modes(problem):
    """(U_k, V_k) of Σ_yx = (1/n) Σ y xᵀ, k = min(h, d_in, d_out) (columns: mode vectors)."""
    n = problem.x.shape[0]
    sigma_yx = problem.y.T @ problem.x / n
    u, _, vt = jnp.linalg.svd(sigma_yx, full_matrices=False)
    k = min(problem.theta0["W1"].shape[0], *sigma_yx.shape)
    return u[:, :k], vt[:k].T


def deep_linear_observables(problem, theta, t) -> dict:
    """Observables of a two-layer linear run, evaluated inside the solve.

    - `mode_strength` (k,): u_α = u_αᵀ W₂W₁ v_α, the strength of mode α in the SVD
      Σ_yx = Σ s_α u_α v_αᵀ (sign-free: a joint sign flip of u_α, v_α leaves it unchanged);
    - `balance_drift`: max |(W₁W₁ᵀ − W₂ᵀW₂)(t) − (W₁W₁ᵀ − W₂ᵀW₂)(0)|, entrywise;
    - `weight_norm_sq`: ‖W₁‖²_F + ‖W₂‖²_F.
    """
    w1, w2 = theta["W1"], theta["W2"]
    u, v = _modes(problem)
    product = w2 @ w1
    strength = jnp.einsum("ok,oi,ik->k", u, product, v)
    b0 = dl.balancedness(problem.theta0["W1"], problem.theta0["W2"])
    drift = jnp.max(jnp.abs(dl.balancedness(w1, w2) - b0))
    return {
        "mode_strength": strength,
        "balance_drift": drift,
        "weight_norm_sq": jnp.sum(w1**2) + jnp.sum(w2**2),
    }


def mode_strengths(traj) -> np.ndarray:
    """The run's mode strengths u_α(t), shape (time, k)."""
    return np.asarray(traj.observables["mode_strength"])


def crossing_times(times, values, levels) -> np.ndarray:
    """First time each column of `values` (time, k) rises to its level, by linear
    interpolation between the two saves around the crossing; NaN where never reached (or
    already reached at the first save)."""
    times = np.asarray(times, float)
    out = np.full(values.shape[1], np.nan)
    for a in range(values.shape[1]):
        above = values[:, a] >= levels[a]
        if not above.any() or above[0]:
            continue
        i = int(np.argmax(above))
        v0, v1 = values[i - 1, a], values[i, a]
        out[a] = times[i - 1] + (levels[a] - v0) / (v1 - v0) * (times[i] - times[i - 1])
    return out


@dataclasses.dataclass(frozen=True)
class Theory:
    """The data's correlations and the closed forms of Saxe et al., *Exact solutions to the
    nonlinear dynamics of learning in deep linear neural networks*, for hidden width `h`
    and initial mode strength(s) `u0` (balanced, aligned init)."""

    sigma_yx: np.ndarray
    sigma_yy: np.ndarray
    h: int
    u0: np.ndarray  # (k,)
    whitening_error: float  # max |Σ_xx − I|

    @classmethod
    def of(cls, data: Dataset, h: int, u0) -> Theory:
        sxx, syx, syy = (np.asarray(m) for m in dl.correlations(data.x, data.y))
        k = min(h, *syx.shape)
        u0 = np.broadcast_to(np.asarray(u0, float), (k,)).copy()
        err = float(np.max(np.abs(sxx - np.eye(sxx.shape[0]))))
        return cls(syx, syy, int(h), u0, err)

    @property
    def k(self) -> int:
        return min(self.h, *self.sigma_yx.shape)

    @property
    def s(self) -> np.ndarray:
        """The singular values s_α of Σ_yx of the k modes the network can learn."""
        return np.linalg.svd(self.sigma_yx, compute_uv=False)[: self.k]

    def balanced_init(self) -> dict[str, np.ndarray]:
        w1, w2 = dl.balanced_init(self.sigma_yx, self.h, self.u0)
        return {"W1": np.asarray(w1), "W2": np.asarray(w2)}

    def weights(self, times) -> tuple[np.ndarray, np.ndarray]:
        """Predicted W₁(t), W₂(t) (hidden basis R = I, as `balanced_init`), shape (time, …)."""
        w1, w2 = jax.vmap(lambda t: dl.predicted_weights(t, self.sigma_yx, self.h, self.u0))(
            jnp.asarray(times, float)
        )
        return np.asarray(w1), np.asarray(w2)

    def product(self, times) -> np.ndarray:
        """Predicted W₂W₁(t), shape (time, d_out, d_in)."""
        f = jax.vmap(lambda t: dl.predicted_product(t, self.sigma_yx, self.h, self.u0))
        return np.asarray(f(jnp.asarray(times, float)))

    def strengths(self, times) -> np.ndarray:
        """u_α(t) of the closed form, shape (time, k)."""
        t = np.asarray(times, float)[:, None]
        return np.asarray(dl.mode_strength(t, self.s[None, :], self.u0[None, :]))

    def loss(self, times) -> np.ndarray:
        return np.asarray(
            dl.loss(np.asarray(times, float), self.sigma_yx, self.h, self.u0, self.sigma_yy)
        )

    def half_times(self, u0=None) -> np.ndarray:
        """t(½) = (1/2s) ln((s − u₀)/u₀) per mode (NaN where u₀ ≥ s/2: already past half)."""
        u0 = self.u0 if u0 is None else np.asarray(u0, float)
        t = np.asarray(dl.mode_time(0.5, self.s, u0))
        return np.where(u0 < self.s / 2, t, np.nan)


def effective_strength(theory: Theory, theta0: dict) -> np.ndarray:
    """Initial strength u_eff,α = ¼‖W₁(0)v_α + W₂(0)ᵀu_α‖² of each mode from any small init.

    Near θ = 0 the flow is linear: with a = W₁v_α, b = W₂ᵀu_α (vectors over the hidden
    units), ȧ = s_α b and ḃ = s_α a, so a + b grows like e^{s_α t}, a − b decays, and
    u_α = bᵀa ≈ ¼‖a(0) + b(0)‖² e^{2 s_α t} — the balanced closed form's early phase
    u₀e^{2st} with u₀ = u_eff,α. (This sharpening of the prediction for a random init is
    derived here from the linearized flow; it is reported beside the nominal prediction.)
    """
    u, _, vt = np.linalg.svd(theory.sigma_yx)
    k = theory.k
    a = np.asarray(theta0["W1"]) @ vt[:k].T  # (h, k)
    b = np.asarray(theta0["W2"]).T @ u[:, :k]  # (h, k)
    return 0.25 * np.sum((a + b) ** 2, axis=0)


# `balance_drift` is the drift of a conserved quantity: exactly 0 along the flow, so it is
# an error measure, compared with its floor but never flagged as a number without digits
# (`flows.loss_floors`' observable records)
deep_linear_observables.error_measures = frozenset({"balance_drift"})  # type: ignore[attr-defined]
