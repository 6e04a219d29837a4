"""Robustness of `flows.simulate`'s solves: the first step is the toolkit's,
chosen from the spectral radius at θ(0) and the tolerances, not diffrax's 0.01."""

import diffrax
import numpy as np
import pytest

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


@pytest.mark.e2e  # ~11 s cold
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


@pytest.mark.e2e
def test_stabilized_and_implicit_first_steps_measure_no_spectral_radius():
    """ρ(θ(0)) only caps the first step of a classical explicit solver; RKC2, ESERK4 and the
    implicit solvers start without that cap, so `simulate` no longer spends the 20
    Hessian-vector products on it (RKC2, ESERK4 and ROCK4 estimate ρ themselves): `rho0` absent,
    2 first-step evaluations. Their first step is the one the rule gives without a cap."""
    import diffrax

    from flows import initial_step, make_solver

    prob = _quartic_problem()
    th0 = prob.theta0
    for name in ("rkc", "eserk4", "rock4", "kvaerno5"):
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


def test_hessian_cg_gives_up_on_indefinite_and_hopeless_systems():
    """'kvaerno5-cg''s CG stops at the first direction of non-positive curvature (the Newton
    matrix I + γ h ∇²L is indefinite at a saddle with γ h |λ₋| > 1) and after
    `CG_MAX_STEPS` iterations, reporting the system unsolved so that the Newton iteration
    fails and the step shrinks. lineax's CG had neither test and its limit was 10 × n
    iterations: on the multi-stage flow at m = 200 a solve at rtol 1e-4 had not finished
    after 400 s."""
    import jax.numpy as jnp
    import lineax as lx

    from flows._solvers._implicit import CG_MAX_STEPS, matrix_free_kvaerno5

    cg = matrix_free_kvaerno5(1e-4, 1e-7).root_finder.linear_solver
    assert cg.max_steps == CG_MAX_STEPS == 1000
    n = 2000  # lineax's default would allow 10 n = 20 000 iterations

    def solve(eig):
        op = lx.MatrixLinearOperator(jnp.diag(eig))
        return lx.linear_solve(op, jnp.ones(n), cg, throw=False)

    sol = solve(jnp.geomspace(1.0, 1e10, n))  # CG needs ~√κ = 10⁵ iterations
    assert int(sol.stats["num_steps"]) == CG_MAX_STEPS
    assert sol.result == lx.RESULTS.max_steps_reached
    sol = solve(jnp.linspace(-0.5, 2.0, n))  # indefinite: caught at once
    assert bool(sol.stats["negative_curvature"]) and int(sol.stats["num_steps"]) < 10
    assert sol.result != lx.RESULTS.successful
    eig = jnp.geomspace(1.0, 1e2, n)  # well conditioned: solved to CG's tolerance
    sol = solve(eig)
    assert sol.result == lx.RESULTS.successful
    assert int(sol.stats["num_steps"]) < 100
    assert float(jnp.max(jnp.abs(eig * sol.value - 1.0))) < 1e-6


def test_hessian_cg_solves_the_newton_systems_of_a_flow_with_its_energy():
    """`flows.simulate` integrates (θ, E) with dE/dt = ‖∇L‖²: the Newton matrix
    I − γ h J of that state is not symmetric (J = [[−H, 0], [2 (H g)ᵀ, 0]]), so plain CG on
    it failed — on the multi-stage flow at m = 200, 181 of 1099 systems ran to the
    iteration limit and 41 of 87 steps were rejected (160 s). `HessianCG` runs CG on the
    symmetric θ block and recovers E by substitution: here the solution equals a dense
    solve of the full system, and that m = 200 solve takes 16 steps, none rejected (7 s)."""
    import jax
    import jax.numpy as jnp
    import lineax as lx
    import numpy as np

    from flows._solvers._implicit import HessianCG

    rng = np.random.default_rng(0)
    d = 30
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    h_mat = jnp.asarray((q * np.geomspace(0.1, 100.0, d)) @ q.T)

    def field(y):
        th, _ = y
        g = {"w": h_mat @ th["w"] + 0.1 * th["w"] ** 3}
        return {"w": -g["w"]}, jnp.sum(g["w"] ** 2)

    y = ({"w": jnp.asarray(rng.standard_normal(d))}, jnp.asarray(0.3))
    gh = 0.05  # γ h

    def newton_map(f):  # the Jacobian of f ↦ f − F(y + γ h f) is I − γ h J
        z = jax.tree_util.tree_map(lambda a, b: a + gh * b, y, f)
        return jax.tree_util.tree_map(lambda a, b: a - b, f, field(z))

    _, lin = jax.linearize(newton_map, jax.tree_util.tree_map(jnp.zeros_like, y))
    op = lx.FunctionLinearOperator(lin, jax.eval_shape(lambda: y))
    b = ({"w": jnp.asarray(rng.standard_normal(d))}, jnp.asarray(1.7))
    sol = lx.linear_solve(op, b, HessianCG(rtol=1e-12, atol=1e-14), throw=False)
    assert sol.result == lx.RESULTS.successful
    dense = jnp.linalg.solve(op.as_matrix(), jnp.concatenate([b[0]["w"], b[1][None]]))
    got = jnp.concatenate([sol.value[0]["w"], sol.value[1][None]])
    assert float(jnp.max(jnp.abs(got - dense))) < 1e-9 * float(jnp.max(jnp.abs(dense)))
    # the full (θ, E) system is not symmetric: CG on all of it is not an option
    mat = op.as_matrix()
    assert float(jnp.max(jnp.abs(mat - mat.T))) > 1e-3


@pytest.mark.e2e
def test_hessian_cg_products_are_counted():
    """'kvaerno5-cg''s CG reports its products with the Newton matrix (one Jacobian-vector
    product each) through `on_solve`, and `flows.simulate` adds them to the evaluation
    count and lists them as `stats.extra['jvp_evals']` (before, only the field's own
    evaluations were counted: 253 of 1395 on a multi-stage solve, m = 50, t = 20); a
    kvaerno5-cg object that does not report to the counter gets no `jvp_evals` entry."""
    import jax.numpy as jnp
    import lineax as lx

    import flows
    from flows._solvers._implicit import HessianCG, matrix_free_kvaerno5
    from flows.models import TwoLayer

    seen = []
    cg = HessianCG(rtol=1e-10, atol=1e-12, on_solve=seen.append)
    eig = jnp.geomspace(1.0, 1e2, 50)
    sol = lx.linear_solve(lx.MatrixLinearOperator(jnp.diag(eig)), jnp.ones(50), cg)
    assert [int(k) for k in seen] == [int(sol.stats["num_steps"])] and seen[0] > 5

    prob = flows.make_problem(TwoLayer(m=20, d=1, alpha=1.0), flows.paper_data("f1"), key=0)
    kw = dict(t1=5.0, rtol=1e-4, atol=1e-7, save_params="ends")
    tr = flows.simulate(prob, solver="kvaerno5-cg", **kw)
    jvps = tr.stats.extra["jvp_evals"]
    assert jvps > 0 and tr.stats.vf_evals > jvps
    assert "jvp_evals" not in flows.simulate(prob, solver="kvaerno5", **kw).stats.extra
    silent = flows.simulate(prob, solver=matrix_free_kvaerno5(1e-4, 1e-7), **kw)
    assert "jvp_evals" not in silent.stats.extra
    assert silent.stats.vf_evals == tr.stats.vf_evals - jvps  # the same solve, fields only


def test_a_dense_jacobian_that_cannot_fit_is_refused_before_compiling(monkeypatch):
    """kvaerno5 forms the P × P Jacobian by pushing all P tangents through the field at
    once (about P × one gradient's working memory): where that exceeds the machine, the run
    is refused up front naming the solver, the size and the matrix-free alternatives —
    measured from the gradient's own compiled program, so a machine 1000× smaller than
    this problem's need refuses it and the same problem fits an ordinary one."""
    import flows._solve.settings as settings
    from flows._solvers import resolve_solver
    from flows.models import TwoLayer

    x = np.linspace(-1.0, 1.0, 50)[:, None]
    problem = flows.make_problem(
        TwoLayer(m=40, d=1, alpha=1.0), flows.from_arrays(x, np.tanh(x[:, 0])), key=0
    )
    p = problem.n_params
    monkeypatch.setattr(settings, "physical_memory", lambda: 8 * p * p)  # the Jacobian alone
    with pytest.raises(flows.ConfigError, match=r"'kvaerno5' forms the dense 80 × 80"):
        flows.simulate(problem, t1=0.1, solver="kvaerno5")
    assert flows.simulate(problem, t1=0.1, solver="tsit5").stats.result.value == "successful"
    monkeypatch.setattr(settings, "physical_memory", lambda: 2**40)
    choice = resolve_solver("kvaerno5", 1e-6, 1e-9, p, problem.dtype)
    assert settings.fit_dense_jacobian(problem, choice) is choice  # fits at once: as it is


def test_a_dense_jacobian_too_large_at_once_is_formed_in_chunks(monkeypatch):
    """Where all P tangents at once do not fit but a few columns at a time do, kvaerno5 runs
    with `ChunkedLU` (chunk sized to the memory) instead of being refused, and takes the
    same steps to the same θ as the run that formed the matrix at once (the oracle: same
    matrix, same LU)."""
    import flows._solve.settings as settings
    from flows._solvers import ChunkedLU, resolve_solver
    from flows.models import TwoLayer

    x = np.linspace(-1.0, 1.0, 50)[:, None]
    problem = flows.make_problem(
        TwoLayer(m=40, d=1, alpha=1.0), flows.from_arrays(x, np.tanh(x[:, 0])), key=0
    )
    p = problem.n_params
    kw = dict(t1=2.0, rtol=1e-6, atol=1e-9, save_params="all", n_save=5)
    at_once = flows.simulate(problem, solver="kvaerno5", **kw)
    column = max(settings.tangent_bytes(problem), 8 * p)
    total = (
        3 * 8 * p * p + 8.5 * settings.JACOBIAN_TANGENT_FACTOR * column
    ) / settings.MEMORY_SHARE
    monkeypatch.setattr(settings, "physical_memory", lambda: total)
    choice = settings.fit_dense_jacobian(
        problem, resolve_solver("kvaerno5", 1e-6, 1e-9, p, problem.dtype)
    )
    linear = choice.solver.root_finder.linear_solver
    assert isinstance(linear, ChunkedLU) and linear.chunk == 8 and choice.name == "kvaerno5"
    chunked = flows.simulate(problem, solver="kvaerno5", **kw)
    assert chunked.config["solver_settings"] != at_once.config["solver_settings"]
    assert chunked.stats.steps == at_once.stats.steps
    for k in ("a", "w"):
        np.testing.assert_allclose(chunked.param(k), at_once.param(k), rtol=1e-12, atol=1e-14)
    # a dense implicit solver given as an object is fitted the same way
    user = flows.simulate(problem, solver=diffrax.Kvaerno5(), **kw)
    settings_ = user.config["solver_settings"]["root_finder"]["settings"]
    assert settings_["linear_solver"]["class"] == "ChunkedLU"
    # one whose linear solver cannot be chunked is refused, naming the way out
    import lineax as lx

    qr = diffrax.Kvaerno5(root_finder=diffrax.VeryChord(1e-6, 1e-9, linear_solver=lx.QR()))
    with pytest.raises(flows.ConfigError, match=r"\(QR\) is not one the toolkit can form"):
        flows.simulate(problem, solver=qr, **kw)
