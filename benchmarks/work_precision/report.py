"""The benchmark's report: headline ratios computed from the rows, the Markdown page and
the work-precision plot (error against wall time and against evaluations)."""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import numpy as np

import flows

from .cases import ATOL_FACTOR, BASELINE_LR, REF, Case

__all__ = [
    "find",
    "format_headline",
    "headline",
    "markdown",
    "ok_rows",
    "plot",
    "read_off_curve",
]


#: `flows.simulate`'s defaults (solver, rtol, atol): the "defaults" row of the headline
SIMULATE_DEFAULTS = {
    k: inspect.signature(flows.simulate).parameters[k].default for k in ("solver", "rtol", "atol")
}


def ok_rows(rows):
    return [r for r in rows if r.get("status") == "ok" and math.isfinite(r.get("err_max", np.nan))]


def find(rows, **match):
    for r in ok_rows(rows):
        if all(r["settings"].get(k) == v for k, v in match.items()):
            return r
    return None


def is_toolkit(r, variant: str | None = None) -> bool:
    if not r["family"].startswith("flows"):
        return False
    return variant is None or r["settings"].get("variant") == variant


def exact_count(r) -> bool:
    how = (r.get("extra") or {}).get("vf_evals_counted_by", "")
    return r["vf_evals"] > 0 and ("accepted steps only" not in how or not r.get("rejected_steps"))


def read_off_curve(rows: list[dict], err: float, key: str) -> float | None:
    """`key` ('wall_s' or 'vf_evals') at error `err` on the work-precision curve of `rows`
    (one method family at several tolerances): rows sorted by error, log key linearly
    interpolated in log error between the two neighbours that bracket `err`. None when
    `err` is outside the family's error range (no extrapolation)."""
    pts = sorted((r["err_max"], r[key]) for r in ok_rows(rows) if r["err_max"] > 0 and r[key] > 0)
    for (e0, x0), (e1, x1) in zip(pts, pts[1:], strict=False):
        if e0 <= err <= e1:
            if e1 == e0:
                return min(x0, x1)
            w = (math.log(err) - math.log(e0)) / (math.log(e1) - math.log(e0))
            return math.exp(math.log(x0) + w * (math.log(x1) - math.log(x0)))
    return None


def curve_vs_gd(rows: list[dict], base: dict) -> dict:
    """Per toolkit solver on GD's own field and precision (the float64 autodiff field,
    physical clock): its wall time and evaluations read off its work-precision curve at
    GD η = 1e-3's error (`read_off_curve`), and GD's over them. Evaluations only where the
    family's counts are exact (rejected steps included). A family whose curve does not
    reach across GD's error gets no ratio but is listed under its name with `outside`:
    'more accurate' or 'less accurate' (every row), its error range and its cheapest row
    (no extrapolation)."""
    variant = base["settings"].get("variant")
    fams: dict[str, list[dict]] = {}
    for r in ok_rows(rows):
        st = r["settings"]
        if is_toolkit(r, variant) and st.get("clock", "physical") == "physical":
            fams.setdefault(st["solver"], []).append(r)
    out = {}
    for solver, fam in fams.items():
        wall = read_off_curve(fam, base["err_max"], "wall_s")
        if wall is None:
            errs = [r["err_max"] for r in fam]
            cheapest = min(fam, key=lambda r: r["wall_s"])
            out[solver] = {
                "outside": "more accurate" if max(errs) < base["err_max"] else "less accurate",
                "err_range": [min(errs), max(errs)],
                "cheapest": {
                    "label": cheapest["label"],
                    "wall_s": cheapest["wall_s"],
                    "vf_evals": cheapest["vf_evals"],
                    "err_max": cheapest["err_max"],
                },
                "rows": [r["label"] for r in fam],
            }
            continue
        exact = [r for r in fam if exact_count(r)]
        evals = read_off_curve(exact, base["err_max"], "vf_evals") if exact else None
        out[solver] = {
            "wall_s": wall,
            "wall_ratio": base["wall_s"] / wall,
            "vf_evals": evals,
            "evals_ratio": base["vf_evals"] / evals if evals else None,
            "rows": [r["label"] for r in fam],
        }
    return out


def headline(rows: list[dict]) -> dict:
    """The headline ratios, computed from the rows (see `format_headline`): the exact flow
    against GD η = 1e-3 (wall time, evaluations), against scipy RK45 (autodiff and fused
    field) and torchdiffeq, and the toolkit's defaults against GD."""
    out: dict = {}
    good = ok_rows(rows)
    gd = {
        r["settings"].get("variant"): r
        for r in good
        if r["settings"].get("learning_rate") == BASELINE_LR
    }
    base = gd.get("autodiff")
    if base is None:
        return {"baseline": None}
    out["baseline"] = base["label"]
    out["curve_vs_gd"] = {"base_err": base["err_max"], "base_wall_s": base["wall_s"]}
    out["curve_vs_gd"]["solvers"] = curve_vs_gd(rows, base)
    at_most = [r for r in good if is_toolkit(r) and r["err_max"] <= base["err_max"]]
    if at_most:
        fastest = min(at_most, key=lambda r: r["wall_s"])
        out["wall_vs_gd"] = {
            "ratio": base["wall_s"] / fastest["wall_s"],
            "row": fastest["label"],
            "row_wall_s": fastest["wall_s"],
            "row_err": fastest["err_max"],
            "base_wall_s": base["wall_s"],
            "base_err": base["err_max"],
        }
        # like for like: GD on the fastest row's own field (fused / float32)
        variant = fastest["settings"].get("variant")
        twin = gd.get(variant)
        if variant != "autodiff" and twin is not None:
            out["wall_vs_gd"]["same_field"] = {
                "variant": variant,
                "gd_wall_s": twin["wall_s"],
                "gd_err": twin["err_max"],
                "ratio": twin["wall_s"] / fastest["wall_s"],
            }
    # evaluations: the standard field, and exact counts only (RKC's own count leaves out
    # the evaluations of rejected steps)
    same = [r for r in at_most if is_toolkit(r, "autodiff") and exact_count(r)]
    if same:
        fewest = min(same, key=lambda r: (r["vf_evals"], r["wall_s"]))
        out["evals_vs_gd"] = {
            "ratio": base["vf_evals"] / fewest["vf_evals"],
            "row": fewest["label"],
            "row_evals": fewest["vf_evals"],
            "row_err": fewest["err_max"],
            "base_evals": base["vf_evals"],
            "base_err": base["err_max"],
        }
    # the toolkit's defaults (`flows.simulate(problem, t1=…)`: Tsit5, its default rtol and
    # atol) on the standard field against GD, at whatever error each reaches
    mine = find(
        rows,
        solver=SIMULATE_DEFAULTS["solver"],
        rtol=SIMULATE_DEFAULTS["rtol"],
        clock="physical",
        variant="autodiff",
    )
    if mine and not math.isclose(mine["settings"]["atol"], SIMULATE_DEFAULTS["atol"]):
        mine = None
    if mine:
        out["default_vs_gd"] = {
            "row": mine["label"],
            "row_wall_s": mine["wall_s"],
            "row_err": mine["err_max"],
            "row_evals": mine["vf_evals"],
            "base_wall_s": base["wall_s"],
            "base_err": base["err_max"],
            "base_evals": base["vf_evals"],
            "wall_ratio": base["wall_s"] / mine["wall_s"],
            "err_ratio": base["err_max"] / mine["err_max"] if mine["err_max"] else None,
            "evals_ratio": base["vf_evals"] / mine["vf_evals"] if mine["vf_evals"] else None,
        }
    for key, fam, same_tableau, variant in (
        ("vs_scipy_rk45", "scipy RK45", "dopri5", "autodiff"),
        ("vs_scipy_rk45_fused", "scipy RK45 [fused]", "dopri5", "fused"),
        ("vs_torchdiffeq", "torchdiffeq dopri5", "dopri5", None),
    ):
        peers = [r for r in good if r["family"] == fam]
        if not peers:
            continue
        # the peer row at the rtol of a toolkit Tsit5 row on the same field (1e-6 first)
        mine_variant = variant or "autodiff"
        matched = [
            r
            for r in peers
            if find(rows, solver="tsit5", rtol=r["settings"]["rtol"], variant=mine_variant)
        ]
        peer = next((r for r in matched if r["settings"]["rtol"] == 1e-6), None)
        peer = peer or (matched[0] if matched else peers[0])
        rtol = peer["settings"]["rtol"]
        entry = {"peer": peer["label"], "peer_wall_s": peer["wall_s"], "peer_err": peer["err_max"]}
        for name, solver in (("default", "tsit5"), ("same_tableau", same_tableau)):
            mine = find(rows, solver=solver, rtol=rtol, clock="physical", variant=mine_variant)
            if mine:
                entry[name] = {
                    "row": mine["label"],
                    "ratio": peer["wall_s"] / mine["wall_s"],
                    "row_wall_s": mine["wall_s"],
                    "row_err": mine["err_max"],
                }

        def best_at(err, variant=variant):
            cands = [r for r in good if is_toolkit(r, variant) and r["err_max"] <= err]
            return min(cands, key=lambda r: r["wall_s"]) if cands else None

        best = best_at(peer["err_max"])
        if best:
            entry["equal_error"] = {
                "row": best["label"],
                "ratio": peer["wall_s"] / best["wall_s"],
                "row_wall_s": best["wall_s"],
                "row_err": best["err_max"],
            }
        # the same at every tolerance of the peer: fastest toolkit row (same field) whose
        # error is at most that peer row's
        entry["each_rtol"] = []
        for r in sorted(peers, key=lambda r: -r["settings"]["rtol"]):
            b = best_at(r["err_max"])
            entry["each_rtol"].append(
                {
                    "peer_rtol": r["settings"]["rtol"],
                    "peer_wall_s": r["wall_s"],
                    "peer_err": r["err_max"],
                    **(
                        {
                            "row": b["label"],
                            "row_wall_s": b["wall_s"],
                            "row_err": b["err_max"],
                            "ratio": r["wall_s"] / b["wall_s"],
                        }
                        if b
                        else {}
                    ),
                }
            )
        out[key] = entry
    return out


def _x(v: float) -> str:
    return f"{v:.3g}×"


def _faster(v: float) -> str:
    """A wall-time ratio peer/mine as words: '3.3× faster' or '2.2× slower'."""
    return f"{v:.3g}× faster" if v >= 1 else f"{1 / v:.3g}× slower"


def format_headline(h: dict) -> list[str]:
    if not h.get("baseline"):
        return ["- No gradient-descent baseline (η = 1e-3) ran: ratios not available."]
    lines = []
    every = h.get("curve_vs_gd", {}).get("solvers") or {}
    c = {k: v for k, v in every.items() if "outside" not in v}
    off = {k: v for k, v in every.items() if "outside" in v}
    if c:
        best = max(c, key=lambda k: c[k]["wall_ratio"])
        each = "; ".join(
            f"{k}: {v['wall_s']:.3g} s ({_x(v['wall_ratio'])} less)"
            + (
                f", {v['vf_evals']:.0f} evaluations ({_x(v['evals_ratio'])} fewer)"
                if v["evals_ratio"]
                else ""
            )
            for k, v in c.items()
        )
        lines.append(
            "- **Read off the work-precision curves at GD η = 1e-3's error "
            f"({h['curve_vs_gd']['base_err']:.2e}), on GD's own field and precision**: "
            f"best {best}, **{_x(c[best]['wall_ratio'])} less wall time** than GD "
            f"({h['curve_vs_gd']['base_wall_s']:.3g} s). Per solver (log–log interpolation "
            f"between the two tolerances whose errors bracket GD's): {each}."
            + (
                " Not on the curve at GD's error (no extrapolation): "
                + "; ".join(
                    f"{k}, every row {v['outside']} ({v['err_range'][1]:.2e} … "
                    f"{v['err_range'][0]:.2e}; cheapest {v['cheapest']['vf_evals']} "
                    f"evaluations, {v['cheapest']['wall_s']:.3g} s, error "
                    f"{v['cheapest']['err_max']:.2e})"
                    for k, v in off.items()
                )
                + "."
                if off
                else ""
            )
        )
    w = h.get("wall_vs_gd")
    lines.append(
        f"1. **Exact flow vs GD η = 1e-3, wall time at equal or smaller error: "
        f"{_x(w['ratio'])} less** — {w['row']}: {w['row_wall_s']:.3g} s, error "
        f"{w['row_err']:.2e}; GD: {w['base_wall_s']:.3g} s, error {w['base_err']:.2e}. "
        "(Fastest toolkit row, any variant, whose error ≤ GD's.)"
        + (
            f" Like for like, GD η = 1e-3 on the same {w['same_field']['variant']} field: "
            f"{w['same_field']['gd_wall_s']:.3g} s (error {w['same_field']['gd_err']:.2e}), "
            f"so **{_x(w['same_field']['ratio'])} less** on one field."
            if w.get("same_field")
            else ""
        )
        if w
        else "1. Exact flow vs GD η = 1e-3: no toolkit row reached GD's error."
    )
    e = h.get("evals_vs_gd")
    lines.append(
        f"2. **Vector-field evaluations at equal or smaller error, same vector field: "
        f"{_x(e['ratio'])} fewer** — {e['row']}: {e['row_evals']} evaluations, error "
        f"{e['row_err']:.2e}; GD: {e['base_evals']} (one per step), error "
        f"{e['base_err']:.2e}. (Toolkit rows with the standard float64 autodiff field "
        "and an exact evaluation count.)"
        if e
        else "2. Evaluations: no standard-field toolkit row reached GD's error."
    )
    for i, (key, name, same) in enumerate(
        (
            ("vs_scipy_rk45", "scipy RK45 (same jitted autodiff field)", "Dopri5"),
            ("vs_scipy_rk45_fused", "scipy RK45 on the fused field (same field)", "Dopri5"),
            ("vs_torchdiffeq", "torchdiffeq dopri5 (PyTorch port)", "Dopri5"),
        ),
        start=3,
    ):
        p = h.get(key)
        if not p:
            lines.append(f"{i}. vs {name}: not run (see the table).")
            continue
        parts = [f"{i}. **vs {name}**, {p['peer']} ({p['peer_wall_s']:.3g} s, error "]
        parts.append(f"{p['peer_err']:.2e}):")
        for sub, what in (
            ("default", "Tsit5 (default)"),
            ("same_tableau", same + " (same tableau)"),
        ):
            s = p.get(sub)
            if s:
                parts.append(
                    f" {what} at the same rtol **{_faster(s['ratio'])}** ({s['row_wall_s']:.3g}"
                    f" s, error {s['row_err']:.2e});"
                )
        s = p.get("equal_error")
        if s:
            parts.append(
                f" at equal or smaller error **{_faster(s['ratio'])}** ({s['row']}: "
                f"{s['row_wall_s']:.3g} s, error {s['row_err']:.2e})."
            )
        else:
            parts.append(" at equal or smaller error: no toolkit row on this field reached it.")
        each = [
            f"rtol {e['peer_rtol']:g} ({e['peer_wall_s']:.3g} s, error {e['peer_err']:.2e}): "
            + (
                f"**{_faster(e['ratio'])}** ({e['row']}: {e['row_wall_s']:.3g} s, error "
                f"{e['row_err']:.2e})"
                if "ratio" in e
                else "no toolkit row as accurate"
            )
            for e in p.get("each_rtol", [])
        ]
        if len(each) > 1:
            parts.append(
                " At each of its tolerances, the fastest toolkit row on the same field with "
                "error ≤ the peer's: " + "; ".join(each) + "."
            )
        lines.append("".join(parts))
    d = h.get("default_vs_gd")
    lines.append(
        f"6. **The toolkit's defaults vs GD η = 1e-3** ({d['row']}, the standard field): "
        f"**{_x(d['wall_ratio'])} less wall time** ({d['row_wall_s']:.3g} s against "
        f"{d['base_wall_s']:.3g} s), **"
        + (f"{_x(d['err_ratio'])} smaller error" if d["err_ratio"] else "zero error")
        + f"** ({d['row_err']:.2e} against {d['base_err']:.2e}), **"
        + (f"{_x(d['evals_ratio'])} fewer evaluations" if d["evals_ratio"] else "—")
        + f"** ({d['row_evals']} against {d['base_evals']})."
        if d
        else "6. The toolkit's defaults vs GD: no Tsit5 row at the default tolerances ran."
    )
    return lines


def _fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return format(v, spec)


def settings_text(s: dict) -> str:
    keys = ("rtol", "atol", "clock", "variant", "learning_rate", "steps", "jac")
    return ", ".join(
        f"{k}={s[k]:g}" if isinstance(s[k], float) else f"{k}={s[k]}" for k in keys if k in s
    )


def contention_warning(rows: list[dict]) -> list[str]:
    """A warning when torch with several threads was much slower per call than with one."""
    worst = 0.0
    for r in ok_rows(rows):
        per = (r.get("extra") or {}).get("torch_ms_per_eval") or {}
        if len(per) == 2:
            n = max(per, key=int)
            worst = max(worst, per[n] / per["1"])
    if worst < 2:
        return []
    return [
        "",
        f"⚠ torch thread contention: with several threads one torch evaluation took up to "
        f"{worst:.0f}× as long as with one thread (see the torch rows' notes; OpenMP barrier "
        "waits when the machine's other cores are busy). Rerun on a quiet machine or with "
        "`--torch-threads 1` before quoting ratio 4.",
    ]


def _loadavg(v) -> str:
    return "?" if not v else " / ".join(f"{x:.2f}" for x in v)


def markdown(case: Case, ref: dict, rows: list[dict], head: dict, info: dict) -> str:
    base = next((r for r in ok_rows(rows) if r["label"] == head.get("baseline")), None)
    lines = [
        f"# Work-precision: {case.title}",
        "",
        "Produced by `python benchmarks/bench_work_precision.py --case "
        f"{case.name}{' --quick' if info['quick'] else ''}`; every row measured in one "
        "process. Wall times exclude compilation and warm-up.",
        "",
        "## Headline (computed from the rows below)",
        "",
        *format_headline(head),
        *contention_warning(rows),
        "",
        "## Setup",
        "",
        f"- Problem: {json.dumps(case.config, ensure_ascii=False)}; {info['n_params']} parameters.",
        f"- Reference: {REF['solver']} rtol {REF['rtol']:g}, atol {REF['atol']:g}"
        f", {ref['clock']} clock ({ref['vf_evals']} evaluations, {ref['wall_s']:.3g} s)"
        + (
            "; spread between the reference's clocks (its own error): "
            + ", ".join(f"{k}: {v:.1e}" for k, v in ref["spread"].items())
            if ref["spread"]
            else ""
        )
        + (f"; L(t1) = {ref['loss_t1']:.3g}" if ref.get("loss_t1") is not None else "")
        + ".",
        "- Error: max |θ(t1) − θ_ref(t1)| over all parameters; relative: divided by "
        f"max |θ_ref(t1)| = {info['theta_scale']:.3g}.",
        f"- Adaptive methods use atol = {ATOL_FACTOR:g}·rtol. Same nominal tolerances do not "
        "mean the same error (diffrax, scipy and torchdiffeq have different step-size "
        "controllers; the toolkit also integrates the energy E alongside θ), hence the "
        "equal-error comparisons.",
        f"- Machine: {info['machine']['platform']}, {info['machine']['cores_available']} "
        f"core(s), JAX {info['machine']['jax_backend']}; torch threads = "
        f"{info['torch_threads']} (default: the core count JAX's CPU backend uses; "
        "`--torch-threads`; the torch rows' notes give ms per evaluation with that many "
        "threads and with 1, which exposes thread contention on a busy machine). Load "
        f"average at start {_loadavg(info['machine']['loadavg_start'])}, at end "
        f"{_loadavg(info['machine']['loadavg_end'])}; one run per row"
        + (f" (fastest of {info['repeat']})" if info["repeat"] > 1 else "")
        + ". Versions: "
        + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
        + ".",
        "- Evaluations: toolkit explicit solvers from the step count (`EVALS_PER_STEP`), "
        "others by a host-callback counter (it costs wall time: loss clock, implicit and "
        "solvers without a fixed stage count); GD: one per step; scipy: `sol.nfev` (LSODA and BDF "
        "also evaluate the dense Jacobian `njev` times, by jax.jvp in chunks, listed in the notes "
        "column); torchdiffeq: a counter in the function.",
        *[f"- {n}" for n in case.notes],
        "",
        "## Rows",
        "",
        "| method | settings | vf evals | wall (s) | compile (s) | max abs θ − θ_ref | "
        "relative | wall / GD | evals / GD | error / GD | notes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r["status"] != "ok":
            lines.append(
                f"| {r['label']} | {settings_text(r['settings'])} | — | — | — | — | — | — | — "
                f"| — | {r['status']}: {r.get('reason', '')} |"
            )
            continue
        err = r.get("err_max")
        notes = []
        ex = r.get("extra") or {}
        if ex.get("njev"):
            notes.append(f"njev={ex['njev']}, nlu={ex['nlu']}")
        if ex.get("jvp_evals"):
            notes.append(f"of which {ex['jvp_evals']} Hessian-vector products")
        if ex.get("torch_ms_per_eval"):
            notes.append(
                "ms/eval by threads: "
                + ", ".join(f"{k}: {v:.3g}" for k, v in ex["torch_ms_per_eval"].items())
            )
        if ex.get("vf_evals_counted_by") not in (None, "step count"):
            notes.append(f"evals counted by {ex['vf_evals_counted_by']}")
        if r.get("rejected_steps"):
            notes.append(f"{r['steps']} steps, {r['rejected_steps']} rejected")
        ratios = ["—"] * 3
        if base is not None:
            ratios = [
                _fmt(r["wall_s"] / base["wall_s"], ".3g"),
                _fmt(r["vf_evals"] / base["vf_evals"], ".3g"),
                _fmt(err / base["err_max"] if base["err_max"] else None, ".2e"),
            ]
        lines.append(
            f"| {r['label']} | {settings_text(r['settings'])} | {r['vf_evals']} | "
            f"{r['wall_s']:.3g} | {r['compile_s']:.2g} | {_fmt(err, '.2e')} | "
            f"{_fmt(r.get('err_rel'), '.2e')} | {' | '.join(ratios)} | {'; '.join(notes)} |"
        )
    return "\n".join(lines) + "\n"


MARKERS = "osD^v<>pP*Xh"


def plot(case: Case, rows: list[dict], path: Path) -> None:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 5.5), layout="constrained")
    axes = fig.subplots(1, 2)
    fams: dict[str, list[dict]] = {}
    for r in ok_rows(rows):
        fams.setdefault(r["family"], []).append(r)
    colors = colormaps["tab20"].colors
    for i, (fam, rs) in enumerate(fams.items()):
        err = [max(r["err_max"], 1e-17) for r in rs]
        style = dict(
            marker=MARKERS[i % len(MARKERS)],
            color=colors[(2 * i + i // 10) % 20],  # dark shades first, then light ones
            label=fam,
            linestyle=":" if not fam.startswith("flows") else "-",
            alpha=0.9,
        )
        if fam.startswith("gradient descent"):
            style.update(color="k", linestyle="--", markersize=8)
        order = np.argsort([r["wall_s"] for r in rs])
        axes[0].plot(np.array([r["wall_s"] for r in rs])[order], np.array(err)[order], **style)
        order = np.argsort([r["vf_evals"] for r in rs])
        axes[1].plot(np.array([r["vf_evals"] for r in rs])[order], np.array(err)[order], **style)
        if fam.startswith("gradient descent"):
            for r, e in zip(rs, err, strict=True):
                lr = f"η={r['settings']['learning_rate']:.0e}" + fam[len("gradient descent") :]
                for ax, xv in ((axes[0], r["wall_s"]), (axes[1], r["vf_evals"])):
                    ax.annotate(lr, (xv, e), textcoords="offset points", xytext=(6, 4), fontsize=7)
    for ax, xl in zip(
        axes, ("wall time (s, excl. compilation)", "vector-field evaluations"), strict=True
    ):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.set_ylabel("max |θ(t1) − θ_ref(t1)|")
        ax.grid(True, which="both", alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center", fontsize=7)
    fig.suptitle(f"Work-precision: {case.title}")
    fig.savefig(path, format="png", dpi=120)
