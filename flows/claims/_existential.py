"""`Existential`: "can happen", searched over whole trajectories and a family of runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._errors import ConfigError
from ._checks import (
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    NOT_OBSERVED,
    OUTSIDE_HYPOTHESIS,
    Check,
)
from ._parts import (
    Hypothesis,
    _evaluate_hypotheses,
    _outside,
)


@dataclasses.dataclass(frozen=True)
class Existential:
    """'X can happen': searched over whole trajectories of a family of runs.

    `occurs[k]` is a boolean array over `times[k]` (run k of the family, labelled
    `members[k]`), True where X is the case. Verdict: `holds (persistent)` when X holds
    at the end of some run, `holds (transient)` when it occurs but at no run's end,
    `not observed` when it never occurs; `family` describes what was searched. The
    measured text gives where (the run) and when (first interval, its length)."""

    claim: str
    source: str
    times: Sequence[np.ndarray]
    occurs: Sequence[np.ndarray]
    members: Sequence[str]
    family: str
    hypotheses: Sequence[Hypothesis] = ()
    assumptions: str = ""
    reason: str = ""

    def judge(self) -> Check:
        hyps = _evaluate_hypotheses(self.claim, self.hypotheses)
        if not (len(self.times) == len(self.occurs) == len(self.members)):
            raise ConfigError(f"claim {self.claim!r}: times, occurs and members differ in length")
        found, persistent = [], []
        for t, occ, name in zip(self.times, self.occurs, self.members, strict=True):
            t, occ = np.asarray(t, float), np.asarray(occ, bool)
            if not occ.any():
                continue
            i0 = int(np.argmax(occ))
            i1 = i0 + int(np.argmax(~occ[i0:])) if not occ[i0:].all() else len(occ)
            end = float(t[i1 - 1])
            found.append(
                {
                    "member": name,
                    "t_first": float(t[i0]),
                    "t_last": end,
                    "fraction": float(occ.mean()),
                    "at_end": bool(occ[-1]),
                }
            )
            if occ[-1]:
                persistent.append(name)
        n = len(self.members)
        outside = _outside(hyps)
        if outside:
            verdict = OUTSIDE_HYPOTHESIS
        elif persistent:
            verdict = HOLDS_PERSISTENT
        elif found:
            verdict = HOLDS_TRANSIENT
        else:
            verdict = NOT_OBSERVED
        if found:
            f = found[0]
            measured = (
                f"in {len(found)} of {n} runs; first: {f['member']}, t ≈ "
                f"{f['t_first']:.3g}–{f['t_last']:.3g} (save resolution)"
                + (", to the end of the run" if f["at_end"] else "")
            )
        else:
            measured = f"in 0 of {n} runs"
        reasons = [f"searched: {self.family}"]
        if outside:
            reasons.insert(0, f"outside the hypothesis: {outside}")
        if self.reason:
            reasons.append(self.reason)
        return Check(
            self.claim,
            self.source,
            "can happen",
            measured,
            verdict,
            reason="; ".join(reasons),
            assumptions=self.assumptions,
            values={"occurrences": found, "searched": n},
            kind="existential",
            hypotheses=tuple(hyps),
        )
