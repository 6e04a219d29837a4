"""Linear-teacher claims beyond the main runs: Theorem 6.1 tested directly, App. J's geometry
search, Theorem 4.1's n-scaling and "any η, any init", the large-init boundary, App. I.

Oracles: the KKT problem's own sign pattern (recomputed from its solution), closed-form
clustered networks (Theorem 5.1 with r = 0), synthetic trajectories whose trend is known.
"""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from flows.claims import Existential
from flows.experiments.linear_teacher import outlier_search as osearch
from flows.experiments.linear_teacher.checks import boundary_nonlinearity, check_sgd
from flows.experiments.linear_teacher.config import Config
from flows.experiments.linear_teacher.data import symmetric_gaussians
from flows.experiments.linear_teacher.outlier_checks import check_outlier_search
from flows.experiments.linear_teacher.theorem61_checks import check_theorem61, nar_entry_index
from reduced import max_margin as mm


def test_nar_entry_index():
    assert nar_entry_index([-1, 0.1, -0.2, 0.3, 0.4], 1e-6) == 3
    assert nar_entry_index([0.2, 0.3], 1e-6) == 0
    assert nar_entry_index([0.2, 0.0], 1e-6) is None  # on the kink at the end: not in an NAR


def _fake_run(data, cfg, w_end, u_end, beta, angle_scale):
    """A trajectory whose cluster means approach (w_end, u_end) from a fixed offset, with
    the given NAR margins and largest same-type angle angle_scale(t)."""
    t = np.logspace(-1, 6, 15)
    off = 0.5 * np.linalg.norm(w_end) * np.array([0.6, -0.8])
    decay = 1 / np.log(np.e + t)  # logarithmic directional convergence
    w_bar = w_end[None] + decay[:, None] * off[None]
    u_bar = u_end[None] - decay[:, None] * off[None]
    obs = {
        "nar_margin": np.asarray(beta, float),
        "l_sum": np.full(len(t), 0.1),
        "max_angle_w": angle_scale(t),
        "max_angle_u": angle_scale(t),
        "w_bar": w_bar,
        "u_bar": u_bar,
    }
    return SimpleNamespace(times=t, observables=obs)


def test_theorem61_holds_fails_and_not_applicable():
    cfg = Config()
    data = symmetric_gaussians(20, 2, seed=1)
    sol = mm.solve_par(data.train.x, data.train.y, v=cfg.v, k=cfg.k, slope=cfg.slope)
    assert sol.success and sol.in_par
    beta = np.full(15, 0.3)
    good = _fake_run(data, cfg, sol.w, sol.u, beta, lambda t: 0.1 / np.log(np.e + t))
    c = check_theorem61(good, data, cfg, "fake")  # type: ignore[arg-type]
    assert c.verdict == "holds", c.measured
    assert c.trend is not None and len(c.trend.x) >= 2
    # same-type angle growing: the conclusion fails
    bad = _fake_run(data, cfg, sol.w, sol.u, beta, lambda t: 0.01 * np.log(np.e + t))
    assert check_theorem61(bad, data, cfg, "fake").verdict == "fails"  # type: ignore[arg-type]
    # clustering, but sitting at directions that are not the NAR solution: fails
    rot = np.array([[0.8, -0.6], [0.6, 0.8]])
    wrong = _fake_run(data, cfg, rot @ sol.w, rot @ sol.u, beta, lambda t: 0.1 / (1 + t))
    wrong.observables["w_bar"][:] = rot @ sol.w
    wrong.observables["u_bar"][:] = rot @ sol.u
    assert check_theorem61(wrong, data, cfg, "fake").verdict == "fails"  # type: ignore[arg-type]
    # still approaching the solution but not within the tolerance at t1: not applicable
    slow = _fake_run(data, cfg, sol.w, sol.u, beta, lambda t: 0.1 / (1 + t))
    slow.observables["w_bar"] += 20.0 * (slow.observables["w_bar"] - sol.w[None])
    slow.observables["u_bar"] += 20.0 * (slow.observables["u_bar"] - sol.u[None])
    c = check_theorem61(slow, data, cfg, "fake")  # type: ignore[arg-type]
    assert c.verdict == "not applicable" and "not converged" in c.reason
    # the critical cos_tol is the measured cos: just above it the verdict flips
    (crit,) = c.critical
    flip = float(crit.split("≤")[1])
    assert flip == pytest.approx(min(c.values["cos_w"], c.values["cos_u"]), rel=1e-5)
    looser = dataclasses.replace(cfg, cos_tol=flip * (1 - 1e-5))
    assert check_theorem61(slow, data, looser, "fake").verdict == "holds"  # type: ignore[arg-type]
    (crit,) = check_theorem61(bad, data, cfg, "fake").critical  # type: ignore[arg-type]
    assert crit.startswith("holds for no cos_tol")
    # leaving the NAR at the end: the hypothesis fails, not applicable
    left = _fake_run(data, cfg, sol.w, sol.u, np.r_[beta[:-1], -0.1], lambda t: 0.1 / (1 + t))
    c = check_theorem61(left, data, cfg, "fake")  # type: ignore[arg-type]
    assert c.verdict == "not applicable" and "hypothesis" in c.reason


def test_theorem61_angle_fall_needs_its_confidence_interval_below_zero():
    """One rule for rates: an angle that ends lower but whose log-log slope's 95 % CI
    crosses 0 (a zig-zag with a slight downward drift) is undecided (finite size), not
    'holds'; the same end points on a steady fall hold."""
    cfg = Config()
    data = symmetric_gaussians(20, 2, seed=1)
    sol = mm.solve_par(data.train.x, data.train.y, v=cfg.v, k=cfg.k, slope=cfg.slope)
    beta = np.full(15, 0.3)

    def zigzag(t):
        k = np.arange(len(t))
        return 0.1 * (1 + 0.5 * (-1.0) ** k) * (1 - 0.01 * k)

    noisy = _fake_run(data, cfg, sol.w, sol.u, beta, zigzag)
    ang = noisy.observables["max_angle_w"]
    assert ang[-1] < ang[0]  # it does end lower
    c = check_theorem61(noisy, data, cfg, "fake")  # type: ignore[arg-type]
    lo, hi = c.values["loglog_slope_ci"]
    assert c.values["loglog_slope"] < 0 < hi and lo < 0
    assert c.verdict == "undecided (finite size)" and "confidence interval" in c.reason
    steady = _fake_run(data, cfg, sol.w, sol.u, beta, lambda t: 0.1 / np.log(np.e + t))
    c = check_theorem61(steady, data, cfg, "fake")  # type: ignore[arg-type]
    assert c.verdict == "holds" and c.values["loglog_slope_ci"][1] < 0


def _pattern_is_consistent(row_pattern, x, y, cfg, name):
    fw, fu = osearch.PATTERNS[name]
    cw, cu = y.copy(), -y.copy()
    cw[-1] *= fw
    cu[-1] *= fu
    s = mm.solve_nar(x, y, cw, cu, v=cfg.v, k=cfg.k, slope=cfg.slope)
    # the oracle: the solution's own signs, recomputed here
    return bool(np.all(cw * (x @ s.w) > 0) and np.all(cu * (x @ s.u) > 0))


@pytest.mark.parametrize(
    ("radius", "angle", "expected"),
    [(5.0, 90.0, "PAR"), (3.1623, 108.43, "kink")],  # above the classes; the old default
)
def test_outlier_prediction(radius, angle, expected):
    cfg = Config()
    row = osearch.predict_geometry(cfg, radius, angle)
    assert row["separable"]
    assert row["prediction"] == expected
    from flows.experiments.linear_teacher.data import antipodal_with_outlier

    d = antipodal_with_outlier(
        cfg.outlier_n, 2, outlier=np.asarray(osearch.outlier_point(radius, angle))
    )
    for name, p in row["patterns"].items():
        if p["consistent"]:
            assert _pattern_is_consistent(p, d.train.x, d.train.y, cfg, name)
    if expected == "kink":
        assert not any(p["consistent"] for p in row["patterns"].values())
        assert row["beta_pred"] == 0.0


def test_choose_geometry_and_search_check():
    cfg = Config()
    rows = [
        {"prediction": "kink", "separable": True, "beta_pred": 0.0},
        {"prediction": "u flips", "separable": True, "beta_pred": 0.02, "outlier": [-1, 1]},
        {"prediction": "u flips", "separable": True, "beta_pred": 0.05, "outlier": [-2, 2]},
        {"prediction": "PAR", "separable": True, "beta_pred": 0.3},
    ]
    chosen = osearch.choose_geometry(rows)
    assert chosen is rows[2]
    assert osearch.choose_geometry(rows[:1] + rows[3:]) is None
    assert check_outlier_search(rows[:1], None, None, cfg).verdict == "fails"
    flow = {"nar_margin": 0.05, "par_share_w": 1.0, "par_share_u": 0.0, "accuracy": 1.0}
    flow |= {"max_angle_w": 1e-3, "max_angle_u": 1e-3}
    assert check_outlier_search(rows, chosen, flow, cfg).verdict == "holds"
    split = flow | {"nar_margin": -0.3}
    c = check_outlier_search(rows, chosen, split, cfg)
    assert c.verdict == "fails" and "split" in c.reason
    kink = flow | {"nar_margin": 0.0}
    assert "kink" in check_outlier_search(rows, chosen, kink, cfg).reason
    # with the whole run searched: its existential verdict, the state at t1 beside it
    t = np.linspace(0.0, 100.0, 11)
    whole = Existential("x", "s", [t], [(t > 25) & (t < 45)], ["run"], "one run").judge()
    c = check_outlier_search(rows, chosen, split, cfg, whole)
    assert c.verdict == "holds (transient)" and "split" in c.reason and "t ≈ 30–40" in c.measured
    never = Existential("x", "s", [t], [t < 0], ["run"], "one run").judge()
    assert check_outlier_search(rows, chosen, split, cfg, never).verdict == "not observed"


def _rows(exponent_n, exponent_eps=1.0):
    rows = []
    for n in (20, 40, 80):
        for eps in (0.1, 0.03):
            rows.append(
                {
                    "n": n,
                    "epsilon": eps,
                    "updates": int(round(3 * (n / 20) ** exponent_n / eps**exponent_eps)),
                    "separable": True,
                }
            )
    return rows


def test_sgd_n_exponent_and_grid():
    cfg = Config(sgd_n=(20, 40, 80), sgd_eps=(0.1, 0.03))
    ok = {c.claim: c for c in check_sgd(_rows(1.0), cfg)}
    claim_n = "updates to ε grow at most like n⁴ (ε = 0.03)"
    assert ok[claim_n].verdict == "holds"
    assert ok[claim_n].values["exponent_n"] == pytest.approx(1.0, abs=0.01)
    trend = ok[claim_n].trend
    assert trend is not None and len(trend.x) == 3
    bad = {c.claim: c for c in check_sgd(_rows(5.0), cfg)}
    assert bad[claim_n].verdict == "fails"
    # the n⁴ row has no slack: an exponent of 4.1 fails
    assert {c.claim: c for c in check_sgd(_rows(4.1), cfg)}[claim_n].verdict == "fails"
    # the 1/ε² row's slack is a named constant: where the verdict flips is reported
    claim_eps = "updates to ε grow at most like 1/ε² (n = 80)"
    near = {c.claim: c for c in check_sgd(_rows(1.0, 2.1), cfg)}[claim_eps]
    # two ε points leave no confidence interval: undecided, with the value's verdict kept
    assert near.verdict == "undecided (finite size)"
    assert near.values["verdict_on_value"] == "holds"
    assert near.critical[0].startswith("holds for s ≥")
    assert float(near.critical[0].split("≥")[1].split()[0]) == pytest.approx(0.1, abs=0.01)
    far = {c.claim: c for c in check_sgd(_rows(1.0, 2.3), cfg)}[claim_eps]
    assert far.values.get("verdict_on_value", far.verdict) == "fails"
    # the slope's a-priori range (1 update … the budget per run) makes the row falsifiable
    lo, hi = (float(v) for v in ok[claim_n].reason.split("[")[1].split("]")[0].split(","))
    assert lo < 0 and hi > 4.25
    grid = [
        {"updates": 5, "learning_rate": 0.01, "init": 1e-4, "loss_start": 0.69},
        {"updates": None, "learning_rate": 10.0, "init": 10.0, "loss_start": 5.0},
    ]
    last = check_sgd(_rows(1.0), cfg, grid)[-1]
    assert "any η" in last.claim and last.verdict == "fails"
    assert check_sgd(_rows(1.0), cfg, grid[:1])[-1].verdict == "holds"
    # a start already below ε is no test of "any init"
    vacuous = [grid[0] | {"updates": 0, "loss_start": 0.01}]
    assert check_sgd(_rows(1.0), cfg, vacuous)[-1].verdict == "fails"


def test_boundary_nonlinearity():
    x = np.array([[3.0, 1.0], [-3.0, -1.0], [2.0, -2.0]])
    w = np.tile([[1.0, 0.5]], (4, 1))
    u = np.tile([[-0.7, 0.2]], (4, 1))
    # perfectly clustered leaky net: exactly linear boundary (Theorem 5.1 with r = 0)
    assert boundary_nonlinearity(w, u, x, 1.0, 0.1) == 0.0
    # two far-apart w neurons and a weak slope: a bent boundary
    w2 = np.array([[1.0, 0.0], [-1.0, 3.0]])
    u2 = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert boundary_nonlinearity(w2, u2, x, 1.0, 0.01) > 0.01


def _static_key(problem):
    """What the non-smooth solver's compilation cache keys on besides the settings: the
    static part of the problem and the shapes of its arrays."""
    import equinox as eqx
    import jax

    dynamic, static = eqx.partition(problem, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(dynamic)
    s_leaves, s_def = jax.tree_util.tree_flatten(static)
    return (treedef, s_def, tuple(s_leaves), tuple((v.shape, v.dtype) for v in leaves))


def test_shared_problem_same_theta0_and_one_compile_key():
    from flows import logistic, make_problem
    from flows.experiments.linear_teacher.runs import _model, outlier_data, shared_problem

    cfg = Config()
    data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
    keys = []
    for init in (cfg.small_init, cfg.large_init):
        problem, described = shared_problem(cfg, data.train, init)
        real = make_problem(_model(cfg, 2, init), data.train, key=cfg.seed, loss_fn=logistic)
        # θ(0) bit-identical to the model's own draw at this init; the record says this init
        for name in ("w", "u"):
            np.testing.assert_array_equal(problem.theta0[name], real.theta0[name])
        assert described == real.describe()
        assert described["model"]["init_scale"] == init
        keys.append(_static_key(problem))
    # the outlier data (outlier_n + 1 = n points) shares the key too
    keys.append(_static_key(shared_problem(cfg, outlier_data(cfg).train, cfg.small_init)[0]))
    assert keys[0] == keys[1] == keys[2]
    # the oracle can fail: different sizes do not share a key
    other = symmetric_gaussians(cfg.n - 2, 2, mean=cfg.mean, seed=cfg.seed)
    assert _static_key(shared_problem(cfg, other.train, cfg.small_init)[0]) != keys[0]


def test_quick_skips_are_not_applicable_with_the_real_claims():
    from flows.experiments.linear_teacher.checks import check_smoothing, smoothing_skipped
    from flows.experiments.linear_teacher.config import default_config
    from flows.experiments.linear_teacher.theorem61_checks import check_highdim, highdim_skipped

    quick = default_config(quick=True)
    assert not quick.highdim and not quick.smoothing_check
    assert default_config().highdim and default_config().smoothing_check
    traj = SimpleNamespace(observables={"par_share": np.ones(3)}, times=np.array([1.0, 2, 3]))
    real = check_highdim({"d = 2": traj, "d = 20": traj})  # type: ignore[arg-type]
    cc = {"errors": {1e-3: 1e-4, 1e-4: 1e-5}, "t1": 20.0, "crossings": 1, "sliding_entries": 0}
    skipped = highdim_skipped(quick) + [smoothing_skipped()]
    assert [c.claim for c in skipped[::2]] == [real.claim, check_smoothing(cc).claim]
    assert skipped[1].claim.endswith("(d = 20)")
    for c in skipped:
        assert c.verdict == "not applicable" and "--quick" in c.reason


def test_network_np_matches_the_reduced_leaky_relu():
    from flows.experiments.linear_teacher.runs import network_np
    from reduced.linear_teacher import leaky_relu

    rng = np.random.default_rng(3)
    w, u, x = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), rng.standard_normal((50, 3))
    for slope in (0.0, 0.1, 0.7):
        ref = 1.5 * (
            np.asarray(leaky_relu(x @ w.T, slope)).sum(-1)
            - np.asarray(leaky_relu(x @ u.T, slope)).sum(-1)
        )
        np.testing.assert_allclose(network_np(w, u, x, 1.5, slope), ref, rtol=1e-14, atol=1e-14)
    # and it is the leaky net: slope·z on the negative side (fails for a plain ReLU)
    assert network_np(np.array([[-1.0]]), np.zeros((1, 1)), np.array([[2.0]]), 1.0, 0.1) == -0.2


def test_tolerance_rows_state_where_their_verdict_flips():
    """Each row judged with one of the toolkit's tolerances carries the value where its
    verdict flips; on either side of it the row's verdict is the other one."""
    from flows.experiments.linear_teacher.checks import check_digits, check_smoothed_margin

    times = np.logspace(0, 3, 6)
    l_sum = np.full(6, 0.1)
    gamma = np.array([1.0, 1.1, 1.2, 1.19, 1.3, 1.4])  # one relative drop of 0.84 %
    c = check_smoothed_margin(times, l_sum, gamma, 1e-5, "x")
    assert c.verdict == "fails"
    (crit,) = c.critical
    flip = float(crit.split("≥")[1])
    assert flip == pytest.approx(0.01 / 1.19, rel=1e-3)
    assert check_smoothed_margin(times, l_sum, gamma, flip * 1.01, "x").verdict == "holds"
    assert check_smoothed_margin(times, l_sum, gamma, flip * 0.99, "x").verdict == "fails"

    cfg = Config()
    obs = {"frac_outside": [0.5, 0.03], "frac_outside_test": [0.5, 0.04], "r_rel": [1.0, 0.1]}
    run = SimpleNamespace(observables={k: np.asarray(v) for k, v in obs.items()})
    c = check_digits("0v1", run, cfg)  # type: ignore[arg-type]
    (crit,) = c.critical
    flip = float(crit.split("≥")[1])
    assert flip == pytest.approx(0.04)
    for tol, verdict in ((flip * 1.01, "holds"), (flip * 0.99, "fails")):
        again = check_digits("0v1", run, dataclasses.replace(cfg, digits_frac_tol=tol))  # type: ignore[arg-type]
        assert again.verdict == verdict
