"""The stabilized solvers' parts: their state (`RKCState`, read by `rkc_eval_counts`), the
non-stiff step, the error norm, the dense output, the secant check, and the constants of the
stage formula and the non-stiff methods."""

from __future__ import annotations

from typing import Any

import diffrax
import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import optimistix as optx
from diffrax._root_finder import use_stepsize_tol
from jaxtyping import Array, PyTree

from .._trees import tree_norm, tree_scale
from .record import final_state

# 1/0.653 ≈ 1.54: the stage formula s = 1 + floor(sqrt(1 + 1.54 h ρ)) of the RKC code
# guarantees β(s) ≥ h ρ (checked numerically for h ρ ∈ [0, 1e5], see tests/test_rkc.py).
_STAGE_CONST = 1.54
# The stage formula gives s = 2 exactly when h ρ < 3/1.54 ≈ 1.95: such steps are not
# stability-limited, and are taken by the `nonstiff` method instead, whose real stability
# interval (Bogacki–Shampine [−2.51, 0], Tsit5 ≈ [−3.5, 0]) still contains h ρ with room for
# the safety factor.
_NONSTIFF_MAX_HRHO = 3.0 / _STAGE_CONST
NONSTIFF_METHODS = ("bs3", "tsit5", "none")
# diffrax's own implementations; evaluations per step (FSAL) and rows of their dense stages k
_NONSTIFF = {"bs3": diffrax.Bosh3(), "tsit5": diffrax.Tsit5()}
_NONSTIFF_EVALS = {"bs3": 3, "tsit5": 6}
_NONSTIFF_K_ROWS = {"bs3": 4, "tsit5": 7, "none": 2}
# Real stability intervals [−β, 0] of the non-stiff methods (|R(z)| ≤ 1; computed from
# diffrax's tableaus in tests/test_rkc.py): Bogacki–Shampine 2.5127, Tsit5 3.5068. Where a
# stabilized step would cost more per unit time, non-stiff steps go past the switch up to
# h ρ < 0.9 β (ρ carries its own safety factor): `AbstractStabilizedSolver._cap_growth`.
_NONSTIFF_STABILITY = {"bs3": 2.5127, "tsit5": 3.5068}
_NONSTIFF_REACH = {k: 0.9 * v for k, v in _NONSTIFF_STABILITY.items()}
# A step whose h ρ needs more than `max_stages` is split into equal sub-steps (at most this
# many; beyond, the step fails and the controller shrinks h).
_MAX_SUBSTEPS = 10_000
# Tolerance proportionality of RKC2 (see `RKC2`, "Error control"): its RKC steps are
# controlled to rtol·sqrt(rtol/_PROP_RTOL), so the global error of the second-order method
# (∝ tol^{2/3} under local error control) follows rtol itself.
_PROP_RTOL = 1e-3


class RKCState(eqx.Module):
    """Solver state carried by `RKC2` between steps (every leaf is an array, because diffrax
    selects the old or new state leaf-wise when a step is rejected).

    - `f0`: F(t_n, y_n), the vector field at the start of the next step (FSAL: it is the
      F(y_{n+1}) evaluated for the error estimate of the previous step).
    - `rho`: the spectral-radius bound used for the stage count (safety factor and floor
      included; or the user-supplied value).
    - `v`: unit-norm dominant-eigenvector estimate (pytree like y), the warm start for the
      next power iteration; `None` when a `spectral_radius` callable is used.
    - `n_steps`: number of accepted steps so far.
    - `vf_evals`: vector-field evaluations along the accepted path (including `init`).
    - `jvp_evals`: Jacobian–vector products (power iteration), counted separately: each one
      is a `jax.jvp` of the vector field, i.e. one primal plus one tangent evaluation.
    - `stages`: stage count s of the last accepted step (for a non-stiff step: its
      evaluations, 3 for Bogacki–Shampine, 6 for Tsit5).
    - `nonstiff_steps`: how many of the accepted steps were non-stiff steps (`nonstiff`).
    - `redos`: accepted steps that were recomputed with a fresh spectral-radius estimate
      because the first try was not finite or its secant quotient
      −⟨F(y₁) − F(y₀), y₁ − y₀⟩/‖y₁ − y₀‖² exceeded the ρ used (a stale ρ, e.g. under
      progressive sharpening).
    - `substeps`: accepted steps that needed more than `max_stages` and were split.
    - `nonstiff_reach`: the next step is non-stiff where h ρ is below this (the switch
      `_nonstiff_max_hrho`, or past it up to the non-stiff method's stability reach when
      the last non-stiff step predicted the stabilized step to be the costlier one).
    """

    f0: PyTree[Array]
    rho: Array
    v: PyTree[Array] | None
    n_steps: Array
    vf_evals: Array
    jvp_evals: Array
    stages: Array
    nonstiff_steps: Array
    redos: Array
    substeps: Array
    nonstiff_reach: Array


def _secant(y0, f0, y1, f1, fdt):
    """−⟨ΔF, Δy⟩/‖Δy‖²: the Rayleigh quotient of −J along a step's increment (for a
    symmetric J ≤ ρ); an unstable mode makes Δy its eigenvector, q ≈ |λ| > ρ."""
    dy = jtu.tree_map(lambda a, b: a - b, y1, y0)
    df = jtu.tree_map(lambda a, b: a - b, f1, f0)
    dots = [
        jnp.sum(a * b).astype(fdt)
        for a, b in zip(jtu.tree_leaves(df), jtu.tree_leaves(dy), strict=True)
    ]
    num = -jnp.sum(jnp.stack(dots))
    den = (tree_norm(dy) ** 2).astype(fdt)
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


class _RKCInterpolation(diffrax.AbstractLocalInterpolation):
    """Dense output of one `RKC2` step: cubic Hermite from y0, y1 and k = (h F0, …, h F1)
    (only the first and last rows are used), or Tsit5's own interpolant where `tsit5`.
    Between long stiff steps the Hermite weights h F, which carries λ × the step-end
    error of a stiff component, so it multiplies that error by up to h·λ/4: `flows.simulate`
    steps to its save times with the fourth-order solvers (`control.steps_to_saves`)."""

    t0: Any
    t1: Any
    y0: PyTree[Array]
    y1: PyTree[Array]
    k: PyTree[Array]
    tsit5: Array

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return jtu.tree_map(lambda a, b: a - b, self.evaluate(t1), self.evaluate(t0))
        kw = dict(t0=self.t0, t1=self.t1, y0=self.y0, y1=self.y1, k=self.k)
        herm = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k(**kw).evaluate(t0)
        if jtu.tree_leaves(self.k)[0].shape[0] != _NONSTIFF_K_ROWS["tsit5"]:  # no Tsit5 steps
            return herm
        ts = _NONSTIFF["tsit5"].interpolation_cls(**kw).evaluate(t0)
        return jtu.tree_map(lambda a, b: jnp.where(self.tsit5, a, b), ts, herm)


def _hermite_k(hf0, hf1, rows: int):
    """(h F0, 0, …, 0, h F1) with `rows` rows: the dense-output stages of an RKC step
    (cubic Hermite uses the first and last), shaped like those of the solver's non-stiff
    steps (lax.cond needs both branches to return the same shapes)."""
    return jtu.tree_map(
        lambda a, b: jnp.stack([a] + [jnp.zeros_like(a)] * (rows - 2) + [b]), hf0, hf1
    )


#: Norms of the scaled error that the step-size controller and the stabilized solvers can
#: use (`error_norm`): 'rms' (diffrax's default, `optimistix.rms_norm`) or 'max'
#: (`optimistix.max_norm`).
ERROR_NORMS = ("rms", "max")
_NORM_NAMES = ((optx.rms_norm, "rms"), (optx.max_norm, "max"))


class ControllerTolerances(eqx.Module):
    """The step-size controller's rtol, atol and norm, as a stabilized solver's
    `root_finder`: diffrax (`diffeqsolve`) replaces each of them that is
    `diffrax`'s marker `use_stepsize_tol` by the adaptive controller's (the mechanism
    that gives its implicit solvers their Newton tolerances), and refuses a non-adaptive
    controller while a marker is left. None: not taken from the controller. No root is
    found: the field only carries them."""

    rtol: Any = None
    atol: Any = None
    norm: Any = None

    @classmethod
    def from_controller(cls) -> ControllerTolerances:
        """All three to be taken from the controller (diffrax's markers)."""
        return cls(use_stepsize_tol, use_stepsize_tol, use_stepsize_tol)

    def tolerances(self) -> tuple[Any, Any] | None:
        """(rtol, atol) once diffrax has filled them in, else None."""
        if _is_value(self.rtol) and _is_value(self.atol):
            return self.rtol, self.atol
        return None

    def norm_name(self) -> str | None:
        """The `ERROR_NORMS` name of the filled-in norm (None: not filled in, or another
        norm than `optimistix.rms_norm` / `optimistix.max_norm`)."""
        return next((name for fn, name in _NORM_NAMES if self.norm is fn), None)

    def waits_for_controller(self) -> bool:
        """Whether diffrax is still to fill in one of them (a marker is left)."""
        return any(v is use_stepsize_tol for v in (self.rtol, self.atol, self.norm))


def _is_value(x) -> bool:
    return x is not None and x is not use_stepsize_tol


def _error_norm(y_error, y0, y1, tolerances, norm: str = "rms") -> Array:
    """Norm of error / (atol + rtol max(|y0|, |y1|)) over the whole state, as
    diffrax.PIDController computes it: 'rms' (root mean square; the controller's default
    norm, `optimistix.rms_norm`) or 'max' (largest component; `optimistix.max_norm`)."""
    rtol, atol = tolerances
    scaled = [
        e / (atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)))
        for e, a, b in zip(
            jtu.tree_leaves(y_error), jtu.tree_leaves(y0), jtu.tree_leaves(y1), strict=True
        )
    ]
    if norm == "max":
        return jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in scaled if jnp.size(x) > 0]))
    if norm != "rms":
        raise ValueError(f"`error_norm` must be one of {ERROR_NORMS}; got {norm!r}.")
    sq = [jnp.sum(x**2) for x in scaled]
    size = sum(jnp.size(e) for e in jtu.tree_leaves(y_error))
    return jnp.sqrt(sum(sq) / size)


def _nonstiff_step(
    method, terms, t0, t1, y0, args, f0, tolerances, error_order=3, error_norm="rms"
):
    """One step of diffrax's Bosh3 ('bs3') or Tsit5 ('tsit5') from the FSAL value f0.
    Returns (y1, F(t1, y1), dense stages k, error).

    Bosh3's error estimate is O(h³) like RKC2's and is returned as is. Tsit5's is O(h⁵):
    its size e (the `error_norm` — 'rms' or 'max' — of error / (atol + rtol max(|y0|,
    |y1|)), as diffrax.PIDController computes it with that norm) is reported as e^{3/5}, so
    the controller, built for RKC2's error order 3, accepts iff e ≤ 1 and scales h by
    e^{−1/5}, as it would for Tsit5 (error order 5). (For a controller of another
    `error_order` q: e^{q/5}.) Both norms are homogeneous, so scaling the error by a
    scalar scales e by the same factor."""
    y1, y_error, dense, state, _ = _NONSTIFF[method].step(
        terms, t0, t1, y0, args, (jnp.asarray(False), f0), False
    )
    if method == "tsit5":
        e = _error_norm(y_error, y0, y1, tolerances, error_norm)
        y_error = tree_scale(y_error, jnp.where(e > 0, e ** (error_order / 5.0 - 1.0), 1.0))
    return y1, state[1], dense["k"], y_error


def rkc_eval_counts(solver_state: RKCState | diffrax.Solution) -> dict[str, Array]:
    """Evaluation counts of an `RKC2` (or `ESERK4`) solve.

    **Arguments:**

    - `solver_state`: the final `RKCState`, i.e. `sol.solver_state` of a
      `diffrax.diffeqsolve(..., saveat=diffrax.SaveAt(..., solver_state=True))` (also with
      `SaveAt(subs=[...], solver_state=True)`), or that `Solution` itself.

    **Returns:** a dict of JAX scalars (batched under vmap): `vf_evals` (vector-field
    evaluations on the accepted path, including the one in `init`), `jvp_evals`
    (Jacobian–vector products of the power iteration), `rho` (the last spectral-radius
    bound, safety factor included), `steps` (accepted steps), `stages` (stage count of
    the last step), `nonstiff_steps` (accepted steps taken by the non-stiff method),
    `redos` (steps recomputed with a fresh ρ) and `substeps` (steps split in sub-steps).
    Evaluations made in rejected steps are not included (see `RKC2`).
    """
    state = final_state(solver_state, RKCState, "RKC2")
    return dict(
        vf_evals=state.vf_evals,
        jvp_evals=state.jvp_evals,
        rho=state.rho,
        steps=state.n_steps,
        stages=state.stages,
        nonstiff_steps=state.nonstiff_steps,
        redos=state.redos,
        substeps=state.substeps,
    )
