"""`flows.stop_when_converged` (the run ends when θ would move by less than atol + rtol·‖θ‖
over the next decade of t) and `flows.claims.limit_in_time` (an observable's t → ∞ limit
with an error bar), against closed forms: linear least squares, whose flow is
θ(t) = θ* + exp(−Ht)(θ(0) − θ*), and power-law tails."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import flows
from flows.claims import limit_in_time

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3)) * np.array([1.0, 0.5, 0.2])  # H's eigenvalues spread ~25×
Y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * RNG.normal(size=40)


def _linear_problem():
    data = flows.from_arrays(X, Y)
    return flows.make_problem(lambda th, x: x @ th["w"], data, theta0={"w": jnp.zeros(3)})


def test_the_run_stops_where_the_change_per_decade_reaches_the_tolerance():
    problem = _linear_problem()
    stop = flows.stop_when_converged(rtol=1e-6)
    traj = flows.simulate(problem, t1=1e6, rtol=1e-10, atol=1e-12, stop=stop, n_save=50)
    assert traj.stats.result == flows.Result.event_stopped
    T = float(traj.times[-1])
    assert traj.stats.stopped_at == pytest.approx(T)
    H = X.T @ X / len(X)
    star = np.linalg.solve(H, X.T @ Y / len(X))

    def exact(t):
        return star + scipy.linalg.expm(-H * t) @ (0.0 - star)

    def criterion(t):  # ln(10)·t·‖∇L‖ − rtol·‖θ‖ on the closed form
        th = exact(t)
        return math.log(10) * t * np.linalg.norm(H @ (th - star)) - 1e-6 * np.linalg.norm(th)

    # the root, located to 1 % of the tolerance (measured 0.1 %; the solve's own error,
    # ln(10)·T·λ_max·(rtol·‖θ‖ + atol) carried to the criterion, would allow ~14 %)
    assert abs(criterion(T)) <= 1e-2 * 1e-6 * np.linalg.norm(star)
    assert criterion(0.9 * T) > 0  # … and not before it
    assert np.allclose(traj.param("w", -1), exact(T), rtol=1e-7, atol=1e-10)
    # what the stop promises for a quadratic: ‖θ(T) − θ*‖ ≤ ‖∇L‖/λ_min
    promised = 1e-6 * np.linalg.norm(star) / (math.log(10) * T * np.linalg.eigvalsh(H)[0])
    assert np.linalg.norm(traj.param("w", -1) - star) <= 1.01 * promised


def test_a_loss_without_minimizer_runs_to_its_horizon():
    # separable ±1 labels under the logistic loss: ‖θ‖ grows like log t, never converges
    x = np.array([[1.0, 0.2], [2.0, -0.3], [-1.0, 0.1], [-1.5, -0.2]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    data = flows.from_arrays(x, y)
    problem = flows.make_problem(
        lambda th, x: x @ th["w"], data, loss_fn=flows.logistic, theta0={"w": jnp.zeros(2)}
    )
    traj = flows.simulate(problem, t1=1e3, stop=flows.stop_when_converged(rtol=1e-6))
    assert traj.stats.result == flows.Result.successful and traj.stats.stopped_at is None
    assert float(traj.times[-1]) == pytest.approx(1e3)


@pytest.mark.parametrize("kw", [{"rtol": -1.0}, {"atol": math.nan}, {"rtol": 0.0, "atol": 0.0}])
def test_bad_tolerances_are_refused(kw):
    with pytest.raises(flows.ConfigError, match="stop_when_converged"):
        flows.stop_when_converged(**kw)


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0])
def test_limit_in_time_extrapolates_a_power_law_tail(p):
    t = np.logspace(0, 4, 41)
    q = 3.0 + 2.0 * t**-p
    m = limit_in_time(t, q)
    assert abs(m.value - 3.0) <= m.error  # the bar covers the truth …
    assert m.error < abs(q[-1] - 3.0) or m.error < 1e-12  # … and beats the last value
    assert "order" in m.how or "tail" in m.how


def test_limit_in_time_says_when_there_is_no_limit():
    t = np.logspace(0, 4, 41)
    m = limit_in_time(t, np.log(t))  # grows without bound
    assert not math.isfinite(m.error) and "not converging" in m.how
    flat = limit_in_time(t, np.full_like(t, 2.5))
    assert flat.value == 2.5 and flat.error < 1e-14  # round-off only
    with pytest.raises(flows.ConfigError, match="log-spaced"):
        limit_in_time(np.linspace(1, 10, 20), np.ones(20))


def test_a_stop_tighter_than_the_solve_fires_at_the_solves_noise_floor():
    """Asked for a change per decade of 1e-8·‖θ‖ under a solve at rtol 1e-6, the flow
    hovers within its tolerance of θ*, where ‖∇L‖ stops decaying while t grows: the stop
    used never to fire (the run went on to t1 = 1e5). It now ends where ‖∇L‖ is within
    `NOISE_FACTOR` of its change over the solve's tolerance — and not before: θ(T) is as
    close to θ* as ‖∇L‖/λ_min allows, at a gradient no larger than that noise."""
    problem = _linear_problem()
    stop = flows.stop_when_converged(rtol=1e-8)
    traj = flows.simulate(problem, t1=1e5, rtol=1e-6, atol=1e-9, stop=stop, n_save=50)
    assert traj.stats.result == flows.Result.event_stopped
    T = float(traj.times[-1])
    assert T < 1e3
    H = X.T @ X / len(X)
    star = np.linalg.solve(H, X.T @ Y / len(X))
    theta = np.asarray(traj.param("w", -1))
    grad = H @ (theta - star)
    lam = np.linalg.eigvalsh(H)
    noise = np.linalg.norm(H, 2) * np.linalg.norm(1e-9 + 1e-6 * np.abs(theta))
    assert np.linalg.norm(grad) <= stop.NOISE_FACTOR * noise * 1.01
    assert np.linalg.norm(theta - star) <= np.linalg.norm(grad) / lam[0] * 1.01
    # … and it did not stop early: the exact flow's gradient at 0.8·T is above the floor
    early = star + scipy.linalg.expm(-H * 0.8 * T) @ (0.0 - star)
    assert np.linalg.norm(H @ (early - star)) > stop.NOISE_FACTOR * noise / np.sqrt(3)
