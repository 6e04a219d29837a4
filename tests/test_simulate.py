"""Exact gradient flow: gradients, energy identity, solvers, GD limit, failures, bad input."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from _matrix import default_and_ci

import flows
from flows.experiments import multistage as msx
from flows.models import TwoLayer


@pytest.fixture(scope="module")
def small():
    data = flows.assumption_data("f2", n=40)
    return flows.make_problem(TwoLayer(m=20, d=1, alpha=0.75), data, key=3)


def _fd_grad(f, theta, eps=1e-6):
    flat, unravel = jax.flatten_util.ravel_pytree(theta)
    g = np.zeros(flat.shape)
    for i in range(flat.size):
        e = jnp.zeros_like(flat).at[i].set(eps)
        g[i] = (f(unravel(flat + e)) - f(unravel(flat - e))) / (2 * eps)
    return g


@pytest.mark.parametrize("bias", [False, True])
def test_autodiff_gradient_matches_finite_differences(bias):
    data = flows.assumption_data("f2", n=30, d=2, seed=1)
    prob = flows.make_problem(TwoLayer(m=4, d=2, alpha=0.3, bias=bias), data, key=0)
    g = jax.flatten_util.ravel_pytree(prob.grad(prob.theta0))[0]
    np.testing.assert_allclose(
        np.asarray(g), _fd_grad(prob.loss, prob.theta0), rtol=1e-6, atol=1e-9
    )


def test_autodiff_gradient_matches_hand_written():
    """−∂R/∂a_k = −E[e σ(w_k·x)], −∂R/∂w_k = −E[e a_k σ′(w_k·x) x], e = f_θ(x) − y."""
    data = flows.assumption_data("f2", n=50, d=3, seed=2)
    prob = flows.make_problem(TwoLayer(m=6, d=3, alpha=0.2), data, key=1)
    a, w = prob.theta0["a"], prob.theta0["w"]
    x, y = prob.x, prob.y
    pre = x @ w.T
    e = jnp.tanh(pre) @ a - y
    ga = jnp.mean(e[:, None] * jnp.tanh(pre), axis=0)
    gw = jnp.mean((e[:, None] * a[None, :] / jnp.cosh(pre) ** 2)[:, :, None] * x[:, None, :], 0)
    g = prob.grad(prob.theta0)
    np.testing.assert_allclose(g["a"], ga, rtol=1e-12)
    np.testing.assert_allclose(g["w"], gw, rtol=1e-12)


def test_energy_identity_and_monotone_loss(small):
    tr = flows.simulate(small, t1=10.0, rtol=1e-9, atol=1e-12)
    assert tr.stats["result"] == "successful"
    assert np.all(np.diff(tr.loss) <= 1e-14)
    assert tr.loss[-1] < 0.5 * tr.loss[0]  # it does train
    assert np.max(tr.observables["energy_residual"]) <= 1e-7 * tr.loss[0]


def test_energy_residual_detects_a_wrong_vector_field(small):
    """The certificate can fail: GD with a large step breaks the identity visibly."""
    gd = flows.gradient_descent(small, learning_rate=0.5, t1=10.0)
    assert np.max(gd.observables["energy_residual"]) > 1e-3 * gd.loss[0]


@pytest.mark.parametrize("solver", ["tsit5", "dopri5", "dopri8", "kvaerno5"])
def test_solvers_agree_with_tight_reference(small, solver):
    ref = flows.simulate(small, t1=6.0, solver="dopri8", rtol=1e-12, atol=1e-14)
    tr = flows.simulate(small, t1=6.0, solver=solver, rtol=1e-8, atol=1e-11)
    for name in ("a", "w"):
        np.testing.assert_allclose(tr.params[name][-1], ref.params[name][-1], rtol=0, atol=1e-6)
    assert tr.stats["vf_evals"] > 0 and tr.stats["accepted_steps"] > 0


def test_gradient_descent_converges_to_flow_at_order_one(small):
    """GD is forward Euler: its error at fixed t shrinks in proportion to η."""
    t1 = 4.0
    ref = flows.simulate(small, t1=t1, solver="dopri8", rtol=1e-12, atol=1e-14)
    errs = []
    etas = [4e-2, 2e-2, 1e-2]
    for eta in etas:
        gd = flows.gradient_descent(small, learning_rate=eta, t1=t1)
        assert gd.times[-1] == pytest.approx(t1)
        errs.append(np.max(np.abs(gd.params["a"][-1] - ref.params["a"][-1])))
    order = np.polyfit(np.log(etas), np.log(errs), 1)[0]
    assert 0.9 < order < 1.1, (errs, order)


def test_log_clock_matches_physical_clock(small):
    ts = np.concatenate([[0.0], np.geomspace(0.1, 200.0, 20)])
    phys = flows.simulate(small, t1=200.0, ts=ts, rtol=1e-10, atol=1e-12)
    logc = flows.simulate(small, t1=200.0, ts=ts, clock="log", rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(logc.loss, phys.loss, rtol=1e-6)
    np.testing.assert_allclose(logc.params["a"][-1], phys.params["a"][-1], rtol=1e-6, atol=1e-9)
    assert np.max(logc.observables["energy_residual"]) <= 1e-6 * logc.loss[0]


@pytest.mark.e2e  # a program per save mode: ~11 s cold
def test_save_params_modes(small):
    for mode, count in (("all", 11), ("ends", 2), ("none", 0)):
        tr = flows.simulate(small, t1=1.0, n_save=11, save_params=mode)
        assert len(tr.param_times) == count
        assert tr.observables["loss"].shape == (11,)
        if count:
            assert tr.params["w"].shape == (count, 20, 1)


def test_observables_inside_solve(small):
    tr = flows.simulate(
        small,
        t1=2.0,
        n_save=5,
        observables=msx.multistage_observables,
        save_params="all",
    )
    a, w = tr.params["a"], tr.params["w"]
    np.testing.assert_allclose(tr.observables["K"], np.sum(a * w[:, :, 0], axis=1), rtol=1e-12)
    np.testing.assert_allclose(tr.observables["norm_a"], np.linalg.norm(a, axis=1), rtol=1e-12)
    # at t = 0 the linearized closed form equals θ(0) exactly
    assert tr.observables["r_max"][0] <= 1e-15


def test_relative_w2_is_rms_of_sorted_differences():
    a = jnp.array([0.3, -0.1, 0.2])
    wn = jnp.array([0.25, 0.05, 0.1])
    got = msx.observables.relative_w2(a, wn)
    want = np.sqrt(np.mean((np.sort([0.3, 0.1, 0.2]) - np.sort([0.25, 0.05, 0.1])) ** 2))
    assert float(got) == pytest.approx(want / np.sqrt(np.mean(np.asarray(a) ** 2)))


def test_max_steps_failure_is_loud(small):
    with pytest.raises(flows.SolverError, match="max_steps") as info:
        flows.simulate(small, t1=10.0, max_steps=3)
    assert 0 < info.value.t_reached < 10.0
    assert "t = " in str(info.value) and "Increase `max_steps`" in str(info.value)
    tr = flows.simulate(small, t1=10.0, max_steps=3, throw=False)
    assert tr.stats["result"] == "max_steps reached"
    # the run ends at the time reached: no unreached save times, no fake or inf values
    assert tr.times[-1] == tr.stats["t_reached"] and np.all(np.isfinite(tr.loss))


def test_nonfinite_state_is_loud():
    def blows_up(z):  # tanh-like near 0, NaN beyond |z| > 0.4 (reached as the weights grow)
        return jnp.where(jnp.abs(z) > 0.4, jnp.nan, jnp.tanh(z))

    data = flows.assumption_data("f2", n=20)
    prob = flows.make_problem(TwoLayer(m=10, d=1, alpha=1.0, activation=blows_up), data, key=0)
    assert np.isfinite(float(prob.loss(prob.theta0)))
    with pytest.raises(flows.SolverError, match="non-finite") as info:
        flows.simulate(prob, t1=20.0, max_steps=2000)
    with pytest.raises(flows.SolverError, match="non-finite"):  # also with the callback count
        flows.simulate(prob, t1=20.0, max_steps=2000, count_evals=True)
    assert 0 < info.value.t_reached < 20.0


def test_netcdf_contract(small, tmp_path):
    tr = flows.simulate(small, t1=1.0, n_save=6, observables=msx.multistage_observables)
    path = tr.save(tmp_path / "out" / "trajectory.nc")
    ds = xr.open_dataset(path)
    assert ds["loss"].dims == ("time",)
    assert ds["a"].dims == ("time", "neuron") and ds["w"].dims == ("time", "neuron", "dim")
    assert ds["x"].dims == ("sample", "dim") and ds["y"].dims == ("sample",)
    np.testing.assert_allclose(ds["a"].values[0], np.asarray(small.theta0["a"]))
    np.testing.assert_allclose(ds["a"].values[-1], tr.params["a"][-1])
    assert np.isnan(ds["a"].values[2]).all() and list(ds["param_saved"].values) == [
        1,
        0,
        0,
        0,
        0,
        1,
    ]
    for key in ("config", "stats", "versions", "machine", "solver", "rtol", "atol"):
        assert key in ds.attrs
    assert json.loads(ds.attrs["machine"])["cpu_cores"] == flows.machine()["cpu_cores"] >= 1
    assert "squared error summed over outputs" in ds["loss"].attrs["description"]
    assert not list(tmp_path.joinpath("out").glob(".*tmp"))  # no temporary left behind


def test_bad_input_is_a_clear_error(small):
    with pytest.raises(flows.ConfigError, match="t1"):
        flows.simulate(small, t1=0.0)
    with pytest.raises(flows.ConfigError, match="rtol"):
        flows.simulate(small, t1=1.0, rtol=0.0)
    with pytest.raises(flows.ConfigError, match="atol"):
        flows.simulate(small, t1=1.0, atol=-1.0)
    with pytest.raises(flows.ConfigError, match="solver"):
        flows.simulate(small, t1=1.0, solver="rk4")
    with pytest.raises(flows.ConfigError, match="clock"):
        flows.simulate(small, t1=1.0, clock="weird")
    with pytest.raises(flows.ConfigError, match="ts"):
        flows.simulate(small, t1=1.0, ts=[0.0, 2.0])
    with pytest.raises(flows.ConfigError, match="learning_rate"):
        flows.gradient_descent(small, learning_rate=0.0, t1=1.0)
    with pytest.raises(flows.ConfigError, match="d = 2"):
        flows.make_problem(TwoLayer(m=3, d=1, alpha=1.0), flows.assumption_data(n=20, d=2))
    with pytest.raises(flows.ConfigError, match="m"):
        TwoLayer(m=0, d=1, alpha=1.0)
    with pytest.raises(flows.ConfigError, match="activation"):
        TwoLayer(m=3, d=1, alpha=1.0, activation="relu6")
    with pytest.raises(flows.ConfigError, match="non-finite"):
        flows.from_arrays([0.0, np.nan], [1.0, 2.0])
    with pytest.raises(flows.ConfigError, match="same number"):
        flows.from_arrays([0.0, 1.0, 2.0], [1.0, 2.0])
    with pytest.raises(flows.ConfigError, match="target"):
        flows.paper_data("f4")
    big = flows.make_problem(TwoLayer(m=3000, d=1, alpha=1.0), flows.assumption_data(n=10))
    with pytest.raises(flows.ConfigError, match="kvaerno5"):
        flows.simulate(big, t1=1.0, solver="kvaerno5")


def test_data_moments():
    d1 = flows.moments(flows.assumption_data("f2", n=100))
    assert d1.a12 and d1.describe().startswith("Assumptions 1–2 hold")
    d3 = flows.moments(flows.assumption_data("f2", n=200, d=3, seed=4))
    assert d3.a12
    np.testing.assert_allclose(d3.sigma, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(d3.b, [1.0, 0.0, 0.0], atol=1e-12)
    paper = flows.moments(flows.paper_data("f1"))
    assert paper.isotropic and not paper.a12
    assert paper.s2 == pytest.approx(75.15, abs=0.01)
    x = np.random.default_rng(0).normal(size=(50, 2)) * [1.0, 3.0]
    aniso = flows.moments(flows.from_arrays(x, x[:, 0]))
    assert not aniso.isotropic and "whiten" in aniso.describe()


def test_tanh_like_activations():
    for name in ("tanh", "sin", "erf"):
        assert TwoLayer(m=2, d=1, alpha=1.0, activation=name).tanh_like()[0]
    ok, why = TwoLayer(m=2, d=1, alpha=1.0, activation=jax.nn.sigmoid).tanh_like()
    assert not ok and "σ(0)" in why


@pytest.mark.parametrize(
    ("solver", "dt0"),
    default_and_ci(
        [(s, dt0) for dt0 in (None, 1e-3) for s in ("tsit5", "dopri5", "dopri8")],
        default=[("tsit5", None), ("dopri8", 1e-3)],
        unpack=True,
    ),
)
def test_analytic_eval_count_matches_callback_count(solver, dt0):
    data = flows.assumption_data("f2", n=30)
    prob = flows.make_problem(TwoLayer(m=15, d=1, alpha=1.0), data, key=5)
    auto = flows.simulate(prob, t1=6.0, rtol=1e-7, solver=solver, dt0=dt0)
    counted = flows.simulate(prob, t1=6.0, rtol=1e-7, solver=solver, dt0=dt0, count_evals=True)
    assert auto.stats["steps"] == counted.stats["steps"]
    assert auto.stats["vf_evals"] == counted.stats["vf_evals"]


def test_progress_says_when_it_compiles_and_only_then(small, capsys):
    """With `progress`, a run that compiles says so before it starts (compilation is most
    of a small run) and how long it took; a run that reuses the program does not."""
    flows.simulate(small, t1=0.5, n_save=3, progress=True)
    first = capsys.readouterr().err
    assert "compiling the solve" in first and "compiled in" in first
    flows.simulate(small, t1=0.7, n_save=3, progress=True)
    assert "compiling" not in capsys.readouterr().err
