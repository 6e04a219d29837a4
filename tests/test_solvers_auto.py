"""`solver='auto'`: the measurement behind it (`flows.outlier_spectrum`, the pilot in
`measure_stiffness`) against Hessians whose spectra are known exactly (least squares: the
Hessian is the design's covariance), the rule (`flows.auto_solver`), and what `simulate`
records and uses. Which pick is the faster is measured in `benchmarks/bench_auto.py`, not
here (no test depends on timing)."""

import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows._solvers import AUTO_PILOT_STEP, AUTO_PILOT_STEPS, AUTO_STIFF_RHO_SPAN


def rotated(eigenvalues, seed=0):
    """A symmetric matrix with exactly these eigenvalues, in a random basis."""
    rng = np.random.default_rng(seed)
    d = len(eigenvalues)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return basis @ np.diag(eigenvalues) @ basis.T


def least_squares(eigenvalues, n=400, seed=0):
    """Least squares L = (1/2n) Σ (xᵢ·θ − yᵢ)² whose Hessian Xᵀ X / n has exactly these
    eigenvalues (a whitened Gaussian design coloured by `rotated`)."""
    rng = np.random.default_rng(seed)
    d = len(eigenvalues)
    x = rng.normal(size=(n, d))
    x = x @ np.linalg.cholesky(np.linalg.inv(x.T @ x / n))
    x = x @ np.linalg.cholesky(rotated(eigenvalues, seed)).T
    data = flows.Dataset(x=x, y=rng.normal(size=n), name="least squares")
    return flows.make_problem(lambda p, xx: xx @ p, data, theta0=jnp.zeros(d))


OUTLIER = np.r_[100.0, np.linspace(0.1, 1.0, 19)]
BULK = np.linspace(10.0, 100.0, 20)
PAIR = np.r_[100.0, 99.0, np.linspace(0.1, 1.0, 18)]


@pytest.mark.parametrize(
    "hessian, lam1, lam2",
    [
        (np.r_[100.0, np.linspace(0.1, 1.0, 59)], 100.0, 1.0),  # one outlier over a bulk
        (np.linspace(10.0, 100.0, 60), 100.0, 98.47),  # a stiff bulk: λ₂ ≈ λ₁
        (np.r_[100.0, 99.0, np.linspace(0.1, 1.0, 58)], 100.0, 99.0),  # two outliers
        # a ± pair: −100 is growth (no decay), so one outlier
        (np.r_[100.0, -100.0, np.linspace(0.1, 1.0, 58)], 100.0, 1.0),
        (np.r_[-100.0, np.linspace(-1.0, 1.0, 59)], 1.0, 0.966),  # growth only: no outlier
        (-np.linspace(1.0, 2.0, 60), 0.0, 0.0),  # nothing decays
    ],
)
def test_outlier_spectrum_on_known_spectra(hessian, lam1, lam2):
    """For the field F(θ) = −Hθ, (λ₁, λ₂) are H's two largest eigenvalues clipped at 0:
    never above them (Ritz values interlace), and within what 20 Lanczos products resolve
    of 60 dimensions (the isolated outlier to rounding)."""
    a = jnp.asarray(rotated(hessian))
    got1, got2 = (float(v) for v in flows.outlier_spectrum(lambda v: -(a @ v), jnp.zeros(60)))
    assert got1 <= lam1 * (1 + 1e-12) + 1e-12 and got2 <= lam2 * (1 + 1e-12) + 1e-12
    assert got1 >= 0.97 * lam1 and got2 >= 0.9 * lam2
    if hessian[0] == 100.0 and hessian[1] < 99.0:
        assert got1 == pytest.approx(100.0, rel=1e-10)


def test_outlier_spectrum_of_a_pytree_is_that_of_its_flat_vector():
    """The field on a pytree of parameters: the same spectrum as on the flat vector (the
    start vectors differ, one per leaf; 20 products of a 20-dimensional space are exact)."""
    a = jnp.asarray(rotated(BULK))
    flat = flows.outlier_spectrum(lambda v: -(a @ v), jnp.zeros(20))

    def tree_fn(t):
        out = -(a @ jnp.concatenate([t["u"], t["v"].ravel()]))
        return {"u": out[:8], "v": out[8:].reshape(3, 4)}

    tree = flows.outlier_spectrum(tree_fn, {"u": jnp.zeros(8), "v": jnp.zeros((3, 4))})
    np.testing.assert_allclose(np.asarray(tree), np.asarray(flat), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(flat), [100.0, BULK[-2]], rtol=1e-10)


def test_outlier_spectrum_stops_at_an_invariant_subspace():
    """A Hessian with two distinct eigenvalues: Lanczos reaches an invariant subspace after
    two products, and the rest of its tridiagonal stays zero (no division by ≈ 0)."""
    a = jnp.asarray(rotated(np.r_[50.0 * np.ones(10), 2.0 * np.ones(10)]))
    got = np.asarray(flows.outlier_spectrum(lambda v: -(a @ v), jnp.zeros(20)))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, [50.0, 2.0], rtol=1e-10)


@pytest.mark.parametrize(
    "rtol, rho_span, bulk_span, expect",
    [
        (1e-4, 100.0, None, "tsit5"),  # not stiff: no pilot
        (1e-4, float("nan"), None, "tsit5"),
        (1e-4, 400.0, 10.0, "etdrk4"),  # one outlier
        (1e-6, 400.0, 10.0, "etdrk4"),
        (1e-4, 400.0, 300.0, "rkc"),  # a stiff bulk
        (1e-4, 400.0, float("nan"), "rkc"),  # a pilot that diverged
        (1e-4, 400.0, None, "rkc"),  # not measured
        (1e-7, 400.0, 10.0, "rock4"),  # tight: fourth order, stabilized
        (1e-7, 400.0, 300.0, "rock4"),
        (1e-4, None, None, "rkc"),  # no measurement at all: the rule of thumb
        (1e-6, None, None, "tsit5"),
    ],
)
def test_auto_solver_rule(rtol, rho_span, bulk_span, expect):
    assert flows.auto_solver(rtol, rho_span, bulk_span) == expect


@pytest.mark.parametrize(
    "eigenvalues, expect",
    [(OUTLIER, "etdrk4"), (BULK, "rkc"), (PAIR, "rkc"), (OUTLIER / 20.0, "tsit5")],
)
def test_measure_stiffness_on_least_squares(eigenvalues, expect):
    """On a constant Hessian the pilot changes nothing: ρ (power iteration) approaches the
    top eigenvalue from below, λ₁ and λ₂ after the pilot are the two largest (20 Lanczos
    products of 20 dimensions: exact), and the pick follows (two outliers: rank-1 ETDRK4
    would leave one in its remainder, so a stabilized solver)."""
    prob = least_squares(eigenvalues)
    got = flows.measure_stiffness(prob, 0.0, 20.0, 1e-4)
    top, second = np.sort(eigenvalues)[-1], np.sort(eigenvalues)[-2]
    assert 0.9 * top <= got["rho"] <= top * (1 + 1e-9)
    if expect == "tsit5":  # ρT < 250: no pilot
        assert "bulk_span" not in got
    else:
        assert got["outlier_rate"] == pytest.approx(top, rel=1e-8)
        assert got["bulk_rate"] == pytest.approx(second, rel=1e-8)
        assert got["bulk_span"] == pytest.approx(20.0 * got["bulk_rate"])
        assert got["pilot_time"] == pytest.approx(AUTO_PILOT_STEPS * AUTO_PILOT_STEP / got["rho"])
    assert flows.auto_solver(1e-4, got["rho_span"], got.get("bulk_span")) == expect
    assert got["chosen"] == expect


@pytest.mark.e2e  # two flow solves
def test_auto_on_the_multistage_net_sees_past_the_initial_bulk():
    """The small multi-stage net: at θ(0) the Hessian is a bulk (λ₂ ≈ λ₁, so a choice made
    there would be RKC2); after the pilot one outlier is left, and `simulate` takes
    ETDRK4, records the measurement, and lands within its tolerance of a tight reference."""
    from jax.flatten_util import ravel_pytree

    from flows.models import TwoLayer

    prob = flows.make_problem(TwoLayer(m=30, d=1, alpha=1.0), flows.paper_data("f1", n=100), key=0)
    flat, unravel = ravel_pytree(prob.theta0)
    rho1, rho2 = flows.outlier_spectrum(lambda y: -ravel_pytree(prob.grad(unravel(y)))[0], flat)
    assert float(rho2) * 20.0 >= AUTO_STIFF_RHO_SPAN and float(rho2) > 0.5 * float(rho1)
    kw = dict(t1=20.0, n_save=3)
    tr = flows.simulate(prob, solver="auto", rtol=1e-5, atol=1e-8, **kw)
    rec = tr.config["solver_auto"]
    assert rec["chosen"] == tr.config["solver"] == "etdrk4"
    assert rec["bulk_span"] < AUTO_STIFF_RHO_SPAN <= rec["rho_span"]
    assert flows.auto_solver(1e-5, rec["rho_span"]) == "rkc"  # without the pilot
    ref = flows.simulate(prob, solver="dopri8", rtol=1e-12, atol=1e-14, **kw)
    size = max(float(np.max(np.abs(ref.param(k)))) for k in ("a", "w"))
    err = max(float(np.max(np.abs(tr.param(k) - ref.param(k)))) for k in ("a", "w"))
    assert err <= 3 * 1e-5 * size


@pytest.mark.parametrize(
    "args, words",
    [
        (("not a problem", 0.0, 1.0, 1e-4), "flows.Problem"),
        ((None, 1.0, 1.0, 1e-4), "t1"),
        ((None, 0.0, 1.0, 2.0), "rtol"),
    ],
)
def test_measure_stiffness_refuses_bad_input(args, words):
    prob = least_squares(OUTLIER)
    args = (prob if args[0] is None else args[0], *args[1:])
    with pytest.raises(flows.ConfigError, match=words):
        flows.measure_stiffness(*args)
