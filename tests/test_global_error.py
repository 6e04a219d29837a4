"""`simulate(…, global_error=True)` against a closed form, its failure mode (missing, never
zero), and error bars from a companion run turning a too-close verdict into undecided."""

import dataclasses

import numpy as np
import pytest
import scipy.linalg

import flows
from flows.claims import (
    FAILS,
    HOLDS,
    UNDECIDED,
    Bound,
    Measured,
    error_calibration,
    with_error_bars,
)


def _least_squares():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 5))
    w_star = rng.normal(size=5)
    problem = flows.make_problem(
        lambda p, x: x @ p["w"], flows.from_arrays(x, x @ w_star), theta0={"w": np.zeros(5)}
    )
    return problem, x, w_star


def test_estimate_is_within_a_factor_3_of_the_closed_form_error():
    """Linear least squares: w(t) = w* + e^{−Ht}(w(0) − w*), H = XᵀX/n, exactly."""
    problem, x, w_star = _least_squares()
    traj = flows.simulate(
        problem, t1=4.0, rtol=1e-5, atol=1e-8, n_save=9, save_params="all", global_error=True
    )
    h = x.T @ x / len(x)
    exact = np.stack([w_star - scipy.linalg.expm(-h * t) @ w_star for t in traj.param_times])
    loss = 0.5 * np.mean((np.asarray(exact) @ x.T - x @ w_star) ** 2, axis=1)
    assert traj.loss[0] == pytest.approx(loss[0], rel=1e-12)  # the loss convention
    true_w = np.max(np.abs(traj.params["w"] - exact))
    true_loss = np.max(np.abs(traj.loss - loss))
    ge = traj.global_error
    assert ge is not None and not ge.missing
    assert 1 / 3 <= ge.max_param("w") / true_w <= 3
    assert 1 / 3 <= ge.max("loss") / true_loss <= 3
    assert ge.companion is not None and ge.companion.config["rtol"] == pytest.approx(1e-6)
    assert traj.config["global_error"]["max"]["loss"] == ge.max("loss")


def test_failed_companion_leaves_the_estimate_missing_not_zero():
    problem, _, _ = _least_squares()
    plain = flows.simulate(problem, t1=4.0, rtol=1e-5, atol=1e-8, n_save=5)
    steps = int(plain.stats["steps"])
    traj = flows.simulate(
        problem, t1=4.0, rtol=1e-5, atol=1e-8, n_save=5, max_steps=steps, global_error=True
    )
    ge = traj.global_error
    assert ge is not None and "companion solve" in ge.missing and "failed" in ge.missing
    assert ge.observables == {} and np.isnan(ge.max("loss"))
    assert traj.config["global_error"]["missing"] == ge.missing
    np.testing.assert_array_equal(traj.loss, plain.loss)  # the run itself is untouched


def test_error_bars_from_a_companion_decide_or_undecide():
    def row(q):
        return Bound("q ≤ 1", "toy", Measured(q), 1.0).judge()

    close, far = row(0.99999), row(0.5)
    # no error bar yet: not a result ("not estimated" is never "holds")
    assert (close.verdict, far.verdict) == (UNDECIDED, UNDECIDED)
    out = with_error_bars([close, far], [row(0.99999 + 4e-6), row(0.5001)], "companion")
    cal = error_calibration()  # the companion's difference, calibrated to cover
    assert out[0].verdict == UNDECIDED and "inside the numerical error" in out[0].reason
    assert out[0].error == pytest.approx(4e-6 * cal)  # 1.1e-5 > the margin 1e-5
    assert out[1].verdict == HOLDS and out[1].error == pytest.approx(1e-4 * cal)
    failing = with_error_bars([row(1.5)], [row(1.5 + 1e-6)], "companion")[0]
    assert failing.verdict == FAILS and failing.values["error_how"] == "companion"


def test_tolerance_rows_get_error_bars_on_their_flip_points():
    """A row judged with the toolkit's tolerance (`Check.compare` + `flips_at(default=…)`):
    the flip point's change on the companion is its error bar; a default tolerance inside
    it, or a verdict the companion does not share, makes the row undecided."""
    import copy
    import json
    import pickle

    from flows import Check
    from flows.claims import Flip, flips_at

    def row(err, tol=1e-2):
        return Check.compare(
            "err small",
            "toy",
            holds=err <= tol,
            predicted=f"≤ {tol:g}",
            measured=f"{err:g}",
            critical=(flips_at("tol", err, at_least=True, default=tol),),
        )

    f = row(4e-3).critical[0]
    assert isinstance(f, Flip) and (f.name, f.value, f.at_least, f.default) == (
        "tol",
        4e-3,
        True,
        1e-2,
    )
    for g in (copy.deepcopy(f), pickle.loads(pickle.dumps(f))):  # copies keep the numbers
        assert isinstance(g, Flip) and g == f and (g.value, g.default) == (f.value, f.default)
    assert json.loads(json.dumps({"c": f}))["c"] == "holds for tol ≥ 0.004"

    far = with_error_bars([row(4e-3)], [row(4.1e-3)], "companion")[0]
    cal = error_calibration()  # the companion's difference, calibrated to cover (×2.78)
    assert far.verdict == HOLDS and far.values["flip_errors"]["tol"] == pytest.approx(1e-4 * cal)
    assert far.critical[0] == "holds for tol ≥ 0.004 ± 0.00028 (numerical)"
    # the default 0.01 lies within the flip point's error bar: undecided, either side
    near = with_error_bars([row(9.99e-3)], [row(1.001e-2)], "companion")[0]
    assert near.verdict == UNDECIDED and "tol = 0.01 lies within ±5.6e-05" in near.reason
    # a verdict the companion does not share is undecided even without a flip number
    plain = Check.compare("x", "toy", holds=True, predicted="", measured="")
    flipped = Check.compare("x", "toy", holds=False, predicted="", measured="")
    assert with_error_bars([plain], [flipped], "companion")[0].verdict == UNDECIDED
    same = with_error_bars([plain], [plain], "companion")[0]  # no number: the verdict compared
    assert same.verdict == HOLDS and same.values == {
        "companion_verdict": HOLDS,
        "error_how": "companion",
    }
    # a flip without its default gets the error bar but cannot be judged against it
    bare = Check.compare(
        "e",
        "toy",
        holds=True,
        predicted="",
        measured="",
        critical=(flips_at("tol", 1e-2, at_least=True),),
    )
    twin = dataclasses.replace(bare, critical=(flips_at("tol", 1.1e-2, at_least=True),))
    out = with_error_bars([bare], [twin], "companion")[0]
    assert out.verdict == HOLDS and "± 0.0028 (numerical)" in out.critical[0]


def test_limit_rows_get_error_bars_on_their_rate():
    """A `Limit` row (a rate with a confidence interval over widths × seeds): its error bar
    is the largest change of the rate or of a CI end on the companion; a CI end that
    decided the verdict and lies within it of 0 makes the row undecided."""
    from flows.claims import Limit

    m = np.array([100.0, 200.0, 400.0, 800.0])
    rng = np.random.default_rng(2)
    noise = np.exp(0.02 * rng.standard_normal((4, 3)))

    def row(p):
        return Limit("q → 0", "toy", m, m[:, None] ** p * noise).judge()

    steep = row(-0.5)
    assert steep.verdict == HOLDS
    far = with_error_bars([steep], [row(-0.49)], "companion")[0]
    cal = error_calibration()  # the companion's difference, calibrated to cover (×2.78)
    assert far.verdict == HOLDS and far.error == pytest.approx(0.01 * cal, rel=0.05)
    assert far.values["error_how"] == "companion"
    hi = steep.values["exponent_ci"][1]  # the end that decided (< 0)
    near = with_error_bars([steep], [row(-0.5 - hi * 1.5)], "companion")[0]  # moved past 0
    assert near.verdict == UNDECIDED and "within the numerical error" in near.reason
    # fails: the lower end decides
    grows = row(0.3)
    assert grows.verdict == FAILS
    assert with_error_bars([grows], [row(0.31)], "companion")[0].verdict == FAILS
    lo = grows.values["exponent_ci"][0]
    assert with_error_bars([grows], [row(0.3 - lo * 1.2)], "companion")[0].verdict == UNDECIDED
    # a companion that could not fit a rate: undecided only when its verdict differs
    nan_twin = dataclasses.replace(steep, values=steep.values | {"exponent": float("nan")})
    kept = with_error_bars([steep], [nan_twin], "companion")[0]
    assert (
        kept.verdict == HOLDS and kept.values["companion_verdict"] == HOLDS and kept.error is None
    )
    lost = dataclasses.replace(nan_twin, verdict="not applicable")
    assert with_error_bars([steep], [lost], "companion")[0].verdict == UNDECIDED
