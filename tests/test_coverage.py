"""Declared coverage (`flows.claims.coverage`, one `coverage.py` per paper) against the
pages and the checks:

- each paper page's "Coverage" section is what docs/_coverage.py generates from the
  paper's entries (edit the entries, then run `python docs/_coverage.py`);
- every row a `checked` or `partly` entry names is produced by the paper's checks, and
  every row the checks produce belongs to an entry or to the toolkit's own rows — so a new
  or renamed row must be placed in the coverage.

The checks' rows are read from `tests/data/coverage_claims.json` (the claim texts of the
quick and the default `flows check`, paper by paper), not by running the checks. Refresh
it when rows change, from an empty folder:

    flows check all --quick --format json --no-report --out out > quick.json
    python docs/_coverage.py --record quick.json
    flows check all --format json --no-report --out out > default.json
    python docs/_coverage.py --record default.json
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from flows import ConfigError
from flows.claims.coverage import (
    CHECKED,
    NOT_BUILT,
    NOT_CHECKED,
    OUT_OF_SCOPE,
    PARTLY,
    CoverageEntry,
    coverage_counts,
    coverage_table,
    markdown_cell,
    match_coverage,
)

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "flows_docs_coverage", ROOT / "docs" / "_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
PAPERS = list(GEN.PAPERS)


def _claims(paper: str) -> list[str]:
    return [c for mode in GEN.recorded_claims().values() for c in mode.get(paper, [])]


@pytest.mark.parametrize("paper", PAPERS)
def test_the_page_holds_the_generated_coverage(paper):
    text = GEN.page(paper).read_text(encoding="utf-8")
    _, held, _ = GEN.split_page(paper, text)
    assert held == GEN.section(paper), (
        f"docs/papers/{paper}.md: the Coverage section differs from the declared entries; "
        "run `python docs/_coverage.py`"
    )


@pytest.mark.parametrize("paper", PAPERS)
def test_the_record_holds_both_runs_of_every_paper(paper):
    record = GEN.recorded_claims()
    for mode in ("quick", "default"):
        assert record[mode].get(paper), f"no {mode} rows recorded for {paper}"


@pytest.mark.parametrize("paper", PAPERS)
def test_every_named_row_is_produced_by_the_checks(paper):
    mod = GEN.coverage_module(paper)
    m = match_coverage(mod.COVERAGE, _claims(paper), mod.TOOLKIT_ROWS)
    assert not m.missing, (
        f"{paper}: entries name rows that the recorded checks do not produce (rename the "
        f"fragment, or refresh tests/data/coverage_claims.json): {m.missing}"
    )
    stale = [t for t in mod.TOOLKIT_ROWS if not any(t in c for c in _claims(paper))]
    assert not stale, f"{paper}: toolkit rows no check produces: {stale}"


@pytest.mark.parametrize("paper", PAPERS)
def test_every_row_of_the_checks_belongs_to_an_entry(paper):
    mod = GEN.coverage_module(paper)
    m = match_coverage(mod.COVERAGE, _claims(paper), mod.TOOLKIT_ROWS)
    assert not m.unplaced, (
        f"{paper}: rows of `flows check` that no coverage entry places (add them to an "
        f"entry of flows/experiments/.../coverage.py, or to TOOLKIT_ROWS): {m.unplaced}"
    )


@pytest.mark.parametrize("paper", PAPERS)
def test_entries_are_named_once_and_the_paper_matches(paper):
    mod = GEN.coverage_module(paper)
    labels = [e.label for e in mod.COVERAGE]
    assert len(set(labels)) == len(labels), f"{paper}: a label repeats"
    assert mod.PAPER == paper


def test_the_generator_needs_its_markers():
    with pytest.raises(ValueError, match="lacks the lines"):
        GEN.split_page("multistage", "# a page without its coverage markers\n")


# -- the kit ---------------------------------------------------------------------------


def _entries():
    return (
        CoverageEntry("Theorem 1 (2)", "“x → 0”", CHECKED, rows=("x → 0 at m",)),
        CoverageEntry(
            "Lemma 3",
            "“|f| ≤ C”",
            PARTLY,
            rows=("bound on |f|",),
            gap=NOT_BUILT,
            note="at one width only.",
        ),
        CoverageEntry("Fig. 2", "an illustration", NOT_CHECKED, gap=OUT_OF_SCOPE, note="no claim."),
    )


def test_match_names_missing_and_unplaced_rows():
    claims = ["x → 0 at m = 1000", "energy identity", "a row nobody declared"]
    m = match_coverage(_entries(), claims, toolkit_rows=("energy identity",))
    assert m.missing == (("Lemma 3", "bound on |f|"),)
    assert m.unplaced == ("a row nobody declared",)
    assert m.rows["Theorem 1 (2)"] == ("x → 0 at m = 1000",) and not m.ok
    full = match_coverage(_entries(), [*claims[:2], "bound on |f| at T"], ("energy identity",))
    assert full.ok and full.rows["Lemma 3"] == ("bound on |f| at T",)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"status": "done"}, "status"),
        ({"status": CHECKED}, "rows"),  # a checked entry with no rows
        ({"status": NOT_CHECKED, "rows": ("r",), "gap": NOT_BUILT, "note": "n"}, "rows"),
        ({"status": PARTLY, "rows": ("r",), "note": "n"}, "gap"),
        ({"status": PARTLY, "rows": ("r",), "gap": NOT_BUILT}, "note"),
        ({"status": CHECKED, "rows": ("r",), "gap": NOT_BUILT}, "gap"),
        ({"status": CHECKED, "rows": ("",)}, "rows"),
        ({"status": CHECKED, "rows": "r"}, "rows"),
    ],
)
def test_an_entry_that_contradicts_itself_is_refused(kwargs, field):
    with pytest.raises(ConfigError, match=rf"'Lemma 9'.*`{field}`"):
        CoverageEntry("Lemma 9", "“words”", **kwargs)


def test_the_table_has_one_line_per_entry_and_counts_them():
    text = coverage_table(_entries(), ("energy identity",))
    assert text.startswith("3 results and figure-level claims: 1 checked, 1 partly, 1 not checked.")
    assert "Why a part is not checked: 1 × out of scope, 1 × not yet built." in text
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + len(_entries())  # header + one per entry
    assert "| Lemma 3 | “\\|f\\| ≤ C” | partly: not yet built | `bound on |f|`<br>at one" in text
    assert "toolkit, not a claim of the paper: `energy identity`." in text
    assert coverage_counts(_entries())[OUT_OF_SCOPE] == 1


def test_a_cell_renders_as_written():
    assert markdown_cell("a|b *c* d_e <x>") == "a\\|b \\*c\\* d\\_e &lt;x>"
    markdown = pytest.importorskip("markdown", reason="the `docs` extra is not installed")
    html = markdown.markdown(coverage_table(_entries()), extensions=["tables"])
    body = html.split("<tbody>")[1]
    assert [row.count("<td") for row in body.split("<tr>")[1:]] == [4, 4, 4]
    assert "<code>bound on |f|</code>" in body and "“|f| ≤ C”" in body
