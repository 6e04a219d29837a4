"""`flows.sweep(…, global_error=True)` (`flows sweep … --global-error`): each number a point
records gets an error bar from the same point computed with every adaptive solve in it at
tolerances 10× tighter — checked against a closed form; numbers behind which no adaptive
solve ran (gradient descent) get none (NaN, with the note); the choice is part of the
folder's settings."""

import dataclasses

import numpy as np
import pytest
import scipy.linalg

import flows
from flows._sweep import engine as _sweep
from flows.claims import error_calibration

RNG = np.random.default_rng(3)
X = RNG.normal(size=(40, 5))
W_STAR = RNG.normal(size=5)


def _problem():
    return flows.make_problem(
        lambda p, x: x @ p["w"], flows.from_arrays(X, X @ W_STAR), theta0={"w": np.zeros(5)}
    )


def _exact_loss(t: float) -> float:
    """Least squares: w(t) = w* − e^{−Ht} w*, H = XᵀX/n, so L(t) in closed form."""
    h = X.T @ X / len(X)
    w = W_STAR - scipy.linalg.expm(-h * t) @ W_STAR
    return 0.5 * float(np.mean((X @ w - X @ W_STAR) ** 2))


@dataclasses.dataclass(frozen=True)
class LeastSquares(_sweep.AbstractSweepSpec):
    """L(t) of the least-squares flow at t on a grid of t (and, by gradient descent, the
    same t at η = 0.01)."""

    rtol: float = 1e-5

    experiment = "least-squares"
    axes = (_sweep.Axis("t", float, lambda v: tuple(_sweep.to_float(x, "--t") for x in v), "--t"),)

    def settings(self):
        return {"rtol": self.rtol}

    def variables(self):
        return {"loss_final": (), "gd_loss": (), "steps": ()}

    def run_point(self, t):
        traj = flows.simulate(_problem(), t1=t, rtol=self.rtol, atol=self.rtol * 1e-3, n_save=2)
        gd = flows.gradient_descent(_problem(), learning_rate=0.01, t1=t, n_save=2)
        return {
            "loss_final": float(traj.loss[-1]),
            "gd_loss": float(gd.loss[-1]),
            "steps": float(traj.stats["steps"]),
        }


@dataclasses.dataclass(frozen=True)
class DescentOnly(LeastSquares):
    def variables(self):
        return {"gd_loss": ()}

    def run_point(self, t):
        gd = flows.gradient_descent(_problem(), learning_rate=0.01, t1=t, n_save=2)
        return {"gd_loss": float(gd.loss[-1])}


def test_error_bars_cover_the_closed_form_error(tmp_path):
    res = flows.sweep(LeastSquares(), tmp_path / "s", {"t": [0.5, 2.0]}, progress=False,
                      global_error=True)  # fmt: skip
    assert res.ok
    ds = flows.load_sweep(tmp_path / "s" / "sweep.nc")
    assert "steps_error" not in ds  # a count is no result of the flow
    for t in (0.5, 2.0):
        value = float(ds["loss_final"].sel(t=t))
        bar = float(ds["loss_final_error"].sel(t=t))
        true = abs(value - _exact_loss(t))
        assert 0 < true <= bar <= 30 * true  # covers, and is no wild over-estimate
    # gradient descent ran beside the flow: its number's difference is 0 (no tolerance
    # to tighten), an error bar of 0 that is no estimate of GD's error
    assert float(ds["gd_loss_error"].sel(t=2.0)) == 0.0
    assert "global-error estimate of loss_final" in ds["loss_final_error"].attrs["description"]


def test_no_adaptive_solve_no_error_bar(tmp_path):
    res = flows.sweep(DescentOnly(), tmp_path / "g", {"t": [0.5]}, progress=False,
                      global_error=True)  # fmt: skip
    ds = flows.load_sweep(tmp_path / "g" / "sweep.nc")
    assert res.ok and np.isnan(float(ds["gd_loss_error"].sel(t=0.5)))
    note = str(ds["note"].sel(t=0.5).values)
    assert "error bars not estimated: no adaptive solve" in note


def test_the_choice_is_part_of_the_folders_settings(tmp_path):
    out = tmp_path / "s"
    flows.sweep(LeastSquares(), out, {"t": [0.5]}, progress=False, global_error=True)
    with pytest.raises(flows.ConfigError, match="Refusing to mix"):
        flows.sweep(LeastSquares(), out, {"t": [0.5]}, progress=False)
    with pytest.raises(flows.ConfigError, match="global_error"):
        flows.sweep(LeastSquares(), tmp_path / "x", {"t": [0.5]}, global_error="yes")
    assert error_calibration() == pytest.approx(2.5 / 0.9)
