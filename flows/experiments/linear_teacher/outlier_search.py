"""App. J's geometry search: where does "an NAR that is not the PAR" exist for antipodal
Gaussians plus one positive outlier?

The paper (App. J) gives the family only in words: two antipodal Gaussians and one
positive outlier; the outlier's position is not stated. The search runs over the
outlier's radius and angle (and the Gaussians' std), in two stages:

1. **Prediction (reduced, cheap).** By Theorem 6.1 a flow that stays in an NAR converges
   to a perfectly clustered KKT point of min ½‖W‖² s.t. y_i N_W(x_i) ≥ 1 in that NAR, i.e.
   to the solution of the convex problem `reduced.max_margin.solve_nar` for the NAR's
   sign pattern. The bulk points keep the PAR pattern; the outlier has four patterns
   (w neurons put it on the positive side or not; u neurons on the negative side or not).
   A pattern is a *candidate limit* when its solution is consistent with it, with a strict
   margin β_pred = min over points and both types of c_i ŵ·x̂_i > `kink_cos`. A non-PAR
   candidate is where App. J's phenomenon can occur; no strict candidate at all means
   the limit must sit on a kink (sliding, β* = 0).
2. **The exact flow** (`run_outlier`) at chosen geometries: the continuous NAR margin β*
   at t1, the PAR shares and the accuracy say what the dynamics actually do.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from reduced import max_margin as mm

from .config import Config
from .data import antipodal_with_outlier

#: The outlier's four sign patterns: (c^w_out, c^u_out) relative to the PAR's (y, −y).
PATTERNS = {"PAR": (1, 1), "u flips": (1, -1), "w flips": (-1, 1), "both flip": (-1, -1)}


def outlier_point(radius: float, angle_deg: float) -> tuple[float, float]:
    th = math.radians(angle_deg)
    return (radius * math.cos(th), radius * math.sin(th))


def predict_geometry(cfg: Config, radius: float, angle_deg: float, std: float = 0.5) -> dict:
    """Stage 1 at one geometry: separability and, per outlier pattern, whether the
    clustered NAR max-margin solution is consistent with it, and its margin β_pred."""
    data = antipodal_with_outlier(
        cfg.outlier_n, 2, std=std, outlier=np.asarray(outlier_point(radius, angle_deg))
    )
    x, y = data.train.x, data.train.y
    xn = np.linalg.norm(x, axis=1)
    row: dict = {
        "radius": radius,
        "angle_deg": angle_deg,
        "std": std,
        "outlier": list(outlier_point(radius, angle_deg)),
        "separable": bool(data.separability.separable),
        "patterns": {},
    }
    if not data.separability.separable:
        row["prediction"] = "not linearly separable"
        return row
    best, best_beta = "kink", -math.inf
    for name, (fw, fu) in PATTERNS.items():
        cw, cu = y.copy(), -y.copy()
        cw[-1] *= fw
        cu[-1] *= fu
        s = mm.solve_nar(x, y, cw, cu, v=cfg.v, k=cfg.k, slope=cfg.slope)
        beta = float(min(np.min(cw * (x @ s.w_hat) / xn), np.min(cu * (x @ s.u_hat) / xn)))
        ok = bool(s.success and beta > cfg.kink_cos)
        row["patterns"][name] = {"consistent": ok, "beta_pred": beta}
        if ok and beta > best_beta:
            best, best_beta = name, beta
    row["prediction"] = best
    row["beta_pred"] = best_beta if best != "kink" else 0.0
    return row


def predict_grid(cfg: Config) -> list[dict]:
    """Stage 1 over `cfg.search_radii` × `cfg.search_angles` × `cfg.search_stds`."""
    return [
        predict_geometry(cfg, r, a, s)
        for s in cfg.search_stds
        for r in cfg.search_radii
        for a in cfg.search_angles
    ]


def choose_geometry(rows: list[dict]) -> dict | None:
    """The geometry with the largest predicted margin among the non-PAR candidates
    (deterministic: ties by the grid's order); None if the grid has none."""
    cands = [r for r in rows if r.get("prediction") not in (None, "kink", "PAR") and r["separable"]]
    cands = [r for r in cands if r["prediction"] in PATTERNS]
    if not cands:
        return None
    return max(cands, key=lambda r: r["beta_pred"])


def summarize(rows: list[dict]) -> dict:
    """Counts of the predicted outcomes over the grid."""
    out: dict = {}
    for r in rows:
        out[r["prediction"]] = out.get(r["prediction"], 0) + 1
    return out


def flow_at(
    cfg: Config,
    radius: float,
    angle_deg: float,
    obs_kwargs: dict,
    t1: float,
    obs=None,
    seed: int | None = None,
    global_error: bool = False,
):
    """Stage 2: the exact flow at one geometry (`run_outlier`; `obs`, `seed` and
    `global_error` as there), with a summary."""
    from .runs import run_outlier

    c = dataclasses.replace(cfg, outlier=outlier_point(radius, angle_deg))
    traj, data = run_outlier(c, obs_kwargs, t1=t1, obs=obs, seed=seed, global_error=global_error)
    o = traj.observables
    return (
        traj,
        data,
        {
            "radius": radius,
            "angle_deg": angle_deg,
            "nar_margin": float(o["nar_margin"][-1]),
            "par_share_w": float(o["par_share_w"][-1]),
            "par_share_u": float(o["par_share_u"][-1]),
            "accuracy": float(o["accuracy"][-1]),
            "max_angle_w": float(o["max_angle_w"][-1]),
            "max_angle_u": float(o["max_angle_u"][-1]),
            "on_kink_u": float(o["on_kink_u"][-1]),
            "on_kink_w": float(o["on_kink_w"][-1]),
        },
    )


#: The full search of `python -m flows.experiments.linear_teacher.outlier_search`.
FULL_RADII = (2.0, 3.16, 5.0, 8.0, 12.0)
FULL_ANGLES = (100.0, 115.0, 130.0, 135.0, 145.0, 155.0)


def full_search(out: str, t1: float = 1e4, flows: bool = True) -> list[dict]:
    """The full grid (`FULL_RADII` × `FULL_ANGLES`, std 0.5): the prediction everywhere
    and, if `flows`, the exact flow to `t1` at every linearly separable geometry; written
    to `out` (JSON) and returned. Minutes on 2 cores."""
    import json
    from pathlib import Path

    cfg = dataclasses.replace(Config(), search_radii=FULL_RADII, search_angles=FULL_ANGLES)
    rows = predict_grid(cfg)
    for row in rows:
        if flows and row["separable"]:
            _, _, summary = flow_at(
                cfg, row["radius"], row["angle_deg"], {"beta": 0.0, "kink_cos": cfg.kink_cos}, t1
            )
            row["flow"] = summary
            print(
                f"radius {row['radius']:g}, angle {row['angle_deg']:g}°: predicted "
                f"{row['prediction']} (β_pred {row.get('beta_pred', 0):.3g}); flow β* "
                f"{summary['nar_margin']:.3g}, PAR share w {summary['par_share_w']:.2g} / u "
                f"{summary['par_share_u']:.2g}",
                flush=True,
            )
    Path(out).write_text(json.dumps(rows, indent=1, default=float))
    return rows


if __name__ == "__main__":  # pragma: no cover - the long search, by hand
    import sys

    full_search(sys.argv[1] if len(sys.argv) > 1 else "outlier_search.json")
