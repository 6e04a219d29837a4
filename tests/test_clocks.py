"""Clocks as objects (physical, log, loss through `simulate`), solvers given as diffrax
objects, and the typed solve statistics (`SolveStats`, `Result`) with their mapping view."""

import json
import math
from collections.abc import Mapping

import diffrax
import jax
import jax.flatten_util
import numpy as np
import pytest
import scipy.integrate

import flows
from flows.experiments.linear_teacher.data import binary_dataset, symmetric_gaussians
from flows.models import LeakyReLUNet, TwoLayer


def _teacher(n=20, k=2, init=0.1, slope=0.2, seed=0):
    data = symmetric_gaussians(n, 2, seed=seed)
    model = LeakyReLUNet(k=k, d=2, slope=slope, init_scale=init)
    return flows.make_problem(model, data.train, key=seed, loss_fn=flows.logistic)


@pytest.fixture(scope="module")
def teacher():
    return _teacher()


@pytest.fixture(scope="module")
def small():
    return flows.make_problem(
        TwoLayer(m=20, d=1, alpha=0.75), flows.assumption_data("f2", n=40), key=3
    )


def _same(a: flows.Trajectory, b: flows.Trajectory):
    """Bit-for-bit the same run (times, observables, parameters, step counts)."""
    np.testing.assert_array_equal(a.times, b.times)
    assert list(a.observables) == list(b.observables)
    for k in a.observables:
        np.testing.assert_array_equal(a.observables[k], b.observables[k])
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    for k in ("steps", "accepted_steps", "rejected_steps", "vf_evals"):
        assert a.stats[k] == b.stats[k], k


# --- clock objects ---------------------------------------------------------------------


def test_clock_objects_and_names():
    assert flows.CLOCKS == ("physical", "log", "loss")
    for name, cls in zip(
        flows.CLOCKS, (flows.PhysicalClock, flows.LogClock, flows.LossClock), strict=True
    ):
        assert cls().name == name and cls() == cls() and hash(cls()) == hash(cls())
    t = np.array([0.0, 0.5, 1e3, 1e10])
    for clock in (flows.PhysicalClock(), flows.LogClock()):
        s = clock.from_physical(t)
        np.testing.assert_allclose(np.asarray(clock.to_physical(jax.numpy.asarray(s))), t)
    # dt/ds of the log clock is e^s = 1 + t
    assert float(flows.LogClock().rate(jax.numpy.asarray(np.log1p(9.0)), "float64")) == (
        pytest.approx(10.0, rel=1e-14)
    )
    np.testing.assert_allclose(
        flows.log_save_times(1e4, 5), [0, 1, 1e4 ** (1 / 3), 1e4 ** (2 / 3), 1e4]
    )
    with pytest.raises(flows.ConfigError, match="clock"):
        flows.simulate(_teacher(), t1=1.0, clock="banana")
    with pytest.raises(flows.ConfigError, match="clock"):
        flows.simulate(_teacher(), t1=1.0, clock=flows.LogClock)  # the class, not an object


@pytest.mark.e2e  # clock objects against names, array for array: ~7 s cold
def test_clock_object_equals_its_name(small):
    for clock in ("physical", "log"):
        obj = {"physical": flows.PhysicalClock(), "log": flows.LogClock()}[clock]
        a = flows.simulate(small, t1=50.0, clock=clock, n_save=5)
        b = flows.simulate(small, t1=50.0, clock=obj, n_save=5)
        _same(a, b)
        assert b.config["clock"] == clock


# Recorded with the old entry point `late_phase_flow(p, t1=1e10, n_save=6)` (Tsit5,
# rtol 1e-6, atol 1e-9) before the loss clock moved into `simulate`; the new run was
# bit-for-bit the same on the machine that recorded it. Re-recorded (2026-12-07) when the
# energy state moved to the scale of L(0) (`flows._solve.flow.energy_offset`): the loss at
# t = 1 and 316 moved by 9.6e-6 and 7.7e-7 relative, towards a DOP853 reference at rtol
# 1e-13 (its errors 1.5e-5 → 5.4e-6 and 1.4e-6 → 6.4e-7; this teacher has kinks, which a
# smooth solver crosses without error control), the steps 94 + 141 → 91 + 144.
OLD_TIMES = [0.0, 1.0, 316.2277660168379, 100000.0, 31622776.60168379, 10000000000.0]
OLD_LOSS = [
    0.4833707639075698,
    0.13633326596192052,
    0.0037219255817539003,
    1.3795373625143129e-05,
    4.361957175627373e-08,
    1.3793680547495917e-10,
]
OLD_S = [
    0.0,
    0.23510661318666928,
    3.295220927196139,
    11.050180022733167,
    18.990781675474643,
    26.931034040476444,
]
OLD_W = [[11.54793699961505, -3.596495270592186], [11.401591031447424, -3.3102479716076143]]
OLD_U = [[-11.531260408871372, 3.6649277361202928], [-11.32066170559431, 3.5429647206605424]]
OLD_STEPS = {"steps": 235, "accepted_steps": 91, "rejected_steps": 144, "vf_evals": 1415}


def test_loss_clock_through_simulate_matches_late_phase_flow(teacher):
    tr = flows.simulate(teacher, t1=1e10, ts=flows.log_save_times(1e10, 6), clock=flows.LossClock())
    np.testing.assert_array_equal(tr.times, OLD_TIMES)
    np.testing.assert_allclose(tr.loss, OLD_LOSS, rtol=1e-10)
    np.testing.assert_allclose(tr.observables["s"], OLD_S, rtol=1e-10)
    np.testing.assert_allclose(tr.param("w"), OLD_W, rtol=1e-10)
    np.testing.assert_allclose(tr.param("u"), OLD_U, rtol=1e-10)
    assert {k: tr.stats[k] for k in OLD_STEPS} == OLD_STEPS
    assert tr.stats.segments == 6 and tr.stats.result is flows.Result.successful
    assert tr.stats.certificate["ok"]
    assert tr.config["clock"] == "loss" and "loss clock" in tr.config["method"]
    # the name gives the same run
    _same(tr, flows.simulate(teacher, t1=1e10, ts=flows.log_save_times(1e10, 6), clock="loss"))


def test_loss_clock_matches_an_independent_scipy_integration(teacher):
    """DOP853 on the physical flow dθ/dt = −∇L (scipy, its own step control)."""
    flat0, unravel = jax.flatten_util.ravel_pytree(teacher.theta0)
    grad = jax.jit(lambda v: jax.flatten_util.ravel_pytree(teacher.grad(unravel(v)))[0])
    ref = scipy.integrate.solve_ivp(
        lambda t, v: -np.asarray(grad(v)),
        (0.0, 100.0),
        np.asarray(flat0),
        "DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    assert ref.success
    tr = flows.simulate(teacher, t1=100.0, n_save=3, clock="loss", rtol=1e-10, atol=1e-13)
    assert tr.times[-1] == 100.0
    got = np.concatenate([tr.param("u").ravel(), tr.param("w").ravel()])  # ravel order
    np.testing.assert_allclose(got, ref.y[:, -1], rtol=1e-7, atol=1e-9)


def test_loss_clock_refuses_what_it_cannot_do(teacher):
    with pytest.raises(flows.ConfigError, match="stop"):
        flows.simulate(teacher, t1=10.0, clock="loss", stop=flows.stop_at_loss(0.1))
    with pytest.raises(flows.ConfigError, match="dt0"):
        flows.simulate(teacher, t1=10.0, clock="loss", dt0=0.1)
    with pytest.raises(flows.ConfigError, match="explicit"):
        flows.simulate(teacher, t1=10.0, clock="loss", solver="kvaerno5")


# --- solvers as objects -----------------------------------------------------------------


@pytest.mark.e2e  # solver objects against names, array for array: ~10 s cold
def test_solver_objects_equal_their_names(small):
    kw = dict(t1=6.0, rtol=1e-7, atol=1e-10, n_save=5)
    for name, obj in (
        ("dopri5", diffrax.Dopri5()),
        ("tsit5", diffrax.Tsit5()),
        ("rkc", flows.RKC2(nonstiff="tsit5", tolerances=(1e-7, 1e-10))),
    ):
        by_name = flows.simulate(small, solver=name, **kw)
        by_obj = flows.simulate(small, solver=obj, **kw)
        _same(by_name, by_obj)
        assert by_obj.config["solver"] == name
        assert by_obj.config["solver_requested"] == type(obj).__name__
        assert by_obj.config["solver_class"] == type(obj).__name__
        assert by_obj.stats.vf_evals_counted_by == by_name.stats.vf_evals_counted_by
    assert by_obj.config["solver_settings"]["nonstiff"] == "tsit5"


@pytest.mark.e2e
def test_custom_rkc2_and_compile_cache(small):
    kw = dict(t1=6.0, rtol=1e-6, atol=1e-9, n_save=5)
    a = flows.simulate(small, solver=flows.RKC2(), **kw)  # nonstiff='bs3': not 'rkc'
    b = flows.simulate(small, solver=flows.RKC2(rho_every=5), **kw)
    assert a.config["solver"] == "RKC2" and a.config["solver_settings"]["rho_every"] == 50
    assert b.config["solver_settings"]["rho_every"] == 5
    # not served from one compiled solve: more frequent re-estimates cost more JVPs
    assert b.stats.extra["jvp_evals"] > a.stats.extra["jvp_evals"]
    assert a.stats["jvp_evals"] == a.stats.extra["jvp_evals"]
    assert a.stats.vf_evals_counted_by.startswith("solver state")
    with pytest.raises(flows.ConfigError, match="tolerances"):
        flows.simulate(small, solver=flows.RKC2(nonstiff="tsit5", tolerances=(1e-3, 1e-6)), **kw)


def test_bad_solver_objects_are_refused(small):
    with pytest.raises(flows.ConfigError, match="error estimate"):
        flows.simulate(small, t1=1.0, solver=diffrax.Euler())
    with pytest.raises(flows.ConfigError, match="solver"):
        flows.simulate(small, t1=1.0, solver=object())
    with pytest.raises(flows.ConfigError, match="solver"):
        flows.simulate(small, t1=1.0, solver="euler")


# --- typed statistics -------------------------------------------------------------------


def test_solve_stats_typed_fields_and_mapping_view(small, tmp_path):
    tr = flows.simulate(small, t1=6.0, n_save=5)
    st = tr.stats
    assert isinstance(st, flows.SolveStats) and isinstance(st, Mapping)
    assert st.result is flows.Result.successful and st.ok and st.reason == "successful"
    assert isinstance(st.vf_evals, int) and st.vf_evals == st["vf_evals"] > 0
    assert st.stopped_at is None and math.isnan(st["stopped_at"])
    assert list(st)[:8] == [
        "result",
        "t_reached",
        "steps",
        "accepted_steps",
        "rejected_steps",
        "vf_evals",
        "compile_s",
        "wall_s",
    ]
    assert st["certificate"]["ok"] and st.certificate["ok"]
    with pytest.raises(TypeError):
        st["steps"] = 0  # read-only
    with pytest.raises(AttributeError):
        st.steps = 0  # frozen
    # the saved form is the mapping view, unchanged
    tr.save(tmp_path / "t.nc")
    import xarray as xr

    with xr.open_dataset(tmp_path / "t.nc") as ds:
        saved = json.loads(ds.attrs["stats"])
    assert saved["steps"] == st.steps and saved["result"] == "successful"
    assert set(saved) == set(st)
    # not counted: None, −1 in the mapping view
    nc = flows.simulate(small, t1=6.0, n_save=5, count_evals=False)
    assert nc.stats.vf_evals is None and nc.stats["vf_evals"] == -1


@pytest.mark.e2e
def test_results_of_failures_and_events(small):
    stop = flows.simulate(small, t1=20.0, stop=flows.stop_at_loss(0.05), n_save=11)
    assert stop.stats.result is flows.Result.event_stopped and stop.stats.ok
    assert stop.stats["result"] == "successful" and "stop condition" in stop.stats.reason
    assert stop.stats.stopped_at == stop.stats["stopped_at"] == stop.times[-1]
    fail = flows.simulate(small, t1=20.0, max_steps=10, throw=False)
    assert fail.stats.result is flows.Result.max_steps_reached and not fail.stats.ok
    assert fail.stats["result"] == fail.stats.reason == "max_steps reached"
    gd = flows.gradient_descent(small, learning_rate=50.0, t1=3000.0, n_save=7, throw=False)
    assert gd.stats.result is flows.Result.diverged
    assert gd.stats["result"].startswith("diverged") and gd.stats.max_loss_rise is not None
    assert "max_loss_rise" in gd.stats and "stopped_at" not in gd.stats


def test_loss_clock_failure_result():
    data = binary_dataset(np.array([[1e4, 0.0], [-1e4, 0.0]]), np.array([1.0, -1.0]))
    p = flows.make_problem(
        LeakyReLUNet(k=1, d=2, init_scale=1.0),
        data,
        theta0={"w": np.array([[1.0, 0]]), "u": -np.array([[1.0, 0]])},
        loss_fn=flows.logistic,
    )
    tr = flows.simulate(p, t1=1e3, n_save=3, clock="loss", throw=False)
    assert tr.stats.result is flows.Result.clock_overflow
    assert tr.stats["result"].startswith("loss clock overflow")
    with pytest.raises(flows.SolverError, match="t = "):
        flows.simulate(p, t1=1e3, n_save=3, clock="loss")
