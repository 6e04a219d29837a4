"""`report.html` and `index.html` (`flows._report.html`) and the terminal forms of the check
table (`flows.claims._checks.format_checks`, `flows check --format/--width`).

Fast: the experiments' runs are replaced by one that writes small, real outputs (a PNG,
a netCDF trajectory, results.json) through `OutputDir`, as a run does; one tiny
`flows simulate` checks the simulate report end to end.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from flows import Check, format_table
from flows._cli import app as _cli
from flows._report.html import PNG_SIGNATURE, index_report
from flows.claims import Reference, Trend, annotate
from flows.claims._checks import FORMATS, display_width, format_checks, parse_source
from flows.experiments import EXPERIMENTS
from flows.plugin import (
    INDEX_NAME,
    MANIFEST,
    REPORT_NAME,
    Curve,
    OutputDir,
    Report,
    experiment_report,
    write_report,
)

# ---------------------------------------------------------------------------------------
# Fixtures: checks of every kind, and a fake run that writes real outputs


def _checks() -> list[Check]:
    return [
        Check.compare(
            "energy identity L(0) − L(t) = ∫‖∇L‖² along the solve",
            "gradient flow",
            holds=True,
            predicted="residual ≤ 100·rtol·L(0) = 2.40e-04",
            measured="max residual 5.63e-06",
            values={"max_residual": 5.6e-6, "tolerance": 2.4e-4},
        ),
        Check.compare(
            "plateau: |R(T_p) − R(0)| / T_p ≲ 1/(m^{2α₁−1} ln m) <script>alert(1)</script>",
            "paper Thm 1 (29)",
            holds=False,
            predicted="≤ 10 × 0.00166",
            measured="0.0131 (ratio 7.88) & more",
            reason="loss in units of ‖b‖²/s²; '≲' read with C = 10",
            values={"rate": 0.0131, "bound": float("nan"), "list": [1.0, 2.0]},
        ),
        Check.not_applicable(
            "condensation Σ(w¹)²/Σ‖w‖² → 1 at T_p; K̂(t) and q̂_max",
            "paper Cor 2",
            "the run ends at τ = 3 before T_p = 5; increase t1",
        ),
        dataclasses.replace(
            Check.compare(
                "slope of T_d vs ln m = (2α−1)/2 at α = 1.0",
                "paper Thm 2 (3)",
                holds=True,
                predicted="0.5 ± 15%",
                measured="0.504 (m = [250, 1000, 4000], 2 seeds)",
                values={"slope": 0.504, "predicted": 0.5, "T_d_means": [4.19, 4.89, 5.59]},
            ),
            trend=Trend(
                "ln m", "T_d", (5.52, 6.91, 8.29), (4.19, 4.89, 5.59), predicted=(4.2, 4.9, 5.6)
            ),
        ),
    ]


def _png(path: Path) -> None:
    from flows.figures import new_figure

    fig, ax = new_figure(figsize=(2, 1.5))
    ax.plot([0, 1, 2], [2, 1, 0.5])
    fig.savefig(path, dpi=40)


def _trajectory(path: Path) -> None:
    import xarray as xr

    t = np.linspace(0.0, 10.0, 3001)  # longer than a report embeds: thinned
    ds = xr.Dataset({"loss": (("time",), np.exp(-t) + 0.1)}, coords={"time": t})
    ds.to_netcdf(path)


def fake_run(exp, checks):
    """A stand-in for `exp.run`: real figures, trajectories and results.json, written
    through `OutputDir` like a run."""

    def run(cfg, out, **kw):
        od = OutputDir(Path(out) / exp.name, exp.files, exp.name)
        for n in exp.files:
            if n.endswith((".png", ".svg")):  # a figure and its vector copy
                _png(od.path(n))
            elif n.endswith(".nc"):
                _trajectory(od.path(n))
        ann = exp.annotate(checks, cfg)
        stats = {
            "result": "successful",
            "steps": 12,
            "vf_evals": 80,
            "wall_s": 0.5,
            "certificate": {"max_residual": 1e-7, "max_rise": 0.0, "bound": 1e-5, "ok": True},
        }
        payload = {
            "experiment": exp.name,
            "config": {"m": 5, "rtol": 1e-6},
            "versions": {"flows-theory": "0", "jax": "0"},
            "checks": [c.to_dict() for c in ann],
            "solver": {"name": "tsit5", "rtol": 1e-6, "atol": 1e-9},
            "main_run_stats": stats,
            "wall_s": 1.5,
        }
        od.path("results.json").write_text(json.dumps(payload, default=str))
        return Report(exp.name, ann, od.commit(), {})

    return run


@pytest.fixture
def fake_runs(monkeypatch):
    checks = _checks()
    for exp in EXPERIMENTS.values():
        monkeypatch.setattr(exp, "run", fake_run(exp, checks))
    return checks


# ---------------------------------------------------------------------------------------
# HTML helpers


class _Page(HTMLParser):
    """Parses a page; collects the visible text (outside script/style), the attributes of
    every tag, the script blocks, and checks that elements nest properly."""

    VOID = {"meta", "img", "br", "hr", "input", "link", "source", "wbr", "col", "area"}
    SVG_EMPTY = {"rect", "line", "path", "circle", "polyline", "polygon"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in: str | None = None
        self.feed(text)
        self.close()
        assert self.stack == [], f"unclosed elements: {self.stack}"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in ("script", "style"):
            self._in = tag
            self.scripts.append((a, "")) if tag == "script" else None
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-3:]}"
        self.stack.pop()
        if tag in ("script", "style"):
            self._in = None

    def handle_data(self, data):
        if self._in == "script":
            a, d = self.scripts[-1]
            self.scripts[-1] = (a, d + data)
        elif self._in is None:
            self.text.append(data)

    @property
    def visible(self) -> str:
        return " ".join(" ".join(self.text).split())


def _flat(s: str) -> str:
    return " ".join(s.split())


def assert_self_contained(page: str) -> _Page:
    parsed = _Page(page)
    low = page.lower()
    assert "http://" not in low and "https://" not in low
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", low)
    assert "<link" not in low and "@import" not in low and "url(" not in low
    for tag, attrs in parsed.tags:
        if "src" in attrs:
            assert attrs["src"].startswith("data:image/png;base64,"), (tag, attrs["src"][:40])
        if "href" in attrs:
            href = attrs["href"]
            assert href.startswith("#") or not re.match(r"^[a-z]+:|^//", href), href
        if tag == "script":
            assert "src" not in attrs  # inline only
    return parsed


def images(parsed: _Page) -> list[bytes]:
    return [
        base64.b64decode(a["src"].split(",", 1)[1], validate=True)
        for tag, a in parsed.tags
        if tag == "img"
    ]


def _bare(s: str) -> str:
    """`s` without spaces and the TeX-like markers `^ _ { }` (a formula rendered as
    MathML shows its scripts' text, not the markers)."""
    return re.sub(r"[\s^_{}]", "", s)


def assert_claims_present(parsed: _Page, page: str, checks) -> None:
    text = _bare(parsed.visible)
    for c in checks:
        for part in (c.claim, c.predicted, c.measured, c.verdict, c.reason, c.source):
            assert _bare(part) in text, part
    # the text table itself, row by row (in its <pre>)
    (pre,) = re.findall(r"<pre>(.*?)</pre>", page, flags=re.S)
    rows = html.unescape(pre).splitlines()
    for line in format_table(checks, None, layout="wide").splitlines():
        assert line in rows, line


def without_scripts(page: str) -> str:
    return re.sub(r"<script\b.*?</script>", "", page, flags=re.S)


# ---------------------------------------------------------------------------------------
# report.html of `flows check`


def test_experiment_report_is_self_contained_and_complete(tmp_path):
    checks = annotate(
        _checks(),
        {"plateau": Reference(section="§3", statement="The loss barely moves.", figure="a.png")},
        paper="A Paper",
    )
    _png(tmp_path / "a.png")
    _png(tmp_path / "b.png")
    page = experiment_report(
        name="paper",
        title="A Paper",
        checks=checks,
        results={"config": {"m": 5}, "versions": {"jax": "0"}, "wall_s": 2.0,
                 "runs": {"main": {"result": "successful", "steps": 3, "vf_evals": 18,
                                   "certificate": {"max_residual": 1e-8, "ok": True}}}},
        figures={
            "a.png": (tmp_path / "a.png").read_bytes(),
            "b.png": (tmp_path / "b.png").read_bytes(),
            "not-a.png": b"junk",
        },
        curves=[Curve("main", [0.0, 1.0, 2.0], [1.0, 0.5, 0.25])],
        mode="quick",
        command=["flows", "check", "paper"],
    )  # fmt: skip
    parsed = assert_self_contained(page)
    assert_claims_present(parsed, page, checks)
    assert "<script>alert(1)</script>" not in page  # claims are escaped
    imgs = images(parsed)
    assert len(imgs) == 2  # each figure once; the junk one left out
    import matplotlib.image as mpimg

    for data in imgs:
        assert data.startswith(PNG_SIGNATURE)
        assert mpimg.imread(io.BytesIO(data), format="png").ndim == 3
    text = parsed.visible
    # paper metadata per claim: title, section, theorem, equation, statement
    assert "A Paper, §3, Theorem 1, eq. (29)" in text and "The loss barely moves." in text
    assert "Corollary 2" in text
    # the trend, provenance and the zoomable curve's data
    assert "Finite-size trend" in text and "ln m" in text
    for word in ("Provenance", "git revision", "wall time", "Library versions", "tsit5"[:0]):
        assert word in text
    assert "vf_evals" in text and "certificate max_residual" in text
    data = [json.loads(d) for a, d in parsed.scripts if a.get("type") == "application/json"]
    assert data and data[0]["series"][0]["y"] == [1.0, 0.5, 0.25]


def test_report_reads_with_scripts_off():
    """Everything is in the HTML itself: removing every script loses no claim, value,
    figure or chart (the charts are inline SVG drawn by Python)."""
    checks = _checks()
    page = experiment_report(
        name="p",
        title="T",
        checks=checks,
        curves=[Curve("main", np.linspace(0, 1, 5000), np.exp(-np.linspace(0, 1, 5000)))],
    )
    bare = without_scripts(page)
    parsed = assert_self_contained(bare)
    assert_claims_present(parsed, bare, checks)
    assert bare.count("<svg") >= 2  # the loss curve and the trend
    assert "<path" in bare
    full = _Page(page)
    (code,) = [d for a, d in full.scripts if not a.get("type")]
    assert "innerHTML" in code  # the script only redraws the chart it finds
    (data,) = [json.loads(d) for a, d in full.scripts if a.get("type") == "application/json"]
    assert len(data["series"][0]["x"]) <= 1500  # long curves are thinned


def test_check_writes_reports_and_index(tmp_path, fake_runs, capsys):
    code = _cli.main(["check", "all", "--quick", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1  # one of the fake checks fails
    index = (tmp_path / INDEX_NAME).read_text()
    parsed = assert_self_contained(index)
    links = [a["href"] for t, a in parsed.tags if t == "a" and "href" in a]
    for name, exp in EXPERIMENTS.items():
        assert f"{name}/{REPORT_NAME}" in links
        folder = tmp_path / name
        page = (folder / REPORT_NAME).read_text()
        parsed = assert_self_contained(page)
        checks = exp.annotate(fake_runs, exp.default_config(quick=True))
        assert_claims_present(parsed, page, checks)
        assert exp.title in parsed.visible
        pngs = [n for n in exp.files if n.endswith(".png")]
        assert len(images(parsed)) == len(pngs)
        owned = json.loads((folder / MANIFEST).read_text())["files"]
        assert REPORT_NAME in owned and set(exp.files) <= set(owned)
        assert "main run" in page  # the loss curve read back from trajectory.nc
        assert str(folder / REPORT_NAME) in out
    assert list(json.loads((tmp_path / MANIFEST).read_text())["files"]) == [INDEX_NAME]
    assert "[4/4]" in out and "all done" in out  # a progress line per finished experiment
    # a second run replaces its own reports and index
    assert _cli.main(["check", "all", "--quick", "--out", str(tmp_path)]) == 1
    assert "starting; the last run took" in capsys.readouterr().out


def test_a_users_report_is_never_overwritten(tmp_path, fake_runs, capsys):
    name = "multistage"
    (tmp_path / name).mkdir()
    (tmp_path / name / REPORT_NAME).write_text("mine")
    assert _cli.main(["check", name, "--quick", "--out", str(tmp_path)]) == 2
    assert REPORT_NAME in capsys.readouterr().err
    assert (tmp_path / name / REPORT_NAME).read_text() == "mine"
    assert not (tmp_path / name / "results.json").exists()  # refused before computing
    (tmp_path / INDEX_NAME).write_text("mine too")
    (tmp_path / name / REPORT_NAME).unlink()
    assert _cli.main(["check", "all", "--quick", "--out", str(tmp_path)]) == 2
    assert (tmp_path / INDEX_NAME).read_text() == "mine too"
    # --no-report leaves both alone and still runs
    assert _cli.main(["check", name, "--quick", "--no-report", "--out", str(tmp_path)]) == 1
    assert not (tmp_path / name / REPORT_NAME).exists()


def test_write_report_survives_unreadable_outputs(tmp_path):
    """Outputs that are not what they claim (a PNG that is text, a broken trajectory):
    the report is still written, with what can be read."""
    exp = EXPERIMENTS["deep-linear"]
    od = OutputDir(tmp_path / exp.name, exp.files, exp.name)
    for n in exp.files:
        od.path(n).write_text("x")
    files = od.commit()
    path = write_report(exp, Report(exp.name, _checks(), files, {}), tmp_path)
    parsed = assert_self_contained(path.read_text())
    assert images(parsed) == []


def test_index_report_counts():
    checks = _checks()
    page = index_report(
        [{"name": "a", "title": "A", "checks": checks, "report": "a/report.html", "wall_s": 3}]
    )
    parsed = assert_self_contained(page)
    assert "Failing in a" in parsed.visible


# ---------------------------------------------------------------------------------------
# report.html of `flows simulate`


def test_simulate_writes_a_short_report(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["simulate", "multistage", "--m", "20", "--n", "40", "--t1", "0.5", "--n-save", "9"]
    assert _cli.main([*argv, "--out", str(out)]) == 0
    page = (out / REPORT_NAME).read_text()
    parsed = assert_self_contained(page)
    text = parsed.visible
    assert "flows simulate multistage" in text and "vf_evals" in text
    assert "Final values at t = 0.5" in text and "certificate" in text
    (data,) = [json.loads(d) for a, d in parsed.scripts if a.get("type") == "application/json"]
    assert len(data["series"][0]["x"]) == 9
    assert str(out / REPORT_NAME) in capsys.readouterr().out
    # like trajectory.nc, it is replaced only with --overwrite
    assert _cli.main([*argv, "--out", str(out)]) == 2
    (out / "trajectory.nc").unlink()
    assert _cli.main([*argv, "--out", str(out)]) == 2  # report.html still in the way
    assert "--overwrite" in capsys.readouterr().err
    assert _cli.main([*argv, "--out", str(out), "--overwrite"]) == 0


# ---------------------------------------------------------------------------------------
# Terminal output: wrapping, layouts, json


@pytest.mark.parametrize("width", [20, 40, 60, 72, 80, 100, 140])
@pytest.mark.parametrize("fmt", ["auto", "compact"])
def test_tables_fit_the_width(width, fmt):
    table = format_checks(_checks(), fmt, width)
    lines = table.splitlines()
    assert max(display_width(line) for line in lines) <= width, "\n" + table
    flat = _flat(table)
    for c in _checks():  # nothing is lost by wrapping (words may break only when too long)
        for word in c.claim.split():
            if len(word) <= min(12, width - 8):
                assert word in flat


def test_wide_keeps_fixed_columns():
    table = format_checks(_checks(), "wide", 60)
    assert table.splitlines()[0].startswith("claim" + " " * 41 + " | predicted")


def test_json_format_is_valid_with_every_claim():
    data = json.loads(format_checks(_checks(), "json"))
    assert [d["claim"] for d in data] == [c.claim for c in _checks()]
    assert data[1]["values"]["bound"] == "nan"  # strict JSON: no NaN literal


def test_check_cli_json_and_width(tmp_path, fake_runs, capsys):
    code = _cli.main(["check", "all", "--quick", "--format", "json", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    payload = json.loads(captured.out)  # stdout is one JSON document; progress on stderr
    assert code == 1 and payload["failed"] is True
    assert [e["name"] for e in payload["experiments"]] == sorted(EXPERIMENTS)
    for e in payload["experiments"]:
        assert [c["claim"] for c in e["checks"]] == [c.claim for c in fake_runs]
        assert e["report"] == f"{e['name']}/{REPORT_NAME}"
        assert all("reference" in c for c in e["checks"])
    assert "[4/4]" in captured.err
    for width in (50, 90):
        _cli.main(["check", "multistage", "--quick", "--width", str(width), "--out",
                   str(tmp_path)])  # fmt: skip
        out = capsys.readouterr().out
        table = out.split(" ==\n", 1)[1].split("\nwrote:")[0]
        assert max(display_width(line) for line in table.splitlines()) <= width, table


def test_piped_check_prints_one_line_per_claim(tmp_path, fake_runs, capsys, monkeypatch):
    """Piped (stdout not a terminal, no --width, no COLUMNS) the default layout is one
    line per claim, each naming its paper, its verdict and its claim: the whole command's
    output is ≈ one line per claim, not a table of ≈ 8 lines per claim."""
    monkeypatch.delenv("COLUMNS", raising=False)
    assert _cli.main(["check", "all", "--quick", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    n = len(EXPERIMENTS) * len(fake_runs)
    assert len(out) <= n + 6 * len(EXPERIMENTS) + 3, "\n".join(out)
    assert not [line for line in out if line[:1].isspace()], "a wrapped continuation line"
    for name in EXPERIMENTS:
        rows = [line for line in out if line.startswith(f"{name}: ") and "[" in line]
        claims = [line for line in rows if " — measured " in line or "not applicable" in line]
        assert len(claims) == len(fake_runs), "\n".join(rows)
        for line, c in zip(claims, fake_runs, strict=True):
            assert c.label in line and c.verdict.upper() in line.upper()
        assert any(line.startswith(f"{name}: ") and "hold" in line and "fail" in line
                   for line in out)  # fmt: skip
    # a table is one --format (or --width) away
    assert _cli.main(["check", "deep-linear", "--quick", "--out", str(tmp_path),
                      "--format", "compact"]) == 1  # fmt: skip
    assert "predicted:" in capsys.readouterr().out
    assert _cli.main(["check", "deep-linear", "--quick", "--out", str(tmp_path),
                      "--width", "90"]) == 1  # fmt: skip
    assert "| verdict" in capsys.readouterr().out


def test_every_verdict_kind_prints_in_every_layout():
    """One row of each verdict kind (`VERDICTS`) through every text layout (a kind without
    its mark once crashed the piped output at the end of a 13-minute check)."""
    from flows.claims._checks import VERDICTS

    base = _checks()[0]
    rows = [dataclasses.replace(base, verdict=v) for v in VERDICTS]
    for fmt in ("auto", "wide", "compact", "lines"):
        text = format_checks(rows, fmt, 100)
        for v in VERDICTS:
            assert v.upper() in text.upper(), (fmt, v)


def test_lines_layout_keeps_each_row_on_one_line():
    table = format_checks(_checks(), "lines")
    lines = table.splitlines()
    assert len(lines) == len(_checks()) + 1  # the rows, then the tally
    for line, c in zip(lines[:-1], _checks(), strict=True):
        verdict_word = line.split(": ", 1)[0].split()[-1].lower()  # the verdict comes first
        assert c.label in line and verdict_word in c.verdict


def test_check_width_follows_the_terminal(tmp_path, fake_runs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "64")
    _cli.main(["check", "deep-linear", "--quick", "--out", str(tmp_path)])
    table = capsys.readouterr().out.split(" ==\n", 1)[1].split("\nwrote:")[0]
    assert max(display_width(line) for line in table.splitlines()) <= 64


def test_formats_are_the_clis():
    assert _cli.FORMATS == FORMATS


def test_sweep_progress_lines_get_elapsed_and_estimate():
    timer = _cli._SweepTimer()
    assert timer.edit("[sweep] multistage: 4 grid points") == "[sweep] multistage: 4 grid points"
    line = timer.edit("[2/4] m=100 α=1 T_d=3.1")
    assert re.search(r"\(elapsed \d+s, about \d+s left\)$", line)
    assert timer.edit("[4/4] m=400 α=1 T_d=4.0").endswith("last point)")


def test_parse_source_and_annotate():
    assert parse_source("multistage Thm 1 (27)") == {"equation": "(27)", "result": "Theorem 1"}
    assert parse_source("linear teachers Thm 5.1, §5.1, App. D.3") == {
        "section": "§5.1",
        "result": "Theorem 5.1, Appendix D.3",
    }
    assert parse_source("multistage Cor 1, 4")["result"] == "Corollaries 1, 4"
    (c,) = annotate([_checks()[0]], {}, paper="P")
    assert c.reference is not None and c.reference.paper == ""  # the toolkit's own check
    old = Check("c", "s", "p", "m", "holds")  # positional construction still works
    assert old.reference is None and old.trend is None
    assert "reference" in old.to_dict()


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_experiment_declares_its_report(name):
    exp = EXPERIMENTS[name]
    assert exp.outputs.count(REPORT_NAME) == 1 and set(exp.files) <= set(exp.outputs)
    for key, ref in exp.references.items():
        assert key and (ref.statement or ref.section)
        assert not ref.figure or ref.figure in exp.files, ref.figure


def test_report_shows_what_the_claim_kit_decided():
    """Per claim: its kind, margin and error bar, critical constants and hypotheses; the
    summary counts every verdict kind that occurs."""
    import math

    from flows.claims import Bound, Constant, Hypothesis, Measured

    c_const = Constant("C", 10.0, (0.0, math.inf))
    vac = Bound("W₂ ≤ C·b", "p Cor 1", Measured(0.3, 1e-6), lambda C: C * 8.9,
                constants=(c_const,), a_priori=(0.0, 2.0)).judge()  # fmt: skip
    out = Bound("q ≤ 1", "p Thm 2", Measured(0.3), 1.0,
                hypotheses=(Hypothesis("α > 1/2", False, "α = 0.4"),)).judge()  # fmt: skip
    page = experiment_report(name="toy", title="Toy", checks=[vac, out])
    text = assert_self_contained(page).visible
    assert "vacuous for C ≥ 0.225" in text and "critical constants" in text
    assert "numerical error ±1e-06" in text and "upper bound" in text
    assert "α > 1/2: NOT met (α = 0.4)" in text
    assert "outside hypothesis" in text and "vacuous" in text


# ---------------------------------------------------------------------------------------
# Layout: tables that never break inside a word, trends on log–log axes, log-t loss curves,
# links from the index to the claims' cards


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


def _svg_texts(svg: str) -> list[str]:
    """Each `<text>` of a chart as a screen reader reads it: its `aria-label` when its
    formulas are set as tspans (`T_d`), else its text."""
    return [
        html.unescape(label or text)
        for label, text in re.findall(
            r'<text\b[^>]*?(?:aria-label="([^"]*)"[^>]*)?>(.*?)</text>', svg, flags=re.S
        )
    ]


def test_tables_never_break_inside_a_word_or_a_number():
    from flows._report.assets import _CSS

    css = _CSS.replace(" ", "").replace("\n", "")
    (cells,) = re.findall(r"td,th\{([^}]*)\}", css)
    for rule in ("overflow-wrap:normal", "word-break:normal", "hyphens:manual"):
        assert rule in cells
    assert "break-all" not in css and "anywhere" not in css and "break-word" not in css
    assert re.search(r"\.tw\{[^}]*overflow-x:auto", css)
    assert re.search(r"\.num\{[^}]*white-space:nowrap", css)
    page = experiment_report(
        name="p",
        title="T",
        checks=_checks(),
        results={"config": {"m": 5}, "main_run_stats": {"result": "successful", "steps": 3}},
        command=["flows", "check", "p", "--out", "/a/very/long/path/to/the/output/folder"],
    )
    assert_self_contained(page)
    # every table sits in a wrapper that scrolls sideways instead of squeezing its cells
    assert page.count("<table") == page.count('<div class="tw"><table') > 4
    assert '<td class="num">4.19</td>' in page  # the trend's numbers stay on one line
    # a long path wraps only between its parts, each kept on one line
    assert '<span class="nw">a</span>/<wbr><span class="nw">very</span>/<wbr>' in page
    # signed and exponent numbers never break after their hyphen
    from flows._report.parts import _t

    assert _t("≤ 1.2e-05 at −0.5, x-y") == (
        '≤ <span class="nw">1.2e-05</span> at <span class="nw">−0.5</span>, x-y'
    )
    # a range of numbers is one token too (the browser breaks after an en dash)
    assert _t("t ≈ 28–38.2, δ 1e-3–0.1; 2 in 3, 2-D, x-y, x=(−1,−2): a = b") == (
        't ≈ <span class="nw">28–38.2</span>, δ <span class="nw">1e-3–0.1</span>; 2 in 3, '
        '<span class="nw">2-D</span>, x-y, <span class="nw">x=(−1,−2):</span> a = b'
    )


def test_trend_on_log_log_axes_ticks_every_x_and_draws_the_fit():
    m = (250.0, 500.0, 1000.0, 2000.0, 4000.0)
    y = tuple(25.0 / v for v in m)  # ∝ m^-1: the fit's slope is exactly -1
    trend = Trend("m", "error", m, y, y_err=tuple(0.1 * v for v in y),
                  predicted=tuple(20.0 / v for v in m), x_log=True)  # fmt: skip
    check = dataclasses.replace(_checks()[0], trend=trend)
    page = experiment_report(name="p", title="T", checks=[check])
    (svg,) = _svgs(page)
    texts = _svg_texts(svg)
    for label in ("250", "500", "1000", "2000", "4000"):
        assert texts.count(label) == 1, texts  # a labelled tick at each width
    assert "m (log)" in texts and "error (log)" in texts  # log–log axes
    assert "power-law fit, slope -1" in texts
    assert 'stroke-dasharray="2 3"' in svg and 'stroke-dasharray="6 4"' in svg  # fit, predicted
    assert svg.count("<circle") == 5 and svg.count('stroke="#1f77b4"/>') == 5  # error bars
    assert "least-squares fit" in _Page(page).visible


def test_trend_log_axes_only_where_the_values_allow():
    """y on a log axis needs every y > 0; a linear x axis still gets a tick at each x."""
    m = (250.0, 1000.0, 4000.0)
    signed = Trend("m", "excess", m, (0.3, -0.1, 0.02), predicted=(0.0, 0.0, 0.0), x_log=True)
    linear = Trend("ln m", "T_d", (5.52, 6.91, 8.29), (4.19, 4.89, 5.59))
    for trend, x_label, ticks in ((signed, "m (log)", ("250", "1000", "4000")),
                                  (linear, "ln m", ("5.52", "6.91", "8.29"))):  # fmt: skip
        page = experiment_report(
            name="p", title="T", checks=[dataclasses.replace(_checks()[0], trend=trend)]
        )
        (svg,) = _svgs(page)
        texts = _svg_texts(svg)
        assert x_label in texts and trend.y_label in texts  # y stays linear
        assert all(t in texts for t in ticks)
        assert "power-law fit" not in svg


def test_power_fit_recovers_a_power_law():
    from flows._report.svg import power_fit

    x = [1.0, 3.0, 10.0, 30.0]
    fit = power_fit(x, [3.0 * v**-0.5 for v in x])
    assert fit is not None
    assert fit[0] == pytest.approx(-0.5, rel=1e-12)
    assert fit[1] == pytest.approx(np.log10(3.0), rel=1e-12)
    assert power_fit([2.0, 2.0], [1.0, 3.0]) is None  # one distinct x: no line


def test_loss_curve_spanning_decades_is_shown_against_log_t():
    t = np.concatenate([[0.0], np.logspace(-1, 5, 300)])
    wide = experiment_report(
        name="p", title="T", checks=_checks(), curves=[Curve("main", t, np.exp(-t / 100) + 0.1)]
    )
    (data,) = [json.loads(d) for a, d in _Page(wide).scripts if a.get("type") == "application/json"]
    assert data["x_log"] is True  # the script starts on log t …
    (code,) = [d for a, d in _Page(wide).scripts if not a.get("type")]
    assert "xlog:!!box._d.x_log" in code
    # … and with scripts off, the static chart is the log-t view
    (svg,) = [s for s in _svgs(without_scripts(wide)) if 'aria-label="loss"' in s]
    texts = _svg_texts(svg)
    assert "time (log)" in texts
    assert all(f"1e{k}" in texts for k in range(-1, 6))
    narrow = experiment_report(
        name="p", title="T", checks=_checks(), curves=[Curve("main", [0.0, 5.0, 10.0],
                                                             [1.0, 0.5, 0.2])]
    )  # fmt: skip
    (data,) = [
        json.loads(d) for a, d in _Page(narrow).scripts if a.get("type") == "application/json"
    ]
    (svg,) = [s for s in _svgs(narrow) if 'aria-label="loss"' in s]
    assert data["x_log"] is False and "time" in _svg_texts(svg)


def test_index_links_each_failing_claim_to_its_card():
    checks = _checks()
    (failing,) = [i for i, c in enumerate(checks, 1) if c.verdict == "fails"]
    page = index_report(
        [{"name": "a", "title": "A", "checks": checks, "report": "a/report.html", "wall_s": 3},
         {"name": "b", "title": "B", "checks": checks, "report": None}]
    )  # fmt: skip
    parsed = assert_self_contained(page)
    links = [a["href"] for t, a in parsed.tags if t == "a" and "href" in a]
    assert f"a/report.html#claim-{failing}" in links
    assert not any(h.startswith("None") or h.startswith("#claim") for h in links)
    assert "Failing in b" in parsed.visible  # listed, without a report to link to
    report = experiment_report(name="a", title="A", checks=checks)
    card = re.search(rf'<details class="claim [a-z]+" id="claim-{failing}">', report)
    assert card and "fails" in card.group(0)


def test_solver_statistics_leave_out_what_no_run_recorded():
    sweep = [{"m": 100 * (i + 1), "vf_evals": 60 + i, "steps": 10 + i, "result": "successful",
              "wall_s": 0.25} for i in range(18)]  # fmt: skip
    sweep.append({"vf_evals": float("nan"), "steps": None, "result": ""})  # nothing recorded
    page = experiment_report(name="p", title="T", checks=_checks(), results={"sweep": sweep})
    (table,) = re.findall(r"Solver statistics.*?(<table>.*?</table>)", page, flags=re.S)
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert heads == ["run", "result", "steps", "vf_evals", "wall_s"]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    assert len(rows) == 18 and "sweep[18]" not in table
    assert all(row.count("<td") == len(heads) and "—" not in row for row in rows)


# ---------------------------------------------------------------------------------------
# a report that fits a screen until opened


def test_claims_are_grouped_failing_first_and_folded_to_one_line():
    late = Check("T_d/ln m → (2α−1)/2", "paper Thm 2 (3)", "→ 0.5", "0.52 ± 0.03",
                 "undecided (finite size)")  # fmt: skip
    checks = [*_checks(), late]
    page = experiment_report(name="p", title="T", checks=checks)
    cards = re.findall(r'<details class="claim [a-z]+" id="claim-(\d+)"( open)?>', page)
    # every claim once, folded; numbers are the claims' places (links from the index)
    assert sorted(int(i) for i, _ in cards) == list(range(1, len(checks) + 1))
    assert not any(opened for _, opened in cards)
    order = [int(i) for i, _ in cards]
    assert order[0] == 2  # the failing claim first
    assert order[-2:] == [1, 4]  # the holding ones last, in their own order
    groups = re.findall(r'<h3><span class="verdict [^"]*">([^<]*)</span> (\d+)</h3>', page)
    assert groups == [("fails", "1"), ("undecided (finite size)", "1"), ("not applicable", "1"),
                      ("holds", "2")]  # fmt: skip
    # a link to #claim-N opens its card: the page's script opens the fold a fragment names
    (code,) = [d for a, d in _Page(page).scripts if not a.get("type")]
    assert "location.hash" in code and ".open=true" in code


def test_a_reason_reads_one_sentence_first_with_the_detail_folded():
    from flows._report.html import split_reason

    assert split_reason("a (b; c) d; e [f; g]; h") == ["a (b; c) d", "e [f; g]", "h"]
    why = "the bound holds with margin 0.5; rule: a margin above its error; note"
    c = Check("x ≤ 1", "paper Thm 1", "≤ 1", "0.5", "holds", reason=why)
    page = experiment_report(name="p", title="T", checks=[c])
    verdict_row = re.search(r"<td>verdict</td><td>(.*?)</td>", page).group(1)
    assert "the bound holds with margin 0.5" in verdict_row and "rule:" not in verdict_row
    folded = re.search(r"<details><summary>Why, in full</summary><ul>(.*?)</ul></details>", page)
    assert folded and folded.group(1).count("<li>") == 2 and "rule: a margin" in folded.group(1)


def test_figures_enlarge_on_a_click_without_a_second_copy(tmp_path):
    _png(tmp_path / "a.png")
    page = experiment_report(name="p", title="T", checks=_checks(),
                             figures={"a.png": (tmp_path / "a.png").read_bytes()})  # fmt: skip
    fig = re.search(r'<figure id="fig-a-png">(.*?)</figure>', page).group(1)
    assert re.search(r'<label class="zoom"[^>]*><input type="checkbox"[^>]*><img class="fig"', fig)
    assert page.count("data:image/png") == 1  # one copy of the image, shown both sizes
    assert "input:checked+img{position:fixed" in page  # the stylesheet's enlarged state


def test_the_index_counts_every_verdict_kind_in_a_column_of_its_own():
    checks = _checks() + [
        Check("q → 0", "paper Thm 2", "→ 0", "0.1 ± 0.2", "undecided (numerical)"),
        Check("a, b together", "paper Thm 3", "one β", "none", "fails (jointly)"),
    ]  # fmt: skip
    page = index_report([{"name": "a", "title": "A", "checks": checks, "report": "a/report.html"}])
    heads = re.findall(r'<th><span class="verdict [^"]*">([^<]*)</span></th>', page)
    assert heads == ["holds", "fails", "fails (jointly)", "undecided (numerical)",
                     "not applicable"]  # fmt: skip
    row = re.search(r'<tr><td><a href="a/report.html">.*?</tr>', page).group(0)
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["2", "1", "1", "1", "1"]
    # a claim failing jointly is listed among the failing, linked to its card
    assert 'href="a/report.html#claim-6"' in page


def test_no_block_of_a_report_runs_over_150_words():
    """A verdict's reason of several parts (a hundred or more words each way in the
    papers' rows) is one sentence in the table and a folded list of the rest: no
    paragraph, list item or cell of the page runs over the docs' limit."""
    from test_docs import MAX_WORDS, long_blocks

    part = " ".join(["word"] * 60)
    c = Check("x ≤ 1", "paper Thm 1", "≤ 1", "0.5", "holds", reason="; ".join([part] * 5))
    page = experiment_report(name="p", title="T", checks=[*_checks(), c])
    assert not long_blocks(page), f"blocks over {MAX_WORDS} words"
