"""Tests of the fourth-order stabilized solver `flows.ROCK4` (orthogonal-polynomial
recurrence + finishing procedure): its derived coefficients against a fresh derivation, the
order conditions, the stability polynomial against Abdulle's published intervals, one step
against the polynomial, the order on a nonlinear problem, the evaluation count."""

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
from _stabilized import order_solve

from flows import ROCK4, rkc_eval_counts
from flows._solvers._rock import (
    ELL_FRACTION,
    ROCK4_DEGREES,
    composite_tableau,
    derive_degree,
    max_stability_interval,
    order_conditions,
    rock4_coefficients,
    rock4_recurrence,
    rock4_stability_polynomial,
    rock4_table,
)

TABLE = rock4_table()

# Abdulle (2002), Table 2.1: ℓ_s of his fourth-order polynomials (nearly optimal).
ABDULLE_ELL = {5: 5.9983, 10: 32.4470, 20: 138.3586, 50: 879.8864, 100: 3538.1276}


def test_table_is_a_fresh_derivation():
    """The stored degrees re-derive to the same numbers: s = 5 from scratch (finishing
    iteration from RK4), s = 6 and s = 20 from the previous degree's coefficients (the
    table's continuation)."""
    by_s = {r["s"]: r for r in TABLE}
    for s, start in ((5, None), (6, by_s[5]["fin"]), (20, by_s[19]["fin"])):
        fresh = derive_degree(s, start_fin=start)
        stored = by_s[s]
        assert fresh["ell"] == pytest.approx(stored["ell"], rel=1e-9)
        np.testing.assert_allclose(fresh["roots"], stored["roots"], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(fresh["fin"], stored["fin"], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("s", sorted(ABDULLE_ELL))
def test_stability_interval_matches_abdulle(s):
    """ℓ_max(s) of the undamped polynomial within 1 % of Abdulle's Table 2.1 (his
    polynomials are built the same way; the last digits depend on how the free parameter
    is fixed), and ℓ_max/s² → 0.354 like his."""
    ell, _ = max_stability_interval(s)
    assert ell == pytest.approx(ABDULLE_ELL[s], rel=0.01)


def test_every_degree_is_fourth_order_and_stable():
    """For every stored degree: R_s = e^z + O(z⁵), the composite s-stage tableau satisfies
    all 8 order-4 conditions, |R_s| ≤ 1 on [−ℓ_s, 0] (2000·s points, denser than the
    derivation's check) and ≤ 0.7 on [−ℓ_s, −10] where ℓ_s > 20 (the damping
    `ELL_FRACTION` buys), and
    ℓ_s = `ELL_FRACTION`·ℓ_max(s) grows like s²."""
    co = rock4_coefficients()
    assert tuple(co["degrees"]) == ROCK4_DEGREES
    for row in TABLE:
        s, ell, roots, fin = row["s"], row["ell"], row["roots"], row["fin"]
        assert ell == pytest.approx(ELL_FRACTION * row["ell_max"], rel=1e-12)
        mu, nu, ka = rock4_recurrence(s, ell, roots)
        a, b = composite_tableau(mu, nu, ka, fin)
        o4, _ = order_conditions(a, b)
        assert np.max(np.abs(o4)) < 1e-11, (s, o4)
        theta = np.linspace(0.0, np.pi, 2000 * s)
        z = 0.5 * ell * (np.cos(theta) - 1.0)
        r = np.abs(rock4_stability_polynomial(s, ell, roots, z))
        assert np.max(r) <= 1.0 + 1e-9, s
        if ell > 20.0:
            assert np.max(r[z < -10.0]) <= 0.7, s
        # linear order through the tableau, independently of the Taylor recurrence
        e = np.ones(len(b))
        taylor = [b @ np.linalg.matrix_power(a, k) @ e for k in range(4)]
        np.testing.assert_allclose(taylor, [1, 1 / 2, 1 / 6, 1 / 24], atol=1e-11)
    ells = co["ell"] / co["degrees"] ** 2
    assert 0.30 < ells[-1] < 0.33 and np.all(np.diff(co["ell"]) > 0)


def test_one_step_is_the_stability_polynomial():
    """One step of size 1 on y' = λ y (λ a grid on [−ℓ_s, 0], diagonal) returns R_s(λ): the
    solver's stages (recurrence + finishing procedure) are the polynomial."""
    co = rock4_coefficients()
    i = ROCK4_DEGREES.index(20)
    ell = float(co["ell"][i])
    rho = 0.5 * (ell + float(co["ell"][i - 1]))  # selects s = 20
    row = TABLE[i]
    z = -np.linspace(0.0, ell, 401)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, lam: lam * y),
        ROCK4(spectral_radius=lambda t, y, a: rho, nonstiff="none"),
        0.0,
        1.0,
        1.0,
        jnp.ones_like(z),
        args=jnp.asarray(z),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    assert int(sol.solver_state.stages) == 20
    expected = rock4_stability_polynomial(20, ell, row["roots"], z)
    np.testing.assert_allclose(np.asarray(sol.ys[-1]), expected, atol=1e-11)


@pytest.mark.parametrize(("hrho", "lam_max"), [(4.0, 2.0), (100.0, 2.0), (2000.0, 2.0)])
def test_order_four(hrho, lam_max):
    """Global error at t = 1 for h = 1/4 … 1/32 with a fixed degree (s = 5, 18 and 81: the
    finishing procedure's nonlinear order conditions, not only R_s = e^z + O(z⁵)): the
    fitted order is 4 (4.11 at s = 18). Moving a31 by +0.01 and a32 by −0.01 (c_3 kept)
    broke the nonlinear conditions and gave 2.27 at s = 18: the test sees them."""
    hs = np.array([1 / 4, 1 / 8, 1 / 16, 1 / 32])
    out = [order_solve(ROCK4, jnp.asarray(h), jnp.asarray(hrho), jnp.asarray(lam_max)) for h in hs]
    errs = np.array([float(e) for e, _ in out])
    stages = {int(s) for _, s in out}
    assert len(stages) == 1  # one method across the sweep
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert 3.7 <= slope <= 4.4, (slope, errs)


def test_eval_counts_of_a_step():
    """A step of degree s costs s evaluations (F(y_{n+1}) included) plus the one in
    `init`: s = 5 here."""
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: -y),
        ROCK4(spectral_radius=lambda t, y, a: 0.9, nonstiff="none"),
        0.0,
        1.0,
        1.0,
        jnp.ones(2),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    c = rkc_eval_counts(sol)
    assert int(c["vf_evals"]) == 1 + 5


@pytest.mark.e2e  # ROCK4 through simulate: ~13 s cold (its stages are tested as units)
def test_simulate_rock4():
    """`simulate(solver='rock4')` agrees with a tight reference on the small multi-stage
    problem and records its own counts."""
    import flows
    from flows.models import TwoLayer

    prob = flows.make_problem(TwoLayer(m=30, d=1, alpha=1.0), flows.paper_data("f1", n=100), key=0)
    kw = dict(t1=20.0, n_save=3)
    ref = flows.simulate(prob, solver="dopri8", rtol=1e-12, atol=1e-14, **kw)
    tr = flows.simulate(prob, solver="rock4", rtol=1e-7, atol=1e-10, **kw)
    size = max(float(np.max(np.abs(ref.param(k)))) for k in ("a", "w"))
    err = max(float(np.max(np.abs(tr.param(k) - ref.param(k)))) for k in ("a", "w"))
    assert err <= 3 * 1e-7 * size
    assert tr.stats["jvp_evals"] > 0 and tr.stats["vf_evals_counted_by"].startswith("solver")
    assert tr.config["solver"] == "rock4"


def test_max_stages_below_the_smallest_degree_is_refused():
    with pytest.raises(ValueError, match="max_stages"):
        ROCK4(max_stages=4)


def test_steps_beyond_the_largest_degree_are_split_into_sub_steps():
    """With `max_stages=10` a step with h ρ = 2.9 ℓ_10 is taken as 3 sub-steps of degree 10:
    on y′ = λ y it returns R_10(λ/3)³ (λ on [−2.9 ℓ_10, 0])."""
    co = rock4_coefficients()
    i = ROCK4_DEGREES.index(10)
    ell = float(co["ell"][i])
    rho = 2.9 * ell
    z = -np.linspace(0.0, rho, 301)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, lam: lam * y),
        ROCK4(spectral_radius=lambda t, y, a: rho, max_stages=10, nonstiff="none"),
        0.0,
        1.0,
        1.0,
        jnp.ones_like(z),
        args=jnp.asarray(z),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    assert sol.ys is not None and sol.solver_state is not None
    assert int(sol.solver_state.stages) == 3 * 10
    expected = rock4_stability_polynomial(10, ell, TABLE[i]["roots"], z / 3.0) ** 3
    np.testing.assert_allclose(np.asarray(sol.ys[-1]), expected, atol=1e-11)


def test_a_non_finite_step_is_not_reported_successful():
    """A field that turns NaN at t > 0.5 ends the solve with a failure, not a success."""
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: jnp.where(t > 0.5, jnp.nan, -y)),
        ROCK4(spectral_radius=lambda t, y, a: 50.0),
        0.0,
        1.0,
        0.1,
        jnp.ones(3),
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
        throw=False,
    )
    assert sol.result != diffrax.RESULTS.successful
