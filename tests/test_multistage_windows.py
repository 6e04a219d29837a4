"""Multistage Theorem 2's δ′ and Theorem 3's β as one constant per theorem (the joint
windows, on synthetic rows and trajectories whose windows are known in closed form), and
Theorem 2 (3)'s extension (the row says how far it went)."""

import math

import numpy as np
import pytest

from flows.claims import (
    FAILS_JOINTLY,
    HOLDS,
    NOT_APPLICABLE,
    UNDECIDED_SIZE,
    Extension,
    Window,
)
from flows.experiments import multistage as ex
from flows.experiments.multistage import windows
from flows.experiments.multistage.extension import extend_descent_time
from flows.experiments.multistage.sweep_checks import check_sweep

CFG = ex.Config(
    m=300,
    data="assumption",
    target="f2",
    n=40,
    sweep_m=(250, 500, 1000, 2000, 4000),
    sweep_alpha=(1.0,),
    sweep_seeds=(0, 1, 2),
    sweep_n=40,
    targets=(),
)


def _rows(td, q=1e-3, wp=1e-4, widths=CFG.sweep_m):
    return [
        {"alpha": 1.0, "m": m, "seed": s, "T_d": td(m, s), "q_max_Td": q, "wperp_max_Td": wp}
        for m in widths
        for s in CFG.sweep_seeds
    ]


def test_theorem2_window_edge_is_the_closed_form():
    # T_d = ln m / 2 + 1: (45) upper needs δ′ ≥ 2 − ln m/T_d at α = 1
    rows = _rows(lambda m, s: 0.5 * math.log(m) + 1.0 + 0.01 * s)
    c = windows.theorem2_window(rows, CFG, 1.0, 4000)
    td = 0.5 * math.log(4000) + 1.02  # the latest seed binds
    assert c.verdict == HOLDS
    assert abs(c.values["lower_edge"] - (2 - math.log(4000) / td)) < 2e-4
    assert c.values["default_inside"]


def test_theorem2_edge_shrinks_when_3_holds_and_not_when_it_fails():
    good = windows.theorem2_windows(_rows(lambda m, s: 0.5 * math.log(m) + 1.0 + 0.01 * s), CFG)
    trend = next(c for c in good if "edge → 0" in c.claim)
    assert trend.verdict == HOLDS, trend.measured
    # slope 0.6 instead of 1/2: the edge tends to 2 − 1/0.6 > 0 and does not shrink
    bad = windows.theorem2_windows(_rows(lambda m, s: 0.6 * math.log(m) + 0.01 * s), CFG)
    trend = next(c for c in bad if "edge → 0" in c.claim)
    assert trend.verdict != HOLDS


def test_theorem2_47_alone_can_move_the_window():
    # q_max(T_d) = m^{-0.1}: (47) needs (1/2 − δ′) ln m ≤ 0.1 ln m, i.e. δ′ ≥ 0.4
    rows = _rows(lambda m, s: 0.5 * math.log(m), q=4000**-0.1, wp=1e-9)
    c = windows.theorem2_window(rows, CFG, 1.0, 4000)
    assert abs(c.values["lower_edge"] - 0.4) < 2e-4
    assert c.values["holds_sets"]["(47) q_max"][0][0] == pytest.approx(0.4, abs=2e-4)


def _trajectory(overshoot: float, m: int = 5000):
    """A K̂ that rises logistically from T_p and overshoots 1 by `overshoot` later on."""
    tau = np.linspace(0.0, 400.0, 40001)
    k = 1.0 / (1.0 + np.exp(-2.0 * (tau - 4.0)))
    k = k + overshoot * np.exp(-(((tau - 30.0) / 5.0) ** 2))
    loss = 1.0 - 0.5 * k
    return tau, {"K_hat": k, "grad_rel": 0.5 * (1.0 - k), "loss": loss}


def test_theorem3_window_edges_are_the_closed_forms():
    cfg = ex.Config(m=5000, beta=0.01)
    tau, o = _trajectory(0.01)
    parts = {p.label: p for p in windows.theorem3_parts(tau, o, 5000, 1.0, 1.0)}
    beta = windows.Constant("beta", 0.01, (1e-3, 0.5), "", "β")
    s68 = Window("t", "s", beta, [parts["(68)"]], log=True, resolution=1e-5).search()
    # (68): 2β ≥ the overshoot 0.01 ⇒ β ≥ 0.005 (the overshoot sits inside [T_d, T_sp])
    assert abs(s68.lower_edge / 0.005 - 1) < 1e-3
    c = windows.check_theorem3_window(tau, o, cfg, 1.0, 1.0)
    # (64) at ≥ 10: β ≤ ln m/(400 T_d(β)) ≈ 0.0037 < 0.005: (64) and (68) exclude each other
    assert c.verdict == FAILS_JOINTLY
    assert ["(64)", "(68)"] in c.values["conflicts"]
    assert 5 < c.values["largest_reading"] < 10


def test_theorem3_window_opens_without_the_overshoot():
    cfg = ex.Config(m=5000, beta=0.002)
    tau, o = _trajectory(0.0)
    c = windows.check_theorem3_window(tau, o, cfg, 1.0, 1.0)
    assert c.verdict == HOLDS, c.measured
    assert c.values["lower_edge"] < 0.002 < c.values["upper_edge"]


def test_literal_ratio_is_shown_beside_the_local_slopes():
    rows = _rows(lambda m, s: 0.5 * math.log(m) + 1.0 + 0.05 * math.sin(m + s))
    (c, *_), _ = check_sweep(rows, CFG)
    assert "local slopes" in c.measured and "literal T_d/ln m" in c.measured
    assert len(c.values["literal_ratio"]) == len(CFG.sweep_m)


def test_extension_row_says_how_far_it_went():
    rows = _rows(lambda m, s: 0.5 * math.log(m) + 1.0 + 0.05 * math.sin(m + s))
    ext = Extension("m", (250.0, 500.0, 1000.0, 2000.0, 4000.0), (8000.0,), (40.0,), 120.0,
                    40.0, "budget: …", UNDECIDED_SIZE, HOLDS)  # fmt: skip
    rows += _rows(lambda m, s: 0.5 * math.log(m) + 1.0, widths=(8000,))
    (c, *_), _ = check_sweep(rows, CFG, {1.0: ext})
    assert "extended m to 8000" in c.measured
    assert c.values["extension"]["added"] == [8000.0]
    assert c.values["widths"][-1] == pytest.approx(math.sqrt(4000 * 8000))  # the new pair


def test_one_budget_for_every_alpha_and_the_rest_say_why(monkeypatch):
    """Every undecided α is extended from one budget, `extend_alpha` first; an α the budget
    no longer reaches is not extended, and its row says what the next width would take.
    The budget counts estimated CPU seconds (the runs' field evaluations × m × n), so the
    extension is the same whatever the clocks say (here they jump at random)."""
    import random
    import time

    from flows.experiments.multistage import extension

    cfg = ex.Config(
        m=300, data="assumption", target="f2", n=40, sweep_m=CFG.sweep_m,
        sweep_alpha=(0.75, 1.0), sweep_seeds=CFG.sweep_seeds, sweep_n=40, targets=(),
        extend_budget_s=30.0, extend_alpha=1.0,
    )  # fmt: skip
    seeds = len(cfg.sweep_seeds)
    # 100 evaluations per run: a width costs 10 estimated CPU s at m = 4000, ∝ m
    monkeypatch.setattr(extension, "SECONDS_PER_EVALUATION", 10.0 / (100 * seeds * 4000 * 40))

    def td(alpha, m, s):  # a wobble around the limit: undecided, and stays so
        return (2 * alpha - 1) / 2 * math.log(m) + 1.0 + 0.05 * math.sin(m + s)

    def rows_at(alpha, widths):
        return [
            {"alpha": alpha, "m": m, "seed": s, "T_d": td(alpha, m, s), "q_max_Td": 1e-3,
             "wperp_max_Td": 1e-4, "vf_evals": 100, "cpu_s": random.uniform(0, 100)}
            for m in widths
            for s in cfg.sweep_seeds
        ]  # fmt: skip

    def fake_sweep(one, *, metrics, companion, progress=False):
        return rows_at(one.sweep_alpha[0], one.sweep_m)

    def jumpy():
        return random.uniform(0, 1e4)

    monkeypatch.setattr(extension, "descent_time_sweep", fake_sweep)
    for clock in ("process_time", "perf_counter", "monotonic"):
        monkeypatch.setattr(time, clock, jumpy)
    rows = rows_at(0.75, cfg.sweep_m) + rows_at(1.0, cfg.sweep_m)
    exts = extend_descent_time(cfg, rows, [])
    assert list(exts) == [1.0, 0.75]  # extend_alpha first
    first, second = exts[1.0], exts[0.75]
    # α = 1: m = 8000 predicted 20 CPU s (10 at m = 4000, ∝ m) and run; 16000 (≈ 40) not
    assert first.added == (8000.0,) and first.spent_s == pytest.approx(20.0)
    assert first.seconds == pytest.approx((20.0,))
    # α = 0.75: 10 CPU s left of the one budget, its next width ≈ 20: not extended, said
    assert second.added == () and "budget" in second.stopped and "every α" in second.stopped
    assert "10 CPU s left" in second.stopped and "estimated" in second.stopped
    checks, _ = check_sweep(rows, cfg, exts)
    for c in checks[:2]:
        if c.verdict == UNDECIDED_SIZE:
            assert "raise the budget" in c.reason and "CPU s" in c.measured


def test_no_extension_under_quick_or_without_budget():
    assert extend_descent_time(ex.default_config(quick=True), [], []) == {}
    assert ex.default_config(quick=True).extend_budget_s == 0
    assert ex.default_config().extend_budget_s > 0


def test_default_constants_sit_inside_the_measured_windows():
    # the windows at the defaults' tested sizes (m = 4000, every α): (45) upper edges
    # 0.82, 0.51, 0.37 for α = 0.75, 1, 1.25 (results of `flows check multistage`)
    dp = ex.default_config().delta_prime
    for edge in (0.82, 0.51, 0.37):
        assert edge + 0.05 * (2 - edge) < dp < 2 - 0.05 * (2 - edge)


def test_not_applicable_with_fewer_than_three_seeds():
    cfg = ex.Config(sweep_m=(250, 500, 1000, 2000, 4000), sweep_alpha=(1.0,), sweep_seeds=(0,))
    rows = [r for r in _rows(lambda m, s: 0.5 * math.log(m) + 1) if r["seed"] == 0]
    out = windows.theorem2_windows(rows, cfg)
    assert next(c for c in out if "edge → 0" in c.claim).verdict == NOT_APPLICABLE
