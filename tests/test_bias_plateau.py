"""Bias-plateau paper: models, data, objective, observables, interpolation, Theorem 1 and
the experiment's checks."""

import dataclasses
import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows.claims import VERDICTS
from flows.experiments import bias_plateau as bp
from flows.experiments import bias_plateau as ex
from flows.experiments.bias_plateau.data import (
    check_labels,
    class_sum_cross_entropy,
    digits_data,
    is_balanced,
    orthogonal_data,
    scale_to_unit_ball,
)
from flows.experiments.bias_plateau.interpolation import alpha_grid, interpolate, plateau
from flows.experiments.bias_plateau.observables import (
    classification_observables,
    homogeneous_observables,
)
from flows.models.deep import DeepFCN
from flows.models.homogeneous import Homogeneous
from reduced import bias_plateau as rbp
from reduced import interpolation as rint


def _fd_check(problem, key, eps=1e-6, n_dirs=3):
    """Directional derivatives of the loss: autodiff vs central finite differences."""
    theta = problem.theta0
    g = problem.grad(theta)
    leaves, tree = jax.tree_util.tree_flatten(theta)
    for i in range(n_dirs):
        keys = jax.random.split(jax.random.fold_in(key, i), len(leaves))
        v = jax.tree_util.tree_unflatten(
            tree, [jax.random.normal(k_, x.shape) for k_, x in zip(keys, leaves, strict=True)]
        )
        plus = jax.tree_util.tree_map(lambda p, d: p + eps * d, theta, v)
        minus = jax.tree_util.tree_map(lambda p, d: p - eps * d, theta, v)
        fd = (problem.loss(plus) - problem.loss(minus)) / (2 * eps)
        ad = sum(
            jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(v), strict=True)
        )
        np.testing.assert_allclose(float(ad), float(fd), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("r", [3, 4])
def test_homogeneous_gradient_matches_finite_differences(r):
    data = orthogonal_data(k=3, n_per_class=4, d=5, sigma=0.3, seed=1)
    model = Homogeneous(k=3, d=5, r=r, delta=0.7)
    problem = flows.make_problem(model, data, key=2, loss_fn=class_sum_cross_entropy)
    # move off b = 0 so every term of the gradient is exercised
    th = {"W": problem.theta0["W"], "b": jnp.array([0.3, -0.2, 0.1])}
    _fd_check(dataclasses.replace(problem, theta0=th), jax.random.key(0))


@pytest.mark.parametrize("activation", ["identity", "relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_deep_gradient_matches_finite_differences(activation, bias):
    data = scale_to_unit_ball(orthogonal_data(k=3, n_per_class=3, d=4, sigma=0.3, seed=0))
    model = DeepFCN(d=4, k=3, depth=3, width=5, activation=activation, bias=bias, delta=0.5)
    problem = flows.make_problem(model, data, key=3, loss_fn=class_sum_cross_entropy)
    _fd_check(problem, jax.random.key(1))


def test_deep_init_scale_and_shapes():
    model = DeepFCN(d=64, k=10, depth=4, width=(32, 24, 16), activation="relu", delta=1e-3)
    th = model.init(jax.random.key(0))
    assert th["V1"].shape == (32, 64) and th["V4"].shape == (10, 16) and th["b"].shape == (10,)
    assert np.all(np.asarray(th["b"]) == 0)
    # He normal scaled by δ^{1/r}: std of V1 = δ^{1/4}·√2/√64
    np.testing.assert_allclose(
        np.std(np.asarray(th["V1"])), 1e-3**0.25 * math.sqrt(2 / 64), rtol=0.1
    )
    assert set(model.param_dims()) == {"V1", "V2", "V3", "V4", "b"}


def test_bias_derivative_is_one_minus_mean_softmax():
    """ḃ_i = 1 − (k/N) Σ_x u_i(x) (§4) against autodiff of (k/N)·Σ CE."""
    data = orthogonal_data(k=4, n_per_class=3, d=6, sigma=0.2, seed=0)
    model = Homogeneous(k=4, d=6, r=3, delta=0.9)
    problem = flows.make_problem(model, data, key=0, loss_fn=class_sum_cross_entropy)
    th = {"W": problem.theta0["W"], "b": jnp.array([0.5, -0.1, 0.2, 0.0])}
    b_dot = -problem.grad(th)["b"]
    u = jax.nn.softmax(model(th, problem.x), axis=-1)
    k, n = 4, problem.x.shape[0]
    np.testing.assert_allclose(np.asarray(b_dot), 1 - k / n * np.asarray(u.sum(0)), atol=1e-13)


def test_reduced_ode_matches_early_closed_form():
    """The tensor-power ODE against w(t) = (w0^{2−r} − r(r−2)(1−1/k)t)^{−1/(r−2)} early on."""
    r, k = 4, 4
    w0 = jnp.array([0.05, 0.04, 0.03, 0.02])
    t_star = float(rbp.blowup_times(w0, r, k)[0])
    ts = jnp.linspace(0.0, 0.8 * t_star, 9)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rbp.tensor_power_vector_field),
        diffrax.Dopri8(),
        0.0,
        float(ts[-1]),
        None,
        (w0, jnp.zeros(k)),
        args=(r, k),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-14),
    )
    closed = jnp.stack([rbp.tensor_power_early_closed_form(w0, t, r, k) for t in ts])
    # relative error O(w^r): u_i(e_i) = 1/k + O(w^r) in the early phase
    np.testing.assert_allclose(np.asarray(sol.ys[0]), np.asarray(closed), rtol=2e-5)
    # and the reduced model is what the full flow reduces to at σ = 0 (ex.reduced_trajectory)
    w_red, b_red = ex.reduced_trajectory(w0, r, k, ts)
    np.testing.assert_allclose(w_red, np.asarray(sol.ys[0]), rtol=1e-8)


def test_interpolation_endpoints_equal_losses():
    data = digits_data("train", n_per_class=3)
    model = DeepFCN(d=64, k=10, depth=3, width=8, activation="relu", delta=0.1)
    th0 = model.init(jax.random.key(0))
    thT = jax.tree_util.tree_map(lambda v: v + 0.5, model.init(jax.random.key(1)))
    c = interpolate(model, data.x, data.y, th0, thT, n_alpha=7)
    for a, th in ((0, th0), (-1, thT)):
        logits = model(th, jnp.asarray(data.x))
        np.testing.assert_allclose(
            c.loss[a], float(flows.cross_entropy(logits, jnp.asarray(data.y))), rtol=1e-13
        )
        err = float(np.mean(np.argmax(np.asarray(logits), 1) != data.y))
        assert c.error[a] == err
    assert c.alphas.shape == (7,) and c.pred_fraction.shape == (7, 10)


def _constructed(c=2.0, gap=1.0):
    """A depth-3 linear net with θ(0) = 0 and θ(T): V_i = c·I, b = (0, 0, gap) on x = e_i.

    f^[α](e_i) = α³c³ e_i + α b: class 2 wins on every input iff α² < gap/c³, so the
    plateau ends exactly at α* = (gap/c³)^{1/2}; Theorem 1's α₂ = (gap/(2c³))^{1/2}.
    """
    model = DeepFCN(d=3, k=3, depth=3, width=3, activation="identity", delta=1e-3)
    th0 = {n: jnp.zeros((3, 3)) for n in model.layer_names} | {"b": jnp.zeros(3)}
    thT = {n: c * jnp.eye(3) for n in model.layer_names} | {"b": jnp.array([0.0, 0.0, gap])}
    data = flows.Dataset(x=np.eye(3), y=np.arange(3), name="constructed")
    return model, data, th0, thT


def test_theorem1_on_constructed_net():
    c, gap = 2.0, 1.0
    model, data, th0, thT = _constructed(c, gap)
    th = rint.theorem1(thT["b"], [thT[n] for n in model.layer_names], 3, 1e-3)
    assert th.k_star == 2 and th.delta_min == gap and th.delta_max == gap
    assert th.v_max == pytest.approx(c)
    assert th.alpha_1 == pytest.approx(1e-3 / gap)
    assert th.alpha_2 == pytest.approx(math.sqrt(gap / (2 * c**3)))
    a_star = math.sqrt(gap / c**3)
    curve = interpolate(model, data.x, data.y, th0, thT, n_alpha=201)
    pl = plateau(curve, kind="error", tol=1e-9)
    assert pl.start == 0 and abs(pl.end - a_star) <= 1 / 200
    run = ex.DeepRun("constructed", model, data, None, curve, th0, thT, "exact")
    assert ex.check_error_interval(run, th).verdict == "holds"
    # a deliberately wrong prediction: the plateau reaching 1.5 α* — must fail
    bad = ex.check_error_interval(run, th, interval=(th.alpha_1, 1.5 * a_star))
    assert bad.verdict == "fails"
    # loss bound: log k − 2e(αV_max)^r ≤ γ_loss, for every α ≥ α₁: searched, not sampled
    bound = ex.check_loss_bound(run, th)
    # no companion solve here: the kit leaves it undecided and records the value's verdict
    assert bound.values.get("verdict_on_value", bound.verdict) == "holds"
    assert bound.kind == "universal"
    assert th.alpha_1 <= bound.values["worst_α"] <= 1.0
    assert bound.values["evaluations"] > len(curve.alphas)  # refined past the grid
    assert bound.margin == pytest.approx(
        float(
            interpolate(model, data.x, data.y, th0, thT, alphas=[bound.values["worst_α"]]).loss[0]
        )
        - float(th.loss_bound([bound.values["worst_α"]], curve.k)[0])
    )
    # no bias gap: Theorem 1 gives an empty interval
    flat = rint.theorem1(np.zeros(3), [thT[n] for n in model.layer_names], 3, 1e-3)
    assert not flat.nonempty


def test_plateau_lengths():
    c = bp.interpolation.InterpolationCurve(
        alphas=np.linspace(0, 1, 5),
        loss=np.array([math.log(4), math.log(4) + 0.01, 1.0, 0.5, 0.1]),
        error=np.array([0.75, 0.75, 0.74, 0.2, 0.0]),
        pred_fraction=np.zeros((5, 4)),
        k=4,
    )
    p = plateau(c, kind="error", tol=0.02)
    assert (p.start, p.end, p.n_points) == (0.0, 0.5, 3)
    assert plateau(c, kind="loss", tol=0.02).end == 0.25


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Homogeneous(k=1, d=4, r=3, delta=0.1), "`k`"),
        (lambda: Homogeneous(k=3, d=4, r=3.5, delta=0.1), "`r`"),
        (lambda: Homogeneous(k=3, d=4, r=0, delta=0.1), "`r`"),
        (lambda: Homogeneous(k=3, d=4, r=3, delta=0.0), "δ"),
        (lambda: Homogeneous(k=3, d=4, r=3, delta=-1.0), "δ"),
        (lambda: DeepFCN(d=4, k=3, depth=3, delta=0.0), "δ"),
        (lambda: DeepFCN(d=4, k=1, depth=3), "`k`"),
        (lambda: DeepFCN(d=4, k=3, depth=3, activation="tanh"), "activation"),
        (lambda: DeepFCN(d=4, k=3, depth=3, width=(4,)), "width"),
        (lambda: orthogonal_data(k=5, d=4), "≥ k"),
        (lambda: orthogonal_data(k=1, d=4), "`k`"),
        (lambda: check_labels([0, 1, 3], 3), "out of range"),
        (lambda: check_labels([0, -1], 3), "out of range"),
        (lambda: check_labels([0.5, 1], 3), "not an integer"),
        (lambda: alpha_grid([0.0, 0.5, 1.2]), r"\[0, 1\]"),
        (lambda: alpha_grid([-0.1, 0.5]), r"\[0, 1\]"),
        (lambda: digits_data("train", n_per_class=1000), "n_per_class"),
        (lambda: ex.Config(k=5, d=4), "`d`"),
        (lambda: ex.Config(r=2.5), "`r`"),
        (lambda: ex.Config(delta=0), "`delta`"),
    ],
)
def test_bad_input_raises_config_error(make, match):
    with pytest.raises(flows.ConfigError, match=match):
        make()


def test_small_r_runs_but_theorem_not_applicable():
    model = Homogeneous(k=3, d=3, r=2, delta=0.1)
    ok, why = model.theorem_applicable()
    assert not ok and "r ≥ 3" in why
    assert not DeepFCN(d=3, k=3, depth=2).theorem_applicable()[0]
    assert not DeepFCN(d=3, k=3, depth=3, bias=False).theorem_applicable()[0]


def test_cross_entropy_finite_for_huge_logits():
    logits = jnp.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 5e3]])
    y = jnp.array([1, 0])
    val = class_sum_cross_entropy(logits, y)
    assert np.isfinite(float(val)) and float(val) == pytest.approx(3 * (2e4 + 2e4) / 2)
    g = jax.grad(class_sum_cross_entropy)(logits, y)
    assert np.all(np.isfinite(np.asarray(g)))
    assert "k * mean" in class_sum_cross_entropy.description


def test_data_sets():
    d = orthogonal_data(k=3, n_per_class=4, d=5, sigma=0.1, seed=0)
    assert d.x.shape == (12, 5) and is_balanced(d.y, 3)
    np.testing.assert_allclose(d.x - np.eye(5)[d.y], d.meta["xi"])
    u = scale_to_unit_ball(d)
    assert np.max(np.linalg.norm(u.x, axis=1)) == pytest.approx(1.0)
    dg = digits_data("train", n_per_class=5)
    assert dg.x.shape == (50, 64) and is_balanced(dg.y, 10)
    assert np.max(np.linalg.norm(digits_data("test", n_per_class=None).x, axis=1)) <= 1.0
    assert not is_balanced(np.array([0, 0, 1]), 2)


def test_observables():
    data = orthogonal_data(k=3, n_per_class=2, d=4, sigma=0.1, seed=0)
    model = Homogeneous(k=3, d=4, r=3, delta=0.1)
    problem = flows.make_problem(model, data, key=0, loss_fn=class_sum_cross_entropy)
    W = jnp.array([[5.0, 0.1, 0, 0], [0, 5.0, 0, 0.2], [0.3, 0, 0.01, 0]])
    th = {"W": W, "b": jnp.array([0.0, -1.0, 2.0])}
    o = homogeneous_observables(problem, th, 0.0)
    np.testing.assert_allclose(o["W_diag"], [5.0, 5.0, 0.01])
    assert float(o["offdiag_max"]) == pytest.approx(0.3)
    assert float(o["bias_gap"]) == pytest.approx(2.0)
    np.testing.assert_allclose(o["class_correct"], [1.0, 1.0, 1.0])
    assert float(o["train_error"]) == 0.0
    xi = data.meta["xi"]
    assert float(o["noise_corr_max"]) == pytest.approx(np.max(np.abs(xi @ np.asarray(W).T)))
    o2 = classification_observables(problem, {"W": W, "b": jnp.array([0.0, 0.0, 300.0])}, 0.0)
    np.testing.assert_allclose(o2["class_correct"], [0.0, 0.0, 1.0])
    assert float(o2["train_error"]) == pytest.approx(2 / 3)


def test_check_helpers_can_fail():
    t = np.array([5.0, 1.0, 3.0])
    assert ex.check_learning_order(t, [1, 2, 0]).verdict == "holds"
    assert ex.check_learning_order(t, [0, 1, 2]).verdict == "fails"
    assert ex.check_learning_order([1.0, np.nan], [0, 1]).verdict == "not applicable"
    assert ex.check_top_bias([0.1, 2.0, -1.0], 1).verdict == "holds"
    assert ex.check_top_bias([0.1, 2.0, -1.0], 0).verdict == "fails"
    up = [(3, 0.1, 0.01, 3), (4, 0.2, 0.01, 3), (5, 0.3, 0.01, 3)]
    assert ex.check_trend(up, increasing=True, tol=0.05, claim="c", name="r").verdict == "holds"
    assert ex.check_trend(up, increasing=False, tol=0.05, claim="c", name="r").verdict == "fails"


def test_trend_rows_by_gd_get_eta_error_bars():
    """A trend measured at η, η/2, η/4: its end-to-end change extrapolated to η → 0
    (`richardson`), the error of the value judged at η/4 beside it; a verdict whose margin
    lies inside that error is undecided (numerical), a clear one keeps its verdict."""
    from flows.experiments.bias_plateau.trend_eta import eta_error_bars

    def row(last):  # end-to-end change = last − 0.1, seed spread 0.02 (tolerance 0.05)
        stats = [(3, 0.1, 0.01, 3), (4, (0.1 + last) / 2, 0.01, 3), (5, last, 0.01, 3)]
        return ex.check_trend(stats, increasing=True, tol=0.05, claim="c", name="r")

    etas = [0.04, 0.02, 0.01]
    # clear: change 0.30, 0.25, 0.225 → 0.2 at η → 0 (first order), margin 0.175
    clear = [row(0.4), row(0.35), row(0.325)]
    (c,) = eta_error_bars([clear[-1]], [[r] for r in clear], etas, 0.05)
    assert c.verdict == "holds" and c.values["eta0"] == pytest.approx(0.2)
    assert c.error == pytest.approx(0.025, rel=1e-6)  # |0.225 − 0.2| + 0 (exact order 1)
    assert "η → 0: 0.2" in c.reason
    # close: change 0.10, 0.07, 0.055 → 0.04 at η → 0; judged 0.055 against 0.05 with an
    # error of 0.015: holds at η/4 only by GD's own error
    close = [row(0.2), row(0.17), row(0.155)]
    assert close[-1].verdict == "holds"
    (c,) = eta_error_bars([close[-1]], [[r] for r in close], etas, 0.05)
    assert c.verdict == "undecided (numerical)" and "inside GD's numerical error" in c.reason
    # a row another η lacks is returned as it was
    assert eta_error_bars([close[-1]], [close[:1], close[1:2], []], etas, 0.05) == [close[-1]]
    with pytest.raises(ValueError, match="one list of rows per η"):
        eta_error_bars([close[-1]], [close], etas, 0.05)


def test_bias_row_gets_eta_error_bars_on_both_conditions():
    """The bias row holds when the drop (with − without) exceeds max(seed spread, tol) and
    the plateau without bias is at most half the one with it: each condition gets its own
    η → 0 error bar, and either one inside its error makes the row undecided."""
    from flows import Check
    from flows.experiments.bias_plateau.trend_eta import eta_error_bars

    def row(with_b, without):
        drop, spread = with_b - without, 0.02
        return Check.compare(
            "bias row",
            "s",
            holds=drop > max(0.05, spread) and without <= 0.5 * with_b,
            predicted="",
            measured="",
            values={"with_bias": with_b, "without_bias": without, "spread": spread},
        )

    etas = [0.04, 0.02, 0.01]
    # the drop is clear (0.17 against 0.05) but 'without ≤ half with' clears by only
    # 0.3/2 − 0.13 = 0.02 while 'without' moves 0.22 → 0.16 → 0.13 (→ 0.1 at η → 0, first
    # order): its error 0.03
    rows = [row(0.3, 0.22), row(0.3, 0.16), row(0.3, 0.13)]
    assert [r.verdict for r in rows] == ["fails", "fails", "holds"]
    (c,) = eta_error_bars([rows[-1]], [[r] for r in rows], etas, 0.05)
    assert c.verdict == "undecided (numerical)" and "of the with/2 − without" in c.reason
    assert c.values["conditions"]["with/2 − without"]["error"] == pytest.approx(0.03, rel=1e-6)
    assert c.values["conditions"]["drop with − without"]["eta0"] == pytest.approx(0.2)
    # both conditions clear by more than their errors: holds
    clear = [row(0.5, 0.1), row(0.5, 0.1), row(0.5, 0.1)]
    (c,) = eta_error_bars([clear[-1]], [[r] for r in clear], etas, 0.05)
    assert c.verdict == "holds" and c.values["conditions"]["with/2 − without"][
        "value"
    ] == pytest.approx(0.15)


TINY = ex.Config(
    k=3,
    d=4,
    n_per_class=3,
    n_save=201,
    sweep_k=(3,),
    sweep_seeds=(1,),
    deep_depth=3,
    deep_width=6,
    deep_n_per_class=3,
    deep_t1=60.0,
    digits=False,
    relu_run=False,
    sweep_depths=(3,),
    sweep_deltas=(1e-3,),
    trend_seeds=(0,),
    sweep_t1=60.0,
)


@pytest.mark.e2e
def test_homogeneous_checks_at_tiny_config():
    run = ex.run_homogeneous(TINY)
    checks = ex.homogeneous_checks(run, TINY)
    verdicts = {c.claim: c.verdict for c in checks}
    assert all(v == "holds" for v in verdicts.values()), [
        (c.claim, c.measured) for c in checks if c.verdict != "holds"
    ]
    # a wrong learning order is caught
    wrong = list(np.argsort(run.w0))  # increasing W_ii(0): the reverse of the prediction
    assert ex.check_learning_order(run.t_learned, wrong).verdict == "fails"
    # r < 3: Proposition 1's checks are not applicable, with the reason
    low = ex.run_homogeneous(dataclasses.replace(TINY, r=2, delta=0.5))
    na = [c for c in ex.homogeneous_checks(low, TINY) if c.verdict == "not applicable"]
    assert len(na) == 6 and "r = 2 < 3" in na[0].reason


def test_homogeneous_sweep_row_weighs_each_margin_against_its_error():
    """The k × seeds row: every run's three claims with their margins and numerical errors
    (companion solve); a margin inside its error makes the row undecided (numerical), a
    failing run makes it fail regardless, and the off-diagonal constant's flip point is
    the largest max|W_ij|/δ over the runs."""
    cfg = dataclasses.replace(ex.default_config(quick=True), offdiag_c=5.0, delta=0.01)

    def row(k, seed, margins, errors, numerical=(), **verdicts):
        v = {"order": "holds", "top_bias": "holds", "offdiag": "holds"} | verdicts
        return {"k": k, "seed": seed, "applicable": True, "reason": "", "margins": margins,
                "errors": errors, "numerical": list(numerical)} | v  # fmt: skip

    m = {"order": 0.6, "top_bias": 2.6, "offdiag": 0.02}  # max|W_ij| = 0.03 = 3δ
    e = {"order": 0.0, "top_bias": 1e-7, "offdiag": 0.0}
    ok = ex.check_homogeneous_sweep([row(3, 1, m, e), row(4, 1, m | {"offdiag": 0.01}, e)], cfg)
    assert ok.verdict == "holds" and ok.error == pytest.approx(1e-7)
    assert "tightest margin: top_bias" in ok.reason
    assert ok.critical[0] == "holds for offdiag_c ≥ 4"  # 5 − 0.01/0.01
    shaky = row(5, 2, m | {"top_bias": 1e-8}, e, numerical=("top_bias",))
    und = ex.check_homogeneous_sweep([row(3, 1, m, e), shaky], cfg)
    assert und.verdict == "undecided (numerical)" and "(5, 2, 'top_bias')" in und.reason
    bad = row(4, 3, m | {"order": -0.1}, e, order="fails")
    out = ex.check_homogeneous_sweep([shaky, bad], cfg)
    assert out.verdict == "fails" and "failing (k, seed): [(4, 3)]" in out.measured
    assert "holds for no offdiag_c" in out.critical[0]
    # a companion that failed: the error bar is reported missing, never zero
    lost = row(3, 2, m, dict.fromkeys(m, float("nan"))) | {"companion_missing": "max steps"}
    gone = ex.check_homogeneous_sweep([row(3, 1, m, e), lost], cfg)
    assert "error bar missing for (k, seed) (3, 2): max steps" in gone.reason


@pytest.mark.e2e
def test_experiment_run_writes_outputs(tmp_path):
    report = ex.run(TINY, tmp_path, progress=False)
    names = {p.name for p in report.files}
    assert {"results.json", "trajectory.nc", "four_class.png", "four_class.svg"} <= names
    assert {"interpolation.png", "interpolation.svg"} <= names
    assert all(c.verdict in VERDICTS for c in report.checks)
    # a theorem row outside its hypothesis names it (Theorem 1's literal interval)
    assert all(
        "outside the hypothesis" in c.reason
        for c in report.checks
        if c.verdict == "outside hypothesis"
    )
    import xarray as xr

    with xr.open_dataset(tmp_path / ex.NAME / "trajectory.nc") as ds:
        assert ds["W"].dims == ("time", "class", "dim") and ds["b"].dims == ("time", "class")
        assert "k * mean" in ds["loss"].attrs["description"]
    trends = [c for c in report.checks if "depth" in c.claim and "lengthens" in c.claim]
    assert trends[0].verdict == "not applicable"  # one depth only


@pytest.mark.e2e
def test_deep_relu_net_runs_by_exact_flow_beside_gd(monkeypatch):
    """With `relu_run` the deep ReLU net is trained by GD at η and η/4 and by the exact
    piecewise-smooth flow to the same horizon (this tiny net kills whole samples in layer
    1 at t ≈ 12: the next layer's pairs held on their kinks, see test_nonsmooth.py); its
    certificate holds and the row has a verdict. Where the exact flow stops, the row is
    "not applicable" naming the time reached, never an exception or a verdict. Oracle for
    the exact flow itself: on [0, 10] GD's θ(T) approaches it at first order in η."""
    cfg = dataclasses.replace(TINY, relu_run=True, deep_t1=20.0)
    runs, checks = ex.deep_runs(cfg, progress=False)
    row = [c for c in checks if "exact ReLU flow" in c.claim]
    exact = [r for r in runs if r.method == "nonsmooth"]
    assert len(row) == 1 and row[0].verdict in ("holds", "fails"), row[0]
    assert len(exact) == 1 and exact[0].traj.stats.certificate["ok"]
    # the exact flows carry their companion solves, and their rows the error bars
    assert exact[0].companion is not None and runs[0].companion is not None
    own = [c for c in checks if c.claim.startswith(exact[0].label)]
    assert any(c.values.get("error_how", "").startswith("companion") for c in own), own
    assert exact[0].traj.times[-1] == pytest.approx(cfg.deep_t1)
    # GD at η, η/2, η/4 extrapolated to η → 0 (Richardson) against the exact flow's L(T):
    # a verdict with an error bar, and the extrapolation at least as close as GD at η/4
    (lim,) = [c for c in checks if c.claim == ex.runs.GD_LIMIT_CLAIM]
    assert lim.verdict in ("holds", "fails", "vacuous") and math.isfinite(lim.error), lim
    gd_end = lim.values["gd_losses"][-1]
    assert lim.values["difference"] <= abs(gd_end - lim.values["reference"]) * 1.01, lim
    relu = [r for r in runs if r.method == "gd" and "relu" in r.label][0]
    short = dataclasses.replace(cfg, deep_t1=10.0)

    def train(method, eta=None):
        return ex.train_deep(
            relu.model,
            relu.data,
            seed=cfg.seed,
            t1=short.deep_t1,
            method=method,
            cfg=short,
            learning_rate=eta,
        )

    flow = train("nonsmooth")
    assert flow.traj.stats.certificate["ok"] and flow.traj.stats["events"] > 0
    flat = np.concatenate([np.ravel(flow.theta_T[n]) for n in sorted(flow.theta_T)])
    dist = []
    for eta in (cfg.gd_lr, cfg.gd_lr / 4):
        g = train("gd", eta).theta_T
        dist.append(np.max(np.abs(np.concatenate([np.ravel(g[n]) for n in sorted(g)]) - flat)))
    assert dist[1] < dist[0] / 2, dist

    def stops(*args, **kwargs):
        raise flows.SolverError("stopped", t_reached=12.5, reason="step size collapsed")

    monkeypatch.setattr(ex.runs, "exact_relu_flow", stops)
    _, checks_na = ex.deep_runs(cfg, progress=False)
    row_na = [c for c in checks_na if "exact ReLU flow" in c.claim]
    assert row_na[0].verdict == "not applicable" and "stopped at t = 12.5" in row_na[0].reason
    (lim_na,) = [c for c in checks_na if c.claim == ex.runs.GD_LIMIT_CLAIM]
    assert lim_na.verdict == "not applicable" and "stopped at t = 12.5" in lim_na.reason
