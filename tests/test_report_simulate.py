"""The `report.html` of `flows simulate`: where the time went (start-up, compile, solve,
saving, the report itself) and every observable in its summary explained — one line with
its formula and meaning — or named below it with the reason it is left out."""

from __future__ import annotations

import html
import re

import pytest
import xarray as xr

from flows._cli import app as _cli
from flows._report.html import simulate_report
from flows.experiments import EXPERIMENTS

STAGES = [
    ("compile/trace", 1.25, "tracing and compiling"),
    ("solve", 0.5, "integrating the flow"),
    ("saving results", 0.25, "trajectory.nc written"),
    ("report", 0.01, "this page built"),
]


def _rows(page: str, cls: str) -> list[list[str]]:
    """The body rows of the table of class `cls`, as the text of their cells."""
    m = re.search(rf'<table class="{cls}">(.*?)</table>', page, re.S)
    assert m, f"no table of class {cls!r}"
    rows = re.findall(r"<tr>(.*?)</tr>", m.group(1), re.S)[1:]
    cell = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.S)
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in cell.findall(r)] for r in rows]


def _left_out(page: str) -> dict[str, str]:
    m = re.search(r'<ul class="hint">(.*?)</ul>', page, re.S)
    if not m:
        return {}
    items = re.findall(r"<li><code>(.*?)</code>(.*?)</li>", m.group(1), re.S)
    return {html.unescape(k): html.unescape(re.sub(r"<[^>]+>", "", v)) for k, v in items}


def test_stage_times_and_shares_are_shown():
    page = simulate_report(
        name="multistage", title="T", config={}, stats={}, curves=[], finals={},
        stages=STAGES, wall_s=2.01,
    )  # fmt: skip
    rows = _rows(page, "stages")
    assert [r[0] for r in rows] == [s[0] for s in STAGES] + ["total"]
    assert rows[0][1:3] == ["1.25 s", "62 %"] and rows[-1][1] == "2.01 s"
    assert all(r[4] == s[2] for r, s in zip(rows, STAGES, strict=False))


def test_every_observable_in_the_summary_is_described():
    finals = {"K": 0.3, "mode": [1.0, 2.0]}
    page = simulate_report(
        name="x", title="T", config={}, stats={}, curves=[], finals=finals,
        descriptions={"K": "K = Σ a u: the overlap", "mode": "per mode", "r": "distance"},
        final_time=20.0, left_out={"r": "grows without bound"},
    )  # fmt: skip
    assert "Final values at t = 20" in page
    assert _rows(page, "obs") == [
        ["K", "0.3", "K = Σ a u: the overlap"],
        ["mode", "[1, 2]", "per mode"],
    ]
    assert _left_out(page) == {"r": " (distance): grows without bound"}


def _check_page(out, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The report of the run in `out`: every stage timed, every observable of the
    trajectory either in the summary with a description or left out with a reason."""
    page = (out / "report.html").read_text(encoding="utf-8")
    stages = [r[0] for r in _rows(page, "stages")]
    assert stages[-1] == "total", stages
    for s in ("compile/trace", "solve", "saving results", "report"):
        assert s in stages, (s, stages)
    for r in _rows(page, "stages")[:-1]:
        assert re.fullmatch(r"\d+\.\d\d s", r[1]), r
    finals = {r[0]: r[2] for r in _rows(page, "obs")}
    assert all(d and d != "—" for d in finals.values()), finals
    left = _left_out(page)
    assert not [k for k, why in left.items() if "no description" in why], left
    with xr.open_dataset(out / "trajectory.nc") as ds:
        over_time = [v for v in ds.data_vars if ds[v].dims[:1] == ("time",)]
        names = {str(ds[v].attrs.get("observable", v)) for v in over_time}
    params = {"a", "w", "u", "W", "b", "W1", "W2", "V1", "V2"}
    missing = sorted(n for n in names - params if n not in finals and n not in left)
    assert not missing, f"{name}: observables neither summarized nor left out: {missing}"
    return finals, left


def test_each_paper_declares_its_observables_descriptions():
    class Run:
        config = {"problem": {"loss": "R = mean squared error / 2"}}

    for name, exp in EXPERIMENTS.items():
        described, left = _cli._observable_notes(exp, Run())
        assert described["loss"] == "R = mean squared error / 2"
        assert "energy_residual" in described and "param_saved" in left
        assert len(described) > 12, (name, sorted(described))  # the paper's own, not only ours
    described, left = _cli._observable_notes(EXPERIMENTS["multistage"], Run())
    assert "r_max" in described and "r_max" in left


@pytest.mark.e2e
def test_multistage_report_explains_or_leaves_out_every_observable(tmp_path):
    out = tmp_path / "run"
    argv = ["simulate", "multistage", "--m", "20", "--n", "100", "--t1", "20", "--n-save", "41"]
    assert _cli.main([*argv, "--out", str(out)]) == 0
    finals, left = _check_page(out, "multistage")
    # r_max is measured against the linearized closed form, which grows like e^{‖b‖t}:
    # its final value (1e160 at t = 20 on the paper's data) says nothing of the network
    assert "r_max" not in finals and "grow like e‖b‖t for ever" in left["r_max"]  # e^{‖b‖t}
    assert "param_saved" not in finals
    for k in ("K", "q_max", "loss", "energy", "energy_residual"):
        assert k in finals, k


TINY = {
    "deep-linear": ["--d-in", "3", "--h", "3", "--d-out", "2", "--n", "20", "--t1", "5",
                    "--n-save", "41"],
    "bias-plateau": ["--k", "3"],
    "bias-plateau-deep": ["--net", "deep-relu", "--depth", "2", "--width", "6", "--t1", "2"],
    "linear-teacher": ["--k", "3", "--t1", "1e3"],
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(TINY))
def test_every_papers_report_explains_its_observables(tmp_path, case):
    name = case.removesuffix("-deep")
    assert name in EXPERIMENTS
    out = tmp_path / "run"
    assert _cli.main(["simulate", name, *TINY[case], "--out", str(out)]) == 0
    _check_page(out, case)
