"""The claim kit (`flows.claims`): every verdict kind reachable, critical constants against
closed forms, bad claims refused with the claim and the field named."""

import dataclasses
import json
import math

import numpy as np
import pytest

from flows import ConfigError, format_table
from flows.claims import (
    FAILS,
    HOLDS,
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    NOT_APPLICABLE,
    NOT_OBSERVED,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    VACUOUS,
    VERDICTS,
    Bound,
    Constant,
    Existential,
    ForAll,
    Hypothesis,
    Limit,
    Measured,
    Near,
    agrees,
    error_calibration,
    limit_in_time,
    power_law_fit,
    richardson,
)
from flows.claims._checks import _notes, format_checks, row_notes, verdict_counts

C = Constant("C", 10.0, (0.0, math.inf))


def _bound(q, b, **kw):
    """A bound on q with a small numerical error bar (1e-9) unless `error` is given: a row
    whose error is not estimated is `undecided (numerical)`, never judged on its value."""
    return Bound("claim", "paper Thm 1", Measured(q, kw.pop("error", 1e-9)), b, **kw)


@pytest.mark.parametrize("q", [0.05, 0.7, 3.0])
def test_critical_constant_is_the_closed_form(q):
    """'q ≤ C·b' flips at C* = q/b; the verdict at C = 10 agrees with C* ≤ 10."""
    b = 0.11
    c = _bound(q, lambda C: C * b, constants=(C,)).judge()
    crit = float(c.critical[0].split("C ≥ ")[1])
    assert crit == pytest.approx(q / b, rel=2e-3)  # printed to 3 significant digits
    assert c.verdict == (HOLDS if q / b <= 10 else FAILS)
    assert c.margin == pytest.approx(10 * b - q)


def test_lower_bound_critical_constant_and_sense():
    c = _bound(0.3, lambda C: C * 2.0, sense="lower", constants=(Constant("C", 0.1, (0, 1)),))
    assert c.judge().verdict == HOLDS
    assert c.judge().critical == ("holds for C ≤ 0.15",)
    low = _bound(0.3, lambda C: C * 2.0, sense="lower", constants=(Constant("C", 0.5, (0, 1)),))
    assert low.judge().verdict == FAILS


def test_bound_outside_the_a_priori_range_is_vacuous_never_holds():
    """A relative W₂ lies in [0, 2]: a bound of 89 could not have failed."""
    c = _bound(0.3, lambda C: C * 8.9, constants=(C,), a_priori=(0.0, 2.0)).judge()
    assert c.verdict == VACUOUS
    assert "could not have failed" in c.reason
    # where it stops being vacuous: C < 2/8.9
    assert c.critical == ("holds for C ≥ 0.0337; vacuous for C ≥ 0.225",)
    # the same measurement against a bound inside the range is judged
    assert _bound(0.3, 0.5, a_priori=(0.0, 2.0)).judge().verdict == HOLDS
    assert _bound(0.3, 0.2, a_priori=(0.0, 2.0)).judge().verdict == FAILS
    # a lower bound at the bottom of the range
    assert _bound(0.3, 0.0, sense="lower", a_priori=(0.0, 2.0)).judge().verdict == VACUOUS


def test_margin_inside_the_error_bar_is_undecided():
    c = _bound(1.0, 1.0 + 1e-6, error=1e-5).judge()
    assert c.verdict == UNDECIDED and "1e-06" in c.reason
    assert _bound(1.0, 1.0 + 1e-4, error=1e-5).judge().verdict == HOLDS
    assert _bound(1.0, 1.0 - 1e-4, error=1e-5).judge().verdict == FAILS
    missing = _bound(1.0, 2.0, error=math.nan).judge()
    assert missing.verdict == UNDECIDED and "numerical error not estimated" in format_table(
        [missing]
    )


def test_hypothesis_not_met_is_reported_not_judged():
    hyp = Hypothesis("α > 1/2", False, "α = 0.4")
    c = _bound(0.1, 1.0, hypotheses=(hyp, Hypothesis("tanh-like", lambda: True))).judge()
    assert c.verdict == OUTSIDE_HYPOTHESIS
    assert "α > 1/2 (α = 0.4)" in c.reason and "tanh-like" not in c.reason
    assert [h["holds"] for h in c.hypotheses] == [False, True]


def test_bad_claims_are_config_errors_naming_claim_and_field():
    def boom():
        raise ZeroDivisionError("x")

    with pytest.raises(ConfigError, match="claim 'claim'.*'no_range'.*admissible"):
        _bound(0.1, lambda C: C, constants=(Constant("no_range", 1.0),)).judge()
    with pytest.raises(ConfigError, match="'δ′' is not a Python identifier.*symbol"):
        _bound(0.1, lambda C: C, constants=(Constant("δ′", 1.0, (0, 2)),)).judge()
    with pytest.raises(ConfigError, match="default 5.0 is outside"):
        _bound(0.1, lambda C: C, constants=(Constant("C", 5.0, (0, 1)),)).judge()
    with pytest.raises(ConfigError, match="hypothesis 'h' raised ZeroDivisionError"):
        _bound(0.1, 1.0, hypotheses=(Hypothesis("h", boom),)).judge()
    with pytest.raises(ConfigError, match="a_priori"):
        _bound(3.0, 1.0, a_priori=(0.0, 2.0)).judge()
    with pytest.raises(ConfigError, match="sense"):
        _bound(0.1, 1.0, sense="sideways").judge()


def test_near_is_a_bound_on_the_distance_with_a_named_tolerance():
    c = Near("K/K′ → 1/2", "Prop 2", Measured(0.52, 1e-4), 0.5, Constant("tol", 0.05, (0, 1)))
    j = c.judge()
    assert j.verdict == HOLDS and j.kind == "equality"
    assert j.critical == ("holds for tol ≥ 0.02",)
    far = Near("x", "s", Measured(0.7, 1e-9), 0.5, Constant("tol", 0.05, (0, 1))).judge()
    assert far.verdict == FAILS


def test_power_law_fit_recovers_the_exponent_and_its_interval_covers_it():
    rng = np.random.default_rng(0)
    m = np.array([100.0, 200, 400, 800, 1600])
    exact = power_law_fit(m, (m**-0.5)[:, None] * np.ones((1, 3)))
    assert exact["p"] == pytest.approx(-0.5, abs=1e-12)
    covered = 0
    for _ in range(200):
        y = m[:, None] ** -0.5 * np.exp(0.1 * rng.standard_normal((5, 3)))
        lo, hi = power_law_fit(m, y)["ci"]
        covered += lo <= -0.5 <= hi
    assert 0.9 <= covered / 200 <= 0.99  # a 95 % interval


def test_limit_rule_holds_fails_undecided_and_needs_enough_runs():
    rng = np.random.default_rng(1)
    m = [100, 200, 400, 800]
    noise = np.exp(0.05 * rng.standard_normal((4, 3)))
    decays = np.array(m, float)[:, None] ** -0.5 * noise
    grows = np.array(m, float)[:, None] ** 0.3 * noise
    flat = np.full((4, 3), 0.1) * np.exp(0.3 * rng.standard_normal((4, 3)))
    assert Limit("q → 0", "s", m, decays).judge().verdict == HOLDS
    assert Limit("q → 1", "s", m, 1.0 + decays, limit=1.0).judge().verdict == HOLDS
    assert Limit("q → 0", "s", m, grows).judge().verdict == FAILS
    assert Limit("q → 0", "s", m, flat).judge().verdict == UNDECIDED_SIZE
    few = Limit("q → 0", "s", m[:3], decays[:3]).judge()
    assert few.verdict == NOT_APPLICABLE and "≥ 4 widths" in few.reason
    lit = Limit("q → 0", "s", m, decays, tolerance=0.01).judge()
    assert "outside the tolerance 0.01" in lit.measured and lit.verdict == HOLDS


def test_existential_transient_persistent_not_observed():
    t = np.linspace(0.0, 10.0, 101)
    a = Existential("X can happen", "s", [t, t], [(t > 3) & (t < 4), t < 0], ["a", "b"], "two runs")
    j = a.judge()
    assert j.verdict == HOLDS_TRANSIENT and "t ≈ 3.1–3.9" in j.measured
    assert "searched: two runs" in j.reason
    p = Existential("X", "s", [t], [t > 8], ["a"], "one run").judge()
    assert p.verdict == HOLDS_PERSISTENT and "to the end" in p.measured
    n = Existential("X", "s", [t], [t < 0], ["a"], "one run").judge()
    assert n.verdict == NOT_OBSERVED and n.measured == "in 0 of 1 runs"


def test_table_and_counts_show_every_verdict_kind():
    checks = [
        _bound(0.3, lambda C: C * 8.9, constants=(C,), a_priori=(0.0, 2.0)).judge(),
        _bound(0.1, 1.0).judge(),
        _bound(1.0, 1.0 + 1e-6, error=1e-5).judge(),
    ]
    n = verdict_counts(checks)
    assert set(n) == set(VERDICTS) and sum(n.values()) == 3
    text = format_table(checks, width=120)
    assert "1 hold, 0 fail, 0 not applicable, 1 vacuous, 1 undecided (numerical)" in text
    assert "critical: holds for C ≥ 0.0337; vacuous for C ≥ 0.225" in text
    with pytest.raises(ValueError, match="verdict must be one of"):
        type(checks[0])("c", "s", "p", "m", "probably")


def _gd_on_a_quadratic(eta: float, lam: float = 1.3, T: float = 2.0) -> float:
    """θ(T) of gradient descent on L = λθ²/2 from θ = 1: (1 − ηλ)^(T/η), in closed form."""
    return (1.0 - eta * lam) ** (T / eta)


@pytest.mark.parametrize("eta", [0.1, 0.02, 0.004])
def test_richardson_recovers_the_flow_and_its_error_bar_covers_the_truth(eta):
    exact = math.exp(-1.3 * 2.0)  # the flow's θ(T)
    etas = [eta, eta / 2, eta / 4]
    m = richardson([_gd_on_a_quadratic(e) for e in etas], etas)
    assert "observed order" in m.how and "pre-asymptotic" not in m.how
    plain = abs(_gd_on_a_quadratic(etas[-1]) - exact)
    assert abs(m.value - exact) <= m.error  # the bar covers the true error …
    assert m.error < plain / 3  # … and the extrapolation beats the finest GD run
    # second order: with a fourth step size the value improves like η²
    m4 = richardson([_gd_on_a_quadratic(e) for e in [*etas, eta / 8]], [*etas, eta / 8])
    assert abs(m4.value - exact) <= m4.error < m.error


def test_richardson_flags_measurements_outside_the_asymptotic_regime():
    etas = [0.1, 0.05, 0.025]
    # an O(√η) error: the observed order is 0.5, not GD's 1
    m = richardson([1.0 + math.sqrt(e) for e in etas], etas)
    assert "pre-asymptotic" in m.how and "0.50" in m.how
    assert abs(m.value - 1.0) <= m.error  # the widened bar still covers the limit
    # measurements that no longer change: order undefined, error bar 0 (their spread)
    flat = richardson([0.5, 0.5, 0.5], etas)
    assert flat.value == 0.5 and flat.error == 0.0 and "pre-asymptotic" in flat.how
    # oscillating differences (sign change) are not in the asymptotic regime either
    assert "pre-asymptotic" in richardson([1.0, 1.1, 1.05], etas).how


@pytest.mark.parametrize(
    "values, etas, field",
    [
        ([1.0, 1.0], [0.1, 0.05], "length"),
        ([1.0, 1.0, 1.0], [0.1, 0.05, 0.01], "ratio"),
        ([1.0, 1.0, 1.0], [0.1, 0.2, 0.4], "ratio"),
        ([1.0, 1.0, 1.0], [0.1, -0.05, 0.025], "positive"),
    ],
)
def test_richardson_refuses_what_it_cannot_extrapolate(values, etas, field):
    with pytest.raises(ConfigError, match=field):
        richardson(values, etas)


def test_agrees_judges_two_estimates_against_their_error_bars():
    ref = Measured(1.0)
    ok = agrees("a = b", "toy", Measured(1.02, 0.03), ref)
    bad = agrees("a = b", "toy", Measured(1.05, 0.03), ref)
    both = agrees("a = b", "toy", Measured(1.05, 0.03), Measured(1.0, 0.03))
    wide = agrees("a = b", "toy", Measured(0.5, 2.0), ref)
    bare = agrees("a = b", "toy", Measured(1.0), ref)
    assert (ok.verdict, bad.verdict, both.verdict) == (HOLDS, FAILS, HOLDS)
    assert ok.margin == pytest.approx(0.01) and bad.margin == pytest.approx(-0.02)
    assert "taken as exact" in ok.reason and both.error == pytest.approx(0.06)
    assert wide.verdict == VACUOUS  # a bar as wide as the quantity could not disagree
    assert bare.verdict == NOT_APPLICABLE
    # the table reads an agreement as a difference against the bar, not as a margin
    assert "difference 0.02 against the error bar ±0.03" in format_table([ok])


def test_flips_at_states_the_side_and_refuses_when_another_condition_fails():
    from flows.claims import flips_at

    assert flips_at("tol", 0.0123456, at_least=True) == "holds for tol ≥ 0.01235"
    assert flips_at("cos_tol", 0.99, at_least=False) == "holds for cos_tol ≤ 0.99"
    assert flips_at("tol", 0.5, at_least=True, others_hold=False).startswith("holds for no tol")
    assert flips_at("tol", math.inf, at_least=True).startswith("holds for no tol")


def test_a_confidence_interval_across_the_bound_is_undecided_by_size():
    """A fitted exponent 1.89 with 95 % interval [1.38, 2.41] against ≤ 2 + 0.25 (the SGD
    row of Theorem 4.1) was judged on its point estimate; its interval crosses the bound."""
    wide = Measured(1.89, 0.52, "95 % confidence interval of the fitted slope", statistical=True)
    c = Bound("exponent ≤ 2.25", "paper", wide, 2.25).judge()
    assert c.verdict == UNDECIDED_SIZE and "confidence interval" in c.reason
    from flows.claims._checks import _notes

    assert "95 % confidence interval ±0.52" in _notes(c) and "numerical error" not in _notes(c)
    narrow = Measured(1.89, 0.1, "95 % confidence interval", statistical=True)
    assert Bound("exponent ≤ 2.25", "paper", narrow, 2.25).judge().verdict == HOLDS
    above = Measured(2.9, 0.1, "95 % confidence interval", statistical=True)
    assert Bound("exponent ≤ 2.25", "paper", above, 2.25).judge().verdict == FAILS


def test_an_unbounded_error_is_never_judged_on_the_last_value():
    """`limit_in_time` returns error ∞ where the saves are not converging; such a row was
    judged on its last value ('holds', 'numerical error not estimated')."""
    t = np.logspace(0, 3, 10)
    q = 1.0 + 0.1 * np.sin(t)  # oscillates: no limit on these saves
    m = limit_in_time(t, q)
    assert math.isinf(m.error)
    c = Bound("limit ≤ 5", "paper", m, 5.0).judge()
    assert c.verdict == UNDECIDED and "unbounded" in c.reason
    # with a companion's error bar it stays unbounded (no companion bounds a quantity that
    # does not converge), and the note says so
    from flows.claims import with_error_bars

    twin = Bound("limit ≤ 5", "paper", limit_in_time(t, q * (1 + 1e-9)), 5.0).judge()
    [barred] = with_error_bars([c], [twin], "companion")
    assert barred.verdict == UNDECIDED and math.isinf(barred.error)
    assert "numerical error unbounded" in _notes(barred)


@pytest.mark.parametrize("statistical", [False, True])
def test_an_error_not_estimated_is_never_holds(statistical):
    """'Not estimated' is never 'holds': a margin with no error bar (NaN) is undecided —
    numerical, or finite size for a confidence interval that could not be computed (two
    points) — with the reason; `with_error_bars` judges it once a companion gives it one."""
    from flows.claims import with_error_bars

    row = Bound("q ≤ 5", "paper", Measured(1.0, math.nan, statistical=statistical), 5.0).judge()
    assert row.verdict == (UNDECIDED_SIZE if statistical else UNDECIDED)
    assert "not estimated" in row.reason and "'holds'" in row.reason
    assert row.values["verdict_on_value"] == HOLDS
    if statistical:
        return
    twin = Bound("q ≤ 5", "paper", Measured(1.0 + 1e-7), 5.0).judge()
    [judged] = with_error_bars([row], [twin], "companion")
    assert judged.verdict == HOLDS and "not estimated" not in judged.reason
    assert judged.error == pytest.approx(1e-7 * error_calibration(), rel=1e-6)
    assert "error_missing" not in judged.values
    # a ForAll without an error bar, too
    worst = ForAll("m ≥ 0", "paper", lambda x: 1.0 + x, (0.0, 1.0)).judge()
    assert worst.verdict == UNDECIDED and "not estimated" in worst.reason
    # no companion for the row: it stays undecided
    assert with_error_bars([row], [], "companion")[0].verdict == UNDECIDED


def test_the_note_says_what_the_companion_verdict_recorded_is():
    """A row's printed note and its results.json come from one field: a row whose
    `companion_verdict` differs from its own verdict must not read 'same verdict'."""
    from flows import Check
    from flows.claims._checks import _notes

    how = "companion solve at rtol/10"
    row = Check.not_applicable("claim", "paper", "judged as a limit")
    differs = dataclasses.replace(row, values={"companion_verdict": FAILS, "error_how": how})
    assert "same verdict" not in _notes(differs) and f"'{FAILS}' on the {how}" in _notes(differs)
    same = dataclasses.replace(differs, values={"companion_verdict": row.verdict, "error_how": how})
    assert f"'{row.verdict}' on the {how} (the same verdict)" in _notes(same)
    # the note is a function of the JSON fields alone
    for c in (differs, same):
        assert row_notes(json.loads(format_checks([c], "json"))[0]) == _notes(c)


def _dip(center: float, width: float, depth: float = 2.0):
    return lambda x: 1.0 - depth * math.exp(-(((x - center) / width) ** 2))


def test_for_all_finds_a_narrow_dip_that_a_50_point_grid_misses():
    """The margin dips below 0 only within ±0.004 of x = 0.3137; the 50-point grid's
    nearest points (0.306, 0.327) see 1 − 1e-6: a grid verdict says holds."""
    f = _dip(0.3137, 0.002)
    grid = np.linspace(0.0, 1.0, 50)
    assert min(f(x) for x in grid) > 0.99  # what a sampled check would have judged
    c = ForAll(
        "margin ≥ 0 for every x", "toy", f, (0.0, 1.0), grid=50, resolution=1e-7, error=0.0
    ).judge()
    assert c.verdict == FAILS
    assert c.values["worst_x"] == pytest.approx(0.3137, abs=1e-5)
    assert c.values["worst_margin"] == pytest.approx(-1.0, abs=1e-6)
    assert c.values["grid_min_margin"] > 0.99 and c.kind == "universal"
    # a shallow dip that stays above 0 holds, judged at its bottom, not at a grid point
    ok = ForAll(
        "x", "toy", _dip(0.3137, 0.002, 0.5), (0.0, 1.0), resolution=1e-7, error=0.0
    ).judge()
    assert ok.verdict == HOLDS and ok.margin == pytest.approx(0.5, abs=1e-6)


def test_for_all_endpoints_log_spacing_and_error_bars():
    # the worst point at an end of the interval
    c = ForAll("x", "toy", lambda x: x - 0.05, (0.1, 2.0), error=0.0).judge()
    assert c.verdict == HOLDS and c.values["worst_x"] == pytest.approx(0.1)
    # log-spaced: a dip at 1e-3 on [1e-6, 1]
    d = ForAll("x", "toy", _dip(1e-3, 1e-4), (1e-6, 1.0), log=True, grid=60, error=0.0).judge()
    assert d.verdict == FAILS and d.values["worst_x"] == pytest.approx(1e-3, rel=1e-3)
    # a worst margin inside its error bar is undecided; NaN is the worst there is
    assert ForAll("x", "toy", lambda x: 1e-9 + x, (0.0, 1.0), error=1e-6).judge().verdict == (
        UNDECIDED
    )
    nan_at = ForAll("x", "toy", lambda x: math.nan if x > 0.5 else 1.0, (0.0, 1.0)).judge()
    assert nan_at.verdict == FAILS


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"over": (1.0, 1.0)}, "over"),
        ({"grid": 2}, "grid"),
        ({"resolution": 0.0}, "resolution"),
        ({"resolution": 1e-300}, "resolution"),
        ({"budget": 0}, "budget"),
        ({"over": (0.0, 1.0), "log": True}, "log-spaced"),
    ],
)
def test_for_all_bad_settings_name_the_claim_and_the_field(kw, field):
    args = {"over": (0.0, 1.0)} | kw
    with pytest.raises(ConfigError, match=rf"'every x'.*{field}"):
        ForAll("every x", "toy", lambda x: 1.0, **args).judge()


def test_limit_takes_any_asymptotic_variable_runs_without_seeds_and_per_point_errors():
    """A limit in 1/η (or t, 1/α, …): the row names its variable; one run per value (1-D)
    is judged from the scatter about the fit; a distance not larger than its numerical
    error bar — or an error not estimated — makes the row undecided (numerical)."""
    inv_eta = [10.0, 20.0, 40.0, 80.0, 160.0]
    rng = np.random.default_rng(2)
    dist = np.array(inv_eta) ** -1.0 * np.exp(0.05 * rng.standard_normal(5))
    row = Limit("q → 0 as η → 0", "s", inv_eta, dist, variable="1/η").judge()
    assert row.verdict == HOLDS and "at 1/η = 160" in row.measured and "∝ 1/η^" in row.measured
    assert "a limit 1/η → ∞ holds" in row.reason
    few = Limit("q → 0", "s", inv_eta[:3], dist[:3], variable="1/η").judge()
    assert few.verdict == NOT_APPLICABLE and "≥ 4 values of 1/η" in few.reason
    small = Limit("q → 0", "s", inv_eta, dist, variable="1/η", errors=dist / 10).judge()
    assert small.verdict == HOLDS
    noisy = Limit("q → 0", "s", inv_eta, dist, variable="1/η", errors=dist * 2).judge()
    assert noisy.verdict == UNDECIDED and "5 of 5 distances" in noisy.reason
    missing = np.where(np.arange(5) == 4, np.nan, dist / 10)
    assert Limit("q → 0", "s", inv_eta, dist, errors=missing).judge().verdict == UNDECIDED
    with pytest.raises(ConfigError, match="'widths'"):
        Limit("q → 0", "s", [0.0, 1.0, 2.0, 3.0], dist[:4]).judge()
