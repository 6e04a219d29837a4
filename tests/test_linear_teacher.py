"""Linear-teacher toolkit: model, data, loss clock, SGD, observables, PAR solver, checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows import sgd_to_epsilon
from flows.experiments import linear_teacher as lt
from flows.experiments.linear_teacher.data import (
    antipodal_with_outlier,
    binary_dataset,
    check_separable,
    digits_pair,
    symmetric_gaussians,
    teacher_ball,
)
from flows.experiments.linear_teacher.observables import evaluate, teacher_observables
from flows.models.leaky import LeakyReLUNet
from reduced import max_margin as mm


def _problem(n=20, k=3, init=0.3, slope=0.2, bias=False, seed=0):
    data = symmetric_gaussians(n, 2, seed=seed)
    model = LeakyReLUNet(k=k, d=2, slope=slope, init_scale=init, bias=bias)
    return flows.make_problem(model, data.train, key=seed, loss_fn=flows.logistic)


# --- model ----------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
def test_gradient_matches_finite_differences(bias):
    p = _problem(init=0.7, bias=bias)
    theta = p.theta0
    g = p.grad(theta)
    flat, unravel = jax.flatten_util.ravel_pytree(theta)
    gflat, _ = jax.flatten_util.ravel_pytree(g)
    h = 1e-6
    fd = np.array(
        [
            (p.loss(unravel(flat.at[i].add(h))) - p.loss(unravel(flat.at[i].add(-h)))) / (2 * h)
            for i in range(flat.size)
        ]
    )
    np.testing.assert_allclose(np.asarray(gflat), fd, rtol=1e-6, atol=1e-9)


def test_model_output_and_homogeneity():
    m = LeakyReLUNet(k=2, d=2, slope=0.25, v=2.0)
    th = {"w": jnp.array([[1.0, 0.0], [0.0, 1.0]]), "u": jnp.array([[-1.0, 0.0], [1.0, 1.0]])}
    x = jnp.array([[1.0, -2.0]])
    # w: σ(1) + σ(−2) = 1 − 0.5; u: σ(−1) + σ(−1) = −0.5; N = 2(0.5 + 0.5) = 2
    assert float(m(th, x)[0]) == pytest.approx(2.0)
    th3 = jax.tree_util.tree_map(lambda v: 3.0 * v, th)
    assert float(m(th3, x)[0]) == pytest.approx(6.0)
    mb = LeakyReLUNet(k=2, d=2, bias=True)
    assert mb.init(jax.random.key(0))["w"].shape == (2, 3)
    assert mb.param_dims()["w"] == ("neuron", "dim_bias")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 0, "d": 2},
        {"k": 2, "d": 0},
        {"k": 2, "d": 2, "slope": 1.0},
        {"k": 2, "d": 2, "slope": -0.1},
        {"k": 2, "d": 2, "v": 0.0},
        {"k": 2, "d": 2, "init_scale": 0.0},
    ],
)
def test_model_bad_inputs(kwargs):
    with pytest.raises(flows.ConfigError):
        LeakyReLUNet(**kwargs)


def test_mismatched_dims_and_labels():
    data = symmetric_gaussians(10, 3)
    with pytest.raises(flows.ConfigError, match="d = 3"):
        flows.make_problem(LeakyReLUNet(k=2, d=2), data.train)
    with pytest.raises(flows.ConfigError, match="−1 or \\+1"):
        binary_dataset(np.zeros((3, 2)), np.array([0.0, 1.0, 1.0]))
    with pytest.raises(flows.ConfigError):
        LeakyReLUNet(k=2, d=2).check_params({"w": jnp.zeros((2, 2)), "u": jnp.zeros((3, 2))})


# --- data -----------------------------------------------------------------------------


def test_data_generators_and_separability():
    sg = symmetric_gaussians(40, 3, seed=1, n_test=10)
    x, y = sg.train.x, sg.train.y
    np.testing.assert_array_equal(x[:20], -x[20:])
    np.testing.assert_array_equal(y[:20], -y[20:])
    assert sg.test.n == 10
    tb = teacher_ball(50, 4, margin=0.2, seed=2)
    assert np.all(tb.train.y * (tb.train.x @ tb.teacher) >= 0.2)
    assert tb.separability.separable
    ao = antipodal_with_outlier()
    assert ao.train.y[-1] == 1 and ao.separability.separable
    # XOR-like data: not separable, reported, not raised
    bad = check_separable(np.array([[1.0, 0], [-1, 0]]), np.array([1.0, 1.0]))
    assert bad.separable is False and "NOT" in bad.message
    dg = digits_pair(3, 5, n_train=60)
    assert dg.train.d == 64 and set(np.unique(dg.train.y)) == {-1.0, 1.0}
    with pytest.raises(flows.ConfigError):
        digits_pair(3, 3)
    with pytest.raises(flows.ConfigError):
        symmetric_gaussians(5, 2)


# --- clocks ---------------------------------------------------------------------------


def test_clocks_agree_at_t1000_and_energy_identity():
    p = _problem(n=20, k=2, init=0.1)
    ts = np.array([0.0, 10.0, 1000.0])
    ref = flows.simulate(p, t1=1e3, ts=ts, rtol=1e-11, atol=1e-13, save_params="ends")
    for clock in ("loss", "log", "physical"):
        tr = flows.simulate(p, t1=1e3, ts=ts, clock=clock, rtol=1e-9, atol=1e-12)
        for name in ("w", "u"):
            np.testing.assert_allclose(tr.param(name), ref.param(name), rtol=1e-6, atol=1e-8)
        res = np.max(tr.observables["energy_residual"])
        assert res <= 1e-6 * tr.loss[0], (clock, res)
        assert np.all(np.diff(tr.loss) <= 0)


def test_loss_clock_reaches_late_times_in_few_steps():
    p = _problem(n=20, k=2, init=0.1)
    tr = flows.simulate(p, t1=1e10, ts=flows.log_save_times(1e10, 6), clock="loss")
    assert tr.stats["result"] == "successful" and tr.times[-1] == 1e10
    assert tr.stats["steps"] < 2000
    # late phase: L ~ 1/t, so L·t is roughly constant over the last decades
    lt_ = tr.loss[-3:] * tr.times[-3:]
    assert np.max(lt_) / np.min(lt_) < 3


def test_loss_clock_overflow_raises_solver_error():
    # huge inputs: margins beyond ~745 make the logistic loss underflow to 0
    data = binary_dataset(np.array([[1e4, 0.0], [-1e4, 0.0]]), np.array([1.0, -1.0]))
    m = LeakyReLUNet(k=1, d=2, init_scale=1.0)
    p = flows.make_problem(
        m,
        data,
        theta0={"w": jnp.array([[1.0, 0]]), "u": -jnp.array([[1.0, 0]])},
        loss_fn=flows.logistic,
    )
    with pytest.raises(flows.SolverError, match="t = "):
        flows.simulate(p, t1=1e3, n_save=3, clock="loss")
    with pytest.raises(flows.ConfigError):
        flows.simulate(p, t1=1e3, clock="banana")


# --- SGD ------------------------------------------------------------------------------


def test_sgd_reaches_epsilon():
    p = _problem(n=10, k=2, init=0.01)
    r1 = sgd_to_epsilon(p, epsilon=0.05, learning_rate=0.5, key=0, max_epochs=2000)
    assert r1.reached and r1.final_loss <= 0.05 and r1.updates >= 1
    r2 = sgd_to_epsilon(p, epsilon=0.01, learning_rate=0.5, key=0, max_epochs=2000)
    assert r2.updates > r1.updates
    r3 = sgd_to_epsilon(p, epsilon=1e-6, learning_rate=0.5, key=0, max_epochs=1)
    assert not r3.reached
    with pytest.raises(flows.ConfigError):
        sgd_to_epsilon(p, epsilon=0.0, learning_rate=0.5)


# --- observables ----------------------------------------------------------------------


def test_observables_on_a_clustered_network():
    p = _problem(n=20, k=3)
    th = {
        "w": jnp.tile(jnp.array([[1.0, 0.0]]), (3, 1)),
        "u": -jnp.tile(jnp.array([[1.0, 0]]), (3, 1)),
    }
    o = evaluate(p, th, beta=0.0)
    assert float(o["r"]) == 0 and float(o["frac_outside"]) == 0
    assert float(o["sign_agreement"]) == 1 and float(o["thm51_violations"]) == 0
    assert float(o["max_disagree"]) == 0
    # smoothed margin is NaN while L_sum ≥ log 2 (tiny weights), finite below it
    small = jax.tree_util.tree_map(lambda v: 1e-3 * v, th)
    assert np.isnan(evaluate(p, small)["smoothed_margin"])
    big = jax.tree_util.tree_map(lambda v: 10 * v, th)
    ob = evaluate(p, big)
    assert np.isfinite(ob["smoothed_margin"]) and ob["smoothed_margin"] <= ob["margin"]
    with pytest.raises(flows.ConfigError):
        teacher_observables(beta=-1.0)


# --- max-margin (PAR) -----------------------------------------------------------------


def test_par_two_symmetric_points_known_solution():
    x, y = np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, -1.0])
    sol = mm.solve_par(x, y, v=2.0, k=3, slope=0.2)
    c = 1 / (2.0 * 3 * 1.2)
    np.testing.assert_allclose(sol.w, [c, 0], atol=1e-9)
    np.testing.assert_allclose(sol.u, [-c, 0], atol=1e-9)
    assert sol.success and sol.in_par and sol.kkt_residual < 1e-8


def test_par_symmetric_data_matches_svm_closed_form():
    sg = symmetric_gaussians(60, 3, seed=4)
    sol = mm.solve_par(sg.train.x, sg.train.y, v=1.0, k=5, slope=0.1)
    w, u = mm.symmetric_solution(sg.train.x, sg.train.y, v=1.0, k=5, slope=0.1)
    np.testing.assert_allclose(sol.w, w, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(sol.u, u, rtol=1e-6, atol=1e-9)
    assert np.min(sol.margins) >= 1 - 1e-8


# --- checks can fail --------------------------------------------------------------------


def test_theorem51_property_and_relu_counterexample():
    leaky = lt.property_test(40, 50, None, 0)
    assert leaky["violations"] == 0 and leaky["points_inside"] > 0
    relu = lt.property_test(40, 50, 0.0, 0)
    assert relu["violations"] > 0
    w, u, x = (np.asarray(lt.RELU_EXAMPLE[k]) for k in ("w", "u", "x"))
    assert lt.theorem51_violations(w, u, x, 1.0, 0.0)[1] == 1
    assert lt.theorem51_violations(w, u, x, 1.0, 0.3)[1] == 0


def test_smoothed_margin_check_can_fail_and_be_not_applicable():
    t = np.arange(5.0)
    ok = lt.check_smoothed_margin(t, [1.0, 0.6, 0.5, 0.4, 0.3], [np.nan, 1, 2, 3, 4], 1e-6, "x")
    bad = lt.check_smoothed_margin(t, [1.0, 0.6, 0.5, 0.4, 0.3], [np.nan, 1, 2, 1.5, 4], 1e-6, "x")
    na = lt.check_smoothed_margin(t, [1.0] * 5, [np.nan] * 5, 1e-6, "x")
    assert (ok.verdict, bad.verdict, na.verdict) == ("holds", "fails", "not applicable")


def test_par_prediction_check_fails_for_a_wrong_prediction():
    cfg = lt.Config()

    class _T:
        observables = {"in_par": np.array([1.0])}
        times = np.array([1.0])

    sol = mm.solve_par(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, -1.0]))
    right = mm.direction_agreement(sol.w, sol.u, sol.w, sol.u)
    wrong = mm.direction_agreement(sol.w, sol.u, np.array([0.0, 1.0]), np.array([0.0, -1.0]))
    assert lt.check_par_prediction(_T, sol, right, cfg, True).verdict == "holds"
    assert lt.check_par_prediction(_T, sol, wrong, cfg, True).verdict == "fails"
    _T.observables = {"in_par": np.array([0.0])}
    assert lt.check_par_prediction(_T, sol, right, cfg, True).verdict == "not applicable"


def test_clustering_outlier_sgd_checks_can_fail():
    cfg = lt.Config()

    def traj(**obs):
        class _T:
            observables = {k: np.asarray(v, float) for k, v in obs.items()}
            times = np.arange(len(next(iter(obs.values()))), dtype=float)

        return _T

    good_small = traj(r_rel=[0.1, 0.05, 0.001], frac_outside=[1, 0.5, 0.0])
    large = traj(r_rel=[3, 2, 1.0], frac_outside=[1, 1, 1])
    assert [c.verdict for c in lt.check_clustering(good_small, large, cfg)] == ["holds"] * 2
    bad_small = traj(r_rel=[0.1, 0.5, 0.5], frac_outside=[1, 0.5, 0.3])
    assert [c.verdict for c in lt.check_clustering(bad_small, large, cfg)] == ["fails"] * 2
    sep = antipodal_with_outlier()
    common = {"max_disagree": [3, 0], "accuracy": [1, 1], "on_kink_w": [0, 0]}
    common |= {"par_share_kink": [0, 0]}
    nar = traj(nar_margin=[-1, 0.2], par_share=[0.5, 0.5], on_kink_u=[0, 0], **common)
    par = traj(nar_margin=[-1, 0.2], par_share=[0.5, 1], on_kink_u=[0, 0], **common)
    # u-neurons sitting on a point's kink (sliding): β* = 0 up to rounding → no NAR
    kink = traj(nar_margin=[-1, 1e-17], par_share=[0.5, 0.7], on_kink_u=[0, 3], **common)
    tol = cfg.kink_cos
    # App. J is existential: judged over the whole run, persistent or transient
    assert lt.check_outlier(nar, sep, tol).verdict == "holds (persistent)"
    left = traj(nar_margin=[0.2, -1], par_share=[0.5, 0.5], on_kink_u=[0, 0], **common)
    c = lt.check_outlier(left, sep, tol)
    assert c.verdict == "holds (transient)" and "t ≈ 0–0" in c.measured
    assert lt.check_outlier(par, sep, tol).verdict == "not observed"
    c = lt.check_outlier(kink, sep, tol)
    assert c.verdict == "not observed" and "kink" in c.reason
    rows = [
        {"n": 10, "epsilon": e, "updates": u, "separable": True}
        for e, u in ((0.1, 10), (0.05, 80), (0.01, 10_000))
    ]  # exponent 3 > 2, on three ε: a confidence interval exists (two points leave none)
    cfg10 = lt.Config(sgd_n=(10,))
    # third row: the n-exponent needs ≥ 3 sizes n
    assert [c.verdict for c in lt.check_sgd(rows, cfg10)] == ["holds", "fails", "not applicable"]
    rows[1]["updates"] = rows[2]["updates"] = None
    assert [c.verdict for c in lt.check_sgd(rows, cfg10)] == ["fails"] + ["not applicable"] * 2


def test_nar_margin_and_kink_aware_disagreement():
    from flows.experiments.linear_teacher.observables import _max_disagree, nar_margin

    # two neurons, three points: both positive on point 0, both negative on 1, split on 2
    c = jnp.asarray([[0.5, 0.2], [-0.3, -0.6], [0.4, -0.1]])
    assert float(nar_margin(c)) == pytest.approx(-0.1)  # point 2: max(min, −max) = −0.1
    assert float(nar_margin(c[:2])) == pytest.approx(0.2)
    off = jnp.zeros(c.shape, bool)
    assert float(_max_disagree(c, off)) == 1
    # the split point's second neuron sits on its kink: not a disagreement
    assert float(_max_disagree(c, off.at[2, 1].set(True))) == 0


def test_eta_convergence_verdicts():
    from flows.plugin import eta_checked, merge_eta

    same = eta_checked("c", "s", eta=0.2, measure=lambda e: (e < 1, f"{e}", {}), predicted="p")
    assert same.verdict == "holds" and "η = 0.05" in same.measured
    fails = eta_checked("c", "s", eta=0.2, measure=lambda e: (False, "x", {}), predicted="p")
    assert fails.verdict == "fails"
    split = eta_checked("c", "s", eta=0.2, measure=lambda e: (e < 0.1, "x", {}), predicted="p")
    assert split.verdict == "not applicable" and "not converged in η" in split.reason
    a = [flows.Check.compare("k", "s", holds=True, predicted="p", measured="1")]
    b = [flows.Check.compare("k", "s", holds=False, predicted="p", measured="2")]
    assert merge_eta(a, a, 0.1)[0].verdict == "holds"
    merged = merge_eta(a, b, 0.1)[0]
    assert merged.verdict == "not applicable" and "η = 0.025: 2" in merged.measured


def test_config_validation():
    with pytest.raises(flows.ConfigError):
        lt.Config(slope=1.5)
    with pytest.raises(flows.ConfigError):
        lt.Config(small_init=1.0, large_init=0.1)
    assert lt.default_config(quick=True).t1 < lt.default_config().t1


def test_equal_observable_arguments_give_one_function_and_so_one_compilation():
    """The observables function is part of the event loop's compile key: a sweep over
    seeds (each with its own but equal teacher e₁) must get the same function back."""
    from flows.experiments.linear_teacher.observables import teacher_observables

    a = teacher_observables(teacher=np.array([1.0, 0.0]), beta=0.0)
    b = teacher_observables(teacher=np.array([1.0, 0.0]), beta=0.0)
    assert a is b
    assert teacher_observables(teacher=np.array([0.0, 1.0]), beta=0.0) is not a
    assert teacher_observables(teacher=np.array([1.0, 0.0]), beta=1e-3) is not a
    assert teacher_observables(beta=0.0) is not a


def test_app_j_over_its_family_is_existential_and_names_where():
    """App. J over its family (geometries × seeds): holds when some member enters the
    state at some time, persistent when a member ends in it, not observed when none does;
    the measured text names each member and when; left-out members are stated."""

    def traj(margins, shares):
        class _T:
            observables = {
                "nar_margin": np.asarray(margins, float),
                "par_share": np.asarray(shares, float),
                "accuracy": np.ones(len(margins)),
            }
            times = np.asarray([1.0, 10.0, 100.0][: len(margins)])

        return _T

    tol = lt.Config().kink_cos
    never = traj([-1, -1, 0.2], [0.5, 0.5, 1.0])  # the NAR only once in the PAR
    passing = traj([-1, 0.2, -1], [0.5, 0.5, 0.5])  # t = 10 only
    staying = traj([-1, 0.2, 0.3], [0.5, 0.5, 0.5])
    c = lt.check_outlier_family([("a", never), ("b", passing)], ["c (not separable)"], tol, "F")
    assert c.verdict == "holds (transient)" and "in 1 of 2 runs" in c.measured
    assert "b: t ≈ 10–10" in c.measured and "left out: c (not separable)" in c.reason
    c = lt.check_outlier_family([("a", never), ("s", staying)], [], tol, "F")
    assert c.verdict == "holds (persistent)" and c.values["persistent"] == ["s"]
    assert lt.check_outlier_family([("a", never)], [], tol, "F").verdict == "not observed"
    assert lt.check_outlier_family([], ["all"], tol, "F").verdict == "not applicable"

    # as Fig. 9 shows it, at the end of training: a member passing through is no agreement
    end = lt.check_outlier_family_end([("a", never), ("b", passing)], [], tol, "F")
    assert end.verdict == "not observed" and "in 0 of 2 runs" in end.measured
    assert "entered during training in 1 of 2 flows and left again in each" in end.reason
    end = lt.check_outlier_family_end([("b", passing), ("s", staying)], [], tol, "F")
    assert end.verdict == "holds (persistent)" and end.values["entered"] == ["b", "s"]
    assert lt.check_outlier_family_end([], ["all"], tol, "F").verdict == "not applicable"
