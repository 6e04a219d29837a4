"""Declared coverage: every numbered result and figure-level claim of a paper, and whether
the paper's checks confront it.

A paper declares one `CoverageEntry` per theorem, corollary, proposition, lemma (or part
of one, where the parts are checked differently) and per figure-level empirical claim, in
the paper's order: its label, the paper's words, a status (`checked`, `partly`, `not
checked`), the rows of `flows check` that check it, and for what is not (fully) checked,
why — out of scope (a proof device with no observable, an illustration), a run the
toolkit does not do, or not yet built. `coverage_table` renders the entries as the
Markdown table of the paper's documentation page; `match_coverage` confronts them with
the claims a run of the checks produced: a `checked` or `partly` entry must name rows that
exist, and every row must belong to an entry (or to the toolkit's own rows, such as the
accuracy certificate of a solve), so a new row has to be placed in the coverage.

Rows are named by a fragment of their claim text (`Check.claim`): a row belongs to an entry
when one of the entry's fragments occurs in it. A fragment leaves out the parts of a claim
that change with the run's size (`at m = 5000`, `(n = 160)`) or its run label (`digits,
depth 4 identity: `), so one fragment names the row of the quick and the default check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from .._errors import ConfigError

__all__ = [
    "CHECKED",
    "PARTLY",
    "NOT_CHECKED",
    "STATUSES",
    "OUT_OF_SCOPE",
    "NEEDS_RUN",
    "NOT_BUILT",
    "GAPS",
    "CoverageEntry",
    "CoverageMatch",
    "coverage_counts",
    "coverage_table",
    "markdown_cell",
    "match_coverage",
]

#: Status of an entry whose every part is confronted with a run by some row.
CHECKED = "checked"
#: Status of an entry some part of which is checked; its `note` says which part is not.
PARTLY = "partly"
#: Status of an entry no row checks; its `note` says why.
NOT_CHECKED = "not checked"
#: The statuses, in the order the tables count them.
STATUSES = (CHECKED, PARTLY, NOT_CHECKED)

#: Why a part is not checked: nothing to observe (a proof device, a definition, an
#: illustration, a cited result) or a claim about data and models outside the toolkit's.
OUT_OF_SCOPE = "out of scope"
#: Why a part is not checked: it needs a run that `flows check` does not do (a data set or
#: a network it does not train, or an opt-in run).
NEEDS_RUN = "needs a run the toolkit does not do"
#: Why a part is not checked: the observable exists or is cheap, the row is not written.
NOT_BUILT = "not yet built"
#: The reasons for a part left unchecked.
GAPS = (OUT_OF_SCOPE, NEEDS_RUN, NOT_BUILT)


@dataclasses.dataclass(frozen=True)
class CoverageEntry:
    """One numbered result, part of one, or figure-level claim of a paper, and the rows of
    `flows check` that confront it.

    **Arguments:**

    - `label`: where it stands in the paper, as the paper numbers it (`"Theorem 2 (45)"`,
      `"Fig. 3"`, `"Lemma 6.1"`; `§` and a short name where the number is lost).
    - `words`: the paper's words, one short quoted phrase (quotes included; a paraphrase
      without quotes where the paper's text is not at hand).
    - `status`: `CHECKED`, `PARTLY` or `NOT_CHECKED`.
    - `rows`: fragments of the claim text of the rows that check it (a row belongs to the
      entry when a fragment occurs in its claim); at least one unless `NOT_CHECKED`, none
      then.
    - `gap`: one of `GAPS`, required unless `CHECKED`: why (the rest of) it is not checked.
    - `note`: one sentence; for `PARTLY` which part is not checked and why, for
      `NOT_CHECKED` why; for `CHECKED` optional (how the rows read the claim).

    Raises `flows.ConfigError` naming the entry and the field for an entry that
    contradicts itself (an unknown status, rows on a `not checked` entry, a missing reason).
    """

    label: str
    words: str
    status: str
    rows: tuple[str, ...] = ()
    gap: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        def bad(field: str, what: str) -> ConfigError:
            return ConfigError(f"coverage entry {self.label!r}: `{field}` {what}")

        if not self.label.strip() or not self.words.strip():
            raise bad("label", "and `words` must be non-empty")
        if self.status not in STATUSES:
            raise bad("status", f"must be one of {STATUSES}; got {self.status!r}")
        if isinstance(self.rows, str):
            raise bad("rows", "must be a tuple of claim fragments, not one string")
        if any(not r.strip() for r in self.rows):
            raise bad("rows", "holds an empty fragment (it would match every row)")
        if self.status == NOT_CHECKED and self.rows:
            raise bad("rows", "must be empty for a `not checked` entry")
        if self.status != NOT_CHECKED and not self.rows:
            raise bad("rows", f"must name the rows that check a `{self.status}` entry")
        if self.status == CHECKED:
            if self.gap:
                raise bad("gap", "is for `partly` and `not checked` entries")
        else:
            if self.gap not in GAPS:
                raise bad("gap", f"must be one of {GAPS}; got {self.gap!r}")
            if not self.note.strip():
                raise bad("note", f"must say why a `{self.status}` entry is not (fully) checked")

    def covers(self, claim: str) -> bool:
        """Whether the row with this claim text is one of the entry's rows."""
        return any(r in claim for r in self.rows)


@dataclasses.dataclass(frozen=True)
class CoverageMatch:
    """Declared entries against the claims of a run (`match_coverage`).

    - `missing`: `(label, fragment)` of a `checked` or `partly` entry whose fragment occurs
      in no claim of the run — a row the entry names that the checks do not produce.
    - `unplaced`: claims of the run that belong to no entry and to none of the toolkit's
      own rows — a row the coverage does not place.
    - `rows`: for each entry's label, the claims of the run that it covers.
    """

    missing: tuple[tuple[str, str], ...]
    unplaced: tuple[str, ...]
    rows: dict[str, tuple[str, ...]]

    @property
    def ok(self) -> bool:
        """Whether every named row exists and every row is placed."""
        return not self.missing and not self.unplaced


def match_coverage(
    entries: Sequence[CoverageEntry],
    claims: Iterable[str],
    toolkit_rows: Sequence[str] = (),
) -> CoverageMatch:
    """Confront a paper's declared coverage with the claims a run of its checks produced.

    **Arguments:**

    - `entries`: the paper's `CoverageEntry`s.
    - `claims`: the claim texts of the rows (`Check.claim`) of one or more runs of the
      paper's checks (the quick and the default run together, say).
    - `toolkit_rows`: fragments of the rows that check the toolkit, not a claim of the
      paper (a solve's accuracy certificate, GD against the exact flow).

    **Returns:** a `CoverageMatch`: the fragments of `checked`/`partly` entries that match
    no claim, the claims that match no entry and no toolkit fragment, and each entry's rows.
    """
    claims = list(dict.fromkeys(claims))
    missing = tuple(
        (e.label, r) for e in entries for r in e.rows if not any(r in c for c in claims)
    )
    unplaced = tuple(
        c
        for c in claims
        if not any(e.covers(c) for e in entries) and not any(t in c for t in toolkit_rows)
    )
    rows = {e.label: tuple(c for c in claims if e.covers(c)) for e in entries}
    return CoverageMatch(missing=missing, unplaced=unplaced, rows=rows)


def coverage_counts(entries: Sequence[CoverageEntry]) -> dict[str, int]:
    """How many entries have each status, and each reason for a part not checked:
    `{"checked": …, "partly": …, "not checked": …, "out of scope": …, …}`."""
    counts = {s: 0 for s in (*STATUSES, *GAPS)}
    for e in entries:
        counts[e.status] += 1
        if e.gap:
            counts[e.gap] += 1
    return counts


def markdown_cell(text: str) -> str:
    """`text` for a Markdown table cell: backslashes, pipes, emphasis marks and tags
    escaped, so it renders as written."""
    out = text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")
    return out.replace("<", "&lt;").replace("\n", " ")


def _code(fragment: str) -> str:
    # a claim fragment is literal text: a code span (pipes inside one do not split a cell)
    fence = "``" if "`" in fragment else "`"
    pad = " " if fragment.startswith("`") or fragment.endswith("`") else ""
    return f"{fence}{pad}{fragment}{pad}{fence}"


def coverage_table(
    entries: Sequence[CoverageEntry],
    toolkit_rows: Sequence[str] = (),
    *,
    prose: Callable[[str], str] = markdown_cell,
) -> str:
    """A paper's coverage as Markdown: a line counting the entries by status and reason, a
    table with one line per entry — the result, the paper's words, the status (with the
    reason for a part not checked), the rows that check it (as code: the claim fragments)
    and what is left — and the toolkit's own rows.

    **Arguments:**

    - `entries`: the paper's `CoverageEntry`s, in the paper's order.
    - `toolkit_rows`: fragments of the rows that check the toolkit rather than the paper.
    - `prose`: turns a label, the paper's words or a note into the text of a table cell
      (default `markdown_cell`; the documentation marks formulas in it as `$…$`).

    **Returns:** the Markdown text, ending in a newline.
    """
    n = coverage_counts(entries)
    gaps = ", ".join(f"{n[g]} × {g}" for g in GAPS if n[g])
    lines = [
        f"{len(entries)} results and figure-level claims: {n[CHECKED]} checked, "
        f"{n[PARTLY]} partly, {n[NOT_CHECKED]} not checked."
        + (f" Why a part is not checked: {gaps}." if gaps else ""),
        "",
        "| Result | The paper's words | Status | Rows of `flows check`; what is not checked |",
        "|---|---|---|---|",
    ]
    for e in entries:
        status = e.status if e.status == CHECKED else f"{e.status}: {e.gap}"
        parts = [" · ".join(_code(r) for r in e.rows)] if e.rows else []
        if e.note:
            parts.append(prose(e.note))
        cells = (prose(e.label), prose(e.words), status, "<br>".join(parts))
        lines.append("| " + " | ".join(cells) + " |")
    if toolkit_rows:
        lines += [
            "",
            "Rows that check the toolkit, not a claim of the paper: "
            + " · ".join(_code(t) for t in toolkit_rows)
            + ".",
        ]
    return "\n".join(lines) + "\n"
