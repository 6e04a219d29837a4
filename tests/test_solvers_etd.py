"""`ETDRK4` (`flows/_solvers/_etd.py`): Krogstad's ETDRK4-B whose linear part is the
Hessian's most negative eigenpairs. Its φ-functions against quadrature, its order on a
smooth flow with a closed form, the tolerance contract with a stiff outlier, the rank, the
counts, the energy state with its non-symmetric Jacobian, and `simulate(solver='etdrk4')`.

The oracle: a rotated Bernoulli flow. With Q orthogonal and z = Qᵀθ, the loss
L(θ) = Σ_i (λ_i z_i²/2 + z_i⁴/4) has the gradient flow z_i′ = −λ_i z_i − z_i³, whose
solution is z_i(t) = sign(z_i0) e^{−λ_i t} / sqrt(z_i0^{−2} + (1 − e^{−2λ_i t})/λ_i). With
a bulk λ ∈ [1, 3] and one or two outliers (λ = 300 … 1e5) it has the spectrum the method is
built for: a few stiff eigenvalues over a non-stiff bulk.
"""

import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _exponential import adaptive_solver, bernoulli, fitted_order, rel_error, stiff_module
from scipy import integrate

from flows import ETDRK4, etd_eval_counts
from flows._solvers._etd import flow_state_mask, phi_functions

RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


def outliers(d=20, stiff=(), seed=0):
    """The rotated Bernoulli flow (`_exponential.bernoulli`) with a bulk λ ∈ [1, 3] and the
    outliers `stiff`."""
    return bernoulli(d=d, lam_max=3.0, stiff=stiff, seed=seed)


def adaptive(solver, field, y0, t1=1.0):
    return adaptive_solver(solver, field, y0, t1)


def test_phi_functions_against_quadrature():
    """φ_k(z) = ∫₀¹ e^{(1−s)z} s^{k−1}/(k−1)! ds (scipy quad) on both sides of the switch
    between series and closed form (|z| = 0.5) and far out on the stiff side."""
    zs = np.array([-2000.0, -60.0, -3.0, -0.5000001, -0.4999999, -1e-3, 0.0, 1e-6, 0.3, 0.7])
    e, p1, p2, p3 = (np.asarray(v) for v in phi_functions(jnp.asarray(zs)))
    np.testing.assert_allclose(e, np.exp(zs), rtol=1e-15)
    for k, got in ((1, p1), (2, p2), (3, p3)):
        ref = [
            integrate.quad(
                lambda s, z=z, k=k: math.exp((1 - s) * z) * s ** (k - 1) / math.factorial(k - 1),
                0.0,
                1.0,
                epsabs=0.0,
                epsrel=1e-13,
                limit=200,
                points=[1.0 - 1.0 / abs(z)] if z < -10 else None,
            )[0]
            for z in zs
        ]
        np.testing.assert_allclose(got, ref, rtol=1e-11, err_msg=f"phi_{k}")


def test_order_four_on_a_smooth_flow():
    """Fixed steps h = 1/16 … 1/128 on the Bernoulli flow with λ ∈ [1, 10] (no outlier),
    ETDRK4 steps only (`nonstiff='none'`): the fitted order is 4 (measured 4.17; local
    slopes 4.39, 4.11, 4.02 — 4.42 over h = 1/8 … 1/64, still pre-asymptotic there)."""
    field, y0, exact = bernoulli(d=20, lam_max=10.0)

    slope, errs = fitted_order(
        ETDRK4(nonstiff="none"), field, y0, exact, np.array([1 / 16, 1 / 32, 1 / 64, 1 / 128])
    )
    assert 3.7 <= slope <= 4.5, (slope, errs)


def test_non_stiff_steps_are_tsit5s():
    """Where no direction is stiff — here J = A with A's eigenvalues in [1, 3] (growth,
    as at a saddle's escape: the Ritz values are clipped at 0) — every step of the
    default (`nonstiff='tsit5'`) is Tsit5's: at fixed steps h = 1/16 … 1/128 its errors
    against the closed form e^{At} θ₀ are diffrax's Tsit5's (to rounding), far below
    ETDRK4's steps' (`nonstiff='none'`: RK4 here, L = 0), and the counts say so: 6
    evaluations and one product a Tsit5 step."""
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    lam = np.geomspace(1.0, 3.0, 20)
    a = jnp.asarray(q @ np.diag(lam) @ q.T)
    y0 = rng.standard_normal(20)

    def field(t, y, args):
        return a @ y

    def exact(t):
        return q @ (np.exp(lam * t) * (q.T @ y0))

    hs = np.array([1 / 16, 1 / 32, 1 / 64, 1 / 128])
    _, errs = fitted_order(ETDRK4(), field, y0, exact, hs)
    _, tsit5 = fitted_order(diffrax.Tsit5(), field, y0, exact, hs)
    np.testing.assert_allclose(errs, tsit5, rtol=1e-6, atol=1e-14)  # rounding of θ
    _, rk4 = fitted_order(ETDRK4(nonstiff="none"), field, y0, exact, hs)
    assert np.all(rk4 >= 100 * errs), (rk4, errs)  # measured 5700–10 000×

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        ETDRK4(),
        0.0,
        1.0,
        1 / 16,
        jnp.asarray(y0),
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
    )
    c = {k: int(np.min(v)) for k, v in etd_eval_counts(sol).items()}
    assert c["steps"] == c["nonstiff_steps"] == 16
    # F(y₀), init's 4 products, then 6 evaluations and one product a step
    assert c["vf_evals"] == 1 + 4 + 7 * 16


def test_a_settled_outlier_s_transient_is_etdrk4s():
    """The Bernoulli flow with an outlier at 10³ starting far from its slow manifold
    (z = O(1)): after the first step (Tsit5's: no earlier Ritz value to call the outlier
    settled) every step is ETDRK4's, which integrates the transient exactly, where Tsit5
    would resolve it (measured before this rule: 14 and 65 Tsit5 steps at rtol 1e-5 and
    1e-8, 303 and 1515 evaluations against ETDRK4's 210 and 1125)."""
    field, y0, exact = outliers(d=50, stiff=(1e3,))
    solve = adaptive(ETDRK4(), field, y0)
    for rtol in (1e-5, 1e-8):
        y, res, st = solve(rtol)
        assert int(res) == 0
        assert rel_error(y, exact(1.0)) <= 3 * rtol
        assert int(etd_eval_counts(st)["nonstiff_steps"]) == 1


@pytest.mark.e2e  # compiles its own solves: tens of seconds
def test_switches_to_etdrk4_where_the_outlier_is_stiff():
    """An outlier at 30 over the bulk, to t = 1, from z = O(1): the first step is Tsit5's
    (no earlier Ritz value), the transient and the long steps ETDRK4's, and a Tsit5 step
    comes back where the step is short and nothing moves along the outlier (measured at
    rtol 1e-3 and 1e-4: 1 and 2 Tsit5 steps of 13 and 22). Both kinds are taken, the
    tolerance is met (err/rtol ≤ 3; measured 0.02), and the evaluations add up: 6 a Tsit5
    step, 4 an ETDRK4 step, one product a step."""
    field, y0, exact = outliers(d=50, stiff=(30.0,))
    solve = adaptive(ETDRK4(), field, y0)
    for rtol in (1e-3, 1e-4):
        y, res, st = solve(rtol)
        assert int(res) == 0
        assert rel_error(y, exact(1.0)) <= 3 * rtol, rtol
        c = {k: np.asarray(v) for k, v in etd_eval_counts(st).items()}
        n, ns = int(c["steps"]), int(c["nonstiff_steps"])
        assert 0 < ns < n, (rtol, ns, n)
        assert int(c["vf_evals"]) == 1 + 4 + 4 * n + 2 * ns + n


@pytest.mark.e2e  # compiles its own solves: tens of seconds
@pytest.mark.parametrize("outlier", [1e3, 1e5])
def test_tolerance_contract_with_a_stiff_outlier(outlier):
    """err/rtol ∈ [0.01, 3] from rtol 1e-3 to 1e-8 with one outlier (h|λ| up to ~10⁴ per
    step; measured 0.017, flat: on a contracting flow the estimate, × `_SAFETY`,
    over-delivers; see the module doc), the stiff coordinate starting far from its slow manifold
    (z = O(1): the fast transient that a misaligned L mis-integrates without the power
    steps of `init`), in far fewer steps than RK4's stability would allow (t₁ λ / 2.8)."""
    field, y0, exact = outliers(d=50, stiff=(outlier,))
    solve = adaptive(ETDRK4(), field, y0)
    for rtol in RTOLS:
        y, res, st = solve(rtol)
        assert int(res) == 0
        ratio = rel_error(y, exact(1.0)) / rtol
        assert 0.01 <= ratio <= 3.0, (rtol, ratio)
        assert int(st.n_steps) < outlier / 2.8  # RK4's stability bound over t1 = 1
        c = {k: np.asarray(v) for k, v in etd_eval_counts(st).items()}
        assert abs(float(c["ritz"][0]) + outlier) <= 1e-6 * outlier  # z_stiff(1) = 0


@pytest.mark.e2e  # compiles its own solves: tens of seconds
def test_rank_two_takes_two_outliers():
    """Outliers at 300 and 1000: rank 2 puts both in L and steps by accuracy; rank 1 leaves
    300 in N and is held to h ≲ 2.8/300 (measured at rtol 1e-3, 1e-5, 1e-7: 14, 40, 128
    steps against 120, 149, 254; at 1e-7 both are accuracy-limited). Both meet
    the tolerance, and rank 2's Ritz values are the two outliers."""
    field, y0, exact = outliers(d=50, stiff=(300.0, 1000.0))
    steps = {}
    for rank in (1, 2):
        solve = adaptive(ETDRK4(rank=rank), field, y0)
        steps[rank] = []
        for rtol in (1e-3, 1e-5, 1e-7):
            y, res, st = solve(rtol)
            assert int(res) == 0
            assert rel_error(y, exact(1.0)) <= 3 * rtol
            c = etd_eval_counts(st)
            steps[rank].append(int(c["steps"]))
            # 4 stages a step (6 a Tsit5 step), F(y₀), and one difference product J v
            # per column a step and per column in each of init's 4 power steps
            n, ns = int(c["steps"]), int(c["nonstiff_steps"])
            assert int(c["vf_evals"]) == 1 + 4 * n + 2 * ns + rank * (n + 4)
            assert int(c["jvp_evals"]) == 0
            if rank == 2:
                np.testing.assert_allclose(np.asarray(c["ritz"]), [-1000.0, -300.0], rtol=1e-6)
    assert steps[1][0] >= 3 * steps[2][0] and steps[1][1] >= 3 * steps[2][1], steps
    assert min(steps[1]) >= 1.0 * 300 / 2.8  # rank 1: held by RK4's stability on 300


@pytest.mark.e2e  # compiles its own solves: tens of seconds
def test_energy_state_needs_the_mask():
    """The state `simulate` integrates is (θ, E) with E′ = ‖∇L‖²: its Jacobian is not
    symmetric (the E row), and E carries the outlier's transient (λ z)² e^{2λt}. With
    `subspace_mask` keeping the subspace on θ (and E's own quadrature estimate), θ (tight
    Dopri8) and E meet the tolerance, from z(0) = 1e-3 and from z(0) = 1 for an outlier at
    500 (measured E 0.035–0.14 × rtol; 0.18–0.39 with `nonstiff='none'`; Tsit5 steps add
    the same quadrature bound — without it, under an earlier rule that took Tsit5 steps in
    the transient, E reached 4.1 × rtol from z(0) = 1 at rtol 1e-5); without the mask θ
    still does, E does not from z(0) = 1e-3 (measured 11 and 65 ×), and the energy
    identity's residual L(0) − L(1) − E(1) is that error."""
    rng = np.random.default_rng(0)
    d = 10
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.geomspace(1.0, 3.0, d)
    lam[-1] = 500.0
    qj, lj = jnp.asarray(q), jnp.asarray(lam)

    def loss(y):
        z = qj.T @ y
        return jnp.sum(lj * z**2 / 2 + z**4 / 4)

    def vf(t, s, args):
        g = jax.grad(loss)(s["theta"])
        return {"theta": -g, "E": jnp.sum(g * g)}

    def theta_only(s):
        return {"theta": s["theta"], "E": jnp.zeros_like(s["E"])}

    def run(solver, s0, rtol, atol):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(vf),
            solver,
            0.0,
            1.0,
            None,
            s0,
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
            saveat=diffrax.SaveAt(t1=True),
            max_steps=100_000,
        )

    for z_stiff in (1e-3, 1.0):
        z0 = rng.uniform(0.5, 1.5, d)
        z0[-1] = z_stiff
        s0 = {"theta": jnp.asarray(q @ z0), "E": jnp.zeros(())}
        ref = run(diffrax.Dopri8(), s0, 1e-12, 1e-14)
        for rtol in (1e-5, 1e-7):
            for mask in (theta_only, None):
                sol = run(ETDRK4(subspace_mask=mask), s0, rtol, 1e-3 * rtol)
                theta, e_end, e_ref = sol.ys["theta"][-1], sol.ys["E"][-1], ref.ys["E"][-1]
                assert rel_error(theta, ref.ys["theta"][-1]) <= 3 * rtol
                e_err = abs(float(e_end - e_ref)) / float(e_ref)
                if mask is not None:
                    assert e_err <= 3 * rtol, (z_stiff, rtol, e_err / rtol)
                elif z_stiff == 1e-3:
                    assert e_err > 3 * rtol, (z_stiff, rtol, e_err / rtol)
                    residual = abs(float(loss(s0["theta"]) - loss(theta) - e_end))
                    assert residual == pytest.approx(e_err * float(e_ref), rel=0.5)


def test_a_nonfinite_field_ends_the_solve():
    """NaN from the field: the step reports `RESULTS.nonfinite` and the solve ends there
    (the toolkit's failure report names the time reached), never returns NaN as a result."""

    def field(t, y, args):
        return jnp.where(t > 0.5, jnp.nan, -y)

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        ETDRK4(),
        0.0,
        1.0,
        0.1,
        jnp.ones(3),
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
        throw=False,
    )
    assert sol.result != diffrax.RESULTS.successful


def test_bad_rank_is_refused():
    with pytest.raises(ValueError, match="rank"):
        ETDRK4(rank=0)
    with pytest.raises(ValueError, match="rank"):
        ETDRK4(rank=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exceeds the number of parameters"):
        diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: -y),
            ETDRK4(rank=3),
            0.0,
            1.0,
            0.1,
            jnp.ones(2),
        )
    with pytest.raises(ValueError, match="products"):
        ETDRK4(products="finite")


def test_difference_products_match_hessian_vector_products():
    """`products='difference'` (the default: (F(y + δv) − F(y))/δ, one field evaluation)
    and 'jvp' (`jax.jvp`, a Hessian-vector product) give the same L to ≈ 1e-8: on a
    rotated Bernoulli flow with an outlier at 1e4 both take the same steps, their Ritz
    values agree to 1e-7 and their solutions to 1e-2 × rtol (measured 5.5e-3 ×); only the
    counts differ."""
    field, y0, exact = outliers(d=20, stiff=(1e4,))
    out = {}
    for products in ("difference", "jvp"):
        y, res, st = adaptive(ETDRK4(products=products), field, y0)(1e-6)
        assert int(res) == 0
        out[products] = (np.asarray(y), {k: np.asarray(v) for k, v in etd_eval_counts(st).items()})
    (yd, cd), (yj, cj) = out["difference"], out["jvp"]
    n, ns = int(cj["steps"]), int(cj["nonstiff_steps"])
    assert int(cd["steps"]) == n and int(cd["nonstiff_steps"]) == ns and n < 1e4 / 2.8
    assert int(cj["vf_evals"]) == 1 + 4 * n + 2 * ns and int(cj["jvp_evals"]) == n + 4
    assert int(cd["vf_evals"]) == 1 + 5 * n + 2 * ns + 4 and int(cd["jvp_evals"]) == 0
    np.testing.assert_allclose(cd["ritz"], cj["ritz"], rtol=1e-7)
    assert rel_error(yd, yj) <= 1e-8
    assert rel_error(yd, exact(1.0)) <= 3e-6


@pytest.mark.e2e  # ETDRK4 through simulate: compiles a flow solve
def test_simulate_etdrk4():
    """`simulate(solver='etdrk4')` agrees with a tight reference on the small multi-stage
    problem — θ and the energy E, at rtol 1e-4 and 1e-8 — and reports its own counts (field
    evaluations + Hessian-vector products)."""
    import flows
    from flows.models import TwoLayer

    prob = flows.make_problem(TwoLayer(m=30, d=1, alpha=1.0), flows.paper_data("f1", n=100), key=0)
    kw = dict(t1=20.0, n_save=3)
    ref = flows.simulate(prob, solver="dopri8", rtol=1e-12, atol=1e-14, **kw)
    for rtol in (1e-4, 1e-8):
        tr = flows.simulate(prob, solver="etdrk4", rtol=rtol, atol=1e-3 * rtol, **kw)
        size = max(float(np.max(np.abs(ref.param(k)))) for k in ("a", "w"))
        err = max(float(np.max(np.abs(tr.param(k) - ref.param(k)))) for k in ("a", "w"))
        assert err <= 3 * rtol * size  # measured 0.028, 0.043 (2026-12-07)
        e_ref = float(ref.observables["energy"][-1])
        e_err = abs(float(tr.observables["energy"][-1]) - e_ref)
        assert e_err <= 3 * rtol * e_ref  # measured 0.018, 0.22
    # its J v are field differences (`products='difference'`): no Hessian-vector products
    assert tr.stats["jvp_evals"] == 0 and tr.stats["vf_evals_counted_by"].startswith("solver")
    assert tr.stats["ritz_min"] < 0
    assert tr.config["solver"] == "etdrk4"


@pytest.mark.e2e  # ETDRK4 through simulate on three clocks: compiles three flow solves
def test_simulate_etdrk4_on_every_clock():
    """The loss clock's state is (θ, E, t) (the clock is s, t a quadrature), the physical
    and log clocks' (θ, E): `flow_state_mask` takes both (the loss clock failed with a
    TypeError before), and each clock's run ends within 3 × rtol of the reference (θ and
    E at t1 = 20, rtol 1e-6; measured 0.12 / 0.19 / 0.11 for θ, 0.17 / 0.14 / 0.023 for E,
    2026-12-07)."""
    import flows
    from flows.models import TwoLayer

    prob = flows.make_problem(TwoLayer(m=30, d=1, alpha=1.0), flows.paper_data("f1", n=100), key=0)
    kw = dict(t1=20.0, n_save=3)
    ref = flows.simulate(prob, solver="dopri8", rtol=1e-12, atol=1e-14, **kw)
    size = max(float(np.max(np.abs(ref.param(k)[-1]))) for k in ("a", "w"))
    e_ref = float(ref.observables["energy"][-1])
    rtol = 1e-6
    for clock in ("physical", "log", "loss"):
        tr = flows.simulate(prob, solver="etdrk4", rtol=rtol, atol=1e-3 * rtol, clock=clock, **kw)
        err = max(float(np.max(np.abs(tr.param(k)[-1] - ref.param(k)[-1]))) for k in ("a", "w"))
        assert err <= 3 * rtol * size, clock
        e_err = abs(float(tr.observables["energy"][-1]) - e_ref)
        assert e_err <= 3 * rtol * e_ref, clock
    y = (jnp.ones(4), jnp.asarray(2.0), jnp.asarray(3.0))
    masked = flow_state_mask(y)
    assert np.all(np.asarray(masked[0]) == 1.0) and float(masked[1]) == float(masked[2]) == 0.0


def test_flow_state_mask_refuses_another_state():
    """`make_solver('etdrk4')` is built for the toolkit's (θ, E): on another state its mask
    says so and names the class to use instead."""
    from flows import make_solver

    with pytest.raises(TypeError, match="flows.ETDRK4"):
        diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, a: -y),
            make_solver("etdrk4", 1e-6, 1e-9),
            0.0,
            1.0,
            0.1,
            jnp.ones(3),
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
        )


@pytest.mark.e2e  # compiles its own solves: tens of seconds
def test_a_stiff_bulk_is_slow_but_never_under_delivered():
    """Heat equation N = 100 (exact sine-series reference): its stiffness is a bulk, not an
    outlier, so rank 1 leaves it in N and the step is held to RK4's stability (thousands of
    steps, many rejected) — but the error test holds: err/rtol ≤ 3 at rtol 1e-3, 1e-5,
    1e-8 (measured on N = 200: 0.063–0.2; `benchmarks/results/bare_contract.md`)."""
    s = stiff_module()
    p = s.heat(100)
    solve = adaptive(ETDRK4(), p.field, p.y0, p.t1)
    for rtol in (1e-3, 1e-5, 1e-8):
        y, res, st = solve(rtol)
        assert int(res) == 0
        assert s.global_error(y, p.y_ref) <= 3 * rtol
        assert int(st.n_steps) > p.rho * p.t1 / 2.8 / 2  # stability-held, as documented


def test_the_bare_class_keeps_the_contract_where_it_applies():
    """The small multi-stage net (m = 50, n = 200, t = 20; reference scipy Radau at rtol
    1e-13 with the autodiff Hessian): after its first stage the Hessian has one stiff
    outlier, the case ETDRK4 is for. `flows.ETDRK4()` under a plain `PIDController`
    keeps err/rtol in [0.1, 3] at rtol 1e-3, 1e-6 and 1e-8 (0.42, 0.52, 2.2; measured
    0.11–2.2 at every rtol 1e-3 … 1e-8 — 0.11 at 1e-5 — with fewer evaluations than RKC2,
    ROCK4 and ESERK4 at each; `benchmarks/results/bare_contract.md`). Most of its steps
    are exponential ones (Tsit5 took 2–9 of 21–261), and at rtol 1e-3 it takes fewer
    steps than the outlier's stability would allow an explicit method (h·λ ≤ 3.5)."""
    s = stiff_module()
    p = s.multistage(m=50, n=200)
    solve = adaptive(ETDRK4(), p.field, p.y0, p.t1)
    for rtol in (1e-3, 1e-6, 1e-8):
        y, res, st = solve(rtol)
        assert int(res) == 0
        assert 0.1 * rtol <= s.global_error(y, p.y_ref) <= 3 * rtol, rtol
        assert 2 * int(st.nonstiff_steps) < int(st.n_steps)
        if rtol == 1e-3:
            assert 3.5 * int(st.n_steps) < -float(jnp.min(st.ritz)) * p.t1


def test_toolkit_controller_is_pi_for_etdrk4_only():
    """`flows.pid_controller(..., solver=...)`: ETDRK4 gets its PI coefficients (0.4, 0.3)
    in the controller that may shrink after an accepted step, in either norm and under a
    clip to save times; every other solver, and no solver, diffrax's I-controller — the
    same object as before the argument existed. A trajectory records the coefficients
    with the solver's settings."""
    import equinox as eqx

    from flows import pid_controller
    from flows._solvers import describe_solver
    from flows._solvers.control import PredictivePIDController

    plain = diffrax.PIDController(rtol=1e-5, atol=1e-8)
    assert eqx.tree_equal(pid_controller(1e-5, 1e-8, solver=diffrax.Tsit5()), plain)
    assert eqx.tree_equal(pid_controller(1e-5, 1e-8, solver=None), plain)
    pi = PredictivePIDController(rtol=1e-5, atol=1e-8, pcoeff=0.4, icoeff=0.3)
    assert eqx.tree_equal(pid_controller(1e-5, 1e-8, solver=ETDRK4()), pi)
    ctl = pid_controller(1e-5, 1e-8, "max", step_ts=jnp.array([0.5, 1.0]), solver=ETDRK4())
    assert isinstance(ctl, diffrax.ClipStepSizeController)
    assert isinstance(ctl.controller, PredictivePIDController)
    assert (ctl.controller.pcoeff, ctl.controller.icoeff) == (0.4, 0.3)
    assert ctl.controller.norm is not plain.norm
    settings = describe_solver(ETDRK4())["settings"]
    assert settings["controller_coefficients"] == [0.4, 0.3]
    assert settings["controller"] == type(pid_controller(1e-5, 1e-8, solver=ETDRK4())).__name__
    assert "controller_coefficients" not in describe_solver(diffrax.Tsit5())["settings"]


@pytest.mark.parametrize(
    ("err", "prev_err", "expect"),
    [
        (0.5, 0.2, "shrink"),  # accepted, growing error: diffrax holds h, this shrinks it
        (0.01, 0.01, "diffrax"),  # accepted, small error: both grow h alike
        (0.0, 0.3, "diffrax"),  # an exact step (error 0): grows, never shrinks
        (2.0, 0.5, "diffrax"),  # rejected: diffrax's retry
    ],
)
def test_predictive_controller_shrinks_after_an_accepted_step(err, prev_err, expect):
    """`PredictivePIDController` against diffrax's `PIDController` on one step whose
    scaled error is `err` (the previous one `prev_err`): where diffrax's factor is ≥ 1, or
    the step is rejected, the same next step; where an accepted step's factor is < 1,
    the next step is (t1 − t0) times that factor, computed here from the PI formula
    safety·err^(−(p + i)/k)·prev^(p/k) — not from the controller's code."""
    from flows._solvers.control import PredictivePIDController

    kw = dict(rtol=1e-3, atol=1e-3, pcoeff=0.4, icoeff=0.3)
    ours, theirs = PredictivePIDController(**kw), diffrax.PIDController(**kw)
    y0 = jnp.ones(4)
    y_error = jnp.full(4, err * 2e-3)  # scaled by atol + rtol·|y| = 2e-3: RMS = err
    state = (jnp.asarray(1.0 / prev_err), jnp.asarray(1.0), jnp.asarray(False))
    args = (0.0, 0.5, y0, y0, None, y_error, 4, state)
    keep, t0n, t1n, *_ = ours.adapt_step_size(*args)
    keep_d, t0d, t1d, *_ = theirs.adapt_step_size(*args)
    assert bool(keep) == bool(keep_d) == (err < 1)
    assert float(t0n) == float(t0d)
    if expect == "diffrax":
        assert float(t1n) == float(t1d)
    else:
        factor = 0.9 * err ** (-0.7 / 4) * prev_err ** (0.4 / 4)
        assert factor < 1 and float(t1d - t0d) == 0.5  # diffrax holds the step
        np.testing.assert_allclose(float(t1n - t0n), 0.5 * factor, rtol=1e-12)
