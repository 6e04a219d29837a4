"""`flows.claims.Window` (one constant shared by a theorem's parts, its joint window),
`edge_trend` (the window's edge against width) and `extend` (a limit row's sweep
extended until its confidence interval decides), on margins whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flows import ConfigError
from flows.claims import (
    FAILING,
    FAILS,
    FAILS_JOINTLY,
    HOLDS,
    UNDECIDED_SIZE,
    Check,
    Constant,
    Limit,
    Part,
    Window,
    edge_trend,
    extend,
)

RES = 1e-6


def const(default=0.5, lo=0.0, hi=1.0):
    return Constant("c", default, (lo, hi), "a shared constant", "c")


def window(parts, default=0.5, **kw):
    kw.setdefault("resolution", RES)
    return Window("Theorem X: one c for all parts", "test", const(default), parts, **kw)


def at_least(x0):
    return lambda c: c - x0


def at_most(x0):
    return lambda c: x0 - c


def test_window_is_the_intersection_to_the_resolution():
    w = window([Part("(1)", "c ≥ 0.3", at_least(0.3)), Part("(2)", "c ≤ 0.7", at_most(0.7))])
    s = w.search()
    assert len(s.window) == 1
    assert abs(s.lower_edge - 0.3) <= 2 * RES and abs(s.upper_edge - 0.7) <= 2 * RES
    assert s.inside and abs(s.clearance - 0.5) < 1e-3
    c = w.judge()
    assert c.verdict == HOLDS
    assert c.values["default_inside"]
    assert "c ∈ [0.3, 0.7]" in c.measured


def test_a_window_narrower_than_the_grid_spacing_is_found():
    # grid spacing 1/96 ≈ 0.0104; the window is 0.003 wide
    w = window(
        [Part("(a)", "c ≥ 0.5", at_least(0.5)), Part("(b)", "c ≤ 0.503", at_most(0.503))],
        default=0.5015,
    )
    s = w.search()
    assert abs(s.lower_edge - 0.5) <= 2 * RES and abs(s.upper_edge - 0.503) <= 2 * RES


def test_disjoint_parts_fail_jointly_naming_the_pair():
    parts = [
        Part("(45)", "c ≥ 0.6", at_least(0.6)),
        Part("(46)", "always", lambda c: 1.0),
        Part("(47)", "c ≤ 0.4", at_most(0.4)),
    ]
    c = window(parts).judge()
    assert c.verdict == FAILS_JOINTLY and c.verdict in FAILING
    assert c.values["conflict"] == ["(45)", "(47)"]
    assert "(45) and (47) exclude each other" in c.measured
    assert c.values["conflicts"] == [["(45)", "(47)"]]
    assert c.values["window"] == []


def test_a_part_that_holds_nowhere_is_named_alone():
    parts = [Part("(1)", "never", lambda c: -1.0), Part("(2)", "c ≥ 0.2", at_least(0.2))]
    c = window(parts).judge()
    assert c.verdict == FAILS_JOINTLY and c.values["conflict"] == ["(1)"]


def test_three_parts_that_exclude_each_other_only_together():
    # each pair intersects, the three do not: [0, 0.4] ∪ [0.6, 1], [0.3, 0.7], c ≥ 0.5 ∩ c ≤ 0.65 …
    parts = [
        Part("(1)", "c ≤ 0.4 or c ≥ 0.8", lambda c: max(0.4 - c, c - 0.8)),
        Part("(2)", "c ≥ 0.3", at_least(0.3)),
        Part("(3)", "c ≤ 0.75", at_most(0.75)),
    ]
    s = window(parts).search()
    assert s.empty is False  # [0.3, 0.4] is common
    parts[1] = Part("(2)", "c ≥ 0.45", at_least(0.45))
    s = window(parts).search()
    assert s.empty and s.conflict == ("(1)", "(2)", "(3)")


def test_a_part_holding_on_two_pieces_gives_a_union():
    w = window([Part("(1)", "|c − 0.5| ≥ 0.2", lambda c: abs(c - 0.5) - 0.2)], default=0.1)
    s = w.search()
    assert len(s.window) == 2
    (a, b), (c, d) = s.window
    assert a == 0.0 and abs(b - 0.3) <= 2 * RES and abs(c - 0.7) <= 2 * RES and d == 1.0
    assert "∪" in w.judge().measured


def test_default_outside_or_at_the_edge_is_said():
    parts = [Part("(1)", "c ≥ 0.3", at_least(0.3)), Part("(2)", "c ≤ 0.7", at_most(0.7))]
    out = window(parts, default=0.2).judge()
    assert out.verdict == HOLDS and not out.values["default_inside"]
    assert "outside the window" in out.reason
    edge = window(parts, default=0.3 + 1e-3).judge()
    assert not edge.values["default_inside"] and "inside the window but at its edge" in edge.reason


def test_nan_margins_do_not_hold():
    w = window([Part("(1)", "defined above 0.5", lambda c: math.nan if c < 0.5 else 1.0)])
    s = w.search()
    assert abs(s.lower_edge - 0.5) <= 2 * RES


def test_log_search_finds_edges_to_a_relative_resolution():
    w = Window(
        "Theorem Y",
        "test",
        Constant("beta", 0.01, (1e-4, 0.5), "β", "β"),
        [
            Part("(68)", "β ≥ 2e-3", lambda b: math.log(b / 2e-3)),
            Part("(64)", "β ≤ 0.05", lambda b: math.log(0.05 / b)),
        ],
        log=True,
        resolution=1e-5,
    )
    s = w.search()
    assert abs(s.lower_edge / 2e-3 - 1) <= 3e-5 and abs(s.upper_edge / 0.05 - 1) <= 3e-5
    assert s.inside  # 0.01 is well inside [2e-3, 0.05] on a log scale


def test_part_errors_make_a_default_margin_undecided():
    parts = [Part("(1)", "c ≥ 0.499", at_least(0.499), error=0.01)]
    c = window(parts, default=0.8).judge()
    assert c.verdict == HOLDS  # margin 0.3 ≫ 0.01
    parts = [
        Part("(1)", "c ≥ 0.3", at_least(0.3)),
        Part("(2)", "c ≤ 0.7 (at 0.5: margin 0.2)", at_most(0.7), error=0.25),
    ]
    assert window(parts).judge().verdict == "undecided (numerical)"


@pytest.mark.parametrize(
    ("field", "kw"),
    [
        ("parts", {"parts": []}),
        ("grid", {"grid": 2}),
        ("resolution", {"resolution": 0.0}),
        ("resolution", {"resolution": 0.5}),
        ("log", {"log": True}),
        ("clearance", {"clearance": 0.5}),
    ],
)
def test_bad_windows_name_the_field(field, kw):
    parts = kw.pop("parts", [Part("(1)", "c ≥ 0.3", at_least(0.3))])
    with pytest.raises(ConfigError, match=f"Theorem X.*{field!r}"):
        window(parts, **kw).judge()


def test_duplicate_labels_and_missing_range_are_refused():
    p = Part("(1)", "c ≥ 0.3", at_least(0.3))
    with pytest.raises(ConfigError, match="share a label"):
        window([p, p]).judge()
    with pytest.raises(ConfigError, match="admissible range"):
        Window("T", "s", Constant("c", 0.5), [p]).judge()


# ---------------------------------------------------------------------------------------
# edge_trend


WIDTHS = [250, 500, 1000, 2000, 4000]


def test_edge_trend_holds_when_the_edge_shrinks():
    edges = np.array([[2.0 / math.log(m) * (1 + 0.01 * j) for j in range(3)] for m in WIDTHS])
    c = edge_trend("Thm 2: δ′'s edge → 0", "test", WIDTHS, edges, symbol="δ′")
    assert c.verdict == HOLDS, c.measured
    assert "m = 4000: δ′ ≥ 0.244" in c.measured


def test_edge_trend_fails_when_the_edge_grows_and_when_the_window_is_empty():
    grow = np.array([[0.1 * m**0.2 * (1 + 0.01 * j) for j in range(3)] for m in WIDTHS])
    assert edge_trend("t", "s", WIDTHS, grow, symbol="δ′").verdict == FAILS
    empty = np.array([[0.5, 0.5, 0.5]] * 4 + [[np.nan] * 3])
    c = edge_trend("t", "s", WIDTHS, empty, symbol="δ′")
    assert c.verdict == FAILS and "empty at the largest m" in c.reason


# ---------------------------------------------------------------------------------------
# extend


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def fake_limit(decide_at: float):
    """A row undecided until the largest value reaches `decide_at`."""

    def judge(vals):
        top = max(vals)
        verdict = HOLDS if top >= decide_at else UNDECIDED_SIZE
        return Check("lim", "test", "→ L", f"top {top:g}", verdict, reason="rule", kind="limit")

    return judge


def test_extend_doubles_until_decided():
    clock, ran = FakeClock(), []

    def run(v):
        ran.append(v)
        clock.t += v / 1000  # one second per 1000

    c, ext = extend(
        "lim", fake_limit(16000), run, [1000, 2000, 4000], budget_s=100, clock=clock,
        last_seconds=4.0,
    )  # fmt: skip
    assert ran == [8000.0, 16000.0]
    assert c.verdict == HOLDS and ext.added == (8000.0, 16000.0)
    assert ext.spent_s == pytest.approx(24.0) and ext.stopped.startswith("decided")
    assert "extended m to 8000, 16000" in c.measured
    assert c.values["extension"]["after"] == HOLDS


def test_extend_stops_at_the_budget_and_says_what_a_decision_needs():
    clock, ran = FakeClock(), []

    def run(v):
        ran.append(v)
        clock.t += v / 1000

    c, ext = extend(
        "lim", fake_limit(64000), run, [1000, 2000, 4000], budget_s=30, clock=clock,
        last_seconds=4.0,
    )  # fmt: skip
    # 8 s then 16 s fit (24 s); 32 s for m = 32000 does not
    assert ran == [8000.0, 16000.0]
    assert c.verdict == UNDECIDED_SIZE and ext.stopped.startswith("budget")
    assert "m ≥ 32000" in c.reason and "raise the budget" in c.reason


def test_extend_leaves_a_decided_row_alone():
    c0, ext = extend(
        "lim", fake_limit(10), lambda v: pytest.fail("ran"), [100, 200, 400], budget_s=5
    )
    assert c0.verdict == HOLDS and ext.added == () and "extension" not in c0.values


def test_extend_with_the_kits_limit_rule():
    # |q − L| = m^-0.3 times a seed-to-seed scatter: undecided on 4 widths, decided wider
    rng = np.random.default_rng(3)
    noise = {}

    def values(ms):
        for m in ms:
            noise.setdefault(m, rng.normal(0.0, 0.35, 3))
        return np.array([[m**-0.3 * math.exp(e) for e in noise[m]] for m in ms])

    ms = [250.0, 500.0, 1000.0, 2000.0]

    def judge(vals):
        return Limit("lim", "test", list(vals), values(vals)).judge()

    assert judge(tuple(ms)).verdict == UNDECIDED_SIZE
    c, ext = extend("lim", judge, lambda v: None, ms, budget_s=1e9, last_seconds=0.0)
    assert c.verdict == HOLDS and len(ext.added) >= 1
    assert c.values["exponent_ci"][1] < 0


@pytest.mark.parametrize(
    ("field", "kw"),
    [
        ("budget_s", {"budget_s": 0}),
        ("budget_s", {"budget_s": math.inf}),
        ("values", {"values": [1000, 2000]}),
        ("factor", {"factor": 1.0}),
    ],
)
def test_bad_extensions_name_the_claim_and_field(field, kw):
    args = {"budget_s": 10.0, "values": [1000, 2000, 4000]} | kw
    vals = args.pop("values")
    with pytest.raises(ConfigError, match=f"'lim'.*{field!r}"):
        extend("lim", fake_limit(1), lambda v: None, vals, **args)
