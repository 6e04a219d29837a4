"""One constant per theorem: the window of a shared constant in which every numbered part
of a theorem holds together, and the extension of a limit row's sweep until its
confidence interval decides.

A theorem often states one unspecified constant (Theorem 2's δ′, Theorem 3's β) for all
its numbered parts. Judging each part at its own best constant hides a contradiction:
(45) may need δ′ ≥ 0.5 while the paper's text asks for a "small" δ′. `Window` takes the
theorem's parts, each written as its margin — a function of the constant, ≥ 0 where
the part holds at that value — and finds, to a stated resolution, the set of admissible
values where each part holds (a grid, then bisection at every sign change), their
intersection (the *window*), and, when the window is empty, the smallest set of parts
that exclude each other. The row's verdict is `holds` (the window is not empty; it is
shown, with the default's position in it) or `fails`, the claim reading '… (jointly)'
and naming the parts that cannot hold together. A default that is not inside the window,
at least `clearance` of its width from either edge, is said in the row (a table judged at
such a default disagrees with the theorem) and recorded in `values['default_inside']`.

Where the paper says "for any small δ′ and sufficiently large m", one window per width
gives the window's edge at every width; `edge_trend` judges whether that edge shrinks
toward the limit the paper allows (0 for "any small δ′") with the kit's `Limit` rule.

`extend` drives a limit row that is `undecided (finite size)`: it multiplies the largest
value of the asymptotic variable (m, 1/α, t, 1/η) by `factor` (2), runs it, and judges
again, while the row stays undecided and the predicted cost of the next value fits in
the budget; the row then says how far it went, how long it took, and what a decision
would still need.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from .._errors import ConfigError
from ._checks import FAILS, FAILS_JOINTLY, HOLDS, UNDECIDED, UNDECIDED_SIZE, Check, _clean
from ._parts import Constant, _check_constants

__all__ = ["Part", "Window", "WindowSearch", "Extension", "edge_trend", "extend"]

Intervals = tuple[tuple[float, float], ...]


@dataclasses.dataclass(frozen=True)
class Part:
    """One numbered part of a theorem as a function of the theorem's shared constant.

    `label` is the paper's number ('(45)'); `claim` the inequality ('T_d/ln m ≤
    (2α−1)/(2−δ′)'); `margin(c)` is ≥ 0 where the part holds at the constant's value c
    (bound minus measured for an upper bound); NaN or ±∞ counts as not holding. `error`
    is the numerical error bar of the margin (0: not estimated); `quote` the paper's words."""

    label: str
    claim: str
    margin: Callable[[float], float]
    error: float = 0.0
    quote: str = ""


@dataclasses.dataclass(frozen=True)
class WindowSearch:
    """What `Window.search` found: per part, the admissible values where it holds
    (`holds`, closed intervals, to `resolution`); their intersection (`window`); the
    part margins at the default (`at_default`); whether the default sits inside the window
    with the required clearance (`inside`) and its distance to the nearest edge as a
    fraction of the window's width (`clearance`, log scale when the search is); the parts
    that exclude each other when the window is empty (`conflict`, the first smallest set;
    `conflicts`, every set of that size); and the evaluations."""

    holds: dict[str, Intervals]
    window: Intervals
    default: float
    at_default: dict[str, float]
    inside: bool
    clearance: float
    conflict: tuple[str, ...]
    resolution: float
    evaluations: int
    conflicts: tuple[tuple[str, ...], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.window

    @property
    def lower_edge(self) -> float:
        """The smallest value in the window (NaN when it is empty)."""
        return self.window[0][0] if self.window else math.nan

    @property
    def upper_edge(self) -> float:
        """The largest value in the window (NaN when it is empty)."""
        return self.window[-1][1] if self.window else math.nan


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def intervals_text(iv: Intervals, label: str) -> str:
    """'δ′ ∈ [0.51, 2]' (a union with '∪'); 'no δ′' when empty."""
    if not iv:
        return f"no {label}"
    return f"{label} ∈ " + " ∪ ".join(f"[{_fmt(a)}, {_fmt(b)}]" for a, b in iv)


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Window:
    """'One value of `constant` makes every part of the theorem hold': the window of the
    constant in which all `parts` hold together at the tested size.

    **Fields:** `claim` (the row's name, e.g. 'Theorem 2: one δ′ for (45) and (47) at
    α = 1, m = 4000'), `source`; `constant` (a `flows.claims.Constant`: its default and
    admissible range); `parts` (`Part`s, ≥ 1); `quote`, the paper's words for the
    constant ('any given small β, δ′ > 0'), shown with the default; `grid` points of the
    first scan (≥ 3; log-spaced when `log`, which needs a positive range); `resolution`
    to which each edge is bisected (in the constant's units; relative when `log`);
    `clearance`, the least distance, as a fraction of the window's width, that the
    default must keep from the window's edges to count as inside it.

    **Bad settings** (a `ConfigError` naming the claim and the field): no parts, two
    parts with one label, fewer than 3 grid points, a resolution ≤ 0 or coarser than the
    grid, a log search over a range that is not positive, a constant without an
    admissible range or with its default outside it."""

    claim: str
    source: str
    constant: Constant
    parts: Sequence[Part]
    quote: str = ""
    grid: int = 97
    log: bool = False
    resolution: float = 1e-4
    clearance: float = 0.05
    assumptions: str = ""
    reason: str = ""
    values: dict = dataclasses.field(default_factory=dict)

    def _validate(self) -> tuple[float, float]:
        def bad(field: str, why: str) -> ConfigError:
            return ConfigError(f"claim {self.claim!r}: field {field!r}: {why}")

        _check_constants(self.claim, (self.constant,))
        if not self.parts:
            raise bad("parts", "a theorem's window needs at least one part")
        labels = [p.label for p in self.parts]
        if len(set(labels)) != len(labels):
            raise bad("parts", f"two parts share a label ({labels}); label each part once")
        if not (isinstance(self.grid, int) and self.grid >= 3):
            raise bad("grid", f"needs ≥ 3 points; got {self.grid!r}")
        lo, hi = (float(x) for x in self.constant.admissible)  # type: ignore[union-attr]
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise bad(
                "constant",
                f"the admissible range [{lo}, {hi}] of {self.constant.label} must be finite "
                "and non-empty to be searched (cut an infinite end where the bound is vacuous)",
            )
        if self.log and lo <= 0:
            raise bad("log", f"a log search needs a positive range; got [{lo}, {hi}]")
        span = math.log(hi / lo) if self.log else hi - lo
        if not (math.isfinite(self.resolution) and self.resolution > 0):
            raise bad("resolution", f"must be > 0; got {self.resolution!r}")
        if self.resolution >= span / (self.grid - 1):
            raise bad(
                "resolution",
                f"{self.resolution:g} is not finer than the grid's spacing "
                f"{span / (self.grid - 1):.3g}; ask for a finer resolution or fewer points",
            )
        if not 0 <= self.clearance < 0.5:
            raise bad("clearance", f"must lie in [0, 1/2); got {self.clearance!r}")
        return lo, hi

    def _holds_set(self, part: Part, lo: float, hi: float) -> tuple[Intervals, int]:
        """The closed intervals of [lo, hi] where `part.margin` ≥ 0, edges bisected."""

        def ok(x: float) -> bool:
            try:
                v = float(part.margin(float(x)))
            except (ArithmeticError, ValueError):
                return False
            return math.isfinite(v) and v >= 0

        if self.log:
            xs = np.geomspace(lo, hi, self.grid)
        else:
            xs = np.linspace(lo, hi, self.grid)
        flags = [ok(float(x)) for x in xs]
        n = len(xs)

        def edge(a: float, b: float, fa: bool) -> tuple[float, float, int]:
            """Bisect [a, b] (ok(a) = fa ≠ ok(b)) to the resolution; the last points on
            each side."""
            k = 0
            while (math.log(b / a) if self.log else b - a) > self.resolution:
                mid = math.sqrt(a * b) if self.log else 0.5 * (a + b)
                k += 1
                if ok(mid) == fa:
                    a = mid
                else:
                    b = mid
            return a, b, k

        out: list[tuple[float, float]] = []
        start = float(xs[0]) if flags[0] else None
        for i in range(n - 1):
            if flags[i] == flags[i + 1]:
                continue
            a, b, k = edge(float(xs[i]), float(xs[i + 1]), flags[i])
            n += k
            if flags[i]:  # the part stops holding between a and b
                out.append((start if start is not None else a, a))
                start = None
            else:  # starts holding
                start = b
        if start is not None:
            out.append((start, float(xs[-1])))
        return tuple(out), n

    def search(self) -> WindowSearch:
        """Each part's holds-set, their intersection and the default's place in it."""
        lo, hi = self._validate()
        holds: dict[str, Intervals] = {}
        evals = 0
        for p in self.parts:
            holds[p.label], k = self._holds_set(p, lo, hi)
            evals += k
        window: Intervals = ((lo, hi),)
        for iv in holds.values():
            window = _intersect(window, iv)
        d = float(self.constant.default)
        at_default = {}
        for p in self.parts:
            try:
                at_default[p.label] = float(p.margin(d))
            except (ArithmeticError, ValueError):
                at_default[p.label] = math.nan
        clearance = -math.inf  # outside every piece of the window
        for a, b in window:
            if a <= d <= b:
                if self.log:
                    width, dist = math.log(b / a), min(math.log(d / a), math.log(b / d))
                else:
                    width, dist = b - a, min(d - a, b - d)
                clearance = dist / width if width > 0 else 0.0
        inside = bool(window) and clearance > self.clearance
        conflicts = () if window else tuple(_conflicts(holds, lo, hi))
        conflict = conflicts[0] if conflicts else ()
        res = self.resolution
        return WindowSearch(
            holds, window, d, at_default, inside, clearance, conflict, res, evals,
            conflicts,
        )  # fmt: skip

    def judge(self) -> Check:
        """The theorem's joint row: `holds` when some admissible value makes every part
        hold (the window shown), else `fails`, naming the parts that exclude each other."""
        s = self.search()
        c = self.constant
        label = c.label
        lo, hi = c.admissible  # type: ignore[misc]
        parts = ", ".join(p.label for p in self.parts)
        per_part = "; ".join(
            f"{p.label}: {intervals_text(s.holds[p.label], label)}" for p in self.parts
        )
        quote = f" (paper: “{self.quote}”)" if self.quote else ""
        predicted = (
            f"one {label} in [{_fmt(lo)}, {_fmt(hi)}] for all of {parts}; "
            f"default {label} = {c.default:g}{quote}"
        )
        reasons = []
        resolution = f"edges to {self.resolution:g}" + (" (relative)" if self.log else "")
        if s.empty:
            verdict = FAILS_JOINTLY
            names = "; ".join(
                f"{c[0]} holds for no {label}"
                if len(c) == 1
                else " and ".join(c) + " exclude each other"
                for c in s.conflicts
            )
            claim = self.claim
            measured = (
                f"no {label} in [{_fmt(lo)}, {_fmt(hi)}] makes all parts hold: {names} ({per_part})"
            )
            reasons.append(
                f"fails jointly: {names} (the smallest sets of parts that cannot hold together)"
            )
        else:
            claim = self.claim
            worst = min(s.at_default.values())
            err = max((p.error for p in self.parts), default=0.0)
            measured = f"window {intervals_text(s.window, label)} ({per_part})"
            if s.inside:
                verdict = HOLDS
                reasons.append(
                    f"the default {label} = {c.default:g} sits inside the window, "
                    f"{s.clearance:.0%} of its width from the nearest edge"
                )
                if err > 0 and abs(worst) <= err:
                    verdict = UNDECIDED
                    reasons.insert(
                        0,
                        f"the smallest margin at the default, {worst:.2g}, is inside the "
                        f"numerical error ±{err:.2g}",
                    )
            else:
                verdict = HOLDS
                if s.clearance >= 0:  # inside, but closer to an edge than `clearance`
                    reasons.append(
                        f"the default {label} = {c.default:g} is inside the window but at "
                        f"its edge ({100 * s.clearance:.1f} % of its width from it, less "
                        f"than {100 * self.clearance:g} %): the rows judged at the default "
                        "hold with little room"
                    )
                else:
                    reasons.append(
                        f"the default {label} = {c.default:g} is outside the window: rows "
                        "judged at the default disagree with the theorem, which holds for "
                        f"{label} in the window; choose a default inside it"
                    )
        reasons.append(
            f"window: the {label} where every part's margin is ≥ 0 "
            f"({self.grid}-point {'log ' if self.log else ''}grid, {resolution}, "
            f"{s.evaluations} evaluations per run)"
        )
        if self.reason:
            reasons.append(self.reason)
        values = dict(self.values) | {
            "constant": c.name,
            "default": float(c.default),
            "window": [list(iv) for iv in s.window],
            "holds_sets": {k: [list(iv) for iv in v] for k, v in s.holds.items()},
            "margins_at_default": s.at_default,
            "default_inside": s.inside,
            "clearance": s.clearance,
            "conflict": list(s.conflict),
            "conflicts": [list(c) for c in s.conflicts],
            "lower_edge": s.lower_edge,
            "upper_edge": s.upper_edge,
        }
        return Check(
            claim,
            self.source,
            predicted,
            measured,
            verdict,
            reason="; ".join(reasons),
            assumptions=self.assumptions,
            values=_clean(values),
            kind="joint window",
            critical=(f"holds jointly for {intervals_text(s.window, label)}",),
        )


def _conflicts(holds: dict[str, Intervals], lo: float, hi: float) -> list[tuple[str, ...]]:
    """Every set of parts of the smallest size whose holds-sets do not intersect."""
    labels = list(holds)
    for k in range(1, len(labels) + 1):
        found = []
        for combo in itertools.combinations(labels, k):
            iv: Intervals = ((lo, hi),)
            for name in combo:
                iv = _intersect(iv, holds[name])
            if not iv:
                found.append(tuple(combo))
        if found:
            return found
    return []


def edge_trend(
    claim: str,
    source: str,
    widths: Sequence[float],
    edges: np.ndarray,
    *,
    symbol: str,
    toward: float = 0.0,
    variable: str = "m",
    reason: str = "",
) -> Check:
    """'For any small `symbol` and sufficiently large `variable`': the window's edge at
    every width (`edges[i, j]` at `widths[i]`, seed j; NaN where the window is empty)
    must shrink toward `toward` (0 for "any small δ′"). Judged with the kit's `Limit` rule
    on |edge − toward| (its fitted rate's 95 % interval below 0: holds); an empty window
    at the largest width fails; the edge at every width is shown."""
    from ._limit import Limit  # the kit's one rule for limits

    e = np.asarray(edges, dtype=float)
    if e.ndim == 1:
        e = e[:, None]
    ws = [float(w) for w in widths]
    means = [float(np.nanmean(row)) if np.any(np.isfinite(row)) else math.nan for row in e]
    shown = ", ".join(
        f"{variable} = {w:g}: {symbol} ≥ {_fmt(v)}" if math.isfinite(v) else f"{w:g}: empty"
        for w, v in zip(ws, means, strict=True)
    )
    top = int(np.argmax(ws))
    if not np.all(np.isfinite(e[top])):
        return Check(
            claim,
            source,
            f"the window's edge shrinks toward {symbol} = {toward:g} as {variable} grows",
            f"window edge (seed mean) {shown}",
            FAILS,
            reason=f"the window is empty at the largest {variable} = {ws[top]:g}"
            + (f"; {reason}" if reason else ""),
            values=_clean({"widths": ws, "edges": means}),
            kind="limit",
        )
    c = Limit(claim, source, ws, np.abs(e - toward), limit=0.0, reason=reason).judge()
    return dataclasses.replace(
        c,
        predicted=f"the window's edge shrinks toward {symbol} = {toward:g} as {variable} grows",
        measured=f"window edge (seed mean) {shown}; " + c.measured,
        values=c.values | _clean({"edges": means, "toward": toward, "variable": variable}),
    )


@dataclasses.dataclass(frozen=True)
class Extension:
    """How far `extend` took a limit row: the `variable`, the values it had (`start`) and
    the values it added (`added`, with each one's wall time in `seconds`), the `budget_s`
    and what was `spent_s`, why it `stopped`, and the verdicts before and after."""

    variable: str
    start: tuple[float, ...]
    added: tuple[float, ...]
    seconds: tuple[float, ...]
    budget_s: float
    spent_s: float
    stopped: str
    before: str
    after: str
    factor: float = 2.0
    cost_exponent: float = 1.0
    last_seconds: float = math.nan
    unit: str = "s"

    def next_value(self) -> float:
        """The value a further step would run."""
        return max(self.start + self.added) * self.factor

    def annotate(self, check: Check) -> Check:
        """`check` (the row judged on every value, the added ones included) with how far
        the extension went in its measured text, what a decision would still need in its
        reason when it is still undecided, and this record in `values['extension']`."""
        reason = check.reason
        if check.verdict == UNDECIDED_SIZE:
            top, nxt = max(self.start + self.added), self.next_value()
            need = (
                f" (≈ {self.last_seconds * (nxt / top) ** self.cost_exponent:.0f} {self.unit})"
                if math.isfinite(self.last_seconds)
                else ""
            )
            reason = (
                f"still undecided after the extension: a decision needs {self.variable} ≥ "
                f"{nxt:g} at least{need} — raise the budget" + (f"; {reason}" if reason else "")
            )
        elif not self.added:
            return check
        return dataclasses.replace(
            check,
            measured=f"{check.measured}; {self.text()}",
            reason=reason,
            values=check.values | {"extension": self.to_dict()},
        )

    def text(self) -> str:
        if not self.added:
            return f"not extended ({self.stopped})"
        vals = ", ".join(f"{v:g}" for v in self.added)
        steps = len(self.added)
        how = (
            f"{steps} doubling{'s' if steps > 1 else ''}"
            if self.factor == 2
            else f"{steps} step{'s' if steps > 1 else ''} of ×{self.factor:g}"
        )
        return (
            f"extended {self.variable} to {vals} ({how}, {self.spent_s:.0f} {self.unit} of a "
            f"{self.budget_s:.0f} {self.unit} budget): {self.before} → {self.after}; "
            f"{self.stopped}"
        )

    def to_dict(self) -> dict:
        """The record as JSON-ready data (tuples as lists)."""
        d = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}
        return _clean(d)


def extend(
    claim: str,
    judge: Callable[[tuple[float, ...]], Check],
    run: Callable[[float], object],
    values: Sequence[float],
    *,
    budget_s: float,
    variable: str = "m",
    factor: float = 2.0,
    last_seconds: float | None = None,
    cost_exponent: float = 1.0,
    max_value: float = math.inf,
    integer: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    unit: str = "s",
) -> tuple[Check, Extension]:
    """Extend a limit row's sweep until its confidence interval decides.

    `judge(values)` returns the row judged on the runs at `values` so far; `run(v)` runs
    (and keeps) everything the row needs at the new value v. While the row is
    `undecided (finite size)`, the largest value is multiplied by `factor` (rounded when
    `integer`) and run, if its predicted cost fits in what is left of `budget_s`: the
    cost of the last value (`last_seconds`, then each run's measured time) scaled by
    (new/last)^`cost_exponent`; with no cost known the first value is run. A run that
    finishes is kept whatever the budget says after it. `clock` measures the budget (wall
    time by default; `time.process_time` makes a verdict independent of the machine's
    load), `unit` names it in the row ('s', 'CPU s'). Returns the final row — its
    measured text and reason saying how far it went, and, if still undecided, what a
    decision would need — and the `Extension` record (also in `values['extension']`).

    **Bad settings** (`ConfigError` naming the claim and the field): a budget ≤ 0 or not
    finite, fewer than three values, a factor ≤ 1, a value ≤ 0."""

    def bad(field: str, why: str) -> ConfigError:
        return ConfigError(f"claim {claim!r}: field {field!r}: {why}")

    if not (isinstance(budget_s, (int, float)) and math.isfinite(budget_s) and budget_s > 0):
        raise bad("budget_s", f"must be a finite number of seconds > 0; got {budget_s!r}")
    vals = [float(v) for v in values]
    if len(vals) < 3:
        raise bad("values", f"a limit variable needs ≥ 3 values; got {len(vals)} ({vals})")
    if any(not (math.isfinite(v) and v > 0) for v in vals):
        raise bad("values", f"the asymptotic variable's values must be finite and > 0; got {vals}")
    if not (math.isfinite(factor) and factor > 1):
        raise bad("factor", f"must be > 1; got {factor!r}")
    start = tuple(vals)
    check = judge(tuple(vals))
    before = check.verdict
    added: list[float] = []
    seconds: list[float] = []
    spent = 0.0
    cost = last_seconds
    stopped = ""
    while check.verdict == UNDECIDED_SIZE:
        top = max(vals)
        nxt = float(round(top * factor)) if integer else top * factor
        if nxt > max_value:
            stopped = f"the next {variable} = {nxt:g} is above the largest allowed {max_value:g}"
            break
        predicted = None if cost is None else cost * (nxt / top) ** cost_exponent
        left = budget_s - spent
        if predicted is not None and predicted > left:
            stopped = (
                f"budget: the next {variable} = {nxt:g} would take ≈ {predicted:.0f} {unit}, "
                f"{max(left, 0):.0f} {unit} left"
            )
            break
        t0 = clock()
        run(nxt)
        dt = clock() - t0
        spent += dt
        cost = dt
        vals.append(nxt)
        added.append(nxt)
        seconds.append(dt)
        check = judge(tuple(vals))
    if not stopped:
        stopped = (
            "decided" if check.verdict in (HOLDS, FAILS) else f"stopped: the row is {check.verdict}"
        ) + f" at {variable} = {max(vals):g}"
    ext = Extension(
        variable, start, tuple(added), tuple(seconds), float(budget_s), spent, stopped, before,
        check.verdict, factor, cost_exponent, (cost if cost is not None else math.nan), unit,
    )  # fmt: skip
    return ext.annotate(check), ext
