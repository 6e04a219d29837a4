"""Shared by the exponential solvers' tests (`EXPRB43`/`EXPRB32`, `ETDRK4`): the rotated
Bernoulli flow with its closed form, the relative error, one compiled adaptive solve, and
the stiff benchmark problems of `benchmarks/work_precision/stiff.py`.

The rotated Bernoulli flow: with Q orthogonal and z = Qᵀθ, the loss
L(θ) = Σ_i (λ_i z_i²/2 + z_i⁴/4) has the gradient flow z_i′ = −λ_i z_i − z_i³, whose
solution is z_i(t) = sign(z_i0) e^{−λ_i t} / sqrt(z_i0^{−2} + (1 − e^{−2λ_i t})/λ_i); the
Hessian Q diag(λ_i + 3z_i²) Qᵀ is dense and, for large λ_i, stiff.
"""

import importlib.util
import sys
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

_STIFF = Path(__file__).parent.parent / "benchmarks" / "work_precision" / "stiff.py"


def stiff_module():
    """`benchmarks/work_precision/stiff.py`, loaded once (as `wp_stiff`)."""
    if "wp_stiff" not in sys.modules:
        spec = importlib.util.spec_from_file_location("wp_stiff", _STIFF)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["wp_stiff"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["wp_stiff"]


def bernoulli(d=20, lam_max=10.0, stiff=(), seed=0):
    """(field, θ0, exact θ(t)) of the rotated Bernoulli flow: λ geometric in [1, `lam_max`],
    the last ones replaced by `stiff` (outliers)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.geomspace(1.0, lam_max, d)
    if stiff:
        lam[-len(stiff) :] = stiff
    z0 = rng.uniform(0.5, 1.5, d) * rng.choice([-1.0, 1.0], d)
    qj, lj = jnp.asarray(q), jnp.asarray(lam)

    def field(t, y, args):
        z = qj.T @ y
        return -(qj @ (lj * z + z**3))

    def exact(t):
        decay = np.exp(-lam * t)
        return q @ (np.sign(z0) * decay / np.sqrt(z0**-2.0 + (1.0 - decay**2) / lam))

    return field, q @ z0, exact


def rel_error(y, ref):
    return float(np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref)))


def adaptive_solver(solver, field, y0, t1):
    """One compiled solve with rtol traced (atol = 1e-3 rtol), diffrax's PIDController:
    rtol ↦ (y(t1), result code, final solver state)."""

    @jax.jit
    def solve(rtol):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            solver,
            0.0,
            t1,
            None,
            jnp.asarray(y0),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=1e-3 * rtol),
            max_steps=20_000,
            saveat=diffrax.SaveAt(t1=True, solver_state=True),
            throw=False,
        )
        return sol.ys[-1], sol.result._value, sol.solver_state

    return solve


def fitted_order(solver, field, y0, exact, hs, t1=1.0):
    """(slope, errors): the relative errors of fixed-step solves to t1 at the steps `hs`
    against the closed form `exact`, and the slope of log error against log h."""

    @jax.jit
    def solve(dt):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            solver,
            0.0,
            t1,
            dt,
            jnp.asarray(y0),
            stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=int(round(t1 / min(hs))) + 1,
        ).ys[-1]

    hs = np.asarray(hs)
    errs = np.array([rel_error(solve(h), exact(t1)) for h in hs])
    return np.polyfit(np.log(hs), np.log(errs), 1)[0], errs
