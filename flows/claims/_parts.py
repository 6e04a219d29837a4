"""The claim kit's parts: a measured number with its error bar, a claim's unspecified
constants and hypotheses, where a verdict flips in one constant, and the helpers that
find that flip point. Public through `flows.claims`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from .._errors import ConfigError

_INF = math.inf


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def resolvable_digits(value: float, error: float) -> int:
    """How many significant digits of `value` lie above `error` (its error bar): 0 when
    |value| ≤ error — the number has none — else at least 1. Unlimited (a large number)
    when the error is 0."""
    if not error > 0:
        return 1_000 if math.isfinite(value) else 0
    if not (math.isfinite(value) and math.isfinite(error)) or abs(value) <= error:
        return 0
    return max(math.floor(math.log10(abs(value) / error)) + 1, 1)


@dataclasses.dataclass(frozen=True)
class Measured:
    """A measured number with its numerical error bar.

    `error` is an estimate of |measured − exact| (the flow's global error carried to this
    quantity, or the Richardson error of an η → 0 extrapolation); NaN when not estimated,
    which the verdict then says. `how` names where the error bar comes from.

    `floor` is the error the number cannot be known below, where that is known: the
    floor of the saved quantity it is read from (`traj.stats.resolution["floor"]` for the
    final loss, `traj.stats.resolutions[name]["floor"]` for an observable at the last
    save). A finite `error` is never below it (raised to it here; `with_error_bars` keeps
    a companion's error bar at or above it too)."""

    value: float
    error: float = math.nan
    how: str = ""
    #: `error` is a statistical interval (a fit's 95 % confidence half-width over finite
    #: sizes or seeds), not a numerical error: a margin inside it is `undecided (finite
    #: size)` — more sizes or seeds decide it, not a tighter rtol
    statistical: bool = False
    floor: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "value", float(self.value))
        floor = abs(float(self.floor))
        floor = floor if math.isfinite(floor) else 0.0
        error = abs(float(self.error))
        object.__setattr__(self, "floor", floor)
        object.__setattr__(self, "error", max(error, floor) if math.isfinite(error) else error)

    @property
    def unbounded(self) -> bool:
        """The error is known to be unbounded (∞: e.g. a limit in time whose saves are not
        converging), as against not estimated (NaN)."""
        return math.isinf(self.error)

    @property
    def has_error(self) -> bool:
        return math.isfinite(self.error)

    @property
    def resolved(self) -> bool | None:
        """Whether the value is larger than its error bar (a number smaller than its error
        has no significant digit: it is not a result); None when the error is not known
        (not estimated, or unbounded) or the value is not finite."""
        if not (self.has_error and math.isfinite(self.value)):
            return None
        return resolvable_digits(self.value, self.error) > 0

    def text(self, digits: int = 3) -> str:
        """The value with at most `digits` significant digits and no more than its error
        bar leaves it ('0.47 ± 0.02', not '0.469 ± 0.02'); a value not larger than its
        error bar as such ('unresolved: |value| ≤ 0.02'), without digits it does not have."""
        if not self.has_error:
            return _fmt(self.value, digits)
        if not math.isfinite(self.value):
            return f"{_fmt(self.value, digits)} ± {self.error:.2g}"
        keep = resolvable_digits(self.value, self.error)
        if keep == 0:
            return f"unresolved: |value| ≤ {self.error:.2g}"
        return f"{_fmt(self.value, min(digits, keep))} ± {self.error:.2g}"


@dataclasses.dataclass(frozen=True)
class Constant:
    """An unspecified constant of a claim ('≲' hides a C; a δ′; a β): its documented
    `default` and the `admissible` range [lo, hi] the paper allows (hi may be inf).

    `name` is the keyword the claim's bound callable takes (a Python identifier:
    'C', 'delta_prime'); `symbol` how the paper writes it ('δ′'; default: `name`)."""

    name: str
    default: float
    admissible: tuple[float, float] | None = None
    meaning: str = ""
    symbol: str = ""

    @property
    def label(self) -> str:
        return self.symbol or self.name


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """A hypothesis of the theorem, evaluated on the run: `holds` is a bool or a
    zero-argument callable returning one; `detail` says the measured value ('α = 0.4,
    needs α > 1/2'), shown when it fails."""

    name: str
    holds: bool | Callable[[], bool]
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Critical:
    """Where the verdict of a claim flips in one constant (the others at their defaults).

    `holds_for`: the admissible values where the claim holds, as text ('C ≥ 0.79',
    'every admissible δ′', 'no admissible C'); `value` the flip point (NaN when none);
    `vacuous_for`: where the bound becomes vacuous ('C ≥ 11.4'), '' when nowhere."""

    name: str
    value: float
    holds_for: str
    vacuous_for: str = ""

    def text(self) -> str:
        out = f"holds for {self.holds_for}"
        return out + (f"; vacuous for {self.vacuous_for}" if self.vacuous_for else "")


def _grid(lo: float, hi: float, n: int = 241) -> np.ndarray:
    """Points spanning [lo, hi]: log-spaced over positive ranges wider than two decades
    (an infinite end is cut at 1e12, a zero end at 1e-12), else linear."""
    a = lo if lo > 0 else 1e-12
    b = hi if math.isfinite(hi) else 1e12
    if lo >= 0 and b / a > 100:
        pts = np.geomspace(a, b, n)
        return np.unique(np.concatenate([[lo], pts] if lo == 0 else [pts]))
    lo_ = lo if math.isfinite(lo) else -1e12
    return np.linspace(lo_, b, n)


def _sign_changes(f: Callable[[float], float], lo: float, hi: float) -> list[float]:
    """The points in [lo, hi] where f changes sign (grid, then bisection)."""
    xs = _grid(lo, hi)
    vals = np.array([f(float(x)) for x in xs])
    ok = np.isfinite(vals)
    xs, vals = xs[ok], vals[ok]
    out = []
    for i in range(len(xs) - 1):
        if (vals[i] >= 0) != (vals[i + 1] >= 0):
            a, b = float(xs[i]), float(xs[i + 1])
            fa = vals[i] >= 0
            for _ in range(80):
                mid = 0.5 * (a + b)
                if (f(mid) >= 0) == fa:
                    a = mid
                else:
                    b = mid
            out.append(0.5 * (a + b))
    return out


def _region(f: Callable[[float], float], lo: float, hi: float, name: str) -> tuple[str, float]:
    """Where f ≥ 0 on [lo, hi], as text, and the first flip point (NaN when none)."""
    cuts = _sign_changes(f, lo, hi)
    xs = _grid(lo, hi)
    if not cuts:
        probe = float(xs[len(xs) // 2])
        return ("every admissible " + name if f(probe) >= 0 else "no admissible " + name), math.nan
    if len(cuts) == 1:
        x = cuts[0]
        above = f(float(xs[-1])) >= 0
        return (f"{name} ≥ {_fmt(x)}" if above else f"{name} ≤ {_fmt(x)}"), x
    return f"{name} in {len(cuts) + 1} pieces split at " + ", ".join(_fmt(x) for x in cuts), cuts[0]


def _check_constants(claim: str, constants: Sequence[Constant]) -> None:
    for c in constants:
        if not c.name.isidentifier():
            raise ConfigError(
                f"claim {claim!r}: constant name {c.name!r} is not a Python identifier (the "
                "bound is called with it as a keyword); name it e.g. 'delta_prime' and give "
                f"symbol={c.name!r}"
            )
        if c.admissible is None:
            raise ConfigError(
                f"claim {claim!r}: constant {c.name!r} has no admissible range; give "
                f"Constant({c.name!r}, default={c.default}, admissible=(lo, hi)) with the "
                "values the paper allows (hi may be math.inf)"
            )
        lo, hi = c.admissible
        if not lo <= c.default <= hi:
            raise ConfigError(
                f"claim {claim!r}: constant {c.name!r} default {c.default} is outside its "
                f"admissible range [{lo}, {hi}]"
            )


def _evaluate_hypotheses(claim: str, hypotheses: Sequence[Hypothesis]) -> list[dict]:
    out = []
    for h in hypotheses:
        try:
            ok = h.holds() if callable(h.holds) else h.holds
        except Exception as e:  # noqa: BLE001 - a bug in the claim, reported as such
            raise ConfigError(
                f"claim {claim!r}: hypothesis {h.name!r} raised {type(e).__name__}: {e}; "
                "a hypothesis predicate must return True or False"
            ) from e
        out.append({"name": h.name, "holds": bool(ok), "detail": h.detail})
    return out


def _outside(hyps: list[dict]) -> str:
    bad = [h for h in hyps if not h["holds"]]
    return "; ".join(f"{h['name']}" + (f" ({h['detail']})" if h["detail"] else "") for h in bad)
