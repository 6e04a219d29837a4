"""`Check`: one claim of a paper confronted with one run (or sweep), with a verdict; and
the text forms of a list of checks (`format_table`, `format_checks`)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import textwrap
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = [
    "Check",
    "Reference",
    "Trend",
    "HOLDS",
    "FAILS",
    "FAILS_JOINTLY",
    "FAILING",
    "NOT_APPLICABLE",
    "VACUOUS",
    "OUTSIDE_HYPOTHESIS",
    "UNDECIDED",
    "UNDECIDED_SIZE",
    "HOLDS_TRANSIENT",
    "HOLDS_PERSISTENT",
    "NOT_OBSERVED",
    "VERDICTS",
    "FORMATS",
    "format_lines",
    "annotate",
    "any_failed",
    "error_note",
    "row_notes",
    "display_width",
    "format_checks",
    "format_table",
    "verdict_counts",
]

HOLDS, FAILS, NOT_APPLICABLE = "holds", "fails", "not applicable"
#: The claim could not have failed (its bound lies outside the quantity's a-priori range).
VACUOUS = "vacuous"
#: The run does not meet a hypothesis of the theorem (named in the reason).
OUTSIDE_HYPOTHESIS = "outside hypothesis"
#: The margin is inside the numerical error bar.
UNDECIDED = "undecided (numerical)"
#: A limit m → ∞ whose fitted rate's confidence interval contains 0.
UNDECIDED_SIZE = "undecided (finite size)"
#: An existential claim ("can happen"): seen, but at no run's end / at a run's end / never.
HOLDS_TRANSIENT, HOLDS_PERSISTENT = "holds (transient)", "holds (persistent)"
NOT_OBSERVED = "not observed"
#: A theorem whose parts share a constant (`Window`) and hold together for no value of it:
#: a failure of the theorem as stated at the tested sizes, not of one part.
FAILS_JOINTLY = "fails (jointly)"
#: Every verdict a check can carry, in the order summaries list them. Only `fails` and
#: `fails (jointly)` make `flows check` exit with status 1 (`FAILING`).
VERDICTS = (
    HOLDS,
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    FAILS,
    FAILS_JOINTLY,
    NOT_OBSERVED,
    VACUOUS,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    NOT_APPLICABLE,
)

#: The verdicts that make a run fail.
FAILING = (FAILS, FAILS_JOINTLY)

#: The text layouts of `format_checks` (`flows check --format`).
FORMATS = ("auto", "wide", "compact", "lines", "json")


@dataclasses.dataclass(frozen=True)
class Reference:
    """Where a claim stands in its paper: title, section, result (theorem, proposition …),
    equation, the statement in words, and the output figure that shows it. Every field is
    optional ("" when unknown)."""

    paper: str = ""
    section: str = ""
    result: str = ""
    equation: str = ""
    statement: str = ""
    figure: str = ""

    def describe(self, *, with_paper: bool = True) -> str:
        """One line: 'Title, §4, Theorem 1, eq. (27)' (the parts that are known; without
        the title when `with_paper` is false)."""
        parts = [self.paper if with_paper else "", self.section, self.result]
        if self.equation:
            eq = self.equation
            parts.append(eq if eq.startswith("eq") else f"eq. {eq}")
        return ", ".join(p for p in parts if p)


_RESULT_WORDS = {
    "thm": "Theorem",
    "theorem": "Theorem",
    "prop": "Proposition",
    "proposition": "Proposition",
    "cor": "Corollary",
    "corollary": "Corollary",
    "lem": "Lemma",
    "lemma": "Lemma",
    "app.": "Appendix",
    "appendix": "Appendix",
}
_PLURALS = {"Corollary": "Corollaries", "Appendix": "Appendices"}
_RESULT = re.compile(
    r"\b(?i:("
    + "|".join(re.escape(w) for w in sorted(_RESULT_WORDS, key=len, reverse=True))
    + r"))\s*([\dA-Z][\d.]*(?:,\s*\d[\d.]*)*)"
)


def parse_source(source: str) -> dict[str, str]:
    """The result, equation and section named in a check's `source` string, e.g.
    'multistage Thm 1 (27)' → result 'Theorem 1', equation '(27)'; 'linear teachers Thm
    6.2 (eq. 8)' → 'Theorem 6.2', '(8)'; '§4' → section '§4'."""
    out: dict[str, str] = {}
    eq = re.search(r"\((?:eqs?\.?\s*)?([\d.–\-, ]+)\)", source)
    if not eq:
        eq = re.search(r"\beqs?\.?\s*\(?([\d.–\-, ]+)\)?", source)
    if eq:
        out["equation"] = f"({eq.group(1).strip()})"
    sec = re.findall(r"§[\dA-Z][\d.]*", source)
    if sec:
        out["section"] = ", ".join(sec)
    results = []
    for m in _RESULT.finditer(source):
        word = _RESULT_WORDS[m.group(1).lower()]
        if "," in m.group(2):
            word = _PLURALS.get(word, word + "s")
        results.append(f"{word} {m.group(2)}")
    if results:
        out["result"] = ", ".join(results)
    return out


@dataclasses.dataclass(frozen=True)
class Trend:
    """A finite-size trend a check measured: `y` against `x` (e.g. the descent time T_d
    against ln m), with optional error bars `y_err` and the prediction `predicted` at the
    same `x` (None where the claim predicts only a direction); `x_log` draws x on a log
    scale."""

    x_label: str
    y_label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    y_err: tuple[float, ...] | None = None
    predicted: tuple[float, ...] | None = None
    note: str = ""
    x_log: bool = False

    def __post_init__(self):
        n = len(self.x)
        for name in ("y", "y_err", "predicted"):
            v = getattr(self, name)
            if v is not None and len(v) != n:
                raise ValueError(f"Trend.{name} has {len(v)} values; x has {n}")


@dataclasses.dataclass(frozen=True)
class Check:
    """A claim, its assumptions, the predicted value or interval, the measured value, and a
    verdict: one of `VERDICTS` (`holds`, `fails`, `not applicable`, `vacuous`, `outside
    hypothesis`, …; see `flows.claims`), with the reason.

    Build with the claim kit (`flows.claims`: the verdict is computed from the claim's
    data), `Check.compare` (the verdict comes from one comparison) or
    `Check.not_applicable` (the quantity was not reached). `reference` (where the claim
    is in the paper) and `trend` (a finite-size trend the check measured) are optional;
    experiments attach them with `annotate`. The kit also fills `kind` (upper bound,
    equality, limit, existential …), `margin` (how far inside the claim the measurement
    is; negative when it fails), `error` (the measurement's numerical error bar, NaN when
    not estimated), `critical` (per unspecified constant, where the verdict flips) and
    `hypotheses` (each with whether the run meets it).
    """

    claim: str
    source: str
    predicted: str
    measured: str
    verdict: str
    reason: str = ""
    assumptions: str = ""
    values: dict = dataclasses.field(default_factory=dict)
    reference: Reference | None = None
    trend: Trend | None = None
    kind: str = ""
    margin: float | None = None
    error: float | None = None
    critical: tuple[str, ...] = ()
    hypotheses: tuple[dict, ...] = ()

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}; got {self.verdict!r}")

    @classmethod
    def compare(
        cls,
        claim: str,
        source: str,
        *,
        holds: bool,
        predicted: str,
        measured: str,
        assumptions: str = "",
        values: dict | None = None,
        reason: str = "",
        critical: tuple[str, ...] = (),
    ) -> Check:
        """A check whose verdict is `holds` iff `holds` (a NaN comparison is a failure).
        `critical`: where the verdict flips in a tolerance of the check
        (`flows.claims.flips_at`)."""
        return cls(
            claim=claim,
            source=source,
            predicted=predicted,
            measured=measured,
            verdict=HOLDS if bool(holds) else FAILS,
            reason=reason,
            assumptions=assumptions,
            values=_clean(values or {}),
            critical=tuple(critical),
        )

    @classmethod
    def not_applicable(
        cls,
        claim: str,
        source: str,
        reason: str,
        *,
        predicted: str = "—",
        measured: str = "—",
        assumptions: str = "",
        values: dict | None = None,
    ) -> Check:
        return cls(
            claim=claim,
            source=source,
            predicted=predicted,
            measured=measured,
            verdict=NOT_APPLICABLE,
            reason=reason,
            assumptions=assumptions,
            values=_clean(values or {}),
        )

    @property
    def label(self) -> str:
        """'[source] claim', as the text table shows it."""
        return f"[{self.source}] {self.claim}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _clean(values: dict) -> dict:
    out = {}
    for k, v in values.items():
        try:
            f = float(v)
            out[k] = f if math.isfinite(f) else str(f)
        except (TypeError, ValueError):
            out[k] = v
    return out


def annotate(
    checks: Iterable[Check],
    references: Mapping[str, Reference],
    *,
    paper: str = "",
    trend: Callable[[Check], Trend | None] | None = None,
) -> list[Check]:
    """The checks with their `reference` (and `trend`) filled in.

    A check takes the first entry of `references` whose key equals its claim, occurs in
    its claim, or equals its source; fields the entry leaves empty come from the check's
    `source` (`parse_source`: result, equation, section) and `paper` (the title; checks
    whose source starts with 'gradient flow', or is 'setup', are the toolkit's own and get
    no title).
    `trend(check)` gives the check's finite-size trend, or None. A check that already has
    a reference or trend keeps it.
    """
    out = []
    for c in checks:
        ref = c.reference
        if ref is None:
            entry = _lookup(c, references) or Reference()
            own = c.source.startswith("gradient flow") or c.source == "setup"
            fields = {"paper": "" if own else paper, **parse_source(c.source)}
            fields |= {k: v for k, v in dataclasses.asdict(entry).items() if v}
            ref = Reference(**fields)
        tr = c.trend if c.trend is not None or trend is None else trend(c)
        out.append(dataclasses.replace(c, reference=ref, trend=tr))
    return out


def _lookup(c: Check, references: Mapping[str, Reference]) -> Reference | None:
    if c.claim in references:
        return references[c.claim]
    for key, ref in references.items():
        if key in c.claim:
            return ref
    return references.get(c.source)


def any_failed(checks) -> bool:
    return any(c.verdict in FAILING for c in checks)


def verdict_counts(checks) -> dict[str, int]:
    """How many checks carry each verdict of `VERDICTS` (every kind, zeros included)."""
    return {v: sum(c.verdict == v for c in checks) for v in VERDICTS}


def _summary(checks) -> str:
    """'37 hold, 0 fail, 0 not applicable', then every other verdict kind that occurs."""
    n = verdict_counts(checks)
    out = f"{n[HOLDS]} hold, {n[FAILS]} fail, {n[NOT_APPLICABLE]} not applicable"
    others = [f"{n[v]} {v}" for v in VERDICTS if v not in (HOLDS, FAILS, NOT_APPLICABLE) and n[v]]
    return out + "".join(", " + o for o in others)


def _verdict_text(c: Check) -> str:
    return c.verdict.upper() if c.verdict in FAILING else c.verdict


def _notes(c: Check) -> str:
    """The reason, then the error bar and the critical constants, as one line: a function
    of the fields `Check.to_dict()` writes to `results.json` (`row_notes`), so the table
    and the JSON cannot disagree."""
    return row_notes(dataclasses.asdict(c))


def _number(x) -> float | None:
    """A float from a check's field as a `Check` or its JSON holds it (None, a float, or
    'nan' / 'inf' as text)."""
    if x is None:
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def error_note(row: Mapping) -> str:
    """What a row says about its error bar, from the fields of its JSON form
    (`Check.to_dict()`, `results.json`): that the measured value is not larger than its
    error bar (a number without a significant digit: not a result), the margin against the
    error bar (or that the error bar is missing or unbounded), the rate's numerical error
    of a limit, and the companion solve's verdict (named as such, beside the row's own)."""
    values = row.get("values") or {}
    kind, margin, err = row.get("kind", ""), _number(row.get("margin")), _number(row.get("error"))
    parts = []
    if margin is not None and kind != "limit":
        what = values.get("error_kind", "numerical error")
        # the value itself (an equality row's `measured` is its distance to the target)
        value = _number(values.get("measured_value", values.get("measured")))
        if value is not None and err is not None and 0 < err < math.inf and abs(value) <= err:
            parts.append(
                f"the measured value is not larger than its {what} ±{err:.2g}: it has no "
                "significant digit (unresolved)"
            )
        if err is None or math.isnan(err):
            parts.append(f"{what} not estimated")
        elif math.isinf(err):
            parts.append(f"{what} unbounded")
        elif kind == "agreement":  # margin = error bar − difference
            parts.append(f"difference {err - margin:.2g} against the error bar ±{err:.2g}")
        else:
            parts.append(f"margin {margin:.2g}, {what} ±{err:.2g}")
    if kind == "limit" and err is not None and math.isfinite(err):
        parts.append(f"rate's numerical error ±{err:.2g}")
    if "companion_verdict" in values and err is None:
        how, other = values.get("error_how", "companion solve"), values["companion_verdict"]
        same = " (the same verdict)" if other == row.get("verdict") else ""
        the = "" if how.startswith(("every ", "the ", "a ")) else "the "
        parts.append(f"{other!r} on {the}{how}{same}")
    return "; ".join(parts)


def row_notes(row: Mapping) -> str:
    """The note under a row of the table (reason; error bar; critical constants), from the
    fields of its JSON form alone (`Check.to_dict()`, as `results.json` stores it)."""
    parts = [row["reason"]] if row.get("reason") else []
    if note := error_note(row):
        parts.append(note)
    if row.get("critical"):
        parts.append("critical: " + "; ".join(str(x) for x in row["critical"]))
    return "; ".join(parts)


def display_width(text: str) -> int:
    """Terminal columns `text` takes: combining marks (the hat of q̂) take none, wide East
    Asian characters two."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _pad(text: str, width: int) -> str:
    return text + " " * max(width - display_width(text), 0)


def _wrap(text: str, width: int, **kw) -> list[str]:
    # break_on_hyphens off: formulas such as m^{-α} must not split at their minus sign
    return textwrap.wrap(text, max(width, 1), break_on_hyphens=False, **kw) or [""]


#: Column widths of the wide layout (claim, predicted, measured, verdict).
WIDE_COLUMNS = (46, 30, 30, 14)
_VERDICT_W = 14  # len("not applicable")
_SEP = " | "
#: Below this width the columns get too narrow to read: `format_table` lays out each
#: claim as a block instead (`compact`).
MIN_TABLE_WIDTH = 72


def _columns_for(width: int) -> tuple[int, int, int, int]:
    free = width - 3 * len(_SEP) - _VERDICT_W
    claim = max(free * 2 // 5, 8)
    pred = max((free - claim) // 2, 6)
    meas = max(free - claim - pred, 6)
    return claim, pred, meas, _VERDICT_W


def format_table(checks: Sequence[Check], width: int | None = 140, *, layout: str = "auto") -> str:
    """Plain-text table: claim · predicted · measured · verdict, with reasons below.

    **Arguments:** `width`, the most characters per line (None: the wide layout's fixed
    columns, lines as long as they need); `layout`: 'auto' (columns fitted to `width`, or
    one block per claim when `width` is below `MIN_TABLE_WIDTH`), 'wide' (fixed columns
    of `WIDE_COLUMNS`; reasons wrapped to `width`) or 'compact' (one block per claim).

    **Returns:** the table; with 'auto' and 'compact' no line is longer than `width`.
    """
    if layout not in ("auto", "wide", "compact"):
        raise ValueError(f"layout must be auto, wide or compact; got {layout!r}")
    if layout == "compact" or (layout == "auto" and width is not None and width < MIN_TABLE_WIDTH):
        return _format_compact(checks, width or 100)
    if layout == "wide" or width is None:
        cols = WIDE_COLUMNS
        reason_w = (width or 140) - 4
    else:
        cols = _columns_for(width)
        reason_w = width - 4
    names = ("claim", "predicted", "measured", "verdict")
    header = _SEP.join(n.ljust(w) for n, w in zip(names, cols, strict=True))
    lines = [header.rstrip(), "-" * len(header)]
    for c in checks:
        cells = [
            _wrap(c.label, cols[0]),
            _wrap(c.predicted, cols[1]),
            _wrap(c.measured, cols[2]),
            _wrap(_verdict_text(c), cols[3]),
        ]
        for i in range(max(len(x) for x in cells)):
            row = [
                _pad(cell[i] if i < len(cell) else "", w)
                for cell, w in zip(cells, cols, strict=True)
            ]
            lines.append(_SEP.join(row).rstrip())
        if notes := _notes(c):
            lines += ["    " + part for part in _wrap(f"↳ {notes}", reason_w)]
    lines.append("-" * len(header))
    lines += _wrap(_summary(checks), len(header))
    return "\n".join(lines)


_MARK = {
    HOLDS: "✓",
    HOLDS_PERSISTENT: "✓",
    HOLDS_TRANSIENT: "✓",
    FAILS: "✗",
    FAILS_JOINTLY: "✗",
    NOT_OBSERVED: "✗",
    VACUOUS: "○",
    OUTSIDE_HYPOTHESIS: "–",
    UNDECIDED: "?",
    UNDECIDED_SIZE: "?",
    NOT_APPLICABLE: "–",
}


def _format_compact(checks: Sequence[Check], width: int) -> str:
    """One block per claim: verdict and claim, then predicted, measured and the reason,
    each wrapped to `width` with a hanging indent."""
    width = max(width, 20)
    lines = _wrap("verdict: [source] claim / predicted / measured / ↳ reason", width)
    for c in checks:
        head = f"{_MARK[c.verdict]} {_verdict_text(c)}: {c.label}"
        lines += _wrap(head, width, subsequent_indent="    ")
        for key, text in (("predicted", c.predicted), ("measured", c.measured)):
            lines += _wrap(
                f"{key}: {text}", width, initial_indent="    ", subsequent_indent="      "
            )
        if notes := _notes(c):
            lines += _wrap(f"↳ {notes}", width, initial_indent="    ", subsequent_indent="      ")
    lines += _wrap(_summary(checks), width)
    return "\n".join(lines)


def format_lines(checks: Sequence[Check], prefix: str = "") -> str:
    """One line per claim, each readable alone (in a log, after `grep`): `prefix` (the
    paper's name), the verdict, '[source] claim', what was measured and the error-bar note
    (margin against the numerical error; the companion's verdict). The reasons and the
    critical constants are left to the report and `results.json`; then the tally."""
    head = f"{prefix}: " if prefix else ""
    lines = []
    for c in checks:
        line = f"{head}{_MARK[c.verdict]} {_verdict_text(c)}: {c.label}"
        if c.measured:
            line += f" — measured {c.measured}"
        if note := error_note(c.to_dict()):
            line += f" ({note})"
        lines.append(" ".join(line.split()))  # one line: no newline inside a field
    lines.append(f"{head}{_summary(checks)}")
    return "\n".join(lines)


def format_checks(checks: Sequence[Check], fmt: str = "auto", width: int | None = None) -> str:
    """`checks` as `flows check --format fmt` prints them: 'auto' (fitted to `width`),
    'wide', 'compact' (see `format_table`), 'lines' (one line per claim, `format_lines`)
    or 'json' (a JSON list of `Check.to_dict()`)."""
    if fmt == "json":
        return json.dumps([json_safe(c.to_dict()) for c in checks], indent=1, ensure_ascii=False)
    if fmt == "lines":
        return format_lines(checks)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}; got {fmt!r}")
    return format_table(checks, width, layout=fmt)


def json_safe(obj):
    """`obj` with non-finite floats as strings ('nan', 'inf') and numpy values as Python
    ones, so that strict JSON readers accept it."""
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return json_safe(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)
