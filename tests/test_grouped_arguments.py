"""The save and step-control arguments grouped as diffrax groups them (`flows.SaveSpec`,
`flows.ControllerSpec`): the same run as the flat arguments, and one value in one place."""

import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows.models import LeakyReLUNet, TwoLayer


@pytest.fixture(scope="module")
def small():
    data = flows.assumption_data("f2", n=30)
    return flows.make_problem(TwoLayer(m=8, d=1, alpha=0.75), data, key=5)


def _norm_observable(problem, theta, t):
    return {"w_norm": jnp.sqrt(jnp.sum(theta["w"] ** 2))}


def _same_run(a: flows.Trajectory, b: flows.Trajectory) -> None:
    np.testing.assert_array_equal(a.times, b.times)
    assert set(a.observables) == set(b.observables)
    for k in a.observables:
        np.testing.assert_array_equal(a.observables[k], b.observables[k])
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    assert a.stats.steps == b.stats.steps
    for k in ("rtol", "atol", "error_norm", "save_params"):
        assert a.config[k] == b.config[k]


def test_simulate_grouped_is_the_flat_run(small):
    # every field off its default, so that a field read into the wrong argument shows
    ts = np.array([0.0, 0.5, 1.5, 3.0])
    flat = flows.simulate(
        small, t1=3.0, ts=ts, save_params="all", observables=_norm_observable,
        rtol=1e-7, atol=1e-10, error_norm="max", dt0=1e-3,
    )  # fmt: skip
    grouped = flows.simulate(
        small,
        t1=3.0,
        save=flows.SaveSpec(ts=ts, params="all", observables=_norm_observable),
        controller=flows.ControllerSpec(rtol=1e-7, atol=1e-10, norm="max", dt0=1e-3),
    )
    _same_run(flat, grouped)
    assert grouped.config["rtol"] == 1e-7 and grouped.config["atol"] == 1e-10
    assert grouped.config["error_norm"] == "max" and "w_norm" in grouped.observables
    # and the grouped settings act: the default run (rtol 1e-6, RMS norm) takes fewer steps
    plain = flows.simulate(small, t1=3.0, ts=ts)
    assert plain.stats.steps < grouped.stats.steps


def test_simulate_grouped_fields_left_unset_take_the_flat_arguments(small):
    a = flows.simulate(small, t1=2.0, n_save=7, rtol=1e-7, save=flows.SaveSpec(params="all"))
    b = flows.simulate(small, t1=2.0, n_save=7, rtol=1e-7, save_params="all")
    _same_run(a, b)
    assert len(a.times) == 7


def test_simulate_batch_grouped_is_the_flat_run(small):
    problems = [small, small]
    flat = flows.simulate_batch(problems, t1s=[1.0, 2.0], n_save=5, save_params="all", rtol=1e-7)
    grouped = flows.simulate_batch(
        problems,
        t1s=[1.0, 2.0],
        save=flows.SaveSpec(n_save=5, params="all"),
        controller=flows.ControllerSpec(rtol=1e-7),
    )
    for a, b in zip(flat, grouped, strict=True):
        assert isinstance(a, flows.Trajectory) and isinstance(b, flows.Trajectory)
        _same_run(a, b)


def test_a_value_given_twice_is_refused(small):
    with pytest.raises(flows.ConfigError, match=r"`rtol` is given twice.*give it once"):
        flows.simulate(small, t1=1.0, rtol=1e-7, controller=flows.ControllerSpec(rtol=1e-8))
    with pytest.raises(flows.ConfigError, match=r"`save_params` is given twice"):
        flows.simulate(small, t1=1.0, save_params="all", save=flows.SaveSpec(params="none"))
    with pytest.raises(flows.ConfigError, match=r"`ts` is given twice"):
        flows.simulate(small, t1=1.0, ts=[0.0, 1.0], save=flows.SaveSpec(ts=[0.0, 0.5, 1.0]))


def test_a_wrong_spec_type_or_an_argument_the_function_lacks_is_refused(small):
    with pytest.raises(flows.ConfigError, match=r"`controller` must be a flows.ControllerSpec"):
        flows.simulate(small, t1=1.0, controller={"rtol": 1e-8})  # type: ignore[arg-type]
    with pytest.raises(flows.ConfigError, match=r"`save` must be a flows.SaveSpec"):
        flows.simulate(small, t1=1.0, save=flows.ControllerSpec(rtol=1e-8))  # type: ignore[arg-type]
    with pytest.raises(flows.ConfigError, match=r"simulate_batch takes no `ts`.*n_save"):
        flows.simulate_batch([small], t1s=[1.0], save=flows.SaveSpec(ts=[0.0, 1.0]))
    data = flows.assumption_data("f2", n=10)
    leaky = flows.make_problem(LeakyReLUNet(k=2, d=1), data, key=0)
    with pytest.raises(flows.ConfigError, match=r"simulate_nonsmooth takes no `dt0`"):
        flows.simulate_nonsmooth(leaky, t1=1.0, controller=flows.ControllerSpec(dt0=1e-3))
