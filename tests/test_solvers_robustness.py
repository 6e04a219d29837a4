"""Robustness of `flows.simulate`'s solves (issue 16): the first step is the toolkit's,
chosen from the spectral radius at θ(0) and the tolerances, not diffrax's 0.01."""

import numpy as np

import flows


def _quartic_problem(d=20, c=1e4, seed=0):
    """Gradient flow of L(θ) = ½ θᵀ H θ + (c/4) Σ θ_j⁴ (H eigenvalues 1 … 1e4) written as
    a squared-error problem: (1/2n) Σ f_i² with f = (√n H^{1/2} θ, √(n/2) √c θ²)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    hq = (q * np.geomspace(1.0, 1e4, d)) @ q.T
    n = 2 * d
    x = np.zeros((n, 2 * d))
    x[:d, :d] = np.sqrt(n) * np.linalg.cholesky(hq).T
    x[d:, d:] = np.sqrt(n / 2) * np.sqrt(c) * np.eye(d)

    def model(p, x):
        return x[:, :d] @ p["t"] + x[:, d:] @ (p["t"] ** 2)

    return flows.make_problem(
        model, flows.from_arrays(x, np.zeros(n)), theta0={"t": 3.0 * rng.standard_normal(d)}
    )


def test_first_step_is_chosen_from_the_spectral_radius():
    """Quartic flow, ρ(θ(0)) ≈ 2.4e6: with diffrax's start (dt0 = 0.01, what `dt0=None` gave
    with diffrax 0.7.2, whose heuristic skips wrapped terms) Tsit5's first step overflows and
    the step size never recovers (20 000 rejected steps, none accepted); the toolkit's first
    step (≤ 2/ρ) succeeds and agrees with Kvaerno5 at a tight tolerance."""
    prob = _quartic_problem()
    kw = dict(t1=1.0, n_save=3, max_steps=20_000, throw=False)
    old = flows.simulate(prob, solver="tsit5", rtol=1e-6, atol=1e-9, dt0=0.01, **kw)
    assert not old.stats.ok and old.stats["accepted_steps"] == 0
    tr = flows.simulate(prob, solver="tsit5", rtol=1e-6, atol=1e-9, **kw)
    assert tr.stats.ok
    rho0, dt0 = tr.stats["rho0"], tr.stats["dt0"]
    assert 1e6 < rho0 < 1e7 and 0 < dt0 <= 2.0 / (1.2 * rho0) * (1 + 1e-12)
    ref = flows.simulate(prob, solver="kvaerno5", rtol=1e-10, atol=1e-13, **kw)
    assert ref.stats.ok
    a, b = tr.param("t")[-1], ref.param("t")[-1]
    assert np.max(np.abs(a - b)) <= 1e-4 * np.max(np.abs(b))
    assert tr.stats["first_step_evals"] == 22  # 20 power iterations + 2 field evaluations


def test_stabilized_and_implicit_first_steps_measure_no_spectral_radius():
    """ρ(θ(0)) only caps the first step of a classical explicit solver; RKC2, ESERK4 and the
    implicit solvers start without that cap, so `simulate` no longer spends the 20
    Hessian-vector products on it (RKC2 and ESERK4 estimate ρ themselves): `rho0` absent,
    2 first-step evaluations. Their first step is the one the rule gives without a cap."""
    import diffrax

    from flows._solvers import initial_step, make_solver

    prob = _quartic_problem()
    th0 = prob.theta0
    for name in ("rkc", "eserk4", "kvaerno5"):
        tr = flows.simulate(prob, solver=name, t1=0.01, rtol=1e-6, atol=1e-9, n_save=2)
        assert tr.stats.ok
        assert "rho0" not in tr.stats.extra and tr.stats["first_step_evals"] == 2, name
        h = initial_step(
            lambda t, th: {"t": -prob.grad(th)["t"]},
            0.0,
            th0,
            rtol=1e-6,
            atol=1e-9,
            order=make_solver(name, 1e-6, 1e-9).order(diffrax.ODETerm(lambda t, y, a: y)) or 1,
            rho=float("nan"),
            stability=None,
            span=0.01,
        )
        assert tr.stats["dt0"] == float(h), name
