"""One constant per theorem: Theorem 2's δ′ and Theorem 3's β, each shared by all the
theorem's numbered parts, and the window in which the parts hold together
(`flows.claims.Window`).

**Theorem 2** ("for α > 1/2 and any given small β, δ′ > 0"): (45) both sides and (47)
both lines, at every (α, m, seed) of the descent-time sweep. Every part holds for δ′ at
or above some edge, so the window is [edge, 2); the joint row per α is judged at the
largest width (every seed), and, since the paper asks for "any small δ′" at
"sufficiently large m", the edge at every width is the verdict of the trend row: it must
shrink toward 0 (`flows.claims.edge_trend`). That trend is (3) read jointly with (47):
(45) for every δ′ > 0 at large m is T_d/ln m → (2α−1)/2.

**Theorem 3** (β: T_d's threshold, eq. 44, and T_sp = T_d + ln m/(40β), eq. 63): on the
main run, as functions of β — T_d exists (K̂ comes within β of 1 after T_p), Corollary 3
(59) ‖∇R‖_∞ ≤ β‖θ‖_∞ at T_d, (64) (T_sp − T_d)/T_d ≫ 1 (read as ≥ `much_greater`, the
toolkit's reading, default 10: "an order of magnitude"), (65) the secondary plateau's
average decay rate ≤ tol × the descent's, (68) |K̂ − 1| ≤ 2β on [T_d, T_sp]. (65) and
(68) are measured only where the run reaches T_sp(β): β is searched from the smallest
such value (`measurable_beta`) up, and the row says where that is. A second row adds
Corollary 3 (59), stated at the same T_d "for sufficiently large m".
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flows import Check, average_decay_rate, first_crossing
from flows.claims import Constant, Part, Window, edge_trend

from .config import LESSSIM_C, SOURCE, Config

__all__ = [
    "MUCH_GREATER",
    "theorem2_window",
    "theorem2_parts",
    "theorem2_windows",
    "theorem3_parts",
    "check_theorem3_window",
    "theorem3_windows_of",
    "theorem2_window_of",
    "largest_reading",
    "measurable_beta",
    "theorem1_window",
]

#: The toolkit's reading of "≫ 1" in Theorem 3 (64): at least this large (`Config.much_greater`
#: defaults to it).
MUCH_GREATER = 10.0
#: The tolerance of "≈ 0" in Theorem 3 (65) (the same as its own row's).
RATE_TOL = 0.05
#: β is searched on this (log) range: "small β > 0" and 1 − K̂ ≤ β < 1.
BETA_RANGE = (1e-3, 0.5)


# ---------------------------------------------------------------------------------------
# Theorem 2: δ′ over (45) and (47), per (α, m) of the sweep


def theorem2_parts(rows: list[dict], alpha: float, m: int) -> list[Part]:
    """(45) lower and upper, (47) q_max and (47) max|wⁱ| as functions of δ′ at (α, m),
    each holding only if it holds on every seed of the sweep (the theorem is 'with
    probability ≥ 1 − δ', read on every seed run); margins in log units for (47)."""
    sel = [r for r in rows if r["alpha"] == alpha and r["m"] == m]
    ratio = np.array([r["T_d"] / math.log(m) for r in sel], float)
    q = np.array([r.get("q_max_Td", math.nan) for r in sel], float)
    wp = np.array([r.get("wperp_max_Td", math.nan) for r in sel], float)
    c = 2 * alpha - 1
    lnm = math.log(m)

    def worst(v: np.ndarray) -> float:
        return float(np.min(v)) if v.size and np.all(np.isfinite(v)) else math.nan

    parts = [
        Part(
            "(45) lower",
            "(2α−1)/(2+δ′) ≤ T_d/ln m",
            lambda d: worst(ratio - c / (2 + d)),
            quote="(2α−1)/(2+δ′) ≤ T_d/log m ≤ (2α−1)/(2−δ′)",
        ),
        Part(
            "(45) upper",
            "T_d/ln m ≤ (2α−1)/(2−δ′)",
            lambda d: worst(c / (2 - d) - ratio) if d < 2 else math.nan,
            quote="(2α−1)/(2+δ′) ≤ T_d/log m ≤ (2α−1)/(2−δ′)",
        ),
        Part(
            "(47) q_max",
            "q_max(T_d) ≤ m^{-(1/2 − (2α−1)δ′)}",
            lambda d: worst(-(0.5 - c * d) * lnm - np.log(q)),
            quote="q_max(T_d) ≤ 1/m^{1/2 − (2α−1)δ′}",
        ),
    ]
    if np.any(np.isfinite(wp)) and np.all(wp > 0):
        parts.append(
            Part(
                "(47) wⁱ",
                "max_{k,i≥2} |w_kⁱ(T_d)| ≤ m^{-(α − 2(2α−1)δ′)}",
                lambda d: worst(-(alpha - 2 * c * d) * lnm - np.log(wp)),
                quote="max_{k,i∈[2:d]} |w_kⁱ(T_d)| ≤ 1/m^{α − 2(2α−1)δ′}",
            )
        )
    return parts


def _delta_prime(cfg: Config) -> Constant:
    return Constant("delta_prime", cfg.delta_prime, (1e-3, 1.999), "Theorem 2's δ′ > 0", "δ′")


def theorem2_window(rows: list[dict], cfg: Config, alpha: float, m: int) -> Check:
    """The joint row of Theorem 2 at (α, m): one δ′ for (45) and (47) on every seed."""
    return Window(
        f"Theorem 2: one δ′ for (45) and (47) at α = {alpha}, m = {m}",
        f"{SOURCE} Thm 2",
        _delta_prime(cfg),
        theorem2_parts(rows, alpha, m),
        quote="any given small β, δ′ > 0",
        grid=81,
        resolution=1e-4,
        assumptions="Assumptions 1–2 hold (whitened data, f₂); every seed of the sweep",
        reason="(3) has no δ′: it is (45) for every δ′ > 0 at large m, i.e. the edge → 0 "
        "(the trend row below)",
    ).judge()


def theorem2_windows(rows: list[dict], cfg: Config, widths=None) -> list[Check]:
    """Per α: the joint row at the largest width, and the window's edge against m (the
    trend row: "any small δ′ … sufficiently large m" needs the edge → 0)."""
    out = []
    for alpha in cfg.sweep_alpha:
        ws = sorted({r["m"] for r in rows if r["alpha"] == alpha})
        if widths is not None:
            ws = [w for w in ws if w in widths]
        if not ws:
            continue
        out.append(theorem2_window(rows, cfg, alpha, max(ws)))
        seeds = sorted({r.get("seed", 0) for r in rows if r["alpha"] == alpha})
        edges = np.full((len(ws), len(seeds)), math.nan)
        for i, m in enumerate(ws):
            for j, seed in enumerate(seeds):
                one = [
                    r
                    for r in rows
                    if r["alpha"] == alpha and r["m"] == m and r.get("seed", 0) == seed
                ]
                if not one:
                    continue
                s = Window(
                    "edge",
                    "",
                    _delta_prime(cfg),
                    theorem2_parts(one, alpha, m),
                    resolution=1e-4,
                    grid=81,
                ).search()
                edges[i, j] = s.lower_edge
        out.append(
            edge_trend(
                f"Theorem 2: the δ′ window's edge → 0 as m grows at α = {alpha}",
                f"{SOURCE} Thm 2 (45), (47)",
                ws,
                edges,
                symbol="δ′",
                reason="per seed, the smallest δ′ at which (45) and (47) all hold; 'for any "
                "small δ′ … sufficiently large m' needs it to shrink toward 0",
            )
        )
    return out


# ---------------------------------------------------------------------------------------
# Theorem 3: β over T_d, (59), (64), (65), (68), on the main run


def theorem3_parts(
    tau: np.ndarray,
    o: dict,
    m: int,
    T_p: float,
    rate: float,
    *,
    much_greater: float = MUCH_GREATER,
    rate_tol: float = RATE_TOL,
) -> list[Part]:
    """The parts of Theorem 3 (with Corollary 3 (59), which is stated at the same T_d) as
    functions of β on one run (`tau`: save times in the theorems' units; `o`: the
    observables K_hat, grad_rel, loss; `rate`: the units' time rate)."""
    end = float(tau[-1])
    lnm = math.log(m)
    gap = 1.0 - np.asarray(o["K_hat"])
    kdev = np.abs(np.asarray(o["K_hat"]) - 1.0)
    loss = np.asarray(o["loss"])

    @functools.lru_cache(maxsize=4096)
    def td(b: float) -> float:
        return float(first_crossing(tau, gap, b, after=T_p))

    def tsp(b: float) -> float:
        return td(b) + lnm / (40 * b)

    def reached(b: float) -> bool:
        return math.isfinite(td(b)) and tsp(b) <= end

    def k_dev(b: float) -> float:
        if not reached(b):
            return math.nan
        a, z = td(b), tsp(b)
        sel = (tau > a) & (tau < z)
        ends = np.interp([a, z], tau, kdev)
        return float(max(np.max(kdev[sel], initial=0.0), *ends))

    def rate_ratio(b: float) -> float:
        if not reached(b):
            return math.nan
        d = average_decay_rate(tau, loss, T_p, td(b))
        return average_decay_rate(tau, loss, td(b), tsp(b)) / d if d > 0 else math.nan

    def grad(b: float) -> float:
        return float(np.interp(td(b), tau, o["grad_rel"])) / rate

    return [
        Part(
            "(44) T_d",
            "K̂ comes within β of 1 after T_p",
            lambda b: 1.0 if math.isfinite(td(b)) else -1.0,
        ),
        Part("(59)", "‖∇R‖_∞ ≤ β‖θ‖_∞ at T_d (Cor 3)", lambda b: 1.0 - grad(b) / b),
        Part(
            "(64)",
            f"(T_sp − T_d)/T_d ≫ 1, read as ≥ {much_greater:g}",
            lambda b: lnm / (40 * b * td(b)) / much_greater - 1.0,
        ),
        Part(
            "(65)",
            f"secondary/descent decay rate ≈ 0 (≤ {rate_tol:g})",
            lambda b: rate_tol - rate_ratio(b),
        ),
        Part("(68)", "|K̂ − 1| ≤ 2β on [T_d, T_sp]", lambda b: 1.0 - k_dev(b) / (2 * b)),
    ]


def measurable_beta(tau: np.ndarray, o: dict, m: int, T_p: float) -> float:
    """The smallest β in `BETA_RANGE` from which on the run reaches T_sp(β) (so that (65)
    and (68) are measured), to 1 % (`BETA_RANGE`'s lower end when the run reaches it)."""
    gap = 1.0 - np.asarray(o["K_hat"])
    end = float(tau[-1])

    def reached(b: float) -> bool:
        t = float(first_crossing(tau, gap, b, after=T_p))
        return math.isfinite(t) and t + math.log(m) / (40 * b) <= end

    grid = np.geomspace(BETA_RANGE[0], BETA_RANGE[1], 600)
    ok = np.array([reached(float(b)) for b in grid])
    if ok.all():
        return BETA_RANGE[0]
    if not ok[-1]:
        return BETA_RANGE[1] / 2  # nothing measurable: the window search says so
    i = int(np.max(np.nonzero(~ok)[0]))
    return float(grid[i + 1])


def largest_reading(parts: list[Part], beta: Constant) -> tuple[float, float]:
    """The largest (T_sp − T_d)/T_d over the β where every other part holds, and that β
    (NaN when none): the strongest reading of "≫ 1" that leaves the window non-empty."""
    others = [p for p in parts if not p.label.startswith("(64)")]
    s = Window("reading", "", beta, others, log=True, resolution=1e-4, grid=61).search()
    if s.empty:
        return math.nan, math.nan
    p64 = next(p for p in parts if p.label.startswith("(64)"))
    best = (-math.inf, math.nan)
    for a, b in s.window:
        for x in np.geomspace(a, b, 200) if b > a else [a]:
            v = p64.margin(float(x)) + 1.0
            if math.isfinite(v) and v > best[0]:
                best = (v, float(x))
    return best if math.isfinite(best[0]) else (math.nan, math.nan)


def check_theorem3_window(
    tau: np.ndarray,
    o: dict,
    cfg: Config,
    T_p: float,
    rate: float,
    *,
    with_corollary: bool = False,
) -> Check:
    """Theorem 3's joint row on the main run: one β for T_d, (64), (65), (68) — with
    Corollary 3 (59), stated at the same T_d, when `with_corollary`."""
    parts = theorem3_parts(tau, o, cfg.m, T_p, rate, much_greater=cfg.much_greater)
    if not with_corollary:
        parts = [p for p in parts if p.label != "(59)"]
    lo = measurable_beta(tau, o, cfg.m, T_p)
    beta = Constant(
        "beta", cfg.beta, (lo, BETA_RANGE[1]), "Theorem 3's β (T_d's threshold, eq. 44)", "β"
    )
    rel, at = largest_reading(parts, beta)
    lam = rel * cfg.much_greater if math.isfinite(rel) else math.nan
    end = float(tau[-1])
    reason = (
        f"“≫ 1” in (64) is read as ≥ {cfg.much_greater:g} (the toolkit's reading); the "
        "window is "
        + (
            f"non-empty for readings up to ≥ {lam:.3g} (at β = {at:.3g})"
            if math.isfinite(rel)
            else "empty whatever the reading (the other parts exclude each other)"
        )
        + f"; β is searched on [{lo:.3g}, {BETA_RANGE[1]:g}]: below {lo:.3g} the run (to "
        f"τ = {end:.3g}) does not reach T_sp(β) = T_d + ln m/(40β), where (65) and (68) are "
        f"measured; β also sets T_d for every other row (default β = {cfg.beta:g})"
    )
    if with_corollary:
        reason += (
            "; (59) is Corollary 3 at the same T_d, stated for sufficiently large m (its "
            "limit row over the sweep judges the trend): at one width it may exclude the rest"
        )
    name = "T_d, (59), (64), (65), (68)" if with_corollary else "T_d, (64), (65), (68)"
    return Window(
        f"Theorem 3{' with Corollary 3' if with_corollary else ''}: one β for {name} at "
        f"m = {cfg.m}, α = {cfg.alpha}",
        f"{SOURCE} Thm 3",
        beta,
        parts,
        quote="for given small β > 0",
        grid=61,
        log=True,
        resolution=1e-4,
        assumptions=f"main run: m = {cfg.m}, α = {cfg.alpha}, {cfg.target}, {cfg.data} data",
        reason=reason,
        values={
            "much_greater": cfg.much_greater,
            "largest_reading": lam,
            "largest_reading_beta": at,
        },
    ).judge()


def theorem3_windows_of(r) -> list[Check]:
    """Theorem 3's joint rows on a `checks.MainRun`: its own parts, then with Corollary 3."""
    args = (r.tau, r.o, r.cfg, r.st["T_p"], r.units.rate)
    return [
        check_theorem3_window(*args),
        check_theorem3_window(*args, with_corollary=True),
    ]


def theorem2_window_of(r) -> Check:
    """Theorem 2's joint row on a `checks.MainRun` (d = 1 on the paper's data: (45) and
    (47)'s q_max line)."""
    row = {
        "alpha": r.cfg.alpha,
        "m": r.cfg.m,
        "seed": r.cfg.seed,
        "T_d": r.st["T_d"],
        "q_max_Td": r.at("q_max", r.st["T_d"]) / r.units.lam,
        "wperp_max_Td": math.nan,
    }
    return Window(
        f"Theorem 2: one δ′ for (45) and (47) at m = {r.cfg.m}, α = {r.cfg.alpha} (main run)",
        f"{SOURCE} Thm 2",
        _delta_prime(r.cfg),
        theorem2_parts([row], r.cfg.alpha, r.cfg.m),
        quote="any given small β, δ′ > 0",
        grid=81,
        resolution=1e-4,
        assumptions=r.assumptions,
        reason="(47)'s second line (wⁱ, i ≥ 2) needs d ≥ 2: on the sweep's rows",
    ).judge()


# ---------------------------------------------------------------------------------------
# Theorem 1: the C of '≲' over (28) and (29)

#: C is searched on this (log) range: '≲' allows any C > 0, and a C beyond 10³ would make
#: both bounds hold for numbers three orders above the rates they bound.
C_RANGE = (1e-3, 1e3)


def _finite(x: float | None) -> float:
    return float(x) if x is not None and math.isfinite(x) else 0.0


def theorem1_window(checks: list[Check], cfg: Config) -> Check:
    """Theorem 1's joint row: one C (the constant of '≲', independent of m) for (28) over
    the sweep (at its largest width, as its row) and (29) on the main run, from those rows'
    own numbers — each part holds for C at or above the C it needs, so the window is
    [the larger of the two, 10³]; where the default C sits in it is said. Not applicable
    when either part was not measured (d = 1 sweep: no (28))."""
    claim = f"Theorem 1: one C (the constant of '≲') for (28) and (29) at α = {cfg.alpha}"
    src = f"{SOURCE} Thm 1"
    r29 = next((c for c in checks if c.source == f"{SOURCE} Thm 1 (29)"), None)
    r28 = next(
        (c for c in checks if c.source == f"{SOURCE} Thm 1 (28)" and "over the sweep" in c.claim),
        None,
    )
    measured = ("holds", "fails")
    missing = [
        label
        for label, r in (("(28) over the sweep", r28), ("(29)", r29))
        if r is None or r.verdict not in measured
    ]
    if missing or r28 is None or r29 is None:
        return Check.not_applicable(
            claim, src, f"not measured: {', '.join(missing)} (see those rows)"
        )
    v29, b29 = r29.values["rate"], r29.values["bound"]
    c28 = r28.values["worst_ratio_largest_m"] * r28.values["constant"]
    # the rows' error bars in units of C (0: not estimated, as `Part` reads it)
    e29 = _finite(r29.error) / b29
    e28 = _finite(r28.error)
    parts = [
        Part(
            "(28)",
            "max_{k,i≥2} |w_kⁱ(T_p)| ≤ C max{m^{-α} ln m, m^{-3}(ln m)⁶} (largest m of the sweep)",
            lambda C: C - c28,
            error=e28,
        ),
        Part(
            "(29)",
            "|R(T_p) − R(0)|/T_p ≤ C/(m^{2α₁−1} ln m) (main run)",
            lambda C: C - v29 / b29,
            error=e29,
        ),
    ]
    const = Constant("C", LESSSIM_C, C_RANGE, "the constant hidden in '≲'", "C")
    return Window(
        claim,
        src,
        const,
        parts,
        quote="≲: up to a constant independent of m",
        grid=61,
        log=True,
        resolution=1e-4,
        assumptions=f"main run m = {cfg.m}; sweep widths {list(cfg.sweep_m)} (d = {cfg.sweep_d})",
        reason="each part's margin is C minus the C it needs (from its own row); C is "
        f"searched on [{C_RANGE[0]:g}, {C_RANGE[1]:g}] (log)",
        values={"C_needed_28": c28, "C_needed_29": v29 / b29},
    ).judge()
