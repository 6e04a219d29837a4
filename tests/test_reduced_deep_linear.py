"""`reduced.deep_linear` (Saxe, McClelland & Ganguli 2014) against independent oracles.

The oracle for the closed forms is the full gradient flow of the two-layer linear net,
integrated with scipy's DOP853 on hand-written NumPy gradients computed from the samples
(themselves checked against finite differences of the sample loss), from `balanced_init` on
random whitened data. The derivations are settled by `reduced.derive.run("deep-linear")`,
and the JAX code generated from them is compared with the hand-written functions.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sympy as sp  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from reduced import deep_linear as dl  # noqa: E402
from reduced.derive import Identity, format_table, run, settle  # noqa: E402
from reduced.derive import deep_linear as ddl  # noqa: E402

D_IN, D_OUT, N = 4, 2, 64
SINGULAR = (2.0, 0.8)  # singular values of the teacher map (Σ_yx's are close to these)
RTOL_FLOW = 1e-7  # closed form vs the integrated full flow (solver rtol 1e-10)


def _rel(actual, expected) -> float:
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    return float(np.max(np.abs(actual - expected)) / np.max(np.abs(expected)))


@pytest.fixture(scope="module")
def data():
    """Whitened inputs and noisy targets of a rank-2 linear teacher (fixed seed)."""
    rng = np.random.default_rng(0)
    x = np.asarray(dl.whiten(rng.normal(size=(N, D_IN))))
    q_out = np.linalg.qr(rng.normal(size=(D_OUT, D_OUT)))[0]
    q_in = np.linalg.qr(rng.normal(size=(D_IN, D_IN)))[0]
    teacher = q_out @ np.diag(SINGULAR) @ q_in[:, :D_OUT].T
    y = x @ teacher.T + 0.3 * rng.normal(size=(N, D_OUT))
    sigma_xx, sigma_yx, sigma_yy = (np.asarray(m) for m in dl.correlations(x, y))
    return x, y, sigma_xx, sigma_yx, sigma_yy


# ---------------------------------------------------------------------------------------
# The oracle: hand-written NumPy gradient flow on the samples


def sample_loss(w1, w2, x, y):
    """(1/2n) Σ_i ‖y_i − W₂W₁x_i‖²."""
    r = y - x @ w1.T @ w2.T
    return 0.5 * np.mean(np.sum(r**2, axis=1))


def sample_flow(w1, w2, x, y):
    """−∇ of `sample_loss`: −∂L/∂W₁ = (1/n) Σ W₂ᵀ r_i x_iᵀ, −∂L/∂W₂ = (1/n) Σ r_i (W₁x_i)ᵀ."""
    n = x.shape[0]
    r = y - x @ w1.T @ w2.T  # residuals r_i, one per row
    hidden = x @ w1.T  # W₁x_i
    return np.einsum("oh,no,nd->hd", w2, r, x) / n, np.einsum("no,nh->oh", r, hidden) / n


def integrate(w1, w2, x, y, ts):
    """Full gradient flow with DOP853, rtol 1e-10; returns [(W₁(t), W₂(t)) for t in ts]."""
    h = w1.shape[0]
    shapes = (w1.shape, w2.shape)
    split = w1.size

    def rhs(t, theta):
        g1, g2 = sample_flow(
            theta[:split].reshape(shapes[0]), theta[split:].reshape(shapes[1]), x, y
        )
        return np.concatenate([g1.ravel(), g2.ravel()])

    theta0 = np.concatenate([np.ravel(w1), np.ravel(w2)])
    sol = solve_ivp(rhs, (0.0, ts[-1]), theta0, method="DOP853", t_eval=ts, rtol=1e-10, atol=1e-13)
    assert sol.success, sol.message
    assert h == shapes[0][0]
    return [(th[:split].reshape(shapes[0]), th[split:].reshape(shapes[1])) for th in sol.y.T]


def test_sample_gradient_matches_finite_differences(data):
    x, y, *_ = data
    rng = np.random.default_rng(1)
    w1, w2 = rng.normal(size=(3, D_IN)), rng.normal(size=(D_OUT, 3))
    g1, g2 = sample_flow(w1, w2, x, y)
    eps = 1e-6
    for w, g in ((w1, g1), (w2, g2)):
        fd = np.zeros_like(w)
        for idx in np.ndindex(w.shape):
            old = w[idx]
            w[idx] = old + eps
            up = sample_loss(w1, w2, x, y)
            w[idx] = old - eps
            down = sample_loss(w1, w2, x, y)
            w[idx] = old
            fd[idx] = -(up - down) / (2 * eps)
        assert _rel(g, fd) < 1e-8


def test_linear_net_vector_field_matches_sample_gradient(data):
    x, y, sigma_xx, sigma_yx, _ = data
    rng = np.random.default_rng(2)
    w1, w2 = rng.normal(size=(3, D_IN)), rng.normal(size=(D_OUT, 3))
    got = dl.linear_net_vector_field(0.0, (jnp.asarray(w1), jnp.asarray(w2)), (sigma_xx, sigma_yx))
    expected = sample_flow(w1, w2, x, y)
    for g, e in zip(got, expected, strict=True):
        assert _rel(g, e) < 1e-12


# ---------------------------------------------------------------------------------------
# Data preparation and initialization


def test_whiten_gives_identity_correlation():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 5)) @ rng.normal(size=(5, 5)) + 2.0  # correlated, not centred
    xw = np.asarray(dl.whiten(x))
    np.testing.assert_allclose(xw.T @ xw / 50, np.eye(5), rtol=0, atol=1e-13)
    # ZCA: a linear map of the inputs, symmetric (x_w = x M with M = Mᵀ)
    m = np.linalg.lstsq(x, xw, rcond=None)[0]
    np.testing.assert_allclose(m, m.T, atol=1e-10)


@pytest.mark.parametrize("h", [1, 3])
def test_balanced_init_is_aligned_and_balanced(data, h):
    *_, sigma_yx, _ = data
    k = min(h, D_OUT)
    u0 = 1e-3 * np.arange(1, k + 1)
    w1, w2 = dl.balanced_init(sigma_yx, h, u0, key=jax.random.key(4))
    assert w1.shape == (h, D_IN) and w2.shape == (D_OUT, h)
    u, s, vt = np.linalg.svd(sigma_yx)
    np.testing.assert_allclose(w2 @ w1, (u[:, :k] * u0) @ vt[:k], rtol=0, atol=1e-17)
    np.testing.assert_allclose(dl.balancedness(w1, w2), 0.0, rtol=0, atol=1e-17)
    # the product does not depend on the hidden basis R
    w1_id, w2_id = dl.balanced_init(sigma_yx, h, u0)
    np.testing.assert_allclose(w2_id @ w1_id, w2 @ w1, rtol=0, atol=1e-17)
    np.testing.assert_allclose(dl.predicted_product(0.0, sigma_yx, h, u0), w2 @ w1, atol=1e-17)


def test_bad_arguments_are_value_errors(data):
    *_, sigma_yx, _ = data
    with pytest.raises(ValueError, match="u0"):
        dl.balanced_init(sigma_yx, 3, np.ones(3))
    with pytest.raises(ValueError, match="R"):
        dl.balanced_init(sigma_yx, 3, 1e-3, np.eye(2))
    with pytest.raises(ValueError, match="either"):
        dl.balanced_init(sigma_yx, 3, 1e-3, np.eye(3), key=jax.random.key(0))
    with pytest.raises(ValueError, match="h"):
        dl.balanced_init(sigma_yx, 0, 1e-3)


# ---------------------------------------------------------------------------------------
# Closed form against the full flow


TIMES = np.array([0.0, 0.5, 1.5, 2.5, 4.0, 6.0, 9.0, 14.0])


@pytest.mark.parametrize(
    ("h", "hidden_basis"),
    [(3, "identity"), (3, "random"), (1, "random"), (2, "identity")],
)
def test_closed_form_matches_full_gradient_flow(data, h, hidden_basis):
    x, y, _, sigma_yx, sigma_yy = data
    k = min(h, D_OUT)
    u0 = np.array([1e-3, 3e-4])[:k]
    R = None if hidden_basis == "identity" else dl.random_orthogonal(jax.random.key(h), h)
    w1_0, w2_0 = (np.asarray(w) for w in dl.balanced_init(sigma_yx, h, u0, R))
    path = integrate(w1_0, w2_0, x, y, TIMES)
    s = np.linalg.svd(sigma_yx, compute_uv=False)
    for t, (w1, w2) in zip(TIMES, path, strict=True):
        p1, p2 = dl.predicted_weights(t, sigma_yx, h, u0, R)
        # weights relative to the larger of their size and the final mode size √s₁
        scale = max(np.max(np.abs(w1)), np.sqrt(s[0]) * 1e-2)
        assert np.max(np.abs(p1 - w1)) / scale < RTOL_FLOW, t
        assert np.max(np.abs(p2 - w2)) / scale < RTOL_FLOW, t
        product = dl.predicted_product(t, sigma_yx, h, u0)
        assert np.max(np.abs(product - w2 @ w1)) / s[0] < RTOL_FLOW, t
        measured = sample_loss(w1, w2, x, y)
        assert abs(float(dl.loss(t, sigma_yx, h, u0, sigma_yy)) - measured) / measured < RTOL_FLOW
    # the flow really went through the sigmoidal transitions: first mode learned, loss fell
    assert np.max(np.abs(path[-1][1] @ path[-1][0] - path[0][1] @ path[0][0])) > 0.5 * s[0]
    assert sample_loss(*path[-1], x, y) < 0.5 * sample_loss(*path[0], x, y)


def test_loss_curve_vectorized_and_limits(data):
    x, y, _, sigma_yx, sigma_yy = data
    s = np.linalg.svd(sigma_yx, compute_uv=False)
    u0 = 1e-3
    curve = np.asarray(dl.loss(TIMES, sigma_yx, 3, u0, sigma_yy))
    assert curve.shape == TIMES.shape
    for t, value in zip(TIMES, curve, strict=True):
        assert value == pytest.approx(float(dl.loss(t, sigma_yx, 3, u0, sigma_yy)), rel=1e-14)
    assert np.all(np.diff(curve) < 0)
    # t = 0: the loss of the initial weights on the samples
    w1, w2 = (np.asarray(w) for w in dl.balanced_init(sigma_yx, 3, u0))
    assert curve[0] == pytest.approx(sample_loss(w1, w2, x, y), rel=1e-13)
    # t → ∞: the least-squares loss (h = 3 ≥ rank), or plus ½ s₂² when h = 1
    lstsq = 0.5 * (np.trace(sigma_yy) - np.sum(s**2))
    assert float(dl.loss(1e3, sigma_yx, 3, u0, sigma_yy)) == pytest.approx(lstsq, rel=1e-13)
    assert float(dl.loss(1e3, sigma_yx, 1, u0, sigma_yy)) == pytest.approx(
        lstsq + 0.5 * s[1] ** 2, rel=1e-13
    )
    # without Σ_yy: ½‖W₂W₁ − Σ_yx‖²_F
    product = dl.predicted_product(2.0, sigma_yx, 3, u0)
    assert float(dl.loss(2.0, sigma_yx, 3, u0)) == pytest.approx(
        0.5 * np.sum((np.asarray(product) - sigma_yx) ** 2), rel=1e-12
    )


# ---------------------------------------------------------------------------------------
# One mode


@pytest.mark.parametrize(("s", "u0"), [(2.0, 1e-3), (0.5, 1e-6), (1.0, 3.0), (0.0, 0.2)])
def test_mode_strength_solves_the_mode_ode(s, u0):
    ts = np.linspace(0.0, 12.0, 25)
    sol = solve_ivp(
        lambda t, u: 2 * u * (s - u),
        (0, ts[-1]),
        [u0],
        method="DOP853",
        t_eval=ts,
        rtol=1e-12,
        atol=1e-15,
    )
    assert _rel(dl.mode_strength(ts, s, u0), sol.y[0]) < 1e-9
    # the balanced two-layer mode (a = b = √u₀) gives u = ab
    pair = solve_ivp(
        lambda t, ab: np.asarray(dl.mode_pair_vector_field(t, (ab[0], ab[1]), s)),
        (0, ts[-1]),
        [np.sqrt(u0)] * 2,
        method="DOP853",
        t_eval=ts,
        rtol=1e-12,
        atol=1e-15,
    )
    assert _rel(pair.y[0] * pair.y[1], sol.y[0]) < 1e-9


def test_mode_pair_conserves_hyperbola():
    a0, b0, s = 0.3, -0.05, 1.5
    sol = solve_ivp(
        lambda t, ab: np.asarray(dl.mode_pair_vector_field(t, (ab[0], ab[1]), s)),
        (0, 10.0),
        [a0, b0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-15,
        dense_output=True,
    )
    a, b = sol.sol(np.linspace(0, 10, 21))
    np.testing.assert_allclose(a**2 - b**2, a0**2 - b0**2, rtol=0, atol=1e-11)
    assert a[-1] * b[-1] == pytest.approx(s, rel=1e-8)


def test_mode_strength_limits_and_stability():
    s = jnp.array([2.0, 0.5, 1e-3, 0.0])
    u0 = jnp.array([1e-3, 1e-8, 1e-4, 0.3])
    # t = 0
    np.testing.assert_allclose(dl.mode_strength(0.0, s, u0), u0, rtol=1e-15)
    # t large: no overflow, u → s (s = 0: u₀/(1 + 2u₀t))
    for t in (1e3, 1e8, 1e300):
        u = np.asarray(dl.mode_strength(t, s, u0))
        assert np.all(np.isfinite(u))
        np.testing.assert_allclose(u[:2], s[:2], rtol=1e-15)
        assert u[3] == pytest.approx(0.3 / (1 + 0.6 * t), rel=1e-14)
    assert float(dl.mode_strength(1e5, 1e-3, 1e-4)) == pytest.approx(1e-3, rel=1e-15)
    # small s·t keeps full precision: compare with the series u₀/(1 + 2u₀t) + O(s)
    u_small = float(dl.mode_strength(1.0, 1e-12, 0.3))
    assert u_small == pytest.approx(0.3 / 1.6, rel=1e-11)
    # u₀ = 0 is the fixed point
    assert float(dl.mode_strength(5.0, 1.0, 0.0)) == 0.0
    # jittable, and large-t weights and loss stay finite
    assert float(jax.jit(dl.mode_strength)(1e3, 2.0, 1e-3)) == 2.0


def test_large_t_weights_are_finite(data):
    *_, sigma_yx, sigma_yy = data
    w1, w2 = dl.predicted_weights(1e3, sigma_yx, 3, 1e-3, key=jax.random.key(0))
    assert np.all(np.isfinite(w1)) and np.all(np.isfinite(w2))
    np.testing.assert_allclose(w2 @ w1, sigma_yx, rtol=0, atol=1e-14)
    np.testing.assert_allclose(dl.balancedness(w1, w2), 0.0, atol=1e-14)
    assert np.isfinite(float(dl.loss(1e3, sigma_yx, 3, 1e-3, sigma_yy)))


@pytest.mark.parametrize(("s", "u0"), [(2.0, 1e-3), (0.5, 1e-8), (1.0, 0.4)])
def test_mode_time_round_trip(s, u0):
    for f in (0.01, 0.5, 0.9, 0.999999):
        if f <= u0 / s:
            continue
        t = float(dl.mode_time(f, s, u0))
        assert t > 0
        assert float(dl.mode_strength(t, s, u0)) == pytest.approx(f * s, rel=1e-12)
        # the paper's form t = (1/2s) ln[u_f (s − u₀) / (u₀ (s − u_f))], u_f = f s
        uf = f * s
        assert t == pytest.approx(np.log(uf * (s - u0) / (u0 * (s - uf))) / (2 * s), rel=1e-12)
    # half-way time: ln((s − u₀)/u₀)/(2s)
    assert float(dl.mode_time(0.5, s, u0)) == pytest.approx(np.log((s - u0) / u0) / (2 * s))


def test_mode_time_decreasing_mode():
    s, u0 = 1.0, 3.0  # u₀ > s: the mode shrinks to s
    t = float(dl.mode_time(1.5, s, u0))
    assert t > 0
    assert float(dl.mode_strength(t, s, u0)) == pytest.approx(1.5, rel=1e-12)


# ---------------------------------------------------------------------------------------
# Any initialization: balancedness, convergence


def _random_init(rng, h, scale):
    return scale * rng.normal(size=(h, D_IN)), scale * rng.normal(size=(D_OUT, h))


def test_balancedness_conserved_for_any_init(data):
    x, y, *_ = data
    w1_0, w2_0 = _random_init(np.random.default_rng(5), 3, 0.7)
    c0 = np.asarray(dl.balancedness(w1_0, w2_0))
    assert np.max(np.abs(c0)) > 0.1  # far from balanced
    for w1, w2 in integrate(w1_0, w2_0, x, y, np.array([0.0, 1.0, 5.0, 20.0])):
        assert np.max(np.abs(np.asarray(dl.balancedness(w1, w2)) - c0)) < 1e-8


@pytest.mark.parametrize("h", [1, 3])
def test_unbalanced_nonaligned_init_converges_to_rank_h_fit(data, h):
    # sanity, not an equality at finite t: from a small random (unbalanced, non-aligned)
    # init the product converges to Σ_yx truncated to rank h (generic init)
    x, y, _, sigma_yx, _ = data
    w1_0, w2_0 = _random_init(np.random.default_rng(6 + h), h, 1e-3)
    ((w1, w2),) = integrate(w1_0, w2_0, x, y, np.array([40.0]))
    u, s, vt = np.linalg.svd(sigma_yx)
    k = min(h, D_OUT)
    target = (u[:, :k] * s[:k]) @ vt[:k]
    assert np.max(np.abs(w2 @ w1 - target)) / s[0] < 1e-8
    assert np.max(np.abs(w2 @ w1 - dl.predicted_product(1e3, sigma_yx, h, 1e-3))) / s[0] < 1e-8


# ---------------------------------------------------------------------------------------
# Derivations


def test_derive_identities_are_all_proved():
    results = run("deep-linear")
    print(format_table(results))
    assert len(results) == len(ddl.IDENTITIES) == 8
    assert all(r.paper == "deep-linear" for r in results)
    assert all(r.status == "proved" for r in results), format_table(results)


def _fails(name, residual, symbols):
    result = settle(Identity(name, "deep-linear", "wrong", residual, tuple(symbols)), 2.0)
    assert result.status == "fails", result
    assert result.max_residual > 1e-6


def test_wrong_variants_fail():
    a, b, s, u0, t = ddl.a, ddl.b, ddl.s, ddl.u0, ddl.t
    # the mode law without the factor 2 (confusing τ conventions)
    _fails("u̇ = u(s − u)", lambda: ddl.mode_field_balanced() - ddl.u * (s - ddl.u), (ddl.u, s))
    # the closed form with e^{st} in place of e^{2st}
    wrong = s * sp.exp(s * t) / (sp.exp(s * t) - 1 + s / u0)
    _fails("e^{st}", lambda: sp.diff(wrong, t) - 2 * wrong * (s - wrong), (t, s, u0))
    # the time formula with 1/s in place of 1/(2s)
    p, q = ddl.p, ddl.q
    f, v0 = p / (1 + p), s / (1 + q)
    _fails(
        "t = (1/s) ln …",
        lambda: ddl.mode_closed_form(2 * ddl.mode_time_formula(f, s, v0), s, v0) - f * s,
        (p, q, s),
    )
    # W₁W₁ᵀ + W₂ᵀW₂ (sum instead of difference) is *not* conserved
    W1, W2 = ddl._W1, ddl._W2

    def wrong_balance():
        F1, F2 = ddl.matrix_flow(W1, W2, ddl._Sxx, ddl._Syx, ddl._Syy)
        return list(F1 * W1.T + W1 * F1.T + (F2.T * W2 + W2.T * F2))

    _fails("W₁W₁ᵀ + W₂ᵀW₂", wrong_balance, ddl._FLOW_SYMBOLS)
    del a, b


# ---------------------------------------------------------------------------------------
# Generated code against the hand-written functions


def test_generated_functions_match_reduced_deep_linear(data):
    _, _, sigma_xx, sigma_yx, _ = data
    gen = ddl.generated_vector_fields(d_in=D_IN, h=3, d_out=D_OUT)
    rng = np.random.default_rng(7)
    u, s = rng.uniform(0, 2, size=5), rng.uniform(0, 2, size=5)
    np.testing.assert_allclose(
        gen["mode_vector_field"](0.0, u, s), dl.mode_vector_field(0.0, u, s), rtol=1e-13
    )
    a, b = rng.normal(size=5), rng.normal(size=5)
    for g, h in zip(
        gen["mode_pair_vector_field"](0.0, (a, b), s),
        dl.mode_pair_vector_field(0.0, (a, b), s),
        strict=True,
    ):
        np.testing.assert_allclose(g, h, rtol=1e-13)
    sxx = rng.normal(size=(D_IN, D_IN))
    sxx = sxx @ sxx.T  # a general (non-whitened) symmetric Σ_xx
    for corr in ((sxx, sigma_yx), (sigma_xx, sigma_yx)):
        w1, w2 = rng.normal(size=(3, D_IN)), rng.normal(size=(D_OUT, 3))
        got = gen["linear_net_vector_field"](0.0, (w1, w2), corr)
        expected = dl.linear_net_vector_field(0.0, (jnp.asarray(w1), jnp.asarray(w2)), corr)
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape
            assert _rel(g, e) < 1e-12
    ts, ss, uu = rng.uniform(0, 5, 8), rng.uniform(0.1, 2, 8), rng.uniform(1e-4, 0.05, 8)
    np.testing.assert_allclose(
        gen["mode_strength"](ts, ss, uu), dl.mode_strength(ts, ss, uu), rtol=1e-13
    )
    f = rng.uniform(0.1, 0.99, 8)
    np.testing.assert_allclose(gen["mode_time"](f, ss, uu), dl.mode_time(f, ss, uu), rtol=1e-13)
