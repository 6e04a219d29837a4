"""Observables against the error they cannot be known below (`stats.resolutions`,
`flows._solve.significance.observable_resolutions`): floors from closed forms, a difference
of two large nearly equal terms flagged at a loose tolerance and resolved at a tight one
against its exact value (a conservation law), no floor and no alarm for what is not a
function of θ alone, and one compiled program across tolerances."""

from __future__ import annotations

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows._solve.significance import (
    FLOAT64_EPS,
    MAX_COMPONENTS,
    describe_unresolved,
    observable_resolutions,
)

#: Σa² − Σ‖w‖² = 1e-3 at θ(0), with a and w of size 20 (a² ≈ 400 each)
SPLIT = 1e-3


def _linear_net():
    """A two-layer linear net f(x) = Σ_k a_k w_k·x fitted to y = 2000·x, from a_k ≈ ‖w_k‖
    ≈ 20. Along its gradient flow every a_k² − ‖w_k‖² is conserved (d/dt a_k² = d/dt
    ‖w_k‖² = −2 a_k E[r w_k·x]), so Σa² − Σ‖w‖² is SPLIT at every t: a small number
    computed as the difference of two terms of size ≈ 4000."""
    x = np.linspace(-1, 1, 20)[:, None]
    a0 = np.array([20.0, 22.0, 18.0])
    w0 = np.sqrt(a0**2 - SPLIT / 3)[:, None]
    theta0 = {"a": jnp.asarray(a0), "w": jnp.asarray(w0)}

    def model(p, x):
        return (x @ p["w"].T) @ p["a"]

    return flows.make_problem(model, flows.from_arrays(x, 2000.0 * x[:, 0]), theta0=theta0)


def split_observables(problem, theta, t):
    split = jnp.sum(theta["a"] ** 2) - jnp.sum(theta["w"] ** 2)
    return {
        "split": split,
        # the same number times a factor that is 1 at t = 1: a function of t too
        "split_t": split * (1.0 + t - 1.0),
        "positive": jnp.sum(theta["a"] > 0),  # an integer count
        "a": theta["a"],  # a small vector: one floor per component
    }


@pytest.fixture(scope="module")
def net():
    return _linear_net()


def test_a_conserved_difference_of_large_terms_is_unresolved_loose_and_resolved_tight(net):
    exact = float(jnp.sum(net.theta0["a"] ** 2) - jnp.sum(net.theta0["w"] ** 2))
    assert exact == pytest.approx(SPLIT, rel=1e-6)
    for rtol, resolved in ((1e-4, False), (1e-6, False), (1e-8, True), (1e-10, True)):
        traj = flows.simulate(
            net, t1=1.0, rtol=rtol, atol=rtol * 1e-3, n_save=11, observables=split_observables
        )
        rec = traj.stats.resolutions["split"]
        assert rec["value"] == float(traj.observables["split"][-1]) and rec["t"] == 1.0
        assert rec["resolved"] is resolved, (rtol, rec)
        # the floor covers the true error at every tolerance
        assert abs(rec["value"] - exact) <= rec["floor"], (rtol, rec)
        names = [r["quantity"] for r in traj.stats.unresolved]
        assert ("split" in names) is (not resolved)
        # a function of t: no floor and never an alarm, whatever the tolerance
        rec_t = traj.stats.resolutions["split_t"]
        assert rec_t["resolved"] is None and math.isnan(rec_t["floor"])
        assert "computed from t" in rec_t["reason"] and "split_t" not in names
        # an integer count and the running integral: no floor, said why
        assert traj.stats.resolutions["positive"]["resolved"] is None
        assert "integer" in traj.stats.resolutions["positive"]["reason"]
        assert "running integral" in traj.stats.resolutions["energy"]["reason"]
        # the components of a small vector: each resolved (|a_k| ≈ 25 ≫ its floor)
        assert all(traj.stats.resolutions[f"a[{k}]"]["resolved"] for k in range(3))
        if not resolved:
            text = describe_unresolved(
                next(r for r in traj.stats.unresolved if r["quantity"] == "split")
            )
            assert text.startswith("unresolved: the observable split at t = 1 is ")


def test_the_floor_of_a_difference_of_squares_is_its_closed_form(net):
    """o = Σa² − Σw²: the first-order term is Σ 2|θ_j|·s_j, and a ±s probe's remainder is
    |Σ s_a² − Σ s_w²| exactly (ε² = 1), s = atol + rtol·|θ|; a component a_k has floor
    s_k (linear: no remainder beyond round-off) plus 4·eps·|a_k|."""
    theta = {"a": jnp.array([3.0, -2.0]), "w": jnp.array([[1.0], [4.0]])}
    rtol, atol = 1e-3, 1e-4
    recs = observable_resolutions(net, split_observables, theta, 0.5, rtol, atol)
    a, w = np.array([3.0, -2.0]), np.array([1.0, 4.0])
    sa, sw = atol + rtol * np.abs(a), atol + rtol * np.abs(w)
    value = float(np.sum(a**2) - np.sum(w**2))
    expect = np.sum(2 * np.abs(a) * sa) + np.sum(2 * np.abs(w) * sw) + abs(np.sum(sa**2 - sw**2))
    assert recs["split"]["value"] == value
    assert recs["split"]["floor"] == pytest.approx(expect + 4 * FLOAT64_EPS * abs(value), rel=1e-9)
    for k in range(2):
        rec = recs[f"a[{k}]"]
        assert rec["floor"] == pytest.approx(sa[k] + 4 * FLOAT64_EPS * abs(a[k]), rel=1e-9)
        assert rec["resolved"] is True
    assert recs["split_t"]["resolved"] is None  # t = 0.5: still a function of t


def test_an_observable_that_does_not_move_has_floor_zero_and_is_exact(net):
    """A count computed in floats (a step function of θ that no probe crosses): its
    derivative and the probes' differences are 0, so its floor is 0 and a value of 0 is
    exact, not unresolved."""

    def obs(problem, theta, t):
        return {"negatives": jnp.sum((theta["a"] < 0).astype(jnp.float64))}

    rec = observable_resolutions(net, obs, net.theta0, 1.0, 1e-4, 1e-7)["negatives"]
    assert rec["value"] == 0.0 and rec["floor"] == 0.0 and rec["resolved"] is True


def test_large_vectors_non_finite_values_and_saved_extras_get_no_floor(net):
    big = MAX_COMPONENTS + 1

    def obs(problem, theta, t):
        return {"big": jnp.ones(big) * theta["a"][0], "undefined": jnp.asarray(jnp.nan)}

    values = {"big": np.ones(big) * 20.0, "undefined": np.nan, "s": 0.3}  # `s`: not returned
    recs = observable_resolutions(net, obs, net.theta0, 1.0, 1e-6, 1e-9, values=values)
    assert f"{big} components" in recs["big"]["reason"]
    assert "not a finite number" in recs["undefined"]["reason"]
    assert "not returned" in recs["s"]["reason"]
    assert all(r["resolved"] is None for r in recs.values())


def test_the_floors_compile_once_across_tolerances(net):
    """The observables function is traced for the floors' program once; other tolerances
    and times reuse it (they are run-time values), in the API and inside `simulate`."""
    calls = []

    def obs(problem, theta, t):
        calls.append(1)
        return {"split": jnp.sum(theta["a"] ** 2) - jnp.sum(theta["w"] ** 2)}

    values = {"split": np.asarray(SPLIT)}
    observable_resolutions(net, obs, net.theta0, 1.0, 1e-6, 1e-9, values=values)
    assert calls
    n = len(calls)
    for rtol, t in ((1e-4, 0.5), (1e-9, 2.0)):
        observable_resolutions(net, obs, net.theta0, t, rtol, rtol * 1e-3, values=values)
    assert len(calls) == n
    # inside simulate: a run at another tolerance traces the function only as often as a
    # rerun at the same tolerance does (the solve's own check of its arguments)
    kw = dict(t1=1.0, n_save=5, observables=obs)
    flows.simulate(net, rtol=1e-6, atol=1e-9, **kw)
    n = len(calls)
    flows.simulate(net, rtol=1e-6, atol=1e-9, **kw)
    same = len(calls) - n
    traj = flows.simulate(net, rtol=1e-8, atol=1e-11, **kw)
    assert len(calls) - n - same == same
    assert traj.stats.resolutions["split"]["resolved"] is True


def test_the_records_are_saved_with_the_run_and_bounded_by_the_global_error(net, tmp_path):
    traj = flows.simulate(
        net, t1=1.0, rtol=1e-8, atol=1e-11, n_save=5, observables=split_observables,
        global_error=True,
    )  # fmt: skip
    est = traj.global_error.observables
    for key, k in (("split", None), ("a[1]", 1)):
        e = est[key.split("[")[0]][-1] if k is None else est["a"][-1][k]
        assert traj.stats.resolutions[key]["floor"] >= e
    import h5py

    path = traj.save(tmp_path / "run.nc")
    with h5py.File(path) as f:
        saved = json.loads(f.attrs["stats"])["resolutions"]
    assert saved["split"]["floor"] == traj.stats.resolutions["split"]["floor"]
    assert saved["split_t"]["resolved"] is None and saved["split"]["resolved"] is True


def test_an_error_measure_keeps_its_floor_and_is_never_flagged(net):
    """The drift of a conserved quantity is exactly 0 along the flow: below its floor is
    what an accurate run gives, not a number that lost its digits."""

    def obs(problem, theta, t):
        split = jnp.sum(theta["a"] ** 2) - jnp.sum(theta["w"] ** 2)
        return {"drift": jnp.abs(split - SPLIT), "split": split}

    obs.error_measures = frozenset({"drift"})  # type: ignore[attr-defined]
    traj = flows.simulate(net, t1=1.0, rtol=1e-6, atol=1e-9, n_save=5, observables=obs)
    drift = traj.stats.resolutions["drift"]
    assert drift["value"] < drift["floor"] < math.inf and drift["resolved"] is None
    assert "error measure" in drift["reason"]
    names = [r["quantity"] for r in traj.stats.unresolved]
    assert "split" in names and "drift" not in names


def test_where_the_derivative_is_not_finite_the_probes_difference_is_the_floor(net):
    """o = √(a₀²) at a₀ = 0: autodiff gives 0·∞ = NaN, but moving a₀ by ±s (s = atol
    there) moves o by exactly s."""

    def obs(problem, theta, t):
        return {"size": jnp.sqrt(theta["a"][0] ** 2)}

    theta = {"a": jnp.array([0.0, 1.0]), "w": jnp.array([[1.0], [1.0]])}
    rec = observable_resolutions(net, obs, theta, 0.0, 1e-6, 1e-9)["size"]
    assert rec["floor"] == 1e-9 and rec["value"] == 0.0 and rec["resolved"] is False
