"""The full-model gradient that `flows` integrates, checked against sympy.

R(a, w) = 1/(2n) Σ_i (Σ_k a_k tanh(w_k·x_i) − y_i)²: the JAX autodiff gradient must equal
the symbolic gradient (differentiated by sympy, evaluated with mpmath at 30 digits) at
random points, for every width m ≤ 3 and input dimension d ≤ 3.
"""

import itertools

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mpmath  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sympy as sp  # noqa: E402

import flows  # noqa: E402
from flows.experiments import bias_plateau as bp  # noqa: E402
from flows.models import TwoLayer  # noqa: E402

N_SAMPLES = 4


def _full_loss(a, w, x, y):
    """R(a, w) = 1/(2n) Σ_i (Σ_k a_k tanh(w_k·x_i) − y_i)², exactly as `flows` integrates it:
    the `TwoLayer` model with the `squared_error` loss."""
    model = TwoLayer(m=a.shape[0], d=w.shape[1], alpha=1.0)
    return flows.squared_error(model({"a": a, "w": w}, x), y)


def _sympy_gradient(m, d, n):
    a = sp.symbols(f"a1:{m + 1}", real=True)
    w = sp.Matrix(m, d, lambda k, i: sp.Symbol(f"w{k}_{i}", real=True))
    x = sp.Matrix(n, d, lambda j, i: sp.Symbol(f"x{j}_{i}", real=True))
    y = sp.symbols(f"y1:{n + 1}", real=True)
    loss = sp.Rational(1, 2 * n) * sum(
        (sum(a[k] * sp.tanh((w[k, :] * x[j, :].T)[0]) for k in range(m)) - y[j]) ** 2
        for j in range(n)
    )
    params = [*a, *w]  # w row-major, as jnp.ravel
    grad = [sp.diff(loss, p) for p in params]
    args = [*a, *w, *x, *y]
    return sp.lambdify(args, grad, modules="mpmath")


@pytest.mark.parametrize("m, d", list(itertools.product((1, 2, 3), (1, 2, 3))))
def test_autodiff_gradient_matches_sympy(m, d):
    grad_sym = _sympy_gradient(m, d, N_SAMPLES)
    grad_jax = jax.jit(jax.grad(_full_loss, argnums=(0, 1)))
    rng = np.random.default_rng(100 * m + d)
    for _ in range(3):
        a, w = rng.normal(size=m), rng.normal(size=(m, d))
        x, y = rng.normal(size=(N_SAMPLES, d)), rng.normal(size=N_SAMPLES)
        ga, gw = grad_jax(jnp.asarray(a), jnp.asarray(w), jnp.asarray(x), jnp.asarray(y))
        got = np.concatenate([np.asarray(ga), np.asarray(gw).ravel()])
        with mpmath.workdps(30):
            args = [mpmath.mpf(float(v)) for v in (*a, *w.ravel(), *x.ravel(), *y)]
            want = np.array([float(g) for g in grad_sym(*args)])
        scale = max(np.max(np.abs(want)), 1e-300)
        assert np.max(np.abs(got - want)) / scale <= 1e-12


def test_sympy_gradient_detects_a_wrong_loss():
    # the comparison can fail: a loss without the 1/2 gives twice the gradient
    m, d = 2, 2
    grad_sym = _sympy_gradient(m, d, N_SAMPLES)
    rng = np.random.default_rng(7)
    a, w = rng.normal(size=m), rng.normal(size=(m, d))
    x, y = rng.normal(size=(N_SAMPLES, d)), rng.normal(size=N_SAMPLES)

    def wrong(a, w, x, y):
        return 2.0 * _full_loss(a, w, x, y)

    ga, gw = jax.grad(wrong, argnums=(0, 1))(a, w, x, y)
    got = np.concatenate([np.asarray(ga), np.asarray(gw).ravel()])
    args = [mpmath.mpf(float(v)) for v in (*a, *w.ravel(), *x.ravel(), *y)]
    want = np.array([float(g) for g in grad_sym(*args)])
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) > 0.1


# ---------------------------------------------------------------------------------------
# The other two families `flows` integrates, against sympy gradients of the same objective.


def _mp(vals):
    return [mpmath.mpf(float(v)) for v in vals]


@pytest.mark.parametrize("k, d, r", [(2, 2, 3), (3, 3, 3), (2, 3, 4)])
def test_homogeneous_cross_entropy_gradient_matches_sympy(k, d, r):
    """(k/N) Σ_x −log softmax_y(⟨W_i, x⟩^r + b_i): `Homogeneous` + `class_sum_cross_entropy`."""
    from flows.models import Homogeneous

    n = 3
    W = sp.Matrix(k, d, lambda i, j: sp.Symbol(f"W{i}_{j}", real=True))
    b = sp.symbols(f"b0:{k}", real=True)
    X = sp.Matrix(n, d, lambda s, j: sp.Symbol(f"x{s}_{j}", real=True))
    labels = [s % k for s in range(n)]
    loss = 0
    for s in range(n):
        z = [(W[i, :] * X[s, :].T)[0] ** r + b[i] for i in range(k)]
        loss += sp.log(sum(sp.exp(zi) for zi in z)) - z[labels[s]]
    loss = sp.Rational(k, n) * loss
    params = list(W) + list(b)
    grad = sp.lambdify(params + list(X), [sp.diff(loss, p) for p in params], "mpmath")
    model = Homogeneous(k=k, d=d, r=r, delta=0.1)
    rng = np.random.default_rng(10 * k + d)
    Wv, bv, Xv = rng.normal(size=(k, d)) * 0.7, rng.normal(size=k), rng.normal(size=(n, d))
    y = jnp.asarray(labels)

    def loss_jax(theta):
        return bp.class_sum_cross_entropy(model(theta, jnp.asarray(Xv)), y)

    g = jax.grad(loss_jax)({"W": jnp.asarray(Wv), "b": jnp.asarray(bv)})
    got = np.concatenate([np.asarray(g["W"]).ravel(), np.asarray(g["b"])])
    with mpmath.workdps(30):
        want = np.array([float(v) for v in grad(*_mp([*Wv.ravel(), *bv, *Xv.ravel()]))])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))


@pytest.mark.parametrize("k, d", [(1, 2), (2, 3), (3, 2)])
def test_leaky_logistic_gradient_matches_sympy(k, d):
    """(1/n) Σ log(1 + exp(−y N_W(x))): `LeakyReLUNet` + `logistic`, away from the kinks."""
    from flows.models import LeakyReLUNet

    n, v, slope = 4, 0.7, sp.Rational(1, 5)
    w = sp.Matrix(k, d, lambda i, j: sp.Symbol(f"w{i}_{j}", real=True))
    u = sp.Matrix(k, d, lambda i, j: sp.Symbol(f"u{i}_{j}", real=True))
    X = sp.Matrix(n, d, lambda s, j: sp.Symbol(f"x{s}_{j}", real=True))
    ys = [1, -1, 1, -1]

    def sigma(z):
        return sp.Max(slope * z, z)

    loss = 0
    for s in range(n):
        net = v * sum(sigma((w[i, :] * X[s, :].T)[0]) for i in range(k)) - v * sum(
            sigma((u[i, :] * X[s, :].T)[0]) for i in range(k)
        )
        loss += sp.log(1 + sp.exp(-ys[s] * net))
    loss = loss / n
    params = list(w) + list(u)
    grad = sp.lambdify(params + list(X), [sp.diff(loss, p) for p in params], "mpmath")
    model = LeakyReLUNet(k=k, d=d, slope=0.2, v=v, init_scale=1.0)
    rng = np.random.default_rng(7 * k + d)
    wv, uv, Xv = rng.normal(size=(k, d)), rng.normal(size=(k, d)), rng.normal(size=(n, d))
    pre = np.concatenate([Xv @ wv.T, Xv @ uv.T], axis=1)
    assert np.min(np.abs(pre)) > 1e-3  # away from the kinks, where both sides are smooth

    def loss_jax(theta):
        return flows.logistic(model(theta, jnp.asarray(Xv)), jnp.asarray(ys, dtype=float))

    g = jax.grad(loss_jax)({"w": jnp.asarray(wv), "u": jnp.asarray(uv)})
    got = np.concatenate([np.asarray(g["w"]).ravel(), np.asarray(g["u"]).ravel()])
    with mpmath.workdps(30):
        want = np.array([float(v_) for v_ in grad(*_mp([*wv.ravel(), *uv.ravel(), *Xv.ravel()]))])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
