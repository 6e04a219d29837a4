"""Theorem 1's error claim in the paper's words ("for all α ∈ [α₁, α₂], the error remains
at 1 − 1/k"), searched over α (`flows.experiments.bias_plateau.theorem1_words`), and the
run whose θ(0) is rescaled to meet the reconstructed hypothesis."""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows.experiments import bias_plateau as ex
from flows.experiments.bias_plateau.interpolation import (
    interpolate,
    logits_at,
    sample_logits_at,
)
from flows.experiments.bias_plateau.theorem1_words import (
    check_error_words,
    search_error,
    words_claim,
)
from flows.models.deep import DeepFCN
from reduced import interpolation as rint


def _run(model, data, th0, thT):
    curve = interpolate(model, data.x, data.y, th0, thT, n_alpha=5)
    return ex.DeepRun("constructed", model, data, None, curve, th0, thT, "exact")


def _theorem(model, thT, over):
    """Theorem 1's quantities of θ(T), with the interval set to `over` (the tests choose
    where the search looks; the theorem's own interval is tested in test_bias_plateau)."""
    th = rint.theorem1(thT["b"], [thT[n] for n in model.layer_names], model.depth, 1e-3)
    return dataclasses.replace(th, alpha_1=over[0], alpha_2=over[1])


def _dip_net(window=(0.1500, 0.1510), K=20.0):
    """k = 2, x = e_0, e_1, depth 3, diagonal layers. Class 0 has the bias b(T) = (1, 0)
    and wins sample 0 always; sample 1's class-1 logit is the cubic K(α − r1)(r2 − α) of
    the product of the interpolated layers (θ(0) ≠ 0), above the bias α exactly on
    `window`: there sample 1 is predicted right and the error is 0, elsewhere 1/2 = 1 − 1/k.
    r1, r2 solve K(α − r1)(r2 − α) − α = −K(α − w1)(α − w2)."""
    w1, w2 = window
    s, p = w1 + w2 + 1.0 / K, w1 * w2
    r1, r2 = (s - math.sqrt(s * s - 4 * p)) / 2, (s + math.sqrt(s * s - 4 * p)) / 2
    k1 = k2 = k3 = K ** (1 / 3)
    model = DeepFCN(d=2, k=2, depth=3, width=2, activation="identity", delta=1e-3)
    th0 = {
        "V1": jnp.diag(jnp.array([1.0, -k1 * r1])),
        "V2": jnp.diag(jnp.array([1.0, k2 * r2])),
        "V3": jnp.diag(jnp.array([1.0, k3])),
        "b": jnp.zeros(2),
    }
    thT = {
        "V1": jnp.diag(jnp.array([1.0, k1 * (1 - r1)])),
        "V2": jnp.diag(jnp.array([1.0, k2 * (r2 - 1)])),
        "V3": jnp.diag(jnp.array([1.0, k3])),
        "b": jnp.array([1.0, 0.0]),
    }
    data = flows.Dataset(x=np.eye(2), y=np.arange(2), name="dip")
    return model, data, th0, thT


def test_logits_at_matches_the_model_at_each_alpha():
    model, data, th0, thT = _dip_net()
    alphas = np.array([0.3, 0.0, 1.0, 0.15, 0.7])  # unsorted, not a power of two
    z = logits_at(model, data.x, th0, thT, alphas)
    assert z.shape == (5, 2, 2)
    for a, za in zip(alphas, z, strict=True):
        th = {n: (1 - a) * th0[n] + a * thT[n] for n in th0}
        np.testing.assert_allclose(za, np.asarray(model(th, jnp.asarray(data.x))), rtol=1e-14)
    pairs = sample_logits_at(model, data.x[[1, 0, 1]], th0, thT, alphas[:3])
    np.testing.assert_allclose(pairs, z[[0, 1, 2], [1, 0, 1]], rtol=1e-14)


def test_narrow_dip_missed_by_the_grid_fails_the_words_row():
    window = (0.1500, 0.1510)
    model, data, th0, thT = _dip_net(window)
    over = (0.01, 0.3)
    th = _theorem(model, thT, over)
    assert th.k_star == 0
    # the closed form: error 0 inside the window, 1/2 = 1 − 1/k outside it
    probe = interpolate(model, data.x, data.y, th0, thT, alphas=[0.149, 0.1505, 0.152])
    assert list(probe.error) == [0.5, 0.0, 0.5]
    # a grid-sampled version would say "holds": the 25- and 50-point grids miss the dip
    for n in (25, 50):
        grid = interpolate(model, data.x, data.y, th0, thT, alphas=np.linspace(*over, n))
        assert np.all(grid.error == 0.5)
    run = _run(model, data, th0, thT)
    for n in (25, 50):
        row = check_error_words(run, th, grid=n)
        assert row.claim == words_claim("constructed")
        assert row.verdict == "fails"
        assert row.values["grid_off"] == 0 and row.values["n_off"] >= 1
        assert window[0] <= row.values["worst_alpha"] <= window[1]
        assert row.values["error_at_worst"] == 0.0  # one sample (of 2) off: a failure
        assert row.values["dips"] >= 1
    # both ends of the dip located to the resolution
    res = 1e-6 * (over[1] - over[0])
    s = search_error(model, data.x, data.y, th0, thT, over, grid=50, resolution=res)
    assert len(s.changes) == 2
    for (u, v), w in zip(s.changes, window, strict=True):
        assert u <= w <= v and v - u <= res
    assert s.reached <= res


def test_predictions_moving_between_wrong_classes_keep_the_words_row():
    """k = 3, θ(0) = 0: sample 2's signal goes to class 1, which overtakes the bias class 0
    at α = (1/(2c³))^{1/2}; both classes are wrong for it, so the error stays 2/3 while the
    prediction changes (the stronger reading, every sample predicted k*, fails)."""
    c = 1.0
    model = DeepFCN(d=3, k=3, depth=3, width=3, activation="identity", delta=1e-3)
    th0 = {n: jnp.zeros((3, 3)) for n in model.layer_names} | {"b": jnp.zeros(3)}
    p = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    thT = {"V1": c * jnp.eye(3), "V2": c * jnp.eye(3), "V3": c * p, "b": jnp.array([1.0, 0, 0])}
    data = flows.Dataset(x=np.eye(3), y=np.arange(3), name="swap")
    over = (0.01, 1.0)
    th = _theorem(model, thT, over)
    run = _run(model, data, th0, thT)
    row = check_error_words(run, th, grid=50)
    assert row.verdict == "holds", row.measured
    assert row.values["change_points"] == 1 and row.values["changes_keeping_error"] == 1
    assert row.values["min_fraction_k_star"] == pytest.approx(2 / 3)
    flip = math.sqrt(1 / (2 * c**3))
    assert abs(row.values["worst_alpha"] - flip) <= row.values["resolution"]
    assert ex.check_error_interval(run, th, interval=over).verdict == "fails"


def test_error_leaving_chance_is_located_where_the_closed_form_says():
    """The constructed net of test_bias_plateau (θ(0) = 0, V_i = c·I, b = (0, 0, gap)):
    samples 0 and 1 turn right at α* = (gap/c³)^{1/2}, the error drops from 2/3 to 0."""
    c, gap = 2.0, 1.0
    model = DeepFCN(d=3, k=3, depth=3, width=3, activation="identity", delta=1e-3)
    th0 = {n: jnp.zeros((3, 3)) for n in model.layer_names} | {"b": jnp.zeros(3)}
    thT = {n: c * jnp.eye(3) for n in model.layer_names} | {"b": jnp.array([0.0, 0.0, gap])}
    data = flows.Dataset(x=np.eye(3), y=np.arange(3), name="constructed")
    run = _run(model, data, th0, thT)
    a_star = math.sqrt(gap / c**3)
    th = rint.theorem1(thT["b"], [thT[n] for n in model.layer_names], 3, 1e-3)
    assert check_error_words(run, th).verdict == "holds"  # the theorem's own interval
    wide = dataclasses.replace(th, alpha_2=0.8)
    row = check_error_words(run, wide, resolution=1e-9)
    assert row.verdict == "fails"
    assert row.values["error_at_worst"] == 0.0
    assert 0 <= row.values["worst_alpha"] - a_star <= 1e-9
    assert row.values["change_points"] == 1


def test_words_row_not_applicable_on_the_papers_hypotheses():
    model, data, th0, thT = _dip_net()
    run = _run(model, data, th0, thT)
    th = _theorem(model, thT, (0.01, 0.3))
    na = check_error_words(run, th, not_applicable="classes are not balanced")
    assert na.verdict == "not applicable"
    empty = check_error_words(run, dataclasses.replace(th, alpha_1=0.4))
    assert empty.verdict == "not applicable" and "empty" in empty.reason
    with pytest.raises(flows.ConfigError, match="resolution"):
        search_error(model, data.x, data.y, th0, thT, (0.01, 0.3), resolution=1e-30)


def test_rescaled_run_meets_the_hypothesis_and_is_judged(monkeypatch):
    """The rescaled run's θ(0) is the main run's times c per layer, with 2·max|f^(0)| =
    rescaled_spread·δ, and its literal row is judged (not outside hypothesis)."""
    from flows.experiments.bias_plateau import theorem1_runs as tr

    cfg = ex.Config(deep_t1=40.0, digits=False, relu_run=False, n_alpha=20)
    data = ex.synthetic_deep_data(cfg, cfg.seed)
    model = DeepFCN(d=data.d, k=cfg.k, depth=cfg.deep_depth, width=cfg.deep_width,
                    activation="identity", delta=cfg.deep_delta)  # fmt: skip
    main = ex.train_deep(model, data, seed=cfg.seed, t1=cfg.deep_t1, method="flow", cfg=cfg)
    run = tr.rescaled_run(cfg, model, data, main)
    assert run.model.delta == cfg.deep_delta and tr.RESCALED_LABEL in run.label
    assert ex.init_spread(run) == pytest.approx(cfg.rescaled_spread * cfg.deep_delta, rel=1e-9)
    assert ex.init_spread(main) > cfg.deep_delta  # the Kaiming × δ^{1/r} init does not meet it
    ratios = [
        float(np.linalg.norm(run.theta_0[n]) / np.linalg.norm(main.theta_0[n]))
        for n in model.layer_names
    ]
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-12)  # one factor c on every layer
    assert ratios[0] < 1
    assert run.companion is not None and run.companion.model.delta == cfg.deep_delta
    rows = ex.theorem1_checks(run, cfg)
    literal = rows[0]
    assert literal.hypotheses[0]["holds"] is True
    assert literal.verdict in ("holds", "fails")
    words = next(r for r in rows if r.claim == words_claim(run.label))
    assert words.verdict in ("holds", "fails")
    assert "does not decide this row" in words.reason
