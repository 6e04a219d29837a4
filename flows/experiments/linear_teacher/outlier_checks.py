"""App. J's claim (outlier data: neurons of each type agree — an NAR — but do not all
enter the PAR), read on the exact flow over its whole trajectory, on gradient descent at
η and η/4, and over the geometry search (`outlier_search`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from flows import Check, Trajectory
from flows.claims import NOT_APPLICABLE, Existential
from flows.plugin import eta_checked

from .config import SOURCE, Config
from .trend_fits import time_trend

OUTLIER_CLAIM = "outlier data: neurons of each type agree (NAR) but do not all enter the PAR"


def outlier_verdict(o: dict, kink_cos: float) -> tuple[bool, str, dict]:
    """App. J's claim read at the last save: an NAR with a margin beyond the kink tolerance
    (β* > kink_cos), PAR share < 1, accuracy 1; on-kink pairs reported apart."""
    beta = float(o["nar_margin"][-1])
    dis = float(o["max_disagree"][-1])
    share, share_k = float(o["par_share"][-1]), float(o["par_share_kink"][-1])
    kw, ku = float(o["on_kink_w"][-1]), float(o["on_kink_u"][-1])
    acc = float(o["accuracy"][-1])
    holds = beta > kink_cos and share < 1 and acc == 1
    text = (
        f"NAR margin β* = {beta:.3g}, max disagreement {dis:.0f} (off-kink), on-kink pairs "
        f"w {kw:.0f} / u {ku:.0f}, PAR share {share:.3g} (+{share_k:.3g} but for on-kink "
        f"points), accuracy {acc:.3g}"
    )
    values = {
        "nar_margin": beta,
        "max_disagree": dis,
        "par_share": share,
        "par_share_kink": share_k,
        "on_kink_w": kw,
        "on_kink_u": ku,
        "acc": acc,
    }
    return holds, text, values


def _occurs(o: dict, kink_cos: float) -> np.ndarray:
    """App. J's state at every save: an NAR beyond the kink tolerance (β* > kink_cos), PAR
    share < 1, accuracy 1."""
    return (
        (np.asarray(o["nar_margin"]) > kink_cos)
        & (np.asarray(o["par_share"]) < 1)
        & (np.asarray(o["accuracy"]) == 1)
    )


FAMILY_CLAIM = OUTLIER_CLAIM + " — over App. J's family (geometries × seeds)"


def check_outlier_family(
    runs: list[tuple[str, Trajectory]], excluded: list[str], kink_cos: float, family: str
) -> Check:
    """App. J as the existential claim over the family it quantifies over: the exact flow
    (whole trajectories) at every separable geometry of the search grid × seeds (each seed
    draws the Gaussians and the init). `runs`: (label, trajectory); `excluded`: members
    left out and why (e.g. a non-separable sample). Verdict by `flows.claims.Existential`:
    holds (persistent) / holds (transient) / not observed, with the searched family."""
    src = f"{SOURCE} App. J"
    if not runs:
        return Check.not_applicable(
            FAMILY_CLAIM, src, "no member of the family is linearly separable: " + family
        )
    c = Existential(
        FAMILY_CLAIM,
        src,
        [np.asarray(tr.times) for _, tr in runs],
        [_occurs(tr.observables, kink_cos) for _, tr in runs],
        [label for label, _ in runs],
        family=family + (f"; left out: {'; '.join(excluded)}" if excluded else ""),
        assumptions="exact piecewise-smooth flow (Filippov sliding on kinks), small init, "
        f"on the kink: |ŵ·x̂| ≤ {kink_cos:g}",
    ).judge()
    found = c.values.get("occurrences", [])
    at_end = [f["member"] for f in found if f["at_end"]]
    where = "; ".join(
        f"{f['member']}: t ≈ {f['t_first']:.3g}–{f['t_last']:.3g}"
        + (" (to the end)" if f["at_end"] else "")
        for f in found
    )
    return dataclasses.replace(
        c,
        measured=c.measured + (f" — {where}" if where else ""),
        predicted=f"for some member, at some t: in an NAR (β* > {kink_cos:g}), PAR share < 1, "
        "accuracy 1",
        values=c.values | {"members": [label for label, _ in runs], "persistent": at_end},
    )


END_CLAIM = (
    OUTLIER_CLAIM + " — at the end of training, as Fig. 9 shows it (n_diff → 0, PAR share "
    "below 1), over App. J's family"
)


def check_outlier_family_end(
    runs: list[tuple[str, Trajectory]], excluded: list[str], kink_cos: float, family: str
) -> Check:
    """App. J as the paper shows it: Fig. 9 plots the disagreement going to zero and the
    PAR share staying below 1 *at the end of training*, and §6.3 offers it as a flow that
    does not converge to a PAR. So besides "can enter" (`check_outlier_family`), the state
    at each flow's last save: holds (persistent) when some member of the family ends in
    it, `not observed` when every member that enters it leaves it again."""
    src = f"{SOURCE} App. J, Fig. 9"
    if not runs:
        return Check.not_applicable(
            END_CLAIM, src, "no member of the family is linearly separable: " + family
        )
    occurs = [_occurs(tr.observables, kink_cos) for _, tr in runs]
    entered = [label for (label, _), occ in zip(runs, occurs, strict=True) if occ.any()]
    at_end = [occ & (np.arange(occ.size) == occ.size - 1) for occ in occurs]
    c = Existential(
        END_CLAIM,
        src,
        [np.asarray(tr.times) for _, tr in runs],
        at_end,
        [label for label, _ in runs],
        family=family + (f"; left out: {'; '.join(excluded)}" if excluded else ""),
        assumptions="exact piecewise-smooth flow (Filippov sliding on kinks), small init, "
        f"on the kink: |ŵ·x̂| ≤ {kink_cos:g}; the end of training = each flow's last save",
        reason=f"entered during training in {len(entered)} of {len(runs)} flows"
        + (" and left again in each" if entered and not any(o[-1] for o in occurs) else ""),
    ).judge()
    return dataclasses.replace(
        c,
        predicted=f"for some member, at its last save: in an NAR (β* > {kink_cos:g}), PAR "
        "share < 1, accuracy 1",
        values=c.values | {"members": [label for label, _ in runs], "entered": entered},
    )


def check_outlier(traj: Trajectory, data, kink_cos: float) -> Check:
    """App. J on the exact (Filippov) flow, as the existential claim it is ("learning can
    enter an NAR that is not a PAR"): searched over the whole trajectory — in an NAR with
    a margin beyond the kink tolerance (β* > kink_cos), PAR share < 1, accuracy 1 — and
    reported as `holds (transient)` / `holds (persistent)` / `not observed`, with when and
    for how long; the state at t1 is reported beside it."""
    src = f"{SOURCE} App. J"
    if not data.separability.separable:
        return Check.not_applicable(OUTLIER_CLAIM, src, data.separability.message)
    o = traj.observables
    _, text, values = outlier_verdict(o, kink_cos)
    sl = o.get("sliding_pairs")
    if sl is not None:
        values["sliding_pairs_end"] = float(sl[-1])
        text += f"; sliding pairs at t1: {sl[-1]:.0f}"
    c = Existential(
        OUTLIER_CLAIM,
        src,
        [np.asarray(traj.times)],
        [_occurs(o, kink_cos)],
        ["the outlier run"],
        family=f"every save time of one run ({len(traj.times)} saves on [0, {traj.times[-1]:.3g}]) "
        "at one geometry and init; the geometry family is the search row's",
        assumptions="exact piecewise-smooth flow (Filippov sliding on kinks), "
        f"on the kink: |ŵ·x̂| ≤ {kink_cos:g}",
        reason=f"at t1: {text}",
    ).judge()
    c = dataclasses.replace(
        c,
        predicted=f"at some t: in an NAR (β* > {kink_cos:g}), PAR share < 1, accuracy 1",
        values=values | c.values,
    )
    return dataclasses.replace(
        c,
        trend=time_trend(traj, "nar_margin", "NAR margin β*", "App. J: an NAR is entered (β* > 0)"),
    )


def check_outlier_gd(cfg: Config, run_gd, kink_cos: float) -> Check:
    """App. J by gradient descent (the paper's method), at η and η/4."""

    def measure(eta):
        return outlier_verdict(run_gd(eta).observables, kink_cos)

    return eta_checked(
        OUTLIER_CLAIM + " (GD)",
        f"{SOURCE} App. J",
        eta=cfg.outlier_lr,
        measure=measure,
        predicted=f"in an NAR (β* > {kink_cos:g}), PAR share < 1, accuracy 1",
        assumptions="gradient descent, the paper's stand-in for the flow",
    )


SEARCH_CLAIM = (
    "outlier data: a geometry of the App. J family where the flow enters an NAR that is not the PAR"
)


def check_outlier_search(
    rows: list[dict],
    chosen: dict | None,
    flow: dict | None,
    cfg,
    whole_run: Check | None = None,
) -> Check:
    """App. J's geometry search (`outlier_search`): the reduced prediction over the grid,
    and the exact flow at the chosen geometry (the check's outlier run). With `whole_run`
    (`check_outlier` on that run: the claim searched over its whole trajectory) the
    verdict is that existential one — the same reading as the row beside it — and the
    state at t1 is reported."""
    from .outlier_search import summarize

    src = f"{SOURCE} App. J"
    counts = summarize(rows)
    grid = (
        f"{len(rows)} geometr{'y' if len(rows) == 1 else 'ies'} (radius "
        f"{', '.join(f'{r:g}' for r in cfg.search_radii)}; "
        f"angle {', '.join(f'{a:g}' for a in cfg.search_angles)}°; std "
        f"{', '.join(f'{s:g}' for s in cfg.search_stds)}): predicted "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    values = {"grid": rows, "counts": counts}
    if chosen is None or flow is None:
        return Check.compare(
            SEARCH_CLAIM,
            src,
            holds=False,
            predicted="some geometry with a consistent non-PAR clustered NAR solution",
            measured=grid,
            values=values,
            reason="no geometry of the grid has a strict non-PAR candidate limit",
        )
    beta = flow["nar_margin"]
    holds = (
        beta > cfg.kink_cos
        and min(flow["par_share_w"], flow["par_share_u"]) < 1
        and (flow["accuracy"] == 1)
    )
    values |= {"chosen": chosen, "flow": flow}
    c = Check.compare(
        SEARCH_CLAIM,
        src,
        holds=holds,
        predicted=f"flow at the chosen geometry in an NAR (β* > {cfg.kink_cos:g}), PAR share "
        "< 1, accuracy 1",
        measured=f"{grid}; chosen: outlier {tuple(round(c, 3) for c in chosen['outlier'])} "
        f"(pattern '{chosen['prediction']}', β_pred {chosen['beta_pred']:.3g}); exact flow: "
        f"β* {beta:.3g}, PAR share w {flow['par_share_w']:.2g} / u {flow['par_share_u']:.2g}, "
        f"accuracy {flow['accuracy']:.3g}, largest angle w {np.degrees(flow['max_angle_w']):.3g}°"
        f" / u {np.degrees(flow['max_angle_u']):.3g}°",
        assumptions="the family as App. J states it (antipodal Gaussians, one positive "
        "outlier), linearly separable through the origin; prediction = Theorem 6.1's "
        "clustered KKT point in each outlier sign pattern",
        values=values,
        reason=""
        if holds
        else "the predicted clustered NAR limit exists but the flow does not reach it: "
        "same-type neurons split on the outlier (a KKT point outside every NAR)"
        if beta < -cfg.kink_cos
        else "neurons on the outlier's kink (sliding)"
        if beta <= cfg.kink_cos
        else "",
    )
    if whole_run is None or whole_run.verdict == NOT_APPLICABLE:
        return c
    return dataclasses.replace(
        c,
        verdict=whole_run.verdict,
        predicted="flow at the chosen geometry, at some t: in an NAR (β* > "
        f"{cfg.kink_cos:g}), PAR share < 1, accuracy 1",
        measured=c.measured + f"; over the whole run: {whole_run.measured}",
        reason=f"existential: searched over the whole run at the chosen geometry of the grid "
        f"({len(rows)} geometries predicted, one exact flow); state at t1: "
        + (c.reason or "in an NAR that is not the PAR"),
        kind="existential",
        values=values | {"occurrences": whole_run.values.get("occurrences", [])},
    )
