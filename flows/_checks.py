"""`Check`: one claim of a paper confronted with one run (or sweep), with a verdict."""

from __future__ import annotations

import dataclasses
import math
import textwrap

__all__ = ["Check", "HOLDS", "FAILS", "NOT_APPLICABLE", "format_table", "any_failed"]

HOLDS, FAILS, NOT_APPLICABLE = "holds", "fails", "not applicable"


@dataclasses.dataclass(frozen=True)
class Check:
    """A claim, its assumptions, the predicted value or interval, the measured value, and a
    verdict: `holds`, `fails` or `not applicable` (with the reason).

    Build with `Check.compare` (the verdict comes from comparing numbers) or
    `Check.not_applicable` (assumptions violated, or the quantity was not reached).
    """

    claim: str
    source: str
    predicted: str
    measured: str
    verdict: str
    reason: str = ""
    assumptions: str = ""
    values: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.verdict not in (HOLDS, FAILS, NOT_APPLICABLE):
            raise ValueError(f"verdict must be holds/fails/not applicable; got {self.verdict!r}")

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
    ) -> Check:
        """A check whose verdict is `holds` iff `holds` (a NaN comparison is a failure)."""
        return cls(
            claim=claim,
            source=source,
            predicted=predicted,
            measured=measured,
            verdict=HOLDS if bool(holds) else FAILS,
            reason=reason,
            assumptions=assumptions,
            values=_clean(values or {}),
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


def any_failed(checks) -> bool:
    return any(c.verdict == FAILS for c in checks)


def format_table(checks, width: int = 140) -> str:
    """Plain-text table: claim · predicted · measured · verdict, with reasons below."""
    cols = [("claim", 46), ("predicted", 30), ("measured", 30), ("verdict", 14)]
    header = " | ".join(name.ljust(w) for name, w in cols)
    lines = [header, "-" * len(header)]
    for c in checks:
        cells = [
            textwrap.wrap(f"[{c.source}] {c.claim}", cols[0][1]) or [""],
            textwrap.wrap(c.predicted, cols[1][1]) or [""],
            textwrap.wrap(c.measured, cols[2][1]) or [""],
            [c.verdict.upper() if c.verdict == FAILS else c.verdict],
        ]
        for i in range(max(len(x) for x in cells)):
            row = [
                (cell[i] if i < len(cell) else "").ljust(w)
                for cell, (_, w) in zip(cells, cols, strict=True)
            ]
            lines.append(" | ".join(row).rstrip())
        if c.reason:
            for part in textwrap.wrap(f"↳ {c.reason}", width - 4):
                lines.append("    " + part)
    counts = {v: sum(c.verdict == v for c in checks) for v in (HOLDS, FAILS, NOT_APPLICABLE)}
    lines.append("-" * len(header))
    lines.append(
        f"{counts[HOLDS]} hold, {counts[FAILS]} fail, {counts[NOT_APPLICABLE]} not applicable"
    )
    return "\n".join(lines)
