"""Tests of the fourth-order stabilized solver `flows.ESERK4` (extrapolated first-order
Chebyshev steps): its coefficients, stability polynomial and order, from first principles."""

import math

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
from _stabilized import order_solve

from flows import ESERK4, rkc_eval_counts
from flows._solvers._eserk import _BETA_C, ESERK_EPS, eserk4_stability_bound, extrapolation_weights


def _cheb(x, s):
    """T_s(x) for real x (cos / cosh forms)."""
    x = np.asarray(x, np.float64)
    out = np.empty_like(x)
    m = np.abs(x) <= 1
    out[m] = np.cos(s * np.arccos(x[m]))
    out[~m] = np.sign(x[~m]) ** s * np.cosh(s * np.arccosh(np.abs(x[~m])))
    return out


def _stability_poly(z, s, eps=ESERK_EPS):
    """P_s(z) = Σ a_k R_s(z/k)^k with R_s(z) = T_s(w0 + w1 z)/T_s(w0), independently of the
    solver's recurrence."""
    w0 = 1.0 + eps / s**2
    th = math.acosh(w0)
    ts, dts = math.cosh(s * th), s * math.sinh(s * th) / math.sinh(th)
    w1 = ts / dts
    a = extrapolation_weights(4)
    return sum(a[k - 1] * (_cheb(w0 + w1 * z / k, s) / ts) ** k for k in range(1, 5))


def test_extrapolation_weights():
    """Richardson weights of a first-order method: (−1, 24, −81, 64)/6 for order 4 and
    (1/2, −4, 9/2) for order 3; Σ a_k = 1 and Σ a_k k^{−j} = 0 for j < n."""
    np.testing.assert_allclose(extrapolation_weights(4), np.array([-1, 24, -81, 64]) / 6)
    np.testing.assert_allclose(extrapolation_weights(3), [0.5, -4.0, 4.5])
    a = extrapolation_weights(4)
    k = np.arange(1, 5, dtype=np.float64)
    assert abs(a.sum() - 1) < 1e-13
    for j in (1, 2, 3):
        assert abs(np.sum(a * k ** (-j))) < 1e-12


def test_stability_polynomial_bounded_on_interval():
    """|P_s(z)| ≤ 1 on [−β(s), 0] for every s = 2…120 and some up to 1000; β(s)/s² ≥ the
    constant of the stage formula (so s = ceil(sqrt(h ρ / c)) stabilizes h ρ); P_s(z) − e^z
    = O(z⁵) (fourth order: halving z divides it by ≈ 32)."""
    for s in [*range(2, 121), 150, 200, 300, 500, 1000]:
        beta = eserk4_stability_bound(s)
        assert beta / s**2 >= _BETA_C, s
        z = -np.linspace(0.0, beta, 4001)
        p = _stability_poly(z, s)
        assert np.all(np.abs(p) <= 1.0 + 1e-10), (s, np.max(np.abs(p)))
    e1 = abs(_stability_poly(np.array([-0.4]), 10)[0] - math.exp(-0.4))
    e2 = abs(_stability_poly(np.array([-0.2]), 10)[0] - math.exp(-0.2))
    assert 26 < e1 / e2 < 36, e1 / e2
    # the check can fail: with weaker damping (ε = 1.5) the |a_k| (summing to 28) push
    # |P_s| above 1 inside the interval
    z = -np.linspace(0.0, eserk4_stability_bound(40, 1.5), 4001)
    assert np.max(np.abs(_stability_poly(z, 40, 1.5))) > 1.05


def test_one_step_is_the_stability_polynomial():
    """One step of size 1 on y' = λ y (λ a grid, diagonal) returns P_s(λ): the solver's
    recurrence (stage coefficients from the Chebyshev recurrence) is the polynomial."""
    s = 12
    rho = _BETA_C * (s - 0.5) ** 2  # ceil(sqrt(ρ / c)) = 12
    beta = eserk4_stability_bound(s)
    z = -np.linspace(0.0, beta, 501)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, lam: lam * y),
        ESERK4(spectral_radius=lambda t, y, a: rho, nonstiff="none"),
        0.0,
        1.0,
        1.0,
        jnp.ones_like(z),
        args=jnp.asarray(z),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    assert int(sol.solver_state.stages) == 10 * s - 3
    np.testing.assert_allclose(np.asarray(sol.ys[-1]), _stability_poly(z, s), atol=1e-11)


@pytest.mark.parametrize(("hrho", "lam_max"), [(2.4, 2.0), (60.0, 2.0)])
def test_order_four(hrho, lam_max):
    """Global error at t = 1 for h = 1/4 … 1/32 with a fixed stage count (s = 2, and s = 8
    with the stages spread over a wider stability interval): the fitted order is 4."""
    hs = np.array([1 / 4, 1 / 8, 1 / 16, 1 / 32])
    out = [order_solve(ESERK4, jnp.asarray(h), jnp.asarray(hrho), jnp.asarray(lam_max)) for h in hs]
    errs = np.array([float(e) for e, _ in out])
    stages = {int(s) for _, s in out}
    assert len(stages) == 1  # one method across the sweep
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert 3.7 <= slope <= 4.4, (slope, errs)


@pytest.mark.e2e
def test_simulate_eserk4_and_auto():
    """`simulate(solver='eserk4')` agrees with a tight reference on the small multi-stage
    problem at a few rtol and reports its own counts; `solver='auto'` measures ρ·(t1 − t0)
    and records the choice."""
    import flows
    from flows.models import TwoLayer

    prob = flows.make_problem(TwoLayer(m=30, d=1, alpha=1.0), flows.paper_data("f1", n=100), key=0)
    kw = dict(t1=20.0, n_save=3)
    ref = flows.simulate(prob, solver="dopri8", rtol=1e-12, atol=1e-14, **kw)
    tr = flows.simulate(prob, solver="eserk4", rtol=1e-7, atol=1e-10, **kw)
    size = max(float(np.max(np.abs(ref.param(k)))) for k in ("a", "w"))
    err = max(float(np.max(np.abs(tr.param(k) - ref.param(k)))) for k in ("a", "w"))
    assert err <= 3 * 1e-7 * size
    assert tr.stats["jvp_evals"] > 0 and tr.stats["vf_evals_counted_by"].startswith("solver")
    assert tr.config["solver"] == "eserk4" and tr.stats["dt0"] > 0
    auto = flows.simulate(prob, solver="auto", rtol=1e-5, atol=1e-8, **kw)
    rec = auto.config["solver_auto"]
    assert rec["rho_span"] == pytest.approx(auto.stats["auto_rho_span"])
    expected = flows.auto_solver(1e-5, rec["rho_span"], rec.get("bulk_span"))
    assert auto.config["solver"] == rec["chosen"] == expected
    assert rec["rho"] * 20.0 == pytest.approx(rec["rho_span"])


def test_eval_counts_of_a_step():
    """A step with s stages costs 10 s − 3 evaluations plus the one in `init`."""
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: -y),
        ESERK4(spectral_radius=lambda t, y, a: 0.9, nonstiff="none"),
        0.0,
        1.0,
        1.0,
        jnp.ones(2),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    c = rkc_eval_counts(sol)
    assert int(c["vf_evals"]) == 1 + 10 * 2 - 3
