"""Stage detection on constructed curves with known answers."""

import math

import numpy as np
import pytest

from flows import average_decay_rate, detect_stages_from_loss, first_crossing


def _sig(z):
    return 1 / (1 + np.exp(-z))


def test_first_crossing_interpolates():
    t = np.linspace(0, 10, 11)
    v = 10 - t  # crosses 2.5 at t = 7.5
    assert first_crossing(t, v, 2.5) == pytest.approx(7.5)
    assert first_crossing(t, v, 2.5, after=8.0) == pytest.approx(8.0)
    assert first_crossing(t, t, 3.3, below=False) == pytest.approx(3.3)
    assert math.isnan(first_crossing(t, v, -1.0))


def test_loss_detector_on_two_stage_curve():
    """L = 1 − 0.6 σ(3(t−5)) − 0.3 σ(2(t−20)): rate peaks 0.45 at t = 5; 10% of it is
    reached where σ(1−σ) = 0.025 (t = 5 ∓ 1.212) and, for the second step,
    where 0.6 σ(1−σ) = 0.045 (t = 20 ∓ 1.205)."""
    t = np.linspace(0, 40, 4001)
    loss = 1 - 0.6 * _sig(3 * (t - 5)) - 0.3 * _sig(2 * (t - 20))
    st = detect_stages_from_loss(t, loss, rel_threshold=0.1, smooth=1)
    z = math.log((1 - math.sqrt(1 - 0.1)) / (1 + math.sqrt(1 - 0.1)))  # σ(1−σ) = 0.025
    assert st["plateau_end"] == pytest.approx(5 + z / 3, abs=0.02)
    assert st["descent_end"] == pytest.approx(5 - z / 3, abs=0.02)
    z2 = math.log((1 - math.sqrt(1 - 0.3)) / (1 + math.sqrt(1 - 0.3)))  # σ(1−σ) = 0.075
    assert st["next_descent"] == pytest.approx(20 + z2 / 2, abs=0.02)
    assert st["peak_rate"] == pytest.approx(0.45, rel=1e-3)


def test_loss_detector_flat_and_single_step():
    t = np.linspace(0, 10, 101)
    flat = detect_stages_from_loss(t, np.ones_like(t))
    assert all(math.isnan(flat[k]) for k in ("plateau_end", "descent_end", "next_descent"))
    one = detect_stages_from_loss(t, 1 - _sig(4 * (t - 5)), smooth=1)
    assert 3 < one["plateau_end"] < 5 < one["descent_end"] < 7
    assert math.isnan(one["next_descent"])
    with pytest.raises(ValueError):
        detect_stages_from_loss(t[:2], t[:2])


def test_average_decay_rate():
    t = np.linspace(0, 2, 21)
    assert average_decay_rate(t, 3 - t, 0.5, 1.5) == pytest.approx(1.0)
    assert math.isnan(average_decay_rate(t, 3 - t, 1.0, 1.0))
