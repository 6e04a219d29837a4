"""Core of the symbolic derivation checks: identities and how each one is settled.

An `Identity` is a mathematical claim written as "these sympy expressions are zero".
`settle` tries to show that symbolically, cheapest rewriting first, each attempt under a
wall-clock budget. Only an expression that a rewriting turns into the literal `0` counts
as *proved*. When no rewriting reaches zero within the budget, the claim is evaluated at
random points with mpmath at 50 significant digits: a relative residual ≤ 1e-30 at every
point gives *checked numerically* (never *proved*), anything larger gives *fails*.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import random
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, cast

import mpmath
import sympy as sp

__all__ = [
    "Identity",
    "Settled",
    "Status",
    "settle",
    "format_table",
    "default_sampler",
    "DIGITS",
    "RELATIVE_TOLERANCE",
]

Status = Literal["proved", "checked numerically", "fails"]

DIGITS = 50
"""Working precision (significant decimal digits) of the numeric fallback."""

RELATIVE_TOLERANCE = 1e-30
"""Largest relative residual the numeric fallback accepts (see `settle`)."""

Sampler = Callable[[random.Random], Mapping[sp.Symbol, object]]


@dataclasses.dataclass(frozen=True)
class Identity:
    """A claim of the form "every expression returned by `residual()` is identically zero".

    **Arguments:**

    - `name`: short unique name, shown in the table (`"eq. (19) solves eq. (18)"`).
    - `paper`: one of `PAPERS` (`"multistage"`, `"bias-plateau"`, `"linear-teacher"`).
    - `statement`: the claim in words and formulas, with the paper's equation numbers.
    - `residual`: a callable (no arguments) returning one sympy expression or a list of
      them; the claim is that each is zero for all admissible values of `symbols`. It is a
      callable so that building expressions costs nothing until the identity is settled.
    - `symbols`: the free symbols the residuals may contain; their sympy assumptions
      (`positive=True`, …) describe the admissible values.
    - `sampler`: draws one random admissible point, `rng -> {symbol: value}`, for the
      numeric fallback; by default `default_sampler(symbols)`, which respects the
      `positive`/`negative`/`nonnegative` assumptions.
    """

    name: str
    paper: str
    statement: str
    residual: Callable[[], sp.Expr | Sequence[sp.Expr]]
    symbols: tuple[sp.Symbol, ...]
    sampler: Sampler | None = None

    def expressions(self) -> list[sp.Expr]:
        """The residual expressions as a list (checks that no unknown symbol appears)."""
        out = self.residual()
        # the residuals are expressions (declared above); sympify is typed as returning Basic
        exprs = [
            cast(sp.Expr, sp.sympify(e)) for e in (out if isinstance(out, list | tuple) else [out])
        ]
        known = set(self.symbols)
        for e in exprs:
            extra = e.free_symbols - known
            if extra:
                raise ValueError(
                    f"identity {self.name!r}: residual has symbols {sorted(map(str, extra))} "
                    f"that are not declared in `symbols`; declare them (with their "
                    f"assumptions) so the numeric fallback can sample them."
                )
        return exprs


@dataclasses.dataclass(frozen=True)
class Settled:
    """How one identity was settled.

    - `status`: `"proved"` (a symbolic rewriting reduced every residual to 0),
      `"checked numerically"` (no rewriting reached 0 within the budget, but at
      `n_points` random points the largest relative residual is ≤ `RELATIVE_TOLERANCE`),
      or `"fails"` (some point has a larger residual; `max_residual` says how large).
    - `method`: the rewriting that proved it, or `"mpmath, 50 digits"`.
    - `reason`: why the numeric fallback was used (empty when proved).
    - `elapsed_s`: wall time spent on this identity, symbolic and numeric together.
    """

    name: str
    paper: str
    statement: str
    status: Status
    method: str
    reason: str
    n_points: int
    max_residual: float | None
    elapsed_s: float

    @property
    def detail(self) -> str:
        if self.status == "proved":
            return f"by {self.method}"
        if self.status == "checked numerically":
            return (
                f"N={self.n_points}, largest relative residual {self.max_residual:.1e} "
                f"({self.reason})"
            )
        return f"residual {self.max_residual:.1e} at N={self.n_points} points ({self.reason})"


# ---------------------------------------------------------------------------------------
# Symbolic attempts, cheapest first. Each maps an expression to a rewritten expression;
# an identity counts as proved only when a rewriting returns exactly sympy's 0.


def _expand(e):
    return sp.expand(e)


def _cancel(e):
    return sp.cancel(sp.together(e))


def _expand_log_power(e):
    e = sp.powsimp(sp.expand_power_base(e, force=False), force=False)
    return sp.simplify(sp.expand_log(e, force=False))


def _simplify(e):
    return sp.simplify(e)


_STRATEGIES: tuple[tuple[str, Callable[[sp.Expr], sp.Expr]], ...] = (
    ("expand", _expand),
    ("cancel", _cancel),
    ("simplify", _simplify),
    ("expand_log + powsimp + simplify", _expand_log_power),
)


def _prove_all(exprs: list[sp.Expr]) -> str | None:
    """The name of the strategy chain that reduced every expression to 0, else None."""
    used: list[str] = []
    for e in exprs:
        if e == 0:
            continue
        for name, strategy in _STRATEGIES:
            try:
                reduced = strategy(e)
            except Exception:  # a rewriting that errors out simply did not reach 0
                continue
            if reduced == 0:
                if name not in used:
                    used.append(name)
                break
        else:
            return None
    return " + ".join(used) if used else "automatic evaluation (already 0)"


#: The child interpreter of `_prove_in_subprocess`: this file loaded on its own (sympy,
#: mpmath and the standard library only — not the `reduced` package, whose import pulls in
#: JAX), `_prove_all` on the pickled expressions, its answer pickled back.
_CHILD = """
import importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("_derive_core_child", sys.argv[1])
core = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = core
spec.loader.exec_module(core)
sys.stdout.buffer.write(pickle.dumps(core._prove_all(pickle.load(sys.stdin.buffer))))
"""


def _prove_in_subprocess(exprs: list[sp.Expr], budget_s: float) -> tuple[str | None, str]:
    """`_prove_all` in a fresh interpreter that is killed at the deadline.

    The interpreter's start-up (≈ 0.35 s: sympy's import) counts against the budget, so
    tiny budgets always end "unsettled"."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, os.path.abspath(__file__)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        out, _ = proc.communicate(pickle.dumps(exprs), timeout=budget_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, _unsettled(budget_s)
    if proc.returncode != 0:
        return None, f"symbolic attempt crashed (child exit status {proc.returncode})"
    method = pickle.loads(out)
    return method, ("" if method else _NOT_REDUCED)


def _unsettled(budget_s: float) -> str:
    return f"unsettled symbolically within {budget_s:g}s"


_NOT_REDUCED = "not reduced to 0 by " + ", ".join(name for name, _ in _STRATEGIES)


def _prove_with_budget(exprs: list[sp.Expr], budget_s: float) -> tuple[str | None, str]:
    """Try `_prove_all` for at most `budget_s` seconds: (method or None, why not).

    The attempt runs in a child interpreter that is killed at the deadline
    (`_prove_in_subprocess`); an attempt that does not finish in time is *not* a proof.
    An interval timer in this process is not enough: sympy's heuristic gcd can spend
    minutes inside one C-level big-integer gcd, where no Python signal handler runs (seen
    in the test suite: `test_bias_plateau_wrong_variants_fail` with a 2 s budget ran over
    10 minutes in `IntegerRing.gcd`), and a killed child always ends on time.
    """
    return _prove_in_subprocess(exprs, budget_s)


# ---------------------------------------------------------------------------------------
# Numeric fallback


def default_sampler(symbols: Sequence[sp.Symbol]) -> Sampler:
    """Uniform random points respecting each symbol's sign assumptions.

    Positive symbols are drawn from [0.2, 2], negative ones from [−2, −0.2], nonnegative
    ones from [0, 2], the rest from [−2, 2]. Values are Python floats (exact binary
    numbers), later lifted to mpmath at `DIGITS` digits.
    """

    def sample(rng: random.Random) -> dict[sp.Symbol, float]:
        point = {}
        for s in symbols:
            if s.is_positive:
                point[s] = rng.uniform(0.2, 2.0)
            elif s.is_negative:
                point[s] = rng.uniform(-2.0, -0.2)
            elif s.is_nonnegative:
                point[s] = rng.uniform(0.0, 2.0)
            else:
                point[s] = rng.uniform(-2.0, 2.0)
        return point

    return sample


def _compile(expr: sp.Expr):
    """An mpmath function returning the list of the top-level terms of `expr` at a point.

    (A list, rather than one sum, keeps the generated source flat for residuals with
    thousands of terms, and gives the scale used in `_relative_residual`.)
    """
    syms = sorted(expr.free_symbols, key=str)
    terms = list(sp.Add.make_args(expr))
    try:
        fn = sp.lambdify(syms, terms, modules="mpmath")
    except RecursionError:  # a deeply nested term: evaluate through sympy instead

        def fn(*values):
            point = dict(zip(syms, values, strict=True))
            return [term.evalf(DIGITS, subs=point) for term in terms]

    return syms, fn


def _relative_residual(compiled, point: Mapping[sp.Symbol, object]) -> float:
    """|expr| / Σ|terms of expr| at `point`, evaluated with mpmath at `DIGITS` digits.

    The scale is the sum of the absolute values of the top-level terms of the residual as
    written (for `lhs − rhs` that is |lhs| + |rhs|), so cancellation between large terms
    is measured against their size; a residual whose terms all vanish has residual 0.
    """
    syms, fn = compiled
    with mpmath.workdps(DIGITS):
        args = [mpmath.mpf(point[s]) for s in syms]
        values = [mpmath.mpmathify(v) for v in fn(*args)]
        value = abs(mpmath.fsum(values))
        scale = mpmath.fsum(abs(v) for v in values)
        if value == 0:
            return 0.0
        if scale == 0 or not mpmath.isfinite(value):
            return math.inf
        return float(value / scale)


def _check_numerically(identity: Identity, exprs: list[sp.Expr], n_points: int, seed: int) -> float:
    """Largest relative residual of `exprs` over `n_points` random points (seeded)."""
    sampler = identity.sampler or default_sampler(identity.symbols)
    rng = random.Random(seed)
    compiled = [_compile(e) for e in exprs]
    worst = 0.0
    for _ in range(n_points):
        point = sampler(rng)
        for c in compiled:
            r = _relative_residual(c, point)
            worst = max(worst, r if math.isfinite(r) else math.inf)
    return worst


def settle(
    identity: Identity, time_budget_s: float = 20.0, *, n_points: int = 20, seed: int = 0
) -> Settled:
    """Settle one identity: symbolically if possible, otherwise numerically.

    **Arguments:**

    - `identity`: the claim.
    - `time_budget_s`: wall-clock budget for the symbolic attempts (all strategies
      together). When it runs out the attempt is abandoned and the identity is checked
      numerically with the reason "unsettled symbolically within …s".
    - `n_points`: number of random points of the numeric fallback.
    - `seed`: seed of the fallback's random points (fixed, so results are reproducible).

    **Returns:** a `Settled` record; `status` is exactly one of `"proved"`,
    `"checked numerically"`, `"fails"`.
    """
    start = time.perf_counter()
    exprs = identity.expressions()
    method, reason = _prove_with_budget(exprs, time_budget_s)
    if method is not None:
        return Settled(
            identity.name,
            identity.paper,
            identity.statement,
            "proved",
            method,
            "",
            0,
            None,
            time.perf_counter() - start,
        )
    worst = _check_numerically(identity, exprs, n_points, seed)
    status: Status = "checked numerically" if worst <= RELATIVE_TOLERANCE else "fails"
    return Settled(
        identity.name,
        identity.paper,
        identity.statement,
        status,
        f"mpmath, {DIGITS} digits",
        reason,
        n_points,
        worst,
        time.perf_counter() - start,
    )


def format_table(results: Sequence[Settled]) -> str:
    """Render results as a plain-text table: identity · status · detail · time."""
    header = ("paper", "identity", "status", "detail", "time")
    rows = [(r.paper, r.name, r.status, r.detail, f"{r.elapsed_s:.2f}s") for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    widths[3] = min(widths[3], 70)

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(row) for row in rows]
    counts = {s: sum(r.status == s for r in results) for s in ("proved", "checked numerically")}
    fails = sum(r.status == "fails" for r in results)
    total = sum(r.elapsed_s for r in results)
    out.append(
        f"{len(results)} identities: {counts['proved']} proved, "
        f"{counts['checked numerically']} checked numerically, {fails} fail "
        f"({total:.1f}s)"
    )
    return "\n".join(out)
