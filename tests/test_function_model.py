"""A user's own model as a plain function f(params, x), and vector targets."""

import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows.models import FunctionModel, TwoLayer


@pytest.mark.e2e
def test_a_function_model_flows_exactly_like_the_same_builtin_model():
    """TwoLayer written by hand as a function: the same θ(0) gives the same flow."""
    data = flows.paper_data("f1", n=60)
    builtin = flows.make_problem(TwoLayer(m=8, d=1, alpha=0.75), data, key=2)
    theta0 = {k: np.asarray(v) for k, v in builtin.theta0.items()}

    def two_layer(p, x):  # Σ_k a_k tanh(w_k · x)
        return jnp.tanh(x @ p["w"].T) @ p["a"]

    mine = flows.make_problem(two_layer, data, theta0=theta0)
    assert isinstance(mine.model, FunctionModel)
    a = flows.simulate(builtin, t1=5.0, n_save=11)
    b = flows.simulate(mine, t1=5.0, n_save=11)
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-9)
    np.testing.assert_allclose(b.params["w"][-1], a.params["w"][-1], rtol=1e-8, atol=1e-12)
    assert mine.model.describe()["params"] == {"a": [8], "w": [8, 1]}


def test_vector_targets_and_a_linear_function_model_reach_least_squares():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    y = x @ rng.normal(size=(3, 2))  # (n, 2) targets, exactly linear
    prob = flows.make_problem(
        lambda p, x: x @ p["A"].T, flows.from_arrays(x, y), theta0={"A": np.zeros((2, 3))}
    )
    traj = flows.simulate(prob, t1=200.0, rtol=1e-8, atol=1e-12)
    # L = (1/2n) Σ ‖y − A x‖²: at t = 0 (A = 0) it is ½ mean ‖y‖², at the end ≈ 0
    assert traj.loss[0] == pytest.approx(0.5 * np.mean(np.sum(y**2, axis=1)), rel=1e-12)
    assert traj.loss[-1] < 1e-10


def test_function_models_need_theta0_and_refuse_non_callables():
    data = flows.paper_data("f1", n=10)
    with pytest.raises(flows.ConfigError, match="theta0"):
        flows.make_problem(lambda p, x: x[:, 0] * p["c"], data)
    with pytest.raises(flows.ConfigError, match="model"):
        flows.make_problem("not a model", data, theta0={"c": 1.0})
    with pytest.raises(flows.ConfigError, match="shape"):
        flows.from_arrays(np.zeros((4, 2)), np.zeros((4, 2, 2)))
