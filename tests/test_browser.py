"""The HTML reports laid out by a real browser (headless Chromium), at 1400 px and 800 px
wide, checked for two layout defects that parsing the HTML cannot see:

- **horizontal overflow**: the page itself scrolls sideways
  (`documentElement.scrollWidth` > the viewport), or an element reaches past the viewport
  with no ancestor that scrolls or clips it. A wide table inside the reports' `div.tw`
  wrapper (`overflow-x: auto`) scrolls in its wrapper and is fine, and so is an off-canvas
  panel (a `position: fixed` box wholly beyond the edge, like the docs' navigation drawer
  at 800 px, slid in by its menu button).
- **words and numbers broken across lines**: in table cells, paragraphs, list items,
  headings, captions and summaries, every whitespace-separated token (its text may span
  inline tags such as `<code>` or `<sub>`) is measured with a DOM Range; a token whose
  client rectangles lie on more than one line was broken inside itself (`1.2e-⏎05`).
  Not counted as defects (listed in the test's output instead): tokens containing '/' or
  '_' or longer than 40 characters — paths, file names and identifiers, which may wrap at
  a '/' (the reports put a `<wbr>` after each '/' of a path) and cannot always fit a line —
  and a compound word broken right after its hyphen between two letters (`non-⏎increasing`),
  the ordinary place for such a word to wrap. Ordinary words and numbers are all checked:
  a break after the hyphen of an exponent (`3e-⏎11`) is a defect.

On the documentation site two more things are checked: **formulas** are MathML that the
browser lays out (every `<math>` element has a box; the pages with formulas have some),
and no text outside code still reads `^{` (TeX-like notation left unrendered); and the
examples gallery's **claims tables** show their verdict column without scrolling sideways,
at both widths.

The pages: the `report.html` of every paper and the `index.html` of `flows check all
--quick`, an index over the deep-linear run with a copy of it marked failing (so the list of
failing claims is laid out whatever the quick run gives), and `report.html` of a tiny
`flows simulate deep-linear`; and six
pages of the documentation site, built once (`mkdocs build --strict` into a temporary
folder, as `tests/test_docs.py` builds it; skipped without the `docs` extra): the home page,
the solver guide, a paper page, the limits, a command-line page (its options tables), the
examples gallery, an API reference page and one rendered notebook (its code, text outputs,
claims table and figures). Their wide
tables and code blocks must scroll inside the content column, not clip or widen the page.
Every page is also saved as a full-page screenshot per width; a failure names the folder.

Marked `e2e` (deselected by default; `.ci/run` installs Chromium and runs them); skipped
when no Chromium binary is found (`_browser.BROWSERS` on PATH). The measurement itself is
checked on a deliberately broken page (`test_the_measurement_finds_both_defects`).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _browser import Layout, browser, describe_broken, describe_overflow, measure

from flows import Check
from flows._report.html import index_report
from flows.experiments import EXPERIMENTS

pytestmark = pytest.mark.e2e

BINARY = browser()
WIDTHS = (1400, 800)
#: The papers whose `flows check --quick` report is laid out (every registered one).
PAPERS = tuple(sorted(EXPERIMENTS))
REPORTS = (*(f"check-report-{p}" for p in PAPERS), "index-all", "index", "simulate-report")
#: Pages of the built documentation site, by name: their paths in the site.
DOCS = {
    "docs-home": "index.html",
    "docs-solvers": "solvers/index.html",
    "docs-paper": "papers/multistage/index.html",
    "docs-limits": "limits/index.html",
    "docs-cli": "cli/simulate/index.html",
    "docs-gallery": "examples/index.html",
    "docs-api": "api/simulate/index.html",
    "docs-example": "examples/deep-linear/index.html",
}
#: The documentation pages that hold formulas (each rendered as MathML).
WITH_FORMULAS = ("docs-home", "docs-paper", "docs-limits", "docs-api", "docs-example")
#: The documentation pages with a notebook's claims table (claim · verdict · margin).
WITH_CLAIMS_TABLE = ("docs-example",)
PAGES = (*REPORTS, *DOCS)
ROOT = Path(__file__).resolve().parent.parent

needs_browser = pytest.mark.skipif(
    BINARY is None,
    reason="no Chromium found on PATH (chromium, chromium-browser or google-chrome); "
    "install one (Debian: apt-get install chromium) to run the layout checks",
)


def _flows(*argv: str, ok: tuple[int, ...] = (0,)) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flows", *argv], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode in ok, f"flows {' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"


def _index(out: Path) -> Path:
    """`out/index-with-failure.html` over the deep-linear run in `out`, plus a copy of that
    run with its first claim marked failing, so that the index's list of failing claims is
    laid out too."""
    results = json.loads((out / "deep-linear" / "results.json").read_text())
    fields = ("claim", "source", "predicted", "measured", "verdict", "reason")
    checks = [Check(**{k: c[k] for k in fields}) for c in results["checks"]]
    first = checks[0]
    failing = [
        Check(
            first.claim, first.source, first.predicted, first.measured, "fails",
            reason=f"measured {first.measured}; predicted {first.predicted}",
        ),
        *checks[1:],
    ]  # fmt: skip
    entry = {"name": "deep-linear", "title": "Exact solutions to the nonlinear dynamics of "
             "learning in deep linear neural networks", "checks": checks,
             "report": "deep-linear/report.html", "wall_s": results.get("wall_s")}  # fmt: skip
    page = index_report(
        [entry, {**entry, "name": "deep-linear-failing", "checks": failing}],
        mode="quick",
        command=["flows", "check", "all", "--quick", "--out", str(out)],
        wall_s=12.0,
    )
    path = out / "index-with-failure.html"  # beside the real index.html, not over it
    path.write_text(page, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    if BINARY is None:
        pytest.skip("no Chromium found on PATH")
    checked = tmp_path_factory.mktemp("check")
    # every paper (exit 1 when a claim fails: a report with a failing claim is laid out too)
    _flows("check", "all", "--quick", "--out", str(checked), ok=(0, 1))
    simulated = tmp_path_factory.mktemp("simulate") / "run"
    _flows(
        "simulate", "deep-linear", "--d-in", "3", "--h", "3", "--d-out", "2", "--n", "20",
        "--t1", "5", "--n-save", "41", "--save-params", "ends", "--out", str(simulated),
    )  # fmt: skip
    return {
        **{f"check-report-{p}": checked / p / "report.html" for p in PAPERS},
        "index-all": checked / "index.html",
        "index": _index(checked),
        "simulate-report": simulated / "report.html",
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The documentation site, built once with warnings as errors into a temporary folder."""
    if BINARY is None:
        pytest.skip("no Chromium found on PATH")
    for module in ("mkdocs", "mkdocstrings", "material"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"`{module}` is not installed (pip install '.[docs]' to build the site)")
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def layouts(request, screenshots):
    """`layouts(page, width)`: the page measured at that width, loaded once per module (the
    reports are made, or the site built, when a page of theirs is first asked for)."""
    cache: dict[tuple[str, int], Layout] = {}

    def path(page: str) -> Path:
        if page in DOCS:
            return request.getfixturevalue("site") / DOCS[page]
        return request.getfixturevalue("pages")[page]

    def get(page: str, width: int) -> Layout:
        if (page, width) not in cache:
            assert BINARY is not None
            cache[page, width] = measure(
                path(page), width, work=screenshots, binary=BINARY, name=page
            )
        return cache[page, width]

    return get


def _exempt(layout: Layout) -> None:
    for e in layout.exempt:
        print(f"{layout.page} at {layout.width} px, allowed ({e['why']}): {e['shown']!r}")


def _grid(xfails: dict[tuple[str, int], str]) -> list:
    return [
        pytest.param(
            page,
            width,
            id=f"{page}-{width}px",
            marks=[pytest.mark.xfail(strict=True, reason=xfails[page, width])]
            if (page, width) in xfails
            else [],
        )
        for page in PAGES
        for width in WIDTHS
    ]


@needs_browser
@pytest.mark.parametrize(("page", "width"), _grid({}))
def test_page_does_not_overflow_sideways(layouts, screenshots, page, width):
    layout = layouts(page, width)
    assert not layout.page_overflows and not layout.overflowing, (
        f"{describe_overflow(layout)}\nscreenshots: {screenshots}"
    )


#: Defects found in the reports, each expected to fail until the report is fixed (strict,
#: so a fix shows). The numbers broken after an exponent's hyphen at 800 px (1.2e-05,
#: 3e-11; found 2026-12-04, Chromium 156) are fixed: signed and exponent numbers are kept
#: on one line.
BROKEN_TOKENS: dict[tuple[str, int], str] = {}


@needs_browser
@pytest.mark.parametrize(("page", "width"), _grid(BROKEN_TOKENS))
def test_no_word_or_number_broken_across_lines(layouts, screenshots, page, width):
    layout = layouts(page, width)
    _exempt(layout)
    assert not layout.broken, f"{describe_broken(layout)}\nscreenshots: {screenshots}"


@needs_browser
@pytest.mark.parametrize("page", sorted(DOCS))
def test_docs_formulas_are_rendered(layouts, screenshots, page):
    f = layouts(page, 1400).formulas
    raw = [f"  {e['shown']!r} in <{e['element']}> ({e['path']})" for e in f["raw"]]
    assert not raw, f"{page}: TeX-like notation left as text:\n" + "\n".join(raw)
    assert f["rendered"] == f["count"], (
        f"{page}: {f['count'] - f['rendered']} of {f['count']} formulas not laid out; "
        f"screenshots: {screenshots}"
    )
    if page in WITH_FORMULAS:
        assert f["count"] > 0, f"{page}: no MathML on a page with formulas"


@needs_browser
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", WITH_CLAIMS_TABLE)
def test_gallery_verdict_column_in_view(layouts, screenshots, page, width):
    verdicts = layouts(page, width).verdicts
    assert verdicts, f"{page}: no claims table with a Verdict column"
    hidden = [v for v in verdicts if v["right"] > v["visible"] + 1]
    assert not hidden, (
        f"{page} at {width} px: the verdict column ends past what is visible without "
        f"scrolling: {hidden}\nscreenshots: {screenshots}"
    )


_BAD_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<style>td{{border:1px solid #ccc}} .tw{{overflow-x:auto;max-width:100%}}</style></head>
<body><main>
<table style="width:130px"><tr><td style="word-break:break-all">measured
12345678901234567890.123456789 here</td></tr></table>
<table style="width:5em"><tr><td>5.91e-06</td><td>non-increasing</td></tr></table>
<p style="width:8em">path /<wbr>tmp/<wbr>pytest-of-ci/<wbr>pytest-0/<wbr>check0/<wbr>index.html</p>
<div class="tw"><table><tr>{wide}</tr></table></div>
<table id="unwrapped"><tr>{wide}</tr></table>
<nav style="position:fixed;top:0;left:-300px;width:280px">an off-canvas drawer</nav>
</main></body></html>
"""


@needs_browser
def test_the_measurement_finds_both_defects(tmp_path):
    """A narrow table with `word-break: break-all` and a long number, and a wide table with
    no scrolling wrapper (the same wide table inside `div.tw` is not reported, nor an
    off-canvas drawer), at 800 px."""
    wide = "".join(f"<td>column{i}</td>" for i in range(120))
    page = tmp_path / "bad.html"
    page.write_text(_BAD_PAGE.format(wide=wide), encoding="utf-8")
    assert BINARY is not None
    layout = measure(page, 800, work=tmp_path, binary=BINARY, name="bad")
    assert layout.screenshot is not None and layout.screenshot.stat().st_size > 0

    found = describe_overflow(layout)
    assert layout.page_overflows, found
    assert [e["element"] for e in layout.overflowing] == ["table#unwrapped"], found

    broken = {e["token"]: e for e in layout.broken}
    number = broken.get("12345678901234567890.123456789")
    assert number is not None, describe_broken(layout)
    assert "⏎" in number["shown"] and number["element"] == "td"
    assert "5.91e-06" in broken, describe_broken(layout)  # a number split at its exponent
    allowed = {e["token"]: e["why"] for e in layout.exempt}
    assert allowed.get("non-increasing") == "compound word at its hyphen", layout.exempt
    assert "non-increasing" not in broken
    path = "/tmp/pytest-of-ci/pytest-0/check0/index.html"
    assert allowed.get(path) == "path or identifier", layout.exempt
