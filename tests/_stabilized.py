"""Shared by the fitted-order tests of the fourth-order stabilized solvers (`ESERK4`,
`ROCK4`): a nonlinear, non-autonomous field and its solve with a fixed stage count."""

import functools

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

_D = 12
_Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((_D, _D)))
_Y0 = np.random.default_rng(1).standard_normal(_D)


@functools.partial(jax.jit, static_argnums=0)
def order_solve(solver_cls, h, hrho, lam_max):
    """Global error at t = 1 (against Dopri8 at 1e-13) and the stage count of `solver_cls`
    with constant steps h on y′ = A y + 0.1 sin(t) y², A symmetric negative definite with
    spectrum in [−lam_max, −0.1 lam_max]; the stage count is fixed through
    `spectral_radius` = hrho / h, so a step-size sweep sees one method."""
    a = jnp.asarray((_Q * -np.geomspace(0.1, 1.0, _D)) @ _Q.T) * lam_max

    def f(t, y, args):
        return a @ y + 0.1 * jnp.sin(t) * y**2

    term = diffrax.ODETerm(f)
    sol = diffrax.diffeqsolve(
        term,
        # no non-stiff steps (the method itself); fixed steps: no tolerances to take
        solver_cls(spectral_radius=lambda t, y, args: hrho / h, nonstiff="none"),
        0.0,
        1.0,
        h,
        jnp.asarray(_Y0),
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=200,
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    ref = diffrax.diffeqsolve(
        term,
        diffrax.Dopri8(),
        0.0,
        1.0,
        1e-3,
        jnp.asarray(_Y0),
        stepsize_controller=diffrax.PIDController(rtol=1e-13, atol=1e-13),
        max_steps=100_000,
    )
    assert sol.ys is not None and ref.ys is not None and sol.solver_state is not None
    return jnp.max(jnp.abs(sol.ys[-1] - ref.ys[-1])), sol.solver_state.stages
