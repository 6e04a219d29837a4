"""The paper's asymptotic claims ("→", "≲", "≈ 0") measured at every width of the sweep.

The sweep of `flows check multistage` (`runs.descent_time_sweep`: Assumption 1–2 data in
`sweep_d` dimensions, widths `sweep_m`, exponents `sweep_alpha`, seeds `sweep_seeds`)
records for each run the quantities the claims are about (`row_metrics`). Here they
become checks over the whole sweep — the claims about the directions orthogonal to
E[f x] (Proposition 1, Lemma 2, Theorem 1 (28), Corollary 2, Theorem 2 (47)) need
d ≥ 2 — and `Trend`s (the seed mean ± sd against m at one α, with a fitted power law
m^p) attached to the single-run checks, so a reader sees whether a quantity converges.

Verdicts: a bound "≲ X" holds when every run of the sweep is within C·X (C =
`LESSSIM_C`); a limit "→ L" holds when the distance to L decays in m (fitted exponent
p < 0 and no increase from one width to the next) — not when one finite-m value falls
under a hand-picked slack.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from flows import Check, Trajectory, first_crossing
from flows.claims import Bound, Limit, Measured, Trend
from reduced import multistage as ms

from .config import LESSSIM_C, SOURCE, Config
from .data import Units
from .descent_checks import check_logistic, check_rate_ratio
from .main_run import MainRun, lesssim_c, window_max
from .plateau_checks import check_plateau_rate, linearization_time
from .runs import stage_times
from .secondary_checks import check_secondary_K, check_secondary_rate

__all__ = [
    "row_metrics",
    "alpha_ref",
    "series",
    "power_fit",
    "check_trends",
    "attach_trends",
    "check_critical_point_convergence",
]

_NAN = float("nan")


def row_metrics(traj: Trajectory, units: Units, cfg: Config) -> dict:
    """The quantities of one sweep run that the asymptotic claims are about, in the
    theorems' units (NaN where the run does not reach the time they are taken at)."""
    st = stage_times(traj, units, cfg.m, cfg.alpha, cfg.beta)
    r = MainRun(traj, units, cfg, st)
    lam, rate, tau, o = units.lam, units.rate, r.tau, r.o
    T_p, T_d, T_sp = st["T_p"], st["T_d"], st["T_sp"]
    T_1, _, q_thr, _ = linearization_time(r)
    out: dict = {"T_p": T_p, "T_sp": T_sp, "T_1": float(T_1)}
    keys = (
        "K_ratio_Tp a2u2_Tp cond_Tp grad_rel_Tp w2_Tp wperp_max_Tp plateau_rate "
        "wperp_l2_sup lemma2_rate wperp_l2_0 grad_rel_Td w2_Td w2_sup q_max_Td "
        "wperp_max_Td rate_ratio logistic_dev secondary_K_dev secondary_rate"
    ).split()
    out |= dict.fromkeys(keys, _NAN)
    if T_p <= tau[-1]:
        out["K_ratio_Tp"] = r.at("K", T_p) / r.at("Kp", T_p)
        out["a2u2_Tp"] = r.at("a2_over_u2", T_p)
        out["cond_Tp"] = r.at("condensation", T_p)
        out["grad_rel_Tp"] = r.at("grad_rel", T_p) / rate
        out["w2_Tp"] = r.at("w2_rel", T_p)
        out["wperp_max_Tp"] = r.at("w_perp_max", T_p) / lam
        out["plateau_rate"] = check_plateau_rate(r).values["rate"]
        # Proposition 1: sup of ‖wⁱ‖₂ over [0, min{T_p, T₁}]
        out["wperp_l2_sup"] = window_max(r, "w_perp_l2", 0.0, float(min(T_p, T_1))) / lam
        # Lemma 2 with (β, γ) = (α₁, 1): the growth rate of ‖wⁱ‖₂ while q̂_max ≤ m^{-α₁} ln m
        t_test = first_crossing(tau, o["q_max"] / lam, q_thr, below=False)
        t_test = float(tau[-1]) if not math.isfinite(t_test) else t_test
        sel = (tau > 0) & (tau <= t_test)
        if sel.any():
            grow = (o["w_perp_l2"][sel] - o["w_perp_l2"][0]) / tau[sel] / lam
            out["lemma2_rate"] = float(np.max(grow))
        out["wperp_l2_0"] = float(o["w_perp_l2"][0]) / lam
    if math.isfinite(T_d):
        out["grad_rel_Td"] = r.at("grad_rel", T_d) / rate
        out["w2_Td"] = r.at("w2_rel", T_d)
        out["w2_sup"] = window_max(r, "w2_rel", T_p, T_d)
        out["q_max_Td"] = r.at("q_max", T_d) / lam
        out["wperp_max_Td"] = r.at("w_perp_max", T_d) / lam
        out["rate_ratio"] = check_rate_ratio(r).values["ratio"]
        out["logistic_dev"] = check_logistic(r).values["max_deviation"]
        if T_sp <= tau[-1]:
            out["secondary_K_dev"] = check_secondary_K(r).values["max_K_deviation"]
            out["secondary_rate"] = check_secondary_rate(r).values["ratio"]
    return {k: float(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------
# Series and fits


def alpha_ref(cfg: Config) -> float:
    """The α the trends are drawn at: 1 if the sweep has it, else its middle value."""
    alphas = list(cfg.sweep_alpha)
    return 1.0 if 1.0 in alphas else alphas[len(alphas) // 2]


def series(
    rows: list[dict], cfg: Config, key: str | Callable[[dict], float], alpha: float
) -> tuple[list[int], list[float], list[float]]:
    """(widths, seed means, seed sds) of `key` (a row key or a function of a row) at α."""
    get = (lambda r: float(r.get(key, _NAN))) if isinstance(key, str) else key
    ms_, means, sds = [], [], []
    for m in cfg.sweep_m:
        vals = np.array([get(r) for r in rows if r["alpha"] == alpha and r["m"] == m], float)
        ms_.append(int(m))
        means.append(float(np.mean(vals)) if vals.size else _NAN)
        sds.append(float(np.std(vals)) if vals.size > 1 else 0.0)
    return ms_, means, sds


def seed_matrix(
    rows: list[dict], cfg: Config, key: str | Callable[[dict], float], alpha: float
) -> tuple[list[int], np.ndarray]:
    """(widths, values[width, seed]) of `key` at α over the sweep's seeds (NaN where a
    run is missing): the input of `flows.claims.Limit`."""
    get = (lambda r: float(r.get(key, _NAN))) if isinstance(key, str) else key
    out = np.full((len(cfg.sweep_m), len(cfg.sweep_seeds)), _NAN)
    for i, m in enumerate(cfg.sweep_m):
        for j, seed in enumerate(cfg.sweep_seeds):
            for r in rows:
                if r["alpha"] == alpha and r["m"] == m and r.get("seed", seed) == seed:
                    out[i, j] = get(r)
                    break
    return [int(m) for m in cfg.sweep_m], out


def power_fit(x, y) -> float:
    """Exponent p of a least-squares fit y ≈ c·x^p (log–log); NaN unless every y > 0 and
    there are ≥ 2 points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or not np.all(np.isfinite(y)) or not np.all(y > 0):
        return _NAN
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _trend(rows, cfg, key, y_label, *, predicted=None, note="") -> Trend | None:
    a = alpha_ref(cfg)
    x, y, sd = series(rows, cfg, key, a)
    if not all(math.isfinite(v) for v in y):
        return None
    p = power_fit(x, np.abs(y))
    fit = f"fitted |y| ∝ m^{p:.3g}" if math.isfinite(p) else "no power-law fit (sign change)"
    pred = None if predicted is None else tuple(float(predicted(m, a)) for m in x)
    return Trend(
        x_label="m",
        y_label=y_label,
        x=tuple(float(v) for v in x),
        y=tuple(y),
        y_err=tuple(sd),
        predicted=pred,
        note=f"α = {a:g}, {cfg.sweep_d}-D Assumption 1–2 data, {len(cfg.sweep_seeds)} "
        f"seed(s); {fit}" + (f"; {note}" if note else ""),
        x_log=True,
    )


# ---------------------------------------------------------------------------------------
# Checks over the sweep


def _sweep_label(cfg: Config) -> str:
    return (
        f"Assumptions 1–2 hold ({cfg.sweep_d}-D whitened data, f₂); m = {list(cfg.sweep_m)}, "
        f"α = {list(cfg.sweep_alpha)}, {len(cfg.sweep_seeds)} seed(s)"
    )


def _bound_check(
    rows: list[dict],
    cfg: Config,
    claim: str,
    source: str,
    key: str | Callable[[dict], float],
    bound: Callable[[int, float], float],
    y_label: str,
    *,
    const: float = LESSSIM_C,
    needs_d2: bool = False,
    reason: str = "",
    ceiling: Callable[[dict], float] | None = None,
) -> Check:
    """'≲ bound' over every run of the sweep: worst measured / (const · bound).

    `ceiling(row)`: the largest value the quantity can take in that run whatever the
    dynamics (None: unbounded); a bound at or above it in every run at the largest m is
    `vacuous`."""
    if needs_d2 and cfg.sweep_d < 2:
        return Check.not_applicable(
            claim, source, f"sweep_d = {cfg.sweep_d}: no directions orthogonal to E[f x]"
        )
    get = (lambda r: float(r.get(key, _NAN))) if isinstance(key, str) else key
    ratios = []
    for r in rows:
        v, b = get(r), bound(int(r["m"]), float(r["alpha"]))
        ratios.append(v / (const * b) if math.isfinite(v) else _NAN)
    if not rows or not all(math.isfinite(x) for x in ratios):
        return Check.not_applicable(
            claim, source, "a sweep run did not reach the time the claim is taken at"
        )
    worst = max(ratios)
    m_top = max(int(r["m"]) for r in rows)
    worst_top = max(x for x, r in zip(ratios, rows, strict=True) if int(r["m"]) == m_top)
    at = max(zip(ratios, rows, strict=True), key=lambda p: p[0])[1]
    # the dashed "predicted" line is the bound with the same C as the verdict
    cst = f"{const:g} × " if const != 1 else ""
    tr = _trend(
        rows,
        cfg,
        key,
        y_label,
        predicted=lambda m, a: const * bound(m, a),
        note=f"predicted: {cst}the bound (C = {const:g}, as the verdict)",
    )
    # the worst ratio to the constant-free bound at the largest m, against C
    constants = (lesssim_c(),) if const == LESSSIM_C else ()
    top = (
        max(
            (
                ceiling(r) / bound(int(r["m"]), float(r["alpha"]))
                for r in rows
                if int(r["m"]) == m_top
            ),
            default=math.inf,
        )
        if ceiling is not None
        else math.inf
    )
    c = Bound(
        claim,
        source,
        Measured(worst_top * const),
        (lambda C: C) if constants else const,
        constants=constants,
        a_priori=(-math.inf, top),
        kind="upper bound (largest m)",
        predicted=f"≤ {cst}bound in every run at the largest m",
        measured_text=f"measured/({const:g}·bound) ≤ {worst_top:.3g} at m = {m_top}; "
        f"worst {worst:.3g} (m = {at['m']}, α = {at['alpha']:g}) over {len(rows)} runs",
        assumptions=_sweep_label(cfg),
        values={"worst_ratio": worst, "worst_ratio_largest_m": worst_top, "constant": const},
        reason=(reason + "; " if reason else "")
        + ("numbers in units of the constant-free bound; " if ceiling is not None else "")
        + "the statement holds 'for sufficiently large m': judged at the sweep's largest m, "
        "the trend shows the approach",
    ).judge()
    return dataclasses.replace(c, trend=tr)


def _limit_check(
    rows: list[dict],
    cfg: Config,
    claim: str,
    source: str,
    key: str | Callable[[dict], float],
    y_label: str,
    *,
    predicted_exponent: float | None = None,
    needs_d2: bool = False,
    extra: str = "",
) -> Check:
    """'y → 0 as m → ∞' at the reference α, by the kit's limit rule (`flows.claims.Limit`:
    the fitted rate's 95 % interval over the widths × seeds)."""
    if needs_d2 and cfg.sweep_d < 2:
        return Check.not_applicable(
            claim, source, f"sweep_d = {cfg.sweep_d}: the quantity is identically 0"
        )
    a = alpha_ref(cfg)
    x, vals = seed_matrix(rows, cfg, key, a)
    c = Limit(
        claim,
        source,
        x,
        vals,
        predicted_exponent=None if predicted_exponent is None else -predicted_exponent,
        assumptions=_sweep_label(cfg),
        reason=f"at α = {a:g}" + extra,
    ).judge()
    tr = _trend(rows, cfg, key, y_label)
    return dataclasses.replace(c, trend=tr)


def check_critical_point_convergence(
    rows: list[dict], cfg: Config, main: dict | None = None
) -> Check:
    """Corollary 3 (59): ‖∇R‖_∞ ≤ β‖θ‖_∞ at T_d "for sufficiently large m". By
    construction (1 − K = β at T_d) the ratio ‖∇R‖_∞/(β‖θ‖_∞) tends to 1, so the claim is
    its excess over 1 vanishing (or turning negative) as m grows."""
    claim = "β-relative critical point at T_d: ‖∇R‖_∞/(β‖θ‖_∞) − 1 → ≤ 0 as m grows"
    src = f"{SOURCE} Cor 3 (59)"
    beta = cfg.beta
    a = alpha_ref(cfg)
    x, y, sd = series(rows, cfg, lambda r: r.get("grad_rel_Td", _NAN) / beta - 1.0, a)
    if len(x) < 2 or not all(math.isfinite(v) for v in y):
        return Check.not_applicable(claim, src, "needs ≥ 2 widths whose runs reach T_d")
    p = power_fit(x, np.abs(y))
    main_txt = ""
    values: dict = {"m": x, "excess": y, "excess_sd": sd, "alpha": a}
    if main is not None:
        main_txt = f"; main run (m = {main['m']}): {main['excess']:+.3g}"
        values["main_m"], values["main_excess"] = main["m"], main["excess"]
    _, excess = seed_matrix(rows, cfg, lambda r: r.get("grad_rel_Td", _NAN) / beta - 1.0, a)
    c = Limit(
        claim,
        src,
        x,
        np.maximum(excess, 0.0),  # '≤ β': only an excess above 1 is a distance
        assumptions=_sweep_label(cfg),
        reason="the distance is the excess above 1 (≤ 0 counts as 0); at T_d, 1 − K̂ = β and "
        "∇R = −(1 − K)(w¹, a) + O(q³), so the ratio is β·(1 + excess) with a finite-m excess "
        "from the higher-order terms" + main_txt,
    ).judge()
    c = dataclasses.replace(
        c,
        measured=", ".join(f"{v:+.3g}" for v in y) + f" at m = {x} (seed means); " + c.measured,
        values=values | c.values,
    )
    tr = Trend(
        x_label="m",
        y_label="‖∇R‖_∞/(β‖θ‖_∞) − 1 at T_d",
        x=tuple(float(v) for v in x),
        y=tuple(y),
        y_err=tuple(sd),
        predicted=tuple(0.0 for _ in x),
        note=f"α = {a:g}; fitted excess ∝ m^{p:.3g}; predicted: 0 (the limit)",
        x_log=True,
    )
    return dataclasses.replace(c, trend=tr)


def _check_lower_bound_tp(rows: list[dict], cfg: Config) -> Check:
    """Corollary 3 (60): at T_fp,α (read as T_p) ‖∇R‖_∞ ≥ (1 − C m^{-2α₁})‖θ‖_∞."""
    claim = "at T_p: ‖∇R‖_∞ ≥ (1 − C m^{-2α₁})‖θ‖_∞"
    src = f"{SOURCE} Cor 3 (60)"
    a = alpha_ref(cfg)
    a1 = ms.table1(a).alpha1
    c = _bound_check(
        rows,
        cfg,
        claim,
        src,
        lambda r: 1.0 - r.get("grad_rel_Tp", _NAN),
        lambda m, al: ms.corollary3_lower_deficit(m, al),
        "1 − ‖∇R‖_∞/‖θ‖_∞ at T_p",
        reason=f"T_fp,α is not defined in the paper; it stands for T_p in the proofs of (41) "
        f"and (58). At T_p, ∇R ≈ −(1 − K)(w¹, a), so the deficit "
        f"is ≈ K(T_p) = Θ(m^{{-(2α₁−1)}}) by Proposition 2: exponent {-(2 * a1 - 1):.3g} "
        f"against the printed {-2 * a1:.3g} at α = {a:g}",
    )
    # read as the limit claim it is, like (59): the deficit's fitted rate against the
    # printed m^{-2α₁}; the literal bound at the largest m (and its critical C) beside it
    x, deficit = seed_matrix(rows, cfg, lambda r: 1.0 - r.get("grad_rel_Tp", _NAN), a)
    lim = Limit(
        claim,
        src,
        x,
        deficit,
        predicted_exponent=-2 * a1,
        rate_bound=True,
        assumptions=c.assumptions,
        reason=f"at α = {a:g}; " + c.reason,
    ).judge()
    vals = (
        dict(c.values)
        | lim.values
        | {
            "printed_exponent": -2 * a1,
            "proposition2_exponent": -(2 * a1 - 1),
            "literal_verdict": c.verdict,
        }
    )
    return dataclasses.replace(
        lim,
        measured=lim.measured + f"; literal at the largest m: {c.measured} ({c.verdict})",
        values=vals,
        critical=c.critical,
        trend=c.trend,
    )


def check_trends(rows: list[dict], cfg: Config, main: dict | None = None) -> list[Check]:
    """The checks over the whole sweep (see the module docstring); `main`: the main run's
    m and Corollary-3 excess, shown beside the sweep's."""
    dp = cfg.delta_prime
    rows = [r for r in rows if "grad_rel_Td" in r]
    if not rows:
        return []

    def a1(al):
        return ms.table1(al).alpha1

    out = [
        _bound_check(
            rows,
            cfg,
            "‖wⁱ‖₂ ≤ C max{m^{-(2α−1)/2}, (ln m)⁵m^{-5/2}} on [0, min{T_p, T₁}], i ≥ 2",
            f"{SOURCE} Prop 1 (30)",
            "wperp_l2_sup",
            ms.proposition1_bound,
            "sup ‖wⁱ‖₂ on [0, min{T_p, T₁}]",
            needs_d2=True,
        ),
        _bound_check(
            rows,
            cfg,
            "‖wⁱ‖₂ grows at most at rate C max{(ln m)^{3γ}/m^{3β−1/2}, …} while "
            "q_max ≤ m^{-β}(ln m)^γ",
            f"{SOURCE} Lemma 2 (22)",
            "lemma2_rate",
            lambda m, al: ms.lemma2_rate_bound(m, a1(al), 1.0),
            "max (‖wⁱ(t)‖₂ − ‖wⁱ(0)‖₂)/t",
            needs_d2=True,
            reason="(β, γ) = (α₁, 1), the test time of Theorem 1",
        ),
        _bound_check(
            rows,
            cfg,
            "max_{k,i≥2} |w_kⁱ(T_p)| ≲ max{m^{-α} ln m, m^{-3}(ln m)⁶} over the sweep",
            f"{SOURCE} Thm 1 (28)",
            "wperp_max_Tp",
            ms.theorem1_noncondensed_bound,
            "max |wⁱ| at T_p",
            needs_d2=True,
        ),
        _bound_check(
            rows,
            cfg,
            "condensation at T_p: 1 − Σ(w¹)²/Σ‖w‖² ≤ C max{m^{-(2α−2α₁)}, …} over the sweep",
            f"{SOURCE} Cor 2 (43)",
            lambda r: 1.0 - r.get("cond_Tp", _NAN),
            ms.corollary2_condensation_bound,
            "1 − Σ(w¹)²/Σ‖w‖² at T_p",
            needs_d2=True,
            reason="the paper prints the ratio upside down (Σ‖w‖²/Σ(w¹)² ≥ 1 − …, true for "
            "any θ); read as Σ(w¹)²/Σ‖w‖² ≥ 1 − C·max{…}",
        ),
        _limit_check(
            rows,
            cfg,
            "condensation Σ(w¹)²/Σ‖w‖² → 1 at T_p (1 − ratio decays in m)",
            f"{SOURCE} Cor 2 (43)",
            lambda r: 1.0 - r.get("cond_Tp", _NAN),
            "1 − Σ(w¹)²/Σ‖w‖² at T_p",
            predicted_exponent=2 * alpha_ref(cfg) - 2 * a1(alpha_ref(cfg)),
            needs_d2=True,
        ),
        _bound_check(
            rows,
            cfg,
            "max_{k,i≥2} |w_kⁱ(T_d)| ≤ m^{-(α − 2(2α−1)δ′)} over the sweep",
            f"{SOURCE} Thm 2 (47)",
            "wperp_max_Td",
            lambda m, al: ms.theorem2_wperp_bound(m, al, dp),
            "max |wⁱ| at T_d",
            const=1.0,
            needs_d2=True,
            reason=f"δ′ = {dp}; no constant in the statement",
        ),
        check_critical_point_convergence(rows, cfg, main),
        _check_lower_bound_tp(rows, cfg),
        _bound_check(
            rows,
            cfg,
            "relative W₂ at T_p ≤ C m^{-(γ₁−α₁)}(ln m)³ + C max{…} over the sweep",
            f"{SOURCE} Cor 1 (42)",
            "w2_Tp",
            lambda m, al: sum(ms.corollary1_w2_terms(m, al)),
            "W₂rel at T_p",
            ceiling=_w2_ceiling_tp,
        ),
        _bound_check(
            rows,
            cfg,
            "relative W₂ at T_d ≤ m^{-(α−1/2)} + C max{…} over the sweep",
            f"{SOURCE} Cor 4 (61)",
            lambda r: r.get("w2_Td", _NAN),
            lambda m, al: ms.corollary4_w2_terms(m, al, dp)[0],
            "W₂rel at T_d",
            const=1.0,
            reason="judged against the constant-free leading term m^{-(α−1/2)} alone (the "
            "bound minus its C·max{…} part): stricter than the statement",
        ),
        _limit_check(
            rows,
            cfg,
            "relative W₂(ρ_|a|, ρ_‖w‖) → 0 uniformly on [T_p, T_d]",
            f"{SOURCE} Thm 4* (7)",
            "w2_sup",
            "sup W₂rel on [T_p, T_d]",
        ),
    ]
    return out


_BOUND_NOTE = "predicted: the bound with C = 1"


def _w2_ceiling_tp(row: dict) -> float:
    """The largest relative W₂ at T_p any distributions allow: 1 + ‖w‖/‖a‖ (triangle
    inequality through δ₀; see `checks.w2_rel_range`), with ‖w‖²/‖a‖² = 1/(Σa²/Σ(w¹)² ·
    Σ(w¹)²/Σ‖w‖²) from the run; inf (no ceiling) when the run does not record them."""
    v = 1.0 + 1.0 / math.sqrt(row.get("a2u2_Tp", _NAN) * row.get("cond_Tp", _NAN))
    return v if math.isfinite(v) else math.inf


def _w2_leading(m: int, alpha: float) -> float:
    return ms.corollary4_w2_terms(m, alpha, 0.2)[0]  # the first term has no δ′


def _dev(key: str, target: float) -> Callable[[dict], float]:
    return lambda r: abs(r.get(key, _NAN) - target)


#: Main-run checks (by a text in their claim) and the sweep quantity whose trend they get:
#: (row key or function, y label, predicted (m, α) → value or None, note).
_ATTACH: dict[str, tuple[str | Callable[[dict], float], str, Callable | None, str]] = {
    "plateau: |R(T_p)": (
        "plateau_rate",
        "|R(T_p) − R(0)|/T_p",
        ms.theorem1_loss_rate_bound,
        _BOUND_NOTE,
    ),
    "K/K′": (_dev("K_ratio_Tp", 0.5), "|K/K′ − 1/2| at T_p", None, ""),
    "Σa² / Σ(w¹)²": (_dev("a2u2_Tp", 1.0), "|Σa²/Σ(w¹)² − 1| at T_p", None, ""),
    "condensation": (
        lambda r: 1.0 - r.get("cond_Tp", _NAN),
        "1 − Σ(w¹)²/Σ‖w‖² at T_p",
        ms.corollary2_condensation_bound,
        _BOUND_NOTE,
    ),
    "max_{k,i≥2}": (
        "wperp_max_Tp",
        "max |wⁱ| at T_p",
        ms.theorem1_noncondensed_bound,
        _BOUND_NOTE,
    ),
    "logistic law": ("logistic_dev", "max |K̂ − K_logistic| on [T_p, T_d]", None, ""),
    "descent/plateau average decay rate": (
        "rate_ratio",
        "descent/plateau decay-rate ratio",
        ms.theorem2_rate_ratio_scale,
        "predicted: m^{2α₁−1}",
    ),
    "q_max(T_d)": ("q_max_Td", "q_max at T_d", None, ""),
    "|K̂ − 1| ≤ 2β": ("secondary_K_dev", "max |K̂ − 1| on [T_d, T_sp]", None, ""),
    "secondary-plateau / descent": (
        "secondary_rate",
        "secondary/descent decay-rate ratio",
        None,
        "",
    ),
    "relative W₂(ρ_|a|, ρ_‖w‖) at T_p": ("w2_Tp", "W₂rel at T_p", None, ""),
    "relative W₂(ρ_|a|, ρ_‖w‖) at T_d": (
        "w2_Td",
        "W₂rel at T_d",
        _w2_leading,
        "predicted: m^{-(α−1/2)}",
    ),
}


def attach_trends(checks: list[Check], rows: list[dict], cfg: Config) -> list[Check]:
    """The main run's checks with the sweep's trend of their quantity attached (a check
    that already has a trend keeps it)."""
    rows = [r for r in rows if "grad_rel_Td" in r]
    if not rows:
        return checks
    out = []
    for c in checks:
        tr = c.trend
        if tr is None:
            for text, (key, label, pred, note) in _ATTACH.items():
                if text in c.claim and not c.source.startswith("gradient flow"):
                    tr = _trend(
                        rows,
                        cfg,
                        key,
                        label,
                        predicted=pred,
                        note=(note + "; " if note else "") + "the sweep's runs, not the main run",
                    )
                    break
        out.append(dataclasses.replace(c, trend=tr) if tr is not c.trend else c)
    return out
