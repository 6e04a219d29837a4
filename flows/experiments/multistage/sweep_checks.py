"""The multi-stage descent-time sweep's claims: Theorem 2 (3)'s slopes of T_d against ln m
and against α (on Assumption 1–2 data), from the sweep's rows
(`runs.descent_time_sweep`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import Check
from flows.claims import MIN_SEEDS as LIMIT_MIN_SEEDS
from flows.claims import MIN_WIDTHS as LIMIT_MIN_WIDTHS
from flows.claims import Limit, Measured, Near, linear_fit

from .config import SOURCE, Config
from .main_run import tolerance

__all__ = ["check_slope_lnm", "check_slope_alpha", "check_sweep"]


def _slope(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or not np.all(np.isfinite(y)):
        return float("nan")
    return float(np.polyfit(x, y, 1)[0])


def check_slope_lnm(
    rows: list[dict], cfg: Config, alpha: float, widths: tuple[int, ...] | None = None
) -> tuple[Check, float]:
    """Theorem 2 (3), T_d / ln m → (2α−1)/2, at one α; returns the check and the slope of
    the seed means of T_d against ln m.

    T_d = (2α−1)/2·ln m + O(1) + lower-order terms, so the slope over a finite range of m
    is off by a finite-size amount. Read as the limit it is (`flows.claims.Limit`): the
    local slopes between successive widths, per seed, approach (2α−1)/2 — the distance
    |local slope − (2α−1)/2| decays in m (95 % interval of its fitted rate below 0).
    With fewer than 4 width pairs × 3 seeds (`--quick`) the global slope is compared with
    (2α−1)/2 within `slope_tol` instead, its critical tolerance shown. The literal ratio
    T_d/ln m at every width is shown beside the local slopes (not judged: its O(1)/ln m
    correction decays too slowly to be read at these widths). `widths`: the widths to
    use at this α (default `cfg.sweep_m`; an extended sweep adds larger ones)."""
    src = f"{SOURCE} Thm 2 (3)"
    ms_ = sorted(widths) if widths is not None else list(cfg.sweep_m)
    td = np.full((len(ms_), len(cfg.sweep_seeds)), np.nan)
    for i, m in enumerate(ms_):
        for j, seed in enumerate(cfg.sweep_seeds):
            for r in rows:
                if r["alpha"] == alpha and r["m"] == m and r.get("seed", seed) == seed:
                    td[i, j] = r["T_d"]
    means = [float(np.mean(td[i])) for i in range(len(ms_))]
    slope = _slope(np.log(ms_), means)
    pred = (2 * alpha - 1) / 2
    literal = [t / math.log(m) for t, m in zip(means, ms_, strict=True)]
    literal_text = (
        "literal T_d/ln m (seed means) "
        + ", ".join(f"{v:.3g}" for v in literal)
        + f" at m = {', '.join(f'{m:g}' for m in ms_)} → {pred:.4g}"
    )
    claim = f"slope of T_d vs ln m = (2α−1)/2 at α = {alpha}"
    if not math.isfinite(slope):
        return Check.not_applicable(claim, src, "T_d not reached in some sweep run"), slope
    assumptions = "Assumptions 1–2 hold (whitened data, f₂)"
    values = {"slope": slope, "predicted": pred, "T_d_means": means, "widths": ms_}
    values["literal_ratio"] = literal
    local = np.diff(td, axis=0) / np.diff(np.log(ms_))[:, None]  # (pairs, seeds)
    mid = [math.sqrt(a * b) for a, b in zip(ms_, ms_[1:], strict=False)]
    seeds = len(cfg.sweep_seeds)
    if len(mid) >= LIMIT_MIN_WIDTHS and seeds >= LIMIT_MIN_SEEDS:
        c = Limit(
            claim,
            src,
            mid,
            local,
            limit=pred,
            assumptions=assumptions,
            reason="the local slope dT_d/d ln m between successive widths (per seed), "
            "plotted at their geometric mean; the slope over all widths "
            f"{slope:.4g} ({100 * abs(slope / pred - 1):.0f}% off) is shown, not judged; "
            "rule combining the readings: the verdict is the local slopes' (T_d = "
            "(2α−1)/2·ln m + O(1), so dT_d/d ln m → (2α−1)/2 exactly when (3) holds, and the "
            "O(1) drops out); the literal ratio T_d/ln m is shown beside it, not judged (its "
            "distance to the limit is O(1)/ln m, a decay too slow to fit at these widths)",
        ).judge()
        means_local = local.mean(axis=1)
        c = dataclasses.replace(
            c,
            measured=f"local slopes {', '.join(f'{v:.3g}' for v in means_local)} (seed means) "
            f"→ {pred:.4g}; {literal_text}; " + c.measured,
            values=values | c.values,
        )
        return c, slope
    fit = _slope_ci(np.log(ms_), td)
    check = Near(
        claim,
        src,
        Measured(slope / pred, fit["half"] / pred, fit["how"], statistical=True),
        1.0,
        tolerance(cfg.slope_tol),
        predicted=f"{pred:.4g} ± {100 * cfg.slope_tol:.0f}%",
        measured_text=f"{slope:.4g} (m = {ms_}, {seeds} seed{'s' if seeds > 1 else ''}; "
        f"{fit['text']}); " + literal_text,
        assumptions=assumptions,
        values=values | {"slope_ci": fit["ci"]},
        reason=f"fewer than {LIMIT_MIN_WIDTHS} width pairs × {LIMIT_MIN_SEEDS} seeds for the "
        "limit rule: the slope over the widths, relative to (2α−1)/2, within slope_tol, "
        "judged with its 95 % confidence interval (one across the tolerance's edge is "
        "undecided)",
    ).judge()
    return check, slope


def _slope_ci(x, y) -> dict:
    """The 95 % confidence interval of the least-squares slope of y (rows: x, columns:
    seeds) against x over every run: its half-width (NaN with fewer than 3 runs), the
    interval, and how it was read."""
    fit = linear_fit(x, y)
    lo, hi = fit["ci"]
    half = (hi - lo) / 2 if math.isfinite(lo) and math.isfinite(hi) else math.nan
    how = f"95 % confidence interval of the slope over {fit['n']} runs"
    text = f"95 % CI [{lo:.3g}, {hi:.3g}]" if math.isfinite(half) else "no CI: < 3 runs"
    return {"half": half, "ci": [lo, hi], "how": how, "text": text}


def check_slope_alpha(rows: list[dict], cfg: Config) -> tuple[Check, float]:
    """Slope of T_d (seed mean) against α at the largest m; returns the check and the slope."""
    src = f"{SOURCE} Thm 2 (3)"
    m_top = max(cfg.sweep_m)
    means = [
        float(np.mean([r["T_d"] for r in rows if r["alpha"] == a and r["m"] == m_top]))
        for a in cfg.sweep_alpha
    ]
    slope = _slope(cfg.sweep_alpha, means)
    pred = math.log(m_top)
    claim = f"slope of T_d vs α = ln m at m = {m_top}"
    if not math.isfinite(slope) or len(cfg.sweep_alpha) < 2:
        return Check.not_applicable(claim, src, "needs ≥ 2 values of α with T_d reached"), slope
    top = [r for r in rows if r["m"] == m_top]
    runs = [[r["T_d"] for r in top if r["alpha"] == a] for a in cfg.sweep_alpha]
    td = np.full((len(runs), max(map(len, runs))), np.nan)  # a run not there: NaN, left out
    for i, values in enumerate(runs):
        td[i, : len(values)] = values
    fit = _slope_ci(cfg.sweep_alpha, td)
    check = Near(
        claim,
        src,
        Measured(slope / pred, fit["half"] / pred, fit["how"], statistical=True),
        1.0,
        tolerance(cfg.slope_tol),
        predicted=f"{pred:.4g} ± {100 * cfg.slope_tol:.0f}%",
        measured_text=f"{slope:.4g} (α = {list(cfg.sweep_alpha)}; {fit['text']})",
        assumptions="Assumptions 1–2 hold (whitened 1-D data, f₂)",
        values={"slope": slope, "predicted": pred, "T_d_means": means, "slope_ci": fit["ci"]},
        reason="the slope of the seed means, relative to ln m, within slope_tol, judged with "
        "its 95 % confidence interval over every run (one across the tolerance's edge is "
        "undecided)",
    ).judge()
    return check, slope


def check_sweep(
    rows: list[dict], cfg: Config, extensions: dict | None = None
) -> tuple[list[Check], dict]:
    """Slopes of T_d against ln m (per α) and against α (at the largest m).
    `extensions`: {α: `flows.claims.Extension`} for an α whose sweep was extended — its
    row uses the extended widths and says how far the extension went."""
    checks, fits = [], {}
    extensions = extensions or {}
    for alpha in cfg.sweep_alpha:
        ext = extensions.get(alpha)
        widths = None if ext is None else tuple(int(m) for m in ext.start + ext.added)
        check, fits[f"slope_lnm_alpha{alpha}"] = check_slope_lnm(rows, cfg, alpha, widths)
        if ext is not None:
            check = ext.annotate(check)
        checks.append(check)
    check, fits["slope_alpha"] = check_slope_alpha(rows, cfg)
    checks.append(check)
    return checks, fits
