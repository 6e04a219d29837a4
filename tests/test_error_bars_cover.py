"""Error bars that cover: the calibrated global-error estimate against closed-form errors
(at least the true error at ≥ 95 % of the saves, at most 3× it in the median), and every
row of every paper (`--quick`, slow) printing about its error bar exactly what its
`results.json` records — never "holds" without an error bar."""

import json
import math
import re

import numpy as np
import pytest
import scipy.linalg

import flows
from flows.claims import (
    FAILS,
    HOLDS,
    error_calibration,
    row_notes,
)


def _least_squares():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 5))
    w_star = rng.normal(size=5)
    problem = flows.make_problem(
        lambda p, x: x @ p["w"], flows.from_arrays(x, x @ w_star), theta0={"w": np.zeros(5)}
    )
    return problem, x, w_star


@pytest.mark.parametrize("solver", ["tsit5", "rock4"])
def test_calibrated_estimate_covers_the_closed_form_error(solver):
    """w(t) = w* + e^{−Ht}(w(0) − w*) exactly: per save and entry of w, the estimate is at
    least the true error at ≥ 95 % of the saves and at most 3× it in the median."""
    problem, x, w_star = _least_squares()
    traj = flows.simulate(
        problem, t1=6.0, solver=solver, rtol=1e-6, atol=1e-9, n_save=41, save_params="all",
        global_error=True,
    )  # fmt: skip
    h = x.T @ x / len(x)
    exact = np.stack([w_star - scipy.linalg.expm(-h * t) @ w_star for t in traj.param_times])
    true = np.abs(traj.params["w"] - exact).max(axis=1)[1:]  # t = 0 is exact
    est = traj.global_error.params["w"].max(axis=1)[1:]
    assert traj.config["global_error"]["calibration"] == pytest.approx(error_calibration())
    ratio = est / true
    assert np.mean(ratio >= 1) >= 0.95, np.round(ratio, 2)
    assert np.median(ratio) <= 3, np.round(ratio, 2)


def test_calibration_is_richardson_times_the_safety_factor():
    from flows.claims import GLOBAL_ERROR_SAFETY

    assert error_calibration(10) == pytest.approx(GLOBAL_ERROR_SAFETY * 10 / 9)
    assert error_calibration(100) == pytest.approx(GLOBAL_ERROR_SAFETY * 100 / 99)
    with pytest.raises(flows.ConfigError, match="> 1"):
        error_calibration(1.0)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _number(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _row_problems(row: dict) -> list[str]:
    """What is wrong with one row of results.json (empty: nothing)."""
    out = []
    values, verdict = row.get("values") or {}, row["verdict"]
    judged = verdict in (HOLDS, FAILS)
    if judged and row.get("margin") is not None and row.get("kind") not in ("limit", "agreement"):
        err = _number(row.get("error"))
        if not math.isfinite(err):
            out.append(f"{verdict!r} with the error bar {row.get('error')!r}")
    if judged and values.get("error_missing"):
        out.append(f"{verdict!r} while its error bar is missing")
    other = values.get("companion_verdict")
    if other is not None and judged and other != verdict:
        out.append(f"{verdict!r} while the companion's verdict is {other!r}")
    note = row_notes(row)
    if other is not None and row.get("error") is None:
        if f"{other!r} on " not in note:
            out.append(f"the note does not name the companion's verdict {other!r}: {note}")
        if "same verdict" in note and other != verdict:
            out.append(f"the note says 'same verdict' for {verdict!r} vs {other!r}")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["multistage", "bias-plateau", "deep-linear", "linear-teacher"])
def test_every_rows_note_agrees_with_its_results_json(name, tmp_path):
    """Every row at --quick: the note the table prints about its error bar and companion
    verdict is the one its results.json fields give (`row_notes`), and no row is judged
    'holds' / 'fails' without an error bar or against its companion's verdict."""
    from flows.experiments import EXPERIMENTS

    exp = EXPERIMENTS[name]
    report = exp.run(exp.default_config(quick=True), tmp_path, progress=False)
    rows = json.loads((tmp_path / name / "results.json").read_text())["checks"]
    assert [r["claim"] for r in rows] == [c.claim for c in report.checks]
    problems = []
    for check, row in zip(report.checks, rows, strict=True):
        printed = _squash(flows.format_table([check], width=None))
        note = row_notes(row)
        if note and _squash(f"↳ {note}") not in printed:
            problems.append(f"{row['claim']}: printed note differs from results.json: {note}")
        problems += [f"{row['claim']}: {p}" for p in _row_problems(row)]
    assert not problems, "\n".join(problems)
