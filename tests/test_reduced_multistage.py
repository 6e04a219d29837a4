"""Closed forms of `reduced.multistage` against numerical integration (the oracles)."""

import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from reduced import multistage as ms


def _integrate(f, y0, t1, args=None, ts=None):
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(f),
        diffrax.Dopri8(),
        0.0,
        t1,
        None,
        y0,
        args=args,
        saveat=diffrax.SaveAt(ts=ts) if ts is not None else diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=1e-13, atol=1e-14),
        max_steps=100_000,
    )
    assert sol.ys is not None
    return sol.ys


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("t1", [0.5, 3.0])
def test_linearized_closed_form_solves_eq15(t1):
    key_a, key_w = jax.random.split(jax.random.key(0))
    m, d = 7, 3
    a0 = 0.1 * jax.random.normal(key_a, (m,))
    w0 = 0.1 * jax.random.normal(key_w, (m, d))
    e1 = jnp.eye(d)[0]
    a_num, w_num = _integrate(ms.linearized_vector_field, (a0, w0), t1, args=e1)
    a_cf, u_cf = ms.linearized_closed_form(a0, w0[:, 0], t1)
    assert _rel(a_num[-1], a_cf) < 1e-8
    assert _rel(w_num[-1][:, 0], u_cf) < 1e-8
    np.testing.assert_array_equal(np.asarray(w_num[-1][:, 1:]), np.asarray(w0[:, 1:]))


def test_linearized_general_moments_growth_rate_is_norm_b():
    key_a, key_w = jax.random.split(jax.random.key(1))
    m, d = 5, 3
    a0 = 0.1 * jax.random.normal(key_a, (m,))
    w0 = 0.1 * jax.random.normal(key_w, (m, d))
    b = jnp.array([0.3, -1.2, 2.0])
    t1 = 1.7
    a_num, w_num = _integrate(ms.linearized_vector_field, (a0, w0), t1, args=b)
    a_cf, w_cf = ms.linearized_solution(a0, w0, b, t1)
    assert _rel(a_num[-1], a_cf) < 1e-8
    assert _rel(w_num[-1], w_cf) < 1e-8


def test_linearized_limits():
    a0, u0 = jnp.array([0.2, -0.1]), jnp.array([0.05, 0.3])
    a, u = ms.linearized_closed_form(a0, u0, 0.0)
    np.testing.assert_allclose(a, a0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(u, u0, rtol=0, atol=1e-15)
    # t → ∞: a and u align along the growing mode, a/u → 1
    a, u = ms.linearized_closed_form(a0, u0, 30.0)
    np.testing.assert_allclose(np.asarray(a / u), 1.0, rtol=1e-12)


@pytest.mark.parametrize("k0", [1e-4, 0.2, 0.9])
def test_logistic_closed_form_solves_eq18(k0):
    ts = jnp.linspace(0.0, 6.0, 13)
    num = _integrate(lambda t, k, args: ms.logistic_vector_field(t, k), jnp.asarray(k0), 6.0, ts=ts)
    cf = ms.logistic_K(ts, k0)
    assert _rel(num, cf) < 1e-8


def test_logistic_inverse_and_limits():
    k0, t0 = 0.01, 1.5
    assert float(ms.logistic_K(t0, k0, t0)) == pytest.approx(k0, rel=1e-14)
    assert float(ms.logistic_K(1e4, k0, t0)) == 1.0
    for k in (0.02, 0.5, 0.9, 0.999):
        t = ms.logistic_time_to(k, k0, t0)
        assert float(ms.logistic_K(t, k0, t0)) == pytest.approx(k, rel=1e-12)
    # rate-2 law: from K = 1/2 the time to K = e²/(1+e²) is exactly 1
    assert float(ms.logistic_time_to(math.e**2 / (1 + math.e**2), 0.5)) == pytest.approx(1.0)


def test_descent_flow_closes_on_K_Kprime_and_conserves():
    key_a, key_u = jax.random.split(jax.random.key(2))
    m = 50
    a0 = 0.05 * jax.random.normal(key_a, (m,))
    u0 = a0 + 0.01 * jax.random.normal(key_u, (m,))
    ts = jnp.linspace(0.0, 4.0, 9)
    a, u = _integrate(ms.descent_vector_field, (a0, u0), 4.0, ts=ts)
    K = jnp.sum(a * u, axis=1)
    Kp = jnp.sum(a**2 + u**2, axis=1)
    c = ms.conserved_quantity(K, Kp)
    assert float(jnp.max(jnp.abs(c - c[0]))) <= 1e-10 * float(jnp.max(Kp**2))
    # the macroscopic system reproduces K, K′ of the m-dimensional flow
    Km, Kpm = _integrate(ms.macroscopic_vector_field, (K[0], Kp[0]), 4.0, ts=ts)
    assert _rel(Km, K) < 1e-8 and _rel(Kpm, Kp) < 1e-8
    assert float(K[-1]) > 0.9  # and it does descend to K ≈ 1


def test_table1_values_and_continuity():
    assert ms.table1(1.0) == (0.75, 1.25, 0.25)
    assert ms.table1(2.0) == (1.0, 2.0, 1.0)
    assert ms.table1(1.5) == pytest.approx((1.0, 2.0, 0.5))
    just_above = ms.table1(1.5 + 1e-12)
    assert just_above == pytest.approx(ms.table1(1.5), abs=1e-9)
    assert ms.plateau_time(math.e**4, 1.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="alpha"):
        ms.table1(0.5)


def test_bound_formulas():
    m = 1000.0
    lm = math.log(m)
    q, r = ms.linearization_thresholds(m, 1.0)
    assert q == pytest.approx(m**-0.75 * lm) and r == pytest.approx(m**-1.25 * lm**3)
    assert ms.theorem1_loss_rate_bound(m, 1.0) == pytest.approx(1 / (m**0.5 * lm))
    assert ms.theorem1_noncondensed_bound(m, 1.0) == pytest.approx(max(lm / m, lm**6 / m**3))
    lo, hi = ms.theorem2_descent_time_interval(m, 1.0, 0.2)
    assert lo == pytest.approx(lm / 2.2) and hi == pytest.approx(lm / 1.8)
    assert ms.theorem2_qmax_bound(m, 1.0, 0.2) == pytest.approx(m**-0.3)
    assert ms.secondary_plateau_end(2.0, m, 0.1) == pytest.approx(2.0 + lm / 4)
    with pytest.raises(ValueError, match="delta_prime"):
        ms.theorem2_descent_time_interval(m, 1.0, 2.5)
    with pytest.raises(ValueError, match="m"):
        ms.plateau_time(1.0, 1.0)


def test_normalization_values():
    nz = ms.normalization(4.0, 2.0)
    assert nz.lam == pytest.approx(math.sqrt(0.5)) and nz.time_rate == 2.0 and nz.k_inf == 0.5
    with pytest.raises(ValueError):
        ms.normalization(1.0, 0.0)


def test_bound_formulas_at_hand_computed_points():
    # α = 1: (α₁, γ₁) = (3/4, 5/4); m = e⁴ makes ln m = 4
    m, lm = math.exp(4.0), 4.0
    assert ms.proposition1_bound(m, 1.0) == pytest.approx(max(m**-0.5, lm**5 * m**-2.5))
    assert ms.lemma2_rate_bound(m, 0.75, 1.0) == pytest.approx(
        max(lm**3 * m**-1.75, lm**5 * m**-2.25)
    )
    first, second = ms.corollary1_w2_terms(m, 1.0)
    assert first == pytest.approx(m**-0.5 * lm**3)
    assert second == pytest.approx(max(m**-0.25, lm**5 * m**-2.25))
    assert ms.corollary2_condensation_bound(m, 1.0) == pytest.approx(max(m**-0.5, lm**10 * m**-4.5))
    assert ms.corollary3_lower_deficit(m, 1.0) == pytest.approx(m**-1.5)
    first, second = ms.corollary4_w2_terms(1e4, 1.0, 0.1)  # α₂ = 0.1: 1 − 5α₂ = 1/2
    assert first == pytest.approx(1e-2)
    assert second == pytest.approx(max(1e-2, math.log(1e4) / 1e2))
    assert ms.theorem2_wperp_bound(1e4, 1.0, 0.1) == pytest.approx(1e4**-0.8)
    # α > 3/2 switches Table 1 to (α₁, γ₁) = (1, 2)
    assert ms.corollary3_lower_deficit(100.0, 2.0) == pytest.approx(100.0**-2)
    with pytest.raises(ValueError, match="alpha"):
        ms.proposition1_bound(100.0, 0.5)
    with pytest.raises(ValueError, match="width"):
        ms.corollary4_w2_terms(1.0, 1.0, 0.1)
