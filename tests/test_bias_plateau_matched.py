"""Bias-plateau trends at matched loss: GD's stop condition, the matched-loss event, the
interpolation from 0, the one-sided loss plateau, the per-layer init scale and the trend
verdicts."""

import dataclasses
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows import gradient_descent
from flows.experiments import bias_plateau as ex
from flows.experiments.bias_plateau import sweep as bps
from flows.experiments.bias_plateau.interpolation import (
    InterpolationCurve,
    interpolate,
    plateau,
    zeros_like_params,
)
from flows.experiments.bias_plateau.observables import matched_loss, min_margin
from flows.models.deep import DeepFCN
from reduced import interpolation as rint


def _problem(depth=3, delta=1e-2, activation="relu", seed=0, bias=True):
    data = ex.scale_to_unit_ball(ex.orthogonal_data(k=3, n_per_class=3, d=4, sigma=0.1, seed=0))
    model = DeepFCN(d=4, k=3, depth=depth, width=5, activation=activation, bias=bias, delta=delta)
    return flows.make_problem(model, data, key=seed, loss_fn=ex.class_sum_cross_entropy)


def _manual_gd(problem, lr, n):
    th = problem.theta0
    out = [th]
    for _ in range(n):
        g = problem.grad(th)
        th = jax.tree_util.tree_map(lambda p, gi: p - lr * gi, th, g)
        out.append(th)
    return out


@pytest.mark.e2e
def test_gd_stop_fires_at_the_first_step_at_or_below_zero():
    """Oracle: plain GD steps by hand; the stop must end the run at the first step whose
    stop value is ≤ 0, with θ there as the last stored parameters."""
    pb = _problem()
    lr = 0.5
    path = _manual_gd(pb, lr, 400)
    losses = np.array([float(pb.loss(th)) for th in path])
    eps = float(losses[0] + 0.4 * (losses[-1] - losses[0]))  # reached mid-run
    first = int(np.argmax(losses <= eps))
    assert 0 < first < 400
    tr = gradient_descent(pb, learning_rate=lr, t1=400 * lr, n_save=9, stop=flows.stop_at_loss(eps))
    st = tr.stats
    assert isinstance(st, flows.SolveStats)
    assert st.stopped_at == pytest.approx(first * lr, rel=1e-12)
    assert st.result == flows.Result.event_stopped
    assert tr.times[-1] == pytest.approx(first * lr, rel=1e-12)
    assert np.all(np.diff(tr.times) > 0) and st.steps == first
    for n in tr.params:
        np.testing.assert_allclose(tr.param(n, -1), path[first][n], rtol=1e-10, atol=1e-13)
    assert float(tr.observables["loss"][-1]) <= eps < float(losses[first - 1])


def test_gd_stop_that_never_fires_changes_nothing():
    pb = _problem()

    def gd(stop=None):
        return gradient_descent(
            pb, learning_rate=0.3, t1=30.0, n_save=7, save_params="all", stop=stop
        )

    plain = gd()
    never = gd(lambda prob, th, t: jnp.asarray(1.0))
    assert isinstance(never.stats, flows.SolveStats) and never.stats.stopped_at is None
    assert never.stats.stop_supported and np.isnan(never.stats["stopped_at"])
    np.testing.assert_array_equal(plain.times, never.times)
    for n in plain.params:
        np.testing.assert_allclose(plain.params[n], never.params[n], rtol=1e-13, atol=1e-15)
    # a stop already ≤ 0 at t = 0 does not fire (downcrossing only, as `simulate`)
    at0 = gd(lambda prob, th, t: jnp.asarray(-1.0))
    assert np.isnan(at0.stats["stopped_at"]) and at0.times[-1] == plain.times[-1]


def test_matched_loss_needs_low_loss_and_zero_error():
    y = jnp.array([0, 1, 2])

    def value(z, ce=0.1):
        prob = types.SimpleNamespace(model=lambda th, x: th, x=None, y=y)
        return float(matched_loss(ce)(prob, jnp.asarray(z), 0.0))

    good = 10.0 * np.eye(3)  # CE ≈ 9e-5, every sample right
    assert value(good) < 0
    low_ce_one_wrong = good.copy()
    low_ce_one_wrong[2] = [0.0, 0.5, 0.0]  # sample 2 predicted as 1: margin −0.5
    z = jnp.asarray(low_ce_one_wrong)
    assert float(min_margin(z, y)) == pytest.approx(-0.5)
    assert value(low_ce_one_wrong, ce=5.0) == pytest.approx(0.5)  # CE ≤ 5, but an error
    assert value(0.1 * np.eye(3)) > 0  # right everywhere, CE ≈ 1.0 > 0.1
    ce = float(flows.cross_entropy(jnp.asarray(0.1 * np.eye(3)), y))
    assert value(0.1 * np.eye(3)) == pytest.approx(ce - 0.1)


def test_interpolation_from_zero_is_the_small_delta_form():
    """θ^[α] = αθ(T): logits exactly α^r·signal(θ(T)) + α·b(T) for ReLU (positively
    homogeneous), the form `reduced.interpolation.small_delta_logits` writes."""
    pb = _problem(depth=4, activation="relu")
    model = pb.model
    assert isinstance(model, DeepFCN)
    key = jax.random.key(5)
    thT: dict = {n: 1.5 * v for n, v in model.init(key).items()}
    thT["b"] = jnp.array([0.3, -0.1, 0.7])
    alphas = np.array([0.0, 0.2, 0.55, 1.0])
    c = interpolate(model, pb.x, pb.y, zeros_like_params(thT), thT, alphas=alphas)
    signal = np.asarray(model.features(thT, pb.x))
    for a, loss, err in zip(alphas, c.loss, c.error, strict=True):
        z = rint.small_delta_logits(a, signal, np.asarray(thT["b"]), 4)
        assert loss == pytest.approx(float(flows.cross_entropy(jnp.asarray(z), pb.y)), rel=1e-12)
        assert err == np.mean(np.argmax(z, 1) != np.asarray(pb.y))


def test_one_sided_loss_plateau():
    k = 4
    lk = math.log(k)
    c = InterpolationCurve(
        alphas=np.linspace(0, 1, 6),
        loss=np.array([lk, lk + 0.5, lk + 0.2, lk - 0.05, lk - 0.5, 0.1]),
        error=np.zeros(6),
        pred_fraction=np.zeros((6, k)),
        k=k,
    )
    one = plateau(c, kind="loss-floor", tol=0.1)
    assert (one.start, one.n_points) == (0.0, 4) and one.end == pytest.approx(0.6)
    two = plateau(c, kind="loss", tol=0.1)  # |γ − log k| ≤ tol: broken by the rise
    assert two.n_points == 1
    with pytest.raises(flows.ConfigError, match="loss-floor"):
        plateau(c, kind="nope")


def test_per_layer_init_scale():
    cfg = ex.default_config()
    data = ex.synthetic_deep_data(cfg, 0)
    for depth in (3, 6):
        m = ex.trend_model(cfg, data, depth, 0.3, per_layer=True)
        assert m.delta == pytest.approx(0.3**depth, rel=1e-14)
        th = m.init(jax.random.key(0))
        ref = dataclasses.replace(m, delta=1.0).init(jax.random.key(0))
        for n in m.layer_names:  # every layer × s, whatever the depth
            np.testing.assert_allclose(th[n], 0.3 * np.asarray(ref[n]), rtol=1e-12)
        out = ex.trend_model(cfg, data, depth, 1e-3, per_layer=False)
        th = out.init(jax.random.key(0))
        for n in out.layer_names:  # the paper's convention: every layer × δ^(1/r)
            np.testing.assert_allclose(th[n], 1e-3 ** (1 / depth) * np.asarray(ref[n]), rtol=1e-12)
    with pytest.raises(flows.ConfigError, match="trend_layer_scale"):
        ex.Config(trend_layer_scale=1.5)


def test_train_deep_shares_one_compile_across_delta_without_changing_the_run():
    """train_deep solves with δ = 1 in the static model (θ(0) drawn at the real δ): the
    trajectory equals a plain GD run of the real model."""
    cfg = dataclasses.replace(ex.default_config(), k=3, d=4, deep_n_per_class=3, sweep_k=(3,))
    data = ex.synthetic_deep_data(cfg, 1)
    model = DeepFCN(d=4, k=3, depth=3, width=5, activation="relu", delta=0.05)
    run = ex.train_deep(model, data, seed=1, t1=5.0, method="gd", cfg=cfg)
    pb = flows.make_problem(model, data, key=1, loss_fn=ex.class_sum_cross_entropy)
    ref = gradient_descent(pb, learning_rate=cfg.gd_lr, t1=5.0, n_save=201)
    np.testing.assert_allclose(run.traj.observables["loss"], ref.observables["loss"], rtol=1e-12)
    for n in model.layer_names:
        np.testing.assert_allclose(run.theta_0[n], pb.theta0[n], rtol=0, atol=0)
    assert run.traj.config["problem"]["model"]["delta"] == 0.05
    assert run.model.delta == 0.05


def _row(family, x, seed, length, *, excluded="", gap=""):
    key = {"depth": "depth", "depth-layer": "depth", "delta": "delta", "bias": "bias"}[family]
    return {
        "family": family,
        key: x,
        "seed": seed,
        "length": length,
        "excluded": excluded,
        "gap_excluded": gap,
    }


def test_trend_stats_count_exclusions():
    rows = [_row("depth", 3, s, 0.4 + 0.01 * s) for s in range(3)]
    rows += [_row("depth", 4, 0, 0.6), _row("depth", 4, 1, 0.1, gap="tiny gap")]
    rows += [_row("depth", 4, 2, 0.0, excluded="not at the matched loss")]
    stats, excl = ex.trend_stats(rows, "depth", "depth", "length", gap=True)
    assert [s[3] for s in stats] == [3, 1] and stats[1][1] == 0.6
    assert [(x, s) for x, s, _ in excl] == [(4, 1), (4, 2)]
    stats, excl = ex.trend_stats(rows, "depth", "depth", "length", gap=False)
    assert [s[3] for s in stats] == [3, 2] and len(excl) == 1  # the gap counts only if asked


def test_trend_verdicts_and_finite_size_trend():
    up = [(3, 0.40, 0.02, 6), (4, 0.45, 0.03, 6), (5, 0.55, 0.02, 6)]
    c = ex.check_trend(up, increasing=True, tol=0.05, claim="c", name="r")
    assert c.verdict == "holds" and c.trend is not None
    assert c.trend.x == (3.0, 4.0, 5.0) and c.trend.y_err == (0.02, 0.03, 0.02)
    # the tolerance is a constant the toolkit chose: the verdict holds for tol in
    # [0, change) (no step goes the wrong way; the end-to-end change is 0.15)
    assert c.critical == ("holds for trend_tol in [0, 0.15); fails outside",)
    assert ex.check_trend(up, increasing=True, tol=0.16, claim="c", name="r").verdict == "fails"
    # the same data claimed decreasing: resolved the wrong way
    assert ex.check_trend(up, increasing=False, tol=0.05, claim="c", name="r").verdict == "fails"
    # the change within the seed spread: the sign is not resolved
    noisy = [(3, 0.40, 0.10, 6), (6, 0.47, 0.10, 6)]
    c = ex.check_trend(noisy, increasing=True, tol=0.05, claim="c", name="r")
    assert c.verdict == "undecided (finite size)" and "not resolved" in c.reason
    # a step the wrong way by more than tol fails even when the ends are resolved
    zig = [(3, 0.30, 0.01, 6), (4, 0.60, 0.01, 6), (5, 0.45, 0.01, 6), (6, 0.62, 0.01, 6)]
    c = ex.check_trend(zig, increasing=True, tol=0.05, claim="c", name="r")
    assert c.verdict == "fails" and c.critical == (
        "holds for trend_tol in [0.15, 0.32); fails outside",
    )
    assert ex.check_trend(zig, increasing=True, tol=0.2, claim="c", name="r").verdict == "holds"
    # one run at a value: no spread
    few = [(3, 0.4, math.nan, 1), (6, 0.6, 0.01, 5)]
    c = ex.check_trend(few, increasing=True, tol=0.05, claim="c", name="r")
    assert c.verdict == "not applicable" and "fewer than 2" in c.reason


def test_trend_point_stops_at_matched_loss():
    cfg = dataclasses.replace(ex.default_config(), deep_width=8, deep_n_per_class=4)
    row = ex.trend_point(cfg, 3, 1e-2, 1)
    assert row["reached"] and row["stopped"] and not row["excluded"]
    assert row["mean_ce"] <= cfg.trend_ce and row["final_error"] == 0.0
    assert row["t_stop"] < cfg.trend_t_max
    for key in ("length", "length_zero", "loss_length", "loss_length_zero"):
        assert 0.0 <= row[key] <= 1.0
    # a horizon too short for the matched loss: excluded, with the reason
    short = ex.trend_point(dataclasses.replace(cfg, trend_t_max=1.0), 3, 1e-2, 1)
    assert not short.get("reached") and "not at the matched loss" in short["excluded"]


def test_sweep_config_init_scale_and_stop():
    c = bps.PlateauSweepConfig()
    assert "stop_ce" not in c.to_dict() and "init_scale" not in c.to_dict()
    c = bps.PlateauSweepConfig(stop_ce=0.1, init_scale="layer")
    assert c.to_dict()["stop_ce"] == 0.1 and c.to_dict()["init_scale"] == "layer"
    with pytest.raises(flows.ConfigError, match="--init-scale"):
        bps.PlateauSweepConfig(init_scale="per-layer")
    with pytest.raises(flows.ConfigError, match="--stop-ce"):
        bps.PlateauSweepConfig(stop_ce=0.0)
