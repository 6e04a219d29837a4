"""The exact piecewise-smooth flow through ReLU-family kinks (`flows.simulate_nonsmooth`).

Oracles: the same flow at a far tighter tolerance; the smoothed activation σ_ε integrated
by an ordinary (smooth) solver as ε → 0, an independent path through diffrax's own solvers
— crossing *and* sliding; the energy identity; and hand-built multi-kink activations.
"""

from __future__ import annotations

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import flows
from flows import ConfigError, PiecewiseLinear, SolverError, logistic, simulate_nonsmooth
from flows.experiments.linear_teacher.data import antipodal_with_outlier, symmetric_gaussians
from flows.models._kinks import leaky_relu_kinks
from flows.models.base import AbstractModel
from flows.models.deep import DeepFCN
from flows.models.leaky import LeakyReLUNet


def _theta(traj, which=-1):
    return np.concatenate([traj.params[k][which].ravel() for k in sorted(traj.params)])


@pytest.fixture(scope="module")
def crossing():
    """Large init on overlapping Gaussians: many transversal crossings, no sliding."""
    data = symmetric_gaussians(40, 2, mean=1.0, seed=0)

    def problem(eps=0.0):
        model = LeakyReLUNet(k=4, d=2, slope=0.1, init_scale=1.0, smoothing=eps)
        return flows.make_problem(model, data.train, key=0, loss_fn=logistic)

    exact = simulate_nonsmooth(problem(), t1=5.0, n_save=6, rtol=1e-11, atol=1e-14)
    return problem, exact


@pytest.mark.e2e
def test_crossings_located_and_tolerance_met(crossing):
    problem, exact = crossing
    assert exact.stats["crossings"] >= 10  # the run does meet kinks
    assert exact.stats["sliding_entries"] == 0
    default = simulate_nonsmooth(problem(), t1=5.0, n_save=6)
    # within 10 × rtol of the tight reference, in θ and in the loss
    assert np.max(np.abs(_theta(default) - _theta(exact))) < 10 * 1e-6
    assert np.max(np.abs(default.loss - exact.loss)) < 10 * 1e-6 * exact.loss[0]
    s = default.stats
    assert s["rejected_steps"] <= 0.2 * s["steps"]
    assert s["max_switch_residual"] < 1e-12  # each located switch has z = 0 up to rounding
    assert s["max_pattern_mismatch"] == 0  # no missed switch at any save
    assert s["certificate"]["ok"]
    assert np.all(default.observables["switches"][1:] >= default.observables["switches"][:-1])


@pytest.mark.e2e  # a second event-loop program (the max norm): ~30 s cold
def test_max_error_norm_meets_the_tolerance_in_every_parameter(crossing):
    """`error_norm='max'` controls the largest scaled local error component: the run stays
    within 10 × rtol of the tight reference in every parameter, records its norm, and
    differs from the RMS-controlled run (another step sequence)."""
    problem, exact = crossing
    rms = simulate_nonsmooth(problem(), t1=5.0, n_save=6)
    mx = simulate_nonsmooth(problem(), t1=5.0, n_save=6, error_norm="max")
    assert mx.stats.ok and mx.config["error_norm"] == "max" and rms.config["error_norm"] == "rms"
    assert np.max(np.abs(_theta(mx) - _theta(exact))) < 10 * 1e-6
    assert mx.stats["steps"] != rms.stats["steps"]


def test_global_error_estimate_against_the_tight_reference(crossing):
    """`global_error=True` on the event flow: the companion run's difference is within a
    factor 3 of the true error (the rtol = 1e-11 reference) in θ at t1 and in the loss,
    across the run's crossings (measured: 1.04× and 1.07×); the tolerances are run-time values,
    so the run and its companion reuse the reference's compiled loop (an rtol sweep of
    the event flow compiles once)."""
    from flows._nonsmooth import _api

    problem, exact = crossing
    programs = set(_api._CACHE)
    tr = simulate_nonsmooth(problem(), t1=5.0, n_save=6, rtol=1e-5, atol=1e-8, global_error=True)
    ge = tr.global_error
    assert ge is not None and not ge.missing and tr.stats["crossings"] >= 10
    assert ge.companion is not None and ge.companion.config["rtol"] == pytest.approx(1e-6)
    true_theta = max(np.max(np.abs(tr.params[k] - exact.params[k])) for k in tr.params)
    assert 1 / 3 <= max(ge.max_param(k) for k in tr.params) / true_theta <= 3
    assert 1 / 3 <= ge.max("loss") / np.max(np.abs(tr.loss - exact.loss)) <= 3
    assert tr.config["global_error"]["max"]["loss"] == ge.max("loss")
    assert set(_api._CACHE) == programs  # no compilation for other tolerances


def test_crossing_flow_is_the_smoothing_limit(crossing):
    """σ_ε → σ: the smooth flows converge to the event flow, error ∝ ε."""
    problem, exact = crossing
    errs = []
    for eps in (1e-2, 1e-3, 1e-4):
        tr = flows.simulate(problem(eps), t1=5.0, n_save=6, rtol=1e-10, atol=1e-13)
        errs.append(np.max(np.abs(_theta(tr) - _theta(exact))))
    assert errs[0] > 5 * errs[1] > 25 * errs[2]  # first order in ε (measured ≈ 17× per decade)
    assert errs[2] < 1e-4


@pytest.mark.e2e  # smoothed flows by Kvaerno5 at several ε: 50–60 s cold
def test_sliding_is_the_smoothing_limit():
    """Outlier data: u-neurons slide on the outlier's kink (Filippov); the smoothed flows,
    integrated by Kvaerno5 through the stiff layer around the kink, converge to it."""
    data = antipodal_with_outlier(20, 2, outlier=np.asarray((-1.0, 3.0)))

    def problem(eps=0.0):
        model = LeakyReLUNet(k=3, d=2, slope=0.1, init_scale=1e-4, smoothing=eps)
        return flows.make_problem(model, data.train, key=0, loss_fn=logistic)

    exact = simulate_nonsmooth(
        problem(), t1=12.0, n_save=13, rtol=1e-10, atol=1e-13, save_params="all"
    )
    o = exact.observables
    assert exact.stats["sliding_entries"] >= 1 and np.max(o["sliding_pairs"]) >= 1
    # while sliding, the pairs stay on their kink: z = u·x_out ≈ 0 at those saves
    x_out = np.asarray(data.train.x)[-1]
    sliding_saves = np.nonzero(o["sliding_pairs"] > 0)[0]
    u = exact.params["u"][sliding_saves]  # (saves, k, d)
    cos = np.abs(u @ x_out) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(x_out))
    assert np.sort(cos, axis=1)[:, : int(o["sliding_pairs"].max())].max() < 1e-8
    errs = []
    for eps in (1e-3, 1e-4):
        tr = flows.simulate(
            problem(eps), t1=12.0, n_save=13, rtol=1e-9, atol=1e-12, solver="kvaerno5"
        )
        errs.append(np.max(np.abs(_theta(tr) - _theta(exact))))
    assert errs[0] > 5 * errs[1]  # measured ≈ 8×
    assert errs[1] < 5e-4
    assert exact.stats["certificate"]["ok"]


class HardTanhNet(AbstractModel):
    """Σ_j a_j σ(w_j·x) with a two-kink activation (kinks −1 and 1): tests K > 1 kinks."""

    m: int = 3

    @property
    def activation_kinks(self):
        return PiecewiseLinear(kinks=(-1.0, 1.0), slopes=(0.1, 1.0, 0.2), value=-1.0)

    def init(self, key):
        k1, k2 = jax.random.split(key)
        return {
            "w": 2.0 * jax.random.normal(k1, (self.m, 1)),
            "a": jax.random.normal(k2, (self.m,)),
        }

    def forward(self, params, x, act):
        return act("h", x @ params["w"].T) @ params["a"]

    def __call__(self, params, x):
        return self.forward(params, x, lambda name, z: self.activation_kinks(z))

    def describe(self):
        return {"family": "hard-tanh test net", "m": self.m}


@pytest.mark.e2e  # smoothed flows by Kvaerno5 at several ε: 50–60 s cold
def test_two_kink_activation_against_its_smoothing():
    x = np.linspace(-1.5, 1.5, 9)[:, None]
    data = flows.from_arrays(x, np.sin(2 * x[:, 0]))
    model = HardTanhNet()
    exact_problem = flows.make_problem(model, data, key=1)
    exact = simulate_nonsmooth(exact_problem, t1=3.0, n_save=4, rtol=1e-10, atol=1e-13)
    assert exact.stats["crossings"] >= 1
    pl = model.activation_kinks
    errs = []
    for eps in (1e-2, 1e-3):
        smooth = flows.models.FunctionModel.of(
            lambda p, x, e=eps: pl.smoothed(e)(x @ p["w"].T) @ p["a"], exact_problem.theta0
        )
        pb = flows.make_problem(smooth, data, theta0=exact_problem.theta0)
        tr = flows.simulate(pb, t1=3.0, n_save=4, rtol=1e-10, atol=1e-13)
        errs.append(np.max(np.abs(_theta(tr) - _theta(exact))))
    assert errs[0] > 5 * errs[1] and errs[1] < 1e-3


@pytest.mark.e2e
def test_deep_relu_against_tight_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 3))
    y = np.arange(12) % 3
    data = flows.from_arrays(x, y)
    model = DeepFCN(d=3, k=3, depth=3, width=4, activation="relu", delta=1.0)
    pb = flows.make_problem(model, data, key=0, loss_fn=flows.cross_entropy)
    exact = simulate_nonsmooth(pb, t1=4.0, n_save=5, rtol=1e-11, atol=1e-14)
    default = simulate_nonsmooth(pb, t1=4.0, n_save=5)
    assert exact.stats["crossings"] >= 1
    assert np.max(np.abs(_theta(default) - _theta(exact))) < 1e-5
    assert default.stats["max_pattern_mismatch"] == 0


def test_piecewise_linear_tables_and_smoothing():
    pl = PiecewiseLinear(kinks=(-1.0, 2.0), slopes=(0.5, 1.0, -1.0), value=3.0)
    z = jnp.linspace(-4, 5, 181)
    c, vc, a, s = pl.tables()
    np.testing.assert_allclose(vc, [3.0, 6.0])
    f = np.asarray(pl(z))
    # continuous, with the declared slopes
    np.testing.assert_allclose(np.asarray(pl(jnp.asarray([-1.0, 2.0]))), vc)
    np.testing.assert_allclose(np.diff(f)[:10] / np.diff(np.asarray(z))[:10], 0.5)
    for eps in (1e-1, 1e-2):
        bound = eps * np.log(2) * (0.5 + 2.0)
        assert np.max(np.abs(np.asarray(pl.smoothed(eps)(z)) - f)) <= bound + 1e-12
    lk = leaky_relu_kinks(0.1)
    np.testing.assert_allclose(np.asarray(lk(jnp.asarray([-2.0, 3.0]))), [-0.2, 3.0])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kinks": (), "slopes": (1.0,)},
        {"kinks": (1.0, 0.0), "slopes": (0.0, 1.0, 0.0)},
        {"kinks": (0.0,), "slopes": (1.0, 1.0)},
        {"kinks": (0.0,), "slopes": (0.0, float("nan"))},
    ],
)
def test_bad_activation_is_refused(kwargs):
    with pytest.raises(ConfigError):
        PiecewiseLinear(**kwargs)


def test_model_without_kinks_points_to_the_smoothed_path():
    data = flows.from_arrays(np.ones((3, 1)), np.ones(3))
    pb = flows.make_problem(
        lambda p, x: jax.nn.relu(x @ p["w"]).sum(-1), data, theta0={"w": jnp.ones((1, 2))}
    )
    with pytest.raises(ConfigError, match="smoothing"):
        simulate_nonsmooth(pb, t1=1.0)
    smooth = LeakyReLUNet(k=2, d=1, smoothing=1e-3)
    pb2 = flows.make_problem(smooth, flows.from_arrays(np.ones((3, 1)), np.ones(3)))
    with pytest.raises(ConfigError, match="declares no kink"):
        simulate_nonsmooth(pb2, t1=1.0)
    with pytest.raises(ConfigError):
        LeakyReLUNet(k=2, d=1, smoothing=-1.0)


def test_bad_settings_are_refused(crossing):
    problem, _ = crossing
    bad = ({"clock": "bogus"}, {"kink_tol": 0.0}, {"max_sliding": 0}, {"slots": 0}, {"rtol": 2.0})
    for kwargs in (*bad, {"error_norm": "l2"}):
        with pytest.raises(ConfigError):
            simulate_nonsmooth(problem(), t1=1.0, **kwargs)


@pytest.mark.e2e  # a third event-loop program (the storm settings): ~17 s cold
def test_event_storm_stops_loudly(crossing):
    """A storm (here: any 2 events within 1e9 time units) stops the run with the time
    reached and the pair involved — never an endless loop."""
    problem, _ = crossing
    with pytest.raises(SolverError, match=r"event storm.*layer") as info:
        simulate_nonsmooth(problem(), t1=5.0, storm_window=2, storm_span=1e9)
    assert 0 < info.value.t_reached < 5.0
    traj = simulate_nonsmooth(problem(), t1=5.0, storm_window=2, storm_span=1e9, throw=False)
    assert not traj.stats.ok and traj.times[-1] < 5.0


@pytest.mark.e2e
def test_loss_clock_reaches_late_times():
    data = symmetric_gaussians(30, 2, mean=3.0, seed=1)
    model = LeakyReLUNet(k=3, d=2, slope=0.1, init_scale=1.0)
    pb = flows.make_problem(model, data.train, key=0, loss_fn=logistic)
    ts = flows.log_save_times(1e6, 13, first=0.1)
    tr = simulate_nonsmooth(pb, t1=1e6, ts=ts, clock="loss")
    np.testing.assert_allclose(tr.times, ts)
    assert tr.stats.ok and tr.stats["certificate"]["ok"]
    # late phase of a separable logistic problem: L ~ 1/t
    assert tr.loss[-1] < 1e-4 and np.all(np.diff(tr.loss) <= 0)
    ref = simulate_nonsmooth(pb, t1=1e6, ts=ts, clock="loss", rtol=1e-10, atol=1e-13)
    # within 10 × rtol of the tight reference, relative to the loss (L ~ 1/t late, so the
    # loss at a save time is as accurate as t itself: with t's error relative to t, not to
    # each step's increment, this was 14 × rtol here; now 5.4 ×)
    np.testing.assert_allclose(tr.loss, ref.loss, rtol=10 * 1e-6)


# keep equinox imported for the AbstractModel subclass's field machinery
_ = eqx


@pytest.mark.e2e  # ~7 s cold
def test_simulate_warns_on_kinks_and_says_so_in_the_config():
    data = flows.from_arrays(np.array([[1.0], [-1.0]]), np.array([1.0, -1.0]))
    pb = flows.make_problem(LeakyReLUNet(k=1, d=1), data, loss_fn=logistic)
    with pytest.warns(UserWarning, match="simulate_nonsmooth"):
        tr = flows.simulate(pb, t1=0.1, n_save=2)
    assert "as if smooth" in tr.config["kinks"]
    smooth = LeakyReLUNet(k=1, d=1, smoothing=1e-2)
    tr = flows.simulate(flows.make_problem(smooth, data, loss_fn=logistic), t1=0.1, n_save=2)
    assert tr.config["kinks"] == "none"


def _stored_deep_relu_problem(t: str):
    """The bias-plateau deep ReLU net (depth 4, width 16, §4 data) from its state stored at
    time t (tests/data/deep_relu_theta_t{t}.npz): (problem, stored arrays)."""
    from pathlib import Path

    from flows.experiments.bias_plateau.data import (
        class_sum_cross_entropy,
        orthogonal_data,
        scale_to_unit_ball,
    )

    stored = np.load(Path(__file__).parent / "data" / f"deep_relu_theta_t{t}.npz")
    theta0 = {name: jnp.asarray(stored[name]) for name in stored.files}
    data = scale_to_unit_ball(orthogonal_data(k=4, n_per_class=10, d=16, sigma=0.1, seed=0))
    model = DeepFCN(d=16, k=4, depth=4, width=16, activation="relu", delta=1e-3)
    pb = flows.make_problem(model, data, theta0=theta0, loss_fn=class_sum_cross_entropy)
    return pb, stored


def _gd_distances(pb, traj, t1, etas):
    """max|θ_GD(t1) − θ_flow(t1)| for each learning rate."""
    names = sorted(traj.params)
    flat = np.concatenate([np.ravel(traj.param(n)) for n in names])
    out = []
    for eta in etas:
        gd = flows.gradient_descent(pb, learning_rate=eta, t1=t1, n_save=2)
        out.append(np.max(np.abs(np.concatenate([np.ravel(gd.param(n)) for n in names]) - flat)))
    return out


@pytest.mark.e2e
def test_deep_relu_multi_layer_sliding_exit_does_not_chatter():
    """The bias-plateau deep ReLU net (depth 4, width 16, §4 data) from its state at
    t = 10.86 (stored): within one time unit a layer-2 pair slides together with five
    others and leaves its box at the end it came from while its field there still points
    in. The decision used to cycle between that side and sliding (an event storm at
    t + 0.947); now it follows the pair's own Filippov condition, finds the equivalent
    control's root inside the box, and the run goes on. Oracle: gradient descent from the
    same θ converges to the flow as η → 0 (first order: the distance falls about 4× when η
    does), and the energy identity holds."""
    pb, stored = _stored_deep_relu_problem("10.86")
    t1 = 1.5
    traj = simulate_nonsmooth(pb, t1=t1, n_save=4, rtol=1e-8, atol=1e-11)
    assert traj.stats.ok and traj.times[-1] == pytest.approx(t1)
    assert traj.stats["sliding_entries"] >= 1 and traj.stats["max_pattern_mismatch"] == 0
    assert traj.stats["unresolved_events"] == 0
    dist = _gd_distances(pb, traj, t1, (4e-3, 1e-3))
    assert dist[1] < dist[0] / 2.5, dist
    cert = traj.stats.certificate
    assert cert is not None and cert["ok"], cert


@pytest.mark.e2e
def test_deep_relu_coupled_kinks_decided_as_one_complementarity_problem():
    """The same net at t = 58 (stored): fourteen pairs sit on kinks at once, in layers 1
    and 3, five of them on one sample whose layer-3 pair's ż is multilinear in its layer-1
    slopes. The one-pair-at-a-time decision cycles there (it stopped at once, 25 undecided
    events in a row); the box complementarity problem (λ in each box, ż ≤ 0 / = 0 / ≥ 0 at
    the left end / inside / right end) has an interior root — all fourteen slide — found
    by semismooth Newton. Oracles: gradient descent from the same θ converges to the flow at
    first order in η, the energy identity holds, no event is left undecided, and the
    sliding pairs stay on their kinks (z ≈ 0 at the end, measured independently here)."""
    pb, stored = _stored_deep_relu_problem("58")
    t1 = 0.5
    traj = simulate_nonsmooth(pb, t1=t1, n_save=3, rtol=1e-8, atol=1e-11, save_params="ends")
    assert traj.stats.ok and traj.times[-1] == pytest.approx(t1)
    assert traj.stats["unresolved_events"] == 0 and traj.stats["max_pattern_mismatch"] == 0
    assert traj.observables["sliding_pairs"][-1] >= 10
    cert = traj.stats.certificate
    assert cert is not None and cert["ok"], cert
    dist = _gd_distances(pb, traj, t1, (4e-3, 1e-3))
    assert dist[1] < dist[0] / 2.5, dist
    # the sample with coupled kinks: its layer-1 pairs that were on a kink at t = 58 are
    # still there (|z| tiny against the layer's scale), computed from θ(t1) by hand
    x = np.asarray(pb.x)
    z1_0 = x @ np.asarray(stored["V1"]).T
    z1 = x @ np.asarray(traj.param("V1")).T
    on0 = np.abs(z1_0[30]) <= 1e-9 * np.sqrt(np.mean(z1_0**2))
    assert on0.sum() >= 4
    assert np.max(np.abs(z1[30][on0])) <= 1e-7 * np.sqrt(np.mean(z1**2))


def _dead_sample_problem():
    """The bias-plateau test net (3 classes, 9 samples in d = 4, depth 3, width 6, δ =
    1e-3, output bias) whose flow kills whole samples in layer 1 by t ≈ 12."""
    from flows.experiments.bias_plateau.data import (
        class_sum_cross_entropy,
        orthogonal_data,
        scale_to_unit_ball,
    )

    data = scale_to_unit_ball(orthogonal_data(k=3, n_per_class=3, d=4, sigma=0.1, seed=0))
    model = DeepFCN(d=4, k=3, depth=3, width=6, activation="relu", delta=1e-3)
    return flows.make_problem(model, data, key=0, loss_fn=class_sum_cross_entropy)


@pytest.mark.e2e
def test_dead_sample_holds_the_next_layer_on_its_kinks():
    """When every layer-1 unit of a sample is off or held on its kink, the sample's
    layer-2 pre-activations are 0 with normals that are zero or combinations of the held
    units' (no hidden bias): they are no switching surfaces of their own while those slide.
    Treated as surfaces they made the sliding systems singular and, z ≈ 0 up to
    integration error, fired events without end: this run stopped at t = 12.53 with the
    step size collapsed (1227 events for 43 switches). Oracles: the run at rtol 1e-6 and at
    1e-9 take the same switches and agree in θ to a few rtol; gradient descent converges to
    it at first order in η; the energy identity holds; and the case is exercised — at the
    end some sample is dead in layer 1 with its layer-2 pre-activations exactly zero,
    computed here by hand. Independently of this module, the smoothed activation σ_ε
    integrated by Kvaerno5 converges to the same θ as ε → 0."""
    pb = _dead_sample_problem()
    kw = dict(t1=20.0, n_save=3, save_params="ends", max_sliding=32, max_candidates=32)
    loose = simulate_nonsmooth(pb, rtol=1e-6, atol=1e-9, **kw)
    tight = simulate_nonsmooth(pb, rtol=1e-9, atol=1e-12, **kw)
    for tr in (loose, tight):
        assert tr.stats.ok and tr.times[-1] == pytest.approx(20.0)
        assert tr.stats["unresolved_events"] == 0 and tr.stats["max_pattern_mismatch"] == 0
        assert tr.stats.certificate["ok"], tr.stats.certificate
    for key in ("crossings", "switches", "sliding_entries"):
        assert loose.stats[key] == tight.stats[key], key
    # no event without a switch storm (measured: 44 events, 61 switches)
    assert loose.stats["events"] <= loose.stats["switches"]
    a, b = _theta(loose), _theta(tight)
    assert np.linalg.norm(a - b) <= 10 * 1e-6 * np.linalg.norm(b)
    dist = _gd_distances(pb, tight, 20.0, (0.05, 0.0125))
    assert dist[1] < dist[0] / 3.5, dist
    # an independent path: the smoothed net σ_ε by an ordinary solver converges to it as
    # ε → 0 (measured at t = 20: 1.8e-2, 1.4e-3, 1.2e-4 at ε = 1e-3, 1e-4, 1e-5)
    sm = []
    for eps in (1e-3, 1e-4):
        smooth = dataclasses.replace(pb, model=dataclasses.replace(pb.model, smoothing=eps))
        tr = flows.simulate(
            smooth, t1=20.0, n_save=2, rtol=1e-9, atol=1e-12, solver="kvaerno5", save_params="ends"
        )
        sm.append(np.linalg.norm(_theta(tr) - b) / np.linalg.norm(b))
    assert sm[1] < sm[0] / 5 and sm[1] < 5e-3, sm
    # by hand: a sample dead in layer 1 (every z1 ≤ 0), its layer-2 pre-activations 0
    V1, V2 = np.asarray(tight.param("V1")), np.asarray(tight.param("V2"))
    z1 = np.asarray(pb.x) @ V1.T
    dead = np.all(z1 <= 1e-12 * np.sqrt(np.mean(z1**2)), axis=1)
    assert dead.any()
    z2 = np.maximum(z1, 0.0) @ V2.T
    assert np.max(np.abs(z2[dead])) <= 1e-12 * np.sqrt(np.mean(z2**2))


@pytest.mark.e2e
def test_slots_grow_from_where_the_run_ran_out(tmp_path):
    """Outlier data (App. J): the 10 u-neurons enter sliding on the outlier's kink one by
    one near t = 1.49. With fewer slots than that the loop stops at the event that needs
    more, before deciding it, and the run continues from there with twice the slots of
    the kind that ran out —
    the sliding pairs' slots (index, kink, λ, Jacobian) carried over: the same events,
    crossings, switches and sliding entries as a run compiled with enough slots from the
    start, and θ equal to far below rtol (each continuation repeats a step). Up to a bound
    it grows; at the bound the run stops and names it."""
    data = antipodal_with_outlier(60, 2, outlier=np.asarray((-1.0, 3.0)))
    model = LeakyReLUNet(k=10, d=2, slope=0.1, init_scale=1e-4)
    pb = flows.make_problem(model, data.train, key=0, loss_fn=logistic)
    kw = dict(t1=1e4, ts=flows.log_save_times(1e4, 9, first=0.1), clock="loss")
    full = simulate_nonsmooth(pb, slots=16, **kw)
    grown = simulate_nonsmooth(pb, slots=8, **kw)
    assert full.stats["slot_growth"] == []
    assert np.max(full.observables["sliding_pairs"]) == 10  # the case is exercised
    # sliding slots first (t = 1.49), candidate slots later (more than 8 pairs meet the
    # outlier's kink at once near t = 800)
    growth = grown.stats["slot_growth"]
    assert growth[0]["max_sliding"] == 16 and 1.4 < growth[0]["t"] < 1.6
    assert growth[-1] == {**growth[-1], "max_sliding": 16, "max_candidates": 16}
    assert grown.stats.ok and grown.stats.certificate["ok"]
    for key in ("events", "crossings", "switches", "sliding_entries"):
        assert grown.stats[key] == full.stats[key], key
    a, b = _theta(grown), _theta(full)
    assert np.max(np.abs(a - b)) <= 0.1 * 1e-6 * np.max(np.abs(b))
    assert grown.config["solver_settings"]["slots"] == 8
    # the growth is saved with the trajectory
    saved = xr.open_dataset(grown.save(tmp_path / "grown.nc"), engine="h5netcdf")
    assert json.loads(saved.attrs["stats"])["slot_growth"] == growth
    saved.close()
    with pytest.raises(SolverError, match="max_sliding = 8") as info:
        simulate_nonsmooth(pb, slots=8, max_sliding=8, **kw)  # the same compilation
    assert info.value.t_reached == pytest.approx(growth[0]["t"])
