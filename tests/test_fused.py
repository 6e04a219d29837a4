"""The hand-derived (fused) two-layer vector field, float32, and stop events in `simulate`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_allclose

import flows
import flows.plugin
from flows.models import TwoLayer


def _final(tr):
    return {k: tr.param(k) for k in tr.params}


def _problems(m, d, activation, bias, **kw):
    data = flows.assumption_data("f2", n=37, d=d, seed=1)
    model = TwoLayer(m=m, d=d, alpha=0.1, activation=activation, bias=bias)
    auto = flows.make_problem(model, data, key=2, vector_field="autodiff", **kw)
    fused = flows.make_problem(model, data, key=2, vector_field="fused", **kw)
    return auto, fused


@pytest.mark.parametrize("activation", ["tanh", "sin", "erf", jax.nn.gelu])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("m,d", [(1, 1), (7, 3)])
def test_fused_gradient_equals_autodiff(activation, bias, m, d):
    auto, fused = _problems(m, d, activation, bias)
    # away from θ(0) too: large weights reach the saturated part of σ
    for scale in (1.0, 30.0):
        theta = jax.tree_util.tree_map(lambda v, s=scale: s * v, auto.theta0)
        g = auto.grad(theta)
        # round-off relative to the gradient's size (single entries can cancel)
        tol = 1e-13 * max(float(jnp.max(jnp.abs(v))) for v in jax.tree_util.tree_leaves(g))
        assert_tree_allclose(fused.grad(theta), g, rtol=1e-12, atol=tol)
        la, ga = fused.loss_and_grad(theta)
        assert float(la) == pytest.approx(float(auto.loss(theta)), rel=1e-14)
        assert_tree_allclose(ga, g, rtol=1e-12, atol=tol)
        # the blocked forward pass that a fused problem records as its loss
        assert float(fused.loss(theta)) == pytest.approx(float(auto.loss(theta)), rel=1e-14)


@pytest.mark.parametrize("rows", [1, 5, 36, 37, 64])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_blocks_and_padding(monkeypatch, rows, bias):
    """Several sample blocks, the last one padded (n = 37): same R and ∇R as autodiff."""
    import flows.models.two_layer as two_layer

    m = 7
    monkeypatch.setattr(two_layer, "BLOCK_BYTES", 8 * m * rows)
    monkeypatch.setattr(two_layer, "MIN_BLOCK_ROWS", 1)  # blocks of 1 and 5 rows too
    assert two_layer.block_rows(m) == rows
    auto, fused = _problems(m, 3, "tanh", bias)
    theta = jax.tree_util.tree_map(lambda v: 30.0 * v, auto.theta0)
    g = auto.grad(theta)
    tol = 1e-13 * max(float(jnp.max(jnp.abs(v))) for v in jax.tree_util.tree_leaves(g))
    la, ga = fused.loss_and_grad(theta)
    assert float(la) == pytest.approx(float(auto.loss(theta)), rel=1e-13)
    assert float(fused.loss(theta)) == pytest.approx(float(auto.loss(theta)), rel=1e-13)
    assert_tree_allclose(ga, g, rtol=1e-12, atol=tol)
    assert_tree_allclose(fused.grad(theta), g, rtol=1e-12, atol=tol)


def _scan_lengths(fn, *args):
    """Lengths of the `lax.scan`s in fn's jaxpr (the fused field's sample blocks)."""
    out = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "scan":
                out.append(eqn.params["length"])
            for v in eqn.params.values():
                if hasattr(v, "jaxpr"):
                    walk(v.jaxpr if hasattr(v.jaxpr, "eqns") else v.jaxpr.jaxpr)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return out


def test_fused_blocks_follow_the_dtype(monkeypatch):
    """`block_rows` counts bytes of the actual element size: a float32 field holds twice the
    samples per block of a float64 one (before: 8 bytes assumed for every dtype, so float32
    blocks were half the intended size). Observed on the scan over blocks in the jaxpr."""
    import flows.models.two_layer as two_layer

    m, n = 7, 37
    monkeypatch.setattr(two_layer, "BLOCK_BYTES", 8 * m * 9)  # float64: 9 rows, float32: 18
    assert two_layer.block_rows(m, 8) == 9 and two_layer.block_rows(m, 4) == 18
    _, f64 = _problems(m, 3, "tanh", False)
    _, f32 = _problems(m, 3, "tanh", False, dtype="float32")
    assert f32.x.dtype == jnp.float32 and f32.x.shape[0] == n
    assert _scan_lengths(f64.grad, f64.theta0) == [-(-n // 9)]  # 5 blocks
    assert _scan_lengths(f32.grad, f32.theta0) == [-(-n // 18)]  # 3 blocks
    # the loss (recorded at every save time) runs in the same blocks, not over n×m at once
    assert _scan_lengths(f64.loss, f64.theta0) == [-(-n // 9)]
    assert _scan_lengths(f32.loss, f32.theta0) == [-(-n // 18)]
    # however wide the net, a block holds at least MIN_BLOCK_ROWS samples (thinner blocks
    # were 2× slower at m = 10⁵)
    monkeypatch.setattr(two_layer, "BLOCK_BYTES", 1)
    assert two_layer.block_rows(10**6, 8) == two_layer.MIN_BLOCK_ROWS == 8
    assert _scan_lengths(f64.grad, f64.theta0) == [-(-n // 8)]
    # and the float32 blocks still give the float32 autodiff gradient
    auto32, _ = _problems(m, 3, "tanh", False, dtype="float32")
    g, gf = auto32.grad(auto32.theta0), f32.grad(f32.theta0)
    size = max(float(jnp.max(jnp.abs(v))) for v in jax.tree_util.tree_leaves(g))
    assert_tree_allclose(gf, g, rtol=1e-5, atol=1e-6 * size)


def test_fused_flow_equals_autodiff_flow():
    auto, fused = _problems(12, 2, "tanh", False)
    kw = dict(t1=30.0, rtol=1e-10, atol=1e-13, n_save=5)
    ta, tf = flows.simulate(auto, **kw), flows.simulate(fused, **kw)
    assert ta.loss[-1] < 0.5 * ta.loss[0]
    np.testing.assert_allclose(tf.loss, ta.loss, rtol=1e-9)
    assert_tree_allclose(_final(tf), _final(ta), rtol=1e-8, atol=1e-12)
    assert tf.config["problem"]["vector_field"] == "fused"


def test_float32_flow_tracks_float64_to_single_precision():
    auto, _ = _problems(12, 2, "tanh", False)
    _, f32 = _problems(12, 2, "tanh", False, dtype="float32")
    assert f32.x.dtype == jnp.float32 and f32.theta0["a"].dtype == jnp.float32
    kw = dict(t1=30.0, rtol=1e-5, atol=1e-7, n_save=5)
    t64, t32 = flows.simulate(auto, **kw), flows.simulate(f32, **kw)
    assert t32.config["dtype"] == "float32"
    # the state itself stays float32 (diffrax would promote it to float64 times' dtype)
    assert _final(t32)["a"].dtype == np.float32
    err = max(float(np.max(np.abs(_final(t32)[k] - _final(t64)[k]))) for k in ("a", "w"))
    size = max(float(np.max(np.abs(v))) for v in _final(t64).values())
    # single precision (eps 6e-8) accumulated over a few hundred steps, plus rtol 1e-5
    assert 1e-9 < err / size < 1e-4


def test_auto_field_takes_the_fused_one_from_the_threshold_on():
    """'auto' (the default): fused for the two-layer net with the squared error from
    n·m ≥ AUTO_FUSED_MIN_ELEMENTS, autodiff below it and for anything else; the problem
    says which it took."""
    from flows._solve.problem import AUTO_FUSED_MIN_ELEMENTS

    n = 1000
    data = flows.paper_data("f1", n=n)
    edge = AUTO_FUSED_MIN_ELEMENTS // n  # m at the threshold
    below = flows.make_problem(TwoLayer(m=edge - 1, d=1, alpha=1.0), data)
    at = flows.make_problem(TwoLayer(m=edge, d=1, alpha=1.0), data)
    assert below.vector_field == "autodiff" and at.vector_field == "fused"
    assert at.describe()["vector_field"] == "fused"
    # the same rule where a paper asks without building the problem
    assert flows.plugin.two_layer_field("auto", n, edge - 1) == "autodiff"
    assert flows.plugin.two_layer_field("auto", n, edge) == "fused"
    assert flows.plugin.two_layer_field("autodiff", n, edge) == "autodiff"
    with pytest.raises(flows.ConfigError, match="vector_field"):
        flows.plugin.two_layer_field("hand", n, edge)
    # another loss has no fused field: autodiff, whatever the size
    labels = flows.from_arrays(data.x, np.where(data.y > 0, 1, -1))
    other = flows.make_problem(TwoLayer(m=edge, d=1, alpha=1.0), labels, loss_fn=flows.logistic)
    assert other.vector_field == "autodiff"
    # the field taken is the fused one: equal to autodiff's gradient to round-off
    ref = flows.make_problem(TwoLayer(m=edge, d=1, alpha=1.0), data, vector_field="autodiff")
    g, gf = ref.grad(ref.theta0), at.grad(at.theta0)
    size = max(float(jnp.max(jnp.abs(v))) for v in jax.tree_util.tree_leaves(g))
    assert_tree_allclose(gf, g, rtol=1e-10, atol=1e-13 * size)


def test_memory_bound_follows_the_field_taken():
    """The up-front memory refusal bounds the field 'auto' takes: at m = 10⁷, n = 1000
    autodiff's n×m array is 80 GB, the fused field's block, θ and gradient under 1 GB."""
    from flows.experiments.multistage.config import field_bytes, two_layer_bytes

    n, m = 1000, 10**7
    assert field_bytes("autodiff", n, m) == two_layer_bytes(n, m) == 8 * n * m
    assert field_bytes("auto", n, m) == field_bytes("fused", n, m) == 8 * (8 * m + 4 * m)
    assert field_bytes("auto", n, 1000) == two_layer_bytes(n, 1000)  # autodiff below 10⁷
    assert field_bytes("fused", 3, m, batch=2, itemsize=4) == 4 * 2 * (3 * m + 4 * m)


def test_fused_and_dtype_bad_input():
    data = flows.assumption_data("f2", n=10)
    model = TwoLayer(m=3, d=1, alpha=1.0)
    with pytest.raises(flows.ConfigError, match="vector_field"):
        flows.make_problem(model, data, vector_field="hand")
    with pytest.raises(flows.ConfigError, match="squared error only"):
        flows.make_problem(model, data, vector_field="fused", loss_fn=flows.logistic)
    with pytest.raises(flows.ConfigError, match="dtype"):
        flows.make_problem(model, data, dtype="float16")


# --- stop events -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    data = flows.assumption_data("f2", n=40)
    return flows.make_problem(TwoLayer(m=20, d=1, alpha=0.75), data, key=3)


@pytest.mark.e2e
def test_stop_at_loss_ends_the_run_where_the_loss_reaches_eps(small):
    full = flows.simulate(small, t1=40.0, rtol=1e-10, atol=1e-13, n_save=2001)
    eps = 0.5 * (full.loss[0] + full.loss[-1])
    i = int(np.argmax(full.loss <= eps))  # first save at or below eps
    tr = flows.simulate(
        small, t1=40.0, rtol=1e-10, atol=1e-13, n_save=2001, stop=flows.stop_at_loss(eps)
    )
    t_stop = tr.stats["stopped_at"]
    assert full.times[i - 1] < t_stop <= full.times[i]
    assert tr.times[-1] == t_stop and tr.loss[-1] == pytest.approx(eps, rel=1e-8)
    assert np.all(tr.times[:-1] < t_stop) and len(tr.times) == i + 1
    # parameters at the stop time: continuing the same flow from θ0 to t_stop agrees
    ref = flows.simulate(small, t1=t_stop, rtol=1e-10, atol=1e-13, n_save=2)
    assert_tree_allclose(_final(tr), _final(ref), rtol=1e-6, atol=1e-10)
    assert tr.config["stop"] == f"loss <= {eps}"
    assert np.max(tr.observables["energy_residual"]) < 1e-8 * tr.loss[0]


def test_stop_never_triggered_runs_to_t1(small):
    tr = flows.simulate(small, t1=5.0, n_save=11, stop=flows.stop_at_loss(-1.0))
    assert np.isnan(tr.stats["stopped_at"]) and tr.times[-1] == 5.0 and len(tr.times) == 11


def test_stop_with_the_log_clock_uses_physical_time(small):
    def after_three(problem, theta, t):
        return 3.0 - t

    tr = flows.simulate(small, t1=100.0, clock="log", n_save=50, stop=after_three)
    assert tr.stats["stopped_at"] == pytest.approx(3.0, rel=1e-8)
    assert tr.times[-1] == pytest.approx(3.0, rel=1e-8)


@pytest.mark.e2e  # a float32 program: ~10 s cold
def test_float32_refuses_rtol_it_cannot_meet():
    _, f32 = _problems(3, 2, "tanh", False, dtype="float32")
    with pytest.raises(flows.ConfigError, match="rtol = 1e-07.*float32.*dtype='float64'"):
        flows.simulate(f32, t1=1.0, rtol=1e-7)
    with pytest.raises(flows.ConfigError, match="'kvaerno5'.*rtol ≥ 0.0001"):
        flows.simulate(f32, t1=1.0, solver="kvaerno5", rtol=1e-6)
    with pytest.raises(flows.ConfigError, match="float32"):
        flows.simulate_batch([f32, f32], t1s=[1.0, 1.0], rtol=1e-8)
    assert (
        flows.simulate(f32, t1=1.0, solver="kvaerno5", rtol=1e-4, atol=1e-7).stats["result"]
        == "successful"
    )
